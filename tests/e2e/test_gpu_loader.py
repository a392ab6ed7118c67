"""The GPU-direct loader (python/colabfs + libcolabfs-gpu.so) against a real
mount of the emulator, on the CPU path (issue 7): batches straight from the
cache arenas, bit-exact against the source, mixing cached and uncached files;
torch.from_dlpack over a batch; a concurrent evict/re-fetch stress with zero
torn batches; a corrupted arena block that the loader detects (crc32c): it has the
daemon drop the file's blocks and reads through the mount, which fetches
them again.

Skipped when the library was not built (it always is by `make`) or torch is
missing; on a machine with a CUDA device tests/gpu covers the device path.
"""

import json
import os
import random
import sys
import threading
from pathlib import Path

import pytest

import helpers as H

TOP = Path(__file__).resolve().parents[2]
LIB = Path(os.environ.get("COLABFS_GPU_LIB", str(H.colabfs_bin().parent / "libcolabfs-gpu.so")))
if not LIB.exists():
    pytest.skip("libcolabfs-gpu.so not built (%s)" % LIB, allow_module_level=True)
os.environ["COLABFS_GPU_LIB"] = str(LIB)
sys.path.insert(0, str(TOP / "python"))
import colabfs  # noqa: E402

torch = pytest.importorskip("torch")

SEED = 707
N_FILES = 120
BIG = 24 * H.MiB


class GTree:
    def __init__(self, base):
        self.src = Path(base) / "src"
        self.src.mkdir(parents=True)
        rng = random.Random(SEED)
        folder = H.mkid("gpu:imgs")
        items = [{"id": folder, "name": "imgs", "mimeType": H.FOLDER}]
        self.data = {}
        for i in range(N_FILES):
            name = "img_%03d.raw" % i
            d = rng.randbytes(rng.randrange(1, 96 * H.KiB))
            (self.src / name).write_bytes(d)
            self.data["imgs/" + name] = d
            items.append({"id": H.mkid("gpu:%d" % i), "name": name, "parent": folder,
                          "path": str(self.src / name)})
        big = rng.randbytes(BIG)
        (self.src / "big.bin").write_bytes(big)
        self.data["big.bin"] = big
        items.append({"id": H.mkid("gpu:big"), "name": "big.bin", "path": str(self.src / "big.bin")})
        self.spec = Path(base) / "spec.json"
        self.spec.write_text(json.dumps({"root": {"id": H.ROOT_ID, "name": "My Drive"},
                                         "items": items}))


@pytest.fixture(scope="module")
def gtree(tmp_path_factory):
    return GTree(tmp_path_factory.mktemp("gpu-gtree"))


@pytest.fixture
def mnt(mount_factory, emulator_factory, gtree):
    emu = emulator_factory(gtree.spec, "gpu")
    # the tests need files left uncached next to cached ones: reading every
    # other file would (rightly) start the dataset read-ahead of the rest
    m = mount_factory.new(emu, name="gpu", extra=["--no-dataset-readahead"])
    m.cache_dir = str(m.workdir / "cache")
    yield m
    for s in list(colabfs._gpu._stages.values()):  # the LMDB reader must go before the unmount
        s.close()


def read_through(m, rel):
    with open(m.path(rel), "rb") as f:
        return f.read()


def check_batches(loader, gtree):
    n = 0
    for batch in loader:
        assert not batch.on_gpu
        for i, (path, off, ln) in enumerate(batch.items):
            rel = os.path.relpath(path, loader.stage.mountpoint)
            want = gtree.data[rel][off:] if ln is None else gtree.data[rel][off:off + ln]
            got = bytes(batch.item(i))
            assert got == want, "%s @%d: %s" % (rel, off, H.first_diff(got, want))
            n += 1
    return n


def test_batches_bit_exact_mixed_cached_and_uncached(mnt, gtree):
    names = sorted(r for r in gtree.data if r.startswith("imgs/"))
    for rel in names[::2]:  # half cached by reads through the mount
        assert read_through(mnt, rel) == gtree.data[rel]
    paths = [mnt.path(r) for r in names]
    loader = colabfs.Loader(paths, batch_size=16, depth=2, device="cpu",
                            mountpoint=mnt.mnt, cache_dir=mnt.cache_dir)
    s0 = loader.stage.stats()
    assert check_batches(loader, gtree) == len(paths)
    s1 = loader.stage.stats()
    assert s1["blocks_cached"] > s0["blocks_cached"], s1   # straight from the arenas
    assert s1["bytes_mount"] > s0["bytes_mount"], s1       # the uncached half
    # the mount cached what it read for the loader: the next epoch is all arena
    assert check_batches(loader, gtree) == len(paths)
    s2 = loader.stage.stats()
    assert s2["bytes_mount"] == s1["bytes_mount"], (s1, s2)
    assert s2["crc_errors"] == 0
    # ranges inside a multi-block file, and DLPack into torch without a copy
    ranges = [(mnt.path("big.bin"), off, ln) for off, ln in
              ((0, 100), (H.MiB - 7, 3 * H.MiB), (BIG - 5000, None), (5 * H.MiB + 1, 1))]
    loader = colabfs.Loader(ranges, batch_size=4, device="cpu", mountpoint=mnt.mnt,
                            cache_dir=mnt.cache_dir)
    for batch in loader:
        t = torch.from_dlpack(batch)
        assert t.dtype == torch.uint8 and t.numel() == sum(batch.lengths)
        flat = bytes(t.numpy())
        for i, (_, off, ln) in enumerate(batch.items):
            o = batch.offsets[i]
            want = gtree.data["big.bin"][off:] if ln is None else gtree.data["big.bin"][off:off + ln]
            assert flat[o:o + batch.lengths[i]] == want


