#!/usr/bin/python3
"""What crash recovery costs in steady state (issue 8): the same reads through a mount run with
--recovery=off (one process, the old daemon), resend (supervisor asleep; the kernel resends after a
death) and forward (the server records every request in memory shared with the supervisor and a new
server serves the unanswered ones again), next to the same reads of
a tmpfs file.

    /usr/bin/python3 bench/recovery.py [--size-mib 256] [--seconds 3] [--modes off,resend,forward]

The file is cached before measuring (one full read), so the numbers are FUSE round trips and the
block cache, not the network.  Workloads: 4 KiB random preads with O_DIRECT at queue depth 1
(p50/p99 latency, reads/s), 4 KiB random preads by 4 threads (reads/s), 1 MiB sequential reads
with O_DIRECT and buffered (page cache dropped first).  The supervisor's CPU seconds are reported
per mode.  Everything started is stopped and everything written deleted at exit.
"""

import argparse
import mmap
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("COLABFS_BIN", os.path.join(TOP, "colabfs"))
EMU = os.path.join(TOP, "tests", "emulator", "drive_emulator.py")
TOKEN = "bench-" + os.urandom(6).hex()
MiB = 1 << 20


def wait_until(cond, timeout, what):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise RuntimeError("timed out waiting for " + what)
        time.sleep(0.05)


def is_mounted(p):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == p for line in f)


def cpu_s(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
        return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError):
        return 0.0


def rand_lat(path, size, seconds, seed=3):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 4096)
    rnd = random.Random(seed)
    lat = []
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            off = rnd.randrange(size // 4096) * 4096
            t = time.perf_counter()
            os.preadv(fd, [buf], off)
            lat.append(time.perf_counter() - t)
    finally:
        os.close(fd)
    lat.sort()
    return lat[len(lat) // 2] * 1e6, lat[int(len(lat) * 0.99)] * 1e6, len(lat) / seconds


def rand_mt(path, size, seconds, threads=4):
    counts = [0] * threads

    def run(i):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, 4096)
        rnd = random.Random(i)
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                os.preadv(fd, [buf], rnd.randrange(size // 4096) * 4096)
                counts[i] += 1
        finally:
            os.close(fd)
    ths = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    return sum(counts) / seconds


def seq(path, direct):
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    if not direct:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    buf = mmap.mmap(-1, MiB)
    n = 0
    t = time.monotonic()
    try:
        while True:
            got = os.preadv(fd, [buf], n)
            if not got:
                break
            n += got
    finally:
        os.close(fd)
    return n / (time.monotonic() - t) / 1e6


def measure(path, size, seconds):
    p50, p99, qd1 = rand_lat(path, size, seconds)
    return {"p50": p50, "p99": p99, "qd1": qd1, "mt": rand_mt(path, size, seconds),
            "direct": max(seq(path, True) for _ in range(2)),
            "buffered": max(seq(path, False) for _ in range(2))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--modes", default="off,resend,forward")
    a = ap.parse_args()
    size = a.size_mib * MiB
    work = tempfile.mkdtemp(prefix="colabfs-recovery-", dir="/dev/shm")
    procs, mounts = [], []
    try:
        tree = os.path.join(work, "tree")
        os.makedirs(tree)
        ref = os.path.join(tree, "data.bin")
        with open(ref, "wb") as f:
            chunk = os.urandom(MiB)
            for i in range(a.size_mib):
                f.write(i.to_bytes(4, "little") + chunk[4:])
        portf = os.path.join(work, "port")
        emu = subprocess.Popen([sys.executable, EMU, "--tree", tree, "--port-file", portf,
                                "--access-token", TOKEN], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(emu)
        wait_until(lambda: os.path.exists(portf) and open(portf).read().strip(), 30, "emulator")
        url = "http://127.0.0.1:%s" % open(portf).read().strip()
        rows = [("tmpfs file (reference)", measure(ref, size, a.seconds), None)]
        for mode in a.modes.split(","):
            mnt = os.path.join(work, "mnt-" + mode)
            os.makedirs(mnt)
            env = dict(os.environ, COLABFS_ACCESS_TOKEN=TOKEN)
            r = subprocess.run([BIN, "mount", "--recovery=" + mode, "--api-url=" + url,
                                "--cache-dir=" + os.path.join(work, "cache-" + mode), mnt],
                               env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
            if r.returncode != 0:
                raise RuntimeError("mount (%s) failed: %s" % (mode, r.stderr.decode()))
            mounts.append(mnt)
            pid = int(os.getxattr(mnt, "user.colabfs.pid").decode().strip("\0 \n"))
            path = os.path.join(mnt, "data.bin")
            seq(path, False)  # fill the block cache
            c0 = cpu_s(pid) if mode != "off" else None
            res = measure(path, size, a.seconds)
            sup = (cpu_s(pid) - c0) if c0 is not None else None
            rows.append(("mount, --recovery=" + mode, res, sup))
        print("\n%-26s %9s %9s %10s %12s %12s %12s %10s" % (
            "4 KiB O_DIRECT / 1 MiB seq", "p50 us", "p99 us", "QD1 IOPS", "4 thr IOPS",
            "direct MB/s", "buffered MB/s", "sup CPU s"))
        for name, r, sup in rows:
            print("%-26s %9.1f %9.1f %10.0f %12.0f %12.0f %12.0f %10s" % (
                name, r["p50"], r["p99"], r["qd1"], r["mt"], r["direct"], r["buffered"],
                "-" if sup is None else "%.2f" % sup))
        base = next((r for n, r, _ in rows if n.endswith("=off")), None)
        if base:
            for name, r, _ in rows:
                if "recovery=" in name and not name.endswith("=off"):
                    print("%s vs off: p50 %+.0f%%, QD1 IOPS %+.0f%%, 4-thread IOPS %+.0f%%, "
                          "direct MB/s %+.0f%%, buffered MB/s %+.0f%%" % (
                              name.split("=")[1], 100 * (r["p50"] / base["p50"] - 1),
                              100 * (r["qd1"] / base["qd1"] - 1), 100 * (r["mt"] / base["mt"] - 1),
                              100 * (r["direct"] / base["direct"] - 1),
                              100 * (r["buffered"] / base["buffered"] - 1)))
    finally:
        for mnt in mounts:
            subprocess.run([BIN, "umount", mnt], stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=60)
            if is_mounted(mnt):
                subprocess.run(["umount", "-l", mnt], capture_output=True, timeout=60)
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
