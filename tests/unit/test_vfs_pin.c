/* Unit test: open-less reads (src/core/vfs_pin.c), without FUSE or Drive.
 *
 * A read-only vfs made open-less serves reads by node id.  The story: a file
 * at revision 1 is looked up and read; it changes to revision 2 (what a
 * listing or files.get does to its node: supersede, then the new revision),
 * and the lookup now names another node id (same inode number), which reads
 * revision 2, while the old node id still reads revision 1 and shows its
 * size.  The server is then "killed" (freed, nothing released) and a second
 * one attaches the same shared table: both node ids still read their own
 * revision; FORGET of the old one drops its record (ESTALE after).  A
 * revision whose hash names the node id it leaves gets the next generation,
 * which a restarted server finds again.  The clock keeps at most
 * CFS_VFS_PIN_FILES file objects.  Without rows (--recovery=off), the old
 * node id after a change is ESTALE, never the new bytes.  Open-less opens
 * (vfs_pin.c): an order hint and the dataset detector are told of a node
 * id's first read at any offset and of each later read at offset 0, never
 * of reads elsewhere, and a file told again is counted open once; the
 * blocks kept objects hold stay near a share of the cache budget; a cached
 * copy that fails Drive's checksum drops the kernel's pages at once.  With
 * opens, a cached file is checked against Drive's checksum once per
 * revision.  The revision a node leaves goes from the cache: with opens when
 * the last reader of it is done, open-less at the FORGET of the node id that
 * showed it (vfs_retire.c).  Drive is a closed port: nothing is asked of it
 * (checked). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth.h"
#include "check.h"
#include "crypto.h"
#include "dead_drive.h"
#include "drive.h"
#include "fhtab.h"
#include "hash.h"
#include "hint.h"
#include "http.h"
#include "nsdb.h"
#include "store.h"
#include "store_util.h"
#include "vfs_int.h"

#define F1 100000
#define F2 90001
#define NSMALL 300
#define SMALL 100

static void put_blob(struct cfs_store *s, const char *key, int64_t size)
{
	for (uint64_t b = 0; (int64_t)(b * K64) < size; b++)
		CHECK_EQ(put(s, key, b, (uint32_t)(size - (int64_t)(b * K64) < K64 ?
						   size - (int64_t)(b * K64) : K64)), 0);
}

/* root / a (D1, 10) / f.txt (F1, 12, rev) and a / c (D3, 13) / s000..s299 */
static void seed(struct cfs_store *s, const char *rev, int64_t size)
{
	struct cfs_nsdb *n;
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	struct cfs_lrow_entry root = { CFS_ROOT_INO, 1, 0, 1, 1, "/", "ROOT", "ROOT", "", "" };
	CHECK_EQ(cfs_nsdb_save_root(n, "root", &root), 0);
	struct cfs_lrow_entry top = { 10, 1, 0, 1, 1, "a", "D1", "D1", "", "", "", "" };
	CHECK_EQ(cfs_nsdb_save_listing(n, "ROOT", &top, 1, wall_ms()), 0);
	struct cfs_lrow_entry a[2] = { { 13, 1, 0, 1, 1, "c", "D3", "D3", "", "", "", "" },
				       { 12, 0, size, 1, 1, "f.txt", "F1", "F1", rev, "", "", "" } };
	CHECK_EQ(cfs_nsdb_save_listing(n, "D1", a, 2, wall_ms()), 0);
	static char names[NSMALL][8], ids[NSMALL][8];
	struct cfs_lrow_entry c[NSMALL];
	for (int i = 0; i < NSMALL; i++) {
		snprintf(names[i], sizeof(names[i]), "s%03d", i);
		snprintf(ids[i], sizeof(ids[i]), "S%03d", i);
		c[i] = (struct cfs_lrow_entry){ 100 + (uint64_t)i, 0, SMALL, 1, 1, names[i], ids[i],
						ids[i], "r:1", "", "", "" };
	}
	CHECK_EQ(cfs_nsdb_save_listing(n, "D3", c, NSMALL, wall_ms()), 0);
	cfs_nsdb_free(n);
}

