/* drive: the Drive API v3 calls colabfs makes, with retries.
 *
 * Builds URLs (api_url + "/drive/v3/..."), attaches the bearer token, runs
 * each call through the retry policy (retry.h) within a deadline, refreshes
 * the token once on 401, and validates every reply before handing it out: a
 * media reply must carry exactly the Content-Range and length that was asked
 * for, a JSON reply must parse with the fields we need.  Anything else is a
 * transient fault and is retried, never returned as data.  A media body cut
 * short (reset, stall) keeps the bytes that arrived and continues from the
 * next byte with a new Range.  Every request first takes a pacing token;
 * a rate-limit refusal slows the pacer down (AIMD, pace.h).
 *
 * Tails (hedge.h): a media request whose reply is late, by the latencies
 * this mount has seen, is hedged when the budget allows: a second request
 * for the bytes not yet delivered (pacing token, bearer, the same checks of
 * status, Content-Range and length) races the first; the first of the two
 * to deliver a byte wins, the other is closed at once, so the sink never
 * sees bytes from both.  Bytes the late request delivered before it stalled
 * are kept.  A hedge that fails before either answered ends the try with
 * its failure (the retry policy takes over, from the next byte); a late
 * request that fails leaves the hedge to carry on alone.
 *
 * Shared drives (drive-api-v3.md §1.9): every files.get/list, media, export,
 * revision and changes call carries supportsAllDrives=true, lists and changes
 * includeItemsFromAllDrives=true.  When the mount is a shared drive
 * (opts.drive_id) or a folder inside one (opts.root_id; its driveId is learnt
 * from the files.get of that folder, or fetched once when a listing comes
 * first), folder listings use corpora=drive&driveId=D and the Changes API
 * follows that drive's feed (driveId=D).
 *
 * "Shared with me": the reserved id CFS_DRIVE_SHARED_WITH_ME names a virtual
 * folder.  cfs_drive_get answers it without a call (a folder named "Shared
 * with me"); cfs_drive_list lists it with q "sharedWithMe = true and trashed
 * = false" (every page); with opts.shared_with_me a change to an item whose
 * parent the user cannot see is reported with that folder as its parent, so
 * the listing is refreshed.
 *
 * Returns 0, -ENOENT (404), -EACCES (no permission), -ESTALE (the file's size
 * changed under us), or a CFS_E_* class once retries are exhausted.  All
 * functions are thread-safe. */
#ifndef CFS_DRIVE_H
#define CFS_DRIVE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "json.h"
#include "pace.h"
#include "retry.h"

struct cfs_http;
struct cfs_auth;
struct cfs_drive;

struct cfs_drive_opts {
	const char *api_url;       /* e.g. https://www.googleapis.com */
	long io_timeout_ms;        /* how long one call may keep retrying */
	struct cfs_retry_policy retry;
	double api_rate, api_burst; /* pacing (pace.h): the ceiling, 0: default (200), < 0: off;
				     * burst, 0: default (half a second's worth, at least 4) */
	double api_units;          /* > 0: pace by Drive's quota units instead, this many a
				    * minute (cfs_wire_quota_units); api_burst is then in units
				    * (0: half a second's worth, at least twice
				    * CFS_WIRE_UNITS_MAX) and api_rate unused */
	const char *drive_id;      /* a shared drive mounted whole (--drive-id), or NULL */
	const char *root_id;       /* the mounted folder (--root), or NULL: may be in a shared drive;
				    * a path (starting with "/"): My Drive until cfs_drive_set_root */
	int shared_with_me;        /* the mount's root is CFS_DRIVE_SHARED_WITH_ME */
	int hedge_percent;         /* hedges per 100 media requests (hedge.h); 0: default, < 0: off */
	double create_rate, create_burst; /* creations and upload starts (drive_write.h): their own
				     * pacer's ceiling, 0: default (CFS_DRIVE_CREATE_RATE), < 0:
				     * off; burst, 0: default (4) */
};

/* Drive throttles creations far below reads: about 2-3 files/s sustained
 * (drive-api-v3.md §6).  Their pacer starts at CFS_DRIVE_CREATE_START (or
 * the ceiling when lower), grows by 5% of the ceiling a second while Drive
 * accepts, and is cut when refusals are a pattern over 4 s (2 or more), as
 * pace.h says; CFS_DRIVE_CREATE_RATE is its default ceiling (--create-rate). */
#define CFS_DRIVE_CREATE_RATE 10.0
#define CFS_DRIVE_CREATE_START 3.0
#define CFS_DRIVE_CREATE_WINDOW_US 4000000
#define CFS_DRIVE_CREATE_MIN_REFUSED 2

/* The id of the virtual "Shared with me" folder: never a Drive id (those are
 * [A-Za-z0-9_-]). */
#define CFS_DRIVE_SHARED_WITH_ME ":sharedWithMe"

