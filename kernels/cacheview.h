/* cacheview: read-only access to a cache folder that a running daemon owns
 * (internal to libcolabfs-gpu; layout in cache/store.h, read through the
 * store's own codecs in cache/format.h).
 *
 * Owns the loader's use of LMDB: the environment is opened MDB_RDONLY |
 * MDB_NOSUBDIR | MDB_NOTLS (the daemon opens it MDB_NOSUBDIR | MDB_NOTLS |
 * MDB_NOMETASYNC; a reader needs neither write access to index.mdb nor the
 * store.lock flock), and a map the daemon grew is adopted when a read
 * transaction begins (MDB_MAP_RESIZED).  The arenas are mapped PROT_READ,
 * MAP_SHARED, to their size at mapping time; a slot past the mapped end maps
 * the file again (arenas only grow; a reset of the cache unlinks and recreates
 * them, seen as a new epoch in the header row or a new inode).  Old mappings
 * stay until close, so a pointer handed out stays valid.  Reading a slot the
 * daemon punched gives zeros, never SIGBUS.
 *
 * Rows are checked against the class scheme (cache/classes.h, recorded in the
 * header row): a class code above the top one of the block size, or a length
 * above its class's size, reads as a miss, so no pointer handed out reaches
 * past its slot.  Arenas are by class code; a class no block used has none.
 *
 * An index is never read while the daemon's marker says an open is checking
 * it (-EAGAIN: try again once the mount serves), nor when its meta page names
 * pages past the file's end (-EPROTO: a truncated index, which the daemon
 * moves aside); either would be SIGBUS through the map (store.h).
 *
 * Every function may be called from any thread; a txn belongs to one thread.
 * Returns 0 or -errno (-ENOENT absent, -EIO for MDB errors, -EBUSY when this
 * process already has the folder open). */
#ifndef CFS_CACHEVIEW_H
#define CFS_CACHEVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "format.h" /* struct cfs_fmt_row: a block row */

struct cfs_cview;
struct cfs_cview_txn; /* a read transaction */

int cfs_cview_open(const char *dir, struct cfs_cview **out);
void cfs_cview_close(struct cfs_cview *v); /* NULL-safe */
uint32_t cfs_cview_block_size(const struct cfs_cview *v);

/* Begins a read transaction on the latest commit. */
int cfs_cview_begin(struct cfs_cview *v, struct cfs_cview_txn **t);
void cfs_cview_end(struct cfs_cview_txn *t); /* NULL-safe */

/* The row of (key, block), or -ENOENT. */
int cfs_cview_block(struct cfs_cview_txn *t, const char *key, uint64_t block,
		    struct cfs_fmt_row *row);
/* A row of "dirs" or "meta": *val points into the map, valid until the txn
 * ends.  -ENOENT if absent. */
int cfs_cview_get(struct cfs_cview_txn *t, const char *table, const void *k, size_t kl,
		  const void **val, size_t *vl);
/* Calls fn for every "meta" row whose key starts with prefix, in key order;
 * fn returns 0 to go on, anything else stops (and is returned). */
typedef int (*cfs_cview_row_fn)(void *arg, const void *k, size_t kl, const void *v, size_t vl);
int cfs_cview_scan_meta(struct cfs_cview_txn *t, const char *prefix, cfs_cview_row_fn fn,
			void *arg);

/* Address of the first byte of a row's slot in a read-only mapping that
 * covers [slot * size, slot * size + row->len); NULL when the arena cannot be
 * mapped that far (the row then reads as a miss). */
const unsigned char *cfs_cview_slot(struct cfs_cview *v, const struct cfs_fmt_row *row);

/* Calls fn for every block row, in key order (key NUL-terminated, valid
 * during the call); fn returns 0 to go on, anything else stops (returned).
 * Rows it does not understand are skipped. */
typedef int (*cfs_cview_block_fn)(void *arg, const char *key, uint64_t block,
				  const struct cfs_fmt_row *row);
int cfs_cview_scan_blocks(struct cfs_cview_txn *t, cfs_cview_block_fn fn, void *arg);

/* The daemon's access count of the row's slot (heat.dat, cache/heat.h), 0
 * when there is none.  The file is mapped on first use and again when the
 * daemon made a new one (another epoch).  A hint only. */
uint32_t cfs_cview_heat(struct cfs_cview *v, const struct cfs_fmt_row *row);

/* The whole read-only mapping that cfs_cview_slot(row) points into (for CUDA
 * registration): base and length; -ENOENT when there is none. */
int cfs_cview_slot_map(struct cfs_cview *v, const struct cfs_fmt_row *row, const void **base,
		       size_t *len);

#endif
