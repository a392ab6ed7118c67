#!/usr/bin/python3
"""Warm-epoch cost of open/read/close on a colabfs mount against a local tmpfs copy (issue 11, point 4).

    /usr/bin/python3 bench/open_bench.py [--files 2000] [--classes 20] [--reps 5]
                                         [--modes resend,forward] [--caches tmpfs,disk] [--json FILE]

Makes an ImageFolder-like tree of --files files of 20-250 KB in --classes class folders under
/dev/shm (the local tmpfs copy, also what the Drive emulator serves with --tree), then for every
cache folder (tmpfs: under /dev/shm; disk: under /var/tmp) and every --recovery mode mounts colabfs,
reads every file once (cold, untimed), and times --reps warm shuffled epochs (open, read to EOF,
close each file; a new order each epoch, the same for the mount and the local copy) with one process
and with two (each reads every other file of the order, like a 2-worker DataLoader), alternating
mount and local runs; then the issue's own workload, a torch DataLoader(shuffle=True, num_workers=2,
batch_size=32, persistent workers) whose Dataset returns each file's bytes (rows "DL2"; skipped without
torch or with --no-dataloader). Prints one table: the median epoch time of each side, their ratio, and the
median cost of one open(), one read() pass and one close() on the mount and locally (microseconds,
from the one-process epochs), and the FUSE requests per file the servers read during the warm
epochs (fuse_requests_total of colabfs stats). Needs root and /dev/fuse; everything it starts is
unmounted and stopped at exit, even on error or Ctrl-C.
"""

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("COLABFS_BIN") or os.path.join(REPO, "colabfs")
EMU = os.path.join(REPO, "tests", "emulator", "drive_emulator.py")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
TOKEN = "open-bench-token"
KB = 1000


def wait_until(cond, timeout, what):
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise RuntimeError("timed out after %d s waiting for %s" % (timeout, what))
        time.sleep(0.05)


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


def make_tree(src, files, classes, seed):
    rnd = random.Random(seed)
    paths = []
    for i in range(files):
        d = os.path.join(src, "class%02d" % (i % classes))
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, "img%05d.bin" % i)
        with open(p, "wb") as f:
            f.write(rnd.randbytes(rnd.randint(20 * KB, 250 * KB)))
        paths.append(os.path.relpath(p, src))
    return sorted(paths)


def read_files(paths, timed):
    """Opens, reads to EOF and closes each path; returns (bytes, opens, reads, closes) where the
    last three are lists of nanoseconds per call when timed, else empty."""
    total = 0
    t_open, t_read, t_close = [], [], []
    clock = time.perf_counter_ns
    for p in paths:
        t0 = clock()
        fd = os.open(p, os.O_RDONLY)
        t1 = clock()
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            total += len(b)
        t2 = clock()
        os.close(fd)
        t3 = clock()
        if timed:
            t_open.append(t1 - t0)
            t_read.append(t2 - t1)
            t_close.append(t3 - t2)
    return total, t_open, t_read, t_close


class Loaders:
    """torch DataLoader(shuffle=True, num_workers=2, persistent_workers=True) over a file list,
    each sample one file read whole (the issue's workload), handed back as bytes: a tensor per
    sample would cost a shared-memory file per sample, ~2 ms, and hide what the reads cost."""

    def __init__(self, paths, seed):
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Files(Dataset):
            def __len__(self):
                return len(paths)

            def __getitem__(self, i):
                with open(paths[i], "rb", buffering=0) as f:
                    return f.read()
        self.loader = DataLoader(Files(), batch_size=32, shuffle=True, num_workers=2,
                                 persistent_workers=True, collate_fn=list,
                                 generator=torch.Generator().manual_seed(seed))

    def epoch(self):
        """Seconds and bytes of one epoch."""
        t0 = time.perf_counter()
        got = sum(len(x) for batch in self.loader for x in batch)
        return time.perf_counter() - t0, got

    def close(self):
        self.loader = None  # the workers end with the loader's iterator


