/* session: mount + loop (see session.h; the worker pool is loop.c). */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctlsock.h"
#include "err.h"
#include "log.h"
#include "loop.h"
#include "ops.h"
#include "sampler.h"
#include "serve_io.h"

#define READ_AHEAD_KB 4096

/* The kernel reads ahead only 128 KiB on a FUSE mount unless told more via
 * its backing device's sysfs knob (as gcsfuse advises); a larger window
 * means fewer, larger reads.  Runs in its own thread once the loop serves,
 * since the stat that finds the device is answered by the loop itself.
 * Best effort: without root it just logs. */
static void *tune_readahead(void *arg)
{
	char *mnt = arg, path[128];
	struct stat st;
	if (stat(mnt, &st) == 0) {
		snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", major(st.st_dev),
			 minor(st.st_dev));
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		char val[16];
		int n = snprintf(val, sizeof(val), "%d", READ_AHEAD_KB);
		if (fd < 0 || write(fd, val, (size_t)n) != n)
			CFS_INFO("kernel read-ahead stays at its default (%s: %s)", path,
				 strerror(errno));
		else
			CFS_DEBUG("kernel read-ahead set to %d KiB", READ_AHEAD_KB);
		if (fd >= 0)
			close(fd);
	}
	free(mnt);
	return NULL;
}

static const char *stop_step;

void cfs_session_stopping(const char *step)
{
	__atomic_store_n(&stop_step, step, __ATOMIC_RELEASE);
}

/* Ends a process whose stop takes too long (session.h). */
static void *stop_watchdog(void *arg)
{
	int status = (int)(intptr_t)arg;
	struct timespec d = { CFS_SESSION_STOP_MS / 1000, (CFS_SESSION_STOP_MS % 1000) * 1000000L };
	while (nanosleep(&d, &d) != 0 && errno == EINTR)
		;
	CFS_ERROR("shutdown watchdog: still stopping %d s after the session ended (at: %s); "
		  "exiting now: staged writes stay journaled, the next mount of this cache "
		  "folder goes on from them",
		  CFS_SESSION_STOP_MS / 1000, __atomic_load_n(&stop_step, __ATOMIC_ACQUIRE));
	cfs_log_flush();
	_exit(status);
	return NULL;
}

static int ctl_stats(void *arg, struct cfs_buf *out)
{
	struct cfs_fs *fs = arg;
	return cfs_stats_json(&fs->stats, out);
}

/* The control socket of the mount fs serves (ctlsock.h); NULL when it has
 * none (said in the log: the commands then use the attributes). */
static struct cfs_ctlsock *ctl_start(struct cfs_fs *fs, const struct cfs_session_opts *o)
{
	struct cfs_ctlsock_opts co = { .owner = fs->owner, .pid = cfs_ops_mount_pid(fs),
				       .stats = ctl_stats, .arg = fs };
	struct cfs_ctlsock *s = NULL;
	int rc = o->mount_dev ? o->mount_dev(o->mountpoint, &co.major, &co.minor) : -ENOSYS;
	if (!rc)
		rc = cfs_ctlsock_start(&co, &s);
	if (rc && o->mount_dev)
		CFS_WARN("no control socket (%s): colabfs stats and umount go through the mount",
			 strerror(-rc));
	else if (!rc)
		CFS_DEBUG("control socket @" CFS_CTLSOCK_FMT, co.major, co.minor);
	return s;
}

struct watch {
	struct fuse_session *se;
	const struct cfs_session_opts *o;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
};

/* Waits for the session to start ending, then tells the owner (see
 * on_exit in session.h).  libfuse has no callback for that moment. */
static void *watch_exit(void *arg)
{
	struct watch *w = arg;
	pthread_mutex_lock(&w->lock);
	while (!w->done && !fuse_session_exited(w->se)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&w->cond, &w->lock, &ts);
	}
	pthread_mutex_unlock(&w->lock);
	cfs_session_stopping("the FUSE workers' last requests");
	pthread_t dog;
	int e = pthread_create(&dog, NULL, stop_watchdog, (void *)(intptr_t)w->o->stuck_exit);
	if (e == 0)
		pthread_detach(dog);
	else
		CFS_WARN("no shutdown watchdog: %s", strerror(e));
	if (w->o->on_exit)
		w->o->on_exit(w->o->on_exit_arg);
	return NULL;
}

