/* vfs_pin: open-less reads (see vfs.h).
 *
 * Why.  A warm open and close of a cached file costs the daemon two
 * requests (OPEN, and the asynchronous RELEASE), about 25 us of round trips
 * and context switches, where the whole open-read-close of a small file from
 * the page cache costs a few.  On a read-only mount the kernel can do without
 * both (FUSE no-open: the server answers the first OPEN with ENOSYS; from
 * then on the kernel opens every file of the connection itself, with handle
 * 0 and its page cache kept, and sends no RELEASE), so a warm epoch never
 * reaches the daemon.  A writable mount cannot: no-open holds for every open
 * of the connection, and a writer needs its handle, its close (FLUSH is its
 * durability point) and, with atomic O_TRUNC, its OPEN.
 *
 * What an open pinned, the kernel's inode pins instead.  All readers of one
 * kernel inode share its page cache, so one inode must never show two
 * revisions: a file's node id is its inode number (which st_ino keeps
 * showing) with a generation in bits 48-62 derived from its revision (a
 * hash: the node id names the revision, after a server restart too).  When
 * a node is about to show another revision (a listing or a files.get names a
 * new one: cfs_vfs_pin_supersede), the node id it leaves is recorded with
 * the revision it showed, in the row an open handle had (nsdb.h: the
 * supervisor's table) under CFS_VFS_PIN_FH | node id.  A reader holding the
 * old inode keeps reading that revision: its pages, the blocks of that
 * revision from the cache, or downloads of that revision, and ESTALE once
 * Drive no longer has it (or its record is gone: without a supervisor,
 * --recovery=off, records are kept nowhere); a new lookup (the Changes
 * poller drops the kernel's name, and a lookup of a file a read found
 * changed refreshes it first) gets the new node id, a new inode, an empty
 * page cache and the new revision.  FORGET of a superseded node id drops
 * its record.  A new revision whose hash names the node id it leaves or one
 * still recorded (1 in 32,767 changes, or so) gets the next free generation
 * instead, kept in a row of its own (CFS_VFS_PIN_FH | GEN_ROW << 48 | inode
 * number) that a restarted server reads the first time it meets the node.
 * What a restart cannot know is a change it never saw (Drive changed a file
 * while no server ran, and the listing it had stored was dropped): the old
 * inode's node id then names a revision it has no record of, and its reads
 * fail with ESTALE, or, 1 time in 32,767, read the new bytes.
 *
 * Reads.  A READ carries no handle: it is served by a file object per node
 * id (registered under CFS_VFS_PIN_FH | node id), made at its first read as
 * an open makes one (a stream for the read-ahead, a hold on the blocks) and
 * given up, as a release does (the whole-file check, the hold and the
 * dataset read-ahead's count), when a clock over CFS_VFS_PIN_FILES of them
 * picks it, after the reply that made room; the clock also gives up objects
 * not read lately while the blocks they hold pass an eighth of the cache
 * budget (a kept object is no open file: its hold must not crowd out what
 * the dataset read-ahead or an order hint fetched ahead).  An export's size
 * is unknown until it is fetched: the kernel asks for the attributes with
 * the file (FUSE_GETATTR_FH) before it reads past the size it knows, and
 * that getattr fetches the export.
 *
 * Open-less opens.  The dataset read-ahead (vfs_scan.c: the tree and
 * sibling-folder detector) and the order hint (vfs_hint.c) learn what a
 * reader opens from OPEN, which never comes here; they are told of an
 * "open-less open" instead, before the read that makes it is served:
 *   - the first READ of a node id (the one that makes its file object), at
 *     any offset;
 *   - a READ at offset 0 of a node id whose file object is kept: the kernel
 *     asks for a file's first page only when its page cache lacks it, so this
 *     is a reader starting the file again (a later epoch whose pages were
 *     reclaimed, a file read again after colabfs evict), not more of a read
 *     in progress, which goes on past offset 0.
 * Each tell ends the object's previous one (for the detector, its open is
 * closed and a new one begins), so a file object counts as one file open
 * from its last tell to its release by the clock; a READ elsewhere in the
 * file tells nothing.  What is served from the page cache (a warm epoch)
 * tells nothing either: it needs no read-ahead.  So on a read-only mount the
 * detector and the hint see the cold and re-read files of an epoch, in the
 * order their first pages are asked for; a reader that starts a file
 * elsewhere than at offset 0 with its first page cached (a header read
 * before) is not seen again until the clock gave its object up.  Exports
 * tell nothing, as their opens do not.
 *
 * Thread rules: any thread; node fields under the table lock, the clock
 * under pin.lock (never the other way round). */
