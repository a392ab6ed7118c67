/* buf: a growable byte buffer, always NUL-terminated for convenience.
 *
 * cfs_buf_append returns 0 or -ENOMEM; a buffer with a limit (max > 0) refuses
 * to grow past it with -EFBIG, so a misbehaving server cannot make us allocate
 * without bound. */
#ifndef CFS_BUF_H
#define CFS_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct cfs_buf {
	char *data;
	size_t len;
	size_t cap;
	size_t max; /* 0: no limit */
};

int cfs_buf_append(struct cfs_buf *b, const void *p, size_t n);
void cfs_buf_reset(struct cfs_buf *b);
void cfs_buf_cleanup(struct cfs_buf *b);
/* Takes the data out (caller frees); the buffer is left empty. */
char *cfs_buf_steal(struct cfs_buf *b, size_t *len);

/* Streamed bytes into a block: copies what fits of (*p, *n), at file
 * offset *at, into blk after its *fill bytes (blen in all), and advances
 * all four.  Returns 1 when the block is complete.  The caller has made *at
 * the block's next byte (skipping what a retry sends again). */
static inline int cfs_buf_fill_block(char *blk, size_t *fill, size_t blen, const char **p,
				     size_t *n, int64_t *at)
{
	size_t take = blen - *fill < *n ? blen - *fill : *n;
	memcpy(blk + *fill, *p, take);
	*fill += take;
	*p += take;
	*n -= take;
	*at += (int64_t)take;
	return *fill == blen;
}

#endif
