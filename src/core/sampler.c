/* sampler: the history's sampling thread (see sampler.h). */
#include "sampler.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "clock.h"
#include "hist.h"
#include "testhook.h"

struct cfs_sampler {
	const struct cfs_stats_src *src;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	int stop;
	struct cfs_hist h;
};

/* COLABFS_TEST_HISTORY_INTERVAL_MS (a test hook): a shorter interval, so a
 * test fills the ring, and pages through it, in seconds. */
static int64_t interval_ms(void)
{
	const char *p = cfs_test_env("COLABFS_TEST_HISTORY_INTERVAL_MS");
	char *end;
	long v = p ? strtol(p, &end, 10) : 0;
	return p && *p && !*end && v > 0 && v <= CFS_HIST_INTERVAL_MS ? v : CFS_HIST_INTERVAL_MS;
}

static void *sampler(void *arg)
{
	struct cfs_sampler *s = arg;
	int64_t every = interval_ms();
	int64_t mono0 = cfs_clock_mono_ms(), wall0 = cfs_clock_wall_ms(), due = mono0;
	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		int64_t now = cfs_clock_mono_ms();
		if (now >= due) {
			struct cfs_hist_sample x;
			pthread_mutex_unlock(&s->lock);
			cfs_stats_sample(s->src, &x);
			pthread_mutex_lock(&s->lock);
			now = cfs_clock_mono_ms();
			cfs_hist_push(&s->h, &x, (uint64_t)(wall0 + (now - mono0)));
			due = cfs_hist_next_due(due, now, every);
		}
		struct timespec ts = cfs_clock_deadline((long)(due - now));
		pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int cfs_sampler_start(const struct cfs_stats_src *src, struct cfs_sampler **out)
{
	*out = NULL;
	struct cfs_sampler *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->src = src;
	cfs_hist_init(&s->h);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&s->thread, NULL, sampler, s) != 0) {
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->cond);
		free(s);
		return -EAGAIN;
	}
	*out = s;
	return 0;
}

void cfs_sampler_stop(struct cfs_sampler *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

int cfs_sampler_page(struct cfs_sampler *s, uint64_t from, struct cfs_buf *out)
{
	pthread_mutex_lock(&s->lock);
	int rc = cfs_hist_page(&s->h, from, CFS_HIST_PAGE_MAX, out);
	pthread_mutex_unlock(&s->lock);
	return rc;
}
