/* Unit tests: option parsing. */
#include "check.h"
#include "config.h"
#include "drive.h"
#include "err.h"

static int parse(const char **argv, int argc, struct cfs_config *c, char *why, size_t cap)
{
	return cfs_config_parse(argc, (char **)argv, c, why, cap);
}

int main(void)
{
	struct cfs_config c;
	char why[256];
	const char *a1[] = { "--root=abc", "--api-url", "http://127.0.0.1:9", "-f", "-o",
			     "allow_other", "-oro", "--io-timeout=5", "/mnt/x" };
	CHECK_EQ(parse(a1, 9, &c, why, sizeof(why)), 0);
	CHECK_STR(c.root_id, "abc");
	CHECK_STR(c.api_url, "http://127.0.0.1:9");
	CHECK_STR(c.fuse_opts, "allow_other,ro");
	CHECK_STR(c.mountpoint, "/mnt/x");
	CHECK_EQ(c.foreground, 1);
	CHECK_EQ(c.io_timeout_s, 5);
	CHECK_EQ(c.dir_ttl_s, 300);
	cfs_config_cleanup(&c);

	const char *bad1[] = { "--nope", "/m" };
	CHECK_EQ(parse(bad1, 2, &c, why, sizeof(why)), CFS_E_CONFIG);
	CHECK(strstr(why, "--nope") != NULL);
	cfs_config_cleanup(&c);
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
	CHECK_EQ(parse(none, 1, &c, why, sizeof(why)), CFS_E_CONFIG);
	CHECK(strstr(why, "MOUNTPOINT") != NULL);
	cfs_config_cleanup(&c);
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

	/* the root: My Drive, --root, --drive-id or --shared-with-me, one at most */
	const char *def[] = { "/m" };
	CHECK_EQ(parse(def, 1, &c, why, sizeof(why)), 0);
	CHECK(cfs_config_root(&c) == NULL);
	CHECK_STR(c.scope, "https://www.googleapis.com/auth/drive.readonly");
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
	CHECK_EQ(parse(badid, 2, &c, why, sizeof(why)), CFS_E_CONFIG);
	CHECK(strstr(why, "not a Drive id") != NULL);
	cfs_config_cleanup(&c);
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
	return check_done("test_config");
}
