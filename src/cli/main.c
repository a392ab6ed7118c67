/* main: the colabfs command line.
 *
 *   colabfs mount [OPTIONS] MOUNTPOINT   serve Drive at MOUNTPOINT
 *   colabfs umount MOUNTPOINT            unmount and wait for the daemon
 *   colabfs stats [PATH] [--json|--prometheus|--watch[=SECONDS]|--history[=SECONDS]]
 *   colabfs evict PATH... | --all MOUNTPOINT | --to SIZE MOUNTPOINT
 *   colabfs warm PATH... [--list FILE] [--ordered] [--json]
 *   colabfs sync [--timeout SECONDS] [--quiet] [--json] [PATH...]
 *   colabfs doctor [MOUNTPOINT] [--json] [mount options]
 *   colabfs --help | --version
 *
 * Everything else lives in libcolabfs.a; this file wires the layers together. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "cachedir.h"
#include "config.h"
#include "ctl.h"
#include "drive.h"
#include "doctor.h"
#include "err.h"
#include "fhtab.h"
#include "http.h"
#include "crashlog.h"
#include "fdlimit.h"
#include "log.h"
#include "memory.h"
#include "journal.h"
#include "mnt.h"
#include "staging.h"
#include "names.h"
#include "nsdb.h"
#include "serve.h"
#include "session.h"
#include "stats.h"
#include "stats_cmd.h"
#include "store.h"
#include "super.h"
#include "sync_cmd.h"
#include "testhook.h"
#include "tiercfg.h"
#include "tiered.h"
#include "vfs.h"
#include "warm.h"

static int usage_error(const char *why)
{
	fprintf(stderr, "colabfs: %s\n", why);
	return 2;
}

/* Without --cache-dir: the mountpoint's own folder (cachedir.h). */
static int default_cache_dir(struct cfs_config *c, char *why, size_t wcap)
{
	char base[64], *dir;
	int rc = cfs_cachedir_default(c->mountpoint, base, sizeof(base), &dir);
	if (!rc && (rc = cfs_cachedir_prepare(base, 1, why, wcap)) != 0)
		free(dir);
	if (rc)
		return rc;
	free(c->cache_dir);
	c->cache_dir = dir;
	return 0;
}

/* The staging folder of a writable mount: --staging-dir, else CACHE-DIR/
 * staging when the cache is on disk, else /var/tmp/colabfs-UID/staging/NAME
 * on disk, NAME being the cache folder's (so named after the mountpoint) (checkpoints must not
 * take RAM), so a remount with the same cache folder finds its journal. */
static int prepare_staging(struct cfs_config *c, char *why, size_t wcap)
{
	if (c->read_only)
		return 0;
	int own = !c->staging_dir;
	if (own) {
		char base[64], *dir;
		const char *name = strrchr(c->cache_dir, '/');
		name = name && name[1] ? name + 1 : "default";
		snprintf(base, sizeof(base), "/var/tmp/colabfs-%u", (unsigned)getuid());
		int in_ram = cfs_mem_dir_in_ram(c->cache_dir) == 1;
		if (in_ram) {
			int rc = cfs_cachedir_prepare(base, 1, why, wcap);
			if (rc)
				return rc;
		}
		if ((in_ram ? asprintf(&dir, "%s/staging/%s", base, name)
			    : asprintf(&dir, "%s/staging", c->cache_dir)) < 0)
			return -ENOMEM;
		c->staging_dir = dir;
	}
	if (cfs_mnt_under(c->mountpoint, c->staging_dir)) {
		snprintf(why, wcap, "the staging folder %.200s is inside the mountpoint %.200s: it "
			 "must live outside the mount (--staging-dir)", c->staging_dir, c->mountpoint);
		return -EINVAL;
	}
	return cfs_cachedir_prepare(c->staging_dir, own, why, wcap);
}

/* Creates the cache folder (0700) and works out the absolute log path. */
static int prepare_dirs(struct cfs_config *c, char *log_path, size_t cap, char *why, size_t wcap)
{
	int own = !c->cache_dir; /* our folder below /dev/shm/colabfs-UID (0700, ours) */
	int rc = c->cache_dir ? 0 : default_cache_dir(c, why, wcap);
	if (rc)
		return rc;
	char tmp[PATH_MAX];
	const char *lf = c->log_file;
	if (!lf) {
		snprintf(tmp, sizeof(tmp), "%.4000s/colabfs.log", c->cache_dir);
		lf = tmp;
	}
	if (lf[0] == '/') {
		if ((size_t)snprintf(log_path, cap, "%s", lf) >= cap)
			return -ENAMETOOLONG;
	} else {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd)))
			return -errno;
		if ((size_t)snprintf(log_path, cap, "%.2048s/%.1024s", cwd, lf) >= cap)
			return -ENAMETOOLONG;
	}
	/* the daemon would wait on its own mount for its cache or its log */
	const char *inside = cfs_mnt_under(c->mountpoint, c->cache_dir) ? "the cache folder"
			     : cfs_mnt_under(c->mountpoint, log_path) ? "the log file"
								       : NULL;
	if (inside) {
		snprintf(why, wcap, "%s %.200s is inside the mountpoint %.200s: it must live "
			 "outside the mount (--cache-dir, --log-file)",
			 inside, inside[4] == 'c' ? c->cache_dir : log_path, c->mountpoint);
		return -EINVAL;
	}
	/* absolute already (check_mountpoint): the GPU loader asks the mount for it */
	rc = cfs_cachedir_prepare(c->cache_dir, own, why, wcap);
	return rc ? rc : prepare_staging(c, why, wcap);
}

