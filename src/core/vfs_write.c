/* vfs_write: the namespace writes and staged files (see vfs.h, vfs_int.h).
 *
 * Policy.  File content is write-back: bytes go to a staged file (staging.h),
 * close() writes the journal entry (journal.h; committed, not flushed: safe
 * against the daemon's death, not the machine's), fsync() flushes the staged
 * bytes and makes the entry durable before it waits for the upload, and the
 * uploaders (vfs_upload.c) send it to Drive later.  A new file gets its Drive
 * id at create, from ids reserved with files.generateIds, and is shown at
 * once: the folder's listing gets it here, and any listing installed later
 * (from Drive, from the index, after a restart) gets it from the journal
 * through cfs_vfs_w_overlay until Drive lists it itself.  Renames, moves
 * and removals of files that exist only locally change their journal entry;
 * those of items Drive has (and mkdir, rmdir) are done in Drive before the
 * reply, as rclone and gcsfuse do: they are one metadata call each.
 * rename(tmp, final) over a file Drive has keeps the old one in Drive until
 * the new one is uploaded, then trashes it (the journal entry's replaces).
 * Unlink moves to Drive's trash (--delete-permanently: deletes).
 *
 * Lock order: the inode table lock before w.lock; Drive calls with neither. */
#include "vfs_int.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crypto.h"
#include "drive_write.h"
#include "err.h"
#include "hash.h"
#include "log.h"
#include "names.h"
#include "nsdb.h"
#include "staging.h"
#include "store.h"

#define IDS_BATCH 1000 /* CFS_DRIVE_IDS_MAX: one generateIds round trip per 1,000 creations */
#define CAPS_TTL_MS (5 * 60 * 1000)
#define COPY_CHUNK (4u << 20)
/* fsync waits for an attempt due within this; a later one is not waited for */
#define FSYNC_WAIT_MS 10000

int cfs_vfs_writable(const struct cfs_vfs *v)
{
	return v->w.enabled;
}

struct cfs_wfile *cfs_vfs_w_find(struct cfs_vfs *v, uint64_t ino)
{
	for (struct cfs_wfile *w = v->w.files; w; w = w->next)
		if (w->ino == ino && !w->unlinked)
			return w;
	return NULL;
}

/* ---- our own changes -------------------------------------------------- */

void cfs_vfs_w_mine(struct cfs_vfs *v, const char *id)
{
	if (!id || !id[0])
		return;
	pthread_mutex_lock(&v->w.lock);
	unsigned k = v->w.mine_next++ % CFS_VFS_MINE;
	snprintf(v->w.mine[k].id, sizeof(v->w.mine[k].id), "%s", id);
	v->w.mine[k].at_ms = cfs_vfs_w_now(v);
	pthread_mutex_unlock(&v->w.lock);
}

int cfs_vfs_w_is_mine(struct cfs_vfs *v, const char *id)
{
	if (!v->w.enabled)
		return 0;
	int64_t now = cfs_vfs_w_now(v);
	int r = 0;
	pthread_mutex_lock(&v->w.lock);
	for (struct cfs_wfile *w = v->w.files; w && !r; w = w->next)
		r = strcmp(w->j.id, id) == 0 || strcmp(w->j.replaces, id) == 0;
	for (unsigned i = 0; i < CFS_VFS_MINE && !r; i++)
		r = v->w.mine[i].at_ms && now - v->w.mine[i].at_ms < CFS_VFS_MINE_MS &&
		    strcmp(v->w.mine[i].id, id) == 0;
	pthread_mutex_unlock(&v->w.lock);
	return r;
}

/* ---- done rows: a request served again gets the first answer ----------- */

#define DONE_PENDING 1 /* never an answer: begun, not answered */

static void done_put(struct cfs_vfs *v, uint64_t unique, int rc, uint64_t ino)
{
	if (unique && cfs_journal_done_put(v->w.journal, unique, rc, ino))
		CFS_WARN("journal: cannot record the answer to request %" PRIu64, unique);
}

/* Before a state-changing request: 1 when it was answered already (*rc,
 * *ino: that answer); else 0, with *replay set when a dead server began it
 * (then an "already so" error, like ENOENT from a rename whose source moved,
 * means the first service did it).  A row is written first thing so that
 * a death at any point later leaves a trace. */
static int done_begin(struct cfs_vfs *v, uint64_t unique, int *rc, uint64_t *ino, int *replay)
{
	int r;
	uint64_t i;
	*replay = 0;
	if (!unique)
		return 0;
	if (cfs_journal_done_get(v->w.journal, unique, &r, &i) == 0) {
		if (r != DONE_PENDING) {
			*rc = r;
			*ino = i;
			return 1;
		}
		*replay = 1;
		CFS_DEBUG("request %" PRIu64 " was begun by a server that died: served again",
			  unique);
		return 0;
	}
	done_put(v, unique, DONE_PENDING, 0);
	return 0;
}

/* ---- ids and folder permissions ---------------------------------------- */

int cfs_vfs_w_reserve_id(struct cfs_vfs *v, char out[CFS_ID_MAX])
{
	for (;;) {
		pthread_mutex_lock(&v->w.lock);
		if (v->w.nids > 0) {
			memcpy(out, v->w.ids[--v->w.nids], CFS_ID_MAX);
			pthread_mutex_unlock(&v->w.lock);
			return 0;
		}
		pthread_mutex_unlock(&v->w.lock);
		char(*ids)[CFS_ID_MAX] = calloc(IDS_BATCH, CFS_ID_MAX);
		if (!ids)
			return -ENOMEM;
		int rc = v->w.d.generate_ids(v->w.d.arg, IDS_BATCH, ids);
		if (!rc) {
			pthread_mutex_lock(&v->w.lock);
			if (v->w.nids == 0) {
				free(v->w.ids);
				v->w.ids = ids;
				v->w.nids = IDS_BATCH;
				ids = NULL;
			}
			pthread_mutex_unlock(&v->w.lock);
		}
		free(ids);
		if (rc)
			return rc;
	}
}

/* Whether the user may add items to folder id (capabilities/canAddChildren),
 * asked once per folder every few minutes; unknown (Drive unreachable) is
 * yes: the upload will say. */
static void caps_put(struct cfs_vfs *v, const char *id, int can_add)
{
	int64_t now = cfs_vfs_now_ms();
	pthread_mutex_lock(&v->w.lock);
	int slot = v->w.ncaps < CFS_VFS_CAPS ? v->w.ncaps++ : (int)(now % CFS_VFS_CAPS);
	snprintf(v->w.caps[slot].id, sizeof(v->w.caps[slot].id), "%s", id);
	v->w.caps[slot].can_add = can_add;
	v->w.caps[slot].at_ms = now;
	pthread_mutex_unlock(&v->w.lock);
}

static int can_add_to(struct cfs_vfs *v, const char *id)
{
	int64_t now = cfs_vfs_w_now(v);
	pthread_mutex_lock(&v->w.lock);
	for (int i = 0; i < v->w.ncaps; i++)
		if (strcmp(v->w.caps[i].id, id) == 0 && now - v->w.caps[i].at_ms < CAPS_TTL_MS) {
			int r = v->w.caps[i].can_add;
			pthread_mutex_unlock(&v->w.lock);
			return r;
		}
	pthread_mutex_unlock(&v->w.lock);
	struct cfs_file_meta m;
	if (v->w.d.get(v->w.d.arg, id, &m))
		return 1;
	int r = m.can_add_children;
	cfs_file_meta_cleanup(&m);
	caps_put(v, id, r);
	return r;
}

/* ---- listings edited in place ------------------------------------------ */

