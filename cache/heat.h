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
 * each block's slot from its index row (class code + slot); a slot's count is
 * reset when its block goes (eviction, crc drop) so a new block never
 * inherits it.  Counts are a hint, never trusted for bytes: a stale count only
 * makes a poor choice of hot block, which the loader still validates by
 * generation and crc.  The file is recreated (zeros) at every store open,
 * written under a temporary name and renamed into place, so a reader sees
 * either the old or the new file whole.  Counts saturate at UINT32_MAX.
 *
 * Room.  There are up to 144 classes (classes.h), so the file cannot give
 * each the slots the whole budget would make (budget / 64 B for the smallest).
 * The total is T = budget / 4 KiB counters, at least CFS_HEAT_MIN_TOTAL and at
 * most CFS_HEAT_MAX_TOTAL (2 Mi counters, 8 MiB), shared by water-filling:
 * each class needs budget / its size slots (the most the budget can hold at
 * once, and the lowest free slot is always taken, so slot numbers stay below
 * that); from the largest class down, each gets its need or an equal share of
 * what is left, whichever is smaller.  So large classes are counted in full
 * and small ones up to the share (12 GiB, 1 MiB blocks: ~21,800 slots a
 * class, every 1 MiB block).  A class also gets room for every slot below its
 * highest slot in use at open, so a block present at open is always counted.
 * A slot past its class's room is simply not counted.  The file is allocated
 * in full when it is made (posix_fallocate): a count stored into a hole of a
 * full tmpfs would kill the daemon with SIGBUS, and the cache is expected to
 * run its file system full.
 *
 * Layout (little-endian): 32-byte header: "CFSHEAT1", u32 version (2), u32 n
 * (class codes 0..n-1), u64 store epoch, u32 class scheme (classes.h), u32
 * reserved; then per code c (at 32 + 16 * c): u64 nslots (room), u64 offset
 * of its u32 array (64-byte aligned, after the table).  Version 1 (the
 * power-of-4 classes, by log2) is refused by the parser.
 *
 * Failure to create the file is not an error for the store: counting is then
 * off (cfs_heat_on() is 0).  Thread rules: the caller's lock covers hit,
 * reset and get (the store's mu); the parse and room functions are pure.
 * Returns 0 or -errno. */
#ifndef CFS_HEAT_H
#define CFS_HEAT_H

#include <stddef.h>
#include <stdint.h>

#include "classes.h"

#define CFS_HEAT_FILE "heat.dat"
#define CFS_HEAT_HEADER 32 /* fixed part; the class table follows */
#define CFS_HEAT_VERSION 2
#define CFS_HEAT_MIN_TOTAL (16u << 10)  /* counters, whatever the budget */
#define CFS_HEAT_MAX_TOTAL (2u << 20)   /* counters shared by the classes (8 MiB) */

struct cfs_heat_class {
	uint64_t nslots;
	uint32_t *c;       /* nslots counters */
};

struct cfs_heat {
	unsigned char *map;  /* NULL: counting is off */
	size_t len;
	unsigned n;          /* class codes 0..n-1 */
	uint64_t epoch;
	struct cfs_heat_class cls[CFS_CLASS_CODES]; /* by class code */
};

/* The room rule above: fills room[0..n) for class codes 0..n-1 (n <=
 * CFS_CLASS_CODES), high[c] being 1 + the highest slot of code c in use. */
void cfs_heat_room(unsigned n, const uint64_t *high, uint64_t budget, uint64_t *room);

/* Creates dir/heat.dat for class codes 0..n-1 (high: as for cfs_heat_room)
 * and maps it read-write. */
int cfs_heat_create(struct cfs_heat *h, const char *dir, unsigned n, const uint64_t *high,
		    uint64_t budget, uint64_t epoch);
void cfs_heat_close(struct cfs_heat *h); /* safe on a zeroed struct and twice */

static inline int cfs_heat_on(const struct cfs_heat *h)
{
	return h->map != NULL;
}

/* Adds one access to (class code, slot); returns 1 when the count went from
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
 * pointers into map (h->map = map).  -EPROTO when it is not a valid file (of
 * this version and class scheme).  Then cfs_heat_get(h, code, slot) reads a
 * count, 0 for a slot or code it has no room for. */
int cfs_heat_parse(const void *map, size_t len, struct cfs_heat *h);

#endif
