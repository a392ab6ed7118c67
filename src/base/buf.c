/* buf: growable byte buffer (see buf.h). */
#include "buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int cfs_buf_append(struct cfs_buf *b, const void *p, size_t n)
{
	if (b->max && b->len + n > b->max)
		return -EFBIG;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *d = realloc(b->data, cap);
		if (!d)
			return -ENOMEM;
		b->data = d;
		b->cap = cap;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

void cfs_buf_reset(struct cfs_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void cfs_buf_cleanup(struct cfs_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

char *cfs_buf_steal(struct cfs_buf *b, size_t *len)
{
	char *d = b->data;
	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return d;
}
