/* Unit tests: the API call token bucket. */
#include "check.h"
#include "pace.h"

int main(void)
{
	struct cfs_pace p;
	cfs_pace_init(&p, 10, 5, 0); /* 10/s, burst 5 */
	for (int i = 0; i < 5; i++)
		CHECK_EQ(cfs_pace_reserve(&p, 0), 0); /* the burst is free */
	CHECK_EQ(cfs_pace_reserve(&p, 0), 100000); /* then one every 100 ms, in order */
	CHECK_EQ(cfs_pace_reserve(&p, 0), 200000);
	CHECK_EQ(p.waits, 2);
	/* a second later the debt (2 tokens) is paid and 8 more accrued, capped at 5 */
	CHECK_EQ(cfs_pace_reserve(&p, 1000000), 0);
	CHECK(p.tokens <= 5);
	/* long-run rate: 1000 calls over 10 s never get ahead of 10/s + burst */
	struct cfs_pace q;
	cfs_pace_init(&q, 10, 5, 0);
	int64_t t = 0;
	for (int i = 0; i < 105; i++)
		t += cfs_pace_reserve(&q, t); /* a caller that sleeps as told */
	CHECK(t >= 9900000 && t <= 10000000);
	cfs_pace_cleanup(&q);
	/* rate 0: no pacing */
	struct cfs_pace off;
	cfs_pace_init(&off, 0, 1, 0);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(cfs_pace_reserve(&off, 0), 0);
	cfs_pace_cleanup(&off);
	cfs_pace_cleanup(&p);
	return check_done("test_pace");
}
