/* serve_io: custom io, synthetic INIT and in-flight slots (see serve_io.h). */
#define _GNU_SOURCE
#include "serve_io.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"
#include "testhook.h"

/* The unique of the replayed INIT: never one the kernel hands out (those
 * are even and far smaller). */
#define INIT_MARKER 0x7ffffffffffffff1ull

/* One session a process: the hooks find their state here. */
static struct {
	int fuse_fd;
	struct cfs_super_shm *shm;
	struct cfs_reqlog *log; /* forward mode: requests recorded in the shared log */
	int *replay;            /* slots a dead server left, in the kernel's order */
	size_t nreplay, replay_next; /* replay_next: atomic */
	int unrecorded_said;
	int init_phase;  /* 1: first server, send and record; 2: replay, compare */
	int init_rc;
	unsigned delay_us; /* COLABFS_TEST_REQUEST_DELAY_US: keeps requests in flight */
} g = { .fuse_fd = -1 };

/* forward mode: the log slot of the request this thread serves, and where it
 * looks for a free slot first */
static __thread int cur_slot = -1;
static __thread unsigned slot_hint;

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
	if (g.log)
		cfs_reqlog_done(g.log, h->unique, cur_slot);
	else
		untrack(h->unique);
	return 1;
}

/* A replayed request too long to have been recorded whole: answered EIO
 * (never on a read-only mount, see reqlog.h). */
static void answer_partial(int slot, const struct fuse_in_header *h)
{
	struct fuse_out_header oh = { .len = sizeof(oh), .error = -EIO, .unique = h->unique };
	CFS_ERROR("request %llu (opcode %u) of the dead server was too long to record: "
		  "answering EIO", (unsigned long long)h->unique, h->opcode);
	if (write(g.fuse_fd, &oh, sizeof(oh)) < 0)
		CFS_WARN("EIO reply to request %llu: %s", (unsigned long long)h->unique,
			 strerror(errno));
	cfs_reqlog_done(g.log, h->unique, slot);
}

/* forward mode: the next request, recorded in the log before anything else
 * happens to it.  A dead server's requests come first. */
static ssize_t read_recorded(char *buf, size_t len)
{
	for (;;) {
		size_t k = __atomic_fetch_add(&g.replay_next, 1, __ATOMIC_RELAXED);
		if (k >= g.nreplay)
			break;
		int i = g.replay[k];
		long n = cfs_reqlog_take(g.log, i, buf, len);
		if (n == -E2BIG)
			answer_partial(i, (const struct fuse_in_header *)buf);
		if (n > 0) {
			cur_slot = i;
			return n;
		}
	}
	int i = cfs_reqlog_claim(g.log, slot_hint);
	if (i < 0) {
		/* more requests in service than slots (cannot happen with at
		 * most 1024 workers): this one is served unrecorded */
		if (!__atomic_exchange_n(&g.unrecorded_said, 1, __ATOMIC_RELAXED))
			CFS_WARN("request log full: a request is served without a record "
				 "(a server death now would leave its reader waiting)");
		cur_slot = -1;
		return read(g.fuse_fd, buf, len);
	}
	slot_hint = (unsigned)i;
	struct cfs_reqlog_slot *sl = &g.log->slot[i];
	struct iovec iov[2] = { { sl->data, CFS_REQLOG_DATA },
				{ buf + CFS_REQLOG_DATA, len - CFS_REQLOG_DATA } };
	ssize_t n = readv(g.fuse_fd, iov, 2);
	int e = errno;
	if (n > 0)
		memcpy(buf, sl->data, (size_t)n < CFS_REQLOG_DATA ? (size_t)n : CFS_REQLOG_DATA);
	cfs_reqlog_filled(g.log, i, n);
	cur_slot = n >= (ssize_t)sizeof(struct fuse_in_header) &&
			   has_reply(((const struct fuse_in_header *)buf)->opcode)
		   ? i
		   : -1;
	errno = e;
	return n;
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)fd;
	(void)userdata;
	ssize_t n;
again:
	if (g.log && len > CFS_REQLOG_DATA)
		n = read_recorded(buf, len);
	else
		n = read(g.fuse_fd, buf, len);
	if (n >= (ssize_t)sizeof(struct fuse_in_header)) {
		const struct fuse_in_header *h = buf;
		__atomic_fetch_add(&g.shm->rec.requests, 1, __ATOMIC_RELAXED);
		if (has_reply(h->opcode)) {
			if (!g.log) /* the log is the guard's record in forward mode */
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
	/* forget the record even of a reply the kernel refused (ENOENT: a
	 * replayed request it had answered already) */
	if (unique && g.log)
		cfs_reqlog_done(g.log, unique, cur_slot);
	else if (unique)
		untrack(unique);
	errno = e;
	return n;
}

int cfs_serve_io_attach(struct fuse_session *se, const struct cfs_serve_io_opts *o)
{
	if (!o->shm || o->shm->magic != CFS_SHM_MAGIC || !o->shm->init_len ||
	    o->shm->init_len > CFS_INIT_MAX)
		return -EINVAL;
	g.fuse_fd = o->fuse_fd;
	g.shm = o->shm;
	if (o->record) {
		/* what a dead server left is served first, before new requests */
		g.log = &o->shm->log;
		cfs_reqlog_prefault(g.log);
		if (cfs_reqlog_recover(g.log, &g.replay, &g.nreplay))
			return -ENOMEM;
		if (g.nreplay) {
			__atomic_fetch_add(&o->shm->rec.replayed, g.nreplay, __ATOMIC_RELAXED);
			CFS_INFO("serving again %zu requests the last server had read", g.nreplay);
		}
	}
	const char *d = cfs_test_env("COLABFS_TEST_REQUEST_DELAY_US");
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
