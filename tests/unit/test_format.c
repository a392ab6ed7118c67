/* Unit tests: the cache's on-disk format (cache/format.h) — round trips of
 * the header, row and block-key codecs, refusal of other versions — and the
 * store and the GPU loader's view (kernels/cacheview.c) agreeing on it: blocks
 * and rows written by the real store read back through cacheview with the
 * same bytes and metadata. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cacheview.h"
#include "check.h"
#include "crc32c.h"
#include "format.h"
#include "index.h"
#include "store.h"
#include "store_util.h"

static void test_row(void)
{
	struct cfs_fmt_row r = { .cls = 95, .len = 1u << 20, .crc = 0xdeadbeef, .slot = 0x123456789,
				 .gen = 7ull << 40 | 3 };
	struct cfs_fmt_row d;
	unsigned char b[CFS_FMT_ROW_SIZE];

	cfs_fmt_row_encode(&r, b);
	CHECK_EQ(b[0], CFS_FMT_ROW_VERSION);
	CHECK_EQ(b[1], 95);
	CHECK_EQ(b[2] | b[3] | b[12] | b[13] | b[14] | b[15], 0); /* flags, reserved */
	memset(&d, 0, sizeof(d));
	CHECK_EQ(cfs_fmt_row_decode(b, sizeof(b), &d), 0);
	CHECK(d.cls == r.cls && d.len == r.len && d.crc == r.crc && d.slot == r.slot &&
	      d.gen == r.gen);
	CHECK(cfs_fmt_row_fits(&d, 1u << 20));
	CHECK(!cfs_fmt_row_fits(&d, 512u << 10)); /* class above that cache's top */
	d.len = 0;
	CHECK(!cfs_fmt_row_fits(&d, 1u << 20));
	d.cls = 0;
	d.len = 65;
	CHECK(!cfs_fmt_row_fits(&d, 1u << 20)); /* more than its class holds */
	CHECK_EQ(cfs_fmt_row_decode(b, sizeof(b) - 1, &d), -EINVAL);
	b[0] = CFS_FMT_ROW_VERSION - 1;
	CHECK_EQ(cfs_fmt_row_decode(b, sizeof(b), &d), -EINVAL);
	b[0] = CFS_FMT_ROW_VERSION + 1;
	CHECK_EQ(cfs_fmt_row_decode(b, sizeof(b), &d), -EINVAL);
}

static void test_header(void)
{
	unsigned char h[CFS_FMT_HEADER_SIZE];
	struct cfs_fmt_header d;

	cfs_fmt_header_encode(1u << 20, 42, h);
	CHECK(memcmp(h, CFS_FMT_HEADER_MAGIC, 8) == 0);
	CHECK_EQ(cfs_fmt_header_decode(h, sizeof(h), &d), 0);
	CHECK_EQ(d.version, CFS_FMT_HEADER_VERSION);
	CHECK_EQ(d.block_size, 1u << 20);
	CHECK_EQ(d.epoch, 42);
	CHECK_EQ(d.scheme, CFS_CLASS_SCHEME);
	CHECK_EQ(d.codes, 96);
	CHECK_EQ(cfs_fmt_header_decode(h, sizeof(h) - 1, &d), -EINVAL);
	h[8] = CFS_FMT_HEADER_VERSION + 1; /* another version: fields still read */
	d.epoch = 0;
	CHECK_EQ(cfs_fmt_header_decode(h, sizeof(h), &d), -EPROTO);
	CHECK_EQ(d.epoch, 42);
	cfs_fmt_header_encode(1u << 20, 42, h);
	h[24] = CFS_CLASS_SCHEME + 1;
	CHECK_EQ(cfs_fmt_header_decode(h, sizeof(h), &d), -EPROTO);
	cfs_fmt_header_encode(1u << 20, 42, h);
	h[12] = 1; /* block size 1 MiB + 1 */
	CHECK_EQ(cfs_fmt_header_decode(h, sizeof(h), &d), -EPROTO);
	cfs_fmt_header_encode(1u << 20, 42, h);
	h[0] = 'X';
	CHECK_EQ(cfs_fmt_header_decode(h, sizeof(h), &d), -EINVAL);
}

