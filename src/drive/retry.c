/* retry: reply classification and backoff (see retry.h for the policy). */
#include "retry.h"

#include <errno.h>
#include <string.h>

#include "err.h"

static int reason_is(const char *reason, const char *const *set)
{
	for (; *set; set++)
		if (strcmp(reason, *set) == 0)
			return 1;
	return 0;
}

int cfs_retry_classify(long http, const char *reason)
{
	static const char *const rate[] = { "rateLimitExceeded", "userRateLimitExceeded", NULL };
	static const char *const quota[] = { "downloadQuotaExceeded", "cannotDownloadAbusiveFile",
					     "dailyLimitExceeded", "quotaExceeded", NULL };
	static const char *const notdl[] = { "fileNotDownloadable", "cannotDownloadFile",
					     "fileNotExportable", "cannotExportFile", NULL };
	if (!reason)
		reason = "";
	if (http >= 200 && http <= 299)
		return 0;
	if (reason_is(reason, rate))
		return CFS_E_RATE;
	switch (http) {
	case 400:
		return CFS_E_BADREQ;
	case 401:
		return CFS_E_AUTH;
	case 403:
		if (reason_is(reason, quota))
			return CFS_E_QUOTA;
		if (reason_is(reason, notdl))
			return CFS_E_NOTDL;
		if (strcmp(reason, "exportSizeLimitExceeded") == 0)
			return CFS_E_TOOBIG;
		if (strcmp(reason, "storageQuotaExceeded") == 0)
			return -ENOSPC;
		return -EACCES;
	case 404:
		return -ENOENT;
	case 409: /* a create with an id in use */
		return -EEXIST;
	case 413: /* an upload body too large for its kind */
		return -EFBIG;
	case 408:
		return CFS_E_NET;
	case 416:
		return -ERANGE;
	case 429:
		return CFS_E_RATE;
	default:
		if (http >= 500 && http <= 599)
			return CFS_E_SERVER;
		return CFS_E_PROTO;
	}
}

int cfs_retry_transient(int status)
{
	return status == CFS_E_NET || status == CFS_E_RATE || status == CFS_E_SERVER ||
	       status == CFS_E_PROTO;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ULL;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

long cfs_retry_delay_ms(const struct cfs_retry_policy *p, int attempt, int64_t retry_after_ms,
			uint64_t *rng)
{
	long ceil = p->base_ms > 0 ? p->base_ms : 1;
	for (int i = 0; i < attempt && ceil < p->cap_ms; i++)
		ceil *= 2;
	if (ceil > p->cap_ms)
		ceil = p->cap_ms;
	long wait = (long)(xorshift(rng) % (uint64_t)(ceil + 1));
	if (retry_after_ms > wait)
		wait = retry_after_ms > p->cap_ms * 4 ? p->cap_ms * 4 : (long)retry_after_ms;
	return wait;
}

long cfs_retry_wait_ms(const struct cfs_retry_policy *p, int status, int attempt,
		       int64_t retry_after_ms, uint64_t *rng)
{
	if (attempt == 0 && status != CFS_E_RATE && p->first_ms > 0) {
		struct cfs_retry_policy q = *p;
		q.base_ms = p->first_ms;
		return cfs_retry_delay_ms(&q, 0, retry_after_ms, rng);
	}
	return cfs_retry_delay_ms(p, attempt, retry_after_ms, rng);
}
