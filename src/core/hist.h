/* hist: a short history of the counters, one sample a second for the last
 * ten minutes (CFS_HIST_LEN samples), kept by the daemon for `colabfs stats
 * --history` and the Python API's plots.
 *
 * Policy.  The ring is a fixed array: a push overwrites the oldest sample,
 * nothing is allocated per sample.  Samples are numbered in push order (the
 * sequence number, 0 for the first push of a daemon), which is how a reader
 * asks for the samples after those it has.  Time must move on: a push whose
 * t_ms is not after the newest sample's is refused.  A sampler that runs
 * late does not catch up with a burst of samples: cfs_hist_next_due skips
 * the missed ticks, so the history has a gap there (consecutive samples more
 * than an interval apart), and rates over it stay right because every
 * sample carries its own time; samples are never much closer than an
 * interval.
 *
 * Wire form.  A getxattr value is at most 64 KiB, and 600 samples as JSON
 * are about 150 KB, so the daemon serves the ring in pages
 * (user.colabfs.history.FROM, ctlname.h), each at most CFS_HIST_PAGE_MAX
 * bytes: one JSON object per line (integers only), first
 *   {"interval_s":1,"from":F,"next":N,"end":E}
 * then one line per sample, sequence numbers F to N - 1, oldest first:
 *   {"t_ms":...,"read_bytes":...,...,"api_rate_milli":...}
 * F is the first sample kept at or after the FROM asked for, E the number of
 * samples pushed so far: a reader asks again from N while N < E.  t_ms is
 * unix time in milliseconds and api_rate_milli the pace in calls per 1000 s.
 *
 * Pure and not thread-safe: the sampler (sampler.h) keeps one under a lock. */
#ifndef CFS_HIST_H
#define CFS_HIST_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define CFS_HIST_LEN 600
#define CFS_HIST_INTERVAL_MS 1000
#define CFS_HIST_PAGE_MAX 60000 /* below the 64 KiB of a getxattr value */

/* One sample.  Counters (cumulative since the daemon started) and gauges,
 * all of them names of `colabfs stats --json` (stats.h says which). */
struct cfs_hist_sample {
	uint64_t t_ms;              /* unix time, ms */
	uint64_t read_bytes;        /* reads_bytes_total: bytes returned by read() */
	uint64_t drive_bytes;       /* drive_media_bytes_total: file bytes downloaded */
	uint64_t drive_requests;    /* drive_requests_total: Drive API calls */
	uint64_t api_rate_milli;    /* api_rate (gauge), calls per 1000 s */
	uint64_t cache_hits;        /* cache_hits_total (blocks) */
	uint64_t cache_misses;      /* cache_misses_total (blocks) */
	uint64_t uploads_pending;   /* uploads_pending (gauge, files) */
	uint64_t upload_bytes;      /* upload_bytes_total: bytes Drive confirmed */
	uint64_t upload_bytes_left; /* uploads_bytes_left (gauge) */
};

/* The sample's fields in wire order: the name on the wire, the name
 * `colabfs stats --history --json` prints, where it is, and whether the
 * value is thousandths (printed as a decimal number: t, api_rate). */
struct cfs_hist_field {
	const char *wire, *name;
	size_t off;
	int milli;
};
#define CFS_HIST_NFIELDS 10
extern const struct cfs_hist_field cfs_hist_fields[CFS_HIST_NFIELDS];

static inline uint64_t cfs_hist_value(const struct cfs_hist_sample *s, size_t field)
{
	return *(const uint64_t *)((const char *)s + cfs_hist_fields[field].off);
}

struct cfs_hist {
	struct cfs_hist_sample s[CFS_HIST_LEN];
	uint64_t end; /* samples pushed: the sequence number of the next */
};

void cfs_hist_init(struct cfs_hist *h);

/* Stores s with its time set to t_ms, over the oldest sample when full.
 * Returns 0, or -EINVAL (nothing stored) when t_ms is not after the newest
 * sample's time. */
int cfs_hist_push(struct cfs_hist *h, const struct cfs_hist_sample *s, uint64_t t_ms);

/* The sequence number of the oldest sample kept (== h->end when empty). */
uint64_t cfs_hist_oldest(const struct cfs_hist *h);

/* The sample numbered seq, or NULL when it is not kept (overwritten, or not
 * pushed yet). */
const struct cfs_hist_sample *cfs_hist_get(const struct cfs_hist *h, uint64_t seq);

/* The sequence number of the first kept sample taken at or after t_ms
 * (h->end when none was). */
uint64_t cfs_hist_since(const struct cfs_hist *h, uint64_t t_ms);

/* When a sampler that took a sample at now_ms, due at due_ms, takes the
 * next: due + interval_ms (a little lateness does not shift the grid); when
 * now_ms is already there (it ran a whole interval or more late),
 * now_ms + interval_ms: the missed ticks are skipped, never sampled in a
 * burst. */
int64_t cfs_hist_next_due(int64_t due_ms, int64_t now_ms, int64_t interval_ms);

/* Appends the page of the samples from sequence number from (or the oldest
 * kept, if later) to out: as many whole lines as fit in max bytes with a
 * NUL, at least one when any is kept.  Returns 0, -ENOSPC (max cannot hold
 * the header and one sample) or -ENOMEM. */
int cfs_hist_page(const struct cfs_hist *h, uint64_t from, size_t max, struct cfs_buf *out);

/* Reads a page into h (pushing its samples; h keeps the last CFS_HIST_LEN),
 * and *next and *end from its header.  Unknown names are skipped; a missing
 * header name or t_ms, a negative number, or a sample not after the one
 * before it is malformed.  Returns 0, CFS_E_PROTO or -ENOMEM. */
int cfs_hist_parse_page(const char *txt, struct cfs_hist *h, uint64_t *next, uint64_t *end);

#endif
