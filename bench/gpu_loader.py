"""The mount-side numbers of bench/gpu.sh (run by it; needs a CUDA device).

argv: MOUNTPOINT CACHE_DIR COLABFS_BINARY.  Prints "name value" lines:
staging of resident 4 MiB blocks (registered path, then ring only) as GB/s,
loader images/s vs torch DataLoader(num_workers=N, pin_memory=True) over the
same files (uint8 224x224x3, normalised on the GPU), bit-exactness of the
loader's batches against plain reads, and a torn-read stress (colabfs evict
of the files in a loop while batches are copied and compared)."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import colabfs  # noqa: E402

mnt, cache, colabfs_bin = sys.argv[1], sys.argv[2], sys.argv[3]
IMG = 224 * 224 * 3
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
big = sorted(os.path.join(mnt, "big", f) for f in os.listdir(os.path.join(mnt, "big")))
imgs = sorted(os.path.join(mnt, "img", f) for f in os.listdir(os.path.join(mnt, "img")))


def out(name, v):
    print("%s %s" % (name, v), flush=True)


# warm: read everything through the mount once (the daemon caches it)
for p in big + imgs:
    with open(p, "rb") as f:
        while f.read(8 << 20):
            pass

stage = colabfs.Stage.get(mnt, cache)
lib = colabfs._gpu._load()


def staging(ranges, reps=5):
    """GB/s of ring_copy (whatever path the ring takes) for the ranges."""
    import ctypes
    ring, st = ctypes.c_void_p(), ctypes.c_void_p()
    colabfs._gpu._check(lib.cfs_stage_ring_new(stage._h, 0, 64 << 20, 4, ctypes.byref(ring)), "ring")
    colabfs._gpu._check(lib.cfs_gpu_stream_new(0, ctypes.byref(st)), "stream")
    p = stage.plan(ranges)
    dev = colabfs.DeviceArray(p.nbytes, (p.nbytes,), "|u1")
    best = 0.0
    for _ in range(reps):
        t = time.perf_counter()
        colabfs._gpu._check(lib.cfs_stage_ring_copy(ring, p.h, ctypes.c_void_p(dev.ptr), p.nbytes, st),
                       "ring copy")
        colabfs._gpu._check(lib.cfs_gpu_stream_sync(st), "sync")
        best = max(best, p.nbytes / (time.perf_counter() - t) / 1e9)
    host = dev.to_host()
    ok = True
    for i, (path, _, _) in enumerate(ranges):
        with open(path, "rb") as f:
            ok &= host[p.offsets[i]:p.offsets[i] + p.lengths[i]] == f.read()
    p.free()
    lib.cfs_stage_ring_free(ring)
    lib.cfs_gpu_stream_free(st)
    return best, ok


ranges = [(p, 0, None) for p in big]
stage.set_pinned(0)  # staging is measured from the arenas, not the hot cache
gbps, ok1 = staging(ranges)
out("staging_registered_GBps", "%.2f" % gbps)
os.environ["COLABFS_GPU_NO_REGISTER"] = "1"
gbps, ok2 = staging(ranges)
out("staging_ring_GBps", "%.2f" % gbps)
del os.environ["COLABFS_GPU_NO_REGISTER"]
out("staging_bit_exact", "yes" if ok1 and ok2 else "NO")

# loader vs DataLoader, 2 epochs each, images/s of the second
stage.set_pinned(2 << 30)
BATCH = 256
loader = colabfs.Loader(imgs, batch_size=BATCH, depth=4, device=0, mountpoint=mnt,
                        cache_dir=cache)
exact = True
for epoch in range(2):
    t, n = time.perf_counter(), 0
    for b in loader:
        x = torch.as_tensor(b.normalize(224, 224, 3, MEAN, STD), device="cuda")
        n += x.shape[0]
        if epoch == 0 and n <= 2 * BATCH:
            host = b.data.to_host()
            for i, (path, _, _) in enumerate(b.items):
                with open(path, "rb") as f:
                    exact &= host[b.offsets[i]:b.offsets[i] + b.lengths[i]] == f.read()
    torch.cuda.synchronize()
    ips = n / (time.perf_counter() - t)
out("loader_images_per_s", "%.0f" % ips)
out("loader_bit_exact", "yes" if exact else "NO")


class Files(Dataset):
    def __len__(self):
        return len(imgs)

    def __getitem__(self, i):
        with open(imgs[i], "rb") as f:
            return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)


workers = min(8, os.cpu_count() or 1)
mean = torch.tensor(MEAN, device="cuda").view(1, 3, 1, 1)
std = torch.tensor(STD, device="cuda").view(1, 3, 1, 1)
dl = DataLoader(Files(), batch_size=BATCH, num_workers=workers, pin_memory=True)
for epoch in range(2):
    t, n = time.perf_counter(), 0
    for b in dl:
        x = b.cuda(non_blocking=True).view(-1, 224, 224, 3).permute(0, 3, 1, 2).float()
        x = (x / 255 - mean) / std
        n += x.shape[0]
    torch.cuda.synchronize()
    dips = n / (time.perf_counter() - t)
out("dataloader_workers", workers)
out("dataloader_images_per_s", "%.0f" % dips)

# torn-read stress: evict the files over and over while batches are copied
stop = threading.Event()
evicts = [0]


def evictor():
    while not stop.is_set():
        subprocess.run([colabfs_bin, "evict"] + imgs[:512], capture_output=True)
        evicts[0] += 1


src = {}
for p in imgs[:512]:
    with open(p, "rb") as f:
        src[p] = f.read()
th = threading.Thread(target=evictor)
th.start()
torn = batches = 0
end = time.time() + 20
stress = colabfs.Loader(imgs[:512], batch_size=64, device=0, mountpoint=mnt, cache_dir=cache)
while time.time() < end:
    for b in stress:
        host = b.data.to_host()
        batches += 1
        for i, (path, _, _) in enumerate(b.items):
            if host[b.offsets[i]:b.offsets[i] + b.lengths[i]] != src[path]:
                torn += 1
                break
stop.set()
th.join()
st = stage.stats()
out("stress_batches", batches)
out("stress_evictions", evicts[0])
out("stress_torn_batches", torn)
out("stress_retries", st["retries"])
out("stress_crc_errors", st["crc_errors"])
out("hot_hits", st["hot_hits"])
out("hot_bytes", st["hot_bytes"])
