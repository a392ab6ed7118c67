/* sync_cmd: waiting for the write-back uploads (see sync_cmd.h). */
#define _GNU_SOURCE
#include "sync_cmd.h"

#include <errno.h>
#include <math.h> /* isfinite, NAN: macros, no libm */
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "progress.h"

#define POLL_MS 200
#define BAR 20 /* narrower than warm's: the line says more */
#define PLAIN_EVERY_S 5.0
#define JSON_EVERY_S 0.5
#define USAGE "usage: colabfs sync [--timeout SECONDS] [--quiet] [--json] [PATH...]"

enum cfs_sync_verdict cfs_sync_decide(const struct cfs_json_sync *st, size_t n)
{
	int pending = 0;
	for (size_t i = 0; i < n; i++) {
		if (st[i].n_failed)
			return CFS_SYNC_FAILED;
		pending |= st[i].files > 0;
	}
	return pending ? CFS_SYNC_PENDING : CFS_SYNC_DONE;
}

/* A copy of the daemon's text fit for a terminal: control characters (an
 * escape sequence in a file name) become '?'. */
static void shown(char *dst, size_t cap, const char *src)
{
	size_t i = 0;
	for (; src && src[i] && i + 1 < cap; i++)
		dst[i] = (unsigned char)src[i] < 0x20 || src[i] == 0x7f ? '?' : src[i];
	dst[i] = '\0';
}

void cfs_sync_progress_add(struct cfs_sync_progress *p, const struct cfs_json_sync *st, size_t n,
			   double t)
{
	uint64_t bytes = 0, left = 0, files = 0, up = 0, waiting = 0;
	const char *why = NULL;
	for (size_t i = 0; i < n; i++) {
		/* bytes_left past bytes would be a daemon's slip: never more than all */
		uint64_t b = (uint64_t)st[i].bytes;
		bytes += b;
		left += (uint64_t)st[i].bytes_left < b ? (uint64_t)st[i].bytes_left : b;
		files += (uint64_t)st[i].files;
		up += (uint64_t)st[i].uploading;
		waiting += (uint64_t)st[i].n_waiting;
		if (!why && st[i].n_waiting)
			why = st[i].waiting[0].error;
	}
	if (!p->rounds++) {
		p->t0 = t;
		p->done = bytes - left;
	} else if (left < p->left) {
		p->sent += p->left - left;
		p->done += p->left - left;
	}
	p->t = t;
	p->left = left;
	p->files = files;
	p->uploading = up;
	p->waiting = waiting;
	shown(p->why, sizeof(p->why), why);
}

void cfs_sync_progress_line(const struct cfs_sync_progress *p, int tty, char *buf, size_t cap)
{
	char done[32], total[32], eta[16], bar[BAR + 1], wait[160] = "";
	uint64_t all = p->done + p->left;
	double el = p->t - p->t0;
	double rate = el > 0 ? (double)p->sent / el : 0;
	double frac = all ? (double)p->done / (double)all : 1;
	double secs = rate > 0 ? (double)p->left / rate : p->left ? NAN : 0;
	cfs_progress_bytes(done, sizeof(done), (double)p->done);
	cfs_progress_bytes(total, sizeof(total), (double)all);
	cfs_progress_eta(eta, sizeof(eta), secs);
	if (p->waiting)
		snprintf(wait, sizeof(wait), ", %llu waiting%s%s", (unsigned long long)p->waiting,
			 p->why[0] ? ": " : "", p->why);
	if (tty) {
		cfs_progress_bar(bar, sizeof(bar), frac);
		snprintf(buf, cap, "\r[%s] %3.0f%% %s/%s %.1f MB/s ETA %s, files left %llu "
			 "(%llu uploading%s)   ", bar, frac * 100, done, total, rate / 1e6, eta,
			 (unsigned long long)p->files, (unsigned long long)p->uploading, wait);
	} else {
		snprintf(buf, cap, "sync: %.0f%% %s/%s %.1f MB/s ETA %s files left %llu "
			 "(%llu uploading%s)", frac * 100, done, total, rate / 1e6, eta,
			 (unsigned long long)p->files, (unsigned long long)p->uploading, wait);
	}
}

