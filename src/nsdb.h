/* nsdb: the namespace rows kept in the cache index, so a remount lists at
 * once and works with Drive unreachable.
 *
 *   dirs   content id of a folder -> its listing (lrow.h format)
 *   inodes Drive id -> inode number (u64 LE);  inos: inode number -> Drive id
 *   meta   "next_ino" -> next free inode number; "root:" + asked root ->
 *          a one-entry listing row describing the resolved root folder
 * Inode numbers are handed out from the stored counter and never reused, so
 * they are stable across remounts.  Thread-safe. */
#ifndef CFS_NSDB_H
#define CFS_NSDB_H

#include <stddef.h>
#include <stdint.h>

#include "lrow.h"

struct cfs_store;
struct cfs_nsdb;

int cfs_nsdb_new(struct cfs_store *s, struct cfs_nsdb **out);
void cfs_nsdb_free(struct cfs_nsdb *n);

/* Fills inos[i] for ids[i]: the stored number, else a new one (stored in one
 * write transaction with the others).  Returns 0 or a store error. */
int cfs_nsdb_inos(struct cfs_nsdb *n, const char *const *ids, size_t count, uint64_t *inos);

int cfs_nsdb_save_listing(struct cfs_nsdb *n, const char *content_id,
			  const struct cfs_lrow_entry *e, size_t count, int64_t fetched_ms);
/* -ENOENT when nothing is stored; CFS_E_PROTO for a damaged row (dropped). */
int cfs_nsdb_load_listing(struct cfs_nsdb *n, const char *content_id, int64_t *fetched_ms,
			  cfs_lrow_cb cb, void *arg);

int cfs_nsdb_save_root(struct cfs_nsdb *n, const char *asked, const struct cfs_lrow_entry *root);
int cfs_nsdb_load_root(struct cfs_nsdb *n, const char *asked, cfs_lrow_cb cb, void *arg);

#endif
