/* upq: when a staged file's upload may be tried again, and when it must stop.
 *
 * Policy.  Every attempt's result is put in a class:
 *   - CFS_UPQ_NET     transport failures, 5xx, timeouts: transient;
 *   - CFS_UPQ_RATE    Drive's rate limits, still refused after the client's
 *                     own retries: transient, but Drive asks us to slow down;
 *   - CFS_UPQ_FULL    Drive's storage quota is full: transient for the user
 *                     (they free space), pointless to hammer;
 *   - CFS_UPQ_PROTO   the bytes Drive holds are not the ones sent (a checksum
 *                     or size mismatch): the session starts over;
 *   - CFS_UPQ_PERM    the account may not write there (EACCES): waiting
 *                     cannot help;
 *   - CFS_UPQ_FATAL   Drive refuses the request itself (400: a name it cannot
 *                     take, a file too large, an id in use): waiting cannot
 *                     help.
 * Transient classes back off exponentially with full jitter from a class
 * base to a class cap (NET 1 s -> 5 min, RATE 5 s -> 10 min, PROTO 1 s ->
 * 5 min, FULL 60 s -> 15 min), counted over consecutive failures; a success
 * ends the run.  PERM and FATAL stop: no attempt until the file changes
 * (new content may be accepted) or the user asks (`colabfs sync`), once per
 * ask.  Urgency (an fsync, a sync) skips the write-back delay, never the
 * backoff: an urgent file that keeps failing is tried once per backoff step,
 * not in a loop.
 *
 * Pure code: no clock, no locks, no I/O; times (monotonic ms) and random
 * numbers are arguments; the caller serialises calls on one record. */
#ifndef CFS_UPQ_H
#define CFS_UPQ_H

#include <stdint.h>

enum cfs_upq_class {
	CFS_UPQ_OK = 0,
	CFS_UPQ_NET,
	CFS_UPQ_RATE,
	CFS_UPQ_FULL,
	CFS_UPQ_PROTO,
	CFS_UPQ_PERM,
	CFS_UPQ_FATAL,
};

#define CFS_UPQ_NEVER INT64_MAX

/* One file's retry state (zero-initialised: nothing failed). */
struct cfs_upq_rec {
	int64_t due_ms;        /* no attempt before this (CFS_UPQ_NEVER: stopped) */
	uint32_t failures;     /* consecutive failed attempts */
	enum cfs_upq_class last; /* class of the last attempt (OK after a success) */
	int err;               /* the last failure's status, 0 after a success */
	int64_t asked_ms;      /* when the user last asked for an attempt */
};

#define CFS_UPQ_ASK_MS 10000 /* the user's asks count once per this */

/* The class of an upload's status (0, -errno, CFS_E_*). */
enum cfs_upq_class cfs_upq_classify(int rc);
/* Whether a class stops retries until the file changes or the user asks. */
int cfs_upq_stops(enum cfs_upq_class c);
/* The pause before attempt failures+1 of class c (failures >= 1), with
 * full jitter from rnd: in [base/2, min(cap, base << (failures-1))]. */
int64_t cfs_upq_backoff_ms(enum cfs_upq_class c, uint32_t failures, uint64_t rnd);

/* An attempt failed with rc at now: the record's class, count and due time.
 * Returns the class. */
enum cfs_upq_class cfs_upq_fail(struct cfs_upq_rec *r, int rc, int64_t now, uint64_t rnd);
/* An attempt succeeded: the record is clear. */
void cfs_upq_ok(struct cfs_upq_rec *r);
/* The file's bytes, size or place changed: a stopped record may be tried
 * again (after its backoff step, counted from now). */
void cfs_upq_touch(struct cfs_upq_rec *r, int64_t now);
/* The user asks (colabfs sync, which asks at every poll): a failed record
 * is tried now, once per CFS_UPQ_ASK_MS.  Returns 1 when it was. */
int cfs_upq_ask(struct cfs_upq_rec *r, int64_t now);
/* Whether an attempt may start at now; else *wake (may be NULL) is lowered
 * to the time it may (left alone for a stopped record). */
int cfs_upq_may(const struct cfs_upq_rec *r, int64_t now, int64_t *wake);
/* Whether the record is stopped (waits for a change or the user). */
static inline int cfs_upq_stopped(const struct cfs_upq_rec *r)
{
	return r->due_ms == CFS_UPQ_NEVER;
}

#endif
