/* test_journal: the write journal (journal.h) and the staging folder
 * (staging.h) on a temporary folder, the row format against damage, and the
 * conflict-copy name rule (names.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "check.h"
#include "err.h"
#include "journal.h"
#include "names.h"
#include "staging.h"

static void entry(struct cfs_jent *e, const char *id, const char *name, int64_t size)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->id, sizeof(e->id), "%s", id);
	snprintf(e->parent, sizeof(e->parent), "0AParentFolder");
	snprintf(e->name, sizeof(e->name), "%s", name);
	snprintf(e->base_rev, sizeof(e->base_rev), "r:0BRev1");
	e->is_new = 1;
	e->size = size;
	e->mtime_ns = 1700000000123456789LL;
	e->gen = 7;
}

static void test_rows(void)
{
	struct cfs_jent e, d;
	entry(&e, "1AbcDEF", "model (1).pt", 123456789);
	snprintf(e.replaces, sizeof(e.replaces), "1Replaced");
	snprintf(e.uri, sizeof(e.uri), "http://127.0.0.1:1/upload/drive/v3/files?upload_id=xyz");
	e.confirmed = 8 << 20;
	e.seq = 42;
	struct cfs_buf b = { 0 };
	CHECK_EQ(cfs_journal_encode(&e, &b), 0);
	CHECK_EQ(cfs_journal_decode(b.data, b.len, &d), 0);
	CHECK_STR(d.id, e.id);
	CHECK_STR(d.name, e.name);
	CHECK_STR(d.parent, e.parent);
	CHECK_STR(d.base_rev, e.base_rev);
	CHECK_STR(d.replaces, e.replaces);
	CHECK_STR(d.uri, e.uri);
	CHECK_EQ(d.size, e.size);
	CHECK_EQ(d.confirmed, e.confirmed);
	CHECK_EQ(d.mtime_ns, e.mtime_ns);
	CHECK_EQ(d.gen, 7);
	CHECK_EQ(d.seq, 42);
	CHECK_EQ(d.is_new, 1);
	/* every cut and every flipped byte of the header: an error or a row
	 * that still holds together, never a crash */
	for (size_t n = 0; n < b.len; n++)
		CHECK(cfs_journal_decode(b.data, n, &d) == CFS_E_PROTO);
	unsigned char *p = (unsigned char *)b.data;
	p[0] ^= 1;
	CHECK(cfs_journal_decode(b.data, b.len, &d) == CFS_E_PROTO);
	p[0] ^= 1;
	/* confirmed past the size is damage */
	e.confirmed = e.size + 1;
	cfs_buf_reset(&b);
	CHECK_EQ(cfs_journal_encode(&e, &b), 0);
	CHECK(cfs_journal_decode(b.data, b.len, &d) == CFS_E_PROTO);
	cfs_buf_cleanup(&b);
}

static void test_store(const char *dir)
{
	struct cfs_journal *j;
	CHECK_EQ(cfs_journal_open(dir, &j), 0);
	struct cfs_jent a, b, c, got;
	entry(&a, "1First", "a.bin", 10);
	entry(&b, "1Second", "b.bin", 20);
	entry(&c, "1Third", "c.bin", 30);
	CHECK_EQ(cfs_journal_put(j, &b), 0);
	CHECK_EQ(cfs_journal_put(j, &a), 0);
	CHECK_EQ(cfs_journal_put(j, &c), 0);
	CHECK(b.seq < a.seq && a.seq < c.seq);
	/* a rewrite keeps its place in the order */
	b.size = 21;
	CHECK_EQ(cfs_journal_put(j, &b), 0);
	CHECK_EQ(cfs_journal_get(j, "1Second", &got), 0);
	CHECK_EQ(got.size, 21);
	CHECK_EQ(cfs_journal_del(j, "1Third"), 0);
	CHECK_EQ(cfs_journal_del(j, "1Third"), -ENOENT);
	CHECK_EQ(cfs_journal_done_put(j, 77, -EEXIST, 0), 0);
	CHECK_EQ(cfs_journal_done_put(j, 78, 0, 1234), 0);
	cfs_journal_close(j);

	/* a later process sees the same, in order */
	CHECK_EQ(cfs_journal_open(dir, &j), 0);
	struct cfs_jent *all = NULL;
	size_t n = 0, damaged = 9;
	CHECK_EQ(cfs_journal_load(j, &all, &n, &damaged), 0);
	CHECK_EQ(n, 2);
	CHECK_EQ(damaged, 0);
	if (n == 2) {
		CHECK_STR(all[0].id, "1Second");
		CHECK_EQ(all[0].size, 21);
		CHECK_STR(all[1].id, "1First");
	}
	free(all);
	int rc;
	uint64_t ino;
	CHECK_EQ(cfs_journal_done_get(j, 77, &rc, &ino), 0);
	CHECK_EQ(rc, -EEXIST);
	CHECK_EQ(cfs_journal_done_get(j, 78, &rc, &ino), 0);
	CHECK_EQ(ino, 1234);
	CHECK_EQ(cfs_journal_clear_done(j), 0);
	CHECK_EQ(cfs_journal_done_get(j, 78, &rc, &ino), -ENOENT);
	CHECK_EQ(cfs_journal_load(j, &all, &n, NULL), 0); /* entries stay */
	CHECK_EQ(n, 2);
	free(all);
	cfs_journal_close(j);
}

