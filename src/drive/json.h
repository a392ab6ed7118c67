/* json: every JSON document colabfs reads, parsed in one place (owns jansson;
 * json.c parses Drive's documents, json_cmd.c those of the command line).
 *
 * Drive file resources, file lists, error bodies, OAuth token replies and
 * credential files.  Parsers validate what they need: a required field that is
 * missing or has the wrong type makes the whole document CFS_E_PROTO, so a
 * malformed reply never turns into metadata.  int64 fields arrive as JSON
 * strings (Drive's convention); plain numbers are accepted too. */
#ifndef CFS_JSON_H
#define CFS_JSON_H

#include <stddef.h>
#include <stdint.h>

#define CFS_ID_MAX 128

struct cfs_file_meta {
	char id[CFS_ID_MAX];
	char *name;              /* malloc'd */
	char mime[128];
	int64_t size;            /* -1 if absent (folders, native files) */
	char md5[33];            /* lowercase hex or "" */
	char sha256[65];
	char rev[CFS_ID_MAX];    /* headRevisionId or "" */
	int64_t version;         /* -1 if absent */
	int64_t mtime_ns;        /* modifiedTime, 0 if absent */
	int64_t ctime_ns;        /* createdTime, 0 if absent */
	char parent[CFS_ID_MAX]; /* first parent or "" */
	char drive_id[CFS_ID_MAX]; /* driveId: the shared drive it is in, or "" */
	int trashed;
	int can_download;        /* capabilities/canDownload, default 1 */
	int can_edit;            /* capabilities/canEdit, default 1 */
	int can_add_children;    /* capabilities/canAddChildren (folders), default 1 */
	char target_id[CFS_ID_MAX];   /* shortcutDetails */
	char target_mime[128];
};

#define CFS_FOLDER_MIME "application/vnd.google-apps.folder"
#define CFS_SHORTCUT_MIME "application/vnd.google-apps.shortcut"
#define CFS_GAPPS_PREFIX "application/vnd.google-apps."

/* The fields= selection matching what these parsers read. */
#define CFS_JSON_FILE_FIELDS                                                     \
	"id,name,mimeType,size,md5Checksum,sha256Checksum,headRevisionId,version," \
	"modifiedTime,createdTime,parents,trashed,capabilities/canDownload," \
	"capabilities/canEdit,capabilities/canAddChildren,shortcutDetails," \
	"driveId"

void cfs_file_meta_cleanup(struct cfs_file_meta *m);

/* One file resource.  Returns 0 or CFS_E_PROTO (id or name or mimeType
 * missing, a field of the wrong type, an id too long). */
int cfs_json_parse_file(const char *txt, size_t len, struct cfs_file_meta *m);

/* A FileList page: calls cb for each file (m is cleaned up after cb returns;
 * a non-zero return from cb stops and is returned).  *next gets a malloc'd
 * nextPageToken or NULL at the end.  Returns 0, CFS_E_PROTO or cb's status. */
typedef int (*cfs_json_file_cb)(const struct cfs_file_meta *m, void *arg);
int cfs_json_parse_file_list(const char *txt, size_t len, cfs_json_file_cb cb, void *arg,
			     char **next);

/* A changes.list page: calls cb(file_id, removed, file or NULL) for each
 * change (file absent when removed).  *next gets nextPageToken (more now) or
 * NULL, *new_start newStartPageToken (caught up) or NULL; exactly one is
 * set on success.  Returns 0, CFS_E_PROTO or cb's status. */
typedef int (*cfs_json_change_cb)(const char *file_id, int removed,
				  const struct cfs_file_meta *file, void *arg);
int cfs_json_parse_changes(const char *txt, size_t len, cfs_json_change_cb cb, void *arg,
			   char **next, char **new_start);
/* {"startPageToken": "..."}: a malloc'd copy, or CFS_E_PROTO. */
int cfs_json_parse_start_token(const char *txt, size_t len, char **token);

/* Drive's error body: copies errors[0].reason and error.message (truncated).
 * Returns 0, or CFS_E_PROTO if it is not that shape (reason and message "" then). */
