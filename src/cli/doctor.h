/* doctor: the `colabfs doctor` command, a checklist of what a mount needs.
 *
 *   colabfs doctor [MOUNTPOINT] [--json] [mount options]
 *
 * The mount options that matter here (--api-url, --token-url,
 * --credentials, --ca-file, --metadata-url, --cache-dir, --scope,
 * --read-only...) are parsed by config.c, as for mount; the mountpoint is
 * optional.  The checks, in order, each one line (ok / warn / FAIL, what was
 * found, and for a failure the fix):
 *   fuse         /dev/fuse opens read-write, fusermount3 on PATH (non-root),
 *                the kernel and the crash-recovery mode it implies
 *   credentials  the source found (auth.h), a token and its expiry, the
 *                granted scopes; FAIL when none, or when writes are wanted
 *                (no --read-only) and the scopes cannot write; when the
 *                source is Colab's endpoint (or it was set and gave no
 *                token) the fix is CFS_AUTH_COLAB_FIX (the notebook's consent)
 *   drive        about.get storageQuota: latency and quota, or why not (a
 *                Colab token Drive refuses: CFS_AUTH_COLAB_FIX)
 *   clock        skew against the Date of Drive's reply (warn > 60 s,
 *                FAIL > 5 min)
 *   cache        the folder mount would use (--cache-dir, the mount's own,
 *                or the default rule): file system, free space, trust rules
 *                (cachedir.h), read only: doctor creates and changes nothing
 *   mount        a live mount (MOUNTPOINT, else the first colabfs mount in
 *                /proc/self/mountinfo): pids, restarts, uploads, recent
 *                errors of its log
 * Exit status: 0 when nothing FAILed, 1 when something did, 2 for a usage
 * error.  --json prints {"ok": bool, "checks": [{"name", "status",
 * "detail", "fix"}]} instead.  No token or key is ever printed.
 *
 * The test hook COLABFS_TEST_DEV_FUSE (testhook.h) names the device to try
 * instead of /dev/fuse.  The rules below are pure, for tests/unit/test_doctor.c. */
#ifndef CFS_DOCTOR_H
#define CFS_DOCTOR_H

#include <stdint.h>

/* argv: the words after "doctor".  Returns the exit status. */
int cfs_doctor_main(int argc, char **argv);

enum cfs_doctor_status {
	CFS_DOCTOR_OK = 0,
	CFS_DOCTOR_WARN,
	CFS_DOCTOR_FAIL,
};

#define CFS_DOCTOR_MIN_FREE (1ull << 30) /* a cache folder needs 1 GiB free */
#define CFS_DOCTOR_MIN_FREE_PERCENT 5   /* less than 5% of its file system, */
#define CFS_DOCTOR_ROOMY (20ull << 30)   /* and less than 20 GiB: a warning */
#define CFS_DOCTOR_SKEW_WARN_S 60
#define CFS_DOCTOR_SKEW_FAIL_S 300      /* JWTs and TLS break */

/* FAIL when a cache folder's file system of total bytes has less than
 * CFS_DOCTOR_MIN_FREE free, WARN when less than CFS_DOCTOR_MIN_FREE_PERCENT
 * and CFS_DOCTOR_ROOMY, else OK. */
enum cfs_doctor_status cfs_doctor_space(uint64_t free_bytes, uint64_t total);

/* The status of a clock skew_s seconds off the server's (either way). */
enum cfs_doctor_status cfs_doctor_skew(int64_t skew_s);

/* "ok", "warn" or "FAIL". */
const char *cfs_doctor_status_name(enum cfs_doctor_status s);

#endif
