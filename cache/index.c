/* index: the LMDB environment (see index.h).  The only file that includes
 * <lmdb.h>.
 *
 * Map growth.  mdb_env_set_mapsize may only run while this process has no
 * transaction open, so every transaction holds ix->lk shared and a resize
 * takes it exclusively (writer-preferring, so readers cannot starve it).  A
 * write that fails with MDB_MAP_FULL is aborted, the map doubled (up to
 * map_max) and the whole write run again; that is why writes are expressed as
 * functions of a fresh transaction. */
#define _GNU_SOURCE
#include "index.h"

#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "le.h"
#include "lmdb_err.h"
#include "log.h"

struct cfs_index {
	MDB_env *env;
	MDB_dbi dbi[CFS_IX_NTABLES];
	pthread_rwlock_t lk;
	uint64_t map_size; /* current map size; changes under lk held exclusively */
	uint64_t map_max;
};

static const char *const table_names[CFS_IX_NTABLES] = {
	[CFS_IX_BLOCKS] = CFS_FMT_TABLE_BLOCKS, [CFS_IX_DIRS] = CFS_FMT_TABLE_DIRS,
	[CFS_IX_INODES] = CFS_FMT_TABLE_INODES, [CFS_IX_INOS] = CFS_FMT_TABLE_INOS,
	[CFS_IX_META] = CFS_FMT_TABLE_META,     [CFS_IX_STORE] = CFS_FMT_TABLE_STORE,
};

int cfs_index_table(const char *name)
{
	for (int t = CFS_IX_DIRS; t <= CFS_IX_META; t++)
		if (name && strcmp(name, table_names[t]) == 0)
			return t;
	return -EINVAL;
}

/* "<key>\0<be64 block>" into buf (CFS_FMT_BKEY_MAX bytes) as v; -EINVAL for
 * a bad key. */
static int block_key(const char *key, uint64_t block, unsigned char *buf, MDB_val *v)
{
	int n = cfs_fmt_bkey_encode(key, block, buf);
	if (n < 0)
		return n;
	v->mv_data = buf;
	v->mv_size = (size_t)n;
	return 0;
}

/* Grows the map after MDB_MAP_FULL seen with map size `seen`. */
static int ix_grow(struct cfs_index *ix, uint64_t seen)
{
	int rc = 0;
	pthread_rwlock_wrlock(&ix->lk);
	if (ix->map_size == seen) {
		uint64_t n = seen * 2 < ix->map_max ? seen * 2 : ix->map_max;
		if (n <= seen) {
			rc = -ENOSPC;
		} else if ((rc = cfs_lmdb_err(mdb_env_set_mapsize(ix->env, (size_t)n))) == 0) {
			ix->map_size = n;
			CFS_INFO("cache index: map grown to %llu KiB", (unsigned long long)(n >> 10));
		}
	}
	pthread_rwlock_unlock(&ix->lk);
	return rc;
}

/* Adopts a map size another process set (MDB_MAP_RESIZED). */
static int ix_adopt(struct cfs_index *ix)
{
	MDB_envinfo info;
	int rc;
	pthread_rwlock_wrlock(&ix->lk);
	rc = cfs_lmdb_err(mdb_env_set_mapsize(ix->env, 0));
	if (rc == 0 && mdb_env_info(ix->env, &info) == 0)
		ix->map_size = info.me_mapsize;
	pthread_rwlock_unlock(&ix->lk);
	return rc;
}

/* Starts a transaction holding ix->lk shared; on success *seen is the map
 * size it runs under.  The caller ends it with ix_end. */
static int ix_begin(struct cfs_index *ix, unsigned flags, MDB_txn **txn, uint64_t *seen)
{
	for (;;) {
		pthread_rwlock_rdlock(&ix->lk);
		*seen = ix->map_size;
		int rc = mdb_txn_begin(ix->env, NULL, flags, txn);
		if (rc == 0)
			return 0;
		pthread_rwlock_unlock(&ix->lk);
		if (rc != MDB_MAP_RESIZED)
			return cfs_lmdb_err(rc);
		if ((rc = ix_adopt(ix)) != 0)
			return rc;
	}
}

static void ix_end(struct cfs_index *ix, MDB_txn *txn)
{
	if (txn)
		mdb_txn_abort(txn);
	pthread_rwlock_unlock(&ix->lk);
}

typedef int (*ix_txn_fn)(struct cfs_index *ix, MDB_txn *txn, void *arg);

/* Runs fn in a write transaction and commits, growing the map and running it
 * again when the map is full.  fn returns an MDB status. */
