/* Unit tests: the reader (src/core/reader.c) through its seam (reader.h), over a
 * real store in a temporary folder.  A scripted fake stands in for Drive:
 * the bytes of (file id, offset) come from a generator, and each call takes
 * the next step scripted for its file (succeed, cut, fail, -ESTALE, a short
 * body, a resend from an earlier offset, block until released) or succeeds.
 * A fake clock steers how long a refusal is believed.  Nothing sleeps: the
 * test waits on the fake's condition variable, or polls the reader's
 * counters, always against a deadline, so a bug fails rather than hangs. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "err.h"
#include "log.h"
#include "reader.h"
#include "store.h"
#include "store_util.h"

#define BS K64
#define DEADLINE_S 5
#define MAXCALLS 1024
#define MAXSTEPS 16
#define PIECE 4000 /* the fake hands bytes over in pieces that straddle blocks */

enum { OK, CUT, FAIL, STALE, SHORT, RESEND, GAP, BLOCK };

struct step {
	char id[16];
	int what;
	size_t n; /* CUT, SHORT, RESEND, GAP: bytes before the event */
	int rc;   /* CUT, FAIL: what the call returns */
};

struct call {
	char id[16];
	int64_t off;
	size_t len;
	int prio;
};

struct fake {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* any change below */
	struct step steps[MAXSTEPS];
	int nsteps;
	struct call calls[MAXCALLS];
	int ncalls, returned, blocked, releases, cancelled, cancels;
	int sink_refused; /* a negative sink return: the reader saw a gap or surplus */
	char stale_rev[16]; /* a call for this revision answers -ESTALE */
	int64_t now;
};

static struct fake F = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

/* ---- the generator ---------------------------------------------------------- */

