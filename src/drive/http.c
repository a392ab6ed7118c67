/* http: libcurl owner (see http.h).
 *
 * Easy handles are pooled, and each keeps its own connections: a request
 * reuses the live connection of the handle it takes (the pool hands back the
 * handle put in last), a multi set those of its multi handle.  A curl share
 * object adds a process-wide DNS cache and TLS session cache, so a new
 * connection resumes a TLS session another one made.  Connections are not in
 * the share: libcurl's shared connection cache is not safe for concurrent
 * threads (its documentation for CURL_LOCK_DATA_CONNECT, and the known bug
 * "A shared connection cache is not thread-safe"): two threads can take the
 * same connection, or one free a connection another still writes to (a
 * heap abort, as a server had with ~50 downloads starting at once).  It also
 * closed a connection at nearly every transfer's end (a multi handle's limit
 * against the share's count): one new connection per download. */
#include "http.h"
#include "clock.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "err.h"
#include "wire.h"

#define POOL_MAX 64
#define HANDLE_CONNS 4 /* idle connections a handle keeps: one per host it talks to */
#define ERR_BODY_MAX (64 * 1024)

struct cfs_http {
	CURLSH *share;
	pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
	pthread_mutex_t pool_lock;
	CURL *pool[POOL_MAX];
	int npool;
	CURLM *mpool[POOL_MAX]; /* multi handles of finished sets */
	int nmpool;
	char *ca_file;
	long connect_timeout_ms;
	long stall_s;
	char *user_agent;
	uint64_t connects; /* connections opened (atomic) */
	int64_t last_date; /* the Date of the latest reply (seconds since the epoch), 0: none */
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void share_lock(CURL *c, curl_lock_data d, curl_lock_access a, void *u)
{
	(void)c;
	(void)a;
	struct cfs_http *h = u;
	pthread_mutex_lock(&h->locks[d]);
}

static void share_unlock(CURL *c, curl_lock_data d, void *u)
{
	(void)c;
	struct cfs_http *h = u;
	pthread_mutex_unlock(&h->locks[d]);
}

int cfs_http_new(const struct cfs_http_opts *o, struct cfs_http **out)
{
	*out = NULL;
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK)
		return CFS_E_NET;
	struct cfs_http *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&h->locks[i], NULL);
	pthread_mutex_init(&h->pool_lock, NULL);
	h->connect_timeout_ms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 10000;
	h->stall_s = o->stall_s > 0 ? o->stall_s : 30;
	h->ca_file = o->ca_file ? strdup(o->ca_file) : NULL;
	h->user_agent = strdup(o->user_agent ? o->user_agent : "colabfs");
	h->share = curl_share_init();
	if (!h->share || !h->user_agent || (o->ca_file && !h->ca_file)) {
		cfs_http_free(h);
		return -ENOMEM;
	}
	curl_share_setopt(h->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(h->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(h->share, CURLSHOPT_USERDATA, h);
	curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	*out = h;
	return 0;
}

void cfs_http_free(struct cfs_http *h)
{
	if (!h)
		return;
	for (int i = 0; i < h->npool; i++)
		curl_easy_cleanup(h->pool[i]);
	for (int i = 0; i < h->nmpool; i++)
		curl_multi_cleanup(h->mpool[i]);
	if (h->share)
		curl_share_cleanup(h->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&h->locks[i]);
	pthread_mutex_destroy(&h->pool_lock);
	free(h->ca_file);
	free(h->user_agent);
	free(h);
}

static CURL *take_handle(struct cfs_http *h)
{
	CURL *c = NULL;
	pthread_mutex_lock(&h->pool_lock);
	if (h->npool > 0)
		c = h->pool[--h->npool];
	pthread_mutex_unlock(&h->pool_lock);
	if (c)
		curl_easy_reset(c);
	else
		c = curl_easy_init();
	return c;
}

static void give_handle(struct cfs_http *h, CURL *c)
{
	pthread_mutex_lock(&h->pool_lock);
	if (h->npool < POOL_MAX) {
		h->pool[h->npool++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&h->pool_lock);
	if (c)
		curl_easy_cleanup(c);
}

void cfs_http_req_init(struct cfs_http_req *r)
{
	memset(r, 0, sizeof(*r));
	r->content_length = -1;
	r->err_body.max = ERR_BODY_MAX;
}

void cfs_http_req_cleanup(struct cfs_http_req *r)
{
	cfs_buf_cleanup(&r->err_body);
}

struct xfer {
	struct cfs_http_req *r;
	struct cfs_http *h;
	CURL *c;
	struct curl_slist *hdrs;
	int64_t mark_us; /* a wait for body bytes counts from here */
	int overflow;  /* dst would overflow: the server sent more than asked */
	int toobig;    /* out reached its limit */
	int oom;
	int stopped;   /* the sink has all it wants */
	char errbuf[CURL_ERROR_SIZE];
};

int64_t cfs_http_now_us(void)
{
	return cfs_clock_mono_us();
}

static size_t take_body(struct xfer *x, char *p, size_t len)
{
	struct cfs_http_req *r = x->r;
	long code = 0;
	curl_easy_getinfo(x->c, CURLINFO_RESPONSE_CODE, &code);
	if (code < 200 || code > 299) {
		/* Error bodies are small; keep what fits, drop the rest. */
		size_t room = r->err_body.max - r->err_body.len;
		if (cfs_buf_append(&r->err_body, p, len < room ? len : room)) {
			x->oom = 1;
			return 0;
		}
		return len;
	}
	r->status = code; /* the sink judges the reply by it before perform returns */
	if (r->sink || r->dst) {
		if (len > r->dst_cap - r->dst_len) {
			x->overflow = 1;
			return 0;
		}
		if (r->sink) {
			int src = r->sink(r->sink_arg, r, p, len);
			if (src > 0) {
				r->dst_len += len; /* taken (what it needed of them) */
				x->stopped = 1;
				return 0;
			}
			if (src) {
				x->overflow = 1; /* refused: not the bytes we asked for */
				return 0;
			}
		} else {
			memcpy(r->dst + r->dst_len, p, len);
		}
		r->dst_len += len;
		return len;
	}
	if (r->out) {
		int rc = cfs_buf_append(r->out, p, len);
		if (rc) {
			if (rc == -EFBIG)
				x->toobig = 1;
			else
				x->oom = 1;
			return 0;
		}
	}
	return len;
}

static size_t on_body(char *p, size_t sz, size_t n, void *u)
{
	struct xfer *x = u;
	struct cfs_http_req *r = x->r;
	int64_t t = cfs_http_now_us();
	if (t - x->mark_us > r->max_pause_us)
		r->max_pause_us = t - x->mark_us;
	size_t taken = take_body(x, p, sz * n);
	x->mark_us = r->t_last_us = cfs_http_now_us();
	return taken;
}

/* Copies a header value (trimmed) if line is "name: value". */
static int header_value(const char *line, size_t len, const char *name, char *dst, size_t cap)
{
	size_t nl = strlen(name);
	if (len <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
		return 0;
	const char *v = line + nl + 1;
	const char *e = line + len;
	while (v < e && (*v == ' ' || *v == '\t'))
		v++;
	while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' '))
		e--;
	size_t vl = (size_t)(e - v);
	if (vl >= cap)
		vl = cap - 1;
	memcpy(dst, v, vl);
	dst[vl] = '\0';
	return 1;
}

static size_t on_header(char *p, size_t sz, size_t n, void *u)
{
	struct xfer *x = u;
	struct cfs_http_req *r = x->r;
	size_t len = sz * n;
	char num[32];
	x->mark_us = cfs_http_now_us();
	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		/* a new response (after a redirect or 100-continue): forget the old one */
		r->t_first_us = x->mark_us;
		r->content_range[0] = r->retry_after[0] = r->location[0] = r->range[0] = '\0';
		r->location_cut = 0;
		r->content_length = -1;
	} else if (header_value(p, len, "Location", r->location, sizeof(r->location))) {
		/* a redirect not followed, or an upload session URI */
		r->location_cut = strlen(r->location) + 1 >= sizeof(r->location);
	} else if (header_value(p, len, "Range", r->range, sizeof(r->range))) {
		/* an upload session's persisted bytes */
	} else if (header_value(p, len, "Content-Length", num, sizeof(num))) {
		char *end;
		long long v = strtoll(num, &end, 10);
		r->content_length = (*end == '\0' && v >= 0) ? v : -1;
	} else if (header_value(p, len, "Date", num, sizeof(num))) {
		time_t when;
		if (x->h && cfs_wire_http_date(num, &when) == 0)
			__atomic_store_n(&x->h->last_date, (int64_t)when, __ATOMIC_RELAXED);
	} else if (!header_value(p, len, "Content-Range", r->content_range,
				 sizeof(r->content_range))) {
		header_value(p, len, "Retry-After", r->retry_after, sizeof(r->retry_after));
	}
	return len;
}

