/* Unit tests: nsdb's rows that let a restarted server process serve what an
 * earlier one handed out (parent rows, file handle numbers and rows), on a
 * store in a temporary folder; plus the cost of a handle row (one write
 * transaction at open, one at release), printed for the record; and the
 * choice of where rows go (the shared table, the index as its overflow, or
 * nowhere). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "err.h"
#include "fhtab.h"
#include "nsdb.h"
#include "store.h"
#include "store_util.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_parents(const char *dir)
{
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
	struct cfs_nsdb *n;
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	uint64_t p = 0;
	CHECK_EQ(cfs_nsdb_get_parent(n, 5, &p), -ENOENT);
	uint64_t kids[] = { 5, 6, 7 };
	CHECK_EQ(cfs_nsdb_set_parents(n, 1, kids, 3), 0);
	for (int i = 0; i < 3; i++) {
		p = 0;
		CHECK_EQ(cfs_nsdb_get_parent(n, kids[i], &p), 0);
		CHECK_EQ(p, 1);
	}
	CHECK_EQ(cfs_nsdb_set_parents(n, 1, kids, 3), 0); /* unchanged: nothing written */
	CHECK_EQ(cfs_nsdb_set_parents(n, 1, kids, 0), 0);
	/* 6 moved into folder 5, 8 is new there */
	uint64_t moved[] = { 6, 8 };
	CHECK_EQ(cfs_nsdb_set_parents(n, 5, moved, 2), 0);
	CHECK_EQ(cfs_nsdb_get_parent(n, 6, &p), 0);
	CHECK_EQ(p, 5);
	CHECK_EQ(cfs_nsdb_get_parent(n, 8, &p), 0);
	CHECK_EQ(p, 5);
	CHECK_EQ(cfs_nsdb_get_parent(n, 7, &p), 0);
	CHECK_EQ(p, 1);
	cfs_nsdb_free(n);
	cfs_store_close(s);
	/* a restart keeps them */
	s = open_store(dir, K64, 64u << 20, 0);
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	CHECK_EQ(cfs_nsdb_get_parent(n, 6, &p), 0);
	CHECK_EQ(p, 5);
	cfs_nsdb_free(n);
	cfs_store_close(s);
}

/* Inode numbers for a 100,000-entry batch with repeated ids (a shortcut
 * and its target share no id, but a restarted listing can repeat one): the
 * same id gets one number, distinct ids distinct ones, numbers stay across
 * calls; a sort, not n^2 compares, so this is quick. */
static void test_inos_batch(const char *dir)
{
	struct cfs_store *s = open_store(dir, K64, 256u << 20, 0);
	struct cfs_nsdb *n;
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	size_t count = 100000, distinct = 90000;
	char (*buf)[16] = calloc(count, sizeof(*buf));
	const char **ids = calloc(count, sizeof(*ids));
	uint64_t *inos = calloc(count, sizeof(*inos)), *again = calloc(count, sizeof(*again));
	for (size_t i = 0; i < count; i++) {
		snprintf(buf[i], sizeof(buf[i]), "id%zu", (i * 7919) % distinct);
		ids[i] = buf[i];
	}
	const char *first[] = { "id5" }; /* one number taken before the batch */
	uint64_t five = 0;
	CHECK_EQ(cfs_nsdb_inos(n, first, 1, &five), 0);
	double t0 = now_s();
	CHECK_EQ(cfs_nsdb_inos(n, ids, count, inos), 0);
	double t1 = now_s();
	CHECK_EQ(cfs_nsdb_inos(n, ids, count, again), 0);
	uint64_t *by_id = calloc(distinct, sizeof(*by_id));
	int bad = 0;
	for (size_t i = 0; i < count; i++) {
		size_t k = (i * 7919) % distinct;
		bad += !inos[i] || inos[i] != again[i] || (by_id[k] && by_id[k] != inos[i]);
		by_id[k] = inos[i];
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(by_id[5], five);
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t k = 0; k < distinct; k++)
		if (k != 5) {
			lo = by_id[k] < lo ? by_id[k] : lo;
			hi = by_id[k] > hi ? by_id[k] : hi;
		}
	CHECK_EQ(hi - lo + 1, distinct - 1); /* one fresh number per new id, no gaps */
	printf("inode numbers, %zu entries (%zu distinct): %.0f ms\n", count, distinct,
	       (t1 - t0) * 1e3);
	free(by_id);
	free(buf);
	free(ids);
	free(inos);
	free(again);
	cfs_nsdb_free(n);
	cfs_store_close(s);
}

