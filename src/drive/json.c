/* json: all JSON parsing (owns jansson; see json.h). */
#define _GNU_SOURCE
#include "json.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "names.h"

void cfs_file_meta_cleanup(struct cfs_file_meta *m)
{
	free(m->name);
	m->name = NULL;
}

static int copy_str(json_t *o, const char *key, char *dst, size_t cap, int required)
{
	json_t *v = json_object_get(o, key);
	dst[0] = '\0';
	if (!v)
		return required ? CFS_E_PROTO : 0;
	if (!json_is_string(v) || json_string_length(v) >= cap)
		return CFS_E_PROTO;
	memcpy(dst, json_string_value(v), json_string_length(v) + 1);
	if (strlen(dst) != json_string_length(v)) /* embedded NUL */
		return CFS_E_PROTO;
	return 0;
}

/* int64 as a JSON string (Drive) or integer; absent -> def. */
static int get_i64(json_t *o, const char *key, int64_t *out, int64_t def)
{
	json_t *v = json_object_get(o, key);
	*out = def;
	if (!v)
		return 0;
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return *out < 0 ? CFS_E_PROTO : 0;
	}
	if (!json_is_string(v))
		return CFS_E_PROTO;
	const char *s = json_string_value(v);
	if (!*s)
		return CFS_E_PROTO;
	int64_t x = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || x > (INT64_MAX - 9) / 10)
			return CFS_E_PROTO;
		x = x * 10 + (*s - '0');
	}
	*out = x;
	return 0;
}

int cfs_json_parse_time(const char *s, int64_t *ns)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -EINVAL;
	int64_t frac = 0;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 9)
				frac = frac * 10 + (*p - '0');
		if (digits == 0)
			return -EINVAL;
		for (; digits < 9; digits++)
			frac *= 10;
	}
	long off = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		/* exactly +HH:MM */
		for (int i = 1; i <= 5; i++)
			if (i == 3 ? p[i] != ':' : (p[i] < '0' || p[i] > '9'))
				return -EINVAL;
		int hh = (p[1] - '0') * 10 + (p[2] - '0'), mm = (p[4] - '0') * 10 + (p[5] - '0');
		if (hh > 23 || mm > 59)
			return -EINVAL;
		off = (hh * 60L + mm) * 60L * (*p == '+' ? 1 : -1);
		p += 6;
	} else {
		return -EINVAL;
	}
	if (*p)
		return -EINVAL;
	int64_t secs = (int64_t)timegm(&tm) - off;
	/* what fits in int64 nanoseconds: years 1678 to 2262 */
	if (secs < -9223372035LL || secs > 9223372035LL)
		return -EINVAL;
	*ns = secs * 1000000000LL + frac;
	return 0;
}

static int get_time(json_t *o, const char *key, int64_t *ns)
{
	json_t *v = json_object_get(o, key);
	*ns = 0;
	if (!v)
		return 0;
	if (!json_is_string(v) || cfs_json_parse_time(json_string_value(v), ns))
		return CFS_E_PROTO;
	return 0;
}

static int get_bool(json_t *o, const char *key, int *out, int def)
{
	json_t *v = json_object_get(o, key);
	*out = def;
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return CFS_E_PROTO;
	*out = json_is_true(v);
	return 0;
}

