/* vfs_int: what the vfs_*.c files share (private to them; see vfs.h).
 *
 * The vfs object, the handle objects the kernel's numbers map to, the blob
 * reference a download runs on, and the helpers more than one part calls.
 * Parts: vfs.c (life cycle, root, statfs), vfs_list.c (folder listings:
 * Drive, index, install), vfs_ns.c (nodes from a restarted process,
 * attributes, lookup, folder handles), vfs_file.c (file handles, reads,
 * whole-file checks), vfs_scan.c (dataset read-ahead), vfs_ctl.c (evict,
 * warm), vfs_changes.c (the Changes API poller).  Locking: node fields under the inode table lock, as stated
 * in inode.h. */
#ifndef CFS_VFS_INT_H
#define CFS_VFS_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "drive.h"
#include "clock.h"
#include "handles.h"
#include "inode.h"
#include "journal.h"
#include "memwatch.h"
#include "reader.h"
#include "scan.h"
#include "upq.h"
#include "vfs.h"
#include "wdrive.h"

#define EXPORT_MAX (64u << 20)
#define MAX_DEPTH 128
/* How many folders up resolve_node follows stored parent rows. */
#define RESOLVE_DEPTH 64

struct scan_run;
struct cfs_hint;

/* A child of a sibling scan's root to add to its run, and the file whose
 * open joined it (vfs_scan.c). */
struct cfs_vfs_join {
	uint64_t root, child, opened;
};
#define CFS_VFS_JOINQ 256

/* The folders an open file was counted in by the detector (vfs_scan.c). */
struct cfs_vfs_scan_ref {
	uint64_t anc[CFS_SCAN_DEPTH];
	int nanc;
};

/* Dataset read-ahead (vfs_scan.c): the detector, the running scans and the
 * scanner thread; everything under lock. */
struct cfs_vfs_scanner {
	pthread_mutex_t lock;
	pthread_cond_t cond;          /* wakes the scanner: a scan starts, room ahead, stop */
	pthread_t thread;
	int started, stop, disabled;
	struct cfs_scan det;
	struct scan_run *runs[CFS_SCAN_TREES];
	uint64_t pending[CFS_SCAN_TREES]; /* roots whose run the scanner has to build */
	uint64_t small_max;           /* largest file read ahead whole */
	uint64_t ahead_max;           /* bytes queued and not opened yet, per scan */
	struct cfs_vfs_join joinq[CFS_VFS_JOINQ]; /* children joining sibling scans */
	int njoin;
	/* files opened below a scan whose run was being built (root, opened):
	 * the reader's */
	struct cfs_vfs_join early[CFS_VFS_JOINQ];
	unsigned nearly;
	struct cfs_hint *hint;        /* the order hint (vfs_hint.c), or NULL */
	uint64_t hint_gen;            /* bumped when it is replaced or dropped */
	uint64_t hint_ahead_max;      /* its window's ceiling: half the cache budget */
	struct cfs_vfs_scan_stats st;
};

/* The memory-pressure watcher (vfs_mem.c). */
struct cfs_vfs_mem {
	pthread_mutex_t lock;         /* w and the counters */
	pthread_cond_t cond;          /* stop */
	pthread_t thread;
	int ready, started, stop;
	struct cfs_memwatch w;
	uint64_t evicted_bytes, evicted_blocks;
};

/* A Drive file with content staged locally (vfs_write.c, vfs_upload.c): the
 * staged file, what the journal says of it, and the upload's progress.
 * Everything under cfs_vfs_w.lock. */
