/* test_stage: the GPU loader's cache reader (kernels/stage.h) against a cache
 * folder written by the real store and namespace code, with a child process
 * playing the daemon (LMDB allows one environment per process, and the loader
 * is another process in real use).
 *
 * The "mount" is a plain folder holding the same bytes as the files described
 * by the stored listings (their inode numbers, sizes and mtimes taken from
 * stat), so reads through the mount and the checks against stat work as on a
 * real mount.  Checks every byte of whole files and of ranges that straddle
 * blocks, a batch mixing cached, partly cached, uncached and exported files,
 * a stale listing (read through the mount), an eviction with slot reuse
 * between plan and copy (torn-read guard, crc check off), a rewrite during
 * the copy (guard trips, copy again from the new rows), arena growth after
 * the arenas were mapped (remap), an injected crc error (read through the
 * mount), and -EBUSY for a second open in one process.  The pinned hot-block
 * cache (COLABFS_GPU_PINNED): chosen from this stage's counts, used only for
 * the very write it copied (evict, put back, rewrite), a rewrite while it is
 * filled drops the blocks, and a stress run with a thread that keeps evicting,
 * rewriting and putting back a.bin while batches are copied and the hot set
 * refreshed: every batch bit-exact (zero torn batches).
 *
 * `test_stage --make-cache DIR` only builds DIR/cache and DIR/mnt and exits
 * (used by tests/gpu/test_loader.py). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cacheview.h"
#include "check.h"
#include "classes.h"
#include "format.h"
#include "lrow.h"
#include "nsdb.h"
#include "stage.h"
#include "store.h"

#define BS (64u << 10)

struct ffile {
	const char *rel;   /* path under mnt */
	const char *id;    /* content id */
	uint64_t size;
	int exported;
	unsigned cached;   /* bit b: block b is put in the cache */
	struct stat st;
	unsigned char *data;
};

static struct ffile files[] = {
	{ "a.bin", "IDA", 3 * BS + 1234, 0, 0xf },
	{ "sub/b.bin", "IDB", 5000, 0, 0x1 },
	{ "sub/c.bin", "IDC", 2 * BS + 77, 0, 0x2 },   /* partly cached */
	{ "sub/d.bin", "IDD", BS, 0, 0x0 },            /* not cached */
	{ "doc.txt", "IDX", 3000, 1, 0x0 },            /* an exported Google file */
	{ "empty.bin", "IDE", 0, 0, 0x0 },
};
#define NF (sizeof(files) / sizeof(files[0]))

static char base[256], cdir[300], mdir[300];

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x9e3779b97f4a7c15ULL;
	x ^= x >> 29;
	return x;
}

static void gen_bytes(unsigned char *p, size_t n, uint64_t seed)
{
	uint64_t x = mix(seed + 1);
	for (size_t i = 0; i < n; i++) {
		if (i % 8 == 0)
			x = mix(x + i);
		p[i] = (unsigned char)(x >> (8 * (i % 8)));
	}
}

static void key_of(const struct ffile *f, char *out, size_t cap)
{
	snprintf(out, cap, "%s@r:1", f->id);
}

static void make_mount(void)
{
	char p[600];
	snprintf(p, sizeof(p), "%s/sub", mdir);
	mkdir(mdir, 0700);
	mkdir(p, 0700);
	for (size_t i = 0; i < NF; i++) {
		struct ffile *f = &files[i];
		f->data = malloc(f->size ? f->size : 1);
		gen_bytes(f->data, f->size, i * 1000 + 7);
		snprintf(p, sizeof(p), "%s/%s", mdir, f->rel);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || write(fd, f->data, f->size) != (ssize_t)f->size) {
			perror(p);
			exit(1);
		}
		close(fd);
		stat(p, &f->st);
	}
}

static struct cfs_lrow_entry entry_of(const struct ffile *f, const char *name)
{
	struct cfs_lrow_entry e = { 0 };
	e.ino = f->st.st_ino;
	e.size = (int64_t)f->size;
	e.mtime_ns = (int64_t)f->st.st_mtim.tv_sec * 1000000000LL + f->st.st_mtim.tv_nsec;
	e.ctime_ns = e.mtime_ns;
	e.name = name;
	e.id = f->id;
	e.content_id = f->id;
	e.rev = "r:1";
	e.export_mime = f->exported ? "text/plain" : "";
	e.md5 = "";
	e.sha256 = "";
	return e;
}