static int file_from_obj(json_t *o, struct cfs_file_meta *m)
{
	memset(m, 0, sizeof(*m));
	m->size = -1;
	m->version = -1;
	m->can_download = 1;
	m->can_edit = 1;
	m->can_add_children = 1;
	if (!json_is_object(o))
		return CFS_E_PROTO;
	json_t *name = json_object_get(o, "name");
	if (!json_is_string(name) || strlen(json_string_value(name)) != json_string_length(name))
		return CFS_E_PROTO;
	int rc = copy_str(o, "id", m->id, sizeof(m->id), 1);
	if (!rc && !m->id[0])
		rc = CFS_E_PROTO;
	if (!rc)
		rc = copy_str(o, "mimeType", m->mime, sizeof(m->mime), 1);
	if (!rc)
		rc = get_i64(o, "size", &m->size, -1);
	if (!rc)
		rc = copy_str(o, "md5Checksum", m->md5, sizeof(m->md5), 0);
	if (!rc)
		rc = copy_str(o, "sha256Checksum", m->sha256, sizeof(m->sha256), 0);
	if (!rc)
		rc = copy_str(o, "headRevisionId", m->rev, sizeof(m->rev), 0);
	if (!rc)
		rc = copy_str(o, "driveId", m->drive_id, sizeof(m->drive_id), 0);
	if (!rc)
		rc = get_i64(o, "version", &m->version, -1);
	if (!rc)
		rc = get_time(o, "modifiedTime", &m->mtime_ns);
	if (!rc)
		rc = get_time(o, "createdTime", &m->ctime_ns);
	if (!rc)
		rc = get_bool(o, "trashed", &m->trashed, 0);
	json_t *parents = json_object_get(o, "parents");
	if (!rc && parents) {
		json_t *p0 = json_array_get(parents, 0);
		if (!json_is_array(parents) || (p0 && !json_is_string(p0)))
			rc = CFS_E_PROTO;
		else if (p0 && json_string_length(p0) < sizeof(m->parent))
			memcpy(m->parent, json_string_value(p0), json_string_length(p0) + 1);
		else if (p0)
			rc = CFS_E_PROTO;
	}
	json_t *caps = json_object_get(o, "capabilities");
	if (!rc && caps)
		rc = json_is_object(caps) ? get_bool(caps, "canDownload", &m->can_download, 1)
					  : CFS_E_PROTO;
	if (!rc && caps)
		rc = get_bool(caps, "canEdit", &m->can_edit, 1);
	if (!rc && caps)
		rc = get_bool(caps, "canAddChildren", &m->can_add_children, 1);
	json_t *sc = json_object_get(o, "shortcutDetails");
	if (!rc && sc) {
		if (!json_is_object(sc))
			rc = CFS_E_PROTO;
		if (!rc)
			rc = copy_str(sc, "targetId", m->target_id, sizeof(m->target_id), 1);
		if (!rc)
			rc = copy_str(sc, "targetMimeType", m->target_mime, sizeof(m->target_mime), 0);
	}
	/* ids and revisions go into cache keys and URLs: Drive's alphabet only */
	const char *ids[] = { m->id, m->rev, m->drive_id, m->parent, m->target_id, m->md5,
			      m->sha256 };
	for (size_t k = 0; !rc && k < sizeof(ids) / sizeof(ids[0]); k++)
		if ((k == 0 || ids[k][0]) && !cfs_names_id_ok(ids[k], CFS_ID_MAX))
			rc = -EILSEQ;
	if (!rc && !(m->name = strdup(json_string_value(name))))
		rc = -ENOMEM;
	if (rc)
		cfs_file_meta_cleanup(m);
	return rc;
}

static json_t *load(const char *txt, size_t len)
{
	json_error_t err;
	return json_loadb(txt, len, JSON_REJECT_DUPLICATES, &err);
}

int cfs_json_parse_file(const char *txt, size_t len, struct cfs_file_meta *m)
{
	json_t *root = load(txt, len);
	if (!root) {
		memset(m, 0, sizeof(*m));
		return CFS_E_PROTO;
	}
	int rc = file_from_obj(root, m);
	json_decref(root);
	return rc;
}

