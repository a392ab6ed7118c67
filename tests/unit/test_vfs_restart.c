/* Unit test: a server process restarted under a live mount.  The first vfs
 * walks a tree and opens a file and a folder; it is then freed without
 * releasing anything (as if killed), and a second vfs on the same cache
 * folder must serve the inode and handle numbers the kernel still holds:
 * getattr on a deep inode, read on the old file handle (at the revision it
 * was opened at, even when the listing now names another), readdir on the
 * old folder handle.  Everything comes from the cache index (stored root,
 * listings, blocks), so Drive is never asked: its URL is a closed port, and
 * the test checks that no request was made.  It runs with the handle rows
 * in the cache index and in a shared table (fhtab.h) attached again by each
 * "process"; a server that keeps no rows (--recovery=off) writes none.
 * Also: the slim node's fields (right-sized and shared strings, interned
 * export types, binary checksums, revision hashes, the folder part), which
 * the sanitizer build checks for leaks and overruns. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth.h"
#include "check.h"
#include "dead_drive.h"
#include "drive.h"
#include "fhtab.h"
#include "http.h"
#include "inode.h"
#include "nsdb.h"
#include "store.h"
#include "store_util.h"
#include "vfs.h"

#define FSIZE (100000)

static void save_dir(struct cfs_nsdb *n, const char *cid, uint64_t ino, int is_dir,
		     const char *name, const char *id, const char *rev, int64_t size)
{
	struct cfs_lrow_entry e = { ino, is_dir, size, 1, 1, name, id, id, rev, "", "", "" };
	CHECK_EQ(cfs_nsdb_save_listing(n, cid, &e, 1, wall_ms()), 0);
}

/* root "ROOT" / a (D1, 10) / b (D2, 11) / f.txt (F1, 12, rev1) */
static void seed(struct cfs_store *s)
{
	struct cfs_nsdb *n;
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	struct cfs_lrow_entry root = { CFS_ROOT_INO, 1, 0, 1, 1, "/", "ROOT", "ROOT", "", "" };
	CHECK_EQ(cfs_nsdb_save_root(n, "root", &root), 0);
	save_dir(n, "ROOT", 10, 1, "a", "D1", "", 0);
	save_dir(n, "D1", 11, 1, "b", "D2", "", 0);
	save_dir(n, "D2", 12, 0, "f.txt", "F1", "r:rev1", FSIZE);
	cfs_nsdb_free(n);
	CHECK_EQ(put(s, "F1@r:rev1", 0, K64), 0);
	CHECK_EQ(put(s, "F1@r:rev1", 1, FSIZE - K64), 0);
}

static struct cfs_vfs *vfs_new(struct env *e, struct cfs_store *s, struct cfs_fhtab *t)
{
	struct cfs_vfs_opts o = { .dir_ttl_s = 3600, .fhtab = t };
	struct cfs_vfs *v = NULL;
	CHECK_EQ(cfs_vfs_new(e->drive, s, &o, &v), 0);
	if (!v)
		exit(1);
	return v;
}

struct names {
	char seen[8][64];
	int n;
};

static int on_dirent(const char *name, uint64_t ino, int is_dir, off_t next, void *arg)
{
	struct names *nm = arg;
	if (nm->n < 8)
		snprintf(nm->seen[nm->n++], sizeof(nm->seen[0]), "%s:%llu", name,
			 (unsigned long long)ino);
	return 0;
}

static int read_same(struct cfs_vfs *v, uint64_t ino, uint64_t fh)
{
	char *buf = malloc(FSIZE), *want = malloc(FSIZE);
	size_t got = 0;
	int rc = cfs_vfs_read(v, ino, fh, 0, FSIZE, buf, &got);
	fill(want, "F1@r:rev1", 0, K64);
	fill(want + K64, "F1@r:rev1", 1, FSIZE - K64);
	int ok = rc == 0 && got == FSIZE && memcmp(buf, want, FSIZE) == 0;
	if (!ok)
		fprintf(stderr, "read: rc %d, got %zu\n", rc, got);
	free(buf);
	free(want);
	return ok;
}

