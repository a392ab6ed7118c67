/* super: the supervisor (see super.h).  Mount, INIT, the child's life cycle
 * and the crash-loop guard live here; the request log of forward mode in
 * reqlog.c. */
#define _GNU_SOURCE
#include "super.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "session.h"

#define CFS_HAS_RESEND_BIT2 (1u << 7) /* FUSE_HAS_RESEND, bit 39: flags2 bit 7 */
#define CFS_NOTIFY_RESEND 7
#define GUARD_MAX 1024
#define CFS_SUPER_START_TRIES 3 /* a new mount: servers killed while starting before it fails */
#define CFS_SUPER_START_LIMIT 5 /* a live mount: servers in a row dead before serving */

struct guard_ent {
	struct cfs_reqlog_info r; /* unique as the kernel knows it now */
	uint64_t key;          /* unique without the resend bit */
	int deaths;            /* consecutive deaths it was in flight at */
};

struct sup {
	const struct cfs_super_opts *o;
	struct fuse_session *se;
	int fd;                      /* /dev/fuse */
	int shm_fd;
	struct cfs_super_shm *shm;
	enum cfs_recovery_mode mode;
	int sigfd;
	pid_t child;
	int64_t child_started_ms;
	int ready_fd;                /* write end to the waiting terminal until the first
				      * server serves or fails, else -1 */
	int ever_ready;
	int start_deaths;            /* servers in a row that died before serving */
	int stopping, failed;
	int quick_deaths;            /* children in a row that died young */
	int64_t respawn_at_ms;       /* 0: none pending */
	struct guard_ent guard[GUARD_MAX];
	size_t nguard;
	char mode_line[128];         /* logged once the log is open */
};

static const char *opname(uint32_t op)
{
	switch (op) {
	case FUSE_LOOKUP: return "LOOKUP";
	case FUSE_GETATTR: return "GETATTR";
	case FUSE_OPEN: return "OPEN";
	case FUSE_READ: return "READ";
	case FUSE_RELEASE: return "RELEASE";
	case FUSE_OPENDIR: return "OPENDIR";
	case FUSE_READDIR: return "READDIR";
	case FUSE_READDIRPLUS: return "READDIRPLUS";
	case FUSE_RELEASEDIR: return "RELEASEDIR";
	case FUSE_STATFS: return "STATFS";
	case FUSE_GETXATTR: return "GETXATTR";
	case FUSE_LISTXATTR: return "LISTXATTR";
	case FUSE_FLUSH: return "FLUSH";
	case FUSE_ACCESS: return "ACCESS";
	default: return "request";
	}
}

/* Reads the kernel's FUSE_INIT (queued as soon as mount(2) returned). */
static int read_init(struct sup *s, char *why, size_t wcap)
{
	size_t cap = (1u << 20) + (64u << 10);
	char *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	struct pollfd p = { .fd = s->fd, .events = POLLIN };
	ssize_t n = -1;
	if (poll(&p, 1, 10000) == 1)
		n = read(s->fd, buf, cap);
	int rc = 0;
	const struct fuse_in_header *h = (const void *)buf;
	if (n < (ssize_t)(sizeof(*h) + sizeof(struct fuse_init_in) - 44) || h->opcode != FUSE_INIT ||
	    (size_t)n > CFS_INIT_MAX) {
		snprintf(why, wcap, "the kernel sent no FUSE_INIT after mount (%s)",
			 n < 0 ? strerror(errno) : "unexpected request");
		rc = -EPROTO;
	} else {
		memcpy(s->shm->init, buf, (size_t)n);
		s->shm->init_len = (uint32_t)n;
	}
	free(buf);
	return rc;
}

int cfs_super_release_has_resend(const char *release)
{
	char *end;
	errno = 0;
	long major = strtol(release, &end, 10);
	if (end == release || *end != '.' || errno || major < 0)
		return -EINVAL;
	const char *p = end + 1;
	long minor = strtol(p, &end, 10);
	if (end == p || errno || minor < 0)
		return -EINVAL;
	return major > 6 || (major == 6 && minor >= 9);
}

