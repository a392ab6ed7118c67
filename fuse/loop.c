/* loop: the FUSE worker pool (see loop.h). */
#define _GNU_SOURCE
#include "loop.h"

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct pool {
	struct fuse_session *se;
	pthread_mutex_t lock;
	pthread_t *tids;     /* started workers, tids[0..started) */
	unsigned started, idle, max;
	int stopping;        /* no new workers: the caller is cancelling them */
	int error;           /* the first read error, -errno */
	sem_t ended;         /* posted by a worker that stops */
};

static void free_buf(void *arg)
{
	struct fuse_buf *b = arg;
	free(b->mem);
	b->mem = NULL;
}

static int is_forget(const struct fuse_buf *b)
{
	const struct fuse_in_header *h = b->mem;
	return !(b->flags & FUSE_BUF_IS_FD) && b->size >= sizeof(*h) &&
	       (h->opcode == FUSE_FORGET || h->opcode == FUSE_BATCH_FORGET);
}

static int start_worker(struct pool *p);

static void *worker(void *arg)
{
	struct pool *p = arg;
	struct fuse_buf fb = { .mem = NULL };
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pthread_cleanup_push(free_buf, &fb);
	while (!fuse_session_exited(p->se)) {
		/* cancelled only while it waits for a request */
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		int res = fuse_session_receive_buf(p->se, &fb);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0) {
			if (res < 0) {
				pthread_mutex_lock(&p->lock);
				if (!p->error)
					p->error = res;
				pthread_mutex_unlock(&p->lock);
			}
			fuse_session_exit(p->se);
			break;
		}
		/* forgets need no reply and come in bursts: no thread for them */
		int forget = is_forget(&fb);
		pthread_mutex_lock(&p->lock);
		if (!forget && --p->idle == 0 && p->started < p->max && !p->stopping)
			start_worker(p);
		pthread_mutex_unlock(&p->lock);
		fuse_session_process_buf(p->se, &fb);
		pthread_mutex_lock(&p->lock);
		if (!forget)
			p->idle++;
		pthread_mutex_unlock(&p->lock);
	}
	pthread_cleanup_pop(1);
	sem_post(&p->ended);
	return NULL;
}

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
	p->idle++;
	return 0;
}

int cfs_loop_run(struct fuse_session *se, unsigned max_threads)
{
	struct pool p = { .se = se, .max = max_threads ? max_threads : 1 };
	if (!(p.tids = calloc(p.max, sizeof(*p.tids))))
		return -ENOMEM;
	pthread_mutex_init(&p.lock, NULL);
	sem_init(&p.ended, 0, 0);
	pthread_mutex_lock(&p.lock);
	int rc = start_worker(&p);
	pthread_mutex_unlock(&p.lock);
	/* a signal interrupts the wait; the handler has ended the session */
	while (!rc && !fuse_session_exited(se))
		if (sem_wait(&p.ended) != 0 && errno != EINTR)
			break;
	pthread_mutex_lock(&p.lock);
	p.stopping = 1;
	unsigned n = p.started;
	for (unsigned i = 0; i < n; i++)
		pthread_cancel(p.tids[i]);
	pthread_mutex_unlock(&p.lock);
	for (unsigned i = 0; i < n; i++)
		pthread_join(p.tids[i], NULL);
	if (!rc)
		rc = p.error;
	sem_destroy(&p.ended);
	pthread_mutex_destroy(&p.lock);
	free(p.tids);
	return rc;
}
