/* hedge: when a download is late enough to ask Drive for it a second time.
 *
 * Policy.  A media request that is late well past what this mount has been
 * seeing is hedged: a second request for the bytes still missing goes out,
 * the first of the two to deliver a byte wins and the other is closed
 * (drive.c runs the race; this module only decides).  Two latencies are
 * learnt as they are observed, each as the window of its last
 * CFS_HEDGE_WINDOW samples:
 *   - time to first byte: from sending a request to the first byte of the
 *     reply (its status line);
 *   - body pause: the longest wait for body bytes inside one reply, one
 *     sample per reply (a 64 MiB body and a 10 KiB body count once each);
 *     time the reader spends taking the bytes is not a wait.
 * A request is late when it has waited for its first byte longer than
 *     max(CFS_HEDGE_FLOOR_US, CFS_HEDGE_K x p95 of the times to first byte)
 * or, once its reply has begun, for the next body bytes longer than
 *     max(CFS_HEDGE_FLOOR_US, CFS_HEDGE_K x p95 of the body pauses),
 * i.e. max(250 ms, 3 x p95) for both.  An estimator with fewer than
 * CFS_HEDGE_MIN_SAMPLES samples knows nothing yet (warm-up): a request is
 * late by it only after CFS_HEDGE_WARMUP_US (5 s, ten times Drive's
 * slowest usual first byte), so a stall in a mount's first requests costs
 * 5 s, not the HTTP layer's 30 s stall timeout.  A sample above the current limit counts as the limit, so
 * stalls cannot inflate the estimate (fewer than one request in twenty
 * moves nothing) while a lasting shift upward raises the limit K-fold each
 * time a twentieth of the window is renewed; a shift down is followed as the
 * window renews.  (gcsfuse's read-stall retry also times a request out at a
 * percentile of recent latencies, p99 with a 1.5 s floor; a hedge keeps the
 * first request alive, so a tighter limit costs less when it is wrong.)
 *
 * Budget: a credit bucket.  It starts with one credit (for the warm-up);
 * every first byte observed earns percent/100 of a credit, up to
 * CFS_HEDGE_BURST credits, and a hedge costs one; so hedges
 * are at most percent % of requests in the long run (plus one burst), and a
 * service that turns slow everywhere gets no more than that share of extra
 * requests.  A late request that finds no credit keeps waiting (the HTTP
 * layer's stall timeout stays the hard floor).
 *
 * Pure code: no clock, no locks, no I/O.  Times are arguments, in
 * microseconds on one monotonic clock; the caller serialises calls. */
#ifndef CFS_HEDGE_H
#define CFS_HEDGE_H

#include <stdint.h>

#define CFS_HEDGE_WINDOW 256       /* samples kept per estimator */
#define CFS_HEDGE_MIN_SAMPLES 20   /* before this many, the warm-up limit */
#define CFS_HEDGE_WARMUP_US 5000000 /* late during the warm-up */
#define CFS_HEDGE_K 3              /* late = K x p95 ... */
#define CFS_HEDGE_FLOOR_US 250000  /* ... but never under 250 ms */
#define CFS_HEDGE_BURST 10         /* most credits held */
#define CFS_HEDGE_PERCENT 5        /* default budget: hedges per 100 requests */

struct cfs_hedge_window {
	int64_t v[CFS_HEDGE_WINDOW];
	uint32_t n, next;  /* samples held; slot of the next one */
	int64_t p95;       /* cached; -1 until computed again */
};

struct cfs_hedge {
	struct cfs_hedge_window ttfb, pause;
	double credit;     /* credits held */
	double earn;       /* per first byte observed */
};

/* percent: hedges allowed per 100 requests (0: never hedge). */
void cfs_hedge_init(struct cfs_hedge *h, int percent);

/* A reply's first byte came waited_us after its request went out.  Also for
 * a request given up on after waiting that long, once it was late (a wait
 * shorter than the limit says nothing).  Earns budget. */
void cfs_hedge_first_byte(struct cfs_hedge *h, int64_t waited_us);

/* A reply's body ended (complete, cut or closed by us); the longest wait for
 * its bytes was pause_us. */
void cfs_hedge_body_pause(struct cfs_hedge *h, int64_t pause_us);

/* How long a request may wait for its first byte, and a reply for its next
 * body bytes, before it is late (microseconds); INT64_MAX while warming up. */
int64_t cfs_hedge_ttfb_limit(struct cfs_hedge *h);
int64_t cfs_hedge_pause_limit(struct cfs_hedge *h);

/* When a request sent at sent_us is late: its reply began at first_us (0:
 * not yet) and last delivered body bytes at last_us (0: none yet).
 * INT64_MAX: not while the estimator that judges it warms up. */
int64_t cfs_hedge_late_at(struct cfs_hedge *h, int64_t sent_us, int64_t first_us,
			  int64_t last_us);

/* A late request asks to be hedged: 1 when granted (a credit is spent), 0
 * when the budget is spent (or hedging is off). */
int cfs_hedge_take(struct cfs_hedge *h);

/* The p95 of each estimator in microseconds, -1 while it warms up (stats). */
int64_t cfs_hedge_ttfb_p95(struct cfs_hedge *h);
int64_t cfs_hedge_pause_p95(struct cfs_hedge *h);

#endif
