#!/usr/bin/python3
"""How long `colabfs stats --json` takes while a cold epoch runs (issue 24, item 5).

A fresh mount over the emulator; reader processes read an ImageFolder-like tree of small files
whole, each in its own shuffled order (a DataLoader's workers), and processes read large files
sequentially (the read-ahead's large requests), while the bench runs `colabfs stats --json MNT`
every --interval seconds and times each call from fork to exit (a call that takes over 10 s is
killed and counted as 10 s); in turn with the same command run by the full program
(libexec/colabfs, which `colabfs` runs for every other command: src/cli/front.c), so the lean
front end's gain is measured under the same load, with `true` (a program that does
nothing: the floor of any command's start on that machine at that moment), and with every
--also LABEL=PATH (another build of the front end: its `stats`, reported as stats_LABEL). Two threads time the same stats reached in-process, so the
command's own start-up cost is apart from the daemon's answer: the attribute
(user.colabfs.stats, a FUSE request) and the control socket (fuse/ctlsock.h; "none" with a
colabfs that has none). Prints p50/p99/max of each, the epoch's length and what the mount
counted.

    /usr/bin/python3 bench/stats_latency.py [--files 2000] [--readers 8] [--big 2]
        [--ttfb-ms 200] [--interval 0.1] [--cpu-hogs N] [--stall] [--keep] [--json FILE]
        [--also LABEL=PATH ...]

--cpu-hogs N: N busy-looping processes next to it (the load of a test suite on the same cores).
--stall: every Drive download stalls (the emulator's stall_ms fault) once the epoch has started,
so every reader is blocked in the mount; stats must still answer. With more readers than the
mount's FUSE workers (--max-threads, default 64: --readers 72) a FUSE request waits for the
stall to end.

Needs root and /dev/fuse (it mounts) and a built ./colabfs (or COLABFS_BIN).
"""

import argparse
import json
import multiprocessing
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))
import chaos_helpers as X  # noqa: E402
import helpers as H  # noqa: E402

TOKEN = "ya29.stats-latency-" + os.urandom(6).hex()
SEED = 2024