/* `colabfs mount` (not a server): every path made absolute once, what is
 * mounted at the mountpoint looked at (mnt.h).  Returns 0 or an exit
 * status with the reason printed. */
static int check_mountpoint(struct cfs_config *c)
{
	char why[1024];
	char **paths[] = { &c->mountpoint, &c->cache_dir, &c->log_file, &c->credentials,
			   &c->ca_file, &c->staging_dir, &c->shared_cache_key_file,
			   &c->shared_cache_password_file, &c->shared_cache_ca_file };
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		int rc = cfs_mnt_abs_dup(paths[i]);
		if (rc) {
			fprintf(stderr, "colabfs: %s: %s\n", *paths[i], strerror(-rc));
			return 2;
		}
	}
	if (cfs_mnt_check(c->mountpoint, (int)c->force, why, sizeof(why))) {
		fprintf(stderr, "colabfs: %s\n", why);
		return 1;
	}
	struct stat st;
	if (stat(c->mountpoint, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "colabfs: mountpoint %s is not a folder\n", c->mountpoint);
		return 2;
	}
	return 0;
}

/* What a mount is made of, below the FUSE session. */
struct mount {
	struct cfs_config *c;
	struct cfs_http *http;
	struct cfs_auth *auth;
	struct cfs_drive *drive;
	struct cfs_store *store;
	struct cfs_vfs *vfs;
	struct cfs_tiered *tiered; /* --shared-cache: the reader's downloads go through it */
	int fresh;          /* a new mount, not a server restarted under a live one */
	struct cfs_fhtab *fhtab; /* supervised: handle rows in the supervisor's memfd */
	int no_fh_rows;     /* --recovery=off: this process is the mount, no rows */
	struct cfs_journal *journal; /* writable mounts: the write journal and */
	struct cfs_staging *stage;     /* the staging folder */
	char why[512];
	char ram_note[512]; /* a cache in RAM: its budget rule, for the mount's terminal */
	int ram_warn;       /* ram_note is a warning */
	char scope_note[640]; /* why the mount went read-only (check_write_scope), or "" */
};

/* COLABFS_TEST_MEMWATCH_HOLD_MS (a test hook, with COLABFS_MEMINFO and
 * COLABFS_PSI in memory.h): how long memory pressure must be gone before the
 * watcher gives read-ahead and the budget back; 0: the default. */
static int64_t test_hold_ms(void)
{
	const char *p = cfs_test_env("COLABFS_TEST_MEMWATCH_HOLD_MS");
	char *end;
	long long v = p ? strtoll(p, &end, 10) : 0;
	return p && *p && !*end && v > 0 && v < 86400000 ? (int64_t)v : 0;
}

/* The cache's budget against this machine's memory (memory.h): for a cache
 * folder in RAM, the automatic budget also respects RAM and an explicit one
 * above that is warned about; *floor gets the free memory the watcher keeps
 * (0: no watcher: a folder on disk, or --min-free-memory=0). */
static void ram_budget(struct mount *m, uint64_t *floor)
{
	struct cfs_config *c = m->c;
	struct cfs_mem_budget_in in = { .explicit_size = c->cache_size };
	struct cfs_store_stats st;
	struct statvfs fs;
	*floor = 0;
	in.in_ram = cfs_mem_dir_in_ram(c->cache_dir) == 1;
	if (!in.in_ram || cfs_mem_sample(&in.mem) != 0 || statvfs(c->cache_dir, &fs) != 0)
		return; /* the store's own rule stands */
	cfs_store_stats(m->store, &st);
	in.fs_free = (uint64_t)fs.f_bavail * fs.f_frsize;
	in.own = st.used_bytes;
	in.floor = c->min_free_memory == CFS_CONFIG_AUTO ? cfs_mem_floor(in.mem.total)
							 : c->min_free_memory;
	struct cfs_mem_budget b;
	cfs_mem_auto_budget(&in, &b);
	uint64_t freed = 0;
	if (b.budget != st.budget && cfs_store_set_budget(m->store, b.budget, &freed) != 0)
		CFS_WARN("cache: cannot set the budget to %llu MiB",
			 (unsigned long long)(b.budget >> 20));
	m->ram_warn = b.warn;
	if (b.warn)
		snprintf(m->ram_note, sizeof(m->ram_note),
			 "cache %.100s is more than a cache in RAM (tmpfs) should take here (%llu MiB "
			 "of %llu MiB of RAM): it can cost the training job its memory; use "
			 "--cache-dir on disk for datasets larger than memory",
			 b.why, (unsigned long long)(b.ram_max >> 20),
			 (unsigned long long)(in.mem.total >> 20));
	else
		snprintf(m->ram_note, sizeof(m->ram_note), "cache %s%s", b.why,
			 b.budget == b.ram_max ? "; for datasets larger than that, use --cache-dir "
						 "on disk" : "");
	if (b.warn)
		CFS_WARN("%s", m->ram_note);
	else
		CFS_INFO("%s", m->ram_note);
	if (freed)
		CFS_INFO("cache: %llu MiB evicted to fit the budget",
			 (unsigned long long)(freed >> 20));
	*floor = in.floor;
}

