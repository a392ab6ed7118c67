/* wfake: a scripted Drive behind the write path's seam (wdrive.h) and the
 * reader's (reader.h), for the write-path unit tests (test_wpath.c,
 * test_wmodel.c).
 *
 * It keeps files (id, name, parent, bytes, a revision bumped by every new
 * content, trashed) in memory; uploads read the bytes through the caller's
 * read callback as Drive would receive them; uploads larger than
 * WFAKE_RESUMABLE go through sessions (URIs under WFAKE_API) that report
 * progress every 256 KiB and can be cut (cut_after_chunks) and resumed.
 * Faults: a queue of statuses the next calls of a kind return.  Clocks: a
 * monotonic ms and a wall ns the test moves.  Counters of every call.
 * Thread-safe (the uploaders call it from their threads). */
#ifndef CFS_WFAKE_H
#define CFS_WFAKE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "reader.h"
#include "wdrive.h"

#define WFAKE_API "http://fake.test"
#define WFAKE_FILES 512
#define WFAKE_FAULTS 64
#define WFAKE_RESUMABLE (1 << 20)

enum wfake_kind { WF_UPLOAD, WF_CREATE, WF_UPDATE, WF_REMOVE, WF_GET, WF_IDS, WF_LIST, WF_KINDS };

struct wfake_file {
	char id[CFS_ID_MAX];
	char name[1024];
	char parent[CFS_ID_MAX];
	int folder, trashed;
	char *data;
	size_t len;
	int rev; /* headRevisionId "rN" */
};

struct wfake_session {
	char uri[128];
	char id[CFS_ID_MAX]; /* the file it writes (new: the reserved id) */
	int64_t confirmed, total;
};

struct wfake {
	pthread_mutex_t lock;
	struct wfake_file f[WFAKE_FILES];
	int n;
	struct wfake_session s[64];
	int ns;
	int next_id;
	int64_t now_ms, wall_ns;
	int faults[WF_KINDS][WFAKE_FAULTS]; /* statuses for the next calls (0: pass) */
	int nfaults[WF_KINDS];
	int calls[WF_KINDS];
	int cut_after_chunks; /* > 0: a resumable upload fails (CFS_E_NET) after these */
	int resumed;          /* uploads that went on from a stored session */
	int foreign_resumes;  /* resume URIs not under WFAKE_API that reached us */
	pthread_cond_t cond;
	int hold;             /* uploads wait at their start while set (wfake_hold) */
	int held;             /* uploads waiting so */
};

void wfake_init(struct wfake *w);
void wfake_cleanup(struct wfake *w);
/* The seam table and the reader fetch over w. */
void wfake_table(struct wfake *w, struct cfs_wdrive *out);
int wfake_fetch(void *io, const char *id, const char *rev, int64_t size, int64_t off, size_t len,
		cfs_drive_sink_fn sink, void *arg, size_t *got, int prio);
/* Adds a file (folder: data NULL) as if made elsewhere; returns it. */
struct wfake_file *wfake_add(struct wfake *w, const char *id, const char *parent,
			     const char *name, const void *data, size_t len, int folder);
/* Another writer's new content for id (a new revision). */
void wfake_change(struct wfake *w, const char *id, const void *data, size_t len);
/* The live (not trashed) file named name in parent, or NULL (lock not held:
 * call when no upload runs, or copy what you need at once). */
struct wfake_file *wfake_find(struct wfake *w, const char *parent, const char *name);
struct wfake_file *wfake_get(struct wfake *w, const char *id);
/* Queues status rc for the next call of kind k. */
void wfake_fail(struct wfake *w, enum wfake_kind k, int rc);
int wfake_calls(struct wfake *w, enum wfake_kind k);
void wfake_advance(struct wfake *w, int64_t ms);
/* on: uploads that start from now wait (before reading a byte) until it is
 * called with 0.  wfake_held: how many wait now. */
void wfake_hold(struct wfake *w, int on);
int wfake_held(struct wfake *w);

#endif
