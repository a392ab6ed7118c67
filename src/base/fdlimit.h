/* fdlimit: a server's limit of open files.  A staged file waiting for its
 * upload keeps its file open (vfs_write.c), and the cache's arenas, the
 * index, the FUSE channel and the connections hold more, so the soft limit
 * a shell hands down (1024 on Debian) failed a tar of a thousand small
 * files with EMFILE while the hard limit allowed far more.  A server raises
 * its soft limit to the hard one, as daemons do. */
#ifndef CFS_FDLIMIT_H
#define CFS_FDLIMIT_H

#include <stdint.h>

/* Raises the soft RLIMIT_NOFILE to the hard limit.  *was and *now get the
 * soft limit before and after.  Returns 0 or -errno (*now is then the limit
 * left in force). */
int cfs_fdlimit_raise(uint64_t *was, uint64_t *now);

#endif
