"""Files held open for writing reach Drive while open (issue 23 item 3, --upload-open-files).

A training log stays open for the whole run; these mount against the emulator and check that
its bytes reach Drive within the interval while it stays open, that every version Drive gets is
a consistent one (whole lines, a prefix of what was written), that the close sends the final
bytes, that `colabfs sync` does not wait for a close that never comes, and that
--upload-open-files=0 keeps the old behaviour (uploaded at close only).
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

import pytest

import helpers as H
from conftest import SESSION_TOKEN


@pytest.fixture
def oemu(emulator_factory, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"items": [{"name": "keep.txt", "content": "kept"}]}))
    return emulator_factory(spec, "emu-o", access_token=SESSION_TOKEN, seed=11)


def drive_bytes(emu, name):
    """The content of the live file named name at the top of the Drive, or None."""
    st, _, body = emu.request("GET", "/_emu/find?path=" + urllib.parse.quote(name))
    if st != 200:
        return None
    items = [i for i in json.loads(body)["items"] if not i["trashed"]]
    if not items:
        return None
    assert len(items) == 1, items
    st, _, data = emu.request("GET", "/_emu/items/%s/content" % items[0]["id"])
    assert st == 200, data[:300]
    return data


HOLDER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
for line in sys.stdin:
    if line.startswith("w "):
        os.write(fd, bytes.fromhex(line[2:].strip()))
    elif line.startswith("c"):
        os.close(fd)
    print("ok", flush=True)
"""


