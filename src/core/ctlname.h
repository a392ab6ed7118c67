/* ctlname: the control attributes' names, their parser, and who may use them.
 *
 * A mount answers getxattr of these names on any of its paths (even the
 * commands with an effect are reads: a getxattr carries the caller's uid to
 * the daemon and returns a reply, and works on a read-only mount too; ctl.h
 * is the command-line side):
 *
 *   user.colabfs.pid                  the daemon's pid              anyone
 *   user.colabfs.stats                its counters, one JSON object anyone
 *   user.colabfs.history              the counters' history from     anyone
 *   user.colabfs.history.FROM         sample FROM on (hist.h: one
 *                                     page; the bare name is FROM 0)
 *   user.colabfs.cache_dir            the cache folder's path        anyone
 *                                     (for the GPU loader: it must not guess it)
 *   user.colabfs.evict                drop the path's cached blocks owner, root
 *   user.colabfs.evict.to.BYTES       LRU eviction down to BYTES    owner, root
 *   user.colabfs.warm.OFFSET.LENGTH   fetch a range of a file       owner, root
 *   user.colabfs.order.ID             the order hint spooled as file  owner, root
 *                                     ID (a number) in the cache
 *                                     folder's "hints", paths relative
 *                                     to the folder asked; ID 0 drops
 *                                     the hint (vfs.h,
 *                                     cfs_vfs_hint_spool); replies
 *                                     {"files":N,"unknown":N,"bytes":N}
 *   user.colabfs.sync                 upload now what is pending at  owner, root
 *                                     or below the path (skipping the
 *                                     write-back delay); replies with
 *                                     a JSON status (json.h,
 *                                     cfs_json_parse_sync)
 *
 * "Anyone" is anyone the kernel lets read the path: without allow_other only
 * the user who mounted (FUSE's own rule); with it, the modes that
 * default_permissions enforces (config.h).  The counters name no files.
 * Evict and warm change the cache or hold a FUSE worker until a download
 * ends, order steers the downloads, and sync reorders the uploads and names
 * pending files, so only the
 * mount's owner (the uid that ran `colabfs mount`) and root may use them;
 * others get EPERM.
 *
 * Numbers are plain decimal: 1 to 19 digits, nothing else (no sign, space,
 * "+" or "0x"), at most CFS_CTLNAME_NUM_MAX, the largest file offset, so
 * OFFSET + LENGTH never wraps.  A warm range past the end of the file is
 * clamped to it (the reader does that), not an error.
 *
 * Leaf module: libc only, pure functions, safe from any thread. */
#ifndef CFS_CTLNAME_H
#define CFS_CTLNAME_H

#include <stddef.h>
#include <stdint.h>

#define CFS_XATTR_PID "user.colabfs.pid"
#define CFS_XATTR_STATS "user.colabfs.stats"
#define CFS_XATTR_CACHE_DIR "user.colabfs.cache_dir"
#define CFS_XATTR_EVICT "user.colabfs.evict"       /* the file or folder at the path */
#define CFS_XATTR_EVICT_TO "user.colabfs.evict.to." /* + a byte count: LRU down to it */
#define CFS_XATTR_WARM "user.colabfs.warm."         /* + OFFSET.LENGTH of a file */
#define CFS_XATTR_ORDER "user.colabfs.order."       /* + ID of a spooled order hint */
#define CFS_XATTR_SYNC "user.colabfs.sync"          /* upload now, report what is pending */
#define CFS_XATTR_HISTORY "user.colabfs.history"    /* the history's first page, or */
#define CFS_XATTR_HISTORY_FROM "user.colabfs.history." /* + FROM: its page from sample FROM */

#define CFS_CTLNAME_NUM_MAX ((uint64_t)INT64_MAX)
#define CFS_CTLNAME_MAX 80 /* room for any name cfs_ctlname_format writes, with its NUL */

enum cfs_ctlname_kind {
	CFS_CTL_PID = 1,
	CFS_CTL_STATS,
	CFS_CTL_EVICT,
	CFS_CTL_EVICT_TO,
	CFS_CTL_WARM,
	CFS_CTL_CACHE_DIR,
	CFS_CTL_SYNC,
	CFS_CTL_HISTORY,
	CFS_CTL_ORDER,
};

struct cfs_ctlname {
	enum cfs_ctlname_kind kind;
	uint64_t target; /* evict.to: bytes to keep */
	uint64_t off;    /* warm: the range; history: FROM; order: ID */
	uint64_t len;
};

/* Parses an attribute name.  Returns 0 with *out filled (fields a kind does
 * not use are 0), -ENODATA for a name that is not a control name (an
 * attribute the mount does not have), or -EINVAL for a control name whose
 * numbers are malformed or out of range. */
int cfs_ctlname_parse(const char *name, struct cfs_ctlname *out);

/* Writes the name of r into buf, the inverse of cfs_ctlname_parse.  Returns
 * 0, -EINVAL (unknown kind or a number above CFS_CTLNAME_NUM_MAX) or
 * -ENAMETOOLONG (cap too small; CFS_CTLNAME_MAX always suffices).  A history
 * from 0 is the bare name. */
int cfs_ctlname_format(const struct cfs_ctlname *r, char *buf, size_t cap);

/* Whether a caller may use a kind on a mount owned by owner: 0, or -EPERM
 * for evict, warm, order and sync by anyone but the owner and root (pid,
 * stats, history and cache dir are anyone's). */
int cfs_ctlname_allowed(enum cfs_ctlname_kind kind, uint32_t caller, uint32_t owner);

/* A word for log lines: "pid", "stats", "evict", "evict to", "warm",
 * "cache dir", "sync", "history", "order". */
const char *cfs_ctlname_verb(enum cfs_ctlname_kind kind);

#endif
