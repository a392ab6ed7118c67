/* serve_io: the server's side of a supervised mount (see super.h).
 *
 * Owns the server's /dev/fuse I/O through libfuse's custom io: requests come
 * from the inherited /dev/fuse descriptor.  In forward mode each is read
 * straight into the shared request log (reqlog.h) and its record freed once
 * the reply is written; a new server serves what the last one left there
 * first (a WRITE of up to CFS_MAX_WRITE bytes is recorded whole, reqlog.h).
 * Otherwise the requests being worked on are published in the shared page
 * for the crash-loop guard.  Replies to requests that change state are
 * journalled (below).  It completes FUSE_INIT from the recorded request: the
 * first server sends the reply and records it, a later one checks that its
 * own reply is byte-identical and sends nothing.  The INIT reply also gets
 * FUSE_PARALLEL_DIROPS, which libfuse 3.14 computes but never sends, so one
 * slow LOOKUP does not lock its whole folder. */
#ifndef CFS_SERVE_IO_H
#define CFS_SERVE_IO_H

#include "ops.h"
#include "super.h"

struct cfs_serve_io_opts {
	int fuse_fd;
	int record;                  /* forward mode: record requests in shm->log */
	struct cfs_super_shm *shm;
};

/* Attaches the session to the descriptors and completes INIT.  Returns 0,
 * -EPROTO when the replayed INIT's reply differs from the recorded one (the
 * server must not serve), or -errno. */
int cfs_serve_io_attach(struct fuse_session *se, const struct cfs_serve_io_opts *o);

/* The unique (bit 63, the kernel's resend mark, cleared) of the request the
 * calling thread read last and now serves, a replayed or resent one
 * included; 0 in a process that is not a supervised server (or a thread
 * that has read no request).  The worker pool (loop.c) serves a request in
 * the thread that read it, so a callback in ops.c may call this and pass
 * the value down: a request handed out again after a server's death (the
 * kernel's resend, a forward replay) has the same value, which lets the
 * core make a create, rename or unlink exactly-once.  Valid until the
 * thread reads its next request: read it in the callback, before replying
 * from another thread. */
uint64_t cfs_serve_current_unique(void);

/* The reply journal (replyrec.h) is kept here: a reply to a state-changing
 * request (cfs_replyrec_changes_state) is recorded in shm->journal before it
 * is written to /dev/fuse, and a request read again (bit 63 set, or a
 * forward replay) whose reply is recorded is answered from the record and
 * never reaches the file system.  Nothing to call: every reply of the
 * session goes through it. */

#endif
