/* drive_write: Drive writes and uploads (see drive_write.h for the policy). */
#define _GNU_SOURCE /* memmem */
#include "drive_write.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "drive_int.h"
#include "err.h"
#include "log.h"
#include "wire.h"

#define JSON_MAX (1u << 20)
#define WRITE_TIMEOUT_MS 600000L /* one request (a chunk of 8 MiB on a slow link) */
#define SESSION_RESTARTS 3
#define Q_FIELDS "supportsAllDrives=true&fields=" CFS_JSON_FILE_FIELDS

/* Reasons a 403 means "no permission" for; other 403s and 400s are -EIO. */
static int write_status(struct cfs_http_req *r, int rc)
{
	static const char *const perm[] = { "insufficientFilePermissions",
					    "insufficientPermissions", "appNotAuthorizedToFile",
					    "domainPolicy", "" };
	if (rc == CFS_E_BADREQ)
		return -EIO;
	if (rc != -EACCES)
		return rc;
	char reason[64], msg[8];
	cfs_json_parse_error(r->err_body.data ? r->err_body.data : "", r->err_body.len, reason,
			     sizeof(reason), msg, sizeof(msg));
	for (size_t i = 0; i < sizeof(perm) / sizeof(perm[0]); i++)
		if (strcmp(reason, perm[i]) == 0)
			return -EACCES;
	return -EIO;
}

static int call(struct cfs_drive *d, struct cfs_http_req *r, const char *what, validate_fn v,
		resume_fn resume, void *ctx, int create)
{
	r->timeout_ms = WRITE_TIMEOUT_MS;
	int rc = cfs_drive_call(d, r, what, v, resume, ctx,
				CFS_PACE_URGENT | (create ? CFS_DRIVE_CREATE : 0));
	return write_status(r, rc);
}

/* api + "/upload/drive/v3/files[/ID]?uploadType=TYPE&" Q_FIELDS */
static int upload_url(struct cfs_drive *d, struct cfs_buf *u, const char *id, const char *type)
{
	int rc = cfs_drive_url_at(d, u, "/upload/drive/v3/files", id, "?uploadType=");
	if (!rc)
		rc = cfs_buf_append(u, type, strlen(type));
	if (!rc)
		rc = cfs_buf_append(u, "&" Q_FIELDS, strlen("&" Q_FIELDS));
	return rc;
}

static int append_param(struct cfs_buf *u, const char *name, const char *v)
{
	if (!v)
		return 0;
	int rc = cfs_buf_append(u, name, strlen(name));
	return rc ? rc : cfs_wire_urlencode(u, v);
}

/* ---- ids, creates, updates, delete, about ---------------------------------- */

struct ids_ctx {
	char (*ids)[CFS_ID_MAX];
	int n;
};

static int validate_ids(struct cfs_http_req *r, void *ctx)
{
	struct ids_ctx *c = ctx;
	int got = 0;
	int rc = cfs_json_parse_ids(r->out->data ? r->out->data : "", r->out->len, c->ids, c->n,
				    &got);
	return rc ? rc : got == c->n ? 0 : CFS_E_PROTO;
}

/* A GET or body-less request of url into body, checked by v. */
static int simple_call(struct cfs_drive *d, const char *method, const char *url,
		       const char *json, const char *what, validate_fn v, void *ctx, int create)
{
	struct cfs_buf body = { .max = JSON_MAX };
	struct cfs_http_req r;
	cfs_http_req_init(&r);
	r.method = method;
	r.url = url;
	r.out = &body;
	if (json) {
		r.body = json;
		r.body_len = strlen(json);
		r.content_type = "application/json; charset=UTF-8";
	}
	int rc = call(d, &r, what, v, NULL, ctx, create);
	cfs_http_req_cleanup(&r);
	cfs_buf_cleanup(&body);
	return rc;
}

