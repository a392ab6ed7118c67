/* vfs: FUSE-free file system core (see vfs.h). */
#include "vfs.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crypto.h"
#include "drive.h"
#include "err.h"
#include "handles.h"
#include "inode.h"
#include "log.h"
#include "names.h"
#include "nsdb.h"
#include "reader.h"
#include "store.h"

#define EXPORT_MAX (64u << 20)
#define MAX_DEPTH 128
/* How many folders up resolve_node follows stored parent rows. */
#define RESOLVE_DEPTH 64

struct cfs_vfs {
	struct cfs_drive *drive;
	struct cfs_store *store;
	struct cfs_nsdb *ns;
	struct cfs_reader *reader;
	struct cfs_inode *tab;
	struct cfs_handles *handles; /* open files and folders by fh number */
	long dir_ttl_ms;
	struct cfs_export_map exports;
	char root_id[CFS_ID_MAX];
	uint64_t files_checked, files_mismatched; /* whole-file checks (atomic) */
	/* Changes API polling */
	struct cfs_vfs_notify notify;
	pthread_t poller;
	int polling, stop;
	long poll_ms;
	pthread_mutex_t poll_lock;
	pthread_cond_t poll_cond;
	uint64_t changes_applied, polls; /* stats */
	int64_t stored_valid_after; /* stored listings fetched before this (wall ms) are stale */
};

enum { H_FILE = 1, H_DIR = 2 }; /* struct cfs_handle kinds */

struct cfs_vfs_dir {
	struct cfs_handle h;
	struct cfs_listing *l;
	uint64_t ino, parent;
};

/* A blob's identity copied out of its node (table lock held), so a download
 * can run without the lock. */
struct blob_ref {
	char key[2 * CFS_ID_MAX + 2]; /* block cache key: content id @ revision */
	char id[CFS_ID_MAX];
	char rev[CFS_ID_MAX];         /* headRevisionId downloads are pinned to, or "" */
	int64_t size;
};

static void blob_ref(const struct cfs_node *n, struct blob_ref *b)
{
	snprintf(b->key, sizeof(b->key), "%s@%s", n->content_id, n->rev);
	memcpy(b->id, n->content_id, sizeof(b->id));
	snprintf(b->rev, sizeof(b->rev), "%s", strncmp(n->rev, "r:", 2) == 0 ? n->rev + 2 : "");
	b->size = n->size;
}

static struct cfs_reader_file reader_file(const struct blob_ref *b)
{
	return (struct cfs_reader_file){ b->id, b->rev[0] ? b->rev : NULL, b->key, b->size };
}

struct cfs_vfs_file {
	struct cfs_handle h;
	uint64_t ino;
	struct blob_ref b; /* what to read (size: the export's, for exports) */
	char *data; /* whole export, or NULL for blobs */
	int held;   /* cfs_store_hold taken on key */
	struct cfs_reader_stream *stream; /* access pattern, for prefetch */
};

static void file_free(struct cfs_vfs *v, struct cfs_vfs_file *f, int check);
static void put_file(struct cfs_vfs *v, struct cfs_vfs_file *f);
static void dir_free(struct cfs_vfs_dir *d);

static int64_t clock_ms(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
}

/* The content identity Drive gives: headRevisionId, else md5, else version. */
static void content_rev(const struct cfs_file_meta *m, char *out, size_t cap)
{
	if (m->rev[0])
		snprintf(out, cap, "r:%.120s", m->rev);
	else if (m->md5[0])
		snprintf(out, cap, "m:%s", m->md5);
	else
		snprintf(out, cap, "v:%" PRId64, m->version);
}

/* The root as a one-entry row, for offline remounts. */
static int load_root_cb(const struct cfs_lrow_entry *e, void *arg)
{
	struct cfs_file_meta *m = arg;
	snprintf(m->id, sizeof(m->id), "%s", e->id);
	snprintf(m->mime, sizeof(m->mime), "%s", CFS_FOLDER_MIME);
	m->mtime_ns = e->mtime_ns;
	m->ctime_ns = e->ctime_ns;
	return 0;
}