/* 1 when the INIT request advertises FUSE_HAS_RESEND. */
static int kernel_has_resend(const struct cfs_super_shm *shm, uint32_t *major, uint32_t *minor)
{
	const struct fuse_in_header *h = (const void *)shm->init;
	const struct fuse_init_in *in = (const void *)(shm->init + sizeof(*h));
	*major = in->major;
	*minor = in->minor;
	if (in->minor < 36 || !(in->flags & FUSE_INIT_EXT) ||
	    shm->init_len < sizeof(*h) + offsetof(struct fuse_init_in, flags2) + 4)
		return 0;
	return (in->flags2 & CFS_HAS_RESEND_BIT2) != 0;
}

/* The kernel's request timeouts abort the whole connection when a request
 * waits longer, a restart included. */
static void warn_timeouts(void)
{
	const char *knobs[] = { "/proc/sys/fs/fuse/default_request_timeout",
				"/proc/sys/fs/fuse/max_request_timeout" };
	for (size_t i = 0; i < 2; i++) {
		FILE *f = fopen(knobs[i], "re");
		long v = 0;
		if (!f)
			continue;
		if (fscanf(f, "%ld", &v) == 1 && v > 0)
			CFS_WARN("%s is %ld s: a request waiting longer (a slow server restart "
				 "included) makes the kernel abort the whole mount",
				 knobs[i], v);
		fclose(f);
	}
}

static int write_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -errno;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
	return 0;
}

/* ---- children ------------------------------------------------------------- */

static int clear_cloexec(int fd)
{
	return fd < 0 ? 0 : fcntl(fd, F_SETFD, 0);
}

