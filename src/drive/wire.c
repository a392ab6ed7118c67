/* wire: pure encoders and parsers for HTTP headers and URLs (see wire.h). */
#define _GNU_SOURCE
#include "wire.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

static int unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

int cfs_wire_urlencode(struct cfs_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char enc[3];
		int rc;
		if (unreserved(*p)) {
			rc = cfs_buf_append(b, p, 1);
		} else {
			enc[0] = '%';
			enc[1] = hex[*p >> 4];
			enc[2] = hex[*p & 15];
			rc = cfs_buf_append(b, enc, 3);
		}
		if (rc)
			return rc;
	}
	return 0;
}

int cfs_wire_qliteral(struct cfs_buf *b, const char *s)
{
	for (const char *p = s; *p; p++) {
		int rc;
		if (*p == '\'' || *p == '\\')
			rc = cfs_buf_append(b, "\\", 1);
		else
			rc = 0;
		if (rc || (rc = cfs_buf_append(b, p, 1)))
			return rc;
	}
	return 0;
}

/* Parses a run of decimal digits into *out; returns the end or NULL. */
static const char *parse_u63(const char *p, int64_t *out)
{
	if (*p < '0' || *p > '9')
		return NULL;
	int64_t v = 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (INT64_MAX - 9) / 10)
			return NULL;
		v = v * 10 + (*p - '0');
	}
	*out = v;
	return p;
}

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

int cfs_wire_upload_range(const char *v, int64_t *next)
{
	const char *p = skip_ws(v);
	int64_t b;
	if (*p == '\0') { /* no Range header: nothing persisted */
		*next = 0;
		return 0;
	}
	if (strncasecmp(p, "bytes=0-", 8) != 0 || !(p = parse_u63(p + 8, &b)) ||
	    b == INT64_MAX || *skip_ws(p) != '\0')
		return -EINVAL;
	*next = b + 1;
	return 0;
}

int cfs_wire_content_range(const char *v, int64_t *start, int64_t *end, int64_t *total)
{
	const char *p = skip_ws(v);
	if (strncasecmp(p, "bytes", 5) != 0)
		return -EINVAL;
	p += 5;
	if (*p != ' ' && *p != '\t')
		return -EINVAL;
	p = skip_ws(p);
	int64_t a = -1, b = -1, t = -1;
	if (*p == '*') {
		p++;
	} else {
		if (!(p = parse_u63(p, &a)) || *p++ != '-' || !(p = parse_u63(p, &b)) || b < a)
			return -EINVAL;
	}
	if (*p++ != '/')
		return -EINVAL;
	if (*p == '*') {
		if (a < 0) /* a star for both range and total says nothing */
			return -EINVAL;
		p++;
	} else if (!(p = parse_u63(p, &t))) {
		return -EINVAL;
	}
	p = skip_ws(p);
	if (*p != '\0')
		return -EINVAL;
	if (a >= 0 && t >= 0 && b >= t)
		return -EINVAL;
	*start = a;
	*end = b;
	*total = t;
	return 0;
}

int cfs_wire_http_date(const char *v, time_t *out)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *e = strptime(skip_ws(v), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (!e || *skip_ws(e) != '\0')
		return -EINVAL;
	*out = timegm(&tm);
	return 0;
}

int64_t cfs_wire_retry_after(const char *v, time_t now)
{
	const char *p = skip_ws(v);
	int64_t secs;
	const char *e = parse_u63(p, &secs);
	if (e) {
		if (*skip_ws(e) != '\0' || secs > 86400 * 7)
			return -EINVAL;
		return secs * 1000;
	}
	time_t when;
	if (cfs_wire_http_date(p, &when))
		return -EINVAL;
	if (when <= now)
		return 0;
	if (when - now > 86400 * 7)
		return -EINVAL;
	return (int64_t)(when - now) * 1000;
}

/* The host part of an http(s) URL after the scheme: [v6] or name, without
 * userinfo or port. */
