/* tiered: block downloads through the shared cache tier (see tiered.h). */
#include "tiered.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "crc32c.h"
#include "crypto.h"
#include "err.h"
#include "hash.h"
#include "le.h"
#include "log.h"
#include "redis.h"
#include "tier.h"

#define GROUP_SHIFT 6 /* blocks per hash slot: 64 */
#define GROUP_MAX (1u << GROUP_SHIFT)
#define CHUNK_BYTES (8u << 20) /* values asked for in one MGET, at most */
#define KEY_MAX 600
#define POLL_FIRST_MS 5
#define POLL_MAX_MS 50
#define RING_MAX 256   /* revisions remembered: logged, forgotten */
#define LOG_PER_MIN 10 /* bad-value lines a minute, at most */
#define KEY_ID_LEN 8

struct cfs_tiered_key {
	struct cfs_mac *mac;
	unsigned char id[KEY_ID_LEN];
};

/* The last RING_MAX revisions (hashes of "ID@REV") put in; thread-safe. */
struct ring {
	pthread_mutex_t lock;
	uint64_t h[RING_MAX];
	unsigned next, n;
};

struct cfs_tiered {
	struct cfs_tier *tier;
	cfs_reader_fetch_fn fetch;
	void *io;
	uint32_t bs;
	int lease_ms, wait_ms;
	long ttl_s;
	char owner[33]; /* this process's lease value */
	char bsname[16]; /* the block size in keys: "1M", "64K" */
	struct cfs_tiered_key *key; /* NULL: unkeyed (format 1) */
	int cancelled;
	struct cfs_tiered_stats st;
	struct ring logged;    /* revisions whose bad values were logged */
	struct ring forgotten; /* revisions read from Drive only (cfs_tiered_forget) */
	int64_t log_window_ms; /* the minute the lines below were logged in */
	unsigned log_lines;
	uint64_t unlogged;     /* bad values not logged (the limit) since the last line */
};

#define BUMP(t, f, n) __atomic_add_fetch(&(t)->st.f, (uint64_t)(n), __ATOMIC_RELAXED)

/* Deletes KEYS[1] when it still holds ARGV[1] (a lease not taken over). */
static const char RELEASE[] =
	"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
	"else return 0 end";

/* ---- the value format ---- */

int cfs_tiered_key_new(const void *key, size_t n, struct cfs_tiered_key **out)
{
	static const char ID_MSG[] = "colabfs shared cache key id";
	unsigned char id[CFS_MAC_LEN];
	struct iovec v = { (void *)ID_MSG, sizeof(ID_MSG) - 1 };
	*out = NULL;
	if (n < CFS_TIERED_KEY_MIN)
		return -EINVAL;
	struct cfs_tiered_key *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	int rc = cfs_mac_new(key, n, &k->mac);
	if (!rc)
		rc = cfs_mac_sign(k->mac, &v, 1, id);
	if (rc) {
		cfs_tiered_key_free(k);
		return rc;
	}
	memcpy(k->id, id, KEY_ID_LEN);
	*out = k;
	return 0;
}

void cfs_tiered_key_free(struct cfs_tiered_key *k)
{
	if (!k)
		return;
	cfs_mac_free(k->mac);
	explicit_bzero(k, sizeof(*k));
	free(k);
}

void cfs_tiered_key_id(const struct cfs_tiered_key *k, char *hex, size_t cap)
{
	for (size_t i = 0; i < KEY_ID_LEN && 2 * i + 2 < cap; i++)
		snprintf(hex + 2 * i, 3, "%02x", k->id[i]);
}

size_t cfs_tiered_header(const struct cfs_tiered_key *key)
{
	return key ? CFS_TIERED_HEADER_MAC : CFS_TIERED_HEADER;
}

/* The MAC of a format 2 value: its first 12 bytes (magic, length, block
 * size), b's identity, the data. */
static int value_mac(const struct cfs_tiered_key *key, const struct cfs_tiered_block *b,
		     const unsigned char *head, const void *data, uint32_t len,
		     unsigned char mac[CFS_MAC_LEN])
{
	unsigned char num[8], idl[4], revl[4];
	size_t il = strlen(b->id), rl = strlen(b->rev);
	cfs_le_put(num, b->index, 8);
	cfs_le_put(idl, il, 4);
	cfs_le_put(revl, rl, 4);
	struct iovec v[] = { { (void *)head, 12 }, { num, 8 }, { idl, 4 }, { (void *)b->id, il },
			     { revl, 4 }, { (void *)b->rev, rl }, { (void *)data, len } };
	return cfs_mac_sign(key->mac, v, (int)(sizeof(v) / sizeof(v[0])), mac);
}

