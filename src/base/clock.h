/* clock: the one place colabfs reads the clocks.  Header only, includable
 * everywhere (cache/ and kernels/ too).
 *
 * CLOCK_MONOTONIC for every duration, deadline and rate (it never jumps);
 * CLOCK_REALTIME only for what is shown or sent as a date (Drive's
 * modifiedTime, stored listings' ages).  cfs_clock_deadline gives the
 * absolute CLOCK_MONOTONIC time ms from now, for pthread_cond_timedwait on
 * a condition variable created with pthread_condattr_setclock(MONOTONIC). */
#ifndef CFS_CLOCK_H
#define CFS_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t cfs_clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t cfs_clock_mono_ms(void)
{
	return cfs_clock_ns(CLOCK_MONOTONIC) / 1000000;
}

static inline int64_t cfs_clock_mono_us(void)
{
	return cfs_clock_ns(CLOCK_MONOTONIC) / 1000;
}

static inline int64_t cfs_clock_wall_ns(void)
{
	return cfs_clock_ns(CLOCK_REALTIME);
}

static inline int64_t cfs_clock_wall_ms(void)
{
	return cfs_clock_ns(CLOCK_REALTIME) / 1000000;
}

static inline struct timespec cfs_clock_deadline(long ms)
{
	int64_t t = cfs_clock_ns(CLOCK_MONOTONIC) + (int64_t)ms * 1000000;
	struct timespec ts = { (time_t)(t / 1000000000), (long)(t % 1000000000) };
	return ts;
}

#endif
