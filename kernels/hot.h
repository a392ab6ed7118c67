/* hot: the policy pieces of the loader's pinned hot-block cache (internal to
 * libcolabfs-gpu; used by stage_hot.c, tested by tests/unit/test_hot.c).
 *
 * Policy.  A budget of pinned host memory (COLABFS_GPU_PINNED) holds the most
 * used blocks of the cache across epochs.  A block's score is the number of
 * times the daemon served it (heat.dat, cache/heat.h: reads through the mount
 * by any process) plus the number of times this loader planned it (the
 * loader copies straight from the arenas, which the daemon never sees).
 * Selection sorts by score, highest first (ties: the older write, i.e. the
 * lower generation, first, so the choice is deterministic), and packs greedily:
 * a block that does not fit in what is left is skipped and smaller ones after
 * it may still go in.  Blocks never accessed (score 0) are not taken.
 *
 * The hot set is a table by generation: a generation names exactly one write
 * of one block (store.h), so an entry whose generation, slot, class, length
 * and crc equal a plan's row holds exactly the bytes that row describes, and
 * can be used instead of the arena with no torn-read risk (the hot copy is
 * private memory, validated when it was filled).
 *
 * Nothing here locks; the caller does.  Functions return 0 or -errno
 * (-EINVAL, -ENOMEM). */
#ifndef CFS_HOT_H
#define CFS_HOT_H

#include <stddef.h>
#include <stdint.h>

struct cfs_hot_cand {
	uint64_t score;
	uint64_t gen;   /* tie-break */
	uint32_t len;
	uint32_t idx;   /* the caller's index */
};

/* Sorts c by score and packs into budget as above: the chosen candidates end
 * up in c[0..return), their bytes in *bytes. */
size_t cfs_hot_select(struct cfs_hot_cand *c, size_t n, uint64_t budget, uint64_t *bytes);

/* Access counts of this process by a 64-bit hash of (content key, block). */
struct cfs_hot_counts {
	uint64_t *h;      /* 0 = empty slot */
	uint32_t *n;
	size_t cap, used; /* cap: power of two */
};
uint64_t cfs_hot_hash(const char *key, uint64_t block); /* never 0 */
int cfs_hot_count_add(struct cfs_hot_counts *t, uint64_t hash);
uint32_t cfs_hot_count_get(const struct cfs_hot_counts *t, uint64_t hash);
void cfs_hot_counts_free(struct cfs_hot_counts *t);

/* One block held in pinned memory. */
struct cfs_hot_ent {
	uint64_t gen, slot, off; /* off: where its bytes are in the hot buffer */
	uint32_t len, crc;
	uint8_t cls;             /* size class code */
};

/* The hot set: entries by generation (open addressing). */
struct cfs_hot_set {
	struct cfs_hot_ent *e;
	size_t cap, n;
};
int cfs_hot_set_init(struct cfs_hot_set *s, size_t n);
int cfs_hot_set_add(struct cfs_hot_set *s, const struct cfs_hot_ent *e);
/* The entry of this write if every field matches, else NULL. */
const struct cfs_hot_ent *cfs_hot_set_find(const struct cfs_hot_set *s, uint64_t gen,
					   uint64_t slot, uint8_t cls, uint32_t len, uint32_t crc);
void cfs_hot_set_free(struct cfs_hot_set *s);

#endif
