/* Unit tests: files held open for writing are uploaded while open
 * (--upload-open-files, src/core/vfs_snap.c), over the fake Drive (wfake.h)
 * with its clock: the interval, consistent snapshots while writes go on,
 * the close's final upload, `colabfs sync` with a file open, and a server
 * that dies with a snapshot not yet in Drive. */
#include "wrig.h"

#include <pthread.h>

#define MIN_MS (60 * 1000)

static int held_one(struct rig *r, void *arg)
{
	(void)arg;
	return wfake_held(&r->fk) >= 1;
}

static int idle(struct rig *r, void *arg)
{
	(void)arg;
	return cfs_vfs_w_idle(r->v);
}

/* n uploads done, and the uploader idle after them. */
static int uploaded(struct rig *r, int n)
{
	int done = rig_wait_uploads(r, n);
	return rig_wait(r, idle, NULL) && done;
}

/* Appends line k ("line NNNN\n", 10 bytes) at its place. */
static void append_line(struct rig *r, uint64_t ino, uint64_t fh, int k, char *log)
{
	char b[24];
	snprintf(b, sizeof(b), "line %04d\n", k % 10000);
	CHECK_EQ(rig_write(r, ino, fh, 10 * k, b, 10), 0);
	memcpy(log + 10 * k, b, 10);
}

/* A mount uploading open files every minute, with train.log created and
 * its first 10 lines written (log: its bytes). */
static void log_rig(struct rig *r, char *log, uint64_t *ino, uint64_t *fh)
{
	rig_up(r, 0);
	r->open_ms = MIN_MS;
	rig_start(r, 1);
	CHECK_EQ(rig_open(r, "train.log", O_CREAT | O_WRONLY, ino, fh), 0);
	for (int k = 0; k < 10; k++)
		append_line(r, *ino, *fh, k, log);
}

/* The interval passes; Drive refuses the snapshot's upload (kept, retried). */
static void first_snapshot_fails(struct rig *r)
{
	wfake_fail(&r->fk, WF_UPLOAD, CFS_E_NET);
	rig_advance(r, MIN_MS + 1);
	CHECK(rig_wait_uploads(r, 1));
	CHECK(rig_wait(r, idle, NULL));
}

/* The interval passes; the snapshot's upload is held at its start, and
 * lines 10 to end-1 are written meanwhile (never blocked by the upload). */
static void snapshot_held(struct rig *r, uint64_t ino, uint64_t fh, char *log, int end)
{
	wfake_hold(&r->fk, 1);
	rig_advance(r, MIN_MS + 1);
	CHECK(rig_wait(r, held_one, NULL));
	for (int k = 10; k < end; k++)
		append_line(r, ino, fh, k, log);
}

static void test_log_reaches_drive_while_open(void)
{
	struct rig r;
	char log[10 * 100];
	uint64_t ino, fh;
	log_rig(&r, log, &ino, &fh);
	rig_advance(&r, MIN_MS - 1000);
	CHECK(rig_wait(&r, idle, NULL));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 0); /* not before the interval */
	rig_advance(&r, 2000);
	CHECK(uploaded(&r, 1));
	CHECK(rig_drive_has(&r, "ROOT", "train.log", log, 100));
	/* more lines: the next one an interval after the first change since */
	for (int k = 10; k < 20; k++)
		append_line(&r, ino, fh, k, log);
	rig_advance(&r, MIN_MS / 2);
	CHECK(rig_wait(&r, idle, NULL));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 1);
	rig_advance(&r, MIN_MS / 2 + 1000);
	CHECK(uploaded(&r, 2));
	CHECK(rig_drive_has(&r, "ROOT", "train.log", log, 200));
	/* nothing changed: nothing sent */
	rig_advance(&r, 3 * MIN_MS);
	CHECK(rig_wait(&r, idle, NULL));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 2);
	/* the close sends the final bytes; one file in Drive, no conflict */
	for (int k = 20; k < 25; k++)
		append_line(&r, ino, fh, k, log);
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK(rig_drive_has(&r, "ROOT", "train.log", log, 250));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 3);
	CHECK_EQ(rig_count_named(&r, "ROOT", "train"), 1);
	struct cfs_vfs_write_stats st = rig_stats(&r);
	CHECK_EQ(st.conflicts, 0);
	CHECK_EQ(st.snapshots, 2);
	CHECK_EQ(st.snapshot_bytes, 300);
	/* and no snapshot copy left in the staging folder */
	char p[300];
	snprintf(p, sizeof(p), "%s/w-%s.snap", r.staging, wfake_find(&r.fk, "ROOT", "train.log")->id);
	CHECK(access(p, F_OK) != 0);
	rig_down(&r);
}

