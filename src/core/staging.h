/* staging: the staging folder, where written bytes wait for their upload.
 *
 * One sparse file per Drive file with local content, named "w-" + its Drive
 * id (ids are [A-Za-z0-9_-], checked by the Drive client), in a folder only
 * colabfs writes (cachedir.h's rules).  It lives on disk by default (a 5 GiB
 * checkpoint needs 5 GiB of disk, not of RAM; see --staging-dir), next to
 * the journal that says what each file is for (journal.h).  Files are
 * opened O_NOFOLLOW; a full disk is ENOSPC at the write that hits it, never
 * a file that is uploaded half-written.  Returns 0 or -errno. */
#ifndef CFS_STAGING_H
#define CFS_STAGING_H

#include <stddef.h>
#include <stdint.h>

struct cfs_staging;

int cfs_staging_open(const char *dir, struct cfs_staging **out);
void cfs_staging_close(struct cfs_staging *s); /* NULL-safe */
const char *cfs_staging_dir(const struct cfs_staging *s);

/* Opens the staged file of id read-write into *fd (create: make it, empty,
 * when missing; trunc: empty it).  -ENOENT without create when missing. */
int cfs_staging_file(struct cfs_staging *s, const char *id, int create, int trunc, int *fd);
/* Removes the staged file of id (-ENOENT when there is none). */
int cfs_staging_remove(struct cfs_staging *s, const char *id);

/* The staged file of id from becomes that of id to (replacing any). */
int cfs_staging_rename(struct cfs_staging *s, const char *from, const char *to);

/* pread/pwrite of exactly len bytes (pread: short at the end of the file,
 * *got says how many).  pwrite's -ENOSPC leaves the file as it was before
 * the call but for bytes past its old end, which a truncate removes. */
/* Copies len bytes at off of staged file from into to at the same offset
 * (copy_file_range, else read and write). */
int cfs_staging_copy(int from, int to, int64_t off, int64_t len);
int cfs_staging_pread(int fd, int64_t off, void *buf, size_t len, size_t *got);
int cfs_staging_pwrite(int fd, int64_t off, const void *buf, size_t len);

#endif
