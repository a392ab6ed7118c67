/* fhtab: the rows of open file handles, in memory that outlives the server
 * process (the supervisor's memfd), not in the cache index.
 *
 * Why here.  A handle row only has to survive the death of the process that
 * serves the mount, so the next server it starts can serve the handles the
 * kernel still holds.  It never has to survive the machine or the mount: a
 * new mount starts with no open handles.  Memory the supervisor keeps (it
 * created the memfd, every server maps it) has exactly that lifetime: it
 * outlives any number of server deaths, and is gone with the mount, so a
 * fresh mount starts with an empty table and no rows of earlier mounts
 * linger.  A put or a delete is a few stores into shared memory: no
 * system call, no lock, no disk write, where an LMDB row cost a write
 * transaction and a data sync per open and per release (MDB_NOMETASYNC:
 * 400-600 us with the cache folder on disk, 10-20 us on tmpfs).  A separate
 * MDB_NOSYNC LMDB environment was the other candidate: it would still take
 * LMDB's writer lock and copy pages twice per open, and need a file that a
 * fresh mount has to recreate; its only gain, surviving the supervisor, is
 * worthless since the mount dies with the supervisor.
 *
 * Layout (one region, all integers in host order: only processes of this
 * machine and binary map it): a 64-byte header (magic, slot count, slot
 * size) and fixed slots of CFS_FHTAB_SLOT_SIZE bytes: u64 word
 * (generation << 32 | state: 0 free, 1 being written, 2 live; the
 * generation grows at every claim), u64 handle number, u32 row length, u32
 * spare, then the row (opaque bytes, written by nsdb).  A row goes in the first free slot among the
 * CFS_FHTAB_PROBE slots from (fh mod slots); get and delete look at the same
 * slots only.  A full neighbourhood or a row too long gives -ENOSPC or
 * -E2BIG: the caller keeps that row elsewhere (nsdb: the cache index).
 *
 * Crash safety.  A row is written while its slot is "being written" and made
 * live by one atomic store; a delete is one atomic store back to free.  A
 * server killed mid-put leaves a slot being written: its open was never
 * answered (the row is written before the reply), so the next server's
 * attach frees it.  Only one server process runs at a time (the supervisor
 * starts the next after the last one died), so attach sees no writer.
 * A get copies the row and checks that the slot's generation and handle did
 * not change meanwhile (a delete and a new put racing it), else -ENOENT.
 *
 * Thread rules: any thread, no locks (compare-and-swap claims).  Returns 0
 * or -errno as stated; no function does I/O. */
#ifndef CFS_FHTAB_H
#define CFS_FHTAB_H

#include <stddef.h>
#include <stdint.h>

#define CFS_FHTAB_SLOTS 8192
#define CFS_FHTAB_SLOT_SIZE 256
#define CFS_FHTAB_PROBE 64
#define CFS_FHTAB_HEADER 64
/* the longest row a slot holds */
#define CFS_FHTAB_ROW_MAX (CFS_FHTAB_SLOT_SIZE - 24)

struct cfs_fhtab;

/* Bytes a region of `slots` slots needs. */
size_t cfs_fhtab_size(uint32_t slots);

/* Uses the region mem (len bytes, 8-byte aligned, zero-filled when new): a
 * region without the header gets one (a fresh mount); one with it keeps its
 * live rows (a server restarted under a live mount) and frees the slots a
 * dead process left half-written (*dropped, may be NULL: how many).
 * -EINVAL when len is too small or the header names another geometry;
 * -ENOMEM. */
int cfs_fhtab_attach(void *mem, size_t len, struct cfs_fhtab **out, uint32_t *dropped);
/* Frees the object; the region and its rows stay.  NULL-safe. */
void cfs_fhtab_detach(struct cfs_fhtab *t);

/* Stores row (len bytes) for handle fh, which must not be live.  -E2BIG when len > CFS_FHTAB_ROW_MAX, -ENOSPC when the probed slots are
 * all taken, -EINVAL for fh 0. */
int cfs_fhtab_put(struct cfs_fhtab *t, uint64_t fh, const void *row, size_t len);
/* Copies fh's row into row (cap bytes), its length into *len.  -ENOENT when
 * absent, -ERANGE when cap is too small. */
int cfs_fhtab_get(struct cfs_fhtab *t, uint64_t fh, void *row, size_t cap, size_t *len);
/* Deletes fh's row.  -ENOENT when absent. */
int cfs_fhtab_del(struct cfs_fhtab *t, uint64_t fh);
/* Live rows (a scan; for stats and tests). */
uint32_t cfs_fhtab_count(struct cfs_fhtab *t);

#endif
