/* serve_io: the server's side of a supervised mount (see super.h).
 *
 * Owns the server's /dev/fuse I/O through libfuse's custom io: requests come
 * from the inherited /dev/fuse descriptor (resend mode) or from the
 * supervisor's socket (forward mode, where each reply is acked); the
 * requests being worked on are published in the shared page for the
 * crash-loop guard.  It completes FUSE_INIT from the recorded request: the
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
	int forward_fd;              /* -1 in resend mode */
	struct cfs_super_shm *shm;
};

/* Attaches the session to the descriptors and completes INIT.  Returns 0,
 * -EPROTO when the replayed INIT's reply differs from the recorded one (the
 * server must not serve), or -errno. */
int cfs_serve_io_attach(struct fuse_session *se, const struct cfs_serve_io_opts *o);

#endif
