/* vfs_hint: order hints on a mount (see vfs.h, and hint.h for the policy).
 *
 * How a hint arrives.  The list of files is too long for an attribute's
 * value (64 KiB), and a setxattr fails on a read-only mount, so the command
 * line (colabfs warm --ordered) writes it as a file into the folder "hints"
 * of the mount's cache folder, named by a number ID, and asks the
 * attribute user.colabfs.order.ID (ctlname.h) on a folder of the mount:
 * the daemon reads the file, deletes it, and resolves each line, a path
 * relative to that folder, through the listings (fetching those not known
 * yet, as a lookup would).  The cache folder is the daemon's own and no one
 * else may write in it (cachedir.h), so no other user can plant a list or
 * a link there; the daemon still refuses a "hints" folder or file that is
 * not a plain folder or file of its own user (or root's), and a file over
 * CFS_HINT_FILE_MAX.  Only the mount's owner and root may ask (ctlname.h).
 *
 * What it does.  The new hint replaces the last one (each epoch brings its
 * order).  The scanner thread (vfs_scan.c) queues the hint's files on the
 * reader's scan queue, in order, as the window allows (hint.h); an open
 * (on an open-less mount, a first read: vfs_pin.c) that follows the hint is
 * the hint's alone (the dataset detector does not
 * count it, so no scan competes with the order it was told); a hint the
 * reader no longer follows, or read to its end, is dropped, and what it had
 * queued and nobody opened is counted as wasted.  Its window's ceiling is
 * half the cache budget: files read are the least recently used, so what
 * was fetched ahead is not what eviction takes. */
#include "vfs_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "hint.h"
#include "log.h"
#include "store.h"
#include "u64map.h"

#define CFS_HINT_FILE_MAX (1ULL << 30)
#define HINT_DIR "hints"
#define PATH_MAX_LEN 4096

/* ---- the spooled file ----------------------------------------------------------- */

static int own_or_root(const struct stat *st)
{
	return st->st_uid == geteuid() || st->st_uid == 0;
}

/* Reads and deletes file ID of the hints folder under cache_dir into *buf
 * (malloc'd, NUL-terminated). */
static int read_spool(const char *cache_dir, uint64_t id, char **buf, size_t *len)
{
	char path[PATH_MAX_LEN], name[24];
	int n = snprintf(path, sizeof(path), "%s/" HINT_DIR, cache_dir);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	snprintf(name, sizeof(name), "%llu", (unsigned long long)id);
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	struct stat st;
	int rc = fstat(dfd, &st) ? -errno : !own_or_root(&st) || (st.st_mode & 022) ? -EPERM : 0;
	int fd = rc ? -1 : openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (!rc && fd < 0)
		rc = -errno;
	if (!rc && fstat(fd, &st))
		rc = -errno;
	if (!rc && (!S_ISREG(st.st_mode) || !own_or_root(&st)))
		rc = -EPERM;
	if (!rc && (uint64_t)st.st_size > CFS_HINT_FILE_MAX)
		rc = -EFBIG;
	char *b = rc ? NULL : malloc((size_t)st.st_size + 1);
	if (!rc && !b)
		rc = -ENOMEM;
	size_t got = 0;
	while (!rc && got < (size_t)st.st_size) {
		ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break; /* shorter than it was: what is there */
		got += (size_t)r;
	}
	if (fd >= 0)
		unlinkat(dfd, name, 0);
	if (fd >= 0)
		close(fd);
	close(dfd);
	if (rc) {
		free(b);
		return rc;
	}
	b[got] = '\0';
	*buf = b;
	*len = got;
	return 0;
}

/* ---- resolving the paths -------------------------------------------------------- */

/* Folders are resolved once each: a map from the 64-bit hash of a folder's
 * path to its inode.  Not the path itself: two paths of the same hash
 * (about one chance in 30 million for a million folders) would share a
 * folder, and the second's files would be "not found" or others; a hint
 * only ever changes speed. */
struct resolver {
	struct cfs_vfs *v;
	uint64_t top;            /* the folder paths are relative to */
	struct cfs_u64map dirs;  /* hash of a folder's path -> index in dir_inos */
	uint64_t *dir_inos;
	size_t ndirs, cap;
};

/* The folder at path[0, len) below r->top (components: no "", "." or ".."
 * by then); 0 when there is none. */
