/* Unit tests: the POSIX name rule, the names Drive cannot take, conflict names. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "names.h"
#include "hash.h"

static void test_sanitize(void)
{
	char out[CFS_NAME_MAX + 1];
	CHECK_EQ(cfs_names_sanitize("a/b", out, sizeof(out)), 0);
	CHECK_STR(out, "a\xef\xbc\x8f" "b");
	cfs_names_sanitize(".", out, sizeof(out));
	CHECK_STR(out, "\xef\xbc\x8e");
	cfs_names_sanitize("..", out, sizeof(out));
	CHECK_STR(out, "\xef\xbc\x8e\xef\xbc\x8e");
	cfs_names_sanitize("...", out, sizeof(out));
	CHECK_STR(out, "...");
	cfs_names_sanitize("", out, sizeof(out));
	CHECK_STR(out, "_");
	cfs_names_sanitize("données 日本語", out, sizeof(out));
	CHECK_STR(out, "données 日本語");
	/* 300 x "é" (600 bytes) is cut at a character boundary, <= 255 bytes */
	char longname[700] = "";
	for (int i = 0; i < 300; i++)
		strcat(longname, "é");
	cfs_names_sanitize(longname, out, sizeof(out));
	CHECK_EQ(strlen(out), 254);
	char small[10];
	CHECK(cfs_names_sanitize("x", small, sizeof(small)) != 0);
}

/* control characters show as their Control Pictures sign, like '/' */
static void test_controls(void)
{
	char out[CFS_NAME_MAX + 1];
	CHECK_EQ(cfs_names_sanitize("line1\nline2.txt", out, sizeof(out)), 0);
	CHECK_STR(out, "line1\xe2\x90\x8aline2.txt"); /* U+240A */
	CHECK_EQ(cfs_names_sanitize("\x01tab\there\x1f\x7f", out, sizeof(out)), 0);
	CHECK_STR(out, "\xe2\x90\x81tab\xe2\x90\x89here\xe2\x90\x9f\xe2\x90\xa1");
}

/* An oracle for cfs_names_check's UTF-8 part, written the other way: decode
 * each sequence by its bit pattern, then ask Unicode's rules of the code
 * point (shortest form, no surrogate, at most U+10FFFF). */
