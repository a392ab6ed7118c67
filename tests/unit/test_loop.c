/* test_loop: the FUSE worker pool (fuse/loop.h) driven by a fake session:
 * which requests the reader serves itself, that waiting requests run in
 * parallel, that a quick request that waits is rescued, and that the loop
 * ends (every wait here has a deadline). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../fuse/loop.h"
#include "check.h"

#define MAXQ 1024

struct req {
	uint32_t opcode, flags, release_flags;
	unsigned gates; /* process waits until one of these gates opens (or 5 s) */
};

struct fake {
	pthread_mutex_t m;
	pthread_cond_t cv;
	struct req q[MAXQ];
	int n, next, closed, exited, fail_with;
	unsigned gate_open; /* gates open, a bit each */
	int in_flight, max_in_flight, done;
	pthread_t by[MAXQ];
	uint64_t done_at[MAXQ];
};

static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void timed_wait(struct fake *f, uint64_t deadline_ms)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += 10 * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	if (now_ms() < deadline_ms)
		pthread_cond_timedwait(&f->cv, &f->m, &t);
}

static void unlock(void *m)
{
	pthread_mutex_unlock(m);
}

static int f_receive(void *ctx, struct fuse_buf *b)
{
	struct fake *f = ctx;
	int rc;
	pthread_mutex_lock(&f->m);
	pthread_cleanup_push(unlock, &f->m);
	while (f->next == f->n && !f->closed)
		pthread_cond_wait(&f->cv, &f->m); /* a cancellation point, like read() */
	if (f->next == f->n) {
		rc = f->fail_with;
	} else {
		int i = f->next++;
		if (!b->mem)
			b->mem = calloc(1, 256);
		struct fuse_in_header *h = b->mem;
		memset(h, 0, 256);
		h->opcode = f->q[i].opcode;
		h->unique = (uint64_t)i;
		size_t len = sizeof(*h);
		if (h->opcode == FUSE_OPEN) {
			struct fuse_open_in *o = (void *)(h + 1);
			o->flags = f->q[i].flags;
			len += sizeof(*o);
		} else if (h->opcode == FUSE_RELEASE) {
			struct fuse_release_in *r = (void *)(h + 1);
			r->flags = f->q[i].flags;
			r->release_flags = f->q[i].release_flags;
			len += sizeof(*r);
		}
		h->len = (uint32_t)len;
		b->size = len;
		b->flags = 0;
		rc = (int)len;
	}
	pthread_cleanup_pop(1);
	return rc;
}

static void f_process(void *ctx, const struct fuse_buf *b)
{
	struct fake *f = ctx;
	const struct fuse_in_header *h = b->mem;
	int i = (int)h->unique;
	pthread_mutex_lock(&f->m);
	f->by[i] = pthread_self();
	if (++f->in_flight > f->max_in_flight)
		f->max_in_flight = f->in_flight;
	pthread_cond_broadcast(&f->cv);
	uint64_t deadline = now_ms() + 5000;
	while (f->q[i].gates && !(f->q[i].gates & f->gate_open) && now_ms() < deadline)
		timed_wait(f, deadline);
	f->in_flight--;
	f->done++;
	f->done_at[i] = now_ms();
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->m);
}

static int f_exited(void *ctx)
{
	struct fake *f = ctx;
	pthread_mutex_lock(&f->m);
	int e = f->exited;
	pthread_mutex_unlock(&f->m);
	return e;
}

static void f_exit(void *ctx)
{
	struct fake *f = ctx;
	pthread_mutex_lock(&f->m);
	f->exited = 1;
	pthread_mutex_unlock(&f->m);
}

static void fake_init(struct fake *f)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->m, NULL);
	pthread_cond_init(&f->cv, NULL);
}

static void push(struct fake *f, uint32_t opcode, uint32_t flags, unsigned gates)
{
	pthread_mutex_lock(&f->m);
	if (f->n == MAXQ) {
		fprintf(stderr, "push: the fake queue is full\n");
		exit(1);
	}
	f->q[f->n++] = (struct req){ opcode, flags, 0, gates };
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->m);
}

static void open_gates(struct fake *f, unsigned gates)
{
	pthread_mutex_lock(&f->m);
	f->gate_open |= gates;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->m);
}

/* Waits (5 s at most) until cond(f) holds; returns it. */
static int wait_for(struct fake *f, int (*cond)(struct fake *))
{
	uint64_t deadline = now_ms() + 5000;
	pthread_mutex_lock(&f->m);
	while (!cond(f) && now_ms() < deadline)
		timed_wait(f, deadline);
	int ok = cond(f);
	pthread_mutex_unlock(&f->m);
	return ok;
}

struct run {
	struct fake *f;
	unsigned max;
	int rc;
	struct cfs_stats_loop counts;
	pthread_t tid;
};

static void *serve_thread(void *arg)
{
	struct run *r = arg;
	const struct cfs_loop_io io = { r->f, f_receive, f_process, f_exited, f_exit };
	r->rc = cfs_loop_serve(&io, r->max, CFS_LOOP_RESCUE_MS, &r->counts);
	return NULL;
}