int cfs_json_parse_file_list(const char *txt, size_t len, cfs_json_file_cb cb, void *arg,
			     char **next)
{
	*next = NULL;
	json_t *root = load(txt, len);
	if (!root)
		return CFS_E_PROTO;
	int rc = 0;
	json_t *files = json_object_get(root, "files");
	json_t *tok = json_object_get(root, "nextPageToken");
	if (!json_is_object(root) || (files && !json_is_array(files)) ||
	    (tok && (!json_is_string(tok) || json_string_length(tok) == 0)))
		rc = CFS_E_PROTO;
	/* Validate the whole page before handing any entry out. */
	size_t i;
	json_t *f;
	if (!rc && files) {
		json_array_foreach(files, i, f) {
			struct cfs_file_meta m;
			if ((rc = file_from_obj(f, &m)) == -EILSEQ)
				rc = 0; /* an id outside Drive's alphabet: dropped below */
			else if (rc)
				break;
			else
				cfs_file_meta_cleanup(&m);
		}
	}
	if (!rc && files) {
		json_array_foreach(files, i, f) {
			struct cfs_file_meta m;
			if ((rc = file_from_obj(f, &m)) == -EILSEQ) {
				rc = 0;
				continue;
			}
			if (rc)
				break;
			rc = cb(&m, arg);
			cfs_file_meta_cleanup(&m);
			if (rc)
				break;
		}
	}
	if (!rc && tok && !(*next = strdup(json_string_value(tok))))
		rc = -ENOMEM;
	json_decref(root);
	return rc;
}

static void copy_trunc(char *dst, size_t cap, const char *src)
{
	if (!cap)
		return;
	snprintf(dst, cap, "%s", src ? src : "");
}

int cfs_json_parse_error(const char *txt, size_t len, char *reason, size_t rcap, char *msg,
			 size_t mcap)
{
	copy_trunc(reason, rcap, "");
	copy_trunc(msg, mcap, "");
	json_t *root = load(txt, len);
	if (!root)
		return CFS_E_PROTO;
	int rc = CFS_E_PROTO;
	json_t *e = json_object_get(root, "error");
	if (json_is_object(e)) {
		json_t *m = json_object_get(e, "message");
		json_t *r = json_object_get(json_array_get(json_object_get(e, "errors"), 0), "reason");
		if (json_is_string(m))
			copy_trunc(msg, mcap, json_string_value(m));
		if (json_is_string(r))
			copy_trunc(reason, rcap, json_string_value(r));
		rc = 0;
	}
	json_decref(root);
	return rc;
}

int cfs_json_parse_token(const char *txt, size_t len, char **token, int64_t *expires_in,
			 char *err, size_t ecap)
{
	*token = NULL;
	*expires_in = 0;
	copy_trunc(err, ecap, "");
	json_t *root = load(txt, len);
	if (!root || !json_is_object(root)) {
		json_decref(root);
		return CFS_E_PROTO;
	}
	int rc = 0;
	json_t *e = json_object_get(root, "error");
	json_t *t = json_object_get(root, "access_token");
	if (e) {
		copy_trunc(err, ecap, json_is_string(e) ? json_string_value(e) : "error");
		rc = CFS_E_AUTH;
	} else if (!json_is_string(t) || json_string_length(t) == 0 ||
		   strlen(json_string_value(t)) != json_string_length(t)) {
		rc = CFS_E_PROTO;
	} else {
		json_t *ex = json_object_get(root, "expires_in");
		if (json_is_real(ex)) {
			double d = json_real_value(ex);
			*expires_in = d > 0 && d < 1e9 ? (int64_t)d : 0;
		} else if (ex) {
			rc = get_i64(root, "expires_in", expires_in, 3600);
		} else {
			*expires_in = 3600;
		}
		/* a lifetime we can do arithmetic with: a day at most */
		if (*expires_in > 86400)
			*expires_in = 86400;
		if (!rc && !(*token = strdup(json_string_value(t))))
			rc = -ENOMEM;
	}
	json_decref(root);
	return rc;
}

void cfs_cred_cleanup(struct cfs_cred *c)
{
	char **f[] = { &c->client_id, &c->client_secret, &c->refresh_token, &c->client_email,
		       &c->private_key, &c->private_key_id, &c->token_uri };
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (*f[i]) {
			explicit_bzero(*f[i], strlen(*f[i]));
			free(*f[i]);
			*f[i] = NULL;
		}
	}
}

