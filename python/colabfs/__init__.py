"""colabfs from Python: mount Google Drive as google.colab.drive does, watch
and steer the mount, and load training data straight out of its block cache.

    import colabfs
    colabfs.mount("/content/data", cache_dir="/content/.colabfs-cache")
    colabfs.warm("/content/data/train")       # optional: fetch ahead, one progress bar
    colabfs.prefetch(paths)                   # or: the order files will be read in
    ...                                       # train: read and write under /content/data
    colabfs.stats()                           # the mount's counters, as numbers
    colabfs.plot()                            # the last 5 minutes in four panels
    colabfs.flush_and_unmount()               # every byte written is in Drive; unmounted

Failures raise colabfs.Error (``.fix``: what to do, ``.path``: the file).
The mount functions run the colabfs command ($COLABFS_BIN, else on PATH,
else where make install put it): drive.py, _cli.py, _progress.py, _plot.py.

The GPU loader (_gpu.py, ctypes, no build-time torch or numpy):

    loader = colabfs.Loader(paths, batch_size=64, depth=2)
    for batch in loader:
        x = torch.as_tensor(batch.normalize(224, 224, 3, mean, std), device="cuda")

``Stage.stats()`` / ``colabfs.stage_stats(mountpoint)`` are the loader's own
counters (hot_hits, bytes_cached, ...).

PyTorch (colabfs.torch, the only module that imports torch): each epoch's
order handed to the mount as the epoch starts,

    sampler = colabfs.torch.PrefetchingSampler(RandomSampler(ds), paths)
    loader = DataLoader(ds, sampler=sampler, num_workers=2)
"""

from ._errors import Error, MountpointError
from ._gpu import (DTYPES, TO_EOF, Batch, DeviceArray, HostArray, Loader, Stage, gpu_available,
                   stage_stats)
from ._plot import plot
from .drive import flush_and_unmount, mount, prefetch, stats, sync, warm

__all__ = ["mount", "flush_and_unmount", "sync", "warm", "prefetch", "stats", "plot", "Error",
           "MountpointError", "Loader", "Batch", "Stage", "HostArray", "DeviceArray",
           "gpu_available", "stage_stats", "DTYPES", "TO_EOF"]
