"""Shared helpers for the colabfs end-to-end tests.

Everything here is plain stdlib.  The pieces:

* name rules (FNV-1a suffixes, '/' and '.'/'..' mapping) and the *expected model*
  of what a mount of a spec must show, computed from the spec alone;
* ``Emulator``: starts/stops tests/emulator/drive_emulator.py and talks to it;
* ``Mount``: runs ``colabfs mount``/``colabfs umount``, finds the daemon pid,
  and cleans up with fallbacks (colabfs umount -> umount -l -> kill by pid);
* ``wait_until``: the only place that sleeps; every wait has a deadline;
* a registry of live mounts/processes used by the per-test watchdog in
  conftest.py to unblock a hung test (killing *our* daemon aborts the FUSE
  connection, so blocked syscalls return ENOTCONN instead of hanging forever).

Run as a script (``python3 helpers.py read-ranges JOBFILE``) it is the worker
used by the multi-process reader test.
"""

import base64
import contextlib
import errno
import hashlib
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EMULATOR_PY = REPO / "tests" / "emulator" / "drive_emulator.py"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

ROOT_ID = "0AEmuRootFolder0000000000000000"
FOLDER = "application/vnd.google-apps.folder"
SHORTCUT = "application/vnd.google-apps.shortcut"
GAPPS = "application/vnd.google-apps."
# native type -> (extension, export mime)
EXPORTS = {
    GAPPS + "document": (".docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    GAPPS + "spreadsheet": (".xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    GAPPS + "presentation": (".pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
    GAPPS + "drawing": (".pdf", "application/pdf"),
}

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


def colabfs_bin():
    return Path(os.environ.get("COLABFS_BIN") or (REPO / "colabfs"))


# --------------------------------------------------------------------------
# waiting


class Timeout(AssertionError):
    pass


def wait_until(cond, timeout, interval=0.05, what="condition"):
    """Poll ``cond()`` until it returns a truthy value; return that value.

    Raises Timeout (an AssertionError, so pytest shows it as a failure) after
    ``timeout`` seconds.  Exceptions from cond propagate."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise Timeout("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


# --------------------------------------------------------------------------
# name rules (see the colabfs man page)


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def id_tag(drive_id):
    return ("%016x" % fnv1a64(drive_id.encode("ascii")))[:8]


def insert_tag(name, tag):
    dot = name.rfind(".")
    if dot > 0:
        return "%s (%s)%s" % (name[:dot], tag, name[dot:])
    return "%s (%s)" % (name, tag)


def posix_name(name):
    if name == ".":
        return "\uff0e"
    if name == "..":
        return "\uff0e\uff0e"
    return name.replace("/", "\uff0f")


def mkid(label):
    """A deterministic Drive-like id (33 chars of [A-Za-z0-9_-])."""
    d = hashlib.sha256(label.encode()).digest()
    return "1" + base64.urlsafe_b64encode(d).decode().rstrip("=")[:32]


# --------------------------------------------------------------------------
# expected model of a mounted spec


class Node:
    """What one visible entry of the mount must look like.

    kind: 'dir' | 'file' | 'export'.  For 'file' the bytes come from ``source``
    (a path on disk, or bytes); for 'export' from the emulator's export of
    ``content_id`` as ``export_mime``.  ``shortcut`` is true when the entry is a
    shortcut (its inode may legitimately be shared with its target)."""

    __slots__ = ("kind", "name", "drive_id", "content_id", "source", "size",
                 "export_mime", "children", "shortcut")

    def __init__(self, kind, name, drive_id, content_id=None, source=None, size=None,
                 export_mime=None, shortcut=False):
        self.kind = kind
        self.name = name
        self.drive_id = drive_id
        self.content_id = content_id or drive_id
        self.source = source
        self.size = size
        self.export_mime = export_mime
        self.children = None
        self.shortcut = shortcut

    def __repr__(self):
        return "Node(%s %r id=%s size=%r)" % (self.kind, self.name, self.drive_id, self.size)

    def read_source(self, off=0, n=None):
        """The source's bytes [off, off+n) (to EOF when n is None)."""
        if isinstance(self.source, (bytes, bytearray)):
            data = bytes(self.source)
            return data[off:] if n is None else data[off:off + n]
        with open(self.source, "rb") as f:
            if n is None:
                f.seek(off)
                return f.read()
            n = max(0, min(n, self.size - off))
            if n and _is_hole(f.fileno(), off, n):
                return zeros(n)  # a hole of a sparse source: skip reading GiBs of zeros
            return os.pread(f.fileno(), n, off)


_ZEROS = b""


def zeros(n):
    global _ZEROS
    if len(_ZEROS) < n:
        _ZEROS = bytes(max(n, 16 * MiB))
    return _ZEROS if len(_ZEROS) == n else _ZEROS[:n]


def _is_hole(fd, off, n):
    try:
        data = os.lseek(fd, off, os.SEEK_DATA)
    except OSError as e:
        if e.errno == errno.ENXIO:   # no data at or after off
            return True
        return False
    return data >= off + n


def item_bytes_source(item):
    if "content" in item:
        data = item["content"].encode("utf-8")
        return data, len(data)
    if "path" in item:
        return item["path"], os.stat(item["path"]).st_size
    return b"", 0


class Model:
    """The expected mount view of a spec (computed with the documented rules)."""

    def __init__(self, spec):
        self.spec = spec
        self.root_id = spec.get("root", {}).get("id", ROOT_ID)
        self.items = {it["id"]: it for it in spec["items"]}
        self.by_parent = {}
        for it in spec["items"]:
            p = it.get("parent", "root")
            if p == "root":
                p = self.root_id
            self.by_parent.setdefault(p, []).append(it)
        self._cache = {}

    def _target(self, item):
        tid = item.get("shortcutDetails", {}).get("targetId")
        t = self.items.get(tid)
        if t is None or t.get("trashed"):
            return None
        return t

    def _ancestors(self, folder_id):
        """folder_id and the folders above it, by their parents in the spec."""
        out, f = [], folder_id
        while f and f not in out:
            out.append(f)
            if f == self.root_id:
                break
            p = self.items.get(f, {}).get("parent", "root")
            f = self.root_id if p == "root" else p
        return out

    def children(self, folder_id):
        """dict posix name -> Node for a folder's visible children."""
        if folder_id in self._cache:
            return self._cache[folder_id]
        entries = []  # (display, created, id, node-maker)
        for it in self.by_parent.get(folder_id, []):
            if it.get("trashed"):
                continue
            mime = it.get("mimeType", "application/octet-stream")
            name = posix_name(it["name"])
            if mime == SHORTCUT:
                t = self._target(it)
                if t is None:
                    continue
                tmime = t.get("mimeType", "application/octet-stream")
                if tmime == FOLDER and t["id"] in self._ancestors(folder_id):
                    continue  # a cycle: dropped
                if tmime == FOLDER:
                    node = Node("dir", name, it["id"], content_id=t["id"], shortcut=True)
                elif tmime.startswith(GAPPS):
                    continue  # not used by our specs; rule not pinned down
                else:
                    src, size = item_bytes_source(t)
                    node = Node("file", name, it["id"], content_id=t["id"], source=src,
                                size=size, shortcut=True)
            elif mime == FOLDER:
                node = Node("dir", name, it["id"])
            elif mime.startswith(GAPPS):
                if mime not in EXPORTS:
                    continue
                ext, emime = EXPORTS[mime]
                node = Node("export", name + ext, it["id"], export_mime=emime)
            else:
                src, size = item_bytes_source(it)
                node = Node("file", name, it["id"], source=src, size=size)
            entries.append((node.name, it.get("createdTime", ""), it["id"], node))
        groups = {}
        for e in entries:
            groups.setdefault(e[0], []).append(e)
        out = {}
        for disp, group in groups.items():
            group.sort(key=lambda e: (e[1], e[2]))
            for i, (_, _, iid, node) in enumerate(group):
                if i:
                    node.name = insert_tag(disp, id_tag(iid))
                out[node.name] = node
        assert len(out) == len(entries), "spec produces colliding names: %r" % sorted(groups)
        for node in out.values():
            if node.kind == "dir":
                node.children = None  # resolved lazily by walk()
        self._cache[folder_id] = out
        return out

    def walk(self, folder_id=None, prefix=""):
        """Yield (relpath, Node) for everything visible under folder_id."""
        folder_id = folder_id or self.root_id
        for name, node in sorted(self.children(folder_id).items()):
            rel = prefix + name
            yield rel, node
            if node.kind == "dir":
                yield from self.walk(node.content_id, rel + "/")

    def lookup(self, relpath, folder_id=None):
        folder_id = folder_id or self.root_id
        node = None
        for part in relpath.split("/"):
            node = self.children(folder_id)[part]
            folder_id = node.content_id
        return node


# --------------------------------------------------------------------------
# process / mount bookkeeping (used by the watchdog)

LIVE_MOUNTS = set()   # Mount objects that may hold a FUSE connection
LIVE_PROCS = set()    # subprocess.Popen objects we started and must reap
_REG_LOCK = threading.Lock()


def register_proc(p):
    with _REG_LOCK:
        LIVE_PROCS.add(p)
    return p


def reap_proc(p, term_timeout=10.0):
    """Terminate (then kill) a Popen we started and reap it. Never raises."""
    try:
        if p.poll() is None:
            try:
                p.terminate()
                p.wait(timeout=term_timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)
    except Exception:
        pass
    finally:
        with _REG_LOCK:
            LIVE_PROCS.discard(p)


def _unescape_mountinfo(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 3 < len(s) and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def mount_entry(path):
    """The /proc/self/mountinfo entry for mountpoint ``path`` (no syscall on the
    mount itself, so it cannot hang), as dict, or None."""
    # abspath, not realpath: realpath would stat the (possibly hung) mount
    path = os.path.abspath(str(path))
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            a = left.split()
            b = right.split()
            if _unescape_mountinfo(a[4]) == path:
                found = {"devno": a[2], "options": a[5], "fstype": b[0],
                         "source": _unescape_mountinfo(b[1]) if len(b) > 1 else "",
                         "super_options": b[2] if len(b) > 2 else ""}
    return found  # the last one wins (stacked mounts)


def abort_fuse_connection(path):
    """Aborts the FUSE connection of mountpoint path through fusectl, so that every request
    waiting on it ends (ENOTCONN) even when something still holds /dev/fuse open (a server
    stuck in an uninterruptible notify outlives its SIGKILL); True when it was there."""
    e = mount_entry(path)
    if not e or not e["fstype"].startswith("fuse"):
        return False
    major, _, minor = e["devno"].partition(":")
    conn = "/sys/fs/fuse/connections/%d/abort" % ((int(major) << 20) | int(minor))
    try:
        with open(conn, "w") as f:
            f.write("1")
        return True
    except OSError:
        return False


def is_fuse_mounted(path):
    e = mount_entry(path)
    return bool(e and e["fstype"].startswith("fuse"))


def proc_exe(pid):
    try:
        return os.readlink("/proc/%d/exe" % pid)
    except OSError:
        return None


def proc_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return None


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
        return s[s.rindex(")") + 2]
    except (OSError, ValueError, IndexError):
        return None


def pid_gone(pid):
    """True when pid no longer runs (absent, or a zombie waiting for its parent).
    Our own Popen children are asked through Popen.poll(), which also reaps
    them (never waitpid() them behind Popen's back: it would lose the status)."""
    with _REG_LOCK:
        mine = [p for p in LIVE_PROCS if p.pid == pid]
    if mine:
        return mine[0].poll() is not None
    st = proc_state(pid)
    return st is None or st in ("Z", "X")


def is_colabfs_exe(pid):
    exe = proc_exe(pid)
    return bool(exe and "colabfs" in os.path.basename(exe.replace(" (deleted)", "")))


def serve_pid(super_pid):
    """The live `colabfs serve` child of a mount's supervisor (the pid that
    user.colabfs.pid names), or None."""
    try:
        with open("/proc/%d/task/%d/children" % (super_pid, super_pid)) as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        return None
    for c in kids:
        argv = proc_cmdline(c) or []
        if len(argv) > 1 and argv[1] == b"serve" and not pid_gone(c) and \
                proc_comm(c) != NOTIFIER_COMM:
            return c
    return None


NOTIFIER_COMM = "colabfs-notify"  # a server's notice writer (fuse/notifier.h), same argv


def proc_comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def notifiers_of(super_pid):
    """Live notifier processes under a supervisor (a server's, or one its server left)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and proc_comm(int(d)) == NOTIFIER_COMM and not pid_gone(int(d)):
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == super_pid or ppid == serve_pid(super_pid):
                out.append(int(d))
    return out


def pids_for_mountpoint(mnt):
    """Live colabfs processes whose argv names ``mnt`` (our mountpoints are
    unique tmp paths, so this only finds processes this suite started)."""
    mnt = os.fsencode(os.path.abspath(mnt))
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        pid = int(d)
        if pid == os.getpid():
            continue
        argv = proc_cmdline(pid)
        if not argv:
            continue
        if not any(a == mnt or a.endswith(b"=" + mnt) for a in argv):
            continue
        if not is_colabfs_exe(pid) or pid_gone(pid):
            continue
        found.append(pid)
    return found


def run_cmd(argv, timeout, env=None, cwd=None):
    """Run a short command with a deadline; stdout/stderr go to temp files (not
    pipes) so a daemon that keeps inherited fds open cannot make us wait.
    Returns (rc, stdout, stderr) with rc None on timeout (the process is then
    killed and reaped)."""
    import tempfile
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = register_proc(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                           stderr=err, env=env, cwd=cwd))
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            reap_proc(p, term_timeout=5)
        out.seek(0)
        err.seek(0)
        return rc, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")


def without_other_mounts(argv):
    """argv run in a private mount namespace from which every colabfs mount of
    the machine is detached (only there): `colabfs doctor` without a MOUNTPOINT
    checks the first colabfs mount it finds, and a dead one that another session
    left behind must not decide a test's verdict.  The machine's mounts are
    untouched."""
    script = ("awk '/ - fuse\\.colabfs / {print $5}' /proc/self/mountinfo | "
              "while read -r m; do umount -l \"$m\" 2>/dev/null; done; exec \"$@\"")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"] + argv


def clean_env(extra=None, home=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("COLABFS_", "GOOGLE_", "GCE_", "CLOUDSDK_", "TBE_"))}
    env["NO_GCE_CHECK"] = "True"
    env["GCE_METADATA_HOST"] = "127.0.0.1:9"      # never the real metadata server
    env["GCE_METADATA_IP"] = "127.0.0.1:9"
    if home:
        env["HOME"] = str(home)
        env["CLOUDSDK_CONFIG"] = str(Path(home) / "gcloud")
    if extra:
        env.update(extra)
    return env


class Mount:
    """One colabfs mount.  ``start()`` runs ``colabfs mount`` (daemonizing),
    ``stop()`` runs ``colabfs umount``; ``cleanup()`` always leaves nothing
    behind (falls back to umount -l and killing the daemon by pid)."""

    def __init__(self, mnt, args, env, log_file=None, foreground=False):
        self.mnt = os.path.abspath(str(mnt))
        self.args = list(args)
        self.env = env
        self.log_file = str(log_file) if log_file else None
        self.foreground = foreground
        self.pid = None
        self.fg_proc = None
        self.result = None  # (rc, out, err) of the mount command
        os.makedirs(self.mnt, exist_ok=True)

    @property
    def argv(self):
        return [str(colabfs_bin()), "mount"] + (["-f"] if self.foreground else []) + self.args + [self.mnt]

    def start(self, timeout=60, check=True):
        with _REG_LOCK:
            LIVE_MOUNTS.add(self)
        if self.foreground:
            import tempfile
            self._fg_out = tempfile.TemporaryFile()
            self.fg_proc = register_proc(subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=self._fg_out,
                stderr=subprocess.STDOUT, env=self.env))
            try:
                wait_until(lambda: is_fuse_mounted(self.mnt) or self.fg_proc.poll() is not None,
                           timeout, what="foreground mount of " + self.mnt)
            except Timeout:
                if check:
                    raise
            if self.fg_proc.poll() is not None:
                self._fg_out.seek(0)
                self.result = (self.fg_proc.returncode, self._fg_out.read().decode("utf-8", "replace"), "")
                if check:
                    raise AssertionError("colabfs mount -f exited %r: %s" % self.result[:2])
                return self.result
            self.result = (0, "", "")
        else:
            self.result = run_cmd(self.argv, timeout, env=self.env)
            rc, out, err = self.result
            if rc is None:
                self._adopt_pids()
                if check:
                    raise AssertionError("colabfs mount did not return within %ss\nstdout: %s\n"
                                         "stderr (tail): %s%s" % (timeout, out[-2000:], err[-3000:],
                                                                  self.log_tail()))
                return self.result
            if rc != 0:
                self._adopt_pids()
                if check:
                    raise AssertionError("colabfs mount failed rc=%s\nstdout: %s\nstderr: %s%s"
                                         % (rc, out, err, self.log_tail()))
                return self.result
            # daemon mode: the contract is that the mount is up when mount returns
            if check and not is_fuse_mounted(self.mnt):
                self._adopt_pids()
                raise AssertionError("colabfs mount returned 0 but %s is not a FUSE mount" % self.mnt)
        self._find_pid()
        return self.result

    def _adopt_pids(self):
        pids = pids_for_mountpoint(self.mnt)
        if pids and not self.pid:
            self.pid = pids[0]

    def _find_pid(self):
        try:
            v = os.getxattr(self.mnt, "user.colabfs.pid")
            pid = int(v.decode("ascii").strip().rstrip("\0"))
            if pid > 0 and is_colabfs_exe(pid):
                self.pid = pid
        except (OSError, ValueError):
            pass
        if self.pid is None:
            self._adopt_pids()

    def xattr_pid(self):
        v = os.getxattr(self.mnt, "user.colabfs.pid")
        return int(v.decode("ascii").strip().rstrip("\0"))

    def path(self, rel=""):
        return os.path.join(self.mnt, rel) if rel else self.mnt

    def alive(self):
        return (is_fuse_mounted(self.mnt) and self.pid is not None and not pid_gone(self.pid))

    def umount(self, timeout=60):
        """``colabfs umount MNT``; returns (rc, out, err)."""
        return run_cmd([str(colabfs_bin()), "umount", self.mnt], timeout, env=self.env)

    def log_tail(self, n=40):
        """The log's last n lines, after every fatal signal's stack found in it (crashlog.c),
        however far back: a server that died and was replaced says where."""
        if not self.log_file or not os.path.exists(self.log_file):
            return ""
        with open(self.log_file, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        crashes = []
        for i, line in enumerate(lines):
            if "colabfs: fatal signal " in line:
                end = next((k for k in range(i, min(i + 100, len(lines)))
                            if "colabfs: end of the stack" in lines[k]), min(i + 100, len(lines)) - 1)
                crashes += lines[i:end + 1]
        head = ("\n--- fatal signals in %s ---\n%s" % (self.log_file, "\n".join(crashes[:500]))
                if crashes else "")
        return head + "\n--- tail of %s ---\n%s" % (self.log_file, "\n".join(lines[-n:]))

    def kill_hard(self):
        """Watchdog path: kill the daemon (aborts the FUSE connection, so blocked
        syscalls return ENOTCONN), then lazily detach the mount."""
        pids = set(pids_for_mountpoint(self.mnt))
        if self.pid and not pid_gone(self.pid) and is_colabfs_exe(self.pid):
            pids.add(self.pid)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if self.fg_proc is not None:
            try:
                self.fg_proc.kill()
            except OSError:
                pass
        abort_fuse_connection(self.mnt)
        if is_fuse_mounted(self.mnt):
            subprocess.run(["umount", "-l", self.mnt], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)

    def cleanup(self):
        """Unmount and reap, whatever state things are in.  Returns a list of
        problems found (empty when the daemon shut down cleanly).  Every step
        is guarded on its own so a failing step cannot skip the later ones."""
        problems = []

        def step(what, fn):
            try:
                fn()
            except Exception as e:  # cleanup must never hide the real failure
                problems.append("%s: %r" % (what, e))

        def gentle():
            if is_fuse_mounted(self.mnt):
                rc, out, err = self.umount(timeout=30)
                if rc != 0:
                    problems.append("colabfs umount rc=%r: %s %s" % (rc, out.strip()[-500:],
                                                                    err.strip()[-500:]))

        def lazy():
            if is_fuse_mounted(self.mnt):
                problems.append("still mounted after colabfs umount; used umount -l")
                subprocess.run(["umount", "-l", self.mnt], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)

        def reap_daemons():
            pids = set(pids_for_mountpoint(self.mnt))
            if self.pid and not pid_gone(self.pid) and is_colabfs_exe(self.pid):
                pids.add(self.pid)
            if self.fg_proc is not None:
                pids.discard(self.fg_proc.pid)  # reaped below through its Popen
            if not pids:
                return
            try:
                wait_until(lambda: all(pid_gone(p) for p in pids), 5, what="daemon exit")
                return
            except Timeout:
                problems.append("daemon pid(s) %s still running after unmount; killed" % sorted(pids))
            for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                for p in pids:
                    if not pid_gone(p) and is_colabfs_exe(p):
                        try:
                            os.kill(p, sig)
                        except OSError:
                            pass
                try:
                    wait_until(lambda: all(pid_gone(p) for p in pids), grace, what="daemon exit")
                    return
                except Timeout:
                    pass
            problems.append("daemon pid(s) %s survived SIGKILL" % sorted(pids))

        def reap_fg():
            if self.fg_proc is not None:
                try:
                    self.fg_proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    problems.append("foreground colabfs did not exit; killed")
                reap_proc(self.fg_proc)

        step("colabfs umount", gentle)
        step("umount -l", lazy)
        step("reaping the daemon", reap_daemons)
        step("reaping the foreground daemon", reap_fg)
        step("final check", lambda: problems.append("mountpoint still mounted at the end of cleanup")
             if is_fuse_mounted(self.mnt) else None)
        with _REG_LOCK:
            LIVE_MOUNTS.discard(self)
        return problems


def emergency_cleanup():
    """Unmount every mount and reap every process still registered (signal or
    interrupted run).  Gentle first (colabfs umount, 10 s), then hard."""
    with _REG_LOCK:
        mounts = list(LIVE_MOUNTS)
        procs = list(LIVE_PROCS)
    for m in mounts:
        try:
            if is_fuse_mounted(m.mnt):
                subprocess.run([str(colabfs_bin()), "umount", m.mnt], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
        except Exception:
            pass
        try:
            m.kill_hard()
        except Exception:
            pass
        with _REG_LOCK:
            LIVE_MOUNTS.discard(m)
    for p in procs:
        reap_proc(p, term_timeout=5)


def abort_everything():
    """Last resort (watchdog): kill all daemons we started and detach mounts."""
    with _REG_LOCK:
        mounts = list(LIVE_MOUNTS)
    for m in mounts:
        try:
            m.kill_hard()
        except Exception:
            pass


# --------------------------------------------------------------------------
# emulator


class Emulator:
    def __init__(self, spec_path, workdir, *, tls=False, access_token=None, client=None,
                 token_lifetime=None, page_size_cap=None, short_pages=False, seed=None,
                 ttfb_ms=None, extra=()):
        self.spec_path = str(spec_path)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.tls = tls
        self.access_token = access_token
        self.client = client  # (client_id, client_secret, refresh_token)
        self.args = []
        if tls:
            self.tls_dir = self.workdir / "tls"
            self.tls_dir.mkdir(exist_ok=True)
            self.args += ["--tls-dir", str(self.tls_dir)]
        if access_token:
            self.args += ["--access-token", access_token]
        if client:
            self.args += ["--client-id", client[0], "--client-secret", client[1],
                          "--refresh-token", client[2]]
        if token_lifetime is not None:
            self.args += ["--token-lifetime", str(token_lifetime)]
        if page_size_cap:
            self.args += ["--page-size-cap", str(page_size_cap)]
        if short_pages:
            self.args += ["--short-pages"]
        if seed is not None:
            self.args += ["--seed", str(seed)]
        if ttfb_ms is not None:
            self.args += ["--ttfb-ms", str(ttfb_ms)]
        self.args += list(extra)
        self.port_file = self.workdir / "port"
        self.log_file = self.workdir / "emulator.log"
        self.stderr_file = self.workdir / "emulator.stderr"
        self.proc = None
        self.port = None
        self.host = "127.0.0.1"

    def start(self, timeout=30):
        if self.port_file.exists():
            self.port_file.unlink()
        argv = [PYTHON, str(EMULATOR_PY), "--spec", self.spec_path, "--port", "0",
                "--port-file", str(self.port_file), "--log", str(self.log_file)] + self.args
        self._err = open(self.stderr_file, "wb")
        self.proc = register_proc(subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                                   stdout=self._err, stderr=subprocess.STDOUT))

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError("emulator exited rc=%s: %s" % (self.proc.returncode, self.stderr_tail()))
            try:
                txt = self.port_file.read_text().strip()
                return int(txt) if txt else None
            except (OSError, ValueError):
                return None
        self.port = wait_until(ready, timeout, what="emulator port file")
        if self.tls:
            wait_until(lambda: self.ca_file.exists() and self.ca_file.stat().st_size > 0, 10,
                       what="emulator ca.pem")
            self.host = self._cert_host()
        return self

    @property
    def ca_file(self):
        return self.tls_dir / "ca.pem"

    def _cert_host(self):
        """127.0.0.1 unless the server cert only names localhost."""
        try:
            pem = ssl.get_server_certificate((self.host, self.port), timeout=10)
            import tempfile
            with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as f:
                f.write(pem)
            try:
                info = ssl._ssl._test_decode_cert(f.name)
            finally:
                os.unlink(f.name)
            sans = info.get("subjectAltName", ())
            if ("IP Address", "127.0.0.1") in sans:
                return "127.0.0.1"
            if ("DNS", "localhost") in sans:
                return "localhost"
        except Exception:
            pass
        return "127.0.0.1"

    @property
    def url(self):
        return "%s://%s:%d" % ("https" if self.tls else "http", self.host, self.port)

    @property
    def token_url(self):
        return self.url + "/token"

    def stderr_tail(self, n=4000):
        try:
            return self.stderr_file.read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def request(self, method, path, headers=None, data=None, timeout=60):
        ctx = None
        if self.tls:
            ctx = ssl.create_default_context(cafile=str(self.ca_file))
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def _json(self, method, path):
        st, _, body = self.request(method, path)
        assert st == 200, "%s %s -> %s %r" % (method, path, st, body[:300])
        return json.loads(body) if body else None

    def stats(self):
        return self._json("GET", "/_emu/stats")

    def log(self):
        return self._json("GET", "/_emu/log")

    def reset(self):
        return self.request("POST", "/_emu/reset")

    def auth(self, token=None):
        token = token or self.access_token
        return {"Authorization": "Bearer " + token} if token else {}

    def export(self, file_id, mime, token=None):
        q = urllib.parse.urlencode({"mimeType": mime})
        st, _, body = self.request("GET", "/drive/v3/files/%s/export?%s" % (file_id, q),
                                   headers=self.auth(token))
        assert st == 200, "export %s -> %s %r" % (file_id, st, body[:300])
        return body

    def media(self, file_id, rng=None, token=None):
        h = self.auth(token)
        if rng:
            h["Range"] = "bytes=%d-%d" % rng
        return self.request("GET", "/drive/v3/files/%s?alt=media" % file_id, headers=h)

    def list_children(self, folder_id, token=None, page_size=1000):
        """All children via files.list paging; returns (files, pages)."""
        files, pages, tok = [], [], None
        for _ in range(10000):
            params = {"q": "'%s' in parents and trashed = false" % folder_id,
                      "pageSize": str(page_size),
                      "fields": "nextPageToken,files(id,name,mimeType,size,trashed,parents,shortcutDetails,createdTime)"}
            if tok:
                params["pageToken"] = tok
            st, _, body = self.request("GET", "/drive/v3/files?" + urllib.parse.urlencode(params),
                                       headers=self.auth(token))
            assert st == 200, "files.list -> %s %r" % (st, body[:300])
            j = json.loads(body)
            pages.append(j)
            files += j.get("files", [])
            tok = j.get("nextPageToken")
            if not tok:
                return files, pages
        raise AssertionError("files.list never ended")

    def stop(self):
        if self.proc is not None:
            reap_proc(self.proc)
            self.proc = None
        try:
            self._err.close()
        except Exception:
            pass


# --------------------------------------------------------------------------
# byte comparison


def pread_full(fd, n, off):
    """pread until n bytes or EOF (a FUSE read may legally be short)."""
    parts, got = [], 0
    while got < n:
        b = os.pread(fd, n - got, off + got)
        if not b:
            break
        parts.append(b)
        got += len(b)
    return b"".join(parts)


def first_diff(a, b):
    n = min(len(a), len(b))
    lo, hi = 0, n
    # binary search over equal prefixes (cheap on big buffers)
    if a[:n] == b[:n]:
        return n
    while hi - lo > 4096:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    for i in range(lo, hi):
        if a[i] != b[i]:
            return i
    return hi


def run_threads(fns, timeout, what):
    """Runs each callable of ``fns`` in a thread of its own and waits for them
    all (Timeout after ``timeout`` seconds); returns the seconds they took.
    The callables report their own failures."""
    threads = [threading.Thread(target=fn, daemon=True) for fn in fns]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    wait_until(lambda: not any(th.is_alive() for th in threads), timeout, what=what)
    return time.monotonic() - t0


def timed_read(path, n, timeout):
    """open + pread(n, 0) of path in a thread; returns (seconds, data or OSError).
    Fails when it has not finished after ``timeout`` seconds (the thread stays
    blocked until the mount's cleanup kills the daemon)."""
    box = {}

    def run():
        t0 = time.monotonic()
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                box["result"] = pread_full(fd, n, 0)
            finally:
                os.close(fd)
        except OSError as e:
            box["result"] = e
        box["elapsed"] = time.monotonic() - t0

    th = threading.Thread(target=run, name="timed-read", daemon=True)
    th.start()
    try:
        wait_until(lambda: not th.is_alive(), timeout, what="read of %s to end" % path)
    except Timeout:
        raise AssertionError("reading %s hung: no result after %ss" % (path, timeout))
    return box["elapsed"], box["result"]


def report(capsys, tag, text):
    """Prints past pytest's capture, each line tagged [tag] (numbers that are
    reported, not asserted)."""
    with capsys.disabled():
        print("\n[%s] " % tag + text.replace("\n", "\n[%s] " % tag))


def assert_same_bytes(got, want, what):
    if got == want:
        return
    i = first_diff(got, want)
    raise AssertionError("%s: bytes differ: got %d bytes, want %d; first difference at +%d "
                         "(got %r, want %r)" % (what, len(got), len(want), i,
                                                got[i:i + 16], want[i:i + 16]))


def compare_stream(mount_path, node, chunk=8 * MiB, what=None):
    """Read mount_path sequentially to EOF with plain read() (like cat) and
    compare every byte with the node's source.  Returns the byte count."""
    what = what or mount_path
    off = 0
    with open(mount_path, "rb", buffering=0) as f:
        while True:
            got = f.read(chunk)
            if not got:
                break
            assert_same_bytes(got, node.read_source(off, len(got)), "%s at offset %d" % (what, off))
            off += len(got)
    assert off == node.size, "%s: read %d bytes to EOF, source has %d" % (what, off, node.size)
    return off


# --------------------------------------------------------------------------
# worker for the multi-process reader test


def _worker(jobfile):
    """JOBFILE: {"ranges": [[path, off, len], ...]}.  Waits for one line on stdin
    (the start signal), reads each range with pread_full and prints a JSON list
    of sha256 hex digests (or "ERR errno" strings)."""
    job = json.loads(Path(jobfile).read_text())
    fds = {}
    sys.stdin.readline()
    out = []
    for path, off, n in job["ranges"]:
        try:
            fd = fds.get(path)
            if fd is None:
                fd = fds[path] = os.open(path, os.O_RDONLY)
            out.append(hashlib.sha256(pread_full(fd, n, off)).hexdigest())
        except OSError as e:
            out.append("ERR %s" % errno.errorcode.get(e.errno, e.errno))
    for fd in fds.values():
        os.close(fd)
    print(json.dumps(out))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "read-ranges":
        _worker(sys.argv[2])
    else:
        sys.exit("usage: helpers.py read-ranges JOBFILE")


@contextlib.contextmanager
def small_tmpfs(path, size="4m"):
    """A tmpfs of ``size`` mounted at ``path`` (made 0700) for the block; always unmounted."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0700" % size, "tmpfs", str(path)],
                   check=True, timeout=30, stdin=subprocess.DEVNULL)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], timeout=30, stdin=subprocess.DEVNULL)
