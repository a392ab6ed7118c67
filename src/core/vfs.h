/* vfs: the file system core, free of FUSE.
 *
 * Maps the kernel's view (inode numbers, names, offsets) onto Drive: folder
 * listings (every page, names made unique by names.h, shortcuts resolved,
 * trashed and hidden items left out, native files shown exported), attributes,
 * and reads (through the block cache, reader.h; exports fetched whole at
 * open).  Listings are kept for dir_ttl seconds, fetched by one thread while
 * the others wait, and stored in the cache index with the inode numbers
 * (nsdb.h), so a remount lists at once, even offline.
 *
 * Restarts.  The kernel may outlive the server process (a supervisor keeps
 * /dev/fuse open and starts a new one with the same cache folder), so every
 * inode and handle number handed out is usable by a later process: a node
 * missing from memory is rebuilt from its stored parent chain and listings,
 * a file handle from its stored row (same revision as at open), a folder
 * handle by opening the folder again.  Handle numbers are never reused.
 *
 * Every function returns 0, -errno or a CFS_E_* status; fuse/ turns that into
 * a reply.  All functions are thread-safe. */
#ifndef CFS_VFS_H
#define CFS_VFS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include "export.h"
#include "reader.h"

struct cfs_drive;
struct cfs_fhtab;
struct cfs_reader;
struct cfs_store;
struct cfs_vfs;

struct cfs_wdrive;

struct cfs_vfs_opts {
	const char *root_id;   /* NULL or "root": My Drive; "/a/b": that folder of My Drive */
	long dir_ttl_s;        /* listing lifetime */
	struct cfs_export_map exports;
	struct cfs_reader_opts reader;
	int no_dataset_readahead; /* listing-order and tree-scan read-ahead off */
	int whole_drive;          /* root_id is a whole drive (shared drive, Shared with me) */
	/* Where open file handle rows are kept (nsdb.h, cfs_nsdb_fh_keep):
	 * fhtab when set (a supervised server: memory the supervisor keeps),
	 * nowhere with no_fh_rows (a server whose death ends the mount), else
	 * the cache index. */
	struct cfs_fhtab *fhtab;
	int no_fh_rows;
	/* Memory-pressure watcher (memwatch.h), for a cache folder in RAM:
	 * mem_floor bytes of free memory to keep (0: no watcher); mem_hold_ms:
	 * how long pressure must be gone before read-ahead and the budget come
	 * back (0: the default). */
	uint64_t mem_floor;
	int64_t mem_hold_ms;
	/* Writes (vfs_write.c): with journal and stage set the mount is
	 * writable; delete_permanently: unlink deletes instead of trashing;
	 * write_back_ms: how long after the last close an upload waits;
	 * upload_threads: files uploaded at once; fresh_mount: a new mount
	 * (not a server restarted under a live one): old done rows go. */
	struct cfs_journal *journal;
	struct cfs_staging *stage;
	int delete_permanently;
	long write_back_ms;
	int upload_threads;
	int fresh_mount;
	/* upload_open_ms: a file held open for writing and changed is uploaded
	 * (a consistent snapshot of its staged bytes) at most this often while
	 * it stays open (vfs_snap.c); 0: only at close, fsync or sync. */
	long upload_open_ms;
	/* The write side's Drive calls and clocks (wdrive.h); NULL: the real
	 * client d and the system clocks. */
	const struct cfs_wdrive *wdrive;
	/* Whose journal: the API URL its rows are for.  A journal written for
	 * another is set aside at start, never replayed here (NULL: no check). */
	const char *journal_owner;
};

struct cfs_vfs_attr {
	uint64_t ino;
	uint64_t nodeid;       /* the kernel's node id: ino, or ino with the revision's
				* generation on an open-less mount (cfs_vfs_pin_start) */
	int is_dir;
	int unlinked;          /* removed here while open (st_nlink 0) */
	int64_t size;          /* 0 when not known yet */
	int size_known;        /* 0 for an export never fetched */
	int64_t mtime_ns, ctime_ns, atime_ns; /* see cfs_node_mtime (inode.h) */
	int64_t valid_ms;      /* what is left of the lifetime of the listing that
				* says these (--dir-ttl minus its age), at least 1 s */
};

