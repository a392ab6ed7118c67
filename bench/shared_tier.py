#!/usr/bin/python3
"""The shared-dataset workload with and without the shared cache tier (issue 15).

    /usr/bin/python3 bench/shared_tier.py [--files 1000] [--size 32768] [--ttfb-ms 200]
                                          [--user-rate 200] [--readers 2] [--mounts 1,2,3]
                                          [--tiers off,on] [--mac on|off|both] [--repeat N]
                                          [--mount-opt=OPT ...] [--json FILE] [--keep]

Several Colab machines train on one dataset in one Drive account: one Drive emulator (200 ms to
first byte, a per-user quota of --user-rate requests/s shared by every mount, as Drive's is) serves
a flat folder of --files files of --size bytes; 1, 2 and 3 mounts, each with a cache of its own,
read every file of it at once, each mount in its own shuffled order with --readers threads (a
Colab DataLoader has 2 workers), every byte compared. Each count of mounts runs without the tier
and with it (``colabfs mount --shared-cache=redis://...`` on one real 6-node Redis Cluster, 3
masters + 3 replicas, started from Debian's redis-server by tests/e2e/redis_cluster.py and emptied
between runs). Every run gets fresh mounts and caches, the emulator's counters are reset and its
quota bucket refilled.

The tier's values are authenticated (issue 24): ``--mac on`` (the default) mounts with
``--shared-cache-key-file`` (HMAC-SHA256 values), ``--mac off`` with ``--shared-cache-trusted``
(crc32c values, as before keys), ``--mac both`` runs every tier row both ways, in turns for each
count of mounts (with ``--repeat``, ABBA: neither build always runs first), and says whether the
MAC rows are within 5% of the rows without it.
``--repeat N`` runs every row N times and reports the median files/s (each run in the notes).

Prints one table: mounts, tier, aggregate files/s (files read over all mounts / wall time of the
reads; the listing before is not timed), Drive requests per file read (every Drive API request the
emulator saw, quota refusals included, over the files read by all mounts), and the ratio of the
files/s to the no-tier 3-mount run's (the reference, measured in the same run). The notes give, per
run, media requests, quota refusals and the tier counters summed over the mounts. A run whose mount
fails (a colabfs without --shared-cache) shows n/a with the reason. Needs root, /dev/fuse, free
space in /dev/shm, and redis-server (for the tier rows); everything it starts is unmounted and
stopped at exit, even on error or Ctrl-C.
"""

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import helpers as H  # noqa: E402 - the e2e suite's emulator and mount handling, plain stdlib
import redis_cluster as RC  # noqa: E402

TOKEN = "shared-tier-bench-token"
FOLDER_ID = "1SharedTierBenchFolder0000000000"
TIER_KEYS = ["tier_hits_total", "tier_misses_total", "tier_published_total",
             "tier_lease_waits_total", "tier_lease_wait_hits_total", "tier_lease_timeouts_total",
             "tier_corrupt_total", "tier_forged_total", "tier_errors_total", "tier_bypassed_total"]
KEY = b"5f0c9e2b7a41d38e6c1f0a9b2d4e6f8071a3c5e7092b4d6f8a1c3e5079b2d4f6\n"


def make_tree(base, files, size, seed):
    src = os.path.join(base, "src")
    os.makedirs(src)
    rng = random.Random(seed)
    items = [{"id": FOLDER_ID, "name": "ds", "parent": "root", "mimeType": H.FOLDER}]
    data = {}
    for i in range(files):
        name = "f%05d.bin" % i
        d = rng.randbytes(size)
        p = os.path.join(src, name)
        with open(p, "wb") as f:
            f.write(d)
        data["ds/" + name] = d
        items.append({"id": H.mkid("shared-tier/" + name), "name": name, "parent": FOLDER_ID,
                      "path": p})
    spec = os.path.join(base, "spec.json")
    with open(spec, "w") as f:
        json.dump({"root": {"id": H.ROOT_ID, "name": "My Drive"}, "items": items}, f)
    return spec, data


def cpu_seconds(pid):
    """User + system CPU seconds of a live process so far (0 when it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, TypeError):
        return 0.0


def mount_cpu_seconds(m):
    """CPU seconds of a mount's supervisor and its server so far."""
    return cpu_seconds(m.pid) + cpu_seconds(H.serve_pid(m.pid) if m.pid else None)


