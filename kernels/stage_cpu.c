/* stage_cpu: plans and host copies of the GPU loader (see stage.h).
 *
 * A plan is a list of pieces: the part of one block of one range that lands
 * at a given offset of the batch.  A piece is resident (a row snapshot from
 * the plan's read transaction) or not (read through the mount).  Copying a
 * part of the batch runs rounds: copy the resident pieces from the arena
 * mappings (checking crc32c), then re-read their rows in a fresh transaction;
 * pieces whose row changed are copied again from the new row (at most
 * MAX_ROUNDS times), the rest fall back to the mount.  Reads through the mount
 * coalesce neighbouring pieces of a range into one pread loop.  With a pinned
 * budget, resident pieces whose exact write is in the hot set (kernels/hot.h)
 * are copied from there first and skip the rounds. */
#define _GNU_SOURCE /* asprintf */
#include "stage.h"
#include "clock.h"
#include "hash.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cacheview.h"
#include "crc32c.h"
#include "ctlname.h"
#include "hot.h"
#include "lrow.h"
#include "size.h"
#include "stage_gpu.h"
#include "stage_int.h"

#define MAX_ROUNDS 4
#define LCACHE_MAX 64  /* decoded listings kept */
#define NAME_MAX_ 1023

/* A folder's stored listing, decoded and sorted by name. */
struct lentry {
	char *name, *key; /* key: "<content id>@<rev>" (a folder: its content id) */
	uint64_t ino;
	int is_dir, exported;
	int64_t size, mtime_ns;
};

struct listing {
	char *cid;
	int64_t fetched_ms;
	size_t n;
	struct lentry *e;
	char *strings;
};

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

/* ---- open ------------------------------------------------------------------ */


/* The cache folder, as the mount serving mnt says (user.colabfs.cache_dir,
 * src/core/ctlname.h): never a path recomputed here, which another user could
 * have planted.  It must be a real folder owned by this user or root and
 * writable by no one else. */
static int mount_cache_dir(const char *mnt, char *out, size_t cap)
{
	ssize_t n = getxattr(mnt, "user.colabfs.cache_dir", out, cap - 1);
	if (n < 0)
		return errno == ENODATA || errno == ENOTSUP ? -ENODATA : -errno;
	out[n] = 0;
	struct stat st;
	if (out[0] != '/' || lstat(out, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    (st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & 022))
		return -EPERM;
	return 0;
}

static void hot_mem_free(unsigned char *p, int cuda)
{
	if (p && cuda)
		cfs_gpu_host_free(p);
	else
		free(p);
}

int cfs_stage_open(const char *cache_dir, const char *mountpoint, unsigned flags,
		   struct cfs_stage **out)
{
	*out = NULL;
	if (!mountpoint || !*mountpoint)
		return -EINVAL;
	char real[PATH_MAX], dbuf[PATH_MAX];
	if (!realpath(mountpoint, real))
		return -errno;
	struct cfs_stage *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	int rc = 0;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->hot_mu, NULL);
	pthread_rwlock_init(&s->hot_rw, NULL);
	s->flags = flags;
	size_t ml = strlen(mountpoint);
	while (ml > 1 && mountpoint[ml - 1] == '/')
		ml--;
	if (!(s->mnt = strndup(mountpoint, ml)) || !(s->mnt_real = strdup(real))) {
		rc = -ENOMEM;
		goto fail;
	}
	if (!cache_dir) {
		if ((rc = mount_cache_dir(real, dbuf, sizeof(dbuf))) != 0)
			goto fail;
		cache_dir = dbuf;
	}
	if ((rc = cfs_cview_open(cache_dir, &s->cv)) != 0)
		goto fail;
	s->bs = cfs_cview_block_size(s->cv);
	const char *env = getenv("COLABFS_GPU_PINNED");
	uint64_t pinned = 0, every = 30;
	if (env && *env && cfs_size_parse(env, &pinned) != 0)
		fprintf(stderr, "colabfs-gpu: COLABFS_GPU_PINNED=%s is not a size; hot cache off\n",
			env);
	env = getenv("COLABFS_GPU_PINNED_REFRESH");
	if (env && *env && cfs_size_parse(env, &every) != 0)
		every = 30;
	s->hot_every_ms = (int64_t)every * 1000;
	s->hot_budget = pinned;
	*out = s;
	return 0;
fail:
	cfs_stage_close(s);
	return rc;
}

static void listing_free(struct listing *l)
{
	if (!l)
		return;
	free(l->cid);
	free(l->e);
	free(l->strings);
	free(l);
}

void cfs_stage_close(struct cfs_stage *s)
{
	if (!s)
		return;
	hot_mem_free(s->hot_mem, s->hot_mem_cuda);
	cfs_hot_set_free(&s->hot);
	cfs_hot_counts_free(&s->counts);
	cfs_cview_close(s->cv);
	for (size_t i = 0; i < s->nlc; i++)
		listing_free(s->lc[i]);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->hot_mu);
	pthread_rwlock_destroy(&s->hot_rw);
	free(s->root_hint);
	free(s->mnt);
	free(s->mnt_real);
	free(s);
}

