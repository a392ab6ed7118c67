/* tier: the shared cache tier's cluster client (see tier.h for the rules).
 *
 * The node table.  node[] holds the nodes this client knows (the seeds
 * first, then the nodes maps and redirects named), each behind a pointer
 * that callers take a reference to (node_ref, under the lock) for as long as
 * they use it: a node leaves the table (node_drop: not a seed, not in the
 * latest slot map, and unused or failing for forget_ms; or the least
 * recently used such node when the table is full) at any time, and is freed
 * by whoever lets go of it last, so no caller ever holds a freed node or
 * one whose slot was given to another.  route[] and rroute[] hold indexes,
 * only of nodes in the latest map (which never leave); an index read from
 * them becomes a reference in the same critical section.
 *
 * Who belongs to the cluster (cluster.h's allow set): the seeds' hosts,
 * what a map read from a seed announces, --shared-cache-nodes.  A map read
 * from another node may only name nodes already allowed (its others'
 * slots go unserved: read from Drive); a MOVED or ASK elsewhere is refused
 * and the call fails (the caller reads Drive); the socket layer checks
 * every address it connects to (a name's too), so AUTH goes nowhere else.
 * Each refusal counts in redirects_refused; the first is logged. */
#include "tier.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clock.h"
#include "cluster.h"
#include "err.h"
#include "log.h"
#include "redis.h"

#define POOL_MAX 16        /* idle connections kept per node */
#define NODES_MAX 256
#define BUSY_MAX 256       /* connections in use that cfs_tier_cancel can end */
#define REFRESH_GAP_MS 200 /* map reads at most this often */
#define REFRESH_EVERY_MS 60000 /* and at least this often: nodes added, slots moved */
#define FORGET_MS 60000    /* a node out of the map, unused or failing this long, leaves */
#define NODE_BACKOFF_MS 250
#define NODE_BACKOFF_MAX_MS 5000
#define DOWN_BACKOFF_MS 250
#define DOWN_BACKOFF_MAX_MS 10000
#define NO_NODE 0xffff
#define VALUE_MAX_DEFAULT ((1u << 20) + 4096)
#define SMALL_REPLY CFS_REDIS_COST(1, 64u << 10) /* SET, EVAL, PING, ASKING...: a status */
#define MAP_REPLY ((size_t)32 << 20)             /* CLUSTER SLOTS: ~100 bytes a node a range */

struct node {
	char host[CFS_CLUSTER_HOST_MAX];
	int port;
	struct cfs_redis *idle[POOL_MAX];
	int nidle;
	int64_t down_until;
	int backoff_ms;
	int refs;              /* references held by callers */
	int gone;              /* out of the table: freed by the last node_put */
	int seed;              /* never leaves the table */
	int in_map;            /* named by the latest slot map */
	int by_name;           /* host is a name allowed as such: its addresses are not checked */
	int64_t used_at;       /* added or last taken */
	int64_t failing_since; /* 0, or the first failure since it last answered */
};

struct cfs_tier {
	pthread_mutex_t lock;
	struct cfs_tier_seeds seeds;
	char *password, *ca_file;
	struct cfs_redis_opts ro;
	struct node *node[NODES_MAX]; /* NULL: a free slot */
	unsigned nslots;              /* node[i] is NULL from nslots on */
	unsigned nlive;
	struct cfs_cluster_allow allow;
	uint16_t route[CFS_CLUSTER_SLOTS]; /* slot -> node[] index of its master */
	uint16_t rroute[CFS_CLUSTER_SLOTS]; /* ... of a replica of it, NO_NODE: none */
	unsigned masters;
	int have_map;
	int refreshing;
	int want_refresh;
	int64_t refresh_after;
	int64_t refreshed_at; /* the last map read that worked */
	int64_t down_until;
	int down_backoff_ms;
	int down; /* the last map read found no node answering */
	int call_ms, forget_ms;
	size_t value_max;
	int refusal_logged;
	int cancelled; /* cfs_tier_cancel: every call fails at once */
	struct cfs_redis *busy[BUSY_MAX]; /* connections in use by calls */
	unsigned nbusy;
	struct cfs_tier_stats st;
};

#define BUMP(t, f, n) __atomic_add_fetch(&(t)->st.f, (n), __ATOMIC_RELAXED)

/* ---- --shared-cache URLs ---- */

static int bad(char *why, size_t wcap, const char *what)
{
	snprintf(why, wcap, "--shared-cache: %s (want redis://HOST:PORT[,HOST:PORT...] or "
			    "rediss://...)", what);
	return CFS_E_CONFIG;
}