int cfs_drive_generate_ids(struct cfs_drive *d, int n, char (*ids)[CFS_ID_MAX])
{
	if (n < 1 || n > CFS_DRIVE_IDS_MAX)
		return -EINVAL;
	struct cfs_buf url = { 0 };
	char q[80];
	snprintf(q, sizeof(q), "/generateIds?count=%d&space=drive&type=files", n);
	int rc = cfs_drive_url_files(d, &url, NULL, q);
	struct ids_ctx c = { ids, n };
	if (!rc)
		rc = simple_call(d, NULL, url.data, NULL, "files.generateIds", validate_ids, &c, 0);
	cfs_buf_cleanup(&url);
	return rc;
}

/* After a 409 on a reserved id: the item of that id is ours when it is what
 * we asked for (an earlier try made it and its answer was lost). */
static int adopt(struct cfs_drive *d, const struct cfs_json_meta_in *m, int64_t size,
		 const char *md5, struct cfs_file_meta *out)
{
	int rc = cfs_drive_get(d, m->id, out);
	if (rc)
		return rc == -ENOENT ? -EEXIST : rc;
	int same = strcmp(out->name, m->name ? m->name : "") == 0 &&
		   (!m->mime || strcmp(out->mime, m->mime) == 0) &&
		   (!m->parent || strcmp(out->parent, m->parent) == 0) &&
		   (size < 0 || out->size == size) && (!md5 || strcmp(out->md5, md5) == 0);
	if (!same) {
		CFS_ERROR("create %s: the id is in use by another item", m->id);
		cfs_file_meta_cleanup(out);
		memset(out, 0, sizeof(*out));
		return -EEXIST;
	}
	CFS_INFO("create %s: 409 on our reserved id, made by an earlier try: using it", m->id);
	return 0;
}

int cfs_drive_create(struct cfs_drive *d, const struct cfs_json_meta_in *m,
		     struct cfs_file_meta *out)
{
	memset(out, 0, sizeof(*out));
	if (!m->name)
		return -EINVAL;
	struct cfs_buf url = { 0 };
	char *json = NULL;
	int rc = cfs_json_write_meta(m, &json);
	if (!rc)
		rc = cfs_drive_url_files(d, &url, NULL, "?" Q_FIELDS);
	if (!rc) {
		struct cfs_drive_json_ctx c = { d, out };
		rc = simple_call(d, "POST", url.data, json, "files.create", cfs_drive_validate_meta,
				 &c, 1);
	}
	if (rc == -EEXIST && m->id)
		rc = adopt(d, m, -1, NULL, out);
	free(json);
	cfs_buf_cleanup(&url);
	return rc;
}

int cfs_drive_update_meta(struct cfs_drive *d, const char *id, const char *name,
			  const char *add_parent, const char *remove_parent, int trashed,
			  int64_t mtime_ns, struct cfs_file_meta *out)
{
	struct cfs_file_meta tmp;
	struct cfs_file_meta *m = out ? out : &tmp;
	memset(m, 0, sizeof(*m));
	struct cfs_json_meta_in in = { .name = name, .mtime_ns = mtime_ns, .trashed = trashed };
	struct cfs_buf url = { 0 };
	char *json = NULL, what[200];
	int rc = cfs_json_write_meta(&in, &json);
	if (!rc)
		rc = cfs_drive_url_files(d, &url, id, "?" Q_FIELDS);
	if (!rc)
		rc = append_param(&url, "&addParents=", add_parent);
	if (!rc)
		rc = append_param(&url, "&removeParents=", remove_parent);
	if (!rc) {
		struct cfs_drive_json_ctx c = { d, m };
		snprintf(what, sizeof(what), "files.update %s", id);
		rc = simple_call(d, "PATCH", url.data, json, what, cfs_drive_validate_meta, &c, 0);
	}
	if (!out)
		cfs_file_meta_cleanup(&tmp);
	free(json);
	cfs_buf_cleanup(&url);
	return rc;
}

int cfs_drive_delete(struct cfs_drive *d, const char *id)
{
	struct cfs_buf url = { 0 };
	char what[200];
	snprintf(what, sizeof(what), "files.delete %s", id);
	int rc = cfs_drive_url_files(d, &url, id, "?supportsAllDrives=true");
	if (!rc)
		rc = simple_call(d, "DELETE", url.data, NULL, what, NULL, NULL, 0);
	cfs_buf_cleanup(&url);
	return rc;
}

