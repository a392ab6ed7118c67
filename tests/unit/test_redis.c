/* Unit tests: redis (src/tier/redis.c), one connection to one Redis node,
 * and crypto's TLS client streams under it.
 *
 * A fake server (a thread on a loopback socket, no Redis needed) checks the
 * encoding of a pipeline and its replies in order, fed in 3-byte pieces;
 * malformed replies and replies past the limits (CFS_E_PROTO, broken);
 * deadlines (a server that never answers, a connect that is never
 * accepted, a TLS handshake with a silent server); a close in the middle of
 * a reply, a closed port (CFS_E_NET); error replies (CFS_RESP_ERROR, a MOVED
 * that cluster.c parses); AUTH refused (CFS_E_AUTH) without the password in
 * any log line.  Reply caps (issue 24): a reply of exactly its cap passes and
 * one byte more fails; a bulk or array header announcing more than the cap
 * fails at once, before its bytes (the server sent only the header); bytes
 * that pile up past the cap fail while the reply is still arriving (the
 * server stalls mid-reply: CFS_E_PROTO, not the deadline); in a pipeline
 * each reply has its own command's cap.  A host whose addresses addr_ok
 * refuses: -EPERM, no connection made.
 *
 * Against a real redis-server when one is in PATH (else that part is
 * skipped, and says so): AUTH right, wrong and missing, a 1 MiB binary value
 * with NULs, a pipeline of 100 INCRs.  And over TLS when the openssl command
 * and redis-server's TLS support are there: a CA and a certificate for
 * 127.0.0.1 made at test time in a temporary folder; the right CA works,
 * another CA or another name (localhost) fails with CFS_E_TLS.  Every
 * redis-server started is killed and reaped, also on failure (atexit). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "cluster.h"
#include "err.h"
#include "log.h"
#include "loopback.h"
#include "redis.h"

/* --- a fake server: one connection, a scripted answer ---------------------- */

struct fake {
	int lfd, port;
	const char *reply;  /* what to answer (NULL: nothing) */
	size_t replylen;
	size_t expect;      /* bytes to receive before answering */
	int close_after;    /* close once answered (else wait for the client to close) */
	int chunk;          /* answer in pieces this big, 2 ms apart (0: at once) */
	char got[8192];
	size_t gotlen;
	pthread_t th;
};

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	int fd = test_loopback_accept(f->lfd, 5000);
	if (fd < 0)
		return NULL;
	int64_t end = cfs_clock_mono_ms() + 5000;
	while (f->gotlen < f->expect && cfs_clock_mono_ms() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) != 1)
			continue;
		ssize_t r = recv(fd, f->got + f->gotlen, sizeof(f->got) - f->gotlen, 0);
		if (r <= 0)
			break;
		f->gotlen += (size_t)r;
	}
	for (size_t off = 0; f->reply && off < f->replylen;) {
		size_t n = f->chunk ? (size_t)f->chunk : f->replylen;
		if (n > f->replylen - off)
			n = f->replylen - off;
		if (send(fd, f->reply + off, n, MSG_NOSIGNAL) != (ssize_t)n)
			break;
		off += n;
		if (f->chunk)
			usleep(2000);
	}
	while (!f->close_after && cfs_clock_mono_ms() < end) {
		char sink[4096];
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) == 1 && recv(fd, sink, sizeof(sink), 0) <= 0)
			break;
	}
	close(fd);
	return NULL;
}

static void fake_start(struct fake *f, const char *reply, size_t replylen, size_t expect,
		       int close_after, int chunk)
{
	memset(f, 0, sizeof(*f));
	f->reply = reply;
	f->replylen = replylen;
	f->expect = expect;
	f->close_after = close_after;
	f->chunk = chunk;
	f->lfd = test_loopback(8, &f->port);
	pthread_create(&f->th, NULL, fake_main, f);
}

static void fake_stop(struct fake *f)
{
	pthread_join(f->th, NULL);
	close(f->lfd);
}

static const char *PING[] = { "PING" };

/* A pipeline of five commands, one binary, answered in 3-byte pieces: the
 * replies come back in order and typed; the bytes sent are RESP. */
