/* fdwait: wait for a non-blocking descriptor until an absolute deadline.
 * Header only.
 *
 * cfs_fd_wait polls fd for events (POLLIN, POLLOUT) until deadline_ms, an
 * absolute CLOCK_MONOTONIC time in ms (cfs_clock_mono_ms() + timeout).
 * Returns 0 when fd is ready (or in error or hung up: the read or write that
 * follows reports that), -ETIMEDOUT when the deadline passes first, or
 * CFS_E_NET when poll itself fails.  EINTR is retried with the time left. */
#ifndef CFS_FDWAIT_H
#define CFS_FDWAIT_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>

#include "clock.h"
#include "err.h"

static inline int cfs_fd_wait(int fd, short events, int64_t deadline_ms)
{
	for (;;) {
		int64_t left = deadline_ms - cfs_clock_mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = events };
		int n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return CFS_E_NET;
	}
}

#endif
