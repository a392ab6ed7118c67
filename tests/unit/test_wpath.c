/* Unit test: the write path over the fake Drive (wfake.h) with a clock the
 * test moves: every upload of one open counts as ours (no conflict copy for
 * a second fsync), a conflict is only another writer's change, each retry
 * class (fatal and permission stop, network and rate limits back off even
 * for urgent files, storage full waits, the user's sync asks once), journal
 * replay from every state (closed, writing, torn, clean; a cut resumable
 * session resumed; a stored session URI of another endpoint never used; a
 * forged `replaces` trashes nothing), and rename's crash ordering (the file
 * a rename replaces goes only after the new bytes are in Drive, also across
 * a server death). */
#include "wrig.h"

#include "upq.h"

static const char ours[] = "our bytes, new";

/* ---- upq, the pure policy ---------------------------------------------- */

static void test_upq(void)
{
	CHECK_EQ(cfs_upq_classify(CFS_E_NET), CFS_UPQ_NET);
	CHECK_EQ(cfs_upq_classify(CFS_E_SERVER), CFS_UPQ_NET);
	CHECK_EQ(cfs_upq_classify(CFS_E_RATE), CFS_UPQ_RATE);
	CHECK_EQ(cfs_upq_classify(-ENOSPC), CFS_UPQ_FULL);
	CHECK_EQ(cfs_upq_classify(CFS_E_PROTO), CFS_UPQ_PROTO);
	CHECK_EQ(cfs_upq_classify(-EACCES), CFS_UPQ_PERM);
	CHECK_EQ(cfs_upq_classify(-EIO), CFS_UPQ_FATAL);
	CHECK_EQ(cfs_upq_classify(-EILSEQ), CFS_UPQ_FATAL);
	/* backoff grows, stays within [base/2, cap] */
	for (uint32_t f = 1; f < 40; f++) {
		int64_t top = f < 10 ? 1000ll << (f - 1) : 300000;
		CHECK_EQ(cfs_upq_backoff_ms(CFS_UPQ_NET, f, 0), 500);
		CHECK_EQ(cfs_upq_backoff_ms(CFS_UPQ_NET, f, (uint64_t)(top - 500)),
			 top < 300000 ? top : 300000);
		for (uint64_t rnd = 1; rnd < 1u << 30; rnd = rnd * 7 + 3)
			CHECK(cfs_upq_backoff_ms(CFS_UPQ_NET, f, rnd) <= (top < 300000 ? top : 300000));
	}
	CHECK(cfs_upq_backoff_ms(CFS_UPQ_FULL, 1, 0) >= 30000);
	struct cfs_upq_rec r = { 0 };
	int64_t now = 1000, wake = now + 1000;
	CHECK(cfs_upq_may(&r, now, &wake));
	CHECK_EQ(cfs_upq_fail(&r, CFS_E_NET, now, 0), CFS_UPQ_NET);
	CHECK(!cfs_upq_may(&r, now, &wake) && wake == now + 500);
	CHECK(cfs_upq_may(&r, now + 500, NULL));
	/* a fatal refusal stops: no time makes it go */
	CHECK_EQ(cfs_upq_fail(&r, -EIO, now, 7), CFS_UPQ_FATAL);
	CHECK(cfs_upq_stopped(&r) && !cfs_upq_may(&r, now + 86400000, NULL));
	/* the user asks: once now, not again within 10 s */
	CHECK(cfs_upq_ask(&r, now) && cfs_upq_may(&r, now, NULL));
	cfs_upq_fail(&r, -EIO, now + 5, 0);
	CHECK(!cfs_upq_ask(&r, now + 5000) && cfs_upq_stopped(&r));
	CHECK(cfs_upq_ask(&r, now + CFS_UPQ_ASK_MS + 1));
	cfs_upq_fail(&r, -EIO, now, 0);
	/* a change makes it go again, after a step */
	cfs_upq_touch(&r, now);
	CHECK(!cfs_upq_stopped(&r) && !cfs_upq_may(&r, now, NULL) &&
	      cfs_upq_may(&r, now + 10 * 60 * 1000, NULL));
	cfs_upq_ok(&r);
	CHECK(r.failures == 0 && r.err == 0 && cfs_upq_may(&r, now, NULL));
}

