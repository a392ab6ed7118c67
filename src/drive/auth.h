/* auth: where the bearer token comes from, and keeping it fresh.
 *
 * Sources, first found wins: --credentials FILE; $GOOGLE_APPLICATION_CREDENTIALS;
 * ~/.config/gcloud/application_default_credentials.json (or
 * $CLOUDSDK_CONFIG/...); Colab's /content/.adc/adc.json; the metadata server
 * (GCE and recent Colab runtimes: asked when --metadata-url or
 * $GCE_METADATA_HOST is set, or the machine says it is a Google VM);
 * $COLABFS_ACCESS_TOKEN.
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

/* A short description of the source in use ("credentials file /x (authorized_user)"). */
const char *cfs_auth_source(const struct cfs_auth *a);

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
