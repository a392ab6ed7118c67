/* fdlimit: a server's limit of open files (see fdlimit.h). */
#include "fdlimit.h"

#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>

#define NR_OPEN_DEFAULT 1048576 /* the kernel's default fs.nr_open */

static rlim_t nr_open(void)
{
	FILE *f = fopen("/proc/sys/fs/nr_open", "re");
	unsigned long long n = 0;
	if (f) {
		if (fscanf(f, "%llu", &n) != 1)
			n = 0;
		fclose(f);
	}
	return n ? (rlim_t)n : NR_OPEN_DEFAULT;
}

int cfs_fdlimit_raise(uint64_t *was, uint64_t *now)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -errno;
	*was = *now = (uint64_t)rl.rlim_cur;
	rlim_t want = rl.rlim_max == RLIM_INFINITY ? nr_open() : rl.rlim_max;
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
		return 0;
	rl.rlim_cur = want;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -errno;
	*now = (uint64_t)want;
	return 0;
}
