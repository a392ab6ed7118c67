/* crypto: OpenSSL owner (see crypto.h). */
#define _GNU_SOURCE /* ENOKEY, MSG_NOSIGNAL */
#include "crypto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "err.h"
#include "fdwait.h"
#include "log.h"

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

/* --- HMAC-SHA256 -------------------------------------------------------------
 * The keyed state is made once (EVP_MAC_init with the key); a signature
 * works on a duplicate of it, so the key schedule is not redone per call and
 * concurrent callers share nothing they write. */

struct cfs_mac {
	EVP_MAC_CTX *keyed;
};

int cfs_mac_new(const void *key, size_t klen, struct cfs_mac **out)
{
	*out = NULL;
	if (!klen)
		return -EINVAL;
	struct cfs_mac *m = calloc(1, sizeof(*m));
	EVP_MAC *mac = m ? EVP_MAC_fetch(NULL, "HMAC", NULL) : NULL;
	char digest[] = "SHA256";
	OSSL_PARAM p[] = { OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
			   OSSL_PARAM_construct_end() };
	if (mac)
		m->keyed = EVP_MAC_CTX_new(mac);
	EVP_MAC_free(mac); /* the context holds its own reference */
	if (!m || !m->keyed || EVP_MAC_init(m->keyed, key, klen, p) != 1) {
		ERR_clear_error();
		cfs_mac_free(m);
		return -ENOMEM;
	}
	*out = m;
	return 0;
}

int cfs_mac_sign(const struct cfs_mac *m, const struct iovec *iov, int n,
		 unsigned char out[CFS_MAC_LEN])
{
	EVP_MAC_CTX *c = EVP_MAC_CTX_dup(m->keyed);
	size_t len = 0;
	int ok = c != NULL;
	for (int i = 0; ok && i < n; i++)
		ok = EVP_MAC_update(c, iov[i].iov_base, iov[i].iov_len) == 1;
	ok = ok && EVP_MAC_final(c, out, &len, CFS_MAC_LEN) == 1 && len == CFS_MAC_LEN;
	EVP_MAC_CTX_free(c);
	if (!ok) {
		ERR_clear_error();
		return -ENOMEM;
	}
	return 0;
}

void cfs_mac_free(struct cfs_mac *m)
{
	if (!m)
		return;
	EVP_MAC_CTX_free(m->keyed);
	free(m);
}

int cfs_crypto_hmac_sha256(const void *key, size_t klen, const void *msg, size_t n,
			   unsigned char out[CFS_MAC_LEN])
{
	struct cfs_mac *m = NULL;
	struct iovec v = { (void *)msg, n };
	int rc = cfs_mac_new(key, klen, &m);
	if (!rc)
		rc = cfs_mac_sign(m, &v, 1, out);
	cfs_mac_free(m);
	return rc;
}

int cfs_crypto_equal(const void *a, const void *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}

/* --- TLS client streams ------------------------------------------------------
 * OpenSSL's socket BIO writes with write(2), which raises SIGPIPE on a peer
 * that has gone; ours sends with MSG_NOSIGNAL (the program need not ignore
 * SIGPIPE for a TLS stream to fail cleanly). */

struct cfs_tls {
	SSL_CTX *ctx;
	SSL *ssl;
	int fd;
	int failed; /* a fatal error: no close_notify (SSL_shutdown must not be called) */
};

static BIO_METHOD *bio_meth;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static int bio_fd(BIO *b)
{
	return (int)(intptr_t)BIO_get_data(b);
}

static int bio_write(BIO *b, const char *p, int n)
{
	BIO_clear_retry_flags(b);
	ssize_t w = send(bio_fd(b), p, (size_t)n, MSG_NOSIGNAL);
	if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		BIO_set_retry_write(b);
	return (int)w;
}

static int bio_read(BIO *b, char *p, int n)
{
	BIO_clear_retry_flags(b);
	ssize_t r = recv(bio_fd(b), p, (size_t)n, 0);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		BIO_set_retry_read(b);
	return (int)r;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)b;
	(void)num;
	(void)ptr;
	return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int bio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static void bio_meth_init(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "cfs-socket");
	if (m && (!BIO_meth_set_write(m, bio_write) || !BIO_meth_set_read(m, bio_read) ||
		  !BIO_meth_set_ctrl(m, bio_ctrl) || !BIO_meth_set_create(m, bio_create))) {
		BIO_meth_free(m);
		m = NULL;
	}
	bio_meth = m;
}

