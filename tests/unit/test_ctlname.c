/* Unit tests: the control attribute names (src/core/ctlname.h): the cases the
 * issue names, who may use what, and a property test that compares the
 * parser with an independent reading of the grammar (ctlname_oracle.h) on
 * names built to sit at and around every boundary. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "check.h"
#include "ctlname.h"
#include "ctlname_oracle.h"

#define W "user.colabfs.warm."
#define ET "user.colabfs.evict.to."
#define H "user.colabfs.history."
#define O "user.colabfs.order."

static int parse(const char *name, struct cfs_ctlname *r)
{
	return cfs_ctlname_parse(name, r);
}

static void fixed_cases(void)
{
	struct cfs_ctlname r;
	CHECK_EQ(parse("user.colabfs.pid", &r), 0);
	CHECK_EQ(r.kind, CFS_CTL_PID);
	CHECK_EQ(parse("user.colabfs.stats", &r), 0);
	CHECK_EQ(r.kind, CFS_CTL_STATS);
	CHECK_EQ(parse("user.colabfs.cache_dir", &r), 0);
	CHECK_EQ(r.kind, CFS_CTL_CACHE_DIR);
	CHECK_EQ(parse("user.colabfs.evict", &r), 0);
	CHECK_EQ(r.kind, CFS_CTL_EVICT);
	CHECK_EQ(parse("user.colabfs.sync", &r), 0);
	CHECK_EQ(r.kind, CFS_CTL_SYNC);
	CHECK(r.target == 0 && r.off == 0 && r.len == 0);
	CHECK_EQ(parse("user.colabfs.history", &r), 0);
	CHECK(r.kind == CFS_CTL_HISTORY && r.off == 0);
	CHECK_EQ(parse(H "0", &r), 0);
	CHECK(r.kind == CFS_CTL_HISTORY && r.off == 0);
	CHECK_EQ(parse(H "9223372036854775807", &r), 0);
	CHECK(r.kind == CFS_CTL_HISTORY && r.off == (uint64_t)INT64_MAX);
	CHECK_EQ(parse(O "0", &r), 0); /* drop the order hint */
	CHECK(r.kind == CFS_CTL_ORDER && r.off == 0);
	CHECK_EQ(parse(O "4021001", &r), 0);
	CHECK(r.kind == CFS_CTL_ORDER && r.off == 4021001 && r.len == 0 && r.target == 0);
	CHECK_EQ(parse(O "9223372036854775807", &r), 0);
	CHECK(r.kind == CFS_CTL_ORDER && r.off == (uint64_t)INT64_MAX);
	CHECK_EQ(parse(ET "0", &r), 0);
	CHECK_EQ(r.kind, CFS_CTL_EVICT_TO);
	CHECK(r.target == 0);
	CHECK_EQ(parse(ET "1048576", &r), 0);
	CHECK(r.target == 1048576);
	CHECK_EQ(parse(W "0.4096", &r), 0);
	CHECK_EQ(r.kind, CFS_CTL_WARM);
	CHECK(r.off == 0 && r.len == 4096);
	CHECK_EQ(parse(W "9223372036854775807.9223372036854775807", &r), 0);
	CHECK(r.off == (uint64_t)INT64_MAX && r.len == (uint64_t)INT64_MAX);
	CHECK_EQ(parse(W "007.010", &r), 0); /* leading zeros are still digits */
	CHECK(r.off == 7 && r.len == 10);

	/* malformed numbers: EINVAL, never a wrapped or signed value */
	static const char *const bad[] = {
		W "-1.5", W "5.-1", W "18446744073709551615.10", W "10.18446744073709551615",
		W "9223372036854775808.0", W "0.9223372036854775808", W "1x.2", W "1.2x", W "..",
		W ".", W "", W "1.", W ".1", W "1", W "1.2.", W "1.2.3", W "+1.2", W "1.+2",
		W " 1.2", W "1. 2", W "1.2 ", W "0x10.1", W "00000000000000000001.1",
		ET "-1", ET "", ET "1K", ET " 1", ET "+1", ET "18446744073709551616", ET "1.",
		H "", H "-1", H "1.2", H "x", H "9223372036854775808", H " 1", H "1 ",
		O "", O "-1", O "1.2", O "../1", O "/tmp/list", O "9223372036854775808", O " 1",
		O "1 ", O "0x1",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse(bad[i], &r);
		if (rc != -EINVAL)
			fprintf(stderr, "accepted or misread: \"%s\" -> %d\n", bad[i], rc);
		CHECK_EQ(rc, -EINVAL);
	}
	/* not control names at all: an attribute the mount does not have */
	static const char *const other[] = {
		"user.colabfs.warm", "user.colabfs.evict.to", "user.colabfs.evictx",
		"user.colabfs.", "user.colabfs.pid2", "user.colabfs.statsx", "security.selinux",
		"user.xdg.origin.url", "", "USER.COLABFS.PID", "user.colabfs.sync.",
		"user.colabfs.sync.0", "user.colabfs.syncx", "user.colabfs.syn", "USER.COLABFS.SYNC",
		"user.colabfs.sync ", "user.colabfs.historyx", "user.colabfs.histor",
		"USER.COLABFS.HISTORY", "user.colabfs.history ", "user.colabfs.order",
		"user.colabfs.orderx", "user.colabfs.orde",
	};
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		CHECK_EQ(parse(other[i], &r), -ENODATA);
}

