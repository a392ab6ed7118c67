/* vfs_list: folder listings (see vfs_int.h).
 *
 * A listing comes from memory while younger than the TTL, else from the
 * listing stored in the index (aged as stored), else from Drive (files.list
 * through every page, shortcuts resolved, unique names assigned, inode
 * numbers from the index); it is stored, its entries' parent rows written,
 * and it is installed whole: the nodes of its entries are created or
 * updated and the folder's snapshot swapped.  When Drive fails, an old
 * listing is served rather than an error.  One thread fetches a folder at a
 * time (listing_busy); the others wait for it. */
#include "vfs_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "export.h"
#include "log.h"
#include "names.h"
#include "nsdb.h"
#include "store.h"

/* The content identity Drive gives: headRevisionId, else md5, else version. */
void cfs_vfs_content_rev(const struct cfs_file_meta *m, char *out, size_t cap)
{
	if (m->rev[0])
		snprintf(out, cap, "r:%.120s", m->rev);
	else if (m->md5[0])
		snprintf(out, cap, "m:%s", m->md5);
	else
		snprintf(out, cap, "v:%" PRId64, m->version);
}

struct item {
	char name[CFS_NAME_MAX + 1];
	char id[CFS_ID_MAX];
	char content_id[CFS_ID_MAX];
	char rev[CFS_ID_MAX];
	char export_mime[128];
	char md5[33], sha256[65];
	int is_dir;
	int64_t size, mtime_ns, ctime_ns;
	uint64_t ino;
	char *final; /* unique name, malloc'd */
};

struct collect {
	struct cfs_vfs *v;
	struct item *it;
	size_t n, cap;
	const char *const *ancestors; /* content ids from this folder up to the root */
	int nanc;
};

/* A new slot at the end of c's items (counted), or NULL. */
static struct item *next_item(struct collect *c)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct item *ni = realloc(c->it, cap * sizeof(*ni));
		if (!ni)
			return NULL;
		c->it = ni;
		c->cap = cap;
	}
	return &c->it[c->n++];
}

/* Turns one Drive entry (after shortcut resolution) into an item, or skips it. */
static int add_item(struct collect *c, const struct cfs_file_meta *self,
		    const struct cfs_file_meta *m)
{
	struct item it;
	memset(&it, 0, sizeof(it));
	const char *ext = NULL, *export_mime = NULL;
	if (m->trashed)
		return 0;
	if (strcmp(m->mime, CFS_FOLDER_MIME) == 0) {
		it.is_dir = 1;
		for (int i = 0; i < c->nanc; i++) {
			if (strcmp(c->ancestors[i], m->id) == 0) {
				CFS_INFO("dropping shortcut %s: it points at an ancestor (cycle)",
					 self->id);
				return 0;
			}
		}
	} else if (strncmp(m->mime, CFS_GAPPS_PREFIX, sizeof(CFS_GAPPS_PREFIX) - 1) == 0) {
		if (cfs_export_lookup(&c->v->exports, m->mime, &ext, &export_mime))
			return 0; /* a kind we do not show (forms, sites, ...) */
	} else if (!m->can_download) {
		CFS_DEBUG("hiding %s: Drive does not allow downloading it", m->id);
		return 0;
	}
	char name[CFS_NAME_MAX * 2];
	snprintf(name, sizeof(name), "%s%s%s", self->name, ext ? "." : "", ext ? ext : "");
	cfs_names_sanitize(name, it.name, sizeof(it.name));
	memcpy(it.id, self->id, sizeof(it.id));
	memcpy(it.content_id, m->id, sizeof(it.content_id));
	cfs_vfs_content_rev(m, it.rev, sizeof(it.rev));
	snprintf(it.export_mime, sizeof(it.export_mime), "%s", export_mime ? export_mime : "");
	memcpy(it.md5, m->md5, sizeof(it.md5));
	memcpy(it.sha256, m->sha256, sizeof(it.sha256));
	it.size = it.is_dir ? 0 : export_mime ? -1 : m->size < 0 ? 0 : m->size;
	it.mtime_ns = m->mtime_ns;
	it.ctime_ns = self->ctime_ns;
	struct item *slot = next_item(c);
	if (!slot)
		return -ENOMEM;
	*slot = it;
	return 0;
}

