"""Finding and running the colabfs command.

The binary: $COLABFS_BIN, else `colabfs` on PATH, else where `make install`
put it (_paths.BINDIR).  Mount options are checked against `colabfs --help`'s
option list before anything starts.  Commands run with this process's
environment (the daemon needs it: $TBE_EPHEM_CREDS_ADDR, proxies, HOME);
what they print is kept, never shown raw, and scrubbed of secrets before it
goes into an Error."""

import difflib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

from ._errors import Error, scrub
from ._progress import parse_line

_help_cache = {}
_no_json = set()  # (binary, command) pairs whose CLI does not know --json yet

# options the API decides itself: a daemon in the foreground would never return
_RESERVED = {"foreground": "mount() starts the daemon in the background itself",
             "debug": "debug implies the foreground; use log_level='debug'",
             "help": "see colabfs --help"}


def binary():
    """The colabfs binary to run (a path), or Error."""
    env = os.environ.get("COLABFS_BIN")
    if env:
        if os.access(env, os.X_OK):
            return env
        raise Error("$COLABFS_BIN is %s, which is not an executable file" % env,
                    fix="set COLABFS_BIN to the colabfs binary, or unset it")
    found = shutil.which("colabfs")
    if found:
        return found
    try:
        from . import _paths  # written by make
        p = os.path.join(getattr(_paths, "BINDIR", ""), "colabfs")
        if os.access(p, os.X_OK):
            return p
    except ImportError:
        pass
    raise Error("the colabfs command is not installed (not on PATH, nor where make install puts it)",
                fix="build colabfs and run make install (README: On Colab), or set COLABFS_BIN")


def run(args, timeout=None, env=None):
    """(returncode, stdout, stderr) of `colabfs ARGS`; returncode None when it
    ran past timeout seconds (then it was killed)."""
    argv = [binary()] + [os.fspath(a) for a in args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # files, not pipes: a daemon that keeps a copy of a pipe open would make
        # communicate() wait for it
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                             env=env if env is not None else os.environ.copy())
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = None
        out.seek(0)
        err.seek(0)
        return (rc, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"))


def message(stderr, default="failed"):
    """The CLI's reason: its "colabfs: ..." lines (not the log lines with a
    timestamp), scrubbed."""
    lines = [ln.strip() for ln in stderr.splitlines()]
    said = [ln[len("colabfs: "):] for ln in lines if ln.startswith("colabfs: ")]
    if not said:
        said = [ln for ln in lines if ln and not re.match(r"^\d{4}-\d\d-\d\dT", ln)]
    return scrub("; ".join(said)) if said else default


# ---- mount options ---------------------------------------------------------------

_HELP_LINE = re.compile(r"^\s+(?:-\w, )?--([a-z][a-z0-9-]*)(=|\s(?=[A-Z]))?")


def parse_help(text):
    """{option name: takes a value} from `colabfs --help`'s mount options."""
    opts = {}
    started = False
    for line in text.splitlines():
        if line.startswith("mount options"):
            started = True
            continue
        if not started:
            continue
        m = _HELP_LINE.match(line)
        if m:
            opts[m.group(1)] = m.group(2) is not None
    return opts


def mount_options(bin_path=None):
    """The mount options of this binary (cached per binary and its mtime)."""
    b = bin_path or binary()
    try:
        key = (b, os.stat(b).st_mtime_ns)
    except OSError:
        key = (b, 0)
    if key not in _help_cache:
        rc, out, err = run(["--help"], timeout=30)
        opts = parse_help(out)
        if rc != 0 or not opts:
            raise Error("`colabfs --help` did not list the mount options: %s" % message(err),
                        fix="check the colabfs installation (colabfs --version)")
        _help_cache[key] = opts
    return _help_cache[key]


def option_args(options, known):
    """Keyword options -> command-line words, checked against known (from
    parse_help): cache_dir="/x" -> --cache-dir=/x, a flag True -> --flag,
    False or None -> nothing, a list or tuple -> the option repeated.  Raises
    Error for an option colabfs does not have or a value of the wrong kind."""
    words = []
    for key, val in options.items():
        name = key.replace("_", "-")
        if name in _RESERVED:
            raise Error("option %s is not available from Python: %s" % (key, _RESERVED[name]),
                        fix="drop %s=..." % key)
        if name not in known:
            near = difflib.get_close_matches(name, list(known), n=1)
            raise Error("colabfs mount has no option %s (--%s)" % (key, name),
                        fix=("did you mean %s? " % near[0].replace("-", "_") if near else "")
                        + "see the mount options in colabfs --help")
        if val is None or val is False:
            continue
        takes_value = known[name]
        if not takes_value:
            if val is not True:
                raise Error("option %s is a flag: give True or False, not %r" % (key, val),
                            fix="%s=True" % key)
            words.append("--" + name)
            continue
        if val is True:
            raise Error("option %s wants a value (--%s=VALUE), not True" % (key, name),
                        fix="see colabfs --help for what --%s takes" % name)
        vals = val if isinstance(val, (list, tuple)) else [val]
        for v in vals:
            words.append("--%s=%s" % (name, os.fspath(v) if isinstance(v, os.PathLike) else v))
    return words


# ---- commands that print JSON lines ----------------------------------------------


def stream_json(args, on_event, timeout=None, env=None):
    """Runs `colabfs ARGS` and calls on_event(event) for each JSON line it
    prints on stdout, as it prints it.  Returns (returncode, stderr, events);
    returncode None when it ran past timeout seconds (then it was killed)."""
    argv = [binary()] + [os.fspath(a) for a in args]
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                             env=env if env is not None else os.environ.copy())
        killed = threading.Event()

        def kill():
            killed.set()
            p.kill()
        timer = threading.Timer(timeout, kill) if timeout is not None else None
        if timer:
            timer.daemon = True
            timer.start()
        n = 0
        try:
            for line in p.stdout:
                ev = parse_line(line)
                if ev is not None:
                    n += 1
                    on_event(ev)
        except BaseException:
            p.kill()
            raise
        finally:
            p.stdout.close()
            rc = p.wait()
            if timer:
                timer.cancel()
        err.seek(0)
        return (None if killed.is_set() else rc), err.read().decode("utf-8", "replace"), n


def json_unsupported(rc, stderr, events):
    """True when a command refused --json (a colabfs from before it)."""
    return rc == 2 and events == 0 and ("--json" in stderr or "usage:" in stderr)


def deadline_left(deadline):
    """Seconds to a time.monotonic() deadline (None: no deadline)."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())