/* Resolves and checks the root folder (one files.get, or the stored answer
 * of an earlier mount).  Blocks, listings and inode numbers live in store. */
int cfs_vfs_new(struct cfs_drive *d, struct cfs_store *store, const struct cfs_vfs_opts *o,
		struct cfs_vfs **out);
void cfs_vfs_free(struct cfs_vfs *v);
/* The Drive id of the root folder. */
const char *cfs_vfs_root_id(const struct cfs_vfs *v);
/* The longest --root=/PATH (the cache index remembers the folder by it). */
#define CFS_ROOT_PATH_MAX 250
/* The next name of a --root path at or after p ("/"s skipped), its length
 * in *len (0: no more names). */
static inline const char *cfs_root_path_next(const char *p, size_t *len)
{
	p += strspn(p, "/");
	*len = strcspn(p, "/");
	return p;
}
struct cfs_reader *cfs_vfs_reader(struct cfs_vfs *v);

int cfs_vfs_lookup(struct cfs_vfs *v, uint64_t parent, const char *name, struct cfs_vfs_attr *a);
int cfs_vfs_getattr(struct cfs_vfs *v, uint64_t ino, struct cfs_vfs_attr *a);

/* Directory handles hold a snapshot of the listing, so offsets stay valid
 * (within one server process).  *fh: the handle number, never 0. */
int cfs_vfs_opendir(struct cfs_vfs *v, uint64_t ino, uint64_t *fh);
/* Calls cb for entries from offset off ("." and ".." first); cb returns
 * non-zero to stop (its buffer is full).  next is the offset after the entry. */
typedef int (*cfs_vfs_dirent_cb)(const char *name, uint64_t ino, int is_dir, off_t next,
				 void *arg);
/* -EBADF when fh is not a folder handle and cannot be reopened. */
int cfs_vfs_readdir(struct cfs_vfs *v, uint64_t ino, uint64_t fh, off_t off,
		    cfs_vfs_dirent_cb cb, void *arg);
/* An unknown fh is fine (nothing to do). */
void cfs_vfs_releasedir(struct cfs_vfs *v, uint64_t ino, uint64_t fh);

/* Opens (-EROFS for write access on a read-only mount, -EISDIR for folders;
 * O_TRUNC empties the file; a file opened for writing is staged); pid is
 * the opening process (for the dataset read-ahead; 0 if unknown).  *fh: the
 * handle number (never 0); what it reads (content id, revision, size) is
 * stored where cfs_vfs_opts says before this returns.
 * *keep_cache: the kernel may keep cached pages (content unchanged since the
 * last open); *direct_io: bypass the page cache (exports of unknown size). */
int cfs_vfs_open(struct cfs_vfs *v, uint64_t ino, int flags, uint32_t pid, uint64_t *fh,
		 int *keep_cache, int *direct_io);
/* -EBADF when fh is not an open file of ino (never opened, or released). */
int cfs_vfs_read(struct cfs_vfs *v, uint64_t ino, uint64_t fh, int64_t off, size_t len,
		 char *buf, size_t *got);
/* An unknown fh is fine (its stored row, if any, is dropped). */
void cfs_vfs_release(struct cfs_vfs *v, uint64_t ino, uint64_t fh);

int cfs_vfs_statfs(struct cfs_vfs *v, struct statvfs *st);

/* ---- open-less reads (vfs_pin.c) -------------------------------------------
 * A read-only mount whose kernel opens and closes files by itself (FUSE
 * no-open: no OPEN, RELEASE or FLUSH; every read comes with handle 0).  The
 * kernel's inode pins the revision instead of a handle: a file's node id is
 * its inode number with a generation in bits 48-62 that moves whenever the
 * file's revision changes, so a new lookup gets a new kernel inode (and the
 * new revision) while a reader of the old one keeps the old revision (or
 * fails with ESTALE once it cannot be had), never a mix.  Folders' node ids
 * are their inode numbers. */