static struct cfs_vfs *pinned_vfs_ra(struct env *e, struct cfs_store *s, struct cfs_fhtab *t,
				     int fresh, int readahead)
{
	struct cfs_vfs_opts o = { .dir_ttl_s = 3600, .fhtab = t, .no_fh_rows = !t,
				  .fresh_mount = fresh, .no_dataset_readahead = !readahead };
	struct cfs_vfs *v = NULL;
	CHECK_EQ(cfs_vfs_new(e->drive, s, &o, &v), 0);
	if (!v)
		exit(1);
	CHECK_EQ(cfs_vfs_pin_start(v), 0);
	CHECK(cfs_vfs_pinned(v));
	return v;
}

static struct cfs_vfs *pinned_vfs(struct env *e, struct cfs_store *s, struct cfs_fhtab *t,
				  int fresh)
{
	return pinned_vfs_ra(e, s, t, fresh, 0);
}

/* 1 if node id reads the whole blob key of size bytes. */
static int reads(struct cfs_vfs *v, uint64_t nodeid, const char *key, int64_t size)
{
	char *buf = malloc((size_t)size + 16), *want = malloc((size_t)size);
	size_t got = 0;
	uint64_t drop = 0;
	int rc = cfs_vfs_pin_read(v, nodeid, 0, 0, (size_t)size + 16, buf, &got, &drop);
	cfs_vfs_pin_drop(v, drop);
	for (uint64_t b = 0; (int64_t)(b * K64) < size; b++)
		fill(want + b * K64, key, b, (uint32_t)(size - (int64_t)(b * K64) < K64 ?
							size - (int64_t)(b * K64) : K64));
	int ok = rc == 0 && got == (size_t)size && memcmp(buf, want, (size_t)size) == 0;
	if (!ok)
		fprintf(stderr, "read of %llx (%s): rc %d, got %zu of %lld\n",
			(unsigned long long)nodeid, key, rc, got, (long long)size);
	free(buf);
	free(want);
	return ok;
}

/* What a listing or files.get naming a new revision does to node ino. */
static void change(struct cfs_vfs *v, uint64_t ino, const char *rev, int64_t size)
{
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	CHECK(n != NULL);
	CHECK_EQ(cfs_vfs_node_set_rev(v, n, rev, 1), 0);
	n->size = size;
	cfs_inode_unlock(v->tab);
}

static uint64_t lookup_f(struct cfs_vfs *v)
{
	struct cfs_vfs_attr a;
	CHECK_EQ(cfs_vfs_lookup(v, CFS_ROOT_INO, "a", &a), 0);
	CHECK_EQ(a.nodeid, 10); /* folders: their inode numbers */
	CHECK_EQ(cfs_vfs_lookup(v, 10, "f.txt", &a), 0);
	CHECK_EQ(a.ino, 12);
	CHECK_EQ(cfs_vfs_pin_ino(a.nodeid), 12);
	return a.nodeid;
}

/* A revision string whose generation equals that of rev ("r:rev2") */
static void colliding_rev(const char *rev, char *out, size_t cap)
{
	uint64_t want = cfs_hash_fnv1a(rev) % 0x7fff;
	for (unsigned i = 0;; i++) {
		snprintf(out, cap, "r:x%u", i);
		if (cfs_hash_fnv1a(out) % 0x7fff == want)
			return;
	}
}

static void teardown(struct env *e, struct cfs_store *s, const char *dir)
{
	env_free(e);
	cfs_store_close(s);
	rm_dir(dir);
}

/* A cache folder (dir) holding the tree at revision 1 and both revisions' blocks. */
static struct cfs_store *story_store(char *dir, size_t cap)
{
	mkdir_tmp(dir, cap);
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
	seed(s, "r:rev1", F1);
	put_blob(s, "F1@r:rev1", F1);
	put_blob(s, "F1@r:rev2", F2);
	return s;
}

