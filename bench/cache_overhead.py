#!/usr/bin/python3
"""What the block cache costs in memory for the bytes it holds (issue 16, part 3), before and after.

    /usr/bin/python3 bench/cache_overhead.py --bin-ref PATH [--bin PATH] [--quick] [--reps 3]
                                             [--json FILE]

Writes three file-size mixes under a fresh folder in /dev/shm (tmpfs; also the local reference copy)
and serves them with tests/emulator/drive_emulator.py --tree:
  small   1,000 files of 20-250 KB, uniform (--quick: 300)
  mixed   200 files log-uniform 1 KB..64 MB, at most 1 GiB in all (--quick: 100, 256 MiB)
  large   3 files of 100-300 MB, no multiple of the block size (--quick: 2 of 100-150 MB)
For each binary (--bin-ref, e.g. built from the base commit, then --bin, default ./colabfs) and each
mix it mounts colabfs with a fresh --cache-dir on tmpfs and --no-dataset-readahead, reads every file
of the mix once and compares it with the source, waits until every block is cached, and reports:
the data bytes, cache_used_bytes (colabfs stats --json: the slot bytes the budget counts), what the
arena files occupy on tmpfs (st_blocks, i.e. RAM), index.mdb and heat.dat, and the ratios to the data.
Read path, on the small mix, both binaries mounted at once and measured in turns: warm sequential
reads of every file (page cache dropped first, so the daemon serves them from its cache; passes
over the set until 256 MiB were read) and 4 KiB
random reads with O_DIRECT (each one a FUSE read served from the cache), next to the same reads of
the tmpfs source (buffered: tmpfs has no O_DIRECT), and the daemon's CPU time for them (utime +
stime of the supervisor and the server: less sensitive to a busy machine than the rates); the median of
--reps (odd reps: the reference binary first, even ones: the other).  Everything it started is unmounted and stopped, and everything it
wrote deleted, at exit, on error and Ctrl-C included.  Needs root and /dev/fuse.
"""

import argparse
import json
import math
import mmap
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import open_bench  # noqa: E402  (emulator, unmount and cleanup)
import run  # noqa: E402
from run import (KiB, MiB, GiB, compare_files, drop_page_cache, is_mounted, proc_cpu,  # noqa: E402
                 seq_read, wait_until)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KB, MB = 1000, 1000 * 1000
BLOCK = MiB  # the default block size, which the mounts use
SEED = 16003

FULL = dict(small=1000, mixed=200, mixed_cap=GiB, large=3, large_min=100 * MB, large_max=300 * MB)
QUICK = dict(small=300, mixed=100, mixed_cap=256 * MiB, large=2, large_min=100 * MB,
             large_max=150 * MB)


def write_file(path, size, rnd):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, 8 * MiB)
            f.write(rnd.randbytes(n))
            left -= n


def make_mixes(src, cfg):
    """Writes the three mixes; returns {mix: [relative paths]}."""
    rnd = random.Random(SEED)
    sizes = {"small": [rnd.randint(20 * KB, 250 * KB) for _ in range(cfg["small"])], "mixed": []}
    total = 0
    lo, hi = math.log(KB), math.log(64 * MB)
    for _ in range(cfg["mixed"]):
        size = int(math.exp(rnd.uniform(lo, hi)))
        if total + size > cfg["mixed_cap"]:  # keep the total bounded: draw below what is left
            size = int(math.exp(rnd.uniform(lo, math.log(max(KB + 1, cfg["mixed_cap"] - total)))))
        sizes["mixed"].append(size)
        total += size
    sizes["large"] = []
    while len(sizes["large"]) < cfg["large"]:
        size = rnd.randint(cfg["large_min"], cfg["large_max"])
        if size % BLOCK:
            sizes["large"].append(size)
    rel = {}
    for mix, ss in sizes.items():
        rel[mix] = []
        for i, size in enumerate(ss):
            p = os.path.join(mix, "f%04d.bin" % i)
            write_file(os.path.join(src, p), size, rnd)
            rel[mix].append(p)
    return rel


def file_blocks(path):
    """st_blocks bytes of path (0 when absent)."""
    try:
        return os.stat(path).st_blocks * 512
    except FileNotFoundError:
        return 0


def cache_du(cache):
    arenas = [n for n in os.listdir(cache) if n.startswith("arena-") and n.endswith(".dat")]
    return (sum(file_blocks(os.path.join(cache, n)) for n in arenas), len(arenas),
            file_blocks(os.path.join(cache, "index.mdb")), file_blocks(os.path.join(cache, "heat.dat")))


