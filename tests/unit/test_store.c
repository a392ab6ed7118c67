/* Unit tests: the block store (arenas + index + eviction) and its namespace
 * rows, in temporary folders under /tmp.  Threads, pins and a full tmpfs are
 * in test_store_mt.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "classes.h"
#include "index.h"
#include "log.h"
#include "store.h"
#include "store_util.h"

static void *close_later(void *arg)
{
	usleep(300 * 1000);
	cfs_store_close(arg);
	return NULL;
}

/* A second open waits for a store that is closing (a remount). */
static void test_lock_wait(void)
{
	char dir[64];
	pthread_t t;
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
	CHECK_EQ(put(s, "w@1", 0, 10), 0);
	pthread_create(&t, NULL, close_later, s);
	s = open_store(dir, K64, 64u << 20, 0);
	pthread_join(t, NULL);
	CHECK(read_ok(s, "w@1", 0, 10));
	cfs_store_close(s);
	rm_dir(dir);
}

static void test_roundtrip(void)
{
	char dir[64], buf[8192];
	uint32_t got;
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, 0, 64u << 20, 0);

	CHECK_EQ(cfs_store_block_size(s), 1u << 20);
	struct cfs_store_opts o2 = { .dir = dir };
	struct cfs_store *s2 = (struct cfs_store *)1;
	CHECK_EQ(cfs_store_open(&o2, &s2), -EBUSY); /* one store per folder */
	CHECK(s2 == NULL);
	CHECK_EQ(cfs_store_budget(s), 64u << 20);
	CHECK_EQ(put(s, "A@r1", 0, 1u << 20), 0);
	CHECK_EQ(put(s, "A@r1", 1, 1u << 20), 0);
	CHECK_EQ(put(s, "A@r1", 2, 300000), 0);
	CHECK(read_ok(s, "A@r1", 0, 1u << 20));
	CHECK(read_ok(s, "A@r1", 2, 300000));
	/* offsets and clipping */
	CHECK_EQ(cfs_store_read(s, "A@r1", 1, 1000, 5000, buf, &got), 0);
	CHECK(got == 5000 && same(buf, "A@r1", 1, 1000, 5000, 1u << 20));
	CHECK_EQ(cfs_store_read(s, "A@r1", 2, 299990, 100, buf, &got), 0);
	CHECK(got == 10 && same(buf, "A@r1", 2, 299990, 10, 300000));
	CHECK_EQ(cfs_store_read(s, "A@r1", 2, 300000, 100, buf, &got), 0);
	CHECK_EQ(got, 0);
	/* misses */
	CHECK_EQ(cfs_store_read(s, "A@r1", 3, 0, 100, buf, &got), -ENOENT);
	CHECK_EQ(cfs_store_read(s, "A@r2", 0, 0, 100, buf, &got), -ENOENT);
	CHECK_EQ(cfs_store_cached_bytes(s, "A@r1"), 2 * (1u << 20) + 300000);
	CHECK_EQ(cfs_store_cached_bytes(s, "A@r2"), 0);
	struct cfs_store_stats st = stats(s);
	CHECK_EQ(st.blocks, 3);
	CHECK_EQ(st.keys, 1);
	CHECK_EQ(st.puts, 3);
	CHECK_EQ(st.hits, 5);
	CHECK_EQ(st.misses, 2);
	CHECK_EQ(st.used_bytes, (2u << 20) + 327680); /* 300000 takes a 10 << 15 slot */
	/* bad arguments */
	char longkey[CFS_STORE_KEY_MAX + 2];
	memset(longkey, 'k', sizeof(longkey) - 1);
	longkey[sizeof(longkey) - 1] = 0;
	CHECK_EQ(cfs_store_put(s, longkey, 0, buf, 10), -EINVAL);
	longkey[CFS_STORE_KEY_MAX] = 0;
	CHECK_EQ(cfs_store_put(s, longkey, 0, buf, 10), 0);
	CHECK_EQ(cfs_store_put(s, "", 0, buf, 10), -EINVAL);
	CHECK_EQ(cfs_store_put(s, "A@r1", 0, buf, 0), -EINVAL);
	CHECK_EQ(cfs_store_put(s, "A@r1", 0, buf, (1u << 20) + 1), -EINVAL);
	CHECK_EQ(cfs_store_read(s, "", 0, 0, 10, buf, &got), -EINVAL);
	/* a put replaces: new bytes, new length, the old slot freed */
	fill(buf, "other", 9, 500);
	CHECK_EQ(cfs_store_put(s, "A@r1", 0, buf, 500), 0);
	CHECK_EQ(cfs_store_read(s, "A@r1", 0, 0, 8192, buf, &got), 0);
	CHECK(got == 500 && same(buf, "other", 9, 0, 500, 500));
	st = stats(s);
	CHECK_EQ(st.blocks, 4);
	CHECK_EQ(st.used_bytes, (1u << 20) + 327680 + 64 + 512); /* the 10-byte block: 64 */
	CHECK_EQ(cfs_store_cached_bytes(s, "A@r1"), (1u << 20) + 300000 + 500);
	cfs_store_close(s);
	cfs_store_close(NULL);
	rm_dir(dir);
}

