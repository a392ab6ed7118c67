/* tiered: block downloads through the shared cache tier (issue 15).
 *
 * Sits in the reader's fetch seam (reader.h), under its single-flight,
 * deadlines and read-ahead, in front of the Drive download: a range the
 * reader misses is asked of the Redis Cluster (tier.h) first, block by
 * block, and only the blocks nobody has published are downloaded.
 *
 * Keys.  A block is at cfs1:BS:{ID@REV:G}:N, BS the block size ("1M",
 * "64K": mounts of other block sizes keep apart), N its number, G = N >> 6:
 * the hash tag puts 64 consecutive blocks of a revision in one slot, so one
 * MGET asks for a request's blocks, and a large file still spreads over
 * the cluster.  Only revision-pinned reads use the tier (a file without a
 * headRevisionId is read from Drive), and a revision's bytes never change,
 * so a block in the tier can never be stale: no invalidation exists.
 * Value: "CFB1", u32 LE data length, u32 LE crc32c of the data, u32 LE
 * block size, then the data; anything else, a wrong length or a crc that
 * does not match is "corrupt": counted, and fetched from Drive again (and
 * published over the bad value).  Values expire after ttl_s (so a cluster
 * with a volatile-* maxmemory policy can evict them too).
 *
 * Leases.  A block missing from the tier is downloaded by whoever takes its
 * lease (cfs1:BS:{ID@REV:G}:N:lease, SET NX PX lease_ms, the value this
 * mount's owner id; a lease found holding it is a dead predecessor's, and
 * ours); the others wait for the value (polling, 5 ms
 * doubling to 50 ms), for at most wait_ms, or until the lease is gone
 * without a value (its holder failed: take it), then download it
 * themselves.  The holder publishes each block as it completes (SET PX,
 * and its lease deleted when still its own) and releases the leases of
 * blocks it did not get.
 *
 * Failures.  Reads (MGET) go to a replica while a slot's master fails
 * (tier.h); any tier failure (down, refused, timeout, a bad reply) makes
 * the rest of the request a plain Drive download, counted as bypassed: the
 * tier costs speed, never an error or a wrong byte.
 *
 * Thread-safe: the reader's workers call cfs_tiered_fetch at once. */
#ifndef CFS_TIERED_H
#define CFS_TIERED_H

#include <stddef.h>
#include <stdint.h>

#include "reader.h"

struct cfs_tier;
struct cfs_tiered;

struct cfs_tiered_opts {
	struct cfs_tier *tier;       /* the cluster; freed by cfs_tiered_free */
	cfs_reader_fetch_fn fetch;   /* the download underneath (Drive) */
	void *io;                    /* its argument */
	uint32_t block_size;         /* the store's */
	int lease_ms;                /* a lease's lifetime; default 10000 */
	int wait_ms;                 /* longest wait for another's lease; default lease_ms */
	long ttl_s;                  /* values expire after this; default 7 days */
	/* this mount's lease value, the same for every server of one mount (a
	 * server restarted after a crash takes over the leases its dead
	 * predecessor held instead of waiting them out); NULL: random */
	const char *owner;
};

int cfs_tiered_new(const struct cfs_tiered_opts *o, struct cfs_tiered **out);
void cfs_tiered_free(struct cfs_tiered *t);

/* cfs_reader_fetch_fn, io = the cfs_tiered. */
int cfs_tiered_fetch(void *io, const char *id, const char *rev, int64_t size, int64_t off,
		     size_t len, cfs_drive_sink_fn sink, void *arg, size_t *got, int prio);
/* Ends lease waits (they fail with -ECANCELED); for cfs_reader_opts.cancel. */
void cfs_tiered_cancel(void *io);

struct cfs_tiered_stats {
	uint64_t up, nodes;                 /* gauges (tier.h) */
	uint64_t hits, misses;              /* blocks asked of the tier */
	uint64_t bytes_read, bytes_written; /* block bytes from and to the tier */
	uint64_t published;                 /* blocks published */
	uint64_t lease_waits;               /* blocks waited for (another's lease) */
	uint64_t lease_wait_hits;           /* ... that came from the tier */
	uint64_t lease_timeouts;            /* ... given up on: downloaded here */
	uint64_t corrupt;                   /* values refused (format, length, crc) */
	uint64_t errors;                    /* tier calls that failed */
	uint64_t bypassed;                  /* requests sent to Drive for want of the tier */
	uint64_t redirects, refreshes;      /* tier.h */
	uint64_t replica_reads;             /* tier.h: reads a replica answered for its master */
	uint64_t redirects_refused;         /* tier.h: redirects and map nodes outside the cluster */
};
void cfs_tiered_stats(struct cfs_tiered *t, struct cfs_tiered_stats *out);

/* The tier under t (for doctor-like checks). */
struct cfs_tier *cfs_tiered_tier(struct cfs_tiered *t);

/* The value format, for tests: encodes data (len bytes) with the header
 * into out (16 + len bytes); cfs_tiered_check returns 0 when v (n bytes)
 * is a valid value of want_len bytes for block_size, else CFS_E_PROTO. */
#define CFS_TIERED_HEADER 16
void cfs_tiered_encode(unsigned char *out, const void *data, uint32_t len, uint32_t block_size);
int cfs_tiered_check(const void *v, size_t n, uint32_t want_len, uint32_t block_size);

#endif