static int dup_field(json_t *o, const char *key, char **dst, int required, char *why,
		     size_t wcap)
{
	json_t *v = json_object_get(o, key);
	if (!v) {
		if (required)
			snprintf(why, wcap, "missing \"%s\"", key);
		return required ? CFS_E_PROTO : 0;
	}
	if (!json_is_string(v) || json_string_length(v) == 0) {
		snprintf(why, wcap, "\"%s\" must be a non-empty string", key);
		return CFS_E_PROTO;
	}
	*dst = strdup(json_string_value(v));
	return *dst ? 0 : -ENOMEM;
}

int cfs_json_parse_credentials(const char *txt, size_t len, struct cfs_cred *c, char *why,
			       size_t wcap)
{
	memset(c, 0, sizeof(*c));
	copy_trunc(why, wcap, "");
	json_t *root = load(txt, len);
	if (!root || !json_is_object(root)) {
		copy_trunc(why, wcap, "not a JSON object");
		json_decref(root);
		return CFS_E_PROTO;
	}
	const char *type = json_string_value(json_object_get(root, "type"));
	int rc;
	if (!type) {
		copy_trunc(why, wcap, "missing \"type\"");
		rc = CFS_E_PROTO;
	} else if (strcmp(type, "authorized_user") == 0) {
		c->type = CFS_CRED_AUTHORIZED_USER;
		rc = dup_field(root, "client_id", &c->client_id, 1, why, wcap);
		if (!rc)
			rc = dup_field(root, "client_secret", &c->client_secret, 1, why, wcap);
		if (!rc)
			rc = dup_field(root, "refresh_token", &c->refresh_token, 1, why, wcap);
	} else if (strcmp(type, "service_account") == 0) {
		c->type = CFS_CRED_SERVICE_ACCOUNT;
		rc = dup_field(root, "client_email", &c->client_email, 1, why, wcap);
		if (!rc)
			rc = dup_field(root, "private_key", &c->private_key, 1, why, wcap);
		if (!rc)
			rc = dup_field(root, "private_key_id", &c->private_key_id, 0, why, wcap);
	} else {
		snprintf(why, wcap, "unsupported credentials type \"%.40s\"", type);
		rc = CFS_E_PROTO;
	}
	if (!rc)
		rc = dup_field(root, "token_uri", &c->token_uri, 0, why, wcap);
	json_decref(root);
	if (rc)
		cfs_cred_cleanup(c);
	return rc;
}

int cfs_json_jwt_parts(const char *kid, const char *iss, const char *scope, const char *aud,
		       int64_t iat, int64_t exp, char **hdr, char **claims)
{
	*hdr = *claims = NULL;
	json_t *h = json_pack("{s:s, s:s}", "alg", "RS256", "typ", "JWT");
	json_t *c = json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", iss, "scope", scope, "aud", aud,
			      "iat", (json_int_t)iat, "exp", (json_int_t)exp);
	if (h && kid)
		json_object_set_new(h, "kid", json_string(kid));
	if (h && c) {
		*hdr = json_dumps(h, JSON_COMPACT);
		*claims = json_dumps(c, JSON_COMPACT);
	}
	json_decref(h);
	json_decref(c);
	if (!*hdr || !*claims) {
		free(*hdr);
		free(*claims);
		*hdr = *claims = NULL;
		return -ENOMEM;
	}
	return 0;
}

int cfs_json_flat_ints(const char *txt, size_t len, cfs_json_int_cb cb, void *arg)
{
	json_t *root = load(txt, len);
	if (!json_is_object(root)) {
		json_decref(root);
		return CFS_E_PROTO;
	}
	int rc = 0;
	const char *k;
	json_t *v;
	json_object_foreach(root, k, v) {
		if (!json_is_integer(v)) {
			rc = CFS_E_PROTO;
			break;
		}
		if ((rc = cb(k, json_integer_value(v), arg)))
			break;
	}
	json_decref(root);
	return rc;
}

