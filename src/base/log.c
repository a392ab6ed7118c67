/* log: leveled log lines (see log.h).
 *
 * Rotation: the log usually lives in tmpfs next to the cache, where it costs
 * RAM.  A writer that finds the file at the cap (after its own write) takes
 * an flock on it and, if the path still names that file, renames it to
 * PATH.1 (replacing the last one) and opens a new PATH onto the same
 * descriptor number; a writer that finds PATH names another file already
 * (the supervisor and its server share one log) just reopens it. */
#define _GNU_SOURCE /* dup3 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int log_fd = 2;
static enum cfs_log_level log_level = CFS_LOG_INFO;
static char log_path[4096];
static uint64_t log_max;
static pthread_mutex_t rotate_lock = PTHREAD_MUTEX_INITIALIZER; /* threads; flock: processes */

static const char *const level_names[] = { "debug", "info", "warn", "error" };

int cfs_log_parse_level(const char *s, enum cfs_log_level *out)
{
	for (unsigned i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum cfs_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

int cfs_log_open(const char *path, enum cfs_log_level level)
{
	log_level = level;
	if (!path)
		return 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (log_fd > 2)
		close(log_fd);
	log_fd = fd;
	if ((size_t)snprintf(log_path, sizeof(log_path), "%s", path) >= sizeof(log_path))
		log_path[0] = '\0'; /* too long to rotate */
	return 0;
}

void cfs_log_set_max(uint64_t bytes)
{
	log_max = bytes;
}

/* Called with the file at or over the cap (see the top). */
static void rotate(void)
{
	struct stat mine, named;
	char old[sizeof(log_path) + 2];
	pthread_mutex_lock(&rotate_lock);
	int fd = log_fd;
	if (flock(fd, LOCK_EX) != 0) {
		pthread_mutex_unlock(&rotate_lock);
		return;
	}
	if (fstat(fd, &mine) == 0 && stat(log_path, &named) == 0 && mine.st_ino == named.st_ino &&
	    mine.st_dev == named.st_dev && (uint64_t)mine.st_size >= log_max) {
		snprintf(old, sizeof(old), "%s.1", log_path);
		if (rename(log_path, old) != 0) {
			flock(fd, LOCK_UN);
			pthread_mutex_unlock(&rotate_lock);
			return;
		}
	}
	int nfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	flock(fd, LOCK_UN);
	if (nfd >= 0) {
		dup3(nfd, fd, O_CLOEXEC); /* same number: writers in other threads go on */
		close(nfd);
	}
	pthread_mutex_unlock(&rotate_lock);
}

void cfs_log_set_level(enum cfs_log_level level)
{
	log_level = level;
}

enum cfs_log_level cfs_log_get_level(void)
{
	return log_level;
}

void cfs_log_close(void)
{
	if (log_fd > 2)
		close(log_fd);
	log_fd = 2;
}

void cfs_log(enum cfs_log_level level, const char *fmt, ...)
{
	if (level < log_level)
		return;
	char line[2048];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ colabfs[%d] %s: ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, ts.tv_nsec / 1000000, (int)getpid(), level_names[level]);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	ssize_t w = write(log_fd, line, len);
	struct stat st;
	if (w > 0 && log_max && log_fd > 2 && log_path[0] && fstat(log_fd, &st) == 0 &&
	    (uint64_t)st.st_size >= log_max)
		rotate();
}
