/* store_open: opening a store — index, header check, arenas, rebuilding the
 * in-memory table from the block rows — and closing it (see store.h). */
#define _GNU_SOURCE
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "store_int.h"

#define MAP_INITIAL (256ull << 20)
#define MAP_MAX (64ull << 30)
#define MIN_AUTO_BUDGET (64ull << 20)
#define DROP_BATCH 1024
#define LOCK_WAIT_MS 3000

static int path_in(const char *dir, const char *name, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s", dir, name);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* Takes the folder's lock: a second store on the same folder (another
 * daemon) would hand out the same slots.  Waits a little for a daemon that
 * is still exiting (a remount), then gives -EBUSY. */
static int lock_dir(struct cfs_store *s, const char *dir)
{
	char path[PATH_MAX];
	int rc = path_in(dir, "store.lock", path, sizeof(path));
	if (rc)
		return rc;
	s->lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->lockfd < 0)
		return -errno;
	for (int i = 0; flock(s->lockfd, LOCK_EX | LOCK_NB) < 0; i++) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (i == LOCK_WAIT_MS / 50)
			return -EBUSY;
		if (i == 0)
			CFS_INFO("cache: %s is in use; waiting up to %d s", dir, LOCK_WAIT_MS / 1000);
		usleep(50 * 1000);
	}
	return 0;
}

/* The index is moved aside (index.mdb.damaged, replacing an older one) and
 * the arenas it described removed: their rows are gone. */
static int index_aside(struct cfs_store *s, const char *dir, const char *path, const char *lock)
{
	char aside[PATH_MAX];
	int rc = path_in(dir, "index.mdb.damaged", aside, sizeof(aside));
	if (rc)
		return rc;
	if (rename(path, aside) < 0 && errno != ENOENT)
		return -errno;
	unlink(lock);
	s->index_reset = 1;
	return cfs_arenas_remove(dir);
}

/* Opens index.mdb inside the marker "index.checking" (store.h): one that is
 * not a valid environment, names pages past its end, reads as corrupt, or
 * whose last open never finished (the process died reading it) is moved aside
 * and replaced by an empty one. */
static int open_index(struct cfs_store *s, const char *dir)
{
	char path[PATH_MAX], lock[PATH_MAX], marker[PATH_MAX];
	int rc;

	if ((rc = path_in(dir, CFS_FMT_INDEX_FILE, path, sizeof(path))) != 0 ||
	    (rc = path_in(dir, "index.mdb-lock", lock, sizeof(lock))) != 0 ||
	    (rc = path_in(dir, CFS_FMT_CHECK_MARKER, marker, sizeof(marker))) != 0)
		return rc;
	if (access(marker, F_OK) == 0) {
		CFS_WARN("cache: the last open of %s never finished (the process died reading it: a "
			 "damaged index?); moving it aside to %s.damaged and starting with an empty "
			 "cache",
			 path, path);
		if ((rc = index_aside(s, dir, path, lock)) != 0)
			return rc;
	}
	int fd = open(marker, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	close(fd);
	rc = cfs_index_open(path, MAP_INITIAL, MAP_MAX, &s->ix);
	if (rc == 0 && (rc = cfs_index_check(s->ix, 0, NULL)) == -EUCLEAN) {
		cfs_index_close(s->ix);
		s->ix = NULL;
	}
	if (rc != -EUCLEAN)
		return rc;
	CFS_WARN("cache: %s is damaged or not an index; moving it aside to %s.damaged and "
		 "starting with an empty cache",
		 path, path);
	if ((rc = index_aside(s, dir, path, lock)) != 0)
		return rc;
	return cfs_index_open(path, MAP_INITIAL, MAP_MAX, &s->ix);
}

/* "index.resets" holds how many times this folder's index was moved aside
 * (a decimal number): the count must outlive the index it counts. */
static uint64_t resets_bump(const char *dir, int add)
{
	char path[PATH_MAX], buf[32] = "";
	unsigned long long n = 0;
	if (path_in(dir, "index.resets", path, sizeof(path)))
		return 0;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return 0;
	ssize_t k = pread(fd, buf, sizeof(buf) - 1, 0);
	if (k > 0) {
		buf[k] = 0;
		char *end;
		n = strtoull(buf, &end, 10);
	}
	if (add) {
		n++;
		int len = snprintf(buf, sizeof(buf), "%llu\n", n);
		if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)len, 0) != len)
			CFS_WARN("cache: cannot record the index reset in %s", path);
	}
	close(fd);
	return n;
}