static uint64_t folder_at(struct resolver *r, const char *path, size_t len)
{
	if (!len)
		return r->top;
	char buf[PATH_MAX_LEN];
	memcpy(buf, path, len);
	buf[len] = '\0';
	uint64_t key = cfs_hash_fnv1a(buf);
	uint32_t at;
	if (cfs_u64map_get(&r->dirs, key, &at))
		return r->dir_inos[at];
	uint64_t ino = r->top;
	for (char *c = buf, *slash; ino && c; c = slash ? slash + 1 : NULL) {
		slash = strchr(c, '/');
		if (slash)
			*slash = '\0';
		uint64_t child = 0;
		if (cfs_vfs_find_child(r->v, ino, c, &child))
			child = 0;
		ino = child;
		if (slash)
			*slash = '/';
	}
	if (ino) {
		cfs_inode_lock(r->v->tab);
		struct cfs_node *n = cfs_inode_get(r->v->tab, ino);
		if (!n || !n->is_dir)
			ino = 0;
		cfs_inode_unlock(r->v->tab);
	}
	if (r->ndirs == r->cap) {
		size_t nc = r->cap ? r->cap * 2 : 64;
		uint64_t *x = realloc(r->dir_inos, nc * sizeof(*x));
		if (!x)
			return ino;
		r->dir_inos = x;
		r->cap = nc;
	}
	if (key && cfs_u64map_put(&r->dirs, key, (uint32_t)r->ndirs) == 0)
		r->dir_inos[r->ndirs++] = ino;
	return ino;
}

/* Tidies one line in place into components joined by single slashes (no
 * "", "."); returns its length, or -1 for a path it will not resolve (one
 * with "..", absolute, too long). */
static long tidy(char *line)
{
	size_t in = 0, out = 0, len = strlen(line);
	if (line[0] == '/' || len >= PATH_MAX_LEN)
		return -1;
	while (in < len) {
		size_t end = in;
		while (end < len && line[end] != '/')
			end++;
		size_t clen = end - in;
		if (clen == 2 && line[in] == '.' && line[in + 1] == '.')
			return -1;
		if (clen && !(clen == 1 && line[in] == '.')) {
			if (out)
				line[out++] = '/';
			memmove(line + out, line + in, clen);
			out += clen;
		}
		in = end + 1;
	}
	line[out] = '\0';
	return (long)out;
}

/* The file at a tidied path: its ino and size, or 0. */
static uint64_t file_at(struct resolver *r, const char *path, size_t len, uint64_t *size)
{
	const char *slash = NULL;
	for (size_t i = len; i-- > 0 && !slash;)
		if (path[i] == '/')
			slash = path + i;
	size_t dlen = slash ? (size_t)(slash - path) : 0;
	const char *name = slash ? slash + 1 : path;
	uint64_t dir = folder_at(r, path, dlen), ino = 0;
	if (!dir || !*name || cfs_vfs_find_child(r->v, dir, name, &ino))
		return 0;
	cfs_inode_lock(r->v->tab);
	struct cfs_node *n = cfs_inode_get(r->v->tab, ino);
	int ok = n && !n->is_dir && !n->export_mime[0];
	*size = ok && n->size > 0 ? (uint64_t)n->size : 0;
	cfs_inode_unlock(r->v->tab);
	return ok ? ino : 0;
}

/* ---- the hint's life ------------------------------------------------------------- */

/* scan lock held: the hint ends; what it queued and nobody opened is waste. */
static void hint_end(struct cfs_vfs *v, const char *why)
{
	struct cfs_vfs_scanner *s = &v->scan;
	if (!s->hint)
		return;
	struct cfs_hint_stats hs;
	cfs_hint_stats(s->hint, cfs_vfs_now_ms(), &hs);
	s->st.hint_used += hs.used_bytes;
	s->st.hint_wasted += hs.skipped_bytes + hs.ahead;
	CFS_INFO("order hint ended (%s): %zu of %zu files read or passed, %llu hits, "
		 "%llu misses, %llu bytes fetched ahead and not read",
		 why, hs.done, hs.n, (unsigned long long)hs.hits, (unsigned long long)hs.misses,
		 (unsigned long long)(hs.skipped_bytes + hs.ahead));
	cfs_hint_free(s->hint);
	__atomic_store_n(&s->hint, NULL, __ATOMIC_RELAXED);
	s->hint_gen++;
	if (!cfs_scan_count(&s->det))
		cfs_reader_scan_cancel(v->reader); /* its queued files go */
}

void cfs_vfs_hint_end(struct cfs_vfs *v, const char *why)
{
	hint_end(v, why);
}

