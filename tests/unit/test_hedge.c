/* Unit tests: the hedge policy (latency estimators, lateness, budget), fed
 * traces: recorded ones (tests/unit/hedge_trace.h) and made-up ones.  No
 * clock: every time is an argument. */
#include <stdint.h>

#include "check.h"
#include "hedge.h"
#include "hedge_trace.h"

#define MS 1000

/* A request: sent at t, first byte after ttfb, body bytes with the given
 * longest pause.  Returns 1 if the policy found it late before its first
 * byte or during its longest pause (and then whether it granted a hedge in
 * *hedged), feeding the estimators as drive.c does. */
static int request(struct cfs_hedge *h, int64_t t, int64_t ttfb, int64_t pause, int *hedged)
{
	int late = 0;
	*hedged = 0;
	int64_t due = cfs_hedge_late_at(h, t, 0, 0);
	if (due < t + ttfb) {
		late = 1;
		*hedged = cfs_hedge_take(h);
	}
	cfs_hedge_first_byte(h, ttfb);
	int64_t first = t + ttfb;
	/* the longest pause comes right after the first bytes */
	due = cfs_hedge_late_at(h, t, first, first);
	if (due < first + pause) {
		if (!late)
			*hedged = cfs_hedge_take(h);
		late = 1;
	}
	cfs_hedge_body_pause(h, pause);
	return late;
}

/* A deterministic spread around a value: v +- v/4. */
static int64_t spread(uint64_t *s, int64_t v)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return v - v / 4 + (int64_t)((*s >> 33) % (uint64_t)(v / 2 + 1));
}

static void test_warm_up(void)
{
	struct cfs_hedge h;
	cfs_hedge_init(&h, 5);
	/* before enough samples, only a wait past the warm-up limit is late */
	CHECK_EQ(cfs_hedge_late_at(&h, 1000, 0, 0), 1000 + CFS_HEDGE_WARMUP_US);
	CHECK_EQ(cfs_hedge_ttfb_p95(&h), -1);
	for (int i = 0; i < CFS_HEDGE_MIN_SAMPLES - 1; i++) {
		int hedged; /* one of them stalls 20 s: late at 5 s, and hedged */
		CHECK_EQ(request(&h, i * 100 * MS, i == 5 ? 20000 * MS : 20 * MS, 0, &hedged),
			 i == 5);
		CHECK_EQ(hedged, i == 5); /* the warm-up's one credit */
	}
	CHECK_EQ(cfs_hedge_late_at(&h, 0, 0, 0), CFS_HEDGE_WARMUP_US);
	CHECK_EQ(cfs_hedge_ttfb_limit(&h), CFS_HEDGE_WARMUP_US);
	cfs_hedge_first_byte(&h, 20 * MS);
	CHECK_EQ(cfs_hedge_ttfb_p95(&h), 20 * MS); /* the 19th of 20: a stall is the 20th */
	CHECK_EQ(cfs_hedge_ttfb_limit(&h), CFS_HEDGE_FLOOR_US); /* 3 x 20 ms < the floor */
	CHECK_EQ(cfs_hedge_late_at(&h, 5000, 0, 0), 5000 + CFS_HEDGE_FLOOR_US);
	/* the pause estimator warms up on its own */
	CHECK_EQ(cfs_hedge_late_at(&h, 5000, 6000, 7000), 7000 + CFS_HEDGE_WARMUP_US);
}

/* A steady trace: 2,000 requests at 20 ms +- 5 ms, pauses up to 8 ms,
 * one in fifty with a 60 ms first byte: none is late. */
static void test_steady(void)
{
	struct cfs_hedge h;
	cfs_hedge_init(&h, 5);
	uint64_t s = 1;
	int late = 0, hedged;
	for (int i = 0; i < 2000; i++) {
		int64_t ttfb = i % 50 == 7 ? 60 * MS : spread(&s, 20 * MS);
		late += request(&h, (int64_t)i * 50 * MS, ttfb, spread(&s, 4 * MS), &hedged);
	}
	CHECK_EQ(late, 0);
	CHECK(cfs_hedge_ttfb_p95(&h) >= 20 * MS && cfs_hedge_ttfb_p95(&h) <= 25 * MS);
	CHECK_EQ(cfs_hedge_ttfb_limit(&h), CFS_HEDGE_FLOOR_US);
}

