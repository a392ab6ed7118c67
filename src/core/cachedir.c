/* cachedir: trusting a cache folder (see cachedir.h). */
#define _GNU_SOURCE
#include "cachedir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include "format.h"
#include "names.h"
#include "hash.h"

static const char tag_text[] = "Signature: 8a477f597d28d172789f06886806bc55\n"
			       "# This file is a cache directory tag created by colabfs.\n"
			       "# For information about cache directory tags, see:\n"
			       "#\thttps://bford.info/cachedir/\n";

/* mkdir -p: the folders it creates get mode 0700. */
static int mkdirs(const char *path)
{
	char p[PATH_MAX];
	if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0700) != 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return mkdir(p, 0700) != 0 && errno != EEXIST ? -errno : 0;
}

/* 1 if the folder holds our tag, 0 if not. */
static int has_tag(int dfd)
{
	char buf[64] = "";
	int fd = openat(dfd, CFS_CACHEDIR_TAG, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && strncmp(buf, tag_text, 43) == 0;
}

/* 1 if the folder has nothing in it, 0 if it has, -errno. */
static int is_empty(int dfd)
{
	int fd = dup(dfd);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	struct dirent *e;
	int empty = 1;
	while (empty && (e = readdir(d)))
		empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
	closedir(d);
	return empty;
}

static int write_tag(int dfd)
{
	int fd = openat(dfd, CFS_CACHEDIR_TAG, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			0600);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, tag_text, sizeof(tag_text) - 1);
	close(fd);
	return n == (ssize_t)sizeof(tag_text) - 1 ? 0 : -EIO;
}

/* The rules of cachedir.h; change: create, narrow and tag (prepare), else
 * only look (check). */
static int trust(const char *path, int own_base, int change, char *why, size_t wcap)
{
	struct stat st;
	int rc;
	if (lstat(path, &st) != 0) {
		rc = errno == ENOENT && change ? mkdirs(path) : -errno;
		if (!rc && lstat(path, &st) != 0)
			rc = -errno;
		if (rc) {
			snprintf(why, wcap, "cannot create cache folder %s: %s", path, strerror(-rc));
			return rc;
		}
	}
	if (S_ISLNK(st.st_mode)) {
		snprintf(why, wcap, "cache folder %s is a symbolic link: give the folder it points to",
			 path);
		return -ELOOP;
	}
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || fstat(dfd, &st) != 0) {
		rc = -errno;
		snprintf(why, wcap, "cache folder %s: %s", path,
			 rc == -ENOTDIR ? "not a folder" : strerror(-rc));
		if (dfd >= 0)
			close(dfd);
		return rc;
	}
	rc = 0;
	if (st.st_uid != geteuid()) {
		snprintf(why, wcap, "cache folder %s belongs to uid %u, not to you (uid %u): give a "
			 "folder of your own",
			 path, (unsigned)st.st_uid, (unsigned)geteuid());
		rc = -EPERM;
	} else if (own_base && (st.st_mode & 077) && change && fchmod(dfd, 0700) != 0) {
		rc = -errno;
		snprintf(why, wcap, "cannot chmod 0700 %s: %s", path, strerror(errno));
	} else if (!own_base && (st.st_mode & 022)) {
		snprintf(why, wcap, "cache folder %s can be written by other users (mode %03o): give a "
			 "folder only you can write (a new one, or chmod go-w)",
			 path, (unsigned)(st.st_mode & 0777));
		rc = -EPERM;
	} else if (own_base && !has_tag(dfd)) {
		if (change)
			(void)write_tag(dfd); /* best effort: a tag for backup tools */
	} else if (!own_base && !has_tag(dfd)) {
		int empty = is_empty(dfd);
		int old = faccessat(dfd, CFS_FMT_INDEX_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
		if (empty < 0) {
			rc = empty;
			snprintf(why, wcap, "cache folder %s: %s", path, strerror(-rc));
		} else if (!empty && !old) {
			snprintf(why, wcap, "cache folder %s is not empty and not a colabfs cache folder "
				 "(it has no %s of colabfs): give a new or empty folder",
				 path, CFS_CACHEDIR_TAG);
			rc = -ENOTEMPTY;
		} else if (change && (rc = write_tag(dfd)) != 0) {
			snprintf(why, wcap, "cannot write %s/%s: %s", path, CFS_CACHEDIR_TAG,
				 strerror(-rc));
		}
	}
	close(dfd);
	return rc;
}

int cfs_cachedir_prepare(const char *path, int own_base, char *why, size_t wcap)
{
	return trust(path, own_base, 1, why, wcap);
}

int cfs_cachedir_check(const char *path, int own_base, char *why, size_t wcap)
{
	return trust(path, own_base, 0, why, wcap);
}

int cfs_cachedir_default(const char *mp, char *base, size_t bcap, char **dir)
{
	char name[160];
	*dir = NULL;
	if ((size_t)snprintf(base, bcap, "/dev/shm/colabfs-%u", (unsigned)getuid()) >= bcap)
		return -ENAMETOOLONG;
	size_t o = 0;
	for (const char *p = mp + 1; *p && o < 100; p++)
		name[o++] = (*p == '/' || *p == '.') ? '-' : *p;
	snprintf(name + o, sizeof(name) - o, "%s%.8llx", o ? "." : "root.",
		 (unsigned long long)(cfs_hash_fnv1a(mp) >> 32));
	return asprintf(dir, "%s/%s", base, name) < 0 ? -ENOMEM : 0;
}
