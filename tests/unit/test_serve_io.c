/* Unit tests: serve_io (fuse/serve_io.c) in forward mode, with a
 * SOCK_SEQPACKET socket standing in for /dev/fuse (it keeps each request
 * one message, as the device does) and a real libfuse session.
 *
 * One server: a WRITE of CFS_MAX_WRITE bytes is read whole into the request
 * log (slot and big slot) and handed to libfuse whole; its reply is
 * journalled; the kernel's resend of it (bit 63) is answered from the
 * journal without reaching the callback; cfs_serve_current_unique names the
 * request in the callback; with every big slot taken a WRITE is recorded
 * partial.  Two servers: the first is killed holding a WRITE it has read
 * and one whose reply it had journalled but not sent; the next serves the
 * first again whole (same unique in the callback) and answers the second
 * from the journal; an invalidation another thread sends while the next
 * server replays FUSE_INIT reaches the kernel and is not taken for the INIT
 * reply (that once ended the mount: "the reply differs").  Each server is a child process (serve_io keeps one
 * session a process). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "serve_io.h"
#include "shm_util.h"

#define BIT63 (1ull << 63)
#define WRITE_HDRS (sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in))

static struct cfs_super_shm *shm;
static int kill_in_write;        /* the callback journals a reply and dies */
static int writes;               /* callbacks run */
static uint64_t seen_unique;     /* cfs_serve_current_unique in the last one */
static size_t seen_size;
static int seen_bytes_ok;

static uint8_t pattern(uint64_t unique, size_t i)
{
	return (uint8_t)(i * 13 + (unique & ~BIT63));
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)ino;
	(void)off;
	(void)fi;
	writes++;
	seen_unique = cfs_serve_current_unique();
	seen_size = size;
	seen_bytes_ok = 1;
	for (size_t i = 0; i < size; i++)
		seen_bytes_ok &= (uint8_t)buf[i] == pattern(seen_unique, i);
	if (kill_in_write) {
		/* the reply is recorded, the server dies before it is written */
		struct fuse_out_header oh = { .len = sizeof(oh) + sizeof(struct fuse_write_out),
					      .unique = seen_unique };
		struct fuse_write_out wo = { .size = (uint32_t)size };
		struct iovec iov[2] = { { &oh, sizeof(oh) }, { &wo, sizeof(wo) } };
		if (cfs_replyrec_put(&shm->journal, seen_unique, FUSE_WRITE, iov, 2) == 0)
			raise(SIGKILL);
		_exit(5);
	}
	fuse_reply_write(req, size);
}

static struct fuse_session *cur_se;
static int notify_in_init; /* the init callback has a thread send a notice */
static int notify_rc = 1;

static void *notifier(void *arg)
{
	(void)arg;
	notify_rc = fuse_lowlevel_notify_inval_entry(cur_se, 1, "x", 1);
	return NULL;
}

/* libfuse calls it while it handles FUSE_INIT, before the reply: the
 * changes poller's notice at that moment, from its own thread */
static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	(void)conn;
	pthread_t t;
	if (notify_in_init && pthread_create(&t, NULL, notifier, NULL) == 0)
		pthread_join(t, NULL);
}

static const struct fuse_lowlevel_ops ops = { .init = op_init, .write = op_write };

static struct cfs_super_shm *new_shm(void)
{
	struct cfs_super_shm *s = test_shared_map(sizeof(*s));
	s->magic = CFS_SHM_MAGIC;
	struct fuse_in_header h = { .len = sizeof(h) + sizeof(struct fuse_init_in),
				    .opcode = FUSE_INIT, .unique = 2 };
	struct fuse_init_in in = { .major = FUSE_KERNEL_VERSION, .minor = 31,
				   .max_readahead = 128 * 1024 };
	memcpy(s->init, &h, sizeof(h));
	memcpy(s->init + sizeof(h), &in, sizeof(in));
	s->init_len = h.len;
	return s;
}

/* The "kernel" end: sends a WRITE of size bytes as request unique. */
static void send_write(int fd, uint64_t unique, uint32_t size)
{
	static uint8_t msg[WRITE_HDRS + CFS_MAX_WRITE + 4096];
	struct fuse_in_header h = { .len = (uint32_t)(WRITE_HDRS + size), .opcode = FUSE_WRITE,
				    .unique = unique, .nodeid = 5 };
	struct fuse_write_in w = { .fh = 1, .offset = 0, .size = size };
	memcpy(msg, &h, sizeof(h));
	memcpy(msg + sizeof(h), &w, sizeof(w));
	for (size_t i = 0; i < size; i++)
		msg[WRITE_HDRS + i] = pattern(unique, i);
	CHECK_EQ(send(fd, msg, h.len, 0), h.len);
}

