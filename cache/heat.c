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

int cfs_heat_create(struct cfs_heat *h, const char *dir, unsigned n, const uint8_t *log2,
		    const uint64_t *nslots, uint64_t budget, uint64_t epoch)
{
	char path[4096], tmp[4100];
	uint64_t off = CFS_HEAT_HEADER, room[CFS_HEAT_MAX_CLASSES];
	int fd, rc = 0;

	memset(h, 0, sizeof(*h));
	if (n == 0 || n > CFS_HEAT_MAX_CLASSES)
		return -EINVAL;
	if (snprintf(path, sizeof(path), "%s/%s", dir, CFS_HEAT_FILE) >= (int)sizeof(path) ||
	    snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (unsigned i = 0; i < n; i++) {
		uint64_t b = budget >> log2[i];
		if (b > CFS_HEAT_MAX_ROOM)
			b = CFS_HEAT_MAX_ROOM;
		room[i] = (nslots[i] > b ? nslots[i] : b) + CFS_HEAT_SLACK;
		off += room[i] * 4;
		off = (off + 63) & ~(uint64_t)63;
	}
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
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
	cfs_le_put(b + 8, 1, 4);
	cfs_le_put(b + 12, n, 4);
	cfs_le_put(b + 16, epoch, 8);
	uint64_t at = CFS_HEAT_HEADER;
	for (unsigned i = 0; i < n; i++) {
		unsigned char *e = b + 24 + 24 * i;
		cfs_le_put(e, log2[i], 4);
		cfs_le_put(e + 8, room[i], 8);
		cfs_le_put(e + 16, at, 8);
		at += room[i] * 4;
		at = (at + 63) & ~(uint64_t)63;
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
	if (!map || len < CFS_HEAT_HEADER || memcmp(b, magic, 8) != 0 || cfs_le_get(b + 8, 4) != 1)
		return -EPROTO;
	unsigned n = (unsigned)cfs_le_get(b + 12, 4);
	if (n == 0 || n > CFS_HEAT_MAX_CLASSES)
		return -EPROTO;
	for (unsigned i = 0; i < n; i++) {
		const unsigned char *e = b + 24 + 24 * i;
		uint64_t ns = cfs_le_get(e + 8, 8), at = cfs_le_get(e + 16, 8);
		if (at < CFS_HEAT_HEADER || (at & 3) || at > len || ns > (len - at) / 4)
			return -EPROTO;
		h->cls[i].log2 = (uint32_t)cfs_le_get(e, 4);
		h->cls[i].nslots = ns;
		h->cls[i].c = (uint32_t *)(void *)((unsigned char *)map + at);
	}
	h->n = n;
	h->epoch = cfs_le_get(b + 16, 8);
	h->map = (unsigned char *)map;
	h->len = len;
	return 0;
}

uint32_t cfs_heat_count(const struct cfs_heat *h, unsigned log2, uint64_t slot)
{
	for (unsigned i = 0; i < h->n; i++)
		if (h->cls[i].log2 == log2)
			return cfs_heat_get(h, i, slot);
	return 0;
}
