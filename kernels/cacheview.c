/* cacheview: read-only access to a daemon's cache folder (see cacheview.h). */
#include "cacheview.h"
#include "clock.h"
#include "classes.h"
#include "heat.h"
#include "format.h"
#include "lmdb_err.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct old_map {
	void *p;
	size_t len;
	struct old_map *next;
};

struct arena_map {
	pthread_mutex_t lock;
	int fd;
	dev_t dev;
	ino_t ino;
	const unsigned char *map;
	size_t maplen;
	uint64_t epoch;        /* header epoch seen when last checked */
	struct old_map *old;   /* earlier mappings, kept until close */
};

enum { T_BLOCKS, T_DIRS, T_META, T_STORE, T_N };
static const char *const table_names[T_N] = { CFS_FMT_TABLE_BLOCKS, CFS_FMT_TABLE_DIRS,
						CFS_FMT_TABLE_META, CFS_FMT_TABLE_STORE };

struct cfs_cview {
	char *dir;
	MDB_env *env;
	MDB_dbi dbi[T_N];
	int have[T_N];
	pthread_rwlock_t resize; /* held shared by every read txn; exclusive to adopt a new map */
	uint32_t block_size;
	uint64_t epoch;          /* latest header epoch seen (atomic) */
	dev_t idx_dev;
	ino_t idx_ino;
	struct arena_map ar[CFS_CLASS_CODES]; /* by class code */
	pthread_mutex_t heat_lock;
	struct cfs_heat heat;    /* heat.dat mapped read-only, or map NULL */
	dev_t heat_dev;
	ino_t heat_ino;
	uint64_t heat_checked;   /* 1 + the second heat.dat was last looked for */
};

struct cfs_cview_txn {
	struct cfs_cview *v;
	MDB_txn *txn;
};

/* One open view per index file per process (LMDB's rule). */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
#define REG_MAX 16
static struct {
	dev_t dev;
	ino_t ino;
	int used;
} reg[REG_MAX];

static int reg_add(dev_t dev, ino_t ino)
{
	int rc = -EBUSY, fr = -1;
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < REG_MAX; i++) {
		if (reg[i].used && reg[i].dev == dev && reg[i].ino == ino)
			goto out;
		if (!reg[i].used && fr < 0)
			fr = i;
	}
	if (fr < 0) {
		rc = -EMFILE;
		goto out;
	}
	reg[fr].used = 1;
	reg[fr].dev = dev;
	reg[fr].ino = ino;
	rc = 0;
out:
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

static void reg_del(dev_t dev, ino_t ino)
{
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < REG_MAX; i++)
		if (reg[i].used && reg[i].dev == dev && reg[i].ino == ino)
			reg[i].used = 0;
	pthread_mutex_unlock(&reg_lock);
}

/* Reads the header row in txn (format.h): block size and epoch.  -EPROTO for
 * another version or class scheme, or a bad block size. */
static int read_header(struct cfs_cview *v, MDB_txn *txn, uint32_t *bs, uint64_t *epoch)
{
	MDB_val k = { .mv_size = sizeof(CFS_FMT_HEADER_KEY) - 1,
		      .mv_data = (void *)CFS_FMT_HEADER_KEY }, d;
	struct cfs_fmt_header h;
	if (!v->have[T_STORE])
		return -ENOENT;
	int rc = cfs_lmdb_err(mdb_get(txn, v->dbi[T_STORE], &k, &d));
	if (rc)
		return rc;
	if (cfs_fmt_header_decode(d.mv_data, d.mv_size, &h) != 0)
		return -EPROTO;
	*bs = h.block_size;
	*epoch = h.epoch;
	return 0;
}

