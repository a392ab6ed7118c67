/* scan: tells a dataset being scanned from a few files being read.  Pure
 * policy: no I/O, no clock (times are arguments), no locking (the caller
 * serialises).
 *
 * Policy.  Every open of a file is an event with its listing position and
 * the folders above it (up to CFS_SCAN_DEPTH, the parent first, stopping at
 * the mount's root).  Two patterns are recognised:
 *
 * - Listing order.  Opens that move forward through a folder's listing (the
 *   next file, or at most two skipped) form a streak; after the second, the
 *   next `order_ahead` x streak files of the folder (at most `order_max`) are
 *   worth fetching ahead.  Reading the first 20 files of a folder in order
 *   fetches at most about 60 more.
 *
 * - A tree scan.  A tree is a folder with what is below it.  When `trigger`
 *   distinct files below one folder have been opened within `window_ms`
 *   (in any order, by any number of processes: a shuffled DataLoader over an
 *   ImageFolder tree, a flat folder of shards), the remaining small files of
 *   that tree are worth fetching ahead, whole; of the folders above a file
 *   that cross the count at the same open, the deepest is the tree (a class
 *   folder's parent for an ImageFolder, the folder itself for a flat one).
 *   Fewer opens (`ls -l` opens nothing; reading 20 files of a 10,000-file
 *   folder opens 20) start nothing.  Readers working in parallel (a
 *   DataLoader's workers: a file opened below the folder by one process
 *   while a file below it that another process opened is still open, seen
 *   `overlap_min` times) halve the count: one reader going file by file is
 *   a person or a script as often as a dataset, several at once are a
 *   dataset.  (Processes, not files: the kernel tells a close after
 *   close(2) has returned, so one process's files overlap too.)  cfs_scan_close tells the
 *   detector a file was closed.  A running scan lives while opens keep
 *   coming below its root and ends `idle_ms` after the last one; opens below
 *   a running scan's root count for it, not towards new scans.  One folder
 *   may be excluded (`no_tree`): the top of a mount of a whole drive.
 *
 * - Sibling folders (issue 25).  An ImageFolder whose class folders sit
 *   beside unrelated ones (at the top of My Drive, where no tree may be
 *   scanned, or anywhere else) spreads its opens over many folders, each
 *   crossing the count late.  When, within `sib_window_ms`, files of at
 *   least `sib_min` child folders of one folder P were opened, and half the
 *   tree count of distinct files below P (a reader, not a person opening a
 *   file now and then), a *sibling scan* of P starts: only the children of
 *   P with a file opened in that time are scanned (cfs_scan_siblings lists
 *   them at the start),
 *   and every later open in another child of P joins that child to the
 *   scan (the advice's `join`: the child's files are fetched from its first
 *   opened file on).  A child none of whose files was opened is never
 *   fetched by it: the user's other folders beside a dataset stay where
 *   they are.  Where P may be a tree (not `no_tree`), the scan widens to
 *   the whole of P (`widen`) once P crosses the tree count, as a tree scan
 *   of P would have started then (issue 11's behaviour for `train/`).  The
 *   member opens of a sibling scan are those directly in a child of P (the
 *   file's parent's parent is P).
 *
 * Memory is fixed: CFS_SCAN_SLOTS folders are followed at once (the least
 * recently used is forgotten) and CFS_SCAN_TREES scans run at once. */
#ifndef CFS_SCAN_H
#define CFS_SCAN_H

#include <stddef.h>
#include <stdint.h>

#define CFS_SCAN_DEPTH 3
#define CFS_SCAN_SLOTS 64
#define CFS_SCAN_TREES 4
#define CFS_SCAN_RECENT 64 /* most files remembered per folder for distinctness */

struct cfs_scan_opts {
	unsigned trigger;     /* distinct files opened below a folder to start a scan (24) */
	long window_ms;       /* opens older than this are forgotten (30 s) */
	long idle_ms;         /* a scan ends this long after its last open (3 s) */
	unsigned order_ahead; /* files ahead per in-order open (3) */
	unsigned order_max;   /* most files ahead in listing order (512) */
	unsigned overlap_min; /* overlapping opens that halve the trigger (4) */
	uint64_t no_tree;     /* a folder never scanned as a tree (the top of a whole
			       * My Drive mount: a user's whole drive is no dataset); 0: none */
	unsigned sib_min;     /* child folders with an opened file for a sibling scan (3) */
	long sib_window_ms;   /* a sibling scan's half count within this long (10 s) */
};