static int put_file_blocks(struct cfs_store *s, const struct ffile *f, const char *key,
			   const unsigned char *data, unsigned mask)
{
	for (uint64_t b = 0; b * BS < f->size; b++) {
		if (!(mask & (1u << b)))
			continue;
		uint64_t len = f->size - b * BS < BS ? f->size - b * BS : BS;
		int rc = cfs_store_put(s, key, b, data + b * BS, (uint32_t)len);
		if (rc)
			return rc;
	}
	return 0;
}

/* What the daemon would have stored: root, two listings, blocks. */
static int make_cache(struct cfs_store **out)
{
	struct cfs_store_opts o = { .dir = cdir, .block_size = BS, .budget = 256u << 20 };
	struct cfs_store *s;
	struct cfs_nsdb *ns;
	struct stat sst;
	char sub[600];
	int rc = cfs_store_open(&o, &s);
	if (rc)
		return rc;
	if ((rc = cfs_nsdb_new(s, &ns)) != 0)
		return rc;
	snprintf(sub, sizeof(sub), "%s/sub", mdir);
	stat(sub, &sst);
	struct cfs_lrow_entry root = { 1, 1, 0, 0, 0, "/", "ROOTID", "ROOTID", "", "", "", "" };
	/* a decoy root of another mount config that has no such files */
	struct cfs_lrow_entry other = { 1, 1, 0, 0, 0, "/", "OTHERROOT", "OTHERROOT", "", "", "",
					"" };
	struct cfs_lrow_entry top[4] = {
		entry_of(&files[0], "a.bin"), entry_of(&files[4], "doc.txt"),
		entry_of(&files[5], "empty.bin"),
		/* sub is a shortcut: its own id differs from its content id */
		{ (uint64_t)sst.st_ino, 1, 0, 0, 0, "sub", "SUBSHORTCUT", "SUBC", "", "", "", "" },
	};
	struct cfs_lrow_entry subl[3] = { entry_of(&files[1], "b.bin"),
					  entry_of(&files[2], "c.bin"),
					  entry_of(&files[3], "d.bin") };
	if ((rc = cfs_nsdb_save_root(ns, "aaa-other", &other)) != 0 ||
	    (rc = cfs_nsdb_save_root(ns, "root", &root)) != 0 ||
	    (rc = cfs_nsdb_save_listing(ns, "ROOTID", top, 4, 1000)) != 0 ||
	    (rc = cfs_nsdb_save_listing(ns, "SUBC", subl, 3, 1000)) != 0)
		return rc;
	cfs_nsdb_free(ns);
	for (size_t i = 0; i < NF && !rc; i++) {
		char key[64];
		key_of(&files[i], key, sizeof(key));
		rc = put_file_blocks(s, &files[i], key, files[i].data, files[i].cached);
	}
	*out = s;
	return rc;
}

/* ---- the daemon child ------------------------------------------------------ */

static int to_child[2], from_child[2];

static void daemon_loop(void)
{
	struct cfs_store *s;
	char cmd, ok = 'k';
	if (make_cache(&s) != 0) {
		ok = 'x';
		if (write(from_child[1], &ok, 1) < 0)
			_exit(2);
		_exit(1);
	}
	if (write(from_child[1], &ok, 1) != 1)
		_exit(2);
	unsigned char *junk = malloc(4 * BS);
	gen_bytes(junk, 4 * BS, 999);
	while (read(to_child[0], &cmd, 1) == 1) {
		int rc = 0;
		struct ffile *a = &files[0];
		switch (cmd) {
		case 'e': /* evict a.bin; another key reuses its slots with other bytes */
			rc = cfs_store_evict_prefix(s, "IDA@", NULL, NULL);
			if (!rc)
				rc = put_file_blocks(s, a, "JUNK@r:1", junk, 0xf);
			break;
		case 'p': /* put a.bin back */
			rc = cfs_store_evict_prefix(s, "JUNK@", NULL, NULL);
			if (!rc)
				rc = put_file_blocks(s, a, "IDA@r:1", a->data, 0xf);
			break;
		case 'r': /* rewrite a.bin's blocks (same bytes, new rows) */
			rc = put_file_blocks(s, a, "IDA@r:1", a->data, 0xf);
			break;
		case 'f': /* grow the arenas, then rewrite a.bin into the new slots */
			for (uint64_t b = 0; b < 64 && !rc; b++)
				rc = cfs_store_put(s, "FILL@r:1", b, junk, BS);
			if (!rc)
				rc = put_file_blocks(s, a, "IDA@r:1", a->data, 0xf);
			break;
		default:
			break;
		}
		ok = rc ? 'x' : 'k';
		if (write(from_child[1], &ok, 1) != 1)
			break;
		if (cmd == 'q')
			break;
	}
	cfs_store_close(s);
	free(junk);
	_exit(0);
}

