/* Unit tests: option parsing.  And what /proc/PID/environ shows of
 * COLABFS_SHARED_CACHE_PASSWORD (tiercfg.h): in a copy of this test started
 * with the variable set, unsetenv alone leaves the bytes visible there (the
 * kernel shows the block it set up at exec, not environ); after
 * cfs_tiercfg_stash_password neither the password nor the variable is
 * there, COLABFS_SHARED_CACHE_PASSWORD_FD names a sealed descriptor that
 * holds the password, and a program it executes inherits no password in its
 * environment either. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "vfs.h"
#include "drive.h"
#include "err.h"
#include "tiercfg.h"

#define ENV_SECRET "env-secret-not-for-proc"

/* 1 when /proc/self/environ holds needle. */
static int environ_has(const char *needle)
{
	char buf[65536];
	int fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf));
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	return memmem(buf, (size_t)n, needle, strlen(needle)) != NULL;
}

/* The copy of this test started with the variable: its checks, by exit
 * status (0 all held, else the number of the first that failed). */
static int environ_child(const char *how)
{
	if (environ_has(ENV_SECRET) != 1)
		return 2;
	if (strcmp(how, "unsetenv") == 0) {
		unsetenv("COLABFS_SHARED_CACHE_PASSWORD");
		/* gone from environ, still in the block the kernel shows */
		return getenv("COLABFS_SHARED_CACHE_PASSWORD") == NULL &&
				       environ_has(ENV_SECRET) == 1
			       ? 0
			       : 3;
	}
	struct cfs_config c;
	char why[256];
	const char *argv[] = { "--shared-cache=redis://10.1.2.3:6379", "--shared-cache-trusted",
			       "/m" };
	if (cfs_config_parse(3, (char **)argv, &c, why, sizeof(why)) ||
	    cfs_tiercfg_stash_password(&c, why, sizeof(why)))
		return 4;
	cfs_config_cleanup(&c);
	if (getenv("COLABFS_SHARED_CACHE_PASSWORD") || environ_has(ENV_SECRET) != 0 ||
	    environ_has("COLABFS_SHARED_CACHE_PASSWORD=") != 0)
		return 5;
	const char *fdnum = getenv("COLABFS_SHARED_CACHE_PASSWORD_FD");
	char pw[64] = "";
	int fd = fdnum ? atoi(fdnum) : -1;
	if (fd < 3 || pread(fd, pw, sizeof(pw) - 1, 0) != (ssize_t)strlen(ENV_SECRET) ||
	    strcmp(pw, ENV_SECRET) != 0)
		return 6;
	if (write(fd, "x", 1) >= 0 || fcntl(fd, F_GET_SEALS) <= 0) /* sealed */
		return 7;
	/* what a program started now sees */
	int st = 0;
	pid_t pid = fork();
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", "! grep -qa '" ENV_SECRET "' /proc/self/environ", NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 8;
	return 0;
}

