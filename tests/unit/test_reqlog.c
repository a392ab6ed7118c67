/* Unit tests: the request log of forward mode (fuse/reqlog.c).  A "kernel"
 * writes requests into claimed slots the way read(2) does; a server is
 * killed with SIGKILL holding some, half way through reading another, and
 * the next one gets exactly the recorded requests back, in the kernel's
 * order; the supervisor's view (pending, drop) and the corner cases (no
 * reply, too long, log full). */
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

static struct cfs_reqlog *new_log(void)
{
	void *m = mmap(NULL, sizeof(struct cfs_reqlog), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	cfs_reqlog_prefault(m);
	return m;
}

/* What read(2) leaves in slot i: a request of len bytes (body: the unique's
 * low byte repeated).  Returns len. */
static long kernel_reads(struct cfs_reqlog *l, int i, uint32_t opcode, uint64_t unique,
			 uint32_t len)
{
	uint8_t *d = l->slot[i].data;
	size_t in_slot = len < CFS_REQLOG_DATA ? len : CFS_REQLOG_DATA;
	memset(d, (int)(unique & 0xff), in_slot);
	struct fuse_in_header h = { .len = len, .opcode = opcode, .unique = unique, .nodeid = 7 };
	memcpy(d, &h, sizeof(h));
	return len;
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
			if (i < 0)
				_exit(2);
			cfs_reqlog_filled(l, i, kernel_reads(l, i, FUSE_READ, u, 80));
			if (u % 4 == 0 && cfs_reqlog_done(l, u, i))
				_exit(3);
		}
		if (write(p[1], "k", 1) != 1)
			_exit(4);
		for (;;)
			pause();
	}
	char c;
	close(p[1]);
	CHECK_EQ(read(p[0], &c, 1), 1);
	close(p[0]);
	kill(pid, SIGKILL);
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	int *order;
	size_t n;
	CHECK_EQ(cfs_reqlog_recover(l, &order, &n), 0);
	CHECK_EQ(n, 50); /* 2, 6, 10, ... 198: the unanswered half */
	uint8_t buf[256];
	int ok = 1;
	for (size_t k = 0; k < n; k++) {
		ok &= cfs_reqlog_take(l, order[k], buf, sizeof(buf)) == 80;
		ok &= ((const struct fuse_in_header *)buf)->unique == 2 + 4 * k;
	}
	CHECK(ok);
	free(order);
	munmap(l, sizeof(*l));
}

int main(void)
{
	test_cycle();
	test_recover();
	test_partial();
	test_killed_server();
	return check_done("test_reqlog");
}
