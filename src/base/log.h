/* log: leveled log lines to stderr or a file (and syslog when daemonized).
 *
 * Never pass a token, key or Authorization header to these functions: the log
 * is meant to be pasted into bug reports.  Thread-safe: one write(2) a line.
 * A message repeated within a minute is written once, then summarised as
 * "MESSAGE ... N more times in the last minute" (see log.c). */
#ifndef CFS_LOG_H
#define CFS_LOG_H

#include <stdint.h>

enum cfs_log_level { CFS_LOG_DEBUG, CFS_LOG_INFO, CFS_LOG_WARN, CFS_LOG_ERROR };

/* path NULL: stderr.  Returns 0 or -errno if the file cannot be opened. */
int cfs_log_open(const char *path, enum cfs_log_level level);
/* Parses "debug", "info", "warn", "error"; returns -EINVAL otherwise. */
int cfs_log_parse_level(const char *s, enum cfs_log_level *out);
void cfs_log_set_level(enum cfs_log_level level);
enum cfs_log_level cfs_log_get_level(void);
void cfs_log_close(void);
/* A log file (not stderr) is rotated to PATH.1 when it reaches bytes (0:
 * never); see log.c. */
void cfs_log_set_max(uint64_t bytes);
/* The log file takes stderr's place too, after rotations as well: what a
 * library writes there (libfuse's messages, the C library's or LMDB's last
 * words before an abort) lands in the log of a daemon, whose stderr is
 * otherwise /dev/null.  Returns 0, -EBADF when the log is stderr itself,
 * or -errno. */
int cfs_log_capture_stderr(void);

/* Writes the summaries of repeats still counted (cfs_log_close does too). */
void cfs_log_flush(void);
/* Repeats of a message within ms of its first line are counted, not written
 * (default 60000; 0: every line is written).  Pending summaries are written
 * first. */
void cfs_log_set_repeat_window(int64_t ms);
/* For tests: the CLOCK_MONOTONIC milliseconds the repeat windows use (NULL:
 * the real clock).  Pending summaries are written first. */
void cfs_log_set_clock(int64_t (*mono_ms)(void));

void cfs_log(enum cfs_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define CFS_DEBUG(...) cfs_log(CFS_LOG_DEBUG, __VA_ARGS__)
#define CFS_INFO(...) cfs_log(CFS_LOG_INFO, __VA_ARGS__)
#define CFS_WARN(...) cfs_log(CFS_LOG_WARN, __VA_ARGS__)
#define CFS_ERROR(...) cfs_log(CFS_LOG_ERROR, __VA_ARGS__)

#endif
