"""The write path under a random exerciser (issue 22: mmap and sizes are right, fsx clean), sqlite
through the mount, and the exerciser's findings as plain regression tests.

test_exerciser: for each seed, one file in the mount and a shadow copy on the local disk get the
same seeded operations (exerciser.py: pwrite, truncate, mapped writes with and without msync, fsync,
close, open with and without O_TRUNC, `colabfs sync`, server kills); the whole file is compared after
every step.  At the end `colabfs sync`, then Drive must hold the shadow's bytes under the file's name
(the emulator's state, and a fresh mount with an empty cache), with no "(conflict" copy anywhere.
Odd seeds start from a file Drive already has, even ones from a new file.  The mount has a long
write-back delay, so uploads happen only at fsync, msync and `colabfs sync`: a seed's operations
and a correct mount's answers are the same on every run (where a bug hangs on timing, e.g. on when
the change poller ran, the step it shows at can vary).

Replay:  COLABFS_EXER_SEEDS=7 COLABFS_EXER_OPS=120 python3 -m pytest tests/e2e/test_exerciser.py -k resend
(seeds comma-separated; COLABFS_EXER_OPS is the number of steps per seed).
"""

import json
import os
import random
import signal
import sqlite3
import time

import pytest

import helpers as H
from conftest import SESSION_TOKEN
from exerciser import Exerciser, Mismatch, describe_diff
from test_write import at_path, content

SEEDS = [int(s) for s in os.environ.get("COLABFS_EXER_SEEDS", "1,2,3").split(",") if s.strip()]
NOPS = int(os.environ.get("COLABFS_EXER_OPS", "200"))


def name_of(seed):
    return "ex-%d.bin" % seed


@pytest.fixture
def xemu(emulator_factory, tmp_path):
    """An emulator whose My Drive has ex-SEED.bin for the odd seeds (random bytes of the seed) and
    old.bin."""
    (tmp_path / "old").write_bytes(rnd_bytes(70446))
    items = [{"name": "old.bin", "path": str(tmp_path / "old")}]
    for seed in SEEDS:
        if seed % 2:
            p = tmp_path / ("initial-%d" % seed)
            rnd = random.Random(-seed)
            p.write_bytes(rnd.randbytes(rnd.randrange(1, 300_000)))
            items.append({"name": name_of(seed), "path": str(p)})
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"items": items}))
    return emulator_factory(spec, "emu-x", access_token=SESSION_TOKEN, seed=22)


def colabfs_sync(m, path):
    rc, out, err = H.run_cmd([str(H.colabfs_bin()), "sync", "--timeout", "60", path], 90, env=m.env)
    assert rc == 0, "colabfs sync %s: rc=%r %s %s" % (path, rc, out[-500:], err[-1000:])


def uptime(pid):
    """Seconds since process pid started."""
    with open("/proc/%d/stat" % pid) as f:
        start = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    with open("/proc/uptime") as f:
        return float(f.read().split()[0]) - start


def server_killer(m):
    """SIGKILL the mount's server and wait for the next one.  The supervisor backs off (up to 5 s)
    from servers that die within a second of their start, so a young one is first let age."""
    sup = m.xattr_pid()

    def kill():
        old = H.serve_pid(sup)
        assert old, "no server under supervisor %d" % sup
        H.wait_until(lambda: uptime(old) > 1.2, 5, interval=0.1, what="server %d a second old" % old)
        os.kill(old, signal.SIGKILL)
        H.wait_until(lambda: H.serve_pid(sup) not in (None, old), 30, what="a new server")
    return kill


def diff(got, want):
    return "the shadow's bytes" if got == want else describe_diff(got, want)


def conflict_copies(emu):
    files, _ = emu.list_children(H.ROOT_ID)
    return sorted(f["name"] for f in files if "(conflict" in f["name"])


