/* auth: credential sources, token refresh, JWT signing (see auth.h for the
 * refresh policy). */
#define _GNU_SOURCE
#include "auth.h"
#include "clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "crypto.h"
#include "err.h"
#include "http.h"
#include "json.h"
#include "log.h"
#include "retry.h"
#include "secret.h"
#include "wire.h"

#define DEFAULT_TOKEN_URL "https://oauth2.googleapis.com/token"
#define SCOPE_PREFIX "https://www.googleapis.com/auth/"
#define DEFAULT_SCOPE SCOPE_PREFIX "drive"
#define TOKEN_MAX 4096
#define CRED_FILE_MAX (64 * 1024)

enum kind { K_STATIC, K_REFRESH, K_JWT, K_METADATA };

#define METADATA_TOKEN_PATH "/computeMetadata/v1/instance/service-accounts/default/token"

struct cfs_auth {
	struct cfs_http *http;
	enum kind kind;
	struct cfs_cred cred;
	struct cfs_key *key; /* service_account: parsed at load; the PEM is wiped */
	char *token_url;
	char *scope;
	char source[512];
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int refreshing;
	uint64_t seq;      /* completed refresh attempts */
	int last_rc;       /* result of the last attempt */
	char token[TOKEN_MAX];
	char *granted;     /* the scopes the token endpoint (or tokeninfo) said the token has;
			    * NULL: not said */
	int info_asked;    /* a static token: tokeninfo was asked (once) */
	uint64_t gen;      /* bumps with every new token */
	int rejected;      /* Drive refused the current token */
	int64_t got_at, expires_at; /* monotonic seconds */
	uint64_t rng;
	int colab;         /* the source is Colab's credential endpoint */
	char fail[256];    /* why the last token call failed (no secret) */
};

int cfs_auth_needs_refresh(int64_t now, int64_t got_at, int64_t expires_at)
{
	int64_t margin = (expires_at - got_at) / 10;
	if (margin > 60)
		margin = 60;
	return now >= expires_at - margin;
}

size_t cfs_auth_b64url(const unsigned char *in, size_t n, char *out)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0, i = 0;
	for (; i + 2 < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
		out[o++] = tab[v >> 18];
		out[o++] = tab[(v >> 12) & 63];
		out[o++] = tab[(v >> 6) & 63];
		out[o++] = tab[v & 63];
	}
	if (i < n) {
		unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0);
		out[o++] = tab[v >> 18];
		out[o++] = tab[(v >> 12) & 63];
		if (i + 1 < n)
			out[o++] = tab[(v >> 6) & 63];
	}
	out[o] = '\0';
	return o;
}

static int load_file(struct cfs_auth *a, const char *path, char *why, size_t wcap)
{
	char *txt;
	size_t len;
	/* others may read it: warned, not refused (as before secret.h) */
	int rc = cfs_secret_read(path, "credentials file", CRED_FILE_MAX, 0, &txt, &len, why, wcap);
	if (rc)
		return rc;
	char w[160];
	rc = cfs_json_parse_credentials(txt, len, &a->cred, w, sizeof(w));
	explicit_bzero(txt, len);
	free(txt);
	if (rc) {
		snprintf(why, wcap, "credentials file %s: %s", path, w);
		return CFS_E_CONFIG;
	}
	a->kind = a->cred.type == CFS_CRED_SERVICE_ACCOUNT ? K_JWT : K_REFRESH;
	if (a->kind == K_JWT) {
		rc = cfs_crypto_key_load(a->cred.private_key, &a->key);
		explicit_bzero(a->cred.private_key, strlen(a->cred.private_key));
		if (rc == -ENOKEY)
			snprintf(why, wcap, "credentials file %s: the service account's private_key "
				 "is encrypted (passphrase-protected); colabfs needs the "
				 "unencrypted key that Google issues", path);
		else if (rc)
			snprintf(why, wcap, "credentials file %s: the private_key is not a usable "
				 "PEM RSA private key", path);
		if (rc)
			return rc == -ENOMEM ? rc : CFS_E_CONFIG;
	}
	snprintf(a->source, sizeof(a->source), "credentials file %s (%s)", path,
		 a->kind == K_JWT ? "service_account" : "authorized_user");
	return 0;
}

/* ---- metadata servers: --metadata-url, Colab's endpoint, GCE's ---------- */

static const char *const TBE_VARS[] = { "TBE_EPHEM_CREDS_ADDR", "TBE_CREDS_ADDR" };

