/* wfake: a scripted Drive for the write-path unit tests (see wfake.h). */
#include "wfake.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "err.h"

#define GRANULE (256 * 1024)

void wfake_init(struct wfake *w)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->now_ms = 1000000;
	w->wall_ns = 1700000000ll * 1000000000ll;
}

void wfake_cleanup(struct wfake *w)
{
	for (int i = 0; i < w->n; i++)
		free(w->f[i].data);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
}

void wfake_hold(struct wfake *w, int on)
{
	pthread_mutex_lock(&w->lock);
	w->hold = on;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int wfake_held(struct wfake *w)
{
	pthread_mutex_lock(&w->lock);
	int n = w->held;
	pthread_mutex_unlock(&w->lock);
	return n;
}

/* lock held */
static struct wfake_file *find_id(struct wfake *w, const char *id)
{
	for (int i = 0; i < w->n; i++)
		if (strcmp(w->f[i].id, id) == 0)
			return &w->f[i];
	return NULL;
}

static int take_fault(struct wfake *w, enum wfake_kind k)
{
	w->calls[k]++;
	if (!w->nfaults[k])
		return 0;
	int rc = w->faults[k][0];
	memmove(w->faults[k], w->faults[k] + 1, sizeof(int) * (size_t)--w->nfaults[k]);
	return rc;
}

static int begin(struct wfake *w, enum wfake_kind k)
{
	pthread_mutex_lock(&w->lock);
	int rc = take_fault(w, k);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

/* lock held */
static struct wfake_file *add(struct wfake *w, const char *id, const char *parent,
			      const char *name, const void *data, size_t len, int folder)
{
	if (w->n == WFAKE_FILES)
		return NULL;
	struct wfake_file *f = &w->f[w->n++];
	memset(f, 0, sizeof(*f));
	snprintf(f->id, sizeof(f->id), "%s", id);
	snprintf(f->parent, sizeof(f->parent), "%s", parent);
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->folder = folder;
	f->rev = 1;
	if (len) {
		f->data = malloc(len);
		memcpy(f->data, data, len);
	}
	f->len = len;
	return f;
}

struct wfake_file *wfake_add(struct wfake *w, const char *id, const char *parent,
			     const char *name, const void *data, size_t len, int folder)
{
	pthread_mutex_lock(&w->lock);
	struct wfake_file *f = add(w, id, parent, name, data, len, folder);
	pthread_mutex_unlock(&w->lock);
	return f;
}

static void set_data(struct wfake_file *f, const void *data, size_t len)
{
	free(f->data);
	f->data = len ? malloc(len) : NULL;
	if (len)
		memcpy(f->data, data, len);
	f->len = len;
	f->rev++;
}

void wfake_change(struct wfake *w, const char *id, const void *data, size_t len)
{
	pthread_mutex_lock(&w->lock);
	struct wfake_file *f = find_id(w, id);
	if (f)
		set_data(f, data, len);
	pthread_mutex_unlock(&w->lock);
}

struct wfake_file *wfake_find(struct wfake *w, const char *parent, const char *name)
{
	struct wfake_file *r = NULL;
	pthread_mutex_lock(&w->lock);
	for (int i = 0; i < w->n && !r; i++)
		if (!w->f[i].trashed && strcmp(w->f[i].parent, parent) == 0 &&
		    strcmp(w->f[i].name, name) == 0)
			r = &w->f[i];
	pthread_mutex_unlock(&w->lock);
	return r;
}

struct wfake_file *wfake_get(struct wfake *w, const char *id)
{
	pthread_mutex_lock(&w->lock);
	struct wfake_file *f = find_id(w, id);
	pthread_mutex_unlock(&w->lock);
	return f;
}

void wfake_fail(struct wfake *w, enum wfake_kind k, int rc)
{
	pthread_mutex_lock(&w->lock);
	if (w->nfaults[k] < WFAKE_FAULTS)
		w->faults[k][w->nfaults[k]++] = rc;
	pthread_mutex_unlock(&w->lock);
}

int wfake_calls(struct wfake *w, enum wfake_kind k)
{
	pthread_mutex_lock(&w->lock);
	int n = w->calls[k];
	pthread_mutex_unlock(&w->lock);
	return n;
}

void wfake_advance(struct wfake *w, int64_t ms)
{
	pthread_mutex_lock(&w->lock);
	w->now_ms += ms;
	w->wall_ns += ms * 1000000;
	pthread_mutex_unlock(&w->lock);
}

/* lock held */
static void meta_of(const struct wfake_file *f, struct cfs_file_meta *m)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->id, sizeof(m->id), "%s", f->id);
	m->name = strdup(f->name);
	snprintf(m->mime, sizeof(m->mime), "%s",
		 f->folder ? CFS_FOLDER_MIME : "application/octet-stream");
	m->size = f->folder ? -1 : (int64_t)f->len;
	if (!f->folder)
		snprintf(m->rev, sizeof(m->rev), "r%d", f->rev);
	m->version = f->rev;
	struct cfs_digest *g = NULL;
	if (!f->folder && cfs_digest_new("md5", &g) == 0) {
		if (cfs_digest_update(g, f->data ? f->data : "", f->len) != 0) {
			cfs_digest_free(g);
			m->md5[0] = '\0';
		} else if (cfs_digest_final_hex(g, m->md5, sizeof(m->md5)) != 0) { /* frees g */
			m->md5[0] = '\0';
		}
	}
	snprintf(m->parent, sizeof(m->parent), "%s", f->parent);
	m->trashed = f->trashed != 0;
	m->can_download = m->can_edit = m->can_add_children = 1;
}