#define FIRST_CALL_MS 10000
#define START_MARGIN_MS 1500 /* left of --start-timeout to say why the first call failed */

static int64_t started_ms; /* CLOCK_MONOTONIC when this process began */

/* How long a new mount's first call to Drive may keep trying: FIRST_CALL_MS,
 * but ending START_MARGIN_MS before --start-timeout (which the supervisor
 * counts from this process's start), so that the reason, not "did not
 * start serving", is what the mount says; at least a second. */
static long first_call_ms(const struct cfs_config *c)
{
	long ms = FIRST_CALL_MS;
	if (c->start_timeout_s > 0) {
		int64_t left = (int64_t)c->start_timeout_s * 1000 -
			       (cfs_clock_mono_ms() - started_ms) - START_MARGIN_MS;
		if (left < ms)
			ms = left > 1000 ? (long)left : 1000;
	}
	return ms;
}

/* Opens the cache and the file system core.  Called before daemonizing to
 * catch every error on the terminal, and again in the daemon: LMDB cannot
 * cross a fork. */
static int open_core(struct mount *m)
{
	struct cfs_config *c = m->c;
	struct cfs_store_opts sto = { .dir = c->cache_dir, .block_size = (uint32_t)c->block_size,
				      .budget = c->cache_size, .verify_always = (int)c->verify_always };
	struct cfs_vfs_opts vo = {
		.root_id = cfs_config_root(c),
		.dir_ttl_s = c->dir_ttl_s,
		.reader = { .workers = (int)c->max_connections, .max_request = c->max_request,
			    .prefetch_budget = c->prefetch_memory },
		.no_dataset_readahead = (int)c->no_dataset_readahead,
		.whole_drive = c->drive_id || c->shared_with_me,
		.fhtab = m->fhtab,
		.no_fh_rows = m->no_fh_rows,
		.delete_permanently = (int)c->delete_permanently,
		.write_back_ms = c->write_back_delay_s * 1000,
		.upload_open_ms = c->upload_open_files_s * 1000,
		.upload_threads = (int)c->upload_threads,
		.fresh_mount = m->fresh,
	};
	cfs_export_parse(c->export_formats, &vo.exports, m->why, sizeof(m->why));
	int rc = cfs_store_open(&sto, &m->store);
	if (rc) {
		snprintf(m->why, sizeof(m->why), "cannot open the cache in %s: %s", c->cache_dir,
			 rc == -EBUSY ? "another colabfs mount is using it (give each mount its "
					"own --cache-dir)"
				      : cfs_strerror(rc));
		return rc;
	}
	rc = cfs_tiercfg_tiered(c, m->drive, cfs_store_block_size(m->store), &m->tiered, m->why,
				sizeof(m->why));
	if (rc)
		return rc;
	if (m->tiered) {
		vo.reader.fetch = cfs_tiered_fetch;
		vo.reader.cancel = cfs_tiered_cancel;
		vo.reader.forget = cfs_tiered_forget;
		vo.reader.io = m->tiered;
	}
	if (!c->read_only) {
		char aside[PATH_MAX];
		rc = cfs_journal_open_or_reset(c->staging_dir, &m->journal, aside, sizeof(aside));
		if (!rc && aside[0])
			CFS_ERROR("the write journal in %s was damaged: it is moved to %s and the mount "
				  "starts with an empty one; the staged files (w-*) in that folder are "
				  "kept, but nothing of them is uploaded", c->staging_dir, aside);
		if (!rc)
			rc = cfs_staging_open(c->staging_dir, &m->stage);
		if (rc) {
			snprintf(m->why, sizeof(m->why), "cannot open the write journal in %s: %s",
				 c->staging_dir, cfs_strerror(rc));
			return rc;
		}
		vo.journal = m->journal;
		vo.stage = m->stage;
		vo.journal_owner = c->api_url;
	}
	ram_budget(m, &vo.mem_floor);
	vo.mem_hold_ms = test_hold_ms();
	uint64_t stale = 0;
	if (m->fresh && cfs_nsdb_fh_clear(m->store, &stale) == 0 && stale)
		CFS_INFO("dropped %llu file handle rows of an earlier mount",
			 (unsigned long long)stale);
	/* a new mount asks Drive for its root first: with Drive unreachable,
	 * say so within seconds, not after --io-timeout */
	long io = 0, first = first_call_ms(c);
	if (m->fresh && (io = cfs_drive_set_io_timeout(m->drive, first)) < first)
		cfs_drive_set_io_timeout(m->drive, io); /* --io-timeout is shorter still */
	rc = cfs_vfs_new(m->drive, m->store, &vo, &m->vfs);
	if (m->fresh)
		cfs_drive_set_io_timeout(m->drive, io);
	const char *root = cfs_config_root(c) ? cfs_config_root(c) : "My Drive";
	char tried[48];
	snprintf(tried, sizeof(tried), " for %.2g s", (double)(io < first ? io : first) / 1000);
	if (rc == CFS_E_NET || rc == CFS_E_SERVER || rc == CFS_E_TLS)
		snprintf(m->why, sizeof(m->why), "cannot reach Drive at %s to open %s: %s%s (see "
			 "the log for the details; check the network, --api-url or --ca-file)",
			 c->api_url, root, cfs_strerror(rc),
			 rc == CFS_E_TLS ? "" : m->fresh ? tried : "");
	else if (root[0] == '/' && (rc == -ENOENT || rc == -ENOTUNIQ))
		snprintf(m->why, sizeof(m->why), "cannot open the Drive folder %s: %s (names are "
			 "matched exactly; folders and shortcuts to folders count; the log names the "
			 "folder)%s", root, rc == -ENOENT ? "My Drive has no folder at that path"
			 : "two or more folders on that path have the same name",
			 rc == -ENOTUNIQ ? ": give --root the folder's id instead" : "");
	else if (rc)
		snprintf(m->why, sizeof(m->why), "cannot open the Drive folder %s: %s%s", root,
			 cfs_strerror(rc),
			 (rc == -EACCES || rc == CFS_E_AUTH) && cfs_auth_from_colab(m->auth)
				 ? "; the token from Colab's credential endpoint has no access to "
				   "Drive: " CFS_AUTH_COLAB_FIX
				 : "");
	return rc;
}