#include "vfs_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "hash.h"
#include "log.h"
#include "nsdb.h"
#include "store.h"

#define GEN_ROW 0x7fffu /* generations are 0..GEN_ROW-1; this marks override rows */
#define ROW_KEY(nodeid) (CFS_VFS_PIN_FH | (nodeid))
#define GEN_KEY(ino) (CFS_VFS_PIN_FH | (uint64_t)GEN_ROW << CFS_VFS_PIN_SHIFT | (ino))

int cfs_vfs_pin_start(struct cfs_vfs *v)
{
	if (cfs_vfs_writable(v))
		return -EROFS;
	/* numbers start at resets << 40 (nsdb.h): below 2^47 bits 48-62 are free */
	if (cfs_nsdb_ino_older(v->ns, 1ull << 47))
		return -ERANGE;
	pthread_mutex_init(&v->pin.lock, NULL);
	v->pin.held_max = cfs_store_budget(v->store) / 8;
	v->pin.on = 1;
	return 0;
}

int cfs_vfs_pinned(const struct cfs_vfs *v)
{
	return v->pin.on;
}

static uint16_t rev_gen(const char *rev)
{
	return (uint16_t)(cfs_hash_fnv1a(rev) % GEN_ROW);
}

/* The blob key of n with revision rev (as cfs_vfs_blob_ref makes it). */
static void key_of(const struct cfs_node *n, const char *rev, char *key, size_t cap)
{
	snprintf(key, cap, "%s@%s", n->content_id, rev);
}

uint64_t cfs_vfs_pin_node_id(struct cfs_vfs *v, struct cfs_node *n)
{
	if (!v->pin.on || n->is_dir)
		return n->ino;
	if (!n->pin_known) { /* an override a server before this one made */
		struct cfs_nsdb_fh r;
		char key[sizeof(r.key)];
		n->pin_known = 1;
		key_of(n, n->rev, key, sizeof(key));
		if (v->pin.probe && cfs_nsdb_fh_get(v->ns, GEN_KEY(n->ino), &r) == 0 &&
		    r.ino == n->ino && strcmp(r.key, key) == 0 && r.size >= 0 && r.size < GEN_ROW) {
			n->pin_override = 1;
			n->pin_gen = (uint16_t)r.size;
		}
	}
	uint16_t g = n->pin_override ? n->pin_gen : rev_gen(n->rev);
	return n->ino | (uint64_t)g << CFS_VFS_PIN_SHIFT;
}

uint64_t cfs_vfs_pin_nodeid(struct cfs_vfs *v, uint64_t ino)
{
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	uint64_t id = n ? cfs_vfs_pin_node_id(v, n) : ino;
	cfs_inode_unlock(v->tab);
	return id;
}

void cfs_vfs_pin_supersede(struct cfs_vfs *v, struct cfs_node *n, const char *rev)
{
	if (!v->pin.on || n->is_dir || !n->rev[0] || strcmp(n->rev, rev) == 0)
		return;
	uint64_t old = cfs_vfs_pin_node_id(v, n);
	uint16_t was = (uint16_t)(old >> CFS_VFS_PIN_SHIFT), hashed = rev_gen(rev), gen = hashed;
	/* the old node id keeps what it showed (as an open's handle row would) */
	struct blob_ref b;
	struct cfs_nsdb_fh r;
	memset(&r, 0, sizeof(r));
	cfs_vfs_blob_ref(n, &b);
	r.ino = n->ino;
	r.size = b.size;
	memcpy(r.key, b.key, sizeof(r.key));
	memcpy(r.id, b.id, sizeof(r.id));
	memcpy(r.rev, b.rev, sizeof(r.rev));
	snprintf(r.export_mime, sizeof(r.export_mime), "%s", n->export_mime);
	int rc = cfs_nsdb_fh_put(v->ns, ROW_KEY(old), &r);
	if (n->pin_override && cfs_nsdb_fh_del(v->ns, GEN_KEY(n->ino)) && !rc)
		rc = -EIO;
	n->pin_override = 0;
	/* never a node id a reader of an older revision may hold */
	for (int k = 0; k < 64 && (gen == was || cfs_nsdb_fh_get(v->ns, ROW_KEY(n->ino |
		      (uint64_t)gen << CFS_VFS_PIN_SHIFT), &r) == 0); k++)
		gen = (uint16_t)((gen + 1) % GEN_ROW);
	if (gen != hashed) { /* and its row, for a restarted server */
		memset(&r, 0, sizeof(r));
		r.ino = n->ino;
		r.size = gen;
		key_of(n, rev, r.key, sizeof(r.key));
		if (!rc)
			rc = cfs_nsdb_fh_put(v->ns, GEN_KEY(n->ino), &r);
		n->pin_override = 1;
		n->pin_gen = gen;
	}
	if (rc)
		CFS_WARN("%s: cannot record its revision change for open-less readers (%s): a "
			 "reader of the old revision may get ESTALE", n->content_id, cfs_strerror(rc));
	CFS_DEBUG("%s: node id %llx superseded (generation %u now)", n->content_id,
		  (unsigned long long)old, gen);
}

