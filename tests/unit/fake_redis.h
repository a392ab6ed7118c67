/* fake_redis: a scripted Redis node for the unit tests of the tier's
 * cluster client (no redis-server needed).  It listens on ip (any
 * 127.x.y.z: the whole of 127/8 is the loopback interface, so a "foreign"
 * node on 127.0.0.2 needs no setup) at a port the kernel picks, takes any
 * number of connections (a thread each), parses each command (a RESP array
 * of bulk strings) and hands it to the node's answer function, which writes
 * the reply to the connection's socket itself (so it may stream, trickle or
 * never answer).  It records what a test asserts on: the connections it
 * accepted, every AUTH and its last password, the commands it was sent.
 *
 * fake_node_start(n, ip, answer, arg) / fake_node_stop(n): a failure to
 * listen ends the test (exit 1); stop closes every connection and joins
 * every thread; fake_node_kill(n) is the node's death (refused from then
 * on).  Helpers for answers: fake_send(fd, text), fake_send_slots(fd,
 * ranges...) for a CLUSTER SLOTS reply. */
#ifndef CFS_TEST_FAKE_REDIS_H
#define CFS_TEST_FAKE_REDIS_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loopback.h"

#define FAKE_CONNS 64
#define FAKE_ARGS 200

struct fake_node;
/* Answers one command (argv[i]: len[i] bytes, NUL-terminated) on fd. */
typedef void (*fake_answer_fn)(struct fake_node *n, int fd, int argc, char **argv, size_t *len);

struct fake_conn {
	struct fake_node *n;
	int fd;
	pthread_t th;
	volatile int done; /* its thread has ended: the slot may be reused */
};

struct fake_node {
	char ip[32];
	int lfd, port;
	fake_answer_fn answer;
	void *arg;
	volatile int stop;
	pthread_t acceptor;
	pthread_mutex_t mu;
	struct fake_conn conn[FAKE_CONNS];
	int nconn;
	/* records (under mu) */
	int connections, auths, commands;
	char password[256];
	char last[64]; /* the last command's name */
};

static inline int fake_send(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

static inline int fake_sends(int fd, const char *s)
{
	return fake_send(fd, s, strlen(s));
}

/* One bulk string. */
static inline int fake_send_bulk(int fd, const void *p, size_t n)
{
	char h[32];
	snprintf(h, sizeof(h), "$%zu\r\n", n);
	return fake_sends(fd, h) || fake_send(fd, p, n) || fake_send(fd, "\r\n", 2) ? -1 : 0;
}

/* CLUSTER SLOTS with nr ranges: lo[i]..hi[i] served by host[i]:port[i]. */
static inline int fake_send_slots(int fd, int nr, const int *lo, const int *hi,
				  const char *const *host, const int *port)
{
	char buf[8192];
	size_t o = (size_t)snprintf(buf, sizeof(buf), "*%d\r\n", nr);
	for (int i = 0; i < nr && o < sizeof(buf); i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o,
				      "*3\r\n:%d\r\n:%d\r\n*3\r\n$%zu\r\n%s\r\n:%d\r\n$2\r\nid\r\n",
				      lo[i], hi[i], strlen(host[i]), host[i], port[i]);
	return fake_send(fd, buf, o < sizeof(buf) ? o : sizeof(buf));
}

/* Reads a line ending in \r\n from fd into buf (cap), polling for stop. */
static inline int fake_line(struct fake_node *n, int fd, char *buf, size_t cap)
{
	size_t o = 0;
	while (!n->stop && o + 1 < cap) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 50) != 1)
			continue;
		ssize_t r = recv(fd, buf + o, 1, 0);
		if (r <= 0)
			return -1;
		if (++o >= 2 && buf[o - 2] == '\r' && buf[o - 1] == '\n') {
			buf[o - 2] = '\0';
			return 0;
		}
	}
	return -1;
}

static inline int fake_exact(struct fake_node *n, int fd, char *buf, size_t want)
{
	size_t o = 0;
	while (!n->stop && o < want) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 50) != 1)
			continue;
		ssize_t r = recv(fd, buf + o, want - o, 0);
		if (r <= 0)
			return -1;
		o += (size_t)r;
	}
	return o == want ? 0 : -1;
}

