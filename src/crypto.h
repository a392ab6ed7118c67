/* crypto: signatures and digests (owns OpenSSL).
 *
 * RS256 for the service-account JWT, and MD5/SHA-256 to check a completely
 * cached file against the checksums Drive publishes.  Returns 0, -EINVAL for
 * an unusable key or algorithm, or -ENOMEM. */
#ifndef CFS_CRYPTO_H
#define CFS_CRYPTO_H

#include <stddef.h>

/* Signs msg with the PEM private key (RSASSA-PKCS1-v1_5 with SHA-256).
 * *sig is malloc'd. */
int cfs_crypto_rs256(const char *pem_key, const void *msg, size_t n, unsigned char **sig,
		     size_t *slen);

struct cfs_digest;
/* alg: "md5" or "sha256". */
int cfs_digest_new(const char *alg, struct cfs_digest **out);
int cfs_digest_update(struct cfs_digest *d, const void *p, size_t n);
/* Writes lowercase hex (cap >= 65) and frees d. */
int cfs_digest_final_hex(struct cfs_digest *d, char *hex, size_t cap);
void cfs_digest_free(struct cfs_digest *d);

#endif