static char gen(const char *id, int64_t x)
{
	uint64_t h = 1469598103934665603ULL;
	for (const char *p = id; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	return (char)(mix(h ^ (uint64_t)(x / 8)) >> (8 * (x % 8)));
}

static int bytes_ok(const char *buf, const char *id, int64_t off, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (buf[i] != gen(id, off + (int64_t)i))
			return 0;
	return 1;
}

/* ---- the fake Drive --------------------------------------------------------- */

static void deadline(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += DEADLINE_S;
}

/* F.lock held: waits for a change; 0 past the deadline. */
static int fake_wait(const struct timespec *ts)
{
	return pthread_cond_timedwait(&F.cond, &F.lock, ts) == 0;
}

static void fake_reset(void)
{
	pthread_mutex_lock(&F.lock);
	memset(F.steps, 0, sizeof(F.steps));
	F.nsteps = F.ncalls = F.returned = F.blocked = F.releases = 0;
	F.cancelled = F.cancels = F.sink_refused = 0;
	F.stale_rev[0] = 0;
	F.now = 1000;
	pthread_mutex_unlock(&F.lock);
}

static void script(const char *id, int what, size_t n, int rc)
{
	pthread_mutex_lock(&F.lock);
	struct step *s = &F.steps[F.nsteps++];
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->what = what;
	s->n = n;
	s->rc = rc;
	pthread_mutex_unlock(&F.lock);
}

/* F.lock held: the first step scripted for id, taken; else OK. */
static struct step take_step(const char *id)
{
	struct step s = { .what = OK };
	for (int i = 0; i < F.nsteps; i++) {
		if (strcmp(F.steps[i].id, id) == 0) {
			s = F.steps[i];
			memmove(&F.steps[i], &F.steps[i + 1], (size_t)(F.nsteps - i - 1) * sizeof(s));
			F.nsteps--;
			break;
		}
	}
	return s;
}

/* Hands the generator's bytes [from, to) to the sink; 0, or the sink's
 * non-zero answer. */
static int deliver(const char *id, int64_t from, int64_t to, cfs_drive_sink_fn sink, void *arg,
		   size_t *got)
{
	char piece[PIECE];
	while (from < to) {
		size_t n = to - from < PIECE ? (size_t)(to - from) : PIECE;
		for (size_t i = 0; i < n; i++)
			piece[i] = gen(id, from + (int64_t)i);
		int s = sink(arg, from, piece, n);
		*got += n;
		if (s)
			return s;
		from += (int64_t)n;
	}
	return 0;
}

/* F.lock held: a BLOCK step waits for fake_release or a cancel. */
static int block_here(void)
{
	struct timespec ts;
	deadline(&ts);
	ts.tv_sec += DEADLINE_S; /* outlives the test's own waits */
	F.blocked++;
	pthread_cond_broadcast(&F.cond);
	while (!F.releases && !F.cancelled)
		if (!fake_wait(&ts))
			break;
	F.blocked--;
	if (F.releases && !F.cancelled) {
		F.releases--;
		return 0;
	}
	return -ECANCELED;
}

static int fake_fetch(void *io, const char *id, const char *rev, int64_t size, int64_t off,
		      size_t len, cfs_drive_sink_fn sink, void *arg, size_t *got, int prio)
{
	(void)io;
	*got = 0;
	pthread_mutex_lock(&F.lock);
	if (F.ncalls < MAXCALLS) {
		struct call *c = &F.calls[F.ncalls];
		snprintf(c->id, sizeof(c->id), "%s", id);
		c->off = off;
		c->len = len;
		c->prio = prio;
	}
	F.ncalls++;
	pthread_cond_broadcast(&F.cond);
	struct step s = take_step(id);
	int rc = F.cancelled ? -ECANCELED : 0;
	if (!rc && rev && strcmp(rev, F.stale_rev) == 0)
		rc = -ESTALE;
	if (!rc && s.what == BLOCK)
		rc = block_here();
	pthread_mutex_unlock(&F.lock);
	int64_t end = off + (int64_t)len > size ? size : off + (int64_t)len;
	int64_t cut = off + (int64_t)s.n < end ? off + (int64_t)s.n : end;
	int d = 0; /* the sink's last answer: > 0 it has all it wants, < 0 it refused */
	if (!rc && s.what == STALE)
		rc = -ESTALE;
	else if (!rc && s.what == FAIL)
		rc = s.rc;
	else if (!rc && s.what != OK && s.what != BLOCK)
		d = deliver(id, off, cut, sink, arg, got);
	else if (!rc)
		d = deliver(id, off, end, sink, arg, got);
	if (!rc && !d && s.what == RESEND) /* a retry from half way back: at tells */
		d = deliver(id, off + (cut - off) / 2, end, sink, arg, got);
	if (!rc && !d && s.what == GAP) /* 100 bytes missing: a broken client */
		d = deliver(id, cut + 100, end, sink, arg, got);
	if (!rc && !d && s.what == CUT)
		rc = s.rc;
	pthread_mutex_lock(&F.lock);
	if (d < 0) { /* a gap or surplus: the real client would retry; count it */
		F.sink_refused++;
		rc = -EIO;
	}
	F.returned++;
	pthread_cond_broadcast(&F.cond);
	pthread_mutex_unlock(&F.lock);
	return rc;
}

static void fake_cancel(void *io)
{
	(void)io;
	pthread_mutex_lock(&F.lock);
	F.cancelled = 1;
	F.cancels++;
	pthread_cond_broadcast(&F.cond);
	pthread_mutex_unlock(&F.lock);
}

static int64_t fake_now(void *io)
{
	(void)io;
	pthread_mutex_lock(&F.lock);
	int64_t t = F.now;
	pthread_mutex_unlock(&F.lock);
	return t;
}

/* Drive's content of every file moves on from revision rev ("": none). */
static void stale(const char *rev)
{
	pthread_mutex_lock(&F.lock);
	snprintf(F.stale_rev, sizeof(F.stale_rev), "%s", rev);
	pthread_mutex_unlock(&F.lock);
}

static void advance(int64_t ms)
{
	pthread_mutex_lock(&F.lock);
	F.now += ms;
	pthread_mutex_unlock(&F.lock);
}

static void fake_release(void)
{
	pthread_mutex_lock(&F.lock);
	F.releases++;
	pthread_cond_broadcast(&F.cond);
	pthread_mutex_unlock(&F.lock);
}

/* Waits until *v (a counter of F) reaches at least want; 0 past the deadline. */
static int fake_await(const int *v, int want)
{
	struct timespec ts;
	deadline(&ts);
	pthread_mutex_lock(&F.lock);
	while (*v < want && fake_wait(&ts))
		;
	int ok = *v >= want;
	pthread_mutex_unlock(&F.lock);
	return ok;
}

static int ncalls(void)
{
	pthread_mutex_lock(&F.lock);
	int n = F.ncalls;
	pthread_mutex_unlock(&F.lock);
	return n;
}

/* ---- the reader under test -------------------------------------------------- */

/* The missed hook: when armed, the first miss reads the same block again
 * (to the end, its download stored) before the reader goes on. */
static struct {
	int armed;
	struct cfs_reader *r;
	struct cfs_reader_file f;
	int64_t off;
	size_t len;
	int rc;
} M;

static int read_check(struct cfs_reader *r, struct cfs_reader_stream *s,
		      const struct cfs_reader_file *f, int64_t off, size_t len);

static void on_missed(void *io, const char *key, uint64_t block)
{
	(void)io;
	(void)key;
	(void)block;
	if (!M.armed)
		return;
	M.armed = 0;
	M.rc = read_check(M.r, NULL, &M.f, M.off, M.len);
}

struct rig {
	char dir[64];
	struct cfs_store *store;
	struct cfs_reader *r;
};

static void rig_open(struct rig *g, int workers, uint32_t max_blocks, int with_cancel)
{
	fake_reset();
	mkdir_tmp(g->dir, sizeof(g->dir));
	g->store = open_store(g->dir, BS, 64u << 20, 0);
	struct cfs_reader_opts o = { .workers = workers, .max_request = (uint64_t)max_blocks * BS,
				     .scan_workers = 1, .fetch = fake_fetch, .now_ms = fake_now,
				     .cancel = with_cancel ? fake_cancel : NULL, .missed = on_missed };
	CHECK_EQ(cfs_reader_new(NULL, g->store, &o, &g->r), 0);
}

static void rig_close(struct rig *g)
{
	cfs_reader_free(g->r);
	cfs_store_close(g->store);
	rm_dir(g->dir);
}

static struct cfs_reader_file file(const char *id, int64_t size)
{
	static char keys[8][32];
	static int k;
	char *key = keys[k++ % 8];
	snprintf(key, sizeof(keys[0]), "%s@r1", id);
	return (struct cfs_reader_file){ .id = id, .rev = "r1", .key = key, .size = size };
}

/* Reads [off, off+len) of f and compares every byte; the read's status. */
static int read_check(struct cfs_reader *r, struct cfs_reader_stream *s,
		      const struct cfs_reader_file *f, int64_t off, size_t len)
{
	char *buf = malloc(len);
	size_t got = 0;
	int rc = cfs_reader_read(r, s, f, off, len, buf, &got);
	if (!rc) {
		size_t want = off + (int64_t)len > f->size ? (size_t)(f->size - off) : len;
		CHECK_EQ(got, want);
		CHECK(bytes_ok(buf, f->id, off, got));
	}
	free(buf);
	return rc;
}

static struct cfs_reader_stats rstats(struct cfs_reader *r)
{
	struct cfs_reader_stats st;
	cfs_reader_stats(r, &st);
	return st;
}

/* Polls the reader's counters until no block is in flight (the reader has
 * no event for it); 0 past the deadline. */
static int settled(struct cfs_reader *r)
{
	struct timespec now, end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += DEADLINE_S;
	for (;;) {
		struct cfs_reader_stats st = rstats(r);
		if (!st.inflight && !st.queued_bytes)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > end.tv_sec)
			return 0;
		sched_yield();
	}
}

