/* Unit tests: the log's repeat summaries, on a fake clock, into a temporary file. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "log.h"

static int64_t fake_ms = 1000000;
static int fake_tick; /* ms the clock moves at each reading (called under the log's lock) */

static int64_t fake_clock(void)
{
	fake_ms += fake_tick;
	return fake_ms;
}

static char path[] = "/tmp/cfs-log-XXXXXX";

/* The file's lines with their "TIME colabfs[PID] " prefix cut off (each line
 * "level: text"), in lines[], up to cap; returns the count.  The text is in
 * buf. */
static int read_lines(char *buf, size_t bufcap, const char **lines, int cap)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, bufcap - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	int k = 0;
	for (char *p = buf; *p && k < cap;) {
		char *nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		char *body = strstr(p, "] ");
		lines[k++] = body ? body + 2 : p;
		if (!nl)
			break;
		p = nl + 1;
	}
	return k;
}

static void reset(void)
{
	cfs_log_flush();
	FILE *f = fopen(path, "w");
	if (f)
		fclose(f);
}

static char buf[1 << 20];
static const char *lines[4096];

static void test_repeats_summarised(void)
{
	reset();
	for (int i = 0; i < 313; i++) {
		CFS_WARN("upload of %s failed: %s", "a.bin", "Drive refused the name");
		fake_ms += 100;
	}
	int n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 1); /* the first at once, the rest counted */
	CHECK_STR(lines[0], "warn: upload of a.bin failed: Drive refused the name");
	/* a different message within the window: written, no summary yet */
	CFS_INFO("something else");
	n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 2);
	CHECK_STR(lines[1], "info: something else");
	/* the window ends: the next line brings the summary first */
	fake_ms += 60000;
	CFS_INFO("later");
	n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 4);
	CHECK_STR(lines[2], "warn: upload of a.bin failed: Drive refused the name ... 312 more times "
			    "in the last 2 minutes");
	CHECK_STR(lines[3], "info: later");
	/* after its window the message is written again, at once */
	CFS_WARN("upload of %s failed: %s", "a.bin", "Drive refused the name");
	n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 5);
	CHECK_STR(lines[4], "warn: upload of a.bin failed: Drive refused the name");
}

static void test_window_and_wording(void)
{
	reset();
	CFS_ERROR("once");
	fake_ms += 10;
	CFS_ERROR("once");
	fake_ms += 59000;
	cfs_log_flush(); /* within the minute */
	int n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 2);
	CHECK_STR(lines[1], "error: once ... 1 more time in the last minute");
	/* flushed: the next one opens a new window */
	CFS_ERROR("once");
	CFS_ERROR("once");
	CFS_ERROR("once");
	fake_ms += 60000; /* exactly the window: it has ended */
	CFS_ERROR("twice");
	n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 5);
	CHECK_STR(lines[2], "error: once");
	CHECK_STR(lines[3], "error: once ... 2 more times in the last minute");
	CHECK_STR(lines[4], "error: twice");
	/* just inside the window: still counted */
	fake_ms += 59999;
	CFS_ERROR("twice");
	n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 5);
	/* no repeats: no summary */
	reset();
	CFS_INFO("alone");
	fake_ms += 120000;
	CFS_INFO("next");
	cfs_log_flush();
	n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 2);
}

/* the same text at another level is another message; two messages that
 * alternate are both counted */