static int ix_write(struct cfs_index *ix, ix_txn_fn fn, void *arg)
{
	for (;;) {
		MDB_txn *txn;
		uint64_t seen;
		int rc = ix_begin(ix, 0, &txn, &seen);
		if (rc)
			return rc;
		rc = fn(ix, txn, arg);
		if (rc == 0)
			rc = mdb_txn_commit(txn);
		else
			mdb_txn_abort(txn);
		ix_end(ix, NULL);
		if (rc != MDB_MAP_FULL)
			return cfs_lmdb_err(rc);
		if ((rc = ix_grow(ix, seen)) != 0)
			return rc;
	}
}

static int open_dbis(struct cfs_index *ix, MDB_txn *txn, void *arg)
{
	for (int t = 0; t < CFS_IX_NTABLES; t++) {
		int rc = mdb_dbi_open(txn, table_names[t], MDB_CREATE, &ix->dbi[t]);
		if (rc)
			return rc;
	}
	return 0;
}

int cfs_index_pages_present(const char *path, uint64_t last_pgno, uint64_t psize)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	return (uint64_t)st.st_size >= (last_pgno + 1) * psize ? 0 : -EUCLEAN;
}

/* The meta page names pages the file does not have (a truncated or damaged
 * file): touching them through the map would be SIGBUS, so it is refused. */
static int pages_check(MDB_env *env, const char *path)
{
	MDB_envinfo info;
	MDB_stat st;
	if (mdb_env_info(env, &info) || mdb_env_stat(env, &st))
		return -EUCLEAN;
	return cfs_index_pages_present(path, (uint64_t)info.me_last_pgno, st.ms_psize);
}

int cfs_index_open(const char *path, uint64_t map_size, uint64_t map_max, struct cfs_index **out)
{
	return cfs_index_open_flags(path, map_size, map_max, 0, out);
}

int cfs_index_open_flags(const char *path, uint64_t map_size, uint64_t map_max, unsigned flags,
			 struct cfs_index **out)
{
	struct cfs_index *ix;
	MDB_envinfo info;
	pthread_rwlockattr_t ra;
	int rc, dead;

	*out = NULL;
	ix = calloc(1, sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&ix->lk, &ra);
	pthread_rwlockattr_destroy(&ra);
	ix->map_max = map_max < map_size ? map_size : map_max;
	rc = mdb_env_create(&ix->env);
	if (rc) {
		ix->env = NULL;
		goto out;
	}
	if ((rc = mdb_env_set_maxdbs(ix->env, CFS_IX_NTABLES + 2)) != 0 ||
	    (rc = mdb_env_set_maxreaders(ix->env, 256)) != 0 ||
	    (rc = mdb_env_set_mapsize(ix->env, (size_t)map_size)) != 0)
		goto out;
	rc = mdb_env_open(ix->env, path,
			  MDB_NOSUBDIR | MDB_NOTLS |
				  (flags & CFS_IX_NOSYNC ? MDB_NOSYNC : MDB_NOMETASYNC),
			  0600);
	if (rc == MDB_INVALID || rc == MDB_CORRUPTED || rc == MDB_VERSION_MISMATCH ||
	    rc == MDB_PAGE_NOTFOUND) {
		cfs_index_close(ix);
		return -EUCLEAN;
	}
	if (rc)
		goto out;
	if (pages_check(ix->env, path)) {
		CFS_WARN("cache index %s: its last page is past the end of the file (truncated "
			 "or damaged)", path);
		cfs_index_close(ix);
		return -EUCLEAN;
	}
	/* Reader slots of processes that died holding a read transaction (a
	 * server killed by SIGKILL or the OOM killer, then restarted under the
	 * same mount; a killed GPU loader) would pin old pages forever and,
	 * once all 256 are taken, fail every new reader: free them now. */
	if (mdb_reader_check(ix->env, &dead) == 0 && dead > 0)
		CFS_INFO("cache index: freed %d reader slot(s) of dead processes", dead);
	mdb_env_info(ix->env, &info);
	ix->map_size = info.me_mapsize;
	rc = ix_write(ix, open_dbis, NULL);
	if (rc == -EIO)
		rc = -EUCLEAN;
	if (rc) {
		cfs_index_close(ix);
		return rc;
	}
	*out = ix;
	return 0;
out:
	rc = cfs_lmdb_err(rc);
	cfs_index_close(ix);
	return rc;
}

int cfs_index_sync(struct cfs_index *ix)
{
	return cfs_lmdb_err(mdb_env_sync(ix->env, 1));
}

