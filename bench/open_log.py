#!/usr/bin/python3
"""A log held open for the whole run (issue 23 item 3): what --upload-open-files costs and buys.

    /usr/bin/python3 bench/open_log.py [--log-mib 100] [--minutes 10] [--intervals 60,0]
                                       [--ttfb-ms 200] [--mount-opt=OPT ...] [--workdir /var/tmp]
                                       [--keep] [--json FILE]

One emulator (--ttfb-ms to the first byte of media and --api-latency-ms the same on every other
call, as from Colab), one mount per interval, all at once.  On each mount a writer process (not
this one: a descriptor inherited by a child would FLUSH at the child's exec) opens train.log and
appends --log-mib MiB of text lines evenly over --minutes, noting every second how many bytes it
had written.  Meanwhile this script asks the emulator every 0.5 s how large Drive's train.log is.
Then the writer closes the file and `colabfs sync` waits until Drive has it.

Columns, per interval:
  lag p50/p95/max  seconds from a byte's write to Drive holding it, while the file stays open
                   (the writer's notes against the sizes seen in Drive); "-": none reached Drive
                   while open (interval 0: only at close).
  open uploads     uploads of the file while it was open (colabfs uploads_open_total).
  uploaded MiB     bytes colabfs sent to Drive for it in all (its uploads_bytes_total: snapshots
                   and the close's upload).
  cost             uploaded / the log's size: the reference is the log's size itself, i.e. 1.00
                   = one upload at close (interval 0, measured in the same run).
  close->Drive s   from the writer's close to `colabfs sync` returning (Drive holds every byte).
Every run ends with Drive's bytes compared to the writer's.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402  (the suite's Emulator, Mount and clean-up)

MiB = 1 << 20

WRITER = r"""
import hashlib, os, sys, time
path, total, seconds, notes = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
md5 = hashlib.md5()
out = open(notes, "w")
t0 = time.monotonic()
done, k, last_note = 0, 0, 0.0
while done < total:
    # the bytes due by now, in lines of about 100 bytes
    due = min(total, int(total * min(1.0, (time.monotonic() - t0) / seconds)) + 100)
    buf = []
    n = 0
    while done + n < due:
        line = ("%012d step %08d loss %.9f lr %.3e |" % (done + n, k, 1.0 / (k + 1), 1e-4)).ljust(99, "=") + "\n"
        buf.append(line.encode())
        n += len(line)
        k += 1
    data = b"".join(buf)[: total - done]
    os.write(fd, data)
    md5.update(data)
    done += len(data)
    now = time.monotonic()
    if now - last_note >= 1.0 or done >= total:
        out.write("%.3f %d\n" % (now, done))
        out.flush()
        last_note = now
    time.sleep(0.1)