static void close_core(struct mount *m)
{
	cfs_session_stopping("the file system's threads (uploads, read-ahead, polling)");
	cfs_vfs_free(m->vfs);
	cfs_session_stopping("the block cache and the journal");
	cfs_tiered_free(m->tiered);
	cfs_store_close(m->store);
	cfs_journal_close(m->journal);
	cfs_staging_close(m->stage);
	m->vfs = NULL;
	m->tiered = NULL;
	m->store = NULL;
	m->journal = NULL;
	m->stage = NULL;
}

static int reopen_core(void *arg, struct cfs_vfs **vfs, struct cfs_stats_src *st)
{
	struct mount *m = arg;
	close_core(m);
	int rc = open_core(m);
	if (rc) {
		CFS_ERROR("%s", m->why);
		return rc;
	}
	*vfs = m->vfs;
	st->store = m->store;
	st->vfs = m->vfs;
	st->reader = cfs_vfs_reader(m->vfs);
	st->tiered = m->tiered;
	return 0;
}

/* The session is ending (unmounted, or a signal): no download and no call
 * to the shared cache may hold the server's exit up (tier.h, drive.h). */
static void stop_downloads(void *arg)
{
	struct mount *m = arg;
	cfs_drive_cancel(m->drive);
	if (m->tiered)
		cfs_tiered_cancel(m->tiered);
}

/* A mount that may write needs a token that may: one whose granted scopes
 * are known and allow no writes (only drive.readonly, say) makes the mount
 * read-only (c->read_only), said in the log and, after the serving line, on
 * the terminal.  Unknown scopes leave the mount as it was. */
static void check_write_scope(struct mount *m)
{
	char granted[320];
	if (m->c->read_only || cfs_auth_can_write(m->auth) != 0)
		return;
	cfs_auth_granted(m->auth, granted, sizeof(granted));
	m->c->read_only = 1;
	snprintf(m->scope_note, sizeof(m->scope_note),
		 "the token has only the drive.readonly scope (granted: %s): mounting read-only; "
		 "use credentials with the drive scope to write", granted);
	CFS_WARN("%s", m->scope_note);
}

/* Everything below the FUSE session: HTTP, credentials, Drive, cache, vfs.
 * Returns 0 or a status with the reason in m->why. */
static int build_core(struct mount *m)
{
	struct cfs_config *c = m->c;
	struct cfs_http_opts ho = { .ca_file = c->ca_file, .user_agent = "colabfs/" CFS_VERSION };
	struct cfs_auth_opts ao = { .credentials = c->credentials, .token_url = c->token_url,
				    .metadata_url = c->metadata_url, .scope = c->scope };
	struct cfs_drive_opts dopt = { .api_url = c->api_url,
				       .io_timeout_ms = c->io_timeout_s * 1000,
				       .api_rate = c->api_rate ? (double)c->api_rate : -1,
				       .api_burst = (double)c->api_burst,
				       .api_units = (double)c->api_units, .drive_id = c->drive_id,
				       .root_id = c->root_id,
				       .shared_with_me = (int)c->shared_with_me,
				       .hedge_percent = c->hedge_budget ? (int)c->hedge_budget : -1,
				       .create_rate = (double)c->create_rate };
	int rc = cfs_http_new(&ho, &m->http);
	if (rc)
		snprintf(m->why, sizeof(m->why), "cannot start the HTTP client: %s", cfs_strerror(rc));
	else if ((rc = cfs_auth_new(m->http, &ao, &m->auth, m->why, sizeof(m->why))) == 0)
		CFS_INFO("colabfs %s: credentials from %s, Drive API at %s", CFS_VERSION,
			 cfs_auth_source(m->auth), c->api_url);
	if (!rc)
		check_write_scope(m);
	if (!rc && (rc = cfs_drive_new(m->http, m->auth, &dopt, &m->drive)))
		snprintf(m->why, sizeof(m->why), "%s", cfs_strerror(rc));
	if (!rc)
		rc = open_core(m);
	return rc;
}

