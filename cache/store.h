/* store: the block cache — file bytes by (content key, block number) — and
 * the namespace rows kept next to it, in one cache folder.
 *
 * Policy.  Blocks are fixed-size pieces of a file's content (the last one may
 * be shorter); each goes into the smallest size class that holds it
 * (classes.h: eight per doubling from 64 B, so a slot wastes at most 1/8 of
 * itself above 512 B), and the budget counts class sizes, so it matches what
 * the arenas really occupy.  A put that would exceed the budget first evicts
 * the least recently used blocks; blocks being read (pinned) and blocks of
 * held keys (cfs_store_hold) are never evicted by it.  Blocks put cold
 * (cfs_store_put_cold: a file just uploaded) take only free room (or that
 * of older cold blocks never read) and go first.  A key whose content is no file's any more (a replaced revision, a
 * removed file) is retired (cfs_store_retire): its blocks go at once, or
 * when the last open file that holds or uses it is done.  When the file
 * system is full
 * (ENOSPC on tmpfs) or the index map cannot grow, the put evicts more and
 * tries again, and fails with -ENOSPC only when nothing is left to evict: the
 * caller then serves the bytes uncached.  Every block carries a crc32c,
 * checked on the first hit after open (or every hit with verify_always); a
 * mismatch drops the block and reads as a miss, never as wrong bytes.  Hits
 * touch only memory and the arena file (no index transaction): recency lives
 * in memory and restarts in an arbitrary but deterministic order.  Freed slots
 * are punched out so their memory goes back to tmpfs at once.
 *
 * Crash safety.  A put writes the slot, then commits the row; an eviction
 * commits the row's deletion before the slot is reused.  So a row never names
 * a slot that holds another block's bytes; a torn write is caught by the crc.
 * At open, rows that point past an arena's end, into a class above the block
 * size, hold more than their class, or name a slot another row already took
 * are dropped; slots no row names are free (and punched).
 *
 * A damaged index.  LMDB trusts the page numbers it finds, so a file with
 * valid meta pages and damaged data pages can crash the process reading it
 * (SIGBUS past the file's end, SIGSEGV on garbage), at every open.  So the
 * open reads the whole index (every table; the blocks by the rebuild) while
 * the marker file "index.checking" exists, and removes it when done.  An open
 * that finds the marker knows the last one died reading: it moves index.mdb
 * aside (index.mdb.damaged), removes the arenas and starts empty; so does an
 * open that finds pages past the file's end or LMDB saying the file is
 * corrupt.  Each such reset is logged and counted ("index.resets", shown as
 * index_resets).  The GPU loader refuses an index while the marker exists or
 * its pages are missing.
 *
 * On-disk layout (cache folder, all files 0600; integers little-endian unless
 * said otherwise; the constants and codecs are in format.h):
 *   index.mdb, index.mdb-lock   LMDB environment (MDB_NOSUBDIR), named dbs:
 *     "store"   key "header" -> 64 bytes: "CFSSTOR1", u32 version (2),
 *               u32 block_size, u64 epoch (opens so far), u32 class scheme
 *               (CFS_CLASS_SCHEME, classes.h), u32 class codes (top + 1),
 *               zeros to 64.  A header with another block size, version or
 *               scheme resets the block cache (logged): version 1 had
 *               power-of-4 classes (u32 nclasses, u32 class size[9] at 24).
 *     "blocks"  key "<content key>\0<u64 block number, big-endian>" (so all
 *               blocks of a key sort together, in order) -> 32-byte row:
 *                 0 u8 version (2)    1 u8 class code (classes.h; version 1:
 *                                       log2 of the slot size)
 *                 2 u16 flags (0)     4 u32 len (bytes stored, >= 1)
 *                 8 u32 crc32c of those bytes       12 u32 reserved (0)
 *                16 u64 slot number  24 u64 generation (epoch << 40 | count:
 *                                       unique per write, changes when a
 *                                       slot is rewritten)
 *     "dirs", "inodes", "inos", "meta"   namespace rows (cfs_store_meta_*)
 *   heat.dat    access counts per slot for the GPU loader (heat.h)
 *   store.lock  flock'd by the process that has the store open (writer)
 *   index.checking  exists while an open reads the index (see above)
 *   index.resets    how many damaged indexes were moved aside (decimal)
 *   index.mdb.damaged  the last one moved aside
 *   arena-<size>.dat   one per class that holds a block ("arena-576.dat",
 *               "arena-4k.dat", "arena-1m.dat"; naming in format.h): slot i
 *               of a class of size S is bytes [i*S, i*S + len).
 * A reader in another process (the GPU loader) opens the environment
 * read-only, maps the arenas read-only, looks a block up in "blocks", copies
 * len bytes from the slot and then checks the crc, or that the row is
 * unchanged (same slot and generation) in a fresh read transaction, since the
 * slot may be reused once its row is gone.
 *
 * Thread rules: every function may be called from any thread.  Returns 0,
 * -errno or CFS_E_*: -EINVAL for bad arguments (key empty or longer than
 * CFS_STORE_KEY_MAX, len 0 or above the block size, unknown table), -ENOENT
 * for a miss or an absent row, -ENOSPC as above, -ENOMEM, -EIO for an index or
 * arena failure. */
