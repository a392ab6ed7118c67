/* drive_media: range downloads and their hedges (see drive.h for
 * cfs_drive_read_sink, hedge.h for when a request is late). */
#include "drive_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "wire.h"

/* Bytes go to the caller only from a reply whose status and Content-Range
 * say they are the ones r asked for (the headers are in by the first byte),
 * and while two requests race (cfs_drive_fetch_media) only from the first of them to
 * deliver. */
int cfs_drive_media_bytes(void *arg, struct cfs_http_req *r, const char *p, size_t n)
{
	struct read_ctx *c = arg;
	int64_t a, b, t, at = r->range_start;
	if (r->dst_len == 0) {
		int ok = r->status == 206
				 ? cfs_wire_content_range(r->content_range, &a, &b, &t) == 0 &&
					   a == at && (t < 0 || t == c->size)
			 : r->status == 200 ? at == 0 && r->range_len == c->size
					    : 0;
		if (!ok)
			return -1;
	}
	if (c->racing) {
		if (!c->won)
			c->won = r;
		else if (c->won != r)
			return -1; /* the other one answered first: this one is being closed */
	}
	return c->sink(c->arg, at + (int64_t)r->dst_len, p, n);
}

/* Checks the reply to the segment [off+done, off+len). */
static int validate_range(struct cfs_http_req *r, void *ctx)
{
	struct read_ctx *c = ctx;
	int64_t a, b, t, at = c->off + (int64_t)c->done;
	size_t want = c->len - c->done;
	if (r->status == 416) {
		/* Drive says we asked past the end (the file shrank): end of file */
		CFS_WARN("media %s: 416 at offset %" PRId64 " (size %" PRId64 "), reading as EOF",
			 c->id, at, c->size);
		r->dst_len = 0;
		c->len = c->done;
		return 0;
	}
	if (r->status == 200) {
		/* whole body: only acceptable when that is what we asked for */
		if (at != 0 || (int64_t)r->dst_len != c->size || (size_t)c->size != want) {
			snprintf(r->errmsg, sizeof(r->errmsg), "server ignored Range");
			return CFS_E_PROTO;
		}
		COUNT(c->d, bytes_media, r->dst_len);
		return 0;
	}
	if (r->status != 206 || cfs_wire_content_range(r->content_range, &a, &b, &t) || a != at) {
		snprintf(r->errmsg, sizeof(r->errmsg), "bad Content-Range \"%.60s\"",
			 r->content_range);
		return CFS_E_PROTO;
	}
	if (t >= 0 && t != c->size) {
		CFS_WARN("media %s: size changed from %" PRId64 " to %" PRId64, c->id, c->size, t);
		return -ESTALE;
	}
	if (b != at + (int64_t)want - 1 || r->dst_len != want ||
	    (r->content_length >= 0 && r->content_length != (int64_t)want)) {
		snprintf(r->errmsg, sizeof(r->errmsg), "short body: %zu of %zu bytes (%.60s)",
			 r->dst_len, want, r->content_range);
		return CFS_E_PROTO;
	}
	COUNT(c->d, bytes_media, r->dst_len);
	return 0;
}

/* A 206 whose Content-Range starts where we asked delivered a true prefix of
 * the segment before it was cut: keep it and ask for the rest. */
static int resume_range(struct cfs_http_req *r, void *ctx)
{
	struct read_ctx *c = ctx;
	int64_t a, b, t, at = c->off + (int64_t)c->done;
	if (r->status != 206 || r->dst_len == 0 || r->dst_len >= c->len - c->done ||
	    cfs_wire_content_range(r->content_range, &a, &b, &t) || a != at ||
	    (t >= 0 && t != c->size))
		return 0;
	COUNT(c->d, bytes_media, r->dst_len);
	c->done += r->dst_len;
	r->range_start = c->off + (int64_t)c->done;
	r->range_len = (int64_t)(c->len - c->done);
	r->dst_cap = c->len - c->done;
	return 1;
}

/* ---- hedged media requests (see drive.h and hedge.h) ---------------------- */

#define RACE_TICK_MS 200 /* longest wait between looks at the transfers */

/* One transfer of a try: its request, and what the estimators know of it. */
struct leg {
	struct cfs_http_req *r;
	int told_first; /* its time to first byte was given to the estimator */
	int late;       /* it was found late */
};

