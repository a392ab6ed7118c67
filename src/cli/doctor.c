/* doctor: `colabfs doctor`, the checklist of what a mount needs (see doctor.h). */
#define _GNU_SOURCE
#include "doctor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "cachedir.h"
#include "config.h"
#include "ctl.h"
#include "ctlname.h"
#include "drive.h"
#include "drive_write.h"
#include "err.h"
#include "http.h"
#include "json.h"
#include "log.h"
#include "memory.h"
#include "mnt.h"
#include "super.h"
#include "testhook.h"
#include "tier.h"
#include "tiercfg.h"
#include "tiered.h"

#define MAX_CHECKS 12
#define DRIVE_TIMEOUT_MS 8000

enum cfs_doctor_status cfs_doctor_space(uint64_t free_bytes, uint64_t total)
{
	if (free_bytes < CFS_DOCTOR_MIN_FREE)
		return CFS_DOCTOR_FAIL;
	if (free_bytes * 100 < total * (uint64_t)CFS_DOCTOR_MIN_FREE_PERCENT &&
	    free_bytes < CFS_DOCTOR_ROOMY)
		return CFS_DOCTOR_WARN;
	return CFS_DOCTOR_OK;
}

enum cfs_doctor_status cfs_doctor_skew(int64_t skew_s)
{
	int64_t a = skew_s < 0 ? -skew_s : skew_s;
	return a > CFS_DOCTOR_SKEW_FAIL_S ? CFS_DOCTOR_FAIL
	       : a > CFS_DOCTOR_SKEW_WARN_S ? CFS_DOCTOR_WARN
					    : CFS_DOCTOR_OK;
}

const char *cfs_doctor_status_name(enum cfs_doctor_status s)
{
	return s == CFS_DOCTOR_OK ? "ok" : s == CFS_DOCTOR_WARN ? "warn" : "FAIL";
}

struct check {
	const char *name;
	enum cfs_doctor_status st;
	char detail[1024];
	char fix[512];
};

struct doc {
	struct cfs_config c;
	struct check ck[MAX_CHECKS];
	int n;
	struct cfs_http *http;
	struct cfs_auth *auth;
	int drive_ok;
	char *mnt;        /* the live mount checked (absolute), or NULL */
	char *mnt_cache;  /* its cache folder (user.colabfs.cache_dir), or NULL */
};

