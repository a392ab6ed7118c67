/* order: `colabfs warm --ordered`, an order hint from the command line.
 *
 * The files given (PATHs, then the lines of each --list FILE, in the order
 * of the arguments; "-" is standard input) are the order a reader will
 * open them in.  Nothing is downloaded here and nothing waits: the list is
 * handed to the mount that holds the first path, which fetches the files in
 * that order ahead of the reader (src/core/hint.h).  How: the paths,
 * relative to the mount's top, go one a line into a file in the folder
 * "hints" of the mount's cache folder (user.colabfs.cache_dir), named by a
 * number ID, and the attribute user.colabfs.order.ID on the mount's top
 * has the daemon read it (and delete it).  The folder is made mode 0700
 * and, when root runs this for a mount of another user, given to that
 * user, as is the file.
 *
 * Paths are not looked up one by one (a million stat calls would take
 * longer than the epoch they describe): they are made absolute and tidied
 * as text ("." and ".." and repeated slashes), and must lie below the
 * mount's top as the first path spells it (else its real path is asked).
 * A path the daemon cannot find (or a folder) is counted, not fatal.
 *
 * Output: "order hint: N files (SIZE) in the order given; K paths not
 * found" on stdout, or with --json one line
 *   {"event":"done","ok":true,"error":null,"files":N,"unknown":K,"bytes":B}
 * ({"ok":false,"error":WORD}: "bad_path" (a list that cannot be read, a
 * path outside the mount), "denied" (not the mount's owner), "failed").
 * Exit status: 0, 1 (failed or denied), 2 (usage or a bad path). */
#ifndef CFS_ORDER_H
#define CFS_ORDER_H

#include <stddef.h>

/* paths[0, n) in order; json: the JSON line instead of the sentence. */
int cfs_order_main(char **paths, size_t n, int json);

/* Pure helpers (unit-tested): path made absolute against cwd and tidied
 * ("." and empty components dropped, ".." taking one off, never above
 * "/"), into out.  0 or -ENAMETOOLONG. */
int cfs_order_absnorm(const char *cwd, const char *path, char *out, size_t cap);
/* The part of tidied absolute path below root (tidied, not "/"), or NULL
 * when path is not below it. */
const char *cfs_order_below(const char *path, const char *root);

#endif
