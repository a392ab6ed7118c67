/* Unit tests: token expiry policy, base64url, credential source selection. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "auth.h"
#include "check.h"
#include "err.h"

int main(void)
{
	/* one-hour token: refresh in its last minute */
	CHECK(!cfs_auth_needs_refresh(0, 0, 3600));
	CHECK(!cfs_auth_needs_refresh(3539, 0, 3600));
	CHECK(cfs_auth_needs_refresh(3540, 0, 3600));
	CHECK(cfs_auth_needs_refresh(4000, 0, 3600));
	/* short token (10 s): a tenth of its life, not a whole minute */
	CHECK(!cfs_auth_needs_refresh(108, 100, 110));
	CHECK(cfs_auth_needs_refresh(109, 100, 110));

	char out[64];
	CHECK_EQ(cfs_auth_b64url((const unsigned char *)"", 0, out), 0);
	cfs_auth_b64url((const unsigned char *)"f", 1, out);
	CHECK_STR(out, "Zg");
	cfs_auth_b64url((const unsigned char *)"fo", 2, out);
	CHECK_STR(out, "Zm8");
	cfs_auth_b64url((const unsigned char *)"foo", 3, out);
	CHECK_STR(out, "Zm9v");
	const unsigned char bin[] = { 0xfb, 0xff, 0xfe };
	cfs_auth_b64url(bin, 3, out);
	CHECK_STR(out, "-__-");

	/* granted scopes: may they write? */
	const char *full = "https://www.googleapis.com/auth/drive";
	CHECK_EQ(cfs_auth_scope_can_write(NULL), -1);
	CHECK_EQ(cfs_auth_scope_can_write(""), 0);
	CHECK_EQ(cfs_auth_scope_can_write("   "), 0);
	CHECK_EQ(cfs_auth_scope_can_write(full), 1);
	CHECK_EQ(cfs_auth_scope_can_write("drive"), 1);
	CHECK_EQ(cfs_auth_scope_can_write("drive.file"), 1);
	CHECK_EQ(cfs_auth_scope_can_write("https://www.googleapis.com/auth/drive.file"), 1);
	CHECK_EQ(cfs_auth_scope_can_write("https://www.googleapis.com/auth/drive.readonly"), 0);
	CHECK_EQ(cfs_auth_scope_can_write("drive.readonly"), 0);
	CHECK_EQ(cfs_auth_scope_can_write("https://www.googleapis.com/auth/drive.metadata.readonly "
					  "https://www.googleapis.com/auth/drive.readonly"), 0);
	CHECK_EQ(cfs_auth_scope_can_write("openid email https://www.googleapis.com/auth/drive"), 1);
	CHECK_EQ(cfs_auth_scope_can_write("  https://www.googleapis.com/auth/drive.readonly\t"
					  "https://www.googleapis.com/auth/drive.file "), 1);
	/* near misses are not the drive scope */
	CHECK_EQ(cfs_auth_scope_can_write("https://www.googleapis.com/auth/drivex"), 0);
	CHECK_EQ(cfs_auth_scope_can_write("https://www.googleapis.com/auth/drive.appdata"), 0);
	CHECK_EQ(cfs_auth_scope_can_write("https://www.googleapis.com/auth/drive.metadata"), 0);
	CHECK_EQ(cfs_auth_scope_can_write("https://example.com/auth/drive"), 0);
	CHECK_EQ(cfs_auth_scope_can_write("https://www.googleapis.com/auth/"), 0);
	CHECK_EQ(cfs_auth_scope_can_write("xdrive drive.filex"), 0);

	/* source selection: nothing configured is a clear error, not a crash */
	char why[512];
	struct cfs_auth *a = NULL;
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("COLABFS_ACCESS_TOKEN");
	setenv("HOME", "/nonexistent-colabfs-test", 1);
	unsetenv("CLOUDSDK_CONFIG");
	struct cfs_auth_opts o = { 0 };
	int rc = cfs_auth_new(NULL, &o, &a, why, sizeof(why));
	if (access("/content/.adc/adc.json", R_OK) != 0) {
		CHECK_EQ(rc, CFS_E_AUTH);
		CHECK(strstr(why, "COLABFS_ACCESS_TOKEN") != NULL);
	}
	cfs_auth_free(a);
	a = NULL;
	/* a missing credentials file names the file */
	o.credentials = "/nonexistent-colabfs-test/creds.json";
	CHECK_EQ(cfs_auth_new(NULL, &o, &a, why, sizeof(why)), CFS_E_CONFIG);
	CHECK(strstr(why, "creds.json") != NULL);
	/* a static token is used as is and reports its source, not its value */
	o.credentials = NULL;
	setenv("COLABFS_ACCESS_TOKEN", "secret-token-value", 1);
	if (access("/content/.adc/adc.json", R_OK) != 0) {
		CHECK_EQ(cfs_auth_new(NULL, &o, &a, why, sizeof(why)), 0);
		char tok[64];
		uint64_t gen;
		CHECK_EQ(cfs_auth_token(a, tok, sizeof(tok), &gen), 0);
		CHECK_STR(tok, "secret-token-value");
		CHECK(strstr(cfs_auth_source(a), "secret") == NULL);
		/* after a 401 a static token cannot be refreshed: clear auth error */
		cfs_auth_reject(a, gen);
		CHECK_EQ(cfs_auth_token(a, tok, sizeof(tok), &gen), CFS_E_AUTH);
		/* no HTTP client to ask tokeninfo with: the scopes stay unknown */
		CHECK_EQ(cfs_auth_can_write(a), -1);
		CHECK_EQ(cfs_auth_granted(a, why, sizeof(why)), -ENOENT);
		CHECK_STR(why, "");
		cfs_auth_free(a);
	}
	return check_done("test_auth");
}