/* Replays the recorded trace, with 4 s stalls put in before the first byte
 * of every first_every-th request and in the body of every body_every-th (0:
 * none); requests go one after the other.  Checks that a stalled request is
 * late exactly at the floor (3 x p95 is below it) and no other is; returns
 * the stalled ones, and the hedges granted in *hedges. */
static int replay(struct cfs_hedge *h, size_t first_every, size_t body_every, int *hedges)
{
	size_t n = sizeof(hedge_trace) / sizeof(hedge_trace[0]);
	int64_t t = 0;
	int stalls = 0, hedged;
	*hedges = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t ttfb = hedge_trace[i][0], pause = hedge_trace[i][1];
		int first = first_every && i % first_every == first_every - 1;
		int body = body_every && i % body_every == body_every - 1;
		ttfb = first ? 4000 * MS : ttfb;
		pause = body ? 4000 * MS : pause;
		if (first || body) {
			int64_t due = first ? cfs_hedge_late_at(h, t, 0, 0)
					    : cfs_hedge_late_at(h, t, t + ttfb, t + ttfb);
			CHECK_EQ(due, (first ? t : t + ttfb) + CFS_HEDGE_FLOOR_US);
			stalls++;
		}
		CHECK_EQ(request(h, t, ttfb, pause, &hedged), first || body);
		*hedges += hedged;
		t += ttfb + pause + 5 * MS;
	}
	return stalls;
}

/* The recorded trace as it happened: nothing is late; then with stalls put
 * in (3.3% of the requests): each is late at the floor and hedged. */
static void test_recorded(void)
{
	struct cfs_hedge h;
	int hedges;
	cfs_hedge_init(&h, 5);
	CHECK(sizeof(hedge_trace) / sizeof(hedge_trace[0]) > 300);
	CHECK_EQ(replay(&h, 0, 0, &hedges), 0);
	CHECK_EQ(hedges, 0);
	CHECK(cfs_hedge_ttfb_p95(&h) > 20 * MS && cfs_hedge_ttfb_p95(&h) < 40 * MS);
	CHECK_EQ(cfs_hedge_ttfb_limit(&h), CFS_HEDGE_FLOOR_US);
	CHECK_EQ(cfs_hedge_pause_limit(&h), CFS_HEDGE_FLOOR_US);
	cfs_hedge_init(&h, 5);
	CHECK_EQ(replay(&h, 40, 60, &hedges), 11);
	CHECK_EQ(hedges, 11);
	CHECK_EQ(cfs_hedge_ttfb_limit(&h), CFS_HEDGE_FLOOR_US);
}

/* A slower service: the limit is K x p95, above the floor. */
static void test_late_first_byte(void)
{
	struct cfs_hedge h;
	cfs_hedge_init(&h, 5);
	for (int i = 0; i < 100; i++)
		cfs_hedge_first_byte(&h, (100 + i) * MS); /* 100..199 ms */
	CHECK_EQ(cfs_hedge_ttfb_p95(&h), 194 * MS); /* the 95th of 100 */
	CHECK_EQ(cfs_hedge_ttfb_limit(&h), 582 * MS);
	int64_t sent = 10000 * MS;
	int64_t due = cfs_hedge_late_at(&h, sent, 0, 0);
	CHECK_EQ(due, sent + 582 * MS);
	/* 100 answered requests earned 5 credits: the 20 s stall is hedged at 582 ms */
	CHECK_EQ(cfs_hedge_take(&h), 1);
	/* given up on after 20 s: counts as the limit, not as 20 s */
	cfs_hedge_first_byte(&h, 20000 * MS);
	CHECK_EQ(cfs_hedge_ttfb_p95(&h), 195 * MS); /* the 96th of 101 */
}

/* A body that stops after its first bytes: late after K x p95 of the pauses
 * (or the floor), counted from the last bytes. */
static void test_mid_body_stall(void)
{
	struct cfs_hedge h;
	cfs_hedge_init(&h, 5);
	for (int i = 0; i < 200; i++) {
		cfs_hedge_first_byte(&h, 30 * MS);
		cfs_hedge_body_pause(&h, (i % 100) * MS); /* 0..99 ms */
	}
	CHECK_EQ(cfs_hedge_pause_p95(&h), 94 * MS); /* the window holds 56 of >= 94 ms */
	CHECK_EQ(cfs_hedge_pause_limit(&h), 282 * MS);
	int64_t sent = 50000 * MS, first = sent + 30 * MS, last = first + 400 * MS;
	/* not late while bytes flow: judged from the last of them */
	CHECK_EQ(cfs_hedge_late_at(&h, sent, first, last), last + 282 * MS);
	CHECK_EQ(cfs_hedge_late_at(&h, sent, first, 0), first + 282 * MS);
	CHECK_EQ(cfs_hedge_take(&h), 1);
	/* the stalled body's pause (20 s) enters as the limit */
	cfs_hedge_body_pause(&h, 20000 * MS);
	CHECK_EQ(cfs_hedge_pause_p95(&h), 95 * MS);
}

