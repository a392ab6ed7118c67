"""The mount outlives its server (issue 8): SIGKILL the server under load.

`colabfs mount` is a supervisor that keeps /dev/fuse; the file system runs in
a child (`colabfs serve`).  Each test mounts the emulator with a small
injected per-request delay (COLABFS_TEST_REQUEST_DELAY_US, so requests are in
flight at every kill) and runs four kinds of readers at once, every byte
compared with the source and every operation timed:

* a `cat` | compare loop over a 64 KiB file (a real `cat` process each time);
* sequential 1 MiB reads of a large file (CRASH_BIG_MIB, default 1024), md5
  checked at the end of each pass;
* a stat + readdir loop over a 1,000-file folder (names and sizes compared);
* a 4-worker PyTorch DataLoader (crash_loader.py, own process) over the same
  folder, every sample's crc compared.

The folder and the small file are warmed into the cache first (so their
timings measure the restarts, not cold downloads); the large file is read
cold, so downloads are in flight at every kill.

The server is killed with SIGKILL five times at random 1-2 s intervals, then
once more with the next server told to start 10 s late.  Pass: zero errors
of any kind, every checksum right, no operation over 2 s (12 s around the
slow start), `colabfs stats` counts 6 restarts, the kernel's waiting count
returns to 0 and the mount unmounts cleanly.  Run in resend mode (the
kernel's FUSE_NOTIFY_RESEND) and in forced forward mode (the shared request log).

The negative control mounts with --recovery=none (restart, but neither
resend nor replay): the same harness must detect a reader hung on a request
the dead server took with it, then abort the connection and clean up.
"""

import hashlib
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import helpers as H
from conftest import SESSION_TOKEN

BIG_MIB = int(os.environ.get("CRASH_BIG_MIB", "1024"))
N_SMALL = 1000
KILLS = 5
SLOW_START_MS = 10000
OP_LIMIT = 2.0
SLOW_OP_LIMIT = 12.0
DELAY_US = 1000
SEED = 8088


# --------------------------------------------------------------------------
# the tree


class CrashTree:
    def __init__(self, base):
        self.base = Path(base)
        self.src = self.base / "src"
        self.many_src = self.base / "many"
        self.src.mkdir()
        self.many_src.mkdir()
        rng = random.Random(SEED)
        many = H.mkid("crash:many")
        items = [{"id": many, "name": "many", "mimeType": H.FOLDER}]
        self.small = rng.randbytes(64 * H.KiB)
        p = self.src / "small.bin"
        p.write_bytes(self.small)
        items.append({"id": H.mkid("crash:small"), "name": "small.bin", "path": str(p)})
        p = self.src / "big.bin"
        md5 = hashlib.md5()
        with open(p, "wb") as f:
            chunk = rng.randbytes(H.MiB)
            for i in range(BIG_MIB):
                # distinct bytes in every MiB, cheaply: a rotating prefix
                c = i.to_bytes(4, "little") + chunk[4:]
                f.write(c)
                md5.update(c)
        self.big_md5 = md5.hexdigest()
        items.append({"id": H.mkid("crash:big"), "name": "big.bin", "path": str(p)})
        self.sizes = {}
        for i in range(N_SMALL):
            name = "s%04d.bin" % i
            data = rng.randbytes(rng.randrange(1, 4 * H.KiB))
            (self.many_src / name).write_bytes(data)
            self.sizes[name] = len(data)
            items.append({"id": H.mkid("crash:s%d" % i), "name": name, "parent": many,
                          "path": str(self.many_src / name)})
        self.spec_path = self.base / "spec.json"
        self.spec_path.write_text(json.dumps({"root": {"id": H.ROOT_ID, "name": "My Drive"},
                                              "items": items}))


@pytest.fixture(scope="module")
def crash_tree(tmp_path_factory):
    return CrashTree(tmp_path_factory.mktemp("crash-tree"))


# --------------------------------------------------------------------------
# processes and the FUSE connection


