/* stage_int: what the CUDA staging (stage.cu) needs from the plans of
 * stage_cpu.c for copies straight from registered arena mappings.  Internal
 * to libcolabfs-gpu, not exported.
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

#endif