#define CFS_VFS_PIN_SHIFT 48
static inline uint64_t cfs_vfs_pin_ino(uint64_t nodeid)
{
	return nodeid & ((1ull << CFS_VFS_PIN_SHIFT) - 1);
}
/* Makes v open-less (before the first request): -EROFS on a writable mount,
 * -ERANGE when its inode numbers reach bit 47 (after 128 index resets). */
int cfs_vfs_pin_start(struct cfs_vfs *v);
int cfs_vfs_pinned(const struct cfs_vfs *v);
/* The node id the kernel knows ino by now (for its notices). */
uint64_t cfs_vfs_pin_nodeid(struct cfs_vfs *v, uint64_t ino);
/* Attributes of node id (from_file: asked with an open file, as before a read
 * past the size the kernel knows: an export of unknown size is fetched).  A
 * superseded node id shows the size of its revision; -ESTALE when that
 * revision is no longer known (its record lost). */
int cfs_vfs_pin_getattr(struct cfs_vfs *v, uint64_t nodeid, int from_file, struct cfs_vfs_attr *a);
/* Reads node id's revision; pid: the reader (for the dataset read-ahead).
 * *drop: a file object to give up once the reply is sent (0: none), with
 * cfs_vfs_pin_drop (a whole-file check may run then), which also gives up
 * those the clock set aside meanwhile; call it after every read. */
int cfs_vfs_pin_read(struct cfs_vfs *v, uint64_t nodeid, uint32_t pid, int64_t off, size_t len,
		     char *buf, size_t *got, uint64_t *drop);
void cfs_vfs_pin_drop(struct cfs_vfs *v, uint64_t drop);
/* The kernel forgot node id: a superseded one's record goes. */
void cfs_vfs_pin_forget(struct cfs_vfs *v, uint64_t nodeid);

/* ---- writes (vfs_write.c, vfs_upload.c) -------------------------------------
 * Every call that changes the namespace takes the kernel's request number
 * (unique; 0: unknown): a request served again after a server death gets
 * the answer the first service gave (journal.h done rows), not a second
 * effect.  All return -EROFS on a read-only mount. */
int cfs_vfs_writable(const struct cfs_vfs *v);
/* A new file (O_EXCL: -EEXIST when name exists; else an existing file is
 * opened, O_TRUNC honoured).  *a and *fh as lookup and open give them. */
int cfs_vfs_create(struct cfs_vfs *v, uint64_t unique, uint64_t parent, const char *name,
		   int flags, uint32_t pid, struct cfs_vfs_attr *a, uint64_t *fh);
int cfs_vfs_mkdir(struct cfs_vfs *v, uint64_t unique, uint64_t parent, const char *name,
		  struct cfs_vfs_attr *a);
int cfs_vfs_unlink(struct cfs_vfs *v, uint64_t unique, uint64_t parent, const char *name);
int cfs_vfs_rmdir(struct cfs_vfs *v, uint64_t unique, uint64_t parent, const char *name);
#define CFS_VFS_RENAME_NOREPLACE 1
#define CFS_VFS_RENAME_EXCHANGE 2
int cfs_vfs_rename(struct cfs_vfs *v, uint64_t unique, uint64_t parent, const char *name,
		   uint64_t newparent, const char *newname, unsigned flags);
struct cfs_vfs_setattr {
	int set_size, set_mtime, set_atime;
	int64_t size, mtime_ns, atime_ns;
};
/* Size and modification time (to Drive), access time (kept in memory);
 * anything else (modes, owners) is accepted and changes nothing (Drive has
 * no POSIX modes).  A time set moves the ctime to now.  fh: 0 or an open
 * handle. */
int cfs_vfs_setattr(struct cfs_vfs *v, uint64_t ino, uint64_t fh,
		    const struct cfs_vfs_setattr *s, struct cfs_vfs_attr *a);
