/* dead_drive: a Drive client whose every endpoint is a closed port, for the
 * vfs tests that must be served from the cache index alone (test_vfs_restart,
 * test_vfs_pin): env_free checks that no request was made. */
#ifndef CFS_TEST_DEAD_DRIVE_H
#define CFS_TEST_DEAD_DRIVE_H

#include <time.h>

#include "auth.h"
#include "check.h"
#include "drive.h"
#include "http.h"

#define DEAD_URL "http://127.0.0.1:9"

static inline int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct env {
	struct cfs_http *http;
	struct cfs_auth *auth;
	struct cfs_drive *drive;
};

static inline void env_new(struct env *e)
{
	struct cfs_http_opts ho = { .user_agent = "test" };
	struct cfs_auth_opts ao = { .metadata_url = DEAD_URL };
	struct cfs_drive_opts dopt = { .api_url = DEAD_URL, .io_timeout_ms = 1000, .api_rate = -1 };
	char why[256];
	CHECK_EQ(cfs_http_new(&ho, &e->http), 0);
	CHECK_EQ(cfs_auth_new(e->http, &ao, &e->auth, why, sizeof(why)), 0);
	CHECK_EQ(cfs_drive_new(e->http, e->auth, &dopt, &e->drive), 0);
}

static inline void env_free(struct env *e)
{
	struct cfs_drive_stats st;
	cfs_drive_stats(e->drive, &st);
	CHECK_EQ(st.requests, 0); /* everything came from the cache index */
	cfs_drive_free(e->drive);
	cfs_auth_free(e->auth);
	cfs_http_free(e->http);
}

#endif
