"""The shared cache tier cannot be turned against its users (issue 24, items 3
and 4), end to end: real mounts, the Drive emulator, and fake Redis Cluster
nodes (fake_redis.py: a one-node cluster on 127.0.0.1 serving every slot; a
"foreign" node on 127.0.0.2, which is not a seed's host).

* A seed answering every GET/MGET with ``-MOVED 1234 127.0.0.2:P`` (then a
  mount whose seed answers ``-ASK``): every byte is read right (from Drive),
  the foreign node sees no connection at all (so no AUTH, no password),
  ``tier_redirects_refused_total`` counts the refusals and the log says so
  once (WARN), the rest at debug level.  With ``--shared-cache-nodes``
  covering 127.0.0.2 the redirect is followed (the foreign node gets AUTH).
* A seed answering an MGET with 2 x 300 MiB: every byte right, and the
  server's peak RSS (VmHWM of the ``colabfs serve`` process) grows over the
  reads by less than 32 MiB more than a mount without a tier grows reading
  the same files (before issue 24: 14 MB -> 629 MB).
* A seed answering GET/MGET 10 s late: each file read still finishes in a few
  seconds (each tier call bounded by its deadline), every byte right.
* ``--shared-cache-password-file``: refused (the mount fails, the message says
  chmod 600) when group or others may read it, when it is not a regular file,
  when it is too large; a 0600 file works, also given as a relative path.
* ``COLABFS_SHARED_CACHE_PASSWORD``: the tier authenticates with it, and
  neither the password nor the variable is in /proc/PID/environ of any
  process of the mount (supervisor and server; a server restarted after a
  SIGKILL too, which authenticates again), nor with ``--recovery=off``.
  /proc/PID/environ shows the block the kernel set up at exec, not environ:
  unsetenv alone would leave the bytes there (this test would see them).

Every wait has a deadline; the mounts are unmounted by mount_factory.
"""

import os
import signal
import time

import pytest

import helpers as H
import chaos_helpers as X
from conftest import SEED, SESSION_TOKEN
from fake_redis import FakeNode

KiB = H.KiB
MiB = H.MiB
PASSWORD = "guard-pw-" + os.urandom(6).hex()
OPTS = ["--block-size=1M", "--hedge-budget=0", "--shared-cache-trusted"]  # the client, not values


@pytest.fixture
def gtree(tmp_path):
    t = X.SpecTree(tmp_path / "tree", "tierguard", SEED + 24)
    t.folder("d")
    for i in range(12):
        t.file("d/f%02d.bin" % i, t.rng.randrange(8 * KiB, 2 * MiB))
    t.write_spec()
    return t


@pytest.fixture
def gemu(gtree, emulator_factory):
    return emulator_factory(gtree.spec_path, "emu-tier-guard", access_token=SESSION_TOKEN,
                            ttfb_ms=5)


@pytest.fixture
def nodes():
    made = []

    def make(host="127.0.0.1", password=None):
        n = FakeNode(host, password=password)
        made.append(n)
        return n
    yield make
    for n in made:
        n.close()


def pwfile(tmp_path, mode=0o600, name="pw", text=PASSWORD + "\n"):
    p = tmp_path / name
    p.write_text(text)
    p.chmod(mode)
    return p


def read_all(m, t):
    for rel in sorted(t.data):
        with open(m.path(rel), "rb") as f:
            got = f.read()
        assert got == t.data[rel], "%s: %d bytes, want %d" % (rel, len(got), len(t.data[rel]))


def log_text(m):
    with open(m.log_file, errors="replace") as f:
        return f.read()


def server_pid(m):
    """The `colabfs serve` process (user.colabfs.pid names the supervisor; with
    --recovery=off the one process)."""
    sup = m.xattr_pid()
    return H.serve_pid(sup) or sup


def vm_hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM for %d" % pid)


