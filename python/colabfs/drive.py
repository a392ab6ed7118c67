"""Mounting Drive from Python, as google.colab.drive does it:

    import colabfs
    colabfs.mount("/content/data", cache_dir="/content/.colabfs-cache")
    ...                                   # read and write under /content/data
    colabfs.flush_and_unmount()           # every byte written is in Drive, then unmount

Each call runs the colabfs command (see _cli.py for which one) and turns its
failures into colabfs.Error with a one-line ``fix``; what the command prints
is never shown raw.  sync, warm and flush_and_unmount draw one progress bar
(see _progress.py)."""

import ctypes
import errno
import json
import math
import os
import re
import tempfile
import time
import warnings

from . import _cli
from ._errors import Error, MountpointError, scrub
from ._mountinfo import FSTYPE, colabfs_mounts, entry_at
from ._progress import Bar, Progress

__all__ = ["mount", "flush_and_unmount", "sync", "warm", "prefetch", "stats"]

PID_XATTR = "user.colabfs.pid"
COLAB_ADC = "/content/.adc/adc.json"
# of a mount's time budget, what is kept for `colabfs doctor` when it fails
DOCTOR_RESERVE_S = 8.0
ALREADY = ('Drive already mounted at {mnt}; to attempt to forcibly remount, '
           'call colabfs.mount("{mnt}", force_remount=True).')

_mounted_here = []  # mountpoints this process mounted, oldest first


# ---- which mount ---------------------------------------------------------------------


def _state(mp):
    """"live" (a colabfs mount that answers), "dead" (one whose daemon is gone),
    "other" (another file system mounted there) or None (nothing mounted)."""
    e = entry_at(mp)
    if e is None:
        return None
    if e["fstype"] != FSTYPE:
        return "other"
    try:
        os.getxattr(mp, PID_XATTR)
        return "live"
    except OSError as ex:
        return "dead" if ex.errno in (errno.ENOTCONN, errno.ECONNABORTED) else "live"


def _resolve(mountpoint):
    """The mountpoint to act on: the one given, else the only colabfs mount
    (the only one this process mounted, if several are)."""
    if mountpoint is not None:
        return os.path.abspath(os.path.expanduser(os.fspath(mountpoint)))
    live = colabfs_mounts()
    mine = [m for m in _mounted_here if m in live]
    if len(mine) == 1:
        return mine[0]
    if len(live) == 1:
        return live[0]
    if not live:
        raise Error("there is no colabfs mount", fix='mount one first: colabfs.mount("/content/data")')
    raise Error("there are %d colabfs mounts (%s)" % (len(live), ", ".join(live)),
                fix="name the one you mean: give its mountpoint")


def _forget(mp):
    while mp in _mounted_here:
        _mounted_here.remove(mp)


# ---- mount ---------------------------------------------------------------------------


def _check_mountpoint(mp, dead):
    """google.colab.drive's checks, with its messages."""
    if os.path.islink(mp):
        raise MountpointError("Mountpoint must not be a symlink")
    if os.path.isdir(mp) and not dead and os.listdir(mp):
        raise MountpointError("Mountpoint must not already contain files")
    if not dead and not os.path.isdir(mp) and os.path.lexists(mp):
        raise MountpointError("Mountpoint must either be a directory or not exist")
    if not os.path.isdir(os.path.dirname(mp)):
        raise MountpointError("Mountpoint must be in a directory that exists")


def _gcloud_adc():
    conf = os.environ.get("CLOUDSDK_CONFIG") or os.path.expanduser("~/.config/gcloud")
    return os.path.join(conf, "application_default_credentials.json")


def _needs_consent(options):
    """True inside Colab when the token will come from Colab's ephemeral
    credentials endpoint ($TBE_EPHEM_CREDS_ADDR): no credentials source found
    before it (colabfs(1), CREDENTIALS: --credentials,
    GOOGLE_APPLICATION_CREDENTIALS, gcloud's ADC file, Colab's ADC file,
    --metadata-url)."""
    if not os.environ.get("TBE_EPHEM_CREDS_ADDR"):
        return False
    if options.get("credentials") or options.get("metadata_url") or \
            os.environ.get("GOOGLE_APPLICATION_CREDENTIALS"):
        return False
    if os.path.exists(_gcloud_adc()) or os.path.exists(COLAB_ADC):
        return False
    try:
        import google.colab  # noqa: F401
    except ImportError:
        return False
    return True


