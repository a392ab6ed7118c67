/* Unit tests: the API call budget (token bucket, AIMD, two classes), on a
 * fake clock. */
#include "check.h"
#include "pace.h"

#define S 1000000LL /* one second in microseconds */

static void bucket(void)
{
	struct cfs_pace p;
	cfs_pace_init(&p, 10, 5, 0); /* ceiling 10/s: starts at 9.5/s, burst 5 */
	CHECK(p.rate > 9.49 && p.rate < 9.51);
	for (int i = 0; i < 5; i++)
		CHECK_EQ(cfs_pace_reserve(&p, 0, CFS_PACE_URGENT), 0); /* the burst is free */
	CHECK_EQ(cfs_pace_reserve(&p, 0, CFS_PACE_URGENT), 105263); /* then in order */
	CHECK_EQ(cfs_pace_reserve(&p, 0, CFS_PACE_URGENT), 210526);
	CHECK_EQ(p.waits, 2);
	/* a second later the debt is paid and the bucket refilled, capped at 5 */
	CHECK_EQ(cfs_pace_reserve(&p, S, CFS_PACE_URGENT), 0);
	CHECK(p.tokens <= 5);
	/* growth: without refusals, 5% of the ceiling a second, up to it */
	CHECK(p.rate > 9.99 && p.rate <= 10);
	CHECK_EQ(cfs_pace_reserve(&p, 10 * S, CFS_PACE_URGENT), 0);
	CHECK(p.rate == 10);
	/* two refusals are an accident, the third in a second a pattern: all
	 * replies refused, so the rate is halved (the most one decrease takes) */
	cfs_pace_reply(&p, 10 * S, 1);
	cfs_pace_reply(&p, 10 * S, 1);
	CHECK(p.rate == 10 && p.cuts == 0);
	cfs_pace_reply(&p, 10 * S, 1);
	CHECK(p.rate > 4.99 && p.rate < 5.01);
	CHECK_EQ(p.limited, 3);
	cfs_pace_reserve(&p, 11 * S, CFS_PACE_URGENT); /* held for a second after a cut */
	CHECK(p.rate > 4.99 && p.rate < 5.01);
	cfs_pace_reserve(&p, 13 * S, CFS_PACE_URGENT); /* then +0.5/s */
	CHECK(p.rate > 5.99 && p.rate < 6.01);
	cfs_pace_cleanup(&p);

	/* long-run rate: a caller that sleeps as told never gets ahead */
	struct cfs_pace q;
	cfs_pace_init(&q, 10, 5, 0);
	int64_t t = 0;
	for (int i = 0; i < 105; i++)
		t += cfs_pace_reserve(&q, t, CFS_PACE_URGENT);
	CHECK(t >= 9 * S && t <= 11 * S);
	cfs_pace_cleanup(&q);

	/* ceiling 0: no pacing */
	struct cfs_pace off;
	cfs_pace_init(&off, 0, 1, 0);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(cfs_pace_reserve(&off, 0, CFS_PACE_BACKGROUND), 0);
	CHECK(cfs_pace_rate(&off) == 0);
	cfs_pace_cleanup(&off);
}

