/* store: block cache and namespace rows over arena + index + table (policy and
 * layout in store.h).
 *
 * Locks.  s->mu guards the table, the arenas' slot bitmaps and the counters;
 * it is held only for memory work (and the ftruncate that grows an arena),
 * never across block I/O or an index call.
 * s->wmu serializes the write flows (a put's commit, every eviction), each of
 * which is "index transaction, then the matching table change", so the table
 * and the index never disagree for another writer to see.  Order: wmu, then
 * mu.  A hit pins its entry under mu, reads and checks the slot unlocked, and
 * unpins; an entry taken out while pinned is freed by its last reader.
 * Reserved slots (a put between reserve and commit) count in used bytes but
 * are on no list, so nothing else can take them. */
#define _GNU_SOURCE
#include "store.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "crc32c.h"
#include "index.h"
#include "err.h"
#include "log.h"
#include "store_int.h"
#include "table.h"

#define EVICT_BATCH 256

static int key_ok(const char *key)
{
	size_t n = key ? strnlen(key, CFS_STORE_KEY_MAX + 1) : 0;
	return n >= 1 && n <= CFS_STORE_KEY_MAX;
}

static struct cfs_arena *arena_of(struct cfs_store *s, const struct cfs_tent *e)
{
	return &s->ar.a[e->cls];
}

/* --- slots and eviction ---------------------------------------------------- */

/* Gives back the slot of an entry nobody else can reach (DEAD, unpinned) and
 * frees the entry.  Called without s->mu. */
static void release_entry(struct cfs_store *s, struct cfs_tent *e)
{
	struct cfs_arena *a = arena_of(s, e);
	if (!e->leak)
		cfs_arena_punch(a, e->slot, 1);
	pthread_mutex_lock(&s->mu);
	if (!e->leak) {
		s->st.counted_blocks -= (uint64_t)cfs_heat_reset(&s->heat, e->cls, e->slot);
		cfs_arena_clear(a, e->slot);
		s->used -= a->size;
	}
	cfs_table_free(&s->tab, e);
	pthread_mutex_unlock(&s->mu);
}

/* Drops a pin (s->mu held); 1 if the caller must now release the entry. */
static int unpin_locked(struct cfs_tent *e)
{
	return --e->pins == 0 && e->state == CFS_TENT_DEAD;
}

/* Unlinks up to max unpinned entries from the old end of the LRU, until they
 * add up to `need` slot bytes (s->mu held).  for_cold (a cold put of that
 * key): only the cold entries at the old end, none of that key, so a copy
 * never pushes out what was read, nor the blocks of its own file before it. */
static size_t take_lru(struct cfs_store *s, uint64_t need, struct cfs_tent **out, size_t max,
		       const char *for_cold)
{
	size_t n = 0;
	uint64_t got = 0;
	struct cfs_tent *e = s->tab.lru.lprev, *prev;

	for (; e != &s->tab.lru && n < max && got < need; e = prev) {
		prev = e->lprev;
		if (for_cold && !e->cold)
			break;
		if (e->pins || (for_cold && strcmp(e->key->name, for_cold) == 0))
			continue;
		got += arena_of(s, e)->size;
		out[n++] = e;
		cfs_table_unlink(&s->tab, e, CFS_TENT_EVICTING);
	}
	return n;
}

/* Deletes the rows of n EVICTING entries, then frees their slots (or leaves
 * that to their last reader).  s->wmu held, s->mu not.  If the index refuses,
 * the entries go back on the table as they were. */