static void start(struct run *r, struct fake *f, unsigned max)
{
	memset(r, 0, sizeof(*r));
	r->f = f;
	r->max = max;
	pthread_create(&r->tid, NULL, serve_thread, r);
}

/* Ends the session (the queue drains, then receive reports the end) and
 * joins the loop within 10 s; a loop that does not end fails the test. */
static int finish(struct run *r, int fail_with)
{
	pthread_mutex_lock(&r->f->m);
	r->f->closed = 1;
	r->f->fail_with = fail_with;
	r->f->gate_open = ~0u;
	pthread_cond_broadcast(&r->f->cv);
	pthread_mutex_unlock(&r->f->m);
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += 10;
	if (pthread_timedjoin_np(r->tid, NULL, &t) != 0) {
		fprintf(stderr, "the loop did not end within 10 s\n");
		exit(1);
	}
	return r->rc;
}

static void test_quick(void)
{
	char buf[256] = { 0 };
	struct fuse_in_header *h = (void *)buf;
	struct fuse_open_in *o = (void *)(h + 1);
	struct fuse_release_in *rl = (void *)(h + 1);
	size_t n = sizeof(*h) + sizeof(*rl);
	h->opcode = FUSE_OPEN;
	o->flags = O_RDONLY;
	CHECK_EQ(cfs_loop_quick(buf, n), 1);
	o->flags = O_RDONLY | O_TRUNC;
	CHECK_EQ(cfs_loop_quick(buf, n), 0);
	o->flags = O_WRONLY;
	CHECK_EQ(cfs_loop_quick(buf, n), 0);
	o->flags = O_RDWR;
	CHECK_EQ(cfs_loop_quick(buf, n), 0);
	o->flags = O_RDONLY;
	CHECK_EQ(cfs_loop_quick(buf, sizeof(*h) + 2), 0); /* short */
	h->opcode = FUSE_RELEASE;
	rl->flags = O_RDONLY;
	CHECK_EQ(cfs_loop_quick(buf, n), 1);
	rl->release_flags = FUSE_RELEASE_FLUSH;
	CHECK_EQ(cfs_loop_quick(buf, n), 0);
	rl->release_flags = 0;
	rl->flags = O_WRONLY;
	CHECK_EQ(cfs_loop_quick(buf, n), 0);
	uint32_t quick[] = { FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT, FUSE_RELEASEDIR };
	uint32_t slow[] = { FUSE_READ, FUSE_LOOKUP, FUSE_GETATTR, FUSE_WRITE, FUSE_FLUSH,
			    FUSE_CREATE, FUSE_INIT, FUSE_READDIRPLUS, FUSE_SETATTR };
	for (size_t i = 0; i < sizeof(quick) / sizeof(*quick); i++) {
		h->opcode = quick[i];
		CHECK_EQ(cfs_loop_quick(buf, n), 1);
	}
	for (size_t i = 0; i < sizeof(slow) / sizeof(*slow); i++) {
		h->opcode = slow[i];
		CHECK_EQ(cfs_loop_quick(buf, n), 0);
	}
	CHECK_EQ(cfs_loop_quick(NULL, 0), 0);
	CHECK_EQ(cfs_loop_quick(buf, 4), 0);
}

static int all_done(struct fake *f)
{
	return f->done == f->n;
}

/* A warm epoch: opens and releases served by one thread, no hand-off. */
static void test_warm_one_thread(void)
{
	struct fake f;
	struct run r;
	fake_init(&f);
	start(&r, &f, 16);
	for (int i = 0; i < 200; i++) {
		push(&f, FUSE_OPEN, O_RDONLY, 0);
		push(&f, FUSE_RELEASE, O_RDONLY, 0);
		push(&f, FUSE_FORGET, 0, 0);
	}
	CHECK(wait_for(&f, all_done));
	CHECK_EQ(finish(&r, 0), 0);
	CHECK_EQ(r.counts.served_inline, 600);
	CHECK_EQ(r.counts.handoffs, 0);
	/* one thread serves them all, but for a reader held up over the rescue
	 * interval (a loaded machine): each change of thread is a rescue */
	unsigned long switches = 0;
	for (int i = 1; i < f.n; i++)
		switches += !pthread_equal(f.by[i], f.by[i - 1]);
	CHECK(switches <= r.counts.rescues);
	CHECK(r.counts.workers <= 2 + r.counts.rescues);
}

static int five_at_once(struct fake *f)
{
	return f->max_in_flight >= 5;
}

static int three_at_once(struct fake *f)
{
	return f->max_in_flight >= 3;
}