struct cfs_wfile {
	struct cfs_wfile *next;
	uint64_t ino;
	int fd;                 /* the staged file */
	uint64_t gen;           /* bumped by every change of the bytes, size or time */
	uint64_t journaled;     /* gen the journal entry was last written for */
	uint64_t durable;       /* gen known to be in Drive */
	uint64_t sending;       /* gen an upload is sending now (0: none) */
	int writers, handles;   /* open write handles; open handles of any kind */
	int unlinked;           /* removed from the namespace: never uploaded */
	int urgent;             /* fsync or sync asked: no write-back delay (never
				 * no backoff) */
	int torn;               /* a write failed (staging disk full), or the bytes were
				 * being written when a server died: never uploaded as
				 * they are; a truncate to 0 (O_TRUNC) or unlink clears it */
	struct cfs_upq_rec rq;  /* retries: class, backoff, stop (upq.h) */
	int64_t due_ms;         /* the write-back delay ends (monotonic ms) */
	int64_t sent_bytes;     /* confirmed by Drive in the upload now sending */
	uint64_t attempts;      /* uploads of it that ended (fsync waits for one) */
	/* uploads while open (vfs_snap.c): writes in progress (their bytes
	 * going into fd, the lock not held); a snapshot being copied (writes
	 * and truncates wait); when the next snapshot is due; when `colabfs
	 * sync` first asked for it and when the snapshot last in Drive was
	 * taken (monotonic ms) */
	int writing, snapping, snap_asked; /* snap_asked: sync wants a snapshot */
	int64_t open_due_ms, ask_ms, ask_seen_ms, durable_ms;
	/* what Drive holds stays a prefix of a snapshot: the size of Drive's
	 * version (as far as this mount knows), the lowest offset changed
	 * since it was sent, and since the upload running now was started
	 * (INT64_MAX: none); and whether bytes were rewritten (a write or
	 * truncate below the end: not a log) since each; kept by
	 * cfs_vfs_snap_changed */
	int64_t drive_size, lo_drive, lo_take;
	int rw_drive, rw_take;
	/* taken up from the journal by a restarted server, still open: what
	 * Drive holds is unknown until the first snapshot's copy is checked
	 * against it (Drive's md5 of that prefix, cfs_vfs_snap_check); found
	 * not to extend it, it stays out of snapshots (rw_drive) until its
	 * close's upload */
	int drive_unknown;
	struct cfs_wsnap *snap; /* NULL until the first snapshot */
	struct cfs_jent j;      /* the journal entry (its size and mtime are current) */
};

/* A consistent copy of a staged file still open for writing, kept as
 * staging file "ID.snap" and brought up to date from the bytes changed
 * since (dirty_lo on) at each snapshot.  While it is complete and newer
 * than what Drive has, and the file is being written, the journal's row is
 * a SNAPSHOT row describing it (cfs_vfs_w_put). */
struct cfs_wsnap {
	int fd;
	int sending;            /* its upload runs */
	int valid;              /* the copy holds gen, complete (else being made) */
	int64_t dirty_lo;       /* lowest offset changed since the copy (INT64_MAX: none) */
	uint64_t gen;           /* w->gen it is a copy of */
	int64_t size, mtime_ns, taken_ms;
	int64_t confirmed;      /* its upload session (a new process resumes it) */
	char uri[CFS_JOURNAL_URI_MAX];
};

/* w lock held: whether w waits for the user: a torn file, a refusal that
 * waiting cannot cure, Drive's storage full. */
static inline int cfs_wfile_needs_user(const struct cfs_wfile *w)
{
	return w->torn || (w->rq.err && (cfs_upq_stopped(&w->rq) || w->rq.last == CFS_UPQ_FULL));
}

/* w lock held: nothing left to do in Drive for w (all of it durable, what it
 * replaces gone, Drive's name and folder the ones shown here). */
static inline int cfs_wfile_settled(const struct cfs_wfile *w)
{
	return w->gen <= w->durable && !w->j.replaces[0] && !w->j.removed &&
	       (!w->j.sent_name[0] || (strcmp(w->j.name, w->j.sent_name) == 0 &&
				       strcmp(w->j.parent, w->j.sent_parent) == 0));
}

/* The write side (vfs_write.c, vfs_upload.c). */
#define CFS_VFS_MAX_UPLOADERS 16
#define CFS_VFS_CAPS 64
#define CFS_VFS_MINE 512
#define CFS_VFS_MINE_MS (10 * 60 * 1000)
#define CFS_VFS_EDIT_SLOTS 64
#define CFS_VFS_LANDED 64

