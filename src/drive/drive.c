/* drive: Drive API v3 calls (see drive.h); media downloads and their hedges
 * live in drive_media.c. */
#include "drive_int.h"
#include "clock.h"

#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "err.h"
#include "http.h"
#include "log.h"
#include "pace.h"
#include "wire.h"

#define JSON_MAX (64u << 20)
#define CFS_DRIVE_AUTH_TRIES 3 /* refreshes after 401s, per call */


int64_t cfs_drive_now_ms(void)
{
	return cfs_clock_mono_ms();
}

int cfs_drive_new(struct cfs_http *http, struct cfs_auth *auth, const struct cfs_drive_opts *o,
		  struct cfs_drive **out)
{
	*out = NULL;
	struct cfs_drive *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->http = http;
	d->auth = auth;
	d->api = strdup(o->api_url);
	if (!d->api) {
		free(d);
		return -ENOMEM;
	}
	size_t n = strlen(d->api);
	while (n > 0 && d->api[n - 1] == '/')
		d->api[--n] = '\0';
	d->io_timeout_ms = o->io_timeout_ms > 0 ? o->io_timeout_ms : 300000;
	d->retry = o->retry;
	if (d->retry.max_attempts <= 0)
		d->retry = (struct cfs_retry_policy){ .base_ms = 500, .cap_ms = 32000,
						      .max_attempts = 12, .first_ms = 50 };
	pthread_mutex_init(&d->wake_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->wake, &ca);
	pthread_condattr_destroy(&ca);
	d->units = o->api_units > 0;
	double ceiling = o->api_rate == 0 ? 200 : o->api_rate, burst = o->api_burst;
	if (d->units) /* units a second */
		ceiling = o->api_units / 60;
	/* Drive's quota is counted over a minute, so a burst above the rate is
	 * allowed: by default half a second's worth (rclone's Drive pacer
	 * bursts 100 at most), at least 4 calls, or room for two downloads */
	if (burst <= 0) {
		double least = d->units ? 2 * CFS_WIRE_UNITS_MAX : 4;
		burst = ceiling / 2 > least ? ceiling / 2 : least;
	}
	cfs_pace_init(&d->pace, ceiling, burst, cfs_drive_now_ms() * 1000);
	const struct cfs_pace_policy create = { .start = CFS_DRIVE_CREATE_START,
						.window_us = CFS_DRIVE_CREATE_WINDOW_US,
						.min_refused = CFS_DRIVE_CREATE_MIN_REFUSED };
	cfs_pace_init_policy(&d->create_pace,
			     o->create_rate == 0 ? CFS_DRIVE_CREATE_RATE : o->create_rate,
			     o->create_burst, &create, cfs_drive_now_ms() * 1000);
	pthread_mutex_init(&d->corpus_lock, NULL);
	pthread_mutex_init(&d->hedge_lock, NULL);
	pthread_mutex_init(&d->unpin_lock, NULL);
	cfs_hedge_init(&d->hedge, o->hedge_percent == 0  ? CFS_HEDGE_PERCENT
				  : o->hedge_percent < 0 ? 0
							 : o->hedge_percent);
	d->shared_with_me = o->shared_with_me;
	if (o->drive_id && *o->drive_id) {
		snprintf(d->corpus, sizeof(d->corpus), "%s", o->drive_id);
		d->corpus_known = 1;
	} else if (o->root_id && *o->root_id && o->root_id[0] != '/' &&
		   strcmp(o->root_id, "root") != 0 &&
		   strcmp(o->root_id, CFS_DRIVE_SHARED_WITH_ME) != 0) {
		d->root_id = strdup(o->root_id);
		if (!d->root_id) {
			cfs_drive_free(d);
			return -ENOMEM;
		}
	} else {
		d->corpus_known = 1;
	}
	*out = d;
	return 0;
}

