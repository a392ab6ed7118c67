/* tiercfg: the shared cache tier as the options describe it (--shared-cache
 * and its companions): the deployment key read from --shared-cache-key-file
 * (secret.h's checks; the file's bytes, a final newline taken off, are the
 * key), the seeds parsed, the password read (never argv; wiped once the tier
 * has its copy), the tier (tier.h) and the reader's seam around Drive
 * (tiered.h) built.  For the mount and doctor.
 *
 * The password comes from --shared-cache-password-file (read through
 * secret.h: a regular file of at most 4 KiB that neither group nor others
 * may read or write, owned by this user or root, else the mount is
 * refused), or from COLABFS_SHARED_CACHE_PASSWORD, which is taken out of
 * the environment once read: unset, and its bytes wiped where the kernel
 * keeps the environment the process was started with (that block, not
 * environ, is what /proc/PID/environ shows).  A supervised mount's servers
 * are started later, from the supervisor, and need the password each time:
 * `colabfs mount` moves it into a sealed memfd the supervisor and its
 * servers inherit, named by COLABFS_SHARED_CACHE_PASSWORD_FD (a descriptor
 * number, no secret), before it starts anything (cfs_tiercfg_stash_password);
 * a server reads it from there and marks it close-on-exec. */
#ifndef CFS_TIERCFG_H
#define CFS_TIERCFG_H

#include <stddef.h>
#include <stdint.h>

struct cfs_config;
struct cfs_drive;
struct cfs_tier;
struct cfs_tiered;
struct cfs_tiered_key;

/* The deployment key of --shared-cache-key-file: *out NULL (and 0) when c
 * names none.  CFS_E_CONFIG with why for a file that cannot be the key:
 * missing, not a regular file, readable or writable by group or others,
 * owned by another user, over 4 KiB, or shorter than CFS_TIERED_KEY_MIN
 * bytes; or -ENOMEM. */
int cfs_tiercfg_key(const struct cfs_config *c, struct cfs_tiered_key **out, char *why,
		    size_t wcap);

/* The cluster client of c->shared_cache (which must be set).  Returns 0,
 * CFS_E_CONFIG (why says what: an unreadable, empty or unprivate password
 * file, bad --shared-cache-nodes), or -ENOMEM. */
int cfs_tiercfg_tier(const struct cfs_config *c, struct cfs_tier **out, char *why, size_t wcap);

/* For colabfs mount, before it starts a daemon: COLABFS_SHARED_CACHE_PASSWORD
 * into a sealed memfd left open for the processes it starts, named by
 * COLABFS_SHARED_CACHE_PASSWORD_FD, and out of the environment (wiped as
 * above; also when c has no use for it).  0, or CFS_E_CONFIG with why. */
int cfs_tiercfg_stash_password(const struct cfs_config *c, char *why, size_t wcap);

/* The seam: blocks of block_size through the tier, misses from d, values
 * authenticated with the key (or, --shared-cache-trusted without one,
 * unkeyed, with a warning in the log).  *out is NULL (and 0 returned) when
 * c has no --shared-cache. */
int cfs_tiercfg_tiered(const struct cfs_config *c, struct cfs_drive *d, uint32_t block_size,
		       struct cfs_tiered **out, char *why, size_t wcap);

#endif
