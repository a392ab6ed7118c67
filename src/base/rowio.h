/* rowio: the pieces of the fixed-field rows colabfs keeps in LMDB (file
 * handle rows in nsdb.c, the write journal's entries in journal.c, the stored
 * listings in lrow.c):
 * little-endian integers (le.h) and strings as a u16 length + bytes, no NUL.
 * Header only; pure code.
 *
 * cfs_row_put_str returns 0, -EINVAL (s is cap bytes or longer) or -ENOMEM;
 * cfs_row_get_str returns 0 or CFS_E_PROTO (the row ends early, the length
 * does not fit cap, or the bytes hold a NUL): a damaged row is an error,
 * never a crash. */
#ifndef CFS_ROWIO_H
#define CFS_ROWIO_H

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "le.h"

static inline int cfs_row_put_str(struct cfs_buf *b, const char *s, size_t cap)
{
	size_t l = strnlen(s, cap);
	if (l >= cap || l > 0xffff)
		return -EINVAL;
	unsigned char h[2] = { (unsigned char)l, (unsigned char)(l >> 8) };
	int rc = cfs_buf_append(b, h, 2);
	return rc ? rc : cfs_buf_append(b, s, l);
}

/* Copies the next string of the row at *p (before end) into out (cap bytes). */
static inline int cfs_row_get_str(const unsigned char **p, const unsigned char *end, char *out,
				  size_t cap)
{
	if (end - *p < 2)
		return CFS_E_PROTO;
	size_t l = (size_t)(*p)[0] | (size_t)(*p)[1] << 8;
	*p += 2;
	if (l >= cap || (size_t)(end - *p) < l || memchr(*p, 0, l))
		return CFS_E_PROTO;
	memcpy(out, *p, l);
	out[l] = '\0';
	*p += l;
	return 0;
}

#endif
