/* vfs_scan: dataset read-ahead (see vfs_int.h).  scan.h decides when; this
 * part does it.
 *
 * Every open of a regular file is told to the detector with the file's
 * listing position and the folders above it (on an open-less mount, which
 * sees no OPEN, what vfs_pin.c counts as an open: a node id's first READ,
 * and a later READ at offset 0).  Listing-order advice queues
 * the next small files of the folder at once.  A tree scan is run by one
 * scanner thread: it lists the tree's small files (size <= the reader's
 * largest request; folders whose listing is in memory, depth first in
 * listing order: what a dataset's constructor just listed) and hands them
 * to the reader's scan queue (cfs_reader_scan) whenever it has room, so
 * the scan runs at the reader's scan connections and the pacer's background
 * budget.  Bound: the bytes it queued that no reader has opened yet stay
 * under a quarter of the cache budget, so it never evicts what the epoch
 * already read.  When the detector says the readers stopped (no open below
 * the root for its idle time) or at unmount, the scan ends, its queued jobs
 * are dropped and what it fetched and nobody opened counts as wasted.
 * A sibling scan (scan.h: class folders beside unrelated ones) lists only
 * the children of its root that the detector saw opened, and appends the
 * files of each child that joins later (or of the whole root, when it
 * widens): the scanner thread lists them and adds those not in the run.
 * An order hint (vfs_hint.c) runs on the same thread and lock: an open that
 * follows the hint is the hint's, not the detector's.
 * Counters for `colabfs stats`. */
#include "vfs_int.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "hint.h"
#include "store.h"
#include "u64map.h"

#define TREE_DEPTH 16          /* folder levels a tree scan descends */
#define TREE_FILES (1u << 22)  /* files a tree scan lists, at most */
#define ORDER_BATCH 64         /* listing-order files queued by one open, at most */
#define TICK_MS 50
#define SIB_MAX CFS_SCAN_SLOTS /* children a sibling scan starts with, at most */

enum { ST_NEW, ST_QUEUED, ST_USED, ST_READER };

struct scan_item {
	uint64_t ino;
	uint64_t size;
};

struct scan_run {
	uint64_t root;
	int siblings;            /* only the children in `joined` (and what they hold) */
	struct scan_item *items; /* listing order, by folder in the order they came */
	struct cfs_u64map by_ino; /* ino -> item index */
	struct cfs_u64map joined; /* sibling scan: the children whose files are in */
	unsigned char *state;
	int widen;               /* it became a whole-tree scan: the rest to be added */
	size_t n, cap, next;
	uint64_t ahead;          /* bytes queued by the scan, not opened yet */
};

static void run_free(struct scan_run *r)
{
	if (!r)
		return;
	free(r->items);
	cfs_u64map_free(&r->by_ino);
	cfs_u64map_free(&r->joined);
	free(r->state);
	free(r);
}

/* ---- building a run --------------------------------------------------------- */

struct item_list {
	struct scan_item *v;
	size_t n, cap;
};

static int item_add(struct item_list *x, uint64_t ino, uint64_t size)
{
	if (x->n == x->cap) {
		size_t nc = x->cap ? x->cap * 2 : 1024;
		struct scan_item *y = realloc(x->v, nc * sizeof(*y));
		if (!y)
			return -ENOMEM;
		x->v = y;
		x->cap = nc;
	}
	x->v[x->n++] = (struct scan_item){ ino, size };
	return 0;
}

/* Table lock held: the small files below folder top, depth first in
 * listing order, appended to x. */
static int list_below(struct cfs_vfs *v, uint64_t top, uint64_t small_max, struct item_list *x)
{
	struct frame {
		struct cfs_listing *l;
		size_t i;
	} stack[TREE_DEPTH];
	int depth = 0, rc = 0;
	struct cfs_node *root = cfs_inode_get(v->tab, top);
	if (!root || !root->dir || !root->dir->listing)
		return 0;
	stack[depth++] = (struct frame){ root->dir->listing, 0 };
	while (depth && !rc && x->n < TREE_FILES) {
		struct frame *f = &stack[depth - 1];
		if (f->i >= f->l->n) {
			depth--;
			continue;
		}
		struct cfs_node *n = cfs_inode_get(v->tab, f->l->e[f->i++].ino);
		if (!n)
			continue;
		if (n->is_dir) {
			if (n->dir && n->dir->listing && depth < TREE_DEPTH)
				stack[depth++] = (struct frame){ n->dir->listing, 0 };
		} else if (!n->export_mime[0] && n->size > 0 && (uint64_t)n->size <= small_max) {
			rc = item_add(x, n->ino, (uint64_t)n->size);
		}
	}
	return rc;
}

