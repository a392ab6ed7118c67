/* vfs_upload: the uploaders, the journal's replay, `colabfs sync` and the
 * write stats (see vfs.h, vfs_int.h).
 *
 * Policy.  A staged file is uploaded when its journal entry is current (the
 * last close synced and journaled it), nobody has it open for writing, and
 * the write-back delay since that close has passed; fsync and `colabfs
 * sync` skip the delay (urgent).  Uploaders (--upload-threads) take ready
 * files oldest entry first; one file is sent by one uploader at a time, so
 * a file's changes reach Drive in order while different files go in
 * parallel.  Drive's resumable protocol is driven by drive_write.h, which
 * retries within the io timeout; the session URI and confirmed offset are
 * written to the journal as they advance, so a new process resumes where
 * Drive says it is.  Before new content replaces a Drive file, its head
 * revision is compared with the one the writer started from: a file changed
 * elsewhere meanwhile keeps its content, ours goes beside it as
 * "NAME (conflict DATE TIME).EXT".  After a verified upload (size and md5)
 * the renames made meanwhile are applied, a file it replaces is trashed, the
 * node shows the new revision, and the staged copy is dropped once nobody
 * has it open.  Failures: Drive's storage full is retried every minute and
 * makes close() and fsync() answer ENOSPC meanwhile; a refusal that needs
 * the user (permission, size) waits for `colabfs sync`; anything transient
 * is retried after a pause. */
#include "vfs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "crypto.h"
#include "drive_write.h"
#include "json.h"
#include "err.h"
#include "log.h"
#include "names.h"
#include "nsdb.h"
#include "staging.h"
#include "store.h"

/* Resumable chunks: each costs a round trip (200-500 ms from Colab), so big
 * ones; at most --upload-threads of them in memory (4 x 32 MiB). */
#define UPLOAD_CHUNK (32u << 20)
#define SEED_MAX (64ll << 20) /* largest upload copied into the cache */

void cfs_vfs_w_drop(struct cfs_vfs *v, struct cfs_wfile *w)
{
	struct cfs_wfile **pp = &v->w.files;
	while (*pp && *pp != w)
		pp = &(*pp)->next;
	if (*pp) {
		*pp = w->next;
		__atomic_sub_fetch(&v->w.nfiles, 1, __ATOMIC_RELAXED);
	}
	cfs_vfs_snap_free(v, w);
	close(w->fd);
	int rc = cfs_staging_remove(v->w.stage, w->j.id);
	if (rc && rc != -ENOENT)
		CFS_WARN("staging: cannot remove the staged copy of %s: %s", w->j.id, cfs_strerror(rc));
	if (!w->unlinked)
		cfs_journal_del(v->w.journal, w->j.id);
	free(w);
}

/* ---- picking and sending ------------------------------------------------ */

/* w lock held: the ready file with the oldest entry, or NULL; *wait_ms: how
 * long until the next one becomes ready (at most a second). */
static struct cfs_wfile *pick(struct cfs_vfs *v, int64_t now, long *wait_ms)
{
	struct cfs_wfile *best = NULL;
	int64_t next = now + 1000;
	for (struct cfs_wfile *w = v->w.files; w; w = w->next) {
		if (cfs_vfs_snap_due(v, w, now, &next)) { /* held open: a snapshot */
			if (!best || w->j.seq < best->j.seq)
				best = w;
			continue;
		}
		if (!w->sending && w->due_ms <= now && cfs_upq_may(&w->rq, now, &next) &&
		    ((w->unlinked && w->j.removed) ||
		     (!w->unlinked && !w->j.is_new && w->gen <= w->durable && !cfs_wfile_settled(w)))) {
			best = w; /* tombstones and metadata left to fix first: a call or two */
			break;
		}
		if (w->unlinked || w->sending || w->torn || w->gen <= w->durable ||
		    w->journaled < w->gen || w->j.state == CFS_JSTATE_WRITING)
			continue;
		if (w->writers && !w->urgent)
			continue;
		if (!cfs_upq_may(&w->rq, now, &next))
			continue; /* backing off, or stopped: urgent or not */
		if (!w->urgent && w->due_ms > now) {
			if (w->due_ms < next)
				next = w->due_ms;
			continue;
		}
		if (!best || w->j.seq < best->j.seq)
			best = w;
	}
	*wait_ms = next > now ? (long)(next - now) : 1;
	return best;
}

struct send {
	struct cfs_vfs *v;
	struct cfs_wfile *w;
	uint64_t gen;
	int fd;
	int snap; /* the bytes are a snapshot of a file still open (vfs_snap.c) */
	char sent_name[CFS_JOURNAL_NAME_MAX]; /* what the file is created as */
	char sent_parent[CFS_ID_MAX];
	char rev[CFS_ID_MAX];  /* the content revision Drive made of the bytes sent */
	char sent_id[CFS_ID_MAX]; /* the item they went to (a conflict: the copy) */
};

static int read_staged(void *arg, int64_t off, void *buf, size_t len)
{
	struct send *s = arg;
	size_t got = 0;
	int rc = cfs_staging_pread(s->fd, off, buf, len, &got);
	/* changed under us (a writer came back): these bytes may mix two
	 * versions, which Drive must never hold; the newer one goes next */
	pthread_mutex_lock(&s->v->w.lock);
	/* a snapshot does not change, but a close with newer bytes supersedes
	 * it; a write still in progress (a FLUSH from another descriptor said
	 * "complete" meanwhile) may be half done */
	int changed = s->snap ? !s->w->writers && s->w->gen != s->gen
			      : s->w->gen != s->gen || s->w->writing;
	pthread_mutex_unlock(&s->v->w.lock);
	return changed ? -ESTALE : rc ? rc : got == len ? 0 : -ESTALE;
}

/* The session and offset go to the journal as Drive confirms them. */
static void on_progress(void *arg, const char *uri, int64_t confirmed)
{
	struct send *s = arg;
	struct cfs_vfs *v = s->v;
	pthread_mutex_lock(&v->w.lock);
	s->w->sent_bytes = confirmed;
	if (s->snap)
		cfs_vfs_snap_progress(v, s->w, uri, confirmed);
	else if (s->w->gen == s->gen && !s->w->unlinked && strlen(uri) < sizeof(s->w->j.uri)) {
		snprintf(s->w->j.uri, sizeof(s->w->j.uri), "%s", uri);
		snprintf(s->w->j.sent_name, sizeof(s->w->j.sent_name), "%s", s->sent_name);
		snprintf(s->w->j.sent_parent, sizeof(s->w->j.sent_parent), "%s", s->sent_parent);
		s->w->j.confirmed = confirmed;
		if (cfs_vfs_w_put(v, s->w, NULL))
			CFS_WARN("journal: cannot record the upload session of %s", s->w->j.id);
	}
	pthread_mutex_unlock(&v->w.lock);
}