/* Adds a check; fix may be NULL (nothing to do). */
static struct check *add(struct doc *d, const char *name, enum cfs_doctor_status st,
			 const char *fix, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static struct check *add(struct doc *d, const char *name, enum cfs_doctor_status st,
			 const char *fix, const char *fmt, ...)
{
	struct check *k = &d->ck[d->n < MAX_CHECKS - 1 ? d->n++ : d->n];
	k->name = name;
	k->st = st;
	snprintf(k->fix, sizeof(k->fix), "%s", fix ? fix : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(k->detail, sizeof(k->detail), fmt, ap);
	va_end(ap);
	return k;
}

/* The first executable name on $PATH, into out. */
static int on_path(const char *name, char *out, size_t cap)
{
	const char *path = getenv("PATH");
	for (const char *p = path ? path : ""; *p;) {
		const char *e = strchr(p, ':');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len && (size_t)snprintf(out, cap, "%.*s/%s", (int)len, p, name) < cap &&
		    access(out, X_OK) == 0)
			return 0;
		p += len + (e ? 1 : 0);
	}
	return -ENOENT;
}

/* 1. FUSE: the device, the helper, the kernel's recovery mode. */
static void check_fuse(struct doc *d)
{
	const char *dev = cfs_test_env("COLABFS_TEST_DEV_FUSE");
	char helper[PATH_MAX], note[160];
	struct utsname u;
	dev = dev ? dev : "/dev/fuse";
	int fd = open(dev, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		add(d, "fuse", CFS_DOCTOR_FAIL,
		    e == ENOENT ? "load the FUSE module (modprobe fuse), or give the container the "
				  "device (docker run --device /dev/fuse --cap-add SYS_ADMIN)"
				: "give this user read-write access to /dev/fuse (the fuse group, or "
				  "chmod 0666 /dev/fuse), or run colabfs as root",
		    "%s does not open read-write: %s", dev, strerror(e));
		return;
	}
	close(fd);
	int root = geteuid() == 0;
	if (on_path("fusermount3", helper, sizeof(helper)) != 0) {
		if (!root) {
			add(d, "fuse", CFS_DOCTOR_FAIL, "install fuse3 (apt-get install fuse3)",
			    "%s opens read-write, but fusermount3 is not on PATH (a user who is not "
			    "root mounts with it)", dev);
			return;
		}
		snprintf(helper, sizeof(helper), "not on PATH (not needed as root)");
	}
	int resend = uname(&u) == 0 ? cfs_super_release_has_resend(u.release) : -EINVAL;
	snprintf(note, sizeof(note), "%s", resend == 1 ? "resend"
					   : resend == 0 ? "forward (resend needs Linux 6.9)"
							 : "unknown");
	add(d, "fuse", CFS_DOCTOR_OK, NULL,
	    "%s opens read-write; fusermount3 %s; kernel %s: crash recovery %s", dev, helper,
	    resend == -EINVAL ? "?" : u.release, note);
}

#define CRED_FIX "give --credentials FILE (a service account or authorized_user JSON), set " \
		 "GOOGLE_APPLICATION_CREDENTIALS, run gcloud auth application-default login, " \
		 "or on Colab run google.colab.auth.authenticate_user()"

/* 2. Credentials: the source, a token, its scopes.  Leaves d->auth set
 * when a token was obtained. */
static void check_credentials(struct doc *d)
{
	struct cfs_config *c = &d->c;
	struct cfs_auth_opts ao = { .credentials = c->credentials, .token_url = c->token_url,
				    .metadata_url = c->metadata_url, .scope = c->scope };
	char why[512] = "", tok[4096], granted[320], exp[64] = "does not expire here";
	uint64_t gen;
	struct cfs_auth *a = NULL;
	if (cfs_auth_new(d->http, &ao, &a, why, sizeof(why)) != 0) {
		/* Colab's endpoint gave nothing: the reason ends with its fix */
		char *colab = strstr(why, CFS_AUTH_COLAB_FIX);
		if (colab && colab > why + 2) {
			colab[-2] = '\0'; /* the "; " before it */
			add(d, "credentials", CFS_DOCTOR_FAIL, CFS_AUTH_COLAB_FIX, "%s", why);
		} else {
			add(d, "credentials", CFS_DOCTOR_FAIL, CRED_FIX, "none found: %s", why);
		}
		return;
	}
	int rc = cfs_auth_token(a, tok, sizeof(tok), &gen);
	explicit_bzero(tok, sizeof(tok));
	if (rc) {
		add(d, "credentials", CFS_DOCTOR_FAIL,
		    cfs_auth_from_colab(a) ? CFS_AUTH_COLAB_FIX
		    : rc == CFS_E_AUTH	   ? "the credentials were refused: renew them (" CRED_FIX ")"
					   : "check the network, --token-url or --metadata-url",
		    "%s: no token: %s", cfs_auth_source(a), cfs_strerror(rc));
		cfs_auth_free(a);
		return;
	}
	d->auth = a;
	int64_t left = cfs_auth_expires_in(a);
	if (left >= 0)
		snprintf(exp, sizeof(exp), "expires in %lld min", (long long)(left / 60));
	int can = cfs_auth_can_write(a);
	if (cfs_auth_granted(a, granted, sizeof(granted)) != 0)
		snprintf(granted, sizeof(granted), "not known");
	if (can == 0 && !c->read_only)
		add(d, "credentials", CFS_DOCTOR_FAIL,
		    cfs_auth_from_colab(a)
			    ? CFS_AUTH_COLAB_FIX ", or mount with --read-only"
			    : "use credentials with the drive scope to write, or mount with --read-only",
		    "drive.readonly: mounts read-only; %s, token %s, granted: %s (no scope that "
		    "writes)", cfs_auth_source(a), exp, granted);
	else
		add(d, "credentials", CFS_DOCTOR_OK, NULL, "%s; token obtained, %s; scopes: %s%s",
		    cfs_auth_source(a), exp, granted,
		    can == 1 ? " (may write)" : can == 0 ? " (read-only)" : "");
}

/* 3. Drive: one about.get, its latency and the quota. */
static void check_drive(struct doc *d)
{
	struct cfs_config *c = &d->c;
	struct cfs_drive_opts o = { .api_url = c->api_url, .io_timeout_ms = DRIVE_TIMEOUT_MS,
				    .api_rate = -1 };
	struct cfs_drive *dr = NULL;
	int64_t limit = 0, usage = 0;
	char account[256] = "", as[300] = "";
	if (!d->auth) {
		add(d, "drive", CFS_DOCTOR_WARN, "fix the credentials first",
		    "not checked: no token for %s", c->api_url);
		return;
	}
	int rc = cfs_drive_new(d->http, d->auth, &o, &dr);
	int64_t t0 = cfs_http_now_us();
	if (!rc)
		rc = cfs_drive_about(dr, &limit, &usage, account, sizeof(account));
	long ms = (long)((cfs_http_now_us() - t0) / 1000);
	cfs_drive_free(dr);
	if (rc) {
		const char *cls = rc == CFS_E_NET || rc == CFS_E_SERVER ? "network"
				  : rc == CFS_E_TLS			? "TLS"
				  : rc == CFS_E_AUTH ? "401/403: the token was refused"
				  : rc == -EACCES    ? "403: permission denied"
						     : "error";
		int refused = rc == CFS_E_AUTH || rc == -EACCES;
		const char *fix = rc == CFS_E_TLS ? "give --ca-file for a private CA, and check the clock"
				  : refused && cfs_auth_from_colab(d->auth)
				      ? "the token from Colab's endpoint has no access to Drive: "
					CFS_AUTH_COLAB_FIX
				  : refused ? "renew the credentials, or give ones that may use Drive"
					    : "check the network and --api-url";
		add(d, "drive", CFS_DOCTOR_FAIL, fix, "%s unreachable after %ld ms (%s): %s",
		    c->api_url, ms, cls, cfs_strerror(rc));
		return;
	}
	d->drive_ok = 1;
	if (account[0])
		snprintf(as, sizeof(as), " for %s", account);
	if (limit < 0)
		add(d, "drive", CFS_DOCTOR_OK, NULL, "%s answered in %ld ms%s; storage used %.1f GiB "
		    "(no limit)", c->api_url, ms, as, usage / 1073741824.0);
	else
		add(d, "drive", usage >= limit && limit > 0 ? CFS_DOCTOR_WARN : CFS_DOCTOR_OK,
		    usage >= limit && limit > 0 ? "free space in Drive: writes will fail" : NULL,
		    "%s answered in %ld ms%s; storage used %.1f of %.1f GiB", c->api_url, ms, as,
		    usage / 1073741824.0, limit / 1073741824.0);
}

/* 4. Clock: against the Date of Drive's reply. */
static void check_clock(struct doc *d)
{
	int64_t date;
	if (!d->drive_ok || cfs_http_last_date(d->http, &date) != 0) {
		add(d, "clock", CFS_DOCTOR_WARN, NULL,
		    "not checked: no reply from Drive with a Date to compare with");
		return;
	}
	int64_t skew = (int64_t)time(NULL) - date;
	enum cfs_doctor_status st = cfs_doctor_skew(skew);
	add(d, "clock", st,
	    st == CFS_DOCTOR_OK ? NULL : "set the clock right (NTP: timedatectl set-ntp true)",
	    "%lld s %s Drive's Date%s", (long long)(skew < 0 ? -skew : skew),
	    skew < 0 ? "behind" : "ahead of",
	    st == CFS_DOCTOR_FAIL ? ": tokens (JWTs) and TLS fail beyond 5 min" : "");
}

/* 5a. The shared cache's key: fail without one (a mount refuses), warn for
 * --shared-cache-trusted (unauthenticated values), else ok with the key's id
 * (the same on every mount that shares). */
static void check_tier_key(struct doc *d)
{
	struct cfs_tiered_key *key = NULL;
	char why[512], id[17] = "";
	if (!d->c.shared_cache_key_file && !d->c.shared_cache_trusted) {
		add(d, "shared cache key", CFS_DOCTOR_FAIL,
		    "give --shared-cache-key-file=FILE (openssl rand -hex 32 > FILE; chmod 600 "
		    "FILE; the same file on every mount)",
		    "--shared-cache without --shared-cache-key-file or --shared-cache-trusted: a "
		    "mount refuses it");
		return;
	}
	int rc = cfs_tiercfg_key(&d->c, &key, why, sizeof(why));
	if (rc) {
		add(d, "shared cache key", CFS_DOCTOR_FAIL, "fix --shared-cache-key-file", "%s",
		    rc == -ENOMEM ? "out of memory" : why);
	} else if (!key) {
		add(d, "shared cache key", CFS_DOCTOR_WARN,
		    "give every mount --shared-cache-key-file, unless only trusted writers can "
		    "reach the cluster",
		    "--shared-cache-trusted: values are not authenticated (crc32c only): anyone "
		    "who can write to the cluster decides what the mounts read");
	} else {
		cfs_tiered_key_id(key, id, sizeof(id));
		add(d, "shared cache key", CFS_DOCTOR_OK, NULL,
		    "values authenticated (HMAC-SHA256) under the key with id %s (the same on "
		    "every mount that shares)", id);
	}
	cfs_tiered_key_free(key);
}

/* 5. The shared cache tier (--shared-cache): the key (5a), the slot map and
 * a PING of every master.  Skipped (not shown) without the option. */
static void check_tier(struct doc *d)
{
	struct cfs_tier *t = NULL;
	char why[512], msg[600];
	if (!d->c.shared_cache)
		return;
	check_tier_key(d);
	if (cfs_tiercfg_tier(&d->c, &t, why, sizeof(why)) != 0) {
		add(d, "shared cache", CFS_DOCTOR_FAIL, "fix --shared-cache", "%s", why);
		return;
	}
	int64_t t0 = cfs_http_now_us();
	int rc = cfs_tier_check(t, msg, sizeof(msg));
	long ms = (long)((cfs_http_now_us() - t0) / 1000);
	cfs_tier_free(t);
	if (rc)
		add(d, "shared cache", CFS_DOCTOR_WARN,
		    rc == CFS_E_AUTH ? "give the password (--shared-cache-password-file)"
		    : rc == CFS_E_TLS ? "give --shared-cache-ca-file for the cluster's CA"
				      : "check the cluster and the seeds in --shared-cache",
		    "%s (after %ld ms); mounts read from Drive while it is so", msg, ms);
	else
		add(d, "shared cache", CFS_DOCTOR_OK, NULL, "%s, in %ld ms", msg, ms);
}

/* The folder mount would use; *own: a default one (cachedir.h's own_base). */
static char *cache_folder(struct doc *d, int *own)
{
	char base[64], *dir = NULL;
	*own = 0;
	if (d->c.cache_dir)
		return strdup(d->c.cache_dir);
	if (d->mnt_cache)
		return strdup(d->mnt_cache);
	*own = 1;
	if (d->c.mountpoint && cfs_cachedir_default(d->c.mountpoint, base, sizeof(base), &dir) == 0)
		return dir;
	return cfs_cachedir_default("/", base, sizeof(base), &dir) == 0 ? strdup(base) : NULL;
}

/* 5. The cache folder: file system, free space, trust. */
static void check_cache(struct doc *d)
{
	int own;
	char *dir = cache_folder(d, &own), at[PATH_MAX], why[640] = "", ram[300] = "";
	struct statvfs fs;
	if (!dir || cfs_mnt_abs(dir, at, sizeof(at)) != 0) {
		add(d, "cache", CFS_DOCTOR_FAIL, "give --cache-dir", "no usable cache folder");
		free(dir);
		return;
	}
	int rc = cfs_cachedir_check(at, own, why, sizeof(why));
	/* a folder mount would create: its nearest existing ancestor holds it */
	char probe[PATH_MAX];
	snprintf(probe, sizeof(probe), "%s", at);
	while (statvfs(probe, &fs) != 0) {
		char *sl = strrchr(probe, '/');
		if (!sl || sl == probe) {
			if (statvfs("/", &fs) != 0)
				memset(&fs, 0, sizeof(fs));
			snprintf(probe, sizeof(probe), "/");
			break;
		}
		*sl = '\0';
	}
	uint64_t fr = (uint64_t)fs.f_bavail * fs.f_frsize, tot = (uint64_t)fs.f_blocks * fs.f_frsize;
	int in_ram = cfs_mem_dir_in_ram(probe) == 1;
	struct cfs_mem_budget_in in = { .fs_free = fr, .in_ram = in_ram };
	if (in_ram && cfs_mem_sample(&in.mem) == 0) {
		struct cfs_mem_budget b;
		in.floor = cfs_mem_floor(in.mem.total);
		cfs_mem_auto_budget(&in, &b);
		snprintf(ram, sizeof(ram), "; in RAM: %s", b.why);
	}
	char where[PATH_MAX + 64];
	snprintf(where, sizeof(where), "%s%s", at,
		 rc == -ENOENT ? " (not there yet: mount creates it, mode 0700)" : "");
	enum cfs_doctor_status st = cfs_doctor_space(fr, tot);
	if (rc && rc != -ENOENT)
		add(d, "cache", CFS_DOCTOR_FAIL, "give --cache-dir a new or empty folder of your own",
		    "%s", why);
	else if (st != CFS_DOCTOR_OK)
		add(d, "cache", st,
		    "free space there (colabfs evict --all MOUNTPOINT), or give --cache-dir on a "
		    "bigger disk (/content on Colab)",
		    "%s on %s: %s: %.2f GiB free of %.2f GiB", where, in_ram ? "tmpfs (RAM)" : "disk",
		    st == CFS_DOCTOR_FAIL ? "nearly full (needs 1 GiB)" : "under 5% free",
		    fr / 1073741824.0, tot / 1073741824.0);
	else
		add(d, "cache", CFS_DOCTOR_OK, NULL, "%s on %s: %.1f GiB free of %.1f GiB%s", where,
		    in_ram ? "tmpfs (RAM)" : "disk", fr / 1073741824.0, tot / 1073741824.0, ram);
	free(dir);
}

/* The first colabfs mount of /proc/self/mountinfo, or NULL. */
static char *find_mount(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], mp[4096], *found = NULL;
	while (f && !found && fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - ");
		if (sep && strncmp(sep, " - fuse.colabfs ", 16) == 0 &&
		    sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 && !strchr(mp, '\\'))
			found = strdup(mp);
	}
	if (f)
		fclose(f);
	return found;
}