@pytest.mark.deadline(180)
@pytest.mark.parametrize("kind", ["MOVED", "ASK"])
def test_redirect_outside_the_cluster_sends_nothing(kind, gtree, gemu, nodes, mount_factory,
                                                     tmp_path, capsys):
    foreign = nodes("127.0.0.2", password=PASSWORD)
    seed = nodes("127.0.0.1", password=PASSWORD)
    seed.redirect = (kind, foreign.host, foreign.port)
    pw = pwfile(tmp_path)
    m = mount_factory.new(gemu, name="guard-" + kind.lower(), extra=OPTS + [
        "--shared-cache=" + seed.url, "--shared-cache-password-file=" + str(pw)])
    read_all(m, gtree)
    st = X.cstats(m)
    assert foreign.connections == 0 and foreign.auths == [], \
        "the foreign node was reached: %d connections, AUTH %r" % (foreign.connections,
                                                                  foreign.auths)
    assert seed.auths and all(a == PASSWORD for a in seed.auths)
    assert seed.commands["GET"] + seed.commands["MGET"] >= 1, seed.commands
    assert st["tier_redirects_refused_total"] >= 1, st
    assert st["tier_redirects_total"] == 0, st
    log = log_text(m)
    warned = [ln for ln in log.splitlines() if " warn: " in ln and "which is not a node" in ln]
    assert len(warned) == 1, warned
    assert "127.0.0.2:%d" % foreign.port in warned[0]
    assert PASSWORD not in log
    refused = st["tier_redirects_refused_total"]

    # widened to the foreign node's network: followed, with AUTH there
    m2 = mount_factory.new(gemu, name="guard-wide-" + kind.lower(), extra=OPTS + [
        "--shared-cache=" + seed.url, "--shared-cache-password-file=" + str(pw),
        "--shared-cache-nodes=127.0.0.2/32"])
    read_all(m2, gtree)
    st2 = X.cstats(m2)
    assert foreign.auths and foreign.auths[0] == PASSWORD, foreign.auths
    assert st2["tier_redirects_total"] >= 1 and st2["tier_redirects_refused_total"] == 0, st2
    H.report(capsys, "tier-guard", "%s to 127.0.0.2: %d refused, foreign node untouched; "
             "with --shared-cache-nodes=127.0.0.2/32: %d followed" %
             (kind, refused, st2["tier_redirects_total"]))


def hwm_growth(m, t):
    """(server VmHWM before, after) reading every file of t through m, KiB."""
    pid = server_pid(m)
    before = vm_hwm_kib(pid)
    read_all(m, t)
    return before, vm_hwm_kib(pid)


@pytest.mark.deadline(180)
def test_oversized_reply_costs_little_memory(gtree, gemu, nodes, mount_factory, capsys):
    # the reference: the same reads with no tier at all
    plain = mount_factory.new(gemu, name="guard-plain", extra=OPTS)
    p0, p1 = hwm_growth(plain, gtree)
    seed = nodes("127.0.0.1")
    seed.huge_mget = True
    m = mount_factory.new(gemu, name="guard-huge", extra=OPTS + ["--shared-cache=" + seed.url])
    t0 = time.monotonic()
    before, after = hwm_growth(m, gtree)
    took = time.monotonic() - t0
    st = X.cstats(m)
    assert seed.commands["MGET"] >= 1, seed.commands
    assert st["tier_errors_total"] >= 1, st
    H.report(capsys, "tier-guard", "MGETs answered with 2 x 300 MiB: server VmHWM %d -> %d KiB "
             "(%d MGETs, %.1f s for %d files); the same reads without a tier: %d -> %d KiB" %
             (before, after, seed.commands["MGET"], took, len(gtree.data), p0, p1))
    assert after - before < (p1 - p0) + 32 * 1024, \
        "the server's peak RSS grew from %d to %d KiB (without a tier: %d to %d)" % (
            before, after, p0, p1)


@pytest.mark.deadline(180)
def test_slow_node_costs_each_read_its_deadline(gtree, gemu, nodes, mount_factory, capsys):
    seed = nodes("127.0.0.1")
    m = mount_factory.new(gemu, name="guard-slow", extra=OPTS + ["--shared-cache=" + seed.url])
    assert X.cstats(m)["tier_up"] == 1
    seed.delay_s = 10
    worst = 0.0
    for rel in sorted(gtree.data):
        t0 = time.monotonic()
        with open(m.path(rel), "rb") as f:
            got = f.read()
        worst = max(worst, time.monotonic() - t0)
        assert got == gtree.data[rel], rel
    st = X.cstats(m)
    H.report(capsys, "tier-guard", "a node answering 10 s late: slowest file read %.2f s, "
             "tier errors %d" % (worst, st["tier_errors_total"]))
    assert st["tier_errors_total"] >= 1, st
    assert worst < 5.0, "a read waited %.1f s on a node answering 10 s late" % worst


