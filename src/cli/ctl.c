/* ctl: command-line side of the control plane (see ctl.h). */
#define _GNU_SOURCE
#include "ctl.h"
#include "clock.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int cfs_ctl_pid(const char *path, pid_t *pid)
{
	char buf[32];
	ssize_t n = getxattr(path, CFS_XATTR_PID, buf, sizeof(buf) - 1);
	if (n < 0)
		return errno == ENOTSUP ? -ENODATA : -errno;
	buf[n] = '\0';
	char *end;
	long v = strtol(buf, &end, 10);
	if (end == buf || *end || v <= 0)
		return -ENODATA;
	*pid = (pid_t)v;
	return 0;
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

int cfs_ctl_umount(const char *mp, long timeout_ms, char *why, size_t wcap)
{
	pid_t pid = 0;
	int rc = cfs_ctl_pid(mp, &pid);
	/* a daemon that died leaves ENOTCONN, or ECONNABORTED while the kernel
	 * is still aborting its requests */
	if (rc == -ENOTCONN || rc == -ECONNABORTED) {
		rc = do_umount(mp, 1);
		if (rc)
			snprintf(why, wcap, "%s: daemon is gone and detaching failed: %s", mp,
				 strerror(-rc));
		return rc;
	}
	if (rc) {
		snprintf(why, wcap, "%s is not a colabfs mount (%s)", mp, strerror(-rc));
		return rc;
	}
	rc = do_umount(mp, 0);
	if (rc) {
		snprintf(why, wcap, "cannot unmount %s: %s", mp,
			 rc == -EBUSY ? "files or folders in it are still in use" : strerror(-rc));
		return rc;
	}
	/* Wait for the daemon to finish its own cleanup and exit. */
	int64_t start = cfs_clock_mono_ms();
	for (;;) {
		if (exited(pid))
			return 0;
		long ms = (long)(cfs_clock_mono_ms() - start);
		if (ms >= timeout_ms) {
			snprintf(why, wcap, "unmounted %s, but daemon %d has not exited after %ld ms",
				 mp, (int)pid, ms);
			return -ETIMEDOUT;
		}
		struct timespec d = { 0, 20 * 1000000 };
		nanosleep(&d, NULL);
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