static unsigned *edits_slot(struct cfs_vfs *v, const char *content_id)
{
	return &v->w.edits[cfs_hash_fnv1a(content_id) % CFS_VFS_EDIT_SLOTS];
}

void cfs_vfs_w_edited(struct cfs_vfs *v, const char *content_id)
{
	__atomic_fetch_add(edits_slot(v, content_id), 1, __ATOMIC_SEQ_CST);
}

unsigned cfs_vfs_w_edits(struct cfs_vfs *v, const char *content_id)
{
	return __atomic_load_n(edits_slot(v, content_id), __ATOMIC_SEQ_CST);
}

/* Table lock held.  A copy of folder dir's listing without the entry named
 * rm (may be NULL) and with (add, ino, is_dir) (add may be NULL), swapped in.
 * Positions (lpos) are renumbered. */
static int listing_edit(struct cfs_vfs *v, uint64_t dir, const char *rm, const char *add,
			uint64_t ino, int is_dir)
{
	struct cfs_node *d = cfs_inode_get(v->tab, dir);
	if (d)
		cfs_node_dir_changed(d, cfs_clock_wall_ns()); /* its mtime and ctime move */
	if (!d || !d->dir || !d->dir->listing)
		return 0; /* never listed: the next listing comes with the overlay */
	struct cfs_listing *old = d->dir->listing;
	struct cfs_listing *l = cfs_listing_new(old->n + 1);
	if (!l)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < old->n; i++) {
		if ((rm && strcmp(old->e[i].name, rm) == 0) || (add && strcmp(old->e[i].name, add) == 0))
			continue;
		l->e[k] = old->e[i];
		if (!(l->e[k].name = strdup(old->e[i].name))) {
			l->n = k;
			cfs_listing_unref(l);
			return -ENOMEM;
		}
		k++;
	}
	if (add) {
		l->e[k] = (struct cfs_dirent){ strdup(add), ino, is_dir };
		if (!l->e[k].name) {
			l->n = k;
			cfs_listing_unref(l);
			return -ENOMEM;
		}
		k++;
	}
	l->n = k;
	cfs_vfs_listing_order(v, l);
	d->dir->listing = l;
	cfs_vfs_w_edited(v, d->content_id);
	cfs_listing_unref(old);
	return 0;
}

/* The stored listing of a folder Drive changed under our hands is dropped:
 * a restart lists it from Drive again (local-only files come back through
 * the overlay). */
void cfs_vfs_w_forget_listing(struct cfs_vfs *v, const char *content_id)
{
	cfs_vfs_w_edited(v, content_id);
	int rc = cfs_store_meta_del(v->store, "dirs", content_id, strlen(content_id));
	if (rc && rc != -ENOENT)
		CFS_WARN("cannot drop the stored listing of %s: %s", content_id, cfs_strerror(rc));
}

void cfs_vfs_w_created(struct cfs_vfs *v, uint64_t ino, const char *id, const char *name,
		       const char *parent_cid)
{
	cfs_vfs_w_forget_listing(v, parent_cid);
	cfs_inode_lock(v->tab);
	struct cfs_node *d = cfs_inode_find(v->tab, parent_cid);
	if (d && d->is_dir && d->dir && d->dir->listing &&
	    cfs_listing_find_ino(d->dir->listing, ino) < 0 &&
	    cfs_listing_find(d->dir->listing, name) < 0) {
		struct cfs_node *n = cfs_inode_get(v->tab, ino);
		if (!n)
			n = cfs_inode_add(v->tab, id, ino);
		if (n) {
			cfs_node_place(n, d->ino);
			listing_edit(v, d->ino, NULL, name, ino, 0);
		}
	}
	cfs_inode_unlock(v->tab);
}

/* What a name in a folder is: its node's ino, Drive id, kind; -ENOENT. */
struct child {
	uint64_t ino;
	int is_dir;
	char id[CFS_ID_MAX];
	char dir_cid[CFS_ID_MAX]; /* the folder's content id */
};

static int find_child(struct cfs_vfs *v, uint64_t parent, const char *name, struct child *c)
{
	uint64_t ino;
	int rc = cfs_vfs_find_child(v, parent, name, &ino);
	if (rc)
		return rc;
	memset(c, 0, sizeof(*c));
	cfs_inode_lock(v->tab);
	struct cfs_node *d = cfs_inode_get(v->tab, parent);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	if (d && n) {
		snprintf(c->dir_cid, sizeof(c->dir_cid), "%s", d->content_id);
		c->ino = n->ino;
		c->is_dir = n->is_dir;
		snprintf(c->id, sizeof(c->id), "%s", n->id);
	}
	cfs_inode_unlock(v->tab);
	return d && n ? 0 : -ENOENT;
}

/* The folder's content id (it must be a folder we may write into). */
static int dir_cid(struct cfs_vfs *v, uint64_t dir, char out[CFS_ID_MAX])
{
	int rc = cfs_vfs_resolve_node(v, dir);
	if (rc)
		return rc;
	cfs_inode_lock(v->tab);
	struct cfs_node *d = cfs_inode_get(v->tab, dir);
	rc = !d ? -ENOENT : !d->is_dir ? -ENOTDIR : 0;
	if (!rc)
		snprintf(out, CFS_ID_MAX, "%s", d->content_id);
	cfs_inode_unlock(v->tab);
	return rc;
}

/* A node for a new item (id, ino) in folder parent, listed there. */
static int add_node(struct cfs_vfs *v, uint64_t parent, const char *name, const char *id,
		    int is_dir, int64_t mtime_ns, uint64_t *ino)
{
	const char *ids[1] = { id };
	int rc = cfs_nsdb_inos(v->ns, ids, 1, ino);
	if (!rc)
		rc = cfs_nsdb_set_parents(v->ns, parent, ino, 1);
	if (rc)
		return rc;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_find(v->tab, id);
	if (!n)
		n = cfs_inode_add(v->tab, id, *ino);
	rc = n ? 0 : -ENOMEM;
	if (!rc && is_dir)
		rc = cfs_node_make_dir(n);
	if (!rc) {
		cfs_node_place(n, parent);
		n->is_dir = is_dir ? 1 : 0;
		n->size = 0;
		n->mtime_ns = n->ctime_ns = mtime_ns;
		rc = listing_edit(v, parent, NULL, name, *ino, is_dir);
	}
	cfs_inode_unlock(v->tab);
	return rc;
}

/* ---- staged files --------------------------------------------------------- */

/* w lock held: w's bytes, size or time changed; a session started for the
 * old bytes cannot be resumed with these. */
static void w_changed(struct cfs_vfs *v, struct cfs_wfile *w)
{
	w->gen++;
	if (w->torn && w->j.size == 0) /* written again from the start */
		w->torn = 0;
	if (w->j.state == CFS_JSTATE_CLEAN || w->j.state == CFS_JSTATE_TORN)
		w->j.state = w->torn ? CFS_JSTATE_TORN : CFS_JSTATE_CLOSED;
	cfs_upq_touch(&w->rq, cfs_vfs_w_now(v)); /* new bytes may be accepted */
	if (v->w.open_ms && !w->open_due_ms) /* held open: uploaded while open (vfs_snap.c) */
		w->open_due_ms = cfs_vfs_w_now(v) + v->w.open_ms;
	w->j.uri[0] = '\0';
	w->j.confirmed = 0;
}

/* w lock held: w's bytes are about to change.  The journal says so first
 * (once per open-write-close run), so that a server dying before the close
 * leaves an entry a new mount will not upload as if it were complete. */
