/* arena: the files that hold cached block data, one per size class.
 *
 * Size classes are those of classes.h (eight per doubling, 64 B up to the
 * block size; the class code is the index into struct cfs_arenas).  The arena
 * of a class is the file "arena-<size>.dat" in the cache folder (the naming
 * rule is in format.h: "arena-576.dat", "arena-4k.dat", "arena-1m.dat"),
 * created 0600 when the class gets its first slot: a class no block ever used
 * has no file.  It holds slots of exactly the class size back to back from
 * offset 0: slot i is bytes [i * size, (i + 1) * size).  No header; what a
 * slot holds is recorded only in the index (see store.h).  Files grow by
 * ftruncate (sparse) when no slot is free; freed slots are punched out
 * (FALLOC_FL_PUNCH_HOLE) so tmpfs gets the memory back (whole pages only: a
 * page shared with a live slot stays).
 *
 * Thread rules: the slot bitmaps (claim/alloc/clear) belong to the caller's
 * lock; read/write/punch only use the fixed file descriptor and may run
 * unlocked on a slot the caller owns.  Functions return 0 or -errno. */
#ifndef CFS_ARENA_H
#define CFS_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "classes.h"

struct cfs_arena {
	uint32_t size;    /* slot size in bytes: cfs_class_size(code) */
	uint8_t code;     /* class code (classes.h) */
	int fd;           /* -1 while the class has no file */
	uint64_t nslots;  /* slots the file holds: file size / size */
	uint64_t *bits;   /* in-use bitmap, one bit per slot */
	uint64_t nused;   /* bits set */
	uint64_t hint;    /* no free slot in words below this one */
};

struct cfs_arenas {
	unsigned n;       /* classes: codes 0..n-1 (n - 1 = cfs_class_top(block size)) */
	int dirfd;        /* the cache folder, where files are created; -1 when closed */
	struct cfs_arena a[CFS_CLASS_CODES]; /* by code */
};

/* Opens the arena files of block_size (cfs_class_block_ok) that exist under
 * dir; the others are made by cfs_arenas_alloc when needed.  On failure
 * everything opened is closed again. */
int cfs_arenas_open(struct cfs_arenas *as, const char *dir, uint32_t block_size);
/* Closes the files and frees the bitmaps; safe on a zeroed struct and twice. */
void cfs_arenas_close(struct cfs_arenas *as);
/* Unlinks every arena file any code could have made under dir (a superset of
 * the power-of-4 scheme's names; they must not be open).  Missing files are
 * fine; returns the first other error. */
int cfs_arenas_remove(const char *dir);
/* Bytes the arena files occupy on their file system (st_blocks). */
uint64_t cfs_arenas_allocated(const struct cfs_arenas *as);

/* Finds a free slot (the lowest) of class code, creating the class's file or
 * growing it when none is; marks it.  -EINVAL for a code >= as->n. */
int cfs_arenas_alloc(struct cfs_arenas *as, unsigned code, uint64_t *slot);

/* Marks slot in use: -ERANGE past the file's end, -EEXIST if already used. */
int cfs_arena_claim(struct cfs_arena *a, uint64_t slot);
/* Marks slot free (bitmap only; punch it first if its memory should go). */
void cfs_arena_clear(struct cfs_arena *a, uint64_t slot);
/* Gives the memory of slots [slot, slot + count) back (best effort). */
void cfs_arena_punch(const struct cfs_arena *a, uint64_t slot, uint64_t count);
/* Punches every free slot, for open after a crash. */
void cfs_arena_punch_free(const struct cfs_arena *a);
/* 1 + the highest slot in use, 0 when none is. */
uint64_t cfs_arena_high(const struct cfs_arena *a);

/* Writes len (<= size) bytes at the start of slot; -ENOSPC when the file
 * system is full. */
int cfs_arena_write(const struct cfs_arena *a, uint64_t slot, const void *p, uint32_t len);
/* Reads len bytes at offset off of slot; -EIO if the file is shorter. */
int cfs_arena_read(const struct cfs_arena *a, uint64_t slot, uint32_t off, void *p, uint32_t len);

#endif