static int resolve_root(struct cfs_vfs *v, const char *want, struct cfs_file_meta *m)
{
	memset(m, 0, sizeof(*m));
	/* A root resolved before is trusted: the mount comes up at once, even
	 * with Drive unreachable; its listing is checked as usual. */
	if (cfs_nsdb_load_root(v->ns, want, load_root_cb, m) == 0 && m->id[0]) {
		CFS_INFO("root %s is %s (from the cache index)", want, m->id);
		return 0;
	}
	int rc = cfs_drive_get(v->drive, want, m);
	if (!rc && strcmp(m->mime, CFS_FOLDER_MIME) != 0) {
		CFS_ERROR("root %s is not a folder (%s)", want, m->mime);
		rc = -ENOTDIR;
	}
	if (!rc) {
		struct cfs_lrow_entry e = { CFS_ROOT_INO, 1, 0, m->mtime_ns, m->ctime_ns, "/",
					    m->id, m->id, "", "" };
		if (cfs_nsdb_save_root(v->ns, want, &e))
			CFS_WARN("cannot store the root in the cache index");
	}
	return rc;
}

static void drop_handle(struct cfs_handle *e, void *arg);

int cfs_vfs_new(struct cfs_drive *d, struct cfs_store *store, const struct cfs_vfs_opts *o,
		struct cfs_vfs **out)
{
	*out = NULL;
	struct cfs_vfs *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->drive = d;
	v->store = store;
	v->dir_ttl_ms = (o->dir_ttl_s > 0 ? o->dir_ttl_s : 300) * 1000L;
	v->exports = o->exports;
	pthread_mutex_init(&v->poll_lock, NULL);
	pthread_cond_init(&v->poll_cond, NULL);
	int rc = cfs_inode_new(&v->tab);
	if (!rc)
		rc = cfs_handles_new(&v->handles);
	if (!rc)
		rc = cfs_nsdb_new(store, &v->ns);
	if (!rc)
		rc = cfs_reader_new(d, store, &o->reader, &v->reader);
	struct cfs_file_meta m;
	memset(&m, 0, sizeof(m));
	void *va = NULL;
	size_t val = 0;
	if (!rc && cfs_store_meta_get(store, "meta", "dirs_valid_after", 16, &va, &val) == 0 &&
	    val == sizeof(int64_t))
		memcpy(&v->stored_valid_after, va, sizeof(int64_t));
	free(va);
	if (!rc)
		rc = resolve_root(v, o->root_id && *o->root_id ? o->root_id : "root", &m);
	if (!rc) {
		struct cfs_node *n = cfs_inode_add(v->tab, m.id, CFS_ROOT_INO);
		if (!n) {
			rc = -ENOMEM;
		} else {
			snprintf(v->root_id, sizeof(v->root_id), "%s", m.id);
			memcpy(n->content_id, m.id, sizeof(n->content_id));
			n->is_dir = 1;
			n->parent = CFS_ROOT_INO;
			n->size = 0;
			n->mtime_ns = m.mtime_ns;
			n->ctime_ns = m.ctime_ns;
		}
	}
	cfs_file_meta_cleanup(&m);
	if (rc) {
		cfs_vfs_free(v);
		return rc;
	}
	*out = v;
	return 0;
}

void cfs_vfs_free(struct cfs_vfs *v)
{
	if (!v)
		return;
	if (v->polling) {
		pthread_mutex_lock(&v->poll_lock);
		v->stop = 1;
		pthread_cond_signal(&v->poll_cond);
		pthread_mutex_unlock(&v->poll_lock);
		pthread_join(v->poller, NULL);
	}
	pthread_mutex_destroy(&v->poll_lock);
	pthread_cond_destroy(&v->poll_cond);
	cfs_handles_free(v->handles, drop_handle, v); /* open at unmount: never released */
	cfs_reader_free(v->reader);
	cfs_nsdb_free(v->ns);
	cfs_inode_free(v->tab);
	free(v);
}

const char *cfs_vfs_root_id(const struct cfs_vfs *v)
{
	return v->root_id;
}

struct cfs_reader *cfs_vfs_reader(struct cfs_vfs *v)
{
	return v->reader;
}

