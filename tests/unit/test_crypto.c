/* Unit tests: digests, HMAC-SHA256 (RFC 4231's vectors; one keyed state signed
 * with by 4 threads at once) and RS256 signing with a fixed test key. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "check.h"
#include "crypto.h"

/* A 1024-bit test key made for this test only (openssl genpkey); the expected
 * signature was made with `openssl dgst -sha256 -sign` over "hello.jwt". */
static const char test_key[] =
	"-----BEGIN PRIVATE KEY-----\n"
	"MIICdwIBADANBgkqhkiG9w0BAQEFAASCAmEwggJdAgEAAoGBAMr/zn1/tqzBZXKz\n"
	"L6101t1NRz8sL1+EGD8yapFPNJg/JG5KpwBi6zWBJb2AZATcXRfEMePhEaTx1CII\n"
	"7Cu6ZxIVWWGPJUaud0FQZuqCBNlbIK4LGgacIhm2fDOd5fZZitoGKr6eUiFJBRrp\n"
	"BLqAXEuy+tjzSKbnjtzDtVSZ+IkRAgMBAAECgYEAhDQOjYr0NBQLdqSdw1BZcmyW\n"
	"ntyuyXzksZuq7ZFwxkow9qcllcnWNtUx9/U6rjO5aPX8K9VzQUHBDp1S+bN+1Y1Z\n"
	"GEdjxVm27dA+ZVHHVyhpMWF5Gcq5oDVU7+83uoV8u7kEkv5wHVyVBteEEHgLpCoe\n"
	"P5S0F5KwoZ4TTdyElXECQQD1VcHdDMw8r5zV5o29AMK79jZ9Qqzea7hWB+LN6ESc\n"
	"z8t4oWfhnfbVBzV0Ydz2vYsXOH07NQZZDJiGd5X6XpENAkEA09LpEO3xMIzStb+N\n"
	"xB5Jts1FhVhdmUvQiBy2qEY8SIxWWCDui8ogKxoYprIpC6lqYHj/rJxImoDr0ZV1\n"
	"pBpvFQJAV1iZ9f6JdI29k/ZKvmDX9B271qr3axUFAzQ5jr/ENeRRd/hXSN95suyn\n"
	"HnF9PyfKrpDBHWRKh0fRwgYvkn06vQJBAMHVd2cBhbr6snqULiMv4B6CWsK56PS1\n"
	"dr6HH/J+Sv3MRdrhT8jljmhCuhoYYA0G24wqTTRj0uBnZuPjk8I2Wj0CQBCgT69h\n"
	"U5XAJ1NCF5yjuBzN1CZ56kdAyp9t6F3YEg1cM8XZ55joMUg8e2QH5VU+MU39EBI/\n"
	"+9P9mM+7X1dBmNY=\n"
	"-----END PRIVATE KEY-----\n";
/* test_key encrypted with a passphrase (openssl pkcs8 -topk8 -v2 aes-256-cbc) */
static const char encrypted_key[] =
	"-----BEGIN ENCRYPTED PRIVATE KEY-----\n"
	"MIIC3TBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQIz7oSZBFr174CAggA\n"
	"MAwGCCqGSIb3DQIJBQAwHQYJYIZIAWUDBAEqBBDCHdr8ZZuDqO2o/ltPuKwHBIIC\n"
	"gDeOqzWDJ2nswsL1LuUDdsV/tN0XPo/LIyZDxhdQBI+TXI5T4NguxsmFBwrzXzm0\n"
	"buND6KiQGuLXGsxSlI4hLrbrWmqSFCR3D1yxqRdk3y5pYzYQR3NdMy78w5Wr89xn\n"
	"0s6QULk1hMzrv6IU7QSIeqrgNe7QZAdFWH/GcOCojHThV5RUZSH8v+MJe8XO8Eiw\n"
	"ucVOwOYuCMEPKVxD0ttK9f1biAeqnMUZ0kUAqvqPGcP9CATtl5kUkenmj0iPxjvB\n"
	"WgSuVzL9CTwR1oUvOMyyi2zwv6hNHdCwrdd2d8FX6NKH6EQ4iQ6WqJGLQKmmDOlm\n"
	"W9QCNGLc6j0/Rab44ovqMOd5Y0DLneycICN/WBLGXWSBR6jsEgcMSwLGmHPBNCIj\n"
	"3l2HAfO/0cVgSeZOP+pjnXM0IpCv5iptJA7r3J7W7quQgkf6yZ1GlZYKxaNUHIJy\n"
	"CwJouNsb1MWU7frJz160yZqm3p+o3A0WayNauDNOWmiDomlrmuv3q3f3vZy5alGn\n"
	"t/kkDyB2LqBVUaktZ45XC6ZQ70kt5c28O9xTWVlogwIbpjb19aITvSyv0VePPTod\n"
	"sQSMsMIfnOnqN89i8k+o80GxV6aV9CO9p+KxY92Lzc94VmQnUjwsTC0hGSlSn5Yx\n"
	"FMgNSVQwD2AHuznrmNxDWEvMT3n2wIqF3uf/BDGBRebbKCe+gkLiwrGMhmtQpEjY\n"
	"isq11L/42Yi/guxJHm/aZ4426tSoid7I73yk7lZ8vZJe2D2CVKyb/OYTa2kJk17t\n"
	"Zh6+bjoY3lWNgHOeh+W3OPozvCEWt1F2Yp3UrTfoxoThvsmuz0vzx3YvoxgJDUuh\n"
	"npMaMlkiq19MbzUbKyu/vGE=\n"
	"-----END ENCRYPTED PRIVATE KEY-----\n";

