/* hint: an order hint, the files a reader says it will open and in which
 * order (`colabfs warm --ordered`, colabfs.prefetch, the PyTorch sampler's
 * epoch).  Pure policy: no I/O, no clock (times are arguments), no locking
 * (the caller serialises).
 *
 * Policy.  A hint is a list of files (inode number and size; a file may
 * come more than once).  Its positions are handed out for download in
 * order, as far ahead of the reader as a window of bytes allows: bytes
 * handed out and not opened yet stay under
 *     window = rate x horizon_ms, at least ahead_min, at most ahead_max,
 * where rate is the bytes of hinted files the reader opened per second
 * since its first (unknown for the first second: ahead_min).  So a reader
 * at Drive's quota gets the quota (the window grows with it), a slow one
 * (a GPU-bound training step) does not have the whole list fetched at once,
 * and what is fetched ahead never outgrows the share of the cache it was
 * given (ahead_max; the caller sizes it from the cache budget).
 *
 * An open is matched to its file's earliest position not opened yet (and
 * not passed, below):
 *   - a hit when that position is before next + slack (next: the first
 *     position not handed out yet): the reader follows the order, give or
 *     take what several workers reorder;
 *   - neutral when every position of the file was opened already (a file
 *     read again);
 *   - a miss otherwise: a file not in the hint, or one far ahead of it.
 * A hit's bytes leave the window, and the positions the reader is past are
 * forgotten: every position before the first one not opened, and any
 * position more than `slack` before the furthest hit (a worker that skipped
 * it; what was fetched for it counts as skipped bytes).  Of the last 32
 * hits and misses, `diverge` misses mean the reader follows another order:
 * cfs_hint_diverged says so and the caller drops the hint.
 *
 * Memory: 21 bytes a position and, for the map from a file to its
 * positions, 24 to 48 bytes a distinct file (about 80 MB for ImageNet's
 * 1.28 million files). */
#ifndef CFS_HINT_H
#define CFS_HINT_H

#include <stddef.h>
#include <stdint.h>

struct cfs_hint_opts {
	uint64_t ahead_max; /* bytes handed out and not opened, at most (required) */
	uint64_t ahead_min; /* the window before the reader's rate is known (64 MiB;
			     * at most ahead_max) */
	long horizon_ms;    /* seconds of reading the window holds (20 s) */
	unsigned slack;     /* positions past the handed-out ones a hit may be (256) */
	unsigned diverge;   /* misses among the last 32 matches that drop it (24) */
};

enum { CFS_HINT_MISS = 0, CFS_HINT_HIT = 1, CFS_HINT_NEUTRAL = 2 };

struct cfs_hint_stats {
	size_t n;               /* positions */
	size_t done;            /* positions opened or passed (a prefix) */
	size_t next;            /* the first position not handed out */
	uint64_t ahead;         /* bytes handed out and not opened */
	uint64_t window;        /* the window now */
	uint64_t handed_bytes;  /* bytes handed out, in all */
	uint64_t used_bytes;    /* of those, opened */
	uint64_t skipped_bytes; /* of those, passed over */
	uint64_t hits, misses;
};

struct cfs_hint;

/* A hint of n positions (inos[i] non-zero, sizes[i]) at now_ms.  0, -EINVAL
 * (no ahead_max, a zero ino, more than 2^31 positions) or -ENOMEM. */
int cfs_hint_new(const uint64_t *inos, const uint64_t *sizes, size_t n,
		 const struct cfs_hint_opts *o, int64_t now_ms, struct cfs_hint **out);
void cfs_hint_free(struct cfs_hint *h);

/* An open of file ino: CFS_HINT_HIT, _MISS or _NEUTRAL. */
int cfs_hint_open(struct cfs_hint *h, uint64_t ino, int64_t now_ms);

/* The next position to download now: 1 with *pos, *ino and *size set (the
 * position counts as handed out), or 0 (the window is full, or every
 * position is handed out). */
int cfs_hint_next(struct cfs_hint *h, int64_t now_ms, size_t *pos, uint64_t *ino,
		  uint64_t *size);
/* The caller could not download pos (the downloader's queue was full): it
 * is offered again. */
void cfs_hint_unnext(struct cfs_hint *h, size_t pos);
/* Every position handed out and not opened is offered again (the
 * downloader dropped what it had queued). */
void cfs_hint_rewind(struct cfs_hint *h);

/* 1 when the reader follows another order (see above). */
int cfs_hint_diverged(const struct cfs_hint *h);
/* 1 when every position was opened or passed. */
int cfs_hint_done(const struct cfs_hint *h);
void cfs_hint_stats(const struct cfs_hint *h, int64_t now_ms, struct cfs_hint_stats *out);

#endif