static int evict_commit(struct cfs_store *s, struct cfs_tent **v, size_t n, uint64_t *bytes,
			uint64_t *blocks)
{
	struct cfs_index_bkey keys[EVICT_BATCH] = { { 0 } };
	uint64_t sum = 0;
	int rc;

	for (size_t i = 0; i < n; i++) {
		keys[i].key = v[i]->key->name;
		keys[i].block = v[i]->block;
	}
	rc = cfs_index_block_del(s->ix, keys, n);
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < n; i++) {
		if (rc) {
			cfs_table_link(&s->tab, v[i], 1);
			continue;
		}
		sum += arena_of(s, v[i])->size;
		v[i]->state = CFS_TENT_DEAD;
		if (v[i]->pins)
			v[i] = NULL; /* its last reader frees it */
	}
	if (rc == 0) {
		s->st.evictions += n;
		s->st.evicted_bytes += sum;
	}
	pthread_mutex_unlock(&s->mu);
	if (rc) {
		CFS_WARN("cache: eviction failed: %s", cfs_strerror(rc));
		return rc;
	}
	for (size_t i = 0; i < n; i++)
		if (v[i])
			release_entry(s, v[i]);
	if (bytes)
		*bytes += sum;
	if (blocks)
		*blocks += n;
	return 0;
}

/* Evicts LRU entries worth at least `need` slot bytes, or all it can.  s->wmu
 * held.  *freed gets the slot bytes freed. */
static int evict_lru(struct cfs_store *s, uint64_t need, uint64_t *freed, uint64_t *blocks)
{
	struct cfs_tent *v[EVICT_BATCH];
	uint64_t done = 0;
	int rc = 0;

	while (done < need) {
		pthread_mutex_lock(&s->mu);
		size_t n = take_lru(s, need - done, v, EVICT_BATCH, NULL);
		pthread_mutex_unlock(&s->mu);
		if (!n || (rc = evict_commit(s, v, n, &done, blocks)) != 0)
			break;
	}
	*freed += done;
	return rc;
}

/* mu held: the budget puts must stay under now. */
static uint64_t store_cap(const struct cfs_store *s)
{
	return s->limit && s->limit < s->budget ? s->limit : s->budget;
}

/* Reserves a free slot of class cls within the budget, evicting LRU blocks
 * first if needed (for a cold put of key, only cold blocks of other keys:
 * take_lru).  -ENOSPC when the budget cannot be met. */
static int reserve(struct cfs_store *s, int cls, const char *cold, uint64_t *slot)
{
	struct cfs_arena *a = &s->ar.a[cls];
	struct cfs_tent *v[EVICT_BATCH];
	int rc;

	pthread_mutex_lock(&s->wmu);
	for (;;) {
		pthread_mutex_lock(&s->mu);
		uint64_t cap = store_cap(s);
		if (s->used + a->size <= cap) {
			rc = cfs_arenas_alloc(&s->ar, (unsigned)cls, slot);
			if (rc == 0)
				s->used += a->size;
			pthread_mutex_unlock(&s->mu);
			break;
		}
		size_t n = take_lru(s, s->used + a->size - cap, v, EVICT_BATCH, cold);
		pthread_mutex_unlock(&s->mu);
		if (!n) {
			rc = -ENOSPC;
			break;
		}
		if ((rc = evict_commit(s, v, n, NULL, NULL)) != 0)
			break;
	}
	pthread_mutex_unlock(&s->wmu);
	return rc;
}

static void unreserve(struct cfs_store *s, int cls, uint64_t slot)
{
	struct cfs_arena *a = &s->ar.a[cls];
	cfs_arena_punch(a, slot, 1);
	pthread_mutex_lock(&s->mu);
	cfs_arena_clear(a, slot);
	s->used -= a->size;
	pthread_mutex_unlock(&s->mu);
}

/* Commits the row of a written slot and makes it visible, replacing the
 * block's previous entry. */
