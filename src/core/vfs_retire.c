/* vfs_retire: the cache forgets what no file shows any more.  The revision
 * a node leaves (an upload of ours landed, Drive changed the file) and the
 * content of a file this mount removed from Drive are retired in the store
 * (cfs_store_retire: their blocks go at once, or when the last open file
 * reading them is done), so replaced checkpoints do not crowd a dataset out
 * of the cache; so is the content of a file Drive's changes say was removed
 * or trashed elsewhere (vfs_changes.c).  A node's revision changes under the
 * table lock, and a retirement is an index transaction: the key is queued
 * there and retired once the lock is gone (cfs_vfs_retire_run, which the
 * places that change revisions call, and every release).  A full queue drops
 * its oldest key: those blocks are left to the LRU.  On an open-less mount
 * (vfs_pin.c) the kernel may read the revision a node left through the node
 * id that showed it: that revision is retired when the kernel forgets that
 * node id. */
#include "vfs_int.h"

#include "err.h"
#include "log.h"
#include "store.h"

void cfs_vfs_retire_init(struct cfs_vfs *v)
{
	pthread_mutex_init(&v->retire.lock, NULL);
}

void cfs_vfs_retire_cleanup(struct cfs_vfs *v)
{
	pthread_mutex_destroy(&v->retire.lock);
}

static void queue(struct cfs_vfs *v, const char *key)
{
	pthread_mutex_lock(&v->retire.lock);
	struct cfs_vfs_retire *r = &v->retire;
	unsigned at = (r->head + r->n) % CFS_VFS_RETIRE;
	if (r->n == CFS_VFS_RETIRE) /* the oldest is left to the LRU */
		r->head = (r->head + 1) % CFS_VFS_RETIRE;
	else
		r->n++;
	snprintf(r->key[at], sizeof(r->key[at]), "%s", key);
	__atomic_store_n(&r->queued, r->n, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&v->retire.lock);
}

void cfs_vfs_retire_rev(struct cfs_vfs *v, const struct cfs_node *n, const char *rev)
{
	if (v->pin.on || n->is_dir || n->export_mime[0] || !n->rev[0] || strcmp(n->rev, rev) == 0)
		return;
	struct blob_ref b;
	cfs_vfs_blob_ref(n, &b);
	queue(v, b.key);
}

int cfs_vfs_node_set_rev(struct cfs_vfs *v, struct cfs_node *n, const char *rev, int retire)
{
	cfs_vfs_pin_supersede(v, n, rev); /* open-less: the old node id keeps the old */
	if (retire)
		cfs_vfs_retire_rev(v, n, rev);
	return cfs_node_set_rev(n, rev);
}

void cfs_vfs_retire_gone(struct cfs_vfs *v, const struct cfs_node *n, const char *id)
{
	if (strcmp(n->content_id, id) == 0) /* a shortcut's removal leaves its target's */
		cfs_vfs_retire_rev(v, n, "");
}

void cfs_vfs_retire_id(struct cfs_vfs *v, const char *id)
{
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_find(v->tab, id);
	if (n)
		cfs_vfs_retire_gone(v, n, id);
	cfs_inode_unlock(v->tab);
	cfs_vfs_retire_run(v);
}

void cfs_vfs_retire_run(struct cfs_vfs *v)
{
	char key[sizeof(v->retire.key[0])];
	while (__atomic_load_n(&v->retire.queued, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&v->retire.lock);
		struct cfs_vfs_retire *r = &v->retire;
		int some = r->n > 0;
		if (some) {
			memcpy(key, r->key[r->head], sizeof(key));
			r->head = (r->head + 1) % CFS_VFS_RETIRE;
			r->n--;
			__atomic_store_n(&r->queued, r->n, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&v->retire.lock);
		if (!some)
			break;
		uint64_t freed = 0;
		int rc = cfs_store_retire(v->store, key, &freed);
		if (rc)
			CFS_WARN("cache: cannot drop the blocks of %s: %s", key, cfs_strerror(rc));
		else if (freed)
			CFS_DEBUG("cache: %s is no file's content now: %llu bytes dropped", key,
				  (unsigned long long)freed);
	}
}