enum { SAME = 0, CHANGED = 1, GONE = 2, ALREADY = 3 };
/* send_one: nothing to send, the file left the namespace here (not an error) */
#define SKIPPED 1

int cfs_vfs_staged_md5(int fd, int64_t len, char hex[33])
{
	struct cfs_digest *g = NULL;
	char *buf = malloc(1u << 20);
	int rc = buf ? cfs_digest_new("md5", &g) : -ENOMEM;
	for (int64_t off = 0; !rc && off < len;) {
		size_t n = len - off < (1 << 20) ? (size_t)(len - off) : (size_t)(1u << 20), got = 0;
		rc = cfs_staging_pread(fd, off, buf, n, &got);
		if (!rc && got != n)
			rc = -ESTALE;
		if (!rc)
			rc = cfs_digest_update(g, buf, n);
		off += (int64_t)n;
	}
	if (!rc)
		rc = cfs_digest_final_hex(g, hex, 33); /* frees g */
	else
		cfs_digest_free(g);
	free(buf);
	return rc;
}

/* Whether the Drive file changed since the writer's base revision.  A head
 * revision that is not the base but holds exactly the staged bytes is our
 * own upload whose record was lost (a machine crash before the journal
 * said so, a reply lost on the way): ALREADY, with Drive's metadata in
 * *have (the caller cleans it up), never a conflict with ourselves. */
static int check_base(struct cfs_vfs *v, const struct send *s, const struct cfs_jent *j,
		      int *state, struct cfs_file_meta *have)
{
	*state = SAME;
	struct cfs_file_meta m;
	int rc = v->w.d.get(v->w.d.arg, j->id, &m);
	if (rc == -ENOENT) {
		*state = GONE;
		return 0;
	}
	if (rc)
		return rc;
	char rev[CFS_ID_MAX], md5[33];
	cfs_vfs_content_rev(&m, rev, sizeof(rev));
	if (m.trashed)
		*state = GONE;
	else if (j->base_rev[0] && strcmp(rev, j->base_rev) != 0)
		*state = m.md5[0] && m.size == j->size && cfs_vfs_staged_md5(s->fd, j->size, md5) == 0 &&
				 strcmp(md5, m.md5) == 0
			 ? ALREADY : CHANGED;
	if (*state == ALREADY)
		*have = m;
	else
		cfs_file_meta_cleanup(&m);
	return 0;
}

/* A new file whose reserved id Drive already holds: an earlier process
 * created it and died before the journal said so (the id is ours alone).
 * It is put where the entry says and its content replaced. */
static int send_again(struct send *s, const struct cfs_jent *j, struct cfs_file_meta *out)
{
	struct cfs_vfs *v = s->v;
	struct cfs_file_meta m;
	int rc = v->w.d.get(v->w.d.arg, j->id, &m);
	if (rc)
		return rc;
	int moved = strcmp(m.parent, j->parent) != 0;
	if (moved || !m.name || strcmp(m.name, j->name) != 0 || m.trashed)
		rc = v->w.d.update_meta(v->w.d.arg, j->id, j->name, moved ? j->parent : NULL,
					   moved && m.parent[0] ? m.parent : NULL, m.trashed ? 0 : -1,
					   0, NULL);
	cfs_file_meta_cleanup(&m);
	if (rc)
		return rc;
	CFS_INFO("upload %s: created by an earlier process; its content is replaced", j->id);
	snprintf(s->sent_name, sizeof(s->sent_name), "%s", j->name);
	snprintf(s->sent_parent, sizeof(s->sent_parent), "%s", j->parent);
	struct cfs_json_meta_in mi = { .mtime_ns = j->mtime_ns, .trashed = -1 };
	struct cfs_drive_upload u = { .meta = &mi, .id = j->id, .total = j->size,
				      .read = read_staged, .arg = s };
	return v->w.d.upload(v->w.d.arg, &u, out);
}

/* Sends snapshot j of s->w; *conflict says where it went instead. */
static int send_one(struct send *s, const struct cfs_jent *j, int *conflict, char *sent_id,
		    struct cfs_file_meta *out)
{
	struct cfs_vfs *v = s->v;
	int rc = 0;
	char *sent_name = s->sent_name;
	*conflict = SAME;
	snprintf(sent_id, CFS_ID_MAX, "%s", j->id);
	/* a session taken up goes on with the metadata it was started with */
	/* new content of a file Drive has keeps Drive's name and folder (a
	 * rename since is applied after it, after_upload) */
	int resumed = j->sent_name[0] && (j->uri[0] || !j->is_new);
	snprintf(sent_name, CFS_JOURNAL_NAME_MAX, "%s", resumed ? j->sent_name : j->name);
	snprintf(s->sent_parent, CFS_ID_MAX, "%s", resumed ? j->sent_parent : j->parent);
	if (!j->is_new && (rc = check_base(v, s, j, conflict, out)) != 0)
		return rc;
	if (*conflict == ALREADY) {
		CFS_INFO("upload %s: Drive has these bytes already (an earlier upload of ours)", j->id);
		*conflict = SAME;
		return 0;
	}
	struct cfs_json_meta_in m = { .mtime_ns = j->mtime_ns, .trashed = -1 };
	struct cfs_drive_upload u = { .total = j->size, .chunk = UPLOAD_CHUNK, .read = read_staged,
				      .arg = s };
	if (*conflict == GONE) {
		pthread_mutex_lock(&v->w.lock);
		int ours = s->w->unlinked; /* removed or replaced here meanwhile */
		pthread_mutex_unlock(&v->w.lock);
		if (ours)
			return SKIPPED;
	}
	if (*conflict) {
		if ((rc = cfs_vfs_w_reserve_id(v, sent_id)) != 0)
			return rc;
		if (*conflict == CHANGED &&
		    (rc = cfs_names_conflict(j->name, cfs_vfs_w_wall(v) / 1000000000,
					     sent_name, CFS_JOURNAL_NAME_MAX)) != 0)
			return rc;
	}
	if (j->is_new || *conflict) {
		m.id = sent_id;
		m.name = sent_name;
		m.parent = s->sent_parent;
		m.mime = "application/octet-stream";
		u.meta = &m;
		if (!*conflict) {
			u.resume_uri = j->uri;
			u.progress = on_progress;
		}
	} else {
		u.meta = &m;
		u.id = j->id;
		u.resume_uri = j->uri;
		u.progress = on_progress;
	}
	CFS_DEBUG("upload %s: %s \"%s\", %" PRId64 " bytes%s", sent_id,
		  j->is_new || *conflict ? "new file" : "new content of", sent_name, j->size,
		  u.resume_uri && u.resume_uri[0] ? ", resuming its session" : "");
	rc = v->w.d.upload(v->w.d.arg, &u, out);
	if (rc == -EEXIST && j->is_new && !*conflict)
		rc = send_again(s, j, out);
	return rc;
}