static void test_classes(void)
{
	char dir[64];
	struct {
		uint32_t len, slot;
		const char *file;
	} c[] = { { 1, 64, "arena-64.dat" },
		  { 64, 64, "arena-64.dat" },
		  { 65, 128, "arena-128.dat" },
		  { 513, 576, "arena-576.dat" },
		  { 4096, 4096, "arena-4k.dat" },
		  { 4097, 4608, "arena-4608.dat" },
		  { 100 << 10, 104 << 10, "arena-104k.dat" },
		  { (256 << 10) + 1, 288 << 10, "arena-288k.dat" },
		  { 1 << 20, 1 << 20, "arena-1m.dat" } };
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, 1u << 20, 64u << 20, 0);
	CHECK(!file_exists(dir, "arena-1m.dat")); /* made by the first put of its class */
	uint64_t used = 0;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		CHECK_EQ(put(s, "cls@1", i, c[i].len), 0);
		used += c[i].slot;
		CHECK_EQ(stats(s).used_bytes, used);
		CHECK(read_ok(s, "cls@1", i, c[i].len));
		CHECK(file_exists(dir, c[i].file));
	}
	CHECK(!file_exists(dir, "arena-192.dat") && !file_exists(dir, "arena-2m.dat") &&
	      !file_exists(dir, "arena-16k.dat"));
	cfs_store_close(s);

	/* 2 MiB blocks: a class of their own after 1 MiB; the cache is reset and
	 * the old arenas go */
	s = open_store(dir, 2u << 20, 64u << 20, 0);
	CHECK_EQ(stats(s).blocks, 0);
	CHECK(!file_exists(dir, "arena-1m.dat") && !file_exists(dir, "arena-576.dat"));
	CHECK_EQ(put(s, "big@1", 0, 1536u << 10), 0); /* 12 << 17: a class exactly */
	CHECK_EQ(stats(s).used_bytes, 1536u << 10);
	CHECK_EQ(put(s, "big@1", 1, 2u << 20), 0);
	CHECK_EQ(stats(s).used_bytes, (1536u << 10) + (2u << 20));
	CHECK(file_exists(dir, "arena-1536k.dat") && file_exists(dir, "arena-2m.dat"));
	cfs_store_close(s);

	/* 64 KiB blocks: the 2 MiB cache's arenas are gone */
	s = open_store(dir, K64, 64u << 20, 0);
	CHECK(!file_exists(dir, "arena-1536k.dat") && !file_exists(dir, "arena-2m.dat"));
	cfs_store_close(s);

	uint32_t bad[] = { 3000, 32u << 10, 128u << 20, 3 * K64 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cfs_store_opts o = { .dir = dir, .block_size = bad[i] };
		CHECK_EQ(cfs_store_open(&o, &s), -EINVAL);
		CHECK(s == NULL);
	}
	/* automatic budget: at least 64 MiB */
	s = open_store(dir, K64, 0, 0);
	CHECK(cfs_store_budget(s) >= (64u << 20));
	cfs_store_close(s);
	rm_dir(dir);
}

/* Blocks of every class of 1 MiB blocks (and lengths in between), evicted
 * and put back, survive a reopen: rows rebuilt, slots claimed, bytes intact,
 * the used bytes the sum of the class sizes. */