/* ---- the journal's states and damage ----------------------------------- */

static void test_journal_rows(void)
{
	struct cfs_jent e = { 0 }, d;
	snprintf(e.id, sizeof(e.id), "fid1");
	snprintf(e.parent, sizeof(e.parent), "ROOT");
	snprintf(e.name, sizeof(e.name), "x.bin");
	for (int st = CFS_JSTATE_CLOSED; st <= CFS_JSTATE_SNAPSHOT; st++) {
		for (int rep = 0; rep < 2; rep++) {
			struct cfs_buf b = { 0 };
			e.state = st;
			snprintf(e.replaces, sizeof(e.replaces), "%s", rep ? "F1" : "");
			snprintf(e.rep_name, sizeof(e.rep_name), "%s", rep ? "old.bin" : "");
			snprintf(e.rep_parent, sizeof(e.rep_parent), "%s", rep ? "ROOT" : "");
			CHECK_EQ(cfs_journal_encode(&e, &b), 0);
			CHECK_EQ(cfs_journal_decode(b.data, b.len, &d), 0);
			CHECK(d.state == st && strcmp(d.replaces, e.replaces) == 0 &&
			      strcmp(d.rep_name, e.rep_name) == 0 &&
			      strcmp(d.rep_parent, e.rep_parent) == 0);
			for (size_t n = 0; n < b.len; n++) /* every cut is refused */
				CHECK_EQ(cfs_journal_decode(b.data, n, &d), CFS_E_PROTO);
			cfs_buf_cleanup(&b);
		}
	}
	e.state = 7;
	struct cfs_buf b = { 0 };
	CHECK_EQ(cfs_journal_encode(&e, &b), -EINVAL);
	cfs_buf_cleanup(&b);
}

