/* Unit test, model-based: seeded random sequences of create / open (with and
 * without O_TRUNC) / write / ftruncate / fsync / close / rename (over a file
 * or not) / unlink / server kill and fresh remount / time passing, run on a
 * writable vfs over the fake Drive (wrig.h), checked against a small model.
 *
 * The model keeps each file's bytes as the mount must show them, whether a
 * writer changed them since the last close or fsync (dirty), whether a
 * server died then (torn: its bytes are never uploaded until the file is
 * emptied and written again), and the versions Drive may hold for it (the
 * bytes at each close or fsync that was not torn, the content it had before,
 * and "absent" for a file Drive never had).  After every sequence: every
 * handle closed, time passes, the uploads settle; then each file reads back
 * through the mount as the model says, Drive holds exactly the model's names
 * (no conflict copies, nothing left behind), a whole file's Drive bytes are
 * its bytes, and a torn file's Drive bytes are one of its allowed versions,
 * never the half-written ones.
 *
 * Odd seeds run with uploads while open (--upload-open-files of 1 s): a
 * file open and written may then reach Drive at any time step, which adds
 * its bytes of that moment to its allowed versions.
 *
 * WMODEL_SEED=N replays one sequence (printed on failure with its ops),
 * WMODEL_RUNS=N sets how many run (default 200), WMODEL_FIRST=N the first seed.
 * The uploaders are stepped: after each operation the test waits until they
 * are idle, so a seed replays exactly; WMODEL_STRESS=1 lets them race the
 * operations instead (kills in the middle of uploads: not replayable). */
#include "wrig.h"

#include <stdarg.h>

#define NAMES 4
#define MAXF 24
#define MAXV 64
#define MAXH 3
#define FMAX 40000
#define OPEN_MS 1000 /* --upload-open-files of the odd seeds */
#define MAYBE_TORN 2

static const char *const names[NAMES] = { "old.bin", "a.bin", "b.bin", "c.bin" };

struct ver {
	int absent;
	size_t len;
	char *data;
};

struct mfile {
	int live;           /* has a name */
	int name;           /* index in names */
	char *data;
	size_t len;
	int dirty, torn;    /* torn: 1; MAYBE_TORN: unless a snapshot had all of it */
	struct ver v[MAXV]; /* what Drive may hold for it */
	int nv;
};

struct mh {
	int used, file;
	uint64_t ino, fh;
};

struct model {
	struct mfile f[MAXF];
	int nf;
	struct mh h[MAXH];
	uint64_t rnd;
	char log[8192];
	size_t loglen;
};

static uint64_t rnd(struct model *m)
{
	m->rnd ^= m->rnd << 13;
	m->rnd ^= m->rnd >> 7;
	m->rnd ^= m->rnd << 17;
	return m->rnd;
}

static void logf_(struct model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct model *m, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (m->loglen < sizeof(m->log) - 1) {
		int n = vsnprintf(m->log + m->loglen, sizeof(m->log) - m->loglen, fmt, ap);
		if (n > 0)
			m->loglen += (size_t)n;
		if (m->loglen > sizeof(m->log) - 1)
			m->loglen = sizeof(m->log) - 1;
	}
	va_end(ap);
}

static void add_ver(struct mfile *f, int absent)
{
	if (f->nv == MAXV) /* keep the first (Drive's own) and the latest */
		memmove(&f->v[1], &f->v[2], sizeof(f->v[0]) * (MAXV - 2)), f->nv--;
	struct ver *v = &f->v[f->nv++];
	v->absent = absent;
	v->len = absent ? 0 : f->len;
	v->data = absent || !f->len ? NULL : malloc(f->len);
	if (v->data)
		memcpy(v->data, f->data, f->len);
}

static int by_name(struct model *m, int name)
{
	for (int i = 0; i < m->nf; i++)
		if (m->f[i].live && m->f[i].name == name)
			return i;
	return -1;
}

static void set_len(struct mfile *f, size_t len)
{
	f->data = realloc(f->data, len ? len : 1);
	if (len > f->len)
		memset(f->data + f->len, 0, len - f->len);
	f->len = len;
}

