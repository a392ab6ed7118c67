/* json_cmd: the JSON of the command line's conversations with a mount and
 * of its --json output: the sync reply (parsed and written), doctor's
 * checks, and the event lines of `colabfs sync --json` and `colabfs warm
 * --json` (see json.h; the json module owns jansson). */
#include "json.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

/* ---- colabfs sync ---------------------------------------------------------- */

void cfs_json_sync_cleanup(struct cfs_json_sync *s)
{
	for (int i = 0; i < s->n_waiting; i++) {
		free(s->waiting[i].path);
		free(s->waiting[i].error);
	}
	for (int i = 0; i < s->n_failed; i++) {
		free(s->failed[i].path);
		free(s->failed[i].error);
	}
	memset(s, 0, sizeof(*s));
}

static int dup_str(json_t *o, const char *key, int nonempty, char **out)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
	    (nonempty && json_string_length(v) == 0))
		return CFS_E_PROTO;
	*out = strdup(json_string_value(v));
	return *out ? 0 : -ENOMEM;
}

static int sync_list(json_t *root, const char *key, struct cfs_json_sync_entry *e, int *n)
{
	json_t *a = json_object_get(root, key);
	if (!json_is_array(a))
		return CFS_E_PROTO;
	for (size_t i = 0; i < json_array_size(a) && *n < CFS_SYNC_LIST_MAX; i++) {
		json_t *it = json_array_get(a, i);
		struct cfs_json_sync_entry x = { 0 };
		int rc = json_is_object(it) ? dup_str(it, "path", 1, &x.path) : CFS_E_PROTO;
		if (!rc)
			rc = dup_str(it, "error", 0, &x.error);
		if (rc) {
			free(x.path);
			return rc;
		}
		e[(*n)++] = x;
	}
	return 0;
}

int cfs_json_parse_sync(const char *txt, size_t len, struct cfs_json_sync *s)
{
	memset(s, 0, sizeof(*s));
	json_error_t err;
	json_t *root = json_loadb(txt, len, JSON_REJECT_DUPLICATES, &err);
	int rc = json_is_object(root) ? 0 : CFS_E_PROTO;
	static const char *const keys[] = { "files", "bytes", "bytes_left", "uploading" };
	int64_t *vals[] = { &s->files, &s->bytes, &s->bytes_left, &s->uploading };
	for (size_t i = 0; !rc && i < sizeof(keys) / sizeof(keys[0]); i++) {
		json_t *v = json_object_get(root, keys[i]);
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			rc = CFS_E_PROTO;
		else
			*vals[i] = json_integer_value(v);
	}
	if (!rc)
		rc = sync_list(root, "waiting", s->waiting, &s->n_waiting);
	if (!rc)
		rc = sync_list(root, "failed", s->failed, &s->n_failed);
	json_decref(root);
	if (rc)
		cfs_json_sync_cleanup(s);
	return rc;
}

/* The length of the valid UTF-8 sequence at p, or 0 (a stray byte, an
 * overlong form, a surrogate, past U+10FFFF). */
static size_t utf8_seq(const unsigned char *p)
{
	unsigned c = p[0];
	size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
		 : (c & 0xf8) == 0xf0 ? 4 : 0;
	if (!n || (n == 2 && c < 0xc2) || (n == 4 && c > 0xf4))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0; /* a NUL stops here too: nothing past it is read */
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) ||
	    (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] > 0x8f))
		return 0;
	return n;
}

/* A JSON string of s, its bytes that are not UTF-8 as '?'. */
static json_t *lossy_string(const char *s)
{
	json_t *v = json_string(s ? s : "");
	if (v || !s)
		return v;
	char *t = strdup(s);
	if (!t)
		return NULL;
	for (size_t i = 0; t[i];) {
		size_t n = utf8_seq((const unsigned char *)t + i);
		if (n)
			i += n;
		else
			t[i++] = '?';
	}
	v = json_string(t);
	free(t);
	return v;
}

