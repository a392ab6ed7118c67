/* Unit tests: the dataset scan detector, on recorded open traces. */
#include <stdlib.h>

#include "check.h"
#include "scan.h"

#define ROOT 1

/* An open of file (listing position pos) in folder parent, below the given
 * folders (grand is 0 when the parent is the root), left open. */
static uint32_t opener = 100; /* the process opening */

static void open_keep(struct cfs_scan *s, uint64_t file, size_t pos, uint64_t parent,
		      uint64_t grand, int64_t now, struct cfs_scan_advice *a)
{
	struct cfs_scan_event e = { .file = file, .pid = opener, .pos = pos, .now_ms = now };
	e.anc[e.nanc++] = parent;
	if (grand)
		e.anc[e.nanc++] = grand;
	if (grand && grand != ROOT)
		e.anc[e.nanc++] = ROOT;
	cfs_scan_open(s, &e, a);
}

/* The same, closed at once: a reader going file by file. */
static void open_at(struct cfs_scan *s, uint64_t file, size_t pos, uint64_t parent,
		    uint64_t grand, int64_t now, struct cfs_scan_advice *a)
{
	open_keep(s, file, pos, parent, grand, now, a);
	uint64_t anc[3] = { parent, grand, ROOT };
	cfs_scan_close(s, anc, !grand ? 1 : grand == ROOT ? 2 : 3);
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Reading the first 20 files of a 10,000-file folder in order hands out at
 * most 60 files past them and starts no scan. */
static void first_twenty_in_order(void)
{
	struct cfs_scan s;
	cfs_scan_init(&s, NULL);
	size_t handed = 0, prev_to = 0;
	for (size_t i = 0; i < 20; i++) {
		struct cfs_scan_advice a;
		open_at(&s, 1000 + i, i, 10, ROOT, (int64_t)i * 200, &a);
		CHECK_EQ(a.start, 0);
		if (a.ahead_to > a.ahead_from) {
			CHECK(a.ahead_from > i);         /* ahead of the reader */
			CHECK(a.ahead_from >= prev_to);  /* never the same position twice */
			handed += a.ahead_to - a.ahead_from;
			prev_to = a.ahead_to;
		}
		if (i == 0)
			CHECK_EQ(a.ahead_to, 0); /* one open is no streak */
	}
	/* files beyond the 20 read: at most 60, so under 80 downloads in all */
	CHECK(handed > 0 && prev_to > 20 && prev_to - 20 <= 60);
	CHECK_EQ(cfs_scan_count(&s), 0);
}

/* 20 files picked at random (a notebook showing samples) start nothing. */
static void twenty_random(void)
{
	struct cfs_scan s;
	cfs_scan_init(&s, NULL);
	for (int i = 0; i < 20; i++) {
		struct cfs_scan_advice a;
		size_t pos = (size_t)(next_rand() % 5000);
		open_at(&s, 1000 + pos, pos, 10, ROOT, i * 300, &a);
		CHECK_EQ(a.start, 0);
	}
	CHECK_EQ(cfs_scan_count(&s), 0);
}

/* A shuffled DataLoader over an ImageFolder tree (20 classes of 100 files
 * under folder 5): at the 12th distinct file, spread over several classes,
 * a sibling scan of folder 5 starts (only the classes opened so far, then
 * each class at its first open); at the 24th it widens to all of folder 5,
 * as issue 11's tree scan did (not a class folder, not the root); later
 * opens are in its tree. */
static void imagefolder_shuffled(void)
{
	struct cfs_scan s;
	cfs_scan_init(&s, NULL);
	int started_at = -1, widened_at = -1;
	uint64_t tree = 0;
	for (int i = 0; i < 200; i++) {
		int k = (int)(next_rand() % 2000);
		struct cfs_scan_advice a;
		uint64_t cls = 100 + (uint64_t)(k / 100);
		open_at(&s, 10000 + (uint64_t)k, (size_t)(k % 100), cls, 5, i * 5, &a);
		if (a.start && started_at < 0) {
			started_at = i;
			tree = a.start;
			CHECK_EQ(a.siblings, 1);
			uint64_t kids[CFS_SCAN_SLOTS];
			int n = cfs_scan_siblings(&s, 5, i * 5, kids, CFS_SCAN_SLOTS);
			CHECK(n >= 3 && n <= 12);
			for (int j = 0; j < n; j++)
				CHECK(kids[j] >= 100 && kids[j] < 120);
		}
		if (a.widen) {
			CHECK_EQ(widened_at, -1);
			CHECK_EQ(a.widen, 5);
			widened_at = i;
		}
		if (started_at >= 0 && i > started_at) {
			CHECK_EQ(a.tree, 5);
			CHECK_EQ(a.start, 0);
			CHECK_EQ(a.join, widened_at >= 0 && i > widened_at ? 0 : cls);
		}
	}
	CHECK(started_at >= 11 && started_at <= 13); /* 12 distinct (repeats are rare) */
	CHECK(widened_at >= 23 && widened_at <= 26); /* 24 distinct */
	CHECK_EQ(tree, 5);
	CHECK(cfs_scan_running(&s, 5));
	CHECK_EQ(cfs_scan_count(&s), 1);
	/* idle: it ends idle_ms after the last open, not before */
	CHECK_EQ(cfs_scan_expire(&s, 199 * 5 + 3000), 0);
	CHECK_EQ(cfs_scan_expire(&s, 199 * 5 + 3001), 5);
	CHECK_EQ(cfs_scan_count(&s), 0);
}

/* Class folders at the top of a whole-drive mount (no tree there), beside
 * unrelated folders, read shuffled by two workers: a sibling scan of the
 * top starts after a handful of files, lists only classes with an opened
 * file, joins each further class at its first open, never widens to the
 * whole drive, and never names an unrelated folder. */
static void top_of_drive_classes(void)
{
	struct cfs_scan_opts o = { .no_tree = ROOT };
	struct cfs_scan s;
	cfs_scan_init(&s, &o);
	uint64_t anc[2] = { 0, ROOT };
	int opened[10] = { 0 }, joined[10] = { 0 }, started_at = -1;
	struct cfs_scan_advice a;
	/* a notebook read a file of an unrelated folder 15 s before the epoch */
	open_at(&s, 40000, 0, 400, ROOT, -15000, &a);
	CHECK_EQ(a.start, 0);
	for (int i = 0; i < 1000; i++) {
		int k = (int)(next_rand() % 1000);
		uint64_t cls = 300 + (uint64_t)(k / 100);
		opener = 100 + (uint32_t)(i % 2);
		open_keep(&s, 50000 + (uint64_t)k, (size_t)(k % 100), cls, ROOT, i * 5, &a);
		if (i > 0) /* the other worker's file closes after this one opened */
			cfs_scan_close(&s, anc, 2);
		anc[0] = cls;
		opened[cls - 300] = 1;
		CHECK_EQ(a.widen, 0);
		if (a.start) {
			CHECK_EQ(started_at, -1);
			CHECK_EQ(a.start, ROOT);
			CHECK_EQ(a.siblings, 1);
			started_at = i;
			uint64_t kids[CFS_SCAN_SLOTS];
			int n = cfs_scan_siblings(&s, ROOT, i * 5, kids, CFS_SCAN_SLOTS);
			CHECK(n >= 3);
			for (int j = 0; j < n; j++) {
				CHECK(kids[j] >= 300 && kids[j] < 310 && opened[kids[j] - 300]);
				joined[kids[j] - 300] = 1;
			}
		} else if (started_at >= 0) {
			CHECK_EQ(a.tree, ROOT);
			CHECK_EQ(a.join, cls);
			joined[cls - 300] = 1;
		}
		for (int c = 0; c < 10; c++) /* joined: only classes with an opened file */
			CHECK(!joined[c] || opened[c]);
	}
	opener = 100;
	CHECK(started_at >= 5 && started_at <= 8); /* 6 with two workers (12 alone) */
	for (int c = 0; c < 10; c++)
		CHECK(joined[c]);
	/* the unrelated folders (400..405) were not opened while the dataset was
	 * read (400 before): never listed */
	uint64_t kids[CFS_SCAN_SLOTS];
	int n = cfs_scan_siblings(&s, ROOT, 999 * 5, kids, CFS_SCAN_SLOTS);
	CHECK_EQ(n, 10);
	for (int j = 0; j < n; j++)
		CHECK(kids[j] >= 300 && kids[j] < 310);
	CHECK_EQ(cfs_scan_count(&s), 1);

	/* a file opened at the top itself is no member of the sibling scan */
	open_at(&s, 7, 0, ROOT, 0, 999 * 5 + 1, &a);
	CHECK_EQ(a.tree, 0);
	CHECK_EQ(a.join, 0);
}

/* A person opening files in two folders, or a few files in each of several
 * folders but spread thinner than the window, starts no sibling scan: and
 * neither does the same at the top of a whole-drive mount. */
static void person_in_few_folders(void)
{
	struct cfs_scan_opts o = { .no_tree = ROOT };
	struct cfs_scan s;
	cfs_scan_init(&s, &o);
	struct cfs_scan_advice a;
	for (int i = 0; i < 23; i++) { /* two folders, 23 files */
		open_at(&s, 700 + (uint64_t)i, (size_t)(i * 5 % 40), 20 + (uint64_t)(i % 2), ROOT,
			i * 100, &a);
		CHECK_EQ(a.start, 0);
	}
	cfs_scan_init(&s, &o);
	for (int i = 0; i < 60; i++) { /* a file of a folder every 4 s, 8 folders */
		open_at(&s, 900 + (uint64_t)i, (size_t)(i * 7 % 50), 30 + (uint64_t)(i % 8), ROOT,
			(int64_t)i * 4000, &a);
		CHECK_EQ(a.start, 0);
	}
	CHECK_EQ(cfs_scan_count(&s), 0);
}

/* A flat folder read shuffled by two processes: the folder is the tree. */
static void flat_two_workers(void)
{
	struct cfs_scan s;
	cfs_scan_init(&s, NULL);
	uint64_t tree = 0;
	int n = 0;
	for (; n < 100 && !tree; n++) {
		struct cfs_scan_advice a;
		size_t pos = (size_t)(next_rand() % 100000);
		open_at(&s, 1000000 + pos, pos, 42, 7, n * 2, &a);
		tree = a.start;
	}
	CHECK_EQ(tree, 42);
	CHECK(n >= 24 && n <= 26);
}

/* The same file opened again and again (a log tailed, a config re-read)
 * never counts twice. */
static void same_file(void)
{
	struct cfs_scan s;
	cfs_scan_init(&s, NULL);
	for (int i = 0; i < 1000; i++) {
		struct cfs_scan_advice a;
		open_at(&s, 77, 3, 10, ROOT, i, &a);
		CHECK_EQ(a.start, 0);
		CHECK_EQ(a.ahead_to, 0);
	}
}

/* Opens spread thinner than the window start nothing: 23 files, a pause
 * longer than the window, 23 more. */
static void window(void)
{
	struct cfs_scan s;
	cfs_scan_init(&s, NULL);
	struct cfs_scan_advice a;
	for (int i = 0; i < 23; i++) {
		open_at(&s, 500 + (uint64_t)i * 7, (size_t)i * 7, 10, ROOT, i, &a);
		CHECK_EQ(a.start, 0);
	}
	for (int i = 0; i < 22; i++) {
		open_at(&s, 900 + (uint64_t)i * 7, (size_t)i * 7 + 3, 10, ROOT, 40000 + i, &a);
		CHECK_EQ(a.start, 0);
	}
	open_at(&s, 5, 1, 10, ROOT, 40030, &a);
	CHECK_EQ(a.start, 0); /* 46 in 40 s is not 24 within 30 s */
	open_at(&s, 6, 2, 10, ROOT, 40031, &a);
	CHECK_EQ(a.start, 10); /* the 24th of the second batch */
}

/* A sorted reader: the window grows with the streak up to order_max, and
 * what could not be handed out is offered again. */
static void order_growth(void)
{
	struct cfs_scan_opts o = { .trigger = 64, .order_max = 30 };
	struct cfs_scan s;
	cfs_scan_init(&s, &o);
	struct cfs_scan_advice a;
	size_t to = 0;
	for (size_t i = 0; i < 40; i++) {
		open_at(&s, 100 + i, i, 10, 0, (int64_t)i, &a);
		if (a.ahead_to)
			to = a.ahead_to;
		CHECK(!a.ahead_to || a.ahead_to <= i + 1 + 30);
	}
	CHECK_EQ(to, 40 + 30);
	cfs_scan_ahead_undo(&s, 10, 60);
	open_at(&s, 140, 40, 10, 0, 41, &a);
	CHECK_EQ(a.ahead_from, 60);
	CHECK_EQ(a.ahead_to, 71);
	/* a jump back (the next epoch) starts over */
	open_at(&s, 100, 0, 10, 0, 42, &a);
	CHECK_EQ(a.ahead_to, 0);
	open_at(&s, 101, 1, 10, 0, 43, &a);
	CHECK_EQ(a.ahead_from, 2);
	CHECK_EQ(a.ahead_to, 5);
}

/* Two readers at once (a DataLoader's workers: each holds a file open
 * while the other opens the next) start a scan after 12 files; one reader
 * going file by file (open, read, close) needs 24, and so does one process
 * whose closes the kernel tells late (after its next open). */
static void overlapping(void)
{
	struct cfs_scan s;
	cfs_scan_init(&s, NULL);
	struct cfs_scan_advice a;
	uint64_t anc[3] = { 42, 7, ROOT };
	int started = -1;
	for (int i = 0; i < 40 && started < 0; i++) {
		size_t pos = (size_t)(next_rand() % 5000);
		opener = 100 + (uint32_t)(i % 2); /* two worker processes */
		open_keep(&s, 200000 + pos, pos, 42, 7, i * 10, &a);
		if (a.start)
			started = i;
		if (i > 0) /* the other reader's file closes after this one opened */
			cfs_scan_close(&s, anc, 3);
	}
	CHECK_EQ(started, 11);
	CHECK_EQ(a.start, 42);

	/* one process, each close told after its next open */
	opener = 100;
	cfs_scan_init(&s, NULL);
	started = -1;
	for (int i = 0; i < 40 && started < 0; i++) {
		size_t pos = (size_t)(next_rand() % 5000);
		open_keep(&s, 400000 + pos, pos, 42, 7, i * 10, &a);
		if (a.start)
			started = i;
		if (i > 0)
			cfs_scan_close(&s, anc, 3);
	}
	CHECK_EQ(started, 23);

	cfs_scan_init(&s, NULL);
	started = -1;
	for (int i = 0; i < 40 && started < 0; i++) {
		size_t pos = (size_t)(next_rand() % 5000);
		open_at(&s, 300000 + pos, pos, 42, 7, i * 10, &a);
		if (a.start)
			started = i;
	}
	CHECK_EQ(started, 23);
	/* closes of files the detector forgot (a reused slot) do no harm */
	for (int i = 0; i < 10; i++)
		cfs_scan_close(&s, anc, 3);
	CHECK_EQ(s.slots[0].open_now, 0);
}

int main(void)
{
	first_twenty_in_order();
	twenty_random();
	imagefolder_shuffled();
	top_of_drive_classes();
	person_in_few_folders();
	flat_two_workers();
	same_file();
	window();
	order_growth();
	overlapping();
	return check_done("test_scan");
}
