/* notifier: the process that writes a server's notices to /dev/fuse.
 *
 * The kernel handles an invalidation notice (FUSE_NOTIFY_INVAL_ENTRY,
 * _INVAL_INODE) under the folder's inode lock or the file's page locks, in
 * uninterruptible sleep; a request in flight may hold those until the server
 * answers it.  A server thread waiting there cannot die: a server SIGKILLed
 * then never exits, and the supervisor, which starts the next server (the
 * only one that could answer that request) when the last one has exited,
 * waits for ever.  So a server's notices go through a pipe to a small child
 * process of its own, which writes them to the device: that process may wait
 * in the kernel, the server exits at once, the next one answers, the notice
 * goes through, and the child sees its pipe closed and exits. */
#ifndef CFS_NOTIFIER_H
#define CFS_NOTIFIER_H

#include <stddef.h>
#include <sys/uio.h>

/* Starts the child for device descriptor fuse_fd.  Returns the pipe's
 * write end (close-on-exec) or -errno. */
int cfs_notifier_start(int fuse_fd);

/* Hands one notice (iov: out header first, its len field the total) to the
 * child through pipe fd.  Returns the notice's length, or -errno (-EMSGSIZE:
 * longer than one atomic pipe write; -EPIPE: the child is gone): the caller
 * then writes it to the device itself. */
long cfs_notifier_send(int fd, const struct iovec *iov, int count);

#endif
