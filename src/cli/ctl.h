/* ctl: talking to a running mount from the command line.
 *
 * A mount answers extended attributes on its root (user.colabfs.*), so any
 * path identifies its daemon without sockets or pid files: its pid (so
 * `colabfs umount` can wait until it has really gone), its stats,
 * evictions, warms and syncs.  Every command is a getxattr whose reply
 * reports what it did (an eviction what was freed, a sync what is still
 * pending), so it works on a read-only mount as well.  Evict, warm and sync
 * are for the mount's owner and root only (ctlname.h). */
#ifndef CFS_CTL_H
#define CFS_CTL_H

#include <stddef.h>
#include <sys/types.h>

#include "ctlname.h" /* the attributes, and who may use which */

/* The pid of the daemon serving the mount at path.  Returns 0, -ENOTCONN or
 * -ECONNABORTED (a dead daemon left its mount behind), -ENODATA (not a colabfs mount), or
 * another -errno. */
int cfs_ctl_pid(const char *path, pid_t *pid);

/* Unmounts mp and waits until timeout_ms from the call for its daemon to
 * exit; no step waits on the daemon longer (its pid: ctlsock.h, else a
 * child process given up after 2 s; a mount busy with files being closed:
 * tried again for up to 3 s).  A mount whose daemon died is detached.
 * Returns 0 or -errno (-EBUSY: files are open, nothing unmounted, why names
 * the processes; -ETIMEDOUT: the daemon did not answer, nothing unmounted,
 * or it did not exit after the unmount), with a reason in why. */
int cfs_ctl_umount(const char *mp, long timeout_ms, char *why, size_t wcap);
#define CFS_UMOUNT_MS 9000 /* `colabfs umount`'s: it returns within 10 s */

/* The stats JSON of the mount path lies in (user.colabfs.stats's), asked of
 * its control socket (ctlsock.h: no FUSE request, so it does not wait
 * behind the mount's work), else of the attribute.  As cfs_ctl_get. */
int cfs_ctl_stats(const char *path, char **out);

/* Reads a control attribute of path into a malloc'd NUL-terminated string.
 * Returns 0 or -errno (-ENODATA/-ENOTSUP: not on a colabfs mount). */
int cfs_ctl_get(const char *path, const char *name, char **out);

/* What a failed control call means, for `colabfs stats/evict/warm` to
 * print after "PATH: ": err is a positive errno from getxattr.  ENODATA and
 * ENOTSUP: "not on a colabfs mount"; EPERM: who may evict and warm.
 * Never NULL; the string is static. */
const char *cfs_ctl_strerror(int err);

#endif