def test_evict_stress_zero_torn_batches(mnt, gtree):
    """Evictions and re-fetches by the daemon while the loader copies from
    the arenas: every batch stays exact; the torn-read guard's retries and
    reads through the mount are counted."""
    assert read_through(mnt, "big.bin") == gtree.data["big.bin"]
    rng = random.Random(3)
    ranges = [(mnt.path("big.bin"), rng.randrange(BIG - 300 * H.KiB), 300 * H.KiB)
              for _ in range(64)]
    stop = threading.Event()
    evictions = [0]

    def evictor():
        while not stop.is_set():
            rc, out, err = H.run_cmd([str(H.colabfs_bin()), "evict", mnt.path("big.bin")], 30)
            assert rc == 0, err
            evictions[0] += 1
            read_through(mnt, "big.bin")  # the daemon writes the blocks again, new slots

    th = threading.Thread(target=evictor, daemon=True)
    th.start()
    loader = colabfs.Loader(ranges, batch_size=8, device="cpu", mountpoint=mnt.mnt,
                            cache_dir=mnt.cache_dir)
    try:
        epochs = 0
        while epochs < 3 or evictions[0] < 3:
            check_batches(loader, gtree)
            epochs += 1
            assert epochs < 200, "the evictor made no progress"
    finally:
        stop.set()
        th.join(60)
    st = loader.stage.stats()
    print("\n[gpu loader] %d epochs under %d evictions: retries %d, via mount %d blocks, "
          "from arenas %d blocks" % (epochs, evictions[0], st["retries"], st["blocks_mount"],
                                     st["blocks_cached"]))
    assert st["blocks_mount"] > 0  # some blocks were gone when planned or copied


def test_corrupt_arena_block_is_refetched(mnt, gtree):
    rel = "imgs/img_007.raw"
    data = gtree.data[rel]
    assert len(data) > 4096
    assert read_through(mnt, rel) == data
    needle = data[1000:1064]
    hit = None
    for p in sorted(Path(mnt.cache_dir).glob("arena-*.dat")):
        with open(p, "r+b") as f:
            buf = f.read()
            i = buf.find(needle)
            if i >= 0:
                f.seek(i + 10)
                f.write(bytes([buf[i + 10] ^ 0xFF]))
                hit = (p, i)
                break
    assert hit, "the block was not found in any arena"
    loader = colabfs.Loader([mnt.path(rel)], batch_size=1, device="cpu", mountpoint=mnt.mnt,
                            cache_dir=mnt.cache_dir)
    s0 = loader.stage.stats()
    assert check_batches(loader, gtree) == 1
    s1 = loader.stage.stats()
    assert s1["crc_errors"] == s0["crc_errors"] + 1, s1
    assert s1["bytes_mount"] > s0["bytes_mount"], s1
    # the loader had the daemon drop the file's blocks and fetch them again
    rc, out, err = H.run_cmd([str(H.colabfs_bin()), "stats", mnt.mnt, "--json"], 30)
    st = json.loads(out)
    assert st["cache_evictions_total"] >= 1 and st["bytes_from_drive_total"] >= 2 * len(data), out
    # the daemon refetched the block: the next read from the arenas is clean
    assert check_batches(loader, gtree) == 1
    assert loader.stage.stats()["crc_errors"] == s1["crc_errors"]


def test_loader_learns_the_cache_folder_from_the_mount(mnt, gtree, tmp_path):
    """No cache_dir: the loader asks the mount (user.colabfs.cache_dir) instead of
    working out a default path another user could have planted."""
    told = os.getxattr(mnt.mnt, "user.colabfs.cache_dir").decode()
    assert told == os.path.realpath(mnt.cache_dir), told
    names = sorted(r for r in gtree.data if r.startswith("imgs/"))[:8]
    for rel in names:
        assert read_through(mnt, rel) == gtree.data[rel]
    loader = colabfs.Loader([mnt.path(r) for r in names], batch_size=4, device="cpu",
                            mountpoint=mnt.mnt)
    assert check_batches(loader, gtree) == len(names)
    assert loader.stage.stats()["blocks_cached"] >= len(names)  # from the arenas it was told
