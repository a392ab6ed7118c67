"""The block cache, end to end: real FUSE mounts on the Drive emulator.

The acceptance list of the cache issue:

1. a second read, a remount and a remount after kill -9 of the daemon make no
   media requests (the remounts no files.list/files.get either);
2. with Drive gone, cached files (listings and data) still read, an uncached
   one fails with EIO within --io-timeout (also after a remount while Drive
   is down);
3. 16 concurrent readers of a cold file download each block exactly once;
4. a file changed in Drive is read whole at its new revision, never a mix
   (also when only some of its blocks were cached: through a descriptor
   opened before the change, and through a new open within --dir-ttl);
5. a corrupted cached block is detected (crc32c), counted and refetched;
6. a 16 MiB budget is never exceeded;
7. a full cache file system never causes EIO;
8. ``colabfs stats`` agrees with the emulator, ``--prometheus`` parses,
   ``colabfs evict`` frees what it says and the next read downloads again.

The tests use a small tree of their own (module fixture ``ctree``): a 64 MiB
and a 16 MiB random file, a 5 MiB + 12345 file (its last block takes a
smaller slot), 100 files of 10-100 KiB over three listing pages, a nested
folder.  Every mount gets its own cache folder (mount_factory); a remount
with the same cache reuses the Mount object (same argv, same --cache-dir).

The kernel page cache can serve a re-read without the daemon; where a read
must reach the daemon the tests drop the file's pages first
(POSIX_FADV_DONTNEED) and check the daemon's hit counters moved.
"""

import errno
import json
import os
import random
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import helpers as H
import cache_helpers as C
from conftest import SESSION_TOKEN

MiB = H.MiB
KiB = H.KiB
BLOCK = MiB
IO_TIMEOUT = 3
EIO_MARGIN = 4          # seconds allowed beyond --io-timeout for an uncached read to fail
DATA_SEED = 7310


def nblocks(size, block=BLOCK):
    return (size + block - 1) // block


# --------------------------------------------------------------------------
# the tree


