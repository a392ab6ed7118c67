/* order: `colabfs warm --ordered` (see order.h). */
#define _GNU_SOURCE
#include "order.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "json.h"
#include "progress.h"

#define HINT_DIR "hints"

int cfs_order_absnorm(const char *cwd, const char *path, char *out, size_t cap)
{
	size_t o = 0;
	if (cap < 2)
		return -ENAMETOOLONG;
	out[o++] = '/';
	for (int pass = path[0] == '/' ? 1 : 0; pass < 2; pass++) {
		const char *s = pass ? path : cwd;
		while (*s) {
			while (*s == '/')
				s++;
			const char *e = s;
			while (*e && *e != '/')
				e++;
			size_t n = (size_t)(e - s);
			if (n == 2 && s[0] == '.' && s[1] == '.') {
				while (o > 1 && out[o - 1] != '/')
					o--;
				if (o > 1)
					o--; /* the slash before it */
			} else if (n && !(n == 1 && s[0] == '.')) {
				if (o + (o > 1) + n + 1 > cap)
					return -ENAMETOOLONG;
				if (o > 1)
					out[o++] = '/';
				memcpy(out + o, s, n);
				o += n;
			}
			s = e;
		}
	}
	out[o] = '\0';
	return 0;
}

const char *cfs_order_below(const char *path, const char *root)
{
	size_t n = strlen(root);
	if (n == 1 && root[0] == '/')
		return path + 1;
	if (strncmp(path, root, n) != 0 || (path[n] != '/' && path[n] != '\0'))
		return NULL;
	return path[n] ? path + n + 1 : path + n;
}

/* The top of the mount that holds folder dir: the highest folder above it
 * on the same device. */
static int find_top(const char *dir, char *top, size_t cap)
{
	struct stat st, up;
	char cand[PATH_MAX];
	if (stat(dir, &st))
		return -errno;
	if ((size_t)snprintf(top, cap, "%s", dir) >= cap)
		return -ENAMETOOLONG;
	while (strcmp(top, "/") != 0) {
		snprintf(cand, sizeof(cand), "%s", top);
		char *slash = strrchr(cand, '/');
		slash[slash == cand ? 1 : 0] = '\0';
		if (stat(cand, &up) || up.st_dev != st.st_dev)
			break;
		snprintf(top, cap, "%s", cand);
	}
	return 0;
}

/* The path relative to the mount's top, into rel (NULL: not below it). */
static const char *relative(const char *cwd, const char *path, const char *top,
			    const char *realtop, char *abs, char *rel, size_t cap)
{
	if (cfs_order_absnorm(cwd, path, abs, cap))
		return NULL;
	const char *r = cfs_order_below(abs, top);
	if (r || !realtop)
		return r;
	/* spelt another way (a link above the mount): its folder's real path */
	char *slash = strrchr(abs, '/');
	*slash = '\0';
	char *real = realpath(abs[0] ? abs : "/", NULL);
	*slash = '/';
	r = real ? cfs_order_below(real, realtop) : NULL;
	if (r && (size_t)snprintf(rel, cap, "%s%s%s", r, *r ? "/" : "", slash + 1) >= cap)
		r = NULL;
	free(real);
	return r ? rel : NULL;
}

/* The spool folder under the cache folder cd: made 0700 (root: given to
 * the cache folder's owner); its descriptor, or -errno. */
static int spool_dir(const char *cd, uid_t *owner, gid_t *group)
{
	char path[PATH_MAX];
	struct stat st;
	if ((size_t)snprintf(path, sizeof(path), "%s/" HINT_DIR, cd) >= sizeof(path))
		return -ENAMETOOLONG;
	if (stat(cd, &st))
		return -errno;
	*owner = st.st_uid;
	*group = st.st_gid;
	if (mkdir(path, 0700) && errno != EEXIST)
		return -errno;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (geteuid() == 0 && fchown(fd, *owner, *group))
		fprintf(stderr, "colabfs: warm --ordered: %s: %s\n", path, strerror(errno));
	return fd;
}

static int finish(int json, const char *error, uint64_t files, uint64_t unknown, uint64_t bytes)
{
	if (json) {
		const struct cfs_json_field f[] = {
			{ "ok", CFS_JSON_BOOL, !error, NULL, NULL, 0 },
			{ "error", CFS_JSON_STR, 0, error, NULL, 0 },
			{ "files", CFS_JSON_INT, (int64_t)files, NULL, NULL, 0 },
			{ "unknown", CFS_JSON_INT, (int64_t)unknown, NULL, NULL, 0 },
			{ "bytes", CFS_JSON_INT, (int64_t)bytes, NULL, NULL, 0 },
		};
		char *txt = NULL;
		if (!cfs_json_write_event("done", f, sizeof(f) / sizeof(f[0]), &txt))
			cfs_progress_emit(stdout, NULL, txt, 0, 0, 1);
	} else if (!error) {
		char size[32];
		cfs_progress_bytes(size, sizeof(size), (double)bytes);
		printf("order hint: %" PRIu64 " files (%s) in the order given", files, size);
		if (unknown)
			printf("; %" PRIu64 " paths not found", unknown);
		printf("\n");
	}
	return !error ? 0 : strcmp(error, "bad_path") == 0 ? 2 : 1;
}