static int txn_begin(struct cfs_cview *v, MDB_txn **txn)
{
	for (int tries = 0; tries < 8; tries++) {
		pthread_rwlock_rdlock(&v->resize);
		int rc = mdb_txn_begin(v->env, NULL, MDB_RDONLY, txn);
		if (rc == 0)
			return 0;
		pthread_rwlock_unlock(&v->resize);
		if (rc != MDB_MAP_RESIZED)
			return cfs_lmdb_err(rc);
		/* the daemon grew the map: adopt its size (no txn of ours may be open) */
		pthread_rwlock_wrlock(&v->resize);
		rc = mdb_env_set_mapsize(v->env, 0);
		pthread_rwlock_unlock(&v->resize);
		if (rc)
			return cfs_lmdb_err(rc);
	}
	return -EIO;
}

static void txn_end(struct cfs_cview *v, MDB_txn *txn)
{
	mdb_txn_abort(txn);
	pthread_rwlock_unlock(&v->resize);
}

/* Never touch an index the daemon is still checking, or one whose meta page
 * names pages the file does not have: reading those through the map is
 * SIGBUS (the store's rule, cache/store.h "A damaged index"). */
static int index_sane(MDB_env *env, const char *dir, const struct stat *st)
{
	char marker[4096];
	MDB_envinfo info;
	MDB_stat ms;
	snprintf(marker, sizeof(marker), "%s/%s", dir, CFS_FMT_CHECK_MARKER);
	if (access(marker, F_OK) == 0)
		return -EAGAIN; /* being opened (or damaged): the daemon decides */
	if (mdb_env_info(env, &info) || mdb_env_stat(env, &ms))
		return -EPROTO;
	if ((uint64_t)st->st_size < ((uint64_t)info.me_last_pgno + 1) * ms.ms_psize)
		return -EPROTO;
	return 0;
}

