/* stage_paths: listings and paths of the GPU loader (see stage_int.h).
 *
 * Resolves a path of the mount to the content key of the file it names
 * (a Drive id and revision), through the folder listings the daemon stored in
 * the cache index (lrow.h), never through the mount: from each stored root,
 * one lookup per name, and the leaf must agree with the file's stat.  Decoded
 * listings are kept in the stage's listing cache (LCACHE_MAX, by folder id,
 * replaced when the stored row was fetched again); the root that resolved last
 * is tried first. */
#include "hash.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cacheview.h"
#include "lrow.h"
#include "stage_int.h"

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

void cfs_stage_listing_free(struct listing *l)
{
	if (!l)
		return;
	free(l->cid);
	free(l->e);
	free(l->strings);
	free(l);
}

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
		cfs_stage_listing_free(l);
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
			cfs_stage_listing_free(s->lc[i]);
		} else if (s->nlc == LCACHE_MAX) {
			i = (size_t)(cfs_hash_fnv1a(cid) % LCACHE_MAX);
			cfs_stage_listing_free(s->lc[i]);
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
int cfs_stage_resolve(struct cfs_stage *s, struct cfs_cview_txn *t, const char *rel,
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

/* The path relative to the mountpoint, or NULL when path is outside it. */
const char *cfs_stage_relative(const struct cfs_stage *s, const char *path)
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
