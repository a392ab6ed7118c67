/* arena: slot files by size class (see arena.h). */
#define _GNU_SOURCE
#include "arena.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GROW_BYTES (16u << 20) /* grow a file by at least this much (or one slot) */

unsigned cfs_arena_classes(uint32_t block_size, uint32_t *sizes)
{
	unsigned n = 0;
	for (uint64_t s = 1u << CFS_ARENA_MIN_LOG2; s <= block_size; s <<= 2)
		sizes[n++] = (uint32_t)s;
	if (sizes[n - 1] != block_size)
		sizes[n++] = block_size;
	return n;
}

void cfs_arena_name(uint32_t size, char *out, size_t cap)
{
	if (size >= (1u << 20))
		snprintf(out, cap, "arena-%um.dat", size >> 20);
	else
		snprintf(out, cap, "arena-%uk.dat", size >> 10);
}

static unsigned log2u(uint32_t v)
{
	return 31u - (unsigned)__builtin_clz(v);
}

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

static int arena_open(struct cfs_arena *a, int dirfd, uint32_t size)
{
	char name[32];
	struct stat st;

	a->size = size;
	a->log2 = (uint8_t)log2u(size);
	cfs_arena_name(size, name, sizeof(name));
	a->fd = openat(dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (a->fd < 0)
		return -errno;
	if (fstat(a->fd, &st) < 0)
		return -errno;
	a->nslots = (uint64_t)st.st_size / size;
	a->bits = calloc(words(a->nslots) ? words(a->nslots) : 1, sizeof(uint64_t));
	return a->bits ? 0 : -ENOMEM;
}

int cfs_arenas_open(struct cfs_arenas *as, const char *dir, uint32_t block_size)
{
	uint32_t sizes[CFS_ARENA_MAX_CLASSES];
	int rc = 0;
	int dirfd;

	memset(as, 0, sizeof(*as));
	for (unsigned i = 0; i < CFS_ARENA_MAX_CLASSES; i++)
		as->a[i].fd = -1;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	as->n = cfs_arena_classes(block_size, sizes);
	for (unsigned i = 0; i < as->n && rc == 0; i++)
		rc = arena_open(&as->a[i], dirfd, sizes[i]);
	close(dirfd);
	if (rc)
		cfs_arenas_close(as);
	return rc;
}

void cfs_arenas_close(struct cfs_arenas *as)
{
	for (unsigned i = 0; i < as->n; i++)
		arena_close(&as->a[i]);
	as->n = 0;
}

int cfs_arenas_remove(const char *dir)
{
	char name[32];
	int rc = 0;
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dirfd < 0)
		return -errno;
	for (unsigned l = CFS_ARENA_MIN_LOG2; l <= CFS_ARENA_MAX_LOG2; l++) {
		cfs_arena_name(1u << l, name, sizeof(name));
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

int cfs_arenas_class_for(const struct cfs_arenas *as, uint32_t len)
{
	for (unsigned i = 0; i < as->n; i++)
		if (len <= as->a[i].size)
			return (int)i;
	return -EINVAL;
}

int cfs_arenas_class_of_log2(const struct cfs_arenas *as, unsigned log2)
{
	for (unsigned i = 0; i < as->n; i++)
		if (as->a[i].log2 == log2)
			return (int)i;
	return -ENOENT;
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

int cfs_arena_alloc(struct cfs_arena *a, uint64_t *slot)
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
		return cfs_arena_alloc(a, slot);
	}
	return -EIO; /* nused says a slot is free but none is: cannot happen */
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
