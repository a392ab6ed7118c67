/* pace: the request budget on Drive API calls, tracking Drive's per-user
 * quota.
 *
 * Policy.  Every request to Drive (metadata or media) takes one token from a
 * bucket that refills at `rate` tokens per second up to `burst`.  The rate
 * follows Drive's answers (AIMD, as TCP does with loss): it starts at 95% of
 * the ceiling (--api-rate; Drive allows about 12,000 calls a minute per user,
 * 200/s).  Every reply is counted over the last second, and a refusal for
 * the rate (403 userRateLimitExceeded or rateLimitExceeded, 429) decreases
 * the rate when refusals are that second's pattern, not an accident: at
 * least 3 of them and 5% of the replies.  Then the rate is multiplied by the
 * share of replies that got through (at least 0.5, at most 0.9: a fivefold
 * overrun is halved, a 10% one cut by 10%), at most once a second, or once
 * per 250 ms (about one round trip to Drive) while a quarter or more are
 * refused (the other refusals of requests already sent are the same
 * event), never below 2% of the ceiling.  Drive
 * also refuses a request now and then at any rate: such sporadic refusals
 * are retried with backoff (retry.h) but do not slow the mount.  A second
 * after the last decrease the rate grows again by 5% of the ceiling per
 * second, never above the ceiling.
 *
 * Two classes.  An urgent call (a reader waiting for its miss, a listing)
 * takes its token at once and waits only when urgent calls alone outrun the
 * rate (then in order of arrival).  A background call (read-ahead, hedges)
 * takes a token only while more than `reserve` remain, so read-ahead running
 * at the full rate always leaves tokens for a reader's miss: a burst of
 * read-ahead never delays a miss nor pushes it into a rate-limit refusal.
 * Background callers queue on their own lock, one polling the bucket at a
 * time.
 *
 * Costs.  A call may cost more than one token (cfs_pace_reserve_n): Drive's
 * newer quota counts units, a download 200 and a get 5 (drive.h,
 * cfs_drive_units_of), and a pacer of units takes each call's units.  A
 * background call never waits for more than the bucket holds beside the
 * reserve (it then takes what it needs, going below the reserve).
 *
 * Other budgets (creations: a few a second) take the same policy with other
 * numbers (struct cfs_pace_policy): where the rate starts, how fast it grows
 * (tokens per second, per second), how long the window of replies is (the
 * holds scale with it) and how many refusals in it make a pattern.
 *
 * Pure arithmetic in cfs_pace_reserve and cfs_pace_reply (the clock is an
 * argument), so it is unit-tested on recorded traces; thread-safe. */
#ifndef CFS_PACE_H
#define CFS_PACE_H

#include <pthread.h>
#include <stdint.h>

enum { CFS_PACE_URGENT = 0, CFS_PACE_BACKGROUND = 1 };

struct cfs_pace_policy {
	double start;         /* the first rate (0: 95% of the ceiling; at most the ceiling) */
	double growth;        /* tokens/s added per second while accepted (0: 5% of the ceiling) */
	int64_t window_us;    /* replies counted over this long (0: 1 s) */
	unsigned min_refused; /* refusals in the window that can be a pattern (0: 3) */
	double floor;         /* the least rate (0: 2% of the ceiling) */
};

struct cfs_pace {
	double ceiling;   /* the most tokens per second; <= 0: no pacing */
	double rate;      /* now (AIMD), in [floor, ceiling] */
	double floor;
	double growth;    /* tokens/s per second */
	int64_t window_us;
	unsigned min_refused;
	double burst;
	double reserve;   /* tokens background calls leave for urgent ones */
	double tokens;    /* may go negative: urgent reservations not yet due */
	int64_t last_us;  /* when tokens and rate were last brought up to date */
	int64_t cut_us;   /* the last decrease (INT64_MIN: none) */
	pthread_mutex_t lock;
	pthread_mutex_t bg_lock; /* background callers, one at a time */
	uint64_t waits;   /* calls that had to wait (stats) */
	uint64_t limited; /* rate-limit replies reported */
	uint64_t cuts;    /* decreases they caused */
	/* replies over the last window, in 4 buckets */
	int64_t bucket_us;              /* start of the newest bucket */
	uint32_t replies[4], refused[4]; /* [0] newest */
};

/* ceiling: tokens per second at most (<= 0: no pacing); burst: bucket size
 * (<= 0: a tenth of a second's worth, at least 4). */
void cfs_pace_init(struct cfs_pace *p, double ceiling, double burst, int64_t now_us);
/* The same with pol's numbers (NULL: the defaults above). */
void cfs_pace_init_policy(struct cfs_pace *p, double ceiling, double burst,
			  const struct cfs_pace_policy *pol, int64_t now_us);
void cfs_pace_cleanup(struct cfs_pace *p);

/* Asks for one token at now_us.  Urgent: takes it and returns how many
 * microseconds the caller must wait before using it (0 if one was there).
 * Background: returns 0 when it took one, else the microseconds after which
 * to ask again (nothing taken). */
int64_t cfs_pace_reserve(struct cfs_pace *p, int64_t now_us, int prio);
/* The same for a call of cost tokens (> 0). */
int64_t cfs_pace_reserve_n(struct cfs_pace *p, int64_t now_us, int prio, double cost);
/* Reserves and sleeps as needed (CLOCK_MONOTONIC).  *cancel (may be NULL)
 * turning non-zero ends a background wait early; returns 0, or -ECANCELED
 * without a token. */
int cfs_pace_take(struct cfs_pace *p, int prio, const int *cancel);
int cfs_pace_take_n(struct cfs_pace *p, int prio, double cost, const int *cancel);

/* Drive answered a call at now_us: refused is 1 for a rate-limit refusal,
 * 0 for any other reply (success or not).  Calls whose request got no reply
 * (a network failure) are not reported. */
void cfs_pace_reply(struct cfs_pace *p, int64_t now_us, int refused);

/* The current rate (tokens per second; 0 when pacing is off). */
double cfs_pace_rate(struct cfs_pace *p);

#endif