static void test_bkey(void)
{
	unsigned char a[CFS_FMT_BKEY_MAX], b[CFS_FMT_BKEY_MAX];
	char longkey[CFS_FMT_KEY_MAX + 2];
	uint64_t block = 0;

	CHECK_EQ(cfs_fmt_bkey_encode("id@r", 0x0102, a), 13);
	CHECK_EQ(cfs_fmt_bkey_decode(a, 13, &block), 4);
	CHECK_EQ(block, 0x0102);
	CHECK(memcmp(a, "id@r\0\0\0\0\0\0\0\x01\x02", 13) == 0); /* big-endian */
	CHECK_EQ(cfs_fmt_bkey_encode("id@r", 0xff, b), 13);
	CHECK(memcmp(b, a, 13) < 0); /* blocks of a key sort in order */
	CHECK_EQ(cfs_fmt_bkey_encode("", 0, a), -EINVAL);
	CHECK_EQ(cfs_fmt_bkey_encode(NULL, 0, a), -EINVAL);
	memset(longkey, 'k', sizeof(longkey));
	longkey[CFS_FMT_KEY_MAX] = 0;
	CHECK_EQ(cfs_fmt_bkey_encode(longkey, 9, a), CFS_FMT_BKEY_MAX);
	CHECK_EQ(cfs_fmt_bkey_decode(a, CFS_FMT_BKEY_MAX, &block), CFS_FMT_KEY_MAX);
	CHECK_EQ(block, 9);
	longkey[CFS_FMT_KEY_MAX] = 'k';
	longkey[CFS_FMT_KEY_MAX + 1] = 0;
	CHECK_EQ(cfs_fmt_bkey_encode(longkey, 0, a), -EINVAL);
	CHECK_EQ(cfs_fmt_bkey_decode(a, 9, &block), -EINVAL);                /* no key */
	CHECK_EQ(cfs_fmt_bkey_decode("a\0b\0\0\0\0\0\0\0\0", 11, &block), -EINVAL); /* NUL in key */
	CHECK_EQ(cfs_fmt_bkey_decode("ab\0\0\0\0\0\0\0\0", 10, &block), -EINVAL); /* no NUL */
}

static void test_arena_name(void)
{
	char n[CFS_FMT_ARENA_NAME_MAX];
	cfs_fmt_arena_name(95, n, sizeof(n));
	CHECK_STR(n, "arena-1m.dat");
	cfs_fmt_arena_name(8, n, sizeof(n));
	CHECK_STR(n, "arena-576.dat");
}

/* Blocks of these lengths go through the store and come back through the
 * view: one per class region (smallest, a class edge, above 512, full). */
static const uint32_t lens[] = { 1, 64, 65, 577, 4096, 40000, K64 };
#define NLENS (sizeof(lens) / sizeof(lens[0]))

struct seen {
	int n, bad;
};

static int count_block(void *arg, const char *key, uint64_t block, const struct cfs_fmt_row *row)
{
	struct seen *s = arg;
	s->n++;
	if (strcmp(key, "fmt@r:1") != 0 || block >= NLENS || row->len != lens[block])
		s->bad++;
	return 0;
}