static void test_story(void)
{
	char dir[64];
	struct cfs_store *s = story_store(dir, sizeof(dir));
	size_t tlen = cfs_fhtab_size(1024);
	void *mem = calloc(1, tlen);
	struct cfs_fhtab *t = NULL;
	CHECK_EQ(cfs_fhtab_attach(mem, tlen, &t, NULL), 0);
	struct env e;
	env_new(&e);

	/* first server */
	struct cfs_vfs *v = pinned_vfs(&e, s, t, 1);
	uint64_t id1 = lookup_f(v);
	CHECK(reads(v, id1, "F1@r:rev1", F1));
	change(v, 12, "r:rev2", F2);
	uint64_t id2 = lookup_f(v);
	CHECK(id2 != id1);
	CHECK(reads(v, id2, "F1@r:rev2", F2));
	CHECK(reads(v, id1, "F1@r:rev1", F1)); /* the old inode keeps its revision */
	struct cfs_vfs_attr a;
	CHECK_EQ(cfs_vfs_pin_getattr(v, id1, 0, &a), 0);
	CHECK_EQ(a.size, F1);
	CHECK_EQ(a.ino, 12);
	CHECK_EQ(cfs_vfs_pin_getattr(v, id2, 0, &a), 0);
	CHECK_EQ(a.size, F2);
	cfs_vfs_free(v); /* killed */

	/* the listing the next server finds names revision 2 (as a fetched
	 * listing is stored before it is installed) */
	seed(s, "r:rev2", F2);
	cfs_fhtab_detach(t);
	CHECK_EQ(cfs_fhtab_attach(mem, tlen, &t, NULL), 0);
	v = pinned_vfs(&e, s, t, 0);
	CHECK_EQ(cfs_vfs_pin_getattr(v, id1, 0, &a), 0); /* the kernel's numbers work */
	CHECK_EQ(a.size, F1);
	CHECK(reads(v, id1, "F1@r:rev1", F1));
	CHECK(reads(v, id2, "F1@r:rev2", F2));
	CHECK_EQ(lookup_f(v), id2);
	cfs_vfs_pin_forget(v, id2); /* current: nothing to drop */
	CHECK(reads(v, id2, "F1@r:rev2", F2));
	CHECK_EQ(cfs_store_cached_bytes(s, "F1@r:rev1"), F1); /* its node id lives */
	cfs_vfs_pin_forget(v, id1);
	CHECK_EQ(cfs_vfs_pin_getattr(v, id1, 0, &a), -ESTALE);
	/* its file object goes, and the revision it showed is no file's now
	 * (vfs_retire.c): it leaves the cache */
	CHECK(cfs_handles_get(v->handles, CFS_VFS_PIN_FH | id1, H_FILE) == NULL);
	CHECK_EQ(cfs_store_cached_bytes(s, "F1@r:rev1"), 0);

	/* a revision whose hash names the node id it leaves */
	char rev3[32];
	colliding_rev("r:rev2", rev3, sizeof(rev3));
	char key3[64];
	snprintf(key3, sizeof(key3), "F1@%s", rev3);
	put_blob(s, key3, F1);
	change(v, 12, rev3, F1);
	uint64_t id3 = lookup_f(v);
	CHECK(id3 != id2);
	CHECK(reads(v, id3, key3, F1));
	CHECK(reads(v, id2, "F1@r:rev2", F2));
	cfs_vfs_free(v);
	CHECK_EQ(cfs_store_cached_bytes(s, "F1@r:rev2"), F2); /* id2 not forgotten */
	struct cfs_nsdb *n;
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	struct cfs_lrow_entry c3 = { 12, 0, F1, 1, 1, "f.txt", "F1", "F1", rev3, "", "", "" };
	struct cfs_lrow_entry d3 = { 13, 1, 0, 1, 1, "c", "D3", "D3", "", "", "", "" };
	struct cfs_lrow_entry both[2] = { d3, c3 };
	CHECK_EQ(cfs_nsdb_save_listing(n, "D1", both, 2, wall_ms()), 0);
	cfs_nsdb_free(n);
	cfs_fhtab_detach(t);
	CHECK_EQ(cfs_fhtab_attach(mem, tlen, &t, NULL), 0);
	v = pinned_vfs(&e, s, t, 0);
	CHECK_EQ(lookup_f(v), id3); /* the override row, found again */
	CHECK(reads(v, id3, key3, F1));
	CHECK(reads(v, id2, "F1@r:rev2", F2));

	/* the clock: at most CFS_VFS_PIN_FILES file objects */
	size_t before = cfs_handles_count(v->handles);
	char name[8], key[16];
	for (int i = 0; i < NSMALL; i++) {
		snprintf(key, sizeof(key), "S%03d@r:1", i);
		put_blob(s, key, SMALL);
	}
	for (int i = 0; i < NSMALL; i++) {
		snprintf(name, sizeof(name), "s%03d", i);
		snprintf(key, sizeof(key), "S%03d@r:1", i);
		CHECK_EQ(cfs_vfs_lookup(v, 13, name, &a), 0);
		CHECK(reads(v, a.nodeid, key, SMALL));
	}
	CHECK(cfs_handles_count(v->handles) <= CFS_VFS_PIN_FILES);
	CHECK(cfs_handles_count(v->handles) >= before);
	cfs_vfs_free(v);

	cfs_fhtab_detach(t);
	free(mem);
	teardown(&e, s, dir);
}

