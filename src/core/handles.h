/* handles: this process's open file and folder handles, by number.
 *
 * The number is what the kernel holds (fi->fh) and sends back with every
 * read, readdir and release.  The owner embeds a struct cfs_handle in its
 * own object (first member or not) and registers it; the table maps the
 * number back to it in O(1) (chained hash, doubled at load 1).
 *
 * Lifetime: a handle is reference-counted.  The table holds one reference
 * while the handle is registered; cfs_handles_add and cfs_handles_get give
 * the caller one more; cfs_handles_remove takes the handle out of the table
 * and hands the table's reference to the caller.  Whoever drops the last
 * reference (cfs_handles_unref returns 1) frees the object, so a release
 * racing a read frees nothing the read still uses.
 *
 * Numbers are chosen by the caller (vfs takes them from nsdb, so they are
 * never reused, even across server restarts); this module only maps them.
 * All functions are thread-safe; none does I/O. */
#ifndef CFS_HANDLES_H
#define CFS_HANDLES_H

#include <stddef.h>
#include <stdint.h>

struct cfs_handle {
	uint64_t fh;
	int kind;                /* the owner's tag: a lookup with another kind misses */
	unsigned refs;           /* under the table lock, or atomic */
	struct cfs_handle *next; /* hash chain (the table's) */
};

struct cfs_handles;

int cfs_handles_new(struct cfs_handles **out);
/* Calls drop (may be NULL) for every handle still registered, then frees the
 * table.  No other call may be running.  NULL-safe. */
void cfs_handles_free(struct cfs_handles *h, void (*drop)(struct cfs_handle *e, void *arg),
		      void *arg);

/* Registers e (e->fh, e->kind set by the caller) with two references: the
 * table's and the caller's; *got = e.  When a handle with that number is
 * already registered (two threads rebuilding the same handle), e is left
 * alone and *got is the registered one, with a reference taken for the
 * caller; -EEXIST if that one is of another kind.  Returns 0, -EEXIST or
 * -ENOMEM. */
int cfs_handles_add(struct cfs_handles *h, struct cfs_handle *e, struct cfs_handle **got);
/* The handle fh of that kind with a reference taken, or NULL. */
struct cfs_handle *cfs_handles_get(struct cfs_handles *h, uint64_t fh, int kind);
/* Unregisters fh (of that kind) and returns it with the table's reference,
 * now the caller's; NULL when not registered. */
struct cfs_handle *cfs_handles_remove(struct cfs_handles *h, uint64_t fh, int kind);
/* Drops one reference; 1 when it was the last (the caller frees e). */
int cfs_handles_unref(struct cfs_handle *e);
/* Handles registered. */
size_t cfs_handles_count(struct cfs_handles *h);

#endif
