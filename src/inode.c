/* inode: node table by inode number and by Drive id (see inode.h). */
#include "inode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"

struct cfs_inode {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct cfs_node **nodes; /* nodes[ino - 1] */
	uint64_t n, cap;
	uint64_t *slots;         /* open addressing: ino, 0 = empty */
	uint64_t nslots;         /* power of two */
};

int cfs_inode_new(struct cfs_inode **out)
{
	struct cfs_inode *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->nslots = 1024;
	t->slots = calloc(t->nslots, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
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
	for (uint64_t i = 0; i < t->n; i++) {
		if (t->nodes[i]->listing)
			cfs_listing_unref(t->nodes[i]->listing);
		free(t->nodes[i]);
	}
	free(t->nodes);
	free(t->slots);
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
	return ino >= 1 && ino <= t->n ? t->nodes[ino - 1] : NULL;
}

uint64_t cfs_inode_count(struct cfs_inode *t)
{
	return t->n;
}

static uint64_t *find_slot(uint64_t *slots, uint64_t nslots, struct cfs_node **nodes,
			   const char *id)
{
	uint64_t i = cfs_names_fnv1a(id) & (nslots - 1);
	while (slots[i] && strcmp(nodes[slots[i] - 1]->id, id) != 0)
		i = (i + 1) & (nslots - 1);
	return &slots[i];
}

static int grow_slots(struct cfs_inode *t)
{
	uint64_t ns = t->nslots * 2;
	uint64_t *s = calloc(ns, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (uint64_t i = 0; i < t->nslots; i++)
		if (t->slots[i])
			*find_slot(s, ns, t->nodes, t->nodes[t->slots[i] - 1]->id) = t->slots[i];
	free(t->slots);
	t->slots = s;
	t->nslots = ns;
	return 0;
}

struct cfs_node *cfs_inode_intern(struct cfs_inode *t, const char *id)
{
	if (strlen(id) >= CFS_ID_MAX || !*id)
		return NULL;
	uint64_t *slot = find_slot(t->slots, t->nslots, t->nodes, id);
	if (*slot)
		return t->nodes[*slot - 1];
	if ((t->n + 1) * 2 > t->nslots) {
		if (grow_slots(t))
			return NULL;
		slot = find_slot(t->slots, t->nslots, t->nodes, id);
	}
	if (t->n == t->cap) {
		uint64_t cap = t->cap ? t->cap * 2 : 1024;
		struct cfs_node **nn = realloc(t->nodes, cap * sizeof(*nn));
		if (!nn)
			return NULL;
		t->nodes = nn;
		t->cap = cap;
	}
	struct cfs_node *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->ino = t->n + 1;
	memcpy(n->id, id, strlen(id) + 1);
	n->size = -1;
	t->nodes[t->n++] = n;
	*slot = n->ino;
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