void cfs_tiered_encode(unsigned char *out, const void *data, uint32_t len, uint32_t block_size)
{
	memcpy(out, "CFB1", 4);
	cfs_le_put(out + 4, len, 4);
	cfs_le_put(out + 8, cfs_crc32c(0, data, len), 4);
	cfs_le_put(out + 12, block_size, 4);
	memcpy(out + CFS_TIERED_HEADER, data, len);
}

int cfs_tiered_check(const void *v, size_t n, uint32_t want_len, uint32_t block_size)
{
	const unsigned char *p = v;
	if (n < CFS_TIERED_HEADER || memcmp(p, "CFB1", 4) != 0 ||
	    cfs_le_get(p + 4, 4) != want_len || n != CFS_TIERED_HEADER + (size_t)want_len ||
	    cfs_le_get(p + 12, 4) != block_size ||
	    cfs_le_get(p + 8, 4) != cfs_crc32c(0, p + CFS_TIERED_HEADER, want_len))
		return CFS_E_PROTO;
	return 0;
}

int cfs_tiered_value_encode(const struct cfs_tiered_key *key, const struct cfs_tiered_block *b,
			    unsigned char *out, const void *data, uint32_t len)
{
	if (!key) {
		cfs_tiered_encode(out, data, len, b->block_size);
		return 0;
	}
	memcpy(out, "CFB2", 4);
	cfs_le_put(out + 4, len, 4);
	cfs_le_put(out + 8, b->block_size, 4);
	memcpy(out + 12, key->id, KEY_ID_LEN);
	memcpy(out + CFS_TIERED_HEADER_MAC, data, len);
	return value_mac(key, b, out, data, len, out + 12 + KEY_ID_LEN);
}

enum cfs_tiered_verdict cfs_tiered_value_check(const struct cfs_tiered_key *key,
					       const struct cfs_tiered_block *b, const void *v,
					       size_t n, uint32_t want_len)
{
	const unsigned char *p = v;
	if (!key)
		return cfs_tiered_check(v, n, want_len, b->block_size) ? CFS_TIERED_CORRUPT
								       : CFS_TIERED_OK;
	if (n >= 4 && memcmp(p, "CFB1", 4) == 0)
		return CFS_TIERED_UNKEYED;
	if (n < CFS_TIERED_HEADER_MAC || memcmp(p, "CFB2", 4) != 0 ||
	    cfs_le_get(p + 4, 4) != want_len || n != CFS_TIERED_HEADER_MAC + (size_t)want_len ||
	    cfs_le_get(p + 8, 4) != b->block_size)
		return CFS_TIERED_CORRUPT;
	if (memcmp(p + 12, key->id, KEY_ID_LEN) != 0)
		return CFS_TIERED_OTHER_KEY;
	unsigned char mac[CFS_MAC_LEN];
	if (value_mac(key, b, p, p + CFS_TIERED_HEADER_MAC, want_len, mac))
		return CFS_TIERED_CORRUPT; /* cannot tell (no memory): not served either */
	return cfs_crypto_equal(mac, p + 12 + KEY_ID_LEN, CFS_MAC_LEN) ? CFS_TIERED_OK
								     : CFS_TIERED_FORGED;
}

/* ---- revisions remembered ---- */

static int ring_has(struct ring *r, uint64_t h)
{
	int found = 0;
	pthread_mutex_lock(&r->lock);
	for (unsigned i = 0; i < r->n && !found; i++)
		found = r->h[i] == h;
	pthread_mutex_unlock(&r->lock);
	return found;
}

/* Puts h in r: 1, or 0 when it was there already. */
static int ring_add(struct ring *r, uint64_t h)
{
	int found = 0;
	pthread_mutex_lock(&r->lock);
	for (unsigned i = 0; i < r->n && !found; i++)
		found = r->h[i] == h;
	if (!found) {
		r->h[r->next] = h;
		r->next = (r->next + 1) % RING_MAX;
		if (r->n < RING_MAX) /* read unlocked by fetches: is anything here? */
			__atomic_store_n(&r->n, r->n + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&r->lock);
	return !found;
}

static uint64_t rev_hash(const char *id, const char *rev)
{
	char k[KEY_MAX];
	snprintf(k, sizeof(k), "%s@%s", id, rev);
	return cfs_hash_fnv1a(k);
}

int cfs_tiered_new(const struct cfs_tiered_opts *o, struct cfs_tiered **out)
{
	struct cfs_tiered *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->tier = o->tier;
	t->key = o->key;
	pthread_mutex_init(&t->logged.lock, NULL);
	pthread_mutex_init(&t->forgotten.lock, NULL);
	t->fetch = o->fetch;
	t->io = o->io;
	t->bs = o->block_size;
	t->lease_ms = o->lease_ms > 0 ? o->lease_ms : 10000;
	t->wait_ms = o->wait_ms > 0 ? o->wait_ms : t->lease_ms;
	t->ttl_s = o->ttl_s > 0 ? o->ttl_s : 7L * 86400;
	if (t->bs % (1u << 20) == 0)
		snprintf(t->bsname, sizeof(t->bsname), "%uM", t->bs >> 20);
	else
		snprintf(t->bsname, sizeof(t->bsname), "%uK", t->bs >> 10);
	unsigned char r[16];
	if (o->owner && *o->owner) {
		snprintf(t->owner, sizeof(t->owner), "%s", o->owner);
	} else if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		uint64_t x = (uint64_t)cfs_clock_mono_us() ^ ((uint64_t)getpid() << 32);
		memcpy(r, &x, 8);
		memcpy(r + 8, &t, sizeof(t) < 8 ? sizeof(t) : 8);
	}
	if (!o->owner || !*o->owner)
		for (int i = 0; i < 16; i++)
			snprintf(t->owner + 2 * i, 3, "%02x", r[i]);
	*out = t;
	return 0;
}

