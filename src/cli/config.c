#define _GNU_SOURCE
/* config: option table and parser (see config.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drive.h"
#include "err.h"
#include "export.h"
#include "hedge.h"
#include "log.h"
#include "vfs.h"
#include "size.h"
#include "cluster.h"
#include "tier.h"
#include "tiered.h"
#include "wire.h"

enum type { T_STR, T_LONG, T_FLAG, T_FUSE, T_SIZE, T_MODE };

struct opt {
	const char *name; /* long name, without "--" */
	char shortname;
	enum type type;
	size_t off;
	const char *metavar;
	const char *help;
	long min, max;    /* T_LONG bounds (T_MODE: always 0 to 0777) */
};

#define O(f) offsetof(struct cfs_config, f)
static const struct opt opts[] = {
	{ "root", 0, T_STR, O(root_id), "ID|/PATH",
	  "Drive folder to mount, by id or by its path in My Drive (default: My Drive)" },
	{ "drive-id", 0, T_STR, O(drive_id), "ID", "mount the shared drive with this id" },
	{ "shared-with-me", 0, T_FLAG, O(shared_with_me), NULL,
	  "mount \"Shared with me\": the items others shared with you" },
	{ "scope", 0, T_STR, O(scope), "SCOPE",
	  "OAuth scope to ask for: drive or drive.readonly (default: drive; with "
	  "--read-only drive.readonly)" },
	{ "read-only", 0, T_FLAG, O(read_only), NULL,
	  "no writes: the mount is read-only (EROFS), as before writes existed" },
	{ "api-url", 0, T_STR, O(api_url), "URL",
	  "Drive API root URL (default https://www.googleapis.com)" },
	{ "token-url", 0, T_STR, O(token_url), "URL",
	  "OAuth token endpoint (default: the credentials' token_uri or Google's)" },
	{ "metadata-url", 0, T_STR, O(metadata_url), "URL",
	  "metadata server to ask for tokens (GCE, Colab); default when on a Google VM" },
	{ "ca-file", 0, T_STR, O(ca_file), "FILE", "CA certificates to verify TLS with" },
	{ "credentials", 0, T_STR, O(credentials), "FILE",
	  "ADC credentials file (authorized_user or service_account)" },
	{ "cache-dir", 0, T_STR, O(cache_dir), "DIR",
	  "cache folder, mode 0700 (default: one per mountpoint under /dev/shm/colabfs-UID)" },
	{ "cache-size", 0, T_SIZE, O(cache_size), "SIZE",
	  "cache budget, e.g. 20G (default: half the cache folder's free space; in RAM (tmpfs) "
	  "also at most 25% of RAM and what leaves --min-free-memory free)" },
	{ "min-free-memory", 0, T_SIZE, O(min_free_memory), "SIZE",
	  "a cache in RAM yields when free memory falls below this: read-ahead stops, blocks "
	  "are evicted (default: 10% of RAM, at least 1G; 0: never)" },
	{ "block-size", 0, T_SIZE, O(block_size), "SIZE",
	  "cache block size, a power of two from 64K to 64M (default 1M)" },
	{ "verify-always", 0, T_FLAG, O(verify_always), NULL,
	  "check every cached block's crc32c on every read, not just the first" },
	{ "max-connections", 0, T_LONG, O(max_connections), "N",
	  "parallel read-ahead downloads (default 16; a reader's own miss may use one more)", 3, 256 },
	{ "max-request", 0, T_SIZE, O(max_request), "SIZE",
	  "largest range request for a miss; sequential read-ahead uses up to 64M or this (default 16M)" },
	{ "prefetch-memory", 0, T_SIZE, O(prefetch_memory), "SIZE",
	  "bytes of read-ahead queued or running at once (default: enough for every connection)" },
	{ "api-rate", 0, T_LONG, O(api_rate), "N",
	  "most Drive API calls per second; the pacer starts at 95% of it and adapts to "
	  "Drive's rate-limit replies (default 200; 0: no pacing)", 0, 100000 },
	{ "api-burst", 0, T_LONG, O(api_burst), "N",
	  "Drive API calls allowed in a burst (default half of --api-rate, at least 4; "
	  "with --api-units, units: half a second's worth, at least 400)", 1, 100000000 },
	{ "api-units", 0, T_LONG, O(api_units), "N",
	  "pace by Drive's quota units instead of calls, N a minute (325000 for Cloud projects "
	  "created since 2026-05-01: a download costs 200, a list 100, a get 5)", 12000,
	  100000000 },
	{ "no-dataset-readahead", 0, T_FLAG, O(no_dataset_readahead), NULL,
	  "no read-ahead of a folder's next files or of a dataset tree being scanned" },
	{ "daemon-opens", 0, T_FLAG, O(daemon_opens), NULL,
	  "a read-only mount sends every open and close to the daemon too (default: its "
	  "kernel opens files itself, see WARM OPENS)" },
	{ "hedge-budget", 0, T_LONG, O(hedge_budget), "PERCENT",
	  "second requests for late downloads, at most PERCENT per 100 (default 5; 0: never)", 0,
	  50 },
	{ "log-file", 0, T_STR, O(log_file), "FILE", "log file (default: CACHE-DIR/colabfs.log "
						     "when in the background, stderr with -f)" },
	{ "log-level", 0, T_STR, O(log_level), "LEVEL", "debug, info (default), warn or error" },
	{ "export-formats", 0, T_STR, O(export_formats), "LIST",
	  "Google-native files as KIND=EXT,... (default " CFS_EXPORT_DEFAULT ")" },
	{ "io-timeout", 0, T_LONG, O(io_timeout_s), "SECONDS",
	  "how long one Drive call may keep retrying (default 300)", 1, 86400 },
	{ "dir-ttl", 0, T_LONG, O(dir_ttl_s), "SECONDS",
	  "how long a folder listing is trusted (default 300)", 1, 86400 * 365 },
	{ "poll-interval", 0, T_LONG, O(poll_interval_s), "SECONDS",
	  "how often to ask Drive what changed (default 60; 0: never)", 0, 86400 },
	{ "attr-timeout", 0, T_LONG, O(attr_timeout_s), "SECONDS",
	  "kernel attribute and name cache lifetime (default: as long as the folder's listing "
	  "is trusted, see --dir-ttl)", 0, 86400 },
	{ "max-threads", 0, T_LONG, O(max_threads), "N",
	  "most FUSE worker threads (default 64)", 1, 1024 },
	{ "recovery", 0, T_STR, O(recovery), "MODE",
	  "server restart after a crash: auto (default), resend, forward, none or off" },
	{ "crash-loop-limit", 0, T_LONG, O(crash_loop_limit), "N",
	  "answer EIO to a request in flight at N server deaths in a row (default 3)", 1, 1000 },
	{ "uid", 0, T_LONG, O(uid), "UID",
	  "owner every file and folder shows (default: the user who mounts)", 0, 4294967294L },
	{ "gid", 0, T_LONG, O(gid), "GID",
	  "group every file and folder shows (default: the mounting user's group)", 0,
	  4294967294L },
	{ "file-mode", 0, T_MODE, O(file_mode), "MODE",
	  "permission bits of files, octal (default 0644; 0444 with --read-only)" },
	{ "dir-mode", 0, T_MODE, O(dir_mode), "MODE",
	  "permission bits of folders, octal (default 0755; 0555 with --read-only)" },
	{ "umask", 0, T_MODE, O(umask_bits), "MASK",
	  "bits cleared from --file-mode and --dir-mode, octal (default 0)" },
	/* writes */
	{ "delete-permanently", 0, T_FLAG, O(delete_permanently), NULL,
	  "unlink and rmdir delete in Drive instead of moving to the trash" },
	{ "write-back-delay", 0, T_LONG, O(write_back_delay_s), "SECONDS",
	  "how long after the last close a file waits before its upload starts (default 5)", 0,
	  86400 },
	{ "upload-open-files", 0, T_LONG, O(upload_open_files_s), "SECONDS",
	  "a file held open for writing (a log) is uploaded at most this often while it stays "
	  "open, as a consistent snapshot of its bytes (default 60; 0: only at close, fsync or "
	  "sync)", 0, 86400 },
	{ "staging-dir", 0, T_STR, O(staging_dir), "DIR",
	  "where written bytes wait for their upload, on disk (default: CACHE-DIR/staging on "
	  "disk, else /var/tmp/colabfs-UID/staging/NAME)" },
	{ "create-rate", 0, T_LONG, O(create_rate), "N",
	  "the most files created in Drive per second (default 10; the pace starts at 3/s and "
	  "follows Drive's answers); creations queue, never fail", 1, 1000 },
	{ "upload-threads", 0, T_LONG, O(upload_threads), "N",
	  "files uploaded in parallel (default 4)", 1, 16 },
	/* the shared cache tier */
	{ "shared-cache", 0, T_STR, O(shared_cache), "URL",
	  "share downloaded blocks with other mounts through a Redis Cluster: "
	  "redis://HOST:PORT[,HOST:PORT...] (seed nodes) or rediss:// for TLS" },
	{ "shared-cache-password-file", 0, T_STR, O(shared_cache_password_file), "FILE",
	  "the cluster's AUTH password, from a file (or COLABFS_SHARED_CACHE_PASSWORD; never "
	  "in the URL)" },
	{ "shared-cache-ca-file", 0, T_STR, O(shared_cache_ca_file), "FILE",
	  "CA certificates to verify the cluster's TLS with (default: the system's)" },
	{ "shared-cache-nodes", 0, T_STR, O(shared_cache_nodes), "CIDR,...",
	  "networks whose nodes also belong to the cluster, e.g. 10.0.0.0/8 (default: only the "
	  "seeds' hosts and the nodes they announce; redirects elsewhere are refused)" },
	{ "shared-cache-key-file", 0, T_STR, O(shared_cache_key_file), "FILE",
	  "the deployment key (a secret of at least 32 bytes, the same on every mount that "
	  "shares, mode 0600) the cluster's values are authenticated with (HMAC-SHA256); "
	  "required with --shared-cache" },
	{ "shared-cache-trusted", 0, T_FLAG, O(shared_cache_trusted), NULL,
	  "use --shared-cache without a key: only trusted writers can reach the cluster "
	  "(values are checked by crc32c only; whoever can write to it decides what is read)" },
	{ "shared-cache-lease", 0, T_LONG, O(shared_cache_lease_s), "SECONDS",
	  "how long one mount's claim to download a block lasts, and the longest the others "
	  "wait for it (default 10)", 1, 3600 },
	{ "shared-cache-ttl", 0, T_LONG, O(shared_cache_ttl_s), "SECONDS",
	  "blocks in the cluster expire after this (default 604800, 7 days)", 60, 31536000 },
	/* mountpoint checks, start-up and the log */
	{ "force", 0, T_FLAG, O(force), NULL,
	  "detach a dead mount (its daemon gone) found at the mountpoint, then mount" },
	{ "start-timeout", 0, T_LONG, O(start_timeout_s), "SECONDS",
	  "give up when the server has not started serving after this long (default 60)", 1,
	  3600 },
	{ "log-max", 0, T_SIZE, O(log_max), "SIZE",
	  "the log file is rotated (to FILE.1) when it reaches SIZE (default 16M; 0: never)" },
	{ "foreground", 'f', T_FLAG, O(foreground), NULL, "stay in the foreground" },
	{ "debug", 'd', T_FLAG, O(debug), NULL, "debug log and FUSE request trace (implies -f)" },
	{ "options", 'o', T_FUSE, O(fuse_opts), "OPT[,OPT]",
	  "FUSE mount options, e.g. allow_other (repeatable; allow_other brings "
	  "default_permissions)" },
	{ "help", 'h', T_FLAG, O(help), NULL, "show this help" },
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

void cfs_config_usage(FILE *out)
{
	fprintf(out, "usage: colabfs mount [OPTIONS] MOUNTPOINT\n"
		     "       colabfs umount MOUNTPOINT\n"
		     "       colabfs stats [PATH] [--json | --prometheus | --watch[=SECONDS]]\n"
		     "       colabfs stats [PATH] --history[=SECONDS] [--json]\n"
		     "       colabfs evict PATH... | --all MOUNTPOINT | --to SIZE MOUNTPOINT\n"
		     "       colabfs warm PATH... [--list FILE] [--ordered] [--json]\n"
		     "       colabfs sync [--timeout SECONDS] [--quiet] [--json] [PATH...]\n"
		     "       colabfs doctor [MOUNTPOINT] [--json] [OPTIONS]\n"
		     "       colabfs --version | --help\n\nmount options:\n");
	for (size_t i = 0; i < NOPTS; i++) {
		char left[64];
		if (opts[i].shortname)
			snprintf(left, sizeof(left), "-%c, --%s%s%s", opts[i].shortname, opts[i].name,
				 opts[i].metavar ? " " : "", opts[i].metavar ? opts[i].metavar : "");
		else
			snprintf(left, sizeof(left), "    --%s%s%s", opts[i].name,
				 opts[i].metavar ? "=" : "", opts[i].metavar ? opts[i].metavar : "");
		fprintf(out, "  %-30s %s\n", left, opts[i].help);
	}
	fprintf(out, "\nenvironment: COLABFS_ACCESS_TOKEN (a ready token), "
		     "GOOGLE_APPLICATION_CREDENTIALS,\n"
		     "  TBE_EPHEM_CREDS_ADDR, else TBE_CREDS_ADDR (Colab's credential endpoint, "
		     "host:port or\n"
		     "  http://host:port: the user's token once the notebook has consented), "
		     "GCE_METADATA_HOST\n");
}

static int set_str(char **dst, const char *v)
{
	char *s = strdup(v);
	if (!s)
		return -ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

/* An octal mode: 1 to 4 octal digits, at most 0777 (no setuid, setgid or
 * sticky bits).  Returns 0 or -EINVAL. */
static int parse_mode(const char *s, long *out)
{
	long v = 0;
	size_t n = 0;
	for (; s[n]; n++) {
		if (s[n] < '0' || s[n] > '7' || n == 4)
			return -EINVAL;
		v = v * 8 + (s[n] - '0');
	}
	if (n == 0 || v > 0777)
		return -EINVAL;
	*out = v;
	return 0;
}

static int apply(struct cfs_config *c, const struct opt *o, const char *val, char *why,
		 size_t wcap)
{
	char *base = (char *)c;
	switch (o->type) {
	case T_FLAG:
		*(long *)(base + o->off) = 1;
		return 0;
	case T_STR:
		if (!*val) {
			snprintf(why, wcap, "--%s needs a value", o->name);
			return CFS_E_CONFIG;
		}
		return set_str((char **)(base + o->off), val);
	case T_LONG: {
		char *end;
		errno = 0;
		long v = strtol(val, &end, 10);
		if (errno || end == val || *end || v < o->min || v > o->max) {
			snprintf(why, wcap, "--%s wants a whole number from %ld to %ld, not \"%.40s\"",
				 o->name, o->min, o->max, val);
			return CFS_E_CONFIG;
		}
		*(long *)(base + o->off) = v;
		return 0;
	}
	case T_MODE:
		if (parse_mode(val, (long *)(base + o->off))) {
			snprintf(why, wcap, "--%s wants octal permission bits from 0 to 0777 (like "
				 "0444 or 022), not \"%.40s\"", o->name, val);
			return CFS_E_CONFIG;
		}
		return 0;
	case T_SIZE:
		if (cfs_config_parse_size(val, (unsigned long long *)(base + o->off))) {
			snprintf(why, wcap, "--%s wants a size like 512M or 20G, not \"%.40s\"",
				 o->name, val);
			return CFS_E_CONFIG;
		}
		return 0;
	case T_FUSE: {
		char **dst = (char **)(base + o->off);
		size_t a = *dst ? strlen(*dst) : 0, b = strlen(val);
		if (!b) {
			snprintf(why, wcap, "-o needs a value");
			return CFS_E_CONFIG;
		}
		char *s = realloc(*dst, a + b + 2);
		if (!s)
			return -ENOMEM;
		if (a)
			s[a++] = ',';
		memcpy(s + a, val, b + 1);
		*dst = s;
		return 0;
	}
	}
	return CFS_E_CONFIG;
}

int cfs_config_parse_size(const char *s, unsigned long long *out)
{
	uint64_t v;
	int rc = cfs_size_parse(s, &v);
	if (!rc)
		*out = v;
	return rc;
}

static const struct opt *find_long(const char *name, size_t len)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
			return &opts[i];
	return NULL;
}

static const struct opt *find_short(char s)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (opts[i].shortname == s)
			return &opts[i];
	return NULL;
}