/* Background calls leave the reserve to urgent ones. */
static void classes(void)
{
	struct cfs_pace p;
	cfs_pace_init(&p, 100, 20, 0); /* 95/s, burst 20, reserve 10 */
	int bg = 0;
	while (cfs_pace_reserve(&p, 0, CFS_PACE_BACKGROUND) == 0)
		bg++;
	CHECK_EQ(bg, 10);
	/* the background waits without taking: asking again changes nothing */
	int64_t w = cfs_pace_reserve(&p, 0, CFS_PACE_BACKGROUND);
	CHECK(w > 0 && w <= S / 95 + 1);
	CHECK_EQ(cfs_pace_reserve(&p, 0, CFS_PACE_BACKGROUND), w);
	/* ten urgent calls still go at once */
	for (int i = 0; i < 10; i++)
		CHECK_EQ(cfs_pace_reserve(&p, 0, CFS_PACE_URGENT), 0);
	CHECK(cfs_pace_reserve(&p, 0, CFS_PACE_URGENT) > 0);
	cfs_pace_cleanup(&p);

	/* a trace: background saturating at the full rate for 10 s, with an
	 * urgent call every 100 ms: no urgent call ever waits, and the
	 * background gets the rest of the budget */
	cfs_pace_init(&p, 100, 20, 0);
	int64_t next_bg = 0, urgent_waited = 0;
	int got_bg = 0, urgent = 0;
	for (int64_t now = 0; now < 10 * S; now += 1000) {
		if (now % (100 * 1000) == 0) {
			urgent_waited += cfs_pace_reserve(&p, now, CFS_PACE_URGENT);
			urgent++;
		}
		while (now >= next_bg) {
			int64_t wait = cfs_pace_reserve(&p, now, CFS_PACE_BACKGROUND);
			if (wait) {
				next_bg = now + wait;
				break;
			}
			got_bg++;
		}
	}
	CHECK_EQ(urgent_waited, 0);
	CHECK_EQ(urgent, 100);
	/* budget over 10 s: 20 in the bucket (10 of them kept back) + 95/s
	 * growing to 100/s within a second */
	CHECK(got_bg + urgent >= 960 && got_bg + urgent <= 1020);
	cfs_pace_cleanup(&p);
}

/* AIMD against a simulated Drive enforcing 200/s (a bucket of 200): a
 * client asking as fast as the pacer lets it, with a ceiling above the
 * quota, settles near the quota with few refusals. */
static void aimd(void)
{
	struct cfs_pace p;
	cfs_pace_init(&p, 400, 0, 0); /* ceiling 400/s: twice what "Drive" allows */
	double drive = 200;           /* Drive's bucket */
	int64_t last = 0, next = 0;
	int ok = 0, refused = 0, refused_late = 0;
	for (int64_t now = 0; now < 60 * S; now += 500) {
		drive += (double)(now - last) * 200 / 1e6;
		if (drive > 200)
			drive = 200;
		last = now;
		while (now >= next) {
			int64_t wait = cfs_pace_reserve(&p, now, CFS_PACE_BACKGROUND);
			if (wait) {
				next = now + wait;
				break;
			}
			if (drive >= 1) {
				drive -= 1;
				ok++;
				cfs_pace_reply(&p, now, 0);
			} else {
				refused++;
				if (now > 30 * S)
					refused_late++;
				cfs_pace_reply(&p, now, 1);
			}
		}
	}
	CHECK(p.cuts > 0);
	CHECK(p.limited == (uint64_t)refused);
	CHECK(ok >= 0.85 * 200 * 60);                 /* near the quota */
	CHECK(refused < ok / 20);                     /* few refusals (< 5%) */
	CHECK(refused_late < 30 * 200 * 3 / 100);     /* settled: < 3% later on */
	CHECK(p.rate >= p.floor && p.rate <= p.ceiling);
	/* one decrease per 250 ms however many refusals arrive together */
	uint64_t cuts = p.cuts;
	for (int i = 0; i < 50; i++)
		cfs_pace_reply(&p, 61 * S + i * 1000, 1);
	CHECK_EQ(p.cuts, cuts + 1);
	/* never below the floor */
	for (int i = 0; i < 300; i++)
		cfs_pace_reply(&p, 70 * S + i * S / 3, 1);
	CHECK(p.rate >= p.floor - 1e-9 && p.rate <= p.floor + 1e-9);
	cfs_pace_cleanup(&p);
}

/* Drive refusing 3% of requests at random, whatever the rate (sporadic
 * 403s): the pacer keeps its rate; the refused calls are only retried. */