static void test_many_classes(void)
{
	char dir[64], key[32];
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, 1u << 20, 256u << 20, 0);
	uint32_t lens[600];
	uint64_t used = 0, bytes = 0;
	size_t n = sizeof(lens) / sizeof(lens[0]);

	for (size_t i = 0; i < n; i++) {
		/* one length at the top of each class, then pseudo-random ones */
		lens[i] = i < 96 ? cfs_class_size((unsigned)i)
				 : (uint32_t)(mix(i) % (1u << (6 + mix(i * 7) % 15))) + 1;
		snprintf(key, sizeof(key), "many%zu@r", i % 50);
		CHECK_EQ(put(s, key, i, lens[i]), 0);
		used += cfs_class_size(cfs_class_for(lens[i]));
		bytes += lens[i];
	}
	CHECK_EQ(stats(s).used_bytes, used);
	CHECK_EQ(stats(s).blocks, n);
	/* waste over the whole set: the slots hold the bytes within 1/8 (small
	 * lengths below 512 B aside, which are few here) */
	CHECK(used < bytes + bytes / 8 + 600 * 64);
	/* evict every tenth key and put it back with another length */
	uint64_t freed = 0;
	CHECK_EQ(cfs_store_evict_prefix(s, "many1", &freed, NULL), 0); /* many1, many10..19 */
	for (size_t i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "many%zu@r", i % 50);
		if (key[4] != '1' || (key[5] != '@' && key[6] != '@'))
			continue;
		used -= cfs_class_size(cfs_class_for(lens[i]));
		lens[i] = lens[i] % 3000 + 1;
		CHECK_EQ(put(s, key, i, lens[i]), 0);
		used += cfs_class_size(cfs_class_for(lens[i]));
	}
	CHECK(freed > 0);
	CHECK_EQ(stats(s).used_bytes, used);
	cfs_store_close(s);

	s = open_store(dir, 1u << 20, 256u << 20, 0);
	CHECK_EQ(stats(s).blocks, n);
	CHECK_EQ(stats(s).used_bytes, used);
	int all = 1;
	for (size_t i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "many%zu@r", i % 50);
		all &= read_ok(s, key, i, lens[i]);
	}
	CHECK(all);
	CHECK_EQ(stats(s).crc_failures, 0);
	/* new puts take the free slots, not past them */
	CHECK_EQ(put(s, "after@r", 0, 100), 0);
	CHECK(read_ok(s, "after@r", 0, 100));
	cfs_store_close(s);
	rm_dir(dir);
}

/* A cache written with the power-of-4 classes (header and rows of version 1,
 * "arena-4k.dat" ...) is emptied at open, its arenas removed and the header
 * rewritten for the current scheme. */
static void test_old_format_reset(void)
{
	char dir[64], p[600];
	unsigned char h[64] = "CFSSTOR1", row[CFS_FMT_ROW_SIZE] = { 1, 12 };
	struct cfs_index *ix;
	void *v;
	size_t vl;

	mkdir_tmp(dir, sizeof(dir));
	snprintf(p, sizeof(p), "%s/index.mdb", dir);
	CHECK_EQ(cfs_index_open(p, 1 << 20, 1 << 30, &ix), 0);
	h[8] = 1;                    /* version 1 */
	h[13] = 0x10;                /* block size 1 MiB, little-endian */
	h[16] = 7;                   /* epoch */
	h[24] = 5;                   /* nclasses, then sizes 4k 16k 64k 256k 1m */
	uint32_t sizes[] = { 4u << 10, 16u << 10, 64u << 10, 256u << 10, 1u << 20 };
	for (int i = 0; i < 5; i++)
		for (int b = 0; b < 4; b++)
			h[28 + 4 * i + b] = (unsigned char)(sizes[i] >> (8 * b));
	CHECK_EQ(cfs_index_put(ix, CFS_IX_STORE, "header", 6, h, sizeof(h)), 0);
	/* a 100-byte block in slot 0 of the 4k arena, as version 1 wrote it */
	row[4] = 100;
	static const unsigned char okey[14] = { 'o', 'l', 'd', '@', 'r' }; /* "old@r\0", block 0 */
	CHECK_EQ(cfs_index_put(ix, CFS_IX_BLOCKS, okey, sizeof(okey), row, sizeof(row)), 0);
	cfs_index_close(ix);
	snprintf(p, sizeof(p), "%s/arena-4k.dat", dir);
	int fd = open(p, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0 && pwrite(fd, "x", 1, 4095) == 1);
	close(fd);
	snprintf(p, sizeof(p), "%s/arena-256k.dat", dir);
	fd = open(p, O_CREAT | O_WRONLY, 0600);
	close(fd);

	struct cfs_store *s = open_store(dir, 1u << 20, 64u << 20, 0);
	CHECK_EQ(stats(s).blocks, 0);
	CHECK_EQ(stats(s).used_bytes, 0);
	CHECK(!cfs_store_has(s, "old@r", 0));
	CHECK(!file_exists(dir, "arena-4k.dat") && !file_exists(dir, "arena-256k.dat"));
	CHECK_EQ(put(s, "new@r", 0, 100), 0);
	cfs_store_close(s);

	snprintf(p, sizeof(p), "%s/index.mdb", dir);
	CHECK_EQ(cfs_index_open(p, 1 << 20, 1 << 30, &ix), 0);
	CHECK_EQ(cfs_index_get(ix, CFS_IX_STORE, "header", 6, &v, &vl), 0);
	const unsigned char *b = v;
	CHECK(vl == 64 && memcmp(b, "CFSSTOR1", 8) == 0);
	CHECK_EQ(b[8], 2);                  /* version */
	CHECK_EQ(b[16], 8);                 /* the epoch went on */
	CHECK_EQ(b[24], CFS_CLASS_SCHEME);
	CHECK_EQ(b[28], 96);                /* class codes of 1 MiB blocks */
	free(v);
	cfs_index_close(ix);
	s = open_store(dir, 1u << 20, 64u << 20, 0);
	CHECK(read_ok(s, "new@r", 0, 100)); /* the new format is kept */
	cfs_store_close(s);
	rm_dir(dir);
}

