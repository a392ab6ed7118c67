"""The cache keeps what files show, not what they showed (vfs_retire.c, cfs_store_retire).

A training run rewrites its checkpoint every few minutes.  Each upload's bytes are copied into the
block cache (so reading the checkpoint back costs no download), and before this every replaced
revision stayed there until the LRU reached it: 60 checkpoints filled 4 GiB of a cache that is
budgeted against RAM, pushing the dataset out.  Now a revision a file leaves, and the content of a
file removed from Drive, leave the cache at once (or when the last reader of them closes), and an
upload's copy takes only free room: it never evicts blocks that were read.  These mount against the
emulator, count the cache's files and blocks (`colabfs stats --json`) and compare every byte read.
"""

import json
import os

import pytest

import helpers as H
from cache_helpers import drop_page_cache
from conftest import SESSION_TOKEN

MiB = 1024 * 1024


def cstats(m):
    rc, out, err = H.run_cmd([str(H.colabfs_bin()), "stats", m.mnt, "--json"], 30, env=m.env)
    assert rc == 0, "colabfs stats --json rc=%r: %s %s" % (rc, out, err)
    return json.loads(out)


def write_landed(m, path, data, replace=None):
    """Writes path and closes it (renamed over replace if given); returns the stats once that
    upload is done (the copy into the cache and the retirements come before it counts)."""
    n = cstats(m)["uploads_done_total"]
    with open(path, "wb") as f:
        f.write(data)
    if replace:
        os.replace(path, replace)
    return H.wait_until(lambda: (lambda st: st if st["uploads_done_total"] > n and
                                 not st["uploads_pending"] and not st["uploads_in_flight"]
                                 else None)(cstats(m)), 30, interval=0.05,
                        what="the upload of %s" % path)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def spec_with(tmp_path, files):
    """A Drive holding files (name -> bytes) at the top."""
    items = []
    for name, data in files.items():
        p = tmp_path / ("src-" + name)
        p.write_bytes(data)
        items.append({"id": H.mkid("retire/" + name), "name": name, "path": str(p)})
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"items": items}))
    return spec


def wait_cached(m, files, what):
    """Waits until the cache holds blocks of exactly `files` files; the stats then."""
    return H.wait_until(lambda: (lambda st: st if st["cache_files"] == files else None)(cstats(m)),
                        30, interval=0.1, what=what)


def test_rewrites_renames_and_removals_leave_one_copy(mount_factory, emulator_factory, tmp_path):
    data_set = os.urandom(3 * MiB + 5)
    emu = emulator_factory(spec_with(tmp_path, {"data.bin": data_set}), "emu-retire",
                           access_token=SESSION_TOKEN, seed=7)
    m = mount_factory.new(emu, extra=["--write-back-delay=0"], name="retire")
    assert read(m.path("data.bin")) == data_set
    wait_cached(m, 1, "the dataset file cached")

    # rewritten in place three times: one revision cached, the latest
    for i in range(3):
        ckpt = os.urandom(2 * MiB + i)
        st = write_landed(m, m.path("last.pt"), ckpt)
        assert st["cache_files"] == 2, (i, st)
    assert st["cache_retired_blocks_total"] == 2 + 3, st  # 2 MiB, then 2 MiB + 1
    assert read(m.path("last.pt")) == ckpt

    # torch.save(tmp); os.replace(tmp, final): the file replaced is trashed, its blocks go
    for i in range(2):
        ckpt = os.urandom(2 * MiB + 100 + i)
        write_landed(m, m.path("last.pt.tmp"), ckpt, replace=m.path("last.pt"))
        wait_cached(m, 2, "one copy of last.pt after replace %d" % i)
    assert read(m.path("last.pt")) == ckpt

    # removed: nothing of it left; the dataset stays, every byte
    os.unlink(m.path("last.pt"))
    st = wait_cached(m, 1, "nothing of last.pt after its removal")
    drop_page_cache(m.path("data.bin"))
    assert read(m.path("data.bin")) == data_set
    after = cstats(m)
    assert after["bytes_from_drive_total"] == st["bytes_from_drive_total"], (st, after)