struct cfs_vfs_w {
	pthread_mutex_t lock;
	pthread_cond_t cond;        /* uploaders: work; fsync waiters: a file's state changed */
	int ready, enabled, delete_permanently, nthreads, started, stop;
	long delay_ms;
	long open_ms;               /* --upload-open-files (0: off) */
	struct cfs_journal *journal;
	struct cfs_staging *stage;
	struct cfs_wfile *files;
	unsigned nfiles;            /* how many (atomic): 0 lets reads skip the lock */
	pthread_t threads[CFS_VFS_MAX_UPLOADERS];
	/* ids reserved with generateIds, not used yet */
	char (*ids)[CFS_ID_MAX];
	int nids;
	int64_t quota_full_until_ms; /* Drive said its storage is full: close/fsync ENOSPC */
	struct { char id[CFS_ID_MAX]; int can_add; int64_t at_ms; } caps[CFS_VFS_CAPS];
	int ncaps;
	int64_t q_limit, q_usage, q_at_ms; /* about.storageQuota, for statfs */
	/* items this mount changed in Drive lately (the poller leaves them) */
	struct { char id[CFS_ID_MAX]; int64_t at_ms; } mine[CFS_VFS_MINE];
	unsigned mine_next;
	/* the revisions our last uploads made (a listing fetched while one
	 * landed may name the revision before it: an open corrects the node) */
	struct { char id[CFS_ID_MAX]; char rev[CFS_ID_MAX]; int64_t size, mtime_ns; } landed[CFS_VFS_LANDED];
	unsigned landed_next;
	/* per folder (by a hash of its content id), bumped (atomic) when this
	 * mount begins to change the folder in Drive, edits its listing in
	 * memory, or sees a new file of it land in Drive: a listing fetched or
	 * loaded meanwhile may lack the change (cfs_vfs_w_edits) */
	unsigned edits[CFS_VFS_EDIT_SLOTS];
	struct cfs_vfs_write_stats st;
	struct cfs_wdrive d;        /* Drive and the clocks, for the write side */
	uint64_t rnd;               /* backoff jitter (xorshift) */
};

/* Open-less reads (vfs_pin.c): the file objects reads use, kept by a clock. */
#define CFS_VFS_PIN_FILES 256
#define CFS_VFS_RETIRE 64
#define CFS_VFS_PIN_FH (1ull << 63) /* their handle keys, and the rows' */
struct cfs_vfs_pins {
	int on;                 /* an open-less mount */
	int probe;              /* generations may be in rows (a restarted server) */
	pthread_mutex_t lock;   /* the clock */
	uint64_t key[CFS_VFS_PIN_FILES]; /* handle keys of the file objects kept; 0: free */
	unsigned char ref[CFS_VFS_PIN_FILES]; /* read since the hand last passed */
	uint64_t held[CFS_VFS_PIN_FILES]; /* bytes each one holds in the cache */
	uint64_t held_sum, held_max; /* ... in all; the most before the clock gives up more */
	uint64_t out[CFS_VFS_PIN_FILES]; /* handle keys given up, to drop after a reply */
	unsigned nout;
	unsigned hand;
};

/* vfs_retire.c: cache keys to retire once the table lock is gone. */
struct cfs_vfs_retire {
	pthread_mutex_t lock;
	unsigned head, n, queued; /* queued: n, read without the lock */
	char key[CFS_VFS_RETIRE][2 * CFS_ID_MAX + 2];
};

struct cfs_vfs {
	struct cfs_drive *drive;
	struct cfs_store *store;
	struct cfs_nsdb *ns;
	struct cfs_reader *reader;
	struct cfs_inode *tab;
	struct cfs_handles *handles; /* open files and folders by fh number */
	long dir_ttl_ms;
	struct cfs_export_map exports;
	char root_id[CFS_ID_MAX];
	uint64_t files_checked, files_mismatched; /* whole-file checks (atomic) */
	uint64_t read_bytes;        /* bytes read() returned, of every kind (atomic) */
	/* Changes API polling */
	struct cfs_vfs_notify notify;
	pthread_t poller;
	int polling, stop;
	long poll_ms;
	pthread_mutex_t poll_lock;
	pthread_cond_t poll_cond;
	uint64_t changes_applied, polls; /* stats */
	int64_t stored_valid_after; /* stored listings fetched before this (wall ms) are stale */
	struct cfs_vfs_scanner scan;
	int scan_ready;             /* scan initialised (cleaned up at free) */
	struct cfs_vfs_mem mem;
	struct cfs_vfs_w w;
	uint64_t mem_floor;
	int64_t mem_hold_ms;
	struct cfs_vfs_pins pin;
	struct cfs_vfs_retire retire;
};

enum { H_FILE = 1, H_DIR = 2 }; /* struct cfs_handle kinds */

struct cfs_vfs_dir {
	struct cfs_handle h;
	struct cfs_listing *l;
	uint64_t ino, parent;
};

/* A blob's identity copied out of its node (table lock held), so a download
 * can run without the lock. */