static int on_child(const struct cfs_file_meta *m, void *arg)
{
	struct collect *c = arg;
	if (!m) { /* the listing restarted */
		c->n = 0;
		return 0;
	}
	if (strcmp(m->mime, CFS_SHORTCUT_MIME) != 0)
		return add_item(c, m, m);
	/* A shortcut shows as its target; a dangling one is dropped. */
	struct cfs_file_meta t;
	int rc = c->v->w.d.get(c->v->w.d.arg, m->target_id, &t);
	if (rc == -ENOENT || rc == -EACCES) {
		CFS_DEBUG("dropping dangling shortcut %s -> %s", m->id, m->target_id);
		return 0;
	}
	if (!rc) {
		if (strcmp(t.mime, CFS_SHORTCUT_MIME) != 0)
			rc = add_item(c, m, &t);
		cfs_file_meta_cleanup(&t);
	}
	return rc;
}

static void free_items(struct item *it, size_t n)
{
	for (size_t i = 0; it && i < n; i++)
		free(it[i].final);
	free(it);
}

/* Makes items the listing of folder ino (lock not held; taken here).  Items
 * carry final names and inode numbers; the names move into the listing. */
static int install_listing(struct cfs_vfs *v, uint64_t ino, struct item *it, size_t n,
			   int64_t listed_at_ms, unsigned edits_at, int *whole)
{
	struct cfs_listing *l = cfs_listing_new(n);
	if (!l)
		return -ENOMEM;
	int rc = 0;
	cfs_inode_lock(v->tab);
	for (size_t i = 0; i < n; i++) {
		struct cfs_node *nd = cfs_inode_find(v->tab, it[i].id);
		if (!nd)
			nd = cfs_inode_add(v->tab, it[i].id, it[i].ino);
		if (!nd) {
			CFS_ERROR("cannot add %s as inode %llu", it[i].id,
				  (unsigned long long)it[i].ino);
			rc = -ENOMEM;
			break;
		}
		struct cfs_node *old = nd->parent && nd->parent != ino
					       ? cfs_inode_get(v->tab, nd->parent) : NULL;
		struct cfs_node *now = cfs_inode_get(v->tab, ino);
		if (old && now && strcmp(old->content_id, now->content_id) != 0)
			nd->prev_parent = nd->parent; /* moved: the old folder must forget it */
		int rev_changed = strcmp(nd->rev, it[i].rev) != 0;
		/* the old revision retired, but not for a listing older than our upload */
		rc = cfs_vfs_node_set_rev(v, nd, it[i].rev,
					  rev_changed && !cfs_vfs_w_landed_is(v, nd->id, nd->rev));
		if (!rc)
			rc = cfs_node_set_content_id(nd, it[i].content_id);
		if (!rc)
			rc = cfs_node_set_export_mime(v->tab, nd, it[i].export_mime);
		if (!rc && it[i].is_dir)
			rc = cfs_node_make_dir(nd);
		if (rc) {
			CFS_ERROR("cannot update inode %llu: %s", (unsigned long long)nd->ino,
				  cfs_strerror(rc));
			break;
		}
		cfs_node_place(nd, ino);
		nd->is_dir = it[i].is_dir ? 1 : 0;
		if (rev_changed || !it[i].export_mime[0] || it[i].size >= 0)
			nd->size = it[i].size; /* an export keeps its learned size until it changes */
		cfs_node_set_sums(nd, it[i].md5, it[i].sha256);
		/* Drive keeps milliseconds: a time set here to the nanosecond stays
		 * while Drive's agrees; a ctime shown never goes back (inode.h) */
		if (nd->mtime_ns / 1000000 != it[i].mtime_ns / 1000000)
			nd->mtime_ns = it[i].mtime_ns;
		if (nd->ctime_ns < it[i].ctime_ns)
			nd->ctime_ns = it[i].ctime_ns;
		l->e[i].name = it[i].final;
		it[i].final = NULL;
		l->e[i].ino = nd->ino;
		l->e[i].is_dir = nd->is_dir;
	}
	if (!rc)
		rc = cfs_vfs_w_overlay(v, ino, &l); /* what Drive does not know yet */
	*whole = 0;
	if (!rc) {
		struct cfs_node *dn = cfs_inode_get(v->tab, ino);
		struct cfs_dir *d = dn->dir;
		/* after the overlay: a file landing in Drive once it looked
		 * moves the count */
		int edited = cfs_vfs_w_edits(v, dn->content_id) != edits_at;
		if (edited)
			CFS_DEBUG("listing of %s: changed here while it was read; %s", dn->content_id,
				  d->listing ? "the edited one kept" : "served, read again next");
		if (!edited || !d->listing) {
			cfs_vfs_listing_order(v, l);
			cfs_listing_unref(d->listing);
			d->listing = l;
			l = NULL;
		}
		/* edited: fetched again at the next use */
		d->listed_at_ms = edited ? cfs_vfs_now_ms() - v->dir_ttl_ms : listed_at_ms;
		*whole = !edited;
	}
	cfs_inode_unlock(v->tab);
	cfs_listing_unref(l);
	return rc;
}

