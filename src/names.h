/* names: the rule that turns Drive names into unique, valid POSIX names.
 *
 * Drive names may contain '/', may be "." or "..", may be empty or very long,
 * and need not be unique in a folder.  The rule (documented in colabfs(1)):
 *   1. '/' becomes U+FF0F (FULLWIDTH SOLIDUS); a name that is exactly "." or
 *      ".." becomes U+FF0E once or twice; an empty name becomes "_"; a name
 *      longer than 255 bytes is cut at a UTF-8 boundary.
 *   2. Among entries of one folder that end up with the same name, the one
 *      with the earliest createdTime (ties: the smallest id) keeps it; every
 *      other gets " (XXXXXXXX)" before its extension, XXXXXXXX being the first
 *      8 hex digits of the 64-bit FNV-1a hash of its Drive id.  The extension
 *      is what follows the last '.', unless that dot starts the name.  If
 *      such a name is taken too (a real name, or another suffixed one), the
 *      suffixed entry uses all 16 hex digits instead, and then its whole id.
 * The rule depends only on an entry's own id and the set of its namesakes, so
 * names are stable across listings and remounts.  Pure code, no I/O. */
#ifndef CFS_NAMES_H
#define CFS_NAMES_H

#include <stddef.h>
#include <stdint.h>

#define CFS_NAME_MAX 255

uint64_t cfs_names_fnv1a(const char *s);

/* Writes the sanitized form of name into out (cap >= CFS_NAME_MAX + 1).
 * Returns 0 or -EINVAL if cap is too small. */
int cfs_names_sanitize(const char *name, char *out, size_t cap);

struct cfs_names_entry {
	const char *name;  /* sanitized name (input) */
	const char *id;    /* Drive id (input) */
	int64_t ctime_ns;  /* createdTime (input) */
	char *final;       /* unique name (output, malloc'd; caller frees) */
};

/* Fills every entry's final name.  Returns 0 or -ENOMEM (then no final name
 * is set).  Entry order is not changed. */
int cfs_names_assign(struct cfs_names_entry *e, size_t n);

#endif