static int w_begin(struct cfs_vfs *v, struct cfs_wfile *w)
{
	if (w->j.state == CFS_JSTATE_WRITING || w->torn)
		return 0;
	struct cfs_jent j = w->j;
	j.state = CFS_JSTATE_WRITING;
	j.gen = w->gen;
	int rc = cfs_vfs_w_put(v, w, &j);
	if (rc) {
		CFS_ERROR("journal: cannot record that %s is being written: %s", w->j.id,
			  cfs_strerror(rc));
		return rc == -ENOSPC ? rc : -EIO;
	}
	w->j.state = CFS_JSTATE_WRITING;
	return 0;
}

/* w lock held: a new staged file record for (id, ino); trunc: its file made
 * empty (else it is kept as it is). */
static int w_new(struct cfs_vfs *v, uint64_t ino, const struct cfs_jent *j, int trunc,
		 struct cfs_wfile **out)
{
	struct cfs_wfile *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->j = *j;
	w->ino = ino;
	w->drive_size = j->is_new ? 0 : j->size; /* the caller says when it was emptied */
	w->lo_drive = w->lo_take = INT64_MAX;
	int rc = cfs_staging_file(v->w.stage, j->id, 1, trunc, &w->fd);
	if (rc) {
		free(w);
		return rc;
	}
	w->next = v->w.files;
	v->w.files = w;
	__atomic_add_fetch(&v->w.nfiles, 1, __ATOMIC_RELAXED);
	*out = w;
	return 0;
}

/* w lock held: the journal entry written for w's current state. */
static int w_journal(struct cfs_vfs *v, struct cfs_wfile *w)
{
	w->j.gen = w->gen;
	int rc = cfs_vfs_w_put(v, w, NULL);
	if (rc)
		CFS_ERROR("journal: cannot record %s: %s", w->j.id, cfs_strerror(rc));
	else
		w->journaled = w->gen;
	return rc;
}

/* Copies b's bytes, read through the reader (the cache, the shared tier,
 * Drive), into fd; with alg set, their digest in hex into hex. */
static int copy_bytes(struct cfs_vfs *v, const struct blob_ref *b, int fd, const char *alg,
		      char hex[65])
{
	char *buf = malloc(COPY_CHUNK);
	struct cfs_reader_stream *s = cfs_reader_stream_new();
	struct cfs_digest *d = NULL;
	int rc = buf && s ? 0 : -ENOMEM;
	if (!rc && alg[0])
		rc = cfs_digest_new(alg, &d);
	struct cfs_reader_file rf = cfs_vfs_reader_file(b);
	for (int64_t off = 0; !rc && off < b->size;) {
		size_t got = 0;
		rc = cfs_reader_read(v->reader, s, &rf, off, COPY_CHUNK, buf, &got);
		if (!rc && !got)
			rc = -EIO;
		if (!rc && d)
			rc = cfs_digest_update(d, buf, got);
		if (!rc)
			rc = cfs_staging_pwrite(fd, off, buf, got);
		off += (int64_t)got;
	}
	if (d && !rc)
		rc = cfs_digest_final_hex(d, hex, 65);
	else
		cfs_digest_free(d);
	cfs_reader_stream_free(s);
	free(buf);
	return rc;
}

/* Copies the current content of a Drive file into fd (the file is opened for
 * writing without O_TRUNC: appends and in-place edits need the old bytes).
 * The bytes must match Drive's checksum, or they would become the next
 * revision: a mismatch drops every cached copy (the shared tier's too,
 * cfs_vfs_checksum_failed) and reads them again, from Drive now; a second
 * mismatch refuses the write (-EIO).  A file Drive gives no checksum for is
 * copied unchecked. */
static int copy_in(struct cfs_vfs *v, uint64_t ino, int fd)
{
	struct blob_ref b;
	char want[65], got[65] = "";
	const char *alg = "";
	int rc = 0;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_vfs_file_node(v, ino, &rc);
	if (n) {
		cfs_vfs_blob_ref(n, &b);
		cfs_vfs_node_checksum(n, &alg, want);
	}
	cfs_inode_unlock(v->tab);
	for (int round = 0; !rc; round++) {
		rc = copy_bytes(v, &b, fd, alg, got);
		if (rc || !alg[0] || strcmp(got, want) == 0)
			break;
		cfs_vfs_checksum_failed(v, ino, &b, alg, "the content read to be written over");
		if (round == 1) {
			CFS_ERROR("%s: the bytes read twice do not match Drive's %s checksum; the "
				  "write is refused (EIO) rather than upload wrong bytes", b.key, alg);
			rc = -EIO;
		}
	}
	return rc;
}

/* The journal entry for a Drive file about to be staged: its place, and the
 * revision it is based on, fresh from Drive when it answers (also says
 * whether we may write it). */
static int existing_entry(struct cfs_vfs *v, uint64_t ino, struct cfs_jent *j)
{
	memset(j, 0, sizeof(*j));
	int rc = 0;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_vfs_file_node(v, ino, &rc);
	if (n && n->export_mime[0])
		rc = -EACCES; /* Google Docs have no bytes to write */
	if (n && !rc) {
		struct cfs_node *d = cfs_inode_get(v->tab, n->parent);
		snprintf(j->id, sizeof(j->id), "%s", n->id);
		snprintf(j->base_rev, sizeof(j->base_rev), "%s", n->rev);
		j->size = n->size < 0 ? 0 : n->size;
		j->mtime_ns = n->mtime_ns;
		long at = d ? cfs_vfs_listed_at(d, n) : -1;
		if (at >= 0)
			snprintf(j->name, sizeof(j->name), "%s", d->dir->listing->e[at].name);
		if (d)
			snprintf(j->parent, sizeof(j->parent), "%s", d->content_id);
	}
	cfs_inode_unlock(v->tab);
	if (rc)
		return rc;
	if (strcmp(j->id, j->parent) == 0 || !j->parent[0])
		return -EACCES;
	if (!j->name[0])
		return -ENOENT; /* not in its folder's listing: removed */
	struct cfs_file_meta m;
	if (v->w.d.get(v->w.d.arg, j->id, &m) == 0) {
		if (!m.can_edit)
			rc = -EACCES;
		cfs_vfs_content_rev(&m, j->base_rev, sizeof(j->base_rev));
		j->size = m.size < 0 ? 0 : m.size;
		if (m.name) /* Drive's name, not the unique one shown */
			snprintf(j->name, sizeof(j->name), "%s", m.name);
		cfs_file_meta_cleanup(&m);
	}
	return rc;
}