/* Polls until at least n readers have joined a flight; 0 past the deadline. */
static int joined(struct cfs_reader *r, uint64_t n)
{
	struct timespec now, end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += DEADLINE_S;
	while (rstats(r).joined < n) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > end.tv_sec)
			return 0;
		sched_yield();
	}
	return 1;
}

/* A read in a thread of its own, waited for with a deadline. */
struct bg_read {
	struct cfs_reader *r;
	struct cfs_reader_file f;
	int64_t off;
	size_t len;
	int rc, done;
	pthread_t t;
};

static void *bg_read_main(void *arg)
{
	struct bg_read *b = arg;
	int rc = read_check(b->r, NULL, &b->f, b->off, b->len);
	pthread_mutex_lock(&F.lock);
	b->rc = rc;
	b->done = 1;
	pthread_cond_broadcast(&F.cond);
	pthread_mutex_unlock(&F.lock);
	return NULL;
}

static void bg_read_start(struct bg_read *b, struct cfs_reader *r, struct cfs_reader_file f,
			  int64_t off, size_t len)
{
	*b = (struct bg_read){ .r = r, .f = f, .off = off, .len = len };
	pthread_create(&b->t, NULL, bg_read_main, b);
}

/* The read's status; a read still running past the deadline ends the test. */
static int bg_read_join(struct bg_read *b)
{
	if (!fake_await(&b->done, 1)) {
		fprintf(stderr, "test_reader: a read did not return within %d s\n", DEADLINE_S);
		exit(1);
	}
	pthread_join(b->t, NULL);
	return b->rc;
}

