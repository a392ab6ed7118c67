/* redis: one connection to one Redis node for the shared cache tier (issue
 * 15); owns hiredis.
 *
 * hiredis (0.14 on Debian 12) does the protocol only: it encodes commands
 * (redisFormatCommandArgv) and decodes replies (its reader).  This module
 * does the socket I/O itself -- a non-blocking TCP connect with a deadline,
 * TCP_NODELAY, every write and read bounded by poll deadlines -- optionally
 * over TLS (rediss://, through crypto's cfs_tls_*: the server's certificate
 * and name are always verified).  Replies come back as cluster.h's tree
 * (struct cfs_cluster_reply), so no hiredis type leaves this module.
 *
 * Returns, throughout: 0, or
 *   CFS_E_NET    connection refused or reset, the server closed (EOF),
 *                another transport failure, or TLS handshake failure;
 *   -ETIMEDOUT   a deadline passed (connect + TLS + AUTH within connect_ms,
 *                each reply within io_ms);
 *   CFS_E_TLS    the server's certificate does not verify (chain or name);
 *   CFS_E_CONFIG a ca_file that cannot be loaded;
 *   CFS_E_PROTO  a reply hiredis cannot parse, or one past the limits below;
 *   CFS_E_AUTH   the server refused AUTH (WRONGPASS, NOAUTH, any error reply);
 *   -EINVAL      a call that makes no sense (a reply with nothing queued);
 *   -ENOMEM.
 * After CFS_E_NET, -ETIMEDOUT or CFS_E_PROTO the connection is broken (the
 * replies still due can no longer be matched to their commands): every
 * later call returns CFS_E_NET and the caller closes it.  An error REPLY
 * from the server ("MOVED 3999 127.0.0.1:7001", "WRONGTYPE ...") is not an
 * error return: it is a CFS_RESP_ERROR node in the tree.
 *
 * The password is used for AUTH only: it is never stored, logged or put in
 * an error message, and the encoded AUTH command is wiped once sent.
 *
 * Host names are resolved with getaddrinfo, which has no deadline: give
 * addresses where that matters (cluster nodes announce addresses).
 * Not thread-safe: one user of a connection at a time. */
#ifndef CFS_REDIS_H
#define CFS_REDIS_H

#include <stddef.h>
#include <stdint.h>

#include "cluster.h"

/* Limits on what a reply may be (beyond them: CFS_E_PROTO). */
#define CFS_REDIS_MAX_BULK (512u << 20)  /* one bulk string, as Redis itself caps it */
#define CFS_REDIS_MAX_DEPTH 7            /* nested arrays (hiredis 0.14's own limit) */
#define CFS_REDIS_MAX_ELEMENTS (1 << 20) /* elements of one array */

#define CFS_REDIS_CONNECT_MS 500
#define CFS_REDIS_IO_MS 1000

struct cfs_redis; /* one connection to one node; not thread-safe: one user at a time */
struct cfs_redis_reply;

struct cfs_redis_opts {
	int tls;             /* rediss:// */
	const char *ca_file; /* TLS: a CA bundle, NULL = system */
	const char *user;    /* AUTH user (NULL: AUTH password only) */
	const char *password; /* NULL: no AUTH */
	int connect_ms;      /* connect + TLS + AUTH deadline; default 500 when 0 */
	int io_ms;           /* each reply's deadline; default 1000 when 0 */
};

/* Connects to host:port (a name or an IPv4/IPv6 literal; each address it
 * resolves to is tried within the one deadline), with TLS and AUTH as o
 * says (o NULL: plain, no AUTH, default deadlines).  *out is set on 0. */
int cfs_redis_connect(const char *host, int port, const struct cfs_redis_opts *o,
		      struct cfs_redis **out);
/* Closes the connection (replies not read are dropped); NULL is safe. */
void cfs_redis_close(struct cfs_redis *c);

/* Queues a command (pipelining: queue several, then read their replies in
 * order).  argvlen NULL: the arguments are NUL-terminated strings; else
 * binary, argvlen[i] bytes each.  Sends nothing. */
int cfs_redis_append(struct cfs_redis *c, int argc, const char *const *argv,
		     const size_t *argvlen);

/* Sends what is queued and reads the next reply, within io_ms.  *out is set
 * on 0; free it with cfs_redis_reply_free. */
int cfs_redis_reply(struct cfs_redis *c, struct cfs_redis_reply **out);

/* The reply as a tree; valid until cfs_redis_reply_free.  Strings point into
 * the reply (len bytes, and a NUL after them). */
const struct cfs_cluster_reply *cfs_redis_tree(const struct cfs_redis_reply *r);
void cfs_redis_reply_free(struct cfs_redis_reply *r); /* NULL is safe */

/* 1 when an I/O or protocol error made the connection unusable (close it). */
int cfs_redis_broken(const struct cfs_redis *c);

/* A deadline for the replies to come (an absolute cfs_clock_mono_ms time;
 * 0: none): a reply waits until it or io_ms, whichever is first.  The
 * cluster client sets its call's deadline here. */
void cfs_redis_set_deadline(struct cfs_redis *c, int64_t deadline_ms);

/* Ends the connection's I/O from another thread (shutdown(2) of its socket):
 * a call waiting in it returns CFS_E_NET at once, later ones too; the
 * owner still closes it.  Safe while the owner uses it, not after it is
 * closed. */
void cfs_redis_abort(struct cfs_redis *c);

/* How many commands are queued or sent whose replies are not read yet. */
size_t cfs_redis_pending(const struct cfs_redis *c);

/* Convenience: one command, one reply (append, then reply). */
int cfs_redis_command(struct cfs_redis *c, int argc, const char *const *argv,
		      const size_t *argvlen, struct cfs_redis_reply **out);

#endif