/* The bytes just uploaded become cache blocks of the revision Drive made of
 * them (key content id @ revision, as reads look them up), so the first
 * read after the staged copy goes costs no download.  Best effort, and only
 * for files up to SEED_MAX and small next to the cache budget; cold blocks
 * (cfs_store_put_cold), which take only free room and never push out what
 * was read: a checkpoint written every few minutes must not evict the
 * dataset. */
static void seed_cache(struct cfs_vfs *v, int fd, const char *id, const char *rev, int64_t size)
{
	uint32_t bs = cfs_store_block_size(v->store);
	if (size <= 0 || (uint64_t)size > cfs_store_budget(v->store) / 4 || size > SEED_MAX)
		return; /* a large checkpoint is rarely read back soon: not worth the copy */
	char key[2 * CFS_ID_MAX + 2];
	snprintf(key, sizeof(key), "%s@%s", id, rev);
	char *buf = malloc(bs);
	for (uint64_t b = 0; buf && (int64_t)(b * bs) < size; b++) {
		size_t got = 0;
		if (cfs_staging_pread(fd, (int64_t)(b * bs), buf, bs, &got) || !got ||
		    cfs_store_put_cold(v->store, key, b, buf, (uint32_t)got))
			break;
	}
	free(buf);
}

/* A journal entry's removal of Drive item id (what a rename replaced, or a
 * new file removed here) is done only when Drive says the item is what the
 * entry says: a file (not a folder) in folder parent_a or parent_b, named
 * name_a or name_b (name_a NULL: any name; a new file's reserved id is ours
 * alone, and a process that died after creating it may not have recorded
 * the name it used).  A row saying otherwise (damaged, forged, or the item
 * moved by someone else since) removes nothing.  0 when done or gone. */
static int remove_checked(struct cfs_vfs *v, const char *id, const char *parent_a,
			  const char *parent_b, const char *name_a, const char *name_b)
{
	struct cfs_file_meta m;
	int rc = v->w.d.get(v->w.d.arg, id, &m);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	int in = strcmp(m.parent, parent_a) == 0 || (parent_b[0] && strcmp(m.parent, parent_b) == 0);
	int named = !name_a || (m.name && (strcmp(m.name, name_a) == 0 ||
					   (name_b[0] && strcmp(m.name, name_b) == 0)));
	int folder = strcmp(m.mime, CFS_FOLDER_MIME) == 0;
	int trashed = m.trashed;
	cfs_file_meta_cleanup(&m);
	if (trashed)
		return 0;
	if (!in || !named || folder) {
		CFS_ERROR("journal: %s is not removed from Drive: it is not the file the entry says "
			  "(\"%s\" in %s)", id, name_a ? name_a : "a file", parent_a);
		return 0;
	}
	return cfs_vfs_w_remove_in_drive(v, id);
}

/* After a verified upload: what changed meanwhile is applied in Drive. */
static void after_upload(struct cfs_vfs *v, struct send *s, const struct cfs_jent *j,
			 int conflict, const char *sent_id, const struct cfs_file_meta *out)
{
	struct cfs_wfile *w = s->w;
	int fd = s->fd;
	const char *sent_name = s->sent_name;
	pthread_mutex_lock(&v->w.lock);
	int unlinked = w->unlinked;
	/* now, not at the start of the upload: a rename may have come meanwhile */
	char name[CFS_JOURNAL_NAME_MAX], parent[CFS_ID_MAX], replaces[CFS_ID_MAX];
	char rep_name[CFS_JOURNAL_NAME_MAX], rep_parent[CFS_ID_MAX];
	snprintf(name, sizeof(name), "%s", w->j.name);
	snprintf(parent, sizeof(parent), "%s", w->j.parent);
	snprintf(replaces, sizeof(replaces), "%s", w->j.replaces);
	snprintf(rep_name, sizeof(rep_name), "%s", w->j.rep_name[0] ? w->j.rep_name : name);
	snprintf(rep_parent, sizeof(rep_parent), "%s", w->j.rep_parent[0] ? w->j.rep_parent : parent);
	pthread_mutex_unlock(&v->w.lock);
	if (conflict == CHANGED) {
		CFS_WARN("conflict: %s changed in Drive since it was opened for writing; ours is "
			 "uploaded beside it as \"%s\"", j->name, sent_name);
		cfs_vfs_content_rev(out, s->rev, sizeof(s->rev)); /* the copy's (finish) */
		return;
	}
	if (unlinked)
		return; /* its tombstone takes it out of Drive */
	if (strcmp(name, sent_name) != 0 || strcmp(parent, s->sent_parent) != 0) {
		int moved = strcmp(parent, s->sent_parent) != 0;
		CFS_DEBUG("drive: rename %s to %s (renamed while uploading)", sent_id, name);
		int rc = v->w.d.update_meta(v->w.d.arg, sent_id, name, moved ? parent : NULL,
					       moved ? s->sent_parent : NULL, -1, 0, NULL);
		if (rc)
			CFS_WARN("upload %s: cannot rename it to \"%s\": %s", sent_id, name,
				 cfs_strerror(rc));
		else { /* what Drive has now (finish compares: a rename since is redone) */
			snprintf(s->sent_name, sizeof(s->sent_name), "%s", name);
			snprintf(s->sent_parent, sizeof(s->sent_parent), "%s", parent);
		}
	}
	if (j->is_new)
		cfs_vfs_w_created(v, w->ino, sent_id, name, parent);
	if (replaces[0])
		CFS_DEBUG("upload %s (%s) done: what it replaces goes", sent_id, name);
	if (replaces[0] && !remove_checked(v, replaces, rep_parent, parent, rep_name, sent_name)) {
		pthread_mutex_lock(&v->w.lock);
		if (strcmp(w->j.replaces, replaces) == 0)
			w->j.replaces[0] = '\0';
		pthread_mutex_unlock(&v->w.lock);
	}
	/* the node now shows Drive's revision of these bytes, and the next
	 * upload of this open is based on it (ours, not a conflict) */
	char *rev = s->rev;
	cfs_vfs_content_rev(out, rev, sizeof(s->rev));
	pthread_mutex_lock(&v->w.lock);
	unsigned k = v->w.landed_next++ % CFS_VFS_LANDED;
	snprintf(v->w.landed[k].id, sizeof(v->w.landed[k].id), "%s", sent_id);
	snprintf(v->w.landed[k].rev, sizeof(v->w.landed[k].rev), "%s", rev);
	v->w.landed[k].size = out->size < 0 ? 0 : out->size;
	v->w.landed[k].mtime_ns = out->mtime_ns / 1000000 == j->mtime_ns / 1000000 && j->mtime_ns
					  ? j->mtime_ns : out->mtime_ns;
	pthread_mutex_unlock(&v->w.lock);
	pthread_mutex_lock(&v->w.lock);
	uint64_t sent = w->sending;
	int same = w->gen == sent && !w->writers;
	pthread_mutex_unlock(&v->w.lock);
	if (same) {
		seed_cache(v, fd, sent_id, rev, out->size);
		pthread_mutex_lock(&v->w.lock);
		same = w->gen == sent; /* a write meanwhile: those blocks may mix both */
		pthread_mutex_unlock(&v->w.lock);
		if (!same) {
			char key[2 * CFS_ID_MAX + 2];
			uint64_t fb, fk;
			snprintf(key, sizeof(key), "%s@%s", sent_id, rev);
			cfs_store_evict_prefix(v->store, key, &fb, &fk);
		}
	}
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, w->ino);
	if (n && strcmp(n->id, sent_id) == 0 && !cfs_vfs_node_set_rev(v, n, rev, 1)) {
		n->size = out->size < 0 ? 0 : out->size;
		/* the nanoseconds shown while staged, when Drive kept their
		 * milliseconds: a time never goes back by less than 1 ms */
		if (out->mtime_ns && out->mtime_ns / 1000000 != j->mtime_ns / 1000000)
			n->mtime_ns = out->mtime_ns;
		else if (j->mtime_ns)
			n->mtime_ns = j->mtime_ns;
		cfs_node_set_sums(n, out->md5, out->sha256);
		n->stale = 0;
		n->opened_rev = 0;
	}
	cfs_inode_unlock(v->tab);
	cfs_vfs_retire_run(v);
}

