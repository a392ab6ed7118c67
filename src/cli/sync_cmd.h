/* sync_cmd: the `colabfs sync` command.
 *
 *   colabfs sync [--timeout SECONDS] [--quiet] [--json] [PATH...]
 *
 * Writes are write-back: close() returns once a file's bytes are staged on
 * local disk and its upload runs later, in the background.  sync waits until
 * Drive holds everything written at or below each PATH (default: the current
 * folder, which must be in a mount).  Every 200 ms it reads
 * user.colabfs.sync on each PATH (ctlname.h), which also tells the daemon to
 * start those uploads now, skipping --write-back-delay, and replies with a
 * status (json.h, cfs_json_parse_sync).
 *
 * Exit status: 0 when no PATH has anything pending; 1 as soon as a reply
 * lists a failed entry (one the daemon cannot upload without the user: quota,
 * permission, size), each printed with its reason, or at the --timeout with
 * what is still pending and why it waits, or for a daemon that refuses or
 * is gone; 2 for a usage error or a PATH that is not in a colabfs mount, or
 * on a mount whose daemon does not answer sync (read-only, older).
 *
 * Progress goes to stderr: a bar redrawn on a terminal, a plain line every
 * 5 s otherwise, nothing with --quiet (errors are still printed).
 *
 * --json: no bar and no "synced:" line; instead one JSON object a line on
 * stdout, flushed: after each poll, when it changed and at most every 0.5 s
 * (and at the end if it changed),
 *   {"event":"progress","done_bytes":N,"total_bytes":N,"files":N,
 *    "uploading":N,"waiting":N,"why":"..."}
 * (the numbers of cfs_sync_progress; why "" when nothing waits), then
 * always a last line:
 *   {"event":"done","ok":true}
 *   {"event":"done","ok":false,"failed":[{"path":"...","error":"..."},...],
 *    "error":WORD}
 * WORD: "failed" (failed lists them), "timeout", "not_mounted",
 * "unsupported", "denied", "gone", "protocol" (a malformed reply),
 * "bad_path" (a PATH that does not exist), "error" (anything else).  With
 * --quiet only the done line.  A usage error prints no line (exit 2).
 * Errors still go to stderr as without --json; exit statuses are the same.
 * The pieces below are pure, for the unit test (tests/unit/test_sync.c). */
#ifndef CFS_SYNC_CMD_H
#define CFS_SYNC_CMD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "json.h"

/* argv: the words after "sync".  Returns the exit status. */
int cfs_sync_main(int argc, char **argv);

enum cfs_sync_verdict {
	CFS_SYNC_PENDING = 0, /* uploads still to finish: poll again */
	CFS_SYNC_DONE,        /* nothing pending at any PATH: exit 0 */
	CFS_SYNC_FAILED,      /* a reply lists a failed entry: exit 1 */
};

/* The verdict on one round of replies, one per PATH (n >= 1). */
enum cfs_sync_verdict cfs_sync_decide(const struct cfs_json_sync *st, size_t n);

/* What the rounds so far add up to.  Zero it before the first round.  Bytes
 * done are the confirmed bytes of what was pending at the first round plus
 * every fall of bytes_left since, so a file that finishes (and leaves the
 * reply) does not move the bar back, and one written meanwhile grows the
 * total.  Two PATHs where one is inside the other count twice. */
struct cfs_sync_progress {
	int rounds;
	double t0, t;                /* seconds: the first round, the latest */
	uint64_t done, sent;         /* sent: bytes confirmed since the first round */
	uint64_t left, files, uploading, waiting; /* the latest round, summed */
	char why[96];                /* the first waiting entry's reason, or "" */
};

/* Adds a round of replies (one per PATH) taken at time t (seconds). */
void cfs_sync_progress_add(struct cfs_sync_progress *p, const struct cfs_json_sync *st, size_t n,
			   double t);

/* The progress line, without a newline: tty, a bar for a "\r" redraw,
 * else a plain "sync: ..." line for a log. */
void cfs_sync_progress_line(const struct cfs_sync_progress *p, int tty, char *buf, size_t cap);

/* The --json lines, malloc'd into *txt without a newline: the progress of
 * p, and the done line (error NULL: ok; else failed lists the failed
 * entries of st[0..n), st may be NULL).  Returns 0 or -ENOMEM. */
int cfs_sync_json_progress(const struct cfs_sync_progress *p, char **txt);
int cfs_sync_json_done(const struct cfs_json_sync *st, size_t n, const char *error, char **txt);

/* Prints "colabfs: sync: PATH: ERROR" for each failed entry, then how many
 * other files are still pending.  Paths and reasons are the daemon's, with
 * control characters shown as '?'. */
void cfs_sync_print_failed(FILE *out, const struct cfs_json_sync *st, size_t n);

/* Prints what is still pending at the timeout (waited seconds) and why each
 * waiting entry waits. */
void cfs_sync_print_pending(FILE *out, const struct cfs_json_sync *st, size_t n, double waited);

#endif