static void test_levels_and_interleaving(void)
{
	reset();
	for (int i = 0; i < 10; i++) {
		CFS_WARN("retrying %s", "x");
		CFS_INFO("retrying %s", "x");
		CFS_WARN("other");
	}
	int n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 3);
	CHECK_STR(lines[0], "warn: retrying x");
	CHECK_STR(lines[1], "info: retrying x");
	CHECK_STR(lines[2], "warn: other");
	cfs_log_flush();
	n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 6);
	CHECK_STR(lines[3], "warn: retrying x ... 9 more times in the last minute");
	CHECK_STR(lines[4], "info: retrying x ... 9 more times in the last minute");
	CHECK_STR(lines[5], "warn: other ... 9 more times in the last minute");
	/* a line that differs (an offset, a count) is written */
	reset();
	for (int i = 0; i < 5; i++)
		CFS_INFO("resuming at %d of 10 bytes", i);
	CHECK_EQ(read_lines(buf, sizeof(buf), lines, 4096), 5);
	/* below the level: neither written nor counted */
	reset();
	cfs_log_set_level(CFS_LOG_INFO);
	CFS_DEBUG("hidden");
	CFS_DEBUG("hidden");
	cfs_log_set_level(CFS_LOG_DEBUG);
	CFS_DEBUG("hidden");
	cfs_log_flush();
	n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 1);
	CHECK_STR(lines[0], "debug: hidden");
}

/* more messages than slots: the one repeated longest ago leaves the table,
 * its summary written before the line that pushed it out */
static void test_eviction(void)
{
	reset();
	CFS_INFO("m%d", 0);
	fake_ms += 1;
	CFS_INFO("m%d", 1);
	CFS_INFO("m%d", 1); /* m1: one repeat, last seen now */
	for (int i = 2; i < 8; i++) {
		fake_ms += 1;
		CFS_INFO("m%d", i);
	}
	fake_ms += 1;
	CFS_INFO("m%d", 0); /* m0 seen again: m1 is the one seen longest ago */
	fake_ms += 1;
	CFS_INFO("m%d", 8); /* a ninth message: m1 leaves the table */
	int n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 10);
	CHECK_STR(lines[8], "info: m1 ... 1 more time in the last minute");
	CHECK_STR(lines[9], "info: m8");
	fake_ms += 1;
	CFS_INFO("m%d", 1); /* out of the table: written again (m2 leaves, with nothing to say) */
	n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 11);
	CHECK_STR(lines[10], "info: m1");
	(void)lines;
}

/* a summary of a message that filled the line still ends with its count */
static void test_long_message(void)
{
	reset();
	static char big[4000];
	memset(big, 'z', sizeof(big) - 1);
	CFS_INFO("%s", big);
	CFS_INFO("%s", big);
	cfs_log_flush();
	int n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 2);
	CHECK(strlen(lines[0]) > 1900 && strlen(lines[0]) < 2048);
	const char *tail = " ... 1 more time in the last minute";
	size_t l1 = strlen(lines[1]);
	CHECK(l1 > strlen(tail) && strcmp(lines[1] + l1 - strlen(tail), tail) == 0);
}

/* window 0: every line is written */
static void test_off(void)
{
	reset();
	cfs_log_set_repeat_window(0);
	CFS_INFO("same");
	CFS_INFO("same");
	CFS_INFO("same");
	CHECK_EQ(read_lines(buf, sizeof(buf), lines, 4096), 3);
	cfs_log_set_repeat_window(60000);
	CFS_INFO("same");
	CFS_INFO("same");
	CHECK_EQ(read_lines(buf, sizeof(buf), lines, 4096), 4);
}

static void *hammer(void *arg)
{
	(void)arg;
	for (int i = 0; i < 2000; i++) {
		CFS_WARN("the same from every thread");
		if (i % 100 == 0)
			CFS_INFO("thread line %d", i); /* differs within a thread, repeats across */
	}
	return NULL;
}

static void test_threads(void)
{
	reset();
	fake_tick = 1; /* no two readings alike: the table's order is strict */
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, hammer, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	fake_tick = 0;
	cfs_log_flush();
	int n = read_lines(buf, sizeof(buf), lines, 4096);
	int first = 0, summary = 0, thread_lines = 0;
	for (int i = 0; i < n; i++) {
		if (strcmp(lines[i], "warn: the same from every thread") == 0)
			first++;
		else if (strcmp(lines[i], "warn: the same from every thread ... 7999 more times in the "
					  "last minute") == 0)
			summary++;
		else if (strncmp(lines[i], "info: thread line ", 18) == 0 && !strstr(lines[i], "more"))
			thread_lines++;
	}
	CHECK_EQ(first, 1);
	CHECK_EQ(summary, 1);
	/* 20 texts, 4 threads each: each written at least once, again only after
	 * it left the table of 8 */
	CHECK(thread_lines >= 20 && thread_lines <= 80);
}

