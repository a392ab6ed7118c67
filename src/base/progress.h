/* progress: the pieces of the progress lines `colabfs warm` and `colabfs
 * sync` draw: a monotonic clock, byte counts for people, a bar, an ETA, and
 * when their --json lines are due.
 *
 * Leaf module: libc only, pure functions but cfs_progress_now, safe from any
 * thread.  Every writer truncates to cap (cap >= 1) and NUL-terminates. */
#ifndef CFS_PROGRESS_H
#define CFS_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CFS_PROGRESS_BAR 30 /* characters in warm's bar; its buffer wants one more */

/* CLOCK_MONOTONIC in seconds. */
double cfs_progress_now(void);

/* "512.0 B", "1.5 KiB", ... up to TiB. */
void cfs_progress_bytes(char *buf, size_t cap, double bytes);

/* A bar of cap - 1 characters: '#' for the share frac (clamped to [0, 1])
 * and '.' for the rest. */
void cfs_progress_bar(char *buf, size_t cap, double frac);

/* "M:SS" of seconds (negative, NaN or past 99 hours: "--:--"). */
void cfs_progress_eta(char *buf, size_t cap, double seconds);

/* When a --json progress line is printed: the first one at once; then a
 * line that differs from the last one printed, at most one each min_s
 * seconds; a final line (the state at the end) at once if it differs.  A
 * change held back is printed at the next call after min_s, so none is
 * lost for long.  Zero the gate before the first call. */
struct cfs_progress_gate {
	int printed;        /* lines printed so far */
	double last_t;      /* when the last one was */
	uint64_t last_hash; /* and its FNV-1a (hash.h) */
};

/* 1 when line is to be printed now (the gate then counts it printed), else 0. */
int cfs_progress_due(struct cfs_progress_gate *g, const char *line, double t, double min_s,
		     int final);

/* Prints txt (malloc'd, freed here; NULL prints nothing) and a newline on
 * out, flushed so a reader sees it at once, when g says it is due (g NULL:
 * always). */
void cfs_progress_emit(FILE *out, struct cfs_progress_gate *g, char *txt, double t,
		       double min_s, int final);

#endif
