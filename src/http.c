/* http: libcurl owner (see http.h).
 *
 * Easy handles are pooled (a handle keeps its own connection cache and TLS
 * session cache); a curl share object adds a process-wide DNS cache, TLS
 * session cache and connection pool so any handle can reuse any connection. */
#include "http.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "err.h"

#define POOL_MAX 64
#define ERR_BODY_MAX (64 * 1024)

struct cfs_http {
	CURLSH *share;
	pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
	pthread_mutex_t pool_lock;
	CURL *pool[POOL_MAX];
	int npool;
	char *ca_file;
	long connect_timeout_ms;
	long stall_s;
	char *user_agent;
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
	curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	*out = h;
	return 0;
}

void cfs_http_free(struct cfs_http *h)
{
	if (!h)
		return;
	for (int i = 0; i < h->npool; i++)
		curl_easy_cleanup(h->pool[i]);
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
	CURL *c;
	int overflow;  /* dst would overflow: the server sent more than asked */
	int toobig;    /* out reached its limit */
	int oom;
	int stopped;   /* the sink has all it wants */
};

static size_t on_body(char *p, size_t sz, size_t n, void *u)
{
	struct xfer *x = u;
	struct cfs_http_req *r = x->r;
	size_t len = sz * n;
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
	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		/* a new response (after a redirect or 100-continue): forget the old one */
		r->content_range[0] = r->retry_after[0] = '\0';
		r->content_length = -1;
	} else if (header_value(p, len, "Content-Length", num, sizeof(num))) {
		char *end;
		long long v = strtoll(num, &end, 10);
		r->content_length = (*end == '\0' && v >= 0) ? v : -1;
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

int cfs_http_perform(struct cfs_http *h, struct cfs_http_req *r)
{
	CURL *c = take_handle(h);
	if (!c)
		return -ENOMEM;
	struct xfer x = { .r = r, .c = c };
	struct curl_slist *hdrs = NULL;
	char line[4096];
	int rc = 0;

	r->status = 0;
	r->dst_len = 0;
	r->errmsg[0] = '\0';
	cfs_buf_reset(&r->err_body);
	if (r->bearer) {
		if ((size_t)snprintf(line, sizeof(line), "Authorization: Bearer %s", r->bearer) >=
		    sizeof(line)) {
			give_handle(h, c);
			return CFS_E_AUTH;
		}
		hdrs = curl_slist_append(hdrs, line);
		explicit_bzero(line, sizeof(line));
	}
	if (r->extra_header)
		hdrs = curl_slist_append(hdrs, r->extra_header);
	if (r->content_type) {
		snprintf(line, sizeof(line), "Content-Type: %s", r->content_type);
		hdrs = curl_slist_append(hdrs, line);
	}
	char range[64];
	if (r->range_len > 0) {
		snprintf(range, sizeof(range), "%" PRId64 "-%" PRId64, r->range_start,
			 r->range_start + r->range_len - 1);
		curl_easy_setopt(c, CURLOPT_RANGE, range);
	} else if (!r->dst && !r->sink) {
		curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, ""); /* JSON compresses well */
	}
	char errbuf[CURL_ERROR_SIZE];
	errbuf[0] = '\0';
	curl_easy_setopt(c, CURLOPT_URL, r->url);
	curl_easy_setopt(c, CURLOPT_SHARE, h->share);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, h->connect_timeout_ms);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, h->stall_s);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, r->timeout_ms);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	/* keep the pool's connections (curl_easy_reset restores the default of 5,
	 * which made almost every request open a new connection) */
	curl_easy_setopt(c, CURLOPT_MAXCONNECTS, (long)POOL_MAX);
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 256L * 1024);
	curl_easy_setopt(c, CURLOPT_USERAGENT, h->user_agent);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	if (h->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	if (r->cancel) {
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_xferinfo);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)r->cancel);
	}
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &x);
	if (r->method && strcmp(r->method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body ? r->body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)r->body_len);
	}

	CURLcode cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	if (x.oom) {
		rc = -ENOMEM;
	} else if (x.toobig) {
		snprintf(r->errmsg, sizeof(r->errmsg), "reply body over the size limit");
		rc = -EFBIG;
	} else if (x.stopped) {
		snprintf(r->errmsg, sizeof(r->errmsg), "ended early by the reader");
		rc = CFS_E_STOPPED;
	} else if (x.overflow) {
		snprintf(r->errmsg, sizeof(r->errmsg), "reply body larger than requested");
		rc = CFS_E_PROTO;
	} else if (cc != CURLE_OK) {
		snprintf(r->errmsg, sizeof(r->errmsg), "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
		rc = classify_curl(cc);
	}
	/* The option list held the token: wipe it before freeing. */
	for (struct curl_slist *s = hdrs; s; s = s->next)
		explicit_bzero(s->data, strlen(s->data));
	curl_slist_free_all(hdrs);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
	give_handle(h, c);
	return rc;
}