void cfs_index_close(struct cfs_index *ix)
{
	if (!ix)
		return;
	if (ix->env)
		mdb_env_close(ix->env);
	pthread_rwlock_destroy(&ix->lk);
	free(ix);
}

uint64_t cfs_index_map_size(struct cfs_index *ix)
{
	uint64_t v;
	pthread_rwlock_rdlock(&ix->lk);
	v = ix->map_size;
	pthread_rwlock_unlock(&ix->lk);
	return v;
}

/* --- block rows ------------------------------------------------------------ */

struct put_arg {
	MDB_val k;
	unsigned char row[CFS_FMT_ROW_SIZE];
};

static int do_block_put(struct cfs_index *ix, MDB_txn *txn, void *arg)
{
	struct put_arg *a = arg;
	MDB_val v = { .mv_size = sizeof(a->row), .mv_data = a->row };
	return mdb_put(txn, ix->dbi[CFS_IX_BLOCKS], &a->k, &v, 0);
}

int cfs_index_block_put(struct cfs_index *ix, const char *key, uint64_t block,
			const struct cfs_fmt_row *row)
{
	unsigned char kb[CFS_FMT_BKEY_MAX];
	struct put_arg a;
	int rc = block_key(key, block, kb, &a.k);
	if (rc)
		return rc;
	cfs_fmt_row_encode(row, a.row);
	return ix_write(ix, do_block_put, &a);
}

struct del_arg {
	const struct cfs_index_bkey *k;
	size_t n;
};

static int do_block_del(struct cfs_index *ix, MDB_txn *txn, void *arg)
{
	struct del_arg *a = arg;
	unsigned char kb[CFS_FMT_BKEY_MAX];
	MDB_val k;
	for (size_t i = 0; i < a->n; i++) {
		if (block_key(a->k[i].key, a->k[i].block, kb, &k) != 0)
			continue;
		int rc = mdb_del(txn, ix->dbi[CFS_IX_BLOCKS], &k, NULL);
		if (rc && rc != MDB_NOTFOUND)
			return rc;
	}
	return 0;
}

int cfs_index_block_del(struct cfs_index *ix, const struct cfs_index_bkey *k, size_t n)
{
	struct del_arg a = { k, n };
	return n ? ix_write(ix, do_block_del, &a) : 0;
}

struct raw_arg {
	MDB_val *k;
	size_t n;
};

static int do_raw_del(struct cfs_index *ix, MDB_txn *txn, void *arg)
{
	struct raw_arg *a = arg;
	for (size_t i = 0; i < a->n; i++) {
		int rc = mdb_del(txn, ix->dbi[CFS_IX_BLOCKS], &a->k[i], NULL);
		if (rc && rc != MDB_NOTFOUND)
			return rc;
	}
	return 0;
}

int cfs_index_block_scan(struct cfs_index *ix, cfs_index_scan_fn fn, void *arg)
{
	struct raw_arg bad = { NULL, 0 };
	size_t cap = 0;
	MDB_txn *txn;
	MDB_cursor *cur = NULL;
	MDB_val k, v;
	uint64_t seen, block;
	int rc = ix_begin(ix, MDB_RDONLY, &txn, &seen);

	if (rc)
		return rc;
	rc = cfs_lmdb_err(mdb_cursor_open(txn, ix->dbi[CFS_IX_BLOCKS], &cur));
	for (int op = MDB_FIRST; rc == 0; op = MDB_NEXT) {
		int mrc = mdb_cursor_get(cur, &k, &v, op);
		if (mrc == MDB_NOTFOUND)
			break;
		if ((rc = cfs_lmdb_err(mrc)) != 0)
			break;
		if (cfs_fmt_bkey_decode(k.mv_data, k.mv_size, &block) > 0) {
			rc = fn(arg, k.mv_data, block, v.mv_data, v.mv_size);
			continue;
		}
		if (bad.n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			MDB_val *nk = realloc(bad.k, nc * sizeof(*nk));
			if (!nk) {
				rc = -ENOMEM;
				break;
			}
			bad.k = nk;
			cap = nc;
		}
		bad.k[bad.n].mv_size = k.mv_size;
		if (!(bad.k[bad.n].mv_data = malloc(k.mv_size))) {
			rc = -ENOMEM;
			break;
		}
		memcpy(bad.k[bad.n++].mv_data, k.mv_data, k.mv_size);
	}
	if (cur)
		mdb_cursor_close(cur);
	ix_end(ix, txn);
	if (rc == 0 && bad.n) {
		CFS_WARN("cache index: dropping %zu malformed block rows", bad.n);
		rc = ix_write(ix, do_raw_del, &bad);
	}
	for (size_t i = 0; i < bad.n; i++)
		free(bad.k[i].mv_data);
	free(bad.k);
	return rc;
}

