/* stage: the GPU loader's view of a running mount's block cache — plan a
 * batch of file ranges and copy their bytes, straight from the cache arenas
 * where the blocks are resident, through the mount where they are not.
 *
 * This is a separate library (libcolabfs-gpu.so) used by another process
 * than the daemon (a training job).  It opens the cache folder read-only: an
 * LMDB reader on index.mdb (MDB_RDONLY | MDB_NOSUBDIR | MDB_NOTLS, next to the
 * daemon's writer, which keeps running and writing) and read-only shared
 * mappings of the arena files.  It never writes to the cache; the process
 * needs the same uid as the daemon (the files are 0600, and an LMDB reader
 * takes a slot in index.mdb-lock).  One process may hold one stage per cache
 * folder (LMDB forbids opening an environment twice in a process): a second
 * cfs_stage_open of the same folder gives -EBUSY.
 *
 * Path -> content key.  A path under the mountpoint is resolved by walking the
 * listings the daemon stores ("dirs": folder content id -> lrow.h row) from
 * the root ("meta" rows "root:<asked>"; when several roots are stored, the one
 * whose walk reaches the file is taken), by name, component by component.  The
 * leaf entry is then checked against stat() of the path through the mount —
 * same inode number, size and mtime — so a stored listing that is older than
 * what the mount serves is never trusted: such a file (and exported Google
 * files, which have no blocks) is read through the mount.  Stat is the
 * authority; listings only name the content key "<content id>@<rev>".
 * (The alternative, inode -> Drive id via "inos", misses the revision, which
 * only the listing row holds, so it would need the listing anyway.)
 *
 * Torn reads.  The daemon may evict a block or reuse its slot at any time.
 * A plan records each resident block's row (slot, generation, length, crc).
 * The copy memcpy's from the arena mapping, checks the crc32c (unless
 * CFS_STAGE_NO_VERIFY), then re-reads every copied block's row in a fresh read
 * transaction begun after the copies (seqlock style): a row that is gone or
 * names another slot or generation means the bytes may be torn, so the block
 * is looked up again and copied again (counted in retries), and read through
 * the mount when it is no longer cached.  The daemon deletes a row before it
 * reuses the slot, so an unchanged row after the copy proves the bytes.  A crc
 * mismatch reads the block through the mount (the daemon then finds the bad
 * block itself, drops and refetches it).  Reads through the mount make the
 * daemon fetch and cache the blocks, so the next epoch finds them resident.
 *
 * Thread rules: every function may be called from any thread; one plan is
 * used by one thread at a time.  Functions return 0 or -errno: -EINVAL (bad
 * arguments, a path outside the mount), -ENOENT/-EISDIR (from stat of a
 * path), -EBUSY (folder already open in this process), -ENOMEM, -EIO (index or
 * arena failure, or a short read through the mount).  No CUDA types here: the
 * CUDA staging lives in stage_gpu.h. */
#ifndef CFS_STAGE_H
#define CFS_STAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CFS_GPU_API __attribute__((visibility("default")))
#else
#define CFS_GPU_API
#endif

#define CFS_STAGE_TO_EOF UINT64_MAX /* a range length: up to the end of the file */

/* flags for cfs_stage_open */
#define CFS_STAGE_NO_VERIFY 1u /* skip the crc32c check (the generation check stays) */
#define CFS_STAGE_NO_CACHE 2u  /* read everything through the mount (reference path) */

struct cfs_stage;
struct cfs_stage_plan;

/* A range of a file: path absolute under the mountpoint, or relative to it;
 * len may be CFS_STAGE_TO_EOF.  Ranges are clipped at the end of the file. */
struct cfs_stage_range {
	const char *path;
	uint64_t off;
	uint64_t len;
};

/* cache_dir NULL: the folder the mount serving mountpoint names
 * (user.colabfs.cache_dir; never a path worked out here, which another user
 * could plant): -ENODATA when the mount does not say, -EPERM when that folder
 * is not a real folder of this user or root that only its owner can write.
 * -EAGAIN while the daemon is still checking the index, -EPROTO for a
 * damaged index (cacheview.h). */
CFS_GPU_API int cfs_stage_open(const char *cache_dir, const char *mountpoint, unsigned flags,
			       struct cfs_stage **out);
CFS_GPU_API void cfs_stage_close(struct cfs_stage *s); /* NULL-safe; no plan may be in use */
CFS_GPU_API uint32_t cfs_stage_block_size(const struct cfs_stage *s);

