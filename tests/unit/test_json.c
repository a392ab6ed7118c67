/* Unit tests: JSON extraction of Drive replies, tokens and credentials. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "err.h"
#include "json.h"

#define S(x) x, strlen(x)

static void test_file(void)
{
	struct cfs_file_meta m;
	const char *ok = "{\"kind\":\"drive#file\",\"id\":\"1abc\",\"name\":\"a/b.txt\","
			 "\"mimeType\":\"text/plain\",\"size\":\"5368709120\",\"md5Checksum\":"
			 "\"0123456789abcdef0123456789abcdef\",\"headRevisionId\":\"rev1\","
			 "\"version\":\"7\",\"modifiedTime\":\"2024-05-01T12:34:56.789Z\","
			 "\"parents\":[\"0Aroot\"],\"trashed\":false,"
			 "\"capabilities\":{\"canDownload\":true},\"unknown\":{\"x\":1}}";
	CHECK_EQ(cfs_json_parse_file(S(ok), &m), 0);
	CHECK_STR(m.id, "1abc");
	CHECK_STR(m.name, "a/b.txt");
	CHECK_EQ(m.size, 5368709120LL);
	CHECK_EQ(m.version, 7);
	CHECK_STR(m.rev, "rev1");
	CHECK_STR(m.parent, "0Aroot");
	CHECK_EQ(m.mtime_ns, 1714566896789000000LL);
	CHECK_EQ(m.can_download, 1);
	cfs_file_meta_cleanup(&m);

	const char *folder = "{\"id\":\"f\",\"name\":\"F\",\"mimeType\":"
			     "\"application/vnd.google-apps.folder\"}";
	CHECK_EQ(cfs_json_parse_file(S(folder), &m), 0);
	CHECK_EQ(m.size, -1);
	CHECK_EQ(m.version, -1);
	cfs_file_meta_cleanup(&m);

	const char *sc = "{\"id\":\"s\",\"name\":\"S\",\"mimeType\":\"application/vnd.google-apps."
			 "shortcut\",\"shortcutDetails\":{\"targetId\":\"t1\",\"targetMimeType\":"
			 "\"application/vnd.google-apps.folder\"}}";
	CHECK_EQ(cfs_json_parse_file(S(sc), &m), 0);
	CHECK_STR(m.target_id, "t1");
	CHECK_STR(m.drive_id, "");
	cfs_file_meta_cleanup(&m);

	const char *team = "{\"id\":\"t\",\"name\":\"T\",\"mimeType\":\"text/plain\","
			   "\"driveId\":\"0ATeam\",\"parents\":[\"0ATeam\"]}";
	CHECK_EQ(cfs_json_parse_file(S(team), &m), 0);
	CHECK_STR(m.drive_id, "0ATeam");
	cfs_file_meta_cleanup(&m);

	/* malformed documents are refused, never half-used */
	const char *bad[] = {
		"", "{", "[]", "{\"id\":\"x\",\"mimeType\":\"a\"}",             /* no name */
		"{\"id\":\"x\",\"name\":\"n\",\"mimeType\":\"a\",\"size\":\"12x\"}",
		"{\"id\":\"x\",\"name\":\"n\",\"mimeType\":\"a\",\"size\":-5}",
		"{\"id\":\"x\",\"name\":\"n\",\"mimeType\":\"a\",\"trashed\":\"no\"}",
		"{\"id\":\"x\",\"name\":\"n\",\"mimeType\":\"a\",\"modifiedTime\":\"yesterday\"}",
		"{\"id\":\"x\",\"name\":\"n\",\"mimeType\":\"a\",\"parents\":\"p\"}",
		"{\"id\":\"\",\"name\":\"n\",\"mimeType\":\"a\"}",
		"{\"id\":\"x\",\"id\":\"y\",\"name\":\"n\",\"mimeType\":\"a\"}",
		"{\"id\":\"x\",\"name\":\"n\\u0000m\",\"mimeType\":\"a\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(cfs_json_parse_file(S(bad[i]), &m), CFS_E_PROTO);
		CHECK(m.name == NULL);
	}
}

static int count_cb(const struct cfs_file_meta *m, void *arg)
{
	(*(int *)arg)++;
	return m->name[0] == '!' ? -ECANCELED : 0;
}

