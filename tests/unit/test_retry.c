/* Unit tests: reply classification and backoff. */
#include <errno.h>

#include "check.h"
#include "err.h"
#include "retry.h"

int main(void)
{
	CHECK_EQ(cfs_retry_classify(200, NULL), 0);
	CHECK_EQ(cfs_retry_classify(206, ""), 0);
	CHECK_EQ(cfs_retry_classify(404, "notFound"), -ENOENT);
	CHECK_EQ(cfs_retry_classify(401, "authError"), CFS_E_AUTH);
	CHECK_EQ(cfs_retry_classify(403, "userRateLimitExceeded"), CFS_E_RATE);
	CHECK_EQ(cfs_retry_classify(403, "rateLimitExceeded"), CFS_E_RATE);
	CHECK_EQ(cfs_retry_classify(429, ""), CFS_E_RATE);
	CHECK_EQ(cfs_retry_classify(403, "downloadQuotaExceeded"), CFS_E_QUOTA);
	CHECK_EQ(cfs_retry_classify(403, "insufficientFilePermissions"), -EACCES);
	CHECK_EQ(cfs_retry_classify(403, "fileNotDownloadable"), CFS_E_NOTDL);
	CHECK_EQ(cfs_retry_classify(403, "exportSizeLimitExceeded"), CFS_E_TOOBIG);
	CHECK_EQ(cfs_retry_classify(500, "backendError"), CFS_E_SERVER);
	CHECK_EQ(cfs_retry_classify(503, NULL), CFS_E_SERVER);
	CHECK_EQ(cfs_retry_classify(416, "requestedRangeNotSatisfiable"), -ERANGE);
	CHECK_EQ(cfs_retry_classify(400, "invalid"), CFS_E_BADREQ);
	/* writes (drive-api-v3.md §6) */
	CHECK_EQ(cfs_retry_classify(403, "storageQuotaExceeded"), -ENOSPC);
	CHECK_EQ(cfs_retry_classify(403, "insufficientPermissions"), -EACCES);
	CHECK_EQ(cfs_retry_classify(409, "duplicate"), -EEXIST);
	CHECK_EQ(cfs_retry_classify(413, "uploadTooLarge"), -EFBIG);
	CHECK(!cfs_retry_transient(-ENOSPC));
	CHECK(!cfs_retry_transient(-EEXIST));

	CHECK(cfs_retry_transient(CFS_E_NET));
	CHECK(cfs_retry_transient(CFS_E_RATE));
	CHECK(cfs_retry_transient(CFS_E_SERVER));
	CHECK(cfs_retry_transient(CFS_E_PROTO));
	CHECK(!cfs_retry_transient(CFS_E_QUOTA));
	CHECK(!cfs_retry_transient(-ENOENT));
	CHECK(!cfs_retry_transient(-EACCES));
	CHECK(!cfs_retry_transient(CFS_E_AUTH));

	struct cfs_retry_policy p = { .base_ms = 100, .cap_ms = 1000, .max_attempts = 10 };
	uint64_t rng = 42;
	long max_seen = 0;
	for (int attempt = 0; attempt < 10; attempt++) {
		long ceil = 100L << attempt;
		if (ceil > 1000)
			ceil = 1000;
		for (int i = 0; i < 200; i++) {
			long w = cfs_retry_delay_ms(&p, attempt, -1, &rng);
			CHECK(w >= 0 && w <= ceil);
			if (w > max_seen)
				max_seen = w;
		}
	}
	CHECK(max_seen > 500); /* jitter really spreads up to the cap */
	/* Retry-After is a floor, within reason */
	CHECK_EQ(cfs_retry_delay_ms(&p, 0, 3000, &rng), 3000);
	CHECK_EQ(cfs_retry_delay_ms(&p, 0, 999999, &rng), 4000);

	/* the quick first retry: not for rate limits, not for the second failure */
	struct cfs_retry_policy q = { .base_ms = 500, .cap_ms = 32000, .max_attempts = 12,
				      .first_ms = 50 };
	long most_fast = 0, most_rate = 0, most_second = 0;
	for (int i = 0; i < 500; i++) {
		long w = cfs_retry_wait_ms(&q, CFS_E_SERVER, 0, -1, &rng);
		most_fast = w > most_fast ? w : most_fast;
		w = cfs_retry_wait_ms(&q, CFS_E_NET, 0, -1, &rng);
		most_fast = w > most_fast ? w : most_fast;
		w = cfs_retry_wait_ms(&q, CFS_E_RATE, 0, -1, &rng);
		most_rate = w > most_rate ? w : most_rate;
		w = cfs_retry_wait_ms(&q, CFS_E_PROTO, 1, -1, &rng);
		most_second = w > most_second ? w : most_second;
	}
	CHECK(most_fast <= 50 && most_fast > 25);
	CHECK(most_rate <= 500 && most_rate > 250);
	CHECK(most_second <= 1000 && most_second > 500);
	CHECK_EQ(cfs_retry_wait_ms(&q, CFS_E_SERVER, 0, 2000, &rng), 2000); /* Retry-After rules */
	q.first_ms = 0; /* off: the plain schedule */
	for (int i = 0; i < 200; i++)
		most_fast = cfs_retry_wait_ms(&q, CFS_E_SERVER, 0, -1, &rng) > 50 ? 1 : most_fast;
	CHECK_EQ(most_fast, 1);
	return check_done("test_retry");
}