static void sporadic(void)
{
	struct cfs_pace p;
	cfs_pace_init(&p, 200, 0, 0);
	uint64_t rng = 12345;
	int64_t next = 0;
	int sent = 0, refused = 0;
	for (int64_t now = 0; now < 30 * S; now += 500) {
		while (now >= next) {
			int64_t wait = cfs_pace_reserve(&p, now, CFS_PACE_BACKGROUND);
			if (wait) {
				next = now + wait;
				break;
			}
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			int no = rng % 100 < 3;
			refused += no;
			sent++;
			cfs_pace_reply(&p, now, no);
		}
	}
	CHECK(refused > 100);
	CHECK(p.rate > 0.85 * 200);
	CHECK(sent > 0.9 * 200 * 30);
	cfs_pace_cleanup(&p);
}

/* The creation budget (drive.c's numbers): start at 3/s, grow while Drive
 * accepts, cut on a pattern of refusals over 4 s, settle at Drive's pace. */
static const struct cfs_pace_policy create = { .start = 3, .window_us = 4 * S, .min_refused = 2 };

/* A fake Drive that accepts drive_rate creations a second (a bucket of
 * drive_burst): a caller that sleeps as told, on a fake clock, for secs
 * seconds.  Returns the creations accepted; *refused those refused. */
static int run_against(struct cfs_pace *p, double drive_rate, double drive_burst, int secs,
		       int *refused)
{
	double tokens = drive_burst;
	int64_t t = 0, last = 0;
	int ok = 0;
	*refused = 0;
	while (t < secs * S) {
		t += cfs_pace_reserve(p, t, CFS_PACE_URGENT);
		tokens += (double)(t - last) * drive_rate / 1e6;
		if (tokens > drive_burst)
			tokens = drive_burst;
		last = t;
		int no = drive_rate > 0 && tokens < 1;
		if (!no)
			tokens -= 1;
		cfs_pace_reply(p, t, no);
		ok += !no;
		*refused += no;
	}
	return ok;
}

static void creations(void)
{
	struct cfs_pace p;
	/* the start: Drive's sustained rate, whatever the ceiling */
	cfs_pace_init_policy(&p, 10, 4, &create, 0);
	CHECK(p.rate == 3);
	CHECK(p.growth > 0.49 && p.growth < 0.51); /* 5% of the ceiling a second */
	/* one refusal in 4 s is an accident; the second a pattern */
	cfs_pace_reply(&p, 0, 0);
	cfs_pace_reply(&p, 0, 1);
	CHECK(p.rate == 3 && p.cuts == 0);
	cfs_pace_reply(&p, 3 * S, 1);
	CHECK(p.cuts == 1 && p.rate < 3 && p.rate >= 1.5);
	double cut = p.rate;
	cfs_pace_reserve(&p, 6 * S, CFS_PACE_URGENT); /* held for the window after a cut */
	CHECK(p.rate == cut);
	cfs_pace_reserve(&p, 9 * S, CFS_PACE_URGENT); /* then +0.5/s a second */
	CHECK(p.rate > cut + 0.99 && p.rate < cut + 1.01);
	cfs_pace_cleanup(&p);

	/* a ceiling under the start: the ceiling */
	cfs_pace_init_policy(&p, 2, 4, &create, 0);
	CHECK(p.rate == 2);
	cfs_pace_cleanup(&p);

	/* Drive accepting everything: the rate grows to the ceiling (10/s) in
	 * 14 s, so 1,000 files take about 110 s, not 500 at a fixed 2/s */
	int refused;
	cfs_pace_init_policy(&p, 10, 4, &create, 0);
	int ok = run_against(&p, 0, 0, 120, &refused);
	CHECK(p.rate == 10);
	CHECK(ok > 1000 && refused == 0);
	cfs_pace_cleanup(&p);

	/* Drive accepting 3/s (a burst of 3): the rate settles around it, at
	 * least 90% of Drive's pace gets through and few calls are refused */
	cfs_pace_init_policy(&p, 10, 4, &create, 0);
	ok = run_against(&p, 3, 3, 300, &refused);
	CHECK(ok >= 0.9 * 3 * 300);
	CHECK(refused < ok / 5);
	CHECK(p.cuts > 0 && p.rate > 1.5 && p.rate < 5);
	printf("creations at 3/s for 300 s: %d accepted, %d refused, %llu cuts, rate now %.2f\n", ok,
	       refused, (unsigned long long)p.cuts, p.rate);
	cfs_pace_cleanup(&p);
}

