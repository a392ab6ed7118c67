/* Unit tests: the size classes (cache/classes.h), exhaustively for 1 MiB and
 * 64 MiB blocks, and the arenas' lazy files (cache/arena.c) in a temporary
 * folder under /tmp. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "check.h"
#include "classes.h"
#include "format.h"
#include "store_util.h"

/* A few sizes written out by hand, so the formula is checked against the
 * scheme as documented, not against itself. */
static void test_sizes(void)
{
	static const struct {
		unsigned code;
		uint32_t size;
	} want[] = { { 0, 64 },	      { 1, 128 },	{ 7, 512 },	  { 8, 576 },
		     { 9, 640 },      { 15, 1024 },	{ 16, 1152 },	  { 23, 2048 },
		     { 24, 2304 },    { 31, 4096 },	{ 32, 4608 },	  { 63, 64 << 10 },
		     { 95, 1 << 20 }, { 96, 9 << 17 }, { 143, 64u << 20 } };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECK_EQ(cfs_class_size(want[i].code), want[i].size);
	CHECK_EQ(cfs_class_for(1), 0);
	CHECK_EQ(cfs_class_for(64), 0);
	CHECK_EQ(cfs_class_for(65), 1);
	CHECK_EQ(cfs_class_for(513), 8);
	CHECK_EQ(cfs_class_for(1025), 16);
	CHECK_EQ(cfs_class_for(300000), 81); /* 327680 = 10 << 15 */
	CHECK_EQ(cfs_class_size(81), 327680);
	CHECK_EQ(cfs_class_top(64u << 10), 63);
	CHECK_EQ(cfs_class_top(1u << 20), 95);
	CHECK_EQ(cfs_class_top(64u << 20), CFS_CLASS_CODES - 1);
	CHECK(cfs_class_block_ok(64u << 10) && cfs_class_block_ok(64u << 20));
	CHECK(!cfs_class_block_ok(32u << 10) && !cfs_class_block_ok(128u << 20) &&
	      !cfs_class_block_ok(3u << 20) && !cfs_class_block_ok(0));
}

/* Every len 1..bs maps to the smallest class that holds it; sizes strictly
 * increase; the waste is at most 1/8 above 512 bytes; the top is bs. */
static void check_block_size(uint32_t bs)
{
	unsigned top = cfs_class_top(bs);
	int increasing = 1, for_ok = 1, waste_ok = 1;

	CHECK_EQ(cfs_class_size(top), bs);
	CHECK_EQ(cfs_class_for(bs), top);
	for (unsigned c = 1; c <= top; c++)
		increasing &= cfs_class_size(c) > cfs_class_size(c - 1);
	CHECK(increasing);
	unsigned c = 0; /* the smallest class >= len, walked alongside */
	for (uint32_t len = 1; len <= bs; len++) {
		while (cfs_class_size(c) < len)
			c++;
		if (cfs_class_for(len) != c) {
			if (for_ok)
				fprintf(stderr, "class_for(%u) = %u, want %u\n", len,
					cfs_class_for(len), c);
			for_ok = 0;
		}
		/* size - len <= size / 8, i.e. 8 * (size - len) <= size */
		if (len > 512 && 8ull * (cfs_class_size(c) - len) > cfs_class_size(c))
			waste_ok = 0;
	}
	CHECK(for_ok);
	CHECK(waste_ok);
	CHECK_EQ(c, top);
}

static void test_names(void)
{
	char a[CFS_FMT_ARENA_NAME_MAX], b[CFS_FMT_ARENA_NAME_MAX];
	int unique = 1;

	cfs_fmt_arena_name(95, a, sizeof(a));
	CHECK_STR(a, "arena-1m.dat");
	cfs_fmt_arena_name(31, a, sizeof(a));
	CHECK_STR(a, "arena-4k.dat");
	cfs_fmt_arena_name(8, a, sizeof(a));
	CHECK_STR(a, "arena-576.dat");
	cfs_fmt_arena_name(32, a, sizeof(a));
	CHECK_STR(a, "arena-4608.dat");
	cfs_fmt_arena_name(cfs_class_for(1280u << 10), a, sizeof(a));
	CHECK_STR(a, "arena-1280k.dat");
	cfs_fmt_arena_name(143, a, sizeof(a));
	CHECK_STR(a, "arena-64m.dat");
	for (unsigned i = 0; i < CFS_CLASS_CODES; i++)
		for (unsigned j = i + 1; j < CFS_CLASS_CODES; j++) {
			cfs_fmt_arena_name(i, a, sizeof(a));
			cfs_fmt_arena_name(j, b, sizeof(b));
			unique &= strcmp(a, b) != 0;
		}
	CHECK(unique);
}