struct blob_ref {
	char key[2 * CFS_ID_MAX + 2]; /* block cache key: content id @ revision */
	char id[CFS_ID_MAX];
	char rev[CFS_ID_MAX];         /* headRevisionId downloads are pinned to, or "" */
	int64_t size;
};

static inline void cfs_vfs_blob_ref(const struct cfs_node *n, struct blob_ref *b)
{
	snprintf(b->key, sizeof(b->key), "%s@%s", n->content_id, n->rev);
	snprintf(b->id, sizeof(b->id), "%s", n->content_id);
	snprintf(b->rev, sizeof(b->rev), "%s", strncmp(n->rev, "r:", 2) == 0 ? n->rev + 2 : "");
	b->size = n->size;
}

/* Whether key (a blob_ref's) names n's current content and revision. */
static inline int cfs_vfs_key_is(const struct cfs_node *n, const char *key)
{
	size_t il = strlen(n->content_id);
	return strncmp(key, n->content_id, il) == 0 && key[il] == '@' &&
	       strcmp(key + il + 1, n->rev) == 0;
}

static inline struct cfs_reader_file cfs_vfs_reader_file(const struct blob_ref *b)
{
	return (struct cfs_reader_file){ b->id, b->rev[0] ? b->rev : NULL, b->key, b->size };
}

struct cfs_vfs_file {
	struct cfs_handle h;
	uint64_t ino;
	struct blob_ref b; /* what to read (size: the export's, for exports) */
	char *data; /* whole export, or NULL for blobs */
	int held;   /* cfs_store_hold taken on key */
	int used;   /* cfs_store_use taken on key (a file too large to hold) */
	struct cfs_vfs_scan_ref scan; /* what the dataset read-ahead was told at open */
	struct cfs_reader_stream *stream; /* access pattern, for prefetch */
	struct cfs_wfile *w;    /* staged content (reads and writes go there), or NULL */
	int writer;             /* opened for writing */
	unsigned pin_slot;      /* open-less reads: 1 + its place in the clock, or 0 */
	int pin_telling;        /* open-less reads: a thread tells its open (vfs_pin.c) */
};

static inline int64_t cfs_vfs_clock_ms(clockid_t c)
{
	return cfs_clock_ns(c) / 1000000;
}

/* Waits on cond (mutex held, cond on CLOCK_MONOTONIC) for at most ms < 1000
 * milliseconds. */
static inline void cfs_vfs_wait_ms(pthread_cond_t *cond, pthread_mutex_t *mu, long ms)
{
	struct timespec ts = cfs_clock_deadline(ms);
	pthread_cond_timedwait(cond, mu, &ts);
}

static inline int64_t cfs_vfs_now_ms(void)
{
	return cfs_vfs_clock_ms(CLOCK_MONOTONIC);
}

/* The content identity Drive gives (vfs_list.c): "r:" headRevisionId, else
 * "m:" md5, else "v:" version. */
void cfs_vfs_content_rev(const struct cfs_file_meta *m, char *out, size_t cap);

/* vfs_list.c: a reference to a fresh enough listing of folder ino (memory,
 * index, then Drive).  0, -ENOENT, -ENOTDIR, or Drive's error. */
int cfs_vfs_get_listing(struct cfs_vfs *v, uint64_t ino, struct cfs_listing **out);

/* vfs_ns.c: makes sure the node for ino is in the table (lock not held; may
 * do I/O).  0, -ENOENT, or Drive's error. */
int cfs_vfs_resolve_node(struct cfs_vfs *v, uint64_t ino);
/* Table lock held: the node of regular file ino, or NULL with *rc set to
 * -ENOENT (no such node) or -EISDIR. */
static inline struct cfs_node *cfs_vfs_file_node(struct cfs_vfs *v, uint64_t ino, int *rc)
{
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	if (!n || n->is_dir) {
		*rc = n ? -EISDIR : -ENOENT;
		return NULL;
	}
	return n;
}
/* Table lock held: sorts a listing about to be installed and tells each of
 * its nodes where it stands (lpos). */
static inline void cfs_vfs_listing_order(struct cfs_vfs *v, struct cfs_listing *l)
{
	cfs_listing_sort(l);
	for (size_t i = 0; i < l->n; i++) {
		struct cfs_node *c = cfs_inode_get(v->tab, l->e[i].ino);
		if (c)
			c->lpos = i;
	}
}
/* Table lock held: n's position in folder d's listing, or -1 (its own lpos
 * first: no scan of a large folder for the common case). */