static void test_list(void)
{
	int n = 0;
	char *next = NULL;
	const char *page = "{\"nextPageToken\":\"tok2\",\"files\":[{\"id\":\"a\",\"name\":\"A\","
			   "\"mimeType\":\"x\"},{\"id\":\"b\",\"name\":\"B\",\"mimeType\":\"x\"}]}";
	CHECK_EQ(cfs_json_parse_file_list(S(page), count_cb, &n, &next), 0);
	CHECK_EQ(n, 2);
	CHECK_STR(next, "tok2");
	free(next);
	n = 0;
	CHECK_EQ(cfs_json_parse_file_list(S("{\"files\":[]}"), count_cb, &n, &next), 0);
	CHECK_EQ(n, 0);
	CHECK(next == NULL);
	/* an empty page with a token: keep going */
	CHECK_EQ(cfs_json_parse_file_list(S("{\"nextPageToken\":\"t\"}"), count_cb, &n, &next), 0);
	CHECK_STR(next, "t");
	free(next);
	/* an id or a revision outside Drive's alphabet: that entry is dropped */
	n = 0;
	const char *odd = "{\"files\":[{\"id\":\"a\",\"name\":\"A\",\"mimeType\":\"x\"},"
			  "{\"id\":\"../../etc\",\"name\":\"B\",\"mimeType\":\"x\"},"
			  "{\"id\":\"c\",\"name\":\"C\",\"mimeType\":\"x\",\"headRevisionId\":\"r@1\"},"
			  "{\"id\":\"d\",\"name\":\"D\",\"mimeType\":\"x\",\"parents\":[\"p q\"]},"
			  "{\"id\":\"e-_9\",\"name\":\"E\",\"mimeType\":\"x\",\"headRevisionId\":\"0B_r-1\"}]}";
	CHECK_EQ(cfs_json_parse_file_list(S(odd), count_cb, &n, &next), 0);
	CHECK_EQ(n, 2);
	struct cfs_file_meta one;
	CHECK_EQ(cfs_json_parse_file(S("{\"id\":\"a\\nb\",\"name\":\"n\",\"mimeType\":\"a\"}"),
				     &one), -EILSEQ);
	/* one bad entry spoils the page before any callback */
	n = 0;
	const char *bad = "{\"files\":[{\"id\":\"a\",\"name\":\"A\",\"mimeType\":\"x\"},{\"id\":1}]}";
	CHECK_EQ(cfs_json_parse_file_list(S(bad), count_cb, &n, &next), CFS_E_PROTO);
	CHECK_EQ(n, 0);
	CHECK_EQ(cfs_json_parse_file_list(S("{\"files\":[],\"nextPageToken\":\"\"}"), count_cb, &n,
					  &next),
		 CFS_E_PROTO);
	CHECK_EQ(cfs_json_parse_file_list(S("{\"files\":{}}"), count_cb, &n, &next), CFS_E_PROTO);
	const char *stop = "{\"files\":[{\"id\":\"a\",\"name\":\"!\",\"mimeType\":\"x\"}]}";
	CHECK_EQ(cfs_json_parse_file_list(S(stop), count_cb, &n, &next), -ECANCELED);
}

