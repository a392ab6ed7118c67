/* Unit tests: the request log of forward mode (fuse/reqlog.c).  A "kernel"
 * writes requests into claimed slots the way read(2) does; a server is
 * killed with SIGKILL holding some, half way through reading another, and
 * the next one gets exactly the recorded requests back, in the kernel's
 * order; the supervisor's view (pending, drop) and the corner cases (no
 * reply, too long, log full).  Long requests (a WRITE of CFS_MAX_WRITE
 * bytes) read into a slot and a big slot come back whole, also from a
 * killed process; with no big slot free, or past CFS_REQLOG_WHOLE, they are
 * partial; big slots are given back with their slot and by recover. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/fuse.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "reqlog.h"
#include "shm_util.h"

static struct cfs_reqlog *new_log(void)
{
	struct cfs_reqlog *l = test_shared_map(sizeof(*l));
	cfs_reqlog_prefault(l);
	return l;
}

/* What read(2) leaves in slot i: a request of len bytes (body: the unique's
 * low byte repeated).  Returns len. */
static uint8_t big_byte(uint64_t unique, size_t off)
{
	return (uint8_t)(off * 7 + unique);
}

/* The big slot slot i names, or -1. */
static int big_of(const struct cfs_reqlog *l, int i)
{
	return (int)(l->slot[i].flags >> CFS_REQLOG_BIG_SHIFT) - 1;
}

static long kernel_reads(struct cfs_reqlog *l, int i, uint32_t opcode, uint64_t unique,
			 uint32_t len)
{
	uint8_t *d = l->slot[i].data;
	size_t in_slot = len < CFS_REQLOG_DATA ? len : CFS_REQLOG_DATA;
	memset(d, (int)(unique & 0xff), in_slot);
	struct fuse_in_header h = { .len = len, .opcode = opcode, .unique = unique, .nodeid = 7 };
	memcpy(d, &h, sizeof(h));
	/* the part past the slot: into its big slot (the rest, if any, went to
	 * the server's own buffer) */
	int b = big_of(l, i);
	for (size_t off = CFS_REQLOG_DATA; b >= 0 && off < len && off < CFS_REQLOG_WHOLE; off++)
		l->big[b].data[off - CFS_REQLOG_DATA] = big_byte(unique, off);
	return len;
}

/* 1 when buf is the request kernel_reads left for unique, len bytes. */
static int whole(const uint8_t *buf, uint64_t unique, size_t len)
{
	const struct fuse_in_header *h = (const void *)buf;
	if (h->unique != unique || h->len != len)
		return 0;
	for (size_t off = sizeof(*h); off < len; off++)
		if (buf[off] != (off < CFS_REQLOG_DATA ? (uint8_t)unique : big_byte(unique, off)))
			return 0;
	return 1;
}

static int free_bigs(const struct cfs_reqlog *l)
{
	int n = 0;
	for (int b = 0; b < CFS_REQLOG_BIGS; b++)
		n += l->big[b].owner == 0;
	return n;
}

static int has(const struct cfs_reqlog_info *v, size_t n, uint64_t unique)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].unique == unique)
			return 1;
	return 0;
}

static void test_cycle(void)
{
	struct cfs_reqlog *l = new_log();
	struct cfs_reqlog_info p[16];
	int a = cfs_reqlog_claim(l, 5);
	CHECK_EQ(a, 5);
	CHECK_EQ(cfs_reqlog_claim(l, 5), 6); /* taken: the next one */
	cfs_reqlog_filled(l, 6, -1);         /* a failed read frees it */
	CHECK_EQ(cfs_reqlog_pending(l, p, 16), 0); /* reading, nothing read yet */
	cfs_reqlog_filled(l, a, kernel_reads(l, a, FUSE_OPEN, 100, 64));
	CHECK_EQ(cfs_reqlog_pending(l, p, 16), 1);
	CHECK_EQ(p[0].unique, 100);
	CHECK_EQ(p[0].opcode, FUSE_OPEN);
	int b = cfs_reqlog_claim(l, 5);
	CHECK_EQ(b, 6);
	cfs_reqlog_filled(l, b, kernel_reads(l, b, FUSE_FORGET, 102, 48)); /* no reply: freed */
	CHECK_EQ(cfs_reqlog_pending(l, p, 16), 1);
	CHECK_EQ(cfs_reqlog_claim(l, 6), 6);
	cfs_reqlog_filled(l, 6, kernel_reads(l, 6, FUSE_INTERRUPT, 104, 48));
	CHECK_EQ(cfs_reqlog_done(l, 999, -1), -ENOENT);
	CHECK_EQ(cfs_reqlog_done(l, 100, 77), 0); /* a wrong hint: found by scanning */
	CHECK_EQ(cfs_reqlog_done(l, 100, a), -ENOENT);
	CHECK_EQ(cfs_reqlog_pending(l, p, 16), 0);
	/* the log full */
	int n = 0;
	while (cfs_reqlog_claim(l, 0) >= 0)
		n++;
	CHECK_EQ(n, CFS_REQLOG_SLOTS);
	CHECK_EQ(cfs_reqlog_claim(l, 3), -ENOSPC);
	munmap(l, sizeof(*l));
}

