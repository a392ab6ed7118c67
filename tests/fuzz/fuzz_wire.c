/* Fuzz harness: the HTTP header parsers and URL encoders of src/drive/wire.c
 * (libFuzzer).  The first input byte picks the function ('0' Content-Range,
 * '1' Retry-After, '2' URL encoding and q literal), the rest (up to the first
 * NUL) is the string.  Asserted: a Content-Range that parses is
 * consistent and prints back to the same numbers; a Retry-After wait is
 * within a week; percent-encoding and q-literal escaping decode back to the
 * input and leave no character that would end the URL or literal. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "wire.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1; /* we emit upper case only */
}

static int unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

static void check_content_range(const char *s)
{
	int64_t a = 7, b = 7, t = 7;
	if (cfs_wire_content_range(s, &a, &b, &t) != 0)
		return;
	assert(t >= -1);
	if (a == -1) { /* a star range: only the total is known */
		assert(b == -1 && t >= 0);
	} else {
		assert(a >= 0 && a <= b);
		if (t >= 0)
			assert(b < t);
	}
	/* the canonical form parses back to the same values */
	char canon[96];
	if (a == -1)
		snprintf(canon, sizeof(canon), "bytes */%" PRId64, t);
	else if (t == -1)
		snprintf(canon, sizeof(canon), "bytes %" PRId64 "-%" PRId64 "/*", a, b);
	else
		snprintf(canon, sizeof(canon), "bytes %" PRId64 "-%" PRId64 "/%" PRId64, a, b, t);
	int64_t a2, b2, t2;
	assert(cfs_wire_content_range(canon, &a2, &b2, &t2) == 0);
	assert(a2 == a && b2 == b && t2 == t);
}

static void check_retry_after(const char *s)
{
	const time_t nows[] = { 0, 1714566896, 4102444800 /* 2100 */ };
	for (size_t i = 0; i < sizeof(nows) / sizeof(nows[0]); i++) {
		int64_t ms = cfs_wire_retry_after(s, nows[i]);
		assert(ms == -EINVAL || (ms >= 0 && ms <= 86400LL * 7 * 1000));
	}
}

static void check_urlencode(const char *s)
{
	struct cfs_buf b = { 0 };
	int rc = cfs_wire_urlencode(&b, s);
	assert(rc == 0);
	size_t n = strlen(s);
	if (n == 0) {
		assert(b.len == 0);
		cfs_buf_cleanup(&b);
		return;
	}
	assert(b.data && strlen(b.data) == b.len);
	char *dec = malloc(b.len + 1);
	assert(dec);
	size_t o = 0;
	for (size_t i = 0; i < b.len; i++) {
		unsigned char c = (unsigned char)b.data[i];
		if (c == '%') {
			assert(i + 2 < b.len);
			int hi = hexval(b.data[i + 1]), lo = hexval(b.data[i + 2]);
			assert(hi >= 0 && lo >= 0);
			unsigned char v = (unsigned char)(hi << 4 | lo);
			assert(!unreserved(v)); /* unreserved characters stay literal */
			dec[o++] = (char)v;
			i += 2;
		} else {
			assert(unreserved(c));
			dec[o++] = (char)c;
		}
	}
	assert(o == n && memcmp(dec, s, n) == 0);
	free(dec);
	cfs_buf_cleanup(&b);
}

static void check_qliteral(const char *s)
{
	struct cfs_buf b = { 0 };
	int rc = cfs_wire_qliteral(&b, s);
	assert(rc == 0);
	size_t n = strlen(s), o = 0;
	if (n == 0) {
		assert(b.len == 0);
		cfs_buf_cleanup(&b);
		return;
	}
	assert(b.data && strlen(b.data) == b.len);
	char *dec = malloc(b.len + 1);
	assert(dec);
	for (size_t i = 0; i < b.len; i++) {
		char c = b.data[i];
		assert(c != '\''); /* a bare quote would end the literal */
		if (c == '\\') {
			assert(i + 1 < b.len);
			c = b.data[++i];
			assert(c == '\\' || c == '\'');
		}
		dec[o++] = c;
	}
	assert(o == n && memcmp(dec, s, n) == 0);
	free(dec);
	cfs_buf_cleanup(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	/* a NUL-terminated heap copy of exactly the string's size */
	size_t len = size - 1;
	const void *nul = memchr(data + 1, 0, len);
	if (nul)
		len = (size_t)((const uint8_t *)nul - (data + 1));
	char *s = malloc(len + 1);
	if (!s)
		return 0;
	memcpy(s, data + 1, len);
	s[len] = '\0';
	switch ((uint8_t)(data[0] - '0') % 3) { /* "0".."2" in the seeds */
	case 0:
		check_content_range(s);
		break;
	case 1:
		check_retry_after(s);
		break;
	case 2:
		check_urlencode(s);
		check_qliteral(s);
		break;
	}
	free(s);
	return 0;
}
