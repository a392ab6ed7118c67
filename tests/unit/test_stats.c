/* Unit tests: rendering `colabfs stats` (src/core/stats.h) from a daemon's JSON:
 * the table puts the write path's names in an "uploads" section after the
 * others, bytes in binary units, the last upload error as its errno name;
 * --json and --prometheus pass every name through unchanged.  And its
 * --history (src/cli/stats_cmd.h): the JSON object exactly, "the last N
 * seconds", and the table's per-second rates, over a gap too. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "err.h"
#include "stats.h"
#include "stats_cmd.h"

static const char doc[] =
	"{\"uptime_seconds\":7,\"uploads_pending\":2,\"cache_used_bytes\":2048,"
	"\"uploads_pending_bytes\":5368709120,\"uploads_last_error\":28,\"staging_bytes\":1536,"
	"\"uploads_done_total\":4,\"uploads_failed\":1,\"cache_hits_total\":9}";

static char *render(const char *json, const char *prev, const char *format)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int rc = cfs_stats_render(f, json, prev, 2.0, format);
	fclose(f);
	CHECK_EQ(rc, 0);
	return buf;
}

/* The line of name in a table, or NULL. */
static const char *row(const char *t, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = t; (p = strstr(p, name)); p += n)
		if ((p == t || p[-1] == '\n') && p[n] == ' ')
			return p;
	return NULL;
}

static int row_has(const char *t, const char *name, const char *value)
{
	const char *r = row(t, name), *nl = r ? strchr(r, '\n') : NULL;
	const char *v = r ? strstr(r, value) : NULL;
	return v && (!nl || v < nl);
}

static void table(void)
{
	char *t = render(doc, NULL, "table");
	const char *sec = strstr(t, "\nuploads (");
	CHECK(sec != NULL);
	/* every other name comes first, the section's in its own order */
	CHECK(row(t, "uptime_seconds") && row(t, "uptime_seconds") < sec);
	CHECK(row(t, "cache_hits_total") && row(t, "cache_hits_total") < sec);
	CHECK(row(t, "uploads_pending") > sec);
	CHECK(row(t, "uploads_pending") < row(t, "uploads_pending_bytes"));
	CHECK(row(t, "uploads_pending_bytes") < row(t, "uploads_failed"));
	CHECK(row(t, "uploads_failed") < row(t, "uploads_last_error"));
	CHECK(row(t, "uploads_last_error") < row(t, "uploads_done_total"));
	CHECK(row(t, "uploads_done_total") < row(t, "staging_bytes"));
	CHECK(row(t, "uploads_in_flight") == NULL); /* not sent: not shown */
	CHECK(row_has(t, "uploads_pending_bytes", "5.0 GiB"));
	CHECK(row_has(t, "staging_bytes", "1.5 KiB"));
	CHECK(row_has(t, "uploads_last_error", "ENOSPC (28)"));
	CHECK(row_has(t, "uploads_pending", " 2 "));
	free(t);

	/* no error: "none"; a rate for counters under --watch */
	t = render("{\"uploads_last_error\":0,\"uploads_done_total\":10}",
		   "{\"uploads_last_error\":0,\"uploads_done_total\":4}", "table");
	CHECK(row_has(t, "uploads_last_error", "none"));
	CHECK(row_has(t, "uploads_done_total", " 3"));
	free(t);

	/* no upload names at all (an older daemon): no section title */
	t = render("{\"uptime_seconds\":1}", NULL, "table");
	CHECK(strstr(t, "uploads") == NULL);
	free(t);
}

static void machines(void)
{
	char *t = render(doc, NULL, "json");
	CHECK_STR(t, doc);
	free(t);
	t = render(doc, NULL, "prometheus");
	CHECK(strstr(t, "# TYPE colabfs_uploads_failed gauge\ncolabfs_uploads_failed 1\n"));
	CHECK(strstr(t, "# TYPE colabfs_uploads_done_total counter\ncolabfs_uploads_done_total 4\n"));
	CHECK(strstr(t, "colabfs_uploads_pending_bytes 5368709120\n"));
	free(t);
	FILE *f = fopen("/dev/null", "w");
	CHECK_EQ(cfs_stats_render(f, "{\"a\":\"x\"}", NULL, 0, "table"), CFS_E_PROTO);
	fclose(f);
}

#define T0 1764912345000ull

/* A history of n samples a second apart (skip: a sampler that missed the
 * seconds from 30 to 39): 1 MiB read and 2 Drive calls a second, a rate
 * of 200.5, 3 uploads pending. */