class CacheTree:
    """A spec with explicit ids, the source bytes of every file and the
    expected listing (relpath -> ("dir", None) | ("file", size))."""

    def __init__(self, base):
        self.base = Path(base)
        self.src = self.base / "src"
        self.src.mkdir(parents=True, exist_ok=True)
        self.rng = random.Random(DATA_SEED)
        self.items = []
        self.ids = {}       # relpath -> drive id
        self.data = {}      # relpath -> bytes (files only)
        self.paths = {}     # relpath -> source path on disk (files only)
        self.listing = {}
        self._n = 0

    def _parent(self, rel):
        d = os.path.dirname(rel)
        return self.ids[d] if d else "root"

    def _created(self):
        self._n += 1
        return "2023-03-01T00:%02d:%02d.000Z" % (self._n // 60, self._n % 60)

    def folder(self, rel):
        iid = H.mkid("cache-tree/" + rel)
        self.ids[rel] = iid
        self.items.append({"id": iid, "name": os.path.basename(rel), "parent": self._parent(rel),
                           "mimeType": H.FOLDER, "createdTime": self._created()})
        self.listing[rel] = ("dir", None)

    def file(self, rel, size):
        iid = H.mkid("cache-tree/" + rel)
        self.ids[rel] = iid
        data = self.rng.randbytes(size)
        p = self.src / iid
        p.write_bytes(data)
        self.data[rel] = data
        self.paths[rel] = str(p)
        self.items.append({"id": iid, "name": os.path.basename(rel), "parent": self._parent(rel),
                           "path": str(p), "createdTime": self._created(),
                           "modifiedTime": "2024-02-03T04:05:06.789Z"})
        self.listing[rel] = ("file", size)

    def write_spec(self):
        self.spec = {"root": {"id": H.ROOT_ID, "name": "My Drive"}, "items": self.items}
        self.spec_path = self.base / "cache-spec.json"
        self.spec_path.write_text(json.dumps(self.spec, indent=1))

    @property
    def files(self):
        return sorted(self.data)

    @property
    def small(self):
        return sorted(r for r in self.data if r.startswith("small/"))

    def blocks(self, rels):
        return sum(nblocks(len(self.data[r])) for r in rels)

    def nbytes(self, rels):
        return sum(len(self.data[r]) for r in rels)


@pytest.fixture(scope="module")
def ctree(tmp_path_factory):
    t = CacheTree(tmp_path_factory.mktemp("cache-tree"))
    t.file("big64.bin", 64 * MiB)
    t.file("f16.bin", 16 * MiB)
    t.file("odd5.bin", 5 * MiB + 12345)
    t.folder("small")
    for i in range(100):
        t.file("small/s%03d.bin" % i, t.rng.randrange(10 * KiB, 100 * KiB + 1))
    t.folder("nested")
    t.folder("nested/a")
    t.file("nested/a/note.bin", 777)
    t.folder("nested/a/b")
    t.file("nested/a/b/deep.bin", 300 * KiB + 1)
    t.write_spec()
    return t


@pytest.fixture(scope="module")
def cemu(ctree, emulator_factory):
    """The shared emulator of this module.  Tests run one at a time and each
    unmounts what it mounted, so a test may reset its counters and log."""
    return emulator_factory(ctree.spec_path, "emu-cache", access_token=SESSION_TOKEN,
                            page_size_cap=40, seed=DATA_SEED)


# --------------------------------------------------------------------------
# helpers


def cstats(m):
    """``colabfs stats MNT --json`` as a dict."""
    rc, out, err = H.run_cmd([str(H.colabfs_bin()), "stats", m.mnt, "--json"], 30, env=m.env)
    assert rc == 0, "colabfs stats --json rc=%r: %s %s" % (rc, out, err)
    try:
        st = json.loads(out)
    except ValueError:
        raise AssertionError("colabfs stats --json printed no JSON: %r" % out[:2000])
    assert all(isinstance(v, int) for v in st.values()), st
    return st


def xattr_stats(m):
    return json.loads(os.getxattr(m.mnt, "user.colabfs.stats").decode().rstrip("\0"))


def colabfs_cmd(m, *args, timeout=60):
    return H.run_cmd([str(H.colabfs_bin())] + list(args), timeout, env=m.env)


def walk_mount(root):
    """relpath -> ("dir", None) | ("file", size) for everything under root."""
    seen = {}

    def onerror(e):
        raise e
    for dirpath, dirnames, filenames in os.walk(root, onerror=onerror):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if os.path.isdir(p):
                seen[rel] = ("dir", None)
            else:
                seen[rel] = ("file", st.st_size)
    return seen


def assert_listing(m, t):
    got = walk_mount(m.mnt)
    if got != t.listing:
        missing = sorted(set(t.listing) - set(got))
        extra = sorted(set(got) - set(t.listing))
        wrong = sorted(k for k in set(got) & set(t.listing) if got[k] != t.listing[k])
        raise AssertionError("listing of %s differs: missing %r, unexpected %r, wrong %r"
                             % (m.mnt, missing[:20], extra[:20],
                                [(k, got[k], t.listing[k]) for k in wrong[:20]]))


def read_compare(m, t, rels, drop=False):
    """Read every file in rels whole through the mount and compare each byte."""
    for rel in rels:
        p = m.path(rel)
        if drop:
            C.drop_page_cache(p)
        C.assert_same(C.read_whole(p), t.data[rel], p)


def delta(before, after):
    d = {k: after["by_kind"].get(k, 0) - before["by_kind"].get(k, 0) for k in after["by_kind"]}
    d["requests"] = after["requests"] - before["requests"]
    d["media_bytes"] = after["media_bytes"] - before["media_bytes"]
    return d


def media_records(emu, file_id):
    return [r for r in emu.log() if r["kind"] == "media" and r["id"] == file_id]


def parse_range(r):
    assert r and r.startswith("bytes="), "media request without a byte range: %r" % r
    a, _, b = r[len("bytes="):].partition("-")
    return int(a), int(b)


def umount(m):
    rc, out, err = m.umount(timeout=60)
    assert rc == 0, "colabfs umount %s rc=%r: %s %s%s" % (m.mnt, rc, out, err, m.log_tail())
    assert not H.is_fuse_mounted(m.mnt), "%s still mounted after colabfs umount" % m.mnt


def remount(m):
    """Unmount and mount again with the same argv (same --cache-dir)."""
    umount(m)
    m.pid = None
    m.start()



timed_read = H.timed_read


def assert_eio_fast(path, what):
    elapsed, res = timed_read(path, 64 * KiB, IO_TIMEOUT + EIO_MARGIN + 20)
    assert isinstance(res, OSError), "%s: read of an uncached file with Drive down returned %d bytes" \
        % (what, len(res))
    assert res.errno == errno.EIO, "%s: read failed with %s, want EIO" \
        % (what, errno.errorcode.get(res.errno, res.errno))
    assert elapsed <= IO_TIMEOUT + EIO_MARGIN, \
        "%s: EIO took %.1fs with --io-timeout=%d" % (what, elapsed, IO_TIMEOUT)
    return elapsed


# --------------------------------------------------------------------------
# 1. second read, remount, remount after kill -9


@pytest.mark.deadline(150)
def test_reads_and_remounts_come_from_the_cache(mount_factory, cemu, ctree):
    cemu.reset()
    m = mount_factory.new(cemu, name="c-remount")
    s0 = cemu.stats()
    assert_listing(m, ctree)
    read_compare(m, ctree, ctree.files)
    s1 = cemu.stats()
    d = delta(s0, s1)
    # a byte is downloaded once (a request may cover several blocks)
    assert 0 < d["media"] <= ctree.blocks(ctree.files), d
    assert d["media_bytes"] == ctree.nbytes(ctree.files), d

    # the same mount again, with the kernel's pages dropped so reads reach the daemon
    st0 = cstats(m)
    assert_listing(m, ctree)
    read_compare(m, ctree, ctree.files, drop=True)
    s2 = cemu.stats()
    st1 = cstats(m)
    assert delta(s1, s2)["media"] == 0, delta(s1, s2)
    assert st1["cache_misses_total"] == st0["cache_misses_total"], (st0, st1)
    assert st1["cache_hits_total"] > st0["cache_hits_total"], \
        "the re-read did not reach the daemon (page cache not dropped?): %r %r" % (st0, st1)

    # remount on the same cache folder: no Drive request for listings or data
    remount(m)
    assert_listing(m, ctree)
    read_compare(m, ctree, ctree.files)
    s3 = cemu.stats()
    d = delta(s2, s3)
    assert (d["media"], d["files.list"], d["files.get"]) == (0, 0, 0), \
        "remount made Drive requests: %r" % d
    st = cstats(m)
    assert st["downloads_total"] == 0 and st["bytes_from_drive_total"] == 0, st
    assert st["bytes_from_cache_total"] >= ctree.nbytes(ctree.files), st

    # kill -9 the daemon, detach the dead mount, mount again
    pid = m.xattr_pid()
    assert H.is_colabfs_exe(pid), pid
    os.kill(pid, signal.SIGKILL)
    H.wait_until(lambda: H.pid_gone(pid), 20, what="killed daemon %d to go" % pid)
    rc, out, err = m.umount(timeout=60)
    assert rc == 0, "colabfs umount of a dead mount rc=%r: %s %s" % (rc, out, err)
    assert not H.is_fuse_mounted(m.mnt), "colabfs umount left the dead mount mounted"
    m.pid = None
    m.start()
    assert m.pid != pid
    assert_listing(m, ctree)
    read_compare(m, ctree, ctree.files)
    s4 = cemu.stats()
    d = delta(s3, s4)
    assert (d["media"], d["files.list"], d["files.get"]) == (0, 0, 0), \
        "remount after kill -9 made Drive requests: %r" % d
    st = cstats(m)
    assert st["downloads_total"] == 0 and st["cache_checksum_failures_total"] == 0, st


# --------------------------------------------------------------------------
# 2. Drive down


def _outage_mount(mount_factory, emulator_factory, ctree, name):
    emu = emulator_factory(ctree.spec_path, "emu-" + name, access_token=SESSION_TOKEN,
                           page_size_cap=40, seed=DATA_SEED)
    # 40 files of the small folder in order would (rightly) start a dataset
    # scan of it: these tests need its last files uncached
    m = mount_factory.new(emu, name=name, extra=["--io-timeout=%d" % IO_TIMEOUT,
                                                 "--no-dataset-readahead"])
    cached = ["f16.bin", "nested/a/note.bin", "nested/a/b/deep.bin"] + ctree.small[:40]
    assert_listing(m, ctree)                 # every folder listed once: all listings cached
    read_compare(m, ctree, cached)
    return emu, m, cached


def _stop_emulator(emu):
    url = emu.url
    emu.stop()
    try:
        urllib.request.urlopen(url + "/_emu/health", timeout=5)
    except OSError:
        return
    raise AssertionError("the emulator still answers after stop()")


@pytest.mark.deadline(120)
def test_drive_down_cached_files_read_uncached_fail_with_eio(mount_factory, emulator_factory, ctree):
    emu, m, cached = _outage_mount(mount_factory, emulator_factory, ctree, "c-outage")
    before = cstats(m)
    _stop_emulator(emu)
    assert_listing(m, ctree)
    read_compare(m, ctree, cached, drop=True)
    after = cstats(m)
    assert after["cache_misses_total"] == before["cache_misses_total"], (before, after)
    assert after["cache_hits_total"] >= before["cache_hits_total"] + ctree.blocks(cached), \
        "cached files were not read from the daemon's cache: %r -> %r" % (before, after)
    assert_eio_fast(m.path("odd5.bin"), "uncached odd5.bin, Drive down")
    assert_eio_fast(m.path(ctree.small[-1]), "uncached %s, Drive down" % ctree.small[-1])
    # the failures did not break the cached files
    read_compare(m, ctree, cached[:5], drop=True)
    assert H.is_fuse_mounted(m.mnt) and not H.pid_gone(m.pid)


@pytest.mark.deadline(120)
def test_remount_with_drive_down_serves_the_cache(mount_factory, emulator_factory, ctree):
    emu, m, cached = _outage_mount(mount_factory, emulator_factory, ctree, "c-offline")
    umount(m)
    _stop_emulator(emu)
    m.pid = None
    m.start(timeout=60)
    assert_listing(m, ctree)
    read_compare(m, ctree, cached)
    st = cstats(m)
    assert st["downloads_total"] == 0 and st["cache_misses_total"] == 0, st
    assert_eio_fast(m.path("big64.bin"), "uncached big64.bin after an offline remount")


# --------------------------------------------------------------------------
# 3. concurrent readers of one cold file


@pytest.mark.deadline(150)
def test_16_concurrent_readers_download_each_block_once(mount_factory, cemu, ctree, tmp_path):
    rel = "big64.bin"
    fid, want = ctree.ids[rel], ctree.data[rel]
    size = len(want)
    cemu.reset()
    m = mount_factory.new(cemu, name="c-conc")
    path = m.path(rel)
    go = threading.Event()
    errors, done = [], []

    def ranges(i):
        chunk = [MiB, 256 * KiB, 3 * MiB + 4097, 65536 + 1][i % 4]
        offs = list(range(0, size, chunk))
        k = (i * 7) % len(offs)
        offs = offs[k:] + offs[:k]
        if i % 3 == 2:
            offs.reverse()
        return [(o, min(chunk, size - o)) for o in offs]

    def thread_reader(i):
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                assert go.wait(60), "no start signal"
                got = 0
                for off, n in ranges(i):
                    b = C.pread_full(fd, n, off)
                    if b != want[off:off + n]:
                        raise AssertionError(C.diff_text(b, want[off:off + n],
                                                         "thread %d @%d+%d" % (i, off, n)))
                    got += len(b)
                assert got == size, "thread %d read %d bytes, want %d" % (i, got, size)
            finally:
                os.close(fd)
            done.append(i)
        except BaseException as e:  # noqa: B902 - reported below
            errors.append("thread %d: %s" % (i, e))

    nthreads, nprocs = 8, 8
    threads = [threading.Thread(target=thread_reader, args=(i,), daemon=True) for i in range(nthreads)]
    procs, outs = [], []
    worker = os.path.join(os.path.dirname(os.path.abspath(C.__file__)), "cache_helpers.py")
    try:
        for t in threads:
            t.start()
        for j in range(nprocs):
            chunk = [MiB, 2 * MiB, 512 * KiB, 4 * MiB][j % 4]
            order = list(range(nblocks(size, chunk)))
            if j % 2:
                random.Random(DATA_SEED + j).shuffle(order)
            jf = tmp_path / ("job%d.json" % j)
            jf.write_text(json.dumps({"path": path, "source": ctree.paths[rel], "chunk": chunk,
                                      "order": order}))
            out = open(tmp_path / ("out%d.txt" % j), "w+b")
            outs.append(out)
            procs.append(H.register_proc(subprocess.Popen(
                [H.PYTHON, worker, "read-compare", str(jf)],
                stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT)))
        go.set()
        for p in procs:
            p.stdin.write(b"go\n")
            p.stdin.close()
        H.wait_until(lambda: all(p.poll() is not None for p in procs)
                     and not any(t.is_alive() for t in threads), 120, interval=0.05,
                     what="16 readers")
        for j, (p, out) in enumerate(zip(procs, outs)):
            out.seek(0)
            text = out.read().decode("utf-8", "replace")
            if p.returncode != 0:
                errors.append("process %d exited %s: %s" % (j, p.returncode, text[-2000:]))
                continue
            res = json.loads(text.strip().splitlines()[-1])
            if res["nbad"] or res["bytes"] != size:
                errors.append("process %d: %d bad chunks, %d bytes read: %s"
                              % (j, res["nbad"], res["bytes"], res["bad"]))
    finally:
        for p in procs:
            H.reap_proc(p)
        for out in outs:
            out.close()
    assert not errors, "\n".join(errors)
    assert len(done) == nthreads

    recs = media_records(cemu, fid)
    spans = sorted(parse_range(r["range"]) for r in recs)
    assert 0 < len(recs) <= nblocks(size), \
        "%d media requests for %s, want at most one per block (%d): %r" % (len(recs), rel, nblocks(size), spans)
    pos = 0
    for a, b in spans:
        assert a == pos, "media ranges overlap or leave a gap at %d: %r" % (pos, spans)
        pos = b + 1
    assert pos == size, "media ranges end at %d, file size %d" % (pos, size)
    assert all(r["status"] == 206 for r in recs), [r["status"] for r in recs]
    st = cstats(m)
    assert st["downloads_total"] == nblocks(size), st
    assert st["drive_media_bytes_total"] == size, st
    assert st["downloads_in_flight"] == 0, st


# --------------------------------------------------------------------------
# 4. a file changed in Drive


def _text_bytes(n, tag):
    line = ("%s: the new revision of this file, line %%08d\n" % tag)
    out, i = [], 0
    total = 0
    while total < n:
        s = line % i
        out.append(s)
        total += len(s)
        i += 1
    return "".join(out)[:n]


@pytest.mark.deadline(120)
def test_changed_file_reads_whole_new_revision(mount_factory, emulator_factory, tmp_path):
    rng = random.Random(DATA_SEED + 4)
    root = {"id": H.ROOT_ID, "name": "My Drive"}
    files = {   # name -> (old bytes, new text)
        "grow.bin": (rng.randbytes(3 * MiB + 5), _text_bytes(2 * MiB + MiB // 2 + 3, "grow")),
        "same.bin": (rng.randbytes(2 * MiB), _text_bytes(2 * MiB, "same")),
    }
    items, ids = [], {}
    for name, (old, _) in files.items():
        ids[name] = H.mkid("cache-change/" + name)
        p = tmp_path / name
        p.write_bytes(old)
        items.append({"id": ids[name], "name": name, "path": str(p),
                      "modifiedTime": "2024-02-03T04:05:06.789Z"})
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"root": root, "items": items}))
    emu = emulator_factory(spec, "emu-change", access_token=SESSION_TOKEN)
    m = mount_factory.new(emu, name="c-change", extra=["--dir-ttl=1", "--attr-timeout=1"])

    def meta(fid):
        q = urllib.parse.urlencode({"fields": "headRevisionId,md5Checksum,size,version"})
        st, _, body = emu.request("GET", "/drive/v3/files/%s?%s" % (fid, q), headers=emu.auth())
        assert st == 200, (st, body[:300])
        return json.loads(body)

    for name, (old, _) in files.items():
        assert os.stat(m.path(name)).st_size == len(old)
        C.assert_same(C.read_whole(m.path(name)), old, name + " (old revision)")
    old_meta = {name: meta(ids[name]) for name in files}

    for name, (_, new) in files.items():
        st, _, body = emu.request("POST", "/_emu/items/" + ids[name],
                                  data=json.dumps({"content": new}).encode(),
                                  headers={"Content-Type": "application/json"})
        assert st == 200, (st, body)
        nm = meta(ids[name])
        assert nm["headRevisionId"] != old_meta[name]["headRevisionId"], (old_meta[name], nm)
        assert nm["md5Checksum"] != old_meta[name]["md5Checksum"], (old_meta[name], nm)
        assert int(nm["size"]) == len(new.encode())

    for name, (old, new) in files.items():
        new_b = new.encode()
        path = m.path(name)
        seen = {"old": 0}

        def changed():
            data = C.read_whole(path)
            if data == new_b:
                return True
            if data == old:
                seen["old"] += 1
                return False
            if len(data) == len(new_b):
                raise AssertionError("%s: neither the old nor the new revision: %s"
                                     % (name, C.diff_text(data, new_b, name + " vs new")))
            raise AssertionError("%s: neither the old nor the new revision (%d bytes; old %d, new %d): %s"
                                 % (name, len(data), len(old), len(new_b),
                                    C.diff_text(data, old, name + " vs old")))
        H.wait_until(changed, 30, interval=0.2, what="%s to show its new revision" % name)
        assert os.stat(path).st_size == len(new_b)
        # and it stays new, through the daemon too
        C.assert_same(C.read_whole(path), new_b, name + " (re-read)")
        C.drop_page_cache(path)
        C.assert_same(C.read_whole(path), new_b, name + " (re-read, page cache dropped)")