int cfs_vfs_w_attach(struct cfs_vfs *v, uint64_t ino, int writer, int trunc,
		     struct cfs_wfile **out)
{
	pthread_mutex_lock(&v->w.lock);
	struct cfs_wfile *w = cfs_vfs_w_find(v, ino);
	if (w) {
		int rc = 0;
		if (trunc && w->j.size != 0) {
			cfs_vfs_snap_wait(v, w);
			cfs_vfs_snap_changed(w, 0);
			rc = w_begin(v, w);
			if (!rc)
				rc = ftruncate(w->fd, 0) ? -errno : 0;
			if (!rc) {
				w->j.size = 0;
				w->j.mtime_ns = cfs_vfs_w_wall(v);
				w_changed(v, w);
			}
		}
		if (!rc) {
			w->handles++;
			w->writers += writer ? 1 : 0;
			*out = w;
		}
		pthread_mutex_unlock(&v->w.lock);
		return rc;
	}
	pthread_mutex_unlock(&v->w.lock);
	if (!writer && !trunc)
		return -ENOENT;
	struct cfs_jent j;
	int rc = existing_entry(v, ino, &j);
	if (rc)
		return rc;
	int fd;
	rc = cfs_staging_file(v->w.stage, j.id, 1, 1, &fd);
	if (rc)
		return rc;
	if (!trunc && j.size > 0)
		rc = copy_in(v, ino, fd);
	if (rc) {
		close(fd);
		cfs_staging_remove(v->w.stage, j.id);
		return rc;
	}
	close(fd);
	pthread_mutex_lock(&v->w.lock);
	if ((w = cfs_vfs_w_find(v, ino)) == NULL) {
		int emptied = trunc && j.size > 0;
		int64_t in_drive = j.size;
		if (trunc) {
			j.size = 0;
			j.mtime_ns = cfs_vfs_w_wall(v);
		}
		/* an unchanged copy is durable as it is: only a change uploads */
		j.state = emptied ? CFS_JSTATE_WRITING : CFS_JSTATE_CLEAN;
		rc = w_new(v, ino, &j, 0, &w);
		if (!rc) {
			w->drive_size = in_drive;
			if (emptied)
				cfs_vfs_snap_changed(w, 0);
			w->gen = emptied ? 2 : 1;
			w->durable = 1;
			rc = w_journal(v, w);
			if (rc)
				cfs_vfs_w_drop(v, w);
		}
	}
	if (!rc) {
		w->handles++;
		w->writers += writer ? 1 : 0;
		*out = w;
	}
	pthread_mutex_unlock(&v->w.lock);
	return rc;
}

void cfs_vfs_w_detach(struct cfs_vfs *v, struct cfs_wfile *w, int writer)
{
	pthread_mutex_lock(&v->w.lock);
	w->handles--;
	if (writer && --w->writers == 0) {
		w->due_ms = cfs_vfs_w_now(v) + v->w.delay_ms;
		w->open_due_ms = 0; /* a next open's first change starts the interval */
		cfs_vfs_snap_free(v, w); /* the close's upload sends the staged file */
	}
	/* nobody has it open: gone from the namespace, or all of it in Drive */
	if (w->handles == 0 && !w->sending && (w->unlinked ? !w->j.removed : cfs_wfile_settled(w)))
		cfs_vfs_w_drop(v, w);
	pthread_cond_broadcast(&v->w.cond);
	pthread_mutex_unlock(&v->w.lock);
}

/* ---- creating --------------------------------------------------------------- */

static int do_create(struct cfs_vfs *v, uint64_t parent, const char *name, int flags,
		     uint32_t pid, struct cfs_vfs_attr *a, uint64_t *fh)
{
	int rc, keep, direct;
	uint64_t ino = 0;
	struct child c;
	rc = find_child(v, parent, name, &c);
	if (!rc) {
		if (flags & O_EXCL)
			CFS_DEBUG("create %s: exists (inode %" PRIu64 ")", name, c.ino);
		if (flags & O_EXCL)
			return -EEXIST;
		if (c.is_dir)
			return -EISDIR;
		ino = c.ino;
		goto open_it;
	}
	if (rc != -ENOENT)
		return rc;
	struct cfs_jent j;
	memset(&j, 0, sizeof(j));
	if ((rc = dir_cid(v, parent, j.parent)) != 0)
		return rc;
	if (!can_add_to(v, j.parent))
		return -EACCES;
	if ((rc = cfs_vfs_w_reserve_id(v, j.id)) != 0)
		return rc;
	snprintf(j.name, sizeof(j.name), "%s", name);
	j.is_new = 1;
	j.state = CFS_JSTATE_WRITING; /* complete at its first close */
	j.mtime_ns = cfs_vfs_w_wall(v);
	const char *ids[1] = { j.id };
	if ((rc = cfs_nsdb_inos(v->ns, ids, 1, &ino)) != 0)
		return rc;
	struct cfs_wfile *w;
	pthread_mutex_lock(&v->w.lock);
	rc = w_new(v, ino, &j, 1, &w);
	if (!rc) {
		w->gen = 1;
		w->due_ms = cfs_vfs_w_now(v) + (v->w.delay_ms > 1000 ? v->w.delay_ms : 1000);
		if ((rc = w_journal(v, w)) != 0)
			cfs_vfs_w_drop(v, w);
	}
	pthread_mutex_unlock(&v->w.lock);
	if (!rc)
		rc = add_node(v, parent, name, j.id, 0, j.mtime_ns, &ino);
	if (rc)
		return rc;
open_it:
	rc = cfs_vfs_open(v, ino, flags & ~(O_CREAT | O_EXCL), pid, fh, &keep, &direct);
	if (!rc)
		rc = cfs_vfs_getattr(v, ino, a);
	return rc;
}

/* A name Drive cannot take (names.h) is refused before anything is made:
 * accepted, it would be shown, then refused at upload again and again. */
static int new_name_ok(const char *op, const char *name)
{
	int rc = cfs_names_check(name);
	if (rc)
		CFS_DEBUG("%s: a name of %zu bytes refused: %s", op, strlen(name), cfs_strerror(rc));
	return rc;
}

int cfs_vfs_create(struct cfs_vfs *v, uint64_t unique, uint64_t parent, const char *name,
		   int flags, uint32_t pid, struct cfs_vfs_attr *a, uint64_t *fh)
{
	if (!v->w.enabled)
		return -EROFS;
	int rc, replay, keep, direct;
	uint64_t ino;
	if ((rc = new_name_ok("create", name)) != 0)
		return rc;
	if (done_begin(v, unique, &rc, &ino, &replay)) {
		if (rc)
			return rc;
		/* served again: the file is ours already; a new handle for it */
		rc = cfs_vfs_open(v, ino, flags & ~(O_CREAT | O_EXCL | O_TRUNC), pid, fh, &keep,
				  &direct);
		return rc ? rc : cfs_vfs_getattr(v, ino, a);
	}
	rc = do_create(v, parent, name, flags, pid, a, fh);
	if (replay && rc == -EEXIST) /* the dead server created it */
		rc = do_create(v, parent, name, flags & ~(O_EXCL | O_TRUNC), pid, a, fh);
	done_put(v, unique, rc, rc ? 0 : a->ino);
	return rc;
}

static int do_mkdir(struct cfs_vfs *v, uint64_t parent, const char *name, struct cfs_vfs_attr *a)
{
	int rc;
	uint64_t ino;
	struct child c;
	rc = find_child(v, parent, name, &c);
	if (rc != -ENOENT)
		CFS_DEBUG("mkdir %s: %s", name, rc ? cfs_strerror(rc) : "exists");
	if (rc != -ENOENT)
		return rc ? rc : -EEXIST;
	char cid[CFS_ID_MAX], id[CFS_ID_MAX];
	if ((rc = dir_cid(v, parent, cid)) != 0)
		return rc;
	if (!can_add_to(v, cid))
		return -EACCES;
	if ((rc = cfs_vfs_w_reserve_id(v, id)) != 0)
		return rc;
	struct cfs_json_meta_in m = { .id = id, .name = name, .mime = CFS_FOLDER_MIME,
				      .parent = cid, .trashed = -1 };
	struct cfs_file_meta out;
	cfs_vfs_w_mine(v, id);
	cfs_vfs_w_forget_listing(v, cid); /* first: a death after the create leaves none stale */
	if ((rc = v->w.d.create(v->w.d.arg, &m, &out)) != 0)
		return rc;
	int64_t mtime = out.mtime_ns ? out.mtime_ns : cfs_vfs_w_wall(v);
	cfs_file_meta_cleanup(&out);
	if ((rc = add_node(v, parent, name, id, 1, mtime, &ino)) != 0)
		return rc;
	/* made here by this user in a folder it may add to: it may add to this
	 * one (no files.get for its first file, as for a tar's every folder) */
	caps_put(v, id, 1);
	/* an empty folder is listed already: no files.list for it */
	struct cfs_listing *l = cfs_listing_new(0);
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	if (l && n && n->dir && !n->dir->listing) {
		n->dir->listing = l;
		n->dir->listed_at_ms = cfs_vfs_now_ms();
		l = NULL;
	}
	cfs_inode_unlock(v->tab);
	cfs_listing_unref(l);
	cfs_nsdb_save_listing(v->ns, id, NULL, 0, cfs_vfs_w_wall(v) / 1000000);
	return cfs_vfs_getattr(v, ino, a);
}

