/* warm: parallel cache warming from the command line (see warm.h). */
#define _GNU_SOURCE
#include "warm.h"

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "json.h"
#include "order.h"
#include "progress.h"

#define CHUNK (64ULL << 20)
#define THREADS 16
#define JSON_EVERY_S 0.5
#define USAGE "usage: colabfs warm PATH... [--list FILE] [--ordered] [--json]\n"

struct item {
	char *path;
	uint64_t off, len;
	int last; /* the file's last range: counts the file as done */
};

struct warm {
	struct item *items;
	size_t n, cap, next;
	uint64_t total_bytes, done_bytes, fetched;
	size_t files, files_done, failed;
	size_t denied; /* ranges refused with EPERM (not the mount's owner) */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int running;
	int json;                      /* --json: event lines on stdout, no bar */
	struct cfs_progress_gate gate; /* when the next one is due */
};

static struct warm *walk_state; /* nftw has no user pointer */

static int add_file(struct warm *w, const char *path, uint64_t size)
{
	w->files++;
	uint64_t off = 0;
	do {
		if (w->n == w->cap) {
			size_t cap = w->cap ? w->cap * 2 : 256;
			struct item *ni = realloc(w->items, cap * sizeof(*ni));
			if (!ni)
				return -ENOMEM;
			w->items = ni;
			w->cap = cap;
		}
		uint64_t len = size - off < CHUNK ? size - off : CHUNK;
		w->items[w->n] = (struct item){ strdup(path), off, len, off + len >= size };
		if (!w->items[w->n].path)
			return -ENOMEM;
		w->n++;
		off += len;
	} while (off < size);
	w->total_bytes += size;
	return 0;
}

static int on_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type == FTW_F && S_ISREG(st->st_mode))
		return add_file(walk_state, path, (uint64_t)st->st_size) ? -1 : 0;
	return 0;
}