static int oracle_utf8(const unsigned char *s)
{
	while (*s) {
		unsigned c = *s;
		size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
		       : (c & 0xf8) == 0xf0 ? 4 : 0;
		if (!n)
			return 0;
		uint32_t cp = n == 1 ? c : c & (0x7fu >> n);
		for (size_t i = 1; i < n; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (s[i] & 0x3f);
		}
		static const uint32_t least[] = { 0, 0, 0x80, 0x800, 0x10000 };
		if (cp < least[n] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return 0;
		s += n;
	}
	return 1;
}

static void test_check(void)
{
	static const char *const good[] = {
		"a", "model.pt", "données 日本語", "\xf0\x9f\x98\x80.txt", /* U+1F600 */
		"\xf4\x8f\xbf\xbf", /* U+10FFFF */ "\xed\x9f\xbf", /* U+D7FF */
		"\xee\x80\x80", /* U+E000 */ "\xef\xbf\xbd", /* U+FFFD */
		"\xef\xbc\x8f", /* U+FF0F, the slash the listing shows */
		"line\nbreak", "\x7f", /* control characters are UTF-8 */
		"\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xf0\x90\x80\x80",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		CHECK_EQ(cfs_names_check(good[i]), 0);
		if (cfs_names_check(good[i]))
			fprintf(stderr, "  good name %zu refused\n", i);
	}
	static const char *const bad[] = {
		"bad\xff.bin", "\xfe", "\xf5\x80\x80\x80", "\xf8\x88\x80\x80\x80",
		"\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xe0\x9f\xbf", /* overlong */
		"\xf0\x80\x80\xaf", "\xf0\x8f\xbf\xbf",                 /* overlong */
		"\xed\xa0\x80", "\xed\xbf\xbf", "sur\xed\xb2\x80gate",   /* surrogates */
		"\xf4\x90\x80\x80",                                     /* U+110000 */
		"\x80", "a\xbf", "\xc3", "x\xe2\x82", "\xe2\x82x", "\xf0\x9f\x98", /* cut short */
		"\xf0\x9f\x28\x80", "\xe2\x28\xa1",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(cfs_names_check(bad[i]), -EILSEQ);
		if (cfs_names_check(bad[i]) != -EILSEQ)
			fprintf(stderr, "  bad name %zu passed\n", i);
	}
	CHECK_EQ(cfs_names_check(""), -EINVAL);
	/* the length: 255 bytes pass, 256 do not (before the bytes are read) */
	char n[CFS_NAME_MAX + 2];
	memset(n, 'x', sizeof(n) - 1);
	n[CFS_NAME_MAX] = '\0';
	CHECK_EQ(cfs_names_check(n), 0);
	n[CFS_NAME_MAX] = 'x';
	n[CFS_NAME_MAX + 1] = '\0';
	CHECK_EQ(cfs_names_check(n), -ENAMETOOLONG);
	n[0] = '\xff';
	CHECK_EQ(cfs_names_check(n), -ENAMETOOLONG);
	char e[CFS_NAME_MAX + 2] = "";
	for (int i = 0; i < 127; i++)
		strcat(e, "\xc3\xa9"); /* 254 bytes */
	CHECK_EQ(cfs_names_check(e), 0);
	strcat(e, "x");
	CHECK_EQ(cfs_names_check(e), 0);
	e[CFS_NAME_MAX - 1] = '\0';
	strcat(e, "\xc3\xa9"); /* 256 bytes */
	CHECK_EQ(cfs_names_check(e), -ENAMETOOLONG);

	/* every string of one to three bytes, and four-byte strings over every
	 * lead and second byte: the check agrees with the oracle */
	unsigned char s[5];
	long disagree = 0;
	for (unsigned a = 1; a < 256; a++) {
		for (unsigned b = 0; b < 256; b++) {
			for (unsigned c = 0; c < 256; c++) {
				s[0] = (unsigned char)a;
				s[1] = (unsigned char)b;
				s[2] = (unsigned char)c;
				s[3] = 0;
				if (!b)
					s[2] = 0;
				int want = oracle_utf8(s) ? 0 : -EILSEQ;
				if (cfs_names_check((const char *)s) != want && disagree++ < 5)
					fprintf(stderr, "  disagree on %02x %02x %02x\n", a, b, c);
				if (!b)
					break;
			}
		}
	}
	static const unsigned char tails[] = { 0x00, 0x28, 0x7f, 0x80, 0x8f, 0x90, 0xa0, 0xbf, 0xc0, 0xff };
	for (unsigned a = 0xe0; a < 256; a++)
		for (unsigned b = 0x80; b < 0xc0; b++)
			for (size_t i = 0; i < sizeof(tails); i++)
				for (size_t j = 0; j < sizeof(tails); j++) {
					s[0] = (unsigned char)a;
					s[1] = (unsigned char)b;
					s[2] = tails[i] ? tails[i] : 0x80;
					s[3] = tails[j];
					s[4] = 0;
					int want = oracle_utf8(s) ? 0 : -EILSEQ;
					if (cfs_names_check((const char *)s) != want && disagree++ < 5)
						fprintf(stderr, "  disagree on %02x %02x %02x %02x\n", a, b,
							s[2], s[3]);
				}
	CHECK_EQ(disagree, 0);
}

/* conflict copies stay within CFS_NAME_MAX: the stem is cut at a UTF-8
 * boundary, the tag and the extension are kept */
static void test_conflict_limits(void)
{
	static const char tag[] = " (conflict 2026-12-01 223016)"; /* 29 bytes */
	const int64_t t = 1796164216;
	char out[1024], name[600], want[600];
	CHECK_EQ(strlen(tag), 29);
	/* a name at the limit: the stem gives up what the tag takes */
	memset(name, 'c', 251);
	snprintf(name + 251, sizeof(name) - 251, ".bin");
	CHECK_EQ(cfs_names_conflict(name, t, out, sizeof(out)), 0);
	CHECK_EQ(strlen(out), CFS_NAME_MAX);
	memset(want, 'c', 222);
	snprintf(want + 222, sizeof(want) - 222, "%s.bin", tag);
	CHECK_STR(out, want);
	CHECK_EQ(cfs_names_check(out), 0);
	/* cut between two-byte characters: "x" + 120 x "é" + ".bin" */
	snprintf(name, sizeof(name), "x");
	for (int i = 0; i < 120; i++)
		strcat(name, "\xc3\xa9");
	strcat(name, ".bin");
	CHECK_EQ(cfs_names_conflict(name, t, out, sizeof(out)), 0);
	CHECK_EQ(strlen(out), 221 + 29 + 4); /* 222 would split an "é" */
	CHECK_EQ(cfs_names_check(out), 0);
	CHECK(strncmp(out, name, 221) == 0);
	CHECK_STR(out + 221, " (conflict 2026-12-01 223016).bin");
	/* four-byte characters */
	name[0] = '\0';
	for (int i = 0; i < 60; i++)
		strcat(name, "\xf0\x9f\x98\x80");
	strcat(name, ".pt");
	CHECK_EQ(cfs_names_conflict(name, t, out, sizeof(out)), 0);
	CHECK_EQ(strlen(out), 220 + 29 + 3);
	CHECK_EQ(cfs_names_check(out), 0);
	/* a name longer than the mount shows (Drive allows more) */
	memset(name, 'd', 500);
	snprintf(name + 500, sizeof(name) - 500, ".tar.gz");
	CHECK_EQ(cfs_names_conflict(name, t, out, sizeof(out)), 0);
	CHECK_EQ(strlen(out), CFS_NAME_MAX);
	CHECK(strcmp(out + CFS_NAME_MAX - 32, " (conflict 2026-12-01 223016).gz") == 0);
	/* an extension with no room beside the tag is cut as part of the stem */
	snprintf(name, sizeof(name), "a.");
	memset(name + 2, 'e', 250);
	name[252] = '\0';
	CHECK_EQ(cfs_names_conflict(name, t, out, sizeof(out)), 0);
	CHECK_EQ(strlen(out), CFS_NAME_MAX);
	CHECK(strncmp(out, name, 226) == 0);
	CHECK_STR(out + 226, tag);
	/* a short name is unchanged by the cut */
	CHECK_EQ(cfs_names_conflict("model.pt", t, out, sizeof(out)), 0);
	CHECK_STR(out, "model (conflict 2026-12-01 223016).pt");
	/* cap smaller than the limit: the result fits cap */
	CHECK_EQ(cfs_names_conflict("model.pt", t, out, 35), 0);
	CHECK_STR(out, "mo (conflict 2026-12-01 223016).pt");
	CHECK_EQ(cfs_names_conflict("model.pt", t, out, 30), 0);
	CHECK_STR(out, tag);
	CHECK_EQ(cfs_names_conflict("model.pt", t, out, 29), -ENAMETOOLONG);
	CHECK_EQ(cfs_names_conflict("model.pt", t, out, 0), -ENAMETOOLONG);
}

static void test_ids(void)
{
	CHECK(cfs_names_id_ok("1AbC_def-123", 128));
	CHECK(cfs_names_id_ok("0B", 3));
	CHECK(!cfs_names_id_ok("0BC", 3)); /* too long for the field */
	CHECK(!cfs_names_id_ok("", 128));
	CHECK(!cfs_names_id_ok("a/b", 128));
	CHECK(!cfs_names_id_ok("a b", 128));
	CHECK(!cfs_names_id_ok("a.b", 128));
	CHECK(!cfs_names_id_ok("a\nb", 128));
	CHECK(!cfs_names_id_ok("\xc3\xa9", 128));
}

static void test_fnv(void)
{
	/* FNV-1a 64 reference values */
	CHECK(cfs_hash_fnv1a("") == 0xcbf29ce484222325ULL);
	CHECK(cfs_hash_fnv1a("a") == 0xaf63dc4c8601ec8cULL);
}

static void test_assign(void)
{
	struct cfs_names_entry e[] = {
		{ "dup.txt", "idB", 200, NULL },   { "dup.txt", "idA", 100, NULL },
		{ "other", "idC", 0, NULL },       { "dup.txt", "idD", 100, NULL },
		{ ".hidden", "idE", 0, NULL },     { ".hidden", "idF", 1, NULL },
	};
	size_t n = sizeof(e) / sizeof(e[0]);
	CHECK_EQ(cfs_names_assign(e, n), 0);
	char want[64];
	CHECK_STR(e[1].final, "dup.txt"); /* earliest createdTime keeps the name */
	snprintf(want, sizeof(want), "dup (%.8llx).txt",
		 (unsigned long long)(cfs_hash_fnv1a("idB") >> 32));
	CHECK_STR(e[0].final, want);
	snprintf(want, sizeof(want), "dup (%.8llx).txt",
		 (unsigned long long)(cfs_hash_fnv1a("idD") >> 32));
	CHECK_STR(e[3].final, want); /* same time as idA: the larger id loses */
	CHECK_STR(e[2].final, "other");
	CHECK_STR(e[4].final, ".hidden");
	snprintf(want, sizeof(want), ".hidden (%.8llx)",
		 (unsigned long long)(cfs_hash_fnv1a("idF") >> 32));
	CHECK_STR(e[5].final, want); /* a leading dot is not an extension */
	for (size_t i = 0; i < n; i++)
		free(e[i].final);

	/* stability: the same set in another order gives the same names */
	struct cfs_names_entry f[] = { { "dup.txt", "idD", 100, NULL },
				       { "dup.txt", "idA", 100, NULL } };
	CHECK_EQ(cfs_names_assign(f, 2), 0);
	CHECK_STR(f[1].final, "dup.txt");
	CHECK(strcmp(f[0].final, "dup.txt") != 0);
	free(f[0].final);
	free(f[1].final);
	CHECK_EQ(cfs_names_assign(NULL, 0), 0);

	/* a suffixed name that a real file already has (found by fuzz_names):
	 * the real one keeps it, the suffixed one takes the 16-digit tag */
	char taken[64];
	snprintf(taken, sizeof(taken), "report (%.8llx).pdf",
		 (unsigned long long)(cfs_hash_fnv1a("id2") >> 32));
	struct cfs_names_entry g[] = { { "report.pdf", "id1", 1, NULL },
				       { "report.pdf", "id2", 2, NULL },
				       { taken, "id3", 3, NULL } };
	CHECK_EQ(cfs_names_assign(g, 3), 0);
	CHECK_STR(g[0].final, "report.pdf");
	CHECK_STR(g[2].final, taken);
	snprintf(want, sizeof(want), "report (%.16llx).pdf",
		 (unsigned long long)cfs_hash_fnv1a("id2"));
	CHECK_STR(g[1].final, want);
	for (int i = 0; i < 3; i++)
		free(g[i].final);
}

int main(void)
{
	test_sanitize();
	test_controls();
	test_ids();
	test_fnv();
	test_assign();
	test_check();
	test_conflict_limits();
	return check_done("test_names");
}
