/* crypto: signatures and digests (owns OpenSSL).
 *
 * RS256 for the service-account JWT, and MD5/SHA-256 to check a completely
 * cached file against the checksums Drive publishes.  Returns 0, -EINVAL for
 * an unusable key or algorithm, or -ENOMEM (and -ENOKEY, see below). */
#ifndef CFS_CRYPTO_H
#define CFS_CRYPTO_H

#include <stddef.h>

/* A service-account private key, parsed once when the credentials are
 * loaded (so the PEM text can be wiped).  cfs_crypto_key_load returns 0,
 * -ENOKEY for a passphrase-protected key (never asked for on the terminal),
 * -EINVAL for anything but a PEM RSA private key, or -ENOMEM. */
struct cfs_key;
int cfs_crypto_key_load(const char *pem, struct cfs_key **out);
void cfs_crypto_key_free(struct cfs_key *k);

/* Signs msg with k (RSASSA-PKCS1-v1_5 with SHA-256).  *sig is malloc'd. */
int cfs_crypto_rs256(const struct cfs_key *k, const void *msg, size_t n, unsigned char **sig,
		     size_t *slen);

struct cfs_digest;
/* alg: "md5" or "sha256". */
int cfs_digest_new(const char *alg, struct cfs_digest **out);
int cfs_digest_update(struct cfs_digest *d, const void *p, size_t n);
/* Writes lowercase hex (cap >= 65) and frees d. */
int cfs_digest_final_hex(struct cfs_digest *d, char *hex, size_t cap);
void cfs_digest_free(struct cfs_digest *d);

#endif
