/* stats_cmd: `colabfs stats` and its --history (see stats_cmd.h). */
#define _GNU_SOURCE
#include "stats_cmd.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h> /* isfinite: a macro, no libm */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "ctl.h"
#include "err.h"
#include "progress.h"
#include "stats.h"

#define USAGE "usage: colabfs stats [PATH] [--json|--prometheus|--watch[=S]|--history[=S]]"
#define TABLE_WINDOW_S 60
#define TABLE_ROWS 6
#define MAX_PAGES 64 /* 600 samples take 3 pages; a daemon that pages forever is cut off */

uint64_t cfs_stats_history_first(const struct cfs_hist *h, double seconds)
{
	const struct cfs_hist_sample *n = h->end ? cfs_hist_get(h, h->end - 1) : NULL;
	if (!n || seconds <= 0 || seconds * 1000 >= (double)n->t_ms)
		return cfs_hist_oldest(h);
	uint64_t ms = (uint64_t)(seconds * 1000);
	uint64_t q = cfs_hist_since(h, n->t_ms - ms + 1);
	/* samples a little less than a second apart: still one a second */
	uint64_t most = (ms + CFS_HIST_INTERVAL_MS - 1) / CFS_HIST_INTERVAL_MS;
	return h->end - q > most ? h->end - most : q;
}

void cfs_stats_history_json(FILE *out, const struct cfs_hist *h, uint64_t first)
{
	fprintf(out, "{\"interval_s\":%d,\"samples\":[", CFS_HIST_INTERVAL_MS / 1000);
	for (uint64_t q = first; q < h->end; q++) {
		const struct cfs_hist_sample *s = cfs_hist_get(h, q);
		if (!s)
			continue;
		for (size_t f = 0; f < CFS_HIST_NFIELDS; f++) {
			uint64_t v = cfs_hist_value(s, f);
			fprintf(out, "%s\"%s\":", f ? "," : q > first ? ",{" : "{",
				cfs_hist_fields[f].name);
			if (cfs_hist_fields[f].milli)
				fprintf(out, "%" PRIu64 ".%03" PRIu64, v / 1000, v % 1000);
			else
				fprintf(out, "%" PRIu64, v);
		}
		fputc('}', out);
	}
	fputs("]}\n", out);
}

/* The last sample at or before t_ms, not before first (or first - 1 when
 * there is none). */
static uint64_t at_or_before(const struct cfs_hist *h, uint64_t first, uint64_t t_ms)
{
	uint64_t q = cfs_hist_since(h, t_ms + 1);
	return q > first ? q - 1 : first - 1;
}

static void rate(char *buf, size_t cap, uint64_t a, uint64_t b, double dt, int bytes)
{
	double r = b > a ? (double)(b - a) / dt : 0;
	if (bytes)
		cfs_progress_bytes(buf, cap, r);
	else
		snprintf(buf, cap, "%.1f", r);
}

void cfs_stats_history_table(FILE *out, const struct cfs_hist *h, uint64_t first,
			     unsigned step_s)
{
	if (first < cfs_hist_oldest(h))
		first = cfs_hist_oldest(h);
	if (h->end < first + 2) {
		fputs("no history yet: the daemon takes a sample every second\n", out);
		return;
	}
	const struct cfs_hist_sample *newest = cfs_hist_get(h, h->end - 1);
	uint64_t step = (uint64_t)(step_s ? step_s : 1) * 1000;
	uint64_t span = newest->t_ms - cfs_hist_get(h, first)->t_ms;
	uint64_t rows = span / step + (span % step != 0);
	fprintf(out, "%5s %11s %11s %8s %8s %8s %8s %7s %11s %11s\n", "ago", "read/s", "Drive/s",
		"calls/s", "api rate", "hits/s", "misses/s", "uploads", "upload/s", "left");
	for (uint64_t k = rows; k-- > 0;) {
		uint64_t et = newest->t_ms - k * step;
		uint64_t e = at_or_before(h, first, et), b = at_or_before(h, first, et - step);
		if (e < first || e == UINT64_MAX)
			continue;
		if (b < first || b == UINT64_MAX)
			b = first;
		if (e <= b)
			continue;
		const struct cfs_hist_sample *x = cfs_hist_get(h, b), *y = cfs_hist_get(h, e);
		double dt = (double)(y->t_ms - x->t_ms) / 1000;
		char ago[24], rd[16], dr[16], calls[16], hits[16], miss[16], up[16], left[16];
		if (k)
			snprintf(ago, sizeof(ago), "-%" PRIu64 "s", k * step / 1000);
		else
			snprintf(ago, sizeof(ago), "now");
		rate(rd, sizeof(rd), x->read_bytes, y->read_bytes, dt, 1);
		rate(dr, sizeof(dr), x->drive_bytes, y->drive_bytes, dt, 1);
		rate(calls, sizeof(calls), x->drive_requests, y->drive_requests, dt, 0);
		rate(hits, sizeof(hits), x->cache_hits, y->cache_hits, dt, 0);
		rate(miss, sizeof(miss), x->cache_misses, y->cache_misses, dt, 0);
		rate(up, sizeof(up), x->upload_bytes, y->upload_bytes, dt, 1);
		cfs_progress_bytes(left, sizeof(left), (double)y->upload_bytes_left);
		fprintf(out, "%5s %11s %11s %8s %8.1f %8s %8s %7" PRIu64 " %11s %11s\n", ago, rd, dr,
			calls, (double)y->api_rate_milli / 1000, hits, miss, y->uploads_pending, up,
			left);
	}
}

