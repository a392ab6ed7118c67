/* log: leveled log lines (see log.h).
 *
 * Rotation: the log usually lives in tmpfs next to the cache, where it costs
 * RAM.  A writer that finds the file at the cap (after its own write) takes
 * an flock on it and, if the path still names that file, renames it to
 * PATH.1 (replacing the last one) and opens a new PATH onto the same
 * descriptor number; a writer that finds PATH names another file already
 * (the supervisor and its server share one log) just reopens it.
 *
 * Repeats (rsyslog's "last message repeated", journald's rate limit): a
 * message (its level and text, the time and pid aside) that was written less
 * than the repeat window ago (60 s; cfs_log_set_repeat_window) is counted,
 * not written.  The first one is always written at once.  The count is
 * written as the message followed by "... N more times in the last minute"
 * when its window has ended, at the next line logged (a quiet log keeps it
 * until then, or until cfs_log_flush or cfs_log_close), or when the message
 * leaves the table of the REPEAT_SLOTS messages last written (the least
 * recently repeated goes).  A table rather than only the last message: a
 * failure retried in a loop interleaves with other lines, and two messages
 * alternating must both be summarised.  Messages are told apart by their
 * text, not by the call site: a line that names an id, an offset or a count
 * differs from the last and is written.  One mutex guards the table and the
 * writes (appends to one file are serialized by the kernel anyway); a forked
 * child starts with an empty table and a fresh mutex.  Nothing is rewritten:
 * a summary repeats only text that was written already. */
#define _GNU_SOURCE /* dup3 */
#include "log.h"

#include "clock.h"
#include "hash.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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
static int stderr_follows; /* fd 2 is the log file too (cfs_log_capture_stderr) */
static pthread_mutex_t rotate_lock = PTHREAD_MUTEX_INITIALIZER; /* threads; flock: processes */

static const char *const level_names[] = { "debug", "info", "warn", "error" };

#define LINE_MAX_BYTES 2048 /* a line, its newline included */
#define REPEAT_SLOTS 8
#define REPEAT_WINDOW_MS 60000

/* One message written lately: its repeats in the window are counted. */
struct repeat {
	int used;
	enum cfs_log_level level;
	uint64_t hash;
	int64_t first_ms; /* when it was written (the window opened) */
	int64_t last_ms;  /* its last repeat (eviction order) */
	uint64_t more;    /* repeats not written */
	size_t len;
	char text[LINE_MAX_BYTES];
};

static pthread_mutex_t repeat_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t repeat_once = PTHREAD_ONCE_INIT;
static struct repeat repeats[REPEAT_SLOTS];
static int64_t repeat_window_ms = REPEAT_WINDOW_MS;
static int64_t (*repeat_clock)(void);

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
	cfs_log_flush(); /* the counts go where their messages went */
	if (log_fd > 2)
		close(log_fd);
	log_fd = fd;
	if (stderr_follows)
		dup2(fd, 2);
	if ((size_t)snprintf(log_path, sizeof(log_path), "%s", path) >= sizeof(log_path))
		log_path[0] = '\0'; /* too long to rotate */
	return 0;
}

void cfs_log_set_max(uint64_t bytes)
{
	log_max = bytes;
}

int cfs_log_capture_stderr(void)
{
	if (log_fd <= 2)
		return -EBADF;
	pthread_mutex_lock(&rotate_lock);
	int rc = dup2(log_fd, 2) < 0 ? -errno : 0;
	if (!rc)
		stderr_follows = 1;
	pthread_mutex_unlock(&rotate_lock);
	return rc;
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
		if (stderr_follows)
			dup2(fd, 2);
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

/* ---- writing, repeats ---------------------------------------------------- */

static void after_fork_child(void)
{
	pthread_mutex_init(&repeat_lock, NULL);
	memset(repeats, 0, sizeof(repeats));
}

static void repeat_init(void)
{
	pthread_atfork(NULL, NULL, after_fork_child);
}

static void repeat_lock_take(void)
{
	pthread_once(&repeat_once, repeat_init);
	pthread_mutex_lock(&repeat_lock);
}

static int64_t now_ms(void)
{
	return repeat_clock ? repeat_clock() : cfs_clock_mono_ms();
}

/* Writes "TIME colabfs[PID] LEVEL: " + text (+ tail) + "\n" in one write(2),
 * cut to LINE_MAX_BYTES, and rotates the file at its cap. */
static void write_line(enum cfs_log_level level, const char *text, const char *tail)
{
	char line[LINE_MAX_BYTES];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ colabfs[%d] %s: %s%s",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, ts.tv_nsec / 1000000, (int)getpid(), level_names[level], text,
			 tail ? tail : "");
	size_t len = n < 0 ? 0 : (size_t)n;
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	ssize_t w = write(log_fd, line, len);
	struct stat st;
	if (w > 0 && log_max && log_fd > 2 && log_path[0] && fstat(log_fd, &st) == 0 &&
	    (uint64_t)st.st_size >= log_max)
		rotate();
}