static void free_core(struct mount *m)
{
	close_core(m);
	cfs_drive_free(m->drive);
	cfs_auth_free(m->auth);
	cfs_http_free(m->http);
}

/* The line `colabfs mount` prints once the mount serves. */
static void serving_line(struct mount *m, const char *log_path, char *out, size_t cap)
{
	struct cfs_store_stats sst;
	cfs_store_stats(m->store, &sst);
	int n = snprintf(out, cap, "colabfs: serving %s at %s; cache %s (budget %llu MiB); log: %s\n",
			 cfs_vfs_root_id(m->vfs), m->c->mountpoint, m->c->cache_dir,
			 (unsigned long long)(sst.budget >> 20), log_path);
	if (m->ram_note[0] && n > 0 && (size_t)n < cap)
		n += snprintf(out + n, cap - (size_t)n, "colabfs: %s%s\n",
			      m->ram_warn ? "warning: " : "", m->ram_note);
	if (m->scope_note[0] && n > 0 && (size_t)n < cap)
		snprintf(out + n, cap - (size_t)n, "colabfs: %s\n", m->scope_note);
}

static void session_opts(struct mount *m, const char *log_path, struct cfs_session_opts *so)
{
	struct cfs_config *c = m->c;
	int64_t now_ms = cfs_clock_mono_ms();
	*so = (struct cfs_session_opts){
		.mountpoint = c->mountpoint,
		.fuse_opts = c->fuse_opts,
		.foreground = (int)c->foreground,
		.debug = (int)c->debug,
		.max_threads = (int)c->max_threads,
		.attr_timeout = (double)c->attr_timeout_s,
		.poll_interval = c->poll_interval_s,
		.daemon_opens = (int)c->daemon_opens,
		.uid = c->uid >= 0 ? (uint32_t)c->uid : (uint32_t)getuid(),
		.gid = c->gid >= 0 ? (uint32_t)c->gid : (uint32_t)getgid(),
		.file_mode = (uint32_t)(c->file_mode & ~c->umask_bits),
		.dir_mode = (uint32_t)(c->dir_mode & ~c->umask_bits),
		.log_file = log_path,
		.cache_dir = c->cache_dir,
		.stats = { .drive = m->drive, .store = m->store, .vfs = m->vfs,
			   .reader = cfs_vfs_reader(m->vfs), .tiered = m->tiered,
			   .started_ms = now_ms },
		.after_fork = reopen_core,
		.after_fork_arg = m,
		.on_exit = stop_downloads,
		.on_exit_arg = m,
		.mount_dev = cfs_mnt_dev,
	};
}

/* Parses the mount words and prepares folders and logging; shared by mount
 * and serve.  Returns 0, or an exit status with the reason printed. */
static int mount_setup(int argc, char **argv, struct mount *m, char *log_path, size_t cap,
		       int serving)
{
	struct cfs_config *c = m->c;
	int rc = cfs_config_parse(argc, argv, c, m->why, sizeof(m->why));
	if (rc || c->help) {
		if (rc)
			fprintf(stderr, "colabfs: %s\n", m->why);
		else
			cfs_config_usage(stdout);
		return rc ? 2 : -1;
	}
	enum cfs_log_level lvl = CFS_LOG_INFO;
	cfs_log_parse_level(c->log_level, &lvl);
	if (c->debug)
		lvl = CFS_LOG_DEBUG;
	cfs_log_set_level(lvl);
	/* a server must not look at its own mountpoint: that waits on itself */
	if (!serving && (rc = check_mountpoint(c)))
		return rc;
	if ((rc = prepare_dirs(c, log_path, cap, m->why, sizeof(m->why)))) {
		fprintf(stderr, "colabfs: %s\n", m->why[0] ? m->why : strerror(-rc));
		return 1;
	}
	/* nothing relative is left; a daemon keeps no folder busy */
	if (!serving && chdir("/") != 0)
		return 1;
	cfs_log_set_max(c->log_max);
	return 0;
}

/* A server's limit of open files up to the hard one (fdlimit.h): each file
 * waiting for its upload keeps its staged file open. */
static void raise_open_files(void)
{
	uint64_t was = 0, now = 0;
	int rc = cfs_fdlimit_raise(&was, &now);
	if (rc)
		CFS_WARN("open files: cannot raise the limit of %llu: %s", (unsigned long long)was,
			 cfs_strerror(rc));
	else if (now != was)
		CFS_INFO("open files: limit raised from %llu to %llu", (unsigned long long)was,
			 (unsigned long long)now);
	if (now < 8192)
		CFS_WARN("open files: the limit is %llu (ulimit -Hn); on a writable mount a file "
			 "waiting for its upload holds one, so fewer than that can wait at once",
			 (unsigned long long)now);
}