/* host:port or [v6]:port, len bytes at p. */
static int parse_hostport(const char *p, size_t len, char *host, size_t hcap, int *port,
			  char *why, size_t wcap)
{
	const char *colon;
	size_t hl;
	if (len && p[0] == '[') {
		const char *close = memchr(p, ']', len);
		if (!close || (size_t)(close - p) + 1 >= len || close[1] != ':')
			return bad(why, wcap, "an IPv6 host must be [ADDRESS]:PORT");
		hl = (size_t)(close - p) - 1;
		memcpy(host, p + 1, hl < hcap ? hl : 0);
		colon = close + 1;
	} else {
		colon = NULL;
		for (size_t i = 0; i < len; i++)
			if (p[i] == ':')
				colon = p + i;
		if (!colon)
			return bad(why, wcap, "every node needs a :PORT");
		hl = (size_t)(colon - p);
		if (memchr(p, '@', len))
			return bad(why, wcap, "a user name goes before the first host only");
		memcpy(host, p, hl < hcap ? hl : 0);
	}
	if (hl == 0 || hl >= hcap)
		return bad(why, wcap, "a host is empty or too long");
	host[hl] = '\0';
	for (size_t i = 0; i < hl; i++)
		if (!isalnum((unsigned char)host[i]) && !strchr(".-_:", host[i]))
			return bad(why, wcap, "a host has characters no host name has");
	const char *ps = colon + 1, *pe = p + len;
	long v = 0;
	if (ps >= pe || pe - ps > 5)
		return bad(why, wcap, "a port is missing or too long");
	for (const char *q = ps; q < pe; q++) {
		if (!isdigit((unsigned char)*q))
			return bad(why, wcap, "a port is not a number");
		v = v * 10 + (*q - '0');
	}
	if (v < 1 || v > 65535)
		return bad(why, wcap, "a port is out of range");
	*port = (int)v;
	return 0;
}

int cfs_tier_parse(const char *url, struct cfs_tier_seeds *out, char *why, size_t wcap)
{
	memset(out, 0, sizeof(*out));
	const char *p;
	if (!url || !*url)
		return bad(why, wcap, "empty");
	if (strncmp(url, "redis://", 8) == 0) {
		p = url + 8;
	} else if (strncmp(url, "rediss://", 9) == 0) {
		p = url + 9;
		out->tls = 1;
	} else {
		return bad(why, wcap, "unknown scheme");
	}
	const char *at = strchr(p, '@');
	const char *comma = strchr(p, ',');
	if (at && (!comma || at < comma)) {
		size_t ul = (size_t)(at - p);
		if (memchr(p, ':', ul)) {
			snprintf(why, wcap, "--shared-cache: a password does not belong in the URL "
					    "(the command line is visible to every user); put it in "
					    "--shared-cache-password-file or COLABFS_SHARED_CACHE_PASSWORD");
			return CFS_E_CONFIG;
		}
		if (ul == 0 || ul >= sizeof(out->user))
			return bad(why, wcap, "the user name is empty or too long");
		memcpy(out->user, p, ul);
		out->user[ul] = '\0';
		p = at + 1;
	}
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len && p[len - 1] == '/') /* redis://host:port/ */
			len--;
		if (memchr(p, '/', len) || memchr(p, '?', len))
			return bad(why, wcap, "database numbers and parameters are not used by a "
					      "cluster");
		if (out->n == CFS_TIER_SEEDS_MAX)
			return bad(why, wcap, "too many seed nodes (16 at most)");
		int rc = parse_hostport(p, len, out->seed[out->n].host,
					sizeof(out->seed[out->n].host), &out->seed[out->n].port,
					why, wcap);
		if (rc)
			return rc;
		out->n++;
		if (!e)
			break;
		if (!e[1])
			return bad(why, wcap, "a seed list ends with a comma");
		p = e + 1;
	}
	if (!out->n)
		return bad(why, wcap, "no node");
	return 0;
}

/* What went wrong, in the tier's words (cfs_strerror speaks of Drive). */
const char *cfs_tier_strerror(int rc)
{
	switch (rc) {
	case CFS_E_NET: return "no connection, or no answer in time";
	case CFS_E_PROTO: return "a reply that is not Redis protocol";
	case CFS_E_AUTH: return "the password was refused (or none was given)";
	case CFS_E_SERVER: return "the cluster refused (CLUSTERDOWN, TRYAGAIN, LOADING...)";
	case CFS_E_TLS: return "the certificate does not verify (--shared-cache-ca-file)";
	case -EPERM: return "a node outside the cluster (refused; --shared-cache-nodes widens it)";
	case -ETIMEDOUT: return "no answer in time";
	default: return cfs_strerror(rc);
	}
}

/* ---- nodes and connections ---- */

static int64_t now_ms(void)
{
	return cfs_clock_mono_ms();
}

/* A redirect, a map entry or an address outside the cluster: counted, the
 * first one logged. */
static void refuse(struct cfs_tier *t, const char *what, const char *host, int port)
{
	BUMP(t, redirects_refused, 1);
	if (!__atomic_exchange_n(&t->refusal_logged, 1, __ATOMIC_RELAXED))
		CFS_WARN("shared cache: %s names %s:%d, which is not a node of the cluster "
			 "--shared-cache named (not a seed's host, not announced by a seed, not in "
			 "--shared-cache-nodes): refused, those blocks are read from Drive (further "
			 "refusals are counted in tier_redirects_refused_total)", what, host, port);
	else
		CFS_DEBUG("shared cache: %s names %s:%d: refused", what, host, port);
}

/* lock held.  A reference to node i (NULL: none). */
static struct node *node_ref(struct cfs_tier *t, unsigned i)
{
	if (i >= t->nslots || !t->node[i])
		return NULL;
	t->node[i]->refs++;
	return t->node[i];
}

static void node_free(struct node *n)
{
	for (int k = 0; k < n->nidle; k++)
		cfs_redis_close(n->idle[k]);
	free(n);
}

