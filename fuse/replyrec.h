/* replyrec: the reply journal, replies to state-changing requests recorded
 * in the supervisor's memory so that a request the kernel hands out again
 * is answered, not run twice.
 *
 * Why.  A request that changes state (create, mkdir, unlink, rename,
 * setattr, write, ...) must not run twice, yet after a server's death the
 * kernel resends what it was waiting on (resend mode: the same unique with
 * bit 63 set) and the next server replays what the request log still holds
 * (forward mode: the same unique).  A server that has the reply ready may
 * die before the kernel has it.  So serve_io records every reply to such a
 * request here, keyed by its unique without bit 63, before it writes it to
 * /dev/fuse, and answers a repeated request from the record.  (A server
 * that dies before the reply exists leaves no record: the request runs
 * again, and the core makes it exactly-once with the unique, see
 * cfs_serve_current_unique in serve_io.h.)
 *
 * The journal is a ring of CFS_REPLYREC_N records of CFS_REPLYREC_SIZE
 * bytes (512 KiB, in struct cfs_super_shm, so it is per mount and starts
 * empty at every mount).  A record is only needed until the kernel has the
 * reply, i.e. at most until the next server has read the repeated requests
 * (which it does first): the oldest record is reused.  A reply longer than
 * CFS_REPLYREC_DATA bytes (none of the state-changing opcodes: the longest,
 * CREATE's, is 160 bytes) is not recorded.
 *
 * Each record is a seqlock: seq odd while it is written, even when whole;
 * a reader copies and checks that seq did not move.  A writer killed half
 * way leaves seq odd; cfs_replyrec_recover (the next server, before it
 * serves) drops such records.  Thread rules: lock-free, any thread of one
 * server process; cfs_replyrec_recover while no other thread uses it.
 * Returns: as stated. */
#ifndef CFS_REPLYREC_H
#define CFS_REPLYREC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define CFS_REPLYREC_N 1024
#define CFS_REPLYREC_SIZE 512
#define CFS_REPLYREC_DATA (CFS_REPLYREC_SIZE - 24)

struct cfs_replyrec_ent {
	uint64_t seq;    /* odd: being written; 0: never written */
	uint64_t key;    /* the request's unique without bit 63; 0: none */
	uint32_t len;
	uint32_t opcode;
	uint8_t data[CFS_REPLYREC_DATA] __attribute__((aligned(8)));
};

struct cfs_replyrec {
	uint64_t head; /* records ever started: the next one is head % N */
	uint8_t pad[56];
	struct cfs_replyrec_ent ent[CFS_REPLYREC_N];
};

/* 1 when a request of this opcode changes state (its reply is journalled). */
int cfs_replyrec_changes_state(uint32_t opcode);

/* Records the reply (count pieces, a fuse_out_header first) to the request
 * key (its unique without bit 63) of this opcode.  Returns 0, -E2BIG (too
 * long: not recorded), -EINVAL (key 0), -EBUSY (every record tried was being
 * written). */
int cfs_replyrec_put(struct cfs_replyrec *r, uint64_t key, uint32_t opcode,
		     const struct iovec *iov, int count);

/* The recorded reply to request key of this opcode: 1 and the reply in
 * buf (*len bytes, at most cap), or 0 when there is none. */
int cfs_replyrec_get(const struct cfs_replyrec *r, uint64_t key, uint32_t opcode, void *buf,
		     size_t cap, size_t *len);

/* A new server, before it serves: drops the records a dead one was
 * writing. */
void cfs_replyrec_recover(struct cfs_replyrec *r);

#endif
