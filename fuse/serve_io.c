/* serve_io: custom io, synthetic INIT and in-flight slots (see serve_io.h). */
#define _GNU_SOURCE
#include "serve_io.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"

/* The unique of the replayed INIT: never one the kernel hands out (those
 * are even and far smaller). */
#define INIT_MARKER 0x7ffffffffffffff1ull

/* One session a process: the hooks find their state here. */
static struct {
	int fuse_fd, fwd_fd;
	struct cfs_super_shm *shm;
	int init_phase;  /* 1: first server, send and record; 2: replay, compare */
	int init_rc;
	unsigned delay_us; /* COLABFS_TEST_REQUEST_DELAY_US: keeps requests in flight */
} g = { .fuse_fd = -1, .fwd_fd = -1 };

static int has_reply(uint32_t op)
{
	return op != FUSE_FORGET && op != FUSE_BATCH_FORGET && op != FUSE_INTERRUPT;
}

static void track(uint64_t unique, uint32_t opcode)
{
	size_t h = (size_t)(unique >> 1) % CFS_SHM_SLOTS;
	for (size_t i = 0; i < CFS_SHM_SLOTS; i++) {
		struct cfs_shm_slot *s = &g.shm->slot[(h + i) % CFS_SHM_SLOTS];
		uint64_t free_ = 0;
		if (__atomic_compare_exchange_n(&s->unique, &free_, unique, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			s->opcode = opcode;
			return;
		}
	}
	/* full: the guard misses this one; it is still resent or replayed */
}

static void untrack(uint64_t unique)
{
	size_t h = (size_t)(unique >> 1) % CFS_SHM_SLOTS;
	for (size_t i = 0; i < CFS_SHM_SLOTS; i++) {
		struct cfs_shm_slot *s = &g.shm->slot[(h + i) % CFS_SHM_SLOTS];
		uint64_t u = unique;
		if (__atomic_compare_exchange_n(&s->unique, &u, 0, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			return;
	}
}

int (*cfs_serve_journal_lookup)(uint64_t key, uint32_t opcode, void *reply, size_t cap,
				size_t *len);

static int changes_state(uint32_t op)
{
	switch (op) {
	case FUSE_SETATTR: case FUSE_MKNOD: case FUSE_MKDIR: case FUSE_UNLINK: case FUSE_RMDIR:
	case FUSE_RENAME: case FUSE_RENAME2: case FUSE_LINK: case FUSE_SYMLINK: case FUSE_WRITE:
	case FUSE_CREATE: case FUSE_SETXATTR: case FUSE_REMOVEXATTR: case FUSE_FALLOCATE:
		return 1;
	default:
		return 0;
	}
}

/* A repeated state-changing request answered from the journal: 1 when it
 * was (the caller reads the next request instead). */
static int answered_from_journal(const struct fuse_in_header *h)
{
	uint8_t reply[512];
	size_t len = 0;
	if (!cfs_serve_journal_lookup || !changes_state(h->opcode) ||
	    !cfs_serve_journal_lookup(h->unique & ~(1ull << 63), h->opcode, reply, sizeof(reply),
				      &len) ||
	    len < sizeof(struct fuse_out_header))
		return 0;
	((struct fuse_out_header *)reply)->unique = h->unique;
	struct iovec iov = { reply, len };
	if (writev(g.fuse_fd, &iov, 1) < 0)
		CFS_WARN("journalled reply to request %llu: %s", (unsigned long long)h->unique,
			 strerror(errno));
	untrack(h->unique);
	if (g.fwd_fd >= 0)
		send(g.fwd_fd, &h->unique, sizeof(h->unique), MSG_NOSIGNAL);
	return 1;
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)fd;
	(void)userdata;
	ssize_t n;
again:
	if (g.fwd_fd >= 0) {
		n = recv(g.fwd_fd, buf, len, 0);
		if (n == 0) { /* the supervisor saw the unmount */
			errno = ENODEV;
			return -1;
		}
	} else {
		n = read(g.fuse_fd, buf, len);
	}
	if (n >= (ssize_t)sizeof(struct fuse_in_header)) {
		const struct fuse_in_header *h = buf;
		if (has_reply(h->opcode)) {
			track(h->unique, h->opcode);
			if (answered_from_journal(h))
				goto again;
			if (g.delay_us)
				usleep(g.delay_us);
		}
	}
	return n;
}

/* The INIT reply: add PARALLEL_DIROPS where the kernel offers it; the first
 * server sends and records it, a later one compares and swallows it. */
static ssize_t init_reply(const struct iovec *iov, int count)
{
	uint8_t msg[CFS_INIT_REPLY_MAX] __attribute__((aligned(8)));
	size_t len = 0;
	for (int i = 0; i < count; i++) {
		if (len + iov[i].iov_len > sizeof(msg)) {
			g.init_rc = -EPROTO;
			errno = EPROTO;
			return -1;
		}
		memcpy(msg + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	struct fuse_out_header *oh = (void *)msg;
	const struct fuse_init_in *in = (const void *)(g.shm->init + sizeof(struct fuse_in_header));
	if (oh->error == 0 && len >= sizeof(*oh) + offsetof(struct fuse_init_out, flags) + 4 &&
	    (in->flags & FUSE_PARALLEL_DIROPS)) {
		struct fuse_init_out *out = (void *)(msg + sizeof(*oh));
		out->flags |= FUSE_PARALLEL_DIROPS;
	}
	if (g.init_phase == 2) {
		struct fuse_out_header *rec = (void *)g.shm->reply;
		oh->unique = rec->unique;
		if (len != g.shm->reply_len || memcmp(msg, g.shm->reply, len) != 0)
			g.init_rc = -EPROTO;
		return (ssize_t)len;
	}
	ssize_t n = write(g.fuse_fd, msg, len);
	if (n < 0) {
		g.init_rc = -errno;
		return -1;
	}
	memcpy(g.shm->reply, msg, len);
	__atomic_store_n(&g.shm->reply_len, (uint32_t)len, __ATOMIC_RELEASE);
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)fd;
	(void)userdata;
	if (g.init_phase)
		return init_reply(iov, count);
	uint64_t unique = 0;
	if (count > 0 && iov[0].iov_len >= sizeof(struct fuse_out_header))
		unique = ((const struct fuse_out_header *)iov[0].iov_base)->unique;
	ssize_t n = writev(g.fuse_fd, iov, count);
	int e = errno;
	if (unique) {
		untrack(unique);
		/* ack even a reply the kernel refused (ENOENT: a replayed
		 * request already answered), so the supervisor forgets it */
		if (g.fwd_fd >= 0)
			while (send(g.fwd_fd, &unique, sizeof(unique), MSG_NOSIGNAL) < 0 &&
			       errno == EINTR)
				;
	}
	errno = e;
	return n;
}

int cfs_serve_io_attach(struct fuse_session *se, const struct cfs_serve_io_opts *o)
{
	if (!o->shm || o->shm->magic != CFS_SHM_MAGIC || !o->shm->init_len ||
	    o->shm->init_len > CFS_INIT_MAX)
		return -EINVAL;
	g.fuse_fd = o->fuse_fd;
	g.fwd_fd = o->forward_fd;
	g.shm = o->shm;
	const char *d = getenv("COLABFS_TEST_REQUEST_DELAY_US");
	g.delay_us = d ? (unsigned)strtoul(d, NULL, 10) : 0;
	static const struct fuse_custom_io io = { .writev = io_writev, .read = io_read };
	/* libfuse closes this descriptor at fuse_session_destroy: give it a
	 * copy so the one named by the supervisor stays ours */
	int fd = dup(o->fuse_fd);
	if (fd < 0)
		return -errno;
	if (fuse_session_custom_io(se, &io, fd) != 0) {
		close(fd);
		return -EIO;
	}
	uint8_t init[CFS_INIT_MAX] __attribute__((aligned(8)));
	uint32_t len = o->shm->init_len;
	memcpy(init, o->shm->init, len);
	int replay = __atomic_load_n(&o->shm->reply_len, __ATOMIC_ACQUIRE) != 0;
	if (replay)
		((struct fuse_in_header *)init)->unique = INIT_MARKER;
	g.init_phase = replay ? 2 : 1;
	g.init_rc = 0;
	struct fuse_buf fb = { .size = len, .mem = init };
	fuse_session_process_buf(se, &fb);
	g.init_phase = 0;
	if (g.init_rc == 0 && !replay && !__atomic_load_n(&o->shm->reply_len, __ATOMIC_ACQUIRE))
		g.init_rc = -EPROTO; /* libfuse sent no reply */
	if (g.init_rc)
		CFS_ERROR("FUSE_INIT %s: %s", replay ? "replay" : "reply",
			  g.init_rc == -EPROTO ? "the reply differs from the mount's"
					       : strerror(-g.init_rc));
	return g.init_rc;
}