void cfs_tiered_free(struct cfs_tiered *t)
{
	if (!t)
		return;
	cfs_tier_free(t->tier);
	cfs_tiered_key_free(t->key);
	pthread_mutex_destroy(&t->logged.lock);
	pthread_mutex_destroy(&t->forgotten.lock);
	free(t);
}

void cfs_tiered_cancel(void *io)
{
	struct cfs_tiered *t = io;
	__atomic_store_n(&t->cancelled, 1, __ATOMIC_RELAXED);
	cfs_tier_cancel(t->tier);
}

struct cfs_tier *cfs_tiered_tier(struct cfs_tiered *t)
{
	return t->tier;
}

/* ---- one request ---- */

struct req {
	struct cfs_tiered *t;
	const char *id, *rev;
	int64_t size;
	cfs_drive_sink_fn sink;
	void *arg;
	size_t got;     /* bytes handed to sink */
	int ended;      /* the sink said it has all it wants */
	int prio;
	int tier_ok;    /* 0 once the tier failed: the rest goes to Drive */
	int drive_only; /* a forgotten revision: read from Drive, published over the tier */
	char tag[KEY_MAX - 64]; /* "cfsV:BS:{ID@REV:G}" of the current group */
	size_t tlen;
};

static size_t block_len(const struct req *q, uint64_t b)
{
	int64_t left = q->size - (int64_t)b * q->t->bs;
	return left < (int64_t)q->t->bs ? (size_t)left : q->t->bs;
}

static void set_group(struct req *q, uint64_t b)
{
	int n = snprintf(q->tag, sizeof(q->tag), "cfs%d:%s:{%s@%s:%llu}", q->t->key ? 2 : 1,
			 q->t->bsname, q->id, q->rev, (unsigned long long)(b >> GROUP_SHIFT));
	q->tlen = n > 0 && (size_t)n < sizeof(q->tag) ? (size_t)n : 0;
}

/* "TAG:N" or "TAG:N:lease" into k. */
static size_t key_of(const struct req *q, uint64_t b, int lease, char *k)
{
	int n = snprintf(k, KEY_MAX, "%.*s:%llu%s", (int)q->tlen, q->tag, (unsigned long long)b,
			 lease ? ":lease" : "");
	return n > 0 && n < KEY_MAX ? (size_t)n : 0;
}

/* A tier call failed: the rest of this request goes to Drive. */
static void tier_failed(struct req *q, int rc)
{
	if (q->tier_ok)
		CFS_DEBUG("shared cache: %s; reading %s from Drive", cfs_tier_strerror(rc), q->id);
	q->tier_ok = 0; /* counted by the tier */
}

static const struct cfs_cluster_reply *el(const struct cfs_redis_reply *r, size_t i)
{
	const struct cfs_cluster_reply *x = cfs_redis_tree(r);
	return x && x->type == CFS_RESP_ARRAY && i < x->n ? x->el[i] : NULL;
}

/* Hands [b's bytes] to the sink. */
static int deliver(struct req *q, uint64_t b, const char *p, size_t n)
{
	int r = q->sink(q->arg, (int64_t)b * q->t->bs, p, n);
	q->got += n;
	if (r > 0)
		q->ended = 1;
	return r < 0 ? -EIO : 0;
}

static enum cfs_tiered_verdict verdict(const struct req *q, uint64_t b, const char *v, size_t n)
{
	struct cfs_tiered_block k = { q->id, q->rev, b, q->t->bs };
	return cfs_tiered_value_check(q->t->key, &k, v, n, (uint32_t)block_len(q, b));
}