static void node_put(struct cfs_tier *t, struct node *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&t->lock);
	int last = --n->refs == 0 && n->gone;
	pthread_mutex_unlock(&t->lock);
	if (last)
		node_free(n);
}

/* lock held.  Takes node i out of the table (it is freed now, or by the
 * last node_put). */
static void node_drop(struct cfs_tier *t, unsigned i)
{
	struct node *n = t->node[i];
	CFS_DEBUG("shared cache: %s:%d leaves the node table", n->host, n->port);
	t->node[i] = NULL;
	t->nlive--;
	while (t->nslots && !t->node[t->nslots - 1])
		t->nslots--;
	n->gone = 1;
	if (!n->refs)
		node_free(n);
}

static int may_leave(const struct node *n)
{
	return !n->seed && !n->in_map;
}

/* lock held.  Drops the nodes that may leave and have been unused or
 * failing for forget_ms. */
static void forget(struct cfs_tier *t, int64_t now)
{
	for (unsigned i = 0; i < t->nslots; i++) {
		struct node *n = t->node[i];
		if (n && may_leave(n) &&
		    (now - n->used_at >= t->forget_ms ||
		     (n->failing_since && now - n->failing_since >= t->forget_ms)))
			node_drop(t, i);
	}
}

/* lock held.  The node[] index of host:port (by_name: a name allowed as
 * text), added when new -- in a free slot, or in place of the least
 * recently used node that may leave when the table is full.  NO_NODE when
 * none may leave, or out of memory. */
static unsigned node_index(struct cfs_tier *t, const char *host, int port, int by_name)
{
	unsigned free_at = NO_NODE, lru = NO_NODE;
	for (unsigned i = 0; i < t->nslots; i++) {
		struct node *n = t->node[i];
		if (!n) {
			if (free_at == NO_NODE)
				free_at = i;
			continue;
		}
		if (n->port == port && strcmp(n->host, host) == 0) {
			n->by_name |= by_name; /* a seed may announce a name met before */
			return i;
		}
		if (may_leave(n) && (lru == NO_NODE || n->used_at < t->node[lru]->used_at))
			lru = i;
	}
	if (free_at == NO_NODE && t->nslots < NODES_MAX)
		free_at = t->nslots;
	if (free_at == NO_NODE && lru != NO_NODE) {
		node_drop(t, lru);
		free_at = lru;
	}
	if (free_at == NO_NODE)
		return NO_NODE;
	struct node *n = calloc(1, sizeof(*n));
	if (!n)
		return NO_NODE;
	snprintf(n->host, sizeof(n->host), "%s", host);
	n->port = port;
	n->by_name = by_name;
	n->used_at = now_ms();
	t->node[free_at] = n;
	t->nlive++;
	if (free_at >= t->nslots)
		t->nslots = free_at + 1;
	return free_at;
}

/* lock held.  1 when host:port may be added to the table (*by_name: it is
 * allowed as a name, its addresses unchecked); with --shared-cache-nodes a
 * name not allowed as text may be too, its addresses checked at connect. */
static int node_allowed(struct cfs_tier *t, const char *host, int port, int *by_name)
{
	struct cfs_cluster_addr x;
	int numeric = cfs_cluster_addr_parse(host, &x);
	*by_name = 0;
	if (cfs_cluster_allowed(&t->allow, host, port)) {
		*by_name = !numeric;
		return 1;
	}
	return !numeric && t->allow.ncidr > 0;
}

struct conn_check {
	struct cfs_tier *t;
	struct node *n;
};

/* redis.h's addr_ok: only addresses of the cluster, but any address of a
 * host allowed by name. */
static int addr_ok(void *arg, const struct cfs_cluster_addr *a, int port)
{
	struct conn_check *k = arg;
	pthread_mutex_lock(&k->t->lock);
	int ok = k->n->by_name || cfs_cluster_allowed_addr(&k->t->allow, a, port);
	pthread_mutex_unlock(&k->t->lock);
	return ok;
}

/* lock held.  c is in use by a call until conn_give or conn_close: a
 * cancel ends its I/O (at once when cancelled already). */
static void busy_add(struct cfs_tier *t, struct cfs_redis *c)
{
	if (t->nbusy < BUSY_MAX)
		t->busy[t->nbusy++] = c;
	if (t->cancelled)
		cfs_redis_abort(c);
}

static void busy_del(struct cfs_tier *t, struct cfs_redis *c)
{
	pthread_mutex_lock(&t->lock);
	for (unsigned k = 0; k < t->nbusy; k++)
		if (t->busy[k] == c) {
			t->busy[k] = t->busy[--t->nbusy];
			break;
		}
	pthread_mutex_unlock(&t->lock);
}

/* Closes a connection conn_take gave (NULL is safe). */
static void conn_close(struct cfs_tier *t, struct cfs_redis *c)
{
	if (!c)
		return;
	busy_del(t, c);
	cfs_redis_close(c);
}

/* A connection to node n, made by deadline: an idle one (*reused = 1) or
 * a new one. */