int cfs_vfs_mkdir(struct cfs_vfs *v, uint64_t unique, uint64_t parent, const char *name,
		  struct cfs_vfs_attr *a)
{
	if (!v->w.enabled)
		return -EROFS;
	int rc, replay;
	uint64_t ino;
	if ((rc = new_name_ok("mkdir", name)) != 0)
		return rc;
	if (done_begin(v, unique, &rc, &ino, &replay))
		return rc ? rc : cfs_vfs_getattr(v, ino, a);
	rc = do_mkdir(v, parent, name, a);
	if (replay && rc == -EEXIST) /* the dead server made it */
		rc = cfs_vfs_lookup(v, parent, name, a);
	done_put(v, unique, rc, rc ? 0 : a->ino);
	return rc;
}

/* ---- removing ------------------------------------------------------------- */

/* Trash (or delete) a Drive item; one already gone is fine. */
int cfs_vfs_w_remove_in_drive(struct cfs_vfs *v, const char *id)
{
	cfs_vfs_w_mine(v, id);
	CFS_DEBUG("drive: %s %s", v->w.delete_permanently ? "delete" : "trash", id);
	int rc = v->w.delete_permanently ? v->w.d.remove(v->w.d.arg, id)
					 : v->w.d.update_meta(v->w.d.arg, id, NULL, NULL, NULL, 1, 0,
								 NULL);
	if (rc == -ENOENT)
		rc = 0;
	if (rc)
		CFS_WARN("cannot %s %s in Drive: %s", v->w.delete_permanently ? "delete" : "trash", id,
			 cfs_strerror(rc));
	else
		cfs_vfs_retire_id(v, id); /* its blocks: no file shows them now */
	return rc;
}

/* w lock held: w leaves the namespace (no upload, dropped once unused);
 * what it was to replace in Drive is copied to also_remove.  A new file
 * leaves a tombstone: an upload running now, or one a dead process got to
 * finish, may have made it in Drive, and the uploaders take it out again. */
static void w_unlink(struct cfs_vfs *v, struct cfs_wfile *w, char also_remove[CFS_ID_MAX])
{
	snprintf(also_remove, CFS_ID_MAX, "%s", w->j.replaces);
	w->unlinked = 1;
	w->j.replaces[0] = '\0';
	if (w->j.is_new) {
		w->j.removed = 1;
		w->due_ms = 0;
		cfs_journal_put(v->w.journal, &w->j);
	} else {
		cfs_journal_del(v->w.journal, w->j.id);
		if (w->handles == 0 && !w->sending)
			cfs_vfs_w_drop(v, w);
	}
	pthread_cond_broadcast(&v->w.cond);
}

static int remove_entry(struct cfs_vfs *v, uint64_t parent, const char *name, int want_dir)
{
	int rc;
	struct child c;
	if ((rc = find_child(v, parent, name, &c)) != 0)
		return rc;
	if (c.is_dir != want_dir)
		return want_dir ? -ENOTDIR : -EISDIR;
	if (want_dir) {
		struct cfs_listing *l;
		if ((rc = cfs_vfs_get_listing(v, c.ino, &l)) != 0)
			return rc;
		rc = l->n ? -ENOTEMPTY : 0;
		cfs_listing_unref(l);
		if (rc)
			return rc;
	}
	char also[CFS_ID_MAX] = "";
	int local = 0;
	cfs_vfs_w_forget_listing(v, c.dir_cid); /* before Drive changes: see mkdir */
	pthread_mutex_lock(&v->w.lock);
	struct cfs_wfile *w = cfs_vfs_w_find(v, c.ino);
	if (w) {
		local = w->j.is_new;
		w_unlink(v, w, also);
	}
	pthread_mutex_unlock(&v->w.lock);
	if (!local)
		rc = cfs_vfs_w_remove_in_drive(v, c.id);
	if (!rc && also[0])
		rc = cfs_vfs_w_remove_in_drive(v, also);
	if (rc)
		return rc;
	cfs_inode_lock(v->tab);
	listing_edit(v, parent, name, NULL, 0, 0);
	struct cfs_node *n = cfs_inode_get(v->tab, c.ino);
	if (n) { /* fstat on a descriptor still open shows it: ctime moved, no link */
		cfs_node_changed(n, cfs_clock_wall_ns());
		n->unlinked = 1;
	}
	cfs_inode_unlock(v->tab);
	return 0;
}

/* A state-changing request whose "already so" answer is gone_rc, once. */
static int once(struct cfs_vfs *v, uint64_t unique, int gone_rc, int (*op)(struct cfs_vfs *, void *),
		void *arg)
{
	if (!v->w.enabled)
		return -EROFS;
	int rc, replay;
	uint64_t ino;
	if (done_begin(v, unique, &rc, &ino, &replay))
		return rc;
	rc = op(v, arg);
	if (replay && rc == gone_rc)
		rc = 0; /* the dead server did it */
	done_put(v, unique, rc, 0);
	return rc;
}

struct rm_arg {
	uint64_t parent;
	const char *name;
	int dir;
};

static int rm_op(struct cfs_vfs *v, void *arg)
{
	struct rm_arg *a = arg;
	return remove_entry(v, a->parent, a->name, a->dir);
}

int cfs_vfs_unlink(struct cfs_vfs *v, uint64_t unique, uint64_t parent, const char *name)
{
	struct rm_arg a = { parent, name, 0 };
	return once(v, unique, -ENOENT, rm_op, &a);
}

int cfs_vfs_rmdir(struct cfs_vfs *v, uint64_t unique, uint64_t parent, const char *name)
{
	struct rm_arg a = { parent, name, 1 };
	return once(v, unique, -ENOENT, rm_op, &a);
}

/* ---- renaming ---------------------------------------------------------------- */

/* Checks a rename's target t (exists) against source s. */
static int check_target(struct cfs_vfs *v, const struct child *s, const struct child *t)
{
	if (t->is_dir && !s->is_dir)
		return -EISDIR;
	if (!t->is_dir && s->is_dir)
		return -ENOTDIR;
	if (!t->is_dir)
		return 0;
	struct cfs_listing *l;
	int rc = cfs_vfs_get_listing(v, t->ino, &l);
	if (!rc) {
		rc = l->n ? -ENOTEMPTY : 0;
		cfs_listing_unref(l);
	}
	return rc;
}

