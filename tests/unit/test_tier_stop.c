/* Unit tests: the shared cache tier's client never waits on a cluster that
 * does not answer longer than its call deadline (tier.h: 2 x io_ms), and
 * cfs_tier_cancel ends the calls in flight at once.
 *
 * A frozen node is a listening socket nobody accepts from: the kernel
 * completes the connects (the accept queue), the commands land in its
 * buffer, no reply ever comes -- what a SIGSTOPped redis-server does. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "loopback.h"
#include "redis.h"
#include "tier.h"

#define FROZEN 8

static int frozen_fd[FROZEN], frozen_port[FROZEN];

/* A tier seeded with FROZEN frozen nodes (made once). */
static struct cfs_tier *frozen_tier(int io_ms)
{
	struct cfs_tier_seeds seeds = { .n = FROZEN };
	for (int i = 0; i < FROZEN; i++) {
		if (!frozen_fd[i])
			frozen_fd[i] = test_loopback(64, &frozen_port[i]);
		seeds.seed[i].port = frozen_port[i];
		snprintf(seeds.seed[i].host, sizeof(seeds.seed[i].host), "127.0.0.1");
	}
	struct cfs_tier_opts o = { .seeds = &seeds, .connect_ms = io_ms, .io_ms = io_ms };
	struct cfs_tier *t = NULL;
	CHECK_EQ(cfs_tier_new(&o, &t), 0);
	return t;
}

static int get(struct cfs_tier *t)
{
	static const char *const argv[] = { "GET", "k" };
	static const size_t len[] = { 3, 1 };
	struct cfs_tier_cmd cmd = { 2, argv, len };
	struct cfs_redis_reply *r = NULL;
	int rc = cfs_tier_exec_read(t, "k", 1, 1, &cmd, &r);
	cfs_redis_reply_free(r);
	return rc;
}

/* FROZEN nodes at io_ms 250 each: a call walking them all would take 2 s;
 * the call's deadline ends it after 500 ms.  Later calls find the cluster
 * down and fail at once. */
static void test_deadline(void)
{
	struct cfs_tier *t = frozen_tier(250);
	int64_t t0 = cfs_clock_mono_ms();
	int rc = get(t);
	int64_t took = cfs_clock_mono_ms() - t0;
	CHECK(rc != 0);
	CHECK(took < 1200);
	fprintf(stderr, "a call on %d frozen nodes: %lld ms\n", FROZEN, (long long)took);
	t0 = cfs_clock_mono_ms();
	CHECK_EQ(get(t), -EAGAIN);
	CHECK(cfs_clock_mono_ms() - t0 < 100);
	CHECK_EQ(cfs_tier_up(t), 0);
	cfs_tier_free(t);
}

struct call {
	struct cfs_tier *t;
	int rc;
	int64_t ended;
};

static void *call_thread(void *arg)
{
	struct call *c = arg;
	c->rc = get(c->t);
	c->ended = cfs_clock_mono_ms();
	return NULL;
}

/* A call waiting on a frozen node (io_ms 10 s) ends when the tier is
 * cancelled, not when the node would have timed out; calls after that fail
 * at once with -ECANCELED. */
static void test_cancel(void)
{
	struct cfs_tier *t = frozen_tier(10000);
	struct call c = { .t = t };
	pthread_t th;
	CHECK_EQ(pthread_create(&th, NULL, call_thread, &c), 0);
	usleep(300 * 1000);
	int64_t t0 = cfs_clock_mono_ms();
	cfs_tier_cancel(t);
	pthread_join(th, NULL);
	CHECK(c.rc != 0);
	CHECK(c.ended - t0 < 1000);
	fprintf(stderr, "a call cancelled: ended %lld ms after the cancel\n",
		(long long)(c.ended - t0));
	t0 = cfs_clock_mono_ms();
	CHECK_EQ(get(t), -ECANCELED);
	CHECK_EQ(cfs_tier_probe(t), -ECANCELED);
	CHECK(cfs_clock_mono_ms() - t0 < 100);
	cfs_tier_free(t);
}

int main(void)
{
	test_deadline();
	test_cancel();
	for (int i = 0; i < FROZEN; i++)
		close(frozen_fd[i]);
	return check_done("test_tier_stop");
}