/* --recovery=off: one process mounts and serves; its death ends the mount. */
static int mount_single(struct mount *m, const char *log_path)
{
	struct cfs_config *c = m->c;
	/* In the foreground we log to stderr unless told otherwise. */
	cfs_log_open(c->foreground && c->log_file ? log_path : NULL, cfs_log_get_level());
	cfs_crashlog_install(); /* a fatal signal leaves the stack on stderr (the log, detached) */
	raise_open_files();
	int rc = build_core(m);
	if (rc) {
		fprintf(stderr, "colabfs: %s\n", m->why);
		free_core(m);
		return 1;
	}
	if (!c->foreground) {
		char line[2048];
		serving_line(m, log_path, line, sizeof(line));
		fputs(line, stderr);
	}
	struct cfs_session_opts so;
	session_opts(m, log_path, &so);
	rc = cfs_session_run(m->vfs, &so);
	if (rc)
		fprintf(stderr, "colabfs: %s\n", cfs_strerror(rc));
	/* unmounted: downloads still running or retrying end now, not after
	 * --io-timeout, so the daemon exits promptly even with Drive down
	 * (stop_downloads did it already when the session began to end) */
	cfs_drive_cancel(m->drive);
	free_core(m);
	return rc ? 1 : 0;
}

/* The words a supervisor gives its servers: the user's, with the mountpoint
 * and every path made absolute (the daemon runs in /) and the cache folder
 * worked out here (the default one is named after the mountpoint, which a
 * server must not resolve).  *n gets the count. */
static char **server_argv(struct cfs_config *c, int argc, char **argv, int *n)
{
	const char *names[] = { "--cache-dir", "--log-file", "--credentials", "--ca-file",
				"--shared-cache-key-file", "--shared-cache-password-file",
				"--shared-cache-ca-file" };
	char *vals[] = { c->cache_dir, c->log_file, c->credentials, c->ca_file,
			 c->shared_cache_key_file, c->shared_cache_password_file,
			 c->shared_cache_ca_file };
	size_t nv = sizeof(vals) / sizeof(vals[0]);
	char **sa = calloc((size_t)argc + 2 * nv + 1, sizeof(*sa));
	if (!sa)
		return NULL;
	memcpy(sa, argv, (size_t)argc * sizeof(*sa));
	sa[c->mountpoint_argi] = c->mountpoint;
	*n = argc;
	for (size_t i = 0; i < nv; i++)
		if (vals[i]) {
			sa[(*n)++] = (char *)names[i];
			sa[(*n)++] = vals[i];
		}
	return sa;
}

/* A supervised mount finds its credentials before anything is mounted: a
 * missing or unusable one fails here, at once, not in the first server
 * after the mount appeared.  Returns 0 or 1 (reported). */
static int probe_credentials(struct mount *m)
{
	struct cfs_config *c = m->c;
	struct cfs_http_opts ho = { .ca_file = c->ca_file, .user_agent = "colabfs/" CFS_VERSION };
	struct cfs_auth_opts ao = { .credentials = c->credentials, .token_url = c->token_url,
				    .metadata_url = c->metadata_url, .scope = c->scope };
	int rc = cfs_http_new(&ho, &m->http);
	if (rc)
		snprintf(m->why, sizeof(m->why), "cannot start the HTTP client: %s",
			 cfs_strerror(rc));
	else
		rc = cfs_auth_new(m->http, &ao, &m->auth, m->why, sizeof(m->why));
	cfs_auth_free(m->auth);
	cfs_http_free(m->http);
	m->auth = NULL;
	m->http = NULL;
	if (rc)
		fprintf(stderr, "colabfs: %s\n", m->why);
	return rc ? 1 : 0;
}

/* The shared cache's key is checked before anything is mounted (an unusable
 * one fails here, with its reason on the terminal), and a mount without one
 * (--shared-cache-trusted) says what that means.  Returns 0 or 1 (reported). */
static int probe_shared_cache(struct mount *m)
{
	struct cfs_config *c = m->c;
	struct cfs_tiered_key *key = NULL;
	if (!c->shared_cache)
		return 0;
	int rc = cfs_tiercfg_key(c, &key, m->why, sizeof(m->why));
	if (rc) {
		fprintf(stderr, "colabfs: %s\n", rc == -ENOMEM ? "out of memory" : m->why);
		return 1;
	}
	if (!key)
		fprintf(stderr, "colabfs: warning: --shared-cache-trusted: the shared cache's "
			"values are not authenticated; anyone who can write to the cluster decides "
			"what this mount reads (give --shared-cache-key-file to authenticate them)\n");
	cfs_tiered_key_free(key);
	return 0;
}

static int cmd_mount(int argc, char **argv)
{
	struct cfs_config c;
	struct mount m = { .c = &c, .fresh = 1 };
	char log_path[PATH_MAX];
	int rc = mount_setup(argc, argv, &m, log_path, sizeof(log_path), 0);
	/* COLABFS_SHARED_CACHE_PASSWORD: out of the environment before any
	 * process is started (tiercfg.h) */
	if (rc == 0 && cfs_tiercfg_stash_password(&c, m.why, sizeof(m.why))) {
		fprintf(stderr, "colabfs: %s\n", m.why);
		rc = 1;
	}
	if (rc == 0) {
		struct cfs_session_opts chk = { .fuse_opts = c.fuse_opts };
		if (cfs_session_check(&chk)) {
			fprintf(stderr, "colabfs: bad FUSE option in -o %s\n", c.fuse_opts);
			rc = 2;
		}
	}
	if (rc == 0)
		rc = probe_shared_cache(&m);
	if (rc == 0 && strcmp(c.recovery, "off") == 0) {
		m.no_fh_rows = 1;
		rc = mount_single(&m, log_path);
	} else if (rc == 0) {
		if (c.foreground)
			cfs_log_open(c.log_file ? log_path : NULL, cfs_log_get_level());
		int n = 0;
		char **sargv = server_argv(&c, argc, argv, &n);
		if (!sargv) {
			cfs_config_cleanup(&c);
			return 1;
		}
		struct cfs_super_opts so = {
			.mountpoint = c.mountpoint, .fuse_opts = c.fuse_opts, .debug = (int)c.debug,
			.foreground = (int)c.foreground, .recovery = c.recovery,
			.crash_loop_limit = (int)c.crash_loop_limit, .log_file = log_path,
			.log_level = (int)cfs_log_get_level(), .argc = n, .argv = sargv,
			.start_timeout_ms = c.start_timeout_s * 1000,
		};
		rc = probe_credentials(&m);
		if (!rc)
			rc = cfs_super_run(&so);
		free(sargv);
	}
	cfs_config_cleanup(&c);
	cfs_log_close();
	return rc < 0 ? 0 : rc;
}