/* The small files below each of the folders (lock not held); 0 or -ENOMEM. */
static int list_folders(struct cfs_vfs *v, const uint64_t *tops, int ntops, uint64_t small_max,
			struct item_list *x)
{
	int rc = 0;
	cfs_inode_lock(v->tab);
	for (int i = 0; i < ntops && !rc; i++)
		rc = list_below(v, tops[i], small_max, x);
	cfs_inode_unlock(v->tab);
	return rc;
}

/* Adds the items of x not in r yet (scan lock held, or r not shared yet). */
static int run_merge(struct scan_run *r, const struct item_list *x)
{
	if (r->n + x->n > r->cap) {
		size_t nc = r->n + x->n;
		struct scan_item *items = realloc(r->items, nc * sizeof(*items));
		if (!items)
			return -ENOMEM;
		r->items = items;
		unsigned char *st = realloc(r->state, nc);
		if (!st)
			return -ENOMEM;
		r->state = st;
		r->cap = nc;
	}
	for (size_t i = 0; i < x->n; i++) {
		if (cfs_u64map_get(&r->by_ino, x->v[i].ino, NULL))
			continue;
		if (cfs_u64map_put(&r->by_ino, x->v[i].ino, (uint32_t)r->n))
			return -ENOMEM;
		r->items[r->n] = x->v[i];
		r->state[r->n++] = ST_NEW;
	}
	return 0;
}

/* Builds the run for root (lock not held): the whole tree, or (siblings)
 * the children of it in tops; NULL without memory. */
static struct scan_run *run_build(struct cfs_vfs *v, uint64_t root, int siblings,
				  const uint64_t *tops, int ntops, uint64_t small_max)
{
	struct scan_run *r = calloc(1, sizeof(*r));
	struct item_list x = { 0 };
	if (!r)
		return NULL;
	r->root = root;
	r->siblings = siblings;
	int rc = list_folders(v, siblings ? tops : &root, siblings ? ntops : 1, small_max, &x);
	for (int i = 0; siblings && i < ntops && !rc; i++)
		rc = cfs_u64map_put(&r->joined, tops[i], 0);
	if (!rc)
		rc = run_merge(r, &x);
	free(x.v);
	if (rc) {
		run_free(r);
		return NULL;
	}
	return r;
}

static long run_find(const struct scan_run *r, uint64_t ino)
{
	uint32_t i;
	return cfs_u64map_get(&r->by_ino, ino, &i) ? (long)i : -1;
}

/* ---- handing files to the reader ------------------------------------------ */

/* The reader's view of file ino if it is still a small blob; 0 or -ENOENT. */
static int blob_of(struct cfs_vfs *v, uint64_t ino, struct blob_ref *b)
{
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	int ok = n && !n->is_dir && !n->export_mime[0] && n->size > 0;
	if (ok)
		cfs_vfs_blob_ref(n, b);
	cfs_inode_unlock(v->tab);
	return ok ? 0 : -ENOENT;
}

static int queue_file(struct cfs_vfs *v, uint64_t ino)
{
	return cfs_vfs_scan_queue(v, ino, 0);
}

int cfs_vfs_scan_queue(struct cfs_vfs *v, uint64_t ino, int any_size)
{
	struct blob_ref b;
	if (blob_of(v, ino, &b))
		return 0;
	struct cfs_reader_file rf = cfs_vfs_reader_file(&b);
	if (any_size && (uint64_t)b.size > v->scan.small_max) {
		int rc = cfs_reader_prefetch(v->reader, &rf);
		return rc ? rc : 1;
	}
	return cfs_reader_scan(v->reader, &rf);
}