int cfs_vfs_hint_open(struct cfs_vfs *v, uint64_t ino)
{
	struct cfs_vfs_scanner *s = &v->scan;
	if (!s->hint)
		return 0;
	int m = cfs_hint_open(s->hint, ino, cfs_vfs_now_ms());
	if (m == CFS_HINT_HIT) {
		pthread_cond_signal(&s->cond); /* room in the window */
		return 1;
	}
	if (cfs_hint_diverged(s->hint)) {
		s->st.hints_dropped++;
		hint_end(v, "the reader left its order");
	}
	return 0;
}

void cfs_vfs_hint_fill(struct cfs_vfs *v)
{
	struct cfs_vfs_scanner *s = &v->scan;
	int64_t now = cfs_vfs_now_ms();
	size_t pos;
	uint64_t ino, size;
	while (s->hint && !s->stop && cfs_hint_next(s->hint, now, &pos, &ino, &size)) {
		uint64_t gen = s->hint_gen;
		pthread_mutex_unlock(&s->lock);
		int rc = cfs_vfs_scan_queue(v, ino, 1);
		pthread_mutex_lock(&s->lock);
		if (s->hint_gen != gen)
			break; /* replaced or dropped meanwhile */
		if (rc == -EBUSY) {
			cfs_hint_unnext(s->hint, pos);
			break;
		}
		if (rc == 1) {
			s->st.hint_files++;
			s->st.hint_bytes += size;
		}
	}
	if (s->hint && cfs_hint_done(s->hint))
		hint_end(v, "read to its end");
}

void cfs_vfs_hint_rewind(struct cfs_vfs *v)
{
	if (v->scan.hint)
		cfs_hint_rewind(v->scan.hint);
}

/* Installs h (NULL: none) in place of the hint there was. */
static void install(struct cfs_vfs *v, struct cfs_hint *h)
{
	struct cfs_vfs_scanner *s = &v->scan;
	pthread_mutex_lock(&s->lock);
	hint_end(v, h ? "a new one came" : "dropped by request");
	if (h) {
		__atomic_store_n(&s->hint, h, __ATOMIC_RELAXED);
		s->st.hints++;
		cfs_vfs_scan_thread(v);
	}
	pthread_mutex_unlock(&s->lock);
}

int cfs_vfs_hint_spool(struct cfs_vfs *v, uint64_t dir, const char *cache_dir, uint64_t id,
		       struct cfs_vfs_hint_result *res)
{
	memset(res, 0, sizeof(*res));
	if (v->scan.disabled)
		return -EOPNOTSUPP;
	if (!id) {
		install(v, NULL);
		return 0;
	}
	if (!cache_dir)
		return -ENODATA;
	int rc = cfs_vfs_resolve_node(v, dir);
	if (rc)
		return rc;
	char *buf = NULL;
	size_t len = 0, cap = 0, n = 0;
	if ((rc = read_spool(cache_dir, id, &buf, &len)))
		return rc;
	uint64_t *inos = NULL, *sizes = NULL;
	struct resolver r = { .v = v, .top = dir };
	for (char *line = buf, *nl; !rc && line < buf + len; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(buf + len - line));
		if (!nl)
			nl = buf + len;
		*nl = '\0';
		if (nl > line && nl[-1] == '\r')
			nl[-1] = '\0';
		if (!*line)
			continue;
		uint64_t size = 0, ino = 0;
		long plen = tidy(line);
		if (plen > 0)
			ino = file_at(&r, line, (size_t)plen, &size);
		if (!ino) {
			res->unknown++;
			continue;
		}
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 1024;
			uint64_t *a = realloc(inos, nc * sizeof(*a)), *b = a ? realloc(sizes, nc * sizeof(*b)) : NULL;
			if (a)
				inos = a;
			if (!a || !b) {
				rc = -ENOMEM;
				break;
			}
			sizes = b;
			cap = nc;
		}
		inos[n] = ino;
		sizes[n++] = size;
		res->bytes += size;
	}
	free(buf);
	free(r.dir_inos);
	cfs_u64map_free(&r.dirs);
	struct cfs_hint *h = NULL;
	struct cfs_hint_opts o = { .ahead_max = v->scan.hint_ahead_max };
	if (!rc)
		rc = cfs_hint_new(inos, sizes, n, &o, cfs_vfs_now_ms(), &h);
	free(inos);
	free(sizes);
	if (rc)
		return rc;
	res->files = n;
	CFS_INFO("order hint: %zu files (%llu bytes) in the order given, %llu paths not found",
		 n, (unsigned long long)res->bytes, (unsigned long long)res->unknown);
	install(v, h);
	return 0;
}
