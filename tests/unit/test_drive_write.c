/* test_drive_write: drive_write.c against a running Drive emulator.
 *
 * Driven by tests/e2e/test_drive_write.py, which starts the emulator, sets
 * COLABFS_TEST_API_URL and COLABFS_ACCESS_TOKEN, runs one case per call and
 * checks the emulator's state afterwards.  Without COLABFS_TEST_API_URL
 * (make check) it skips (exit 77).
 *
 *   test_drive_write CASE ARGS...
 *
 * Each case prints key=value lines (rc=the status of the call under test,
 * ids, md5s) and exits 0 when rc is 0, 3 when it is not, 1 on a failed
 * check, 2 on bad usage.  Content is a fixed pattern of SIZE bytes (pattern()
 * here and in the pytest file). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "check.h"
#include "crypto.h"
#include "drive.h"
#include "drive_write.h"
#include "err.h"
#include "http.h"
#include "log.h"

#define DEAD_URL "http://127.0.0.1:9"

static struct cfs_http *http;
static struct cfs_drive *drive;
static const char *api;

static unsigned char byte_at(int64_t i)
{
	return (unsigned char)((i * 131 + (i >> 11) * 7 + 3) & 0xff);
}

static char *pattern(int64_t n)
{
	char *p = malloc(n ? (size_t)n : 1);
	for (int64_t i = 0; p && i < n; i++)
		p[i] = (char)byte_at(i);
	return p;
}

static int64_t num(const char *s)
{
	char *end;
	long long v = strtoll(s, &end, 10);
	if (*end || v < 0) {
		fprintf(stderr, "bad number %s\n", s);
		exit(2);
	}
	return v;
}

static const char *opt(const char *s)
{
	return s && *s && strcmp(s, "-") != 0 ? s : NULL;
}

static void print_meta(const char *key, const struct cfs_file_meta *m)
{
	printf("%s=%s\n%s_name=%s\n%s_size=%" PRId64 "\n%s_md5=%s\n%s_parent=%s\n", key, m->id, key,
	       m->name ? m->name : "", key, m->size, key, m->md5, key, m->parent);
}

/* A control call of the emulator (no token). */
static int control(const char *path, const char *json)
{
	char url[512];
	snprintf(url, sizeof(url), "%s%s", api, path);
	struct cfs_buf out = { .max = 1 << 20 };
	struct cfs_http_req r;
	cfs_http_req_init(&r);
	r.method = "POST";
	r.url = url;
	r.body = json;
	r.body_len = strlen(json);
	r.content_type = "application/json";
	r.out = &out;
	int rc = cfs_http_perform(http, &r);
	if (!rc && (r.status < 200 || r.status > 299))
		rc = -EIO;
	cfs_http_req_cleanup(&r);
	cfs_buf_cleanup(&out);
	return rc;
}

struct src {
	const char *data;
	int64_t expire_at; /* >= 0: end every session when this offset is first read */
	int64_t max_off;
};

static int read_src(void *arg, int64_t off, void *buf, size_t len)
{
	struct src *s = arg;
	if (s->expire_at >= 0 && off >= s->expire_at) {
		s->expire_at = -1;
		if (control("/_emu/uploads/expire", "{}"))
			return -EIO;
		printf("expired_at=%" PRId64 "\n", off);
	}
	if (off > s->max_off)
		s->max_off = off;
	memcpy(buf, s->data + off, len);
	return 0;
}

static int rc_exit(int rc)
{
	printf("rc=%d\n", rc);
	struct cfs_drive_stats st;
	cfs_drive_stats(drive, &st);
	printf("uploads=%" PRIu64 "\nupload_bytes=%" PRIu64 "\nupload_retries=%" PRIu64
	       "\nretries=%" PRIu64 "\nrate_limited=%" PRIu64 "\ncreate_limited=%" PRIu64 "\n",
	       st.uploads, st.upload_bytes, st.upload_retries, st.retries, st.rate_limited,
	       st.create_limited);
	if (check_failures)
		return 1;
	return rc ? 3 : 0;
}

/* ids_create: reserve ids, a folder, an empty file created twice with the
 * same id (the second answer is the first file), a different item on that
 * id (-EEXIST). */