/* a forked child starts with an empty table: its first line is written */
static void test_fork(void)
{
	reset();
	CFS_INFO("before the fork");
	pid_t pid = fork();
	if (pid == 0) {
		CFS_INFO("before the fork");
		cfs_log_flush();
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	CFS_INFO("before the fork"); /* the parent's table is its own */
	int n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 2);
	CHECK_STR(lines[0], "info: before the fork");
	CHECK_STR(lines[1], "info: before the fork");
}

/* reopening the log writes the pending counts to the old file */
static void test_reopen(void)
{
	reset();
	CFS_INFO("r");
	CFS_INFO("r");
	char other[] = "/tmp/cfs-log2-XXXXXX";
	int fd = mkstemp(other);
	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ(cfs_log_open(other, CFS_LOG_DEBUG), 0);
	CFS_INFO("r"); /* a new file: written */
	cfs_log_flush();
	int n = read_lines(buf, sizeof(buf), lines, 4096);
	CHECK_EQ(n, 2);
	CHECK_STR(lines[1], "info: r ... 1 more time in the last minute");
	FILE *f = fopen(other, "r");
	char line[256] = "";
	CHECK(f && fgets(line, sizeof(line), f));
	CHECK(strstr(line, "info: r\n") != NULL);
	CHECK(!fgets(line, sizeof(line), f)); /* one line only */
	if (f)
		fclose(f);
	unlink(other);
	CHECK_EQ(cfs_log_open(path, CFS_LOG_DEBUG), 0);
}

/* The whole file as text in buf (at most bufcap - 1 bytes). */
static const char *slurp(const char *p, char *into, size_t cap)
{
	FILE *f = fopen(p, "r");
	size_t n = f ? fread(into, 1, cap - 1, f) : 0;
	if (f)
		fclose(f);
	into[n] = '\0';
	return into;
}

/* What a library writes to stderr (a daemon's is /dev/null) lands in the log
 * file, and in the new file after a rotation, not in the rotated one. */
static void test_stderr_captured(void)
{
	char old[sizeof(path) + 2];
	snprintf(old, sizeof(old), "%s.1", path);
	int saved = dup(2);
	CHECK(saved >= 0);
	reset();
	CHECK_EQ(cfs_log_capture_stderr(), 0);
	fprintf(stderr, "a library's last words\n");
	fflush(stderr);
	CHECK(strstr(slurp(path, buf, sizeof(buf)), "a library's last words\n") != NULL);
	cfs_log_set_max(1); /* the next line rotates the file */
	CFS_INFO("to rotate");
	cfs_log_set_max(0);
	fprintf(stderr, "after the rotation\n");
	fflush(stderr);
	CHECK(strstr(slurp(path, buf, sizeof(buf)), "after the rotation\n") != NULL);
	CHECK(strstr(slurp(old, buf, sizeof(buf)), "a library's last words\n") != NULL);
	CHECK(strstr(buf, "after the rotation") == NULL);
	unlink(old);
	dup2(saved, 2); /* the test's own stderr again */
	close(saved);
}

int main(void)
{
	int fd = mkstemp(path);
	if (fd < 0)
		return 1;
	close(fd);
	if (cfs_log_open(path, CFS_LOG_DEBUG) != 0)
		return 1;
	cfs_log_set_clock(fake_clock);
	test_repeats_summarised();
	test_window_and_wording();
	test_levels_and_interleaving();
	test_eviction();
	test_long_message();
	test_off();
	test_threads();
	test_fork();
	test_reopen();
	test_stderr_captured();
	cfs_log_close();
	unlink(path);
	return check_done("test_log");
}
