/* vfs_scan: dataset read-ahead (see vfs_int.h).  scan.h decides when; this
 * part does it.
 *
 * Every open of a regular file is told to the detector with the file's
 * listing position and the folders above it.  Listing-order advice queues
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
 * Counters for `colabfs stats`. */
#include "vfs_int.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store.h"

#define TREE_DEPTH 16          /* folder levels a tree scan descends */
#define TREE_FILES (1u << 22)  /* files a tree scan lists, at most */
#define ORDER_BATCH 64         /* listing-order files queued by one open, at most */
#define TICK_MS 50

enum { ST_NEW, ST_QUEUED, ST_USED, ST_READER };

struct scan_item {
	uint64_t ino;
	uint64_t size;
};

struct scan_run {
	uint64_t root;
	struct scan_item *items; /* listing order */
	uint32_t *by_ino;        /* item indexes sorted by ino */
	unsigned char *state;
	size_t n, next;
	uint64_t ahead;          /* bytes queued by the scan, not opened yet */
};

static void run_free(struct scan_run *r)
{
	if (!r)
		return;
	free(r->items);
	free(r->by_ino);
	free(r->state);
	free(r);
}

/* ---- building a run (table lock held) ------------------------------------ */

static int item_add(struct scan_run *r, size_t *cap, uint64_t ino, uint64_t size)
{
	if (r->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 1024;
		struct scan_item *x = realloc(r->items, nc * sizeof(*x));
		if (!x)
			return -ENOMEM;
		r->items = x;
		*cap = nc;
	}
	r->items[r->n++] = (struct scan_item){ ino, size };
	return 0;
}

/* The small files below root, depth first in listing order. */
static int run_list(struct cfs_vfs *v, struct scan_run *r, uint64_t small_max)
{
	struct frame {
		struct cfs_listing *l;
		size_t i;
	} stack[TREE_DEPTH];
	int depth = 0, rc = 0;
	size_t cap = 0;
	struct cfs_node *root = cfs_inode_get(v->tab, r->root);
	if (!root || !root->dir || !root->dir->listing)
		return 0;
	stack[depth++] = (struct frame){ root->dir->listing, 0 };
	while (depth && !rc && r->n < TREE_FILES) {
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
			rc = item_add(r, &cap, n->ino, (uint64_t)n->size);
		}
	}
	return rc;
}

static const struct scan_item *sort_items;
static int by_ino_cmp(const void *a, const void *b)
{
	uint64_t x = sort_items[*(const uint32_t *)a].ino, y = sort_items[*(const uint32_t *)b].ino;
	return x < y ? -1 : x > y;
}

/* Builds the run for root (lock not held); NULL without memory. */
static struct scan_run *run_build(struct cfs_vfs *v, uint64_t root, uint64_t small_max)
{
	struct scan_run *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->root = root;
	cfs_inode_lock(v->tab);
	int rc = run_list(v, r, small_max);
	cfs_inode_unlock(v->tab);
	if (!rc && r->n) {
		r->by_ino = malloc(r->n * sizeof(*r->by_ino));
		r->state = calloc(r->n, 1);
		rc = r->by_ino && r->state ? 0 : -ENOMEM;
	}
	if (rc) {
		run_free(r);
		return NULL;
	}
	for (size_t i = 0; i < r->n; i++)
		r->by_ino[i] = (uint32_t)i;
	sort_items = r->items; /* only the scanner thread sorts */
	qsort(r->by_ino, r->n, sizeof(*r->by_ino), by_ino_cmp);
	return r;
}

static long run_find(const struct scan_run *r, uint64_t ino)
{
	size_t lo = 0, hi = r->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		uint64_t x = r->items[r->by_ino[mid]].ino;
		if (x == ino)
			return r->by_ino[mid];
		if (x < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
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
	struct blob_ref b;
	if (blob_of(v, ino, &b))
		return 0;
	struct cfs_reader_file rf = cfs_vfs_reader_file(&b);
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
			if (!cfs_scan_count(&s->det))
				cfs_reader_scan_cancel(v->reader);
		}
		for (int k = 0; k < CFS_SCAN_TREES; k++) {
			if (!(root = s->pending[k]))
				continue;
			s->pending[k] = 0;
			pthread_mutex_unlock(&s->lock);
			struct scan_run *r = run_build(v, root, s->small_max);
			pthread_mutex_lock(&s->lock);
			int slot = -1;
			for (int j = 0; j < CFS_SCAN_TREES && r; j++)
				if (!s->runs[j] && slot < 0)
					slot = j;
			if (r && slot >= 0 && cfs_scan_running(&s->det, root)) {
				s->runs[slot] = r;
				CFS_INFO("dataset scan of folder %llu: %zu small files below it",
					 (unsigned long long)root, r->n);
			} else {
				run_free(r);
			}
		}
		for (int k = 0; k < CFS_SCAN_TREES; k++)
			if (s->runs[k])
				run_fill(v, s, s->runs[k]);
		cfs_vfs_wait_ms(&s->cond, &s->lock, TICK_MS);
	}
	for (int k = 0; k < CFS_SCAN_TREES; k++)
		run_end(s, k, "unmount");
	pthread_mutex_unlock(&s->lock);
	return NULL;
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
		if (!s->started && pthread_create(&s->thread, NULL, scanner, v) == 0)
			s->started = 1;
		CFS_INFO("dataset scan of folder %llu starts: many files below it opened at once",
			 (unsigned long long)a.start);
		pthread_cond_signal(&s->cond);
	}
	for (int k = 0; a.tree && k < CFS_SCAN_TREES; k++) {
		struct scan_run *r = s->runs[k];
		long i = r && r->root == a.tree ? run_find(r, ino) : -1;
		if (i < 0)
			continue;
		if (r->state[i] == ST_QUEUED) {
			r->ahead -= r->items[i].size;
			s->st.used += r->items[i].size;
			r->state[i] = ST_USED;
			pthread_cond_signal(&s->cond); /* room ahead again */
		} else if (r->state[i] == ST_NEW) {
			r->state[i] = ST_READER;
		}
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
	pthread_mutex_unlock(&s->lock);
}
