/* journal: the write journal (see journal.h). */
#include "journal.h"

#include <errno.h>
#include <limits.h>
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

struct cfs_journal {
	struct cfs_index *ix;
};

int cfs_journal_open(const char *dir, struct cfs_journal **out)
{
	char path[PATH_MAX];
	*out = NULL;
	if ((size_t)snprintf(path, sizeof(path), "%s/journal.mdb", dir) >= sizeof(path))
		return -ENAMETOOLONG;
	struct cfs_journal *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	int rc = cfs_index_open(path, 8ull << 20, 1ull << 30, &j->ix);
	if (rc) {
		free(j);
		return rc;
	}
	*out = j;
	return 0;
}

void cfs_journal_close(struct cfs_journal *j)
{
	if (!j)
		return;
	cfs_index_close(j->ix);
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
	int rc = 0;
	if (!e->seq)
		rc = cfs_index_next(j->ix, CFS_IX_META, SEQ_KEY, sizeof(SEQ_KEY) - 1, 1, &e->seq);
	struct cfs_buf b = { 0 };
	if (!rc)
		rc = cfs_journal_encode(e, &b);
	if (!rc)
		rc = cfs_index_put(j->ix, CFS_IX_META, k, kl, b.data, b.len);
	cfs_buf_cleanup(&b);
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
	int rc = cfs_index_get(j->ix, CFS_IX_META, k, kl, &v, &vl);
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
	return kl ? cfs_index_del(j->ix, CFS_IX_META, k, kl) : -EINVAL;
}

struct load_arg {
	struct cfs_jent *e;
	size_t n, cap, damaged;
};

static int on_row(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct load_arg *a = arg;
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 16;
		struct cfs_jent *e = realloc(a->e, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		a->e = e;
		a->cap = cap;
	}
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
	struct load_arg a = { 0 };
	int rc = cfs_index_scan_prefix(j->ix, CFS_IX_META, FILE_PREFIX, sizeof(FILE_PREFIX) - 1,
				       on_row, &a);
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
	return cfs_index_put(j->ix, CFS_IX_META, k, sizeof(k), v, sizeof(v));
}

int cfs_journal_done_get(struct cfs_journal *j, uint64_t unique, int *result, uint64_t *ino)
{
	unsigned char k[10];
	done_key(k, unique);
	void *v;
	size_t vl;
	int rc = cfs_index_get(j->ix, CFS_IX_META, k, sizeof(k), &v, &vl);
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
	return cfs_index_del_prefix(j->ix, CFS_IX_META, DONE_PREFIX, sizeof(DONE_PREFIX) - 1, NULL);
}

/* ---- whose journal; a damaged one ----------------------------------------- */

#define OWNER_KEY "owner"
#define ASIDE_PREFIX "a:"

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

struct aside_arg {
	struct cfs_journal *j;
	size_t n;
	int rc;
};

static int aside_row(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
	struct aside_arg *a = arg;
	char nk[CFS_ID_MAX + 8];
	if (kl < sizeof(FILE_PREFIX) - 1 || kl - 2 + sizeof(ASIDE_PREFIX) > sizeof(nk))
		return 0;
	memcpy(nk, ASIDE_PREFIX, sizeof(ASIDE_PREFIX) - 1);
	memcpy(nk + sizeof(ASIDE_PREFIX) - 1, (const char *)k + 2, kl - 2);
	int rc = cfs_index_put(a->j->ix, CFS_IX_META, nk, kl, v, vl);
	if (rc)
		a->rc = rc;
	else
		a->n++;
	return 0;
}

int cfs_journal_set_aside(struct cfs_journal *j, const char *owner, size_t *moved)
{
	struct aside_arg a = { j, 0, 0 };
	*moved = 0;
	int rc = cfs_index_scan_prefix(j->ix, CFS_IX_META, FILE_PREFIX, sizeof(FILE_PREFIX) - 1,
				       aside_row, &a);
	if (!rc)
		rc = a.rc;
	if (!rc)
		rc = cfs_index_del_prefix(j->ix, CFS_IX_META, FILE_PREFIX, sizeof(FILE_PREFIX) - 1,
					  NULL);
	if (!rc)
		rc = cfs_index_put(j->ix, CFS_IX_META, OWNER_KEY, sizeof(OWNER_KEY) - 1, owner,
				   strlen(owner));
	*moved = a.n;
	return rc;
}

int cfs_journal_open_or_reset(const char *dir, struct cfs_journal **out, char *aside, size_t cap)
{
	aside[0] = '\0';
	int rc = cfs_journal_open(dir, out);
	if (rc != -EUCLEAN && rc != CFS_E_PROTO)
		return rc;
	char from[PATH_MAX], to[PATH_MAX];
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if ((size_t)snprintf(from, sizeof(from), "%s/journal.mdb", dir) >= sizeof(from) ||
	    (size_t)snprintf(to, sizeof(to), "%s/journal.mdb.damaged-%lld", dir,
			     (long long)ts.tv_sec) >= sizeof(to))
		return rc;
	if (rename(from, to))
		return rc;
	char lock[PATH_MAX];
	if ((size_t)snprintf(lock, sizeof(lock), "%s/journal.mdb-lock", dir) < sizeof(lock))
		unlink(lock);
	snprintf(aside, cap, "%s", to);
	return cfs_journal_open(dir, out);
}
