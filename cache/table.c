/* table: in-memory keys, blocks and LRU of the store (see table.h). */
#include "table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "hash.h"

#define INITIAL_BUCKETS 1024

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static uint64_t block_hash(const struct cfs_tkey *k, uint64_t block)
{
	return mix64(k->hash ^ (block * 0x9e3779b97f4a7c15ULL));
}

int cfs_table_init(struct cfs_table *t)
{
	memset(t, 0, sizeof(*t));
	t->lru.lnext = t->lru.lprev = &t->lru;
	t->eb = calloc(INITIAL_BUCKETS, sizeof(*t->eb));
	t->kb = calloc(INITIAL_BUCKETS, sizeof(*t->kb));
	if (!t->eb || !t->kb) {
		cfs_table_cleanup(t);
		return -ENOMEM;
	}
	t->emask = t->kmask = INITIAL_BUCKETS - 1;
	return 0;
}

void cfs_table_cleanup(struct cfs_table *t)
{
	if (t->eb)
		for (size_t b = 0; b <= t->emask; b++)
			for (struct cfs_tent *e = t->eb[b], *n; e; e = n) {
				n = e->hnext;
				free(e);
			}
	if (t->kb)
		for (size_t b = 0; b <= t->kmask; b++)
			for (struct cfs_tkey *k = t->kb[b], *n; k; k = n) {
				n = k->hnext;
				free(k);
			}
	free(t->eb);
	free(t->kb);
	memset(t, 0, sizeof(*t));
}

/* Doubles a bucket array when it holds more items than buckets. */
static void grow_entries(struct cfs_table *t)
{
	size_t nb = (t->emask + 1) * 2;
	struct cfs_tent **eb = calloc(nb, sizeof(*eb));
	if (!eb)
		return;
	for (size_t b = 0; b <= t->emask; b++)
		for (struct cfs_tent *e = t->eb[b], *n; e; e = n) {
			n = e->hnext;
			e->hnext = eb[e->hash & (nb - 1)];
			eb[e->hash & (nb - 1)] = e;
		}
	free(t->eb);
	t->eb = eb;
	t->emask = nb - 1;
}

static void grow_keys(struct cfs_table *t)
{
	size_t nb = (t->kmask + 1) * 2;
	struct cfs_tkey **kb = calloc(nb, sizeof(*kb));
	if (!kb)
		return;
	for (size_t b = 0; b <= t->kmask; b++)
		for (struct cfs_tkey *k = t->kb[b], *n; k; k = n) {
			n = k->hnext;
			k->hnext = kb[k->hash & (nb - 1)];
			kb[k->hash & (nb - 1)] = k;
		}
	free(t->kb);
	t->kb = kb;
	t->kmask = nb - 1;
}

struct cfs_tkey *cfs_table_key(struct cfs_table *t, const char *key)
{
	uint64_t h = cfs_hash_fnv1a(key);
	for (struct cfs_tkey *k = t->kb[h & t->kmask]; k; k = k->hnext)
		if (k->hash == h && strcmp(k->name, key) == 0)
			return k;
	return NULL;
}

static struct cfs_tkey *key_get(struct cfs_table *t, const char *key)
{
	struct cfs_tkey *k = cfs_table_key(t, key);
	size_t len;

	if (k)
		return k;
	len = strlen(key);
	k = calloc(1, sizeof(*k) + len + 1);
	if (!k)
		return NULL;
	memcpy(k->name, key, len + 1);
	k->hash = cfs_hash_fnv1a(key);
	if (t->kcount + 1 > t->kmask + 1)
		grow_keys(t);
	k->hnext = t->kb[k->hash & t->kmask];
	t->kb[k->hash & t->kmask] = k;
	t->kcount++;
	return k;
}

static void key_unref(struct cfs_table *t, struct cfs_tkey *k)
{
	if (--k->refs)
		return;
	for (struct cfs_tkey **p = &t->kb[k->hash & t->kmask]; *p; p = &(*p)->hnext)
		if (*p == k) {
			*p = k->hnext;
			break;
		}
	t->kcount--;
	free(k);
}

struct cfs_tent *cfs_table_find(struct cfs_table *t, const struct cfs_tkey *k, uint64_t block)
{
	uint64_t h = block_hash(k, block);
	for (struct cfs_tent *e = t->eb[h & t->emask]; e; e = e->hnext)
		if (e->hash == h && e->key == k && e->block == block)
			return e;
	return NULL;
}

struct cfs_tent *cfs_table_new(struct cfs_table *t, const char *key, uint64_t block)
{
	struct cfs_tkey *k = key_get(t, key);
	struct cfs_tent *e;

	if (!k)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e) {
		if (!k->refs) {
			k->refs = 1;
			key_unref(t, k);
		}
		return NULL;
	}
	k->refs++;
	e->key = k;
	e->block = block;
	e->hash = block_hash(k, block);
	e->state = CFS_TENT_NEW;
	return e;
}

