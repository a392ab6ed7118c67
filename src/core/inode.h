/* inode: the table of nodes the kernel knows, by inode number and Drive id.
 *
 * The same Drive item always has the same inode number (1 is the root); the
 * numbers come from the caller (vfs keeps them in the cache index so they
 * survive remounts) and are never reused.
 * Nodes are not freed before the table is (the kernel may hold any of them),
 * so a struct cfs_node pointer stays valid for the table's life.  Mutable node
 * fields are protected by the table lock (cfs_inode_lock); a directory's
 * listing is an immutable, reference-counted snapshot that is swapped whole.
 * A node's string fields (content_id, rev) are replaced, and the old string
 * freed, by the cfs_node_set_* calls: read or copy them with the lock held.
 * Lookups by number and by id are O(1) hash probes. */
#ifndef CFS_INODE_H
#define CFS_INODE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"

#define CFS_ROOT_INO 1

struct cfs_dirent {
	char *name;
	uint64_t ino;
	int is_dir;
};

struct cfs_listing {
	int refs;        /* atomic */
	size_t n;
	struct cfs_dirent e[]; /* sorted by name (strcmp) */
};

/* The per-folder part of a node (folders only). */
struct cfs_dir {
	struct cfs_listing *listing;  /* NULL: never listed */
	int64_t listed_at_ms;
	int listing_busy;             /* a thread is fetching the listing */
	unsigned expired;             /* bumped when a change makes the listing stale */
	int64_t changed_ns;           /* an entry was added, removed or renamed here, through
				       * this mount (memory only; 0: never); see cfs_node_mtime */
};

/* One node: about 200 bytes with a 33-character id, plus its rev string
 * (the common file in a large folder), where it was over 1 KB with every
 * string in a fixed array.  Strings are right-sized: id lives in the node,
 * content_id is the same pointer when equal (not a shortcut), rev is its own
 * allocation, export_mime an interned string.  Set them only through the
 * cfs_node_set_* functions (lock held). */
struct cfs_node {
	uint64_t ino;
	uint64_t parent;
	uint64_t prev_parent;         /* the folder it was listed in before a move, or 0 */
	const char *content_id;       /* what to download or list (a shortcut's target) */
	const char *rev;              /* content identity: headRevisionId, md5 or version; "" */
	const char *export_mime;      /* non-empty: a native file shown exported; never NULL */
	struct cfs_dir *dir;          /* folders (is_dir) only, else NULL */
	int64_t size;                 /* -1: not known yet (exports) */
	int64_t mtime_ns;             /* Drive's modifiedTime (or what was set here since) */
	int64_t ctime_ns;             /* createdTime, or later: see cfs_node_ctime */
	int64_t atime_ns;             /* set by utimensat (memory only), when has_atime */
	uint64_t opened_rev;          /* cfs_node_rev_hash when last opened (kernel cache); 0: none */
	uint64_t checked_rev;         /* ... of the rev whose cached copy passed the whole-file check */
	size_t lpos;                  /* position in its folder's sorted listing */
	uint16_t pin_gen;             /* open-less mounts: the node id's generation when
				       * pin_override (vfs_pin.c) */
	unsigned char md5[16], sha256[32]; /* whole-file checksums from Drive (see has_*) */
	unsigned is_dir : 1;
	unsigned stale : 1;           /* a read found rev no longer current: refresh at open */
	unsigned has_md5 : 1, has_sha256 : 1;
	unsigned has_atime : 1;       /* else the mtime shown is the atime */
	unsigned pin_known : 1, pin_override : 1; /* its override row looked for, found */
	unsigned unlinked : 1;        /* removed here (unlink, rmdir, replaced by a rename)
				       * while the kernel may hold it open: st_nlink 0;
				       * placed in a folder again: cleared (cfs_node_place) */
	char id[];                    /* the item's own Drive id */
};

/* Lists n in folder parent (lock held): what every listing, create and
 * rename that names n does, so a node unlinked once and named again (a
 * Drive file untrashed, say) shows its link again. */
static inline void cfs_node_place(struct cfs_node *n, uint64_t parent)
{
	n->parent = parent;
	n->unlinked = 0;
}

struct cfs_inode;

int cfs_inode_new(struct cfs_inode **out);
void cfs_inode_free(struct cfs_inode *t);

void cfs_inode_lock(struct cfs_inode *t);
void cfs_inode_unlock(struct cfs_inode *t);
/* Waits on the table's condition variable (lock held); woken by _broadcast. */
void cfs_inode_wait(struct cfs_inode *t);
void cfs_inode_broadcast(struct cfs_inode *t);

