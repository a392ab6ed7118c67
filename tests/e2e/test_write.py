"""The writable mount (issue 12): namespace writes, staged files, the journal, uploads.

Each test has its own emulator (the read tests share the main one, mounted --read-only) and checks
what Drive holds through the emulator's control API (/_emu/find, /_emu/items/ID/content): names,
bytes, md5, trash, exactly one file per name.  fsync(2) is the wait: it returns once the upload is
durable in Drive.
"""

import errno
import hashlib
import json
import os
import signal
import threading
import urllib.parse

import pytest

import helpers as H
from chaos_helpers import cstats, get_faults, set_faults
from conftest import SESSION_TOKEN

MiB = 1024 * 1024
FOLDER = "application/vnd.google-apps.folder"


@pytest.fixture
def wemu(emulator_factory, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"items": [
        {"name": "old.bin", "content": "the old checkpoint"},
        {"name": "keep.txt", "content": "kept"},
        {"name": "ro", "mimeType": FOLDER, "readOnly": True},
        {"name": "dir", "mimeType": FOLDER},
    ]}))
    return emulator_factory(spec, "emu-w", access_token=SESSION_TOKEN, seed=3)


def emu_get(emu, path):
    st, _, body = emu.request("GET", path)
    assert st == 200, "%s -> %s %r" % (path, st, body[:300])
    return body


def at_path(emu, path, trashed=False):
    """The items at path in the emulator (not trashed unless asked)."""
    items = json.loads(emu_get(emu, "/_emu/find?path=" + urllib.parse.quote(path)))["items"]
    return [i for i in items if trashed or not i["trashed"]]


def content(emu, item):
    return emu_get(emu, "/_emu/items/%s/content" % item["id"])


def post(emu, path, value):
    st, _, body = emu.request("POST", path, {"Content-Type": "application/json"},
                              json.dumps(value).encode())
    assert st == 200, "%s -> %s %r" % (path, st, body[:300])


def write_synced(path, data):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def wmount(mount_factory, emu, extra=(), **kw):
    return mount_factory.new(emu, extra=["--write-back-delay=0"] + list(extra), name="w", **kw)


def test_create_write_read_back_and_in_drive(mount_factory, wemu):
    m = wmount(mount_factory, wemu)
    data = os.urandom(3 * MiB + 17)
    write_synced(m.path("new.bin"), data)
    with open(m.path("new.bin"), "rb") as f:  # read-your-writes
        assert f.read() == data
    assert os.stat(m.path("new.bin")).st_size == len(data)
    items = at_path(wemu, "/new.bin")
    assert len(items) == 1, items
    assert items[0]["md5Checksum"] == hashlib.md5(data).hexdigest()
    assert content(wemu, items[0]) == data
    # a small file, appended to (the old bytes are copied in first)
    write_synced(m.path("log.txt"), b"line 1\n")
    with open(m.path("log.txt"), "ab") as f:
        f.write(b"line 2\n")
        f.flush()
        os.fsync(f.fileno())
    assert content(wemu, at_path(wemu, "/log.txt")[0]) == b"line 1\nline 2\n"
    assert open(m.path("log.txt"), "rb").read() == b"line 1\nline 2\n"


def test_mkdir_rename_unlink_rmdir(mount_factory, wemu):
    m = wmount(mount_factory, wemu)
    os.mkdir(m.path("ckpts"))
    assert at_path(wemu, "/ckpts")[0]["mimeType"] == FOLDER
    with pytest.raises(FileExistsError):
        os.mkdir(m.path("ckpts"))
    write_synced(m.path("ckpts/a.pt"), b"A" * 1000)
    os.rename(m.path("ckpts/a.pt"), m.path("ckpts/b.pt"))  # a file Drive has: renamed there
    assert sorted(os.listdir(m.path("ckpts"))) == ["b.pt"]
    assert at_path(wemu, "/ckpts/a.pt") == [] and len(at_path(wemu, "/ckpts/b.pt")) == 1
    os.rename(m.path("keep.txt"), m.path("ckpts/keep.txt"))  # a move between folders
    assert at_path(wemu, "/keep.txt") == [] and content(wemu, at_path(wemu, "/ckpts/keep.txt")[0]) == b"kept"
    with pytest.raises(OSError) as e:
        os.rmdir(m.path("ckpts"))
    assert e.value.errno == errno.ENOTEMPTY
    os.unlink(m.path("ckpts/b.pt"))
    os.unlink(m.path("ckpts/keep.txt"))
    trashed = at_path(wemu, "/ckpts/b.pt", trashed=True)
    assert len(trashed) == 1 and trashed[0]["trashed"], trashed  # recoverable
    os.rmdir(m.path("ckpts"))
    assert at_path(wemu, "/ckpts") == []
    assert "ckpts" not in os.listdir(m.path())


