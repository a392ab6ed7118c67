/* drive_write: the Drive API v3 calls that change Drive (drive-api-v3.md §6):
 * reserving ids, creating folders and empty files, multipart and resumable
 * uploads (new files and new content of existing ones), metadata updates
 * (rename, move, trash, modifiedTime), delete, and the storage quota.
 *
 * Policy.  Every call goes through the same runner as the reads (drive_int.h:
 * auth, the API pacer, retries with backoff within the io timeout, replies
 * validated before use).  Creations (files.create, and multipart uploads and
 * resumable session starts that make a new file; new content of an existing
 * file is not a creation) also take a token of
 * a second, much lower budget (DESIGN.md §3; cfs_drive_opts.create_rate,
 * about 2/s with a burst of 4): Drive throttles creations far below reads,
 * and a refusal for the rate (403 userRateLimitExceeded/rateLimitExceeded,
 * 429) slows that budget only and is retried with backoff: writes queue,
 * they do not fail.
 *
 * Idempotence.  A create carries an id reserved with generateIds; when a
 * retry of it (the answer to the first try was lost) gets 409, the id is
 * looked up and, when it is the item asked for (name, type, parent; size and
 * md5 for uploads), that is the answer.  Resumable uploads send chunks of a
 * multiple of 256 KiB (but the last); after a transient failure of a chunk
 * the session is asked what it persisted (a status query) and the chunk goes
 * on from there; a 308 may confirm less than was sent, and the caller
 * resends from the confirmed offset.  cfs_drive_upload_all does all of that
 * from a read callback, restarts the session when it expired (404), gives up
 * when no byte was confirmed for the io timeout, and compares the size and
 * md5Checksum Drive reports with an md5 of the bytes sent: a mismatch is
 * CFS_E_PROTO, never a success.
 *
 * Returns (every function): 0, -EINVAL (bad arguments), -ENOENT (no such
 * file or parent; for chunks and status queries: the session expired),
 * -EEXIST (a reserved id in use by another item), -ENOSPC (storage quota
 * full), -EACCES (read-only file or folder, a token without the write
 * scope), -EFBIG (413), -EIO (any other permanent refusal: 400, other 403
 * reasons; the reason is logged), -ENOMEM, -ECANCELED, or a CFS_E_* class
 * once retries are exhausted.  A struct cfs_file_meta *out is filled on
 * success (the caller cleans it up) and zeroed otherwise.  Thread-safe. */
#ifndef CFS_DRIVE_WRITE_H
#define CFS_DRIVE_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "drive.h"
#include "json.h"

#define CFS_DRIVE_IDS_MAX 1000                 /* one generateIds call */
#define CFS_DRIVE_MULTIPART_MAX (5 * 1024 * 1024) /* larger: resumable (§6: ≤ 5 MB) */
#define CFS_DRIVE_CHUNK_GRANULE (256 * 1024)
#define CFS_DRIVE_CHUNK (8 * 1024 * 1024)      /* default resumable chunk */

/* files.generateIds: n (1..CFS_DRIVE_IDS_MAX) ids into ids. */
int cfs_drive_generate_ids(struct cfs_drive *d, int n, char (*ids)[CFS_ID_MAX]);

/* files.create without content: a folder (mime CFS_FOLDER_MIME) or an empty
 * file.  m->name is required; m->id (reserved) makes it idempotent. */
int cfs_drive_create(struct cfs_drive *d, const struct cfs_json_meta_in *m,
		     struct cfs_file_meta *out);

/* One multipart upload of len bytes: a new file (id NULL; m required) or
 * new content of file id (m NULL or the metadata to change with it).  The
 * reply's size and md5 are checked against data. */
int cfs_drive_upload_multipart(struct cfs_drive *d, const struct cfs_json_meta_in *m,
			       const char *id, const void *data, size_t len,
			       struct cfs_file_meta *out);

/* Starts a resumable upload of total bytes (a new file, or new content of
 * id, as above): *uri gets the session URI (malloc'd; it is the session's
 * credential: never log it).  The URI must be below the API URL. */
int cfs_drive_upload_start(struct cfs_drive *d, const struct cfs_json_meta_in *m,
			   const char *id, int64_t total, char **uri);

/* Sends [off, off+len) of an upload of total bytes (len a multiple of
 * CFS_DRIVE_CHUNK_GRANULE unless off+len == total).  *confirmed gets the
 * offset Drive persisted (may be less than off+len: resend from there); when
 * it is total the upload is finished and out holds the file (not yet
 * checked against the bytes: cfs_drive_upload_all does). */
int cfs_drive_upload_chunk(struct cfs_drive *d, const char *uri, int64_t off, const void *data,
			   size_t len, int64_t total, int64_t *confirmed,
			   struct cfs_file_meta *out);

/* Whether uri may be a session of this client: below its API URL (where
 * the bearer token may go).  A stored session that is not is never used. */
int cfs_drive_session_ok(const struct cfs_drive *d, const char *uri);

/* Status query of a session: *confirmed as above (out filled when done). */
int cfs_drive_upload_status(struct cfs_drive *d, const char *uri, int64_t total,
			    int64_t *confirmed, struct cfs_file_meta *out);

/* Reads exactly len bytes at off of the content being uploaded (the same
 * bytes every time it is asked).  Returns 0 or a negative status. */
typedef int (*cfs_drive_read_fn)(void *arg, int64_t off, void *buf, size_t len);

struct cfs_drive_upload {
	const struct cfs_json_meta_in *meta; /* a new file; or NULL with id */
	const char *id;                      /* new content of this file, or NULL */
	int64_t total;
	size_t chunk;          /* resumable chunk; 0: CFS_DRIVE_CHUNK; rounded down to 256 KiB */
	int64_t multipart_max; /* 0: CFS_DRIVE_MULTIPART_MAX; < 0: always resumable */
	cfs_drive_read_fn read;
	void *arg;
	/* Resumable uploads only.  resume_uri (NULL or ""): a session started
	 * earlier (by a process that died, say) to go on with from what Drive
	 * says it holds; a session Drive forgot starts over.  progress (may be
	 * NULL) is called with the session URI and the offset Drive confirmed,
	 * after the start and each time it grows (not at the end), so the
	 * caller can keep them where a later process finds them. */
	const char *resume_uri;
	void (*progress)(void *arg, const char *uri, int64_t confirmed);
};

/* A whole upload, verified: multipart up to multipart_max bytes, else
 * resumable (see the policy above). */
int cfs_drive_upload_all(struct cfs_drive *d, const struct cfs_drive_upload *u,
			 struct cfs_file_meta *out);

/* files.update of metadata: name (NULL: unchanged), a move (add_parent and
 * remove_parent, NULL: none), trashed (-1: unchanged, 0, 1), mtime_ns (0:
 * unchanged).  out may be NULL. */
int cfs_drive_update_meta(struct cfs_drive *d, const char *id, const char *name,
			  const char *add_parent, const char *remove_parent, int trashed,
			  int64_t mtime_ns, struct cfs_file_meta *out);

/* files.delete: permanent, a folder's subtree too (trash: update_meta). */
int cfs_drive_delete(struct cfs_drive *d, const char *id);

/* about.storageQuota: *limit (-1: unlimited) and *usage in bytes; with
 * account non-NULL also the signed-in account's address (json.h). */
int cfs_drive_about(struct cfs_drive *d, int64_t *limit, int64_t *usage, char *account,
		    size_t acap);

#endif