static int publish(struct cfs_store *s, const char *key, uint64_t block, int cls, uint64_t slot,
		   uint32_t len, uint32_t crc, int cold)
{
	struct cfs_fmt_row row = { .cls = (uint8_t)cls, .len = len, .crc = crc, .slot = slot };
	struct cfs_tent *e, *old = NULL;
	int rc;

	pthread_mutex_lock(&s->wmu);
	pthread_mutex_lock(&s->mu);
	e = cfs_table_new(&s->tab, key, block);
	s->seq = (s->seq + 1) & ((1ull << CFS_STORE_EPOCH_SHIFT) - 1);
	row.gen = s->epoch << CFS_STORE_EPOCH_SHIFT | s->seq;
	pthread_mutex_unlock(&s->mu);
	if (!e) {
		pthread_mutex_unlock(&s->wmu);
		return -ENOMEM;
	}
	rc = cfs_index_block_put(s->ix, key, block, &row);
	pthread_mutex_lock(&s->mu);
	if (rc) {
		cfs_table_free(&s->tab, e);
	} else {
		old = cfs_table_find(&s->tab, e->key, block);
		if (old) {
			cfs_table_unlink(&s->tab, old, CFS_TENT_DEAD);
			if (old->pins)
				old = NULL; /* its last reader frees it */
		}
		e->cls = (uint8_t)cls;
		e->slot = slot;
		e->len = len;
		e->crc = crc;
		e->gen = row.gen;
		e->verified = 1; /* we wrote it; the crc guards the next open */
		e->cold = (uint8_t)cold;
		s->st.counted_blocks -= (uint64_t)cfs_heat_reset(&s->heat, (unsigned)cls, slot);
		cfs_table_link(&s->tab, e, cold);
		s->st.puts++;
	}
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_unlock(&s->wmu);
	if (old)
		release_entry(s, old);
	return rc;
}

static int put(struct cfs_store *s, const char *key, uint64_t block, const void *data,
	       uint32_t len, int cold)
{
	uint32_t crc;
	uint64_t slot;
	int cls, rc;

	if (!s || !key_ok(key) || !data || len == 0 || len > s->block_size)
		return -EINVAL;
	cls = (int)cfs_class_for(len); /* <= the top class: len <= block_size */
	if (s->ar.a[cls].size > s->budget)
		return -ENOSPC;
	crc = cfs_crc32c(0, data, len);
	for (;;) {
		if ((rc = reserve(s, cls, cold ? key : NULL, &slot)) != 0)
			return rc;
		rc = cfs_arena_write(&s->ar.a[cls], slot, data, len);
		if (rc == 0)
			rc = publish(s, key, block, cls, slot, len, crc, cold);
		if (rc == 0)
			return 0;
		unreserve(s, cls, slot);
		if (rc != -ENOSPC || cold)
			return rc;
		/* The file system (or the index map) is full: make room, retry. */
		uint64_t freed = 0, blocks = 0;
		pthread_mutex_lock(&s->mu);
		s->st.enospc_retries++;
		pthread_mutex_unlock(&s->mu);
		pthread_mutex_lock(&s->wmu);
		evict_lru(s, s->ar.a[cls].size, &freed, &blocks);
		pthread_mutex_unlock(&s->wmu);
		if (!freed)
			return -ENOSPC;
	}
}

int cfs_store_put(struct cfs_store *s, const char *key, uint64_t block, const void *data,
		  uint32_t len)
{
	return put(s, key, block, data, len, 0);
}

int cfs_store_put_cold(struct cfs_store *s, const char *key, uint64_t block, const void *data,
		       uint32_t len)
{
	return put(s, key, block, data, len, 1);
}

int cfs_store_evict_to(struct cfs_store *s, uint64_t target, uint64_t *freed_bytes,
		       uint64_t *freed_blocks)
{
	uint64_t bytes = 0, blocks = 0, need;
	int rc = 0;

	pthread_mutex_lock(&s->wmu);
	for (;;) {
		pthread_mutex_lock(&s->mu);
		need = s->used > target ? s->used - target : 0;
		pthread_mutex_unlock(&s->mu);
		if (!need)
			break;
		uint64_t before = bytes;
		if ((rc = evict_lru(s, need, &bytes, &blocks)) != 0 || bytes == before)
			break;
	}
	pthread_mutex_unlock(&s->wmu);
	if (freed_bytes)
		*freed_bytes = bytes;
	if (freed_blocks)
		*freed_blocks = blocks;
	return rc;
}

