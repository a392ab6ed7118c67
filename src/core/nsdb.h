/* nsdb: the namespace rows kept in the cache index, so a remount lists at
 * once and works with Drive unreachable.
 *
 *   dirs   content id of a folder -> its listing (lrow.h format)
 *   inodes Drive id -> inode number (u64 LE);  inos: inode number -> Drive id
 *   meta   "next_ino" -> next free inode number; "root:" + asked root ->
 *          a one-entry listing row describing the resolved root folder;
 *          "iparent:" + u64 LE ino -> u64 LE inode number of the folder
 *          whose listing holds it (so a restarted server can rebuild any
 *          node the kernel still knows, parents first);
 *          "fh_block" -> u64 LE counter of file handle ranges handed out;
 *          "fh:" + u64 LE handle -> an open file's pinned identity (below),
 *          when the handle rows are kept in the index (see
 *          cfs_nsdb_fh_keep: by default, and for rows the shared table
 *          has no room for)
 * Inode numbers are handed out from the stored counter and never reused, so
 * they are stable across remounts.  File handle numbers likewise: a process
 * reserves CFS_NSDB_FH_RANGE numbers per (synced) counter write, so numbers
 * only grow, also across a server process killed and restarted under the
 * same mount.  Thread-safe. */
#ifndef CFS_NSDB_H
#define CFS_NSDB_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "lrow.h"

struct cfs_store;
struct cfs_nsdb;

int cfs_nsdb_new(struct cfs_store *s, struct cfs_nsdb **out);
void cfs_nsdb_free(struct cfs_nsdb *n);

/* Inode numbers of an index that replaced a damaged one (store.h) start at
 * resets << CFS_NSDB_RESET_SHIFT, so a number the kernel still holds from
 * before the reset can never name another file now. */
#define CFS_NSDB_RESET_SHIFT 40
/* 1 if ino (not the root) predates this index: handed out before a reset. */
int cfs_nsdb_ino_older(const struct cfs_nsdb *n, uint64_t ino);

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

/* Parent rows.  Makes "iparent" rows say parent for each of inos[0..count),
 * writing (in one write transaction) only rows missing or different.
 * Returns 0 or a store error. */
int cfs_nsdb_set_parents(struct cfs_nsdb *n, uint64_t parent, const uint64_t *inos,
			 size_t count);
/* -ENOENT when no row is stored for ino. */
int cfs_nsdb_get_parent(struct cfs_nsdb *n, uint64_t ino, uint64_t *parent);

/* File handle numbers: never 0, never handed out twice by one cache index
 * (the counter is synced before a range is used). */
#define CFS_NSDB_FH_RANGE 4096
int cfs_nsdb_fh_alloc(struct cfs_nsdb *n, uint64_t *fh);

/* What an open file was pinned to at open, so a restarted server serves the
 * same bytes.  Row: u32 magic "CFH1", u64 ino, i64 size, then 4 x (u16 length
 * + bytes): key, id, rev, export_mime. */
struct cfs_nsdb_fh {
	uint64_t ino;
	int64_t size;
	char key[2 * CFS_ID_MAX + 2]; /* block cache key: content id @ revision */
	char id[CFS_ID_MAX];          /* content id */
	char rev[CFS_ID_MAX];         /* headRevisionId downloads are pinned to, or "" */
	char export_mime[128];        /* non-empty: a native file, exported */
};
/* Where the rows go.  CFS_NSDB_FH_INDEX (the default): the cache index, a
 * synced write transaction per put and per delete.  CFS_NSDB_FH_SHARED: the
 * table t (fhtab.h: memory the supervisor keeps, which outlives a server
 * process and no more), and the index only for a row the table has no room
 * for.  CFS_NSDB_FH_NONE: nowhere (a server whose death ends the mount needs
 * no rows); a put succeeds and a get finds nothing.  Set before any row is
 * used; returns -EINVAL for SHARED without a table. */
enum cfs_nsdb_fh_where { CFS_NSDB_FH_INDEX = 0, CFS_NSDB_FH_SHARED, CFS_NSDB_FH_NONE };
struct cfs_fhtab;
int cfs_nsdb_fh_keep(struct cfs_nsdb *n, enum cfs_nsdb_fh_where where, struct cfs_fhtab *t);
/* Rows put in the index because the shared table had no room (counter). */
uint64_t cfs_nsdb_fh_overflowed(struct cfs_nsdb *n);

/* -EINVAL for strings too long for the struct. */
int cfs_nsdb_fh_put(struct cfs_nsdb *n, uint64_t fh, const struct cfs_nsdb_fh *r);
/* -ENOENT when absent; CFS_E_PROTO for a damaged row (dropped). */
int cfs_nsdb_fh_get(struct cfs_nsdb *n, uint64_t fh, struct cfs_nsdb_fh *r);
/* -ENOENT when absent. */
int cfs_nsdb_fh_del(struct cfs_nsdb *n, uint64_t fh);
/* Deletes every file handle row of the index: at a fresh mount the kernel holds none of
 * them (rows of a mount that ended uncleanly, or of an open whose server died
 * before replying, would otherwise stay forever).  Never on a server restart
 * under a live mount.  *deleted (may be NULL): how many. */
int cfs_nsdb_fh_clear(struct cfs_store *s, uint64_t *deleted);

#endif