/* Handle numbers only grow, across a store closed with handles never
 * released (a killed server) and opened again. */
static void test_fh_counter(const char *dir)
{
	uint64_t last = 0;
	for (int round = 0; round < 3; round++) {
		struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
		struct cfs_nsdb *n;
		CHECK_EQ(cfs_nsdb_new(s, &n), 0);
		int count = round == 1 ? CFS_NSDB_FH_RANGE + 10 : 5; /* cross a range */
		for (int i = 0; i < count; i++) {
			uint64_t fh = 0;
			CHECK_EQ(cfs_nsdb_fh_alloc(n, &fh), 0);
			CHECK(fh != 0);
			CHECK(fh > last);
			last = fh;
		}
		cfs_nsdb_free(n);
		cfs_store_close(s);
	}
	/* two nsdb on one store (never done, but numbers must still not repeat) */
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
	struct cfs_nsdb *a, *b;
	CHECK_EQ(cfs_nsdb_new(s, &a), 0);
	CHECK_EQ(cfs_nsdb_new(s, &b), 0);
	uint64_t fa = 0, fb = 0;
	CHECK_EQ(cfs_nsdb_fh_alloc(a, &fa), 0);
	CHECK_EQ(cfs_nsdb_fh_alloc(b, &fb), 0);
	CHECK(fa > last && fb > last && fa != fb);
	cfs_nsdb_free(a);
	cfs_nsdb_free(b);
	cfs_store_close(s);
}