static void test_reopen_and_corruption(void)
{
	char dir[64], key[32], p[600];
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
	for (int k = 0; k < 5; k++)
		for (uint64_t b = 0; b < 10; b++) {
			snprintf(key, sizeof(key), "file%d@rev", k);
			CHECK_EQ(put(s, key, b, len_of(k, b)), 0);
		}
	struct cfs_store_stats before = stats(s);
	cfs_store_close(s);

	s = open_store(dir, K64, 64u << 20, 0);
	struct cfs_store_stats after = stats(s);
	CHECK_EQ(after.blocks, 50);
	CHECK_EQ(after.keys, 5);
	CHECK_EQ(after.used_bytes, before.used_bytes);
	int all = 1;
	for (int k = 0; k < 5; k++)
		for (uint64_t b = 0; b < 10; b++) {
			snprintf(key, sizeof(key), "file%d@rev", k);
			all &= read_ok(s, key, b, len_of(k, b));
		}
	CHECK(all);
	CHECK_EQ(stats(s).crc_failures, 0);
	/* one full block alone in the 64k arena: at slot 0 */
	CHECK_EQ(cfs_store_evict_prefix(s, "file", NULL, NULL), 0);
	CHECK_EQ(put(s, "victim@1", 0, K64), 0);
	cfs_store_close(s);

	/* corrupt it on disk: a miss, counted, never wrong bytes */
	snprintf(p, sizeof(p), "%s/arena-64k.dat", dir);
	int fd = open(p, O_WRONLY);
	CHECK(fd >= 0);
	CHECK_EQ(pwrite(fd, "garbage", 7, 100), 7);
	close(fd);
	s = open_store(dir, K64, 64u << 20, 0);
	char buf[100];
	uint32_t got = 99;
	CHECK_EQ(stats(s).blocks, 1);
	CHECK_EQ(cfs_store_read(s, "victim@1", 0, 0, sizeof(buf), buf, &got), -ENOENT);
	CHECK_EQ(got, 0);
	CHECK_EQ(stats(s).crc_failures, 1);
	CHECK_EQ(stats(s).blocks, 0);
	CHECK_EQ(stats(s).used_bytes, 0);
	CHECK_EQ(cfs_store_read(s, "victim@1", 0, 0, sizeof(buf), buf, &got), -ENOENT);
	CHECK_EQ(stats(s).crc_failures, 1);
	CHECK_EQ(put(s, "victim@1", 0, K64), 0);
	CHECK(read_ok(s, "victim@1", 0, K64));
	cfs_store_close(s);
	s = open_store(dir, K64, 64u << 20, 0);
	CHECK(read_ok(s, "victim@1", 0, K64));
	CHECK_EQ(stats(s).crc_failures, 0);
	cfs_store_close(s);

	/* verify_always catches a slot changed under a running store */
	s = open_store(dir, K64, 64u << 20, 1);
	CHECK(read_ok(s, "victim@1", 0, K64));
	fd = open(p, O_WRONLY);
	CHECK_EQ(pwrite(fd, "X", 1, 5), 1);
	close(fd);
	CHECK_EQ(cfs_store_read(s, "victim@1", 0, 10, 10, buf, &got), -ENOENT);
	CHECK_EQ(stats(s).crc_failures, 1);
	CHECK_EQ(put(s, "victim@1", 0, K64), 0);
	cfs_store_close(s);

	/* a row that names a slot another row took is dropped at open */
	struct cfs_index *ix;
	struct cfs_fmt_row row = { .cls = 63, .len = K64, .crc = 1, .slot = 0, .gen = 1 };
	snprintf(p, sizeof(p), "%s/index.mdb", dir);
	CHECK_EQ(cfs_index_open(p, 1 << 20, 1 << 30, &ix), 0);
	CHECK_EQ(cfs_index_block_put(ix, "zzz@dup", 0, &row), 0);
	row.slot = 1u << 30; /* past the end */
	CHECK_EQ(cfs_index_block_put(ix, "zzz@far", 0, &row), 0);
	row.slot = 0;
	row.cls = 96; /* no such class for 64 KiB blocks (top: 63) */
	CHECK_EQ(cfs_index_block_put(ix, "zzz@cls", 0, &row), 0);
	cfs_index_close(ix);
	s = open_store(dir, K64, 64u << 20, 0);
	CHECK_EQ(stats(s).blocks, 1);
	CHECK(read_ok(s, "victim@1", 0, K64));
	CHECK_EQ(cfs_store_read(s, "zzz@dup", 0, 0, 10, buf, &got), -ENOENT);
	cfs_store_close(s);

	/* rows past a truncated arena are dropped, and stay dropped */
	snprintf(p, sizeof(p), "%s/arena-64k.dat", dir);
	CHECK_EQ(truncate(p, 0), 0);
	s = open_store(dir, K64, 64u << 20, 0);
	CHECK_EQ(stats(s).blocks, 0);
	cfs_store_close(s);
	CHECK_EQ(truncate(p, 1 << 20), 0);
	s = open_store(dir, K64, 64u << 20, 0);
	CHECK_EQ(stats(s).blocks, 0);
	cfs_store_close(s);

	/* an index that is not LMDB: start afresh */
	snprintf(p, sizeof(p), "%s/index.mdb", dir);
	FILE *f = fopen(p, "w");
	for (int i = 0; i < 3000; i++)
		fputs("garbage!", f);
	fclose(f);
	s = open_store(dir, K64, 64u << 20, 0);
	CHECK_EQ(stats(s).blocks, 0);
	CHECK_EQ(put(s, "after@1", 0, 100), 0);
	cfs_store_close(s);
	rm_dir(dir);
}