struct fuse_session *cfs_session_fuse_new(const char *fuse_opts, int debug, void *fs)
{
	char opts[4096];
	/* --read-only puts "ro" in fuse_opts: the kernel answers EROFS then */
	int n = snprintf(opts, sizeof(opts), "fsname=colabfs,subtype=colabfs,max_read=%d%s%s",
			 CFS_MAX_READ, fuse_opts ? "," : "", fuse_opts ? fuse_opts : "");
	if (n < 0 || (size_t)n >= sizeof(opts))
		return NULL;
	char *argv[] = { "colabfs", "-o", opts, debug ? "-d" : NULL, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(debug ? 4 : 3, argv);
	struct fuse_session *se = fuse_session_new(&args, &cfs_ops, sizeof(cfs_ops), fs);
	fuse_opt_free_args(&args);
	return se;
}

int cfs_session_check(const struct cfs_session_opts *o)
{
	struct cfs_fs fs = { 0 };
	struct fuse_session *se = cfs_session_fuse_new(o->fuse_opts, o->debug, &fs);
	if (!se)
		return CFS_E_CONFIG;
	fuse_session_destroy(se);
	return 0;
}

int cfs_session_run(struct cfs_vfs *vfs, const struct cfs_session_opts *o)
{
	struct cfs_fs fs = { .vfs = vfs, .attr_timeout = o->attr_timeout, .stats = o->stats,
			     .poll_interval = o->poll_interval, .daemon_opens = o->daemon_opens,
			     .owner = (uint32_t)getuid(),
			     .uid = o->uid, .gid = o->gid, .file_mode = o->file_mode,
			     .dir_mode = o->dir_mode, .cache_dir = o->cache_dir };
	fs.stats.loop = &fs.loop;
	int rc = 0;
	struct fuse_session *se = cfs_session_fuse_new(o->fuse_opts, o->debug, &fs);
	if (!se) {
		CFS_ERROR("cannot create the FUSE session (bad -o option?)");
		return CFS_E_CONFIG;
	}
	fs.se = se;
	if (fuse_set_signal_handlers(se) != 0) {
		rc = -EIO;
		goto out_destroy;
	}
	if (o->serve.shm) {
		/* supervised: the supervisor mounted; complete INIT from its record */
		rc = cfs_serve_io_attach(se, &o->serve);
		if (rc)
			goto out_signals;
		if (o->on_serving)
			o->on_serving(o->on_serving_arg);
	} else if (fuse_session_mount(se, o->mountpoint) != 0) {
		CFS_ERROR("cannot mount on %s", o->mountpoint);
		rc = -EIO;
		goto out_signals;
	} else {
		CFS_INFO("mounted on %s", o->mountpoint);
	}
	if (!o->foreground && !o->serve.shm) {
		if (fuse_daemonize(0) != 0) {
			rc = -EIO;
			goto out_unmount;
		}
		if (o->log_file && (rc = cfs_log_open(o->log_file, cfs_log_get_level())) != 0)
			goto out_unmount;
		if (o->after_fork && (rc = o->after_fork(o->after_fork_arg, &fs.vfs, &fs.stats)) != 0)
			goto out_unmount;
	}
	if (cfs_sampler_start(&fs.stats, &fs.hist))
		CFS_WARN("no counter history: cannot start its sampler thread");
	struct cfs_ctlsock *ctl = ctl_start(&fs, o);
	pthread_t tuner;
	char *mnt = strdup(o->mountpoint);
	if (mnt && pthread_create(&tuner, NULL, tune_readahead, mnt) == 0)
		pthread_detach(tuner);
	else
		free(mnt);
	struct watch w = { .se = se, .o = o, .lock = PTHREAD_MUTEX_INITIALIZER,
			   .cond = PTHREAD_COND_INITIALIZER };
	pthread_t watcher;
	int watching = o->on_exit && pthread_create(&watcher, NULL, watch_exit, &w) == 0;
	rc = cfs_loop_run(se, (unsigned)o->max_threads, &fs.loop);
	if (watching) {
		pthread_mutex_lock(&w.lock);
		w.done = 1;
		pthread_cond_signal(&w.cond);
		pthread_mutex_unlock(&w.lock);
		pthread_join(watcher, NULL);
	}
	cfs_session_stopping("the control socket");
	cfs_ctlsock_stop(ctl);
	cfs_session_stopping("the sampler");
	cfs_sampler_stop(fs.hist);
	fs.hist = NULL;
	if (!o->serve.shm)
		CFS_INFO("unmounting %s", o->mountpoint);
out_unmount:
	if (!o->serve.shm) /* supervised: the supervisor unmounts */
		fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
	return rc;
}