static void test_error_and_token(void)
{
	char reason[64], msg[128];
	const char *err = "{\"error\":{\"code\":403,\"message\":\"Rate Limit Exceeded\",\"errors\":"
			  "[{\"domain\":\"usageLimits\",\"reason\":\"rateLimitExceeded\"}]}}";
	CHECK_EQ(cfs_json_parse_error(S(err), reason, sizeof(reason), msg, sizeof(msg)), 0);
	CHECK_STR(reason, "rateLimitExceeded");
	CHECK_STR(msg, "Rate Limit Exceeded");
	CHECK_EQ(cfs_json_parse_error(S("<html>502</html>"), reason, sizeof(reason), msg,
				      sizeof(msg)),
		 CFS_E_PROTO);
	CHECK_STR(reason, "");

	char *tok;
	int64_t exp;
	char e[32];
	CHECK_EQ(cfs_json_parse_token(S("{\"access_token\":\"ya29.x\",\"expires_in\":3599}"), &tok,
				      &exp, e, sizeof(e)),
		 0);
	CHECK_STR(tok, "ya29.x");
	CHECK_EQ(exp, 3599);
	free(tok);
	CHECK_EQ(cfs_json_parse_token(S("{\"access_token\":\"t\",\"expires_in\":\"60\"}"), &tok,
				      &exp, e, sizeof(e)),
		 0);
	CHECK_EQ(exp, 60);
	free(tok);
	CHECK_EQ(cfs_json_parse_token(S("{\"error\":\"invalid_grant\",\"error_description\":"
					"\"Token has been expired or revoked.\"}"),
				      &tok, &exp, e, sizeof(e)),
		 CFS_E_AUTH);
	CHECK_STR(e, "invalid_grant");
	CHECK(tok == NULL);
	CHECK_EQ(cfs_json_parse_token(S("{\"expires_in\":5}"), &tok, &exp, e, sizeof(e)),
		 CFS_E_PROTO);
	/* absurd lifetimes are clamped, never overflow (found by fuzzing) */
	CHECK_EQ(cfs_json_parse_token(S("{\"access_token\":\"t\",\"expires_in\":1e300}"), &tok,
				      &exp, e, sizeof(e)),
		 0);
	CHECK(exp >= 0 && exp <= 86400);
	free(tok);
	CHECK_EQ(cfs_json_parse_token(S("{\"access_token\":\"t\",\"expires_in\":"
					"\"9223372036854775807\"}"),
				      &tok, &exp, e, sizeof(e)),
		 CFS_E_PROTO);
	CHECK(tok == NULL);
	CHECK_EQ(cfs_json_parse_token(S("{\"access_token\":\"t\",\"expires_in\":\"999999999\"}"),
				      &tok, &exp, e, sizeof(e)),
		 0);
	CHECK_EQ(exp, 86400);
	free(tok);

	/* the granted scopes of a token reply or a tokeninfo answer */
	char *sc = NULL;
	CHECK_EQ(cfs_json_parse_scope(S("{\"access_token\":\"t\",\"scope\":"
					"\"https://www.googleapis.com/auth/drive.readonly openid\"}"),
				      &sc),
		 0);
	CHECK_STR(sc, "https://www.googleapis.com/auth/drive.readonly openid");
	free(sc);
	CHECK_EQ(cfs_json_parse_scope(S("{\"access_token\":\"t\"}"), &sc), 0);
	CHECK(sc == NULL);
	CHECK_EQ(cfs_json_parse_scope(S("{\"scope\":7}"), &sc), CFS_E_PROTO);
	CHECK(sc == NULL);
	CHECK_EQ(cfs_json_parse_scope(S("{\"scope\":\"\"}"), &sc), CFS_E_PROTO);
	CHECK_EQ(cfs_json_parse_scope(S("[\"scope\"]"), &sc), CFS_E_PROTO);
	CHECK_EQ(cfs_json_parse_scope(S("not json"), &sc), CFS_E_PROTO);
	CHECK(sc == NULL);
}

static void test_credentials(void)
{
	struct cfs_cred c;
	char why[160];
	const char *au = "{\"type\":\"authorized_user\",\"client_id\":\"cid\",\"client_secret\":"
			 "\"sec\",\"refresh_token\":\"rt\"}";
	CHECK_EQ(cfs_json_parse_credentials(S(au), &c, why, sizeof(why)), 0);
	CHECK_EQ(c.type, CFS_CRED_AUTHORIZED_USER);
	CHECK_STR(c.refresh_token, "rt");
	cfs_cred_cleanup(&c);
	CHECK(c.refresh_token == NULL);
	const char *sa = "{\"type\":\"service_account\",\"client_email\":\"a@b\",\"private_key\":"
			 "\"-----BEGIN\",\"token_uri\":\"http://127.0.0.1/token\"}";
	CHECK_EQ(cfs_json_parse_credentials(S(sa), &c, why, sizeof(why)), 0);
	CHECK_EQ(c.type, CFS_CRED_SERVICE_ACCOUNT);
	CHECK_STR(c.token_uri, "http://127.0.0.1/token");
	cfs_cred_cleanup(&c);
	const char *missing = "{\"type\":\"authorized_user\",\"client_id\":\"cid\","
			      "\"client_secret\":\"TOPSECRET\"}";
	CHECK_EQ(cfs_json_parse_credentials(S(missing), &c, why, sizeof(why)), CFS_E_PROTO);
	CHECK(strstr(why, "refresh_token") != NULL);
	CHECK(strstr(why, "TOPSECRET") == NULL); /* never echo a secret */
	CHECK_EQ(cfs_json_parse_credentials(S("{\"type\":\"external_account\"}"), &c, why,
					    sizeof(why)),
		 CFS_E_PROTO);
}

