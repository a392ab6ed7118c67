/* redis: the hiredis owner (see redis.h).
 *
 * The queue is one buffer of encoded commands; cfs_redis_reply sends all of
 * it, then reads until the reader has one whole reply.  Sending everything
 * before reading cannot deadlock with Redis, which buffers its replies
 * rather than stop reading.  hiredis 0.14's reader checks the syntax (bad
 * lengths, type bytes, integers, nesting deeper than 7); the limits it does
 * not know (CFS_REDIS_MAX_*) are enforced here: array sizes and depth when
 * the reader creates an array, a bulk string's length from its header
 * before its bytes are awaited. */
#define _GNU_SOURCE /* explicit_bzero */
#include "redis.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "crypto.h"
#include "err.h"
#include "fdwait.h"
#include "log.h"

#define OUT_KEEP (64u << 10) /* the send buffer kept between commands, at most */

struct cfs_redis {
	int fd;
	struct cfs_tls *tls;
	redisReader *rd;
	redisReplyObjectFunctions fn; /* hiredis' own, each creation counted and checked */
	redisReplyObjectFunctions own;
	int over_limit;            /* the reader stopped at one of our limits */
	size_t used;               /* the reply being read: the cost of its objects so far */
	size_t cap;                /* ... and its cap */
	size_t *caps;              /* ring: the caps of the pending replies, oldest at head */
	size_t ncaps, head;        /* ncaps: a power of two (or 0) */
	char *out;                 /* encoded commands not sent yet */
	size_t olen, ocap;
	size_t pending;            /* commands whose replies are not read yet */
	int io_ms;
	int64_t deadline;          /* cfs_redis_set_deadline's, 0: none */
	int broken;
	struct cfs_cluster_addr peer_addr;
	char peer[CFS_CLUSTER_HOST_MAX + 8]; /* host:port, for log lines */
};

struct cfs_redis_reply {
	redisReply *raw;
	struct cfs_cluster_reply *node; /* node[0] is the root */
	const struct cfs_cluster_reply **el;
};

/* --- the reader, with our limits ---------------------------------------- */

/* Counts cost into the reply being read: 0, or 1 when it goes past its cap
 * (the reader is then stopped: over_limit). */
static int charge(struct cfs_redis *c, size_t cost)
{
	c->used += cost;
	if (c->used <= c->cap)
		return 0;
	c->over_limit = 1;
	return 1;
}

static void *limited_array(const redisReadTask *t, int elements)
{
	struct cfs_redis *c = t->privdata;
	int depth = 1;
	for (const redisReadTask *p = t->parent; p; p = p->parent)
		depth++;
	if (elements > CFS_REDIS_MAX_ELEMENTS || depth > CFS_REDIS_MAX_DEPTH) {
		c->over_limit = 1;
		return NULL; /* the reader fails (as out of memory); we say CFS_E_PROTO */
	}
	/* each element costs an object at least: refused before any arrives */
	size_t n = elements > 0 ? (size_t)elements : 0;
	if (charge(c, CFS_REDIS_COST(1, n * sizeof(void *))) ||
	    c->used + CFS_REDIS_COST(n, 0) > c->cap) {
		c->over_limit = 1;
		return NULL;
	}
	return c->own.createArray(t, elements);
}

static void *limited_string(const redisReadTask *t, char *str, size_t len)
{
	struct cfs_redis *c = t->privdata;
	return charge(c, CFS_REDIS_COST(1, len + 1)) ? NULL : c->own.createString(t, str, len);
}

static void *limited_integer(const redisReadTask *t, long long v)
{
	struct cfs_redis *c = t->privdata;
	return charge(c, CFS_REDIS_COST(1, 0)) ? NULL : c->own.createInteger(t, v);
}

static void *limited_nil(const redisReadTask *t)
{
	struct cfs_redis *c = t->privdata;
	return charge(c, CFS_REDIS_COST(1, 0)) ? NULL : c->own.createNil(t);
}

