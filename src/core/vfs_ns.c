/* vfs_ns: the namespace the kernel sees (see vfs_int.h): nodes rebuilt for
 * numbers an earlier server process handed out, attributes, lookup, and
 * folder handles (opendir, readdir, releasedir). */
#include "vfs_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "names.h"
#include "nsdb.h"

/* ---- nodes the kernel knows from an earlier server process ------------------ */

static int resolve_at(struct cfs_vfs *v, uint64_t ino, int depth)
{
	cfs_inode_lock(v->tab);
	int have = cfs_inode_get(v->tab, ino) != NULL;
	cfs_inode_unlock(v->tab);
	if (have)
		return 0;
	if (ino == CFS_ROOT_INO || depth >= RESOLVE_DEPTH)
		return -ENOENT;
	uint64_t parent = 0;
	int rc = cfs_nsdb_get_parent(v->ns, ino, &parent);
	if (!rc && parent == ino)
		rc = -ENOENT;
	/* a number from before the index was reset (a damaged one moved aside):
	 * ESTALE makes the kernel walk the path again with fresh lookups */
	if (rc == -ENOENT && depth == 0 && cfs_nsdb_ino_older(v->ns, ino))
		return -ESTALE;
	if (!rc)
		rc = resolve_at(v, parent, depth + 1);
	if (!rc) {
		struct cfs_listing *l;
		rc = cfs_vfs_get_listing(v, parent, &l); /* installs the node, if still listed */
		if (!rc)
			cfs_listing_unref(l);
	}
	if (rc == -ENOTDIR)
		rc = -ENOENT;
	if (rc)
		return rc;
	cfs_inode_lock(v->tab);
	have = cfs_inode_get(v->tab, ino) != NULL;
	cfs_inode_unlock(v->tab);
	if (!have)
		CFS_INFO("inode %llu is no longer in folder %llu", (unsigned long long)ino,
			 (unsigned long long)parent);
	return have ? 0 : -ENOENT;
}

/* Makes sure the node for ino is in the table (lock not held; may do I/O).
 * A server process restarted under a live mount starts with only the root,
 * while the kernel still holds numbers handed out before; every entry point
 * that takes an inode number calls this.  The node is rebuilt the normal
 * way: the stored parent row names the folder that listed it, that folder is
 * resolved the same way (up to RESOLVE_DEPTH levels; 1, the root, always
 * exists) and its listing loaded (stored listing first, Drive when needed).
 * A number with no parent row, or no longer in its folder's listing, is
 * -ENOENT: the item is gone (or moved where we cannot see without listing
 * the whole tree), which is what a lookup would say too.  -ESTALE would only
 * make the kernel retry a path walk with a fresh lookup, which ends in the
 * same ENOENT, and ENOENT is what the old process would answer for a name
 * that disappeared.  The exception is a number handed out before the index
 * was reset (nsdb.h): its item may well exist under a new number, so that is
 * -ESTALE, and the kernel's retry finds it.  A Drive failure while listing is
 * returned as is (the item may well exist). */
int cfs_vfs_resolve_node(struct cfs_vfs *v, uint64_t ino)
{
	return resolve_at(v, ino, 0);
}

/* ---- attributes ------------------------------------------------------------ */

/* lock held.  Times: see cfs_node_mtime (inode.h); a staged file shows its
 * staged time, and its ctime follows (a write moves both). */
static void fill_attr(struct cfs_vfs *v, struct cfs_node *n, struct cfs_vfs_attr *a)
{
	const struct cfs_node *p = cfs_inode_get(v->tab, n->parent);
	int64_t left = 0;
	if (p && p->dir && p->dir->listing)
		left = p->dir->listed_at_ms + v->dir_ttl_ms - cfs_vfs_now_ms();
	a->valid_ms = left > 1000 ? left : 1000;
	a->ino = n->ino;
	a->nodeid = cfs_vfs_pin_node_id(v, n);
	a->is_dir = n->is_dir;
	a->unlinked = n->unlinked;
	a->size_known = n->size >= 0;
	a->size = n->size >= 0 ? n->size : 0;
	a->mtime_ns = cfs_node_mtime(n);
	if (!n->is_dir && cfs_vfs_w_any(v)) {
		/* staged content: its size and time, what readers here see */
		pthread_mutex_lock(&v->w.lock);
		const struct cfs_wfile *w = cfs_vfs_w_find(v, n->ino);
		if (w) {
			a->size = w->j.size;
			a->size_known = 1;
			a->mtime_ns = w->j.mtime_ns;
		}
		pthread_mutex_unlock(&v->w.lock);
	}
	a->ctime_ns = cfs_node_ctime(n, a->mtime_ns);
	a->atime_ns = cfs_node_atime(n, a->mtime_ns);
}

int cfs_vfs_getattr(struct cfs_vfs *v, uint64_t ino, struct cfs_vfs_attr *a)
{
	int rc = cfs_vfs_resolve_node(v, ino);
	if (rc)
		return rc;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	if (n)
		fill_attr(v, n, a);
	cfs_inode_unlock(v->tab);
	return n ? 0 : -ENOENT;
}

int cfs_vfs_find_child(struct cfs_vfs *v, uint64_t parent, const char *name, uint64_t *ino)
{
	if (strlen(name) > CFS_NAME_MAX)
		return -ENAMETOOLONG;
	struct cfs_listing *l;
	int rc = cfs_vfs_resolve_node(v, parent);
	if (!rc)
		rc = cfs_vfs_get_listing(v, parent, &l);
	if (rc)
		return rc;
	long i = cfs_listing_find(l, name);
	if (i >= 0)
		*ino = l->e[i].ino;
	cfs_listing_unref(l);
	return i < 0 ? -ENOENT : 0;
}

