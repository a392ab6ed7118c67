/* Unit tests: which folders colabfs trusts as a cache folder (cachedir.h):
 * new ones are made 0700 and tagged; an existing folder is never chmodded,
 * and one that is a symlink, someone else's, writable by others, or not
 * empty without colabfs's tag is refused with a sentence saying why. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cachedir.h"
#include "check.h"

static char top[64];

static const char *at(const char *rel)
{
	static char p[4][256];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof(p[k]), "%s/%s", top, rel);
	return p[k];
}

static unsigned mode_of(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0;
}

static void touch(const char *p)
{
	int fd = open(p, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
}

int main(void)
{
	char why[512];
	snprintf(top, sizeof(top), "/tmp/cfs-test-cachedir.XXXXXX");
	if (!mkdtemp(top))
		return 1;

	/* new, with missing parents: created 0700 and tagged */
	CHECK_EQ(cfs_cachedir_prepare(at("a/b/c"), 0, why, sizeof(why)), 0);
	CHECK_EQ(mode_of(at("a/b/c")), 0700);
	CHECK_EQ(mode_of(at("a/b")), 0700);
	CHECK(access(at("a/b/c/" CFS_CACHEDIR_TAG), F_OK) == 0);
	/* and accepted again with files in it */
	touch(at("a/b/c/index.mdb"));
	touch(at("a/b/c/arena-1m.dat"));
	CHECK_EQ(cfs_cachedir_prepare(at("a/b/c"), 0, why, sizeof(why)), 0);

	/* an existing empty folder of mode 0755: accepted, its mode kept */
	CHECK_EQ(mkdir(at("open"), 0755), 0);
	chmod(at("open"), 0755);
	CHECK_EQ(cfs_cachedir_prepare(at("open"), 0, why, sizeof(why)), 0);
	CHECK_EQ(mode_of(at("open")), 0755);

	/* a 1777 folder (like /tmp): refused, and it keeps its sticky bit */
	CHECK_EQ(mkdir(at("tmp"), 0700), 0);
	chmod(at("tmp"), 01777);
	CHECK_EQ(cfs_cachedir_prepare(at("tmp"), 0, why, sizeof(why)), -EPERM);
	CHECK(strstr(why, "can be written by other users (mode 777)") != NULL);
	CHECK_EQ(mode_of(at("tmp")), 01777);

	/* not empty and not ours */
	CHECK_EQ(mkdir(at("docs"), 0700), 0);
	touch(at("docs/thesis.tex"));
	CHECK_EQ(cfs_cachedir_prepare(at("docs"), 0, why, sizeof(why)), -ENOTEMPTY);
	CHECK(strstr(why, "is not empty and not a colabfs cache folder") != NULL);
	CHECK(access(at("docs/" CFS_CACHEDIR_TAG), F_OK) != 0);

	/* a cache of an earlier version (an index, no tag): accepted and tagged */
	CHECK_EQ(mkdir(at("old"), 0700), 0);
	touch(at("old/index.mdb"));
	CHECK_EQ(cfs_cachedir_prepare(at("old"), 0, why, sizeof(why)), 0);
	CHECK(access(at("old/" CFS_CACHEDIR_TAG), F_OK) == 0);

	/* a symlink, even to a good folder */
	CHECK_EQ(symlink(at("a/b/c"), at("link")), 0);
	CHECK_EQ(cfs_cachedir_prepare(at("link"), 0, why, sizeof(why)), -ELOOP);
	CHECK(strstr(why, "is a symbolic link") != NULL);

	/* a file */
	touch(at("file"));
	CHECK_EQ(cfs_cachedir_prepare(at("file"), 0, why, sizeof(why)), -ENOTDIR);

	/* someone else's (as root: give it away) */
	if (geteuid() == 0) {
		CHECK_EQ(mkdir(at("theirs"), 0700), 0);
		CHECK_EQ(chown(at("theirs"), 65534, 65534), 0);
		CHECK_EQ(cfs_cachedir_prepare(at("theirs"), 0, why, sizeof(why)), -EPERM);
		CHECK(strstr(why, "belongs to uid 65534") != NULL);
	}

	/* our own per-user base folder is narrowed, and may hold anything */
	CHECK_EQ(mkdir(at("base"), 0700), 0);
	chmod(at("base"), 0755);
	touch(at("base/x"));
	CHECK_EQ(cfs_cachedir_prepare(at("base"), 1, why, sizeof(why)), 0);
	CHECK_EQ(mode_of(at("base")), 0700);
	CHECK(access(at("base/" CFS_CACHEDIR_TAG), F_OK) == 0);
	/* but it must still be a real folder of ours */
	CHECK_EQ(symlink(at("base"), at("baselink")), 0);
	CHECK_EQ(cfs_cachedir_prepare(at("baselink"), 1, why, sizeof(why)), -ELOOP);

	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", top);
	return check_done("test_cachedir");
}