/* scan lock held (dropped around each hand-over).  Queues the run's next
 * files while the reader takes them and the bytes ahead allow. */
static void run_fill(struct cfs_vfs *v, struct cfs_vfs_scanner *s, struct scan_run *r)
{
	while (r->next < r->n && r->ahead < s->ahead_max && !s->stop) {
		size_t i = r->next;
		if (r->state[i] != ST_NEW) {
			r->next++;
			continue;
		}
		pthread_mutex_unlock(&s->lock);
		int rc = queue_file(v, r->items[i].ino);
		pthread_mutex_lock(&s->lock);
		if (rc == -EBUSY)
			return;
		r->next++;
		if (rc == 1 && r->state[i] == ST_NEW) {
			r->state[i] = ST_QUEUED;
			r->ahead += r->items[i].size;
			s->st.files++;
			s->st.bytes += r->items[i].size;
		}
	}
}

/* scan lock held: the run ends; what it queued and nobody opened is waste. */
static void run_end(struct cfs_vfs_scanner *s, int k, const char *why)
{
	struct scan_run *r = s->runs[k];
	s->runs[k] = NULL;
	if (!r)
		return;
	s->st.wasted += r->ahead;
	CFS_INFO("dataset scan of folder %llu ended (%s): %zu of %zu files handed out, "
		 "%llu bytes fetched ahead and not opened",
		 (unsigned long long)r->root, why, r->next, r->n, (unsigned long long)r->ahead);
	run_free(r);
}

static struct scan_run *run_of(struct cfs_vfs_scanner *s, uint64_t root)
{
	for (int k = 0; root && k < CFS_SCAN_TREES; k++)
		if (s->runs[k] && s->runs[k]->root == root)
			return s->runs[k];
	return NULL;
}

/* scan lock held: child of sibling run r has an opened file; its files are
 * added by the scanner (do_joins), once.  A full queue forgets it: the
 * next open there asks again. */
static void join(struct cfs_vfs_scanner *s, struct scan_run *r, uint64_t child, uint64_t opened)
{
	if (!r->siblings || cfs_u64map_get(&r->joined, child, NULL) || s->njoin >= CFS_VFS_JOINQ ||
	    cfs_u64map_put(&r->joined, child, 0))
		return;
	s->joinq[s->njoin++] = (struct cfs_vfs_join){ r->root, child, opened };
	pthread_cond_signal(&s->cond);
}

/* scan lock held: the sibling scan r widens to its whole root. */
static void widen(struct cfs_vfs_scanner *s, struct scan_run *r)
{
	if (!r->siblings)
		return;
	r->siblings = 0;
	r->widen = 1;
	pthread_cond_signal(&s->cond);
}

/* scan lock held (dropped while listing): adds to run r the small files
 * below folder top; opened (0: none) is the reader's already. */
static void run_add(struct cfs_vfs *v, struct cfs_vfs_scanner *s, uint64_t root, uint64_t top,
		    uint64_t opened)
{
	struct item_list x = { 0 };
	pthread_mutex_unlock(&s->lock);
	int rc = list_folders(v, &top, 1, s->small_max, &x);
	pthread_mutex_lock(&s->lock);
	struct scan_run *r = run_of(s, root); /* it may have ended meanwhile */
	size_t before = r ? r->n : 0;
	long i = r && !rc && run_merge(r, &x) == 0 ? run_find(r, opened) : -1;
	if (i >= 0 && r->state[i] == ST_NEW)
		r->state[i] = ST_READER;
	if (r && r->n > before)
		CFS_INFO("dataset scan of folder %llu: %zu small files of folder %llu added",
			 (unsigned long long)root, r->n - before, (unsigned long long)top);
	free(x.v);
}

/* scan lock held: the children that joined and the widenings, applied. */
static void do_joins(struct cfs_vfs *v, struct cfs_vfs_scanner *s)
{
	for (int k = 0; k < CFS_SCAN_TREES; k++)
		if (s->runs[k] && s->runs[k]->widen) {
			s->runs[k]->widen = 0;
			run_add(v, s, s->runs[k]->root, s->runs[k]->root, 0);
		}
	while (s->njoin > 0 && !s->stop) {
		struct cfs_vfs_join j = s->joinq[--s->njoin];
		run_add(v, s, j.root, j.child, j.opened);
	}
}

