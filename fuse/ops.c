/* ops: FUSE low-level callbacks (see ops.h). */
#include "ops.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctlname.h"
#include "err.h"
#include "json.h"
#include "log.h"
#include "reply.h"
#include "reqlog.h"
#include "sampler.h"
#include "serve_io.h"
#include "vfs.h"

#define READ_BLKSIZE CFS_MAX_READ
#define CTL_REFUSALS_LOGGED 20

static struct cfs_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void reply_status(fuse_req_t req, int status)
{
	fuse_reply_err(req, cfs_reply_errno(status));
}

/* Nanoseconds since the epoch as a timespec (tv_nsec in [0, 1e9) before 1970 too). */
static struct timespec to_timespec(int64_t ns)
{
	int64_t sec = ns / 1000000000, rem = ns % 1000000000;
	if (rem < 0) {
		sec--;
		rem += 1000000000;
	}
	return (struct timespec){ .tv_sec = (time_t)sec, .tv_nsec = (long)rem };
}

static int64_t from_timespec(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

/* Owner and modes are the mount's (--uid, --gid, --file-mode, --dir-mode,
 * --umask), the same for every entry: Drive's sharing has no POSIX form. */
static void to_stat(const struct cfs_fs *fs, const struct cfs_vfs_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_mode = a->is_dir ? S_IFDIR | fs->dir_mode : S_IFREG | fs->file_mode;
	st->st_nlink = a->unlinked ? 0 : a->is_dir ? 2 : 1;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_size = a->size;
	st->st_blksize = READ_BLKSIZE;
	st->st_blocks = (a->size + 511) / 512;
	st->st_mtim = to_timespec(a->mtime_ns);
	st->st_ctim = to_timespec(a->ctime_ns);
	st->st_atim = to_timespec(a->atime_ns);
}

/* How long the kernel may keep a name and its attributes: --attr-timeout
 * when given, else as long as the listing they come from is trusted, so a
 * dataset's files are looked up once per listing, not once a minute (a
 * change seen sooner, by the Changes poller, invalidates them). */
static double entry_ttl(struct cfs_fs *fs, const struct cfs_vfs_attr *a)
{
	return fs->attr_timeout >= 0 ? fs->attr_timeout : (double)a->valid_ms / 1000.0;
}

/* Exports of unknown size get no attribute caching: their size changes
 * once they are first fetched. */
static double attr_ttl(struct cfs_fs *fs, const struct cfs_vfs_attr *a)
{
	return a->size_known ? entry_ttl(fs, a) : 0.0;
}

/* The number the kernel knows inode ino by (open-less: with its revision's
 * generation, vfs.h). */
static uint64_t kernel_id(struct cfs_fs *fs, uint64_t ino)
{
	return fs->pinned ? cfs_vfs_pin_nodeid(fs->vfs, ino) : ino;
}

/* ... and back: the inode number of the node id a request names. */
static uint64_t ino_of(struct cfs_fs *fs, fuse_ino_t nodeid)
{
	return fs->pinned ? cfs_vfs_pin_ino(nodeid) : nodeid;
}

static void notify_inode(void *arg, uint64_t ino)
{
	struct cfs_fs *fs = arg;
	fuse_lowlevel_notify_inval_inode(fs->se, kernel_id(fs, ino), 0, 0);
}

static void notify_entry(void *arg, uint64_t parent, const char *name)
{
	struct cfs_fs *fs = arg;
	fuse_lowlevel_notify_inval_entry(fs->se, parent, name, strlen(name));
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct cfs_fs *fs = userdata;
	struct cfs_vfs_notify n = { notify_inode, notify_entry, fs };
	if (fs->se && cfs_vfs_start_polling(fs->vfs, fs->poll_interval, &n))
		CFS_WARN("cannot start polling Drive for changes");
	if (fs->se && cfs_vfs_start_memwatch(fs->vfs))
		CFS_WARN("cannot start the memory watcher");
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	conn->max_read = CFS_MAX_READ; /* must match the max_read mount option */
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA; /* content changes only with the revision */
	conn->max_readahead = CFS_MAX_READ; /* libfuse caps it at what the kernel offers */
	conn->max_write = CFS_MAX_WRITE;     /* what the request log records whole */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* A read-only mount needs no OPEN, FLUSH or RELEASE (vfs.h, open-less
	 * reads): the first OPEN is answered ENOSYS and the kernel opens files
	 * itself from then on (Linux 4.20).  Decided the same way by every
	 * server of the mount, since the kernel remembers it. */
	if (fs->se && !fs->daemon_opens && !cfs_vfs_writable(fs->vfs) &&
	    (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT)) {
		int rc = cfs_vfs_pin_start(fs->vfs);
		if (rc)
			CFS_INFO("opens go to the daemon: %s", cfs_strerror(rc));
		fs->pinned = !rc;
	}
	if (fs->se && cfs_vfs_writable(fs->vfs) && cfs_vfs_start_uploads(fs->vfs))
		CFS_WARN("cannot start the uploaders");
}

static void entry_param(struct cfs_fs *fs, const struct cfs_vfs_attr *a,
			struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = a->nodeid;
	e->generation = 1;
	e->attr_timeout = attr_ttl(fs, a);
	e->entry_timeout = entry_ttl(fs, a);
	to_stat(fs, a, &e->attr);
}

static void reply_entry(fuse_req_t req, struct cfs_fs *fs, const struct cfs_vfs_attr *a)
{
	struct fuse_entry_param e;
	entry_param(fs, a, &e);
	fuse_reply_entry(req, &e);
}

/* Replies to getattr and setattr: the error, or the attributes. */
static void reply_attr(fuse_req_t req, struct cfs_fs *fs, int rc, const struct cfs_vfs_attr *a)
{
	if (rc) {
		reply_status(req, rc);
		return;
	}
	struct stat st;
	to_stat(fs, a, &st);
	fuse_reply_attr(req, &st, attr_ttl(fs, a));
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct cfs_fs *fs = fs_of(req);
	struct cfs_vfs_attr a;
	int rc = cfs_vfs_lookup(fs->vfs, parent, name, &a);
	if (rc) {
		reply_status(req, rc);
		return;
	}
	reply_entry(req, fs, &a);
}

/* Nodes live as long as the mount (see src/core/inode.h); open-less, the
 * record of a superseded revision goes with its node id. */
static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	(void)nlookup;
	struct cfs_fs *fs = fs_of(req);
	if (fs->pinned)
		cfs_vfs_pin_forget(fs->vfs, ino);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct cfs_fs *fs = fs_of(req);
	for (size_t i = 0; fs->pinned && i < count; i++)
		cfs_vfs_pin_forget(fs->vfs, forgets[i].ino);
	fuse_reply_none(req);
}

