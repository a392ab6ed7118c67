/* fwd: the supervisor's table of forwarded requests (forward recovery mode).
 *
 * The supervisor is the only reader of /dev/fuse.  Each request is kept until
 * the server acks its reply (8 bytes: the unique) and is sent to the server as
 * one SOCK_SEQPACKET message; the server replies to the kernel itself.  A new
 * server gets every kept request again, in arrival order.  FORGET,
 * BATCH_FORGET and INTERRUPT have no reply and are forwarded, never kept.
 * Single-threaded: only the supervisor's loop uses it. */
#ifndef CFS_FWD_H
#define CFS_FWD_H

#include <stddef.h>
#include <stdint.h>

struct cfs_fwd;

struct cfs_fwd_info {
	uint64_t unique;
	uint32_t opcode;
	uint64_t nodeid;
};

struct cfs_fwd *cfs_fwd_new(void);
void cfs_fwd_free(struct cfs_fwd *f);

/* Reads one request from fuse_fd, keeps it and forwards it on sock (-1: no
 * server now; it waits for the replay).  Returns 1, -ENODEV once unmounted,
 * or -errno. */
int cfs_fwd_read(struct cfs_fwd *f, int fuse_fd, int sock);
/* Takes every ack waiting on sock.  Returns 0, or -EPIPE when the server
 * closed its end. */
int cfs_fwd_acks(struct cfs_fwd *f, int sock);
/* Sends every kept request on sock; returns how many. */
size_t cfs_fwd_replay(struct cfs_fwd *f, int sock);
/* The i-th kept request; 0 past the end. */
int cfs_fwd_pending(const struct cfs_fwd *f, size_t i, struct cfs_fwd_info *out);
/* Forgets a request (answered by someone else). */
void cfs_fwd_answered(struct cfs_fwd *f, uint64_t unique);
/* Number of kept requests. */
size_t cfs_fwd_count(const struct cfs_fwd *f);

#endif