static void test_off_means_at_close(void)
{
	struct rig r;
	rig_up(&r, 0);
	rig_start(&r, 1); /* open_ms 0 */
	char log[10 * 10];
	uint64_t ino, fh;
	CHECK_EQ(rig_open(&r, "train.log", O_CREAT | O_WRONLY, &ino, &fh), 0);
	for (int k = 0; k < 10; k++)
		append_line(&r, ino, fh, k, log);
	rig_advance(&r, 10 * MIN_MS);
	CHECK(rig_wait(&r, idle, NULL));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 0);
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK(rig_drive_has(&r, "ROOT", "train.log", log, 100));
	rig_down(&r);
}

/* Writes go on while a snapshot is being uploaded; the upload sends the
 * snapshot (not superseded), the next one the rest. */
static void test_writes_go_on_during_the_upload(void)
{
	struct rig r;
	char log[10 * 100];
	uint64_t ino, fh;
	log_rig(&r, log, &ino, &fh);
	snapshot_held(&r, ino, fh, log, 30);
	wfake_hold(&r.fk, 0);
	CHECK(uploaded(&r, 1));
	CHECK(rig_drive_has(&r, "ROOT", "train.log", log, 100)); /* the snapshot's bytes */
	CHECK_EQ(rig_stats(&r).snapshots, 1);
	rig_advance(&r, MIN_MS + 1);
	CHECK(uploaded(&r, 2));
	CHECK(rig_drive_has(&r, "ROOT", "train.log", log, 300));
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 2); /* nothing new at close */
	CHECK_EQ(rig_count_named(&r, "ROOT", "conflict"), 0);
	rig_down(&r);
}

/* `colabfs sync` with a file open and being written: done once a snapshot
 * taken after the ask is in Drive, without waiting for the interval. */
static void test_sync_with_a_file_open(void)
{
	struct rig r;
	rig_up(&r, 0);
	r.open_ms = 10 * MIN_MS;
	rig_start(&r, 1);
	char log[10 * 100];
	uint64_t ino, fh;
	CHECK_EQ(rig_open(&r, "events.log", O_CREAT | O_WRONLY, &ino, &fh), 0);
	for (int k = 0; k < 7; k++)
		append_line(&r, ino, fh, k, log);
	char *js = rig_sync_json(&r);
	CHECK(strstr(js, "\"files\":1") != NULL);
	free(js);
	CHECK(uploaded(&r, 1));
	CHECK(rig_drive_has(&r, "ROOT", "events.log", log, 70));
	js = rig_sync_json(&r);
	CHECK(strstr(js, "\"files\":0") != NULL);
	free(js);
	/* written again: pending again, until the next snapshot is in */
	append_line(&r, ino, fh, 7, log);
	js = rig_sync_json(&r);
	CHECK(strstr(js, "\"files\":1") != NULL);
	free(js);
	CHECK(uploaded(&r, 2));
	js = rig_sync_json(&r);
	CHECK(strstr(js, "\"files\":0") != NULL);
	free(js);
	CHECK(rig_drive_has(&r, "ROOT", "events.log", log, 80));
	/* nothing asked, nothing due: no upload in a loop */
	rig_advance(&r, 1000);
	CHECK(rig_wait(&r, idle, NULL));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 2);
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK_EQ(rig_count_named(&r, "ROOT", "conflict"), 0);
	rig_down(&r);
}

/* A snapshot Drive refused: kept (its row says SNAPSHOT); the server dies
 * with more bytes written; a fresh mount uploads the snapshot and keeps
 * the bytes written after it aside, never uploading them. */
