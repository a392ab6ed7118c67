/* loop: the FUSE worker pool (see loop.h). */
#define _GNU_SOURCE
#include "loop.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define QUIET_NS 1000000000ULL /* no request this long: the standby stops looking */

struct pool {
	const struct cfs_loop_io *io;
	pthread_mutex_t lock;
	pthread_cond_t idle_cv;    /* idle workers wait here */
	pthread_cond_t standby_cv; /* the standby waits here (CLOCK_MONOTONIC) */
	pthread_t *tids;           /* started workers, tids[0..started) */
	unsigned started, max;
	unsigned idle;             /* workers waiting on idle_cv that no wake is meant for */
	unsigned wakes;            /* wakes sent and not yet taken (see wake_idle) */
	int reader;                /* a worker holds the reader role */
	unsigned long reader_gen;  /* changes when the standby takes the role */
	int standby;               /* a worker stands by */
	int standby_timed;         /* ... and looks every rescue interval */
	uint64_t serving_since;    /* the reader serves a quick request since; 0: not */
	uint64_t last_request;
	uint64_t rescue_ns;
	int stopping;              /* the caller is ending the workers */
	int error;                 /* the first read error, -errno */
	sem_t ended;               /* posted by a worker that stops */
	struct cfs_stats_loop *counts; /* never NULL */
};

/* Counters another thread reads (colabfs stats).  Every writer holds
 * p->lock, so a relaxed store is enough: no locked add per request. */