/* scan lock held (dropped while listing): builds the runs of the scans
 * that started, a sibling scan's of the children opened so far. */
static void build_pending(struct cfs_vfs *v, struct cfs_vfs_scanner *s)
{
	for (int k = 0; k < CFS_SCAN_TREES; k++) {
		uint64_t root = s->pending[k], tops[SIB_MAX];
		if (!root)
			continue;
		s->pending[k] = 0;
		int sib = cfs_scan_sibling_scan(&s->det, root);
		int ntops = sib ? cfs_scan_siblings(&s->det, root, cfs_vfs_now_ms(), tops, SIB_MAX) : 0;
		pthread_mutex_unlock(&s->lock);
		struct scan_run *r = run_build(v, root, sib, tops, ntops, s->small_max);
		pthread_mutex_lock(&s->lock);
		int slot = -1;
		for (int j = 0; j < CFS_SCAN_TREES && r; j++)
			if (!s->runs[j] && slot < 0)
				slot = j;
		if (!r || slot < 0 || !cfs_scan_running(&s->det, root)) {
			run_free(r);
			continue;
		}
		s->runs[slot] = r;
		for (unsigned i = 0; i < s->nearly && i < CFS_VFS_JOINQ; i++) {
			long at = s->early[i].root == root ? run_find(r, s->early[i].opened) : -1;
			if (at >= 0)
				r->state[at] = ST_READER;
		}
		CFS_INFO("dataset scan of folder %llu: %zu small files below %s", (unsigned long long)root,
			 r->n, sib ? "the children with an opened file" : "it");
		/* what changed while it was being built */
		if (sib && !cfs_scan_sibling_scan(&s->det, root))
			widen(s, r);
		ntops = sib ? cfs_scan_siblings(&s->det, root, cfs_vfs_now_ms(), tops, SIB_MAX) : 0;
		for (int i = 0; i < ntops; i++)
			join(s, r, tops[i], 0);
	}
	int building = 0;
	for (int k = 0; k < CFS_SCAN_TREES; k++)
		building |= s->pending[k] != 0;
	if (!building)
		s->nearly = 0;
}

static void *scanner(void *arg)
{
	struct cfs_vfs *v = arg;
	struct cfs_vfs_scanner *s = &v->scan;
	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		uint64_t root;
		while ((root = cfs_scan_expire(&s->det, cfs_vfs_now_ms()))) {
			for (int k = 0; k < CFS_SCAN_TREES; k++)
				if (s->runs[k] && s->runs[k]->root == root)
					run_end(s, k, "readers stopped");
			for (int k = 0; k < CFS_SCAN_TREES; k++)
				if (s->pending[k] == root)
					s->pending[k] = 0;
			if (!cfs_scan_count(&s->det) && !s->hint)
				cfs_reader_scan_cancel(v->reader);
		}
		build_pending(v, s);
		do_joins(v, s);
		cfs_vfs_hint_fill(v); /* an order hint first: it is sure */
		for (int k = 0; k < CFS_SCAN_TREES; k++)
			if (s->runs[k])
				run_fill(v, s, s->runs[k]);
		cfs_vfs_wait_ms(&s->cond, &s->lock, TICK_MS);
	}
	for (int k = 0; k < CFS_SCAN_TREES; k++)
		run_end(s, k, "unmount");
	cfs_vfs_hint_end(v, "unmount");
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* scan lock held: the scanner thread runs (started at the first need). */
void cfs_vfs_scan_thread(struct cfs_vfs *v)
{
	struct cfs_vfs_scanner *s = &v->scan;
	if (!s->started && pthread_create(&s->thread, NULL, scanner, v) == 0)
		s->started = 1;
	pthread_cond_signal(&s->cond);
}

/* ---- the open hook ----------------------------------------------------------- */

/* Queues the small files at listing positions [from, to) of folder dir
 * (listing-order advice); gives back to the detector what did not fit. */