/* The open got through the index: drop the marker; count a reset. */
static int index_opened(struct cfs_store *s, const char *dir)
{
	char marker[PATH_MAX];
	int rc = path_in(dir, CFS_FMT_CHECK_MARKER, marker, sizeof(marker));
	if (rc)
		return rc;
	s->st.index_resets = resets_bump(dir, s->index_reset);
	if (unlink(marker) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* Checks the header row: a missing one, or one for another format, block
 * size or class scheme, empties the block cache.  Then writes it back with
 * the next epoch. */
static int check_header(struct cfs_store *s, const char *dir)
{
	static const char key[] = CFS_FMT_HEADER_KEY;
	unsigned char h[CFS_FMT_HEADER_SIZE];
	struct cfs_fmt_header hd = { 0 };
	uint64_t epoch = 0;
	void *v;
	size_t vl;
	int reset = 1, rc;

	rc = cfs_index_get(s->ix, CFS_IX_STORE, key, strlen(key), &v, &vl);
	if (rc == 0) {
		int hrc = cfs_fmt_header_decode(v, vl, &hd);
		if (hrc != -EINVAL)
			epoch = hd.epoch;
		reset = hrc != 0 || hd.block_size != s->block_size;
		free(v);
		if (reset)
			CFS_INFO("cache: block size or format changed; emptying the block cache");
	} else if (rc != -ENOENT) {
		return rc;
	}
	if (reset && ((rc = cfs_index_block_clear(s->ix)) != 0 || (rc = cfs_arenas_remove(dir)) != 0))
		return rc;
	s->epoch = (epoch + 1) & ((1ull << (64 - CFS_STORE_EPOCH_SHIFT)) - 1);
	cfs_fmt_header_encode(s->block_size, s->epoch, h);
	return cfs_index_put(s->ix, CFS_IX_STORE, key, strlen(key), h, sizeof(h));
}

struct rebuild {
	struct cfs_store *s;
	struct cfs_index_bkey *drop; /* rows to delete (keys malloc'd) */
	size_t ndrop, cap;
};

static int drop_row(struct rebuild *rb, const char *key, uint64_t block)
{
	if (rb->ndrop == rb->cap) {
		size_t nc = rb->cap ? rb->cap * 2 : 64;
		struct cfs_index_bkey *d = realloc(rb->drop, nc * sizeof(*d));
		if (!d)
			return -ENOMEM;
		rb->drop = d;
		rb->cap = nc;
	}
	rb->drop[rb->ndrop].key = strdup(key);
	if (!rb->drop[rb->ndrop].key)
		return -ENOMEM;
	rb->drop[rb->ndrop++].block = block;
	return 0;
}

/* One block row: keep it (claim its slot, add an entry) or mark it for
 * deletion. */
static int rebuild_row(void *arg, const char *key, uint64_t block, const void *p, size_t n)
{
	struct rebuild *rb = arg;
	struct cfs_store *s = rb->s;
	struct cfs_fmt_row r;
	struct cfs_arena *a;
	struct cfs_tent *e;

	if (cfs_fmt_row_decode(p, n, &r) != 0 || !cfs_fmt_row_fits(&r, s->block_size) ||
	    cfs_arena_claim(&s->ar.a[r.cls], r.slot) != 0)
		return drop_row(rb, key, block);
	a = &s->ar.a[r.cls];
	e = cfs_table_new(&s->tab, key, block);
	if (!e) {
		cfs_arena_clear(a, r.slot);
		return -ENOMEM;
	}
	e->cls = r.cls;
	e->slot = r.slot;
	e->len = r.len;
	e->crc = r.crc;
	e->gen = r.gen;
	cfs_table_link(&s->tab, e, 0);
	s->used += a->size;
	return 0;
}

static int rebuild(struct cfs_store *s)
{
	struct rebuild rb = { .s = s };
	int rc = cfs_index_block_scan(s->ix, rebuild_row, &rb);

	if (rc == 0 && rb.ndrop)
		CFS_WARN("cache: dropping %zu block rows that name no valid slot", rb.ndrop);
	for (size_t i = 0; rc == 0 && i < rb.ndrop; i += DROP_BATCH)
		rc = cfs_index_block_del(s->ix, rb.drop + i,
					 rb.ndrop - i < DROP_BATCH ? rb.ndrop - i : DROP_BATCH);
	for (size_t i = 0; i < rb.ndrop; i++)
		free((char *)rb.drop[i].key);
	free(rb.drop);
	/* slots no row names (torn writes, crashed puts) give their memory back */
	for (unsigned i = 0; rc == 0 && i < s->ar.n; i++)
		cfs_arena_punch_free(&s->ar.a[i]);
	return rc;
}

static int auto_budget(struct cfs_store *s, const char *dir, uint64_t *out)
{
	struct statvfs v;
	uint64_t b;

	if (statvfs(dir, &v) < 0)
		return -errno;
	b = ((uint64_t)v.f_bavail * v.f_frsize + cfs_arenas_allocated(&s->ar)) / 2;
	*out = b < MIN_AUTO_BUDGET ? MIN_AUTO_BUDGET : b;
	return 0;
}

/* Access counts for the GPU loader (heat.h); without them the cache works as
 * before, so a failure is only logged. */
static void open_heat(struct cfs_store *s, const char *dir)
{
	uint64_t high[CFS_CLASS_CODES];
	for (unsigned i = 0; i < s->ar.n; i++)
		high[i] = cfs_arena_high(&s->ar.a[i]);
	int rc = cfs_heat_create(&s->heat, dir, s->ar.n, high, s->budget, s->epoch);
	if (rc)
		CFS_WARN("cache: no access counts for the GPU loader (%s/%s): %s", dir,
			 CFS_HEAT_FILE, cfs_strerror(rc));
}

int cfs_store_open(const struct cfs_store_opts *o, struct cfs_store **out)
{
	struct cfs_store *s;
	uint32_t bs;
	int rc;

	*out = NULL;
	if (!o || !o->dir)
		return -EINVAL;
	bs = o->block_size ? o->block_size : 1u << 20;
	if (!cfs_class_block_ok(bs))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->wmu, NULL);
	s->lockfd = -1;
	s->block_size = bs;
	s->verify_always = o->verify_always;
	if ((rc = lock_dir(s, o->dir)) != 0 || (rc = cfs_table_init(&s->tab)) != 0 ||
	    (rc = open_index(s, o->dir)) != 0 ||
	    (rc = check_header(s, o->dir)) != 0 || (rc = cfs_arenas_open(&s->ar, o->dir, bs)) != 0 ||
	    (rc = rebuild(s)) != 0 || (rc = index_opened(s, o->dir)) != 0)
		goto fail;
	s->budget = o->budget;
	if (!s->budget && (rc = auto_budget(s, o->dir, &s->budget)) != 0)
		goto fail;
	if (s->used > s->budget)
		cfs_store_evict_to(s, s->budget, NULL, NULL);
	open_heat(s, o->dir);
	CFS_INFO("cache: %s: %zu blocks, %llu of %llu MiB used, block size %u KiB", o->dir,
		 s->tab.ecount, (unsigned long long)(s->used >> 20),
		 (unsigned long long)(s->budget >> 20), bs >> 10);
	*out = s;
	return 0;
fail:
	CFS_ERROR("cache: cannot open %s: %s", o->dir, cfs_strerror(rc));
	cfs_store_close(s);
	return rc;
}

void cfs_store_close(struct cfs_store *s)
{
	if (!s)
		return;
	cfs_index_close(s->ix);
	cfs_heat_close(&s->heat);
	cfs_arenas_close(&s->ar);
	cfs_table_cleanup(&s->tab);
	if (s->lockfd >= 0)
		close(s->lockfd);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->wmu);
	free(s);
}