/* Runs this test again as "--environ-child how" with the variable set. */
static int environ_run(const char *self, const char *how)
{
	pid_t pid = fork();
	if (pid == 0) {
		char *argv[] = { (char *)self, "--environ-child", (char *)how, NULL };
		char *envp[] = { "PATH=/usr/bin:/bin", "COLABFS_SHARED_CACHE_PASSWORD=" ENV_SECRET,
				 "LANG=C", NULL };
		execve("/proc/self/exe", argv, envp);
		_exit(127);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	if (WEXITSTATUS(st))
		fprintf(stderr, "test_config: environ child (%s): check %d failed\n", how,
			WEXITSTATUS(st));
	return WEXITSTATUS(st);
}

static int parse(const char **argv, int argc, struct cfs_config *c, char *why, size_t cap)
{
	return cfs_config_parse(argc, (char **)argv, c, why, cap);
}

/* argv (argc words) refused as a configuration error whose reason holds
 * want (a macro: a failure names the caller's line); uses c and why. */
#define REFUSED(argv, argc, want)                                                   \
	do {                                                                         \
		CHECK_EQ(parse(argv, argc, &c, why, sizeof(why)), CFS_E_CONFIG);    \
		CHECK(strstr(why, want) != NULL);                                    \
		cfs_config_cleanup(&c);                                              \
	} while (0)

/* --uid, --gid, --file-mode, --dir-mode, --umask, and default_permissions
 * with allow_other */
static void permissions(void)
{
	struct cfs_config c;
	char why[256];
	const char *def[] = { "/m" };
	CHECK_EQ(parse(def, 1, &c, why, sizeof(why)), 0);
	CHECK_EQ(c.uid, -1);
	CHECK_EQ(c.gid, -1);
	CHECK_EQ(c.file_mode, 0644); /* writable by default */
	CHECK_EQ(c.dir_mode, 0755);
	CHECK_EQ(c.umask_bits, 0);
	CHECK(c.fuse_opts == NULL); /* nothing added without allow_other */
	CHECK_EQ(c.read_only, 0);
	CHECK_EQ(c.write_back_delay_s, 5);
	CHECK_EQ(c.create_rate, 10);
	CHECK_EQ(c.upload_threads, 4);
	cfs_config_cleanup(&c);
	/* --read-only: the read-only modes, and "ro" for the kernel */
	const char *ro[] = { "--read-only", "-o", "allow_other", "/m" };
	CHECK_EQ(parse(ro, 4, &c, why, sizeof(why)), 0);
	CHECK_EQ(c.file_mode, 0444);
	CHECK_EQ(c.dir_mode, 0555);
	CHECK(c.fuse_opts && strncmp(c.fuse_opts, "ro,", 3) == 0);
	cfs_config_cleanup(&c);
	const char *zero[] = { "--upload-threads=0", "/m" };
	CHECK(parse(zero, 2, &c, why, sizeof(why)) != 0);
	cfs_config_cleanup(&c);
	const char *set[] = { "--uid=1234", "--gid", "0", "--file-mode=640", "--dir-mode=0750",
			      "--umask=027", "/m" };
	CHECK_EQ(parse(set, 7, &c, why, sizeof(why)), 0);
	CHECK_EQ(c.uid, 1234);
	CHECK_EQ(c.gid, 0);
	CHECK_EQ(c.file_mode, 0640);
	CHECK_EQ(c.dir_mode, 0750);
	CHECK_EQ(c.umask_bits, 027);
	cfs_config_cleanup(&c);
	const char *bad[][2] = { { "--file-mode=0999", "/m" }, { "--dir-mode=1777", "/m" },
				 { "--umask=-1", "/m" },	 { "--file-mode=", "/m" },
				 { "--file-mode=0x1ff", "/m" },	 { "--dir-mode=07777", "/m" },
				 { "--umask= 22", "/m" } };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(parse(bad[i], 2, &c, why, sizeof(why)), CFS_E_CONFIG);
		CHECK(strstr(why, "wants octal permission bits from 0 to 0777") != NULL);
		cfs_config_cleanup(&c);
	}
	const char *badid[][2] = { { "--uid=abc", "/m" }, { "--uid=-1", "/m" },
				   { "--gid=4294967295", "/m" }, { "--gid=1.5", "/m" } };
	for (size_t i = 0; i < sizeof(badid) / sizeof(badid[0]); i++) {
		CHECK_EQ(parse(badid[i], 2, &c, why, sizeof(why)), CFS_E_CONFIG);
		CHECK(strstr(why, "wants a whole number from 0 to 4294967294") != NULL);
		cfs_config_cleanup(&c);
	}
	const char *uidmsg[] = { "--uid=abc", "/m" };
	parse(uidmsg, 2, &c, why, sizeof(why));
	CHECK_STR(why, "--uid wants a whole number from 0 to 4294967294, not \"abc\"");
	cfs_config_cleanup(&c);
	const char *modemsg[] = { "--file-mode=0999", "/m" };
	parse(modemsg, 2, &c, why, sizeof(why));
	CHECK_STR(why, "--file-mode wants octal permission bits from 0 to 0777 (like 0444 or "
		       "022), not \"0999\"");
	cfs_config_cleanup(&c);

	/* allow_other and allow_root bring default_permissions, once */
	const char *ao[] = { "-o", "ro,allow_other", "/m" };
	CHECK_EQ(parse(ao, 3, &c, why, sizeof(why)), 0);
	CHECK_STR(c.fuse_opts, "ro,allow_other,default_permissions");
	cfs_config_cleanup(&c);
	const char *ar[] = { "-oallow_root", "/m" };
	CHECK_EQ(parse(ar, 2, &c, why, sizeof(why)), 0);
	CHECK_STR(c.fuse_opts, "allow_root,default_permissions");
	cfs_config_cleanup(&c);
	const char *both[] = { "-o", "default_permissions", "-o", "allow_other", "/m" };
	CHECK_EQ(parse(both, 5, &c, why, sizeof(why)), 0);
	CHECK_STR(c.fuse_opts, "default_permissions,allow_other");
	cfs_config_cleanup(&c);
	const char *lookalike[] = { "-o", "allow_otherx,noallow_other", "/m" };
	CHECK_EQ(parse(lookalike, 3, &c, why, sizeof(why)), 0);
	CHECK_STR(c.fuse_opts, "allow_otherx,noallow_other");
	cfs_config_cleanup(&c);
}

