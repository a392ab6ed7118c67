/* log: leveled log lines (see log.h). */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int log_fd = 2;
static enum cfs_log_level log_level = CFS_LOG_INFO;

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
	return 0;
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
	(void)w;
}
