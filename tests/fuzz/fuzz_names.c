/* Fuzz harness: the name rule of src/base/names.c (libFuzzer).
 *
 * The whole input (up to its first NUL) is sanitized as one Drive name, then
 * split at '\n' into the entries of one folder, each line "name[\tid[\tctime]]"
 * (the id defaults to the line number; a line whose id repeats an earlier one
 * is dropped, since Drive ids are unique).  Asserted, from names.h and
 * colabfs(1): a sanitized name is non-empty, at most 255 bytes, has no '/'
 * and no control character (U+0000-U+001F, U+007F),
 * is not "." or "..", and is valid UTF-8 when the input was; after
 * cfs_names_assign every final name is a valid name too, all final names are
 * distinct, the earliest of a group of namesakes keeps the name, and the
 * result does not depend on the order of the entries. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"

#define MAX_ENTRIES 64

/* Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF). */
static int valid_utf8(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned char c = s[i];
		size_t k;
		uint32_t cp, min;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			k = 1, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			k = 2, cp = c & 0x0f, min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			k = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return 0;
		}
		if (n - i <= k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += k + 1;
	}
	return 1;
}

static void check_name(const char *out, int want_utf8)
{
	size_t n = strlen(out);
	assert(n > 0 && n <= CFS_NAME_MAX);
	assert(strchr(out, '/') == NULL);
	for (size_t i = 0; i < n; i++)
		assert((unsigned char)out[i] >= 0x20 && out[i] != 0x7f);
	assert(strcmp(out, ".") != 0 && strcmp(out, "..") != 0);
	if (want_utf8)
		assert(valid_utf8((const unsigned char *)out, n));
}

struct ent {
	char *name; /* sanitized */
	char *id;
	int64_t ctime;
	int utf8;
};

static int earlier(const struct ent *a, const struct ent *b)
{
	if (a->ctime != b->ctime)
		return a->ctime < b->ctime;
	return strcmp(a->id, b->id) < 0;
}

/* Runs cfs_names_assign over ents in the order given by ord; returns the
 * final names indexed like ents (malloc'd). */
static char **assign(struct ent *ents, size_t n, const size_t *ord)
{
	struct cfs_names_entry e[MAX_ENTRIES];
	for (size_t i = 0; i < n; i++) {
		e[i].name = ents[ord[i]].name;
		e[i].id = ents[ord[i]].id;
		e[i].ctime_ns = ents[ord[i]].ctime;
		e[i].final = NULL;
	}
	int rc = cfs_names_assign(e, n);
	assert(rc == 0);
	char **fin = calloc(n ? n : 1, sizeof(*fin));
	assert(fin);
	for (size_t i = 0; i < n; i++) {
		assert(e[i].name == ents[ord[i]].name); /* order unchanged */
		assert(e[i].final != NULL);
		fin[ord[i]] = e[i].final;
	}
	return fin;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len = size;
	const void *nul = memchr(data, 0, size);
	if (nul)
		len = (size_t)((const uint8_t *)nul - data);
	char *in = malloc(len + 1);
	if (!in)
		return 0;
	memcpy(in, data, len);
	in[len] = '\0';

	/* 1. the whole input as one name */
	char out[CFS_NAME_MAX + 1];
	assert(cfs_names_sanitize(in, out, sizeof(out)) == 0);
	check_name(out, valid_utf8((const unsigned char *)in, len));
	assert(cfs_names_sanitize(in, out, CFS_NAME_MAX) == -EINVAL); /* cap too small */

	/* 2. the lines as the entries of one folder */
	struct ent ents[MAX_ENTRIES];
	size_t n = 0;
	char *save = in;
	for (size_t line = 0; save && n < MAX_ENTRIES; line++) {
		char *l = save;
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		save = nl ? nl + 1 : NULL;
		char *id = strchr(l, '\t'), *ct = NULL;
		if (id) {
			*id++ = '\0';
			if ((ct = strchr(id, '\t')))
				*ct++ = '\0';
		}
		char idbuf[32];
		if (!id || !*id) {
			snprintf(idbuf, sizeof(idbuf), "id%zu", line);
			id = idbuf;
		}
		int dup = 0;
		for (size_t j = 0; j < n; j++)
			dup |= strcmp(ents[j].id, id) == 0;
		if (dup)
			continue;
		char san[CFS_NAME_MAX + 1];
		assert(cfs_names_sanitize(l, san, sizeof(san)) == 0);
		check_name(san, valid_utf8((const unsigned char *)l, strlen(l)));
		ents[n].name = strdup(san);
		ents[n].id = strdup(id);
		ents[n].ctime = ct ? strtoll(ct, NULL, 10) : (int64_t)(line % 3);
		ents[n].utf8 = valid_utf8((const unsigned char *)san, strlen(san));
		assert(ents[n].name && ents[n].id);
		n++;
	}

	size_t fwd[MAX_ENTRIES], rev[MAX_ENTRIES];
	for (size_t i = 0; i < n; i++) {
		fwd[i] = i;
		rev[i] = n - 1 - i;
	}
	char **f1 = assign(ents, n, fwd);
	char **f2 = assign(ents, n, rev);
	for (size_t i = 0; i < n; i++) {
		check_name(f1[i], ents[i].utf8);
		assert(strcmp(f1[i], f2[i]) == 0); /* independent of listing order */
		int first = 1;
		for (size_t j = 0; j < n; j++) {
			if (j != i && strcmp(ents[j].name, ents[i].name) == 0 && earlier(&ents[j], &ents[i]))
				first = 0;
			if (j != i) {
				if (strcmp(f1[i], f1[j]) == 0)
					fprintf(stderr, "duplicate final name \"%s\": entries %zu (\"%s\", id "
						"\"%s\") and %zu (\"%s\", id \"%s\")\n", f1[i], i,
						ents[i].name, ents[i].id, j, ents[j].name, ents[j].id);
				assert(strcmp(f1[i], f1[j]) != 0);
			}
		}
		if (first)
			assert(strcmp(f1[i], ents[i].name) == 0);
	}
	for (size_t i = 0; i < n; i++) {
		free(f1[i]);
		free(f2[i]);
		free(ents[i].name);
		free(ents[i].id);
	}
	free(f1);
	free(f2);
	free(in);
	return 0;
}