static void formatting(void)
{
	char buf[CFS_CTLNAME_MAX];
	struct cfs_ctlname r = { .kind = CFS_CTL_WARM, .off = 67108864, .len = 1 };
	CHECK_EQ(cfs_ctlname_format(&r, buf, sizeof(buf)), 0);
	CHECK_STR(buf, W "67108864.1");
	r = (struct cfs_ctlname){ .kind = CFS_CTL_WARM, .off = (uint64_t)INT64_MAX,
				  .len = (uint64_t)INT64_MAX };
	CHECK_EQ(cfs_ctlname_format(&r, buf, sizeof(buf)), 0); /* the longest name fits */
	r.len = (uint64_t)INT64_MAX + 1;
	CHECK_EQ(cfs_ctlname_format(&r, buf, sizeof(buf)), -EINVAL);
	r = (struct cfs_ctlname){ .kind = CFS_CTL_EVICT_TO, .target = UINT64_MAX };
	CHECK_EQ(cfs_ctlname_format(&r, buf, sizeof(buf)), -EINVAL);
	r.target = 5;
	CHECK_EQ(cfs_ctlname_format(&r, buf, 10), -ENAMETOOLONG);
	CHECK_EQ(cfs_ctlname_format(&r, buf, sizeof(buf)), 0);
	CHECK_STR(buf, ET "5");
	r = (struct cfs_ctlname){ .kind = CFS_CTL_EVICT };
	CHECK_EQ(cfs_ctlname_format(&r, buf, sizeof(buf)), 0);
	CHECK_STR(buf, "user.colabfs.evict");
	r = (struct cfs_ctlname){ .kind = CFS_CTL_SYNC };
	CHECK_EQ(cfs_ctlname_format(&r, buf, sizeof(buf)), 0);
	CHECK_STR(buf, CFS_XATTR_SYNC);
	CHECK_STR(cfs_ctlname_verb(CFS_CTL_SYNC), "sync");
	r = (struct cfs_ctlname){ .kind = CFS_CTL_HISTORY };
	CHECK_EQ(cfs_ctlname_format(&r, buf, sizeof(buf)), 0);
	CHECK_STR(buf, CFS_XATTR_HISTORY); /* from 0: the bare name */
	r.off = 600;
	CHECK_EQ(cfs_ctlname_format(&r, buf, sizeof(buf)), 0);
	CHECK_STR(buf, H "600");
	r.off = (uint64_t)INT64_MAX + 1;
	CHECK_EQ(cfs_ctlname_format(&r, buf, sizeof(buf)), -EINVAL);
	CHECK_STR(cfs_ctlname_verb(CFS_CTL_HISTORY), "history");
	r = (struct cfs_ctlname){ .kind = CFS_CTL_ORDER, .off = 77 };
	CHECK_EQ(cfs_ctlname_format(&r, buf, sizeof(buf)), 0);
	CHECK_STR(buf, O "77");
	CHECK_STR(cfs_ctlname_verb(CFS_CTL_ORDER), "order");
	r.off = (uint64_t)INT64_MAX + 1;
	CHECK_EQ(cfs_ctlname_format(&r, buf, sizeof(buf)), -EINVAL);
	r.kind = (enum cfs_ctlname_kind)0;
	CHECK_EQ(cfs_ctlname_format(&r, buf, sizeof(buf)), -EINVAL);
}

