/* wdrive: the vfs's seam to Drive's metadata and writes.
 *
 * Every call the write side of the vfs (vfs_write.c, vfs_upload.c) makes to
 * Drive, and its clocks, go through one table, and so do the namespace's
 * listings and lookups (vfs_list.c, vfs_file.c), as the reader's downloads go
 * through cfs_reader_opts: the real client by default (cfs_wdrive_real),
 * a scripted fake in the unit tests (tests/unit/wfake.h), so upload order,
 * retries, conflicts, crash ordering and replay are tested without a
 * network and with a clock the test moves.  Each call has the meaning and
 * the returns of its drive_write.h / drive.h counterpart. */
#ifndef CFS_WDRIVE_H
#define CFS_WDRIVE_H

#include <stdint.h>

#include "drive.h"
#include "drive_write.h"
#include "json.h"

struct cfs_wdrive {
	void *arg;
	int (*generate_ids)(void *arg, int n, char (*ids)[CFS_ID_MAX]);
	int (*create)(void *arg, const struct cfs_json_meta_in *m, struct cfs_file_meta *out);
	/* cfs_drive_upload_all: multipart or resumable, resume from
	 * u->resume_uri, status queries, progress, verified size and md5 */
	int (*upload)(void *arg, const struct cfs_drive_upload *u, struct cfs_file_meta *out);
	int (*update_meta)(void *arg, const char *id, const char *name, const char *add_parent,
			   const char *remove_parent, int trashed, int64_t mtime_ns,
			   struct cfs_file_meta *out);
	int (*remove)(void *arg, const char *id); /* files.delete */
	int (*get)(void *arg, const char *id, struct cfs_file_meta *out);
	int (*list)(void *arg, const char *parent_id, cfs_drive_list_cb cb, void *cb_arg);
	int (*about)(void *arg, int64_t *limit, int64_t *usage);
	/* whether a stored session URI may be resumed (cfs_drive_session_ok) */
	int (*session_ok)(void *arg, const char *uri);
	int64_t (*now_ms)(void *arg);  /* monotonic */
	int64_t (*wall_ns)(void *arg); /* modification times */
};

/* The table of the real client d (the clocks: CLOCK_MONOTONIC, REALTIME). */
void cfs_wdrive_real(struct cfs_drive *d, struct cfs_wdrive *out);

#endif
