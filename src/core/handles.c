/* handles: open handles by number (see handles.h). */
#include "handles.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct cfs_handles {
	pthread_mutex_t lock;
	struct cfs_handle **b; /* buckets */
	size_t nb;             /* power of two */
	size_t n;
};

static size_t bucket(const struct cfs_handles *h, uint64_t fh)
{
	fh ^= fh >> 33;
	fh *= 0xff51afd7ed558ccdULL;
	fh ^= fh >> 33;
	return (size_t)fh & (h->nb - 1);
}

int cfs_handles_new(struct cfs_handles **out)
{
	struct cfs_handles *h = calloc(1, sizeof(*h));
	if (h) {
		h->nb = 256;
		h->b = calloc(h->nb, sizeof(*h->b));
	}
	if (!h || !h->b) {
		free(h);
		return -ENOMEM;
	}
	pthread_mutex_init(&h->lock, NULL);
	*out = h;
	return 0;
}

void cfs_handles_free(struct cfs_handles *h, void (*drop)(struct cfs_handle *e, void *arg),
		      void *arg)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->nb; i++) {
		struct cfs_handle *e = h->b[i];
		while (e) {
			struct cfs_handle *next = e->next;
			e->next = NULL;
			if (drop)
				drop(e, arg);
			e = next;
		}
	}
	free(h->b);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

/* Lock held.  The slot that points at fh's handle, or at the chain's end. */
static struct cfs_handle **find(struct cfs_handles *h, uint64_t fh)
{
	struct cfs_handle **p = &h->b[bucket(h, fh)];
	while (*p && (*p)->fh != fh)
		p = &(*p)->next;
	return p;
}

/* Lock held.  Doubles the buckets; a failed allocation keeps the old ones
 * (longer chains, still correct). */
static void grow(struct cfs_handles *h)
{
	size_t nb = h->nb * 2;
	struct cfs_handle **b = calloc(nb, sizeof(*b));
	if (!b)
		return;
	struct cfs_handle **old = h->b;
	size_t onb = h->nb;
	h->b = b;
	h->nb = nb;
	for (size_t i = 0; i < onb; i++) {
		struct cfs_handle *e = old[i];
		while (e) {
			struct cfs_handle *next = e->next;
			size_t k = bucket(h, e->fh);
			e->next = b[k];
			b[k] = e;
			e = next;
		}
	}
	free(old);
}

int cfs_handles_add(struct cfs_handles *h, struct cfs_handle *e, struct cfs_handle **got)
{
	int rc = 0;
	pthread_mutex_lock(&h->lock);
	struct cfs_handle **p = find(h, e->fh);
	if (*p) {
		if ((*p)->kind != e->kind) {
			rc = -EEXIST;
			*got = NULL;
		} else {
			__atomic_add_fetch(&(*p)->refs, 1, __ATOMIC_RELAXED);
			*got = *p;
		}
	} else {
		e->refs = 2;
		e->next = NULL;
		*p = e;
		*got = e;
		if (++h->n > h->nb)
			grow(h);
	}
	pthread_mutex_unlock(&h->lock);
	return rc;
}

struct cfs_handle *cfs_handles_get(struct cfs_handles *h, uint64_t fh, int kind)
{
	pthread_mutex_lock(&h->lock);
	struct cfs_handle *e = *find(h, fh);
	if (e && e->kind == kind)
		__atomic_add_fetch(&e->refs, 1, __ATOMIC_RELAXED);
	else
		e = NULL;
	pthread_mutex_unlock(&h->lock);
	return e;
}

struct cfs_handle *cfs_handles_remove(struct cfs_handles *h, uint64_t fh, int kind)
{
	pthread_mutex_lock(&h->lock);
	struct cfs_handle **p = find(h, fh);
	struct cfs_handle *e = *p;
	if (e && e->kind == kind) {
		*p = e->next;
		e->next = NULL;
		h->n--;
	} else {
		e = NULL;
	}
	pthread_mutex_unlock(&h->lock);
	return e;
}

int cfs_handles_unref(struct cfs_handle *e)
{
	return __atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) == 0;
}

size_t cfs_handles_count(struct cfs_handles *h)
{
	pthread_mutex_lock(&h->lock);
	size_t n = h->n;
	pthread_mutex_unlock(&h->lock);
	return n;
}