void cfs_drive_free(struct cfs_drive *d)
{
	if (!d)
		return;
	cfs_pace_cleanup(&d->pace);
	cfs_pace_cleanup(&d->create_pace);
	pthread_mutex_destroy(&d->wake_lock);
	pthread_cond_destroy(&d->wake);
	pthread_mutex_destroy(&d->corpus_lock);
	pthread_mutex_destroy(&d->hedge_lock);
	pthread_mutex_destroy(&d->unpin_lock);
	free(d->root_id);
	free(d->api);
	free(d);
}

void cfs_drive_stats(struct cfs_drive *d, struct cfs_drive_stats *out)
{
	out->requests = __atomic_load_n(&d->st.requests, __ATOMIC_RELAXED);
	out->retries = __atomic_load_n(&d->st.retries, __ATOMIC_RELAXED);
	out->errors = __atomic_load_n(&d->st.errors, __ATOMIC_RELAXED);
	out->bytes_media = __atomic_load_n(&d->st.bytes_media, __ATOMIC_RELAXED);
	out->bytes_json = __atomic_load_n(&d->st.bytes_json, __ATOMIC_RELAXED);
	out->err_net = __atomic_load_n(&d->st.err_net, __ATOMIC_RELAXED);
	out->err_server = __atomic_load_n(&d->st.err_server, __ATOMIC_RELAXED);
	out->err_rate = __atomic_load_n(&d->st.err_rate, __ATOMIC_RELAXED);
	out->err_proto = __atomic_load_n(&d->st.err_proto, __ATOMIC_RELAXED);
	out->err_auth = __atomic_load_n(&d->st.err_auth, __ATOMIC_RELAXED);
	out->err_quota = __atomic_load_n(&d->st.err_quota, __ATOMIC_RELAXED);
	out->err_notfound = __atomic_load_n(&d->st.err_notfound, __ATOMIC_RELAXED);
	out->err_access = __atomic_load_n(&d->st.err_access, __ATOMIC_RELAXED);
	out->resumed = __atomic_load_n(&d->st.resumed, __ATOMIC_RELAXED);
	out->stalls = __atomic_load_n(&d->st.stalls, __ATOMIC_RELAXED);
	out->hedges = __atomic_load_n(&d->st.hedges, __ATOMIC_RELAXED);
	out->hedge_wins = __atomic_load_n(&d->st.hedge_wins, __ATOMIC_RELAXED);
	pthread_mutex_lock(&d->hedge_lock);
	out->ttfb_p95_us = cfs_hedge_ttfb_p95(&d->hedge);
	out->pause_p95_us = cfs_hedge_pause_p95(&d->hedge);
	pthread_mutex_unlock(&d->hedge_lock);
	pthread_mutex_lock(&d->pace.lock);
	out->paced = d->pace.waits;
	out->rate_limited = d->pace.limited;
	out->rate_cuts = d->pace.cuts;
	pthread_mutex_unlock(&d->pace.lock);
	out->api_rate = cfs_pace_rate(&d->pace);
	out->api_burst = d->pace.burst; /* set once, at cfs_drive_new */
	out->connects = cfs_http_connects(d->http);
	out->api_units = d->units;
	out->units = __atomic_load_n(&d->st.units, __ATOMIC_RELAXED);
	out->create_rate = cfs_pace_rate(&d->create_pace);
	pthread_mutex_lock(&d->create_pace.lock);
	out->create_limited = d->create_pace.limited;
	pthread_mutex_unlock(&d->create_pace.lock);
	out->uploads = __atomic_load_n(&d->st.uploads, __ATOMIC_RELAXED);
	out->upload_bytes = __atomic_load_n(&d->st.upload_bytes, __ATOMIC_RELAXED);
	out->upload_retries = __atomic_load_n(&d->st.upload_retries, __ATOMIC_RELAXED);
}


/* Retries sleep on a condition that any successful call signals: when Drive
 * comes back after an outage, every waiting retry goes at once instead of
 * finishing its backoff (up to the 32 s cap). */