/* fi: set when asked with an open file (FUSE_GETATTR_FH), as before a read
 * past the size the kernel knows. */
static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfs_fs *fs = fs_of(req);
	struct cfs_vfs_attr a;
	int rc = fs->pinned ? cfs_vfs_pin_getattr(fs->vfs, ino, fi != NULL, &a)
			    : cfs_vfs_getattr(fs->vfs, ino, &a);
	reply_attr(req, fs, rc, &a);
}

/* The request being served, for the core's once-only record of
 * state-changing requests (0 where no server journal exists). */
static uint64_t req_unique(void)
{
	return cfs_serve_current_unique();
}


static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct cfs_fs *fs = fs_of(req);
	struct cfs_vfs_setattr s = { 0 };
	if (to_set & FUSE_SET_ATTR_SIZE) {
		s.set_size = 1;
		s.size = attr->st_size;
	}
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
		s.set_mtime = 1;
		s.mtime_ns = from_timespec(to_set & FUSE_SET_ATTR_MTIME_NOW ? &now : &attr->st_mtim);
	}
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) {
		s.set_atime = 1;
		s.atime_ns = from_timespec(to_set & FUSE_SET_ATTR_ATIME_NOW ? &now : &attr->st_atim);
	}
	/* modes, owners: accepted, unchanged (Drive has no POSIX modes) */
	struct cfs_vfs_attr a;
	reply_attr(req, fs, cfs_vfs_setattr(fs->vfs, ino, fi ? fi->fh : 0, &s, &a), &a);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)mode;
	struct cfs_fs *fs = fs_of(req);
	struct cfs_vfs_attr a;
	int rc = cfs_vfs_mkdir(fs->vfs, req_unique(), parent, name, &a);
	if (rc)
		reply_status(req, rc);
	else
		reply_entry(req, fs, &a);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	reply_status(req, cfs_vfs_unlink(fs_of(req)->vfs, req_unique(), parent, name));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	reply_status(req, cfs_vfs_rmdir(fs_of(req)->vfs, req_unique(), parent, name));
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	unsigned f = (flags & RENAME_NOREPLACE ? CFS_VFS_RENAME_NOREPLACE : 0) |
		     (flags & RENAME_EXCHANGE ? CFS_VFS_RENAME_EXCHANGE : 0);
	reply_status(req, cfs_vfs_rename(fs_of(req)->vfs, req_unique(), parent, name, newparent,
					 newname, f));
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	(void)mode;
	struct cfs_fs *fs = fs_of(req);
	struct cfs_vfs_attr a;
	uint64_t fh;
	int rc = cfs_vfs_create(fs->vfs, req_unique(), parent, name, fi->flags,
				(uint32_t)fuse_req_ctx(req)->pid, &a, &fh);
	if (rc) {
		reply_status(req, rc);
		return;
	}
	struct fuse_entry_param e;
	entry_param(fs, &a, &e);
	fi->fh = fh;
	fi->keep_cache = 0;
	fi->direct_io = 0;
	if (fuse_reply_create(req, &e, fi) == -ENOENT)
		cfs_vfs_release(fs->vfs, a.ino, fh);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	size_t n = 0;
	int rc = cfs_vfs_write(fs_of(req)->vfs, ino, fi->fh, off, buf, size, &n);
	if (rc)
		reply_status(req, rc);
	else
		fuse_reply_write(req, n);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfs_fs *fs = fs_of(req);
	if (!cfs_vfs_writable(fs->vfs)) {
		fuse_reply_err(req, ENOSYS); /* the kernel stops sending FLUSH at all */
		return;
	}
	reply_status(req, cfs_vfs_flush(fs->vfs, ino, fi->fh));
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	struct cfs_fs *fs = fs_of(req);
	if (fs->pinned) { /* read-only, nothing to sync */
		fuse_reply_err(req, 0);
		return;
	}
	reply_status(req, cfs_vfs_fsync(fs->vfs, ino, fi->fh));
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0); /* folder changes are in Drive when their call returns */
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	uint64_t fh;
	int rc = cfs_vfs_opendir(fs_of(req)->vfs, ino, &fh);
	if (rc) {
		reply_status(req, rc);
		return;
	}
	fi->fh = fh;
	fi->cache_readdir = 1;
	if (fuse_reply_open(req, fi) == -ENOENT) /* interrupted: nobody will release it */
		cfs_vfs_releasedir(fs_of(req)->vfs, ino, fh);
}