struct quota_ctx {
	int64_t *limit, *usage;
	char *account;
	size_t acap;
};

static int validate_quota(struct cfs_http_req *r, void *ctx)
{
	struct quota_ctx *c = ctx;
	return cfs_json_parse_quota(r->out->data ? r->out->data : "", r->out->len, c->limit,
				    c->usage, c->account, c->acap);
}

int cfs_drive_about(struct cfs_drive *d, int64_t *limit, int64_t *usage, char *account,
		    size_t acap)
{
	static const char q[] = "/drive/v3/about?fields=storageQuota,user(emailAddress)";
	struct cfs_buf url = { 0 };
	struct quota_ctx c = { limit, usage, account, acap };
	int rc = cfs_buf_append(&url, d->api, strlen(d->api));
	if (!rc)
		rc = cfs_buf_append(&url, account ? q : "/drive/v3/about?fields=storageQuota",
				    account ? sizeof(q) - 1 : 35);
	if (!rc)
		rc = simple_call(d, NULL, url.data, NULL, "about.get", validate_quota, &c, 0);
	cfs_buf_cleanup(&url);
	return rc;
}

/* ---- verification -------------------------------------------------------- */

static int md5_hex(const void *p, size_t n, char hex[33])
{
	struct cfs_digest *g;
	int rc = cfs_digest_new("md5", &g);
	if (!rc)
		rc = cfs_digest_update(g, p, n);
	if (!rc)
		return cfs_digest_final_hex(g, hex, 33);
	cfs_digest_free(g);
	return rc;
}

/* The file Drive made must hold the bytes we sent. */
static int verify(struct cfs_drive *d, struct cfs_file_meta *out, int64_t total,
		  const char *md5)
{
	if (out->size == total && strcmp(out->md5, md5) == 0) {
		COUNT(d, uploads, 1);
		return 0;
	}
	CFS_ERROR("upload of %s: Drive holds %" PRId64 " bytes, md5 \"%s\"; we sent %" PRId64
		  " bytes, md5 %s",
		  out->id, out->size, out->md5, total, md5);
	cfs_file_meta_cleanup(out);
	memset(out, 0, sizeof(*out));
	return CFS_E_PROTO;
}

/* ---- multipart ----------------------------------------------------------- */