/* ---- listing -------------------------------------------------------------- */

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
	content_rev(m, it.rev, sizeof(it.rev));
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
	int rc = cfs_drive_get(c->v->drive, m->target_id, &t);
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
			   int64_t listed_at_ms)
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
		nd->parent = ino;
		nd->is_dir = it[i].is_dir;
		memcpy(nd->content_id, it[i].content_id, sizeof(nd->content_id));
		memcpy(nd->export_mime, it[i].export_mime, sizeof(nd->export_mime));
		if (strcmp(nd->rev, it[i].rev) != 0 || !it[i].export_mime[0] || it[i].size >= 0)
			nd->size = it[i].size; /* an export keeps its learned size until it changes */
		memcpy(nd->rev, it[i].rev, sizeof(nd->rev));
		memcpy(nd->md5, it[i].md5, sizeof(nd->md5));
		memcpy(nd->sha256, it[i].sha256, sizeof(nd->sha256));
		nd->mtime_ns = it[i].mtime_ns;
		nd->ctime_ns = it[i].ctime_ns;
		l->e[i].name = it[i].final;
		it[i].final = NULL;
		l->e[i].ino = nd->ino;
		l->e[i].is_dir = nd->is_dir;
	}
	if (!rc) {
		cfs_listing_sort(l);
		for (size_t i = 0; i < l->n; i++) {
			struct cfs_node *c = cfs_inode_get(v->tab, l->e[i].ino);
			if (c)
				c->lpos = i;
		}
		struct cfs_node *d = cfs_inode_get(v->tab, ino);
		cfs_listing_unref(d->listing);
		d->listing = l;
		d->listed_at_ms = listed_at_ms;
		l = NULL;
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
	int rc = cfs_nsdb_save_listing(v->ns, content_id, e, n, clock_ms(CLOCK_REALTIME));
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
			 const char *const *anc, int nanc)
{
	struct collect c = { .v = v, .ancestors = anc, .nanc = nanc };
	int rc = cfs_drive_list(v->drive, content_id, on_child, &c);
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
		save_parents(v, ino, c.it, c.n);
		save_listing(v, content_id, c.it, c.n);
		rc = install_listing(v, ino, c.it, c.n, now_ms());
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
static int load_listing(struct cfs_vfs *v, uint64_t ino, const char *content_id)
{
	struct collect c = { .v = v };
	int64_t fetched = 0;
	int rc = cfs_nsdb_load_listing(v->ns, content_id, &fetched, on_stored, &c);
	if (!rc) {
		int64_t age = clock_ms(CLOCK_REALTIME) - fetched;
		if (fetched < __atomic_load_n(&v->stored_valid_after, __ATOMIC_RELAXED))
			age = v->dir_ttl_ms; /* a change made it stale: fetch again when possible */
		save_parents(v, ino, c.it, c.n); /* rows stored by older versions lack them */
		rc = install_listing(v, ino, c.it, c.n, now_ms() - (age > 0 ? age : 0));
	}
	free_items(c.it, c.n);
	return rc;
}

/* Returns a reference to a fresh enough listing of folder ino: from memory,
 * else from the index, else from Drive; when Drive fails, an old listing is
 * served rather than an error. */
static int get_listing(struct cfs_vfs *v, uint64_t ino, struct cfs_listing **out)
{
	int rc = 0;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	if (!n)
		rc = -ENOENT;
	else if (!n->is_dir)
		rc = -ENOTDIR;
	while (!rc) {
		if (n->listing && now_ms() - n->listed_at_ms < v->dir_ttl_ms)
			break;
		if (n->listing_busy) {
			cfs_inode_wait(v->tab);
			continue;
		}
		n->listing_busy = 1;
		char cid[CFS_ID_MAX];
		char anc_store[MAX_DEPTH][CFS_ID_MAX];
		const char *anc[MAX_DEPTH];
		int nanc = 0, had = n->listing != NULL;
		unsigned gen = n->expired;
		memcpy(cid, n->content_id, sizeof(cid));
		for (struct cfs_node *a = n; a && nanc < MAX_DEPTH;
		     a = a->ino == CFS_ROOT_INO ? NULL : cfs_inode_get(v->tab, a->parent)) {
			memcpy(anc_store[nanc], a->content_id, CFS_ID_MAX);
			anc[nanc] = anc_store[nanc];
			nanc++;
		}
		cfs_inode_unlock(v->tab);
		int frc = had ? -ENOENT : load_listing(v, ino, cid);
		cfs_inode_lock(v->tab);
		if (frc || now_ms() - n->listed_at_ms >= v->dir_ttl_ms) {
			cfs_inode_unlock(v->tab);
			frc = fetch_listing(v, ino, cid, anc, nanc);
			cfs_inode_lock(v->tab);
		}
		n->listing_busy = 0;
		cfs_inode_broadcast(v->tab);
		if (!frc && n->expired != gen) {
			/* a change arrived while we loaded or fetched: serve this
			 * listing now, but fetch again at the next use */
			n->listed_at_ms = now_ms() - v->dir_ttl_ms;
			break;
		}
		if (frc) {
			if (n->listing) {
				CFS_WARN("listing of %s failed (%s); serving the previous listing", cid,
					 cfs_strerror(frc));
				n->listed_at_ms = now_ms(); /* try Drive again after a TTL */
				break;
			}
			rc = frc;
		}
	}
	if (!rc)
		*out = cfs_listing_ref(n->listing);
	cfs_inode_unlock(v->tab);
	return rc;
}

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
	if (!rc)
		rc = resolve_at(v, parent, depth + 1);
	if (!rc) {
		struct cfs_listing *l;
		rc = get_listing(v, parent, &l); /* installs the node, if still listed */
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
 * that disappeared.  A Drive failure while listing is returned as is (the
 * item may well exist). */
static int resolve_node(struct cfs_vfs *v, uint64_t ino)
{
	return resolve_at(v, ino, 0);
}

/* ---- attributes ------------------------------------------------------------ */

static void fill_attr(const struct cfs_node *n, struct cfs_vfs_attr *a)
{
	a->ino = n->ino;
	a->is_dir = n->is_dir;
	a->size_known = n->size >= 0;
	a->size = n->size >= 0 ? n->size : 0;
	a->mtime_ns = n->mtime_ns;
	a->ctime_ns = n->ctime_ns;
}

int cfs_vfs_getattr(struct cfs_vfs *v, uint64_t ino, struct cfs_vfs_attr *a)
{
	int rc = resolve_node(v, ino);
	if (rc)
		return rc;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	if (n)
		fill_attr(n, a);
	cfs_inode_unlock(v->tab);
	return n ? 0 : -ENOENT;
}

int cfs_vfs_lookup(struct cfs_vfs *v, uint64_t parent, const char *name, struct cfs_vfs_attr *a)
{
	if (strlen(name) > CFS_NAME_MAX)
		return -ENAMETOOLONG;
	struct cfs_listing *l;
	int rc = resolve_node(v, parent);
	if (!rc)
		rc = get_listing(v, parent, &l);
	if (rc)
		return rc;
	long i = cfs_listing_find(l, name);
	if (i < 0)
		rc = -ENOENT;
	else
		rc = cfs_vfs_getattr(v, l->e[i].ino, a);
	cfs_listing_unref(l);
	return rc;
}

/* ---- directories ------------------------------------------------------------ */

static void dir_free(struct cfs_vfs_dir *d)
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
	int rc = resolve_node(v, ino);
	if (!rc)
		rc = get_listing(v, ino, &d->l);
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
static int add_handle(struct cfs_vfs *v, struct cfs_handle *e)
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
		rc = add_handle(v, &d->h);
	if (rc) {
		dir_free(d);
		return rc;
	}
	*fh = num;
	return 0;
}

static void put_dir(struct cfs_vfs_dir *d)
{
	if (cfs_handles_unref(&d->h))
		dir_free(d);
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
			dir_free(d); /* another thread rebuilt it first, or the number is a file's */
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

/* ---- files ---------------------------------------------------------------- */

/* A file a read found changed in Drive: its metadata again, before the
 * next open uses it (lock not held). */
static int refresh_stale(struct cfs_vfs *v, uint64_t ino)
{
	char cid[CFS_ID_MAX];
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	int stale = n && n->stale && !n->export_mime[0];
	if (stale)
		memcpy(cid, n->content_id, sizeof(cid));
	cfs_inode_unlock(v->tab);
	if (!stale)
		return 0;
	struct cfs_file_meta m;
	int rc = cfs_drive_get(v->drive, cid, &m);
	if (rc)
		return rc;
	cfs_inode_lock(v->tab);
	if (m.trashed) {
		rc = -ENOENT;
	} else {
		content_rev(&m, n->rev, sizeof(n->rev));
		n->size = m.size < 0 ? 0 : m.size;
		n->mtime_ns = m.mtime_ns;
		memcpy(n->md5, m.md5, sizeof(n->md5));
		memcpy(n->sha256, m.sha256, sizeof(n->sha256));
		n->stale = 0;
		CFS_INFO("%s changed in Drive: now %s, %lld bytes", cid, n->rev, (long long)n->size);
	}
	cfs_inode_unlock(v->tab);
	cfs_file_meta_cleanup(&m);
	return rc;
}

#define SIBLINGS_MAX 32
#define SIBLING_SIZE_MAX (8 << 20)

/* A DataLoader epoch over a sorted file list opens a folder's files in
 * listing order: once two opens in a row are neighbours, fetch the next
 * small files ahead (2, 4, ... up to 32 ahead of the reader). */
static void prefetch_siblings(struct cfs_vfs *v, uint64_t ino)
{
	struct blob_ref refs[SIBLINGS_MAX];
	int n = 0;
	cfs_inode_lock(v->tab);
	struct cfs_node *f = cfs_inode_get(v->tab, ino);
	struct cfs_node *d = f ? cfs_inode_get(v->tab, f->parent) : NULL;
	if (d && d->listing && f->lpos < d->listing->n && d->listing->e[f->lpos].ino == ino) {
		size_t pos = f->lpos + 1; /* last_open counts from 1 */
		if (d->last_open && pos > d->last_open && pos <= d->last_open + 3)
			d->open_streak = d->open_streak < 5 ? d->open_streak + 1 : 5;
		else if (pos != d->last_open)
			d->open_streak = 0;
		d->last_open = pos;
		pos--;
		unsigned ahead = d->open_streak ? 1u << d->open_streak : 0;
		for (size_t i = pos + 1; i < d->listing->n && i <= pos + ahead && n < SIBLINGS_MAX;
		     i++) {
			struct cfs_node *s = cfs_inode_get(v->tab, d->listing->e[i].ino);
			if (!s || s->is_dir || s->export_mime[0] || s->size <= 0 ||
			    s->size > SIBLING_SIZE_MAX)
				continue;
			blob_ref(s, &refs[n]);
			n++;
		}
	}
	cfs_inode_unlock(v->tab);
	for (int i = 0; i < n; i++) {
		struct cfs_reader_file rf = reader_file(&refs[i]);
		if (cfs_reader_prefetch(v->reader, &rf) == -EBUSY)
			break;
	}
}

/* Gets f ready to read what f->b names: the whole export when export_mime
 * is set (into memory), else a stream for the prefetcher and a hold on the
 * blocks.  On failure f holds nothing. */
static int file_start(struct cfs_vfs *v, struct cfs_vfs_file *f, const char *export_mime)
{
	if (export_mime[0]) {
		struct cfs_buf b = { 0 };
		int rc = cfs_drive_export(v->drive, f->b.id, export_mime, EXPORT_MAX, &b);
		if (!rc) {
			size_t len;
			f->data = cfs_buf_steal(&b, &len);
			f->b.size = (int64_t)len;
			if (!f->data && !(f->data = calloc(1, 1)))
				rc = -ENOMEM;
		}
		cfs_buf_cleanup(&b);
		return rc;
	}
	if (!(f->stream = cfs_reader_stream_new()))
		return -ENOMEM;
	/* Blocks of open files are the last the budget evicts, but only for
	 * files small next to the budget: holding a file larger than the cache
	 * would leave no room for its own later blocks. */
	if ((uint64_t)f->b.size <= cfs_store_budget(v->store) / 8)
		f->held = cfs_store_hold(v->store, f->b.key) == 0;
	return 0;
}

/* The stored form of what f is pinned to. */
static void file_row(const struct cfs_vfs_file *f, const char *export_mime,
		     struct cfs_nsdb_fh *r)
{
	memset(r, 0, sizeof(*r));
	r->ino = f->ino;
	r->size = f->b.size;
	memcpy(r->key, f->b.key, sizeof(r->key));
	memcpy(r->id, f->b.id, sizeof(r->id));
	memcpy(r->rev, f->b.rev, sizeof(r->rev));
	snprintf(r->export_mime, sizeof(r->export_mime), "%s", export_mime);
}

int cfs_vfs_open(struct cfs_vfs *v, uint64_t ino, int flags, uint64_t *fh, int *keep_cache,
		 int *direct_io)
{
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
		return -EROFS;
	int rc = resolve_node(v, ino);
	if (!rc)
		rc = refresh_stale(v, ino);
	if (rc)
		return rc;
	struct cfs_vfs_file *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	char export_mime[128];
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	if (!n)
		rc = -ENOENT;
	else if (n->is_dir)
		rc = -EISDIR;
	if (!rc) {
		f->ino = ino;
		blob_ref(n, &f->b);
		memcpy(export_mime, n->export_mime, sizeof(export_mime));
		*keep_cache = !export_mime[0] && strcmp(n->opened_rev, n->rev) == 0;
		*direct_io = export_mime[0] != '\0';
		memcpy(n->opened_rev, n->rev, sizeof(n->rev));
	}
	cfs_inode_unlock(v->tab);
	if (!rc)
		rc = file_start(v, f, export_mime);
	if (!rc && f->data) {
		cfs_inode_lock(v->tab);
		n->size = f->b.size; /* an export's size is known once fetched */
		cfs_inode_unlock(v->tab);
	}
	if (!rc)
		rc = cfs_nsdb_fh_alloc(v->ns, &f->h.fh);
	if (!rc) {
		/* Stored before the reply hands the number to the kernel, so a
		 * server restarted later serves this handle at the same revision.
		 * Best effort: without the row the open still works, only a read
		 * after a restart would fail (EBADF). */
		struct cfs_nsdb_fh r;
		file_row(f, export_mime, &r);
		int wrc = cfs_nsdb_fh_put(v->ns, f->h.fh, &r);
		if (wrc)
			CFS_WARN("cannot store file handle %llu: %s", (unsigned long long)f->h.fh,
				 cfs_strerror(wrc));
		f->h.kind = H_FILE;
		rc = add_handle(v, &f->h);
		if (rc && !wrc)
			cfs_nsdb_fh_del(v->ns, f->h.fh);
	}
	if (rc) {
		file_free(v, f, 0);
		return rc;
	}
	if (!f->data)
		prefetch_siblings(v, ino);
	*fh = f->h.fh;
	return 0;
}

/* Rebuilds file handle fh, handed out by a server process that was restarted
 * since, from its stored row: the same content key, revision and size the
 * open pinned, never the node's current revision, so the kernel gets the
 * bytes of the revision it opened (a revision Drive no longer serves fails
 * the read with ESTALE, as it would have in the old process).  An export is
 * fetched again (it lived in the old process's memory): the document may
 * have changed since the open, which for exports (direct_io, no revision in
 * the key) is the same as reading it a little later.  No row: -EBADF. */
static int file_rebuild(struct cfs_vfs *v, uint64_t ino, uint64_t fh, struct cfs_vfs_file **out)
{
	struct cfs_nsdb_fh r;
	int rc = cfs_nsdb_fh_get(v->ns, fh, &r);
	if (rc == -ENOENT || rc == CFS_E_PROTO || (!rc && r.ino != ino))
		return -EBADF;
	if (rc)
		return rc;
	/* the node is not needed for the bytes, only for noting a revision
	 * change and the whole-file check: best effort */
	resolve_node(v, ino);
	struct cfs_vfs_file *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->h.fh = fh;
	f->h.kind = H_FILE;
	f->ino = ino;
	memcpy(f->b.key, r.key, sizeof(f->b.key));
	memcpy(f->b.id, r.id, sizeof(f->b.id));
	memcpy(f->b.rev, r.rev, sizeof(f->b.rev));
	f->b.size = r.size;
	rc = file_start(v, f, r.export_mime);
	if (rc) {
		file_free(v, f, 0);
		return rc;
	}
	CFS_INFO("rebuilt file handle %llu (inode %llu, %s) after a restart",
		 (unsigned long long)fh, (unsigned long long)ino, r.key);
	*out = f;
	return 0;
}

/* The handle fh on file ino with a reference taken, rebuilt if this process
 * does not know it. */
static int get_file(struct cfs_vfs *v, uint64_t ino, uint64_t fh, struct cfs_vfs_file **out)
{
	struct cfs_handle *e = cfs_handles_get(v->handles, fh, H_FILE);
	if (!e) {
		struct cfs_vfs_file *f;
		int rc = file_rebuild(v, ino, fh, &f);
		if (rc)
			return rc;
		rc = cfs_handles_add(v->handles, &f->h, &e);
		if (rc || e != &f->h)
			file_free(v, f, 0); /* another thread rebuilt it first */
		if (rc)
			return rc == -EEXIST ? -EBADF : rc;
	}
	*out = (struct cfs_vfs_file *)e;
	if ((*out)->ino != ino) { /* not this file's handle */
		put_file(v, *out);
		return -EBADF;
	}
	return 0;
}

int cfs_vfs_read(struct cfs_vfs *v, uint64_t ino, uint64_t fh, int64_t off, size_t len,
		 char *buf, size_t *got)
{
	*got = 0;
	if (off < 0)
		return -EINVAL;
	struct cfs_vfs_file *f;
	int rc = get_file(v, ino, fh, &f);
	if (rc)
		return rc;
	if (f->data) {
		if (off < f->b.size) {
			if ((int64_t)len > f->b.size - off)
				len = (size_t)(f->b.size - off);
			memcpy(buf, f->data + off, len);
			*got = len;
		}
		put_file(v, f);
		return 0;
	}
	struct cfs_reader_file rf = reader_file(&f->b);
	rc = cfs_reader_read(v->reader, f->stream, &rf, off, len, buf, got);
	if (rc == -ESTALE) {
		/* The file changed in Drive since its listing: fail this read rather
		 * than mix revisions, and make the next lookup fetch the listing
		 * again and the next open drop the kernel's pages. */
		cfs_inode_lock(v->tab);
		struct cfs_node *n = cfs_inode_get(v->tab, f->ino);
		struct cfs_node *dir = n ? cfs_inode_get(v->tab, n->parent) : NULL;
		if (dir)
			dir->listed_at_ms = now_ms() - v->dir_ttl_ms;
		if (n) {
			n->opened_rev[0] = '\0';
			n->stale = 1;
		}
		cfs_inode_unlock(v->tab);
	}
	put_file(v, f);
	return rc;
}

/* Hashes a completely cached file and compares with Drive's checksum.
 * Returns 1 if it matched, 0 if it could not be checked, -1 on a mismatch. */
static int hash_cached(struct cfs_vfs *v, const char *key, int64_t size, const char *alg,
		       const char *want)
{
	uint32_t bs = cfs_store_block_size(v->store);
	char *buf = malloc(bs);
	struct cfs_digest *d = NULL;
	int ok = buf && cfs_digest_new(alg, &d) == 0;
	for (uint64_t b = 0; ok && (int64_t)(b * bs) < size; b++) {
		uint32_t got = 0;
		ok = cfs_store_read(v->store, key, b, 0, bs, buf, &got) == 0 &&
		     cfs_digest_update(d, buf, got) == 0;
	}
	char hex[65] = "";
	if (ok)
		ok = cfs_digest_final_hex(d, hex, sizeof(hex)) == 0;
	else
		cfs_digest_free(d);
	free(buf);
	if (!ok)
		return 0; /* a block went away meanwhile: nothing to conclude */
	return strcmp(hex, want) == 0 ? 1 : -1;
}

/* When a file is completely cached and Drive gave a checksum, the cached
 * copy is checked against it once per revision; a mismatch drops it all. */
static void check_whole_file(struct cfs_vfs *v, struct cfs_vfs_file *f)
{
	char md5[33], sha[65], key[sizeof(f->b.key)];
	int todo = 0;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, f->ino);
	if (n) {
		snprintf(key, sizeof(key), "%s@%s", n->content_id, n->rev);
		todo = strcmp(key, f->b.key) == 0 && strcmp(n->checked_rev, n->rev) != 0 &&
		       (n->md5[0] || n->sha256[0]) && f->b.size > 0;
		memcpy(md5, n->md5, sizeof(md5));
		memcpy(sha, n->sha256, sizeof(sha));
	}
	cfs_inode_unlock(v->tab);
	if (!todo || cfs_store_cached_bytes(v->store, f->b.key) != (uint64_t)f->b.size)
		return;
	int r = sha[0] ? hash_cached(v, f->b.key, f->b.size, "sha256", sha)
		       : hash_cached(v, f->b.key, f->b.size, "md5", md5);
	if (r == 0)
		return;
	__atomic_add_fetch(r > 0 ? &v->files_checked : &v->files_mismatched, 1, __ATOMIC_RELAXED);
	if (r > 0) {
		cfs_inode_lock(v->tab);
		if (strcmp(key, f->b.key) == 0)
			memcpy(n->checked_rev, n->rev, sizeof(n->rev));
		cfs_inode_unlock(v->tab);
		return;
	}
	char prefix[sizeof(f->b.key) + 1];
	uint64_t bytes, blocks;
	snprintf(prefix, sizeof(prefix), "%s", f->b.key);
	CFS_ERROR("cached copy of %s does not match Drive's %s checksum; dropping it", f->b.key,
		  sha[0] ? "sha256" : "md5");
	cfs_store_evict_prefix(v->store, prefix, &bytes, &blocks);
}

void cfs_vfs_counters(struct cfs_vfs *v, uint64_t *checked, uint64_t *mismatched)
{
	*checked = __atomic_load_n(&v->files_checked, __ATOMIC_RELAXED);
	*mismatched = __atomic_load_n(&v->files_mismatched, __ATOMIC_RELAXED);
}

/* Frees a file handle's object; check: run the whole-file check first (a
 * real release, not a failed open). */
static void file_free(struct cfs_vfs *v, struct cfs_vfs_file *f, int check)
{
	if (!f)
		return;
	if (f->held) {
		if (check)
			check_whole_file(v, f);
		cfs_store_release(v->store, f->b.key);
	}
	cfs_reader_stream_free(f->stream);
	free(f->data);
	free(f);
}

static void put_file(struct cfs_vfs *v, struct cfs_vfs_file *f)
{
	if (cfs_handles_unref(&f->h))
		file_free(v, f, 1);
}

void cfs_vfs_release(struct cfs_vfs *v, uint64_t ino, uint64_t fh)
{
	(void)ino;
	struct cfs_handle *e = cfs_handles_remove(v->handles, fh, H_FILE);
	/* the row goes first: a handle is never rebuilt after its release; none
	 * when this process never stored it (a failed write) or it was released
	 * before a restart's resend */
	int rc = cfs_nsdb_fh_del(v->ns, fh);
	if (rc && rc != -ENOENT)
		CFS_WARN("cannot drop stored file handle %llu: %s", (unsigned long long)fh,
			 cfs_strerror(rc));
	if (e)
		put_file(v, (struct cfs_vfs_file *)e);
}

/* Unmount: handles the kernel never released.  Their rows stay: this
 * process may be ending for a restart under the same mount, where the
 * kernel still holds the numbers. */
static void drop_handle(struct cfs_handle *e, void *arg)
{
	if (e->kind == H_FILE)
		file_free(arg, (struct cfs_vfs_file *)e, 0);
	else
		dir_free((struct cfs_vfs_dir *)e);
}

int cfs_vfs_statfs(struct cfs_vfs *v, struct statvfs *st)
{
	memset(st, 0, sizeof(*st));
	st->f_bsize = 4096;
	st->f_frsize = 4096;
	st->f_namemax = CFS_NAME_MAX;
	cfs_inode_lock(v->tab);
	st->f_files = cfs_inode_count(v->tab);
	cfs_inode_unlock(v->tab);
	return 0;
}

/* ---- control -------------------------------------------------------------- */

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
	if (is_dir && n->listing)
		l = cfs_listing_ref(n->listing);
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
	int rc = resolve_node(v, ino);
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
	int rc = resolve_node(v, ino);
	if (rc)
		return rc;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	if (!n)
		rc = -ENOENT;
	else if (n->is_dir)
		rc = -EISDIR;
	else if (!n->export_mime[0]) /* exports are fetched whole at open: nothing to warm */
		blob_ref(n, &b);
	cfs_inode_unlock(v->tab);
	if (rc || b.size <= 0)
		return rc;
	struct cfs_reader_file rf = reader_file(&b);
	return cfs_reader_warm(v->reader, &rf, off, len, fetched);
}