static int conn_take(struct cfs_tier *t, struct node *n, int64_t deadline, struct cfs_redis **c,
		     int *reused)
{
	pthread_mutex_lock(&t->lock);
	n->used_at = now_ms();
	if (n->nidle) {
		*c = n->idle[--n->nidle];
		*reused = 1;
		busy_add(t, *c);
		pthread_mutex_unlock(&t->lock);
		return 0;
	}
	char host[CFS_CLUSTER_HOST_MAX];
	snprintf(host, sizeof(host), "%s", n->host);
	int port = n->port;
	pthread_mutex_unlock(&t->lock);
	*reused = 0;
	struct conn_check k = { t, n };
	struct cfs_redis_opts o = t->ro;
	o.addr_ok = addr_ok;
	o.addr_arg = &k;
	int rc = cfs_redis_connect_by(host, port, &o, deadline, c);
	if (!rc) {
		BUMP(t, connects, 1);
		pthread_mutex_lock(&t->lock);
		busy_add(t, *c);
		pthread_mutex_unlock(&t->lock);
		if (n->seed) { /* a seed's address is the cluster's, whatever its name */
			struct cfs_cluster_addr a;
			cfs_redis_peer(*c, &a);
			pthread_mutex_lock(&t->lock);
			cfs_cluster_allow_add_addr(&t->allow, &a, 0);
			pthread_mutex_unlock(&t->lock);
		}
	} else if (rc == -EPERM) {
		refuse(t, "a name's address", host, port);
	} else {
		CFS_DEBUG("shared cache: %s:%d: %s", host, port, cfs_tier_strerror(rc));
	}
	return rc;
}

static void conn_give(struct cfs_tier *t, struct node *n, struct cfs_redis *c)
{
	if (!c)
		return;
	busy_del(t, c);
	if (!cfs_redis_broken(c)) {
		pthread_mutex_lock(&t->lock);
		n->down_until = 0;
		n->backoff_ms = 0;
		n->failing_since = 0;
		if (!n->gone && n->nidle < POOL_MAX) {
			n->idle[n->nidle++] = c;
			c = NULL;
		}
		pthread_mutex_unlock(&t->lock);
	}
	cfs_redis_close(c);
}

/* A node refused, failed or timed out: leave it alone for a while, drop
 * its idle connections (they are likely dead too), and read the map again. */
static void node_failed(struct cfs_tier *t, struct node *n)
{
	struct cfs_redis *idle[POOL_MAX];
	int nidle;
	pthread_mutex_lock(&t->lock);
	n->backoff_ms = n->backoff_ms ? n->backoff_ms * 2 : NODE_BACKOFF_MS;
	if (n->backoff_ms > NODE_BACKOFF_MAX_MS)
		n->backoff_ms = NODE_BACKOFF_MAX_MS;
	n->down_until = now_ms() + n->backoff_ms;
	if (!n->failing_since)
		n->failing_since = now_ms();
	nidle = n->nidle;
	memcpy(idle, n->idle, sizeof(idle));
	n->nidle = 0;
	t->want_refresh = 1;
	pthread_mutex_unlock(&t->lock);
	for (int k = 0; k < nidle; k++)
		cfs_redis_close(idle[k]);
}

static void free_replies(struct cfs_redis_reply **r, int n)
{
	for (int i = 0; i < n; i++) {
		cfs_redis_reply_free(r[i]);
		r[i] = NULL;
	}
}

static int verb_is(const struct cfs_tier_cmd *c, const char *v)
{
	size_t l = c->len ? c->len[0] : strlen(c->argv[0]);
	return l == strlen(v) && strncasecmp(c->argv[0], v, l) == 0;
}

/* The most a reply to c may be (redis.h's cost): c->reply_max, else by its
 * verb: a value (GET), one per key (MGET), a slot map, or a status. */
static size_t reply_cap(const struct cfs_tier *t, const struct cfs_tier_cmd *c)
{
	if (c->reply_max)
		return c->reply_max;
	if (verb_is(c, "GET"))
		return CFS_REDIS_COST(1, t->value_max + 1);
	if (verb_is(c, "MGET")) {
		size_t keys = c->argc > 1 ? (size_t)c->argc - 1 : 0;
		return CFS_REDIS_COST(1 + keys, keys * (t->value_max + 1 + sizeof(void *)));
	}
	if (verb_is(c, "CLUSTER"))
		return MAP_REPLY;
	return SMALL_REPLY;
}

/* A reply's deadline: io_ms from now, and not past the call's. */
static int64_t reply_by(const struct cfs_tier *t, int64_t deadline)
{
	int64_t own = now_ms() + t->ro.io_ms;
	return own < deadline ? own : deadline;
}

/* Sends cmds on c, each after ASKING when asking (ASKING covers the one
 * command after it), all after READONLY when readonly (c is a replica's),
 * and reads every reply into out (ASKING's and READONLY's dropped), each
 * within io_ms and all by deadline.  I/O errors leave nothing in out. */