/* Drive refuses names that are not UTF-8 (400). */
static int name_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	if (!*p)
		return 0;
	while (*p) {
		int n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2
			: (*p & 0xf8) == 0xf0 ? 3 : -1;
		if (n < 0)
			return 0;
		for (int i = 1; i <= n; i++)
			if ((p[i] & 0xc0) != 0x80)
				return 0;
		p += n + 1;
	}
	return 1;
}

static int ids(void *a, int n, char (*out)[CFS_ID_MAX])
{
	struct wfake *w = a;
	int rc = begin(w, WF_IDS);
	if (rc)
		return rc;
	pthread_mutex_lock(&w->lock);
	for (int i = 0; i < n; i++)
		snprintf(out[i], CFS_ID_MAX, "fid%06d", w->next_id++);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

static int create(void *a, const struct cfs_json_meta_in *m, struct cfs_file_meta *out)
{
	struct wfake *w = a;
	memset(out, 0, sizeof(*out));
	int rc = begin(w, WF_CREATE);
	if (rc)
		return rc;
	if (!m->id || !m->name || !m->parent)
		return -EINVAL;
	if (!name_ok(m->name))
		return -EIO;
	pthread_mutex_lock(&w->lock);
	struct wfake_file *f = find_id(w, m->id);
	if (f) {
		rc = -EEXIST;
	} else {
		int folder = m->mime && strcmp(m->mime, CFS_FOLDER_MIME) == 0;
		f = add(w, m->id, m->parent, m->name, NULL, 0, folder);
		rc = f ? 0 : -ENOMEM;
	}
	if (!rc)
		meta_of(f, out);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

/* lock held */
static struct wfake_session *session(struct wfake *w, const char *uri)
{
	for (int i = 0; i < w->ns; i++)
		if (strcmp(w->s[i].uri, uri) == 0)
			return &w->s[i];
	return NULL;
}

static int upload(void *a, const struct cfs_drive_upload *u, struct cfs_file_meta *out)
{
	struct wfake *w = a;
	memset(out, 0, sizeof(*out));
	int rc = begin(w, WF_UPLOAD);
	if (rc)
		return rc;
	pthread_mutex_lock(&w->lock);
	if (w->hold) {
		w->held++;
		while (w->hold)
			pthread_cond_wait(&w->cond, &w->lock);
		w->held--;
	}
	pthread_mutex_unlock(&w->lock);
	if (u->total < 0 || !u->read || (!u->id && (!u->meta || !u->meta->id)))
		return -EINVAL;
	const char *target = u->id ? u->id : u->meta->id;
	if (!u->id && (!u->meta->name || !name_ok(u->meta->name)))
		return -EIO; /* 400: the name */
	char *buf = malloc(u->total ? (size_t)u->total : 1);
	if (!buf)
		return -ENOMEM;
	int64_t at = 0;
	int resumable = u->total > WFAKE_RESUMABLE;
	char uri[128] = "";
	if (resumable) {
		pthread_mutex_lock(&w->lock);
		struct wfake_session *s = NULL;
		if (u->resume_uri && u->resume_uri[0]) {
			if (strncmp(u->resume_uri, WFAKE_API "/", strlen(WFAKE_API) + 1) != 0)
				w->foreign_resumes++;
			else if ((s = session(w, u->resume_uri)) != NULL && s->total == u->total &&
				 strcmp(s->id, target) == 0)
				w->resumed++;
			else
				s = NULL;
		}
		if (!s && w->ns < 64) {
			s = &w->s[w->ns];
			snprintf(s->uri, sizeof(s->uri), WFAKE_API "/upload/s%d", w->ns);
			snprintf(s->id, sizeof(s->id), "%s", target);
			s->total = u->total;
			s->confirmed = 0;
			w->ns++;
		}
		if (s) {
			snprintf(uri, sizeof(uri), "%s", s->uri);
			at = s->confirmed;
		}
		pthread_mutex_unlock(&w->lock);
		if (!uri[0]) {
			free(buf);
			return -ENOMEM;
		}
		if (u->progress && at == 0)
			u->progress(u->arg, uri, 0);
	}
	/* bytes before a resumed offset were received earlier: read again for
	 * the md5, as the real client does */
	if (at && (rc = u->read(u->arg, 0, buf, (size_t)at)) != 0) {
		free(buf);
		return rc;
	}
	int chunks = 0;
	while (at < u->total) {
		size_t n = u->total - at < GRANULE ? (size_t)(u->total - at) : GRANULE;
		if ((rc = u->read(u->arg, at, buf + at, n)) != 0) {
			free(buf);
			return rc;
		}
		at += (int64_t)n;
		if (resumable) {
			pthread_mutex_lock(&w->lock);
			struct wfake_session *s = session(w, uri);
			if (s)
				s->confirmed = at;
			int cut = w->cut_after_chunks > 0 && ++chunks >= w->cut_after_chunks;
			if (cut)
				w->cut_after_chunks = 0;
			pthread_mutex_unlock(&w->lock);
			if (cut) {
				free(buf);
				return CFS_E_NET;
			}
			if (u->progress && at < u->total)
				u->progress(u->arg, uri, at);
		}
	}
	pthread_mutex_lock(&w->lock);
	struct wfake_file *f = find_id(w, target);
	if (u->id) {
		if (!f || f->folder)
			rc = -ENOENT;
		else
			set_data(f, buf, (size_t)u->total);
	} else if (f) {
		rc = -EEXIST;
	} else {
		f = add(w, target, u->meta->parent ? u->meta->parent : "", u->meta->name, buf,
			(size_t)u->total, 0);
		rc = f ? 0 : -ENOMEM;
	}
	if (!rc)
		meta_of(f, out);
	pthread_mutex_unlock(&w->lock);
	free(buf);
	return rc;
}

static int update(void *a, const char *id, const char *name, const char *add_parent,
		  const char *rm_parent, int trashed, int64_t mtime_ns, struct cfs_file_meta *out)
{
	struct wfake *w = a;
	(void)rm_parent;
	(void)mtime_ns;
	if (out)
		memset(out, 0, sizeof(*out));
	int rc = begin(w, WF_UPDATE);
	if (rc)
		return rc;
	if (name && !name_ok(name))
		return -EIO;
	pthread_mutex_lock(&w->lock);
	struct wfake_file *f = find_id(w, id);
	if (!f || f->trashed == 2) {
		rc = -ENOENT;
	} else {
		if (name)
			snprintf(f->name, sizeof(f->name), "%s", name);
		if (add_parent)
			snprintf(f->parent, sizeof(f->parent), "%s", add_parent);
		if (trashed >= 0)
			f->trashed = trashed;
		if (out)
			meta_of(f, out);
	}
	pthread_mutex_unlock(&w->lock);
	return rc;
}

static int del(void *a, const char *id)
{
	struct wfake *w = a;
	int rc = begin(w, WF_REMOVE);
	if (rc)
		return rc;
	pthread_mutex_lock(&w->lock);
	struct wfake_file *f = find_id(w, id);
	rc = f && f->trashed != 2 ? 0 : -ENOENT;
	if (f)
		f->trashed = 2; /* gone for good */
	pthread_mutex_unlock(&w->lock);
	return rc;
}

static int get(void *a, const char *id, struct cfs_file_meta *out)
{
	struct wfake *w = a;
	memset(out, 0, sizeof(*out));
	int rc = begin(w, WF_GET);
	if (rc)
		return rc;
	pthread_mutex_lock(&w->lock);
	struct wfake_file *f = find_id(w, id);
	if (!f || f->trashed == 2)
		rc = -ENOENT;
	else
		meta_of(f, out);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

static int list(void *a, const char *parent, cfs_drive_list_cb cb, void *arg)
{
	struct wfake *w = a;
	int rc = begin(w, WF_LIST);
	if (rc)
		return rc;
	struct cfs_file_meta *m = calloc(WFAKE_FILES, sizeof(*m));
	if (!m)
		return -ENOMEM;
	int n = 0;
	pthread_mutex_lock(&w->lock);
	for (int i = 0; i < w->n; i++)
		if (!w->f[i].trashed && strcmp(w->f[i].parent, parent) == 0)
			meta_of(&w->f[i], &m[n++]);
	pthread_mutex_unlock(&w->lock);
	for (int i = 0; i < n && !rc; i++)
		rc = cb(&m[i], arg);
	for (int i = 0; i < n; i++)
		cfs_file_meta_cleanup(&m[i]);
	free(m);
	return rc;
}

static int about(void *a, int64_t *limit, int64_t *usage)
{
	(void)a;
	*limit = -1;
	*usage = 0;
	return 0;
}

static int session_ok(void *a, const char *uri)
{
	(void)a;
	return uri && strncmp(uri, WFAKE_API "/", strlen(WFAKE_API) + 1) == 0;
}

static int64_t now_ms(void *a)
{
	struct wfake *w = a;
	pthread_mutex_lock(&w->lock);
	int64_t t = w->now_ms;
	pthread_mutex_unlock(&w->lock);
	return t;
}

static int64_t wall_ns(void *a)
{
	struct wfake *w = a;
	pthread_mutex_lock(&w->lock);
	int64_t t = w->wall_ns++;
	pthread_mutex_unlock(&w->lock);
	return t;
}

void wfake_table(struct wfake *w, struct cfs_wdrive *out)
{
	*out = (struct cfs_wdrive){ w, ids, create, upload, update, del, get, list, about,
				    session_ok, now_ms, wall_ns };
}

int wfake_fetch(void *io, const char *id, const char *rev, int64_t size, int64_t off, size_t len,
		cfs_drive_sink_fn sink, void *arg, size_t *got, int prio)
{
	struct wfake *w = io;
	(void)size;
	(void)prio;
	*got = 0;
	pthread_mutex_lock(&w->lock);
	struct wfake_file *f = find_id(w, id);
	char r[32];
	if (f)
		snprintf(r, sizeof(r), "r%d", f->rev);
	int rc = !f || f->trashed ? -ENOENT : rev && strcmp(rev, r) != 0 ? -ESTALE : 0;
	char *copy = NULL;
	size_t n = 0;
	if (!rc && off < (int64_t)f->len) {
		n = f->len - (size_t)off < len ? f->len - (size_t)off : len;
		copy = malloc(n ? n : 1);
		if (copy && n)
			memcpy(copy, f->data + off, n);
	}
	pthread_mutex_unlock(&w->lock);
	if (!rc && n && (rc = sink(arg, off, copy, n)) == 0)
		*got = n;
	free(copy);
	return rc;
}