static void test_time(void)
{
	int64_t ns;
	CHECK_EQ(cfs_json_parse_time("1970-01-01T00:00:01Z", &ns), 0);
	CHECK_EQ(ns, 1000000000LL);
	CHECK_EQ(cfs_json_parse_time("1970-01-01T01:00:00.5+01:00", &ns), 0);
	CHECK_EQ(ns, 500000000LL);
	CHECK_EQ(cfs_json_parse_time("1970-01-01T00:00:00", &ns), -EINVAL);
	CHECK_EQ(cfs_json_parse_time("1970-01-01T00:00:00.Z", &ns), -EINVAL);
	/* found by fuzz_json: short offsets, out-of-range years */
	CHECK_EQ(cfs_json_parse_time("1970-01-01T00:00:00+5:30", &ns), -EINVAL);
	CHECK_EQ(cfs_json_parse_time("1970-01-01T00:00:00+5:3", &ns), -EINVAL);
	CHECK_EQ(cfs_json_parse_time("0024-05-01T12:34:56Z", &ns), -EINVAL);
	CHECK_EQ(cfs_json_parse_time("9999-05-01T12:34:56Z", &ns), -EINVAL);
	CHECK_EQ(cfs_json_parse_time("2024-05-01T12:34:56-02:00", &ns), 0);
	CHECK_EQ(ns, 1714574096000000000LL);
}

static void test_writes(void)
{
	char *t = NULL;
	struct cfs_json_meta_in m = { .id = "abc", .name = "a \"b\"", .mime = "text/plain",
				      .parent = "P1", .mtime_ns = 1714566896789000000LL,
				      .trashed = -1 };
	CHECK_EQ(cfs_json_write_meta(&m, &t), 0);
	CHECK_STR(t, "{\"id\":\"abc\",\"name\":\"a \\\"b\\\"\",\"mimeType\":\"text/plain\","
		     "\"parents\":[\"P1\"],\"modifiedTime\":\"2024-05-01T12:34:56.789Z\"}");
	free(t);
	struct cfs_json_meta_in u = { .trashed = 1 };
	CHECK_EQ(cfs_json_write_meta(&u, &t), 0);
	CHECK_STR(t, "{\"trashed\":true}");
	free(t);
	struct cfs_json_meta_in bad = { .name = "\xff\xfe", .trashed = -1 };
	CHECK_EQ(cfs_json_write_meta(&bad, &t), -EINVAL);
	CHECK(t == NULL);

	char ids[2][CFS_ID_MAX];
	int got = -1;
	const char *r = "{\"kind\":\"drive#generatedIds\",\"space\":\"drive\",\"ids\":[\"a1\",\"b_2\"]}";
	CHECK_EQ(cfs_json_parse_ids(r, strlen(r), ids, 2, &got), 0);
	CHECK_EQ(got, 2);
	CHECK_STR(ids[1], "b_2");
	const char *evil = "{\"ids\":[\"a/b\"]}";
	CHECK_EQ(cfs_json_parse_ids(evil, strlen(evil), ids, 2, &got), CFS_E_PROTO);
	CHECK_EQ(got, 0);
	CHECK_EQ(cfs_json_parse_ids("{}", 2, ids, 2, &got), CFS_E_PROTO);

	int64_t limit = 0, usage = 0;
	const char *q = "{\"storageQuota\":{\"limit\":\"1000\",\"usage\":\"12\"}}";
	CHECK_EQ(cfs_json_parse_quota(q, strlen(q), &limit, &usage, NULL, 0), 0);
	CHECK_EQ(limit, 1000);
	CHECK_EQ(usage, 12);
	const char *unl = "{\"storageQuota\":{\"usage\":\"5\"}}";
	CHECK_EQ(cfs_json_parse_quota(unl, strlen(unl), &limit, &usage, NULL, 0), 0);
	CHECK_EQ(limit, -1);
	CHECK_EQ(cfs_json_parse_quota("{\"storageQuota\":{}}", 18, &limit, &usage, NULL, 0), CFS_E_PROTO);
	/* the account: shown as given, "" when absent, too long or not printable */
	char acct[32];
	const char *who = "{\"storageQuota\":{\"usage\":\"5\"},\"user\":{\"emailAddress\":\"a@b.c\"}}";
	CHECK_EQ(cfs_json_parse_quota(who, strlen(who), &limit, &usage, acct, sizeof(acct)), 0);
	CHECK_STR(acct, "a@b.c");
	CHECK_EQ(cfs_json_parse_quota(unl, strlen(unl), &limit, &usage, acct, sizeof(acct)), 0);
	CHECK_STR(acct, "");
	const char *odd = "{\"storageQuota\":{\"usage\":\"5\"},\"user\":{\"emailAddress\":\"a\\u001b[2Jb\"}}";
	CHECK_EQ(cfs_json_parse_quota(odd, strlen(odd), &limit, &usage, acct, sizeof(acct)), 0);
	CHECK_STR(acct, "");
	const char *big = "{\"storageQuota\":{\"usage\":\"5\"},\"user\":{\"emailAddress\":"
			  "\"a-very-long-address-of-forty-bytes@example.com\"}}";
	CHECK_EQ(cfs_json_parse_quota(big, strlen(big), &limit, &usage, acct, sizeof(acct)), 0);
	CHECK_STR(acct, "");
}

