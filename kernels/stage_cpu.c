/* stage_cpu: the staging pipeline of the GPU loader (see stage.h): opening a
 * stage, plans, host copies, and the direct pieces stage.cu copies itself
 * (stage_int.h).  The listings that resolve a range's path to its content key
 * are in stage_paths.c, the hot blocks in pinned memory in stage_hot.c.
 *
 * A plan is a list of pieces: the part of one block of one range that lands
 * at a given offset of the batch.  A piece is resident (a row snapshot from
 * the plan's read transaction) or not (read through the mount).  Copying a
 * part of the batch runs rounds: copy the resident pieces from the arena
 * mappings (checking crc32c), then re-read their rows in a fresh transaction;
 * pieces whose row changed are copied again from the new row (at most
 * MAX_ROUNDS times), the rest fall back to the mount.  Reads through the mount
 * coalesce neighbouring pieces of a range into one pread loop.  With a pinned
 * budget, resident pieces whose exact write is in the hot set (kernels/hot.h)
 * are copied from there first and skip the rounds. */
#define _GNU_SOURCE /* asprintf */
#include "stage.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cacheview.h"
#include "crc32c.h"
#include "ctlname.h"
#include "hot.h"
#include "size.h"
#include "stage_int.h"

#define MAX_ROUNDS 4

/* ---- open ------------------------------------------------------------------ */

/* The cache folder, as the mount serving mnt says (user.colabfs.cache_dir,
 * src/core/ctlname.h): never a path recomputed here, which another user could
 * have planted.  It must be a real folder owned by this user or root and
 * writable by no one else. */
static int mount_cache_dir(const char *mnt, char *out, size_t cap)
{
	ssize_t n = getxattr(mnt, "user.colabfs.cache_dir", out, cap - 1);
	if (n < 0)
		return errno == ENODATA || errno == ENOTSUP ? -ENODATA : -errno;
	out[n] = 0;
	struct stat st;
	if (out[0] != '/' || lstat(out, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    (st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & 022))
		return -EPERM;
	return 0;
}

int cfs_stage_open(const char *cache_dir, const char *mountpoint, unsigned flags,
		   struct cfs_stage **out)
{
	*out = NULL;
	if (!mountpoint || !*mountpoint)
		return -EINVAL;
	char real[PATH_MAX], dbuf[PATH_MAX];
	if (!realpath(mountpoint, real))
		return -errno;
	struct cfs_stage *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	int rc = 0;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->hot_mu, NULL);
	pthread_rwlock_init(&s->hot_rw, NULL);
	s->flags = flags;
	size_t ml = strlen(mountpoint);
	while (ml > 1 && mountpoint[ml - 1] == '/')
		ml--;
	if (!(s->mnt = strndup(mountpoint, ml)) || !(s->mnt_real = strdup(real))) {
		rc = -ENOMEM;
		goto fail;
	}
	if (!cache_dir) {
		if ((rc = mount_cache_dir(real, dbuf, sizeof(dbuf))) != 0)
			goto fail;
		cache_dir = dbuf;
	}
	if ((rc = cfs_cview_open(cache_dir, &s->cv)) != 0)
		goto fail;
	s->bs = cfs_cview_block_size(s->cv);
	const char *env = getenv("COLABFS_GPU_PINNED");
	uint64_t pinned = 0, every = 30;
	if (env && *env && cfs_size_parse(env, &pinned) != 0)
		fprintf(stderr, "colabfs-gpu: COLABFS_GPU_PINNED=%s is not a size; hot cache off\n",
			env);
	env = getenv("COLABFS_GPU_PINNED_REFRESH");
	if (env && *env && cfs_size_parse(env, &every) != 0)
		every = 30;
	s->hot_every_ms = (int64_t)every * 1000;
	s->hot_budget = pinned;
	*out = s;
	return 0;
fail:
	cfs_stage_close(s);
	return rc;
}

