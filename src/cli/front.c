/* front: the `colabfs` program users run, a lean front end.
 *
 * `colabfs stats` is answered here, by a program that links libc and
 * jansson only: the full program links libfuse, libcurl, OpenSSL, LMDB and
 * hiredis, 38 shared libraries whose loading alone took 11 ms at the median
 * and 158 ms at p99 on a loaded 2-core VM, where stats has 100 ms to answer
 * (bench/stats_latency.py); statically where configure can (no dynamic
 * loader at all; --disable-static-front links it dynamically).  Every other
 * command (and a stats this program cannot serve: none today) runs the full
 * program with the same arguments, in the same process (execv): in a build
 * tree libexec/colabfs beside this program, else $(pkglibexecdir)/colabfs
 * where `make install` put it.
 * tests/check_front.sh checks what this program links. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "stats_cmd.h"

#ifndef CFS_PKGLIBEXECDIR
#error "CFS_PKGLIBEXECDIR: where make install puts the full program"
#endif

#define FULL_NAME "colabfs"
#define BUILD_DIR "libexec" /* the full program's folder in a build tree */

/* Runs the full program; returns only when it cannot be run (127). */
static int run_full(char **argv)
{
	char self[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			snprintf(path, sizeof(path), "%s/" BUILD_DIR "/" FULL_NAME, self);
			if (access(path, X_OK) == 0) {
				execv(path, argv);
				fprintf(stderr, "colabfs: cannot run %s: %s\n", path, strerror(errno));
				return 127;
			}
		}
	}
	execv(CFS_PKGLIBEXECDIR "/" FULL_NAME, argv);
	fprintf(stderr, "colabfs: cannot run %s: %s (is colabfs installed whole? make install)\n",
		CFS_PKGLIBEXECDIR "/" FULL_NAME, strerror(errno));
	return 127;
}

/* stats is what a user runs when the machine is slow: where allowed (root,
 * as on Colab) it runs ahead of the busy-looping work around it, as the
 * daemon's control socket thread does (fuse/ctlsock.c).  It is short and
 * bounded (its reads have deadlines), so it takes nothing from them. */
#define STATS_NICE (-10)

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "stats") == 0) {
		if (getpriority(PRIO_PROCESS, 0) > STATS_NICE)
			(void)setpriority(PRIO_PROCESS, 0, STATS_NICE);
		return cfs_stats_main(argc - 2, argv + 2);
	}
	return run_full(argv);
}