def make_tree(base, files, classes, big, big_size):
    t = X.SpecTree(base, "statslat", SEED)
    t.folder("data")
    per = -(-files // classes)
    rels = []
    for c in range(classes):
        t.folder("data/c%02d" % c)
        for i in range(min(per, files - c * per)):
            rel = "data/c%02d/f%05d.bin" % (c, i)
            t.file(rel, t.rng.randrange(50 * H.KiB, 200 * H.KiB))
            rels.append(rel)
    t.folder("big")
    bigs = []
    for i in range(big):  # not kept in memory: SpecTree.file() would hold them
        rel = "big/b%d.bin" % i
        path = t.src / ("big%d" % i)
        with open(path, "wb") as f:
            for _ in range(big_size // H.MiB):
                f.write(os.urandom(H.MiB))
        t._add(rel, {"path": str(path)})
        bigs.append(rel)
    t.write_spec()
    return t, rels, bigs


def small_reader(mnt, rels, stop):
    for rel in rels:
        if stop.is_set():
            return
        try:
            with open(os.path.join(mnt, rel), "rb", buffering=0) as f:
                while f.read(256 * H.KiB):
                    pass
        except OSError:
            pass


def big_reader(mnt, rel, stop):
    try:
        with open(os.path.join(mnt, rel), "rb", buffering=0) as f:
            while not stop.is_set() and f.read(H.MiB):
                pass
    except OSError:
        pass


def ctl_name(mnt):
    """The abstract name of the control socket of the mount at mnt (ctlsock.h), from mountinfo."""
    dev = "0:0"
    with open("/proc/self/mountinfo") as f:
        for line in f:
            p = line.split()
            if p[4].encode().decode("unicode_escape") == mnt and " - fuse.colabfs " in line:
                dev = p[2]
    return b"\0colabfs-ctl-" + dev.encode()


def sock_stats(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect(name)
        s.sendall(b"stats\n")
        out = b"".join(iter(lambda: s.recv(65536), b""))
    finally:
        s.close()
    if not out:
        raise OSError("no answer")
    return out


def hog(stop):
    while not stop.is_set():
        for _ in range(100000):
            pass


def pct(xs, p):
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def summary(xs):
    return {"n": len(xs), "p50_ms": round(pct(xs, 50) * 1000, 1),
            "p99_ms": round(pct(xs, 99) * 1000, 1), "max_ms": round(max(xs) * 1000, 1) if xs else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=20)
    ap.add_argument("--readers", type=int, default=8, help="reader processes over the small files")
    ap.add_argument("--big", type=int, default=2, help="threads reading a large file each")
    ap.add_argument("--big-mib", type=int, default=256)
    ap.add_argument("--ttfb-ms", type=float, default=200)
    ap.add_argument("--bandwidth", type=int, default=25_000_000, help="emulator bytes/s per connection")
    ap.add_argument("--interval", type=float, default=0.1, help="seconds between stats calls")
    ap.add_argument("--seconds", type=float, default=0, help="stop after this long (0: the epoch)")
    ap.add_argument("--cpu-hogs", type=int, default=0)
    ap.add_argument("--stall", action="store_true", help="every download stalls after the start")
    ap.add_argument("--mount-opt", action="append", default=[])
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--full-bin", help="the full program, timed in turn with `colabfs stats` "
                    "(default: libexec/colabfs beside it)")
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=PATH",
                    help="another colabfs front end (another build), timed in turn with the others")
    a = ap.parse_args()

    base = Path(tempfile.mkdtemp(prefix="colabfs-statslat-", dir="/dev/shm"))
    procs, hogs = [], []
    stop = multiprocessing.Event()
    m = emu = None
    try:
        t, rels, bigs = make_tree(base / "tree", a.files, a.classes, a.big, a.big_mib * H.MiB)
        emu = H.Emulator(t.spec_path, base / "emu", access_token=TOKEN, seed=SEED,
                         ttfb_ms=a.ttfb_ms, extra=["--bandwidth", str(a.bandwidth)]).start()
        for folder in t.dirs:
            if folder:
                emu.list_children(t.ids[folder], token=TOKEN)  # the emulator hashes files once
        env = H.clean_env(home=base)
        env["COLABFS_ACCESS_TOKEN"] = TOKEN
        m = H.Mount(base / "mnt", ["--api-url=" + emu.url, "--cache-dir=%s" % (base / "cache"),
                                   "--log-file=%s" % (base / "colabfs.log")] + a.mount_opt,
                    env, log_file=base / "colabfs.log")
        m.start()
        for c in sorted(os.listdir(m.path("data"))):  # a dataset constructor lists the tree
            os.listdir(m.path("data/" + c))
        emu.reset()
        ctx = multiprocessing.get_context("fork")
        for _ in range(a.cpu_hogs):
            hogs.append(ctx.Process(target=hog, args=(stop,), daemon=True))
            hogs[-1].start()
        for w in range(a.readers):
            order = list(rels)
            random.Random(SEED + w).shuffle(order)
            procs.append(ctx.Process(target=small_reader, args=(m.mnt, order, stop), daemon=True))
        for rel in bigs:
            procs.append(ctx.Process(target=big_reader, args=(m.mnt, rel, stop), daemon=True))
        inproc, insock, errors, done = [], [], [], []
        fullbin = a.full_bin or str(H.colabfs_bin().parent / "libexec" / "colabfs")
        if not os.access(fullbin, os.X_OK):
            fullbin = None  # a colabfs from before the front end (src/cli/front.c)
        turns = [("stats_cli", [str(H.colabfs_bin()), "stats", "--json", m.mnt])]
        if fullbin:
            turns.append(("stats_cli_full_program", [fullbin, "stats", "--json", m.mnt]))
        turns.append(("floor_true", [shutil.which("true")]))
        for also in a.also:
            label, _, path = also.partition("=")
            turns.append(("stats_" + label, [path, "stats", "--json", m.mnt]))
        cli_by = {label: [] for label, _ in turns}
        name = ctl_name(m.mnt)
        t0 = time.monotonic()
        for p in procs:
            p.start()
        if a.stall:
            time.sleep(1.0)
            X.set_faults(emu, ["kind=media,stall_ms=600000"])

        def xattr_loop():
            while not stop.is_set():
                s = time.monotonic()
                try:
                    os.getxattr(m.mnt, "user.colabfs.stats")
                    inproc.append(time.monotonic() - s)
                except OSError as e:
                    errors.append("getxattr: %s" % e)
                time.sleep(a.interval)

        def sock_loop():
            while not stop.is_set():
                s = time.monotonic()
                try:
                    sock_stats(name)
                    insock.append(time.monotonic() - s)
                except OSError as e:
                    errors.append("socket: %s" % e)
                    return  # an older colabfs: none
                time.sleep(a.interval)

        th = threading.Thread(target=xattr_loop, daemon=True)
        th.start()
        ts = threading.Thread(target=sock_loop, daemon=True)
        ts.start()
        while True:
            running = any(p.is_alive() for p in procs)
            el = time.monotonic() - t0
            if not running or (a.seconds and el >= a.seconds) or (a.stall and el >= (a.seconds or 20)):
                break
            # every command in turn: the same load for each
            label, argv = turns[len(done) % len(turns)]
            into = cli_by[label]
            done.append(label)
            s = time.monotonic()
            try:
                r = subprocess.run(argv, env=env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, timeout=10)
            except subprocess.TimeoutExpired:
                r = None
            d = time.monotonic() - s
            if r is None:
                into.append(10.0)
                errors.append("stats: no answer in 10 s")
            elif r.returncode != 0:
                errors.append("stats rc %d: %s" % (r.returncode, r.stderr.decode(errors="replace")))
            else:
                into.append(d)
            time.sleep(max(0.0, a.interval - d))
        epoch = time.monotonic() - t0
        stop.set()
        if a.stall:
            X.set_faults(emu, [])
        th.join(timeout=30)
        ts.join(timeout=30)
        for p in procs + hogs:
            p.join(timeout=30)
        st = X.cstats(m)
        out = {"files": a.files, "readers": a.readers, "big": a.big, "ttfb_ms": a.ttfb_ms,
               "cpu_hogs": a.cpu_hogs, "stall": a.stall, "epoch_s": round(epoch, 1),
               "load1": os.getloadavg()[0],
               **{label: summary(xs) for label, xs in cli_by.items()},
               "stats_getxattr": summary(inproc),
               "stats_socket": summary(insock) if insock else "none",
               "errors": errors[:5], "nerrors": len(errors),
               "mount": {k: st.get(k) for k in ("drive_requests_total", "drive_media_bytes_total",
                                                 "downloads_in_flight", "cache_misses_total")}}
        print(json.dumps(out, indent=1))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
    finally:
        stop.set()
        for p in procs + hogs:
            if p.pid is not None and p.is_alive():
                p.kill()
        if emu:
            try:
                X.set_faults(emu, [])
            except Exception:
                pass
        if m:
            for prob in m.cleanup():
                print("cleanup:", prob, file=sys.stderr)
        if emu:
            emu.stop()
        H.emergency_cleanup()
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print("kept", base, file=sys.stderr)


if __name__ == "__main__":
    main()
