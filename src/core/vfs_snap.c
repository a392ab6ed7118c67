/* vfs_snap: uploads of files still open for writing (--upload-open-files;
 * see vfs_int.h).
 *
 * A log, a CSV of losses or a TensorBoard event file stays open for the
 * whole run; without this it reaches Drive only at close.  A file open for
 * writing and changed is uploaded at most every upload_open_ms (and at once
 * when `colabfs sync` asks), as a snapshot: a copy of its staged bytes
 * taken while no write is half done (writes and truncates wait for the
 * copy; a write in progress is waited for).  Only a file appended to since
 * Drive's version goes so (a log, new or not: Drive's bytes stay a prefix
 * of every snapshot): a file rewritten in place (a checkpoint saved over the
 * old one, a database's pages) is never sent half written, over Drive's good
 * copy or as a new file; it waits for its close or fsync.
 * A close with newer bytes stops a snapshot's upload (the close's upload
 * supersedes it).  The copy is the staging file
 * "ID.snap", kept while the file is open and brought up to date from the
 * lowest offset changed since (a log's copy costs its new tail).  The upload
 * reads the copy, so writes go on meanwhile; it counts as this mount's own
 * revision (the next one is based on it, never a conflict with ourselves).
 * While it runs the journal's row describes the copy (SNAPSHOT): a fresh
 * mount after a crash uploads it, complete as of then, and keeps the bytes
 * written after it aside ("ID.unsent" in the staging folder, logged), never
 * over Drive's file.  The close uploads the final bytes as always. */
#include "vfs_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "staging.h"

#define SNAP_SUFFIX ".snap"
#define UNSENT_SUFFIX ".unsent"
/* `colabfs sync` asks every 200 ms: a longer gap is a new sync */
#define SYNC_ASK_GAP_MS 2000

static void name_of(const char *id, const char *suffix, char out[CFS_ID_MAX + 16])
{
	snprintf(out, CFS_ID_MAX + 16, "%s%s", id, suffix);
}

void cfs_vfs_snap_wait(struct cfs_vfs *v, struct cfs_wfile *w)
{
	while (w->snapping)
		pthread_cond_wait(&v->w.cond, &v->w.lock);
}

void cfs_vfs_snap_changed(struct cfs_wfile *w, int64_t off)
{
	if (off < 0)
		off = 0;
	if (w->snap && off < w->snap->dirty_lo)
		w->snap->dirty_lo = off;
	if (off < w->lo_drive)
		w->lo_drive = off;
	if (off < w->lo_take)
		w->lo_take = off;
	if (off < w->j.size) /* not an append */
		w->rw_drive = w->rw_take = 1;
}

void cfs_vfs_snap_sending(struct cfs_wfile *w)
{
	w->lo_take = INT64_MAX;
	w->rw_take = 0;
}

void cfs_vfs_snap_sent(struct cfs_wfile *w, int64_t size)
{
	w->lo_drive = w->lo_take;
	w->rw_drive = w->rw_take;
	w->drive_size = size;
	w->drive_unknown = 0; /* Drive holds what this upload sent */
}

int cfs_vfs_snap_check(struct cfs_vfs *v, const struct cfs_jent *j, int fd, int64_t size)
{
	struct cfs_file_meta m;
	int rc = v->w.d.get(v->w.d.arg, j->id, &m);
	if (rc == -ENOENT) /* a new file no upload reached: Drive has nothing */
		return j->is_new ? 1 : 0;
	if (rc)
		return rc;
	int ok = !m.trashed && m.size >= 0 && m.size <= size && m.md5[0];
	int64_t len = m.size;
	char hex[33];
	ok = ok && cfs_vfs_staged_md5(fd, len, hex) == 0 && strcmp(hex, m.md5) == 0;
	cfs_file_meta_cleanup(&m);
	CFS_INFO("\"%s\" held open across a restart: Drive's %" PRId64 " bytes %s; %s", j->name,
		 len, ok ? "are the start of its bytes" : "are not the start of its bytes",
		 ok ? "uploaded while open again" : "uploaded at its close");
	return ok;
}