static void test_fresh_mount_uploads_the_snapshot(void)
{
	struct rig r;
	char log[10 * 100];
	uint64_t ino, fh;
	log_rig(&r, log, &ino, &fh);
	first_snapshot_fails(&r);
	for (int k = 10; k < 15; k++)
		append_line(&r, ino, fh, k, log);
	char id[CFS_ID_MAX];
	struct cfs_jent e;
	{
		struct cfs_jent *all;
		size_t n;
		CHECK_EQ(cfs_journal_load(r.j, &all, &n, NULL), 0);
		CHECK_EQ(n, 1);
		snprintf(id, sizeof(id), "%s", n ? all[0].id : "");
		e = n ? all[0] : e;
		free(all);
	}
	CHECK_EQ(e.state, CFS_JSTATE_SNAPSHOT);
	CHECK_EQ(e.size, 100);
	rig_kill(&r);
	rig_start(&r, 1);
	rig_advance(&r, 3000);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK(rig_drive_has(&r, "ROOT", "train.log", log, 100));
	char p[300];
	struct stat st;
	snprintf(p, sizeof(p), "%s/w-%s.unsent", r.staging, id);
	CHECK_EQ(stat(p, &st), 0);
	CHECK_EQ(st.st_size, 150);
	snprintf(p, sizeof(p), "%s/w-%s.snap", r.staging, id);
	CHECK(access(p, F_OK) != 0);
	rig_down(&r);
}

/* A server restarted under a live mount: the writer goes on with the
 * staged file; the snapshot's copy goes and nothing is uploaded early. */
static void test_restart_under_a_live_mount_keeps_writing(void)
{
	struct rig r;
	char log[10 * 100];
	uint64_t ino, fh;
	log_rig(&r, log, &ino, &fh);
	first_snapshot_fails(&r);
	rig_kill(&r);
	rig_start(&r, 0);
	rig_advance(&r, 10 * 1000);
	CHECK(rig_wait(&r, idle, NULL));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 1);
	CHECK(wfake_find(&r.fk, "ROOT", "train.log") == NULL);
	struct cfs_jent *all;
	size_t n;
	CHECK_EQ(cfs_journal_load(r.j, &all, &n, NULL), 0);
	CHECK_EQ(n, 1);
	if (n) {
		char p[300];
		snprintf(p, sizeof(p), "%s/w-%s.snap", r.staging, all[0].id);
		CHECK(access(p, F_OK) != 0);
	}
	free(all);
	rig_down(&r);
}

/* A writer appends records of 4 KiB, each one byte value throughout and
 * written by one write, as fast as it can, while snapshots are taken every
 * (fake) second: every version Drive receives is whole records, each one
 * value (never half a write). */
struct appender {
	struct rig *r;
	uint64_t ino, fh;
	int stop, records;
};

#define RECORD (4 << 10)
#define RECORDS 20000

static void *append_loop(void *arg)
{
	struct appender *a = arg;
	char *buf = malloc(RECORD);
	for (int k = 0; buf && k < RECORDS && !__atomic_load_n(&a->stop, __ATOMIC_RELAXED); k++) {
		memset(buf, 'A' + k % 26, RECORD);
		if (rig_write(a->r, a->ino, a->fh, (int64_t)k * RECORD, buf, RECORD))
			break;
		__atomic_add_fetch(&a->records, 1, __ATOMIC_RELAXED);
		rig_pause_ms(k % 4 ? 0 : 1); /* a steady writer, racing the snapshots */
	}
	free(buf);
	return NULL;
}

/* Drive's file named name is whole records, each one value, the k-th 'A'+k. */
static int whole_records(struct rig *r, const char *name)
{
	pthread_mutex_lock(&r->fk.lock);
	int ok = 1;
	for (int i = 0; i < r->fk.n; i++) {
		struct wfake_file *f = &r->fk.f[i];
		if (f->trashed || strcmp(f->name, name) != 0)
			continue;
		ok = f->len % RECORD == 0;
		for (size_t b = 0; b < f->len && ok; b++)
			ok = f->data[b] == 'A' + (int)(b / RECORD) % 26;
	}
	pthread_mutex_unlock(&r->fk.lock);
	return ok;
}

static void test_snapshots_never_hold_half_a_write(void)
{
	struct rig r;
	rig_up(&r, 0);
	r.open_ms = 1000;
	rig_start(&r, 1);
	struct appender a = { .r = &r };
	CHECK_EQ(rig_open(&r, "events.bin", O_CREAT | O_WRONLY, &a.ino, &a.fh), 0);
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, append_loop, &a), 0);
	while (__atomic_load_n(&a.records, __ATOMIC_RELAXED) < 2) /* its interval runs */
		rig_pause_ms(1);
	int bad = 0, sent = 0;
	for (int i = 0; i < 10 && !bad; i++) {
		int before = wfake_calls(&r.fk, WF_UPLOAD);
		rig_advance(&r, 1001);
		sent += rig_wait_uploads(&r, before + 1);
		CHECK(rig_wait(&r, idle, NULL));
		bad = !whole_records(&r, "events.bin");
	}
	__atomic_store_n(&a.stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	CHECK(!bad);
	CHECK(sent >= 5); /* the appends were sent while open */
	CHECK_EQ(rig_close(&r, a.ino, a.fh), 0);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK(whole_records(&r, "events.bin"));
	struct wfake_file *f = wfake_find(&r.fk, "ROOT", "events.bin");
	CHECK(f && f->len == (size_t)a.records * RECORD); /* all of it, at the close */
	rig_down(&r);
}

