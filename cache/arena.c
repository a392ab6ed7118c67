/* arena: slot files by size class (see arena.h). */
#define _GNU_SOURCE
#include "arena.h"
#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GROW_BYTES (16u << 20) /* grow a file by at least this much (or one slot) */

static void arena_close(struct cfs_arena *a)
{
	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
	free(a->bits);
	a->bits = NULL;
	a->nslots = a->nused = a->hint = 0;
}

static size_t words(uint64_t nslots)
{
	return (size_t)((nslots + 63) / 64);
}

/* Opens the file of a's class if it exists (create: makes it). */
static int arena_open(struct cfs_arena *a, int dirfd, int create)
{
	char name[CFS_FMT_ARENA_NAME_MAX];
	struct stat st;

	cfs_fmt_arena_name(a->code, name, sizeof(name));
	a->fd = openat(dirfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600);
	if (a->fd < 0)
		return !create && errno == ENOENT ? 0 : -errno;
	if (fstat(a->fd, &st) < 0)
		return -errno;
	a->nslots = (uint64_t)st.st_size / a->size;
	a->bits = calloc(words(a->nslots) ? words(a->nslots) : 1, sizeof(uint64_t));
	return a->bits ? 0 : -ENOMEM;
}

int cfs_arenas_open(struct cfs_arenas *as, const char *dir, uint32_t block_size)
{
	int rc = 0;

	memset(as, 0, sizeof(*as));
	for (unsigned c = 0; c < CFS_CLASS_CODES; c++) {
		as->a[c].fd = -1;
		as->a[c].code = (uint8_t)c;
		as->a[c].size = cfs_class_size(c);
	}
	as->dirfd = -1;
	if (!cfs_class_block_ok(block_size))
		return -EINVAL;
	as->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (as->dirfd < 0)
		return -errno;
	as->n = cfs_class_top(block_size) + 1;
	for (unsigned c = 0; c < as->n && rc == 0; c++)
		rc = arena_open(&as->a[c], as->dirfd, 0);
	if (rc)
		cfs_arenas_close(as);
	return rc;
}

void cfs_arenas_close(struct cfs_arenas *as)
{
	/* n is set once dirfd is open: a zeroed struct closes nothing */
	if (as->n && as->dirfd >= 0)
		close(as->dirfd);
	for (unsigned i = 0; i < as->n; i++)
		arena_close(&as->a[i]);
	as->n = 0;
	as->dirfd = -1;
}

int cfs_arenas_remove(const char *dir)
{
	char name[CFS_FMT_ARENA_NAME_MAX];
	int rc = 0;
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);

	if (dirfd < 0)
		return -errno;
	for (unsigned c = 0; c < CFS_CLASS_CODES; c++) {
		cfs_fmt_arena_name(c, name, sizeof(name));
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT && !rc)
			rc = -errno;
	}
	close(dirfd);
	return rc;
}

uint64_t cfs_arenas_allocated(const struct cfs_arenas *as)
{
	uint64_t sum = 0;
	struct stat st;

	for (unsigned i = 0; i < as->n; i++)
		if (as->a[i].fd >= 0 && fstat(as->a[i].fd, &st) == 0)
			sum += (uint64_t)st.st_blocks * 512;
	return sum;
}

static int bit_get(const struct cfs_arena *a, uint64_t slot)
{
	return (int)((a->bits[slot / 64] >> (slot % 64)) & 1);
}

int cfs_arena_claim(struct cfs_arena *a, uint64_t slot)
{
	if (slot >= a->nslots)
		return -ERANGE;
	if (bit_get(a, slot))
		return -EEXIST;
	a->bits[slot / 64] |= 1ull << (slot % 64);
	a->nused++;
	return 0;
}

