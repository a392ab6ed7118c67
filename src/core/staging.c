/* staging: the staging folder (see staging.h). */
#define _GNU_SOURCE
#include "staging.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"

struct cfs_staging {
	int dfd;
	char *dir;
};

int cfs_staging_open(const char *dir, struct cfs_staging **out)
{
	*out = NULL;
	struct cfs_staging *s = calloc(1, sizeof(*s));
	if (!s || !(s->dir = strdup(dir))) {
		free(s);
		return -ENOMEM;
	}
	s->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s->dfd < 0) {
		int e = errno;
		free(s->dir);
		free(s);
		return -e;
	}
	*out = s;
	return 0;
}

void cfs_staging_close(struct cfs_staging *s)
{
	if (!s)
		return;
	close(s->dfd);
	free(s->dir);
	free(s);
}

const char *cfs_staging_dir(const struct cfs_staging *s)
{
	return s->dir;
}

static int stage_name(const char *id, char *out, size_t cap)
{
	if (!id[0] || strchr(id, '/') || id[0] == '.')
		return -EINVAL;
	return (size_t)snprintf(out, cap, "w-%s", id) < cap ? 0 : -ENAMETOOLONG;
}

int cfs_staging_file(struct cfs_staging *s, const char *id, int create, int trunc, int *fd)
{
	char name[CFS_ID_MAX + 4];
	int rc = stage_name(id, name, sizeof(name));
	if (rc)
		return rc;
	int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0) | (trunc ? O_TRUNC : 0);
	*fd = openat(s->dfd, name, flags, 0600);
	return *fd < 0 ? -errno : 0;
}

int cfs_staging_remove(struct cfs_staging *s, const char *id)
{
	char name[CFS_ID_MAX + 4];
	int rc = stage_name(id, name, sizeof(name));
	if (rc)
		return rc;
	return unlinkat(s->dfd, name, 0) ? -errno : 0;
}

int cfs_staging_rename(struct cfs_staging *s, const char *from, const char *to)
{
	char a[CFS_ID_MAX + 4], b[CFS_ID_MAX + 4];
	int rc = stage_name(from, a, sizeof(a));
	if (!rc)
		rc = stage_name(to, b, sizeof(b));
	if (rc)
		return rc;
	return renameat(s->dfd, a, s->dfd, b) ? -errno : 0;
}

int cfs_staging_copy(int from, int to, int64_t off, int64_t len)
{
	int64_t done = 0;
	while (done < len) { /* in the kernel where it can */
		loff_t a = off + done, b = a;
		size_t n = len - done > (1 << 30) ? (size_t)1 << 30 : (size_t)(len - done);
		ssize_t got = copy_file_range(from, &a, to, &b, n, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
				errno == EOPNOTSUPP))
			break;
		if (got < 0)
			return -errno;
		if (got == 0)
			return -ESTALE; /* shorter than said */
		done += got;
	}
	char *buf = done < len ? malloc(1u << 20) : NULL;
	if (done < len && !buf)
		return -ENOMEM;
	int rc = 0;
	while (!rc && done < len) {
		size_t n = len - done > (1 << 20) ? (size_t)1 << 20 : (size_t)(len - done), got = 0;
		rc = cfs_staging_pread(from, off + done, buf, n, &got);
		if (!rc && got != n)
			rc = -ESTALE;
		if (!rc)
			rc = cfs_staging_pwrite(to, off + done, buf, n);
		done += (int64_t)n;
	}
	free(buf);
	return rc;
}

int cfs_staging_pread(int fd, int64_t off, void *buf, size_t len, size_t *got)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + (int64_t)done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*got = done;
	return 0;
}

int cfs_staging_pwrite(int fd, int64_t off, const void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done,
				   (off_t)(off + (int64_t)done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}