int cfs_drive_upload_multipart(struct cfs_drive *d, const struct cfs_json_meta_in *m,
			       const char *id, const void *data, size_t len,
			       struct cfs_file_meta *out)
{
	memset(out, 0, sizeof(*out));
	if (!id && (!m || !m->name))
		return -EINVAL;
	struct cfs_json_meta_in none = { .trashed = -1 };
	struct cfs_buf url = { 0 }, body = { 0 }, reply = { .max = JSON_MAX };
	char *json = NULL, md5[33], boundary[64], ctype[100], what[200];
	const char *mime = m && m->mime ? m->mime : "application/octet-stream";
	int rc = md5_hex(data, len, md5);
	if (!rc)
		rc = cfs_json_write_meta(m ? m : &none, &json);
	/* a boundary that is not in the data */
	for (unsigned k = 0; !rc; k++) {
		snprintf(boundary, sizeof(boundary), "colabfs-%08x-%s", k, md5);
		char delim[72];
		int dl = snprintf(delim, sizeof(delim), "--%s", boundary);
		if (!memmem(data, len, delim, (size_t)dl))
			break;
	}
	if (!rc) {
		char head[256];
		int hl = snprintf(head, sizeof(head),
				  "--%s\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n",
				  boundary);
		rc = cfs_buf_append(&body, head, (size_t)hl);
		if (!rc)
			rc = cfs_buf_append(&body, json, strlen(json));
		hl = snprintf(head, sizeof(head), "\r\n--%s\r\nContent-Type: %.100s\r\n\r\n",
			      boundary, mime);
		if (!rc)
			rc = cfs_buf_append(&body, head, (size_t)hl);
		if (!rc && len)
			rc = cfs_buf_append(&body, data, len);
		hl = snprintf(head, sizeof(head), "\r\n--%s--\r\n", boundary);
		if (!rc)
			rc = cfs_buf_append(&body, head, (size_t)hl);
	}
	if (!rc)
		rc = upload_url(d, &url, id, "multipart");
	if (!rc) {
		struct cfs_drive_json_ctx c = { d, out };
		struct cfs_http_req r;
		cfs_http_req_init(&r);
		snprintf(ctype, sizeof(ctype), "multipart/related; boundary=%s", boundary);
		snprintf(what, sizeof(what), "multipart upload %s", id ? id : m->id ? m->id : "");
		r.method = id ? "PATCH" : "POST";
		r.url = url.data;
		r.body = body.data;
		r.body_len = body.len;
		r.content_type = ctype;
		r.out = &reply;
		rc = call(d, &r, what, cfs_drive_validate_meta, NULL, &c, id == NULL);
		cfs_http_req_cleanup(&r);
		if (!rc)
			COUNT(d, upload_bytes, len);
	}
	if (rc == -EEXIST && !id && m->id)
		rc = adopt(d, m, (int64_t)len, md5, out);
	else if (!rc)
		rc = verify(d, out, (int64_t)len, md5);
	free(json);
	cfs_buf_cleanup(&url);
	cfs_buf_cleanup(&body);
	cfs_buf_cleanup(&reply);
	return rc;
}

/* ---- resumable ----------------------------------------------------------- */

struct start_ctx {
	struct cfs_drive *d;
	char **uri;
};

int cfs_drive_session_ok(const struct cfs_drive *d, const char *uri)
{
	size_t n = strlen(d->api);
	return uri && strncmp(uri, d->api, n) == 0 && uri[n] == '/' && !strpbrk(uri, " \r\n");
}

/* 200 with a Location below the API URL (the bearer token goes there). */
static int validate_start(struct cfs_http_req *r, void *ctx)
{
	struct start_ctx *c = ctx;
	if (r->status != 200 || r->location_cut || !cfs_drive_session_ok(c->d, r->location)) {
		snprintf(r->errmsg, sizeof(r->errmsg), "no usable session URI (HTTP %ld)",
			 r->status);
		return CFS_E_PROTO;
	}
	free(*c->uri);
	*c->uri = strdup(r->location);
	return *c->uri ? 0 : -ENOMEM;
}

int cfs_drive_upload_start(struct cfs_drive *d, const struct cfs_json_meta_in *m,
			   const char *id, int64_t total, char **uri)
{
	*uri = NULL;
	if (total < 0 || (!id && (!m || !m->name)))
		return -EINVAL;
	struct cfs_json_meta_in none = { .trashed = -1 };
	struct cfs_buf url = { 0 }, reply = { .max = JSON_MAX };
	char *json = NULL, type[160], length[64], what[200];
	int rc = cfs_json_write_meta(m ? m : &none, &json);
	if (!rc)
		rc = upload_url(d, &url, id, "resumable");
	if (!rc) {
		struct start_ctx c = { d, uri };
		struct cfs_http_req r;
		cfs_http_req_init(&r);
		snprintf(type, sizeof(type), "X-Upload-Content-Type: %.120s",
			 m && m->mime ? m->mime : "application/octet-stream");
		snprintf(length, sizeof(length), "X-Upload-Content-Length: %" PRId64, total);
		snprintf(what, sizeof(what), "upload start %s", id ? id : m->id ? m->id : "");
		r.method = id ? "PATCH" : "POST";
		r.url = url.data;
		r.body = json;
		r.body_len = strlen(json);
		r.content_type = "application/json; charset=UTF-8";
		r.headers[0] = type;
		r.headers[1] = length;
		r.out = &reply;
		rc = call(d, &r, what, validate_start, NULL, &c, id == NULL);
		cfs_http_req_cleanup(&r);
	}
	if (rc) {
		free(*uri);
		*uri = NULL;
	}
	free(json);
	cfs_buf_cleanup(&url);
	cfs_buf_cleanup(&reply);
	return rc;
}