int cfs_vfs_evict_to(struct cfs_vfs *v, uint64_t target, uint64_t *bytes, uint64_t *blocks)
{
	*bytes = *blocks = 0;
	return cfs_store_evict_to(v->store, target, bytes, blocks);
}

/* ---- changes ---------------------------------------------------------------- */

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
	d->listed_at_ms = now_ms() - c->v->dir_ttl_ms;
	d->expired++; /* a fetch or load in progress is stale too */
	add_inval(c, d->ino, NULL);
}

static int on_change(const char *id, int removed, const struct cfs_file_meta *m, void *arg)
{
	struct change_ctx *c = arg;
	struct cfs_vfs *v = c->v;
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
			long at = d->listing ? cfs_listing_find_ino(d->listing, n->ino) : -1;
			if (at >= 0)
				add_inval(c, d->ino, d->listing->e[at].name);
			expire_dir(c, d);
		}
		n->prev_parent = 0;
		char rev[CFS_ID_MAX];
		if (m && !removed) {
			content_rev(m, rev, sizeof(rev));
			if (!n->is_dir && strcmp(rev, n->rev) != 0) {
				n->stale = 1;
				n->opened_rev[0] = '\0';
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
	if (c.all_stale) {
		int64_t now = clock_ms(CLOCK_REALTIME);
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