static void test_damaged_journal_moved_aside(void)
{
	char dir[] = "/tmp/cfs-test-jdamage.XXXXXX", p[256], aside[256];
	CHECK(mkdtemp(dir) != NULL);
	struct cfs_journal *j;
	CHECK_EQ(cfs_journal_open(dir, &j), 0);
	struct cfs_jent e = { 0 };
	snprintf(e.id, sizeof(e.id), "fid1");
	snprintf(e.parent, sizeof(e.parent), "ROOT");
	snprintf(e.name, sizeof(e.name), "x.bin");
	CHECK_EQ(cfs_journal_put(j, &e), 0);
	cfs_journal_close(j);
	snprintf(p, sizeof(p), "%s/journal.mdb", dir);
	CHECK_EQ(truncate(p, 4096), 0); /* cut: its pages are gone */
	CHECK(cfs_journal_open(dir, &j) != 0);
	CHECK_EQ(cfs_journal_open_or_reset(dir, &j, aside, sizeof(aside)), 0);
	CHECK(strstr(aside, "journal.mdb.damaged-") != NULL && access(aside, F_OK) == 0);
	struct cfs_jent *all = NULL;
	size_t n = 9;
	CHECK_EQ(cfs_journal_load(j, &all, &n, NULL), 0);
	CHECK_EQ(n, 0);
	free(all);
	CHECK_EQ(cfs_journal_put(j, &e), 0); /* and it works */
	cfs_journal_close(j);
	nftw(dir, rig_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- one open, many uploads ------------------------------------------- */

static void test_second_fsync_is_ours(void)
{
	struct rig r;
	rig_up(&r, 0);
	rig_start(&r, 1);
	uint64_t ino, fh;
	CHECK_EQ(rig_open(&r, "old.bin", O_RDWR, &ino, &fh), 0);
	char want[OLD_LEN];
	memcpy(want, r.old, OLD_LEN);
	for (int i = 0; i < 4; i++) { /* four transactions, each fsync'd */
		char b[16];
		int n = snprintf(b, sizeof(b), "txn %d;", i);
		CHECK_EQ(rig_write(&r, ino, fh, 100 * i, b, (size_t)n), 0);
		memcpy(want + 100 * i, b, (size_t)n);
		CHECK_EQ(cfs_vfs_fsync(r.v, ino, fh), 0);
		CHECK(rig_drive_has(&r, "ROOT", "old.bin", want, OLD_LEN));
	}
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	CHECK_EQ(rig_count_named(&r, "ROOT", "conflict"), 0);
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 4);
	CHECK_EQ(rig_stats(&r).conflicts, 0);
	rig_down(&r);
}

static void test_conflict_is_another_writer(void)
{
	struct rig r;
	rig_up(&r, 0);
	rig_start(&r, 1);
	uint64_t ino, fh;
	CHECK_EQ(rig_open(&r, "old.bin", O_WRONLY | O_TRUNC, &ino, &fh), 0);
	CHECK_EQ(rig_write(&r, ino, fh, 0, ours, sizeof(ours)), 0);
	wfake_change(&r.fk, "F1", "theirs", 6); /* someone else, meanwhile */
	CHECK_EQ(cfs_vfs_fsync(r.v, ino, fh), 0);
	/* still open: what is written next goes to our copy, not theirs */
	CHECK_EQ(rig_write(&r, ino, fh, sizeof(ours), "+more", 5), 0);
	CHECK_EQ(cfs_vfs_fsync(r.v, ino, fh), 0);
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK(rig_drive_has(&r, "ROOT", "old.bin", "theirs", 6));
	CHECK_EQ(rig_count_named(&r, "ROOT", "old (conflict "), 1);
	char want[sizeof(ours) + 5];
	memcpy(want, ours, sizeof(ours));
	memcpy(want + sizeof(ours), "+more", 5);
	struct wfake_file *copy = NULL;
	pthread_mutex_lock(&r.fk.lock);
	for (int i = 0; i < r.fk.n; i++)
		if (!r.fk.f[i].trashed && strstr(r.fk.f[i].name, "old (conflict "))
			copy = &r.fk.f[i];
	pthread_mutex_unlock(&r.fk.lock);
	CHECK(copy && copy->len == sizeof(want) && memcmp(copy->data, want, sizeof(want)) == 0);
	/* the name shows theirs */
	struct cfs_vfs_attr a;
	uint64_t fh2;
	int keep, direct;
	char b[16];
	size_t got = 0;
	CHECK_EQ(cfs_vfs_lookup(r.v, CFS_ROOT_INO, "old.bin", &a), 0);
	CHECK_EQ(cfs_vfs_open(r.v, a.ino, O_RDONLY, 1, &fh2, &keep, &direct), 0);
	CHECK_EQ(cfs_vfs_read(r.v, a.ino, fh2, 0, sizeof(b), b, &got), 0);
	CHECK(got == 6 && memcmp(b, "theirs", 6) == 0);
	cfs_vfs_release(r.v, a.ino, fh2);
	rig_down(&r);
}

/* ---- retries ------------------------------------------------------------ */

static void test_fatal_stops_and_sync_asks_once(void)
{
	struct rig r;
	rig_up(&r, 0);
	rig_start(&r, 1);
	for (int i = 0; i < 20; i++)
		wfake_fail(&r.fk, WF_UPLOAD, -EIO);
	uint64_t ino, fh;
	CHECK_EQ(rig_open(&r, "x.bin", O_CREAT | O_WRONLY, &ino, &fh), 0);
	CHECK_EQ(rig_write(&r, ino, fh, 0, ours, sizeof(ours)), 0);
	CHECK_EQ(cfs_vfs_fsync(r.v, ino, fh), -EIO);
	CHECK_EQ(cfs_vfs_fsync(r.v, ino, fh), -EIO); /* asks once more: one attempt */
	CHECK_EQ(cfs_vfs_fsync(r.v, ino, fh), -EIO); /* within 10 s: none */
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 2);
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	rig_advance(&r, 3600 * 1000); /* an hour: a stopped upload stays stopped */
	rig_pause_ms(150);
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 2);
	char *js = rig_sync_json(&r); /* the user asks: one attempt */
	free(js);
	CHECK(rig_wait_uploads(&r, 3));
	for (int i = 0; i < 5; i++) { /* a sync polling: listed as failed, not retried */
		js = rig_sync_json(&r);
		CHECK(strstr(js, "\"failed\":[{") != NULL);
		free(js);
		rig_pause_ms(20);
	}
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 3);
	CHECK_EQ(rig_stats(&r).failed, 1);
	rig_down(&r);
}