int cfs_sync_json_progress(const struct cfs_sync_progress *p, char **txt)
{
	const struct cfs_json_field f[] = {
		{ "done_bytes", CFS_JSON_INT, (int64_t)p->done, NULL, NULL, 0 },
		{ "total_bytes", CFS_JSON_INT, (int64_t)(p->done + p->left), NULL, NULL, 0 },
		{ "files", CFS_JSON_INT, (int64_t)p->files, NULL, NULL, 0 },
		{ "uploading", CFS_JSON_INT, (int64_t)p->uploading, NULL, NULL, 0 },
		{ "waiting", CFS_JSON_INT, (int64_t)p->waiting, NULL, NULL, 0 },
		{ "why", CFS_JSON_STR, 0, p->why, NULL, 0 },
	};
	return cfs_json_write_event("progress", f, sizeof(f) / sizeof(f[0]), txt);
}

int cfs_sync_json_done(const struct cfs_json_sync *st, size_t n, const char *error, char **txt)
{
	const struct cfs_json_field f[] = {
		{ "ok", CFS_JSON_BOOL, !error, NULL, NULL, 0 },
		{ "failed", CFS_JSON_FAILED, 0, NULL, st, st ? n : 0 },
		{ "error", CFS_JSON_STR, 0, error, NULL, 0 },
	};
	return cfs_json_write_event("done", f, error ? 3 : 1, txt);
}

static void print_entries(FILE *out, const char *what, const struct cfs_json_sync_entry *e,
			  int n)
{
	char path[1024], why[512];
	for (int i = 0; i < n; i++) {
		shown(path, sizeof(path), e[i].path);
		shown(why, sizeof(why), e[i].error);
		fprintf(out, "colabfs: sync: %s%s: %s\n", what, path, why[0] ? why : "no reason given");
	}
}

void cfs_sync_print_failed(FILE *out, const struct cfs_json_sync *st, size_t n)
{
	uint64_t others = 0;
	for (size_t i = 0; i < n; i++) {
		print_entries(out, "", st[i].failed, st[i].n_failed);
		uint64_t f = (uint64_t)st[i].files;
		others += f > (uint64_t)st[i].n_failed ? f - (uint64_t)st[i].n_failed : 0;
	}
	if (others)
		fprintf(out, "colabfs: sync: %llu other file%s still pending (uploading in the "
			"background)\n", (unsigned long long)others, others == 1 ? " is" : "s are");
}

void cfs_sync_print_pending(FILE *out, const struct cfs_json_sync *st, size_t n, double waited)
{
	uint64_t files = 0, bytes = 0, left = 0, up = 0;
	for (size_t i = 0; i < n; i++) {
		files += (uint64_t)st[i].files;
		bytes += (uint64_t)st[i].bytes;
		left += (uint64_t)st[i].bytes_left;
		up += (uint64_t)st[i].uploading;
	}
	char b[32], l[32];
	cfs_progress_bytes(b, sizeof(b), (double)bytes);
	cfs_progress_bytes(l, sizeof(l), (double)left);
	fprintf(out, "colabfs: sync: timed out after %.1f s: %llu file%s (%s, %s not yet in "
		"Drive) still pending, %llu uploading; the uploads go on in the background\n",
		waited, (unsigned long long)files, files == 1 ? "" : "s", b, l,
		(unsigned long long)up);
	for (size_t i = 0; i < n; i++)
		print_entries(out, "waiting: ", st[i].waiting, st[i].n_waiting);
}

/* ---- the command ------------------------------------------------------------ */

struct opts {
	double timeout; /* seconds; < 0: none; 0: one look */
	int quiet;
	int json;       /* --json: event lines on stdout, no bar */
	char **paths;
	size_t n;
};

static int usage(const char *why)
{
	if (why)
		fprintf(stderr, "colabfs: sync: %s\n", why);
	fprintf(stderr, "%s\n", USAGE);
	return 2;
}

static int usage_unknown(const char *opt)
{
	fprintf(stderr, "colabfs: sync: unknown option %s\n%s\n", opt, USAGE);
	return 2;
}