/* The row of superseded node id (ino's), or -ESTALE. */
static int superseded_row(struct cfs_vfs *v, uint64_t ino, uint64_t nodeid, struct cfs_nsdb_fh *r)
{
	int rc = cfs_nsdb_fh_get(v->ns, ROW_KEY(nodeid), r);
	if (rc == -ENOENT || rc == CFS_E_PROTO || (!rc && r->ino != ino))
		return -ESTALE;
	return rc;
}

int cfs_vfs_pin_file(struct cfs_vfs *v, uint64_t ino, uint64_t fh, struct cfs_vfs_file **out)
{
	uint64_t nodeid = fh & ~CFS_VFS_PIN_FH;
	int rc = cfs_vfs_resolve_node(v, ino);
	if (rc)
		return rc;
	struct cfs_vfs_file *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	char export_mime[128] = "";
	int current = 0;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_vfs_file_node(v, ino, &rc);
	if (n && cfs_vfs_pin_node_id(v, n) == nodeid) {
		current = 1;
		cfs_vfs_blob_ref(n, &f->b);
		snprintf(export_mime, sizeof(export_mime), "%s", n->export_mime);
	}
	cfs_inode_unlock(v->tab);
	if (rc || !current) {
		free(f);
		struct cfs_nsdb_fh r;
		if (!rc)
			rc = superseded_row(v, ino, nodeid, &r);
		return rc ? rc : cfs_vfs_file_from_row(v, fh, &r, out);
	}
	f->h.fh = fh;
	f->h.kind = H_FILE;
	f->ino = ino;
	rc = cfs_vfs_file_start(v, f, export_mime);
	if (rc) {
		cfs_vfs_file_free(v, f, 0);
		return rc;
	}
	if (f->data) {
		cfs_inode_lock(v->tab);
		n->size = f->b.size; /* an export's size is known once fetched */
		cfs_inode_unlock(v->tab);
	}
	*out = f;
	return 0;
}

/* An open-less open of f (see the top): its last one ends, the dataset
 * read-ahead and the order hint are told of a new one.  Only one thread at a
 * time tells for f; another one meanwhile tells nothing. */
static void tell(struct cfs_vfs *v, struct cfs_vfs_file *f, uint32_t pid)
{
	if (f->data || f->w || __atomic_exchange_n(&f->pin_telling, 1, __ATOMIC_ACQUIRE))
		return;
	if (f->scan.nanc)
		cfs_vfs_scan_close(v, &f->scan);
	cfs_vfs_scan_open(v, f->ino, pid, &f->scan);
	__atomic_store_n(&f->pin_telling, 0, __ATOMIC_RELEASE);
}

/* pin.lock held: slot i is given up (its object's hold no longer counted);
 * the key it had. */
static uint64_t give_up(struct cfs_vfs_pins *p, unsigned i)
{
	uint64_t key = p->key[i];
	p->held_sum -= p->held[i];
	p->key[i] = 0;
	p->held[i] = 0;
	p->ref[i] = 0;
	return key;
}

/* Keeps f among the file objects reads use (the clock): it takes the slot
 * of the first one not read since the hand last passed it; returns that
 * one's handle key, to give up (0: none).  And while the blocks the kept
 * objects hold (cfs_store_hold, as an open's) pass held_max, the hand goes
 * on (at most one turn), giving up those not read since it last passed,
 * into pin.out: a kept object is no open file, and its hold must not crowd
 * out what the read-ahead fetched for the files to come. */
