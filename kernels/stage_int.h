/* stage_int: the internals of the loader's stage, internal to libcolabfs-gpu
 * and not exported.  Two parts: what the CUDA staging (stage.cu) needs from
 * the plans of stage_cpu.c for copies straight from registered arena
 * mappings; and, for the C files only, the layout of a stage and of a plan
 * with what those files share (stage_cpu.c: open, plans, copies;
 * stage_paths.c: listings and paths; stage_hot.c: the hot blocks).
 *
 * A direct piece is a resident piece that is a whole block (so its crc32c
 * can be checked on the copied bytes) and that the hot set does not hold.
 * The caller DMAs it from the registered mapping, checks the crc of the copy
 * on the device, then calls cfs_stage_direct_check, which re-reads the rows
 * in a fresh transaction (the seqlock check of stage.h).  A piece whose crc
 * or row check fails is copied again with cfs_stage_copy_part (host path).
 * The device crc is needed, not only the row check: a registered mapping of
 * a slot the daemon punched keeps the old pages pinned, so a DMA may read a
 * previous block's bytes although the row is unchanged. */
#ifndef CFS_STAGE_INT_H
#define CFS_STAGE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "stage.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cfs_stage_direct {
	const unsigned char *src; /* the block's first byte in the arena mapping */
	const void *map;          /* that mapping (base, len) for registration */
	size_t maplen;
	uint64_t dst;             /* offset in the batch */
	uint32_t len, crc;
	size_t piece;             /* index in the plan */
};

unsigned cfs_stage_flags(const struct cfs_stage *s);
/* The direct pieces of p (malloc'd array in *out, count in *n; may be 0). */
int cfs_stage_direct_list(struct cfs_stage *s, struct cfs_stage_plan *p,
			  struct cfs_stage_direct **out, size_t *n);
/* ok[i] = 1 when piece d[i]'s row is unchanged now; counts retries and the
 * cached pieces/bytes of those that are. */
int cfs_stage_direct_check(struct cfs_stage *s, struct cfs_stage_plan *p,
			   const struct cfs_stage_direct *d, size_t n, unsigned char *ok);
/* cfs_stage_copy_part that leaves out the pieces with skip[piece] != 0
 * (skip NULL: none); their bytes in dst are left as they were. */
int cfs_stage_copy_part_skip(struct cfs_stage *s, struct cfs_stage_plan *p, uint64_t from,
			     uint64_t len, void *dst, const unsigned char *skip);
size_t cfs_stage_plan_pieces(const struct cfs_stage_plan *p);

#ifdef __cplusplus
}
#endif

#ifndef __cplusplus
/* ---- the stage and its plans (stage_cpu.c, stage_paths.c, stage_hot.c) ---- */

#include <pthread.h>
#include <sys/stat.h>

#include "format.h"
#include "hot.h"

struct cfs_cview;
struct cfs_cview_txn;
struct listing; /* a decoded stored listing (stage_paths.c) */

#define LCACHE_MAX 64  /* decoded listings kept */

struct cfs_stage {
	struct cfs_cview *cv;
	char *mnt;        /* as given, no trailing slash */
	char *mnt_real;   /* realpath of it */
	unsigned flags;
	uint32_t bs;
	pthread_mutex_t lock; /* listing cache and root choice */
	struct listing *lc[LCACHE_MAX];
	size_t nlc;
	char *root_hint;  /* content id of the root that resolved last */
	struct cfs_stage_stats st;
	cfs_stage_hook_fn hook;
	void *hook_arg;
	/* hot blocks: hot_mu serializes refreshes and guards counts and the
	 * settings; hot_rw guards the set and its memory (readers: copies) */
	pthread_mutex_t hot_mu;
	pthread_rwlock_t hot_rw;
	uint64_t hot_budget;
	int64_t hot_at_ms, hot_every_ms; /* last refresh (0: never), interval */
	struct cfs_hot_counts counts;
	struct cfs_hot_set hot;
	unsigned char *hot_mem;
	int hot_mem_cuda;
};

struct piece {
	uint64_t dst;      /* offset in the batch */
	uint64_t block;
	uint32_t boff, len;
	uint32_t range;    /* index of its range */
	int resident;
	struct cfs_fmt_row row;
};

struct prange {
	char *path;        /* full path through the mount */
	char *key;         /* content key, NULL when not resolved */
	uint64_t off, len, dst;
	int fd;            /* through the mount, opened on first need */
};

struct cfs_stage_plan {
	size_t n, np;
	struct prange *r;
	struct piece *p;
	uint64_t bytes, resident;
};

#define STAT_ADD(s, f, v) __atomic_fetch_add(&(s)->st.f, (v), __ATOMIC_RELAXED)

/* stage_paths.c */
void cfs_stage_listing_free(struct listing *l);
/* The content key of rel if the stored listings name it and agree with st;
 * else *key stays NULL.  Takes s->lock. */
int cfs_stage_resolve(struct cfs_stage *s, struct cfs_cview_txn *t, const char *rel,
		      const struct stat *st, char **key);
/* The path relative to the mountpoint, or NULL when path is outside it. */
const char *cfs_stage_relative(const struct cfs_stage *s, const char *path);

/* stage_hot.c */
void cfs_stage_hot_mem_free(unsigned char *p, int cuda);
/* This stage's access counts: one per block a plan touches. */
void cfs_stage_hot_count_plan(struct cfs_stage *s, const struct cfs_stage_plan *p);
/* Chooses the hot set again when the refresh interval has passed. */
void cfs_stage_hot_maybe_refresh(struct cfs_stage *s);
/* Copies the pieces first..first+cnt of [from, to) whose write the hot set
 * holds (state[i] 1: pending) and marks them done (2); returns how many
 * pieces are still pending. */
int cfs_stage_hot_copy(struct cfs_stage *s, struct cfs_stage_plan *p, size_t first, size_t cnt,
		       uint64_t from, uint64_t to, unsigned char *dst, unsigned char *state);

/* stage_cpu.c */
/* The intersection of piece pc with batch bytes [from, to): offset into the
 * piece and length (0: none). */
uint32_t cfs_stage_clip(const struct piece *pc, uint64_t from, uint64_t to, uint32_t *skip);
#endif

#endif