static void backoff_wait(struct cfs_drive *d, long wait_ms, int wakeable)
{
	struct timespec ts = cfs_clock_deadline(wait_ms);
	pthread_mutex_lock(&d->wake_lock);
	uint64_t seen = d->successes;
	d->sleepers++;
	/* a success ends the wait only when wakeable; cancellation always */
	while (!d->cancelled && (!wakeable || d->successes == seen) &&
	       pthread_cond_timedwait(&d->wake, &d->wake_lock, &ts) == 0)
		;
	d->sleepers--;
	pthread_mutex_unlock(&d->wake_lock);
}

long cfs_drive_set_io_timeout(struct cfs_drive *d, long ms)
{
	return __atomic_exchange_n(&d->io_timeout_ms, ms, __ATOMIC_RELAXED);
}

void cfs_drive_cancel(struct cfs_drive *d)
{
	pthread_mutex_lock(&d->wake_lock);
	__atomic_store_n(&d->cancelled, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&d->wake);
	pthread_mutex_unlock(&d->wake_lock);
}

static void note_success(struct cfs_drive *d)
{
	/* cheap when nobody sleeps: one relaxed read */
	if (!__atomic_load_n(&d->sleepers, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&d->wake_lock);
	d->successes++;
	pthread_cond_broadcast(&d->wake);
	pthread_mutex_unlock(&d->wake_lock);
}

static void count_error(struct cfs_drive *d, int rc)
{
	if (!rc)
		return;
	COUNT(d, errors, 1);
	switch (rc) {
	case CFS_E_NET: COUNT(d, err_net, 1); break;
	case CFS_E_SERVER: COUNT(d, err_server, 1); break;
	case CFS_E_RATE: COUNT(d, err_rate, 1); break;
	case CFS_E_PROTO: COUNT(d, err_proto, 1); break;
	case CFS_E_AUTH: COUNT(d, err_auth, 1); break;
	case CFS_E_QUOTA: COUNT(d, err_quota, 1); break;
	case -ENOENT: COUNT(d, err_notfound, 1); break;
	case -EACCES: COUNT(d, err_access, 1); break;
	default: break;
	}
}

/* A refusal for the rate: once the pacer of calls came down for them, says
 * once a mount that a quota counted in units (which no rate of calls fits)
 * has an option of its own. */
static void hint_units(struct cfs_drive *d)
{
	if (d->units || __atomic_load_n(&d->units_hinted, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&d->pace.lock);
	uint64_t cuts = d->pace.cuts, refused = d->pace.limited;
	pthread_mutex_unlock(&d->pace.lock);
	if (cuts && !__atomic_exchange_n(&d->units_hinted, 1, __ATOMIC_RELAXED))
		CFS_WARN("Drive refused %llu calls for the rate and the pacer came down; a Cloud "
			 "project created since 2026-05-01 counts quota units (a download 200, a "
			 "get 5: no rate of calls fits both): if yours does, mount with "
			 "--api-units=325000", (unsigned long long)refused);
}

/* One exchange of a try: media requests race a hedge when late. */
static int perform(struct cfs_drive *d, struct cfs_http_req *r)
{
	return r->sink == cfs_drive_media_bytes ? cfs_drive_fetch_media(d, r)
						  : cfs_http_perform(d->http, r);
}

int cfs_drive_call(struct cfs_drive *d, struct cfs_http_req *r, const char *what, validate_fn v,
		   resume_fn resume, void *ctx, int prio)
{
	int64_t deadline = cfs_drive_now_ms() + __atomic_load_n(&d->io_timeout_ms, __ATOMIC_RELAXED);
	int auth_retry = 0; /* refreshes after a 401, at most CFS_DRIVE_AUTH_TRIES */
	uint64_t rng = (uint64_t)cfs_drive_now_ms() ^ (uint64_t)(uintptr_t)r;
	char token[4096];
	int rc = 0;
	char reason[64] = "", msg[160] = "";
	int create = prio & CFS_DRIVE_CREATE; /* creations: their own budget too */
	prio &= ~CFS_DRIVE_CREATE;
	r->cancel = &d->cancelled;
	for (int attempt = 0;; attempt++) {
		uint64_t gen = 0;
		reason[0] = msg[0] = '\0';
		if (__atomic_load_n(&d->cancelled, __ATOMIC_RELAXED)) {
			rc = -ECANCELED;
			break;
		}
		rc = cfs_auth_token(d->auth, token, sizeof(token), &gen);
		if (!rc) {
			r->bearer = token;
			if (r->out)
				cfs_buf_reset(r->out);
			int units = cfs_wire_quota_units(r->method, r->url);
			if ((create && cfs_pace_take(&d->create_pace, CFS_PACE_URGENT, &d->cancelled)) ||
			    cfs_pace_take_n(&d->pace, prio, d->units ? units : 1, &d->cancelled)) {
				rc = -ECANCELED;
				break;
			}
			COUNT(d, requests, 1);
			COUNT(d, units, (uint64_t)units);
			rc = perform(d, r);
			r->bearer = NULL;
			if (!rc && (r->status < 200 || r->status > 299)) {
				cfs_json_parse_error(r->err_body.data ? r->err_body.data : "",
						     r->err_body.len, reason, sizeof(reason), msg,
						     sizeof(msg));
				rc = cfs_retry_classify(r->status, reason);
				if (rc == -ERANGE && !v) /* 416 only means something to reads */
					rc = CFS_E_PROTO;
				if (r->status == 308 && v && r->method &&
				    strcmp(r->method, "PUT") == 0) {
					/* an upload session's Resume Incomplete: its
					 * validator reads the Range (drive_write.c) */
					rc = 0;
				} else if (r->status >= 300 && r->status <= 399) {
					/* not followed (see http.h): final, and said once */
					CFS_ERROR("%s: Drive answered HTTP %ld, a redirect to %s; "
						  "colabfs does not follow redirects of API calls "
						  "(is --api-url right?)",
						  what, r->status, r->location[0] ? r->location : "?");
					rc = CFS_E_CONFIG;
				}
			}
			if (r->status) /* a reply: the pacer watches the share refused */
				cfs_pace_reply(create ? &d->create_pace : &d->pace,
					       cfs_drive_now_ms() * 1000, rc == CFS_E_RATE);
			if (rc == CFS_E_RATE && !create)
				hint_units(d);
			if (!rc && v)
				rc = v(r, ctx);
			else if (rc == -ERANGE)
				rc = v(r, ctx);
		}
		if (rc == CFS_E_AUTH && gen && auth_retry < CFS_DRIVE_AUTH_TRIES) {
			/* 401: the token was refused.  Refresh and try again: more
			 * than once, since a refresh can be late (the token
			 * endpoint failed first) and a 401 can answer a request
			 * that went out with the token just replaced; a second
			 * or third refusal waits a little first.  A token Drive
			 * keeps refusing is "authentication failed" after that. */
			cfs_auth_reject(d->auth, gen);
			if (auth_retry)
				backoff_wait(d, 100L << auth_retry, 0);
			auth_retry++;
			CFS_INFO("%s: token refused (HTTP 401), refreshing (%d of %d)", what,
				 auth_retry, CFS_DRIVE_AUTH_TRIES);
			continue;
		}
		if (!rc || !cfs_retry_transient(rc))
			break;
		if (__atomic_load_n(&d->cancelled, __ATOMIC_RELAXED)) {
			rc = -ECANCELED;
			break;
		}
		if (resume && resume(r, ctx)) {
			/* bytes arrived before the cut: continue from there at once */
			COUNT(d, resumed, 1);
			CFS_INFO("%s: %s%s%s; resuming at the next byte", what, cfs_strerror(rc),
				 r->errmsg[0] ? ": " : "", r->errmsg);
			attempt = -1;
			continue;
		}
		int64_t ra = r->retry_after[0] ? cfs_wire_retry_after(r->retry_after, time(NULL)) : -1;
		long wait = cfs_retry_wait_ms(&d->retry, rc, attempt, ra, &rng);
		if (attempt + 1 >= d->retry.max_attempts || cfs_drive_now_ms() + wait > deadline) {
			CFS_ERROR("%s: giving up after %d attempts: %s%s%s%s%s", what, attempt + 1,
				  cfs_strerror(rc), r->errmsg[0] ? ": " : "", r->errmsg,
				  reason[0] ? " reason=" : "", reason);
			break;
		}
		COUNT(d, retries, 1);
		CFS_WARN("%s: %s%s%s (HTTP %ld%s%s), retry %d in %ld ms", what, cfs_strerror(rc),
			 r->errmsg[0] ? ": " : "", r->errmsg, r->status, reason[0] ? " " : "", reason,
			 attempt + 1, wait);
		/* after a network failure (an outage), a call that gets through
		 * again wakes this one early; rate limits and Retry-After are
		 * always waited out in full */
		backoff_wait(d, wait, rc == CFS_E_NET && ra < 0);
	}
	explicit_bzero(token, sizeof(token));
	if (rc == CFS_E_STOPPED) { /* ended by the caller's sink: a success, not validated */
		COUNT(d, bytes_media, r->dst_len);
		rc = 0;
	}
	count_error(d, rc);
	if (!rc)
		note_success(d);
	if (rc && !cfs_retry_transient(rc) && rc != -ENOENT)
		CFS_ERROR("%s: %s (HTTP %ld%s%s%s%s)", what, cfs_strerror(rc), r->status,
			  reason[0] ? ", reason " : "", reason, msg[0] ? ": " : "", msg);
	return rc;
}

static int call(struct cfs_drive *d, struct cfs_http_req *r, const char *what, validate_fn v,
		resume_fn resume, void *ctx)
{
	return cfs_drive_call(d, r, what, v, resume, ctx, CFS_PACE_URGENT);
}

int cfs_drive_url_files(struct cfs_drive *d, struct cfs_buf *u, const char *id, const char *rest)
{
	return cfs_drive_url_at(d, u, "/drive/v3/files", id, rest);
}

int cfs_drive_url_at(struct cfs_drive *d, struct cfs_buf *u, const char *path, const char *id,
		     const char *rest)
{
	int rc = cfs_buf_append(u, d->api, strlen(d->api));
	if (!rc)
		rc = cfs_buf_append(u, path, strlen(path));
	if (!rc && id) {
		rc = cfs_buf_append(u, "/", 1);
		if (!rc)
			rc = cfs_wire_urlencode(u, id);
	}
	if (!rc)
		rc = cfs_buf_append(u, rest, strlen(rest));
	return rc;
}

int cfs_drive_validate_meta(struct cfs_http_req *r, void *ctx)
{
	struct cfs_drive_json_ctx *c = ctx;
	COUNT(c->d, bytes_json, r->out->len);
	return cfs_json_parse_file(r->out->data ? r->out->data : "", r->out->len, c->m);
}

/* The virtual "Shared with me" folder. */
static int shared_root(struct cfs_file_meta *m)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->id, sizeof(m->id), "%s", CFS_DRIVE_SHARED_WITH_ME);
	snprintf(m->mime, sizeof(m->mime), "%s", CFS_FOLDER_MIME);
	m->size = m->version = -1;
	m->can_download = 1;
	m->name = strdup("Shared with me");
	return m->name ? 0 : -ENOMEM;
}

