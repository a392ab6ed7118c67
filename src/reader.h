/* reader: file reads served from the block cache, misses fetched from Drive.
 *
 * Policy.  A read is split at block boundaries.  Each block is looked up in
 * the store; a hit is copied from its arena and never touches the network.
 * A miss is fetched single-flight: the first reader of a missing block
 * downloads it (one range request of the whole block) and stores it; every
 * other reader of that block waits for that download and copies from it, so
 * N concurrent readers cost one download.  If the store cannot keep the block
 * (cache full and nothing evictable) the bytes are still served from the
 * download, and the last few such blocks are kept in memory so the kernel's
 * next reads of the same block do not download it again.  A download that fails leaves no block behind; its waiters get
 * its error.  Blocks are keyed by the file's content identity (Drive id and
 * revision), so a changed file can never be served from old blocks.
 *
 * Thread-safe.  Counters for `colabfs stats`. */
#ifndef CFS_READER_H
#define CFS_READER_H

#include <stddef.h>
#include <stdint.h>

struct cfs_drive;
struct cfs_store;
struct cfs_reader;

struct cfs_reader_stats {
	uint64_t hits, misses;                 /* blocks */
	uint64_t bytes_cache, bytes_drive;     /* bytes returned to readers, by source */
	uint64_t downloads, joined, inflight;  /* block downloads, readers that joined one, now */
	uint64_t uncached;                     /* blocks served without being stored */
};

int cfs_reader_new(struct cfs_drive *d, struct cfs_store *s, struct cfs_reader **out);
void cfs_reader_free(struct cfs_reader *r);

/* Reads [off, off+len) of the file (clipped to size) into buf.  key is the
 * content identity ("ID@REV"); rev, when not NULL, the headRevisionId that
 * downloads are pinned to.  Returns 0 with *got set, or the download's error
 * (-ESTALE: the revision is no longer the file's content). */
int cfs_reader_read(struct cfs_reader *r, const char *id, const char *rev, const char *key,
		    int64_t size, int64_t off, size_t len, char *buf, size_t *got);

void cfs_reader_stats(struct cfs_reader *r, struct cfs_reader_stats *out);

#endif
