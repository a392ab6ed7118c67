/* crashlog: a server's last words.  On a fatal signal (SIGSEGV, SIGBUS,
 * SIGILL, SIGFPE, SIGABRT) a handler writes the signal and the stack
 * (backtrace_symbols_fd: return addresses and symbol names, never data, so
 * nothing secret) to stderr, which a daemon's log file is
 * (cfs_log_capture_stderr), then lets the signal end the process as it would
 * have: the supervisor sees the same death and starts another server.
 * Nothing is installed in a build under AddressSanitizer, whose own report
 * says more. */
#ifndef CFS_CRASHLOG_H
#define CFS_CRASHLOG_H

/* Installs the handler (once; the unwinder is loaded now, not in the
 * handler).  Returns 0 or -errno. */
int cfs_crashlog_install(void);

#endif
