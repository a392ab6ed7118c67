/* serve: the server's half of the supervisor protocol (see serve.h). */
#define _GNU_SOURCE
#include "serve.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "session.h"
#include "testhook.h"

int cfs_serve_parse(int *argc, char ***argv, struct cfs_serve_args *a)
{
	int shm_fd = -1;
	*a = (struct cfs_serve_args){ -1, -1, NULL };
	int i = 0;
	for (; i + 1 < *argc && strcmp((*argv)[i], "--") != 0; i += 2) {
		const char *k = (*argv)[i];
		char *end;
		long lv = strtol((*argv)[i + 1], &end, 10);
		int v = *end || lv < 0 || lv > INT_MAX ? -1 : (int)lv;
		if (strcmp(k, "--fuse-fd") == 0)
			a->fuse_fd = v;
		else if (strcmp(k, "--shm-fd") == 0)
			shm_fd = v;
		else if (strcmp(k, "--ready-fd") == 0)
			a->ready_fd = v;
		else
			return -EINVAL;
	}
	if (i >= *argc || strcmp((*argv)[i], "--") != 0 || a->fuse_fd < 0 || shm_fd < 0)
		return -EINVAL;
	*argc -= i + 1;
	*argv += i + 1;
	struct stat st;
	struct cfs_super_shm *shm = MAP_FAILED;
	if (fstat(shm_fd, &st) == 0 && (uint64_t)st.st_size >= CFS_SHM_SIZE)
		shm = mmap(NULL, CFS_SHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
	close(shm_fd);
	if (shm == MAP_FAILED)
		return -EPROTO;
	if (shm->magic != CFS_SHM_MAGIC) {
		munmap(shm, CFS_SHM_SIZE);
		return -EPROTO;
	}
	a->shm = shm;
	return 0;
}

void cfs_serve_report(int fd, const char *msg)
{
	if (fd < 0)
		return;
	size_t n = strlen(msg);
	while (n) {
		ssize_t w = write(fd, msg, n);
		if (w <= 0)
			break;
		msg += w;
		n -= (size_t)w;
	}
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void cfs_serve_slow_stop_hook(void)
{
	const char *v = cfs_test_env("COLABFS_TEST_SLOW_STOP_MS");
	long ms = v ? strtol(v, NULL, 10) : 0;
	if (ms > 0 && ms < 600000) {
		CFS_INFO("test hook: stopping %ld ms late", ms);
		cfs_session_stopping("test hook: a slow stop");
		sleep_ms(ms);
	}
}

void cfs_serve_slow_start_hook(void)
{
	const char *p = cfs_test_env("COLABFS_TEST_SLOW_START_FILE");
	FILE *f = p ? fopen(p, "re") : NULL;
	long ms = 0;
	if (!f)
		return;
	if (fscanf(f, "%ld", &ms) != 1)
		ms = 0;
	fclose(f);
	unlink(p);
	if (ms > 0 && ms < 600000) {
		CFS_INFO("test hook: starting %ld ms late", ms);
		sleep_ms(ms);
	}
}