/* Writes to the staged file (no network); -ENOSPC when the staging disk is
 * full; -EBADF for a handle not opened for writing. */
int cfs_vfs_write(struct cfs_vfs *v, uint64_t ino, uint64_t fh, int64_t off, const char *buf,
		  size_t len, size_t *written);
/* close(2): the staged bytes written and journaled before it returns, so they
 * reach Drive whatever happens to this process (not flushed to disk: a
 * machine crash may lose them, as on any POSIX file system); -ENOSPC while
 * Drive's storage is full (the bytes are kept). */
int cfs_vfs_flush(struct cfs_vfs *v, uint64_t ino, uint64_t fh);
/* fsync(2): the staged bytes and the journal entry flushed to disk (safe
 * against a machine crash), then wait until the upload is durable in Drive;
 * its error. */
int cfs_vfs_fsync(struct cfs_vfs *v, uint64_t ino, uint64_t fh);
/* `colabfs sync`, first: every staged file and journal entry flushed to disk
 * (nothing to do when no entry changed since the last time).  0 or -errno. */
int cfs_vfs_w_make_durable(struct cfs_vfs *v);
/* Starts the uploaders (serving processes, after daemonizing). */
int cfs_vfs_start_uploads(struct cfs_vfs *v);
/* Wakes the uploaders to look at their queue again (a unit test moved the
 * seam's clock). */
void cfs_vfs_w_kick(struct cfs_vfs *v);
/* Whether the uploaders are idle: nothing being sent, nothing they would
 * take now (a unit test steps them). */
int cfs_vfs_w_idle(struct cfs_vfs *v);
/* `colabfs sync`: uploads at or below ino start now; their state as the JSON
 * the man page gives (files, bytes, bytes_left, uploading, waiting, failed). */
struct cfs_buf;
int cfs_vfs_sync_json(struct cfs_vfs *v, uint64_t ino, struct cfs_buf *out);
struct cfs_vfs_write_stats {
	uint64_t pending, in_flight, pending_bytes, bytes_left, failed;
	uint64_t done, bytes, retries, conflicts, writes_bytes, staging_bytes;
	uint64_t snapshots, snapshot_bytes; /* uploads of files still open (of done, bytes) */
	int64_t last_error;
};
void cfs_vfs_write_stats(struct cfs_vfs *v, struct cfs_vfs_write_stats *out);

/* Starts the memory-pressure watcher (vfs_mem.c) when cfs_vfs_opts asked for
 * one: a thread that samples memory every CFS_MEMWATCH_TICK_MS, pauses the
 * read-ahead and shrinks the cache as memwatch.h says.  Serving processes
 * only (like polling); stopped by cfs_vfs_free.  0 or -EAGAIN. */
int cfs_vfs_start_memwatch(struct cfs_vfs *v);
struct cfs_vfs_mem_stats {
	uint64_t watching;          /* 1 while the watcher runs */
	uint64_t floor, avail;      /* bytes: the floor, the last MemAvailable */
	uint64_t pressure;          /* 1 while under pressure */
	uint64_t readahead_paused;  /* 1 while read-ahead is off for memory */
	uint64_t under_ms, episodes;
	uint64_t evicted_bytes, evicted_blocks; /* evicted for pressure */
};
void cfs_vfs_mem_stats(struct cfs_vfs *v, struct cfs_vfs_mem_stats *out);

/* How the kernel is told to forget what changed in Drive (the fuse layer's
 * notify calls).  Called from the poller thread, never under a vfs lock. */
struct cfs_vfs_notify {
	void (*inode)(void *arg, uint64_t ino);                    /* attributes and pages */
	void (*entry)(void *arg, uint64_t parent, const char *name); /* a name in a folder */
	void *arg;
};

/* Starts polling the Changes API every interval_s seconds (0: never): adds,
 * removes, renames, moves, trashes and rewrites expire the folder listings
 * and kernel caches they touch, and a rewritten file is read at its new
 * revision from its next open.  The change token is kept in the cache
 * index, so a remount catches up on what changed meanwhile.  Call after
 * daemonizing (it starts a thread). */
