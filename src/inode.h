/* inode: the table of nodes the kernel knows, by inode number and Drive id.
 *
 * The same Drive item always has the same inode number (1 is the root); the
 * numbers come from the caller (vfs keeps them in the cache index so they
 * survive remounts) and are never reused.
 * Nodes are not freed before the table is (the kernel may hold any of them),
 * so a struct cfs_node pointer stays valid for the table's life.  Mutable node
 * fields are protected by the table lock (cfs_inode_lock); a directory's
 * listing is an immutable, reference-counted snapshot that is swapped whole.
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

struct cfs_node {
	uint64_t ino;
	uint64_t parent;
	uint64_t prev_parent;         /* the folder it was listed in before a move, or 0 */
	char id[CFS_ID_MAX];          /* the item's own Drive id */
	char content_id[CFS_ID_MAX];  /* what to download or list (a shortcut's target) */
	int is_dir;
	char export_mime[128];        /* non-empty: a native file shown exported */
	int64_t size;                 /* -1: not known yet (exports) */
	int64_t mtime_ns, ctime_ns;
	char rev[CFS_ID_MAX];         /* content identity: headRevisionId, md5 or version */
	char opened_rev[CFS_ID_MAX];  /* rev when last opened (kernel cache validity) */
	char md5[33], sha256[65];     /* whole-file checksums from Drive, or "" */
	char checked_rev[CFS_ID_MAX]; /* rev whose cached copy passed the whole-file check */
	int stale;                    /* a read found rev no longer current: refresh at open */
	size_t lpos;                  /* position in its folder's sorted listing */
	/* folders: files opened in listing order trigger prefetch of the next ones */
	size_t last_open;             /* listing position of the last file opened + 1; 0: none */
	unsigned open_streak;
	/* directories */
	struct cfs_listing *listing;  /* NULL: never listed */
	int64_t listed_at_ms;
	int listing_busy;             /* a thread is fetching the listing */
	unsigned expired;             /* bumped when a change makes the listing stale */
};

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
/* Lock held.  Creates the node (zeroed but for ino and id, size -1); ino must
 * be new.  NULL on -ENOMEM, an id too long or an ino already taken. */
struct cfs_node *cfs_inode_add(struct cfs_inode *t, const char *id, uint64_t ino);
/* Number of nodes. */
uint64_t cfs_inode_count(struct cfs_inode *t);

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