static void test_pipeline(void)
{
	static const char want[] = "*1\r\n$4\r\nPING\r\n"
				   "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
				   "*2\r\n$3\r\nGET\r\n$3\r\na\0b\r\n"
				   "*2\r\n$6\r\nLRANGE\r\n$1\r\nl\r\n"
				   "*2\r\n$3\r\nGET\r\n$3\r\nfoo\r\n";
	static const char answer[] = "+PONG\r\n:42\r\n$5\r\nhe\0lo\r\n"
				     "*3\r\n$1\r\na\r\n$-1\r\n:-7\r\n"
				     "-MOVED 3999 127.0.0.1:7001\r\n";
	struct fake f;
	fake_start(&f, answer, sizeof(answer) - 1, sizeof(want) - 1, 0, 3);
	struct cfs_redis *c = NULL;
	CHECK_EQ(cfs_redis_connect("127.0.0.1", f.port, NULL, &c), 0);
	if (!c) {
		fake_stop(&f);
		return;
	}
	const char *set[] = { "SET", "k", "v" }, *get[] = { "GET", "a\0b" };
	const size_t getlen[] = { 3, 3 };
	const char *lrange[] = { "LRANGE", "l" }, *getfoo[] = { "GET", "foo" };
	CHECK_EQ(cfs_redis_append(c, 1, PING, NULL), 0);
	CHECK_EQ(cfs_redis_append(c, 3, set, NULL), 0);
	CHECK_EQ(cfs_redis_append(c, 2, get, getlen), 0);
	CHECK_EQ(cfs_redis_append(c, 2, lrange, NULL), 0);
	CHECK_EQ(cfs_redis_append(c, 2, getfoo, NULL), 0);
	CHECK_EQ(cfs_redis_pending(c), 5);
	struct cfs_redis_reply *r[5] = { 0 };
	for (int i = 0; i < 5; i++)
		CHECK_EQ(cfs_redis_reply(c, &r[i]), 0);
	CHECK_EQ(cfs_redis_pending(c), 0);
	if (r[0] && r[1] && r[2] && r[3] && r[4]) {
		const struct cfs_cluster_reply *t = cfs_redis_tree(r[0]);
		CHECK_EQ(t->type, CFS_RESP_STATUS);
		CHECK(t->len == 4 && memcmp(t->str, "PONG", 4) == 0);
		t = cfs_redis_tree(r[1]);
		CHECK_EQ(t->type, CFS_RESP_INTEGER);
		CHECK_EQ(t->integer, 42);
		t = cfs_redis_tree(r[2]);
		CHECK_EQ(t->type, CFS_RESP_STRING);
		CHECK(t->len == 5 && memcmp(t->str, "he\0lo", 5) == 0 && t->str[5] == 0);
		t = cfs_redis_tree(r[3]);
		CHECK_EQ(t->type, CFS_RESP_ARRAY);
		CHECK_EQ(t->n, 3);
		if (t->n == 3) {
			CHECK(t->el[0]->type == CFS_RESP_STRING && t->el[0]->len == 1 && t->el[0]->str[0] == 'a');
			CHECK_EQ(t->el[1]->type, CFS_RESP_NIL);
			CHECK(t->el[2]->type == CFS_RESP_INTEGER && t->el[2]->integer == -7);
		}
		t = cfs_redis_tree(r[4]);
		CHECK_EQ(t->type, CFS_RESP_ERROR);
		CHECK(t->len == 25 && memcmp(t->str, "MOVED 3999 127.0.0.1:7001", 25) == 0);
		unsigned slot = 0;
		struct cfs_cluster_node to;
		CHECK_EQ(cfs_cluster_redirect(t->str, t->len, &slot, &to), 1);
		CHECK_EQ(slot, 3999);
		CHECK_EQ(to.port, 7001);
	}
	for (int i = 0; i < 5; i++)
		cfs_redis_reply_free(r[i]);
	struct cfs_redis_reply *none = NULL;
	CHECK_EQ(cfs_redis_reply(c, &none), -EINVAL); /* nothing queued */
	CHECK_EQ(cfs_redis_broken(c), 0);
	cfs_redis_close(c);
	fake_stop(&f);
	CHECK_EQ(f.gotlen, sizeof(want) - 1);
	CHECK(f.gotlen == sizeof(want) - 1 && memcmp(f.got, want, f.gotlen) == 0);
}

/* One PING (its reply capped at cap; 0: the default) answered with
 * `answer`: returns the status, the time it took in *ms, and whether the
 * connection is broken after it. */
static int ping_capped(const char *answer, size_t n, int close_after, int io_ms, size_t cap,
		       int64_t *ms, int *broken)
{
	struct fake f;
	fake_start(&f, answer, n, 14, close_after, 0);
	struct cfs_redis_opts o = { .io_ms = io_ms };
	struct cfs_redis *c = NULL;
	int rc = cfs_redis_connect("127.0.0.1", f.port, &o, &c);
	CHECK_EQ(rc, 0);
	if (!rc) {
		struct cfs_redis_reply *r = NULL;
		int64_t t0 = cfs_clock_mono_ms();
		rc = cfs_redis_append_max(c, 1, PING, NULL, cap);
		if (!rc)
			rc = cfs_redis_reply(c, &r);
		*ms = cfs_clock_mono_ms() - t0;
		*broken = cfs_redis_broken(c);
		cfs_redis_reply_free(r);
		if (*broken) { /* and it stays broken */
			CHECK_EQ(cfs_redis_command(c, 1, PING, NULL, &r), CFS_E_NET);
			CHECK(r == NULL);
		}
		cfs_redis_close(c);
	}
	fake_stop(&f);
	return rc;
}

