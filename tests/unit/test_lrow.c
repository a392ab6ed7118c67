/* Unit tests: stored listing rows. */
#include <stdlib.h>

#include "check.h"
#include "err.h"
#include "lrow.h"

struct seen {
	int n;
	char names[4][64];
	uint64_t inos[4];
	int64_t sizes[4];
};

static int collect(const struct cfs_lrow_entry *e, void *arg)
{
	struct seen *s = arg;
	if (s->n < 4) {
		snprintf(s->names[s->n], sizeof(s->names[0]), "%s|%s|%s|%s|%s", e->name, e->id,
			 e->content_id, e->rev, e->export_mime);
		s->inos[s->n] = e->ino;
		s->sizes[s->n] = e->size;
	}
	s->n++;
	return 0;
}

int main(void)
{
	struct cfs_lrow_entry in[3] = {
		{ 2, 1, 0, 5, 6, "dir", "idD", "idD", "v:1", "" },
		{ 3, 0, 5368709120LL, 7, 8, "big.bin", "idB", "idB", "r:9", "" },
		{ 4, 0, -1, 0, 0, "Doc.docx", "idS", "idT", "v:2", "application/x" },
	};
	struct cfs_buf b = { 0 };
	CHECK_EQ(cfs_lrow_encode(in, 3, 123456, &b), 0);
	struct seen s = { 0 };
	int64_t at;
	size_t n;
	CHECK_EQ(cfs_lrow_decode(b.data, b.len, &at, &n, collect, &s), 0);
	CHECK_EQ(at, 123456);
	CHECK_EQ(n, 3);
	CHECK_EQ(s.n, 3);
	CHECK_STR(s.names[0], "dir|idD|idD|v:1|");
	CHECK_STR(s.names[2], "Doc.docx|idS|idT|v:2|application/x");
	CHECK_EQ(s.inos[1], 3);
	CHECK_EQ(s.sizes[1], 5368709120LL);
	CHECK_EQ(s.sizes[2], -1);

	/* every truncation and a flipped count are refused, never overread */
	for (size_t cut = 0; cut < b.len; cut++) {
		struct seen t = { 0 };
		CHECK_EQ(cfs_lrow_decode(b.data, cut, &at, &n, collect, &t), CFS_E_PROTO);
	}
	b.data[12] = (char)0xff;
	CHECK_EQ(cfs_lrow_decode(b.data, b.len, &at, &n, collect, &s), CFS_E_PROTO);
	b.data[12] = 3;
	b.data[0] = 'X';
	CHECK_EQ(cfs_lrow_decode(b.data, b.len, &at, &n, collect, &s), CFS_E_PROTO);
	cfs_buf_cleanup(&b);

	/* an empty listing is a valid row */
	CHECK_EQ(cfs_lrow_encode(NULL, 0, 1, &b), 0);
	CHECK_EQ(cfs_lrow_decode(b.data, b.len, &at, &n, collect, &s), 0);
	CHECK_EQ(n, 0);
	cfs_buf_cleanup(&b);
	return check_done("test_lrow");
}