int cfs_vfs_w_landed_is(struct cfs_vfs *v, const char *id, const char *rev)
{
	if (!__atomic_load_n(&v->w.landed_next, __ATOMIC_RELAXED))
		return 0;
	int is = 0;
	pthread_mutex_lock(&v->w.lock);
	for (unsigned i = 1; i <= CFS_VFS_LANDED && i <= v->w.landed_next && !is; i++) {
		unsigned k = (v->w.landed_next - i) % CFS_VFS_LANDED;
		is = strcmp(v->w.landed[k].id, id) == 0 && strcmp(v->w.landed[k].rev, rev) == 0;
	}
	pthread_mutex_unlock(&v->w.lock);
	return is;
}

int cfs_vfs_w_fix_landed(struct cfs_vfs *v, struct cfs_node *n)
{
	if (!__atomic_load_n(&v->w.landed_next, __ATOMIC_RELAXED))
		return 0;
	int fixed = 0;
	pthread_mutex_lock(&v->w.lock);
	for (unsigned i = 1; i <= CFS_VFS_LANDED && i <= v->w.landed_next; i++) {
		unsigned k = (v->w.landed_next - i) % CFS_VFS_LANDED; /* newest first */
		if (strcmp(v->w.landed[k].id, n->id) != 0)
			continue;
		if (!cfs_vfs_w_find(v, n->ino) && strcmp(v->w.landed[k].rev, n->rev) != 0 &&
		    !cfs_vfs_node_set_rev(v, n, v->w.landed[k].rev, 1)) {
			n->size = v->w.landed[k].size;
			if (v->w.landed[k].mtime_ns)
				n->mtime_ns = v->w.landed[k].mtime_ns;
			cfs_node_set_sums(n, "", "");
			n->opened_rev = 0;
			fixed = 1;
		}
		break;
	}
	pthread_mutex_unlock(&v->w.lock);
	return fixed;
}

/* A conflict copy or a resurrected file is a new item in its folder: the
 * folder is listed again, and the local node forgets its staged state. */
static void expire_parent(struct cfs_vfs *v, uint64_t ino)
{
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	struct cfs_node *d = n ? cfs_inode_get(v->tab, n->parent) : NULL;
	if (d && d->dir)
		d->dir->listed_at_ms = cfs_vfs_now_ms() - v->dir_ttl_ms - 1;
	if (n) {
		n->stale = 1;
		n->opened_rev = 0;
	}
	cfs_inode_unlock(v->tab);
}

/* w lock held: the upload of w, still open here, went to a conflict copy
 * (another writer changed the file in Drive): w goes on as that copy, so
 * what its writers write next reaches the copy, never the other writer's
 * file; the name shows Drive's file again (a node of its own for the
 * copy).  Should any step fail, w is left out of the namespace as before
 * (closed later, not uploaded again) and the log says so. */
static void become_copy(struct cfs_vfs *v, struct cfs_wfile *w, const struct cfs_jent *j,
			const struct send *s)
{
	uint64_t ino;
	const char *ids[1] = { s->sent_id };
	int rc = cfs_staging_rename(v->w.stage, j->id, s->sent_id);
	if (!rc)
		rc = cfs_nsdb_inos(v->ns, ids, 1, &ino);
	cfs_journal_del(v->w.journal, j->id);
	if (rc) {
		CFS_ERROR("conflict: \"%s\" stays open but cannot go on as its copy (%s): what is "
			  "written to it from now on is not uploaded", s->sent_name, cfs_strerror(rc));
		w->unlinked = 1;
		return;
	}
	snprintf(w->j.id, sizeof(w->j.id), "%s", s->sent_id);
	snprintf(w->j.name, sizeof(w->j.name), "%s", s->sent_name);
	snprintf(w->j.parent, sizeof(w->j.parent), "%s", s->sent_parent);
	snprintf(w->j.sent_name, sizeof(w->j.sent_name), "%s", s->sent_name);
	snprintf(w->j.sent_parent, sizeof(w->j.sent_parent), "%s", s->sent_parent);
	snprintf(w->j.base_rev, sizeof(w->j.base_rev), "%s", s->rev);
	w->j.is_new = 0;
	w->j.replaces[0] = '\0';
	w->j.seq = 0;
	w->ino = ino;
	if (cfs_vfs_w_put(v, w, NULL))
		CFS_WARN("journal: cannot record %s", w->j.id);
}

