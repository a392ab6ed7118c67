#!/usr/bin/python3
"""A training run compressed into minutes: what hours of one leave behind in the daemon.

    /usr/bin/python3 bench/soak.py [--minutes 20] [--files 2000] [--ckpt-mib 32] [--ckpt-every 20]
                                   [--read-rate 200] [--ttfb-ms 50] [--no-faults] [--crash-every S]
                                   [--mount-opt=OPT ...]
                                   [--workdir /var/tmp] [--keep] [--json FILE]

One emulator (--ttfb-ms to the first byte of media, the same on every other call, and unless
--no-faults a steady mix of Drive's failures on reads, listings, metadata calls and uploads:
FAULTS below) and one writable mount, used for --minutes at once the way a training job uses
Drive:
  readers (2)   open, read whole and close random files of an ImageFolder tree (workload 8's,
                --files files of 20-250 KB) at --read-rate files/s in all (a GPU-bound job's
                DataLoader), every byte compared with the local copy;
  checkpoints   every --ckpt-every s, --ckpt-mib MiB written over ckpt/last.pt (opened O_TRUNC,
                as torch.save does) and as ckpt/step_N.pt.tmp renamed to ckpt/step_N.pt, only
                the newest 3 step files kept (the rest unlinked);
  log           train.log held open the whole run, a line appended every 0.2 s;
  metrics       metrics.csv opened, appended one line and closed every second;
  lister        every 5 s, the checkpoint folder and a class folder listed and stat'ed.
With --crash-every S the server (colabfs serve) is killed with SIGKILL every S seconds, as an
out-of-memory kill would: its supervisor starts another, which takes the mount over (--recovery:
resend or forward); the job must not notice.  Every 10 s the server's memory (VmRSS), descriptors, threads and CPU are sampled, with colabfs
stats.  At the end the log is closed, `colabfs sync` waits for Drive, and Drive's bytes of every
file written are compared with the writers' (md5 and size, through the emulator), then read
again, whole, through a fresh mount on an empty cache.

The table: each sample's figures (every --every-th), then growth over the run's second half
(least squares, per hour) beside its first-half value: what a leak would show.  The reference is
the run itself: memory and descriptors after warm-up, the bytes the writers wrote.  Workload
errors (any errno a reader or writer saw) must be 0.
"""

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402  (the suite's Emulator, Mount, DatasetTree and clean-up)

MiB = 1 << 20
FAULTS = [
    "kind=media,status=503,prob=0.01",
    "kind=media,status=429,retry_after=1,prob=0.004",
    "kind=media,reset_after=65536,prob=0.004",
    "kind=files.list,status=503,every=25",
    "kind=files.get|files.update|files.create,status=503,prob=0.02",
    "kind=upload,status=503,prob=0.05",
    "kind=upload.chunk,status=500,prob=0.05",
    "kind=upload.chunk,reset_in_body=262144,prob=0.03",
]
STATS = ("cache_used_bytes", "cache_files", "drive_retries_total", "drive_errors_total", "uploads_total",
         "uploads_bytes_total", "uploads_open_total")


class Workload:
    """The job's threads; every failure is kept in ``errors`` (the first 20) and counted."""

    def __init__(self, m, ds, a):
        self.m, self.ds, self.a = m, ds, a
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.errors, self.nerrors = [], 0
        self.reads = self.read_bytes = self.ckpts = self.log_bytes = self.metric_lines = 0
        self.files = sorted(os.path.relpath(os.path.join(d, f), ds.root)
                            for d, _, fs in os.walk(ds.root) for f in fs)
        self.last_md5 = None                 # ckpt/last.pt as last written
        self.steps = {}                      # step file name -> md5, the newest 3
        self.log_md5 = hashlib.md5()
        self.metrics_md5 = hashlib.md5()

    def fail(self, what, e):
        with self.lock:
            self.nerrors += 1
            if len(self.errors) < 20:
                self.errors.append("%s: %r" % (what, e))

    def loop(self, what, every, fn):
        """fn() every ``every`` s (from start to start) until stopped."""
        due = time.monotonic()
        while not self.stop.is_set():
            try:
                fn()
            except Exception as e:  # noqa: B902 - counted and reported
                self.fail(what, e)
            due = max(due + every, time.monotonic() - every)
            self.stop.wait(max(0.0, due - time.monotonic()))

    def read_one(self, rnd):
        rel = rnd.choice(self.files)
        with open(self.m.path("dataset", rel), "rb") as f:
            got = f.read()
        with open(os.path.join(self.ds.root, rel), "rb") as f:
            want = f.read()
        if got != want:
            raise AssertionError("%s: %d bytes read, not the %d written" % (rel, len(got), len(want)))
        with self.lock:
            self.reads += 1
            self.read_bytes += len(got)

    def checkpoint(self):
        step = self.ckpts + 1
        rnd = random.Random(step)
        md5 = hashlib.md5()
        blocks = []
        for _ in range(self.a.ckpt_mib):
            b = rnd.randbytes(MiB)
            md5.update(b)
            blocks.append(b)
        with open(self.m.path("ckpt", "last.pt"), "wb") as f:   # O_TRUNC over the last one
            for b in blocks:
                f.write(b)
        self.last_md5 = md5.hexdigest()
        name = "step_%06d.pt" % step
        tmp = self.m.path("ckpt", name + ".tmp")
        with open(tmp, "wb") as f:
            for b in blocks:
                f.write(b)
        os.rename(tmp, self.m.path("ckpt", name))
        self.steps[name] = md5.hexdigest()
        for old in sorted(self.steps)[:-3]:
            os.unlink(self.m.path("ckpt", old))
            del self.steps[old]
        self.ckpts = step

    def metric(self):
        line = ("%d,%.6f,%.3e\n" % (self.metric_lines, 1.0 / (self.metric_lines + 1), 1e-4)).encode()
        with open(self.m.path("metrics.csv"), "ab") as f:
            f.write(line)
        self.metrics_md5.update(line)
        self.metric_lines += 1

    def listing(self, rnd):
        for name in os.listdir(self.m.path("ckpt")):
            os.stat(self.m.path("ckpt", name))
        folder = os.path.dirname(rnd.choice(self.files))
        for name in os.listdir(self.m.path("dataset", folder)):
            os.stat(self.m.path("dataset", folder, name))

    def run(self):
        os.makedirs(self.m.path("ckpt"), exist_ok=True)
        logf = open(self.m.path("train.log"), "ab", buffering=0)
        rnds = [random.Random(i) for i in range(4)]
        threads = [threading.Thread(target=self.loop, args=("read", 2.0 / self.a.read_rate,
                                                            lambda r=rnds[i]: self.read_one(r)))
                   for i in range(2)]
        threads += [threading.Thread(target=self.loop, args=("checkpoint", self.a.ckpt_every,
                                                              self.checkpoint)),
                    threading.Thread(target=self.loop, args=("metrics", 1.0, self.metric)),
                    threading.Thread(target=self.loop, args=("listing", 5.0,
                                                             lambda: self.listing(rnds[2])))]

        def log_line():
            line = ("%.3f step %d reads %d ckpts %d\n" % (time.time(), self.log_bytes, self.reads,
                                                         self.ckpts)).encode()
            logf.write(line)
            self.log_md5.update(line)
            self.log_bytes += len(line)
        threads.append(threading.Thread(target=self.loop, args=("log", 0.2, log_line)))
        for t in threads:
            t.start()
        return threads, logf


def drive_item(emu, path):
    items = [i for i in emu.call("/_emu/find?path=" + urllib.parse.quote(path))["items"]
             if not i["trashed"]]
    return items[0] if len(items) == 1 else None


def sample(m, t0):
    pid = m.server_pid()
    st = R.proc_status(pid)
    try:
        fds = len(os.listdir("/proc/%d/fd" % pid))
        with open("/proc/%d/status" % pid) as f:
            threads = int([ln.split()[1] for ln in f if ln.startswith("Threads:")][0])
    except (OSError, IndexError, ValueError):
        fds = threads = -1
    s = m.stats()
    return dict(t=time.monotonic() - t0, pid=pid, rss=st.get("VmRSS", 0), fds=fds, threads=threads,
                cpu=R.proc_cpu(pid) or 0.0, **{k: s.get(k, 0) for k in STATS})


def crash(m):
    """SIGKILL the server; seconds until its supervisor's next one runs and answers stats."""
    old = m.server_pid()
    t = time.monotonic()
    os.kill(old, signal.SIGKILL)
    R.wait_until(lambda: m.server_pid() not in (old, m.pid) and m.stats(), 60, "a new server")
    R.log("server %d killed; %d serves after %.2f s" % (old, m.server_pid(), time.monotonic() - t))
    return time.monotonic() - t


def slope_per_hour(rows, key):
    """Least-squares growth of key per hour over rows, or None with fewer than 3."""
    if len(rows) < 3:
        return None
    xs = [r["t"] for r in rows]
    ys = [r[key] for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den * 3600 if den else None


def verify(b, w, m_dir):
    """Drive's copy of every file written against the writers', then each read through a fresh
    mount.  Returns the problems."""
    want = {"ckpt/last.pt": (w.last_md5, w.a.ckpt_mib * MiB),
            "train.log": (w.log_md5.hexdigest(), w.log_bytes),
            "metrics.csv": (w.metrics_md5.hexdigest(), None)}
    want.update({"ckpt/" + n: (md5, w.a.ckpt_mib * MiB) for n, md5 in w.steps.items()})
    problems = []
    for rel, (md5, size) in want.items():
        it = drive_item(b.emu, rel)
        if not it or it.get("md5Checksum") != md5 or (size is not None and int(it.get("size", -1)) != size):
            problems.append("%s: Drive holds %r, the writer wrote md5 %s" % (
                rel, it and {k: it.get(k) for k in ("md5Checksum", "size")}, md5))
    names = sorted(os.listdir(m_dir.path("ckpt")))
    if names != sorted(["last.pt"] + list(w.steps)):
        problems.append("ckpt/ through a fresh mount: %r, want %r" % (names, sorted(["last.pt"] + list(w.steps))))
    for rel, (md5, _) in want.items():
        with open(m_dir.path(rel), "rb") as f:
            if hashlib.md5(f.read()).hexdigest() != md5:
                problems.append("%s: a fresh mount reads other bytes" % rel)
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--read-rate", type=float, default=200, help="files/s, both readers (200)")
    ap.add_argument("--ckpt-mib", type=int, default=32)
    ap.add_argument("--ckpt-every", type=float, default=20)
    ap.add_argument("--ttfb-ms", type=float, default=50)
    ap.add_argument("--no-faults", action="store_true")
    ap.add_argument("--crash-every", type=float, default=0, help="SIGKILL the server every S s")
    ap.add_argument("--every", type=int, default=6, help="print every Nth sample (6: each minute)")
    ap.add_argument("--mount-opt", action="append", default=[])
    ap.add_argument("--workdir", default="/var/tmp")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    b = R.Side(a.keep, a.mount_opt)
    res = {}

    def body():
        ds = R.DatasetTree(b.work, a.files, max(1, a.files // 100))
        ds.make()
        b.emu = R.Emulator(b, ds.spec_path, "emu", a.ttfb_ms, 0, 0,
                           ["--api-latency-ms", str(a.ttfb_ms)])
        b.emu.prepare(ds.folder_ids)
        m = b.new_mount("soak")
        if not a.no_faults:
            b.emu.set_faults(FAULTS)
        w = Workload(m, ds, a)
        t0 = time.monotonic()
        threads, logf = w.run()
        rows = []
        R.log("soak: %g minutes" % a.minutes)
        next_crash = t0 + a.crash_every if a.crash_every else None
        try:
            while time.monotonic() - t0 < a.minutes * 60:
                if next_crash and time.monotonic() >= next_crash:
                    res.setdefault("restarts", []).append(crash(m))
                    next_crash = time.monotonic() + a.crash_every
                rows.append(sample(m, t0))
                if len(rows) % a.every == 1:
                    R.log("t=%4.0fs rss %.1f MiB fds %d threads %d reads %d ckpts %d errors %d" % (
                        rows[-1]["t"], rows[-1]["rss"] / MiB, rows[-1]["fds"], rows[-1]["threads"],
                        w.reads, w.ckpts, w.nerrors))
                time.sleep(min(10, max(0, t0 + a.minutes * 60 - time.monotonic())))
        finally:
            w.stop.set()
            for t in threads:
                t.join(120)
            logf.close()
        rows.append(sample(m, t0))
        fired = b.emu.fired() if not a.no_faults else 0
        b.emu.set_faults([])
        t_sync = time.monotonic()
        sync = subprocess.run([R.BIN, "sync", "--quiet", "--timeout", "900", m.path()], timeout=1000)
        res["sync_s"] = time.monotonic() - t_sync
        res["sync_rc"] = sync.returncode
        final = m.stats()
        m.umount()
        fresh = b.new_mount("verify")
        res["problems"] = verify(b, w, fresh)
        fresh.umount()
        res.update(rows=rows, fired=fired, reads=w.reads, read_bytes=w.read_bytes, ckpts=w.ckpts,
                   log_bytes=w.log_bytes, metric_lines=w.metric_lines, nerrors=w.nerrors,
                   errors=w.errors, final={k: final.get(k) for k in STATS + ("drive_requests_total",)})

    rc = b.run_in(body, "colabfs-soak-", a.workdir)
    if "rows" not in res:
        return rc or 1
    rows = res["rows"]
    print("colabfs soak: %s; host %d CPUs, load %s" % (
        " ".join(["bench/soak.py"] + (argv or sys.argv[1:])), os.cpu_count(),
        " ".join(open("/proc/loadavg").read().split()[:3])))
    print("%7s %9s %5s %7s %8s %9s %7s %9s %8s %9s" % (
        "t s", "RSS MiB", "fds", "threads", "CPU s", "cache MiB", "files", "retries", "uploads",
        "log ups"))
    for i, r in enumerate(rows):
        if i % a.every == 0 or i == len(rows) - 1:
            print("%7.0f %9.1f %5d %7d %8.1f %9.1f %7d %9d %8d %9d" % (
                r["t"], r["rss"] / MiB, r["fds"], r["threads"], r["cpu"], r["cache_used_bytes"] / MiB,
                r["cache_files"], r["drive_retries_total"], r["uploads_total"], r["uploads_open_total"]))
    print("(CPU s, retries, uploads and log ups, the uploads of files while open, are the server's "
          "own: they start again at 0 in a restarted server)")
    half = [r for r in rows if r["t"] >= rows[-1]["t"] / 2]
    first = [r for r in rows if r["t"] < rows[-1]["t"] / 2]
    for key, unit, div in (("rss", "MiB", MiB), ("fds", "", 1), ("threads", "", 1)):
        s2, s1 = slope_per_hour(half, key), slope_per_hour(first, key)
        print("%-8s growth per hour: second half %s, first half %s" % (
            key, "-" if s2 is None else "%+.1f %s" % (s2 / div, unit),
            "-" if s1 is None else "%+.1f %s" % (s1 / div, unit)))
    rs = res.get("restarts", [])
    print("server restarts (pid changes): %d; killed %d times, serving again after %s s" % (
        len({r["pid"] for r in rows} - {rows[0]["pid"]}), len(rs),
        "/".join("%.2f" % x for x in rs) if len(rs) <= 8 else "%.2f-%.2f" % (min(rs), max(rs))))
    print("work: %d files read (%.0f MiB, every byte compared), %d checkpoints of %d MiB (twice each), "
          "%d log bytes, %d metric lines; %d faults fired" % (
              res["reads"], res["read_bytes"] / MiB, res["ckpts"], a.ckpt_mib, res["log_bytes"],
              res["metric_lines"], res["fired"]))
    print("colabfs at the end: %s" % json.dumps(res["final"]))
    print("sync after the run: rc %d in %.1f s" % (res["sync_rc"], res["sync_s"]))
    print("workload errors: %d %s" % (res["nerrors"], res["errors"][:5]))
    print("Drive and a fresh mount against the writers: %s" % (
        "every file identical" if not res["problems"] else res["problems"]))
    R.save_json(a.json, res)
    bad = res["nerrors"] or res["problems"] or res["sync_rc"]
    return rc or (1 if bad else 0)


if __name__ == "__main__":
    sys.exit(main())
