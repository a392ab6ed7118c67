/* vfs_changes: the Changes API poller (see vfs_int.h).
 *
 * A thread polls changes.list every interval from the stored page token
 * (one per root).  A change to an item this mount knows expires its folder
 * (and the folder it was in before a move), marks a file whose revision
 * moved stale, and queues kernel invalidations, sent after the table lock
 * is dropped; an item added to a known folder expires that folder; its
 * stored listing is dropped for folders not loaded yet.  A change to an
 * item never met (a remount catching up) makes every stored listing stale. */
#include "vfs_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "store.h"

#define INVAL_MAX 4096

/* Kernel invalidations gathered under the table lock, sent after it. */
struct inval {
	uint64_t ino;
	char *name; /* NULL: the inode itself; else the entry name in folder ino */
};

struct change_ctx {
	struct cfs_vfs *v;
	struct inval *iv;
	size_t n;
	uint64_t applied;
	int all_stale;
};

static void add_inval(struct change_ctx *c, uint64_t ino, const char *name)
{
	if (c->n < INVAL_MAX) {
		c->iv[c->n].ino = ino;
		c->iv[c->n].name = name ? strdup(name) : NULL;
		if (!name || c->iv[c->n].name)
			c->n++;
	}
}

/* lock held: the folder's listing is fetched again at its next use, and the
 * kernel forgets what it cached of the folder. */
static void expire_dir(struct change_ctx *c, struct cfs_node *d)
{
	if (!d->dir)
		return;
	d->dir->listed_at_ms = cfs_vfs_now_ms() - c->v->dir_ttl_ms;
	d->dir->expired++; /* a fetch or load in progress is stale too */
	add_inval(c, d->ino, NULL);
}


static int on_change(const char *id, int removed, const struct cfs_file_meta *m, void *arg)
{
	struct change_ctx *c = arg;
	struct cfs_vfs *v = c->v;
	if (cfs_vfs_w_is_mine(v, id)) { /* the namespace has it already (vfs_int.h) */
		c->applied++;
		return 0;
	}
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_find(v->tab, id);
	if (n && n->ino != CFS_ROOT_INO) {
		/* renamed, moved, trashed, removed, or changed: the entry goes from
		 * its folder, and from the one it was in before if a listing has
		 * already shown it moved */
		uint64_t dirs[2] = { n->parent, n->prev_parent };
		for (int k = 0; k < 2; k++) {
			struct cfs_node *d = dirs[k] ? cfs_inode_get(v->tab, dirs[k]) : NULL;
			if (!d)
				continue;
			long at = cfs_vfs_listed_at(d, n);
			if (at >= 0)
				add_inval(c, d->ino, d->dir->listing->e[at].name);
			expire_dir(c, d);
		}
		n->prev_parent = 0;
		/* removed or trashed elsewhere: its content leaves the cache
		 * (once no open file reads it) */
		if (removed || (m && m->trashed))
			cfs_vfs_retire_gone(v, n, id);
		char rev[CFS_ID_MAX];
		if (m && !removed) {
			cfs_vfs_content_rev(m, rev, sizeof(rev));
			if (!n->is_dir && strcmp(rev, n->rev) != 0) {
				n->stale = 1;
				n->opened_rev = 0;
			}
		}
		add_inval(c, n->ino, NULL);
	}
	/* an item added to (or moved into) a folder we know */
	int forget_stored = 0;
	if (m && m->parent[0]) {
		struct cfs_node *p = cfs_inode_find(v->tab, m->parent);
		if (p && p->is_dir)
			expire_dir(c, p);
		forget_stored = 1;
	}
	/* an item this mount has not met (a remount catching up): the old
	 * folder is unknown, so every stored listing is checked again */
	int all_stale = !n && (removed || !m);
	cfs_inode_unlock(v->tab);
	/* the folder's stored listing goes too, for folders not loaded yet */
	if (forget_stored)
		cfs_store_meta_del(v->store, "dirs", m->parent, strlen(m->parent));
	if (all_stale)
		c->all_stale = 1;
	c->applied++;
	return 0;
}

/* The change feed's position, one per root: a shared drive has its own feed,
 * and one cache folder may have served several roots. */