def seq_all(paths):
    """Reads every path to EOF with 1 MiB reads; returns (bytes, seconds)."""
    t0 = time.perf_counter()
    n = sum(seq_read(p)[0] for p in paths)
    return n, time.perf_counter() - t0


def daemon_cpu(pids):
    """CPU seconds of the supervisor and the server (colabfs serve, its child)."""
    return sum(proc_cpu(p) or 0 for p in pids)


def rand_4k(paths, sizes, count, direct, seed):
    """count 4 KiB preads at random aligned offsets of random files; returns reads/s."""
    rnd = random.Random(seed)
    picks = []
    for _ in range(count):
        i = rnd.randrange(len(paths))
        picks.append((i, rnd.randrange(max(1, sizes[i] // 4096)) * 4096))
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    fds = [os.open(p, flags) for p in paths]
    buf = mmap.mmap(-1, 4096)  # page aligned, as O_DIRECT needs
    try:
        t0 = time.perf_counter()
        for i, off in picks:
            if os.preadv(fds[i], [buf], off) <= 0:
                raise RuntimeError("empty 4 KiB read of %s at %d" % (paths[i], off))
        return count / (time.perf_counter() - t0)
    finally:
        for fd in fds:
            os.close(fd)
        buf.close()


class Bench(open_bench.Bench):
    def __init__(self, args):  # noqa: the parent's folders are not wanted
        self.args = args
        self.work = tempfile.mkdtemp(prefix="colabfs-overhead-", dir="/dev/shm")
        self.disk = os.path.join(self.work, "unused")
        self.src = os.path.join(self.work, "src")
        self.emu = None
        self.mounts = []
        self.rows = []
        self.reads = []

    def mount_bin(self, binary, name):
        mnt = os.path.join(self.work, "mnt-" + name)
        cache = os.path.join(self.work, "cache-" + name)
        log = os.path.join(self.work, "colabfs-%s.log" % name)
        os.makedirs(mnt, exist_ok=True)
        env = dict(os.environ, COLABFS_ACCESS_TOKEN=open_bench.TOKEN)
        argv = [binary, "mount", "--api-url=" + self.url, "--cache-dir=" + cache,
                "--log-file=" + log, "--no-dataset-readahead", mnt]
        self.mounts.append((mnt, cache))
        r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        if r.returncode != 0 or not is_mounted(mnt):
            raise RuntimeError("mount failed: %s" % r.stderr.decode(errors="replace"))
        return mnt, cache

    def stats(self, binary, mnt):
        r = subprocess.run([binary, "stats", mnt, "--json"], capture_output=True, timeout=60)
        return json.loads(r.stdout)

    def measure(self, label, binary, mix, rel):
        mnt, cache = self.mount_bin(binary, "%s-%s" % (label, mix))
        try:
            data = 0
            for p in rel:
                data += compare_files(os.path.join(mnt, p), os.path.join(self.src, p))
            blocks = sum(-(-os.path.getsize(os.path.join(self.src, p)) // BLOCK) for p in rel)
            st = wait_until(lambda: (lambda s: s if s.get("cache_blocks") == blocks else None)(
                self.stats(binary, mnt)), 60, "%d blocks cached" % blocks)
            arenas, narenas, index, heat = cache_du(cache)
            self.rows.append(dict(bin=label, mix=mix, files=len(rel), data=data,
                                  used=st["cache_used_bytes"], arenas=arenas, narenas=narenas,
                                  index=index, heat=heat, budget=st["cache_budget_bytes"]))
        finally:
            self.umount(mnt, cache)

    def read_path(self, rel):
        """Both binaries mount the small mix at once (cold read untimed), then take turns, rep
        after rep, the first of a turn alternating, so that both see the same load."""
        a = self.args
        lpaths = [os.path.join(self.src, p) for p in rel]
        sizes = [os.path.getsize(p) for p in lpaths]
        passes = max(1, (256 * MiB) // sum(sizes))  # enough bytes for the CPU clock's 10 ms ticks
        sides = []
        for label, binary in (("before", a.bin_ref), ("after", a.bin)):
            mnt, cache = self.mount_bin(binary, label + "-read")
            pid = int(os.getxattr(mnt, "user.colabfs.pid").decode().strip("\0 \n"))
            pids = {pid, run.Mount.server_pid(types.SimpleNamespace(pid=pid))}
            sides.append((label, mnt, cache, [os.path.join(mnt, p) for p in rel], pids))
            for p in rel:
                compare_files(os.path.join(mnt, p), os.path.join(self.src, p))
        res = {label: {k: [] for k in ("seq_mnt", "seq_loc", "rand_mnt", "rand_loc", "seq_cpu",
                                       "rand_cpu")} for label, _, _, _, _ in sides}
        try:
            for rep in range(a.reps):  # who goes first alternates: the second was slower
                for label, mnt, cache, mpaths, pids in (sides if rep % 2 == 0 else sides[::-1]):
                    r = res[label]
                    n = secs = cpu = 0
                    for _ in range(passes):
                        for p in mpaths:
                            drop_page_cache(p)
                        c0 = daemon_cpu(pids)
                        got, t = seq_all(mpaths)
                        cpu += daemon_cpu(pids) - c0
                        n, secs = n + got, secs + t
                    r["seq_mnt"].append(n / secs)
                    r["seq_cpu"].append(cpu / (n / GiB))
                    n, secs = seq_all(lpaths * passes)
                    r["seq_loc"].append(n / secs)
                    c0 = daemon_cpu(pids)
                    r["rand_mnt"].append(rand_4k(mpaths, sizes, a.rand_reads, True, 100 + rep))
                    r["rand_cpu"].append((daemon_cpu(pids) - c0) / a.rand_reads * 1e6)
                    r["rand_loc"].append(rand_4k(lpaths, sizes, a.rand_reads, False, 100 + rep))
        finally:
            for label, mnt, cache, _, _ in sides:
                self.umount(mnt, cache)
        for label, _, _, _, _ in sides:
            self.reads.append(dict(bin=label, **{k: statistics.median(v)
                                                 for k, v in res[label].items()}))

    def run(self):
        a = self.args
        t0 = time.monotonic()
        rel = make_mixes(self.src, QUICK if a.quick else FULL)
        print("data written in %.0f s" % (time.monotonic() - t0), file=sys.stderr)
        self.start_emulator()
        for label, binary in (("before", a.bin_ref), ("after", a.bin)):
            for mix in ("small", "mixed", "large"):
                t0 = time.monotonic()
                self.measure(label, binary, mix, rel[mix])
                print("%s %s: %.0f s" % (label, mix, time.monotonic() - t0), file=sys.stderr)
        self.read_path(rel["small"])


def print_tables(rows, reads):
    print("cache overhead: data read once through a fresh mount (1 MiB blocks, tmpfs cache)")
    hdr = ("mix", "files", "data MiB", "binary", "used MiB", "used/data", "arenas du", "du/data",
           "arenas", "index KiB", "heat KiB")
    print("%-6s %5s %9s %-6s %9s %9s %9s %8s %6s %9s %9s" % hdr)
    order = ("small", "mixed", "large")
    for r in sorted(rows, key=lambda r: (order.index(r["mix"]), r["bin"] != "before")):
        print("%-6s %5d %9.1f %-6s %9.1f %9.3f %9.1f %8.3f %6d %9d %9d" % (
            r["mix"], r["files"], r["data"] / MiB, r["bin"], r["used"] / MiB, r["used"] / r["data"],
            r["arenas"] / MiB, r["arenas"] / r["data"], r["narenas"], r["index"] // KiB,
            r["heat"] // KiB))
    if reads:
        print()
        print("read path, small mix: warm sequential (page cache dropped: served by the daemon) and "
              "4 KiB random reads (mount: O_DIRECT), median")
        print("%-6s %9s %10s %6s %11s %8s %12s %6s %12s" % (
            "binary", "seq MB/s", "tmpfs MB/s", "ratio", "daemon s/GiB", "rand/s", "tmpfs rand/s",
            "ratio", "daemon us/rd"))
        for r in reads:
            print("%-6s %9.0f %10.0f %6.2f %11.2f %8.0f %12.0f %6.3f %12.1f" % (
                r["bin"], r["seq_mnt"] / MB, r["seq_loc"] / MB, r["seq_mnt"] / r["seq_loc"],
                r["seq_cpu"], r["rand_mnt"], r["rand_loc"], r["rand_mnt"] / r["rand_loc"],
                r["rand_cpu"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.environ.get("COLABFS_BIN") or os.path.join(REPO, "colabfs"))
    ap.add_argument("--bin-ref", required=True, help="the reference binary (e.g. the base commit's)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rand-reads", type=int, default=20000)
    ap.add_argument("--json")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    b = Bench(args)
    open_bench.run_and_clean(b)
    print_tables(b.rows, b.reads)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": b.rows, "reads": b.reads}, f, indent=1)


if __name__ == "__main__":
    main()
