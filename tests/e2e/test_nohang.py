"""Nothing waits forever (issue 24, item 5): `colabfs umount` and the
server's exit never wait on the shared cache tier (or on Drive) more than a
few seconds, and `colabfs stats` does not queue behind the mount's work.
Real mounts, one Drive emulator, a real 6-node Redis Cluster
(redis_cluster.py) where a test needs one.

Interface under test:
  ``colabfs umount MNT`` returns within UMOUNT_S (10 s) with status 0, and
  the mount's daemon (the supervisor ``user.colabfs.pid`` names, and its
  server) has exited by then, while the mounts read (reader threads of this
  process, told to stop as umount starts: their last reads are still in
  the mount), whatever the cluster does:
    - SIGKILLed mid-read (connections reset, then refused);
    - frozen mid-read: SIGSTOP on every redis-server (connections are
      accepted, replies never come);
    - unreachable: every seed a listener whose accept queue is full (SYNs
      dropped: connects time out), from the mount's start.
  The daemon's log then has no "shutdown watchdog" line (the stop was
  quick, not cut short).  Every byte read is right.
  A read on a frozen cluster comes from Drive within TIER_READ_S (a tier
  call's deadline is 2 s; man colabfs, SHARED CACHE).
  With files held open, ``colabfs umount`` fails within UMOUNT_S saying
  "still in use" and naming the process, and the mount stays.
  A server whose stop hangs (test hook COLABFS_TEST_SLOW_STOP_MS) is ended
  by its shutdown watchdog: umount still returns within UMOUNT_S, daemon
  gone, the log says why.
  ``colabfs stats --json`` answers within STATS_S (a generous bound: the
  latency is measured by bench/stats_latency.py) while every FUSE worker of
  a --max-threads=4 mount is held by a read of a Drive that stalls every
  download (the control socket, fuse/ctlsock.h, does not go through FUSE);
  from another network namespace (no socket) it answers through the
  attribute, with the same names.
"""

import json
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

import helpers as H
import chaos_helpers as X
from conftest import SEED, SESSION_TOKEN

KiB = H.KiB
MiB = H.MiB
MOUNT_OPTS = ["--block-size=1M", "--hedge-budget=0"]
UMOUNT_S = 10      # colabfs umount, the daemon's exit included
TIER_READ_S = 5    # a read of an uncached file while the cluster is frozen
STATS_S = 5        # colabfs stats while every FUSE worker waits on Drive
NFILES = 240


def report(capsys, text):
    H.report(capsys, "nohang", text)