int cfs_auth_tbe_base(const char *var, const char *addr, char *base, size_t cap, char *why,
		      size_t wcap)
{
	static const char host_ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				      "0123456789._-";
	static const char path_ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				      "0123456789._~-/%";
	const char *want = "it should be host:port (as Colab sets it) or http://host:port";
	for (size_t i = 0; addr[i]; i++)
		if ((unsigned char)addr[i] <= ' ' || (unsigned char)addr[i] >= 0x7f) {
			snprintf(why, wcap, "%s has a space, a control character or a non-ASCII "
				 "byte (at offset %zu); %s", var, i, want);
			return CFS_E_CONFIG;
		}
	const char *p = addr, *sep = strstr(addr, "://");
	const char *scheme = "http";
	if (sep) {
		size_t n = (size_t)(sep - addr);
		if (n == 4 && strncasecmp(addr, "http", 4) == 0)
			scheme = "http";
		else if (n == 5 && strncasecmp(addr, "https", 5) == 0)
			scheme = "https";
		else {
			snprintf(why, wcap, "%s %.200s: the scheme is not http or https; %s", var, addr,
				 want);
			return CFS_E_CONFIG;
		}
		p = sep + 3;
	}
	size_t alen = strcspn(p, "/"), hlen;
	const char *path = p + alen, *port = NULL;
	if (strpbrk(addr, "@?#") || !*addr) {
		snprintf(why, wcap, "%s %.200s: a user name, query or fragment (or nothing) is not "
			 "an address; %s", var, addr, want);
		return CFS_E_CONFIG;
	}
	if (*p == '[') {
		const char *rb = memchr(p, ']', alen);
		hlen = rb ? (size_t)(rb - p) + 1 : 0;
		if (hlen < 3 || strspn(p + 1, "0123456789abcdefABCDEF:.") != hlen - 2)
			hlen = 0;
	} else {
		hlen = strspn(p, host_ok);
		if (hlen > alen)
			hlen = alen;
	}
	if (hlen < alen && p[hlen] == ':')
		port = p + hlen + 1;
	size_t plen = port ? alen - hlen - 1 : 0;
	long pv = 0;
	for (size_t i = 0; i < plen && pv <= 65535; i++)
		pv = port[i] >= '0' && port[i] <= '9' ? pv * 10 + (port[i] - '0') : 65536;
	int bad_port = port ? plen == 0 || plen > 5 || pv < 1 || pv > 65535 : !sep;
	if (!hlen || (!port && hlen != alen) || bad_port || (!sep && *path) ||
	    strspn(path, path_ok) != strlen(path)) {
		snprintf(why, wcap, "%s %.200s: not %s; %s", var, addr,
			 sep ? "http(s)://host[:port][/path]" : "host:port", want);
		return CFS_E_CONFIG;
	}
	size_t pathlen = strlen(path);
	while (pathlen && path[pathlen - 1] == '/')
		pathlen--;
	if ((size_t)snprintf(base, cap, "%s://%.*s%.*s", scheme, (int)alen, p, (int)pathlen, path) >=
	    cap) {
		snprintf(why, wcap, "%s is too long (%zu bytes)", var, strlen(addr));
		return CFS_E_CONFIG;
	}
	return 0;
}

/* The GCE metadata server's base URL, if this looks like a machine that has one. */
static int gce_base(char *out, size_t cap)
{
	const char *host = getenv("GCE_METADATA_HOST");
	if (!host || !*host)
		host = getenv("GCE_METADATA_ROOT");
	if (host && *host)
		return (size_t)snprintf(out, cap, "http://%s", host) < cap;
	char prod[128] = "";
	FILE *f = fopen("/sys/class/dmi/id/product_name", "re");
	if (f) {
		if (!fgets(prod, sizeof(prod), f))
			prod[0] = '\0';
		fclose(f);
	}
	if (!strstr(prod, "Google"))
		return 0;
	return (size_t)snprintf(out, cap, "http://metadata.google.internal") < cap;
}

static int fetch_once(struct cfs_auth *a, char **tok, int64_t *expires_in, char **scope);

/* Uses the metadata server at base if it hands out a token now; the source
 * is label, or "metadata server URL" when label is NULL.  On failure a->fail
 * says why. */
