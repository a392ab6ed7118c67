/* Unit tests: the reply journal (fuse/replyrec.c).  Replies recorded from
 * pieces come back whole for the same key and opcode only; oversize ones
 * are refused; the ring reuses its oldest record; a writer killed half way
 * through a record (SIGKILL in a child sharing the memory) leaves nothing a
 * lookup returns, and the next server's recover makes the record usable;
 * concurrent writers and readers never see a torn record. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "replyrec.h"
#include "shm_util.h"

static struct cfs_replyrec *new_ring(void)
{
	return test_shared_map(sizeof(struct cfs_replyrec));
}

/* Records a CREATE-sized reply for key: header + entry + open, the body
 * bytes derived from the key. */
static int put_create(struct cfs_replyrec *r, uint64_t key)
{
	struct fuse_out_header oh = { .len = 160, .error = 0, .unique = key | (1ull << 63) };
	struct fuse_entry_out e;
	struct fuse_open_out o;
	memset(&e, (int)(key & 0xff), sizeof(e));
	memset(&o, (int)((key >> 8) & 0xff), sizeof(o));
	struct iovec iov[3] = { { &oh, sizeof(oh) }, { &e, sizeof(e) }, { &o, sizeof(o) } };
	return cfs_replyrec_put(r, key, FUSE_CREATE, iov, 3);
}

static int is_create_of(const uint8_t *b, size_t n, uint64_t key)
{
	if (n != 160)
		return 0;
	const struct fuse_out_header *oh = (const void *)b;
	if (oh->len != 160 || oh->unique != (key | (1ull << 63)))
		return 0;
	for (size_t i = sizeof(*oh); i < sizeof(*oh) + sizeof(struct fuse_entry_out); i++)
		if (b[i] != (key & 0xff))
			return 0;
	for (size_t i = 144; i < 160; i++)
		if (b[i] != ((key >> 8) & 0xff))
			return 0;
	return 1;
}

static void test_opcodes(void)
{
	uint32_t yes[] = { FUSE_SETATTR, FUSE_MKNOD, FUSE_MKDIR, FUSE_UNLINK, FUSE_RMDIR,
			   FUSE_RENAME, FUSE_RENAME2, FUSE_LINK, FUSE_SYMLINK, FUSE_WRITE,
			   FUSE_CREATE, FUSE_SETXATTR, FUSE_REMOVEXATTR, FUSE_FALLOCATE };
	uint32_t no[] = { 0, FUSE_LOOKUP, FUSE_GETATTR, FUSE_READ, FUSE_OPEN, FUSE_RELEASE,
			  FUSE_READDIR, FUSE_GETXATTR, FUSE_FLUSH, FUSE_INIT, FUSE_FORGET };
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		CHECK(cfs_replyrec_changes_state(yes[i]));
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		CHECK(!cfs_replyrec_changes_state(no[i]));
}

static void test_put_get(void)
{
	struct cfs_replyrec *r = new_ring();
	uint8_t buf[CFS_REPLYREC_DATA];
	size_t n = 0;
	CHECK_EQ(cfs_replyrec_get(r, 42, FUSE_CREATE, buf, sizeof(buf), &n), 0); /* empty */
	CHECK_EQ(put_create(r, 42), 0);
	CHECK_EQ(put_create(r, 0x1234), 0);
	CHECK_EQ(cfs_replyrec_get(r, 42, FUSE_CREATE, buf, sizeof(buf), &n), 1);
	CHECK(is_create_of(buf, n, 42));
	CHECK_EQ(cfs_replyrec_get(r, 0x1234, FUSE_CREATE, buf, sizeof(buf), &n), 1);
	CHECK(is_create_of(buf, n, 0x1234));
	/* another opcode under the key, an unknown key, key 0, too small a buffer */
	CHECK_EQ(cfs_replyrec_get(r, 42, FUSE_MKDIR, buf, sizeof(buf), &n), 0);
	CHECK_EQ(cfs_replyrec_get(r, 44, FUSE_CREATE, buf, sizeof(buf), &n), 0);
	CHECK_EQ(cfs_replyrec_get(r, 0, FUSE_CREATE, buf, sizeof(buf), &n), 0);
	CHECK_EQ(cfs_replyrec_get(r, 42, FUSE_CREATE, buf, 100, &n), 0);
	/* an error reply: the header alone */
	struct fuse_out_header oh = { .len = sizeof(oh), .error = -EEXIST, .unique = 46 };
	struct iovec one = { &oh, sizeof(oh) };
	CHECK_EQ(cfs_replyrec_put(r, 46, FUSE_MKDIR, &one, 1), 0);
	CHECK_EQ(cfs_replyrec_get(r, 46, FUSE_MKDIR, buf, sizeof(buf), &n), 1);
	CHECK_EQ(n, sizeof(oh));
	CHECK_EQ(((struct fuse_out_header *)buf)->error, -EEXIST);
	/* oversize and keyless: not recorded */
	static uint8_t big[CFS_REPLYREC_DATA];
	struct iovec two[2] = { { &oh, sizeof(oh) }, { big, CFS_REPLYREC_DATA - sizeof(oh) } };
	CHECK_EQ(cfs_replyrec_put(r, 48, FUSE_SETATTR, two, 2), 0);
	two[1].iov_len++;
	CHECK_EQ(cfs_replyrec_put(r, 50, FUSE_SETATTR, two, 2), -E2BIG);
	CHECK_EQ(cfs_replyrec_get(r, 50, FUSE_SETATTR, buf, sizeof(buf), &n), 0);
	CHECK_EQ(cfs_replyrec_put(r, 0, FUSE_SETATTR, &one, 1), -EINVAL);
	munmap(r, sizeof(*r));
}

