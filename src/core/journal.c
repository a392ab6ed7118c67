/* journal: the write journal (see journal.h).
 *
 * Two LMDB environments in the journal's folder, both through cache/index.h:
 *   journal.mdb         the durable rows: written only by cfs_journal_sync,
 *                       each write flushed (data and meta pages);
 *   journal-recent.mdb  every change since (puts, removals as an empty value,
 *                       done rows, the sequence counter), opened CFS_IX_NOSYNC:
 *                       a commit costs a write into the page cache, no flush.
 * A read looks in the recent rows first.  A sync moves the rows it is asked
 * for (and every removal) into journal.mdb in one flushed transaction, then
 * drops from the recent environment those still as they were read.  Syncs
 * run one at a time (sync_lk); puts take only the row lock (lk), for the read
 * and the drop, never across the flushes, so a close() does not wait for a
 * flush the uploader started.
 *
 * A machine crash can leave a MDB_NOSYNC file damaged, not only behind, so
 * the recent environment is trusted only within the boot that wrote it: the
 * boot id is kept beside it (journal-recent.boot); at open a different boot
 * (or no record) means the machine restarted, and the file is removed
 * unread.  Within one boot the kernel's page cache holds every commit of a
 * dead process, so a server restarted after a crash sees them all.  A clean
 * close flushes the folder's file system (the staged files live there),
 * moves every row and removes the recent environment, so a clean unmount and
 * reboot loses nothing. */
#define _GNU_SOURCE
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "err.h"
#include "index.h"
#include "log.h"
#include "rowio.h"

#define JE_MAGIC 0x3245454au /* "JEE2" */
#define JE_HEAD 48
#define REP_FLAG 0x20u /* the row carries rep_name and rep_parent */
#define SEQ_KEY "seq"
#define DONE_PREFIX "u:"
#define FILE_PREFIX "f:"
#define RECENT_NAME "journal-recent.mdb"
#define BOOT_NAME "journal-recent.boot"
#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"
#define BOOT_MAX 64

struct cfs_journal {
	struct cfs_index *ix; /* durable rows */
	struct cfs_index *rx; /* rows since the last sync (MDB_NOSYNC) */
	pthread_mutex_t lk;   /* seq, every write to rx */
	pthread_mutex_t sync_lk; /* one sync at a time (taken before lk) */
	uint64_t seq;         /* the last sequence number handed out */
	char dir[PATH_MAX];
};

static int move_rows(struct cfs_journal *j, const char *prefix, const char *key, size_t keylen,
		     int flush_dir);

/* The machine's boot id into out ("unknown" when unreadable: a machine
 * without /proc never drops recent rows). */
