#!/usr/bin/python3
"""The memory-safe cache (issue 16): how fast a cache in RAM gives memory back under pressure,
and what the memory watcher costs the read path.

    /usr/bin/python3 bench/mem_bench.py [--give-mib 1024] [--reps 5] [--rand-seconds 3]
                                        [--idle-seconds 20] [--keep]

Rows:
  P1  time from "pressure" to 1 GiB of cache given back: a mount whose cache (on /dev/shm) holds
      --give-mib + 128 MiB is told (the COLABFS_MEMINFO test hook: a file in /proc/meminfo format)
      that MemAvailable is --give-mib below the floor plus margin (floor 2 x --give-mib, so that is
      under the floor: pressure); measured until `colabfs stats`
      shows the bytes gone, and the kernel's own count of tmpfs memory given back (the drop of
      Shmem in /proc/meminfo; other processes move it too) is reported next to it.  Reference, same run: unlinking a tmpfs file of the same size (the kernel's own
      cost of freeing that much tmpfs).
  R1  warm random 4 KiB O_DIRECT reads (each one reaches the daemon) over 256 MiB of cached files,
      the watcher on (the real /proc/meminfo, no pressure) against the watcher off
      (--min-free-memory=0), runs alternating; reference: the same reads of the local tmpfs copy.
  R2  warm sequential reads of the same files, on against off.
  W1  the server's CPU time (all threads, /proc/PID/task/*/schedstat) over --idle-seconds of an idle
      mount, the watcher on against off: the watcher's own cost, which the noisy read rows cannot
      resolve.

The data is generated under /dev/shm/colabfs-membench-*; the Drive emulator serves it; every mount
and the emulator are stopped and the folder deleted at exit, even on error or Ctrl-C (--keep keeps
the folder).  Needs root, /dev/fuse and about 3 x --give-mib of free /dev/shm.
"""

