/* test_hot: the loader's hot-block policy (kernels/hot.c: sizes, selection,
 * counts, the set by generation), the daemon's access counts (cache/heat.c:
 * the room rule and file size; through the store: hits counted per slot,
 * reset on eviction, read by the loader's cache view), and the cache view
 * over blocks of many size classes (rows checked against their class). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "cacheview.h"
#include "classes.h"
#include "heat.h"
#include "index.h"
#include "hot.h"
#include "size.h"
#include "store_util.h"

static void test_parse_size(void)
{
	uint64_t v = 1;
	CHECK_EQ(cfs_size_parse("0", &v), 0);
	CHECK_EQ(v, 0);
	CHECK_EQ(cfs_size_parse("2G", &v), 0);
	CHECK_EQ(v, 2ull << 30);
	CHECK_EQ(cfs_size_parse("512M", &v), 0);
	CHECK_EQ(v, 512ull << 20);
	CHECK_EQ(cfs_size_parse("64KiB", &v), 0);
	CHECK_EQ(v, 64ull << 10);
	CHECK_EQ(cfs_size_parse("1048576", &v), 0);
	CHECK_EQ(v, 1048576);
	CHECK_EQ(cfs_size_parse("", &v), -EINVAL);
	CHECK_EQ(cfs_size_parse("G", &v), -EINVAL);
	CHECK_EQ(cfs_size_parse("2X", &v), -EINVAL);
	CHECK_EQ(cfs_size_parse("-1", &v), -EINVAL);
	CHECK_EQ(cfs_size_parse("99999999999999999999", &v), -EINVAL);
	CHECK_EQ(cfs_size_parse("99999999999T", &v), -EINVAL);
}

static void test_select(void)
{
	/* scores 5,0,9,5,1,7 with lengths; budget 100 */
	struct cfs_hot_cand c[] = {
		{ 5, 50, 40, 0 }, { 0, 10, 10, 1 }, { 9, 60, 50, 2 },
		{ 5, 40, 30, 3 }, { 1, 70, 10, 4 }, { 7, 80, 60, 5 },
	};
	uint64_t bytes = 0;
	size_t k = cfs_hot_select(c, 6, 100, &bytes);
	/* order: 9(50) 7(60: no room) 5 gen40(30) 5 gen50(40: no room) 1(10); never 0 */
	CHECK_EQ(k, 3);
	CHECK_EQ(c[0].idx, 2);
	CHECK_EQ(c[1].idx, 3);
	CHECK_EQ(c[2].idx, 4);
	CHECK_EQ(bytes, 90);
	for (size_t i = 0; i < k; i++)
		CHECK(c[i].idx != 1);
	/* budget 0 and an empty list */
	CHECK_EQ(cfs_hot_select(c, 6, 0, &bytes), 0);
	CHECK_EQ(bytes, 0);
	CHECK_EQ(cfs_hot_select(NULL, 0, 100, &bytes), 0);
	/* everything fits: all with a score, highest first */
	struct cfs_hot_cand d[] = { { 1, 1, 1, 0 }, { 3, 2, 1, 1 }, { 2, 3, 1, 2 } };
	CHECK_EQ(cfs_hot_select(d, 3, 1000, &bytes), 3);
	CHECK_EQ(d[0].score, 3);
	CHECK_EQ(d[1].score, 2);
	CHECK_EQ(d[2].score, 1);
}

static void test_counts(void)
{
	struct cfs_hot_counts t = { 0 };
	CHECK_EQ(cfs_hot_count_get(&t, 123), 0);
	for (uint64_t i = 0; i < 5000; i++)
		for (uint64_t j = 0; j <= i % 3; j++)
			CHECK_EQ(cfs_hot_count_add(&t, cfs_hot_hash("key@r", i)), 0);
	int ok = 1;
	for (uint64_t i = 0; i < 5000; i++)
		ok &= cfs_hot_count_get(&t, cfs_hot_hash("key@r", i)) == i % 3 + 1;
	CHECK(ok);
	CHECK_EQ(cfs_hot_count_get(&t, cfs_hot_hash("other@r", 1)), 0);
	CHECK(cfs_hot_hash("a", 1) != cfs_hot_hash("a", 2));
	CHECK(cfs_hot_hash("a", 1) != cfs_hot_hash("b", 1));
	cfs_hot_counts_free(&t);
	cfs_hot_counts_free(&t);
}

