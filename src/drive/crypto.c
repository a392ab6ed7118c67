/* crypto: OpenSSL owner (see crypto.h). */
#define _GNU_SOURCE /* ENOKEY */
#include "crypto.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>

struct cfs_digest {
	EVP_MD_CTX *ctx;
};

struct cfs_key {
	EVP_PKEY *pkey;
};

/* Asked for a passphrase: there is none to give (no prompt on the terminal,
 * which is what OpenSSL's default callback does). */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	*(int *)u = 1;
	return -1;
}

int cfs_crypto_key_load(const char *pem, struct cfs_key **out)
{
	*out = NULL;
	int asked = 0;
	BIO *bio = BIO_new_mem_buf(pem, -1);
	if (!bio)
		return -ENOMEM;
	EVP_PKEY *pkey = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, &asked);
	BIO_free(bio);
	ERR_clear_error();
	if (!pkey)
		return asked ? -ENOKEY : -EINVAL;
	struct cfs_key *k = NULL;
	if (EVP_PKEY_base_id(pkey) != EVP_PKEY_RSA || !(k = malloc(sizeof(*k)))) {
		int rc = EVP_PKEY_base_id(pkey) != EVP_PKEY_RSA ? -EINVAL : -ENOMEM;
		EVP_PKEY_free(pkey);
		return rc;
	}
	k->pkey = pkey;
	*out = k;
	return 0;
}

void cfs_crypto_key_free(struct cfs_key *k)
{
	if (!k)
		return;
	EVP_PKEY_free(k->pkey);
	free(k);
}

int cfs_crypto_rs256(const struct cfs_key *k, const void *msg, size_t n, unsigned char **sig,
		     size_t *slen)
{
	*sig = NULL;
	int rc = -EINVAL;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	size_t len = 0;
	if (md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k->pkey) == 1 &&
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
