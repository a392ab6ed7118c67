/* tiercfg: the shared cache tier from the options (see tiercfg.h). */
#define _GNU_SOURCE /* memfd_create */
#include "tiercfg.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

#define PASSWORD_ENV "COLABFS_SHARED_CACHE_PASSWORD"
#define PASSWORD_FD_ENV "COLABFS_SHARED_CACHE_PASSWORD_FD"

extern char **environ;

/* Takes name out of this process's environment and wipes its bytes where
 * they lie.  unsetenv alone only drops the pointer from environ: the text
 * stays in the block the kernel set up at exec, which is what
 * /proc/PID/environ shows (it reads that block of the process's memory,
 * not environ) and what a fork copies.  So every NAME=... entry is found
 * first, then unset, then overwritten with NULs in place; the block's
 * length is fixed, so /proc/PID/environ shows empty entries there. */
static void env_wipe(const char *name)
{
	size_t nl = strlen(name), n = 0;
	for (char **e = environ; e && *e; e++)
		n += strncmp(*e, name, nl) == 0 && (*e)[nl] == '=';
	if (!n)
		return;
	char **hit = calloc(n, sizeof(*hit));
	size_t k = 0;
	for (char **e = environ; hit && e && *e; e++)
		if (strncmp(*e, name, nl) == 0 && (*e)[nl] == '=')
			hit[k++] = *e;
	unsetenv(name);
	for (size_t i = 0; i < k; i++)
		explicit_bzero(hit[i], strlen(hit[i]));
	free(hit);
}

/* One line of text, n bytes at pw (cap), made a NUL-terminated password:
 * 0, or CFS_E_CONFIG with why naming src. */
static int one_line(char *pw, size_t n, size_t cap, const char *src, char *why, size_t wcap)
{
	pw[n] = '\0';
	while (n > 0 && (pw[n - 1] == '\n' || pw[n - 1] == '\r'))
		pw[--n] = '\0';
	if (n == 0 || n >= cap - 1 || strlen(pw) != n || strpbrk(pw, "\r\n")) {
		explicit_bzero(pw, cap);
		snprintf(why, wcap, "%s: %s", src, n == 0 ? "empty" : "not one line of text under 4 KiB");
		return CFS_E_CONFIG;
	}
	return 0;
}

/* The password from the descriptor colabfs mount left for its servers. */
static int read_password_fd(const char *num, char *pw, size_t cap, char *why, size_t wcap)
{
	char *end = NULL;
	long fd = strtol(num, &end, 10);
	struct stat st;
	ssize_t n = -1;
	if (end != num && !*end && fd >= 3 && fd < 65536 && fstat((int)fd, &st) == 0 &&
	    S_ISREG(st.st_mode) && st.st_size > 0 && (size_t)st.st_size < cap)
		n = pread((int)fd, pw, (size_t)st.st_size, 0);
	if (n <= 0) {
		snprintf(why, wcap, PASSWORD_FD_ENV "=%.16s: not the password colabfs mount left",
			 num);
		return CFS_E_CONFIG;
	}
	/* kept open (a server started after a fork reads it again), but not
	 * into anything this process executes */
	fcntl((int)fd, F_SETFD, FD_CLOEXEC);
	return one_line(pw, (size_t)n, cap, PASSWORD_FD_ENV, why, wcap);
}

/* The password into pw (cap bytes): 0 (pw "" when none is given) or
 * CFS_E_CONFIG.  From --shared-cache-password-file (a private file, as
 * credentials: secret.h), else the descriptor colabfs mount left, else
 * COLABFS_SHARED_CACHE_PASSWORD (wiped from the environment once read). */
static int read_password(const struct cfs_config *c, char *pw, size_t cap, char *why,
			 size_t wcap)
{
	pw[0] = '\0';
	if (c->shared_cache_password_file) {
		char *txt = NULL;
		size_t len = 0;
		int rc = cfs_secret_read(c->shared_cache_password_file, "--shared-cache-password-file",
					 cap - 1, CFS_SECRET_PRIVATE, &txt, &len, why, wcap);
		if (rc)
			return rc == -ENOMEM ? rc : CFS_E_CONFIG;
		memcpy(pw, txt, len);
		explicit_bzero(txt, len);
		free(txt);
		char src[PATH_MAX + 40];
		snprintf(src, sizeof(src), "--shared-cache-password-file %s",
			 c->shared_cache_password_file);
		return one_line(pw, len, cap, src, why, wcap);
	}
	const char *fdnum = getenv(PASSWORD_FD_ENV);
	if (fdnum)
		return read_password_fd(fdnum, pw, cap, why, wcap);
	const char *env = getenv(PASSWORD_ENV);
	int rc = 0;
	if (env && *env) {
		size_t n = strlen(env);
		if (n >= cap - 1) {
			snprintf(why, wcap, PASSWORD_ENV " is too long");
			rc = CFS_E_CONFIG;
		} else {
			memcpy(pw, env, n + 1);
		}
	}
	env_wipe(PASSWORD_ENV);
	return rc;
}

int cfs_tiercfg_stash_password(const struct cfs_config *c, char *why, size_t wcap)
{
	const char *env = getenv(PASSWORD_ENV);
	if (!env)
		return 0;
	int rc = 0;
	size_t n = strlen(env);
	if (c->shared_cache && !c->shared_cache_password_file && n) {
		int fd = -1, e = ENAMETOOLONG;
		if (n < PASSWORD_MAX - 1) {
			/* not close-on-exec: the supervisor's servers inherit it */
			fd = memfd_create("colabfs-shared-cache-password", MFD_ALLOW_SEALING);
			char num[16];
			snprintf(num, sizeof(num), "%d", fd);
			errno = 0;
			e = fd < 0 || write(fd, env, n) != (ssize_t)n ||
					    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
							   F_SEAL_WRITE | F_SEAL_SEAL) ||
					    setenv(PASSWORD_FD_ENV, num, 1)
				    ? (errno ? errno : EIO)
				    : 0;
		}
		if (e) {
			if (fd >= 0)
				close(fd);
			snprintf(why, wcap, PASSWORD_ENV ": cannot hand it to the daemon: %s",
				 e == ENAMETOOLONG ? "too long" : strerror(e));
			rc = CFS_E_CONFIG;
		}
	}
	env_wipe(PASSWORD_ENV);
	return rc;
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

static int tier_new(const struct cfs_config *c, size_t value_max, struct cfs_tier **out,
		    char *why, size_t wcap)
{
	struct cfs_tier_seeds seeds;
	char pw[PASSWORD_MAX];
	int rc = cfs_tier_parse(c->shared_cache, &seeds, why, wcap);
	if (!rc)
		rc = read_password(c, pw, sizeof(pw), why, wcap);
	if (rc)
		return rc;
	struct cfs_tier_opts o = { .seeds = &seeds, .password = pw[0] ? pw : NULL,
				   .ca_file = c->shared_cache_ca_file, .nodes = c->shared_cache_nodes,
				   .value_max = value_max };
	rc = cfs_tier_new(&o, out);
	explicit_bzero(pw, sizeof(pw));
	if (rc)
		snprintf(why, wcap, "--shared-cache: %s", cfs_strerror(rc));
	return rc;
}

int cfs_tiercfg_tier(const struct cfs_config *c, struct cfs_tier **out, char *why, size_t wcap)
{
	return tier_new(c, 0, out, why, wcap);
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
	/* a value is a block and its header (room for the MAC) */
	if (!rc)
		rc = tier_new(c, (size_t)block_size + 4096, &t, why, wcap);
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
