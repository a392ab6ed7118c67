/* Unit tests: a damaged cache index (issue 13, item 2).  A truncated
 * index.mdb (its last page past the end of the file) and one whose last open
 * never finished (the marker left behind) are moved aside and replaced by an
 * empty one, counted in index.resets; inode numbers of the new index start
 * past every number the old one could have handed out. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cacheview.h"
#include "index.h"
#include "log.h"
#include "nsdb.h"
#include "store_util.h"

static struct cfs_store *open_at(const char *dir)
{
	struct cfs_store_opts o = { .dir = dir, .block_size = K64, .budget = 64u << 20 };
	struct cfs_store *s = NULL;
	CHECK_EQ(cfs_store_open(&o, &s), 0);
	return s;
}

static void fill_store(struct cfs_store *s)
{
	char buf[1000];
	for (uint64_t b = 0; b < 20; b++) {
		fill(buf, "f@r", b, sizeof(buf));
		CHECK_EQ(cfs_store_put(s, "f@r", b, buf, sizeof(buf)), 0);
	}
	CHECK_EQ(cfs_store_meta_put(s, "dirs", "k", 1, "v", 1), 0);
}

static struct cfs_store_stats st_of(struct cfs_store *s)
{
	struct cfs_store_stats st;
	cfs_store_stats(s, &st);
	return st;
}

static void pages(void)
{
	char dir[64], p[128];
	mkdir_tmp(dir, sizeof(dir));
	snprintf(p, sizeof(p), "%s/f", dir);
	int fd = open(p, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, 11 * 4096), 0);
	close(fd);
	CHECK_EQ(cfs_index_pages_present(p, 10, 4096), 0);
	CHECK_EQ(cfs_index_pages_present(p, 11, 4096), -EUCLEAN);
	CHECK_EQ(cfs_index_pages_present(p, 0, 65536), -EUCLEAN);
	snprintf(p, sizeof(p), "%s/none", dir);
	CHECK_EQ(cfs_index_pages_present(p, 0, 4096), -ENOENT);
	rm_dir(dir);
}

static void truncated_and_marker(void)
{
	char dir[64], p[128];
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_at(dir);
	fill_store(s);
	CHECK_EQ(st_of(s).index_resets, 0);
	CHECK(!file_exists(dir, CFS_FMT_CHECK_MARKER)); /* gone once the open is done */
	cfs_store_close(s);

	/* a healthy index reads through cfs_index_check */
	struct cfs_index *ix = NULL;
	snprintf(p, sizeof(p), "%s/index.mdb", dir);
	CHECK_EQ(cfs_index_open(p, 1u << 20, 1u << 30, &ix), 0);
	uint64_t rows = 0;
	CHECK_EQ(cfs_index_check(ix, 1, &rows), 0);
	CHECK(rows >= 22); /* 20 blocks, the dirs row, the header */
	cfs_index_close(ix);

	/* the GPU loader's view opens it; not while an open is checking it */
	struct cfs_cview *cv = NULL;
	CHECK_EQ(cfs_cview_open(dir, &cv), 0);
	cfs_cview_close(cv);
	char mk[128];
	snprintf(mk, sizeof(mk), "%s/%s", dir, CFS_FMT_CHECK_MARKER);
	int mfd = open(mk, O_WRONLY | O_CREAT, 0600);
	CHECK(mfd >= 0);
	close(mfd);
	CHECK_EQ(cfs_cview_open(dir, &cv), -EAGAIN);
	unlink(mk);

	/* truncated: the meta pages name pages that are gone (SIGBUS if touched) */
	CHECK_EQ(truncate(p, 8192), 0);
	CHECK_EQ(cfs_index_open(p, 1u << 20, 1u << 30, &ix), -EUCLEAN);
	CHECK_EQ(cfs_cview_open(dir, &cv), -EPROTO); /* and the loader does not touch them */
	s = open_at(dir);
	CHECK_EQ(st_of(s).index_resets, 1);
	CHECK_EQ(st_of(s).blocks, 0);
	char buf[16];
	uint32_t got;
	CHECK_EQ(cfs_store_read(s, "f@r", 0, 0, sizeof(buf), buf, &got), -ENOENT);
	void *v = NULL;
	size_t vl = 0;
	CHECK_EQ(cfs_store_meta_get(s, "dirs", "k", 1, &v, &vl), -ENOENT);
	CHECK(file_exists(dir, "index.mdb.damaged"));
	CHECK(file_exists(dir, "index.resets"));
	CHECK(!file_exists(dir, CFS_FMT_CHECK_MARKER));
	/* the new index works, and numbers inodes past the old ones */
	struct cfs_nsdb *n = NULL;
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	const char *ids[] = { "1abc", "1def" };
	uint64_t inos[2] = { 0, 0 };
	CHECK_EQ(cfs_nsdb_inos(n, ids, 2, inos), 0);
	CHECK(inos[0] >= (1ull << CFS_NSDB_RESET_SHIFT) && inos[1] > inos[0]);
	CHECK_EQ(cfs_nsdb_ino_older(n, 7), 1);
	CHECK_EQ(cfs_nsdb_ino_older(n, 1), 0); /* the root is always the root */
	CHECK_EQ(cfs_nsdb_ino_older(n, inos[0]), 0);
	cfs_nsdb_free(n);
	fill_store(s);
	cfs_store_close(s);

	/* a clean reopen keeps it and counts nothing */
	s = open_at(dir);
	CHECK_EQ(st_of(s).index_resets, 1);
	CHECK_EQ(st_of(s).blocks, 20);
	cfs_store_close(s);

	/* the marker of an open that died reading the index: moved aside too */
	snprintf(p, sizeof(p), "%s/%s", dir, CFS_FMT_CHECK_MARKER);
	int fd = open(p, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0);
	close(fd);
	s = open_at(dir);
	CHECK_EQ(st_of(s).index_resets, 2);
	CHECK_EQ(st_of(s).blocks, 0);
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	CHECK_EQ(cfs_nsdb_inos(n, ids, 1, inos), 0);
	CHECK(inos[0] >= (2ull << CFS_NSDB_RESET_SHIFT));
	CHECK_EQ(cfs_nsdb_ino_older(n, (1ull << CFS_NSDB_RESET_SHIFT) + 5), 1);
	cfs_nsdb_free(n);
	cfs_store_close(s);
	snprintf(p, sizeof(p), "%s/index.mdb.damaged", dir);
	unlink(p);
	rm_dir(dir);
}

int main(void)
{
	cfs_log_set_level(CFS_LOG_ERROR);
	pages();
	truncated_and_marker();
	return check_done("test_index_damage");
}