static void queue_order(struct cfs_vfs *v, uint64_t dir, size_t from, size_t to)
{
	uint64_t inos[ORDER_BATCH];
	size_t n = 0, pos = from;
	cfs_inode_lock(v->tab);
	struct cfs_node *p = cfs_inode_get(v->tab, dir);
	struct cfs_listing *l = p && p->dir ? p->dir->listing : NULL;
	for (; l && pos < to && pos < l->n && n < ORDER_BATCH; pos++) {
		struct cfs_node *x = cfs_inode_get(v->tab, l->e[pos].ino);
		if (x && !x->is_dir && !x->export_mime[0] && x->size > 0 &&
		    (uint64_t)x->size <= v->scan.small_max)
			inos[n++] = x->ino;
	}
	cfs_inode_unlock(v->tab);
	size_t done = 0;
	int rc = 0;
	for (; done < n && rc != -EBUSY; done++)
		if ((rc = queue_file(v, inos[done])) == 1)
			__atomic_add_fetch(&v->scan.st.order_files, 1, __ATOMIC_RELAXED);
	if (rc == -EBUSY || pos < to) {
		pthread_mutex_lock(&v->scan.lock);
		/* not handed out: from the first file refused, or where the batch stopped */
		cfs_scan_ahead_undo(&v->scan.det, dir, rc == -EBUSY ? from : pos);
		pthread_mutex_unlock(&v->scan.lock);
	}
}

/* The detector's view of an open of file ino: its listing position and the
 * folders above it (none when its folder's listing is not in memory). */
static void event_of(struct cfs_vfs *v, uint64_t ino, struct cfs_scan_event *ev)
{
	struct cfs_scan_event e = { .file = ino, .now_ms = cfs_vfs_now_ms() };
	cfs_inode_lock(v->tab);
	struct cfs_node *n = cfs_inode_get(v->tab, ino);
	struct cfs_node *p = n ? cfs_inode_get(v->tab, n->parent) : NULL;
	if (p && p->dir && p->dir->listing) {
		struct cfs_listing *l = p->dir->listing;
		e.pos = n->lpos < l->n && l->e[n->lpos].ino == ino ? n->lpos : (size_t)-2;
		for (uint64_t a = n->parent; e.nanc < CFS_SCAN_DEPTH;) {
			e.anc[e.nanc++] = a;
			struct cfs_node *x = a == CFS_ROOT_INO ? NULL : cfs_inode_get(v->tab, a);
			if (!x)
				break;
			a = x->parent;
		}
	}
	cfs_inode_unlock(v->tab);
	*ev = e;
}

void cfs_vfs_scan_open(struct cfs_vfs *v, uint64_t ino, uint32_t pid,
		       struct cfs_vfs_scan_ref *ref)
{
	struct cfs_vfs_scanner *s = &v->scan;
	struct cfs_scan_event e;
	ref->nanc = 0;
	if (s->disabled)
		return;
	if (__atomic_load_n(&s->hint, __ATOMIC_RELAXED)) {
		pthread_mutex_lock(&s->lock);
		int hinted = cfs_vfs_hint_open(v, ino); /* the reader follows its order hint */
		pthread_mutex_unlock(&s->lock);
		if (hinted)
			return;
	}
	event_of(v, ino, &e);
	e.pid = pid;
	if (!e.nanc)
		return;
	memcpy(ref->anc, e.anc, sizeof(ref->anc));
	ref->nanc = e.nanc;
	struct cfs_scan_advice a;
	pthread_mutex_lock(&s->lock);
	cfs_scan_open(&s->det, &e, &a);
	if (a.start) {
		s->st.scans++;
		for (int k = 0; k < CFS_SCAN_TREES; k++)
			if (!s->pending[k]) {
				s->pending[k] = a.start;
				break;
			}
		CFS_INFO("dataset scan of folder %llu starts: many files %s opened at once",
			 (unsigned long long)a.start,
			 a.siblings ? "in folders inside it" : "below it");
		cfs_vfs_scan_thread(v);
	}
	struct scan_run *r = run_of(s, a.tree);
	if (a.tree && !r) /* its run is being built: this file is the reader's */
		s->early[s->nearly++ % CFS_VFS_JOINQ] = (struct cfs_vfs_join){ a.tree, 0, ino };
	if (r && a.widen)
		widen(s, r);
	else if (r && a.join)
		join(s, r, a.join, ino);
	long i = r ? run_find(r, ino) : -1;
	if (i >= 0 && r->state[i] == ST_QUEUED) {
		r->ahead -= r->items[i].size;
		s->st.used += r->items[i].size;
		r->state[i] = ST_USED;
		pthread_cond_signal(&s->cond); /* room ahead again */
	} else if (i >= 0 && r->state[i] == ST_NEW) {
		r->state[i] = ST_READER;
	}
	pthread_mutex_unlock(&s->lock);
	if (a.ahead_to > a.ahead_from)
		queue_order(v, e.anc[0], a.ahead_from, a.ahead_to);
}