static int ping_answered(const char *answer, size_t n, int close_after, int io_ms, int64_t *ms,
			 int *broken)
{
	return ping_capped(answer, n, close_after, io_ms, 0, ms, broken);
}

/* Starts f answering a PING with `answer`, connects *c and sends the PING:
 * its status, with *r set on 0.  The caller closes *c and stops f. */
static int ping_reply(struct fake *f, const char *answer, size_t n, struct cfs_redis **c,
		      struct cfs_redis_reply **r)
{
	fake_start(f, answer, n, 14, 0, 0);
	int rc = cfs_redis_connect("127.0.0.1", f->port, NULL, c);
	return rc ? rc : cfs_redis_command(*c, 1, PING, NULL, r);
}

static void test_malformed(void)
{
	static const struct {
		const char *s;
		size_t n;
	} bad[] = {
#define BAD(s) { s, sizeof(s) - 1 }
		BAD("$abc\r\n"),        /* a bulk length that is no number */
		BAD("*-5\r\n"),         /* a negative array length */
		BAD("x\r\n"),           /* a garbage type byte */
		BAD(":12a\r\n"),        /* a bad integer */
		BAD("$600000000\r\n"),  /* a bulk string past the 512 MiB cap: refused at once */
		BAD("*2000000\r\n"),    /* an array past the element cap */
		BAD("*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"), /* 8 deep */
#undef BAD
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int64_t ms = 0;
		int broken = 0;
		int rc = ping_answered(bad[i].s, bad[i].n, 0, 3000, &ms, &broken);
		if (rc != CFS_E_PROTO)
			fprintf(stderr, "malformed reply %zu: %d (%s)\n", i, rc, cfs_strerror(rc));
		CHECK_EQ(rc, CFS_E_PROTO);
		CHECK_EQ(broken, 1);
		CHECK(ms < 1500); /* refused, not waited for */
	}
	/* 7 deep is still fine */
	struct fake f;
	static const char deep[] = "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:5\r\n";
	struct cfs_redis *c = NULL;
	struct cfs_redis_reply *r = NULL;
	if (ping_reply(&f, deep, sizeof(deep) - 1, &c, &r) == 0) {
		const struct cfs_cluster_reply *t = cfs_redis_tree(r);
		int depth = 0;
		while (t->type == CFS_RESP_ARRAY && t->n == 1) {
			t = t->el[0];
			depth++;
		}
		CHECK_EQ(depth, 7);
		CHECK(t->type == CFS_RESP_INTEGER && t->integer == 5);
	} else {
		CHECK(!"7-deep reply");
	}
	cfs_redis_reply_free(r);
	cfs_redis_close(c);
	fake_stop(&f);
}