static json_t *sync_entries(const struct cfs_json_sync_entry *e, int n)
{
	json_t *a = json_array();
	for (int i = 0; a && i < n; i++) {
		json_t *it = json_object();
		if (!it || json_object_set_new(it, "path", lossy_string(e[i].path)) ||
		    json_object_set_new(it, "error", lossy_string(e[i].error)) ||
		    json_array_append_new(a, it)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

int cfs_json_write_sync(const struct cfs_json_sync *s, size_t max, char **txt)
{
	*txt = NULL;
	int nw = s->n_waiting < CFS_SYNC_LIST_MAX ? s->n_waiting : CFS_SYNC_LIST_MAX;
	int nf = s->n_failed < CFS_SYNC_LIST_MAX ? s->n_failed : CFS_SYNC_LIST_MAX;
	for (;;) {
		json_t *o = json_pack("{sIsIsIsI}", "files", (json_int_t)s->files, "bytes",
				      (json_int_t)s->bytes, "bytes_left", (json_int_t)s->bytes_left,
				      "uploading", (json_int_t)s->uploading);
		char *t = NULL;
		/* set_new takes the list even when it fails, and refuses a NULL one */
		if (o && !json_object_set_new(o, "waiting", sync_entries(s->waiting, nw)) &&
		    !json_object_set_new(o, "failed", sync_entries(s->failed, nf)))
			t = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
		json_decref(o);
		if (!t)
			return -ENOMEM;
		if (strlen(t) < max) {
			*txt = t;
			return 0;
		}
		free(t);
		/* waiting entries go first; one failed entry stays, whatever it
		 * takes: it decides `colabfs sync`'s exit */
		if (nw)
			nw--;
		else if (nf > 1)
			nf--;
		else
			return -ENOSPC;
	}
}

int cfs_json_write_checks(int ok, const struct cfs_json_check *c, size_t n, char **txt)
{
	json_t *o = json_object(), *a = json_array();
	int rc = o && a && !json_object_set_new(o, "ok", json_boolean(ok)) ? 0 : -ENOMEM;
	for (size_t i = 0; !rc && i < n; i++) {
		json_t *e = json_pack("{s:s, s:s, s:s, s:s?}", "name", c[i].name, "status",
				      c[i].status, "detail", c[i].detail, "fix", c[i].fix);
		if (!e || json_array_append_new(a, e))
			rc = -ENOMEM;
	}
	if (!rc && json_object_set(o, "checks", a))
		rc = -ENOMEM;
	if (!rc && !(*txt = json_dumps(o, JSON_COMPACT)))
		rc = -ENOMEM;
	json_decref(a);
	json_decref(o);
	return rc;
}

/* ---- --json event lines ----------------------------------------------------- */

/* The failed entries of st[0..n) appended to a. */
static int add_failed(json_t *a, const struct cfs_json_sync *st, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		json_t *e = sync_entries(st[i].failed, st[i].n_failed);
		int rc = !e || json_array_extend(a, e) ? -ENOMEM : 0;
		json_decref(e);
		if (rc)
			return rc;
	}
	return 0;
}

static json_t *field_value(const struct cfs_json_field *f)
{
	json_t *a;
	switch (f->kind) {
	case CFS_JSON_INT:
		return json_integer((json_int_t)f->i);
	case CFS_JSON_BOOL:
		return json_boolean(f->i);
	case CFS_JSON_STR:
		return f->s ? lossy_string(f->s) : json_null();
	case CFS_JSON_FAILED:
		a = json_array();
		if (a && add_failed(a, f->st, f->n)) {
			json_decref(a);
			a = NULL;
		}
		return a;
	}
	return NULL;
}

int cfs_json_write_event(const char *event, const struct cfs_json_field *f, size_t n, char **txt)
{
	*txt = NULL;
	json_t *o = json_object();
	int rc = o && !json_object_set_new(o, "event", json_string(event)) ? 0 : -ENOMEM;
	for (size_t i = 0; !rc && i < n; i++)
		if (json_object_set_new(o, f[i].key, field_value(&f[i])))
			rc = -ENOMEM; /* set_new takes a NULL value as a failure */
	if (!rc && !(*txt = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER)))
		rc = -ENOMEM;
	json_decref(o);
	return rc;
}