static void *fake_conn_main(void *arg)
{
	struct fake_conn *c = arg;
	struct fake_node *n = c->n;
	char line[64];
	char *argv[FAKE_ARGS];
	size_t len[FAKE_ARGS];
	for (;;) {
		int argc = 0;
		if (fake_line(n, c->fd, line, sizeof(line)) || line[0] != '*')
			break;
		argc = atoi(line + 1);
		if (argc < 1 || argc > FAKE_ARGS)
			break;
		int bad = 0, got = 0;
		for (int i = 0; i < argc && !bad; i++) {
			if (fake_line(n, c->fd, line, sizeof(line)) || line[0] != '$') {
				bad = 1;
				break;
			}
			len[i] = (size_t)atol(line + 1);
			argv[i] = malloc(len[i] + 3);
			got = i + 1;
			if (!argv[i] || fake_exact(n, c->fd, argv[i], len[i] + 2))
				bad = 1;
			else
				argv[i][len[i]] = '\0';
		}
		if (!bad) {
			pthread_mutex_lock(&n->mu);
			n->commands++;
			snprintf(n->last, sizeof(n->last), "%s", argv[0]);
			if (strcasecmp(argv[0], "AUTH") == 0) {
				n->auths++;
				snprintf(n->password, sizeof(n->password), "%s", argv[argc - 1]);
			}
			pthread_mutex_unlock(&n->mu);
			n->answer(n, c->fd, argc, argv, len);
		}
		for (int i = 0; i < got; i++)
			free(argv[i]);
		if (bad)
			break;
	}
	shutdown(c->fd, SHUT_RDWR);
	c->done = 1;
	return NULL;
}

static void *fake_accept_main(void *arg)
{
	struct fake_node *n = arg;
	while (!n->stop) {
		int fd = test_loopback_accept(n->lfd, 50);
		if (fd < 0)
			continue;
		int one = 1; /* replies go out in pieces: no Nagle delay between them */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_mutex_lock(&n->mu);
		n->connections++;
		struct fake_conn *c = NULL;
		for (int i = 0; !c && i < n->nconn; i++)
			if (n->conn[i].done) { /* a connection that ended: its slot */
				pthread_join(n->conn[i].th, NULL);
				close(n->conn[i].fd);
				c = &n->conn[i];
			}
		if (!c && n->nconn < FAKE_CONNS)
			c = &n->conn[n->nconn++];
		pthread_mutex_unlock(&n->mu);
		if (!c) {
			close(fd);
			continue;
		}
		c->done = 0;
		c->n = n;
		c->fd = fd;
		pthread_create(&c->th, NULL, fake_conn_main, c);
	}
	return NULL;
}

static inline void fake_node_start(struct fake_node *n, const char *ip, fake_answer_fn answer,
				   void *arg)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->ip, sizeof(n->ip), "%s", ip);
	n->answer = answer;
	n->arg = arg;
	pthread_mutex_init(&n->mu, NULL);
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	n->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(n->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (n->lfd < 0 || inet_pton(AF_INET, ip, &a.sin_addr) != 1 ||
	    bind(n->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(n->lfd, 64) < 0 ||
	    getsockname(n->lfd, (struct sockaddr *)&a, &alen) < 0) {
		perror("fake redis node");
		exit(1);
	}
	n->port = ntohs(a.sin_port);
	pthread_create(&n->acceptor, NULL, fake_accept_main, n);
}

/* The node dies: it stops listening (a connect to its port is refused from
 * now on) and closes every connection; fake_node_stop cleans up after. */
static inline void fake_node_kill(struct fake_node *n)
{
	if (n->stop)
		return;
	n->stop = 1;
	pthread_join(n->acceptor, NULL);
	close(n->lfd);
	for (int i = 0; i < n->nconn; i++) {
		shutdown(n->conn[i].fd, SHUT_RDWR);
		pthread_join(n->conn[i].th, NULL);
		close(n->conn[i].fd);
	}
}

static inline void fake_node_stop(struct fake_node *n)
{
	fake_node_kill(n);
	pthread_mutex_destroy(&n->mu);
}

static inline int fake_count(struct fake_node *n, const int *field)
{
	pthread_mutex_lock(&n->mu);
	int v = *field;
	pthread_mutex_unlock(&n->mu);
	return v;
}

#endif