/* w lock held: backoff jitter (xorshift64). */
static uint64_t w_rand(struct cfs_vfs *v)
{
	v->w.rnd ^= v->w.rnd << 13;
	v->w.rnd ^= v->w.rnd >> 7;
	v->w.rnd ^= v->w.rnd << 17;
	return v->w.rnd;
}

/* w lock held: the outcome of one attempt. */
static void finish(struct cfs_vfs *v, struct cfs_wfile *w, int rc, uint64_t gen,
		   const struct cfs_jent *j, int conflict, const struct send *s)
{
	int64_t now = cfs_vfs_w_now(v);
	w->sending = 0;
	w->attempts++;
	w->sent_bytes = 0;
	if (!rc) {
		if (gen > w->durable)
			w->durable = gen;
		cfs_vfs_snap_sent(w, j->size);
		if (conflict && !w->handles)
			w->durable = w->gen; /* ours is safe in the copy */
		cfs_upq_ok(&w->rq);
		w->urgent = w->gen > w->durable && w->urgent;
		if (!conflict && s->rev[0]) /* our own revision: the base of the next upload */
			snprintf(w->j.base_rev, sizeof(w->j.base_rev), "%s", s->rev);
		if (w->j.is_new) { /* Drive lists it now, the overlay no more */
			cfs_vfs_w_edited(v, w->j.parent);
			cfs_vfs_w_edited(v, s->sent_parent);
		}
		w->j.is_new = 0;
		w->j.uri[0] = '\0';
		w->j.confirmed = 0;
		/* Drive's name and folder for it now: a rename after after_upload
		 * looked is left to fix (pick) */
		snprintf(w->j.sent_name, sizeof(w->j.sent_name), "%s", s->sent_name);
		snprintf(w->j.sent_parent, sizeof(w->j.sent_parent), "%s", s->sent_parent);
		if (conflict) {
			/* the name shows Drive's file again; ours is the copy */
			snprintf(w->j.id, sizeof(w->j.id), "%s", j->id);
			v->w.st.conflicts++;
		}
		v->w.st.done++;
		v->w.st.bytes += (uint64_t)j->size;
		if (!conflict && (w->j.removed || (w->gen <= w->durable && !cfs_wfile_settled(w)))) {
			/* removed meanwhile (the tombstone is next), or what it
			 * replaces or its name still to fix (bury): kept */
			cfs_vfs_w_put(v, w, NULL);
		} else if ((w->gen == w->durable && w->handles == 0) || conflict) {
			if (conflict && w->handles) {
				become_copy(v, w, j, s);
			} else {
				cfs_vfs_w_drop(v, w);
			}
		} else if (cfs_vfs_w_put(v, w, NULL)) {
			CFS_WARN("journal: cannot record that %s is uploaded", w->j.id);
		}
		pthread_cond_broadcast(&v->w.cond);
		return;
	}
	if (rc == -ESTALE && (w->gen != gen || w->writing)) {
		/* the staged bytes changed under the upload, or a write was in
		 * progress (read_staged): not a failure, the newer version goes
		 * next */
		CFS_DEBUG("upload of %s: superseded by a newer version", j->name);
		pthread_cond_broadcast(&v->w.cond);
		return;
	}
	enum cfs_upq_class c = cfs_upq_fail(&w->rq, rc, now, w_rand(v));
	if (c == CFS_UPQ_FULL)
		v->w.quota_full_until_ms = w->rq.due_ms;
	if (c == CFS_UPQ_PROTO) { /* the bytes Drive holds are not ours: from the start */
		w->j.uri[0] = '\0';
		w->j.confirmed = 0;
	}
	v->w.st.retries++;
	v->w.st.last_error = rc;
	char next[64];
	if (cfs_upq_stopped(&w->rq))
		snprintf(next, sizeof(next), "not retried until it changes or `colabfs sync` asks");
	else
		snprintf(next, sizeof(next), "retried in %" PRId64 " s",
			 (w->rq.due_ms - now + 999) / 1000);
	CFS_ERROR("upload of %s (%" PRId64 " bytes) failed: %s; kept staged, %s", j->name,
		  j->size, c == CFS_UPQ_FULL ? "Drive's storage is full" : cfs_strerror(rc), next);
	pthread_cond_broadcast(&v->w.cond);
}

/* w lock held (dropped meanwhile): a tombstone's item out of Drive, then
 * the entry goes. */
static void bury(struct cfs_vfs *v, struct cfs_wfile *w)
{
	char id[CFS_ID_MAX], gone[CFS_ID_MAX], name[CFS_JOURNAL_NAME_MAX], parent[CFS_ID_MAX],
		from[CFS_ID_MAX];
	int tomb = w->j.removed;
	snprintf(id, sizeof(id), "%s", w->j.id);
	snprintf(gone, sizeof(gone), "%s", tomb ? w->j.id : w->j.replaces);
	char rep_name[CFS_JOURNAL_NAME_MAX], rep_parent[CFS_ID_MAX];
	snprintf(rep_name, sizeof(rep_name), "%s", w->j.rep_name[0] ? w->j.rep_name : w->j.name);
	snprintf(rep_parent, sizeof(rep_parent), "%s",
		 w->j.rep_parent[0] ? w->j.rep_parent : w->j.parent);
	snprintf(name, sizeof(name), "%s", w->j.name);
	snprintf(parent, sizeof(parent), "%s", w->j.parent);
	snprintf(from, sizeof(from), "%s", w->j.sent_parent);
	char sent_name[CFS_JOURNAL_NAME_MAX];
	snprintf(sent_name, sizeof(sent_name), "%s", w->j.sent_name);
	int rename = !tomb && w->j.sent_name[0] &&
		     (strcmp(name, w->j.sent_name) != 0 || strcmp(parent, from) != 0);
	w->sending = w->gen ? w->gen : 1;
	pthread_mutex_unlock(&v->w.lock);
	CFS_DEBUG("%s %s (%s)", tomb ? "tombstone of" : "metadata left to fix for", id, name);
	int rc = !gone[0] ? 0
		 : tomb  ? remove_checked(v, gone, parent, from, NULL, "")
			 : remove_checked(v, gone, rep_parent, parent, rep_name, sent_name);
	if (!rc && rename) {
		int moved = strcmp(parent, from) != 0;
		cfs_vfs_w_mine(v, id);
		rc = v->w.d.update_meta(v->w.d.arg, id, name, moved ? parent : NULL,
					   moved && from[0] ? from : NULL, -1, 0, NULL);
	}
	pthread_mutex_lock(&v->w.lock);
	w->sending = 0;
	if (rc) {
		int64_t now = cfs_vfs_w_now(v);
		cfs_upq_fail(&w->rq, rc, now, w_rand(v));
		if (cfs_upq_stopped(&w->rq)) /* a metadata call Drive refuses: tried again later */
			w->rq.due_ms = now + cfs_upq_backoff_ms(CFS_UPQ_PERM, w->rq.failures, 0);
		return;
	}
	cfs_upq_ok(&w->rq);
	if (tomb) {
		w->j.removed = 0;
		cfs_journal_del(v->w.journal, id);
		if (w->handles == 0)
			cfs_vfs_w_drop(v, w);
		pthread_cond_broadcast(&v->w.cond);
		return;
	}
	if (strcmp(w->j.replaces, gone) == 0)
		w->j.replaces[0] = '\0';
	if (rename) {
		snprintf(w->j.sent_name, sizeof(w->j.sent_name), "%s", name);
		snprintf(w->j.sent_parent, sizeof(w->j.sent_parent), "%s", parent);
	}
	if (w->handles == 0 && cfs_wfile_settled(w))
		cfs_vfs_w_drop(v, w);
	else
		cfs_vfs_w_put(v, w, NULL);
	pthread_cond_broadcast(&v->w.cond);
}