def mount_fails(mount_factory, emu, extra, name):
    m = mount_factory.new(emu, name=name, extra=extra, start=False)
    rc, out, err = m.start(check=False)
    return rc, out + err


@pytest.mark.deadline(180)
def test_password_file_checked_like_credentials(gtree, gemu, nodes, mount_factory, tmp_path):
    seed = nodes("127.0.0.1", password=PASSWORD)
    base = OPTS + ["--shared-cache=" + seed.url]
    for mode in (0o644, 0o640, 0o604, 0o620):
        p = pwfile(tmp_path, mode, name="pw-%o" % mode)
        rc, text = mount_fails(mount_factory, gemu, base + [
            "--shared-cache-password-file=" + str(p)], "guard-pw-%o" % mode)
        assert rc not in (0, None), "a password file of mode %o was accepted" % mode
        assert "chmod 600" in text and str(p) in text, text
        assert PASSWORD not in text
    d = tmp_path / "pwdir"
    d.mkdir(mode=0o700)
    big = pwfile(tmp_path, name="pw-big", text="x" * 5000 + "\n")
    for p, why in ((d, "not a regular file"), (big, "too large")):
        rc, text = mount_fails(mount_factory, gemu, base + [
            "--shared-cache-password-file=" + str(p)], "guard-pw-bad")
        assert rc not in (0, None) and why in text, text
    assert seed.auths == []
    # a private file works, also as a path relative to where colabfs mount runs
    p = pwfile(tmp_path)
    m = mount_factory.new(gemu, name="guard-pw-ok", extra=base + [
        "--shared-cache-password-file=" + os.path.relpath(p)])
    read_all(m, gtree)
    assert seed.auths and seed.auths[0] == PASSWORD
    assert X.cstats(m)["tier_up"] == 1


def environ_of(pid):
    with open("/proc/%d/environ" % pid, "rb") as f:
        return f.read()


def check_environ(pid, what):
    env = environ_of(pid)
    assert PASSWORD.encode() not in env, "%s %d: the password is in /proc/%d/environ" % (
        what, pid, pid)
    assert b"COLABFS_SHARED_CACHE_PASSWORD=" not in env, "%s %d: the variable is there" % (
        what, pid)


@pytest.mark.deadline(180)
@pytest.mark.parametrize("recovery", ["on", "off"])
def test_env_password_leaves_the_environment(recovery, gtree, gemu, nodes, mount_factory, capsys):
    seed = nodes("127.0.0.1", password=PASSWORD)
    extra = OPTS + ["--shared-cache=" + seed.url]
    if recovery == "off":
        extra.append("--recovery=off")
    m = mount_factory.new(gemu, name="guard-env-" + recovery, extra=extra,
                          env_extra={"COLABFS_SHARED_CACHE_PASSWORD": PASSWORD})
    read_all(m, gtree)
    assert X.cstats(m)["tier_up"] == 1
    assert seed.auths and all(a == PASSWORD for a in seed.auths), seed.auths
    pids = H.pids_for_mountpoint(m.mnt)
    assert pids, "no colabfs process for %s" % m.mnt
    for pid in pids:
        check_environ(pid, "process")
    server = server_pid(m)
    check_environ(server, "server")
    checked = len(pids)
    if recovery == "on":
        # a server started later by the supervisor gets the password, not the variable
        sup = m.xattr_pid()
        assert server != sup
        auths = len(seed.auths)
        os.kill(server, signal.SIGKILL)
        H.wait_until(lambda: H.pid_gone(server), 10, what="the server gone")
        server2 = H.wait_until(lambda: (lambda p: p if p not in (None, server) else None)(
            H.serve_pid(sup)), 30, what="a new server")
        with open(m.path(sorted(gtree.data)[0]), "rb") as f:
            f.read()
        # the tier is probed at start: the new server authenticated too
        H.wait_until(lambda: len(seed.auths) > auths, 10, what="AUTH from the new server")
        assert all(a == PASSWORD for a in seed.auths), seed.auths
        check_environ(server2, "restarted server")
        checked += 1
    H.report(capsys, "tier-guard", "COLABFS_SHARED_CACHE_PASSWORD (recovery=%s): the tier "
             "authenticated; in no /proc/PID/environ of %d processes" % (recovery, checked))
