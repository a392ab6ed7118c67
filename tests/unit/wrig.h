/* wrig: a writable vfs over the fake Drive (wfake.h), for the write-path
 * unit tests: a temporary cache folder with a seeded namespace, a staging
 * folder with its journal, and "processes" that start (a fresh mount or a
 * server restarted under a live one) and die (freed with their handles
 * never released: what a SIGKILL leaves is the journal and the staged
 * files).  The namespace: My Drive "ROOT" holding old.bin (F1, OLD_LEN
 * bytes), the folder other (D2) holding victim.bin (F9). */
#ifndef CFS_WRIG_H
#define CFS_WRIG_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "buf.h"
#include "check.h"
#include "drive.h"
#include "err.h"
#include "http.h"
#include "inode.h"
#include "journal.h"
#include "log.h"
#include "nsdb.h"
#include "staging.h"
#include "store.h"
#include "vfs.h"
#include "wfake.h"

#define DEAD_URL "http://127.0.0.1:9"
#define OLD_LEN 5000

struct rig {
	char dir[128], cache[160], staging[160];
	struct wfake fk;
	struct cfs_wdrive tab;
	struct cfs_drive *drive;
	struct cfs_store *s;
	struct cfs_journal *j;
	struct cfs_staging *st;
	struct cfs_vfs *v;
	long write_back_ms;
	long open_ms;      /* --upload-open-files, ms (0: off) */
	const char *owner; /* the API URL the journal is for (NULL: WFAKE_API) */
	char old[OLD_LEN];
	uint64_t unique;
};

static inline int64_t rig_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void rig_seed(struct rig *r)
{
	struct cfs_nsdb *n;
	CHECK_EQ(cfs_nsdb_new(r->s, &n), 0);
	struct cfs_lrow_entry root = { CFS_ROOT_INO, 1, 0, 1, 1, "/", "ROOT", "ROOT", "", "", "", "" };
	CHECK_EQ(cfs_nsdb_save_root(n, "root", &root), 0);
	/* inode numbers as a listing gets them: from the id map */
	const char *ids[3] = { "F1", "D2", "F9" };
	uint64_t ino[3];
	CHECK_EQ(cfs_nsdb_inos(n, ids, 3, ino), 0);
	struct cfs_lrow_entry top[2] = {
		{ ino[0], 0, OLD_LEN, 1, 1, "old.bin", "F1", "F1", "r:r1", "", "", "" },
		{ ino[1], 1, 0, 1, 1, "other", "D2", "D2", "", "", "", "" },
	};
	CHECK_EQ(cfs_nsdb_save_listing(n, "ROOT", top, 2, rig_wall_ms()), 0);
	struct cfs_lrow_entry other = { ino[2], 0, 3, 1, 1, "victim.bin", "F9", "F9", "r:r1",
					"", "", "" };
	CHECK_EQ(cfs_nsdb_save_listing(n, "D2", &other, 1, rig_wall_ms()), 0);
	cfs_nsdb_free(n);
	for (int i = 0; i < OLD_LEN; i++)
		r->old[i] = (char)('a' + i % 26);
	wfake_add(&r->fk, "ROOT", "", "My Drive", NULL, 0, 1);
	wfake_add(&r->fk, "F1", "ROOT", "old.bin", r->old, OLD_LEN, 0);
	wfake_add(&r->fk, "D2", "ROOT", "other", NULL, 0, 1);
	wfake_add(&r->fk, "F9", "D2", "victim.bin", "vvv", 3, 0);
}

