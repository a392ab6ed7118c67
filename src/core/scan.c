/* scan: dataset scan detection (see scan.h for the policy). */
#include "scan.h"

#include <string.h>

void cfs_scan_init(struct cfs_scan *s, const struct cfs_scan_opts *o)
{
	memset(s, 0, sizeof(*s));
	if (o)
		s->o = *o;
	if (!s->o.trigger)
		s->o.trigger = 24;
	if (s->o.trigger > CFS_SCAN_RECENT)
		s->o.trigger = CFS_SCAN_RECENT;
	if (s->o.window_ms <= 0)
		s->o.window_ms = 30000;
	if (s->o.idle_ms <= 0)
		s->o.idle_ms = 3000;
	if (!s->o.order_ahead)
		s->o.order_ahead = 3;
	if (!s->o.order_max)
		s->o.order_max = 512;
	if (!s->o.overlap_min)
		s->o.overlap_min = 4;
	if (!s->o.sib_min)
		s->o.sib_min = 3;
	if (s->o.sib_window_ms <= 0)
		s->o.sib_window_ms = 10000;
}

static struct cfs_scan_slot *slot_find(struct cfs_scan *s, uint64_t folder)
{
	for (int i = 0; i < CFS_SCAN_SLOTS; i++)
		if (s->slots[i].folder == folder)
			return &s->slots[i];
	return NULL;
}

/* The slot of folder, made (from a free or the least recently used one)
 * when it has none; its count restarts when its window has passed. */
static struct cfs_scan_slot *slot_get(struct cfs_scan *s, uint64_t folder, int64_t now)
{
	struct cfs_scan_slot *x = slot_find(s, folder);
	if (!x) {
		x = &s->slots[0];
		for (int i = 0; i < CFS_SCAN_SLOTS && x->folder; i++)
			if (!s->slots[i].folder || s->slots[i].last_ms < x->last_ms)
				x = &s->slots[i];
		memset(x, 0, sizeof(*x));
		x->folder = folder;
		x->first_ms = x->last_ms = now;
	}
	if (now - x->last_ms > s->o.window_ms) {
		x->count = x->nrecent = x->overlaps = 0;
		x->first_ms = now;
	}
	x->last_ms = now;
	return x;
}

/* Counts file below x once (opened at now); returns the count. */
static unsigned slot_count(struct cfs_scan_slot *x, uint64_t file, int64_t now)
{
	unsigned n = x->nrecent < CFS_SCAN_RECENT ? x->nrecent : CFS_SCAN_RECENT;
	for (unsigned i = 0; i < n; i++)
		if (x->recent[i] == file) {
			x->recent_ms[i] = now;
			return x->count;
		}
	x->recent_ms[x->nrecent % CFS_SCAN_RECENT] = now;
	x->recent[x->nrecent % CFS_SCAN_RECENT] = file;
	x->nrecent++;
	return ++x->count;
}

/* Distinct files below x opened since `since` (of those it remembers). */
static unsigned slot_since(const struct cfs_scan_slot *x, int64_t since)
{
	unsigned n = x->nrecent < CFS_SCAN_RECENT ? x->nrecent : CFS_SCAN_RECENT, k = 0;
	for (unsigned i = 0; i < n; i++)
		k += x->recent_ms[i] >= since;
	return k;
}

/* The running scan an open belongs to: below a tree's root, or directly in
 * a child of a sibling scan's root. */
static struct cfs_scan_tree *tree_of(struct cfs_scan *s, const struct cfs_scan_event *e)
{
	for (int t = 0; t < CFS_SCAN_TREES; t++) {
		struct cfs_scan_tree *x = &s->trees[t];
		if (x->root && x->siblings && e->nanc >= 2 && e->anc[1] == x->root)
			return x;
		for (int i = 0; x->root && !x->siblings && i < e->nanc; i++)
			if (x->root == e->anc[i])
				return x;
	}
	return NULL;
}

/* The distinct files below x that start a scan of it. */
static unsigned need_of(const struct cfs_scan *s, const struct cfs_scan_slot *x)
{
	return x->overlaps >= s->o.overlap_min ? (s->o.trigger + 1) / 2 : s->o.trigger;
}

/* The children of parent with a file opened within sib_window_ms (a file
 * read a while before a dataset started does not bring its folder in): how
 * many (the first cap of them into out). */
static int siblings(const struct cfs_scan *s, uint64_t parent, int64_t now_ms, uint64_t *out,
		    int cap)
{
	int n = 0;
	for (int i = 0; i < CFS_SCAN_SLOTS; i++) {
		const struct cfs_scan_slot *x = &s->slots[i];
		if (parent && x->folder && x->parent == parent && x->count &&
		    now_ms - x->last_ms <= s->o.sib_window_ms) {
			if (n < cap)
				out[n] = x->folder;
			n++;
		}
	}
	return n;
}

int cfs_scan_siblings(const struct cfs_scan *s, uint64_t parent, int64_t now_ms, uint64_t *out,
		      int cap)
{
	int n = siblings(s, parent, now_ms, out, cap);
	return n < cap ? n : cap;
}

/* An open in running scan t: a sibling scan learns the child it was in, and
 * widens to its whole root when that crosses the tree count. */
static void in_tree(struct cfs_scan *s, struct cfs_scan_tree *t, struct cfs_scan_slot **xs,
		    const struct cfs_scan_event *e, struct cfs_scan_advice *a)
{
	t->last_ms = e->now_ms;
	t->opens++;
	a->tree = t->root;
	if (!t->siblings)
		return;
	struct cfs_scan_slot *p = xs[1]; /* a member's parent's parent is the root */
	a->join = e->anc[0];
	slot_count(xs[0], e->file, e->now_ms); /* cfs_scan_siblings lists it */
	if (t->root != s->o.no_tree && slot_count(p, e->file, e->now_ms) >= need_of(s, p)) {
		t->siblings = 0;
		a->widen = t->root;
		p->count = p->nrecent = p->overlaps = 0;
	}
}