/* One chunk [off, off+len) (len 0: a status query), and the piece of it the
 * request being sent carries: [from, off+len), or a status query when from
 * is outside the chunk. */
struct chunk_ctx {
	struct cfs_drive *d;
	const char *uri;
	const char *data;
	int64_t off, total, from;
	size_t len;
	int64_t confirmed;
	struct cfs_file_meta *out;
	char crange[96];
};

static void set_piece(struct chunk_ctx *c, struct cfs_http_req *r, int64_t from)
{
	int64_t end = c->off + (int64_t)c->len;
	c->from = from;
	if (from >= c->off && from < end) {
		r->body = c->data + (from - c->off);
		r->body_len = (size_t)(end - from);
		snprintf(c->crange, sizeof(c->crange), "Content-Range: bytes %" PRId64 "-%" PRId64
			 "/%" PRId64, from, end - 1, c->total);
	} else {
		r->body = NULL;
		r->body_len = 0;
		snprintf(c->crange, sizeof(c->crange), "Content-Range: bytes */%" PRId64, c->total);
	}
	r->headers[0] = c->crange;
}

/* 308 + Range: what is persisted; 200/201: the finished file. */
static int validate_chunk(struct cfs_http_req *r, void *ctx)
{
	struct chunk_ctx *c = ctx;
	if (r->status == 308) {
		int64_t next;
		if (cfs_wire_upload_range(r->range, &next) || next > c->total ||
		    (r->body_len && next > c->from + (int64_t)r->body_len)) {
			snprintf(r->errmsg, sizeof(r->errmsg), "bad Range \"%.60s\" in a 308",
				 r->range);
			return CFS_E_PROTO;
		}
		c->confirmed = next;
		return 0;
	}
	if (r->status != 200 && r->status != 201) {
		snprintf(r->errmsg, sizeof(r->errmsg), "unexpected HTTP %ld", r->status);
		return CFS_E_PROTO;
	}
	cfs_file_meta_cleanup(c->out);
	int rc = cfs_json_parse_file(r->out->data ? r->out->data : "", r->out->len, c->out);
	if (!rc)
		c->confirmed = c->total;
	return rc;
}

/* After a transient failure: ask the session what it has and go on from
 * there at once when that is further than this try started. */
static int resume_chunk(struct cfs_http_req *r, void *ctx)
{
	struct chunk_ctx *c = ctx;
	int64_t conf;
	struct cfs_file_meta m;
	COUNT(c->d, upload_retries, 1);
	int rc = cfs_drive_upload_status(c->d, c->uri, c->total, &conf, &m);
	cfs_file_meta_cleanup(&m);
	if (rc)
		return 0; /* the retry policy waits, then the piece goes again */
	int progress = conf > c->from;
	set_piece(c, r, conf);
	return progress;
}

static int chunk_call(struct cfs_drive *d, const char *uri, int64_t off, const void *data,
		      size_t len, int64_t total, int64_t *confirmed, struct cfs_file_meta *out,
		      int resume)
{
	memset(out, 0, sizeof(*out));
	*confirmed = -1;
	if (off < 0 || total < 0 || off + (int64_t)len > total || !cfs_drive_session_ok(d, uri))
		return -EINVAL;
	struct cfs_buf reply = { .max = JSON_MAX };
	struct chunk_ctx c = { .d = d, .uri = uri, .data = data, .off = off, .total = total,
			       .len = len, .confirmed = -1, .out = out };
	struct cfs_http_req r;
	cfs_http_req_init(&r);
	r.method = "PUT";
	r.url = uri;
	r.content_type = "application/octet-stream";
	r.out = &reply;
	set_piece(&c, &r, len ? off : -1);
	int rc = call(d, &r, len ? "upload chunk" : "upload status", validate_chunk,
		      resume ? resume_chunk : NULL, &c, 0);
	if (!rc)
		*confirmed = c.confirmed;
	else
		cfs_file_meta_cleanup(out);
	if (rc)
		memset(out, 0, sizeof(*out));
	cfs_http_req_cleanup(&r);
	cfs_buf_cleanup(&reply);
	return rc;
}

