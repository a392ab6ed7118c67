/* stats: the numbers `colabfs stats` shows, gathered from every layer.
 *
 * The daemon renders them as one flat JSON object of integers (served as
 * the user.colabfs.stats attribute); the command line renders that as a
 * table, JSON or Prometheus text (statsfmt.c: cfs_stats_render and
 * cfs_stats_recovery_name, which need none of the daemon's libraries).  Names are stable: they are the contract
 * with dashboards.  Counters end in _total; gauges do not. */
#ifndef CFS_STATS_H
#define CFS_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "buf.h"
#include "hist.h"

struct cfs_drive;
struct cfs_store;
struct cfs_reader;
struct cfs_tiered;
struct cfs_vfs;

/* Crash recovery: how the mount survives its server's death.  The supervisor
 * (fuse/super.h) keeps these in memory it shares with the server; the
 * server only reads them. */
enum cfs_recovery_mode {
	CFS_RECOVERY_OFF = 0,     /* one process: its death ends the mount */
	CFS_RECOVERY_RESEND = 1,  /* the kernel resends what a dead server had read */
	CFS_RECOVERY_FORWARD = 2, /* requests recorded in shared memory, served again */
	CFS_RECOVERY_NONE = 3,    /* restarted without replay (a test control) */
};

/* FUSE requests by kind (fuse_requests_<kind>_total): fuse/serve_io.c
 * maps the kernel's opcodes onto these; the rest count as "other". */
enum cfs_stats_fuse_op {
	CFS_FOP_LOOKUP, CFS_FOP_GETATTR, CFS_FOP_SETATTR, CFS_FOP_OPEN, CFS_FOP_READ,
	CFS_FOP_WRITE, CFS_FOP_FLUSH, CFS_FOP_RELEASE, CFS_FOP_FSYNC, CFS_FOP_CREATE,
	CFS_FOP_OPENDIR, CFS_FOP_READDIR, CFS_FOP_READDIRPLUS, CFS_FOP_RELEASEDIR,
	CFS_FOP_FORGET, CFS_FOP_GETXATTR, CFS_FOP_STATFS, CFS_FOP_INTERRUPT, CFS_FOP_IOCTL,
	CFS_FOP_OTHER,
	CFS_FOP_COUNT
};

struct cfs_stats_recovery {
	uint32_t mode;            /* enum cfs_recovery_mode */
	int32_t super_pid;
	int64_t mounted_ms;       /* CLOCK_MONOTONIC at mount */
	uint64_t restarts;        /* servers started after a death */
	uint64_t resends;         /* FUSE_NOTIFY_RESEND written */
	uint64_t resent;          /* requests in flight at a death, resent by the kernel */
	uint64_t replayed;        /* requests a new server served again (forward mode) */
	uint64_t poisoned;        /* requests answered EIO by the crash-loop guard */
	uint64_t requests;        /* requests the servers read from the kernel */
	uint64_t journalled;      /* repeated requests answered from the reply journal */
	uint64_t by_op[CFS_FOP_COUNT]; /* requests by kind, as `requests` */
};

/* The FUSE worker pool's counters (fuse/loop.c writes them with relaxed
 * atomic stores; a server's own, from its start). */
struct cfs_stats_loop {
	uint64_t served_inline; /* quick requests the reader served itself */
	uint64_t handoffs;      /* other requests: the reader's role went to another worker */
	uint64_t rescues;       /* the role taken from a reader held up by a quick request */
	uint64_t workers;       /* workers started (a gauge) */
};

/* The name of a recovery mode ("off", "resend", ...). */
const char *cfs_stats_recovery_name(uint32_t mode);

struct cfs_stats_src {
	struct cfs_vfs *vfs;
	struct cfs_drive *drive;
	struct cfs_store *store;
	struct cfs_reader *reader;
	struct cfs_tiered *tiered; /* NULL without --shared-cache: its names are 0 */
	int64_t started_ms; /* CLOCK_MONOTONIC */
	/* NULL without a supervisor; else its counters (read with relaxed
	 * atomic loads: another process writes them) */
	const struct cfs_stats_recovery *recovery;
	const struct cfs_stats_loop *loop; /* NULL: its names are 0 */
};

/* Appends the JSON object to out.  Returns 0 or -ENOMEM. */
int cfs_stats_json(const struct cfs_stats_src *s, struct cfs_buf *out);

/* The counters the history keeps (hist.h), read as cfs_stats_json reads
 * them (t_ms is left 0): reads_bytes_total, drive_media_bytes_total,
 * drive_requests_total, api_rate (exact, not rounded), cache_hits_total,
 * cache_misses_total, uploads_pending, upload_bytes_total and
 * uploads_bytes_left. */
void cfs_stats_sample(const struct cfs_stats_src *s, struct cfs_hist_sample *out);

/* Renders a stats JSON document.  format: "table", "json" or "prometheus".
 * The table shows every name, bytes in binary units; the write path's names
 * (uploads_*, writes_bytes_total, staging_bytes, and the Drive client's
 * upload counters) come last, in an "uploads" section, uploads_last_error as
 * its errno name.  JSON and Prometheus pass every name through unchanged.
 * prev (may be NULL) and dt_s give per-second rates in the table (--watch).
 * Returns 0 or CFS_E_PROTO for a document that is not flat integers. */
int cfs_stats_render(FILE *out, const char *json, const char *prev, double dt_s,
		     const char *format);

#endif
