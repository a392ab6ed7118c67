/* stage_hot: the stage's hot blocks (see stage.h, COLABFS_GPU_PINNED).
 *
 * Counts the blocks each plan touches, chooses the hot set again every
 * refresh interval (kernels/hot.h: the policy) from every block of the cache
 * with its score, fills pinned host memory (CUDA host memory when there is a
 * device, else page-aligned) from the old set or the arenas (checking crc32c
 * and, after the copy, the rows: the seqlock check), and serves plans' copies
 * of the writes it holds.  hot_mu serializes refreshes; hot_rw guards the set
 * and its memory. */
#include "clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cacheview.h"
#include "crc32c.h"
#include "hot.h"
#include "stage_gpu.h"
#include "stage_int.h"

void cfs_stage_hot_mem_free(unsigned char *p, int cuda)
{
	if (p && cuda)
		cfs_gpu_host_free(p);
	else
		free(p);
}

/* This stage's access counts: one per block a plan touches. */
void cfs_stage_hot_count_plan(struct cfs_stage *s, const struct cfs_stage_plan *p)
{
	pthread_mutex_lock(&s->hot_mu);
	if (s->hot_budget)
		for (size_t i = 0; i < p->np; i++) {
			const char *key = p->r[p->p[i].range].key;
			if (key && cfs_hot_count_add(&s->counts, cfs_hot_hash(key, p->p[i].block)))
				break; /* out of memory: counting is a hint */
		}
	pthread_mutex_unlock(&s->hot_mu);
}

struct hot_row {
	char *key;
	uint64_t block;
	struct cfs_fmt_row row;
	int arena; /* copied from the arena: its row must be checked */
};

struct hot_scan {
	struct cfs_stage *s;
	struct hot_row *r;
	struct cfs_hot_cand *c;
	size_t n, cap;
};

static int hot_on_block(void *arg, const char *key, uint64_t block, const struct cfs_fmt_row *row)
{
	struct hot_scan *h = arg;
	uint64_t score = cfs_cview_heat(h->s->cv, row) +
			 cfs_hot_count_get(&h->s->counts, cfs_hot_hash(key, block));
	if (!score || row->len > h->s->hot_budget)
		return 0;
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 256;
		struct hot_row *r = realloc(h->r, cap * sizeof(*r));
		if (r)
			h->r = r;
		struct cfs_hot_cand *c = r ? realloc(h->c, cap * sizeof(*c)) : NULL;
		if (!c)
			return -ENOMEM;
		h->c = c;
		h->cap = cap;
	}
	struct hot_row *r = &h->r[h->n];
	if (!(r->key = strdup(key)))
		return -ENOMEM;
	r->block = block;
	r->row = *row;
	r->arena = 0;
	h->c[h->n] = (struct cfs_hot_cand){ .score = score, .gen = row->gen, .len = row->len,
					    .idx = (uint32_t)h->n };
	h->n++;
	return 0;
}