static int case_ids_create(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	char ids[3][CFS_ID_MAX];
	struct cfs_file_meta f, e1, e2, x;
	CHECK_EQ(cfs_drive_generate_ids(drive, 3, ids), 0);
	CHECK_EQ(cfs_drive_generate_ids(drive, 0, ids), -EINVAL);
	CHECK(strcmp(ids[0], ids[1]) != 0);
	struct cfs_json_meta_in fm = { .id = ids[0], .name = "wfolder", .mime = CFS_FOLDER_MIME,
				       .trashed = -1 };
	int rc = cfs_drive_create(drive, &fm, &f);
	CHECK_EQ(rc, 0);
	CHECK_STR(f.id, ids[0]);
	CHECK_STR(f.mime, CFS_FOLDER_MIME);
	print_meta("folder", &f);
	struct cfs_json_meta_in em = { .id = ids[1], .name = "empty.bin", .parent = ids[0],
				       .mime = "application/octet-stream", .trashed = -1,
				       .mtime_ns = 1714566896789000000LL };
	CHECK_EQ(cfs_drive_create(drive, &em, &e1), 0);
	CHECK_EQ(cfs_drive_create(drive, &em, &e2), 0); /* 409 on our id: adopted */
	CHECK_STR(e1.id, ids[1]);
	CHECK_STR(e2.id, ids[1]);
	CHECK_EQ(e1.size, 0);
	CHECK_EQ(e1.mtime_ns, 1714566896789000000LL);
	print_meta("empty", &e1);
	struct cfs_json_meta_in other = em;
	other.name = "other.bin";
	CHECK_EQ(cfs_drive_create(drive, &other, &x), -EEXIST);
	cfs_file_meta_cleanup(&f);
	cfs_file_meta_cleanup(&e1);
	cfs_file_meta_cleanup(&e2);
	cfs_file_meta_cleanup(&x);
	return rc_exit(rc);
}

/* create NAME PARENT|- [MIME]: one metadata create (rc is printed). */
static int case_create(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	struct cfs_json_meta_in m = { .name = argv[2], .parent = opt(argv[3]),
				      .mime = argc > 4 ? argv[4] : NULL, .trashed = -1 };
	struct cfs_file_meta f;
	int rc = cfs_drive_create(drive, &m, &f);
	if (!rc)
		print_meta("file", &f);
	cfs_file_meta_cleanup(&f);
	return rc_exit(rc);
}

/* many N PARENT: N creates in a row (the write-rate case). */
static int case_many(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	int n = (int)num(argv[2]), rc = 0;
	for (int i = 0; i < n && !rc; i++) {
		char name[32];
		snprintf(name, sizeof(name), "many-%d", i);
		struct cfs_json_meta_in m = { .name = name, .parent = opt(argv[3]), .trashed = -1 };
		struct cfs_file_meta f;
		rc = cfs_drive_create(drive, &m, &f);
		cfs_file_meta_cleanup(&f);
	}
	return rc_exit(rc);
}

/* multipart NAME SIZE PARENT|-: a reserved id, uploaded twice (the second
 * is adopted), then new content (SIZE/2 bytes) on the same file. */
static int case_multipart(int argc, char **argv)
{
	if (argc < 5)
		return 2;
	int64_t size = num(argv[3]);
	char *data = pattern(size), id[1][CFS_ID_MAX], md5[33];
	struct cfs_file_meta f, g, h;
	int rc = cfs_drive_generate_ids(drive, 1, id);
	struct cfs_json_meta_in m = { .id = id[0], .name = argv[2], .parent = opt(argv[4]),
				      .mime = "application/octet-stream", .trashed = -1 };
	if (!rc)
		rc = cfs_drive_upload_multipart(drive, &m, NULL, data, (size_t)size, &f);
	if (rc)
		return rc_exit(rc);
	print_meta("file", &f);
	CHECK_EQ(f.size, size);
	CHECK_EQ(cfs_drive_upload_multipart(drive, &m, NULL, data, (size_t)size, &g), 0);
	CHECK_STR(g.id, f.id);
	struct cfs_digest *dg;
	CHECK_EQ(cfs_digest_new("md5", &dg), 0);
	cfs_digest_update(dg, data, (size_t)(size / 2));
	cfs_digest_final_hex(dg, md5, sizeof(md5));
	CHECK_EQ(cfs_drive_upload_multipart(drive, NULL, f.id, data, (size_t)(size / 2), &h), 0);
	CHECK_STR(h.md5, md5);
	CHECK_EQ(h.size, size / 2);
	CHECK(strcmp(h.rev, f.rev) != 0);
	print_meta("updated", &h);
	cfs_file_meta_cleanup(&f);
	cfs_file_meta_cleanup(&g);
	cfs_file_meta_cleanup(&h);
	free(data);
	return rc_exit(rc);
}

