/* ctlsock: the mount's control socket (see ctlsock.h). */
#define _GNU_SOURCE
#include "ctlsock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "fdwait.h"
#include "log.h"

#define REQ_MAX 64

struct cfs_ctlsock {
	struct cfs_ctlsock_opts o;
	int fd;       /* listening */
	int stop[2];  /* a byte on stop[1] ends the thread */
	pthread_t thread;
};

/* The request line into req (NUL-terminated, no newline) within the
 * deadline.  0, or -1: nothing to answer. */
static int read_request(int c, char *req)
{
	int64_t deadline = cfs_clock_mono_ms() + CFS_CTLSOCK_IO_MS;
	size_t n = 0;
	while (n < REQ_MAX - 1) {
		if (cfs_fd_wait(c, POLLIN, deadline))
			return -1;
		ssize_t r = recv(c, req + n, REQ_MAX - 1 - n, 0);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return -1;
		n += (size_t)r;
		char *nl = memchr(req, '\n', n);
		if (nl) {
			*nl = '\0';
			return 0;
		}
	}
	return -1;
}

static void send_all(int c, const char *p, size_t n)
{
	int64_t deadline = cfs_clock_mono_ms() + CFS_CTLSOCK_IO_MS;
	while (n) {
		ssize_t w = send(c, p, n, MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
		} else if (w < 0 && (errno == EINTR || errno == EAGAIN)) {
			if (errno == EAGAIN && cfs_fd_wait(c, POLLOUT, deadline))
				return;
		} else {
			return;
		}
	}
}

static void serve_one(struct cfs_ctlsock *s, int c)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	char req[REQ_MAX];
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 ||
	    (cr.uid != 0 && cr.uid != s->o.owner) || read_request(c, req))
		return;
	struct cfs_buf b = { 0 };
	int rc = 0;
	if (strcmp(req, "pid") == 0) {
		char v[24];
		int n = snprintf(v, sizeof(v), "%d", s->o.pid);
		rc = cfs_buf_append(&b, v, (size_t)n);
	} else if (strcmp(req, "stats") == 0 && s->o.stats) {
		rc = s->o.stats(s->o.arg, &b);
	} else {
		rc = -EINVAL;
	}
	if (!rc)
		send_all(c, b.data, b.len);
	cfs_buf_cleanup(&b);
}

static void *run(void *arg)
{
	struct cfs_ctlsock *s = arg;
	for (;;) {
		struct pollfd p[2] = { { .fd = s->fd, .events = POLLIN },
				       { .fd = s->stop[0], .events = POLLIN } };
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		int c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0)
			continue;
		serve_one(s, c);
		close(c);
	}
	return NULL;
}

int cfs_ctlsock_start(const struct cfs_ctlsock_opts *o, struct cfs_ctlsock **out)
{
	*out = NULL;
	struct cfs_ctlsock *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->o = *o;
	s->stop[0] = s->stop[1] = -1;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, CFS_CTLSOCK_FMT, o->major,
			 o->minor);
	int rc = 0;
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->fd < 0 || pipe2(s->stop, O_CLOEXEC) != 0 ||
	    bind(s->fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
							  1 + (size_t)n)) != 0 ||
	    listen(s->fd, 64) != 0)
		rc = -errno;
	else if ((rc = pthread_create(&s->thread, NULL, run, s)) != 0)
		rc = -rc;
	if (rc) {
		if (s->fd >= 0)
			close(s->fd);
		if (s->stop[0] >= 0) {
			close(s->stop[0]);
			close(s->stop[1]);
		}
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void cfs_ctlsock_stop(struct cfs_ctlsock *s)
{
	if (!s)
		return;
	char one = 1;
	while (write(s->stop[1], &one, 1) < 0 && errno == EINTR)
		;
	pthread_join(s->thread, NULL);
	close(s->fd);
	close(s->stop[0]);
	close(s->stop[1]);
	free(s);
}
