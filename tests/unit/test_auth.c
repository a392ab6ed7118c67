/* Unit tests: token expiry policy, base64url, credential source selection,
 * Colab's credential endpoint (TBE_EPHEM_CREDS_ADDR, TBE_CREDS_ADDR): the
 * address rules, and the order of the metadata servers against fake ones (a
 * thread on a loopback socket answering every GET with a scripted reply and
 * recording what it was asked). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "check.h"
#include "err.h"
#include "http.h"
#include "loopback.h"

/* --- a fake metadata server ------------------------------------------------ */

struct meta {
	int lfd, port;
	volatile int stop;
	int status;        /* what every request gets */
	const char *body;
	int hits, flavored; /* requests; those with Metadata-Flavor: Google */
	char path[512];    /* the last request's target */
	pthread_t th;
};

static void meta_answer(struct meta *m, int fd)
{
	char req[4096];
	size_t got = 0;
	while (got < sizeof(req) - 1) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r = poll(&p, 1, 2000) == 1 ? recv(fd, req + got, sizeof(req) - 1 - got, 0) : -1;
		if (r <= 0)
			return;
		got += (size_t)r;
		req[got] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	m->hits++;
	m->flavored += strstr(req, "\r\nMetadata-Flavor: Google\r\n") != NULL;
	sscanf(req, "GET %511s", m->path);
	char head[256];
	int n = snprintf(head, sizeof(head), "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n", m->status,
			 strlen(m->body));
	if (send(fd, head, (size_t)n, MSG_NOSIGNAL) == n)
		send(fd, m->body, strlen(m->body), MSG_NOSIGNAL);
}

static void *meta_main(void *arg)
{
	struct meta *m = arg;
	while (!m->stop) {
		int fd = test_loopback_accept(m->lfd, 20);
		if (fd >= 0) {
			meta_answer(m, fd);
			close(fd);
		}
	}
	return NULL;
}

static void meta_start(struct meta *m, int status, const char *body)
{
	memset(m, 0, sizeof(*m));
	m->status = status;
	m->body = body;
	m->lfd = test_loopback(16, &m->port);
	pthread_create(&m->th, NULL, meta_main, m);
}

static void meta_stop(struct meta *m)
{
	m->stop = 1;
	pthread_join(m->th, NULL);
	close(m->lfd);
}

#define TBE_TOKEN "ya29.colab-user-token-secret"
#define GCE_TOKEN "ya29.vm-service-account-secret"
#define TOKEN_PATH "/computeMetadata/v1/instance/service-accounts/default/token"
#define DRIVE_SCOPES "?scopes=https://www.googleapis.com/auth/drive"

static const char *base_of(const char *var, const char *addr, char *why, size_t wcap)
{
	static char out[512];
	why[0] = '\0';
	return cfs_auth_tbe_base(var, addr, out, sizeof(out), why, wcap) == 0 ? out : NULL;
}

