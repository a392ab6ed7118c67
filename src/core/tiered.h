/* tiered: block downloads through the shared cache tier (issue 15).
 *
 * Sits in the reader's fetch seam (reader.h), under its single-flight,
 * deadlines and read-ahead, in front of the Drive download: a range the
 * reader misses is asked of the Redis Cluster (tier.h) first, block by
 * block, and only the blocks nobody has published are downloaded.
 *
 * Keys.  A block is at cfsV:BS:{ID@REV:G}:N, BS the block size ("1M",
 * "64K": mounts of other block sizes keep apart), N its number, G = N >> 6:
 * the hash tag puts 64 consecutive blocks of a revision in one slot, so one
 * MGET asks for a request's blocks, and a large file still spreads over
 * the cluster.  V is the value format: cfs2 for keyed values, cfs1 for the
 * unkeyed ones of --shared-cache-trusted (so keyed and unkeyed mounts of
 * one cluster never read, count or overwrite each other's values).  Only
 * revision-pinned reads use the tier (a file without a headRevisionId is
 * read from Drive), and a revision's bytes never change, so a block in the
 * tier can never be stale: no invalidation exists.  Values expire after
 * ttl_s (so a cluster with a volatile-* maxmemory policy can evict them).
 *
 * Values.  Anyone who can write to the cluster can write a value, so a
 * mount with a deployment key (--shared-cache-key-file, the same on every
 * mount that shares) authenticates each one (format 2, "CFB2"):
 *     0  "CFB2"                       magic and format version
 *     4  u32 LE data length
 *     8  u32 LE block size
 *    12  8 bytes: the key's id (the first 8 bytes of HMAC-SHA256(K,
 *        "colabfs shared cache key id")), so a value made under another key
 *        is told apart in the log from a forged one
 *    20  32 bytes: HMAC-SHA256(K, bytes 0..12 || u64 LE block number ||
 *        u32 LE len(ID) || ID || u32 LE len(REV) || REV || data)
 *    52  the data
 * The MAC covers the block's identity (file id, revision, number, block
 * size, format version) and its bytes: a value cannot be altered, nor a
 * valid one replayed under another key.  No crc32c: the MAC detects every
 * accident the crc did, and the local cache keeps its own crc per block.
 * Without a key (--shared-cache-trusted: only trusted writers reach the
 * cluster), format 1 as before: "CFB1", u32 LE data length, u32 LE crc32c
 * of the data, u32 LE block size, the data; it detects accidents only.
 *
 * A value that does not verify is never served.  Its verdict is counted:
 * "corrupt" (not a value of this mount's format: garbage, truncated,
 * oversized, a wrong length or block size; or, unkeyed, a crc that does
 * not match) or "forged" (keyed: a MAC that does not match, another key's
 * id, or an unkeyed value where a keyed one belongs).  Either way it is
 * logged once per file (at most 10 lines a minute; the rest are counted
 * only), the block is downloaded from Drive and published over the bad
 * value.
 *
 * Bound to Drive.  When a whole file's bytes turn out to differ from
 * Drive's checksum (vfs_file.c's check at close, the write path's copy),
 * cfs_tiered_forget deletes every value of that revision and marks it:
 * from then on this mount downloads its blocks from Drive (publishing them
 * over whatever is there), never reading the tier for it.
 *
 * Leases.  A block missing from the tier is downloaded by whoever takes its
 * lease (cfsV:BS:{ID@REV:G}:N:lease, SET NX PX lease_ms, the value this
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
struct cfs_tiered_key;

/* A deployment key (at least CFS_TIERED_KEY_MIN bytes of secret): 0,
 * -EINVAL (too short), or -ENOMEM.  _free(NULL) is safe; it wipes. */
#define CFS_TIERED_KEY_MIN 32
int cfs_tiered_key_new(const void *key, size_t n, struct cfs_tiered_key **out);
void cfs_tiered_key_free(struct cfs_tiered_key *k);
/* The key's id as 16 hex digits (cap >= 17): what a value carries, and what
 * doctor shows so that mounts can be compared without showing the key. */
void cfs_tiered_key_id(const struct cfs_tiered_key *k, char *hex, size_t cap);

