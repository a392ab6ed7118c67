/* sampler: the thread that keeps the daemon's counter history (hist.h).
 *
 * Once a second (CFS_HIST_INTERVAL_MS) it reads the counters the history
 * keeps from the mount's stats sources (cfs_stats_sample, the same counters
 * `colabfs stats --json` prints) and pushes them with the time, on a grid
 * that skips ticks it was too late for (cfs_hist_next_due).  The time is
 * the wall clock when the sampler started plus CLOCK_MONOTONIC since, so it
 * never steps back with the wall clock and consecutive samples are about an
 * interval apart.  The first sample is taken at once.  Pages of the history
 * (the user.colabfs.history attribute, ctlname.h) are rendered under the
 * sampler's lock, never while it reads the counters.
 *
 * The history lives in the serving process: a server restarted by crash
 * recovery begins a new one (its counters begin at 0 too). */
#ifndef CFS_SAMPLER_H
#define CFS_SAMPLER_H

#include <stdint.h>

#include "buf.h"
#include "stats.h"

struct cfs_sampler;

/* Starts sampling src, which must stay valid (and its sources alive) until
 * cfs_sampler_stop.  Returns 0, -ENOMEM or -EAGAIN (no thread). */
int cfs_sampler_start(const struct cfs_stats_src *src, struct cfs_sampler **out);

/* Stops the thread and frees; NULL is safe. */
void cfs_sampler_stop(struct cfs_sampler *s);

/* Appends the page of the history from sequence number from (hist.h,
 * cfs_hist_page with CFS_HIST_PAGE_MAX) to out.  Returns 0 or -ENOMEM. */
int cfs_sampler_page(struct cfs_sampler *s, uint64_t from, struct cfs_buf *out);

#endif