void cfs_vfs_snap_abandon(struct cfs_vfs *v, struct cfs_wfile *w)
{
	struct cfs_wsnap *s = w->snap;
	if (s) {
		s->sending = 0;
		s->valid = 0; /* the row must not name it: a crash would send it */
		s->uri[0] = '\0';
	}
	w->sending = 0;
	if (!w->unlinked && cfs_vfs_w_put(v, w, NULL))
		CFS_WARN("journal: cannot record that %s's snapshot is not sent", w->j.id);
	pthread_cond_broadcast(&v->w.cond);
}

/* Held open for writing: only a snapshot of its bytes may go while it stays
 * open.  Written since the last close (WRITING), or closed by one descriptor
 * while another stays open (CLOSED with writers): a process that forks or runs
 * a command closes its inherited descriptors at the child's exit or exec, and
 * each such close() is a FLUSH of the same open file, while the writer goes
 * on.  Such a file is still uploaded at the interval, never only at the last
 * close. */
static int being_written(const struct cfs_wfile *w)
{
	return w->writers &&
	       (w->j.state == CFS_JSTATE_WRITING || w->j.state == CFS_JSTATE_CLOSED) &&
	       !w->torn && !w->unlinked;
}

int cfs_vfs_snap_due(struct cfs_vfs *v, struct cfs_wfile *w, int64_t now, int64_t *next)
{
	if (!v->w.open_ms || !being_written(w) || w->sending || w->gen <= w->durable)
		return 0;
	/* a rewrite in place (a checkpoint saved over the old one, a database's
	 * pages) is not complete before its close: Drive keeps the old bytes
	 * until then.  Only a file appended to since Drive's version (a log,
	 * new or not) goes while open. */
	if ((w->lo_drive < w->drive_size || w->rw_drive) && !w->drive_unknown)
		return 0;
	if (!cfs_upq_may(&w->rq, now, next))
		return 0;
	if (w->snap_asked || (w->open_due_ms && w->open_due_ms <= now))
		return 1;
	if (w->open_due_ms && w->open_due_ms < *next)
		*next = w->open_due_ms;
	return 0;
}

int cfs_vfs_w_put(struct cfs_vfs *v, struct cfs_wfile *w, const struct cfs_jent *e)
{
	struct cfs_jent row = e ? *e : w->j;
	struct cfs_wsnap *s = w->snap;
	if (s && s->valid && s->gen > w->durable && row.state == CFS_JSTATE_WRITING &&
	    !row.removed) { /* row_is_snapshot, for the row about to be */
		row.state = CFS_JSTATE_SNAPSHOT;
		row.size = s->size;
		row.mtime_ns = s->mtime_ns;
		row.gen = s->gen;
		row.confirmed = s->confirmed;
		memcpy(row.uri, s->uri, sizeof(row.uri));
	}
	int rc = cfs_journal_put(v->w.journal, &row);
	if (!rc)
		w->j.seq = row.seq;
	return rc;
}

/* w lock held: the snapshot's copy made current (dropping the lock). */
static int copy(struct cfs_vfs *v, struct cfs_wfile *w, struct cfs_wsnap *s)
{
	w->snapping = 1;
	while (w->writing)
		pthread_cond_wait(&v->w.cond, &v->w.lock);
	if (s->valid) { /* the row must not name a copy being rewritten */
		s->valid = 0;
		int rc = cfs_vfs_w_put(v, w, NULL);
		if (rc) {
			s->valid = 1;
			w->snapping = 0;
			pthread_cond_broadcast(&v->w.cond);
			return rc;
		}
	}
	int64_t lo = s->dirty_lo, size = w->j.size;
	s->dirty_lo = INT64_MAX;
	s->gen = w->gen;
	s->size = size;
	s->mtime_ns = w->j.mtime_ns;
	s->taken_ms = cfs_vfs_w_now(v);
	int fd = w->fd, to = s->fd;
	pthread_mutex_unlock(&v->w.lock);
	int rc = ftruncate(to, (off_t)size) ? -errno : 0;
	if (!rc && lo < size)
		rc = cfs_staging_copy(fd, to, lo, size - lo);
	pthread_mutex_lock(&v->w.lock);
	w->snapping = 0;
	if (rc) {
		s->gen = 0;
		s->dirty_lo = 0; /* what the copy holds is unknown: all of it next time */
	}
	s->valid = !rc;
	pthread_cond_broadcast(&v->w.cond);
	return rc;
}