/* The files.get of the --root folder tells which shared drive it is in. */
static void learn_corpus(struct cfs_drive *d, const char *id, const struct cfs_file_meta *m)
{
	pthread_mutex_lock(&d->corpus_lock);
	if (!d->corpus_known && d->root_id && strcmp(id, d->root_id) == 0) {
		snprintf(d->corpus, sizeof(d->corpus), "%s", m->drive_id);
		d->corpus_known = 1;
		if (m->drive_id[0])
			CFS_INFO("root %s is in shared drive %s", id, m->drive_id);
	}
	pthread_mutex_unlock(&d->corpus_lock);
}

int cfs_drive_set_root(struct cfs_drive *d, const char *id)
{
	char *x = strdup(id);
	if (!x)
		return -ENOMEM;
	pthread_mutex_lock(&d->corpus_lock);
	free(d->root_id);
	d->root_id = x;
	d->corpus[0] = '\0';
	d->corpus_known = 0;
	pthread_mutex_unlock(&d->corpus_lock);
	return 0;
}

int cfs_drive_corpus(struct cfs_drive *d, char *out)
{
	pthread_mutex_lock(&d->corpus_lock);
	int known = d->corpus_known;
	snprintf(out, CFS_ID_MAX, "%s", d->corpus);
	pthread_mutex_unlock(&d->corpus_lock);
	if (known)
		return 0;
	/* a remount that trusted its stored root: ask once where it is */
	struct cfs_file_meta m;
	int rc = cfs_drive_get(d, d->root_id, &m);
	cfs_file_meta_cleanup(&m);
	if (rc)
		return rc;
	pthread_mutex_lock(&d->corpus_lock);
	snprintf(out, CFS_ID_MAX, "%s", d->corpus);
	pthread_mutex_unlock(&d->corpus_lock);
	return 0;
}

