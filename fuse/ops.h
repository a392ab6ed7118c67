/* ops: the FUSE low-level operations table.
 *
 * Each callback decodes its request, delegates to vfs, and replies exactly
 * once.  Reads are answered from the worker thread of the multithreaded
 * session loop; a slow download blocks only that worker.  File handles
 * (fi->fh) are vfs handle numbers, not pointers, so a server process started
 * again under the same mount can serve handles opened before (see vfs.h). */
#ifndef CFS_OPS_H
#define CFS_OPS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <stdint.h>

#include "stats.h"

struct cfs_vfs;
struct cfs_sampler;

/* Largest read the kernel sends us (the max_read mount option). */
#define CFS_MAX_READ (1 << 20)

struct cfs_fs {
	struct cfs_vfs *vfs;
	double attr_timeout;  /* seconds, for attributes and names; < 0: the listing's lifetime */
	struct cfs_stats_src stats;
	struct cfs_stats_loop loop; /* the worker pool's counters (stats.loop) */
	struct fuse_session *se; /* for cache invalidation after evict */
	long poll_interval;      /* Changes API polling, seconds (0: off) */
	uint32_t owner;          /* who may evict and warm besides root: the uid that ran
				  * `colabfs mount` (a supervised server runs as it too) */
	uint32_t uid, gid;       /* what every entry reports (--uid, --gid) */
	uint32_t file_mode, dir_mode; /* permission bits, --umask applied */
	unsigned ctl_refused;    /* evict/warm calls refused (atomic), to bound the log */
	const char *cache_dir;   /* user.colabfs.cache_dir */
	struct cfs_sampler *hist; /* user.colabfs.history; NULL: none (ENODATA) */
	int daemon_opens;        /* --daemon-opens: never open-less */
	int pinned;              /* open-less (set at INIT): the kernel opens files itself, node
				  * ids carry a revision generation (vfs.h, vfs_pin.c) */
};

extern const struct fuse_lowlevel_ops cfs_ops;

/* The pid the mount reports (user.colabfs.pid, ctlsock.h's "pid"): the
 * supervisor's when supervised, whose exit ends the mount; else ours. */
int cfs_ops_mount_pid(const struct cfs_fs *fs);

#endif
