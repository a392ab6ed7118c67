"""Times on the writable mount (issue 22 item 11): what pjdfstest's time checks ask for.

A folder's mtime and ctime move on every create, mkdir, unlink, rmdir and rename in it, to the
nanosecond (no sleeps: each change is strictly later than the one before); a time set by
utimensat(2) reads back exactly, atime included; a file's ctime moves on write, truncate, rename
and utimensat.  Drive keeps only modifiedTime, to the millisecond: the man page (WRITES, Times)
says what survives a remount, and the last tests check that.
"""

import json
import os
import subprocess
import time
import urllib.parse

import pytest

import helpers as H
from conftest import SESSION_TOKEN

FOLDER = "application/vnd.google-apps.folder"
S = 1_000_000_000
MS = 1_000_000


@pytest.fixture
def temu(emulator_factory, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"items": [
        {"name": "d", "mimeType": FOLDER},
        {"name": "other", "mimeType": FOLDER},
        {"name": "old.txt", "content": "in Drive before the mount"},
    ]}))
    return emulator_factory(spec, "emu-t", access_token=SESSION_TOKEN, seed=5)


def find(emu, path):
    """The one item at path in the emulator."""
    st, _, body = emu.request("GET", "/_emu/find?path=" + urllib.parse.quote(path))
    assert st == 200, body[:300]
    items = [i for i in json.loads(body)["items"] if not i["trashed"]]
    assert len(items) == 1, items
    return items[0]


def tmount(mount_factory, emu, extra=(), name="t"):
    return mount_factory.new(emu, extra=["--write-back-delay=0"] + list(extra), name=name)


def times(path):
    st = os.stat(path)
    return st.st_mtime_ns, st.st_ctime_ns, st.st_atime_ns


def assert_moved(before, after, what):
    assert after[0] > before[0], "%s: mtime %d -> %d" % (what, before[0], after[0])
    assert after[1] > before[1], "%s: ctime %d -> %d" % (what, before[1], after[1])
    assert after[1] >= after[0], "%s: ctime %d before mtime %d" % (what, after[1], after[0])


def test_folder_times_move_on_every_change(mount_factory, temu):
    m = tmount(mount_factory, temu)
    d, other = m.path("d"), m.path("other")
    steps = [
        ("create", lambda: open(os.path.join(d, "f"), "w").close()),
        ("mkdir", lambda: os.mkdir(os.path.join(d, "sub"))),
        ("rename in it", lambda: os.rename(os.path.join(d, "f"), os.path.join(d, "g"))),
        ("create another", lambda: open(os.path.join(d, "h"), "w").close()),
        ("rename over a file", lambda: os.rename(os.path.join(d, "h"), os.path.join(d, "g"))),
        ("unlink", lambda: os.unlink(os.path.join(d, "g"))),
        ("rmdir", lambda: os.rmdir(os.path.join(d, "sub"))),
        ("O_EXCL create", lambda: os.close(os.open(os.path.join(d, "x"),
                                                   os.O_CREAT | os.O_EXCL | os.O_WRONLY))),
    ]
    for what, op in steps:
        before = times(d)  # the kernel caches these: the change must not be hidden
        op()
        assert_moved(before, times(d), what)
    # a move changes both folders, and the ctime of what moved, not its mtime (but for the
    # nanoseconds: x's upload, which brings Drive's milliseconds, may complete in between)
    b_from, b_to, b_item = times(d), times(other), times(os.path.join(d, "x"))
    os.rename(os.path.join(d, "x"), os.path.join(other, "x"))
    assert_moved(b_from, times(d), "moved out")
    assert_moved(b_to, times(other), "moved in")
    a_item = times(os.path.join(other, "x"))
    assert a_item[1] > b_item[1] and a_item[0] // MS == b_item[0] // MS, (b_item, a_item)
    # a folder moved: the same for it
    os.mkdir(os.path.join(d, "dir2"))
    b_dir, b_root = times(os.path.join(d, "dir2")), times(m.path())
    os.rename(os.path.join(d, "dir2"), m.path("dir2"))
    assert_moved(b_root, times(m.path()), "root, a folder moved in")
    a_dir = times(m.path("dir2"))
    assert a_dir[1] > b_dir[1], (b_dir, a_dir)
    # nothing changed: nothing moves
    still = times(d)
    os.listdir(d)
    os.stat(os.path.join(other, "x"))
    assert times(d) == still


def test_folder_time_survives_its_parent_listed_again(mount_factory, temu):
    """The root's listing read again from Drive (--dir-ttl) brings the folder's own modifiedTime,
    which Drive did not move: the later local change is still shown."""
    m = tmount(mount_factory, temu, extra=["--dir-ttl=1", "--poll-interval=0"])
    d = m.path("d")
    before = times(d)
    open(os.path.join(d, "f"), "w").close()
    after = times(d)
    assert_moved(before, after, "create")
    since = time.monotonic()
    root_id = H.ROOT_ID

    def root_listed_again():
        os.stat(d)  # a lookup once the kernel's entry expired: the listing is read again
        return any(r["kind"] == "files.list" and r["mono"] > since and
                   root_id in (r.get("query") or {}).get("q", "") for r in temu.log())
    H.wait_until(root_listed_again, 30, interval=0.2, what="the root listed again")
    assert times(d)[:2] == after[:2]


