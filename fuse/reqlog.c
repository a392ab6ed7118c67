/* reqlog: recorded requests (see reqlog.h). */
#define _GNU_SOURCE
#include "reqlog.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdlib.h>
#include <string.h>

enum { S_FREE = 0, S_READING = 1, S_HELD = 2, S_REPLAY = 3 };

#define STATE(w) ((uint32_t)(w))
#define WORD(gen, st) ((uint64_t)(gen) << 32 | (st))

_Static_assert(sizeof(struct cfs_reqlog_slot) == CFS_REQLOG_SLOT, "slot size");
_Static_assert(CFS_REQLOG_DATA >= sizeof(struct fuse_in_header), "room for a header");
_Static_assert(sizeof(struct cfs_reqlog_big) == CFS_REQLOG_BIG_SLOT, "big slot size");
_Static_assert(CFS_REQLOG_WHOLE >= sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in) +
			       CFS_MAX_WRITE, "room for a whole WRITE");
_Static_assert(CFS_REQLOG_BIGS < (1u << (32 - CFS_REQLOG_BIG_SHIFT)), "big slot in the flags");

static const struct fuse_in_header *hdr(const struct cfs_reqlog_slot *s)
{
	return (const struct fuse_in_header *)s->data;
}

/* Moves slot s from state `from` (any generation) to `to`; 1 if it did. */
static int move(struct cfs_reqlog_slot *s, uint32_t from, uint32_t to, int new_gen)
{
	uint64_t w = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE);
	if (STATE(w) != from)
		return 0;
	uint64_t gen = (w >> 32) + (new_gen ? 1 : 0);
	return __atomic_compare_exchange_n(&s->word, &w, WORD(gen, to), 0, __ATOMIC_ACQ_REL,
					   __ATOMIC_RELAXED);
}

void cfs_reqlog_prefault(struct cfs_reqlog *l)
{
	for (size_t off = 0; off < sizeof(*l); off += 4096)
		__atomic_fetch_add((volatile char *)l + off, 0, __ATOMIC_RELAXED);
}

int cfs_reqlog_claim(struct cfs_reqlog *l, unsigned hint)
{
	for (unsigned k = 0; k < CFS_REQLOG_SLOTS; k++) {
		struct cfs_reqlog_slot *s = &l->slot[(hint + k) % CFS_REQLOG_SLOTS];
		if (!move(s, S_FREE, S_READING, 1))
			continue;
		s->len = 0;
		s->flags = 0;
		__atomic_store_n(&((struct fuse_in_header *)s->data)->unique, 0, __ATOMIC_RELEASE);
		return (int)((hint + k) % CFS_REQLOG_SLOTS);
	}
	return -ENOSPC;
}

