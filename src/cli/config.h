/* config: the mount options, in one table that drives parsing, --help and
 * the man page check (tests/check_man.sh).
 *
 * Options take the forms --name=VALUE, --name VALUE, and -o OPT[,OPT] for
 * FUSE mount options (repeatable).  With -o allow_other (or allow_root) the
 * parser adds default_permissions, so the kernel enforces the modes that
 * --uid, --gid, --file-mode, --dir-mode and --umask give every entry.  Parsing never exits or prints: it fills
 * struct cfs_config or returns CFS_E_CONFIG with a one-line reason. */
#ifndef CFS_CONFIG_H
#define CFS_CONFIG_H

#include <stddef.h>
#include <stdio.h>

struct cfs_config {
	char *mountpoint;
	char *root_id;
	char *api_url;
	char *token_url;
	char *ca_file;
	char *credentials;
	char *cache_dir;
	char *log_file;
	char *log_level;
	char *export_formats;
	char *fuse_opts;      /* comma-joined -o values */
	long foreground;
	long debug;
	long io_timeout_s;
	long dir_ttl_s;
	long attr_timeout_s;
	long max_threads;
	long help;
	unsigned long long cache_size;  /* 0: automatic */
	unsigned long long block_size;
	long verify_always;
	long max_connections;
	unsigned long long max_request;
	unsigned long long prefetch_memory;
	unsigned long long min_free_memory; /* CFS_CONFIG_AUTO: memory.h's floor; 0: no watcher */
	long api_rate;
	long api_burst;
	long api_units;     /* per minute; 0: pace by calls (api_rate) */
	long no_dataset_readahead;
	long daemon_opens;    /* --daemon-opens: a read-only mount asks the daemon at open too */
	long hedge_budget;    /* --hedge-budget: hedges per 100 downloads, 0: never */
	long poll_interval_s;
	char *metadata_url;
	char *recovery;       /* auto, resend, forward, none or off */
	long crash_loop_limit;
	char *drive_id;       /* --drive-id: a shared drive to mount */
	long shared_with_me;  /* --shared-with-me */
	char *scope;          /* OAuth scope, always a full URL after parsing: --scope, else
			       * drive (drive.readonly with --read-only) */
	long read_only;       /* --read-only: no writes (EROFS); also set at mount time when
			       * the token's granted scopes cannot write (auth.h) */
	long uid, gid;        /* --uid, --gid: what entries report; -1: the mounting user's */
	long file_mode;       /* --file-mode, --dir-mode: permission bits (0 to 0777) */
	long dir_mode;
	long umask_bits;      /* --umask: cleared from both */
	/* mountpoint and start-up (mnt.h) */
	long force;           /* --force: detach a dead mount at the mountpoint first */
	long start_timeout_s; /* --start-timeout: the first server must serve by then */
	unsigned long long log_max; /* --log-max: the log rotates at this size; 0: never */
	/* writes */
	long delete_permanently;
	long write_back_delay_s;
	long upload_open_files_s;
	char *staging_dir;    /* NULL: automatic (main.c) */
	long create_rate;     /* creations per second */
	long upload_threads;
	/* the shared cache tier (tier.h, tiered.h) */
	char *shared_cache;          /* redis://... seeds, NULL: none */
	char *shared_cache_password_file;
	char *shared_cache_ca_file;
	char *shared_cache_nodes;    /* --shared-cache-nodes: CIDRs also in the cluster */
	char *shared_cache_key_file; /* the deployment key values are MAC'd with */
	long shared_cache_trusted;   /* no key: only trusted writers reach the cluster */
	long shared_cache_lease_s;
	long shared_cache_ttl_s;
	int mountpoint_argi;  /* argv index the mountpoint came from */
};

#define CFS_CONFIG_AUTO (~0ull) /* a size option left to its automatic value */

/* Fills c with defaults and then argv (the words after "mount").  Returns 0
 * or CFS_E_CONFIG / -ENOMEM with the reason in why. */
int cfs_config_parse(int argc, char **argv, struct cfs_config *c, char *why, size_t wcap);
/* cfs_config_parse with flags: CFS_CONFIG_NO_MOUNTPOINT lets the mountpoint
 * be missing (`colabfs doctor [MNT] OPTIONS`). */
#define CFS_CONFIG_NO_MOUNTPOINT 1u
/* CFS_CONFIG_DIAGNOSE: a mount's missing companion options (--shared-cache
 * without --shared-cache-key-file or --shared-cache-trusted) are left for
 * the caller (doctor) to report, not refused. */
#define CFS_CONFIG_DIAGNOSE 2u
int cfs_config_parse_flags(int argc, char **argv, unsigned flags, struct cfs_config *c,
			   char *why, size_t wcap);
void cfs_config_cleanup(struct cfs_config *c);

/* Parses a size: digits with an optional K, M, G or T suffix (powers of
 * 1024; "KiB", "MB" and friends accepted, a trailing B optional).
 * Returns 0 or -EINVAL. */
int cfs_config_parse_size(const char *s, unsigned long long *out);

/* The Drive id the mount serves as its root: --drive-id, the virtual
 * "Shared with me" folder (drive.h), --root, or NULL for My Drive.
 * (--drive-id, --root and --shared-with-me exclude each other.) */
const char *cfs_config_root(const struct cfs_config *c);

/* Prints the option table. */
void cfs_config_usage(FILE *out);

#endif