/* A new file rewritten in place (a database's pages, a checkpoint whose
 * header is written last): not a log, never sent while open, whatever the
 * interval; it reaches Drive at its close, whole. */
static void test_new_file_rewritten_in_place_waits(void)
{
	struct rig r;
	rig_up(&r, 0);
	r.open_ms = 1000;
	rig_start(&r, 1);
	uint64_t ino, fh;
	char buf[4096];
	memset(buf, 'p', sizeof(buf));
	CHECK_EQ(rig_open(&r, "new.db", O_CREAT | O_RDWR, &ino, &fh), 0);
	CHECK_EQ(rig_write(&r, ino, fh, 0, buf, sizeof(buf)), 0);
	CHECK_EQ(rig_write(&r, ino, fh, 0, "HDR", 3), 0); /* the header, last */
	memcpy(buf, "HDR", 3);
	rig_advance(&r, 10 * 1000);
	CHECK(rig_wait(&r, idle, NULL));
	free(rig_sync_json(&r));
	rig_advance(&r, 10 * 1000);
	CHECK(rig_wait(&r, idle, NULL));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 0);
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK(rig_drive_has(&r, "ROOT", "new.db", buf, sizeof(buf)));
	rig_down(&r);
}

/* A file Drive has, rewritten in place (a checkpoint saved over the old
 * one, O_TRUNC): never sent while open, whatever the interval; Drive keeps
 * the old bytes until the close.  Appended to (a log reopened with
 * O_APPEND): sent while open, Drive's bytes a prefix of every version. */
static void test_rewrite_waits_for_close_append_does_not(void)
{
	struct rig r;
	rig_up(&r, 0);
	r.open_ms = MIN_MS;
	rig_start(&r, 1);
	uint64_t ino, fh;
	char buf[OLD_LEN + 100];
	CHECK_EQ(rig_open(&r, "old.bin", O_WRONLY | O_TRUNC, &ino, &fh), 0);
	memset(buf, 'n', sizeof(buf));
	CHECK_EQ(rig_write(&r, ino, fh, 0, buf, 1000), 0);
	rig_advance(&r, 5 * MIN_MS);
	CHECK(rig_wait(&r, idle, NULL));
	char *js = rig_sync_json(&r); /* sync asks: still not sent half written */
	free(js);
	rig_advance(&r, MIN_MS);
	CHECK(rig_wait(&r, idle, NULL));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 0);
	CHECK(rig_drive_has(&r, "ROOT", "old.bin", r.old, OLD_LEN));
	CHECK_EQ(rig_write(&r, ino, fh, 1000, buf, 1000), 0);
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK(rig_drive_has(&r, "ROOT", "old.bin", buf, 2000));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 1);
	/* appends to what Drive has: sent while open */
	CHECK_EQ(rig_open(&r, "old.bin", O_WRONLY, &ino, &fh), 0);
	CHECK_EQ(rig_write(&r, ino, fh, 2000, "tail", 4), 0);
	memcpy(buf + 2000, "tail", 4);
	rig_advance(&r, MIN_MS + 1);
	CHECK(uploaded(&r, 2));
	CHECK(rig_drive_has(&r, "ROOT", "old.bin", buf, 2004));
	/* then a change inside what Drive has: no more while open */
	CHECK_EQ(rig_write(&r, ino, fh, 10, "X", 1), 0);
	buf[10] = 'X';
	rig_advance(&r, 3 * MIN_MS);
	CHECK(rig_wait(&r, idle, NULL));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 2);
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK(rig_drive_has(&r, "ROOT", "old.bin", buf, 2004));
	CHECK_EQ(rig_count_named(&r, "ROOT", "conflict"), 0);
	rig_down(&r);
}

/* A snapshot's upload still running when the file is closed with newer
 * bytes stops: the close's upload goes next, not after it. */