static inline long cfs_vfs_listed_at(const struct cfs_node *d, const struct cfs_node *n)
{
	const struct cfs_listing *l = d->dir ? d->dir->listing : NULL;
	if (!l)
		return -1;
	if (n->lpos < l->n && l->e[n->lpos].ino == n->ino)
		return (long)n->lpos;
	return cfs_listing_find_ino(l, n->ino);
}
/* vfs_ns.c: the inode number name has in folder parent (its listing fetched
 * as lookup does).  0, -ENOENT, -ENAMETOOLONG, -ENOTDIR or Drive's error. */
int cfs_vfs_find_child(struct cfs_vfs *v, uint64_t parent, const char *name, uint64_t *ino);
/* vfs_ns.c: registers a new handle, keeping only the table's reference.
 * 0, -EEXIST or -ENOMEM. */
int cfs_vfs_add_handle(struct cfs_vfs *v, struct cfs_handle *e);
void cfs_vfs_dir_free(struct cfs_vfs_dir *d);

/* vfs_scan.c: set up (disabled: --no-dataset-readahead; whole_drive: the
 * mount's top is a whole drive, never scanned as one tree), stop and free;
 * and the hook every open of a regular file calls (lock not held). */
void cfs_vfs_scan_init(struct cfs_vfs *v, int disabled, int whole_drive);
void cfs_vfs_scan_cleanup(struct cfs_vfs *v);
/* Fills *ref with the folders the open was counted in (nanc 0: none); the
 * close gives them back, so it undoes exactly what the open did without
 * walking the parents again. */
void cfs_vfs_scan_open(struct cfs_vfs *v, uint64_t ino, uint32_t pid,
		       struct cfs_vfs_scan_ref *ref);
void cfs_vfs_scan_close(struct cfs_vfs *v, const struct cfs_vfs_scan_ref *ref);
/* Read-ahead paused for memory (the reader dropped the queued scan jobs):
 * the files a run had queued and nobody opened are handed out again when
 * it resumes (those that did arrive are skipped then, being cached). */
void cfs_vfs_scan_rewind(struct cfs_vfs *v);
/* vfs_scan.c: queues a whole file for download behind readers' misses (a
 * small one on the scan queue; any_size: a larger one as read-ahead): 1
 * queued, 0 nothing to do, -EBUSY the queue is full.  And, scan lock held:
 * starts the scanner thread if it is not running, and wakes it. */
int cfs_vfs_scan_queue(struct cfs_vfs *v, uint64_t ino, int any_size);
void cfs_vfs_scan_thread(struct cfs_vfs *v);
/* vfs_hint.c, scan lock held: an open of ino; 1 when it follows the order
 * hint (the detector is not told), 0 otherwise (a hint that diverged is
 * dropped).  The scanner's turn: queue what the hint's window allows.
 * Rewind: the reader dropped its queue, hand out again.  End: drop it. */
int cfs_vfs_hint_open(struct cfs_vfs *v, uint64_t ino);
void cfs_vfs_hint_fill(struct cfs_vfs *v);
void cfs_vfs_hint_rewind(struct cfs_vfs *v);
void cfs_vfs_hint_end(struct cfs_vfs *v, const char *why);
/* vfs_mem.c: stops the watcher (at free). */
void cfs_vfs_memwatch_stop(struct cfs_vfs *v);

/* The write side's clocks (the seam's: a unit test moves them). */
static inline int64_t cfs_vfs_w_now(struct cfs_vfs *v)
{
	return v->w.d.now_ms(v->w.d.arg);
}
static inline int64_t cfs_vfs_w_wall(struct cfs_vfs *v)
{
	return v->w.d.wall_ns(v->w.d.arg);
}

/* Whether any staged file exists (no lock: the read paths of a mount with
 * nothing staged never take w.lock; one made meanwhile is made by a create
 * or an open for writing, which the kernel orders before the reads of it). */
static inline int cfs_vfs_w_any(struct cfs_vfs *v)
{
	return __atomic_load_n(&v->w.nfiles, __ATOMIC_RELAXED) != 0;
}
/* vfs_write.c: the staged file of ino (w lock held), or NULL. */
struct cfs_wfile *cfs_vfs_w_find(struct cfs_vfs *v, uint64_t ino);
/* vfs_write.c, table lock held: a listing of folder ino being installed gets
 * the local changes Drive does not know yet (new files not uploaded, files
 * they replace hidden).  May replace *l (the old one is freed). */