static void test_node_fields(void)
{
	struct cfs_inode *t;
	CHECK_EQ(cfs_inode_new(&t), 0);
	cfs_inode_lock(t);
	struct cfs_node *a = cfs_inode_add(t, "1abc", 2), *b = cfs_inode_add(t, "1def", 3);
	CHECK(a && b);
	CHECK(a->content_id == a->id); /* shared, not a copy */
	CHECK_STR(a->rev, "");
	CHECK_STR(a->export_mime, "");
	CHECK(!a->dir && !a->is_dir && a->size == -1);
	CHECK_EQ(cfs_node_set_content_id(a, "1target"), 0); /* a shortcut */
	CHECK_STR(a->content_id, "1target");
	CHECK_EQ(cfs_node_set_content_id(a, "1abc"), 0); /* back to itself: shared again */
	CHECK(a->content_id == a->id);
	CHECK_EQ(cfs_node_set_content_id(a, "1target2"), 0); /* freed by cfs_inode_free */
	char big[CFS_ID_MAX + 1];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK_EQ(cfs_node_set_content_id(b, big), -ENAMETOOLONG);
	CHECK(b->content_id == b->id);
	CHECK(cfs_inode_add(t, big, 9) == NULL);
	CHECK_EQ(cfs_node_set_rev(a, "r:0Babc"), 0);
	uint64_t h1 = cfs_node_rev_hash(a);
	CHECK_EQ(cfs_node_set_rev(a, "r:0Bdef"), 0);
	CHECK(h1 != 0 && cfs_node_rev_hash(a) != h1);
	CHECK_EQ(cfs_node_set_rev(a, "r:0Babc"), 0);
	CHECK(cfs_node_rev_hash(a) == h1);
	CHECK_EQ(cfs_node_set_rev(b, "v:3"), 0);
	CHECK_EQ(cfs_node_set_rev(b, ""), 0);
	CHECK_STR(b->rev, "");
	CHECK_EQ(cfs_node_set_export_mime(t, a, "application/pdf"), 0);
	CHECK_EQ(cfs_node_set_export_mime(t, b, "application/pdf"), 0);
	CHECK(a->export_mime == b->export_mime); /* interned */
	CHECK_EQ(cfs_node_set_export_mime(t, b, "text/csv"), 0);
	CHECK_STR(b->export_mime, "text/csv");
	CHECK_EQ(cfs_node_set_export_mime(t, b, NULL), 0);
	CHECK_STR(b->export_mime, "");
	char md5[33], sha[65];
	const char *m = "9E107D9D372BB6826BD81D3542A419D6";
	const char *x = "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592";
	cfs_node_set_sums(a, m, x);
	CHECK(a->has_md5 && a->has_sha256);
	cfs_node_md5_hex(a, md5);
	cfs_node_sha256_hex(a, sha);
	CHECK_STR(md5, "9e107d9d372bb6826bd81d3542a419d6");
	CHECK_STR(sha, x);
	cfs_node_set_sums(a, "", "d7a8");     /* absent, and too short */
	CHECK(!a->has_md5 && !a->has_sha256);
	cfs_node_md5_hex(a, md5);
	CHECK_STR(md5, "");
	cfs_node_set_sums(a, "9e107d9d372bb6826bd81d3542a419zz", "");
	CHECK(!a->has_md5);
	CHECK_EQ(cfs_node_make_dir(b), 0);
	struct cfs_dir *d = b->dir;
	CHECK(d && b->is_dir);
	CHECK_EQ(cfs_node_make_dir(b), 0); /* once */
	CHECK(b->dir == d);
	d->listing = cfs_listing_new(1);
	d->listing->e[0].name = strdup("x");
	d->listing->e[0].ino = 2;
	cfs_inode_unlock(t);
	cfs_inode_free(t); /* frees the strings, the folder part and its listing */
}

