/* session: mounting, daemonizing and the multithreaded FUSE loop. */
#ifndef CFS_SESSION_H
#define CFS_SESSION_H

#include <stdint.h>

#include "serve_io.h"
#include "stats.h"

struct cfs_vfs;

struct cfs_session_opts {
	const char *mountpoint;
	const char *fuse_opts;   /* user's -o, may be NULL */
	int foreground;
	int debug;
	int max_threads;
	double attr_timeout;
	long poll_interval;
	int daemon_opens;        /* a read-only mount still sends OPEN and RELEASE (ops.h) */
	uint32_t uid, gid;            /* owner and group every entry reports */
	uint32_t file_mode, dir_mode; /* their permission bits (umask applied) */
	const char *log_file;    /* where logging moves when daemonized */
	const char *cache_dir;   /* the cache folder, told to the GPU loader (ctlname.h) */
	struct cfs_stats_src stats;
	/* Called in the daemon after daemonizing (not with foreground): reopens
	 * what cannot cross a fork and hands back the vfs to serve. */
	int (*after_fork)(void *arg, struct cfs_vfs **vfs, struct cfs_stats_src *stats);
	void *after_fork_arg;
	/* Called once the session starts to end (unmount, signal), before the
	 * loop waits for its workers: long downloads must stop so that workers
	 * waiting on them can reply and the loop can return. */
	void (*on_exit)(void *arg);
	void *on_exit_arg;
	/* The device number of the mount at mountpoint (from mountinfo; 0 or
	 * -errno), for the control socket (ctlsock.h); NULL: no socket. */
	int (*mount_dev)(const char *mountpoint, unsigned *major, unsigned *minor);
	/* The exit status of a process whose stop outlasts CFS_SESSION_STOP_MS
	 * from the moment the session began to end (see cfs_session_stopping). */
	int stuck_exit;
	/* Supervised (serve.shm set): no mount, no daemonizing; the session
	 * serves the supervisor's descriptor and calls on_serving once INIT is
	 * complete. */
	struct cfs_serve_io_opts serve;
	void (*on_serving)(void *arg);
	void *on_serving_arg;
};

/* A FUSE session with our fixed options (read-only, max_read) and the
 * user's -o; the supervisor and every server make theirs here, so their
 * INIT replies agree.  fs: the ops' userdata (NULL for the supervisor). */
struct fuse_session *cfs_session_fuse_new(const char *fuse_opts, int debug, void *fs);

/* Checks the FUSE mount options without mounting, so a typo is reported
 * before any network call.  Returns 0 or CFS_E_CONFIG (libfuse says why on
 * stderr). */
int cfs_session_check(const struct cfs_session_opts *o);

/* Nothing waits forever on shutdown: once a session begins to end, the
 * process has CFS_SESSION_STOP_MS to finish (its session, then what the
 * caller frees after cfs_session_run returns); past that a watchdog logs
 * which step it was in (cfs_session_stopping) and ends the process with
 * stuck_exit.  What it skips is what a crash skips: committed journal rows
 * and staged files stay, and the next mount of the cache folder goes on
 * from them. */
#define CFS_SESSION_STOP_MS 5000

/* Names the step of the shutdown under way, for the watchdog's message
 * (a string literal: it is kept). */
void cfs_session_stopping(const char *step);

/* Mounts vfs at mountpoint (read-only), daemonizes unless foreground, serves
 * until unmounted or signalled, then unmounts.  Returns 0 or -errno / a
 * CFS_E_* status (the reason is logged). */
int cfs_session_run(struct cfs_vfs *vfs, const struct cfs_session_opts *o);

#endif
