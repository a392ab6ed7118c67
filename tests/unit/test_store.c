/* Unit tests: the block store (arenas + index + eviction) and its namespace
 * rows, in temporary folders under /tmp (and a 2 MiB tmpfs when we may mount
 * one). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "index.h"
#include "log.h"
#include "store.h"
#include "store_int.h"

#define K64 (64u << 10)

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x9e3779b97f4a7c15ULL;
	x ^= x >> 29;
	return x;
}

/* The bytes of (key, block): different for every pair. */
static void fill(char *buf, const char *key, uint64_t block, uint32_t len, uint64_t salt)
{
	uint64_t x = mix(block + 1 + salt);
	for (const char *p = key; *p; p++)
		x = mix(x ^ (unsigned char)*p);
	for (uint32_t i = 0; i < len; i++) {
		if (i % 8 == 0)
			x = mix(x + i);
		buf[i] = (char)(x >> (8 * (i % 8)));
	}
}

static int same(const char *buf, const char *key, uint64_t block, uint32_t off, uint32_t n,
		uint32_t len, uint64_t salt)
{
	char *want = malloc(len ? len : 1);
	fill(want, key, block, len, salt);
	int ok = memcmp(buf, want + off, n) == 0;
	free(want);
	return ok;
}

static void mkdir_tmp(char *dir, size_t cap)
{
	snprintf(dir, cap, "/tmp/cfs-test-store.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
}

static void rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[512];
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static int file_exists(const char *dir, const char *name)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

static struct cfs_store *open_store(const char *dir, uint32_t bs, uint64_t budget, int verify)
{
	struct cfs_store_opts o = { .dir = dir, .block_size = bs, .budget = budget,
				    .verify_always = verify };
	struct cfs_store *s = NULL;
	int rc = cfs_store_open(&o, &s);
	CHECK_EQ(rc, 0);
	if (rc) {
		fprintf(stderr, "cannot open store in %s: %d\n", dir, rc);
		exit(1);
	}
	return s;
}

static int put(struct cfs_store *s, const char *key, uint64_t block, uint32_t len)
{
	char *buf = malloc(len ? len : 1);
	fill(buf, key, block, len, 0);
	int rc = cfs_store_put(s, key, block, buf, len);
	free(buf);
	return rc;
}

/* 1 if the whole block reads back as put() wrote it with length len. */
static int read_ok(struct cfs_store *s, const char *key, uint64_t block, uint32_t len)
{
	char *buf = malloc(len + 16);
	uint32_t got = 0;
	int rc = cfs_store_read(s, key, block, 0, len + 16, buf, &got);
	int ok = rc == 0 && got == len && same(buf, key, block, 0, len, len, 0);
	free(buf);
	return ok;
}

static struct cfs_store_stats stats(struct cfs_store *s)
{
	struct cfs_store_stats st;
	cfs_store_stats(s, &st);
	return st;
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
	CHECK(got == 5000 && same(buf, "A@r1", 1, 1000, 5000, 1u << 20, 0));
	CHECK_EQ(cfs_store_read(s, "A@r1", 2, 299990, 100, buf, &got), 0);
	CHECK(got == 10 && same(buf, "A@r1", 2, 299990, 10, 300000, 0));
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
	CHECK_EQ(st.used_bytes, 3u << 20);
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
	fill(buf, "other", 9, 500, 0);
	CHECK_EQ(cfs_store_put(s, "A@r1", 0, buf, 500), 0);
	CHECK_EQ(cfs_store_read(s, "A@r1", 0, 0, 8192, buf, &got), 0);
	CHECK(got == 500 && same(buf, "other", 9, 0, 500, 500, 0));
	st = stats(s);
	CHECK_EQ(st.blocks, 4);
	CHECK_EQ(st.used_bytes, (2u << 20) + (4u << 10) + (4u << 10));
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
	} c[] = { { 1, 4 << 10 },		 { 4096, 4 << 10 },	    { 4097, 16 << 10 },
		  { 16384, 16 << 10 },		 { 16385, 64 << 10 },	    { 100 << 10, 256 << 10 },
		  { (256 << 10) + 1, 1 << 20 }, { 1 << 20, 1 << 20 } };
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, 1u << 20, 64u << 20, 0);
	uint64_t used = 0;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		CHECK_EQ(put(s, "cls@1", i, c[i].len), 0);
		used += c[i].slot;
		CHECK_EQ(stats(s).used_bytes, used);
		CHECK(read_ok(s, "cls@1", i, c[i].len));
	}
	CHECK(file_exists(dir, "arena-4k.dat") && file_exists(dir, "arena-16k.dat") &&
	      file_exists(dir, "arena-64k.dat") && file_exists(dir, "arena-256k.dat") &&
	      file_exists(dir, "arena-1m.dat") && !file_exists(dir, "arena-2m.dat"));
	cfs_store_close(s);

	/* 2 MiB blocks: a class of their own after 1 MiB; the cache is reset */
	s = open_store(dir, 2u << 20, 64u << 20, 0);
	CHECK_EQ(stats(s).blocks, 0);
	CHECK(file_exists(dir, "arena-2m.dat"));
	CHECK_EQ(put(s, "big@1", 0, 1536u << 10), 0);
	CHECK_EQ(stats(s).used_bytes, 2u << 20);
	CHECK_EQ(put(s, "big@1", 1, 1u << 20), 0);
	CHECK_EQ(stats(s).used_bytes, 3u << 20);
	cfs_store_close(s);

	/* 64 KiB blocks: 4k 16k 64k only, and the old arenas are gone */
	s = open_store(dir, K64, 64u << 20, 0);
	CHECK(!file_exists(dir, "arena-1m.dat") && !file_exists(dir, "arena-2m.dat"));
	CHECK(file_exists(dir, "arena-64k.dat") && !file_exists(dir, "arena-256k.dat"));
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

