#!/usr/bin/env python3
"""Block cache benchmark: reads through a colabfs mount next to the same reads
of a plain tmpfs file, in the same run.

    /usr/bin/python3 bench/cache_bench.py [--size-mib 256] [--seconds 5]

It starts the Drive emulator (tests/emulator) with one random file, mounts it
with a fresh cache folder on tmpfs, and measures:
  1. cold sequential read (every block downloaded from the emulator)
  2. cached sequential read served by the daemon (kernel page cache dropped)
  3. sequential read from the kernel page cache (second read, nothing dropped)
  4. 4 KiB random reads with O_DIRECT (each one served by the daemon)
each next to its reference: the emulator's own line rate for 1 (parallel range
GETs straight to it), and reading the same bytes from a tmpfs file for 2-4.
Prints a table; nothing is asserted.
"""
import argparse
import json
import mmap
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("COLABFS_BIN", os.path.join(TOP, "colabfs"))
EMU = os.path.join(TOP, "tests", "emulator", "drive_emulator.py")
TOKEN = "bench-token"
FID = "1BenchFile000000000000000000000000"


def wait_for(cond, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    raise SystemExit("timed out waiting for " + what)


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def seq_read(path, bs=1 << 20):
    t = time.monotonic()
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(bs)
            if not b:
                break
            n += len(b)
    return n / (time.monotonic() - t)


def rand_reads(path, size, seconds, seed=1):
    """O_DIRECT 4 KiB reads: every one reaches the file system (through FUSE,
    the daemon), none is served by the page cache."""
    rnd = random.Random(seed)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 4096)
    n = 0
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < seconds:
            for _ in range(256):
                os.preadv(fd, [buf], rnd.randrange(0, size // 4096) * 4096)
                n += 1
    finally:
        os.close(fd)
    return n / (time.monotonic() - t0)


def line_rate(port, size, conns=8, chunk=8 << 20):
    """Parallel range GETs straight to the emulator: its aggregate rate."""
    offs = list(range(0, size, chunk))
    lock = threading.Lock()
    total = [0]

    def worker():
        while True:
            with lock:
                if not offs:
                    return
                off = offs.pop()
            req = urllib.request.Request(
                "http://127.0.0.1:%d/drive/v3/files/%s?alt=media" % (port, FID),
                headers={"Authorization": "Bearer " + TOKEN,
                         "Range": "bytes=%d-%d" % (off, min(size, off + chunk) - 1)})
            with urllib.request.urlopen(req) as r:
                got = len(r.read())
            with lock:
                total[0] += got

    t = time.monotonic()
    ths = [threading.Thread(target=worker) for _ in range(conns)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    return total[0] / (time.monotonic() - t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=5)
    args = ap.parse_args()
    size = args.size_mib << 20
    work = tempfile.mkdtemp(prefix="colabfs-bench-", dir="/dev/shm")
    emu = mnt = None
    try:
        src = os.path.join(work, "src.bin")
        with open(src, "wb") as f:
            for _ in range(args.size_mib):
                f.write(os.urandom(1 << 20))
        spec = os.path.join(work, "spec.json")
        with open(spec, "w") as f:
            json.dump({"items": [{"id": FID, "name": "big.bin", "parent": "root", "path": src}]}, f)
        port_file = os.path.join(work, "port")
        emu = subprocess.Popen([sys.executable, EMU, "--spec", spec, "--port", "0",
                                "--port-file", port_file, "--access-token", TOKEN],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists(port_file), 60, "the emulator")
        port = int(open(port_file).read())
        mnt = os.path.join(work, "mnt")
        os.mkdir(mnt)
        env = dict(os.environ, COLABFS_ACCESS_TOKEN=TOKEN)
        subprocess.run([BIN, "mount", "--api-url=http://127.0.0.1:%d" % port,
                        "--cache-dir=" + os.path.join(work, "cache"), mnt], env=env, check=True,
                       stderr=subprocess.DEVNULL)
        path = os.path.join(mnt, "big.bin")
        rows = []
        ref = line_rate(port, size)
        cold = seq_read(path)
        rows.append(("cold sequential read", cold, "emulator line rate (8 x range GET)", ref))
        drop_cache(path)
        drop_cache(src)
        seq_read(src)  # src in page cache = tmpfs speed
        tmpfs = seq_read(src)
        drop_cache(path)
        warm = seq_read(path)
        rows.append(("cached read, served by the daemon", warm, "tmpfs file", tmpfs))
        page = seq_read(path)
        rows.append(("cached read, kernel page cache", page, "tmpfs file", tmpfs))
        drop_cache(path)
        r_mnt = rand_reads(path, size, args.seconds)
        r_tmp = rand_reads(src, size, args.seconds)
        mb = 1 << 20
        print("%-36s %14s   %-36s %14s %7s" % ("workload", "measured", "reference", "reference", "ratio"))
        for name, v, rname, r in rows:
            print("%-36s %10.0f MB/s   %-36s %10.0f MB/s %6.0f%%" % (name, v / mb, rname, r / mb, 100 * v / r))
        print("%-36s %10.0f IOPS   %-36s %10.0f IOPS %6.0f%%" % (
            "4 KiB random O_DIRECT reads, daemon", r_mnt, "tmpfs file", r_tmp, 100 * r_mnt / r_tmp))
        print()
        print(subprocess.run([BIN, "stats", mnt], capture_output=True, text=True).stdout)
    finally:
        if mnt and os.path.ismount(mnt):
            subprocess.run([BIN, "umount", mnt])
        if emu:
            emu.send_signal(signal.SIGTERM)
            emu.wait(10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