static int ask(char cmd)
{
	char r = 0;
	if (write(to_child[1], &cmd, 1) != 1 || read(from_child[0], &r, 1) != 1)
		return -1;
	return r == 'k' ? 0 : -1;
}

/* ---- checks ---------------------------------------------------------------- */

static int batch_matches(struct cfs_stage_plan *p, const unsigned char *buf,
			 const struct cfs_stage_range *r, const int *fi, size_t n)
{
	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		const struct ffile *f = &files[fi[i]];
		uint64_t off = r[i].off < f->size ? r[i].off : f->size;
		uint64_t len = f->size - off < r[i].len ? f->size - off : r[i].len;
		if (cfs_stage_plan_length(p, i) != len ||
		    memcmp(buf + cfs_stage_plan_offset(p, i), f->data + off, len) != 0) {
			fprintf(stderr, "range %zu (%s %llu+%llu) differs\n", i, f->rel,
				(unsigned long long)r[i].off, (unsigned long long)r[i].len);
			bad++;
		}
	}
	return bad;
}

static int copy_check(struct cfs_stage *s, const struct cfs_stage_range *r, const int *fi,
		      size_t n, struct cfs_stage_plan **keep)
{
	struct cfs_stage_plan *p;
	int rc = cfs_stage_plan_new(s, r, n, &p);
	CHECK_EQ(rc, 0);
	if (rc)
		return 1;
	uint64_t bytes = cfs_stage_plan_bytes(p);
	unsigned char *buf = malloc(bytes + 1);
	rc = cfs_stage_copy(s, p, buf, bytes);
	CHECK_EQ(rc, 0);
	int bad = batch_matches(p, buf, r, fi, n);
	CHECK_EQ(bad, 0);
	free(buf);
	if (keep)
		*keep = p;
	else
		cfs_stage_plan_free(p);
	return bad;
}

static void test_whole_files(struct cfs_stage *s)
{
	struct cfs_stage_range r[NF];
	int fi[NF];
	char paths[NF][400];
	for (size_t i = 0; i < NF; i++) {
		/* absolute paths for some, relative for the others */
		if (i % 2)
			snprintf(paths[i], sizeof(paths[i]), "%s/%s", mdir, files[i].rel);
		else
			snprintf(paths[i], sizeof(paths[i]), "%s", files[i].rel);
		r[i] = (struct cfs_stage_range){ paths[i], 0, CFS_STAGE_TO_EOF };
		fi[i] = (int)i;
	}
	struct cfs_stage_stats a, b;
	struct cfs_stage_plan *p = NULL;
	cfs_stage_get_stats(s, &a);
	copy_check(s, r, fi, NF, &p);
	cfs_stage_get_stats(s, &b);
	/* cached: a.bin 4 blocks, b.bin 1, c.bin block 1 */
	CHECK_EQ(b.blocks_cached - a.blocks_cached, 6);
	CHECK_EQ(b.bytes_cached - a.bytes_cached, files[0].size + files[1].size + BS);
	CHECK_EQ(cfs_stage_plan_resident(p), files[0].size + files[1].size + BS);
	/* c.bin blocks 0 and 2, d.bin, doc.txt through the mount */
	CHECK_EQ(b.bytes_mount - a.bytes_mount, BS + 77 + BS + 3000);
	CHECK_EQ(b.retries - a.retries, 0);
	CHECK_EQ(b.crc_errors - a.crc_errors, 0);
	CHECK_EQ(b.unresolved - a.unresolved, 1); /* doc.txt: exported, no blocks */
	CHECK_EQ(cfs_stage_plan_count(p), NF);
	CHECK_EQ(cfs_stage_plan_length(p, 5), 0);
	cfs_stage_plan_free(p);
}

