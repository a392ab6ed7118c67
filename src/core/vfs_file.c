/* vfs_file: file handles and reads (see vfs_int.h).
 *
 * An open pins the file's content key and revision (in a handle row, see
 * nsdb.h, so a restarted server can rebuild the handle), fetches an export
 * whole into memory, holds a small file's blocks against eviction, and
 * tells the dataset read-ahead (vfs_scan.c) about it.  A
 * read that finds the revision gone marks the node stale.  At release, a
 * completely cached file is checked once per revision against Drive's
 * md5/sha256. */
#include "vfs_int.h"

#include <fcntl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "err.h"
#include "log.h"
#include "nsdb.h"
#include "staging.h"
#include "store.h"


int cfs_vfs_refresh_stale(struct cfs_vfs *v, uint64_t ino)
{
	char cid[CFS_ID_MAX];
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	if (n && !n->is_dir && v->w.enabled)
		cfs_vfs_w_fix_landed(v, n);
	int stale = n && n->stale && !n->export_mime[0];
	if (stale)
		snprintf(cid, sizeof(cid), "%s", n->content_id);
	cfs_inode_unlock(v->tab);
	cfs_vfs_retire_run(v); /* what fix_landed left */
	if (!stale)
		return 0;
	struct cfs_file_meta m;
	int rc = v->w.d.get(v->w.d.arg, cid, &m);
	if (rc)
		return rc;
	char rev[CFS_ID_MAX];
	cfs_vfs_content_rev(&m, rev, sizeof(rev));
	cfs_inode_lock(v->tab);
	if (m.trashed)
		rc = -ENOENT;
	if (!rc && !(rc = cfs_vfs_node_set_rev(v, n, rev, 1))) {
		n->size = m.size < 0 ? 0 : m.size;
		n->mtime_ns = m.mtime_ns;
		cfs_node_set_sums(n, m.md5, m.sha256);
		n->stale = 0;
		CFS_INFO("%s changed in Drive: now %s, %lld bytes", cid, n->rev, (long long)n->size);
	}
	cfs_inode_unlock(v->tab);
	cfs_vfs_retire_run(v);
	cfs_file_meta_cleanup(&m);
	return rc;
}

/* Gets f ready to read what f->b names: the whole export when export_mime
 * is set (into memory), else a stream for the prefetcher and a hold on the
 * blocks.  On failure f holds nothing. */
int cfs_vfs_file_start(struct cfs_vfs *v, struct cfs_vfs_file *f, const char *export_mime)
{
	if (export_mime[0]) {
		struct cfs_buf b = { 0 };
		int rc = cfs_drive_export(v->drive, f->b.id, export_mime, EXPORT_MAX, &b);
		if (!rc) {
			size_t len;
			f->data = cfs_buf_steal(&b, &len);
			f->b.size = (int64_t)len;
			if (!f->data && !(f->data = calloc(1, 1)))
				rc = -ENOMEM;
		}
		cfs_buf_cleanup(&b);
		return rc;
	}
	if (!(f->stream = cfs_reader_stream_new()))
		return -ENOMEM;
	/* Blocks of open files are the last the budget evicts, but only for
	 * files small next to the budget: holding a file larger than the cache
	 * would leave no room for its own later blocks. */
	if ((uint64_t)f->b.size <= cfs_store_budget(v->store) / 8)
		f->held = cfs_store_hold(v->store, f->b.key) == 0;
	else /* counted, so a retirement of its revision waits for it */
		f->used = cfs_store_use(v->store, f->b.key) == 0;
	return 0;
}

/* A file with staged content is read (and written) there: writers always,
 * readers while it has some.  Takes a count of the staged file in f->w. */
static int staged_start(struct cfs_vfs *v, struct cfs_vfs_file *f, int writer, int trunc)
{
	if (!cfs_vfs_writable(v) || (!writer && !trunc && !cfs_vfs_w_any(v)))
		return 0; /* a reader of a mount with nothing staged: the cache */
	int rc = cfs_vfs_w_attach(v, f->ino, writer, trunc, &f->w);
	f->writer = writer && !rc;
	return rc == -ENOENT && !writer && !trunc ? 0 : rc;
}

