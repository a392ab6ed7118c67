/* warm: the `colabfs warm` command.
 *
 * Walks the given files and folders (and the paths listed in --list FILE),
 * splits every file into 64 MiB ranges, and has the daemon fetch them with
 * full parallelism (the user.colabfs.warm.OFFSET.LENGTH attribute, which
 * returns once the range is cached).  Shows a progress bar (files, bytes,
 * rate, ETA) on a terminal and a plain line every few seconds otherwise. */
#ifndef CFS_WARM_H
#define CFS_WARM_H

/* argv: the words after "warm".  Returns the exit status (0, 1 on errors,
 * 2 for a usage error). */
int cfs_warm_main(int argc, char **argv);

#endif
