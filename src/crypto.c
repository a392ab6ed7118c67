/* crypto: OpenSSL owner (see crypto.h). */
#include "crypto.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>

struct cfs_digest {
	EVP_MD_CTX *ctx;
};

int cfs_crypto_rs256(const char *pem_key, const void *msg, size_t n, unsigned char **sig,
		     size_t *slen)
{
	*sig = NULL;
	int rc = -EINVAL;
	BIO *bio = BIO_new_mem_buf(pem_key, -1);
	EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
	EVP_MD_CTX *md = key ? EVP_MD_CTX_new() : NULL;
	size_t len = 0;
	if (md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
	    EVP_DigestSign(md, NULL, &len, msg, n) == 1) {
		rc = -ENOMEM;
		*sig = malloc(len);
		if (*sig && EVP_DigestSign(md, *sig, &len, msg, n) == 1) {
			*slen = len;
			rc = 0;
		} else if (*sig) {
			rc = -EINVAL;
		}
	}
	if (rc) {
		free(*sig);
		*sig = NULL;
	}
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(key);
	BIO_free(bio);
	return rc;
}

int cfs_digest_new(const char *alg, struct cfs_digest **out)
{
	const EVP_MD *md = EVP_get_digestbyname(alg);
	if (!md)
		return -EINVAL;
	struct cfs_digest *d = calloc(1, sizeof(*d));
	if (!d || !(d->ctx = EVP_MD_CTX_new()) || EVP_DigestInit_ex(d->ctx, md, NULL) != 1) {
		cfs_digest_free(d);
		return -ENOMEM;
	}
	*out = d;
	return 0;
}

int cfs_digest_update(struct cfs_digest *d, const void *p, size_t n)
{
	return EVP_DigestUpdate(d->ctx, p, n) == 1 ? 0 : -EINVAL;
}

int cfs_digest_final_hex(struct cfs_digest *d, char *hex, size_t cap)
{
	unsigned char v[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	int rc = EVP_DigestFinal_ex(d->ctx, v, &n) == 1 && cap > 2 * n ? 0 : -EINVAL;
	for (unsigned i = 0; !rc && i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", v[i]);
	cfs_digest_free(d);
	return rc;
}

void cfs_digest_free(struct cfs_digest *d)
{
	if (!d)
		return;
	EVP_MD_CTX_free(d->ctx);
	free(d);
}