static void fill(struct cfs_hist *h, uint64_t n, int skip)
{
	cfs_hist_init(h);
	for (uint64_t k = 0; k < n; k++) {
		if (skip && k >= 30 && k < 40)
			continue;
		struct cfs_hist_sample s = { .read_bytes = k << 20, .drive_requests = 2 * k,
					     .api_rate_milli = 200500, .uploads_pending = 3,
					     .upload_bytes_left = 5 << 20, .cache_hits = k };
		CHECK_EQ(cfs_hist_push(h, &s, T0 + k * 1000 + (k == 7 ? 123 : 0)), 0);
	}
}

static char *history_text(const struct cfs_hist *h, uint64_t first, int json, unsigned step)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (json)
		cfs_stats_history_json(f, h, first);
	else
		cfs_stats_history_table(f, h, first, step);
	fclose(f);
	return buf;
}

static void history(void)
{
	static struct cfs_hist h;
	fill(&h, 0, 0);
	char *t = history_text(&h, 0, 1, 0);
	CHECK_STR(t, "{\"interval_s\":1,\"samples\":[]}\n");
	free(t);
	t = history_text(&h, 0, 0, 10);
	CHECK(strstr(t, "no history yet") != NULL);
	free(t);

	fill(&h, 9, 0);
	CHECK_EQ(cfs_stats_history_first(&h, 0), 0);
	CHECK_EQ(cfs_stats_history_first(&h, 2), 7);   /* 7 (.123 s late) and 8 */
	CHECK_EQ(cfs_stats_history_first(&h, 1), 8);   /* 7 is within 1 s, but one a second */
	CHECK_EQ(cfs_stats_history_first(&h, 0.5), 8);
	CHECK_EQ(cfs_stats_history_first(&h, 0.8), 8);
	CHECK_EQ(cfs_stats_history_first(&h, 1e6), 0);
	/* samples a little less than a second apart: 2 s hold 3 of them, and
	 * the last 2 seconds are still 2 samples */
	cfs_hist_init(&h);
	for (uint64_t k = 0; k < 5; k++) {
		struct cfs_hist_sample s = { .drive_requests = k };
		CHECK_EQ(cfs_hist_push(&h, &s, T0 + k * 998), 0);
	}
	CHECK_EQ(cfs_stats_history_first(&h, 2), 3);
	CHECK_EQ(cfs_stats_history_first(&h, 2.5), 2);
	fill(&h, 9, 0);
	t = history_text(&h, 7, 1, 0);
	CHECK_STR(t, "{\"interval_s\":1,\"samples\":["
		  "{\"t\":1764912352.123,\"read_bytes\":7340032,\"drive_bytes\":0,"
		  "\"drive_requests\":14,\"api_rate\":200.500,\"cache_hits\":7,"
		  "\"cache_misses\":0,\"uploads_pending\":3,\"upload_bytes\":0,"
		  "\"upload_bytes_left\":5242880},"
		  "{\"t\":1764912353.000,\"read_bytes\":8388608,\"drive_bytes\":0,"
		  "\"drive_requests\":16,\"api_rate\":200.500,\"cache_hits\":8,"
		  "\"cache_misses\":0,\"uploads_pending\":3,\"upload_bytes\":0,"
		  "\"upload_bytes_left\":5242880}]}\n");
	free(t);

	/* the table: the last minute in six rows of 10 s, oldest first */
	fill(&h, 100, 0);
	t = history_text(&h, cfs_stats_history_first(&h, 60), 0, 10);
	const char *now = strstr(t, "\n  now "), *first = strstr(t, "\n -50s ");
	CHECK(strncmp(t, "  ago      read/s", 17) == 0);
	CHECK(first && now && first < now && strstr(t, "-60s") == NULL);
	CHECK(now && strstr(now, "1.0 MiB") && strstr(now, " 2.0 ") && strstr(now, "200.5") &&
	      strstr(now, " 3 ") && strstr(now, "5.0 MiB"));
	int lines = 0;
	for (const char *p = t; (p = strchr(p, '\n')); p++)
		lines++;
	CHECK_EQ(lines, 7);
	free(t);

	/* a gap from 30 to 39 s: no row for the 10 s with one sample, and the
	 * row across the gap shows the true rates */
	fill(&h, 60, 1);
	t = history_text(&h, cfs_stats_history_first(&h, 60), 0, 10);
	now = strstr(t, " -10s ");
	CHECK(strstr(t, " -20s ") == NULL && strstr(t, " -30s ") != NULL);
	CHECK(now && strstr(now, "1.0 MiB") && strstr(now, " 2.0 "));
	free(t);
}

int main(void)
{
	table();
	machines();
	history();
	return check_done("test_stats");
}