static void test_set(void)
{
	struct cfs_hot_set s = { 0 };
	CHECK(cfs_hot_set_find(&s, 1, 0, 16, 10, 7) == NULL);
	CHECK_EQ(cfs_hot_set_init(&s, 100), 0);
	for (uint64_t g = 1; g <= 100; g++) {
		struct cfs_hot_ent e = { .gen = g << 20 | 3, .slot = g, .off = g * 10,
					 .len = (uint32_t)g, .crc = (uint32_t)(g * 7),
					 .cls = 16 };
		CHECK_EQ(cfs_hot_set_add(&s, &e), 0);
	}
	struct cfs_hot_set small;
	CHECK_EQ(cfs_hot_set_init(&small, 1), 0); /* 16 places, at most half used */
	for (uint64_t g = 1; g <= 8; g++) {
		struct cfs_hot_ent x = { .gen = g, .len = 1 };
		CHECK_EQ(cfs_hot_set_add(&small, &x), 0);
	}
	struct cfs_hot_ent x = { .gen = 999, .len = 1 };
	CHECK_EQ(cfs_hot_set_add(&small, &x), -EINVAL);
	cfs_hot_set_free(&small);
	const struct cfs_hot_ent *e = cfs_hot_set_find(&s, 42ull << 20 | 3, 42, 16, 42, 294);
	CHECK(e && e->off == 420);
	/* another write of the same slot, another slot, class, length or crc: no */
	CHECK(!cfs_hot_set_find(&s, 43ull << 20 | 3, 42, 16, 42, 294));
	CHECK(!cfs_hot_set_find(&s, 42ull << 20 | 3, 41, 16, 42, 294));
	CHECK(!cfs_hot_set_find(&s, 42ull << 20 | 3, 42, 14, 42, 294));
	CHECK(!cfs_hot_set_find(&s, 42ull << 20 | 3, 42, 16, 41, 294));
	CHECK(!cfs_hot_set_find(&s, 42ull << 20 | 3, 42, 16, 42, 295));
	CHECK(!cfs_hot_set_find(&s, 0, 42, 16, 42, 294));
	cfs_hot_set_free(&s);
}

static int count_of(struct cfs_cview *v, const char *key, uint64_t block, struct cfs_fmt_row *r)
{
	struct cfs_cview_txn *t;
	if (cfs_cview_begin(v, &t))
		return -1;
	int rc = cfs_cview_block(t, key, block, r);
	cfs_cview_end(t);
	return rc ? -1 : (int)cfs_cview_heat(v, r);
}

struct scan_sum {
	int rows;
	uint64_t hits;
	struct cfs_cview *v;
};

static int on_row(void *arg, const char *key, uint64_t block, const struct cfs_fmt_row *r)
{
	struct scan_sum *s = arg;
	s->rows++;
	s->hits += cfs_cview_heat(s->v, r);
	return strlen(key) && block < 100 ? 0 : -EINVAL;
}

