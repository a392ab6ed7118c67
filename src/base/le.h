/* le: little-endian integers in byte buffers, the one encoding of every
 * number the cache index, the cache header and the access-count file store.
 * Header only; no alignment needed. */
#ifndef CFS_LE_H
#define CFS_LE_H

#include <stdint.h>

/* Writes the n (1..8) low bytes of v at p, least significant first. */
static inline void cfs_le_put(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* Reads an n-byte (1..8) little-endian number at p. */
static inline uint64_t cfs_le_get(const unsigned char *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

#endif