static void test_fh_rows(const char *dir)
{
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
	struct cfs_nsdb *n;
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	struct cfs_nsdb_fh r = { .ino = 42, .size = 1234567 }, g;
	snprintf(r.key, sizeof(r.key), "1AbC@r:rev7");
	snprintf(r.id, sizeof(r.id), "1AbC");
	snprintf(r.rev, sizeof(r.rev), "rev7");
	CHECK_EQ(cfs_nsdb_fh_get(n, 4096, &g), -ENOENT);
	CHECK_EQ(cfs_nsdb_fh_put(n, 4096, &r), 0);
	struct cfs_nsdb_fh e = { .ino = 43, .size = -1 };
	snprintf(e.key, sizeof(e.key), "1Doc@v:3");
	snprintf(e.id, sizeof(e.id), "1Doc");
	snprintf(e.export_mime, sizeof(e.export_mime), "application/pdf");
	CHECK_EQ(cfs_nsdb_fh_put(n, 4097, &e), 0);
	cfs_nsdb_free(n);
	cfs_store_close(s);

	s = open_store(dir, K64, 64u << 20, 0); /* after a restart */
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	CHECK_EQ(cfs_nsdb_fh_get(n, 4096, &g), 0);
	CHECK_EQ(g.ino, 42);
	CHECK_EQ(g.size, 1234567);
	CHECK_STR(g.key, "1AbC@r:rev7");
	CHECK_STR(g.id, "1AbC");
	CHECK_STR(g.rev, "rev7");
	CHECK_STR(g.export_mime, "");
	CHECK_EQ(cfs_nsdb_fh_get(n, 4097, &g), 0);
	CHECK_EQ(g.ino, 43);
	CHECK_EQ(g.size, -1);
	CHECK_STR(g.rev, "");
	CHECK_STR(g.export_mime, "application/pdf");
	CHECK_EQ(cfs_nsdb_fh_del(n, 4096), 0);
	CHECK_EQ(cfs_nsdb_fh_get(n, 4096, &g), -ENOENT);
	CHECK_EQ(cfs_nsdb_fh_del(n, 4096), -ENOENT);
	CHECK_EQ(cfs_nsdb_fh_get(n, 4097, &g), 0);
	/* a damaged row reads as damaged once, then is gone */
	unsigned char k[11] = "fh:";
	unsigned long long fh = 4097;
	for (int i = 0; i < 8; i++)
		k[3 + i] = (unsigned char)(fh >> (8 * i));
	CHECK_EQ(cfs_store_meta_put(s, "meta", k, sizeof(k), "CFH1junk", 8), 0);
	CHECK_EQ(cfs_nsdb_fh_get(n, 4097, &g), CFS_E_PROTO);
	CHECK_EQ(cfs_nsdb_fh_get(n, 4097, &g), -ENOENT);
	/* strings that do not fit are refused, not cut */
	struct cfs_nsdb_fh bad = r;
	memset(bad.id, 'x', sizeof(bad.id));
	CHECK_EQ(cfs_nsdb_fh_put(n, 4098, &bad), -EINVAL);
	/* a fresh mount drops every handle row, and nothing else */
	for (uint64_t h = 5000; h < 5300; h++)
		CHECK_EQ(cfs_nsdb_fh_put(n, h, &r), 0);
	uint64_t ino = 7;
	CHECK_EQ(cfs_nsdb_set_parents(n, 3, &ino, 1), 0);
	CHECK_EQ(cfs_store_meta_put(s, "meta", "fh", 2, "x", 1), 0);   /* not the prefix */
	CHECK_EQ(cfs_store_meta_put(s, "meta", "fi:", 3, "y", 1), 0);  /* sorts after it */
	uint64_t gone = 0, parent = 0;
	CHECK_EQ(cfs_nsdb_fh_clear(s, &gone), 0);
	CHECK_EQ(gone, 300);
	CHECK_EQ(cfs_nsdb_fh_get(n, 5000, &g), -ENOENT);
	CHECK_EQ(cfs_nsdb_fh_get(n, 5299, &g), -ENOENT);
	CHECK_EQ(cfs_nsdb_get_parent(n, 7, &parent), 0);
	CHECK_EQ(parent, 3);
	void *v = NULL;
	size_t vl = 0;
	CHECK_EQ(cfs_store_meta_get(s, "meta", "fh", 2, &v, &vl), 0);
	free(v);
	CHECK_EQ(cfs_store_meta_get(s, "meta", "fi:", 3, &v, &vl), 0);
	free(v);
	CHECK_EQ(cfs_nsdb_fh_clear(s, &gone), 0);
	CHECK_EQ(gone, 0);
	cfs_nsdb_free(n);
	cfs_store_close(s);
}

static int index_has_fh(struct cfs_store *s, uint64_t fh)
{
	unsigned char k[11] = "fh:";
	for (int i = 0; i < 8; i++)
		k[3 + i] = (unsigned char)(fh >> (8 * i));
	void *v = NULL;
	size_t vl = 0;
	int rc = cfs_store_meta_get(s, "meta", k, sizeof(k), &v, &vl);
	free(v);
	return rc == 0;
}

/* Rows in the shared table never touch the index; a row the table has no
 * room for (a full neighbourhood, or too long) goes to the index and is
 * found and deleted there; with no rows kept, nothing is stored at all. */
