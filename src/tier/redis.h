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
 *   CFS_E_PROTO  a reply hiredis cannot parse, or one past the limits below
 *                (its command's reply cap included);
 *   CFS_E_AUTH   the server refused AUTH (WRONGPASS, NOAUTH, any error reply);
 *   -EPERM       the host resolved only to addresses opts.addr_ok refused
 *                (nothing was sent anywhere);
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
 * Reply caps.  Every command queued carries the most its reply may be
 * (cfs_redis_append_max; cfs_redis_append gives CFS_REDIS_REPLY_MAX), in
 * the cost CFS_REDIS_COST counts: CFS_REDIS_OBJ_COST bytes per element
 * (string, integer, nil, array), plus each string's bytes, plus 8 per
 * array element -- about what hiredis allocates for it.  The cap is
 * enforced while the reply arrives, never after: an array or bulk string
 * header that announces more than is left is refused at once, before its
 * bytes are waited for, and after every read the bytes held for a reply
 * not yet complete (parsed and buffered) are checked, so a refused reply
 * costs at most its cap plus one read (16 KiB) of memory.
 *
 * Names are resolved with a deadline (getaddrinfo has none): a numeric
 * address is parsed at once; a name is looked up by a helper thread which
 * the caller waits for until the connect deadline and then abandons (it
 * frees its own result when the lookup ends).  At most
 * CFS_REDIS_LOOKUPS_MAX lookups may be outstanding at once (a resolver
 * that never answers cannot pile up threads): past that a name fails at
 * once with -ETIMEDOUT.
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

/* The cost of a reply, for its cap (above). */
#define CFS_REDIS_OBJ_COST 64
#define CFS_REDIS_COST(objects, bytes) ((size_t)(objects) * CFS_REDIS_OBJ_COST + (size_t)(bytes))
/* cfs_redis_append's cap: one bulk string of the most Redis allows. */
#define CFS_REDIS_REPLY_MAX CFS_REDIS_COST(2, CFS_REDIS_MAX_BULK + 1)

#define CFS_REDIS_LOOKUPS_MAX 8

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
	/* When set, a connection is made only to an address (port: the
	 * node's) it returns 1 for; each address a name resolves to is
	 * asked.  None accepted: -EPERM, nothing sent. */
	int (*addr_ok)(void *arg, const struct cfs_cluster_addr *a, int port);
	void *addr_arg;
};

/* Connects to host:port (a name or an IPv4/IPv6 literal; each address it
 * resolves to is tried within the one deadline), with TLS and AUTH as o
 * says (o NULL: plain, no AUTH, default deadlines).  *out is set on 0. */
int cfs_redis_connect(const char *host, int port, const struct cfs_redis_opts *o,
		      struct cfs_redis **out);
/* The same, done by deadline (CLOCK_MONOTONIC ms) too: the sooner of it
 * and connect_ms from now. */
int cfs_redis_connect_by(const char *host, int port, const struct cfs_redis_opts *o,
			 int64_t deadline, struct cfs_redis **out);
/* The address the connection was made to. */
void cfs_redis_peer(const struct cfs_redis *c, struct cfs_cluster_addr *out);
/* Closes the connection (replies not read are dropped); NULL is safe. */
void cfs_redis_close(struct cfs_redis *c);

/* Queues a command (pipelining: queue several, then read their replies in
 * order).  argvlen NULL: the arguments are NUL-terminated strings; else
 * binary, argvlen[i] bytes each.  Sends nothing. */
int cfs_redis_append(struct cfs_redis *c, int argc, const char *const *argv,
		     const size_t *argvlen);
/* The same, its reply capped at reply_max (CFS_REDIS_COST; 0: the default). */
int cfs_redis_append_max(struct cfs_redis *c, int argc, const char *const *argv,
			 const size_t *argvlen, size_t reply_max);

/* Sends what is queued and reads the next reply, within io_ms.  *out is set
 * on 0; free it with cfs_redis_reply_free. */
int cfs_redis_reply(struct cfs_redis *c, struct cfs_redis_reply **out);
/* The same, by deadline (CLOCK_MONOTONIC ms) rather than io_ms from now. */
int cfs_redis_reply_by(struct cfs_redis *c, int64_t deadline, struct cfs_redis_reply **out);

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

/* Tests: the lookup a name goes through (NULL: getaddrinfo).  Set it
 * while no connection is being made. */
struct addrinfo;
typedef int (*cfs_redis_lookup_fn)(const char *host, const char *service,
				   const struct addrinfo *hints, struct addrinfo **res);
void cfs_redis_set_lookup(cfs_redis_lookup_fn fn);

#endif