static int do_rename(struct cfs_vfs *v, uint64_t parent, const char *name, uint64_t newparent,
		     const char *newname, unsigned flags)
{
	if (flags & CFS_VFS_RENAME_EXCHANGE)
		return -EINVAL;
	int rc;
	struct child s, t;
	if ((rc = find_child(v, parent, name, &s)) != 0) {
		CFS_DEBUG("rename %s to %s: %s", name, newname, cfs_strerror(rc));
		return rc;
	}
	if (strlen(newname) > CFS_NAME_MAX)
		return -ENAMETOOLONG;
	rc = find_child(v, newparent, newname, &t);
	int exists = rc == 0;
	if (rc && rc != -ENOENT)
		return rc;
	if (exists && t.ino == s.ino)
		return 0;
	if (exists && (flags & CFS_VFS_RENAME_NOREPLACE))
		return -EEXIST;
	if (exists && (rc = check_target(v, &s, &t)) != 0)
		return rc;
	char newcid[CFS_ID_MAX];
	if ((rc = dir_cid(v, newparent, newcid)) != 0)
		return rc;
	int moved = strcmp(newcid, s.dir_cid) != 0;
	if (moved && !can_add_to(v, newcid))
		return -EACCES;
	cfs_vfs_w_forget_listing(v, s.dir_cid); /* before Drive changes: see mkdir */
	if (moved)
		cfs_vfs_w_forget_listing(v, newcid);
	pthread_mutex_lock(&v->w.lock);
	struct cfs_wfile *ws = cfs_vfs_w_find(v, s.ino);
	int s_local = ws && ws->j.is_new;
	pthread_mutex_unlock(&v->w.lock);
	/* What Drive must lose: the target (now, or once the source is
	 * uploaded), and what the source was to replace at its old name.  The
	 * target goes before the source takes its name: a death in between
	 * leaves the source under its old name, and the request served again
	 * finds it (the other order would make it look done, the target kept). */
	char now_remove[2][CFS_ID_MAX] = { "", "" };
	pthread_mutex_lock(&v->w.lock);
	ws = cfs_vfs_w_find(v, s.ino);
	s_local = ws && ws->j.is_new;
	char inherit[CFS_ID_MAX] = "";
	if (exists) {
		struct cfs_wfile *wt = cfs_vfs_w_find(v, t.ino);
		int t_local = wt && wt->j.is_new;
		if (wt)
			w_unlink(v, wt, inherit);
		if (!t_local)
			snprintf(inherit, sizeof(inherit), "%s", t.id);
	}
	if (s_local) {
		snprintf(now_remove[0], CFS_ID_MAX, "%s", ws->j.replaces);
		snprintf(ws->j.replaces, sizeof(ws->j.replaces), "%s", inherit);
		snprintf(ws->j.rep_name, sizeof(ws->j.rep_name), "%s", inherit[0] ? newname : "");
		snprintf(ws->j.rep_parent, sizeof(ws->j.rep_parent), "%s", inherit[0] ? newcid : "");
		snprintf(ws->j.name, sizeof(ws->j.name), "%s", newname);
		snprintf(ws->j.parent, sizeof(ws->j.parent), "%s", newcid);
		cfs_upq_touch(&ws->rq, cfs_vfs_w_now(v)); /* a refused name may be fixed */
		rc = w_journal(v, ws);
	} else {
		snprintf(now_remove[0], CFS_ID_MAX, "%s", inherit);
	}
	CFS_DEBUG("rename %s (%s%s) to %s: target %s%s, it replaces %s, now removed %s",
		  name, s.id, s_local ? ", local" : "", newname, exists ? t.id : "none",
		  exists && !inherit[0] ? " (local, replacing nothing)" : "",
		  s_local ? ws->j.replaces : "-", now_remove[0][0] ? now_remove[0] : "none");
	pthread_mutex_unlock(&v->w.lock);
	for (int i = 0; !rc && i < 2; i++)
		if (now_remove[i][0])
			rc = cfs_vfs_w_remove_in_drive(v, now_remove[i]);
	if (!rc && !s_local) {
		cfs_vfs_w_mine(v, s.id);
		CFS_DEBUG("drive: rename %s to %s", s.id, newname);
		rc = v->w.d.update_meta(v->w.d.arg, s.id, newname, moved ? newcid : NULL,
					   moved ? s.dir_cid : NULL, -1, 0, NULL);
		pthread_mutex_lock(&v->w.lock);
		ws = cfs_vfs_w_find(v, s.ino);
		if (!rc && ws) { /* its pending content keeps the new place */
			snprintf(ws->j.name, sizeof(ws->j.name), "%s", newname);
			snprintf(ws->j.parent, sizeof(ws->j.parent), "%s", newcid);
			if (ws->j.sent_name[0] && !ws->j.uri[0]) { /* Drive's, now */
				snprintf(ws->j.sent_name, sizeof(ws->j.sent_name), "%s", newname);
				snprintf(ws->j.sent_parent, sizeof(ws->j.sent_parent), "%s", newcid);
			}
			w_journal(v, ws);
		}
		pthread_mutex_unlock(&v->w.lock);
	}
	if (rc)
		return rc;
	cfs_nsdb_set_parents(v->ns, newparent, &s.ino, 1);
	cfs_inode_lock(v->tab);
	listing_edit(v, parent, name, NULL, 0, 0);
	listing_edit(v, newparent, newname, newname, s.ino, s.is_dir);
	struct cfs_node *n = cfs_inode_get(v->tab, s.ino);
	if (n) {
		cfs_node_place(n, newparent);
		cfs_node_changed(n, cfs_clock_wall_ns());
	}
	struct cfs_node *tn = exists ? cfs_inode_get(v->tab, t.ino) : NULL;
	if (tn) { /* replaced: as unlinked */
		cfs_node_changed(tn, cfs_clock_wall_ns());
		tn->unlinked = 1;
	}
	cfs_inode_unlock(v->tab);
	return 0;
}

struct mv_arg {
	uint64_t parent, newparent;
	const char *name, *newname;
	unsigned flags;
};

static int mv_op(struct cfs_vfs *v, void *arg)
{
	struct mv_arg *a = arg;
	return do_rename(v, a->parent, a->name, a->newparent, a->newname, a->flags);
}

int cfs_vfs_rename(struct cfs_vfs *v, uint64_t unique, uint64_t parent, const char *name,
		   uint64_t newparent, const char *newname, unsigned flags)
{
	struct mv_arg a = { parent, newparent, name, newname, flags };
	int rc = v->w.enabled ? new_name_ok("rename", newname) : 0;
	return rc ? rc : once(v, unique, -ENOENT, mv_op, &a);
}

/* ---- attributes, writes, flush, fsync -------------------------------------- */

/* The staged file an ftruncate through handle fh acts on, with a handle and
 * writer count (as cfs_vfs_w_attach): the handle's own, even when its name
 * was removed since; else (a truncate by path) the node's. */
static int setattr_w(struct cfs_vfs *v, uint64_t ino, uint64_t fh, int trunc,
		     struct cfs_wfile **out)
{
	struct cfs_vfs_file *f;
	if (fh && cfs_vfs_get_file(v, ino, fh, &f) == 0) {
		struct cfs_wfile *w = f->writer ? f->w : NULL;
		if (w) {
			pthread_mutex_lock(&v->w.lock);
			w->handles++;
			w->writers++;
			pthread_mutex_unlock(&v->w.lock);
		}
		cfs_vfs_put_file(v, f);
		if (w) {
			*out = w;
			return 0;
		}
	}
	return cfs_vfs_w_attach(v, ino, 1, trunc, out);
}

