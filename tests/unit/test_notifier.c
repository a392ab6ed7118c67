/* Unit tests: notifier (fuse/notifier.c).  A SOCK_SEQPACKET socket stands in
 * for /dev/fuse (one message a write, as the device takes them).  Notices
 * sent through the pipe reach the "device" whole and in order, each in one
 * write; one too long for an atomic pipe write, or a bad header, is refused
 * (the caller writes it itself); the child holds nothing of the caller's but
 * the pipe and the device, and exits once the pipe's write end is closed. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/fuse.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "notifier.h"

/* A notice of n bytes in all: header plus a payload of byte pattern k. */
static long send_notice(int fd, uint32_t n, int k)
{
	static char payload[2 * PIPE_BUF];
	struct fuse_out_header oh = { .len = n, .error = FUSE_NOTIFY_INVAL_ENTRY, .unique = 0 };
	memset(payload, k, sizeof(payload));
	struct iovec iov[2] = { { &oh, sizeof(oh) }, { payload, n - sizeof(oh) } };
	return cfs_notifier_send(fd, iov, 2);
}

/* The next message on the device end: its length, payload byte in *k. */
static ssize_t next_msg(int fd, int *k)
{
	static char buf[2 * PIPE_BUF];
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	if (n >= (ssize_t)sizeof(struct fuse_out_header)) {
		const struct fuse_out_header *oh = (const void *)buf;
		*k = n > (ssize_t)sizeof(*oh) ? buf[sizeof(*oh)] : -1;
		for (ssize_t i = sizeof(*oh); i < n; i++)
			if (buf[i] != *k)
				return -2;
		if (oh->len != (uint32_t)n)
			return -3;
	}
	return n;
}

int main(void)
{
	int sv[2];
	CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	struct timeval tv = { .tv_sec = 5 }; /* a failing test fails, it does not hang */
	setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	int probe[2]; /* an unrelated descriptor of ours: the child must not hold it */
	CHECK_EQ(pipe(probe), 0);
	int fd = cfs_notifier_start(sv[0]);
	CHECK(fd >= 0);

	/* many at once, of sizes up to an atomic pipe write: whole, in order */
	uint32_t sizes[] = { 16, 48, 300, PIPE_BUF, 17, PIPE_BUF - 1, 40 };
	size_t nsizes = sizeof(sizes) / sizeof(sizes[0]);
	int k;
	for (int round = 0; round < 20; round++) { /* a round fits the socket's buffer */
		for (size_t i = 0; i < nsizes; i++)
			CHECK_EQ(send_notice(fd, sizes[i], (int)(round * nsizes + i) % 120 + 1),
				 sizes[i]);
		for (size_t i = 0; i < nsizes; i++) {
			CHECK_EQ(next_msg(sv[1], &k), sizes[i]);
			if (sizes[i] > sizeof(struct fuse_out_header))
				CHECK_EQ(k, (int)(round * nsizes + i) % 120 + 1);
		}
	}

	/* refused: longer than PIPE_BUF; a header whose len is not the total */
	CHECK_EQ(send_notice(fd, PIPE_BUF + 1, 7), -EMSGSIZE);
	struct fuse_out_header bad = { .len = 99 };
	struct iovec iov = { &bad, sizeof(bad) };
	CHECK_EQ(cfs_notifier_send(fd, &iov, 1), -EINVAL);

	/* the child holds only the pipe and the device: closing ours of probe
	 * ends it (no copy left in the child) */
	close(probe[1]);
	char c;
	CHECK_EQ(read(probe[0], &c, 1), 0);

	/* the write end closed (each copy of it): the child exits */
	int dup_fd = dup(fd);
	close(fd);
	CHECK_EQ(send_notice(dup_fd, 32, 3), 32); /* still open through the dup */
	CHECK_EQ(next_msg(sv[1], &k), 32);
	close(dup_fd);
	int st = 0;
	pid_t p = wait(&st);
	CHECK(p > 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return check_done("test_notifier");
}
