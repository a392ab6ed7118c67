/* auth: where the bearer token comes from, and keeping it fresh.
 *
 * Sources, first found wins: --credentials FILE; $GOOGLE_APPLICATION_CREDENTIALS;
 * ~/.config/gcloud/application_default_credentials.json (or
 * $CLOUDSDK_CONFIG/...); Colab's /content/.adc/adc.json; a metadata server:
 * --metadata-url when given, else Colab's credential endpoint
 * ($TBE_EPHEM_CREDS_ADDR, else $TBE_CREDS_ADDR: host:port or
 * http(s)://host[:port][/prefix], see cfs_auth_tbe_base), else the GCE one
 * ($GCE_METADATA_HOST, or metadata.google.internal when the machine says it
 * is a Google VM; on Colab that is the VM's service account, not the user);
 * $COLABFS_ACCESS_TOKEN.
 * Every metadata server is asked the same way: GET
 * {base}/computeMetadata/v1/instance/service-accounts/default/token?scopes=...
 * with "Metadata-Flavor: Google"; its tokens are refreshed like any other.
 * A metadata server that gives no token is passed over, except Colab's: its
 * variable says where the user's token is (after the notebook's consent), so
 * its failure is final (CFS_E_AUTH, CFS_AUTH_COLAB_FIX in the reason), never
 * a silent fall back to the VM's account.  Tokens (from any source) are sent
 * only to the Drive API URL (https, or plain http to this machine: config.c).
 * authorized_user files use the refresh-token grant; service_account files
 * sign an RS256 JWT (jwt-bearer grant).  A static token from the environment is
 * used as is and cannot be refreshed.
 *
 * Refresh policy: a token is refreshed when less than a minute (or a tenth of
 * its lifetime, if shorter) is left, and after a 401 (cfs_auth_reject).  One
 * thread refreshes; the others wait for it (single flight).  Token calls that
 * fail transiently are retried a few times with backoff.
 *
 * Scopes: the scope asked for (JWT claim, metadata ?scopes=) defaults to the
 * full drive scope; what the token was granted is recorded from the token
 * replies (or asked of tokeninfo for a static token), so the mount can tell
 * whether it may write (cfs_auth_can_write).
 *
 * Secrets (tokens, refresh tokens, keys) are never logged or put in error
 * text; memory holding them is wiped on free. */
#ifndef CFS_AUTH_H
#define CFS_AUTH_H

#include <stddef.h>
#include <stdint.h>

struct cfs_http;
struct cfs_auth;

struct cfs_auth_opts {
	const char *credentials; /* --credentials, or NULL */
	const char *token_url;   /* --token-url, or NULL: the file's token_uri or Google's */
	const char *scope;       /* NULL: drive */
	const char *metadata_url; /* --metadata-url, or NULL */
};

/* Finds a credential source.  On failure returns CFS_E_AUTH or CFS_E_CONFIG
 * with a reason in why (no secret in it). */
int cfs_auth_new(struct cfs_http *http, const struct cfs_auth_opts *o, struct cfs_auth **out,
		 char *why, size_t wcap);
void cfs_auth_free(struct cfs_auth *a);

/* A short description of the source in use ("credentials file /x (authorized_user)",
 * "Colab (TBE_EPHEM_CREDS_ADDR http://172.28.0.1:8009)"); never a secret. */
const char *cfs_auth_source(const struct cfs_auth *a);

/* What a notebook user does when Colab's endpoint gives no token, or one
 * without Drive: the consent Colab asks before it hands out the user's
 * Drive token.  cfs_auth_new's reason ends with it when Colab's endpoint
 * failed. */
#define CFS_AUTH_COLAB_FIX                                                                 \
	"run colabfs.mount(\"/content/data\") in the notebook, which asks for your consent " \
	"to Drive (or once: from google.colab import drive; drive.mount(\"/content/drive\"))"

/* 1 when the token comes from Colab's credential endpoint ($TBE_*), else 0. */
int cfs_auth_from_colab(const struct cfs_auth *a);

/* Pure: the base URL of Colab's credential endpoint from the value addr of
 * the variable var ("TBE_EPHEM_CREDS_ADDR"): "host:port" (as Colab sets it,
 * e.g. 172.28.0.1:8009) gives "http://host:port"; a URL
 * "http(s)://host[:port][/prefix]" is kept, the scheme lowercased and
 * trailing slashes dropped.  host is a name or dotted address of
 * [A-Za-z0-9._-], or [IPv6]; port 1 to 65535.  Returns 0, or CFS_E_CONFIG
 * with a reason naming var in why: another scheme, a space, a control or
 * non-ASCII byte, a user name, query or fragment, no port in the bare
 * form, a result longer than cap. */
int cfs_auth_tbe_base(const char *var, const char *addr, char *base, size_t cap, char *why,
		      size_t wcap);

/* Seconds until the current token expires, or -1 when that is not known
 * (no token fetched yet, or a static one from the environment). */
int64_t cfs_auth_expires_in(struct cfs_auth *a);

/* Copies a valid token into tok and its generation into *gen.  Refreshes
 * first when needed.  Returns 0, CFS_E_AUTH (refused: revoked, bad file),
 * or a transient status (CFS_E_NET...) when the token endpoint is unreachable. */
int cfs_auth_token(struct cfs_auth *a, char *tok, size_t cap, uint64_t *gen);

/* Drive answered 401 to the token of generation gen: force a refresh on the
 * next cfs_auth_token (a no-op if the token was already replaced). */
void cfs_auth_reject(struct cfs_auth *a, uint64_t gen);

/* Whether the token may write to Drive: 1 when a scope it was granted allows
 * writes (drive or drive.file), 0 when its scopes are known and none does
 * (drive.readonly, drive.metadata.readonly...), -1 when they are unknown.
 * What was granted comes from the "scope" of the token endpoint's replies
 * (refresh-token and JWT-bearer grants, the metadata server; a JWT-bearer
 * reply without one grants the scope the JWT asserted); a source that has
 * fetched no token yet fetches one first.  A static token
 * (COLABFS_ACCESS_TOKEN) is looked up once, on the first call, at the
 * tokeninfo endpoint of the token URL's origin (Google's:
 * https://oauth2.googleapis.com/tokeninfo), the token in a POST body; an
 * endpoint that is not https (or plain http to localhost), or any failure,
 * leaves the scopes unknown.  Never fatal; may block for that first token or
 * lookup (seconds).  Thread-safe. */
int cfs_auth_can_write(struct cfs_auth *a);

/* Copies the granted scopes (space-separated URLs, as the endpoint said them)
 * into out, cut to cap.  Returns 0, or -ENOENT when they are unknown (out is
 * then ""). */
int cfs_auth_granted(struct cfs_auth *a, char *out, size_t cap);

/* Pure: may a token with these scopes (space-separated, each a full
 * https://www.googleapis.com/auth/... URL or its short name) write?  1 for
 * drive or drive.file among them, 0 for none, -1 for scopes NULL (unknown). */
int cfs_auth_scope_can_write(const char *scopes);

/* Pure: should a token expiring at expires_at (seconds) and obtained at
 * got_at be refreshed at now? */
int cfs_auth_needs_refresh(int64_t now, int64_t got_at, int64_t expires_at);

/* Pure: base64url without padding (for JWTs).  out needs 4*ceil(n/3)+1 bytes.
 * Returns the length written. */
size_t cfs_auth_b64url(const unsigned char *in, size_t n, char *out);

#endif