static void test_ranges(struct cfs_stage *s)
{
	struct cfs_stage_range r[64];
	int fi[64];
	uint64_t x = 12345;
	for (int i = 0; i < 64; i++) {
		int f = (int)((x = mix(x)) % 4);
		uint64_t sz = files[f].size;
		r[i].path = files[f].rel;
		r[i].off = (x = mix(x)) % (sz + 100);
		r[i].len = (x = mix(x)) % (2 * BS + 10);
		fi[i] = f;
	}
	/* block boundaries exactly */
	r[0] = (struct cfs_stage_range){ "a.bin", BS - 1, 2 };
	r[1] = (struct cfs_stage_range){ "a.bin", BS, BS };
	r[2] = (struct cfs_stage_range){ "a.bin", 3 * BS, CFS_STAGE_TO_EOF };
	fi[0] = fi[1] = fi[2] = 0;
	copy_check(s, r, fi, 64, NULL);

	/* copy_part over odd slices gives the same batch */
	struct cfs_stage_plan *p;
	CHECK_EQ(cfs_stage_plan_new(s, r, 64, &p), 0);
	uint64_t n = cfs_stage_plan_bytes(p);
	unsigned char *buf = malloc(n + 1);
	for (uint64_t o = 0; o < n;) {
		uint64_t l = 7777 + o % 5000;
		if (l > n - o)
			l = n - o;
		CHECK_EQ(cfs_stage_copy_part(s, p, o, l, buf + o), 0);
		o += l;
	}
	CHECK_EQ(batch_matches(p, buf, r, fi, 64), 0);
	CHECK_EQ(cfs_stage_copy_part(s, p, n, 1, buf), -EINVAL);
	free(buf);
	cfs_stage_plan_free(p);

	struct cfs_stage_range bad[2] = { { "/elsewhere/x", 0, 1 }, { "nope.bin", 0, 1 } };
	CHECK_EQ(cfs_stage_plan_new(s, bad, 1, &p), -EINVAL);
	CHECK_EQ(cfs_stage_plan_new(s, bad + 1, 1, &p), -ENOENT);
	struct cfs_stage_range dir = { "sub", 0, 1 };
	CHECK_EQ(cfs_stage_plan_new(s, &dir, 1, &p), -EISDIR);
}

/* A file changed behind the stored listing: its stat no longer agrees. */
static void test_stale_listing(struct cfs_stage *s)
{
	char p[600];
	struct timespec ts[2] = { { 1000, 0 }, { 1000, 0 } };
	snprintf(p, sizeof(p), "%s/%s", mdir, files[1].rel);
	utimensat(AT_FDCWD, p, ts, 0);
	struct cfs_stage_stats a, b;
	struct cfs_stage_range r = { files[1].rel, 0, CFS_STAGE_TO_EOF };
	int fi = 1;
	cfs_stage_get_stats(s, &a);
	copy_check(s, &r, &fi, 1, NULL);
	cfs_stage_get_stats(s, &b);
	CHECK_EQ(b.unresolved - a.unresolved, 1);
	CHECK_EQ(b.bytes_mount - a.bytes_mount, files[1].size);
	ts[0] = ts[1] = files[1].st.st_mtim;
	utimensat(AT_FDCWD, p, ts, 0);
}