struct cfs_scan_slot {
	uint64_t folder;     /* 0: free */
	int64_t first_ms, last_ms;
	unsigned count;      /* distinct files opened below it since first_ms */
	unsigned nrecent;
	uint64_t recent[CFS_SCAN_RECENT]; /* the last files counted (a ring) */
	int64_t recent_ms[CFS_SCAN_RECENT]; /* when each was last opened */
	size_t last_pos;     /* listing position + 1 of the last file opened in it; 0: none */
	unsigned streak;     /* in-order opens in a row */
	size_t ahead;        /* listing positions handed out ahead, up to (exclusive) */
	unsigned open_now;   /* files below it open now */
	unsigned overlaps;   /* opens counted while another process's file below it was open */
	uint32_t last_pid;   /* the process that opened a file below it last */
	uint64_t parent;     /* the folder above it (0: unknown, or the top) */
};

struct cfs_scan_tree {
	uint64_t root;       /* 0: free */
	int64_t started_ms, last_ms;
	uint64_t opens;
	int siblings;        /* a sibling scan: only the children of root that joined */
};

struct cfs_scan {
	struct cfs_scan_opts o;
	struct cfs_scan_slot slots[CFS_SCAN_SLOTS];
	struct cfs_scan_tree trees[CFS_SCAN_TREES];
};

/* One open. */
struct cfs_scan_event {
	uint64_t file;
	uint32_t pid;                     /* the opening process (0: unknown) */
	size_t pos;                       /* its position in the parent's listing */
	uint64_t anc[CFS_SCAN_DEPTH];     /* the parent first, then up */
	int nanc;
	int64_t now_ms;
};

/* What to do about it. */
struct cfs_scan_advice {
	uint64_t start;      /* non-zero: a scan of this tree starts now */
	int siblings;        /* with start: a sibling scan (cfs_scan_siblings: its children) */
	uint64_t tree;       /* non-zero: the open is below this running scan's root */
	uint64_t join;       /* non-zero: a child of the sibling scan `tree` with a file
			      * opened now (the caller adds it once) */
	uint64_t widen;      /* non-zero: the sibling scan of this folder becomes a scan of
			      * all of it */
	size_t ahead_from;   /* fetch the parent's files at listing positions */
	size_t ahead_to;     /* [ahead_from, ahead_to) ahead of the reader; empty: none */
};

/* o NULL or zero fields: the defaults above. */
void cfs_scan_init(struct cfs_scan *s, const struct cfs_scan_opts *o);
void cfs_scan_open(struct cfs_scan *s, const struct cfs_scan_event *e, struct cfs_scan_advice *a);
/* A file opened (and told to cfs_scan_open with these folders) was closed. */
void cfs_scan_close(struct cfs_scan *s, const uint64_t *anc, int nanc);
/* The caller could not hand out positions [pos, ...) of folder's advice:
 * they will be offered again. */
void cfs_scan_ahead_undo(struct cfs_scan *s, uint64_t folder, size_t pos);
/* The children of folder parent with a file opened within sib_window_ms of
 * now_ms (those the detector still follows), into out (at most cap);
 * returns how many. */
int cfs_scan_siblings(const struct cfs_scan *s, uint64_t parent, int64_t now_ms, uint64_t *out,
		      int cap);
/* Ends one running scan idle at now_ms; returns its root, or 0 when none. */
uint64_t cfs_scan_expire(struct cfs_scan *s, int64_t now_ms);
/* 1 if a scan of root is running. */
int cfs_scan_running(const struct cfs_scan *s, uint64_t root);
/* 1 if a sibling scan of root is running (not widened). */
int cfs_scan_sibling_scan(const struct cfs_scan *s, uint64_t root);
/* Number of running scans. */
int cfs_scan_count(const struct cfs_scan *s);

#endif