/* ---- tests ------------------------------------------------------------------ */

/* The fake's call i asked for [off, off+len). */
#define CHECK_CALL(i, off_, len_)                      \
	do {                                           \
		CHECK_EQ(F.calls[i].off, (off_));      \
		CHECK_EQ(F.calls[i].len, (len_));      \
	} while (0)

/* Misses are fetched and stored, every byte as generated; hits cost nothing. */
static void test_hit_miss(void)
{
	struct rig g;
	rig_open(&g, 2, 16, 0);
	struct cfs_reader_file f = file("plain", 5 * BS + 1234);
	CHECK_EQ(read_check(g.r, NULL, &f, 100, 3 * BS), 0);
	CHECK_EQ(ncalls(), 1); /* a small file is fetched whole on its first miss */
	CHECK_CALL(0, 0, 5 * BS + 1234); /* clipped to the file */
	CHECK_EQ(F.calls[0].prio, CFS_PACE_URGENT);
	CHECK(settled(g.r));
	CHECK_EQ(read_check(g.r, NULL, &f, 0, 6 * BS), 0); /* clipped to the size */
	CHECK_EQ(read_check(g.r, NULL, &f, 5 * BS + 1000, 10000), 0);
	CHECK_EQ(ncalls(), 1);
	struct cfs_reader_stats st = rstats(g.r);
	CHECK_EQ(st.downloads, 6);
	CHECK(st.hits >= 6);
	CHECK_EQ(F.sink_refused, 0);
	rig_close(&g);
}

/* Two readers of one block share one download. */
static void test_share(void)
{
	struct rig g;
	rig_open(&g, 2, 4, 0);
	struct cfs_reader_file f = file("shared", 40 * BS);
	script("shared", BLOCK, 0, 0);
	struct bg_read a, b;
	bg_read_start(&a, g.r, f, 7 * BS + 10, 1000);
	CHECK(fake_await(&F.blocked, 1));
	bg_read_start(&b, g.r, f, 7 * BS + 500, BS - 500);
	CHECK(joined(g.r, 1));
	fake_release();
	CHECK_EQ(bg_read_join(&a), 0);
	CHECK_EQ(bg_read_join(&b), 0);
	CHECK_EQ(ncalls(), 1);
	CHECK_CALL(0, 7 * BS, BS); /* a random miss of a large file: one block */
	CHECK_EQ(rstats(g.r).downloads, 1);
	rig_close(&g);
}

