"""A damaged cache index never takes the mount down with it (issue 13, item 2).

An index.mdb with valid meta pages and damaged data pages used to kill the
server with SIGBUS (pages past the end of a truncated file) or SIGSEGV
(garbage pages) at every start, so every later mount failed the same way and
a restarted server was restarted forever while readers hung.  Now:

1. a truncated index is seen at open (its last page is past the file's end):
   moved aside, an empty cache, the mount serves every byte right;
2. an index with garbage pages crashes the first server reading it; the
   supervisor starts another, which finds the marker the dead one left and
   moves the index aside: `colabfs mount` still succeeds;
3. the same under a live mount: the server killed, the index damaged while
   the next one starts; it repairs and the reader goes on;
4. servers that keep dying before they serve end a live mount after 5 in a
   row, and a reader waiting on it gets an error instead of hanging.
Each reset is logged and counted (cache_index_resets_total).
"""

import errno
import json
import os
import random
import signal
import threading
from pathlib import Path

import pytest

import helpers as H
import chaos_helpers as X
from conftest import SEED, SESSION_TOKEN

MiB = H.MiB


@pytest.fixture(scope="module")
def ctree(tmp_path_factory):
    t = X.SpecTree(tmp_path_factory.mktemp("corrupt-tree"), "corrupt", SEED)
    t.folder("d")
    for i in range(30):
        t.file("d/f%02d.bin" % i, t.rng.randrange(1000, 300000))
    t.file("big.bin", 12 * MiB + 321)
    t.write_spec()
    return t


def stats(m):
    return json.loads(os.getxattr(m.mnt, "user.colabfs.stats").decode().rstrip("\0"))


def read_all(m, t):
    for rel, data in sorted(t.data.items()):
        with open(m.path(rel), "rb") as f:
            got = f.read()
        assert got == data, "%s: bytes differ" % rel


def index_of(m):
    return Path(str(m.workdir)) / "cache" / "index.mdb"


def truncate_index(p):
    os.truncate(p, 16384)  # the two meta pages and two more: the tree's pages are gone


def garble_index(p):
    rng = random.Random(5)
    size = os.path.getsize(p)
    with open(p, "r+b") as f:
        for pg in range(2, size // 4096):  # keep the meta pages (0, 1) valid
            f.seek(pg * 4096 + 16)
            f.write(rng.randbytes(4000))


def log_text(m):
    return open(m.log_file, errors="replace").read()


def filled_cache(mount_factory, emu, t, name, extra=(), env_extra=None):
    """A mount whose cache holds every file, unmounted again: its cache folder."""
    m = mount_factory.new(emu, name=name, extra=list(extra), env_extra=env_extra)
    read_all(m, t)
    m.umount()
    return m


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_damaged_index_is_moved_aside(mount_factory, emulator_factory, ctree, damage):
    emu = emulator_factory(ctree.spec_path, "emu-corrupt-" + damage, access_token=SESSION_TOKEN)
    m = filled_cache(mount_factory, emu, ctree, "corrupt")
    (truncate_index if damage == "truncated" else garble_index)(index_of(m))
    m.start()  # the same cache folder: before the fix, SIGBUS / SIGSEGV at every start
    read_all(m, ctree)
    st = stats(m)
    assert st["cache_index_resets_total"] == 1, st
    log = log_text(m)
    assert "index.mdb.damaged and starting with an empty cache" in log, log[-3000:]
    if damage == "garbage":
        # the first server died reading it; the supervisor started another
        assert "before it served; starting another" in log, log[-3000:]
    assert (index_of(m).parent / "index.mdb.damaged").exists()
    assert not (index_of(m).parent / "index.checking").exists()
    # a healthy remount keeps the new index and does not count again
    m.umount()
    m.start()
    read_all(m, ctree)
    assert stats(m)["cache_index_resets_total"] == 1


def kill_server(m, slow_file, slow_ms):
    old = H.serve_pid(m.super_pid)
    assert old, "no server under supervisor %d" % m.super_pid
    slow_file.write_text(str(slow_ms))
    os.kill(old, signal.SIGKILL)
    H.wait_until(lambda: H.pid_gone(old), 10, what="server %d gone" % old)
    return old


def new_server(m, old):
    return H.wait_until(lambda: (lambda p: p if p not in (None, old) else None)(
        H.serve_pid(m.super_pid)), 30, what="a new server")


def test_live_mount_repairs_a_damaged_index(mount_factory, emulator_factory, ctree, tmp_path):
    emu = emulator_factory(ctree.spec_path, "emu-corrupt-live", access_token=SESSION_TOKEN)
    slow = tmp_path / "slow"
    m = mount_factory.new(emu, name="corrupt-live",
                          env_extra={"COLABFS_TEST_SLOW_START_FILE": str(slow)})
    read_all(m, ctree)
    m.super_pid = m.xattr_pid()
    old = kill_server(m, slow, 3000)
    new_server(m, old)
    # the new server sleeps 3 s before it opens the cache: damage the index now
    garble_index(index_of(m))
    read_all(m, ctree)  # waits for a server that serves, then every byte right
    st = stats(m)
    assert st["cache_index_resets_total"] == 1, st
    assert st["server_restarts_total"] >= 1, st


def test_servers_dying_before_serving_end_the_mount(mount_factory, emulator_factory, ctree,
                                                    tmp_path):
    emu = emulator_factory(ctree.spec_path, "emu-corrupt-loop", access_token=SESSION_TOKEN)
    slow = tmp_path / "slow"
    m = mount_factory.new(emu, name="corrupt-loop",
                          env_extra={"COLABFS_TEST_SLOW_START_FILE": str(slow)})
    m.super_pid = m.xattr_pid()
    with open(m.path("d/f00.bin"), "rb") as f:
        assert f.read() == ctree.data["d/f00.bin"]
    # a reader of an uncached file that will wait for a server
    result = {}

    def reader():
        try:
            with open(m.path("big.bin"), "rb") as f:
                result["data"] = f.read()
        except OSError as e:
            result["errno"] = e.errno

    old = kill_server(m, slow, 60000)
    th = threading.Thread(target=reader, daemon=True)
    th.start()
    for i in range(5):  # five servers in a row killed while they start
        cur = new_server(m, old)
        # the hook file is read once (and removed) by the server that starts:
        # write the next one's only once cur has taken its own, else cur
        # takes both and the next server starts at once and serves
        H.wait_until(lambda: not slow.exists(), 10, what="server %d taking its slow start" % cur)
        if i < 4:
            slow.write_text("60000")
        os.kill(cur, signal.SIGKILL)
        H.wait_until(lambda: H.pid_gone(cur), 10, what="server %d gone" % cur)
        old = cur
    H.wait_until(lambda: H.pid_gone(m.super_pid), 30, what="the supervisor ending the mount")
    th.join(30)
    assert not th.is_alive(), "the reader still hangs after the mount ended"
    assert result.get("errno") in (errno.ENOTCONN, errno.EIO, errno.ECONNABORTED), result
    log = log_text(m)
    assert "5 servers in a row died before serving" in log, log[-3000:]
