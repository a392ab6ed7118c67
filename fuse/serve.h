/* serve: the server's half of the supervisor protocol (super.h).
 *
 * A supervisor starts `colabfs serve --fuse-fd N --shm-fd N [--ready-fd N]
 * -- MOUNT-ARGS...`: the /dev/fuse descriptor, the shared page (reqlog,
 * reply journal, handle table, recovery counters) and, for the first server
 * of a mount, the pipe to the waiting foreground process, which reads one
 * line: "OK <what the mount serves>" or "ERR <why>".  The server's exit
 * status (CFS_SERVE_EXIT_*, super.h) tells the supervisor what to do next.
 * COLABFS_TEST_SLOW_START_FILE (test hooks only): a test makes the next
 * server start late by writing milliseconds there; the server that reads it
 * removes it.  COLABFS_TEST_SLOW_STOP_MS (test hooks only): a server waits
 * that long after its session ended, before it frees anything (a stop
 * stuck somewhere: the shutdown watchdog of session.h ends it). */
#ifndef CFS_SERVE_H
#define CFS_SERVE_H

#include "super.h"

struct cfs_serve_args {
	int fuse_fd, ready_fd;       /* ready_fd: -1 when nobody waits */
	struct cfs_super_shm *shm;   /* mapped; its descriptor closed */
};

/* Takes the descriptor options off the front of argv (through "--"), and
 * maps the shared page.  Returns 0 (*argc, *argv: the mount arguments),
 * -EINVAL (not run by a supervisor) or -EPROTO (no supervisor state). */
int cfs_serve_parse(int *argc, char ***argv, struct cfs_serve_args *a);

/* Writes msg (one line) to the foreground's pipe; nothing when fd < 0. */
void cfs_serve_report(int fd, const char *msg);

/* The test hooks above (no-ops without them). */
void cfs_serve_slow_start_hook(void);
void cfs_serve_slow_stop_hook(void);

#endif