struct mstats {
	int64_t server_pid, restarts, mode, pending, failed, last_error, drive_errors;
};

static int take_stat(const char *name, int64_t v, void *arg)
{
	struct mstats *m = arg;
	struct {
		const char *n;
		int64_t *p;
	} f[] = { { "server_pid", &m->server_pid }, { "server_restarts_total", &m->restarts },
		  { "recovery_mode", &m->mode }, { "uploads_pending", &m->pending },
		  { "uploads_failed", &m->failed }, { "uploads_last_error", &m->last_error },
		  { "drive_errors_total", &m->drive_errors } };
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (strcmp(name, f[i].n) == 0)
			*f[i].p = v;
	return 0;
}

/* The last n ERROR lines of the log (newest last), joined by " | ". */
static int log_errors(const char *path, int n, char *out, size_t cap)
{
	FILE *f = fopen(path, "re");
	char line[512], keep[3][512];
	int got = 0;
	out[0] = '\0';
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "] error: ")) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(keep[got % 3], sizeof(keep[0]), "%s", line);
			got++;
		}
	fclose(f);
	int first = got > n ? got - n : 0, o = 0;
	for (int i = first; i < got && (size_t)o < cap; i++)
		o += snprintf(out + o, cap - (size_t)o, "%s%s", i > first ? " | " : "",
			      keep[i % 3]);
	return got;
}

