/* Unit tests: memory facts (meminfo and PSI parsing), the RAM-aware cache
 * budget, and the memory-pressure policy on recorded samples with a fake
 * clock (no sleeps). */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "testhook.h"
#include "memory.h"
#include "memwatch.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* Recorded on a Colab runtime (12.7 GB, no swap) and on this build machine. */
static const char *colab_meminfo = "MemTotal:       13290452 kB\n"
				   "MemFree:         8802312 kB\n"
				   "MemAvailable:   11920548 kB\n"
				   "Buffers:          262232 kB\n"
				   "Cached:          3012580 kB\n"
				   "SwapTotal:             0 kB\n"
				   "Shmem:              5488 kB\n";
static const char *psi_idle = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
			      "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
static const char *psi_busy = "some avg10=23.51 avg60=9.20 avg300=2.05 total=91237711\n"
			      "full avg10=11.02 avg60=4.00 avg300=1.00 total=41237711\n";

static void parsing(void)
{
	struct cfs_mem_sample s = { 0 };
	CHECK_EQ(cfs_mem_parse_meminfo(colab_meminfo, &s), 0);
	CHECK_EQ(s.total, 13290452ull * 1024);
	CHECK_EQ(s.avail, 11920548ull * 1024);
	CHECK_EQ(cfs_mem_parse_psi(psi_idle, &s), 0);
	CHECK(s.psi && s.some10 == 0 && s.full10 == 0);
	CHECK_EQ(cfs_mem_parse_psi(psi_busy, &s), 0);
	CHECK(s.some10 > 23.50 && s.some10 < 23.52 && s.full10 > 11.01 && s.full10 < 11.03);
	/* older kernels have no "full" line for memory */
	struct cfs_mem_sample t = { 0 };
	CHECK_EQ(cfs_mem_parse_psi("some avg10=5.00 avg60=0.00 avg300=0.00 total=1\n", &t), 0);
	CHECK(t.psi && t.some10 == 5 && t.full10 == 0);
	/* what is not there, or garbled, is an error and leaves the sample alone */
	struct cfs_mem_sample u = { .total = 7 };
	CHECK_EQ(cfs_mem_parse_meminfo("MemTotal: 100 kB\n", &u), -EINVAL);
	CHECK_EQ(cfs_mem_parse_meminfo("MemAvailable: 100 kB\nMemTotal: x kB\n", &u), -EINVAL);
	CHECK_EQ(cfs_mem_parse_meminfo("MemTotal: 0 kB\nMemAvailable: 0 kB\n", &u), -EINVAL);
	CHECK_EQ(cfs_mem_parse_meminfo("", &u), -EINVAL);
	CHECK_EQ(cfs_mem_parse_meminfo(NULL, &u), -EINVAL);
	CHECK_EQ(u.total, 7);
	CHECK_EQ(cfs_mem_parse_psi("some avg10=abc\n", &u), -EINVAL);
	CHECK_EQ(cfs_mem_parse_psi("some avg10=400.0\n", &u), -EINVAL);
	CHECK_EQ(cfs_mem_parse_psi("full avg10=1.0\n", &u), -EINVAL);
	CHECK_EQ(u.psi, 0);
	/* a name that only starts like a field is not it */
	CHECK_EQ(cfs_mem_parse_meminfo("MemTotalX: 5 kB\nMemTotal: 8 kB\nMemAvailable: 9 kB\n", &u),
		 0);
	CHECK_EQ(u.total, 8192);
	CHECK_EQ(u.avail, 8192); /* never more than the total */
	/* the real files of this machine parse */
	struct cfs_mem_sample r;
	unsetenv("COLABFS_MEMINFO");
	CHECK_EQ(cfs_mem_sample(&r), 0);
	CHECK(r.total > 0 && r.avail <= r.total);
	setenv("COLABFS_MEMINFO", "/nonexistent/meminfo", 1);
	/* a test hook: honoured in a test build only (testhook.h) */
	CHECK_EQ(cfs_mem_sample(&r), CFS_TEST_HOOKS_ON ? -ENOENT : 0);
	unsetenv("COLABFS_MEMINFO");
	CHECK_EQ(cfs_mem_dir_in_ram("/dev/shm"), 1);
	CHECK_EQ(cfs_mem_dir_in_ram("/nonexistent/dir"), -ENOENT);
}

