/* Unit tests: the POSIX name rule. */
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
	return check_done("test_names");
}