/* Plans n ranges packed back to back into one batch buffer (range i at
 * offset dst_off(i), clipped length len(i)).  Stats every path through the
 * mount and looks up the blocks (one read transaction). */
CFS_GPU_API int cfs_stage_plan_new(struct cfs_stage *s, const struct cfs_stage_range *r, size_t n,
				   struct cfs_stage_plan **out);
CFS_GPU_API void cfs_stage_plan_free(struct cfs_stage_plan *p); /* NULL-safe */
CFS_GPU_API uint64_t cfs_stage_plan_bytes(const struct cfs_stage_plan *p); /* batch size */
CFS_GPU_API size_t cfs_stage_plan_count(const struct cfs_stage_plan *p);
/* Offset in the batch and clipped length of range i (both 0 if i is out of range). */
CFS_GPU_API uint64_t cfs_stage_plan_offset(const struct cfs_stage_plan *p, size_t i);
CFS_GPU_API uint64_t cfs_stage_plan_length(const struct cfs_stage_plan *p, size_t i);
/* Bytes the plan found resident in the cache when it was made. */
CFS_GPU_API uint64_t cfs_stage_plan_resident(const struct cfs_stage_plan *p);

/* Copies the whole batch into dst (cap >= cfs_stage_plan_bytes). */
CFS_GPU_API int cfs_stage_copy(struct cfs_stage *s, struct cfs_stage_plan *p, void *dst,
			       uint64_t cap);
/* Copies batch bytes [from, from + len) into dst (the staging ring's unit). */
CFS_GPU_API int cfs_stage_copy_part(struct cfs_stage *s, struct cfs_stage_plan *p, uint64_t from,
				    uint64_t len, void *dst);

struct cfs_stage_stats {
	uint64_t plans;          /* plans made */
	uint64_t blocks_cached;  /* block pieces copied from the arenas */
	uint64_t blocks_mount;   /* block pieces read through the mount */
	uint64_t bytes_cached, bytes_mount;
	uint64_t retries;        /* torn-read guard trips (row changed during a copy) */
	uint64_t crc_errors;     /* copied bytes that failed their crc32c */
	uint64_t unresolved;     /* ranges whose file had no usable listing entry */
	/* the pinned hot-block cache (COLABFS_GPU_PINNED; see below) */
	uint64_t hot_hits;       /* block pieces copied from the hot cache */
	uint64_t hot_misses;     /* resident pieces it did not hold (copied from the arenas) */
	uint64_t hot_bytes;      /* bytes of blocks held now (gauge) */
	uint64_t hot_blocks;     /* blocks held now (gauge) */
	uint64_t hot_refreshes;  /* times the hot set was chosen again */
	uint64_t hot_dropped;    /* chosen blocks that changed while being filled in */
	uint64_t hot_cuda;       /* 1: its memory is CUDA pinned (cudaHostAlloc), 0: plain */
};
CFS_GPU_API void cfs_stage_get_stats(struct cfs_stage *s, struct cfs_stage_stats *out);

/* Hot blocks.  With a budget of pinned memory (COLABFS_GPU_PINNED at open:
 * "2G", "512M", bytes; 0 or unset: off; or cfs_stage_set_pinned) the stage
 * keeps the most used resident blocks in page-locked host memory
 * (cudaHostAlloc where the library has CUDA, plain aligned memory otherwise)
 * across epochs, and copies from there before the arenas.  "Most used": the
 * daemon's access counts (heat.dat, cache/heat.h) plus this stage's own count
 * of plans that touched the block (policy in kernels/hot.h).  The set is
 * chosen on the first plan, again every COLABFS_GPU_PINNED_REFRESH seconds
 * (default 30) and on cfs_stage_hot_refresh; blocks are copied in with the
 * same guard as batches (crc32c always, then the row re-read in a fresh
 * transaction; a changed row drops the block).  A hot copy is used only for a
 * plan row of the same generation, slot, length and crc, i.e. the very write
 * it copied.  A refresh needs up to twice the budget while it runs. */
CFS_GPU_API int cfs_stage_set_pinned(struct cfs_stage *s, uint64_t bytes);
CFS_GPU_API int cfs_stage_hot_refresh(struct cfs_stage *s);

/* Test hook: called once per copy round between the copies and the check of
 * the rows (the moment a daemon's eviction would tear a copy); NULL to clear. */
typedef void (*cfs_stage_hook_fn)(void *arg);
CFS_GPU_API void cfs_stage_set_hook(struct cfs_stage *s, cfs_stage_hook_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif
