/* ctl: command-line side of the control plane (see ctl.h). */
#define _GNU_SOURCE
#include "ctl.h"
#include "clock.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "ctlsock.h"
#include "fdwait.h"
#include "mnt.h"

#define SOCK_REPLY_MAX (1u << 20)
#define UMOUNT_PID_MS 2000  /* the daemon says its pid within this, or is not asked again */
#define UMOUNT_BUSY_MS 3000 /* files still being closed: umount tried again this long */

extern char **environ;

/* Connects to the control socket of the mount path lies in (ctlsock.h),
 * checking that it is a colabfs mount's and that root or the user who
 * mounted it serves it.  The socket (nonblocking), or -errno. */
static int sock_open(const char *path)
{
	struct cfs_mnt_entry *e = malloc(sizeof(*e));
	int rc = e ? cfs_mnt_of(path, e) : -ENOMEM;
	if (!rc && strcmp(e->fstype, "fuse.colabfs") != 0)
		rc = -ENOENT;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = rc ? 0 : snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, CFS_CTLSOCK_FMT,
				  e->major, e->minor);
	long owner = e && !rc ? e->user_id : -1;
	free(e);
	if (rc)
		return rc;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
							 1 + (size_t)n)) != 0)
		rc = -errno;
	else if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
		rc = -errno;
	else if (cr.uid != 0 && (long)cr.uid != owner)
		rc = -EPERM; /* not the mount's daemon: someone took the name */
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

/* Sends req ("pid", "stats") to the control socket of the mount path lies
 * in and reads the whole answer into *out (malloc'd, NUL-terminated).  0 or
 * -errno: no such socket, not answered in time, refused or empty. */
static int sock_ask(const char *path, const char *req, char **out)
{
	int fd = sock_open(path);
	if (fd < 0)
		return fd;
	int64_t deadline = cfs_clock_mono_ms() + CFS_CTLSOCK_IO_MS;
	char line[32];
	int n = snprintf(line, sizeof(line), "%s\n", req);
	struct cfs_buf b = { .max = SOCK_REPLY_MAX };
	int rc = send(fd, line, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -EIO;
	while (!rc) {
		char chunk[16384];
		ssize_t r = recv(fd, chunk, sizeof(chunk), 0);
		if (r > 0)
			rc = cfs_buf_append(&b, chunk, (size_t)r);
		else if (r == 0)
			break;
		else if (errno == EAGAIN)
			rc = cfs_fd_wait(fd, POLLIN, deadline);
		else if (errno != EINTR)
			rc = -errno;
	}
	close(fd);
	if (!rc && !b.len)
		rc = -ENODATA; /* refused, or a request it does not know */
	if (rc) {
		cfs_buf_cleanup(&b);
		return rc;
	}
	*out = cfs_buf_steal(&b, NULL);
	return 0;
}

static int parse_pid(const char *buf, pid_t *pid)
{
	char *end;
	long v = strtol(buf, &end, 10);
	if (end == buf || *end || v <= 0)
		return -ENODATA;
	*pid = (pid_t)v;
	return 0;
}

int cfs_ctl_pid(const char *path, pid_t *pid)
{
	char buf[32];
	ssize_t n = getxattr(path, CFS_XATTR_PID, buf, sizeof(buf) - 1);
	if (n < 0)
		return errno == ENOTSUP ? -ENODATA : -errno;
	buf[n] = '\0';
	return parse_pid(buf, pid);
}

int cfs_ctl_stats(const char *path, char **out)
{
	return sock_ask(path, "stats", out) == 0 ? 0 : cfs_ctl_get(path, CFS_XATTR_STATS, out);
}

/* 1 if pid is gone or a zombie (exited, not yet reaped by its new parent). */
static int exited(pid_t pid)
{
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return 1;
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static int run_fusermount(const char *mp, int lazy)
{
	char *argv[] = { "fusermount3", lazy ? "-uz" : "-u", (char *)mp, NULL };
	pid_t pid;
	if (posix_spawnp(&pid, "fusermount3", NULL, NULL, argv, environ) != 0)
		return -ENOENT;
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EBUSY;
}

static int do_umount(const char *mp, int lazy)
{
	if (geteuid() == 0)
		return umount2(mp, lazy ? MNT_DETACH : 0) == 0 ? 0 : -errno;
	return run_fusermount(mp, lazy);
}

static void nap_ms(long ms)
{
	struct timespec d = { ms / 1000, (ms % 1000) * 1000000 };
	nanosleep(&d, NULL);
}

/* 1 when /proc/PID/NAME links to mp or into it. */
static int links_into(const char *pid, const char *name, const char *mp)
{
	char at[600], link[PATH_MAX];
	snprintf(at, sizeof(at), "/proc/%s/%s", pid, name);
	ssize_t l = readlink(at, link, sizeof(link) - 1);
	if (l <= 0)
		return 0;
	link[l] = '\0';
	size_t ml = strlen(mp);
	return strncmp(link, mp, ml) == 0 && (link[ml] == '\0' || link[ml] == '/');
}

/* 1 when process pid has a file, folder or its current folder in mp. */
static int holds(const char *pid, const char *mp)
{
	char at[300], name[300];
	if (links_into(pid, "cwd", mp))
		return 1;
	snprintf(at, sizeof(at), "/proc/%s/fd", pid);
	DIR *d = opendir(at);
	int found = 0;
	for (struct dirent *e; d && !found && (e = readdir(d));) {
		snprintf(name, sizeof(name), "fd/%s", e->d_name);
		found = e->d_name[0] != '.' && links_into(pid, name, mp);
	}
	if (d)
		closedir(d);
	return found;
}

/* "pid N (comm), ..." of the processes that hold something in mp (those
 * /proc lets us see), or "" when none is found. */
static void holders(const char *mp, char *out, size_t cap)
{
	size_t n = 0;
	out[0] = '\0';
	DIR *d = opendir("/proc");
	for (struct dirent *e; d && (e = readdir(d)) && n + 64 < cap;) {
		char at[300], comm[64] = "?";
		if (e->d_name[0] < '1' || e->d_name[0] > '9' || strtol(e->d_name, NULL, 10) == (long)getpid() ||
		    !holds(e->d_name, mp))
			continue;
		snprintf(at, sizeof(at), "/proc/%s/comm", e->d_name);
		FILE *f = fopen(at, "re");
		if (f && fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		if (f)
			fclose(f);
		n += (size_t)snprintf(out + n, cap - n, "%spid %s (%s)", n ? ", " : "", e->d_name, comm);
	}
	if (d)
		closedir(d);
}

/* The pid of mp's daemon, asked of its control socket, else of the mount
 * from a child process that is given up after UMOUNT_PID_MS (mnt.h). */
static int daemon_pid(const char *mp, pid_t *pid)
{
	char *txt = NULL;
	if (sock_ask(mp, "pid", &txt) == 0) {
		int rc = parse_pid(txt, pid);
		free(txt);
		if (!rc)
			return 0;
	}
	return cfs_mnt_probe(mp, 1, pid, UMOUNT_PID_MS);
}

int cfs_ctl_umount(const char *mp, long timeout_ms, char *why, size_t wcap)
{
	int64_t deadline = cfs_clock_mono_ms() + timeout_ms;
	pid_t pid = 0;
	int rc = daemon_pid(mp, &pid);
	/* a daemon that died leaves ENOTCONN, or ECONNABORTED while the kernel
	 * is still aborting its requests */
	if (rc == -ENOTCONN || rc == -ECONNABORTED) {
		rc = do_umount(mp, 1);
		if (rc)
			snprintf(why, wcap, "%s: daemon is gone and detaching failed: %s", mp,
				 strerror(-rc));
		return rc;
	}
	if (rc == -ETIMEDOUT) {
		snprintf(why, wcap, "%s: its daemon does not answer (nothing in %d s), and it has "
			 "no control socket: not unmounted; `umount -l %s` detaches it", mp,
			 UMOUNT_PID_MS / 1000, mp);
		return rc;
	}
	if (rc) {
		snprintf(why, wcap, "%s is not a colabfs mount (%s)", mp, strerror(-rc));
		return rc;
	}
	/* files closed a moment ago (a reader ending) can keep it busy briefly */
	int64_t busy_until = cfs_clock_mono_ms() + UMOUNT_BUSY_MS;
	while ((rc = do_umount(mp, 0)) == -EBUSY && cfs_clock_mono_ms() < busy_until)
		nap_ms(100);
	if (rc == -EBUSY) {
		char who[400];
		holders(mp, who, sizeof(who));
		snprintf(why, wcap, "cannot unmount %s: files or folders in it are still in use%s%s%s; "
			 "nothing was unmounted (close them and try again; `umount -l %s` detaches "
			 "it now and its daemon ends once they are closed)",
			 mp, who[0] ? " (" : "", who, who[0] ? ")" : "", mp);
		return rc;
	}
	if (rc) {
		snprintf(why, wcap, "cannot unmount %s: %s", mp, strerror(-rc));
		return rc;
	}
	/* Wait for the daemon to finish its own cleanup and exit. */
	for (;;) {
		if (exited(pid))
			return 0;
		if (cfs_clock_mono_ms() >= deadline) {
			snprintf(why, wcap, "unmounted %s, but its daemon (pid %d) has not exited "
				 "yet (see its log); what was staged stays journaled in the cache "
				 "folder", mp, (int)pid);
			return -ETIMEDOUT;
		}
		nap_ms(20);
	}
}

int cfs_ctl_get(const char *path, const char *name, char **out)
{
	size_t cap = 64 * 1024;
	char *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	ssize_t n = getxattr(path, name, buf, cap - 1);
	if (n < 0) {
		int e = errno;
		free(buf);
		return -e;
	}
	buf[n] = '\0';
	*out = buf;
	return 0;
}

const char *cfs_ctl_strerror(int err)
{
	switch (err) {
	case ENODATA:
	case ENOTSUP:
		return "not on a colabfs mount";
	case EPERM:
		return "not allowed: only the user who mounted it, and root, may evict or warm";
	default:
		return strerror(err);
	}
}
