/* nsdb: namespace rows in the cache index (see nsdb.h). */
#include "nsdb.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "store.h"

struct cfs_nsdb {
	struct cfs_store *store;
	pthread_mutex_t lock; /* serialises inode number allocation */
};

int cfs_nsdb_new(struct cfs_store *s, struct cfs_nsdb **out)
{
	struct cfs_nsdb *n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->store = s;
	pthread_mutex_init(&n->lock, NULL);
	*out = n;
	return 0;
}

void cfs_nsdb_free(struct cfs_nsdb *n)
{
	if (!n)
		return;
	pthread_mutex_destroy(&n->lock);
	free(n);
}

static void le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
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
			inos[i] = get_le64(v);
		else if (!rc || rc == -ENOENT)
			rc = 0, fresh++;
		free(v);
	}
	if (!rc && fresh) {
		uint64_t next = 2; /* 1 is the root */
		void *v = NULL;
		size_t vl = 0;
		if (cfs_store_meta_get(n->store, "meta", "next_ino", 8, &v, &vl) == 0 && vl == 8)
			next = get_le64(v);
		free(v);
		struct cfs_store_kv *kv = calloc(2 * fresh + 1, sizeof(*kv));
		unsigned char *nums = calloc(fresh + 1, 8);
		if (!kv || !nums)
			rc = -ENOMEM;
		size_t k = 0, j = 0;
		for (size_t i = 0; !rc && i < count; i++) {
			if (inos[i])
				continue;
			/* the same id twice in one batch gets one number */
			for (size_t p = 0; p < i && !inos[i]; p++)
				if (strcmp(ids[p], ids[i]) == 0)
					inos[i] = inos[p];
			if (inos[i])
				continue;
			inos[i] = next++;
			le64(nums + 8 * j, inos[i]);
			kv[k++] = (struct cfs_store_kv){ "inodes", ids[i], strlen(ids[i]),
							 nums + 8 * j, 8 };
			kv[k++] = (struct cfs_store_kv){ "inos", nums + 8 * j, 8, ids[i],
							 strlen(ids[i]) };
			j++;
		}
		unsigned char nb[8];
		le64(nb, next);
		if (!rc) {
			kv[k++] = (struct cfs_store_kv){ "meta", "next_ino", 8, nb, 8 };
			rc = cfs_store_meta_put_many(n->store, kv, k);
		}
		free(kv);
		free(nums);
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