def test_replace_pattern_keeps_one_file(mount_factory, wemu):
    """torch.save(tmp); os.replace(tmp, final) over a file Drive has, three times."""
    m = wmount(mount_factory, wemu)
    for i in range(3):
        data = os.urandom(2 * MiB + i)
        write_synced(m.path("old.bin.tmp"), data)
        os.replace(m.path("old.bin.tmp"), m.path("old.bin"))
        with open(m.path("old.bin"), "rb+") as f:
            os.fsync(f.fileno())
        assert open(m.path("old.bin"), "rb").read() == data
        items = at_path(wemu, "/old.bin")
        assert len(items) == 1, items
        assert content(wemu, items[0]) == data
        assert at_path(wemu, "/old.bin.tmp") == []
    assert sorted(os.listdir(m.path())) == ["dir", "keep.txt", "old.bin", "ro"]


def test_unsynced_files_survive_a_remount(mount_factory, wemu):
    """Closed but not uploaded (long write-back delay): the next mount uploads them."""
    m = mount_factory.new(wemu, extra=["--write-back-delay=3600"], name="w1")
    files = {"f%d.bin" % i: os.urandom(100_000 + i) for i in range(5)}
    for name, data in files.items():
        with open(m.path(name), "wb") as f:
            f.write(data)
    os.rename(m.path("f0.bin"), m.path("renamed.bin"))
    files["renamed.bin"] = files.pop("f0.bin")
    assert at_path(wemu, "/f1.bin") == []  # not uploaded yet
    cache = m.workdir / "cache"
    m.umount()
    m2 = mount_factory.new(wemu, extra=["--write-back-delay=0", "--cache-dir=%s" % cache], name="w2")
    for name, data in files.items():  # visible at once, from the journal
        assert open(m2.path(name), "rb").read() == data

    def all_there():
        return all(len(at_path(wemu, "/" + n)) == 1 for n in files)
    H.wait_until(all_there, 60, what="the journal's uploads")
    for name, data in files.items():
        items = at_path(wemu, "/" + name)
        assert len(items) == 1 and content(wemu, items[0]) == data
    assert at_path(wemu, "/f0.bin") == []


def test_server_killed_during_upload_resumes(mount_factory, wemu):
    m = wmount(mount_factory, wemu)
    m.super_pid = m.xattr_pid()
    # slow chunks, so the kill lands in the middle of the upload
    post(wemu, "/_emu/faults", {"faults": ["kind=upload.chunk,stall_ms=700,stall_in_body=0"]})
    data = os.urandom(40 * MiB)
    with open(m.path("big.bin"), "wb") as f:
        f.write(data)
    H.wait_until(lambda: json.loads(emu_get(wemu, "/_emu/uploads"))["sessions"], 30,
                 what="an upload session")
    H.wait_until(lambda: any(s["persisted"] > 0 for s in json.loads(emu_get(wemu, "/_emu/uploads"))["sessions"]),
                 30, what="a chunk persisted")
    old = H.serve_pid(m.super_pid)
    os.kill(old, signal.SIGKILL)
    H.wait_until(lambda: H.serve_pid(m.super_pid) not in (None, old), 30, what="a new server")
    post(wemu, "/_emu/faults", {"faults": []})
    H.wait_until(lambda: len(at_path(wemu, "/big.bin")) == 1, 120, what="the upload done")
    items = at_path(wemu, "/big.bin")
    assert items[0]["md5Checksum"] == hashlib.md5(data).hexdigest()
    st = json.loads(emu_get(wemu, "/_emu/uploads"))
    assert len(at_path(wemu, "/big.bin", trashed=True)) == 1
    assert len(st["sessions"]) == 1 and st["sessions"][0]["complete"], st  # resumed, not restarted
    assert "resuming at" in open(m.log_file).read()
    assert open(m.path("big.bin"), "rb").read() == data