int cfs_vfs_w_overlay(struct cfs_vfs *v, uint64_t ino, struct cfs_listing **l);
/* vfs_write.c: gets a staged file of node ino for a handle: existing one, or
 * the node's current content copied into a new one (trunc: empty).  Takes a
 * handle count (and a writer count with writer).  0 or -errno. */
int cfs_vfs_w_attach(struct cfs_vfs *v, uint64_t ino, int writer, int trunc,
		     struct cfs_wfile **out);
/* Gives back what cfs_vfs_w_attach took. */
void cfs_vfs_w_detach(struct cfs_vfs *v, struct cfs_wfile *w, int writer);
/* vfs_write.c: this mount changed item id in Drive (w lock not held), and
 * whether a change of id is ours: a staged file, or one of the last
 * CFS_VFS_MINE changes made within CFS_VFS_MINE_MS.  The Changes poller
 * leaves our own changes alone: the namespace has them already, and a
 * kernel invalidation of a folder or file we are writing would wait on the
 * very request that changed it (a server killed then could not exit). */
void cfs_vfs_w_mine(struct cfs_vfs *v, const char *id);
int cfs_vfs_w_is_mine(struct cfs_vfs *v, const char *id);
/* vfs_upload.c, table lock held (w lock taken): when no staged file of node
 * n remains and our last upload of it made another revision than n names
 * (the listing n came from was fetched before that upload landed), n gets
 * that revision.  Returns 1 when n changed. */
int cfs_vfs_w_fix_landed(struct cfs_vfs *v, struct cfs_node *n);
/* vfs_upload.c (w lock not held): whether one of our last uploads of Drive
 * item id made revision rev. */
int cfs_vfs_w_landed_is(struct cfs_vfs *v, const char *id, const char *rev);
/* vfs_write.c: an id reserved with generateIds (batches kept in memory). */
int cfs_vfs_w_reserve_id(struct cfs_vfs *v, char out[CFS_ID_MAX]);
/* vfs_write.c: trashes (--delete-permanently: deletes) a Drive item; one
 * already gone is 0. */
int cfs_vfs_w_remove_in_drive(struct cfs_vfs *v, const char *id);
/* vfs_write.c: drops the stored listing of a folder about to change in
 * Drive (before the change: a server death after it leaves none stale). */
void cfs_vfs_w_forget_listing(struct cfs_vfs *v, const char *content_id);
/* vfs_write.c: folder content_id changes here (cfs_vfs_w's edits), and
 * its count of such changes.  A listing taken from Drive or the index
 * while the count moved may lack a change of ours: vfs_list keeps the
 * listing in memory (edited in place) rather than install it, and does
 * not store it. */
void cfs_vfs_w_edited(struct cfs_vfs *v, const char *content_id);
unsigned cfs_vfs_w_edits(struct cfs_vfs *v, const char *content_id);
/* vfs_write.c: new file id (node ino) is in Drive now, as name in folder
 * parent_cid: the folder's listing has it without the overlay (table and w
 * locks not held). */
void cfs_vfs_w_created(struct cfs_vfs *v, uint64_t ino, const char *id, const char *name,
		       const char *parent_cid);
/* vfs_write.c: Drive's storage quota in st (cached a minute). */
void cfs_vfs_w_statfs(struct cfs_vfs *v, struct statvfs *st);
/* vfs_file.c: a file the Changes poller or a read found changed in Drive
 * gets its metadata again (files.get) before an open (or, open-less, a
 * lookup) uses it.  0 or Drive's error (-ENOENT: trashed). */
int cfs_vfs_refresh_stale(struct cfs_vfs *v, uint64_t ino);
/* vfs_file.c: gets f (ino, b set) ready to read: an export fetched whole,
 * else a stream and a hold on the blocks.  On failure f holds nothing. */
int cfs_vfs_file_start(struct cfs_vfs *v, struct cfs_vfs_file *f, const char *export_mime);
/* vfs_file.c: a file object under handle key fh reading what row r pinned
 * (not registered). */
struct cfs_nsdb_fh;
int cfs_vfs_file_from_row(struct cfs_vfs *v, uint64_t fh, const struct cfs_nsdb_fh *r,
			  struct cfs_vfs_file **out);