static void test_fh_where(const char *dir)
{
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
	struct cfs_nsdb *n;
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	CHECK_EQ(cfs_nsdb_fh_keep(n, CFS_NSDB_FH_SHARED, NULL), -EINVAL);
	uint32_t slots = 256;
	size_t len = cfs_fhtab_size(slots);
	void *mem = calloc(1, len);
	struct cfs_fhtab *t;
	CHECK_EQ(cfs_fhtab_attach(mem, len, &t, NULL), 0);
	CHECK_EQ(cfs_nsdb_fh_keep(n, CFS_NSDB_FH_SHARED, t), 0);
	struct cfs_nsdb_fh r = { .ino = 42, .size = 99 }, g;
	snprintf(r.key, sizeof(r.key), "1AbC@r:rev7");
	snprintf(r.id, sizeof(r.id), "1AbC");
	snprintf(r.rev, sizeof(r.rev), "rev7");
	CHECK_EQ(cfs_nsdb_fh_put(n, 4096, &r), 0);
	CHECK(!index_has_fh(s, 4096));
	CHECK_EQ(cfs_fhtab_count(t), 1);
	CHECK_EQ(cfs_nsdb_fh_get(n, 4096, &g), 0);
	CHECK_EQ(g.ino, 42);
	CHECK_STR(g.key, "1AbC@r:rev7");
	/* a restarted server: a new nsdb on the same table */
	cfs_nsdb_free(n);
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	CHECK_EQ(cfs_nsdb_fh_keep(n, CFS_NSDB_FH_SHARED, t), 0);
	CHECK_EQ(cfs_nsdb_fh_get(n, 4096, &g), 0);
	CHECK_EQ(g.size, 99);
	CHECK_EQ(cfs_nsdb_fh_del(n, 4096), 0);
	CHECK_EQ(cfs_nsdb_fh_get(n, 4096, &g), -ENOENT);
	CHECK_EQ(cfs_nsdb_fh_del(n, 4096), -ENOENT);
	/* overflow: every slot near one home taken */
	for (uint64_t k = 1; k <= CFS_FHTAB_PROBE; k++)
		CHECK_EQ(cfs_nsdb_fh_put(n, k * slots + 1, &r), 0);
	CHECK_EQ(cfs_nsdb_fh_overflowed(n), 0);
	uint64_t spill = (CFS_FHTAB_PROBE + 1) * (uint64_t)slots + 1;
	CHECK_EQ(cfs_nsdb_fh_put(n, spill, &r), 0);
	CHECK_EQ(cfs_nsdb_fh_overflowed(n), 1);
	CHECK(index_has_fh(s, spill));
	CHECK_EQ(cfs_nsdb_fh_get(n, spill, &g), 0);
	CHECK_EQ(g.ino, 42);
	CHECK_EQ(cfs_nsdb_fh_del(n, spill), 0);
	CHECK(!index_has_fh(s, spill));
	/* a row too long for a slot goes to the index too */
	struct cfs_nsdb_fh big = r;
	memset(big.export_mime, 'm', sizeof(big.export_mime) - 1);
	memset(big.key, 'k', 120);
	CHECK_EQ(cfs_nsdb_fh_put(n, 3, &big), 0);
	CHECK(index_has_fh(s, 3));
	CHECK_EQ(cfs_nsdb_fh_get(n, 3, &g), 0);
	CHECK_STR(g.export_mime, big.export_mime);
	CHECK_EQ(cfs_nsdb_fh_del(n, 3), 0);
	/* a damaged shared row is dropped */
	CHECK_EQ(cfs_fhtab_put(t, 5, "CFH1junk", 8), 0);
	CHECK_EQ(cfs_nsdb_fh_get(n, 5, &g), CFS_E_PROTO);
	CHECK_EQ(cfs_nsdb_fh_get(n, 5, &g), -ENOENT);
	/* no rows at all */
	CHECK_EQ(cfs_nsdb_fh_keep(n, CFS_NSDB_FH_NONE, NULL), 0);
	CHECK_EQ(cfs_nsdb_fh_put(n, 6, &r), 0);
	CHECK(!index_has_fh(s, 6));
	CHECK_EQ(cfs_nsdb_fh_get(n, 6, &g), -ENOENT);
	CHECK_EQ(cfs_nsdb_fh_del(n, 6), -ENOENT);
	cfs_fhtab_detach(t);
	free(mem);
	cfs_nsdb_free(n);
	cfs_store_close(s);
}