static void test_lru(void)
{
	char dir[64], key[16];
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, K64, 4 * K64, 0);

	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		CHECK_EQ(put(s, key, 0, K64), 0);
	}
	CHECK(read_ok(s, "k0", 0, K64)); /* k1 is now the oldest */
	CHECK_EQ(put(s, "k4", 0, K64), 0);
	CHECK_EQ(cfs_store_cached_bytes(s, "k1"), 0);
	CHECK(cfs_store_cached_bytes(s, "k0") == K64 && cfs_store_cached_bytes(s, "k2") == K64 &&
	      cfs_store_cached_bytes(s, "k3") == K64 && cfs_store_cached_bytes(s, "k4") == K64);
	struct cfs_store_stats st = stats(s);
	CHECK_EQ(st.evictions, 1);
	CHECK_EQ(st.evicted_bytes, K64);
	CHECK_EQ(st.used_bytes, 4 * K64);
	/* order now k2 k3 k0 k4; touch k2, so k3 goes next */
	CHECK(read_ok(s, "k2", 0, K64));
	CHECK_EQ(put(s, "k5", 0, K64), 0);
	CHECK_EQ(cfs_store_cached_bytes(s, "k3"), 0);
	CHECK_EQ(cfs_store_cached_bytes(s, "k2"), K64);

	/* a held key is not evicted; with everything held a put gets -ENOSPC */
	CHECK_EQ(cfs_store_hold(s, "k0"), 0);
	for (int i = 10; i < 16; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		CHECK_EQ(put(s, key, 0, K64), 0);
	}
	CHECK_EQ(cfs_store_cached_bytes(s, "k0"), K64);
	CHECK_EQ(cfs_store_hold(s, "k13"), 0);
	CHECK_EQ(cfs_store_hold(s, "k14"), 0);
	CHECK_EQ(cfs_store_hold(s, "k15"), 0);
	CHECK_EQ(put(s, "k20", 0, K64), -ENOSPC);
	CHECK_EQ(put(s, "k13", 1, 100), -ENOSPC);
	cfs_store_release(s, "k0");
	CHECK_EQ(put(s, "k20", 0, K64), 0);
	CHECK_EQ(cfs_store_cached_bytes(s, "k0"), 0);
	cfs_store_release(s, "k13");
	cfs_store_release(s, "k14");
	cfs_store_release(s, "k15");
	cfs_store_release(s, "never-held");

	/* many sizes: the budget is never exceeded */
	int within = 1;
	for (int i = 0; i < 300; i++) {
		snprintf(key, sizeof(key), "m%d", i % 37);
		uint32_t len = (uint32_t)(mix((uint64_t)i) % K64) + 1;
		CHECK_EQ(put(s, key, (uint64_t)i, len), 0);
		within &= stats(s).used_bytes <= 4 * K64;
	}
	CHECK(within);
	cfs_store_close(s);

	/* a block larger than the whole budget cannot be cached */
	s = open_store(dir, K64, 32u << 10, 0);
	CHECK_EQ(put(s, "x", 0, K64), -ENOSPC);
	CHECK_EQ(put(s, "x", 0, 4096), 0);
	cfs_store_close(s);
	rm_dir(dir);
}