/* Lock held.  The node for ino, or NULL. */
struct cfs_node *cfs_inode_get(struct cfs_inode *t, uint64_t ino);
/* Lock held.  The node for Drive id, or NULL. */
struct cfs_node *cfs_inode_find(struct cfs_inode *t, const char *id);
/* Lock held.  Creates the node (zeroed but for ino and id, content_id = id,
 * rev and export_mime "", size -1); ino must be new.  NULL on -ENOMEM, an id
 * too long or an ino already taken. */
struct cfs_node *cfs_inode_add(struct cfs_inode *t, const char *id, uint64_t ino);
/* Number of nodes. */
uint64_t cfs_inode_count(struct cfs_inode *t);

/* Node fields (lock held).  Each returns 0 or -ENOMEM (the node keeps its
 * old value).  content_id: an id too long is -ENAMETOOLONG.  export_mime is
 * interned in the table (few distinct values), "" or NULL for none. */
int cfs_node_set_content_id(struct cfs_node *n, const char *content_id);
int cfs_node_set_rev(struct cfs_node *n, const char *rev);
int cfs_node_set_export_mime(struct cfs_inode *t, struct cfs_node *n, const char *mime);
/* Makes n a folder (allocates its folder part once).  0 or -ENOMEM. */
int cfs_node_make_dir(struct cfs_node *n);
/* Stores Drive's hex checksums ("" or anything but lowercase or uppercase hex
 * of the right length: absent). */
void cfs_node_set_sums(struct cfs_node *n, const char *md5_hex, const char *sha256_hex);
/* The checksums as lowercase hex, "" when absent. */
void cfs_node_md5_hex(const struct cfs_node *n, char out[33]);
void cfs_node_sha256_hex(const struct cfs_node *n, char out[65]);
/* A 64-bit hash of the node's rev, never 0 (for opened_rev, checked_rev:
 * compared for equality only; a false match has probability 2^-64). */
uint64_t cfs_node_rev_hash(const struct cfs_node *n);

/* Times (lock held).  Drive keeps one time per item, modifiedTime (to the
 * millisecond; a folder's does not move when its entries change); the rest
 * lives in the node, in memory only, and a remount starts again from Drive's.
 *  - mtime: mtime_ns; a folder's is the later of that and the last change of
 *    an entry in it here (cfs_node_dir_changed).
 *  - ctime: never earlier than the mtime shown, nor than createdTime or any
 *    ctime shown before (it only moves forward); cfs_node_changed and
 *    cfs_node_dir_changed move it to now.
 *  - atime: what utimensat set, else the mtime shown (reads do not move it). */
int64_t cfs_node_mtime(const struct cfs_node *n);
/* The ctime to show when the mtime shown is mtime_ns (which may be a staged
 * file's, not the node's); kept in the node, so it never goes back. */
int64_t cfs_node_ctime(struct cfs_node *n, int64_t mtime_ns);
int64_t cfs_node_atime(const struct cfs_node *n, int64_t mtime_ns);
void cfs_node_set_atime(struct cfs_node *n, int64_t atime_ns);
/* n's status changed at now_ns (a rename, a time set): its ctime becomes
 * now_ns, or 1 ns past the one shown before when the clock has not moved
 * past it (so every change is seen, whatever the clock's resolution). */
void cfs_node_changed(struct cfs_node *n, int64_t now_ns);
/* An entry of folder n was added, removed or renamed at now_ns: its mtime
 * and ctime both become now_ns, or 1 ns past the later of those shown
 * before.  Does nothing to a node that is not a folder. */
void cfs_node_dir_changed(struct cfs_node *n, int64_t now_ns);
/* utimensat set n's mtime: a folder forgets its local changes (the time
 * set is shown, also when it is earlier). */
void cfs_node_set_mtime(struct cfs_node *n, int64_t mtime_ns);

/* Listing helpers. */
struct cfs_listing *cfs_listing_new(size_t n);
struct cfs_listing *cfs_listing_ref(struct cfs_listing *l);
void cfs_listing_unref(struct cfs_listing *l);
void cfs_listing_sort(struct cfs_listing *l);
/* Index of name in l, or -1. */
long cfs_listing_find(const struct cfs_listing *l, const char *name);
/* Index of the entry for ino in l, or -1 (a scan). */
long cfs_listing_find_ino(const struct cfs_listing *l, uint64_t ino);

#endif
