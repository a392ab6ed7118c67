/* reqlog: the requests a server has read and not answered yet, recorded in
 * memory the supervisor keeps (forward recovery mode, for kernels without
 * FUSE_NOTIFY_RESEND).
 *
 * Why.  A request a server has read is the kernel's to wait on until a
 * reply with its unique comes; if the server dies first and nobody serves
 * it again, its reader hangs for ever.  Without the kernel's resend, the
 * next server has to serve it, so someone must still have its bytes.  The
 * server reads every request straight into a slot of this log (readv: the
 * slot first, the rest of libfuse's buffer after it), so the bytes are in
 * the supervisor's memory the moment read(2) returns, before anything can
 * go wrong, and frees the slot once its reply is written.  The supervisor
 * does no work per request (it used to read every request, forward it over
 * a socket and take an ack for every reply: two more processes woken per
 * request).
 *
 * A slot (CFS_REQLOG_SLOT bytes): u64 word (generation << 32 | state), u32
 * len, u32 flags, then up to CFS_REQLOG_DATA bytes of the request.  States:
 * free; reading (a server thread waits in readv on it; the request's unique
 * is zeroed first, so a nonzero unique after a death means the read
 * completed: the kernel copies a request whole or fails it, and a dying
 * process finishes the system call first); held (a request being served);
 * replay (left by a dead server, to be served by the next).
 *
 * Long requests.  A WRITE (up to CFS_MAX_WRITE bytes of data, the mount's
 * max_write) or a SETXATTR does not fit a slot.  A reading thread also
 * takes one of CFS_REQLOG_BIGS big slots (cfs_reqlog_claim_big: the slot's
 * flags name it before the read starts) and reads into [slot data][big
 * slot][the rest of libfuse's buffer], so a request of up to
 * CFS_REQLOG_WHOLE bytes is recorded whole by the kernel's own copy, as
 * atomically as a short one.  A request that did not need the big slot
 * gives it back at once (cfs_reqlog_filled); one that did keeps it until
 * its small slot is freed.  With no big slot free (more threads waiting in
 * read than big slots: --max-threads above CFS_REQLOG_BIGS), or for a
 * request longer than CFS_REQLOG_WHOLE, the slot keeps only the header and
 * is marked partial: it cannot be replayed, and the next server answers it
 * EIO.  Big slots are owned through the small slot that names them; a new
 * server's cfs_reqlog_recover frees every big slot no replay names (one a
 * dead thread had claimed and not yet named included).
 *
 * Memory.  The log is a fixed CFS_REQLOG_SLOTS * 512 B (1 MiB) plus
 * CFS_REQLOG_BIGS * (CFS_MAX_WRITE + 4 KiB) (8.25 MiB) = 9.25 MiB of the
 * supervisor's memfd, whatever the load; it is only touched (hence only
 * takes memory) in forward mode.
 *
 * Restart.  cfs_reqlog_recover (the new server, before it serves) turns
 * every held slot, and every reading slot whose unique is set, into a
 * replay; cfs_reqlog_take hands them out in the order the kernel sent them.
 * A request being replayed is held again, so a server dying during the
 * replay leaves it for the next one.  Serving a read-only request twice is
 * harmless (the kernel drops a reply to a request it no longer waits on); a
 * request that changes state is answered from the reply journal
 * (replyrec.h) when its reply was recorded, else served again with the same
 * unique (cfs_serve_current_unique, serve_io.h), which the core uses to
 * make it exactly-once.
 *
 * The log lives in struct cfs_super_shm (super.h); its pages are touched at
 * attach so that no read(2) into it can fault.  Thread rules: any thread
 * of one server process, lock-free; the supervisor reads and drops slots
 * only while no server runs.  Returns: as stated. */
#ifndef CFS_REQLOG_H
#define CFS_REQLOG_H

#include <stddef.h>
#include <stdint.h>

#define CFS_REQLOG_SLOTS 2048 /* twice the most --max-threads: a dead server's and ours */
#define CFS_REQLOG_SLOT 512
#define CFS_REQLOG_DATA (CFS_REQLOG_SLOT - 16)
#define CFS_REQLOG_PARTIAL 1u
/* flags >> CFS_REQLOG_BIG_SHIFT: 1 + the big slot holding the rest, 0: none */
#define CFS_REQLOG_BIG_SHIFT 16