static void test_net_failures(void)
{
	int64_t ms = 0;
	int broken = 0;
	/* a server that takes the command and never answers: the deadline */
	CHECK_EQ(ping_answered(NULL, 0, 0, 300, &ms, &broken), -ETIMEDOUT);
	CHECK(ms >= 280 && ms < 1300);
	CHECK_EQ(broken, 1);
	/* closes in the middle of a reply */
	CHECK_EQ(ping_answered("$10\r\nhel", 8, 1, 3000, &ms, &broken), CFS_E_NET);
	CHECK(ms < 1500);
	CHECK_EQ(broken, 1);
	/* closes without a word */
	CHECK_EQ(ping_answered(NULL, 0, 1, 3000, &ms, &broken), CFS_E_NET);
	CHECK_EQ(broken, 1);
	/* an error reply is a reply, not a failure */
	struct fake f;
	static const char wt[] = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
	struct cfs_redis *c = NULL;
	struct cfs_redis_reply *r = NULL;
	CHECK_EQ(ping_reply(&f, wt, sizeof(wt) - 1, &c, &r), 0);
	if (r) {
		const struct cfs_cluster_reply *t = cfs_redis_tree(r);
		CHECK_EQ(t->type, CFS_RESP_ERROR);
		CHECK(t->len == sizeof(wt) - 4 && memcmp(t->str, wt + 1, t->len) == 0);
		CHECK_EQ(cfs_redis_broken(c), 0);
	}
	cfs_redis_reply_free(r);
	cfs_redis_close(c);
	fake_stop(&f);

	/* a closed port: refused, at once */
	int port = 0;
	close(test_loopback(1, &port));
	int64_t t0 = cfs_clock_mono_ms();
	c = NULL;
	CHECK_EQ(cfs_redis_connect("127.0.0.1", port, NULL, &c), CFS_E_NET);
	CHECK(c == NULL);
	CHECK(cfs_clock_mono_ms() - t0 < 300);
	CHECK_EQ(cfs_redis_connect("127.0.0.1", 0, NULL, &c), -EINVAL);

	/* a listener whose accept queue is full: the SYN goes unanswered and
	 * the connect deadline ends the wait (should the kernel accept it
	 * anyway, only the bound on the time is checked) */
	int lfd = test_loopback(0, &port);
	int filler[4];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	for (int i = 0; i < 4; i++) {
		filler[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (connect(filler[i], (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS)
			perror("test_redis: filler");
	}
	usleep(50000);
	struct cfs_redis_opts o = { .connect_ms = 300 };
	t0 = cfs_clock_mono_ms();
	int rc = cfs_redis_connect("127.0.0.1", port, &o, &c);
	ms = cfs_clock_mono_ms() - t0;
	CHECK(rc == -ETIMEDOUT || rc == 0);
	CHECK(ms < 1300);
	if (rc == 0)
		printf("test_redis: the kernel accepted past a full backlog; connect deadline not exercised\n");
	else
		CHECK(ms >= 280);
	cfs_redis_close(c);
	c = NULL;
	for (int i = 0; i < 4; i++)
		close(filler[i]);
	close(lfd);

	/* TLS to a server that never speaks: the connect deadline */
	o = (struct cfs_redis_opts){ .tls = 1, .connect_ms = 300 };
	fake_start(&f, NULL, 0, 0, 0, 0);
	t0 = cfs_clock_mono_ms();
	CHECK_EQ(cfs_redis_connect("127.0.0.1", f.port, &o, &c), -ETIMEDOUT);
	ms = cfs_clock_mono_ms() - t0;
	CHECK(ms >= 280 && ms < 1300);
	fake_stop(&f);
	/* TLS to a server that answers in plain RESP: a handshake failure */
	fake_start(&f, "-ERR unknown command\r\n", 22, 1, 1, 0);
	o.connect_ms = 2000;
	t0 = cfs_clock_mono_ms();
	CHECK_EQ(cfs_redis_connect("127.0.0.1", f.port, &o, &c), CFS_E_NET);
	CHECK(cfs_clock_mono_ms() - t0 < 1500);
	fake_stop(&f);
}

/* PING with its reply capped at cap, answered with answer (n bytes; the
 * server keeps the connection open after it).  The status, its time. */
static int capped_ping(const char *answer, size_t n, size_t cap, int64_t *ms)
{
	int broken = 0;
	return ping_capped(answer, n, 0, 2000, cap, ms, &broken);
}

static void test_caps(void)
{
	int64_t ms = 0;
	/* a 1000-byte string costs CFS_REDIS_COST(1, 1001): that cap passes, one less fails */
	static char s1000[1000 + 16];
	size_t n = (size_t)snprintf(s1000, sizeof(s1000), "$1000\r\n");
	memset(s1000 + n, 'x', 1000);
	memcpy(s1000 + n + 1000, "\r\n", 2);
	n += 1002;
	CHECK_EQ(capped_ping(s1000, n, CFS_REDIS_COST(1, 1001), &ms), 0);
	CHECK_EQ(capped_ping(s1000, n, CFS_REDIS_COST(1, 1001) - 1, &ms), CFS_E_PROTO);
	/* a header announcing 300 MiB against a 2 MiB cap: at once, no bytes awaited */
	CHECK_EQ(capped_ping("$314572800\r\n", 13, 2u << 20, &ms), CFS_E_PROTO);
	CHECK(ms < 500);
	CHECK_EQ(capped_ping("*2\r\n$314572800\r\n", 17, 2u << 20, &ms), CFS_E_PROTO);
	CHECK(ms < 500);
	/* an array whose elements alone would pass the cap */
	CHECK_EQ(capped_ping("*100000\r\n", 10, 64u << 10, &ms), CFS_E_PROTO);
	CHECK(ms < 500);
	/* a pipeline: each reply against its own command's cap */
	struct fake f;
	static const char two[] = "$5\r\nhello\r\n$5\r\nworld\r\n";
	fake_start(&f, two, sizeof(two) - 1, 28, 0, 0);
	struct cfs_redis *c = NULL;
	CHECK_EQ(cfs_redis_connect("127.0.0.1", f.port, NULL, &c), 0);
	if (c) {
		struct cfs_redis_reply *r = NULL;
		CHECK_EQ(cfs_redis_append_max(c, 1, PING, NULL, CFS_REDIS_COST(1, 6)), 0);
		CHECK_EQ(cfs_redis_append_max(c, 1, PING, NULL, CFS_REDIS_COST(1, 5)), 0);
		CHECK_EQ(cfs_redis_reply(c, &r), 0);
		cfs_redis_reply_free(r);
		r = NULL;
		CHECK_EQ(cfs_redis_reply(c, &r), CFS_E_PROTO);
		CHECK(r == NULL);
		cfs_redis_close(c);
	}
	fake_stop(&f);
}

/* Strings piling up past the cap while the server stalls before the end
 * of the reply: refused as they arrive, not at the 2 s deadline. */
static void test_cap_pile(void)
{
	size_t big = 300u * 1010 + 16;
	char *pile = malloc(big);
	if (!pile)
		return;
	size_t o = (size_t)snprintf(pile, big, "*1000\r\n");
	for (int i = 0; i < 300; i++) { /* 300 of the 1000 strings of 1000 bytes */
		o += (size_t)snprintf(pile + o, big - o, "$1000\r\n");
		memset(pile + o, 'a' + i % 26, 1000);
		memcpy(pile + o + 1000, "\r\n", 2);
		o += 1002;
	}
	int64_t ms = 0;
	/* a cap that holds all 1000: the stall runs into the deadline */
	CHECK_EQ(capped_ping(pile, o, CFS_REDIS_COST(1001, 1000 * (1001 + 8)), &ms), -ETIMEDOUT);
	/* one that holds ~100 of them: refused on the way */
	CHECK_EQ(capped_ping(pile, o, CFS_REDIS_COST(1001, 1000 * 8) + (100u << 10), &ms),
		 CFS_E_PROTO);
	CHECK(ms < 1000);
	free(pile);
}

/* addr_ok refusing every address: -EPERM, nothing connected. */
static int refuse_all(void *arg, const struct cfs_cluster_addr *a, int port)
{
	(void)a;
	(void)port;
	++*(int *)arg;
	return 0;
}

static void test_addr_refused(void)
{
	int port = 0, asked = 0;
	int lfd = test_loopback(4, &port);
	struct cfs_redis_opts o = { .addr_ok = refuse_all, .addr_arg = &asked, .password = "pw" };
	struct cfs_redis *c = NULL;
	CHECK_EQ(cfs_redis_connect("127.0.0.1", port, &o, &c), -EPERM);
	CHECK(c == NULL);
	CHECK_EQ(asked, 1);
	struct pollfd p = { .fd = lfd, .events = POLLIN };
	CHECK_EQ(poll(&p, 1, 100), 0); /* no connection waits to be accepted */
	close(lfd);
}

static char tmpdir[64];

static int slurp_has(const char *path, const char *needle)
{
	FILE *fp = fopen(path, "r");
	if (!fp)
		return -1;
	char buf[65536];
	size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = 0;
	return strstr(buf, needle) != NULL;
}

/* AUTH: what is sent, what a refusal returns, and that the password is in
 * no log line (the log at debug level, to a file). */
static void test_auth_fake(void)
{
	static const char pw[] = "hunter2-not-in-logs";
	static const char want[] = "*3\r\n$4\r\nAUTH\r\n$5\r\nalice\r\n$19\r\nhunter2-not-in-logs\r\n";
	char logpath[128];
	snprintf(logpath, sizeof(logpath), "%s/test.log", tmpdir);
	CHECK_EQ(cfs_log_open(logpath, CFS_LOG_DEBUG), 0);

	struct fake f;
	static const char wrong[] = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
	fake_start(&f, wrong, sizeof(wrong) - 1, sizeof(want) - 1, 0, 0);
	struct cfs_redis_opts o = { .user = "alice", .password = pw };
	struct cfs_redis *c = NULL;
	CHECK_EQ(cfs_redis_connect("127.0.0.1", f.port, &o, &c), CFS_E_AUTH);
	CHECK(c == NULL);
	fake_stop(&f);
	CHECK(f.gotlen == sizeof(want) - 1 && memcmp(f.got, want, f.gotlen) == 0);

	/* both replies at once: PONG waits in the reader for the PING */
	fake_start(&f, "+OK\r\n+PONG\r\n", 12, sizeof(want) - 1, 0, 0);
	CHECK_EQ(cfs_redis_connect("127.0.0.1", f.port, &o, &c), 0);
	struct cfs_redis_reply *r = NULL;
	if (c) {
		CHECK_EQ(cfs_redis_command(c, 1, PING, NULL, &r), 0);
		CHECK(r && cfs_redis_tree(r)->type == CFS_RESP_STATUS);
	}
	cfs_redis_reply_free(r);
	cfs_redis_close(c);
	fake_stop(&f);

	/* a server that closes on AUTH: a transport failure, not an AUTH one */
	fake_start(&f, NULL, 0, 1, 1, 0);
	CHECK_EQ(cfs_redis_connect("127.0.0.1", f.port, &o, &c), CFS_E_NET);
	fake_stop(&f);

	cfs_log_close();
	CHECK_EQ(slurp_has(logpath, "WRONGPASS"), 1); /* the log was written ... */
	CHECK_EQ(slurp_has(logpath, pw), 0);          /* ... without the password */
	CHECK_EQ(slurp_has(logpath, "hunter2"), 0);
}

/* --- a real redis-server ------------------------------------------------ */

static pid_t servers[2];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void cleanup(void)
{
	for (int i = 0; i < 2; i++) {
		if (servers[i] > 0) {
			kill(servers[i], SIGKILL);
			waitpid(servers[i], NULL, 0);
			servers[i] = 0;
		}
	}
	if (tmpdir[0]) {
		nftw(tmpdir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
		tmpdir[0] = 0;
	}
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int in_path(const char *prog)
{
	const char *path = getenv("PATH");
	while (path && *path) {
		const char *end = strchr(path, ':');
		size_t n = end ? (size_t)(end - path) : strlen(path);
		char full[4096];
		if (n && (size_t)snprintf(full, sizeof(full), "%.*s/%s", (int)n, path, prog) < sizeof(full) &&
		    access(full, X_OK) == 0)
			return 1;
		path = end ? end + 1 : NULL;
	}
	return 0;
}

static int free_port(void)
{
	int port = 0;
	close(test_loopback(1, &port));
	return port;
}

/* Starts redis-server with argv (argv[0] "redis-server"), output to
 * tmpdir/name.log; returns its pid. */
static pid_t spawn(char *const argv[], const char *name)
{
	char log[128];
	snprintf(log, sizeof(log), "%s/%s.log", tmpdir, name);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Waits (at most 10 s) until a connection with o works; 0, or the last
 * status (or -ECHILD when the server exited). */
static int wait_ready(pid_t pid, int port, const struct cfs_redis_opts *o)
{
	int rc = CFS_E_NET;
	for (int i = 0; i < 200; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -ECHILD;
		struct cfs_redis *c = NULL;
		struct cfs_redis_reply *r = NULL;
		rc = cfs_redis_connect("127.0.0.1", port, o, &c);
		if (!rc)
			rc = cfs_redis_command(c, 1, PING, NULL, &r);
		/* LOADING and the like: not ready yet */
		if (!rc && cfs_redis_tree(r)->type != CFS_RESP_STATUS)
			rc = -EAGAIN;
		cfs_redis_reply_free(r);
		cfs_redis_close(c);
		if (!rc)
			return 0;
		usleep(50000);
	}
	return rc;
}

static int reply_is(const struct cfs_redis_reply *r, enum cfs_cluster_rtype type, const char *s)
{
	if (!r)
		return 0;
	const struct cfs_cluster_reply *t = cfs_redis_tree(r);
	return t->type == type && (!s || (t->len == strlen(s) && memcmp(t->str, s, t->len) == 0));
}

/* SET then GET of a 1 MiB binary value (NULs, every byte value). */
static void roundtrip_1mib(struct cfs_redis *c, const char *key)
{
	size_t n = 1u << 20;
	char *v = malloc(n);
	if (!v)
		return;
	uint32_t x = 12345;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		v[i] = (char)(i % 7 == 0 ? 0 : x >> 24);
	}
	const char *set[] = { "SET", key, v }, *get[] = { "GET", key };
	const size_t setlen[] = { 3, strlen(key), n };
	struct cfs_redis_reply *r = NULL;
	CHECK_EQ(cfs_redis_command(c, 3, set, setlen, &r), 0);
	CHECK(reply_is(r, CFS_RESP_STATUS, "OK"));
	cfs_redis_reply_free(r);
	r = NULL;
	CHECK_EQ(cfs_redis_command(c, 2, get, NULL, &r), 0);
	CHECK(reply_is(r, CFS_RESP_STRING, NULL));
	if (r) {
		const struct cfs_cluster_reply *t = cfs_redis_tree(r);
		CHECK_EQ(t->len, n);
		CHECK(t->len == n && memcmp(t->str, v, n) == 0);
	}
	cfs_redis_reply_free(r);
	free(v);
}

static int test_real(void)
{
	if (!in_path("redis-server")) {
		printf("test_redis: redis-server not in PATH: the real-server part is skipped\n");
		return 0;
	}
	int port = free_port();
	char portstr[16];
	snprintf(portstr, sizeof(portstr), "%d", port);
	char *argv[] = { "redis-server", "--port", portstr, "--bind", "127.0.0.1", "--save", "",
			 "--appendonly", "no", "--requirepass", "SECRET", "--dir", tmpdir, NULL };
	servers[0] = spawn(argv, "redis");
	struct cfs_redis_opts ok = { .password = "SECRET", .connect_ms = 2000, .io_ms = 5000 };
	int rc = wait_ready(servers[0], port, &ok);
	CHECK_EQ(rc, 0);
	if (rc) {
		fprintf(stderr, "test_redis: redis-server did not come up (%s); see %s/redis.log\n",
			cfs_strerror(rc), tmpdir);
		return 1;
	}
	struct cfs_redis *c = NULL;
	struct cfs_redis_reply *r = NULL;
	/* no AUTH: connects, and the server says NOAUTH to a command */
	CHECK_EQ(cfs_redis_connect("127.0.0.1", port, NULL, &c), 0);
	if (c) {
		CHECK_EQ(cfs_redis_command(c, 1, PING, NULL, &r), 0);
		CHECK(r && cfs_redis_tree(r)->type == CFS_RESP_ERROR &&
		      memcmp(cfs_redis_tree(r)->str, "NOAUTH", 6) == 0);
		cfs_redis_reply_free(r);
		r = NULL;
		cfs_redis_close(c);
		c = NULL;
	}
	/* a wrong password, with and without a user */
	struct cfs_redis_opts wrong = { .password = "NOT-IT", .connect_ms = 2000 };
	CHECK_EQ(cfs_redis_connect("127.0.0.1", port, &wrong, &c), CFS_E_AUTH);
	wrong.user = "default";
	CHECK_EQ(cfs_redis_connect("127.0.0.1", port, &wrong, &c), CFS_E_AUTH);
	/* the right one as user default */
	struct cfs_redis_opts user = ok;
	user.user = "default";
	CHECK_EQ(cfs_redis_connect("127.0.0.1", port, &user, &c), 0);
	cfs_redis_close(c);
	c = NULL;

	CHECK_EQ(cfs_redis_connect("127.0.0.1", port, &ok, &c), 0);
	if (!c)
		return 1;
	CHECK_EQ(cfs_redis_command(c, 1, PING, NULL, &r), 0);
	CHECK(reply_is(r, CFS_RESP_STATUS, "PONG"));
	cfs_redis_reply_free(r);
	r = NULL;
	roundtrip_1mib(c, "cfs:test:big");
	/* a missing key is NIL; a wrong type an error reply */
	const char *getmiss[] = { "GET", "cfs:test:missing" }, *lpush[] = { "LPUSH", "cfs:test:big", "x" };
	CHECK_EQ(cfs_redis_command(c, 2, getmiss, NULL, &r), 0);
	CHECK(reply_is(r, CFS_RESP_NIL, NULL));
	cfs_redis_reply_free(r);
	r = NULL;
	CHECK_EQ(cfs_redis_command(c, 3, lpush, NULL, &r), 0);
	CHECK(r && cfs_redis_tree(r)->type == CFS_RESP_ERROR &&
	      memcmp(cfs_redis_tree(r)->str, "WRONGTYPE", 9) == 0);
	cfs_redis_reply_free(r);
	r = NULL;
	/* a pipeline of 100 INCRs: 1..100 in order */
	const char *incr[] = { "INCR", "cfs:test:n" };
	for (int i = 0; i < 100; i++)
		CHECK_EQ(cfs_redis_append(c, 2, incr, NULL), 0);
	int inorder = 1;
	for (int i = 1; i <= 100; i++) {
		if (cfs_redis_reply(c, &r) != 0 || cfs_redis_tree(r)->type != CFS_RESP_INTEGER ||
		    cfs_redis_tree(r)->integer != i)
			inorder = 0;
		cfs_redis_reply_free(r);
		r = NULL;
	}
	CHECK(inorder);
	CHECK_EQ(cfs_redis_broken(c), 0);
	cfs_redis_close(c);
	return 1;
}

static int sh(const char *cmd)
{
	char full[2048];
	snprintf(full, sizeof(full), "cd '%s' && { %s; } >>openssl.log 2>&1", tmpdir, cmd);
	return system(full);
}

/* A CA, and a certificate for IP 127.0.0.1 signed by it; and another CA. */
static int make_certs(void)
{
	static const char *cmds[] = {
		"printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' >srv.ext",
		"openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
		"-keyout ca.key -out ca.crt -days 2 -subj /CN=cfs-test-ca",
		"openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
		"-keyout other.key -out other.crt -days 2 -subj /CN=cfs-other-ca",
		"openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
		"-keyout srv.key -out srv.csr -subj /CN=127.0.0.1",
		"openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
		"-extfile srv.ext -out srv.crt",
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (sh(cmds[i]) != 0)
			return -1;
	return 0;
}

static int test_tls(void)
{
	if (!in_path("redis-server") || !in_path("openssl")) {
		printf("test_redis: redis-server or openssl not in PATH: the TLS part is skipped\n");
		return 0;
	}
	if (make_certs() != 0) {
		printf("test_redis: the openssl command could not make test certificates (%s/openssl.log): "
		       "the TLS part is skipped\n", tmpdir);
		return 0;
	}
	int port = free_port();
	char portstr[16], cert[128], key[128], ca[128], other[128];
	snprintf(portstr, sizeof(portstr), "%d", port);
	snprintf(cert, sizeof(cert), "%s/srv.crt", tmpdir);
	snprintf(key, sizeof(key), "%s/srv.key", tmpdir);
	snprintf(ca, sizeof(ca), "%s/ca.crt", tmpdir);
	snprintf(other, sizeof(other), "%s/other.crt", tmpdir);
	char *argv[] = { "redis-server", "--port", "0", "--tls-port", portstr, "--bind", "127.0.0.1",
			 "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca,
			 "--tls-auth-clients", "no", "--save", "", "--appendonly", "no",
			 "--requirepass", "SECRET", "--dir", tmpdir, NULL };
	servers[1] = spawn(argv, "redis-tls");
	struct cfs_redis_opts o = { .tls = 1, .ca_file = ca, .password = "SECRET",
				    .connect_ms = 2000, .io_ms = 5000 };
	int rc = wait_ready(servers[1], port, &o);
	if (rc == -ECHILD) {
		servers[1] = 0;
		printf("test_redis: redis-server --tls-port did not start (no TLS in this build? see "
		       "%s/redis-tls.log): the TLS part is skipped\n", tmpdir);
		return 0;
	}
	CHECK_EQ(rc, 0);
	if (rc) {
		fprintf(stderr, "test_redis: TLS redis-server did not answer: %s\n", cfs_strerror(rc));
		return 1;
	}
	struct cfs_redis *c = NULL;
	struct cfs_redis_reply *r = NULL;
	CHECK_EQ(cfs_redis_connect("127.0.0.1", port, &o, &c), 0);
	if (c) {
		CHECK_EQ(cfs_redis_command(c, 1, PING, NULL, &r), 0);
		CHECK(reply_is(r, CFS_RESP_STATUS, "PONG"));
		cfs_redis_reply_free(r);
		r = NULL;
		roundtrip_1mib(c, "cfs:test:tls");
		CHECK_EQ(cfs_redis_broken(c), 0);
		cfs_redis_close(c);
		c = NULL;
	}
	/* a wrong password over TLS */
	struct cfs_redis_opts w = o;
	w.password = "NOT-IT";
	CHECK_EQ(cfs_redis_connect("127.0.0.1", port, &w, &c), CFS_E_AUTH);
	/* another CA: the chain does not verify */
	w = o;
	w.ca_file = other;
	CHECK_EQ(cfs_redis_connect("127.0.0.1", port, &w, &c), CFS_E_TLS);
	CHECK(c == NULL);
	printf("test_redis: (expected) %s\n", cfs_strerror(CFS_E_TLS));
	/* the system store does not know our CA either */
	w.ca_file = NULL;
	CHECK_EQ(cfs_redis_connect("127.0.0.1", port, &w, &c), CFS_E_TLS);
	/* a CA file that is not there */
	w.ca_file = "/nonexistent/ca.crt";
	CHECK_EQ(cfs_redis_connect("127.0.0.1", port, &w, &c), CFS_E_CONFIG);
	/* the right CA, but the certificate is for 127.0.0.1, not localhost */
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
	if (getaddrinfo("localhost", portstr, &hints, &res) == 0) {
		freeaddrinfo(res);
		CHECK_EQ(cfs_redis_connect("localhost", port, &o, &c), CFS_E_TLS);
	} else {
		printf("test_redis: localhost does not resolve: the name-mismatch check is skipped\n");
	}
	/* plain RESP to the TLS port: a failure, not a hang */
	struct cfs_redis_opts plain = { .io_ms = 2000 };
	if (cfs_redis_connect("127.0.0.1", port, &plain, &c) == 0) {
		rc = cfs_redis_command(c, 1, PING, NULL, &r);
		CHECK(rc == CFS_E_NET || rc == CFS_E_PROTO || rc == -ETIMEDOUT);
		cfs_redis_reply_free(r);
		cfs_redis_close(c);
	}
	return 1;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_redis.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("test_redis: mkdtemp");
		return 1;
	}
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGABRT, on_signal);

	test_pipeline();
	test_malformed();
	test_net_failures();
	test_auth_fake();
	test_caps();
	test_cap_pile();
	test_addr_refused();
	int ran = 4;
	ran += test_real();
	ran += test_tls();
	if (!ran)
		return 77;
	return check_done("test_redis");
}
