/* nsdb: namespace rows in the cache index (see nsdb.h). */
#include "nsdb.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "fhtab.h"
#include "le.h"
#include "rowio.h"
#include "log.h"
#include "store.h"

struct cfs_nsdb {
	struct cfs_store *store;
	pthread_mutex_t lock; /* serialises inode number allocation */
	pthread_mutex_t fh_lock;
	uint64_t fh_next, fh_end; /* the reserved range not handed out yet */
	enum cfs_nsdb_fh_where fh_where;
	struct cfs_fhtab *fhtab;
	uint64_t fh_overflowed; /* atomic */
	uint64_t base;          /* first inode number of this index (see nsdb.h) */
};

int cfs_nsdb_new(struct cfs_store *s, struct cfs_nsdb **out)
{
	struct cfs_nsdb *n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->store = s;
	struct cfs_store_stats st;
	cfs_store_stats(s, &st);
	n->base = st.index_resets ? st.index_resets << CFS_NSDB_RESET_SHIFT : 2;
	pthread_mutex_init(&n->lock, NULL);
	pthread_mutex_init(&n->fh_lock, NULL);
	*out = n;
	return 0;
}

int cfs_nsdb_ino_older(const struct cfs_nsdb *n, uint64_t ino)
{
	return ino > 1 && ino < n->base;
}

void cfs_nsdb_free(struct cfs_nsdb *n)
{
	if (!n)
		return;
	pthread_mutex_destroy(&n->lock);
	pthread_mutex_destroy(&n->fh_lock);
	free(n);
}

struct id_at {
	const char *id;
	size_t at;
};

static int cmp_id_at(const void *a, const void *b)
{
	const struct id_at *x = a, *y = b;
	int c = strcmp(x->id, y->id);
	return c ? c : x->at < y->at ? -1 : x->at > y->at;
}

/* first[i] = the smallest index holding the same id as fresh entry i (i
 * itself when none before it), for the entries without a number: a sort, so
 * a 100,000-entry listing costs n log n, not n^2, compares. */