static void lru_insert(struct cfs_table *t, struct cfs_tent *e, int old)
{
	struct cfs_tent *at = old ? t->lru.lprev : &t->lru; /* insert after `at` */
	e->lprev = at;
	e->lnext = at->lnext;
	at->lnext->lprev = e;
	at->lnext = e;
}

static void lru_remove(struct cfs_tent *e)
{
	if (!e->lprev)
		return;
	e->lprev->lnext = e->lnext;
	e->lnext->lprev = e->lprev;
	e->lprev = e->lnext = NULL;
}

void cfs_table_link(struct cfs_table *t, struct cfs_tent *e, int old)
{
	struct cfs_tkey *k = e->key;

	if (t->ecount + 1 > t->emask + 1)
		grow_entries(t);
	e->hnext = t->eb[e->hash & t->emask];
	t->eb[e->hash & t->emask] = e;
	t->ecount++;
	e->kprev = NULL;
	e->knext = k->first;
	if (k->first)
		k->first->kprev = e;
	k->first = e;
	if (!k->nblocks++)
		t->klive++;
	k->bytes += e->len;
	if (!k->holds)
		lru_insert(t, e, old || k->retired);
	e->state = CFS_TENT_LIVE;
}

void cfs_table_unlink(struct cfs_table *t, struct cfs_tent *e, enum cfs_tent_state state)
{
	struct cfs_tkey *k = e->key;

	for (struct cfs_tent **p = &t->eb[e->hash & t->emask]; *p; p = &(*p)->hnext)
		if (*p == e) {
			*p = e->hnext;
			break;
		}
	t->ecount--;
	if (e->kprev)
		e->kprev->knext = e->knext;
	else
		k->first = e->knext;
	if (e->knext)
		e->knext->kprev = e->kprev;
	e->kprev = e->knext = e->hnext = NULL;
	if (!--k->nblocks)
		t->klive--;
	k->bytes -= e->len;
	lru_remove(e);
	e->state = (uint8_t)state;
}

void cfs_table_free(struct cfs_table *t, struct cfs_tent *e)
{
	if (!e)
		return;
	key_unref(t, e->key);
	free(e);
}

void cfs_table_touch(struct cfs_table *t, struct cfs_tent *e)
{
	e->cold = 0;
	if (!e->lprev || t->lru.lnext == e)
		return;
	lru_remove(e);
	lru_insert(t, e, 0);
}

int cfs_table_hold(struct cfs_table *t, const char *key)
{
	struct cfs_tkey *k = key_get(t, key);
	if (!k)
		return -ENOMEM;
	k->refs++;
	if (!k->holds++)
		for (struct cfs_tent *e = k->first; e; e = e->knext)
			lru_remove(e);
	return 0;
}

/* 1 when k is retired and free now (before the reference goes). */
static int retired_free(const struct cfs_tkey *k)
{
	return k->retired && !k->holds && !k->users && k->nblocks;
}

int cfs_table_release(struct cfs_table *t, const char *key)
{
	struct cfs_tkey *k = cfs_table_key(t, key);
	if (!k || !k->holds)
		return 0;
	if (!--k->holds)
		for (struct cfs_tent *e = k->first; e; e = e->knext)
			lru_insert(t, e, k->retired);
	int again = retired_free(k);
	key_unref(t, k);
	return again;
}

int cfs_table_use(struct cfs_table *t, const char *key)
{
	struct cfs_tkey *k = key_get(t, key);
	if (!k)
		return -ENOMEM;
	k->refs++;
	k->users++;
	return 0;
}

int cfs_table_unuse(struct cfs_table *t, const char *key)
{
	struct cfs_tkey *k = cfs_table_key(t, key);
	if (!k || !k->users)
		return 0;
	k->users--;
	int again = retired_free(k);
	key_unref(t, k);
	return again;
}

size_t cfs_table_retire(struct cfs_table *t, const char *key, struct cfs_tent **out, size_t max)
{
	struct cfs_tkey *k = cfs_table_key(t, key);
	size_t n = 0;
	if (!k)
		return 0;
	if (k->holds || k->users) {
		if (!k->retired && !k->holds)
			for (struct cfs_tent *e = k->first; e; e = e->knext) {
				lru_remove(e);
				lru_insert(t, e, 1);
			}
		k->retired = 1;
		return 0;
	}
	while (k->first && n < max) {
		out[n] = k->first;
		cfs_table_unlink(t, out[n++], CFS_TENT_EVICTING);
	}
	return n;
}

size_t cfs_table_take_prefix(struct cfs_table *t, const char *prefix, size_t *cursor,
			     struct cfs_tent **out, size_t max)
{
	size_t n = 0, plen = strlen(prefix);

	for (; *cursor <= t->kmask; (*cursor)++) {
		for (struct cfs_tkey *k = t->kb[*cursor]; k; k = k->hnext) {
			if (!k->first || strncmp(k->name, prefix, plen) != 0)
				continue;
			while (k->first) {
				if (n == max)
					return n; /* this bucket again next time */
				out[n] = k->first;
				cfs_table_unlink(t, out[n++], CFS_TENT_EVICTING);
			}
		}
	}
	return n;
}