static inline void rig_up(struct rig *r, long write_back_ms)
{
	memset(r, 0, sizeof(*r));
	cfs_log_set_level(getenv("WPATH_DEBUG") ? CFS_LOG_DEBUG : CFS_LOG_ERROR);
	snprintf(r->dir, sizeof(r->dir), "/tmp/cfs-test-wpath.XXXXXX");
	if (!mkdtemp(r->dir)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(r->cache, sizeof(r->cache), "%s/cache", r->dir);
	snprintf(r->staging, sizeof(r->staging), "%s/staging", r->dir);
	CHECK_EQ(mkdir(r->cache, 0700), 0);
	CHECK_EQ(mkdir(r->staging, 0700), 0);
	wfake_init(&r->fk);
	wfake_table(&r->fk, &r->tab);
	/* the real client is never called (the seams replace it): one per
	 * process, pointed at a closed port */
	static struct cfs_http *http;
	static struct cfs_auth *auth;
	static struct cfs_drive *drive;
	if (!drive) {
		struct cfs_http_opts ho = { .user_agent = "test" };
		struct cfs_auth_opts ao = { .metadata_url = DEAD_URL };
		struct cfs_drive_opts dopt = { .api_url = DEAD_URL, .io_timeout_ms = 1000,
					       .api_rate = -1 };
		char why[256];
		CHECK_EQ(cfs_http_new(&ho, &http), 0);
		setenv("COLABFS_ACCESS_TOKEN", "unused", 1);
		CHECK_EQ(cfs_auth_new(http, &ao, &auth, why, sizeof(why)), 0);
		CHECK_EQ(cfs_drive_new(http, auth, &dopt, &drive), 0);
		if (!drive)
			exit(1);
	}
	r->drive = drive;
	struct cfs_store_opts so = { .dir = r->cache, .block_size = 64 << 10, .budget = 64 << 20 };
	CHECK_EQ(cfs_store_open(&so, &r->s), 0);
	if (!r->s)
		exit(1);
	r->write_back_ms = write_back_ms;
	r->unique = 1000;
	rig_seed(r);
}

/* A server process starts: a fresh mount (fresh) or one restarted under a
 * live mount; its uploaders run. */
static inline void rig_start(struct rig *r, int fresh)
{
	CHECK_EQ(cfs_journal_open(r->staging, &r->j), 0);
	CHECK_EQ(cfs_staging_open(r->staging, &r->st), 0);
	struct cfs_vfs_opts o = {
		.journal_owner = r->owner ? r->owner : WFAKE_API,
		.dir_ttl_s = 3600, .journal = r->j, .stage = r->st, .write_back_ms = r->write_back_ms,
		.upload_open_ms = r->open_ms, .upload_threads = 2, .fresh_mount = fresh, .wdrive = &r->tab, .no_fh_rows = 1,
		.no_dataset_readahead = 1,
		.reader = { .workers = 2, .fetch = wfake_fetch, .io = &r->fk },
	};
	CHECK_EQ(cfs_vfs_new(r->drive, r->s, &o, &r->v), 0);
	if (!r->v)
		exit(1);
	CHECK_EQ(cfs_vfs_start_uploads(r->v), 0);
}

/* The server dies: nothing released, the journal and staged files stay. */
static inline void rig_kill(struct rig *r)
{
	cfs_vfs_free(r->v);
	r->v = NULL;
	cfs_journal_close(r->j);
	cfs_staging_close(r->st);
	r->j = NULL;
	r->st = NULL;
}

static inline int rig_rm(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	remove(p);
	return 0;
}

static inline void rig_down(struct rig *r)
{
	if (r->v)
		rig_kill(r);
	cfs_store_close(r->s);
	wfake_cleanup(&r->fk);
	nftw(r->dir, rig_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* Moves the fake clock and wakes the uploaders. */
static inline void rig_advance(struct rig *r, int64_t ms)
{
	wfake_advance(&r->fk, ms);
	cfs_vfs_w_kick(r->v);
}

static inline void rig_pause_ms(long ms)
{
	struct timespec d = { ms / 1000, (ms % 1000) * 1000000 };
	while (nanosleep(&d, &d) && errno == EINTR)
		;
}

/* Waits (real time, at most 10 s) until fn(r) holds; 1 when it did. */
static inline int rig_wait(struct rig *r, int (*fn)(struct rig *r, void *arg), void *arg)
{
	for (int i = 0; i < 2000; i++) {
		if (fn(r, arg))
			return 1;
		rig_pause_ms(5);
	}
	return fn(r, arg);
}

static inline int rig_calls_at_least(struct rig *r, void *arg)
{
	return wfake_calls(&r->fk, WF_UPLOAD) >= *(int *)arg;
}

static inline int rig_wait_uploads(struct rig *r, int n)
{
	return rig_wait(r, rig_calls_at_least, &n);
}

static inline struct cfs_vfs_write_stats rig_stats(struct rig *r)
{
	struct cfs_vfs_write_stats st;
	cfs_vfs_write_stats(r->v, &st);
	return st;
}

static inline int rig_no_pending(struct rig *r, void *arg)
{
	(void)arg;
	struct cfs_vfs_write_stats st = rig_stats(r);
	return st.pending == 0 && st.in_flight == 0;
}

/* Opens path component name in the root (flags as open(2)); *ino, *fh. */
static inline int rig_open(struct rig *r, const char *name, int flags, uint64_t *ino,
			   uint64_t *fh)
{
	struct cfs_vfs_attr a;
	int rc;
	*ino = 0;
	if (flags & O_CREAT) {
		rc = cfs_vfs_create(r->v, ++r->unique, CFS_ROOT_INO, name, flags, 1, &a, fh);
		if (!rc)
			*ino = a.ino;
		return rc;
	}
	if ((rc = cfs_vfs_lookup(r->v, CFS_ROOT_INO, name, &a)) != 0)
		return rc;
	*ino = a.ino;
	int keep, direct;
	return cfs_vfs_open(r->v, a.ino, flags, 1, fh, &keep, &direct);
}

static inline int rig_write(struct rig *r, uint64_t ino, uint64_t fh, int64_t off,
			    const void *buf, size_t len)
{
	size_t w = 0;
	int rc = cfs_vfs_write(r->v, ino, fh, off, buf, len, &w);
	return rc ? rc : w == len ? 0 : -EIO;
}

/* close(2): flush then release; flush's status. */
static inline int rig_close(struct rig *r, uint64_t ino, uint64_t fh)
{
	int rc = cfs_vfs_flush(r->v, ino, fh);
	cfs_vfs_release(r->v, ino, fh);
	return rc;
}

/* The sync reply for the whole mount (the user asks once). */
static inline char *rig_sync_json(struct rig *r)
{
	struct cfs_buf b = { 0 };
	CHECK_EQ(cfs_vfs_sync_json(r->v, CFS_ROOT_INO, &b), 0);
	CHECK_EQ(cfs_buf_append(&b, "", 1), 0);
	return b.data;
}

/* The fake's live file named name in the root has exactly these bytes. */
static inline int rig_drive_has(struct rig *r, const char *parent, const char *name,
				const void *data, size_t len)
{
	struct wfake_file *f = wfake_find(&r->fk, parent, name);
	int ok = f && f->len == len && (!len || memcmp(f->data, data, len) == 0);
	if (!ok)
		fprintf(stderr, "drive: %s/%s: %s, %zu bytes (want %zu)\n", parent, name,
			f ? "present" : "absent", f ? f->len : 0, len);
	return ok;
}

/* How many live files in parent have a name containing part. */
static inline int rig_count_named(struct rig *r, const char *parent, const char *part)
{
	int n = 0;
	pthread_mutex_lock(&r->fk.lock);
	for (int i = 0; i < r->fk.n; i++)
		n += !r->fk.f[i].trashed && strcmp(r->fk.f[i].parent, parent) == 0 &&
		     strstr(r->fk.f[i].name, part) != NULL;
	pthread_mutex_unlock(&r->fk.lock);
	return n;
}

#endif
