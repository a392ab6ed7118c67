/* pace: a token bucket on Drive API calls.
 *
 * Policy.  Every request to Drive (metadata or media) takes one token; the
 * bucket refills at rate tokens per second up to burst.  A caller that finds
 * it empty reserves a token anyway and sleeps until it would have been
 * there, so waiting callers are served in order and the long-run rate never
 * exceeds rate.  Drive's documented per-user limit is 12,000 queries a
 * minute (200/s); the defaults (150/s, burst 300) stay under it while
 * leaving room for a DataLoader's many small-file reads.  Pure arithmetic in
 * cfs_pace_reserve (the clock is an argument), so it is unit-tested. */
#ifndef CFS_PACE_H
#define CFS_PACE_H

#include <pthread.h>
#include <stdint.h>

struct cfs_pace {
	double rate;      /* tokens per second; <= 0: no pacing */
	double burst;
	double tokens;    /* may go negative: reservations not yet due */
	int64_t last_us;  /* when tokens was last brought up to date */
	pthread_mutex_t lock;
	uint64_t waits;   /* calls that had to wait (stats) */
};

void cfs_pace_init(struct cfs_pace *p, double rate, double burst, int64_t now_us);
void cfs_pace_cleanup(struct cfs_pace *p);
/* Takes one token at now_us; returns how many microseconds the caller must
 * wait before using it (0 if one was there). */
int64_t cfs_pace_reserve(struct cfs_pace *p, int64_t now_us);
/* Reserves and sleeps as needed (CLOCK_MONOTONIC). */
void cfs_pace_take(struct cfs_pace *p);

#endif