static void test_evicted_between_plan_and_copy(void)
{
	struct cfs_stage *s;
	CHECK_EQ(cfs_stage_open(cdir, mdir, CFS_STAGE_NO_VERIFY, &s), 0);
	struct cfs_stage_range r = { "a.bin", 0, CFS_STAGE_TO_EOF };
	struct cfs_stage_plan *p;
	CHECK_EQ(cfs_stage_plan_new(s, &r, 1, &p), 0);
	CHECK_EQ(cfs_stage_plan_resident(p), files[0].size);
	CHECK_EQ(ask('e'), 0); /* the slots now hold JUNK's bytes */
	unsigned char *buf = malloc(files[0].size);
	struct cfs_stage_stats st;
	CHECK_EQ(cfs_stage_copy(s, p, buf, files[0].size), 0);
	CHECK(memcmp(buf, files[0].data, files[0].size) == 0);
	cfs_stage_get_stats(s, &st);
	CHECK_EQ(st.retries, 4);
	CHECK_EQ(st.blocks_cached, 0);
	CHECK_EQ(st.bytes_mount, files[0].size);
	cfs_stage_plan_free(p);
	CHECK_EQ(ask('p'), 0);
	free(buf);
	cfs_stage_close(s);
}

static int hook_calls;
static void rewrite_hook(void *arg)
{
	(void)arg;
	if (hook_calls++ == 0)
		CHECK_EQ(ask('r'), 0);
}

static void test_rewrite_during_copy(void)
{
	struct cfs_stage *s;
	CHECK_EQ(cfs_stage_open(cdir, mdir, 0, &s), 0);
	struct cfs_stage_range r = { "a.bin", 0, CFS_STAGE_TO_EOF };
	int fi = 0;
	cfs_stage_set_hook(s, rewrite_hook, NULL);
	hook_calls = 0;
	copy_check(s, &r, &fi, 1, NULL);
	cfs_stage_set_hook(s, NULL, NULL);
	struct cfs_stage_stats st;
	cfs_stage_get_stats(s, &st);
	CHECK_EQ(hook_calls, 2);   /* a second round after the rows changed */
	CHECK_EQ(st.retries, 4);
	CHECK_EQ(st.blocks_cached, 4); /* copied again from the new rows */
	CHECK_EQ(st.bytes_mount, 0);

	/* the arenas grow after they were mapped: a.bin's rows now point past
	 * the mapping */
	CHECK_EQ(ask('f'), 0);
	copy_check(s, &r, &fi, 1, NULL);
	cfs_stage_get_stats(s, &st);
	CHECK_EQ(st.blocks_cached, 8);
	CHECK_EQ(st.bytes_mount, 0);
	cfs_stage_close(s);
}