static int on_xferinfo(void *u, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return __atomic_load_n((const int *)u, __ATOMIC_RELAXED) != 0;
}

/* Which curl failures no retry can fix. */
static int classify_curl(CURLcode cc)
{
	switch (cc) {
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
		return CFS_E_TLS;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return CFS_E_CONFIG;
	default:
		return CFS_E_NET;
	}
}

/* Takes a handle and sets it up for r.  Returns 0, or CFS_E_AUTH / -ENOMEM
 * (nothing to undo). */
static int xfer_start(struct cfs_http *h, struct xfer *x, struct cfs_http_req *r)
{
	char line[4096];
	memset(x, 0, sizeof(*x));
	x->r = r;
	x->h = h;
	x->c = take_handle(h);
	if (!x->c)
		return -ENOMEM;
	CURL *c = x->c;
	r->status = 0;
	r->dst_len = 0;
	r->errmsg[0] = '\0';
	r->content_range[0] = r->retry_after[0] = r->location[0] = r->range[0] = '\0';
	r->location_cut = 0;
	r->content_length = -1;
	cfs_buf_reset(&r->err_body);
	if (r->bearer) {
		if ((size_t)snprintf(line, sizeof(line), "Authorization: Bearer %s", r->bearer) >=
		    sizeof(line)) {
			give_handle(h, c);
			return CFS_E_AUTH;
		}
		x->hdrs = curl_slist_append(x->hdrs, line);
		explicit_bzero(line, sizeof(line));
	}
	if (r->extra_header)
		x->hdrs = curl_slist_append(x->hdrs, r->extra_header);
	for (size_t i = 0; i < sizeof(r->headers) / sizeof(r->headers[0]) && r->headers[i]; i++)
		x->hdrs = curl_slist_append(x->hdrs, r->headers[i]);
	if (r->content_type) {
		snprintf(line, sizeof(line), "Content-Type: %s", r->content_type);
		x->hdrs = curl_slist_append(x->hdrs, line);
	}
	if (r->range_len > 0) {
		char range[64];
		snprintf(range, sizeof(range), "%" PRId64 "-%" PRId64, r->range_start,
			 r->range_start + r->range_len - 1);
		curl_easy_setopt(c, CURLOPT_RANGE, range); /* curl copies it */
	} else if (!r->dst && !r->sink) {
		curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, ""); /* JSON compresses well */
	}
	curl_easy_setopt(c, CURLOPT_URL, r->url);
	curl_easy_setopt(c, CURLOPT_SHARE, h->share);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	if (r->follow_redirects && !r->body) {
		curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "https");
		curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
		curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
	}
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, h->connect_timeout_ms);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, h->stall_s);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, r->timeout_ms);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	/* a handle's own idle connections, by host (curl_easy_reset restores
	 * the default of 5) */
	curl_easy_setopt(c, CURLOPT_MAXCONNECTS, (long)HANDLE_CONNS);
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 256L * 1024);
	curl_easy_setopt(c, CURLOPT_USERAGENT, h->user_agent);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, x->errbuf);
	if (h->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	if (r->cancel) {
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_xferinfo);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)r->cancel);
	}
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	const char *m = r->method ? r->method : "GET";
	if (strcmp(m, "GET") != 0) {
		if (r->body || strcmp(m, "POST") == 0 || strcmp(m, "PUT") == 0 ||
		    strcmp(m, "PATCH") == 0) {
			/* the body from memory; no Expect: 100-continue round trip */
			curl_easy_setopt(c, CURLOPT_POST, 1L);
			curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body ? r->body : "");
			curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
					 (curl_off_t)(r->body ? r->body_len : 0));
			x->hdrs = curl_slist_append(x->hdrs, "Expect:");
		}
		if (strcmp(m, "POST") != 0)
			curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, m);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, x->hdrs);
	r->t_sent_us = cfs_http_now_us();
	r->t_first_us = r->t_last_us = r->max_pause_us = 0;
	x->mark_us = r->t_sent_us;
	return 0;
}

