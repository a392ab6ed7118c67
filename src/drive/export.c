/* export: the native-file export map (see export.h). */
#include "export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kinds[CFS_EXPORT_KINDS] = { "document", "spreadsheet", "presentation",
						     "drawing", "script" };

struct fmt {
	const char *ext, *mime;
	unsigned kinds; /* bit i: kinds[i] can export to it */
};

#define K(i) (1u << (i))
static const struct fmt fmts[] = {
	{ "docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", K(0) },
	{ "odt", "application/vnd.oasis.opendocument.text", K(0) },
	{ "rtf", "application/rtf", K(0) },
	{ "epub", "application/epub+zip", K(0) },
	{ "html", "text/html", K(0) },
	{ "txt", "text/plain", K(0) | K(2) },
	{ "pdf", "application/pdf", K(0) | K(1) | K(2) | K(3) },
	{ "xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", K(1) },
	{ "ods", "application/vnd.oasis.opendocument.spreadsheet", K(1) },
	{ "csv", "text/csv", K(1) },
	{ "tsv", "text/tab-separated-values", K(1) },
	{ "pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation", K(2) },
	{ "odp", "application/vnd.oasis.opendocument.presentation", K(2) },
	{ "svg", "image/svg+xml", K(3) },
	{ "png", "image/png", K(3) },
	{ "jpg", "image/jpeg", K(3) },
	{ "json", "application/vnd.google-apps.script+json", K(4) },
};
#define NFMTS (sizeof(fmts) / sizeof(fmts[0]))

static int find_fmt(const char *ext, int kind)
{
	for (size_t i = 0; i < NFMTS; i++)
		if (strcmp(fmts[i].ext, ext) == 0 && (fmts[i].kinds & K(kind)))
			return (int)i;
	return -1;
}

static int parse_into(char *s, struct cfs_export_map *m, char *why, size_t wcap)
{
	for (char *save = NULL, *tok = strtok_r(s, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq) {
			snprintf(why, wcap, "export format \"%s\" is not KIND=EXT", tok);
			return -EINVAL;
		}
		*eq = '\0';
		int k = -1;
		for (int i = 0; i < CFS_EXPORT_KINDS; i++)
			if (strcmp(tok, kinds[i]) == 0)
				k = i;
		if (k < 0) {
			snprintf(why, wcap, "unknown native kind \"%s\" (document, spreadsheet, "
					    "presentation, drawing, script)", tok);
			return -EINVAL;
		}
		int f = strcmp(eq + 1, "none") == 0 ? -1 : find_fmt(eq + 1, k);
		if (f < 0 && strcmp(eq + 1, "none") != 0) {
			snprintf(why, wcap, "Drive cannot export a %s as \"%s\"", tok, eq + 1);
			return -EINVAL;
		}
		m->fmt[k] = f;
	}
	return 0;
}

int cfs_export_parse(const char *spec, struct cfs_export_map *m, char *why, size_t wcap)
{
	for (int i = 0; i < CFS_EXPORT_KINDS; i++)
		m->fmt[i] = -1;
	char def[] = CFS_EXPORT_DEFAULT;
	int rc = parse_into(def, m, why, wcap);
	if (rc || !spec || !*spec)
		return rc;
	char *s = strdup(spec);
	if (!s)
		return -ENOMEM;
	rc = parse_into(s, m, why, wcap);
	free(s);
	return rc;
}

int cfs_export_lookup(const struct cfs_export_map *m, const char *mime, const char **ext,
		      const char **export_mime)
{
	static const char prefix[] = "application/vnd.google-apps.";
	if (strncmp(mime, prefix, sizeof(prefix) - 1) != 0)
		return -ENOENT;
	for (int i = 0; i < CFS_EXPORT_KINDS; i++) {
		if (strcmp(mime + sizeof(prefix) - 1, kinds[i]) == 0 && m->fmt[i] >= 0) {
			*ext = fmts[m->fmt[i]].ext;
			*export_mime = fmts[m->fmt[i]].mime;
			return 0;
		}
	}
	return -ENOENT;
}