static void test_evict(void)
{
	char dir[64];
	uint64_t bytes = 99, blocks = 99;
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);

	put(s, "F1@r1", 0, K64);
	put(s, "F1@r1", 1, K64);
	put(s, "F1@r1", 2, 10000);   /* 10k slot */
	put(s, "F1@r2", 0, K64);
	put(s, "F2@r1", 0, K64);
	put(s, "F2@r1", 1, 100);     /* 128 B slot */
	CHECK_EQ(cfs_store_evict_prefix(s, "F1@", &bytes, &blocks), 0);
	CHECK_EQ(blocks, 4);
	CHECK_EQ(bytes, 3 * K64 + (10u << 10));
	CHECK_EQ(cfs_store_cached_bytes(s, "F1@r1"), 0);
	CHECK_EQ(cfs_store_cached_bytes(s, "F2@r1"), K64 + 100);
	CHECK_EQ(cfs_store_evict_prefix(s, "nomatch", &bytes, &blocks), 0);
	CHECK(bytes == 0 && blocks == 0);
	struct cfs_store_stats st = stats(s);
	CHECK_EQ(st.used_bytes, K64 + 128);
	CHECK_EQ(st.keys, 1);
	CHECK_EQ(st.evictions, 4);

	/* evict_to: oldest first, until used <= target */
	put(s, "G@1", 0, K64);
	put(s, "G@1", 1, K64);
	CHECK(read_ok(s, "F2@r1", 0, K64)); /* F2@r1 block 1 is now the oldest */
	CHECK_EQ(cfs_store_evict_to(s, 3 * K64, &bytes, &blocks), 0);
	CHECK(bytes == 128 && blocks == 1);
	CHECK_EQ(cfs_store_cached_bytes(s, "F2@r1"), K64);
	CHECK_EQ(cfs_store_evict_to(s, K64 + 1, &bytes, &blocks), 0);
	CHECK(bytes == 2 * K64 && blocks == 2);
	CHECK_EQ(cfs_store_cached_bytes(s, "F2@r1"), K64); /* touched last */
	CHECK_EQ(cfs_store_evict_to(s, 1u << 30, &bytes, &blocks), 0);
	CHECK(bytes == 0 && blocks == 0);
	put(s, "H@1", 0, 5);
	CHECK_EQ(cfs_store_evict_prefix(s, "", &bytes, &blocks), 0);
	CHECK(bytes == K64 + 64 && blocks == 2);
	CHECK_EQ(stats(s).used_bytes, 0);
	CHECK_EQ(stats(s).blocks, 0);
	put(s, "I@1", 0, 5);
	cfs_store_close(s);
	/* evictions are durable */
	s = open_store(dir, K64, 64u << 20, 0);
	CHECK_EQ(stats(s).blocks, 1);
	CHECK_EQ(cfs_store_evict_to(s, 0, &bytes, &blocks), 0);
	CHECK(bytes == 64 && blocks == 1);
	cfs_store_close(s);
	s = open_store(dir, K64, 64u << 20, 0);
	CHECK_EQ(stats(s).blocks, 0);
	cfs_store_close(s);
	rm_dir(dir);
}

static int put_cold(struct cfs_store *s, const char *key, uint64_t block, uint32_t len)
{
	char *buf = malloc(len);
	fill(buf, key, block, len);
	int rc = cfs_store_put_cold(s, key, block, buf, len);
	free(buf);
	return rc;
}