int cfs_store_evict_prefix(struct cfs_store *s, const char *prefix, uint64_t *freed_bytes,
			   uint64_t *freed_blocks)
{
	struct cfs_tent *v[EVICT_BATCH];
	uint64_t bytes = 0, blocks = 0;
	int rc = 0;

	if (!prefix)
		return -EINVAL;
	pthread_mutex_lock(&s->wmu);
	/* Passes over the key buckets until one finds nothing: a hold may have
	 * rehashed keys behind the cursor. */
	for (int found = 1; found && rc == 0;) {
		size_t cursor = 0;
		found = 0;
		while (rc == 0) {
			pthread_mutex_lock(&s->mu);
			size_t n = cursor <= s->tab.kmask ?
					   cfs_table_take_prefix(&s->tab, prefix, &cursor, v, EVICT_BATCH) : 0;
			pthread_mutex_unlock(&s->mu);
			if (!n)
				break;
			found = 1;
			rc = evict_commit(s, v, n, &bytes, &blocks);
		}
	}
	pthread_mutex_unlock(&s->wmu);
	if (freed_bytes)
		*freed_bytes = bytes;
	if (freed_blocks)
		*freed_blocks = blocks;
	return rc;
}

/* --- reads ----------------------------------------------------------------- */

/* Drops a pinned entry whose slot failed its check, then unpins it; a miss. */
static void drop_bad(struct cfs_store *s, struct cfs_tent *e, int crc_mismatch)
{
	int mine, rc = 0, rel;

	pthread_mutex_lock(&s->wmu);
	pthread_mutex_lock(&s->mu);
	mine = e->state == CFS_TENT_LIVE;
	if (mine) {
		cfs_table_unlink(&s->tab, e, CFS_TENT_EVICTING);
		if (crc_mismatch)
			s->st.crc_failures++;
	}
	pthread_mutex_unlock(&s->mu);
	if (mine) {
		struct cfs_index_bkey k = { e->key->name, e->block };
		CFS_WARN("cache: block %llu of %s %s; dropped", (unsigned long long)e->block,
			 e->key->name, crc_mismatch ? "failed its crc32c check" : "cannot be read");
		rc = cfs_index_block_del(s->ix, &k, 1);
	}
	pthread_mutex_lock(&s->mu);
	s->st.misses++;
	if (mine) {
		e->state = CFS_TENT_DEAD;
		e->leak = rc != 0; /* a row may still name the slot: never reuse it */
	}
	rel = unpin_locked(e);
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_unlock(&s->wmu);
	if (rel)
		release_entry(s, e);
}

struct cfs_tent *cfs_store_pin(struct cfs_store *s, const char *key, uint64_t block, int *verify)
{
	struct cfs_tkey *k;
	struct cfs_tent *e = NULL;

	pthread_mutex_lock(&s->mu);
	k = cfs_table_key(&s->tab, key);
	if (k)
		e = cfs_table_find(&s->tab, k, block);
	if (e) {
		e->pins++;
		cfs_table_touch(&s->tab, e);
		*verify = s->verify_always || !e->verified;
	} else {
		s->st.misses++;
	}
	pthread_mutex_unlock(&s->mu);
	return e;
}

void cfs_store_unpin(struct cfs_store *s, struct cfs_tent *e, unsigned flags)
{
	int rel;
	pthread_mutex_lock(&s->mu);
	if (flags & CFS_STORE_UNPIN_VERIFIED)
		e->verified = 1;
	if (flags & CFS_STORE_UNPIN_HIT) {
		s->st.hits++;
		if (cfs_heat_on(&s->heat)) {
			s->st.counted_blocks += (uint64_t)cfs_heat_hit(&s->heat, e->cls, e->slot);
			s->st.counted_hits++;
		}
	}
	rel = unpin_locked(e);
	pthread_mutex_unlock(&s->mu);
	if (rel)
		release_entry(s, e);
}