void cfs_vfs_scan_close(struct cfs_vfs *v, const struct cfs_vfs_scan_ref *ref)
{
	pthread_mutex_lock(&v->scan.lock);
	cfs_scan_close(&v->scan.det, ref->anc, ref->nanc);
	pthread_mutex_unlock(&v->scan.lock);
}

void cfs_vfs_scan_rewind(struct cfs_vfs *v)
{
	struct cfs_vfs_scanner *s = &v->scan;
	pthread_mutex_lock(&s->lock);
	for (int k = 0; k < CFS_SCAN_TREES; k++) {
		struct scan_run *r = s->runs[k];
		size_t end = r ? r->next : 0, first = end;
		for (size_t i = 0; i < end; i++) {
			if (r->state[i] != ST_QUEUED)
				continue;
			r->state[i] = ST_NEW;
			r->ahead -= r->items[i].size; /* counters stay: they only grow */
			if (i < first)
				first = i;
		}
		if (r)
			r->next = first;
	}
	cfs_vfs_hint_rewind(v);
	pthread_mutex_unlock(&s->lock);
}

/* ---- life cycle and stats -------------------------------------------------------- */

void cfs_vfs_scan_init(struct cfs_vfs *v, int disabled, int whole_drive)
{
	struct cfs_vfs_scanner *s = &v->scan;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	/* a mount of a whole drive: its top folder is no dataset */
	struct cfs_scan_opts o = { .no_tree = whole_drive ? CFS_ROOT_INO : 0 };
	cfs_scan_init(&s->det, &o);
	s->disabled = disabled;
	s->small_max = cfs_reader_small_max(v->reader);
	s->ahead_max = cfs_store_budget(v->store) / 4;
	if (s->ahead_max < s->small_max)
		s->ahead_max = s->small_max;
	s->hint_ahead_max = cfs_store_budget(v->store) / 2; /* >= 8 MiB: a budget is >= 16 MiB */
	if (!s->hint_ahead_max)
		s->hint_ahead_max = s->small_max;
}

void cfs_vfs_scan_cleanup(struct cfs_vfs *v)
{
	struct cfs_vfs_scanner *s = &v->scan;
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (s->started)
		pthread_join(s->thread, NULL);
	cfs_hint_free(s->hint); /* NULL unless the thread never started */
	s->hint = NULL;
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
}

void cfs_vfs_scan_stats(struct cfs_vfs *v, struct cfs_vfs_scan_stats *out)
{
	struct cfs_vfs_scanner *s = &v->scan;
	pthread_mutex_lock(&s->lock);
	*out = s->st;
	out->order_files = __atomic_load_n(&s->st.order_files, __ATOMIC_RELAXED);
	out->running = (uint64_t)cfs_scan_count(&s->det);
	out->ahead = 0;
	for (int k = 0; k < CFS_SCAN_TREES; k++)
		if (s->runs[k])
			out->ahead += s->runs[k]->ahead;
	if (s->hint) {
		struct cfs_hint_stats hs;
		cfs_hint_stats(s->hint, cfs_vfs_now_ms(), &hs);
		out->hint_used += hs.used_bytes;
		out->hint_wasted += hs.skipped_bytes;
		out->hint_ahead = hs.ahead;
		out->hint_window = hs.window;
		out->hint_files_left = hs.n - hs.done;
	}
	pthread_mutex_unlock(&s->lock);
}
