#!/usr/bin/python3
"""From `colabfs.mount()` to the first byte a notebook reads (issue 23's acceptance), as Colab
would see it: the token from a metadata endpoint named by $TBE_EPHEM_CREDS_ADDR (the emulator's),
Drive 200 ms to the first byte of every call.

    /usr/bin/python3 bench/colab_mount.py [--runs 5] [--ttfb-ms 200] [--workdir /var/tmp]

Each run: a fresh cache folder and mountpoint; in a child Python process (the notebook's kernel),
`import colabfs; colabfs.mount(MNT, api_url=..., cache_dir=...)`, then open and read the first
4 KiB of a 1 MiB file in a folder one level down (a path the notebook names, so the lookups go
to Drive), then `colabfs.flush_and_unmount()`.  Columns: seconds from the call to mount() to its
return, to the first byte read, and flush_and_unmount's seconds.  The reference, measured in the
same run against the same emulator: the floor of any client, the Drive calls that first read
needs done one after the other with no mount at all (a token from the metadata endpoint, the
folder looked up by name, the file looked up by name, its first 4 KiB): what a client that knows
nothing in advance pays in round trips.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402  (the suite's Emulator and clean-up)

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
t0 = time.monotonic()
import colabfs
mnt, api, cache = sys.argv[2], sys.argv[3], sys.argv[4]
colabfs.mount(mnt, api_url=api, cache_dir=cache, quiet=True)
t1 = time.monotonic()
with open(os.path.join(mnt, "data", "first.bin"), "rb") as f:
    b = f.read(4096)
t2 = time.monotonic()
colabfs.flush_and_unmount(mnt, quiet=True)
t3 = time.monotonic()
print(json.dumps({"mount": t1 - t0, "first": t2 - t0, "flush": t3 - t2, "n": len(b)}))
"""


def floor(emu, token):
    """The Drive calls of a first read, back to back, timed."""
    t0 = time.monotonic()
    req = urllib.request.Request(emu.url + "/computeMetadata/v1/instance/service-accounts/default/"
                                 "token", headers={"Metadata-Flavor": "Google"})
    with urllib.request.urlopen(req, timeout=60) as r:
        tok = json.loads(r.read())["access_token"]
    h = {"Authorization": "Bearer " + tok}

    def find(parent, name):
        q = {"q": "'%s' in parents and name = '%s' and trashed = false" % (parent, name),
             "fields": "files(id)"}
        req = urllib.request.Request(emu.url + "/drive/v3/files?" + urllib.parse.urlencode(q),
                                     headers=h)
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())["files"][0]["id"]
    fid = find(find(R.ROOT_ID, "data"), "first.bin")
    req = urllib.request.Request(emu.url + "/drive/v3/files/%s?alt=media" % fid,
                                 headers=dict(h, Range="bytes=0-4095"))
    with urllib.request.urlopen(req, timeout=60) as r:
        r.read()
    return time.monotonic() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ttfb-ms", type=float, default=200)
    ap.add_argument("--workdir", default="/var/tmp")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args(argv)
    b = R.Side(a.keep)
    res, floors = [], []

    def body():
        src = os.path.join(b.work, "first.bin")
        R.write_random(src, 1 << 20, 5)
        spec = os.path.join(b.work, "spec.json")
        with open(spec, "w") as f:
            json.dump({"root": {"id": R.ROOT_ID, "name": "My Drive"}, "items": [
                {"name": "data", "id": "1bench0data0folder0000000000000",
                 "mimeType": "application/vnd.google-apps.folder"},
                {"name": "first.bin", "parent": "1bench0data0folder0000000000000",
                 "path": src}]}, f)
        b.emu = R.Emulator(b, spec, "emu", a.ttfb_ms, 0, 0, ["--api-latency-ms", str(a.ttfb_ms)])
        for i in range(a.runs):
            mnt = os.path.join(b.work, "mnt%d" % i)
            os.makedirs(mnt)
            env = {k: v for k, v in os.environ.items()
                   if k not in ("COLABFS_ACCESS_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS")}
            env.update(HOME=os.path.join(b.work, "home"), COLABFS_BIN=R.BIN,
                       TBE_EPHEM_CREDS_ADDR="127.0.0.1:%d" % b.emu.port)
            r = subprocess.run([sys.executable, "-c", CHILD, os.path.join(TOP, "python"), mnt,
                                b.emu.url, os.path.join(b.work, "cache%d" % i)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=300)
            if r.returncode:
                raise RuntimeError("run %d: %s" % (i, r.stderr[-2000:]))
            res.append(json.loads(r.stdout.strip().splitlines()[-1]))
            floors.append(floor(b.emu, None))
    rc = b.run_in(body, "colabfs-colabmount-", a.workdir)
    print("colabfs.mount() to the first byte: %s; host %d CPUs, load %s" % (
        " ".join(["bench/colab_mount.py"] + (argv or sys.argv[1:])), os.cpu_count(),
        " ".join(open("/proc/loadavg").read().split()[:3])))
    print("emulator: %.0f ms to the first byte of every call; token from TBE_EPHEM_CREDS_ADDR"
          % a.ttfb_ms)
    print("%-28s %8s %8s %8s" % ("seconds", "median", "min", "max"))
    for name, xs in (("mount() returns", [x["mount"] for x in res]),
                     ("first byte read", [x["first"] for x in res]),
                     ("floor: the calls, no mount", floors),
                     ("flush_and_unmount()", [x["flush"] for x in res])):
        if xs:
            print("%-28s %8.2f %8.2f %8.2f" % (name, statistics.median(xs), min(xs), max(xs)))
    if res and floors:
        print("first byte / floor: %.2f" % (statistics.median([x["first"] for x in res]) /
                                            statistics.median(floors)))
    return rc


if __name__ == "__main__":
    sys.exit(main())