static int try_metadata(struct cfs_auth *a, const char *base, const char *label)
{
	char url[1024];
	/* ask for the mount's scope (GCE: ?scopes=, a comma-separated list) */
	if ((size_t)snprintf(url, sizeof(url), "%s" METADATA_TOKEN_PATH "?scopes=%s", base,
			     a->scope) >= sizeof(url)) {
		snprintf(a->fail, sizeof(a->fail), "the URL is too long");
		return -ENAMETOOLONG;
	}
	a->kind = K_METADATA;
	a->token_url = strdup(url);
	if (!a->token_url)
		return -ENOMEM;
	char *t = NULL;
	int64_t exp = 0;
	int rc = fetch_once(a, &t, &exp, &a->granted);
	if (rc) {
		CFS_INFO("no token from the metadata server %s (%s)", url, a->fail);
		free(a->token_url);
		a->token_url = NULL;
		return rc;
	}
	/* the probe's token is the first one */
	if (strlen(t) < sizeof(a->token)) {
		memcpy(a->token, t, strlen(t) + 1);
		a->gen = 1;
		a->got_at = (cfs_clock_mono_ms() / 1000);
		a->expires_at = a->got_at + (exp > 0 ? exp : 3600);
	}
	explicit_bzero(t, strlen(t));
	free(t);
	if (label)
		snprintf(a->source, sizeof(a->source), "%s", label);
	else
		snprintf(a->source, sizeof(a->source), "metadata server %.480s", url);
	return 0;
}

/* The metadata servers in order: --metadata-url, Colab's endpoint, GCE's.
 * Returns 0 (a token), -ENOENT (none here: the next source), or a final
 * failure with the reason in why (Colab's endpoint, set but unusable). */
static int find_metadata(struct cfs_auth *a, const struct cfs_auth_opts *o, char *why,
			 size_t wcap)
{
	char base[512], label[600];
	if (o->metadata_url)
		return try_metadata(a, o->metadata_url, NULL) ? -ENOENT : 0;
	for (size_t i = 0; i < sizeof(TBE_VARS) / sizeof(TBE_VARS[0]); i++) {
		const char *var = TBE_VARS[i], *val = getenv(var);
		if (!val || !*val)
			continue;
		int rc = cfs_auth_tbe_base(var, val, base, sizeof(base), why, wcap);
		if (rc)
			return rc;
		snprintf(label, sizeof(label), "Colab (%s %s)", var, base);
		if (try_metadata(a, base, label) != 0) {
			snprintf(why, wcap, "%s %s: Colab's credential endpoint gave no token (%s); "
				 CFS_AUTH_COLAB_FIX, var, base, a->fail);
			return CFS_E_AUTH;
		}
		a->colab = 1;
		return 0;
	}
	if (!gce_base(base, sizeof(base)))
		return -ENOENT;
	return try_metadata(a, base, NULL) ? -ENOENT : 0;
}

static int file_exists(const char *p)
{
	return p && access(p, R_OK) == 0;
}

