/* Unit tests (pure, no server): the shared cache tier's authenticated
 * values (tiered.h, format 2: "CFB2", HMAC-SHA256 under a deployment key)
 * and the key file's checks (secret.h, tiercfg.h).
 *
 * Values: a value round-trips; every single tampered byte (header, MAC,
 * data), a tampered identity (file id, revision, block number, block size),
 * a value made under another key, a truncated or oversized one, garbage, an
 * unkeyed (format 1) value seen by a keyed mount and a keyed one seen by an
 * unkeyed mount are each refused with their verdict -- never OK; an attacker
 * without the key who recomputes what he can (a format 1 crc) gets nowhere.
 * Key files: 0600 accepted, 0644 / 0640 / 0620 / 0602 refused with a
 * message that says why and what to do; a symlink to a 0600 file accepted
 * (what is checked is the file read), to a 0644 one refused; a folder, a
 * FIFO, a missing file, a short key (31 bytes, or 32 counting its newline)
 * refused; 32 bytes plus a newline accepted, and the newline is not key
 * material; the credentials file's rule (warn, not refuse) kept. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "crc32c.h"
#include "err.h"
#include "le.h"
#include "log.h"
#include "secret.h"
#include "tiercfg.h"
#include "tiered.h"

#define BS 65536u

static const char KEY_A[] = "0123456789abcdef0123456789abcdef-key-A";
static const char KEY_B[] = "0123456789abcdef0123456789abcdef-key-B";

static struct cfs_tiered_key *key_of(const char *k)
{
	struct cfs_tiered_key *out = NULL;
	CHECK_EQ(cfs_tiered_key_new(k, strlen(k), &out), 0);
	return out;
}

static void test_values(void)
{
	struct cfs_tiered_key *a = key_of(KEY_A), *b = key_of(KEY_B);
	enum { N = 1000 };
	unsigned char data[N], v[CFS_TIERED_HEADER_MAC + N + 8], w[sizeof(v)];
	for (int i = 0; i < N; i++)
		data[i] = (unsigned char)(i * 7 + 3);
	struct cfs_tiered_block blk = { "1FileIdAbC", "0BRevXyz", 5, BS };
	size_t n = CFS_TIERED_HEADER_MAC + N;
	CHECK_EQ(cfs_tiered_header(a), CFS_TIERED_HEADER_MAC);
	CHECK_EQ(cfs_tiered_header(NULL), CFS_TIERED_HEADER);
	CHECK_EQ(cfs_tiered_value_encode(a, &blk, v, data, N), 0);
	CHECK(memcmp(v, "CFB2", 4) == 0);
	CHECK_EQ(cfs_le_get(v + 4, 4), N);
	CHECK_EQ(cfs_le_get(v + 8, 4), BS);
	CHECK(memcmp(v + CFS_TIERED_HEADER_MAC, data, N) == 0);
	CHECK_EQ(cfs_tiered_value_check(a, &blk, v, n, N), CFS_TIERED_OK);
	/* deterministic: the same block, the same value */
	CHECK_EQ(cfs_tiered_value_encode(a, &blk, w, data, N), 0);
	CHECK(memcmp(v, w, n) == 0);

	/* every byte tampered with, one at a time: never OK */
	int ok = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(w, v, n);
		w[i] ^= (unsigned char)(1u << (i % 8));
		ok += cfs_tiered_value_check(a, &blk, w, n, N) == CFS_TIERED_OK;
	}
	CHECK_EQ(ok, 0);
	/* the data changed: forged (the MAC); the key id changed: another key */
	memcpy(w, v, n);
	w[CFS_TIERED_HEADER_MAC + 500] ^= 0x40;
	CHECK_EQ(cfs_tiered_value_check(a, &blk, w, n, N), CFS_TIERED_FORGED);
	memcpy(w, v, n);
	w[12] ^= 1;
	CHECK_EQ(cfs_tiered_value_check(a, &blk, w, n, N), CFS_TIERED_OTHER_KEY);
	memcpy(w, v, n);
	w[30] ^= 1; /* in the MAC */
	CHECK_EQ(cfs_tiered_value_check(a, &blk, w, n, N), CFS_TIERED_FORGED);

	/* a valid value replayed under another identity */
	struct cfs_tiered_block other = blk;
	other.id = "1FileIdAbD";
	CHECK_EQ(cfs_tiered_value_check(a, &other, v, n, N), CFS_TIERED_FORGED);
	other = blk;
	other.rev = "0BRevXyZ";
	CHECK_EQ(cfs_tiered_value_check(a, &other, v, n, N), CFS_TIERED_FORGED);
	other = blk;
	other.index = 6;
	CHECK_EQ(cfs_tiered_value_check(a, &other, v, n, N), CFS_TIERED_FORGED);
	other = blk;
	other.index = 5 + (1ull << 32); /* all 64 bits count */
	CHECK_EQ(cfs_tiered_value_check(a, &other, v, n, N), CFS_TIERED_FORGED);
	other = blk; /* id and revision are length-prefixed: no sliding a byte across */
	other.id = "1FileIdAbC0";
	other.rev = "BRevXyz";
	CHECK_EQ(cfs_tiered_value_check(a, &other, v, n, N), CFS_TIERED_FORGED);
	other = blk;
	other.block_size = BS * 2; /* the header says BS: not this mount's format */
	CHECK_EQ(cfs_tiered_value_check(a, &other, v, n, N), CFS_TIERED_CORRUPT);
	memcpy(w, v, n); /* the header's block size rewritten too: the MAC covers it */
	cfs_le_put(w + 8, BS * 2, 4);
	CHECK_EQ(cfs_tiered_value_check(a, &other, w, n, N), CFS_TIERED_FORGED);

	/* made under another key */
	CHECK_EQ(cfs_tiered_value_check(b, &blk, v, n, N), CFS_TIERED_OTHER_KEY);
	memcpy(w, v, n); /* ... with our key's id pasted in: still no */
	{
		unsigned char vb[sizeof(v)];
		CHECK_EQ(cfs_tiered_value_encode(b, &blk, vb, data, N), 0);
		memcpy(vb + 12, v + 12, 8);
		CHECK_EQ(cfs_tiered_value_check(a, &blk, vb, n, N), CFS_TIERED_FORGED);
	}

	/* truncated, oversized, wrong length, garbage: corrupt, never a crash */
	for (size_t cut = 0; cut < n; cut += (cut < 64 ? 1 : 97))
		CHECK(cfs_tiered_value_check(a, &blk, v, cut, N) != CFS_TIERED_OK);
	CHECK_EQ(cfs_tiered_value_check(a, &blk, v, n - 1, N), CFS_TIERED_CORRUPT);
	memcpy(w, v, n);
	w[n] = 0;
	CHECK_EQ(cfs_tiered_value_check(a, &blk, w, n + 1, N), CFS_TIERED_CORRUPT);
	CHECK_EQ(cfs_tiered_value_check(a, &blk, v, n, N - 1), CFS_TIERED_CORRUPT);
	CHECK_EQ(cfs_tiered_value_check(a, &blk, v, n, N + 1), CFS_TIERED_CORRUPT);
	memcpy(w, v, n); /* a length that claims more than there is */
	cfs_le_put(w + 4, 0xffffffffu, 4);
	CHECK_EQ(cfs_tiered_value_check(a, &blk, w, n, N), CFS_TIERED_CORRUPT);
	CHECK_EQ(cfs_tiered_value_check(a, &blk, "", 0, N), CFS_TIERED_CORRUPT);
	CHECK_EQ(cfs_tiered_value_check(a, &blk, "CFB", 3, N), CFS_TIERED_CORRUPT);
	CHECK_EQ(cfs_tiered_value_check(a, &blk, "CFB2", 4, N), CFS_TIERED_CORRUPT);
	unsigned seed = 12345;
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		w[i] = (unsigned char)(seed >> 16);
	}
	CHECK_EQ(cfs_tiered_value_check(a, &blk, w, n, N), CFS_TIERED_CORRUPT);

	/* an empty block (a zero-byte tail cannot happen, but the format allows it) */
	CHECK_EQ(cfs_tiered_value_encode(a, &blk, w, "", 0), 0);
	CHECK_EQ(cfs_tiered_value_check(a, &blk, w, CFS_TIERED_HEADER_MAC, 0), CFS_TIERED_OK);

	/* an attacker without the key: the real value's bytes changed and what
	 * can be recomputed without it recomputed -- as format 1 (crc32c), the
	 * unkeyed format: refused as unkeyed by a keyed mount */
	unsigned char forged[CFS_TIERED_HEADER + N];
	memcpy(w, v + CFS_TIERED_HEADER_MAC, N);
	w[0] ^= 0xff;
	cfs_tiered_encode(forged, w, N, BS);
	CHECK_EQ(cfs_tiered_value_check(a, &blk, forged, sizeof(forged), N), CFS_TIERED_UNKEYED);
	/* the same value is good to an unkeyed (--shared-cache-trusted) mount:
	 * that is what "trusted" means */
	CHECK_EQ(cfs_tiered_value_check(NULL, &blk, forged, sizeof(forged), N), CFS_TIERED_OK);
	/* an unkeyed mount never takes a keyed value for one of its own */
	CHECK_EQ(cfs_tiered_value_check(NULL, &blk, v, n, N), CFS_TIERED_CORRUPT);
	/* and the unkeyed format still catches accidents */
	forged[CFS_TIERED_HEADER + 3] ^= 1;
	CHECK_EQ(cfs_tiered_value_check(NULL, &blk, forged, sizeof(forged), N), CFS_TIERED_CORRUPT);
	CHECK_EQ(cfs_tiered_value_encode(NULL, &blk, w, data, N), 0);
	CHECK(memcmp(w, "CFB1", 4) == 0);
	CHECK_EQ(cfs_tiered_check(w, CFS_TIERED_HEADER + N, N, BS), 0);

	/* key ids: 16 hex digits, different keys differ */
	char ida[17], idb[17];
	cfs_tiered_key_id(a, ida, sizeof(ida));
	cfs_tiered_key_id(b, idb, sizeof(idb));
	CHECK_EQ(strlen(ida), 16);
	CHECK(strcmp(ida, idb) != 0);
	struct cfs_tiered_key *k = NULL;
	CHECK_EQ(cfs_tiered_key_new(KEY_A, CFS_TIERED_KEY_MIN - 1, &k), -EINVAL);
	CHECK(k == NULL);
	CHECK_EQ(cfs_tiered_key_new(KEY_A, CFS_TIERED_KEY_MIN, &k), 0);
	cfs_tiered_key_free(k);
	cfs_tiered_key_free(NULL);
	cfs_tiered_key_free(a);
	cfs_tiered_key_free(b);
}