static int roundtrip(struct cfs_tier *t, struct cfs_redis *c, int asking, int readonly, int n,
		     const struct cfs_tier_cmd *cmds, struct cfs_redis_reply **out, int64_t deadline)
{
	static const char *const ask[] = { "ASKING" }, *const ro[] = { "READONLY" };
	static const size_t asklen[] = { 6 }, rolen[] = { 8 };
	int rc = 0;
	for (int i = 0; i < n; i++)
		out[i] = NULL;
	if (readonly) { /* a replica serves reads of its master's slots after it */
		struct cfs_redis_reply *a = NULL;
		rc = cfs_redis_append_max(c, 1, ro, rolen, SMALL_REPLY);
		if (!rc)
			rc = cfs_redis_reply_by(c, reply_by(t, deadline), &a);
		cfs_redis_reply_free(a);
	}
	for (int i = 0; !rc && i < n; i++) {
		if (asking)
			rc = cfs_redis_append_max(c, 1, ask, asklen, SMALL_REPLY);
		if (!rc)
			rc = cfs_redis_append_max(c, cmds[i].argc, cmds[i].argv, cmds[i].len,
						  reply_cap(t, &cmds[i]));
	}
	for (int i = 0; !rc && i < n; i++) {
		if (asking) {
			struct cfs_redis_reply *a = NULL;
			rc = cfs_redis_reply_by(c, reply_by(t, deadline), &a);
			cfs_redis_reply_free(a);
		}
		struct cfs_redis_reply *r = NULL;
		if (!rc && !(rc = cfs_redis_reply_by(c, reply_by(t, deadline), &r)))
			out[i] = r;
	}
	if (rc)
		free_replies(out, n);
	else
		BUMP(t, commands, (uint64_t)n);
	return rc;
}

/* ---- the slot map ---- */

/* Reads CLUSTER SLOTS from node n into m, by deadline.  0 or an error. */
static int read_map_from(struct cfs_tier *t, struct node *n, struct cfs_cluster_map *m,
			 int64_t deadline)
{
	static const char *const argv[] = { "CLUSTER", "SLOTS" };
	static const size_t len[] = { 7, 5 };
	struct cfs_tier_cmd cmd = { 2, argv, len, MAP_REPLY };
	struct cfs_redis *c = NULL;
	struct cfs_redis_reply *r = NULL;
	int reused = 0;
	int rc = conn_take(t, n, deadline, &c, &reused);
	if (!rc) {
		rc = roundtrip(t, c, 0, 0, 1, &cmd, &r, deadline);
		if (rc == CFS_E_NET && reused) { /* an idle connection the node had closed */
			conn_close(t, c);
			c = NULL;
			rc = conn_take(t, n, deadline, &c, &reused);
			if (!rc)
				rc = roundtrip(t, c, 0, 0, 1, &cmd, &r, deadline);
		}
	}
	if (!rc) {
		char host[CFS_CLUSTER_HOST_MAX];
		pthread_mutex_lock(&t->lock);
		snprintf(host, sizeof(host), "%s", n->host);
		pthread_mutex_unlock(&t->lock);
		rc = cfs_cluster_map_from_slots(m, cfs_redis_tree(r), host);
		if (!rc && !m->covered)
			rc = CFS_E_SERVER; /* a node that serves no slot yet */
	}
	cfs_redis_reply_free(r);
	if (rc && c)
		conn_close(t, c);
	else
		conn_give(t, n, c);
	return rc;
}

/* lock held.  Installs map m, read from node from: its nodes into the
 * table (a seed's map makes its nodes the cluster's; another's may only
 * name nodes already allowed: the slots of the others go unserved), the
 * routes, and the nodes that may now leave dropped. */
static void install(struct cfs_tier *t, const struct cfs_cluster_map *m, struct node *from)
{
	unsigned idx[CFS_CLUSTER_MAX_NODES];
	for (unsigned i = 0; i < t->nslots; i++) /* route[] is rewritten before the lock goes */
		if (t->node[i])
			t->node[i]->in_map = 0;
	for (unsigned i = 0; i < m->nnodes; i++) {
		const struct cfs_cluster_node *x = &m->node[i];
		int by_name = 0;
		if (from->seed)
			cfs_cluster_allow_add(&t->allow, x->host, x->port); /* full: refused below */
		idx[i] = NO_NODE;
		if (!node_allowed(t, x->host, x->port, &by_name)) {
			refuse(t, "the slot map", x->host, x->port);
			continue;
		}
		/* in_map at once: a full table must not give its slot away
		 * while this map is installed */
		idx[i] = node_index(t, x->host, x->port, by_name);
		if (idx[i] != NO_NODE)
			t->node[idx[i]]->in_map = 1;
	}
	unsigned masters = 0;
	uint8_t seen[NODES_MAX] = { 0 };
	for (unsigned s = 0; s < CFS_CLUSTER_SLOTS; s++) {
		unsigned mi = m->master[s], ri = m->replica[s][0];
		t->route[s] = mi == CFS_CLUSTER_NO_NODE ? NO_NODE : (uint16_t)idx[mi];
		t->rroute[s] = ri == CFS_CLUSTER_NO_NODE || t->route[s] == NO_NODE
				       ? NO_NODE
				       : (uint16_t)idx[ri];
		if (t->route[s] != NO_NODE && !seen[t->route[s]]) {
			seen[t->route[s]] = 1;
			masters++;
		}
	}
	if (!t->have_map || t->down)
		CFS_INFO("shared cache: %u masters serve %u of %u slots (map from %s:%d)", masters,
			 m->covered, CFS_CLUSTER_SLOTS, from->host, from->port);
	t->masters = masters;
	forget(t, now_ms());
}

/* Reads the map from the first node that answers by deadline (seeds
 * first, then the other nodes; those resting last) and installs it.  One
 * thread at a time; the others go on with the old map. */
