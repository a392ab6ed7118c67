/* http: every HTTP exchange colabfs makes (owns libcurl).
 *
 * One struct cfs_http per process holds a pool of easy handles, each with its
 * own live connections (handed back last in, first out, so a request reuses
 * a warm connection), and a share object for the DNS cache and TLS sessions.
 * Connections themselves are never shared between handles: libcurl's shared
 * connection cache is not safe for concurrent threads.  HTTP/1.1, verified
 * TLS (a private CA with ca_file), a connect timeout, a stall timeout (no
 * bytes for stall_s seconds) and a deadline on every call.
 *
 * cfs_http_perform returns 0 when an HTTP response arrived, whatever its
 * status (the caller classifies it), CFS_E_NET for a transport failure
 * (r->errmsg says which), CFS_E_TLS when the peer's certificate does not
 * verify or the CA file is unusable (retrying cannot help), CFS_E_CONFIG for
 * a malformed URL, CFS_E_PROTO when a 2xx body overflowed the caller's
 * buffer, -EFBIG when a body outgrew the limit of out, or -ENOMEM.  The
 * bearer token is sent as a header and never logged.  Redirects are not
 * followed unless the request asks (follow_redirects): a token POST answered
 * 307 must not carry the refresh token or the JWT to another host.
 *
 * A multi set (cfs_http_multi_*) runs a few requests at once from the
 * calling thread (curl's multi interface), so a caller can start a second
 * request while the first one is still running and close whichever it no
 * longer wants.  Every request, alone or in a set, records when its reply
 * began and when its body bytes arrived (t_* below), so a caller can see a
 * reply that is late.  The Date of the latest reply is kept
 * (cfs_http_last_date). */
#ifndef CFS_HTTP_H
#define CFS_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct cfs_http;

struct cfs_http_opts {
	const char *ca_file;     /* NULL: system store */
	long connect_timeout_ms; /* 0: 10 s */
	long stall_s;            /* 0: 30 s */
	const char *user_agent;
};

struct cfs_http_req {
	/* request */
	const char *method;      /* NULL: GET; POST, PUT, PATCH, DELETE... */
	const char *url;
	const char *bearer;      /* token, or NULL */
	const char *extra_header;
	const char *headers[4];  /* more request headers ("Name: value"), up to the first NULL */
	const char *body;        /* request body (any method but GET; POST, PUT and PATCH send
				  * one, empty when NULL: Content-Length: 0) */
	size_t body_len;
	const char *content_type;
	int64_t range_start;     /* range_len > 0: send Range */
	int64_t range_len;
	long timeout_ms;         /* whole call; 0: none besides stall */
	const int *cancel;       /* when *cancel turns non-zero, the transfer stops (CFS_E_NET) */
	int follow_redirects;    /* 0 (API and token calls): a 3xx is the reply, its Location in
				  * location; 1: up to 5 redirects, https only, and a body is
				  * never sent on (for media downloads) */
	/* 2xx body: sink if set, else dst if set (at most dst_cap bytes), else out. */
	char *dst;
	size_t dst_cap;
	struct cfs_buf *out;
	/* Instead of dst: 2xx bytes are handed to sink as they arrive (at most
	 * dst_cap in all; dst_len counts them).  A negative return refuses the
	 * bytes: the transfer fails with CFS_E_PROTO.  A positive return means
	 * the sink has everything it wants: the transfer ends there (the
	 * connection is closed) with CFS_E_STOPPED; dst_len counts the bytes of
	 * that last call too. */
	int (*sink)(void *arg, struct cfs_http_req *r, const char *p, size_t n);
	void *sink_arg;
	/* response */
	long status;
	size_t dst_len;
	int64_t content_length;  /* -1 unknown */
	char content_range[96];
	char retry_after[64];
	char location[2048];     /* the reply's Location (a 3xx's target, an upload session URI;
				  * cut to fit: see location_cut), else "" */
	int location_cut;        /* Location was longer than location */
	char range[96];          /* the reply's Range header (upload sessions: "bytes=0-N"), or "" */
	struct cfs_buf err_body; /* non-2xx body, capped; cfs_http_req_cleanup frees */
	char errmsg[256];
	/* timing (CLOCK_MONOTONIC, microseconds): when the request went out,
	 * when the first byte of the reply arrived (0: none yet), when the sink
	 * (or buffer) last finished taking body bytes (0: none yet), and the
	 * longest wait for body bytes (from the headers or the end of the last
	 * hand-over to the next bytes; time in the sink is not waiting) */
	int64_t t_sent_us, t_first_us, t_last_us, max_pause_us;
};

int cfs_http_new(const struct cfs_http_opts *o, struct cfs_http **out);
void cfs_http_free(struct cfs_http *h);

/* Initialises r (zeroes it, range off, content_length -1). */
void cfs_http_req_init(struct cfs_http_req *r);
void cfs_http_req_cleanup(struct cfs_http_req *r);

int cfs_http_perform(struct cfs_http *h, struct cfs_http_req *r);

/* The Date header of the latest reply any request on h received, in
 * seconds since the epoch (cfs_wire_http_date), for a clock check against
 * the server.  Returns 0, or -ENOENT when no reply carried a valid Date. */
int cfs_http_last_date(struct cfs_http *h, int64_t *when);
/* Connections opened so far (a request that reused one opened none). */
uint64_t cfs_http_connects(struct cfs_http *h);

/* A set of at most CFS_HTTP_MULTI_MAX requests running at once, driven by
 * the thread that calls cfs_http_multi_run.  A set belongs to one thread. */
#define CFS_HTTP_MULTI_MAX 4
struct cfs_http_multi;

/* Returns 0 or -ENOMEM. */
int cfs_http_multi_new(struct cfs_http *h, struct cfs_http_multi **out);
/* Ends every request still in the set (as cfs_http_multi_drop) and frees it. */
void cfs_http_multi_free(struct cfs_http_multi *m);
/* Starts r (which must stay valid until it finishes or is dropped).  Returns
 * 0, -ENOSPC when the set is full, CFS_E_AUTH for an unusable token, or
 * -ENOMEM. */
int cfs_http_multi_add(struct cfs_http_multi *m, struct cfs_http_req *r);
/* Moves the transfers along, waiting up to wait_ms for something to happen.
 * Returns a request that has finished, with what cfs_http_perform would have
 * returned for it in *rc (it has left the set), or NULL when none has yet. */
struct cfs_http_req *cfs_http_multi_run(struct cfs_http_multi *m, long wait_ms, int *rc);
/* Ends r now if it is still in the set (its connection is closed when the
 * reply was not over); its response fields keep what had arrived. */
void cfs_http_multi_drop(struct cfs_http_multi *m, struct cfs_http_req *r);
/* The time cfs_http uses for t_* (CLOCK_MONOTONIC, microseconds). */
int64_t cfs_http_now_us(void);

#endif