/* After 300 good requests (credits capped at CFS_HEDGE_BURST), 20 requests
 * sent together all go late (a blip): the budget lets 10 be hedged and
 * refuses the rest.  Then a long run with one request in 25 stalled: every
 * stall is late and hedged, and hedges stay within 5% of the requests. */
static void test_burst_stopped_by_budget(void)
{
	struct cfs_hedge h;
	cfs_hedge_init(&h, 5);
	int64_t t = 0;
	int hedged, n = 0;
	for (int i = 0; i < 300; i++, t += 50 * MS)
		request(&h, t, 20 * MS, 1 * MS, &hedged);
	int64_t due = cfs_hedge_late_at(&h, t, 0, 0);
	CHECK_EQ(due, t + CFS_HEDGE_FLOOR_US);
	for (int i = 0; i < 20; i++)
		n += cfs_hedge_take(&h);
	CHECK_EQ(n, CFS_HEDGE_BURST);
	for (int i = 0; i < 20; i++)
		cfs_hedge_first_byte(&h, 5000 * MS); /* they answer at last (or are given up on) */
	CHECK_EQ(cfs_hedge_take(&h), 1); /* 20 answers earned one credit */
	CHECK_EQ(cfs_hedge_take(&h), 0);
	int late = 0;
	n = 0;
	for (int i = 0; i < 10000; i++, t += 50 * MS) {
		late += request(&h, t, i % 25 == 3 ? 3000 * MS : 20 * MS, 1 * MS, &hedged);
		n += hedged;
	}
	CHECK_EQ(late, 400);
	CHECK_EQ(n, 399); /* the first found the bucket empty */
	/* one in 15 stalled, over one in twenty: slowness is the norm now, the
	 * limit rises past the stalls within a few dozen of them */
	late = 0;
	for (int i = 0; i < 10000; i++, t += 50 * MS)
		late += request(&h, t, i % 15 == 3 ? 3000 * MS : 20 * MS, 1 * MS, &hedged);
	CHECK(late < 60);
	CHECK(cfs_hedge_ttfb_limit(&h) > 3000 * MS);
	/* budget 0: never */
	struct cfs_hedge off;
	cfs_hedge_init(&off, 0);
	for (int i = 0; i < 100; i++)
		cfs_hedge_first_byte(&off, 20 * MS);
	CHECK_EQ(cfs_hedge_take(&off), 0);
}

/* The service turns from 20 ms to 2 s to first byte: requests are late (and
 * hedged) for a while, then the limit has grown past 2 s; back at 20 ms the
 * limit returns to the floor once the window has renewed. */
static void test_latency_shift(void)
{
	struct cfs_hedge h;
	cfs_hedge_init(&h, 5);
	uint64_t s = 7;
	int64_t t = 0;
	int hedged, late = 0, last_late = -1;
	for (int i = 0; i < 300; i++, t += 100 * MS)
		request(&h, t, spread(&s, 20 * MS), 0, &hedged);
	for (int i = 0; i < 600; i++, t += 3000 * MS) {
		if (request(&h, t, spread(&s, 2000 * MS), 0, &hedged)) {
			late++;
			last_late = i;
		}
	}
	CHECK(late > 0 && late < 60);  /* followed within a few dozen requests */
	CHECK(last_late < 60);
	CHECK(cfs_hedge_ttfb_limit(&h) >= 2500 * MS);
	for (int i = 0; i < 600; i++, t += 100 * MS)
		request(&h, t, spread(&s, 20 * MS), 0, &hedged);
	CHECK_EQ(cfs_hedge_ttfb_limit(&h), CFS_HEDGE_FLOOR_US);
}

int main(void)
{
	test_warm_up();
	test_steady();
	test_recorded();
	test_late_first_byte();
	test_mid_body_stall();
	test_burst_stopped_by_budget();
	test_latency_shift();
	return check_done("test_hedge");
}