/* A byte change by a writer (the file's bytes, through handle h). */
static void changed(struct mfile *f)
{
	f->dirty = 1;
	if (f->torn && f->len == 0)
		f->torn = 0;
}

/* A close or fsync: the bytes are complete (unless torn). */
static void published(struct mfile *f)
{
	if (f->dirty && f->torn != 1) /* maybe torn: may be uploaded */
		add_ver(f, 0);
	f->dirty = 0;
}

static void free_model(struct model *m)
{
	for (int i = 0; i < m->nf; i++) {
		free(m->f[i].data);
		for (int k = 0; k < m->f[i].nv; k++)
			free(m->f[i].v[k].data);
	}
}

/* ---- the operations ----------------------------------------------------- */

static void op_open(struct rig *r, struct model *m)
{
	int slot = -1;
	for (int i = 0; i < MAXH && slot < 0; i++)
		if (!m->h[i].used)
			slot = i;
	if (slot < 0)
		return;
	int name = (int)(rnd(m) % NAMES);
	int fi = by_name(m, name);
	int trunc = rnd(m) % 3 == 0;
	int flags = O_RDWR | (trunc ? O_TRUNC : 0) | (fi < 0 ? O_CREAT : 0);
	uint64_t ino, fh;
	int rc = rig_open(r, names[name], flags, &ino, &fh);
	logf_(m, "open %s%s%s -> %d; ", names[name], trunc ? " TRUNC" : "",
	      fi < 0 ? " CREAT" : "", rc);
	CHECK_EQ(rc, 0);
	if (rc)
		return;
	if (fi < 0) {
		if (m->nf == MAXF) {
			rig_close(r, ino, fh);
			return;
		}
		fi = m->nf++;
		struct mfile *f = &m->f[fi];
		memset(f, 0, sizeof(*f));
		f->live = 1;
		f->name = name;
		f->data = malloc(1);
		add_ver(f, 1);
		f->dirty = 1; /* a new file is complete at its first close */
	}
	struct mfile *f = &m->f[fi];
	if (trunc && f->len) {
		set_len(f, 0);
		changed(f);
	}
	m->h[slot] = (struct mh){ 1, fi, ino, fh };
}

static struct mh *any_handle(struct model *m)
{
	int k = (int)(rnd(m) % MAXH);
	for (int i = 0; i < MAXH; i++) {
		struct mh *h = &m->h[(k + i) % MAXH];
		if (h->used)
			return h;
	}
	return NULL;
}

static void op_write(struct rig *r, struct model *m)
{
	struct mh *h = any_handle(m);
	if (!h)
		return;
	struct mfile *f = &m->f[h->file];
	size_t off = rnd(m) % 3 == 0 ? f->len : (size_t)(rnd(m) % FMAX);
	size_t len = 1 + (size_t)(rnd(m) % 9000);
	if (off >= FMAX)
		off = FMAX - 1;
	if (off + len > FMAX)
		len = FMAX - off;
	char *b = malloc(len);
	for (size_t i = 0; i < len; i++)
		b[i] = (char)rnd(m);
	int rc = rig_write(r, h->ino, h->fh, (int64_t)off, b, len);
	logf_(m, "write #%d %zu+%zu -> %d; ", h->file, off, len, rc);
	CHECK_EQ(rc, 0);
	if (!rc && f->live) { /* an unlinked file's bytes matter no more */
		if (off + len > f->len)
			set_len(f, off + len);
		memcpy(f->data + off, b, len);
		changed(f);
	}
	free(b);
}

static void op_truncate(struct rig *r, struct model *m)
{
	struct mh *h = any_handle(m);
	if (!h)
		return;
	struct mfile *f = &m->f[h->file];
	size_t len = rnd(m) % 4 == 0 ? 0 : (size_t)(rnd(m) % FMAX);
	struct cfs_vfs_setattr s = { .set_size = 1, .size = (int64_t)len };
	struct cfs_vfs_attr a;
	int rc = cfs_vfs_setattr(r->v, h->ino, h->fh, &s, &a);
	logf_(m, "ftruncate #%d %zu -> %d; ", h->file, len, rc);
	CHECK_EQ(rc, 0);
	if (!rc && f->live && len != f->len) {
		set_len(f, len);
		changed(f);
	}
}