def epoch(paths, procs, timed=True):
    """One epoch over paths by procs processes (forked before the clock starts, released
    together).  Returns (seconds, bytes, per-call ns lists of process 0)."""
    if procs == 1:
        t0 = time.perf_counter()
        r = read_files(paths, timed)
        return time.perf_counter() - t0, r[0], r[1:]
    kids = []
    go_r, go_w = os.pipe()
    ready_r, ready_w = os.pipe()
    for w in range(procs):
        rd, wr = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(rd)
                mine = paths[w::procs]
                # touch what the epoch uses before the clock starts: a forked
                # Python copies pages on first write (reference counts)
                sum(len(p) for p in mine)
                read_files([], timed)
                os.write(ready_w, b"r")
                os.read(go_r, 1)
                r = read_files(mine, timed and w == 0)
                os.write(wr, json.dumps(r).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(wr)
        kids.append((pid, rd))
    os.close(go_r)
    os.close(ready_w)
    for _ in range(procs):
        if os.read(ready_r, 1) != b"r":
            raise RuntimeError("a reader process failed to start")
    os.close(ready_r)
    t0 = time.perf_counter()
    os.write(go_w, b"x" * procs)
    results = []
    for pid, rd in kids:
        chunks = []
        while True:
            b = os.read(rd, 1 << 20)
            if not b:
                break
            chunks.append(b)
        os.close(rd)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise RuntimeError("a reader process failed")
        results.append(json.loads(b"".join(chunks)))
    secs = time.perf_counter() - t0
    os.close(go_w)
    return secs, sum(r[0] for r in results), results[0][1:]


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="colabfs-openbench-", dir="/dev/shm")
        self.disk = tempfile.mkdtemp(prefix="colabfs-openbench-", dir="/var/tmp")
        self.src = os.path.join(self.work, "src")
        self.emu = None
        self.mounts = []
        self.rows = []

    def start_emulator(self):
        port_file = os.path.join(self.work, "emu.port")
        self.emu_log = open(os.path.join(self.work, "emulator.log"), "wb")
        self.emu = subprocess.Popen([PY, EMU, "--tree", self.src, "--port", "0", "--port-file",
                                     port_file, "--access-token", TOKEN], stdin=subprocess.DEVNULL,
                                    stdout=self.emu_log, stderr=subprocess.STDOUT,
                                    start_new_session=True)

        def port():
            if self.emu.poll() is not None:
                raise RuntimeError("the emulator exited")
            try:
                return int(open(port_file).read())
            except (OSError, ValueError):
                return None
        self.url = "http://127.0.0.1:%d" % wait_until(port, 60, "the emulator")

    def mount(self, name, cache_root, mode):
        mnt = os.path.join(self.work, "mnt-" + name)
        cache = os.path.join(cache_root, "cache-" + name)
        log = os.path.join(self.work, "colabfs-%s.log" % name)
        os.makedirs(mnt, exist_ok=True)
        env = dict(os.environ, COLABFS_ACCESS_TOKEN=TOKEN)
        argv = [BIN, "mount", "--api-url=" + self.url, "--cache-dir=" + cache, "--log-file=" + log,
                "--recovery=" + mode] + self.args.mount_opt + [mnt]
        self.mounts.append((mnt, cache))
        r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        if r.returncode != 0 or not is_mounted(mnt):
            raise RuntimeError("mount failed: %s" % r.stderr.decode(errors="replace"))
        return mnt

    def umount(self, mnt, cache):
        pid = None
        try:
            pid = int(os.getxattr(mnt, "user.colabfs.pid").decode().strip("\0 \n"))
        except (OSError, ValueError):
            pass
        if is_mounted(mnt):
            try:
                subprocess.run([BIN, "umount", mnt], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=60)
            except subprocess.TimeoutExpired:
                pass
        if is_mounted(mnt):
            subprocess.run(["umount", "-l", mnt], capture_output=True, timeout=60)
        if pid:
            try:
                wait_until(lambda: not os.path.exists("/proc/%d" % pid), 15, "the daemon to exit")
            except RuntimeError:
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(cache, ignore_errors=True)
        self.mounts = [m for m in self.mounts if m[0] != mnt]

    def requests(self, mnt):
        r = subprocess.run([BIN, "stats", mnt, "--json"], capture_output=True, timeout=60)
        try:
            return json.loads(r.stdout).get("fuse_requests_total")
        except ValueError:
            return None

    def run_config(self, cache_name, cache_root, mode, rel):
        a = self.args
        name = "%s-%s" % (cache_name, mode)
        mnt = self.mount(name, cache_root, mode)
        try:
            mpaths = [os.path.join(mnt, p) for p in rel]
            lpaths = [os.path.join(self.src, p) for p in rel]
            for root, _, _ in os.walk(mnt):  # list the tree (untimed), then the cold read
                pass
            size = epoch(mpaths, 2, timed=False)[1]
            want = sum(os.path.getsize(p) for p in lpaths)
            if size != want:
                raise RuntimeError("cold epoch read %d bytes, want %d" % (size, want))
            res = {p: {"mnt": [], "loc": [], "calls_m": [], "calls_l": []} for p in (1, 2)}
            fwd0 = self.requests(mnt)
            for rep in range(a.reps):
                order = list(range(len(rel)))
                random.Random(1000 + rep).shuffle(order)
                for procs in (1, 2):
                    for side, paths in (("mnt", mpaths), ("loc", lpaths)):
                        secs, got, calls = epoch([paths[i] for i in order], procs)
                        if got != want:
                            raise RuntimeError("%s epoch read %d bytes, want %d" % (side, got, want))
                        res[procs][side].append(secs)
                        if procs == 1:
                            res[procs]["calls_" + side[0]].append(calls)
            fwd1 = self.requests(mnt)
            dl = {"mnt": [], "loc": []}
            if a.dataloader:
                loaders = {side: Loaders(paths, 7) for side, paths in (("mnt", mpaths),
                                                                        ("loc", lpaths))}
                for side in loaders:  # starts the workers, untimed
                    loaders[side].epoch()
                for rep in range(a.reps):
                    for side in ("mnt", "loc"):
                        secs, got = loaders[side].epoch()
                        if got != want:
                            raise RuntimeError("DataLoader read %d bytes, want %d" % (got, want))
                        dl[side].append(secs)
                for side in loaders:
                    loaders[side].close()
        finally:
            self.umount(mnt, os.path.join(cache_root, "cache-" + name))
        per_file = None
        if fwd0 is not None and fwd1 is not None:
            per_file = (fwd1 - fwd0) / (a.reps * 2 * len(rel))
        for procs in (1, 2):
            r = res[procs]
            row = {"cache": cache_name, "mode": mode, "procs": procs,
                   "mount_s": statistics.median(r["mnt"]), "local_s": statistics.median(r["loc"]),
                   "requests_per_file": per_file}
            row["ratio"] = row["mount_s"] / row["local_s"]
            if procs == 1:
                for side in ("m", "l"):
                    for k, what in enumerate(("open", "read", "close")):
                        xs = [x for c in r["calls_" + side] for x in c[k]]
                        row["%s_%s_us" % (what, side)] = statistics.median(xs) / 1000
                        row["%s_%s_mean_us" % (what, side)] = statistics.mean(xs) / 1000
            self.rows.append(row)
        if dl["mnt"]:
            row = {"cache": cache_name, "mode": mode, "procs": "DL2",
                   "mount_s": statistics.median(dl["mnt"]), "local_s": statistics.median(dl["loc"]),
                   "requests_per_file": None}
            row["ratio"] = row["mount_s"] / row["local_s"]
            self.rows.append(row)

    def run(self):
        a = self.args
        rel = make_tree(self.src, a.files, a.classes, 7)
        self.start_emulator()
        roots = {"tmpfs": self.work, "disk": self.disk}
        for c in a.caches.split(","):
            for m in a.modes.split(","):
                self.run_config(c, roots[c], m, rel)

    def cleanup(self):
        for mnt, cache in list(self.mounts):
            try:
                self.umount(mnt, cache)
            except Exception as e:  # keep cleaning
                print("cleanup of %s: %s" % (mnt, e), file=sys.stderr)
        if self.emu and self.emu.poll() is None:
            os.killpg(self.emu.pid, signal.SIGTERM)
            try:
                self.emu.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.emu.pid, signal.SIGKILL)
                self.emu.wait(10)
        shutil.rmtree(self.work, ignore_errors=True)
        shutil.rmtree(self.disk, ignore_errors=True)