static int dup_token(json_t *v, char **out)
{
	if (!v)
		return 0;
	if (!json_is_string(v) || json_string_length(v) == 0)
		return CFS_E_PROTO;
	*out = strdup(json_string_value(v));
	return *out ? 0 : -ENOMEM;
}

int cfs_json_parse_changes(const char *txt, size_t len, cfs_json_change_cb cb, void *arg,
			   char **next, char **new_start)
{
	*next = *new_start = NULL;
	json_t *root = load(txt, len);
	json_t *ch = json_object_get(root, "changes");
	int rc = json_is_object(root) && (!ch || json_is_array(ch)) ? 0 : CFS_E_PROTO;
	size_t i;
	json_t *c;
	/* validate the whole page first: a bad page changes nothing */
	if (!rc && ch) {
		json_array_foreach(ch, i, c) {
			json_t *id = json_object_get(c, "fileId"), *f = json_object_get(c, "file");
			json_t *rm = json_object_get(c, "removed");
			const char *type = json_string_value(json_object_get(c, "changeType"));
			if (!json_is_object(c) || (rm && !json_is_boolean(rm)) ||
			    (type && strcmp(type, "file") != 0))
				continue; /* drive-level changes are not ours */
			struct cfs_file_meta m;
			int frc = f ? file_from_obj(f, &m) : 0;
			if (!json_is_string(id) || (frc && frc != -EILSEQ)) {
				rc = CFS_E_PROTO;
				break;
			}
			if (f && !frc)
				cfs_file_meta_cleanup(&m);
		}
	}
	if (!rc && ch) {
		json_array_foreach(ch, i, c) {
			json_t *id = json_object_get(c, "fileId"), *f = json_object_get(c, "file");
			const char *type = json_string_value(json_object_get(c, "changeType"));
			if (!json_is_object(c) || (type && strcmp(type, "file") != 0))
				continue;
			struct cfs_file_meta m;
			int frc = f ? file_from_obj(f, &m) : 0;
			if (frc == -EILSEQ || !cfs_names_id_ok(json_string_value(id), CFS_ID_MAX)) {
				if (!frc)
					cfs_file_meta_cleanup(&m);
				continue; /* not a Drive id: never a key of ours */
			}
			int removed = json_is_true(json_object_get(c, "removed"));
			int have = f && !removed && frc == 0;
			if (frc == 0 && f && removed)
				cfs_file_meta_cleanup(&m);
			rc = cb(json_string_value(id), removed, have ? &m : NULL, arg);
			if (have)
				cfs_file_meta_cleanup(&m);
			if (rc)
				break;
		}
	}
	if (!rc)
		rc = dup_token(json_object_get(root, "nextPageToken"), next);
	if (!rc)
		rc = dup_token(json_object_get(root, "newStartPageToken"), new_start);
	if (!rc && !*next == !*new_start)
		rc = CFS_E_PROTO;
	if (rc) {
		free(*next);
		free(*new_start);
		*next = *new_start = NULL;
	}
	json_decref(root);
	return rc;
}

int cfs_json_parse_start_token(const char *txt, size_t len, char **token)
{
	*token = NULL;
	json_t *root = load(txt, len);
	int rc = dup_token(json_object_get(root, "startPageToken"), token);
	if (!rc && !*token)
		rc = CFS_E_PROTO;
	json_decref(root);
	return rc;
}

int cfs_json_parse_scope(const char *txt, size_t len, char **scope)
{
	*scope = NULL;
	json_t *root = load(txt, len);
	int rc = json_is_object(root) ? dup_token(json_object_get(root, "scope"), scope)
				      : CFS_E_PROTO;
	json_decref(root);
	return rc;
}

/* ---- writes (drive-api-v3.md §6) ----------------------------------------- */

