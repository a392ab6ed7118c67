/* vfs: FUSE-free file system core (see vfs.h). */
#include "vfs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "drive.h"
#include "err.h"
#include "inode.h"
#include "log.h"
#include "names.h"

#define EXPORT_MAX (64u << 20)
#define MAX_DEPTH 128

struct cfs_vfs {
	struct cfs_drive *drive;
	struct cfs_inode *tab;
	long dir_ttl_ms;
	struct cfs_export_map exports;
	char root_id[CFS_ID_MAX];
};

struct cfs_vfs_dir {
	struct cfs_listing *l;
	uint64_t ino, parent;
};

struct cfs_vfs_file {
	uint64_t ino;
	char content_id[CFS_ID_MAX];
	int64_t size;
	char *data; /* whole export, or NULL for blobs */
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

int cfs_vfs_new(struct cfs_drive *d, const struct cfs_vfs_opts *o, struct cfs_vfs **out)
{
	*out = NULL;
	struct cfs_vfs *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->drive = d;
	v->dir_ttl_ms = (o->dir_ttl_s > 0 ? o->dir_ttl_s : 300) * 1000L;
	v->exports = o->exports;
	int rc = cfs_inode_new(&v->tab);
	if (rc) {
		free(v);
		return rc;
	}
	struct cfs_file_meta m;
	const char *want = o->root_id && *o->root_id ? o->root_id : "root";
	rc = cfs_drive_get(d, want, &m);
	if (!rc && strcmp(m.mime, CFS_FOLDER_MIME) != 0) {
		CFS_ERROR("root %s is not a folder (%s)", want, m.mime);
		rc = -ENOTDIR;
	}
	if (!rc) {
		struct cfs_node *n = cfs_inode_intern(v->tab, m.id);
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
	cfs_inode_free(v->tab);
	free(v);
}

const char *cfs_vfs_root_id(const struct cfs_vfs *v)
{
	return v->root_id;
}

/* ---- listing -------------------------------------------------------------- */

struct item {
	char name[CFS_NAME_MAX + 1];
	char id[CFS_ID_MAX];
	char content_id[CFS_ID_MAX];
	char rev[CFS_ID_MAX];
	const char *export_mime;
	int is_dir;
	int64_t size, mtime_ns, ctime_ns;
};

struct collect {
	struct cfs_vfs *v;
	struct item *it;
	size_t n, cap;
	const char *const *ancestors; /* content ids from this folder up to the root */
	int nanc;
};

/* Turns one Drive entry (after shortcut resolution) into an item, or skips it. */
static int add_item(struct collect *c, const struct cfs_file_meta *self,
		    const struct cfs_file_meta *m)
{
	struct item it;
	memset(&it, 0, sizeof(it));
	const char *ext = NULL;
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
		if (cfs_export_lookup(&c->v->exports, m->mime, &ext, &it.export_mime))
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
	it.size = it.is_dir ? 0 : it.export_mime ? -1 : m->size < 0 ? 0 : m->size;
	it.mtime_ns = m->mtime_ns;
	it.ctime_ns = self->ctime_ns;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct item *ni = realloc(c->it, cap * sizeof(*ni));
		if (!ni)
			return -ENOMEM;
		c->it = ni;
		c->cap = cap;
	}
	c->it[c->n++] = it;
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

/* Fetches the listing of dir (lock not held) and installs it (lock taken). */
static int fetch_listing(struct cfs_vfs *v, uint64_t ino, const char *content_id,
			 const char *const *anc, int nanc)
{
	struct collect c = { .v = v, .ancestors = anc, .nanc = nanc };
	int rc = cfs_drive_list(v->drive, content_id, on_child, &c);
	struct cfs_names_entry *ne = NULL;
	struct cfs_listing *l = NULL;
	if (!rc && !(ne = calloc(c.n ? c.n : 1, sizeof(*ne))))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < c.n; i++) {
		ne[i].name = c.it[i].name;
		ne[i].id = c.it[i].id;
		ne[i].ctime_ns = c.it[i].ctime_ns;
	}
	if (!rc)
		rc = cfs_names_assign(ne, c.n);
	if (!rc && !(l = cfs_listing_new(c.n)))
		rc = -ENOMEM;
	cfs_inode_lock(v->tab);
	for (size_t i = 0; !rc && i < c.n; i++) {
		struct item *it = &c.it[i];
		struct cfs_node *n = cfs_inode_intern(v->tab, it->id);
		if (!n) {
			rc = -ENOMEM;
			break;
		}
		n->parent = ino;
		n->is_dir = it->is_dir;
		memcpy(n->content_id, it->content_id, sizeof(n->content_id));
		snprintf(n->export_mime, sizeof(n->export_mime), "%s",
			 it->export_mime ? it->export_mime : "");
		if (strcmp(n->rev, it->rev) != 0 || !it->export_mime)
			n->size = it->size; /* an export keeps its learned size until it changes */
		memcpy(n->rev, it->rev, sizeof(n->rev));
		n->mtime_ns = it->mtime_ns;
		n->ctime_ns = it->ctime_ns;
		l->e[i].name = ne[i].final;
		ne[i].final = NULL;
		l->e[i].ino = n->ino;
		l->e[i].is_dir = n->is_dir;
	}
	if (!rc) {
		cfs_listing_sort(l);
		struct cfs_node *d = cfs_inode_get(v->tab, ino);
		cfs_listing_unref(d->listing);
		d->listing = l;
		d->listed_at_ms = now_ms();
		l = NULL;
	}
	cfs_inode_unlock(v->tab);
	for (size_t i = 0; ne && i < c.n; i++)
		free(ne[i].final);
	free(ne);
	cfs_listing_unref(l);
	free(c.it);
	return rc;
}

/* Returns a reference to a fresh enough listing of folder ino. */
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
		int nanc = 0;
		memcpy(cid, n->content_id, sizeof(cid));
		for (struct cfs_node *a = n; a && nanc < MAX_DEPTH;
		     a = a->ino == CFS_ROOT_INO ? NULL : cfs_inode_get(v->tab, a->parent)) {
			memcpy(anc_store[nanc], a->content_id, CFS_ID_MAX);
			anc[nanc] = anc_store[nanc];
			nanc++;
		}
		cfs_inode_unlock(v->tab);
		int frc = fetch_listing(v, ino, cid, anc, nanc);
		cfs_inode_lock(v->tab);
		n->listing_busy = 0;
		cfs_inode_broadcast(v->tab);
		if (frc) {
			if (n->listing) {
				CFS_WARN("listing of %s failed (%s); serving the previous listing", cid,
					 cfs_strerror(frc));
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
	int rc = get_listing(v, parent, &l);
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

int cfs_vfs_opendir(struct cfs_vfs *v, uint64_t ino, struct cfs_vfs_dir **out)
{
	struct cfs_vfs_dir *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	int rc = get_listing(v, ino, &d->l);
	if (rc) {
		free(d);
		return rc;
	}
	d->ino = ino;
	cfs_inode_lock(v->tab);
	d->parent = cfs_inode_get(v->tab, ino)->parent;
	cfs_inode_unlock(v->tab);
	*out = d;
	return 0;
}

int cfs_vfs_readdir(struct cfs_vfs *v, struct cfs_vfs_dir *d, off_t off, cfs_vfs_dirent_cb cb,
		    void *arg)
{
	(void)v;
	/* offsets: 0 start, 1 after ".", 2 after "..", 2+i+1 after entry i */
	if (off < 0)
		return -EINVAL;
	if (off == 0 && cb(".", d->ino, 1, 1, arg))
		return 0;
	if (off <= 1 && cb("..", d->parent, 1, 2, arg))
		return 0;
	for (size_t i = off > 2 ? (size_t)off - 2 : 0; i < d->l->n; i++)
		if (cb(d->l->e[i].name, d->l->e[i].ino, d->l->e[i].is_dir, (off_t)i + 3, arg))
			break;
	return 0;
}

void cfs_vfs_releasedir(struct cfs_vfs *v, struct cfs_vfs_dir *d)
{
	(void)v;
	if (!d)
		return;
	cfs_listing_unref(d->l);
	free(d);
}

/* ---- files ---------------------------------------------------------------- */

int cfs_vfs_open(struct cfs_vfs *v, uint64_t ino, int flags, struct cfs_vfs_file **out,
		 int *keep_cache, int *direct_io)
{
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
		return -EROFS;
	struct cfs_vfs_file *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	char export_mime[128];
	int rc = 0;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	if (!n)
		rc = -ENOENT;
	else if (n->is_dir)
		rc = -EISDIR;
	if (!rc) {
		f->ino = ino;
		memcpy(f->content_id, n->content_id, sizeof(f->content_id));
		memcpy(export_mime, n->export_mime, sizeof(export_mime));
		f->size = n->size;
		*keep_cache = !export_mime[0] && strcmp(n->opened_rev, n->rev) == 0;
		*direct_io = export_mime[0] != '\0';
		memcpy(n->opened_rev, n->rev, sizeof(n->rev));
	}
	cfs_inode_unlock(v->tab);
	if (!rc && export_mime[0]) {
		struct cfs_buf b = { 0 };
		rc = cfs_drive_export(v->drive, f->content_id, export_mime, EXPORT_MAX, &b);
		if (!rc) {
			size_t len;
			f->data = cfs_buf_steal(&b, &len);
			f->size = (int64_t)len;
			if (!f->data && !(f->data = calloc(1, 1)))
				rc = -ENOMEM;
			cfs_inode_lock(v->tab);
			n->size = f->size;
			cfs_inode_unlock(v->tab);
		}
		cfs_buf_cleanup(&b);
	}
	if (rc) {
		free(f);
		return rc;
	}
	*out = f;
	return 0;
}

int cfs_vfs_read(struct cfs_vfs *v, struct cfs_vfs_file *f, int64_t off, size_t len, char *buf,
		 size_t *got)
{
	*got = 0;
	if (off < 0)
		return -EINVAL;
	if (f->data) {
		if (off >= f->size)
			return 0;
		if ((int64_t)len > f->size - off)
			len = (size_t)(f->size - off);
		memcpy(buf, f->data + off, len);
		*got = len;
		return 0;
	}
	return cfs_drive_read(v->drive, f->content_id, f->size, off, len, buf, got);
}

void cfs_vfs_release(struct cfs_vfs *v, struct cfs_vfs_file *f)
{
	(void)v;
	if (!f)
		return;
	free(f->data);
	free(f);
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
