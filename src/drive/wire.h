/* wire: pure encoders and parsers for what crosses the HTTP wire.
 *
 * URL percent-encoding, Drive query-string literals, Content-Range and
 * Retry-After.  No I/O, no allocation except where a function says so; every
 * parser rejects anything it does not fully understand (-EINVAL) rather than
 * guessing, because a misread header would mean serving wrong bytes. */
#ifndef CFS_WIRE_H
#define CFS_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "buf.h"

/* Appends s percent-encoded (RFC 3986 unreserved characters kept) to b.
 * Returns 0 or -ENOMEM. */
int cfs_wire_urlencode(struct cfs_buf *b, const char *s);

/* Appends s as the body of a Drive q string literal: ' -> \' and \ -> \\.
 * The quotes themselves are not added.  Returns 0 or -ENOMEM. */
int cfs_wire_qliteral(struct cfs_buf *b, const char *s);

/* Parses a Content-Range value.  "bytes A-B/T" sets *start=A, *end=B (inclusive),
 * *total=T (or -1 for "*"); "bytes * /T" (no space) sets *start=*end=-1.  Returns 0, or
 * -EINVAL for anything else (missing unit, B < A, B >= T, junk, overflow). */
int cfs_wire_content_range(const char *v, int64_t *start, int64_t *end, int64_t *total);

/* Parses an upload session's Range reply header (drive-api-v3.md §6):
 * "bytes=0-N" sets *next = N+1, "" (no header: nothing persisted) 0.
 * Returns 0 or -EINVAL. */
int cfs_wire_upload_range(const char *v, int64_t *next);

/* Parses an HTTP date, the IMF-fixdate of Date and Retry-After
 * ("Sun, 06 Nov 1994 08:49:37 GMT"), into *out (seconds since the epoch).
 * Returns 0 or -EINVAL. */
int cfs_wire_http_date(const char *v, time_t *out);

/* Parses Retry-After: delta-seconds or an IMF-fixdate, relative to now.
 * Returns the wait in milliseconds (>= 0), or -EINVAL. */
int64_t cfs_wire_retry_after(const char *v, time_t now);

/* Whether secrets may be sent to url: https://HOST..., or http:// to this
 * machine (localhost, [::1], 127.x.y.z).  Returns 0, -EPERM for plain http
 * to another host, or -EINVAL for no http(s) URL at all. */
int cfs_wire_url_check(const char *url);

/* The length of url's origin, "scheme://authority" (everything before the
 * path, query or fragment): "https://h:443/token" gives 13.  Returns 0 when
 * url has no scheme or no authority. */
size_t cfs_wire_url_origin(const char *url);

/* Drive's newer per-user quota counts units, not calls (drive-api-v3.md §4:
 * Cloud projects created since 2026-05-01): a download (alt=media, an
 * export) 200, a list (files, changes, drives) 100, a change (PATCH, DELETE,
 * a create, an upload started or sent whole) 50, anything else 5 (a get,
 * about, a start token, generateIds, a chunk sent to an upload session).
 * The most one call costs is CFS_WIRE_UNITS_MAX. */
#define CFS_WIRE_UNITS_MAX 200
/* The units of a call of method (NULL: GET) to url (absolute, as sent). */
int cfs_wire_quota_units(const char *method, const char *url);

#endif
