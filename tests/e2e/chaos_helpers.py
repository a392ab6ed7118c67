"""Helpers for the resilience ("chaos") end-to-end tests (tests/e2e/test_chaos.py).

Plain stdlib.  The pieces:

* ``SpecTree``: a spec with explicit ids whose file bytes are kept in memory
  (every byte read through a mount is compared with them);
* ``Workload``: the mixed read workload of the chaos test (sequential reads,
  random preads, concurrent readers of one file, many small files in several
  folders with their listings), run by threads, every byte compared;
* fault-plan and emulator-log helpers: install rules at run time, read how
  often each fired, group the request log by "the same request" (kind, id,
  range start, page) and measure the gaps between a request and its retry;
* the chaos test's fault mix (``MEDIA_FAULTS``, ``META_FAULTS``,
  ``chaos_fault_specs``), also the fault case of bench/run.py workload 8;
* ``cstats``: ``colabfs stats MNT --json``;
* secrets: the access tokens an emulator issued (recomputed from its seed,
  the way tests/emulator/emuauth.py makes them) and a scanner for log files.
"""

import errno
import json
import os
import random
import re
import threading
import time
from pathlib import Path

import helpers as H

KiB = H.KiB
MiB = H.MiB


# --------------------------------------------------------------------------
# the source tree


