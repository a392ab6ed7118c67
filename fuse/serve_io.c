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
#include "notifier.h"
#include "replyrec.h"
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
	int notify_fd; /* the notifier's pipe (notifier.h), or -1 */
	unsigned delay_us; /* COLABFS_TEST_REQUEST_DELAY_US: keeps requests in flight */
} g = { .fuse_fd = -1, .notify_fd = -1 };

/* The request this thread read last and serves: its unique as read (bit 63
 * set when the kernel resends it), opcode, and whether it was read before
 * (resent or replayed).  Forward mode: its log slot, and where the thread
 * looks for a free slot and big slot first. */
static __thread uint64_t cur_unique;
static __thread uint32_t cur_opcode;
static __thread int cur_repeat;
static __thread int cur_slot = -1;
static __thread unsigned slot_hint, big_hint;

#define RESEND_BIT (1ull << 63)

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

/* The guard's slot of unique, or NULL. */
static struct cfs_shm_slot *tracked(uint64_t unique)
{
	size_t h = (size_t)(unique >> 1) % CFS_SHM_SLOTS;
	for (size_t i = 0; i < CFS_SHM_SLOTS; i++) {
		struct cfs_shm_slot *s = &g.shm->slot[(h + i) % CFS_SHM_SLOTS];
		if (__atomic_load_n(&s->unique, __ATOMIC_ACQUIRE) == unique)
			return s;
	}
	return NULL;
}

static void untrack(uint64_t unique)
{
	struct cfs_shm_slot *s = tracked(unique);
	uint64_t u = unique;
	if (s)
		__atomic_compare_exchange_n(&s->unique, &u, 0, 0, __ATOMIC_ACQ_REL,
					    __ATOMIC_RELAXED);
}

/* The opcode of the request a reply with this unique answers (0: unknown):
 * this thread's own request, else the request log's or the guard's record
 * (a reply from another thread). */
static uint32_t opcode_of(uint64_t unique)
{
	if (unique == cur_unique)
		return cur_opcode;
	if (g.log) {
		int op = cfs_reqlog_opcode(g.log, unique, cur_slot);
		return op < 0 ? 0 : (uint32_t)op;
	}
	const struct cfs_shm_slot *s = tracked(unique);
	return s ? s->opcode : 0;
}

/* The kind a request is counted as in colabfs stats. */
static enum cfs_stats_fuse_op fuse_op(uint32_t opcode)
{
	switch (opcode) {
	case FUSE_LOOKUP: return CFS_FOP_LOOKUP;
	case FUSE_GETATTR: return CFS_FOP_GETATTR;
	case FUSE_SETATTR: return CFS_FOP_SETATTR;
	case FUSE_OPEN: return CFS_FOP_OPEN;
	case FUSE_READ: return CFS_FOP_READ;
	case FUSE_WRITE: return CFS_FOP_WRITE;
	case FUSE_FLUSH: return CFS_FOP_FLUSH;
	case FUSE_RELEASE: return CFS_FOP_RELEASE;
	case FUSE_FSYNC: return CFS_FOP_FSYNC;
	case FUSE_CREATE: return CFS_FOP_CREATE;
	case FUSE_OPENDIR: return CFS_FOP_OPENDIR;
	case FUSE_READDIR: return CFS_FOP_READDIR;
	case FUSE_READDIRPLUS: return CFS_FOP_READDIRPLUS;
	case FUSE_RELEASEDIR: return CFS_FOP_RELEASEDIR;
	case FUSE_FORGET: case FUSE_BATCH_FORGET: return CFS_FOP_FORGET;
	case FUSE_GETXATTR: return CFS_FOP_GETXATTR;
	case FUSE_STATFS: return CFS_FOP_STATFS;
	case FUSE_INTERRUPT: return CFS_FOP_INTERRUPT;
	case FUSE_IOCTL: return CFS_FOP_IOCTL;
	default: return CFS_FOP_OTHER;
	}
}

uint64_t cfs_serve_current_unique(void)
{
	return g.shm ? cur_unique & ~RESEND_BIT : 0;
}

/* A repeated state-changing request answered from the journal: 1 when it
 * was (the caller reads the next request instead). */
static int answered_from_journal(const struct fuse_in_header *h)
{
	uint8_t reply[CFS_REPLYREC_DATA] __attribute__((aligned(8)));
	size_t len = 0;
	if (!cur_repeat || !cfs_replyrec_changes_state(h->opcode) ||
	    !cfs_replyrec_get(&g.shm->journal, h->unique & ~RESEND_BIT, h->opcode, reply,
			      sizeof(reply), &len) ||
	    len < sizeof(struct fuse_out_header))
		return 0;
	((struct fuse_out_header *)reply)->unique = h->unique;
	__atomic_fetch_add(&g.shm->rec.journalled, 1, __ATOMIC_RELAXED);
	struct iovec iov = { reply, len };
	/* ENOENT: the kernel had the reply already (the dead server wrote it
	 * and died before it freed the request's record) */
	if (writev(g.fuse_fd, &iov, 1) < 0 && errno != ENOENT)
		CFS_WARN("journalled reply to request %llu: %s", (unsigned long long)h->unique,
			 strerror(errno));
	else
		CFS_DEBUG("request %llu (opcode %u) answered from the reply journal",
			  (unsigned long long)h->unique, h->opcode);
	if (g.log)
		cfs_reqlog_done(g.log, h->unique, cur_slot);
	else
		untrack(h->unique);
	return 1;
}