/* The most data bytes of a WRITE (the mount's max_write). */
#define CFS_MAX_WRITE (128 * 1024)
#define CFS_REQLOG_BIGS 64 /* the default --max-threads: one for each thread in read */
#define CFS_REQLOG_BIG_SLOT (CFS_MAX_WRITE + 4096)
#define CFS_REQLOG_BIG_DATA (CFS_REQLOG_BIG_SLOT - 64)
/* The longest request recorded whole: a WRITE of CFS_MAX_WRITE bytes with
 * its headers, and a SETXATTR of a 64 KiB value, fit. */
#define CFS_REQLOG_WHOLE (CFS_REQLOG_DATA + CFS_REQLOG_BIG_DATA)

struct cfs_reqlog_slot {
	uint64_t word;
	uint32_t len;
	uint32_t flags;
	uint8_t data[CFS_REQLOG_DATA] __attribute__((aligned(8)));
};

struct cfs_reqlog_big {
	uint64_t owner; /* 0: free, else 1 + the small slot it belongs to */
	uint8_t pad[56];
	uint8_t data[CFS_REQLOG_BIG_DATA] __attribute__((aligned(64)));
};

struct cfs_reqlog {
	struct cfs_reqlog_slot slot[CFS_REQLOG_SLOTS];
	struct cfs_reqlog_big big[CFS_REQLOG_BIGS];
};

/* What the supervisor's crash-loop guard needs of a recorded request. */
struct cfs_reqlog_info {
	uint64_t unique;
	uint32_t opcode;
};

/* Touches every page (no fault while the kernel copies into a slot). */
void cfs_reqlog_prefault(struct cfs_reqlog *l);

/* Takes a free slot for a read, trying slot `hint` first; its unique is
 * zeroed.  Returns the slot index or -ENOSPC. */
int cfs_reqlog_claim(struct cfs_reqlog *l, unsigned hint);
/* Gives reading slot i a big slot for the part of a request past its data,
 * trying big slot `hint` first.  Returns the big slot's index, or -ENOSPC
 * (a request longer than CFS_REQLOG_DATA is then recorded partial). */
int cfs_reqlog_claim_big(struct cfs_reqlog *l, int i, unsigned hint);
/* The read into slot i returned n bytes (n < 0: it failed): the slot holds
 * the request while it has a reply to wait for, else it is freed.  When n
 * exceeds CFS_REQLOG_DATA and the slot has no big slot, or exceeds
 * CFS_REQLOG_WHOLE, the slot keeps the header and is marked partial; a big
 * slot the request did not need is given back. */
void cfs_reqlog_filled(struct cfs_reqlog *l, int i, long n);
/* The reply to unique was written (or refused): frees its held slot,
 * trying slot `hint` first.  -ENOENT when no slot holds it. */
int cfs_reqlog_done(struct cfs_reqlog *l, uint64_t unique, int hint);
/* The opcode of the held request unique (trying slot `hint` first), or
 * -ENOENT when no slot holds it. */
int cfs_reqlog_opcode(const struct cfs_reqlog *l, uint64_t unique, int hint);

/* A new server: turns what a dead one left into replays and frees the
 * rest; *order gets the replay slot indices in the kernel's order (malloc'd,
 * *n of them; the caller frees).  Returns 0 or -ENOMEM. */
int cfs_reqlog_recover(struct cfs_reqlog *l, int **order, size_t *n);
/* Takes replay slot i for serving (replay -> held) and copies its request,
 * reassembled from its slot and big slot, into buf (cap bytes).  Returns its length, or -ENOENT when slot i is no
 * replay (the supervisor answered it), -E2BIG for a partial one (still
 * held: the caller answers it and calls cfs_reqlog_done). */
long cfs_reqlog_take(struct cfs_reqlog *l, int i, void *buf, size_t cap);

/* The supervisor, with no server running: the requests recorded (held,
 * replay, or read into a reading slot), up to cap of them.  Returns how
 * many. */
size_t cfs_reqlog_pending(const struct cfs_reqlog *l, struct cfs_reqlog_info *out, size_t cap);
/* The supervisor answered unique itself: never replay it.  -ENOENT when no
 * slot records it. */
int cfs_reqlog_drop(struct cfs_reqlog *l, uint64_t unique);

/* 1 when the kernel waits for a reply to a request of opcode op (all but
 * FORGET, BATCH_FORGET and INTERRUPT). */
int cfs_reqlog_has_reply(uint32_t op);

#endif