int cfs_index_check(struct cfs_index *ix, int with_blocks, uint64_t *rows)
{
	MDB_txn *txn;
	uint64_t seen, n = 0;
	int rc = ix_begin(ix, MDB_RDONLY, &txn, &seen);
	if (rc)
		return rc;
	for (int t = with_blocks ? 0 : 1; rc == 0 && t < CFS_IX_NTABLES; t++) {
		MDB_cursor *cur = NULL;
		MDB_val k, v;
		volatile unsigned char sink = 0;
		if ((rc = cfs_lmdb_err(mdb_cursor_open(txn, ix->dbi[t], &cur))) != 0)
			break;
		for (int op = MDB_FIRST;; op = MDB_NEXT) {
			int mrc = mdb_cursor_get(cur, &k, &v, op);
			if (mrc == MDB_NOTFOUND)
				break;
			if (mrc) {
				rc = mrc == MDB_CORRUPTED || mrc == MDB_PAGE_NOTFOUND ? -EUCLEAN
										      : cfs_lmdb_err(mrc);
				break;
			}
			/* touch the first and last byte of the value: its overflow pages */
			if (v.mv_size)
				sink ^= ((const unsigned char *)v.mv_data)[0] ^
					((const unsigned char *)v.mv_data)[v.mv_size - 1];
			n++;
		}
		(void)sink;
		mdb_cursor_close(cur);
	}
	ix_end(ix, txn);
	if (rows)
		*rows = n;
	return rc;
}

static int do_block_clear(struct cfs_index *ix, MDB_txn *txn, void *arg)
{
	return mdb_drop(txn, ix->dbi[CFS_IX_BLOCKS], 0);
}

int cfs_index_block_clear(struct cfs_index *ix)
{
	return ix_write(ix, do_block_clear, NULL);
}

/* --- generic rows ---------------------------------------------------------- */

static int check_kv(int table, size_t kl)
{
	return table < 0 || table >= CFS_IX_NTABLES || kl == 0 || kl > 511 ? -EINVAL : 0;
}

struct many_arg {
	const struct cfs_index_kv *kv;
	size_t n;
};

static int do_put_many(struct cfs_index *ix, MDB_txn *txn, void *arg)
{
	struct many_arg *a = arg;
	for (size_t i = 0; i < a->n; i++) {
		const struct cfs_index_kv *p = &a->kv[i];
		MDB_val k = { .mv_size = p->kl, .mv_data = (void *)p->k };
		MDB_val v = { .mv_size = p->vl, .mv_data = p->v ? (void *)p->v : (void *)"" };
		int rc = !p->v && p->vl == CFS_IX_DELETE ? mdb_del(txn, ix->dbi[p->table], &k, NULL)
							 : mdb_put(txn, ix->dbi[p->table], &k, &v, 0);
		if (rc && !(rc == MDB_NOTFOUND && p->vl == CFS_IX_DELETE))
			return rc;
	}
	return 0;
}

int cfs_index_put_many(struct cfs_index *ix, const struct cfs_index_kv *kv, size_t n)
{
	struct many_arg a = { kv, n };
	for (size_t i = 0; i < n; i++)
		if (check_kv(kv[i].table, kv[i].kl) || !kv[i].k ||
		    (!kv[i].v && kv[i].vl && kv[i].vl != CFS_IX_DELETE))
			return -EINVAL;
	return n ? ix_write(ix, do_put_many, &a) : 0;
}

int cfs_index_put(struct cfs_index *ix, int table, const void *k, size_t kl, const void *v,
		  size_t vl)
{
	struct cfs_index_kv kv = { table, k, kl, v, vl };
	return cfs_index_put_many(ix, &kv, 1);
}

int cfs_index_get(struct cfs_index *ix, int table, const void *k, size_t kl, void **v, size_t *vl)
{
	MDB_txn *txn;
	MDB_val mk = { .mv_size = kl, .mv_data = (void *)k }, mv;
	uint64_t seen;
	int rc;

	*v = NULL;
	*vl = 0;
	if (check_kv(table, kl))
		return -EINVAL;
	if ((rc = ix_begin(ix, MDB_RDONLY, &txn, &seen)) != 0)
		return rc;
	rc = cfs_lmdb_err(mdb_get(txn, ix->dbi[table], &mk, &mv));
	if (rc == 0) {
		*v = malloc(mv.mv_size ? mv.mv_size : 1);
		if (*v) {
			memcpy(*v, mv.mv_data, mv.mv_size);
			*vl = mv.mv_size;
		} else {
			rc = -ENOMEM;
		}
	}
	ix_end(ix, txn);
	return rc;
}

