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
	const char *scope;       /* NULL: drive.readonly */
	const char *metadata_url; /* --metadata-url, or NULL */
};

/* Finds a credential source.  On failure returns CFS_E_AUTH or CFS_E_CONFIG
 * with a reason in why (no secret in it). */
int cfs_auth_new(struct cfs_http *http, const struct cfs_auth_opts *o, struct cfs_auth **out,
		 char *why, size_t wcap);
void cfs_auth_free(struct cfs_auth *a);

/* A short description of the source in use ("credentials file /x (authorized_user)"). */
const char *cfs_auth_source(const struct cfs_auth *a);

/* Copies a valid token into tok and its generation into *gen.  Refreshes
 * first when needed.  Returns 0, CFS_E_AUTH (refused: revoked, bad file),
 * or a transient status (CFS_E_NET...) when the token endpoint is unreachable. */
int cfs_auth_token(struct cfs_auth *a, char *tok, size_t cap, uint64_t *gen);

/* Drive answered 401 to the token of generation gen: force a refresh on the
 * next cfs_auth_token (a no-op if the token was already replaced). */
void cfs_auth_reject(struct cfs_auth *a, uint64_t gen);

/* Pure: should a token expiring at expires_at (seconds) and obtained at
 * got_at be refreshed at now? */
int cfs_auth_needs_refresh(int64_t now, int64_t got_at, int64_t expires_at);

/* Pure: base64url without padding (for JWTs).  out needs 4*ceil(n/3)+1 bytes.
 * Returns the length written. */
size_t cfs_auth_b64url(const unsigned char *in, size_t n, char *out);

#endif
