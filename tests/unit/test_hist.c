/* Unit tests: the counters' history (src/core/hist.h) with a fake clock:
 * pushes one a second, a late sampler's gap (skipped ticks, no burst), a
 * clock that does not move on, wrap-around past CFS_HIST_LEN samples, "the
 * last N seconds", and the wire pages: size limits, paging a full ring
 * through pages and reading it back exactly, and malformed pages. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "err.h"
#include "hist.h"

#define T0 1764912345000ull /* unix ms */

static struct cfs_hist_sample sample(uint64_t k)
{
	return (struct cfs_hist_sample){ .read_bytes = k * 1048576, .drive_bytes = k * 1000,
					 .drive_requests = k, .api_rate_milli = 200000 - k,
					 .cache_hits = 3 * k, .cache_misses = k / 2,
					 .uploads_pending = k % 3, .upload_bytes = k * 7,
					 .upload_bytes_left = 1000000 - k };
}

static int same(const struct cfs_hist_sample *a, const struct cfs_hist_sample *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

static void ring(void)
{
	static struct cfs_hist h;
	cfs_hist_init(&h);
	CHECK(cfs_hist_get(&h, 0) == NULL);
	CHECK_EQ(cfs_hist_oldest(&h), 0);
	CHECK_EQ(cfs_hist_since(&h, 0), 0);
	struct cfs_hist_sample s = sample(1);
	CHECK_EQ(cfs_hist_push(&h, &s, T0), 0);
	CHECK_EQ(cfs_hist_push(&h, &s, T0), -EINVAL);      /* time must move on */
	CHECK_EQ(cfs_hist_push(&h, &s, T0 - 5), -EINVAL);  /* and never back */
	CHECK_EQ(h.end, 1);
	CHECK(cfs_hist_get(&h, 0)->t_ms == T0 && cfs_hist_get(&h, 0)->read_bytes == 1048576);
	CHECK(cfs_hist_get(&h, 1) == NULL);

	/* a sampler that missed 3 s: a gap, the times tell */
	for (uint64_t k = 1; k < 10; k++) {
		s = sample(k);
		CHECK_EQ(cfs_hist_push(&h, &s, T0 + (k < 5 ? k : k + 3) * 1000), 0);
	}
	CHECK_EQ(h.end, 10);
	CHECK(cfs_hist_get(&h, 5)->t_ms - cfs_hist_get(&h, 4)->t_ms == 4000);
	CHECK_EQ(cfs_hist_since(&h, T0 + 4000), 4);
	CHECK_EQ(cfs_hist_since(&h, T0 + 4001), 5);        /* inside the gap: the one after */
	CHECK_EQ(cfs_hist_since(&h, T0 + 6000), 5);
	CHECK_EQ(cfs_hist_since(&h, T0 + 99000), 10);      /* none */

	/* wrap-around: 1000 more, the ring keeps the last 600 */
	for (uint64_t k = 10; k < 1010; k++) {
		s = sample(k);
		CHECK_EQ(cfs_hist_push(&h, &s, T0 + (k + 3) * 1000), 0);
	}
	CHECK_EQ(h.end, 1010);
	CHECK_EQ(cfs_hist_oldest(&h), 1010 - CFS_HIST_LEN);
	CHECK(cfs_hist_get(&h, 409) == NULL);
	CHECK(cfs_hist_get(&h, 410)->drive_requests == 410);
	CHECK(cfs_hist_get(&h, 1009)->drive_requests == 1009);
	CHECK(cfs_hist_get(&h, 1010) == NULL);
	CHECK_EQ(cfs_hist_since(&h, 0), 410);               /* older than all: the oldest */
	/* the last 60 seconds of the newest sample's time: 60 samples */
	uint64_t newest = cfs_hist_get(&h, 1009)->t_ms;
	CHECK_EQ(h.end - cfs_hist_since(&h, newest - 59999), 60);
}

static void schedule(void)
{
	/* on time, or a little late: the next tick of the grid */
	CHECK_EQ(cfs_hist_next_due(1000, 1000, 1000), 2000);
	CHECK_EQ(cfs_hist_next_due(1000, 1300, 1000), 2000);
	CHECK_EQ(cfs_hist_next_due(1000, 1999, 1000), 2000);
	/* a whole interval late or more: the missed ticks are skipped, and the
	 * next sample is an interval after this one */
	CHECK_EQ(cfs_hist_next_due(1000, 2000, 1000), 3000);
	CHECK_EQ(cfs_hist_next_due(1000, 2500, 1000), 3500);
	CHECK_EQ(cfs_hist_next_due(1000, 7999, 1000), 8999);

	/* a fake clock drives a sampler that stalls for 4.5 s once: one
	 * sample per second, then a gap, never two samples in one tick */
	static struct cfs_hist h;
	cfs_hist_init(&h);
	int64_t now = 0, due = 0;
	int taken = 0;
	while (now < 20000) {
		if (now >= due) {
			struct cfs_hist_sample s = sample((uint64_t)taken++);
			CHECK_EQ(cfs_hist_push(&h, &s, T0 + (uint64_t)now), 0);
			due = cfs_hist_next_due(due, now, 1000);
		}
		now += now == 5000 ? 4500 : 10; /* the stall */
	}
	CHECK_EQ(taken, 17); /* 0..5 s, 9.5 s, then 10.5..19.5 s: 6..9 s were missed */
	for (uint64_t q = 1; q < h.end; q++) {
		uint64_t dt = cfs_hist_get(&h, q)->t_ms - cfs_hist_get(&h, q - 1)->t_ms;
		CHECK(dt == 1000 || (q == 6 && dt == 4500));
	}
}

static void pages(void)
{
	static struct cfs_hist h, back;
	struct cfs_buf b = { 0 };
	uint64_t next = 0, end = 0;
	cfs_hist_init(&h);
	cfs_hist_init(&back);

	/* empty: a header alone */
	CHECK_EQ(cfs_hist_page(&h, 0, CFS_HIST_PAGE_MAX, &b), 0);
	CHECK_STR(b.data, "{\"interval_s\":1,\"from\":0,\"next\":0,\"end\":0}\n");
	CHECK_EQ(cfs_hist_parse_page(b.data, &back, &next, &end), 0);
	CHECK(next == 0 && end == 0 && back.end == 0);

	/* full ring, large numbers: pages of at most the limit, read back */
	for (uint64_t k = 0; k < 700; k++) {
		struct cfs_hist_sample s = sample(k);
		s.read_bytes += 1ull << 50;
		s.upload_bytes += 1ull << 52;
		CHECK_EQ(cfs_hist_push(&h, &s, T0 + k * 1000), 0);
	}
	uint64_t from = 0;
	int n = 0;
	do {
		cfs_buf_reset(&b);
		CHECK_EQ(cfs_hist_page(&h, from, CFS_HIST_PAGE_MAX, &b), 0);
		CHECK(b.len + 1 <= CFS_HIST_PAGE_MAX);
		CHECK_EQ(cfs_hist_parse_page(b.data, &back, &next, &end), 0);
		CHECK(next > from && end == 700);
		from = next;
	} while (next < end && ++n < 20);
	CHECK(n >= 1 && n < 20); /* more than one page: 600 samples pass 60000 bytes */
	CHECK_EQ(back.end, CFS_HIST_LEN);
	for (uint64_t q = 100; q < 700; q++)
		CHECK(same(cfs_hist_get(&h, q), cfs_hist_get(&back, q - 100)));

	/* from past the oldest, a later from, a from at the end */
	cfs_buf_reset(&b);
	CHECK_EQ(cfs_hist_page(&h, 650, CFS_HIST_PAGE_MAX, &b), 0);
	CHECK(strncmp(b.data, "{\"interval_s\":1,\"from\":650,\"next\":700,\"end\":700}\n", 49) == 0);
	cfs_buf_reset(&b);
	CHECK_EQ(cfs_hist_page(&h, 700, CFS_HIST_PAGE_MAX, &b), 0);
	CHECK_STR(b.data, "{\"interval_s\":1,\"from\":700,\"next\":700,\"end\":700}\n");

	/* a limit that holds only the header: -ENOSPC, never an empty page
	 * that says samples are left (a reader would ask forever) */
	cfs_buf_reset(&b);
	CHECK_EQ(cfs_hist_page(&h, 0, 80, &b), -ENOSPC);
	cfs_buf_reset(&b);
	CHECK_EQ(cfs_hist_page(&h, 0, 400, &b), 0); /* one sample fits */
	CHECK(strstr(b.data, "\"from\":100,\"next\":101,") != NULL);
	cfs_buf_cleanup(&b);
}

static void malformed(void)
{
	static struct cfs_hist h;
	uint64_t next, end;
	static const char *const bad[] = {
		"",
		"{}",
		"not json\n",
		"{\"interval_s\":1,\"from\":0,\"next\":1}\n",                /* no end */
		"{\"interval_s\":1,\"from\":2,\"next\":1,\"end\":3}\n",      /* next < from */
		"{\"interval_s\":1,\"from\":0,\"next\":1,\"end\":1}\n{\"read_bytes\":1}\n", /* no t_ms */
		"{\"interval_s\":1,\"from\":0,\"next\":1,\"end\":1}\n{\"t_ms\":-1}\n",
		"{\"interval_s\":1,\"from\":0,\"next\":1,\"end\":1}\n{\"t_ms\":1.5}\n",
		"{\"interval_s\":1,\"from\":0,\"next\":2,\"end\":2}\n{\"t_ms\":5}\n{\"t_ms\":5}\n",
		"{\"interval_s\":1,\"from\":0,\"next\":1,\"end\":1}\n{\"t_ms\":5}\n[1]\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cfs_hist_init(&h);
		int rc = cfs_hist_parse_page(bad[i], &h, &next, &end);
		if (rc != CFS_E_PROTO)
			fprintf(stderr, "accepted: %s\n", bad[i]);
		CHECK_EQ(rc, CFS_E_PROTO);
	}
	/* unknown names are skipped (a newer daemon), missing counters are 0 */
	cfs_hist_init(&h);
	CHECK_EQ(cfs_hist_parse_page("{\"interval_s\":1,\"from\":3,\"next\":4,\"end\":9,\"x\":1}\n"
				     "{\"t_ms\":7,\"new_counter\":5,\"drive_bytes\":11}\n",
				     &h, &next, &end), 0);
	CHECK(next == 4 && end == 9 && h.end == 1);
	CHECK(cfs_hist_get(&h, 0)->t_ms == 7 && cfs_hist_get(&h, 0)->drive_bytes == 11 &&
	      cfs_hist_get(&h, 0)->read_bytes == 0);
}

int main(void)
{
	ring();
	schedule();
	pages();
	malformed();
	return check_done("test_hist");
}
