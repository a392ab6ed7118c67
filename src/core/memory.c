/* memory: RAM facts and the RAM-aware cache budget (see memory.h). */
#include "memory.h"
#include "testhook.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#define TMPFS_MAGIC_ 0x01021994
#define RAMFS_MAGIC_ 0x858458f6
#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* The value of "Name:   123 kB" in meminfo text, in bytes; -EINVAL if absent. */
static int meminfo_field(const char *text, const char *name, uint64_t *out)
{
	size_t nl = strlen(name);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, name, nl) != 0 || p[nl] != ':')
			continue;
		char *end;
		errno = 0;
		unsigned long long v = strtoull(p + nl + 1, &end, 10);
		if (errno || end == p + nl + 1)
			return -EINVAL;
		while (*end == ' ' || *end == '\t')
			end++;
		/* the kernel writes kB (KiB); a bare number is bytes */
		*out = strncmp(end, "kB", 2) == 0 ? (uint64_t)v * 1024 : (uint64_t)v;
		return 0;
	}
	return -EINVAL;
}

int cfs_mem_parse_meminfo(const char *text, struct cfs_mem_sample *out)
{
	uint64_t t, a;
	if (!text || meminfo_field(text, "MemTotal", &t) || meminfo_field(text, "MemAvailable", &a) ||
	    t == 0)
		return -EINVAL;
	out->total = t;
	out->avail = a > t ? t : a;
	return 0;
}

/* avg10 of the line starting with kind ("some" or "full"); -EINVAL if absent. */
static int psi_avg10(const char *text, const char *kind, double *out)
{
	size_t kl = strlen(kind);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, kind, kl) != 0 || p[kl] != ' ')
			continue;
		const char *a = strstr(p, "avg10=");
		const char *eol = strchr(p, '\n');
		if (!a || (eol && a > eol))
			return -EINVAL;
		char *end;
		double v = strtod(a + 6, &end);
		if (end == a + 6 || v < 0 || v > 100)
			return -EINVAL;
		*out = v;
		return 0;
	}
	return -EINVAL;
}

int cfs_mem_parse_psi(const char *text, struct cfs_mem_sample *out)
{
	double some, full = 0;
	if (!text || psi_avg10(text, "some", &some))
		return -EINVAL;
	if (strstr(text, "full ") && psi_avg10(text, "full", &full))
		return -EINVAL;
	out->some10 = some;
	out->full10 = full;
	out->psi = 1;
	return 0;
}

/* Reads a small text file whole (NUL-terminated) into buf. */
static int read_text(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t n = 0;
	while (n + 1 < cap) {
		ssize_t k = read(fd, buf + n, cap - 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	buf[n] = 0;
	return 0;
}

int cfs_mem_sample(struct cfs_mem_sample *out)
{
	char buf[8192];
	const char *mi = cfs_test_env("COLABFS_MEMINFO");
	const char *ps = cfs_test_env("COLABFS_PSI");
	memset(out, 0, sizeof(*out));
	int rc = read_text(mi && *mi ? mi : "/proc/meminfo", buf, sizeof(buf));
	if (rc || (rc = cfs_mem_parse_meminfo(buf, out)))
		return rc;
	if (read_text(ps && *ps ? ps : "/proc/pressure/memory", buf, sizeof(buf)) == 0)
		(void)cfs_mem_parse_psi(buf, out); /* unreadable PSI: MemAvailable alone */
	return 0;
}

int cfs_mem_dir_in_ram(const char *dir)
{
	struct statfs f;
	if (statfs(dir, &f) < 0)
		return -errno;
	return (unsigned long)f.f_type == TMPFS_MAGIC_ || (unsigned long)f.f_type == RAMFS_MAGIC_;
}

uint64_t cfs_mem_floor(uint64_t total)
{
	uint64_t f = total / 10 > GiB ? total / 10 : GiB;
	return f > total / 2 ? total / 2 : f;
}

void cfs_mem_auto_budget(const struct cfs_mem_budget_in *in, struct cfs_mem_budget *out)
{
	uint64_t fs = (in->fs_free + in->own) / 2;
	memset(out, 0, sizeof(*out));
	if (in->in_ram && in->mem.total) {
		uint64_t share = in->mem.total / 100 * CFS_MEM_SHARE_PERCENT;
		/* the cache's own bytes are not in MemAvailable: they are ours */
		uint64_t room = in->mem.avail + in->own;
		room = room > in->floor ? room - in->floor : 0;
		out->ram_max = share < room ? share : room;
		if (out->ram_max < CFS_MEM_MIN_BUDGET)
			out->ram_max = CFS_MEM_MIN_BUDGET;
	}
	if (in->explicit_size) {
		out->budget = in->explicit_size;
		out->warn = out->ram_max && in->explicit_size > out->ram_max;
		snprintf(out->why, sizeof(out->why), "budget %llu MiB (--cache-size)",
			 (unsigned long long)(out->budget / MiB));
		return;
	}
	if (!out->ram_max || fs <= out->ram_max) {
		out->budget = fs < CFS_MEM_MIN_BUDGET ? CFS_MEM_MIN_BUDGET : fs;
		snprintf(out->why, sizeof(out->why),
			 "budget %llu MiB: half of the cache folder's free space%s",
			 (unsigned long long)(out->budget / MiB),
			 out->ram_max ? " (under the RAM limit)" : "");
		return;
	}
	out->budget = out->ram_max;
	uint64_t share = in->mem.total / 100 * CFS_MEM_SHARE_PERCENT;
	snprintf(out->why, sizeof(out->why),
		 "budget %llu MiB: the folder is in RAM, so at most %d%% of RAM (%llu MiB) and what "
		 "leaves %llu MiB free (MemAvailable %llu MiB)%s",
		 (unsigned long long)(out->budget / MiB), CFS_MEM_SHARE_PERCENT,
		 (unsigned long long)(share / MiB), (unsigned long long)(in->floor / MiB),
		 (unsigned long long)(in->mem.avail / MiB),
		 out->budget < share ? ", the latter" : "");
}
