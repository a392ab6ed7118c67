/* progress: the pieces of the progress lines `colabfs warm` and `colabfs
 * sync` draw: a monotonic clock, byte counts for people, a bar, an ETA.
 *
 * Leaf module: libc only, pure functions but cfs_progress_now, safe from any
 * thread.  Every writer truncates to cap (cap >= 1) and NUL-terminates. */
#ifndef CFS_PROGRESS_H
#define CFS_PROGRESS_H

#include <stddef.h>

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

#endif
