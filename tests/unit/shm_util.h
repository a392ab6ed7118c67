/* shm_util: shared anonymous memory for the unit tests of what lives in the
 * supervisor's memfd, and a child that works in it and is killed with
 * SIGKILL where the test says.  Exits the test when the mapping fails. */
#ifndef CFS_TEST_SHM_UTIL_H
#define CFS_TEST_SHM_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static inline void *test_shared_map(size_t n)
{
	void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return m;
}

/* The child, its work done: says so on p[1] and waits to be killed. */
static inline __attribute__((noreturn)) void test_child_ready(int p[2])
{
	if (write(p[1], "k", 1) != 1)
		_exit(4);
	for (;;)
		pause();
}

/* The parent: waits for the child's word on p[0], kills it with SIGKILL and
 * reaps it.  Returns 0, or -1 when any step failed. */
static inline int test_kill_when_ready(pid_t pid, int p[2])
{
	char c;
	close(p[1]);
	int ok = read(p[0], &c, 1) == 1;
	close(p[0]);
	int st;
	ok &= kill(pid, SIGKILL) == 0;
	ok &= waitpid(pid, &st, 0) == pid;
	return ok ? 0 : -1;
}

#endif