#define SCOPE_PREFIX "https://www.googleapis.com/auth/"

/* --scope: drive.readonly or drive, short or as the full URL; stored as the URL.
 * Without --scope: drive, or drive.readonly for a --read-only mount. */
static int check_scope(struct cfs_config *c, char *why, size_t wcap)
{
	if (!c->scope && set_str(&c->scope, c->read_only ? "drive.readonly" : "drive"))
		return -ENOMEM;
	const char *s = c->scope;
	if (strncmp(s, SCOPE_PREFIX, strlen(SCOPE_PREFIX)) == 0)
		s += strlen(SCOPE_PREFIX);
	if (strcmp(s, "drive.readonly") != 0 && strcmp(s, "drive") != 0) {
		snprintf(why, wcap, "--scope must be drive.readonly or drive (or its "
				    SCOPE_PREFIX "... URL), not \"%.60s\"", c->scope);
		return CFS_E_CONFIG;
	}
	char *full = malloc(strlen(SCOPE_PREFIX) + strlen(s) + 1);
	if (!full)
		return -ENOMEM;
	memcpy(full, SCOPE_PREFIX, strlen(SCOPE_PREFIX));
	memcpy(full + strlen(SCOPE_PREFIX), s, strlen(s) + 1);
	free(c->scope);
	c->scope = full;
	return 0;
}