#ifndef CFS_STORE_H
#define CFS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

#define CFS_STORE_KEY_MAX CFS_FMT_KEY_MAX

struct cfs_store;

struct cfs_store_opts {
	const char *dir;          /* cache folder (exists, 0700); files created 0600 */
	uint32_t block_size;      /* power of two, 64 KiB..64 MiB; default 1 MiB when 0 */
	uint64_t budget;          /* byte budget for block data; 0 = half of what dir's file system
				   * has free at open plus what the arenas already use, at least
				   * 64 MiB */
	int verify_always;        /* 1: check crc32c on every hit; 0: on the first hit of a block
				   * after open */
};

/* Opens (creating) the store in o->dir.  An index that is not a valid LMDB
 * environment is removed and started afresh (logged).  -EBUSY if another
 * store keeps the folder open (an flock on "store.lock") for 3 s. */
int cfs_store_open(const struct cfs_store_opts *o, struct cfs_store **out);
void cfs_store_close(struct cfs_store *s); /* NULL-safe; no call may be running */
uint32_t cfs_store_block_size(const struct cfs_store *s);
uint64_t cfs_store_budget(const struct cfs_store *s);
/* Replaces the budget (>= 16 MiB, else -EINVAL), evicting least recently
 * used blocks down to it (and to the limit below) as evict_to does; freed_bytes
 * (may be NULL) gets the slot bytes freed. */
int cfs_store_set_budget(struct cfs_store *s, uint64_t budget, uint64_t *freed_bytes);
/* An effective budget below the budget while memory is short (memwatch.h):
 * puts keep used bytes under min(budget, limit); 0 lifts it.  Evicts
 * nothing by itself (cfs_store_evict_to does). */
void cfs_store_set_limit(struct cfs_store *s, uint64_t limit);

/* key: a file's content identity, a NUL-terminated string <= 200 bytes such
 * as "1AbC...@r:rev7" (Drive id, '@', revision).
 * Hit: copies bytes [off, off+len) of block `block` (clipped to the block's
 * stored length; *got may be 0 when off is past it) into buf, sets *got,
 * returns 0.  Miss: -ENOENT.  A block whose crc32c does not match (or whose
 * slot cannot be read) is dropped (index row and slot), counted in
 * crc_failures (crc mismatches only), and reported as a miss. */
int cfs_store_read(struct cfs_store *s, const char *key, uint64_t block, uint32_t off, uint32_t len,
		   char *buf, uint32_t *got);
/* Stores a block (1 <= len <= block_size; the last block of a file may be
 * shorter), replacing an existing one.  See the policy above for eviction and
 * -ENOSPC. */
int cfs_store_put(struct cfs_store *s, const char *key, uint64_t block, const void *data,
		  uint32_t len);
/* Like cfs_store_put, but the block is cold: it takes only free room and the
 * room of cold blocks of other keys never read (-ENOSPC when there is none:
 * no other eviction, no retry), and joins the LRU at its oldest end, the
 * first to go unless it is read.  For bytes cached on the chance they are
 * read (a file just uploaded): they never push out blocks that were read,
 * and a newer copy takes the place of an older one nobody read. */
int cfs_store_put_cold(struct cfs_store *s, const char *key, uint64_t block, const void *data,
		       uint32_t len);
/* Evicts every block whose key starts with prefix ("1AbC...@" = all revisions
 * of a file; "" = everything), pinned ones included (their slots are freed
 * when the last reader is done).  freed_* (either may be NULL) report blocks
 * and slot bytes (class sizes, the unit of the budget). */
