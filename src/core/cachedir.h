/* cachedir: the rules for trusting a cache folder before anything is opened
 * in it.
 *
 * The daemon runs as root on Colab and writes into its cache folder, so a
 * folder another user can write to (symlinks planted there would make it
 * truncate their targets), or an unrelated folder a typo named (--cache-dir=
 * /tmp), must be refused, not "fixed" with a chmod.  The rules:
 *  - a folder that does not exist is created, mode 0700 (and the folders
 *    above it that are missing, 0700 too);
 *  - an existing one must be a real folder (not a symlink), owned by the
 *    effective user, and not writable by group or others; its mode is never
 *    changed;
 *  - it must be empty, or a colabfs cache folder: one holding the
 *    CACHEDIR.TAG colabfs writes (the cache-directory tag backup tools
 *    honour, https://bford.info/cachedir/), or an index.mdb of an earlier
 *    version (which then gets the tag);
 *  - files inside are opened with O_NOFOLLOW where colabfs opens them itself
 *    (LMDB opens its files by path; the checks above are what keep those
 *    safe: nobody else can create a name in the folder).
 * The default folders (/dev/shm/colabfs-UID and the one below it for each
 * mountpoint) are colabfs's own, inside a folder only we can write: they are
 * narrowed to 0700 when they are not and may hold anything (an older
 * version's files); they must still be real folders of ours
 * (cfs_cachedir_prepare's own_base).
 *
 * Returns 0, or -errno with a sentence for the user in why. */
#ifndef CFS_CACHEDIR_H
#define CFS_CACHEDIR_H

#include <stddef.h>

#define CFS_CACHEDIR_TAG "CACHEDIR.TAG"

/* Makes path a trusted cache folder as above.  own_base: path is one of
 * colabfs's default folders (narrowed to 0700; need not be empty; tagged). */
int cfs_cachedir_prepare(const char *path, int own_base, char *why, size_t wcap);

/* The same rules, changing nothing (`colabfs doctor`): a folder that does not
 * exist gives -ENOENT ("cannot create": prepare would create it), one of
 * ours not narrowed or tagged yet passes. */
int cfs_cachedir_check(const char *path, int own_base, char *why, size_t wcap);

/* The default cache folder of a mount: without --cache-dir each mountpoint
 * gets its own folder under /dev/shm/colabfs-UID (copied into base), named
 * after the absolute mountpoint mp's path (*dir, malloc'd), so remounting the
 * same path finds its cache and two mounts never share one.  Names only:
 * nothing is created.  Returns 0, -ENAMETOOLONG or -ENOMEM. */
int cfs_cachedir_default(const char *mp, char *base, size_t bcap, char **dir);

#endif
