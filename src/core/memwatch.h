/* memwatch: the memory-pressure policy of a cache in RAM (pure; the thread
 * that feeds it is in vfs_mem.c).
 *
 * Policy.  Samples of MemAvailable and PSI (memory.h) arrive a few times a
 * second.  The machine is under pressure while MemAvailable is below the
 * floor, or while PSI "some" avg10 is at least CFS_MEMWATCH_PSI_SOME (the
 * kernel stalls tasks to reclaim) and MemAvailable is below the floor plus
 * two margins (the margin is a quarter of the floor).  Under pressure:
 *  1. read-ahead stops at once (the caller pauses sequential, folder and
 *     dataset read-ahead; readers' own misses go on);
 *  2. the effective budget shrinks to what the cache holds minus the
 *     deficit (floor + margin - MemAvailable), never below 16 blocks, and
 *     the caller evicts least recently used blocks down to it (blocks being
 *     read and blocks of open files are not taken: store.h).  Bytes the
 *     policy freed in the last second are counted as available already,
 *     so one shortage is not evicted twice while the kernel's numbers catch
 *     up (and a source that never changes, a test's file, shrinks the cache
 *     once a second, not four times).
 * When the pressure has been gone for hold_ms (default 30 s), read-ahead
 * resumes and the effective budget grows back by a tenth of the budget per
 * second, but only into memory above the floor plus two margins, so growth
 * never causes the next episode by itself.  Counters: time under pressure,
 * episodes, bytes and blocks evicted for pressure.
 *
 * Not thread-safe: one watcher thread owns a state. */
#ifndef CFS_MEMWATCH_H
#define CFS_MEMWATCH_H

#include <stdint.h>

#include "memory.h"

#define CFS_MEMWATCH_TICK_MS 250
#define CFS_MEMWATCH_HOLD_MS 30000
#define CFS_MEMWATCH_PSI_SOME 10.0

struct cfs_memwatch_opts {
	uint64_t budget;      /* the configured budget */
	uint64_t floor;       /* free memory to keep (memory.h cfs_mem_floor) */
	uint64_t min_limit;   /* the effective budget's lowest value (16 blocks) */
	int64_t hold_ms;      /* 0: CFS_MEMWATCH_HOLD_MS */
};

struct cfs_memwatch {
	struct cfs_memwatch_opts o;
	uint64_t margin;
	uint64_t limit;         /* the effective budget */
	int pressured, paused;  /* now under pressure; read-ahead stopped */
	int64_t last_pressure_ms, last_grow_ms, last_ms, freed_ms;
	uint64_t freed_recent;  /* bytes evicted at freed_ms */
	uint64_t under_ms, episodes;
	uint64_t avail;         /* the last sample's MemAvailable */
};

/* What the caller does after a step. */
struct cfs_memwatch_act {
	uint64_t limit;    /* set the store's effective budget to this */
	int evict;         /* 1: evict down to limit now */
	int pause;         /* read-ahead off (1) or on (0) */
};

void cfs_memwatch_init(struct cfs_memwatch *w, const struct cfs_memwatch_opts *o);
/* One sample at now_ms with the cache holding used bytes. */
void cfs_memwatch_step(struct cfs_memwatch *w, const struct cfs_mem_sample *s, uint64_t used,
		       int64_t now_ms, struct cfs_memwatch_act *act);
/* The caller evicted freed bytes for the last step's act. */
void cfs_memwatch_freed(struct cfs_memwatch *w, uint64_t freed, int64_t now_ms);

#endif