/* --recovery=off: no rows; the old node id fails rather than read the new */
static void test_without_rows(void)
{
	char dir[64];
	struct cfs_store *s = story_store(dir, sizeof(dir));
	struct env e;
	env_new(&e);
	struct cfs_vfs *v = pinned_vfs(&e, s, NULL, 1);
	uint64_t id1 = lookup_f(v);
	struct cfs_vfs_attr a;
	CHECK_EQ(cfs_vfs_pin_getattr(v, id1, 0, &a), 0);
	change(v, 12, "r:rev2", F2);
	CHECK_EQ(cfs_vfs_pin_getattr(v, id1, 0, &a), -ESTALE);
	size_t got;
	uint64_t drop;
	char b[16];
	CHECK_EQ(cfs_vfs_pin_read(v, id1, 0, 0, sizeof(b), b, &got, &drop), -ESTALE);
	CHECK(reads(v, lookup_f(v), "F1@r:rev2", F2));
	cfs_vfs_free(v);
	teardown(&e, s, dir);
}

/* A read of [off, off + len) of small file i (folder c) by process pid. */
static void read_small(struct cfs_vfs *v, int i, int64_t off, size_t len, uint32_t pid)
{
	char name[8], buf[SMALL];
	struct cfs_vfs_attr a;
	size_t got = 0;
	uint64_t drop = 0;
	snprintf(name, sizeof(name), "s%03d", i);
	CHECK_EQ(cfs_vfs_lookup(v, 13, name, &a), 0);
	CHECK_EQ(cfs_vfs_pin_read(v, a.nodeid, pid, off, len, buf, &got, &drop), 0);
	CHECK_EQ(got, len);
	cfs_vfs_pin_drop(v, drop);
}

static void hint_counts(struct cfs_vfs *v, uint64_t *hits, uint64_t *misses)
{
	struct cfs_hint_stats hs;
	pthread_mutex_lock(&v->scan.lock);
	cfs_hint_stats(v->scan.hint, 0, &hs);
	pthread_mutex_unlock(&v->scan.lock);
	*hits = hs.hits;
	*misses = hs.misses;
}

/* The detector's folder c (inode 13): distinct files counted, files open now. */
static void folder_counts(struct cfs_vfs *v, unsigned *count, unsigned *open_now)
{
	*count = *open_now = 0;
	pthread_mutex_lock(&v->scan.lock);
	for (int i = 0; i < CFS_SCAN_SLOTS; i++)
		if (v->scan.det.slots[i].folder == 13) {
			*count = v->scan.det.slots[i].count;
			*open_now = v->scan.det.slots[i].open_now;
		}
	pthread_mutex_unlock(&v->scan.lock);
}