/* A block whose download ended (stored) between a reader's miss and its
 * look for a download to join is read from the store, not fetched again
 * (CI25: a block dropped for a bad checksum was downloaded twice, by two
 * readers of it). */
static void test_stored_after_miss(void)
{
	struct rig g;
	rig_open(&g, 2, 4, 0);
	struct cfs_reader_file f = file("late", 40 * BS);
	M = (typeof(M)){ .armed = 1, .r = g.r, .f = f, .off = 7 * BS + 100, .len = 500 };
	CHECK_EQ(read_check(g.r, NULL, &f, 7 * BS + 10, 1000), 0);
	CHECK_EQ(M.armed, 0);
	CHECK_EQ(M.rc, 0);
	CHECK_EQ(ncalls(), 1);
	CHECK_CALL(0, 7 * BS, BS);
	CHECK_EQ(rstats(g.r).downloads, 1);
	rig_close(&g);
}

/* A sequential reader's window grows: later requests are larger, and no
 * byte is asked for twice. */
static void test_window(void)
{
	struct rig g;
	rig_open(&g, 1, 8, 0);
	const int64_t nb = 300;
	struct cfs_reader_file f = file("stream", nb * BS);
	struct cfs_reader_stream *s = cfs_reader_stream_new();
	for (int64_t b = 0; b < nb; b++)
		CHECK_EQ(read_check(g.r, s, &f, b * BS, BS), 0);
	CHECK(settled(g.r));
	cfs_reader_stream_free(s);
	int n = ncalls();
	CHECK(n > 4 && n < MAXCALLS);
	CHECK_CALL(0, 0, 2 * BS); /* window 4: the miss asks for half */
	size_t most = 0, total = 0;
	char *asked = calloc((size_t)nb, 1);
	for (int i = 0; i < n && i < MAXCALLS; i++) {
		most = F.calls[i].len > most ? F.calls[i].len : most;
		total += F.calls[i].len;
		for (int64_t b = F.calls[i].off / BS; b * BS < F.calls[i].off + (int64_t)F.calls[i].len;
		     b++)
			CHECK_EQ(asked[b]++, 0);
	}
	free(asked);
	CHECK(most >= 16 * BS);
	CHECK_EQ(total, (size_t)nb * BS);
	CHECK_EQ(rstats(g.r).downloads, nb);
	CHECK_EQ(F.sink_refused, 0);
	rig_close(&g);
}

/* A reader's miss goes before read-ahead queued earlier: on the worker kept
 * for misses, and a queued prefetch job a reader wants is promoted. */
static void test_priority(void)
{
	struct rig g;
	rig_open(&g, 1, 4, 0); /* one read-ahead connection at a time */
	struct cfs_reader_file a = file("ahead", 16 * BS), m = file("miss", BS / 2);
	script("ahead", BLOCK, 0, 0);
	CHECK_EQ(cfs_reader_prefetch(g.r, &a), 0); /* 4 jobs of 4 blocks */
	CHECK(fake_await(&F.blocked, 1));
	CHECK_EQ(read_check(g.r, NULL, &m, 0, BS / 2), 0); /* served while ahead is stuck */
	CHECK_EQ(ncalls(), 2);
	CHECK_STR(F.calls[1].id, "miss");
	CHECK_EQ(F.calls[1].prio, CFS_PACE_URGENT);
	CHECK_EQ(read_check(g.r, NULL, &a, 13 * BS + 7, 100), 0); /* queued third: promoted */
	CHECK_EQ(ncalls(), 3);
	CHECK_CALL(2, 12 * BS, 4 * BS);
	CHECK_EQ(F.calls[2].prio, CFS_PACE_URGENT);
	fake_release();
	CHECK(settled(g.r));
	CHECK_EQ(ncalls(), 5); /* then the rest of the read-ahead, in order */
	CHECK_EQ(F.calls[0].prio, CFS_PACE_BACKGROUND);
	CHECK_EQ(F.calls[3].off, 4 * BS);
	CHECK_EQ(F.calls[4].off, 8 * BS);
	CHECK_EQ(read_check(g.r, NULL, &a, 0, 16 * BS), 0);
	CHECK_EQ(ncalls(), 5);
	rig_close(&g);
}