/* Stores a fetched listing in the index (best effort). */
static void save_listing(struct cfs_vfs *v, const char *content_id, const struct item *it,
			 size_t n)
{
	struct cfs_lrow_entry *e = calloc(n ? n : 1, sizeof(*e));
	if (!e)
		return;
	for (size_t i = 0; i < n; i++)
		e[i] = (struct cfs_lrow_entry){ it[i].ino, it[i].is_dir, it[i].size,
						it[i].mtime_ns, it[i].ctime_ns, it[i].final,
						it[i].id, it[i].content_id, it[i].rev,
						it[i].export_mime, it[i].md5, it[i].sha256 };
	int rc = cfs_nsdb_save_listing(v->ns, content_id, e, n, cfs_vfs_clock_ms(CLOCK_REALTIME));
	if (rc)
		CFS_WARN("cannot store the listing of %s: %s", content_id, cfs_strerror(rc));
	free(e);
}

/* Makes the stored parent rows of a listing's entries say folder ino, so a
 * restarted server can find any of them (resolve_node).  Called before the
 * listing is installed, so before a reply can hand an entry's number to the
 * kernel.  Best effort: when the index cannot take the rows the listing is
 * still served; only a restart would then miss those entries. */
static void save_parents(struct cfs_vfs *v, uint64_t ino, const struct item *it, size_t n)
{
	uint64_t *inos = calloc(n ? n : 1, sizeof(*inos));
	int rc = inos ? 0 : -ENOMEM;
	for (size_t i = 0; inos && i < n; i++)
		inos[i] = it[i].ino;
	if (!rc)
		rc = cfs_nsdb_set_parents(v->ns, ino, inos, n);
	if (rc)
		CFS_WARN("cannot store the parent of the entries of folder %llu: %s",
			 (unsigned long long)ino, cfs_strerror(rc));
	free(inos);
}

/* Fetches the listing of a folder from Drive and installs it. */
static int fetch_listing(struct cfs_vfs *v, uint64_t ino, const char *content_id,
			 const char *const *anc, int nanc, unsigned edits_at)
{
	struct collect c = { .v = v, .ancestors = anc, .nanc = nanc };
	int rc = v->w.d.list(v->w.d.arg, content_id, on_child, &c);
	struct cfs_names_entry *ne = NULL;
	const char **ids = NULL;
	uint64_t *inos = NULL;
	if (!rc && (!(ne = calloc(c.n + 1, sizeof(*ne))) || !(ids = calloc(c.n + 1, sizeof(*ids))) ||
		    !(inos = calloc(c.n + 1, sizeof(*inos)))))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < c.n; i++) {
		ne[i].name = c.it[i].name;
		ne[i].id = c.it[i].id;
		ne[i].ctime_ns = c.it[i].ctime_ns;
		ids[i] = c.it[i].id;
	}
	if (!rc)
		rc = cfs_names_assign(ne, c.n);
	if (!rc)
		rc = cfs_nsdb_inos(v->ns, ids, c.n, inos);
	for (size_t i = 0; ne && i < c.n; i++) {
		c.it[i].final = ne[i].final;
		c.it[i].ino = inos ? inos[i] : 0;
	}
	if (!rc) {
		int whole = 0;
		save_parents(v, ino, c.it, c.n);
		save_listing(v, content_id, c.it, c.n); /* before: the names move into the listing */
		rc = install_listing(v, ino, c.it, c.n, cfs_vfs_now_ms(), edits_at, &whole);
		/* changed here while it was read (the stored copy may lack the
		 * change), or a change begun since, whose own drop of the stored
		 * listing may have come before this stored it: drop it */
		if (!rc && (!whole || cfs_vfs_w_edits(v, content_id) != edits_at))
			cfs_vfs_w_forget_listing(v, content_id);
	}
	free(ne);
	free(ids);
	free(inos);
	free_items(c.it, c.n);
	return rc;
}

static int on_stored(const struct cfs_lrow_entry *e, void *arg)
{
	struct collect *c = arg;
	struct item *it = next_item(c);
	if (!it)
		return -ENOMEM;
	memset(it, 0, sizeof(*it));
	snprintf(it->name, sizeof(it->name), "%s", e->name);
	snprintf(it->id, sizeof(it->id), "%s", e->id);
	snprintf(it->content_id, sizeof(it->content_id), "%s", e->content_id);
	snprintf(it->rev, sizeof(it->rev), "%s", e->rev);
	snprintf(it->export_mime, sizeof(it->export_mime), "%s", e->export_mime);
	snprintf(it->md5, sizeof(it->md5), "%s", e->md5);
	snprintf(it->sha256, sizeof(it->sha256), "%s", e->sha256);
	it->is_dir = e->is_dir;
	it->size = e->size;
	it->mtime_ns = e->mtime_ns;
	it->ctime_ns = e->ctime_ns;
	it->ino = e->ino;
	if (!(it->final = strdup(e->name))) {
		c->n--;
		return -ENOMEM;
	}
	return 0;
}