/* resumable NAME SIZE CHUNK PARENT|- [EXPIRE_AT]: upload_all, resumable
 * whatever the size; with EXPIRE_AT every session ends when that offset is
 * first read. */
static int case_resumable(int argc, char **argv)
{
	if (argc < 6)
		return 2;
	int64_t size = num(argv[3]);
	struct src s = { pattern(size), argc > 6 ? num(argv[6]) : -1, 0 };
	struct cfs_json_meta_in m = { .name = argv[2], .parent = opt(argv[5]),
				      .mime = "application/octet-stream", .trashed = -1 };
	struct cfs_drive_upload u = { .meta = &m, .total = size, .chunk = (size_t)num(argv[4]),
				      .multipart_max = -1, .read = read_src, .arg = &s };
	struct cfs_file_meta f;
	int rc = cfs_drive_upload_all(drive, &u, &f);
	if (!rc) {
		print_meta("file", &f);
		CHECK_EQ(f.size, size);
	}
	cfs_file_meta_cleanup(&f);
	free((char *)s.data);
	return rc_exit(rc);
}

/* update ID NAME|- ADD|- REMOVE|- TRASHED(-1/0/1) */
static int case_update(int argc, char **argv)
{
	if (argc < 7)
		return 2;
	struct cfs_file_meta f;
	int rc = cfs_drive_update_meta(drive, argv[2], opt(argv[3]), opt(argv[4]), opt(argv[5]),
				       (int)strtol(argv[6], NULL, 10), 0, &f);
	if (!rc)
		print_meta("file", &f);
	cfs_file_meta_cleanup(&f);
	return rc_exit(rc);
}

static int case_delete(int argc, char **argv)
{
	return argc < 3 ? 2 : rc_exit(cfs_drive_delete(drive, argv[2]));
}

static int case_about(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	int64_t limit = -2, usage = -2;
	int rc = cfs_drive_about(drive, &limit, &usage, NULL, 0);
	printf("limit=%" PRId64 "\nusage=%" PRId64 "\n", limit, usage);
	return rc_exit(rc);
}

int main(int argc, char **argv)
{
	api = getenv("COLABFS_TEST_API_URL");
	if (!api || !*api) {
		printf("SKIP: COLABFS_TEST_API_URL not set (run by tests/e2e/test_drive_write.py)\n");
		return 77;
	}
	if (argc < 2)
		return 2;
	cfs_log_set_level(CFS_LOG_WARN);
	struct cfs_http_opts ho = { .user_agent = "test_drive_write" };
	struct cfs_auth_opts ao = { .metadata_url = DEAD_URL };
	struct cfs_auth *auth;
	const char *cr = getenv("COLABFS_TEST_CREATE_RATE");
	struct cfs_drive_opts o = { .api_url = api, .io_timeout_ms = 60000,
				    .retry = { .base_ms = 200, .cap_ms = 4000, .max_attempts = 30,
					       .first_ms = 20 },
				    .create_rate = cr ? strtod(cr, NULL) : 0 };
	char why[256];
	if (cfs_http_new(&ho, &http) || cfs_auth_new(http, &ao, &auth, why, sizeof(why)) ||
	    cfs_drive_new(http, auth, &o, &drive)) {
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	static const struct {
		const char *name;
		int (*fn)(int argc, char **argv);
	} cases[] = { { "ids_create", case_ids_create }, { "create", case_create },
		      { "many", case_many },		 { "multipart", case_multipart },
		      { "resumable", case_resumable },	 { "update", case_update },
		      { "delete", case_delete },	 { "about", case_about } };
	int rc = 2;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (strcmp(argv[1], cases[i].name) == 0)
			rc = cases[i].fn(argc, argv);
	fflush(stdout);
	cfs_drive_free(drive);
	cfs_auth_free(auth);
	cfs_http_free(http);
	return rc;
}