struct dirbuf {
	fuse_req_t req;
	char *buf;
	size_t size, used;
	int plus; /* readdirplus: attributes with every entry */
};

static int add_dirent(const char *name, uint64_t ino, int is_dir, off_t next, void *arg)
{
	struct dirbuf *b = arg;
	size_t need;
	if (b->plus) {
		/* ls -l and find get names and attributes in one round trip */
		struct cfs_fs *fs = fs_of(b->req);
		struct fuse_entry_param e;
		struct cfs_vfs_attr a;
		memset(&e, 0, sizeof(e));
		if (cfs_vfs_getattr(fs->vfs, ino, &a) == 0) {
			entry_param(fs, &a, &e);
		} else {
			e.attr.st_ino = ino;
			e.attr.st_mode = is_dir ? S_IFDIR : S_IFREG;
		}
		need = fuse_add_direntry_plus(b->req, b->buf + b->used, b->size - b->used, name,
					      &e, next);
	} else {
		struct stat st;
		memset(&st, 0, sizeof(st));
		st.st_ino = ino;
		st.st_mode = is_dir ? S_IFDIR : S_IFREG;
		need = fuse_add_direntry(b->req, b->buf + b->used, b->size - b->used, name, &st,
					 next);
	}
	if (need > b->size - b->used)
		return 1;
	b->used += need;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, int plus)
{
	struct dirbuf b = { req, malloc(size), size, 0, plus };
	if (!b.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int rc = cfs_vfs_readdir(fs_of(req)->vfs, ino, fi->fh, off, add_dirent, &b);
	if (rc)
		reply_status(req, rc);
	else
		fuse_reply_buf(req, b.buf, b.used);
	free(b.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 1);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	cfs_vfs_releasedir(fs_of(req)->vfs, ino, fi->fh);
	fuse_reply_err(req, 0);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfs_fs *fs = fs_of(req);
	uint64_t fh;
	int keep = 0, direct = 0;
	if (fs->pinned) { /* open-less from now on (the kernel remembers) */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	int rc = cfs_vfs_open(fs->vfs, ino, fi->flags, (uint32_t)fuse_req_ctx(req)->pid, &fh, &keep,
			      &direct);
	if (rc) {
		reply_status(req, rc);
		return;
	}
	fi->fh = fh;
	fi->keep_cache = keep;
	fi->direct_io = direct;
	/* Only a writer's close is a durability point (cfs_vfs_flush): a
	 * reader's close needs no FLUSH round trip (FOPEN_NOFLUSH, Linux 5.16) */
	fi->noflush = (fi->flags & O_ACCMODE) == O_RDONLY;
	if (fuse_reply_open(req, fi) == -ENOENT)
		cfs_vfs_release(fs->vfs, ino, fh);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	struct cfs_fs *fs = fs_of(req);
	size_t got = 0;
	uint64_t drop = 0;
	int rc = fs->pinned && !fi->fh
			 ? cfs_vfs_pin_read(fs->vfs, ino, (uint32_t)fuse_req_ctx(req)->pid, off, size,
					    buf, &got, &drop)
			 : cfs_vfs_read(fs->vfs, ino_of(fs, ino), fi->fh, off, size, buf, &got);
	if (rc)
		reply_status(req, rc);
	else
		fuse_reply_buf(req, buf, got);
	free(buf);
	cfs_vfs_pin_drop(fs->vfs, drop); /* after the reply: it may hash a whole file */
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	cfs_vfs_release(fs_of(req)->vfs, ino, fi->fh);
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs st;
	int rc = cfs_vfs_statfs(fs_of(req)->vfs, &st);
	if (rc)
		reply_status(req, rc);
	else
		fuse_reply_statfs(req, &st);
}

static void inval_cb(uint64_t ino, void *arg)
{
	struct cfs_fs *fs = arg;
	if (fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, kernel_id(fs, ino), 0, 0);
}

/* Replies to getxattr with a value computed on demand. */
static void reply_xattr_value(fuse_req_t req, const char *val, size_t n, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, n);
	else if (size < n)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, n);
}