int cfs_auth_new(struct cfs_http *http, const struct cfs_auth_opts *o, struct cfs_auth **out,
		 char *why, size_t wcap)
{
	*out = NULL;
	struct cfs_auth *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->http = http;
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	a->rng = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);

	char gcloud[4096] = "";
	const char *cfg = getenv("CLOUDSDK_CONFIG"), *home = getenv("HOME");
	if (cfg)
		snprintf(gcloud, sizeof(gcloud), "%s/application_default_credentials.json", cfg);
	else if (home)
		snprintf(gcloud, sizeof(gcloud),
			 "%s/.config/gcloud/application_default_credentials.json", home);
	const char *gac = getenv("GOOGLE_APPLICATION_CREDENTIALS");
	const char *env_token = getenv("COLABFS_ACCESS_TOKEN");
	int rc = 0;
	/* the scope first: the metadata probe asks for it */
	if (!(a->scope = strdup(o->scope ? o->scope : DEFAULT_SCOPE)))
		rc = -ENOMEM;
	else if (o->credentials)
		rc = load_file(a, o->credentials, why, wcap);
	else if (gac && *gac)
		rc = load_file(a, gac, why, wcap);
	else if (file_exists(gcloud))
		rc = load_file(a, gcloud, why, wcap);
	else if (file_exists("/content/.adc/adc.json"))
		rc = load_file(a, "/content/.adc/adc.json", why, wcap);
	else if ((rc = find_metadata(a, o, why, wcap)) != -ENOENT)
		; /* a token, or Colab's endpoint failed (final) */
	else if (env_token && *env_token) {
		if (strlen(env_token) >= TOKEN_MAX) {
			snprintf(why, wcap, "COLABFS_ACCESS_TOKEN is too long");
			rc = CFS_E_CONFIG;
		} else {
			a->kind = K_STATIC;
			snprintf(a->token, sizeof(a->token), "%s", env_token);
			a->gen = 1;
			snprintf(a->source, sizeof(a->source), "COLABFS_ACCESS_TOKEN");
			rc = 0;
		}
	} else {
		snprintf(why, wcap,
			 "no credentials: tried --credentials, GOOGLE_APPLICATION_CREDENTIALS, %s, "
			 "/content/.adc/adc.json, %s and COLABFS_ACCESS_TOKEN",
			 gcloud[0] ? gcloud : "the gcloud ADC file",
			 o->metadata_url ? "--metadata-url (no token)"
					 : "Colab's credential endpoint (TBE_EPHEM_CREDS_ADDR, "
					   "TBE_CREDS_ADDR: unset), the GCE metadata server");
		rc = CFS_E_AUTH;
	}
	const char *url = o->token_url ? o->token_url
			  : a->cred.token_uri ? a->cred.token_uri
					       : DEFAULT_TOKEN_URL;
	if (!rc && a->kind != K_METADATA && a->kind != K_STATIC && cfs_wire_url_check(url)) {
		snprintf(why, wcap, "%s %.200s: plain http to another machine would send the "
			 "credentials in the clear; colabfs sends them only over https (or plain "
			 "http to localhost)", o->token_url ? "--token-url" : "the credentials' token_uri",
			 url);
		rc = CFS_E_CONFIG;
	}
	if (!rc && a->kind != K_METADATA && !(a->token_url = strdup(url)))
		rc = -ENOMEM;
	if (rc) {
		cfs_auth_free(a);
		return rc;
	}
	*out = a;
	return 0;
}

void cfs_auth_free(struct cfs_auth *a)
{
	if (!a)
		return;
	cfs_cred_cleanup(&a->cred);
	cfs_crypto_key_free(a->key);
	explicit_bzero(a->token, sizeof(a->token));
	free(a->token_url);
	free(a->scope);
	free(a->granted);
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->cond);
	free(a);
}

const char *cfs_auth_source(const struct cfs_auth *a)
{
	return a->source;
}

int cfs_auth_from_colab(const struct cfs_auth *a)
{
	return a->colab;
}

int64_t cfs_auth_expires_in(struct cfs_auth *a)
{
	pthread_mutex_lock(&a->lock);
	int64_t left = a->kind == K_STATIC || !a->gen ? -1 : a->expires_at - cfs_clock_mono_ms() / 1000;
	pthread_mutex_unlock(&a->lock);
	return left < 0 ? -1 : left;
}

/* RS256 over "hdr.claims" with the service account key. */
static int make_jwt(struct cfs_auth *a, struct cfs_buf *out)
{
	int64_t now = (int64_t)time(NULL);
	char *hdr = NULL, *claims = NULL;
	int rc = cfs_json_jwt_parts(a->cred.private_key_id, a->cred.client_email, a->scope,
				    a->token_url, now, now + 3600, &hdr, &claims);
	if (rc)
		return rc;
	size_t hl = strlen(hdr), cl = strlen(claims);
	char *signing = malloc(4 * (hl + cl) / 3 + 16);
	unsigned char *sig = NULL;
	char *s64 = NULL;
	size_t slen = 0;
	rc = -ENOMEM;
	if (!signing)
		goto out;
	size_t n = cfs_auth_b64url((unsigned char *)hdr, hl, signing);
	signing[n++] = '.';
	n += cfs_auth_b64url((unsigned char *)claims, cl, signing + n);
	rc = cfs_crypto_rs256(a->key, signing, n, &sig, &slen);
	if (rc) {
		CFS_ERROR("cannot sign the service account JWT with its private key");
		rc = CFS_E_AUTH;
		goto out;
	}
	if (!(s64 = malloc(4 * slen / 3 + 8))) {
		rc = -ENOMEM;
		goto out;
	}
	cfs_auth_b64url(sig, slen, s64);
	rc = cfs_buf_append(out, signing, n);
	if (!rc)
		rc = cfs_buf_append(out, ".", 1);
	if (!rc)
		rc = cfs_buf_append(out, s64, strlen(s64));
out:
	free(s64);
	free(sig);
	free(signing);
	free(hdr);
	free(claims);
	return rc;
}

