/* Unit tests: `colabfs sync` (src/cli/sync_cmd.h) on replies given as JSON text:
 * the exit decision over several PATHs, the progress it draws (a file that
 * finishes must not move the bar back, one written meanwhile grows the
 * total), and what it prints for failed and still pending entries. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sync_cmd.h"

/* A reply of the daemon: the numbers, and the lists as JSON text. */
static void reply(struct cfs_json_sync *s, long files, long bytes, long left, long up,
		  const char *waiting, const char *failed)
{
	char txt[2048];
	snprintf(txt, sizeof(txt), "{\"files\":%ld,\"bytes\":%ld,\"bytes_left\":%ld,"
		 "\"uploading\":%ld,\"waiting\":%s,\"failed\":%s}", files, bytes, left, up,
		 waiting ? waiting : "[]", failed ? failed : "[]");
	cfs_json_sync_cleanup(s);
	int rc = cfs_json_parse_sync(txt, strlen(txt), s);
	CHECK_EQ(rc, 0);
}

static void cleanup(struct cfs_json_sync *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cfs_json_sync_cleanup(&s[i]);
}

static void decide(void)
{
	struct cfs_json_sync st[2] = { 0 };
	reply(&st[0], 0, 0, 0, 0, NULL, NULL);
	reply(&st[1], 0, 0, 0, 0, NULL, NULL);
	CHECK_EQ(cfs_sync_decide(st, 2), CFS_SYNC_DONE);
	reply(&st[1], 1, 100, 100, 0, "[{\"path\":\"a\",\"error\":\"network down\"}]", NULL);
	CHECK_EQ(cfs_sync_decide(st, 2), CFS_SYNC_PENDING); /* waiting is not failing */
	CHECK_EQ(cfs_sync_decide(st, 1), CFS_SYNC_DONE);
	reply(&st[0], 3, 300, 10, 2, NULL,
	      "[{\"path\":\"ckpt/model.pt\",\"error\":\"Drive storage quota exceeded\"}]");
	CHECK_EQ(cfs_sync_decide(st, 2), CFS_SYNC_FAILED); /* at once, others still going */
	/* bytes all confirmed but the entry not yet retired: still pending */
	reply(&st[0], 1, 300, 0, 0, NULL, NULL);
	CHECK_EQ(cfs_sync_decide(st, 1), CFS_SYNC_PENDING);
	cleanup(st, 2);
}

static void progress(void)
{
	struct cfs_json_sync st[1] = { 0 };
	struct cfs_sync_progress p = { 0 };
	char line[512];
	const double M = 1048576;

	/* round 1: two files of 50 MiB, 20 MiB of one already confirmed */
	reply(&st[0], 2, (long)(100 * M), (long)(80 * M), 2, NULL, NULL);
	cfs_sync_progress_add(&p, st, 1, 10.0);
	CHECK(p.done == (uint64_t)(20 * M) && p.sent == 0 && p.left == (uint64_t)(80 * M));
	cfs_sync_progress_line(&p, 0, line, sizeof(line));
	CHECK_STR(line, "sync: 20% 20.0 MiB/100.0 MiB 0.0 MB/s ETA --:-- files left 2 (2 uploading)");

	/* 1 s later 30 MiB more, and the first file finished: it leaves the
	 * reply (bytes falls by 50 MiB) but the bar only moves forward */
	reply(&st[0], 1, (long)(50 * M), (long)(50 * M), 1, NULL, NULL);
	cfs_sync_progress_add(&p, st, 1, 11.0);
	CHECK(p.done == (uint64_t)(50 * M) && p.sent == (uint64_t)(30 * M));
	cfs_sync_progress_line(&p, 0, line, sizeof(line));
	CHECK_STR(line, "sync: 50% 50.0 MiB/100.0 MiB 31.5 MB/s ETA 0:01 files left 1 (1 uploading)");

	/* a new 100 MiB checkpoint is written meanwhile: the total grows, done stays */
	reply(&st[0], 2, (long)(150 * M), (long)(150 * M), 1,
	      "[{\"path\":\"ckpt/\\u001b[2Jnew.pt\",\"error\":\"Drive rate limit; retrying\"}]", NULL);
	cfs_sync_progress_add(&p, st, 1, 12.0);
	CHECK(p.done == (uint64_t)(50 * M) && p.left == (uint64_t)(150 * M));
	CHECK_STR(p.why, "Drive rate limit; retrying");
	cfs_sync_progress_line(&p, 1, line, sizeof(line));
	CHECK_STR(line, "\r[#####...............]  25% 50.0 MiB/200.0 MiB 15.7 MB/s ETA 0:10, "
			"files left 2 (1 uploading, 1 waiting: Drive rate limit; retrying)   ");

	/* a daemon's slip (bytes_left past bytes) counts as all of it, no more */
	struct cfs_sync_progress q = { 0 };
	reply(&st[0], 1, 10, 99, 0, NULL, NULL);
	cfs_sync_progress_add(&q, st, 1, 0);
	CHECK(q.done == 0 && q.left == 10);

	/* nothing pending: 100%, no ETA to wait for */
	struct cfs_sync_progress z = { 0 };
	reply(&st[0], 0, 0, 0, 0, NULL, NULL);
	cfs_sync_progress_add(&z, st, 1, 5.0);
	cfs_sync_progress_line(&z, 0, line, sizeof(line));
	CHECK_STR(line, "sync: 100% 0.0 B/0.0 B 0.0 MB/s ETA 0:00 files left 0 (0 uploading)");
	cleanup(st, 1);
}

static char *printed(void (*fn)(FILE *, const struct cfs_json_sync *, size_t),
		     const struct cfs_json_sync *st, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	fn(f, st, n);
	fclose(f);
	return buf;
}

static void print_pending_30(FILE *f, const struct cfs_json_sync *st, size_t n)
{
	cfs_sync_print_pending(f, st, n, 30.04);
}

static void reports(void)
{
	struct cfs_json_sync st[2] = { 0 };
	reply(&st[0], 3, 3 << 20, 1 << 20, 1, NULL,
	      "[{\"path\":\"ckpt/model.pt\",\"error\":\"Drive storage quota exceeded; the bytes stay "
	      "staged and are retried (colabfs sync again after freeing space)\"},"
	      "{\"path\":\"shared/x\\u0007.bin\",\"error\":\"no write permission in this folder\"}]");
	reply(&st[1], 1, 10, 10, 0,
	      "[{\"path\":\"logs/run.txt\",\"error\":\"network down; retrying\"}]", NULL);
	char *out = printed(cfs_sync_print_failed, st, 2);
	CHECK_STR(out, "colabfs: sync: ckpt/model.pt: Drive storage quota exceeded; the bytes stay "
		       "staged and are retried (colabfs sync again after freeing space)\n"
		       "colabfs: sync: shared/x?.bin: no write permission in this folder\n"
		       "colabfs: sync: 2 other files are still pending (uploading in the "
		       "background)\n");
	free(out);

	out = printed(print_pending_30, st, 2);
	CHECK_STR(out, "colabfs: sync: timed out after 30.0 s: 4 files (3.0 MiB, 1.0 MiB not yet "
		       "in Drive) still pending, 1 uploading; the uploads go on in the background\n"
		       "colabfs: sync: waiting: logs/run.txt: network down; retrying\n");
	free(out);
	cleanup(st, 2);
}

int main(void)
{
	decide();
	progress();
	reports();
	return check_done("test_sync");
}