static const char want_sig[] = "bbcfcd615f3d3748e28eeb2467fe1b5620e22f8c51ab685376dd8b87ab26fbf4ffd99240861534d31ac403ca22d73bf8ec783ee298061861ca9b0e6ba60c65e345e63dcf61fb6fac9638252051445e42c5914e39f145630821d5098ce5e70dcedae9533ac7ec48a0579aca795a37bc7fdf56571dad5c8511c26fae70365e3be7";

static void hex_of(const char *alg, const char *msg, char *out)
{
	struct cfs_digest *d;
	CHECK_EQ(cfs_digest_new(alg, &d), 0);
	/* in two pieces: updates must chain */
	size_t n = strlen(msg);
	CHECK_EQ(cfs_digest_update(d, msg, n / 2), 0);
	CHECK_EQ(cfs_digest_update(d, msg + n / 2, n - n / 2), 0);
	CHECK_EQ(cfs_digest_final_hex(d, out, 65), 0);
}

static void mac_hex(const unsigned char *mac, char *out)
{
	for (int i = 0; i < CFS_MAC_LEN; i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

/* Threads signing with one cfs_mac at once all get the one right MAC. */
struct signer {
	const struct cfs_mac *m;
	const unsigned char *want;
	int wrong;
};

static void *sign_many(void *arg)
{
	struct signer *s = arg;
	const char *msg = "what do ya want for nothing?";
	struct iovec v = { (void *)msg, strlen(msg) };
	for (int i = 0; i < 2000; i++) {
		unsigned char mac[CFS_MAC_LEN];
		if (cfs_mac_sign(s->m, &v, 1, mac) || !cfs_crypto_equal(mac, s->want, CFS_MAC_LEN))
			s->wrong++;
	}
	return NULL;
}

static void test_hmac_threads(const unsigned char *want)
{
	struct cfs_mac *m = NULL;
	CHECK_EQ(cfs_mac_new("Jefe", 4, &m), 0);
	pthread_t th[4];
	struct signer s[4];
	for (int i = 0; i < 4; i++) {
		s[i] = (struct signer){ m, want, 0 };
		pthread_create(&th[i], NULL, sign_many, &s[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(s[i].wrong, 0);
	}
	cfs_mac_free(m);
}

/* RFC 4231 test cases 1 and 2, one-shot and through a keyed cfs_mac in
 * parts; the constant-time compare. */
static void test_hmac(void)
{
	unsigned char key1[20], mac[CFS_MAC_LEN], mac2[CFS_MAC_LEN];
	char hex[2 * CFS_MAC_LEN + 1];
	memset(key1, 0x0b, sizeof(key1));
	CHECK_EQ(cfs_crypto_hmac_sha256(key1, sizeof(key1), "Hi There", 8, mac), 0);
	mac_hex(mac, hex);
	CHECK_STR(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	const char *msg = "what do ya want for nothing?";
	CHECK_EQ(cfs_crypto_hmac_sha256("Jefe", 4, msg, strlen(msg), mac), 0);
	mac_hex(mac, hex);
	CHECK_STR(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	struct cfs_mac *m = NULL;
	CHECK_EQ(cfs_mac_new("Jefe", 4, &m), 0);
	struct iovec parts[3] = { { (void *)msg, 4 }, { (void *)(msg + 4), 0 },
				  { (void *)(msg + 4), strlen(msg) - 4 } };
	for (int round = 0; round < 2; round++) { /* the keyed state is reusable */
		memset(mac2, 0, sizeof(mac2));
		CHECK_EQ(cfs_mac_sign(m, parts, 3, mac2), 0);
		CHECK(cfs_crypto_equal(mac, mac2, CFS_MAC_LEN));
	}
	mac2[31] ^= 1;
	CHECK(!cfs_crypto_equal(mac, mac2, CFS_MAC_LEN));
	test_hmac_threads(mac);
	cfs_mac_free(m);
	cfs_mac_free(NULL);
	CHECK_EQ(cfs_mac_new("", 0, &m), -EINVAL);
	CHECK(m == NULL);
}

int main(void)
{
	test_hmac();
	char hex[65];
	hex_of("md5", "abc", hex);
	CHECK_STR(hex, "900150983cd24fb0d6963f7d28e17f72");
	hex_of("sha256", "abc", hex);
	CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	struct cfs_digest *d;
	CHECK(cfs_digest_new("nosuchalg", &d) != 0);

	unsigned char *sig;
	size_t slen;
	struct cfs_key *k = NULL;
	CHECK_EQ(cfs_crypto_key_load(test_key, &k), 0);
	CHECK_EQ(cfs_crypto_rs256(k, "hello.jwt", 9, &sig, &slen), 0);
	CHECK_EQ(slen, 128);
	char got[2 * 128 + 1];
	for (size_t i = 0; i < slen && i < 128; i++)
		snprintf(got + 2 * i, 3, "%02x", sig[i]);
	CHECK_STR(got, want_sig);
	free(sig);
	cfs_crypto_key_free(k);
	CHECK_EQ(cfs_crypto_key_load("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n",
				     &k), -EINVAL);
	CHECK(k == NULL);
	/* a passphrase is never asked for (the default callback prompts on the tty) */
	CHECK_EQ(cfs_crypto_key_load(encrypted_key, &k), -ENOKEY);
	CHECK(k == NULL);
	cfs_crypto_key_free(NULL);
	return check_done("test_crypto");
}
