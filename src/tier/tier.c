/* tier: the shared cache tier's cluster client (see tier.h for the rules). */
#include "tier.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cluster.h"
#include "err.h"
#include "log.h"
#include "redis.h"

#define POOL_MAX 16        /* idle connections kept per node */
#define NODES_MAX 256
#define REFRESH_GAP_MS 200 /* map reads at most this often */
#define REFRESH_EVERY_MS 60000 /* and at least this often: nodes added, slots moved */
#define NODE_BACKOFF_MS 250
#define NODE_BACKOFF_MAX_MS 5000
#define DOWN_BACKOFF_MS 250
#define DOWN_BACKOFF_MAX_MS 10000
#define NO_NODE 0xffff
#define BUSY_MAX 256       /* connections in use that cfs_tier_cancel can end */

struct node {
	char host[CFS_CLUSTER_HOST_MAX];
	int port;
	struct cfs_redis *idle[POOL_MAX];
	int nidle;
	int64_t down_until;
	int backoff_ms;
};

struct cfs_tier {
	pthread_mutex_t lock;
	struct cfs_tier_seeds seeds;
	char *password, *ca_file;
	struct cfs_redis_opts ro;
	struct node *node[NODES_MAX];
	unsigned nnodes;
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
	int call_ms;   /* a whole call's deadline (tier.h) */
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
	default: return cfs_strerror(rc);
	}
}

/* ---- nodes and connections ---- */

static int64_t now_ms(void)
{
	return cfs_clock_mono_ms();
}

/* lock held.  The node[] index of host:port, added when new; NO_NODE when
 * the table is full or out of memory. */
