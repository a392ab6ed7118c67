/* progress: progress line pieces (see progress.h). */
#include "progress.h"
#include "clock.h"
#include "hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double cfs_progress_now(void)
{
	return (double)cfs_clock_ns(CLOCK_MONOTONIC) / 1e9;
}

void cfs_progress_bytes(char *buf, size_t cap, double v)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int i = 0;
	while (v >= 1024 && i < 4) {
		v /= 1024;
		i++;
	}
	snprintf(buf, cap, "%.1f %s", v, u[i]);
}

void cfs_progress_bar(char *buf, size_t cap, double frac)
{
	if (!(frac >= 0)) /* NaN too */
		frac = 0;
	if (frac > 1)
		frac = 1;
	size_t width = cap - 1, fill = (size_t)(frac * (double)width);
	for (size_t i = 0; i < width; i++)
		buf[i] = i < fill ? '#' : '.';
	buf[width] = '\0';
}

void cfs_progress_eta(char *buf, size_t cap, double s)
{
	if (!(s >= 0) || s >= 99 * 3600.0)
		snprintf(buf, cap, "--:--");
	else
		snprintf(buf, cap, "%d:%02d", (int)s / 60, (int)s % 60);
}

int cfs_progress_due(struct cfs_progress_gate *g, const char *line, double t, double min_s,
		     int final)
{
	uint64_t h = cfs_hash_fnv1a(line);
	if (g->printed && (h == g->last_hash || (!final && t - g->last_t < min_s)))
		return 0;
	g->printed++;
	g->last_t = t;
	g->last_hash = h;
	return 1;
}

void cfs_progress_emit(FILE *out, struct cfs_progress_gate *g, char *txt, double t,
		       double min_s, int final)
{
	if (txt && (!g || cfs_progress_due(g, txt, t, min_s, final))) {
		fprintf(out, "%s\n", txt);
		fflush(out);
	}
	free(txt);
}