static void op_close(struct rig *r, struct model *m, struct mh *h, int sync)
{
	struct mfile *f = &m->f[h->file];
	int rc = sync ? cfs_vfs_fsync(r->v, h->ino, h->fh) : rig_close(r, h->ino, h->fh);
	logf_(m, "%s #%d -> %d; ", sync ? "fsync" : "close", h->file, rc);
	if (f->live && !f->torn)
		CHECK_EQ(rc, 0);
	if (f->live && f->torn == MAYBE_TORN && rc == 0 && f->dirty)
		f->torn = 0; /* the mount took the close: it was not torn */
	if (f->live)
		published(f);
	if (!sync)
		h->used = 0;
}

static void op_rename(struct rig *r, struct model *m)
{
	int from = (int)(rnd(m) % NAMES), to = (int)(rnd(m) % NAMES);
	int fs = by_name(m, from), ft = by_name(m, to);
	if (fs < 0 || from == to)
		return;
	int rc = cfs_vfs_rename(r->v, ++r->unique, CFS_ROOT_INO, names[from], CFS_ROOT_INO,
				names[to], 0);
	logf_(m, "rename %s %s -> %d; ", names[from], names[to], rc);
	CHECK_EQ(rc, 0);
	if (rc)
		return;
	if (ft >= 0) {
		/* Drive keeps the target until the source is uploaded: what it may
		 * show at that name includes the target's versions */
		struct mfile *t = &m->f[ft], *s = &m->f[fs];
		for (int k = 0; k < t->nv; k++) {
			if (s->nv == MAXV)
				break;
			s->v[s->nv] = t->v[k];
			s->v[s->nv].data = t->v[k].data ? malloc(t->v[k].len) : NULL;
			if (s->v[s->nv].data)
				memcpy(s->v[s->nv].data, t->v[k].data, t->v[k].len);
			s->nv++;
		}
		t->live = 0;
	}
	m->f[fs].name = to;
}

static void op_unlink(struct rig *r, struct model *m)
{
	int name = (int)(rnd(m) % NAMES);
	int fi = by_name(m, name);
	if (fi < 0)
		return;
	int rc = cfs_vfs_unlink(r->v, ++r->unique, CFS_ROOT_INO, names[name]);
	logf_(m, "unlink %s -> %d; ", names[name], rc);
	CHECK_EQ(rc, 0);
	if (!rc)
		m->f[fi].live = 0;
}

/* Whether the file's bytes are its latest allowed version (a snapshot of
 * them may be all of it in Drive). */
static int same_as_latest(const struct mfile *f)
{
	const struct ver *v = &f->v[f->nv - 1];
	return !v->absent && v->len == f->len && (!f->len || memcmp(v->data, f->data, f->len) == 0);
}

static void op_kill(struct rig *r, struct model *m)
{
	logf_(m, "KILL; ");
	rig_kill(r);
	for (int i = 0; i < MAXH; i++)
		m->h[i].used = 0;
	for (int i = 0; i < m->nf; i++) {
		struct mfile *f = &m->f[i];
		if (f->dirty && f->live && f->torn != 1) /* all of it in a snapshot? */
			f->torn = r->open_ms && f->nv && same_as_latest(f) ? MAYBE_TORN : 1;
		f->dirty = 0;
	}
	rig_start(r, 1);
	rig_advance(r, 3000);
}

/* Time passes.  With uploads while open, a file open and written may be
 * sent as it is now (a snapshot: vfs_snap.c decides whether), so Drive may
 * hold its bytes as of this moment: one more allowed version (a superset of
 * what the mount sends, never a half-done operation). */