static void budget_rule(void)
{
	struct cfs_mem_budget b;
	CHECK_EQ(cfs_mem_floor(24 * GiB), 24 * GiB / 10);
	CHECK_EQ(cfs_mem_floor(8 * GiB), GiB);
	CHECK_EQ(cfs_mem_floor(1 * GiB), GiB / 2); /* never more than half of a small machine */

	/* on disk: half the free space, RAM does not matter */
	struct cfs_mem_budget_in disk = { .fs_free = 80 * GiB, .own = 0, .in_ram = 0 };
	cfs_mem_auto_budget(&disk, &b);
	CHECK_EQ(b.budget, 40 * GiB);
	CHECK_EQ(b.ram_max, 0);
	CHECK(!b.warn && strstr(b.why, "free space"));

	/* Colab: /dev/shm as large as RAM (12.7 GB), 11.4 GiB available: a
	 * quarter of RAM, not half of the tmpfs (6 GiB) */
	struct cfs_mem_sample colab;
	cfs_mem_parse_meminfo(colab_meminfo, &colab);
	struct cfs_mem_budget_in shm = { .fs_free = colab.total, .in_ram = 1, .mem = colab,
					 .floor = cfs_mem_floor(colab.total) };
	cfs_mem_auto_budget(&shm, &b);
	CHECK_EQ(b.budget, colab.total / 100 * 25);
	CHECK_EQ(b.ram_max, b.budget);
	CHECK(strstr(b.why, "25% of RAM") != NULL);

	/* the training job holds most of RAM already: what leaves the floor free */
	shm.mem.avail = 3 * GiB;
	cfs_mem_auto_budget(&shm, &b);
	CHECK_EQ(b.budget, 3 * GiB - shm.floor);
	/* the cache's own bytes are not in MemAvailable: a restart keeps them */
	shm.own = GiB;
	cfs_mem_auto_budget(&shm, &b);
	CHECK_EQ(b.budget, 4 * GiB - shm.floor);
	/* nothing left: the smallest budget, not zero */
	shm.own = 0;
	shm.mem.avail = GiB / 2;
	cfs_mem_auto_budget(&shm, &b);
	CHECK_EQ(b.budget, CFS_MEM_MIN_BUDGET);
	/* a small tmpfs: its own rule is the lower one */
	shm.mem = colab;
	shm.fs_free = 2 * GiB;
	cfs_mem_auto_budget(&shm, &b);
	CHECK_EQ(b.budget, GiB);
	CHECK(strstr(b.why, "under the RAM limit") != NULL);

	/* --cache-size is kept; above the RAM rule it is warned about */
	shm.fs_free = colab.total;
	shm.explicit_size = 8 * GiB;
	cfs_mem_auto_budget(&shm, &b);
	CHECK_EQ(b.budget, 8 * GiB);
	CHECK_EQ(b.warn, 1);
	shm.explicit_size = 1 * GiB;
	cfs_mem_auto_budget(&shm, &b);
	CHECK_EQ(b.budget, GiB);
	CHECK_EQ(b.warn, 0);
	disk.explicit_size = 500 * GiB; /* on disk never warned */
	cfs_mem_auto_budget(&disk, &b);
	CHECK_EQ(b.warn, 0);
}

static struct cfs_mem_sample at(uint64_t avail, double some)
{
	struct cfs_mem_sample s = { .total = 12 * GiB, .avail = avail, .psi = 1, .some10 = some };
	return s;
}

