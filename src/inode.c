/* inode: node table by inode number and by Drive id (see inode.h). */
#include "inode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"

/* Open addressing over node pointers, one table per key. */
struct htab {
	struct cfs_node **slots;
	uint64_t nslots; /* power of two */
};

struct cfs_inode {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct htab by_id, by_ino;
	uint64_t n;
};

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static struct cfs_node **probe_id(const struct htab *h, const char *id)
{
	uint64_t i = cfs_names_fnv1a(id) & (h->nslots - 1);
	while (h->slots[i] && strcmp(h->slots[i]->id, id) != 0)
		i = (i + 1) & (h->nslots - 1);
	return &h->slots[i];
}

static struct cfs_node **probe_ino(const struct htab *h, uint64_t ino)
{
	uint64_t i = mix64(ino) & (h->nslots - 1);
	while (h->slots[i] && h->slots[i]->ino != ino)
		i = (i + 1) & (h->nslots - 1);
	return &h->slots[i];
}

static int htab_init(struct htab *h)
{
	h->nslots = 1024;
	h->slots = calloc(h->nslots, sizeof(*h->slots));
	return h->slots ? 0 : -ENOMEM;
}

/* Doubles both tables (they always have the same load). */
static int grow(struct cfs_inode *t)
{
	struct htab id = { calloc(t->by_id.nslots * 2, sizeof(void *)), t->by_id.nslots * 2 };
	struct htab ino = { calloc(t->by_ino.nslots * 2, sizeof(void *)), t->by_ino.nslots * 2 };
	if (!id.slots || !ino.slots) {
		free(id.slots);
		free(ino.slots);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < t->by_id.nslots; i++) {
		struct cfs_node *n = t->by_id.slots[i];
		if (n) {
			*probe_id(&id, n->id) = n;
			*probe_ino(&ino, n->ino) = n;
		}
	}
	free(t->by_id.slots);
	free(t->by_ino.slots);
	t->by_id = id;
	t->by_ino = ino;
	return 0;
}

int cfs_inode_new(struct cfs_inode **out)
{
	struct cfs_inode *t = calloc(1, sizeof(*t));
	if (!t || htab_init(&t->by_id) || htab_init(&t->by_ino)) {
		if (t) {
			free(t->by_id.slots);
			free(t);
		}
		return -ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	*out = t;
	return 0;
}

void cfs_inode_free(struct cfs_inode *t)
{
	if (!t)
		return;
	for (uint64_t i = 0; i < t->by_id.nslots; i++) {
		struct cfs_node *n = t->by_id.slots[i];
		if (n) {
			cfs_listing_unref(n->listing);
			free(n);
		}
	}
	free(t->by_id.slots);
	free(t->by_ino.slots);
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->cond);
	free(t);
}

void cfs_inode_lock(struct cfs_inode *t)
{
	pthread_mutex_lock(&t->lock);
}

void cfs_inode_unlock(struct cfs_inode *t)
{
	pthread_mutex_unlock(&t->lock);
}

void cfs_inode_wait(struct cfs_inode *t)
{
	pthread_cond_wait(&t->cond, &t->lock);
}

void cfs_inode_broadcast(struct cfs_inode *t)
{
	pthread_cond_broadcast(&t->cond);
}

struct cfs_node *cfs_inode_get(struct cfs_inode *t, uint64_t ino)
{
	return ino ? *probe_ino(&t->by_ino, ino) : NULL;
}

struct cfs_node *cfs_inode_find(struct cfs_inode *t, const char *id)
{
	return *probe_id(&t->by_id, id);
}

uint64_t cfs_inode_count(struct cfs_inode *t)
{
	return t->n;
}

struct cfs_node *cfs_inode_add(struct cfs_inode *t, const char *id, uint64_t ino)
{
	if (!*id || strlen(id) >= CFS_ID_MAX || !ino || *probe_ino(&t->by_ino, ino) ||
	    *probe_id(&t->by_id, id))
		return NULL;
	if ((t->n + 1) * 2 > t->by_id.nslots && grow(t))
		return NULL;
	struct cfs_node *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->ino = ino;
	memcpy(n->id, id, strlen(id) + 1);
	n->size = -1;
	*probe_id(&t->by_id, id) = n;
	*probe_ino(&t->by_ino, ino) = n;
	t->n++;
	return n;
}

struct cfs_listing *cfs_listing_new(size_t n)
{
	struct cfs_listing *l = calloc(1, sizeof(*l) + n * sizeof(l->e[0]));
	if (l) {
		l->refs = 1;
		l->n = n;
	}
	return l;
}

struct cfs_listing *cfs_listing_ref(struct cfs_listing *l)
{
	__atomic_add_fetch(&l->refs, 1, __ATOMIC_RELAXED);
	return l;
}

void cfs_listing_unref(struct cfs_listing *l)
{
	if (!l || __atomic_sub_fetch(&l->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->e[i].name);
	free(l);
}

static int cmp_dirent(const void *a, const void *b)
{
	return strcmp(((const struct cfs_dirent *)a)->name, ((const struct cfs_dirent *)b)->name);
}

void cfs_listing_sort(struct cfs_listing *l)
{
	qsort(l->e, l->n, sizeof(l->e[0]), cmp_dirent);
}

long cfs_listing_find(const struct cfs_listing *l, const char *name)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(l->e[mid].name, name);
		if (c == 0)
			return (long)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

long cfs_listing_find_ino(const struct cfs_listing *l, uint64_t ino)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->e[i].ino == ino)
			return (long)i;
	return -1;
}