static void spawn(struct sup *s)
{
	memset(s->shm->slot, 0, sizeof(s->shm->slot));
	__atomic_store_n(&s->shm->ready, 0, __ATOMIC_RELEASE);
	char nfd[16], nshm[16], nready[16];
	snprintf(nfd, sizeof(nfd), "%d", s->fd);
	snprintf(nshm, sizeof(nshm), "%d", s->shm_fd);
	snprintf(nready, sizeof(nready), "%d", s->ready_fd);
	int n = 0;
	char **argv = calloc((size_t)s->o->argc + 16, sizeof(*argv));
	if (!argv) {
		s->respawn_at_ms = cfs_clock_mono_ms() + 1000;
		return;
	}
	argv[n++] = "colabfs";
	argv[n++] = "serve";
	argv[n++] = "--fuse-fd";
	argv[n++] = nfd;
	argv[n++] = "--shm-fd";
	argv[n++] = nshm;
	if (s->ready_fd >= 0) { /* until one serves (a first one killed while starting is
				 * followed by another, which reports then) */
		argv[n++] = "--ready-fd";
		argv[n++] = nready;
	}
	argv[n++] = "--";
	for (int i = 0; i < s->o->argc; i++)
		argv[n++] = s->o->argv[i];
	pid_t pid = fork();
	if (pid == 0) {
		sigset_t all;
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		if (clear_cloexec(s->fd) || clear_cloexec(s->shm_fd) || clear_cloexec(s->ready_fd))
			_exit(127);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	free(argv);
	if (pid < 0) {
		CFS_ERROR("supervisor: cannot start the server: %s; retrying", strerror(errno));
		s->respawn_at_ms = cfs_clock_mono_ms() + 1000;
		return;
	}
	s->child = pid;
	s->child_started_ms = cfs_clock_mono_ms();
	s->respawn_at_ms = 0;
	CFS_DEBUG("supervisor: server %d started", (int)pid);
}

/* The requests the dead child had read and not answered. */
static size_t in_flight(struct sup *s, struct guard_ent *out, size_t cap)
{
	size_t n = 0;
	if (s->mode == CFS_RECOVERY_FORWARD) {
		static struct cfs_reqlog_info r[GUARD_MAX];
		n = cfs_reqlog_pending(&s->shm->log, r, cap < GUARD_MAX ? cap : GUARD_MAX);
		for (size_t i = 0; i < n; i++)
			out[i] = (struct guard_ent){ .r = r[i] };
		return n;
	}
	for (size_t i = 0; i < CFS_SHM_SLOTS && n < cap; i++) {
		uint64_t u = __atomic_load_n(&s->shm->slot[i].unique, __ATOMIC_ACQUIRE);
		if (!u)
			continue;
		out[n].r = (struct cfs_reqlog_info){ .unique = u, .opcode = s->shm->slot[i].opcode };
		n++;
	}
	return n;
}

/* The crash-loop guard: a request in flight at crash_loop_limit deaths in a
 * row gets EIO from us, the one deliberate error. */
static size_t guard(struct sup *s)
{
	static struct guard_ent now[GUARD_MAX];
	size_t n = in_flight(s, now, GUARD_MAX);
	for (size_t i = 0; i < n; i++) {
		now[i].key = now[i].r.unique & ~(1ull << 63);
		now[i].deaths = 1;
		for (size_t j = 0; j < s->nguard; j++)
			if (s->guard[j].key == now[i].key)
				now[i].deaths = s->guard[j].deaths + 1;
		if (now[i].deaths < s->o->crash_loop_limit)
			continue;
		struct fuse_out_header oh = { .len = sizeof(oh), .error = -EIO,
					      .unique = now[i].r.unique };
		int rc = write_all(s->fd, &oh, sizeof(oh));
		CFS_ERROR("supervisor: answering FUSE %s (request %llu) with EIO: it was in flight "
			  "at %d server deaths in a row%s",
			  opname(now[i].r.opcode), (unsigned long long)now[i].key, now[i].deaths,
			  rc ? " (the kernel no longer waits for it)" : "");
		__atomic_fetch_add(&s->shm->rec.poisoned, 1, __ATOMIC_RELAXED);
		if (s->mode == CFS_RECOVERY_FORWARD)
			cfs_reqlog_drop(&s->shm->log, now[i].r.unique);
		now[i].key = 0;
	}
	s->nguard = 0;
	for (size_t i = 0; i < n; i++)
		if (now[i].key)
			s->guard[s->nguard++] = now[i];
	return n;
}

static void describe(int status, char *buf, size_t cap)
{
	if (WIFSIGNALED(status))
		snprintf(buf, cap, "killed by signal %d (%s%s)%s", WTERMSIG(status),
			 strsignal(WTERMSIG(status)),
			 WTERMSIG(status) == SIGKILL ? ": the OOM killer or kill -9" : "",
			 WCOREDUMP(status) ? ", core dumped" : "");
	else
		snprintf(buf, cap, "exited with status %d", WEXITSTATUS(status));
}

/* 1 when the kernel has ended the connection (unmounted or aborted): the
 * device then polls as an error, and a new server would have nothing to do. */
static int connection_gone(struct sup *s)
{
	struct pollfd p = { .fd = s->fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP | POLLNVAL));
}

/* The first server's start is over: said to the terminal once (a line the
 * server wrote itself comes first and is the one shown). */
static void start_failed(struct sup *s, const char *msg)
{
	if (s->ready_fd < 0)
		return;
	if (s->o->foreground)
		fprintf(stderr, "colabfs: %s\n", msg);
	else
		dprintf(s->ready_fd, "ERR %s\n", msg);
	close(s->ready_fd);
	s->ready_fd = -1;
}

/* While the first server starts: done once it serves; past the deadline it
 * is killed (SIGKILL: it may be stuck in a request to its own mount) and
 * the mount ends.  Returns how long to wait for the next look (-1: none). */