static const char *verdict_text(enum cfs_tiered_verdict vd)
{
	switch (vd) {
	case CFS_TIERED_FORGED:
		return "forged (its MAC does not match: written without the key, or altered)";
	case CFS_TIERED_OTHER_KEY:
		return "made under another key (is --shared-cache-key-file the same on every "
		       "mount?) or forged";
	case CFS_TIERED_UNKEYED:
		return "unkeyed (no MAC) where keyed values belong: forged";
	default:
		return "corrupt (not a value of this format, or a wrong length)";
	}
}

/* A bad value of block b (n bytes): counted, and logged once per file, at
 * most LOG_PER_MIN lines a minute. */
static void bad_value(struct req *q, uint64_t b, enum cfs_tiered_verdict vd, size_t n)
{
	struct cfs_tiered *t = q->t;
	if (vd == CFS_TIERED_CORRUPT)
		BUMP(t, corrupt, 1);
	else
		BUMP(t, forged, 1);
	if (!ring_add(&t->logged, rev_hash(q->id, q->rev)))
		return; /* this file's was logged */
	int64_t now = cfs_clock_mono_ms();
	uint64_t more = 0;
	pthread_mutex_lock(&t->logged.lock);
	if (now - t->log_window_ms >= 60000) {
		t->log_window_ms = now;
		t->log_lines = 0;
	}
	int say = t->log_lines < LOG_PER_MIN;
	if (say) {
		t->log_lines++;
		more = t->unlogged;
		t->unlogged = 0;
	} else {
		t->unlogged++;
	}
	pthread_mutex_unlock(&t->logged.lock);
	if (!say)
		return;
	CFS_WARN("shared cache: block %llu of %s@%s in the tier is %s (%zu bytes); not served: "
		 "fetched from Drive and written over it (this file's further bad values are only "
		 "counted: tier_%s_total)%s%llu", (unsigned long long)b, q->id, q->rev,
		 verdict_text(vd), n, vd == CFS_TIERED_CORRUPT ? "corrupt" : "forged",
		 more ? "; files with bad values not logged (the limit) since the last line: " : "",
		 more ? (unsigned long long)more : 0ULL);
}

/* 1 when v is block b's valid value; a string that is not is counted
 * (count: 0 when the caller saw it already). */
static int valid(struct req *q, uint64_t b, const struct cfs_cluster_reply *v, int count)
{
	if (!v || v->type != CFS_RESP_STRING)
		return 0;
	enum cfs_tiered_verdict vd = verdict(q, b, v->str, v->len);
	if (vd == CFS_TIERED_OK)
		return 1;
	if (count)
		bad_value(q, b, vd, v->len);
	return 0;
}

/* Hands block b's valid value v to the sink. */
static int take_value(struct req *q, uint64_t b, const struct cfs_cluster_reply *v)
{
	size_t want = block_len(q, b);
	BUMP(q->t, hits, 1);
	BUMP(q->t, bytes_read, want);
	return deliver(q, b, v->str + cfs_tiered_header(q->t->key), want);
}

/* Runs cmds in the current group's slot (read: they only read, a replica
 * may answer).  0, or the tier failed. */
static int exec_as(struct req *q, int n, const struct cfs_tier_cmd *cmds,
		   struct cfs_redis_reply **out, int read)
{
	if (!q->tier_ok || !q->tlen)
		return -EAGAIN;
	int rc = read ? cfs_tier_exec_read(q->t->tier, q->tag, q->tlen, n, cmds, out)
		      : cfs_tier_exec(q->t->tier, q->tag, q->tlen, n, cmds, out);
	if (rc)
		tier_failed(q, rc);
	return rc;
}

static int exec(struct req *q, int n, const struct cfs_tier_cmd *cmds, struct cfs_redis_reply **out)
{
	return exec_as(q, n, cmds, out, 0);
}

/* MGET of blocks [b, b+n) into *out (an array reply). */
static int mget(struct req *q, uint64_t b, unsigned n, struct cfs_redis_reply **out)
{
	char keys[GROUP_MAX][KEY_MAX];
	const char *argv[GROUP_MAX + 1];
	size_t len[GROUP_MAX + 1];
	argv[0] = "MGET";
	len[0] = 4;
	for (unsigned i = 0; i < n; i++) {
		len[i + 1] = key_of(q, b + i, 0, keys[i]);
		argv[i + 1] = keys[i];
	}
	struct cfs_tier_cmd c = { (int)n + 1, argv, len };
	return exec_as(q, 1, &c, out, 1);
}

