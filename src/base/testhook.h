/* testhook: the environment variables the test suite steers colabfs with
 * (COLABFS_TEST_SLOW_START_FILE, COLABFS_TEST_SLOW_STOP_MS, COLABFS_TEST_REQUEST_DELAY_US,
 * COLABFS_TEST_MEMWATCH_HOLD_MS, COLABFS_MEMINFO, COLABFS_PSI, COLABFS_TEST_DEV_FUSE,
 * COLABFS_TEST_HISTORY_INTERVAL_MS).
 *
 * They are read only in a test build (configure --enable-test-hooks, which
 * `./dev.sh test` and `./dev.sh build` use); in any other build
 * cfs_test_env returns NULL, so a user's environment cannot slow a mount
 * down, make it delete a file or fake its memory figures. */
#ifndef CFS_TESTHOOK_H
#define CFS_TESTHOOK_H

#include <stdlib.h>

#ifdef CFS_TEST_HOOKS
#define CFS_TEST_HOOKS_ON 1
#else
#define CFS_TEST_HOOKS_ON 0
#endif

/* getenv(name) in a test build, else NULL. */
static inline const char *cfs_test_env(const char *name)
{
	return CFS_TEST_HOOKS_ON ? getenv(name) : NULL;
}

#endif
