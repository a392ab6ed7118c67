/* mnt: mountpoint checks (see mnt.h). */
#define _GNU_SOURCE
#include "mnt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl.h"

#define PROBE_MS 5000 /* a live mount answers a getxattr at once */

/* Copies a mountinfo field up to the next space, undoing \NNN escapes. */
static const char *field(const char *p, char *out, size_t cap)
{
	size_t o = 0;
	while (*p == ' ')
		p++;
	for (; *p && *p != ' ' && *p != '\n'; p++) {
		char c = *p;
		if (c == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			c = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		}
		if (o + 1 < cap)
			out[o++] = c;
	}
	if (cap)
		out[o] = '\0';
	return p;
}

/* One mountinfo line (up to nl, NULL: the end) into e.  1 when it has the
 * fields mnt.h names. */
static int parse_line(const char *line, const char *nl, struct cfs_mnt_entry *e)
{
	char tmp[CFS_MNT_PATH_MAX];
	char opts[512];
	/* id parent major:minor root MOUNTPOINT options [optional...] - type source super */
	const char *p = field(field(line, tmp, sizeof(tmp)), tmp, sizeof(tmp));
	p = field(p, tmp, sizeof(tmp));
	if (sscanf(tmp, "%u:%u", &e->major, &e->minor) != 2)
		return 0;
	p = field(field(p, tmp, sizeof(tmp)), e->point, sizeof(e->point));
	const char *dash = strstr(p, " - ");
	if (!dash || (nl && dash > nl))
		return 0;
	p = field(field(dash + 3, e->fstype, sizeof(e->fstype)), e->source, sizeof(e->source));
	field(p, opts, sizeof(opts));
	const char *u = strstr(opts, "user_id=");
	e->user_id = u && (u == opts || u[-1] == ',') ? strtol(u + 8, NULL, 10) : -1;
	return 1;
}

int cfs_mnt_find(const char *mi, const char *mp, struct cfs_mnt_entry *e)
{
	struct cfs_mnt_entry x;
	int found = 0;
	for (const char *line = mi; line && *line;) {
		const char *nl = strchr(line, '\n');
		if (parse_line(line, nl, &x) && strcmp(x.point, mp) == 0) {
			*e = x;
			found = 1;
		}
		line = nl ? nl + 1 : NULL;
	}
	return found;
}

int cfs_mnt_containing(const char *mi, const char *path, struct cfs_mnt_entry *e)
{
	struct cfs_mnt_entry x;
	size_t best = 0;
	int found = 0;
	for (const char *line = mi; line && *line;) {
		const char *nl = strchr(line, '\n');
		if (parse_line(line, nl, &x) && cfs_mnt_under(x.point, path) &&
		    strlen(x.point) >= best) {
			best = strlen(x.point);
			*e = x;
			found = 1;
		}
		line = nl ? nl + 1 : NULL;
	}
	return found;
}

