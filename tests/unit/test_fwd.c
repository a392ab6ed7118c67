/* Unit tests: the supervisor's forwarded-request table (fuse/fwd.c).  A
 * SOCK_SEQPACKET pair stands in for /dev/fuse (one read, one request). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/fuse.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "fwd.h"

static void kernel_sends(int fd, uint32_t opcode, uint64_t unique, uint64_t nodeid)
{
	struct {
		struct fuse_in_header h;
		char body[24];
	} m = { .h = { .len = sizeof(m), .opcode = opcode, .unique = unique, .nodeid = nodeid } };
	CHECK_EQ(write(fd, &m, sizeof(m)), sizeof(m));
}

/* The unique of the next message on sock, 0 when none is waiting. */
static uint64_t server_gets(int sock)
{
	char buf[256];
	ssize_t n = recv(sock, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < (ssize_t)sizeof(struct fuse_in_header))
		return 0;
	return ((struct fuse_in_header *)buf)->unique;
}

static void server_acks(int sock, uint64_t unique)
{
	CHECK_EQ(send(sock, &unique, sizeof(unique), 0), sizeof(unique));
}

int main(void)
{
	int dev[2], s1[2], s2[2];
	CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, dev), 0);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, s1), 0);
	CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, s2), 0);
	struct cfs_fwd *f = cfs_fwd_new();
	CHECK(f != NULL);

	/* requests are forwarded; those with a reply are kept until acked */
	kernel_sends(dev[0], FUSE_LOOKUP, 2, 1);
	kernel_sends(dev[0], FUSE_READ, 4, 7);
	kernel_sends(dev[0], FUSE_FORGET, 6, 7);    /* no reply: never kept */
	kernel_sends(dev[0], FUSE_INTERRUPT, 8, 0); /* no reply: never kept */
	kernel_sends(dev[0], FUSE_GETATTR, 10, 7);
	for (int i = 0; i < 5; i++)
		CHECK_EQ(cfs_fwd_read(f, dev[1], s1[0]), 1);
	CHECK_EQ(cfs_fwd_count(f), 3);
	uint64_t want[] = { 2, 4, 6, 8, 10 };
	for (int i = 0; i < 5; i++)
		CHECK_EQ(server_gets(s1[1]), want[i]);
	CHECK_EQ(server_gets(s1[1]), 0);
	struct cfs_fwd_info r;
	CHECK(cfs_fwd_pending(f, 1, &r));
	CHECK_EQ(r.unique, 4);
	CHECK_EQ(r.opcode, FUSE_READ);
	CHECK_EQ(r.nodeid, 7);
	CHECK(!cfs_fwd_pending(f, 3, &r));

	/* acks remove; an unknown ack is harmless */
	server_acks(s1[1], 4);
	server_acks(s1[1], 999);
	CHECK_EQ(cfs_fwd_acks(f, s1[0]), 0);
	CHECK_EQ(cfs_fwd_count(f), 2);

	/* with no server, requests are kept for the replay */
	kernel_sends(dev[0], FUSE_OPEN, 12, 7);
	CHECK_EQ(cfs_fwd_read(f, dev[1], -1), 1);
	CHECK_EQ(cfs_fwd_count(f), 3);

	/* the server dies: its end closes, acks report it */
	close(s1[1]);
	CHECK_EQ(cfs_fwd_acks(f, s1[0]), -EPIPE);
	close(s1[0]);

	/* a new server gets every unanswered request, in arrival order */
	CHECK_EQ(cfs_fwd_replay(f, s2[0]), 3);
	CHECK_EQ(server_gets(s2[1]), 2);
	CHECK_EQ(server_gets(s2[1]), 10);
	CHECK_EQ(server_gets(s2[1]), 12);
	CHECK_EQ(server_gets(s2[1]), 0);

	/* the crash-loop guard answers one itself */
	cfs_fwd_answered(f, 10);
	CHECK_EQ(cfs_fwd_count(f), 2);
	CHECK(cfs_fwd_pending(f, 1, &r));
	CHECK_EQ(r.unique, 12);

	/* unmounted: the device read says ENODEV (a closed peer reads 0 here) */
	close(dev[0]);
	CHECK(cfs_fwd_read(f, dev[1], s2[0]) < 0);
	cfs_fwd_free(f);
	close(dev[1]);
	close(s2[0]);
	close(s2[1]);
	return check_done("test_fwd");
}