static int64_t late_at(struct cfs_drive *d, const struct cfs_http_req *r)
{
	pthread_mutex_lock(&d->hedge_lock);
	int64_t t = cfs_hedge_late_at(&d->hedge, r->t_sent_us, r->t_first_us, r->t_last_us);
	pthread_mutex_unlock(&d->hedge_lock);
	return t;
}

static int hedge_take(struct cfs_drive *d)
{
	pthread_mutex_lock(&d->hedge_lock);
	int ok = cfs_hedge_take(&d->hedge);
	pthread_mutex_unlock(&d->hedge_lock);
	return ok;
}

/* Tells the estimators what l showed: its time to first byte once it has
 * one (or, ended while late without one, how long it waited); when it has
 * ended, the longest pause in its 2xx body, the wait it was closed in
 * included. */
static void learn(struct cfs_drive *d, struct leg *l, int ended, int64_t now)
{
	struct cfs_http_req *r = l->r;
	int first = !l->told_first && (r->t_first_us || (ended && l->late));
	int body = ended && r->t_first_us && r->status >= 200 && r->status <= 299;
	if (!first && !body)
		return;
	pthread_mutex_lock(&d->hedge_lock);
	if (first)
		cfs_hedge_first_byte(&d->hedge, (r->t_first_us ? r->t_first_us : now) - r->t_sent_us);
	if (body) {
		int64_t pause = r->max_pause_us;
		int64_t since = now - (r->t_last_us ? r->t_last_us : r->t_first_us);
		cfs_hedge_body_pause(&d->hedge, l->late && since > pause ? since : pause);
	}
	pthread_mutex_unlock(&d->hedge_lock);
	l->told_first |= first;
}

/* The bytes a request delivered stay delivered when another one goes on. */
static void absorb(struct read_ctx *c, const struct cfs_http_req *r)
{
	COUNT(c->d, bytes_media, r->dst_len);
	c->done += r->dst_len;
}

/* Sets h up to ask for what l has not delivered yet. */
static void hedge_req(struct cfs_http_req *h, const struct cfs_http_req *l)
{
	cfs_http_req_cleanup(h);
	cfs_http_req_init(h);
	h->url = l->url;
	h->bearer = l->bearer;
	h->cancel = l->cancel;
	h->timeout_ms = l->timeout_ms;
	h->sink = l->sink;
	h->sink_arg = l->sink_arg;
	h->range_start = l->range_start + (int64_t)l->dst_len;
	h->range_len = l->range_len - (int64_t)l->dst_len;
	h->dst_cap = (size_t)h->range_len;
}

/* One try of a media request: r runs, and while it is late (and the budget
 * allows) a hedge races it.  Returns what cfs_http_perform would for the
 * request that ends the try, whose request and response are then in r; a
 * failed try also carries the Retry-After of a leg refused before it (the
 * late request answered 429 while its hedge ran on, then the hedge failed),
 * so the retry never comes sooner than Drive asked; and once a leg was
 * refused, the other one is not hedged again within the try (a new request
 * right after a 429 is what Retry-After forbids). */