static int watch_start(struct sup *s)
{
	if (s->ready_fd < 0 || !s->child)
		return -1;
	if (__atomic_load_n(&s->shm->ready, __ATOMIC_ACQUIRE)) {
		close(s->ready_fd); /* the server writes its own OK line */
		s->ready_fd = -1;
		return -1;
	}
	int64_t left = s->child_started_ms + s->o->start_timeout_ms - cfs_clock_mono_ms();
	if (s->o->start_timeout_ms <= 0 || left > 0)
		return s->o->start_timeout_ms <= 0 || left > 100 ? 100 : (int)left;
	char msg[256];
	snprintf(msg, sizeof(msg), "the server did not start serving within %ld s "
		 "(--start-timeout); the mount was ended (see the log %s)",
		 s->o->start_timeout_ms / 1000, s->o->log_file ? s->o->log_file : "");
	CFS_ERROR("supervisor: %s", msg);
	start_failed(s, msg);
	kill(s->child, SIGKILL);
	s->stopping = s->failed = 1;
	return -1;
}

static void child_died(struct sup *s, int status)
{
	char how[96];
	describe(status, how, sizeof(how));
	int64_t lived = cfs_clock_mono_ms() - s->child_started_ms;
	pid_t pid = s->child;
	s->child = 0;
	int was_ready = __atomic_load_n(&s->shm->ready, __ATOMIC_ACQUIRE);
	s->ever_ready |= was_ready;
	if (WIFEXITED(status) && WEXITSTATUS(status) == CFS_SERVE_EXIT_OK) {
		CFS_INFO("supervisor: server %d ended (unmounted or stopped)", (int)pid);
		s->stopping = 1;
		return;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == CFS_SERVE_EXIT_REFUSE) {
		CFS_ERROR("supervisor: server %d refused to serve (its FUSE_INIT reply differs from "
			  "the mount's); ending the mount",
			  (int)pid);
		s->stopping = s->failed = 1;
		return;
	}
	s->start_deaths = was_ready ? 0 : s->start_deaths + 1;
	if (!s->ever_ready) {
		/* killed while starting (a damaged cache index crashes the process
		 * reading it; the next start finds the store's marker and repairs it):
		 * try again; a server that exits has said why already */
		if (WIFSIGNALED(status) && s->start_deaths < CFS_SUPER_START_TRIES && !s->stopping) {
			CFS_WARN("supervisor: the server %s before it served; starting another "
				 "(%d of %d)",
				 how, s->start_deaths + 1, CFS_SUPER_START_TRIES);
			s->respawn_at_ms = cfs_clock_mono_ms() + 100;
			return;
		}
		CFS_ERROR("supervisor: the server %s before it served; ending the mount", how);
		char msg[256];
		snprintf(msg, sizeof(msg), "the server %s before it served (see the log %s)", how,
			 s->o->log_file ? s->o->log_file : "");
		start_failed(s, msg);
		s->stopping = s->failed = 1;
		return;
	}
	if (s->start_deaths >= CFS_SUPER_START_LIMIT && !s->stopping) {
		CFS_ERROR("supervisor: %d servers in a row died before serving (the last %s); ending "
			  "the mount, so that readers get an error instead of waiting",
			  s->start_deaths, how);
		s->stopping = s->failed = 1;
		return;
	}
	if (s->stopping)
		return;
	if (connection_gone(s)) {
		CFS_INFO("supervisor: server %d %s after the mount ended", (int)pid, how);
		s->stopping = 1;
		return;
	}
	size_t lost = guard(s);
	__atomic_fetch_add(&s->shm->rec.restarts, 1, __ATOMIC_RELAXED);
	if (s->mode == CFS_RECOVERY_RESEND) {
		struct fuse_out_header oh = { .len = sizeof(oh), .error = CFS_NOTIFY_RESEND };
		int rc = write_all(s->fd, &oh, sizeof(oh));
		if (rc)
			CFS_ERROR("supervisor: FUSE_NOTIFY_RESEND failed: %s", strerror(-rc));
		__atomic_fetch_add(&s->shm->rec.resends, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->shm->rec.resent, lost, __ATOMIC_RELAXED);
	}
	s->quick_deaths = lived < 1000 || !was_ready ? s->quick_deaths + 1 : 0;
	int64_t delay = 0;
	if (s->quick_deaths > 1) {
		delay = 50ll << (s->quick_deaths - 2 < 7 ? s->quick_deaths - 2 : 7);
		delay = delay > 5000 ? 5000 : delay;
	}
	CFS_WARN("supervisor: server %d %s after %.1f s with %zu requests in flight; %s "
		 "(restart %llu%s)",
		 (int)pid, how, lived / 1000.0, lost,
		 s->mode == CFS_RECOVERY_RESEND	   ? "the kernel resends them"
		 : s->mode == CFS_RECOVERY_FORWARD ? "the next server serves them again"
						   : "they are lost (recovery none)",
		 (unsigned long long)s->shm->rec.restarts, delay ? ", after a back-off" : "");
	s->respawn_at_ms = cfs_clock_mono_ms() + delay;
}