static void *uploader(void *arg)
{
	struct cfs_vfs *v = arg;
	pthread_mutex_lock(&v->w.lock);
	while (!v->w.stop) {
		long wait_ms;
		struct cfs_wfile *w = pick(v, cfs_vfs_w_now(v), &wait_ms);
		if (!w) {
			cfs_vfs_wait_ms(&v->w.cond, &v->w.lock, wait_ms < 1000 ? wait_ms : 999);
			continue;
		}
		if ((w->unlinked && w->j.removed) || (!w->j.is_new && w->gen <= w->durable)) {
			bury(v, w); /* picked for a tombstone or a leftover replaces */
			continue;
		}
		struct send s = { .v = v, .w = w, .gen = w->gen, .fd = -1 };
		struct cfs_jent *j = malloc(sizeof(*j));
		s.snap = j && cfs_vfs_snap_due(v, w, cfs_vfs_w_now(v), &(int64_t){ 0 });
		if (s.snap) {
			int rc = cfs_vfs_snap_take(v, w, j, &s.fd);
			if (rc) { /* tried again after a backoff step, urgent or not */
				cfs_upq_fail(&w->rq, rc, cfs_vfs_w_now(v), w_rand(v));
				free(j);
				continue;
			}
			s.gen = w->sending;
			if (w->drive_unknown) { /* taken up after a restart */
				pthread_mutex_unlock(&v->w.lock);
				int ok = cfs_vfs_snap_check(v, j, s.fd, j->size);
				pthread_mutex_lock(&v->w.lock);
				if (ok != 1) {
					cfs_vfs_snap_abandon(v, w);
					if (ok == 0) /* known now: not a prefix, so
						      * rw_drive keeps it for the close */
						w->drive_unknown = 0;
					else
						cfs_upq_fail(&w->rq, ok, cfs_vfs_w_now(v), w_rand(v));
					close(s.fd);
					free(j);
					continue;
				}
			}
		} else if (j && (s.fd = dup(w->fd)) >= 0) {
			*j = w->j;
			w->sending = s.gen;
		}
		if (s.fd >= 0)
			cfs_vfs_snap_sending(w);
		if (s.fd < 0) {
			free(j);
			cfs_vfs_wait_ms(&v->w.cond, &v->w.lock, 999);
			continue;
		}
		pthread_mutex_unlock(&v->w.lock);
		struct cfs_file_meta out;
		char sent_id[CFS_ID_MAX] = "";
		int conflict = SAME;
		memset(&out, 0, sizeof(out));
		int rc = fdatasync(s.fd) ? -errno : 0;
		if (!rc) /* its entry durable too: a replay never sends bytes a crash lost */
			rc = cfs_journal_sync(v->w.journal, j->id);
		cfs_vfs_w_mine(v, j->id);
		/* its folder's listing changes in Drive (a new file, one replaced,
		 * or a new revision): a stored one must not outlive this */
		cfs_vfs_w_forget_listing(v, j->parent);
		if (!rc)
			rc = send_one(&s, j, &conflict, sent_id, &out);
		snprintf(s.sent_id, sizeof(s.sent_id), "%s", sent_id);
		if (rc == SKIPPED) {
			close(s.fd);
			pthread_mutex_lock(&v->w.lock);
			if (s.snap)
				cfs_vfs_snap_done(v, w, rc, 0);
			w->sending = 0;
			if (w->handles == 0 && !w->j.removed)
				cfs_vfs_w_drop(v, w);
			pthread_cond_broadcast(&v->w.cond);
			free(j);
			continue;
		}
		if (conflict)
			cfs_vfs_w_mine(v, sent_id);
		if (!rc) {
			after_upload(v, &s, j, conflict, sent_id, &out);
			/* again: a listing fetched and stored while the upload ran
			 * names the old revision */
			cfs_vfs_w_forget_listing(v, j->parent);
			if (strcmp(s.sent_parent, j->parent) != 0)
				cfs_vfs_w_forget_listing(v, s.sent_parent);
		}
		if (!rc && conflict)
			expire_parent(v, w->ino);
		cfs_file_meta_cleanup(&out);
		close(s.fd);
		pthread_mutex_lock(&v->w.lock);
		if (s.snap) /* first: finish journals the file's own row again */
			cfs_vfs_snap_done(v, w, rc, conflict);
		finish(v, w, rc, s.gen, j, conflict, &s);
		free(j);
	}
	pthread_mutex_unlock(&v->w.lock);
	return NULL;
}

int cfs_vfs_start_uploads(struct cfs_vfs *v)
{
	if (!v->w.enabled || v->w.started)
		return 0;
	for (int i = 0; i < v->w.nthreads; i++) {
		if (pthread_create(&v->w.threads[i], NULL, uploader, v)) {
			v->w.nthreads = i;
			break;
		}
	}
	pthread_mutex_lock(&v->w.lock);
	v->w.started = v->w.nthreads > 0;
	pthread_mutex_unlock(&v->w.lock);
	return v->w.started ? 0 : -EAGAIN;
}