static uint64_t keep(struct cfs_vfs *v, struct cfs_vfs_file *f)
{
	struct cfs_vfs_pins *p = &v->pin;
	uint64_t out, size = f->held && f->b.size > 0 ? (uint64_t)f->b.size : 0;
	unsigned mine;
	pthread_mutex_lock(&p->lock);
	for (;;) { /* at most one turn past every slot read since the last */
		unsigned i = p->hand;
		p->hand = (i + 1) % CFS_VFS_PIN_FILES;
		if (p->key[i] && p->ref[i]) {
			p->ref[i] = 0;
			continue;
		}
		out = give_up(p, i);
		p->key[i] = f->h.fh;
		p->ref[i] = 1;
		p->held[i] = size;
		p->held_sum += size;
		mine = i;
		__atomic_store_n(&f->pin_slot, i + 1, __ATOMIC_RELAXED);
		break;
	}
	for (unsigned k = 0; k < CFS_VFS_PIN_FILES && p->held_sum > p->held_max &&
			     p->nout < CFS_VFS_PIN_FILES; k++) {
		unsigned i = p->hand;
		p->hand = (i + 1) % CFS_VFS_PIN_FILES;
		if (i == mine || !p->key[i])
			continue;
		if (p->ref[i]) {
			p->ref[i] = 0;
		} else {
			p->out[p->nout] = give_up(p, i);
			__atomic_store_n(&p->nout, p->nout + 1, __ATOMIC_RELAXED);
		}
	}
	pthread_mutex_unlock(&p->lock);
	return out;
}

/* The file object reads of node id use, with a reference: the one kept, or
 * a new one (*drop: one to give up after the reply).  off: the offset of the
 * READ it is for, by process pid (an open-less open is told: see the top);
 * -1: not a read. */
static int get_pinned(struct cfs_vfs *v, uint64_t nodeid, uint32_t pid, int64_t off,
		      struct cfs_vfs_file **out, uint64_t *drop)
{
	uint64_t key = CFS_VFS_PIN_FH | nodeid;
	struct cfs_handle *e = cfs_handles_get(v->handles, key, H_FILE);
	struct cfs_vfs_file *f = (struct cfs_vfs_file *)e;
	int made = 0;
	if (!e) {
		int rc = cfs_vfs_pin_file(v, cfs_vfs_pin_ino(nodeid), key, &f);
		if (!rc)
			rc = cfs_vfs_file_adopt(v, f, &f, &made);
		if (rc)
			return rc;
		if (made)
			*drop = keep(v, f);
	}
	if (off >= 0 && (made || off == 0))
		tell(v, f, pid);
	unsigned slot = __atomic_load_n(&f->pin_slot, __ATOMIC_RELAXED);
	if (slot)
		__atomic_store_n(&v->pin.ref[slot - 1], 1, __ATOMIC_RELAXED);
	*out = f;
	return 0;
}

static void drop_key(struct cfs_vfs *v, uint64_t key)
{
	struct cfs_handle *e = key ? cfs_handles_remove(v->handles, key, H_FILE) : NULL;
	if (e)
		cfs_vfs_put_file(v, (struct cfs_vfs_file *)e);
}

void cfs_vfs_pin_drop(struct cfs_vfs *v, uint64_t drop)
{
	drop_key(v, drop);
	if (!v->pin.on || !__atomic_load_n(&v->pin.nout, __ATOMIC_RELAXED))
		return;
	uint64_t keys[CFS_VFS_PIN_FILES];
	pthread_mutex_lock(&v->pin.lock);
	unsigned n = v->pin.nout;
	memcpy(keys, v->pin.out, n * sizeof(keys[0]));
	__atomic_store_n(&v->pin.nout, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&v->pin.lock);
	for (unsigned i = 0; i < n; i++)
		drop_key(v, keys[i]);
}

/* A read found ino changed in Drive (the node is stale now): the kernel
 * forgets its name, so that the next lookup refreshes the node and hands out
 * the new revision's node id.  Sent through the poller's notices (none when
 * it does not run: the name then lives out its entry timeout). */
