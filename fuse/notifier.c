/* notifier: the process that writes a server's notices (see notifier.h). */
#define _GNU_SOURCE
#include "notifier.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The child: forked from a threaded server, so only async-signal-safe
 * calls.  Pipe on fd 0, device on fd 1, nothing else open. */
static void notifier_main(void)
{
	static char buf[2 * PIPE_BUF];
	size_t have = 0;
	for (;;) {
		ssize_t n = read(0, buf + have, sizeof(buf) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0); /* the server is gone */
		have += (size_t)n;
		size_t at = 0;
		while (have - at >= sizeof(struct fuse_out_header)) {
			struct fuse_out_header oh;
			memcpy(&oh, buf + at, sizeof(oh));
			if (oh.len < sizeof(oh) || oh.len > PIPE_BUF)
				_exit(2); /* never written so: not ours */
			if (have - at < oh.len)
				break;
			/* errors are the kernel's to judge: ENOENT for an entry it
			 * no longer has, ENODEV once the mount is gone */
			while (write(1, buf + at, oh.len) < 0 && errno == EINTR)
				;
			at += oh.len;
		}
		memmove(buf, buf + at, have - at);
		have -= at;
	}
}

int cfs_notifier_start(int fuse_fd)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		return -e;
	}
	if (pid == 0) {
		/* fds 0 and 1 first: the pipe's read end and the device */
		int dev = fcntl(fuse_fd, F_DUPFD_CLOEXEC, 3);
		if (dev < 0 || dup2(p[0], 0) < 0 || dup2(dev, 1) < 0)
			_exit(3);
		syscall(SYS_close_range, 2u, ~0u, 0u);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		prctl(PR_SET_NAME, "colabfs-notify", 0, 0, 0);
		notifier_main();
	}
	close(p[0]);
	return p[1];
}

long cfs_notifier_send(int fd, const struct iovec *iov, int count)
{
	char msg[PIPE_BUF];
	size_t len = 0;
	for (int i = 0; i < count; i++) {
		if (iov[i].iov_len > sizeof(msg) - len)
			return -EMSGSIZE;
		memcpy(msg + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	struct fuse_out_header oh;
	if (len < sizeof(oh))
		return -EINVAL;
	memcpy(&oh, msg, sizeof(oh));
	if (oh.len != len)
		return -EINVAL;
	ssize_t n;
	while ((n = write(fd, msg, len)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return -errno;
	return n == (ssize_t)len ? (long)len : -EIO;
}