int cfs_store_evict_prefix(struct cfs_store *s, const char *prefix, uint64_t *freed_bytes,
			   uint64_t *freed_blocks);
/* Evicts least recently used blocks until used bytes <= target, as far as
 * unpinned blocks of keys not held allow (still 0 if it cannot get there). */
int cfs_store_evict_to(struct cfs_store *s, uint64_t target, uint64_t *freed_bytes,
		       uint64_t *freed_blocks);
/* Bytes (stored lengths) of a key's blocks present, for "fully cached?"
 * checks and warm progress. */
uint64_t cfs_store_cached_bytes(struct cfs_store *s, const char *key);

/* 1 if the block is present (no I/O, no recency update, not verified). */
int cfs_store_has(struct cfs_store *s, const char *key, uint64_t block);

/* Holds a key (an open file): its blocks are not evicted for budget or
 * ENOSPC while held (evict_prefix still takes them).  Holds count; each
 * cfs_store_hold needs one cfs_store_release. */
int cfs_store_hold(struct cfs_store *s, const char *key);
void cfs_store_release(struct cfs_store *s, const char *key);
/* Uses a key without holding it (an open file too large to hold): its
 * blocks stay on the LRU, but a retirement waits for the last use.  Each
 * cfs_store_use needs one cfs_store_unuse. */
int cfs_store_use(struct cfs_store *s, const char *key);
void cfs_store_unuse(struct cfs_store *s, const char *key);
/* The key's content is no file's any more (a revision replaced, a file
 * removed): its blocks are evicted now when no hold or use has it, else
 * when the last hold or use goes (blocks put under it meanwhile join the
 * LRU's oldest end).  freed_bytes (may be NULL): slot bytes freed now.
 * 0 also for a key with no blocks. */
int cfs_store_retire(struct cfs_store *s, const char *key, uint64_t *freed_bytes);

struct cfs_store_stats {
	uint64_t used_bytes;     /* slot bytes in use (class sizes), <= budget */
	uint64_t budget;
	uint64_t effective;      /* min(budget, limit): what puts keep used under now */
	uint64_t blocks, keys;   /* blocks cached, keys with at least one */
	uint64_t hits, misses, puts;
	uint64_t evictions, evicted_bytes; /* blocks and slot bytes evicted */
	uint64_t retired;        /* blocks of those evicted by cfs_store_retire */
	uint64_t crc_failures, enospc_retries;
	uint64_t arena_bytes;    /* size of the arena files (sparse) */
	uint64_t counted_blocks; /* blocks with an access count in heat.dat (heat.h) */
	uint64_t counted_hits;   /* hits counted there since open */
	uint64_t index_resets;   /* damaged indexes this folder had moved aside, ever */
};
void cfs_store_stats(struct cfs_store *s, struct cfs_store_stats *out);

/* Metadata rows for the namespace (listings, inode numbers, change tokens) in
 * the same LMDB environment.  table: "dirs", "inodes", "inos" or "meta"; keys
 * 1..511 bytes.  A put replaces. */
int cfs_store_meta_put(struct cfs_store *s, const char *table, const void *k, size_t kl,
		       const void *v, size_t vl);
/* *v: a malloc'd copy (caller frees); -ENOENT if absent. */
int cfs_store_meta_get(struct cfs_store *s, const char *table, const void *k, size_t kl, void **v,
		       size_t *vl);
/* -ENOENT if absent. */
int cfs_store_meta_del(struct cfs_store *s, const char *table, const void *k, size_t kl);
/* Deletes every row whose key starts with p; *deleted (may be NULL): how many. */
int cfs_store_meta_del_prefix(struct cfs_store *s, const char *table, const void *p, size_t pl,
			      uint64_t *deleted);
/* Several puts in one write transaction (a listing with its inode rows). */
struct cfs_store_kv {
	const char *table;
	const void *k;
	size_t kl;
	const void *v;
	size_t vl;
};
int cfs_store_meta_put_many(struct cfs_store *s, const struct cfs_store_kv *kv, size_t n);
/* uint64 counter in "meta" (key: name without its NUL; value 8 bytes
 * little-endian), incremented atomically and durably (synced): start if
 * absent, else the stored value + 1; the new value in *out. */
int cfs_store_meta_next(struct cfs_store *s, const char *name, uint64_t start, uint64_t *out);

#endif