int cfs_drive_get(struct cfs_drive *d, const char *id, struct cfs_file_meta *m)
{
	if (strcmp(id, CFS_DRIVE_SHARED_WITH_ME) == 0)
		return shared_root(m);
	struct cfs_buf url = { 0 }, body = { .max = JSON_MAX };
	struct cfs_http_req r;
	cfs_http_req_init(&r);
	memset(m, 0, sizeof(*m));
	int rc = cfs_drive_url_files(d, &url, id, "?supportsAllDrives=true&fields=" CFS_JSON_FILE_FIELDS);
	if (!rc) {
		struct cfs_drive_json_ctx c = { d, m };
		char what[200];
		snprintf(what, sizeof(what), "files.get %s", id);
		r.url = url.data;
		r.out = &body;
		r.timeout_ms = 120000;
		rc = call(d, &r, what, cfs_drive_validate_meta, NULL, &c);
		if (!rc)
			learn_corpus(d, id, m);
	}
	cfs_http_req_cleanup(&r);
	cfs_buf_cleanup(&url);
	cfs_buf_cleanup(&body);
	return rc;
}

struct list_ctx {
	struct cfs_drive *d;
	cfs_drive_list_cb cb;
	void *arg;
	char *next;
};

static int validate_page(struct cfs_http_req *r, void *ctx)
{
	struct list_ctx *c = ctx;
	COUNT(c->d, bytes_json, r->out->len);
	free(c->next);
	c->next = NULL;
	return cfs_json_parse_file_list(r->out->data ? r->out->data : "", r->out->len, c->cb,
					c->arg, &c->next);
}