static void pressure(void)
{
	struct cfs_memwatch w;
	struct cfs_memwatch_opts o = { .budget = 3 * GiB, .floor = 1 * GiB,
				       .min_limit = 16 * MiB, .hold_ms = 10000 };
	struct cfs_memwatch_act a;
	cfs_memwatch_init(&w, &o);
	CHECK_EQ(w.margin, GiB / 4);

	/* plenty: nothing happens */
	struct cfs_mem_sample ok = at(6 * GiB, 0);
	cfs_memwatch_step(&w, &ok, 2 * GiB, 0, &a);
	CHECK(!a.evict && !a.pause && a.limit == 3 * GiB);

	/* the job takes memory: 768 MiB left, floor 1 GiB + margin 256 MiB:
	 * the cache (2 GiB) gives 512 MiB back at once and read-ahead stops */
	struct cfs_mem_sample low = at(768 * MiB, 0);
	cfs_memwatch_step(&w, &low, 2 * GiB, 250, &a);
	CHECK(a.evict && a.pause);
	CHECK_EQ(a.limit, 2 * GiB - 512 * MiB);
	CHECK_EQ(w.episodes, 1);
	cfs_memwatch_freed(&w, 512 * MiB, 250);
	/* the same numbers a quarter second later (the kernel's count lags, or
	 * the source is a file that never changes): the freed bytes are counted
	 * as available, so nothing more goes */
	cfs_memwatch_step(&w, &low, 1536 * MiB, 500, &a);
	CHECK(!a.evict && a.pause);
	CHECK_EQ(a.limit, 1536 * MiB);
	CHECK_EQ(w.pressured, 0);
	/* a second later the shortage is still there: real, so more goes */
	cfs_memwatch_step(&w, &low, 1536 * MiB, 1300, &a);
	CHECK(a.evict);
	CHECK_EQ(a.limit, 1024 * MiB);
	CHECK_EQ(w.episodes, 2);
	cfs_memwatch_freed(&w, 512 * MiB, 1300);
	/* memory comes back: no pressure, but read-ahead stays off and the limit
	 * stays down for the hold time */
	struct cfs_mem_sample back = at(5 * GiB, 0);
	cfs_memwatch_step(&w, &back, GiB, 2000, &a);
	CHECK(!a.evict && a.pause);
	CHECK_EQ(a.limit, GiB);
	cfs_memwatch_step(&w, &back, GiB, 11299, &a);
	CHECK(a.pause && a.limit == GiB);
	/* hold over: read-ahead back, the limit grows a tenth of the budget a second */
	cfs_memwatch_step(&w, &back, GiB, 11300, &a);
	CHECK(!a.pause);
	CHECK_EQ(a.limit, GiB + 3 * GiB / 10);
	cfs_memwatch_step(&w, &back, GiB, 11800, &a); /* not twice in a second */
	CHECK_EQ(a.limit, GiB + 3 * GiB / 10);
	for (int64_t t = 12300; t < 40000; t += 1000)
		cfs_memwatch_step(&w, &back, GiB, t, &a);
	CHECK_EQ(a.limit, 3 * GiB);
	/* time under pressure: from the first low sample to the first good one */
	CHECK_EQ(w.under_ms, 250 + 700);

	/* growth only into memory above the floor plus two margins */
	cfs_memwatch_init(&w, &o);
	cfs_memwatch_step(&w, &low, 2 * GiB, 0, &a);
	struct cfs_mem_sample tight = at(1536 * MiB + 100 * MiB, 0);
	cfs_memwatch_step(&w, &tight, 1536 * MiB, 20000, &a);
	CHECK_EQ(a.limit, 1536 * MiB + 100 * MiB);

	/* never below the smallest limit, however deep the shortage */
	cfs_memwatch_init(&w, &o);
	struct cfs_mem_sample none = at(10 * MiB, 0);
	cfs_memwatch_step(&w, &none, 200 * MiB, 0, &a);
	CHECK_EQ(a.limit, 16 * MiB);
	CHECK(a.evict);

	/* PSI: stalls while memory is tight-ish count as pressure; stalls with
	 * plenty free (another cgroup's trouble) do not */
	cfs_memwatch_init(&w, &o);
	struct cfs_mem_sample stall = at(GiB + 300 * MiB, 25);
	cfs_memwatch_step(&w, &stall, 2 * GiB, 0, &a);
	CHECK(a.evict && a.pause);
	CHECK_EQ(a.limit, 2 * GiB - GiB / 4);
	cfs_memwatch_init(&w, &o);
	struct cfs_mem_sample roomy = at(4 * GiB, 60);
	cfs_memwatch_step(&w, &roomy, 2 * GiB, 0, &a);
	CHECK(!a.evict && !a.pause && a.limit == 3 * GiB);

	/* a cache smaller than the deficit is emptied down to the smallest limit */
	cfs_memwatch_init(&w, &o);
	cfs_memwatch_step(&w, &low, 100 * MiB, 0, &a);
	CHECK_EQ(a.limit, 16 * MiB);
}

int main(void)
{
	parsing();
	budget_rule();
	pressure();
	return check_done("test_memory");
}
