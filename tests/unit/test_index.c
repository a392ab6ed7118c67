/* Unit tests: the LMDB index (rows, scans, counters, map growth) in a
 * temporary folder. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "index.h"
#include "log.h"

static char dir[64];

static void path(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", dir, name);
}

static void cleanup(void)
{
	char p[128];
	const char *names[] = { "a.mdb", "a.mdb-lock", "b.mdb", "b.mdb-lock", "c.mdb", "c.mdb-lock" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		path(p, sizeof(p), names[i]);
		unlink(p);
	}
	rmdir(dir);
}

struct seen {
	int n;
	uint64_t blocks[8];
	int bad;
};

static int count_row(void *arg, const char *key, uint64_t block, const void *row, size_t n)
{
	struct seen *s = arg;
	struct cfs_fmt_row r;
	if (strcmp(key, "file@r1") != 0 || cfs_fmt_row_decode(row, n, &r) != 0 || r.len != block + 1)
		s->bad++;
	if (s->n < 8)
		s->blocks[s->n] = block;
	s->n++;
	return 0;
}

static void test_rows(void)
{
	char p[128];
	struct cfs_index *ix;
	struct cfs_fmt_row r = { .cls = 95, .crc = 0xdeadbeef, .slot = 7, .gen = 1ull << 40 };
	unsigned char enc[CFS_FMT_ROW_SIZE];
	struct cfs_fmt_row d;

	cfs_fmt_row_encode(&r, enc);
	CHECK_EQ(enc[0], 2); /* row version */
	CHECK_EQ(enc[1], 95);
	CHECK_EQ(enc[8], 0xef); /* little-endian crc */
	CHECK_EQ(enc[16], 7);
	CHECK_EQ(cfs_fmt_row_decode(enc, sizeof(enc), &d), 0);
	CHECK(d.crc == r.crc && d.slot == 7 && d.gen == r.gen && d.cls == 95);
	CHECK_EQ(cfs_fmt_row_decode(enc, 31, &d), -EINVAL);
	enc[0] = 1; /* a row of the power-of-4 format (byte 1 was log2) */
	CHECK_EQ(cfs_fmt_row_decode(enc, sizeof(enc), &d), -EINVAL);

	path(p, sizeof(p), "a.mdb");
	CHECK_EQ(cfs_index_open(p, 1 << 20, 1 << 20, &ix), 0);
	/* blocks 300, 2, 1 of one key come back in block order (big-endian keys) */
	uint64_t order[] = { 300, 2, 1 };
	for (int i = 0; i < 3; i++) {
		r.len = (uint32_t)order[i] + 1;
		CHECK_EQ(cfs_index_block_put(ix, "file@r1", order[i], &r), 0);
	}
	CHECK_EQ(cfs_index_block_put(ix, "", 0, &r), -EINVAL);
	/* a malformed row is dropped by the scan */
	CHECK_EQ(cfs_index_put(ix, CFS_IX_BLOCKS, "junk", 4, "x", 1), 0);
	struct seen s = { 0 };
	CHECK_EQ(cfs_index_block_scan(ix, count_row, &s), 0);
	CHECK_EQ(s.n, 3);
	CHECK_EQ(s.bad, 0);
	CHECK(s.blocks[0] == 1 && s.blocks[1] == 2 && s.blocks[2] == 300);
	void *v;
	size_t vl;
	CHECK_EQ(cfs_index_get(ix, CFS_IX_BLOCKS, "junk", 4, &v, &vl), -ENOENT);
	CHECK(v == NULL);
	struct cfs_index_bkey del[] = { { "file@r1", 2 }, { "file@r1", 99 } };
	CHECK_EQ(cfs_index_block_del(ix, del, 2), 0);
	memset(&s, 0, sizeof(s));
	cfs_index_block_scan(ix, count_row, &s);
	CHECK_EQ(s.n, 2);
	CHECK_EQ(cfs_index_block_clear(ix), 0);
	memset(&s, 0, sizeof(s));
	cfs_index_block_scan(ix, count_row, &s);
	CHECK_EQ(s.n, 0);

	/* generic rows and counters */
	CHECK_EQ(cfs_index_table("dirs"), CFS_IX_DIRS);
	CHECK_EQ(cfs_index_table("meta"), CFS_IX_META);
	CHECK_EQ(cfs_index_table("blocks"), -EINVAL);
	CHECK_EQ(cfs_index_table(NULL), -EINVAL);
	CHECK_EQ(cfs_index_put(ix, CFS_IX_DIRS, "", 0, "x", 1), -EINVAL);
	CHECK_EQ(cfs_index_put(ix, CFS_IX_DIRS, "k", 1, NULL, 0), 0);
	CHECK_EQ(cfs_index_get(ix, CFS_IX_DIRS, "k", 1, &v, &vl), 0);
	CHECK_EQ(vl, 0);
	free(v);
	uint64_t c = 0;
	CHECK_EQ(cfs_index_next(ix, CFS_IX_META, "ino", 3, 2, &c), 0);
	CHECK_EQ(c, 2);
	CHECK_EQ(cfs_index_next(ix, CFS_IX_META, "ino", 3, 2, &c), 0);
	CHECK_EQ(c, 3);
	cfs_index_close(ix);
	cfs_index_close(NULL);
	CHECK_EQ(cfs_index_open(p, 1 << 20, 1 << 20, &ix), 0);
	CHECK_EQ(cfs_index_next(ix, CFS_IX_META, "ino", 3, 2, &c), 0);
	CHECK_EQ(c, 4);
	cfs_index_close(ix);

	/* not an LMDB file */
	path(p, sizeof(p), "c.mdb");
	FILE *f = fopen(p, "w");
	for (int i = 0; i < 2000; i++)
		fputs("not lmdb ", f);
	fclose(f);
	CHECK_EQ(cfs_index_open(p, 1 << 20, 1 << 20, &ix), -EUCLEAN);
}

