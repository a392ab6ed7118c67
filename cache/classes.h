/* classes: the size classes of the block cache's slots — pure arithmetic, no
 * state, shared by cache/ (the daemon) and kernels/ (the GPU loader), so the
 * on-disk format is written down once.
 *
 * Scheme 1 (the id recorded in the store header, store.h): eight classes per
 * doubling with 64-byte steps at the bottom, as modern allocators do.  A class
 * code c (u8, stored in each index row) has the slot size
 *   c < 8:   64 * (c + 1)                        64, 128, ..., 512
 *   c >= 8:  (9 + s) << (6 + g),  g = (c - 8) >> 3, s = (c - 8) & 7
 *            576, 640, ..., 1024, 1152, ..., 2048, 2304, ...
 * Every power of two from 1 KiB is a class (c = 15 + 8 * (log2 - 10)), so a
 * block size (a power of two, 64 KiB..64 MiB) is exactly the top class of its
 * cache: codes 0..95 for 1 MiB blocks, 0..143 for 64 MiB.  A length above 512
 * wastes less than 1/8 of its slot (the next class is at most 1/8 larger).
 * The rest of the on-disk format (arena file names, rows, header) is in
 * format.h. */
#ifndef CFS_CLASSES_H
#define CFS_CLASSES_H

#include <stddef.h>
#include <stdint.h>

#define CFS_CLASS_SCHEME 1      /* the scheme above */
#define CFS_CLASS_CODES 144     /* codes 0..143: 64 B..64 MiB */
#define CFS_CLASS_BLOCK_MIN (64u << 10)
#define CFS_CLASS_BLOCK_MAX (64u << 20)

/* Slot size of code c (c < CFS_CLASS_CODES). */
static inline uint32_t cfs_class_size(unsigned c)
{
	if (c < 8)
		return 64u * (c + 1);
	return (9u + ((c - 8) & 7)) << (6 + ((c - 8) >> 3));
}

/* Code of the smallest class that holds len bytes (1 <= len <= 64 MiB).  For
 * m = len - 1 >= 512 with top bit k, the classes of (2^k, 2^(k+1)] step by
 * 2^(k-3), and m >> (k - 3) is 8..15. */
static inline unsigned cfs_class_for(uint32_t len)
{
	uint32_t m = len - 1;
	if (m < 512)
		return m >> 6;
	unsigned k = 31u - (unsigned)__builtin_clz(m);
	return 8 * (k - 9) + (m >> (k - 3));
}

/* 1 if bs is a block size the cache supports (a power of two, 64 KiB..64 MiB). */
static inline int cfs_class_block_ok(uint32_t bs)
{
	return bs >= CFS_CLASS_BLOCK_MIN && bs <= CFS_CLASS_BLOCK_MAX && !(bs & (bs - 1));
}

/* The top code of a cache with block size bs (cfs_class_block_ok): the code
 * whose size is bs. */
static inline unsigned cfs_class_top(uint32_t bs)
{
	return 15 + 8 * (31u - (unsigned)__builtin_clz(bs) - 10);
}

#endif