/* Staged handles are stored as "w:" keys; rev says "w" for a writer. */
#define STAGED_KEY "w:"

/* The stored form of what f is pinned to. */
static void file_row(const struct cfs_vfs_file *f, const char *export_mime,
		     struct cfs_nsdb_fh *r)
{
	memset(r, 0, sizeof(*r));
	r->ino = f->ino;
	if (f->w) {
		snprintf(r->key, sizeof(r->key), STAGED_KEY "%s", f->b.id);
		snprintf(r->rev, sizeof(r->rev), "%s", f->writer ? "w" : "r");
		return;
	}
	r->size = f->b.size;
	memcpy(r->key, f->b.key, sizeof(r->key));
	memcpy(r->id, f->b.id, sizeof(r->id));
	memcpy(r->rev, f->b.rev, sizeof(r->rev));
	snprintf(r->export_mime, sizeof(r->export_mime), "%s", export_mime);
}

int cfs_vfs_open(struct cfs_vfs *v, uint64_t ino, int flags, uint32_t pid, uint64_t *fh,
		 int *keep_cache, int *direct_io)
{
	int writer = (flags & O_ACCMODE) != O_RDONLY, trunc = (flags & O_TRUNC) != 0;
	if ((writer || trunc) && !cfs_vfs_writable(v))
		return -EROFS;
	int rc = cfs_vfs_resolve_node(v, ino);
	if (!rc)
		rc = cfs_vfs_refresh_stale(v, ino);
	if (rc)
		return rc;
	struct cfs_vfs_file *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	char export_mime[128];
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_vfs_file_node(v, ino, &rc);
	if (n) {
		f->ino = ino;
		cfs_vfs_blob_ref(n, &f->b);
		snprintf(export_mime, sizeof(export_mime), "%s", n->export_mime);
		uint64_t rev = cfs_node_rev_hash(n);
		*keep_cache = !export_mime[0] && n->opened_rev == rev;
		*direct_io = export_mime[0] != '\0';
		n->opened_rev = rev;
	}
	cfs_inode_unlock(v->tab);
	if (!rc)
		rc = staged_start(v, f, writer, trunc);
	if (!rc && !f->w)
		rc = cfs_vfs_file_start(v, f, export_mime);
	if (!rc && f->w)
		*keep_cache = *direct_io = 0;
	if (!rc && f->data) {
		cfs_inode_lock(v->tab);
		n->size = f->b.size; /* an export's size is known once fetched */
		cfs_inode_unlock(v->tab);
	}
	if (!rc)
		rc = cfs_nsdb_fh_alloc(v->ns, &f->h.fh);
	if (!rc) {
		/* Stored before the reply hands the number to the kernel, so a
		 * server restarted later serves this handle at the same revision.
		 * Best effort: without the row the open still works, only a read
		 * after a restart would fail (EBADF). */
		struct cfs_nsdb_fh r;
		file_row(f, export_mime, &r);
		int wrc = cfs_nsdb_fh_put(v->ns, f->h.fh, &r);
		if (wrc)
			CFS_WARN("cannot store file handle %llu: %s", (unsigned long long)f->h.fh,
				 cfs_strerror(wrc));
		f->h.kind = H_FILE;
		rc = cfs_vfs_add_handle(v, &f->h);
		if (rc && !wrc)
			cfs_nsdb_fh_del(v->ns, f->h.fh);
	}
	if (rc) {
		cfs_vfs_file_free(v, f, 0);
		return rc;
	}
	if (!f->data && !f->w)
		cfs_vfs_scan_open(v, ino, pid, &f->scan); /* dataset read-ahead (vfs_scan.c) */
	*fh = f->h.fh;
	return 0;
}