def test_an_upload_does_not_push_the_dataset_out(mount_factory, emulator_factory, tmp_path):
    """A 64 MiB cache holding 56 MiB of dataset; a 12 MiB checkpoint uploaded: its copy takes the
    free 8 MiB, and the dataset is read again from the cache alone.  A second checkpoint's copy
    then takes the place of the first one's, which nobody read, and still not the dataset's."""
    files = {"shard%d.bin" % i: os.urandom(14 * MiB) for i in range(4)}
    emu = emulator_factory(spec_with(tmp_path, files), "emu-retire2",
                           access_token=SESSION_TOKEN, seed=8)
    m = mount_factory.new(emu, extra=["--write-back-delay=0", "--cache-size=64M"],
                          name="retire2")
    for name, data in files.items():
        assert read(m.path(name)) == data
    st = wait_cached(m, 4, "the dataset cached")
    assert st["cache_used_bytes"] == 56 * MiB, st

    def dataset_from_cache(why):
        before = cstats(m)
        for name, data in files.items():
            drop_page_cache(m.path(name))
            assert read(m.path(name)) == data
        after = cstats(m)
        assert after["bytes_from_drive_total"] == before["bytes_from_drive_total"], \
            (why, before, after)

    ckpt = os.urandom(12 * MiB)
    st = write_landed(m, m.path("ckpt.pt"), ckpt)
    # its copy took the free room, and only that
    assert st["cache_files"] == 5 and st["cache_used_bytes"] == 64 * MiB, st
    assert st["cache_evictions_total"] == 0, st
    dataset_from_cache("after the first checkpoint")
    ckpt2 = os.urandom(8 * MiB)
    st = write_landed(m, m.path("ckpt2.pt"), ckpt2)
    assert st["cache_files"] == 5 and st["cache_evictions_total"] == 8, st
    dataset_from_cache("after the second checkpoint")
    assert read(m.path("ckpt.pt")) == ckpt
    assert read(m.path("ckpt2.pt")) == ckpt2


@pytest.mark.parametrize("mode", ["writable", "read-only"])
def test_a_file_changed_in_drive_leaves_its_old_revision(mount_factory, emulator_factory,
                                                         tmp_path, mode):
    """Drive changes a file the mount read: once the mount shows the new revision, the old one's
    blocks go (with opens at once; on an open-less read-only mount when the kernel forgets the
    inode that showed it, which dropping the kernel's inodes makes it do)."""
    old, new = os.urandom(3 * MiB + 1), os.urandom(MiB + 7)  # new: as hex text, 2 MiB + 14
    emu = emulator_factory(spec_with(tmp_path, {"data.bin": old}), "emu-retire3",
                           access_token=SESSION_TOKEN, seed=9)
    extra = ["--dir-ttl=1", "--attr-timeout=1"] + (["--read-only"] if mode == "read-only" else [])
    m = mount_factory.new(emu, extra=extra, name="retire3")
    assert read(m.path("data.bin")) == old
    wait_cached(m, 1, "the old revision cached")
    st, _, body = emu.request("POST", "/_emu/items/" + H.mkid("retire/data.bin"),
                              data=json.dumps({"content": new.hex()}).encode(),
                              headers={"Content-Type": "application/json"})
    assert st == 200, (st, body)
    want = new.hex().encode()
    H.wait_until(lambda: read(m.path("data.bin")) == want, 30, interval=0.2,
                 what="the new revision shown")
    if mode == "read-only":
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2\n")  # unused dentries and inodes: FORGET of the old node id
    st = wait_cached(m, 1, "only the new revision cached")
    assert st["cache_retired_blocks_total"] >= 4, st
    drop_page_cache(m.path("data.bin"))
    assert read(m.path("data.bin")) == want


def test_a_file_removed_elsewhere_leaves_the_cache(mount_factory, emulator_factory, tmp_path):
    """Another machine deletes one file the mount read and trashes another: once the change feed
    says so, their blocks go; a third, removed while a reader holds it open, keeps its blocks (its
    reader reads every byte) until that reader closes it.  The file left is still read from the
    cache alone."""
    files = {name: os.urandom(2 * MiB + i) for i, name in
             enumerate(("deleted.bin", "trashed.bin", "open.bin", "kept.bin"))}
    emu = emulator_factory(spec_with(tmp_path, files), "emu-retire4",
                           access_token=SESSION_TOKEN, seed=10)
    m = mount_factory.new(emu, extra=["--poll-interval=1"], name="retire4")
    for name, data in files.items():
        assert read(m.path(name)) == data
    st0 = wait_cached(m, 4, "the four files cached")

    def change(name, method, body=None):
        st, _, out = emu.request(method, "/_emu/items/" + H.mkid("retire/" + name),
                                 data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json"})
        assert st in (200, 204), (name, st, out)

    held = open(m.path("open.bin"), "rb")
    try:
        assert held.read(MiB) == files["open.bin"][:MiB]
        change("deleted.bin", "DELETE")
        change("trashed.bin", "POST", {"trashed": True})
        change("open.bin", "DELETE")
        H.wait_until(lambda: not os.path.exists(m.path("open.bin")) and
                     not os.path.exists(m.path("trashed.bin")), 30, interval=0.2,
                     what="the removals seen")
        st = wait_cached(m, 2, "the deleted and the trashed file gone from the cache")
        # 2 MiB and 2 MiB + 1 in blocks of 1 MiB
        assert st["cache_retired_blocks_total"] - st0["cache_retired_blocks_total"] == 5, st
        held.seek(0)
        os.posix_fadvise(held.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        assert held.read() == files["open.bin"]  # from the cache: Drive has it no more
    finally:
        held.close()
    wait_cached(m, 1, "the open file's blocks gone at its close")
    drop_page_cache(m.path("kept.bin"))
    before = cstats(m)
    assert read(m.path("kept.bin")) == files["kept.bin"]
    after = cstats(m)
    assert after["bytes_from_drive_total"] == before["bytes_from_drive_total"], (before, after)