/* --root=/PATH: folders below My Drive, by name ("/" alone: My Drive). */
static int check_root_path(const char *path, char *why, size_t wcap)
{
	if (strlen(path) > CFS_ROOT_PATH_MAX) {
		snprintf(why, wcap, "--root: a path of at most %d bytes; give the folder's id instead",
			 CFS_ROOT_PATH_MAX);
		return CFS_E_CONFIG;
	}
	size_t len;
	for (const char *p = cfs_root_path_next(path, &len); len;
	     p = cfs_root_path_next(p + len, &len)) {
		if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) {
			snprintf(why, wcap, "--root=%s: \".\" and \"..\" are not folder names", path);
			return CFS_E_CONFIG;
		}
	}
	return 0;
}

/* --drive-id, --root and --shared-with-me each name the mount's root. */
static int check_root(const struct cfs_config *c, char *why, size_t wcap)
{
	if ((c->drive_id != NULL) + (c->root_id != NULL) + (c->shared_with_me != 0) > 1) {
		snprintf(why, wcap, "--drive-id, --root and --shared-with-me exclude each other: "
				    "give one of them");
		return CFS_E_CONFIG;
	}
	const char *id = c->drive_id ? c->drive_id : c->root_id;
	if (!c->drive_id && id && id[0] == '/')
		return check_root_path(id, why, wcap);
	for (const char *p = id; p && *p; p++)
		if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') &&
		    !(*p >= '0' && *p <= '9') && *p != '-' && *p != '_') {
			snprintf(why, wcap, "--%s: \"%.60s\" is not a Drive id",
				 c->drive_id ? "drive-id" : "root", id);
			return CFS_E_CONFIG;
		}
	if (id && strlen(id) >= CFS_ID_MAX) {
		snprintf(why, wcap, "--%s: the id is too long", c->drive_id ? "drive-id" : "root");
		return CFS_E_CONFIG;
	}
	return 0;
}