/* A replayed request too long to have been recorded whole: answered EIO
 * (see reqlog.h: longer than CFS_REQLOG_WHOLE, or read with no big slot
 * free). */
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
			cur_repeat = 1;
			return n;
		}
	}
	cur_repeat = 0;
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
	/* [slot][big slot][the rest of buf], never more than len in all */
	int b = cfs_reqlog_claim_big(g.log, i, big_hint);
	size_t big = 0; /* len > CFS_REQLOG_DATA: see io_read */
	if (b >= 0)
		big = len - CFS_REQLOG_DATA < CFS_REQLOG_BIG_DATA ? len - CFS_REQLOG_DATA
								 : CFS_REQLOG_BIG_DATA;
	size_t used = CFS_REQLOG_DATA + big;
	struct iovec iov[3] = { { sl->data, CFS_REQLOG_DATA } };
	int cnt = 1;
	if (b >= 0) {
		big_hint = (unsigned)b;
		iov[cnt++] = (struct iovec){ g.log->big[b].data, big };
	}
	if (len > used)
		iov[cnt++] = (struct iovec){ buf + used, len - used };
	ssize_t n = readv(g.fuse_fd, iov, cnt);
	int e = errno;
	if (n > 0)
		memcpy(buf, sl->data, (size_t)n < CFS_REQLOG_DATA ? (size_t)n : CFS_REQLOG_DATA);
	if (n > CFS_REQLOG_DATA && big)
		memcpy(buf + CFS_REQLOG_DATA, g.log->big[b].data,
		       (size_t)n - CFS_REQLOG_DATA < big ? (size_t)n - CFS_REQLOG_DATA : big);
	cfs_reqlog_filled(g.log, i, n);
	cur_slot = n >= (ssize_t)sizeof(struct fuse_in_header) &&
			   cfs_reqlog_has_reply(((const struct fuse_in_header *)buf)->opcode)
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
	if (g.log && len > CFS_REQLOG_DATA) {
		n = read_recorded(buf, len);
	} else {
		n = read(g.fuse_fd, buf, len);
		cur_repeat = 0;
	}
	cur_unique = 0;
	cur_opcode = 0;
	if (n >= (ssize_t)sizeof(struct fuse_in_header)) {
		const struct fuse_in_header *h = buf;
		cur_unique = h->unique;
		cur_opcode = h->opcode;
		cur_repeat |= (h->unique & RESEND_BIT) != 0;
		__atomic_fetch_add(&g.shm->rec.requests, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&g.shm->rec.by_op[fuse_op(h->opcode)], 1, __ATOMIC_RELAXED);
		if (cfs_reqlog_has_reply(h->opcode)) {
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

/* Set while this thread has libfuse process FUSE_INIT: the changes poller
 * may send an invalidation notice at the same time, and that must go to the
 * kernel, not be taken for (and compared as) the INIT reply. */
static __thread int init_thread;

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
	if (g.init_phase && init_thread) /* not a notification another thread sends meanwhile */
		return init_reply(iov, count);
	uint64_t unique = 0;
	if (count > 0 && iov[0].iov_len >= sizeof(struct fuse_out_header))
		unique = ((const struct fuse_out_header *)iov[0].iov_base)->unique;
	else
		return writev(g.fuse_fd, iov, count);
	int nfd = __atomic_load_n(&g.notify_fd, __ATOMIC_RELAXED);
	if (!unique && nfd >= 0) { /* a notice: the notifier may wait in the kernel, we may not */
		long n = cfs_notifier_send(nfd, iov, count);
		if (n >= 0)
			return n;
		if (n == -EPIPE && __atomic_exchange_n(&g.notify_fd, -1, __ATOMIC_RELAXED) >= 0)
			CFS_WARN("the notifier is gone; notices go to the device from here");
	}
	/* journalled before the kernel can have it: a death after this write
	 * and before the kernel's is answered from the record */
	uint32_t op = unique ? opcode_of(unique) : 0;
	if (cfs_replyrec_changes_state(op)) {
		int rc = cfs_replyrec_put(&g.shm->journal, unique & ~RESEND_BIT, op, iov, count);
		if (rc)
			CFS_WARN("the reply to request %llu (opcode %u) is not journalled: %s",
				 (unsigned long long)unique, op, strerror(-rc));
	}
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
	/* before INIT: the changes poller starts in the init callback */
	int nfd = cfs_notifier_start(o->fuse_fd);
	if (nfd < 0)
		CFS_WARN("cannot start the notifier (%s): notices go to the device from the server",
			 strerror(-nfd));
	g.notify_fd = nfd;
	cfs_replyrec_recover(&o->shm->journal);
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
	init_thread = 1;
	struct fuse_buf fb = { .size = len, .mem = init };
	fuse_session_process_buf(se, &fb);
	init_thread = 0;
	g.init_phase = 0;
	if (g.init_rc == 0 && !replay && !__atomic_load_n(&o->shm->reply_len, __ATOMIC_ACQUIRE))
		g.init_rc = -EPROTO; /* libfuse sent no reply */
	if (g.init_rc)
		CFS_ERROR("FUSE_INIT %s: %s", replay ? "replay" : "reply",
			  g.init_rc == -EPROTO ? "the reply differs from the mount's"
					       : strerror(-g.init_rc));
	return g.init_rc;
}