/* vfs_file.c: registers f, made for a handle number this process did not
 * know, and gives it with a reference in *out; when another thread
 * registered one first, f is freed and *out is that one (*made: 1 when f
 * went in).  0 or the table's error (-EEXIST: a handle of another kind). */
int cfs_vfs_file_adopt(struct cfs_vfs *v, struct cfs_vfs_file *f, struct cfs_vfs_file **out,
		       int *made);
/* vfs_file.c: reads [off, off+len) of f (a staged file, an export in
 * memory, or blocks through the reader; a revision gone from Drive marks the
 * node stale: -ESTALE). */
int cfs_vfs_file_read(struct cfs_vfs *v, struct cfs_vfs_file *f, int64_t off, size_t len,
		      char *buf, size_t *got);
/* vfs_pin.c, table lock held: the node id of n (open-less: with its
 * generation, read from its row the first time after a restart). */
uint64_t cfs_vfs_pin_node_id(struct cfs_vfs *v, struct cfs_node *n);
/* vfs_pin.c, table lock held: file n is about to show revision rev instead
 * of its own: its node id moves on, the old one keeps its revision. */
void cfs_vfs_pin_supersede(struct cfs_vfs *v, struct cfs_node *n, const char *rev);
/* vfs_retire.c (see there).  retire_rev, table lock held: file n is about
 * to show revision rev ("": it is gone): the revision it leaves is queued.
 * retire_gone, table lock held: Drive item id, which node n shows, is gone:
 * its content is queued (not a shortcut's target's).
 * retire_id, table lock not held: the same for the node showing id, and run.
 * retire_run, table lock not held: retires what is queued. */
void cfs_vfs_retire_init(struct cfs_vfs *v);
void cfs_vfs_retire_cleanup(struct cfs_vfs *v);
void cfs_vfs_retire_rev(struct cfs_vfs *v, const struct cfs_node *n, const char *rev);
void cfs_vfs_retire_gone(struct cfs_vfs *v, const struct cfs_node *n, const char *id);
void cfs_vfs_retire_id(struct cfs_vfs *v, const char *id);
/* vfs_retire.c, table lock held: file n shows revision rev from now
 * (cfs_node_set_rev's return): on an open-less mount its old node id keeps
 * the old one (cfs_vfs_pin_supersede); with retire, the old one is queued. */
int cfs_vfs_node_set_rev(struct cfs_vfs *v, struct cfs_node *n, const char *rev, int retire);
void cfs_vfs_retire_run(struct cfs_vfs *v);
/* vfs_pin.c: the file object reads of handle key fh (CFS_VFS_PIN_FH | node
 * id) use, made (not registered; the dataset read-ahead is told of it by the
 * read, see vfs_pin.c).  -ESTALE: a superseded node id whose revision is no
 * longer known. */
int cfs_vfs_pin_file(struct cfs_vfs *v, uint64_t ino, uint64_t fh, struct cfs_vfs_file **out);
/* vfs_file.c: the open file fh of ino with a reference (rebuilt after a
 * restart), given back with cfs_vfs_put_file.  -EBADF: no such handle. */
int cfs_vfs_get_file(struct cfs_vfs *v, uint64_t ino, uint64_t fh, struct cfs_vfs_file **out);
void cfs_vfs_put_file(struct cfs_vfs *v, struct cfs_vfs_file *f);
/* vfs_file.c: Drive's checksum of n's content (table lock held): sha256
 * when Drive gave one, else md5; *alg "" when it gave neither. */
void cfs_vfs_node_checksum(const struct cfs_node *n, const char **alg, char want[65]);
/* vfs_file.c: b's bytes (of node ino), as the cache gave them (whole, or
 * read for a copy: what), differ from Drive's alg checksum: counted, logged,
 * and every copy of them dropped -- the shared tier's first
 * (cfs_reader_forget: a read after this reaches Drive), then the local
 * blocks, and the kernel's pages at the next open (no keep_cache; on an
 * open-less mount, at once).  No vfs lock held. */
void cfs_vfs_checksum_failed(struct cfs_vfs *v, uint64_t ino, const struct blob_ref *b,
			     const char *alg, const char *what);
/* vfs_upload.c: start (at open), resume the journal, stop (at free). */
int cfs_vfs_w_resume(struct cfs_vfs *v, int fresh_mount, const char *owner);
void cfs_vfs_w_stop(struct cfs_vfs *v);    /* the uploaders joined */
void cfs_vfs_w_cleanup(struct cfs_vfs *v); /* after the handles: staged files closed */
/* vfs_upload.c, w lock held: drops w (staged file, journal entry) */
void cfs_vfs_w_drop(struct cfs_vfs *v, struct cfs_wfile *w);

