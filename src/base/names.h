/* names: the rule that turns Drive names into unique, valid POSIX names.
 *
 * Drive names may contain '/', may be "." or "..", may be empty or very long,
 * and need not be unique in a folder.  The rule (documented in colabfs(1)):
 *   1. '/' becomes U+FF0F (FULLWIDTH SOLIDUS); a control character (U+0000 to
 *      U+001F, U+007F) becomes its Control Pictures sign (U+2400 + c, U+2421
 *      for DEL: a newline shows as U+240A); a name that is exactly "." or
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
 * names are stable across listings and remounts.
 *
 * The other way, a name the mount is asked to create (create, mkdir, the
 * target of a rename) must be one Drive takes and the mount can show as it
 * is: cfs_names_check refuses bytes that are not UTF-8 (Drive's names are
 * Unicode text, and JSON carries UTF-8 only) and names over CFS_NAME_MAX
 * bytes (Linux's NAME_MAX, the f_namemax the mount reports, the longest name
 * the rule above shows uncut; the journal's CFS_JOURNAL_NAME_MAX is larger).
 * Pure code, no I/O. */
#ifndef CFS_NAMES_H
#define CFS_NAMES_H

#include <stddef.h>
#include <stdint.h>

#define CFS_NAME_MAX 255

/* Writes the sanitized form of name into out (cap >= CFS_NAME_MAX + 1).
 * Returns 0 or -EINVAL if cap is too small. */
int cfs_names_sanitize(const char *name, char *out, size_t cap);

/* 1 when id is a Drive id, revision id or checksum as Drive writes them:
 * 1 to max - 1 characters of [A-Za-z0-9_-] (Drive's alphabet; what goes into
 * a cache key or a URL path must be nothing else).  0 otherwise. */
int cfs_names_id_ok(const char *id, size_t max);

/* 0 when name can be created in Drive as it is: 1 to CFS_NAME_MAX bytes of
 * well-formed UTF-8.  -ENAMETOOLONG past CFS_NAME_MAX bytes (checked first,
 * as lookup does); -EILSEQ for a byte sequence that is not UTF-8: a byte
 * UTF-8 never has (0xC0, 0xC1, 0xF5 to 0xFF), a continuation byte with no
 * start, a sequence cut short, an overlong form, a UTF-16 surrogate
 * (U+D800 to U+DFFF) or a code point past U+10FFFF; -EINVAL for an empty
 * name.  Control characters are valid UTF-8 and pass (see colabfs(1)). */
int cfs_names_check(const char *name);

struct cfs_names_entry {
	const char *name;  /* sanitized name (input) */
	const char *id;    /* Drive id (input) */
	int64_t ctime_ns;  /* createdTime (input) */
	char *final;       /* unique name (output, malloc'd; caller frees) */
};

/* Fills every entry's final name.  Returns 0 or -ENOMEM (then no final name
 * is set).  Entry order is not changed. */
int cfs_names_assign(struct cfs_names_entry *e, size_t n);

/* The name a conflicting upload of name gets (UTC time wall_s):
 * "stem (conflict YYYY-MM-DD HHMMSS).ext", the extension being what follows
 * the last dot (none for a dotfile's only dot).  The result fits in
 * CFS_NAME_MAX bytes and in cap: the stem is cut at a UTF-8 boundary (an
 * extension too long to keep beside the tag counts as stem).  0, -EINVAL
 * (wall_s not a time), or -ENAMETOOLONG when cap cannot hold even the tag. */
int cfs_names_conflict(const char *name, int64_t wall_s, char *out, size_t cap);

#endif