/* The daemon side: hits are counted per slot and the loader reads them. */
static void test_heat_store(void)
{
	char dir[64], buf[K64];
	struct cfs_store *s;
	struct cfs_store_opts o = { .block_size = K64, .budget = 8 * K64 };
	struct cfs_store_stats st;
	uint32_t got;
	mkdir_tmp(dir, sizeof(dir));
	o.dir = dir;
	CHECK_EQ(cfs_store_open(&o, &s), 0);
	for (uint64_t b = 0; b < 4; b++) {
		fill(buf, "F@r", b, K64);
		CHECK_EQ(cfs_store_put(s, "F@r", b, buf, K64), 0);
	}
	fill(buf, "G@r", 0, 5000);
	CHECK_EQ(cfs_store_put(s, "G@r", 0, buf, 5000), 0); /* a small class */
	for (int i = 0; i < 5; i++)
		CHECK_EQ(cfs_store_read(s, "F@r", 1, 0, K64, buf, &got), 0);
	CHECK_EQ(cfs_store_read(s, "F@r", 2, 100, 10, buf, &got), 0);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(cfs_store_read(s, "G@r", 0, 0, 100, buf, &got), 0);
	CHECK_EQ(cfs_store_read(s, "F@r", 9, 0, 10, buf, &got), -ENOENT); /* a miss: no count */
	cfs_store_stats(s, &st);
	CHECK_EQ(st.counted_blocks, 3);
	CHECK_EQ(st.counted_hits, 9);

	struct cfs_cview *v;
	struct cfs_fmt_row r, r1;
	CHECK_EQ(cfs_cview_open(dir, &v), 0);
	CHECK_EQ(count_of(v, "F@r", 0, &r), 0);
	CHECK_EQ(count_of(v, "F@r", 1, &r1), 5);
	CHECK_EQ(count_of(v, "F@r", 2, &r), 1);
	CHECK_EQ(count_of(v, "G@r", 0, &r), 3);
	struct scan_sum sum = { .v = v };
	{
		struct cfs_cview_txn *t;
		CHECK_EQ(cfs_cview_begin(v, &t), 0);
		CHECK_EQ(cfs_cview_scan_blocks(t, on_row, &sum), 0);
		cfs_cview_end(t);
	}
	CHECK_EQ(sum.rows, 5);
	CHECK_EQ(sum.hits, 9);

	/* evicting block 1 resets its slot; the block put next into that slot starts at 0 */
	CHECK_EQ(cfs_store_evict_prefix(s, "F@r", NULL, NULL), 0);
	cfs_store_stats(s, &st);
	CHECK_EQ(st.counted_blocks, 1); /* G's block */
	CHECK_EQ(cfs_cview_heat(v, &r1), 0);
	fill(buf, "H@r", 0, K64);
	CHECK_EQ(cfs_store_put(s, "H@r", 0, buf, K64), 0);
	CHECK_EQ(count_of(v, "H@r", 0, &r), 0);
	CHECK_EQ(cfs_store_read(s, "H@r", 0, 0, 1, buf, &got), 0);
	CHECK_EQ(count_of(v, "H@r", 0, &r), 1);
	cfs_cview_close(v);
	cfs_store_close(s);

	/* a reopen starts afresh: a new file, zero counts, the loader follows it */
	CHECK_EQ(cfs_store_open(&o, &s), 0);
	CHECK_EQ(cfs_cview_open(dir, &v), 0);
	CHECK_EQ(count_of(v, "G@r", 0, &r), 0);
	CHECK_EQ(cfs_store_read(s, "G@r", 0, 0, 1, buf, &got), 0);
	CHECK_EQ(count_of(v, "G@r", 0, &r), 1);
	cfs_cview_close(v);
	cfs_store_close(s);

	/* the file parser refuses what is not a heat file */
	struct cfs_heat h;
	char junk[512] = "CFSHEAT2";
	CHECK_EQ(cfs_heat_parse(junk, sizeof(junk), &h), -EPROTO);
	CHECK_EQ(cfs_heat_parse(junk, 10, &h), -EPROTO);
	rm_dir(dir);
}

static uint64_t sum_of(const uint64_t *v, unsigned n)
{
	uint64_t t = 0;
	for (unsigned i = 0; i < n; i++)
		t += v[i];
	return t;
}

/* The room rule keeps heat.dat small for any budget and class count, counts
 * every block of the large classes, and always covers the slots in use. */