def _request_consent():
    """What google.colab.drive.mount asks first: the notebook shows the user a
    consent dialog, and once granted the endpoint hands out their Drive token."""
    from google.colab import _message
    try:
        _message.blocking_request("request_auth", request={"authType": "dfs_ephemeral"},
                                  timeout_sec=None)
    except Exception as e:  # the user said no, or the frontend did not answer
        raise Error("Google Drive access was not granted: %s" % e,
                    fix="run colabfs.mount again and allow access to Google Drive") from None


_FIX_IN_MESSAGE = re.compile(r"\((?:[^()]*?;\s*)?((?:check|give|set|run|install|use|unmount|mount)"
                             r"\b[^()]*)\)")


def _doctor(mp, words, seconds):
    """The failing checks of `colabfs doctor MP --json` (the live-mount check
    left out: the mount just failed), or None when it gave no answer in time."""
    if seconds < 0.5:
        return None
    rc, out, _ = _cli.run(["doctor", mp, "--json"] + words, timeout=seconds)
    try:
        rep = json.loads(out)
    except ValueError:
        return None
    return [c for c in rep.get("checks", []) if c.get("status") == "FAIL" and c.get("name") != "mount"]


def _mount_failed(mp, words, reason, deadline):
    checks = _doctor(mp, words, _cli.deadline_left(deadline) - 0.2)
    fix = None
    if checks:
        c = checks[0]
        reason += "; colabfs doctor: %s: %s" % (c.get("name"), c.get("detail"))
        fix = c.get("fix")
    if not fix:
        m = _FIX_IN_MESSAGE.search(reason)
        fix = m.group(1) if m else "run colabfs doctor %s for a checklist" % mp
    return Error("cannot mount Drive at %s: %s" % (mp, reason), fix=fix, checks=checks or [])


def _abandon(mp):
    """After a `colabfs mount` that was killed: a supervisor may still have the
    mount up while its server starts; detach it (its --start-timeout ends it)."""
    e = entry_at(mp)
    if e is not None and e["fstype"] == FSTYPE:
        try:
            _detach(mp)
        except Error:
            pass  # the supervisor unmounts it at its --start-timeout


def mount(mountpoint, force_remount=False, timeout_ms=120000, readonly=False, quiet=False,
          **options):
    """Mounts Drive at mountpoint and returns once it serves.

    Keyword options are colabfs mount options: cache_dir="/content/.cache" is
    --cache-dir=/content/.cache, a flag True is --flag (False: left out), a
    list repeats the option; readonly=True is --read-only.  An option colabfs
    does not have raises colabfs.Error before anything starts.

    Inside Colab, when the token is to come from Colab's credentials endpoint,
    it first asks the notebook for the user's consent, as drive.mount does.
    A colabfs mount already there is left as it is (force_remount: flushed,
    unmounted and mounted again).  The mountpoint must be an empty folder, or
    not exist in a folder that does.  Raises colabfs.Error within timeout_ms
    with the reason and, from `colabfs doctor`, the fix.  Prints "Mounted at
    MOUNTPOINT" (quiet: nothing)."""
    mountpoint = os.fspath(mountpoint)
    if " " in mountpoint:
        raise MountpointError("Mountpoint must not contain a space.")
    mp = os.path.abspath(os.path.expanduser(mountpoint))
    deadline = time.monotonic() + timeout_ms / 1000.0
    if readonly:
        options = dict(options, read_only=True)
    start_timeout = options.pop("start_timeout", None)
    words = _cli.option_args(options, _cli.mount_options())
    state = _state(mp)
    if state == "live":
        if not force_remount:
            if not quiet:
                print(ALREADY.format(mnt=mp))
            return
        flush_and_unmount(mp, timeout_ms=_cli.deadline_left(deadline) * 1000, quiet=quiet)
        state = _state(mp)
    _check_mountpoint(mp, state == "dead")
    if state == "dead":
        words.append("--force")  # the CLI detaches a mount whose daemon is gone
    if state != "dead" and not os.path.exists(mp):
        os.mkdir(mp)
    if _needs_consent(options):
        _request_consent()
    total = _cli.deadline_left(deadline)
    reserve = min(DOCTOR_RESERVE_S, total / 3)
    budget = max(1.0, total - reserve)
    st = start_timeout if start_timeout is not None else max(1, int(budget))
    rc, _, err = _cli.run(["mount"] + words + ["--start-timeout=%d" % st, mp], timeout=budget)
    if rc is None:
        _abandon(mp)
        raise _mount_failed(mp, words, "the mount did not serve within %.0f s" % budget, deadline)
    if rc == 2:
        raise Error("colabfs mount refused: %s" % _cli.message(err),
                    fix="see the mount options in colabfs --help")
    if rc != 0:
        raise _mount_failed(mp, words, _cli.message(err), deadline)
    try:
        os.getxattr(mp, PID_XATTR)
        serving = os.stat(mp).st_dev != os.stat(os.path.dirname(mp)).st_dev
    except OSError as e:
        serving, err = False, str(e)
    if not serving:
        raise _mount_failed(mp, words, "colabfs mount returned, but %s does not answer (%s)"
                            % (mp, err.strip() or "not mounted"), deadline)
    _forget(mp)
    _mounted_here.append(mp)
    for ln in err.splitlines():  # e.g. a --cache-size above what RAM allows
        if ln.startswith("colabfs: warning: "):
            warnings.warn("colabfs: " + scrub(ln[len("colabfs: warning: "):]), stacklevel=2)
    if not quiet:
        print("Mounted at %s" % mp)


