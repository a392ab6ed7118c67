/* Unit tests: the block store under concurrency — pinned blocks, eight
 * threads putting, reading and evicting, and a store on a 2 MiB tmpfs with a
 * larger budget (skipped when we may not mount one). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "store.h"
#include "store_int.h"
#include "store_util.h"

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
	CHECK(same(buf, "p@1", 0, 0, K64, K64));
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
				if (got != len - off || !same(buf, key, b, off, got, len))
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
	test_pinned();
	test_threads();
	test_enospc();
	return check_done("test_store_mt");
}