int cfs_json_parse_error(const char *txt, size_t len, char *reason, size_t rcap,
			 char *msg, size_t mcap);

/* OAuth token endpoint reply: access_token (malloc'd) and expires_in (number
 * or string).  Also understands {"error": ..., "error_description": ...}: then
 * returns CFS_E_AUTH and copies the error code (not the description, which
 * may echo input) into err.  Returns 0, CFS_E_AUTH or CFS_E_PROTO. */
int cfs_json_parse_token(const char *txt, size_t len, char **token, int64_t *expires_in,
			 char *err, size_t ecap);

/* The "scope" field of an OAuth token reply or a tokeninfo answer (space-
 * separated scope URLs): a malloc'd copy in *scope, or NULL when the object
 * has none.  Returns 0, CFS_E_PROTO (not a JSON object, or a scope that is not
 * a non-empty string) or -ENOMEM. */
int cfs_json_parse_scope(const char *txt, size_t len, char **scope);

enum cfs_cred_type { CFS_CRED_AUTHORIZED_USER = 1, CFS_CRED_SERVICE_ACCOUNT };

struct cfs_cred {
	enum cfs_cred_type type;
	char *client_id, *client_secret, *refresh_token; /* authorized_user */
	char *client_email, *private_key, *private_key_id; /* service_account */
	char *token_uri; /* optional in the file */
};

/* An ADC credentials file.  Returns 0, or CFS_E_PROTO with a short reason in
 * why (never a secret). */
int cfs_json_parse_credentials(const char *txt, size_t len, struct cfs_cred *c, char *why,
			       size_t wcap);
void cfs_cred_cleanup(struct cfs_cred *c);

/* RFC 3339 time ("2024-05-01T12:34:56.789Z", offsets allowed) to ns since the
 * epoch.  Returns 0 or -EINVAL. */
int cfs_json_parse_time(const char *s, int64_t *ns);

/* Builds the JSON text of a JWT header (kid may be NULL) and claim set for the
 * OAuth jwt-bearer grant.  Returns malloc'd strings in *hdr and *claims, or
 * -ENOMEM. */
int cfs_json_jwt_parts(const char *kid, const char *iss, const char *scope, const char *aud,
		       int64_t iat, int64_t exp, char **hdr, char **claims);

/* A flat object of integers ({"a":1,"b":2}): calls cb(name, value) in
 * document order.  Returns 0, CFS_E_PROTO, or cb's non-zero status. */
typedef int (*cfs_json_int_cb)(const char *name, int64_t v, void *arg);
int cfs_json_flat_ints(const char *txt, size_t len, cfs_json_int_cb cb, void *arg);

/* Writes (drive-api-v3.md §6): the JSON metadata of a create or an update.
 * A NULL string, mtime_ns 0 or trashed -1 leaves that field out; parent
 * becomes "parents":[parent]; mtime_ns is sent as modifiedTime (RFC 3339,
 * milliseconds). */
struct cfs_json_meta_in {
	const char *id;     /* a reserved id (creates only) */
	const char *name;
	const char *mime;
	const char *parent;
	int64_t mtime_ns;
	int trashed;        /* -1, 0, 1 */
};
/* A malloc'd JSON text in *txt.  Returns 0, -EINVAL (a string that is not
 * UTF-8, a time before the epoch) or -ENOMEM. */
int cfs_json_write_meta(const struct cfs_json_meta_in *m, char **txt);
/* files.generateIds reply: the first n ids into ids (each checked as a Drive
 * id), how many in *got.  Returns 0 or CFS_E_PROTO. */
int cfs_json_parse_ids(const char *txt, size_t len, char (*ids)[CFS_ID_MAX], int n, int *got);
/* about.get with fields=storageQuota,user(emailAddress): limit (-1:
 * unlimited, the field is absent) and usage in bytes; the account's address
 * into account (acap bytes; "" when absent or unusable) unless account is
 * NULL.  Returns 0 or CFS_E_PROTO. */
int cfs_json_parse_quota(const char *txt, size_t len, int64_t *limit, int64_t *usage,
			 char *account, size_t acap);