static int add_path(struct warm *w, const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		fprintf(stderr, "colabfs: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	if (S_ISREG(st.st_mode))
		return add_file(w, path, (uint64_t)st.st_size);
	walk_state = w;
	return nftw(path, on_entry, 32, FTW_PHYS | FTW_MOUNT) == 0 ? 0 : -EIO;
}

static void *worker(void *arg)
{
	struct warm *w = arg;
	char name[CFS_CTLNAME_MAX], val[160];
	pthread_mutex_lock(&w->lock);
	while (w->next < w->n) {
		struct item *it = &w->items[w->next++];
		pthread_mutex_unlock(&w->lock);
		struct cfs_ctlname req = { .kind = CFS_CTL_WARM, .off = it->off, .len = it->len };
		ssize_t r = -1;
		errno = EINVAL;
		if (cfs_ctlname_format(&req, name, sizeof(name)) == 0)
			r = getxattr(it->path, name, val, sizeof(val) - 1);
		int err = r < 0 ? errno : 0;
		unsigned long long fetched = 0;
		if (r >= 0) {
			val[r] = '\0';
			sscanf(val, "{\"fetched_bytes\":%llu}", &fetched);
		}
		pthread_mutex_lock(&w->lock);
		w->done_bytes += it->len;
		w->fetched += fetched;
		if (err == EPERM) {
			/* every other range would be refused too: say it once, stop */
			if (!w->denied++)
				fprintf(stderr, "\ncolabfs: warm %s: %s\n", it->path,
					cfs_ctl_strerror(err));
			w->failed++;
			w->next = w->n;
		} else if (err) {
			w->failed++;
			fprintf(stderr, "\ncolabfs: warm %s: %s\n", it->path, cfs_ctl_strerror(err));
		}
		if (it->last)
			w->files_done++;
		pthread_cond_signal(&w->cond);
	}
	w->running--;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int cfs_warm_json_progress(const struct cfs_warm_counts *c, char **txt)
{
	const struct cfs_json_field f[] = {
		{ "done_bytes", CFS_JSON_INT, (int64_t)c->done_bytes, NULL, NULL, 0 },
		{ "total_bytes", CFS_JSON_INT, (int64_t)c->total_bytes, NULL, NULL, 0 },
		{ "files_done", CFS_JSON_INT, (int64_t)c->files_done, NULL, NULL, 0 },
		{ "files", CFS_JSON_INT, (int64_t)c->files, NULL, NULL, 0 },
	};
	return cfs_json_write_event("progress", f, sizeof(f) / sizeof(f[0]), txt);
}

int cfs_warm_json_done(const char *error, char **txt)
{
	const struct cfs_json_field f[] = {
		{ "ok", CFS_JSON_BOOL, !error, NULL, NULL, 0 },
		{ "error", CFS_JSON_STR, 0, error, NULL, 0 },
	};
	return cfs_json_write_event("done", f, sizeof(f) / sizeof(f[0]), txt);
}

/* lock held: the --json progress line, when it is due */
static void json_progress(struct warm *w, double elapsed, int final)
{
	struct cfs_warm_counts c = { w->done_bytes, w->total_bytes, w->files_done, w->files };
	char *txt = NULL;
	if (cfs_warm_json_progress(&c, &txt) == 0)
		cfs_progress_emit(stdout, &w->gate, txt, elapsed, JSON_EVERY_S, final);
}

/* lock held */
static void progress(struct warm *w, double elapsed, int tty, int final)
{
	if (w->json) {
		json_progress(w, elapsed, final);
		return;
	}
	char done[32], total[32];
	cfs_progress_bytes(done, sizeof(done), (double)w->done_bytes);
	cfs_progress_bytes(total, sizeof(total), (double)w->total_bytes);
	double rate = elapsed > 0 ? (double)w->fetched / elapsed / 1e6 : 0;
	double frac = w->total_bytes ? (double)w->done_bytes / (double)w->total_bytes : 1;
	double eta = frac > 0 && frac < 1 ? elapsed * (1 - frac) / frac : 0;
	if (tty) {
		char bar[CFS_PROGRESS_BAR + 1], left[16];
		cfs_progress_bar(bar, sizeof(bar), frac);
		cfs_progress_eta(left, sizeof(left), eta);
		fprintf(stderr, "\r[%s] %3.0f%%  files %zu/%zu  %s/%s  %.1f MB/s  ETA %s   ", bar,
			frac * 100, w->files_done, w->files, done, total, rate, left);
		if (final)
			fputc('\n', stderr);
	} else {
		fprintf(stderr, "warm: %.0f%% files %zu/%zu %s/%s %.1f MB/s ETA %ds\n", frac * 100,
			w->files_done, w->files, done, total, rate, (int)eta);
	}
}

static int read_list(struct warm *w, const char *file)
{
	FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "re");
	if (!f) {
		fprintf(stderr, "colabfs: --list %s: %s\n", file, strerror(errno));
		return -errno;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;
	while (!rc && (n = getline(&line, &cap, f)) > 0) {
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (n > 0)
			rc = add_path(w, line);
	}
	free(line);
	if (f != stdin)
		fclose(f);
	return rc;
}

struct strv {
	char **v;
	size_t n, cap;
};

static int strv_add(struct strv *s, const char *p, size_t len)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		char **v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	if (!(s->v[s->n] = strndup(p, len)))
		return -ENOMEM;
	s->n++;
	return 0;
}

/* --ordered: the paths as they come, the lists' lines in place (no stat:
 * order.h), handed to cfs_order_main. */
static int ordered_main(int argc, char **argv, int json)
{
	struct strv s = { 0 };
	int rc = 0;
	for (int i = 0; i < argc && !rc; i++) {
		const char *list = strncmp(argv[i], "--list=", 7) == 0 ? argv[i] + 7
				   : strcmp(argv[i], "--list") == 0 && i + 1 < argc ? argv[++i] : NULL;
		if (list) {
			FILE *f = strcmp(list, "-") == 0 ? stdin : fopen(list, "re");
			if (!f) {
				fprintf(stderr, "colabfs: --list %s: %s\n", list, strerror(errno));
				rc = 1;
				break;
			}
			char *line = NULL;
			size_t cap = 0;
			ssize_t n;
			while (!rc && (n = getline(&line, &cap, f)) > 0) {
				while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
					n--;
				if (n > 0)
					rc = strv_add(&s, line, (size_t)n);
			}
			free(line);
			if (f != stdin)
				fclose(f);
		} else if (strcmp(argv[i], "--json") == 0 || strcmp(argv[i], "--ordered") == 0) {
			continue;
		} else if (argv[i][0] == '-') {
			fputs(USAGE, stderr);
			rc = 2;
		} else {
			rc = strv_add(&s, argv[i], strlen(argv[i]));
		}
	}
	if (rc != 2) /* a list that could not be read: no files, bad_path */
		rc = cfs_order_main(s.v, rc ? 0 : s.n, json);
	for (size_t i = 0; i < s.n; i++)
		free(s.v[i]);
	free(s.v);
	return rc;
}

int cfs_warm_main(int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (strcmp(argv[i], "--ordered") == 0) {
			int json = 0;
			for (int k = 0; k < argc; k++)
				json |= strcmp(argv[k], "--json") == 0;
			return ordered_main(argc, argv, json);
		}
	struct warm w = { 0 };
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	int bad = 0, npaths = 0;
	for (int i = 0; i < argc; i++) /* first: a bad PATH must get its done line */
		w.json |= strcmp(argv[i], "--json") == 0;
	for (int i = 0; i < argc && !bad; i++) {
		if (strcmp(argv[i], "--list") == 0 && i + 1 < argc) {
			bad = read_list(&w, argv[++i]) != 0;
			npaths++;
		} else if (strncmp(argv[i], "--list=", 7) == 0) {
			bad = read_list(&w, argv[i] + 7) != 0;
			npaths++;
		} else if (strcmp(argv[i], "--json") == 0) {
			continue;
		} else if (argv[i][0] == '-') {
			fputs(USAGE, stderr);
			return 2;
		} else {
			bad = add_path(&w, argv[i]) != 0;
			npaths++;
		}
	}
	if (!npaths) {
		fputs(USAGE, stderr);
		return 2;
	}
	int tty = !w.json && isatty(2);
	double t0 = cfs_progress_now(), last = 0;
	pthread_t th[THREADS];
	int started = 0;
	for (; !bad && started < THREADS && (size_t)started < w.n; started++) {
		w.running++;
		if (pthread_create(&th[started], NULL, worker, &w) != 0) {
			w.running--;
			break;
		}
	}
	pthread_mutex_lock(&w.lock);
	if (w.json && !bad)
		progress(&w, 0, tty, 0); /* the totals at once */
	while (w.running > 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&w.cond, &w.lock, &ts);
		double t = cfs_progress_now() - t0;
		if (w.json || t - last >= (tty ? 0.25 : 5.0)) {
			progress(&w, t, tty, 0);
			last = t;
		}
	}
	double t = cfs_progress_now() - t0;
	if (!bad && !w.denied)
		progress(&w, t, tty, 1);
	pthread_mutex_unlock(&w.lock);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	char total[32], fetched[32];
	cfs_progress_bytes(total, sizeof(total), (double)w.total_bytes);
	cfs_progress_bytes(fetched, sizeof(fetched), (double)w.fetched);
	if (w.json) {
		char *txt = NULL;
		if (!cfs_warm_json_done(bad ? "bad_path" : w.denied ? "denied" : w.failed ? "failed"
										  : NULL, &txt))
			cfs_progress_emit(stdout, NULL, txt, 0, 0, 1);
	} else if (!bad && !w.denied) {
		printf("warmed %zu files, %s (%s downloaded) in %.1f s, %.1f MB/s%s\n",
		       w.files_done, total, fetched, t, t > 0 ? (double)w.fetched / t / 1e6 : 0,
		       w.failed ? "; some ranges failed" : "");
	}
	for (size_t i = 0; i < w.n; i++)
		free(w.items[i].path);
	free(w.items);
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
	return bad ? 2 : w.failed ? 1 : 0;
}