static int arena_grow(struct cfs_arena *a)
{
	uint64_t add = GROW_BYTES / a->size;
	uint64_t n;
	uint64_t *bits;
	size_t ow = words(a->nslots), nw;

	if (add < 1)
		add = 1;
	if (add < a->nslots / 2)
		add = a->nslots / 2;
	n = a->nslots + add;
	nw = words(n);
	if (nw > ow) {
		bits = realloc(a->bits, nw * sizeof(uint64_t));
		if (!bits)
			return -ENOMEM;
		memset(bits + ow, 0, (nw - ow) * sizeof(uint64_t));
		a->bits = bits;
	}
	if (ftruncate(a->fd, (off_t)(n * a->size)) < 0)
		return -errno;
	a->nslots = n;
	return 0;
}

static int arena_alloc(struct cfs_arena *a, uint64_t *slot)
{
	int rc;

	if (a->nused >= a->nslots && (rc = arena_grow(a)) != 0)
		return rc;
	for (size_t w = (size_t)a->hint; w < words(a->nslots); w++) {
		if (a->bits[w] == ~0ull)
			continue;
		uint64_t s = (uint64_t)w * 64 + (unsigned)__builtin_ctzll(~a->bits[w]);
		if (s >= a->nslots)
			break;
		a->hint = w;
		a->bits[w] |= 1ull << (s % 64);
		a->nused++;
		*slot = s;
		return 0;
	}
	/* the hint was stale past the end: rescan from the start */
	if (a->hint) {
		a->hint = 0;
		return arena_alloc(a, slot);
	}
	return -EIO; /* nused says a slot is free but none is: cannot happen */
}

int cfs_arenas_alloc(struct cfs_arenas *as, unsigned code, uint64_t *slot)
{
	struct cfs_arena *a;
	int rc;

	if (code >= as->n)
		return -EINVAL;
	a = &as->a[code];
	if (a->fd < 0 && (rc = arena_open(a, as->dirfd, 1)) != 0) {
		arena_close(a);
		return rc;
	}
	return arena_alloc(a, slot);
}

void cfs_arena_clear(struct cfs_arena *a, uint64_t slot)
{
	if (slot >= a->nslots || !bit_get(a, slot))
		return;
	a->bits[slot / 64] &= ~(1ull << (slot % 64));
	a->nused--;
	if (slot / 64 < a->hint)
		a->hint = slot / 64;
}

void cfs_arena_punch(const struct cfs_arena *a, uint64_t slot, uint64_t count)
{
	/* Best effort: a file system without hole punching keeps the pages. */
	(void)fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(slot * a->size),
			(off_t)(count * a->size));
}

uint64_t cfs_arena_high(const struct cfs_arena *a)
{
	for (size_t w = words(a->nslots); w > 0; w--)
		if (a->bits[w - 1])
			return (uint64_t)(w - 1) * 64 + 64 - (unsigned)__builtin_clzll(a->bits[w - 1]);
	return 0;
}

void cfs_arena_punch_free(const struct cfs_arena *a)
{
	uint64_t s = 0;
	while (s < a->nslots) {
		if (bit_get(a, s)) {
			s++;
			continue;
		}
		uint64_t e = s;
		while (e < a->nslots && !bit_get(a, e))
			e++;
		cfs_arena_punch(a, s, e - s);
		s = e;
	}
}

int cfs_arena_write(const struct cfs_arena *a, uint64_t slot, const void *p, uint32_t len)
{
	const char *c = p;
	off_t off = (off_t)(slot * a->size);

	if (len > a->size)
		return -EINVAL;
	while (len) {
		ssize_t k = pwrite(a->fd, c, len, off);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return errno == EDQUOT ? -ENOSPC : -errno;
		}
		if (k == 0)
			return -ENOSPC;
		c += k;
		off += k;
		len -= (uint32_t)k;
	}
	return 0;
}

int cfs_arena_read(const struct cfs_arena *a, uint64_t slot, uint32_t off, void *p, uint32_t len)
{
	char *c = p;
	off_t pos = (off_t)(slot * a->size + off);

	if ((uint64_t)off + len > a->size)
		return -EINVAL;
	while (len) {
		ssize_t k = pread(a->fd, c, len, pos);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return -EIO;
		c += k;
		pos += k;
		len -= (uint32_t)k;
	}
	return 0;
}