static void machine_boot(char out[BOOT_MAX])
{
	snprintf(out, BOOT_MAX, "unknown");
	int fd = open(BOOT_ID_PATH, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, out, BOOT_MAX - 1);
	close(fd);
	if (n <= 0) {
		snprintf(out, BOOT_MAX, "unknown");
		return;
	}
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

static int path_in(const struct cfs_journal *j, const char *name, char *out, size_t cap)
{
	return (size_t)snprintf(out, cap, "%s/%s", j->dir, name) >= cap ? -ENAMETOOLONG : 0;
}

/* The boot the recent rows were written in matches boot? */
static int same_boot(const struct cfs_journal *j, const char *boot)
{
	char path[PATH_MAX], got[BOOT_MAX];
	if (path_in(j, BOOT_NAME, path, sizeof(path)))
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, got, sizeof(got) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	got[n] = '\0';
	return strcmp(got, boot) == 0;
}

/* Records boot as the recent rows' (a new file renamed over the old: no
 * flush needed, a record lost in a crash only drops rows once more). */
static int write_boot(const struct cfs_journal *j, const char *boot)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	int rc = path_in(j, BOOT_NAME, path, sizeof(path));
	if (!rc)
		rc = path_in(j, BOOT_NAME ".tmp", tmp, sizeof(tmp));
	if (rc)
		return rc;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	size_t len = strlen(boot);
	if (write(fd, boot, len) != (ssize_t)len)
		rc = -EIO;
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

/* Removes the recent environment (and its lock file). */
static void drop_recent(const struct cfs_journal *j)
{
	char path[PATH_MAX];
	if (path_in(j, RECENT_NAME, path, sizeof(path)) == 0)
		unlink(path);
	if (path_in(j, RECENT_NAME "-lock", path, sizeof(path)) == 0)
		unlink(path);
}

static int open_recent(struct cfs_journal *j, const char *boot)
{
	char path[PATH_MAX];
	int rc = path_in(j, RECENT_NAME, path, sizeof(path));
	if (rc)
		return rc;
	if (!same_boot(j, boot)) {
		if (access(path, F_OK) == 0)
			CFS_WARN("journal: the machine restarted since %s was written: changes "
				 "closed but never synced (fsync, colabfs sync) are dropped",
				 path);
		drop_recent(j);
	}
	rc = cfs_index_open_flags(path, 1ull << 20, 1ull << 30, CFS_IX_NOSYNC, &j->rx);
	if (rc == -EUCLEAN) {
		CFS_ERROR("journal: %s is damaged; it is started afresh", path);
		drop_recent(j);
		rc = cfs_index_open_flags(path, 1ull << 20, 1ull << 30, CFS_IX_NOSYNC, &j->rx);
	}
	if (!rc)
		rc = write_boot(j, boot);
	return rc;
}

static uint64_t read_seq(struct cfs_index *ix)
{
	void *v;
	size_t vl;
	uint64_t seq = 0;
	if (cfs_index_get(ix, CFS_IX_META, SEQ_KEY, sizeof(SEQ_KEY) - 1, &v, &vl) == 0) {
		if (vl == 8)
			seq = cfs_le_get(v, 8);
		free(v);
	}
	return seq;
}

int cfs_journal_open_as(const char *dir, const char *boot_id, struct cfs_journal **out)
{
	char path[PATH_MAX], boot[BOOT_MAX];
	*out = NULL;
	if ((size_t)snprintf(path, sizeof(path), "%s/journal.mdb", dir) >= sizeof(path))
		return -ENAMETOOLONG;
	struct cfs_journal *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	snprintf(j->dir, sizeof(j->dir), "%s", dir);
	pthread_mutex_init(&j->lk, NULL);
	pthread_mutex_init(&j->sync_lk, NULL);
	if (boot_id)
		snprintf(boot, sizeof(boot), "%s", boot_id);
	else
		machine_boot(boot);
	int rc = cfs_index_open(path, 8ull << 20, 1ull << 30, &j->ix);
	if (!rc)
		rc = open_recent(j, boot);
	if (rc) {
		cfs_index_close(j->ix);
		cfs_index_close(j->rx);
		pthread_mutex_destroy(&j->lk);
		pthread_mutex_destroy(&j->sync_lk);
		free(j);
		return rc;
	}
	uint64_t a = read_seq(j->ix), b = read_seq(j->rx);
	j->seq = a > b ? a : b;
	*out = j;
	return 0;
}

int cfs_journal_open(const char *dir, struct cfs_journal **out)
{
	return cfs_journal_open_as(dir, NULL, out);
}

void cfs_journal_close(struct cfs_journal *j)
{
	if (!j)
		return;
	/* a clean stop: the staged files and every row (done rows too: a
	 * server restarted after a clean exit may still be asked again) made
	 * durable, then the recent environment goes */
	pthread_mutex_lock(&j->sync_lk);
	int rc = move_rows(j, FILE_PREFIX, NULL, 0, 1);
	if (!rc)
		rc = move_rows(j, DONE_PREFIX, NULL, 0, 0);
	pthread_mutex_unlock(&j->sync_lk);
	if (rc)
		CFS_WARN("journal: cannot make the last changes durable: %s", cfs_strerror(rc));
	int clean = !rc;
	cfs_index_close(j->rx);
	cfs_index_close(j->ix);
	char path[PATH_MAX];
	if (clean && path_in(j, BOOT_NAME, path, sizeof(path)) == 0) {
		drop_recent(j);
		unlink(path);
	}
	pthread_mutex_destroy(&j->lk);
	pthread_mutex_destroy(&j->sync_lk);
	free(j);
}

int cfs_journal_encode(const struct cfs_jent *e, struct cfs_buf *b)
{
	unsigned char h[JE_HEAD];
	cfs_le_put(h, JE_MAGIC, 4);
	if (e->state < CFS_JSTATE_CLOSED || e->state > CFS_JSTATE_SNAPSHOT)
		return -EINVAL;
	cfs_le_put(h + 4, (uint64_t)(e->is_new ? 1 : 0) | (e->removed ? 2 : 0) |
				  ((uint64_t)e->state << 2) | (e->replaces[0] ? REP_FLAG : 0), 4);
	cfs_le_put(h + 8, e->seq, 8);
	cfs_le_put(h + 16, (uint64_t)e->size, 8);
	cfs_le_put(h + 24, (uint64_t)e->mtime_ns, 8);
	cfs_le_put(h + 32, (uint64_t)e->confirmed, 8);
	cfs_le_put(h + 40, e->gen, 8);
	int rc = cfs_buf_append(b, h, sizeof(h));
	if (!rc)
		rc = cfs_row_put_str(b, e->id, sizeof(e->id));
	if (!rc)
		rc = cfs_row_put_str(b, e->parent, sizeof(e->parent));
	if (!rc)
		rc = cfs_row_put_str(b, e->name, sizeof(e->name));
	if (!rc)
		rc = cfs_row_put_str(b, e->base_rev, sizeof(e->base_rev));
	if (!rc)
		rc = cfs_row_put_str(b, e->replaces, sizeof(e->replaces));
	if (!rc)
		rc = cfs_row_put_str(b, e->uri, sizeof(e->uri));
	if (!rc)
		rc = cfs_row_put_str(b, e->sent_name, sizeof(e->sent_name));
	if (!rc)
		rc = cfs_row_put_str(b, e->sent_parent, sizeof(e->sent_parent));
	if (!rc && e->replaces[0]) /* REP_FLAG: older rows end before these */
		rc = cfs_row_put_str(b, e->rep_name, sizeof(e->rep_name));
	if (!rc && e->replaces[0])
		rc = cfs_row_put_str(b, e->rep_parent, sizeof(e->rep_parent));
	return rc;
}

int cfs_journal_decode(const void *row, size_t len, struct cfs_jent *e)
{
	const unsigned char *p = row, *end = p + len;
	memset(e, 0, sizeof(*e));
	if (len < JE_HEAD || (uint32_t)cfs_le_get(p, 4) != JE_MAGIC ||
	    ((cfs_le_get(p + 4, 4) >> 2) & 7) > CFS_JSTATE_SNAPSHOT ||
	    cfs_le_get(p + 4, 4) >> 6)
		return CFS_E_PROTO;
	uint64_t flags = cfs_le_get(p + 4, 4);
	e->is_new = (int)(flags & 1);
	e->removed = (int)((flags >> 1) & 1);
	e->state = (int)((flags >> 2) & 7);
	e->seq = cfs_le_get(p + 8, 8);
	e->size = (int64_t)cfs_le_get(p + 16, 8);
	e->mtime_ns = (int64_t)cfs_le_get(p + 24, 8);
	e->confirmed = (int64_t)cfs_le_get(p + 32, 8);
	e->gen = cfs_le_get(p + 40, 8);
	p += JE_HEAD;
	int rc = cfs_row_get_str(&p, end, e->id, sizeof(e->id));
	if (!rc)
		rc = cfs_row_get_str(&p, end, e->parent, sizeof(e->parent));
	if (!rc)
		rc = cfs_row_get_str(&p, end, e->name, sizeof(e->name));
	if (!rc)
		rc = cfs_row_get_str(&p, end, e->base_rev, sizeof(e->base_rev));
	if (!rc)
		rc = cfs_row_get_str(&p, end, e->replaces, sizeof(e->replaces));
	if (!rc)
		rc = cfs_row_get_str(&p, end, e->uri, sizeof(e->uri));
	if (!rc)
		rc = cfs_row_get_str(&p, end, e->sent_name, sizeof(e->sent_name));
	if (!rc)
		rc = cfs_row_get_str(&p, end, e->sent_parent, sizeof(e->sent_parent));
	if (!rc && (flags & REP_FLAG))
		rc = cfs_row_get_str(&p, end, e->rep_name, sizeof(e->rep_name));
	if (!rc && (flags & REP_FLAG))
		rc = cfs_row_get_str(&p, end, e->rep_parent, sizeof(e->rep_parent));
	if (!rc && (p != end || !e->id[0] || e->size < 0 || e->confirmed < 0 ||
		    e->confirmed > e->size))
		rc = CFS_E_PROTO;
	return rc;
}

static size_t file_key(const char *id, char *k, size_t cap)
{
	int n = snprintf(k, cap, FILE_PREFIX "%s", id);
	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

int cfs_journal_put(struct cfs_journal *j, struct cfs_jent *e)
{
	char k[CFS_ID_MAX + 4];
	size_t kl = file_key(e->id, k, sizeof(k));
	if (!kl || !e->id[0])
		return -EINVAL;
	pthread_mutex_lock(&j->lk);
	uint64_t seq = e->seq ? e->seq : j->seq + 1;
	struct cfs_buf b = { 0 };
	struct cfs_jent copy = *e;
	copy.seq = seq;
	int rc = cfs_journal_encode(&copy, &b);
	unsigned char sv[8];
	cfs_le_put(sv, seq > j->seq ? seq : j->seq, 8);
	struct cfs_index_kv kv[2] = {
		{ CFS_IX_META, k, kl, b.data, b.len },
		{ CFS_IX_META, SEQ_KEY, sizeof(SEQ_KEY) - 1, sv, sizeof(sv) },
	};
	if (!rc)
		rc = cfs_index_put_many(j->rx, kv, 2);
	if (!rc) {
		if (seq > j->seq)
			j->seq = seq;
		e->seq = seq;
	}
	pthread_mutex_unlock(&j->lk);
	cfs_buf_cleanup(&b);
	return rc;
}

/* The row of key k: from the recent rows, else the durable ones.  -ENOENT
 * when absent or removed. */
static int get_row(struct cfs_journal *j, const void *k, size_t kl, void **v, size_t *vl)
{
	int rc = cfs_index_get(j->rx, CFS_IX_META, k, kl, v, vl);
	if (rc == -ENOENT)
		return cfs_index_get(j->ix, CFS_IX_META, k, kl, v, vl);
	if (!rc && *vl == 0) { /* removed */
		free(*v);
		rc = -ENOENT;
	}
	return rc;
}

int cfs_journal_get(struct cfs_journal *j, const char *id, struct cfs_jent *e)
{
	char k[CFS_ID_MAX + 4];
	size_t kl = file_key(id, k, sizeof(k));
	if (!kl)
		return -EINVAL;
	void *v;
	size_t vl;
	int rc = get_row(j, k, kl, &v, &vl);
	if (!rc) {
		rc = cfs_journal_decode(v, vl, e);
		free(v);
	}
	return rc;
}

int cfs_journal_del(struct cfs_journal *j, const char *id)
{
	char k[CFS_ID_MAX + 4];
	size_t kl = file_key(id, k, sizeof(k));
	if (!kl)
		return -EINVAL;
	pthread_mutex_lock(&j->lk);
	void *v;
	size_t vl;
	int rc = get_row(j, k, kl, &v, &vl);
	if (!rc) {
		free(v);
		rc = cfs_index_put(j->rx, CFS_IX_META, k, kl, "", 0); /* removed */
	}
	pthread_mutex_unlock(&j->lk);
	return rc;
}

/* ---- load: the durable rows overlaid with the recent ones ----------------- */

/* Room in array *p (*cap elements of size each, n used) for one more:
 * doubled from 16 when full.  0 or -ENOMEM (*p unchanged). */
static int grow(void **p, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 16;
	void *q = realloc(*p, c * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

struct load_arg {
	struct cfs_jent *e;
	size_t n, cap, damaged;
	char (*skip)[CFS_ID_MAX + 4]; /* sorted keys the recent rows hold (ix pass) */
	size_t nskip, capskip;
	int recent;                   /* the recent pass: keys are recorded */
};

static int cmp_key(const void *x, const void *y)
{
	return strcmp(x, y);
}

static int on_row(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct load_arg *a = arg;
	char key[CFS_ID_MAX + 4];
	if (kl >= sizeof(key))
		kl = sizeof(key) - 1;
	memcpy(key, k, kl);
	key[kl] = '\0';
	if (a->recent) { /* keys come in order: the list stays sorted */
		if (grow((void **)&a->skip, &a->capskip, a->nskip, sizeof(*a->skip)))
			return -ENOMEM;
		memcpy(a->skip[a->nskip++], key, sizeof(key));
		if (vl == 0)
			return 0; /* removed */
	} else if (a->nskip && bsearch(key, a->skip, a->nskip, sizeof(*a->skip), cmp_key)) {
		return 0; /* a newer row is in the recent ones */
	}
	if (grow((void **)&a->e, &a->cap, a->n, sizeof(*a->e)))
		return -ENOMEM;
	if (cfs_journal_decode(v, vl, &a->e[a->n])) {
		a->damaged++;
		CFS_ERROR("journal: a damaged entry (%.*s) is skipped", (int)(kl > 40 ? 40 : kl),
			  (const char *)k);
		return 0;
	}
	a->n++;
	return 0;
}

static int by_seq(const void *x, const void *y)
{
	const struct cfs_jent *a = x, *b = y;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

int cfs_journal_load(struct cfs_journal *j, struct cfs_jent **out, size_t *n, size_t *damaged)
{
	struct load_arg a = { .recent = 1 };
	/* a row a sync is moving is in both files meanwhile: the recent one wins */
	int rc = cfs_index_scan_prefix(j->rx, CFS_IX_META, FILE_PREFIX, sizeof(FILE_PREFIX) - 1,
				       on_row, &a);
	a.recent = 0;
	if (!rc)
		rc = cfs_index_scan_prefix(j->ix, CFS_IX_META, FILE_PREFIX,
					   sizeof(FILE_PREFIX) - 1, on_row, &a);
	free(a.skip);
	if (rc) {
		free(a.e);
		return rc;
	}
	if (a.n)
		qsort(a.e, a.n, sizeof(*a.e), by_seq);
	*out = a.e;
	*n = a.n;
	if (damaged)
		*damaged = a.damaged;
	return 0;
}

/* ---- sync ----------------------------------------------------------------- */

struct pick_arg {
	struct cfs_index_kv *kv; /* keys and values copied into mem */
	size_t n, cap;
	const char *key; /* the one row to move besides removals; NULL: all */
	size_t keylen;
	int err;
};

static int on_pick(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct pick_arg *a = arg;
	if (vl && a->key && !(kl == a->keylen && memcmp(k, a->key, kl) == 0))
		return 0;
	if (grow((void **)&a->kv, &a->cap, a->n, sizeof(*a->kv)))
		return -ENOMEM;
	void *kc = malloc(kl), *vc = vl ? malloc(vl) : NULL;
	if (!kc || (vl && !vc)) {
		free(kc);
		free(vc);
		return -ENOMEM;
	}
	memcpy(kc, k, kl);
	if (vl)
		memcpy(vc, v, vl);
	a->kv[a->n++] = (struct cfs_index_kv){ CFS_IX_META, kc, kl, vc,
					       vl ? vl : CFS_IX_DELETE };
	return 0;
}

static void free_picked(struct pick_arg *a)
{
	for (size_t i = 0; i < a->n; i++) {
		free((void *)a->kv[i].k);
		if (a->kv[i].vl != CFS_IX_DELETE)
			free((void *)a->kv[i].v);
	}
	free(a->kv);
}

/* sync_lk held: the recent rows under prefix (only key's, and removals, when
 * key is not NULL) copied into journal.mdb with the sequence counter, in one
 * flushed commit (flush_dir: after a flush of the folder's file system), then
 * dropped from the recent ones unless changed since. */
static int move_rows(struct cfs_journal *j, const char *prefix, const char *key, size_t keylen,
		     int flush_dir)
{
	struct pick_arg a = { .key = key, .keylen = keylen };
	unsigned char sv[8];
	pthread_mutex_lock(&j->lk);
	int rc = cfs_index_scan_prefix(j->rx, CFS_IX_META, prefix, strlen(prefix), on_pick, &a);
	cfs_le_put(sv, j->seq, 8);
	pthread_mutex_unlock(&j->lk);
	if (!rc && a.n && flush_dir) {
		/* after the rows were read: the bytes of every one of them are
		 * on disk before it is (a row put since stays recent) */
		int fd = open(j->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		rc = fd < 0 ? -errno : syncfs(fd) ? -errno : 0;
		if (fd >= 0)
			close(fd);
	}
	if (!rc && a.n) {
		/* the counter goes along: a row in journal.mdb never has a
		 * sequence number past the one stored there */
		struct cfs_index_kv *kv = realloc(a.kv, (a.n + 1) * sizeof(*kv));
		if (!kv) {
			rc = -ENOMEM;
		} else {
			a.kv = kv;
			a.kv[a.n] = (struct cfs_index_kv){ CFS_IX_META, SEQ_KEY,
							   sizeof(SEQ_KEY) - 1, sv, sizeof(sv) };
			rc = cfs_index_put_many(j->ix, a.kv, a.n + 1);
		}
	}
	if (!rc && a.n)
		rc = cfs_index_sync(j->ix);
	if (!rc && a.n) { /* now durable: out of the recent rows, unless changed */
		struct cfs_index_kv *del = calloc(a.n, sizeof(*del));
		size_t nd = 0;
		if (!del)
			rc = -ENOMEM;
		pthread_mutex_lock(&j->lk);
		for (size_t i = 0; !rc && i < a.n; i++) {
			void *v;
			size_t vl, want = a.kv[i].vl == CFS_IX_DELETE ? 0 : a.kv[i].vl;
			if (cfs_index_get(j->rx, CFS_IX_META, a.kv[i].k, a.kv[i].kl, &v, &vl))
				continue;
			if (vl == want && (!vl || memcmp(v, a.kv[i].v, vl) == 0))
				del[nd++] = (struct cfs_index_kv){ CFS_IX_META, a.kv[i].k, a.kv[i].kl,
								   NULL, CFS_IX_DELETE };
			free(v);
		}
		if (!rc && nd)
			rc = cfs_index_put_many(j->rx, del, nd);
		pthread_mutex_unlock(&j->lk);
		free(del);
	}
	free_picked(&a);
	return rc;
}

int cfs_journal_sync(struct cfs_journal *j, const char *id)
{
	char k[CFS_ID_MAX + 4];
	size_t kl = 0;
	if (id && !(kl = file_key(id, k, sizeof(k))))
		return -EINVAL;
	pthread_mutex_lock(&j->sync_lk);
	int rc = move_rows(j, FILE_PREFIX, id ? k : NULL, kl, !id);
	pthread_mutex_unlock(&j->sync_lk);
	return rc;
}

static int on_any(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	(void)k, (void)kl, (void)v, (void)vl;
	*(int *)arg = 1;
	return 1; /* one is enough */
}

int cfs_journal_sync_pending(struct cfs_journal *j)
{
	int any = 0;
	int rc = cfs_index_scan_prefix(j->rx, CFS_IX_META, FILE_PREFIX, sizeof(FILE_PREFIX) - 1,
				       on_any, &any);
	return rc ? rc : any;
}

/* ---- done rows ------------------------------------------------------------ */

static void done_key(unsigned char k[10], uint64_t unique)
{
	memcpy(k, DONE_PREFIX, 2);
	cfs_le_put(k + 2, unique, 8);
}

int cfs_journal_done_put(struct cfs_journal *j, uint64_t unique, int result, uint64_t ino)
{
	unsigned char k[10], v[12];
	done_key(k, unique);
	cfs_le_put(v, (uint64_t)(uint32_t)result, 4);
	cfs_le_put(v + 4, ino, 8);
	return cfs_index_put(j->rx, CFS_IX_META, k, sizeof(k), v, sizeof(v));
}

int cfs_journal_done_get(struct cfs_journal *j, uint64_t unique, int *result, uint64_t *ino)
{
	unsigned char k[10];
	done_key(k, unique);
	void *v;
	size_t vl;
	int rc = get_row(j, k, sizeof(k), &v, &vl);
	if (rc)
		return rc;
	if (vl != 12) {
		free(v);
		return CFS_E_PROTO;
	}
	*result = (int)(int32_t)(uint32_t)cfs_le_get(v, 4);
	*ino = cfs_le_get((unsigned char *)v + 4, 8);
	free(v);
	return 0;
}

int cfs_journal_clear_done(struct cfs_journal *j)
{
	/* journal.mdb holds done rows of versions that wrote them there */
	int rc = cfs_index_del_prefix(j->rx, CFS_IX_META, DONE_PREFIX, sizeof(DONE_PREFIX) - 1, NULL);
	int rc2 = cfs_index_del_prefix(j->ix, CFS_IX_META, DONE_PREFIX, sizeof(DONE_PREFIX) - 1, NULL);
	return rc ? rc : rc2;
}

/* ---- whose journal; a damaged one ----------------------------------------- */

#define OWNER_KEY "owner"
#define ASIDE_PREFIX "a:"

/* The owner row lives in journal.mdb only (written once, flushed). */
int cfs_journal_owner(struct cfs_journal *j, const char *owner, int *same)
{
	void *v;
	size_t vl;
	*same = 1;
	int rc = cfs_index_get(j->ix, CFS_IX_META, OWNER_KEY, sizeof(OWNER_KEY) - 1, &v, &vl);
	if (rc == -ENOENT)
		return cfs_index_put(j->ix, CFS_IX_META, OWNER_KEY, sizeof(OWNER_KEY) - 1, owner,
				     strlen(owner));
	if (rc)
		return rc;
	*same = vl == strlen(owner) && memcmp(v, owner, vl) == 0;
	free(v);
	return 0;
}

int cfs_journal_set_aside(struct cfs_journal *j, const char *owner, size_t *moved)
{
	struct cfs_jent *e = NULL;
	size_t n = 0;
	*moved = 0;
	int rc = cfs_journal_load(j, &e, &n, NULL); /* both environments' rows */
	for (size_t i = 0; !rc && i < n; i++) {
		char k[CFS_ID_MAX + 4];
		struct cfs_buf b = { 0 };
		int kl = snprintf(k, sizeof(k), ASIDE_PREFIX "%s", e[i].id);
		rc = kl > 0 && (size_t)kl < sizeof(k) ? cfs_journal_encode(&e[i], &b) : -EINVAL;
		if (!rc)
			rc = cfs_index_put(j->ix, CFS_IX_META, k, (size_t)kl, b.data, b.len);
		if (!rc)
			rc = cfs_journal_del(j, e[i].id);
		if (rc == -ENOENT)
			rc = 0;
		cfs_buf_cleanup(&b);
		*moved += !rc;
	}
	free(e);
	if (!rc)
		rc = cfs_journal_sync(j, NULL);
	if (!rc)
		rc = cfs_index_put(j->ix, CFS_IX_META, OWNER_KEY, sizeof(OWNER_KEY) - 1, owner,
				   strlen(owner));
	return rc;
}

/* Moves dir/name to dir/name.damaged-T; 0 or -errno (-ENOENT: none). */
static int move_aside(const char *dir, const char *name, long long t, char *to, size_t cap)
{
	char from[PATH_MAX];
	if ((size_t)snprintf(from, sizeof(from), "%s/%s", dir, name) >= sizeof(from) ||
	    (size_t)snprintf(to, cap, "%s/%s.damaged-%lld", dir, name, t) >= cap)
		return -ENAMETOOLONG;
	return rename(from, to) ? -errno : 0;
}

int cfs_journal_open_or_reset(const char *dir, struct cfs_journal **out, char *aside, size_t cap)
{
	aside[0] = '\0';
	int rc = cfs_journal_open(dir, out);
	if (rc != -EUCLEAN && rc != CFS_E_PROTO)
		return rc;
	long long t = (long long)time(NULL);
	char other[PATH_MAX];
	if (move_aside(dir, "journal.mdb", t, aside, cap) != 0)
		aside[0] = '\0';
	move_aside(dir, "journal-recent.mdb", t, other, sizeof(other));
	if (!aside[0])
		snprintf(aside, cap, "%s", other);
	if (!aside[0])
		return rc;
	const char *locks[] = { "journal.mdb-lock", "journal-recent.mdb-lock" };
	for (int i = 0; i < 2; i++)
		if ((size_t)snprintf(other, sizeof(other), "%s/%s", dir, locks[i]) < sizeof(other))
			unlink(other);
	return cfs_journal_open(dir, out);
}
