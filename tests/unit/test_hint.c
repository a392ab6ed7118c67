/* Unit tests: order hints (src/core/hint.h) on a fake clock. */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "hint.h"

#define KB 1000ULL
#define MB 1000000ULL
#define N 1000

static uint64_t inos[N], sizes[N];

/* A hint of N files (inode 1000 + i, 100 KB each) in a shuffled order. */
static struct cfs_hint *make(const struct cfs_hint_opts *o)
{
	uint64_t r = 88172645463325252ULL;
	for (int i = 0; i < N; i++) {
		inos[i] = 1000 + (uint64_t)i;
		sizes[i] = 100 * KB;
	}
	for (int i = N - 1; i > 0; i--) {
		r ^= r << 13;
		r ^= r >> 7;
		r ^= r << 17;
		int j = (int)(r % (uint64_t)(i + 1));
		uint64_t t = inos[i];
		inos[i] = inos[j];
		inos[j] = t;
	}
	struct cfs_hint *h = NULL;
	CHECK_EQ(cfs_hint_new(inos, sizes, N, o, 0, &h), 0);
	return h;
}

/* Hands out what the window allows now; returns how many, checking the
 * positions come in order from *expect (skipping those the reader opened
 * before they were handed out). */
static int drain(struct cfs_hint *h, int64_t now, size_t *expect)
{
	size_t pos;
	uint64_t ino, size;
	int k = 0;
	while (cfs_hint_next(h, now, &pos, &ino, &size)) {
		CHECK(pos >= *expect);
		CHECK_EQ(ino, inos[pos]);
		CHECK_EQ(size, sizes[pos]);
		*expect = pos + 1;
		k++;
	}
	return k;
}

/* A reader in the hinted order: downloads go in that order, ahead of it by
 * the window (ahead_min before a rate is known, then rate x horizon, never
 * above ahead_max), and what it read leaves the window. */
static void follows(void)
{
	struct cfs_hint_opts o = { .ahead_max = 30 * MB, .ahead_min = 5 * MB, .horizon_ms = 2000 };
	struct cfs_hint *h = make(&o);
	size_t expect = 0;
	CHECK_EQ(drain(h, 0, &expect), 50); /* 5 MB of 100 KB files */
	struct cfs_hint_stats st;
	cfs_hint_stats(h, 0, &st);
	CHECK_EQ(st.ahead, 5 * MB);
	CHECK_EQ(st.window, 5 * MB);
	/* 100 files a second (10 MB/s) for 3 s: the window grows to 20 MB */
	int64_t now = 0;
	for (int i = 0; i < 300; i++) {
		now = i * 10;
		CHECK_EQ(cfs_hint_open(h, inos[i], now), CFS_HINT_HIT);
		drain(h, now, &expect);
		cfs_hint_stats(h, now, &st);
		CHECK(st.ahead <= st.window && st.window <= 30 * MB);
		CHECK(expect >= (size_t)i + 1); /* always ahead of the reader */
	}
	cfs_hint_stats(h, now, &st);
	CHECK(st.window >= 19 * MB && st.window <= 21 * MB);
	CHECK_EQ(st.done, 300);
	CHECK_EQ(st.used_bytes, 300 * 100 * KB);
	CHECK(expect >= 300 + 190 && expect <= 300 + 210);
	CHECK_EQ(st.ahead, (expect - 300) * 100 * KB);
	/* a reader far faster still: the window stops at ahead_max */
	for (int i = 300; i < 600; i++)
		cfs_hint_open(h, inos[i], now + 1);
	drain(h, now + 1, &expect); /* 60 MB in 3 s: 40 MB in 2 s */
	cfs_hint_stats(h, now + 1, &st);
	CHECK_EQ(st.window, 30 * MB);
	CHECK_EQ(expect, 900);
	for (int i = 600; i < N; i++)
		CHECK_EQ(cfs_hint_open(h, inos[i], now + 2000 + i), CFS_HINT_HIT);
	CHECK(cfs_hint_done(h));
	CHECK(!cfs_hint_diverged(h));
	cfs_hint_free(h);
}

/* Two workers, each a batch of 32 apart, read a little out of order: every
 * open is a hit; a file read again is neutral. */
static void two_workers(void)
{
	struct cfs_hint_opts o = { .ahead_max = 100 * MB };
	struct cfs_hint *h = make(&o);
	size_t expect = 0;
	drain(h, 0, &expect);
	for (int b = 0; b + 1 < N / 32; b += 2)
		for (int i = 0; i < 32; i++) {
			CHECK_EQ(cfs_hint_open(h, inos[b * 32 + i], b), CFS_HINT_HIT);
			CHECK_EQ(cfs_hint_open(h, inos[(b + 1) * 32 + i], b), CFS_HINT_HIT);
		}
	CHECK_EQ(cfs_hint_open(h, inos[5], 100), CFS_HINT_NEUTRAL);
	CHECK(!cfs_hint_diverged(h));
	cfs_hint_free(h);
}