static void permissions(void)
{
	const uint32_t owner = 1000, other = 65534;
	static const enum cfs_ctlname_kind reads[] = { CFS_CTL_PID, CFS_CTL_STATS, CFS_CTL_CACHE_DIR,
						       CFS_CTL_HISTORY };
	static const enum cfs_ctlname_kind controls[] = { CFS_CTL_EVICT, CFS_CTL_EVICT_TO,
							  CFS_CTL_WARM, CFS_CTL_SYNC, CFS_CTL_ORDER };
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
		CHECK_EQ(cfs_ctlname_allowed(reads[i], other, owner), 0);
		CHECK_EQ(cfs_ctlname_allowed(reads[i], owner, owner), 0);
	}
	for (size_t i = 0; i < sizeof(controls) / sizeof(controls[0]); i++) {
		CHECK_EQ(cfs_ctlname_allowed(controls[i], owner, owner), 0);
		CHECK_EQ(cfs_ctlname_allowed(controls[i], 0, owner), 0); /* root */
		CHECK_EQ(cfs_ctlname_allowed(controls[i], other, owner), -EPERM);
		CHECK_EQ(cfs_ctlname_allowed(controls[i], owner + 1, owner), -EPERM);
		CHECK_EQ(cfs_ctlname_allowed(controls[i], 0, 0), 0);
		CHECK_EQ(cfs_ctlname_allowed(controls[i], owner, 0), -EPERM); /* root's mount */
	}
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A number part: plain digits, one at or next to INT64_MAX or UINT64_MAX,
 * or a few characters from an alphabet of digits and near misses. */
static size_t gen_part(char *p, size_t cap)
{
	static const char *const edges[] = {
		"9223372036854775807", "9223372036854775806", "9223372036854775808",
		"18446744073709551615", "18446744073709551616", "0", "00", "0000000000000000000",
		"00000000000000000000", "-1", "-0", "+0", "1e3", "0x1", "",
	};
	static const char alpha[] = "0123456789012345678901234567890123456789.-+ x\t\n";
	switch (next() % 3) {
	case 0:
		return (size_t)snprintf(p, cap, "%" PRIu64, next() >> (next() % 64));
	case 1:
		return (size_t)snprintf(p, cap, "%s", edges[next() % (sizeof(edges) / sizeof(edges[0]))]);
	default: {
		size_t n = next() % 24;
		for (size_t i = 0; i < n && i + 1 < cap; i++)
			p[i] = alpha[next() % (sizeof(alpha) - 1)];
		return n < cap ? n : cap - 1;
	}
	}
}

static void property(void)
{
	static const char *const prefixes[] = {
		W, ET, H, O, "user.colabfs.evict", "user.colabfs.pid", "user.colabfs.stats",
		"user.colabfs.sync", "user.colabfs.history", "user.colabfs.", "user.colabfs.warm",
		"user.colabfs.evict.to", "user.colabfs.order", "user.", "",
	};
	char name[160], again[CFS_CTLNAME_MAX];
	int accepted = 0, invalid = 0, nodata = 0;
	for (int i = 0; i < 200000; i++) {
		size_t n = (size_t)snprintf(name, sizeof(name), "%s",
					    prefixes[next() % (sizeof(prefixes) / sizeof(prefixes[0]))]);
		int parts = (int)(next() % 4);
		for (int k = 0; k < parts; k++) {
			n += gen_part(name + n, sizeof(name) - n - 2);
			if (k + 1 < parts && next() % 8)
				name[n++] = '.';
			name[n] = '\0';
		}
		struct cfs_ctlname got, want;
		int rc = cfs_ctlname_parse(name, &got), orc = oracle_parse(name, &want);
		if (rc != orc || (rc == 0 && (got.kind != want.kind || got.target != want.target ||
					      got.off != want.off || got.len != want.len))) {
			fprintf(stderr, "parser and oracle disagree on \"%s\": %d vs %d\n", name, rc,
				orc);
			CHECK(0);
			return;
		}
		if (rc == 0) {
			/* a parsed name formats to a name that parses to the same request */
			struct cfs_ctlname back;
			accepted++;
			CHECK_EQ(cfs_ctlname_format(&got, again, sizeof(again)), 0);
			CHECK_EQ(cfs_ctlname_parse(again, &back), 0);
			CHECK(back.kind == got.kind && back.target == got.target &&
			      back.off == got.off && back.len == got.len);
			CHECK(got.target <= CFS_CTLNAME_NUM_MAX && got.off <= CFS_CTLNAME_NUM_MAX &&
			      got.len <= CFS_CTLNAME_NUM_MAX);
		} else {
			invalid += rc == -EINVAL;
			nodata += rc == -ENODATA;
		}
	}
	/* the generator must reach all three outcomes, or the test proves little */
	printf("property: %d accepted, %d EINVAL, %d ENODATA\n", accepted, invalid, nodata);
	CHECK(accepted > 10000 && invalid > 10000 && nodata > 10000);
}

int main(void)
{
	fixed_cases();
	formatting();
	permissions();
	property();
	return check_done("test_ctlname");
}