static size_t url_host(const char *p, const char **host)
{
	const char *end = p + strcspn(p, "/?#");
	const char *at = memchr(p, '@', (size_t)(end - p));
	if (at)
		p = at + 1;
	*host = p;
	if (*p == '[') {
		const char *rb = memchr(p, ']', (size_t)(end - p));
		return rb ? (size_t)(rb - p + 1) : 0;
	}
	const char *colon = memchr(p, ':', (size_t)(end - p));
	return (size_t)((colon ? colon : end) - p);
}

static int host_is(const char *h, size_t n, const char *name)
{
	return strlen(name) == n && strncasecmp(h, name, n) == 0;
}

int cfs_wire_url_check(const char *url)
{
	if (strncasecmp(url, "https://", 8) == 0)
		return url[8] && !strchr("/?#", url[8]) ? 0 : -EINVAL;
	if (strncasecmp(url, "http://", 7) != 0)
		return -EINVAL;
	const char *h;
	size_t n = url_host(url + 7, &h);
	if (!n)
		return -EINVAL;
	if (host_is(h, n, "localhost") || host_is(h, n, "[::1]"))
		return 0;
	/* 127.0.0.0/8, written out in dotted decimal */
	if (n < 9 || n > 15 || strncmp(h, "127.", 4) != 0)
		return -EPERM;
	int dots = 0, digits = 0;
	for (size_t i = 4; i < n; i++) {
		if (h[i] == '.' && digits) {
			dots++;
			digits = 0;
		} else if (h[i] >= '0' && h[i] <= '9' && ++digits <= 3) {
			continue;
		} else {
			return -EPERM;
		}
	}
	return dots == 2 && digits ? 0 : -EPERM;
}

size_t cfs_wire_url_origin(const char *url)
{
	/* a scheme is letters, digits, + - . (RFC 3986), and then "://" */
	size_t n = strspn(url, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.");
	if (!n || strncmp(url + n, "://", 3) != 0)
		return 0;
	n += 3;
	size_t host = strcspn(url + n, "/?#");
	return host ? n + host : 0;
}

/* Whether the query string q (after '?', may be NULL) holds the parameter
 * pair ("name=value", or "name=" for any value). */
static int query_has(const char *q, const char *pair)
{
	size_t n = strlen(pair);
	for (const char *p = q; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL)
		if (strncmp(p, pair, n) == 0 &&
		    (pair[n - 1] == '=' || p[n] == '&' || p[n] == '\0'))
			return 1;
	return 0;
}

int cfs_wire_quota_units(const char *method, const char *url)
{
	const char *m = method ? method : "GET";
	const char *path = url + cfs_wire_url_origin(url), *q = strchr(path, '?');
	size_t plen = q ? (size_t)(q - path) : strlen(path);
	q = q ? q + 1 : NULL;
	/* after any prefix of the API's address */
	const char *up = strstr(path, "/upload/drive/v3/"), *api = strstr(path, "/drive/v3/");
	if (up && up < path + plen)
		return query_has(q, "upload_id=") ? 5 : 50; /* a session's chunk: its start paid */
	if (!api || api >= path + plen)
		return 5;
	plen -= (size_t)(api - path);
	path = api;
	if (strcmp(m, "PATCH") == 0 || strcmp(m, "DELETE") == 0 ||
	    (strcmp(m, "POST") == 0 && plen == 15 && strncmp(path, "/drive/v3/files", 15) == 0))
		return 50;
	if (strcmp(m, "GET") != 0)
		return 5;
	if (query_has(q, "alt=media") || (plen > 7 && strncmp(path + plen - 7, "/export", 7) == 0))
		return 200;
	static const char *const lists[] = { "/drive/v3/files", "/drive/v3/changes",
					     "/drive/v3/drives" };
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		if (plen == strlen(lists[i]) && strncmp(path, lists[i], plen) == 0)
			return 100;
	return 5;
}
