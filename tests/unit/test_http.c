/* Unit tests: http's connections.  A keep-alive HTTP/1.1 server on a
 * loopback socket (a thread per connection, counting the connections it
 * accepted) answers GET /N with a body made from N.  Checked: requests from
 * many threads at once get their own bytes and reuse connections (far fewer
 * connections than requests, and cfs_http_connects counts exactly those the
 * server saw); a connection one handle keeps is not taken by another (a
 * multi set opens its own), since libcurl's shared connection cache is not
 * safe for concurrent threads; a connection the server closes is replaced. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "check.h"
#include "http.h"
#include "loopback.h"

#define THREADS 32
#define PER_THREAD 40
#define CONNS_MAX 256

/* --- a keep-alive server ----------------------------------------------------- */

struct srv {
	int lfd, port;
	volatile int stop;
	int close_every;        /* > 0: "Connection: close" on every close_every-th reply */
	unsigned accepts, replies; /* accepts: at most CONNS_MAX are served */
	pthread_t th;
};

struct conn {
	struct srv *s;
	int fd;
};

static void body_of(unsigned long n, char *out, size_t *len)
{
	/* a few hundred bytes to a few KiB, different for every n */
	size_t k = 100 + (n * 37) % 3000;
	for (size_t i = 0; i < k; i++)
		out[i] = (char)('a' + (n + i * 7) % 26);
	*len = k;
}

/* Serves requests on one connection until the peer closes it. */
static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct srv *s = c->s;
	char req[4096], body[4096];
	size_t got = 0;
	for (;;) {
		char *end = got ? memmem(req, got, "\r\n\r\n", 4) : NULL;
		if (!end) {
			if (got == sizeof(req) - 1)
				break;
			struct pollfd p = { .fd = c->fd, .events = POLLIN };
			ssize_t r = poll(&p, 1, 5000) == 1
					    ? recv(c->fd, req + got, sizeof(req) - 1 - got, 0)
					    : -1;
			if (r <= 0)
				break;
			got += (size_t)r;
			req[got] = '\0';
			continue;
		}
		size_t used = (size_t)(end + 4 - req);
		unsigned long n = 0;
		sscanf(req, "GET /%lu", &n);
		size_t len;
		body_of(n, body, &len);
		unsigned k = __atomic_add_fetch(&s->replies, 1, __ATOMIC_RELAXED);
		int last = s->close_every > 0 && k % (unsigned)s->close_every == 0;
		char reply[4300]; /* one send: no wait for a delayed ACK between two */
		int hl = snprintf(reply, sizeof(reply), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n%s\r\n",
				  len, last ? "Connection: close\r\n" : "");
		memcpy(reply + hl, body, len);
		if (send(c->fd, reply, (size_t)hl + len, MSG_NOSIGNAL) != (ssize_t)((size_t)hl + len) ||
		    last)
			break;
		memmove(req, req + used, got - used);
		got -= used;
		req[got] = '\0';
	}
	close(c->fd);
	free(c);
	return NULL;
}

static void *srv_main(void *arg)
{
	struct srv *s = arg;
	while (!s->stop) {
		int fd = test_loopback_accept(s->lfd, 20);
		if (fd < 0)
			continue;
		unsigned n = __atomic_add_fetch(&s->accepts, 1, __ATOMIC_RELAXED);
		struct conn *c = n <= CONNS_MAX ? malloc(sizeof(*c)) : NULL;
		pthread_t t;
		if (!c) {
			free(c);
			close(fd);
			continue;
		}
		c->s = s;
		c->fd = fd;
		if (pthread_create(&t, NULL, conn_main, c) == 0) {
			pthread_detach(t);
		} else {
			close(fd);
			free(c);
		}
	}
	return NULL;
}

static void srv_start(struct srv *s, int close_every)
{
	memset(s, 0, sizeof(*s));
	s->close_every = close_every;
	s->lfd = test_loopback(128, &s->port);
	pthread_create(&s->th, NULL, srv_main, s);
}

/* The clients are gone (cfs_http_free closed their connections), so every
 * connection thread has ended or ends at its peer's close. */
static void srv_stop(struct srv *s)
{
	s->stop = 1;
	pthread_join(s->th, NULL);
	close(s->lfd);
}

/* --- clients ------------------------------------------------------------------ */

struct client {
	struct cfs_http *h;
	int port;
	long id;
	int bad;   /* replies with wrong status or bytes */
	int failed;
};

