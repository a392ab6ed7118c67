/* crashlog: see crashlog.h.  The handler uses only what is safe in a signal
 * handler once the unwinder is loaded: write(2), backtrace (loaded at
 * install), backtrace_symbols_fd, signal and raise. */
#define _GNU_SOURCE
#include "crashlog.h"

#include <errno.h>
#include <execinfo.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FRAMES 64
#define ALT_STACK (64 * 1024)

static const struct {
	int sig;
	const char *name;
} fatal[] = { { SIGSEGV, "SIGSEGV" }, { SIGBUS, "SIGBUS" }, { SIGILL, "SIGILL" },
	      { SIGFPE, "SIGFPE" },   { SIGABRT, "SIGABRT" } };

static void put(const char *s)
{
	ssize_t w = write(2, s, strlen(s));
	(void)w;
}

static void on_fatal(int sig)
{
	char dec[12], *p = dec + sizeof(dec);
	*--p = '\0';
	unsigned v = (unsigned)sig;
	do
		*--p = (char)('0' + v % 10);
	while (v /= 10);
	const char *name = "?";
	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		if (fatal[i].sig == sig)
			name = fatal[i].name;
	put("colabfs: fatal signal ");
	put(p);
	put(" (");
	put(name);
	put("); the server's stack:\n");
	void *frames[FRAMES];
	int k = backtrace(frames, FRAMES);
	backtrace_symbols_fd(frames, k, 2);
	put("colabfs: end of the stack\n");
	signal(sig, SIG_DFL);
	raise(sig); /* blocked here: delivered, with its default action, at return */
}

int cfs_crashlog_install(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return 0;
#else
	static int done;
	if (done)
		return 0;
	void *warm[2];
	backtrace(warm, 2); /* loads the unwinder now: the handler must not */
	stack_t ss = { .ss_size = ALT_STACK };
	if ((ss.ss_sp = malloc(ALT_STACK)) != NULL && sigaltstack(&ss, NULL) != 0) {
		free(ss.ss_sp); /* no alternate stack: an overflow dies without words */
		ss.ss_sp = NULL;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fatal;
	sa.sa_flags = ss.ss_sp ? SA_ONSTACK : 0;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		if (sigaction(fatal[i].sig, &sa, NULL) != 0)
			return -errno;
	done = 1;
	return 0;
#endif
}
