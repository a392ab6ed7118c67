/* fdlimit: a server's limit of open files (see fdlimit.h). */
#include "fdlimit.h"

#include <errno.h>
#include <sys/resource.h>

int cfs_fdlimit_raise(uint64_t *was, uint64_t *now)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -errno;
	*was = *now = (uint64_t)rl.rlim_cur;
	/* Linux caps the hard limit at fs.nr_open: never RLIM_INFINITY */
	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_cur >= rl.rlim_max)
		return 0;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -errno;
	*now = (uint64_t)rl.rlim_cur;
	return 0;
}