@pytest.mark.deadline(240)
@pytest.mark.parametrize("mode", ["resend", "forward"])
def test_exerciser(mode, mount_factory, xemu, tmp_path):
    t0 = time.monotonic()
    m = mount_factory.new(xemu, extra=["--recovery=" + mode, "--write-back-delay=3600"], name="x-" + mode)
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    for seed in SEEDS:  # the shadow starts as Drive does
        if seed % 2:
            with open(m.path(name_of(seed)), "rb") as f:
                (shadow / name_of(seed)).write_bytes(f.read())
    failures, logs = [], {}
    for seed in SEEDS:
        x = Exerciser(m.path(name_of(seed)), str(shadow / name_of(seed)), seed,
                      sync=lambda p: colabfs_sync(m, p), kill=server_killer(m))
        try:
            logs[seed] = x.run(NOPS)
        except Mismatch as e:
            failures.append(str(e))
            logs[seed] = e.log
            print("seed %d: %s\nops:\n%s" % (seed, e, "\n".join(e.log)))
    done = [s for s in SEEDS if len(logs[s]) == NOPS]
    colabfs_sync(m, m.path())
    for seed in done:  # what Drive holds, as the emulator has it
        items = at_path(xemu, "/" + name_of(seed))
        want = (shadow / name_of(seed)).read_bytes()
        if len(items) != 1 or content(xemu, items[0]) != want:
            got = [content(xemu, i) for i in items]
            failures.append("seed %d: after colabfs sync Drive has %d file(s) named %s: %s"
                            % (seed, len(items), name_of(seed),
                               "; ".join(diff(g, want) for g in got) or "none"))
            print("seed %d ops:\n%s" % (seed, "\n".join(logs[seed])))
    conflicts = conflict_copies(xemu)
    if conflicts:
        failures.append("conflict copies in Drive (nobody else wrote): %s" % conflicts)
    m.umount()
    fresh = mount_factory.new(xemu, extra=["--read-only"], name="xf-" + mode)  # an empty cache
    for seed in done:
        with open(fresh.path(name_of(seed)), "rb") as f:
            got = f.read()
        want = (shadow / name_of(seed)).read_bytes()
        if got != want:
            failures.append("seed %d: a fresh mount reads %s" % (seed, diff(got, want)))
    print("exerciser %s: %d seeds x %d ops in %.1f s" % (mode, len(SEEDS), NOPS, time.monotonic() - t0))
    assert not failures, ("%d problem(s) (replay one seed: COLABFS_EXER_SEEDS=S COLABFS_EXER_OPS=N; "
                          "the op logs are in the captured stdout):\n" % len(failures)) + "\n".join(failures)


def drive_file(emu, name):
    items = at_path(emu, "/" + name)
    assert len(items) == 1, (name, items)
    return items[0]


@pytest.mark.deadline(120)
def test_sqlite_transactions_survive_a_fresh_mount(mount_factory, xemu):
    """A database made and closed, opened again, three transactions committed (each COMMIT fsyncs
    the rollback journal and the database); a fresh mount with an empty cache reads it whole."""
    m = mount_factory.new(xemu, extra=["--write-back-delay=0"], name="sq")
    db = m.path("app.db")
    rnd = random.Random(3)
    con = sqlite3.connect(db)
    with con:
        con.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
        con.execute("INSERT INTO t(v) VALUES (?)", (b"first",))
    con.close()
    colabfs_sync(m, db)  # Drive has it: what follows edits a file Drive has
    rows = 1
    con = sqlite3.connect(db)
    try:
        for k in range(3):
            try:
                with con:
                    con.executemany("INSERT INTO t(v) VALUES (?)",
                                    [(rnd.randbytes(400),) for _ in range(100 * (k + 1))])
                    con.execute("UPDATE t SET v = ? WHERE id %% 7 = %d" % k, (b"upd%d" % k,))
                rows += 100 * (k + 1)
                assert con.execute("SELECT count(*) FROM t").fetchone()[0] == rows
            except sqlite3.DatabaseError as e:
                pytest.fail("transaction %d (of 3, on the reopened database): %s" % (k + 1, e), pytrace=False)
    finally:
        con.close()
    colabfs_sync(m, m.path())
    assert [n for n in os.listdir(m.path()) if n.startswith("app")] == ["app.db"]
    assert conflict_copies(xemu) == []
    assert drive_file(xemu, "app.db")["size"] == os.stat(db).st_size
    m.umount()
    fresh = mount_factory.new(xemu, extra=["--read-only"], name="sqf")  # an empty cache
    con = sqlite3.connect("file:%s?mode=ro&immutable=1" % fresh.path("app.db"), uri=True)
    try:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert con.execute("SELECT count(*) FROM t").fetchone()[0] == rows
    finally:
        con.close()


