/* pace: AIMD token bucket on API calls (see pace.h for the policy). */
#include "pace.h"
#include "clock.h"

#include <errno.h>
#include <time.h>
#include <unistd.h>

#define START_SHARE 0.95   /* of the ceiling */
#define WINDOW_US 1000000  /* replies counted over the last second, in 4 buckets: one
			    * decrease per bucket (250 ms, about a round trip) while
			    * severe, else one per window; growth a window after the last */
#define CUT_MIN_REFUSED 3  /* refusals in the window that can mean over quota */
#define CUT_MIN_SHARE 0.05 /* ... and their share of the replies */
#define CUT_MIN 0.5        /* the most one decrease takes: half */
#define CUT_MAX 0.9        /* the least: a tenth */
#define SEVERE_SHARE 0.25  /* refused share for a decrease every 250 ms, not every second */
#define GROWTH_SHARE 0.05  /* of the ceiling, per second */
#define FLOOR_SHARE 0.02
#define POLL_MAX_US 50000  /* a background wait re-checks cancellation this often */

void cfs_pace_init(struct cfs_pace *p, double ceiling, double burst, int64_t now_us)
{
	cfs_pace_init_policy(p, ceiling, burst, NULL, now_us);
}

void cfs_pace_init_policy(struct cfs_pace *p, double ceiling, double burst,
			  const struct cfs_pace_policy *pol, int64_t now_us)
{
	static const struct cfs_pace_policy none;
	if (!pol)
		pol = &none;
	p->ceiling = ceiling;
	p->rate = pol->start > 0 ? pol->start : ceiling * START_SHARE;
	if (p->rate > ceiling)
		p->rate = ceiling;
	p->floor = pol->floor > 0 ? pol->floor : ceiling * FLOOR_SHARE;
	if (p->floor > p->rate)
		p->floor = p->rate;
	p->growth = pol->growth > 0 ? pol->growth : ceiling * GROWTH_SHARE;
	p->window_us = pol->window_us >= 4 ? pol->window_us : WINDOW_US;
	p->min_refused = pol->min_refused ? pol->min_refused : CUT_MIN_REFUSED;
	if (burst <= 0)
		burst = ceiling / 10 < 4 ? 4 : ceiling / 10;
	p->burst = burst < 1 ? 1 : burst;
	p->reserve = p->burst / 2;
	p->tokens = p->burst;
	p->last_us = now_us;
	p->cut_us = INT64_MIN;
	p->waits = p->limited = p->cuts = 0;
	p->bucket_us = now_us;
	for (int i = 0; i < 4; i++)
		p->replies[i] = p->refused[i] = 0;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->bg_lock, NULL);
}

void cfs_pace_cleanup(struct cfs_pace *p)
{
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->bg_lock);
}

/* lock held: tokens and rate brought up to now_us. */
static void advance(struct cfs_pace *p, int64_t now_us)
{
	if (now_us <= p->last_us)
		return;
	p->tokens += (double)(now_us - p->last_us) * p->rate / 1e6;
	if (p->tokens > p->burst)
		p->tokens = p->burst;
	int64_t grow_from = p->cut_us == INT64_MIN ? p->last_us
			    : p->cut_us + p->window_us > p->last_us ? p->cut_us + p->window_us
								    : p->last_us;
	if (now_us > grow_from) {
		p->rate += p->growth * (double)(now_us - grow_from) / 1e6;
		if (p->rate > p->ceiling)
			p->rate = p->ceiling;
	}
	p->last_us = now_us;
}

int64_t cfs_pace_reserve(struct cfs_pace *p, int64_t now_us, int prio)
{
	return cfs_pace_reserve_n(p, now_us, prio, 1);
}