def test_errors_read_only_folder_quota_and_read_only_mount(mount_factory, wemu):
    m = wmount(mount_factory, wemu)
    with pytest.raises(PermissionError):
        open(m.path("ro/x.bin"), "wb")
    with pytest.raises(PermissionError):
        os.mkdir(m.path("ro/sub"))
    post(wemu, "/_emu/storage", {"limit": 1000})
    data = os.urandom(200_000)
    f = open(m.path("full.bin"), "wb")
    f.write(data)
    f.flush()
    with pytest.raises(OSError) as e:
        os.fsync(f.fileno())
    assert e.value.errno == errno.ENOSPC
    with pytest.raises(OSError) as e:
        f.close()  # close also says ENOSPC while Drive is full; the bytes stay staged
    assert e.value.errno == errno.ENOSPC
    assert open(m.path("full.bin"), "rb").read() == data
    post(wemu, "/_emu/storage", {"limit": None})
    with open(m.path("full.bin"), "rb+") as g:
        os.fsync(g.fileno())
    assert content(wemu, at_path(wemu, "/full.bin")[0]) == data
    ro = mount_factory.new(wemu, extra=["--read-only"], name="ro")
    with pytest.raises(OSError) as e:
        open(ro.path("new.txt"), "wb")
    assert e.value.errno == errno.EROFS


def test_conflict_copy_keeps_both(mount_factory, wemu):
    m = wmount(mount_factory, wemu)
    ours = b"ours " * 1000
    f = open(m.path("old.bin"), "r+b")
    # "another machine" changes the file meanwhile
    item = at_path(wemu, "/old.bin")[0]
    theirs = b"theirs, from the web UI"
    st, _, body = wemu.request("PATCH", "/upload/drive/v3/files/%s?uploadType=media" % item["id"],
                               {"Authorization": "Bearer " + SESSION_TOKEN,
                                "Content-Type": "application/octet-stream"}, theirs)
    assert st == 200, body
    f.write(ours)
    f.flush()
    os.fsync(f.fileno())
    f.close()
    items = at_path(wemu, "/old.bin")
    assert len(items) == 1 and content(wemu, items[0]) == theirs
    log = open(m.log_file).read()
    assert "conflict: old.bin changed in Drive" in log
    name = log.split('uploaded beside it as "')[1].split('"')[0]
    assert name.startswith("old (conflict ") and name.endswith(").bin")
    copy = at_path(wemu, "/" + name)
    assert len(copy) == 1 and content(wemu, copy[0]).startswith(ours)
    # the mount shows both once the folder is listed again
    H.wait_until(lambda: name in os.listdir(m.path()), 30, what="the conflict copy listed")
    assert open(m.path("old.bin"), "rb").read() == theirs


def test_staging_disk_full_is_enospc_at_write_and_never_uploaded(mount_factory, wemu, tmp_path):
    with H.small_tmpfs(tmp_path / "staging") as staging:
        m = wmount(mount_factory, wemu, extra=["--staging-dir=%s" % staging])
        f = open(m.path("huge.bin"), "wb", buffering=0)
        with pytest.raises(OSError) as e:
            for _ in range(8):
                f.write(b"\1" * MiB)
        assert e.value.errno == errno.ENOSPC
        with pytest.raises(OSError) as e:
            f.close()
        assert e.value.errno == errno.ENOSPC
        rc, out, err = H.run_cmd([H.colabfs_bin(), "sync", "--timeout", "30", m.path()], timeout=60)
        assert rc == 1 and "huge.bin" in err and "staging disk" in err, (rc, out, err)
        assert at_path(wemu, "/huge.bin") == []  # never a half-written upload
        # written again from the start, it goes
        data = os.urandom(MiB)
        write_synced(m.path("huge.bin"), data)
        assert content(wemu, at_path(wemu, "/huge.bin")[0]) == data
        rc, out, err = H.run_cmd([H.colabfs_bin(), "sync", "--timeout", "30", m.path()], timeout=60)
        assert rc == 0, (rc, out, err)
        m.umount()


def test_statfs_is_drive_storage_quota(mount_factory, wemu):
    post(wemu, "/_emu/storage", {"limit": 7 * 1024 * MiB})
    m = wmount(mount_factory, wemu)
    st = os.statvfs(m.path())
    usage = json.loads(emu_get(wemu, "/_emu/storage"))["usage"]
    assert st.f_blocks * st.f_frsize == 7 * 1024 * MiB
    assert st.f_bavail * st.f_frsize == (7 * 1024 * MiB - usage) // st.f_frsize * st.f_frsize