/* The restart story, with handle rows in the cache index or (shared) in a
 * table every "process" attaches again, as servers under one supervisor
 * attach its memfd. */
static void test_restart(int shared)
{
	char dir[64], home[80];
	mkdir_tmp(dir, sizeof(dir));
	/* no credential file of this machine's user is found */
	snprintf(home, sizeof(home), "%s/home", dir);
	setenv("HOME", home, 1);
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
	size_t tlen = cfs_fhtab_size(1024);
	void *mem = calloc(1, tlen);
	struct cfs_fhtab *t = NULL;
	if (shared)
		CHECK_EQ(cfs_fhtab_attach(mem, tlen, &t, NULL), 0);
	seed(s);
	struct env e;
	env_new(&e);

	/* first server process: walk down, open, read */
	struct cfs_vfs *v = vfs_new(&e, s, t);
	struct cfs_vfs_attr a;
	CHECK_EQ(cfs_vfs_getattr(v, 12, &a), -ENOENT); /* never listed, no parent rows yet */
	CHECK_EQ(cfs_vfs_lookup(v, CFS_ROOT_INO, "a", &a), 0);
	CHECK_EQ(a.ino, 10);
	CHECK_EQ(cfs_vfs_lookup(v, 10, "b", &a), 0);
	CHECK_EQ(a.ino, 11);
	CHECK_EQ(cfs_vfs_lookup(v, 11, "f.txt", &a), 0);
	CHECK_EQ(a.ino, 12);
	uint64_t fh = 0, dfh = 0, fh2 = 0;
	int keep, direct;
	CHECK_EQ(cfs_vfs_open(v, 12, O_RDONLY, 0, &fh, &keep, &direct), 0);
	CHECK_EQ(cfs_vfs_open(v, 12, O_RDONLY, 0, &fh2, &keep, &direct), 0);
	CHECK(fh != 0 && fh2 > fh);
	CHECK(read_same(v, 12, fh));
	CHECK_EQ(cfs_vfs_opendir(v, 11, &dfh), 0);
	CHECK(dfh > fh2);
	uint64_t fclosed = 0;
	CHECK_EQ(cfs_vfs_open(v, 12, O_RDONLY, 0, &fclosed, &keep, &direct), 0);
	cfs_vfs_release(v, 12, fclosed);
	size_t got;
	char b1[16];
	CHECK_EQ(cfs_vfs_read(v, 12, fclosed, 0, sizeof(b1), b1, &got), -EBADF);
	CHECK_EQ(cfs_vfs_read(v, 12, 77, 0, sizeof(b1), b1, &got), -EBADF);
	cfs_vfs_free(v); /* killed: fh, fh2 and dfh never released */
	if (shared) { /* the next process attaches the same memory */
		CHECK_EQ(cfs_fhtab_count(t), 2);
		cfs_fhtab_detach(t);
		CHECK_EQ(cfs_fhtab_attach(mem, tlen, &t, NULL), 0);
	}

	/* the file changed in Drive meanwhile: the stored listing names rev2 */
	struct cfs_nsdb *n;
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	save_dir(n, "D2", 12, 0, "f.txt", "F1", "r:rev2", FSIZE + 1);
	cfs_nsdb_free(n);

	/* second server process: the kernel's numbers still work */
	v = vfs_new(&e, s, t);
	CHECK_EQ(cfs_vfs_getattr(v, 12, &a), 0); /* deep inode, parents rebuilt */
	CHECK_EQ(a.ino, 12);
	CHECK_EQ(a.size, FSIZE + 1);
	CHECK(read_same(v, 12, fh)); /* pinned: rev1's bytes, not rev2 */
	CHECK_EQ(cfs_vfs_read(v, 12, fclosed, 0, sizeof(b1), b1, &got), -EBADF);
	CHECK_EQ(cfs_vfs_read(v, 11, fh, 0, sizeof(b1), b1, &got), -EBADF); /* wrong inode */
	CHECK_EQ(cfs_vfs_read(v, 12, dfh, 0, sizeof(b1), b1, &got), -EBADF);
	struct names nm = { .n = 0 };
	CHECK_EQ(cfs_vfs_readdir(v, 11, dfh, 0, on_dirent, &nm), 0);
	CHECK_EQ(nm.n, 3);
	CHECK_STR(nm.seen[0], ".:11");
	CHECK_STR(nm.seen[1], "..:10");
	CHECK_STR(nm.seen[2], "f.txt:12");
	cfs_vfs_releasedir(v, 11, dfh);
	cfs_vfs_releasedir(v, 11, dfh); /* unknown now: harmless */
	cfs_vfs_release(v, 12, fh);
	CHECK_EQ(cfs_vfs_read(v, 12, fh, 0, sizeof(b1), b1, &got), -EBADF);
	/* new numbers are above every earlier one */
	uint64_t fh3 = 0;
	CHECK_EQ(cfs_vfs_open(v, 12, O_RDONLY, 0, &fh3, &keep, &direct), 0);
	CHECK(fh3 > dfh);
	cfs_vfs_release(v, 12, fh3);
	CHECK_EQ(cfs_vfs_getattr(v, 999, &a), -ENOENT);
	cfs_vfs_free(v); /* fh2 still open: freed, its row kept */

	/* third process: fh2 was never released, so it still reads */
	v = vfs_new(&e, s, t);
	CHECK(read_same(v, 12, fh2));
	cfs_vfs_release(v, 12, fh2);
	cfs_vfs_free(v);
	uint64_t left = 99;
	CHECK_EQ(cfs_nsdb_fh_clear(s, &left), 0);
	CHECK_EQ(left, 0); /* every row was deleted at its release */
	if (shared) {
		CHECK_EQ(cfs_fhtab_count(t), 0);
		cfs_fhtab_detach(t);
	}
	free(mem);

	env_free(&e);
	cfs_store_close(s);
	rm_dir(dir);
}

