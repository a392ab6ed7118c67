/* hot: selection, counts and the hot set of the pinned block cache (see hot.h). */
#include "hot.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int by_score(const void *a, const void *b)
{
	const struct cfs_hot_cand *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	if (x->gen != y->gen)
		return x->gen < y->gen ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

size_t cfs_hot_select(struct cfs_hot_cand *c, size_t n, uint64_t budget, uint64_t *bytes)
{
	size_t k = 0;
	uint64_t used = 0;
	if (n)
		qsort(c, n, sizeof(*c), by_score);
	for (size_t i = 0; i < n && c[i].score; i++) {
		if (c[i].len > budget - used)
			continue;
		used += c[i].len;
		struct cfs_hot_cand t = c[k];
		c[k++] = c[i];
		c[i] = t;
	}
	/* the chosen ones kept their order; restore it for the rest is not needed */
	if (bytes)
		*bytes = used;
	return k;
}

uint64_t cfs_hot_hash(const char *key, uint64_t block)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ULL;
	}
	h ^= block + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h ? h : 1;
}

static size_t slot_of(const uint64_t *hs, size_t cap, uint64_t h)
{
	size_t i = (size_t)(h & (cap - 1));
	while (hs[i] && hs[i] != h)
		i = (i + 1) & (cap - 1);
	return i;
}

static int counts_grow(struct cfs_hot_counts *t)
{
	size_t cap = t->cap ? t->cap * 2 : 1024;
	uint64_t *h = calloc(cap, sizeof(*h));
	uint32_t *n = calloc(cap, sizeof(*n));
	if (!h || !n) {
		free(h);
		free(n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->cap; i++) {
		if (!t->h[i])
			continue;
		size_t j = slot_of(h, cap, t->h[i]);
		h[j] = t->h[i];
		n[j] = t->n[i];
	}
	free(t->h);
	free(t->n);
	t->h = h;
	t->n = n;
	t->cap = cap;
	return 0;
}

int cfs_hot_count_add(struct cfs_hot_counts *t, uint64_t hash)
{
	if (!hash)
		return -EINVAL;
	if ((t->used + 1) * 4 > t->cap * 3) {
		int rc = counts_grow(t);
		if (rc)
			return rc;
	}
	size_t i = slot_of(t->h, t->cap, hash);
	if (!t->h[i]) {
		t->h[i] = hash;
		t->used++;
	}
	if (t->n[i] != UINT32_MAX)
		t->n[i]++;
	return 0;
}

uint32_t cfs_hot_count_get(const struct cfs_hot_counts *t, uint64_t hash)
{
	if (!t->cap || !hash)
		return 0;
	size_t i = slot_of(t->h, t->cap, hash);
	return t->h[i] ? t->n[i] : 0;
}

void cfs_hot_counts_free(struct cfs_hot_counts *t)
{
	free(t->h);
	free(t->n);
	memset(t, 0, sizeof(*t));
}

int cfs_hot_set_init(struct cfs_hot_set *s, size_t n)
{
	size_t cap = 16;
	while (cap < n * 2)
		cap *= 2;
	s->e = calloc(cap, sizeof(*s->e));
	s->cap = s->e ? cap : 0;
	s->n = 0;
	return s->e ? 0 : -ENOMEM;
}

static size_t gen_slot(const struct cfs_hot_set *s, uint64_t gen)
{
	uint64_t h = gen * 0x9e3779b97f4a7c15ULL;
	size_t i = (size_t)(h >> 20) & (s->cap - 1);
	while (s->e[i].gen && s->e[i].gen != gen)
		i = (i + 1) & (s->cap - 1);
	return i;
}

int cfs_hot_set_add(struct cfs_hot_set *s, const struct cfs_hot_ent *e)
{
	if (!e->gen || !s->cap || (s->n + 1) * 2 > s->cap)
		return -EINVAL;
	size_t i = gen_slot(s, e->gen);
	if (!s->e[i].gen)
		s->n++;
	s->e[i] = *e;
	return 0;
}

const struct cfs_hot_ent *cfs_hot_set_find(const struct cfs_hot_set *s, uint64_t gen,
					   uint64_t slot, uint8_t cls, uint32_t len, uint32_t crc)
{
	if (!s->cap || !gen)
		return NULL;
	const struct cfs_hot_ent *e = &s->e[gen_slot(s, gen)];
	if (e->gen != gen || e->slot != slot || e->cls != cls || e->len != len || e->crc != crc)
		return NULL;
	return e;
}

void cfs_hot_set_free(struct cfs_hot_set *s)
{
	free(s->e);
	memset(s, 0, sizeof(*s));
}
