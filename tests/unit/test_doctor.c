/* Unit tests: `colabfs doctor`'s pure rules (src/cli/doctor.h): the free space a
 * cache folder needs, clock skew, the kernel release -> crash-recovery mode
 * rule (fuse/super.h), the default cache folder's name (cachedir.h) and the
 * --json document (json.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cachedir.h"
#include "check.h"
#include "doctor.h"
#include "json.h"
#include "super.h"

#define GiB (1ull << 30)

static void test_space(void)
{
	CHECK_EQ(cfs_doctor_space(10 * GiB, 100 * GiB), CFS_DOCTOR_OK);
	CHECK_EQ(cfs_doctor_space(5 * GiB, 100 * GiB), CFS_DOCTOR_OK);       /* 5% exactly */
	CHECK_EQ(cfs_doctor_space(5 * GiB - 1, 100 * GiB), CFS_DOCTOR_WARN); /* under 5% */
	CHECK_EQ(cfs_doctor_space(GiB - 1, 2 * GiB), CFS_DOCTOR_FAIL);       /* under 1 GiB */
	CHECK_EQ(cfs_doctor_space(GiB, 2 * GiB), CFS_DOCTOR_OK);
	CHECK_EQ(cfs_doctor_space(0, 0), CFS_DOCTOR_FAIL);
	CHECK_EQ(cfs_doctor_space(200 * GiB, 10000 * GiB), CFS_DOCTOR_OK); /* 2% of a huge disk: roomy */
}

static void test_skew(void)
{
	CHECK_EQ(cfs_doctor_skew(0), CFS_DOCTOR_OK);
	CHECK_EQ(cfs_doctor_skew(60), CFS_DOCTOR_OK);
	CHECK_EQ(cfs_doctor_skew(-61), CFS_DOCTOR_WARN);
	CHECK_EQ(cfs_doctor_skew(300), CFS_DOCTOR_WARN);
	CHECK_EQ(cfs_doctor_skew(301), CFS_DOCTOR_FAIL);
	CHECK_EQ(cfs_doctor_skew(-3600), CFS_DOCTOR_FAIL);
	CHECK_STR(cfs_doctor_status_name(CFS_DOCTOR_FAIL), "FAIL");
	CHECK_STR(cfs_doctor_status_name(CFS_DOCTOR_WARN), "warn");
	CHECK_STR(cfs_doctor_status_name(CFS_DOCTOR_OK), "ok");
}

static void test_kernel(void)
{
	CHECK_EQ(cfs_super_release_has_resend("6.9.0"), 1);
	CHECK_EQ(cfs_super_release_has_resend("6.10.12-arch1"), 1);
	CHECK_EQ(cfs_super_release_has_resend("7.0"), 1);
	CHECK_EQ(cfs_super_release_has_resend("6.8.0-1019-gcp"), 0);
	CHECK_EQ(cfs_super_release_has_resend("6.1.85+"), 0);
	CHECK_EQ(cfs_super_release_has_resend("5.15.0"), 0);
	CHECK_EQ(cfs_super_release_has_resend("6"), -EINVAL);
	CHECK_EQ(cfs_super_release_has_resend("linux"), -EINVAL);
	CHECK_EQ(cfs_super_release_has_resend(""), -EINVAL);
}

static void test_default_dir(void)
{
	char base[64], *dir = NULL;
	CHECK_EQ(cfs_cachedir_default("/content/drive", base, sizeof(base), &dir), 0);
	CHECK(strncmp(base, "/dev/shm/colabfs-", 17) == 0);
	CHECK(dir && strncmp(dir, base, strlen(base)) == 0);
	CHECK(dir && strstr(dir, "/content-drive.") != NULL);
	free(dir);
	CHECK_EQ(cfs_cachedir_default("/", base, sizeof(base), &dir), 0);
	CHECK(dir && strstr(dir, "/root.") != NULL);
	free(dir);
	CHECK_EQ(cfs_cachedir_default("/x", base, 8, &dir), -ENAMETOOLONG);
}

static void test_json(void)
{
	struct cfs_json_check c[2] = { { "fuse", "ok", "/dev/fuse \"opens\"", NULL },
				       { "cache", "FAIL", "full", "colabfs evict" } };
	char *txt = NULL;
	CHECK_EQ(cfs_json_write_checks(0, c, 2, &txt), 0);
	CHECK_STR(txt, "{\"ok\":false,\"checks\":[{\"name\":\"fuse\",\"status\":\"ok\",\"detail\":"
		       "\"/dev/fuse \\\"opens\\\"\",\"fix\":null},{\"name\":\"cache\",\"status\":"
		       "\"FAIL\",\"detail\":\"full\",\"fix\":\"colabfs evict\"}]}");
	free(txt);
}

int main(void)
{
	test_space();
	test_skew();
	test_kernel();
	test_default_dir();
	test_json();
	return check_done("test_doctor");
}
