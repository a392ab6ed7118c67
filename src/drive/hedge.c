/* hedge: latency estimators and the hedge budget (see hedge.h for the
 * policy). */
#include "hedge.h"

#include <stdlib.h>
#include <string.h>

static void window_init(struct cfs_hedge_window *w)
{
	memset(w, 0, sizeof(*w));
	w->p95 = -1;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* The p95 of the samples held (the smallest value at or above 95% of them),
 * -1 while fewer than CFS_HEDGE_MIN_SAMPLES. */
static int64_t window_p95(struct cfs_hedge_window *w)
{
	if (w->n < CFS_HEDGE_MIN_SAMPLES)
		return -1;
	if (w->p95 < 0) {
		int64_t s[CFS_HEDGE_WINDOW];
		memcpy(s, w->v, w->n * sizeof(s[0]));
		qsort(s, w->n, sizeof(s[0]), cmp64);
		w->p95 = s[(w->n * 95 + 99) / 100 - 1];
	}
	return w->p95;
}

static int64_t window_limit(struct cfs_hedge_window *w)
{
	int64_t p = window_p95(w);
	if (p < 0)
		return CFS_HEDGE_WARMUP_US;
	return p * CFS_HEDGE_K > CFS_HEDGE_FLOOR_US ? p * CFS_HEDGE_K : CFS_HEDGE_FLOOR_US;
}

static void window_add(struct cfs_hedge_window *w, int64_t v)
{
	int64_t limit = window_limit(w);
	if (v > limit)
		v = limit; /* a stall counts as the limit, not as itself */
	if (v < 0)
		v = 0;
	w->v[w->next] = v;
	w->next = (w->next + 1) % CFS_HEDGE_WINDOW;
	if (w->n < CFS_HEDGE_WINDOW)
		w->n++;
	w->p95 = -1;
}

void cfs_hedge_init(struct cfs_hedge *h, int percent)
{
	window_init(&h->ttfb);
	window_init(&h->pause);
	h->earn = percent > 0 ? percent / 100.0 : 0;
	h->credit = h->earn > 0 ? 1 : 0; /* one hedge for the warm-up */
}

void cfs_hedge_first_byte(struct cfs_hedge *h, int64_t waited_us)
{
	window_add(&h->ttfb, waited_us);
	h->credit += h->earn;
	if (h->credit > CFS_HEDGE_BURST)
		h->credit = CFS_HEDGE_BURST;
}

void cfs_hedge_body_pause(struct cfs_hedge *h, int64_t pause_us)
{
	window_add(&h->pause, pause_us);
}

int64_t cfs_hedge_ttfb_limit(struct cfs_hedge *h)
{
	return window_limit(&h->ttfb);
}

int64_t cfs_hedge_pause_limit(struct cfs_hedge *h)
{
	return window_limit(&h->pause);
}

int64_t cfs_hedge_late_at(struct cfs_hedge *h, int64_t sent_us, int64_t first_us,
			  int64_t last_us)
{
	int64_t from = first_us ? (last_us > first_us ? last_us : first_us) : sent_us;
	int64_t limit = first_us ? window_limit(&h->pause) : window_limit(&h->ttfb);
	return limit > INT64_MAX - from ? INT64_MAX : from + limit;
}

int cfs_hedge_take(struct cfs_hedge *h)
{
	if (h->earn <= 0 || h->credit < 1)
		return 0;
	h->credit -= 1;
	return 1;
}

int64_t cfs_hedge_ttfb_p95(struct cfs_hedge *h)
{
	return window_p95(&h->ttfb);
}

int64_t cfs_hedge_pause_p95(struct cfs_hedge *h)
{
	return window_p95(&h->pause);
}
