/* reader: file reads served from the block cache, misses fetched from Drive
 * by a pool of download workers, with prefetch for sequential readers.
 *
 * Policy.  A read is split at block boundaries.  Each block is looked up in
 * the store; a hit is copied from its arena and never touches the network.
 * Missing blocks are fetched single-flight: every block being downloaded has
 * one flight that any number of readers join, so N concurrent readers of a
 * block cost one download.  Downloads are jobs run by worker threads; a
 * job covers a run of consecutive missing blocks in one range request
 * (requests grow with a sequential reader, up to max_request bytes); its
 * bytes stream into a one-block buffer, and each block is published (stored,
 * its waiters woken) as soon as it is complete, not when the request ends.
 * A reader's own miss is an urgent job; prefetch jobs wait behind urgent
 * ones and stop when prefetch_budget bytes are queued or running.  There
 * are `workers` + 1 threads: prefetch uses at most `workers`, the last one is
 * kept for readers' misses.  Joining a
 * queued prefetch job makes it urgent.
 * A job that starts is shared out: the worker keeps at most the work
 * outstanding (queued plus still to arrive) divided by the workers (at least
 * 4 blocks) and queues the rest, which the next worker splits again; so one
 * stream's large requests keep every connection busy while it ramps up and
 * near the end of a file, where equal shares finish together, and no byte is
 * requested twice.
 *
 * Prefetch.  Each open file has a stream that watches its reads: a read that
 * starts within two blocks of where the previous one ended (the kernel
 * reorders its read-ahead a little) is sequential and multiplies the window
 * of blocks fetched ahead by 4 (4 blocks up to 2 x workers x the stream's
 * request size, at most a quarter of the cache); a reader at offset 0 going
 * forward reaches the whole window in five reads.  The window is refilled
 * whenever a request's worth of it is missing, in requests of up to
 * max(max_request, 64 MiB): a TTFB per 16 MiB costs 13% at 25 MB/s, per
 * 64 MiB 4%.  Any other read is random and closes the window, so random
 * readers waste no bandwidth.  A small file (up to max_request) is fetched
 * whole on its first miss, and a reader's own miss asks for at most
 * max_request.
 *
 * Dataset scans.  cfs_reader_scan queues a whole small file for a dataset
 * scan (vfs_scan.c decides which): scan jobs have their own queue and up to
 * scan_workers connections of their own (48 by default: Drive's 200
 * requests/s at ~240 ms each), so they can run at the request budget
 * without taking a connection from a sequential stream or a reader.  They
 * go after readers' misses and sequential read-ahead, they take pacing
 * tokens as background calls (pace.h: a reader's miss is never paced
 * behind them), a reader that wants a queued one promotes it to urgent,
 * and cfs_reader_scan_cancel drops the queued ones when the scan ends.
 *
 * If the store cannot keep a block (cache full and nothing evictable) its
 * bytes are still served, and the last few such blocks are kept in memory so
 * the kernel's next reads of the same block do not download it again.  A
 * download that fails leaves no block behind; its waiters get its error.
 * Blocks are keyed by content identity (Drive id and revision) and downloads
 * are pinned to the revision, so a changed file is never mixed with the old.
 *
 * The seam.  The reader's only collaborators outside the store are its
 * Drive download and its clock, and both come through cfs_reader_opts:
 * fetch (cfs_drive_read_sink's contract, drive.h), cancel (called by
 * cfs_reader_free once the workers are told to stop, so a transfer in flight
 * ends and they can be joined) and now_ms (a monotonic clock: how long a permanent refusal is
 * believed), each called with the opaque io.  NULL means the real thing:
 * cfs_drive_read_sink on the Drive client given to cfs_reader_new, no cancel
 * (a mount cancels its client itself, cfs_drive_cancel, before freeing:
 * the client is shared), CLOCK_MONOTONIC.  tests/unit/test_reader.c drives
 * the reader with a scripted fake over a real store.
 *
 * Thread-safe.  Counters for `colabfs stats`. */
#ifndef CFS_READER_H
#define CFS_READER_H

#include <stddef.h>
#include <stdint.h>

#include "drive.h"

struct cfs_drive;
struct cfs_store;
struct cfs_reader;
struct cfs_reader_stream;

/* What cfs_drive_read_sink does, for the download of [off, off+len) of
 * blob id at revision rev (NULL: the current content); io is opts.io. */
typedef int (*cfs_reader_fetch_fn)(void *io, const char *id, const char *rev, int64_t size,
				   int64_t off, size_t len, cfs_drive_sink_fn sink, void *arg,
				   size_t *got, int prio);

/* The real thing: cfs_drive_read_sink on io, a struct cfs_drive (for a
 * seam that wraps it, tiered.h). */
int cfs_reader_drive_fetch(void *io, const char *id, const char *rev, int64_t size, int64_t off,
			   size_t len, cfs_drive_sink_fn sink, void *arg, size_t *got, int prio);