int cfs_store_read(struct cfs_store *s, const char *key, uint64_t block, uint32_t off, uint32_t len,
		   char *buf, uint32_t *got)
{
	struct cfs_tent *e;
	char *tmp;
	uint32_t n = 0;
	int verify = 0, rc = 0, bad = 0;

	if (got)
		*got = 0;
	if (!s || !key_ok(key) || (!buf && len))
		return -EINVAL;
	e = cfs_store_pin(s, key, block, &verify);
	if (!e)
		return -ENOENT;
	/* e's slot, len and crc do not change while it is pinned */
	if (off < e->len)
		n = len < e->len - off ? len : e->len - off;
	if (!verify) {
		rc = cfs_arena_read(arena_of(s, e), e->slot, off, buf, n);
	} else {
		/* the whole block is checked, read straight into buf if it fits */
		tmp = off == 0 && n == e->len ? buf : malloc(e->len);
		if (!tmp)
			rc = -ENOMEM;
		else if ((rc = cfs_arena_read(arena_of(s, e), e->slot, 0, tmp, e->len)) == 0)
			bad = cfs_crc32c(0, tmp, e->len) != e->crc;
		if (rc == 0 && !bad && tmp != buf)
			memcpy(buf, tmp + off, n);
		if (tmp != buf)
			free(tmp);
	}
	if (rc == -ENOMEM) {
		cfs_store_unpin(s, e, 0);
		return rc;
	}
	if (rc || bad) {
		drop_bad(s, e, bad);
		return -ENOENT;
	}
	cfs_store_unpin(s, e, CFS_STORE_UNPIN_HIT | (verify ? CFS_STORE_UNPIN_VERIFIED : 0));
	if (got)
		*got = n;
	return 0;
}

int cfs_store_has(struct cfs_store *s, const char *key, uint64_t block)
{
	struct cfs_tkey *k;
	int has = 0;
	if (!s || !key_ok(key))
		return 0;
	pthread_mutex_lock(&s->mu);
	k = cfs_table_key(&s->tab, key);
	if (k) {
		struct cfs_tent *e = cfs_table_find(&s->tab, k, block);
		has = e && e->state == CFS_TENT_LIVE;
	}
	pthread_mutex_unlock(&s->mu);
	return has;
}

uint64_t cfs_store_cached_bytes(struct cfs_store *s, const char *key)
{
	struct cfs_tkey *k;
	uint64_t v = 0;
	if (!s || !key_ok(key))
		return 0;
	pthread_mutex_lock(&s->mu);
	k = cfs_table_key(&s->tab, key);
	if (k)
		v = k->bytes;
	pthread_mutex_unlock(&s->mu);
	return v;
}