/* A transfer cut mid-block keeps the blocks it completed; the next read asks
 * only for the rest, in a new range from the first block it lacks.  A cut
 * the fetch resumes itself (resending bytes from earlier) is seamless. */
static void test_cut(void)
{
	struct rig g;
	rig_open(&g, 2, 16, 0);
	struct cfs_reader_file f = file("cut", 4 * BS);
	script("cut", CUT, BS + BS / 2, CFS_E_NET);
	CHECK_EQ(read_check(g.r, NULL, &f, 10, 100), 0); /* block 0 arrived before the cut */
	CHECK(settled(g.r));
	CHECK_EQ(read_check(g.r, NULL, &f, 0, 4 * BS), 0);
	CHECK_EQ(ncalls(), 2);
	CHECK_CALL(1, BS, 3 * BS);
	CHECK_EQ(rstats(g.r).downloads, 4);

	/* the reader waiting for the block that was cut gets the error ... */
	struct cfs_reader_file t = file("transient", 4 * BS);
	script("transient", CUT, 100, CFS_E_NET);
	CHECK_EQ(read_check(g.r, NULL, &t, BS + 50, 100), CFS_E_NET);
	CHECK_EQ(F.calls[2].off, BS);
	CHECK(settled(g.r));
	/* ... leaves no block behind, and is not believed: the next read fetches */
	CHECK_EQ(read_check(g.r, NULL, &t, 0, 4 * BS), 0);
	CHECK_EQ(ncalls(), 4);
	CHECK_CALL(3, 0, 4 * BS);

	struct cfs_reader_file r2 = file("resend", 4 * BS - 999);
	script("resend", RESEND, 2 * BS + 123, 0);
	CHECK_EQ(read_check(g.r, NULL, &r2, 0, 4 * BS), 0);
	CHECK_EQ(ncalls(), 5);
	CHECK_EQ(F.sink_refused, 0);

	/* bytes with a hole before them are refused: no block with a hole */
	struct cfs_reader_file h = file("gap", 4 * BS);
	script("gap", GAP, 100, 0);
	CHECK(read_check(g.r, NULL, &h, BS + 10, 10) < 0);
	CHECK_EQ(F.sink_refused, 1);
	CHECK(settled(g.r));
	CHECK_EQ(read_check(g.r, NULL, &h, 0, 4 * BS), 0);
	CHECK_EQ(ncalls(), 7);
	rig_close(&g);
}

/* A revision that is no longer the file's content reaches the reader as
 * -ESTALE; blocks cached for it are still served.  So does a file shorter
 * than its listing said. */
static void test_estale(void)
{
	struct rig g;
	rig_open(&g, 2, 4, 0);
	struct cfs_reader_file f = file("changed", 40 * BS);
	CHECK_EQ(read_check(g.r, NULL, &f, 0, BS), 0);
	CHECK(settled(g.r));
	stale("r1");
	CHECK_EQ(read_check(g.r, NULL, &f, 0, BS), 0);
	CHECK_EQ(read_check(g.r, NULL, &f, BS, 10), -ESTALE);
	CHECK_EQ(read_check(g.r, NULL, &f, 30 * BS, 10), -ESTALE); /* not remembered as good */
	CHECK_EQ(ncalls(), 3);
	stale("");

	/* a body that ends before the range: the file is shorter than listed */
	struct cfs_reader_file s = file("shorter", 4 * BS);
	script("shorter", SHORT, 5, 0);
	CHECK_EQ(read_check(g.r, NULL, &s, 3 * BS, 10), -ESTALE);
	CHECK_EQ(read_check(g.r, NULL, &s, 0, 4 * BS), 0); /* not believed either */
	CHECK_EQ(ncalls(), 5);
	rig_close(&g);
}