/* A reader that follows another order (another shuffle of the same files,
 * or other files): 24 misses among the last 32 drop the hint, fewer do
 * not; files far ahead of the hint are misses too. */
static void diverges(void)
{
	struct cfs_hint_opts o = { .ahead_max = 10 * MB, .ahead_min = 2 * MB };
	struct cfs_hint *h = make(&o);
	size_t expect = 0;
	drain(h, 0, &expect);
	for (int i = 0; i < 40; i++)
		CHECK_EQ(cfs_hint_open(h, inos[i], i), CFS_HINT_HIT);
	/* files not in the hint, with a hit now and then: not a divergence */
	for (int i = 0; i < 60; i++) {
		CHECK_EQ(cfs_hint_open(h, 5000000 + (uint64_t)i, 100 + i), CFS_HINT_MISS);
		if (i % 2)
			CHECK_EQ(cfs_hint_open(h, inos[40 + i / 2], 100 + i), CFS_HINT_HIT);
		CHECK(!cfs_hint_diverged(h));
	}
	/* files of the hint far ahead of it: the reader left the order */
	int at = -1;
	for (int i = 0; i < 40 && at < 0; i++) {
		CHECK_EQ(cfs_hint_open(h, inos[N - 1 - i], 200 + i), CFS_HINT_MISS);
		if (cfs_hint_diverged(h))
			at = i;
	}
	CHECK(at >= 5 && at < 24); /* the earlier misses still count among the last 32 */
	cfs_hint_free(h);
}

/* A position nobody opens (a file that failed to read) is passed once the
 * reader is slack positions beyond it: its bytes leave the window. */
static void skipped(void)
{
	struct cfs_hint_opts o = { .ahead_max = 100 * MB, .slack = 16 };
	struct cfs_hint *h = make(&o);
	size_t expect = 0;
	drain(h, 0, &expect);
	for (int i = 0; i < 100; i++)
		if (i != 10)
			CHECK_EQ(cfs_hint_open(h, inos[i], i), CFS_HINT_HIT);
	struct cfs_hint_stats st;
	cfs_hint_stats(h, 100, &st);
	CHECK_EQ(st.done, 100);
	CHECK_EQ(st.skipped_bytes, 100 * KB);
	CHECK_EQ(cfs_hint_open(h, inos[10], 101), CFS_HINT_NEUTRAL); /* late: passed */
	cfs_hint_free(h);
}

/* Refused hand-outs come again, in order; a rewind offers everything
 * handed out and not opened again. */
static void unnext_rewind(void)
{
	struct cfs_hint_opts o = { .ahead_max = 10 * MB, .ahead_min = 1 * MB };
	struct cfs_hint *h = make(&o);
	size_t pos, expect = 0;
	uint64_t ino, size;
	CHECK_EQ(drain(h, 0, &expect), 10);
	cfs_hint_unnext(h, 7);
	CHECK(cfs_hint_next(h, 0, &pos, &ino, &size));
	CHECK_EQ(pos, 7);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(cfs_hint_open(h, inos[i], 0), CFS_HINT_HIT);
	cfs_hint_rewind(h);
	struct cfs_hint_stats st;
	cfs_hint_stats(h, 0, &st);
	CHECK_EQ(st.ahead, 0);
	CHECK_EQ(st.next, 3);
	expect = 3;
	CHECK_EQ(drain(h, 0, &expect), 10);
	cfs_hint_free(h);
}

/* A file hinted twice (sampling with replacement): each open takes its
 * earliest position not opened. */
static void repeats(void)
{
	uint64_t in[6] = { 1, 2, 3, 2, 4, 2 }, sz[6] = { 10, 10, 10, 10, 10, 10 };
	struct cfs_hint_opts o = { .ahead_max = 1000 };
	struct cfs_hint *h = NULL;
	CHECK_EQ(cfs_hint_new(in, sz, 6, &o, 0, &h), 0);
	for (int i = 0; i < 6; i++)
		CHECK_EQ(cfs_hint_open(h, in[i], i), CFS_HINT_HIT);
	CHECK_EQ(cfs_hint_open(h, 2, 7), CFS_HINT_NEUTRAL);
	CHECK(cfs_hint_done(h));
	cfs_hint_free(h);
	CHECK_EQ(cfs_hint_new(in, sz, 6, NULL, 0, &h), -EINVAL);
	uint64_t zero[1] = { 0 };
	CHECK_EQ(cfs_hint_new(zero, sz, 1, &o, 0, &h), -EINVAL);
	CHECK_EQ(cfs_hint_new(in, sz, 0, &o, 0, &h), 0);
	CHECK(cfs_hint_done(h));
	cfs_hint_free(h);
	cfs_hint_free(NULL);
}

int main(void)
{
	follows();
	two_workers();
	diverges();
	skipped();
	unnext_rewind();
	repeats();
	return check_done("test_hint");
}
