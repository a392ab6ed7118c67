/* super: the supervisor that keeps a mount alive across its server's death.
 *
 * `colabfs mount` mounts, reads the kernel's FUSE_INIT itself and keeps the
 * /dev/fuse descriptor; the file system runs in a child (`colabfs serve`,
 * exec'd with the descriptor).  When the child dies by a signal or a failing
 * exit, the supervisor has the requests it had read served again and starts
 * a new child:
 *   resend   the kernel (6.9+, FUSE_HAS_RESEND) moves them back to its queue
 *            on FUSE_NOTIFY_RESEND; the supervisor sleeps in between;
 *   forward  any kernel: the child reads every request straight into a log
 *            in the memory it shares with the supervisor (reqlog.h) and
 *            frees each record once it has replied; a new child serves what
 *            the log still holds first.  The supervisor sleeps here too.
 * A request in flight at `crash_loop_limit` deaths in a row is answered EIO
 * by the supervisor, so one poison request cannot keep the mount down.
 * The supervisor links no curl and no LMDB; it is single-threaded.
 *
 * The supervisor and its children share one memfd.  Its first part is the
 * supervisor's page (struct cfs_super_shm): the recorded INIT request and
 * reply, the counters `colabfs stats` shows, the requests the child is
 * working on (resend mode), the reply journal (replyrec.h, 512 KiB, both
 * modes) and the request log (forward mode, 9.25 MiB, reqlog.h): about
 * 10 MiB, fixed, of which resend mode touches only the first part and the
 * journal records it uses.  Its second part, from CFS_SHM_HANDLES_OFF, is
 * the servers' table of open file handle rows (src/core/fhtab.h), which the
 * supervisor sizes and never reads: it outlives every server and dies with
 * the mount. */
#ifndef CFS_SUPER_H
#define CFS_SUPER_H

#include <stdint.h>
#include <sys/types.h>

#include "fhtab.h"
#include "replyrec.h"
#include "reqlog.h"
#include "stats.h"

#define CFS_SHM_MAGIC 0x43465331u /* "CFS1" */
#define CFS_SHM_SLOTS 512
#define CFS_INIT_MAX 4096
#define CFS_INIT_REPLY_MAX 512

/* Exit statuses of `colabfs serve` the supervisor acts on. */
#define CFS_SERVE_EXIT_OK 0      /* unmounted or told to stop: end the mount */
#define CFS_SERVE_EXIT_START 3   /* could not start (message on the ready fd) */
#define CFS_SERVE_EXIT_REFUSE 4  /* INIT replay differs: will not serve */

struct cfs_shm_slot {
	uint64_t unique; /* 0: free */
	uint32_t opcode;
	uint32_t pad;
};

struct cfs_super_shm {
	uint32_t magic;
	uint32_t init_len;
	uint8_t init[CFS_INIT_MAX] __attribute__((aligned(8))); /* the kernel's FUSE_INIT */
	uint32_t reply_len;                  /* 0 until the first server replied */
	uint8_t reply[CFS_INIT_REPLY_MAX] __attribute__((aligned(8))); /* that reply, as sent */
	uint32_t ready;                      /* the current server serves */
	struct cfs_stats_recovery rec;
	struct cfs_shm_slot slot[CFS_SHM_SLOTS]; /* requests the server works on */
	struct cfs_replyrec journal __attribute__((aligned(64))); /* replies to state changes */
	struct cfs_reqlog log __attribute__((aligned(4096))); /* forward mode */
};

/* Where the handle table starts in the memfd, and the memfd's size. */
#define CFS_SHM_HANDLES_OFF ((sizeof(struct cfs_super_shm) + 63) & ~(size_t)63)
#define CFS_SHM_SIZE (CFS_SHM_HANDLES_OFF + cfs_fhtab_size(CFS_FHTAB_SLOTS))

struct cfs_super_opts {
	const char *mountpoint;
	const char *fuse_opts;
	int debug;
	int foreground;
	const char *recovery;     /* auto, resend, forward, none */
	int crash_loop_limit;
	const char *log_file;     /* where the daemon logs */
	int log_level;
	long start_timeout_ms;    /* the first server must serve by then, else the mount ends */
	/* the words after "mount", passed on to `colabfs serve` */
	int argc;
	char **argv;
};

/* Mounts, daemonizes unless foreground, and supervises servers until the
 * mount ends.  In the calling (foreground) process it returns once the first
 * server serves (0) or failed to start (the reason printed on stderr).
 * Returns a process exit status. */
int cfs_super_run(const struct cfs_super_opts *o);

/* Pure: whether a kernel of this release ("6.8.0-1019-gcp", uname -r) has
 * FUSE_NOTIFY_RESEND (Linux 6.9 and later), so that --recovery=auto picks
 * resend (else forward).  The supervisor decides from the kernel's FUSE_INIT
 * flags; this is the same rule by version, for `colabfs doctor`.  Returns 1,
 * 0, or -EINVAL for a release that does not start "MAJOR.MINOR". */
int cfs_super_release_has_resend(const char *release);

#endif