static void test_recover(void)
{
	struct cfs_reqlog *l = new_log();
	struct cfs_reqlog_info p[16];
	/* held out of order, one read but not yet marked, one still waiting */
	int s1 = cfs_reqlog_claim(l, 0), s2 = cfs_reqlog_claim(l, 0), s3 = cfs_reqlog_claim(l, 0);
	int s4 = cfs_reqlog_claim(l, 0), s5 = cfs_reqlog_claim(l, 0);
	cfs_reqlog_filled(l, s1, kernel_reads(l, s1, FUSE_READ, 30, 80));
	cfs_reqlog_filled(l, s2, kernel_reads(l, s2, FUSE_LOOKUP, 10, 300));
	kernel_reads(l, s3, FUSE_GETATTR, 20, 56);      /* died before filled() */
	kernel_reads(l, s5, FUSE_FORGET, 40, 48);       /* no reply: nothing to serve */
	(void)s4;                                       /* blocked in read: nothing */
	size_t np = cfs_reqlog_pending(l, p, 16);
	CHECK_EQ(np, 3);
	CHECK(has(p, np, 10) && has(p, np, 20) && has(p, np, 30));
	int *order = NULL;
	size_t n = 0;
	CHECK_EQ(cfs_reqlog_recover(l, &order, &n), 0);
	CHECK_EQ(n, 3);
	uint8_t buf[1024];
	uint64_t want[] = { 10, 20, 30 };
	uint32_t lens[] = { 300, 56, 80 };
	for (size_t k = 0; k < n && k < 3; k++) {
		long got = cfs_reqlog_take(l, order[k], buf, sizeof(buf));
		CHECK_EQ(got, lens[k]);
		const struct fuse_in_header *h = (const void *)buf;
		CHECK_EQ(h->unique, want[k]);
		CHECK_EQ(buf[got - 1], want[k] & 0xff);
		CHECK_EQ(cfs_reqlog_take(l, order[k], buf, sizeof(buf)), -ENOENT); /* once */
	}
	/* answered: 10; being served when this server dies too: 20, 30 */
	CHECK_EQ(cfs_reqlog_done(l, 10, order[0]), 0);
	free(order);
	CHECK_EQ(cfs_reqlog_recover(l, &order, &n), 0);
	CHECK_EQ(n, 2);
	CHECK_EQ(cfs_reqlog_take(l, order[0], buf, sizeof(buf)), 56);
	CHECK_EQ(((const struct fuse_in_header *)buf)->unique, 20);
	CHECK_EQ(cfs_reqlog_done(l, 20, order[0]), 0);
	/* the supervisor answered 30 itself (crash-loop guard) */
	CHECK_EQ(cfs_reqlog_drop(l, 30), 0);
	CHECK_EQ(cfs_reqlog_drop(l, 30), -ENOENT);
	CHECK_EQ(cfs_reqlog_take(l, order[1], buf, sizeof(buf)), -ENOENT);
	free(order);
	CHECK_EQ(cfs_reqlog_pending(l, p, 16), 0);
	CHECK_EQ(cfs_reqlog_recover(l, &order, &n), 0);
	CHECK_EQ(n, 0);
	free(order);
	/* every slot is free again */
	int c = 0;
	while (cfs_reqlog_claim(l, 0) >= 0)
		c++;
	CHECK_EQ(c, CFS_REQLOG_SLOTS);
	munmap(l, sizeof(*l));
}

/* A request longer than a slot keeps its header only and comes back as
 * -E2BIG (the server answers it EIO). */
static void test_partial(void)
{
	struct cfs_reqlog *l = new_log();
	int i = cfs_reqlog_claim(l, 0);
	cfs_reqlog_filled(l, i, kernel_reads(l, i, FUSE_SETXATTR, 50, CFS_REQLOG_DATA + 100));
	int *order;
	size_t n;
	CHECK_EQ(cfs_reqlog_recover(l, &order, &n), 0);
	CHECK_EQ(n, 1);
	uint8_t buf[2048];
	CHECK_EQ(cfs_reqlog_take(l, order[0], buf, sizeof(buf)), -E2BIG);
	CHECK_EQ(((const struct fuse_in_header *)buf)->unique, 50);
	CHECK_EQ(cfs_reqlog_done(l, 50, order[0]), 0);
	free(order);
	/* killed before filled(), the header tells the length */
	i = cfs_reqlog_claim(l, 0);
	kernel_reads(l, i, FUSE_SETXATTR, 52, CFS_REQLOG_DATA + 1);
	CHECK_EQ(cfs_reqlog_recover(l, &order, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(cfs_reqlog_take(l, order[0], buf, sizeof(buf)), -E2BIG);
	free(order);
	munmap(l, sizeof(*l));
}

#define WRITE_LEN ((uint32_t)(sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in) + \
			     CFS_MAX_WRITE))

