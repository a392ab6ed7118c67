#!/usr/bin/python3
"""One or more PyTorch DataLoader epochs over the files of a folder (bench workloads 7 and 8).

    /usr/bin/python3 bench/dl_epoch.py DIR [--epochs N] [--workers 4] [--batch 32]
                                           [--seed S] [--drop-before K ...]
                                           [--tree] [--classes PREFIX] [--sorted]
                                           [--small-samples] [--hint]

The Dataset reads each file whole (open, read to EOF, close) and returns it as a uint8 tensor with
its length and index; the DataLoader shuffles with a fixed generator (seed + epoch), so a mount and a
local copy see the same order. Every file's first 8 bytes must hold its index (little endian), which
the bench writes when it makes the data: each batch is checked against the indices it was sampled for.
``--tree``: DIR is an ImageFolder tree (class folders, files in each; the samples are the files of
the sorted classes, each class's files sorted), not a flat folder; ``--classes PREFIX``: only the
folders of DIR whose names start with PREFIX are classes (the others are someone's other folders,
as at the top of My Drive). ``--hint``: the sampler is colabfs.torch.PrefetchingSampler around the
same shuffled (or sorted) sampler, so each epoch's order goes to the mount as it starts (the colabfs
package on PYTHONPATH, the binary in $COLABFS_BIN). ``--sorted``: no shuffling
(``shuffle=False``, listing order). ``--small-samples``: a sample is the file's first 8 bytes, not the
whole file (files of different sizes; the collation cost stays small), still read whole.
``--drop-before K`` drops the kernel page cache of every file (posix_fadvise DONTNEED) before epoch K
(counted from 1), so that epoch is served by the file system itself. Prints one JSON object:
{"list_s": ..., "files": n, "epochs": [{"epoch": k, "seconds": t, "samples": n, "bytes": b}, ...]}.
"""

import argparse
import json
import os
import sys
import time


def read_whole(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        buf = bytearray(size)
        view = memoryview(buf)
        got = 0
        while got < size:
            n = os.readv(fd, [view[got:]])
            if n == 0:
                break
            got += n
        if got != size:
            raise OSError("%s: short file: %d of %d bytes" % (path, got, size))
        return buf
    finally:
        os.close(fd)


def drop_page_cache(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--drop-before", type=int, action="append", default=[])
    ap.add_argument("--tree", action="store_true", help="DIR holds class folders (ImageFolder)")
    ap.add_argument("--sorted", action="store_true", help="shuffle=False")
    ap.add_argument("--small-samples", action="store_true", help="samples are the first 8 bytes")
    ap.add_argument("--classes", default="", help="with --tree: class folders' name prefix")
    ap.add_argument("--hint", action="store_true", help="colabfs.torch.PrefetchingSampler")
    args = ap.parse_args()

    import torch
    from torch.utils.data import DataLoader, Dataset, RandomSampler, SequentialSampler

    torch.set_num_threads(1)

    class FileDataset(Dataset):
        def __init__(self, paths, small):
            self.paths, self.small = paths, small

        def __len__(self):
            return len(self.paths)

        def __getitem__(self, i):
            data = read_whole(self.paths[i])
            sample = torch.frombuffer(data[:8] if self.small else data, dtype=torch.uint8)
            return sample, len(data), i

    t = time.monotonic()
    if args.tree:
        classes = sorted(e.name for e in os.scandir(args.root)
                         if e.is_dir() and e.name.startswith(args.classes))
        paths = [os.path.join(args.root, c, n) for c in classes
                 for n in sorted(os.listdir(os.path.join(args.root, c)))]
    else:
        paths = [os.path.join(args.root, n) for n in sorted(os.listdir(args.root))]
    list_s = time.monotonic() - t
    ds = FileDataset(paths, args.small_samples)
    weights = torch.tensor([256 ** k for k in range(8)], dtype=torch.int64)
    out = {"list_s": list_s, "files": len(paths), "epochs": []}
    for epoch in range(1, args.epochs + 1):
        if epoch in args.drop_before:
            drop_page_cache(paths)
        gen = torch.Generator()
        gen.manual_seed(args.seed + epoch)
        # what shuffle=True/False builds, so a hinted epoch reads the same order
        sampler = SequentialSampler(ds) if args.sorted else RandomSampler(ds, generator=gen)
        if args.hint:
            import colabfs.torch
            sampler = colabfs.torch.PrefetchingSampler(sampler, paths)
        loader = DataLoader(ds, batch_size=args.batch, sampler=sampler, num_workers=args.workers)
        samples = nbytes = 0
        t = time.monotonic()
        for x, length, idx in loader:
            got = (x[:, :8].to(torch.int64) * weights).sum(dim=1)
            if not torch.equal(got, idx.to(torch.int64)):
                sys.exit("epoch %d: a sample does not carry the index it was read for" % epoch)
            samples += x.shape[0]
            nbytes += int(length.sum())
        seconds = time.monotonic() - t
        if samples != len(paths):
            sys.exit("epoch %d: %d samples, expected %d" % (epoch, samples, len(paths)))
        e = {"epoch": epoch, "seconds": seconds, "samples": samples, "bytes": nbytes}
        if args.hint:
            e["hint"] = sampler.last
        out["epochs"].append(e)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