def test_utimensat_reads_back(mount_factory, temu):
    m = tmount(mount_factory, temu)
    for rel in ("old.txt", "d"):  # a file Drive has, a folder
        p = m.path(rel)
        before = times(p)
        atime, mtime = 1_234_567_890 * S + 123_456_789, 1_300_000_000 * S + 987_654_321
        os.utime(p, ns=(atime, mtime))
        got = times(p)
        assert got[0] == mtime and got[2] == atime, (rel, got)
        assert got[1] > before[1], (rel, before, got)  # ctime: now, not the time set
        # atime alone, then an earlier mtime alone (UTIME_OMIT for the other): each keeps
        # the other
        subprocess.run(["touch", "-a", "-d", "@5.000000001", p], check=True)
        assert times(p)[0] == mtime and times(p)[2] == 5 * S + 1
        subprocess.run(["touch", "-m", "-d", "@7.000000002", p], check=True)
        again = times(p)
        assert again[0] == 7 * S + 2 and again[2] == 5 * S + 1, (rel, again)
        assert again[1] >= got[1]
    # a new file too, while staged
    p = m.path("new.txt")
    with open(p, "w") as f:
        f.write("x")
    os.utime(p, ns=(11 * S + 11, 22 * S + 22))
    assert times(p)[0] == 22 * S + 22 and times(p)[2] == 11 * S + 11
    # the mtime reached Drive, to the millisecond
    with open(p, "a") as f:
        os.fsync(f.fileno())
    os.utime(m.path("old.txt"), ns=(S, 1_300_000_000 * S + 987_654_321))
    item = find(temu, "/old.txt")
    assert item["modifiedTime"] == "2011-03-13T07:06:40.987Z", item


def test_file_ctime_moves_on_write_truncate_rename(mount_factory, temu):
    m = tmount(mount_factory, temu)
    p = m.path("f.bin")
    with open(p, "wb") as f:
        f.write(b"one")
    t0 = times(p)
    with open(p, "ab") as f:
        f.write(b"two")
    t1 = times(p)
    assert_moved(t0, t1, "write")
    os.truncate(p, 2)
    t2 = times(p)
    assert_moved(t1, t2, "truncate")
    os.rename(p, m.path("g.bin"))
    t3 = times(m.path("g.bin"))
    assert t3[1] > t2[1] and t3[0] // MS == t2[0] // MS, (t2, t3)
    # unlinked, or replaced by a rename, while open: fstat shows its ctime moved
    for replace in (False, True):
        p = m.path("gone.bin")
        with open(p, "wb") as f:
            f.write(b"x")
        with open(p, "rb") as f:
            b = os.fstat(f.fileno())
            if replace:
                open(m.path("new.bin"), "w").close()
                os.rename(m.path("new.bin"), p)
            else:
                os.unlink(p)
            a = os.fstat(f.fileno())
        assert a.st_ctime_ns > b.st_ctime_ns, (replace, b, a)
    # a Drive file written here: the same
    q = m.path("old.txt")
    b = times(q)
    with open(q, "ab") as f:
        f.write(b"!")
    assert_moved(b, times(q), "write to a Drive file")


def test_unlinked_while_open_has_no_link(mount_factory, temu):
    """fstat on a descriptor whose name was removed says st_nlink 0 (pjdfstest unlink/14.t,
    SQLite's "file unlinked while open" check): a file made here, a Drive file, a file
    replaced by a rename, a removed folder; a name made again links again."""
    m = tmount(mount_factory, temu)
    p, q = m.path("gone.bin"), m.path("new.bin")
    cases = [("unlink", p, lambda: os.unlink(p)),
             ("unlink a Drive file", m.path("old.txt"), lambda: os.unlink(m.path("old.txt"))),
             ("replaced by a rename", p,
              lambda: (open(q, "w").close(), os.rename(q, p)))]
    for what, path, remove in cases:
        if path == p:
            with open(p, "wb") as f:
                f.write(b"x")
        with open(path, "rb") as f:
            assert os.fstat(f.fileno()).st_nlink == 1, what
            remove()
            assert os.fstat(f.fileno()).st_nlink == 0, what
    d = m.path("d")
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rmdir(d)
        assert os.fstat(fd).st_nlink == 0
    finally:
        os.close(fd)
    assert os.stat(p).st_nlink == 1  # the rename's source, at the name now
    os.unlink(p)
    with open(p, "wb") as f:
        f.write(b"again")
        assert os.fstat(f.fileno()).st_nlink == 1
    assert os.stat(p).st_nlink == 1


def test_what_a_remount_keeps(mount_factory, temu):
    """mtime is Drive's modifiedTime (milliseconds); atime and a folder's local change are
    memory only: after a remount atime is the mtime again, the folder shows Drive's time."""
    m = tmount(mount_factory, temu, name="t1")
    p = m.path("old.txt")
    os.utime(p, ns=(3 * S, 1_300_000_000 * S + 987_654_321))
    drive_d = times(m.path("d"))
    open(m.path("d/new"), "w").close()
    assert times(m.path("d"))[0] > drive_d[0]
    with open(m.path("d/new"), "a") as f:
        os.fsync(f.fileno())
    m.umount()
    m2 = tmount(mount_factory, temu, name="t2")
    got = times(m2.path("old.txt"))
    assert got[0] == 1_300_000_000 * S + 987_000_000, got
    assert got[2] == got[0]          # atime: not kept
    assert got[1] >= got[0]          # ctime: never before the mtime
    assert times(m2.path("d"))[0] == drive_d[0]  # Drive's, not the local change
