/* format: the cache folder's on-disk format, written down once — the names
 * of its files and tables, the key limit, and the encoding of the header row,
 * of the block rows and their keys, and of the arena file names.  Header only
 * and pure (no I/O, no state): the store (cache/store*.c), the index
 * (cache/index.c), the arenas (cache/arena.c) and the GPU loader's read-only
 * view (kernels/cacheview.c) all encode and decode through it, so they cannot
 * disagree.  The layout itself is described in store.h; integers are
 * little-endian (le.h) unless said otherwise. */
#ifndef CFS_FORMAT_H
#define CFS_FORMAT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "classes.h"
#include "le.h"

/* Files of the cache folder (heat.dat: heat.h). */
#define CFS_FMT_INDEX_FILE "index.mdb"
#define CFS_FMT_CHECK_MARKER "index.checking" /* exists while an open reads the index */

/* Named LMDB databases of index.mdb. */
#define CFS_FMT_TABLE_BLOCKS "blocks"
#define CFS_FMT_TABLE_DIRS "dirs"
#define CFS_FMT_TABLE_INODES "inodes"
#define CFS_FMT_TABLE_INOS "inos"
#define CFS_FMT_TABLE_META "meta"
#define CFS_FMT_TABLE_STORE "store"

#define CFS_FMT_KEY_MAX 200                   /* longest content key */
#define CFS_FMT_BKEY_MAX (CFS_FMT_KEY_MAX + 9) /* longest block key */

/* --- header row: "store" table, key "header" ------------------------------ */

#define CFS_FMT_HEADER_KEY "header"
#define CFS_FMT_HEADER_MAGIC "CFSSTOR1" /* 8 bytes, no NUL */
#define CFS_FMT_HEADER_SIZE 64
#define CFS_FMT_HEADER_VERSION 2 /* 1: power-of-4 classes */

struct cfs_fmt_header {
	uint32_t version;
	uint32_t block_size;
	uint64_t epoch;   /* opens so far */
	uint32_t scheme;  /* class scheme (CFS_CLASS_SCHEME) */
	uint32_t codes;   /* class codes: top + 1 */
};

/* The header of this format for block size bs (cfs_class_block_ok). */
static inline void cfs_fmt_header_encode(uint32_t bs, uint64_t epoch,
					 unsigned char out[CFS_FMT_HEADER_SIZE])
{
	memset(out, 0, CFS_FMT_HEADER_SIZE);
	memcpy(out, CFS_FMT_HEADER_MAGIC, 8);
	cfs_le_put(out + 8, CFS_FMT_HEADER_VERSION, 4);
	cfs_le_put(out + 12, bs, 4);
	cfs_le_put(out + 16, epoch, 8);
	cfs_le_put(out + 24, CFS_CLASS_SCHEME, 4);
	cfs_le_put(out + 28, cfs_class_top(bs) + 1, 4);
}

/* -EINVAL (h untouched) if the n bytes at p are not a store header at all
 * (size, magic).  Else fills h and returns 0 if this code reads that format
 * (version, class scheme, a supported block size), -EPROTO if not. */
static inline int cfs_fmt_header_decode(const void *p, size_t n, struct cfs_fmt_header *h)
{
	const unsigned char *b = (const unsigned char *)p;
	if (n != CFS_FMT_HEADER_SIZE || memcmp(b, CFS_FMT_HEADER_MAGIC, 8) != 0)
		return -EINVAL;
	h->version = (uint32_t)cfs_le_get(b + 8, 4);
	h->block_size = (uint32_t)cfs_le_get(b + 12, 4);
	h->epoch = cfs_le_get(b + 16, 8);
	h->scheme = (uint32_t)cfs_le_get(b + 24, 4);
	h->codes = (uint32_t)cfs_le_get(b + 28, 4);
	if (h->version != CFS_FMT_HEADER_VERSION || h->scheme != CFS_CLASS_SCHEME ||
	    !cfs_class_block_ok(h->block_size))
		return -EPROTO;
	return 0;
}

/* --- block rows: "blocks" table ------------------------------------------- */

#define CFS_FMT_ROW_SIZE 32
#define CFS_FMT_ROW_VERSION 2 /* 1: byte 1 was log2 of the slot size */

struct cfs_fmt_row {
	uint8_t cls;     /* size class code (classes.h) */
	uint32_t len;    /* bytes stored */
	uint32_t crc;    /* crc32c of those bytes */
	uint64_t slot;   /* slot number in the class's arena file */
	uint64_t gen;    /* generation: unique per write of a slot */
};