/* Files appear only for classes that get a slot, come back at open, and
 * cfs_arenas_remove takes every name (old power-of-4 ones included). */
static void test_arenas(void)
{
	char dir[64];
	struct cfs_arenas as;
	uint64_t slot = 99;

	mkdir_tmp(dir, sizeof(dir));
	CHECK_EQ(cfs_arenas_open(&as, dir, 3u << 20), -EINVAL);
	cfs_arenas_close(&as);
	CHECK_EQ(cfs_arenas_open(&as, dir, 1u << 20), 0);
	CHECK_EQ(as.n, 96);
	CHECK(!file_exists(dir, "arena-1m.dat") && !file_exists(dir, "arena-64.dat"));
	CHECK_EQ(cfs_arenas_alloc(&as, 96, &slot), -EINVAL); /* not a class of 1 MiB blocks */
	CHECK_EQ(cfs_arenas_alloc(&as, 8, &slot), 0);
	CHECK_EQ(slot, 0);
	CHECK_EQ(cfs_arenas_alloc(&as, 8, &slot), 0);
	CHECK_EQ(slot, 1);
	CHECK_EQ(cfs_arenas_alloc(&as, 95, &slot), 0);
	CHECK_EQ(slot, 0);
	CHECK(file_exists(dir, "arena-576.dat") && file_exists(dir, "arena-1m.dat"));
	CHECK(!file_exists(dir, "arena-640.dat") && !file_exists(dir, "arena-4k.dat"));
	CHECK_EQ(cfs_arena_write(&as.a[8], 1, "hello", 5), 0);
	CHECK_EQ(cfs_arena_write(&as.a[8], 1, dir, 577), -EINVAL);
	CHECK_EQ(cfs_arena_high(&as.a[8]), 2);
	CHECK_EQ(cfs_arena_high(&as.a[9]), 0);
	cfs_arena_clear(&as.a[8], 1);
	CHECK_EQ(cfs_arena_high(&as.a[8]), 1);
	cfs_arenas_close(&as);
	cfs_arenas_close(&as); /* twice is fine */

	/* reopen: the two files are there again with their slots (free until
	 * claimed), no other file was made */
	CHECK_EQ(cfs_arenas_open(&as, dir, 1u << 20), 0);
	CHECK(as.a[8].fd >= 0 && as.a[95].fd >= 0 && as.a[9].fd < 0);
	CHECK(as.a[8].nslots >= 2);
	CHECK_EQ(cfs_arena_claim(&as.a[8], 1), 0);
	char buf[8] = { 0 };
	CHECK_EQ(cfs_arena_read(&as.a[8], 1, 0, buf, 5), 0);
	CHECK(memcmp(buf, "hello", 5) == 0);
	CHECK_EQ(cfs_arena_claim(&as.a[9], 0), -ERANGE); /* no file, no slots */
	CHECK(cfs_arenas_allocated(&as) >= 4096);
	cfs_arenas_close(&as);

	/* every name any code makes goes, and the old scheme's names are among them */
	char p[128];
	const char *old[] = { "arena-4k.dat", "arena-16k.dat", "arena-256k.dat", "arena-2m.dat",
			      "arena-64m.dat" };
	for (size_t i = 0; i < sizeof(old) / sizeof(old[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, old[i]);
		int f = open(p, O_CREAT | O_WRONLY, 0600);
		CHECK(f >= 0);
		close(f);
	}
	CHECK_EQ(cfs_arenas_remove(dir), 0);
	for (size_t i = 0; i < sizeof(old) / sizeof(old[0]); i++)
		CHECK(!file_exists(dir, old[i]));
	CHECK(!file_exists(dir, "arena-576.dat") && !file_exists(dir, "arena-1m.dat"));
	rm_dir(dir);
}

int main(void)
{
	test_sizes();
	check_block_size(1u << 20);
	check_block_size(64u << 20);
	test_names();
	test_arenas();
	return check_done("test_classes");
}