static void test_close_supersedes_a_snapshot_upload(void)
{
	struct rig r;
	char log[10 * 100];
	uint64_t ino, fh;
	log_rig(&r, log, &ino, &fh);
	snapshot_held(&r, ino, fh, log, 20);
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	wfake_hold(&r.fk, 0);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK(rig_drive_has(&r, "ROOT", "train.log", log, 200));
	CHECK_EQ(rig_stats(&r).snapshots, 0); /* the snapshot never landed */
	CHECK_EQ(rig_stats(&r).retries, 0);   /* superseded is not a failure */
	rig_down(&r);
}

struct fsync_call {
	struct rig *r;
	uint64_t ino, fh;
	int rc, done;
};

static void *fsync_thread(void *arg)
{
	struct fsync_call *c = arg;
	c->rc = cfs_vfs_fsync(c->r->v, c->ino, c->fh);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* The only journal row says its bytes are complete (an fsync's flush). */
static int row_closed(struct rig *r, void *arg)
{
	(void)arg;
	struct cfs_jent *all;
	size_t n;
	if (cfs_journal_load(r->j, &all, &n, NULL))
		return 0;
	int ok = n == 1 && all[0].state == CFS_JSTATE_CLOSED;
	free(all);
	return ok;
}

static int fsync_done(struct rig *r, void *arg)
{
	(void)r;
	return __atomic_load_n(&((struct fsync_call *)arg)->done, __ATOMIC_ACQUIRE);
}

/* An fsync while a snapshot of the file is being uploaded: the snapshot
 * lands, then the fsync'd bytes go (the exerciser hung here: the
 * snapshot's end cleared the fsync's urgency while the file stayed open). */
static void test_fsync_during_a_snapshot_upload(void)
{
	struct rig r;
	rig_up(&r, 0);
	r.write_back_ms = 3600 * 1000; /* only the fsync sends it after the snapshot */
	r.open_ms = MIN_MS;
	rig_start(&r, 1);
	char log[10 * 100];
	struct fsync_call c = { .r = &r };
	CHECK_EQ(rig_open(&r, "train.log", O_CREAT | O_WRONLY, &c.ino, &c.fh), 0);
	for (int k = 0; k < 10; k++)
		append_line(&r, c.ino, c.fh, k, log);
	snapshot_held(&r, c.ino, c.fh, log, 20);
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, fsync_thread, &c), 0);
	CHECK(rig_wait(&r, row_closed, NULL)); /* the fsync waits for its upload */
	wfake_hold(&r.fk, 0);
	CHECK(rig_wait(&r, fsync_done, &c));
	if (!fsync_done(&r, &c)) { /* unblock it to report, not hang */
		rig_advance(&r, 3600 * 1000);
		CHECK_EQ(rig_close(&r, c.ino, c.fh), 0);
	}
	pthread_join(t, NULL);
	CHECK_EQ(c.rc, 0);
	CHECK(rig_drive_has(&r, "ROOT", "train.log", log, 200));
	CHECK_EQ(rig_stats(&r).snapshots, 1);
	rig_down(&r);
}

/* The writer's process forks (a DataLoader's workers) or runs a command
 * (`!nvidia-smi`, `colabfs stats`): each child's exit or exec closes its
 * copy of the descriptor, a FLUSH of the same open file while the writer
 * goes on.  The interval runs on: the log is uploaded while open, and a
 * log gone quiet after such a FLUSH is uploaded too, not left for the last
 * close.  (Before: each FLUSH restarted the interval, so a command run more
 * often than it kept the log out of Drive until the close.) */
static void test_flushes_of_a_childs_copy_keep_the_interval(void)
{
	struct rig r;
	char log[10 * 100];
	uint64_t ino, fh;
	log_rig(&r, log, &ino, &fh);
	/* a line and a child's FLUSH every 10 s: six of them, the minute */
	for (int k = 10; k < 16; k++) {
		append_line(&r, ino, fh, k, log);
		CHECK_EQ(cfs_vfs_flush(r.v, ino, fh), 0);
		rig_advance(&r, 10 * 1000);
	}
	rig_advance(&r, 1000);
	CHECK(uploaded(&r, 1));
	CHECK(rig_drive_has(&r, "ROOT", "train.log", log, 160));
	/* quiet after a last line and a child's FLUSH: uploaded at the interval */
	append_line(&r, ino, fh, 16, log);
	CHECK_EQ(cfs_vfs_flush(r.v, ino, fh), 0);
	rig_advance(&r, MIN_MS + 1000);
	CHECK(uploaded(&r, 2));
	CHECK(rig_drive_has(&r, "ROOT", "train.log", log, 170));
	/* the last close has nothing left to send; one file, no conflict */
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 2);
	CHECK_EQ(rig_count_named(&r, "ROOT", "train"), 1);
	CHECK_EQ(rig_stats(&r).snapshots, 2);
	/* opened again later: its first change starts a new interval */
	CHECK_EQ(rig_open(&r, "train.log", O_WRONLY | O_APPEND, &ino, &fh), 0);
	rig_advance(&r, 10 * MIN_MS);
	append_line(&r, ino, fh, 17, log);
	rig_advance(&r, MIN_MS / 2);
	CHECK(rig_wait(&r, idle, NULL));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 2);
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK(rig_drive_has(&r, "ROOT", "train.log", log, 180));
	rig_down(&r);
}