/* vfs_snap.c: uploads of files still open for writing.  All with the w
 * lock held (snap_take drops it while copying). */
/* Writes and truncates of w wait while a snapshot of it is being copied. */
void cfs_vfs_snap_wait(struct cfs_vfs *v, struct cfs_wfile *w);
/* w's bytes from off on are about to change (a write at off, a truncate
 * to off), w->j.size still the size before. */
void cfs_vfs_snap_changed(struct cfs_wfile *w, int64_t off);
/* An upload of w starts (its bytes as of now), ends well (sent: its size). */
void cfs_vfs_snap_sending(struct cfs_wfile *w);
void cfs_vfs_snap_sent(struct cfs_wfile *w, int64_t size);
/* Whether w, open for writing and being written, is due for a snapshot
 * upload now; else *next is lowered to when it will be. */
int cfs_vfs_snap_due(struct cfs_vfs *v, struct cfs_wfile *w, int64_t now, int64_t *next);
/* Makes the snapshot (waiting for writes in progress, copying without the
 * lock), journals its SNAPSHOT row, and gives the entry to upload (*j) and
 * a descriptor of its bytes (*fd, the caller closes).  w->sending is set.
 * 0 or -errno (w->sending cleared). */
int cfs_vfs_snap_take(struct cfs_vfs *v, struct cfs_wfile *w, struct cfs_jent *j, int *fd);
/* For a file whose Drive state is unknown (drive_unknown): whether the
 * snapshot's bytes (fd, size) extend what Drive holds (its size and md5,
 * asked now; nothing for a new file).  1 yes, 0 no (not uploaded while open,
 * drive_unknown cleared), -errno when Drive could not be asked (tried again).
 * Lock not held. */
int cfs_vfs_snap_check(struct cfs_vfs *v, const struct cfs_jent *j, int fd, int64_t size);
/* The md5 (hex) of the first len bytes of staged file fd: 0, -ESTALE when it
 * is shorter, or -errno (vfs_upload.c). */
int cfs_vfs_staged_md5(int fd, int64_t len, char hex[33]);
/* A snapshot taken but not sent (cfs_vfs_snap_check said no, or failed):
 * the row no longer names its copy, w->sending cleared. */
void cfs_vfs_snap_abandon(struct cfs_vfs *v, struct cfs_wfile *w);
/* The snapshot's upload ended: rc 0 (in Drive), conflict (went to a copy). */
void cfs_vfs_snap_done(struct cfs_vfs *v, struct cfs_wfile *w, int rc, int conflict);
/* An upload of the snapshot confirmed bytes of session uri. */
void cfs_vfs_snap_progress(struct cfs_vfs *v, struct cfs_wfile *w, const char *uri,
			   int64_t confirmed);
/* The snapshot's copy and state go (the last writer closed, w dropped). */
void cfs_vfs_snap_free(struct cfs_vfs *v, struct cfs_wfile *w);
/* `colabfs sync`: whether w still waits for an upload; one being written,
 * for one of its bytes as of the sync's first ask (a snapshot taken since). */
int cfs_vfs_snap_sync_pending(struct cfs_vfs *v, struct cfs_wfile *w, int64_t now);
/* Journals w's entry (e NULL: w->j), as a SNAPSHOT row while a snapshot is
 * being uploaded and w is being written.  0 or a journal error. */
int cfs_vfs_w_put(struct cfs_vfs *v, struct cfs_wfile *w, const struct cfs_jent *e);
/* Replay: a SNAPSHOT row becomes the entry of its snapshot's bytes (a fresh
 * mount: uploaded; the bytes written after it kept aside) or of the file
 * being written (a restarted server); a snapshot copy left by any other
 * row goes. */
void cfs_vfs_snap_replay(struct cfs_vfs *v, struct cfs_jent *e, int fresh_mount);

/* vfs_file.c */
void cfs_vfs_file_free(struct cfs_vfs *v, struct cfs_vfs_file *f, int check);
/* Unmount: frees a handle the kernel never released (a cfs_handles_free drop). */
void cfs_vfs_drop_handle(struct cfs_handle *e, void *arg);

#endif