static size_t token_key(const struct cfs_vfs *v, char *key, size_t cap)
{
	int n = snprintf(key, cap, "changes_token:%s", v->root_id);
	return n > 0 && (size_t)n < cap ? (size_t)n : cap - 1;
}

static int save_token(struct cfs_vfs *v, const char *tok)
{
	char key[CFS_ID_MAX + 32];
	size_t kl = token_key(v, key, sizeof(key));
	return cfs_store_meta_put(v->store, "meta", key, kl, tok, strlen(tok));
}

/* One poll: applies every change since the stored token. */
static int poll_once(struct cfs_vfs *v)
{
	char *tok = NULL, *next = NULL;
	size_t tl = 0;
	void *stored = NULL;
	int rc = 0;
	char key[CFS_ID_MAX + 32];
	size_t kl = token_key(v, key, sizeof(key));
	if (cfs_store_meta_get(v->store, "meta", key, kl, &stored, &tl) == 0 && tl &&
	    tl < 256 && (tok = malloc(tl + 1))) {
		memcpy(tok, stored, tl);
		tok[tl] = '\0';
	}
	free(stored);
	if (!tok) {
		rc = cfs_drive_start_token(v->drive, &tok);
		if (!rc)
			rc = save_token(v, tok);
		free(tok);
		return rc; /* nothing to apply before a starting point */
	}
	struct change_ctx c = { .v = v, .iv = calloc(INVAL_MAX, sizeof(struct inval)) };
	if (!c.iv) {
		free(tok);
		return -ENOMEM;
	}
	rc = cfs_drive_changes(v->drive, tok, on_change, &c, &next);
	cfs_vfs_retire_run(v);
	if (c.all_stale) {
		int64_t now = cfs_vfs_clock_ms(CLOCK_REALTIME);
		__atomic_store_n(&v->stored_valid_after, now, __ATOMIC_RELAXED);
		cfs_store_meta_put(v->store, "meta", "dirs_valid_after", 16, &now, sizeof(now));
	}
	if (!rc && strcmp(next, tok) != 0)
		rc = save_token(v, next);
	for (size_t i = 0; i < c.n; i++) {
		if (v->notify.entry && c.iv[i].name)
			v->notify.entry(v->notify.arg, c.iv[i].ino, c.iv[i].name);
		else if (v->notify.inode && !c.iv[i].name)
			v->notify.inode(v->notify.arg, c.iv[i].ino);
		free(c.iv[i].name);
	}
	if (c.applied)
		CFS_INFO("changes: applied %llu change(s) from Drive",
			 (unsigned long long)c.applied);
	__atomic_add_fetch(&v->changes_applied, c.applied, __ATOMIC_RELAXED);
	__atomic_add_fetch(&v->polls, 1, __ATOMIC_RELAXED);
	free(c.iv);
	free(tok);
	free(next);
	return rc;
}

static void *poller(void *arg)
{
	struct cfs_vfs *v = arg;
	pthread_mutex_lock(&v->poll_lock);
	while (!v->stop) {
		pthread_mutex_unlock(&v->poll_lock);
		int rc = poll_once(v);
		if (rc)
			CFS_WARN("changes: poll failed (%s); trying again later", cfs_strerror(rc));
		pthread_mutex_lock(&v->poll_lock);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += v->poll_ms / 1000;
		ts.tv_nsec += (v->poll_ms % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		while (!v->stop && pthread_cond_timedwait(&v->poll_cond, &v->poll_lock, &ts) == 0)
			;
	}
	pthread_mutex_unlock(&v->poll_lock);
	return NULL;
}

int cfs_vfs_start_polling(struct cfs_vfs *v, long interval_s, const struct cfs_vfs_notify *n)
{
	if (v->polling || interval_s <= 0)
		return 0;
	v->notify = *n;
	v->poll_ms = interval_s * 1000;
	if (pthread_create(&v->poller, NULL, poller, v) != 0)
		return -EAGAIN;
	v->polling = 1;
	return 0;
}

void cfs_vfs_poll_stats(struct cfs_vfs *v, uint64_t *polls, uint64_t *applied)
{
	*polls = __atomic_load_n(&v->polls, __ATOMIC_RELAXED);
	*applied = __atomic_load_n(&v->changes_applied, __ATOMIC_RELAXED);
}