uint32_t cfs_stage_block_size(const struct cfs_stage *s)
{
	return s->bs;
}

void cfs_stage_get_stats(struct cfs_stage *s, struct cfs_stage_stats *out)
{
	uint64_t *src = (uint64_t *)&s->st, *dst = (uint64_t *)out;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

void cfs_stage_set_hook(struct cfs_stage *s, cfs_stage_hook_fn fn, void *arg)
{
	s->hook = fn;
	s->hook_arg = arg;
}

/* ---- listings -------------------------------------------------------------- */

struct decode_ctx {
	struct lentry *e;
	size_t n, cap;
	char *str;
	size_t sl, scap;
	int err;
};

/* Appends s (and its NUL) to the string area; returns its offset. */
static size_t add_str(struct decode_ctx *c, const char *s1, const char *s2, const char *s3)
{
	size_t l1 = strlen(s1), l2 = s2 ? strlen(s2) : 0, l3 = s3 ? strlen(s3) : 0;
	size_t need = l1 + l2 + l3 + 1, at = c->sl;
	if (c->sl + need > c->scap) {
		size_t cap = c->scap ? c->scap * 2 : 4096;
		while (cap < c->sl + need)
			cap *= 2;
		char *n = realloc(c->str, cap);
		if (!n) {
			c->err = -ENOMEM;
			return 0;
		}
		c->str = n;
		c->scap = cap;
	}
	memcpy(c->str + at, s1, l1);
	if (l2)
		memcpy(c->str + at + l1, s2, l2);
	if (l3)
		memcpy(c->str + at + l1 + l2, s3, l3);
	c->str[at + need - 1] = 0;
	c->sl += need;
	return at;
}

static int on_entry(const struct cfs_lrow_entry *e, void *arg)
{
	struct decode_ctx *c = arg;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct lentry *n = realloc(c->e, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		c->e = n;
		c->cap = cap;
	}
	struct lentry *l = &c->e[c->n];
	memset(l, 0, sizeof(*l));
	/* offsets for now; turned into pointers once the string area stops moving */
	l->name = (char *)(uintptr_t)add_str(c, e->name, NULL, NULL);
	if (e->is_dir)
		l->key = (char *)(uintptr_t)add_str(c, e->content_id, NULL, NULL);
	else
		l->key = (char *)(uintptr_t)add_str(c, e->content_id, "@", e->rev);
	if (c->err)
		return c->err;
	l->ino = e->ino;
	l->is_dir = e->is_dir;
	l->exported = e->export_mime && e->export_mime[0];
	l->size = e->size;
	l->mtime_ns = e->mtime_ns;
	c->n++;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct lentry *)a)->name, ((const struct lentry *)b)->name);
}

static int decode_listing(const char *cid, const void *row, size_t rl, struct listing **out)
{
	struct decode_ctx c = { 0 };
	int64_t at = 0;
	size_t n = 0;
	int rc = cfs_lrow_decode(row, rl, &at, &n, on_entry, &c);
	struct listing *l = NULL;
	if (!rc && !(l = calloc(1, sizeof(*l))))
		rc = -ENOMEM;
	if (!rc && !(l->cid = strdup(cid)))
		rc = -ENOMEM;
	if (rc) {
		free(c.e);
		free(c.str);
		listing_free(l);
		return rc < 0 ? rc : -EIO;
	}
	for (size_t i = 0; i < c.n; i++) {
		c.e[i].name = c.str + (uintptr_t)c.e[i].name;
		c.e[i].key = c.str + (uintptr_t)c.e[i].key;
	}
	qsort(c.e, c.n, sizeof(*c.e), by_name);
	l->fetched_ms = at;
	l->n = c.n;
	l->e = c.e;
	l->strings = c.str;
	*out = l;
	return 0;
}

static int64_t row_fetched(const void *row, size_t rl)
{
	const unsigned char *b = row;
	uint64_t v = 0;
	if (rl < 12)
		return -1;
	for (int i = 11; i >= 4; i--)
		v = v << 8 | b[i];
	return (int64_t)v;
}

/* Finds name in the stored listing of folder cid and copies the entry out
 * (key into kbuf).  Called with s->lock held.  -ENOENT when absent. */