/* 6. The live mount: pids, restarts, uploads, recent errors. */
static void check_mount(struct doc *d)
{
	char *sj = NULL, logp[PATH_MAX], errs[1600];
	pid_t super = 0;
	struct mstats m = { -1, 0, 0, 0, 0, 0, 0 };
	if (!d->mnt) {
		add(d, "mount", CFS_DOCTOR_OK, NULL, "no live colabfs mount (give MOUNTPOINT to check one)");
		return;
	}
	int rc = cfs_ctl_pid(d->mnt, &super);
	if (!rc)
		rc = cfs_ctl_get(d->mnt, CFS_XATTR_STATS, &sj);
	if (rc || cfs_json_flat_ints(sj, strlen(sj), take_stat, &m) != 0) {
		add(d, "mount", CFS_DOCTOR_FAIL,
		    rc == -ENOTCONN ? "its daemon is gone: fusermount3 -u MOUNTPOINT, then mount again"
				    : "mount it: colabfs mount MOUNTPOINT",
		    "%s: %s", d->mnt, rc ? cfs_ctl_strerror(-rc) : "malformed stats");
		free(sj);
		return;
	}
	free(sj);
	char spid[24] = "?";
	if (m.server_pid > 0)
		snprintf(spid, sizeof(spid), "%lld", (long long)m.server_pid);
	snprintf(logp, sizeof(logp), "%.4000s/colabfs.log", d->mnt_cache ? d->mnt_cache : "");
	int nerr = d->mnt_cache ? log_errors(logp, 3, errs, sizeof(errs)) : -ENOENT;
	enum cfs_doctor_status st = m.failed ? CFS_DOCTOR_FAIL
				    : m.restarts || nerr > 0 ? CFS_DOCTOR_WARN
							     : CFS_DOCTOR_OK;
	add(d, "mount", st,
	    m.failed ? "colabfs sync MOUNTPOINT lists each failed upload and why"
	    : st == CFS_DOCTOR_WARN ? "see the log for the details" : NULL,
	    "%s: server pid %s, supervisor pid %d, crash recovery %s, restarts %lld, uploads "
	    "pending %lld, failed %lld, Drive errors %lld; %s%s", d->mnt, spid,
	    (int)super, cfs_stats_recovery_name((uint32_t)m.mode), (long long)m.restarts,
	    (long long)m.pending, (long long)m.failed, (long long)m.drive_errors,
	    nerr > 0 ? "recent errors: " : nerr == 0 ? "no errors in the log" : "log not read",
	    nerr > 0 ? errs : "");
}

