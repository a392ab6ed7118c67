"""A 4-worker PyTorch DataLoader over a colabfs folder, run by test_crash.py
in its own process while the mount's server is being killed.

usage: crash_loader.py FOLDER SOURCE_FOLDER STOP_FILE OUT_JSON

Runs shuffled epochs over every file of FOLDER until STOP_FILE exists (at
least one epoch); every sample's bytes are compared with the file of the
same name in SOURCE_FOLDER.  Writes {"epochs", "samples", "errors",
"max_batch_s", "batches": [[start, end], ...]} (times: time.monotonic(),
comparable with the test process's) to OUT_JSON.  Exits 0 even when samples
were wrong: the test reads the errors."""

import json
import os
import sys
import time
import zlib

import torch
from torch.utils.data import DataLoader, Dataset


class Files(Dataset):
    def __init__(self, folder, names):
        self.folder, self.names = folder, names

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        p = os.path.join(self.folder, self.names[i])
        try:
            with open(p, "rb") as f:
                data = f.read()
            return i, zlib.crc32(data), len(data), ""
        except OSError as e:
            return i, 0, -1, "%s: %s" % (self.names[i], e)


def main():
    folder, source, stop, out = sys.argv[1:5]
    names = sorted(os.listdir(source))
    want = {}
    for i, n in enumerate(names):
        with open(os.path.join(source, n), "rb") as f:
            d = f.read()
        want[i] = (zlib.crc32(d), len(d))
    loader = DataLoader(Files(folder, names), batch_size=16, shuffle=True, num_workers=4,
                        timeout=120, generator=torch.Generator().manual_seed(7))
    res = {"epochs": 0, "samples": 0, "errors": [], "batches": []}
    while res["epochs"] == 0 or not os.path.exists(stop):
        t0 = time.monotonic()
        for idx, crc, size, err in loader:
            t1 = time.monotonic()
            res["batches"].append([t0, t1])
            for i, c, s, e in zip(idx.tolist(), crc.tolist(), size.tolist(), err):
                res["samples"] += 1
                if e:
                    res["errors"].append(e)
                elif (c & 0xffffffff, s) != want[i]:
                    res["errors"].append("%s: wrong bytes (%d bytes, crc %08x)" % (names[i], s, c))
            t0 = time.monotonic()
        res["epochs"] += 1
    res["max_batch_s"] = max((b - a for a, b in res["batches"]), default=0)
    with open(out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