int cfs_vfs_file_from_row(struct cfs_vfs *v, uint64_t fh, const struct cfs_nsdb_fh *r,
			  struct cfs_vfs_file **out)
{
	/* the node is not needed for the bytes, only for noting a revision
	 * change and the whole-file check: best effort */
	cfs_vfs_resolve_node(v, r->ino);
	struct cfs_vfs_file *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->h.fh = fh;
	f->h.kind = H_FILE;
	f->ino = r->ino;
	memcpy(f->b.key, r->key, sizeof(f->b.key));
	memcpy(f->b.id, r->id, sizeof(f->b.id));
	memcpy(f->b.rev, r->rev, sizeof(f->b.rev));
	f->b.size = r->size;
	int rc;
	if (strncmp(r->key, STAGED_KEY, sizeof(STAGED_KEY) - 1) == 0)
		rc = staged_start(v, f, strcmp(r->rev, "w") == 0, 0);
	else
		rc = cfs_vfs_file_start(v, f, r->export_mime);
	if (rc) {
		cfs_vfs_file_free(v, f, 0);
		return rc;
	}
	*out = f;
	return 0;
}

/* Rebuilds file handle fh, handed out by a server process that was restarted
 * since, from its stored row: the same content key, revision and size the
 * open pinned, never the node's current revision, so the kernel gets the
 * bytes of the revision it opened (a revision Drive no longer serves fails
 * the read with ESTALE, as it would have in the old process).  An export is
 * fetched again (it lived in the old process's memory): the document may
 * have changed since the open, which for exports (direct_io, no revision in
 * the key) is the same as reading it a little later.  No row: -EBADF. */
static int file_rebuild(struct cfs_vfs *v, uint64_t ino, uint64_t fh, struct cfs_vfs_file **out)
{
	struct cfs_nsdb_fh r;
	int rc = cfs_nsdb_fh_get(v->ns, fh, &r);
	if (rc == -ENOENT || rc == CFS_E_PROTO || (!rc && r.ino != ino))
		return -EBADF;
	if (!rc)
		rc = cfs_vfs_file_from_row(v, fh, &r, out);
	if (!rc)
		CFS_INFO("rebuilt file handle %llu (inode %llu, %s) after a restart",
			 (unsigned long long)fh, (unsigned long long)ino, r.key);
	return rc;
}

int cfs_vfs_file_adopt(struct cfs_vfs *v, struct cfs_vfs_file *f, struct cfs_vfs_file **out,
		       int *made)
{
	struct cfs_handle *e;
	int rc = cfs_handles_add(v->handles, &f->h, &e);
	*made = !rc && e == &f->h;
	if (!*made)
		cfs_vfs_file_free(v, f, 0); /* another thread made it first */
	if (!rc)
		*out = (struct cfs_vfs_file *)e;
	return rc;
}

/* The handle fh on file ino with a reference taken, rebuilt if this process
 * does not know it. */
int cfs_vfs_get_file(struct cfs_vfs *v, uint64_t ino, uint64_t fh, struct cfs_vfs_file **out)
{
	struct cfs_handle *e = cfs_handles_get(v->handles, fh, H_FILE);
	if (e) {
		*out = (struct cfs_vfs_file *)e;
	} else {
		struct cfs_vfs_file *f;
		int made, rc = file_rebuild(v, ino, fh, &f);
		if (!rc)
			rc = cfs_vfs_file_adopt(v, f, out, &made);
		if (rc)
			return rc == -EEXIST ? -EBADF : rc;
	}
	if ((*out)->ino != ino) { /* not this file's handle */
		cfs_vfs_put_file(v, *out);
		return -EBADF;
	}
	return 0;
}

int cfs_vfs_file_read(struct cfs_vfs *v, struct cfs_vfs_file *f, int64_t off, size_t len,
		      char *buf, size_t *got)
{
	*got = 0;
	if (off < 0)
		return -EINVAL;
	if (f->w)
		return cfs_staging_pread(f->w->fd, off, buf, len, got);
	if (f->data) {
		if (off < f->b.size) {
			if ((int64_t)len > f->b.size - off)
				len = (size_t)(f->b.size - off);
			memcpy(buf, f->data + off, len);
			*got = len;
		}
		return 0;
	}
	struct cfs_reader_file rf = cfs_vfs_reader_file(&f->b);
	int rc = cfs_reader_read(v->reader, f->stream, &rf, off, len, buf, got);
	if (rc == -ESTALE) {
		/* The file changed in Drive since its listing: fail this read rather
		 * than mix revisions, and make the next lookup fetch the listing
		 * again and the next open drop the kernel's pages. */
		cfs_inode_lock(v->tab);
		struct cfs_node *n = cfs_inode_get(v->tab, f->ino);
		struct cfs_node *dir = n ? cfs_inode_get(v->tab, n->parent) : NULL;
		if (dir && dir->dir)
			dir->dir->listed_at_ms = cfs_vfs_now_ms() - v->dir_ttl_ms;
		if (n) {
			n->opened_rev = 0;
			n->stale = 1;
		}
		cfs_inode_unlock(v->tab);
	}
	return rc;
}

