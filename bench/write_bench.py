#!/usr/bin/python3
"""Writes (issue 12): how fast a checkpoint is saved into the mount, how long until Drive has it,
and what fsync costs, each next to a reference measured in the same run.

    /usr/bin/python3 bench/write_bench.py [--size-mib 1024] [--reps 20] [--workdir /var/tmp]
                                          [--mount-opt=OPT ...] [--keep] [--json FILE]

Rows:
  W1  a 1 GiB checkpoint (random bytes, 8 MiB write()s) written into the mount: bytes / time until
      close() returns (staged on disk and journaled); reference: the same bytes written to a file
      on the local disk, to close().
  W2  from that close() to durable in Drive (`colabfs sync MOUNT` returns 0): the upload with
      Drive's resumable protocol (8 MiB chunks, md5 checked); reference: the emulator's line rate:
      the same bytes sent straight to it by this script, one resumable session, 8 MiB chunks, one
      keep-alive connection (http.client).
  W3n fsync(2) of a new 4 KiB file (create, write, fsync: the file's upload, a multipart create),
      --reps files, median and p95; reference: fsync of a new 4 KiB file on the local disk.
  W3u the same for rewriting one 4 KiB file that Drive has (an update, no create).

The mount runs with its defaults (--write-back-delay 5: `colabfs sync` and fsync start the upload
at once; creations paced from 3/s up to --create-rate 10 since issue 22, 2/s fixed before: W3n's
creations are paced, which is what a user gets). The cache folder,
and so the staging folder, is on disk under --workdir; the emulator (no bandwidth limit, no time
to first byte) keeps what it is sent in memory (about 2 x --size-mib). Every byte sent is checked
(untimed) against Drive's md5. Everything started is stopped and the folder deleted at exit.
"""

import argparse
import hashlib
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402  (the suite's Emulator, Mount and clean-up)

MiB, GiB = R.MiB, R.GiB
CHUNK = 8 * MiB        # colabfs's resumable chunk (CFS_DRIVE_CHUNK), also the reference's
WRITE = 8 * MiB        # the write() size of W1


def write_file(path, data, sync=False):
    """Write ``data`` to ``path`` in WRITE-sized write()s; seconds until close() returned."""
    view = memoryview(data)
    t = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for off in range(0, len(data), WRITE):
            os.write(fd, view[off:off + WRITE])
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t


def fsync_times(paths, reps, new):
    """Seconds of each fsync(2) of a 4 KiB write: a new file per rep (``new``) or the same one."""
    out = []
    for i in range(reps):
        path = paths % i if new else paths
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, os.urandom(4096))
            t = time.perf_counter()
            os.fsync(fd)
            out.append(time.perf_counter() - t)
        finally:
            os.close(fd)
    return out


def line_rate(emu, data, name):
    """``data`` straight to the emulator: one resumable session, CHUNK-sized PUTs on one keep-alive
    connection.  Returns (seconds, the new file's id)."""
    conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=600)
    auth = {"Authorization": "Bearer " + R.TOKEN}
    t = time.perf_counter()
    meta = json.dumps({"name": name, "parents": [R.ROOT_ID]}).encode()
    conn.request("POST", "/upload/drive/v3/files?uploadType=resumable", meta,
                 dict(auth, **{"Content-Type": "application/json; charset=UTF-8",
                               "X-Upload-Content-Length": str(len(data))}))
    r = conn.getresponse()
    r.read()
    if r.status != 200:
        raise RuntimeError("resumable start: HTTP %d" % r.status)
    loc = urllib.parse.urlsplit(r.getheader("Location"))
    uri = loc.path + "?" + loc.query
    view = memoryview(data)
    for off in range(0, len(data), CHUNK):
        end = min(len(data), off + CHUNK)
        conn.request("PUT", uri, view[off:end],
                     dict(auth, **{"Content-Range": "bytes %d-%d/%d" % (off, end - 1, len(data))}))
        r = conn.getresponse()
        body = r.read()
        if r.status not in (200, 201, 308):
            raise RuntimeError("chunk at %d: HTTP %d %r" % (off, r.status, body[:200]))
    secs = time.perf_counter() - t
    conn.close()
    if r.status not in (200, 201):
        raise RuntimeError("the last chunk did not finish the upload: HTTP %d" % r.status)
    return secs, json.loads(body)["id"]


def drive_md5(emu, path):
    items = [i for i in emu.call("/_emu/find?path=" + urllib.parse.quote(path))["items"] if not i["trashed"]]
    if len(items) != 1:
        raise RuntimeError("Drive has %d files at %s" % (len(items), path))
    return items[0]["md5Checksum"]


def csync(m, timeout=1200):
    r = subprocess.run([R.BIN, "sync", "--quiet", "--timeout", str(timeout), m.mnt], env=m.env,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout + 60)
    if r.returncode != 0:
        raise RuntimeError("colabfs sync rc %d: %s" % (r.returncode, r.stdout.decode(errors="replace")))