# ---- sync, warm ------------------------------------------------------------------------


def _run_progress(kind, args, quiet, timeout=None, legacy=None, label=None):
    """Runs `colabfs KIND --json ARGS` with one bar; returns (Progress, rc,
    stderr).  legacy(rc, stdout, stderr) -> Progress answers for a colabfs
    that does not know --json yet (run again without it)."""
    b = _cli.binary()
    if (b, kind) not in _cli._no_json:
        p = Progress(kind, label)
        bar = Bar(label or kind, quiet=quiet)
        try:
            rc, err, n = _cli.stream_json([kind, "--json"] + args,
                                          lambda ev: (p.feed(ev), bar.update(p)), timeout=timeout)
        finally:
            bar.close(p if p.events else None)
        if not _cli.json_unsupported(rc, err, n):
            return p, rc, err
        _cli._no_json.add((b, kind))
    # no bar: this colabfs says nothing a bar could show
    rc, out, err = _cli.run([kind] + args, timeout=timeout)
    return legacy(rc, out, err), rc, err


def _sync_legacy(rc, out, err):
    """A sync without --json: its exit status and "colabfs: sync: PATH: WHY" lines."""
    p = Progress("sync")
    failed, timed_out = [], False
    for ln in err.splitlines():
        if not ln.startswith("colabfs: sync: "):
            continue
        rest = ln[len("colabfs: sync: "):]
        if rest.startswith("timed out"):
            timed_out = True
        elif not rest.startswith("waiting: ") and ": " in rest and " other file" not in rest:
            path, why = rest.split(": ", 1)
            failed.append((path, why))
    if rc == 0:
        p.feed({"event": "done", "ok": True})
    elif rc == 1:
        p.feed({"event": "done", "ok": False, "failed": failed,
                "error": "timeout" if timed_out else "failed"})
    return p


def _sync(mp, timeout_s, quiet, what="sync"):
    # whole seconds, rounded up: the time left of a deadline is never a round number
    args = (["--timeout", "%d" % math.ceil(timeout_s)] if timeout_s is not None else []) + [mp]
    # our own limit a little past the command's, for one that hangs
    limit = None if timeout_s is None else timeout_s + 30
    p, rc, err = _run_progress("sync", args, quiet, timeout=limit, legacy=_sync_legacy,
                               label=what)
    if p.finished and p.ok and rc == 0:
        return
    if rc is None:
        raise Error("%s of %s: colabfs sync did not answer" % (what, mp),
                    fix="run colabfs doctor %s" % mp)
    if p.failed:
        raise Error("%s of %s: %d file%s cannot be uploaded: %s" % (
            what, mp, len(p.failed), "" if len(p.failed) == 1 else "s",
            "; ".join("%s: %s" % f for f in p.failed)),
            fix="do what each reason says (free Drive storage, get write access, make the file "
                "smaller), then call colabfs.sync() again: the bytes stay staged",
            path=p.failed[0][0], failed=p.failed)
    if p.finished and p.error == "timeout":
        raise Error("%s of %s timed out with %d file%s (%d bytes) not yet in Drive%s" % (
            what, mp, p.files, "" if p.files == 1 else "s", p.total_bytes - p.done_bytes,
            ": " + p.why if p.why else ""),
            fix="the uploads go on in the background: call colabfs.sync() again, or give a "
                "longer timeout_ms")
    msg = _cli.message(err, default=p.error or "failed (exit status %s)" % rc)
    raise Error("%s of %s: %s" % (what, mp, msg),
                fix="is %s a colabfs mount? colabfs doctor %s says" % (mp, mp) if rc == 2
                else "run colabfs doctor %s" % mp)


