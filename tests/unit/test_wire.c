/* Unit tests: wire (URL encoding, q literals, Content-Range, Retry-After, Date). */
#include <errno.h>
#include <stdint.h>

#include "check.h"
#include "wire.h"

static void test_content_range(void)
{
	int64_t a, b, t;
	CHECK_EQ(cfs_wire_content_range("bytes 0-99/100", &a, &b, &t), 0);
	CHECK_EQ(a, 0);
	CHECK_EQ(b, 99);
	CHECK_EQ(t, 100);
	CHECK_EQ(cfs_wire_content_range("bytes 4294967290-4294967300/5368709120", &a, &b, &t), 0);
	CHECK_EQ(a, 4294967290LL);
	CHECK_EQ(b, 4294967300LL);
	CHECK_EQ(t, 5368709120LL);
	CHECK_EQ(cfs_wire_content_range("bytes */0", &a, &b, &t), 0);
	CHECK_EQ(a, -1);
	CHECK_EQ(t, 0);
	CHECK_EQ(cfs_wire_content_range("BYTES 5-9/*", &a, &b, &t), 0);
	CHECK_EQ(t, -1);
	/* everything that is not exactly a byte range must be refused */
	const char *bad[] = { "", "bytes", "bytes 5-4/10", "bytes 0-10/10", "bytes 1-2",
			      "bytes -1-2/3", "items 0-1/2", "bytes 0-1/2 junk", "bytes */*",
			      "bytes 0-99999999999999999999/1", "bytes0-1/2", "bytes 0 -1/2" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ(cfs_wire_content_range(bad[i], &a, &b, &t), -EINVAL);
}

static void test_urlencode(void)
{
	struct cfs_buf b = { 0 };
	CHECK_EQ(cfs_wire_urlencode(&b, "'a b' in parents/é~"), 0);
	CHECK_STR(b.data, "%27a%20b%27%20in%20parents%2F%C3%A9~");
	cfs_buf_reset(&b);
	CHECK_EQ(cfs_wire_qliteral(&b, "it's a\\b"), 0);
	CHECK_STR(b.data, "it\\'s a\\\\b");
	cfs_buf_cleanup(&b);
}

static void test_retry_after(void)
{
	CHECK_EQ(cfs_wire_retry_after("5", 0), 5000);
	CHECK_EQ(cfs_wire_retry_after(" 0 ", 0), 0);
	CHECK_EQ(cfs_wire_retry_after("-1", 0), -EINVAL);
	CHECK_EQ(cfs_wire_retry_after("soon", 0), -EINVAL);
	/* Thu, 01 Jan 1970 00:00:10 GMT is 10 s after the epoch */
	CHECK_EQ(cfs_wire_retry_after("Thu, 01 Jan 1970 00:00:10 GMT", 4), 6000);
	CHECK_EQ(cfs_wire_retry_after("Thu, 01 Jan 1970 00:00:10 GMT", 20), 0);
}

/* The Date of a reply (doctor's clock check). */
static void test_http_date(void)
{
	time_t t = 0;
	CHECK_EQ(cfs_wire_http_date("Sun, 06 Nov 1994 08:49:37 GMT", &t), 0);
	CHECK_EQ((long long)t, 784111777LL);
	CHECK_EQ(cfs_wire_http_date(" Thu, 01 Jan 1970 00:00:10 GMT ", &t), 0);
	CHECK_EQ((long long)t, 10LL);
	CHECK_EQ(cfs_wire_http_date("Sunday, 06-Nov-94 08:49:37 GMT", &t), -EINVAL);
	CHECK_EQ(cfs_wire_http_date("Sun, 06 Nov 1994 08:49:37 GMT junk", &t), -EINVAL);
	CHECK_EQ(cfs_wire_http_date("", &t), -EINVAL);
}

/* Secrets go over https, or plain http only to this machine. */
static void test_url_check(void)
{
	CHECK_EQ(cfs_wire_url_check("https://www.googleapis.com"), 0);
	CHECK_EQ(cfs_wire_url_check("HTTPS://oauth2.googleapis.com/token"), 0);
	CHECK_EQ(cfs_wire_url_check("http://127.0.0.1:8080"), 0);
	CHECK_EQ(cfs_wire_url_check("http://127.10.0.200/token"), 0);
	CHECK_EQ(cfs_wire_url_check("http://localhost:9/x"), 0);
	CHECK_EQ(cfs_wire_url_check("http://[::1]:80/"), 0);
	CHECK_EQ(cfs_wire_url_check("http://www.googleapis.com"), -EPERM);
	CHECK_EQ(cfs_wire_url_check("http://10.0.0.1:80"), -EPERM);
	CHECK_EQ(cfs_wire_url_check("http://127.0.0.1.evil.com/"), -EPERM);
	CHECK_EQ(cfs_wire_url_check("http://localhost.evil.com/"), -EPERM);
	CHECK_EQ(cfs_wire_url_check("http://127.0.0.1@evil.com/"), -EPERM);
	CHECK_EQ(cfs_wire_url_check("http://evil.com@127.0.0.1/"), 0);
	CHECK_EQ(cfs_wire_url_check("http://1270.0.0.1/"), -EPERM);
	CHECK_EQ(cfs_wire_url_check("http://127.0.0/"), -EPERM);
	CHECK_EQ(cfs_wire_url_check("ftp://127.0.0.1/"), -EINVAL);
	CHECK_EQ(cfs_wire_url_check("https://"), -EINVAL);
	CHECK_EQ(cfs_wire_url_check("http://"), -EINVAL);
}

static void test_url_origin(void)
{
	CHECK_EQ(cfs_wire_url_origin("https://h:443/token"), 13);
	CHECK_EQ(cfs_wire_url_origin("https://oauth2.googleapis.com/token"),
		 strlen("https://oauth2.googleapis.com"));
	CHECK_EQ(cfs_wire_url_origin("http://127.0.0.1:8080"), strlen("http://127.0.0.1:8080"));
	CHECK_EQ(cfs_wire_url_origin("http://[::1]:9?x=/y"), strlen("http://[::1]:9"));
	CHECK_EQ(cfs_wire_url_origin("http://a#frag"), strlen("http://a"));
	CHECK_EQ(cfs_wire_url_origin("https:///token"), 0);
	CHECK_EQ(cfs_wire_url_origin("://h/token"), 0);
	CHECK_EQ(cfs_wire_url_origin("/token?u=http://h"), 0);
	CHECK_EQ(cfs_wire_url_origin("token"), 0);
	CHECK_EQ(cfs_wire_url_origin(""), 0);
}

static void test_upload_range(void)
{
	int64_t n = -1;
	CHECK_EQ(cfs_wire_upload_range("", &n), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(cfs_wire_upload_range("bytes=0-262143", &n), 0);
	CHECK_EQ(n, 262144);
	CHECK_EQ(cfs_wire_upload_range(" bytes=0-0 ", &n), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(cfs_wire_upload_range("bytes=1-5", &n), -EINVAL);
	CHECK_EQ(cfs_wire_upload_range("bytes=0-", &n), -EINVAL);
	CHECK_EQ(cfs_wire_upload_range("bytes=0-5x", &n), -EINVAL);
	CHECK_EQ(cfs_wire_upload_range("bytes 0-5/6", &n), -EINVAL);
	CHECK_EQ(cfs_wire_upload_range("bytes=0-99999999999999999999", &n), -EINVAL);
}

/* Drive's quota units per call, as colabfs sends its calls */
static void test_quota_units(void)
{
	const char *a = "https://www.googleapis.com";
	char u[512];
	struct { const char *method, *path; int units; } c[] = {
		{ NULL, "/drive/v3/files/ID?alt=media&supportsAllDrives=true", 200 },
		{ "GET", "/drive/v3/files/ID/export?mimeType=text%2Fplain", 200 },
		{ NULL, "/drive/v3/files?supportsAllDrives=true&q=%27ID%27+in+parents", 100 },
		{ NULL, "/drive/v3/changes?pageToken=5&supportsAllDrives=true", 100 },
		{ NULL, "/drive/v3/drives?pageSize=100", 100 },
		{ NULL, "/drive/v3/files/ID?fields=id%2Cname", 5 },
		{ NULL, "/drive/v3/files/generateIds?count=1000", 5 },
		{ NULL, "/drive/v3/changes/startPageToken?supportsAllDrives=true", 5 },
		{ NULL, "/drive/v3/about?fields=storageQuota", 5 },
		{ NULL, "/drive/v3/drives/0AID", 5 },
		{ "PATCH", "/drive/v3/files/ID?fields=id", 50 },
		{ "DELETE", "/drive/v3/files/ID", 50 },
		{ "POST", "/drive/v3/files?fields=id", 50 },
		{ "POST", "/upload/drive/v3/files?uploadType=resumable&fields=id", 50 },
		{ "PATCH", "/upload/drive/v3/files/ID?uploadType=multipart", 50 },
		{ "PUT", "/upload/drive/v3/files?uploadType=resumable&upload_id=XYZ", 5 },
		{ "POST", "/drive/v3/files/ID/watch", 5 },
		/* not a media download: alt=mediax, and a name that only ends in export */
		{ NULL, "/drive/v3/files/ID?alt=mediax", 5 },
		{ NULL, "/drive/v3/files/myexport", 5 },
		{ NULL, "/elsewhere", 5 },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		snprintf(u, sizeof(u), "%s%s", a, c[i].path);
		CHECK_EQ(cfs_wire_quota_units(c[i].method, u), c[i].units);
		/* behind a prefix of the API's address (a proxy) too */
		snprintf(u, sizeof(u), "http://127.0.0.1:8080/prefix%s", c[i].path);
		CHECK_EQ(cfs_wire_quota_units(c[i].method, u), c[i].units);
	}
	CHECK(CFS_WIRE_UNITS_MAX == 200);
}

int main(void)
{
	test_quota_units();
	test_upload_range();
	test_url_check();
	test_url_origin();
	test_content_range();
	test_urlencode();
	test_retry_after();
	test_http_date();
	return check_done("test_wire");
}