/* Tries the leases of blocks [b, b+n) but those with skip[i] set (skip may
 * be NULL): mine[i] = 1 where taken.  With late (n replies, may be NULL)
 * each block's value is read in the same pipeline, after its lease: a
 * block published since it was found missing is late[i] (a valid value;
 * its lease, if just taken, given back) rather than a second download. */
static void release(struct req *q, uint64_t b, unsigned n, const uint8_t *mine);

static int lease(struct req *q, uint64_t b, unsigned n, const uint8_t *skip, uint8_t *mine,
		 struct cfs_redis_reply **late)
{
	char keys[GROUP_MAX][KEY_MAX], vkeys[GROUP_MAX][KEY_MAX], px[24];
	const char *argv[3 * GROUP_MAX][6];
	size_t len[3 * GROUP_MAX][6];
	struct cfs_tier_cmd c[3 * GROUP_MAX];
	struct cfs_redis_reply *r[3 * GROUP_MAX] = { 0 };
	unsigned at[GROUP_MAX], k = 0, nc = 0;
	int per = late ? 3 : 2;
	snprintf(px, sizeof(px), "%d", q->t->lease_ms);
	memset(mine, 0, n);
	for (unsigned i = 0; i < n; i++) {
		if (skip && skip[i])
			continue;
		const char *a[6] = { "SET", keys[k], q->t->owner, "NX", "PX", px };
		size_t kl = key_of(q, b + i, 1, keys[k]);
		for (int j = 0; j < 6; j++) {
			argv[nc][j] = a[j];
			len[nc][j] = j == 1 ? kl : strlen(a[j]);
		}
		c[nc] = (struct cfs_tier_cmd){ 6, argv[nc], len[nc] };
		nc++;
		argv[nc][0] = "GET"; /* whose it is, when not taken now */
		len[nc][0] = 3;
		argv[nc][1] = keys[k];
		len[nc][1] = kl;
		c[nc] = (struct cfs_tier_cmd){ 2, argv[nc], len[nc] };
		nc++;
		if (late) {
			argv[nc][0] = "GET";
			len[nc][0] = 3;
			len[nc][1] = key_of(q, b + i, 0, vkeys[k]);
			argv[nc][1] = vkeys[k];
			c[nc] = (struct cfs_tier_cmd){ 2, argv[nc], len[nc] };
			nc++;
		}
		at[k++] = i;
	}
	if (!k)
		return 0;
	int rc = exec(q, (int)nc, c, r);
	for (unsigned j = 0; !rc && j < k; j++) {
		const struct cfs_cluster_reply *x = cfs_redis_tree(r[per * j]);
		unsigned i = at[j];
		/* OK: ours; nil: another's; an error (OOM: a full cluster that
		 * does not evict) leases nothing: download it here, no waiting */
		mine[i] = x && (x->type == CFS_RESP_STATUS || x->type == CFS_RESP_ERROR);
		const struct cfs_cluster_reply *o = cfs_redis_tree(r[per * j + 1]);
		if (!mine[i] && o && o->type == CFS_RESP_STRING && o->len == strlen(q->t->owner) &&
		    memcmp(o->str, q->t->owner, o->len) == 0)
			mine[i] = 1; /* held by this mount's dead server: ours now */
		const struct cfs_cluster_reply *v = late ? cfs_redis_tree(r[per * j + 2]) : NULL;
		if (valid(q, b + i, v, 0)) { /* a bad one was counted already */
			late[i] = r[per * j + 2];
			r[per * j + 2] = NULL;
			if (mine[i]) {
				release(q, b + i, 1, &mine[i]);
				mine[i] = 0;
			}
		}
	}
	for (unsigned j = 0; j < nc; j++)
		cfs_redis_reply_free(r[j]);
	return rc;
}

/* Deletes the leases of [b, b+n) that are still ours. */
static void release(struct req *q, uint64_t b, unsigned n, const uint8_t *mine)
{
	char keys[GROUP_MAX][KEY_MAX];
	const char *argv[GROUP_MAX][5];
	size_t len[GROUP_MAX][5];
	struct cfs_tier_cmd c[GROUP_MAX];
	struct cfs_redis_reply *r[GROUP_MAX] = { 0 };
	unsigned k = 0;
	for (unsigned i = 0; i < n; i++) {
		if (!mine[i])
			continue;
		const char *a[5] = { "EVAL", RELEASE, "1", keys[k], q->t->owner };
		size_t kl = key_of(q, b + i, 1, keys[k]);
		for (int j = 0; j < 5; j++) {
			argv[k][j] = a[j];
			len[k][j] = j == 3 ? kl : strlen(a[j]);
		}
		c[k] = (struct cfs_tier_cmd){ 5, argv[k], len[k] };
		k++;
	}
	if (k && !exec(q, (int)k, c, r))
		for (unsigned i = 0; i < k; i++)
			cfs_redis_reply_free(r[i]);
}

