#!/usr/bin/python3
"""A cold epoch under Drive's newer quota, counted in units (--api-units): what a user of a Cloud
project created since 2026-05-01 sees.

    /usr/bin/python3 bench/quota_units.py [--files 600] [--classes 6] [--units 325000]
                                          [--readers 2] [--ttfb-ms 200] [--workdir /var/tmp]
                                          [--keep] [--json FILE]

Such a project gets 325,000 quota units a minute per user and a call costs by its kind (a download
200, a list 100, a get 5: drive-api-v3.md §4), so the per-user ceiling is about 27 downloads a
second where the older quota allowed 200 calls.  Each row: a fresh emulator enforcing that quota
(`--user-units`, a bucket of one second's worth, 403 userRateLimitExceeded over it; ttfb and every
other call --ttfb-ms) serving an ImageFolder tree (--files files of 20-250 KB in --classes class
folders under dataset/), a fresh mount, and --readers threads reading every file whole in one
shuffled order (a DataLoader's epoch), each file timed from its open to its last byte; then every
file is compared with the local copy.
  calls    colabfs as it paces by default: calls, --api-rate 200 (the older quota's figure)
  units    colabfs --api-units=325000: each call takes its cost from the pacer
The reference, from the same numbers: the quota bound, the seconds the units of the epoch's calls
need at the quota's rate (the downloads, one per file, and the folders' listings; the bucket's
first second free).  Columns: seconds, files/s, bound / seconds, a file's read time (median, 99th
percentile, most), Drive's refusals for the quota (the emulator's count), the pacer's decreases,
the units of the calls the mount sent, refused ones included (colabfs stats
drive_quota_units_total), the requests and the downloads (media requests; one per file is none
wasted).
"""

import argparse
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402  (the suite's Emulator, Mount, DatasetTree and clean-up)

DOWNLOAD, LIST = 200, 100


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=600)
    ap.add_argument("--classes", type=int, default=6)
    ap.add_argument("--units", type=int, default=325000, help="quota units a minute per user")
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--ttfb-ms", type=float, default=200)
    ap.add_argument("--workdir", default="/var/tmp")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    b = R.Side(a.keep)
    rows = []
    rate = a.units / 60.0

    def body():
        tree = R.DatasetTree(b.work, a.files, a.classes)
        tree.make()
        rels = sorted(os.path.relpath(os.path.join(d, f), tree.root)
                      for d, _, fs in os.walk(tree.root) for f in fs)
        order = rels[:]
        random.Random(25).shuffle(order)
        # the epoch's calls: a download a file, a listing of dataset/ and of each class (one
        # page each), less the bucket's first second
        need = a.files * DOWNLOAD + (a.classes + 1) * LIST
        bound = max(need - rate, 0) / rate
        for label, opts in (("calls", []), ("units", ["--api-units=%d" % a.units])):
            emu = R.Emulator(b, tree.spec_path, "emu-" + label, a.ttfb_ms, 0, 0,
                             ["--api-latency-ms", str(a.ttfb_ms), "--user-units", str(a.units)])
            m = b.new_mount(label, emu=emu, opts=opts)
            paths = [m.path("dataset", r) for r in order]
            R.log("%s: reading %d files with %d readers" % (label, a.files, a.readers))
            lat = []
            secs, got = R.parallel_read(paths, a.readers, lat)
            q = statistics.quantiles(lat, n=100)
            if got != tree.bytes:
                raise RuntimeError("%s: read %d bytes, the tree has %d" % (label, got, tree.bytes))
            for r in rels:  # raises at the first byte that differs
                R.compare_files(os.path.join(tree.root, r), m.path("dataset", r))
            st, es = m.stats(), emu.stats()
            media = len([r for r in emu.media_log() if r.get("status") in (200, 206)])
            rows.append(dict(label=label, secs=secs, files_s=a.files / secs, bound=bound,
                             ratio=bound / secs, refused=es.get("quota_rejected", 0),
                             p50=statistics.median(lat), p99=q[98], max=max(lat),
                             cuts=st.get("api_rate_decreases_total", 0),
                             units=st.get("drive_quota_units_total", 0),
                             emu_units=es.get("units_used", 0), media=media,
                             requests=st.get("drive_requests_total", 0)))
            m.umount()
    rc = b.run_in(body, "colabfs-units-", a.workdir)

    print("colabfs under Drive's quota units: %s; host %d CPUs, load %s" % (
        " ".join(["bench/quota_units.py"] + (argv or sys.argv[1:])), os.cpu_count(),
        " ".join(open("/proc/loadavg").read().split()[:3])))
    print("%d files in %d classes, %d readers; quota %d units/min (%.0f/s), ttfb %.0f ms" % (
        a.files, a.classes, a.readers, a.units, rate, a.ttfb_ms))
    print("%-6s %8s %8s %8s %8s %21s %8s %6s %10s %9s %9s" % (
        "pacing", "seconds", "files/s", "bound s", "x bound", "file s p50/p99/max", "refused",
        "cuts", "units sent", "requests", "downloads"))
    for r in rows:
        print("%-6s %8.1f %8.1f %8.1f %8.2f %21s %8d %6d %10d %9d %9d" % (
            r["label"], r["secs"], r["files_s"], r["bound"], r["ratio"],
            "%.2f/%.2f/%.2f" % (r["p50"], r["p99"], r["max"]), r["refused"], r["cuts"],
            r["units"], r["requests"], r["media"]))
    print("x bound = the quota bound's seconds / the epoch's (1.00: at the quota); file s: a "
          "reader's open to last byte; refused: calls Drive refused for the quota; units sent: "
          "what the mount's calls cost, refused ones included")
    R.save_json(a.json, rows)
    return rc


if __name__ == "__main__":
    sys.exit(main())