def p95(xs):
    return sorted(xs)[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def bench(b, a, rows):
    size = a.size_mib * MiB
    data = os.urandom(size)
    md5 = hashlib.md5(data).hexdigest()
    local = os.path.join(b.work, "local")
    os.makedirs(local)
    m = b.new_mount("w")
    R.log("mounted; writing %d MiB" % a.size_mib)
    # W1: the reference first, then the mount, then the reference again: the median of the two
    # local runs (the page cache is warm for both the same way)
    refs = [write_file(os.path.join(local, "ckpt%d.pt" % i), data) for i in range(2)]
    secs = write_file(m.path("ckpt.pt"), data)
    t_closed = time.monotonic()
    csync(m)
    durable = time.monotonic() - t_closed
    refs.append(write_file(os.path.join(local, "ckpt2.pt"), data))
    for i in range(3):
        os.unlink(os.path.join(local, "ckpt%d.pt" % i))
    ref = statistics.median(refs)
    rows.append(("W1", "1 GiB checkpoint written into the mount (to close)", size / secs / 1e6,
                 size / ref / 1e6, "MB/s", "local disk file",
                 "%.2f s vs %.2f s (local runs %s s)" % (secs, ref, "/".join("%.2f" % r for r in refs))))
    if drive_md5(b.emu, "/ckpt.pt") != md5:
        raise RuntimeError("Drive's md5 of ckpt.pt differs from the bytes written")
    st = m.stats()
    lsecs, fid = line_rate(b.emu, data, "ref.bin")
    if b.emu.call("/_emu/items/" + fid)["md5Checksum"] != md5:
        raise RuntimeError("the reference upload's md5 differs")
    rows.append(("W2", "close -> durable in Drive (colabfs sync returns)", size / durable / 1e6,
                 size / lsecs / 1e6, "MB/s", "emulator line rate",
                 "%.2f s vs %.2f s (one resumable session, %d MiB chunks); uploads_retries_total %s"
                 % (durable, lsecs, CHUNK // MiB, st.get("uploads_retries_total", "n/a"))))
    del data
    # W3: fsync of 4 KiB
    for key, name, new in (("W3n", "fsync of a new 4 KiB file", True),
                           ("W3u", "fsync of a rewritten 4 KiB file", False)):
        if not new:
            write_file(m.path("small.bin"), b"x" * 4096, sync=True)
            write_file(os.path.join(local, "small.bin"), b"x" * 4096, sync=True)
        mt = fsync_times(m.path("new%02d.bin" if new else "small.bin"), a.reps, new)
        lt = fsync_times(os.path.join(local, "new%02d.bin" if new else "small.bin"), a.reps, new)
        rows.append((key, name + ", median (%d reps)" % a.reps, statistics.median(mt) * 1e3,
                     statistics.median(lt) * 1e3, "ms", "local disk fsync",
                     "p95 %.1f ms vs %.2f ms; max %.1f ms" % (p95(mt) * 1e3, p95(lt) * 1e3, max(mt) * 1e3)))
    for i in range(a.reps):
        if drive_md5(b.emu, "/new%02d.bin" % i) != hashlib.md5(open(m.path("new%02d.bin" % i), "rb").read()).hexdigest():
            raise RuntimeError("new%02d.bin differs in Drive" % i)
    m.umount()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mib", type=int, default=1024, help="checkpoint size (1024)")
    ap.add_argument("--reps", type=int, default=20, help="fsyncs per W3 row (20)")
    ap.add_argument("--workdir", default="/var/tmp", help="a folder on disk (/var/tmp)")
    ap.add_argument("--mount-opt", action="append", default=[], metavar="OPT",
                    help="extra colabfs mount option, e.g. --mount-opt=--create-rate=100 (repeatable)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    st = os.statvfs(a.workdir)
    if st.f_bavail * st.f_frsize < 4 * a.size_mib * MiB:
        raise SystemExit("write_bench: %s has too little free space" % a.workdir)
    b = R.Side(a.keep, a.mount_opt)
    rows = []

    def body():
        spec = os.path.join(b.work, "spec.json")
        with open(spec, "w") as f:
            json.dump({"root": {"id": R.ROOT_ID, "name": "My Drive"}, "items": []}, f)
        b.emu = R.Emulator(b, spec, "emu", 0, 0, 0)
        bench(b, a, rows)
    rc = b.run_in(body, "colabfs-writebench-", a.workdir)
    print("colabfs write bench: %s; host %d CPUs, load %s" % (
        " ".join(["bench/write_bench.py"] + (argv or sys.argv[1:])), os.cpu_count(),
        " ".join(open("/proc/loadavg").read().split()[:3])))
    print("%-4s %-52s %12s %12s  %-20s %6s  %s" % ("row", "workload", "measured", "reference",
                                                  "reference is", "ratio", "notes"))
    for key, name, v, ref, unit, ref_name, note in rows:
        ratio = v / ref if unit == "MB/s" else ref / v
        print("%-4s %-52s %7.1f %-4s %7.1f %-4s  %-20s %5.0f%%  %s" % (key, name, v, unit, ref, unit,
                                                                      ref_name, 100 * ratio, note))
    print("ratio = measured speed / reference speed (for times: reference / measured)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([dict(zip(("key", "workload", "measured", "reference", "unit", "ref_name", "note"), r))
                       for r in rows], f, indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
