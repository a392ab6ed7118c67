/* Unit tests: crashlog's handler, in forked children whose stderr is a file:
 * a fault, an abort and a signal from outside each leave the signal's name
 * and a stack in the file, and the child still dies of that signal. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "crashlog.h"

static char path[] = "/tmp/cfs-crashlog-XXXXXX";
static char text[1 << 16];

static volatile int *volatile nowhere;

static void die(int how)
{
	if (how == SIGSEGV)
		*nowhere = 1; /* a real fault */
	else if (how == SIGABRT)
		abort();
	else
		raise(how);
}

/* Runs die(how) in a child with the handler; returns how it ended, the
 * file's text in text[]. */
static int run(int how)
{
	FILE *f = fopen(path, "w");
	if (f)
		fclose(f);
	pid_t pid = fork();
	if (pid == 0) {
		FILE *e = freopen(path, "w", stderr);
		if (!e || cfs_crashlog_install() != 0)
			_exit(3);
		die(how);
		_exit(4);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	f = fopen(path, "r");
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	if (f)
		fclose(f);
	text[n] = '\0';
	return st;
}

static void check_death(int sig, const char *line)
{
	int st = run(sig);
#if defined(__SANITIZE_ADDRESS__)
	/* not installed: AddressSanitizer reports (and may exit 1 instead) */
	(void)line;
	CHECK(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0 &&
				  WEXITSTATUS(st) != 3 && WEXITSTATUS(st) != 4));
#else
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == sig);
	CHECK(strstr(text, line) != NULL);
	CHECK(strstr(text, "colabfs: end of the stack\n") != NULL);
	/* at least one frame between the two lines */
	const char *from = strstr(text, "stack:\n"), *to = strstr(text, "colabfs: end");
	CHECK(from && to && to - from > (long)strlen("stack:\n") + 4);
	if (!from || !to || to - from <= (long)strlen("stack:\n") + 4)
		fprintf(stderr, "for signal %d the file says:\n%s\n", sig, text);
#endif
}

int main(void)
{
	int fd = mkstemp(path);
	if (fd < 0)
		return 1;
	close(fd);
	check_death(SIGSEGV, "colabfs: fatal signal 11 (SIGSEGV); the server's stack:\n");
	check_death(SIGABRT, "colabfs: fatal signal 6 (SIGABRT); the server's stack:\n");
	check_death(SIGBUS, "colabfs: fatal signal 7 (SIGBUS); the server's stack:\n");
	CHECK_EQ(cfs_crashlog_install(), 0); /* twice: nothing more */
	CHECK_EQ(cfs_crashlog_install(), 0);
	unlink(path);
	return check_done("test_crashlog");
}
