/* Fuzz harness: the Drive reply parsers of src/drive/json.c (libFuzzer).
 *
 * The first input byte picks the parser ('0' file resource, '1' file list,
 * '2' error body, '3' token reply, '4' flat integers, '5' an RFC 3339 time,
 * '6' a user.colabfs.sync reply), the rest is the document.  Every field a parser hands out is read in full
 * so that ASan sees any string that is not NUL-terminated or was freed too
 * early; invariants the callers rely on are asserted (a failed parse hands
 * out nothing, a string fits its field; a sync reply the parser accepts is
 * written back by the daemon's writer and parses to the same status). */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "json.h"

static volatile size_t sink;

static void touch(const char *s, size_t cap)
{
	size_t n = strlen(s);
	assert(cap == 0 || n < cap);
	sink += n;
	for (size_t i = 0; i < n; i++)
		sink += (unsigned char)s[i];
}

static void touch_meta(const struct cfs_file_meta *m)
{
	assert(m->name != NULL);
	touch(m->id, sizeof(m->id));
	assert(m->id[0] != '\0');
	touch(m->name, 0);
	touch(m->mime, sizeof(m->mime));
	touch(m->md5, sizeof(m->md5));
	touch(m->sha256, sizeof(m->sha256));
	touch(m->rev, sizeof(m->rev));
	touch(m->parent, sizeof(m->parent));
	touch(m->target_id, sizeof(m->target_id));
	touch(m->target_mime, sizeof(m->target_mime));
	assert(m->size >= -1);
	assert(m->version >= -1);
	assert(m->trashed == 0 || m->trashed == 1);
	assert(m->can_download == 0 || m->can_download == 1);
	sink += (size_t)(m->mtime_ns ^ m->ctime_ns);
}

static int list_cb(const struct cfs_file_meta *m, void *arg)
{
	touch_meta(m);
	size_t *count = arg;
	/* stop early now and then to exercise the callback-status path */
	return ++*count == 1000 ? -ECANCELED : 0;
}

static int ints_cb(const char *name, int64_t v, void *arg)
{
	touch(name, 0);
	sink += (size_t)v;
	(*(size_t *)arg)++;
	return 0;
}

static int same_entries(const struct cfs_json_sync_entry *a, const struct cfs_json_sync_entry *b,
			int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(a[i].path, b[i].path) || strcmp(a[i].error, b[i].error))
			return 0;
	return 1;
}

static void sync_round_trip(const char *txt, size_t len)
{
	struct cfs_json_sync s, back;
	if (cfs_json_parse_sync(txt, len, &s) != 0) {
		assert(s.n_waiting == 0 && s.n_failed == 0);
		return;
	}
	assert(s.files >= 0 && s.bytes >= 0 && s.bytes_left >= 0 && s.uploading >= 0);
	assert(s.n_waiting <= CFS_SYNC_LIST_MAX && s.n_failed <= CFS_SYNC_LIST_MAX);
	for (int i = 0; i < s.n_waiting; i++) {
		assert(s.waiting[i].path[0] != '\0');
		touch(s.waiting[i].path, 0);
		touch(s.waiting[i].error, 0);
	}
	for (int i = 0; i < s.n_failed; i++) {
		assert(s.failed[i].path[0] != '\0');
		touch(s.failed[i].path, 0);
		touch(s.failed[i].error, 0);
	}
	/* what the parser accepted is UTF-8 already: the writer changes nothing */
	char *again = NULL;
	int rc = cfs_json_write_sync(&s, (size_t)-1, &again);
	assert(rc == 0 || rc == -ENOMEM);
	if (rc == 0) {
		assert(cfs_json_parse_sync(again, strlen(again), &back) == 0);
		assert(back.files == s.files && back.bytes == s.bytes &&
		       back.bytes_left == s.bytes_left && back.uploading == s.uploading);
		assert(back.n_waiting == s.n_waiting && back.n_failed == s.n_failed);
		assert(same_entries(s.waiting, back.waiting, s.n_waiting));
		assert(same_entries(s.failed, back.failed, s.n_failed));
		cfs_json_sync_cleanup(&back);
	}
	free(again);
	cfs_json_sync_cleanup(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned sel = (uint8_t)(data[0] - '0') % 7; /* "0".."6" in the seeds */
	/* an exact-size heap copy: ASan catches any read past the document */
	size_t len = size - 1;
	char *txt = malloc(len ? len : 1);
	if (!txt)
		return 0;
	memcpy(txt, data + 1, len);

	switch (sel) {
	case 0: {
		struct cfs_file_meta m;
		int rc = cfs_json_parse_file(txt, len, &m);
		if (rc == 0)
			touch_meta(&m);
		else
			assert(m.name == NULL);
		cfs_file_meta_cleanup(&m);
		break;
	}
	case 1: {
		char *next = (char *)0x1;
		size_t count = 0;
		int rc = cfs_json_parse_file_list(txt, len, list_cb, &count, &next);
		if (rc == 0 && next) {
			assert(next[0] != '\0');
			touch(next, 0);
		}
		if (rc != 0)
			assert(next == NULL);
		free(next);
		break;
	}
	case 2: {
		char reason[64], msg[256];
		int rc = cfs_json_parse_error(txt, len, reason, sizeof(reason), msg, sizeof(msg));
		touch(reason, sizeof(reason));
		touch(msg, sizeof(msg));
		if (rc != 0)
			assert(reason[0] == '\0' && msg[0] == '\0');
		/* a zero capacity must not be written to */
		cfs_json_parse_error(txt, len, NULL, 0, NULL, 0);
		break;
	}
	case 3: {
		char *token = (char *)0x1;
		int64_t expires = -7;
		char err[64];
		int rc = cfs_json_parse_token(txt, len, &token, &expires, err, sizeof(err));
		touch(err, sizeof(err));
		if (rc == 0) {
			assert(token != NULL && token[0] != '\0');
			touch(token, 0);
		} else {
			assert(token == NULL);
		}
		free(token);
		/* the granted scopes of the same reply: a non-empty string or none */
		char *scope = (char *)0x1;
		rc = cfs_json_parse_scope(txt, len, &scope);
		assert(rc == 0 || scope == NULL);
		if (scope) {
			assert(scope[0] != '\0');
			touch(scope, 0);
		}
		free(scope);
		break;
	}
	case 4: {
		size_t count = 0;
		cfs_json_flat_ints(txt, len, ints_cb, &count);
		break;
	}
	case 5: {
		/* RFC 3339 times on their own, as an exact-size C string: inside a
		 * document jansson's spare allocation would hide an overread */
		char *s = malloc(len + 1);
		if (!s)
			break;
		memcpy(s, txt, len);
		s[len] = '\0';
		int64_t ns = 7;
		int rc = cfs_json_parse_time(s, &ns);
		assert(rc == 0 || (rc == -EINVAL && ns == 7));
		free(s);
		break;
	}
	case 6:
		sync_round_trip(txt, len);
		break;
	}
	free(txt);
	return 0;
}