/* A permanent refusal is believed for a minute of the (fake) clock: reads
 * fail at once without a request, then ask again. */
static void test_refusal_clock(void)
{
	struct rig g;
	rig_open(&g, 2, 4, 0);
	struct cfs_reader_file f = file("quota", 2 * BS);
	script("quota", FAIL, 0, CFS_E_QUOTA);
	CHECK_EQ(read_check(g.r, NULL, &f, 0, 10), CFS_E_QUOTA);
	CHECK(settled(g.r));
	CHECK_EQ(read_check(g.r, NULL, &f, BS, 10), CFS_E_QUOTA);
	CHECK_EQ(cfs_reader_scan(g.r, &f), 0); /* read-ahead leaves it alone */
	advance(59999);
	CHECK_EQ(read_check(g.r, NULL, &f, 0, 10), CFS_E_QUOTA);
	CHECK_EQ(ncalls(), 1);
	advance(2);
	CHECK_EQ(read_check(g.r, NULL, &f, 0, 2 * BS), 0);
	CHECK_EQ(ncalls(), 2);
	rig_close(&g);
}

/* A reader waiting on a blocked transfer returns -ECANCELED as soon as the
 * transfer is cancelled (a mount's cfs_drive_cancel), and so do the jobs
 * queued behind it. */
static void test_cancel_waiting(void)
{
	struct rig g;
	rig_open(&g, 1, 4, 0);
	struct cfs_reader_file a = file("stuck", 16 * BS);
	script("stuck", BLOCK, 0, 0);
	CHECK_EQ(cfs_reader_prefetch(g.r, &a), 0);
	CHECK(fake_await(&F.blocked, 1));
	struct bg_read w;
	bg_read_start(&w, g.r, a, 2 * BS, 10);
	CHECK(joined(g.r, 1)); /* it waits on the blocked job */
	fake_cancel(NULL);
	CHECK_EQ(bg_read_join(&w), -ECANCELED);
	CHECK(settled(g.r));
	CHECK_EQ(read_check(g.r, NULL, &a, 12 * BS, 10), -ECANCELED);
	rig_close(&g);
}

struct bg_free {
	struct rig *g;
	int done;
};

static void *bg_free_main(void *arg)
{
	struct bg_free *b = arg;
	cfs_reader_free(b->g->r);
	pthread_mutex_lock(&F.lock);
	b->done = 1;
	pthread_cond_broadcast(&F.cond);
	pthread_mutex_unlock(&F.lock);
	return NULL;
}

/* cfs_reader_free with a transfer blocked calls opts.cancel and returns
 * promptly; queued jobs are dropped without a request. */
static void test_free_blocked(void)
{
	struct rig g;
	rig_open(&g, 1, 4, 1);
	struct cfs_reader_file a = file("unmount", 16 * BS);
	script("unmount", BLOCK, 0, 0);
	CHECK_EQ(cfs_reader_prefetch(g.r, &a), 0);
	CHECK(fake_await(&F.blocked, 1));
	struct bg_free b = { .g = &g };
	pthread_t t;
	pthread_create(&t, NULL, bg_free_main, &b);
	if (!fake_await(&b.done, 1)) {
		fprintf(stderr, "test_reader: cfs_reader_free did not return within %d s\n",
			DEADLINE_S);
		exit(1);
	}
	pthread_join(t, NULL);
	CHECK_EQ(F.cancels, 1);
	CHECK_EQ(ncalls(), 1); /* the queued jobs were dropped without a request */
	cfs_store_close(g.store);
	rm_dir(g.dir);
}

int main(void)
{
	cfs_log_set_level(CFS_LOG_WARN);
	test_hit_miss();
	test_share();
	test_stored_after_miss();
	test_window();
	test_priority();
	test_cut();
	test_estale();
	test_refusal_clock();
	test_cancel_waiting();
	test_free_blocked();
	return check_done("test_reader");
}