/* After an SSL call returned r <= 0: 0 when it wants fd ready (waited for,
 * within the deadline), else the status that ends the operation. */
static int tls_retry(struct cfs_tls *t, int r, int64_t deadline_ms)
{
	int e = SSL_get_error(t->ssl, r);
	ERR_clear_error();
	if (e == SSL_ERROR_WANT_READ)
		return cfs_fd_wait(t->fd, POLLIN, deadline_ms);
	if (e == SSL_ERROR_WANT_WRITE)
		return cfs_fd_wait(t->fd, POLLOUT, deadline_ms);
	t->failed = 1;
	return CFS_E_NET; /* ZERO_RETURN (close_notify), SYSCALL (reset, EOF), SSL (protocol) */
}

int cfs_tls_connect(int fd, const char *host, const char *ca_file, int64_t deadline_ms,
		    struct cfs_tls **out)
{
	*out = NULL;
	pthread_once(&bio_once, bio_meth_init);
	if (!bio_meth)
		return -ENOMEM;
	struct cfs_tls *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->fd = fd;
	int rc = -ENOMEM;
	BIO *bio = NULL;
	if (!(t->ctx = SSL_CTX_new(TLS_client_method())))
		goto out;
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
	if (ca_file ? SSL_CTX_load_verify_locations(t->ctx, ca_file, NULL) != 1
		    : SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
		CFS_WARN("tls: cannot load the CA certificates from %s",
			 ca_file ? ca_file : "the system store");
		rc = CFS_E_CONFIG;
		goto out;
	}
	if (!(t->ssl = SSL_new(t->ctx)) || !(bio = BIO_new(bio_meth)))
		goto out;
	BIO_set_data(bio, (void *)(intptr_t)fd);
	SSL_set_bio(t->ssl, bio, bio); /* t->ssl owns it now */
	unsigned char addr[16];
	int ip = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
	if (ip) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), host) != 1)
			goto out;
	} else {
		SSL_set_hostflags(t->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		if (SSL_set1_host(t->ssl, host) != 1 || SSL_set_tlsext_host_name(t->ssl, host) != 1)
			goto out;
	}
	for (;;) {
		ERR_clear_error();
		int r = SSL_connect(t->ssl);
		if (r == 1) {
			rc = 0;
			break;
		}
		rc = tls_retry(t, r, deadline_ms);
		if (rc == CFS_E_NET) {
			long v = SSL_get_verify_result(t->ssl);
			if (v != X509_V_OK) {
				CFS_WARN("tls: the certificate of %s does not verify: %s", host,
					 X509_verify_cert_error_string(v));
				rc = CFS_E_TLS;
			}
		}
		if (rc)
			break;
	}
out:
	ERR_clear_error();
	if (rc) {
		cfs_tls_close(t);
		return rc;
	}
	*out = t;
	return 0;
}

ssize_t cfs_tls_read(struct cfs_tls *t, void *buf, size_t cap, int64_t deadline_ms)
{
	int n = cap > INT32_MAX ? INT32_MAX : (int)cap;
	for (;;) {
		ERR_clear_error();
		int r = SSL_read(t->ssl, buf, n);
		if (r > 0)
			return r;
		int rc = tls_retry(t, r, deadline_ms);
		if (rc)
			return rc;
	}
}

int cfs_tls_write(struct cfs_tls *t, const void *buf, size_t n, int64_t deadline_ms)
{
	const char *p = buf;
	while (n) {
		int k = n > INT32_MAX ? INT32_MAX : (int)n;
		ERR_clear_error();
		int r = SSL_write(t->ssl, p, k);
		if (r > 0) {
			p += r;
			n -= (size_t)r;
			continue;
		}
		int rc = tls_retry(t, r, deadline_ms);
		if (rc)
			return rc;
	}
	return 0;
}

void cfs_tls_close(struct cfs_tls *t)
{
	if (!t)
		return;
	if (t->ssl && !t->failed && SSL_is_init_finished(t->ssl))
		SSL_shutdown(t->ssl); /* non-blocking fd: one try, no wait */
	ERR_clear_error();
	SSL_free(t->ssl);
	SSL_CTX_free(t->ctx);
	free(t);
}