const char *cfs_config_root(const struct cfs_config *c)
{
	if (c->drive_id)
		return c->drive_id;
	if (c->shared_with_me)
		return CFS_DRIVE_SHARED_WITH_ME;
	return c->root_id;
}

/* 1 if list, comma-joined FUSE options, holds the option name. */
static int has_fuse_opt(const char *list, const char *name)
{
	size_t len = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		if (n == len && strncmp(p, name, len) == 0)
			return 1;
		p = comma ? comma + 1 : NULL;
	}
	return 0;
}

/* A mount other users may enter gets the kernel to check the modes, or
 * every user could read every file whatever --file-mode says. */
static int add_default_permissions(struct cfs_config *c, char *why, size_t wcap)
{
	if (!has_fuse_opt(c->fuse_opts, "allow_other") && !has_fuse_opt(c->fuse_opts, "allow_root"))
		return 0;
	if (has_fuse_opt(c->fuse_opts, "default_permissions"))
		return 0;
	return apply(c, find_short('o'), "default_permissions", why, wcap);
}

/* --api-url and --token-url get tokens and secrets: https, or plain http
 * only to this machine (the emulator, a local proxy). */
static int check_url(const char *opt, const char *url, char *why, size_t wcap)
{
	int rc = cfs_wire_url_check(url);
	if (rc == -EINVAL)
		snprintf(why, wcap, "--%s must start with https:// (or http:// to localhost)", opt);
	else if (rc)
		snprintf(why, wcap, "--%s %.200s: plain http to another machine would send the "
				    "access token in the clear; use https:// (plain http only to "
				    "localhost or 127.0.0.1)", opt, url);
	return rc ? CFS_E_CONFIG : 0;
}