class SpecTree:
    """Files and folders with explicit ids; ``data[rel]`` holds each file's bytes."""

    def __init__(self, base, label, seed):
        self.base = Path(base)
        self.src = self.base / "src"
        self.src.mkdir(parents=True, exist_ok=True)
        self.label = label
        self.rng = random.Random(seed)
        self.items = []
        self.ids = {}
        self.data = {}
        self.dirs = {}       # rel folder ("" = root) -> sorted child names
        self._n = 0
        self.dirs[""] = []

    def _add(self, rel, item):
        iid = H.mkid("%s/%s" % (self.label, rel))
        parent = os.path.dirname(rel)
        self.ids[rel] = iid
        self._n += 1
        item.update({"id": iid, "name": os.path.basename(rel),
                     "parent": self.ids[parent] if parent else "root",
                     "createdTime": "2023-04-01T%02d:%02d:%02d.000Z"
                     % (self._n // 3600 % 24, self._n // 60 % 60, self._n % 60),
                     "modifiedTime": "2024-02-03T04:05:06.789Z"})
        self.items.append(item)
        self.dirs[parent].append(os.path.basename(rel))
        return iid

    def folder(self, rel):
        self.dirs[rel] = []
        return self._add(rel, {"mimeType": H.FOLDER})

    def file(self, rel, size):
        data = self.rng.randbytes(size)
        iid = H.mkid("%s/%s" % (self.label, rel))
        p = self.src / iid
        p.write_bytes(data)
        self.data[rel] = data
        return self._add(rel, {"path": str(p)})

    def write_spec(self, name="spec.json"):
        for k in self.dirs:
            self.dirs[k].sort()
        self.spec = {"root": {"id": H.ROOT_ID, "name": "My Drive"}, "items": self.items}
        self.spec_path = self.base / name
        self.spec_path.write_text(json.dumps(self.spec, indent=1))
        return self.spec_path

    def files_under(self, folder):
        return sorted(r for r in self.data if os.path.dirname(r) == folder)


# --------------------------------------------------------------------------
# byte comparison



pread_full = H.pread_full  # one copy for every e2e module


def diff_text(got, want, what):
    n = min(len(got), len(want))
    i = next((k for k in range(0, n, 4096) if got[k:k + 4096] != want[k:k + 4096]), n)
    while i < n and got[i] == want[i]:
        i += 1
    return ("%s: bytes differ: got %d bytes, want %d; first difference at +%d (got %r, want %r)"
            % (what, len(got), len(want), i, bytes(got[i:i + 16]), bytes(want[i:i + 16])))


class Mismatch(AssertionError):
    pass


def check(got, want, what):
    if got != want:
        raise Mismatch(diff_text(got, want, what))


# --------------------------------------------------------------------------
# the workload


class Workload:
    """The chaos workload over a mounted SpecTree made by ``chaos_tree()``:

    * ``large/`` listed (names and sizes compared), then ``large/L0.bin`` read
      sequentially (4 MiB reads, like cat);
    * ``large/L1.bin`` with ``npreads`` random preads (1 B .. 2 MiB at random
      offsets, seeded);
    * ``large/L2.bin`` by two readers at once (1 MiB chunks forward, 1.5 MiB +
      1 chunks backward) and ``large/L3.bin`` by two (512 KiB chunks shuffled,
      3 MiB + 4097 chunks from the middle);
    * every small folder by its own thread: listing compared (names and
      sizes), then every file read whole.

    Every byte is compared.  ``run()`` returns the elapsed seconds; failures
    (OSError with its errno, wrong bytes, wrong listings) are in ``errors``."""

    def __init__(self, m, t, large, small_dirs, npreads, seed):
        self.m, self.t = m, t
        self.large, self.small_dirs = large, small_dirs
        self.npreads, self.seed = npreads, seed
        self.errors = []
        self.errnos = {}
        self.bytes = 0
        self.done = []
        self._lock = threading.Lock()

    # one job each
    def _seq(self, rel):
        folder = os.path.dirname(rel)
        names = sorted(os.listdir(self.m.path(folder)))
        if names != self.t.dirs[folder]:
            raise Mismatch("listing of %s: %r, want %r" % (folder, names, self.t.dirs[folder]))
        for name in names:
            r = os.path.join(folder, name)
            size = os.stat(self.m.path(r)).st_size
            if size != len(self.t.data[r]):
                raise Mismatch("%s: st_size %d, want %d" % (r, size, len(self.t.data[r])))
        want = self.t.data[rel]
        off = 0
        with open(self.m.path(rel), "rb", buffering=0) as f:
            while True:
                b = f.read(4 * MiB)
                if not b:
                    break
                check(b, want[off:off + len(b)], "%s read() at %d" % (rel, off))
                off += len(b)
        if off != len(want):
            raise Mismatch("%s: read %d bytes to EOF, want %d" % (rel, off, len(want)))
        return off

    def _preads(self, rel):
        want = self.t.data[rel]
        rng = random.Random(self.seed)
        n = 0
        fd = os.open(self.m.path(rel), os.O_RDONLY)
        try:
            for _ in range(self.npreads):
                size = rng.choice([1, 4096, 65536 + 3, 300000, MiB, 2 * MiB])
                off = rng.randrange(0, len(want))
                got = pread_full(fd, size, off)
                check(got, want[off:off + size], "%s pread(%d, %d)" % (rel, size, off))
                n += len(got)
        finally:
            os.close(fd)
        return n

    def _chunks(self, rel, chunk, order):
        want = self.t.data[rel]
        n = 0
        fd = os.open(self.m.path(rel), os.O_RDONLY)
        try:
            for k in order:
                off = k * chunk
                got = pread_full(fd, chunk, off)
                check(got, want[off:off + chunk], "%s chunk %d x %d" % (rel, k, chunk))
                n += len(got)
        finally:
            os.close(fd)
        return n

    def _small(self, folder):
        names = sorted(os.listdir(self.m.path(folder)))
        if names != self.t.dirs[folder]:
            raise Mismatch("listing of %s: missing %r, unexpected %r"
                           % (folder, sorted(set(self.t.dirs[folder]) - set(names))[:10],
                              sorted(set(names) - set(self.t.dirs[folder]))[:10]))
        n = 0
        for rel in self.t.files_under(folder):
            want = self.t.data[rel]
            size = os.stat(self.m.path(rel)).st_size
            if size != len(want):
                raise Mismatch("%s: st_size %d, want %d" % (rel, size, len(want)))
            with open(self.m.path(rel), "rb", buffering=0) as f:
                got = b""
                while True:
                    b = f.read(128 * KiB)
                    if not b:
                        break
                    got += b
            check(got, want, rel)
            n += len(got)
        return n

    def jobs(self):
        l0, l1, l2, l3 = self.large
        size2 = len(self.t.data[l2])
        size3 = len(self.t.data[l3])
        c_b = 3 * MiB // 2 + 1
        c_d = 3 * MiB + 4097
        shuffled = list(range(size3 // (512 * KiB)))
        random.Random(self.seed + 1).shuffle(shuffled)
        nd = (size3 + c_d - 1) // c_d
        out = [("seq " + l0, lambda: self._seq(l0)),
               ("preads " + l1, lambda: self._preads(l1)),
               ("fwd " + l2, lambda: self._chunks(l2, MiB, range(size2 // MiB))),
               ("back " + l2, lambda: self._chunks(l2, c_b, reversed(range((size2 + c_b - 1) // c_b)))),
               ("shuffled " + l3, lambda: self._chunks(l3, 512 * KiB, shuffled)),
               ("middle " + l3, lambda: self._chunks(l3, c_d, [(nd // 2 + i) % nd for i in range(nd)]))]
        for d in self.small_dirs:
            out.append(("small " + d, lambda d=d: self._small(d)))
        return out

    def run(self, timeout):
        go = threading.Event()

        def body(name, fn):
            try:
                go.wait()
                n = fn()
                with self._lock:
                    self.bytes += n
                    self.done.append(name)
            except OSError as e:
                with self._lock:
                    code = errno.errorcode.get(e.errno, str(e.errno))
                    self.errnos[code] = self.errnos.get(code, 0) + 1
                    self.errors.append("%s: %s (%s)" % (name, code, e))
            except BaseException as e:  # noqa: B902 - reported by the test
                with self._lock:
                    self.errors.append("%s: %s" % (name, e))

        jobs = self.jobs()
        threads = [threading.Thread(target=body, args=j, name="chaos-" + j[0], daemon=True) for j in jobs]
        for th in threads:
            th.start()
        t0 = time.monotonic()
        go.set()
        try:
            H.wait_until(lambda: not any(th.is_alive() for th in threads), timeout, interval=0.05,
                         what="the chaos workload to finish")
        except H.Timeout:
            stuck = [th.name for th in threads if th.is_alive()]
            raise AssertionError("workload not finished after %ss; still running: %r; errors so far: %r"
                                 % (timeout, stuck, self.errors[:5]))
        return time.monotonic() - t0


def chaos_tree(base, large_size, nlarge, small_dirs, small_per_dir, small_min, small_max, seed):
    t = SpecTree(base, "chaos", seed)
    t.folder("large")
    large = []
    for i in range(nlarge):
        rel = "large/L%d.bin" % i
        t.file(rel, large_size)
        large.append(rel)
    dirs = []
    for d in range(small_dirs):
        folder = "small%d" % d
        t.folder(folder)
        dirs.append(folder)
        for i in range(small_per_dir):
            t.file("%s/s%04d.bin" % (folder, i), t.rng.randrange(small_min, small_max + 1))
    t.write_spec()
    return t, large, dirs


# --------------------------------------------------------------------------
# the fault mix of the chaos test (also bench/run.py workload 8's fault case)

LIST_PAGE_CAP = 40   # files.list page cap of the chaos emulator (several pages a folder)

# Media: independent rules with seeded probabilities, ~10% of media requests
# in all (the first rule that fires wins).  Listings: deterministic rules
# (there are only tens of listing calls; every Nth fails).  colabfs makes no
# files.get calls while reading, so none are faulted.
MEDIA_FAULTS = [
    ("500", "status=500", 0.009),
    ("502", "status=502", 0.009),
    ("503", "status=503", 0.009),
    ("504", "status=504", 0.009),
    ("429", "status=429,retry_after=1", 0.012),
    ("403 rate", "status=403,reason=rateLimitExceeded", 0.008),
    ("403 user rate", "status=403,reason=userRateLimitExceeded", 0.008),
    ("reset early", "reset_after=4096", 0.005),
    ("reset late", "reset_after=300000", 0.005),
    ("drop", "drop=1", 0.005),
    ("bad range", "bad_range=1", 0.008),
    ("short body", "truncate=1", 0.005),
    ("stall 1.5s", "stall_ms=1500", 0.003),
    ("stall 1.5s mid-body", "stall_ms=1500,stall_after=65536", 0.003),
]
META_FAULTS = [
    ("list truncated JSON", "kind=files.list,truncate=1,every=6"),
    ("list 503", "kind=files.list,status=503,every=10"),
    ("list 429", "kind=files.list,status=429,retry_after=1,every=15"),
    ("list 403 rate", "kind=files.list,status=403,reason=userRateLimitExceeded,every=19"),
]


def chaos_fault_specs():
    out = [(name, "kind=media,%s,prob=%g" % (spec, p)) for name, spec, p in MEDIA_FAULTS]
    return out + META_FAULTS


# --------------------------------------------------------------------------
# the emulator's fault plan and request log


def set_faults(emu, specs):
    st, _, body = emu.request("POST", "/_emu/faults", data=json.dumps({"faults": list(specs)}).encode(),
                              headers={"Content-Type": "application/json"})
    assert st == 200, "POST /_emu/faults -> %s %r" % (st, body[:500])
    return json.loads(body)["faults"]


def get_faults(emu):
    st, _, body = emu.request("GET", "/_emu/faults")
    assert st == 200, (st, body[:300])
    return json.loads(body)["faults"]


def range_start(r):
    rng = r.get("range")
    if not rng or not rng.startswith("bytes="):
        return None
    return int(rng[len("bytes="):].partition("-")[0])


def request_key(r):
    """What makes two log records "the same request" (a retry of each other):
    kind, file id, range start, and for listings the query and page token."""
    q = r.get("query") or {}
    return (r["kind"], r.get("id"), range_start(r), q.get("q"), q.get("pageToken"))


def fault_retry_after(label):
    """The retry_after of a fault label (``status=429,retry_after=1,...``), or None."""
    if not label:
        return None
    m = re.search(r"(?:^|,)\s*retry_after=([0-9.]+)", label)
    return float(m.group(1)) if m else None


def retry_after_violations(records, slack=0.002):
    """([problem], checked, in_flight).  Each reply that carried a Retry-After
    is checked against the first request for the same range that Drive
    received after that reply had gone out (its arrival plus its ms, on the
    emulator's monotonic clock, "mono": a step of the wall clock between two
    records once made a retry a second later look 0.27 s early): it
    must have come no sooner than Retry-After seconds after the refused
    request arrived (the client cannot have had the reply before that).
    Requests for the range that arrived while the reply was still on its way
    (a hedge racing the refused request, sent before anyone could know of the
    Retry-After) are counted in in_flight, not checked: no retry can be among
    them, since a retry follows the reply."""
    by_key = {}
    for r in sorted(records, key=lambda r: r["mono"]):
        by_key.setdefault(request_key(r), []).append(r)
    bad, checked, in_flight = [], 0, 0
    for rs in by_key.values():
        for i, a in enumerate(rs):
            ra = fault_retry_after(a.get("fault"))
            if ra is None or a["status"] < 400:
                continue
            replied = a["mono"] + (a.get("ms") or 0.0) / 1000.0
            later = rs[i + 1:]
            in_flight += sum(1 for b in later if b["mono"] < replied)
            b = next((b for b in later if b["mono"] >= replied), None)
            if b is None:
                continue
            checked += 1
            if b["mono"] - a["mono"] < ra - slack:
                q = a.get("query") or {}
                bad.append("%s %s range=%s q=%r page=%r: asked again %.3fs after a request refused "
                           "with Retry-After: %g (fault %r; the refusal took %s ms; the next: %r; "
                           "the wall clock saw %.3fs)"
                           % (a["kind"], a.get("id"), a.get("range"), q.get("q"),
                              (q.get("pageToken") or "")[:12], b["mono"] - a["mono"], ra,
                              a.get("fault"), a.get("ms"),
                              {k: b.get(k) for k in ("status", "ms", "fault", "cancelled")},
                              b["t"] - a["t"]))
    return bad, checked, in_flight


# --------------------------------------------------------------------------
# colabfs


def cstats(m):
    """``colabfs stats MNT --json`` as a dict."""
    rc, out, err = H.run_cmd([str(H.colabfs_bin()), "stats", m.mnt, "--json"], 30, env=m.env)
    assert rc == 0, "colabfs stats --json rc=%r: %s %s" % (rc, out, err)
    try:
        return json.loads(out)
    except ValueError:
        raise AssertionError("colabfs stats --json printed no JSON: %r" % out[:2000])


def log_text(m):
    try:
        with open(m.log_file, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def log_lines(m, *needles):
    return [ln for ln in log_text(m).splitlines() if any(n in ln for n in needles)]



timed_open_read = H.timed_read  # one copy for every e2e module


# --------------------------------------------------------------------------
# secrets

_TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def issued_tokens(seed, n):
    """The first n access tokens an emulator started with --seed SEED issues
    (tests/emulator/emuauth.py: "ya29." + 120 choices of a Random("tokens:SEED"))."""
    rng = random.Random("tokens:%s" % seed)
    return ["ya29." + "".join(rng.choice(_TOKEN_CHARS) for _ in range(120)) for _ in range(n)]


SECRET_PATTERNS = [
    (re.compile(rb"ya29\.[A-Za-z0-9._-]{6,}"), "an access token (ya29.)"),
    (re.compile(rb"Bearer\s+[A-Za-z0-9._~+/-]{6,}"), "a bearer token"),
    (re.compile(rb"1//[A-Za-z0-9._-]{6,}"), "a refresh token (1//)"),
]


def scan_for_secrets(paths, secrets):
    """[problem] for every path whose bytes hold one of the literal secrets or
    match a token pattern."""
    problems = []
    for p in paths:
        try:
            data = Path(p).read_bytes()
        except OSError as e:
            problems.append("%s: unreadable: %s" % (p, e))
            continue
        for s in secrets:
            if s and s.encode() in data:
                i = data.index(s.encode())
                line = data[data.rfind(b"\n", 0, i) + 1:i].decode("utf-8", "replace")[-120:]
                problems.append("%s: holds secret %s... (line starts %r)" % (p, s[:8], line))
        for rx, what in SECRET_PATTERNS:
            mt = rx.search(data)
            if mt:
                problems.append("%s: holds %s: %r..." % (p, what, mt.group(0)[:16]))
    return problems