static int read_file(struct cfs_vfs *v, uint64_t ino, uint64_t fh, int64_t off, size_t len,
		     char *buf, size_t *got)
{
	struct cfs_vfs_file *f;
	*got = 0;
	int rc = cfs_vfs_get_file(v, ino, fh, &f);
	if (rc)
		return rc;
	rc = cfs_vfs_file_read(v, f, off, len, buf, got);
	cfs_vfs_put_file(v, f);
	return rc;
}

int cfs_vfs_read(struct cfs_vfs *v, uint64_t ino, uint64_t fh, int64_t off, size_t len,
		 char *buf, size_t *got)
{
	int rc = read_file(v, ino, fh, off, len, buf, got);
	if (!rc)
		__atomic_add_fetch(&v->read_bytes, (uint64_t)*got, __ATOMIC_RELAXED);
	return rc;
}

uint64_t cfs_vfs_read_bytes(struct cfs_vfs *v)
{
	return __atomic_load_n(&v->read_bytes, __ATOMIC_RELAXED);
}

/* Hashes a completely cached file and compares with Drive's checksum.
 * Returns 1 if it matched, 0 if it could not be checked, -1 on a mismatch. */
static int hash_cached(struct cfs_vfs *v, const char *key, int64_t size, const char *alg,
		       const char *want)
{
	uint32_t bs = cfs_store_block_size(v->store);
	char *buf = malloc(bs);
	struct cfs_digest *d = NULL;
	int ok = buf && cfs_digest_new(alg, &d) == 0;
	for (uint64_t b = 0; ok && (int64_t)(b * bs) < size; b++) {
		uint32_t got = 0;
		ok = cfs_store_read(v->store, key, b, 0, bs, buf, &got) == 0 &&
		     cfs_digest_update(d, buf, got) == 0;
	}
	char hex[65] = "";
	if (ok)
		ok = cfs_digest_final_hex(d, hex, sizeof(hex)) == 0;
	else
		cfs_digest_free(d);
	free(buf);
	if (!ok)
		return 0; /* a block went away meanwhile: nothing to conclude */
	return strcmp(hex, want) == 0 ? 1 : -1;
}

void cfs_vfs_node_checksum(const struct cfs_node *n, const char **alg, char want[65])
{
	want[0] = '\0';
	*alg = "";
	if (n->has_sha256) {
		cfs_node_sha256_hex(n, want);
		*alg = "sha256";
	} else if (n->has_md5) {
		cfs_node_md5_hex(n, want);
		*alg = "md5";
	}
}

void cfs_vfs_checksum_failed(struct cfs_vfs *v, uint64_t ino, const struct blob_ref *b,
			     const char *alg, const char *what)
{
	char prefix[sizeof(b->key) + 1];
	uint64_t bytes, blocks;
	__atomic_add_fetch(&v->files_mismatched, 1, __ATOMIC_RELAXED);
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	if (n)
		n->opened_rev = 0; /* the next open drops the kernel's pages of it */
	cfs_inode_unlock(v->tab);
	CFS_ERROR("%s of %s does not match Drive's %s checksum; dropping every cached copy "
		  "(the shared cache's too): it is read from Drive again", what, b->key, alg);
	struct cfs_reader_file rf = cfs_vfs_reader_file(b);
	cfs_reader_forget(v->reader, &rf);
	snprintf(prefix, sizeof(prefix), "%s", b->key);
	cfs_store_evict_prefix(v->store, prefix, &bytes, &blocks);
	/* open-less (vfs_pin.c), no open will come to drop the kernel's pages:
	 * drop them now (through the poller's notices; none when it does not
	 * run, and the pages then live until the kernel reclaims them) */
	if (v->pin.on && v->notify.inode)
		v->notify.inode(v->notify.arg, ino);
}