/* Publishes block b (data: its bytes) and drops its lease when ours. */
static void publish(struct req *q, uint64_t b, const char *data, size_t n, int leased)
{
	struct cfs_tiered *t = q->t;
	size_t hl = cfs_tiered_header(t->key);
	unsigned char *v = malloc(hl + n);
	struct cfs_tiered_block k = { q->id, q->rev, b, t->bs };
	if (!v || cfs_tiered_value_encode(t->key, &k, v, data, (uint32_t)n)) {
		free(v);
		return;
	}
	char key[KEY_MAX], lkey[KEY_MAX], ex[24];
	size_t kl = key_of(q, b, 0, key), ll = key_of(q, b, 1, lkey);
	snprintf(ex, sizeof(ex), "%ld", t->ttl_s);
	const char *a0[] = { "SET", key, (const char *)v, "EX", ex };
	size_t l0[] = { 3, kl, hl + n, 2, strlen(ex) };
	const char *a1[] = { "EVAL", RELEASE, "1", lkey, t->owner };
	size_t l1[] = { 4, strlen(RELEASE), 1, ll, strlen(t->owner) };
	struct cfs_tier_cmd c[2] = { { 5, a0, l0 }, { 5, a1, l1 } };
	struct cfs_redis_reply *r[2] = { 0 };
	if (!exec(q, leased ? 2 : 1, c, r)) {
		const struct cfs_cluster_reply *x = cfs_redis_tree(r[0]);
		if (x && x->type == CFS_RESP_STATUS) {
			BUMP(t, published, 1);
			BUMP(t, bytes_written, n);
		} else {
			/* OOM under noeviction, say: the tier is full, not broken */
			BUMP(t, errors, 1);
		}
		cfs_redis_reply_free(r[0]);
		cfs_redis_reply_free(r[1]);
	}
	free(v);
}

/* ---- downloads of runs of blocks, teed into the tier ---- */

struct tee {
	struct req *q;
	uint64_t first, next; /* blocks of the run; next: the one filling */
	uint64_t end;
	const uint8_t *mine;  /* leases, per block of the run */
	char *buf;
	size_t fill;
	int sink_rc;
};

static int tee_bytes(void *arg, int64_t at, const char *p, size_t n)
{
	struct tee *e = arg;
	struct req *q = e->q;
	uint32_t bs = q->t->bs;
	int r = q->sink(q->arg, at, p, n);
	if (r) {
		e->sink_rc = r;
		return r;
	}
	while (n && e->next < e->end) {
		int64_t want = (int64_t)e->next * bs + (int64_t)e->fill;
		if (at + (int64_t)n <= want)
			break; /* bytes a retry sends again */
		if (at > want)
			break; /* a gap: the sink refuses it too */
		size_t skip = (size_t)(want - at);
		p += skip;
		n -= skip;
		at += (int64_t)skip;
		size_t blen = block_len(q, e->next);
		if (cfs_buf_fill_block(e->buf, &e->fill, blen, &p, &n, &at)) {
			if (q->tier_ok)
				publish(q, e->next, e->buf, blen, e->mine[e->next - e->first]);
			e->next++;
			e->fill = 0;
		}
	}
	return 0;
}

/* Downloads blocks [b, b+n) from Drive, handing them to the sink and
 * publishing each complete one (mine: the leases held, to drop). */
static int download(struct req *q, uint64_t b, unsigned n, const uint8_t *mine)
{
	struct cfs_tiered *t = q->t;
	struct tee e = { .q = q, .first = b, .next = b, .end = b + n, .mine = mine };
	e.buf = malloc(t->bs);
	if (!e.buf)
		return -ENOMEM;
	size_t len = 0, got = 0;
	for (unsigned i = 0; i < n; i++)
		len += block_len(q, b + i);
	int rc = t->fetch(t->io, q->id, q->rev, q->size, (int64_t)b * t->bs, len, tee_bytes, &e,
			  &got, q->prio);
	q->got += got;
	if (e.sink_rc > 0)
		q->ended = 1;
	if (e.next < e.end && q->tier_ok) /* blocks not got: let the others have a go */
		release(q, e.next, (unsigned)(e.end - e.next), mine + (e.next - b));
	free(e.buf);
	return rc;
}

/* Waits for another's lease on block b: 1 delivered (or the sink failed:
 * *rc), 0 download it here (*leased: with the lease now ours).  seen_bad:
 * the caller counted b's value as bad already. */