/* The next reply on the kernel's end: its unique, *size the WRITE's. */
static uint64_t next_reply(int fd, int *error, uint32_t *size)
{
	uint8_t r[4096];
	ssize_t n = recv(fd, r, sizeof(r), 0);
	if (n < (ssize_t)sizeof(struct fuse_out_header))
		return 0;
	const struct fuse_out_header *oh = (const void *)r;
	*error = oh->error;
	*size = n >= (ssize_t)(sizeof(*oh) + 4) ? ((const struct fuse_write_out *)(oh + 1))->size
						: 0;
	return oh->unique;
}

static int socket_pair(int sv[2])
{
	int big = 1 << 20;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0)
		return -1;
	struct timeval tv = { .tv_sec = 5 }; /* a failing test fails, it does not hang */
	for (int i = 0; i < 2; i++) {
		setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
		setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
		setsockopt(sv[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	return 0;
}

/* A server on fd: a session attached in forward mode. */
static struct fuse_session *serve(int fd)
{
	char *argv[] = { "test_serve_io", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	cur_se = se;
	struct cfs_serve_io_opts o = { .fuse_fd = fd, .record = 1, .shm = shm };
	if (!se || cfs_serve_io_attach(se, &o) != 0)
		_exit(7);
	return se;
}

/* Receives and serves one request; returns its unique. */
static uint64_t serve_one(struct fuse_session *se, struct fuse_buf *fb)
{
	if (fuse_session_receive_buf(se, fb) <= 0)
		return 0;
	uint64_t u = ((const struct fuse_in_header *)fb->mem)->unique;
	fuse_session_process_buf(se, fb);
	return u;
}

static int held_with_big(uint64_t unique)
{
	for (int i = 0; i < CFS_REQLOG_SLOTS; i++) {
		const struct cfs_reqlog_slot *s = &shm->log.slot[i];
		if ((uint32_t)s->word == 2 && ((const struct fuse_in_header *)s->data)->unique ==
						      unique)
			return (int)(s->flags >> CFS_REQLOG_BIG_SHIFT) > 0 &&
			       s->len == ((const struct fuse_in_header *)s->data)->len;
	}
	return 0;
}

static int bigs_free(void)
{
	int n = 0;
	for (int b = 0; b < CFS_REQLOG_BIGS; b++)
		n += shm->log.big[b].owner == 0;
	return n;
}

/* One server, the kernel's resend: the journal answers. */
static int one_server(int sv[2])
{
	struct fuse_session *se = serve(sv[0]);
	struct fuse_buf fb = { 0 };
	int err;
	uint32_t size;
	CHECK_EQ(next_reply(sv[1], &err, &size), 2); /* INIT */
	CHECK_EQ(err, 0);
	CHECK_EQ(cfs_serve_current_unique(), 0); /* no request read yet */
	send_write(sv[1], 100, CFS_MAX_WRITE);
	CHECK_EQ(fuse_session_receive_buf(se, &fb), WRITE_HDRS + CFS_MAX_WRITE);
	CHECK(held_with_big(100)); /* recorded whole before anything happens to it */
	CHECK_EQ(bigs_free(), CFS_REQLOG_BIGS - 1);
	fuse_session_process_buf(se, &fb);
	CHECK_EQ(writes, 1);
	CHECK_EQ(seen_unique, 100);
	CHECK_EQ(seen_size, CFS_MAX_WRITE);
	CHECK(seen_bytes_ok);
	CHECK_EQ(next_reply(sv[1], &err, &size), 100);
	CHECK_EQ(size, CFS_MAX_WRITE);
	CHECK(!held_with_big(100));
	CHECK_EQ(bigs_free(), CFS_REQLOG_BIGS);
	/* the kernel resends it (the server "died" before the kernel took the
	 * reply): answered from the journal, the callback does not run */
	send_write(sv[1], 100 | BIT63, CFS_MAX_WRITE);
	send_write(sv[1], 102, 10);
	CHECK_EQ(serve_one(se, &fb), 102);
	CHECK_EQ(writes, 2);
	CHECK_EQ(seen_unique, 102);
	CHECK_EQ(next_reply(sv[1], &err, &size), 100 | BIT63);
	CHECK_EQ(size, CFS_MAX_WRITE);
	CHECK_EQ(next_reply(sv[1], &err, &size), 102);
	CHECK_EQ(shm->rec.journalled, 1);
	/* a resend whose reply is not journalled runs; the unique is the same */
	send_write(sv[1], 104 | BIT63, 20);
	CHECK_EQ(serve_one(se, &fb), 104 | BIT63);
	CHECK_EQ(writes, 3);
	CHECK_EQ(seen_unique, 104);
	CHECK_EQ(next_reply(sv[1], &err, &size), 104 | BIT63);
	/* every big slot taken (threads waiting in read): recorded partial */
	for (int b = 0; b < CFS_REQLOG_BIGS; b++)
		shm->log.big[b].owner = CFS_REQLOG_SLOTS; /* a slot nobody uses */
	send_write(sv[1], 106, CFS_MAX_WRITE);
	CHECK_EQ(fuse_session_receive_buf(se, &fb), WRITE_HDRS + CFS_MAX_WRITE);
	CHECK(!held_with_big(106));
	int partial = 0;
	for (int i = 0; i < CFS_REQLOG_SLOTS; i++)
		partial += (uint32_t)shm->log.slot[i].word == 2 &&
			   (shm->log.slot[i].flags & CFS_REQLOG_PARTIAL);
	CHECK_EQ(partial, 1);
	fuse_session_process_buf(se, &fb); /* served all the same: whole in buf */
	CHECK(seen_bytes_ok && seen_size == CFS_MAX_WRITE);
	CHECK_EQ(next_reply(sv[1], &err, &size), 106);
	free(fb.mem);
	return check_done("test_serve_io (one server)");
}

/* The first of two servers: reads 200, journals 202's reply, dies. */
static void dying_server(int sv[2])
{
	struct fuse_session *se = serve(sv[0]);
	struct fuse_buf fb = { 0 }, fb2 = { 0 };
	send_write(sv[1], 200, CFS_MAX_WRITE);
	send_write(sv[1], 202, 4000);
	if (fuse_session_receive_buf(se, &fb) <= 0 || fuse_session_receive_buf(se, &fb2) <= 0)
		_exit(6);
	kill_in_write = 1;
	fuse_session_process_buf(se, &fb2);
	_exit(8);
}

static int next_server(int sv[2])
{
	int err;
	uint32_t size;
	notify_in_init = 1;
	struct fuse_session *se = serve(sv[0]); /* INIT compared, not sent */
	struct fuse_buf fb = { 0 };
	CHECK_EQ(notify_rc, 0);
	CHECK_EQ(next_reply(sv[1], &err, &size), 0); /* the notice, not swallowed */
	CHECK_EQ(err, FUSE_NOTIFY_INVAL_ENTRY);
	send_write(sv[1], 204, 30);
	CHECK_EQ(serve_one(se, &fb), 200); /* the dead server's first, whole */
	CHECK_EQ(seen_unique, 200);
	CHECK_EQ(seen_size, CFS_MAX_WRITE);
	CHECK(seen_bytes_ok);
	CHECK_EQ(serve_one(se, &fb), 204); /* 202 answered from the journal */
	CHECK_EQ(writes, 2);
	CHECK_EQ(next_reply(sv[1], &err, &size), 200);
	CHECK_EQ(size, CFS_MAX_WRITE);
	CHECK_EQ(next_reply(sv[1], &err, &size), 202);
	CHECK_EQ(size, 4000);
	CHECK_EQ(next_reply(sv[1], &err, &size), 204);
	CHECK_EQ(shm->rec.journalled, 1);
	CHECK_EQ(bigs_free(), CFS_REQLOG_BIGS);
	free(fb.mem);
	return check_done("test_serve_io (next server)");
}

static int run_child(int (*fn)(int *), int sv[2], int want_signal)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int rc = fn(sv);
		fflush(stdout);
		_exit(rc);
	}
	int st = 0;
	if (waitpid(pid, &st, 0) != pid)
		return 0;
	return want_signal ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL
			   : WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int dying(int *sv)
{
	dying_server(sv);
	return 9;
}

int main(void)
{
	int sv[2];
	shm = new_shm();
	CHECK_EQ(socket_pair(sv), 0);
	CHECK(run_child(one_server, sv, 0));
	close(sv[0]);
	close(sv[1]);
	shm = new_shm();
	CHECK_EQ(socket_pair(sv), 0);
	CHECK(run_child(dying, sv, 1));
	int err;
	uint32_t size;
	CHECK_EQ(next_reply(sv[1], &err, &size), 2); /* the first server's INIT */
	CHECK(run_child(next_server, sv, 0));
	return check_done("test_serve_io");
}