def sync(path=None, timeout_ms=None, quiet=False):
    """Waits until Drive holds every byte written at or below path (default:
    the only colabfs mount).  Raises colabfs.Error naming each file that cannot
    be uploaded and why, or at timeout_ms (None: no limit)."""
    _sync(_resolve(path), None if timeout_ms is None else timeout_ms / 1000.0, quiet)


def _warm_legacy(rc, out, err):
    p = Progress("warm")
    m = re.search(r"^warmed (\d+) files", out, re.M)
    p.files = int(m.group(1)) if m else 0
    if rc == 0:
        p.feed({"event": "done", "ok": True})
    else:
        p.feed({"event": "done", "ok": False, "error": _cli.message(err)})
    return p


def warm(paths, quiet=False):
    """Fetches files and folders into the cache ahead of reading (str or a
    list).  Returns {"files": N, "bytes": N}; raises colabfs.Error."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(x) for x in paths]
    if not paths:
        return {"files": 0, "bytes": 0}
    p, rc, err = _run_progress("warm", paths, quiet, legacy=_warm_legacy)
    if rc != 0 or (p.finished and not p.ok):
        raise Error("warm: %s" % _cli.message(err, default=p.error or "failed"),
                    fix="check that each path is in a colabfs mount you mounted; colabfs doctor "
                        "MOUNTPOINT", path=paths[0] if len(paths) == 1 else None)
    return {"files": p.files, "bytes": p.total_bytes}


# ---- order hints -----------------------------------------------------------------------


def _done_line(out):
    """The last JSON line of a command's stdout, or {}."""
    for line in reversed(out.splitlines()):
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict):
            return ev
    return {}


