/* upq: the upload retry policy (see upq.h). */
#include "upq.h"

#include <errno.h>

#include "err.h"

struct step {
	int64_t base, cap;
};

/* Indexed by class.  PERM and FATAL stop; their step paces attempts made
 * after the file changed. */
static const struct step steps[] = {
	[CFS_UPQ_OK] = { 0, 0 },
	[CFS_UPQ_NET] = { 1000, 5 * 60 * 1000 },
	[CFS_UPQ_RATE] = { 5000, 10 * 60 * 1000 },
	[CFS_UPQ_FULL] = { 60 * 1000, 15 * 60 * 1000 },
	[CFS_UPQ_PROTO] = { 1000, 5 * 60 * 1000 },
	[CFS_UPQ_PERM] = { 10 * 1000, 10 * 60 * 1000 },
	[CFS_UPQ_FATAL] = { 10 * 1000, 10 * 60 * 1000 },
};

enum cfs_upq_class cfs_upq_classify(int rc)
{
	switch (rc) {
	case 0:
		return CFS_UPQ_OK;
	case -ENOSPC:
	case -EDQUOT:
		return CFS_UPQ_FULL;
	case CFS_E_RATE:
	case CFS_E_QUOTA:
		return CFS_UPQ_RATE;
	case CFS_E_PROTO:
		return CFS_UPQ_PROTO;
	case -EACCES:
	case -EPERM:
	case CFS_E_AUTH:
		return CFS_UPQ_PERM;
	case -EFBIG:
	case -EIO:
	case -EEXIST:
	case -EINVAL:
	case -EILSEQ:
	case -ENAMETOOLONG:
	case CFS_E_BADREQ:
	case CFS_E_TOOBIG:
		return CFS_UPQ_FATAL;
	default: /* CFS_E_NET, CFS_E_SERVER, -ENOENT (a session or parent gone:
		  * the next attempt starts over), -ENOMEM, anything new */
		return CFS_UPQ_NET;
	}
}

int cfs_upq_stops(enum cfs_upq_class c)
{
	return c == CFS_UPQ_PERM || c == CFS_UPQ_FATAL;
}

int64_t cfs_upq_backoff_ms(enum cfs_upq_class c, uint32_t failures, uint64_t rnd)
{
	if (c <= CFS_UPQ_OK || c > CFS_UPQ_FATAL)
		c = CFS_UPQ_NET;
	const struct step *s = &steps[c];
	int64_t hi = s->base;
	for (uint32_t i = 1; i < failures && hi < s->cap; i++)
		hi *= 2;
	if (hi > s->cap)
		hi = s->cap;
	int64_t lo = s->base / 2;
	if (lo > hi)
		lo = hi;
	return lo + (int64_t)(rnd % (uint64_t)(hi - lo + 1));
}

enum cfs_upq_class cfs_upq_fail(struct cfs_upq_rec *r, int rc, int64_t now, uint64_t rnd)
{
	enum cfs_upq_class c = cfs_upq_classify(rc);
	if (c == CFS_UPQ_OK) { /* not a failure: treated as a transient one */
		c = CFS_UPQ_NET;
		rc = -EIO;
	}
	if (r->failures < UINT32_MAX)
		r->failures++;
	r->last = c;
	r->err = rc;
	r->due_ms = cfs_upq_stops(c) ? CFS_UPQ_NEVER : now + cfs_upq_backoff_ms(c, r->failures, rnd);
	return c;
}

void cfs_upq_ok(struct cfs_upq_rec *r)
{
	r->due_ms = 0;
	r->failures = 0;
	r->last = CFS_UPQ_OK;
	r->err = 0;
}

void cfs_upq_touch(struct cfs_upq_rec *r, int64_t now)
{
	if (cfs_upq_stopped(r))
		r->due_ms = now + cfs_upq_backoff_ms(r->last, r->failures, 0);
}

int cfs_upq_ask(struct cfs_upq_rec *r, int64_t now)
{
	if (!r->failures || r->due_ms <= now ||
	    (r->asked_ms && now - r->asked_ms < CFS_UPQ_ASK_MS))
		return 0;
	r->due_ms = now;
	r->asked_ms = now;
	return 1;
}

int cfs_upq_may(const struct cfs_upq_rec *r, int64_t now, int64_t *wake)
{
	if (r->due_ms <= now)
		return 1;
	if (wake && r->due_ms != CFS_UPQ_NEVER && r->due_ms < *wake)
		*wake = r->due_ms;
	return 0;
}