static inline void cfs_fmt_row_encode(const struct cfs_fmt_row *r,
				      unsigned char out[CFS_FMT_ROW_SIZE])
{
	memset(out, 0, CFS_FMT_ROW_SIZE);
	out[0] = CFS_FMT_ROW_VERSION;
	out[1] = r->cls;
	cfs_le_put(out + 4, r->len, 4);
	cfs_le_put(out + 8, r->crc, 4);
	cfs_le_put(out + 16, r->slot, 8);
	cfs_le_put(out + 24, r->gen, 8);
}

/* -EINVAL if the n bytes at p are not a row of CFS_FMT_ROW_VERSION. */
static inline int cfs_fmt_row_decode(const void *p, size_t n, struct cfs_fmt_row *r)
{
	const unsigned char *b = (const unsigned char *)p;
	if (n != CFS_FMT_ROW_SIZE || b[0] != CFS_FMT_ROW_VERSION)
		return -EINVAL;
	r->cls = b[1];
	r->len = (uint32_t)cfs_le_get(b + 4, 4);
	r->crc = (uint32_t)cfs_le_get(b + 8, 4);
	r->slot = cfs_le_get(b + 16, 8);
	r->gen = cfs_le_get(b + 24, 8);
	return 0;
}

/* 1 if r belongs in a cache of block size bs: a class of that cache (code <=
 * its top one) and 1 <= len <= the class size, so it never reaches past its
 * slot. */
static inline int cfs_fmt_row_fits(const struct cfs_fmt_row *r, uint32_t bs)
{
	return r->cls <= cfs_class_top(bs) && r->len >= 1 && r->len <= cfs_class_size(r->cls);
}

/* Block key "<content key>\0<u64 block number, big-endian>" (so the blocks
 * of a key sort together, in order) into out; its length, or -EINVAL for a
 * key that is NULL, empty or longer than CFS_FMT_KEY_MAX. */
static inline int cfs_fmt_bkey_encode(const char *key, uint64_t block,
				      unsigned char out[CFS_FMT_BKEY_MAX])
{
	size_t kl = key ? strnlen(key, CFS_FMT_KEY_MAX + 1) : 0;
	if (kl == 0 || kl > CFS_FMT_KEY_MAX)
		return -EINVAL;
	memcpy(out, key, kl);
	out[kl] = 0;
	for (int i = 0; i < 8; i++)
		out[kl + 1 + i] = (unsigned char)(block >> (8 * (7 - i)));
	return (int)kl + 9;
}

/* The content key's length (the key is the first bytes of k) and *block of
 * the n-byte block key k; -EINVAL if it is malformed (a key empty, too long
 * or holding a NUL, or no NUL before the block number). */
static inline int cfs_fmt_bkey_decode(const void *k, size_t n, uint64_t *block)
{
	const unsigned char *p = (const unsigned char *)k;
	if (n < 10 || n > CFS_FMT_BKEY_MAX)
		return -EINVAL;
	size_t kl = n - 9;
	if (p[kl] != 0 || strnlen((const char *)p, kl) != kl)
		return -EINVAL;
	*block = 0;
	for (size_t i = 0; i < 8; i++)
		*block = (*block << 8) | p[kl + 1 + i];
	return (int)kl;
}

/* --- arena file names ------------------------------------------------------
 * "arena-<size>.dat" with the slot size in MiB ("1m") when it is a whole
 * number of MiB, else in KiB ("4k", "1280k") when a whole number of KiB, else
 * in bytes ("576", "4608").  The rule is one-to-one, and it gives the
 * power-of-4 scheme's old names ("4k" ... "1m", "2m") for the same sizes. */

#define CFS_FMT_ARENA_NAME_MAX 32 /* room for any arena file name */

/* The arena file name of class code c; cap >= CFS_FMT_ARENA_NAME_MAX. */
static inline void cfs_fmt_arena_name(unsigned c, char *out, size_t cap)
{
	uint32_t size = cfs_class_size(c);
	if (size % (1u << 20) == 0)
		snprintf(out, cap, "arena-%um.dat", size >> 20);
	else if (size % (1u << 10) == 0)
		snprintf(out, cap, "arena-%uk.dat", size >> 10);
	else
		snprintf(out, cap, "arena-%u.dat", size);
}

#endif
