/* pace: AIMD token bucket on API calls (see pace.h for the policy). */
#include "pace.h"

#include <errno.h>
#include <time.h>
#include <unistd.h>

#define START_SHARE 0.95   /* of the ceiling */
#define CUT_FACTOR 0.7
#define HOLD_US 250000     /* one decrease per 250 ms (about a round trip); growth a second after */
#define GROW_AFTER_US 1000000
#define GROWTH_SHARE 0.05  /* of the ceiling, per second */
#define FLOOR_SHARE 0.02
#define POLL_MAX_US 50000  /* a background wait re-checks cancellation this often */

void cfs_pace_init(struct cfs_pace *p, double ceiling, double burst, int64_t now_us)
{
	p->ceiling = ceiling;
	p->rate = ceiling * START_SHARE;
	p->floor = ceiling * FLOOR_SHARE;
	if (burst <= 0)
		burst = ceiling / 10 < 4 ? 4 : ceiling / 10;
	p->burst = burst < 1 ? 1 : burst;
	p->reserve = p->burst / 2;
	p->tokens = p->burst;
	p->last_us = now_us;
	p->cut_us = INT64_MIN;
	p->waits = p->limited = p->cuts = 0;
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
			    : p->cut_us + GROW_AFTER_US > p->last_us ? p->cut_us + GROW_AFTER_US
							       : p->last_us;
	if (now_us > grow_from) {
		p->rate += p->ceiling * GROWTH_SHARE * (double)(now_us - grow_from) / 1e6;
		if (p->rate > p->ceiling)
			p->rate = p->ceiling;
	}
	p->last_us = now_us;
}

int64_t cfs_pace_reserve(struct cfs_pace *p, int64_t now_us, int prio)
{
	if (p->ceiling <= 0)
		return 0;
	pthread_mutex_lock(&p->lock);
	advance(p, now_us);
	int64_t wait;
	if (prio == CFS_PACE_BACKGROUND) {
		double need = p->reserve + 1 - p->tokens;
		if (need <= 0) {
			p->tokens -= 1;
			wait = 0;
		} else {
			wait = (int64_t)(need * 1e6 / p->rate) + 1;
		}
	} else {
		p->tokens -= 1;
		wait = p->tokens >= 0 ? 0 : (int64_t)(-p->tokens * 1e6 / p->rate);
	}
	if (wait && prio != CFS_PACE_BACKGROUND)
		p->waits++; /* a background wait is counted once, by cfs_pace_take */
	pthread_mutex_unlock(&p->lock);
	return wait;
}

void cfs_pace_limited(struct cfs_pace *p, int64_t now_us)
{
	if (p->ceiling <= 0)
		return;
	pthread_mutex_lock(&p->lock);
	advance(p, now_us);
	p->limited++;
	if (p->cut_us == INT64_MIN || now_us - p->cut_us >= HOLD_US) {
		p->rate *= CUT_FACTOR;
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

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int cfs_pace_take(struct cfs_pace *p, int prio, const int *cancel)
{
	if (prio != CFS_PACE_BACKGROUND) {
		int64_t wait = cfs_pace_reserve(p, mono_us(), prio);
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
		int64_t wait = cfs_pace_reserve(p, mono_us(), prio);
		if (!wait)
			break;
		usleep((useconds_t)(wait < POLL_MAX_US ? wait : POLL_MAX_US));
	}
	pthread_mutex_unlock(&p->bg_lock);
	if (waited)
		__atomic_add_fetch(&p->waits, 1, __ATOMIC_RELAXED);
	return rc;
}