/* A server whose death ends the mount (--recovery=off) keeps no rows: its
 * handles work, and nothing is written for them. */
static void test_no_rows(void)
{
	char dir[64];
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
	seed(s);
	struct env e;
	env_new(&e);
	struct cfs_vfs_opts o = { .dir_ttl_s = 3600, .no_fh_rows = 1 };
	struct cfs_vfs *v = NULL;
	CHECK_EQ(cfs_vfs_new(e.drive, s, &o, &v), 0);
	struct cfs_vfs_attr a;
	uint64_t fh = 0;
	int keep, direct;
	CHECK_EQ(cfs_vfs_lookup(v, CFS_ROOT_INO, "a", &a), 0);
	CHECK_EQ(cfs_vfs_lookup(v, 10, "b", &a), 0);
	CHECK_EQ(cfs_vfs_lookup(v, 11, "f.txt", &a), 0);
	CHECK_EQ(cfs_vfs_open(v, 12, O_RDONLY, 0, &fh, &keep, &direct), 0);
	CHECK(read_same(v, 12, fh));
	uint64_t rows = 99;
	CHECK_EQ(cfs_nsdb_fh_clear(s, &rows), 0);
	CHECK_EQ(rows, 0);
	cfs_vfs_release(v, 12, fh);
	cfs_vfs_free(v);
	env_free(&e);
	cfs_store_close(s);
	rm_dir(dir);
}

int main(void)
{
	test_node_fields();
	unsetenv("CLOUDSDK_CONFIG");
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("GCE_METADATA_HOST");
	unsetenv("GCE_METADATA_ROOT");
	setenv("COLABFS_ACCESS_TOKEN", "test-token", 1);
	test_restart(0);
	test_restart(1);
	test_no_rows();
	return check_done("test_vfs_restart");
}