/* Installs the listing stored in the index, aged as stored.  Returns 0 or
 * -ENOENT when there is none. */
static int load_listing(struct cfs_vfs *v, uint64_t ino, const char *content_id,
			unsigned edits_at)
{
	struct collect c = { .v = v };
	int64_t fetched = 0;
	int rc = cfs_nsdb_load_listing(v->ns, content_id, &fetched, on_stored, &c);
	if (!rc) {
		int64_t age = cfs_vfs_clock_ms(CLOCK_REALTIME) - fetched;
		if (fetched < __atomic_load_n(&v->stored_valid_after, __ATOMIC_RELAXED))
			age = v->dir_ttl_ms; /* a change made it stale: fetch again when possible */
		save_parents(v, ino, c.it, c.n); /* rows stored by older versions lack them */
		int whole;
		rc = install_listing(v, ino, c.it, c.n, cfs_vfs_now_ms() - (age > 0 ? age : 0),
				     edits_at, &whole);
	}
	free_items(c.it, c.n);
	return rc;
}

/* Returns a reference to a fresh enough listing of folder ino: from memory,
 * else from the index, else from Drive; when Drive fails, an old listing is
 * served rather than an error. */
int cfs_vfs_get_listing(struct cfs_vfs *v, uint64_t ino, struct cfs_listing **out)
{
	int rc = 0;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	if (!n)
		rc = -ENOENT;
	else if (!n->is_dir || !n->dir)
		rc = -ENOTDIR;
	struct cfs_dir *d = rc ? NULL : n->dir; /* a folder's part outlives any change */
	int refetches = 0;
	while (!rc) {
		if (d->listing && cfs_vfs_now_ms() - d->listed_at_ms < v->dir_ttl_ms)
			break;
		if (d->listing_busy) {
			cfs_inode_wait(v->tab);
			continue;
		}
		d->listing_busy = 1;
		char cid[CFS_ID_MAX];
		char anc_store[MAX_DEPTH][CFS_ID_MAX];
		const char *anc[MAX_DEPTH];
		int nanc = 0, had = d->listing != NULL;
		unsigned gen = d->expired;
		snprintf(cid, sizeof(cid), "%s", n->content_id);
		unsigned edits_at = cfs_vfs_w_edits(v, cid);
		for (struct cfs_node *a = n; a && nanc < MAX_DEPTH;
		     a = a->ino == CFS_ROOT_INO ? NULL : cfs_inode_get(v->tab, a->parent)) {
			snprintf(anc_store[nanc], CFS_ID_MAX, "%s", a->content_id);
			anc[nanc] = anc_store[nanc];
			nanc++;
		}
		cfs_inode_unlock(v->tab);
		int frc = had ? -ENOENT : load_listing(v, ino, cid, edits_at);
		cfs_inode_lock(v->tab);
		if (frc || cfs_vfs_now_ms() - d->listed_at_ms >= v->dir_ttl_ms) {
			cfs_inode_unlock(v->tab);
			edits_at = cfs_vfs_w_edits(v, cid);
			frc = fetch_listing(v, ino, cid, anc, nanc, edits_at);
			cfs_inode_lock(v->tab);
		}
		d->listing_busy = 0;
		cfs_inode_broadcast(v->tab);
		/* changed here meanwhile: the one in memory, fetched again next use;
		 * one that came from Drive while a change landed may lack it (or
		 * still show what it replaced): fetched again now, a few times */
		if (!frc && d->listing && cfs_vfs_w_edits(v, cid) != edits_at) {
			if (had || refetches++ >= 2)
				break;
			continue;
		}
		if (!frc && d->expired != gen) {
			/* a change arrived while we loaded or fetched: serve this
			 * listing now, but fetch again at the next use */
			d->listed_at_ms = cfs_vfs_now_ms() - v->dir_ttl_ms;
			break;
		}
		if (frc) {
			if (d->listing) {
				CFS_WARN("listing of %s failed (%s); serving the previous listing", cid,
					 cfs_strerror(frc));
				d->listed_at_ms = cfs_vfs_now_ms(); /* try Drive again after a TTL */
				break;
			}
			rc = frc;
		}
	}
	if (!rc)
		*out = cfs_listing_ref(d->listing);
	cfs_inode_unlock(v->tab);
	return rc;
}

