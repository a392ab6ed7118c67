/* size: byte counts as people write them ("20G", "512M", "64KiB",
 * "1048576"), for the options and the GPU loader's environment. */
#ifndef CFS_SIZE_H
#define CFS_SIZE_H

#include <stdint.h>

/* Digits with an optional K, M, G or T (powers of 1024; "KiB", "MB" and
 * friends accepted, a trailing B optional), spaces around allowed.  Returns
 * 0 or -EINVAL (anything else, or a value past 2^64). */
int cfs_size_parse(const char *s, uint64_t *out);

#endif