/* What open + release pay for the handle row: a put and a delete, each its
 * own write transaction (MDB_NOMETASYNC: one data sync per commit). */
static void bench_fh_rows(const char *dir, const char *where)
{
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
	struct cfs_nsdb *n;
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	struct cfs_nsdb_fh r = { .ino = 42, .size = 1 << 20 };
	snprintf(r.key, sizeof(r.key), "1AbCdEfGhIjKlMnOpQrStUvWxYz0123@r:0B1234567890abcdef");
	snprintf(r.id, sizeof(r.id), "1AbCdEfGhIjKlMnOpQrStUvWxYz0123");
	snprintf(r.rev, sizeof(r.rev), "0B1234567890abcdef");
	int iters = 2000;
	double t0 = now_s();
	for (int i = 0; i < iters; i++) {
		uint64_t fh = 0;
		CHECK_EQ(cfs_nsdb_fh_alloc(n, &fh), 0);
		CHECK_EQ(cfs_nsdb_fh_put(n, fh, &r), 0);
		CHECK_EQ(cfs_nsdb_fh_del(n, fh), 0);
	}
	double us = (now_s() - t0) * 1e6 / iters;
	printf("handle row cost (%s): %.1f us per open+release (alloc + put + del)\n", where, us);
	cfs_nsdb_free(n);
	cfs_store_close(s);
}

/* What a listing pays for its parent rows: all new (first listing), then
 * unchanged (every later load: reads only). */
static void bench_parents(const char *dir, const char *where)
{
	struct cfs_store *s = open_store(dir, K64, 64u << 20, 0);
	struct cfs_nsdb *n;
	CHECK_EQ(cfs_nsdb_new(s, &n), 0);
	size_t count = 100000;
	uint64_t *inos = calloc(count, sizeof(*inos));
	for (size_t i = 0; i < count; i++)
		inos[i] = 1000 + i;
	double t0 = now_s();
	CHECK_EQ(cfs_nsdb_set_parents(n, 7, inos, count), 0);
	double t1 = now_s();
	CHECK_EQ(cfs_nsdb_set_parents(n, 7, inos, count), 0);
	double t2 = now_s();
	uint64_t p = 0;
	CHECK_EQ(cfs_nsdb_get_parent(n, 1000 + count - 1, &p), 0);
	CHECK_EQ(p, 7);
	printf("parent rows (%s), %zu entries: %.0f ms new, %.0f ms unchanged\n", where, count,
	       (t1 - t0) * 1e3, (t2 - t1) * 1e3);
	free(inos);
	cfs_nsdb_free(n);
	cfs_store_close(s);
}

int main(void)
{
	char dir[64];
	mkdir_tmp(dir, sizeof(dir));
	test_parents(dir);
	rm_dir(dir);
	mkdir_tmp(dir, sizeof(dir));
	test_inos_batch(dir);
	rm_dir(dir);
	mkdir_tmp(dir, sizeof(dir));
	test_fh_counter(dir);
	rm_dir(dir);
	mkdir_tmp(dir, sizeof(dir));
	test_fh_rows(dir);
	bench_fh_rows(dir, "/tmp");
	rm_dir(dir);
	mkdir_tmp(dir, sizeof(dir));
	test_fh_where(dir);
	rm_dir(dir);
	char shm[64];
	snprintf(shm, sizeof(shm), "/dev/shm/cfs-test-nsdb.XXXXXX");
	if (mkdtemp(shm)) {
		bench_fh_rows(shm, "/dev/shm");
		bench_parents(shm, "/dev/shm");
		rm_dir(shm);
	}
	return check_done("test_nsdb");
}