/* A file of n bytes: log's first keep bytes, then changed ones. */
static int temp_with(struct rig *r, const char *log, size_t keep, size_t n)
{
	char p[300];
	snprintf(p, sizeof(p), "%s/probe-XXXXXX", r->dir);
	int fd = mkstemp(p);
	CHECK(fd >= 0);
	unlink(p);
	char b[256];
	for (size_t i = 0; i < n && i < sizeof(b); i++)
		b[i] = i < keep ? log[i] : (char)('a' + i % 26);
	CHECK_EQ(pwrite(fd, b, n, 0), (ssize_t)n);
	return fd;
}

/* A server restarted under a file held open asks Drive whether a snapshot
 * extends what Drive holds (cfs_vfs_snap_check): only bytes whose start is
 * Drive's file (its md5) go while open; a file rewritten in place waits for
 * its close, never a torn copy over Drive's. */
static void test_restart_check_against_drive(void)
{
	struct rig r;
	char log[10 * 10];
	uint64_t ino, fh;
	log_rig(&r, log, &ino, &fh);
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	struct wfake_file *f = wfake_find(&r.fk, "ROOT", "train.log");
	CHECK(f != NULL);
	struct cfs_jent j = { 0 };
	snprintf(j.id, sizeof(j.id), "%s", f ? f->id : "?");
	snprintf(j.name, sizeof(j.name), "train.log");
	int grown = temp_with(&r, log, 100, 150), same = temp_with(&r, log, 100, 100);
	int edited = temp_with(&r, log, 40, 150), shorter = temp_with(&r, log, 60, 60);
	CHECK_EQ(cfs_vfs_snap_check(r.v, &j, grown, 150), 1);
	CHECK_EQ(cfs_vfs_snap_check(r.v, &j, same, 100), 1);
	CHECK_EQ(cfs_vfs_snap_check(r.v, &j, edited, 150), 0); /* a byte at 40 rewritten */
	CHECK_EQ(cfs_vfs_snap_check(r.v, &j, shorter, 60), 0);
	/* not in Drive: a new file's nothing is a prefix; an old one's is not known */
	snprintf(j.id, sizeof(j.id), "fid-none");
	j.is_new = 1;
	CHECK_EQ(cfs_vfs_snap_check(r.v, &j, grown, 150), 1);
	j.is_new = 0;
	CHECK_EQ(cfs_vfs_snap_check(r.v, &j, grown, 150), 0);
	/* Drive cannot be asked: an error, tried again later */
	snprintf(j.id, sizeof(j.id), "%s", f ? f->id : "?");
	wfake_fail(&r.fk, WF_GET, CFS_E_NET);
	CHECK(cfs_vfs_snap_check(r.v, &j, grown, 150) < 0);
	close(grown);
	close(same);
	close(edited);
	close(shorter);
	rig_down(&r);
}

int main(void)
{
	test_log_reaches_drive_while_open();
	test_off_means_at_close();
	test_writes_go_on_during_the_upload();
	test_sync_with_a_file_open();
	test_fresh_mount_uploads_the_snapshot();
	test_restart_under_a_live_mount_keeps_writing();
	test_snapshots_never_hold_half_a_write();
	test_new_file_rewritten_in_place_waits();
	test_rewrite_waits_for_close_append_does_not();
	test_close_supersedes_a_snapshot_upload();
	test_fsync_during_a_snapshot_upload();
	test_flushes_of_a_childs_copy_keep_the_interval();
	test_restart_check_against_drive();
	return check_done("test_wopen");
}