/* A process that changes the journal and dies without closing it: what a
 * server's death leaves.  "1Keep" and "1Dropped" are made durable, then
 * "1Dropped" removed and that removal made durable with "1Keep"'s second
 * version; "1Closed" (a file closed, never fsync'd) and a done row only
 * committed. */
static int die_after_changes(const char *dir, const char *boot)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct cfs_journal *j;
		struct cfs_jent a, b, c;
		entry(&a, "1Keep", "a.bin", 10);
		entry(&b, "1Closed", "b.bin", 20);
		entry(&c, "1Dropped", "c.bin", 30);
		if (cfs_journal_open_as(dir, boot, &j) || cfs_journal_put(j, &a) ||
		    cfs_journal_put(j, &c) || cfs_journal_sync(j, "1Keep") ||
		    cfs_journal_sync(j, "1Dropped") || cfs_journal_sync_pending(j) != 0 ||
		    cfs_journal_del(j, "1Dropped") || cfs_journal_sync_pending(j) != 1)
			_exit(3);
		a.size = 11;
		if (cfs_journal_put(j, &a) || cfs_journal_sync(j, "1Keep") ||
		    cfs_journal_put(j, &b) || cfs_journal_done_put(j, 5, -EEXIST, 99) ||
		    cfs_journal_sync_pending(j) != 1)
			_exit(4);
		_exit(0); /* no close, no flush: the process dies */
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void test_durability(const char *dir, const char *dir2)
{
	struct cfs_journal *j;
	struct cfs_jent *all = NULL, got;
	size_t n = 0;
	int rc;
	uint64_t ino;

	/* a server's death: a restarted one (same boot) sees every change */
	CHECK_EQ(die_after_changes(dir, "boot-1"), 0);
	CHECK_EQ(cfs_journal_open_as(dir, "boot-1", &j), 0);
	CHECK_EQ(cfs_journal_load(j, &all, &n, NULL), 0);
	CHECK_EQ(n, 2);
	if (n == 2) {
		CHECK_STR(all[0].id, "1Keep");
		CHECK_EQ(all[0].size, 11);
		CHECK_STR(all[1].id, "1Closed");
		CHECK(all[0].seq < all[1].seq);
	}
	free(all);
	CHECK_EQ(cfs_journal_get(j, "1Dropped", &got), -ENOENT);
	CHECK_EQ(cfs_journal_done_get(j, 5, &rc, &ino), 0);
	CHECK_EQ(rc, -EEXIST);
	CHECK_EQ(ino, 99);
	CHECK_EQ(cfs_journal_sync_pending(j), 1);
	CHECK_EQ(cfs_journal_sync(j, NULL), 0);
	CHECK_EQ(cfs_journal_sync_pending(j), 0);
	CHECK_EQ(cfs_journal_sync(j, NULL), 0); /* nothing to do */
	cfs_journal_close(j);

	/* a machine's death: only what was synced is there, and the recent
	 * file is not even read (garbage in it changes nothing) */
	CHECK_EQ(die_after_changes(dir2, "boot-1"), 0);
	char path[600];
	snprintf(path, sizeof(path), "%s/journal-recent.mdb", dir2);
	int fd = open(path, O_WRONLY);
	CHECK(fd >= 0);
	if (fd >= 0) {
		char junk[8192];
		memset(junk, 0x5a, sizeof(junk));
		CHECK(pwrite(fd, junk, sizeof(junk), 0) == (ssize_t)sizeof(junk));
		close(fd);
	}
	CHECK_EQ(cfs_journal_open_as(dir2, "boot-2", &j), 0);
	CHECK_EQ(cfs_journal_load(j, &all, &n, NULL), 0);
	CHECK_EQ(n, 1);
	if (n == 1) {
		CHECK_STR(all[0].id, "1Keep");
		CHECK_EQ(all[0].size, 11); /* its last synced version */
	}
	uint64_t kept = n == 1 ? all[0].seq : 0;
	free(all);
	CHECK_EQ(cfs_journal_get(j, "1Closed", &got), -ENOENT);
	CHECK_EQ(cfs_journal_get(j, "1Dropped", &got), -ENOENT);
	CHECK_EQ(cfs_journal_done_get(j, 5, &rc, &ino), -ENOENT);
	/* numbering goes on after the survivors */
	struct cfs_jent e;
	entry(&e, "1After", "d.bin", 1);
	CHECK_EQ(cfs_journal_put(j, &e), 0);
	CHECK(e.seq > kept);
	cfs_journal_close(j);
	/* a clean close made everything durable: another restart keeps it */
	CHECK_EQ(cfs_journal_open_as(dir2, "boot-3", &j), 0);
	CHECK_EQ(cfs_journal_get(j, "1After", &got), 0);
	CHECK_EQ(cfs_journal_load(j, &all, &n, NULL), 0);
	CHECK_EQ(n, 2);
	free(all);
	cfs_journal_close(j);
}