/* The order hint and the dataset detector learn from open-less opens. */
static void test_open_less_opens(void)
{
	char dir[64], key[16];
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
	seed(s, "r:rev1", F1);
	for (int i = 0; i < NSMALL; i++) { /* whatever read-ahead asks for is cached */
		snprintf(key, sizeof(key), "S%03d@r:1", i);
		put_blob(s, key, SMALL);
	}
	struct env e;
	env_new(&e);
	struct cfs_vfs *v = pinned_vfs_ra(&e, s, NULL, 1, 1);
	struct cfs_vfs_attr a;
	CHECK_EQ(cfs_vfs_lookup(v, CFS_ROOT_INO, "a", &a), 0);
	CHECK_EQ(cfs_vfs_lookup(v, 10, "c", &a), 0); /* a / c: its listing in memory */

	/* a hint over two epochs, s000 s001 s002 each time (inodes 100..102),
	 * installed as cfs_vfs_hint_spool does but without its scanner thread */
	uint64_t inos[6] = { 100, 101, 102, 100, 101, 102 }, sizes[6];
	for (int i = 0; i < 6; i++)
		sizes[i] = SMALL;
	struct cfs_hint_opts ho = { .ahead_max = 1u << 20 };
	struct cfs_hint *h = NULL;
	CHECK_EQ(cfs_hint_new(inos, sizes, 6, &ho, 0, &h), 0);
	pthread_mutex_lock(&v->scan.lock);
	v->scan.hint = h;
	pthread_mutex_unlock(&v->scan.lock);
	uint64_t hits, misses;
	read_small(v, 0, 0, SMALL, 7); /* its first read: an open */
	hint_counts(v, &hits, &misses);
	CHECK_EQ(hits, 1);
	read_small(v, 0, 50, 50, 7); /* more of the same read: nothing */
	read_small(v, 1, 10, 90, 7); /* a first read elsewhere than at 0: an open */
	read_small(v, 1, 0, SMALL, 7); /* its first page, asked again: an open */
	read_small(v, 2, 0, SMALL, 8);
	hint_counts(v, &hits, &misses);
	CHECK_EQ(hits, 4); /* s000, s001, s001 again (the second epoch's), s002 */
	CHECK_EQ(misses, 0);
	read_small(v, 0, 0, SMALL, 7); /* the second epoch: kept objects, read again */
	read_small(v, 2, 0, SMALL, 8);
	read_small(v, 2, 40, 60, 8);
	hint_counts(v, &hits, &misses);
	CHECK_EQ(hits, 6);
	CHECK_EQ(misses, 0);
	read_small(v, 250, 0, SMALL, 7); /* not in the hint: the detector's */
	hint_counts(v, &hits, &misses);
	CHECK_EQ(misses, 1);
	unsigned count, open_now;
	folder_counts(v, &count, &open_now);
	CHECK_EQ(count, 1); /* hinted opens are the hint's alone */
	CHECK_EQ(open_now, 1);
	pthread_mutex_lock(&v->scan.lock);
	v->scan.hint = NULL;
	pthread_mutex_unlock(&v->scan.lock);
	cfs_hint_free(h);

	/* no hint: the detector counts each file once, open once, however
	 * often it is told */
	read_small(v, 200, 30, 70, 7);
	read_small(v, 180, 0, SMALL, 8);
	read_small(v, 200, 0, SMALL, 7);
	read_small(v, 180, 0, SMALL, 8);
	read_small(v, 180, 20, 80, 8);
	read_small(v, 250, 0, SMALL, 8);
	folder_counts(v, &count, &open_now);
	CHECK_EQ(count, 3);
	CHECK_EQ(open_now, 3);
	cfs_vfs_free(v);
	teardown(&e, s, dir);
}

/* The clock gives up kept objects while their holds pass held_max (an
 * eighth of the cache budget; set lower here): never far past it. */