static void changed(struct cfs_vfs *v, uint64_t ino)
{
	char *name = NULL;
	uint64_t parent = 0;
	if (!v->notify.entry)
		return;
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	struct cfs_node *d = n ? cfs_inode_get(v->tab, n->parent) : NULL;
	long at = d ? cfs_vfs_listed_at(d, n) : -1;
	if (at >= 0) {
		parent = d->ino;
		name = strdup(d->dir->listing->e[at].name);
	}
	cfs_inode_unlock(v->tab);
	if (name)
		v->notify.entry(v->notify.arg, parent, name);
	free(name);
}

int cfs_vfs_pin_read(struct cfs_vfs *v, uint64_t nodeid, uint32_t pid, int64_t off, size_t len,
		     char *buf, size_t *got, uint64_t *drop)
{
	struct cfs_vfs_file *f;
	*got = 0;
	*drop = 0;
	int rc = get_pinned(v, nodeid, pid, off, &f, drop);
	if (rc)
		return rc;
	rc = cfs_vfs_file_read(v, f, off, len, buf, got);
	cfs_vfs_put_file(v, f);
	if (!rc)
		__atomic_add_fetch(&v->read_bytes, (uint64_t)*got, __ATOMIC_RELAXED);
	else if (rc == -ESTALE)
		changed(v, cfs_vfs_pin_ino(nodeid));
	return rc;
}

int cfs_vfs_pin_getattr(struct cfs_vfs *v, uint64_t nodeid, int from_file, struct cfs_vfs_attr *a)
{
	uint64_t ino = cfs_vfs_pin_ino(nodeid);
	int rc = cfs_vfs_getattr(v, ino, a);
	if (rc)
		return rc;
	if (a->nodeid == nodeid) {
		if (from_file && !a->size_known && !a->is_dir) {
			/* a read past what the kernel knows of an export's size */
			struct cfs_vfs_file *f;
			uint64_t drop = 0;
			rc = get_pinned(v, nodeid, 0, -1, &f, &drop);
			if (!rc) {
				cfs_vfs_put_file(v, f);
				rc = cfs_vfs_getattr(v, ino, a);
			}
			cfs_vfs_pin_drop(v, drop);
		}
		return rc;
	}
	struct cfs_nsdb_fh r;
	if ((rc = a->is_dir ? -ESTALE : superseded_row(v, ino, nodeid, &r)) != 0)
		return rc;
	a->nodeid = nodeid; /* the times are the node's now; the size its revision's */
	a->size_known = r.size >= 0;
	a->size = r.size >= 0 ? r.size : 0;
	return 0;
}

void cfs_vfs_pin_forget(struct cfs_vfs *v, uint64_t nodeid)
{
	if (!v->pin.on)
		return;
	/* only a superseded node id has a row (one met before a restart keeps
	 * it: no lookups of rows that are not there) */
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, cfs_vfs_pin_ino(nodeid));
	int superseded = n && !n->is_dir && cfs_vfs_pin_node_id(v, n) != nodeid;
	cfs_inode_unlock(v->tab);
	if (!superseded)
		return;
	/* no read comes through that node id again: its file object goes */
	uint64_t key = CFS_VFS_PIN_FH | nodeid;
	struct cfs_handle *e = cfs_handles_get(v->handles, key, H_FILE);
	if (e) {
		unsigned slot = __atomic_load_n(&((struct cfs_vfs_file *)e)->pin_slot,
						__ATOMIC_RELAXED);
		pthread_mutex_lock(&v->pin.lock);
		if (slot && v->pin.key[slot - 1] == key)
			give_up(&v->pin, slot - 1);
		pthread_mutex_unlock(&v->pin.lock);
		cfs_vfs_put_file(v, (struct cfs_vfs_file *)e);
		drop_key(v, key);
	}
	/* the revision it showed is no file's now (vfs_retire.c), unless the
	 * node came back to it */
	struct cfs_nsdb_fh r;
	int known = cfs_nsdb_fh_get(v->ns, ROW_KEY(nodeid), &r) == 0;
	cfs_nsdb_fh_del(v->ns, ROW_KEY(nodeid));
	if (!known || !r.key[0] || r.export_mime[0])
		return;
	cfs_inode_lock(v->tab);
	int current = cfs_vfs_key_is(n, r.key);
	cfs_inode_unlock(v->tab);
	if (!current)
		cfs_store_retire(v->store, r.key, NULL);
}