static void test_network_backs_off_even_when_urgent(void)
{
	struct rig r;
	rig_up(&r, 0);
	rig_start(&r, 1);
	for (int i = 0; i < 3; i++)
		wfake_fail(&r.fk, WF_UPLOAD, CFS_E_NET);
	uint64_t ino, fh;
	CHECK_EQ(rig_open(&r, "n.bin", O_CREAT | O_WRONLY, &ino, &fh), 0);
	CHECK_EQ(rig_write(&r, ino, fh, 0, ours, sizeof(ours)), 0);
	CHECK(cfs_vfs_fsync(r.v, ino, fh) != 0); /* the attempt's error */
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	rig_pause_ms(150);
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 1); /* urgent, yet no loop */
	/* each step at most doubles: 1 s, 2 s, 4 s of fake time suffice */
	for (int step = 0, want = 2; step < 3; step++, want++) {
		rig_advance(&r, 1000 << step);
		CHECK(rig_wait_uploads(&r, want));
		rig_pause_ms(50);
		CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), want);
	}
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK(rig_drive_has(&r, "ROOT", "n.bin", ours, sizeof(ours)));
	rig_down(&r);
}

static void test_storage_full_waits(void)
{
	struct rig r;
	rig_up(&r, 0);
	rig_start(&r, 1);
	wfake_fail(&r.fk, WF_UPLOAD, -ENOSPC);
	uint64_t ino, fh;
	CHECK_EQ(rig_open(&r, "q.bin", O_CREAT | O_WRONLY, &ino, &fh), 0);
	CHECK_EQ(rig_write(&r, ino, fh, 0, ours, sizeof(ours)), 0);
	CHECK_EQ(cfs_vfs_fsync(r.v, ino, fh), -ENOSPC);
	CHECK_EQ(rig_close(&r, ino, fh), -ENOSPC); /* kept, journaled: said at close */
	rig_advance(&r, 29 * 1000);
	rig_pause_ms(100);
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 1);
	rig_advance(&r, 31 * 1000);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK(rig_drive_has(&r, "ROOT", "q.bin", ours, sizeof(ours)));
	rig_down(&r);
}

/* ---- replay ------------------------------------------------------------- */

static void test_replay_states(void)
{
	struct rig r;
	rig_up(&r, 3600 * 1000); /* nothing goes before the "death" */
	rig_start(&r, 1);
	uint64_t ino, fh, ino2, fh2, ino3, fh3;
	/* closed: complete, uploaded by the next mount */
	CHECK_EQ(rig_open(&r, "closed.bin", O_CREAT | O_WRONLY, &ino, &fh), 0);
	CHECK_EQ(rig_write(&r, ino, fh, 0, ours, sizeof(ours)), 0);
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	/* writing: old.bin being rewritten when the server dies */
	CHECK_EQ(rig_open(&r, "old.bin", O_WRONLY | O_TRUNC, &ino2, &fh2), 0);
	CHECK_EQ(rig_write(&r, ino2, fh2, 0, "half", 4), 0);
	/* clean: victim.bin... in the root: a file opened for writing, unchanged */
	CHECK_EQ(rig_open(&r, "closed.bin", O_RDWR, &ino3, &fh3), 0);
	CHECK_EQ(rig_close(&r, ino3, fh3), 0);
	rig_kill(&r);
	r.write_back_ms = 0;
	rig_start(&r, 1);
	rig_advance(&r, 3000); /* replayed files wait 2 s for writers to come back */
	CHECK(rig_wait_uploads(&r, 1));
	CHECK(rig_drive_has(&r, "ROOT", "closed.bin", ours, sizeof(ours)));
	CHECK(rig_drive_has(&r, "ROOT", "old.bin", r.old, OLD_LEN)); /* Drive keeps it */
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 1);
	char *js = rig_sync_json(&r);
	CHECK(strstr(js, "being written when colabfs stopped") != NULL);
	free(js);
	rig_advance(&r, 3600 * 1000);
	rig_pause_ms(100);
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 1);
	/* written again from the start: uploaded */
	CHECK_EQ(rig_open(&r, "old.bin", O_WRONLY | O_TRUNC, &ino2, &fh2), 0);
	CHECK_EQ(rig_write(&r, ino2, fh2, 0, ours, sizeof(ours)), 0);
	CHECK_EQ(rig_close(&r, ino2, fh2), 0);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK(rig_drive_has(&r, "ROOT", "old.bin", ours, sizeof(ours)));
	rig_down(&r);
}