/* ---- the loop ----------------------------------------------------------- */

static void on_signal(struct sup *s)
{
	struct signalfd_siginfo si;
	while (read(s->sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGCHLD) {
			int status;
			pid_t p;
			while ((p = waitpid(-1, &status, WNOHANG)) > 0)
				if (p == s->child)
					child_died(s, status);
		} else if (!s->stopping) {
			CFS_INFO("supervisor: signal %u: stopping", si.ssi_signo);
			s->stopping = 1;
			if (s->child)
				kill(s->child, SIGTERM);
		}
	}
}

static void loop(struct sup *s)
{
	while (!(s->stopping && !s->child)) {
		struct pollfd p = { .fd = s->sigfd, .events = POLLIN };
		int timeout = watch_start(s);
		if (s->respawn_at_ms) {
			int64_t left = s->respawn_at_ms - cfs_clock_mono_ms();
			timeout = left > 0 && (timeout < 0 || left < timeout) ? (int)left : 0;
		}
		int r = poll(&p, 1, timeout);
		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && p.revents)
			on_signal(s);
		if (s->respawn_at_ms && !s->child && !s->stopping && cfs_clock_mono_ms() >= s->respawn_at_ms)
			spawn(s);
	}
}

/* ---- set-up ------------------------------------------------------------- */

static int make_shm(struct sup *s)
{
	s->shm_fd = memfd_create("colabfs-super", MFD_CLOEXEC);
	if (s->shm_fd < 0 || ftruncate(s->shm_fd, (off_t)CFS_SHM_SIZE) != 0)
		return -errno;
	s->shm = mmap(NULL, sizeof(struct cfs_super_shm), PROT_READ | PROT_WRITE, MAP_SHARED,
		      s->shm_fd, 0);
	if (s->shm == MAP_FAILED) {
		s->shm = NULL;
		return -errno;
	}
	s->shm->magic = CFS_SHM_MAGIC;
	s->shm->rec.mounted_ms = cfs_clock_mono_ms();
	return 0;
}

static int resolve_mode(struct sup *s, char *why, size_t wcap)
{
	uint32_t major, minor;
	int resend = kernel_has_resend(s->shm, &major, &minor);
	const char *m = s->o->recovery;
	if (strcmp(m, "resend") == 0 && !resend) {
		snprintf(why, wcap, "--recovery=resend needs FUSE_NOTIFY_RESEND (Linux 6.9 or later); "
			 "this kernel speaks FUSE %u.%u without it (use auto or forward)",
			 major, minor);
		return CFS_E_CONFIG;
	}
	if (strcmp(m, "forward") == 0 || (strcmp(m, "auto") == 0 && !resend))
		s->mode = CFS_RECOVERY_FORWARD;
	else if (strcmp(m, "none") == 0)
		s->mode = CFS_RECOVERY_NONE;
	else
		s->mode = CFS_RECOVERY_RESEND;
	s->shm->rec.mode = s->mode;
	snprintf(s->mode_line, sizeof(s->mode_line),
		 "crash recovery: %s (kernel FUSE %u.%u, %s FUSE_NOTIFY_RESEND)",
		 cfs_stats_recovery_name(s->mode), major, minor, resend ? "with" : "without");
	return 0;
}