void cfs_vfs_w_kick(struct cfs_vfs *v)
{
	pthread_mutex_lock(&v->w.lock);
	pthread_cond_broadcast(&v->w.cond);
	pthread_mutex_unlock(&v->w.lock);
}

int cfs_vfs_w_idle(struct cfs_vfs *v)
{
	long wait_ms;
	pthread_mutex_lock(&v->w.lock);
	int idle = pick(v, cfs_vfs_w_now(v), &wait_ms) == NULL;
	for (struct cfs_wfile *w = v->w.files; w && idle; w = w->next)
		idle = !w->sending;
	pthread_mutex_unlock(&v->w.lock);
	return idle;
}

void cfs_vfs_w_stop(struct cfs_vfs *v)
{
	if (!v->w.ready)
		return;
	pthread_mutex_lock(&v->w.lock);
	v->w.stop = 1;
	int started = v->w.started;
	size_t left = 0;
	for (struct cfs_wfile *w = v->w.files; w; w = w->next)
		left += !w->unlinked && w->gen > w->durable;
	pthread_cond_broadcast(&v->w.cond);
	pthread_mutex_unlock(&v->w.lock);
	for (int i = 0; started && i < v->w.nthreads; i++)
		pthread_join(v->w.threads[i], NULL);
	if (left)
		CFS_WARN("%zu files are not in Drive yet: they stay staged and journaled, and the "
			 "next mount of this cache folder uploads them", left);
}

void cfs_vfs_w_cleanup(struct cfs_vfs *v)
{
	if (!v->w.ready)
		return;
	while (v->w.files) {
		struct cfs_wfile *w = v->w.files;
		v->w.files = w->next;
		if (w->snap)
			close(w->snap->fd);
		free(w->snap);
		close(w->fd);
		free(w);
	}
	free(v->w.ids);
	pthread_mutex_destroy(&v->w.lock);
	pthread_cond_destroy(&v->w.cond);
}

/* ---- the journal's replay ---------------------------------------------- */

/* Whether a Drive id is one (the client's own rule: [A-Za-z0-9_-]). */
static int id_ok(const char *id)
{
	if (!id[0])
		return 0;
	for (; *id; id++)
		if (!((*id >= 'a' && *id <= 'z') || (*id >= 'A' && *id <= 'Z') ||
		      (*id >= '0' && *id <= '9') || *id == '_' || *id == '-'))
			return 0;
	return 1;
}

/* Replay trusts nothing it reads: an entry that does not hang together is
 * set aside (its row and bytes kept under the journal's care no more: the
 * staged file stays, named in the log); a stored session URI that is not
 * under this mount's API URL is forgotten (a new session starts: the
 * token never goes to another host). */
static int replay_sane(struct cfs_vfs *v, struct cfs_jent *e)
{
	const char *why = NULL;
	if (!id_ok(e->id) || !id_ok(e->parent))
		why = "its ids are malformed";
	else if (e->replaces[0] && (!id_ok(e->replaces) || strcmp(e->replaces, e->id) == 0 ||
				    strcmp(e->replaces, e->parent) == 0))
		why = "what it replaces is not another file";
	else if (e->removed && !e->is_new)
		why = "a tombstone of a file that was not new";
	else if (!e->name[0] || strchr(e->name, '/'))
		why = "its name is malformed";
	if (why) {
		CFS_ERROR("journal: an entry (%.40s) is not replayed: %s; its staged bytes stay in "
			  "the staging folder", e->id, why);
		return 0;
	}
	if (e->uri[0] && !v->w.d.session_ok(v->w.d.arg, e->uri)) {
		CFS_WARN("journal: the upload session of \"%s\" is not under this mount's API URL "
			 "(a journal of another endpoint?): a new session starts", e->name);
		explicit_bzero(e->uri, sizeof(e->uri));
		e->confirmed = 0;
	}
	return 1;
}

int cfs_vfs_w_resume(struct cfs_vfs *v, int fresh_mount, const char *owner)
{
	if (fresh_mount && cfs_journal_clear_done(v->w.journal))
		CFS_WARN("journal: cannot drop the answers of the last mount's requests");
	int same = 1;
	size_t moved = 0;
	if (owner && cfs_journal_owner(v->w.journal, owner, &same) == 0 && !same) {
		/* a session URI, a file id, a folder of another Drive: none of it
		 * means anything here, and the token must not go there */
		int rc = cfs_journal_set_aside(v->w.journal, owner, &moved);
		CFS_ERROR("journal: the write journal in %s was written for another Drive API "
			  "endpoint than %s: its %zu entries are set aside (not replayed; their staged "
			  "files stay there)%s", cfs_staging_dir(v->w.stage), owner, moved,
			  rc ? "; setting them aside failed, the mount goes on without them" : "");
		if (rc)
			return 0;
	}
	struct cfs_jent *e = NULL;
	size_t n = 0, damaged = 0, resumed = 0;
	int64_t bytes = 0;
	int rc = cfs_journal_load(v->w.journal, &e, &n, &damaged);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		int fd;
		uint64_t ino;
		const char *ids[1] = { e[i].id };
		if (!replay_sane(v, &e[i]))
			continue;
		cfs_vfs_snap_replay(v, &e[i], fresh_mount);
		if (e[i].state == CFS_JSTATE_CLEAN && !e[i].removed) {
			/* opened for writing, never changed: Drive has these bytes */
			cfs_staging_remove(v->w.stage, e[i].id);
			cfs_journal_del(v->w.journal, e[i].id);
			continue;
		}
		rc = cfs_staging_file(v->w.stage, e[i].id, e[i].removed, 0, &fd); /* a tombstone needs no bytes */
		if (rc) {
			CFS_ERROR("journal: the staged copy of \"%s\" (%s) is missing (%s); its entry "
				  "is dropped", e[i].name, e[i].id, cfs_strerror(rc));
			cfs_journal_del(v->w.journal, e[i].id);
			continue;
		}
		struct stat st;
		struct cfs_wfile *w = calloc(1, sizeof(*w));
		if (!w || fstat(fd, &st) || cfs_nsdb_inos(v->ns, ids, 1, &ino)) {
			free(w);
			close(fd);
			CFS_ERROR("journal: cannot take up \"%s\" (%s)", e[i].name, e[i].id);
			continue;
		}
		w->j = e[i];
		w->j.size = st.st_size; /* the staged bytes are the truth */
		w->unlinked = w->j.removed;
		w->fd = fd;
		/* what Drive has is not known here: no upload while open before
		 * one of its own (a new file's Drive has nothing) */
		w->drive_size = w->j.is_new ? 0 : INT64_MAX;
		w->lo_drive = 0;
		w->lo_take = INT64_MAX;
		w->rw_drive = 1;
		w->drive_unknown = 1; /* still open: the first snapshot asks Drive */
		w->ino = ino;
		w->gen = w->journaled = 1;
		if (w->j.state == CFS_JSTATE_TORN ||
		    (w->j.state == CFS_JSTATE_WRITING && fresh_mount && !w->unlinked)) {
			/* half-written bytes never go over Drive's file */
			w->torn = 1;
			CFS_ERROR("journal: \"%s\" (%s) %s; Drive keeps its file and the bytes stay "
				  "staged; not uploaded until it is written again from the start",
				  w->j.name, w->j.id,
				  w->j.state == CFS_JSTATE_TORN ? "had a write fail"
								: "was being written when colabfs stopped");
		}
		/* a handle still open for writing is rebuilt by its next request:
		 * give it that long before uploading what may still grow */
		w->due_ms = cfs_vfs_w_now(v) + (v->w.delay_ms > 2000 ? v->w.delay_ms : 2000);
		w->next = v->w.files;
		v->w.files = w;
		__atomic_add_fetch(&v->w.nfiles, 1, __ATOMIC_RELAXED);
		resumed++;
		bytes += st.st_size;
	}
	free(e);
	if (resumed || damaged)
		CFS_INFO("journal: %zu uploads to finish (%" PRId64 " bytes)%s", resumed, bytes,
			 damaged ? "; damaged entries were skipped" : "");
	return 0;
}

