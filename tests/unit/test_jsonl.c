/* Unit tests: the --json lines of `colabfs sync` and `colabfs warm`
 * (src/cli/sync_cmd.h, warm.h): their exact text, strings escaped (quotes,
 * backslashes, control characters) and bytes that are not UTF-8 made '?',
 * so every line is valid JSON whatever a file is called; the done lines with
 * and without failures over several PATHs; and when a progress line is due
 * (src/base/progress.h): the first at once, a change at most every 0.5 s,
 * nothing unchanged, the final state at once. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "progress.h"
#include "sync_cmd.h"
#include "warm.h"

static void add_failed(struct cfs_json_sync *s, const char *path, const char *error)
{
	s->failed[s->n_failed].path = strdup(path);
	s->failed[s->n_failed].error = strdup(error);
	s->n_failed++;
	s->files++;
}

static void sync_lines(void)
{
	char *t = NULL;
	struct cfs_sync_progress p = { .rounds = 2, .done = 1048576, .left = 5, .files = 2,
				       .uploading = 1, .waiting = 1 };
	snprintf(p.why, sizeof(p.why), "rate limited \"403\"\\ \x01 \xff\xfe x");
	CHECK_EQ(cfs_sync_json_progress(&p, &t), 0);
	CHECK_STR(t, "{\"event\":\"progress\",\"done_bytes\":1048576,\"total_bytes\":1048581,"
		     "\"files\":2,\"uploading\":1,\"waiting\":1,"
		     "\"why\":\"rate limited \\\"403\\\"\\\\ \\u0001 ?? x\"}");
	free(t);

	CHECK_EQ(cfs_sync_json_done(NULL, 0, NULL, &t), 0);
	CHECK_STR(t, "{\"event\":\"done\",\"ok\":true}");
	free(t);
	CHECK_EQ(cfs_sync_json_done(NULL, 0, "not_mounted", &t), 0);
	CHECK_STR(t, "{\"event\":\"done\",\"ok\":false,\"failed\":[],\"error\":\"not_mounted\"}");
	free(t);

	/* failed entries of two PATHs, names with any bytes but '/' and NUL */
	struct cfs_json_sync st[2] = { 0 };
	add_failed(&st[0], "ckpt/m\xc3\xa9.pt", "Drive storage quota exceeded");
	add_failed(&st[1], "a\tb\n\"c\"\xc3(.bin", "no write permission");
	add_failed(&st[1], "\xf0\x9f\x98\x80.bin", "too large");
	CHECK_EQ(cfs_sync_json_done(st, 2, "failed", &t), 0);
	CHECK_STR(t, "{\"event\":\"done\",\"ok\":false,\"failed\":["
		     "{\"path\":\"ckpt/m\xc3\xa9.pt\",\"error\":\"Drive storage quota exceeded\"},"
		     "{\"path\":\"a\\tb\\n\\\"c\\\"?(.bin\",\"error\":\"no write permission\"},"
		     "{\"path\":\"\xf0\x9f\x98\x80.bin\",\"error\":\"too large\"}],"
		     "\"error\":\"failed\"}");
	free(t);
	for (size_t i = 0; i < 2; i++)
		cfs_json_sync_cleanup(&st[i]);
}

static void warm_lines(void)
{
	char *t = NULL;
	struct cfs_warm_counts c = { .done_bytes = 3 << 20, .total_bytes = 10 << 20,
				     .files_done = 1, .files = 4 };
	CHECK_EQ(cfs_warm_json_progress(&c, &t), 0);
	CHECK_STR(t, "{\"event\":\"progress\",\"done_bytes\":3145728,\"total_bytes\":10485760,"
		     "\"files_done\":1,\"files\":4}");
	free(t);
	CHECK_EQ(cfs_warm_json_done(NULL, &t), 0);
	CHECK_STR(t, "{\"event\":\"done\",\"ok\":true,\"error\":null}");
	free(t);
	CHECK_EQ(cfs_warm_json_done("denied", &t), 0);
	CHECK_STR(t, "{\"event\":\"done\",\"ok\":false,\"error\":\"denied\"}");
	free(t);
}

static void gate(void)
{
	struct cfs_progress_gate g = { 0 };
	CHECK_EQ(cfs_progress_due(&g, "a", 10.0, 0.5, 0), 1); /* the first at once */
	CHECK_EQ(cfs_progress_due(&g, "a", 11.0, 0.5, 0), 0); /* unchanged: never */
	CHECK_EQ(cfs_progress_due(&g, "b", 11.2, 0.5, 0), 1);
	CHECK_EQ(cfs_progress_due(&g, "c", 11.4, 0.5, 0), 0); /* too soon */
	CHECK_EQ(cfs_progress_due(&g, "c", 11.6, 0.5, 0), 0);
	CHECK_EQ(cfs_progress_due(&g, "c", 11.7, 0.5, 0), 1); /* held back, not lost */
	CHECK_EQ(cfs_progress_due(&g, "d", 11.8, 0.5, 1), 1); /* the final state at once */
	CHECK_EQ(cfs_progress_due(&g, "d", 11.9, 0.5, 1), 0); /* but not twice */
	CHECK_EQ(g.printed, 4);

	/* emit: prints what is due with a newline, frees every line */
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct cfs_progress_gate h = { 0 };
	cfs_progress_emit(f, &h, strdup("{\"x\":1}"), 1.0, 0.5, 0);
	cfs_progress_emit(f, &h, strdup("{\"x\":2}"), 1.1, 0.5, 0);
	cfs_progress_emit(f, NULL, strdup("{\"done\":1}"), 0, 0, 1);
	cfs_progress_emit(f, NULL, NULL, 0, 0, 1);
	fclose(f);
	CHECK_STR(buf, "{\"x\":1}\n{\"done\":1}\n");
	free(buf);
}

int main(void)
{
	sync_lines();
	warm_lines();
	gate();
	return check_done("test_jsonl");
}