static int await(struct req *q, uint64_t b, int *rc, uint8_t *leased, int seen_bad)
{
	struct cfs_tiered *t = q->t;
	int64_t deadline = cfs_clock_mono_ms() + t->wait_ms;
	int poll = POLL_FIRST_MS;
	char key[KEY_MAX], lkey[KEY_MAX];
	size_t kl = key_of(q, b, 0, key), ll = key_of(q, b, 1, lkey);
	const char *argv[] = { "MGET", key, lkey };
	size_t len[] = { 4, kl, ll };
	struct cfs_tier_cmd c = { 3, argv, len };
	BUMP(t, lease_waits, 1);
	*leased = 0;
	int counted = seen_bad; /* a bad value is counted once */
	for (;;) {
		if (__atomic_load_n(&t->cancelled, __ATOMIC_RELAXED)) {
			*rc = -ECANCELED;
			return 1;
		}
		struct timespec ts = { 0, (long)poll * 1000000L };
		nanosleep(&ts, NULL);
		poll = poll * 2 > POLL_MAX_MS ? POLL_MAX_MS : poll * 2;
		struct cfs_redis_reply *r = NULL;
		if (exec_as(q, 1, &c, &r, 1))
			return 0;
		const struct cfs_cluster_reply *v = el(r, 0), *l = el(r, 1);
		int done = valid(q, b, v, !counted);
		counted |= v && v->type == CFS_RESP_STRING && !done;
		int gone = !l || l->type != CFS_RESP_STRING;
		if (done)
			*rc = take_value(q, b, v);
		cfs_redis_reply_free(r);
		if (done) {
			BUMP(t, lease_wait_hits, 1);
			return 1;
		}
		if (gone) { /* its holder gave up (or the value was corrupt) */
			struct cfs_redis_reply *late = NULL;
			lease(q, b, 1, NULL, leased, &late);
			if (late) { /* published just now */
				*rc = take_value(q, b, cfs_redis_tree(late));
				cfs_redis_reply_free(late);
				BUMP(t, lease_wait_hits, 1);
				return 1;
			}
			if (*leased || !q->tier_ok)
				return 0;
		}
		if (cfs_clock_mono_ms() >= deadline) {
			BUMP(t, lease_timeouts, 1);
			CFS_DEBUG("shared cache: waited %d ms for block %llu of %s; fetching it "
				  "here", t->wait_ms, (unsigned long long)b, q->id);
			return 0;
		}
	}
}

/* Blocks [b, b+n) of one group: from the tier where they are, else
 * downloaded (by us, or by whoever holds their lease). */
static int group(struct req *q, uint64_t b, unsigned n)
{
	uint8_t have[GROUP_MAX] = { 0 }, mine[GROUP_MAX] = { 0 };
	int rc = 0;
	struct cfs_redis_reply *r = NULL, *late[GROUP_MAX] = { 0 };
	set_group(q, b);
	if (q->drive_only || mget(q, b, n, &r))
		return download(q, b, n, mine);
	unsigned missing = 0;
	for (unsigned k = 0; k < n; k++)
		missing += !(have[k] = (uint8_t)valid(q, b + k, el(r, k), 1));
	uint8_t bad[GROUP_MAX]; /* a value there, refused (and counted) */
	for (unsigned k = 0; k < n; k++)
		bad[k] = !have[k] && el(r, k) && el(r, k)->type == CFS_RESP_STRING;
	BUMP(q->t, misses, missing);
	if (missing && lease(q, b, n, have, mine, late))
		memset(mine, 0, n);
	for (unsigned k = 0; k < n; k++)
		if (late[k])
			have[k] = 2; /* published between the MGET and the lease */
	unsigned i = 0;
	while (i < n && !rc && !q->ended) {
		if (have[i]) {
			rc = take_value(q, b + i, have[i] == 2 ? cfs_redis_tree(late[i]) : el(r, i));
			i++;
			continue;
		}
		if (!q->tier_ok || mine[i]) { /* a run of ours (or no tier): download it */
			unsigned k = i + 1;
			while (k < n && !have[k] && (mine[k] || !q->tier_ok))
				k++;
			rc = download(q, b + i, k - i, mine + i);
			i = k;
			continue;
		}
		uint8_t leased = 0;
		if (!await(q, b + i, &rc, &leased, bad[i])) {
			mine[i] = leased;
			rc = download(q, b + i, 1, mine + i);
		}
		i++;
	}
	if ((q->ended || rc) && i < n) /* stopped early: the leases of what is left go */
		release(q, b + i, n - i, mine + i);
	cfs_redis_reply_free(r);
	for (unsigned k = 0; k < n; k++)
		cfs_redis_reply_free(late[k]);
	return rc;
}

