/* Unit tests: fdlimit.  In forked children (the limits are the process's):
 * a low soft limit is raised to the hard one, and files past the old limit
 * then open; a soft limit already at the hard one is left; a hard limit as
 * low as the soft one leaves both (the files past it still fail, EMFILE). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "fdlimit.h"

#define LOW 64

/* Opens /dev/null until it fails (*err: its errno) or n are open: how many
 * opened. */
static int open_many(int n, int *err)
{
	int *fds = calloc((size_t)n, sizeof(*fds)), k = 0;
	*err = 0;
	while (fds && k < n && (fds[k] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		k++;
	if (fds && k < n)
		*err = errno;
	for (int i = 0; i < k; i++)
		close(fds[i]);
	free(fds);
	return k;
}

/* In a child with soft limit LOW and hard limit hard: exit status 0 when the
 * raise did what it should. */
static int child(rlim_t hard)
{
	struct rlimit rl = { LOW, hard };
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 10;
	uint64_t was = 0, now = 0;
	if (cfs_fdlimit_raise(&was, &now) != 0)
		return 11;
	if (was != LOW || now != (uint64_t)hard)
		return 12;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur != hard)
		return 13;
	int want = hard > 4 * LOW ? 4 * LOW : LOW; /* past the old limit when raised */
	int err, got = open_many(want, &err);
	if (hard > 4 * LOW && got != want)
		return 14;
	if (hard == LOW && (got >= LOW || err != EMFILE))
		return 15;
	/* raising again changes nothing */
	if (cfs_fdlimit_raise(&was, &now) != 0 || was != (uint64_t)hard || now != (uint64_t)hard)
		return 16;
	return 0;
}

static int run_child(rlim_t hard)
{
	pid_t p = fork();
	if (p == 0)
		_exit(child(hard));
	int st = 0;
	if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

int main(void)
{
	struct rlimit rl;
	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rlim_t hard = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 4096 ? 4096 : rl.rlim_max;
	if (hard > 4 * LOW)
		CHECK_EQ(run_child(hard), 0); /* raised: 256 files open where 64 were allowed */
	else
		printf("hard limit of open files %llu: the raise case is not run\n",
		       (unsigned long long)rl.rlim_max);
	CHECK_EQ(run_child(LOW), 0); /* the hard limit is the soft one: left, EMFILE past it */
	return check_done("test_fdlimit");
}