int cfs_mnt_lexical(const char *cwd, const char *path, char *out, size_t cap)
{
	char buf[2 * CFS_MNT_PATH_MAX];
	int n = path[0] == '/' ? snprintf(buf, sizeof(buf), "%s", path)
			       : snprintf(buf, sizeof(buf), "%s/%s", cwd, path);
	if (n < 0 || (size_t)n >= sizeof(buf) || cap < 2)
		return -ENAMETOOLONG;
	size_t o = 0;
	for (char *p = buf; *p;) {
		while (*p == '/')
			p++;
		char *s = p;
		while (*p && *p != '/')
			p++;
		size_t len = (size_t)(p - s);
		if (len == 0 || (len == 1 && s[0] == '.'))
			continue;
		if (len == 2 && s[0] == '.' && s[1] == '.') {
			while (o > 0 && out[--o] != '/')
				;
			continue;
		}
		if (o + 1 + len + 1 > cap)
			return -ENAMETOOLONG;
		out[o++] = '/';
		memcpy(out + o, s, len);
		o += len;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return 0;
}

int cfs_mnt_under(const char *dir, const char *path)
{
	size_t n = strlen(dir);
	if (n == 1 && dir[0] == '/')
		return path[0] == '/';
	return strncmp(dir, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int cfs_mnt_abs(const char *path, char *out, size_t cap)
{
	char cwd[PATH_MAX], lex[CFS_MNT_PATH_MAX], probe[CFS_MNT_PATH_MAX], real[PATH_MAX] = "/";
	if (path[0] != '/' && !getcwd(cwd, sizeof(cwd)))
		return -errno;
	int rc = cfs_mnt_lexical(path[0] == '/' ? "/" : cwd, path, lex, sizeof(lex));
	if (rc)
		return rc;
	/* the longest proper ancestor that exists, its links resolved; the
	 * rest as written (not there yet, or a mountpoint not to look into) */
	size_t cut = strlen(lex);
	for (;;) {
		while (cut > 0 && lex[cut - 1] != '/')
			cut--;
		cut = cut > 1 ? cut - 1 : 0;
		if (cut == 0)
			break;
		memcpy(probe, lex, cut);
		probe[cut] = '\0';
		if (realpath(probe, real))
			break;
	}
	int n = snprintf(out, cap, "%s%s", cut && strcmp(real, "/") ? real : "", lex + cut);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int cfs_mnt_abs_dup(char **path)
{
	char abs[CFS_MNT_PATH_MAX];
	if (!*path)
		return 0;
	int rc = cfs_mnt_abs(*path, abs, sizeof(abs));
	char *d = rc ? NULL : strdup(abs);
	if (rc || !d)
		return rc ? rc : -ENOMEM;
	free(*path);
	*path = d;
	return 0;
}

int cfs_mnt_probe(const char *mp, int colabfs, pid_t *pid, int timeout_ms)
{
	int fds[2];
	*pid = 0;
	if (pipe2(fds, O_CLOEXEC) != 0)
		return -errno;
	pid_t child = fork();
	if (child < 0) {
		close(fds[0]);
		close(fds[1]);
		return -errno;
	}
	if (child == 0) {
		/* a request the daemon must answer: the kernel answers a stat
		 * from its attribute cache even after the connection died, and
		 * colabfs may list a folder before it answers an open */
		pid_t p = 0;
		int res[2] = { 0, 0 };
		if (colabfs && (res[0] = cfs_ctl_pid(mp, &p)) == 0)
			res[1] = (int)p;
		else if (colabfs && res[0] == -ENODATA)
			res[0] = 0; /* an older colabfs, alive */
		else if (!colabfs && open(mp, O_RDONLY | O_DIRECTORY | O_CLOEXEC) < 0)
			res[0] = -errno;
		if (write(fds[1], res, sizeof(res)) != (ssize_t)sizeof(res))
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	int res[2] = { -ETIMEDOUT, 0 };
	struct pollfd pf = { .fd = fds[0], .events = POLLIN };
	if (poll(&pf, 1, timeout_ms) == 1 && read(fds[0], res, sizeof(res)) != (ssize_t)sizeof(res))
		res[0] = -EIO;
	close(fds[0]);
	if (res[0] == -ETIMEDOUT) {
		/* a request the daemon has read and not answered holds its
		 * caller past SIGKILL (uninterruptible): not waited for */
		kill(child, SIGKILL);
		for (int i = 0; i < 20 && waitpid(child, NULL, WNOHANG) == 0; i++)
			usleep(5000);
	} else {
		waitpid(child, NULL, 0);
	}
	if (res[0] == -ECONNABORTED)
		res[0] = -ENOTCONN;
	*pid = (pid_t)res[1];
	return res[0];
}

static int read_mountinfo(char **out)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	while (buf) {
		len += fread(buf + len, 1, cap - 1 - len, f);
		if (len < cap - 1)
			break;
		char *nb = realloc(buf, cap * 2);
		if (!nb) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = nb;
		cap *= 2;
	}
	fclose(f);
	if (!buf)
		return -ENOMEM;
	buf[len] = '\0';
	*out = buf;
	return 0;
}

int cfs_mnt_dev(const char *mp, unsigned *major, unsigned *minor)
{
	char *mi = NULL;
	struct cfs_mnt_entry e;
	int rc = read_mountinfo(&mi);
	if (rc)
		return rc;
	int found = cfs_mnt_find(mi, mp, &e) && strcmp(e.fstype, "fuse.colabfs") == 0;
	free(mi);
	if (!found)
		return -ENOENT;
	*major = e.major;
	*minor = e.minor;
	return 0;
}

int cfs_mnt_of(const char *path, struct cfs_mnt_entry *e)
{
	char cwd[PATH_MAX], lex[CFS_MNT_PATH_MAX], *mi = NULL;
	if (path[0] != '/' && !getcwd(cwd, sizeof(cwd)))
		return -errno;
	int rc = cfs_mnt_lexical(path[0] == '/' ? "/" : cwd, path, lex, sizeof(lex));
	if (!rc)
		rc = read_mountinfo(&mi);
	if (rc)
		return rc;
	int found = cfs_mnt_containing(mi, lex, e);
	free(mi);
	return found ? 0 : -ENOENT;
}

int cfs_mnt_check(const char *mp, int force, char *why, size_t wcap)
{
	char *mi = NULL;
	struct cfs_mnt_entry e;
	int rc = read_mountinfo(&mi);
	if (rc) {
		snprintf(why, wcap, "cannot read /proc/self/mountinfo: %s", strerror(-rc));
		return rc;
	}
	int found = cfs_mnt_find(mi, mp, &e);
	free(mi);
	if (!found)
		return 0;
	int ours = strcmp(e.fstype, "fuse.colabfs") == 0;
	pid_t pid;
	rc = cfs_mnt_probe(mp, ours, &pid, PROBE_MS);
	if (rc == 0 && !ours)
		return 0; /* another file system: mounting over it is the user's call */
	if (rc == 0) {
		snprintf(why, wcap, "%s is already a colabfs mount (daemon pid %d); unmount it first: "
			 "colabfs umount %s", mp, (int)pid, mp);
		return -EBUSY;
	}
	if (rc == -ETIMEDOUT) {
		snprintf(why, wcap, "%s is a %s mount that does not answer; unmount it first: %s %s",
			 mp, e.fstype, ours ? "colabfs umount" : "umount -l", mp);
		return -EBUSY;
	}
	if (rc != -ENOTCONN) {
		snprintf(why, wcap, "mountpoint %s: %s", mp, strerror(-rc));
		return rc;
	}
	if (force) {
		rc = cfs_ctl_umount(mp, 0, why, wcap);
		return rc == -ETIMEDOUT ? 0 : rc;
	}
	snprintf(why, wcap, "%s is a dead %s mount (its daemon is gone: %s); unmount it with "
		 "%s %s, or mount with --force to do that first",
		 mp, e.fstype, strerror(ENOTCONN), ours ? "colabfs umount" : "umount", mp);
	return -ENOTCONN;
}
