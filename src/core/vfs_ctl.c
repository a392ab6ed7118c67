/* vfs_ctl: the control plane's evict and warm on a path (see vfs_int.h). */
#include "vfs_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

/* Evicts the blocks of every file below folder l (listings in memory only). */
static void evict_tree(struct cfs_vfs *v, uint64_t ino, int depth, uint64_t *bytes,
		       uint64_t *blocks, cfs_vfs_ino_cb inval, void *arg)
{
	char prefix[CFS_ID_MAX + 2];
	struct cfs_listing *l = NULL;
	int is_dir;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	if (!n) {
		cfs_inode_unlock(v->tab);
		return;
	}
	is_dir = n->is_dir;
	snprintf(prefix, sizeof(prefix), "%s@", n->content_id);
	if (is_dir && n->dir && n->dir->listing)
		l = cfs_listing_ref(n->dir->listing);
	cfs_inode_unlock(v->tab);
	if (!is_dir) {
		uint64_t b = 0, k = 0;
		if (bytes && cfs_store_evict_prefix(v->store, prefix, &b, &k) == 0) {
			*bytes += b;
			*blocks += k;
		}
		if (inval)
			inval(ino, arg);
		return;
	}
	for (size_t i = 0; l && depth < MAX_DEPTH && i < l->n; i++)
		evict_tree(v, l->e[i].ino, depth + 1, bytes, blocks, inval, arg);
	cfs_listing_unref(l);
}

int cfs_vfs_evict(struct cfs_vfs *v, uint64_t ino, uint64_t *bytes, uint64_t *blocks,
		  cfs_vfs_ino_cb inval, void *arg)
{
	*bytes = *blocks = 0;
	int rc = cfs_vfs_resolve_node(v, ino);
	if (rc)
		return rc;
	if (ino != CFS_ROOT_INO) {
		evict_tree(v, ino, 0, bytes, blocks, inval, arg);
		return 0;
	}
	/* everything, including blocks of files no listing shows any more */
	rc = cfs_store_evict_prefix(v->store, "", bytes, blocks);
	evict_tree(v, ino, 0, NULL, NULL, inval, arg);
	return rc;
}

int cfs_vfs_warm(struct cfs_vfs *v, uint64_t ino, int64_t off, uint64_t len, uint64_t *fetched)
{
	struct blob_ref b = { .size = 0 };
	*fetched = 0;
	int rc = cfs_vfs_resolve_node(v, ino);
	if (rc)
		return rc;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_vfs_file_node(v, ino, &rc);
	if (n && !n->export_mime[0]) /* exports are fetched whole at open: nothing to warm */
		cfs_vfs_blob_ref(n, &b);
	cfs_inode_unlock(v->tab);
	if (rc || b.size <= 0)
		return rc;
	struct cfs_reader_file rf = cfs_vfs_reader_file(&b);
	return cfs_reader_warm(v->reader, &rf, off, len, fetched);
}

int cfs_vfs_evict_to(struct cfs_vfs *v, uint64_t target, uint64_t *bytes, uint64_t *blocks)
{
	*bytes = *blocks = 0;
	return cfs_store_evict_to(v->store, target, bytes, blocks);
}