struct cfs_tiered_opts {
	struct cfs_tier *tier;       /* the cluster; freed by cfs_tiered_free */
	struct cfs_tiered_key *key;  /* NULL: unkeyed values (trusted); freed by cfs_tiered_free */
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
/* Ends lease waits (they fail with -ECANCELED) and every tier call
 * (cfs_tier_cancel), so the downloads in flight go on from Drive or end;
 * for cfs_reader_opts.cancel and a server that is stopping. */
void cfs_tiered_cancel(void *io);
/* id@rev (size bytes) failed Drive's checksum: deletes every value of it
 * from the tier (stops at the first tier failure) and reads it from Drive
 * only from now on (the last 256 such revisions are remembered); for
 * cfs_reader_opts.forget. */
void cfs_tiered_forget(void *io, const char *id, const char *rev, int64_t size);

struct cfs_tiered_stats {
	uint64_t up, nodes;                 /* gauges (tier.h) */
	uint64_t hits, misses;              /* blocks asked of the tier */
	uint64_t bytes_read, bytes_written; /* block bytes from and to the tier */
	uint64_t published;                 /* blocks published */
	uint64_t lease_waits;               /* blocks waited for (another's lease) */
	uint64_t lease_wait_hits;           /* ... that came from the tier */
	uint64_t lease_timeouts;            /* ... given up on: downloaded here */
	uint64_t corrupt;                   /* values refused (format, length, crc) */
	uint64_t forged;                    /* values refused: MAC, another key, unkeyed */
	uint64_t dropped;                   /* values deleted: their file failed Drive's checksum */
	uint64_t errors;                    /* tier calls that failed */
	uint64_t bypassed;                  /* requests sent to Drive for want of the tier */
	uint64_t redirects, refreshes;      /* tier.h */
	uint64_t replica_reads;             /* tier.h: reads a replica answered for its master */
	uint64_t redirects_refused;         /* tier.h: redirects and map nodes outside the cluster */
};
void cfs_tiered_stats(struct cfs_tiered *t, struct cfs_tiered_stats *out);

/* The tier under t (for doctor-like checks). */
struct cfs_tier *cfs_tiered_tier(struct cfs_tiered *t);

/* The value format (see Values above), pure, for the fetches and tests.
 * A value's identity: */
struct cfs_tiered_block {
	const char *id, *rev;  /* Drive id and revision */
	uint64_t index;        /* the block's number */
	uint32_t block_size;
};
#define CFS_TIERED_HEADER 16     /* format 1 (unkeyed) */
#define CFS_TIERED_HEADER_MAC 52 /* format 2 (keyed) */
/* The header length of values made with key (NULL: unkeyed). */
size_t cfs_tiered_header(const struct cfs_tiered_key *key);
/* Writes the value of data (len bytes) into out (cfs_tiered_header(key) +
 * len bytes): 0, or -ENOMEM (the MAC could not be made). */
int cfs_tiered_value_encode(const struct cfs_tiered_key *key, const struct cfs_tiered_block *b,
			    unsigned char *out, const void *data, uint32_t len);
/* The verdict on v (n bytes, any bytes at all) as block b of want_len
 * bytes for a mount with key (NULL: unkeyed); its data is at
 * v + cfs_tiered_header(key) when CFS_TIERED_OK. */
enum cfs_tiered_verdict {
	CFS_TIERED_OK = 0,
	CFS_TIERED_CORRUPT,   /* not a value of this format, or its crc fails (unkeyed) */
	CFS_TIERED_FORGED,    /* keyed: the MAC does not match */
	CFS_TIERED_OTHER_KEY, /* keyed: made under another key (or its id forged) */
	CFS_TIERED_UNKEYED,   /* keyed: an unkeyed (format 1) value */
};
enum cfs_tiered_verdict cfs_tiered_value_check(const struct cfs_tiered_key *key,
					       const struct cfs_tiered_block *b, const void *v,
					       size_t n, uint32_t want_len);
/* Format 1 only (as before keys): cfs_tiered_encode writes 16 + len bytes;
 * cfs_tiered_check returns 0 when v is a valid value of want_len bytes for
 * block_size, else CFS_E_PROTO. */
void cfs_tiered_encode(unsigned char *out, const void *data, uint32_t len, uint32_t block_size);
int cfs_tiered_check(const void *v, size_t n, uint32_t want_len, uint32_t block_size);

#endif