/* `colabfs sync`: the reply to user.colabfs.sync (ctlname.h), one JSON object
 *   {"files":N,"bytes":N,"bytes_left":N,"uploading":N,
 *    "waiting":[{"path":"rel/path","error":"why"},...],
 *    "failed":[{"path":"rel/path","error":"why"},...]}
 * about the entries at or below the path asked about that are not yet
 * durable in Drive: files counts them, bytes is their total size,
 * bytes_left the bytes Drive has not confirmed yet, uploading how many are
 * being sent now.  waiting lists pending entries whose last attempt hit a
 * transient condition (network down, rate limit) and that retry by
 * themselves; failed lists those that cannot be uploaded without the user
 * (Drive storage full, no write permission, file too large).  Each list
 * holds at most CFS_SYNC_LIST_MAX entries; path is relative to the mount's
 * root, error a short sentence for a person.  The reply is a getxattr
 * value, so it is at most CFS_SYNC_REPLY_MAX bytes: the writer drops list
 * entries to fit, the last waiting ones first, and never the first failed
 * one (a reply with a failed entry is a failure, whatever else it says). */
#define CFS_SYNC_LIST_MAX 20
#define CFS_SYNC_REPLY_MAX 65536 /* XATTR_SIZE_MAX: the kernel's cap on a value */

struct cfs_json_sync_entry {
	char *path;  /* malloc'd */
	char *error; /* malloc'd */
};

struct cfs_json_sync {
	int64_t files, bytes, bytes_left, uploading;
	struct cfs_json_sync_entry waiting[CFS_SYNC_LIST_MAX], failed[CFS_SYNC_LIST_MAX];
	int n_waiting, n_failed;
};

/* Parses a sync reply into *s (cleaned up first thing, so a failed parse
 * leaves it empty).  The four numbers are required integers >= 0 and both
 * lists are required arrays of objects with a non-empty "path" and an
 * "error" string (no NUL in either); entries past CFS_SYNC_LIST_MAX are
 * ignored, unknown keys too.  Returns 0, CFS_E_PROTO or -ENOMEM. */
int cfs_json_parse_sync(const char *txt, size_t len, struct cfs_json_sync *s);
/* Frees the strings; *s is then empty.  Safe on a zeroed struct. */
void cfs_json_sync_cleanup(struct cfs_json_sync *s);
/* The daemon's side: a malloc'd reply of at most max bytes (with its NUL)
 * in *txt.  Bytes of a path or error that are not UTF-8 become '?'.
 * Returns 0, -ENOSPC (max cannot hold the numbers and one failed entry)
 * or -ENOMEM. */
int cfs_json_write_sync(const struct cfs_json_sync *s, size_t max, char **txt);

/* `colabfs doctor --json`: {"ok": ok, "checks": [{"name", "status", "detail",
 * "fix"}...]} into *txt (malloc'd), fix null where NULL.  Text that is not
 * UTF-8 makes it fail (-ENOMEM, as jansson does not say why). */
struct cfs_json_check {
	const char *name, *status, *detail, *fix;
};
int cfs_json_write_checks(int ok, const struct cfs_json_check *c, size_t n, char **txt);

/* `colabfs sync --json` and `colabfs warm --json` print one JSON object a
 * line: {"event":EVENT, then the fields in order} (sync_cmd.h, warm.h say
 * which).  A string field may hold any bytes: those that are not UTF-8
 * become '?' (a file name is any bytes but '/' and NUL), and NULL is null.
 * The line, compact and without a newline, is malloc'd into *txt.  Returns
 * 0 or -ENOMEM. */
enum cfs_json_kind {
	CFS_JSON_INT,    /* i */
	CFS_JSON_BOOL,   /* i: 0 false, else true */
	CFS_JSON_STR,    /* s */
	CFS_JSON_FAILED, /* the failed entries of st[0..n) as [{"path":..,"error":..},...] */
};
struct cfs_json_field {
	const char *key;
	enum cfs_json_kind kind;
	int64_t i;
	const char *s;
	const struct cfs_json_sync *st;
	size_t n;
};
int cfs_json_write_event(const char *event, const struct cfs_json_field *f, size_t n, char **txt);

#endif