static int first_of_each_id(const char *const *ids, const uint64_t *inos, size_t count,
			    size_t *first)
{
	struct id_at *s = calloc(count ? count : 1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	size_t m = 0;
	for (size_t i = 0; i < count; i++) {
		first[i] = i;
		if (!inos[i])
			s[m++] = (struct id_at){ ids[i], i };
	}
	qsort(s, m, sizeof(*s), cmp_id_at);
	for (size_t k = 1; k < m; k++)
		if (strcmp(s[k].id, s[k - 1].id) == 0)
			first[s[k].at] = first[s[k - 1].at];
	free(s);
	return 0;
}

int cfs_nsdb_inos(struct cfs_nsdb *n, const char *const *ids, size_t count, uint64_t *inos)
{
	int rc = 0;
	size_t fresh = 0;
	pthread_mutex_lock(&n->lock);
	for (size_t i = 0; !rc && i < count; i++) {
		void *v = NULL;
		size_t vl = 0;
		inos[i] = 0;
		rc = cfs_store_meta_get(n->store, "inodes", ids[i], strlen(ids[i]), &v, &vl);
		if (!rc && vl == 8)
			inos[i] = cfs_le_get(v, 8);
		else if (!rc || rc == -ENOENT)
			rc = 0, fresh++;
		free(v);
	}
	if (!rc && fresh) {
		uint64_t next = n->base; /* 1 is the root */
		void *v = NULL;
		size_t vl = 0;
		if (cfs_store_meta_get(n->store, "meta", "next_ino", 8, &v, &vl) == 0 && vl == 8)
			next = cfs_le_get(v, 8);
		free(v);
		struct cfs_store_kv *kv = calloc(2 * fresh + 1, sizeof(*kv));
		unsigned char *nums = calloc(fresh + 1, 8);
		size_t *first = calloc(count + 1, sizeof(*first));
		if (!kv || !nums || !first)
			rc = -ENOMEM;
		if (!rc)
			rc = first_of_each_id(ids, inos, count, first);
		size_t k = 0, j = 0;
		for (size_t i = 0; !rc && i < count; i++) {
			if (inos[i])
				continue;
			/* the same id twice in one batch gets one number */
			if (first[i] != i) {
				inos[i] = inos[first[i]];
				continue;
			}
			inos[i] = next++;
			cfs_le_put(nums + 8 * j, inos[i], 8);
			kv[k++] = (struct cfs_store_kv){ "inodes", ids[i], strlen(ids[i]),
							 nums + 8 * j, 8 };
			kv[k++] = (struct cfs_store_kv){ "inos", nums + 8 * j, 8, ids[i],
							 strlen(ids[i]) };
			j++;
		}
		unsigned char nb[8];
		cfs_le_put(nb, next, 8);
		if (!rc) {
			kv[k++] = (struct cfs_store_kv){ "meta", "next_ino", 8, nb, 8 };
			rc = cfs_store_meta_put_many(n->store, kv, k);
		}
		free(kv);
		free(nums);
		free(first);
	}
	pthread_mutex_unlock(&n->lock);
	if (rc)
		CFS_ERROR("cannot store inode numbers: %s", cfs_strerror(rc));
	return rc;
}

int cfs_nsdb_save_listing(struct cfs_nsdb *n, const char *content_id,
			  const struct cfs_lrow_entry *e, size_t count, int64_t fetched_ms)
{
	struct cfs_buf b = { 0 };
	int rc = cfs_lrow_encode(e, count, fetched_ms, &b);
	if (!rc)
		rc = cfs_store_meta_put(n->store, "dirs", content_id, strlen(content_id), b.data,
					b.len);
	cfs_buf_cleanup(&b);
	return rc;
}

static int load_row(struct cfs_nsdb *n, const char *table, const char *key, int64_t *fetched_ms,
		    cfs_lrow_cb cb, void *arg)
{
	void *v = NULL;
	size_t vl = 0, count;
	int64_t at = 0;
	int rc = cfs_store_meta_get(n->store, table, key, strlen(key), &v, &vl);
	if (!rc)
		rc = cfs_lrow_decode(v, vl, &at, &count, cb, arg);
	free(v);
	if (rc == CFS_E_PROTO) {
		CFS_WARN("stored row %s/%s is damaged; dropping it", table, key);
		cfs_store_meta_del(n->store, table, key, strlen(key));
	}
	if (fetched_ms)
		*fetched_ms = at;
	return rc;
}

int cfs_nsdb_load_listing(struct cfs_nsdb *n, const char *content_id, int64_t *fetched_ms,
			  cfs_lrow_cb cb, void *arg)
{
	return load_row(n, "dirs", content_id, fetched_ms, cb, arg);
}

int cfs_nsdb_save_root(struct cfs_nsdb *n, const char *asked, const struct cfs_lrow_entry *root)
{
	char key[300];
	struct cfs_buf b = { 0 };
	snprintf(key, sizeof(key), "root:%s", asked);
	int rc = cfs_lrow_encode(root, 1, 0, &b);
	if (!rc)
		rc = cfs_store_meta_put(n->store, "meta", key, strlen(key), b.data, b.len);
	cfs_buf_cleanup(&b);
	return rc;
}

int cfs_nsdb_load_root(struct cfs_nsdb *n, const char *asked, cfs_lrow_cb cb, void *arg)
{
	char key[300];
	snprintf(key, sizeof(key), "root:%s", asked);
	return load_row(n, "meta", key, NULL, cb, arg);
}

/* ---- parents ----------------------------------------------------------- */

#define PARENT_PREFIX "iparent:"
#define PARENT_KEY (sizeof(PARENT_PREFIX) - 1 + 8)

static void parent_key(unsigned char *k, uint64_t ino)
{
	memcpy(k, PARENT_PREFIX, sizeof(PARENT_PREFIX) - 1);
	cfs_le_put(k + sizeof(PARENT_PREFIX) - 1, ino, 8);
}

int cfs_nsdb_get_parent(struct cfs_nsdb *n, uint64_t ino, uint64_t *parent)
{
	unsigned char k[PARENT_KEY];
	void *v = NULL;
	size_t vl = 0;
	parent_key(k, ino);
	int rc = cfs_store_meta_get(n->store, "meta", k, sizeof(k), &v, &vl);
	if (!rc && vl != 8)
		rc = -ENOENT; /* not a row we wrote */
	if (!rc)
		*parent = cfs_le_get(v, 8);
	free(v);
	return rc;
}

int cfs_nsdb_set_parents(struct cfs_nsdb *n, uint64_t parent, const uint64_t *inos,
			 size_t count)
{
	/* Reads first (cheap LMDB read transactions), so an unchanged listing
	 * costs no write transaction at all. */
	size_t todo = 0;
	struct cfs_store_kv *kv = NULL;
	unsigned char *keys = NULL, val[8];
	int rc = 0;
	cfs_le_put(val, parent, 8);
	for (size_t i = 0; !rc && i < count; i++) {
		uint64_t p;
		int g = cfs_nsdb_get_parent(n, inos[i], &p);
		if (g == 0 && p == parent)
			continue;
		if (g && g != -ENOENT) {
			rc = g;
			break;
		}
		if (!kv && (!(kv = calloc(count, sizeof(*kv))) ||
			    !(keys = calloc(count, PARENT_KEY)))) {
			rc = -ENOMEM;
			break;
		}
		unsigned char *k = keys + todo * PARENT_KEY;
		parent_key(k, inos[i]);
		kv[todo++] = (struct cfs_store_kv){ "meta", k, PARENT_KEY, val, 8 };
	}
	if (!rc && todo)
		rc = cfs_store_meta_put_many(n->store, kv, todo);
	free(kv);
	free(keys);
	return rc;
}

/* ---- file handles --------------------------------------------------------- */

int cfs_nsdb_fh_alloc(struct cfs_nsdb *n, uint64_t *fh)
{
	int rc = 0;
	pthread_mutex_lock(&n->fh_lock);
	if (n->fh_next == n->fh_end) {
		/* Range b is [b * RANGE, (b + 1) * RANGE); b starts at 1, so 0 is
		 * never a handle.  cfs_store_meta_next syncs before returning. */
		uint64_t b = 0;
		rc = cfs_store_meta_next(n->store, "fh_block", 1, &b);
		if (!rc) {
			n->fh_next = b * CFS_NSDB_FH_RANGE;
			n->fh_end = n->fh_next + CFS_NSDB_FH_RANGE;
		}
	}
	if (!rc)
		*fh = n->fh_next++;
	pthread_mutex_unlock(&n->fh_lock);
	if (rc)
		CFS_ERROR("cannot reserve file handle numbers: %s", cfs_strerror(rc));
	return rc;
}

#define FH_PREFIX "fh:"
#define FH_KEY (sizeof(FH_PREFIX) - 1 + 8)
#define FH_MAGIC 0x31484643u /* "CFH1" little endian */

static void fh_key(unsigned char *k, uint64_t fh)
{
	memcpy(k, FH_PREFIX, sizeof(FH_PREFIX) - 1);
	cfs_le_put(k + sizeof(FH_PREFIX) - 1, fh, 8);
}

int cfs_nsdb_fh_clear(struct cfs_store *s, uint64_t *deleted)
{
	return cfs_store_meta_del_prefix(s, "meta", FH_PREFIX, sizeof(FH_PREFIX) - 1, deleted);
}

int cfs_nsdb_fh_keep(struct cfs_nsdb *n, enum cfs_nsdb_fh_where where, struct cfs_fhtab *t)
{
	if (where == CFS_NSDB_FH_SHARED && !t)
		return -EINVAL;
	n->fh_where = where;
	n->fhtab = where == CFS_NSDB_FH_SHARED ? t : NULL;
	return 0;
}

uint64_t cfs_nsdb_fh_overflowed(struct cfs_nsdb *n)
{
	return __atomic_load_n(&n->fh_overflowed, __ATOMIC_RELAXED);
}

static int fh_encode(const struct cfs_nsdb_fh *r, struct cfs_buf *b)
{
	unsigned char head[20];
	cfs_le_put(head, FH_MAGIC, 4);
	cfs_le_put(head + 4, r->ino, 8);
	cfs_le_put(head + 12, (uint64_t)r->size, 8);
	int rc = cfs_buf_append(b, head, sizeof(head));
	if (!rc)
		rc = cfs_row_put_str(b, r->key, sizeof(r->key));
	if (!rc)
		rc = cfs_row_put_str(b, r->id, sizeof(r->id));
	if (!rc)
		rc = cfs_row_put_str(b, r->rev, sizeof(r->rev));
	if (!rc)
		rc = cfs_row_put_str(b, r->export_mime, sizeof(r->export_mime));
	return rc;
}

int cfs_nsdb_fh_put(struct cfs_nsdb *n, uint64_t fh, const struct cfs_nsdb_fh *r)
{
	unsigned char k[FH_KEY];
	struct cfs_buf b = { 0 };
	int rc = fh_encode(r, &b);
	if (rc || n->fh_where == CFS_NSDB_FH_NONE)
		goto out;
	if (n->fh_where == CFS_NSDB_FH_SHARED) {
		rc = cfs_fhtab_put(n->fhtab, fh, b.data, b.len);
		if (rc != -ENOSPC && rc != -E2BIG)
			goto out;
		/* no room in the shared table: the index keeps this one, synced */
		if (__atomic_fetch_add(&n->fh_overflowed, 1, __ATOMIC_RELAXED) == 0)
			CFS_INFO("file handle %llu: %s; its row goes to the cache index",
				 (unsigned long long)fh,
				 rc == -E2BIG ? "row too long for the shared table"
					      : "no room in the shared table");
	}
	fh_key(k, fh);
	rc = cfs_store_meta_put(n->store, "meta", k, sizeof(k), b.data, b.len);
out:
	cfs_buf_cleanup(&b);
	return rc;
}

/* Decodes a row; CFS_E_PROTO for a damaged one. */
static int fh_decode(const void *v, size_t vl, struct cfs_nsdb_fh *r)
{
	const unsigned char *p = v, *end = p + vl;
	if (vl < 20 || (uint32_t)cfs_le_get(p, 4) != FH_MAGIC)
		return CFS_E_PROTO;
	r->ino = cfs_le_get(p + 4, 8);
	r->size = (int64_t)cfs_le_get(p + 12, 8);
	p += 20;
	int rc = cfs_row_get_str(&p, end, r->key, sizeof(r->key));
	if (!rc)
		rc = cfs_row_get_str(&p, end, r->id, sizeof(r->id));
	if (!rc)
		rc = cfs_row_get_str(&p, end, r->rev, sizeof(r->rev));
	if (!rc)
		rc = cfs_row_get_str(&p, end, r->export_mime, sizeof(r->export_mime));
	if (!rc && p != end)
		rc = CFS_E_PROTO;
	return rc;
}

int cfs_nsdb_fh_get(struct cfs_nsdb *n, uint64_t fh, struct cfs_nsdb_fh *r)
{
	unsigned char k[FH_KEY];
	memset(r, 0, sizeof(*r));
	if (n->fh_where == CFS_NSDB_FH_NONE)
		return -ENOENT;
	if (n->fh_where == CFS_NSDB_FH_SHARED) {
		unsigned char row[CFS_FHTAB_ROW_MAX];
		size_t len = 0;
		int rc = cfs_fhtab_get(n->fhtab, fh, row, sizeof(row), &len);
		if (!rc && (rc = fh_decode(row, len, r)) == CFS_E_PROTO) {
			CFS_WARN("shared file handle row %llu is damaged; dropping it",
				 (unsigned long long)fh);
			cfs_fhtab_del(n->fhtab, fh);
			memset(r, 0, sizeof(*r));
		}
		if (rc != -ENOENT)
			return rc;
	}
	void *v = NULL;
	size_t vl = 0;
	fh_key(k, fh);
	int rc = cfs_store_meta_get(n->store, "meta", k, sizeof(k), &v, &vl);
	if (!rc)
		rc = fh_decode(v, vl, r);
	free(v);
	if (rc == CFS_E_PROTO) {
		CFS_WARN("stored file handle %llu is damaged; dropping it", (unsigned long long)fh);
		cfs_store_meta_del(n->store, "meta", k, sizeof(k));
		memset(r, 0, sizeof(*r));
	}
	return rc;
}

int cfs_nsdb_fh_del(struct cfs_nsdb *n, uint64_t fh)
{
	unsigned char k[FH_KEY];
	if (n->fh_where == CFS_NSDB_FH_NONE)
		return -ENOENT;
	/* a row the shared table does not hold may be an overflow row */
	if (n->fh_where == CFS_NSDB_FH_SHARED && cfs_fhtab_del(n->fhtab, fh) == 0)
		return 0;
	fh_key(k, fh);
	return cfs_store_meta_del(n->store, "meta", k, sizeof(k));
}