static void op_time(struct rig *r, struct model *m, int64_t ms)
{
	logf_(m, "time +%lld; ", (long long)ms);
	rig_advance(r, ms);
	if (!r->open_ms)
		return;
	for (int i = 0; i < m->nf; i++) {
		struct mfile *f = &m->f[i];
		int open = 0;
		for (int k = 0; k < MAXH; k++)
			open |= m->h[k].used && m->h[k].file == i;
		if (open && f->live && f->dirty && !f->torn)
			add_ver(f, 0);
	}
}

/* ---- the end of a sequence: settle and compare --------------------------- */

/* Every upload done but those that wait for the user (the torn files:
 * the caller checks how many). */
static int settled(struct rig *r, void *arg)
{
	(void)arg;
	struct cfs_vfs_write_stats st;
	cfs_vfs_write_stats(r->v, &st);
	return st.in_flight == 0 && st.pending == st.failed;
}

static int check_end(struct rig *r, struct model *m)
{
	int fails = check_failures;
	for (int i = 0; i < MAXH; i++)
		if (m->h[i].used)
			op_close(r, m, &m->h[i], 0);
	int torn[2] = { 0, 0 };
	for (int i = 0; i < m->nf; i++)
		if (m->f[i].live && m->f[i].torn)
			torn[m->f[i].torn == MAYBE_TORN]++;
	for (int i = 0; i < 5; i++) /* backoff steps of failed attempts, if any */
		rig_advance(r, 60 * 1000);
	int ok_settled = rig_wait(r, settled, NULL);
	struct cfs_vfs_write_stats st;
	cfs_vfs_write_stats(r->v, &st);
	/* torn[0] files are torn, torn[1] may be (a snapshot had all of them) */
	if (!ok_settled || st.failed < (uint64_t)torn[0] ||
	    st.failed > (uint64_t)(torn[0] + torn[1])) {
		CHECK(!"settled");
		fprintf(stderr, "not settled: %llu pending, %llu in flight; the model has %d torn, "
			"%d maybe\n", (unsigned long long)st.pending, (unsigned long long)st.in_flight,
			torn[0], torn[1]);
	}
	for (int name = 0; name < NAMES; name++) {
		int fi = by_name(m, name);
		struct wfake_file *d = wfake_find(&r->fk, "ROOT", names[name]);
		if (fi < 0) {
			CHECK(d == NULL);
			if (d)
				fprintf(stderr, "drive has %s, the model has not\n", names[name]);
			continue;
		}
		struct mfile *f = &m->f[fi];
		/* the mount shows the model's bytes */
		struct cfs_vfs_attr a;
		uint64_t fh;
		int keep, direct;
		char *buf = malloc(FMAX + 16);
		size_t got = 0;
		CHECK_EQ(cfs_vfs_lookup(r->v, CFS_ROOT_INO, names[name], &a), 0);
		CHECK_EQ(cfs_vfs_open(r->v, a.ino, O_RDONLY, 1, &fh, &keep, &direct), 0);
		CHECK_EQ(cfs_vfs_read(r->v, a.ino, fh, 0, FMAX + 16, buf, &got), 0);
		cfs_vfs_release(r->v, a.ino, fh);
		CHECK(got == f->len && memcmp(buf, f->data, got) == 0);
		if (got != f->len || memcmp(buf, f->data, got) != 0)
			fprintf(stderr, "mount: %s reads %zu bytes, the model %zu\n", names[name], got,
				f->len);
		free(buf);
		if (!f->torn) {
			CHECK(rig_drive_has(r, "ROOT", names[name], f->data, f->len));
			continue;
		}
		int ok = 0; /* torn: one of its versions, never the half-written bytes */
		for (int k = 0; k < f->nv && !ok; k++)
			ok = f->v[k].absent ? d == NULL
			     : d && d->len == f->v[k].len &&
				       (!d->len || memcmp(d->data, f->v[k].data, d->len) == 0);
		CHECK(ok);
		if (!ok)
			fprintf(stderr, "drive: torn %s holds %s (%zu bytes), not a version of it\n",
				names[name], d ? "bytes" : "nothing", d ? d->len : 0);
	}
	/* nothing else in the folder: no conflict copy, no leftover */
	int live = 0;
	pthread_mutex_lock(&r->fk.lock);
	for (int i = 0; i < r->fk.n; i++)
		live += !r->fk.f[i].trashed && strcmp(r->fk.f[i].parent, "ROOT") == 0;
	pthread_mutex_unlock(&r->fk.lock);
	int want = 1; /* the folder "other" */
	for (int name = 0; name < NAMES; name++) {
		int fi = by_name(m, name);
		want += fi >= 0 && (!m->f[fi].torn || wfake_find(&r->fk, "ROOT", names[name]));
	}
	CHECK_EQ(live, want);
	if (check_failures != fails) {
		pthread_mutex_lock(&r->fk.lock);
		for (int i = 0; i < r->fk.n; i++)
			fprintf(stderr, "drive: %s \"%s\" in %s, %zu bytes, rev %d%s\n", r->fk.f[i].id,
				r->fk.f[i].name, r->fk.f[i].parent, r->fk.f[i].len, r->fk.f[i].rev,
				r->fk.f[i].trashed ? ", trashed" : "");
		pthread_mutex_unlock(&r->fk.lock);
	}
	return check_failures == fails;
}