static void test_heat_room(void)
{
	uint64_t high[CFS_CLASS_CODES] = { 0 }, room[CFS_CLASS_CODES];
	const uint64_t g12 = 12ull << 30;

	cfs_heat_room(96, high, g12, room); /* 1 MiB blocks */
	CHECK(sum_of(room, 96) <= CFS_HEAT_MAX_TOTAL);
	CHECK(sum_of(room, 96) > CFS_HEAT_MAX_TOTAL - 96); /* the share is used */
	CHECK_EQ(room[95], 12288);			   /* every 1 MiB block of 12 GiB */
	CHECK_EQ(room[94], g12 / cfs_class_size(94));
	CHECK(room[0] >= 20000 && room[0] - room[40] <= 1);   /* small classes: an equal share */
	cfs_heat_room(CFS_CLASS_CODES, high, g12, room);  /* 64 MiB blocks */
	CHECK(sum_of(room, CFS_CLASS_CODES) <= CFS_HEAT_MAX_TOTAL);
	CHECK_EQ(room[143], 192);
	cfs_heat_room(96, high, 64u << 20, room); /* a small budget: 16 Ki counters */
	CHECK(sum_of(room, 96) <= CFS_HEAT_MIN_TOTAL);
	CHECK_EQ(room[95], 64);
	high[10] = 100000; /* slots in use at open are always counted */
	cfs_heat_room(96, high, 64u << 20, room);
	CHECK_EQ(room[10], 100000);

	/* the file for 12 GiB, fully allocated, stays under 8 MiB + its table */
	char dir[64], p[600];
	struct cfs_heat h;
	struct stat st;
	memset(high, 0, sizeof(high));
	mkdir_tmp(dir, sizeof(dir));
	CHECK_EQ(cfs_heat_create(&h, dir, 96, high, g12, 5), 0);
	snprintf(p, sizeof(p), "%s/%s", dir, CFS_HEAT_FILE);
	CHECK_EQ(stat(p, &st), 0);
	CHECK((uint64_t)st.st_size <= 4ull * CFS_HEAT_MAX_TOTAL + 32 + 16 * 96 + 64 * 96);
	CHECK((uint64_t)st.st_blocks * 512 >= (uint64_t)st.st_size);
	CHECK_EQ(h.n, 96);
	CHECK_EQ(h.epoch, 5);
	CHECK_EQ(h.cls[95].nslots, 12288);

	/* counts by class code, seen by a second (read-only) mapping */
	CHECK_EQ(cfs_heat_hit(&h, 8, 5), 1);
	CHECK_EQ(cfs_heat_hit(&h, 8, 5), 0);
	CHECK_EQ(cfs_heat_hit(&h, 95, 12287), 1);
	CHECK_EQ(cfs_heat_hit(&h, 95, 12288), 0); /* past the room: not counted */
	CHECK_EQ(cfs_heat_hit(&h, 96, 0), 0);	  /* not a code of this cache */
	int fd = open(p, O_RDONLY);
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	struct cfs_heat r;
	CHECK(m != MAP_FAILED);
	CHECK_EQ(cfs_heat_parse(m, (size_t)st.st_size, &r), 0);
	CHECK_EQ(cfs_heat_get(&r, 8, 5), 2);
	CHECK_EQ(cfs_heat_get(&r, 9, 5), 0);
	CHECK_EQ(cfs_heat_get(&r, 95, 12287), 1);
	CHECK_EQ(cfs_heat_get(&r, 95, 12288), 0);
	CHECK_EQ(cfs_heat_reset(&h, 8, 5), 1);
	CHECK_EQ(cfs_heat_get(&r, 8, 5), 0);
	/* a file cut short, and the version-1 format, are refused */
	CHECK_EQ(cfs_heat_parse(m, 32 + 16 * 95, &r), -EPROTO);
	unsigned char v1[4096] = "CFSHEAT1";
	memcpy(v1 + 8, "\x01\0\0\0\x05", 5); /* version 1, 5 classes */
	CHECK_EQ(cfs_heat_parse(v1, sizeof(v1), &r), -EPROTO);
	munmap(m, (size_t)st.st_size);
	cfs_heat_close(&h);
	rm_dir(dir);
}

