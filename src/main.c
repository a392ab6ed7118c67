/* main: the colabfs command line.
 *
 *   colabfs mount [OPTIONS] MOUNTPOINT   serve Drive at MOUNTPOINT
 *   colabfs umount MOUNTPOINT            unmount and wait for the daemon
 *   colabfs --help | --version
 *
 * Everything else lives in libcolabfs.a; this file wires the layers together. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "config.h"
#include "ctl.h"
#include "drive.h"
#include "err.h"
#include "http.h"
#include "log.h"
#include "session.h"
#include "vfs.h"

static int usage_error(const char *why)
{
	fprintf(stderr, "colabfs: %s\n", why);
	return 2;
}

/* Creates the cache folder (0700) and returns the absolute log path to use
 * in the background. */
static int prepare_dirs(struct cfs_config *c, char *log_path, size_t cap, char *why, size_t wcap)
{
	if (mkdir(c->cache_dir, 0700) != 0 && errno != EEXIST) {
		snprintf(why, wcap, "cannot create cache folder %s: %s", c->cache_dir,
			 strerror(errno));
		return -errno;
	}
	struct stat st;
	if (stat(c->cache_dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		snprintf(why, wcap, "cache folder %s is not a folder owned by you", c->cache_dir);
		return -EPERM;
	}
	if ((st.st_mode & 0777) != 0700 && chmod(c->cache_dir, 0700) != 0) {
		snprintf(why, wcap, "cannot chmod 0700 %s: %s", c->cache_dir, strerror(errno));
		return -errno;
	}
	const char *lf = c->log_file;
	char tmp[PATH_MAX];
	if (!lf) {
		snprintf(tmp, sizeof(tmp), "%s/colabfs.log", c->cache_dir);
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
	return 0;
}

static int cmd_mount(int argc, char **argv)
{
	struct cfs_config c;
	char why[512] = "";
	int rc = cfs_config_parse(argc, argv, &c, why, sizeof(why));
	if (rc) {
		cfs_config_cleanup(&c);
		fprintf(stderr, "colabfs: %s\n", why);
		return 2;
	}
	if (c.help) {
		cfs_config_usage(stdout);
		cfs_config_cleanup(&c);
		return 0;
	}
	enum cfs_log_level lvl = CFS_LOG_INFO;
	cfs_log_parse_level(c.log_level, &lvl);
	if (c.debug)
		lvl = CFS_LOG_DEBUG;
	struct stat st;
	char log_path[PATH_MAX];
	struct cfs_http *http = NULL;
	struct cfs_auth *auth = NULL;
	struct cfs_drive *drive = NULL;
	struct cfs_vfs *vfs = NULL;
	if (stat(c.mountpoint, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "colabfs: mountpoint %s is not a folder\n", c.mountpoint);
		rc = 2;
		goto out;
	}
	if ((rc = prepare_dirs(&c, log_path, sizeof(log_path), why, sizeof(why)))) {
		fprintf(stderr, "colabfs: %s\n", why);
		rc = 1;
		goto out;
	}
	/* In the foreground we log to stderr unless told otherwise. */
	cfs_log_open(c.foreground ? c.log_file ? log_path : NULL : NULL, lvl);
	struct cfs_http_opts ho = { .ca_file = c.ca_file, .user_agent = "colabfs/" CFS_VERSION };
	struct cfs_auth_opts ao = { .credentials = c.credentials, .token_url = c.token_url };
	struct cfs_drive_opts dopt = { .api_url = c.api_url, .io_timeout_ms = c.io_timeout_s * 1000 };
	struct cfs_vfs_opts vo = { .root_id = c.root_id, .dir_ttl_s = c.dir_ttl_s };
	cfs_export_parse(c.export_formats, &vo.exports, why, sizeof(why));
	if ((rc = cfs_http_new(&ho, &http))) {
		fprintf(stderr, "colabfs: cannot start the HTTP client: %s\n", cfs_strerror(rc));
		goto fail;
	}
	if ((rc = cfs_auth_new(http, &ao, &auth, why, sizeof(why)))) {
		fprintf(stderr, "colabfs: %s\n", why);
		goto fail;
	}
	CFS_INFO("colabfs %s: credentials from %s, Drive API at %s", CFS_VERSION,
		 cfs_auth_source(auth), c.api_url);
	if ((rc = cfs_drive_new(http, auth, &dopt, &drive)))
		goto fail;
	if ((rc = cfs_vfs_new(drive, &vo, &vfs))) {
		fprintf(stderr, "colabfs: cannot open the Drive folder %s: %s\n",
			c.root_id ? c.root_id : "My Drive", cfs_strerror(rc));
		goto fail;
	}
	if (!c.foreground)
		fprintf(stderr, "colabfs: serving %s at %s; log: %s\n", cfs_vfs_root_id(vfs),
			c.mountpoint, log_path);
	struct cfs_session_opts so = {
		.mountpoint = c.mountpoint,
		.fuse_opts = c.fuse_opts,
		.foreground = (int)c.foreground,
		.debug = (int)c.debug,
		.max_threads = (int)c.max_threads,
		.attr_timeout = (double)c.attr_timeout_s,
		.log_file = log_path,
	};
	rc = cfs_session_run(vfs, &so);
	if (rc)
		fprintf(stderr, "colabfs: %s\n", cfs_strerror(rc));
fail:
	rc = rc ? 1 : 0;
out:
	cfs_vfs_free(vfs);
	cfs_drive_free(drive);
	cfs_auth_free(auth);
	cfs_http_free(http);
	cfs_config_cleanup(&c);
	cfs_log_close();
	return rc;
}

static int cmd_umount(int argc, char **argv)
{
	if (argc != 1)
		return usage_error("usage: colabfs umount MOUNTPOINT");
	char why[512];
	int rc = cfs_ctl_umount(argv[0], 30000, why, sizeof(why));
	if (rc) {
		fprintf(stderr, "colabfs: %s\n", why);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage_error("missing command (try colabfs --help)");
	const char *cmd = argv[1];
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
		printf("colabfs %s\n", CFS_VERSION);
		return 0;
	}
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		cfs_config_usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "mount") == 0)
		return cmd_mount(argc - 2, argv + 2);
	if (strcmp(cmd, "umount") == 0 || strcmp(cmd, "unmount") == 0)
		return cmd_umount(argc - 2, argv + 2);
	fprintf(stderr, "colabfs: unknown command \"%s\" (try colabfs --help)\n", cmd);
	return 2;
}
