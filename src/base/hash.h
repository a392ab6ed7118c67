/* hash: FNV-1a (64-bit) of a string, the one hash of names and keys: the
 * inode and store tables, the single-flight buckets, and the default cache
 * folder's name (which the GPU loader must compute the same way).  Header
 * only; pure. */
#ifndef CFS_HASH_H
#define CFS_HASH_H

#include <stdint.h>

static inline uint64_t cfs_hash_fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ULL;
	}
	return h;
}

#endif