/* Puts while syncs run: a sync never drops from the recent rows a version
 * newer than the one it made durable. */
struct race {
	struct cfs_journal *j;
	int which, fails;
	int *done;
};

static void *race_put(void *arg)
{
	struct race *r = arg;
	struct cfs_jent e;
	char id[16];
	snprintf(id, sizeof(id), "1Race%d", r->which);
	entry(&e, id, "r.bin", 0);
	for (int i = 1; i <= 300; i++) {
		e.size = i;
		r->fails += cfs_journal_put(r->j, &e) != 0;
	}
	return NULL;
}

static void *race_sync(void *arg)
{
	struct race *r = arg;
	while (!__atomic_load_n(r->done, __ATOMIC_ACQUIRE))
		r->fails += cfs_journal_sync(r->j, NULL) != 0;
	return NULL;
}

static void test_sync_race(const char *dir)
{
	struct cfs_journal *j;
	CHECK_EQ(cfs_journal_open_as(dir, "boot-r", &j), 0);
	int done = 0;
	struct race w[3], sy = { .j = j, .done = &done };
	pthread_t tw[3], ts;
	CHECK(pthread_create(&ts, NULL, race_sync, &sy) == 0);
	for (int i = 0; i < 3; i++) {
		w[i] = (struct race){ .j = j, .which = i, .done = &done };
		CHECK(pthread_create(&tw[i], NULL, race_put, &w[i]) == 0);
	}
	for (int i = 0; i < 3; i++)
		pthread_join(tw[i], NULL);
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	pthread_join(ts, NULL);
	CHECK_EQ(sy.fails + w[0].fails + w[1].fails + w[2].fails, 0);
	struct cfs_jent got;
	for (int i = 0; i < 3; i++) {
		char id[16];
		snprintf(id, sizeof(id), "1Race%d", i);
		CHECK_EQ(cfs_journal_get(j, id, &got), 0);
		CHECK_EQ(got.size, 300);
	}
	CHECK_EQ(cfs_journal_sync(j, NULL), 0);
	/* what the last sync made durable is the last version */
	CHECK_EQ(die_after_changes(dir, "boot-r"), 0);
	cfs_journal_close(j);
	CHECK_EQ(cfs_journal_open_as(dir, "boot-r", &j), 0);
	for (int i = 0; i < 3; i++) {
		char id[16];
		snprintf(id, sizeof(id), "1Race%d", i);
		CHECK_EQ(cfs_journal_get(j, id, &got), 0);
		CHECK_EQ(got.size, 300);
	}
	cfs_journal_close(j);
}