void cfs_stage_close(struct cfs_stage *s)
{
	if (!s)
		return;
	cfs_stage_hot_mem_free(s->hot_mem, s->hot_mem_cuda);
	cfs_hot_set_free(&s->hot);
	cfs_hot_counts_free(&s->counts);
	cfs_cview_close(s->cv);
	for (size_t i = 0; i < s->nlc; i++)
		cfs_stage_listing_free(s->lc[i]);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->hot_mu);
	pthread_rwlock_destroy(&s->hot_rw);
	free(s->root_hint);
	free(s->mnt);
	free(s->mnt_real);
	free(s);
}

uint32_t cfs_stage_block_size(const struct cfs_stage *s)
{
	return s->bs;
}

void cfs_stage_get_stats(struct cfs_stage *s, struct cfs_stage_stats *out)
{
	uint64_t *src = (uint64_t *)&s->st, *dst = (uint64_t *)out;
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

void cfs_stage_set_hook(struct cfs_stage *s, cfs_stage_hook_fn fn, void *arg)
{
	s->hook = fn;
	s->hook_arg = arg;
}

/* ---- plans ----------------------------------------------------------------- */

void cfs_stage_plan_free(struct cfs_stage_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++) {
		free(p->r[i].path);
		free(p->r[i].key);
		if (p->r[i].fd >= 0)
			close(p->r[i].fd);
	}
	free(p->r);
	free(p->p);
	free(p);
}

uint64_t cfs_stage_plan_bytes(const struct cfs_stage_plan *p)
{
	return p->bytes;
}

size_t cfs_stage_plan_count(const struct cfs_stage_plan *p)
{
	return p->n;
}

uint64_t cfs_stage_plan_offset(const struct cfs_stage_plan *p, size_t i)
{
	return i < p->n ? p->r[i].dst : 0;
}

uint64_t cfs_stage_plan_length(const struct cfs_stage_plan *p, size_t i)
{
	return i < p->n ? p->r[i].len : 0;
}

uint64_t cfs_stage_plan_resident(const struct cfs_stage_plan *p)
{
	return p->resident;
}

static int add_piece(struct cfs_stage_plan *p, size_t *cap, const struct piece *pc)
{
	if (p->np == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct piece *n = realloc(p->p, nc * sizeof(*n));
		if (!n)
			return -ENOMEM;
		p->p = n;
		*cap = nc;
	}
	p->p[p->np++] = *pc;
	return 0;
}

