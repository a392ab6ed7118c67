/* Unit test: the times a node shows (inode.h, cfs_node_mtime and the rest).
 * Drive keeps one time per item, modifiedTime; a folder's mtime and ctime
 * move here when an entry changes in it, a node's ctime when it is renamed
 * or a time is set, and both must move forward on every change even when
 * the clock has not (a coarse clock, two changes in one tick, a clock set
 * back); a time set by utimensat is shown as set, earlier ones included. */
#include <errno.h>
#include <stdint.h>

#include "check.h"
#include "inode.h"

#define S 1000000000LL

static void test_file(struct cfs_inode *t)
{
	struct cfs_node *n = cfs_inode_add(t, "F1", 10);
	CHECK(n != NULL);
	n->mtime_ns = 100 * S;
	n->ctime_ns = 50 * S; /* createdTime, earlier */
	CHECK_EQ(cfs_node_mtime(n), 100 * S);
	CHECK_EQ(cfs_node_ctime(n, cfs_node_mtime(n)), 100 * S); /* never before the mtime */
	CHECK_EQ(cfs_node_atime(n, 100 * S), 100 * S);         /* none set: the mtime */
	/* a staged write shows a later mtime: the ctime follows and stays */
	CHECK_EQ(cfs_node_ctime(n, 120 * S), 120 * S);
	CHECK_EQ(cfs_node_ctime(n, 100 * S), 120 * S); /* the upload's ms time: no going back */
	/* a rename: ctime to now */
	cfs_node_changed(n, 200 * S + 7);
	CHECK_EQ(cfs_node_ctime(n, cfs_node_mtime(n)), 200 * S + 7);
	/* again in the same clock tick, and with the clock set back: 1 ns on */
	cfs_node_changed(n, 200 * S + 7);
	CHECK_EQ(n->ctime_ns, 200 * S + 8);
	cfs_node_changed(n, 10 * S);
	CHECK_EQ(n->ctime_ns, 200 * S + 9);
	/* a folder change on a file does nothing */
	cfs_node_dir_changed(n, 300 * S);
	CHECK_EQ(n->ctime_ns, 200 * S + 9);
	CHECK_EQ(cfs_node_mtime(n), 100 * S);
	/* atime as set, 0 (the epoch) and negative times too */
	cfs_node_set_atime(n, 0);
	CHECK_EQ(cfs_node_atime(n, 100 * S), 0);
	cfs_node_set_atime(n, -5 * S + 3);
	CHECK_EQ(cfs_node_atime(n, 100 * S), -5 * S + 3);
	/* utimensat with an mtime in the past: shown as set, ctime kept */
	cfs_node_set_mtime(n, 1 * S + 123456789);
	CHECK_EQ(cfs_node_mtime(n), 1 * S + 123456789);
	CHECK_EQ(cfs_node_ctime(n, cfs_node_mtime(n)), 200 * S + 9);
}

static void test_folder(struct cfs_inode *t)
{
	struct cfs_node *d = cfs_inode_add(t, "D1", 11);
	CHECK(d != NULL);
	CHECK_EQ(cfs_node_make_dir(d), 0);
	d->mtime_ns = 100 * S; /* Drive's: does not move with its entries */
	d->ctime_ns = 100 * S;
	int64_t m = cfs_node_mtime(d), c = cfs_node_ctime(d, m);
	/* every change moves both, strictly, whatever the clock says */
	int64_t clock[] = { 150 * S, 150 * S, 150 * S + 1, 149 * S, 0, 151 * S };
	for (unsigned i = 0; i < sizeof(clock) / sizeof(clock[0]); i++) {
		cfs_node_dir_changed(d, clock[i]);
		int64_t m2 = cfs_node_mtime(d), c2 = cfs_node_ctime(d, m2);
		CHECK(m2 > m);
		CHECK(c2 > c);
		CHECK(c2 >= m2);
		if (clock[i] > c)
			CHECK_EQ(m2, clock[i]); /* a clock that moved on: exactly now */
		m = m2;
		c = c2;
	}
	CHECK_EQ(m, 151 * S);
	/* a listing from Drive brings its modifiedTime back: the later shows */
	d->mtime_ns = 100 * S;
	CHECK_EQ(cfs_node_mtime(d), 151 * S);
	/* Drive's later than the local change (changed elsewhere): Drive's */
	d->mtime_ns = 160 * S;
	CHECK_EQ(cfs_node_mtime(d), 160 * S);
	CHECK_EQ(cfs_node_ctime(d, cfs_node_mtime(d)), 160 * S);
	/* utimensat on the folder, to an earlier time: shown as set */
	cfs_node_set_mtime(d, 90 * S);
	CHECK_EQ(cfs_node_mtime(d), 90 * S);
	CHECK_EQ(cfs_node_ctime(d, cfs_node_mtime(d)), 160 * S);
	/* then an entry changes: now again */
	cfs_node_dir_changed(d, 170 * S);
	CHECK_EQ(cfs_node_mtime(d), 170 * S);
	CHECK_EQ(cfs_node_ctime(d, cfs_node_mtime(d)), 170 * S);
}

int main(void)
{
	struct cfs_inode *t;
	CHECK_EQ(cfs_inode_new(&t), 0);
	test_file(t);
	test_folder(t);
	cfs_inode_free(t);
	return check_done("test_node_times");
}