/* A full ring reuses the oldest record: the last N recorded stay. */
static void test_ring(void)
{
	struct cfs_replyrec *r = new_ring();
	uint8_t buf[CFS_REPLYREC_DATA];
	size_t n;
	for (uint64_t k = 2; k <= 2 * (CFS_REPLYREC_N + 10); k += 2)
		CHECK_EQ(put_create(r, k), 0);
	int old = 0, kept = 1;
	for (uint64_t k = 2; k <= 20; k += 2)
		old += cfs_replyrec_get(r, k, FUSE_CREATE, buf, sizeof(buf), &n);
	for (uint64_t k = 22; k <= 2 * (CFS_REPLYREC_N + 10); k += 2)
		kept &= cfs_replyrec_get(r, k, FUSE_CREATE, buf, sizeof(buf), &n) &&
			is_create_of(buf, n, k);
	CHECK_EQ(old, 0);
	CHECK(kept);
	munmap(r, sizeof(*r));
}

/* A writer killed in the middle of a record (seq odd, half the bytes): no
 * lookup returns it; recover drops it and its place can be written again. */
static void test_killed_writer(void)
{
	struct cfs_replyrec *r = new_ring();
	uint8_t buf[CFS_REPLYREC_DATA];
	size_t n;
	CHECK_EQ(put_create(r, 60), 0);
	int p[2];
	CHECK_EQ(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		/* what put does, stopped half way */
		uint64_t k = __atomic_fetch_add(&r->head, 1, __ATOMIC_RELAXED);
		struct cfs_replyrec_ent *e = &r->ent[k % CFS_REPLYREC_N];
		__atomic_store_n(&e->seq, e->seq + 1, __ATOMIC_RELEASE);
		e->key = 62;
		e->len = 160;
		e->opcode = FUSE_CREATE;
		memset(e->data, 0xee, 40);
		test_child_ready(p);
	}
	CHECK(pid > 0);
	CHECK_EQ(test_kill_when_ready(pid, p), 0);
	CHECK_EQ(r->ent[1].seq & 1, 1);
	CHECK_EQ(cfs_replyrec_get(r, 62, FUSE_CREATE, buf, sizeof(buf), &n), 0);
	cfs_replyrec_recover(r);
	CHECK_EQ(r->ent[1].seq & 1, 0);
	CHECK_EQ(cfs_replyrec_get(r, 62, FUSE_CREATE, buf, sizeof(buf), &n), 0);
	CHECK_EQ(cfs_replyrec_get(r, 60, FUSE_CREATE, buf, sizeof(buf), &n), 1); /* untouched */
	/* the record the dead writer held is used again once the ring wraps */
	for (uint64_t k = 100; k < 100 + 2 * CFS_REPLYREC_N; k += 2)
		CHECK_EQ(put_create(r, k), 0);
	CHECK_EQ(r->ent[1].key != 0 && r->ent[1].key != 62, 1);
	CHECK_EQ(cfs_replyrec_get(r, r->ent[1].key, FUSE_CREATE, buf, sizeof(buf), &n), 1);
	CHECK(is_create_of(buf, n, r->ent[1].key));
	munmap(r, sizeof(*r));
}

/* Writers wrapping the ring while readers look up: a reader gets the
 * record of its key whole, or nothing; never another key's or torn bytes. */
struct mt { struct cfs_replyrec *r; int id; unsigned seed; int bad; long hits; };

static void *writer(void *arg)
{
	struct mt *m = arg;
	for (uint64_t k = 2 + 2 * (uint64_t)m->id; k < 200000; k += 8)
		if (put_create(m->r, k))
			m->bad++;
	return NULL;
}

static void *reader(void *arg)
{
	struct mt *m = arg;
	uint8_t buf[CFS_REPLYREC_DATA];
	size_t n;
	for (int i = 0; i < 50000; i++) {
		uint64_t k = 2 + 2 * (uint64_t)(rand_r(&m->seed) % 100000);
		if (cfs_replyrec_get(m->r, k, FUSE_CREATE, buf, sizeof(buf), &n)) {
			m->hits++;
			m->bad += !is_create_of(buf, n, k);
		}
		if (i % 64 == 0)
			usleep(1);
	}
	return NULL;
}

static void test_concurrent(void)
{
	struct cfs_replyrec *r = new_ring();
	pthread_t t[6];
	struct mt m[6];
	for (int i = 0; i < 6; i++) {
		m[i] = (struct mt){ .r = r, .id = i, .seed = (unsigned)i };
		pthread_create(&t[i], NULL, i < 4 ? writer : reader, &m[i]);
	}
	int bad = 0;
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		bad += m[i].bad;
	}
	CHECK_EQ(bad, 0);
	munmap(r, sizeof(*r));
}

int main(void)
{
	test_opcodes();
	test_put_get();
	test_ring();
	test_killed_writer();
	test_concurrent();
	return check_done("test_replyrec");
}
