/* serve_io: the server's side of a supervised mount (see super.h).
 *
 * Owns the server's /dev/fuse I/O through libfuse's custom io: requests come
 * from the inherited /dev/fuse descriptor.  In forward mode each is read
 * straight into the shared request log (reqlog.h) and its record freed once
 * the reply is written; a new server serves what the last one left there
 * first.  Otherwise the requests being worked on are published in the
 * shared page for the crash-loop guard.  It completes FUSE_INIT from the recorded request: the
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

/* The reply journal, for a write path to come.  A request read twice (the
 * kernel's resend sets bit 63 of its unique; a forward replay repeats it)
 * runs twice: harmless for every request of today's read-only mount.  A
 * request that changes state (create, mkdir, unlink, rename, setattr, write)
 * must not: its reply is to be recorded, keyed by the unique without bit 63,
 * before it is sent, and a repeated request answered from the record.  When
 * set, lookup is asked for every request of those opcodes before it is
 * served; it returns 1 and fills the recorded reply (at most cap bytes) when
 * there is one.  NULL today: nothing changes state. */
extern int (*cfs_serve_journal_lookup)(uint64_t key, uint32_t opcode, void *reply, size_t cap,
				       size_t *len);

#endif