static int reader_new(struct cfs_redis *c)
{
	if (!(c->rd = redisReaderCreate()))
		return -ENOMEM;
	c->own = *c->rd->fn;
	c->fn = c->own;
	c->fn.createArray = limited_array;
	c->fn.createString = limited_string;
	c->fn.createInteger = limited_integer;
	c->fn.createNil = limited_nil;
	c->rd->fn = &c->fn;
	c->rd->privdata = c;
	return 0;
}

/* A bulk string's length is checked from its header, before its bytes are
 * waited for: the reader has taken the '$' (the task's type says STRING)
 * and the length line is what it holds unparsed.  1 when it is past the
 * limit or past what is left of the reply's cap. */
static int bulk_too_big(const struct cfs_redis *c)
{
	const redisReader *r = c->rd;
	if (r->ridx < 0 || r->rstack[r->ridx].type != REDIS_REPLY_STRING)
		return 0;
	unsigned long long v = 0;
	for (size_t i = r->pos; i < r->len && r->buf[i] >= '0' && r->buf[i] <= '9'; i++) {
		v = v * 10 + (unsigned)(r->buf[i] - '0');
		if (v > CFS_REDIS_MAX_BULK || c->used + CFS_REDIS_COST(1, v + 1) > c->cap)
			return 1;
	}
	return 0;
}

/* 1 when the reply being read holds more than its cap: the objects made
 * and the bytes received but not parsed yet (all of them this reply's: it
 * is not complete). */
static int held_too_much(const struct cfs_redis *c)
{
	return c->used + (c->rd->len - c->rd->pos) > c->cap;
}

/* For log lines: err.c's words for CFS_E_NET speak of Drive. */
static const char *why(int rc)
{
	return rc == CFS_E_NET ? "network failure" : cfs_strerror(rc);
}

/* --- the transport ------------------------------------------------------ */

static int conn_write(struct cfs_redis *c, const char *p, size_t n, int64_t deadline)
{
	if (c->tls)
		return cfs_tls_write(c->tls, p, n, deadline);
	while (n) {
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
		} else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int rc = cfs_fd_wait(c->fd, POLLOUT, deadline);
			if (rc)
				return rc;
		} else if (!(w < 0 && errno == EINTR)) {
			return CFS_E_NET;
		}
	}
	return 0;
}

/* > 0 bytes, or CFS_E_NET (EOF too), -ETIMEDOUT. */
static ssize_t conn_read(struct cfs_redis *c, char *p, size_t cap, int64_t deadline)
{
	if (c->tls)
		return cfs_tls_read(c->tls, p, cap, deadline);
	for (;;) {
		ssize_t r = recv(c->fd, p, cap, 0);
		if (r > 0)
			return r;
		if (r == 0)
			return CFS_E_NET;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int rc = cfs_fd_wait(c->fd, POLLIN, deadline);
			if (rc)
				return rc;
		} else if (errno != EINTR) {
			return CFS_E_NET;
		}
	}
}

/* --- names, with a deadline --------------------------------------------- */

static cfs_redis_lookup_fn lookup_fn; /* tests; NULL: getaddrinfo */
static int lookups_out;               /* helper threads not finished */

void cfs_redis_set_lookup(cfs_redis_lookup_fn fn)
{
	lookup_fn = fn;
}

/* One lookup, shared by the caller and its helper thread; the last of the
 * two to let go frees it (and its result when nobody took it). */
struct lookup {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int refs, done, rc;
	struct addrinfo *res;
	cfs_redis_lookup_fn fn;
	char host[CFS_CLUSTER_HOST_MAX];
	char service[16];
};

