/* ctlsock: the mount's control socket, a way to its daemon that does not go
 * through the mount.
 *
 * `colabfs stats` and `colabfs umount` ask the daemon through extended
 * attributes on the mount (ctlname.h), which are FUSE requests: they wait
 * in the kernel's queue behind the reads and lookups before them, for a
 * free FUSE worker, and for a server that is restarting.  So each server
 * also listens on a Unix socket of the abstract namespace named after the
 * mount's device number, CFS_CTLSOCK_FMT (from /proc/self/mountinfo, which
 * the command line reads too: no request to the mount finds it), served by
 * a thread of its own that does nothing else.
 *
 * Protocol: the client connects, sends one request line and reads the
 * answer until the server closes:
 *   "pid\n"    the pid the mount reports (user.colabfs.pid's: the
 *              supervisor's when supervised), in decimal;
 *   "stats\n"  the stats JSON (user.colabfs.stats's).
 * Anything else, or a request not complete within CFS_CTLSOCK_IO_MS, is
 * closed unanswered.  Only root and the mount's owner are answered (the
 * peer's credentials, SO_PEERCRED); others are closed unanswered and use
 * the attributes, whose rules are ctlname.h's.  The client checks the
 * server's credentials the same way (mnt.h: the mount's user_id).
 *
 * The socket dies with its server; a client that finds none (a restart, an
 * older daemon, another network namespace) uses the attributes. */
#ifndef CFS_CTLSOCK_H
#define CFS_CTLSOCK_H

#include <stdint.h>

#include "buf.h"

#define CFS_CTLSOCK_FMT "colabfs-ctl-%u:%u" /* abstract: a leading NUL byte, no file */
#define CFS_CTLSOCK_IO_MS 2000

struct cfs_ctlsock;

struct cfs_ctlsock_opts {
	unsigned major, minor; /* the mount's device */
	uint32_t owner;        /* answered besides root */
	int pid;               /* the answer to "pid" */
	/* the answer to "stats" into out; 0 or -errno */
	int (*stats)(void *arg, struct cfs_buf *out);
	void *arg;
};

/* Binds the socket and starts its thread.  0, or -errno (EADDRINUSE:
 * another process holds the name), logged by the caller. */
int cfs_ctlsock_start(const struct cfs_ctlsock_opts *o, struct cfs_ctlsock **out);

/* Stops the thread (after the request it is answering) and closes the
 * socket; NULL is safe. */
void cfs_ctlsock_stop(struct cfs_ctlsock *s);

#endif
