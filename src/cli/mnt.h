/* mnt: the mountpoint, checked before anything is mounted on it.
 *
 * `colabfs mount X` resolves X once (without looking inside X itself, which
 * may be a dead mount that answers ENOTCONN to every stat), then reads
 * /proc/self/mountinfo for what is mounted at X already:
 *   - a live colabfs mount: refused, naming the daemon's pid (stacking a
 *     second one hides the first and its cache);
 *   - a dead mount (its daemon gone, ENOTCONN): refused with the command
 *     that clears it, or detached first with --force;
 *   - anything else (a folder, another file system): mounted over as usual.
 * The cache folder and the log file must lie outside X: the daemon would
 * wait on its own mount.  Paths are compared after making them absolute and
 * resolving the symbolic links of the part that exists.
 *
 * Functions return 0 or -errno; the check functions put the user's message
 * in why.  The parsers (cfs_mnt_find, cfs_mnt_lexical, cfs_mnt_under) are
 * pure and do no I/O. */
#ifndef CFS_MNT_H
#define CFS_MNT_H

#include <stddef.h>
#include <sys/types.h>

#define CFS_MNT_PATH_MAX 4096

struct cfs_mnt_entry {
	char point[CFS_MNT_PATH_MAX]; /* the mount point, unescaped */
	char fstype[64];  /* "fuse.colabfs", "tmpfs", ... */
	char source[256];
	unsigned major, minor; /* its device (st_dev of what is in it) */
	long user_id;     /* the user_id= super option (FUSE: who mounted it), -1: none */
};

/* The last (topmost) entry of mountinfo text whose mount point is mp (an
 * absolute path, compared after undoing mountinfo's octal escapes).
 * Returns 1 and fills e when found, 0 when not. */
int cfs_mnt_find(const char *mountinfo, const char *mp, struct cfs_mnt_entry *e);

/* The entry of the mount path lies in by its letters (absolute and lexical,
 * cfs_mnt_lexical): the longest mount point that path is under, the
 * topmost of several.  1 and e filled, or 0. */
int cfs_mnt_containing(const char *mountinfo, const char *path, struct cfs_mnt_entry *e);

/* The device of the colabfs mount at mp (the topmost), for its control
 * socket (fuse/ctlsock.h).  0, -ENOENT (none there), or -errno. */
int cfs_mnt_dev(const char *mp, unsigned *major, unsigned *minor);

/* The mount path (relative to the current folder, or absolute) lies in,
 * found without a call on the path itself (the mount may not answer):
 * lexically, from /proc/self/mountinfo.  A symbolic link in path can make
 * it the wrong one; callers check what they find.  0 or -errno. */
int cfs_mnt_of(const char *path, struct cfs_mnt_entry *e);

/* path made absolute against cwd, with "." and ".." and repeated slashes
 * taken out by the letters alone (no symlinks followed).  Returns 0 or
 * -ENAMETOOLONG. */
int cfs_mnt_lexical(const char *cwd, const char *path, char *out, size_t cap);

/* 1 when path is dir or lies inside it (both absolute and lexical). */
int cfs_mnt_under(const char *dir, const char *path);

/* The absolute form of a path to be used after chdir("/"): lexical, then
 * the symbolic links of its longest existing ancestor resolved.  Never stats
 * the last component of a path that exists only as a mountpoint.  Returns 0
 * or -errno. */
int cfs_mnt_abs(const char *path, char *out, size_t cap);

/* Replaces the malloc'd *path by cfs_mnt_abs of it (NULL stays NULL). */
int cfs_mnt_abs_dup(char **path);

/* What a look at the mount at mp says, from a child process: a hung daemon
 * blocks the caller of any file system call on its mount, and only a kill
 * ends the wait (not even that when the daemon has read the request: such
 * a child is left behind).  colabfs: ask user.colabfs.pid, else open mp.
 * Returns 0 (live, *pid from user.colabfs.pid when it has one), -ENOTCONN
 * (dead, ECONNABORTED included), -ETIMEDOUT (no answer within timeout_ms),
 * or another -errno. */
int cfs_mnt_probe(const char *mp, int colabfs, pid_t *pid, int timeout_ms);

/* Looks at what is mounted at the absolute mountpoint mp (see above); with
 * force, a dead mount there is detached first.  Returns 0 (go ahead),
 * -EBUSY (a live colabfs mount), -ENOTCONN (a dead mount), or another
 * -errno, with the message in why. */
int cfs_mnt_check(const char *mp, int force, char *why, size_t wcap);

#endif
