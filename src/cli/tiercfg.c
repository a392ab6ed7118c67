/* tiercfg: the shared cache tier from the options (see tiercfg.h). */
#include "tiercfg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "err.h"
#include "hash.h"
#include "log.h"
#include "reader.h"
#include "secret.h"
#include "tier.h"
#include "tiered.h"

#define PASSWORD_MAX 4096
#define KEY_FILE_MAX 4096

/* This mount's lease owner: the same for every server a supervisor starts
 * (its pid is the servers' parent), different for every other mount (the
 * machine's name and boot, the cache folder: one mount per folder). */
static void owner_of(const struct cfs_config *c, char *out, size_t cap)
{
	char host[256] = "", boot[64] = "", all[1024];
	gethostname(host, sizeof(host) - 1);
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, boot, sizeof(boot) - 1);
		boot[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	snprintf(all, sizeof(all), "%s|%s|%ld|%s", host, boot, (long)getppid(),
		 c->cache_dir ? c->cache_dir : "");
	snprintf(out, cap, "m%016llx", (unsigned long long)cfs_hash_fnv1a(all));
}

/* The password into pw (cap bytes): 0 (pw "" when none is given) or
 * CFS_E_CONFIG. */
static int read_password(const struct cfs_config *c, char *pw, size_t cap, char *why,
			 size_t wcap)
{
	pw[0] = '\0';
	if (c->shared_cache_password_file) {
		int fd = open(c->shared_cache_password_file, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd < 0 ? -1 : read(fd, pw, cap - 1);
		int e = errno;
		if (fd >= 0)
			close(fd);
		if (n < 0) {
			snprintf(why, wcap, "--shared-cache-password-file %s: %s",
				 c->shared_cache_password_file, strerror(e));
			return CFS_E_CONFIG;
		}
		pw[n] = '\0';
		while (n > 0 && (pw[n - 1] == '\n' || pw[n - 1] == '\r'))
			pw[--n] = '\0';
		if (n == 0 || (size_t)n == cap - 1 || strlen(pw) != (size_t)n) {
			explicit_bzero(pw, cap);
			snprintf(why, wcap, "--shared-cache-password-file %s: %s",
				 c->shared_cache_password_file,
				 n == 0 ? "empty" : "not one line of text under 4 KiB");
			return CFS_E_CONFIG;
		}
		return 0;
	}
	const char *env = getenv("COLABFS_SHARED_CACHE_PASSWORD");
	if (env && *env) {
		if (strlen(env) >= cap) {
			snprintf(why, wcap, "COLABFS_SHARED_CACHE_PASSWORD is too long");
			return CFS_E_CONFIG;
		}
		snprintf(pw, cap, "%s", env);
	}
	return 0;
}

int cfs_tiercfg_key(const struct cfs_config *c, struct cfs_tiered_key **out, char *why,
		    size_t wcap)
{
	char *key = NULL;
	size_t n = 0;
	*out = NULL;
	if (!c->shared_cache_key_file)
		return 0;
	int rc = cfs_secret_read(c->shared_cache_key_file, "--shared-cache-key-file", KEY_FILE_MAX,
				 CFS_SECRET_PRIVATE, &key, &n, why, wcap);
	if (rc)
		return rc;
	/* `openssl rand -hex 32 > FILE` ends in a newline: not part of the key */
	if (n && key[n - 1] == '\n')
		n--;
	if (n && key[n - 1] == '\r')
		n--;
	rc = cfs_tiered_key_new(key, n, out);
	explicit_bzero(key, n);
	free(key);
	if (rc == -EINVAL) {
		snprintf(why, wcap, "--shared-cache-key-file %s: %zu bytes of key, too short: at "
			 "least %d (make one with `openssl rand -hex 32 > FILE; chmod 600 FILE`)",
			 c->shared_cache_key_file, n, CFS_TIERED_KEY_MIN);
		return CFS_E_CONFIG;
	}
	return rc;
}

int cfs_tiercfg_tier(const struct cfs_config *c, struct cfs_tier **out, char *why, size_t wcap)
{
	struct cfs_tier_seeds seeds;
	char pw[PASSWORD_MAX];
	int rc = cfs_tier_parse(c->shared_cache, &seeds, why, wcap);
	if (!rc)
		rc = read_password(c, pw, sizeof(pw), why, wcap);
	if (rc)
		return rc;
	struct cfs_tier_opts o = { .seeds = &seeds, .password = pw[0] ? pw : NULL,
				   .ca_file = c->shared_cache_ca_file };
	rc = cfs_tier_new(&o, out);
	explicit_bzero(pw, sizeof(pw));
	if (rc)
		snprintf(why, wcap, "--shared-cache: %s", cfs_strerror(rc));
	return rc;
}

int cfs_tiercfg_tiered(const struct cfs_config *c, struct cfs_drive *d, uint32_t block_size,
		       struct cfs_tiered **out, char *why, size_t wcap)
{
	*out = NULL;
	if (!c->shared_cache)
		return 0;
	struct cfs_tier *t = NULL;
	struct cfs_tiered_key *key = NULL;
	int rc = cfs_tiercfg_key(c, &key, why, wcap);
	if (!rc)
		rc = cfs_tiercfg_tier(c, &t, why, wcap);
	if (rc) {
		cfs_tiered_key_free(key);
		return rc;
	}
	if (!key)
		CFS_WARN("--shared-cache-trusted: the shared cache's values are not authenticated "
			 "(crc32c only); anyone who can write to the cluster decides what this mount "
			 "reads. Give every mount --shared-cache-key-file unless only trusted "
			 "writers can reach it");
	char owner[32];
	owner_of(c, owner, sizeof(owner));
	struct cfs_tiered_opts o = {
		.owner = owner,
		.tier = t,
		.key = key,
		.fetch = cfs_reader_drive_fetch,
		.io = d,
		.block_size = block_size,
		.lease_ms = (int)(c->shared_cache_lease_s * 1000),
		.ttl_s = c->shared_cache_ttl_s,
	};
	rc = cfs_tiered_new(&o, out);
	if (rc) {
		cfs_tier_free(t);
		cfs_tiered_key_free(key);
		snprintf(why, wcap, "--shared-cache: %s", cfs_strerror(rc));
		return rc;
	}
	/* the map now: the log says at once whether the cluster is there (a
	 * cluster that is not costs a mount at most a connect timeout per seed) */
	cfs_tier_probe(t);
	return 0;
}
