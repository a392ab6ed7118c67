/* fhtab: handle rows in shared memory (see fhtab.h). */
#include "fhtab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define TAB_MAGIC 0x32484643u /* "CFH2" */
#define TAB_VERSION 1

enum { S_FREE = 0, S_WRITING = 1, S_LIVE = 2 };

struct hdr {
	uint32_t magic, version, slots, slot_size;
	unsigned char pad[CFS_FHTAB_HEADER - 16];
};

/* word: generation << 32 | state, changed only by compare-and-swap, so a
 * delete cannot free a slot that was freed and claimed again meanwhile */
struct slot {
	uint64_t word;
	uint64_t fh;
	uint32_t len;
	uint32_t spare;
	unsigned char row[CFS_FHTAB_ROW_MAX];
};

_Static_assert(sizeof(struct hdr) == CFS_FHTAB_HEADER, "header size");
_Static_assert(sizeof(struct slot) == CFS_FHTAB_SLOT_SIZE, "slot size");

#define STATE(w) ((uint32_t)(w))
#define WORD(gen, st) ((uint64_t)(gen) << 32 | (st))

struct cfs_fhtab {
	struct hdr *h;
	struct slot *s;
	uint32_t n;
};

size_t cfs_fhtab_size(uint32_t slots)
{
	return CFS_FHTAB_HEADER + (size_t)slots * CFS_FHTAB_SLOT_SIZE;
}

int cfs_fhtab_attach(void *mem, size_t len, struct cfs_fhtab **out, uint32_t *dropped)
{
	*out = NULL;
	if (dropped)
		*dropped = 0;
	if (!mem || ((uintptr_t)mem & 7) || len < cfs_fhtab_size(CFS_FHTAB_PROBE))
		return -EINVAL;
	struct hdr *h = mem;
	uint32_t n = (uint32_t)((len - CFS_FHTAB_HEADER) / CFS_FHTAB_SLOT_SIZE);
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != TAB_MAGIC) {
		/* a new region: zero-filled, so every slot is free already */
		h->version = TAB_VERSION;
		h->slots = n;
		h->slot_size = CFS_FHTAB_SLOT_SIZE;
		__atomic_store_n(&h->magic, TAB_MAGIC, __ATOMIC_RELEASE);
	} else if (h->version != TAB_VERSION || h->slot_size != CFS_FHTAB_SLOT_SIZE ||
		   h->slots > n || h->slots < CFS_FHTAB_PROBE) {
		return -EINVAL;
	}
	struct cfs_fhtab *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->h = h;
	t->s = (struct slot *)((char *)mem + CFS_FHTAB_HEADER);
	t->n = h->slots;
	/* the process that was writing these died before it replied */
	for (uint32_t i = 0; i < t->n; i++) {
		uint64_t w = __atomic_load_n(&t->s[i].word, __ATOMIC_ACQUIRE);
		if (STATE(w) == S_WRITING &&
		    __atomic_compare_exchange_n(&t->s[i].word, &w, WORD(w >> 32, S_FREE), 0,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED) &&
		    dropped)
			(*dropped)++;
	}
	*out = t;
	return 0;
}

void cfs_fhtab_detach(struct cfs_fhtab *t)
{
	free(t);
}

static struct slot *slot_at(struct cfs_fhtab *t, uint64_t fh, uint32_t i)
{
	return &t->s[(uint32_t)((fh + i) % t->n)];
}

int cfs_fhtab_put(struct cfs_fhtab *t, uint64_t fh, const void *row, size_t len)
{
	if (!fh || (!row && len))
		return -EINVAL;
	if (len > CFS_FHTAB_ROW_MAX)
		return -E2BIG;
	for (uint32_t i = 0; i < CFS_FHTAB_PROBE; i++) {
		struct slot *s = slot_at(t, fh, i);
		uint64_t w = __atomic_load_n(&s->word, __ATOMIC_RELAXED);
		uint64_t mine = WORD((w >> 32) + 1, S_WRITING);
		if (STATE(w) != S_FREE ||
		    !__atomic_compare_exchange_n(&s->word, &w, mine, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			continue;
		__atomic_store_n(&s->fh, fh, __ATOMIC_RELAXED);
		s->len = (uint32_t)len;
		if (len)
			memcpy(s->row, row, len);
		__atomic_store_n(&s->word, WORD(mine >> 32, S_LIVE), __ATOMIC_RELEASE);
		return 0;
	}
	return -ENOSPC;
}

/* The slot holding fh live, and its word then; NULL when none does. */
static struct slot *find(struct cfs_fhtab *t, uint64_t fh, uint64_t *word)
{
	for (uint32_t i = 0; i < CFS_FHTAB_PROBE; i++) {
		struct slot *s = slot_at(t, fh, i);
		uint64_t w = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE);
		if (STATE(w) == S_LIVE && __atomic_load_n(&s->fh, __ATOMIC_RELAXED) == fh) {
			*word = w;
			return s;
		}
	}
	return NULL;
}

int cfs_fhtab_get(struct cfs_fhtab *t, uint64_t fh, void *row, size_t cap, size_t *len)
{
	uint64_t w;
	struct slot *s = fh ? find(t, fh, &w) : NULL;
	if (!s)
		return -ENOENT;
	size_t l = __atomic_load_n(&s->len, __ATOMIC_RELAXED);
	if (l > CFS_FHTAB_ROW_MAX)
		l = CFS_FHTAB_ROW_MAX; /* a torn read: caught below */
	if (l > cap)
		return -ERANGE;
	memcpy(row, s->row, l);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	/* still the same row: not deleted and claimed again while we copied */
	if (__atomic_load_n(&s->word, __ATOMIC_RELAXED) != w ||
	    __atomic_load_n(&s->fh, __ATOMIC_RELAXED) != fh)
		return -ENOENT;
	*len = l;
	return 0;
}

int cfs_fhtab_del(struct cfs_fhtab *t, uint64_t fh)
{
	uint64_t w;
	struct slot *s = fh ? find(t, fh, &w) : NULL;
	if (!s || !__atomic_compare_exchange_n(&s->word, &w, WORD(w >> 32, S_FREE), 0,
					       __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return -ENOENT;
	return 0;
}

uint32_t cfs_fhtab_count(struct cfs_fhtab *t)
{
	uint32_t c = 0;
	for (uint32_t i = 0; i < t->n; i++)
		c += STATE(__atomic_load_n(&t->s[i].word, __ATOMIC_RELAXED)) == S_LIVE;
	return c;
}
