/* warm: the `colabfs warm` command.
 *
 * Walks the given files and folders (and the paths listed in --list FILE),
 * splits every file into 64 MiB ranges, and has the daemon fetch them with
 * full parallelism (the user.colabfs.warm.OFFSET.LENGTH attribute, which
 * returns once the range is cached).  Shows a progress bar (files, bytes,
 * rate, ETA) on a terminal and a plain line every few seconds otherwise.
 *
 * --json: no bar and no "warmed" line; instead one JSON object a line on
 * stdout, flushed: the totals at once, then when they changed, at most
 * every 0.5 s, and the final numbers,
 *   {"event":"progress","done_bytes":N,"total_bytes":N,"files_done":N,"files":N}
 * (done_bytes counts the ranges finished, failed ones too, so it ends at
 * total_bytes), then always a last line
 *   {"event":"done","ok":true,"error":null}
 *   {"event":"done","ok":false,"error":WORD}
 * WORD: "failed" (some ranges failed: each is on stderr), "denied" (not the
 * mount's owner), "bad_path" (a PATH or the --list could not be read).  A
 * usage error prints no line (exit 2). */
#ifndef CFS_WARM_H
#define CFS_WARM_H

#include <stdint.h>

/* argv: the words after "warm".  Returns the exit status (0, 1 on errors,
 * 2 for a usage error). */
int cfs_warm_main(int argc, char **argv);

struct cfs_warm_counts {
	uint64_t done_bytes, total_bytes;
	uint64_t files_done, files;
};

/* The --json lines, malloc'd into *txt without a newline: the progress,
 * and the done line (error NULL: ok).  Pure; 0 or -ENOMEM. */
int cfs_warm_json_progress(const struct cfs_warm_counts *c, char **txt);
int cfs_warm_json_done(const char *error, char **txt);

#endif
