"""PyTorch helpers: the only module of the package that imports torch.

    from torch.utils.data import DataLoader, RandomSampler
    import colabfs.torch

    ds = torchvision.datasets.ImageFolder("/content/drive/MyDrive/train")
    paths = [p for p, _ in ds.samples]
    sampler = colabfs.torch.PrefetchingSampler(RandomSampler(ds), paths)
    loader = DataLoader(ds, sampler=sampler, batch_size=64, num_workers=2)

PrefetchingSampler wraps any sampler: when an epoch starts (the DataLoader
iterates the sampler, in the main process) it draws that epoch's order
from the wrapped sampler, hands the files in that order to the mount
(colabfs.prefetch: the mount downloads them in that order ahead of the
workers, at Drive's quota, within its cache budget), and yields the same
indices.  A sampler that yields lists of indices (a batch sampler) is
handed over flattened.  A hint the mount cannot take (paths outside a
colabfs mount, an older colabfs) is warned about once and the epoch goes on
unhinted: a hint only ever changes speed."""

import warnings

import torch.utils.data

from .drive import prefetch as _prefetch
from ._errors import Error

__all__ = ["PrefetchingSampler"]


class PrefetchingSampler(torch.utils.data.Sampler):
    """sampler: any sampler (or iterable of indices) over a dataset whose
    sample i is the file paths[i].  prefetch: what hands the order over
    (colabfs.prefetch; a stand-in for tests)."""

    def __init__(self, sampler, paths, prefetch=None):
        self.sampler = sampler
        self.paths = list(paths)
        self.prefetch = prefetch or _prefetch
        self.last = None      # what the last epoch's hint came to (prefetch's answer)
        self._warned = False

    def __len__(self):
        return len(self.sampler)

    def _flat(self, order):
        for x in order:
            if isinstance(x, (list, tuple)):
                yield from x
            elif hasattr(x, "tolist") and not isinstance(x, int):
                v = x.tolist()
                yield from (v if isinstance(v, list) else [v])
            else:
                yield x

    def __iter__(self):
        order = list(iter(self.sampler))  # the epoch's order, drawn once
        try:
            self.last = self.prefetch([self.paths[int(i)] for i in self._flat(order)])
        except (Error, OSError) as e:
            self.last = None
            if not self._warned:
                self._warned = True
                warnings.warn("colabfs: the epoch's order was not handed to the mount (%s); "
                              "reading without it" % e, RuntimeWarning, stacklevel=2)
        return iter(order)