static uint32_t len_of(int k, uint64_t b)
{
	return (uint32_t)(mix((uint64_t)k * 131 + b) % K64) + 1;
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
	struct cfs_index_row row = { .log2 = 16, .len = K64, .crc = 1, .slot = 0, .gen = 1 };
	snprintf(p, sizeof(p), "%s/index.mdb", dir);
	CHECK_EQ(cfs_index_open(p, 1 << 20, 1 << 30, &ix), 0);
	CHECK_EQ(cfs_index_block_put(ix, "zzz@dup", 0, &row), 0);
	row.slot = 1u << 30; /* past the end */
	CHECK_EQ(cfs_index_block_put(ix, "zzz@far", 0, &row), 0);
	row.slot = 0;
	row.log2 = 21; /* no such class */
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
	put(s, "F1@r1", 2, 10000);   /* 16k slot */
	put(s, "F1@r2", 0, K64);
	put(s, "F2@r1", 0, K64);
	put(s, "F2@r1", 1, 100);     /* 4k slot */
	CHECK_EQ(cfs_store_evict_prefix(s, "F1@", &bytes, &blocks), 0);
	CHECK_EQ(blocks, 4);
	CHECK_EQ(bytes, 3 * K64 + (16u << 10));
	CHECK_EQ(cfs_store_cached_bytes(s, "F1@r1"), 0);
	CHECK_EQ(cfs_store_cached_bytes(s, "F2@r1"), K64 + 100);
	CHECK_EQ(cfs_store_evict_prefix(s, "nomatch", &bytes, &blocks), 0);
	CHECK(bytes == 0 && blocks == 0);
	struct cfs_store_stats st = stats(s);
	CHECK_EQ(st.used_bytes, K64 + (4u << 10));
	CHECK_EQ(st.keys, 1);
	CHECK_EQ(st.evictions, 4);

	/* evict_to: oldest first, until used <= target */
	put(s, "G@1", 0, K64);
	put(s, "G@1", 1, K64);
	CHECK(read_ok(s, "F2@r1", 0, K64)); /* F2@r1 block 1 is now the oldest */
	CHECK_EQ(cfs_store_evict_to(s, 3 * K64, &bytes, &blocks), 0);
	CHECK(bytes == (4u << 10) && blocks == 1);
	CHECK_EQ(cfs_store_cached_bytes(s, "F2@r1"), K64);
	CHECK_EQ(cfs_store_evict_to(s, K64 + 1, &bytes, &blocks), 0);
	CHECK(bytes == 2 * K64 && blocks == 2);
	CHECK_EQ(cfs_store_cached_bytes(s, "F2@r1"), K64); /* touched last */
	CHECK_EQ(cfs_store_evict_to(s, 1u << 30, &bytes, &blocks), 0);
	CHECK(bytes == 0 && blocks == 0);
	put(s, "H@1", 0, 5);
	CHECK_EQ(cfs_store_evict_prefix(s, "", &bytes, &blocks), 0);
	CHECK(bytes == K64 + (4u << 10) && blocks == 2);
	CHECK_EQ(stats(s).used_bytes, 0);
	CHECK_EQ(stats(s).blocks, 0);
	put(s, "I@1", 0, 5);
	cfs_store_close(s);
	/* evictions are durable */
	s = open_store(dir, K64, 64u << 20, 0);
	CHECK_EQ(stats(s).blocks, 1);
	CHECK_EQ(cfs_store_evict_to(s, 0, &bytes, &blocks), 0);
	CHECK(bytes == (4u << 10) && blocks == 1);
	cfs_store_close(s);
	s = open_store(dir, K64, 64u << 20, 0);
	CHECK_EQ(stats(s).blocks, 0);
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
static void test_pinned(void)
{
	char dir[64], key[16], *buf = malloc(K64);
	uint64_t bytes, blocks;
	int verify = -1;
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, K64, 4 * K64, 0);

	CHECK_EQ(put(s, "p@1", 0, K64), 0);
	CHECK_EQ(put(s, "q@1", 0, K64), 0);
	struct cfs_tent *e = cfs_store_pin(s, "p@1", 0, &verify);
	CHECK(e != NULL);
	CHECK_EQ(verify, 0);
	CHECK(cfs_store_pin(s, "p@1", 1, &verify) == NULL);
	CHECK(read_ok(s, "q@1", 0, K64)); /* p is the oldest now */
	CHECK_EQ(cfs_store_evict_to(s, 0, &bytes, &blocks), 0);
	CHECK(bytes == K64 && blocks == 1);
	CHECK_EQ(cfs_store_cached_bytes(s, "p@1"), K64);
	for (int i = 0; i < 6; i++) {
		snprintf(key, sizeof(key), "r%d", i);
		CHECK_EQ(put(s, key, 0, K64), 0);
	}
	CHECK_EQ(cfs_store_cached_bytes(s, "p@1"), K64);
	CHECK_EQ(cfs_store_evict_prefix(s, "p@", &bytes, &blocks), 0);
	CHECK(bytes == K64 && blocks == 1);
	CHECK_EQ(cfs_store_cached_bytes(s, "p@1"), 0);
	CHECK_EQ(cfs_store_read(s, "p@1", 0, 0, 10, buf, NULL), -ENOENT);
	CHECK_EQ(stats(s).used_bytes, 4 * K64); /* p's slot is still taken */
	CHECK_EQ(stats(s).blocks, 3);
	for (int i = 6; i < 12; i++) {
		snprintf(key, sizeof(key), "r%d", i);
		CHECK_EQ(put(s, key, 0, K64), 0);
	}
	CHECK_EQ(stats(s).used_bytes, 4 * K64);
	CHECK_EQ(cfs_arena_read(&s->ar.a[e->cls], e->slot, 0, buf, K64), 0);
	CHECK(same(buf, "p@1", 0, 0, K64, K64, 0));
	cfs_store_unpin(s, e, 0);
	CHECK_EQ(stats(s).used_bytes, 3 * K64);
	CHECK_EQ(put(s, "r12", 0, K64), 0);
	CHECK_EQ(stats(s).blocks, 4);
	cfs_store_close(s);
	free(buf);
	rm_dir(dir);
}