int cfs_tiered_fetch(void *io, const char *id, const char *rev, int64_t size, int64_t off,
		     size_t len, cfs_drive_sink_fn sink, void *arg, size_t *got, int prio)
{
	struct cfs_tiered *t = io;
	*got = 0;
	int64_t end = off + (int64_t)len < size ? off + (int64_t)len : size;
	if (!rev || !*rev || off % t->bs || end <= off)
		goto drive;
	struct req q = { .t = t, .id = id, .rev = rev, .size = size, .sink = sink, .arg = arg,
			 .prio = prio, .tier_ok = 1 };
	q.drive_only = __atomic_load_n(&t->forgotten.n, __ATOMIC_ACQUIRE) &&
		       ring_has(&t->forgotten, rev_hash(id, rev));
	uint64_t b = (uint64_t)off / t->bs, last = (uint64_t)(end - 1) / t->bs;
	int rc = 0;
	/* at most CHUNK_BYTES of values asked at once: a 64 MiB read-ahead
	 * request is 8 MGETs, not one reply of 64 MiB held in memory */
	unsigned chunk = t->bs >= CHUNK_BYTES ? 1 : CHUNK_BYTES / t->bs;
	if (chunk > GROUP_MAX)
		chunk = GROUP_MAX;
	while (b <= last && !rc && !q.ended) {
		uint64_t gend = ((b >> GROUP_SHIFT) + 1) << GROUP_SHIFT;
		unsigned n = (unsigned)((last + 1 < gend ? last + 1 : gend) - b);
		if (n > chunk)
			n = chunk;
		rc = group(&q, b, n);
		b += n;
	}
	if (!q.tier_ok)
		BUMP(t, bypassed, 1);
	*got = q.got;
	return rc;
drive: /* not revision-pinned: not the tier's */
	return t->fetch(t->io, id, rev, size, off, len, sink, arg, got, prio);
}

void cfs_tiered_forget(void *io, const char *id, const char *rev, int64_t size)
{
	struct cfs_tiered *t = io;
	if (!rev || !*rev || size <= 0)
		return; /* never in the tier */
	ring_add(&t->forgotten, rev_hash(id, rev));
	struct req q = { .t = t, .id = id, .rev = rev, .size = size, .tier_ok = 1 };
	uint64_t nblocks = (uint64_t)((size + t->bs - 1) / t->bs), deleted = 0;
	char keys[GROUP_MAX][KEY_MAX];
	const char *argv[GROUP_MAX + 1];
	size_t len[GROUP_MAX + 1];
	argv[0] = "DEL";
	len[0] = 3;
	for (uint64_t b = 0; b < nblocks && q.tier_ok; b += GROUP_MAX) {
		unsigned n = nblocks - b < GROUP_MAX ? (unsigned)(nblocks - b) : GROUP_MAX;
		set_group(&q, b);
		for (unsigned i = 0; i < n; i++) {
			len[i + 1] = key_of(&q, b + i, 0, keys[i]);
			argv[i + 1] = keys[i];
		}
		struct cfs_tier_cmd c = { (int)n + 1, argv, len };
		struct cfs_redis_reply *r = NULL;
		if (exec(&q, 1, &c, &r))
			break;
		const struct cfs_cluster_reply *x = cfs_redis_tree(r);
		if (x && x->type == CFS_RESP_INTEGER && x->integer > 0)
			deleted += (uint64_t)x->integer;
		cfs_redis_reply_free(r);
	}
	BUMP(t, dropped, deleted);
	CFS_WARN("shared cache: %s@%s failed Drive's checksum: %llu of its values deleted from "
		 "the tier%s; this mount reads it from Drive from now on", id, rev,
		 (unsigned long long)deleted, q.tier_ok ? "" : " (then the tier failed)");
}

void cfs_tiered_stats(struct cfs_tiered *t, struct cfs_tiered_stats *out)
{
	struct cfs_tier_stats ts;
	cfs_tier_stats(t->tier, &ts);
	*out = (struct cfs_tiered_stats){ 0 };
#define LOAD(f) out->f = __atomic_load_n(&t->st.f, __ATOMIC_RELAXED)
	LOAD(hits);
	LOAD(misses);
	LOAD(bytes_read);
	LOAD(bytes_written);
	LOAD(published);
	LOAD(lease_waits);
	LOAD(lease_wait_hits);
	LOAD(lease_timeouts);
	LOAD(corrupt);
	LOAD(forged);
	LOAD(dropped);
	LOAD(bypassed);
#undef LOAD
	out->errors = __atomic_load_n(&t->st.errors, __ATOMIC_RELAXED) + ts.errors;
	out->up = ts.up;
	out->nodes = ts.nodes;
	out->redirects = ts.redirects;
	out->refreshes = ts.refreshes;
	out->replica_reads = ts.replica_reads;
	out->redirects_refused = ts.redirects_refused;
}