/* ---- key files ---- */

static char dir[64];

static const char *path_of(const char *name)
{
	static char p[160];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return p;
}

static void put(const char *name, const char *text, mode_t mode)
{
	const char *p = path_of(name);
	unlink(p);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, text, strlen(text)), (long long)strlen(text));
	close(fd);
	CHECK_EQ(chmod(p, mode), 0);
}

/* cfs_tiercfg_key on a file: its status, the message in why. */
static int key_file(const char *name, char *why, size_t wcap, char id[17])
{
	struct cfs_config c;
	memset(&c, 0, sizeof(c));
	c.shared_cache_key_file = (char *)path_of(name);
	struct cfs_tiered_key *k = NULL;
	why[0] = '\0';
	int rc = cfs_tiercfg_key(&c, &k, why, wcap);
	CHECK(rc ? k == NULL : k != NULL);
	if (k && id)
		cfs_tiered_key_id(k, id, 17);
	cfs_tiered_key_free(k);
	return rc;
}

static void test_key_files(void)
{
	char why[512], id1[17], id2[17];
	const char *key64 = "6f1c0a8f3c3e4b51a2d9e07b44c1f0d2e8a9b7c6d5e4f3a2b1c0d9e8f7a6b5c4";
	snprintf(dir, sizeof(dir), "/tmp/colabfs-test-keyfile-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);

	put("ok", key64, 0600);
	CHECK_EQ(key_file("ok", why, sizeof(why), id1), 0);
	put("ok-nl", "6f1c0a8f3c3e4b51a2d9e07b44c1f0d2e8a9b7c6d5e4f3a2b1c0d9e8f7a6b5c4\n", 0400);
	CHECK_EQ(key_file("ok-nl", why, sizeof(why), id2), 0);
	CHECK_STR(id1, id2); /* the newline is not key material */

	static const mode_t open_modes[] = { 0644, 0640, 0620, 0602, 0660, 0666 };
	for (size_t i = 0; i < sizeof(open_modes) / sizeof(open_modes[0]); i++) {
		put("open", key64, open_modes[i]);
		CHECK_EQ(key_file("open", why, sizeof(why), NULL), CFS_E_CONFIG);
		CHECK(strstr(why, "--shared-cache-key-file") != NULL);
		CHECK(strstr(why, "by other users") != NULL);
		CHECK(strstr(why, "chmod 600") != NULL);
	}
	put("x", key64, 0610); /* execute alone reads nothing */
	CHECK_EQ(key_file("x", why, sizeof(why), NULL), 0);

	/* a symlink: the file it leads to is what is read and checked */
	put("target", key64, 0600);
	char target[160];
	snprintf(target, sizeof(target), "%s", path_of("target"));
	unlink(path_of("link"));
	CHECK_EQ(symlink(target, path_of("link")), 0);
	CHECK_EQ(key_file("link", why, sizeof(why), NULL), 0);
	CHECK_EQ(chmod(path_of("target"), 0644), 0);
	CHECK_EQ(key_file("link", why, sizeof(why), NULL), CFS_E_CONFIG);
	CHECK(strstr(why, "readable by other users") != NULL);

	/* not a regular file, missing */
	CHECK_EQ(key_file("", why, sizeof(why), NULL), CFS_E_CONFIG); /* the folder */
	CHECK(strstr(why, "not a regular file") != NULL);
	unlink(path_of("fifo"));
	CHECK_EQ(mkfifo(path_of("fifo"), 0600), 0);
	CHECK_EQ(key_file("fifo", why, sizeof(why), NULL), CFS_E_CONFIG); /* and no hang */
	CHECK(strstr(why, "not a regular file") != NULL);
	CHECK_EQ(key_file("missing", why, sizeof(why), NULL), CFS_E_CONFIG);
	CHECK(strstr(why, "cannot open") != NULL);

	/* too short: 31 bytes; 31 and a newline; empty */
	put("short", "0123456789abcdef0123456789abcde", 0600);
	CHECK_EQ(key_file("short", why, sizeof(why), NULL), CFS_E_CONFIG);
	CHECK(strstr(why, "too short") != NULL && strstr(why, "at least 32") != NULL);
	put("short-nl", "0123456789abcdef0123456789abcde\n", 0600);
	CHECK_EQ(key_file("short-nl", why, sizeof(why), NULL), CFS_E_CONFIG);
	put("empty", "", 0600);
	CHECK_EQ(key_file("empty", why, sizeof(why), NULL), CFS_E_CONFIG);
	put("32", "0123456789abcdef0123456789abcdef", 0600);
	CHECK_EQ(key_file("32", why, sizeof(why), NULL), 0);
	/* too large (a key file is small) */
	{
		char big[5000];
		memset(big, 'k', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		put("big", big, 0600);
		CHECK_EQ(key_file("big", why, sizeof(why), NULL), CFS_E_CONFIG);
		CHECK(strstr(why, "too large") != NULL);
	}

	/* no key file named: no key, no error */
	struct cfs_config c;
	memset(&c, 0, sizeof(c));
	struct cfs_tiered_key *k = (struct cfs_tiered_key *)&c;
	CHECK_EQ(cfs_tiercfg_key(&c, &k, why, sizeof(why)), 0);
	CHECK(k == NULL);

	/* the credentials file's rule stays a warning: read, not refused */
	char *txt = NULL;
	size_t len = 0;
	put("creds", "{}", 0644);
	CHECK_EQ(cfs_secret_read(path_of("creds"), "credentials file", 65536, 0, &txt, &len, why,
				 sizeof(why)), 0);
	CHECK(txt && len == 2 && strcmp(txt, "{}") == 0);
	free(txt);
	CHECK_EQ(cfs_secret_read(path_of("creds"), "credentials file", 65536, CFS_SECRET_PRIVATE,
				 &txt, &len, why, sizeof(why)), CFS_E_CONFIG);
	CHECK(txt == NULL);

	const char *names[] = { "ok", "ok-nl", "open", "x", "target", "link", "fifo", "short",
				"short-nl", "empty", "32", "big", "creds" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unlink(path_of(names[i]));
	CHECK_EQ(rmdir(dir), 0);
}

/* The mount's rule: --shared-cache needs a key file or --shared-cache-trusted;
 * doctor (CFS_CONFIG_DIAGNOSE) parses it to report it. */
static void test_config_rule(void)
{
	struct cfs_config c;
	char why[512];
	char *plain[] = { "--shared-cache=redis://127.0.0.1:7000", "/mnt/x" };
	CHECK_EQ(cfs_config_parse(2, plain, &c, why, sizeof(why)), CFS_E_CONFIG);
	CHECK(strstr(why, "--shared-cache-key-file") && strstr(why, "--shared-cache-trusted"));
	cfs_config_cleanup(&c);
	CHECK_EQ(cfs_config_parse_flags(1, plain, CFS_CONFIG_NO_MOUNTPOINT | CFS_CONFIG_DIAGNOSE, &c,
					why, sizeof(why)), 0);
	cfs_config_cleanup(&c);
	char *trusted[] = { "--shared-cache=redis://127.0.0.1:7000", "--shared-cache-trusted",
			    "/mnt/x" };
	CHECK_EQ(cfs_config_parse(3, trusted, &c, why, sizeof(why)), 0);
	CHECK_EQ(c.shared_cache_trusted, 1);
	cfs_config_cleanup(&c);
	char *keyed[] = { "--shared-cache=redis://127.0.0.1:7000",
			  "--shared-cache-key-file=/etc/colabfs/key", "/mnt/x" };
	CHECK_EQ(cfs_config_parse(3, keyed, &c, why, sizeof(why)), 0);
	CHECK_STR(c.shared_cache_key_file, "/etc/colabfs/key");
	cfs_config_cleanup(&c);
}

int main(void)
{
	cfs_log_set_level(CFS_LOG_ERROR);
	test_values();
	test_key_files();
	test_config_rule();
	return check_done("test_tier_value");
}
