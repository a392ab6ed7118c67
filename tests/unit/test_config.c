/* Unit tests: option parsing. */
#include "check.h"
#include "config.h"
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
	return check_done("test_config");
}