/* Appends "<param><corpus>" when a shared drive's corpus is in use. */
static int append_drive(struct cfs_buf *url, const char *param, const char *corpus)
{
	if (!corpus[0])
		return 0;
	int rc = cfs_buf_append(url, param, strlen(param));
	return rc ? rc : cfs_wire_urlencode(url, corpus);
}

int cfs_drive_list(struct cfs_drive *d, const char *parent_id, cfs_drive_list_cb cb, void *arg)
{
	return cfs_drive_list_named(d, parent_id, NULL, cb, arg);
}

int cfs_drive_list_named(struct cfs_drive *d, const char *parent_id, const char *name,
			 cfs_drive_list_cb cb, void *arg)
{
	struct cfs_buf q = { 0 }, base = { 0 }, url = { 0 }, body = { .max = JSON_MAX };
	struct list_ctx c = { d, cb, arg, NULL };
	char *token = NULL, corpus[CFS_ID_MAX] = "";
	int rc, shared = strcmp(parent_id, CFS_DRIVE_SHARED_WITH_ME) == 0;
	if (shared) {
		rc = cfs_buf_append(&q, "sharedWithMe = true and trashed = false", 39);
	} else {
		rc = cfs_drive_corpus(d, corpus);
		if (!rc)
			rc = cfs_buf_append(&q, "'", 1);
		if (!rc)
			rc = cfs_wire_qliteral(&q, parent_id);
		if (!rc)
			rc = cfs_buf_append(&q, "' in parents and trashed = false", 32);
	}
	if (!rc && name) {
		rc = cfs_buf_append(&q, " and name = '", 13);
		if (!rc)
			rc = cfs_wire_qliteral(&q, name);
		if (!rc)
			rc = cfs_buf_append(&q, "'", 1);
	}
	if (!rc)
		rc = cfs_drive_url_files(d, &base, NULL,
			       "?supportsAllDrives=true&includeItemsFromAllDrives=true&pageSize=1000"
			       "&fields=nextPageToken%2Cfiles(" CFS_JSON_FILE_FIELDS ")");
	if (!rc)
		rc = append_drive(&base, "&corpora=drive&driveId=", corpus);
	if (!rc)
		rc = cfs_buf_append(&base, "&q=", 3);
	if (!rc)
		rc = cfs_wire_urlencode(&base, q.data);
	int restarts = 0, pages = 0;
	char what[200];
	snprintf(what, sizeof(what), "files.list of %s", parent_id);
	while (!rc) {
		struct cfs_http_req r;
		cfs_http_req_init(&r);
		cfs_buf_reset(&url);
		rc = cfs_buf_append(&url, base.data, base.len);
		if (!rc && token) {
			rc = cfs_buf_append(&url, "&pageToken=", 11);
			if (!rc)
				rc = cfs_wire_urlencode(&url, token);
		}
		if (!rc) {
			r.url = url.data;
			r.out = &body;
			r.timeout_ms = 120000;
			rc = call(d, &r, what, validate_page, NULL, &c);
		}
		cfs_http_req_cleanup(&r);
		if (rc == CFS_E_BADREQ && token && restarts < 3) {
			/* a page token can expire: start over from the first page */
			CFS_WARN("%s: page token rejected after %d pages, restarting", what, pages);
			free(token);
			token = NULL;
			restarts++;
			pages = 0;
			rc = cb(NULL, arg);
			continue;
		}
		if (rc)
			break;
		pages++;
		free(token);
		token = c.next;
		c.next = NULL;
		if (!token)
			break;
	}
	free(token);
	free(c.next);
	cfs_buf_cleanup(&q);
	cfs_buf_cleanup(&base);
	cfs_buf_cleanup(&url);
	cfs_buf_cleanup(&body);
	return rc;
}

