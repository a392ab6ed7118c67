/* replyrec: the reply journal (see replyrec.h). */
#define _GNU_SOURCE
#include "replyrec.h"

#include <errno.h>
#include <linux/fuse.h>
#include <string.h>

#define PUT_TRIES 8

_Static_assert(sizeof(struct cfs_replyrec_ent) == CFS_REPLYREC_SIZE, "record size");
_Static_assert(CFS_REPLYREC_DATA >= sizeof(struct fuse_out_header) +
					    sizeof(struct fuse_entry_out) +
					    sizeof(struct fuse_open_out),
	       "room for a CREATE reply");

int cfs_replyrec_changes_state(uint32_t op)
{
	switch (op) {
	case FUSE_SETATTR: case FUSE_MKNOD: case FUSE_MKDIR: case FUSE_UNLINK: case FUSE_RMDIR:
	case FUSE_RENAME: case FUSE_RENAME2: case FUSE_LINK: case FUSE_SYMLINK: case FUSE_WRITE:
	case FUSE_CREATE: case FUSE_SETXATTR: case FUSE_REMOVEXATTR: case FUSE_FALLOCATE:
		return 1;
	default:
		return 0;
	}
}

int cfs_replyrec_put(struct cfs_replyrec *r, uint64_t key, uint32_t opcode,
		     const struct iovec *iov, int count)
{
	if (!key)
		return -EINVAL;
	size_t len = 0;
	for (int i = 0; i < count; i++)
		len += iov[i].iov_len;
	if (len > CFS_REPLYREC_DATA)
		return -E2BIG;
	for (int t = 0; t < PUT_TRIES; t++) {
		uint64_t k = __atomic_fetch_add(&r->head, 1, __ATOMIC_RELAXED);
		struct cfs_replyrec_ent *e = &r->ent[k % CFS_REPLYREC_N];
		uint64_t s = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
		if ((s & 1) || !__atomic_compare_exchange_n(&e->seq, &s, s + 1, 0, __ATOMIC_ACQ_REL,
							    __ATOMIC_RELAXED))
			continue; /* another writer has it (a whole ring ago) */
		__atomic_store_n(&e->key, key, __ATOMIC_RELAXED);
		__atomic_store_n(&e->len, (uint32_t)len, __ATOMIC_RELAXED);
		__atomic_store_n(&e->opcode, opcode, __ATOMIC_RELAXED);
		size_t at = 0;
		for (int i = 0; i < count; i++) {
			memcpy(e->data + at, iov[i].iov_base, iov[i].iov_len);
			at += iov[i].iov_len;
		}
		__atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
		return 0;
	}
	return -EBUSY;
}

int cfs_replyrec_get(const struct cfs_replyrec *r, uint64_t key, uint32_t opcode, void *buf,
		     size_t cap, size_t *len)
{
	if (!key)
		return 0;
	for (size_t i = 0; i < CFS_REPLYREC_N; i++) {
		const struct cfs_replyrec_ent *e = &r->ent[i];
		uint64_t s = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
		if (!s || (s & 1) || __atomic_load_n(&e->key, __ATOMIC_RELAXED) != key)
			continue;
		uint32_t n = __atomic_load_n(&e->len, __ATOMIC_RELAXED);
		uint32_t op = __atomic_load_n(&e->opcode, __ATOMIC_RELAXED);
		if (op != opcode || n > cap || n > CFS_REPLYREC_DATA)
			continue;
		memcpy(buf, e->data, n);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != s)
			continue; /* reused while we copied: that record is gone */
		*len = n;
		return 1;
	}
	return 0;
}

void cfs_replyrec_recover(struct cfs_replyrec *r)
{
	for (size_t i = 0; i < CFS_REPLYREC_N; i++) {
		struct cfs_replyrec_ent *e = &r->ent[i];
		uint64_t s = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
		if (!(s & 1))
			continue;
		__atomic_store_n(&e->key, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&e->seq, s + 1, __ATOMIC_RELEASE);
	}
}
