/* hint: order hints (see hint.h for the policy). */
#include "hint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "u64map.h"

#define END UINT32_MAX
#define HIST 32

enum { P_NEW, P_OUT, P_OPEN, P_PASSED };

struct cfs_hint {
	struct cfs_hint_opts o;
	size_t n;
	uint64_t *ino, *size;
	uint32_t *next_same;     /* the file's next position, or END */
	unsigned char *state;
	struct cfs_u64map first; /* ino -> its earliest position not opened (END: none) */
	size_t done, next, far;  /* far: the furthest hit + 1 */
	size_t reach;            /* the furthest position handed out + 1 */
	uint64_t ahead, handed, used, skipped, hits, misses;
	uint64_t hit_bytes;
	int64_t first_hit_ms;    /* -1: no hit yet */
	uint32_t hist;           /* the last matches, 1 = a miss, newest lowest */
	unsigned nhist;
};

int cfs_hint_new(const uint64_t *inos, const uint64_t *sizes, size_t n,
		 const struct cfs_hint_opts *o, int64_t now_ms, struct cfs_hint **out)
{
	(void)now_ms;
	*out = NULL;
	if (!o || !o->ahead_max || n >= END)
		return -EINVAL;
	struct cfs_hint *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->o = *o;
	if (!h->o.ahead_min)
		h->o.ahead_min = 64ULL << 20;
	if (h->o.ahead_min > h->o.ahead_max)
		h->o.ahead_min = h->o.ahead_max;
	if (h->o.horizon_ms <= 0)
		h->o.horizon_ms = 20000;
	if (!h->o.slack)
		h->o.slack = 256;
	if (!h->o.diverge || h->o.diverge > HIST)
		h->o.diverge = 24;
	h->first_hit_ms = -1;
	h->n = n;
	size_t m = n ? n : 1;
	h->ino = malloc(m * sizeof(*h->ino));
	h->size = malloc(m * sizeof(*h->size));
	h->next_same = malloc(m * sizeof(*h->next_same));
	h->state = calloc(m, 1);
	int rc = h->ino && h->size && h->next_same && h->state ? 0 : -ENOMEM;
	/* chains built from the end, so each file's map entry ends at its first */
	for (size_t i = n; !rc && i-- > 0;) {
		uint32_t later = END;
		if (!inos[i]) {
			rc = -EINVAL;
			break;
		}
		cfs_u64map_get(&h->first, inos[i], &later);
		h->ino[i] = inos[i];
		h->size[i] = sizes[i];
		h->next_same[i] = later;
		rc = cfs_u64map_put(&h->first, inos[i], (uint32_t)i);
	}
	if (rc) {
		cfs_hint_free(h);
		return rc;
	}
	*out = h;
	return 0;
}

void cfs_hint_free(struct cfs_hint *h)
{
	if (!h)
		return;
	free(h->ino);
	free(h->size);
	free(h->next_same);
	free(h->state);
	cfs_u64map_free(&h->first);
	free(h);
}

/* Forgets the positions the reader is past: opened ones at the front, and
 * any more than slack before the furthest hit. */
static void advance(struct cfs_hint *h)
{
	while (h->done < h->n &&
	       (h->state[h->done] == P_OPEN || h->done + h->o.slack < h->far)) {
		size_t i = h->done++;
		if (h->state[i] == P_OPEN)
			continue;
		if (h->state[i] == P_OUT) {
			h->ahead -= h->size[i];
			h->skipped += h->size[i];
		}
		h->state[i] = P_PASSED;
	}
	if (h->next < h->done)
		h->next = h->done;
}

static void remember(struct cfs_hint *h, int miss)
{
	h->hist = h->hist << 1 | (uint32_t)(miss != 0);
	if (h->nhist < HIST)
		h->nhist++;
}

int cfs_hint_open(struct cfs_hint *h, uint64_t ino, int64_t now_ms)
{
	uint32_t j;
	if (!cfs_u64map_get(&h->first, ino, &j)) {
		h->misses++;
		remember(h, 1);
		return CFS_HINT_MISS;
	}
	while (j != END && (j < h->done || h->state[j] == P_OPEN || h->state[j] == P_PASSED))
		j = h->next_same[j];
	cfs_u64map_put(&h->first, ino, j); /* an existing key: never -ENOMEM */
	if (j == END)
		return CFS_HINT_NEUTRAL;
	if ((size_t)j >= h->next + h->o.slack) {
		h->misses++;
		remember(h, 1);
		return CFS_HINT_MISS;
	}
	if (h->state[j] == P_OUT) {
		h->ahead -= h->size[j];
		h->used += h->size[j];
	}
	h->state[j] = P_OPEN;
	cfs_u64map_put(&h->first, ino, h->next_same[j]);
	h->hits++;
	h->hit_bytes += h->size[j];
	if (h->first_hit_ms < 0)
		h->first_hit_ms = now_ms;
	if ((size_t)j + 1 > h->far)
		h->far = (size_t)j + 1;
	remember(h, 0);
	advance(h);
	return CFS_HINT_HIT;
}

static uint64_t window(const struct cfs_hint *h, int64_t now_ms)
{
	int64_t el = h->first_hit_ms < 0 ? 0 : now_ms - h->first_hit_ms;
	uint64_t w = h->o.ahead_min;
	if (el >= 1000) {
		double rate = (double)h->hit_bytes * 1000.0 / (double)el;
		double want = rate * (double)h->o.horizon_ms / 1000.0;
		if (want > (double)h->o.ahead_max)
			w = h->o.ahead_max;
		else if (want > (double)w)
			w = (uint64_t)want;
	}
	return w;
}

int cfs_hint_next(struct cfs_hint *h, int64_t now_ms, size_t *pos, uint64_t *ino,
		  uint64_t *size)
{
	uint64_t w = window(h, now_ms);
	while (h->next < h->n && h->state[h->next] != P_NEW)
		h->next++;
	if (h->next >= h->n)
		return 0;
	size_t i = h->next;
	if (h->ahead && h->ahead + h->size[i] > w)
		return 0;
	h->state[i] = P_OUT;
	h->ahead += h->size[i];
	h->handed += h->size[i];
	h->next++;
	if (h->next > h->reach)
		h->reach = h->next;
	*pos = i;
	*ino = h->ino[i];
	*size = h->size[i];
	return 1;
}

void cfs_hint_unnext(struct cfs_hint *h, size_t pos)
{
	if (pos >= h->n || h->state[pos] != P_OUT)
		return;
	h->state[pos] = P_NEW;
	h->ahead -= h->size[pos];
	h->handed -= h->size[pos];
	if (pos < h->next)
		h->next = pos;
}

void cfs_hint_rewind(struct cfs_hint *h)
{
	for (size_t i = h->done; i < h->reach; i++)
		cfs_hint_unnext(h, i);
}

int cfs_hint_diverged(const struct cfs_hint *h)
{
	uint32_t mask = h->nhist >= HIST ? UINT32_MAX : (1u << h->nhist) - 1;
	return (unsigned)__builtin_popcount(h->hist & mask) >= h->o.diverge;
}

int cfs_hint_done(const struct cfs_hint *h)
{
	return h->done >= h->n;
}

void cfs_hint_stats(const struct cfs_hint *h, int64_t now_ms, struct cfs_hint_stats *out)
{
	*out = (struct cfs_hint_stats){
		.n = h->n, .done = h->done, .next = h->next, .ahead = h->ahead,
		.window = window(h, now_ms), .handed_bytes = h->handed, .used_bytes = h->used,
		.skipped_bytes = h->skipped, .hits = h->hits, .misses = h->misses,
	};
}