/* The reply to user.colabfs.sync (json.h): what is accepted, what is refused
 * as a whole, and the daemon's writer read back by the parser. */
static void test_sync(void)
{
	struct cfs_json_sync s;
	const char *ok = "{\"files\":2,\"bytes\":5368709120,\"bytes_left\":1024,\"uploading\":1,"
			 "\"waiting\":[{\"path\":\"ckpt/a.pt\",\"error\":\"network down; retrying\"}],"
			 "\"failed\":[{\"path\":\"ckpt/b \\\"q\\\".pt\",\"error\":\"Drive storage quota "
			 "exceeded\"}],\"later\":{\"x\":1}}";
	CHECK_EQ(cfs_json_parse_sync(S(ok), &s), 0);
	CHECK_EQ(s.files, 2);
	CHECK_EQ(s.bytes, 5368709120LL);
	CHECK_EQ(s.bytes_left, 1024);
	CHECK_EQ(s.uploading, 1);
	CHECK_EQ(s.n_waiting, 1);
	CHECK_EQ(s.n_failed, 1);
	CHECK_STR(s.waiting[0].path, "ckpt/a.pt");
	CHECK_STR(s.waiting[0].error, "network down; retrying");
	CHECK_STR(s.failed[0].path, "ckpt/b \"q\".pt");
	cfs_json_sync_cleanup(&s);
	CHECK_EQ(s.n_failed, 0);
	cfs_json_sync_cleanup(&s); /* twice is safe */

	const char *empty = "{\"files\":0,\"bytes\":0,\"bytes_left\":0,\"uploading\":0,"
			    "\"waiting\":[],\"failed\":[]}";
	CHECK_EQ(cfs_json_parse_sync(S(empty), &s), 0);
	CHECK(s.files == 0 && s.n_waiting == 0 && s.n_failed == 0);
	cfs_json_sync_cleanup(&s);

	static const char *const bad[] = {
		"", "[]", "{}", "null",
		"{\"bytes\":0,\"bytes_left\":0,\"uploading\":0,\"waiting\":[],\"failed\":[]}",
		"{\"files\":-1,\"bytes\":0,\"bytes_left\":0,\"uploading\":0,\"waiting\":[],\"failed\":[]}",
		"{\"files\":\"1\",\"bytes\":0,\"bytes_left\":0,\"uploading\":0,\"waiting\":[],\"failed\":[]}",
		"{\"files\":1.5,\"bytes\":0,\"bytes_left\":0,\"uploading\":0,\"waiting\":[],\"failed\":[]}",
		"{\"files\":1,\"bytes\":0,\"bytes_left\":0,\"uploading\":0,\"failed\":[]}",
		"{\"files\":1,\"bytes\":0,\"bytes_left\":0,\"uploading\":0,\"waiting\":{},\"failed\":[]}",
		"{\"files\":1,\"bytes\":0,\"bytes_left\":0,\"uploading\":0,\"waiting\":[],"
		"\"failed\":[{\"path\":\"\",\"error\":\"x\"}]}",
		"{\"files\":1,\"bytes\":0,\"bytes_left\":0,\"uploading\":0,\"waiting\":[],"
		"\"failed\":[{\"path\":\"a\"}]}",
		"{\"files\":1,\"bytes\":0,\"bytes_left\":0,\"uploading\":0,\"waiting\":[],"
		"\"failed\":[{\"path\":\"a\\u0000b\",\"error\":\"x\"}]}",
		"{\"files\":1,\"bytes\":0,\"bytes_left\":0,\"uploading\":0,\"waiting\":[\"a\"],"
		"\"failed\":[]}",
		"{\"files\":1,\"files\":2,\"bytes\":0,\"bytes_left\":0,\"uploading\":0,\"waiting\":[],"
		"\"failed\":[]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = cfs_json_parse_sync(S(bad[i]), &s);
		if (rc != CFS_E_PROTO)
			fprintf(stderr, "sync reply accepted: %s\n", bad[i]);
		CHECK_EQ(rc, CFS_E_PROTO);
		CHECK(s.n_waiting == 0 && s.n_failed == 0); /* nothing half-parsed is left */
	}

	/* the writer: 25 failed entries become 20; a name that is not UTF-8 is
	 * written with '?' and reads back */
	struct cfs_json_sync w = { .files = 30, .bytes = 7, .bytes_left = 3, .uploading = 2 };
	char paths[CFS_SYNC_LIST_MAX][32];
	for (int i = 0; i < CFS_SYNC_LIST_MAX; i++) {
		snprintf(paths[i], sizeof(paths[i]), "dir/f%02d.pt", i);
		w.failed[i] = (struct cfs_json_sync_entry){ paths[i], "no write permission" };
		w.waiting[i] = (struct cfs_json_sync_entry){ paths[i], "rate limited" };
	}
	w.n_failed = 25; /* more than the lists hold: the writer stops at 20 */
	w.n_waiting = 2;
	char bad_utf8[] = "x\xff\xc3y\xe2\x82z";
	w.waiting[1].path = bad_utf8;
	char *txt = NULL;
	CHECK_EQ(cfs_json_write_sync(&w, CFS_SYNC_REPLY_MAX, &txt), 0);
	CHECK_EQ(cfs_json_parse_sync(txt, strlen(txt), &s), 0);
	CHECK(s.files == 30 && s.bytes == 7 && s.bytes_left == 3 && s.uploading == 2);
	CHECK_EQ(s.n_failed, CFS_SYNC_LIST_MAX);
	CHECK_EQ(s.n_waiting, 2);
	CHECK_STR(s.failed[19].path, "dir/f19.pt");
	CHECK_STR(s.waiting[1].path, "x??y??z");
	CHECK_STR(s.waiting[0].error, "rate limited");
	size_t full = strlen(txt);
	cfs_json_sync_cleanup(&s);
	free(txt);

	/* a cap that cannot hold every entry: waiting ones go first, the reply
	 * fits; then failed ones, but never the last of them */
	CHECK_EQ(cfs_json_write_sync(&w, full - 10, &txt), 0);
	CHECK(strlen(txt) < full - 10);
	CHECK_EQ(cfs_json_parse_sync(txt, strlen(txt), &s), 0);
	CHECK_EQ(s.n_waiting, 1);
	CHECK_EQ(s.n_failed, CFS_SYNC_LIST_MAX);
	cfs_json_sync_cleanup(&s);
	free(txt);
	CHECK_EQ(cfs_json_write_sync(&w, 150, &txt), 0); /* one failed entry fits, two do not */
	CHECK_EQ(cfs_json_parse_sync(txt, strlen(txt), &s), 0);
	CHECK(s.n_waiting == 0 && s.n_failed == 1 && s.files == 30);
	cfs_json_sync_cleanup(&s);
	free(txt);
	CHECK_EQ(cfs_json_write_sync(&w, 20, &txt), -ENOSPC);
	CHECK(txt == NULL);
}

int main(void)
{
	test_sync();
	test_writes();
	test_file();
	test_list();
	test_error_and_token();
	test_credentials();
	test_time();
	return check_done("test_json");
}
