/* heat: per-slot access counts in a shared file (policy in heat.h).  A leaf:
 * libc only, so the GPU loader links it too. */
#define _GNU_SOURCE
#include "heat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "le.h"

static const char magic[8] = { 'C', 'F', 'S', 'H', 'E', 'A', 'T', '1' };

void cfs_heat_room(unsigned n, const uint64_t *high, uint64_t budget, uint64_t *room)
{
	uint64_t left = budget / 4096;

	if (left < CFS_HEAT_MIN_TOTAL)
		left = CFS_HEAT_MIN_TOTAL;
	if (left > CFS_HEAT_MAX_TOTAL)
		left = CFS_HEAT_MAX_TOTAL;
	/* the largest class needs least: fill from the top, each taking its need or
	 * an equal share of what is left */
	for (unsigned c = n; c-- > 0;) {
		uint64_t need = budget / cfs_class_size(c), share = left / (c + 1);
		uint64_t take = need < share ? need : share;
		left -= take;
		room[c] = take > high[c] ? take : high[c];
	}
}

/* Where the counters start: after the header and the class table. */
static uint64_t table_end(unsigned n)
{
	return ((uint64_t)CFS_HEAT_HEADER + 16ull * n + 63) & ~(uint64_t)63;
}

static uint64_t next_at(uint64_t at, uint64_t room)
{
	return (at + room * 4 + 63) & ~(uint64_t)63;
}

int cfs_heat_create(struct cfs_heat *h, const char *dir, unsigned n, const uint64_t *high,
		    uint64_t budget, uint64_t epoch)
{
	char path[4096], tmp[4100];
	uint64_t off, room[CFS_CLASS_CODES];
	int fd, rc = 0;

	memset(h, 0, sizeof(*h));
	if (n == 0 || n > CFS_CLASS_CODES)
		return -EINVAL;
	if (snprintf(path, sizeof(path), "%s/%s", dir, CFS_HEAT_FILE) >= (int)sizeof(path) ||
	    snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	cfs_heat_room(n, high, budget, room);
	off = table_end(n);
	for (unsigned i = 0; i < n; i++)
		off = next_at(off, room[i]);
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	/* allocated now, not on the first count: a store to a hole of a full tmpfs
	 * would be SIGBUS in the daemon */
	if ((rc = posix_fallocate(fd, 0, (off_t)off)) != 0) {
		rc = -rc;
		goto out;
	}
	void *m = mmap(NULL, (size_t)off, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		rc = -errno;
		goto out;
	}
	unsigned char *b = m;
	memcpy(b, magic, 8);
	cfs_le_put(b + 8, CFS_HEAT_VERSION, 4);
	cfs_le_put(b + 12, n, 4);
	cfs_le_put(b + 16, epoch, 8);
	cfs_le_put(b + 24, CFS_CLASS_SCHEME, 4);
	uint64_t at = table_end(n);
	for (unsigned i = 0; i < n; i++) {
		unsigned char *e = b + CFS_HEAT_HEADER + 16 * i;
		cfs_le_put(e, room[i], 8);
		cfs_le_put(e + 8, at, 8);
		at = next_at(at, room[i]);
	}
	if (rename(tmp, path) < 0) {
		rc = -errno;
		munmap(m, (size_t)off);
		goto out;
	}
	rc = cfs_heat_parse(m, (size_t)off, h);
	if (rc)
		munmap(m, (size_t)off);
out:
	close(fd);
	if (rc) {
		unlink(tmp);
		memset(h, 0, sizeof(*h));
	}
	return rc;
}

void cfs_heat_close(struct cfs_heat *h)
{
	if (h->map)
		munmap(h->map, h->len);
	memset(h, 0, sizeof(*h));
}

int cfs_heat_parse(const void *map, size_t len, struct cfs_heat *h)
{
	const unsigned char *b = map;
	memset(h, 0, sizeof(*h));
	if (!map || len < CFS_HEAT_HEADER || memcmp(b, magic, 8) != 0 ||
	    cfs_le_get(b + 8, 4) != CFS_HEAT_VERSION || cfs_le_get(b + 24, 4) != CFS_CLASS_SCHEME)
		return -EPROTO;
	unsigned n = (unsigned)cfs_le_get(b + 12, 4);
	if (n == 0 || n > CFS_CLASS_CODES || len < table_end(n))
		return -EPROTO;
	for (unsigned i = 0; i < n; i++) {
		const unsigned char *e = b + CFS_HEAT_HEADER + 16 * i;
		uint64_t ns = cfs_le_get(e, 8), at = cfs_le_get(e + 8, 8);
		if (at < table_end(n) || (at & 3) || at > len || ns > (len - at) / 4)
			return -EPROTO;
		h->cls[i].nslots = ns;
		h->cls[i].c = (uint32_t *)(void *)((unsigned char *)map + at);
	}
	h->n = n;
	h->epoch = cfs_le_get(b + 16, 8);
	h->map = (unsigned char *)map;
	h->len = len;
	return 0;
}