/* ---- colabfs sync and stats ------------------------------------------------- */

/* Table lock held: whether ino is at or below top, and its path from the
 * mount's root into b. */
static int node_path(struct cfs_vfs *v, uint64_t ino, uint64_t top, struct cfs_buf *b)
{
	const char *parts[MAX_DEPTH];
	int depth = 0, below = ino == top || top == CFS_ROOT_INO;
	for (uint64_t at = ino; at != CFS_ROOT_INO && depth < MAX_DEPTH;) {
		struct cfs_node *n = cfs_inode_get(v->tab, at), *d;
		if (!n || !(d = cfs_inode_get(v->tab, n->parent))) {
			/* not in the table yet (a new server): where it is is unknown,
			 * so it counts as below (a sync waits for it) */
			below = 1;
			break;
		}
		long k = cfs_vfs_listed_at(d, n);
		parts[depth++] = k >= 0 ? d->dir->listing->e[k].name : "?";
		at = n->parent;
		below |= at == top;
	}
	for (int i = depth - 1; i >= 0; i--) {
		if (cfs_buf_append(b, parts[i], strlen(parts[i])) ||
		    (i && cfs_buf_append(b, "/", 1)))
			return -ENOMEM;
	}
	return below;
}

static const char *torn_why(const struct cfs_wfile *w)
{
	return w->j.state == CFS_JSTATE_WRITING
		? "it was being written when colabfs stopped: its bytes may be incomplete, so "
		  "Drive keeps the old file; not uploaded until written again from the start"
		: "a write failed (the staging disk was full): Drive keeps the old file; not "
		  "uploaded until written again from the start";
}

static const char *why(int err)
{
	switch (err) {
	case -ENOSPC: return "Drive storage quota exceeded; the bytes stay staged and are retried";
	case -EACCES: return "no permission to write this in Drive";
	case -EFBIG: return "Drive refuses a file this large";
	default: return cfs_strerror(err);
	}
}

int cfs_vfs_sync_json(struct cfs_vfs *v, uint64_t ino, struct cfs_buf *out)
{
	struct cfs_json_sync st;
	struct cfs_buf path = { 0 };
	memset(&st, 0, sizeof(st));
	int rc = 0;
	int64_t now = cfs_vfs_w_now(v);
	cfs_inode_lock(v->tab);
	pthread_mutex_lock(&v->w.lock);
	for (struct cfs_wfile *w = v->w.files; !rc && w; w = w->next) {
		if (w->unlinked)
			continue;
		cfs_buf_reset(&path);
		int below = node_path(v, w->ino, ino, &path);
		if (below < 0)
			rc = below;
		if (below <= 0 || !cfs_vfs_snap_sync_pending(v, w, now))
			continue;
		w->urgent = 1;
		if (!w->torn && cfs_upq_ask(&w->rq, now))
			pthread_cond_broadcast(&v->w.cond); /* the user asks: once, now */
		int needs_user = w->torn || (cfs_wfile_needs_user(w) && w->rq.due_ms > now);
		st.files++;
		st.bytes += w->j.size;
		st.bytes_left += w->j.size - (w->sending ? w->sent_bytes : 0);
		st.uploading += w->sending != 0;
		int *k = needs_user ? &st.n_failed : &st.n_waiting;
		struct cfs_json_sync_entry *e = needs_user ? st.failed : st.waiting;
		if ((!w->rq.err && !w->torn) || w->sending || *k >= CFS_SYNC_LIST_MAX)
			continue;
		if (cfs_buf_append(&path, "", 1) || !(e[*k].path = strdup(path.len > 1 ? path.data
											 : w->j.name)) ||
		    !(e[*k].error = strdup(w->torn ? torn_why(w) : why(w->rq.err))))
			rc = -ENOMEM;
		(*k)++;
	}
	pthread_cond_broadcast(&v->w.cond);
	pthread_mutex_unlock(&v->w.lock);
	cfs_inode_unlock(v->tab);
	char *txt = NULL;
	if (!rc)
		rc = cfs_json_write_sync(&st, CFS_SYNC_REPLY_MAX, &txt);
	if (!rc)
		rc = cfs_buf_append(out, txt, strlen(txt));
	free(txt);
	cfs_json_sync_cleanup(&st);
	cfs_buf_cleanup(&path);
	return rc;
}

void cfs_vfs_write_stats(struct cfs_vfs *v, struct cfs_vfs_write_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!v->w.ready)
		return;
	pthread_mutex_lock(&v->w.lock);
	*out = v->w.st;
	for (struct cfs_wfile *w = v->w.files; w; w = w->next) {
		if (w->unlinked)
			continue;
		out->staging_bytes += (uint64_t)w->j.size;
		if (w->gen <= w->durable)
			continue;
		out->pending++;
		out->pending_bytes += (uint64_t)w->j.size;
		out->bytes_left += (uint64_t)(w->j.size - (w->sending ? w->sent_bytes : 0));
		out->in_flight += w->sending != 0;
		out->failed += cfs_wfile_needs_user(w);
	}
	pthread_mutex_unlock(&v->w.lock);
}
