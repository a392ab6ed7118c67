/* loop: the worker threads that serve a FUSE session.
 *
 * Policy.  Workers read a request and serve it; when the last idle worker
 * takes one, another starts (up to max_threads), so requests that wait on
 * downloads never hold up the others, and workers live until the session
 * ends.  It replaces libfuse 3.14's fuse_session_loop_mt, which wakes its
 * main thread (sem_post) after every request: on a small VM a FUSE round
 * trip is mostly context switches, and those two more per request were a
 * good part of what a warm open() cost.  The calling thread sleeps until the
 * session ends (unmount, a read error, or a signal the libfuse handlers turn
 * into fuse_session_exit: workers block SIGHUP, SIGINT, SIGTERM and SIGQUIT,
 * so those reach the caller), then cancels the workers that are waiting for
 * a request (a worker serving one finishes it first) and joins them all. */
#ifndef CFS_LOOP_H
#define CFS_LOOP_H

#include "ops.h" /* fuse_lowlevel.h at our FUSE_USE_VERSION */

/* Serves se until it ends.  Returns 0 when it ended normally (unmounted, or
 * a signal), -errno when reading requests failed or no worker could start. */
int cfs_loop_run(struct fuse_session *se, unsigned max_threads);

#endif