int cfs_vfs_start_polling(struct cfs_vfs *v, long interval_s, const struct cfs_vfs_notify *n);
void cfs_vfs_poll_stats(struct cfs_vfs *v, uint64_t *polls, uint64_t *applied);

/* Whole-file checks of completely cached files against Drive's md5/sha256:
 * how many passed and how many failed (and were dropped). */
void cfs_vfs_counters(struct cfs_vfs *v, uint64_t *checked, uint64_t *mismatched);

/* Bytes cfs_vfs_read has returned: from the cache, from Drive, from staged
 * files and exports (what the kernel's page cache serves never gets here). */
uint64_t cfs_vfs_read_bytes(struct cfs_vfs *v);

/* Dataset read-ahead (see scan.h and vfs_scan.c). */
struct cfs_vfs_scan_stats {
	uint64_t scans;       /* tree scans started */
	uint64_t running;     /* now */
	uint64_t files, bytes; /* handed to the reader by tree scans */
	uint64_t used;        /* bytes of those opened by a reader while the scan ran */
	uint64_t wasted;      /* bytes of those nobody opened before the scan ended */
	uint64_t ahead;       /* bytes handed out and not opened yet, now */
	uint64_t order_files; /* files queued ahead of a reader going in listing order */
	/* order hints (vfs_hint.c) */
	uint64_t hints;         /* hints given */
	uint64_t hints_dropped; /* of those, dropped: the reader left their order */
	uint64_t hint_files, hint_bytes; /* queued for download by hints */
	uint64_t hint_used;     /* bytes of hinted files opened after they were queued */
	uint64_t hint_wasted;   /* bytes handed out and never opened (passed, or the hint ended) */
	uint64_t hint_ahead;    /* bytes handed out and not opened yet, now */
	uint64_t hint_window;   /* the window now (0: no hint) */
	uint64_t hint_files_left; /* positions of the hint not read yet, now */
};
void cfs_vfs_scan_stats(struct cfs_vfs *v, struct cfs_vfs_scan_stats *out);

/* Order hints (hint.h, vfs_hint.c): the list of files spooled as file id
 * (a number) in the folder "hints" of cache_dir, one path a line relative to
 * folder dir, becomes the mount's order hint (the last one goes); id 0
 * drops the hint.  *res: the files found, the paths that were not (or were
 * folders or Google documents), their bytes.  0, -ENOENT (no such file),
 * -EPERM (not a plain file or folder of the daemon's user or root), -EFBIG,
 * -EOPNOTSUPP (--no-dataset-readahead), -ENODATA (no cache folder) or
 * -ENOMEM. */
struct cfs_vfs_hint_result {
	uint64_t files, unknown, bytes;
};
int cfs_vfs_hint_spool(struct cfs_vfs *v, uint64_t dir, const char *cache_dir, uint64_t id,
		       struct cfs_vfs_hint_result *res);

/* Drops the cached blocks of a file, of every file below a folder, or (the
 * root) everything; reports what was freed and calls inval (may be NULL)
 * for each file whose kernel cache should be dropped too. */
typedef void (*cfs_vfs_ino_cb)(uint64_t ino, void *arg);
int cfs_vfs_evict(struct cfs_vfs *v, uint64_t ino, uint64_t *bytes, uint64_t *blocks,
		  cfs_vfs_ino_cb inval, void *arg);
/* Makes [off, off+len) of a file cached (parallel downloads) and waits;
 * *fetched: bytes downloaded. */
int cfs_vfs_warm(struct cfs_vfs *v, uint64_t ino, int64_t off, uint64_t len, uint64_t *fetched);
/* Drops least recently used blocks until the cache holds at most target bytes. */
int cfs_vfs_evict_to(struct cfs_vfs *v, uint64_t target, uint64_t *bytes, uint64_t *blocks);

#endif