/* What an eviction or a warm reports.  A size probe (size 0) only gets an
 * upper bound and changes nothing. */
static void do_control(fuse_req_t req, struct cfs_fs *fs, fuse_ino_t ino,
		       const struct cfs_ctlname *c, size_t size)
{
	char val[160];
	uint64_t bytes = 0, blocks = 0;
	int rc, n;
	if (size == 0) {
		fuse_reply_xattr(req, sizeof(val));
		return;
	}
	if (c->kind == CFS_CTL_WARM) {
		rc = cfs_vfs_warm(fs->vfs, ino, (int64_t)c->off, c->len, &bytes);
		n = snprintf(val, sizeof(val), "{\"fetched_bytes\":%" PRIu64 "}", bytes);
	} else if (c->kind == CFS_CTL_ORDER) { /* an order hint: what was found of its list */
		struct cfs_vfs_hint_result h;
		rc = cfs_vfs_hint_spool(fs->vfs, ino, fs->cache_dir, c->off, &h);
		n = snprintf(val, sizeof(val),
			     "{\"files\":%" PRIu64 ",\"unknown\":%" PRIu64 ",\"bytes\":%" PRIu64 "}",
			     h.files, h.unknown, h.bytes);
	} else {
		rc = c->kind == CFS_CTL_EVICT	   ? cfs_vfs_evict(fs->vfs, ino, &bytes, &blocks, inval_cb, fs)
		     : c->kind == CFS_CTL_EVICT_TO ? cfs_vfs_evict_to(fs->vfs, c->target, &bytes, &blocks)
						   : -EINVAL;
		n = snprintf(val, sizeof(val), "{\"freed_bytes\":%" PRIu64 ",\"freed_blocks\":%" PRIu64 "}",
			     bytes, blocks);
	}
	if (rc)
		reply_status(req, rc);
	else
		reply_xattr_value(req, val, (size_t)n, size);
}

/* Evict and warm are the mount owner's and root's (ctlname.h).  The first
 * refusals are logged, not all: any user could fill the log. */
