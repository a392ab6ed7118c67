/* lrow: stored listing rows (see lrow.h for the layout). */
#include "lrow.h"

#include <errno.h>
#include <string.h>

#include "err.h"
#include "le.h"
#include "rowio.h" /* strings: u16 length + bytes, the project's row codec */

#define MAGIC 0x324c4643u /* "CFL2" */
#define NSTR 7
#define STR_MAX 1023

static int put(struct cfs_buf *b, const void *p, size_t n)
{
	return cfs_buf_append(b, p, n);
}

static int put_u64(struct cfs_buf *b, uint64_t v)
{
	unsigned char x[8];
	cfs_le_put(x, v, 8);
	return put(b, x, 8);
}

int cfs_lrow_encode(const struct cfs_lrow_entry *e, size_t n, int64_t fetched_ms,
		    struct cfs_buf *out)
{
	unsigned char hdr[4] = { MAGIC & 0xff, (MAGIC >> 8) & 0xff, (MAGIC >> 16) & 0xff,
				 MAGIC >> 24 };
	unsigned char cnt[4] = { (unsigned char)n, (unsigned char)(n >> 8),
				 (unsigned char)(n >> 16), (unsigned char)(n >> 24) };
	int rc = put(out, hdr, 4);
	if (!rc)
		rc = put_u64(out, (uint64_t)fetched_ms);
	if (!rc)
		rc = put(out, cnt, 4);
	for (size_t i = 0; !rc && i < n; i++) {
		unsigned char d = e[i].is_dir ? 1 : 0;
		rc = put_u64(out, e[i].ino);
		if (!rc)
			rc = put(out, &d, 1);
		if (!rc)
			rc = put_u64(out, (uint64_t)e[i].size);
		if (!rc)
			rc = put_u64(out, (uint64_t)e[i].mtime_ns);
		if (!rc)
			rc = put_u64(out, (uint64_t)e[i].ctime_ns);
		const char *s[NSTR] = { e[i].name, e[i].id, e[i].content_id, e[i].rev,
					e[i].export_mime, e[i].md5, e[i].sha256 };
		for (int k = 0; !rc && k < NSTR; k++)
			rc = cfs_row_put_str(out, s[k] ? s[k] : "", STR_MAX + 1);
	}
	return rc;
}

struct rd {
	const unsigned char *p, *end;
};

static int get_u64(struct rd *r, uint64_t *v)
{
	if (r->end - r->p < 8)
		return CFS_E_PROTO;
	*v = cfs_le_get(r->p, 8);
	r->p += 8;
	return 0;
}

/* Copies a string into scratch (NUL-terminated) and advances. */
static int get_str(struct rd *r, char **scratch, char *scratch_end, const char **out)
{
	int rc = cfs_row_get_str(&r->p, r->end, *scratch, (size_t)(scratch_end - *scratch));
	if (rc)
		return rc;
	*out = *scratch;
	*scratch += strlen(*scratch) + 1;
	return 0;
}

int cfs_lrow_decode(const void *row, size_t len, int64_t *fetched_ms, size_t *n, cfs_lrow_cb cb,
		    void *arg)
{
	struct rd r = { row, (const unsigned char *)row + len };
	uint64_t f = 0;
	if (len < 16 || (r.p[0] | r.p[1] << 8 | r.p[2] << 16 | (uint32_t)r.p[3] << 24) != MAGIC)
		return CFS_E_PROTO;
	r.p += 4;
	get_u64(&r, &f);
	uint32_t cnt = r.p[0] | r.p[1] << 8 | r.p[2] << 16 | (uint32_t)r.p[3] << 24;
	r.p += 4;
	/* an entry takes at least 47 bytes: refuse counts the row cannot hold */
	if (cnt > (size_t)(r.end - r.p) / 47)
		return CFS_E_PROTO;
	*fetched_ms = (int64_t)f;
	*n = cnt;
	char scratch[NSTR * (STR_MAX + 1)];
	for (uint32_t i = 0; i < cnt; i++) {
		struct cfs_lrow_entry e;
		uint64_t sz, mt, ct;
		char *s = scratch;
		if (get_u64(&r, &e.ino) || r.p >= r.end)
			return CFS_E_PROTO;
		e.is_dir = *r.p++ != 0;
		if (get_u64(&r, &sz) || get_u64(&r, &mt) || get_u64(&r, &ct))
			return CFS_E_PROTO;
		e.size = (int64_t)sz;
		e.mtime_ns = (int64_t)mt;
		e.ctime_ns = (int64_t)ct;
		const char **dst[NSTR] = { &e.name,	   &e.id,  &e.content_id, &e.rev,
					   &e.export_mime, &e.md5, &e.sha256 };
		for (int k = 0; k < NSTR; k++)
			if (get_str(&r, &s, scratch + sizeof(scratch), dst[k]))
				return CFS_E_PROTO;
		if (!e.ino || !*e.name || !*e.id)
			return CFS_E_PROTO;
		int rc = cb(&e, arg);
		if (rc)
			return rc;
	}
	return r.p == r.end ? 0 : CFS_E_PROTO;
}
