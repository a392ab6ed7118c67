/* memory: what RAM the machine has, and how much of it a cache on tmpfs may
 * take.
 *
 * Why.  A cache folder on tmpfs (the default, /dev/shm) or ramfs holds its
 * blocks in RAM that the kernel cannot reclaim on a machine without swap
 * (Colab has none): those pages count in no process's RSS and are not in
 * MemAvailable, so when the training job needs memory the OOM killer takes
 * the job, not the cache.  A cache on such a folder therefore gets a budget
 * that respects memory, not only the folder's free space.
 *
 * The automatic budget (cfs_mem_auto_budget, pure): the folder's rule (half
 * of its free space plus what the cache already holds there) and, when the
 * folder is in RAM, also at most CFS_MEM_SHARE_PERCENT of MemTotal and at
 * most what MemAvailable leaves above the free-memory floor, counting the
 * cache's own bytes as its own (they are not in MemAvailable); never below
 * 64 MiB.  An explicit --cache-size is kept, with a warning when it is above
 * that RAM rule.  The floor (cfs_mem_floor) is the larger of 1 GiB and 10% of
 * MemTotal, but at most half of MemTotal; --min-free-memory sets it.
 *
 * Sources: /proc/meminfo (MemTotal, MemAvailable) and /proc/pressure/memory
 * (PSI; absent on older kernels or when disabled).  The test hooks
 * COLABFS_MEMINFO and COLABFS_PSI name files in the same formats to read
 * instead.  Parsing is pure; cfs_mem_sample reads the files.
 *
 * Returns 0 or -errno (-EINVAL: text without the needed fields). */
#ifndef CFS_MEMORY_H
#define CFS_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#define CFS_MEM_SHARE_PERCENT 25        /* of MemTotal, for a cache in RAM */
#define CFS_MEM_MIN_BUDGET (64ull << 20)

struct cfs_mem_sample {
	uint64_t total, avail;  /* bytes: MemTotal, MemAvailable */
	int psi;                /* 1 when the PSI fields are valid */
	double some10, full10;  /* PSI avg10 percentages */
};

/* Parses /proc/meminfo text (needs MemTotal and MemAvailable). */
int cfs_mem_parse_meminfo(const char *text, struct cfs_mem_sample *out);
/* Parses /proc/pressure/memory text ("some avg10=..." and "full avg10=..."
 * lines; "full" may be missing) into out->some10/full10 and sets out->psi. */
int cfs_mem_parse_psi(const char *text, struct cfs_mem_sample *out);
/* Reads meminfo (and PSI, when present) from the files above or the test
 * hooks.  A missing PSI file is not an error (out->psi = 0). */
int cfs_mem_sample(struct cfs_mem_sample *out);

/* 1 if dir is on tmpfs or ramfs (its blocks are RAM), 0 if not, -errno. */
int cfs_mem_dir_in_ram(const char *dir);

/* The default floor of free memory for a machine with total bytes of RAM. */
uint64_t cfs_mem_floor(uint64_t total);

struct cfs_mem_budget_in {
	uint64_t fs_free;      /* the cache folder's file system: bytes free */
	uint64_t own;          /* bytes the cache already holds there */
	int in_ram;            /* the folder is tmpfs/ramfs */
	struct cfs_mem_sample mem;
	uint64_t floor;        /* free memory to leave to others */
	uint64_t explicit_size; /* --cache-size, 0 when automatic */
};

struct cfs_mem_budget {
	uint64_t budget;
	uint64_t ram_max;      /* the RAM rule's bound (0 when the folder is not in RAM) */
	int warn;              /* an explicit size above the RAM rule */
	char why[256];         /* one line for the log: the budget and what set it */
};

void cfs_mem_auto_budget(const struct cfs_mem_budget_in *in, struct cfs_mem_budget *out);

#endif