int cfs_reqlog_claim_big(struct cfs_reqlog *l, int i, unsigned hint)
{
	for (unsigned k = 0; k < CFS_REQLOG_BIGS; k++) {
		unsigned b = (hint + k) % CFS_REQLOG_BIGS;
		uint64_t free_ = 0;
		if (!__atomic_compare_exchange_n(&l->big[b].owner, &free_, (uint64_t)i + 1, 0,
						 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		/* named before the read starts: a recovery finds it from the slot */
		__atomic_store_n(&l->slot[i].flags, (b + 1) << CFS_REQLOG_BIG_SHIFT,
				 __ATOMIC_RELEASE);
		return (int)b;
	}
	return -ENOSPC;
}

/* The big slot slot s names, or -1. */
static int big_of(const struct cfs_reqlog_slot *s)
{
	return (int)(__atomic_load_n(&s->flags, __ATOMIC_ACQUIRE) >> CFS_REQLOG_BIG_SHIFT) - 1;
}

/* Gives back the big slot of slot s, if it has one (s stays as it is). */
static void put_big(struct cfs_reqlog *l, struct cfs_reqlog_slot *s)
{
	int b = big_of(s);
	if (b < 0 || b >= CFS_REQLOG_BIGS)
		return;
	__atomic_store_n(&s->flags, s->flags & CFS_REQLOG_PARTIAL, __ATOMIC_RELAXED);
	__atomic_store_n(&l->big[b].owner, 0, __ATOMIC_RELEASE);
}

/* Frees slot s (word w): its big slot first, so that no later owner of s
 * can have its own big slot given back. */
static void free_slot(struct cfs_reqlog *l, struct cfs_reqlog_slot *s, uint64_t w)
{
	put_big(l, s);
	__atomic_store_n(&s->word, WORD(w >> 32, S_FREE), __ATOMIC_RELEASE);
}

int cfs_reqlog_has_reply(uint32_t op)
{
	return op != FUSE_FORGET && op != FUSE_BATCH_FORGET && op != FUSE_INTERRUPT;
}

/* Sets len and flags of slot s for a request of n bytes: whole, or its
 * header only (partial); a big slot it does not need is given back. */
static void set_len(struct cfs_reqlog *l, struct cfs_reqlog_slot *s, uint32_t n)
{
	int whole = n <= CFS_REQLOG_DATA || (n <= CFS_REQLOG_WHOLE && big_of(s) >= 0);
	if (n <= CFS_REQLOG_DATA || !whole)
		put_big(l, s);
	s->len = whole ? n : (uint32_t)sizeof(struct fuse_in_header);
	s->flags = (s->flags & ~CFS_REQLOG_PARTIAL) | (whole ? 0 : CFS_REQLOG_PARTIAL);
}

void cfs_reqlog_filled(struct cfs_reqlog *l, int i, long n)
{
	struct cfs_reqlog_slot *s = &l->slot[i];
	if (n < (long)sizeof(struct fuse_in_header) || !cfs_reqlog_has_reply(hdr(s)->opcode)) {
		put_big(l, s);
		move(s, S_READING, S_FREE, 0);
		return;
	}
	set_len(l, s, (uint32_t)n);
	move(s, S_READING, S_HELD, 0);
}

static int holds(const struct cfs_reqlog_slot *s, uint64_t unique)
{
	return STATE(__atomic_load_n(&s->word, __ATOMIC_ACQUIRE)) == S_HELD &&
	       hdr(s)->unique == unique;
}

/* The slot that holds unique (slot hint first), or -1. */
static int find_held(const struct cfs_reqlog *l, uint64_t unique, int hint)
{
	if (hint >= 0 && hint < CFS_REQLOG_SLOTS && holds(&l->slot[hint], unique))
		return hint;
	for (int i = 0; i < CFS_REQLOG_SLOTS; i++)
		if (holds(&l->slot[i], unique))
			return i;
	return -1;
}

int cfs_reqlog_done(struct cfs_reqlog *l, uint64_t unique, int hint)
{
	int i = find_held(l, unique, hint);
	if (i < 0)
		return -ENOENT;
	/* one reply a request: no other thread frees this slot meanwhile */
	struct cfs_reqlog_slot *s = &l->slot[i];
	put_big(l, s);
	return move(s, S_HELD, S_FREE, 0) ? 0 : -ENOENT;
}

int cfs_reqlog_opcode(const struct cfs_reqlog *l, uint64_t unique, int hint)
{
	int i = find_held(l, unique, hint);
	return i < 0 ? -ENOENT : (int)hdr(&l->slot[i])->opcode;
}

/* 1 when the slot holds a request a dead server took: held or to be
 * replayed, or read into while reading (its unique set by the kernel). */
static int recorded(const struct cfs_reqlog_slot *s)
{
	uint32_t st = STATE(__atomic_load_n(&s->word, __ATOMIC_ACQUIRE));
	if (st == S_HELD || st == S_REPLAY)
		return 1;
	return st == S_READING && __atomic_load_n(&hdr(s)->unique, __ATOMIC_ACQUIRE) != 0;
}

static int by_unique(const void *a, const void *b, void *arg)
{
	const struct cfs_reqlog *l = arg;
	uint64_t x = hdr(&l->slot[*(const int *)a])->unique;
	uint64_t y = hdr(&l->slot[*(const int *)b])->unique;
	return x < y ? -1 : x > y;
}

int cfs_reqlog_recover(struct cfs_reqlog *l, int **order, size_t *n)
{
	*order = NULL;
	*n = 0;
	int *v = malloc(CFS_REQLOG_SLOTS * sizeof(*v));
	if (!v)
		return -ENOMEM;
	size_t m = 0;
	for (int i = 0; i < CFS_REQLOG_SLOTS; i++) {
		struct cfs_reqlog_slot *s = &l->slot[i];
		uint64_t w = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE);
		if (!recorded(s)) {
			if (STATE(w) != S_FREE)
				free_slot(l, s, w);
			continue;
		}
		if (STATE(w) == S_READING) {
			/* killed between the read and cfs_reqlog_filled: the header
			 * says how long the request is */
			uint32_t len = hdr(s)->len;
			if (len < sizeof(struct fuse_in_header) || !cfs_reqlog_has_reply(hdr(s)->opcode)) {
				free_slot(l, s, w);
				continue;
			}
			set_len(l, s, len);
		}
		__atomic_store_n(&s->word, WORD(w >> 32, S_REPLAY), __ATOMIC_RELEASE);
		v[m++] = i;
	}
	/* a big slot no replay names was claimed by a thread that died before it
	 * named it, or belongs to a slot freed above */
	for (int b = 0; b < CFS_REQLOG_BIGS; b++) {
		uint64_t o = __atomic_load_n(&l->big[b].owner, __ATOMIC_ACQUIRE);
		if (o && (o > CFS_REQLOG_SLOTS || STATE(l->slot[o - 1].word) != S_REPLAY ||
			  big_of(&l->slot[o - 1]) != b))
			__atomic_store_n(&l->big[b].owner, 0, __ATOMIC_RELEASE);
	}
	qsort_r(v, m, sizeof(*v), by_unique, l);
	*order = v;
	*n = m;
	return 0;
}

long cfs_reqlog_take(struct cfs_reqlog *l, int i, void *buf, size_t cap)
{
	struct cfs_reqlog_slot *s = &l->slot[i];
	if (!move(s, S_REPLAY, S_HELD, 0))
		return -ENOENT;
	size_t len = s->len;
	int b = big_of(s);
	if (len > cap || len > CFS_REQLOG_WHOLE || (len > CFS_REQLOG_DATA && b < 0) ||
	    (s->flags & CFS_REQLOG_PARTIAL)) {
		len = sizeof(struct fuse_in_header) <= cap ? sizeof(struct fuse_in_header) : 0;
		memcpy(buf, s->data, len);
		return -E2BIG;
	}
	size_t head = len < CFS_REQLOG_DATA ? len : CFS_REQLOG_DATA;
	memcpy(buf, s->data, head);
	if (len > head)
		memcpy((uint8_t *)buf + head, l->big[b].data, len - head);
	return (long)len;
}

size_t cfs_reqlog_pending(const struct cfs_reqlog *l, struct cfs_reqlog_info *out, size_t cap)
{
	size_t n = 0;
	for (int i = 0; i < CFS_REQLOG_SLOTS && n < cap; i++) {
		const struct cfs_reqlog_slot *s = &l->slot[i];
		if (!recorded(s))
			continue;
		const struct fuse_in_header *h = hdr(s);
		if (STATE(__atomic_load_n(&s->word, __ATOMIC_ACQUIRE)) == S_READING &&
		    (h->len < sizeof(*h) || !cfs_reqlog_has_reply(h->opcode)))
			continue;
		out[n++] = (struct cfs_reqlog_info){ h->unique, h->opcode };
	}
	return n;
}

int cfs_reqlog_drop(struct cfs_reqlog *l, uint64_t unique)
{
	for (int i = 0; i < CFS_REQLOG_SLOTS; i++) {
		struct cfs_reqlog_slot *s = &l->slot[i];
		uint64_t w = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE);
		if (recorded(s) && hdr(s)->unique == unique) {
			free_slot(l, s, w);
			return 0;
		}
	}
	return -ENOENT;
}