def _block_origin(data, old, new):
    """'old'/'new'/'mixed' per 1 MiB block of data (for failure messages)."""
    out = []
    for k in range(nblocks(len(data))):
        b = data[k * MiB:(k + 1) * MiB]
        out.append("old" if b == old[k * MiB:(k + 1) * MiB] else
                   "new" if b == new[k * MiB:(k + 1) * MiB] else "other")
    return out


def _partly_cached_change(mount_factory, emulator_factory, tmp_path, name, extra):
    """A 12 MiB file (the emulator takes request bodies up to 16 MiB) on its
    own emulator and mount; returns (emu, m, fid, old, new, new_text)."""
    size = 12 * MiB
    rng = random.Random(DATA_SEED + 44)
    old = rng.randbytes(size)
    new_text = _text_bytes(size, "part")
    fid = H.mkid("cache-change/part.bin")
    p = tmp_path / "part.bin"
    p.write_bytes(old)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"root": {"id": H.ROOT_ID, "name": "My Drive"},
                                "items": [{"id": fid, "name": "part.bin", "path": str(p)}]}))
    emu = emulator_factory(spec, "emu-" + name, access_token=SESSION_TOKEN)
    m = mount_factory.new(emu, name=name, extra=extra)
    return emu, m, fid, old, new_text.encode(), new_text