static int lookup(struct cfs_stage *s, struct cfs_cview_txn *t, const char *cid, const char *name,
		  struct lentry *out, char *kbuf, size_t kcap)
{
	const void *row;
	size_t rl;
	int rc = cfs_cview_get(t, "dirs", cid, strlen(cid), &row, &rl);
	if (rc)
		return rc;
	int64_t at = row_fetched(row, rl);
	struct listing *l = NULL;
	size_t i;
	for (i = 0; i < s->nlc; i++)
		if (strcmp(s->lc[i]->cid, cid) == 0)
			break;
	if (i < s->nlc && s->lc[i]->fetched_ms == at) {
		l = s->lc[i];
	} else {
		if ((rc = decode_listing(cid, row, rl, &l)) != 0)
			return rc;
		if (i < s->nlc) {
			listing_free(s->lc[i]);
		} else if (s->nlc == LCACHE_MAX) {
			i = (size_t)(cfs_hash_fnv1a(cid) % LCACHE_MAX);
			listing_free(s->lc[i]);
		} else {
			i = s->nlc++;
		}
		s->lc[i] = l;
	}
	struct lentry key = { .name = (char *)name };
	struct lentry *e = bsearch(&key, l->e, l->n, sizeof(*l->e), by_name);
	if (!e)
		return -ENOENT;
	*out = *e;
	snprintf(kbuf, kcap, "%s", e->key);
	out->name = NULL;
	out->key = kbuf;
	return 0;
}

struct roots {
	char ids[8][CFS_FMT_KEY_MAX + 1];
	int n;
};

static int on_root_entry(const struct cfs_lrow_entry *e, void *arg)
{
	struct roots *r = arg;
	if (r->n < 8 && e->content_id && e->content_id[0] && strlen(e->content_id) <= CFS_FMT_KEY_MAX)
		snprintf(r->ids[r->n++], CFS_FMT_KEY_MAX + 1, "%s", e->content_id);
	return 0;
}

static int on_root_row(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	int64_t at;
	size_t n;
	cfs_lrow_decode(v, vl, &at, &n, on_root_entry, arg);
	return 0;
}

/* Walks rel ("a/b/c.jpg") from folder root; fills the leaf entry. */
static int walk(struct cfs_stage *s, struct cfs_cview_txn *t, const char *root, const char *rel,
		struct lentry *leaf, char *kbuf, size_t kcap)
{
	char cid[2 * CFS_FMT_KEY_MAX + 4], name[NAME_MAX_ + 1];
	snprintf(cid, sizeof(cid), "%s", root);
	const char *p = rel;
	int rc = -ENOENT;
	for (;;) {
		while (*p == '/')
			p++;
		const char *q = strchr(p, '/');
		size_t nl = q ? (size_t)(q - p) : strlen(p);
		if (nl == 0 || nl > NAME_MAX_)
			return -ENOENT;
		memcpy(name, p, nl);
		name[nl] = 0;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			return -ENOENT;
		if ((rc = lookup(s, t, cid, name, leaf, kbuf, kcap)) != 0)
			return rc;
		p += nl;
		while (*p == '/')
			p++;
		if (!*p)
			return 0;
		if (!leaf->is_dir)
			return -ENOTDIR;
		snprintf(cid, sizeof(cid), "%s", kbuf);
	}
}

/* The content key of rel if the stored listings name it and agree with st;
 * else *key stays NULL. */