static void test_replay_unchanged_not_uploaded(void)
{
	struct rig r;
	rig_up(&r, 3600 * 1000);
	rig_start(&r, 1);
	uint64_t ino, fh;
	CHECK_EQ(rig_open(&r, "old.bin", O_RDWR, &ino, &fh), 0);
	char b[10];
	size_t got;
	CHECK_EQ(cfs_vfs_read(r.v, ino, fh, 0, sizeof(b), b, &got), 0);
	CHECK(got == sizeof(b) && memcmp(b, r.old, sizeof(b)) == 0);
	rig_kill(&r); /* still open */
	r.write_back_ms = 0;
	rig_start(&r, 1);
	rig_advance(&r, 3000);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	rig_pause_ms(100);
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 0);
	rig_down(&r);
}

static void put_row(struct rig *r, struct cfs_jent *e, const char *data, size_t len);

/* A journal row for the rig's old.bin (F1), opened at its revision r1. */
static struct cfs_jent old_bin_row(void)
{
	struct cfs_jent e = { 0 };
	snprintf(e.id, sizeof(e.id), "F1");
	snprintf(e.parent, sizeof(e.parent), "ROOT");
	snprintf(e.name, sizeof(e.name), "old.bin");
	snprintf(e.base_rev, sizeof(e.base_rev), "r:r1");
	return e;
}

static void test_replay_of_an_upload_that_landed(void)
{
	/* the machine died after our upload landed and before the journal said
	 * so: the row comes back with the old base revision */
	struct rig r;
	rig_up(&r, 0);
	struct cfs_jent e = old_bin_row();
	snprintf(e.sent_name, sizeof(e.sent_name), "old.bin");
	snprintf(e.sent_parent, sizeof(e.sent_parent), "ROOT");
	put_row(&r, &e, ours, sizeof(ours));
	wfake_change(&r.fk, "F1", ours, sizeof(ours)); /* what landed: r2 */
	rig_start(&r, 1);
	rig_advance(&r, 3000);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 0);
	CHECK_EQ(rig_count_named(&r, "ROOT", "conflict"), 0);
	CHECK(rig_drive_has(&r, "ROOT", "old.bin", ours, sizeof(ours)));
	/* other bytes than Drive's head are a conflict still */
	rig_kill(&r);
	e.seq = 0;
	put_row(&r, &e, "ours, other", 11);
	rig_start(&r, 1);
	rig_advance(&r, 3000);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK_EQ(rig_count_named(&r, "ROOT", "conflict"), 1);
	rig_down(&r);
}

static void test_replay_torn_row(void)
{
	struct rig r;
	rig_up(&r, 0);
	struct cfs_jent e = old_bin_row();
	e.state = CFS_JSTATE_TORN;
	put_row(&r, &e, "torn", 4);
	rig_start(&r, 1);
	rig_advance(&r, 3000);
	rig_pause_ms(100);
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 0);
	CHECK(rig_drive_has(&r, "ROOT", "old.bin", r.old, OLD_LEN));
	char *js = rig_sync_json(&r);
	CHECK(strstr(js, "\"failed\":[{") != NULL && strstr(js, "a write failed") != NULL);
	free(js);
	rig_down(&r);
}