static int stress;

static int idle(struct rig *r, void *arg)
{
	(void)arg;
	return cfs_vfs_w_idle(r->v);
}

static int run(uint64_t seed, int steps)
{
	struct rig r;
	struct model *m = calloc(1, sizeof(*m));
	rig_up(&r, 0);
	r.open_ms = seed % 2 ? OPEN_MS : 0; /* odd seeds: uploads while open */
	rig_start(&r, 1);
	m->rnd = seed * 0x9e3779b97f4a7c15ull + 1;
	/* old.bin is Drive's: its content is its first version */
	struct mfile *o = &m->f[m->nf++];
	o->live = 1;
	o->name = 0;
	o->data = malloc(OLD_LEN);
	memcpy(o->data, r.old, OLD_LEN);
	o->len = OLD_LEN;
	add_ver(o, 0);
	for (int i = 0; i < steps; i++) {
		unsigned k = (unsigned)(rnd(m) % 100);
		struct mh *h;
		if (k < 18)
			op_open(&r, m);
		else if (k < 48)
			op_write(&r, m);
		else if (k < 55)
			op_truncate(&r, m);
		else if (k < 68 && (h = any_handle(m)) != NULL)
			op_close(&r, m, h, 0);
		else if (k < 74 && (h = any_handle(m)) != NULL)
			op_close(&r, m, h, 1);
		else if (k < 82)
			op_rename(&r, m);
		else if (k < 87)
			op_unlink(&r, m);
		else if (k < 91)
			op_kill(&r, m);
		else
			op_time(&r, m, (int64_t)(rnd(m) % 3000));
		/* one step at a time: the uploaders finish what is due before
		 * the next operation (a seed replays the same run); STRESS lets
		 * them race the operations */
		if (!stress)
			CHECK(rig_wait(&r, idle, NULL));
	}
	int ok = check_end(&r, m);
	if (!ok)
		fprintf(stderr, "wmodel: seed %llu failed (WMODEL_SEED=%llu replays it): %.*s\n",
			(unsigned long long)seed, (unsigned long long)seed, (int)m->loglen, m->log);
	free_model(m);
	free(m);
	rig_down(&r);
	return ok;
}

int main(void)
{
	const char *one = getenv("WMODEL_SEED"), *runs = getenv("WMODEL_RUNS");
	const char *first = getenv("WMODEL_FIRST");
	stress = getenv("WMODEL_STRESS") != NULL;
	int n = runs ? (int)strtol(runs, NULL, 10) : 200, failed = 0;
	uint64_t s0 = first ? strtoull(first, NULL, 10) : 1;
	if (one) {
		failed = !run(strtoull(one, NULL, 10), 40);
	} else {
		for (int s = 0; s < n && failed < 3; s++)
			failed += !run(s0 + (uint64_t)s, 40);
	}
	printf("test_wmodel: %d sequence(s) failed\n", failed);
	return check_done("test_wmodel");
}