struct one_arg {
	int table;
	MDB_val k;
	uint64_t start, val;
	int notfound;
};

static int do_del(struct cfs_index *ix, MDB_txn *txn, void *arg)
{
	struct one_arg *a = arg;
	int rc = mdb_del(txn, ix->dbi[a->table], &a->k, NULL);
	a->notfound = rc == MDB_NOTFOUND;
	return a->notfound ? 0 : rc;
}

int cfs_index_del(struct cfs_index *ix, int table, const void *k, size_t kl)
{
	struct one_arg a = { .table = table, .k = { .mv_size = kl, .mv_data = (void *)k } };
	int rc;
	if (check_kv(table, kl))
		return -EINVAL;
	rc = ix_write(ix, do_del, &a);
	return rc ? rc : a.notfound ? -ENOENT : 0;
}

struct prefix_arg {
	int table;
	const void *p;
	size_t pl;
	uint64_t deleted;
};

static int do_del_prefix(struct cfs_index *ix, MDB_txn *txn, void *arg)
{
	struct prefix_arg *a = arg;
	MDB_cursor *c;
	int rc = mdb_cursor_open(txn, ix->dbi[a->table], &c);
	if (rc)
		return rc;
	MDB_val k = { .mv_size = a->pl, .mv_data = (void *)a->p }, v;
	a->deleted = 0;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size < a->pl || memcmp(k.mv_data, a->p, a->pl) != 0)
			break;
		if ((rc = mdb_cursor_del(c, 0)) != 0)
			break;
		a->deleted++;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int cfs_index_del_prefix(struct cfs_index *ix, int table, const void *p, size_t pl,
			 uint64_t *deleted)
{
	struct prefix_arg a = { .table = table, .p = p, .pl = pl };
	if (check_kv(table, pl))
		return -EINVAL;
	int rc = ix_write(ix, do_del_prefix, &a);
	if (deleted)
		*deleted = rc ? 0 : a.deleted;
	return rc;
}

static int do_next(struct cfs_index *ix, MDB_txn *txn, void *arg)
{
	struct one_arg *a = arg;
	unsigned char b[8];
	MDB_val v;
	int rc = mdb_get(txn, ix->dbi[a->table], &a->k, &v);
	if (rc == MDB_NOTFOUND)
		a->val = a->start;
	else if (rc)
		return rc;
	else if (v.mv_size != 8)
		return MDB_CORRUPTED;
	else
		a->val = cfs_le_get(v.mv_data, 8) + 1;
	cfs_le_put(b, a->val, 8);
	v.mv_size = 8;
	v.mv_data = b;
	return mdb_put(txn, ix->dbi[a->table], &a->k, &v, 0);
}

int cfs_index_next(struct cfs_index *ix, int table, const void *k, size_t kl, uint64_t start,
		   uint64_t *out)
{
	struct one_arg a = { .table = table, .k = { .mv_size = kl, .mv_data = (void *)k },
			     .start = start };
	int rc;
	if (check_kv(table, kl))
		return -EINVAL;
	rc = ix_write(ix, do_next, &a);
	if (rc == 0)
		rc = cfs_lmdb_err(mdb_env_sync(ix->env, 1));
	if (rc == 0)
		*out = a.val;
	return rc;
}

int cfs_index_scan_prefix(struct cfs_index *ix, int table, const void *p, size_t pl,
			  cfs_index_row_fn fn, void *arg)
{
	MDB_txn *txn;
	MDB_cursor *c = NULL;
	uint64_t seen;
	int rc, stop = 0;
	if (check_kv(table, pl))
		return -EINVAL;
	if ((rc = ix_begin(ix, MDB_RDONLY, &txn, &seen)) != 0)
		return rc;
	rc = mdb_cursor_open(txn, ix->dbi[table], &c);
	MDB_val k = { .mv_size = pl, .mv_data = (void *)p }, v;
	for (rc = rc ? rc : mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0 && !stop;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size < pl || memcmp(k.mv_data, p, pl) != 0)
			break;
		stop = fn(arg, k.mv_data, k.mv_size, v.mv_data, v.mv_size);
	}
	if (c)
		mdb_cursor_close(c);
	ix_end(ix, txn);
	return stop < 0 ? stop : rc == MDB_NOTFOUND || rc == 0 ? 0 : cfs_lmdb_err(rc);
}
