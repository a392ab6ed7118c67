/* hist: the counters' history ring and its wire pages (see hist.h). */
#include "hist.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "json.h"

#define F(w, n, m) { w, n, offsetof(struct cfs_hist_sample, m), 0 }
const struct cfs_hist_field cfs_hist_fields[CFS_HIST_NFIELDS] = {
	{ "t_ms", "t", offsetof(struct cfs_hist_sample, t_ms), 1 },
	F("read_bytes", "read_bytes", read_bytes),
	F("drive_bytes", "drive_bytes", drive_bytes),
	F("drive_requests", "drive_requests", drive_requests),
	{ "api_rate_milli", "api_rate", offsetof(struct cfs_hist_sample, api_rate_milli), 1 },
	F("cache_hits", "cache_hits", cache_hits),
	F("cache_misses", "cache_misses", cache_misses),
	F("uploads_pending", "uploads_pending", uploads_pending),
	F("upload_bytes", "upload_bytes", upload_bytes),
	F("upload_bytes_left", "upload_bytes_left", upload_bytes_left),
};
#undef F

void cfs_hist_init(struct cfs_hist *h)
{
	memset(h, 0, sizeof(*h));
}

uint64_t cfs_hist_oldest(const struct cfs_hist *h)
{
	return h->end > CFS_HIST_LEN ? h->end - CFS_HIST_LEN : 0;
}

const struct cfs_hist_sample *cfs_hist_get(const struct cfs_hist *h, uint64_t seq)
{
	if (seq < cfs_hist_oldest(h) || seq >= h->end)
		return NULL;
	return &h->s[seq % CFS_HIST_LEN];
}

int cfs_hist_push(struct cfs_hist *h, const struct cfs_hist_sample *s, uint64_t t_ms)
{
	const struct cfs_hist_sample *last = h->end ? cfs_hist_get(h, h->end - 1) : NULL;
	if (last && t_ms <= last->t_ms)
		return -EINVAL;
	struct cfs_hist_sample *slot = &h->s[h->end % CFS_HIST_LEN];
	*slot = *s;
	slot->t_ms = t_ms;
	h->end++;
	return 0;
}

uint64_t cfs_hist_since(const struct cfs_hist *h, uint64_t t_ms)
{
	uint64_t lo = cfs_hist_oldest(h), hi = h->end;
	while (lo < hi) { /* times increase with the sequence number */
		uint64_t mid = lo + (hi - lo) / 2;
		if (cfs_hist_get(h, mid)->t_ms < t_ms)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int64_t cfs_hist_next_due(int64_t due_ms, int64_t now_ms, int64_t interval_ms)
{
	int64_t next = due_ms + interval_ms;
	return now_ms >= next ? now_ms + interval_ms : next; /* late: a new grid from now */
}

static int sample_line(const struct cfs_hist_sample *s, char *line, size_t cap)
{
	size_t n = 0;
	for (size_t f = 0; f < CFS_HIST_NFIELDS && n < cap; f++)
		n += (size_t)snprintf(line + n, cap - n, "%s\"%s\":%" PRIu64, f ? "," : "{",
				      cfs_hist_fields[f].wire, cfs_hist_value(s, f));
	if (n < cap)
		n += (size_t)snprintf(line + n, cap - n, "}\n");
	return n < cap ? (int)n : -ENOSPC;
}

static int head_line(char *head, size_t cap, uint64_t from, uint64_t next, uint64_t end)
{
	return snprintf(head, cap, "{\"interval_s\":%d,\"from\":%" PRIu64 ",\"next\":%" PRIu64
			",\"end\":%" PRIu64 "}\n", CFS_HIST_INTERVAL_MS / 1000, from, next, end);
}

int cfs_hist_page(const struct cfs_hist *h, uint64_t from, size_t max, struct cfs_buf *out)
{
	char head[160], line[CFS_HIST_NFIELDS * 48];
	struct cfs_buf body = { 0 };
	uint64_t seq = from > cfs_hist_oldest(h) ? from : cfs_hist_oldest(h), first = seq;
	/* from <= next <= end: the header never takes more digits than this */
	size_t hn = (size_t)head_line(head, sizeof(head), h->end, h->end, h->end);
	int rc = 0;
	for (; !rc && seq < h->end; seq++) {
		int n = sample_line(cfs_hist_get(h, seq), line, sizeof(line));
		if (n < 0 || hn + body.len + (size_t)n + 1 > max)
			break;
		rc = cfs_buf_append(&body, line, (size_t)n);
	}
	if (!rc && (hn + 1 > max || (seq == first && seq < h->end)))
		rc = -ENOSPC;
	if (!rc) {
		hn = (size_t)head_line(head, sizeof(head), first, seq, h->end);
		rc = cfs_buf_append(out, head, hn);
	}
	if (!rc && body.len)
		rc = cfs_buf_append(out, body.data, body.len);
	cfs_buf_cleanup(&body);
	return rc;
}

/* ---- reading a page --------------------------------------------------------- */

struct parsed {
	uint64_t v[CFS_HIST_NFIELDS];
	unsigned seen; /* bit per field */
	const char *const *names;
	size_t n;
};

static int take(const char *name, int64_t v, void *arg)
{
	struct parsed *p = arg;
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(name, p->names[i]) == 0) {
			if (v < 0)
				return CFS_E_PROTO;
			p->v[i] = (uint64_t)v;
			p->seen |= 1u << i;
		}
	return 0;
}

/* One line (len bytes at txt) into p; fields named in names[0..n). */
static int parse_line(const char *txt, size_t len, const char *const *names, size_t n,
		      struct parsed *p)
{
	memset(p, 0, sizeof(*p));
	p->names = names;
	p->n = n;
	return cfs_json_flat_ints(txt, len, take, p);
}

int cfs_hist_parse_page(const char *txt, struct cfs_hist *h, uint64_t *next, uint64_t *end)
{
	static const char *const head[] = { "interval_s", "from", "next", "end" };
	const char *wire[CFS_HIST_NFIELDS];
	for (size_t f = 0; f < CFS_HIST_NFIELDS; f++)
		wire[f] = cfs_hist_fields[f].wire;
	struct parsed p;
	const char *nl = strchr(txt, '\n');
	size_t len = nl ? (size_t)(nl - txt) : strlen(txt);
	int rc = parse_line(txt, len, head, 4, &p);
	if (rc)
		return rc == -ENOMEM ? rc : CFS_E_PROTO;
	if (p.seen != 0xfu || p.v[2] < p.v[1] || p.v[3] < p.v[2])
		return CFS_E_PROTO;
	*next = p.v[2];
	*end = p.v[3];
	for (txt += len; *txt == '\n'; txt += len) {
		txt++;
		nl = strchr(txt, '\n');
		len = nl ? (size_t)(nl - txt) : strlen(txt);
		if (!len)
			continue;
		if ((rc = parse_line(txt, len, wire, CFS_HIST_NFIELDS, &p)))
			return rc == -ENOMEM ? rc : CFS_E_PROTO;
		struct cfs_hist_sample s;
		for (size_t f = 0; f < CFS_HIST_NFIELDS; f++)
			*(uint64_t *)((char *)&s + cfs_hist_fields[f].off) = p.v[f];
		if (!(p.seen & 1u) || cfs_hist_push(h, &s, s.t_ms))
			return CFS_E_PROTO;
	}
	return *txt ? CFS_E_PROTO : 0;
}