/* --- many threads ------------------------------------------------------------ */

struct worker {
	struct cfs_store *s;
	int id, ops;
	int bad, put_enospc, hits;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	char key[16];
	char *buf = malloc(K64);
	uint64_t x = (uint64_t)w->id * 7919 + 1;

	for (int i = 0; i < w->ops; i++) {
		x = mix(x + (uint64_t)i);
		int k = (int)(x % 24);
		uint64_t b = (x >> 8) % 8;
		uint32_t len = len_of(k, b), got;
		snprintf(key, sizeof(key), "c%d@r", k);
		int op = (int)((x >> 16) % 100);
		if (op < 45) {
			int rc = put(w->s, key, b, len);
			if (rc == -ENOSPC)
				w->put_enospc++;
			else if (rc)
				w->bad++;
		} else if (op < 98) {
			uint32_t off = (uint32_t)((x >> 24) % len);
			int rc = cfs_store_read(w->s, key, b, off, K64, buf, &got);
			if (rc == 0) {
				w->hits++;
				if (got != len - off || !same(buf, key, b, off, got, len, 0))
					w->bad++;
			} else if (rc != -ENOENT) {
				w->bad++;
			}
		} else if (op < 99) {
			if (cfs_store_evict_prefix(w->s, key, NULL, NULL))
				w->bad++;
		} else if (cfs_store_evict_to(w->s, 8 * K64, NULL, NULL)) {
			w->bad++;
		}
	}
	free(buf);
	return NULL;
}