static int refresh(struct cfs_tier *t, int64_t deadline)
{
	pthread_mutex_lock(&t->lock);
	if (t->refreshing) {
		int have = t->have_map;
		pthread_mutex_unlock(&t->lock);
		return have ? 0 : -EAGAIN;
	}
	t->refreshing = 1;
	t->want_refresh = 0;
	t->refresh_after = now_ms() + REFRESH_GAP_MS;
	struct node *order[NODES_MAX];
	unsigned k = 0;
	int64_t now = now_ms();
	for (int pass = 0; pass < 4; pass++) /* seeds, others; not resting, then resting */
		for (unsigned i = 0; i < t->nslots; i++) {
			struct node *n = t->node[i];
			if (n && n->seed == !(pass & 1) && (n->down_until > now) == (pass >= 2))
				order[k++] = node_ref(t, i);
		}
	pthread_mutex_unlock(&t->lock);

	struct cfs_cluster_map *m = malloc(sizeof(*m));
	int rc = m ? CFS_E_NET : -ENOMEM;
	struct node *from = NULL;
	for (unsigned j = 0; m && j < k && rc; j++) {
		if (__atomic_load_n(&t->cancelled, __ATOMIC_RELAXED)) {
			rc = -ECANCELED;
			break;
		}
		if (now_ms() >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		rc = read_map_from(t, order[j], m, deadline);
		if (rc && rc != -ENOMEM)
			node_failed(t, order[j]);
		else if (!rc)
			from = order[j];
	}
	BUMP(t, refreshes, 1);
	pthread_mutex_lock(&t->lock);
	t->refreshing = 0;
	if (!rc) {
		install(t, m, from);
		t->refreshed_at = now_ms();
		t->have_map = 1;
		t->down = 0;
		t->down_backoff_ms = 0;
		t->down_until = 0;
	} else if (rc != -ENOMEM && rc != -ECANCELED) {
		if (!t->down)
			CFS_WARN("shared cache: no node answers (%s); reading from Drive until it "
				 "is back", cfs_tier_strerror(rc));
		t->down = 1;
		t->down_backoff_ms = t->down_backoff_ms ? t->down_backoff_ms * 2 : DOWN_BACKOFF_MS;
		if (t->down_backoff_ms > DOWN_BACKOFF_MAX_MS)
			t->down_backoff_ms = DOWN_BACKOFF_MAX_MS;
		t->down_until = now_ms() + t->down_backoff_ms;
	}
	pthread_mutex_unlock(&t->lock);
	for (unsigned j = 0; j < k; j++)
		node_put(t, order[j]);
	free(m);
	return rc;
}

int cfs_tier_new(const struct cfs_tier_opts *o, struct cfs_tier **out)
{
	*out = NULL;
	struct cfs_cluster_cidr cidr[CFS_CLUSTER_CIDRS_MAX];
	int ncidr = 0;
	char why[160];
	if (o->nodes && *o->nodes &&
	    (ncidr = cfs_cluster_cidrs_parse(o->nodes, cidr, CFS_CLUSTER_CIDRS_MAX, why,
					     sizeof(why))) < 0)
		return CFS_E_CONFIG;
	struct cfs_tier *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	t->seeds = *o->seeds;
	if ((o->password && !(t->password = strdup(o->password))) ||
	    (o->ca_file && !(t->ca_file = strdup(o->ca_file)))) {
		cfs_tier_free(t);
		return -ENOMEM;
	}
	cfs_cluster_allow_init(&t->allow, cidr, (unsigned)ncidr);
	t->ro.tls = t->seeds.tls;
	t->ro.ca_file = t->ca_file;
	t->ro.user = t->seeds.user[0] ? t->seeds.user : NULL;
	t->ro.password = t->password;
	t->ro.connect_ms = o->connect_ms > 0 ? o->connect_ms : 500;
	t->ro.io_ms = o->io_ms > 0 ? o->io_ms : 1000;
	t->call_ms = 2 * (t->ro.connect_ms + t->ro.io_ms);
	t->forget_ms = o->forget_ms > 0 ? o->forget_ms : FORGET_MS;
	t->value_max = o->value_max ? o->value_max : VALUE_MAX_DEFAULT;
	for (unsigned s = 0; s < CFS_CLUSTER_SLOTS; s++)
		t->route[s] = t->rroute[s] = NO_NODE;
	for (unsigned s = 0; s < t->seeds.n; s++) { /* the first nodes a map is read from */
		const char *h = t->seeds.seed[s].host;
		struct cfs_cluster_addr x;
		unsigned i = cfs_cluster_allow_add(&t->allow, h, 0) == 0
				     ? node_index(t, h, t->seeds.seed[s].port, !cfs_cluster_addr_parse(h, &x))
				     : NO_NODE;
		if (i == NO_NODE) {
			cfs_tier_free(t);
			return -ENOMEM;
		}
		t->node[i]->seed = 1;
	}
	*out = t;
	return 0;
}

void cfs_tier_free(struct cfs_tier *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < t->nslots; i++)
		if (t->node[i])
			node_free(t->node[i]);
	if (t->password) {
		explicit_bzero(t->password, strlen(t->password));
		free(t->password);
	}
	free(t->ca_file);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int cfs_tier_probe(struct cfs_tier *t)
{
	return refresh(t, now_ms() + t->call_ms);
}

void cfs_tier_cancel(struct cfs_tier *t)
{
	pthread_mutex_lock(&t->lock);
	__atomic_store_n(&t->cancelled, 1, __ATOMIC_RELAXED);
	for (unsigned k = 0; k < t->nbusy; k++)
		cfs_redis_abort(t->busy[k]);
	pthread_mutex_unlock(&t->lock);
}

int cfs_tier_up(struct cfs_tier *t)
{
	pthread_mutex_lock(&t->lock);
	int up = t->have_map && !t->down;
	pthread_mutex_unlock(&t->lock);
	return up;
}

/* Where the first reply sends us: 0 (nowhere: a reply), 1 MOVED, 2 ASK
 * (*to: a reference to the node), -EPERM for a redirect outside the
 * cluster (refused), CFS_E_SERVER for an error reply that concerns the
 * whole call (the cluster is down, a slot is migrating, a node is
 * loading), CFS_E_AUTH. */
static int classify(struct cfs_tier *t, struct node *at, const struct cfs_cluster_reply *r,
		    struct node **to)
{
	*to = NULL;
	if (!r || r->type != CFS_RESP_ERROR)
		return 0;
	unsigned slot;
	struct cfs_cluster_node dst;
	int k = cfs_cluster_redirect(r->str, r->len, &slot, &dst);
	if (k == 1 || k == 2) {
		int by_name = 0;
		pthread_mutex_lock(&t->lock);
		if (!dst.host[0])
			snprintf(dst.host, sizeof(dst.host), "%s", at->host);
		if (k == 1)
			t->want_refresh = 1;
		int ok = node_allowed(t, dst.host, dst.port, &by_name);
		if (ok)
			*to = node_ref(t, node_index(t, dst.host, dst.port, by_name));
		pthread_mutex_unlock(&t->lock);
		if (!ok) {
			refuse(t, k == 1 ? "a MOVED redirect" : "an ASK redirect", dst.host, dst.port);
			return -EPERM;
		}
		return *to ? k : CFS_E_SERVER;
	}
	static const char *const whole[] = { "CLUSTERDOWN", "TRYAGAIN", "LOADING", "MASTERDOWN",
					     "READONLY", "NOAUTH", "WRONGPASS" };
	for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++) {
		size_t wl = strlen(whole[i]);
		if (r->len >= wl && memcmp(r->str, whole[i], wl) == 0) {
			pthread_mutex_lock(&t->lock);
			t->want_refresh = 1;
			pthread_mutex_unlock(&t->lock);
			return i >= 5 ? CFS_E_AUTH : CFS_E_SERVER;
		}
	}
	return 0; /* an error about this command (WRONGTYPE, say): the caller's */
}