static int parse_timeout(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v) || v < 0 || v > 1e9)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	static char *here[] = { "." };
	*o = (struct opts){ .timeout = -1 };
	int i = 0, words = 0;
	o->paths = argv;
	for (; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0)
			o->quiet = 1;
		else if (strcmp(a, "--json") == 0)
			o->json = 1;
		else if (strcmp(a, "--timeout") == 0 && i + 1 < argc)
			v = argv[++i];
		else if (strncmp(a, "--timeout=", 10) == 0)
			v = a + 10;
		else if (a[0] == '-' && a[1] && strcmp(a, "--timeout") == 0)
			return usage("--timeout wants SECONDS");
		else if (a[0] == '-' && a[1])
			return usage_unknown(a);
		else
			argv[words++] = argv[i]; /* a PATH: compacted in place */
		if (v && parse_timeout(v, &o->timeout))
			return usage("--timeout wants seconds (a number, 0 for one look)");
	}
	for (; i < argc; i++)
		argv[words++] = argv[i];
	o->n = (size_t)words;
	if (!o->n) {
		o->paths = here;
		o->n = 1;
	}
	return 0;
}

/* Why the sync attribute of path could not be read, printed; the exit
 * status, and the word --json's done line gives in *word. */
static int get_failed(const char *path, int err, const char **word)
{
	const char *p = strcmp(path, ".") == 0 ? ". (the current folder)" : path;
	pid_t pid;
	switch (err) {
	case ENODATA:
	case ENOTSUP:
	case EROFS:
		/* a colabfs mount answers its pid even when it predates sync */
		if (cfs_ctl_pid(path, &pid) == 0) {
			*word = "unsupported";
			fprintf(stderr, "colabfs: sync: %s: this mount's daemon does not support sync "
				"(read-only or older version)\n", p);
		} else {
			*word = "not_mounted";
			fprintf(stderr, "colabfs: sync: %s is not in a colabfs mount%s\n", p,
				strcmp(path, ".") == 0 ? "; give a PATH inside one" : "");
		}
		return 2;
	case EPERM:
		*word = "denied";
		fprintf(stderr, "colabfs: sync: %s: not allowed: only the user who mounted it, and "
			"root, may sync\n", p);
		return 1;
	case ENOTCONN:
	case ECONNABORTED:
		*word = "gone";
		fprintf(stderr, "colabfs: sync: %s: the mount's daemon is gone; pending uploads "
			"resume from its journal when it is mounted again\n", p);
		return 1;
	default:
		*word = "error";
		fprintf(stderr, "colabfs: sync: %s: %s\n", p, strerror(err));
		return 1;
	}
}

/* One round: every PATH's reply into st[].  Returns 0, or the exit status
 * with the reason printed (and its word for --json in *word). */
static int poll_round(const struct opts *o, struct cfs_json_sync *st, const char **word)
{
	for (size_t i = 0; i < o->n; i++) {
		char *txt = NULL;
		int rc;
		do
			rc = cfs_ctl_get(o->paths[i], CFS_XATTR_SYNC, &txt);
		while (rc == -EINTR);
		if (rc)
			return get_failed(o->paths[i], -rc, word);
		cfs_json_sync_cleanup(&st[i]);
		rc = cfs_json_parse_sync(txt, strlen(txt), &st[i]);
		free(txt);
		if (rc) {
			*word = "protocol";
			fprintf(stderr, "colabfs: sync: %s: the daemon sent a malformed sync "
				"status\n", o->paths[i]);
			return 1;
		}
	}
	return 0;
}

static int check_paths(const struct opts *o, const char **word)
{
	struct stat sb;
	*word = "bad_path";
	for (size_t i = 0; i < o->n; i++)
		if (stat(o->paths[i], &sb) != 0) {
			fprintf(stderr, "colabfs: sync: %s: %s\n", o->paths[i], strerror(errno));
			return 2;
		}
	return 0;
}

/* A redrawn line must fit the terminal, or each redraw leaves a wrapped
 * line behind: cut to its width (at a UTF-8 boundary; the "\r" takes no
 * column). */
static void fit_terminal(char *line)
{
	struct winsize ws;
	if (ioctl(2, TIOCGWINSZ, &ws) != 0 || ws.ws_col < 20)
		return;
	size_t max = (size_t)ws.ws_col; /* the '\r' plus ws_col - 1 columns */
	if (strlen(line) <= max)
		return;
	while (max > 1 && ((unsigned char)line[max] & 0xc0) == 0x80)
		max--;
	line[max] = '\0';
}

static void pause_ms(double ms)
{
	long n = (long)ms;
	struct timespec d = { n / 1000, (n % 1000) * 1000000 };
	while (n > 0 && nanosleep(&d, &d) != 0 && errno == EINTR)
		;
}