def ensure_fusectl():
    d = "/sys/fs/fuse/connections"
    if os.path.isdir(d) and not os.listdir(d):
        subprocess.run(["mount", "-t", "fusectl", "fusectl", d], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
    return os.path.isdir(d) and bool(os.listdir(d))


def conn_file(dev, name):
    return "/sys/fs/fuse/connections/%d/%s" % (os.minor(dev), name)


def stats_of(m):
    rc, out, err = H.run_cmd([str(H.colabfs_bin()), "stats", m.mnt, "--json"], 30, env=m.env)
    assert rc == 0, "colabfs stats rc=%r: %s" % (rc, err)
    return json.loads(out)


# --------------------------------------------------------------------------
# readers: each records (what, start, end) for every operation and every error


class Readers:
    def __init__(self, m, t, tmp):
        self.m, self.t, self.tmp = m, t, Path(tmp)
        self.stop = threading.Event()
        self.ops = []       # (what, t0, t1)
        self.errors = []
        self.passes = {"cat": 0, "big": 0, "walk": 0}
        self.lock = threading.Lock()
        self.threads = []
        self.loader = None
        self.stop_file = self.tmp / "loader.stop"
        self.loader_out = self.tmp / "loader.json"

    def _op(self, what, t0):
        with self.lock:
            self.ops.append((what, t0, time.monotonic()))

    def _err(self, text):
        with self.lock:
            self.errors.append(text)

    def _cat(self):
        path = self.m.path("small.bin")
        while not self.stop.is_set():
            t0 = time.monotonic()
            # close_fds=False: the child closes nothing before exec (the
            # kernel closes our CLOEXEC fds during it, after this thread is
            # released).  Closing them in the child sends FLUSH for the
            # other readers' files; with --recovery=none a FLUSH the killed
            # server had read is never answered, and this thread, stuck in
            # vfork holding the GIL, hung the whole test before it could
            # abort the connection (a CI run hung here).
            p = subprocess.run(["cat", path], stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=120, close_fds=False)
            self._op("cat small.bin", t0)
            if p.returncode != 0:
                self._err("cat small.bin: rc %d: %s" % (p.returncode, p.stderr[-300:]))
            elif p.stdout != self.t.small:
                self._err("cat small.bin: wrong bytes (%d bytes)" % len(p.stdout))
            else:
                self.passes["cat"] += 1

    def _big(self):
        path = self.m.path("big.bin")
        while not self.stop.is_set():
            md5 = hashlib.md5()
            t0 = time.monotonic()
            fd = os.open(path, os.O_RDONLY)
            self._op("open big.bin", t0)
            try:
                n = 0
                while True:
                    t0 = time.monotonic()
                    b = os.read(fd, H.MiB)
                    self._op("read big.bin @%d" % n, t0)
                    if not b:
                        break
                    md5.update(b)
                    n += len(b)
                    if self.stop.is_set() and self.passes["big"] > 0:
                        return
            finally:
                os.close(fd)
            if n != BIG_MIB * H.MiB or md5.hexdigest() != self.t.big_md5:
                self._err("big.bin: %d bytes, md5 %s, want %s" % (n, md5.hexdigest(), self.t.big_md5))
            else:
                self.passes["big"] += 1

    def _walk(self):
        folder = self.m.path("many")
        want = sorted(self.t.sizes)
        while not self.stop.is_set():
            t0 = time.monotonic()
            names = sorted(os.listdir(folder))
            self._op("readdir many", t0)
            if names != want:
                self._err("readdir many: %d names, want %d" % (len(names), len(want)))
            for name in names[::7]:
                t0 = time.monotonic()
                st = os.stat(os.path.join(folder, name))
                self._op("stat many/" + name, t0)
                if st.st_size != self.t.sizes.get(name):
                    self._err("stat many/%s: size %d, want %r" % (name, st.st_size,
                                                                 self.t.sizes.get(name)))
            self.passes["walk"] += 1

    def _guard(self, fn):
        def run():
            try:
                fn()
            except Exception as e:  # every error counts: errno, timeout, anything
                self._err("%s: %r" % (fn.__name__, e))
        return run

    def start(self, loader=True):
        for fn in (self._cat, self._big, self._walk):
            th = threading.Thread(target=self._guard(fn), daemon=True)
            th.start()
            self.threads.append(th)
        if loader:
            self.loader = H.register_proc(subprocess.Popen(
                ["/usr/bin/python3", str(Path(__file__).with_name("crash_loader.py")),
                 self.m.path("many"), str(self.t.many_src), str(self.stop_file),
                 str(self.loader_out)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=open(self.tmp / "loader.err", "wb")))

    def in_flight_since(self):
        """The longest time an operation of the threads has been running."""
        # each thread's newest op start is not recorded until it ends: use the
        # time since its last recorded op end as a bound on the current one
        now = time.monotonic()
        with self.lock:
            last = {}
            for what, t0, t1 in self.ops:
                k = what.split()[0]
                last[k] = max(last.get(k, 0), t1)
        return max((now - v for v in last.values()), default=0)

    def finish(self, timeout):
        self.stop.set()
        self.stop_file.write_text("stop")
        deadline = time.monotonic() + timeout
        for th in self.threads:
            th.join(max(0.1, deadline - time.monotonic()))
        if self.loader is not None:
            try:
                self.loader.wait(max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._err("the DataLoader did not finish its epoch in time")
        hung = [th for th in self.threads if th.is_alive()]
        if hung:
            self._err("%d reader threads still blocked %ds after stop" % (len(hung), timeout))
        return not hung

    def loader_result(self):
        if self.loader is None:
            return None
        if self.loader.returncode != 0 or not self.loader_out.exists():
            err = (self.tmp / "loader.err").read_bytes()[-1500:].decode("utf-8", "replace")
            self._err("DataLoader process rc=%r: %s" % (self.loader.returncode, err))
            return None
        return json.loads(self.loader_out.read_text())


# --------------------------------------------------------------------------
# the scenario


def mount_crashy(mount_factory, emu, mode, tmp):
    # the emulator hashes the big file before its first listing: not ours to time
    st, _, body = emu.request("GET", "/drive/v3/files/%s?fields=md5Checksum,sha256Checksum"
                              % H.mkid("crash:big"), headers=emu.auth(SESSION_TOKEN))
    assert st == 200, body[:300]
    m = mount_factory.new(emu, extra=["--recovery=" + mode, "--max-threads=16"], name="crash",
                          env_extra={"COLABFS_TEST_REQUEST_DELAY_US": str(DELAY_US),
                                     "COLABFS_TEST_SLOW_START_FILE": str(Path(tmp) / "slow")})
    m.super_pid = m.xattr_pid()
    assert m.super_pid > 0 and b"mount" in (H.proc_cmdline(m.super_pid) or [b"", b""])[1], \
        "user.colabfs.pid must name the supervisor"
    m.dev = os.stat(m.mnt).st_dev
    return m


def kill_server(m, slow_ms=0):
    old = H.serve_pid(m.super_pid)
    assert old, "no server process under supervisor %d" % m.super_pid
    if slow_ms:
        (Path(m.slow_file)).write_text(str(slow_ms))
    os.kill(old, signal.SIGKILL)
    H.wait_until(lambda: H.pid_gone(old), 10, what="server %d gone" % old)
    return old


def wait_new_server(m, old, timeout):
    H.wait_until(lambda: H.serve_pid(m.super_pid) not in (None, old), timeout, what="a new server")


def test_mount_reports_recovery_mode(mount_factory, emulator_factory, crash_tree, tmp_path):
    """The mount says which recovery mode it runs in (log line and stats)."""
    emu = emulator_factory(crash_tree.spec_path, "crash-mode")
    m = mount_factory.new(emu, name="crash-mode")
    st = stats_of(m)
    assert st["recovery_mode"] in (1, 2), st
    log = Path(m.log_file).read_text()
    assert re.search(r"crash recovery: (resend|forward) \(kernel FUSE \d+\.\d+", log), log[-2000:]


def test_fatal_signal_leaves_its_stack(mount_factory, emulator_factory, crash_tree):
    """A server dying of a fatal signal writes the signal and its stack into the mount's log
    (crashlog.c; its stderr is the log) before it dies of it; the supervisor starts another,
    which serves the same bytes."""
    emu = emulator_factory(crash_tree.spec_path, "crash-stack")
    m = mount_factory.new(emu, name="crash-stack")
    with open(m.path("small.bin"), "rb") as f:
        assert f.read() == crash_tree.small
    sup = m.xattr_pid()
    old = H.serve_pid(sup)
    assert old, "no server under supervisor %d" % sup
    os.kill(old, signal.SIGSEGV)
    H.wait_until(lambda: H.serve_pid(sup) not in (None, old), 30, what="a new server")
    log = Path(m.log_file).read_text()
    at = log.find("colabfs: fatal signal 11 (SIGSEGV); the server's stack:\n")
    end = log.find("colabfs: end of the stack\n", at)
    assert at >= 0 and end > at, log[-3000:]
    frames = log[at:end].splitlines()[1:]
    assert frames and all("[0x" in fr for fr in frames), frames
    assert "server %d killed by signal 11" % old in log, log[-3000:]
    # what a failed test prints at teardown shows it, however short the tail
    assert "colabfs: fatal signal 11 (SIGSEGV)" in m.log_tail(1) and frames[0] in m.log_tail(1)
    with open(m.path("small.bin"), "rb") as f:
        assert f.read() == crash_tree.small


def run_kills(m, t, tmp, capsys, mode):
    m.slow_file = str(Path(tmp) / "slow")
    waiting = conn_file(m.dev, "waiting") if ensure_fusectl() else None
    # the small files are cached first, so a DataLoader batch times the
    # restarts, not 16 cold downloads on a loaded 2-core machine; big.bin
    # stays cold: its downloads are in flight at every kill
    rc, out, err = H.run_cmd([str(H.colabfs_bin()), "warm", m.path("many"), m.path("small.bin")],
                             120, env=m.env)
    assert rc == 0, "colabfs warm rc=%r: %s %s" % (rc, out, err)
    r = Readers(m, t, tmp)
    rng = random.Random(SEED + len(mode))
    r.start()
    kills = []
    try:
        # let every reader get going (the DataLoader's workers take a moment)
        H.wait_until(lambda: r.passes["walk"] > 0 and r.passes["cat"] > 0, 60,
                     what="readers running")
        for i in range(KILLS + 1):
            r.stop.wait(rng.uniform(1.0, 2.0))
            slow = SLOW_START_MS if i == KILLS else 0
            t_kill = time.monotonic()
            old = kill_server(m, slow)
            kills.append((t_kill, slow))
            wait_new_server(m, old, 30)
        # readers keep going a little past the last restart
        H.wait_until(lambda: r.passes["cat"] > 0 and time.monotonic() - kills[-1][0] > 13, 30,
                     what="readers past the last restart")
    finally:
        ok = r.finish(60 if BIG_MIB <= 1024 else 300)
    loader = r.loader_result()
    st = stats_of(m)
    slow_from = kills[-1][0]

    def limit(t0, t1):
        return SLOW_OP_LIMIT if t1 >= slow_from and t0 <= slow_from + SLOW_OP_LIMIT else OP_LIMIT

    spans = [(w, t0, t1) for w, t0, t1 in r.ops]
    if loader:
        spans += [("DataLoader batch", a, b) for a, b in loader["batches"]]
        r.errors.extend("DataLoader: " + e for e in loader["errors"][:20])
    t_base = kills[0][0]
    slow_ops = [(w, "took %.2fs" % (t1 - t0), "from %+.2fs" % (t0 - t_base))
                for w, t0, t1 in spans if t1 - t0 > limit(t0, t1)]
    kill_times = ["%+.2fs%s" % (t - t_base, " (slow start)" if s else "") for t, s in kills]
    worst = max((t1 - t0 for _, t0, t1 in spans if t1 < slow_from), default=0)
    worst_slow = max((t1 - t0 for _, t0, t1 in spans if t1 >= slow_from), default=0)
    slowest = sorted((x for x in spans if x[2] < slow_from), key=lambda x: x[1] - x[2])[:4]
    with capsys.disabled():
        print("\n[crash %s] slowest: %s; kills at %s" % (mode, ", ".join(
            "%s %.2fs from %+.2fs" % (w, t1 - t0, t0 - t_base) for w, t0, t1 in slowest),
            kill_times))
        print("[crash %s] %d kills; ops %d; passes %s; loader epochs %s samples %s; "
              "worst op %.2fs (%.2fs around the slow start); restarts %d resent %d replayed %d"
              % (mode, len(kills), len(spans), r.passes, loader and loader["epochs"],
                 loader and loader["samples"], worst, worst_slow, st["server_restarts_total"],
                 st["requests_resent_total"], st["requests_replayed_total"]))
    assert ok, "readers hung: %s" % r.errors[-5:]
    assert not r.errors, "reader errors (%d): %s" % (len(r.errors), r.errors[:10])
    assert not slow_ops, "operations over the limit: %s; kills at %s" % (slow_ops[:10], kill_times)
    assert r.passes["big"] >= 1 and r.passes["cat"] > 10 and r.passes["walk"] >= 2, r.passes
    assert loader and loader["epochs"] >= 1 and loader["samples"] >= N_SMALL, loader
    assert st["server_restarts_total"] == KILLS + 1, st
    if mode == "resend":
        assert st["recovery_mode"] == 1 and st["recovery_resends_total"] == KILLS + 1, st
        assert st["requests_resent_total"] > 0, st
    else:
        assert st["recovery_mode"] == 2 and st["requests_replayed_total"] > 0, st
    assert st["requests_failed_crash_loop_total"] == 0, st
    if waiting:
        H.wait_until(lambda: open(waiting).read().strip() == "0", 10,
                     what="the kernel's waiting count back to 0")
    rc, out, err = m.umount(timeout=60)
    assert rc == 0, "colabfs umount rc=%r: %s %s" % (rc, out, err)
    H.wait_until(lambda: H.pid_gone(m.super_pid), 10, what="supervisor exit")
    assert not H.is_fuse_mounted(m.mnt)


@pytest.mark.parametrize("mode", ["resend", "forward"])
def test_server_killed_six_times_readers_see_nothing(mode, mount_factory, emulator_factory,
                                                     crash_tree, tmp_path, capsys):
    emu = emulator_factory(crash_tree.spec_path, "crash-" + mode)
    m = mount_crashy(mount_factory, emu, mode, tmp_path)
    run_kills(m, crash_tree, tmp_path, capsys, mode)


def test_negative_control_without_replay_hangs_and_is_detected(mount_factory, emulator_factory,
                                                              crash_tree, tmp_path, capsys):
    """--recovery=none restarts the server but loses what it had read: a
    reader hangs; the harness sees it within its deadline, aborts the
    connection and cleans up.  This is the proof that the tests above can
    fail."""
    emu = emulator_factory(crash_tree.spec_path, "crash-none")
    m = mount_crashy(mount_factory, emu, "none", tmp_path)
    m.slow_file = str(tmp_path / "slow")
    have_ctl = ensure_fusectl()
    r = Readers(m, crash_tree, tmp_path)
    r.start(loader=False)
    hung_after = None
    try:
        H.wait_until(lambda: r.passes["walk"] > 0 and r.passes["cat"] > 0, 60,
                     what="readers running")
        for i in range(KILLS):
            old = kill_server(m)
            wait_new_server(m, old, 30)
            try:
                H.wait_until(lambda: r.in_flight_since() > 3 * OP_LIMIT, 3 * OP_LIMIT + 2,
                             what="a hung reader")
                hung_after = i + 1
                break
            except H.Timeout:
                continue
        assert hung_after, "no reader hung after %d kills without replay" % KILLS
        # abort the connection: the hung readers get an error and end
        if have_ctl:
            with open(conn_file(m.dev, "abort"), "w") as f:
                f.write("1")
        else:
            m.kill_hard()
        r.stop.set()
        for th in r.threads:
            th.join(30)
        assert not any(th.is_alive() for th in r.threads), "readers still blocked after abort"
    finally:
        r.stop.set()
        r.finish(5)
    with capsys.disabled():
        print("\n[crash none] a reader hung after kill %d (detected within %.0f s); aborted: %d "
              "reader errors, e.g. %s" % (hung_after, 3 * OP_LIMIT, len(r.errors), r.errors[:1]))
    assert r.errors, "the aborted readers must have seen an error"