static int validate_export(struct cfs_http_req *r, void *ctx)
{
	struct cfs_drive *d = ctx;
	COUNT(d, bytes_media, r->out->len);
	if (r->content_length >= 0 && (size_t)r->content_length != r->out->len) {
		snprintf(r->errmsg, sizeof(r->errmsg), "short export body");
		return CFS_E_PROTO;
	}
	return 0;
}

int cfs_drive_export(struct cfs_drive *d, const char *id, const char *mime, size_t max,
		     struct cfs_buf *out)
{
	struct cfs_buf url = { 0 };
	struct cfs_http_req r;
	cfs_http_req_init(&r);
	int rc = cfs_drive_url_files(d, &url, id, "/export?supportsAllDrives=true&mimeType=");
	if (!rc)
		rc = cfs_wire_urlencode(&url, mime);
	if (!rc) {
		char what[200];
		snprintf(what, sizeof(what), "export %s as %s", id, mime);
		out->max = max;
		r.url = url.data;
		r.out = out;
		r.timeout_ms = 600000;
		rc = call(d, &r, what, validate_export, NULL, d);
		if (rc == -EFBIG)
			rc = CFS_E_TOOBIG;
	}
	cfs_http_req_cleanup(&r);
	cfs_buf_cleanup(&url);
	return rc;
}

static int validate_start(struct cfs_http_req *r, void *ctx)
{
	char **tok = ctx;
	free(*tok);
	*tok = NULL;
	return cfs_json_parse_start_token(r->out->data ? r->out->data : "", r->out->len, tok);
}