int cfs_drive_upload_chunk(struct cfs_drive *d, const char *uri, int64_t off, const void *data,
			   size_t len, int64_t total, int64_t *confirmed,
			   struct cfs_file_meta *out)
{
	if (len == 0 || (off + (int64_t)len < total && len % CFS_DRIVE_CHUNK_GRANULE)) {
		memset(out, 0, sizeof(*out));
		return -EINVAL;
	}
	return chunk_call(d, uri, off, data, len, total, confirmed, out, 1);
}

int cfs_drive_upload_status(struct cfs_drive *d, const char *uri, int64_t total,
			    int64_t *confirmed, struct cfs_file_meta *out)
{
	return chunk_call(d, uri, 0, NULL, 0, total, confirmed, out, 0);
}

/* ---- a whole upload ------------------------------------------------------ */

static int upload_small(struct cfs_drive *d, const struct cfs_drive_upload *u,
			struct cfs_file_meta *out)
{
	char *buf = malloc(u->total ? (size_t)u->total : 1);
	if (!buf)
		return -ENOMEM;
	int rc = u->total ? u->read(u->arg, 0, buf, (size_t)u->total) : 0;
	if (!rc)
		rc = cfs_drive_upload_multipart(d, u->meta, u->id, buf, (size_t)u->total, out);
	free(buf);
	return rc;
}

/* Takes up the session u->resume_uri: asks Drive what it holds and hashes
 * those bytes again (the md5 covers the whole file).  A session Drive forgot
 * (404) leaves *uri NULL: the caller starts a new one.  0 or an error. */
static int resume(struct cfs_drive *d, const struct cfs_drive_upload *u, char *buf, size_t chunk,
		  struct cfs_digest *g, char **uri, int64_t *confirmed, struct cfs_file_meta *out)
{
	int64_t conf = 0;
	if (!cfs_drive_session_ok(d, u->resume_uri)) {
		/* a journal written for another API URL: the token never goes there */
		CFS_WARN("upload %s: the stored session is not under this mount's API URL; a "
			 "new session starts", u->id ? u->id : u->meta && u->meta->id ? u->meta->id : "");
		return 0;
	}
	if (!(*uri = strdup(u->resume_uri)))
		return -ENOMEM;
	int rc = cfs_drive_upload_status(d, *uri, u->total, &conf, out);
	/* forgotten (404), or refused (400: not the size it was started for) */
	if (rc == -ENOENT || rc == -EIO || rc == -EINVAL || (!rc && (conf < 0 || conf > u->total))) {
		CFS_INFO("upload %s: the earlier session is gone; starting over",
			 u->id ? u->id : u->meta && u->meta->id ? u->meta->id : "");
		explicit_bzero(*uri, strlen(*uri));
		free(*uri);
		*uri = NULL;
		cfs_file_meta_cleanup(out);
		memset(out, 0, sizeof(*out));
		return 0;
	}
	for (int64_t at = 0; !rc && at < conf;) {
		size_t n = conf - at < (int64_t)chunk ? (size_t)(conf - at) : chunk;
		rc = u->read(u->arg, at, buf, n);
		if (!rc)
			rc = cfs_digest_update(g, buf, n);
		at += (int64_t)n;
	}
	if (!rc) {
		*confirmed = conf;
		CFS_INFO("upload %s: resuming at %" PRId64 " of %" PRId64 " bytes",
			 u->id ? u->id : u->meta && u->meta->id ? u->meta->id : "", conf, u->total);
	}
	return rc;
}

