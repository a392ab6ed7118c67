/* Unit tests: fhtab, the handle rows kept in memory the supervisor shares
 * with its servers.  Put, get, delete; rows kept by a second attach (a
 * restarted server) and by a process killed with SIGKILL while it held them
 * in a MAP_SHARED region; none in a new region (a fresh mount); half-written
 * slots dropped at attach; a full neighbourhood and a long row refused; many
 * threads at once.  Prints what a put + delete costs. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fhtab.h"

#define SLOTS 1024

static void *region(size_t len)
{
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return m;
}

static size_t row_of(uint64_t fh, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "row of handle %llu: 1AbCdEfGhIjKlMnOpQrStUvWxYz0123@r:0B%llu",
			 (unsigned long long)fh, (unsigned long long)(fh * 7919));
	return (size_t)n;
}

static int has_row(struct cfs_fhtab *t, uint64_t fh)
{
	char want[200], got[CFS_FHTAB_ROW_MAX];
	size_t wl = row_of(fh, want, sizeof(want)), gl = 0;
	return cfs_fhtab_get(t, fh, got, sizeof(got), &gl) == 0 && gl == wl &&
	       memcmp(got, want, wl) == 0;
}

static void test_basic(void)
{
	size_t len = cfs_fhtab_size(SLOTS);
	void *m = region(len);
	struct cfs_fhtab *t;
	uint32_t dropped = 99;
	CHECK_EQ(cfs_fhtab_attach(m, cfs_fhtab_size(CFS_FHTAB_PROBE - 1), &t, NULL), -EINVAL);
	CHECK_EQ(cfs_fhtab_attach((char *)m + 4, len - 4, &t, NULL), -EINVAL);
	CHECK_EQ(cfs_fhtab_attach(m, len, &t, &dropped), 0);
	CHECK_EQ(dropped, 0);
	CHECK_EQ(cfs_fhtab_count(t), 0);
	char row[200], got[CFS_FHTAB_ROW_MAX];
	size_t gl;
	CHECK_EQ(cfs_fhtab_get(t, 4096, got, sizeof(got), &gl), -ENOENT);
	CHECK_EQ(cfs_fhtab_del(t, 4096), -ENOENT);
	for (uint64_t fh = 4096; fh < 4196; fh++) {
		size_t l = row_of(fh, row, sizeof(row));
		CHECK_EQ(cfs_fhtab_put(t, fh, row, l), 0);
	}
	CHECK_EQ(cfs_fhtab_count(t), 100);
	CHECK(has_row(t, 4096) && has_row(t, 4150) && has_row(t, 4195));
	CHECK_EQ(cfs_fhtab_get(t, 4096, got, 10, &gl), -ERANGE);
	CHECK_EQ(cfs_fhtab_del(t, 4150), 0);
	CHECK_EQ(cfs_fhtab_del(t, 4150), -ENOENT);
	CHECK(!has_row(t, 4150));
	CHECK_EQ(cfs_fhtab_put(t, 0, row, 1), -EINVAL);
	char big[CFS_FHTAB_ROW_MAX + 1];
	memset(big, 'x', sizeof(big));
	CHECK_EQ(cfs_fhtab_put(t, 9, big, sizeof(big)), -E2BIG);
	CHECK_EQ(cfs_fhtab_put(t, 9, big, sizeof(big) - 1), 0); /* the longest row fits */
	CHECK_EQ(cfs_fhtab_get(t, 9, got, sizeof(got), &gl), 0);
	CHECK_EQ(gl, sizeof(big) - 1);
	CHECK_EQ(cfs_fhtab_del(t, 9), 0);
	cfs_fhtab_detach(t);

	/* a restarted server (another attach of the same region) keeps them */
	CHECK_EQ(cfs_fhtab_attach(m, len, &t, &dropped), 0);
	CHECK_EQ(dropped, 0);
	CHECK_EQ(cfs_fhtab_count(t), 99);
	CHECK(has_row(t, 4096) && has_row(t, 4195) && !has_row(t, 4150));
	cfs_fhtab_detach(t);

	/* a half-written slot (state 1 in the word at the slot's start, see
	 * fhtab.h) is from a process that died before it replied: dropped */
	uint64_t *word = (uint64_t *)((char *)m + CFS_FHTAB_HEADER + 700 * CFS_FHTAB_SLOT_SIZE);
	*word = (5ull << 32) | 1;
	CHECK_EQ(cfs_fhtab_attach(m, len, &t, &dropped), 0);
	CHECK_EQ(dropped, 1);
	CHECK_EQ(cfs_fhtab_count(t), 99);
	/* and its slot is usable again */
	for (uint64_t fh = 700; fh < 700 + SLOTS; fh += SLOTS) {
		size_t l = row_of(fh, row, sizeof(row));
		CHECK_EQ(cfs_fhtab_put(t, fh, row, l), 0);
		CHECK(has_row(t, fh));
		CHECK_EQ(cfs_fhtab_del(t, fh), 0);
	}
	cfs_fhtab_detach(t);

	/* a region sized for other geometry is refused, not misread */
	CHECK_EQ(cfs_fhtab_attach(m, cfs_fhtab_size(SLOTS / 2), &t, NULL), -EINVAL);
	munmap(m, len);

	/* a fresh mount: a new region, no rows of the last one */
	m = region(len);
	CHECK_EQ(cfs_fhtab_attach(m, len, &t, NULL), 0);
	CHECK_EQ(cfs_fhtab_count(t), 0);
	CHECK(!has_row(t, 4096));
	cfs_fhtab_detach(t);
	munmap(m, len);
}

