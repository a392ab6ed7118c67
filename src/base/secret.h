/* secret: reading a small file that holds a secret -- the credentials file,
 * the shared cache's deployment key (and, for whoever checks it, its
 * password file).  One reader, so every secret file is checked the same way.
 *
 * cfs_secret_read opens path with symlinks followed (a Kubernetes secret
 * volume is a symlink farm): what is checked is the file actually read, as
 * fstat sees the open descriptor, so no race between a check and the read.
 * It refuses anything but a regular file of at most max bytes.  With
 * CFS_SECRET_PRIVATE it also refuses a file that group or others may read
 * or write (mode & 066: "chmod 600 it"), or that is owned by a user other
 * than this one or root (who could change it under us); without the flag
 * such a file is read with a warning in the log.  what names the file in
 * messages ("credentials file", "--shared-cache-key-file").
 *
 * Returns 0 with *out malloc'd and NUL-terminated (the NUL not counted in
 * *len; the caller wipes it with explicit_bzero and frees it), CFS_E_CONFIG
 * with why saying what is wrong and what to do, or -ENOMEM. */
#ifndef CFS_SECRET_H
#define CFS_SECRET_H

#include <stddef.h>

#define CFS_SECRET_PRIVATE 1u

int cfs_secret_read(const char *path, const char *what, size_t max, unsigned flags, char **out,
		    size_t *len, char *why, size_t wcap);

#endif