/* Cold puts take free room, or that of other keys' cold blocks never read,
 * and go first; they stay if read. */
static void test_cold(void)
{
	char dir[64];
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, K64, 4 * K64, 0);

	CHECK_EQ(put(s, "read@1", 0, K64), 0);
	CHECK_EQ(put_cold(s, "up@1", 0, K64), 0);
	CHECK_EQ(put_cold(s, "up@1", 1, K64), 0);
	CHECK_EQ(put(s, "read@2", 0, K64), 0);
	CHECK_EQ(stats(s).used_bytes, 4 * K64);
	/* full: a cold put of the same key evicts nothing, not even its own */
	CHECK_EQ(put_cold(s, "up@1", 2, K64), -ENOSPC);
	CHECK_EQ(stats(s).evictions, 0);
	CHECK(read_ok(s, "up@1", 0, K64)); /* read: no longer cold */
	/* a newer copy takes the place of the unread one, never a read one */
	CHECK_EQ(put_cold(s, "up@2", 0, K64), 0);
	CHECK_EQ(stats(s).evictions, 1);
	CHECK(!cfs_store_has(s, "up@1", 1) && cfs_store_has(s, "up@1", 0));
	CHECK_EQ(put_cold(s, "up@2", 1, K64), -ENOSPC); /* only read blocks and its own left */
	CHECK_EQ(put_cold(s, "up@3", 0, 100), 0);        /* up@2's unread block goes */
	CHECK(!cfs_store_has(s, "up@2", 0));
	CHECK(read_ok(s, "read@1", 0, K64) && read_ok(s, "read@2", 0, K64) &&
	      read_ok(s, "up@1", 0, K64));
	/* a normal put takes the cold block that was not read, though it is
	 * younger than the read ones */
	CHECK_EQ(put(s, "read@3", 0, K64), 0);
	CHECK(!cfs_store_has(s, "up@3", 0));
	CHECK(read_ok(s, "read@1", 0, K64) && read_ok(s, "read@2", 0, K64) &&
	      read_ok(s, "up@1", 0, K64));
	cfs_store_close(s);
	rm_dir(dir);
}

/* Retirement: at once when nothing holds or uses the key, else at the last
 * release or unuse; never another key's blocks (a prefix of it included). */
static void test_retire(void)
{
	char dir[64];
	uint64_t freed = 99;
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);

	put(s, "F@r1", 0, K64);
	put(s, "F@r1", 1, 100);
	put(s, "F@r10", 0, K64);
	CHECK_EQ(cfs_store_retire(s, "F@r1", &freed), 0);
	CHECK_EQ(freed, K64 + 128);
	CHECK_EQ(cfs_store_cached_bytes(s, "F@r1"), 0);
	CHECK_EQ(cfs_store_cached_bytes(s, "F@r10"), K64);
	CHECK_EQ(stats(s).retired, 2);
	CHECK_EQ(cfs_store_retire(s, "absent", &freed), 0);
	CHECK_EQ(freed, 0);
	CHECK_EQ(cfs_store_retire(s, "", &freed), -EINVAL);

	/* held: kept until the last release */
	put(s, "G@r1", 0, K64);
	CHECK_EQ(cfs_store_hold(s, "G@r1"), 0);
	CHECK_EQ(cfs_store_hold(s, "G@r1"), 0);
	CHECK_EQ(cfs_store_retire(s, "G@r1", &freed), 0);
	CHECK_EQ(freed, 0);
	CHECK(read_ok(s, "G@r1", 0, K64));
	put(s, "G@r1", 1, K64); /* a reader of the old revision still fills it */
	cfs_store_release(s, "G@r1");
	CHECK_EQ(cfs_store_cached_bytes(s, "G@r1"), 2 * K64);
	cfs_store_release(s, "G@r1");
	CHECK_EQ(cfs_store_cached_bytes(s, "G@r1"), 0);

	/* used (a large open file): on the LRU, oldest first, kept until unuse */
	put(s, "H@r1", 0, K64);
	put(s, "I@r1", 0, K64);
	CHECK_EQ(cfs_store_use(s, "H@r1"), 0);
	CHECK_EQ(cfs_store_retire(s, "H@r1", NULL), 0);
	CHECK_EQ(cfs_store_cached_bytes(s, "H@r1"), K64);
	uint64_t bytes = 0, blocks = 0, used = stats(s).used_bytes;
	CHECK_EQ(cfs_store_evict_to(s, used - K64, &bytes, &blocks), 0);
	CHECK_EQ(cfs_store_cached_bytes(s, "H@r1"), 0); /* the oldest now */
	CHECK_EQ(cfs_store_cached_bytes(s, "I@r1"), K64);
	put(s, "H@r1", 0, K64);
	cfs_store_unuse(s, "H@r1");
	CHECK_EQ(cfs_store_cached_bytes(s, "H@r1"), 0);
	cfs_store_unuse(s, "H@r1"); /* unbalanced: ignored */
	cfs_store_release(s, "never-held");

	/* a key used, then released: not retired, kept */
	CHECK_EQ(cfs_store_use(s, "I@r1"), 0);
	cfs_store_unuse(s, "I@r1");
	CHECK_EQ(cfs_store_cached_bytes(s, "I@r1"), K64);
	cfs_store_close(s);

	/* retirements are durable */
	s = open_store(dir, K64, 64u << 20, 0);
	CHECK_EQ(cfs_store_cached_bytes(s, "F@r1") + cfs_store_cached_bytes(s, "G@r1") +
		 cfs_store_cached_bytes(s, "H@r1"), 0);
	CHECK_EQ(cfs_store_cached_bytes(s, "F@r10"), K64);
	cfs_store_close(s);
	rm_dir(dir);
}