/* Writes r's summary if it has repeats, and frees the slot.  Lock held. */
static void repeat_end(struct repeat *r, int64_t now)
{
	if (r->used && r->more) {
		char tail[96];
		int64_t span = now - r->first_ms, min = (span + 59999) / 60000;
		char ago[40];
		if (min <= 1)
			snprintf(ago, sizeof(ago), "the last minute");
		else
			snprintf(ago, sizeof(ago), "the last %" PRId64 " minutes", min);
		snprintf(tail, sizeof(tail), " ... %" PRIu64 " more time%s in %s", r->more,
			 r->more == 1 ? "" : "s", ago);
		/* the tail must show even when the text filled the line */
		size_t keep = sizeof(r->text) - 2 - 64 - strlen(tail);
		if (r->len > keep)
			r->text[keep] = '\0';
		write_line(r->level, r->text, tail);
	}
	r->used = 0;
}

/* Ends every window past its time.  Lock held. */
static void repeat_expire(int64_t now)
{
	for (int i = 0; i < REPEAT_SLOTS; i++)
		if (repeats[i].used && now - repeats[i].first_ms >= repeat_window_ms)
			repeat_end(&repeats[i], now);
}

/* Writes every pending summary.  Lock held. */
static void flush_locked(void)
{
	int64_t now = now_ms();
	for (int i = 0; i < REPEAT_SLOTS; i++)
		repeat_end(&repeats[i], now);
}

void cfs_log_flush(void)
{
	repeat_lock_take();
	flush_locked();
	pthread_mutex_unlock(&repeat_lock);
}

void cfs_log_set_repeat_window(int64_t ms)
{
	repeat_lock_take();
	flush_locked();
	repeat_window_ms = ms < 0 ? 0 : ms;
	pthread_mutex_unlock(&repeat_lock);
}

void cfs_log_set_clock(int64_t (*mono_ms)(void))
{
	repeat_lock_take();
	flush_locked();
	repeat_clock = mono_ms;
	pthread_mutex_unlock(&repeat_lock);
}

void cfs_log_close(void)
{
	cfs_log_flush();
	if (log_fd > 2)
		close(log_fd);
	log_fd = 2;
}

void cfs_log(enum cfs_log_level level, const char *fmt, ...)
{
	if (level < log_level)
		return;
	char text[LINE_MAX_BYTES];
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	size_t len = m < 0 ? 0 : (size_t)m;
	if (len >= sizeof(text))
		len = sizeof(text) - 1;
	text[len] = '\0';
	uint64_t h = cfs_hash_fnv1a(text);
	repeat_lock_take();
	int64_t now = now_ms();
	repeat_expire(now);
	struct repeat *r = NULL, *lru = &repeats[0];
	for (int i = 0; i < REPEAT_SLOTS && repeat_window_ms > 0; i++) {
		struct repeat *x = &repeats[i];
		if (x->used && x->hash == h && x->level == level && x->len == len &&
		    memcmp(x->text, text, len) == 0) {
			x->more++;
			x->last_ms = now;
			pthread_mutex_unlock(&repeat_lock);
			return;
		}
		if (!r && !x->used)
			r = x;
		if (x->last_ms < lru->last_ms) /* matters only when all are used */
			lru = x;
	}
	if (repeat_window_ms > 0) {
		if (!r) {
			repeat_end(lru, now); /* a summary before the line that pushed it out */
			r = lru;
		}
		r->used = 1;
		r->level = level;
		r->hash = h;
		r->first_ms = r->last_ms = now;
		r->more = 0;
		r->len = len;
		memcpy(r->text, text, len + 1);
	}
	write_line(level, text, NULL);
	pthread_mutex_unlock(&repeat_lock);
}