/* ---- colabfs serve: the server a supervisor runs (not for users) ---------- */

struct served {
	struct mount *m;
	struct cfs_super_shm *shm;
	const char *log_path;
	int ready_fd;
};

static void on_serving(void *arg)
{
	struct served *sv = arg;
	__atomic_store_n(&sv->shm->ready, 1, __ATOMIC_RELEASE);
	if (sv->ready_fd >= 0) {
		char line[2048] = "OK ";
		serving_line(sv->m, sv->log_path, line + 3, sizeof(line) - 3);
		cfs_serve_report(sv->ready_fd, line);
		close(sv->ready_fd);
		sv->ready_fd = -1;
	}
	CFS_INFO("serving (server pid %d, supervisor pid %d)", (int)getpid(),
		 (int)sv->shm->rec.super_pid);
}

static int cmd_serve(int argc, char **argv)
{
	struct cfs_serve_args a;
	int prc = cfs_serve_parse(&argc, &argv, &a);
	if (prc)
		return usage_error(prc == -EPROTO ? "serve: no supervisor state"
						  : "serve is run by colabfs mount, not by hand");
	struct cfs_super_shm *shm = a.shm;
	struct cfs_config c;
	/* the first server of a mount finds no INIT reply recorded */
	struct mount m = { .c = &c, .fresh = !__atomic_load_n(&shm->reply_len, __ATOMIC_ACQUIRE) };
	char log_path[PATH_MAX];
	int rc = mount_setup(argc, argv, &m, log_path, sizeof(log_path), 1);
	if (rc) {
		cfs_serve_report(a.ready_fd, "ERR bad mount arguments\n");
		return CFS_SERVE_EXIT_START;
	}
	cfs_log_open(!c.foreground || c.log_file ? log_path : NULL, cfs_log_get_level());
	if (!c.foreground)
		cfs_log_capture_stderr(); /* the supervisor's stderr is this log already */
	cfs_crashlog_install();       /* a fatal signal leaves the stack in it */
	raise_open_files();
	/* the handle rows of the servers before this one (none at a fresh mount) */
	uint32_t torn = 0;
	rc = cfs_fhtab_attach((char *)shm + CFS_SHM_HANDLES_OFF, CFS_SHM_SIZE - CFS_SHM_HANDLES_OFF,
			      &m.fhtab, &torn);
	if (rc) {
		cfs_serve_report(a.ready_fd, "ERR the supervisor's handle table is unusable\n");
		CFS_ERROR("handle table: %s", cfs_strerror(rc));
		cfs_config_cleanup(&c);
		return CFS_SERVE_EXIT_START;
	}
	if (!m.fresh)
		CFS_INFO("%u open file handle rows kept from the last server%s",
			 cfs_fhtab_count(m.fhtab), torn ? " (and half-written ones dropped)" : "");
	cfs_serve_slow_start_hook();
	rc = build_core(&m);
	if (rc) {
		char msg[600];
		snprintf(msg, sizeof(msg), "ERR %s\n", m.why);
		cfs_serve_report(a.ready_fd, msg);
		CFS_ERROR("%s", m.why);
		free_core(&m);
		cfs_fhtab_detach(m.fhtab);
		cfs_config_cleanup(&c);
		return CFS_SERVE_EXIT_START;
	}
	struct served sv = { .m = &m, .shm = shm, .log_path = log_path, .ready_fd = a.ready_fd };
	struct cfs_session_opts so;
	session_opts(&m, log_path, &so);
	so.stuck_exit = CFS_SERVE_EXIT_OK; /* unmounted: the supervisor must not start another */
	so.foreground = 1;
	so.after_fork = NULL;
	so.stats.recovery = &shm->rec;
	so.serve = (struct cfs_serve_io_opts){
		.fuse_fd = a.fuse_fd,
		.record = __atomic_load_n(&shm->rec.mode, __ATOMIC_RELAXED) == CFS_RECOVERY_FORWARD,
		.shm = shm,
	};
	so.on_serving = on_serving;
	so.on_serving_arg = &sv;
	rc = cfs_session_run(m.vfs, &so);
	cfs_serve_slow_stop_hook();
	cfs_drive_cancel(m.drive);
	if (sv.ready_fd >= 0)
		cfs_serve_report(sv.ready_fd, "ERR the server could not complete FUSE_INIT\n");
	free_core(&m);
	cfs_fhtab_detach(m.fhtab);
	cfs_config_cleanup(&c);
	cfs_log_close();
	if (rc == -EPROTO)
		return CFS_SERVE_EXIT_REFUSE;
	return rc ? 1 : CFS_SERVE_EXIT_OK;
}