static void test_held_bytes(void)
{
	char dir[64], key[16];
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
	seed(s, "r:rev1", F1);
	for (int i = 0; i < NSMALL; i++) {
		snprintf(key, sizeof(key), "S%03d@r:1", i);
		put_blob(s, key, SMALL);
	}
	struct env e;
	env_new(&e);
	struct cfs_vfs *v = pinned_vfs(&e, s, NULL, 1);
	CHECK_EQ(v->pin.held_max, (64u << 20) / 8);
	v->pin.held_max = 10 * SMALL;
	struct cfs_vfs_attr a;
	CHECK_EQ(cfs_vfs_lookup(v, CFS_ROOT_INO, "a", &a), 0);
	CHECK_EQ(cfs_vfs_lookup(v, 10, "c", &a), 0);
	size_t before = cfs_handles_count(v->handles);
	uint64_t most = 0;
	for (int i = 0; i < 60; i++) {
		read_small(v, i, 0, SMALL, 7);
		if (v->pin.held_sum > most)
			most = v->pin.held_sum;
	}
	CHECK(most <= 12 * SMALL);
	CHECK(cfs_handles_count(v->handles) <= before + 12);
	CHECK(cfs_handles_count(v->handles) >= before + 9);
	size_t kept = cfs_handles_count(v->handles);
	for (int i = 55; i < 60; i++) /* the last ones read are among those kept */
		read_small(v, i, 0, SMALL, 7);
	CHECK_EQ(cfs_handles_count(v->handles), kept);
	cfs_vfs_free(v);
	teardown(&e, s, dir);
}

static uint64_t inval_ino;
static int inval_calls;

static void count_inval(void *arg, uint64_t ino)
{
	(void)arg;
	inval_ino = ino;
	inval_calls++;
}

/* A whole-file check that fails on an open-less mount drops the kernel's
 * pages at once (no open will come to do it): an inode notice. */
static void test_checksum_mismatch(void)
{
	char dir[64];
	struct cfs_store *s = story_store(dir, sizeof(dir));
	struct env e;
	env_new(&e);
	struct cfs_vfs *v = pinned_vfs(&e, s, NULL, 1);
	v->notify = (struct cfs_vfs_notify){ .inode = count_inval }; /* as the poller's */
	uint64_t id = lookup_f(v);
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, 12);
	CHECK(n != NULL);
	cfs_node_set_sums(n, "0123456789abcdef0123456789abcdef", ""); /* not the blocks' */
	cfs_inode_unlock(v->tab);
	CHECK(reads(v, id, "F1@r:rev1", F1));
	CHECK_EQ(inval_calls, 0); /* checked when its file object is given up */
	for (int i = 0; i < NSMALL && !inval_calls; i++) { /* the clock passes it */
		char name[8], key[16];
		struct cfs_vfs_attr a;
		snprintf(name, sizeof(name), "s%03d", i);
		snprintf(key, sizeof(key), "S%03d@r:1", i);
		put_blob(s, key, SMALL);
		if (i == 0) {
			CHECK_EQ(cfs_vfs_lookup(v, 10, "c", &a), 0);
		}
		CHECK_EQ(cfs_vfs_lookup(v, 13, name, &a), 0);
		CHECK(reads(v, a.nodeid, key, SMALL));
	}
	CHECK_EQ(inval_calls, 1);
	CHECK_EQ(inval_ino, 12);
	uint64_t checked, mismatched;
	cfs_vfs_counters(v, &checked, &mismatched);
	CHECK_EQ(mismatched, 1);
	CHECK_EQ(cfs_store_cached_bytes(s, "F1@r:rev1"), 0); /* dropped */
	cfs_vfs_free(v);
	teardown(&e, s, dir);
}

/* The md5 of blob key's size bytes, as Drive would give it. */
static void blob_md5(const char *key, int64_t size, char hex[33])
{
	struct cfs_digest *d = NULL;
	char *buf = malloc(K64);
	CHECK_EQ(cfs_digest_new("md5", &d), 0);
	for (uint64_t b = 0; (int64_t)(b * K64) < size; b++) {
		uint32_t len = size - (int64_t)(b * K64) < K64 ? (uint32_t)(size - (int64_t)(b * K64)) : K64;
		fill(buf, key, b, len);
		CHECK_EQ(cfs_digest_update(d, buf, len), 0);
	}
	CHECK_EQ(cfs_digest_final_hex(d, hex, 33), 0);
	free(buf);
}