class Holder:
    """A process holding a file open for writing (a training job's log).  The test's own process
    never has the descriptor: a subprocess it starts would inherit it, and its close at exec is a
    FLUSH (a close(2) of the file) to the kernel."""

    def __init__(self, path):
        self.p = subprocess.Popen([sys.executable, "-c", HOLDER, path], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        H.register_proc(self.p)

    def _do(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        got = []
        H.run_threads([lambda: got.append(self.p.stdout.readline())], 30, "the holder's reply")
        assert got and got[0].strip() == "ok", got

    def write(self, data):
        self._do("w " + data.hex())

    def close(self):
        self._do("c")
        self.p.stdin.close()
        H.reap_proc(self.p)


def omount(mount_factory, emu, interval):
    return mount_factory.new(emu, extra=["--write-back-delay=0",
                                         "--upload-open-files=%d" % interval], name="o")


class Appender:
    """Appends numbered lines to an open file from a thread; remembers when each was written."""

    def __init__(self, path, every=0.05):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.every = every
        self.lines = []  # (monotonic time written, the line)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self):
        k = 0
        while not self.stop.is_set():
            line = ("step %06d loss %.6f\n" % (k, 1.0 / (k + 1))).encode()
            os.write(self.fd, line)
            with self.lock:
                self.lines.append((time.monotonic(), line))
            k += 1
            self.stop.wait(self.every)

    def written(self):
        with self.lock:
            return b"".join(l for _, l in self.lines)

    def start(self):
        self.t.start()
        return self

    def finish(self):
        self.stop.set()
        self.t.join(10)
        assert not self.t.is_alive()

    def close(self):
        os.close(self.fd)


def test_log_held_open_reaches_drive_within_the_interval(mount_factory, oemu, capsys):
    m = omount(mount_factory, oemu, 2)
    log = Appender(m.path("train.log")).start()
    seen = []
    try:
        # a marker line: Drive must have it within the interval (+ an upload's time)
        H.wait_until(lambda: len(log.lines) >= 20, 10, what="20 lines written")
        with log.lock:
            t_mark, mark = log.lines[-1]
        got = {}

        def has_mark():
            d = drive_bytes(oemu, "train.log")
            if d is not None and (not seen or seen[-1] != d):
                seen.append(d)
            if d is not None and mark in d:
                got["t"] = time.monotonic()
                return True
            return False

        H.wait_until(has_mark, 15, interval=0.05, what="the marker line in Drive")
        lag = got["t"] - t_mark
        # more versions while it stays open
        n_before = len(seen)
        H.wait_until(lambda: has_mark() and len(seen) >= n_before + 2, 15, interval=0.05,
                     what="two more versions in Drive while open")
    finally:
        log.finish()
    final = log.written()
    # every version Drive had is whole lines and a prefix of what was written
    for d in seen:
        assert final.startswith(d), "a version in Drive is not a prefix of the log"
        assert d.endswith(b"\n"), "a version in Drive ends inside a line"
    log.close()
    H.wait_until(lambda: drive_bytes(oemu, "train.log") == final, 30, what="the final bytes")
    H.report(capsys, "write-open", "interval 2 s: marker line in Drive %.2f s after its write; "
             "%d versions seen while open; final %d bytes" % (lag, len(seen), len(final)))
    assert lag < 2 + 5, "the marker took %.1f s to reach Drive with a 2 s interval" % lag
    st = json.loads(os.getxattr(m.path(), "user.colabfs.stats").decode().rstrip("\0"))
    assert st["uploads_conflicts_total"] == 0
    assert st["uploads_open_total"] >= 3, st["uploads_open_total"]


def marker_lag(oemu, log, name, timeout, what):
    """Seconds from the writing of the log's last line so far to Drive's copy of name holding it."""
    with log.lock:
        t_mark, mark = log.lines[-1]
    H.wait_until(lambda: mark in (drive_bytes(oemu, name) or b""), timeout, interval=0.05, what=what)
    return time.monotonic() - t_mark


def test_log_of_a_process_that_runs_commands(mount_factory, oemu, capsys):
    """The writer runs commands meanwhile (a notebook's `!nvidia-smi`, a script's subprocess):
    each child closes its copy of the descriptor at its exec, a FLUSH of the log while the
    writer keeps it open.  The log still reaches Drive at the interval (it never did while a
    command ran more often than the interval: each FLUSH started it over), and a log gone quiet
    after a command reaches Drive whole before its close."""
    m = mount_factory.new(oemu, extra=["--upload-open-files=2"], name="ocmd")  # default write-back delay
    log = Appender(m.path("cmd.log")).start()
    stop = threading.Event()
    ran = []

    def commands():
        while not stop.is_set():
            subprocess.run(["true"], check=True)  # inherits the log's descriptor, closes it at exec
            ran.append(time.monotonic())
            stop.wait(0.3)
    runner = threading.Thread(target=commands, daemon=True)
    runner.start()
    try:
        H.wait_until(lambda: len(log.lines) >= 20, 10, what="20 lines written")
        lag = marker_lag(oemu, log, "cmd.log", 15, "the marker line in Drive while commands run")
        log.finish()
        stop.set()
        runner.join(10)
        n_cmds = len(ran)
        subprocess.run(["true"], check=True)  # one more FLUSH, then quiet: still open
        final = log.written()
        H.wait_until(lambda: drive_bytes(oemu, "cmd.log") == final, 15, interval=0.1,
                     what="the whole quiet log in Drive while still open")
    finally:
        log.finish()
        stop.set()
        log.close()
    assert n_cmds >= 5, "only %d commands ran while the log was written" % n_cmds
    H.report(capsys, "write-open", "interval 2 s, a command every 0.3 s: marker line in Drive "
             "%.2f s after its write (%d commands meanwhile); the quiet log whole in Drive "
             "before its close" % (lag, n_cmds))


def test_log_held_open_across_a_server_restart(mount_factory, oemu, capsys):
    """The server is killed (an out-of-memory kill) while a log is held open and written: the
    restarted server does not know what Drive holds, asks it at the next snapshot (Drive's md5
    of that prefix), and uploads the log while open again (it never did before: the rest of the
    run reached Drive only at the close)."""
    m = mount_factory.new(oemu, extra=["--upload-open-files=3"], name="orst")  # default write-back delay
    log = Appender(m.path("kept.log")).start()
    try:
        H.wait_until(lambda: drive_bytes(oemu, "kept.log"), 15, interval=0.05,
                     what="a first version in Drive")

        def idle():  # no upload on its way: the restarted server takes up none
            st = json.loads(os.getxattr(m.path(), "user.colabfs.stats").decode().rstrip("\0"))
            return st["uploads_in_flight"] == 0
        H.wait_until(idle, 10, interval=0.01, what="no upload in flight")
        old = H.serve_pid(m.pid)  # m.pid: the supervisor (colabfs mount), the server its child
        assert old, "no server under supervisor %r" % m.pid
        os.kill(old, signal.SIGKILL)
        H.wait_until(lambda: H.serve_pid(m.pid) not in (None, old), 30, what="a new server")
        H.wait_until(lambda: len(log.lines) >= 40, 10, what="lines after the restart")
        lag = marker_lag(oemu, log, "kept.log", 20,
                         "a line written after the restart in Drive while open")
        assert log.written().startswith(drive_bytes(oemu, "kept.log"))
    finally:
        log.finish()
    final = log.written()
    log.close()
    H.wait_until(lambda: drive_bytes(oemu, "kept.log") == final, 30, what="the final bytes")
    H.report(capsys, "write-open", "server killed while a log was held open: a line written "
             "after the restart in Drive %.2f s later, still open" % lag)


def sync(m, timeout=30):
    return H.run_cmd([H.colabfs_bin(), "sync", "--timeout", str(timeout), m.path()],
                     timeout=timeout + 30)


def test_sync_does_not_wait_for_the_close(mount_factory, oemu):
    m = omount(mount_factory, oemu, 3600)  # only sync will send it while open
    h = Holder(m.path("events.out"))
    first = os.urandom(300_000)
    more = os.urandom(1000)
    try:
        h.write(first)
        rc, out, err = sync(m)
        assert rc == 0, (rc, out, err)
        assert drive_bytes(oemu, "events.out") == first
        h.write(more)
        rc, out, err = sync(m)
        assert rc == 0, (rc, out, err)
        assert drive_bytes(oemu, "events.out") == first + more
        st = json.loads(os.getxattr(m.path(), "user.colabfs.stats").decode().rstrip("\0"))
        assert st["uploads_open_total"] == 2, st["uploads_open_total"]
    finally:
        h.close()
    rc, out, err = sync(m)
    assert rc == 0, (rc, out, err)
    assert drive_bytes(oemu, "events.out") == first + more


def test_zero_uploads_only_at_close(mount_factory, oemu):
    m = omount(mount_factory, oemu, 0)
    h = Holder(m.path("held.log"))
    try:
        h.write(b"held open\n")
        # the uploader runs (another file, closed, reaches Drive) ...
        with open(m.path("closed.txt"), "wb") as f:
            f.write(b"closed")
        H.wait_until(lambda: drive_bytes(oemu, "closed.txt") == b"closed", 30,
                     what="the closed file in Drive")
        rc, out, err = sync(m, timeout=2)
        # ... but not the one held open, and sync says it waits for it
        assert rc == 1, (rc, out, err)
        assert drive_bytes(oemu, "held.log") is None
    finally:
        h.close()
    H.wait_until(lambda: drive_bytes(oemu, "held.log") == b"held open\n", 30,
                 what="the file in Drive after its close")