int cfs_vfs_snap_take(struct cfs_vfs *v, struct cfs_wfile *w, struct cfs_jent *j, int *fd)
{
	*fd = -1;
	struct cfs_wsnap *s = w->snap;
	if (!s) {
		char name[CFS_ID_MAX + 16];
		name_of(w->j.id, SNAP_SUFFIX, name);
		if (!(s = calloc(1, sizeof(*s))))
			return -ENOMEM;
		int rc = cfs_staging_file(v->w.stage, name, 1, 1, &s->fd);
		if (rc) {
			free(s);
			return rc;
		}
		w->snap = s;
	}
	w->sending = w->gen; /* no other uploader takes it meanwhile */
	w->open_due_ms = 0;  /* the next change schedules the next one */
	w->snap_asked = 0;
	int rc = copy(v, w, s);
	if (!rc && w->unlinked)
		rc = -ENOENT; /* removed meanwhile: its tombstone goes instead */
	if (!rc) {
		s->uri[0] = '\0';
		s->confirmed = 0;
		if ((rc = cfs_vfs_w_put(v, w, NULL)) != 0) /* the SNAPSHOT row */
			s->valid = 0;
	}
	if (!rc && (*fd = dup(s->fd)) < 0)
		rc = -errno;
	if (!rc)
		s->sending = 1;
	if (rc) {
		w->sending = 0;
		CFS_WARN("upload of \"%s\" while open: no snapshot of it (%s); tried again later",
			 w->j.name, cfs_strerror(rc));
		if (v->w.open_ms)
			w->open_due_ms = cfs_vfs_w_now(v) + v->w.open_ms;
		pthread_cond_broadcast(&v->w.cond);
		return rc;
	}
	*j = w->j;
	j->size = s->size;
	j->mtime_ns = s->mtime_ns;
	j->state = CFS_JSTATE_SNAPSHOT;
	j->uri[0] = '\0';
	j->confirmed = 0;
	w->sending = s->gen;
	CFS_DEBUG("upload of %s while open: a snapshot of %" PRId64 " bytes", w->j.id, s->size);
	return 0;
}

void cfs_vfs_snap_progress(struct cfs_vfs *v, struct cfs_wfile *w, const char *uri,
			   int64_t confirmed)
{
	struct cfs_wsnap *s = w->snap;
	if (!s || !s->sending || strlen(uri) >= sizeof(s->uri))
		return;
	snprintf(s->uri, sizeof(s->uri), "%s", uri);
	s->confirmed = confirmed;
	if (!w->unlinked && cfs_vfs_w_put(v, w, NULL))
		CFS_WARN("journal: cannot record the upload session of %s", w->j.id);
}

void cfs_vfs_snap_done(struct cfs_vfs *v, struct cfs_wfile *w, int rc, int conflict)
{
	struct cfs_wsnap *s = w->snap;
	if (!s)
		return;
	s->sending = 0;
	s->uri[0] = '\0';
	if (!rc) {
		w->durable_ms = s->taken_ms;
		/* nothing written since: the staged bytes are Drive's (a crash now
		 * leaves nothing to upload, not a file that was being written) */
		if (w->gen == s->gen && w->j.state == CFS_JSTATE_WRITING)
			w->j.state = CFS_JSTATE_CLEAN;
		v->w.st.snapshots++;
		v->w.st.snapshot_bytes += (uint64_t)s->size;
	} else if (v->w.open_ms && !w->open_due_ms) {
		w->open_due_ms = cfs_vfs_w_now(v) + v->w.open_ms;
	}
	if (conflict || !w->writers)
		cfs_vfs_snap_free(v, w); /* a copy goes on under another id; or closed */
}

/* Whether the journal's row describes w's snapshot (cfs_vfs_w_put). */
static int row_is_snapshot(const struct cfs_wfile *w)
{
	const struct cfs_wsnap *s = w->snap;
	return s && s->valid && s->gen > w->durable && w->j.state == CFS_JSTATE_WRITING &&
	       !w->j.removed;
}