/* Calls of different costs (Drive's quota units): a download's 200 units
 * pace as 40 gets of 5; a background call costlier than the bucket allows
 * beside the reserve still gets its turn. */
static void costs(void)
{
	struct cfs_pace p;
	cfs_pace_init(&p, 1000, 400, 0); /* 950 units/s, burst 400, reserve 200 */
	CHECK_EQ(cfs_pace_reserve_n(&p, 0, CFS_PACE_URGENT, 200), 0);
	CHECK_EQ(cfs_pace_reserve_n(&p, 0, CFS_PACE_URGENT, 200), 0); /* the burst spent */
	/* the next download waits for its 200 units: 200 / 950 s */
	CHECK_EQ(cfs_pace_reserve_n(&p, 0, CFS_PACE_URGENT, 200), 210526);
	/* a get costs 5: it waits behind the download's debt, 5 / 950 s more */
	CHECK_EQ(cfs_pace_reserve_n(&p, 0, CFS_PACE_URGENT, 5), 215789);
	cfs_pace_cleanup(&p);

	/* background: it takes its units only with the reserve left above */
	cfs_pace_init(&p, 1000, 400, 0);
	CHECK_EQ(cfs_pace_reserve_n(&p, 0, CFS_PACE_BACKGROUND, 200), 0); /* 400 -> 200 */
	int64_t w = cfs_pace_reserve_n(&p, 0, CFS_PACE_BACKGROUND, 200);
	CHECK(w > 0 && w <= 200 * S / 950 + 1); /* nothing taken: 200 must come back */
	CHECK_EQ(cfs_pace_reserve_n(&p, 0, CFS_PACE_BACKGROUND, 5), w - 195 * S / 950);
	CHECK_EQ(cfs_pace_reserve_n(&p, w, CFS_PACE_BACKGROUND, 200), 0);
	cfs_pace_cleanup(&p);

	/* a bucket too small for the call beside the reserve: the call waits for
	 * a full bucket, then takes its whole cost, the bucket going below zero */
	cfs_pace_init(&p, 1000, 100, 0); /* reserve 50: room for 50 */
	CHECK_EQ(cfs_pace_reserve_n(&p, 0, CFS_PACE_BACKGROUND, 200), 0);
	CHECK(p.tokens < -99 && p.tokens > -101);
	w = cfs_pace_reserve_n(&p, 0, CFS_PACE_BACKGROUND, 200);
	CHECK(w > 0 && w <= 200 * S / 950 + 1); /* back to a full 100: 200 units */
	CHECK_EQ(cfs_pace_reserve_n(&p, w, CFS_PACE_BACKGROUND, 200), 0);
	cfs_pace_cleanup(&p);

	/* a cost of 1 is a call: cfs_pace_reserve is cfs_pace_reserve_n(.., 1) */
	struct cfs_pace a, b;
	cfs_pace_init(&a, 10, 5, 0);
	cfs_pace_init(&b, 10, 5, 0);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(cfs_pace_reserve(&a, 0, CFS_PACE_URGENT),
			 cfs_pace_reserve_n(&b, 0, CFS_PACE_URGENT, 1));
	cfs_pace_cleanup(&a);
	cfs_pace_cleanup(&b);
}

int main(void)
{
	costs();
	bucket();
	classes();
	aimd();
	sporadic();
	creations();
	return check_done("test_pace");
}
