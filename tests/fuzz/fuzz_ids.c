/* Fuzz harness: the Drive id check (cfs_names_id_ok) and the JSON parsers
 * that apply it (libFuzzer).
 *
 * Property 1: cfs_names_id_ok(s, max) agrees with a plain reference: s is 1
 * to max - 1 bytes of [A-Za-z0-9_-].  Property 2: the input, split at its
 * first '\n' into an id and a revision (each JSON-escaped into a files.list
 * page between two good entries), never reaches the listing's callback
 * unless both pass the check; the good entries always do, and every id and
 * revision a callback sees passes it.  The same for a changes page. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "names.h"

static int reference(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n == 0 || n >= max)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", s[i]))
			return 0;
	return 1;
}

/* s as a JSON string body (quotes not included). */
static void escape(const char *s, char *out, size_t cap)
{
	size_t o = 0;
	for (; *s && o + 7 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			o += (size_t)snprintf(out + o, cap - o, "\\%c", c);
		else if (c < 0x20)
			o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
		else
			out[o++] = (char)c;
	}
	out[o] = '\0';
}

struct seen {
	int good, fuzzed;
};

static int on_file(const struct cfs_file_meta *m, void *arg)
{
	struct seen *s = arg;
	assert(cfs_names_id_ok(m->id, CFS_ID_MAX));
	assert(!m->rev[0] || cfs_names_id_ok(m->rev, CFS_ID_MAX));
	if (strncmp(m->id, "good", 4) == 0)
		s->good++;
	else
		s->fuzzed++;
	return 0;
}

static int on_change(const char *id, int removed, const struct cfs_file_meta *m, void *arg)
{
	assert(cfs_names_id_ok(id, CFS_ID_MAX));
	if (m)
		on_file(m, arg);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 600)
		return 0;
	char in[601];
	memcpy(in, data, size);
	in[size] = '\0';
	size_t max = size ? (size_t)data[0] % 40 + 1 : 1;
	assert(cfs_names_id_ok(in, max) == reference(in, max));
	assert(cfs_names_id_ok(in, CFS_ID_MAX) == reference(in, CFS_ID_MAX));

	char *nl = strchr(in, '\n');
	const char *rev = nl ? nl + 1 : "";
	if (nl)
		*nl = '\0';
	char eid[4096], erev[4096], page[10000];
	escape(in, eid, sizeof(eid));
	escape(rev, erev, sizeof(erev));
	int n = snprintf(page, sizeof(page),
			 "{\"files\":[{\"id\":\"good1\",\"name\":\"a\",\"mimeType\":\"text/plain\"},"
			 "{\"id\":\"%s\",\"name\":\"b\",\"mimeType\":\"text/plain\","
			 "\"headRevisionId\":\"%s\"},"
			 "{\"id\":\"good2\",\"name\":\"c\",\"mimeType\":\"text/plain\"}]}",
			 eid, erev);
	int want = reference(in, CFS_ID_MAX) && (!rev[0] || reference(rev, CFS_ID_MAX)) &&
		   strlen(in) == strlen(eid) && strlen(rev) == strlen(erev);
	struct seen s = { 0, 0 };
	char *next = NULL;
	if (cfs_json_parse_file_list(page, (size_t)n, on_file, &s, &next) == 0) {
		assert(s.good == 2 + (want && strncmp(in, "good", 4) == 0));
		if (want && strncmp(in, "good", 4) != 0)
			assert(s.fuzzed == 1);
	}
	free(next);
	n = snprintf(page, sizeof(page),
		     "{\"changes\":[{\"changeType\":\"file\",\"fileId\":\"%s\",\"removed\":false,"
		     "\"file\":{\"id\":\"%s\",\"name\":\"b\",\"mimeType\":\"text/plain\","
		     "\"headRevisionId\":\"%s\"}}],\"newStartPageToken\":\"7\"}",
		     eid, eid, erev);
	char *tok = NULL, *start = NULL;
	struct seen c = { 0, 0 };
	cfs_json_parse_changes(page, (size_t)n, on_change, &c, &tok, &start);
	free(tok);
	free(start);
	return 0;
}
