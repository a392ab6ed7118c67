/* export: which Google-native files are shown, and as what.
 *
 * Drive's Docs Editors files have no bytes of their own; colabfs shows them as
 * exported files with an extension added to the name.  The map is set with
 * --export-formats, a comma list of KIND=EXT (KIND: document, spreadsheet,
 * presentation, drawing, script; EXT from the formats Drive can export that
 * kind to, or "none" to hide the kind).  Default:
 *   document=docx,spreadsheet=xlsx,presentation=pptx,drawing=pdf
 * Native types without an entry (forms, sites, maps, ...) are hidden.  Pure
 * code. */
#ifndef CFS_EXPORT_H
#define CFS_EXPORT_H

#include <stddef.h>

#define CFS_EXPORT_DEFAULT "document=docx,spreadsheet=xlsx,presentation=pptx,drawing=pdf"
#define CFS_EXPORT_KINDS 5

struct cfs_export_map {
	int fmt[CFS_EXPORT_KINDS]; /* index into the format table, -1: hidden */
};

/* Parses spec over the default map.  Returns 0 or -EINVAL with why set. */
int cfs_export_parse(const char *spec, struct cfs_export_map *m, char *why, size_t wcap);

/* For a Google-native mimeType: 0 and the extension (".docx") and export
 * mimeType, or -ENOENT when such files are hidden. */
int cfs_export_lookup(const struct cfs_export_map *m, const char *mime, const char **ext,
		      const char **export_mime);

#endif
