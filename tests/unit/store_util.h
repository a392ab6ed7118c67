/* store_util: helpers shared by the store tests (test_store.c,
 * test_store_mt.c): deterministic block bytes, temporary folders, and
 * put/read/check shorthands. */
#ifndef CFS_STORE_UTIL_H
#define CFS_STORE_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "store.h"

#define K64 (64u << 10)

static inline uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x9e3779b97f4a7c15ULL;
	x ^= x >> 29;
	return x;
}

/* The bytes of (key, block): different for every pair. */
static inline void fill(char *buf, const char *key, uint64_t block, uint32_t len)
{
	uint64_t x = mix(block + 1);
	for (const char *p = key; *p; p++)
		x = mix(x ^ (unsigned char)*p);
	for (uint32_t i = 0; i < len; i++) {
		if (i % 8 == 0)
			x = mix(x + i);
		buf[i] = (char)(x >> (8 * (i % 8)));
	}
}

static inline int same(const char *buf, const char *key, uint64_t block, uint32_t off,
		       uint32_t n, uint32_t len)
{
	char *want = malloc(len ? len : 1);
	fill(want, key, block, len);
	int ok = memcmp(buf, want + off, n) == 0;
	free(want);
	return ok;
}

static inline void mkdir_tmp(char *dir, size_t cap)
{
	snprintf(dir, cap, "/tmp/cfs-test-store.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
}

static inline void rm_dir(const char *dir)
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

static inline int file_exists(const char *dir, const char *name)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

static inline struct cfs_store *open_store(const char *dir, uint32_t bs, uint64_t budget,
					   int verify)
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

static inline int put(struct cfs_store *s, const char *key, uint64_t block, uint32_t len)
{
	char *buf = malloc(len ? len : 1);
	fill(buf, key, block, len);
	int rc = cfs_store_put(s, key, block, buf, len);
	free(buf);
	return rc;
}

/* 1 if the whole block reads back as put() wrote it with length len. */
static inline int read_ok(struct cfs_store *s, const char *key, uint64_t block, uint32_t len)
{
	char *buf = malloc(len + 16);
	uint32_t got = 0;
	int rc = cfs_store_read(s, key, block, 0, len + 16, buf, &got);
	int ok = rc == 0 && got == len && same(buf, key, block, 0, len, len);
	free(buf);
	return ok;
}

static inline struct cfs_store_stats stats(struct cfs_store *s)
{
	struct cfs_store_stats st;
	cfs_store_stats(s, &st);
	return st;
}

static inline uint32_t len_of(int k, uint64_t b)
{
	return (uint32_t)(mix((uint64_t)k * 131 + b) % K64) + 1;
}

#endif