/* A hold (keep) or a use begins. */
static int ref(struct cfs_store *s, const char *key, int keep)
{
	int rc;
	if (!s || !key_ok(key))
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	rc = keep ? cfs_table_hold(&s->tab, key) : cfs_table_use(&s->tab, key);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int cfs_store_hold(struct cfs_store *s, const char *key)
{
	return ref(s, key, 1);
}

int cfs_store_retire(struct cfs_store *s, const char *key, uint64_t *freed_bytes)
{
	struct cfs_tent *v[EVICT_BATCH];
	uint64_t bytes = 0;
	int rc = 0;

	if (freed_bytes)
		*freed_bytes = 0;
	if (!s || !key_ok(key))
		return -EINVAL;
	pthread_mutex_lock(&s->wmu);
	for (;;) {
		pthread_mutex_lock(&s->mu);
		size_t n = cfs_table_retire(&s->tab, key, v, EVICT_BATCH);
		if (n)
			s->st.retired += n;
		pthread_mutex_unlock(&s->mu);
		if (!n || (rc = evict_commit(s, v, n, &bytes, NULL)) != 0)
			break;
	}
	pthread_mutex_unlock(&s->wmu);
	if (freed_bytes)
		*freed_bytes = bytes;
	return rc;
}

/* The end of a hold (keep) or a use: a retired key goes with the last. */
static void unref(struct cfs_store *s, const char *key, int keep)
{
	if (!s || !key_ok(key))
		return;
	pthread_mutex_lock(&s->mu);
	int again = keep ? cfs_table_release(&s->tab, key) : cfs_table_unuse(&s->tab, key);
	pthread_mutex_unlock(&s->mu);
	if (again)
		cfs_store_retire(s, key, NULL);
}

void cfs_store_release(struct cfs_store *s, const char *key)
{
	unref(s, key, 1);
}

int cfs_store_use(struct cfs_store *s, const char *key)
{
	return ref(s, key, 0);
}

void cfs_store_unuse(struct cfs_store *s, const char *key)
{
	unref(s, key, 0);
}

void cfs_store_stats(struct cfs_store *s, struct cfs_store_stats *out)
{
	pthread_mutex_lock(&s->mu);
	*out = s->st;
	out->used_bytes = s->used;
	out->budget = s->budget;
	out->effective = store_cap(s);
	out->blocks = s->tab.ecount;
	out->keys = s->tab.klive;
	out->arena_bytes = 0;
	for (unsigned i = 0; i < s->ar.n; i++)
		out->arena_bytes += s->ar.a[i].nslots * s->ar.a[i].size;
	pthread_mutex_unlock(&s->mu);
}

uint32_t cfs_store_block_size(const struct cfs_store *s)
{
	return s->block_size;
}

uint64_t cfs_store_budget(const struct cfs_store *s)
{
	return s->budget;
}

int cfs_store_set_budget(struct cfs_store *s, uint64_t budget, uint64_t *freed_bytes)
{
	if (!s || budget < (16u << 20))
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	s->budget = budget;
	uint64_t cap = store_cap(s);
	pthread_mutex_unlock(&s->mu);
	return cfs_store_evict_to(s, cap, freed_bytes, NULL);
}

void cfs_store_set_limit(struct cfs_store *s, uint64_t limit)
{
	pthread_mutex_lock(&s->mu);
	s->limit = limit;
	pthread_mutex_unlock(&s->mu);
}

/* --- namespace rows -------------------------------------------------------- */

int cfs_store_meta_put(struct cfs_store *s, const char *table, const void *k, size_t kl,
		       const void *v, size_t vl)
{
	int t = cfs_index_table(table);
	return t < 0 ? t : cfs_index_put(s->ix, t, k, kl, v, vl);
}

int cfs_store_meta_get(struct cfs_store *s, const char *table, const void *k, size_t kl, void **v,
		       size_t *vl)
{
	int t = cfs_index_table(table);
	if (t < 0) {
		*v = NULL;
		*vl = 0;
		return t;
	}
	return cfs_index_get(s->ix, t, k, kl, v, vl);
}

int cfs_store_meta_del(struct cfs_store *s, const char *table, const void *k, size_t kl)
{
	int t = cfs_index_table(table);
	return t < 0 ? t : cfs_index_del(s->ix, t, k, kl);
}

int cfs_store_meta_del_prefix(struct cfs_store *s, const char *table, const void *p, size_t pl,
			      uint64_t *deleted)
{
	int t = cfs_index_table(table);
	return t < 0 ? t : cfs_index_del_prefix(s->ix, t, p, pl, deleted);
}

int cfs_store_meta_put_many(struct cfs_store *s, const struct cfs_store_kv *kv, size_t n)
{
	struct cfs_index_kv *ikv;
	int rc = 0;

	if (!n)
		return 0;
	ikv = calloc(n, sizeof(*ikv));
	if (!ikv)
		return -ENOMEM;
	for (size_t i = 0; i < n && rc == 0; i++) {
		ikv[i] = (struct cfs_index_kv){ cfs_index_table(kv[i].table), kv[i].k, kv[i].kl,
						kv[i].v, kv[i].vl };
		if (ikv[i].table < 0)
			rc = -EINVAL;
	}
	if (rc == 0)
		rc = cfs_index_put_many(s->ix, ikv, n);
	free(ikv);
	return rc;
}

int cfs_store_meta_next(struct cfs_store *s, const char *name, uint64_t start, uint64_t *out)
{
	if (!name)
		return -EINVAL;
	return cfs_index_next(s->ix, CFS_IX_META, name, strlen(name), start, out);
}
