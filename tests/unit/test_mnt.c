/* Unit tests: the mountpoint parsers (mnt.h) on a recorded mountinfo. */
#include <errno.h>

#include "check.h"
#include "mnt.h"

static const char mountinfo[] =
	"22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
	"30 22 0:26 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw\n"
	"41 22 0:40 / /tmp/a\\040b/mnt ro,nosuid,nodev,relatime shared:20 - fuse.colabfs colabfs "
	"ro,user_id=0,group_id=0\n"
	"42 22 0:41 / /tmp/stack rw shared:21 - tmpfs tmpfs rw\n"
	"43 42 0:42 / /tmp/stack ro,nosuid master:3 - fuse.colabfs colabfs ro,user_id=0\n"
	"44 22 0:43 / /tmp/noopt rw - fuse.other src\n";

static void test_find(void)
{
	struct cfs_mnt_entry e;
	CHECK_EQ(cfs_mnt_find(mountinfo, "/tmp/a b/mnt", &e), 1);
	CHECK_STR(e.fstype, "fuse.colabfs");
	CHECK_STR(e.source, "colabfs");
	CHECK_EQ(cfs_mnt_find(mountinfo, "/tmp/a\\040b/mnt", &e), 0);
	/* stacked: the topmost (last) entry counts */
	CHECK_EQ(cfs_mnt_find(mountinfo, "/tmp/stack", &e), 1);
	CHECK_STR(e.fstype, "fuse.colabfs");
	CHECK_EQ(e.major, 0);
	CHECK_EQ(e.minor, 42);
	CHECK_EQ(e.user_id, 0);
	CHECK_EQ(cfs_mnt_find(mountinfo, "/tmp/noopt", &e), 1);
	CHECK_STR(e.fstype, "fuse.other");
	CHECK_EQ(e.user_id, -1);
	CHECK_EQ(cfs_mnt_find(mountinfo, "/tmp", &e), 0);
	CHECK_EQ(cfs_mnt_find(mountinfo, "/tmp/a b", &e), 0);
	CHECK_EQ(cfs_mnt_find("", "/", &e), 0);
	CHECK_EQ(cfs_mnt_find("garbage\nmore garbage", "/", &e), 0);
}

/* The mount a path lies in, by its letters: the longest mount point above
 * it, the topmost of a stack; the device and owner come with it. */
static void test_containing(void)
{
	struct cfs_mnt_entry e;
	CHECK_EQ(cfs_mnt_containing(mountinfo, "/tmp/a b/mnt/x/y.bin", &e), 1);
	CHECK_STR(e.point, "/tmp/a b/mnt");
	CHECK_STR(e.fstype, "fuse.colabfs");
	CHECK_EQ(e.minor, 40);
	CHECK_EQ(e.user_id, 0);
	CHECK_EQ(cfs_mnt_containing(mountinfo, "/tmp/a b/mnt", &e), 1);
	CHECK_EQ(e.minor, 40);
	CHECK_EQ(cfs_mnt_containing(mountinfo, "/tmp/stack/f", &e), 1);
	CHECK_EQ(e.minor, 42);
	CHECK_EQ(cfs_mnt_containing(mountinfo, "/tmp/stacked", &e), 1);
	CHECK_STR(e.point, "/");
	CHECK_STR(e.fstype, "ext4");
	CHECK_EQ(cfs_mnt_containing(mountinfo, "/dev/shm/x", &e), 1);
	CHECK_EQ(e.minor, 26);
	CHECK_EQ(cfs_mnt_containing("", "/", &e), 0);
}

static void test_lexical(void)
{
	char out[64];
	CHECK_EQ(cfs_mnt_lexical("/home/u", "mnt", out, sizeof(out)), 0);
	CHECK_STR(out, "/home/u/mnt");
	CHECK_EQ(cfs_mnt_lexical("/home/u", "./a//b/../c/", out, sizeof(out)), 0);
	CHECK_STR(out, "/home/u/a/c");
	CHECK_EQ(cfs_mnt_lexical("/home/u", "../../../..", out, sizeof(out)), 0);
	CHECK_STR(out, "/");
	CHECK_EQ(cfs_mnt_lexical("/ignored", "/x/./y", out, sizeof(out)), 0);
	CHECK_STR(out, "/x/y");
	CHECK_EQ(cfs_mnt_lexical("/", "..a/...", out, sizeof(out)), 0);
	CHECK_STR(out, "/..a/...");
	CHECK_EQ(cfs_mnt_lexical("/", "a-very-long-name-that-does-not-fit-in-sixteen", out, 16),
		 -ENAMETOOLONG);
}

static void test_under(void)
{
	CHECK(cfs_mnt_under("/m", "/m"));
	CHECK(cfs_mnt_under("/m", "/m/cache"));
	CHECK(!cfs_mnt_under("/m", "/mnt/cache"));
	CHECK(!cfs_mnt_under("/m/x", "/m"));
	CHECK(cfs_mnt_under("/", "/anything"));
}

int main(void)
{
	test_find();
	test_containing();
	test_lexical();
	test_under();
	return check_done("test_mnt");
}