/* ---- the command ------------------------------------------------------------ */

static int usage_error(const char *why)
{
	fprintf(stderr, "colabfs: %s\n", why);
	return 2;
}

static int ctl_error(const char *path, int rc)
{
	fprintf(stderr, "colabfs: %s: %s\n", path, cfs_ctl_strerror(-rc));
	return 1;
}

/* The daemon's history, page after page, into h.  Returns 0, -errno from
 * the attribute, or CFS_E_PROTO. */
static int read_history(const char *path, struct cfs_hist *h)
{
	uint64_t from = 0, next = 0, end = 0;
	for (int pages = 0; pages < MAX_PAGES; pages++) {
		char name[CFS_CTLNAME_MAX], *txt = NULL;
		struct cfs_ctlname r = { .kind = CFS_CTL_HISTORY, .off = from };
		uint64_t had = h->end;
		int rc = cfs_ctlname_format(&r, name, sizeof(name));
		if (!rc)
			rc = cfs_ctl_get(path, name, &txt);
		if (!rc)
			rc = cfs_hist_parse_page(txt, h, &next, &end);
		free(txt);
		if (rc || next >= end || h->end == had)
			return rc;
		from = next;
	}
	return 0;
}

static int history(const char *path, double seconds, int json)
{
	struct cfs_hist *h = malloc(sizeof(*h));
	if (!h)
		return ctl_error(path, -ENOMEM);
	cfs_hist_init(h);
	int rc = read_history(path, h);
	pid_t pid;
	if (rc == -ENODATA && cfs_ctl_pid(path, &pid) == 0) {
		fprintf(stderr, "colabfs: %s: this mount's daemon keeps no history (an older "
			"version)\n", path);
		rc = 1;
	} else if (rc == CFS_E_PROTO) {
		fprintf(stderr, "colabfs: %s: the daemon sent a malformed history\n", path);
		rc = 1;
	} else if (rc) {
		rc = ctl_error(path, rc);
	} else if (json) {
		cfs_stats_history_json(stdout, h, cfs_stats_history_first(h, seconds));
	} else {
		double w = seconds > 0 ? seconds : TABLE_WINDOW_S;
		unsigned step = w / TABLE_ROWS >= 1 ? (unsigned)(w / TABLE_ROWS) : 1;
		cfs_stats_history_table(stdout, h, cfs_stats_history_first(h, w), step);
	}
	free(h);
	return rc;
}

/* "--NAME" alone (*v 0) or "--NAME=SECONDS" (*v the number, within lo..hi).
 * Returns 1 when arg is that option, 0 when it is not, -1 when malformed. */
static int seconds_opt(const char *arg, const char *name, double lo, double hi, double *v)
{
	size_t n = strlen(name);
	if (strncmp(arg, name, n) != 0 || (arg[n] && arg[n] != '='))
		return 0;
	*v = 0;
	if (!arg[n])
		return 1;
	char *end;
	errno = 0;
	*v = strtod(arg + n + 1, &end);
	return arg[n + 1] && !*end && !errno && isfinite(*v) && *v >= lo && *v <= hi ? 1 : -1;
}

int cfs_stats_main(int argc, char **argv)
{
	const char *path = ".", *format = "table";
	double watch = 0, hist_s = 0;
	int watching = 0, hist = 0;
	for (int i = 0; i < argc; i++) {
		int w = seconds_opt(argv[i], "--watch", 0.1, 3600, &watch);
		int y = w ? 0 : seconds_opt(argv[i], "--history", 1, 1e6, &hist_s);
		if (w < 0)
			return usage_error("--watch wants seconds from 0.1 to 3600");
		if (y < 0)
			return usage_error("--history wants seconds, at least 1");
		watching |= w;
		hist |= y;
		if (w || y)
			continue;
		if (strcmp(argv[i], "--json") == 0)
			format = "json";
		else if (strcmp(argv[i], "--prometheus") == 0)
			format = "prometheus";
		else if (argv[i][0] == '-')
			return usage_error(USAGE);
		else
			path = argv[i];
	}
	if (hist && (watching || strcmp(format, "prometheus") == 0))
		return usage_error("--history goes with --json only");
	if (hist)
		return history(path, hist_s, strcmp(format, "json") == 0);
	if (watching && !watch)
		watch = 1;
	char *prev = NULL;
	double prev_t = 0;
	for (;;) {
		char *cur;
		int rc = cfs_ctl_stats(path, &cur);
		if (rc) {
			free(prev);
			return ctl_error(path, rc);
		}
		double t = ((double)cfs_clock_mono_ms() / 1000.0);
		if (watch && isatty(1))
			fputs("\033[H\033[2J", stdout);
		if (cfs_stats_render(stdout, cur, prev, t - prev_t, format)) {
			fprintf(stderr, "colabfs: the daemon sent malformed stats\n");
			free(cur);
			free(prev);
			return 1;
		}
		fflush(stdout);
		free(prev);
		prev = cur;
		prev_t = t;
		if (!watch)
			break;
		struct timespec d = { (time_t)watch, (long)((watch - (long)watch) * 1e9) };
		nanosleep(&d, NULL);
	}
	free(prev);
	return 0;
}
