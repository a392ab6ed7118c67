/* Fuzz harness: the stored-listing row format of src/core/lrow.c (libFuzzer).
 *
 * First byte even: the rest is decoded as a row (as if read back from a
 * damaged cache index): it must never crash, every entry handed out must be
 * well formed, and the count must match.  First byte odd: the rest describes
 * listing entries, which are encoded, decoded and compared with the
 * originals; every proper prefix of the row must then be refused. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "lrow.h"

#define NSTR 7
#define STR_MAX 1023
#define MAX_ENTRIES 32

static volatile size_t sink;

struct dec_state {
	size_t seen;
	const struct cfs_lrow_entry *want; /* NULL: only check well-formedness */
	size_t nwant;
};

static const char *field(const struct cfs_lrow_entry *e, int k)
{
	const char *s[NSTR] = { e->name, e->id, e->content_id, e->rev,
				e->export_mime, e->md5, e->sha256 };
	return s[k];
}

static int dec_cb(const struct cfs_lrow_entry *e, void *arg)
{
	struct dec_state *st = arg;
	assert(e->ino != 0);
	assert(e->is_dir == 0 || e->is_dir == 1);
	assert(e->name[0] != '\0' && e->id[0] != '\0');
	for (int k = 0; k < NSTR; k++) {
		const char *s = field(e, k);
		assert(s);
		sink += strlen(s);
	}
	if (st->want) {
		assert(st->seen < st->nwant);
		const struct cfs_lrow_entry *w = &st->want[st->seen];
		assert(e->ino == w->ino && e->is_dir == w->is_dir && e->size == w->size &&
		       e->mtime_ns == w->mtime_ns && e->ctime_ns == w->ctime_ns);
		for (int k = 0; k < NSTR; k++) {
			const char *ws = field(w, k);
			assert(strcmp(field(e, k), ws ? ws : "") == 0);
		}
	}
	st->seen++;
	return 0;
}

/* A little cursor over the input for building entries. */
struct src {
	const uint8_t *p, *end;
};

static uint64_t take_u64(struct src *s, size_t nbytes)
{
	uint64_t v = 0;
	for (size_t i = 0; i < nbytes && s->p < s->end; i++)
		v = v << 8 | *s->p++;
	return v;
}

/* A string of a length from the input (at most STR_MAX + 8, so the encoder's
 * limit is exercised too); NUL bytes become 'x'. */
static char *take_str(struct src *s, int nonempty)
{
	size_t n = (size_t)(take_u64(s, 2) % (STR_MAX + 9));
	if (n > (size_t)(s->end - s->p))
		n = (size_t)(s->end - s->p);
	if (nonempty && n == 0) {
		char *x = strdup("n");
		assert(x);
		return x;
	}
	char *out = malloc(n + 1);
	assert(out);
	for (size_t i = 0; i < n; i++)
		out[i] = s->p[i] ? (char)s->p[i] : 'x';
	out[n] = '\0';
	s->p += n;
	return out;
}

static void round_trip(const uint8_t *data, size_t size)
{
	struct src s = { data, data + size };
	struct cfs_lrow_entry e[MAX_ENTRIES];
	char *strs[MAX_ENTRIES][NSTR];
	int64_t fetched = (int64_t)take_u64(&s, 8);
	size_t n = 0;
	int too_long = 0;
	while (s.p < s.end && n < MAX_ENTRIES) {
		struct cfs_lrow_entry *x = &e[n];
		x->ino = take_u64(&s, 8);
		if (x->ino == 0)
			x->ino = 1;
		x->is_dir = (int)(take_u64(&s, 1) & 1);
		x->size = (int64_t)take_u64(&s, 8);
		x->mtime_ns = (int64_t)take_u64(&s, 8);
		x->ctime_ns = (int64_t)take_u64(&s, 8);
		for (int k = 0; k < NSTR; k++) {
			strs[n][k] = take_str(&s, k <= 1); /* name and id are never empty */
			too_long |= strlen(strs[n][k]) > STR_MAX;
		}
		x->name = strs[n][0];
		x->id = strs[n][1];
		x->content_id = strs[n][2];
		x->rev = strs[n][3];
		x->export_mime = strs[n][4];
		x->md5 = strs[n][5];
		x->sha256 = strs[n][6];
		n++;
	}
	struct cfs_buf row = { 0 };
	int rc = cfs_lrow_encode(e, n, fetched, &row);
	if (too_long) {
		assert(rc == -EINVAL);
	} else {
		assert(rc == 0);
		int64_t f2 = ~fetched;
		size_t n2 = n + 1;
		struct dec_state st = { 0, e, n };
		rc = cfs_lrow_decode(row.data, row.len, &f2, &n2, dec_cb, &st);
		assert(rc == 0);
		assert(f2 == fetched && n2 == n && st.seen == n);
		/* every proper prefix is damaged: refused, never a crash */
		for (size_t cut = 0; cut < row.len; cut += 1 + cut / 8) {
			void *copy = malloc(cut ? cut : 1);
			assert(copy);
			memcpy(copy, row.data, cut);
			struct dec_state st2 = { 0, NULL, 0 };
			assert(cfs_lrow_decode(copy, cut, &f2, &n2, dec_cb, &st2) != 0);
			free(copy);
		}
	}
	cfs_buf_cleanup(&row);
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < NSTR; k++)
			free(strs[i][k]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1) {
		round_trip(data + 1, size - 1);
		return 0;
	}
	/* an exact-size heap copy so ASan sees any read past the row */
	size_t len = size - 1;
	void *row = malloc(len ? len : 1);
	if (!row)
		return 0;
	memcpy(row, data + 1, len);
	int64_t fetched;
	size_t n = 0;
	struct dec_state st = { 0, NULL, 0 };
	int rc = cfs_lrow_decode(row, len, &fetched, &n, dec_cb, &st);
	assert(rc == 0 || rc == CFS_E_PROTO);
	if (rc == 0)
		assert(st.seen == n);
	free(row);
	return 0;
}