int cfs_drive_start_token(struct cfs_drive *d, char **token)
{
	struct cfs_buf url = { 0 }, body = { .max = JSON_MAX };
	struct cfs_http_req r;
	cfs_http_req_init(&r);
	*token = NULL;
	char corpus[CFS_ID_MAX];
	int rc = cfs_drive_corpus(d, corpus);
	if (!rc)
		rc = cfs_buf_append(&url, d->api, strlen(d->api));
	if (!rc)
		rc = cfs_buf_append(&url, "/drive/v3/changes/startPageToken?supportsAllDrives=true",
				    55);
	if (!rc)
		rc = append_drive(&url, "&driveId=", corpus);
	if (!rc) {
		r.url = url.data;
		r.out = &body;
		r.timeout_ms = 120000;
		rc = call(d, &r, "changes.getStartPageToken", validate_start, NULL, token);
	}
	cfs_http_req_cleanup(&r);
	cfs_buf_cleanup(&url);
	cfs_buf_cleanup(&body);
	return rc;
}

struct changes_ctx {
	cfs_json_change_cb cb;
	void *arg;
	char *next, *new_start;
	int shared_with_me;
};

/* In a Shared-with-me mount, an item whose parent the user cannot see sits in
 * the virtual root folder: report it there. */
static int on_change(const char *id, int removed, const struct cfs_file_meta *m, void *arg)
{
	struct changes_ctx *c = arg;
	if (!c->shared_with_me || !m || m->parent[0])
		return c->cb(id, removed, m, c->arg);
	struct cfs_file_meta t = *m; /* shallow: name stays m's */
	snprintf(t.parent, sizeof(t.parent), "%s", CFS_DRIVE_SHARED_WITH_ME);
	return c->cb(id, removed, &t, c->arg);
}

static int validate_changes(struct cfs_http_req *r, void *ctx)
{
	struct changes_ctx *c = ctx;
	free(c->next);
	free(c->new_start);
	c->next = c->new_start = NULL;
	return cfs_json_parse_changes(r->out->data ? r->out->data : "", r->out->len, on_change, c,
				      &c->next, &c->new_start);
}

static const char changes_query[] =
	"/drive/v3/changes?supportsAllDrives=true&includeItemsFromAllDrives=true"
	"&includeRemoved=true&pageSize=1000&fields=nextPageToken%2CnewStartPageToken%2C"
	"changes(fileId%2Cremoved%2CchangeType%2Cfile(" CFS_JSON_FILE_FIELDS "))&pageToken=";

int cfs_drive_changes(struct cfs_drive *d, const char *token, cfs_json_change_cb cb, void *arg,
		      char **new_start)
{
	struct changes_ctx c = { cb, arg, NULL, NULL, d->shared_with_me };
	char *tok = strdup(token), corpus[CFS_ID_MAX];
	struct cfs_buf url = { 0 }, body = { .max = JSON_MAX };
	int rc = tok ? 0 : -ENOMEM;
	*new_start = NULL;
	if (!rc)
		rc = cfs_drive_corpus(d, corpus);
	while (!rc) {
		struct cfs_http_req r;
		cfs_http_req_init(&r);
		cfs_buf_reset(&url);
		rc = cfs_buf_append(&url, d->api, strlen(d->api));
		if (!rc)
			rc = cfs_buf_append(&url, changes_query, sizeof(changes_query) - 1);
		if (!rc)
			rc = cfs_wire_urlencode(&url, tok);
		if (!rc)
			rc = append_drive(&url, "&driveId=", corpus);
		if (!rc) {
			r.url = url.data;
			r.out = &body;
			r.timeout_ms = 120000;
			rc = call(d, &r, "changes.list", validate_changes, NULL, &c);
		}
		cfs_http_req_cleanup(&r);
		if (rc)
			break;
		free(tok);
		tok = c.next;
		c.next = NULL;
		if (c.new_start) {
			*new_start = c.new_start;
			c.new_start = NULL;
			break;
		}
	}
	free(tok);
	free(c.next);
	free(c.new_start);
	cfs_buf_cleanup(&url);
	cfs_buf_cleanup(&body);
	return rc;
}