/* A journal row written by hand, with a staged file of len bytes. */
static void put_row(struct rig *r, struct cfs_jent *e, const char *data, size_t len)
{
	int fd;
	CHECK_EQ(cfs_journal_open(r->staging, &r->j), 0);
	CHECK_EQ(cfs_staging_open(r->staging, &r->st), 0);
	CHECK_EQ(cfs_staging_file(r->st, e->id, 1, 1, &fd), 0);
	CHECK_EQ(cfs_staging_pwrite(fd, 0, data, len), 0);
	close(fd);
	e->size = (int64_t)len;
	CHECK_EQ(cfs_journal_put(r->j, e), 0);
	cfs_journal_close(r->j);
	cfs_staging_close(r->st);
}

static void test_replay_distrusts_rows(void)
{
	struct rig r;
	rig_up(&r, 0);
	size_t len = 2u << 20; /* resumable */
	char *data = malloc(len);
	for (size_t i = 0; i < len; i++)
		data[i] = (char)(i * 7);
	struct cfs_jent e = { 0 };
	snprintf(e.id, sizeof(e.id), "fidX00001");
	snprintf(e.parent, sizeof(e.parent), "ROOT");
	snprintf(e.name, sizeof(e.name), "big.bin");
	snprintf(e.uri, sizeof(e.uri), "http://evil.test/upload/s0");
	snprintf(e.replaces, sizeof(e.replaces), "F9"); /* victim.bin, in another folder */
	e.is_new = 1;
	put_row(&r, &e, data, len);
	struct cfs_jent bad = { 0 }; /* replaces itself: not replayed */
	snprintf(bad.id, sizeof(bad.id), "fidX00002");
	snprintf(bad.parent, sizeof(bad.parent), "ROOT");
	snprintf(bad.name, sizeof(bad.name), "bad.bin");
	snprintf(bad.replaces, sizeof(bad.replaces), "fidX00002");
	bad.is_new = 1;
	put_row(&r, &bad, "x", 1);
	rig_start(&r, 1);
	rig_advance(&r, 3000);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK(rig_drive_has(&r, "ROOT", "big.bin", data, len));
	CHECK_EQ(r.fk.foreign_resumes, 0);               /* the token never went there */
	CHECK(wfake_find(&r.fk, "D2", "victim.bin") != NULL); /* not trashed */
	CHECK(wfake_find(&r.fk, "ROOT", "bad.bin") == NULL);
	free(data);
	rig_down(&r);
}

static void test_cut_session_resumed_by_next_process(void)
{
	struct rig r;
	rig_up(&r, 0);
	rig_start(&r, 1);
	size_t len = 3u << 20;
	char *data = malloc(len);
	for (size_t i = 0; i < len; i++)
		data[i] = (char)(i * 13 + 1);
	r.fk.cut_after_chunks = 5;
	for (int i = 0; i < 10; i++) /* this process never gets through */
		wfake_fail(&r.fk, WF_UPLOAD, 0);
	uint64_t ino, fh;
	CHECK_EQ(rig_open(&r, "ckpt.pt", O_CREAT | O_WRONLY, &ino, &fh), 0);
	CHECK_EQ(rig_write(&r, ino, fh, 0, data, len), 0);
	CHECK(cfs_vfs_fsync(r.v, ino, fh) != 0);
	rig_kill(&r);
	r.fk.nfaults[WF_UPLOAD] = 0;
	rig_start(&r, 1);
	rig_advance(&r, 3000);
	CHECK(rig_wait(&r, rig_no_pending, NULL));
	CHECK_EQ(r.fk.resumed, 1);
	CHECK(rig_drive_has(&r, "ROOT", "ckpt.pt", data, len));
	free(data);
	rig_down(&r);
}