import argparse
import json
import mmap
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402  (the suite's Emulator, Mount and clean-up)

MiB = R.MiB
FILE_SIZE = 16 * MiB


def meminfo_text(total, avail):
    return ("MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\n"
            % (total // 1024, avail // 1024, avail // 1024))


def shmem():
    """The kernel's tmpfs/shared memory in use (Shmem of /proc/meminfo), bytes."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) * 1024
    return 0


def write_atomic(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def make_files(src, n, size, seed):
    rnd = random.Random(seed)
    items = []
    for i in range(n):
        p = os.path.join(src, "f%03d.bin" % i)
        with open(p, "wb") as f:
            f.write(rnd.randbytes(size))
        items.append({"id": "1MemBench%023d" % i, "name": "f%03d.bin" % i, "parent": "root",
                      "path": p})
    return items


def read_all(paths):
    n = 0
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while True:
                b = f.read(MiB)
                if not b:
                    break
                n += len(b)
    return n


def drop(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def rand_reads(paths, seconds, seed):
    """4 KiB preads at random offsets of random files for ``seconds``: reads per second.  O_DIRECT
    where the file system takes it (the mount: every read reaches the daemon, none is a page-cache
    hit), buffered where it does not (tmpfs, the local reference)."""
    rnd = random.Random(seed)
    buf = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT wants
    try:
        fds = [os.open(p, os.O_RDONLY | os.O_DIRECT) for p in paths]
    except OSError:
        fds = [os.open(p, os.O_RDONLY) for p in paths]
    size = os.fstat(fds[0]).st_size
    n = 0
    end = time.perf_counter() + seconds
    try:
        while time.perf_counter() < end:
            for _ in range(64):
                os.preadv(fds[rnd.randrange(len(fds))], [buf], rnd.randrange(size // 4096) * 4096)
            n += 64
    finally:
        for fd in fds:
            os.close(fd)
        buf.close()
    return n / seconds


def cpu_ns(pid):
    """Nanoseconds on CPU of every thread of pid (/proc/PID/task/*/schedstat)."""
    total = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def idle_cpu_ms(m, seconds):
    """The server's CPU milliseconds over ``seconds`` of an idle mount."""
    pid = m.server_pid()
    t0 = cpu_ns(pid)
    time.sleep(seconds)
    return (cpu_ns(pid) - t0) / 1e6


def seq_rate(paths):
    drop(paths)
    t = time.perf_counter()
    n = read_all(paths)
    return n / (time.perf_counter() - t)


def pressure_row(b, a, src_items, rows):
    give = a.give_mib * MiB
    floor = 2 * give           # --min-free-memory: the shortage (floor + floor/4 - avail) is give
    total = 16 * 1024 * MiB
    mi = os.path.join(b.work, "meminfo")
    write_atomic(mi, meminfo_text(total, 8 * 1024 * MiB))
    os.environ["COLABFS_MEMINFO"] = mi           # the mount inherits it
    os.environ["COLABFS_PSI"] = os.path.join(b.work, "no-psi")
    try:
        m = b.new_mount("pressure", cache_dir=os.path.join(b.work, "cache-pressure"),
                        opts=["--cache-size=%dM" % (2 * a.give_mib + 512),
                              "--min-free-memory=%dM" % (floor // MiB)])
    finally:
        del os.environ["COLABFS_MEMINFO"]
        del os.environ["COLABFS_PSI"]
    paths = [m.path(it["name"]) for it in src_items]
    read_all(paths)
    used0 = m.stats()["cache_used_bytes"]
    if used0 < give:
        raise RuntimeError("the cache holds %d MiB, less than --give-mib" % (used0 // MiB))
    shmem0 = shmem()
    t0 = time.monotonic()
    write_atomic(mi, meminfo_text(total, floor + floor // 4 - give))
    st = R.wait_until(lambda: (lambda s: s if s.get("cache_used_bytes", used0) <= used0 - give
                               else None)(m.stats()), 60, "the cache giving memory back")
    took = time.monotonic() - t0
    freed_real = shmem0 - shmem()
    write_atomic(mi, meminfo_text(total, 8 * 1024 * MiB))
    # reference: the kernel freeing the same amount of tmpfs (a file unlinked)
    ref = os.path.join(b.work, "ref.bin")
    with open(ref, "wb") as f:
        chunk = os.urandom(MiB)
        for _ in range(a.give_mib):
            f.write(chunk)
    t1 = time.monotonic()
    os.unlink(ref)
    ref_took = time.monotonic() - t1
    rows.append(("P1", "give back %d MiB under pressure (s)" % a.give_mib, took, ref_took,
                 "tmpfs unlink of %d MiB" % a.give_mib,
                 "stats: %d MiB evicted (%d blocks); kernel Shmem -%d MiB; "
                 "effective budget %d MiB" % (
                     st["memory_pressure_evicted_bytes_total"] // MiB,
                     st["memory_pressure_evicted_blocks_total"], freed_real // MiB,
                     st["cache_effective_budget_bytes"] // MiB)))
    m.umount()


def read_rows(b, a, src_items, rows):
    files = src_items[:256 * MiB // FILE_SIZE]
    if os.environ.get("MEMBENCH_SWAP"):
        off = b.new_mount("watch-off", opts=["--min-free-memory=0"])
        on = b.new_mount("watch-on")
    else:
        on = b.new_mount("watch-on")
        off = b.new_mount("watch-off", opts=["--min-free-memory=0"])
    if on.stats().get("memory_watch") != 1 or off.stats().get("memory_watch") != 0:
        raise RuntimeError("the watcher is not on/off as asked")
    sides = {"on": [on.path(it["name"]) for it in files],
             "off": [off.path(it["name"]) for it in files],
             "local": [it["path"] for it in files]}
    for p in sides.values():
        read_all(p)  # cold, untimed
    rr = {k: [] for k in sides}
    sr = {k: [] for k in sides}
    for rep in range(a.reps + 1):  # rep 0 warms up (first-hit crc checks, index pages): not counted
        for k in ("on", "off", "local") if rep % 2 == 0 else ("off", "on", "local"):
            drop(sides[k])
            r, q = rand_reads(sides[k], a.rand_seconds, rep), seq_rate(sides[k])
            if rep:
                rr[k].append(r)
                sr[k].append(q)
    for key, name, d, unit in (("R1", "warm random 4 KiB reads/s", rr, 1),
                               ("R2", "warm sequential MiB/s", sr, MiB)):
        on_v, off_v, loc = (statistics.median(d[k]) / unit for k in ("on", "off", "local"))
        spread = (max(d["off"]) - min(d["off"])) / statistics.median(d["off"])
        rows.append((key, name + ", watcher on vs off", on_v, off_v, "watcher off",
                     "local tmpfs %.0f; on %.0f..%.0f, off %.0f..%.0f (run-to-run spread of off: "
                     "%.0f%%)" % (loc, min(d["on"]) / unit, max(d["on"]) / unit,
                                  min(d["off"]) / unit, max(d["off"]) / unit, 100 * spread)))
    idle = {k: idle_cpu_ms(m, a.idle_seconds) for k, m in (("on", on), ("off", off))}
    rows.append(("W1", "idle server CPU ms per %d s, watcher on vs off" % a.idle_seconds,
                 idle["on"], idle["off"], "watcher off",
                 "the watcher's own cost: %.3f%% of one CPU" % (
                     100 * (idle["on"] - idle["off"]) / (1000 * a.idle_seconds))))
    for m in (on, off):
        m.umount()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--give-mib", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rand-seconds", type=float, default=3.0)
    ap.add_argument("--idle-seconds", type=int, default=20)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    b = R.Side(a.keep)
    rows = []

    def body():
        src = os.path.join(b.work, "src")
        os.makedirs(src)
        n = (a.give_mib + 128) * MiB // FILE_SIZE
        items = make_files(src, n, FILE_SIZE, 1616)
        spec = os.path.join(b.work, "spec.json")
        with open(spec, "w") as f:
            json.dump({"root": {"id": R.ROOT_ID, "name": "My Drive"}, "items": items}, f)
        b.emu = R.Emulator(b, spec, "emu", 0, 0, 0)
        pressure_row(b, a, items, rows)
        read_rows(b, a, items, rows)
    rc = b.run_in(body, "colabfs-membench-", "/dev/shm")
    print("%-4s %-52s %12s %12s  %-26s %s" % ("row", "workload", "measured", "reference",
                                             "reference is", "notes"))
    for key, name, v, ref, ref_name, note in rows:
        print("%-4s %-52s %12.3f %12.3f  %-26s %s" % (key, name, v, ref, ref_name, note))
    if a.json:
        with open(a.json, "w") as f:
            json.dump([dict(zip(("key", "workload", "measured", "reference", "ref_name", "note"), r))
                       for r in rows], f, indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