static int may_control(fuse_req_t req, struct cfs_fs *fs, const struct cfs_ctlname *c)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	int rc = cfs_ctlname_allowed(c->kind, (uint32_t)ctx->uid, fs->owner);
	if (rc) {
		unsigned k = __atomic_add_fetch(&fs->ctl_refused, 1, __ATOMIC_RELAXED);
		if (k <= CTL_REFUSALS_LOGGED)
			CFS_WARN("control: %s refused to uid %u (pid %d): only the mount's owner "
				 "(uid %u) and root may evict, warm or sync%s",
				 cfs_ctlname_verb(c->kind), (unsigned)ctx->uid, (int)ctx->pid,
				 (unsigned)fs->owner,
				 k == CTL_REFUSALS_LOGGED ? "; further refusals are not logged" : "");
	}
	return rc;
}

int cfs_ops_mount_pid(const struct cfs_fs *fs)
{
	const struct cfs_stats_recovery *rec = fs->stats.recovery;
	return rec && rec->super_pid ? (int)rec->super_pid : (int)getpid();
}

/* Control attributes (src/core/ctlname.h): the daemon's pid, its stats and
 * their history, and evictions and warms, which are reads with an effect. */
static void op_getxattr(fuse_req_t req, fuse_ino_t nodeid, const char *name, size_t size)
{
	struct cfs_fs *fs = fs_of(req);
	fuse_ino_t ino = ino_of(fs, nodeid);
	struct cfs_ctlname c;
	char val[32];
	int rc = cfs_ctlname_parse(name, &c);
	if (!rc)
		rc = may_control(req, fs, &c);
	if (rc) {
		reply_status(req, rc);
	} else if (c.kind == CFS_CTL_PID) {
		int n = snprintf(val, sizeof(val), "%d", cfs_ops_mount_pid(fs));
		reply_xattr_value(req, val, (size_t)n, size);
	} else if (c.kind == CFS_CTL_CACHE_DIR) {
		if (fs->cache_dir)
			reply_xattr_value(req, fs->cache_dir, strlen(fs->cache_dir), size);
		else
			reply_status(req, -ENODATA);
	} else if (c.kind == CFS_CTL_SYNC) {
		/* every staged file flushed to disk, uploads below ino start now;
		 * their state (vfs.h) */
		struct cfs_buf b = { 0 };
		static const char none[] = "{\"files\":0,\"bytes\":0,\"bytes_left\":0,"
					   "\"uploading\":0,\"waiting\":[],\"failed\":[]}";
		int w = cfs_vfs_writable(fs->vfs);
		int src = !size || !w ? 0 : cfs_vfs_w_make_durable(fs->vfs);
		if (!src)
			src = !size ? 0 : w ? cfs_vfs_sync_json(fs->vfs, ino, &b)
				: cfs_buf_append(&b, none, sizeof(none) - 1);
		if (src)
			reply_status(req, src);
		else if (size == 0)
			fuse_reply_xattr(req, CFS_SYNC_REPLY_MAX);
		else
			reply_xattr_value(req, b.data, b.len, size);
		cfs_buf_cleanup(&b);
	} else if (c.kind == CFS_CTL_STATS || c.kind == CFS_CTL_HISTORY) {
		struct cfs_buf b = { 0 };
		int src = c.kind == CFS_CTL_STATS ? cfs_stats_json(&fs->stats, &b)
			  : !fs->hist ? -ENODATA
			  : size ? cfs_sampler_page(fs->hist, c.off, &b) : 0;
		if (src)
			reply_status(req, src);
		else if (c.kind == CFS_CTL_HISTORY && size == 0)
			fuse_reply_xattr(req, CFS_HIST_PAGE_MAX); /* it grows every second */
		else
			reply_xattr_value(req, b.data, b.len, size);
		cfs_buf_cleanup(&b);
	} else {
		do_control(req, fs, ino, &c, size);
	}
}

/* No names: the control attributes are asked for by name, and listing them
 * would have `cp -a` and `rsync -X` copy them (and evict) onto every copy. */
static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	(void)ino;
	reply_xattr_value(req, "", 0, size);
}

const struct fuse_lowlevel_ops cfs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.statfs = op_statfs,
	.setattr = op_setattr,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.create = op_create,
	.write = op_write,
	.flush = op_flush,
	.fsync = op_fsync,
	.fsyncdir = op_fsyncdir,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
};