out.write("md5 %s\n" % md5.hexdigest())
out.flush()
input()  # the bench says when to close
os.close(fd)
print("closed %.3f" % time.monotonic(), flush=True)
"""


def drive_item(emu, name):
    j = emu.call("/_emu/find?path=" + urllib.parse.quote(name))
    items = [i for i in j["items"] if not i["trashed"]]
    return items[0] if items else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log-mib", type=float, default=100)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--intervals", default="60,0", help="--upload-open-files values (60,0)")
    ap.add_argument("--ttfb-ms", type=float, default=200)
    ap.add_argument("--workdir", default="/var/tmp")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--mount-opt", action="append", default=[],
                    help="another mount option, repeatable (--mount-opt=--recovery=forward)")
    a = ap.parse_args(argv)
    total = int(a.log_mib * MiB)
    seconds = a.minutes * 60
    intervals = [int(x) for x in a.intervals.split(",") if x != ""]
    b = R.Side(a.keep, a.mount_opt)
    rows = []

    def body():
        spec = os.path.join(b.work, "spec.json")
        with open(spec, "w") as f:
            json.dump({"root": {"id": R.ROOT_ID, "name": "My Drive"}, "items": [
                {"name": "i%d" % i, "mimeType": "application/vnd.google-apps.folder"}
                for i in intervals]}, f)
        b.emu = R.Emulator(b, spec, "emu", a.ttfb_ms, 0, 0, ["--api-latency-ms", str(a.ttfb_ms)])
        runs = []
        for i in intervals:
            m = b.new_mount("i%d" % i, opts=["--write-back-delay=0", "--upload-open-files=%d" % i])
            notes = os.path.join(b.work, "notes-%d" % i)
            p = subprocess.Popen([sys.executable, "-c", WRITER, m.path("i%d" % i, "train.log"),
                                  str(total), str(seconds), notes], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, start_new_session=True)
            b.procs.append(p)
            runs.append(dict(i=i, m=m, p=p, notes=notes, seen=[]))
        R.log("writing %.0f MiB into %d mounts over %.0f s" % (a.log_mib, len(runs), seconds))
        t_end = time.monotonic() + seconds + 30
        while time.monotonic() < t_end and any(r["p"].poll() is None for r in runs):
            for r in runs:
                it = drive_item(b.emu, "i%d/train.log" % r["i"])
                if it:
                    r["seen"].append((time.monotonic(), int(it.get("size", 0))))
            if all(os.path.exists(r["notes"]) and "md5" in open(r["notes"]).read() for r in runs):
                break
            time.sleep(0.5)
        for r in runs:
            lines = open(r["notes"]).read().split("\n")
            r["md5"] = [l.split()[1] for l in lines if l.startswith("md5")][0]
            r["marks"] = [(float(l.split()[0]), int(l.split()[1])) for l in lines
                          if l and not l.startswith("md5")]
            st0 = r["m"].stats()
            r["open_uploads"] = st0.get("uploads_open_total", 0)
            t0 = time.monotonic()
            r["p"].stdin.write("\n")
            r["p"].stdin.flush()
            r["p"].stdout.readline()
            sync = subprocess.run([R.BIN, "sync", "--quiet", "--timeout", "1800", r["m"].path()],
                                  timeout=1900)
            r["close_s"] = time.monotonic() - t0
            if sync.returncode:
                raise RuntimeError("colabfs sync failed for interval %d" % r["i"])
            it = drive_item(b.emu, "i%d/train.log" % r["i"])
            if not it or it.get("md5Checksum") != r["md5"] or int(it.get("size", 0)) != total:
                raise RuntimeError("interval %d: Drive's train.log is not the writer's" % r["i"])
            st = r["m"].stats()
            lags = []
            for t, off in r["marks"]:
                hit = next((ts for ts, size in r["seen"] if ts >= t and size >= off), None)
                if hit is not None:
                    lags.append(hit - t)
            q = statistics.quantiles(lags, n=20) if len(lags) >= 2 else None
            rows.append(dict(interval=r["i"], lags=len(lags), marks=len(r["marks"]),
                             p50=statistics.median(lags) if lags else None,
                             p95=q[18] if q else None, max=max(lags) if lags else None,
                             open_uploads=r["open_uploads"],
                             uploaded=st.get("uploads_bytes_total", 0),
                             cost=st.get("uploads_bytes_total", 0) / total,
                             close_s=r["close_s"]))
            r["m"].umount()
    rc = b.run_in(body, "colabfs-openlog-", a.workdir)

    def f(x, fmt="%.1f"):
        return "-" if x is None else fmt % x
    print("colabfs held-open log bench: %s; host %d CPUs, load %s" % (
        " ".join(["bench/open_log.py"] + (argv or sys.argv[1:])), os.cpu_count(),
        " ".join(open("/proc/loadavg").read().split()[:3])))
    print("log %.0f MiB appended over %.1f min; emulator ttfb %.0f ms" % (a.log_mib, a.minutes,
                                                                         a.ttfb_ms))
    print("%-9s %8s %8s %8s %7s %13s %7s %14s" % ("interval", "lag p50", "lag p95", "lag max",
                                                 "uploads", "uploaded MiB", "cost", "close->Drive s"))
    for r in rows:
        print("%-9s %8s %8s %8s %7d %13.0f %7.2f %14.1f" % (
            "%d s" % r["interval"] if r["interval"] else "0 (off)", f(r["p50"]), f(r["p95"]),
            f(r["max"]), r["open_uploads"], r["uploaded"] / MiB, r["cost"], r["close_s"]))
    print("cost = bytes uploaded / log size (1.00: one upload at close, the 0 row); lag over the "
          "writer's per-second notes that reached Drive while open")
    R.save_json(a.json, rows)
    return rc


if __name__ == "__main__":
    sys.exit(main())