/* When a file is completely cached and Drive gave a checksum, the cached
 * copy is checked against it once per revision; a mismatch drops it all. */
static void check_whole_file(struct cfs_vfs *v, struct cfs_vfs_file *f)
{
	char want[65];
	const char *alg = "";
	int todo = 0;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, f->ino);
	/* most releases: checked already (compared first: it is the cheapest) */
	if (n && n->checked_rev != cfs_node_rev_hash(n) && (n->has_sha256 || n->has_md5) &&
	    f->b.size > 0 && cfs_vfs_key_is(n, f->b.key)) {
		cfs_vfs_node_checksum(n, &alg, want);
		todo = 1;
	}
	cfs_inode_unlock(v->tab);
	if (!todo || cfs_store_cached_bytes(v->store, f->b.key) != (uint64_t)f->b.size)
		return;
	int r = hash_cached(v, f->b.key, f->b.size, alg, want);
	if (r == 0)
		return;
	if (r < 0) {
		cfs_vfs_checksum_failed(v, f->ino, &f->b, alg, "cached copy");
		return;
	}
	__atomic_add_fetch(&v->files_checked, 1, __ATOMIC_RELAXED);
	cfs_inode_lock(v->tab);
	n = cfs_inode_get(v->tab, f->ino);
	if (n && cfs_vfs_key_is(n, f->b.key)) /* still that revision? */
		n->checked_rev = cfs_node_rev_hash(n);
	cfs_inode_unlock(v->tab);
}

void cfs_vfs_counters(struct cfs_vfs *v, uint64_t *checked, uint64_t *mismatched)
{
	*checked = __atomic_load_n(&v->files_checked, __ATOMIC_RELAXED);
	*mismatched = __atomic_load_n(&v->files_mismatched, __ATOMIC_RELAXED);
}

/* Frees a file handle's object; check: run the whole-file check first (a
 * real release, not a failed open). */
void cfs_vfs_file_free(struct cfs_vfs *v, struct cfs_vfs_file *f, int check)
{
	if (!f)
		return;
	if (f->held) {
		if (check)
			check_whole_file(v, f);
		cfs_store_release(v->store, f->b.key);
	}
	if (f->used)
		cfs_store_unuse(v->store, f->b.key);
	if (f->scan.nanc)
		cfs_vfs_scan_close(v, &f->scan);
	if (f->w)
		cfs_vfs_w_detach(v, f->w, f->writer);
	cfs_reader_stream_free(f->stream);
	free(f->data);
	free(f);
}

void cfs_vfs_put_file(struct cfs_vfs *v, struct cfs_vfs_file *f)
{
	if (cfs_handles_unref(&f->h))
		cfs_vfs_file_free(v, f, 1);
}

void cfs_vfs_release(struct cfs_vfs *v, uint64_t ino, uint64_t fh)
{
	(void)ino;
	struct cfs_handle *e = cfs_handles_remove(v->handles, fh, H_FILE);
	/* the row goes first: a handle is never rebuilt after its release; none
	 * when this process never stored it (a failed write) or it was released
	 * before a restart's resend */
	int rc = cfs_nsdb_fh_del(v->ns, fh);
	if (rc && rc != -ENOENT)
		CFS_WARN("cannot drop stored file handle %llu: %s", (unsigned long long)fh,
			 cfs_strerror(rc));
	if (e)
		cfs_vfs_put_file(v, (struct cfs_vfs_file *)e);
	cfs_vfs_retire_run(v);
}

/* Unmount: handles the kernel never released.  Their rows stay: this
 * process may be ending for a restart under the same mount, where the
 * kernel still holds the numbers. */
void cfs_vfs_drop_handle(struct cfs_handle *e, void *arg)
{
	if (e->kind == H_FILE)
		cfs_vfs_file_free(arg, (struct cfs_vfs_file *)e, 0);
	else
		cfs_vfs_dir_free((struct cfs_vfs_dir *)e);
}

