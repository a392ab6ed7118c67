/* drive_int: what drive.c and drive_media.c share (private to them; see
 * drive.h).  The drive object, its counters, the call runner every request
 * goes through (auth, pacing, retries, validation) and the media read
 * context. */
#ifndef CFS_DRIVE_INT_H
#define CFS_DRIVE_INT_H

#include <pthread.h>
#include <stdint.h>

#include "drive.h"
#include "hedge.h"
#include "http.h"

#define CFS_DRIVE_UNPINNED_MAX 64

struct cfs_drive {
	struct cfs_http *http;
	struct cfs_auth *auth;
	char *api;
	long io_timeout_ms;
	struct cfs_retry_policy retry;
	struct cfs_pace pace;
	int units;                 /* the pacer counts quota units (opts.api_units) */
	int units_hinted;          /* the --api-units hint was logged (once a mount) */
	struct cfs_pace create_pace; /* creations and uploads (DESIGN.md §3), besides pace */
	pthread_mutex_t hedge_lock;
	struct cfs_hedge hedge;
	/* files whose revision downloads Drive refuses (403, or 404 for the
	 * head revision): read by current content; the oldest entry goes */
	pthread_mutex_t unpin_lock;
	char unpinned[CFS_DRIVE_UNPINNED_MAX][CFS_ID_MAX];
	unsigned nunpinned;
	pthread_mutex_t wake_lock; /* retries sleeping in backoff_wait */
	pthread_cond_t wake;
	uint64_t successes;
	int sleepers;
	int cancelled;
	struct cfs_drive_stats st;
	/* where the mount is: see drive.h */
	char *root_id;             /* --root whose shared drive is not known yet */
	int shared_with_me;
	pthread_mutex_t corpus_lock;
	int corpus_known;
	char corpus[CFS_ID_MAX];   /* shared drive id, "" = the user's corpus */
};

#define COUNT(d, f, n) __atomic_add_fetch(&(d)->st.f, (n), __ATOMIC_RELAXED)

/* A reply that arrived with a 2xx status is checked by this before it counts
 * as success; CFS_E_PROTO from it means "retry", other codes are final. */
typedef int (*validate_fn)(struct cfs_http_req *r, void *ctx);
/* After a failed attempt: keeps what arrived and points r at the rest.
 * Returns 1 if the attempt made progress (the next try starts afresh). */
typedef int (*resume_fn)(struct cfs_http_req *r, void *ctx);

/* Or'd into prio: the call creates a file or starts an upload, and takes a
 * token of the creation budget (create_pace) before the API one; its replies
 * (rate refusals included) steer that budget only. */
#define CFS_DRIVE_CREATE 0x100

/* Runs r through auth, pacing (class prio), retries and validation; what
 * names the call in logs.  0 or the final status (see drive.h).  A 308 to a
 * PUT with a validator is handed to the validator (upload sessions). */
int cfs_drive_call(struct cfs_drive *d, struct cfs_http_req *r, const char *what, validate_fn v,
		   resume_fn resume, void *ctx, int prio);
/* Appends api_url + "/drive/v3/files[/ID]" + rest to u. */
int cfs_drive_url_files(struct cfs_drive *d, struct cfs_buf *u, const char *id, const char *rest);
/* The same below another path of the API ("/upload/drive/v3/files"). */
int cfs_drive_url_at(struct cfs_drive *d, struct cfs_buf *u, const char *path, const char *id,
		     const char *rest);
int64_t cfs_drive_now_ms(void);
/* The validator of a reply that is one file resource (into m). */
struct cfs_drive_json_ctx {
	struct cfs_drive *d;
	struct cfs_file_meta *m;
};
int cfs_drive_validate_meta(struct cfs_http_req *r, void *ctx);

/* drive_media.c: the sink of every media request (what marks one as media)
 * and one try of it, raced by a hedge when late. */
struct read_ctx {
	struct cfs_drive *d;
	int64_t size, off; /* the whole request: [off, off+len) */
	size_t len;
	size_t done;       /* bytes already delivered by earlier attempts */
	const char *id;
	cfs_drive_sink_fn sink;
	void *arg;
	int racing;        /* a hedge is out: the first request to deliver wins */
	struct cfs_http_req *won;
};
int cfs_drive_media_bytes(void *arg, struct cfs_http_req *r, const char *p, size_t n);
int cfs_drive_fetch_media(struct cfs_drive *d, struct cfs_http_req *r);

#endif