static int form_field(struct cfs_buf *b, const char *k, const char *v)
{
	int rc = 0;
	if (b->len)
		rc = cfs_buf_append(b, "&", 1);
	if (!rc)
		rc = cfs_buf_append(b, k, strlen(k));
	if (!rc)
		rc = cfs_buf_append(b, "=", 1);
	if (!rc)
		rc = cfs_wire_urlencode(b, v);
	return rc;
}

static int build_body(struct cfs_auth *a, struct cfs_buf *body)
{
	int rc;
	if (a->kind == K_REFRESH) {
		rc = form_field(body, "grant_type", "refresh_token");
		if (!rc)
			rc = form_field(body, "client_id", a->cred.client_id);
		if (!rc)
			rc = form_field(body, "client_secret", a->cred.client_secret);
		if (!rc)
			rc = form_field(body, "refresh_token", a->cred.refresh_token);
		return rc;
	}
	struct cfs_buf jwt = { 0 };
	rc = make_jwt(a, &jwt);
	if (!rc)
		rc = form_field(body, "grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer");
	if (!rc)
		rc = form_field(body, "assertion", jwt.data);
	if (jwt.data)
		explicit_bzero(jwt.data, jwt.len);
	cfs_buf_cleanup(&jwt);
	return rc;
}

static void wipe_buf(struct cfs_buf *b)
{
	if (b->data)
		explicit_bzero(b->data, b->cap);
	cfs_buf_cleanup(b);
}

/* Sets r up to POST the form in body to url, the reply into reply. */
static void form_request(struct cfs_http_req *r, const char *url, const struct cfs_buf *body,
			 long timeout_ms, struct cfs_buf *reply)
{
	r->method = "POST";
	r->url = url;
	r->body = body->data;
	r->body_len = body->len;
	r->content_type = "application/x-www-form-urlencoded";
	r->timeout_ms = timeout_ms;
	r->out = reply;
}

/* One round trip to the token endpoint; *scope gets the reply's "scope"
 * (malloc'd, replacing what it held) or NULL.  Called without the lock. */
static int fetch_once(struct cfs_auth *a, char **tok, int64_t *expires_in, char **scope)
{
	struct cfs_buf body = { 0 }, reply = { .max = 256 * 1024 };
	struct cfs_http_req r;
	cfs_http_req_init(&r);
	int rc = 0;
	if (a->kind == K_METADATA) {
		r.extra_header = "Metadata-Flavor: Google";
		r.timeout_ms = 3000; /* a metadata server answers at once, or is not there */
		r.url = a->token_url;
		r.out = &reply;
	} else {
		if ((rc = build_body(a, &body)))
			goto out;
		form_request(&r, a->token_url, &body, 60000, &reply);
	}
	rc = cfs_http_perform(a->http, &r);
	if (rc) {
		CFS_WARN("token endpoint %s: %s", a->token_url, r.errmsg);
		snprintf(a->fail, sizeof(a->fail), "%s", r.errmsg[0] ? r.errmsg : cfs_strerror(rc));
		goto out;
	}
	char err[64];
	if (r.status == 200) {
		rc = cfs_json_parse_token(reply.data, reply.len, tok, expires_in, err, sizeof(err));
		if (rc == CFS_E_PROTO)
			CFS_WARN("token endpoint %s: malformed reply", a->token_url);
		if (rc)
			snprintf(a->fail, sizeof(a->fail), "HTTP 200 without a token");
		free(*scope);
		*scope = NULL;
		if (!rc && cfs_json_parse_scope(reply.data, reply.len, scope) == CFS_E_PROTO)
			CFS_WARN("token endpoint %s: a \"scope\" that is not a string", a->token_url);
		/* a service account's token has the scopes its JWT asserted (Google's
		 * jwt-bearer replies may leave "scope" out) */
		if (!rc && !*scope && a->kind == K_JWT)
			*scope = strdup(a->scope); /* NULL (no memory): unknown */
	} else if (r.status >= 300 && r.status <= 399) {
		/* not followed (http.h): a 307/308 would post the secrets on */
		CFS_ERROR("token endpoint %s answered HTTP %ld, a redirect to %s; colabfs does not "
			  "follow redirects of token requests", a->token_url, r.status,
			  r.location[0] ? r.location : "?");
		snprintf(a->fail, sizeof(a->fail), "HTTP %ld, a redirect", r.status);
		rc = CFS_E_AUTH;
	} else if (r.status == 400 || r.status == 401 || r.status == 403) {
		char *t = NULL;
		int64_t e;
		cfs_json_parse_token(r.err_body.data ? r.err_body.data : "", r.err_body.len, &t, &e,
				     err, sizeof(err));
		free(t);
		CFS_ERROR("token endpoint %s refused the credentials: HTTP %ld %s", a->token_url,
			  r.status, err);
		snprintf(a->fail, sizeof(a->fail), "HTTP %ld %s", r.status, err);
		rc = CFS_E_AUTH;
	} else {
		CFS_WARN("token endpoint %s: HTTP %ld", a->token_url, r.status);
		snprintf(a->fail, sizeof(a->fail), "HTTP %ld", r.status);
		rc = r.status == 429 ? CFS_E_RATE : CFS_E_SERVER;
	}
out:
	wipe_buf(&body);
	wipe_buf(&reply);
	cfs_http_req_cleanup(&r);
	return rc;
}