@pytest.fixture(scope="module")
def nohang_tree(tmp_path_factory):
    t = X.SpecTree(tmp_path_factory.mktemp("nohang-tree"), "nohang", SEED + 240)
    for top in ("k", "f", "u", "s"):
        t.folder(top)
        for c in range(4):
            t.folder("%s/c%d" % (top, c))
            for i in range(NFILES // 4):
                t.file("%s/c%d/f%03d.bin" % (top, c, i), t.rng.randrange(2 * KiB, 96 * KiB))
    t.folder("big")
    for i in range(3):
        t.file("big/b%d.bin" % i, 3 * MiB + i * 4099)
    t.write_spec()
    return t


def files_of(t, top):
    return sorted(r for r in t.data if r.startswith(top + "/"))


def make_emu(emulator_factory, t, name):
    return emulator_factory(t.spec_path, name, access_token=SESSION_TOKEN, ttfb_ms=20,
                            extra=["--total-bandwidth", "4000000"])


def _read_loop(mnt, rels, data, halt, files, errors):
    while not halt.is_set():
        for rel in rels:
            if halt.is_set():
                return
            try:
                with open(os.path.join(mnt, rel), "rb", buffering=0) as f:
                    got = b"".join(iter(lambda: f.read(128 * KiB), b""))
                bad = None if got == data[rel] else "wrong bytes"
            except OSError as e:
                bad = e
            with files.get_lock():
                files.value += 1
            if bad:
                errors.put("%s: %s" % (rel, bad))


class Readers:
    """Processes (this one holds no file of the mounts, so the commands it
    starts do not either) reading files of the mounts whole, in a loop, each
    compared with the tree; ``stop()`` asks them to end after the read in
    progress."""

    def __init__(self, mounts, t, rels, per_mount=3):
        import multiprocessing
        ctx = multiprocessing.get_context("fork")
        self.halt = ctx.Event()
        self._files = ctx.Value("i", 0)
        self._errors = ctx.Queue()
        self.procs = [ctx.Process(target=_read_loop, daemon=True,
                                  args=(m.mnt, rels[w::per_mount], t.data, self.halt,
                                        self._files, self._errors))
                      for m in mounts for w in range(per_mount)]

    @property
    def files(self):
        return self._files.value

    @property
    def errors(self):
        out = []
        while not self._errors.empty():
            out.append(self._errors.get())
        return out

    def start(self):
        for p in self.procs:
            p.start()
        return self

    def stop(self):
        self.halt.set()

    def join(self, timeout):
        end = time.monotonic() + timeout
        for p in self.procs:
            p.join(max(0.0, end - time.monotonic()))
        left = [p for p in self.procs if p.is_alive()]
        for p in left:
            p.kill()
        return left


def tier_mount(mount_factory, emu, seeds, name, extra=()):
    return mount_factory.new(emu, name=name,
                             extra=MOUNT_OPTS + ["--shared-cache=" + seeds,
                                                 "--shared-cache-trusted"] + list(extra))


def daemon_pids(m):
    """The supervisor (m.pid) and its children (the server, its notifier)."""
    pids = {m.pid}
    try:
        for task in os.listdir("/proc/%d/task" % m.pid):
            with open("/proc/%d/task/%s/children" % (m.pid, task)) as f:
                pids.update(int(p) for p in f.read().split())
    except OSError:
        pass
    return pids


def timed_umount(m):
    """colabfs umount; (seconds, rc, out, err, daemon pids alive right after)."""
    pids = daemon_pids(m)
    t0 = time.monotonic()
    rc, out, err = m.umount(timeout=UMOUNT_S + 20)
    took = time.monotonic() - t0
    return took, rc, out, err, sorted(p for p in pids if not H.pid_gone(p))


def umount_all(mounts, capsys, what, watchdog=False):
    """Unmounts the mounts at once (a thread each, as several terminals
    would); each must return within UMOUNT_S with status 0 and its daemon
    gone, its log saying whether the shutdown watchdog ended it."""
    res = [None] * len(mounts)

    def one(i):
        res[i] = timed_umount(mounts[i])
    ths = [threading.Thread(target=one, args=(i,)) for i in range(len(mounts))]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    report(capsys, "%s: umount took %s s" % (what, ", ".join("%.2f" % r[0] for r in res)))
    for m, (took, rc, out, err, alive) in zip(mounts, res):
        ctx = "%s: colabfs umount %s (%.1f s, rc %r): %s %s%s" % (what, m.mnt, took, rc, out, err,
                                                                m.log_tail(30))
        assert rc is not None and took <= UMOUNT_S, ctx
        assert rc == 0, ctx
        assert not alive, "daemon pids %s still running; %s" % (alive, ctx)
        assert not H.is_fuse_mounted(m.mnt), ctx
        assert ("shutdown watchdog" in X.log_text(m)) == watchdog, ctx


def run_and_umount(t, emu, mounts, top, event, capsys, what):
    """The mounts read top/ in threads; event() happens while they do; once
    reads have gone on after it, the readers are told to stop and every
    mount is unmounted at once."""
    rels = files_of(t, top)
    for m in mounts:
        for c in sorted(os.listdir(m.path(top))):
            os.listdir(m.path(top + "/" + c))
    rd = Readers(mounts, t, rels).start()
    try:
        H.wait_until(lambda: rd.files >= 30, 60, interval=0.02, what="readers under way")
        event()
        n0 = rd.files
        H.wait_until(lambda: rd.files >= n0 + 20, 60, interval=0.02,
                     what="reads going on after the event")
        rd.stop()
        umount_all(mounts, capsys, what)
    finally:
        rd.stop()
        left = rd.join(30)
    assert not left, "%d reader threads still in a read 30 s after the unmount" % len(left)
    wrong = [e for e in rd.errors if "wrong bytes" in e]
    assert not wrong, "%s: wrong bytes read: %s" % (what, wrong)


def read_checked(m, t, rel):
    """Reads rel whole through m, checks its bytes; returns the seconds it took."""
    t0 = time.monotonic()
    with open(m.path(rel), "rb") as f:
        got = f.read()
    took = time.monotonic() - t0
    X.check(got, t.data[rel], rel)
    return took


def freeze(c):
    for pid in c.pids():
        os.kill(pid, signal.SIGSTOP)


def thaw(c):
    for pid in c.pids():
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass


# --------------------------------------------------------------------------
# umount whatever the cluster does


def cluster_case(t, c, emulator_factory, mount_factory, capsys, top, event, what):
    emu = make_emu(emulator_factory, t, "emu-nohang" + top)
    mounts = [tier_mount(mount_factory, emu, c.seeds, "nh%s%d" % (top, i)) for i in range(3)]
    try:
        run_and_umount(t, emu, mounts, top, event, capsys, what)
    finally:
        thaw(c)


@pytest.mark.deadline(150)
def test_umount_cluster_killed_mid_read(nohang_tree, emulator_factory, mount_factory,
                                        redis_cluster, capsys):
    cluster_case(nohang_tree, redis_cluster, emulator_factory, mount_factory, capsys, "k",
                 redis_cluster.stop_all, "cluster killed")


@pytest.mark.deadline(150)
def test_umount_cluster_frozen_mid_read(nohang_tree, emulator_factory, mount_factory,
                                        redis_cluster, capsys):
    cluster_case(nohang_tree, redis_cluster, emulator_factory, mount_factory, capsys, "f",
                 lambda: freeze(redis_cluster), "cluster frozen")


class BlackHole:
    """A listener whose accept queue is full (backlog 0, one connection
    queued): the kernel drops every further SYN, so a connect to it times
    out, as to an address nothing routes to."""

    def __init__(self):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(0)
        self.port = self.ls.getsockname()[1]
        self.filler = socket.create_connection(("127.0.0.1", self.port), timeout=5)

    def close(self):
        self.filler.close()
        self.ls.close()


@pytest.mark.deadline(150)
def test_umount_cluster_unreachable(nohang_tree, emulator_factory, mount_factory, capsys):
    t = nohang_tree
    holes = [BlackHole() for _ in range(3)]
    try:
        seeds = "redis://" + ",".join("127.0.0.1:%d" % h.port for h in holes)
        emu = make_emu(emulator_factory, t, "emu-nohangU")
        mounts = [tier_mount(mount_factory, emu, seeds, "nhU%d" % i) for i in range(2)]
        run_and_umount(t, emu, mounts, "u", lambda: None, capsys, "cluster unreachable")
    finally:
        for h in holes:
            h.close()


@pytest.mark.deadline(150)
def test_read_on_frozen_cluster_comes_from_drive(nohang_tree, emulator_factory, mount_factory,
                                                 redis_cluster, capsys):
    """One mount, the tier up; every node SIGSTOPped; files never read before
    are read one after another (no dataset read-ahead to hide the waits):
    each gets the right bytes, from Drive, within TIER_READ_S."""
    t, c = nohang_tree, redis_cluster
    emu = make_emu(emulator_factory, t, "emu-nohangR")
    m = tier_mount(mount_factory, emu, c.seeds, "nhR", extra=["--no-dataset-readahead"])
    H.wait_until(lambda: X.cstats(m)["tier_up"] == 1, 15, what="tier_up 1")
    rels = files_of(t, "s")[:12] + ["big/b0.bin"]
    try:
        freeze(c)
        took = [read_checked(m, t, rel) for rel in rels]
        st = X.cstats(m)
    finally:
        thaw(c)
    report(capsys, "reads on a frozen cluster took %s s (max %.2f); tier_errors_total %d, "
           "tier_bypassed_total %d" % (", ".join("%.2f" % x for x in took), max(took),
                                       st["tier_errors_total"], st["tier_bypassed_total"]))
    assert max(took) <= TIER_READ_S, "a read waited %.1f s on a frozen cluster" % max(took)
    assert st["tier_bypassed_total"] > 0, st


# --------------------------------------------------------------------------
# umount without a cluster: files held open, a stop that hangs


@pytest.mark.deadline(90)
def test_umount_with_a_file_open_says_who(nohang_tree, emulator_factory, mount_factory):
    t = nohang_tree
    emu = make_emu(emulator_factory, t, "emu-nohangO")
    m = mount_factory.new(emu, name="nhO", extra=MOUNT_OPTS)
    rel = files_of(t, "s")[0]
    holder = subprocess.Popen(["/usr/bin/python3", "-c",
                               "import sys,time; f=open(sys.argv[1],'rb'); f.read(); "
                               "print('open', flush=True); time.sleep(120)", m.path(rel)],
                              stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert holder.stdout.readline().strip() == b"open"
        took, rc, out, err, alive = timed_umount(m)
        assert rc == 1 and took <= UMOUNT_S, (took, rc, out, err)
        assert "still in use" in err and "pid %d (python3)" % holder.pid in err, err
        assert H.is_fuse_mounted(m.mnt) and alive, (err, alive)
    finally:
        holder.kill()
        holder.wait()
    took, rc, out, err, alive = timed_umount(m)
    assert rc == 0 and not alive, (took, rc, out, err, alive)


@pytest.mark.deadline(90)
def test_umount_when_the_stop_hangs(nohang_tree, emulator_factory, mount_factory, capsys):
    rc, out, _ = H.run_cmd([str(H.colabfs_bin()), "--version"], 10)
    if "test hooks" not in out:
        pytest.skip("colabfs built without --enable-test-hooks (./dev.sh test builds with them)")
    t = nohang_tree
    emu = make_emu(emulator_factory, t, "emu-nohangW")
    m = mount_factory.new(emu, name="nhW", extra=MOUNT_OPTS,
                          env_extra={"COLABFS_TEST_SLOW_STOP_MS": "60000"})
    read_checked(m, t, files_of(t, "s")[1])
    umount_all([m], capsys, "a stop that hangs", watchdog=True)


# --------------------------------------------------------------------------
# stats does not queue behind FUSE work


def stat_nice(path):
    """The nice value in a /proc/.../stat file (field 19)."""
    with open(path) as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


def ctl_thread_nice(pid):
    """The nice value of the server's control socket thread (ctlsock.h:
    CFS_CTLSOCK_THREAD), from /proc/PID/task/TID/stat."""
    base = "/proc/%d/task" % pid
    for tid in os.listdir(base):
        with open("%s/%s/comm" % (base, tid)) as f:
            if f.read().strip() != "colabfs-ctl":
                continue
        return stat_nice("%s/%s/stat" % (base, tid))
    raise AssertionError("no colabfs-ctl thread in %d: %r" % (pid, os.listdir(base)))


def stats_cli_nice(m):
    """The nice value `colabfs stats` runs at (src/cli/front.c raises it where allowed),
    read while a `colabfs stats --watch` runs."""
    p = subprocess.Popen([str(H.colabfs_bin()), "stats", "--watch=1", m.mnt], env=m.env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    try:
        assert p.stdout.readline(), "colabfs stats --watch printed nothing"
        return stat_nice("/proc/%d/stat" % p.pid)
    finally:
        p.kill()
        p.wait(timeout=10)


def stats_cli(m, argv_prefix=()):
    t0 = time.monotonic()
    rc, out, err = H.run_cmd(list(argv_prefix) + [str(H.colabfs_bin()), "stats", "--json",
                                                  m.mnt], 60, env=m.env)
    return time.monotonic() - t0, rc, out, err


@pytest.mark.deadline(120)
def test_stats_while_every_worker_waits_on_drive(nohang_tree, emulator_factory, mount_factory,
                                                 capsys):
    t = nohang_tree
    emu = make_emu(emulator_factory, t, "emu-nohangS")
    m = mount_factory.new(emu, name="nhS", extra=MOUNT_OPTS + ["--max-threads=4",
                                                              "--no-dataset-readahead"])
    rels = files_of(t, "s")[20:36]
    for c in sorted(os.listdir(m.path("s"))):
        os.listdir(m.path("s/" + c))
    took, rc, out, err = stats_cli(m)
    assert rc == 0, (rc, out, err)
    names = set(json.loads(out))
    # the socket's thread runs ahead of the busy ones (nice -10: the tests run as root)
    assert ctl_thread_nice(json.loads(out)["server_pid"]) == -10
    assert stats_cli_nice(m) == -10  # and so does the command (as root)
    X.set_faults(emu, ["kind=media,stall_ms=60000"])
    rd = Readers([m], t, rels, per_mount=8).start()
    try:
        H.wait_until(lambda: X.cstats(m)["downloads_in_flight"] >= 2, 30, interval=0.1,
                     what="reads waiting on the stalled downloads")
        time.sleep(1.0)
        calls = [stats_cli(m) for _ in range(5)]
        rc, _, _ = H.run_cmd([H.PYTHON, "-c", "import os, sys; os.getxattr(sys.argv[1], "
                              "'user.colabfs.pid')", m.mnt], 2)
        via_fuse = rc is not None
        st = json.loads(calls[-1][2])
        report(capsys, "stats with every FUSE worker on a stalled read: %s s (a getxattr through "
               "the mount %s within 2 s)" % (", ".join("%.3f" % c[0] for c in calls),
                                             "answered" if via_fuse else "did not answer"))
        for took, rc, out, err in calls:
            assert rc == 0 and took <= STATS_S, (took, rc, out, err)
        assert set(st) == names, set(st) ^ names
        assert st["downloads_in_flight"] >= 1, st
    finally:
        X.set_faults(emu, [])
        rd.stop()
        left = rd.join(90)
    errs = rd.errors
    assert not left and not errs, (len(left), errs)
    # no control socket where the network namespace differs: the attribute
    took, rc, out, err = stats_cli(m, ["unshare", "-n"])
    assert rc == 0 and set(json.loads(out)) == names, (took, rc, out[:300], err)