int cfs_vfs_setattr(struct cfs_vfs *v, uint64_t ino, uint64_t fh,
		    const struct cfs_vfs_setattr *s, struct cfs_vfs_attr *a)
{
	int rc = cfs_vfs_resolve_node(v, ino);
	if (rc)
		return rc;
	if ((s->set_size || s->set_mtime) && !v->w.enabled)
		return -EROFS;
	if (s->set_size) {
		struct cfs_wfile *w;
		if (s->size < 0)
			return -EINVAL;
		if ((rc = setattr_w(v, ino, fh, s->size == 0, &w)) != 0)
			return rc;
		pthread_mutex_lock(&v->w.lock);
		cfs_vfs_snap_wait(v, w);
		if (w->j.size != s->size) {
			cfs_vfs_snap_changed(w, s->size < w->j.size ? s->size : w->j.size);
			rc = w_begin(v, w);
			if (!rc)
				rc = ftruncate(w->fd, (off_t)s->size) ? -errno : 0;
			if (!rc) {
				w->j.size = s->size;
				w->j.mtime_ns = cfs_vfs_w_wall(v);
				w_changed(v, w);
			}
		}
		/* a truncate of a file nobody else writes is whole by itself */
		if (!rc && w->writers <= 1 && !w->torn && w->j.state == CFS_JSTATE_WRITING)
			w->j.state = CFS_JSTATE_CLOSED;
		if (!rc && w->gen > w->journaled)
			rc = w_journal(v, w);
		pthread_mutex_unlock(&v->w.lock);
		cfs_vfs_w_detach(v, w, 1);
		if (rc)
			return rc;
	}
	if (s->set_mtime) {
		pthread_mutex_lock(&v->w.lock);
		struct cfs_wfile *w = cfs_vfs_w_find(v, ino);
		if (w && w->j.mtime_ns != s->mtime_ns) {
			w->j.mtime_ns = s->mtime_ns;
			w_changed(v, w);
			rc = w_journal(v, w);
		}
		pthread_mutex_unlock(&v->w.lock);
		char id[CFS_ID_MAX] = "";
		cfs_inode_lock(v->tab);
		struct cfs_node *n = cfs_inode_get(v->tab, ino);
		if (n && !w && ino != CFS_ROOT_INO && !n->export_mime[0])
			snprintf(id, sizeof(id), "%s", n->id);
		cfs_inode_unlock(v->tab);
		if (id[0]) {
			cfs_vfs_w_mine(v, id);
			rc = v->w.d.update_meta(v->w.d.arg, id, NULL, NULL, NULL, -1, s->mtime_ns, NULL);
		}
		if (rc)
			return rc;
		cfs_inode_lock(v->tab);
		if (n)
			cfs_node_set_mtime(n, s->mtime_ns);
		cfs_inode_unlock(v->tab);
	}
	if (s->set_atime || s->set_mtime) { /* kept here only: Drive has no atime */
		cfs_inode_lock(v->tab);
		struct cfs_node *n = cfs_inode_get(v->tab, ino);
		if (n && s->set_atime)
			cfs_node_set_atime(n, s->atime_ns);
		if (n)
			cfs_node_changed(n, cfs_clock_wall_ns());
		cfs_inode_unlock(v->tab);
	}
	return cfs_vfs_getattr(v, ino, a);
}

/* The open file fh of ino with a reference, and its staged file when it was
 * opened for writing (else *w NULL: the caller gives f back). */
static int writer_file(struct cfs_vfs *v, uint64_t ino, uint64_t fh, struct cfs_vfs_file **f,
		       struct cfs_wfile **w)
{
	int rc = cfs_vfs_get_file(v, ino, fh, f);
	*w = !rc && (*f)->writer ? (*f)->w : NULL;
	return rc;
}

int cfs_vfs_write(struct cfs_vfs *v, uint64_t ino, uint64_t fh, int64_t off, const char *buf,
		  size_t len, size_t *written)
{
	*written = 0;
	if (off < 0)
		return -EINVAL;
	struct cfs_vfs_file *f;
	struct cfs_wfile *w;
	int rc = writer_file(v, ino, fh, &f, &w);
	if (rc)
		return rc;
	if (!w) {
		cfs_vfs_put_file(v, f);
		return -EBADF;
	}
	pthread_mutex_lock(&v->w.lock);
	cfs_vfs_snap_wait(v, w); /* never a snapshot of a half-done write */
	rc = w_begin(v, w);
	w->writing += !rc;
	pthread_mutex_unlock(&v->w.lock);
	if (!rc)
		rc = cfs_staging_pwrite(w->fd, off, buf, len);
	pthread_mutex_lock(&v->w.lock);
	if (w->writing && !--w->writing && w->snapping)
		pthread_cond_broadcast(&v->w.cond); /* only a snapshot waits for this */
	cfs_vfs_snap_changed(w, off); /* failed too: what it did is unknown */
	if (!rc && w->j.uri[0]) {
		/* an upload session was started for older bytes: the journal must not
		 * hand it to a later process for these */
		w_changed(v, w);
		w_journal(v, w);
	}
	if (!rc) {
		if (off + (int64_t)len > w->j.size)
			w->j.size = off + (int64_t)len;
		w->j.mtime_ns = cfs_vfs_w_wall(v);
		w_changed(v, w);
		v->w.st.writes_bytes += len;
		*written = len;
	} else if (rc == -ENOSPC || rc == -EDQUOT) {
		/* what a full disk took past the old end goes: no half write */
		if (ftruncate(w->fd, (off_t)w->j.size))
			CFS_WARN("staging: cannot cut %s back after ENOSPC", w->j.id);
		if (!w->torn)
			CFS_WARN("staging folder full: a write to %s fails with ENOSPC; the file is "
				 "not uploaded until it is written again from the start", w->j.name);
		w->torn = 1;
		w->j.state = CFS_JSTATE_TORN;
		w_journal(v, w); /* a new mount must not upload it either */
	}
	pthread_mutex_unlock(&v->w.lock);
	cfs_vfs_put_file(v, f);
	return rc;
}

/* Journals w's staged state: close() makes it safe against the daemon's
 * death (the bytes in the staged file, the entry committed, nothing
 * flushed).  durable (fsync): its bytes flushed first, then its entry made
 * durable, so it is also safe against the machine's.  0 or -errno. */
static int flush_w(struct cfs_vfs *v, struct cfs_wfile *w, int durable)
{
	int rc = 0, jrc = 0;
	char id[CFS_ID_MAX];
	if (durable && fdatasync(w->fd))
		rc = -errno;
	pthread_mutex_lock(&v->w.lock);
	if (!rc && w->j.state == CFS_JSTATE_WRITING && !w->torn) {
		/* complete as of this close; still held open when this was a
		 * child's copy of the descriptor (a fork's exit or exec): the
		 * interval of uploads while open goes on (vfs_snap.c) */
		w->j.state = CFS_JSTATE_CLOSED;
		if (w->journaled == w->gen && !w->unlinked)
			rc = w_journal(v, w);
	}
	if (!rc && w->gen > w->journaled && !w->unlinked)
		rc = jrc = w_journal(v, w);
	snprintf(id, sizeof(id), "%s", w->j.id);
	if (!rc && w->torn)
		rc = -ENOSPC; /* a write failed for the staging disk: not uploaded so */
	if (!rc && w->gen > w->durable) {
		w->due_ms = cfs_vfs_w_now(v) + v->w.delay_ms;
		if (cfs_vfs_w_now(v) < v->w.quota_full_until_ms)
			rc = -ENOSPC; /* kept and journaled: uploaded once Drive has room */
	}
	pthread_cond_broadcast(&v->w.cond);
	pthread_mutex_unlock(&v->w.lock);
	if (durable && !jrc && (jrc = cfs_journal_sync(v->w.journal, id)) != 0) {
		CFS_ERROR("journal: cannot make the entry of %s durable: %s", id, cfs_strerror(jrc));
		if (!rc)
			rc = jrc;
	}
	return rc;
}

/* Every staged file's bytes, then every journal entry, made durable (safe
 * against a machine crash): `colabfs sync`.  Costs nothing when no entry
 * changed since the last time.  0 or -errno. */