static int fetch_token(struct cfs_auth *a, char **tok, int64_t *expires_in, char **scope)
{
	static const struct cfs_retry_policy pol = { .base_ms = 1000, .cap_ms = 8000,
						     .max_attempts = 4 };
	int rc = 0;
	for (int attempt = 0; attempt < pol.max_attempts; attempt++) {
		rc = fetch_once(a, tok, expires_in, scope);
		if (!rc || !cfs_retry_transient(rc))
			break;
		if (attempt + 1 < pol.max_attempts)
			usleep((useconds_t)cfs_retry_delay_ms(&pol, attempt, -1, &a->rng) * 1000);
	}
	return rc;
}

static int usable(struct cfs_auth *a, int64_t now)
{
	if (a->kind == K_STATIC)
		return !a->rejected;
	return a->gen && !a->rejected && now < a->expires_at;
}

int cfs_auth_token(struct cfs_auth *a, char *tok, size_t cap, uint64_t *gen)
{
	int rc = 0;
	pthread_mutex_lock(&a->lock);
	for (;;) {
		int64_t now = (cfs_clock_mono_ms() / 1000);
		int fresh = usable(a, now) &&
			    (a->kind == K_STATIC || !cfs_auth_needs_refresh(now, a->got_at, a->expires_at));
		if (fresh)
			break;
		if (a->kind == K_STATIC) {
			rc = CFS_E_AUTH;
			break;
		}
		if (a->refreshing) {
			uint64_t seq = a->seq;
			while (a->refreshing && a->seq == seq)
				pthread_cond_wait(&a->cond, &a->lock);
			if (a->last_rc && !usable(a, (cfs_clock_mono_ms() / 1000))) {
				rc = a->last_rc;
				break;
			}
			continue;
		}
		a->refreshing = 1;
		pthread_mutex_unlock(&a->lock);
		char *t = NULL, *granted = NULL;
		int64_t exp = 0;
		int frc = fetch_token(a, &t, &exp, &granted);
		pthread_mutex_lock(&a->lock);
		a->refreshing = 0;
		a->seq++;
		a->last_rc = frc;
		if (!frc && strlen(t) >= sizeof(a->token))
			frc = a->last_rc = CFS_E_PROTO;
		if (!frc) {
			snprintf(a->token, sizeof(a->token), "%s", t);
			a->gen++;
			a->rejected = 0;
			a->got_at = (cfs_clock_mono_ms() / 1000);
			a->expires_at = a->got_at + (exp > 0 ? exp : 3600);
			free(a->granted);
			a->granted = granted;
			granted = NULL;
			CFS_DEBUG("new access token from %s, valid %lld s, scopes %s", a->token_url,
				  (long long)exp, a->granted ? a->granted : "not said");
		}
		free(granted);
		if (t) {
			explicit_bzero(t, strlen(t));
			free(t);
		}
		pthread_cond_broadcast(&a->cond);
		if (frc) {
			if (usable(a, (cfs_clock_mono_ms() / 1000)))
				break; /* refresh ahead failed; the old token still works */
			rc = frc;
			break;
		}
	}
	if (!rc) {
		if (strlen(a->token) >= cap)
			rc = -ENAMETOOLONG;
		else
			memcpy(tok, a->token, strlen(a->token) + 1);
		*gen = a->gen;
	}
	pthread_mutex_unlock(&a->lock);
	return rc;
}