int cfs_order_main(char **paths, size_t n, int json)
{
	char cwd[PATH_MAX], abs[PATH_MAX], rel[PATH_MAX], top[PATH_MAX], name[CFS_CTLNAME_MAX];
	char tmp[48], final[24];
	if (!n || !getcwd(cwd, sizeof(cwd))) {
		fprintf(stderr, "colabfs: warm --ordered: no files given\n");
		return finish(json, "bad_path", 0, 0, 0);
	}
	if (cfs_order_absnorm(cwd, paths[0], abs, sizeof(abs)))
		return finish(json, "bad_path", 0, 0, 0);
	*strrchr(abs, '/') = '\0';
	int rc = find_top(abs[0] ? abs : "/", top, sizeof(top));
	char *cd = NULL;
	if (!rc)
		rc = cfs_ctl_get(top, CFS_XATTR_CACHE_DIR, &cd);
	if (rc) {
		fprintf(stderr, "colabfs: %s: %s\n", paths[0], cfs_ctl_strerror(-rc));
		return finish(json, "bad_path", 0, 0, 0);
	}
	uid_t owner = 0;
	gid_t group = 0;
	int dfd = spool_dir(cd, &owner, &group);
	free(cd);
	if (dfd < 0) {
		fprintf(stderr, "colabfs: warm --ordered: the mount's cache folder: %s\n",
			strerror(-dfd));
		return finish(json, "failed", 0, 0, 0);
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t id = (uint64_t)getpid() * 1000000000ULL % 1000000000000000000ULL +
		      (uint64_t)ts.tv_nsec + 1;
	snprintf(final, sizeof(final), "%" PRIu64, id);
	snprintf(tmp, sizeof(tmp), "%s.tmp", final);
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		fprintf(stderr, "colabfs: warm --ordered: %s: %s\n", tmp, strerror(errno));
		if (fd >= 0)
			close(fd);
		close(dfd);
		return finish(json, "failed", 0, 0, 0);
	}
	if (geteuid() == 0 && fchown(fd, owner, group))
		fprintf(stderr, "colabfs: warm --ordered: %s: %s\n", tmp, strerror(errno));
	char *realtop = realpath(top, NULL);
	const char *bad = NULL;
	uint64_t skipped = 0;
	for (size_t i = 0; i < n && !bad; i++) {
		const char *r = relative(cwd, paths[i], top, realtop, abs, rel, sizeof(rel));
		if (!r)
			bad = paths[i];
		else if (!*r || strchr(r, '\n'))
			skipped++; /* the top itself, or a name a line cannot hold */
		else
			fprintf(f, "%s\n", r);
	}
	free(realtop);
	int werr = ferror(f) | fclose(f);
	if (bad || werr || renameat(dfd, tmp, dfd, final)) {
		if (bad)
			fprintf(stderr, "colabfs: warm --ordered: %s is not in the mount at %s\n", bad,
				top);
		else
			fprintf(stderr, "colabfs: warm --ordered: cannot write the list: %s\n",
				strerror(errno));
		unlinkat(dfd, tmp, 0);
		close(dfd);
		return finish(json, bad ? "bad_path" : "failed", 0, 0, 0);
	}
	struct cfs_ctlname req = { .kind = CFS_CTL_ORDER, .off = id };
	char *reply = NULL;
	rc = cfs_ctlname_format(&req, name, sizeof(name));
	if (!rc)
		rc = cfs_ctl_get(top, name, &reply);
	unsigned long long files = 0, unknown = 0, bytes = 0;
	if (!rc && sscanf(reply, "{\"files\":%llu,\"unknown\":%llu,\"bytes\":%llu}", &files,
			  &unknown, &bytes) != 3)
		rc = -EPROTO;
	free(reply);
	if (rc) {
		unlinkat(dfd, final, 0); /* the daemon did not take it */
		close(dfd);
		fprintf(stderr, "colabfs: warm --ordered: %s: %s\n", top,
			rc == -EPROTO ? "the daemon's reply is not understood (an older colabfs?)"
				      : cfs_ctl_strerror(-rc));
		return finish(json, rc == -EPERM ? "denied" : "failed", 0, 0, 0);
	}
	close(dfd);
	return finish(json, NULL, files, unknown + skipped, bytes);
}