static void lookup_put(struct lookup *l)
{
	pthread_mutex_lock(&l->mu);
	int last = --l->refs == 0;
	pthread_mutex_unlock(&l->mu);
	if (!last)
		return;
	if (l->res)
		freeaddrinfo(l->res);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

static void *lookup_main(void *arg)
{
	struct lookup *l = arg;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	int rc = l->fn(l->host, l->service, &hints, &res);
	pthread_mutex_lock(&l->mu);
	l->rc = rc;
	l->res = rc ? NULL : res;
	l->done = 1;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	__atomic_sub_fetch(&lookups_out, 1, __ATOMIC_RELAXED);
	lookup_put(l);
	return NULL;
}

static int gai_status(int g)
{
	return g == EAI_MEMORY ? -ENOMEM : CFS_E_NET;
}

/* host:port's addresses into *res (freeaddrinfo it), by deadline: 0,
 * CFS_E_NET (no such name), -ETIMEDOUT, -ENOMEM. */
static int resolve(const char *host, int port, int64_t deadline, struct addrinfo **res)
{
	char service[16];
	snprintf(service, sizeof(service), "%d", port);
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	*res = NULL;
	int g = getaddrinfo(host, service, &hints, res); /* a literal: no lookup, no wait */
	if (g != EAI_NONAME)
		return g ? gai_status(g) : 0;
	if (__atomic_add_fetch(&lookups_out, 1, __ATOMIC_RELAXED) > CFS_REDIS_LOOKUPS_MAX) {
		__atomic_sub_fetch(&lookups_out, 1, __ATOMIC_RELAXED);
		CFS_DEBUG("redis %s: %d name lookups still unanswered: not starting another", host,
			  CFS_REDIS_LOOKUPS_MAX);
		return -ETIMEDOUT;
	}
	struct lookup *l = calloc(1, sizeof(*l));
	pthread_condattr_t ca;
	pthread_attr_t ta;
	pthread_t th;
	int rc = l ? 0 : -ENOMEM;
	if (l) {
		pthread_mutex_init(&l->mu, NULL);
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&l->cv, &ca);
		pthread_condattr_destroy(&ca);
		l->refs = 2;
		l->fn = lookup_fn ? lookup_fn : getaddrinfo;
		snprintf(l->host, sizeof(l->host), "%s", host);
		snprintf(l->service, sizeof(l->service), "%s", service);
		pthread_attr_init(&ta);
		pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&th, &ta, lookup_main, l) != 0) {
			l->refs = 1;
			rc = -ENOMEM;
		}
		pthread_attr_destroy(&ta);
	}
	if (rc) {
		__atomic_sub_fetch(&lookups_out, 1, __ATOMIC_RELAXED);
		if (l)
			lookup_put(l);
		return rc;
	}
	struct timespec until = { .tv_sec = (time_t)(deadline / 1000),
				  .tv_nsec = (long)(deadline % 1000) * 1000000L };
	pthread_mutex_lock(&l->mu);
	while (!l->done && pthread_cond_timedwait(&l->cv, &l->mu, &until) != ETIMEDOUT)
		;
	if (l->done) {
		rc = l->rc ? gai_status(l->rc) : 0;
		*res = l->res;
		l->res = NULL;
	} else {
		rc = -ETIMEDOUT;
	}
	pthread_mutex_unlock(&l->mu);
	lookup_put(l);
	if (rc == -ETIMEDOUT)
		CFS_DEBUG("redis %s: no address in time (the lookup goes on without us)", host);
	return rc;
}