/* The --json progress line of p, when it is due (cfs_progress_due). */
static void json_progress(const struct opts *o, struct cfs_progress_gate *g,
			  const struct cfs_sync_progress *p, double t, int final)
{
	char *txt = NULL;
	if (!o->quiet && cfs_sync_json_progress(p, &txt) == 0)
		cfs_progress_emit(stdout, g, txt, t, JSON_EVERY_S, final);
}

/* The progress on stderr: a terminal redraws every round; a log gets a
 * line every 5 s and the last one; nothing when nothing was pending. */
static void draw(const struct opts *o, const struct cfs_sync_progress *p, int tty, int end,
		 double t, double *last_plain, int *drawn)
{
	char line[512];
	if (o->quiet || (!p->files && p->rounds <= 1) ||
	    !(tty || end || t - *last_plain >= PLAIN_EVERY_S))
		return;
	cfs_sync_progress_line(p, tty, line, sizeof(line));
	if (tty)
		fit_terminal(line);
	fprintf(stderr, "%s%s", line, tty ? "" : "\n");
	*drawn = tty;
	*last_plain = t;
}

/* Polls until done, failed or timed out.  Returns the exit status, and the
 * word for --json's done line in *word (NULL: ok). */
static int run(const struct opts *o, struct cfs_json_sync *st, const char **word)
{
	struct cfs_sync_progress p = { 0 };
	struct cfs_progress_gate gate = { 0 };
	int tty = !o->quiet && !o->json && isatty(2), drawn = 0;
	double t0 = cfs_progress_now(), last_plain = -PLAIN_EVERY_S;
	for (;;) {
		int rc = poll_round(o, st, word);
		double t = cfs_progress_now();
		if (rc) {
			if (drawn)
				fputc('\n', stderr);
			if (o->json && p.rounds)
				json_progress(o, &gate, &p, t, 1);
			return rc;
		}
		enum cfs_sync_verdict v = cfs_sync_decide(st, o->n);
		cfs_sync_progress_add(&p, st, o->n, t);
		int over = o->timeout >= 0 && t - t0 >= o->timeout;
		int end = v != CFS_SYNC_PENDING || over;
		if (o->json)
			json_progress(o, &gate, &p, t, end);
		else
			draw(o, &p, tty, end, t, &last_plain, &drawn);
		if (end && drawn)
			fputc('\n', stderr);
		if (v == CFS_SYNC_FAILED) {
			*word = "failed";
			cfs_sync_print_failed(stderr, st, o->n);
			return 1;
		}
		if (v == CFS_SYNC_DONE) {
			char sent[32];
			cfs_progress_bytes(sent, sizeof(sent), (double)p.sent);
			if (!o->quiet && !o->json && p.rounds == 1)
				printf("synced: nothing was pending\n");
			else if (!o->quiet && !o->json)
				printf("synced: nothing left pending (%s sent in %.1f s)\n", sent, t - t0);
			return 0;
		}
		if (over) {
			*word = "timeout";
			cfs_sync_print_pending(stderr, st, o->n, t - t0);
			return 1;
		}
		double wait = POLL_MS;
		if (o->timeout >= 0 && (o->timeout - (t - t0)) * 1000 < wait)
			wait = (o->timeout - (t - t0)) * 1000;
		pause_ms(wait);
	}
}

int cfs_sync_main(int argc, char **argv)
{
	struct opts o;
	const char *word = NULL;
	int rc = parse_args(argc, argv, &o);
	if (rc)
		return rc;
	struct cfs_json_sync *st = NULL;
	if ((rc = check_paths(&o, &word)) == 0 && !(st = calloc(o.n, sizeof(*st)))) {
		fprintf(stderr, "colabfs: sync: %s\n", strerror(ENOMEM));
		word = "error";
		rc = 1;
	}
	if (!rc) {
		word = NULL;
		rc = run(&o, st, &word);
	}
	if (o.json) {
		char *txt = NULL;
		/* the failed list is the last round's, where a round was read */
		if (cfs_sync_json_done(st, st ? o.n : 0, rc ? word ? word : "error" : NULL, &txt) == 0)
			cfs_progress_emit(stdout, NULL, txt, 0, 0, 1);
	}
	for (size_t i = 0; st && i < o.n; i++)
		cfs_json_sync_cleanup(&st[i]);
	free(st);
	return rc;
}
