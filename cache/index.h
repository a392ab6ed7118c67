/* index: the LMDB environment of the cache folder ("index.mdb", 0600).
 *
 * Owns every use of LMDB.  Named databases ("tables"):
 *   blocks  key "<content key>\0<block number, 8 bytes big-endian>" -> a
 *           32-byte row (struct cfs_fmt_row; codecs in format.h, layout in
 *           store.h)
 *   dirs, inodes, inos, meta   rows of the namespace, opaque here
 *   store   the store's own header row
 * The environment is opened MDB_NOSUBDIR | MDB_NOTLS | MDB_NOMETASYNC: any
 * thread may use any call; a commit is crash-safe, and after a system crash at
 * most the last commit may be undone (cfs_index_next syncs, so counters are
 * durable).  With CFS_IX_NOSYNC (cfs_index_open_flags) it is opened
 * MDB_NOSYNC instead: a commit is written to the file but not flushed, so it
 * survives the death of the process (the kernel holds the pages) but not
 * that of the machine, after which the file may be damaged, not only behind;
 * cfs_index_sync flushes it.  Every write is one short transaction.  When the map is full it is
 * grown (doubled, up to map_max) and the transaction is run again; a map that
 * cannot grow, or a full file system, gives -ENOSPC.  MDB_* codes never leave
 * this module: -ENOENT (absent), -EINVAL (bad size), -ENOSPC, -EAGAIN (reader
 * slots full), -EIO (anything else), and at open -EUCLEAN for a file that is
 * not a valid environment (the caller may remove it and start afresh). */
#ifndef CFS_INDEX_H
#define CFS_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

enum cfs_index_table {
	CFS_IX_BLOCKS,
	CFS_IX_DIRS,
	CFS_IX_INODES,
	CFS_IX_INOS,
	CFS_IX_META,
	CFS_IX_STORE,
	CFS_IX_NTABLES
};

struct cfs_index;

struct cfs_index_bkey {
	const char *key;
	uint64_t block;
};

struct cfs_index_kv {
	int table;
	const void *k;
	size_t kl;
	const void *v;
	size_t vl;
};

/* map_size: initial map (bytes, multiple of the page size); map_max: the most
 * it may grow to. */
int cfs_index_open(const char *path, uint64_t map_size, uint64_t map_max, struct cfs_index **out);
#define CFS_IX_NOSYNC 1u /* commits not flushed to disk (MDB_NOSYNC): see above */
int cfs_index_open_flags(const char *path, uint64_t map_size, uint64_t map_max, unsigned flags,
			 struct cfs_index **out);
/* Flushes every commit so far to disk (fdatasync of the file, meta pages
 * included): after it they survive a system crash.  -EIO on failure. */
int cfs_index_sync(struct cfs_index *ix);
/* Reads every row of every table (keys and the ends of values, so every
 * page of the file that holds data is touched once) in one read transaction;
 * with_blocks 0 leaves out the blocks table (the store's rebuild reads it).
 * -EUCLEAN when LMDB reports the file corrupt.  A damaged page can also crash
 * the reading process (LMDB follows page numbers it trusts): the store opens
 * the index inside a marker file for that reason (store.h).  *rows (may be
 * NULL): rows read. */
int cfs_index_check(struct cfs_index *ix, int with_blocks, uint64_t *rows);
/* 0 if a file of path's size holds pages 0..last_pgno of psize bytes, else
 * -EUCLEAN (or -errno from stat).  Used at open, here and by the GPU loader. */
int cfs_index_pages_present(const char *path, uint64_t last_pgno, uint64_t psize);
void cfs_index_close(struct cfs_index *ix); /* NULL-safe */
uint64_t cfs_index_map_size(struct cfs_index *ix);

/* The table id of a namespace table name ("dirs", "inodes", "inos", "meta"),
 * or -EINVAL.  "blocks" and "store" are not reachable by name. */
int cfs_index_table(const char *name);

/* Block rows (struct cfs_fmt_row, format.h).  key: 1..CFS_FMT_KEY_MAX bytes,
 * NUL-terminated. */
int cfs_index_block_put(struct cfs_index *ix, const char *key, uint64_t block,
			const struct cfs_fmt_row *row);
/* Deletes n rows in one transaction; absent rows are fine. */
int cfs_index_block_del(struct cfs_index *ix, const struct cfs_index_bkey *k, size_t n);
/* Calls fn for every block row in key order from one read transaction; rows
 * whose key is malformed are deleted instead.  fn returns 0 to go on or a
 * negative status to stop (returned). */
typedef int (*cfs_index_scan_fn)(void *arg, const char *key, uint64_t block, const void *row,
				 size_t rowlen);
int cfs_index_block_scan(struct cfs_index *ix, cfs_index_scan_fn fn, void *arg);
/* Deletes every block row. */
int cfs_index_block_clear(struct cfs_index *ix);

/* Generic rows (any table).  cfs_index_get returns a malloc'd copy. */
int cfs_index_put(struct cfs_index *ix, int table, const void *k, size_t kl, const void *v,
		  size_t vl);
int cfs_index_get(struct cfs_index *ix, int table, const void *k, size_t kl, void **v, size_t *vl);
int cfs_index_del(struct cfs_index *ix, int table, const void *k, size_t kl);
/* Deletes every row of table whose key starts with p (1..511 bytes), in one
 * write transaction; *deleted (may be NULL): how many. */
int cfs_index_del_prefix(struct cfs_index *ix, int table, const void *p, size_t pl,
			 uint64_t *deleted);
/* Puts n rows in one transaction; a row with v NULL and vl CFS_IX_DELETE is
 * deleted instead (absent is fine). */
#define CFS_IX_DELETE ((size_t)-1)
int cfs_index_put_many(struct cfs_index *ix, const struct cfs_index_kv *kv, size_t n);
/* Calls fn for every row of table whose key starts with p (1..511 bytes), in
 * key order, in one read transaction (fn must not write to ix).  fn returns
 * 0 to go on, 1 to stop, or a negative status, which is returned. */
typedef int (*cfs_index_row_fn)(void *arg, const void *k, size_t kl, const void *v, size_t vl);
int cfs_index_scan_prefix(struct cfs_index *ix, int table, const void *p, size_t pl,
			  cfs_index_row_fn fn, void *arg);
/* Counter row (8 bytes little-endian) in table: absent -> start, else +1;
 * stored and synced before returning the new value in *out. */
int cfs_index_next(struct cfs_index *ix, int table, const void *k, size_t kl, uint64_t start,
		   uint64_t *out);

#endif