int cfs_drive_fetch_media(struct cfs_drive *d, struct cfs_http_req *r)
{
	struct read_ctx *c = r->sink_arg;
	struct cfs_http_multi *m;
	struct cfs_http_req alt;
	int rc = cfs_http_multi_new(d->http, &m);
	if (rc)
		return rc;
	cfs_http_req_init(&alt);
	struct leg lead = { r }, rival = { NULL };
	char ra[sizeof(r->retry_after)] = ""; /* a Retry-After of a leg that ended first */
	int refused = 0; /* a leg was refused: the other runs on, never hedged again */
	int64_t counted = 0; /* the lateness already counted as a stall */
	rc = cfs_http_multi_add(m, r);
	int running = !rc;
	while (running) {
		int64_t now = cfs_http_now_us(), due = rival.r ? INT64_MAX : late_at(d, lead.r);
		if (!rival.r && now >= due) {
			if (due != counted) {
				counted = due;
				lead.late = 1;
				COUNT(d, stalls, 1);
			}
			struct cfs_http_req *h = lead.r == r ? &alt : r;
			if (!refused && lead.r->dst_len < (size_t)lead.r->range_len &&
			    hedge_take(d)) {
				hedge_req(h, lead.r);
				/* urgent: a late request usually has a reader waiting,
				 * and the hedge budget keeps these few */
				cfs_pace_take_n(&d->pace, CFS_PACE_URGENT,
						d->units ? CFS_WIRE_UNITS_MAX : 1, NULL);
				if (cfs_http_multi_add(m, h) == 0) {
					COUNT(d, requests, 1);
					COUNT(d, units, CFS_WIRE_UNITS_MAX);
					COUNT(d, hedges, 1);
					CFS_INFO("media %s: %s for %lld ms; hedging [%" PRId64 "+%" PRId64 "]",
						 c->id, lead.r->t_first_us ? "no body bytes" : "no reply",
						 (long long)(now - (lead.r->t_first_us
									    ? (lead.r->t_last_us ? lead.r->t_last_us
												 : lead.r->t_first_us)
									    : lead.r->t_sent_us)) / 1000,
						 h->range_start, h->range_len);
					rival = (struct leg){ h };
					c->racing = 1;
					c->won = NULL;
				}
			}
			due = INT64_MAX; /* until the next look */
		}
		long wait = RACE_TICK_MS;
		if (due != INT64_MAX && (due - now) / 1000 + 1 < wait)
			wait = due > now ? (long)((due - now) / 1000 + 1) : 0;
		int frc = 0;
		struct cfs_http_req *done = cfs_http_multi_run(m, wait, &frc);
		now = cfs_http_now_us();
		learn(d, &lead, 0, now);
		if (rival.r)
			learn(d, &rival, 0, now);
		if (rival.r && c->won) {
			/* the race is decided: the first to deliver goes on alone */
			struct leg *win = c->won == lead.r ? &lead : &rival;
			struct leg *lose = win == &lead ? &rival : &lead;
			if (win == &rival) {
				absorb(c, lead.r);
				COUNT(d, hedge_wins, 1);
			}
			if (lose->r == done)
				done = NULL; /* it ended refusing bytes: that means nothing now */
			else
				cfs_http_multi_drop(m, lose->r);
			learn(d, lose, 1, now);
			lead = *win;
			rival.r = NULL;
			c->racing = 0;
			c->won = NULL;
			counted = 0;
		}
		if (!done) {
			if (__atomic_load_n(&d->cancelled, __ATOMIC_RELAXED)) {
				rc = CFS_E_NET; /* the transfers stop with it too (xferinfo) */
				running = 0;
			}
			continue;
		}
		learn(d, done == lead.r ? &lead : &rival, 1, now);
		if (rival.r && done == lead.r) {
			/* the late one ended before either answered: the hedge goes
			 * on.  A refusal's Retry-After binds the retry, should the
			 * hedge fail too (kept: its own reply clears the field). */
			if (lead.r->retry_after[0])
				memcpy(ra, lead.r->retry_after, sizeof(ra));
			refused |= lead.r->status >= 400;
			absorb(c, lead.r);
			lead = rival;
			rival.r = NULL;
			c->racing = 0;
			counted = 0;
			continue;
		}
		if (rival.r) {
			/* the hedge failed before either answered: so does this try */
			absorb(c, lead.r);
			cfs_http_multi_drop(m, lead.r);
			learn(d, &lead, 1, now);
			lead = rival;
			rival.r = NULL;
			c->racing = 0;
		}
		rc = frc;
		running = 0;
	}
	cfs_http_multi_free(m); /* drops what still runs (cancelled) */
	CFS_DEBUG("media %s [%" PRId64 "+%" PRId64 "]: HTTP %ld, first byte after %lld us, "
		  "longest body pause %lld us", c->id, lead.r->range_start, lead.r->range_len,
		  lead.r->status,
		  lead.r->t_first_us ? (long long)(lead.r->t_first_us - lead.r->t_sent_us) : -1LL,
		  (long long)lead.r->max_pause_us);
	c->racing = 0;
	c->won = NULL;
	if (lead.r != r) {
		struct cfs_http_req t = *r;
		*r = alt;
		alt = t;
	}
	cfs_http_req_cleanup(&alt);
	if (ra[0] && !r->retry_after[0] && (rc || r->status < 200 || r->status > 299))
		memcpy(r->retry_after, ra, sizeof(ra));
	return rc;
}