int cfs_vfs_w_make_durable(struct cfs_vfs *v)
{
	if (!v->w.enabled || !v->w.ready)
		return 0;
	/* one flush of the staging folder's file system (the journal's, too)
	 * covers every staged file: a file per fdatasync would cost a flush each */
	int rc = cfs_journal_sync_pending(v->w.journal);
	if (rc > 0)
		rc = cfs_journal_sync(v->w.journal, NULL);
	if (rc < 0)
		CFS_ERROR("sync: cannot make the staged files durable: %s", cfs_strerror(rc));
	return rc;
}

int cfs_vfs_flush(struct cfs_vfs *v, uint64_t ino, uint64_t fh)
{
	struct cfs_vfs_file *f;
	struct cfs_wfile *w;
	int rc = writer_file(v, ino, fh, &f, &w);
	if (rc)
		return rc == -EBADF ? 0 : rc;
	if (w)
		rc = flush_w(v, w, 0);
	cfs_vfs_put_file(v, f);
	return rc;
}

int cfs_vfs_fsync(struct cfs_vfs *v, uint64_t ino, uint64_t fh)
{
	struct cfs_vfs_file *f;
	struct cfs_wfile *w;
	int rc = writer_file(v, ino, fh, &f, &w);
	if (rc)
		return rc;
	if (!w) {
		cfs_vfs_put_file(v, f);
		return 0;
	}
	rc = flush_w(v, w, 1);
	pthread_mutex_lock(&v->w.lock);
	int torn = w->torn;
	pthread_mutex_unlock(&v->w.lock);
	if (rc == -ENOSPC && !torn)
		rc = 0; /* the upload's own answer is what fsync returns */
	pthread_mutex_lock(&v->w.lock);
	uint64_t want = w->gen;
	uint64_t tries = w->attempts;
	w->urgent = 1;
	if (!torn)
		cfs_upq_ask(&w->rq, cfs_vfs_w_now(v)); /* one attempt now, at most every 10 s */
	pthread_cond_broadcast(&v->w.cond);
	while (!rc && w->durable < want && !w->unlinked && !v->w.stop &&
	       !(w->attempts > tries && w->rq.err)) {
		if (!v->w.started) {
			rc = -EIO; /* no uploader in this process */
			break;
		}
		/* no attempt soon (stopped, or a long backoff step): its last
		 * answer now, rather than an fsync hanging for minutes */
		if (w->rq.err && w->rq.due_ms - cfs_vfs_w_now(v) > FSYNC_WAIT_MS && !w->sending)
			break;
		pthread_cond_wait(&v->w.cond, &v->w.lock);
	}
	if (!rc && w->durable < want && !w->unlinked)
		rc = w->rq.err ? w->rq.err : -EIO;
	pthread_mutex_unlock(&v->w.lock);
	cfs_vfs_put_file(v, f);
	return rc;
}

/* ---- the overlay ---------------------------------------------------------- */

/* Table lock held; w lock taken.  Is node ino's item replaced by a staged
 * new file in folder cid (hidden until that upload trashes it)? */
static int replaced(struct cfs_vfs *v, const char *cid, const char *id)
{
	for (struct cfs_wfile *w = v->w.files; w; w = w->next)
		if (!w->unlinked && w->j.is_new && strcmp(w->j.parent, cid) == 0 &&
		    strcmp(w->j.replaces, id) == 0)
			return 1;
	return 0;
}

int cfs_vfs_w_overlay(struct cfs_vfs *v, uint64_t ino, struct cfs_listing **lp)
{
	if (!v->w.enabled)
		return 0;
	struct cfs_node *d = cfs_inode_get(v->tab, ino);
	if (!d)
		return 0;
	struct cfs_listing *l = *lp;
	pthread_mutex_lock(&v->w.lock);
	size_t adds = 0;
	for (struct cfs_wfile *w = v->w.files; w; w = w->next)
		if (!w->unlinked && w->j.is_new && strcmp(w->j.parent, d->content_id) == 0)
			adds++;
	int rc = 0;
	if (!adds && !v->w.files) {
		pthread_mutex_unlock(&v->w.lock);
		return 0;
	}
	struct cfs_listing *nl = cfs_listing_new(l->n + adds);
	if (!nl) {
		pthread_mutex_unlock(&v->w.lock);
		return -ENOMEM;
	}
	size_t k = 0;
	for (size_t i = 0; i < l->n; i++) {
		struct cfs_node *c = cfs_inode_get(v->tab, l->e[i].ino);
		struct cfs_wfile *w = cfs_vfs_w_find(v, l->e[i].ino);
		if ((c && replaced(v, d->content_id, c->id)) ||
		    (w && strcmp(w->j.parent, d->content_id) != 0)) {
			free(l->e[i].name); /* replaced here, or moved away locally */
			continue;
		}
		if (w && strcmp(w->j.name, l->e[i].name) != 0 &&
		    (w->j.is_new || (w->j.sent_name[0] && strcmp(w->j.sent_name, l->e[i].name) == 0))) {
			/* in Drive under an older name, renamed here since */
			char *nm = strdup(w->j.name);
			if (!nm) {
				rc = -ENOMEM;
				nm = l->e[i].name;
			} else {
				free(l->e[i].name);
			}
			l->e[i].name = nm;
		}
		nl->e[k++] = l->e[i];
	}
	for (struct cfs_wfile *w = v->w.files; !rc && w; w = w->next) {
		if (w->unlinked || !w->j.is_new || strcmp(w->j.parent, d->content_id) != 0)
			continue;
		int dup = 0;
		for (size_t i = 0; i < k && !dup; i++)
			dup = nl->e[i].ino == w->ino || strcmp(nl->e[i].name, w->j.name) == 0;
		if (dup)
			continue;
		struct cfs_node *n = cfs_inode_get(v->tab, w->ino);
		if (!n && !(n = cfs_inode_add(v->tab, w->j.id, w->ino))) {
			rc = -ENOMEM;
			break;
		}
		cfs_node_place(n, ino);
		n->size = w->j.size;
		n->mtime_ns = n->ctime_ns = w->j.mtime_ns;
		if (!(nl->e[k].name = strdup(w->j.name))) {
			rc = -ENOMEM;
			break;
		}
		nl->e[k].ino = w->ino;
		nl->e[k++].is_dir = 0;
	}
	pthread_mutex_unlock(&v->w.lock);
	nl->n = k;
	/* the names moved into nl; l keeps none */
	l->n = 0;
	cfs_listing_unref(l);
	*lp = nl;
	return rc;
}

/* ---- statfs ------------------------------------------------------------- */

#define QUOTA_TTL_MS 60000

void cfs_vfs_w_statfs(struct cfs_vfs *v, struct statvfs *st)
{
	int64_t now = cfs_vfs_w_now(v), limit, usage;
	pthread_mutex_lock(&v->w.lock);
	int fresh = v->w.q_at_ms && now - v->w.q_at_ms < QUOTA_TTL_MS;
	pthread_mutex_unlock(&v->w.lock);
	if (!fresh && v->w.d.about(v->w.d.arg, &limit, &usage) == 0) {
		pthread_mutex_lock(&v->w.lock);
		v->w.q_limit = limit;
		v->w.q_usage = usage;
		v->w.q_at_ms = now;
		pthread_mutex_unlock(&v->w.lock);
	}
	pthread_mutex_lock(&v->w.lock);
	if (v->w.q_at_ms) {
		uint64_t bs = st->f_frsize;
		uint64_t total = v->w.q_limit < 0 ? (1ull << 50) : (uint64_t)v->w.q_limit;
		uint64_t used = v->w.q_usage > 0 ? (uint64_t)v->w.q_usage : 0;
		st->f_blocks = total / bs;
		st->f_bfree = st->f_bavail = used < total ? (total - used) / bs : 0;
	}
	pthread_mutex_unlock(&v->w.lock);
}