static void test_store_and_view(void)
{
	char dir[64], p[600], buf[K64];
	struct cfs_store *s;
	struct cfs_cview *v;
	struct cfs_cview_txn *t;
	struct cfs_fmt_row row;
	const void *val;
	size_t vl;

	mkdir_tmp(dir, sizeof(dir));
	s = open_store(dir, K64, 64u << 20, 0);
	for (size_t i = 0; i < NLENS; i++)
		CHECK_EQ(put(s, "fmt@r:1", i, lens[i]), 0);
	CHECK_EQ(cfs_store_meta_put(s, "meta", "m:k", 3, "value", 5), 0);
	CHECK_EQ(cfs_store_meta_put(s, "dirs", "d:k", 3, "listing", 7), 0);
	cfs_store_close(s);

	CHECK_EQ(cfs_cview_open(dir, &v), 0);
	if (!v) {
		rm_dir(dir);
		return;
	}
	CHECK_EQ(cfs_cview_block_size(v), K64);
	CHECK_EQ(cfs_cview_begin(v, &t), 0);
	for (size_t i = 0; i < NLENS; i++) {
		memset(&row, 0, sizeof(row));
		CHECK_EQ(cfs_cview_block(t, "fmt@r:1", i, &row), 0);
		CHECK_EQ(row.len, lens[i]);
		CHECK_EQ(row.cls, cfs_class_for(lens[i]));
		CHECK_EQ(row.gen >> 40, 1); /* the first open's epoch */
		fill(buf, "fmt@r:1", i, lens[i]);
		CHECK_EQ(row.crc, cfs_crc32c(0, buf, lens[i]));
		const unsigned char *slot = cfs_cview_slot(v, &row);
		CHECK(slot && memcmp(slot, buf, lens[i]) == 0);
	}
	CHECK_EQ(cfs_cview_block(t, "fmt@r:1", NLENS, &row), -ENOENT);
	CHECK_EQ(cfs_cview_block(t, "", 0, &row), -EINVAL);
	struct seen sn = { 0, 0 };
	CHECK_EQ(cfs_cview_scan_blocks(t, count_block, &sn), 0);
	CHECK_EQ(sn.n, NLENS);
	CHECK_EQ(sn.bad, 0);
	CHECK_EQ(cfs_cview_get(t, "meta", "m:k", 3, &val, &vl), 0);
	CHECK(vl == 5 && memcmp(val, "value", 5) == 0);
	CHECK_EQ(cfs_cview_get(t, "dirs", "d:k", 3, &val, &vl), 0);
	CHECK(vl == 7 && memcmp(val, "listing", 7) == 0);
	cfs_cview_end(t);
	cfs_cview_close(v);

	/* a row of another version reads as a miss; a header of another version
	 * makes the folder no cache the view reads */
	struct cfs_index *ix;
	unsigned char k[CFS_FMT_BKEY_MAX], r[CFS_FMT_ROW_SIZE], h[CFS_FMT_HEADER_SIZE];
	snprintf(p, sizeof(p), "%s/%s", dir, CFS_FMT_INDEX_FILE);
	CHECK_EQ(cfs_index_open(p, 1 << 20, 1 << 30, &ix), 0);
	int kl = cfs_fmt_bkey_encode("fmt@r:1", 0, k);
	row = (struct cfs_fmt_row){ .cls = 0, .len = 1, .crc = 0, .slot = 0, .gen = 1 };
	cfs_fmt_row_encode(&row, r);
	r[0] = CFS_FMT_ROW_VERSION + 1;
	CHECK_EQ(cfs_index_put(ix, CFS_IX_BLOCKS, k, (size_t)kl, r, sizeof(r)), 0);
	cfs_index_close(ix);
	CHECK_EQ(cfs_cview_open(dir, &v), 0);
	CHECK_EQ(cfs_cview_begin(v, &t), 0);
	CHECK_EQ(cfs_cview_block(t, "fmt@r:1", 0, &row), -ENOENT);
	CHECK_EQ(cfs_cview_block(t, "fmt@r:1", 1, &row), 0);
	sn.n = sn.bad = 0;
	CHECK_EQ(cfs_cview_scan_blocks(t, count_block, &sn), 0);
	CHECK_EQ(sn.n, NLENS - 1);
	cfs_cview_end(t);
	cfs_cview_close(v);

	CHECK_EQ(cfs_index_open(p, 1 << 20, 1 << 30, &ix), 0);
	cfs_fmt_header_encode(K64, 1, h);
	h[8] = CFS_FMT_HEADER_VERSION + 1;
	CHECK_EQ(cfs_index_put(ix, CFS_IX_STORE, CFS_FMT_HEADER_KEY, strlen(CFS_FMT_HEADER_KEY), h,
			       sizeof(h)), 0);
	cfs_index_close(ix);
	v = NULL;
	CHECK_EQ(cfs_cview_open(dir, &v), -ENODATA);
	CHECK(v == NULL);

	/* and the store, opened again, empties the blocks and writes its header */
	s = open_store(dir, K64, 64u << 20, 0);
	CHECK_EQ(stats(s).blocks, 0);
	cfs_store_close(s);
	CHECK_EQ(cfs_cview_open(dir, &v), 0);
	cfs_cview_close(v);
	rm_dir(dir);
}

int main(void)
{
	test_row();
	test_header();
	test_bkey();
	test_arena_name();
	test_store_and_view();
	return check_done("test_format");
}