int cfs_drive_upload_all(struct cfs_drive *d, const struct cfs_drive_upload *u,
			 struct cfs_file_meta *out)
{
	memset(out, 0, sizeof(*out));
	int64_t mp = u->multipart_max ? u->multipart_max : CFS_DRIVE_MULTIPART_MAX;
	if (u->total < 0 || !u->read)
		return -EINVAL;
	if (u->total <= mp)
		return upload_small(d, u, out);
	size_t chunk = u->chunk ? u->chunk : CFS_DRIVE_CHUNK;
	chunk -= chunk % CFS_DRIVE_CHUNK_GRANULE;
	if (!chunk)
		chunk = CFS_DRIVE_CHUNK_GRANULE;
	char *buf = malloc(chunk), *uri = NULL, md5[33] = "";
	struct cfs_digest *g = NULL;
	int rc = buf ? cfs_digest_new("md5", &g) : -ENOMEM;
	int64_t confirmed = 0, hashed = 0, total = u->total;
	int restarts = 0;
	int64_t progress_ms = cfs_drive_now_ms();
	long budget = __atomic_load_n(&d->io_timeout_ms, __ATOMIC_RELAXED);
	if (!rc && u->resume_uri && u->resume_uri[0])
		rc = resume(d, u, buf, chunk, g, &uri, &confirmed, out);
	hashed = confirmed;
	if (!rc && !uri) {
		rc = cfs_drive_upload_start(d, u->meta, u->id, total, &uri);
		if (!rc && u->progress)
			u->progress(u->arg, uri, 0);
	}
	while (!rc && !out->id[0]) {
		int64_t conf;
		size_t n = total - confirmed < (int64_t)chunk ? (size_t)(total - confirmed) : chunk;
		if (n)
			rc = u->read(u->arg, confirmed, buf, n);
		/* the md5 covers each byte once, in order: a resend re-reads bytes
		 * already hashed (the same bytes: see cfs_drive_read_fn) */
		if (!rc && confirmed + (int64_t)n > hashed) {
			rc = cfs_digest_update(g, buf + (hashed - confirmed),
					       (size_t)(confirmed + (int64_t)n - hashed));
			hashed = confirmed + (int64_t)n;
		}
		if (!rc)
			rc = n ? cfs_drive_upload_chunk(d, uri, confirmed, buf, n, total, &conf, out)
			       : cfs_drive_upload_status(d, uri, total, &conf, out);
		if (rc == -ENOENT && restarts < SESSION_RESTARTS) {
			/* the session expired: a new one, from the first byte */
			CFS_WARN("upload %s: the session expired at %" PRId64 " of %" PRId64
				 " bytes; starting over",
				 u->id ? u->id : u->meta->id ? u->meta->id : "", confirmed, total);
			COUNT(d, upload_retries, 1);
			restarts++;
			free(uri);
			uri = NULL;
			confirmed = 0;
			rc = cfs_drive_upload_start(d, u->meta, u->id, total, &uri);
			if (!rc && u->progress)
				u->progress(u->arg, uri, 0);
			continue;
		}
		if (rc)
			break;
		if (conf > hashed) { /* Drive cannot have more than we sent */
			rc = CFS_E_PROTO;
			break;
		}
		if (conf > confirmed) {
			COUNT(d, upload_bytes, conf - confirmed);
			progress_ms = cfs_drive_now_ms();
			if (u->progress && !out->id[0])
				u->progress(u->arg, uri, conf);
		} else if (cfs_drive_now_ms() - progress_ms > budget) {
			CFS_ERROR("upload: no byte confirmed for %ld ms, giving up", budget);
			rc = CFS_E_NET;
			break;
		}
		confirmed = conf;
	}
	if (g) {
		int hrc = cfs_digest_final_hex(g, md5, sizeof(md5));
		if (!rc)
			rc = hrc;
	}
	if (!rc && hashed != total)
		rc = CFS_E_PROTO;
	if (!rc)
		rc = verify(d, out, total, md5);
	if (rc) {
		cfs_file_meta_cleanup(out);
		memset(out, 0, sizeof(*out));
	}
	if (uri)
		explicit_bzero(uri, strlen(uri));
	free(uri);
	free(buf);
	return rc;
}
