/* ctl: talking to a running mount from the command line.
 *
 * A mount answers extended attributes on its root (user.colabfs.*), so any
 * path identifies its daemon without sockets or pid files: its pid (so
 * `colabfs umount` can wait until it has really gone), its stats, and
 * evictions.  The mount is read-only, so setxattr cannot reach the daemon:
 * an eviction is a getxattr whose reply reports what was freed. */
#ifndef CFS_CTL_H
#define CFS_CTL_H

#include <stddef.h>
#include <sys/types.h>

#define CFS_XATTR_PID "user.colabfs.pid"
#define CFS_XATTR_STATS "user.colabfs.stats"
#define CFS_XATTR_EVICT "user.colabfs.evict"       /* the file or folder at the path */
#define CFS_XATTR_EVICT_TO "user.colabfs.evict.to." /* + a byte count: LRU down to it */
#define CFS_XATTR_WARM "user.colabfs.warm."         /* + OFFSET.LENGTH of a file */

/* The pid of the daemon serving the mount at path.  Returns 0, -ENOTCONN or
 * -ECONNABORTED (a dead daemon left its mount behind), -ENODATA (not a colabfs mount), or
 * another -errno. */
int cfs_ctl_pid(const char *path, pid_t *pid);

/* Unmounts mp and waits up to timeout_ms for its daemon to exit.  A mount
 * whose daemon died is detached.  Returns 0 or -errno (-EBUSY: files are
 * open; -ETIMEDOUT: the daemon did not exit), with a reason in why. */
int cfs_ctl_umount(const char *mp, long timeout_ms, char *why, size_t wcap);

/* Reads a control attribute of path into a malloc'd NUL-terminated string.
 * Returns 0 or -errno (-ENODATA/-ENOTSUP: not on a colabfs mount). */
int cfs_ctl_get(const char *path, const char *name, char **out);

#endif