static int validate(struct cfs_config *c, unsigned flags, char *why, size_t wcap)
{
	int rc;
	enum cfs_log_level lvl;
	struct cfs_export_map m;
	if ((rc = check_url("api-url", c->api_url, why, wcap)) ||
	    (c->token_url && (rc = check_url("token-url", c->token_url, why, wcap))))
		return rc;
	if (c->api_units && c->api_rate != 200) {
		snprintf(why, wcap, "--api-rate and --api-units: give one (--api-units paces by "
			 "Drive's quota units, --api-rate by calls)");
		return CFS_E_CONFIG;
	}
	if (cfs_log_parse_level(c->log_level, &lvl)) {
		snprintf(why, wcap, "--log-level must be debug, info, warn or error");
		return CFS_E_CONFIG;
	}
	if (cfs_export_parse(c->export_formats, &m, why, wcap))
		return CFS_E_CONFIG;
	if (c->ca_file && access(c->ca_file, R_OK) != 0) {
		snprintf(why, wcap, "--ca-file %s: %s", c->ca_file, strerror(errno));
		return CFS_E_CONFIG;
	}
	if (c->shared_cache) {
		struct cfs_tier_seeds seeds;
		if ((rc = cfs_tier_parse(c->shared_cache, &seeds, why, wcap)))
			return rc;
	}
	if (c->shared_cache_nodes) {
		struct cfs_cluster_cidr cidr[CFS_CLUSTER_CIDRS_MAX];
		int n = cfs_cluster_cidrs_parse(c->shared_cache_nodes, cidr, CFS_CLUSTER_CIDRS_MAX,
						why, wcap);
		if (n < 0)
			return n;
		if (!c->shared_cache) {
			snprintf(why, wcap, "--shared-cache-nodes widens the cluster of --shared-cache, "
				 "which is not given");
			return CFS_E_CONFIG;
		}
	}
	if (c->shared_cache_password_file && access(c->shared_cache_password_file, R_OK) != 0) {
		snprintf(why, wcap, "--shared-cache-password-file %s: %s",
			 c->shared_cache_password_file, strerror(errno));
		return CFS_E_CONFIG;
	}
	if (c->shared_cache && !c->shared_cache_key_file && !c->shared_cache_trusted &&
	    !(flags & CFS_CONFIG_DIAGNOSE)) {
		snprintf(why, wcap, "--shared-cache needs --shared-cache-key-file=FILE, a secret "
			 "of at least %d bytes shared by every mount of the cluster (make one with "
			 "`openssl rand -hex 32 > FILE; chmod 600 FILE`), or --shared-cache-trusted "
			 "when only trusted writers can reach the cluster", CFS_TIERED_KEY_MIN);
		return CFS_E_CONFIG;
	}
	if (c->shared_cache_ca_file && access(c->shared_cache_ca_file, R_OK) != 0) {
		snprintf(why, wcap, "--shared-cache-ca-file %s: %s", c->shared_cache_ca_file,
			 strerror(errno));
		return CFS_E_CONFIG;
	}
	if (c->block_size && (c->block_size < (64u << 10) || c->block_size > (64u << 20) ||
			      (c->block_size & (c->block_size - 1)))) {
		snprintf(why, wcap, "--block-size must be a power of two from 64K to 64M");
		return CFS_E_CONFIG;
	}
	if (c->max_request && (c->max_request < (64u << 10) || c->max_request > (256u << 20))) {
		snprintf(why, wcap, "--max-request must be from 64K to 256M");
		return CFS_E_CONFIG;
	}
	if (c->log_max && c->log_max < (64u << 10)) {
		snprintf(why, wcap, "--log-max must be 0 (never rotate) or at least 64K");
		return CFS_E_CONFIG;
	}
	if (c->cache_size && c->cache_size < (16u << 20)) {
		snprintf(why, wcap, "--cache-size must be at least 16M");
		return CFS_E_CONFIG;
	}
	static const char *const modes[] = { "auto", "resend", "forward", "none", "off" };
	int mode_ok = 0;
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		mode_ok |= strcmp(c->recovery, modes[i]) == 0;
	if (!mode_ok) {
		snprintf(why, wcap, "--recovery must be auto, resend, forward, none or off");
		return CFS_E_CONFIG;
	}
	if ((rc = check_root(c, why, wcap)) || (rc = check_scope(c, why, wcap)) ||
	    (rc = add_default_permissions(c, why, wcap)))
		return rc;
	if (!c->help && !c->mountpoint && !(flags & CFS_CONFIG_NO_MOUNTPOINT)) {
		snprintf(why, wcap, "missing MOUNTPOINT");
		return CFS_E_CONFIG;
	}
	return 0;
}

