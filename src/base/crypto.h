/* crypto: signatures, digests and TLS client streams (owns OpenSSL).
 *
 * RS256 for the service-account JWT, MD5/SHA-256 to check a completely
 * cached file against the checksums Drive publishes, HMAC-SHA256 for the
 * values of the shared cache tier (tiered.h), and a TLS client over a
 * socket the caller connected (the shared cache tier's rediss://; libcurl
 * does its own TLS for Drive).  In base so that every layer that needs
 * OpenSSL goes through this one module.  Returns 0, -EINVAL for an unusable
 * key or algorithm, or -ENOMEM (and -ENOKEY, and the TLS codes, see below). */
#ifndef CFS_CRYPTO_H
#define CFS_CRYPTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

/* HMAC-SHA256 under one key, keyed once (the key is copied into OpenSSL's
 * state and wiped with it by cfs_mac_free).  cfs_mac_new returns 0, -EINVAL
 * for an empty key, or -ENOMEM.  cfs_mac_sign writes the 32-byte MAC of the
 * concatenation of the n parts (iov) into out: 0, or -ENOMEM.  Thread-safe:
 * any number of threads may sign with one cfs_mac at once (each call works
 * on a copy of the keyed state). */
#define CFS_MAC_LEN 32
struct iovec;
struct cfs_mac;
int cfs_mac_new(const void *key, size_t klen, struct cfs_mac **out);
int cfs_mac_sign(const struct cfs_mac *m, const struct iovec *iov, int n,
		 unsigned char out[CFS_MAC_LEN]);
void cfs_mac_free(struct cfs_mac *m);
/* One-shot HMAC-SHA256 (tests, benches): 0 or -ENOMEM. */
int cfs_crypto_hmac_sha256(const void *key, size_t klen, const void *msg, size_t n,
			   unsigned char out[CFS_MAC_LEN]);
/* 1 when the n bytes at a and b are equal, in time that does not depend on
 * where they differ (for comparing MACs), else 0. */
int cfs_crypto_equal(const void *a, const void *b, size_t n);

/* A TLS client stream over a connected, non-blocking TCP socket fd (which
 * stays the caller's: cfs_tls_close does not close it).  Not thread-safe:
 * one user at a time.  deadline_ms is an absolute CLOCK_MONOTONIC time in ms
 * (cfs_clock_mono_ms() + timeout).
 *
 * cfs_tls_connect runs the handshake (TLS 1.2 or newer) and always verifies
 * the peer: its chain against ca_file (a PEM bundle; NULL: the system's
 * store) and its name against host -- a DNS name (also sent as SNI) or an
 * IP literal (matched against the certificate's IP addresses, no SNI).
 * There is no way to turn verification off.  Returns 0 with *out set,
 * CFS_E_TLS when the certificate does not verify (the reason is logged),
 * CFS_E_CONFIG when ca_file cannot be loaded, -ETIMEDOUT when the deadline
 * passes, CFS_E_NET for any other handshake or transport failure, -ENOMEM. */
struct cfs_tls;
int cfs_tls_connect(int fd, const char *host, const char *ca_file, int64_t deadline_ms,
		    struct cfs_tls **out);
/* Reads up to cap (> 0) bytes: returns how many (> 0, what one TLS record
 * had ready), CFS_E_NET when the peer closed (cleanly or not) or the stream
 * failed, -ETIMEDOUT when nothing came before the deadline. */
ssize_t cfs_tls_read(struct cfs_tls *t, void *buf, size_t cap, int64_t deadline_ms);
/* Writes all n bytes: 0, CFS_E_NET, or -ETIMEDOUT (some may have gone). */
int cfs_tls_write(struct cfs_tls *t, const void *buf, size_t n, int64_t deadline_ms);
/* Sends close_notify (best effort, never waits) and frees t; NULL is safe. */
void cfs_tls_close(struct cfs_tls *t);

#endif
