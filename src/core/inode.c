/* inode: node table by inode number and by Drive id (see inode.h). */
#include "inode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "hash.h"

/* Open addressing over node pointers, one table per key. */
struct htab {
	struct cfs_node **slots;
	uint64_t nslots; /* power of two */
};

/* An interned string (export MIME types: a handful per table). */
struct istr {
	struct istr *next;
	char s[];
};

struct cfs_inode {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct htab by_id, by_ino;
	uint64_t n;
	struct istr *interned;
};

static const char EMPTY[] = "";

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static struct cfs_node **probe_id(const struct htab *h, const char *id)
{
	uint64_t i = cfs_hash_fnv1a(id) & (h->nslots - 1);
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
			if (n->dir)
				cfs_listing_unref(n->dir->listing);
			free(n->dir);
			if (n->content_id != n->id)
				free((char *)n->content_id);
			if (n->rev != EMPTY)
				free((char *)n->rev);
			free(n);
		}
	}
	while (t->interned) {
		struct istr *x = t->interned;
		t->interned = x->next;
		free(x);
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
	size_t len = strlen(id);
	struct cfs_node *n = calloc(1, sizeof(*n) + len + 1);
	if (!n)
		return NULL;
	n->ino = ino;
	memcpy(n->id, id, len + 1);
	n->content_id = n->id;
	n->rev = EMPTY;
	n->export_mime = EMPTY;
	n->size = -1;
	*probe_id(&t->by_id, id) = n;
	*probe_ino(&t->by_ino, ino) = n;
	t->n++;
	return n;
}

/* ---- node fields ------------------------------------------------------------ */

int cfs_node_set_content_id(struct cfs_node *n, const char *cid)
{
	if (strcmp(n->content_id, cid) == 0)
		return 0;
	if (strlen(cid) >= CFS_ID_MAX)
		return -ENAMETOOLONG;
	const char *x = strcmp(cid, n->id) == 0 ? n->id : strdup(cid);
	if (!x)
		return -ENOMEM;
	if (n->content_id != n->id)
		free((char *)n->content_id);
	n->content_id = x;
	return 0;
}

int cfs_node_set_rev(struct cfs_node *n, const char *rev)
{
	if (strcmp(n->rev, rev) == 0)
		return 0;
	const char *x = *rev ? strdup(rev) : EMPTY;
	if (!x)
		return -ENOMEM;
	if (n->rev != EMPTY)
		free((char *)n->rev);
	n->rev = x;
	return 0;
}

int cfs_node_set_export_mime(struct cfs_inode *t, struct cfs_node *n, const char *mime)
{
	if (!mime || !*mime) {
		n->export_mime = EMPTY;
		return 0;
	}
	struct istr *x = t->interned;
	while (x && strcmp(x->s, mime) != 0)
		x = x->next;
	if (!x) {
		size_t len = strlen(mime);
		if (!(x = malloc(sizeof(*x) + len + 1)))
			return -ENOMEM;
		memcpy(x->s, mime, len + 1);
		x->next = t->interned;
		t->interned = x;
	}
	n->export_mime = x->s;
	return 0;
}

int cfs_node_make_dir(struct cfs_node *n)
{
	if (!n->dir && !(n->dir = calloc(1, sizeof(*n->dir))))
		return -ENOMEM;
	n->is_dir = 1;
	return 0;
}

/* ---- times ------------------------------------------------------------- */

static int64_t later(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

int64_t cfs_node_mtime(const struct cfs_node *n)
{
	return n->dir ? later(n->mtime_ns, n->dir->changed_ns) : n->mtime_ns;
}

int64_t cfs_node_ctime(struct cfs_node *n, int64_t mtime_ns)
{
	n->ctime_ns = later(n->ctime_ns, mtime_ns);
	return n->ctime_ns;
}

int64_t cfs_node_atime(const struct cfs_node *n, int64_t mtime_ns)
{
	return n->has_atime ? n->atime_ns : mtime_ns;
}

void cfs_node_set_atime(struct cfs_node *n, int64_t atime_ns)
{
	n->atime_ns = atime_ns;
	n->has_atime = 1;
}

void cfs_node_changed(struct cfs_node *n, int64_t now_ns)
{
	int64_t c = cfs_node_ctime(n, cfs_node_mtime(n));
	n->ctime_ns = now_ns > c ? now_ns : c + 1;
}

void cfs_node_dir_changed(struct cfs_node *n, int64_t now_ns)
{
	if (!n->dir)
		return;
	cfs_node_changed(n, now_ns); /* past the mtime shown too: ctime is never earlier */
	n->dir->changed_ns = n->ctime_ns;
}

void cfs_node_set_mtime(struct cfs_node *n, int64_t mtime_ns)
{
	n->mtime_ns = mtime_ns;
	if (n->dir)
		n->dir->changed_ns = 0;
}

static int hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* 1 when hex is exactly 2 * len hex digits (decoded into out), else 0. */
static int unhex(const char *hex, unsigned char *out, size_t len)
{
	if (strlen(hex) != 2 * len)
		return 0;
	for (size_t i = 0; i < len; i++) {
		int hi = hex_val(hex[2 * i]), lo = hex_val(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return 0;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 1;
}

static void tohex(const unsigned char *in, size_t len, int have, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; have && i < len; i++) {
		*out++ = digits[in[i] >> 4];
		*out++ = digits[in[i] & 15];
	}
	*out = '\0';
}

void cfs_node_set_sums(struct cfs_node *n, const char *md5_hex, const char *sha256_hex)
{
	n->has_md5 = (unsigned)unhex(md5_hex, n->md5, sizeof(n->md5));
	n->has_sha256 = (unsigned)unhex(sha256_hex, n->sha256, sizeof(n->sha256));
}

void cfs_node_md5_hex(const struct cfs_node *n, char out[33])
{
	tohex(n->md5, sizeof(n->md5), n->has_md5, out);
}

void cfs_node_sha256_hex(const struct cfs_node *n, char out[65])
{
	tohex(n->sha256, sizeof(n->sha256), n->has_sha256, out);
}

uint64_t cfs_node_rev_hash(const struct cfs_node *n)
{
	uint64_t h = cfs_hash_fnv1a(n->rev);
	return h ? h : 1;
}

/* ---- listings ----------------------------------------------------------------- */

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