/* Rows go to the CFS_FHTAB_PROBE slots from fh mod slots: handles that all
 * map to one slot fill that neighbourhood, then are refused; a delete makes
 * room again. */
static void test_full(void)
{
	size_t len = cfs_fhtab_size(SLOTS);
	void *m = region(len);
	struct cfs_fhtab *t;
	CHECK_EQ(cfs_fhtab_attach(m, len, &t, NULL), 0);
	char row[200];
	for (uint64_t k = 1; k <= CFS_FHTAB_PROBE; k++) {
		size_t l = row_of(k * SLOTS + 3, row, sizeof(row));
		CHECK_EQ(cfs_fhtab_put(t, k * SLOTS + 3, row, l), 0);
	}
	uint64_t next = (CFS_FHTAB_PROBE + 1) * SLOTS + 3;
	size_t l = row_of(next, row, sizeof(row));
	CHECK_EQ(cfs_fhtab_put(t, next, row, l), -ENOSPC);
	CHECK_EQ(cfs_fhtab_del(t, 5 * SLOTS + 3), 0);
	CHECK_EQ(cfs_fhtab_put(t, next, row, l), 0);
	CHECK(has_row(t, next) && has_row(t, SLOTS + 3) && !has_row(t, 5 * SLOTS + 3));
	/* a handle whose home is inside that run finds its own way */
	l = row_of(SLOTS + 10, row, sizeof(row));
	CHECK_EQ(cfs_fhtab_put(t, SLOTS + 10, row, l), 0);
	CHECK(has_row(t, SLOTS + 10));
	CHECK_EQ(cfs_fhtab_count(t), CFS_FHTAB_PROBE + 1);
	cfs_fhtab_detach(t);
	munmap(m, len);
}

/* A server process killed with SIGKILL while holding rows: the next one
 * reads them all, byte for byte. */
static void test_killed_process(void)
{
	size_t len = cfs_fhtab_size(SLOTS);
	void *m = region(len);
	int p[2];
	CHECK_EQ(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct cfs_fhtab *t;
		char row[200];
		if (cfs_fhtab_attach(m, len, &t, NULL))
			_exit(2);
		for (uint64_t fh = 8192; fh < 8192 + 300; fh++) {
			size_t l = row_of(fh, row, sizeof(row));
			if (cfs_fhtab_put(t, fh, row, l))
				_exit(3);
		}
		for (uint64_t fh = 8192; fh < 8192 + 300; fh += 3)
			if (cfs_fhtab_del(t, fh))
				_exit(4);
		if (write(p[1], "k", 1) != 1)
			_exit(5);
		for (;;)
			pause();
	}
	char c = 0;
	close(p[1]);
	CHECK_EQ(read(p[0], &c, 1), 1); /* the child holds its rows now */
	close(p[0]);
	kill(pid, SIGKILL);
	int st = 0;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	struct cfs_fhtab *t;
	CHECK_EQ(cfs_fhtab_attach(m, len, &t, NULL), 0);
	CHECK_EQ(cfs_fhtab_count(t), 200);
	int ok = 1;
	for (uint64_t fh = 8192; fh < 8192 + 300; fh++)
		ok &= has_row(t, fh) == ((fh - 8192) % 3 != 0);
	CHECK(ok);
	cfs_fhtab_detach(t);
	munmap(m, len);
}

struct worker {
	struct cfs_fhtab *t;
	uint64_t base;
	int bad;
};

static void *churn(void *arg)
{
	struct worker *w = arg;
	char row[200];
	for (int round = 0; round < 200; round++) {
		for (uint64_t i = 0; i < 20; i++) {
			uint64_t fh = w->base + (uint64_t)round * 20 + i;
			size_t l = row_of(fh, row, sizeof(row));
			w->bad += cfs_fhtab_put(w->t, fh, row, l) != 0;
		}
		for (uint64_t i = 0; i < 20; i++) {
			uint64_t fh = w->base + (uint64_t)round * 20 + i;
			w->bad += !has_row(w->t, fh);
			w->bad += cfs_fhtab_del(w->t, fh) != 0;
			w->bad += has_row(w->t, fh);
		}
	}
	return NULL;
}

static void test_threads(void)
{
	size_t len = cfs_fhtab_size(SLOTS);
	void *m = region(len);
	struct cfs_fhtab *t;
	CHECK_EQ(cfs_fhtab_attach(m, len, &t, NULL), 0);
	struct worker w[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ t, 1 + (uint64_t)i * 1000000, 0 };
		CHECK_EQ(pthread_create(&th[i], NULL, churn, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(w[i].bad, 0);
	}
	CHECK_EQ(cfs_fhtab_count(t), 0);
	cfs_fhtab_detach(t);
	munmap(m, len);
}

static void bench(void)
{
	size_t len = cfs_fhtab_size(CFS_FHTAB_SLOTS);
	void *m = region(len);
	struct cfs_fhtab *t;
	CHECK_EQ(cfs_fhtab_attach(m, len, &t, NULL), 0);
	char row[200];
	size_t l = row_of(123456, row, sizeof(row));
	int iters = 200000, bad = 0;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < iters; i++) {
		bad += cfs_fhtab_put(t, 4096 + (uint64_t)i, row, l) != 0;
		bad += cfs_fhtab_del(t, 4096 + (uint64_t)i) != 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	CHECK_EQ(bad, 0);
	double us = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e3 / iters;
	printf("handle row cost (shared table): %.3f us per open+release (put + del)\n", us);
	cfs_fhtab_detach(t);
	munmap(m, len);
}

int main(void)
{
	test_basic();
	test_full();
	test_killed_process();
	test_threads();
	bench();
	return check_done("test_fhtab");
}