/* Requests that may wait (reads, writes) run in parallel. */
static void test_slow_in_parallel(void)
{
	struct fake f;
	struct run r;
	fake_init(&f);
	start(&r, &f, 16);
	for (int i = 0; i < 4; i++)
		push(&f, FUSE_READ, 0, 1);
	push(&f, FUSE_OPEN, O_WRONLY, 1); /* a writer's open is not quick */
	CHECK(wait_for(&f, five_at_once));
	pthread_mutex_lock(&f.m);
	f.gate_open = 1;
	pthread_cond_broadcast(&f.cv);
	pthread_mutex_unlock(&f.m);
	CHECK(wait_for(&f, all_done));
	CHECK_EQ(finish(&r, 0), 0);
	CHECK_EQ(r.counts.handoffs, 5);
	CHECK_EQ(r.counts.served_inline, 0);
	CHECK(f.max_in_flight == 5);
}

static int second_done(struct fake *f)
{
	return f->done_at[1] != 0;
}

/* A quick request that waits: the standby takes the reader's role, and
 * the request behind it is served meanwhile. */
static void test_rescue(void)
{
	struct fake f;
	struct run r;
	fake_init(&f);
	start(&r, &f, 16);
	push(&f, FUSE_OPEN, O_RDONLY, 1);
	push(&f, FUSE_RELEASE, O_RDONLY, 0);
	uint64_t t0 = now_ms();
	CHECK(wait_for(&f, second_done));
	CHECK(f.done_at[1] - t0 < 1000);
	CHECK_EQ(f.done_at[0], 0); /* still waiting on its gate */
	CHECK(!pthread_equal(f.by[0], f.by[1]));
	CHECK_EQ(finish(&r, 0), 0);
	CHECK(r.counts.rescues >= 1);
	CHECK_EQ(f.done, 2);
}

static int one_at_once(struct fake *f)
{
	return f->max_in_flight >= 1;
}

static int fourth_done(struct fake *f)
{
	return f->done_at[f->n - 1] != 0;
}

/* A standby is kept through a rescue followed at once by a hand-off, with
 * exactly one idle worker: both wake that one worker, and where the second
 * wake was lost the worker filled one role of two, no worker stood by, and a
 * second quick request that waits held up every request behind it (a cached
 * read stalled during a Drive outage, CI22).  Repeated: it is a race. */
static void test_standby_kept(void)
{
	int stalled = 0;
	for (int round = 0; round < 20; round++) {
		struct fake f;
		struct run r;
		fake_init(&f);
		start(&r, &f, 16);
		push(&f, FUSE_READ, 0, 1); /* a third worker, idle once it is done */
		CHECK(wait_for(&f, one_at_once));
		open_gates(&f, 1);
		CHECK(wait_for(&f, all_done));
		pthread_mutex_lock(&f.m);
		uint64_t t0 = now_ms();
		f.q[f.n++] = (struct req){ FUSE_OPEN, O_RDONLY, 0, 2 };    /* waits: rescued */
		f.q[f.n++] = (struct req){ FUSE_READ, 0, 0, 2 };           /* handed off, waits */
		f.q[f.n++] = (struct req){ FUSE_OPEN, O_RDONLY, 0, 2 };    /* waits: rescued */
		f.q[f.n++] = (struct req){ FUSE_RELEASE, O_RDONLY, 0, 0 }; /* must not wait */
		pthread_cond_broadcast(&f.cv);
		pthread_mutex_unlock(&f.m);
		int ok = wait_for(&f, fourth_done) && f.done_at[f.n - 1] - t0 < 1000;
		stalled += !ok;
		CHECK_EQ(finish(&r, 0), 0);
		CHECK_EQ(f.done, 5);
	}
	CHECK_EQ(stalled, 0);
}

/* One worker at most: everything is served, one at a time. */
static void test_one_worker(void)
{
	struct fake f;
	struct run r;
	fake_init(&f);
	start(&r, &f, 1);
	for (int i = 0; i < 20; i++)
		push(&f, i % 2 ? FUSE_READ : FUSE_OPEN, O_RDONLY, 0);
	CHECK(wait_for(&f, all_done));
	CHECK_EQ(finish(&r, 0), 0);
	CHECK_EQ(r.counts.workers, 1);
	CHECK_EQ(f.max_in_flight, 1);
}

/* A read error ends the loop and is returned. */
static void test_error(void)
{
	struct fake f;
	struct run r;
	fake_init(&f);
	start(&r, &f, 8);
	push(&f, FUSE_READ, 0, 0);
	CHECK(wait_for(&f, all_done));
	CHECK_EQ(finish(&r, -EIO), -EIO);
	CHECK_EQ(f.exited, 1);
}

/* The loop ends while workers wait idle, stand by, and serve a request. */
static void test_end_with_busy_workers(void)
{
	struct fake f;
	struct run r;
	fake_init(&f);
	start(&r, &f, 8);
	for (int i = 0; i < 3; i++)
		push(&f, FUSE_READ, 0, 1);
	CHECK(wait_for(&f, three_at_once));
	CHECK_EQ(finish(&r, 0), 0); /* opens the gate, ends the queue */
	CHECK_EQ(f.done, 3);
}

int main(void)
{
	test_quick();
	test_warm_one_thread();
	test_slow_in_parallel();
	test_rescue();
	test_standby_kept();
	test_one_worker();
	test_error();
	test_end_with_busy_workers();
	return check_done("test_loop");
}