def _cache_two_blocks(emu, fd, fid, old):
    """Reads 4 KiB at blocks 0 and 8; returns the blocks downloaded so far
    (asserting that most of the file is still uncached)."""
    for k in (0, 8):
        C.assert_same(C.pread_full(fd, 4096, k * MiB), old[k * MiB:k * MiB + 4096],
                      "part.bin block %d before the change" % k)
    fetched = sorted({parse_range(r["range"])[0] // MiB for r in media_records(emu, fid)})
    assert len(fetched) < nblocks(len(old)) // 2, \
        "precondition: most blocks should be uncached before the change; fetched %r" % fetched
    return fetched


def _change(emu, fid, new_text):
    st, _, body = emu.request("POST", "/_emu/items/" + fid,
                              data=json.dumps({"content": new_text}).encode(),
                              headers={"Content-Type": "application/json"})
    assert st == 200, (st, body)


@pytest.mark.deadline(120)
def test_file_changed_while_open_is_never_mixed(mount_factory, emulator_factory, tmp_path):
    """Blocks 0 and 8 of a 12 MiB file are cached through a descriptor, then
    the file changes in Drive (same size).  That descriptor reads the file at
    its old revision (man page, LIMITS) or fails, never a mix; a new open after
    the listing refresh reads the new revision whole."""
    emu, m, fid, old, new, new_text = _partly_cached_change(
        mount_factory, emulator_factory, tmp_path, "c-open", ["--dir-ttl=1", "--attr-timeout=1"])
    path = m.path("part.bin")
    problems = []
    fd = os.open(path, os.O_RDONLY)
    try:
        fetched = _cache_two_blocks(emu, fd, fid, old)
        _change(emu, fid, new_text)
        try:
            data = C.pread_full(fd, len(old), 0)
        except OSError:
            data = None       # failing is allowed; a mix is not
        if data is not None and data != old:
            problems.append("a descriptor opened before the change read a mix of revisions "
                            "(blocks cached before the change: %r): blocks %r"
                            % (fetched, _block_origin(data, old, new)))
    finally:
        os.close(fd)

    mixes = []

    def changed():
        data = C.read_whole(path)
        if data == new:
            return True
        if data != old:
            mixes.append(_block_origin(data, old, new))
        return False
    try:
        H.wait_until(changed, 30, interval=0.2, what="part.bin to show its new revision")
    except H.Timeout as e:
        problems.append(str(e))
    if mixes:
        problems.append("%d fresh open(s) after the change read a mix of revisions, the first: blocks %r"
                        % (len(mixes), mixes[0]))
    if not problems:
        C.drop_page_cache(path)
        C.assert_same(C.read_whole(path), new, "part.bin (re-read, page cache dropped)")
    if problems:
        raise AssertionError("\n".join(problems))


@pytest.mark.deadline(120)
def test_file_changed_within_dir_ttl_is_never_mixed(mount_factory, emulator_factory, tmp_path):
    """Blocks 0 and 8 cached, the file changes in Drive (same size), and is
    opened again before the listing expires (--dir-ttl=300): colabfs still
    believes the old revision, so the read must give the old bytes whole (or
    the new ones whole, or fail), never cached old blocks mixed with new
    downloads."""
    emu, m, fid, old, new, new_text = _partly_cached_change(
        mount_factory, emulator_factory, tmp_path, "c-ttl", ["--dir-ttl=300", "--attr-timeout=60"])
    path = m.path("part.bin")
    fd = os.open(path, os.O_RDONLY)
    try:
        fetched = _cache_two_blocks(emu, fd, fid, old)
    finally:
        os.close(fd)
    _change(emu, fid, new_text)
    C.drop_page_cache(path)
    try:
        data = C.read_whole(path)
    except OSError:
        data = None       # failing is allowed; a mix is not
    if not (data is None or data == old or data == new):
        raise AssertionError("a read within --dir-ttl after the change returned a mix of revisions "
                             "(blocks cached before the change: %r): blocks %r"
                             % (fetched, _block_origin(data, old, new)))


# --------------------------------------------------------------------------
# 5. a corrupted block


@pytest.mark.deadline(120)
def test_corrupted_block_is_detected_and_refetched(mount_factory, cemu, ctree):
    rel = "f16.bin"
    fid, want = ctree.ids[rel], ctree.data[rel]
    m = mount_factory.new(cemu, name="c-crc")
    read_compare(m, ctree, [rel])
    umount(m)

    arena = m.workdir / "cache" / "arena-1m.dat"
    assert arena.is_file(), sorted(os.listdir(m.workdir / "cache"))
    blocks = {want[k * MiB:(k + 1) * MiB]: k for k in range(16)}
    slots = {}     # arena offset -> block number
    with open(arena, "rb") as f:
        for start, end in C.data_regions(str(arena)):
            for off in range(start - start % MiB, end, MiB):
                b = os.pread(f.fileno(), MiB, off)
                if b in blocks:
                    slots[off] = blocks[b]
    assert sorted(slots.values()) == list(range(16)), \
        "arena-1m.dat does not hold the 16 blocks of %s at 1 MiB slots: %r" % (rel, slots)
    victim_off = next(off for off, k in slots.items() if k == 9)
    at = victim_off + 123457
    fd = os.open(arena, os.O_RDWR)
    try:
        orig = os.pread(fd, 32, at)
        assert os.pwrite(fd, bytes(b ^ 0xA5 for b in orig), at) == 32
        os.fsync(fd)
    finally:
        os.close(fd)

    cemu.reset()
    m.pid = None
    m.start()
    C.assert_same(C.read_whole(m.path(rel)), want, rel + " after corrupting block 9 in the arena")
    st = cstats(m)
    assert st["cache_checksum_failures_total"] == 1, st
    recs = media_records(cemu, fid)
    assert [parse_range(r["range"]) for r in recs] == [(9 * MiB, 10 * MiB - 1)], \
        "want exactly one refetch, of block 9: %r" % [r["range"] for r in recs]
    # the refetched block is good from now on
    C.drop_page_cache(m.path(rel))
    C.assert_same(C.read_whole(m.path(rel)), want, rel + " re-read")
    st2 = cstats(m)
    assert st2["cache_checksum_failures_total"] == 1, st2
    assert len(media_records(cemu, fid)) == 1


# --------------------------------------------------------------------------
# 6. the smallest budget


class Sampler:
    """Samples cache_used_bytes / cache_budget_bytes through the stats xattr
    while reads run."""

    def __init__(self, m):
        self.m = m
        self.stop = threading.Event()
        self.max_over = None
        self.samples = 0
        self.errors = []
        self.t = threading.Thread(target=self.run, name="stats-sampler", daemon=True)

    def run(self):
        while not self.stop.is_set():
            try:
                st = xattr_stats(self.m)
                self.samples += 1
                if st["cache_used_bytes"] > st["cache_budget_bytes"] and self.max_over is None:
                    self.max_over = st
            except Exception as e:  # noqa: B902 - reported by the test
                self.errors.append(repr(e))
                return
            self.stop.wait(0.01)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join(timeout=30)


@pytest.mark.deadline(120)
def test_smallest_budget_is_never_exceeded(mount_factory, cemu, ctree):
    m = mount_factory.new(cemu, name="c-budget", extra=["--cache-size=16M"])
    checks = []

    def check(what):
        st = cstats(m)
        checks.append((what, st["cache_used_bytes"]))
        assert st["cache_budget_bytes"] == 16 * MiB, st
        assert st["cache_used_bytes"] <= st["cache_budget_bytes"], "%s: %r" % (what, st)
        return st

    with Sampler(m) as sampler:
        for rel in ["big64.bin", "f16.bin", "odd5.bin"] + ctree.small[:50]:
            read_compare(m, ctree, [rel])
            check("after " + rel)
        # read the big one again (evicted by now): downloads again, still right
        read_compare(m, ctree, ["big64.bin", "f16.bin"], drop=True)
        check("after re-reading big64.bin and f16.bin")
    assert not sampler.errors, sampler.errors
    assert sampler.samples > 10, sampler.samples
    assert sampler.max_over is None, "cache_used_bytes exceeded the budget: %r" % sampler.max_over
    st = check("at the end")
    assert st["cache_evictions_total"] > 0, st
    assert st["cache_used_bytes"] > 0, st


# --------------------------------------------------------------------------
# 7. the cache file system fills up


@pytest.mark.deadline(150)
def test_full_cache_filesystem_never_fails_reads(mount_factory, cemu, ctree):
    m = mount_factory.new(cemu, name="c-tmpfs", start=False, extra=["--cache-size=1G"])
    cache = m.workdir / "cache"
    cache.mkdir()
    tmpfs = False
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs", str(cache)],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        assert r.returncode == 0, "mount -t tmpfs: %r" % r
        tmpfs = True
        m.start()
        read_compare(m, ctree, ["big64.bin", "f16.bin", "odd5.bin"] + ctree.small[:20])
        read_compare(m, ctree, ["big64.bin"], drop=True)
        st = cstats(m)
        assert st["cache_full_retries_total"] > 0 or st["blocks_served_uncached_total"] > 0, st
        vfs = os.statvfs(cache)
        assert vfs.f_blocks * vfs.f_frsize <= 24 * MiB
    finally:
        problems = m.cleanup()
        if tmpfs:
            r = subprocess.run(["umount", str(cache)], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=30)
            if r.returncode != 0:
                problems.append("umount tmpfs: %r" % r)
                subprocess.run(["umount", "-l", str(cache)], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=30)
    assert not problems, problems


# --------------------------------------------------------------------------
# 8. stats and evict


@pytest.mark.deadline(150)
def test_stats_match_the_emulator_and_evict_frees_what_it_says(mount_factory, cemu, ctree):
    cemu.reset()
    # this test counts exact bytes: no read-ahead across files (reading small
    # files in listing order would rightly fetch the next ones too), and no
    # hedged second request (a loaded machine's slow answer would send one)
    m = mount_factory.new(cemu, name="c-stats", extra=["--no-dataset-readahead", "--hedge-budget=0"])
    rels = ["f16.bin", "odd5.bin", "nested/a/note.bin", "nested/a/b/deep.bin"] + ctree.small[:20]
    read_compare(m, ctree, rels)

    # the daemon counts a request when it sends it, the emulator when it has
    # answered it: let any call in flight (the change poller's) land first
    def settled():
        e, st = cemu.stats(), cstats(m)
        return (e, st) if st["drive_requests_total"] == e["requests"] and \
            st["downloads_in_flight"] == 0 else None
    try:
        e, st = H.wait_until(settled, 10, interval=0.1, what="the counters to settle")
    except H.Timeout:
        e, st = cemu.stats(), cstats(m)   # the asserts below say what differs
    assert 0 < e["by_kind"]["media"] <= ctree.blocks(rels), e
    assert e["media_bytes"] == ctree.nbytes(rels), e
    assert st["drive_media_bytes_total"] == e["media_bytes"], (st, e)
    assert st["download_requests_total"] == e["by_kind"]["media"], (st, e)
    assert st["downloads_total"] == ctree.blocks(rels), (st, e)
    assert st["drive_requests_total"] == e["requests"], (st, e)
    assert st["bytes_from_drive_total"] + st["bytes_from_cache_total"] >= ctree.nbytes(rels), st
    assert st["cache_blocks"] == ctree.blocks(rels), st
    assert st["cache_files"] == len(rels), st
    assert st["cache_used_bytes"] >= ctree.nbytes(rels), st
    assert st["drive_errors_total"] == 0 and st["drive_retries_total"] == 0, st

    # --prometheus: TYPE line + sample for every JSON field, same values
    rc, out, err = colabfs_cmd(m, "stats", m.mnt, "--prometheus")
    assert rc == 0, (rc, out, err)
    prom = C.parse_prometheus(out)
    assert set(prom) == {"colabfs_" + k for k in st}, sorted(set(prom) ^ {"colabfs_" + k for k in st})
    for k, v in st.items():
        typ, pv = prom["colabfs_" + k]
        assert typ == ("counter" if k.endswith("_total") else "gauge"), (k, typ)
        if k.startswith("fuse_requests_"):  # stats goes through the control socket, not FUSE
            assert pv >= v, "%s: prometheus %d, json %d" % (k, pv, v)
        elif k != "uptime_seconds":
            assert pv == v, "%s: prometheus %d, json %d" % (k, pv, v)
    rc, out, err = colabfs_cmd(m, "stats", m.mnt)
    assert rc == 0 and "cache_used_bytes" in out, (rc, out, err)

    # evict one file: freed == the drop of cache_used_bytes; the next read downloads again
    before = cstats(m)
    rc, out, err = colabfs_cmd(m, "evict", m.path("f16.bin"))
    assert rc == 0, (rc, out, err)
    [(p, freed_mib, freed_blocks)] = C.parse_evict(out)
    assert p == m.path("f16.bin"), out
    after = cstats(m)
    drop = before["cache_used_bytes"] - after["cache_used_bytes"]
    assert drop == 16 * MiB, (before, after)
    assert abs(freed_mib * MiB - drop) <= 0.05 * MiB, "evict says %.1f MiB, used dropped by %d" % (freed_mib, drop)
    assert freed_blocks == 16 == before["cache_blocks"] - after["cache_blocks"], (out, before, after)
    # exact byte count through the control attribute the CLI uses
    before = after
    res = json.loads(os.getxattr(m.path("odd5.bin"), "user.colabfs.evict").decode().rstrip("\0"))
    after = cstats(m)
    assert res["freed_bytes"] == before["cache_used_bytes"] - after["cache_used_bytes"], (res, before, after)
    assert res["freed_blocks"] == 6 == before["cache_blocks"] - after["cache_blocks"], (res, before, after)
    assert res["freed_bytes"] >= 5 * MiB + 12345, res

    s0 = cemu.stats()
    read_compare(m, ctree, ["f16.bin", "odd5.bin"])   # no page-cache drop: evict invalidated it
    s1 = cemu.stats()
    assert delta(s0, s1)["media"] > 0 and delta(s0, s1)["media_bytes"] == 21 * MiB + 12345, delta(s0, s1)

    # evict a folder: every file below it
    before = cstats(m)
    rc, out, err = colabfs_cmd(m, "evict", m.path("nested"))
    assert rc == 0, (rc, out, err)
    [(p, freed_mib, freed_blocks)] = C.parse_evict(out)
    after = cstats(m)
    assert freed_blocks == 2 == before["cache_blocks"] - after["cache_blocks"], (out, before, after)

    # evict --all
    rc, out, err = colabfs_cmd(m, "evict", "--all", m.mnt)
    assert rc == 0, (rc, out, err)
    st = cstats(m)
    assert st["cache_blocks"] == 0 and st["cache_used_bytes"] == 0, st

    # fill again, then evict --to 8M
    read_compare(m, ctree, ["big64.bin", "f16.bin"] + ctree.small[:10])
    st = cstats(m)
    assert st["cache_used_bytes"] >= 80 * MiB, st
    rc, out, err = colabfs_cmd(m, "evict", "--to", "8M", m.mnt)
    assert rc == 0, (rc, out, err)
    st = cstats(m)
    assert st["cache_used_bytes"] <= 8 * MiB, st
    read_compare(m, ctree, ["big64.bin", "f16.bin"] + ctree.small[:10], drop=True)
    assert cstats(m)["cache_used_bytes"] <= st["cache_budget_bytes"]


# --------------------------------------------------------------------------
# 9. a cold sequential read keeps every connection busy


@pytest.mark.deadline(120)
def test_cold_sequential_read_uses_every_connection_once_per_byte(mount_factory, emulator_factory,
                                                                 ctree):
    """A reader going through a file from offset 0 is sequential from its
    first reads: the window grows fast and its requests are shared out among
    idle workers, so (nearly) every connection is busy at once; still each
    block is downloaded exactly once and every byte is right."""
    rel = "big64.bin"
    fid, want = ctree.ids[rel], ctree.data[rel]
    emu = emulator_factory(ctree.spec_path, "emu-seq", access_token=SESSION_TOKEN,
                           seed=DATA_SEED, ttfb_ms=50, extra=["--bandwidth", "40000000"])
    m = mount_factory.new(emu, name="c-seq", extra=["--max-connections=8"])
    p = m.path(rel)
    emu.reset()
    got = bytearray()
    with open(p, "rb", buffering=0) as f:
        while True:
            b = f.read(MiB)
            if not b:
                break
            got += b
    C.assert_same(bytes(got), want, p)
    recs = media_records(emu, fid)
    ev = sorted([(r["mono"], 1) for r in recs] + [(r["mono"] + r["ms"] / 1000, -1) for r in recs])
    cur = top = 0
    for _, d in ev:
        cur += d
        top = max(top, cur)
    assert top >= 7, "at most %d of 8 connections busy at once: %r" % (
        top, [(round(r["mono"] - recs[0]["mono"], 3), r["range"]) for r in recs])
    st = cstats(m)
    assert st["downloads_total"] == nblocks(len(want)), st
    assert st["downloads_in_flight"] == 0, st
    # a request may be ended early (a prefetch yielding to a miss), never repeated
    spans = sorted(parse_range(r["range"]) for r in recs)
    starts = [a for a, _ in spans]
    assert len(starts) == len(set(starts)), "a range was requested twice: %r" % spans
    umount(m)