static void test_stage(const char *dir)
{
	struct cfs_staging *s;
	CHECK_EQ(cfs_staging_open(dir, &s), 0);
	int fd, fd2;
	CHECK_EQ(cfs_staging_file(s, "1Abc", 0, 0, &fd), -ENOENT);
	CHECK_EQ(cfs_staging_file(s, "1Abc", 1, 0, &fd), 0);
	CHECK_EQ(cfs_staging_pwrite(fd, 5, "hello", 5), 0);
	char buf[16];
	size_t got = 0;
	CHECK_EQ(cfs_staging_pread(fd, 0, buf, sizeof(buf), &got), 0);
	CHECK_EQ(got, 10);
	CHECK(memcmp(buf, "\0\0\0\0\0hello", 10) == 0);
	CHECK_EQ(cfs_staging_file(s, "1Abc", 1, 1, &fd2), 0); /* trunc */
	struct stat st;
	CHECK(fstat(fd, &st) == 0 && st.st_size == 0);
	close(fd2);
	close(fd);
	/* names that could leave the folder are refused */
	CHECK_EQ(cfs_staging_file(s, "../x", 1, 0, &fd), -EINVAL);
	CHECK_EQ(cfs_staging_file(s, ".hidden", 1, 0, &fd), -EINVAL);
	CHECK_EQ(cfs_staging_file(s, "", 1, 0, &fd), -EINVAL);
	/* a symlink planted under a staged name is not followed */
	char path[512];
	snprintf(path, sizeof(path), "%s/w-1Link", dir);
	CHECK(symlink("/etc/passwd", path) == 0);
	CHECK_EQ(cfs_staging_file(s, "1Link", 1, 1, &fd), -ELOOP);
	CHECK_EQ(cfs_staging_remove(s, "1Link"), 0);
	CHECK_EQ(cfs_staging_remove(s, "1Abc"), 0);
	CHECK_EQ(cfs_staging_remove(s, "1Abc"), -ENOENT);
	cfs_staging_close(s);
}

static void test_conflict_names(void)
{
	char out[300];
	/* 2026-12-01 22:30:16 UTC */
	CHECK_EQ(cfs_names_conflict("model.pt", 1796164216, out, sizeof(out)), 0);
	CHECK_STR(out, "model (conflict 2026-12-01 223016).pt");
	CHECK_EQ(cfs_names_conflict("data.tar.gz", 1796164216, out, sizeof(out)), 0);
	CHECK_STR(out, "data.tar (conflict 2026-12-01 223016).gz");
	CHECK_EQ(cfs_names_conflict(".bashrc", 1796164216, out, sizeof(out)), 0);
	CHECK_STR(out, ".bashrc (conflict 2026-12-01 223016)");
	CHECK_EQ(cfs_names_conflict("noext", 1796164216, out, sizeof(out)), 0);
	CHECK_STR(out, "noext (conflict 2026-12-01 223016)");
	CHECK_EQ(cfs_names_conflict("model.pt", 1796164216, out, 10), -ENAMETOOLONG);
}

int main(void)
{
	char dir[] = "/tmp/cfs-journal-XXXXXX", sdir[] = "/tmp/cfs-stage-XXXXXX";
	char d1[] = "/tmp/cfs-journal-XXXXXX", d2[] = "/tmp/cfs-journal-XXXXXX";
	char d3[] = "/tmp/cfs-journal-XXXXXX";
	if (!mkdtemp(dir) || !mkdtemp(sdir) || !mkdtemp(d1) || !mkdtemp(d2) || !mkdtemp(d3))
		return 2;
	test_rows();
	test_store(dir);
	test_durability(d1, d2);
	test_sync_race(d3);
	test_stage(sdir);
	test_conflict_names();
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s %s %s %s", dir, sdir, d1, d2, d3);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	return check_done("test_journal");
}