static int run(struct cfs_tier *t, const char *key, size_t klen, int n,
	       const struct cfs_tier_cmd *cmds, struct cfs_redis_reply **out, int read)
{
	int64_t now = now_ms(), deadline = now + t->call_ms;
	if (__atomic_load_n(&t->cancelled, __ATOMIC_RELAXED))
		return -ECANCELED;
	pthread_mutex_lock(&t->lock);
	if (t->down && now < t->down_until) {
		pthread_mutex_unlock(&t->lock);
		return -EAGAIN;
	}
	if (t->have_map && now - t->refreshed_at >= REFRESH_EVERY_MS)
		t->want_refresh = 1;
	int need = !t->have_map || t->down || (t->want_refresh && now >= t->refresh_after);
	pthread_mutex_unlock(&t->lock);
	/* the map read may take half the call's time at most */
	if (need && refresh(t, now + t->call_ms / 2) && !cfs_tier_up(t)) {
		BUMP(t, errors, 1);
		return -EAGAIN;
	}
	unsigned slot = cfs_cluster_slot(key, klen);
	pthread_mutex_lock(&t->lock);
	struct node *at = node_ref(t, t->route[slot]);
	struct node *replica = read ? node_ref(t, t->rroute[slot]) : NULL;
	pthread_mutex_unlock(&t->lock);
	int asking = 0, readonly = 0, rc = -EAGAIN;
	for (int hop = 0; hop <= CFS_TIER_REDIRECTS; hop++) {
		if (!at) {
			rc = -EAGAIN;
			break;
		}
		if (now_ms() >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		pthread_mutex_lock(&t->lock);
		int resting = at->down_until > now_ms();
		pthread_mutex_unlock(&t->lock);
		struct cfs_redis *c = NULL;
		int reused = 0;
		rc = resting ? -EAGAIN : conn_take(t, at, deadline, &c, &reused);
		if (!rc) {
			rc = roundtrip(t, c, asking, readonly, n, cmds, out, deadline);
			if (rc == CFS_E_NET && reused) {
				/* an idle connection the node had closed: once more
				 * (not after a timeout: that is the node's time up) */
				conn_close(t, c);
				c = NULL;
				rc = conn_take(t, at, deadline, &c, &reused);
				if (!rc)
					rc = roundtrip(t, c, asking, readonly, n, cmds, out, deadline);
			}
		}
		if (rc) {
			conn_close(t, c);
			if (rc == -ECANCELED || __atomic_load_n(&t->cancelled, __ATOMIC_RELAXED)) {
				rc = -ECANCELED; /* stopping: not the node's fault */
				break;
			}
			if (!resting && rc != -EPERM)
				node_failed(t, at);
			if (replica && !readonly && !asking && rc != -EPERM) {
				/* its master is gone (until a failover): a read can
				 * still be served by its replica */
				node_put(t, at);
				at = replica;
				replica = NULL;
				readonly = 1;
				BUMP(t, replica_reads, 1);
				continue;
			}
			break;
		}
		struct node *to = NULL;
		int k = classify(t, at, cfs_redis_tree(out[0]), &to);
		conn_give(t, at, c);
		if (k == 0) {
			node_put(t, at);
			node_put(t, replica);
			return 0;
		}
		free_replies(out, n);
		if (k < 0) {
			rc = k;
			break;
		}
		BUMP(t, redirects, 1);
		asking = k == 2;
		readonly = 0;
		node_put(t, at);
		at = to;
		rc = CFS_E_SERVER; /* out of hops */
	}
	node_put(t, at);
	node_put(t, replica);
	BUMP(t, errors, 1);
	return rc;
}

int cfs_tier_exec(struct cfs_tier *t, const char *key, size_t klen, int n,
		  const struct cfs_tier_cmd *cmds, struct cfs_redis_reply **out)
{
	return run(t, key, klen, n, cmds, out, 0);
}

int cfs_tier_exec_read(struct cfs_tier *t, const char *key, size_t klen, int n,
		       const struct cfs_tier_cmd *cmds, struct cfs_redis_reply **out)
{
	return run(t, key, klen, n, cmds, out, 1);
}

void cfs_tier_stats(struct cfs_tier *t, struct cfs_tier_stats *out)
{
	pthread_mutex_lock(&t->lock);
	out->up = t->have_map && !t->down;
	out->nodes = t->masters;
	out->known_nodes = t->nlive;
	pthread_mutex_unlock(&t->lock);
	out->commands = __atomic_load_n(&t->st.commands, __ATOMIC_RELAXED);
	out->errors = __atomic_load_n(&t->st.errors, __ATOMIC_RELAXED);
	out->redirects = __atomic_load_n(&t->st.redirects, __ATOMIC_RELAXED);
	out->refreshes = __atomic_load_n(&t->st.refreshes, __ATOMIC_RELAXED);
	out->connects = __atomic_load_n(&t->st.connects, __ATOMIC_RELAXED);
	out->replica_reads = __atomic_load_n(&t->st.replica_reads, __ATOMIC_RELAXED);
	out->redirects_refused = __atomic_load_n(&t->st.redirects_refused, __ATOMIC_RELAXED);
}

int cfs_tier_check(struct cfs_tier *t, char *msg, size_t cap)
{
	int rc = refresh(t, now_ms() + t->call_ms);
	if (rc) {
		snprintf(msg, cap, "no node of %s:%d%s answers: %s", t->seeds.seed[0].host,
			 t->seeds.seed[0].port, t->seeds.n > 1 ? " (and the other seeds)" : "",
			 cfs_tier_strerror(rc));
		return rc;
	}
	struct node *masters[NODES_MAX];
	unsigned nm = 0, covered = 0;
	uint8_t seen[NODES_MAX] = { 0 };
	pthread_mutex_lock(&t->lock);
	for (unsigned s = 0; s < CFS_CLUSTER_SLOTS; s++) {
		unsigned i = t->route[s];
		if (i == NO_NODE)
			continue;
		covered++;
		if (!seen[i]) {
			seen[i] = 1;
			masters[nm++] = node_ref(t, i);
		}
	}
	pthread_mutex_unlock(&t->lock);
	static const char *const argv[] = { "PING" };
	static const size_t len[] = { 4 };
	struct cfs_tier_cmd cmd = { 1, argv, len, SMALL_REPLY };
	unsigned ok = 0;
	int first = 0;
	char bad_node[300] = "";
	for (unsigned j = 0; j < nm; j++) {
		struct cfs_redis *c = NULL;
		struct cfs_redis_reply *r = NULL;
		int reused = 0;
		int64_t deadline = now_ms() + t->ro.connect_ms + t->ro.io_ms;
		int e = conn_take(t, masters[j], deadline, &c, &reused);
		if (!e)
			e = roundtrip(t, c, 0, 0, 1, &cmd, &r, deadline);
		if (!e) {
			const struct cfs_cluster_reply *tr = cfs_redis_tree(r);
			if (!tr || tr->type != CFS_RESP_STATUS || tr->len != 4 ||
			    memcmp(tr->str, "PONG", 4) != 0)
				e = CFS_E_PROTO;
		}
		cfs_redis_reply_free(r);
		if (e) {
			conn_close(t, c);
			if (!first) {
				first = e;
				snprintf(bad_node, sizeof(bad_node), "%s:%d: %s", masters[j]->host,
					 masters[j]->port, cfs_tier_strerror(e));
			}
		} else {
			conn_give(t, masters[j], c);
			ok++;
		}
		node_put(t, masters[j]);
	}
	snprintf(msg, cap, "%u of %u masters answer PING, %u of %u slots served%s%s%s",
		 ok, nm, covered, CFS_CLUSTER_SLOTS, t->seeds.tls ? ", TLS" : "",
		 first ? "; " : "", bad_node);
	if (!first && covered < CFS_CLUSTER_SLOTS)
		first = CFS_E_SERVER;
	return first;
}