def cstats(m):
    rc, out, err = H.run_cmd([str(H.colabfs_bin()), "stats", m.mnt, "--json"], 30, env=m.env)
    if rc != 0:
        return {}
    try:
        return json.loads(out)
    except ValueError:
        return {}


class Bench:
    def __init__(self, a):
        self.a = a
        self.base = tempfile.mkdtemp(prefix="colabfs-bench-tier-", dir="/dev/shm")
        self.mounts = []
        self.emu = None
        self.cluster = None
        self.rows = []
        self.notes = []

    def cleanup(self):
        for m in self.mounts:
            try:
                m.cleanup()
            except Exception as e:  # noqa: B902 - best effort at exit
                print("cleanup of %s: %s" % (m.mnt, e), file=sys.stderr)
        self.mounts = []
        if self.emu is not None:
            self.emu.stop()
        if self.cluster is not None:
            self.cluster.close()
        if not self.a.keep:
            shutil.rmtree(self.base, ignore_errors=True)
        else:
            print("kept %s" % self.base)

    def key_file(self):
        p = os.path.join(self.base, "tier.key")
        if not os.path.exists(p):
            with open(p, "wb") as f:
                f.write(KEY)
            os.chmod(p, 0o600)
        return p

    def mount(self, name, tier):
        d = os.path.join(self.base, name)
        home = os.path.join(d, "home")
        os.makedirs(home)
        env = H.clean_env(home=home)
        env["COLABFS_ACCESS_TOKEN"] = TOKEN
        log = os.path.join(d, "colabfs.log")
        args = ["--api-url=" + self.emu.url, "--cache-dir=" + os.path.join(d, "cache"),
                "--log-file=" + log, "--log-level=info"] + list(self.a.mount_opt)
        if tier:
            args.append("--shared-cache=" + self.cluster.seeds)
            args.append("--shared-cache-key-file=" + self.key_file() if tier == "mac"
                        else "--shared-cache-trusted")
        m = H.Mount(os.path.join(d, "mnt"), args, env, log_file=log)
        self.mounts.append(m)
        rc, out, err = m.start(check=False)
        if rc != 0 or not H.is_fuse_mounted(m.mnt):
            raise RuntimeError("mount failed rc=%s: %s" % (rc, (err or out).strip()[-200:]))
        return m

    def reset_emulator(self):
        self.emu.reset()
        body = json.dumps({"rate": self.a.user_rate}).encode()
        st, _, _ = self.emu.request("POST", "/_emu/quota", data=body,
                                    headers={"Content-Type": "application/json"})
        assert st == 200, "POST /_emu/quota -> %s" % st

    def run_one(self, n, tier, data, run_no):
        """One run of n mounts; tier: None, "mac" or "trusted"."""
        for m in self.mounts:
            m.cleanup()
        self.mounts = []
        if tier:
            self.cluster.flushall()
        self.reset_emulator()
        mounts = [self.mount("r%d-%s-m%d" % (run_no, tier or "plain", i), tier)
                  for i in range(n)]
        rels = sorted(data)
        for m in mounts:  # the Dataset's constructor lists the folder (untimed)
            names = sorted(os.listdir(m.path("ds")))
            assert len(names) == len(rels), "listing: %d names, want %d" % (len(names), len(rels))
        errors, lock = [], threading.Lock()
        go = threading.Event()

        def reader(m, order):
            go.wait()
            for rel in order:
                try:
                    with open(m.path(rel), "rb", buffering=0) as f:
                        got = f.read()
                    if got != data[rel]:
                        raise ValueError("%s: wrong bytes" % rel)
                except (OSError, ValueError) as e:
                    with lock:
                        errors.append("%s: %s" % (m.mnt, e))
        threads = []
        for i, m in enumerate(mounts):
            order = list(rels)
            random.Random(self.a.seed * 101 + i).shuffle(order)
            for w in range(self.a.readers):
                threads.append(threading.Thread(target=reader, args=(m, order[w::self.a.readers]),
                                                daemon=True))
        for th in threads:
            th.start()
        cpu0 = sum(mount_cpu_seconds(m) for m in mounts)
        t0 = time.monotonic()
        go.set()
        H.wait_until(lambda: not any(th.is_alive() for th in threads), self.a.timeout,
                     interval=0.01, what="the readers")
        secs = time.monotonic() - t0
        cpu = sum(mount_cpu_seconds(m) for m in mounts) - cpu0
        es = self.emu.stats()
        tot = {}
        for m in mounts:
            st = cstats(m)
            for k in TIER_KEYS:
                tot[k] = tot.get(k, 0) + st.get(k, 0)
        files = n * len(rels)
        api = es["requests"] - es["by_kind"].get("token", 0) - es["by_kind"].get("metadata", 0)
        row = {"mounts": n, "tier": TIER_NAMES[tier], "seconds": secs, "server_cpu_s": cpu,
               "files_per_s": files / secs, "requests_per_file": api / files,
               "media": es["by_kind"].get("media", 0), "quota_rejected": es.get("quota_rejected", 0),
               "errors": len(errors), "tier_counters": tot if tier else None}
        if errors:
            self.notes.append("%d mounts, tier %s: %d read errors, e.g. %s"
                              % (n, row["tier"], len(errors), errors[:3]))
        return row

    def main(self):
        a = self.a
        print("making %d files of %d bytes under %s" % (a.files, a.size, self.base))
        spec, data = make_tree(self.base, a.files, a.size, a.seed)
        self.emu = H.Emulator(spec, os.path.join(self.base, "emu"), access_token=TOKEN,
                              ttfb_ms=a.ttfb_ms, extra=["--user-rate", str(a.user_rate)])
        self.emu.start()
        if "on" in a.tiers:
            why = RC.available()
            if why:
                self.notes.append("tier rows skipped: " + why)
                a.tiers = [t for t in a.tiers if t != "on"]
            else:
                self.cluster = RC.RedisCluster(os.path.join(self.base, "redis")).start()
        run_no = 0
        macs = {"on": ["mac"], "off": ["trusted"], "both": ["mac", "trusted"]}[a.mac]
        plan = [(n, [None]) for n in a.mounts] if "off" in a.tiers else []
        if "on" in a.tiers:  # with --mac both, the two builds of a row in turns
            plan += [(n, macs) for n in a.mounts]
        for n, tiers in plan:
            runs = {tier: [] for tier in tiers}
            for rep in range(a.repeat):  # ABBA...: no build always runs first
                for tier in (tiers if rep % 2 == 0 else tiers[::-1]):
                    run_no += 1
                    try:
                        r = self.run_one(n, tier, data, run_no)
                    except (RuntimeError, AssertionError, H.Timeout) as e:
                        r = {"mounts": n, "tier": TIER_NAMES[tier], "na": str(e)}
                    runs[tier].append(r)
                    print("  %d mount(s), tier %s: %s" % (
                        n, r["tier"], "n/a: " + r["na"] if "na" in r
                        else "%.1f files/s" % r["files_per_s"]))
            self.rows += [median_row(runs[tier]) for tier in tiers]
        self.table()

    def table(self):
        ref = next((r for r in self.rows if r["mounts"] == 3 and r["tier"] == "off" and
                    "na" not in r), None)
        print()
        print("shared dataset: %d files x %d bytes, ttfb %d ms, quota %d requests/s for all "
              "mounts, %d reader threads per mount" % (self.a.files, self.a.size, self.a.ttfb_ms,
                                                        self.a.user_rate, self.a.readers))
        print("| mounts | tier | files/s (all mounts) | Drive requests per file | ratio vs 3 mounts "
              "without tier |")
        print("|---|---|---|---|---|")
        for r in self.rows:
            if "na" in r:
                print("| %d | %s | n/a | n/a | n/a (%s) |" % (r["mounts"], r["tier"], r["na"]))
                continue
            ratio = "%.2fx" % (r["files_per_s"] / ref["files_per_s"]) if ref else "n/a"
            print("| %d | %s | %.1f | %.3f | %s |" % (r["mounts"], r["tier"], r["files_per_s"],
                                                      r["requests_per_file"], ratio))
        print()
        for r in self.rows:
            if "na" in r:
                continue
            print("- %d mount(s), tier %s: %.2f s, servers' CPU %.2f s, %d media requests, %d "
                  "refused by the quota, %d read errors%s" % (r["mounts"], r["tier"], r["seconds"],
                                     r["server_cpu_s"], r["media"],
                                     r["quota_rejected"], r["errors"],
                                     "; tier: " + ", ".join("%s %d" % (k[5:], v) for k, v in
                                                            r["tier_counters"].items())
                                     if r["tier_counters"] else ""))
        for r in self.rows:
            if len(r.get("runs", [])) > 1:
                print("- %d mount(s), tier %s: files/s of each run %s; servers' CPU s %s" % (
                    r["mounts"], r["tier"], ", ".join("%.1f" % x for x in r["runs"]),
                    ", ".join("%.2f" % x for x in r["cpu_runs"])))
        verdict = mac_verdict_lines(self.rows)
        for n in verdict + self.notes:
            print("- " + n)
        if self.a.json:
            with open(self.a.json, "w") as f:
                json.dump({"rows": self.rows, "mac": verdict, "notes": self.notes}, f, indent=1)


