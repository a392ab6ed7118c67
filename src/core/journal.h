/* journal: the write journal, what colabfs still owes Drive, kept in LMDB
 * environments of its own (journal.mdb and journal-recent.mdb in the staging
 * folder, through cache/index.h) so that losing or resetting the cache index
 * never loses a pending upload.
 *
 * One entry per Drive file whose content is staged locally and not yet
 * durable in Drive, keyed by the file's Drive id ("f:" + id): the id (for a
 * new file, reserved with files.generateIds, so a create retried after a
 * crash can never make a duplicate), the parent folder and name it is to
 * have, the revision it was based on (for the conflict check), the Drive
 * file it replaces (a rename over an existing file: trashed once this
 * upload is durable), the staged length and generation, and the resumable
 * session URI with the offset Drive confirmed.  Entries carry a sequence
 * number: replay (cfs_journal_load) hands them out in the order they were
 * first written.  An entry is rewritten whole (a put replaces).
 *
 * Durability, as on any POSIX file system: a put, a removal or a done row is
 * committed before it returns, but not flushed to disk (a write into the
 * page cache, tens of microseconds), so it survives the death of the process
 * (a server restarted after a crash sees it) but not that of the machine.
 * cfs_journal_sync makes entries durable against a machine crash, in one
 * flushed commit for all of them (fsync and `colabfs sync` call it; so does
 * the uploader before it sends a file, so no replayed upload can send bytes
 * the machine lost).  After a machine restart the entries never synced are
 * gone, and those synced are as they were synced.  A clean close flushes
 * everything (journal.c says how).
 *
 * Done rows ("u:" + u64 request unique) remember what a state-changing
 * request answered, so a request the kernel sends again after a server
 * death (resend or forward replay) gets the same answer instead of being
 * done twice; cfs_journal_clear_done drops them at a fresh mount (request
 * numbers start again with a new FUSE connection).
 *
 * Thread-safe.  Returns 0, -ENOENT (absent), -EINVAL (a field too long),
 * -ENOMEM, CFS_E_PROTO (a damaged entry: skipped by load, logged) or a store
 * error (index.h). */
#ifndef CFS_JOURNAL_H
#define CFS_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"

#define CFS_JOURNAL_NAME_MAX 1024 /* bytes of a Drive name, UTF-8 */
#define CFS_JOURNAL_URI_MAX 2048

/* What the staged bytes of an entry are (replay acts on it):
 *   CLOSED    complete: the last writer closed (or fsync'd) them; uploaded.
 *   WRITING   a writer has changed them since: they may be half written.  A
 *             new mount never uploads them (Drive keeps its file; the bytes
 *             stay staged and `colabfs sync` reports them); a server
 *             restarted under a live mount waits for the writer's close.
 *   TORN      a write or the staging failed (a full staging disk): never
 *             uploaded until the file is written again from the start.
 *   CLEAN     the bytes are Drive's revision base_rev, unchanged (opened for
 *             writing, not written): nothing to upload.
 *   SNAPSHOT  a consistent copy of a file still open for writing, taken to
 *             be uploaded while it stays open: complete as of then.
 * Rows written before states existed read as CLOSED. */
enum cfs_jstate {
	CFS_JSTATE_CLOSED = 0,
	CFS_JSTATE_WRITING = 1,
	CFS_JSTATE_TORN = 2,
	CFS_JSTATE_CLEAN = 3,
	CFS_JSTATE_SNAPSHOT = 4,
};

struct cfs_journal;

