"""The write path loses nothing and never storms (issue 22), end to end against the emulator.

1. A rewrite of an existing checkpoint torn by a full staging disk, then a remount: Drive keeps
   the old file, ``colabfs sync`` names the file (exit 1).
2. A server killed (the whole mount) while it rewrites an existing checkpoint (O_TRUNC, half
   written), then a remount of the same cache folder: Drive keeps the old file, sync names it.
3. A file that cannot be uploaded (Drive refuses every upload with 400): one attempt, then
   ``colabfs sync`` asks once and exits 1 with the reason; over the next 10 s the mount sends at
   most a couple of requests and writes a few KiB of log; fsync asked again and again answers at
   once without a new attempt each time.
4. A file fsync'd after each of many writes in one open is uploaded as that one file each time
   (no conflict copy) and reads back whole through a fresh mount.
"""

import errno
import json
import os
import time

import pytest

import helpers as H
from chaos_helpers import set_faults
from conftest import SESSION_TOKEN

MiB = 1 << 20
OLD = b"the good checkpoint " * 100


@pytest.fixture
def lemu(emulator_factory, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"items": [{"name": "ckpt.bin", "content": OLD.decode()}]}))
    return emulator_factory(spec, "emu-ln", access_token=SESSION_TOKEN, seed=5)


def drive_items(emu, name):
    st, _, body = emu.request("GET", "/_emu/find?path=/" + name)
    assert st == 200, body[:300]
    return [i for i in json.loads(body)["items"] if not i["trashed"]]


def drive_content(emu, name):
    items = drive_items(emu, name)
    assert len(items) == 1, items
    st, _, body = emu.request("GET", "/_emu/items/%s/content" % items[0]["id"])
    assert st == 200
    return body


def sync(m, timeout=30):
    return H.run_cmd([H.colabfs_bin(), "sync", "--timeout", str(timeout), m.path()],
                     timeout=timeout + 30)


def remount(m):
    """The same cache and staging folders, a new daemon."""
    if H.is_fuse_mounted(m.mnt):
        rc, out, err = m.umount()
        assert rc == 0, (rc, out, err)
    m.start()


def test_torn_rewrite_by_full_staging_disk_keeps_drives_file(mount_factory, lemu, tmp_path):
    with H.small_tmpfs(tmp_path / "staging") as staging:
        m = mount_factory.new(lemu, extra=["--write-back-delay=0", "--staging-dir=%s" % staging],
                              name="torn")
        f = open(m.path("ckpt.bin"), "wb", buffering=0)  # O_TRUNC: a rewrite
        with pytest.raises(OSError) as e:
            for _ in range(8):
                f.write(b"\2" * MiB)
        assert e.value.errno == errno.ENOSPC
        with pytest.raises(OSError):
            f.close()
        remount(m)
        rc, out, err = sync(m)
        assert rc == 1 and "ckpt.bin" in err, (rc, out, err)
        assert drive_content(lemu, "ckpt.bin") == OLD  # never the partial bytes
        m.umount()


def test_server_killed_mid_rewrite_keeps_drives_file(mount_factory, lemu):
    m = mount_factory.new(lemu, extra=["--write-back-delay=0"], name="killed")
    f = open(m.path("ckpt.bin"), "r+b", buffering=0)
    f.truncate(0)
    f.write(b"\3" * 300000)  # half of a new checkpoint, never closed
    m.kill_hard()
    try:
        f.close()
    except OSError:
        pass
    m.start()
    rc, out, err = sync(m)
    assert rc == 1 and "ckpt.bin" in err and "being written" in err, (rc, out, err)
    assert drive_content(lemu, "ckpt.bin") == OLD
    # written again from the start, it goes
    data = os.urandom(200000)
    with open(m.path("ckpt.bin"), "wb") as g:
        g.write(data)
    rc, out, err = sync(m)
    assert rc == 0, (rc, out, err)
    assert drive_content(lemu, "ckpt.bin") == data


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_file_that_cannot_upload_costs_little(mount_factory, lemu):
    m = mount_factory.new(lemu, extra=["--write-back-delay=0"], name="refused")
    set_faults(lemu, ["kind=upload|upload.chunk,status=400,reason=badRequest"])
    f = open(m.path("never.bin"), "wb")
    f.write(b"x" * 100000)
    f.flush()
    t0 = time.monotonic()
    with pytest.raises(OSError):
        os.fsync(f.fileno())
    for _ in range(20):  # asked again and again: answered at once, no loop
        with pytest.raises(OSError):
            os.fsync(f.fileno())
    assert time.monotonic() - t0 < 20
    f.close()
    rc, out, err = sync(m, timeout=20)
    assert rc == 1 and "never.bin" in err, (rc, out, err)
    server = H.serve_pid(m.xattr_pid())
    before = len(lemu.log())
    log_before = os.path.getsize(m.log_file)
    cpu_before = cpu_s(server)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the 10 s being measured, not a wait for a condition
        time.sleep(0.5)
    requests = len(lemu.log()) - before
    grown = os.path.getsize(m.log_file) - log_before
    cpu = cpu_s(server) - cpu_before
    assert requests <= 3, requests
    assert grown < 8192, grown
    assert cpu < 1.0, cpu
    st = json.loads(os.getxattr(m.path(), "user.colabfs.stats").decode())
    assert st["uploads_failed"] == 1, st
    uploads = [r for r in lemu.log() if "/upload/" in json.dumps(r)]
    assert 1 <= len(uploads) <= 4, len(uploads)  # the first, an fsync's ask, sync's ask


def test_many_fsyncs_in_one_open_are_one_file(mount_factory, lemu):
    m = mount_factory.new(lemu, extra=["--write-back-delay=0"], name="fsyncs")
    want = bytearray(OLD)
    with open(m.path("ckpt.bin"), "r+b", buffering=0) as f:
        for i in range(6):
            b = b"txn %d;" % i
            f.seek(100 * i)
            f.write(b)
            want[100 * i:100 * i + len(b)] = b
            os.fsync(f.fileno())
            assert drive_content(lemu, "ckpt.bin") == bytes(want)
    rc, out, err = sync(m)
    assert rc == 0, (rc, out, err)
    fresh = mount_factory.new(lemu, name="fresh")
    assert not [n for n in os.listdir(fresh.path()) if "conflict" in n], os.listdir(fresh.path())
    with open(fresh.path("ckpt.bin"), "rb") as g:
        assert g.read() == bytes(want)