int64_t cfs_pace_reserve_n(struct cfs_pace *p, int64_t now_us, int prio, double cost)
{
	if (p->ceiling <= 0)
		return 0;
	pthread_mutex_lock(&p->lock);
	advance(p, now_us);
	int64_t wait;
	if (prio == CFS_PACE_BACKGROUND) {
		/* never more than the bucket holds beside the reserve, or
		 * a call could wait for ever */
		double room = p->burst - p->reserve;
		double need = p->reserve + (cost < room ? cost : room) - p->tokens;
		if (need <= 0) {
			p->tokens -= cost;
			wait = 0;
		} else {
			wait = (int64_t)(need * 1e6 / p->rate) + 1;
		}
	} else {
		p->tokens -= cost;
		wait = p->tokens >= 0 ? 0 : (int64_t)(-p->tokens * 1e6 / p->rate);
	}
	if (wait && prio != CFS_PACE_BACKGROUND)
		p->waits++; /* a background wait is counted once, by cfs_pace_take */
	pthread_mutex_unlock(&p->lock);
	return wait;
}

/* lock held: the reply buckets shifted so that [0] holds now_us. */
static void shift(struct cfs_pace *p, int64_t now_us)
{
	int64_t bucket = p->window_us / 4;
	while (now_us - p->bucket_us >= bucket) {
		int64_t gap = (now_us - p->bucket_us) / bucket;
		if (gap >= 4) { /* a window or more without replies */
			for (int i = 0; i < 4; i++)
				p->replies[i] = p->refused[i] = 0;
			p->bucket_us += gap * bucket;
			break;
		}
		for (int i = 3; i > 0; i--) {
			p->replies[i] = p->replies[i - 1];
			p->refused[i] = p->refused[i - 1];
		}
		p->replies[0] = p->refused[0] = 0;
		p->bucket_us += bucket;
	}
}

void cfs_pace_reply(struct cfs_pace *p, int64_t now_us, int refused)
{
	if (p->ceiling <= 0)
		return;
	pthread_mutex_lock(&p->lock);
	advance(p, now_us);
	shift(p, now_us);
	p->replies[0]++;
	if (refused) {
		p->refused[0]++;
		p->limited++;
	}
	uint32_t tot = 0, ref = 0;
	for (int i = 0; i < 4; i++) {
		tot += p->replies[i];
		ref += p->refused[i];
	}
	double share = tot ? (double)ref / tot : 0;
	int64_t hold = share >= SEVERE_SHARE ? p->window_us / 4 : p->window_us;
	if (refused && ref >= p->min_refused && share >= CUT_MIN_SHARE &&
	    (p->cut_us == INT64_MIN || now_us - p->cut_us >= hold)) {
		double f = 1.0 - share;
		p->rate *= f < CUT_MIN ? CUT_MIN : f > CUT_MAX ? CUT_MAX : f;
		if (p->rate < p->floor)
			p->rate = p->floor;
		if (p->tokens > 0) /* Drive says we are over: no burst right after */
			p->tokens = 0;
		p->cut_us = now_us;
		p->cuts++;
	}
	pthread_mutex_unlock(&p->lock);
}

double cfs_pace_rate(struct cfs_pace *p)
{
	pthread_mutex_lock(&p->lock);
	double r = p->ceiling > 0 ? p->rate : 0;
	pthread_mutex_unlock(&p->lock);
	return r;
}

int cfs_pace_take(struct cfs_pace *p, int prio, const int *cancel)
{
	return cfs_pace_take_n(p, prio, 1, cancel);
}

int cfs_pace_take_n(struct cfs_pace *p, int prio, double cost, const int *cancel)
{
	if (prio != CFS_PACE_BACKGROUND) {
		int64_t wait = cfs_pace_reserve_n(p, cfs_clock_mono_us(), prio, cost);
		if (wait > 0)
			usleep((useconds_t)wait);
		return 0;
	}
	int rc = 0, waited = 0;
	pthread_mutex_lock(&p->bg_lock);
	for (;; waited = 1) {
		if (cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED)) {
			rc = -ECANCELED;
			break;
		}
		int64_t wait = cfs_pace_reserve_n(p, cfs_clock_mono_us(), prio, cost);
		if (!wait)
			break;
		usleep((useconds_t)(wait < POLL_MAX_US ? wait : POLL_MAX_US));
	}
	pthread_mutex_unlock(&p->bg_lock);
	if (waited)
		__atomic_add_fetch(&p->waits, 1, __ATOMIC_RELAXED);
	return rc;
}
