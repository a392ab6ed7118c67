/* reader: cached reads with single-flight downloads (see reader.h). */
#include "reader.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drive.h"
#include "log.h"
#include "names.h"
#include "store.h"

#define KEY_MAX 256
#define SPARES 8

/* One block download in progress, shared by every reader that wants it. */
struct flight {
	struct flight *next;
	char key[KEY_MAX];
	uint64_t block;
	int done, rc;
	char *data;        /* the block, kept until the last waiter has copied */
	size_t len;
	int refs;
};

/* A block the store could not keep, remembered for the next reads. */
struct spare {
	char key[KEY_MAX];
	uint64_t block;
	char *data;
	size_t len;
	uint64_t used; /* LRU clock */
};

struct cfs_reader {
	struct cfs_drive *drive;
	struct cfs_store *store;
	uint32_t bs;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct flight *flights; /* few at a time: a list is enough */
	struct spare spares[SPARES];
	uint64_t clock;
	struct cfs_reader_stats st;
};

#define COUNT(r, f, n) __atomic_add_fetch(&(r)->st.f, (n), __ATOMIC_RELAXED)

int cfs_reader_new(struct cfs_drive *d, struct cfs_store *s, struct cfs_reader **out)
{
	struct cfs_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->drive = d;
	r->store = s;
	r->bs = cfs_store_block_size(s);
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	*out = r;
	return 0;
}

void cfs_reader_free(struct cfs_reader *r)
{
	if (!r)
		return;
	for (int i = 0; i < SPARES; i++)
		free(r->spares[i].data);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	free(r);
}

void cfs_reader_stats(struct cfs_reader *r, struct cfs_reader_stats *out)
{
	pthread_mutex_lock(&r->lock);
	*out = r->st;
	pthread_mutex_unlock(&r->lock);
}

static void flight_put(struct cfs_reader *r, struct flight *f)
{
	/* lock held */
	if (--f->refs)
		return;
	for (struct flight **p = &r->flights; *p; p = &(*p)->next) {
		if (*p == f) {
			*p = f->next;
			break;
		}
	}
	free(f->data);
	free(f);
}

/* lock held: copies from a remembered uncached block; 1 on a hit. */
static int spare_get(struct cfs_reader *r, const char *key, uint64_t b, uint32_t boff,
		     uint32_t blen, char *dst)
{
	for (int i = 0; i < SPARES; i++) {
		struct spare *s = &r->spares[i];
		if (s->data && s->block == b && boff + blen <= s->len && strcmp(s->key, key) == 0) {
			memcpy(dst, s->data + boff, blen);
			s->used = ++r->clock;
			return 1;
		}
	}
	return 0;
}

/* lock held: remembers a block the store refused (takes a copy). */
static void spare_put(struct cfs_reader *r, const char *key, uint64_t b, const char *data,
		      size_t len)
{
	struct spare *v = &r->spares[0];
	for (int i = 1; i < SPARES; i++)
		if (r->spares[i].used < v->used)
			v = &r->spares[i];
	char *copy = malloc(len ? len : 1);
	if (!copy)
		return;
	memcpy(copy, data, len);
	free(v->data);
	snprintf(v->key, sizeof(v->key), "%s", key);
	v->block = b;
	v->data = copy;
	v->len = len;
	v->used = ++r->clock;
}

/* Gets block b of the file into dst (bytes [boff, boff+blen) of the block),
 * downloading it unless someone else is. */
static int read_miss(struct cfs_reader *r, const char *id, const char *rev, const char *key,
		     int64_t size, uint64_t b, uint32_t boff, uint32_t blen, char *dst)
{
	pthread_mutex_lock(&r->lock);
	if (spare_get(r, key, b, boff, blen, dst)) {
		pthread_mutex_unlock(&r->lock);
		return 0;
	}
	struct flight *f;
	for (f = r->flights; f; f = f->next)
		if (f->block == b && strcmp(f->key, key) == 0)
			break;
	if (f) {
		f->refs++;
		r->st.joined++;
		while (!f->done)
			pthread_cond_wait(&r->cond, &r->lock);
	} else {
		f = calloc(1, sizeof(*f));
		if (!f) {
			pthread_mutex_unlock(&r->lock);
			return -ENOMEM;
		}
		snprintf(f->key, sizeof(f->key), "%s", key);
		f->block = b;
		f->refs = 1;
		f->next = r->flights;
		r->flights = f;
		r->st.downloads++;
		r->st.inflight++;
		pthread_mutex_unlock(&r->lock);

		int64_t start = (int64_t)b * r->bs;
		size_t want = (size_t)(size - start < r->bs ? size - start : r->bs);
		char *data = malloc(want ? want : 1);
		size_t got = 0;
		int rc = data ? cfs_drive_read(r->drive, id, rev, size, start, want, data, &got)
			      : -ENOMEM;
		int stored = 0;
		if (!rc && got != want) /* 416: the file shrank under us */
			rc = -ESTALE;
		if (!rc) {
			int src = cfs_store_put(r->store, key, b, data, (uint32_t)got);
			stored = src == 0;
			if (src) {
				CFS_WARN("block %s#%llu not cached (%s); serving it uncached", key,
					 (unsigned long long)b, strerror(-src));
				COUNT(r, uncached, 1);
			}
		}
		pthread_mutex_lock(&r->lock);
		if (!rc && !stored)
			spare_put(r, key, b, data, got);
		f->rc = rc;
		f->data = rc ? (free(data), NULL) : data;
		f->len = rc ? 0 : got;
		f->done = 1;
		r->st.inflight--;
		pthread_cond_broadcast(&r->cond);
	}
	int rc = f->rc;
	if (!rc) {
		if (boff + blen > f->len)
			rc = -ESTALE;
		else
			memcpy(dst, f->data + boff, blen);
	}
	flight_put(r, f);
	pthread_mutex_unlock(&r->lock);
	return rc;
}

int cfs_reader_read(struct cfs_reader *r, const char *id, const char *rev, const char *key,
		    int64_t size, int64_t off, size_t len, char *buf, size_t *got)
{
	*got = 0;
	if (off < 0)
		return -EINVAL;
	if (strlen(key) >= KEY_MAX)
		return -ENAMETOOLONG;
	if (off >= size || len == 0)
		return 0;
	if ((int64_t)len > size - off)
		len = (size_t)(size - off);
	size_t pos = 0;
	while (pos < len) {
		int64_t at = off + (int64_t)pos;
		uint64_t b = (uint64_t)at / r->bs;
		uint32_t boff = (uint32_t)(at - (int64_t)b * r->bs);
		uint32_t blen = r->bs - boff;
		if (blen > len - pos)
			blen = (uint32_t)(len - pos);
		uint32_t n = 0;
		int rc = cfs_store_read(r->store, key, b, boff, blen, buf + pos, &n);
		if (!rc && n == blen) {
			COUNT(r, hits, 1);
			COUNT(r, bytes_cache, blen);
		} else {
			if (rc && rc != -ENOENT)
				CFS_WARN("cache read %s#%llu: %s; fetching again", key,
					 (unsigned long long)b, strerror(-rc));
			COUNT(r, misses, 1);
			rc = read_miss(r, id, rev, key, size, b, boff, blen, buf + pos);
			/* No short reads: FUSE would take one for the end of the file. */
			if (rc)
				return rc;
			COUNT(r, bytes_drive, blen);
		}
		pos += blen;
	}
	*got = pos;
	return 0;
}
