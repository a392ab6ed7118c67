/* loop: the worker threads that serve a FUSE session.
 *
 * Policy.  One worker at a time reads requests: the reader.  A request the
 * server answers from memory (cfs_loop_quick: a read-only OPEN or RELEASE, a
 * FORGET, an INTERRUPT, a RELEASEDIR) the reader serves itself and then reads
 * the next, so a warm epoch's opens and closes wake no other thread: on a
 * small VM a FUSE round trip is mostly context switches, and with every
 * worker waiting in read() each request woke one more (a warm epoch took
 * twice the server CPU of a server with one thread, bench/README.md).  Before
 * serving any other request the reader hands its role to an idle worker
 * (starting one, up to max_threads, when none is idle), so requests that wait
 * on Drive never hold up the others.
 *
 * A quick request can wait after all (a stale file's metadata fetched, a
 * whole-file check at a release).  One idle worker stands by: while requests
 * come (one in the last second) it looks every rescue interval
 * (CFS_LOOP_RESCUE_MS), and when the reader has served one request that long
 * it takes the reader's role; the old reader finishes its request and
 * becomes idle.  Every request is read within a rescue interval of the
 * reader's being free, as long as a worker is free.
 *
 * The calling thread sleeps until the session ends (unmount, a read error, or
 * a signal the libfuse handlers turn into fuse_session_exit: workers block
 * SIGHUP, SIGINT, SIGTERM and SIGQUIT, so those reach the caller), then wakes
 * the idle workers, cancels the reader (waiting for a request; a worker
 * serving one finishes it first) and joins them all.  It replaces libfuse
 * 3.14's fuse_session_loop_mt, which also wakes its main thread after every
 * request.  The seam (struct cfs_loop_io) lets tests drive it with a fake
 * session. */
#ifndef CFS_LOOP_H
#define CFS_LOOP_H

#include "ops.h" /* fuse_lowlevel.h at our FUSE_USE_VERSION */

#define CFS_LOOP_RESCUE_MS 2

/* Serves se until it ends.  Returns 0 when it ended normally (unmounted, or
 * a signal), -errno when reading requests failed or no worker could start.
 * counts (may be NULL) is zeroed, then kept current (stats.h). */
int cfs_loop_run(struct fuse_session *se, unsigned max_threads, struct cfs_stats_loop *counts);

/* 1 when the request in mem (size bytes read from /dev/fuse) is one the
 * reader serves itself; pure. */
int cfs_loop_quick(const void *mem, size_t size);

/* The session as the loop sees it. */
struct cfs_loop_io {
	void *ctx;
	/* > 0: a request in *b; 0: the session ended; -errno (-EINTR, -EAGAIN:
	 * try again).  A cancellation point. */
	int (*receive)(void *ctx, struct fuse_buf *b);
	void (*process)(void *ctx, const struct fuse_buf *b);
	int (*exited)(void *ctx);
	void (*exit)(void *ctx);
};

/* cfs_loop_run on any session. */
int cfs_loop_serve(const struct cfs_loop_io *io, unsigned max_threads, unsigned rescue_ms,
		   struct cfs_stats_loop *counts);

#endif