def wait_polls(m, n=2):
    stats = lambda: json.loads(os.getxattr(m.mnt, "user.colabfs.stats"))["change_polls_total"]  # noqa: E731
    start = stats()
    H.wait_until(lambda: stats() >= start + n, 30, what="%d change polls" % n)


@pytest.mark.deadline(120)
@pytest.mark.parametrize("mode", ["resend", "forward"])
def test_a_rewritten_file_shows_its_new_bytes_after_a_server_kill(mode, mount_factory, xemu):
    """Found by the exerciser (a kill with the file closed): Drive's file rewritten in place and
    synced; the change poller sees the change (this mount's own); the server is killed.  The new
    server showed the old revision (size and bytes), and an edit made then was staged from those
    old bytes, so its upload failed for ever."""
    m = mount_factory.new(xemu, extra=["--recovery=" + mode, "--write-back-delay=3600",
                                       "--poll-interval=1"], name="rw-" + mode)
    name = "old.bin"
    with open(m.path(name), "rb") as f:
        old = f.read()
    new = rnd_bytes(len(old) + 30000)
    with open(m.path(name), "r+b") as f:
        f.write(new)
    colabfs_sync(m, m.path(name))
    assert content(xemu, drive_file(xemu, name)) == new
    wait_polls(m)
    server_killer(m)()
    with open(m.path(name), "rb") as f:
        got = f.read()
    if got != new:
        pytest.fail("after the kill: %s (Drive's previous revision had %d bytes)"
                    % (describe_diff(got, new, ("the mount reads", "Drive has")), len(old)), pytrace=False)


def rnd_bytes(n):
    return random.Random(n).randbytes(n)


@pytest.mark.deadline(60)
def test_fsync_of_an_unchanged_file_does_not_upload_its_later_writes_at_once(mount_factory, xemu):
    """Found by the exerciser: fsync of a file with nothing to upload left it "urgent", so the next
    write had the half-written file uploaded at once, while it was still open for writing (a
    partial file replaced a good one in Drive)."""
    m = mount_factory.new(xemu, extra=["--write-back-delay=3600"], name="urg")
    p = m.path("u.bin")
    with open(p, "wb") as f:
        f.write(b"x" * 100000)
    colabfs_sync(m, p)
    item = drive_file(xemu, "u.bin")
    with open(p, "r+b") as f:
        os.fsync(f.fileno())  # nothing to upload
        f.truncate(10)  # a rewrite begins
        f.flush()
        try:  # the file is open for writing: no upload (2 s without one will do)
            H.wait_until(lambda: len(emu_item(xemu, item["id"])["revisions"]) > 1, 2, interval=0.1)
            pytest.fail("uploaded while open for writing, half rewritten: Drive's revisions %s"
                        % [r["size"] for r in emu_item(xemu, item["id"])["revisions"]], pytrace=False)
        except H.Timeout:
            pass
        f.seek(0)
        f.write(b"y" * 100000)
    colabfs_sync(m, p)
    assert content(xemu, drive_file(xemu, "u.bin")) == b"y" * 100000
    assert [r["size"] for r in emu_item(xemu, item["id"])["revisions"]] == [100000, 100000]


def emu_item(emu, item_id):
    st, _, body = emu.request("GET", "/_emu/items/" + item_id)
    assert st == 200, body
    return json.loads(body)