static int put_raw_row(const char *dir, const char *key, uint8_t cls, uint32_t len)
{
	char p[600];
	struct cfs_index *ix;
	struct cfs_fmt_row row = { .cls = cls, .len = len, .crc = 1, .slot = 0, .gen = 1 };
	snprintf(p, sizeof(p), "%s/index.mdb", dir);
	int rc = cfs_index_open(p, 1 << 20, 1 << 30, &ix);
	if (rc == 0) {
		rc = cfs_index_block_put(ix, key, 0, &row);
		cfs_index_close(ix);
	}
	return rc;
}

static int count_rows(void *arg, const char *key, uint64_t block, const struct cfs_fmt_row *r)
{
	(*(int *)arg)++;
	return 0;
}

/* The loader's view reads blocks of many classes straight from their arenas,
 * with the daemon's counts, and refuses rows that would read outside a slot. */
static void test_cview_classes(void)
{
	static const uint32_t lens[] = { 1, 64, 100, 513, 1234, 4097, 5000, 70000, 300000, 1u << 20 };
	const size_t n = sizeof(lens) / sizeof(lens[0]);
	char dir[64], *buf = malloc(1u << 20);
	struct cfs_store *s;
	uint32_t got;
	mkdir_tmp(dir, sizeof(dir));
	s = open_store(dir, 1u << 20, 64u << 20, 0);
	for (size_t i = 0; i < n; i++) {
		CHECK_EQ(put(s, "C@r", i, lens[i]), 0);
		for (size_t k = 0; k <= i % 3; k++)
			CHECK_EQ(cfs_store_read(s, "C@r", i, 0, 1, buf, &got), 0);
	}
	cfs_store_close(s);

	struct cfs_cview *v;
	struct cfs_cview_txn *t;
	struct cfs_fmt_row row;
	int ok = 1;
	CHECK_EQ(cfs_cview_open(dir, &v), 0);
	CHECK_EQ(cfs_cview_block_size(v), 1u << 20);
	CHECK_EQ(cfs_cview_begin(v, &t), 0);
	for (size_t i = 0; i < n; i++) {
		if (cfs_cview_block(t, "C@r", i, &row) != 0) {
			ok = 0;
			continue;
		}
		const unsigned char *p = cfs_cview_slot(v, &row);
		fill(buf, "C@r", i, lens[i]);
		ok &= row.cls == cfs_class_for(lens[i]) && row.len == lens[i] && p &&
		      memcmp(p, buf, lens[i]) == 0 && cfs_cview_heat(v, &row) == 1 + i % 3;
	}
	CHECK(ok);
	/* a row naming more bytes than its class holds never gets a pointer */
	row.cls = 8;
	row.len = 577;
	CHECK(cfs_cview_slot(v, &row) == NULL);
	row.cls = CFS_CLASS_CODES;
	row.len = 1;
	CHECK(cfs_cview_slot(v, &row) == NULL);
	cfs_cview_end(t);
	cfs_cview_close(v);

	/* rows above the top class of 1 MiB blocks, or longer than their class: misses */
	CHECK_EQ(put_raw_row(dir, "bad1@r", 96, 10), 0);
	CHECK_EQ(put_raw_row(dir, "bad2@r", 8, 577), 0);
	CHECK_EQ(put_raw_row(dir, "good@r", 8, 576), 0);
	CHECK_EQ(cfs_cview_open(dir, &v), 0);
	CHECK_EQ(cfs_cview_begin(v, &t), 0);
	CHECK_EQ(cfs_cview_block(t, "bad1@r", 0, &row), -ENOENT);
	CHECK_EQ(cfs_cview_block(t, "bad2@r", 0, &row), -ENOENT);
	CHECK_EQ(cfs_cview_block(t, "good@r", 0, &row), 0);
	int rows = 0;
	CHECK_EQ(cfs_cview_scan_blocks(t, count_rows, &rows), 0);
	CHECK_EQ(rows, (int)n + 1);
	cfs_cview_end(t);
	cfs_cview_close(v);
	free(buf);
	rm_dir(dir);
}

int main(void)
{
	test_parse_size();
	test_select();
	test_counts();
	test_set();
	test_heat_store();
	test_heat_room();
	test_cview_classes();
	return check_done("test_hot");
}