/* --api-units: Drive's quota units a minute, not with --api-rate */
static void pacing(void)
{
	struct cfs_config c;
	char why[256];
	const char *def[] = { "/m" };
	CHECK_EQ(parse(def, 1, &c, why, sizeof(why)), 0);
	CHECK_EQ(c.api_units, 0); /* calls, by default */
	CHECK_EQ(c.api_rate, 200);
	cfs_config_cleanup(&c);
	const char *units[] = { "--api-units=325000", "--api-burst=5000", "/m" };
	CHECK_EQ(parse(units, 3, &c, why, sizeof(why)), 0);
	CHECK_EQ(c.api_units, 325000);
	CHECK_EQ(c.api_burst, 5000);
	cfs_config_cleanup(&c);
	const char *both[] = { "--api-units=325000", "--api-rate=100", "/m" };
	REFUSED(both, 3, "--api-rate and --api-units: give one");
	const char *low[] = { "--api-units=11999", "/m" };
	REFUSED(low, 2, "from 12000 to 100000000");
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--environ-child") == 0)
		return environ_child(argv[2]);
	pacing();
	struct cfs_config c;
	char why[256];
	const char *a1[] = { "--root=abc", "--api-url", "http://127.0.0.1:9", "-f", "-o",
			     "allow_other", "-oro", "--io-timeout=5", "/mnt/x" };
	CHECK_EQ(parse(a1, 9, &c, why, sizeof(why)), 0);
	CHECK_STR(c.root_id, "abc");
	CHECK_STR(c.api_url, "http://127.0.0.1:9");
	CHECK_STR(c.fuse_opts, "allow_other,ro,default_permissions"); /* added: see below */
	CHECK_STR(c.mountpoint, "/mnt/x");
	CHECK_EQ(c.foreground, 1);
	CHECK_EQ(c.io_timeout_s, 5);
	CHECK_EQ(c.dir_ttl_s, 300);
	cfs_config_cleanup(&c);

	const char *bad1[] = { "--nope", "/m" };
	REFUSED(bad1, 2, "--nope");
	const char *bad2[] = { "--io-timeout=0", "/m" };
	CHECK_EQ(parse(bad2, 2, &c, why, sizeof(why)), CFS_E_CONFIG);
	cfs_config_cleanup(&c);
	const char *bad3[] = { "--api-url=ftp://x", "/m" };
	CHECK_EQ(parse(bad3, 2, &c, why, sizeof(why)), CFS_E_CONFIG);
	cfs_config_cleanup(&c);
	const char *bad4[] = { "/m", "/n" };
	CHECK_EQ(parse(bad4, 2, &c, why, sizeof(why)), CFS_E_CONFIG);
	cfs_config_cleanup(&c);
	const char *bad5[] = { "--root" };
	CHECK_EQ(parse(bad5, 1, &c, why, sizeof(why)), CFS_E_CONFIG);
	cfs_config_cleanup(&c);
	const char *bad6[] = { "-f=1", "/m" };
	CHECK_EQ(parse(bad6, 2, &c, why, sizeof(why)), CFS_E_CONFIG);
	cfs_config_cleanup(&c);
	const char *bad7[] = { "--export-formats=document=mp3", "/m" };
	CHECK_EQ(parse(bad7, 2, &c, why, sizeof(why)), CFS_E_CONFIG);
	cfs_config_cleanup(&c);
	const char *bad8[] = { "--log-level=loud", "/m" };
	CHECK_EQ(parse(bad8, 2, &c, why, sizeof(why)), CFS_E_CONFIG);
	cfs_config_cleanup(&c);
	const char *none[] = { "-f" };
	REFUSED(none, 1, "MOUNTPOINT");
	const char *sz[] = { "--cache-size=2G", "--block-size", "256K", "/m" };
	CHECK_EQ(parse(sz, 4, &c, why, sizeof(why)), 0);
	CHECK(c.cache_size == 2ULL << 30);
	CHECK(c.block_size == 256ULL << 10);
	cfs_config_cleanup(&c);
	const char *badsz[] = { "--block-size=100K", "/m" };
	CHECK_EQ(parse(badsz, 2, &c, why, sizeof(why)), CFS_E_CONFIG);
	cfs_config_cleanup(&c);
	unsigned long long v;
	CHECK_EQ(cfs_config_parse_size("512", &v), 0);
	CHECK(v == 512);
	CHECK_EQ(cfs_config_parse_size("1MiB", &v), 0);
	CHECK(v == 1048576);
	CHECK_EQ(cfs_config_parse_size("3gb", &v), 0);
	CHECK(v == 3ULL << 30);
	CHECK(cfs_config_parse_size("", &v) != 0);
	CHECK(cfs_config_parse_size("-1", &v) != 0);
	CHECK(cfs_config_parse_size("5X", &v) != 0);
	CHECK(cfs_config_parse_size("99999999999T", &v) != 0);

	/* the shared cache tier: seeds checked at parse time, no password in argv */
	const char *sc[] = { "--shared-cache=redis://10.1.2.3:6379,10.1.2.4:6379",
			     "--shared-cache-lease=3", "--shared-cache-trusted", "/m" };
	CHECK_EQ(parse(sc, 4, &c, why, sizeof(why)), 0);
	CHECK_STR(c.shared_cache, "redis://10.1.2.3:6379,10.1.2.4:6379");
	CHECK_EQ(c.shared_cache_lease_s, 3);
	CHECK_EQ(c.shared_cache_ttl_s, 604800);
	cfs_config_cleanup(&c);
	const char *sc_pw[] = { "--shared-cache=redis://app:hunter2@10.1.2.3:6379", "/m" };
	CHECK_EQ(parse(sc_pw, 2, &c, why, sizeof(why)), CFS_E_CONFIG);
	CHECK(strstr(why, "password-file") != NULL && strstr(why, "hunter2") == NULL);
	cfs_config_cleanup(&c);
	const char *sc_bad[][2] = { { "--shared-cache=http://h:1", "/m" },
				    { "--shared-cache=redis://h", "/m" },
				    { "--shared-cache-password-file=/nonexistent/pw", "/m" },
				    { "--shared-cache-ttl=5", "/m" },
				    { "--shared-cache-lease=0", "/m" } };
	for (int i = 0; i < 5; i++) {
		CHECK_EQ(parse(sc_bad[i], 2, &c, why, sizeof(why)), CFS_E_CONFIG);
		cfs_config_cleanup(&c);
	}
	/* --shared-cache-nodes: CIDRs, strictly, and only with --shared-cache */
	const char *sn[] = { "--shared-cache=redis://10.1.2.3:6379", "--shared-cache-trusted",
			     "--shared-cache-nodes=10.0.0.0/8,fd00::/8", "/m" };
	CHECK_EQ(parse(sn, 4, &c, why, sizeof(why)), 0);
	CHECK_STR(c.shared_cache_nodes, "10.0.0.0/8,fd00::/8");
	cfs_config_cleanup(&c);
	const char *sn_bad[][3] = {
		{ "--shared-cache=redis://10.1.2.3:6379", "--shared-cache-nodes=10.0.0.1/8", "/m" },
		{ "--shared-cache=redis://10.1.2.3:6379", "--shared-cache-nodes=10.0.0.0/8,", "/m" },
		{ "--shared-cache=redis://10.1.2.3:6379", "--shared-cache-nodes=redis.local", "/m" },
		{ "--log-level=info", "--shared-cache-nodes=10.0.0.0/8", "/m" },
	};
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(parse(sn_bad[i], 3, &c, why, sizeof(why)), CFS_E_CONFIG);
		CHECK(strstr(why, "--shared-cache-nodes") != NULL);
		cfs_config_cleanup(&c);
	}

	/* the root: My Drive, --root, --drive-id or --shared-with-me, one at most */
	const char *def[] = { "/m" };
	CHECK_EQ(parse(def, 1, &c, why, sizeof(why)), 0);
	CHECK(cfs_config_root(&c) == NULL);
	CHECK_STR(c.scope, "https://www.googleapis.com/auth/drive");
	CHECK_EQ(c.read_only, 0);
	cfs_config_cleanup(&c);
	/* --read-only asks for drive.readonly, unless --scope says otherwise */
	const char *ro[] = { "--read-only", "/m" };
	CHECK_EQ(parse(ro, 2, &c, why, sizeof(why)), 0);
	CHECK_EQ(c.read_only, 1);
	CHECK_STR(c.scope, "https://www.googleapis.com/auth/drive.readonly");
	cfs_config_cleanup(&c);
	const char *ro_sc[] = { "--scope=drive", "--read-only", "/m" };
	CHECK_EQ(parse(ro_sc, 3, &c, why, sizeof(why)), 0);
	CHECK_EQ(c.read_only, 1);
	CHECK_STR(c.scope, "https://www.googleapis.com/auth/drive");
	cfs_config_cleanup(&c);
	const char *ro_val[] = { "--read-only=yes", "/m" };
	CHECK_EQ(parse(ro_val, 2, &c, why, sizeof(why)), CFS_E_CONFIG);
	cfs_config_cleanup(&c);
	const char *sd[] = { "--drive-id", "0ATeam_x-1", "/m" };
	CHECK_EQ(parse(sd, 3, &c, why, sizeof(why)), 0);
	CHECK_STR(c.drive_id, "0ATeam_x-1");
	CHECK_STR(cfs_config_root(&c), "0ATeam_x-1");
	cfs_config_cleanup(&c);
	const char *swm[] = { "--shared-with-me", "/m" };
	CHECK_EQ(parse(swm, 2, &c, why, sizeof(why)), 0);
	CHECK_EQ(c.shared_with_me, 1);
	CHECK_STR(cfs_config_root(&c), CFS_DRIVE_SHARED_WITH_ME);
	cfs_config_cleanup(&c);
	const char *both[][3] = { { "--drive-id=0A1", "--root=abc", "/m" },
				  { "--drive-id=0A1", "--shared-with-me", "/m" },
				  { "--root=abc", "--shared-with-me", "/m" } };
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(parse(both[i], 3, &c, why, sizeof(why)), CFS_E_CONFIG);
		CHECK(strstr(why, "exclude each other") != NULL);
		cfs_config_cleanup(&c);
	}
	const char *badid[] = { "--drive-id=0A/../x", "/m" };
	REFUSED(badid, 2, "not a Drive id");
	/* --root=/PATH: a folder of My Drive by its path; a --drive-id is never one */
	const char *rp[] = { "--root=/datasets/Ünïcødé x/train", "/m" };
	CHECK_EQ(parse(rp, 2, &c, why, sizeof(why)), 0);
	CHECK_STR(cfs_config_root(&c), "/datasets/Ünïcødé x/train");
	cfs_config_cleanup(&c);
	const char *rslash[] = { "--root=/", "/m" };
	CHECK_EQ(parse(rslash, 2, &c, why, sizeof(why)), 0);
	cfs_config_cleanup(&c);
	const char *rdots[][2] = { { "--root=/a/../b", "/m" }, { "--root=/a/.", "/m" },
				   { "--root=/./a", "/m" } };
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(parse(rdots[i], 2, &c, why, sizeof(why)), CFS_E_CONFIG);
		CHECK(strstr(why, "are not folder names") != NULL);
		cfs_config_cleanup(&c);
	}
	const char *rdotname[] = { "--root=/a/.hidden/..x", "/m" };
	CHECK_EQ(parse(rdotname, 2, &c, why, sizeof(why)), 0);
	cfs_config_cleanup(&c);
	char longp[CFS_ROOT_PATH_MAX + 16] = "--root=/";
	memset(longp + 8, 'a', CFS_ROOT_PATH_MAX);
	longp[8 + CFS_ROOT_PATH_MAX] = '\0'; /* a path one byte too long */
	const char *rlong[] = { longp, "/m" };
	REFUSED(rlong, 2, "a path of at most");
	const char *dpath[] = { "--drive-id=/x", "/m" };
	REFUSED(dpath, 2, "not a Drive id");
	const char *noval[] = { "--shared-with-me=yes", "/m" };
	CHECK_EQ(parse(noval, 2, &c, why, sizeof(why)), CFS_E_CONFIG);
	cfs_config_cleanup(&c);

	/* --scope: short names and full URLs, stored as the URL */
	const char *sc1[] = { "--scope=drive", "/m" };
	CHECK_EQ(parse(sc1, 2, &c, why, sizeof(why)), 0);
	CHECK_STR(c.scope, "https://www.googleapis.com/auth/drive");
	cfs_config_cleanup(&c);
	const char *sc2[] = { "--scope", "https://www.googleapis.com/auth/drive.readonly", "/m" };
	CHECK_EQ(parse(sc2, 3, &c, why, sizeof(why)), 0);
	CHECK_STR(c.scope, "https://www.googleapis.com/auth/drive.readonly");
	cfs_config_cleanup(&c);
	const char *badsc[][2] = { { "--scope=drive.file", "/m" },
				   { "--scope=https://www.googleapis.com/auth/drive.metadata", "/m" },
				   { "--scope=https://example.com/auth/drive", "/m" } };
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(parse(badsc[i], 2, &c, why, sizeof(why)), CFS_E_CONFIG);
		CHECK(strstr(why, "--scope must be") != NULL);
		cfs_config_cleanup(&c);
	}
	permissions();
	CHECK_EQ(environ_run(argv[0], "unsetenv"), 0);
	CHECK_EQ(environ_run(argv[0], "stash"), 0);
	return check_done("test_config");
}
