"""A real PyTorch DataLoader over files on a colabfs mount (issue 4).

Debian's python3-torch and python3-numpy, run with /usr/bin/python3; the module is skipped when
either is missing.  The drive holds ``data/`` (300 files of 5-50 KiB) and ``big.bin`` (32 MiB), served
with a small time to first byte so that downloads overlap.  Every sample a DataLoader worker process
reads is compared with the source bytes:

* two shuffled epochs (fixed generator) over ``data/`` with 4 worker processes: the order is the one
  the sampler promises, every file is read exactly once per epoch, and the second epoch reads
  nothing from Drive;
* ``numpy.memmap`` of ``big.bin`` on the mount: random windows (block boundaries, the end of the
  file) in the test process, a strided view that touches every page, and a DataLoader whose workers
  slice their own memmap;
* ``colabfs.torch.PrefetchingSampler`` (issue 25): each epoch's order reaches the mount as the
  epoch starts, the mount downloads the files in that order, and the samples are right.
"""

import gc
import json
import os
import random
import signal
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from torch.utils.data import DataLoader, Dataset  # noqa: E402

import helpers as H  # noqa: E402
from conftest import SESSION_TOKEN  # noqa: E402

sys.path.insert(0, str(H.REPO / "python"))
import colabfs.torch  # noqa: E402

# 4 workers on a 2-core machine is the point of the test, not a mistake
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")

SEED = 4410
N_FILES = 300
BIG = 32 * H.MiB
WORKERS = 4
BATCH_TIMEOUT = 60  # seconds one batch may take before the DataLoader raises