/* r asks for GET /n of the server at port, its body into out. */
static void req_setup(struct cfs_http_req *r, char *url, size_t cap, int port, unsigned long n,
		      struct cfs_buf *out)
{
	snprintf(url, cap, "http://127.0.0.1:%d/%lu", port, n);
	cfs_http_req_init(r);
	r->url = url;
	r->out = out;
	r->timeout_ms = 20000;
}

static int get_one(struct cfs_http *h, int port, unsigned long n, int *bad)
{
	char url[64], want[4096];
	struct cfs_buf out = { 0 };
	struct cfs_http_req r;
	req_setup(&r, url, sizeof(url), port, n, &out);
	int rc = cfs_http_perform(h, &r);
	size_t len;
	body_of(n, want, &len);
	if (!rc && (r.status != 200 || out.len != len || memcmp(out.data, want, len) != 0))
		(*bad)++;
	cfs_buf_cleanup(&out);
	cfs_http_req_cleanup(&r);
	return rc;
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	for (int i = 0; i < PER_THREAD; i++)
		if (get_one(c->h, c->port, (unsigned long)(c->id * 1000 + i), &c->bad))
			c->failed++;
	return NULL;
}

/* Many threads at once: each gets its own bytes; connections are reused. */
static void test_concurrent(int close_every)
{
	struct srv s;
	srv_start(&s, close_every);
	struct cfs_http *h;
	struct cfs_http_opts o = { 0 };
	CHECK_EQ(cfs_http_new(&o, &h), 0);
	struct client cl[THREADS];
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++) {
		cl[i] = (struct client){ .h = h, .port = s.port, .id = i };
		CHECK_EQ(pthread_create(&t[i], NULL, client_main, &cl[i]), 0);
	}
	int bad = 0, failed = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		bad += cl[i].bad;
		failed += cl[i].failed;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(failed, 0);
	CHECK_EQ(s.replies, THREADS * PER_THREAD);
	uint64_t opened = cfs_http_connects(h);
	CHECK_EQ(opened, __atomic_load_n(&s.accepts, __ATOMIC_RELAXED));
	if (close_every) /* each close costs the next request a connection */
		CHECK(opened >= (uint64_t)(THREADS * PER_THREAD / close_every));
	else /* kept alive: about one per thread, not one per request */
		CHECK(opened >= 1 && opened <= 2 * THREADS);
	printf("  %d threads x %d requests, close every %d: %llu connections\n", THREADS,
	       PER_THREAD, close_every, (unsigned long long)opened);
	cfs_http_free(h);
	srv_stop(&s);
}

/* A handle's connection is its own: the next request on the same thread
 * reuses it, a multi set does not take it (it opens one of its own, which
 * the next set reuses). */
static void test_handles_keep_their_connections(void)
{
	struct srv s;
	srv_start(&s, 0);
	struct cfs_http *h;
	struct cfs_http_opts o = { 0 };
	CHECK_EQ(cfs_http_new(&o, &h), 0);
	int bad = 0;
	CHECK_EQ(get_one(h, s.port, 1, &bad), 0);
	CHECK_EQ(cfs_http_connects(h), 1);
	CHECK_EQ(get_one(h, s.port, 2, &bad), 0);
	CHECK_EQ(cfs_http_connects(h), 1); /* the pool gave back the same handle */
	for (int round = 0; round < 2; round++) {
		struct cfs_http_multi *m;
		CHECK_EQ(cfs_http_multi_new(h, &m), 0);
		char url[64];
		struct cfs_buf out = { 0 };
		struct cfs_http_req r;
		req_setup(&r, url, sizeof(url), s.port, (unsigned long)(3 + round), &out);
		CHECK_EQ(cfs_http_multi_add(m, &r), 0);
		struct cfs_http_req *done = NULL;
		int rc = -1;
		for (int k = 0; k < 400 && !done; k++)
			done = cfs_http_multi_run(m, 50, &rc);
		CHECK(done == &r);
		CHECK_EQ(rc, 0);
		CHECK_EQ(r.status, 200);
		cfs_buf_cleanup(&out);
		cfs_http_req_cleanup(&r);
		cfs_http_multi_free(m);
		/* round 0: a connection of the set's own; round 1: that one again */
		CHECK_EQ(cfs_http_connects(h), 2);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(cfs_http_connects(h), __atomic_load_n(&s.accepts, __ATOMIC_RELAXED));
	cfs_http_free(h);
	srv_stop(&s);
}

int main(void)
{
	test_handles_keep_their_connections();
	test_concurrent(0);
	test_concurrent(7);
	return check_done("test_http");
}