int cfs_cview_open(const char *dir, struct cfs_cview **out)
{
	*out = NULL;
	if (!dir || !*dir)
		return -EINVAL;
	struct cfs_cview *v = calloc(1, sizeof(*v));
	char path[4096];
	struct stat st;
	MDB_txn *txn = NULL;
	int rc, registered = 0;
	if (!v)
		return -ENOMEM;
	pthread_rwlock_init(&v->resize, NULL);
	pthread_mutex_init(&v->heat_lock, NULL);
	for (int i = 0; i < CFS_CLASS_CODES; i++) {
		pthread_mutex_init(&v->ar[i].lock, NULL);
		v->ar[i].fd = -1;
	}
	if (!(v->dir = strdup(dir))) {
		rc = -ENOMEM;
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, CFS_FMT_INDEX_FILE);
	if (stat(path, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	if ((rc = reg_add(st.st_dev, st.st_ino)) != 0)
		goto fail;
	registered = 1;
	v->idx_dev = st.st_dev;
	v->idx_ino = st.st_ino;
	if ((rc = cfs_lmdb_err(mdb_env_create(&v->env))) != 0)
		goto fail;
	if ((rc = cfs_lmdb_err(mdb_env_set_maxdbs(v->env, 8))) != 0 ||
	    (rc = cfs_lmdb_err(mdb_env_open(v->env, path, MDB_RDONLY | MDB_NOSUBDIR | MDB_NOTLS,
				       0600))) != 0)
		goto fail;
	if ((rc = index_sane(v->env, dir, &st)) != 0)
		goto fail;
	if ((rc = txn_begin(v, &txn)) != 0)
		goto fail;
	for (int t = 0; t < T_N; t++) {
		int r = mdb_dbi_open(txn, table_names[t], 0, &v->dbi[t]);
		if (r == 0)
			v->have[t] = 1;
		else if (r != MDB_NOTFOUND) {
			rc = cfs_lmdb_err(r);
			break;
		}
	}
	if (!rc)
		rc = read_header(v, txn, &v->block_size, &v->epoch);
	/* dbi handles opened in a read txn stay valid after it commits */
	if (!rc) {
		if (mdb_txn_commit(txn))
			rc = -EIO;
		pthread_rwlock_unlock(&v->resize);
	} else {
		txn_end(v, txn);
	}
	txn = NULL;
	if (rc == -ENOENT || rc == -EPROTO)
		rc = -ENODATA; /* no block cache there (yet) */
	if (rc)
		goto fail;
	*out = v;
	return 0;
fail:
	if (v->env)
		mdb_env_close(v->env);
	v->env = NULL;
	if (registered)
		reg_del(v->idx_dev, v->idx_ino);
	v->idx_ino = 0;
	cfs_cview_close(v);
	return rc;
}

void cfs_cview_close(struct cfs_cview *v)
{
	if (!v)
		return;
	for (int i = 0; i < CFS_CLASS_CODES; i++) {
		struct arena_map *a = &v->ar[i];
		if (a->map)
			munmap((void *)a->map, a->maplen);
		for (struct old_map *o = a->old, *n; o; o = n) {
			n = o->next;
			munmap(o->p, o->len);
			free(o);
		}
		if (a->fd >= 0)
			close(a->fd);
		pthread_mutex_destroy(&a->lock);
	}
	if (v->env) {
		mdb_env_close(v->env);
		reg_del(v->idx_dev, v->idx_ino);
	}
	if (v->heat.map)
		munmap(v->heat.map, v->heat.len);
	pthread_mutex_destroy(&v->heat_lock);
	pthread_rwlock_destroy(&v->resize);
	free(v->dir);
	free(v);
}

uint32_t cfs_cview_block_size(const struct cfs_cview *v)
{
	return v->block_size;
}

int cfs_cview_begin(struct cfs_cview *v, struct cfs_cview_txn **t)
{
	*t = NULL;
	struct cfs_cview_txn *x = malloc(sizeof(*x));
	if (!x)
		return -ENOMEM;
	int rc = txn_begin(v, &x->txn);
	if (rc) {
		free(x);
		return rc;
	}
	x->v = v;
	uint32_t bs;
	uint64_t ep;
	if (read_header(v, x->txn, &bs, &ep) == 0) {
		/* a restarted daemon may have reset the cache (new arenas); a new block size
		 * empties it, so rows of another size never appear */
		__atomic_store_n(&v->epoch, ep, __ATOMIC_RELAXED);
	}
	*t = x;
	return 0;
}

void cfs_cview_end(struct cfs_cview_txn *t)
{
	if (!t)
		return;
	txn_end(t->v, t->txn);
	free(t);
}

static int decode_row(const unsigned char *b, size_t n, uint32_t bs, struct cfs_fmt_row *row);

int cfs_cview_block(struct cfs_cview_txn *t, const char *key, uint64_t block,
		    struct cfs_fmt_row *row)
{
	unsigned char kb[CFS_FMT_BKEY_MAX];
	int kl = cfs_fmt_bkey_encode(key, block, kb);
	if (kl < 0)
		return kl;
	if (!t->v->have[T_BLOCKS])
		return -ENOENT;
	MDB_val k = { .mv_size = (size_t)kl, .mv_data = kb }, d;
	int rc = cfs_lmdb_err(mdb_get(t->txn, t->v->dbi[T_BLOCKS], &k, &d));
	if (rc)
		return rc;
	return decode_row(d.mv_data, d.mv_size, t->v->block_size, row);
}

/* A row of block size bs, checked so that it never reads outside its slot
 * (cfs_fmt_row_fits); a row we do not understand reads as a miss. */
static int decode_row(const unsigned char *b, size_t n, uint32_t bs, struct cfs_fmt_row *row)
{
	if (cfs_fmt_row_decode(b, n, row) != 0 || !cfs_fmt_row_fits(row, bs))
		return -ENOENT;
	return 0;
}

static int table_of(const struct cfs_cview *v, const char *table)
{
	for (int i = 0; i < T_N; i++)
		if (strcmp(table, table_names[i]) == 0)
			return v->have[i] ? i : -ENOENT;
	return -EINVAL;
}

int cfs_cview_get(struct cfs_cview_txn *t, const char *table, const void *k, size_t kl,
		  const void **val, size_t *vl)
{
	int ti = table_of(t->v, table);
	if (ti < 0)
		return ti;
	if (kl == 0 || kl > 511)
		return -EINVAL;
	MDB_val key = { .mv_size = kl, .mv_data = (void *)k }, d;
	int rc = cfs_lmdb_err(mdb_get(t->txn, t->v->dbi[ti], &key, &d));
	if (rc)
		return rc;
	*val = d.mv_data;
	*vl = d.mv_size;
	return 0;
}

int cfs_cview_scan_meta(struct cfs_cview_txn *t, const char *prefix, cfs_cview_row_fn fn,
			void *arg)
{
	MDB_cursor *c;
	size_t pl = strlen(prefix);
	if (!t->v->have[T_META])
		return 0;
	int rc = cfs_lmdb_err(mdb_cursor_open(t->txn, t->v->dbi[T_META], &c));
	if (rc)
		return rc;
	MDB_val k = { .mv_size = pl, .mv_data = (void *)prefix }, d;
	int r = mdb_cursor_get(c, &k, &d, pl ? MDB_SET_RANGE : MDB_FIRST);
	while (r == 0 && !rc) {
		if (k.mv_size < pl || memcmp(k.mv_data, prefix, pl) != 0)
			break;
		rc = fn(arg, k.mv_data, k.mv_size, d.mv_data, d.mv_size);
		if (!rc)
			r = mdb_cursor_get(c, &k, &d, MDB_NEXT);
	}
	if (!rc && r && r != MDB_NOTFOUND)
		rc = cfs_lmdb_err(r);
	mdb_cursor_close(c);
	return rc;
}

/* Maps arena a again at the file's current size (reopening the path when the
 * cache was reset and the file replaced).  Called with a->lock held. */
static int remap(struct cfs_cview *v, struct arena_map *a, unsigned code)
{
	char name[CFS_FMT_ARENA_NAME_MAX], path[4096];
	struct stat st, pst;
	cfs_fmt_arena_name(code, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", v->dir, name);
	if (stat(path, &pst) < 0)
		return -errno;
	if (a->fd >= 0 && (pst.st_dev != a->dev || pst.st_ino != a->ino)) {
		close(a->fd);
		a->fd = -1;
	}
	if (a->fd < 0) {
		a->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (a->fd < 0)
			return -errno;
	}
	if (fstat(a->fd, &st) < 0)
		return -errno;
	a->dev = st.st_dev;
	a->ino = st.st_ino;
	if (st.st_size <= 0)
		return -ENOENT;
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, a->fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	if (a->map) {
		struct old_map *o = malloc(sizeof(*o));
		if (!o) {
			munmap(p, (size_t)st.st_size);
			return -ENOMEM;
		}
		o->p = (void *)a->map;
		o->len = a->maplen;
		o->next = a->old;
		a->old = o;
	}
	a->map = p;
	a->maplen = (size_t)st.st_size;
	return 0;
}

const unsigned char *cfs_cview_slot(struct cfs_cview *v, const struct cfs_fmt_row *row)
{
	if (row->cls >= CFS_CLASS_CODES || row->len > cfs_class_size(row->cls))
		return NULL;
	struct arena_map *a = &v->ar[row->cls];
	uint64_t size = cfs_class_size(row->cls);
	if (row->slot > (UINT64_MAX - size) / size)
		return NULL;
	uint64_t start = row->slot * size, end = start + row->len;
	uint64_t ep = __atomic_load_n(&v->epoch, __ATOMIC_RELAXED);
	const unsigned char *p = NULL;
	pthread_mutex_lock(&a->lock);
	if (!a->map || end > a->maplen || a->epoch != ep) {
		a->epoch = ep;
		if (remap(v, a, row->cls) != 0 && !a->map)
			goto out;
	}
	if (end <= a->maplen)
		p = a->map + start;
out:
	pthread_mutex_unlock(&a->lock);
	return p;
}

int cfs_cview_scan_blocks(struct cfs_cview_txn *t, cfs_cview_block_fn fn, void *arg)
{
	MDB_cursor *c;
	char key[CFS_FMT_KEY_MAX + 1];
	if (!t->v->have[T_BLOCKS])
		return 0;
	int rc = cfs_lmdb_err(mdb_cursor_open(t->txn, t->v->dbi[T_BLOCKS], &c));
	if (rc)
		return rc;
	MDB_val k, d;
	int r = mdb_cursor_get(c, &k, &d, MDB_FIRST);
	while (r == 0 && !rc) {
		struct cfs_fmt_row row;
		uint64_t block;
		int kl = cfs_fmt_bkey_decode(k.mv_data, k.mv_size, &block);
		if (kl > 0 && decode_row(d.mv_data, d.mv_size, t->v->block_size, &row) == 0) {
			memcpy(key, k.mv_data, (size_t)kl + 1);
			rc = fn(arg, key, block, &row);
		}
		if (!rc)
			r = mdb_cursor_get(c, &k, &d, MDB_NEXT);
	}
	if (!rc && r && r != MDB_NOTFOUND)
		rc = cfs_lmdb_err(r);
	mdb_cursor_close(c);
	return rc;
}

/* Maps heat.dat again when the daemon made a new one.  heat_lock held. */
static void heat_refresh(struct cfs_cview *v)
{
	char path[4096];
	struct stat st;
	uint64_t ep = __atomic_load_n(&v->epoch, __ATOMIC_RELAXED);
	if (v->heat.map && v->heat.epoch == ep)
		return;
	/* not there (yet) or from another epoch: look again at most once a second */
	uint64_t now = (uint64_t)(cfs_clock_mono_ms() / 1000);
	if (v->heat_checked == now + 1)
		return;
	v->heat_checked = now + 1;
	snprintf(path, sizeof(path), "%s/%s", v->dir, CFS_HEAT_FILE);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && st.st_size >= CFS_HEAT_HEADER &&
	    !(v->heat.map && st.st_dev == v->heat_dev && st.st_ino == v->heat_ino)) {
		void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		struct cfs_heat h;
		if (m != MAP_FAILED && cfs_heat_parse(m, (size_t)st.st_size, &h) == 0) {
			if (v->heat.map)
				munmap(v->heat.map, v->heat.len);
			v->heat = h;
			v->heat_dev = st.st_dev;
			v->heat_ino = st.st_ino;
		} else if (m != MAP_FAILED) {
			munmap(m, (size_t)st.st_size);
		}
	}
	close(fd);
}

uint32_t cfs_cview_heat(struct cfs_cview *v, const struct cfs_fmt_row *row)
{
	uint32_t n;
	pthread_mutex_lock(&v->heat_lock);
	heat_refresh(v);
	n = cfs_heat_get(&v->heat, row->cls, row->slot);
	pthread_mutex_unlock(&v->heat_lock);
	return n;
}

int cfs_cview_slot_map(struct cfs_cview *v, const struct cfs_fmt_row *row, const void **base,
		       size_t *len)
{
	const unsigned char *p = cfs_cview_slot(v, row);
	if (!p)
		return -ENOENT;
	struct arena_map *a = &v->ar[row->cls];
	int rc = -ENOENT;
	pthread_mutex_lock(&a->lock);
	if (a->map && p >= a->map && p < a->map + a->maplen) {
		*base = a->map;
		*len = a->maplen;
		rc = 0;
	} else {
		for (struct old_map *o = a->old; o; o = o->next) {
			const unsigned char *b = o->p;
			if (p >= b && p < b + o->len) {
				*base = b;
				*len = o->len;
				rc = 0;
				break;
			}
		}
	}
	pthread_mutex_unlock(&a->lock);
	return rc;
}