def print_table(rows, files):
    print("warm shuffled epochs over %d files (median epoch); per call (1-process epochs): "
          "median and mean us, mount / local" % files)
    hdr = ("cache", "recovery", "procs", "mount s", "local s", "ratio", "open us m/l",
           "open mean m/l", "read us m/l", "close us m/l", "req/file")
    print("%-6s %-8s %5s %8s %8s %6s %12s %14s %12s %12s %8s" % hdr)
    for r in rows:
        def pair(k, mean=""):
            if ("%s_m_us" % k) not in r:
                return ""
            return "%.1f/%.1f" % (r["%s_m%s_us" % (k, mean)], r["%s_l%s_us" % (k, mean)])
        print("%-6s %-8s %5s %8.3f %8.3f %6.2f %12s %14s %12s %12s %8s" % (
            r["cache"], r["mode"], r["procs"], r["mount_s"], r["local_s"], r["ratio"], pair("open"),
            pair("open", "_mean"), pair("read"), pair("close"),
            "%.2f" % r["requests_per_file"] if r["requests_per_file"] is not None else "-"))


def run_and_clean(b):
    """b.run(), then b.cleanup() whatever happens: an error, SIGTERM or Ctrl-C (ignored during the
    cleanup, so that it cannot leave mounts behind)."""
    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        b.run()
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        b.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--modes", default="resend,forward")
    ap.add_argument("--caches", default="tmpfs,disk")
    ap.add_argument("--mount-opt", action="append", default=[])
    ap.add_argument("--no-dataloader", dest="dataloader", action="store_false",
                    help="skip the torch DataLoader rows")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.dataloader:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("no torch: the DataLoader rows are skipped", file=sys.stderr)
            args.dataloader = False
    b = Bench(args)
    run_and_clean(b)
    print_table(b.rows, args.files)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(b.rows, f, indent=1)


if __name__ == "__main__":
    main()