void cfs_vfs_snap_free(struct cfs_vfs *v, struct cfs_wfile *w)
{
	struct cfs_wsnap *s = w->snap;
	if (!s || s->sending)
		return;
	char name[CFS_ID_MAX + 16];
	name_of(w->j.id, SNAP_SUFFIX, name);
	close(s->fd);
	/* handles dropped unclosed (an unmount): the next mount uploads it */
	int rc = row_is_snapshot(w) && !w->unlinked ? 0 : cfs_staging_remove(v->w.stage, name);
	if (rc && rc != -ENOENT)
		CFS_WARN("staging: cannot remove the snapshot of %s: %s", w->j.id, cfs_strerror(rc));
	free(s);
	w->snap = NULL;
	w->open_due_ms = 0;
}

int cfs_vfs_snap_sync_pending(struct cfs_vfs *v, struct cfs_wfile *w, int64_t now)
{
	int64_t seen = w->ask_seen_ms;
	w->ask_seen_ms = now;
	if (w->gen <= w->durable) {
		w->ask_ms = 0; /* all of it in Drive */
		return 0;
	}
	if (!v->w.open_ms || !being_written(w))
		return 1; /* pending until uploaded, as every file */
	if (w->ask_ms && now - seen > SYNC_ASK_GAP_MS)
		w->ask_ms = 0; /* a sync that stopped asking: this is another one */
	if (w->ask_ms && w->durable_ms >= w->ask_ms) {
		w->ask_ms = 0; /* what it held when asked is in Drive */
		return 0;
	}
	if (!w->ask_ms)
		w->ask_ms = now;
	w->snap_asked = 1; /* a snapshot now, not at the interval */
	return 1;
}

void cfs_vfs_snap_replay(struct cfs_vfs *v, struct cfs_jent *e, int fresh_mount)
{
	char snap[CFS_ID_MAX + 16], unsent[CFS_ID_MAX + 16];
	name_of(e->id, SNAP_SUFFIX, snap);
	name_of(e->id, UNSENT_SUFFIX, unsent);
	if (e->state != CFS_JSTATE_SNAPSHOT) {
		cfs_staging_remove(v->w.stage, snap); /* a copy whose upload ended */
		return;
	}
	int fd = -1;
	struct stat st;
	int whole = fresh_mount && cfs_staging_file(v->w.stage, snap, 0, 0, &fd) == 0 &&
		    fstat(fd, &st) == 0 && st.st_size == e->size;
	if (fd >= 0)
		close(fd);
	if (!whole) {
		/* a restarted server: the writer goes on with the staged file, whose
		 * next snapshot is taken anew; or a copy that is not what its row
		 * says: the file was being written, as far as a replay knows */
		cfs_staging_remove(v->w.stage, snap);
		e->state = CFS_JSTATE_WRITING;
		explicit_bzero(e->uri, sizeof(e->uri));
		e->confirmed = 0;
		return;
	}
	int rc = cfs_staging_rename(v->w.stage, e->id, unsent);
	if (rc && rc != -ENOENT) {
		CFS_WARN("journal: cannot keep aside what \"%s\" had after its snapshot: %s; it "
			 "stays unsent", e->name, cfs_strerror(rc));
		e->state = CFS_JSTATE_WRITING;
		return;
	}
	if (!rc)
		CFS_ERROR("journal: \"%s\" (%s) was being written when colabfs stopped: its last "
			  "snapshot (%" PRId64 " bytes) is uploaded; the bytes written after it may be "
			  "incomplete and stay in %s/w-%s", e->name, e->id, e->size,
			  cfs_staging_dir(v->w.stage), unsent);
	int aside = !rc;
	if ((rc = cfs_staging_rename(v->w.stage, snap, e->id)) != 0) {
		CFS_ERROR("journal: cannot take up the snapshot of \"%s\": %s", e->name,
			  cfs_strerror(rc));
		if (aside)
			cfs_staging_rename(v->w.stage, unsent, e->id);
		e->state = CFS_JSTATE_WRITING;
		return;
	}
	e->state = CFS_JSTATE_CLOSED; /* complete as of the snapshot */
}