/* Text only printable: control bytes become '?' (a path, a server's words). */
static void tame(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

static int print_report(struct doc *d, int json)
{
	int ok = 1;
	for (int i = 0; i < d->n; i++) {
		tame(d->ck[i].detail);
		ok &= d->ck[i].st != CFS_DOCTOR_FAIL;
	}
	if (json) {
		struct cfs_json_check jc[MAX_CHECKS];
		char *txt = NULL;
		for (int i = 0; i < d->n; i++)
			jc[i] = (struct cfs_json_check){ d->ck[i].name,
							 cfs_doctor_status_name(d->ck[i].st),
							 d->ck[i].detail,
							 d->ck[i].fix[0] ? d->ck[i].fix : NULL };
		if (cfs_json_write_checks(ok, jc, (size_t)d->n, &txt) != 0) {
			fprintf(stderr, "colabfs: doctor: cannot write JSON (text not UTF-8?)\n");
			return 1;
		}
		printf("%s\n", txt);
		free(txt);
	} else {
		for (int i = 0; i < d->n; i++) {
			printf("%-4s %-11s %s\n", cfs_doctor_status_name(d->ck[i].st), d->ck[i].name,
			       d->ck[i].detail);
			if (d->ck[i].fix[0])
				printf("     %-11s fix: %s\n", "", d->ck[i].fix);
		}
		printf("%s\n", ok ? "all checks passed" : "some checks FAILed: see the fixes above");
	}
	return ok ? 0 : 1;
}

int cfs_doctor_main(int argc, char **argv)
{
	struct doc d = { .n = 0 };
	char why[512];
	int json = 0, n = 0;
	char **words = calloc((size_t)argc + 1, sizeof(*words));
	if (!words)
		return 1;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else
			words[n++] = argv[i];
	}
	int rc = cfs_config_parse_flags(n, words, CFS_CONFIG_NO_MOUNTPOINT | CFS_CONFIG_DIAGNOSE,
					&d.c, why, sizeof(why));
	free(words);
	if (rc || d.c.help) {
		if (rc)
			fprintf(stderr, "colabfs: %s\n", why);
		else
			printf("usage: colabfs doctor [MOUNTPOINT] [--json] [mount options]\n");
		cfs_config_cleanup(&d.c);
		return rc ? 2 : 0;
	}
	char **paths[] = { &d.c.mountpoint, &d.c.cache_dir, &d.c.credentials, &d.c.ca_file,
			   &d.c.shared_cache_key_file };
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (cfs_mnt_abs_dup(paths[i]) != 0) {
			fprintf(stderr, "colabfs: %s: cannot resolve\n", *paths[i]);
			cfs_config_cleanup(&d.c);
			return 2;
		}
	/* the checklist says what went wrong; the log lines below would repeat it */
	cfs_log_set_level(d.c.debug ? CFS_LOG_DEBUG : CFS_LOG_ERROR);
	d.mnt = d.c.mountpoint ? strdup(d.c.mountpoint) : find_mount();
	if (d.mnt && cfs_ctl_get(d.mnt, CFS_XATTR_CACHE_DIR, &d.mnt_cache) != 0)
		d.mnt_cache = NULL;
	struct cfs_http_opts ho = { .ca_file = d.c.ca_file, .user_agent = "colabfs/" CFS_VERSION };
	check_fuse(&d);
	if (cfs_http_new(&ho, &d.http) != 0)
		add(&d, "credentials", CFS_DOCTOR_FAIL, NULL, "cannot start the HTTP client");
	else
		check_credentials(&d);
	if (d.http)
		check_drive(&d);
	if (d.http)
		check_clock(&d);
	check_tier(&d);
	check_cache(&d);
	check_mount(&d);
	rc = print_report(&d, json);
	cfs_auth_free(d.auth);
	cfs_http_free(d.http);
	free(d.mnt);
	free(d.mnt_cache);
	cfs_config_cleanup(&d.c);
	return rc;
}
