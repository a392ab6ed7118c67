/* stats_cmd: the `colabfs stats` command.
 *
 *   colabfs stats [PATH] [--json | --prometheus | --watch[=SECONDS]]
 *   colabfs stats [PATH] --history[=SECONDS] [--json]
 *
 * The counters come from user.colabfs.stats on PATH (default: the current
 * folder) and are rendered by stats.h.  --history reads the daemon's history
 * of the last ten minutes instead (hist.h: user.colabfs.history, page after
 * page) and prints, with --json, one JSON object, samples oldest first:
 *   {"interval_s":1,"samples":[{"t":1764912345.000,"read_bytes":N,
 *     "drive_bytes":N,"drive_requests":N,"api_rate":X,"cache_hits":N,
 *     "cache_misses":N,"uploads_pending":N,"upload_bytes":N,
 *     "upload_bytes_left":N},...]}
 * (t unix seconds and api_rate calls per second, both with three decimals;
 * the others integers), every sample kept unless SECONDS limits it to those
 * taken less than SECONDS before the newest, at most one a second; without
 * --json a table of per-second
 * rates over the last minute (or SECONDS), a line per sixth of it.
 *
 * Exit status: 0, 1 when the mount cannot be read (or keeps no history: an
 * older daemon), 2 for a usage error.  The renderers below are pure, for
 * tests/unit/test_stats.c. */
#ifndef CFS_STATS_CMD_H
#define CFS_STATS_CMD_H

#include <stdint.h>
#include <stdio.h>

#include "hist.h"

/* argv: the words after "stats".  Returns the exit status. */
int cfs_stats_main(int argc, char **argv);

/* The first sample taken less than seconds before h's newest, keeping at
 * most one a second (seconds rounded up) of them: samples a little less
 * than a second apart do not make 3 of "the last 2 seconds" (seconds <= 0:
 * the oldest kept). */
uint64_t cfs_stats_history_first(const struct cfs_hist *h, double seconds);

/* The --history --json object of h's samples from sequence number first. */
void cfs_stats_history_json(FILE *out, const struct cfs_hist *h, uint64_t first);

/* The --history table of h's samples from first: a header, then rows of
 * per-second rates over step_s seconds each (the newest row ends at the
 * newest sample, labelled "now"; the others by their age, "-10s"), oldest
 * first; the gauges (api rate, uploads pending, bytes left) as they were at
 * the row's end.  Fewer than two samples: a line that says so. */
void cfs_stats_history_table(FILE *out, const struct cfs_hist *h, uint64_t first,
			     unsigned step_s);

#endif