static void test_journal_of_another_endpoint_set_aside(void)
{
	struct rig r;
	rig_up(&r, 3600 * 1000);
	r.owner = "https://other.example";
	rig_start(&r, 1);
	uint64_t ino, fh;
	CHECK_EQ(rig_open(&r, "elsewhere.bin", O_CREAT | O_WRONLY, &ino, &fh), 0);
	CHECK_EQ(rig_write(&r, ino, fh, 0, ours, sizeof(ours)), 0);
	CHECK_EQ(rig_close(&r, ino, fh), 0);
	rig_kill(&r);
	r.owner = NULL; /* the same cache folder, mounted against another API URL */
	r.write_back_ms = 0;
	rig_start(&r, 1);
	rig_advance(&r, 3000);
	rig_pause_ms(100);
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 0);
	CHECK_EQ(rig_stats(&r).pending, 0);
	rig_kill(&r);
	rig_start(&r, 1); /* and it stays aside */
	rig_advance(&r, 3000);
	rig_pause_ms(50);
	CHECK_EQ(wfake_calls(&r.fk, WF_UPLOAD), 0);
	rig_down(&r);
}

/* ---- rename's crash ordering ------------------------------------------- */

static void test_rename_over_keeps_old_until_new_is_in(void)
{
	/* a failure at each Drive step of the replacement (the upload, the
	 * look at what it replaces, its trashing), with and without a death */
	static const enum wfake_kind at[] = { WF_UPLOAD, WF_GET, WF_UPDATE };
	for (int step = 0; step < 6; step++) {
		int die = step % 2;
		enum wfake_kind k = at[step / 2];
		struct rig r;
		rig_up(&r, 1000); /* nothing goes before the clock moves */
		rig_start(&r, 1);
		uint64_t ino, fh;
		CHECK_EQ(rig_open(&r, "old.tmp", O_CREAT | O_WRONLY, &ino, &fh), 0);
		CHECK_EQ(rig_write(&r, ino, fh, 0, ours, sizeof(ours)), 0);
		CHECK_EQ(rig_close(&r, ino, fh), 0);
		CHECK_EQ(cfs_vfs_rename(r.v, ++r.unique, CFS_ROOT_INO, "old.tmp", CFS_ROOT_INO,
					"old.bin", 0), 0);
		for (int i = 0; i < 3; i++)
			wfake_fail(&r.fk, k, CFS_E_NET);
		rig_advance(&r, 2000);
		CHECK(rig_wait_uploads(&r, 1));
		rig_pause_ms(50);
		/* a step failed: Drive still has the old file under its name (and,
		 * once uploaded, the new one beside it, never in its place half-done) */
		if (k == WF_UPLOAD)
			CHECK(rig_drive_has(&r, "ROOT", "old.bin", r.old, OLD_LEN));
		CHECK(!wfake_get(&r.fk, "F1")->trashed);
		if (die) {
			rig_kill(&r);
			rig_start(&r, 1);
		}
		int done = 0;
		for (int i = 0; i < 8 && !done; i++) { /* the backoff steps of the failed calls */
			rig_advance(&r, 8000);
			for (int t = 0; t < 40; t++) { /* uploaded, and what it replaces gone */
				if ((done = rig_no_pending(&r, NULL) && wfake_get(&r.fk, "F1")->trashed))
					break;
				rig_pause_ms(5);
			}
		}
		CHECK(done);
		CHECK(rig_drive_has(&r, "ROOT", "old.bin", ours, sizeof(ours)));
		CHECK_EQ(rig_count_named(&r, "ROOT", "old."), 1); /* F1 trashed, no old.tmp */
		CHECK(wfake_get(&r.fk, "F1")->trashed);
		rig_down(&r);
	}
}

int main(void)
{
	test_upq();
	test_journal_rows();
	test_damaged_journal_moved_aside();
	test_second_fsync_is_ours();
	test_conflict_is_another_writer();
	test_fatal_stops_and_sync_asks_once();
	test_network_backs_off_even_when_urgent();
	test_storage_full_waits();
	test_replay_states();
	test_replay_unchanged_not_uploaded();
	test_replay_distrusts_rows();
	test_replay_torn_row();
	test_replay_of_an_upload_that_landed();
	test_cut_session_resumed_by_next_process();
	test_journal_of_another_endpoint_set_aside();
	test_rename_over_keeps_old_until_new_is_in();
	return check_done("test_wpath");
}