/* Whether id reads by current content (see unpinned in drive_int.h). */
static int is_unpinned(struct cfs_drive *d, const char *id)
{
	int found = 0;
	pthread_mutex_lock(&d->unpin_lock);
	for (unsigned i = 0; i < d->nunpinned && i < CFS_DRIVE_UNPINNED_MAX && !found; i++)
		found = strcmp(d->unpinned[i], id) == 0;
	pthread_mutex_unlock(&d->unpin_lock);
	return found;
}

static void unpin(struct cfs_drive *d, const char *id)
{
	if (is_unpinned(d, id))
		return;
	pthread_mutex_lock(&d->unpin_lock);
	snprintf(d->unpinned[d->nunpinned++ % CFS_DRIVE_UNPINNED_MAX], CFS_ID_MAX, "%s", id);
	pthread_mutex_unlock(&d->unpin_lock);
}

/* A revision download answered 404: the file changed (the usual case), or
 * Drive refuses this file's revisions while it still reports rev as the
 * head (some shared files).  1 for the second. */
static int head_still(struct cfs_drive *d, const char *id, const char *rev)
{
	struct cfs_file_meta m;
	int same = cfs_drive_get(d, id, &m) == 0 && strcmp(m.rev, rev) == 0;
	cfs_file_meta_cleanup(&m);
	return same;
}

int cfs_drive_read_sink(struct cfs_drive *d, const char *id, const char *rev, int64_t size,
			int64_t off, size_t len, cfs_drive_sink_fn sink, void *arg, size_t *got,
			int prio)
{
	*got = 0;
	if (off < 0)
		return -EINVAL;
	if (size <= 0 || off >= size || len == 0)
		return 0;
	if ((int64_t)len > size - off)
		len = (size_t)(size - off);
	struct cfs_buf url = { 0 }, tail = { 0 };
	struct cfs_http_req r;
	cfs_http_req_init(&r);
	int pinned = rev && *rev && !is_unpinned(d, id);
	int rc = 0;
	if (pinned) {
		rc = cfs_buf_append(&tail, "/revisions/", 11);
		if (!rc)
			rc = cfs_wire_urlencode(&tail, rev);
	}
	if (!rc)
		rc = cfs_buf_append(&tail, "?alt=media&supportsAllDrives=true", 33);
	if (!rc)
		rc = cfs_drive_url_files(d, &url, id, tail.data);
	if (!rc) {
		struct read_ctx c = { d, size, off, len, 0, id, sink, arg };
		char what[200];
		snprintf(what, sizeof(what), "media %s [%" PRId64 "+%zu]", id, off, len);
		r.url = url.data;
		r.range_start = off;
		r.range_len = (int64_t)len;
		r.sink = cfs_drive_media_bytes;
		r.sink_arg = &c;
		r.dst_cap = len;
		r.follow_redirects = 1; /* a GET without a body: Drive may send it on */
		r.timeout_ms = 600000;
		rc = cfs_drive_call(d, &r, what, validate_range, resume_range, &c, prio);
		if (!rc)
			*got = c.done + r.dst_len;
	}
	cfs_http_req_cleanup(&r);
	cfs_buf_cleanup(&url);
	cfs_buf_cleanup(&tail);
	if (pinned && rc == -ENOENT && !head_still(d, id, rev)) {
		/* the revision is gone: the file changed (or went away) */
		CFS_INFO("media %s: revision %s is no longer current", id, rev);
		rc = -ESTALE;
	} else if (pinned && (rc == -ENOENT || rc == -EACCES)) {
		/* revisions are for editors on some files: read this one's
		 * current content (the others stay pinned) */
		CFS_WARN("media %s: Drive %s reading revision %s; reading this file's current "
			 "content (a change during a read can then only be caught by size)",
			 id, rc == -EACCES ? "refuses" : "answers 404 (while it reports it as the head) to",
			 rev);
		unpin(d, id);
		rc = cfs_drive_read_sink(d, id, NULL, size, off, len, sink, arg, got, prio);
	}
	return rc;
}