struct cfs_reader_opts {
	int workers;              /* download threads (--max-connections); default 16 */
	uint64_t max_request;     /* largest range request in bytes; default 16 MiB */
	uint64_t prefetch_budget; /* prefetch bytes queued or running; default: the window */
	int scan_workers;         /* connections for dataset scans; default 48 */
	/* the seam (see above); NULL: the real Drive client and clock */
	cfs_reader_fetch_fn fetch; /* a range download, as cfs_drive_read_sink */
	void (*cancel)(void *io);  /* end the transfers in flight: -ECANCELED */
	/* a file's bytes failed Drive's checksum: drop the copies the seam
	 * keeps of that revision and take it from Drive from now on (tiered.h) */
	void (*forget)(void *io, const char *id, const char *rev, int64_t size);
	int64_t (*now_ms)(void *io); /* monotonic milliseconds */
	/* block of key was not in the store for a read; called before the
	 * reader looks for a download to join (tests: another reader's download
	 * finishes there).  NULL: nothing. */
	void (*missed)(void *io, const char *key, uint64_t block);
	void *io;                  /* their argument (fetch NULL: fetch gets the client) */
};

/* What to read: a blob's identity. */
struct cfs_reader_file {
	const char *id;   /* Drive id */
	const char *rev;  /* headRevisionId downloads are pinned to, or NULL */
	const char *key;  /* cache key ("ID@REV") */
	int64_t size;
};

struct cfs_reader_stats {
	uint64_t hits, misses;                 /* blocks */
	uint64_t bytes_cache, bytes_drive;     /* bytes returned to readers, by source */
	uint64_t downloads, joined, inflight;  /* blocks downloaded, readers that joined, now */
	uint64_t requests;                     /* range requests (jobs) */
	uint64_t prefetched;                   /* blocks fetched ahead of readers */
	uint64_t uncached;                     /* blocks served without being stored */
	uint64_t queued_bytes;                 /* prefetch bytes queued or running now */
	uint64_t scan_jobs;                    /* range requests queued for dataset scans */
	uint64_t scan_queued;                  /* of those, queued or running now */
	uint64_t ra_pauses;                    /* times read-ahead was paused */
};

/* d may be NULL when o->fetch is set. */
int cfs_reader_new(struct cfs_drive *d, struct cfs_store *s, const struct cfs_reader_opts *o,
		   struct cfs_reader **out);
/* Stops the workers (queued jobs fail with -ECANCELED), calls opts.cancel,
 * waits for them and frees.  No read or warm may be running. */
void cfs_reader_free(struct cfs_reader *r);

struct cfs_reader_stream *cfs_reader_stream_new(void);
void cfs_reader_stream_free(struct cfs_reader_stream *s);

/* f's bytes failed Drive's checksum: opts.forget (when set) drops the
 * seam's copies of it.  The local cache is the caller's to evict. */
void cfs_reader_forget(struct cfs_reader *r, const struct cfs_reader_file *f);

/* Reads [off, off+len) of f (clipped to its size) into buf; stream (may be
 * NULL) is the open file's access pattern.  Returns 0 with *got set, or the
 * download's error (-ESTALE: the revision is no longer the file's content).
 * Never a short read except at the end of the file. */
int cfs_reader_read(struct cfs_reader *r, struct cfs_reader_stream *stream,
		    const struct cfs_reader_file *f, int64_t off, size_t len, char *buf,
		    size_t *got);

/* Queues a background download of the whole file (folder-order prefetch of
 * the next small files).  Returns at once; 0 or -EBUSY over budget. */
int cfs_reader_prefetch(struct cfs_reader *r, const struct cfs_reader_file *f);

/* Queues a background download of the whole of a small file f (at most
 * max_request bytes) for a dataset scan.  Returns 1 when something was
 * queued, 0 when there is nothing to do (cached, in flight, too large, or
 * refused by Drive lately), -EBUSY when the scan queue is full (ask later). */
int cfs_reader_scan(struct cfs_reader *r, const struct cfs_reader_file *f);
/* Drops the dataset scan jobs not started yet. */
void cfs_reader_scan_cancel(struct cfs_reader *r);
/* on: no read-ahead of any kind (sequential window, folder prefetch, dataset
 * scan: cfs_reader_prefetch and cfs_reader_scan answer -EBUSY) and the scan
 * jobs not started yet are dropped; readers' misses and warm go on.  Queued
 * sequential read-ahead (at most prefetch_budget) still runs.  off: as
 * before.  For memory pressure (memwatch.h). */
void cfs_reader_pause_readahead(struct cfs_reader *r, int on);

/* Makes [off, off+len) of f cached, with full parallelism, and waits.
 * Returns 0 or the first download error; *fetched gets the bytes downloaded. */
int cfs_reader_warm(struct cfs_reader *r, const struct cfs_reader_file *f, int64_t off,
		    uint64_t len, uint64_t *fetched);

void cfs_reader_stats(struct cfs_reader *r, struct cfs_reader_stats *out);
/* The largest file cfs_reader_scan fetches (max_request). */
uint64_t cfs_reader_small_max(const struct cfs_reader *r);

#endif