TIER_NAMES = {None: "off", "mac": "on (MAC)", "trusted": "on (no MAC)"}


def median_row(runs):
    """The run of median files/s (the others' files/s kept in "runs")."""
    ok = sorted((r for r in runs if "na" not in r), key=lambda r: r["files_per_s"])
    if not ok:
        return runs[-1]
    row = dict(ok[(len(ok) - 1) // 2])
    row["runs"] = [r["files_per_s"] for r in runs if "na" not in r]
    row["cpu_runs"] = [r["server_cpu_s"] for r in runs if "na" not in r]
    return row


def mac_verdict_lines(rows):
    """For each count of mounts run both ways: the MAC row against the row without it."""
    out = []
    by = {(r["mounts"], r["tier"]): r for r in rows if "na" not in r}
    for n in sorted({r["mounts"] for r in rows}):
        a, b = by.get((n, TIER_NAMES["mac"])), by.get((n, TIER_NAMES["trusted"]))
        if a and b:
            d = a["files_per_s"] / b["files_per_s"] - 1
            ca = sorted(a.get("cpu_runs", [a["server_cpu_s"]]))
            cb = sorted(b.get("cpu_runs", [b["server_cpu_s"]]))
            out.append("%d mount(s): MAC %.1f files/s vs %.1f without (%+.1f%%): %s; the "
                       "servers' CPU (median) %.2f s vs %.2f s" % (
                           n, a["files_per_s"], b["files_per_s"], 100 * d,
                           "within 5%" if abs(d) <= 0.05 else "NOT within 5%",
                           ca[(len(ca) - 1) // 2], cb[(len(cb) - 1) // 2]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--size", type=int, default=32 * 1024)
    ap.add_argument("--ttfb-ms", type=int, default=200)
    ap.add_argument("--user-rate", type=int, default=200)
    ap.add_argument("--readers", type=int, default=2, help="reader threads per mount")
    ap.add_argument("--mounts", default="1,2,3")
    ap.add_argument("--tiers", default="off,on")
    ap.add_argument("--mac", choices=("on", "off", "both"), default="on",
                    help="tier rows with the MAC (a key file), without it (trusted), or both")
    ap.add_argument("--repeat", type=int, default=1, help="runs per row (the median is shown)")
    ap.add_argument("--mount-opt", action="append", default=[], metavar="OPT")
    ap.add_argument("--seed", type=int, default=1515)
    ap.add_argument("--timeout", type=float, default=300, help="seconds a run may take")
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    a.mounts = [int(x) for x in a.mounts.split(",")]
    a.tiers = [x for x in a.tiers.split(",") if x]
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        sys.exit("needs root and /dev/fuse (it mounts)")
    if not os.access(str(H.colabfs_bin()), os.X_OK):
        sys.exit("no colabfs binary at %s (make, or set COLABFS_BIN)" % H.colabfs_bin())

    def on_signal(sig, frame):
        raise SystemExit(128 + sig)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    b = Bench(a)
    try:
        b.main()
    finally:
        b.cleanup()


if __name__ == "__main__":
    main()
