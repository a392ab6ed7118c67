/* store_int: the store's private state, shared by store.c (reads, puts,
 * eviction, rows) and store_open.c (open, rebuild, close).  Not for other
 * modules. */
#ifndef CFS_STORE_INT_H
#define CFS_STORE_INT_H

#include <pthread.h>
#include <stdint.h>

#include "arena.h"
#include "index.h"
#include "store.h"
#include "table.h"

#define CFS_STORE_EPOCH_SHIFT 40 /* generation = epoch << 40 | puts this open */

struct cfs_store {
	pthread_mutex_t mu;   /* table, slot bitmaps, used, counters (see store.c) */
	pthread_mutex_t wmu;  /* write flows: index commit + matching table change */
	struct cfs_arenas ar;
	struct cfs_index *ix;
	struct cfs_table tab;
	uint32_t block_size;
	uint64_t budget;
	int verify_always;
	uint64_t used;        /* class bytes of slots in use: live, reserved, dying, leaked */
	uint64_t epoch, seq;
	struct cfs_store_stats st; /* the counters; cfs_store_stats fills in the rest */
};

#endif