def prefetch(paths, timeout_s=600):
    """Tells the mount the order files will be read in: it downloads them in
    that order, at Drive's quota, as far ahead of the reader as its cache
    allows, and drops the hint when the reader leaves the order (or reads
    to its end, or a new hint comes).  Returns at once (nothing waits for a
    download): {"files": N, "unknown": N, "bytes": N}, the files the mount
    found and the paths it did not (or that were folders).  Every path must
    be in the same colabfs mount; raises colabfs.Error otherwise.  It runs
    `colabfs warm --ordered --list FILE`."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    lines, odd = [], 0
    for p in paths:
        p = os.path.abspath(os.fsdecode(os.fspath(p)))
        if "\n" in p:
            odd += 1  # a list line cannot hold it
        else:
            lines.append(p)
    if not lines:
        return {"files": 0, "unknown": odd, "bytes": 0}
    with tempfile.NamedTemporaryFile("w", prefix="colabfs-order-", suffix=".txt",
                                     encoding="utf-8", errors="surrogateescape",
                                     delete=False) as f:
        f.write("\n".join(lines))
        f.write("\n")
    try:
        rc, out, err = _cli.run(["warm", "--ordered", "--json", "--list", f.name],
                                timeout=timeout_s)
    finally:
        os.unlink(f.name)
    ev = _done_line(out)
    if rc != 0 or not ev.get("ok"):
        raise Error("prefetch: %s" % _cli.message(err, default=ev.get("error") or "failed"),
                    fix="give paths in one colabfs mount you mounted (the files it should read "
                        "next, in order); colabfs doctor MOUNTPOINT",
                    path=lines[0] if len(lines) == 1 else None)
    return {"files": int(ev.get("files", 0)), "unknown": int(ev.get("unknown", 0)) + odd,
            "bytes": int(ev.get("bytes", 0))}


# ---- stats -----------------------------------------------------------------------------


def _numbers(v):
    """JSON values with numbers given as strings turned into numbers."""
    if isinstance(v, dict):
        return {k: _numbers(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_numbers(x) for x in v]
    if isinstance(v, str):
        for conv in (int, float):
            try:
                return conv(v)
            except ValueError:
                pass
    return v


def stats(mountpoint=None):
    """The mount's counters (`colabfs stats MOUNTPOINT --json`) as a dict of
    numbers: cache_hits_total, bytes_from_drive_total, uploads_pending, ..."""
    mp = _resolve(mountpoint)
    rc, out, err = _cli.run(["stats", mp, "--json"], timeout=60)
    if rc != 0:
        raise Error("stats of %s: %s" % (mp, _cli.message(err)), fix="is %s a colabfs mount? "
                    "colabfs doctor %s" % (mp, mp))
    try:
        return _numbers(json.loads(out))
    except ValueError:
        raise Error("stats of %s: colabfs printed no JSON" % mp, fix="check colabfs --version") \
            from None


# ---- unmount ---------------------------------------------------------------------------

MNT_DETACH = 2


def _detach(mp):
    """Lazy unmount: the mountpoint goes now; the daemon serves what is still
    open until it is closed.  Root: umount2(MNT_DETACH); else fusermount3 -uz."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.umount2(os.fsencode(mp), MNT_DETACH) != 0:
            e = ctypes.get_errno()
            raise Error("cannot detach %s: %s" % (mp, os.strerror(e)),
                        fix="close the files open in it, then colabfs umount %s" % mp)
        return
    import subprocess
    r = subprocess.run(["fusermount3", "-uz", mp], capture_output=True, text=True)
    if r.returncode != 0:
        raise Error("cannot detach %s: %s" % (mp, r.stderr.strip()),
                    fix="close the files open in it, then colabfs umount %s" % mp)


def _holders(mp):
    """[(pid, command name)] of processes with a file, folder or cwd in mp."""
    out = []
    prefix = mp.rstrip("/") + "/"
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        base = "/proc/%s/" % pid
        try:
            names = ["cwd"] + ["fd/" + fd for fd in os.listdir(base + "fd")]
        except OSError:  # gone, or not ours to look at
            continue
        links = []
        for name in names:
            try:
                links.append(os.readlink(base + name))
            except OSError:  # closed meanwhile (the listing's own descriptor)
                pass
        if any(ln == mp or ln.startswith(prefix) for ln in links):
            try:
                with open(base + "comm") as f:
                    name = f.read().strip()
            except OSError:
                name = "?"
            out.append((int(pid), name))
    return out


def flush_and_unmount(mountpoint=None, timeout_ms=24 * 3600 * 1000, quiet=False):
    """Waits until Drive has every byte written to the mount (`colabfs sync`),
    then unmounts it (default: the only colabfs mount).  When files are still
    open there, detaches it instead, with a warning: the daemon serves them
    until they are closed.  Raises colabfs.Error naming each file that cannot
    be uploaded and why, or when timeout_ms passes first."""
    mp = _resolve(mountpoint)
    deadline = time.monotonic() + timeout_ms / 1000.0
    _sync(mp, _cli.deadline_left(deadline), quiet, what="flush")
    rc, _, err = _cli.run(["umount", mp], timeout=max(5.0, _cli.deadline_left(deadline)))
    msg = _cli.message(err)
    if rc != 0 and "still in use" in msg:
        who = _holders(mp)
        _detach(mp)
        warnings.warn(
            "colabfs: %s is still in use (%s): detached it lazily. Its daemon keeps serving the "
            "open files until they are closed, then exits; everything written before this call "
            "is in Drive, what is written after it stays staged in the cache folder and is "
            "uploaded by the next mount of that folder." % (
                mp, ", ".join("pid %d %s" % w for w in who) or "open files"), stacklevel=2)
    elif rc != 0:
        raise Error("cannot unmount %s: %s" % (mp, msg if rc is not None else "no answer"),
                    fix="colabfs umount %s in a terminal says more" % mp)
    _forget(mp)
