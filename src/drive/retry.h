/* retry: the policy that decides what a Drive reply means and whether to try
 * again.  Pure code: no I/O, no clock, no global state.
 *
 * Policy.  A reply is first classified into a status: 0 for success, a precise
 * -errno for permanent conditions (404 -> -ENOENT, permission -> -EACCES,
 * storageQuotaExceeded -> -ENOSPC, 409 -> -EEXIST, 413 -> -EFBIG), or a
 * CFS_E_* class.  Transient classes (network failure, 5xx, 429 and 403
 * rate-limit reasons, malformed replies) are retried with exponential backoff
 * and full jitter: wait uniform [0, min(cap, base * 2^attempt)], but never less
 * than a server's Retry-After.  The first retry of a failure that is not a
 * rate limit (5xx, reset, stall, malformed reply) waits at most first_ms
 * instead (e.g. 50 ms): one failed request among many is usually just that,
 * and a reader is waiting on it; a second failure in a row goes back to the
 * exponential schedule.  Rate limits (403 rate reasons, 429) keep the full
 * schedule from the first retry: asking again at once is what they forbid.  Permanent classes (downloadQuotaExceeded,
 * permissions, not found, not downloadable) are never retried: hammering them
 * only makes Drive angrier.  See ../shared/drive-api-v3.md section 2. */
#ifndef CFS_RETRY_H
#define CFS_RETRY_H

#include <stdint.h>

struct cfs_retry_policy {
	long base_ms;     /* first backoff ceiling, e.g. 500 */
	long cap_ms;      /* largest backoff, e.g. 32000 */
	int max_attempts; /* total tries including the first */
	long first_ms;    /* first retry of a failure that is not a rate limit; 0: base_ms */
};

/* Status for an HTTP reply with Drive error reason (may be "" or NULL). */
int cfs_retry_classify(long http_status, const char *reason);

/* 1 if a call that failed with status should be tried again. */
int cfs_retry_transient(int status);

/* Milliseconds to wait before try number attempt+1 (attempt counts from 0 for
 * the first failure).  retry_after_ms < 0 means none was given.  *rng is a
 * xorshift state the caller owns (any non-zero seed). */
long cfs_retry_delay_ms(const struct cfs_retry_policy *p, int attempt, int64_t retry_after_ms,
			uint64_t *rng);

/* The same for a call that failed with status, with the quick first retry
 * (first_ms) of failures that are not rate limits. */
long cfs_retry_wait_ms(const struct cfs_retry_policy *p, int status, int attempt,
		       int64_t retry_after_ms, uint64_t *rng);

#endif