int cfs_vfs_lookup(struct cfs_vfs *v, uint64_t parent, const char *name, struct cfs_vfs_attr *a)
{
	uint64_t ino;
	int rc = cfs_vfs_find_child(v, parent, name, &ino);
	/* open-less, the lookup is what an open's refresh was: a file found
	 * changed gets its new revision (and node id) now; with Drive out of
	 * reach the old one is served */
	if (!rc && v->pin.on && cfs_vfs_refresh_stale(v, ino) == -ENOENT)
		rc = -ENOENT;
	return rc ? rc : cfs_vfs_getattr(v, ino, a);
}

/* ---- directories ------------------------------------------------------------ */

void cfs_vfs_dir_free(struct cfs_vfs_dir *d)
{
	if (!d)
		return;
	cfs_listing_unref(d->l);
	free(d);
}

/* A new directory handle on folder ino (not registered). */
static int dir_new(struct cfs_vfs *v, uint64_t ino, uint64_t fh, struct cfs_vfs_dir **out)
{
	struct cfs_vfs_dir *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	int rc = cfs_vfs_resolve_node(v, ino);
	if (!rc)
		rc = cfs_vfs_get_listing(v, ino, &d->l);
	if (rc) {
		free(d);
		return rc;
	}
	d->h.fh = fh;
	d->h.kind = H_DIR;
	d->ino = ino;
	cfs_inode_lock(v->tab);
	d->parent = cfs_inode_get(v->tab, ino)->parent;
	cfs_inode_unlock(v->tab);
	*out = d;
	return 0;
}

/* Registers a new handle; the caller's reference is dropped, so the table
 * holds the only one. */
int cfs_vfs_add_handle(struct cfs_vfs *v, struct cfs_handle *e)
{
	struct cfs_handle *got;
	int rc = cfs_handles_add(v->handles, e, &got);
	if (!rc && got == e)
		cfs_handles_unref(e); /* never the last: the table has one */
	else if (!rc)
		rc = -EEXIST; /* a fresh number is never registered */
	return rc;
}

int cfs_vfs_opendir(struct cfs_vfs *v, uint64_t ino, uint64_t *fh)
{
	struct cfs_vfs_dir *d = NULL;
	uint64_t num = 0;
	int rc = cfs_nsdb_fh_alloc(v->ns, &num);
	if (!rc)
		rc = dir_new(v, ino, num, &d);
	if (!rc)
		rc = cfs_vfs_add_handle(v, &d->h);
	if (rc) {
		cfs_vfs_dir_free(d);
		return rc;
	}
	*fh = num;
	return 0;
}

static void put_dir(struct cfs_vfs_dir *d)
{
	if (cfs_handles_unref(&d->h))
		cfs_vfs_dir_free(d);
}

/* The handle fh on folder ino with a reference taken.  A number this process
 * does not know was handed out by a server process that was restarted since:
 * the folder is opened again and registered under that number (no stored
 * row needed).  Its listing is the current one, so offsets may shift if the
 * folder changed meanwhile; readdir from the middle then skips or repeats
 * entries, as after a change seen by any cached listing. */
static int get_dir(struct cfs_vfs *v, uint64_t ino, uint64_t fh, struct cfs_vfs_dir **out)
{
	struct cfs_handle *e = cfs_handles_get(v->handles, fh, H_DIR);
	if (!e) {
		struct cfs_vfs_dir *d;
		int rc = dir_new(v, ino, fh, &d);
		if (rc)
			return rc;
		rc = cfs_handles_add(v->handles, &d->h, &e);
		if (rc || e != &d->h)
			cfs_vfs_dir_free(d); /* another thread rebuilt it first, or the number is a file's */
		if (rc)
			return rc == -EEXIST ? -EBADF : rc;
		if (e == &d->h)
			CFS_INFO("reopened folder handle %llu (inode %llu) after a restart",
				 (unsigned long long)fh, (unsigned long long)ino);
	}
	*out = (struct cfs_vfs_dir *)e;
	if ((*out)->ino != ino) { /* not this folder's handle */
		put_dir(*out);
		return -EBADF;
	}
	return 0;
}

int cfs_vfs_readdir(struct cfs_vfs *v, uint64_t ino, uint64_t fh, off_t off,
		    cfs_vfs_dirent_cb cb, void *arg)
{
	/* offsets: 0 start, 1 after ".", 2 after "..", 2+i+1 after entry i */
	if (off < 0)
		return -EINVAL;
	struct cfs_vfs_dir *d;
	int rc = get_dir(v, ino, fh, &d);
	if (rc)
		return rc;
	if (off == 0 && cb(".", d->ino, 1, 1, arg))
		goto out;
	if (off <= 1 && cb("..", d->parent, 1, 2, arg))
		goto out;
	for (size_t i = off > 2 ? (size_t)off - 2 : 0; i < d->l->n; i++)
		if (cb(d->l->e[i].name, d->l->e[i].ino, d->l->e[i].is_dir, (off_t)i + 3, arg))
			break;
out:
	put_dir(d);
	return 0;
}

void cfs_vfs_releasedir(struct cfs_vfs *v, uint64_t ino, uint64_t fh)
{
	(void)ino;
	struct cfs_handle *e = cfs_handles_remove(v->handles, fh, H_DIR);
	if (e) /* else opened by a process since restarted: nothing to free */
		put_dir((struct cfs_vfs_dir *)e);
}

