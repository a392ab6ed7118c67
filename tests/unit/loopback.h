/* loopback: a TCP socket on 127.0.0.1 at a port the kernel picks, for the
 * unit tests' fake servers.  backlog >= 0: listening with that backlog;
 * backlog < 0: only bound, so connections to it are refused.  *port gets
 * the port; a failure ends the test (exit 1).  test_loopback_accept: the
 * fake servers' accept loop step. */
#ifndef CFS_TEST_LOOPBACK_H
#define CFS_TEST_LOOPBACK_H

#include <arpa/inet.h>
#include <poll.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

static inline int test_loopback(int backlog, int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    (backlog >= 0 && listen(fd, backlog) < 0) ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		perror("loopback socket");
		exit(1);
	}
	*port = ntohs(a.sin_port);
	return fd;
}

/* The next connection to listening socket lfd (close-on-exec), or -1 when
 * none came within wait_ms. */
static inline int test_loopback_accept(int lfd, int wait_ms)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	if (poll(&p, 1, wait_ms) != 1)
		return -1;
	return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

#endif
