#!/usr/bin/python3
"""The fault case of issue 11, point 3: one reader walks a tree of ~335 files
(the chaos tree of tests/e2e/test_chaos.py, scaled: 4 large files and 8
folders of small ones) through a fresh mount, every byte compared, with the
emulator at 20 ms to first byte; first fault-free, then with test_chaos.py's
fault mix (about 10% of requests: 5xx, 429, 403 rate limits, resets, drops,
wrong ranges, short bodies, 1.5 s stalls) plus 4 s stalls before the first
byte and in the middle of a body.  Prints both times, the ratio (target:
<= 2x) and what colabfs counted.

    /usr/bin/python3 bench/fault_walk.py [--runs N] [--ttfb-ms 20] [--keep]

Needs root and /dev/fuse (it mounts) and a built ./colabfs (or COLABFS_BIN).
"""

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))
import chaos_helpers as X  # noqa: E402
import helpers as H  # noqa: E402
import test_chaos as T  # noqa: E402

TOKEN = "ya29.fault-walk-" + os.urandom(6).hex()
STALLS = [("stall 4s", "stall_ms=4000", 0.006),
          ("stall 4s mid-body", "stall_ms=4000,stall_after=16384", 0.003)]


def walk(m, t, shuffled):
    """Reads every file of the tree, folder by folder, each folder's files in
    listing order (colabfs then fetches the next ones ahead) or shuffled
    (every file costs a round trip)."""
    errors = []
    rng = random.Random(T.SEED)
    for folder in sorted(t.dirs):
        names = sorted(os.listdir(m.path(folder)))
        if names != t.dirs[folder]:
            errors.append("listing of %r differs" % folder)
        if shuffled:
            rng.shuffle(names)
        for name in names:
            rel = os.path.join(folder, name) if folder else name
            if rel not in t.data:
                continue
            try:
                with open(m.path(rel), "rb", buffering=0) as f:
                    got = b"".join(iter(lambda: f.read(128 * 1024), b""))
                if got != t.data[rel]:
                    errors.append("%s: wrong bytes" % rel)
            except OSError as e:
                errors.append("%s: %s" % (rel, e))
    return errors


def one_run(base, emu, t, faults, name, shuffled):
    d = base / name
    d.mkdir()
    env = H.clean_env(home=d)
    env["COLABFS_ACCESS_TOKEN"] = TOKEN
    m = H.Mount(d / "mnt", ["--api-url=" + emu.url, "--cache-dir=%s" % (d / "cache"),
                            "--log-file=%s" % (d / "colabfs.log")], env, log_file=d / "colabfs.log")
    m.start()
    try:
        emu.reset()
        X.set_faults(emu, faults)
        t0 = time.monotonic()
        errors = walk(m, t, shuffled)
        elapsed = time.monotonic() - t0
        fired = sum(f["fired"] for f in X.get_faults(emu))
        X.set_faults(emu, [])
        return elapsed, errors, fired, emu.stats()["requests"], X.cstats(m)
    finally:
        m.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--ttfb-ms", type=float, default=20)
    ap.add_argument("--order", choices=("shuffled", "sorted"), default="shuffled",
                    help="order of the files in each folder (default shuffled)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="colabfs-faultwalk-", dir="/dev/shm"))
    t, _, _ = X.chaos_tree(base / "tree", 4 * H.MiB, 4, 8, 41, T.SMALL_MIN, T.SMALL_MAX, T.SEED)
    emu = H.Emulator(t.spec_path, base / "emu", access_token=TOKEN, seed=T.SEED,
                     page_size_cap=X.LIST_PAGE_CAP, ttfb_ms=a.ttfb_ms).start()
    specs = [s for _, s in X.chaos_fault_specs()]
    specs += ["kind=media,%s,prob=%g" % (s, p) for _, s, p in STALLS]
    keys = ["drive_requests_total", "drive_retries_total", "drive_errors_total", "hedges_total",
            "hedge_wins_total", "stalls_total", "ttfb_p95_ms"]
    try:
        for folder in t.dirs:
            if folder:
                emu.list_children(t.ids[folder], token=TOKEN)  # the emulator hashes files once
        print("tree: %d files, %.1f MiB, read %s; emulator ttfb %g ms"
              % (len(t.data), sum(map(len, t.data.values())) / H.MiB, a.order, a.ttfb_ms))
        for i in range(a.runs):
            res = {}
            for kind, faults in (("clean", []), ("faults", specs)):
                el, errors, fired, reqs, st = one_run(base, emu, t, faults, "%s-%d" % (kind, i),
                                                      a.order == "shuffled")
                res[kind] = el
                print("run %d %-6s %6.2f s  %d requests, %d faults fired, %d errors %s| %s"
                      % (i, kind, el, reqs, fired, len(errors), errors[:3] if errors else "",
                         " ".join("%s=%s" % (k, st[k]) for k in keys if k in st)))
            print("run %d ratio %.2fx" % (i, res["faults"] / res["clean"]))
    finally:
        emu.stop()
        H.emergency_cleanup()
        if not a.keep:
            import shutil
            shutil.rmtree(base, ignore_errors=True)
        else:
            print("kept", base)


if __name__ == "__main__":
    main()