int cfs_config_parse(int argc, char **argv, struct cfs_config *c, char *why, size_t wcap)
{
	return cfs_config_parse_flags(argc, argv, 0, c, why, wcap);
}

int cfs_config_parse_flags(int argc, char **argv, unsigned flags, struct cfs_config *c,
			   char *why, size_t wcap)
{
	memset(c, 0, sizeof(*c));
	c->io_timeout_s = 300;
	c->dir_ttl_s = 300;
	c->attr_timeout_s = -1; /* the listing's lifetime */
	c->max_threads = 64;
	c->max_connections = 16;
	c->api_rate = 200;
	c->hedge_budget = CFS_HEDGE_PERCENT;
	c->poll_interval_s = 60;
	c->crash_loop_limit = 3;
	c->min_free_memory = CFS_CONFIG_AUTO;
	c->uid = c->gid = -1;
	c->file_mode = -1; /* 0644 / 0755, or 0444 / 0555 --read-only */
	c->dir_mode = -1;
	c->write_back_delay_s = 5;
	c->upload_open_files_s = 60;
	c->create_rate = 10;
	c->upload_threads = 4;
	c->shared_cache_lease_s = 10;
	c->shared_cache_ttl_s = 7L * 86400;
	c->start_timeout_s = 60;
	c->log_max = 16u << 20;
	int rc = set_str(&c->api_url, "https://www.googleapis.com");
	if (!rc)
		rc = set_str(&c->recovery, "auto");
	if (!rc)
		rc = set_str(&c->log_level, "info");
	if (!rc)
		rc = set_str(&c->export_formats, CFS_EXPORT_DEFAULT);
	for (int i = 0; !rc && i < argc; i++) {
		const char *a = argv[i];
		const struct opt *o = NULL;
		const char *val = NULL;
		if (strncmp(a, "--", 2) == 0 && a[2]) {
			const char *eq = strchr(a + 2, '=');
			size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
			o = find_long(a + 2, len);
			if (!o) {
				snprintf(why, wcap, "unknown option \"%.*s\" (see colabfs --help)",
					 (int)(len + 2), a);
				rc = CFS_E_CONFIG;
				break;
			}
			if (eq && o->type == T_FLAG) {
				snprintf(why, wcap, "--%s takes no value", o->name);
				rc = CFS_E_CONFIG;
				break;
			}
			val = eq ? eq + 1 : NULL;
		} else if (a[0] == '-' && a[1] && !a[2]) {
			o = find_short(a[1]);
			if (!o) {
				snprintf(why, wcap, "unknown option \"%s\" (see colabfs --help)", a);
				rc = CFS_E_CONFIG;
				break;
			}
		} else if (a[0] == '-' && a[1] && a[2] && find_short(a[1]) &&
			   find_short(a[1])->type == T_FUSE) {
			o = find_short(a[1]);
			val = a + 2; /* -oallow_other */
		} else if (!c->mountpoint) {
			rc = set_str(&c->mountpoint, a);
			c->mountpoint_argi = i;
			continue;
		} else {
			snprintf(why, wcap, "unexpected argument \"%.60s\"", a);
			rc = CFS_E_CONFIG;
			break;
		}
		if (!val && o->type != T_FLAG) {
			if (i + 1 >= argc) {
				snprintf(why, wcap, "%s needs a value", a);
				rc = CFS_E_CONFIG;
				break;
			}
			val = argv[++i];
		}
		rc = apply(c, o, val, why, wcap);
	}
	if (!rc && c->debug)
		c->foreground = 1;
	if (!rc && c->read_only) {
		char *o = NULL;
		if (asprintf(&o, "ro%s%s", c->fuse_opts ? "," : "", c->fuse_opts ? c->fuse_opts : "") < 0)
			rc = -ENOMEM;
		free(c->fuse_opts);
		c->fuse_opts = o;
	}
	if (c->file_mode < 0)
		c->file_mode = c->read_only ? 0444 : 0644;
	if (c->dir_mode < 0)
		c->dir_mode = c->read_only ? 0555 : 0755;
	if (!rc)
		rc = validate(c, flags, why, wcap);
	if (rc == -ENOMEM)
		snprintf(why, wcap, "out of memory");
	return rc;
}

void cfs_config_cleanup(struct cfs_config *c)
{
	char **s[] = { &c->mountpoint, &c->root_id, &c->api_url, &c->token_url,
		       &c->ca_file, &c->credentials, &c->cache_dir, &c->log_file,
		       &c->log_level, &c->export_formats, &c->fuse_opts, &c->metadata_url,
		       &c->recovery, &c->drive_id, &c->scope, &c->staging_dir,
		       &c->shared_cache, &c->shared_cache_password_file,
		       &c->shared_cache_ca_file, &c->shared_cache_nodes, &c->shared_cache_key_file };
	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		free(*s[i]);
		*s[i] = NULL;
	}
}
