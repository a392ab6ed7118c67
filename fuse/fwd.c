/* fwd: the forwarded-request table (see fwd.h). */
#define _GNU_SOURCE
#include "fwd.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The kernel wants room for a whole write request in every read. */
#define READ_BUF ((1u << 20) + (64u << 10))

struct req {
	struct cfs_fwd_info i;
	uint32_t len;
	char *data;
};

struct cfs_fwd {
	struct req *r;
	size_t n, cap;
	char *buf;
};

struct cfs_fwd *cfs_fwd_new(void)
{
	struct cfs_fwd *f = calloc(1, sizeof(*f));
	if (f && !(f->buf = malloc(READ_BUF))) {
		free(f);
		f = NULL;
	}
	return f;
}

void cfs_fwd_free(struct cfs_fwd *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++)
		free(f->r[i].data);
	free(f->r);
	free(f->buf);
	free(f);
}

static int has_reply(uint32_t op)
{
	return op != FUSE_FORGET && op != FUSE_BATCH_FORGET && op != FUSE_INTERRUPT;
}

static void send_req(int sock, const void *p, size_t len)
{
	/* A failed send is not fatal: the request stays kept and the next
	 * server gets it when this one dies. */
	while (send(sock, p, len, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

int cfs_fwd_read(struct cfs_fwd *f, int fuse_fd, int sock)
{
	ssize_t n = read(fuse_fd, f->buf, READ_BUF);
	if (n < 0)
		return -errno;
	const struct fuse_in_header *h = (const void *)f->buf;
	if ((size_t)n < sizeof(*h))
		return -EPROTO;
	if (has_reply(h->opcode)) {
		if (f->n == f->cap) {
			size_t cap = f->cap ? f->cap * 2 : 64;
			struct req *r = realloc(f->r, cap * sizeof(*r));
			if (!r)
				return -ENOMEM;
			f->r = r;
			f->cap = cap;
		}
		char *copy = malloc((size_t)n);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, f->buf, (size_t)n);
		f->r[f->n++] = (struct req){ { h->unique, h->opcode, h->nodeid }, (uint32_t)n, copy };
	}
	if (sock >= 0)
		send_req(sock, f->buf, (size_t)n);
	return 1;
}

void cfs_fwd_answered(struct cfs_fwd *f, uint64_t unique)
{
	for (size_t i = 0; i < f->n; i++) {
		if (f->r[i].i.unique != unique)
			continue;
		free(f->r[i].data);
		memmove(&f->r[i], &f->r[i + 1], (f->n - i - 1) * sizeof(f->r[0]));
		f->n--;
		return;
	}
}

int cfs_fwd_acks(struct cfs_fwd *f, int sock)
{
	uint64_t u;
	for (;;) {
		ssize_t n = recv(sock, &u, sizeof(u), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? 0 : -EPIPE;
		if (n == 0)
			return -EPIPE;
		if (n == sizeof(u))
			cfs_fwd_answered(f, u);
	}
}

size_t cfs_fwd_replay(struct cfs_fwd *f, int sock)
{
	for (size_t i = 0; i < f->n; i++)
		send_req(sock, f->r[i].data, f->r[i].len);
	return f->n;
}

int cfs_fwd_pending(const struct cfs_fwd *f, size_t i, struct cfs_fwd_info *out)
{
	if (i >= f->n)
		return 0;
	*out = f->r[i].i;
	return 1;
}

size_t cfs_fwd_count(const struct cfs_fwd *f)
{
	return f->n;
}
