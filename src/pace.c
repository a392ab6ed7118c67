/* pace: token bucket on API calls (see pace.h for the policy). */
#include "pace.h"

#include <time.h>
#include <unistd.h>

void cfs_pace_init(struct cfs_pace *p, double rate, double burst, int64_t now_us)
{
	p->rate = rate;
	p->burst = burst < 1 ? 1 : burst;
	p->tokens = p->burst;
	p->last_us = now_us;
	p->waits = 0;
	pthread_mutex_init(&p->lock, NULL);
}

void cfs_pace_cleanup(struct cfs_pace *p)
{
	pthread_mutex_destroy(&p->lock);
}

int64_t cfs_pace_reserve(struct cfs_pace *p, int64_t now_us)
{
	if (p->rate <= 0)
		return 0;
	pthread_mutex_lock(&p->lock);
	if (now_us > p->last_us) {
		p->tokens += (double)(now_us - p->last_us) * p->rate / 1e6;
		if (p->tokens > p->burst)
			p->tokens = p->burst;
		p->last_us = now_us;
	}
	p->tokens -= 1;
	int64_t wait = p->tokens >= 0 ? 0 : (int64_t)(-p->tokens * 1e6 / p->rate);
	if (wait)
		p->waits++;
	pthread_mutex_unlock(&p->lock);
	return wait;
}

void cfs_pace_take(struct cfs_pace *p)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t wait = cfs_pace_reserve(p, (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
	if (wait > 0)
		usleep((useconds_t)wait);
}