/* Flips a byte of b.bin's block in its arena. */
static int corrupt_b(void)
{
	struct cfs_cview *v;
	struct cfs_cview_txn *t;
	struct cfs_fmt_row row;
	char name[32], path[600];
	int rc = cfs_cview_open(cdir, &v);
	if (rc)
		return rc;
	if ((rc = cfs_cview_begin(v, &t)) == 0) {
		rc = cfs_cview_block(t, "IDB@r:1", 0, &row);
		cfs_cview_end(t);
	}
	cfs_cview_close(v);
	if (rc)
		return rc;
	cfs_fmt_arena_name(row.cls, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", cdir, name);
	int fd = open(path, O_RDWR);
	unsigned char c = 0;
	off_t at = (off_t)(row.slot * cfs_class_size(row.cls)) + 100;
	if (fd < 0 || pread(fd, &c, 1, at) != 1)
		return -EIO;
	c ^= 0x40;
	rc = pwrite(fd, &c, 1, at) == 1 ? 0 : -EIO;
	close(fd);
	return rc;
}

static void test_crc_error(void)
{
	CHECK_EQ(corrupt_b(), 0);
	struct cfs_stage *s;
	CHECK_EQ(cfs_stage_open(cdir, mdir, 0, &s), 0);
	struct cfs_stage_range r[2] = { { "sub/b.bin", 0, CFS_STAGE_TO_EOF },
					{ "sub/b.bin", 10, 200 } };
	int fi[2] = { 1, 1 };
	copy_check(s, r, fi, 2, NULL);
	struct cfs_stage_stats st;
	cfs_stage_get_stats(s, &st);
	CHECK_EQ(st.crc_errors, 2);
	CHECK_EQ(st.bytes_mount, files[1].size + 200);
	cfs_stage_close(s);
}

static void hot_stats(struct cfs_stage *s, struct cfs_stage_stats *st)
{
	cfs_stage_get_stats(s, st);
}

static int hot_fill_calls;
static void rewrite_once_hook(void *arg)
{
	(void)arg;
	if (hot_fill_calls++ == 0)
		CHECK_EQ(ask('r'), 0);
}

static void test_hot_cache(void)
{
	struct cfs_stage *s;
	struct cfs_stage_stats st;
	setenv("COLABFS_GPU_PINNED", "1M", 1);
	setenv("COLABFS_GPU_PINNED_REFRESH", "3600", 1);
	CHECK_EQ(cfs_stage_open(cdir, mdir, 0, &s), 0);
	unsetenv("COLABFS_GPU_PINNED");
	struct cfs_stage_range r[2] = { { "a.bin", 0, CFS_STAGE_TO_EOF },
					{ "sub/b.bin", 0, CFS_STAGE_TO_EOF } };
	int fi[2] = { 0, 1 };
	/* the first plan chooses (nothing counted yet), then copies from the arenas */
	copy_check(s, r, fi, 2, NULL);
	hot_stats(s, &st);
	CHECK_EQ(st.hot_refreshes, 1);
	CHECK_EQ(st.hot_blocks, 0);
	CHECK_EQ(st.hot_misses, 5);
	/* counted now: a refresh takes a.bin's 4 blocks and b.bin's */
	CHECK_EQ(cfs_stage_hot_refresh(s), 0);
	hot_stats(s, &st);
	CHECK_EQ(st.hot_blocks, 5);
	CHECK_EQ(st.hot_bytes, files[0].size + files[1].size);
	CHECK_EQ(st.hot_cuda, 0);
	copy_check(s, r, fi, 2, NULL);
	hot_stats(s, &st);
	CHECK_EQ(st.hot_hits, 5);
	/* a budget that holds only some: the most used first */
	CHECK_EQ(cfs_stage_set_pinned(s, 2 * BS), 0);
	copy_check(s, r, fi, 1, NULL); /* refresh on this plan: every block counted twice */
	hot_stats(s, &st);
	/* ties go to the older write: b.bin (a.bin was rewritten by earlier tests),
	 * then a.bin's first block; the next full block does not fit, its short
	 * last one does */
	CHECK_EQ(st.hot_blocks, 3);
	CHECK_EQ(st.hot_bytes, BS + 1234 + 5000);
	CHECK_EQ(cfs_stage_set_pinned(s, 1u << 20), 0);
	CHECK_EQ(cfs_stage_hot_refresh(s), 0);

	/* evicted and the slots reused by other bytes: no hot hit, exact bytes */
	CHECK_EQ(ask('e'), 0);
	hot_stats(s, &st);
	uint64_t hits = st.hot_hits;
	copy_check(s, r, fi, 1, NULL);
	hot_stats(s, &st);
	CHECK_EQ(st.hot_hits, hits);
	/* put back: new writes (new generations), the old hot copies do not match */
	CHECK_EQ(ask('p'), 0);
	copy_check(s, r, fi, 1, NULL);
	hot_stats(s, &st);
	CHECK_EQ(st.hot_hits, hits);
	CHECK_EQ(cfs_stage_hot_refresh(s), 0);
	copy_check(s, r, fi, 1, NULL);
	hot_stats(s, &st);
	CHECK_EQ(st.hot_hits, hits + 4);

	/* a rewrite while the hot set is filled: those copies are dropped */
	CHECK_EQ(cfs_stage_set_pinned(s, 0), 0);
	CHECK_EQ(cfs_stage_set_pinned(s, 1u << 20), 0);
	cfs_stage_set_hook(s, rewrite_once_hook, NULL);
	hot_fill_calls = 0;
	CHECK_EQ(cfs_stage_hot_refresh(s), 0);
	cfs_stage_set_hook(s, NULL, NULL);
	hot_stats(s, &st);
	CHECK_EQ(st.hot_dropped, 4);
	CHECK_EQ(st.hot_blocks, 1); /* b.bin only */
	copy_check(s, r, fi, 2, NULL);
	cfs_stage_close(s);
}

static volatile int stress_stop;
static int stress_ops;

static void *stress_daemon(void *arg)
{
	(void)arg;
	const char seq[] = "erpr";
	for (int i = 0; !stress_stop; i++) {
		if (ask(seq[i % 4]) != 0) {
			CHECK(0);
			break;
		}
		stress_ops++;
	}
	return NULL;
}

static void test_hot_stress(void)
{
	struct cfs_stage *s;
	struct cfs_stage_stats st;
	setenv("COLABFS_GPU_PINNED", "4M", 1);
	setenv("COLABFS_GPU_PINNED_REFRESH", "0", 1); /* refresh on every plan */
	CHECK_EQ(cfs_stage_open(cdir, mdir, 0, &s), 0);
	unsetenv("COLABFS_GPU_PINNED");
	unsetenv("COLABFS_GPU_PINNED_REFRESH");
	struct cfs_stage_range r[3] = { { "a.bin", 0, CFS_STAGE_TO_EOF },
					{ "a.bin", BS - 100, 2 * BS },
					{ "sub/b.bin", 0, CFS_STAGE_TO_EOF } };
	int fi[3] = { 0, 0, 1 };
	pthread_t th;
	stress_stop = 0;
	stress_ops = 0;
	pthread_create(&th, NULL, stress_daemon, NULL);
	int torn = 0, batches = 0;
	time_t end = time(NULL) + 2;
	while (time(NULL) < end || batches < 50) {
		torn += copy_check(s, r, fi, 3, NULL) != 0;
		batches++;
	}
	stress_stop = 1;
	pthread_join(th, NULL);
	CHECK_EQ(ask('p'), 0);
	hot_stats(s, &st);
	fprintf(stderr, "hot stress: %d batches, %d daemon ops, %d torn; hot hits %llu, "
		"misses %llu, dropped %llu, retries %llu, mount blocks %llu\n", batches, stress_ops,
		torn, (unsigned long long)st.hot_hits, (unsigned long long)st.hot_misses,
		(unsigned long long)st.hot_dropped, (unsigned long long)st.retries,
		(unsigned long long)st.blocks_mount);
	CHECK_EQ(torn, 0);
	CHECK(st.hot_hits > 0);
	CHECK(stress_ops > 10);
	cfs_stage_close(s);
}

static void rm_rf(const char *dir)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--make-cache") == 0) {
		struct cfs_store *s;
		snprintf(cdir, sizeof(cdir), "%s/cache", argv[2]);
		snprintf(mdir, sizeof(mdir), "%s/mnt", argv[2]);
		mkdir(cdir, 0700);
		make_mount();
		int rc = make_cache(&s);
		cfs_store_close(s);
		return rc ? 1 : 0;
	}
	snprintf(base, sizeof(base), "/tmp/cfs-stage-XXXXXX");
	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(cdir, sizeof(cdir), "%s/cache", base);
	snprintf(mdir, sizeof(mdir), "%s/mnt", base);
	mkdir(cdir, 0700);
	make_mount();
	if (pipe(to_child) || pipe(from_child))
		return 1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0)
		daemon_loop();
	char ok = 0;
	if (read(from_child[0], &ok, 1) != 1 || ok != 'k') {
		fprintf(stderr, "daemon child failed to build the cache\n");
		return 1;
	}

	struct cfs_stage *s, *s2;
	CHECK_EQ(cfs_stage_open(cdir, "/nonexistent-mount", 0, &s), -ENOENT);
	CHECK_EQ(cfs_stage_open(cdir, mdir, 0, &s), 0);
	CHECK_EQ(cfs_stage_block_size(s), BS);
	CHECK_EQ(cfs_stage_open(cdir, mdir, 0, &s2), -EBUSY);
	test_whole_files(s);
	test_ranges(s);
	test_stale_listing(s);
	cfs_stage_close(s);
	test_evicted_between_plan_and_copy();
	test_rewrite_during_copy();
	test_hot_cache();
	test_hot_stress();
	test_crc_error();

	ask('q');
	close(to_child[1]);
	waitpid(pid, NULL, 0);
	for (size_t i = 0; i < NF; i++)
		free(files[i].data);
	rm_rf(base);
	return check_done("test_stage");
}