/* RFC 3339 UTC with milliseconds ("2024-05-01T12:34:56.789Z"). */
static int format_time(int64_t ns, char *buf, size_t cap)
{
	time_t s = (time_t)(ns / 1000000000);
	long ms = (long)(ns % 1000000000 / 1000000);
	if (ns < 0)
		return -EINVAL;
	struct tm tm;
	if (!gmtime_r(&s, &tm))
		return -EINVAL;
	size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!n || (size_t)snprintf(buf + n, cap - n, ".%03ldZ", ms) >= cap - n)
		return -EINVAL;
	return 0;
}

static int set_str(json_t *o, const char *key, const char *v)
{
	return !v || json_object_set_new(o, key, json_string(v)) == 0 ? 0 : -EINVAL;
}

int cfs_json_write_meta(const struct cfs_json_meta_in *m, char **txt)
{
	*txt = NULL;
	json_t *o = json_object();
	if (!o)
		return -ENOMEM;
	/* json_string refuses text that is not UTF-8: -EINVAL, never a mangled name */
	int rc = set_str(o, "id", m->id);
	if (!rc)
		rc = set_str(o, "name", m->name);
	if (!rc)
		rc = set_str(o, "mimeType", m->mime);
	if (!rc && m->parent) {
		json_t *p = json_pack("[s]", m->parent);
		rc = p && json_object_set_new(o, "parents", p) == 0 ? 0 : -EINVAL;
	}
	if (!rc && m->mtime_ns) {
		char t[40];
		rc = format_time(m->mtime_ns, t, sizeof(t));
		if (!rc)
			rc = set_str(o, "modifiedTime", t);
	}
	if (!rc && m->trashed >= 0 &&
	    json_object_set_new(o, "trashed", json_boolean(m->trashed)) != 0)
		rc = -ENOMEM;
	if (!rc && !(*txt = json_dumps(o, JSON_COMPACT)))
		rc = -ENOMEM;
	json_decref(o);
	return rc;
}

int cfs_json_parse_ids(const char *txt, size_t len, char (*ids)[CFS_ID_MAX], int n, int *got)
{
	json_t *root = load(txt, len);
	json_t *a = json_is_object(root) ? json_object_get(root, "ids") : NULL;
	int rc = json_is_array(a) ? 0 : CFS_E_PROTO;
	*got = 0;
	for (size_t i = 0; !rc && i < json_array_size(a) && *got < n; i++) {
		json_t *v = json_array_get(a, i);
		if (!json_is_string(v) || !cfs_names_id_ok(json_string_value(v), CFS_ID_MAX)) {
			rc = CFS_E_PROTO;
			break;
		}
		snprintf(ids[*got], CFS_ID_MAX, "%s", json_string_value(v));
		(*got)++;
	}
	if (rc)
		*got = 0;
	json_decref(root);
	return rc;
}

int cfs_json_parse_quota(const char *txt, size_t len, int64_t *limit, int64_t *usage,
			 char *account, size_t acap)
{
	json_t *root = load(txt, len);
	if (account && acap) {
		json_t *u = json_is_object(root) ? json_object_get(root, "user") : NULL;
		json_t *e = json_is_object(u) ? json_object_get(u, "emailAddress") : NULL;
		const char *s = json_is_string(e) ? json_string_value(e) : "";
		int ok = strlen(s) == json_string_length(e) && strlen(s) < acap;
		for (const char *p = s; ok && *p; p++)
			ok = (unsigned char)*p > 0x20 && *p != 0x7f; /* shown on a terminal */
		snprintf(account, acap, "%s", ok ? s : "");
	}
	json_t *q = json_is_object(root) ? json_object_get(root, "storageQuota") : NULL;
	int rc = json_is_object(q) ? 0 : CFS_E_PROTO;
	if (!rc)
		rc = get_i64(q, "limit", limit, -1); /* absent: unlimited */
	if (!rc)
		rc = get_i64(q, "usage", usage, -1);
	if (!rc && *usage < 0)
		rc = CFS_E_PROTO;
	json_decref(root);
	return rc;
}