/* Counters, updated atomically; read with cfs_drive_stats. */
struct cfs_drive_stats {
	uint64_t requests, retries, errors, bytes_media, bytes_json;
	uint64_t connects;         /* connections opened (http.h) */
	uint64_t units;            /* Drive's quota units the requests cost (wire.h), either pacing */
	uint64_t resumed;          /* downloads continued after a cut body */
	uint64_t paced;            /* calls that waited for the pacer */
	uint64_t rate_limited;     /* replies refusing a call for the rate (403 rate reasons, 429) */
	uint64_t rate_cuts;        /* pacer rate decreases they caused */
	double api_rate;           /* the pacer's rate now (calls, or units, per second) */
	double api_burst;          /* its burst (calls, or units) */
	int api_units;             /* 1: the pacer counts quota units */
	uint64_t stalls;           /* media replies found late (hedge.h) */
	uint64_t hedges, hedge_wins; /* second requests sent for them; those that answered first */
	int64_t ttfb_p95_us, pause_p95_us; /* learnt latencies; -1 while warming up */
	/* calls that failed for good, by class */
	uint64_t err_net, err_server, err_rate, err_proto, err_auth, err_quota, err_notfound,
		err_access;
	/* writes (drive_write.h) */
	double create_rate;        /* the creation pacer's rate now */
	uint64_t create_limited;   /* rate-limit refusals of creations and upload starts */
	uint64_t uploads;          /* uploads finished and verified */
	uint64_t upload_bytes;     /* bytes sent in upload bodies */
	uint64_t upload_retries;   /* chunks resumed after a failure, sessions restarted */
};

int cfs_drive_new(struct cfs_http *http, struct cfs_auth *auth, const struct cfs_drive_opts *o,
		  struct cfs_drive **out);
void cfs_drive_free(struct cfs_drive *d);
void cfs_drive_stats(struct cfs_drive *d, struct cfs_drive_stats *out);
/* The mount is going away: transfers in flight stop, retries stop waiting,
 * and every call from now on fails at once with -ECANCELED. */
void cfs_drive_cancel(struct cfs_drive *d);
/* Changes how long a call started from now on may keep retrying (the mount
 * gives its first call a short one); returns the old value. */
long cfs_drive_set_io_timeout(struct cfs_drive *d, long ms);

/* files.get.  id may be "root" or CFS_DRIVE_SHARED_WITH_ME.  m must be
 * cleaned up by the caller. */
int cfs_drive_get(struct cfs_drive *d, const char *id, struct cfs_file_meta *m);
/* The mounted folder's id, once a --root path names it: listings follow the
 * shared drive it is in (a shortcut may lead into one), learnt as for
 * opts.root_id.  0 or -ENOMEM. */
int cfs_drive_set_root(struct cfs_drive *d, const char *id);

/* files.list of a folder's non-trashed children (for CFS_DRIVE_SHARED_WITH_ME:
 * the items shared with the user), every page.  cb is called
 * for each child; cb(NULL, arg) means "the listing restarts: forget what you
 * got" (Drive rejected a page token).  A non-zero return from cb stops. */
typedef int (*cfs_drive_list_cb)(const struct cfs_file_meta *m, void *arg);
int cfs_drive_list(struct cfs_drive *d, const char *parent_id, cfs_drive_list_cb cb, void *arg);
/* The same, of the children named name only (q's "name = '...'", which Drive
 * matches without regard to case: cb sees every spelling and picks). */
int cfs_drive_list_named(struct cfs_drive *d, const char *parent_id, const char *name,
			 cfs_drive_list_cb cb, void *arg);

/* Range download of [off, off+len) of a blob of the given size, streaming:
 * bytes are handed to sink(arg, at, p, n) as they arrive, at being their
 * offset in the file, and only from a reply whose status and Content-Range
 * say they are the bytes asked for.  Reads past the end are clipped; *got is
 * the number of bytes delivered; a 0-byte file or an offset at/after the end
 * makes no request.  After a cut the download resumes at the next byte; a
 * retry from an earlier offset may hand bytes again (at tells).  A negative
 * return from sink aborts (and retries) the request; a positive one ends it
 * early as a success (the sink has all it wants: the reader's job was cut
 * short; *got counts every byte handed over).  No buffer of len bytes is
 * needed.
 * With rev (a headRevisionId) the bytes come from that revision
 * (files/ID/revisions/REV), so consecutive reads can never mix two
 * revisions: -ESTALE when it is no longer the file's content.  Where Drive
 * does not let this user read revisions, the current content is read.
 * prio (CFS_PACE_URGENT for a reader waiting, CFS_PACE_BACKGROUND for
 * read-ahead) is the request's class in the pacer (pace.h). */
typedef int (*cfs_drive_sink_fn)(void *arg, int64_t at, const char *p, size_t n);
int cfs_drive_read_sink(struct cfs_drive *d, const char *id, const char *rev, int64_t size,
			int64_t off, size_t len, cfs_drive_sink_fn sink, void *arg, size_t *got,
			int prio);

/* The shared drive the mount is in ("" for My Drive and Shared with me) into
 * out (CFS_ID_MAX bytes); may make one files.get of the root folder. */
int cfs_drive_corpus(struct cfs_drive *d, char *out);

/* changes.getStartPageToken (of the mount's shared drive): a malloc'd token. */
int cfs_drive_start_token(struct cfs_drive *d, char **token);
/* changes.list from token, every page: cb per change (see json.h).  On
 * success *new_start is the token for the next poll (malloc'd). */
int cfs_drive_changes(struct cfs_drive *d, const char *token, cfs_json_change_cb cb, void *arg,
		      char **new_start);

/* files.export of a native Google file into out (at most max bytes). */
int cfs_drive_export(struct cfs_drive *d, const char *id, const char *mime, size_t max,
		     struct cfs_buf *out);

#endif
