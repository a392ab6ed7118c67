/* store_int: the store's private state, shared by store.c (reads, puts,
 * eviction, rows) and store_open.c (open, rebuild, close).  Not for other
 * modules. */
#ifndef CFS_STORE_INT_H
#define CFS_STORE_INT_H

#include <pthread.h>
#include <stdint.h>

#include "arena.h"
#include "heat.h"
#include "index.h"
#include "store.h"
#include "table.h"

#define CFS_STORE_EPOCH_SHIFT 40 /* generation = epoch << 40 | puts this open */

struct cfs_store {
	pthread_mutex_t mu;   /* table, slot bitmaps, used, counters (see store.c) */
	pthread_mutex_t wmu;  /* write flows: index commit + matching table change */
	int lockfd;           /* "store.lock", flock'd: one daemon per cache folder */
	struct cfs_arenas ar;
	struct cfs_index *ix;
	struct cfs_table tab;
	uint32_t block_size;
	uint64_t budget;
	uint64_t limit;       /* effective budget (<= budget) while memory is short; 0: none */
	int verify_always;
	int index_reset;      /* this open moved a damaged index aside */
	uint64_t used;        /* class bytes of slots in use: live, reserved, dying, leaked */
	uint64_t epoch, seq;
	struct cfs_store_stats st; /* the counters; cfs_store_stats fills in the rest */
	struct cfs_heat heat;  /* access counts per slot (heat.h), under mu */
};

/* Pins the live entry of (key, block) and moves it to the new end of the LRU;
 * NULL (counted as a miss) if there is none.  While pinned its slot is neither evicted nor
 * reused.  *verify: 1 if its crc must be checked before its bytes are used. */
struct cfs_tent *cfs_store_pin(struct cfs_store *s, const char *key, uint64_t block, int *verify);
/* Drops a pin; flags: the caller checked the crc, and/or served a hit.  The
 * slot of an entry evicted while pinned is freed here. */
#define CFS_STORE_UNPIN_VERIFIED 1u
#define CFS_STORE_UNPIN_HIT 2u
void cfs_store_unpin(struct cfs_store *s, struct cfs_tent *e, unsigned flags);

#endif