/* A WRITE of CFS_MAX_WRITE bytes: recorded whole through a big slot, taken
 * back reassembled, its big slot freed with it; short requests give their
 * big slot back at once. */
static void test_big(void)
{
	struct cfs_reqlog *l = new_log();
	static uint8_t buf[2 * CFS_REQLOG_BIG_SLOT];
	CHECK_EQ(free_bigs(l), CFS_REQLOG_BIGS);
	int i = cfs_reqlog_claim(l, 0);
	int b = cfs_reqlog_claim_big(l, i, 3);
	CHECK_EQ(b, 3);
	CHECK_EQ(big_of(l, i), 3);
	CHECK_EQ(free_bigs(l), CFS_REQLOG_BIGS - 1);
	cfs_reqlog_filled(l, i, kernel_reads(l, i, FUSE_WRITE, 70, WRITE_LEN));
	/* a short one: its big slot is back as soon as it is read */
	int j = cfs_reqlog_claim(l, 0);
	CHECK_EQ(cfs_reqlog_claim_big(l, j, 3), 4);
	cfs_reqlog_filled(l, j, kernel_reads(l, j, FUSE_GETATTR, 72, 56));
	CHECK_EQ(big_of(l, j), -1);
	CHECK_EQ(free_bigs(l), CFS_REQLOG_BIGS - 1);
	/* one killed before filled(): the header says it is long, its big slot
	 * has the rest */
	int k = cfs_reqlog_claim(l, 0);
	CHECK(cfs_reqlog_claim_big(l, k, 0) >= 0);
	kernel_reads(l, k, FUSE_SETXATTR, 74, CFS_REQLOG_DATA + 65536);
	CHECK_EQ(cfs_reqlog_opcode(l, 70, -1), FUSE_WRITE);
	CHECK_EQ(cfs_reqlog_opcode(l, 72, j), FUSE_GETATTR);
	CHECK_EQ(cfs_reqlog_opcode(l, 74, -1), -ENOENT); /* not held yet */
	int *order;
	size_t n;
	CHECK_EQ(cfs_reqlog_recover(l, &order, &n), 0);
	CHECK_EQ(n, 3);
	CHECK_EQ(free_bigs(l), CFS_REQLOG_BIGS - 2);
	CHECK_EQ(cfs_reqlog_take(l, order[0], buf, sizeof(buf)), WRITE_LEN);
	CHECK(whole(buf, 70, WRITE_LEN));
	CHECK_EQ(cfs_reqlog_take(l, order[1], buf, sizeof(buf)), 56);
	CHECK_EQ(cfs_reqlog_take(l, order[2], buf, sizeof(buf)), CFS_REQLOG_DATA + 65536);
	CHECK(whole(buf, 74, CFS_REQLOG_DATA + 65536));
	CHECK_EQ(cfs_reqlog_done(l, 74, order[2]), 0);
	CHECK_EQ(free_bigs(l), CFS_REQLOG_BIGS - 1);
	CHECK_EQ(cfs_reqlog_done(l, 72, order[1]), 0);
	free(order);
	/* the server replaying 70 dies too: the next one gets it whole again */
	CHECK_EQ(cfs_reqlog_recover(l, &order, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(free_bigs(l), CFS_REQLOG_BIGS - 1);
	/* into a buffer too small for it: partial, the header only */
	CHECK_EQ(cfs_reqlog_take(l, order[0], buf, 4096), -E2BIG);
	CHECK_EQ(((const struct fuse_in_header *)buf)->unique, 70);
	free(order);
	CHECK_EQ(cfs_reqlog_recover(l, &order, &n), 0);
	CHECK_EQ(cfs_reqlog_take(l, order[0], buf, sizeof(buf)), WRITE_LEN);
	CHECK(whole(buf, 70, WRITE_LEN));
	CHECK_EQ(cfs_reqlog_done(l, 70, -1), 0);
	CHECK_EQ(free_bigs(l), CFS_REQLOG_BIGS);
	free(order);
	munmap(l, sizeof(*l));
}

/* No big slot free: a long request is recorded partial (EIO on replay);
 * one longer than CFS_REQLOG_WHOLE is partial even with a big slot, which
 * it gives back; a big slot claimed by a thread that died before naming it
 * is freed by recover. */
static void test_big_fallback(void)
{
	struct cfs_reqlog *l = new_log();
	static uint8_t buf[2 * CFS_REQLOG_BIG_SLOT];
	int s[CFS_REQLOG_BIGS];
	for (int k = 0; k < CFS_REQLOG_BIGS; k++) {
		s[k] = cfs_reqlog_claim(l, 0);
		CHECK_EQ(cfs_reqlog_claim_big(l, s[k], (unsigned)k), k);
	}
	int i = cfs_reqlog_claim(l, 0);
	CHECK_EQ(cfs_reqlog_claim_big(l, i, 0), -ENOSPC);
	cfs_reqlog_filled(l, i, kernel_reads(l, i, FUSE_WRITE, 80, WRITE_LEN));
	CHECK(l->slot[i].flags & CFS_REQLOG_PARTIAL);
	/* too long for slot and big slot together */
	cfs_reqlog_filled(l, s[0], kernel_reads(l, s[0], FUSE_WRITE, 82, CFS_REQLOG_WHOLE + 1));
	CHECK(l->slot[s[0]].flags & CFS_REQLOG_PARTIAL);
	CHECK_EQ(free_bigs(l), 1);
	/* exactly as long as both: whole */
	cfs_reqlog_filled(l, s[1], kernel_reads(l, s[1], FUSE_WRITE, 84, CFS_REQLOG_WHOLE));
	/* the other threads still wait in read; one has claimed a big slot and
	 * died before naming it */
	int d = cfs_reqlog_claim(l, 0);
	l->big[0].owner = (uint64_t)d + 1;
	CHECK_EQ(free_bigs(l), 0);
	int *order;
	size_t n;
	CHECK_EQ(cfs_reqlog_recover(l, &order, &n), 0);
	CHECK_EQ(n, 3);
	CHECK_EQ(free_bigs(l), CFS_REQLOG_BIGS - 1); /* only 84's is kept */
	CHECK_EQ(cfs_reqlog_take(l, order[0], buf, sizeof(buf)), -E2BIG);
	CHECK_EQ(((const struct fuse_in_header *)buf)->unique, 80);
	CHECK_EQ(cfs_reqlog_take(l, order[1], buf, sizeof(buf)), -E2BIG);
	CHECK_EQ(((const struct fuse_in_header *)buf)->unique, 82);
	CHECK_EQ(cfs_reqlog_take(l, order[2], buf, sizeof(buf)), CFS_REQLOG_WHOLE);
	CHECK(whole(buf, 84, CFS_REQLOG_WHOLE));
	/* the supervisor drops one: its big slot goes with it */
	free(order);
	CHECK_EQ(cfs_reqlog_drop(l, 84), 0);
	CHECK_EQ(free_bigs(l), CFS_REQLOG_BIGS);
	munmap(l, sizeof(*l));
}

/* The same with a real process killed by SIGKILL while it holds requests. */
static void test_killed_server(void)
{
	struct cfs_reqlog *l = new_log();
	int p[2];
	CHECK_EQ(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		for (uint64_t u = 2; u <= 200; u += 2) {
			int i = cfs_reqlog_claim(l, (unsigned)u);
			if (i < 0 || cfs_reqlog_claim_big(l, i, (unsigned)u) < 0)
				_exit(2);
			/* every tenth a WRITE */
			cfs_reqlog_filled(l, i, kernel_reads(l, i, u % 20 == 2 ? FUSE_WRITE : FUSE_READ,
							     u, u % 20 == 2 ? WRITE_LEN : 80));
			if (u % 4 == 0 && cfs_reqlog_done(l, u, i))
				_exit(3);
		}
		test_child_ready(p);
	}
	CHECK_EQ(test_kill_when_ready(pid, p), 0);
	int *order;
	size_t n;
	CHECK_EQ(cfs_reqlog_recover(l, &order, &n), 0);
	CHECK_EQ(n, 50); /* 2, 6, 10, ... 198: the unanswered half */
	static uint8_t buf[2 * CFS_REQLOG_BIG_SLOT];
	int ok = 1;
	for (size_t k = 0; k < n; k++) {
		uint64_t u = 2 + 4 * k;
		uint32_t len = u % 20 == 2 ? WRITE_LEN : 80;
		ok &= cfs_reqlog_take(l, order[k], buf, sizeof(buf)) == len;
		ok &= whole(buf, u, len);
	}
	CHECK(ok);
	CHECK_EQ(free_bigs(l), CFS_REQLOG_BIGS - 10); /* the writes' */
	free(order);
	munmap(l, sizeof(*l));
}

int main(void)
{
	test_cycle();
	test_recover();
	test_partial();
	test_big();
	test_big_fallback();
	test_killed_server();
	return check_done("test_reqlog");
}
