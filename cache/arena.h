/* arena: the files that hold cached block data, one per size class.
 *
 * Size classes are the powers of 4 from 4 KiB up to the block size, plus the
 * block size itself when it is not a power of 4 (block size 1 MiB: 4k 16k 64k
 * 256k 1m; 2 MiB: 4k 16k 64k 256k 1m 2m).  The arena of a class is the file
 * "arena-<size>.dat" in the cache folder (size written as "<n>k" below 1 MiB,
 * "<n>m" from 1 MiB), created 0600, holding slots of exactly the class size
 * back to back from offset 0: slot i is bytes [i * size, (i + 1) * size).  No
 * header; what a slot holds is recorded only in the index (see store.h).
 * Files grow by ftruncate (sparse) when no slot is free; freed slots are
 * punched out (FALLOC_FL_PUNCH_HOLE) so tmpfs gets the memory back.
 *
 * Thread rules: the slot bitmaps (claim/alloc/clear) belong to the caller's
 * lock; read/write/punch only use the fixed file descriptor and may run
 * unlocked on a slot the caller owns.  Functions return 0 or -errno. */
#ifndef CFS_ARENA_H
#define CFS_ARENA_H

#include <stddef.h>
#include <stdint.h>

#define CFS_ARENA_MIN_LOG2 12  /* 4 KiB, the smallest class */
#define CFS_ARENA_MAX_LOG2 26  /* 64 MiB, the largest block size */
#define CFS_ARENA_MAX_CLASSES 9

struct cfs_arena {
	uint32_t size;    /* slot size in bytes */
	uint8_t log2;     /* size == 1 << log2 */
	int fd;           /* -1 when not open */
	uint64_t nslots;  /* slots the file holds: file size / size */
	uint64_t *bits;   /* in-use bitmap, one bit per slot */
	uint64_t nused;   /* bits set */
	uint64_t hint;    /* no free slot in words below this one */
};

struct cfs_arenas {
	unsigned n;       /* classes, smallest first */
	struct cfs_arena a[CFS_ARENA_MAX_CLASSES];
};

/* Fills sizes (CFS_ARENA_MAX_CLASSES entries) with the classes of block_size
 * (a power of two, 64 KiB..64 MiB); returns how many. */
unsigned cfs_arena_classes(uint32_t block_size, uint32_t *sizes);

/* "arena-1m.dat" for size 1 MiB.  cap >= 32. */
void cfs_arena_name(uint32_t size, char *out, size_t cap);

/* Opens (creating 0600) the arena files of block_size under dir.  On failure
 * everything opened is closed again. */
int cfs_arenas_open(struct cfs_arenas *as, const char *dir, uint32_t block_size);
/* Closes the files and frees the bitmaps; safe on a zeroed struct and twice. */
void cfs_arenas_close(struct cfs_arenas *as);
/* Unlinks every arena file any block size could have made under dir (they
 * must not be open).  Missing files are fine; returns the first other error. */
int cfs_arenas_remove(const char *dir);
/* Bytes the arena files occupy on their file system (st_blocks). */
uint64_t cfs_arenas_allocated(const struct cfs_arenas *as);

/* Index of the smallest class that holds len bytes, or -EINVAL. */
int cfs_arenas_class_for(const struct cfs_arenas *as, uint32_t len);
/* Index of the class with this log2 size, or -ENOENT. */
int cfs_arenas_class_of_log2(const struct cfs_arenas *as, unsigned log2);

/* Marks slot in use: -ERANGE past the file's end, -EEXIST if already used. */
int cfs_arena_claim(struct cfs_arena *a, uint64_t slot);
/* Finds a free slot (the lowest), growing the file when none is; marks it. */
int cfs_arena_alloc(struct cfs_arena *a, uint64_t *slot);
/* Marks slot free (bitmap only; punch it first if its memory should go). */
void cfs_arena_clear(struct cfs_arena *a, uint64_t slot);
/* Gives the memory of slots [slot, slot + count) back (best effort). */
void cfs_arena_punch(const struct cfs_arena *a, uint64_t slot, uint64_t count);
/* Punches every free slot, for open after a crash. */
void cfs_arena_punch_free(const struct cfs_arena *a);

/* Writes len (<= size) bytes at the start of slot; -ENOSPC when the file
 * system is full. */
int cfs_arena_write(const struct cfs_arena *a, uint64_t slot, const void *p, uint32_t len);
/* Reads len bytes at offset off of slot; -EIO if the file is shorter. */
int cfs_arena_read(const struct cfs_arena *a, uint64_t slot, uint32_t off, void *p, uint32_t len);

#endif
