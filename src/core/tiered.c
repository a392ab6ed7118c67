/* tiered: block downloads through the shared cache tier (see tiered.h). */
#include "tiered.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "crc32c.h"
#include "err.h"
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

struct cfs_tiered {
	struct cfs_tier *tier;
	cfs_reader_fetch_fn fetch;
	void *io;
	uint32_t bs;
	int lease_ms, wait_ms;
	long ttl_s;
	char owner[33]; /* this process's lease value */
	char bsname[16]; /* the block size in keys: "1M", "64K" */
	int cancelled;
	struct cfs_tiered_stats st;
};

#define BUMP(t, f, n) __atomic_add_fetch(&(t)->st.f, (uint64_t)(n), __ATOMIC_RELAXED)

/* Deletes KEYS[1] when it still holds ARGV[1] (a lease not taken over). */
static const char RELEASE[] =
	"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
	"else return 0 end";

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

int cfs_tiered_new(const struct cfs_tiered_opts *o, struct cfs_tiered **out)
{
	struct cfs_tiered *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->tier = o->tier;
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
	free(t);
}

void cfs_tiered_cancel(void *io)
{
	struct cfs_tiered *t = io;
	__atomic_store_n(&t->cancelled, 1, __ATOMIC_RELAXED);
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
	char tag[KEY_MAX - 64]; /* "cfs1:BS:{ID@REV:G}" of the current group */
	size_t tlen;
};

static size_t block_len(const struct req *q, uint64_t b)
{
	int64_t left = q->size - (int64_t)b * q->t->bs;
	return left < (int64_t)q->t->bs ? (size_t)left : q->t->bs;
}

static void set_group(struct req *q, uint64_t b)
{
	int n = snprintf(q->tag, sizeof(q->tag), "cfs1:%s:{%s@%s:%llu}", q->t->bsname, q->id, q->rev,
			 (unsigned long long)(b >> GROUP_SHIFT));
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

/* 1 when v is block b's value; a string that is not counts as corrupt. */
static int valid(struct req *q, uint64_t b, const struct cfs_cluster_reply *v)
{
	if (!v || v->type != CFS_RESP_STRING)
		return 0;
	if (!cfs_tiered_check(v->str, v->len, (uint32_t)block_len(q, b), q->t->bs))
		return 1;
	BUMP(q->t, corrupt, 1);
	CFS_WARN("shared cache: block %llu of %s@%s is corrupt in the tier (%zu bytes); "
		 "fetching it from Drive", (unsigned long long)b, q->id, q->rev, v->len);
	return 0;
}

/* Hands block b's valid value v to the sink. */
static int take_value(struct req *q, uint64_t b, const struct cfs_cluster_reply *v)
{
	size_t want = block_len(q, b);
	BUMP(q->t, hits, 1);
	BUMP(q->t, bytes_read, want);
	return deliver(q, b, v->str + CFS_TIERED_HEADER, want);
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
		if (v && v->type == CFS_RESP_STRING && /* a bad one was counted already */
		    !cfs_tiered_check(v->str, v->len, (uint32_t)block_len(q, b + i), q->t->bs)) {
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
	unsigned char *v = malloc(CFS_TIERED_HEADER + n);
	if (!v)
		return;
	cfs_tiered_encode(v, data, (uint32_t)n, t->bs);
	char key[KEY_MAX], lkey[KEY_MAX], ex[24];
	size_t kl = key_of(q, b, 0, key), ll = key_of(q, b, 1, lkey);
	snprintf(ex, sizeof(ex), "%ld", t->ttl_s);
	const char *a0[] = { "SET", key, (const char *)v, "EX", ex };
	size_t l0[] = { 3, kl, CFS_TIERED_HEADER + n, 2, strlen(ex) };
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
 * *rc), 0 download it here (*leased: with the lease now ours). */
static int await(struct req *q, uint64_t b, int *rc, uint8_t *leased)
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
		int done = valid(q, b, v);
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
	if (mget(q, b, n, &r))
		return download(q, b, n, mine);
	unsigned missing = 0;
	for (unsigned k = 0; k < n; k++)
		missing += !(have[k] = (uint8_t)valid(q, b + k, el(r, k)));
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
		if (!await(q, b + i, &rc, &leased)) {
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