/* The foreground process after the fork: waits for the first server's word. */
static int wait_ready(int rfd, pid_t daemon)
{
	char msg[2048];
	size_t n = 0;
	for (;;) {
		ssize_t r = read(rfd, msg + n, sizeof(msg) - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || (n += (size_t)r) == sizeof(msg) - 1)
			break;
	}
	msg[n] = '\0';
	if (strncmp(msg, "OK ", 3) == 0) {
		fputs(msg + 3, stderr);
		return 0;
	}
	char *nl = strchr(msg, '\n');
	if (nl)
		nl[1] = '\0'; /* the first reason is the one that counts */
	fprintf(stderr, "colabfs: %s%s",
		strncmp(msg, "ERR ", 4) == 0 ? msg + 4
					     : "the server died while starting (see the log)",
		strncmp(msg, "ERR ", 4) == 0 ? "" : "\n");
	int st;
	if (waitpid(daemon, &st, 0) == daemon && WIFEXITED(st) && WEXITSTATUS(st))
		return WEXITSTATUS(st); /* it unmounted before it exited */
	return 1;
}

static void detach_stdio(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return;
	dup2(null, 0);
	dup2(null, 1);
	if (cfs_log_capture_stderr() != 0) /* else a library's last words reach the log */
		dup2(null, 2);
	if (null > 2)
		close(null);
}

/* A failure before the first server serves: on the terminal in the
 * foreground, else through the ready pipe to the process that waits. */
static int fail(struct sup *s, int status, const char *msg)
{
	if (s->o->foreground || s->ready_fd < 0)
		fprintf(stderr, "colabfs: %s\n", msg);
	else
		dprintf(s->ready_fd, "ERR %s\n", msg);
	return status;
}

/* Mounts and reads INIT.  Returns 0 or an exit status (reported). */
static int set_up(struct sup *s)
{
	char why[512] = "";
	int rc = make_shm(s);
	if (rc) {
		snprintf(why, sizeof(why), "shared memory: %s", strerror(-rc));
		return fail(s, 1, why);
	}
	s->se = cfs_session_fuse_new(s->o->fuse_opts, s->o->debug, NULL);
	if (!s->se)
		return fail(s, 1, "cannot create the FUSE session");
	if (fuse_session_mount(s->se, s->o->mountpoint) != 0) {
		fuse_session_destroy(s->se);
		snprintf(why, sizeof(why), "cannot mount on %s", s->o->mountpoint);
		return fail(s, 1, why);
	}
	s->fd = fuse_session_fd(s->se);
	if ((rc = read_init(s, why, sizeof(why))) == 0)
		rc = resolve_mode(s, why, sizeof(why));
	if (rc) {
		fuse_session_unmount(s->se);
		fuse_session_destroy(s->se);
		return fail(s, rc == CFS_E_CONFIG ? 2 : 1, why[0] ? why : strerror(-rc));
	}
	return 0;
}

int cfs_super_run(const struct cfs_super_opts *o)
{
	struct sup s = { .o = o, .fd = -1, .shm_fd = -1, .sigfd = -1, .ready_fd = -1 };
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		perror("colabfs: pipe");
		return 1;
	}
	if (!o->foreground) {
		/* the daemon mounts and supervises; this process only reports */
		pid_t d = fork();
		if (d < 0) {
			perror("colabfs: fork");
			return 1;
		}
		if (d > 0) {
			close(pfd[1]);
			return wait_ready(pfd[0], d);
		}
		setsid();
	}
	close(pfd[0]);
	s.ready_fd = pfd[1];
	int rc = set_up(&s);
	if (rc)
		return rc;
	if (!o->foreground) {
		if (o->log_file)
			cfs_log_open(o->log_file, (enum cfs_log_level)o->log_level);
		detach_stdio();
	}
	CFS_INFO("%s", s.mode_line);
	warn_timeouts();
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* a server's notifier (notifier.h) outlives it a moment: ours to reap */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	s.sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	s.shm->rec.super_pid = (int32_t)getpid();
	spawn(&s);
	loop(&s);
	if (s.ready_fd >= 0)
		close(s.ready_fd);
	CFS_INFO("supervisor: unmounting %s", o->mountpoint);
	fuse_session_unmount(s.se);
	fuse_session_destroy(s.se);
	return s.failed ? 1 : 0;
}