int cfs_stage_plan_new(struct cfs_stage *s, const struct cfs_stage_range *r, size_t n,
		       struct cfs_stage_plan **out)
{
	*out = NULL;
	if (!r && n)
		return -EINVAL;
	struct cfs_stage_plan *p = calloc(1, sizeof(*p));
	struct cfs_cview_txn *t = NULL;
	size_t cap = 0;
	int rc = 0;
	if (!p || !(p->r = calloc(n ? n : 1, sizeof(*p->r)))) {
		free(p);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		p->r[i].fd = -1;
	p->n = n;
	if (!(s->flags & CFS_STAGE_NO_CACHE))
		cfs_stage_hot_maybe_refresh(s);
	if (!(s->flags & CFS_STAGE_NO_CACHE) && (rc = cfs_cview_begin(s->cv, &t)) != 0)
		goto fail;
	for (size_t i = 0; i < n && !rc; i++) {
		struct prange *pr = &p->r[i];
		struct stat st;
		const char *rel = r[i].path ? cfs_stage_relative(s, r[i].path) : NULL;
		if (!rel || !*rel) {
			rc = -EINVAL;
			break;
		}
		if (asprintf(&pr->path, "%s/%s", s->mnt, rel) < 0) {
			pr->path = NULL;
			rc = -ENOMEM;
			break;
		}
		if (stat(pr->path, &st) < 0) {
			rc = -errno;
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			rc = -EISDIR;
			break;
		}
		uint64_t size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
		pr->off = r[i].off < size ? r[i].off : size;
		pr->len = size - pr->off;
		if (r[i].len < pr->len)
			pr->len = r[i].len;
		pr->dst = p->bytes;
		p->bytes += pr->len;
		if (t && (rc = cfs_stage_resolve(s, t, rel, &st, &pr->key)) != 0)
			break;
		if (!pr->key && pr->len && t)
			STAT_ADD(s, unresolved, 1);
		/* one piece per block touched */
		uint64_t o = pr->off, end = pr->off + pr->len;
		while (o < end && !rc) {
			struct piece pc = { 0 };
			pc.block = o / s->bs;
			pc.boff = (uint32_t)(o % s->bs);
			uint64_t l = (uint64_t)s->bs - pc.boff;
			pc.len = (uint32_t)(l < end - o ? l : end - o);
			pc.dst = pr->dst + (o - pr->off);
			pc.range = (uint32_t)i;
			if (pr->key && cfs_cview_block(t, pr->key, pc.block, &pc.row) == 0 &&
			    pc.boff + pc.len <= pc.row.len) {
				pc.resident = 1;
				p->resident += pc.len;
			}
			rc = add_piece(p, &cap, &pc);
			o += pc.len;
		}
	}
	cfs_cview_end(t);
	if (rc)
		goto fail;
	cfs_stage_hot_count_plan(s, p);
	STAT_ADD(s, plans, 1);
	*out = p;
	return 0;
fail:
	cfs_stage_plan_free(p);
	return rc;
}

/* ---- copies ---------------------------------------------------------------- */

/* Reads [off, off + len) of a range through the mount.  repair: a cached
 * block failed its crc32c.  The daemon checks a block's crc on its first
 * read only, and the kernel's page cache may answer from an earlier read, so
 * a plain read could return the bad bytes or never reach the daemon: first
 * have the daemon drop the file's cached blocks (the eviction control of
 * src/cli/ctl.h, which also drops the kernel's pages), then read, which fetches
 * them again. */
static int mount_read(struct cfs_stage_plan *p, struct prange *pr, uint64_t off, uint64_t len,
		      unsigned char *dst, int repair)
{
	if (pr->fd < 0) {
		pr->fd = open(pr->path, O_RDONLY | O_CLOEXEC);
		if (pr->fd < 0)
			return -errno;
	}
	if (repair) {
		char res[128];
		/* ENODATA/ENOTSUP: not a colabfs mount (a plain copy of the
		 * tree), whose bytes need no repair */
		if (getxattr(pr->path, CFS_XATTR_EVICT, res, sizeof(res)) < 0 &&
		    errno != ENODATA && errno != ENOTSUP)
			return -EIO; /* never read what may be the bad bytes */
		posix_fadvise(pr->fd, 0, 0, POSIX_FADV_DONTNEED);
	}
	while (len) {
		size_t want = len > (1u << 30) ? (1u << 30) : (size_t)len;
		ssize_t got = pread(pr->fd, dst, want, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return -EIO; /* the file shrank under us */
		dst += got;
		off += (uint64_t)got;
		len -= (uint64_t)got;
	}
	return 0;
}

/* The intersection of piece pc with batch bytes [from, to): offset into the
 * piece and length (0: none). */
uint32_t cfs_stage_clip(const struct piece *pc, uint64_t from, uint64_t to, uint32_t *skip)
{
	uint64_t a = pc->dst > from ? pc->dst : from;
	uint64_t b = pc->dst + pc->len < to ? pc->dst + pc->len : to;
	*skip = (uint32_t)(a - pc->dst);
	return b > a ? (uint32_t)(b - a) : 0;
}

int cfs_stage_copy_part(struct cfs_stage *s, struct cfs_stage_plan *p, uint64_t from,
			uint64_t len, void *dstv)
{
	return cfs_stage_copy_part_skip(s, p, from, len, dstv, NULL);
}

int cfs_stage_copy_part_skip(struct cfs_stage *s, struct cfs_stage_plan *p, uint64_t from,
			     uint64_t len, void *dstv, const unsigned char *skipmask)
{
	unsigned char *dst = dstv;
	if (from > p->bytes || len > p->bytes - from || (!dst && len))
		return -EINVAL;
	uint64_t to = from + len;
	size_t lo = 0, hi = p->np;
	/* pieces are in batch order: find the first that ends after from */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->p[mid].dst + p->p[mid].len <= from)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t first = lo, last = first;
	while (last < p->np && p->p[last].dst < to)
		last++;
	if (first == last)
		return 0;
	size_t cnt = last - first;
	/* state per piece: 0 mount, 1 copy pending, 2 done */
	unsigned char *state = malloc(cnt);
	if (!state)
		return -ENOMEM;
	int rc = 0, pending = 0, repair = 0;
	for (size_t i = 0; i < cnt; i++) {
		state[i] = p->p[first + i].resident && !(s->flags & CFS_STAGE_NO_CACHE) ? 1 : 0;
		if (skipmask && skipmask[first + i])
			state[i] = 3; /* someone else copies it */
		pending += state[i] == 1;
	}
	if (pending && __atomic_load_n(&s->hot_budget, __ATOMIC_RELAXED))
		pending = cfs_stage_hot_copy(s, p, first, cnt, from, to, dst, state);
	for (int round = 0; round < MAX_ROUNDS && pending; round++) {
		for (size_t i = 0; i < cnt; i++) {
			struct piece *pc = &p->p[first + i];
			uint32_t skip, n;
			if (state[i] != 1 || !(n = cfs_stage_clip(pc, from, to, &skip)))
				continue;
			const unsigned char *src = cfs_cview_slot(s->cv, &pc->row);
			if (!src) {
				state[i] = 0;
				continue;
			}
			unsigned char *d = dst + (pc->dst + skip - from);
			memcpy(d, src + pc->boff + skip, n);
			if (!(s->flags & CFS_STAGE_NO_VERIFY)) {
				/* the whole block's crc: over the copy when it is the whole block */
				uint32_t c = (pc->boff + skip == 0 && n == pc->row.len)
						     ? cfs_crc32c(0, d, n)
						     : cfs_crc32c(0, src, pc->row.len);
				if (c != pc->row.crc) {
					STAT_ADD(s, crc_errors, 1);
					state[i] = 0;
					repair = 1;
				}
			}
		}
		if (s->hook)
			s->hook(s->hook_arg);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		/* seqlock check: every copied row unchanged in a transaction begun now */
		struct cfs_cview_txn *t;
		if ((rc = cfs_cview_begin(s->cv, &t)) != 0)
			goto out;
		pending = 0;
		for (size_t i = 0; i < cnt; i++) {
			struct piece *pc = &p->p[first + i];
			struct cfs_fmt_row now;
			uint32_t skip;
			if (state[i] != 1 || !cfs_stage_clip(pc, from, to, &skip))
				continue;
			const char *key = p->r[pc->range].key;
			if (cfs_cview_block(t, key, pc->block, &now) == 0 &&
			    now.slot == pc->row.slot && now.gen == pc->row.gen &&
			    now.cls == pc->row.cls && now.len == pc->row.len) {
				state[i] = 2;
				continue;
			}
			STAT_ADD(s, retries, 1);
			if (cfs_cview_block(t, key, pc->block, &now) == 0 &&
			    pc->boff + pc->len <= now.len) {
				pc->row = now;
				pending++;
			} else {
				pc->resident = 0;
				state[i] = 0;
			}
		}
		cfs_cview_end(t);
	}
	/* what is left goes through the mount, neighbours of a range together */
	for (size_t i = 0; i < cnt && !rc;) {
		struct piece *pc = &p->p[first + i];
		uint32_t skip, n = cfs_stage_clip(pc, from, to, &skip);
		if (state[i] >= 2 || !n) {
			if (n && state[i] == 2) {
				STAT_ADD(s, blocks_cached, 1);
				STAT_ADD(s, bytes_cached, n);
			}
			i++;
			continue;
		}
		struct prange *pr = &p->r[pc->range];
		uint64_t start = pc->dst + skip, end = start + n;
		size_t j = i + 1, blocks = 1;
		for (; j < cnt && state[j] < 2 && p->p[first + j].range == pc->range; j++) {
			uint32_t sk2, n2 = cfs_stage_clip(&p->p[first + j], from, to, &sk2);
			if (!n2)
				break;
			end += n2;
			blocks++;
		}
		rc = mount_read(p, pr, pr->off + (start - pr->dst), end - start, dst + (start - from),
				repair);
		STAT_ADD(s, blocks_mount, blocks);
		STAT_ADD(s, bytes_mount, end - start);
		i = j;
	}
out:
	free(state);
	return rc;
}

int cfs_stage_copy(struct cfs_stage *s, struct cfs_stage_plan *p, void *dst, uint64_t cap)
{
	if (cap < p->bytes)
		return -ENOSPC;
	return cfs_stage_copy_part(s, p, 0, p->bytes, dst);
}

/* ---- direct copies (stage_int.h) ------------------------------------------- */

unsigned cfs_stage_flags(const struct cfs_stage *s)
{
	return s->flags;
}

size_t cfs_stage_plan_pieces(const struct cfs_stage_plan *p)
{
	return p->np;
}

int cfs_stage_direct_list(struct cfs_stage *s, struct cfs_stage_plan *p,
			  struct cfs_stage_direct **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (s->flags & (CFS_STAGE_NO_CACHE | CFS_STAGE_NO_VERIFY) || !p->np)
		return 0;
	struct cfs_stage_direct *d = malloc(p->np * sizeof(*d));
	if (!d)
		return -ENOMEM;
	size_t k = 0;
	pthread_rwlock_rdlock(&s->hot_rw);
	for (size_t i = 0; i < p->np; i++) {
		const struct piece *pc = &p->p[i];
		if (!pc->resident || pc->boff != 0 || pc->len != pc->row.len ||
		    cfs_hot_set_find(&s->hot, pc->row.gen, pc->row.slot, pc->row.cls,
				     pc->row.len, pc->row.crc))
			continue;
		const unsigned char *src = cfs_cview_slot(s->cv, &pc->row);
		if (!src || cfs_cview_slot_map(s->cv, &pc->row, &d[k].map, &d[k].maplen) != 0)
			continue;
		d[k].src = src;
		d[k].dst = pc->dst;
		d[k].len = pc->len;
		d[k].crc = pc->row.crc;
		d[k].piece = i;
		k++;
	}
	pthread_rwlock_unlock(&s->hot_rw);
	if (!k) {
		free(d);
		d = NULL;
	}
	*out = d;
	*n = k;
	return 0;
}

int cfs_stage_direct_check(struct cfs_stage *s, struct cfs_stage_plan *p,
			   const struct cfs_stage_direct *d, size_t n, unsigned char *ok)
{
	struct cfs_cview_txn *t;
	if (s->hook)
		s->hook(s->hook_arg);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	int rc = cfs_cview_begin(s->cv, &t);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		const struct piece *pc = &p->p[d[i].piece];
		struct cfs_fmt_row now;
		ok[i] = cfs_cview_block(t, p->r[pc->range].key, pc->block, &now) == 0 &&
			now.slot == pc->row.slot && now.gen == pc->row.gen &&
			now.cls == pc->row.cls && now.len == pc->row.len;
		if (ok[i]) {
			STAT_ADD(s, blocks_cached, 1);
			STAT_ADD(s, bytes_cached, pc->len);
		} else {
			STAT_ADD(s, retries, 1);
		}
	}
	cfs_cview_end(t);
	return 0;
}