struct cfs_jent {
	uint64_t seq;                 /* replay order (set by put when 0) */
	char id[CFS_ID_MAX];          /* the file's Drive id (reserved when new) */
	char parent[CFS_ID_MAX];      /* folder it goes into */
	char name[CFS_JOURNAL_NAME_MAX];
	char base_rev[CFS_ID_MAX];    /* headRevisionId it was opened at; "" new */
	char replaces[CFS_ID_MAX];    /* Drive id to trash once uploaded, or "" */
	char rep_name[CFS_JOURNAL_NAME_MAX]; /* the name and folder it had when it */
	char rep_parent[CFS_ID_MAX];         /* was replaced (only that file goes) */
	char uri[CFS_JOURNAL_URI_MAX];/* resumable session, or "" */
	char sent_name[CFS_JOURNAL_NAME_MAX]; /* the name and folder the session was */
	char sent_parent[CFS_ID_MAX];         /* started with (a rename since: redone) */
	int is_new;                   /* not created in Drive yet */
	int removed;                  /* a tombstone: the new file was removed here; the
				       * item goes from Drive if a dead process made it */
	int64_t size;                 /* staged bytes to upload */
	int64_t mtime_ns;             /* modifiedTime to give it */
	int64_t confirmed;            /* bytes of the session Drive confirmed */
	uint64_t gen;                 /* staged generation the entry describes */
	int state;                    /* enum cfs_jstate */
};

/* Opens (creates) dir/journal.mdb and dir/journal-recent.mdb. */
int cfs_journal_open(const char *dir, struct cfs_journal **out);
/* The same as if the machine's boot id were boot_id (NULL: the machine's):
 * a test plays a machine restart with it. */
int cfs_journal_open_as(const char *dir, const char *boot_id, struct cfs_journal **out);
/* cfs_journal_sync(j, NULL), done rows made durable too, then closes.
 * NULL-safe. */
void cfs_journal_close(struct cfs_journal *j);

/* Writes e (e->seq 0: the next sequence number, stored back in e). */
int cfs_journal_put(struct cfs_journal *j, struct cfs_jent *e);
int cfs_journal_get(struct cfs_journal *j, const char *id, struct cfs_jent *e);
/* -ENOENT when absent. */
int cfs_journal_del(struct cfs_journal *j, const char *id);
/* Every entry, in sequence order: *out (malloc'd, *n of them; the caller
 * frees).  Damaged entries are skipped and counted in *damaged (may be NULL). */
int cfs_journal_load(struct cfs_journal *j, struct cfs_jent **out, size_t *n, size_t *damaged);

/* Makes durable (safe against a machine crash) the entry of id and every
 * removal so far, in one flushed commit; the caller has flushed the staged
 * bytes the entry describes first (fdatasync), so an entry never outlives a
 * machine crash that its bytes did not.  id NULL: every entry, after a flush
 * of the file system of the journal's folder (syncfs), which is where the
 * staged files are (main.c opens both in the staging folder).  Nothing to
 * make durable costs no flush. */
int cfs_journal_sync(struct cfs_journal *j, const char *id);
/* 1 when some entry or removal is not durable yet, 0 when none, or an error. */
int cfs_journal_sync_pending(struct cfs_journal *j);

/* Done rows: result (0 or -errno) and ino of request unique; never flushed
 * (they answer a request sent again to a restarted server, within a boot). */
int cfs_journal_done_put(struct cfs_journal *j, uint64_t unique, int result, uint64_t ino);
int cfs_journal_done_get(struct cfs_journal *j, uint64_t unique, int *result, uint64_t *ino);
int cfs_journal_clear_done(struct cfs_journal *j);

/* Whose journal this is: owner (the API URL its rows were written for) is
 * recorded when there is none; *same says whether it is the recorded one.
 * Rows of another owner are never replayed against this one. */
int cfs_journal_owner(struct cfs_journal *j, const char *owner, int *same);
/* Moves every entry out of replay's reach (kept under "a:" keys for a
 * person to recover; their staged files stay) and records owner; *moved
 * says how many. */
int cfs_journal_set_aside(struct cfs_journal *j, const char *owner, size_t *moved);
/* cfs_journal_open; a journal.mdb too damaged to open (-EUCLEAN,
 * CFS_E_PROTO) is renamed journal.mdb.damaged-TIME (its path in aside, else
 * aside is "") and a new one opened: the staged files stay where they are. */
int cfs_journal_open_or_reset(const char *dir, struct cfs_journal **out, char *aside, size_t cap);

/* Pure: the row format (exposed for the unit test and the fuzzer). */
struct cfs_buf;
int cfs_journal_encode(const struct cfs_jent *e, struct cfs_buf *out);
int cfs_journal_decode(const void *row, size_t len, struct cfs_jent *e);

#endif