static void count(uint64_t *c)
{
	__atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

int cfs_loop_quick(const void *mem, size_t size)
{
	const struct fuse_in_header *h = mem;
	if (!mem || size < sizeof(*h))
		return 0;
	const void *arg = h + 1;
	size_t n = size - sizeof(*h);
	switch (h->opcode) {
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
	case FUSE_RELEASEDIR:
		return 1;
	case FUSE_OPEN: {
		const struct fuse_open_in *o = arg;
		return n >= sizeof(*o) && (o->flags & O_ACCMODE) == O_RDONLY &&
		       !(o->flags & O_TRUNC);
	}
	case FUSE_RELEASE: {
		const struct fuse_release_in *r = arg;
		return n >= sizeof(*r) && (r->flags & O_ACCMODE) == O_RDONLY &&
		       !(r->release_flags & FUSE_RELEASE_FLUSH);
	}
	default:
		return 0;
	}
}

static void free_buf(void *arg)
{
	struct fuse_buf *b = arg;
	free(b->mem);
	b->mem = NULL;
}

static void *worker(void *arg);

/* p->lock held (or no worker running yet). */
static int start_worker(struct pool *p)
{
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	int rc = pthread_create(&p->tids[p->started], NULL, worker, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		CFS_WARN("cannot start a FUSE worker (%u running): %s", p->started, strerror(rc));
		return -rc;
	}
	p->started++;
	__atomic_store_n(&p->counts->workers, p->started, __ATOMIC_RELAXED);
	return 0;
}

static int ending(struct pool *p)
{
	return p->stopping || p->io->exited(p->io->ctx);
}

/* Wakes one idle worker; 0 when none waits.  Each wake is counted until a
 * worker takes it, so a second wake before the first worker runs goes to
 * another worker (or says there is none), never to the same one: a wake
 * that a worker already woken swallowed left a role unfilled, the standby's
 * (CI22: a cached read stalled 20 s during a Drive outage).  p->lock held. */
static int wake_idle(struct pool *p)
{
	if (!p->idle)
		return 0;
	p->idle--;
	p->wakes++;
	pthread_cond_signal(&p->idle_cv);
	return 1;
}

/* Waits on idle_cv until woken (wake_idle) or the loop ends.  p->lock held. */
static void wait_idle(struct pool *p)
{
	p->idle++;
	while (!p->wakes && !ending(p))
		pthread_cond_wait(&p->idle_cv, &p->lock);
	if (p->wakes)
		p->wakes--; /* whichever waiter takes it: p->idle no longer counts one */
	else
		p->idle--;
}

/* The reader gives its role away before a request that may wait.  p->lock held. */
static void hand_off(struct pool *p)
{
	p->reader = 0;
	count(&p->counts->handoffs);
	if (!wake_idle(p) && (p->started == p->max || p->stopping || start_worker(p)) &&
	    p->standby)
		pthread_cond_signal(&p->standby_cv);
	/* else every worker is busy: the first to finish reads */
}

/* Reads and serves requests while this worker holds the reader role (of
 * generation gen).  Called and returns without p->lock.  Returns 1 when the
 * session ended, 0 when the role went to another worker. */
static int read_and_serve(struct pool *p, struct fuse_buf *fb, unsigned long gen)
{
	for (;;) {
		/* cancelled only while it waits for a request */
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		int res = p->io->receive(p->io->ctx, fb);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if ((res == -EINTR || res == -EAGAIN) && !p->io->exited(p->io->ctx))
			continue;
		if (res <= 0) {
			pthread_mutex_lock(&p->lock);
			if (res < 0 && res != -EINTR && res != -EAGAIN && !p->error)
				p->error = res;
			p->reader = 0;
			pthread_mutex_unlock(&p->lock);
			p->io->exit(p->io->ctx);
			return 1;
		}
		uint64_t now = now_ns();
		int quick = !(fb->flags & FUSE_BUF_IS_FD) && cfs_loop_quick(fb->mem, (size_t)res);
		pthread_mutex_lock(&p->lock);
		p->last_request = now;
		if (!quick) {
			hand_off(p);
			pthread_mutex_unlock(&p->lock);
			p->io->process(p->io->ctx, fb);
			return 0;
		}
		p->serving_since = now;
		count(&p->counts->served_inline);
		if (p->standby && !p->standby_timed)
			pthread_cond_signal(&p->standby_cv); /* after a quiet spell: look again */
		pthread_mutex_unlock(&p->lock);
		p->io->process(p->io->ctx, fb);
		pthread_mutex_lock(&p->lock);
		int mine = p->reader_gen == gen;
		if (mine)
			p->serving_since = 0;
		pthread_mutex_unlock(&p->lock);
		if (!mine)
			return 0;
	}
}

static void wait_until(pthread_cond_t *cv, pthread_mutex_t *m, uint64_t at)
{
	struct timespec ts = { .tv_sec = (time_t)(at / 1000000000ULL),
			       .tv_nsec = (long)(at % 1000000000ULL) };
	pthread_cond_timedwait(cv, m, &ts);
}

/* Stands by until the reader's role is free or taken from a reader serving a
 * quick request too long (then p->reader is 0 for the caller to take).
 * p->lock held. */
static void stand_by(struct pool *p)
{
	p->standby = 1;
	while (!ending(p) && p->reader) {
		uint64_t now = now_ns();
		if (p->serving_since && now - p->serving_since >= p->rescue_ns) {
			p->reader_gen++;
			p->serving_since = 0;
			p->reader = 0;
			count(&p->counts->rescues);
			break;
		}
		p->standby_timed = now - p->last_request < QUIET_NS;
		if (p->standby_timed)
			wait_until(&p->standby_cv, &p->lock, now + p->rescue_ns);
		else
			pthread_cond_wait(&p->standby_cv, &p->lock);
	}
	p->standby = p->standby_timed = 0;
	/* another stands by in its place */
	if (!wake_idle(p) && p->started < p->max && !ending(p))
		start_worker(p);
}

static void *worker(void *arg)
{
	struct pool *p = arg;
	struct fuse_buf fb = { .mem = NULL };
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pthread_cleanup_push(free_buf, &fb);
	pthread_mutex_lock(&p->lock);
	while (!ending(p)) {
		if (!p->reader) {
			p->reader = 1;
			unsigned long gen = p->reader_gen;
			pthread_mutex_unlock(&p->lock);
			int end = read_and_serve(p, &fb, gen);
			pthread_mutex_lock(&p->lock);
			if (end)
				break;
		} else if (!p->standby) {
			stand_by(p);
		} else {
			wait_idle(p);
		}
	}
	pthread_mutex_unlock(&p->lock);
	pthread_cleanup_pop(1);
	sem_post(&p->ended);
	return NULL;
}

int cfs_loop_serve(const struct cfs_loop_io *io, unsigned max_threads, unsigned rescue_ms,
		   struct cfs_stats_loop *counts)
{
	struct cfs_stats_loop none;
	struct pool p = { .io = io, .max = max_threads ? max_threads : 1,
			  .counts = counts ? counts : &none,
			  .rescue_ns = (uint64_t)(rescue_ms ? rescue_ms : 1) * 1000000ULL };
	memset(p.counts, 0, sizeof(*p.counts));
	if (!(p.tids = calloc(p.max, sizeof(*p.tids))))
		return -ENOMEM;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p.standby_cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&p.idle_cv, NULL);
	pthread_mutex_init(&p.lock, NULL);
	sem_init(&p.ended, 0, 0);
	pthread_mutex_lock(&p.lock);
	int rc = start_worker(&p); /* the reader */
	if (!rc && p.max > 1)
		start_worker(&p); /* the standby */
	pthread_mutex_unlock(&p.lock);
	/* a signal interrupts the wait; the handler has ended the session */
	while (!rc && !io->exited(io->ctx))
		if (sem_wait(&p.ended) != 0 && errno != EINTR)
			break;
	pthread_mutex_lock(&p.lock);
	p.stopping = 1;
	pthread_cond_broadcast(&p.idle_cv);
	pthread_cond_broadcast(&p.standby_cv);
	unsigned n = p.started;
	for (unsigned i = 0; i < n; i++)
		pthread_cancel(p.tids[i]); /* takes effect only in receive */
	pthread_mutex_unlock(&p.lock);
	for (unsigned i = 0; i < n; i++)
		pthread_join(p.tids[i], NULL);
	if (!rc)
		rc = p.error;
	sem_destroy(&p.ended);
	pthread_mutex_destroy(&p.lock);
	pthread_cond_destroy(&p.idle_cv);
	pthread_cond_destroy(&p.standby_cv);
	free(p.tids);
	return rc;
}

static int se_receive(void *ctx, struct fuse_buf *b)
{
	return fuse_session_receive_buf(ctx, b);
}

static void se_process(void *ctx, const struct fuse_buf *b)
{
	fuse_session_process_buf(ctx, b);
}

static int se_exited(void *ctx)
{
	return fuse_session_exited(ctx);
}

static void se_exit(void *ctx)
{
	fuse_session_exit(ctx);
}

int cfs_loop_run(struct fuse_session *se, unsigned max_threads, struct cfs_stats_loop *counts)
{
	const struct cfs_loop_io io = { se, se_receive, se_process, se_exited, se_exit };
	return cfs_loop_serve(&io, max_threads, CFS_LOOP_RESCUE_MS, counts);
}
