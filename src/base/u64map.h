/* u64map: a map from non-zero 64-bit keys (inode numbers) to 32-bit values
 * (indexes into an array), for sets that only grow and are freed whole: the
 * files of a dataset scan, the files of an order hint.  Open addressing,
 * linear probing, at most half full.  Header only; not thread-safe (the
 * owner's lock).  cfs_u64map_put returns 0 or -ENOMEM (the map unchanged);
 * a zeroed struct is an empty map; _free(NULL map's fields) is safe. */
#ifndef CFS_U64MAP_H
#define CFS_U64MAP_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

struct cfs_u64map {
	uint64_t *keys; /* 0: empty */
	uint32_t *vals;
	size_t cap, n;  /* cap: a power of two, or 0 */
};

static inline size_t cfs_u64map_slot(uint64_t k, size_t cap)
{
	k ^= k >> 30;
	k *= 0xbf58476d1ce4e5b9ULL;
	k ^= k >> 27;
	k *= 0x94d049bb133111ebULL;
	k ^= k >> 31;
	return (size_t)k & (cap - 1);
}

/* 1 with *v set when k is in m, else 0. */
static inline int cfs_u64map_get(const struct cfs_u64map *m, uint64_t k, uint32_t *v)
{
	if (!m->cap || !k)
		return 0;
	for (size_t i = cfs_u64map_slot(k, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == k) {
			if (v)
				*v = m->vals[i];
			return 1;
		}
		if (!m->keys[i])
			return 0;
	}
}

static inline void cfs_u64map_place(uint64_t *keys, uint32_t *vals, size_t cap, uint64_t k,
				    uint32_t v)
{
	size_t i = cfs_u64map_slot(k, cap);
	while (keys[i] && keys[i] != k)
		i = (i + 1) & (cap - 1);
	keys[i] = k;
	vals[i] = v;
}

/* Sets k (non-zero) to v. */
static inline int cfs_u64map_put(struct cfs_u64map *m, uint64_t k, uint32_t v)
{
	if (!k)
		return -EINVAL;
	if ((m->n + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		uint64_t *keys = calloc(cap, sizeof(*keys));
		uint32_t *vals = malloc(cap * sizeof(*vals));
		if (!keys || !vals) {
			free(keys);
			free(vals);
			return -ENOMEM;
		}
		for (size_t i = 0; i < m->cap; i++)
			if (m->keys[i])
				cfs_u64map_place(keys, vals, cap, m->keys[i], m->vals[i]);
		free(m->keys);
		free(m->vals);
		m->keys = keys;
		m->vals = vals;
		m->cap = cap;
	}
	if (!cfs_u64map_get(m, k, NULL))
		m->n++;
	cfs_u64map_place(m->keys, m->vals, m->cap, k, v);
	return 0;
}

static inline void cfs_u64map_free(struct cfs_u64map *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = NULL;
	m->vals = NULL;
	m->cap = m->n = 0;
}

#endif
