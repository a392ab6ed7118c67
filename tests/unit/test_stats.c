/* Unit tests: rendering `colabfs stats` (src/core/stats.h) from a daemon's JSON:
 * the table puts the write path's names in an "uploads" section after the
 * others, bytes in binary units, the last upload error as its errno name;
 * --json and --prometheus pass every name through unchanged. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "err.h"
#include "stats.h"

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

int main(void)
{
	table();
	machines();
	return check_done("test_stats");
}