/* A map that may not grow fills up with -ENOSPC; one that may grows. */
static void test_map_growth(void)
{
	char p[128], val[2000];
	struct cfs_index *ix;
	int i, rc = 0;

	memset(val, 'v', sizeof(val));
	path(p, sizeof(p), "b.mdb");
	CHECK_EQ(cfs_index_open(p, 256 << 10, 256 << 10, &ix), 0);
	for (i = 0; i < 1000 && rc == 0; i++)
		rc = cfs_index_put(ix, CFS_IX_DIRS, &i, sizeof(i), val, sizeof(val));
	CHECK_EQ(rc, -ENOSPC);
	CHECK(i > 10);
	CHECK_EQ(cfs_index_map_size(ix), 256 << 10);
	cfs_index_close(ix);

	CHECK_EQ(cfs_index_open(p, 256 << 10, 64 << 20, &ix), 0);
	for (i = 0, rc = 0; i < 5000 && rc == 0; i++)
		rc = cfs_index_put(ix, CFS_IX_DIRS, &i, sizeof(i), val, sizeof(val));
	CHECK_EQ(rc, 0);
	CHECK(cfs_index_map_size(ix) > (8u << 20));
	void *v;
	size_t vl;
	i = 4321;
	CHECK_EQ(cfs_index_get(ix, CFS_IX_DIRS, &i, sizeof(i), &v, &vl), 0);
	CHECK(vl == sizeof(val) && memcmp(v, val, vl) == 0);
	free(v);
	cfs_index_close(ix);
}

/* Writers that make the map grow while readers read: every row lands. */
struct grower {
	struct cfs_index *ix;
	int id, writer, bad;
};

static void *grow_work(void *arg)
{
	struct grower *g = arg;
	char val[1500];
	for (int i = 0; i < 400; i++) {
		int k = g->id * 1000 + i;
		void *v;
		size_t vl;
		if (g->writer) {
			memset(val, 'a' + g->id, sizeof(val));
			if (cfs_index_put(g->ix, CFS_IX_INODES, &k, sizeof(k), val, sizeof(val)))
				g->bad++;
			uint64_t c;
			if (i % 50 == 0 && cfs_index_next(g->ix, CFS_IX_META, "n", 1, 1, &c))
				g->bad++;
		} else {
			k = (g->id % 4) * 1000 + i;
			int rc = cfs_index_get(g->ix, CFS_IX_INODES, &k, sizeof(k), &v, &vl);
			if (rc == 0)
				free(v);
			else if (rc != -ENOENT)
				g->bad++;
		}
	}
	return NULL;
}

static void test_concurrent_growth(void)
{
	char p[128];
	struct cfs_index *ix;
	pthread_t t[8];
	struct grower g[8];
	path(p, sizeof(p), "c.mdb");
	unlink(p);
	CHECK_EQ(cfs_index_open(p, 128 << 10, 256 << 20, &ix), 0);
	for (int i = 0; i < 8; i++) {
		g[i] = (struct grower){ .ix = ix, .id = i, .writer = i < 4 };
		pthread_create(&t[i], NULL, grow_work, &g[i]);
	}
	int bad = 0;
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		bad += g[i].bad;
	}
	CHECK_EQ(bad, 0);
	CHECK(cfs_index_map_size(ix) > (1u << 20));
	int all = 1;
	for (int w = 0; w < 4; w++)
		for (int i = 0; i < 400; i++) {
			int k = w * 1000 + i;
			void *v;
			size_t vl;
			if (cfs_index_get(ix, CFS_IX_INODES, &k, sizeof(k), &v, &vl) != 0) {
				all = 0;
				continue;
			}
			all &= vl == 1500 && ((char *)v)[1499] == 'a' + w;
			free(v);
		}
	CHECK(all);
	uint64_t c;
	CHECK_EQ(cfs_index_next(ix, CFS_IX_META, "n", 1, 1, &c), 0);
	CHECK_EQ(c, 33);
	cfs_index_close(ix);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/cfs-test-index.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	cfs_log_set_level(CFS_LOG_WARN);
	test_rows();
	test_map_growth();
	test_concurrent_growth();
	cleanup();
	return check_done("test_index");
}
