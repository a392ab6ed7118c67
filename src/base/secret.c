/* secret: reading a small secret file (see secret.h). */
#include "secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "log.h"

/* Whose and how open st is: NULL when private enough, else why not. */
static const char *exposure(const struct stat *st)
{
	if (st->st_mode & 0066)
		return (st->st_mode & 0044) ? "readable by other users" : "writable by other users";
	if (st->st_uid != geteuid() && st->st_uid != 0)
		return "owned by another user";
	return NULL;
}

int cfs_secret_read(const char *path, const char *what, size_t max, unsigned flags, char **out,
		    size_t *len, char *why, size_t wcap)
{
	*out = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		snprintf(why, wcap, "cannot open %s %s: %s", what, path, strerror(errno));
		return CFS_E_CONFIG;
	}
	struct stat st;
	const char *open_to = NULL;
	int rc = 0;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		snprintf(why, wcap, "%s %s is not a regular file", what, path);
		rc = CFS_E_CONFIG;
	} else if ((uint64_t)st.st_size > max) {
		snprintf(why, wcap, "%s %s is too large (%lld bytes, at most %zu)", what, path,
			 (long long)st.st_size, max);
		rc = CFS_E_CONFIG;
	} else if ((open_to = exposure(&st)) != NULL) {
		if (flags & CFS_SECRET_PRIVATE) {
			snprintf(why, wcap, "%s %s is %s (mode %03o, owner uid %u): it holds a "
				 "secret; chmod 600 it (and chown it to this user)", what, path,
				 open_to, (unsigned)(st.st_mode & 0777), (unsigned)st.st_uid);
			rc = CFS_E_CONFIG;
		} else {
			CFS_WARN("%s %s is %s (mode %03o); chmod 600 it", what, path, open_to,
				 (unsigned)(st.st_mode & 0777));
		}
	}
	char *buf = rc ? NULL : malloc((size_t)st.st_size + 1);
	if (!rc && !buf)
		rc = -ENOMEM;
	ssize_t got = 0;
	while (!rc && got < st.st_size) { /* a short read is not the end of a regular file */
		ssize_t n = read(fd, buf + got, (size_t)(st.st_size - got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(why, wcap, "cannot read %s %s: %s", what, path,
				 n < 0 ? strerror(errno) : "it became shorter while read");
			rc = CFS_E_CONFIG;
		}
		got += n > 0 ? n : 0;
	}
	close(fd);
	if (rc) {
		if (buf) {
			explicit_bzero(buf, (size_t)st.st_size + 1);
			free(buf);
		}
		return rc;
	}
	buf[got] = '\0';
	*out = buf;
	*len = (size_t)got;
	return 0;
}