static void test_threads(void)
{
	char dir[64], key[16];
	pthread_t t[8];
	struct worker w[8];
	mkdir_tmp(dir, sizeof(dir));
	struct cfs_store *s = open_store(dir, K64, 24 * K64, 0);

	for (int i = 0; i < 8; i++) {
		w[i] = (struct worker){ .s = s, .id = i, .ops = 1500 };
		pthread_create(&t[i], NULL, work, &w[i]);
	}
	int bad = 0, enospc = 0, hits = 0;
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		bad += w[i].bad;
		enospc += w[i].put_enospc;
		hits += w[i].hits;
	}
	CHECK_EQ(bad, 0);
	CHECK(hits > 100);
	struct cfs_store_stats st = stats(s);
	CHECK(st.used_bytes <= 24 * K64);
	CHECK(st.evictions > 0);
	CHECK_EQ(st.crc_failures, 0);
	printf("threads: %d hits, %d puts refused, %llu evictions\n", hits, enospc,
	       (unsigned long long)st.evictions);
	cfs_store_close(s);
	/* every block left reads back right after a reopen (crc checked) */
	s = open_store(dir, K64, 24 * K64, 0);
	int all = 1;
	uint64_t n = 0;
	for (int k = 0; k < 24; k++)
		for (uint64_t b = 0; b < 8; b++) {
			snprintf(key, sizeof(key), "c%d@r", k);
			uint32_t got;
			char c;
			if (cfs_store_read(s, key, b, 0, 1, &c, &got) != 0)
				continue;
			n++;
			all &= read_ok(s, key, b, len_of(k, b));
		}
	CHECK(all);
	CHECK_EQ(n, stats(s).blocks);
	CHECK_EQ(stats(s).crc_failures, 0);
	cfs_store_close(s);
	rm_dir(dir);
}

/* A budget larger than the file system: puts evict on ENOSPC and go on. */
static void test_enospc(void)
{
	char dir[64], key[16];
	mkdir_tmp(dir, sizeof(dir));
	if (mount("tmpfs", dir, "tmpfs", 0, "size=2m,mode=0700") != 0) {
		printf("test_enospc: skipped (cannot mount tmpfs: %s)\n", strerror(errno));
		rmdir(dir);
		return;
	}
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
	int fails = 0, all = 1;
	for (int i = 0; i < 120; i++) {
		snprintf(key, sizeof(key), "t%d", i);
		uint32_t len = i % 5 == 4 ? 5000 : K64 - (uint32_t)i;
		if (put(s, key, 0, len) != 0)
			fails++;
		else
			all &= read_ok(s, key, 0, len);
	}
	CHECK_EQ(fails, 0);
	CHECK(all);
	struct cfs_store_stats st = stats(s);
	CHECK(st.enospc_retries > 0);
	CHECK(st.evictions > 0);
	CHECK(st.used_bytes <= (2u << 20));
	printf("enospc: %llu retries, %llu evictions, %llu blocks kept\n",
	       (unsigned long long)st.enospc_retries, (unsigned long long)st.evictions,
	       (unsigned long long)st.blocks);
	cfs_store_close(s);
	s = open_store(dir, K64, 64u << 20, 0);
	int n = 0;
	for (int i = 0; i < 120; i++) {
		snprintf(key, sizeof(key), "t%d", i);
		uint32_t len = i % 5 == 4 ? 5000 : K64 - (uint32_t)i;
		if (cfs_store_cached_bytes(s, key)) {
			n++;
			all &= read_ok(s, key, 0, len);
		}
	}
	CHECK(n > 5);
	CHECK(all);
	CHECK_EQ(stats(s).crc_failures, 0);
	cfs_store_close(s);
	umount2(dir, MNT_DETACH);
	rmdir(dir);
}

int main(void)
{
	cfs_log_set_level(CFS_LOG_WARN);
	test_roundtrip();
	test_classes();
	test_reopen_and_corruption();
	test_lru();
	test_evict();
	test_meta();
	test_pinned();
	test_threads();
	test_enospc();
	return check_done("test_store");
}