/* Connects to one of host:port's addresses that o accepts. */
static int tcp_connect(const char *host, int port, const struct cfs_redis_opts *o,
		       int64_t deadline, int *fd_out, struct cfs_cluster_addr *peer)
{
	struct addrinfo *res = NULL;
	int rc = resolve(host, port, deadline, &res);
	if (rc)
		return rc;
	rc = CFS_E_NET;
	int refused = 0, tried = 0;
	for (struct addrinfo *a = res; a; a = a->ai_next) {
		struct cfs_cluster_addr x;
		const void *ip = a->ai_family == AF_INET
					 ? (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr
					 : (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
		if (cfs_cluster_addr_from(a->ai_family, ip, &x) != 0)
			continue;
		if (o->addr_ok && !o->addr_ok(o->addr_arg, &x, port)) {
			refused++;
			continue;
		}
		tried++;
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				a->ai_protocol);
		if (fd < 0)
			continue;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		rc = 0;
		if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
			rc = CFS_E_NET;
			if (errno == EINPROGRESS && !(rc = cfs_fd_wait(fd, POLLOUT, deadline))) {
				int err = 0;
				socklen_t len = sizeof(err);
				if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
					rc = CFS_E_NET;
			}
		}
		if (!rc) {
			*fd_out = fd;
			*peer = x;
			break;
		}
		close(fd);
		if (rc == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	return refused && !tried ? -EPERM : rc;
}

/* --- replies as trees --------------------------------------------------- */

static int tree_count(const redisReply *r, int depth, size_t *nodes, size_t *els)
{
	++*nodes;
	if (r->type != REDIS_REPLY_ARRAY)
		return 0;
	if (depth > CFS_REDIS_MAX_DEPTH)
		return CFS_E_PROTO;
	*els += r->elements;
	for (size_t i = 0; i < r->elements; i++) {
		int rc = tree_count(r->element[i], depth + 1, nodes, els);
		if (rc)
			return rc;
	}
	return 0;
}

/* Fills node *next (and its children after it); returns it, or NULL for a
 * type this module does not know. */
static struct cfs_cluster_reply *tree_fill(const redisReply *r, struct cfs_redis_reply *out,
					   size_t *next, size_t *nextel)
{
	struct cfs_cluster_reply *n = &out->node[(*next)++];
	switch (r->type) {
	case REDIS_REPLY_STRING:
		n->type = CFS_RESP_STRING;
		break;
	case REDIS_REPLY_STATUS:
		n->type = CFS_RESP_STATUS;
		break;
	case REDIS_REPLY_ERROR:
		n->type = CFS_RESP_ERROR;
		break;
	case REDIS_REPLY_INTEGER:
		n->type = CFS_RESP_INTEGER;
		n->integer = r->integer;
		return n;
	case REDIS_REPLY_NIL:
		n->type = CFS_RESP_NIL;
		return n;
	case REDIS_REPLY_ARRAY:
		n->type = CFS_RESP_ARRAY;
		n->n = r->elements;
		n->el = (const struct cfs_cluster_reply *const *)&out->el[*nextel];
		size_t first = *nextel;
		*nextel += r->elements;
		for (size_t i = 0; i < r->elements; i++)
			if (!(out->el[first + i] = tree_fill(r->element[i], out, next, nextel)))
				return NULL;
		return n;
	default:
		return NULL;
	}
	n->str = r->str;
	n->len = r->len;
	return n;
}

static int tree_make(redisReply *raw, struct cfs_redis_reply **out)
{
	size_t nodes = 0, els = 0;
	int rc = tree_count(raw, 1, &nodes, &els);
	if (rc) {
		freeReplyObject(raw);
		return rc;
	}
	struct cfs_redis_reply *r = calloc(1, sizeof(*r));
	if (r) {
		r->raw = raw;
		r->node = calloc(nodes, sizeof(*r->node));
		r->el = els ? calloc(els, sizeof(*r->el)) : NULL;
	}
	if (!r || !r->node || (els && !r->el)) {
		if (!r)
			freeReplyObject(raw);
		cfs_redis_reply_free(r);
		return -ENOMEM;
	}
	size_t next = 0, nextel = 0;
	if (!tree_fill(raw, r, &next, &nextel)) {
		cfs_redis_reply_free(r);
		return CFS_E_PROTO;
	}
	*out = r;
	return 0;
}

const struct cfs_cluster_reply *cfs_redis_tree(const struct cfs_redis_reply *r)
{
	return &r->node[0];
}

void cfs_redis_reply_free(struct cfs_redis_reply *r)
{
	if (!r)
		return;
	if (r->raw)
		freeReplyObject(r->raw);
	free(r->node);
	free(r->el);
	free(r);
}

/* --- commands and replies ----------------------------------------------- */

static int fail(struct cfs_redis *c, int rc)
{
	if (rc == CFS_E_NET || rc == -ETIMEDOUT || rc == CFS_E_PROTO) {
		if (!c->broken)
			CFS_DEBUG("redis %s: connection broken: %s", c->peer, why(rc));
		c->broken = 1;
	}
	return rc;
}

/* Room for one more cap in the ring. */
static int caps_room(struct cfs_redis *c)
{
	if (c->pending < c->ncaps)
		return 0;
	size_t n = c->ncaps ? c->ncaps * 2 : 16;
	size_t *p = malloc(n * sizeof(*p));
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < c->pending; i++)
		p[i] = c->caps[(c->head + i) & (c->ncaps - 1)];
	free(c->caps);
	c->caps = p;
	c->ncaps = n;
	c->head = 0;
	return 0;
}

int cfs_redis_append_max(struct cfs_redis *c, int argc, const char *const *argv,
			 const size_t *argvlen, size_t reply_max)
{
	if (c->broken)
		return CFS_E_NET;
	if (argc < 1)
		return -EINVAL;
	if (caps_room(c))
		return -ENOMEM;
	char *cmd = NULL;
	int n = redisFormatCommandArgv(&cmd, argc, (const char **)argv, argvlen);
	if (n < 0)
		return -ENOMEM;
	if (c->olen + (size_t)n > c->ocap) {
		size_t cap = c->ocap ? c->ocap : 4096;
		while (cap < c->olen + (size_t)n)
			cap *= 2;
		char *p = realloc(c->out, cap);
		if (!p) {
			explicit_bzero(cmd, (size_t)n);
			redisFreeCommand(cmd);
			return -ENOMEM;
		}
		c->out = p;
		c->ocap = cap;
	}
	memcpy(c->out + c->olen, cmd, (size_t)n);
	c->olen += (size_t)n;
	c->caps[(c->head + c->pending) & (c->ncaps - 1)] = reply_max ? reply_max
								     : CFS_REDIS_REPLY_MAX;
	c->pending++;
	explicit_bzero(cmd, (size_t)n); /* it may be an AUTH */
	redisFreeCommand(cmd);
	return 0;
}

int cfs_redis_append(struct cfs_redis *c, int argc, const char *const *argv,
		     const size_t *argvlen)
{
	return cfs_redis_append_max(c, argc, argv, argvlen, 0);
}

/* Sends the queue, then reads one reply, all before deadline. */
static int reply_by(struct cfs_redis *c, int64_t deadline, struct cfs_redis_reply **out)
{
	*out = NULL;
	if (c->broken)
		return CFS_E_NET;
	if (!c->pending)
		return -EINVAL;
	int rc = 0;
	if (c->olen) {
		rc = conn_write(c, c->out, c->olen, deadline);
		/* the queue may have held an AUTH: wipe what went (or failed to) */
		explicit_bzero(c->out, c->olen);
		c->olen = 0;
		if (c->ocap > OUT_KEEP) { /* a block went out: an idle connection keeps little */
			free(c->out);
			c->out = NULL;
			c->ocap = 0;
		}
		if (rc)
			return fail(c, rc);
	}
	c->cap = c->caps[c->head]; /* this reply's (c->used counts it since the last one) */
	char buf[16384];
	for (;;) {
		void *raw = NULL;
		if (redisReaderGetReply(c->rd, &raw) != REDIS_OK) {
			if (c->over_limit)
				CFS_DEBUG("redis %s: a reply past its cap (%zu) or our limits", c->peer,
					  c->cap);
			else
				CFS_DEBUG("redis %s: bad reply: %s", c->peer, c->rd->errstr);
			c->broken = 1; /* the reader cannot go on */
			return fail(c, c->rd->err == REDIS_ERR_OOM && !c->over_limit ? -ENOMEM
										  : CFS_E_PROTO);
		}
		if (raw) {
			c->pending--;
			c->head = (c->head + 1) & (c->ncaps - 1);
			c->used = 0;
			rc = tree_make(raw, out);
			return rc == -ENOMEM ? rc : fail(c, rc);
		}
		if (bulk_too_big(c) || held_too_much(c)) {
			CFS_DEBUG("redis %s: a reply past its cap (%zu bytes)", c->peer, c->cap);
			return fail(c, CFS_E_PROTO);
		}
		ssize_t n = conn_read(c, buf, sizeof(buf), deadline);
		if (n < 0)
			return fail(c, (int)n);
		if (redisReaderFeed(c->rd, buf, (size_t)n) != REDIS_OK)
			return fail(c, CFS_E_PROTO);
	}
}

int cfs_redis_reply(struct cfs_redis *c, struct cfs_redis_reply **out)
{
	int64_t by = cfs_clock_mono_ms() + c->io_ms;
	return reply_by(c, c->deadline && c->deadline < by ? c->deadline : by, out);
}

void cfs_redis_set_deadline(struct cfs_redis *c, int64_t deadline_ms)
{
	c->deadline = deadline_ms;
}

void cfs_redis_abort(struct cfs_redis *c)
{
	if (c && c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
}

int cfs_redis_reply_by(struct cfs_redis *c, int64_t deadline, struct cfs_redis_reply **out)
{
	return reply_by(c, deadline, out);
}

int cfs_redis_command(struct cfs_redis *c, int argc, const char *const *argv,
		      const size_t *argvlen, struct cfs_redis_reply **out)
{
	*out = NULL;
	int rc = cfs_redis_append(c, argc, argv, argvlen);
	return rc ? rc : cfs_redis_reply(c, out);
}

int cfs_redis_broken(const struct cfs_redis *c)
{
	return c->broken;
}

size_t cfs_redis_pending(const struct cfs_redis *c)
{
	return c->pending;
}

void cfs_redis_peer(const struct cfs_redis *c, struct cfs_cluster_addr *out)
{
	*out = c->peer_addr;
}

/* AUTH [user] password, answered before deadline.  The encoded command is
 * wiped as it is sent (reply_by); the server's refusal is logged (it never
 * echoes the password). */
static int auth(struct cfs_redis *c, const struct cfs_redis_opts *o, int64_t deadline)
{
	const char *argv[3] = { "AUTH" };
	int argc = 1;
	if (o->user)
		argv[argc++] = o->user;
	argv[argc++] = o->password;
	int rc = cfs_redis_append_max(c, argc, argv, NULL, CFS_REDIS_COST(1, 4096));
	struct cfs_redis_reply *r = NULL;
	if (!rc)
		rc = reply_by(c, deadline, &r);
	if (rc)
		return rc;
	const struct cfs_cluster_reply *t = cfs_redis_tree(r);
	if (t->type == CFS_RESP_ERROR) {
		CFS_WARN("redis %s: AUTH refused: %.*s", c->peer, (int)(t->len > 200 ? 200 : t->len),
			 t->str);
		rc = CFS_E_AUTH;
	} else if (t->type != CFS_RESP_STATUS) {
		rc = CFS_E_PROTO;
	}
	cfs_redis_reply_free(r);
	return rc;
}

int cfs_redis_connect_by(const char *host, int port, const struct cfs_redis_opts *o,
			 int64_t deadline, struct cfs_redis **out)
{
	static const struct cfs_redis_opts none;
	*out = NULL;
	if (!o)
		o = &none;
	if (!host || port <= 0 || port > 65535 || strlen(host) >= CFS_CLUSTER_HOST_MAX)
		return -EINVAL;
	int64_t own = cfs_clock_mono_ms() + (o->connect_ms > 0 ? o->connect_ms : CFS_REDIS_CONNECT_MS);
	if (own < deadline)
		deadline = own;
	struct cfs_redis *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = -1;
	c->io_ms = o->io_ms > 0 ? o->io_ms : CFS_REDIS_IO_MS;
	snprintf(c->peer, sizeof(c->peer), "%s:%d", host, port);
	int rc = reader_new(c);
	if (!rc)
		rc = tcp_connect(host, port, o, deadline, &c->fd, &c->peer_addr);
	if (!rc && o->tls)
		rc = cfs_tls_connect(c->fd, host, o->ca_file, deadline, &c->tls);
	if (!rc && o->password)
		rc = auth(c, o, deadline);
	if (rc) {
		CFS_DEBUG("redis %s: cannot connect: %s", c->peer,
			  rc == -EPERM ? "no address of it belongs to the cluster" : why(rc));
		cfs_redis_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

int cfs_redis_connect(const char *host, int port, const struct cfs_redis_opts *o,
		      struct cfs_redis **out)
{
	return cfs_redis_connect_by(host, port, o, INT64_MAX, out);
}

void cfs_redis_close(struct cfs_redis *c)
{
	if (!c)
		return;
	cfs_tls_close(c->tls);
	if (c->fd >= 0)
		close(c->fd);
	if (c->rd)
		redisReaderFree(c->rd);
	if (c->out) {
		explicit_bzero(c->out, c->olen);
		free(c->out);
	}
	free(c->caps);
	free(c);
}
