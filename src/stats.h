/* stats: the numbers `colabfs stats` shows, gathered from every layer.
 *
 * The daemon renders them as one flat JSON object of integers (served as
 * the user.colabfs.stats attribute); the command line renders that as a
 * table, JSON or Prometheus text.  Names are stable: they are the contract
 * with dashboards.  Counters end in _total; gauges do not. */
#ifndef CFS_STATS_H
#define CFS_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "buf.h"

struct cfs_drive;
struct cfs_store;
struct cfs_reader;
struct cfs_vfs;

struct cfs_stats_src {
	struct cfs_vfs *vfs;
	struct cfs_drive *drive;
	struct cfs_store *store;
	struct cfs_reader *reader;
	int64_t started_ms; /* CLOCK_MONOTONIC */
};

/* Appends the JSON object to out.  Returns 0 or -ENOMEM. */
int cfs_stats_json(const struct cfs_stats_src *s, struct cfs_buf *out);

/* Renders a stats JSON document.  format: "table", "json" or "prometheus".
 * prev (may be NULL) and dt_s give per-second rates in the table (--watch).
 * Returns 0 or CFS_E_PROTO for a document that is not flat integers. */
int cfs_stats_render(FILE *out, const char *json, const char *prev, double dt_s,
		     const char *format);

#endif