void cfs_auth_reject(struct cfs_auth *a, uint64_t gen)
{
	pthread_mutex_lock(&a->lock);
	if (gen == a->gen)
		a->rejected = 1;
	pthread_mutex_unlock(&a->lock);
}

/* ---- what the token may do ---------------------------------------------- */

int cfs_auth_scope_can_write(const char *scopes)
{
	if (!scopes)
		return -1;
	size_t plen = strlen(SCOPE_PREFIX);
	for (const char *p = scopes + strspn(scopes, " \t"); *p; p += strspn(p, " \t")) {
		size_t n = strcspn(p, " \t");
		const char *s = p;
		p += n;
		if (n > plen && strncmp(s, SCOPE_PREFIX, plen) == 0) {
			s += plen;
			n -= plen;
		}
		if ((n == 5 && strncmp(s, "drive", 5) == 0) ||
		    (n == 10 && strncmp(s, "drive.file", 10) == 0))
			return 1;
	}
	return 0;
}

/* A static token's scopes, from the tokeninfo endpoint at the token URL's
 * origin (Google's: https://oauth2.googleapis.com/tokeninfo).  The token goes
 * in the POST body, never in the URL or a log line.  One try with a short
 * deadline; any failure leaves the scopes unknown. */
static void ask_tokeninfo(struct cfs_auth *a)
{
	size_t n = cfs_wire_url_origin(a->token_url);
	char url[1024];
	if (!n || (size_t)snprintf(url, sizeof(url), "%.*s/tokeninfo", (int)n, a->token_url) >=
			  sizeof(url) || cfs_wire_url_check(url)) {
		CFS_INFO("the token's scopes are unknown: no tokeninfo endpoint at %.200s that "
			 "may be sent the token", a->token_url);
		return;
	}
	struct cfs_buf body = { 0 }, reply = { .max = 64 * 1024 };
	struct cfs_http_req r;
	cfs_http_req_init(&r);
	char *scope = NULL;
	int rc = form_field(&body, "access_token", a->token);
	if (!rc) {
		form_request(&r, url, &body, 5000, &reply);
		rc = cfs_http_perform(a->http, &r);
	}
	if (!rc && r.status == 200)
		rc = cfs_json_parse_scope(reply.data, reply.len, &scope);
	if (scope)
		CFS_INFO("tokeninfo %s: the token has the scopes %.400s", url, scope);
	else if (rc)
		CFS_INFO("tokeninfo %s: %s; the token's scopes are unknown", url,
			 r.errmsg[0] ? r.errmsg : cfs_strerror(rc));
	else
		CFS_INFO("tokeninfo %s: HTTP %ld%s; the token's scopes are unknown", url, r.status,
			 r.status == 200 ? " without a scope" : "");
	wipe_buf(&body);
	wipe_buf(&reply);
	cfs_http_req_cleanup(&r);
	pthread_mutex_lock(&a->lock);
	free(a->granted);
	a->granted = scope;
	pthread_mutex_unlock(&a->lock);
}

int cfs_auth_can_write(struct cfs_auth *a)
{
	pthread_mutex_lock(&a->lock);
	int ask = a->kind == K_STATIC && !a->info_asked && a->http;
	int fetch = (a->kind == K_REFRESH || a->kind == K_JWT) && !a->gen;
	a->info_asked |= ask;
	pthread_mutex_unlock(&a->lock);
	if (ask)
		ask_tokeninfo(a);
	if (fetch) {
		/* the scopes come with the first token, which the mount needs anyway */
		char tok[TOKEN_MAX];
		uint64_t gen;
		int rc = cfs_auth_token(a, tok, sizeof(tok), &gen);
		explicit_bzero(tok, sizeof(tok));
		if (rc)
			CFS_INFO("no token yet (%s): the token's scopes are unknown", cfs_strerror(rc));
	}
	pthread_mutex_lock(&a->lock);
	int w = cfs_auth_scope_can_write(a->granted);
	pthread_mutex_unlock(&a->lock);
	return w;
}

int cfs_auth_granted(struct cfs_auth *a, char *out, size_t cap)
{
	pthread_mutex_lock(&a->lock);
	int rc = a->granted ? 0 : -ENOENT;
	if (cap)
		snprintf(out, cap, "%s", a->granted ? a->granted : "");
	pthread_mutex_unlock(&a->lock);
	return rc;
}
