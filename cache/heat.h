/* heat: per-slot access counts of the block cache, in a file the GPU loader
 * can read ("heat.dat" in the cache folder, 0600).
 *
 * Design.  The daemon counts every cache hit of a block (cfs_store_read that
 * serves bytes) so another process (the GPU loader, kernels/stage.h) can pick
 * the most used blocks to keep in pinned memory.  A count is a u32 per arena
 * slot in a shared memory mapping of heat.dat: a hit adds 1 with a relaxed
 * load and store (the store's lock is already held on that path, so daemon
 * threads never race; readers in other processes only need a value that is
 * not torn, which an aligned u32 store gives).  That is the cheapest durable-
 * enough design: no index transaction, no batching thread, no flush; the
 * cost on the hit path is one store to a page that stays in the CPU cache.
 * Counts are keyed by slot, not by block, because the loader already knows
 * each block's slot from its index row (log2 + slot); a slot's count is reset
 * when its block goes (eviction, crc drop) so a new block never inherits it.
 * Counts are a hint, never trusted for bytes: a stale count only makes a poor
 * choice of hot block, which the loader still validates by generation and
 * crc.  The file is recreated (zeros) at every store open, written under a
 * temporary name and renamed into place, so a reader sees either the old or
 * the new file whole.  Counts saturate at UINT32_MAX.
 *
 * Layout (little-endian): 256-byte header: "CFSHEAT1", u32 version (1),
 * u32 nclasses, u64 store epoch, then per class (at 24 + 24 * i): u32 log2,
 * u32 reserved, u64 nslots (capacity), u64 offset of its u32 array.  Each
 * class has room for max(slots at open, min(budget / class size, 2^20)) +
 * 1024 slots (at most about 4 MiB a class); a slot past that is simply not
 * counted.  The file is allocated in full when it is made (posix_fallocate):
 * a count stored into a hole of a full tmpfs would kill the daemon with
 * SIGBUS, and the cache is expected to run its file system full.
 *
 * Failure to create the file is not an error for the store: counting is then
 * off (cfs_heat_on() is 0).  Thread rules: the caller's lock covers hit,
 * reset and get (the store's mu); the parse function is pure.  Returns 0 or
 * -errno. */
#ifndef CFS_HEAT_H
#define CFS_HEAT_H

#include <stddef.h>
#include <stdint.h>

#define CFS_HEAT_FILE "heat.dat"
#define CFS_HEAT_HEADER 256
#define CFS_HEAT_MAX_CLASSES 9
#define CFS_HEAT_SLACK 1024
#define CFS_HEAT_MAX_ROOM (1u << 20) /* slots per class beyond those at open */

struct cfs_heat_class {
	uint32_t log2;
	uint64_t nslots;
	uint32_t *c;       /* nslots counters */
};

struct cfs_heat {
	unsigned char *map;  /* NULL: counting is off */
	size_t len;
	unsigned n;
	uint64_t epoch;
	struct cfs_heat_class cls[CFS_HEAT_MAX_CLASSES];
};

/* Creates dir/heat.dat for n classes (log2 sizes and the slots their arenas
 * hold now) and maps it read-write.  budget sizes the room per class. */
int cfs_heat_create(struct cfs_heat *h, const char *dir, unsigned n, const uint8_t *log2,
		    const uint64_t *nslots, uint64_t budget, uint64_t epoch);
void cfs_heat_close(struct cfs_heat *h); /* safe on a zeroed struct and twice */

static inline int cfs_heat_on(const struct cfs_heat *h)
{
	return h->map != NULL;
}

/* Adds one access to (class index, slot); returns 1 when the count went from
 * 0 to 1 (a block newly counted). */
static inline int cfs_heat_hit(struct cfs_heat *h, unsigned cls, uint64_t slot)
{
	if (!h->map || cls >= h->n || slot >= h->cls[cls].nslots)
		return 0;
	uint32_t *p = &h->cls[cls].c[slot];
	uint32_t v = __atomic_load_n(p, __ATOMIC_RELAXED);
	if (v != UINT32_MAX)
		__atomic_store_n(p, v + 1, __ATOMIC_RELAXED);
	return v == 0;
}

/* Zeroes the count of a slot whose block is gone; returns 1 if it was not 0. */
static inline int cfs_heat_reset(struct cfs_heat *h, unsigned cls, uint64_t slot)
{
	if (!h->map || cls >= h->n || slot >= h->cls[cls].nslots)
		return 0;
	uint32_t *p = &h->cls[cls].c[slot];
	uint32_t v = __atomic_load_n(p, __ATOMIC_RELAXED);
	if (v)
		__atomic_store_n(p, 0, __ATOMIC_RELAXED);
	return v != 0;
}

static inline uint32_t cfs_heat_get(const struct cfs_heat *h, unsigned cls, uint64_t slot)
{
	if (!h->map || cls >= h->n || slot >= h->cls[cls].nslots)
		return 0;
	return __atomic_load_n(&h->cls[cls].c[slot], __ATOMIC_RELAXED);
}

/* Reads a heat.dat mapping (len bytes, any process): fills h's classes with
 * pointers into map (h->map = map).  -EPROTO when it is not a valid file. */
int cfs_heat_parse(const void *map, size_t len, struct cfs_heat *h);
/* The count of the slot of class log2 (by size, not index), 0 when unknown. */
uint32_t cfs_heat_count(const struct cfs_heat *h, unsigned log2, uint64_t slot);

#endif