/* Starts a scan of root (a sibling scan with siblings) in a free place, if
 * any; its slot x counts afresh (a sibling scan's root keeps counting
 * towards its widening). */
static void start(struct cfs_scan *s, struct cfs_scan_slot *x, uint64_t root, int sib,
		  int64_t now, struct cfs_scan_advice *a)
{
	for (int k = 0; k < CFS_SCAN_TREES; k++) {
		if (s->trees[k].root)
			continue;
		s->trees[k] = (struct cfs_scan_tree){ root, now, now, 1, sib };
		a->start = a->tree = root;
		a->siblings = sib;
		if (!sib)
			x->count = x->nrecent = x->overlaps = 0;
		return;
	}
}

/* Listing order in the parent: the positions to fetch ahead, if any. */
static void order(struct cfs_scan *s, struct cfs_scan_slot *p, const struct cfs_scan_event *e,
		  struct cfs_scan_advice *a)
{
	size_t pos = e->pos + 1; /* last_pos counts from 1 */
	if (p->last_pos && pos > p->last_pos && pos <= p->last_pos + 3)
		p->streak++;
	else if (pos != p->last_pos)
		p->streak = p->ahead = 0; /* a jump: what was handed out ahead is not followed */
	p->last_pos = pos;
	if (!p->streak)
		return;
	size_t want = (size_t)s->o.order_ahead * p->streak;
	if (want > s->o.order_max)
		want = s->o.order_max;
	size_t from = p->ahead > pos ? p->ahead : pos;
	size_t to = pos + want;
	if (to <= from)
		return;
	a->ahead_from = from;
	a->ahead_to = to;
	p->ahead = to;
}

void cfs_scan_open(struct cfs_scan *s, const struct cfs_scan_event *e, struct cfs_scan_advice *a)
{
	memset(a, 0, sizeof(*a));
	if (e->nanc <= 0)
		return;
	int64_t now = e->now_ms;
	order(s, slot_get(s, e->anc[0], now), e, a);
	struct cfs_scan_slot *xs[CFS_SCAN_DEPTH];
	int nanc = e->nanc < CFS_SCAN_DEPTH ? e->nanc : CFS_SCAN_DEPTH;
	for (int i = 0; i < nanc; i++) {
		xs[i] = slot_get(s, e->anc[i], now);
		xs[i]->parent = i + 1 < e->nanc ? e->anc[i + 1] : 0;
		xs[i]->overlaps += xs[i]->open_now > 0 && e->pid && e->pid != xs[i]->last_pid;
		xs[i]->open_now++;
		xs[i]->last_pid = e->pid;
	}
	struct cfs_scan_tree *t = tree_of(s, e);
	if (t) {
		in_tree(s, t, xs, e, a);
		return;
	}
	int deepest = -1;
	unsigned got[CFS_SCAN_DEPTH];
	for (int i = 0; i < nanc; i++) {
		got[i] = slot_count(xs[i], e->file, now);
		if (got[i] >= need_of(s, xs[i]) && deepest < 0 && e->anc[i] != s->o.no_tree)
			deepest = i;
	}
	/* many siblings opened, half the count: only they, before the count */
	if (nanc >= 2 && got[1] >= (need_of(s, xs[1]) + 1) / 2 &&
	    slot_since(xs[1], now - s->o.sib_window_ms) >= (need_of(s, xs[1]) + 1) / 2 &&
	    siblings(s, e->anc[1], now, NULL, 0) >= (int)s->o.sib_min)
		start(s, xs[1], e->anc[1], 1, now, a);
	else if (deepest >= 0)
		start(s, xs[deepest], e->anc[deepest], 0, now, a);
}

void cfs_scan_close(struct cfs_scan *s, const uint64_t *anc, int nanc)
{
	for (int i = 0; i < nanc && i < CFS_SCAN_DEPTH; i++) {
		struct cfs_scan_slot *x = slot_find(s, anc[i]);
		if (x && x->open_now) /* a slot reused since the open has nothing to undo */
			x->open_now--;
	}
}

void cfs_scan_ahead_undo(struct cfs_scan *s, uint64_t folder, size_t pos)
{
	struct cfs_scan_slot *x = slot_find(s, folder);
	if (x && x->ahead > pos)
		x->ahead = pos;
}

uint64_t cfs_scan_expire(struct cfs_scan *s, int64_t now_ms)
{
	for (int t = 0; t < CFS_SCAN_TREES; t++) {
		struct cfs_scan_tree *x = &s->trees[t];
		if (x->root && now_ms - x->last_ms > s->o.idle_ms) {
			uint64_t root = x->root;
			memset(x, 0, sizeof(*x));
			return root;
		}
	}
	return 0;
}

int cfs_scan_running(const struct cfs_scan *s, uint64_t root)
{
	for (int t = 0; t < CFS_SCAN_TREES; t++)
		if (root && s->trees[t].root == root)
			return 1;
	return 0;
}

int cfs_scan_sibling_scan(const struct cfs_scan *s, uint64_t root)
{
	for (int t = 0; t < CFS_SCAN_TREES; t++)
		if (root && s->trees[t].root == root)
			return s->trees[t].siblings;
	return 0;
}

int cfs_scan_count(const struct cfs_scan *s)
{
	int n = 0;
	for (int t = 0; t < CFS_SCAN_TREES; t++)
		n += s->trees[t].root != 0;
	return n;
}