static unsigned node_index(struct cfs_tier *t, const char *host, int port)
{
	for (unsigned i = 0; i < t->nnodes; i++)
		if (t->node[i]->port == port && strcmp(t->node[i]->host, host) == 0)
			return i;
	if (t->nnodes == NODES_MAX)
		return NO_NODE;
	struct node *n = calloc(1, sizeof(*n));
	if (!n)
		return NO_NODE;
	snprintf(n->host, sizeof(n->host), "%s", host);
	n->port = port;
	t->node[t->nnodes] = n;
	return t->nnodes++;
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

/* A connection to node i: an idle one (*reused = 1) or a new one, its
 * replies due by deadline. */
static int conn_take(struct cfs_tier *t, unsigned i, int64_t deadline, struct cfs_redis **c,
		     int *reused)
{
	pthread_mutex_lock(&t->lock);
	struct node *n = t->node[i];
	if (n->nidle) {
		*c = n->idle[--n->nidle];
		*reused = 1;
		busy_add(t, *c);
		pthread_mutex_unlock(&t->lock);
		cfs_redis_set_deadline(*c, deadline);
		return 0;
	}
	char host[CFS_CLUSTER_HOST_MAX];
	snprintf(host, sizeof(host), "%s", n->host);
	int port = n->port;
	pthread_mutex_unlock(&t->lock);
	*reused = 0;
	int rc = cfs_redis_connect(host, port, &t->ro, c);
	if (!rc) {
		BUMP(t, connects, 1);
		pthread_mutex_lock(&t->lock);
		busy_add(t, *c);
		pthread_mutex_unlock(&t->lock);
		cfs_redis_set_deadline(*c, deadline);
	} else {
		CFS_DEBUG("shared cache: %s:%d: %s", host, port, cfs_tier_strerror(rc));
	}
	return rc;
}

/* Closes a connection conn_take gave (NULL is safe). */
static void conn_close(struct cfs_tier *t, struct cfs_redis *c)
{
	if (!c)
		return;
	busy_del(t, c);
	cfs_redis_close(c);
}

static void conn_give(struct cfs_tier *t, unsigned i, struct cfs_redis *c)
{
	if (!c)
		return;
	busy_del(t, c);
	cfs_redis_set_deadline(c, 0);
	if (!cfs_redis_broken(c)) {
		pthread_mutex_lock(&t->lock);
		struct node *n = t->node[i];
		n->down_until = 0;
		n->backoff_ms = 0;
		if (n->nidle < POOL_MAX) {
			n->idle[n->nidle++] = c;
			c = NULL;
		}
		pthread_mutex_unlock(&t->lock);
	}
	cfs_redis_close(c);
}

/* A node refused, failed or timed out: leave it alone for a while, drop
 * its idle connections (they are likely dead too), and read the map again. */
static void node_failed(struct cfs_tier *t, unsigned i)
{
	struct cfs_redis *idle[POOL_MAX];
	int nidle;
	pthread_mutex_lock(&t->lock);
	struct node *n = t->node[i];
	n->backoff_ms = n->backoff_ms ? n->backoff_ms * 2 : NODE_BACKOFF_MS;
	if (n->backoff_ms > NODE_BACKOFF_MAX_MS)
		n->backoff_ms = NODE_BACKOFF_MAX_MS;
	n->down_until = now_ms() + n->backoff_ms;
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

/* Sends cmds on c, each after ASKING when asking (ASKING covers the one
 * command after it), all after READONLY when readonly (c is a replica's),
 * and reads every reply into out (ASKING's and READONLY's dropped).
 * I/O errors leave nothing in out. */
static int roundtrip(struct cfs_tier *t, struct cfs_redis *c, int asking, int readonly, int n,
		     const struct cfs_tier_cmd *cmds, struct cfs_redis_reply **out)
{
	static const char *const ask[] = { "ASKING" }, *const ro[] = { "READONLY" };
	static const size_t asklen[] = { 6 }, rolen[] = { 8 };
	int rc = 0;
	for (int i = 0; i < n; i++)
		out[i] = NULL;
	if (readonly) { /* a replica serves reads of its master's slots after it */
		struct cfs_redis_reply *a = NULL;
		rc = cfs_redis_append(c, 1, ro, rolen);
		if (!rc)
			rc = cfs_redis_reply(c, &a);
		cfs_redis_reply_free(a);
	}
	for (int i = 0; !rc && i < n; i++) {
		if (asking)
			rc = cfs_redis_append(c, 1, ask, asklen);
		if (!rc)
			rc = cfs_redis_append(c, cmds[i].argc, cmds[i].argv, cmds[i].len);
	}
	for (int i = 0; !rc && i < n; i++) {
		if (asking) {
			struct cfs_redis_reply *a = NULL;
			rc = cfs_redis_reply(c, &a);
			cfs_redis_reply_free(a);
		}
		struct cfs_redis_reply *r = NULL;
		if (!rc && !(rc = cfs_redis_reply(c, &r)))
			out[i] = r;
	}
	if (rc)
		free_replies(out, n);
	else
		BUMP(t, commands, (uint64_t)n);
	return rc;
}

/* ---- the slot map ---- */

/* An idle connection the node closed fails with CFS_E_NET: worth one more
 * try on a new one.  One that timed out is a node that does not answer. */
static int retry_fresh(int rc, int reused)
{
	return rc == CFS_E_NET && reused;
}

/* Reads CLUSTER SLOTS from node i into m, by deadline.  0 or an error. */
static int read_map_from(struct cfs_tier *t, unsigned i, int64_t deadline,
			 struct cfs_cluster_map *m)
{
	static const char *const argv[] = { "CLUSTER", "SLOTS" };
	static const size_t len[] = { 7, 5 };
	struct cfs_tier_cmd cmd = { 2, argv, len };
	struct cfs_redis *c = NULL;
	struct cfs_redis_reply *r = NULL;
	int reused = 0;
	int rc = conn_take(t, i, deadline, &c, &reused);
	if (!rc) {
		rc = roundtrip(t, c, 0, 0, 1, &cmd, &r);
		if (retry_fresh(rc, reused)) { /* an idle connection the node had closed */
			conn_close(t, c);
			c = NULL;
			rc = conn_take(t, i, deadline, &c, &reused);
			if (!rc)
				rc = roundtrip(t, c, 0, 0, 1, &cmd, &r);
		}
	}
	if (!rc) {
		char host[CFS_CLUSTER_HOST_MAX];
		pthread_mutex_lock(&t->lock);
		snprintf(host, sizeof(host), "%s", t->node[i]->host);
		pthread_mutex_unlock(&t->lock);
		rc = cfs_cluster_map_from_slots(m, cfs_redis_tree(r), host);
		if (!rc && !m->covered)
			rc = CFS_E_SERVER; /* a node that serves no slot yet */
	}
	cfs_redis_reply_free(r);
	if (rc && c)
		conn_close(t, c);
	else
		conn_give(t, i, c);
	return rc;
}

/* Reads the map from the first node that answers (known masters, then the
 * seeds) by deadline, and installs it.  One thread at a time; the others go
 * on with the old map. */
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
	unsigned order[NODES_MAX + CFS_TIER_SEEDS_MAX];
	unsigned k = 0;
	int64_t now = now_ms();
	for (unsigned i = 0; i < t->nnodes; i++) /* the ones not resting first */
		if (t->node[i]->down_until <= now)
			order[k++] = i;
	for (unsigned i = 0; i < t->nnodes; i++)
		if (t->node[i]->down_until > now)
			order[k++] = i;
	pthread_mutex_unlock(&t->lock);

	struct cfs_cluster_map *m = malloc(sizeof(*m));
	int rc = m ? CFS_E_NET : -ENOMEM;
	unsigned from = NO_NODE;
	for (unsigned j = 0; m && j < k && rc; j++) {
		if (__atomic_load_n(&t->cancelled, __ATOMIC_RELAXED)) {
			rc = -ECANCELED;
			break;
		}
		if (j && now_ms() >= deadline) {
			rc = -ETIMEDOUT; /* the nodes not tried yet: at the next probe */
			break;
		}
		rc = read_map_from(t, order[j], deadline, m);
		if (rc && rc != -ENOMEM)
			node_failed(t, order[j]);
		else if (!rc)
			from = order[j];
	}
	BUMP(t, refreshes, 1);
	pthread_mutex_lock(&t->lock);
	t->refreshing = 0;
	if (!rc) {
		unsigned idx[CFS_CLUSTER_MAX_NODES];
		for (unsigned i = 0; i < m->nnodes; i++)
			idx[i] = node_index(t, m->node[i].host, m->node[i].port);
		unsigned masters = 0;
		uint8_t seen[NODES_MAX] = { 0 };
		for (unsigned s = 0; s < CFS_CLUSTER_SLOTS; s++) {
			unsigned mi = m->master[s], ri = m->replica[s][0];
			t->route[s] = mi == CFS_CLUSTER_NO_NODE ? NO_NODE : (uint16_t)idx[mi];
			t->rroute[s] = ri == CFS_CLUSTER_NO_NODE || mi == CFS_CLUSTER_NO_NODE
					       ? NO_NODE
					       : (uint16_t)idx[ri];
			if (t->route[s] != NO_NODE && !seen[t->route[s]]) {
				seen[t->route[s]] = 1;
				masters++;
			}
		}
		if (!t->have_map || t->down)
			CFS_INFO("shared cache: %u masters serve %u of %u slots (map from %s:%d)",
				 masters, m->covered, CFS_CLUSTER_SLOTS, t->node[from]->host,
				 t->node[from]->port);
		t->masters = masters;
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
	free(m);
	return rc;
}

int cfs_tier_new(const struct cfs_tier_opts *o, struct cfs_tier **out)
{
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
	t->ro.tls = t->seeds.tls;
	t->ro.ca_file = t->ca_file;
	t->ro.user = t->seeds.user[0] ? t->seeds.user : NULL;
	t->ro.password = t->password;
	t->ro.connect_ms = o->connect_ms > 0 ? o->connect_ms : 500;
	t->ro.io_ms = o->io_ms > 0 ? o->io_ms : 1000;
	t->call_ms = 2 * t->ro.io_ms;
	for (unsigned s = 0; s < CFS_CLUSTER_SLOTS; s++)
		t->route[s] = t->rroute[s] = NO_NODE;
	for (unsigned s = 0; s < t->seeds.n; s++) /* the first nodes a map is read from */
		if (node_index(t, t->seeds.seed[s].host, t->seeds.seed[s].port) == NO_NODE) {
			cfs_tier_free(t);
			return -ENOMEM;
		}
	*out = t;
	return 0;
}

void cfs_tier_free(struct cfs_tier *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < t->nnodes; i++) {
		for (int k = 0; k < t->node[i]->nidle; k++)
			cfs_redis_close(t->node[i]->idle[k]);
		free(t->node[i]);
	}
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
 * (*to set), CFS_E_SERVER for an error reply that concerns the whole
 * call (the cluster is down, a slot is migrating, a node is loading). */
static int classify(struct cfs_tier *t, unsigned at, const struct cfs_cluster_reply *r,
		    unsigned *to)
{
	if (!r || r->type != CFS_RESP_ERROR)
		return 0;
	unsigned slot;
	struct cfs_cluster_node dst;
	int k = cfs_cluster_redirect(r->str, r->len, &slot, &dst);
	if (k == 1 || k == 2) {
		pthread_mutex_lock(&t->lock);
		if (!dst.host[0])
			snprintf(dst.host, sizeof(dst.host), "%s", t->node[at]->host);
		*to = node_index(t, dst.host, dst.port);
		if (k == 1)
			t->want_refresh = 1;
		pthread_mutex_unlock(&t->lock);
		return *to == NO_NODE ? CFS_E_SERVER : k;
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
	if (need && refresh(t, deadline) && !cfs_tier_up(t)) {
		BUMP(t, errors, 1);
		return -EAGAIN;
	}
	unsigned slot = cfs_cluster_slot(key, klen);
	pthread_mutex_lock(&t->lock);
	unsigned at = t->route[slot], replica = read ? t->rroute[slot] : NO_NODE;
	pthread_mutex_unlock(&t->lock);
	int asking = 0, readonly = 0, rc = -EAGAIN;
	for (int hop = 0; hop <= CFS_TIER_REDIRECTS; hop++) {
		if (at == NO_NODE) {
			rc = -EAGAIN;
			break;
		}
		if (hop && now_ms() >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		pthread_mutex_lock(&t->lock);
		int resting = t->node[at]->down_until > now_ms();
		pthread_mutex_unlock(&t->lock);
		struct cfs_redis *c = NULL;
		int reused = 0;
		rc = resting ? -EAGAIN : conn_take(t, at, deadline, &c, &reused);
		if (!rc) {
			rc = roundtrip(t, c, asking, readonly, n, cmds, out);
			if (retry_fresh(rc, reused)) {
				/* an idle connection the node had closed: once more */
				conn_close(t, c);
				c = NULL;
				rc = conn_take(t, at, deadline, &c, &reused);
				if (!rc)
					rc = roundtrip(t, c, asking, readonly, n, cmds, out);
			}
		}
		if (rc) {
			conn_close(t, c);
			if (rc == -ECANCELED || __atomic_load_n(&t->cancelled, __ATOMIC_RELAXED)) {
				rc = -ECANCELED;
				break;
			}
			if (!resting)
				node_failed(t, at);
			if (replica != NO_NODE && !readonly && !asking) {
				/* its master is gone (until a failover): a read can
				 * still be served by its replica */
				at = replica;
				readonly = 1;
				BUMP(t, replica_reads, 1);
				continue;
			}
			break;
		}
		unsigned to = NO_NODE;
		int k = classify(t, at, cfs_redis_tree(out[0]), &to);
		conn_give(t, at, c);
		if (k == 0)
			return 0;
		free_replies(out, n);
		if (k < 0) {
			rc = k;
			break;
		}
		BUMP(t, redirects, 1);
		asking = k == 2;
		readonly = 0;
		at = to;
		rc = CFS_E_SERVER; /* out of hops */
	}
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
	pthread_mutex_unlock(&t->lock);
	out->commands = __atomic_load_n(&t->st.commands, __ATOMIC_RELAXED);
	out->errors = __atomic_load_n(&t->st.errors, __ATOMIC_RELAXED);
	out->redirects = __atomic_load_n(&t->st.redirects, __ATOMIC_RELAXED);
	out->refreshes = __atomic_load_n(&t->st.refreshes, __ATOMIC_RELAXED);
	out->connects = __atomic_load_n(&t->st.connects, __ATOMIC_RELAXED);
	out->replica_reads = __atomic_load_n(&t->st.replica_reads, __ATOMIC_RELAXED);
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
	unsigned masters[NODES_MAX], nm = 0, covered = 0;
	uint8_t seen[NODES_MAX] = { 0 };
	pthread_mutex_lock(&t->lock);
	for (unsigned s = 0; s < CFS_CLUSTER_SLOTS; s++) {
		unsigned i = t->route[s];
		if (i == NO_NODE)
			continue;
		covered++;
		if (!seen[i]) {
			seen[i] = 1;
			masters[nm++] = i;
		}
	}
	pthread_mutex_unlock(&t->lock);
	static const char *const argv[] = { "PING" };
	static const size_t len[] = { 4 };
	struct cfs_tier_cmd cmd = { 1, argv, len };
	unsigned ok = 0;
	int first = 0;
	char bad_node[300] = "";
	for (unsigned j = 0; j < nm; j++) {
		struct cfs_redis *c = NULL;
		struct cfs_redis_reply *r = NULL;
		int reused = 0;
		int e = conn_take(t, masters[j], now_ms() + t->ro.io_ms, &c, &reused);
		if (!e)
			e = roundtrip(t, c, 0, 0, 1, &cmd, &r);
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
				pthread_mutex_lock(&t->lock);
				snprintf(bad_node, sizeof(bad_node), "%s:%d: %s",
					 t->node[masters[j]]->host, t->node[masters[j]]->port,
					 cfs_tier_strerror(e));
				pthread_mutex_unlock(&t->lock);
			}
		} else {
			conn_give(t, masters[j], c);
			ok++;
		}
	}
	snprintf(msg, cap, "%u of %u masters answer PING, %u of %u slots served%s%s%s",
		 ok, nm, covered, CFS_CLUSTER_SLOTS, t->seeds.tls ? ", TLS" : "",
		 first ? "; " : "", bad_node);
	if (!first && covered < CFS_CLUSTER_SLOTS)
		first = CFS_E_SERVER;
	return first;
}
