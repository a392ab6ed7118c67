/* lrow: the byte format of a stored folder listing (cache index "dirs" rows).
 *
 * A listing row keeps what colabfs needs to serve a folder with Drive
 * unreachable: for every entry its inode number, kind, size, times, name,
 * Drive id, content id, revision and export type.  Layout (little endian):
 *   u32 magic "CFL2", i64 fetched_at (wall ms), u32 n, then n entries of
 *   u64 ino, u8 is_dir, i64 size, i64 mtime_ns, i64 ctime_ns,
 *   7 x (u16 length + bytes, at most 1023): name, id, content_id, rev,
 *   export_mime, md5, sha256.
 * Decoding checks every length against the row, so a damaged row is
 * CFS_E_PROTO, never a crash (entries already passed to the callback must
 * then be dropped by the caller).  Pure code. */
#ifndef CFS_LROW_H
#define CFS_LROW_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct cfs_lrow_entry {
	uint64_t ino;
	int is_dir;
	int64_t size, mtime_ns, ctime_ns;
	const char *name, *id, *content_id, *rev, *export_mime;
	const char *md5, *sha256; /* whole-file checksums Drive gave, or "" */
};

int cfs_lrow_encode(const struct cfs_lrow_entry *e, size_t n, int64_t fetched_ms,
		    struct cfs_buf *out);

/* Calls cb for each entry (strings point into a scratch copy valid during the
 * call).  Returns 0, CFS_E_PROTO, -ENOMEM or cb's non-zero status. */
typedef int (*cfs_lrow_cb)(const struct cfs_lrow_entry *e, void *arg);
int cfs_lrow_decode(const void *row, size_t len, int64_t *fetched_ms, size_t *n, cfs_lrow_cb cb,
		    void *arg);

#endif
