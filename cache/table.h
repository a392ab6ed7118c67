/* table: the store's in-memory view of the cache, rebuilt from the index at
 * open.  Two hash tables and a list:
 *   keys     content key -> struct cfs_tkey (its live blocks, their bytes)
 *   blocks   (key, block number) -> struct cfs_tent (class, slot, len, crc)
 *   LRU      live entries of keys nobody holds, most recent first
 * A retired key (its content is no file's any more) is dropped by the store
 * once no hold or use has it; until then its entries join the LRU at the
 * oldest end.
 * An entry is LIVE while it is in the hash; EVICTING once an eviction took it
 * out and is deleting its index row; DEAD once its row is gone (the last
 * reader to unpin it frees its slot).  Not thread-safe: the store's lock
 * covers every call.  Allocation failure is reported as NULL / -ENOMEM; a hash
 * that cannot grow just keeps longer chains. */
#ifndef CFS_TABLE_H
#define CFS_TABLE_H

#include <stddef.h>
#include <stdint.h>

enum cfs_tent_state { CFS_TENT_NEW, CFS_TENT_LIVE, CFS_TENT_EVICTING, CFS_TENT_DEAD };

struct cfs_tent;

struct cfs_tkey {
	struct cfs_tkey *hnext;
	uint64_t hash;
	uint64_t refs;          /* entries that point here (any state) + holds */
	uint64_t nblocks;       /* live entries */
	uint64_t bytes;         /* sum of their len */
	uint32_t holds;         /* >0: entries stay out of the LRU */
	uint32_t users;         /* uses (opens that do not hold): retirement waits */
	uint8_t retired;        /* cfs_table_retire found it held or used */
	struct cfs_tent *first; /* live entries, unordered */
	char name[];
};

struct cfs_tent {
	struct cfs_tent *hnext;
	struct cfs_tent *lprev, *lnext; /* LRU; lprev NULL when not in it */
	struct cfs_tent *kprev, *knext; /* the key's list of live entries */
	struct cfs_tkey *key;
	uint64_t hash, block, slot, gen;
	uint32_t len, crc, pins;
	uint8_t cls;       /* size class code (classes.h), the index of its arena */
	uint8_t state;     /* enum cfs_tent_state */
	uint8_t verified;  /* crc checked since open */
	uint8_t cold;      /* put cold (cfs_store_put_cold) and not read since */
	uint8_t leak;      /* its row could not be deleted: never reuse the slot */
};

struct cfs_table {
	struct cfs_tent **eb;
	size_t emask, ecount;    /* buckets - 1, live entries */
	struct cfs_tkey **kb;
	size_t kmask, kcount;    /* buckets - 1, keys (any) */
	size_t klive;            /* keys with live entries */
	struct cfs_tent lru;     /* sentinel: lru.lnext newest, lru.lprev oldest */
};

int cfs_table_init(struct cfs_table *t);
/* Frees every entry still linked and every key.  Safe on a zeroed table. */
void cfs_table_cleanup(struct cfs_table *t);

struct cfs_tkey *cfs_table_key(struct cfs_table *t, const char *key);
struct cfs_tent *cfs_table_find(struct cfs_table *t, const struct cfs_tkey *k, uint64_t block);
/* A new, unlinked entry (state NEW) that references key (created if
 * needed); NULL if out of memory. */
struct cfs_tent *cfs_table_new(struct cfs_table *t, const char *key, uint64_t block);
/* Makes a NEW/EVICTING entry LIVE: hashed, on its key's list and, unless its
 * key is held, on the LRU (newest end, or oldest end if old != 0).  The
 * caller makes sure no live entry has the same key and block. */
void cfs_table_link(struct cfs_table *t, struct cfs_tent *e, int old);
/* Takes a LIVE entry out of every list; its state becomes `state`. */
void cfs_table_unlink(struct cfs_table *t, struct cfs_tent *e, enum cfs_tent_state state);
/* Frees an unlinked entry and drops its key reference. */
void cfs_table_free(struct cfs_table *t, struct cfs_tent *e);
/* A read: moves a live entry to the newest end of the LRU (if it is on it);
 * it is no longer cold. */
void cfs_table_touch(struct cfs_table *t, struct cfs_tent *e);

/* Key holds: a held key's entries are not on the LRU.  Uses: counted only.
 * Release and unuse return 1 when the key is retired and nothing holds or
 * uses it any more (the caller retires it again to drop its entries). */
int cfs_table_hold(struct cfs_table *t, const char *key);
int cfs_table_release(struct cfs_table *t, const char *key);
int cfs_table_use(struct cfs_table *t, const char *key);
int cfs_table_unuse(struct cfs_table *t, const char *key);

/* Retires key: when a hold or use has it, marks it (its entries move to the
 * oldest end of the LRU, unless held) and returns 0; else unlinks (state
 * EVICTING) up to max of its live entries, pinned ones too, and returns how
 * many. */
size_t cfs_table_retire(struct cfs_table *t, const char *key, struct cfs_tent **out, size_t max);

/* Unlinks (state EVICTING) up to max live entries whose key starts with
 * prefix, scanning key buckets from *cursor on; returns how many and moves
 * *cursor.  A scan is over when *cursor > kmask. */
size_t cfs_table_take_prefix(struct cfs_table *t, const char *prefix, size_t *cursor,
			     struct cfs_tent **out, size_t max);

#endif