static void test_meta(void)
{
	char dir[64];
	void *v;
	size_t vl;
	uint64_t n;
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, 0, 64u << 20, 0);

	CHECK_EQ(cfs_store_meta_put(s, "dirs", "root", 4, "listing", 7), 0);
	CHECK_EQ(cfs_store_meta_put(s, "bogus", "root", 4, "x", 1), -EINVAL);
	CHECK_EQ(cfs_store_meta_put(s, "blocks", "root", 4, "x", 1), -EINVAL);
	CHECK_EQ(cfs_store_meta_get(s, "dirs", "nope", 4, &v, &vl), -ENOENT);
	CHECK_EQ(cfs_store_meta_del(s, "dirs", "nope", 4), -ENOENT);
	struct cfs_store_kv kv[] = { { "inodes", "id1", 3, "\x05", 1 },
				     { "inos", "\x05", 1, "id1", 3 },
				     { "meta", "token", 5, "t42", 3 } };
	CHECK_EQ(cfs_store_meta_put_many(s, kv, 3), 0);
	kv[1].table = "nope";
	CHECK_EQ(cfs_store_meta_put_many(s, kv, 3), -EINVAL);
	CHECK_EQ(cfs_store_meta_next(s, "ino", 2, &n), 0);
	CHECK_EQ(n, 2);
	CHECK_EQ(cfs_store_meta_next(s, "ino", 2, &n), 0);
	CHECK_EQ(n, 3);
	CHECK_EQ(cfs_store_meta_put(s, "dirs", "gone", 4, "x", 1), 0);
	CHECK_EQ(cfs_store_meta_del(s, "dirs", "gone", 4), 0);
	cfs_store_close(s);

	s = open_store(dir, 0, 64u << 20, 0);
	CHECK_EQ(cfs_store_meta_get(s, "dirs", "root", 4, &v, &vl), 0);
	CHECK(vl == 7 && memcmp(v, "listing", 7) == 0);
	free(v);
	CHECK_EQ(cfs_store_meta_get(s, "inos", "\x05", 1, &v, &vl), 0);
	CHECK(vl == 3 && memcmp(v, "id1", 3) == 0);
	free(v);
	CHECK_EQ(cfs_store_meta_get(s, "meta", "token", 5, &v, &vl), 0);
	CHECK(vl == 3 && memcmp(v, "t42", 3) == 0);
	free(v);
	CHECK_EQ(cfs_store_meta_get(s, "dirs", "gone", 4, &v, &vl), -ENOENT);
	CHECK_EQ(cfs_store_meta_next(s, "ino", 2, &n), 0);
	CHECK_EQ(n, 4);
	cfs_store_close(s);
	rm_dir(dir);
}

/* White box: a pinned block is not evicted, and its slot is not reused
 * before the last pin goes, even once evict_prefix took it. */
int main(void)
{
	cfs_log_set_level(CFS_LOG_WARN);
	test_roundtrip();
	test_lock_wait();
	test_classes();
	test_many_classes();
	test_old_format_reset();
	test_reopen_and_corruption();
	test_lru();
	test_evict();
	test_cold();
	test_retire();
	test_meta();
	return check_done("test_store");
}