static void test_tbe_addresses(void)
{
	char why[512];
	const char *v = "TBE_EPHEM_CREDS_ADDR";
	static const struct {
		const char *in, *out;
	} good[] = {
		{ "172.28.0.1:8009", "http://172.28.0.1:8009" },
		{ "localhost:1", "http://localhost:1" },
		{ "metadata.google.internal:65535", "http://metadata.google.internal:65535" },
		{ "[::1]:8009", "http://[::1]:8009" },
		{ "http://172.28.0.1:8009", "http://172.28.0.1:8009" },
		{ "http://172.28.0.1:8009/", "http://172.28.0.1:8009" },
		{ "HTTP://h:80", "http://h:80" },
		{ "https://creds.example:443/colab/v1//", "https://creds.example:443/colab/v1" },
		{ "http://metadata.google.internal", "http://metadata.google.internal" },
		{ "http://[fe80::1]/p", "http://[fe80::1]/p" },
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		const char *b = base_of(v, good[i].in, why, sizeof(why));
		CHECK_STR(b, good[i].out);
		if (!b)
			fprintf(stderr, "  %s: %s\n", good[i].in, why);
	}
	static const char *const bad[] = {
		"172.28.0.1",		  /* bare: the port is needed */
		"172.28.0.1:",		  "172.28.0.1:0",	 "172.28.0.1:65536",
		"172.28.0.1:99999999999", "172.28.0.1:80x",	 ":8009",
		"172.28.0.1:8009/path",	  /* a path needs the URL form */
		"ftp://h:21",		  "file:///etc/passwd",	 "gopher://h:70",
		"http://",		  "http://:80",		 "http://h:80?x=1",
		"http://h:80#f",	  "http://user@h:80",	 "http://user:pw@h:80",
		"h :80",		  "h:80 ",		 " h:80",
		"h\t:80",		  "h:80\n",		 "h\x01:80",
		"h\x7f:80",		  "h\xc3\xa9:80",	 "[::1:80",
		"[]:80",		  "[zz]:80",		 "h!:80",
		"http://h:80/a b",	  "http://h:80/a\"b",	 "http://h:80/<x>",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *b = base_of(v, bad[i], why, sizeof(why));
		CHECK(b == NULL);
		CHECK(strstr(why, v) != NULL);
		if (b)
			fprintf(stderr, "  accepted bad address #%zu: %s\n", i, b);
	}
	/* the reason names the variable, and never echoes control bytes */
	base_of("TBE_CREDS_ADDR", "h\x1b[2J:80", why, sizeof(why));
	CHECK(strstr(why, "TBE_CREDS_ADDR has a space, a control character") != NULL);
	CHECK(strchr(why, '\x1b') == NULL);
	/* a long value: refused, not cut */
	char longv[700], small[16];
	snprintf(longv, sizeof(longv), "http://h:80/%0600d", 0);
	CHECK(base_of(v, longv, why, sizeof(why)) == NULL);
	CHECK(strstr(why, "too long") != NULL);
	CHECK_EQ(cfs_auth_tbe_base(v, "172.28.0.1:8009", small, sizeof(small), why, sizeof(why)),
		 CFS_E_CONFIG);
}

static void clear_env(void)
{
	static const char *const vars[] = { "GOOGLE_APPLICATION_CREDENTIALS", "COLABFS_ACCESS_TOKEN",
					     "CLOUDSDK_CONFIG", "TBE_EPHEM_CREDS_ADDR",
					     "TBE_CREDS_ADDR", "GCE_METADATA_HOST", "GCE_METADATA_ROOT" };
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	setenv("HOME", "/nonexistent-colabfs-test", 1);
}

static void set_addr(const char *var, int port)
{
	char v[64];
	snprintf(v, sizeof(v), "127.0.0.1:%d", port);
	setenv(var, v, 1);
}

/* The source found with opts o; NULL on failure (why says it, rc in *rc). */
static struct cfs_auth *source(struct cfs_http *h, const struct cfs_auth_opts *o, int *rc,
			       char *why, size_t wcap)
{
	struct cfs_auth *a = NULL;
	why[0] = '\0';
	*rc = cfs_auth_new(h, o, &a, why, wcap);
	return a;
}