@pytest.mark.deadline(120)
def test_a_file_landing_while_its_folder_is_read_stays_listed(mount_factory, wemu):
    """A listing Drive gave before a new file landed, installed after it landed, lost the file:
    the overlay no longer had it (it is Drive's now) and Drive's answer did not have it yet.
    It once made a rename of a file just written fail with ENOENT after a restart."""
    m = wmount(mount_factory, wemu, extra=["--poll-interval=1", "--dir-ttl=300",
                                           "--attr-timeout=300"])
    d = m.path("dir")
    assert os.listdir(d) == []
    stats = lambda: json.loads(os.getxattr(m.mnt, "user.colabfs.stats").decode())  # noqa: E731
    H.wait_until(lambda: stats()["change_polls_total"] >= 2, 30, what="the first polls")
    data = os.urandom(100000)
    f = open(os.path.join(d, "new.bin"), "wb")
    try:
        f.write(data)
        # Drive's answer to the next listing of dir is made at once and held back 6 s
        set_faults(wemu, ["kind=files.list,stall_ms=6000,stall_after=0,count=1"])
        post(wemu, "/_emu/items", {"name": "theirs.txt", "parent": at_path(wemu, "/dir")[0]["id"],
                                   "content": "theirs"})
        listed = threading.Event()

        def lister():  # the poller expires dir; the next listing of it is Drive's, held
            try:
                H.wait_until(lambda: get_faults(wemu)[0]["fired"] >= 1 or os.listdir(d) is None,
                             30, what="a listing of dir from Drive")
            finally:
                listed.set()

        t = threading.Thread(target=lister)
        t.start()
        H.wait_until(lambda: get_faults(wemu)[0]["fired"] >= 1 or listed.is_set(), 40,
                     what="the held listing")
        assert get_faults(wemu)[0]["fired"] == 1
    finally:
        f.close()  # the upload starts (--write-back-delay=0) and lands while that listing is held
    rc, out, err = H.run_cmd([H.colabfs_bin(), "sync", "--timeout", "30", d], timeout=60)
    assert rc == 0, (rc, out, err)
    assert len(at_path(wemu, "/dir/new.bin")) == 1
    t.join(timeout=30)
    assert not t.is_alive()
    assert "new.bin" in os.listdir(d)
    with open(os.path.join(d, "new.bin"), "rb") as g:
        assert g.read() == data
    H.wait_until(lambda: sorted(os.listdir(d)) == ["new.bin", "theirs.txt"], 30,
                 what="Drive's listing with both")


def open_files_limit(pid):
    """The soft and hard RLIMIT_NOFILE of process pid."""
    for line in open("/proc/%d/limits" % pid):
        if line.startswith("Max open files"):
            f = line.split()
            return int(f[3]), int(f[4])
    raise AssertionError("no open-files line for %d" % pid)


def test_many_files_waiting_for_upload_under_a_low_open_files_limit(mount_factory, wemu):
    """A staged file waiting for its upload keeps its file open in the server.  Started with
    the soft limit of open files at 256 (Debian's default is 1024; a tar of a dataset writes
    thousands of files faster than Drive takes them), the server raises its own soft limit to
    the hard one, so 1,000 files written and closed, none uploaded yet, all write and read back;
    before, the 250th or so failed with EMFILE ("Too many open files")."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip("the hard limit of open files is %d here" % hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:  # the mount's processes inherit the low limit
        m = mount_factory.new(wemu, extra=["--write-back-delay=3600"], name="wfd")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    os.mkdir(m.path("many"))
    files = {"many/f%04d.txt" % i: b"file %d\n" % i * (1 + i % 7) for i in range(1000)}
    for name, data in files.items():
        with open(m.path(name), "wb") as f:
            f.write(data)
    st = cstats(m)
    assert st["uploads_pending"] >= 900, st  # they do wait (each with its staged file open)
    for name, data in files.items():
        with open(m.path(name), "rb") as f:
            assert f.read() == data, name
    assert sorted(os.listdir(m.path("many"))) == sorted(n.split("/")[1] for n in files)
    servers = [p for p in H.pids_for_mountpoint(m.mnt) if b"serve" in (H.proc_cmdline(p) or [])]
    assert servers
    for pid in servers:
        assert open_files_limit(pid)[0] == open_files_limit(pid)[1], (pid, open_files_limit(pid))
    assert "open files: limit raised from 256 to" in open(m.log_file).read()