/* Opened, read whole and released: the files whole-file-checked so far. */
static uint64_t open_read_release(struct cfs_vfs *v, uint64_t ino, int64_t size)
{
	uint64_t fh, checked, mismatched;
	int keep, direct;
	char *buf = malloc((size_t)size + 16);
	size_t got = 0;
	CHECK_EQ(cfs_vfs_open(v, ino, O_RDONLY, 0, &fh, &keep, &direct), 0);
	CHECK_EQ(cfs_vfs_read(v, ino, fh, 0, (size_t)size + 16, buf, &got), 0);
	CHECK_EQ(got, (size_t)size);
	cfs_vfs_release(v, ino, fh);
	free(buf);
	cfs_vfs_counters(v, &checked, &mismatched);
	CHECK_EQ(mismatched, 0);
	return checked;
}

/* A vfs with opens (not open-less) over the story's store, f.txt looked up. */
static struct cfs_vfs *opens_vfs(struct env *e, struct cfs_store *s)
{
	env_new(e);
	struct cfs_vfs_opts o = { .dir_ttl_s = 3600, .no_fh_rows = 1, .fresh_mount = 1,
				  .no_dataset_readahead = 1 };
	struct cfs_vfs *v = NULL;
	CHECK_EQ(cfs_vfs_new(e->drive, s, &o, &v), 0);
	if (!v)
		exit(1);
	struct cfs_vfs_attr a;
	CHECK_EQ(cfs_vfs_lookup(v, CFS_ROOT_INO, "a", &a), 0);
	CHECK_EQ(cfs_vfs_lookup(v, 10, "f.txt", &a), 0);
	CHECK_EQ(a.ino, 12);
	return v;
}

/* With opens (not open-less): a completely cached file is checked against
 * Drive's checksum at its first release, not again at the next ones (the
 * check is skipped before anything is formatted), and again once the node
 * names another revision. */
static void test_checked_once_per_revision(void)
{
	char dir[64], md5[33];
	struct cfs_store *s = story_store(dir, sizeof(dir));
	struct env e;
	struct cfs_vfs *v = opens_vfs(&e, s);
	blob_md5("F1@r:rev1", F1, md5);
	cfs_inode_lock(v->tab);
	cfs_node_set_sums(cfs_inode_get(v->tab, 12), md5, "");
	cfs_inode_unlock(v->tab);
	CHECK_EQ(open_read_release(v, 12, F1), 1);
	CHECK_EQ(open_read_release(v, 12, F1), 1); /* that revision passed once */
	blob_md5("F1@r:rev2", F2, md5);
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, 12);
	CHECK_EQ(cfs_node_set_rev(n, "r:rev2"), 0);
	n->size = F2;
	cfs_node_set_sums(n, md5, "");
	cfs_inode_unlock(v->tab);
	CHECK_EQ(open_read_release(v, 12, F2), 2);
	CHECK_EQ(open_read_release(v, 12, F2), 2);
	cfs_vfs_free(v);
	teardown(&e, s, dir);
}

/* Node 12 about to show rev (what a listing, a files.get or an upload
 * landing does with opens), size bytes; the queue run after the lock. */
static void move_on(struct cfs_vfs *v, const char *rev, int64_t size)
{
	change(v, 12, rev, size);
	cfs_vfs_retire_run(v);
}

/* vfs_retire.c with opens: the revision a node leaves goes from the cache at
 * once when no open file reads it, else at the last release (held or only
 * used: a file too large to hold); the same revision again, a folder and a
 * first revision queue nothing; a queue that overflows leaves its oldest
 * keys to the LRU.  (Open-less: at FORGET, in test_story.) */