/* The transfer ended with cc: its status, and the handle goes back. */
static int xfer_end(struct cfs_http *h, struct xfer *x, CURLcode cc)
{
	struct cfs_http_req *r = x->r;
	int rc = 0;
	long opened = 0;
	curl_easy_getinfo(x->c, CURLINFO_RESPONSE_CODE, &r->status);
	if (curl_easy_getinfo(x->c, CURLINFO_NUM_CONNECTS, &opened) == CURLE_OK && opened > 0)
		__atomic_add_fetch(&h->connects, (uint64_t)opened, __ATOMIC_RELAXED);
	if (x->oom) {
		rc = -ENOMEM;
	} else if (x->toobig) {
		snprintf(r->errmsg, sizeof(r->errmsg), "reply body over the size limit");
		rc = -EFBIG;
	} else if (x->stopped) {
		snprintf(r->errmsg, sizeof(r->errmsg), "ended early by the reader");
		rc = CFS_E_STOPPED;
	} else if (x->overflow) {
		snprintf(r->errmsg, sizeof(r->errmsg), "reply body larger than requested");
		rc = CFS_E_PROTO;
	} else if (cc != CURLE_OK) {
		snprintf(r->errmsg, sizeof(r->errmsg), "%s",
			 x->errbuf[0] ? x->errbuf : curl_easy_strerror(cc));
		rc = classify_curl(cc);
	}
	/* The option list held the token: wipe it before freeing. */
	for (struct curl_slist *s = x->hdrs; s; s = s->next)
		explicit_bzero(s->data, strlen(s->data));
	curl_slist_free_all(x->hdrs);
	x->hdrs = NULL;
	curl_easy_setopt(x->c, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(x->c, CURLOPT_ERRORBUFFER, NULL);
	give_handle(h, x->c);
	x->c = NULL;
	return rc;
}

int cfs_http_perform(struct cfs_http *h, struct cfs_http_req *r)
{
	struct xfer x;
	int rc = xfer_start(h, &x, r);
	return rc ? rc : xfer_end(h, &x, curl_easy_perform(x.c));
}

uint64_t cfs_http_connects(struct cfs_http *h)
{
	return __atomic_load_n(&h->connects, __ATOMIC_RELAXED);
}

int cfs_http_last_date(struct cfs_http *h, int64_t *when)
{
	*when = __atomic_load_n(&h->last_date, __ATOMIC_RELAXED);
	return *when ? 0 : -ENOENT;
}

/* ---- several at once ------------------------------------------------------ */

struct cfs_http_multi {
	struct cfs_http *h;
	CURLM *m;
	struct xfer x[CFS_HTTP_MULTI_MAX];
	int used[CFS_HTTP_MULTI_MAX];
};

int cfs_http_multi_new(struct cfs_http *h, struct cfs_http_multi **out)
{
	struct cfs_http_multi *m = calloc(1, sizeof(*m));
	*out = NULL;
	if (!m)
		return -ENOMEM;
	m->h = h;
	pthread_mutex_lock(&h->pool_lock);
	if (h->nmpool > 0)
		m->m = h->mpool[--h->nmpool];
	pthread_mutex_unlock(&h->pool_lock);
	if (!m->m && (m->m = curl_multi_init()) != NULL)
		curl_multi_setopt(m->m, CURLMOPT_MAXCONNECTS, (long)HANDLE_CONNS);
	if (!m->m) {
		free(m);
		return -ENOMEM;
	}
	*out = m;
	return 0;
}

void cfs_http_multi_free(struct cfs_http_multi *m)
{
	if (!m)
		return;
	for (int i = 0; i < CFS_HTTP_MULTI_MAX; i++)
		if (m->used[i])
			cfs_http_multi_drop(m, m->x[i].r);
	struct cfs_http *h = m->h;
	pthread_mutex_lock(&h->pool_lock);
	if (h->nmpool < POOL_MAX) {
		h->mpool[h->nmpool++] = m->m;
		m->m = NULL;
	}
	pthread_mutex_unlock(&h->pool_lock);
	if (m->m)
		curl_multi_cleanup(m->m);
	free(m);
}

int cfs_http_multi_add(struct cfs_http_multi *m, struct cfs_http_req *r)
{
	int i = 0;
	while (i < CFS_HTTP_MULTI_MAX && m->used[i])
		i++;
	if (i == CFS_HTTP_MULTI_MAX)
		return -ENOSPC;
	int rc = xfer_start(m->h, &m->x[i], r);
	if (rc)
		return rc;
	if (curl_multi_add_handle(m->m, m->x[i].c) != CURLM_OK) {
		xfer_end(m->h, &m->x[i], CURLE_OUT_OF_MEMORY);
		return -ENOMEM;
	}
	m->used[i] = 1;
	return 0;
}

/* Takes slot i out of the set; returns its status. */
static int multi_end(struct cfs_http_multi *m, int i, CURLcode cc)
{
	curl_multi_remove_handle(m->m, m->x[i].c);
	m->used[i] = 0;
	return xfer_end(m->h, &m->x[i], cc);
}

static struct cfs_http_req *multi_done(struct cfs_http_multi *m, int *rc)
{
	int left;
	CURLMsg *msg;
	while ((msg = curl_multi_info_read(m->m, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		for (int i = 0; i < CFS_HTTP_MULTI_MAX; i++) {
			if (m->used[i] && m->x[i].c == msg->easy_handle) {
				*rc = multi_end(m, i, msg->data.result);
				return m->x[i].r;
			}
		}
	}
	return NULL;
}

struct cfs_http_req *cfs_http_multi_run(struct cfs_http_multi *m, long wait_ms, int *rc)
{
	struct cfs_http_req *r;
	int running;
	*rc = 0;
	if ((r = multi_done(m, rc)))
		return r;
	CURLMcode mc = curl_multi_perform(m->m, &running);
	if ((r = multi_done(m, rc)))
		return r;
	if (mc == CURLM_OK && wait_ms > 0 && running) {
		mc = curl_multi_poll(m->m, NULL, 0, wait_ms > INT32_MAX ? INT32_MAX : (int)wait_ms,
				     NULL);
		if (mc == CURLM_OK)
			mc = curl_multi_perform(m->m, &running);
		if ((r = multi_done(m, rc)))
			return r;
	}
	if (mc != CURLM_OK) {
		/* the set itself failed: end a transfer with it rather than spin */
		for (int i = 0; i < CFS_HTTP_MULTI_MAX; i++) {
			if (m->used[i]) {
				*rc = multi_end(m, i, CURLE_OUT_OF_MEMORY);
				snprintf(m->x[i].r->errmsg, sizeof(m->x[i].r->errmsg), "%s",
					 curl_multi_strerror(mc));
				if (*rc != -ENOMEM)
					*rc = CFS_E_NET;
				return m->x[i].r;
			}
		}
	}
	return NULL;
}

void cfs_http_multi_drop(struct cfs_http_multi *m, struct cfs_http_req *r)
{
	for (int i = 0; i < CFS_HTTP_MULTI_MAX; i++) {
		if (m->used[i] && m->x[i].r == r) {
			multi_end(m, i, CURLE_ABORTED_BY_CALLBACK);
			snprintf(r->errmsg, sizeof(r->errmsg), "closed by the caller");
			return;
		}
	}
}