/* Chooses the hot set again and fills it (hot_mu held). */
static int hot_refresh_locked(struct cfs_stage *s)
{
	struct hot_scan h = { .s = s };
	struct cfs_cview_txn *t = NULL;
	struct cfs_hot_set set = { 0 };
	unsigned char *mem = NULL;
	int cuda = 0, rc;
	uint64_t total = 0, held = 0;
	size_t k = 0;

	s->hot_at_ms = cfs_clock_mono_ms();
	STAT_ADD(s, hot_refreshes, 1);
	if ((rc = cfs_cview_begin(s->cv, &t)) != 0)
		goto out;
	rc = cfs_cview_scan_blocks(t, hot_on_block, &h);
	cfs_cview_end(t);
	t = NULL;
	if (rc)
		goto out;
	k = cfs_hot_select(h.c, h.n, s->hot_budget, &total);
	if ((rc = cfs_hot_set_init(&set, k)) != 0)
		goto out;
	if (k) {
		uint64_t sz = (total + 4095) & ~(uint64_t)4095;
		if (cfs_gpu_host_alloc(sz, (void **)&mem) == 0) {
			cuda = 1;
		} else if (posix_memalign((void **)&mem, 4096, sz) != 0) {
			mem = NULL;
			rc = -ENOMEM;
			goto out;
		}
	}
	/* copy in: from the old hot set when it holds the same write, else the arena */
	uint64_t at = 0;
	for (size_t i = 0; i < k; i++) {
		struct hot_row *r = &h.r[h.c[i].idx];
		const struct cfs_hot_ent *old = cfs_hot_set_find(&s->hot, r->row.gen, r->row.slot,
								 r->row.cls, r->row.len,
								 r->row.crc);
		if (old) {
			memcpy(mem + at, s->hot_mem + old->off, r->row.len);
		} else {
			const unsigned char *src = cfs_cview_slot(s->cv, &r->row);
			if (!src)
				continue;
			memcpy(mem + at, src, r->row.len);
			if (cfs_crc32c(0, mem + at, r->row.len) != r->row.crc) {
				STAT_ADD(s, crc_errors, 1);
				continue;
			}
			r->arena = 1;
		}
		struct cfs_hot_ent e = { .gen = r->row.gen, .slot = r->row.slot, .off = at,
					 .len = r->row.len, .crc = r->row.crc,
					 .cls = r->row.cls };
		if ((rc = cfs_hot_set_add(&set, &e)) != 0)
			goto out;
		at += r->row.len;
	}
	if (s->hook)
		s->hook(s->hook_arg);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* seqlock check of what came from the arenas: a changed row drops the copy */
	if ((rc = cfs_cview_begin(s->cv, &t)) != 0)
		goto out;
	for (size_t i = 0; i < k; i++) {
		struct hot_row *r = &h.r[h.c[i].idx];
		struct cfs_fmt_row now;
		if (!r->arena)
			continue;
		if (cfs_cview_block(t, r->key, r->block, &now) == 0 && now.slot == r->row.slot &&
		    now.gen == r->row.gen && now.cls == r->row.cls && now.len == r->row.len)
			continue;
		STAT_ADD(s, hot_dropped, 1);
		struct cfs_hot_ent *e = (struct cfs_hot_ent *)cfs_hot_set_find(
			&set, r->row.gen, r->row.slot, r->row.cls, r->row.len, r->row.crc);
		if (e)
			e->len = 0; /* never matches a row again (rows have len >= 1): dead */
	}
	cfs_cview_end(t);
	t = NULL;
	uint64_t held_bytes = 0;
	for (size_t i = 0; i < set.cap; i++)
		if (set.e[i].gen && set.e[i].len) {
			held++;
			held_bytes += set.e[i].len;
		}
	pthread_rwlock_wrlock(&s->hot_rw);
	struct cfs_hot_set oset = s->hot;
	unsigned char *omem = s->hot_mem;
	int ocuda = s->hot_mem_cuda;
	s->hot = set;
	s->hot_mem = mem;
	s->hot_mem_cuda = cuda;
	pthread_rwlock_unlock(&s->hot_rw);
	set = oset;
	mem = omem;
	cuda = ocuda;
	__atomic_store_n(&s->st.hot_bytes, held_bytes, __ATOMIC_RELAXED);
	__atomic_store_n(&s->st.hot_blocks, held, __ATOMIC_RELAXED);
	__atomic_store_n(&s->st.hot_cuda, (uint64_t)s->hot_mem_cuda, __ATOMIC_RELAXED);
out:
	cfs_cview_end(t);
	cfs_hot_set_free(&set);
	cfs_stage_hot_mem_free(mem, cuda);
	for (size_t i = 0; i < h.n; i++)
		free(h.r[i].key);
	free(h.r);
	free(h.c);
	return rc;
}

void cfs_stage_hot_maybe_refresh(struct cfs_stage *s)
{
	pthread_mutex_lock(&s->hot_mu);
	if (s->hot_budget && (!s->hot_at_ms || cfs_clock_mono_ms() - s->hot_at_ms >= s->hot_every_ms))
		hot_refresh_locked(s); /* a failure keeps the old set; the next plan tries later */
	pthread_mutex_unlock(&s->hot_mu);
}

int cfs_stage_hot_refresh(struct cfs_stage *s)
{
	int rc = 0;
	pthread_mutex_lock(&s->hot_mu);
	if (s->hot_budget)
		rc = hot_refresh_locked(s);
	pthread_mutex_unlock(&s->hot_mu);
	return rc;
}

int cfs_stage_set_pinned(struct cfs_stage *s, uint64_t bytes)
{
	pthread_mutex_lock(&s->hot_mu);
	s->hot_budget = bytes;
	s->hot_at_ms = 0; /* choose again on the next plan */
	if (!bytes) {
		pthread_rwlock_wrlock(&s->hot_rw);
		cfs_stage_hot_mem_free(s->hot_mem, s->hot_mem_cuda);
		cfs_hot_set_free(&s->hot);
		s->hot_mem = NULL;
		s->hot_mem_cuda = 0;
		pthread_rwlock_unlock(&s->hot_rw);
		__atomic_store_n(&s->st.hot_bytes, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->st.hot_blocks, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->st.hot_cuda, 0, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&s->hot_mu);
	return 0;
}

/* Copies the pieces of [from, to) whose write the hot set holds; marks them
 * done (state 2).  Returns how many pieces are still pending. */
int cfs_stage_hot_copy(struct cfs_stage *s, struct cfs_stage_plan *p, size_t first, size_t cnt,
		       uint64_t from, uint64_t to, unsigned char *dst, unsigned char *state)
{
	int pending = 0;
	uint64_t hits = 0, misses = 0;
	pthread_rwlock_rdlock(&s->hot_rw);
	for (size_t i = 0; i < cnt; i++) {
		struct piece *pc = &p->p[first + i];
		uint32_t skip, n;
		if (state[i] != 1)
			continue;
		if (!(n = cfs_stage_clip(pc, from, to, &skip))) {
			pending++;
			continue;
		}
		const struct cfs_hot_ent *e =
			cfs_hot_set_find(&s->hot, pc->row.gen, pc->row.slot, pc->row.cls,
					 pc->row.len, pc->row.crc);
		if (!e) {
			misses++;
			pending++;
			continue;
		}
		memcpy(dst + (pc->dst + skip - from), s->hot_mem + e->off + pc->boff + skip, n);
		state[i] = 2;
		hits++;
	}
	pthread_rwlock_unlock(&s->hot_rw);
	STAT_ADD(s, hot_hits, hits);
	STAT_ADD(s, hot_misses, misses);
	return pending;
}