static int cmd_umount(int argc, char **argv)
{
	if (argc != 1)
		return usage_error("usage: colabfs umount MOUNTPOINT");
	char why[1024];
	int rc = cfs_ctl_umount(argv[0], CFS_UMOUNT_MS, why, sizeof(why));
	if (rc) {
		fprintf(stderr, "colabfs: %s\n", why);
		return 1;
	}
	return 0;
}

static int ctl_error(const char *path, int rc)
{
	fprintf(stderr, "colabfs: %s: %s\n", path, cfs_ctl_strerror(-rc));
	return 1;
}

static int cmd_evict(int argc, char **argv)
{
	const char *usage = "usage: colabfs evict PATH... | --all MOUNTPOINT | --to SIZE MOUNTPOINT";
	char name[CFS_CTLNAME_MAX];
	int first = 0;
	if (argc == 2 && strcmp(argv[0], "--all") == 0) {
		snprintf(name, sizeof(name), "%s", CFS_XATTR_EVICT);
		first = 1;
		pid_t pid;
		int rc = cfs_ctl_pid(argv[1], &pid);
		struct stat a, b;
		char parent[4096];
		snprintf(parent, sizeof(parent), "%s/..", argv[1]);
		if (rc)
			return ctl_error(argv[1], rc);
		if (stat(argv[1], &a) || stat(parent, &b) || a.st_dev == b.st_dev)
			return usage_error("--all wants the mountpoint itself");
	} else if (argc == 3 && strcmp(argv[0], "--to") == 0) {
		unsigned long long target;
		if (cfs_config_parse_size(argv[1], &target))
			return usage_error("--to wants a size like 1G");
		struct cfs_ctlname r = { .kind = CFS_CTL_EVICT_TO, .target = target };
		if (cfs_ctlname_format(&r, name, sizeof(name)))
			return usage_error("--to wants a size like 1G");
		first = 2;
	} else if (argc >= 1 && argv[0][0] != '-') {
		snprintf(name, sizeof(name), "%s", CFS_XATTR_EVICT);
	} else {
		return usage_error(usage);
	}
	int failed = 0;
	for (int i = first; i < argc; i++) {
		char *res;
		int rc = cfs_ctl_get(argv[i], name, &res);
		if (rc) {
			failed |= ctl_error(argv[i], rc);
			continue;
		}
		unsigned long long bytes = 0, blocks = 0;
		if (sscanf(res, "{\"freed_bytes\":%llu,\"freed_blocks\":%llu}", &bytes, &blocks) != 2)
			failed |= ctl_error(argv[i], -EPROTO);
		else
			printf("%s: freed %.1f MiB (%llu blocks)\n", argv[i], bytes / 1048576.0, blocks);
		free(res);
	}
	return failed;
}

/* A daemon keeps nothing its starter left open (beyond stdin, stdout and
 * stderr): a pipe held open makes a caller wait forever for its end.  (A
 * server gets exactly the descriptors its supervisor names.) */
static void close_inherited(void)
{
	if (close_range(3, ~0u, 0) == 0)
		return;
	long max = sysconf(_SC_OPEN_MAX);
	for (long fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
		close((int)fd);
}

int main(int argc, char **argv)
{
	started_ms = cfs_clock_mono_ms();
	if (argc < 2)
		return usage_error("missing command (try colabfs --help)");
	const char *cmd = argv[1];
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
		printf("colabfs %s\n%s", CFS_VERSION,
		       CFS_TEST_HOOKS_ON ? "test build: test hooks on\n" : "");
		return 0;
	}
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		cfs_config_usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "mount") == 0 || strcmp(cmd, "serve") == 0) {
		/* these hold the credentials: no core dump, no ptrace or
		 * /proc/PID/mem by other processes of the user */
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
		if (cmd[0] == 'm')
			close_inherited();
	}
	if (strcmp(cmd, "mount") == 0)
		return cmd_mount(argc - 2, argv + 2);
	if (strcmp(cmd, "serve") == 0)
		return cmd_serve(argc - 2, argv + 2);
	if (strcmp(cmd, "umount") == 0 || strcmp(cmd, "unmount") == 0)
		return cmd_umount(argc - 2, argv + 2);
	if (strcmp(cmd, "stats") == 0)
		return cfs_stats_main(argc - 2, argv + 2);
	if (strcmp(cmd, "evict") == 0)
		return cmd_evict(argc - 2, argv + 2);
	if (strcmp(cmd, "warm") == 0)
		return cfs_warm_main(argc - 2, argv + 2);
	if (strcmp(cmd, "sync") == 0)
		return cfs_sync_main(argc - 2, argv + 2);
	if (strcmp(cmd, "doctor") == 0)
		return cfs_doctor_main(argc - 2, argv + 2);
	fprintf(stderr, "colabfs: unknown command \"%s\" (try colabfs --help)\n", cmd);
	return 2;
}