static void test_retired_revisions(void)
{
	char dir[64];
	struct cfs_store *s = story_store(dir, sizeof(dir));
	put_blob(s, "F1@r:rev3", F1);
	struct env e;
	struct cfs_vfs *v = opens_vfs(&e, s);
	struct cfs_vfs_attr a;
	uint64_t fh, fh2;
	int keep, direct;
	CHECK_EQ(cfs_vfs_open(v, 12, O_RDONLY, 0, &fh, &keep, &direct), 0);
	CHECK_EQ(cfs_vfs_open(v, 12, O_RDONLY, 0, &fh2, &keep, &direct), 0);
	move_on(v, "r:rev2", F2);
	CHECK_EQ(cfs_store_cached_bytes(s, "F1@r:rev1"), F1); /* read by two */
	cfs_vfs_release(v, 12, fh);
	CHECK_EQ(cfs_store_cached_bytes(s, "F1@r:rev1"), F1);
	cfs_vfs_release(v, 12, fh2);
	CHECK_EQ(cfs_store_cached_bytes(s, "F1@r:rev1"), 0);
	CHECK_EQ(cfs_store_cached_bytes(s, "F1@r:rev2"), F2);
	move_on(v, "r:rev2", F2); /* the same revision: kept */
	CHECK_EQ(cfs_store_cached_bytes(s, "F1@r:rev2"), F2);

	/* too large to hold (over an eighth of the budget): used, still waited for */
	CHECK_EQ(cfs_vfs_open(v, 12, O_RDONLY, 0, &fh, &keep, &direct), 0);
	cfs_inode_lock(v->tab);
	cfs_inode_get(v->tab, 12)->size = 1ll << 30;
	cfs_inode_unlock(v->tab);
	CHECK_EQ(cfs_vfs_open(v, 12, O_RDONLY, 0, &fh2, &keep, &direct), 0);
	cfs_vfs_release(v, 12, fh);
	move_on(v, "r:rev3", F1);
	CHECK_EQ(cfs_store_cached_bytes(s, "F1@r:rev2"), F2);
	cfs_vfs_release(v, 12, fh2);
	CHECK_EQ(cfs_store_cached_bytes(s, "F1@r:rev2"), 0);
	CHECK_EQ(cfs_store_cached_bytes(s, "F1@r:rev3"), F1);

	/* a folder, a first revision: nothing */
	cfs_inode_lock(v->tab);
	cfs_vfs_retire_rev(v, cfs_inode_get(v->tab, 10), "x");
	struct cfs_node *fresh = cfs_inode_add(v->tab, "NEW", 5000);
	CHECK(fresh != NULL);
	cfs_vfs_retire_rev(v, fresh, "r:1");
	CHECK_EQ(v->retire.n, 0);
	cfs_inode_unlock(v->tab);

	/* 70 revisions left at once: the 64 newest go, the 6 oldest stay */
	char name[8], key[16];
	for (int i = 0; i < 70; i++) {
		snprintf(key, sizeof(key), "S%03d@r:1", i);
		put_blob(s, key, SMALL);
		snprintf(name, sizeof(name), "s%03d", i);
		CHECK_EQ(cfs_vfs_lookup(v, 13, name, &a), 0);
	}
	cfs_inode_lock(v->tab);
	for (int i = 0; i < 70; i++)
		cfs_vfs_retire_rev(v, cfs_inode_get(v->tab, 100 + (uint64_t)i), "r:2");
	CHECK_EQ(v->retire.n, CFS_VFS_RETIRE);
	cfs_inode_unlock(v->tab);
	cfs_vfs_retire_run(v);
	int kept = 0, gone = 0;
	for (int i = 0; i < 70; i++) {
		snprintf(key, sizeof(key), "S%03d@r:1", i);
		if (cfs_store_cached_bytes(s, key))
			kept += i < 6;
		else
			gone += i >= 6;
	}
	CHECK_EQ(kept, 6);
	CHECK_EQ(gone, 64);
	CHECK_EQ(v->retire.n, 0);
	cfs_vfs_free(v);
	teardown(&e, s, dir);
}

int main(void)
{
	unsetenv("CLOUDSDK_CONFIG");
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("GCE_METADATA_HOST");
	unsetenv("GCE_METADATA_ROOT");
	setenv("COLABFS_ACCESS_TOKEN", "test-token", 1);
	char home[] = "/tmp/cfs-test-pin-home.XXXXXX";
	if (mkdtemp(home))
		setenv("HOME", home, 1); /* no credential file of this machine's user */
	test_story();
	test_without_rows();
	test_open_less_opens();
	test_held_bytes();
	test_checksum_mismatch();
	test_checked_once_per_revision();
	test_retired_revisions();
	rmdir(home);
	return check_done("test_vfs_pin");
}
