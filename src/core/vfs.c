/* vfs: FUSE-free file system core (see vfs.h); this part owns the vfs
 * object's life cycle, the root (resolved once, then kept in the index) and
 * statfs.  The rest lives in vfs_list.c, vfs_ns.c, vfs_file.c, vfs_ctl.c
 * vfs_scan.c and vfs_changes.c (see vfs_int.h). */
#include "vfs_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "names.h"
#include "nsdb.h"
#include "store.h"


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

/* One folder of a --root path: the children of a folder named name. */
struct path_step {
	const char *name;
	char id[CFS_ID_MAX];
	int found;
};

static int path_step_cb(const struct cfs_file_meta *m, void *arg)
{
	struct path_step *s = arg;
	if (!m) { /* the listing restarts */
		s->found = 0;
		return 0;
	}
	int shortcut = strcmp(m->mime, CFS_SHORTCUT_MIME) == 0 &&
		       strcmp(m->target_mime, CFS_FOLDER_MIME) == 0 && m->target_id[0];
	if (!m->name || strcmp(m->name, s->name) != 0 ||
	    (!shortcut && strcmp(m->mime, CFS_FOLDER_MIME) != 0))
		return 0;
	if (!s->found++)
		snprintf(s->id, sizeof(s->id), "%s", shortcut ? m->target_id : m->id);
	return 0;
}

/* The id of the folder at path ("/"-separated names below My Drive; a
 * shortcut to a folder counts as that folder): in each folder on the way,
 * its children of that name are listed (one call, however many children it
 * has) and the one whose name is exactly that taken.  -ENOENT: none; -ENOTUNIQ: two
 * or more (Drive allows equal names); else Drive's error. */
static int resolve_path(struct cfs_vfs *v, const char *path, char id[CFS_ID_MAX])
{
	struct cfs_file_meta top;
	int rc = cfs_drive_get(v->drive, "root", &top); /* listed by its own id, not the alias */
	if (rc)
		return rc;
	snprintf(id, CFS_ID_MAX, "%s", top.id);
	cfs_file_meta_cleanup(&top);
	size_t len;
	for (const char *p = cfs_root_path_next(path, &len); len;
	     p = cfs_root_path_next(p + len, &len)) {
		char name[CFS_ROOT_PATH_MAX + 1];
		snprintf(name, sizeof(name), "%.*s", (int)len, p);
		struct path_step s = { .name = name };
		rc = cfs_drive_list_named(v->drive, id, name, path_step_cb, &s);
		if (rc)
			return rc;
		if (s.found != 1) {
			CFS_ERROR("--root=%s: %s folder named \"%s\" in %.*s", path,
				  s.found ? "more than one" : "no", name, (int)(p - path), path);
			return s.found ? -ENOTUNIQ : -ENOENT;
		}
		memcpy(id, s.id, CFS_ID_MAX);
	}
	return 0;
}

static int resolve_root(struct cfs_vfs *v, const char *want, struct cfs_file_meta *m)
{
	memset(m, 0, sizeof(*m));
	/* A root resolved before is trusted: the mount comes up at once, even
	 * with Drive unreachable; its listing is checked as usual. */
	if (cfs_nsdb_load_root(v->ns, want, load_root_cb, m) == 0 && m->id[0]) {
		CFS_INFO("root %s is %s (from the cache index)", want, m->id);
		return want[0] == '/' ? cfs_drive_set_root(v->drive, m->id) : 0;
	}
	char id[CFS_ID_MAX];
	int rc = want[0] == '/' ? resolve_path(v, want, id) : 0;
	if (!rc && want[0] == '/')
		rc = cfs_drive_set_root(v->drive, id);
	if (!rc)
		rc = cfs_drive_get(v->drive, want[0] == '/' ? id : want, m);
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
	v->mem_floor = o->mem_floor;
	v->mem_hold_ms = o->mem_hold_ms;
	v->exports = o->exports;
	v->pin.probe = !o->fresh_mount; /* generation rows of servers before (vfs_pin.c) */
	pthread_mutex_init(&v->poll_lock, NULL);
	pthread_cond_init(&v->poll_cond, NULL);
	pthread_mutex_init(&v->w.lock, NULL);
	cfs_vfs_retire_init(v);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&v->w.cond, &ca);
	pthread_condattr_destroy(&ca);
	v->w.ready = 1;
	v->w.journal = o->journal;
	v->w.stage = o->stage;
	v->w.enabled = o->journal && o->stage;
	v->w.delete_permanently = o->delete_permanently;
	if (o->wdrive)
		v->w.d = *o->wdrive;
	else
		cfs_wdrive_real(d, &v->w.d);
	v->w.rnd = (uint64_t)cfs_clock_ns(CLOCK_MONOTONIC) | 1;
	v->w.delay_ms = o->write_back_ms >= 0 ? o->write_back_ms : 5000;
	v->w.nthreads = o->upload_threads > 0 ? o->upload_threads : 4;
	v->w.open_ms = o->upload_open_ms > 0 ? o->upload_open_ms : 0;
	if (v->w.nthreads > CFS_VFS_MAX_UPLOADERS)
		v->w.nthreads = CFS_VFS_MAX_UPLOADERS;
	int rc = cfs_inode_new(&v->tab);
	if (!rc)
		rc = cfs_handles_new(&v->handles);
	if (!rc)
		rc = cfs_nsdb_new(store, &v->ns);
	if (!rc)
		rc = cfs_nsdb_fh_keep(v->ns,
				      o->fhtab	       ? CFS_NSDB_FH_SHARED
				      : o->no_fh_rows ? CFS_NSDB_FH_NONE
						      : CFS_NSDB_FH_INDEX,
				      o->fhtab);
	if (!rc)
		rc = cfs_reader_new(d, store, &o->reader, &v->reader);
	if (!rc)
		cfs_vfs_scan_init(v, o->no_dataset_readahead,
				  !o->root_id || !o->root_id[strspn(o->root_id, "/")] ||
					  strcmp(o->root_id, "root") == 0 || o->whole_drive);
	v->scan_ready = !rc;
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
			if (cfs_node_make_dir(n))
				rc = -ENOMEM;
			n->parent = CFS_ROOT_INO;
			n->size = 0;
			n->mtime_ns = m.mtime_ns;
			n->ctime_ns = m.ctime_ns;
		}
	}
	cfs_file_meta_cleanup(&m);
	if (!rc && v->w.enabled)
		rc = cfs_vfs_w_resume(v, o->fresh_mount, o->journal_owner);
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
	cfs_vfs_memwatch_stop(v);
	cfs_vfs_w_stop(v);
	cfs_handles_free(v->handles, cfs_vfs_drop_handle, v); /* open at unmount: never released */
	cfs_vfs_w_cleanup(v);
	if (v->scan_ready) /* after the handles: freeing one tells the scan */
		cfs_vfs_scan_cleanup(v);
	cfs_reader_free(v->reader);
	cfs_nsdb_free(v->ns);
	cfs_inode_free(v->tab);
	cfs_vfs_retire_cleanup(v);
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

int cfs_vfs_statfs(struct cfs_vfs *v, struct statvfs *st)
{
	memset(st, 0, sizeof(*st));
	st->f_bsize = 4096;
	st->f_frsize = 4096;
	st->f_namemax = CFS_NAME_MAX;
	cfs_inode_lock(v->tab);
	st->f_files = cfs_inode_count(v->tab);
	cfs_inode_unlock(v->tab);
	if (cfs_vfs_writable(v))
		cfs_vfs_w_statfs(v, st);
	return 0;
}