class FileSet:
    """The source tree of this module: spec, source files and what the mount must show."""

    def __init__(self, base):
        self.base = base
        self.src = base / "src"
        self.src.mkdir()
        rng = random.Random(SEED)
        folder = H.mkid("torch:data")
        items = [{"id": folder, "name": "data", "mimeType": H.FOLDER}]
        self.names, self.sources = [], []
        for i in range(N_FILES):
            name = "sample_%04d.bin" % i
            data = rng.randbytes(rng.randrange(5 * H.KiB, 50 * H.KiB + 1))
            p = self.src / name
            p.write_bytes(data)
            items.append({"id": H.mkid("torch:%d" % i), "name": name, "parent": folder, "path": str(p)})
            self.names.append(name)
            self.sources.append(data)
        self.big_path = self.src / "big.bin"
        with open(self.big_path, "wb") as f:
            for _ in range(BIG // H.MiB):
                f.write(rng.randbytes(H.MiB))
        items.append({"id": H.mkid("torch:big"), "name": "big.bin", "path": str(self.big_path)})
        self.spec_path = base / "spec.json"
        self.spec_path.write_text(json.dumps({"root": {"id": H.ROOT_ID, "name": "My Drive"},
                                              "items": items}))


@pytest.fixture(scope="module")
def fileset(tmp_path_factory):
    return FileSet(tmp_path_factory.mktemp("torch-tree"))


@pytest.fixture(scope="module")
def torch_emu(fileset, emulator_factory):
    # 20 ms to the first byte: reads of different files overlap in the daemon
    return emulator_factory(fileset.spec_path, "emu-torch", access_token=SESSION_TOKEN, ttfb_ms=20)


class MountFiles(Dataset):
    """Reads a whole file per sample; returns (index, bytes as a uint8 tensor, worker pid)."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb", buffering=0) as f:
            data = bytearray(f.read())
            while True:               # to EOF, as a FUSE read may be short
                more = f.read()
                if not more:
                    break
                data += more
        t = torch.frombuffer(data, dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
        return i, t, os.getpid()


class MemmapWindows(Dataset):
    """Windows of a file through numpy.memmap, opened lazily in each worker process."""

    def __init__(self, path, windows):
        self.path = path
        self.windows = windows
        self.mm = None

    def __len__(self):
        return len(self.windows)

    def __getitem__(self, i):
        if self.mm is None:
            self.mm = np.memmap(self.path, dtype=np.uint8, mode="r")
        off, n = self.windows[i]
        return i, torch.from_numpy(np.array(self.mm[off:off + n])), os.getpid()


def as_list(batch):
    return batch


def worker_init(_):
    """DataLoader workers are forks of pytest: drop the e2e suite's SIGTERM/SIGHUP handling
    (conftest's wakeup fd would report a worker's SIGTERM, e.g. from the DataLoader's own
    shutdown, to the parent as if pytest had been asked to stop)."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def run_epoch(loader):
    """All samples of one epoch, in delivery order; worker processes are always shut down."""
    it = iter(loader)
    out = []
    try:
        for batch in it:
            out.extend(batch)
    finally:
        shutdown = getattr(it, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
    return out


def expected_order(n, seed, epochs):
    """The index order a shuffled DataLoader with a generator seeded ``seed`` delivers (in-order
    delivery makes it independent of the worker count; see the sampler)."""
    class Idx(Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            return i
    g = torch.Generator()
    g.manual_seed(seed)
    dl = DataLoader(Idx(), batch_size=16, shuffle=True, num_workers=0, generator=g, collate_fn=as_list)
    return [[i for b in dl for i in b] for _ in range(epochs)]


def check_samples(samples, want, what):
    bad = []
    for i, t, pid in samples:
        got = t.numpy().tobytes()
        if got != want[i]:
            bad.append("sample %d (worker pid %d): %d bytes, want %d, first difference at +%d"
                       % (i, pid, len(got), len(want[i]), H.first_diff(got, want[i])))
    assert not bad, "%s: %d samples differ from the source: %s" % (what, len(bad), "; ".join(bad[:3]))


def media_requests(emu):
    return emu.stats()["by_kind"].get("media", 0)


def stats(m):
    r = subprocess.run([str(H.colabfs_bin()), "stats", m.mnt, "--json"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, timeout=30)
    return json.loads(r.stdout)


def settled(m):
    """The daemon has no download in flight (prefetches of epoch 1 are over)."""
    s = stats(m)
    return s.get("downloads_in_flight", 0) == 0 and s.get("prefetch_queued_bytes", 0) == 0


@pytest.mark.deadline(120)
def test_dataloader_epochs(mount_factory, torch_emu, fileset):
    m = mount_factory.new(torch_emu, name="torch-dl")
    root = m.path("data")
    listed = sorted(os.listdir(root))
    assert listed == fileset.names
    for name, data in zip(fileset.names[:5], fileset.sources[:5]):
        assert os.stat(os.path.join(root, name)).st_size == len(data)
    g = torch.Generator()
    g.manual_seed(SEED)
    loader = DataLoader(MountFiles([os.path.join(root, n) for n in listed]), batch_size=16, shuffle=True,
                        num_workers=WORKERS, generator=g, collate_fn=as_list, timeout=BATCH_TIMEOUT,
                        worker_init_fn=worker_init)
    want_order = expected_order(N_FILES, SEED, 2)
    assert want_order[0] != sorted(want_order[0]) and want_order[0] != want_order[1]

    before = media_requests(torch_emu)
    first = run_epoch(loader)
    assert [s[0] for s in first] == want_order[0], "epoch 1 is not in the sampler's shuffled order"
    check_samples(first, fileset.sources, "epoch 1")
    pids = {s[2] for s in first}
    assert os.getpid() not in pids and len(pids) >= 2, \
        "samples should come from several worker processes, got pids %s" % sorted(pids)
    assert media_requests(torch_emu) > before, "epoch 1 downloaded nothing"

    H.wait_until(lambda: settled(m), 30, what="the daemon's downloads to finish")
    before = media_requests(torch_emu)
    st0 = stats(m)
    second = run_epoch(loader)
    assert [s[0] for s in second] == want_order[1], "epoch 2 is not in the sampler's shuffled order"
    check_samples(second, fileset.sources, "epoch 2")
    assert media_requests(torch_emu) == before, "epoch 2 should be served from the cache"
    # a warm epoch's opens and closes are served by the thread that read them (fuse/loop.h)
    st1 = stats(m)
    opens = st1["fuse_requests_open_total"] - st0["fuse_requests_open_total"]
    inline = st1["fuse_served_by_reader_total"] - st0["fuse_served_by_reader_total"]
    assert opens >= N_FILES and inline >= opens, (opens, inline, st1)
    assert st1["fuse_workers"] >= 1, st1


@pytest.mark.deadline(120)
def test_memmap_windows(mount_factory, torch_emu, fileset):
    m = mount_factory.new(torch_emu, name="torch-mmap")
    path = m.path("big.bin")
    assert os.stat(path).st_size == BIG
    src = np.fromfile(str(fileset.big_path), dtype=np.uint8)
    rng = random.Random(SEED + 1)
    windows = [(0, 4096), (BIG - 1, 1), (BIG - 5000, 5000), (H.MiB - 3, 7), (8 * H.MiB - 100, H.MiB + 200)]
    for _ in range(40):
        n = rng.choice([1, 100, 4096, 65536, H.MiB, 3 * H.MiB + 17])
        windows.append((rng.randrange(0, BIG - n + 1), n))

    mm = np.memmap(path, dtype=np.uint8, mode="r")
    try:
        assert mm.shape == (BIG,)
        for off, n in windows:
            got = np.array(mm[off:off + n])
            if not np.array_equal(got, src[off:off + n]):
                H.assert_same_bytes(got.tobytes(), src[off:off + n].tobytes(),
                                    "memmap window [%d, +%d)" % (off, n))
        # one byte of every page: every page of the file faults in through the mount
        assert np.array_equal(np.array(mm[::4096]), src[::4096]), "strided memmap view differs"
        assert np.array_equal(np.array(mm[::-1][:65536]), src[::-1][:65536])
    finally:
        del mm
        gc.collect()  # unmap: the mount must not stay busy

    # the same through DataLoader workers, each with its own memmap of the mount file
    g = torch.Generator()
    g.manual_seed(SEED + 2)
    loader = DataLoader(MemmapWindows(path, windows), batch_size=4, shuffle=True, num_workers=WORKERS,
                        generator=g, collate_fn=as_list, timeout=BATCH_TIMEOUT, worker_init_fn=worker_init)
    samples = run_epoch(loader)
    assert sorted(s[0] for s in samples) == list(range(len(windows)))
    want = [src[off:off + n].tobytes() for off, n in windows]
    check_samples(samples, want, "memmap")
    assert len({s[2] for s in samples}) >= 2


@pytest.mark.deadline(120)
def test_prefetching_sampler(mount_factory, torch_emu, fileset, monkeypatch):
    monkeypatch.setenv("COLABFS_BIN", str(H.colabfs_bin()))
    m = mount_factory.new(torch_emu, name="torch-hint")
    root = m.path("data")
    paths = [os.path.join(root, n) for n in sorted(os.listdir(root))]
    ids = {H.mkid("torch:%d" % i): i for i in range(N_FILES)}
    g = torch.Generator()
    g.manual_seed(SEED + 25)
    sampler = colabfs.torch.PrefetchingSampler(torch.utils.data.RandomSampler(paths, generator=g),
                                               paths)
    loader = DataLoader(MountFiles(paths), batch_size=16, sampler=sampler, num_workers=1,
                        collate_fn=as_list, timeout=BATCH_TIMEOUT, worker_init_fn=worker_init)
    torch_emu.reset()
    first = run_epoch(loader)
    check_samples(first, fileset.sources, "hinted epoch 1")
    order = [s[0] for s in first]
    assert sorted(order) == list(range(N_FILES)) and order != sorted(order)
    assert sampler.last == {"files": N_FILES, "unknown": 0, "bytes": sum(map(len, fileset.sources))}
    # the mount downloaded in the epoch's order (a few places off: 48 connections, one queue)
    rank = {i: k for k, i in enumerate(order)}
    recs = sorted((r for r in torch_emu.log() if r.get("kind") == "media" and r.get("id") in ids),
                  key=lambda r: r["mono"])
    got = [rank[ids[r["id"]]] for r in recs]
    assert len(got) == N_FILES, "each file once: %d downloads" % len(got)
    assert max(abs(k - p) for k, p in enumerate(got)) <= 64, got[:100]
    st = stats(m)
    assert st["order_hints_total"] == 1 and st["order_hints_dropped_total"] == 0, st
    assert st["order_hint_files_total"] >= N_FILES // 2, st
    # the next epoch: its own order, handed over again; all from the cache
    H.wait_until(lambda: settled(m), 30, what="the daemon's downloads to finish")
    before = media_requests(torch_emu)
    second = run_epoch(loader)
    check_samples(second, fileset.sources, "hinted epoch 2")
    assert [s[0] for s in second] != order
    assert media_requests(torch_emu) == before