static int resolve(struct cfs_stage *s, struct cfs_cview_txn *t, const char *rel,
		   const struct stat *st, char **key)
{
	struct roots r = { .n = 0 };
	struct lentry e;
	char kbuf[2 * CFS_FMT_KEY_MAX + 4];
	int rc = 0;
	*key = NULL;
	pthread_mutex_lock(&s->lock);
	if (s->root_hint)
		snprintf(r.ids[r.n++], CFS_FMT_KEY_MAX + 1, "%s", s->root_hint);
	cfs_cview_scan_meta(t, "root:", on_root_row, &r);
	for (int i = 0; i < r.n; i++) {
		if (i > 0 && s->root_hint && strcmp(r.ids[i], s->root_hint) == 0)
			continue;
		if (walk(s, t, r.ids[i], rel, &e, kbuf, sizeof(kbuf)) != 0)
			continue;
		int64_t mt = (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
		if (e.is_dir || e.exported || e.ino != (uint64_t)st->st_ino ||
		    e.size != (int64_t)st->st_size || e.mtime_ns != mt ||
		    strlen(kbuf) > CFS_FMT_KEY_MAX)
			continue;
		if (!s->root_hint || strcmp(s->root_hint, r.ids[i]) != 0) {
			free(s->root_hint);
			s->root_hint = strdup(r.ids[i]);
		}
		if (!(*key = strdup(kbuf)))
			rc = -ENOMEM;
		break;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ---- plans ----------------------------------------------------------------- */

void cfs_stage_plan_free(struct cfs_stage_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++) {
		free(p->r[i].path);
		free(p->r[i].key);
		if (p->r[i].fd >= 0)
			close(p->r[i].fd);
	}
	free(p->r);
	free(p->p);
	free(p);
}

uint64_t cfs_stage_plan_bytes(const struct cfs_stage_plan *p)
{
	return p->bytes;
}

size_t cfs_stage_plan_count(const struct cfs_stage_plan *p)
{
	return p->n;
}

uint64_t cfs_stage_plan_offset(const struct cfs_stage_plan *p, size_t i)
{
	return i < p->n ? p->r[i].dst : 0;
}

uint64_t cfs_stage_plan_length(const struct cfs_stage_plan *p, size_t i)
{
	return i < p->n ? p->r[i].len : 0;
}

uint64_t cfs_stage_plan_resident(const struct cfs_stage_plan *p)
{
	return p->resident;
}

/* The path relative to the mountpoint, or NULL when path is outside it. */
static const char *relative(const struct cfs_stage *s, const char *path)
{
	const char *bases[2] = { s->mnt, s->mnt_real };
	if (path[0] != '/')
		return path;
	for (int i = 0; i < 2; i++) {
		size_t l = strlen(bases[i]);
		if (l == 1 && bases[i][0] == '/')
			return path + 1;
		if (strncmp(path, bases[i], l) == 0 && path[l] == '/')
			return path + l + 1;
	}
	return NULL;
}

static int add_piece(struct cfs_stage_plan *p, size_t *cap, const struct piece *pc)
{
	if (p->np == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct piece *n = realloc(p->p, nc * sizeof(*n));
		if (!n)
			return -ENOMEM;
		p->p = n;
		*cap = nc;
	}
	p->p[p->np++] = *pc;
	return 0;
}

static uint32_t clip(const struct piece *pc, uint64_t from, uint64_t to, uint32_t *skip);

/* ---- hot blocks ------------------------------------------------------------ */

/* This stage's access counts: one per block a plan touches. */
static void hot_count_plan(struct cfs_stage *s, const struct cfs_stage_plan *p)
{
	pthread_mutex_lock(&s->hot_mu);
	if (s->hot_budget)
		for (size_t i = 0; i < p->np; i++) {
			const char *key = p->r[p->p[i].range].key;
			if (key && cfs_hot_count_add(&s->counts, cfs_hot_hash(key, p->p[i].block)))
				break; /* out of memory: counting is a hint */
		}
	pthread_mutex_unlock(&s->hot_mu);
}

struct hot_row {
	char *key;
	uint64_t block;
	struct cfs_fmt_row row;
	int arena; /* copied from the arena: its row must be checked */
};

struct hot_scan {
	struct cfs_stage *s;
	struct hot_row *r;
	struct cfs_hot_cand *c;
	size_t n, cap;
};

static int hot_on_block(void *arg, const char *key, uint64_t block, const struct cfs_fmt_row *row)
{
	struct hot_scan *h = arg;
	uint64_t score = cfs_cview_heat(h->s->cv, row) +
			 cfs_hot_count_get(&h->s->counts, cfs_hot_hash(key, block));
	if (!score || row->len > h->s->hot_budget)
		return 0;
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 256;
		struct hot_row *r = realloc(h->r, cap * sizeof(*r));
		if (r)
			h->r = r;
		struct cfs_hot_cand *c = r ? realloc(h->c, cap * sizeof(*c)) : NULL;
		if (!c)
			return -ENOMEM;
		h->c = c;
		h->cap = cap;
	}
	struct hot_row *r = &h->r[h->n];
	if (!(r->key = strdup(key)))
		return -ENOMEM;
	r->block = block;
	r->row = *row;
	r->arena = 0;
	h->c[h->n] = (struct cfs_hot_cand){ .score = score, .gen = row->gen, .len = row->len,
					    .idx = (uint32_t)h->n };
	h->n++;
	return 0;
}

/* Chooses the hot set again and fills it (hot_mu held). */
static int hot_refresh_locked(struct cfs_stage *s)
{
	struct hot_scan h = { .s = s };
	struct cfs_cview_txn *t = NULL;
	struct cfs_hot_set set = { 0 };
	unsigned char *mem = NULL;
	int cuda = 0, rc;
	uint64_t total = 0, held = 0;
	size_t k = 0;

	s->hot_at_ms = cfs_clock_mono_ms();
	STAT_ADD(s, hot_refreshes, 1);
	if ((rc = cfs_cview_begin(s->cv, &t)) != 0)
		goto out;
	rc = cfs_cview_scan_blocks(t, hot_on_block, &h);
	cfs_cview_end(t);
	t = NULL;
	if (rc)
		goto out;
	k = cfs_hot_select(h.c, h.n, s->hot_budget, &total);
	if ((rc = cfs_hot_set_init(&set, k)) != 0)
		goto out;
	if (k) {
		uint64_t sz = (total + 4095) & ~(uint64_t)4095;
		if (cfs_gpu_host_alloc(sz, (void **)&mem) == 0) {
			cuda = 1;
		} else if (posix_memalign((void **)&mem, 4096, sz) != 0) {
			mem = NULL;
			rc = -ENOMEM;
			goto out;
		}
	}
	/* copy in: from the old hot set when it holds the same write, else the arena */
	uint64_t at = 0;
	for (size_t i = 0; i < k; i++) {
		struct hot_row *r = &h.r[h.c[i].idx];
		const struct cfs_hot_ent *old = cfs_hot_set_find(&s->hot, r->row.gen, r->row.slot,
								 r->row.cls, r->row.len,
								 r->row.crc);
		if (old) {
			memcpy(mem + at, s->hot_mem + old->off, r->row.len);
		} else {
			const unsigned char *src = cfs_cview_slot(s->cv, &r->row);
			if (!src)
				continue;
			memcpy(mem + at, src, r->row.len);
			if (cfs_crc32c(0, mem + at, r->row.len) != r->row.crc) {
				STAT_ADD(s, crc_errors, 1);
				continue;
			}
			r->arena = 1;
		}
		struct cfs_hot_ent e = { .gen = r->row.gen, .slot = r->row.slot, .off = at,
					 .len = r->row.len, .crc = r->row.crc,
					 .cls = r->row.cls };
		if ((rc = cfs_hot_set_add(&set, &e)) != 0)
			goto out;
		at += r->row.len;
	}
	if (s->hook)
		s->hook(s->hook_arg);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* seqlock check of what came from the arenas: a changed row drops the copy */
	if ((rc = cfs_cview_begin(s->cv, &t)) != 0)
		goto out;
	for (size_t i = 0; i < k; i++) {
		struct hot_row *r = &h.r[h.c[i].idx];
		struct cfs_fmt_row now;
		if (!r->arena)
			continue;
		if (cfs_cview_block(t, r->key, r->block, &now) == 0 && now.slot == r->row.slot &&
		    now.gen == r->row.gen && now.cls == r->row.cls && now.len == r->row.len)
			continue;
		STAT_ADD(s, hot_dropped, 1);
		struct cfs_hot_ent *e = (struct cfs_hot_ent *)cfs_hot_set_find(
			&set, r->row.gen, r->row.slot, r->row.cls, r->row.len, r->row.crc);
		if (e)
			e->len = 0; /* never matches a row again (rows have len >= 1): dead */
	}
	cfs_cview_end(t);
	t = NULL;
	uint64_t held_bytes = 0;
	for (size_t i = 0; i < set.cap; i++)
		if (set.e[i].gen && set.e[i].len) {
			held++;
			held_bytes += set.e[i].len;
		}
	pthread_rwlock_wrlock(&s->hot_rw);
	struct cfs_hot_set oset = s->hot;
	unsigned char *omem = s->hot_mem;
	int ocuda = s->hot_mem_cuda;
	s->hot = set;
	s->hot_mem = mem;
	s->hot_mem_cuda = cuda;
	pthread_rwlock_unlock(&s->hot_rw);
	set = oset;
	mem = omem;
	cuda = ocuda;
	__atomic_store_n(&s->st.hot_bytes, held_bytes, __ATOMIC_RELAXED);
	__atomic_store_n(&s->st.hot_blocks, held, __ATOMIC_RELAXED);
	__atomic_store_n(&s->st.hot_cuda, (uint64_t)s->hot_mem_cuda, __ATOMIC_RELAXED);
out:
	cfs_cview_end(t);
	cfs_hot_set_free(&set);
	hot_mem_free(mem, cuda);
	for (size_t i = 0; i < h.n; i++)
		free(h.r[i].key);
	free(h.r);
	free(h.c);
	return rc;
}

static void hot_maybe_refresh(struct cfs_stage *s)
{
	pthread_mutex_lock(&s->hot_mu);
	if (s->hot_budget && (!s->hot_at_ms || cfs_clock_mono_ms() - s->hot_at_ms >= s->hot_every_ms))
		hot_refresh_locked(s); /* a failure keeps the old set; the next plan tries later */
	pthread_mutex_unlock(&s->hot_mu);
}

int cfs_stage_hot_refresh(struct cfs_stage *s)
{
	int rc = 0;
	pthread_mutex_lock(&s->hot_mu);
	if (s->hot_budget)
		rc = hot_refresh_locked(s);
	pthread_mutex_unlock(&s->hot_mu);
	return rc;
}

int cfs_stage_set_pinned(struct cfs_stage *s, uint64_t bytes)
{
	pthread_mutex_lock(&s->hot_mu);
	s->hot_budget = bytes;
	s->hot_at_ms = 0; /* choose again on the next plan */
	if (!bytes) {
		pthread_rwlock_wrlock(&s->hot_rw);
		hot_mem_free(s->hot_mem, s->hot_mem_cuda);
		cfs_hot_set_free(&s->hot);
		s->hot_mem = NULL;
		s->hot_mem_cuda = 0;
		pthread_rwlock_unlock(&s->hot_rw);
		__atomic_store_n(&s->st.hot_bytes, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->st.hot_blocks, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->st.hot_cuda, 0, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&s->hot_mu);
	return 0;
}

/* Copies the pieces of [from, to) whose write the hot set holds; marks them
 * done (state 2).  Returns how many pieces are still pending. */
static int hot_copy(struct cfs_stage *s, struct cfs_stage_plan *p, size_t first, size_t cnt,
		    uint64_t from, uint64_t to, unsigned char *dst, unsigned char *state)
{
	int pending = 0;
	uint64_t hits = 0, misses = 0;
	pthread_rwlock_rdlock(&s->hot_rw);
	for (size_t i = 0; i < cnt; i++) {
		struct piece *pc = &p->p[first + i];
		uint32_t skip, n;
		if (state[i] != 1)
			continue;
		if (!(n = clip(pc, from, to, &skip))) {
			pending++;
			continue;
		}
		const struct cfs_hot_ent *e =
			cfs_hot_set_find(&s->hot, pc->row.gen, pc->row.slot, pc->row.cls,
					 pc->row.len, pc->row.crc);
		if (!e) {
			misses++;
			pending++;
			continue;
		}
		memcpy(dst + (pc->dst + skip - from), s->hot_mem + e->off + pc->boff + skip, n);
		state[i] = 2;
		hits++;
	}
	pthread_rwlock_unlock(&s->hot_rw);
	STAT_ADD(s, hot_hits, hits);
	STAT_ADD(s, hot_misses, misses);
	return pending;
}

int cfs_stage_plan_new(struct cfs_stage *s, const struct cfs_stage_range *r, size_t n,
		       struct cfs_stage_plan **out)
{
	*out = NULL;
	if (!r && n)
		return -EINVAL;
	struct cfs_stage_plan *p = calloc(1, sizeof(*p));
	struct cfs_cview_txn *t = NULL;
	size_t cap = 0;
	int rc = 0;
	if (!p || !(p->r = calloc(n ? n : 1, sizeof(*p->r)))) {
		free(p);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		p->r[i].fd = -1;
	p->n = n;
	if (!(s->flags & CFS_STAGE_NO_CACHE))
		hot_maybe_refresh(s);
	if (!(s->flags & CFS_STAGE_NO_CACHE) && (rc = cfs_cview_begin(s->cv, &t)) != 0)
		goto fail;
	for (size_t i = 0; i < n && !rc; i++) {
		struct prange *pr = &p->r[i];
		struct stat st;
		const char *rel = r[i].path ? relative(s, r[i].path) : NULL;
		if (!rel || !*rel) {
			rc = -EINVAL;
			break;
		}
		if (asprintf(&pr->path, "%s/%s", s->mnt, rel) < 0) {
			pr->path = NULL;
			rc = -ENOMEM;
			break;
		}
		if (stat(pr->path, &st) < 0) {
			rc = -errno;
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			rc = -EISDIR;
			break;
		}
		uint64_t size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
		pr->off = r[i].off < size ? r[i].off : size;
		pr->len = size - pr->off;
		if (r[i].len < pr->len)
			pr->len = r[i].len;
		pr->dst = p->bytes;
		p->bytes += pr->len;
		if (t && (rc = resolve(s, t, rel, &st, &pr->key)) != 0)
			break;
		if (!pr->key && pr->len && t)
			STAT_ADD(s, unresolved, 1);
		/* one piece per block touched */
		uint64_t o = pr->off, end = pr->off + pr->len;
		while (o < end && !rc) {
			struct piece pc = { 0 };
			pc.block = o / s->bs;
			pc.boff = (uint32_t)(o % s->bs);
			uint64_t l = (uint64_t)s->bs - pc.boff;
			pc.len = (uint32_t)(l < end - o ? l : end - o);
			pc.dst = pr->dst + (o - pr->off);
			pc.range = (uint32_t)i;
			if (pr->key && cfs_cview_block(t, pr->key, pc.block, &pc.row) == 0 &&
			    pc.boff + pc.len <= pc.row.len) {
				pc.resident = 1;
				p->resident += pc.len;
			}
			rc = add_piece(p, &cap, &pc);
			o += pc.len;
		}
	}
	cfs_cview_end(t);
	if (rc)
		goto fail;
	hot_count_plan(s, p);
	STAT_ADD(s, plans, 1);
	*out = p;
	return 0;
fail:
	cfs_stage_plan_free(p);
	return rc;
}

/* ---- copies ---------------------------------------------------------------- */

/* Reads [off, off + len) of a range through the mount.  repair: a cached
 * block failed its crc32c.  The daemon checks a block's crc on its first
 * read only, and the kernel's page cache may answer from an earlier read, so
 * a plain read could return the bad bytes or never reach the daemon: first
 * have the daemon drop the file's cached blocks (the eviction control of
 * src/cli/ctl.h, which also drops the kernel's pages), then read, which fetches
 * them again. */
static int mount_read(struct cfs_stage_plan *p, struct prange *pr, uint64_t off, uint64_t len,
		      unsigned char *dst, int repair)
{
	if (pr->fd < 0) {
		pr->fd = open(pr->path, O_RDONLY | O_CLOEXEC);
		if (pr->fd < 0)
			return -errno;
	}
	if (repair) {
		char res[128];
		/* ENODATA/ENOTSUP: not a colabfs mount (a plain copy of the
		 * tree), whose bytes need no repair */
		if (getxattr(pr->path, CFS_XATTR_EVICT, res, sizeof(res)) < 0 &&
		    errno != ENODATA && errno != ENOTSUP)
			return -EIO; /* never read what may be the bad bytes */
		posix_fadvise(pr->fd, 0, 0, POSIX_FADV_DONTNEED);
	}
	while (len) {
		size_t want = len > (1u << 30) ? (1u << 30) : (size_t)len;
		ssize_t got = pread(pr->fd, dst, want, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return -EIO; /* the file shrank under us */
		dst += got;
		off += (uint64_t)got;
		len -= (uint64_t)got;
	}
	return 0;
}

/* The intersection of piece pc with batch bytes [from, to): offset into the
 * piece and length (0: none). */
static uint32_t clip(const struct piece *pc, uint64_t from, uint64_t to, uint32_t *skip)
{
	uint64_t a = pc->dst > from ? pc->dst : from;
	uint64_t b = pc->dst + pc->len < to ? pc->dst + pc->len : to;
	*skip = (uint32_t)(a - pc->dst);
	return b > a ? (uint32_t)(b - a) : 0;
}

int cfs_stage_copy_part(struct cfs_stage *s, struct cfs_stage_plan *p, uint64_t from,
			uint64_t len, void *dstv)
{
	return cfs_stage_copy_part_skip(s, p, from, len, dstv, NULL);
}

int cfs_stage_copy_part_skip(struct cfs_stage *s, struct cfs_stage_plan *p, uint64_t from,
			     uint64_t len, void *dstv, const unsigned char *skipmask)
{
	unsigned char *dst = dstv;
	if (from > p->bytes || len > p->bytes - from || (!dst && len))
		return -EINVAL;
	uint64_t to = from + len;
	size_t lo = 0, hi = p->np;
	/* pieces are in batch order: find the first that ends after from */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->p[mid].dst + p->p[mid].len <= from)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t first = lo, last = first;
	while (last < p->np && p->p[last].dst < to)
		last++;
	if (first == last)
		return 0;
	size_t cnt = last - first;
	/* state per piece: 0 mount, 1 copy pending, 2 done */
	unsigned char *state = malloc(cnt);
	if (!state)
		return -ENOMEM;
	int rc = 0, pending = 0, repair = 0;
	for (size_t i = 0; i < cnt; i++) {
		state[i] = p->p[first + i].resident && !(s->flags & CFS_STAGE_NO_CACHE) ? 1 : 0;
		if (skipmask && skipmask[first + i])
			state[i] = 3; /* someone else copies it */
		pending += state[i] == 1;
	}
	if (pending && __atomic_load_n(&s->hot_budget, __ATOMIC_RELAXED))
		pending = hot_copy(s, p, first, cnt, from, to, dst, state);
	for (int round = 0; round < MAX_ROUNDS && pending; round++) {
		for (size_t i = 0; i < cnt; i++) {
			struct piece *pc = &p->p[first + i];
			uint32_t skip, n;
			if (state[i] != 1 || !(n = clip(pc, from, to, &skip)))
				continue;
			const unsigned char *src = cfs_cview_slot(s->cv, &pc->row);
			if (!src) {
				state[i] = 0;
				continue;
			}
			unsigned char *d = dst + (pc->dst + skip - from);
			memcpy(d, src + pc->boff + skip, n);
			if (!(s->flags & CFS_STAGE_NO_VERIFY)) {
				/* the whole block's crc: over the copy when it is the whole block */
				uint32_t c = (pc->boff + skip == 0 && n == pc->row.len)
						     ? cfs_crc32c(0, d, n)
						     : cfs_crc32c(0, src, pc->row.len);
				if (c != pc->row.crc) {
					STAT_ADD(s, crc_errors, 1);
					state[i] = 0;
					repair = 1;
				}
			}
		}
		if (s->hook)
			s->hook(s->hook_arg);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		/* seqlock check: every copied row unchanged in a transaction begun now */
		struct cfs_cview_txn *t;
		if ((rc = cfs_cview_begin(s->cv, &t)) != 0)
			goto out;
		pending = 0;
		for (size_t i = 0; i < cnt; i++) {
			struct piece *pc = &p->p[first + i];
			struct cfs_fmt_row now;
			uint32_t skip;
			if (state[i] != 1 || !clip(pc, from, to, &skip))
				continue;
			const char *key = p->r[pc->range].key;
			if (cfs_cview_block(t, key, pc->block, &now) == 0 &&
			    now.slot == pc->row.slot && now.gen == pc->row.gen &&
			    now.cls == pc->row.cls && now.len == pc->row.len) {
				state[i] = 2;
				continue;
			}
			STAT_ADD(s, retries, 1);
			if (cfs_cview_block(t, key, pc->block, &now) == 0 &&
			    pc->boff + pc->len <= now.len) {
				pc->row = now;
				pending++;
			} else {
				pc->resident = 0;
				state[i] = 0;
			}
		}
		cfs_cview_end(t);
	}
	/* what is left goes through the mount, neighbours of a range together */
	for (size_t i = 0; i < cnt && !rc;) {
		struct piece *pc = &p->p[first + i];
		uint32_t skip, n = clip(pc, from, to, &skip);
		if (state[i] >= 2 || !n) {
			if (n && state[i] == 2) {
				STAT_ADD(s, blocks_cached, 1);
				STAT_ADD(s, bytes_cached, n);
			}
			i++;
			continue;
		}
		struct prange *pr = &p->r[pc->range];
		uint64_t start = pc->dst + skip, end = start + n;
		size_t j = i + 1, blocks = 1;
		for (; j < cnt && state[j] < 2 && p->p[first + j].range == pc->range; j++) {
			uint32_t sk2, n2 = clip(&p->p[first + j], from, to, &sk2);
			if (!n2)
				break;
			end += n2;
			blocks++;
		}
		rc = mount_read(p, pr, pr->off + (start - pr->dst), end - start, dst + (start - from),
				repair);
		STAT_ADD(s, blocks_mount, blocks);
		STAT_ADD(s, bytes_mount, end - start);
		i = j;
	}
out:
	free(state);
	return rc;
}

int cfs_stage_copy(struct cfs_stage *s, struct cfs_stage_plan *p, void *dst, uint64_t cap)
{
	if (cap < p->bytes)
		return -ENOSPC;
	return cfs_stage_copy_part(s, p, 0, p->bytes, dst);
}

/* ---- direct copies (stage_int.h) ------------------------------------------- */

unsigned cfs_stage_flags(const struct cfs_stage *s)
{
	return s->flags;
}

size_t cfs_stage_plan_pieces(const struct cfs_stage_plan *p)
{
	return p->np;
}

int cfs_stage_direct_list(struct cfs_stage *s, struct cfs_stage_plan *p,
			  struct cfs_stage_direct **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (s->flags & (CFS_STAGE_NO_CACHE | CFS_STAGE_NO_VERIFY) || !p->np)
		return 0;
	struct cfs_stage_direct *d = malloc(p->np * sizeof(*d));
	if (!d)
		return -ENOMEM;
	size_t k = 0;
	pthread_rwlock_rdlock(&s->hot_rw);
	for (size_t i = 0; i < p->np; i++) {
		const struct piece *pc = &p->p[i];
		if (!pc->resident || pc->boff != 0 || pc->len != pc->row.len ||
		    cfs_hot_set_find(&s->hot, pc->row.gen, pc->row.slot, pc->row.cls,
				     pc->row.len, pc->row.crc))
			continue;
		const unsigned char *src = cfs_cview_slot(s->cv, &pc->row);
		if (!src || cfs_cview_slot_map(s->cv, &pc->row, &d[k].map, &d[k].maplen) != 0)
			continue;
		d[k].src = src;
		d[k].dst = pc->dst;
		d[k].len = pc->len;
		d[k].crc = pc->row.crc;
		d[k].piece = i;
		k++;
	}
	pthread_rwlock_unlock(&s->hot_rw);
	if (!k) {
		free(d);
		d = NULL;
	}
	*out = d;
	*n = k;
	return 0;
}

int cfs_stage_direct_check(struct cfs_stage *s, struct cfs_stage_plan *p,
			   const struct cfs_stage_direct *d, size_t n, unsigned char *ok)
{
	struct cfs_cview_txn *t;
	if (s->hook)
		s->hook(s->hook_arg);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	int rc = cfs_cview_begin(s->cv, &t);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		const struct piece *pc = &p->p[d[i].piece];
		struct cfs_fmt_row now;
		ok[i] = cfs_cview_block(t, p->r[pc->range].key, pc->block, &now) == 0 &&
			now.slot == pc->row.slot && now.gen == pc->row.gen &&
			now.cls == pc->row.cls && now.len == pc->row.len;
		if (ok[i]) {
			STAT_ADD(s, blocks_cached, 1);
			STAT_ADD(s, bytes_cached, pc->len);
		} else {
			STAT_ADD(s, retries, 1);
		}
	}
	cfs_cview_end(t);
	return 0;
}