static void test_metadata_order(void)
{
	struct cfs_http *h = NULL;
	struct cfs_http_opts ho = { .user_agent = "test_auth" };
	CHECK_EQ(cfs_http_new(&ho, &h), 0);
	struct meta tbe, gce, other;
	meta_start(&tbe, 200, "{\"access_token\":\"" TBE_TOKEN "\",\"expires_in\":3599,"
			      "\"token_type\":\"Bearer\"}");
	meta_start(&gce, 200, "{\"access_token\":\"" GCE_TOKEN "\",\"expires_in\":3599}");
	meta_start(&other, 404, "Not Found");
	int closed_port, closed = test_loopback(-1, &closed_port);
	struct cfs_auth_opts o = { 0 };
	struct cfs_auth *a;
	char why[1024], want[256], tok[256];
	uint64_t gen;
	int rc;

	/* TBE_EPHEM_CREDS_ADDR: the user's token, asked for like any metadata one */
	clear_env();
	set_addr("TBE_EPHEM_CREDS_ADDR", tbe.port);
	set_addr("GCE_METADATA_HOST", gce.port);
	a = source(h, &o, &rc, why, sizeof(why));
	CHECK_EQ(rc, 0);
	snprintf(want, sizeof(want), "Colab (TBE_EPHEM_CREDS_ADDR http://127.0.0.1:%d)", tbe.port);
	CHECK_STR(a ? cfs_auth_source(a) : why, want);
	CHECK(a && cfs_auth_from_colab(a));
	CHECK_EQ(tbe.hits, 1);
	CHECK_EQ(tbe.flavored, 1);
	CHECK_STR(tbe.path, TOKEN_PATH DRIVE_SCOPES);
	CHECK_EQ(gce.hits, 0); /* GCE_METADATA_HOST comes after Colab's endpoint */
	CHECK(a && cfs_auth_token(a, tok, sizeof(tok), &gen) == 0 && strcmp(tok, TBE_TOKEN) == 0);
	CHECK(a && cfs_auth_expires_in(a) > 3500);
	CHECK_EQ(tbe.hits, 1); /* the probe's token is the first one */
	CHECK(a && !strstr(cfs_auth_source(a), "secret"));
	/* a refresh (after a 401) asks the same endpoint again */
	if (a) {
		cfs_auth_reject(a, gen);
		CHECK_EQ(cfs_auth_token(a, tok, sizeof(tok), &gen), 0);
		CHECK_EQ(gen, 2);
		CHECK_EQ(tbe.hits, 2);
		CHECK_EQ(tbe.flavored, 2);
		/* the endpoint said no scope: unknown, as on GCE */
		CHECK_EQ(cfs_auth_can_write(a), -1);
	}
	cfs_auth_free(a);

	/* TBE_CREDS_ADDR alone, and as a URL with a path prefix */
	clear_env();
	snprintf(want, sizeof(want), "http://127.0.0.1:%d/colab/", tbe.port);
	setenv("TBE_CREDS_ADDR", want, 1);
	a = source(h, &o, &rc, why, sizeof(why));
	CHECK_EQ(rc, 0);
	snprintf(want, sizeof(want), "Colab (TBE_CREDS_ADDR http://127.0.0.1:%d/colab)", tbe.port);
	CHECK_STR(a ? cfs_auth_source(a) : why, want);
	CHECK_STR(tbe.path, "/colab" TOKEN_PATH DRIVE_SCOPES);
	cfs_auth_free(a);

	/* both set: the ephemeral one wins; an empty one counts as unset */
	set_addr("TBE_EPHEM_CREDS_ADDR", other.port);
	a = source(h, &o, &rc, why, sizeof(why));
	CHECK_EQ(rc, CFS_E_AUTH); /* other answers 404 */
	CHECK_EQ(other.hits, 1);
	setenv("TBE_EPHEM_CREDS_ADDR", "", 1);
	cfs_auth_free(a);
	a = source(h, &o, &rc, why, sizeof(why));
	CHECK(a && strstr(cfs_auth_source(a), "TBE_CREDS_ADDR") != NULL);
	cfs_auth_free(a);

	/* an explicit --metadata-url wins over the TBE variables */
	clear_env();
	set_addr("TBE_EPHEM_CREDS_ADDR", tbe.port);
	int before = tbe.hits;
	char murl[64];
	snprintf(murl, sizeof(murl), "http://127.0.0.1:%d", gce.port);
	o.metadata_url = murl;
	a = source(h, &o, &rc, why, sizeof(why));
	CHECK_EQ(rc, 0);
	CHECK(a && strncmp(cfs_auth_source(a), "metadata server ", 16) == 0);
	CHECK(a && !cfs_auth_from_colab(a));
	CHECK_EQ(tbe.hits, before);
	CHECK_EQ(gce.hits, 1);
	cfs_auth_free(a);
	o.metadata_url = NULL;

	/* credentials files come before Colab's endpoint */
	char path[] = "/tmp/test_auth_creds_XXXXXX";
	int fd = mkstemp(path);
	const char *cred = "{\"type\":\"authorized_user\",\"client_id\":\"c\","
			   "\"client_secret\":\"s\",\"refresh_token\":\"r\"}";
	CHECK(fd >= 0 && write(fd, cred, strlen(cred)) == (ssize_t)strlen(cred));
	close(fd);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	a = source(h, &o, &rc, why, sizeof(why));
	CHECK_EQ(rc, 0);
	CHECK(a && strncmp(cfs_auth_source(a), "credentials file ", 17) == 0);
	CHECK_EQ(tbe.hits, before);
	cfs_auth_free(a);
	unlink(path);
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");

	/* Colab's endpoint refuses connections: a final error with the fix, no
	 * fall back to the VM's account (GCE) or a token from the environment */
	set_addr("TBE_EPHEM_CREDS_ADDR", closed_port);
	set_addr("GCE_METADATA_HOST", gce.port);
	setenv("COLABFS_ACCESS_TOKEN", "env-token-secret", 1);
	int gce_before = gce.hits;
	a = source(h, &o, &rc, why, sizeof(why));
	CHECK(a == NULL);
	CHECK_EQ(rc, CFS_E_AUTH);
	snprintf(want, sizeof(want), "TBE_EPHEM_CREDS_ADDR http://127.0.0.1:%d: Colab's "
		 "credential endpoint gave no token (", closed_port);
	CHECK(strncmp(why, want, strlen(want)) == 0);
	CHECK(strstr(why, CFS_AUTH_COLAB_FIX) != NULL);
	CHECK(strstr(why, "colabfs.mount(") != NULL && strstr(why, "drive.mount(") != NULL);
	CHECK(!strstr(why, "secret"));
	CHECK_EQ(gce.hits, gce_before);
	if (rc != CFS_E_AUTH)
		fprintf(stderr, "  refused: %s\n", why);

	/* it answers 404 or 403, or 200 without a token: the same */
	static const struct {
		int status;
		const char *body, *says;
	} no[] = { { 404, "Not Found", "HTTP 404" },
		   { 403, "{\"error\":\"access_denied\"}", "HTTP 403" },
		   { 200, "{\"token_type\":\"Bearer\"}", "HTTP 200 without a token" } };
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		other.status = no[i].status;
		other.body = no[i].body;
		set_addr("TBE_EPHEM_CREDS_ADDR", other.port);
		a = source(h, &o, &rc, why, sizeof(why));
		CHECK(a == NULL);
		CHECK_EQ(rc, CFS_E_AUTH);
		CHECK(strstr(why, no[i].says) != NULL && strstr(why, CFS_AUTH_COLAB_FIX) != NULL);
		if (!strstr(why, no[i].says))
			fprintf(stderr, "  %s: %s\n", no[i].says, why);
		cfs_auth_free(a);
	}
	CHECK_EQ(gce.hits, gce_before);

	/* a malformed address: a config error naming the variable, nothing asked */
	setenv("TBE_EPHEM_CREDS_ADDR", "ftp://127.0.0.1:21", 1);
	a = source(h, &o, &rc, why, sizeof(why));
	CHECK(a == NULL);
	CHECK_EQ(rc, CFS_E_CONFIG);
	CHECK(strstr(why, "TBE_EPHEM_CREDS_ADDR") != NULL);
	CHECK_EQ(gce.hits, gce_before);

	/* no TBE variable: the GCE server as before (the VM's account) */
	clear_env();
	set_addr("GCE_METADATA_HOST", gce.port);
	a = source(h, &o, &rc, why, sizeof(why));
	CHECK_EQ(rc, 0);
	CHECK(a && strncmp(cfs_auth_source(a), "metadata server http://127.0.0.1:", 33) == 0);
	CHECK(a && !cfs_auth_from_colab(a));
	cfs_auth_free(a);
	/* ... and one that gives nothing is passed over (to COLABFS_ACCESS_TOKEN) */
	set_addr("GCE_METADATA_HOST", closed_port);
	setenv("COLABFS_ACCESS_TOKEN", "env-token-secret", 1);
	a = source(h, &o, &rc, why, sizeof(why));
	CHECK_EQ(rc, 0);
	CHECK_STR(a ? cfs_auth_source(a) : why, "COLABFS_ACCESS_TOKEN");
	cfs_auth_free(a);

	/* a Colab token whose reply says it cannot write */
	clear_env();
	other.status = 200;
	other.body = "{\"access_token\":\"" TBE_TOKEN "\",\"expires_in\":3599,"
		     "\"scope\":\"https://www.googleapis.com/auth/drive.readonly\"}";
	set_addr("TBE_EPHEM_CREDS_ADDR", other.port);
	a = source(h, &o, &rc, why, sizeof(why));
	CHECK(a && cfs_auth_from_colab(a) && cfs_auth_can_write(a) == 0);
	cfs_auth_free(a);

	clear_env();
	close(closed);
	meta_stop(&tbe);
	meta_stop(&gce);
	meta_stop(&other);
	cfs_http_free(h);
}

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

	test_tbe_addresses();
	test_metadata_order();

	/* source selection: nothing configured is a clear error, not a crash */
	char why[512];
	struct cfs_auth *a = NULL;
	clear_env(); /* (no http client: no metadata server may be configured) */
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
