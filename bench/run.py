#!/usr/bin/python3
"""colabfs benchmark suite: the workloads of issue 4 against the Drive emulator, each next to a
reference measured (or computed) in the same run.

    /usr/bin/python3 bench/run.py [--quick] [--ttfb-ms 100] [--bandwidth 25000000]
                                  [--total-bandwidth 0] [--max-connections 16] [--only 1,3,7]
                                  [--user-rate 200] [--recovery both|auto|resend|forward]
                                  [--mount-opt=--max-request=64M ...] [--ref-bin OLD/colabfs]
                                  [--json FILE] [--keep]

It writes the data deterministically under a fresh folder in /dev/shm (tmpfs), starts
tests/emulator/drive_emulator.py on it with the given time to first byte and per-connection
bandwidth, mounts colabfs with a fresh --cache-dir on tmpfs for every cold measurement, and prints a
table: workload, measured figure, reference, ratio (measured speed / reference speed, so 100% means
"as fast as the reference" for rates and times alike) and the issue's target. Notes under the table
say where the time went (Drive requests, colabfs counters, CPU seconds of the daemon and emulator).
Everything it started is stopped, and everything it wrote deleted, at exit, Ctrl-C included.

Workloads (see bench/README.md):
  1  cold sequential read of a 1 GiB file       ref: aggregate line rate of the emulator (curl)
  2  warm re-read: a) page cache  b) daemon      ref: the same bytes from a tmpfs file
  3  2,000 x 100 KiB, 8 readers, ordered/shuffled  ref: latency-bound ideal files x ttfb / 8
  4  the same after `colabfs warm` of the folder  ref: the same reads from tmpfs; warm's own time
  5  find + stat over 20,000 entries in 200 folders, cold and after remount  ref: tmpfs tree
  6  4 KiB random reads on a cached file, page cache and O_DIRECT  ref: tmpfs file
  7  PyTorch DataLoader epoch (4 workers, shuffle, batch 32), cold and warm  ref: local tmpfs copy
  8  dataset epoch (issue 11): an ImageFolder tree read by a DataLoader from an emulator at 200 ms
     ttfb enforcing --user-rate 200: cold epochs (1, 2, 8 workers shuffled, 2 sorted)
     ref: the quota bound (and the latency bound workers / ttfb); warm epochs (cache on tmpfs and
     on disk) ref: local tmpfs copy; read-ahead waste; a single reader walking the chaos tree with
     ~10% faults at 20 ms ttfb  ref: the same walk fault-free. Each recovery mode of --recovery.
  9  any layout, any order (issue 25): workload 8's files as class folders at the top of My Drive
     beside unrelated folders (a whole-drive mount), cold shuffled epochs with 1 and 2 workers,
     unhinted and hinted (colabfs.torch.PrefetchingSampler), and hinted epochs of workload 8's
     folder layout  ref: the quota bound measured in the same run (a client that knows the quota
     downloading every file once at it); read-ahead waste; downloads of unrelated files.
     The first mode of --recovery.
  10 warm epochs at the kernel's floor (issue 25): the same DataLoader over 1,000 and 10,000 small
     files (quick: 500 and 2,000) already cached on tmpfs, on a writable and on a read-only mount, each
     recovery mode of --recovery (and an older binary's, --ref-bin), with the FUSE requests per file
     by kind  ref: the local tmpfs copy, epochs in turn with the mounts'
"""

import argparse
import json
import mmap
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("COLABFS_BIN", os.path.join(TOP, "colabfs"))
EMU = os.path.join(TOP, "tests", "emulator", "drive_emulator.py")
DL_EPOCH = os.path.join(TOP, "bench", "dl_epoch.py")
FLOOR_BIN = os.path.join(TOP, "bench", "floor_fuse")   # workload 10's floor: `make bench/floor_fuse`
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
TOKEN = "bench-token-" + os.urandom(6).hex()
ROOT_ID = "0AEmuRootFolder0000000000000000"
BIG_ID = "1BenchBigFile00000000000000000000"
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
MB = 1e6
SEED = 20240604

FOLDER = "application/vnd.google-apps.folder"

FULL = dict(big=GiB, small_files=2000, small_size=100 * KiB, readers=8, tree_dirs=200,
            tree_per_dir=100, dl_files=2000, dl_size=100 * KiB, rand_seconds=6.0, repeat=5,
            ds_files=2000, ds_classes=20)
QUICK = dict(big=256 * MiB, small_files=500, small_size=100 * KiB, readers=8, tree_dirs=20,
             tree_per_dir=100, dl_files=500, dl_size=100 * KiB, rand_seconds=3.0, repeat=3,
             ds_files=500, ds_classes=10)

TARGETS = {"1": ">= 80%", "2a": ">= 80%", "2b": ">= 40%", "3o": ">= 70%", "3s": ">= 70%",
           "7w": ">= 77% (<= 1.3x time)"}

# Workload 8 (issue 11): an ImageFolder tree read by a DataLoader against a Drive that enforces its
# per-user request quota, and a single reader walking the chaos tree with faults.
DS_MIN_SIZE, DS_MAX_SIZE = 20_000, 250_000     # file sizes ("20-250 KB"), drawn from a seeded generator
DS_TTFB_MS = 200                               # the real Drive's time to first byte (--ttfb-ms overrides)
DS_USER_RATE = 200                             # Drive's requests/s per user (--user-rate overrides)
DS_FOLDER_ID = "1BenchDatasetFolder00000000000000"
DS_OPTIONS = ["--tree", "--small-samples"]     # dl_epoch.py: class folders, samples of 8 bytes
DS_CASES = (("8c1", 1, False, False),          # key, DataLoader workers, sorted (shuffle=False),
            ("8c2", 2, False, False),          # cache folder on disk (else tmpfs)
            ("8c8", 8, False, False),
            ("8s2", 2, True, False),
            ("8d2", 2, False, True))
DISK_CACHE_PARENT = "/var/tmp"                 # a disk folder for the cache-on-disk rows
DS_COUNTERS = ("dataset_prefetched_bytes_total", "dataset_used_bytes_total", "dataset_wasted_bytes_total",
               "drive_connections_total", "drive_requests_total",
               "dataset_scans_total", "rate_limited_total", "hedges_total", "hedge_wins_total")
FAULT_TTFB_MS = 20
FAULT_SHAPE = dict(large_size=4 * MiB, nlarge=4, small_dirs=8, small_per_dir=41, small_min=KiB,
                   small_max=64 * KiB, seed=4242)   # chaos_helpers.chaos_tree: 332 files, ~26 MiB
FAULT_TREE_BYTES = 4 * 4 * MiB + 8 * 41 * 33 * KiB
WARM_SIZES = {"full": (1000, 10000), "quick": (500, 2000)}   # workload 10: files per tree
WARM_PER_CLASS = 100                           # workload 10: files per class folder
WARM_EPOCHS = 2                                # workload 10: epochs per DataLoader run
WARM_ROUNDS = 3                                # workload 10: runs per side, in turn with the other sides
# Workload 9 (issue 25): unrelated folders beside the class folders at the top of My Drive: (path,
# files, smallest, largest): photos of small files (what a dataset scan could mistake), notebooks,
# large PDFs, a nested backup.
TOP_UNRELATED = (("photos", 300, 20_000, 250_000), ("Colab Notebooks", 12, 10_000, 60_000),
                 ("papers", 8, 1_000_000, 3_000_000), ("backup/2023", 60, 5_000, 100_000))
TOP_CASES = (("9t1", 1, False), ("9t2", 2, False), ("9h1", 1, True), ("9h2", 2, True))
RECOVERY_NAMES = ("off", "resend", "forward", "none")   # colabfs stats recovery_mode values
RECOVERY_MODES = {"both": ("auto", "forward"), "auto": ("auto",), "resend": ("resend",),
                  "forward": ("forward",)}


def log(msg):
    sys.stderr.write("[%7.1fs] %s\n" % (time.monotonic() - T0, msg))
    sys.stderr.flush()


T0 = time.monotonic()
STOP = threading.Event()   # set on Ctrl-C: worker threads end after their current file
WORKERS = []               # worker threads, waited for (briefly) before unmounting


class Interrupted(Exception):
    pass


def wait_until(cond, timeout, what, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise RuntimeError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def is_mounted(path):
    path = os.path.abspath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            a = line.split(" - ")[0].split()
            if a[4] == path:
                return True
    return False


def proc_cpu(pid):
    """utime + stime of a process, in seconds (None when it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
        fields = s[s.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def proc_status(pid):
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if v.strip().endswith("kB"):
                    out[k] = int(v.split()[0]) * KiB
    except OSError:
        pass
    return out


GROUPS = set()             # pids of the processes we started in a session of their own


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def signal_proc(p, sig):
    """Signal a process we started; one started in a session of its own (its pid in GROUPS) with
    its whole group, so that its children (DataLoader workers) go too."""
    try:
        if p.pid in GROUPS:
            os.killpg(p.pid, sig)
        else:
            p.send_signal(sig)
    except ProcessLookupError:
        pass


def drop_page_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def save_json(path, rows):
    """A bench script's rows in FILE for --json FILE (nothing when path is empty)."""
    if path:
        with open(path, "w") as fh:
            json.dump(rows, fh, indent=1)


def fmt_bytes(n):
    for unit, div in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= div:
            return "%.1f %s" % (n / div, unit)
    return "%d B" % n


# ------------------------------------------------------------------------------------------------
# data


def write_random(path, size, seed, prefix=b""):
    rnd = random.Random(seed)
    with open(path, "wb") as f:
        f.write(prefix)
        left = size - len(prefix)
        while left > 0:
            n = min(left, 4 * MiB)
            f.write(rnd.randbytes(n))
            left -= n


class Data:
    """The source tree on tmpfs (which is also the local reference copy) and the emulator spec."""

    def __init__(self, base, cfg):
        self.base = base
        self.cfg = cfg
        self.src = os.path.join(base, "src")
        self.big = os.path.join(self.src, "big.bin")
        self.small_dir = os.path.join(self.src, "small")
        self.dl_dir = os.path.join(self.src, "train")
        self.tree_dir = os.path.join(self.src, "tree")
        self.spec_path = os.path.join(base, "spec.json")

    def small_names(self):
        return ["f%05d.bin" % i for i in range(self.cfg["small_files"])]

    def dl_names(self):
        return ["s%05d.bin" % i for i in range(self.cfg["dl_files"])]

    def tree_entries(self):
        for d in range(self.cfg["tree_dirs"]):
            for e in range(self.cfg["tree_per_dir"]):
                yield "d%03d" % d, "e%03d.bin" % e, (d * 7919 + e * 104729) % 65536

    def make(self):
        c = self.cfg
        os.makedirs(self.small_dir)
        os.makedirs(self.dl_dir)
        os.makedirs(self.tree_dir)
        items = [{"id": BIG_ID, "name": "big.bin", "path": self.big}]
        write_random(self.big, c["big"], SEED)
        items.append({"id": "1BenchSmallFolder000000000000000", "name": "small",
                      "mimeType": FOLDER})
        for i, name in enumerate(self.small_names()):
            p = os.path.join(self.small_dir, name)
            write_random(p, c["small_size"], SEED + 1 + i)
            items.append({"name": name, "parent": items[1]["id"], "path": p})
        dl_id = "1BenchTrainFolder000000000000000"
        items.append({"id": dl_id, "name": "train", "mimeType": FOLDER})
        for i, name in enumerate(self.dl_names()):
            p = os.path.join(self.dl_dir, name)
            write_random(p, c["dl_size"], SEED + 100000 + i, prefix=i.to_bytes(8, "little"))
            items.append({"name": name, "parent": dl_id, "path": p})
        tree_id = "1BenchTreeFolder0000000000000000"
        items.append({"id": tree_id, "name": "tree", "mimeType": FOLDER})
        made = set()
        for k, (d, e, size) in enumerate(self.tree_entries()):
            did = "1BenchTreeDir%03d%s" % (int(d[1:]), "0" * 17)
            if d not in made:
                made.add(d)
                os.mkdir(os.path.join(self.tree_dir, d))
                items.append({"id": did, "name": d, "parent": tree_id,
                              "mimeType": FOLDER})
            # generated content: never read, only listed and stat'ed
            items.append({"name": e, "parent": did, "size": size, "seed": k})
            with open(os.path.join(self.tree_dir, d, e), "wb") as f:
                f.truncate(size)
        with open(self.spec_path, "w") as f:
            json.dump({"root": {"id": ROOT_ID, "name": "My Drive"}, "items": items}, f)
        self.folder_ids = [it["id"] for it in items
                           if it.get("mimeType") == FOLDER]


class DatasetTree:
    """Workload 8's ImageFolder tree on tmpfs (also the local reference copy) and its spec:
    ``files`` files of DS_MIN_SIZE..DS_MAX_SIZE bytes in ``classes`` class folders under dataset/.
    Every file starts with its index in the sorted walk (class, then name), which dl_epoch.py checks.
    ``top`` (workload 9): the class folders sit at the top of My Drive instead, beside the
    unrelated folders of TOP_UNRELATED (their files' ids in ``unrelated_ids``)."""

    def __init__(self, base, files, classes, top=False):
        self.files, self.classes, self.top = files, classes, top
        self.root = os.path.join(base, "top" if top else "dataset")
        self.spec_path = os.path.join(base, "top-spec.json" if top else "dataset-spec.json")
        self.bytes = 0
        self.folder_ids = [ROOT_ID] if top else [DS_FOLDER_ID]
        self.unrelated_ids = set()
        self.unrelated_bytes = 0

    def make(self):
        sizes = random.Random(SEED + 8)
        parent = "root" if self.top else DS_FOLDER_ID
        items = [] if self.top else [{"id": DS_FOLDER_ID, "name": "dataset", "mimeType": FOLDER}]
        per_class = -(-self.files // self.classes)
        for i in range(self.files):
            k = i // per_class
            cls = "class%02d" % k
            if i % per_class == 0:
                os.makedirs(os.path.join(self.root, cls))
                self.folder_ids.append("1Bench%sClass%02d%s" % ("Top" if self.top else "Dataset", k,
                                                                "0" * (20 if self.top else 13)))
                items.append({"id": self.folder_ids[-1], "name": cls, "parent": parent,
                              "mimeType": FOLDER})
            path = os.path.join(self.root, cls, "%05d.jpg" % i)
            size = sizes.randint(DS_MIN_SIZE, DS_MAX_SIZE)
            write_random(path, size, SEED + 800_000 + i, prefix=i.to_bytes(8, "little"))
            items.append({"name": os.path.basename(path), "parent": self.folder_ids[-1], "path": path})
            self.bytes += size
        if self.top:
            items += self.unrelated(sizes)
        with open(self.spec_path, "w") as f:
            json.dump({"root": {"id": ROOT_ID, "name": "My Drive"}, "items": items}, f)

    def unrelated(self, sizes):
        """Someone's other folders at the top of My Drive (TOP_UNRELATED): spec items."""
        items, n = [], 0
        for folder, count, lo, hi in TOP_UNRELATED:
            parent = "root"
            for part in folder.split("/"):
                fid = "1BenchTopOther%s" % ("%04d" % n).ljust(19, "0")
                n += 1
                items.append({"id": fid, "name": part, "parent": parent, "mimeType": FOLDER})
                self.folder_ids.append(fid)
                parent = fid
            os.makedirs(os.path.join(self.root, folder))
            for i in range(count):
                path = os.path.join(self.root, folder, "f%04d.bin" % i)
                size = sizes.randint(lo, hi)
                write_random(path, size, SEED + 900_000 + n * 10_000 + i)
                fid = "1BenchTopFile%s" % ("%04d%04d" % (n, i)).ljust(20, "0")
                items.append({"id": fid, "name": os.path.basename(path), "parent": parent,
                              "path": path})
                self.unrelated_ids.add(fid)
                self.unrelated_bytes += size
        return items


# ------------------------------------------------------------------------------------------------
# processes: the emulator and the mounts, all cleaned up by Bench.cleanup()


class Emulator:
    """drive_emulator.py serving ``spec_path`` with the bench's token; ``extra``: more options."""

    def __init__(self, bench, spec_path, name, ttfb_ms, bandwidth, total_bandwidth, extra=()):
        self.bench = bench
        self.port_file = os.path.join(bench.work, name + ".port")
        self.err_path = os.path.join(bench.work, "logs", name + ".stderr")
        argv = [PY, EMU, "--spec", spec_path, "--port", "0", "--port-file", self.port_file,
                "--access-token", TOKEN, "--ttfb-ms", str(ttfb_ms),
                "--bandwidth", str(bandwidth), "--total-bandwidth", str(total_bandwidth), *extra]
        self.err = open(self.err_path, "wb")
        # own session: Ctrl-C must not stop it before the mounts that depend on it are gone
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.err,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        bench.procs.append(self.proc)

        def port():
            if self.proc.poll() is not None:
                raise RuntimeError("emulator exited: " + open(self.err_path, errors="replace").read())
            try:
                return int(open(self.port_file).read())
            except (OSError, ValueError):
                return None
        self.port = wait_until(port, 120, "the emulator")
        self.url = "http://127.0.0.1:%d" % self.port

    @property
    def pid(self):
        return self.proc.pid

    def call(self, path, method="GET", headers=None, timeout=600, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, method=method, headers=headers or {}, data=data)
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"null")

    def stats(self):
        return self.call("/_emu/stats")

    def reset(self):
        self.call("/_emu/reset", "POST")

    def media_log(self):
        return [r for r in self.call("/_emu/log") if r["kind"] == "media"]

    def set_faults(self, specs):
        self.call("/_emu/faults", "POST", body={"faults": list(specs)})

    def fired(self):
        """How many times the installed fault rules fired, in all."""
        return sum(r["fired"] for r in self.call("/_emu/faults")["faults"])

    def children(self, fid, fields):
        """The items in folder fid, every page, each with ``fields``."""
        tok, out = None, []
        while True:
            q = {"q": "'%s' in parents and trashed = false" % fid, "pageSize": "1000",
                 "fields": "nextPageToken,files(%s)" % fields}
            if tok:
                q["pageToken"] = tok
            j = self.call("/drive/v3/files?" + urllib.parse.urlencode(q),
                          headers={"Authorization": "Bearer " + TOKEN})
            out += j.get("files", [])
            tok = j.get("nextPageToken")
            if not tok:
                return out

    def prepare(self, folder_ids):
        """List every folder once with the checksum fields colabfs asks for: the emulator computes
        (and caches) md5/sha256 of every file, and hashes the big file, before anything is timed."""
        for fid in folder_ids:
            self.children(fid, "id,md5Checksum,sha256Checksum,headRevisionId")
        self.reset()


class Mount:
    def __init__(self, bench, name, cache_dir=None, emu=None, opts=(), binary=None):
        self.bench = bench
        self.name = name
        self.mnt = os.path.join(bench.work, "mnt-" + name)
        self.cache_dir = cache_dir or os.path.join(bench.work, "cache-" + name)
        self.log_file = os.path.join(bench.work, "logs", "colabfs-%s.log" % name)
        os.makedirs(self.mnt, exist_ok=True)
        self.pid = None
        self.env = dict(os.environ, COLABFS_ACCESS_TOKEN=TOKEN)
        argv = [binary or BIN, "mount", "--api-url=" + (emu or bench.emu).url,
                "--cache-dir=" + self.cache_dir,
                "--log-file=" + self.log_file, "--max-connections=%d" % bench.args.max_connections]
        argv += bench.args.mount_opt + list(opts) + [self.mnt]
        bench.mounts.append(self)
        r = subprocess.run(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=300)
        if r.returncode != 0 or not is_mounted(self.mnt):
            raise RuntimeError("colabfs mount failed (rc %d): %s" % (r.returncode,
                                                                     r.stderr.decode(errors="replace")))
        self.pid = int(os.getxattr(self.mnt, "user.colabfs.pid").decode().strip("\0 \n"))

    def path(self, *rel):
        return os.path.join(self.mnt, *rel)

    def server_pid(self):
        """The process that serves the mount: ``user.colabfs.pid`` names the supervisor (colabfs
        mount), which runs the server (colabfs serve) as its child; its memory and CPU are the
        daemon's.  The supervisor itself when there is no child (not supervised)."""
        try:
            for task in os.listdir("/proc/%d/task" % self.pid):
                with open("/proc/%d/task/%s/children" % (self.pid, task)) as f:
                    kids = f.read().split()
                if kids:
                    return int(kids[0])
        except (OSError, ValueError):
            pass
        return self.pid

    def stats(self):
        r = subprocess.run([BIN, "stats", self.mnt, "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=60)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return {}

    def umount(self, keep_cache=False):
        """Unmount (colabfs umount, else umount -l and kill the daemon); delete the cache unless
        ``keep_cache``."""
        if self not in self.bench.mounts:
            return
        problems = []
        if is_mounted(self.mnt):
            try:
                r = subprocess.run([BIN, "umount", self.mnt], env=self.env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
                if r.returncode != 0:
                    problems.append("colabfs umount rc %d: %s" % (r.returncode,
                                                                  r.stdout.decode(errors="replace")))
            except subprocess.TimeoutExpired:
                problems.append("colabfs umount timed out")
        if is_mounted(self.mnt):
            subprocess.run(["umount", "-l", self.mnt], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        if self.pid and proc_cpu(self.pid) is not None:
            try:
                wait_until(lambda: proc_cpu(self.pid) is None, 10, "daemon exit")
            except RuntimeError:
                problems.append("daemon %d still running after unmount; killed" % self.pid)
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.kill(self.pid, sig)
                    except OSError:
                        pass
                    try:
                        wait_until(lambda: proc_cpu(self.pid) is None, 10, "daemon exit")
                        break
                    except RuntimeError:
                        pass
        self.bench.mounts.remove(self)
        if not keep_cache:
            shutil.rmtree(self.cache_dir, ignore_errors=True)
        for p in problems:
            log("mount %s: %s" % (self.name, p))


class FloorMount:
    """bench/floor_fuse serving the folder ``src`` read-only at mnt-NAME: a FUSE server that does
    nothing but answer (workload 10's floor); ``no_open``: it answers the first OPEN with ENOSYS and
    the kernel opens files itself.  Listed in bench.mounts, so cleanup unmounts it like a Mount."""

    def __init__(self, bench, name, src, no_open):
        self.bench, self.name = bench, name
        self.mnt = os.path.join(bench.work, "mnt-" + name)
        os.makedirs(self.mnt, exist_ok=True)
        self.log_path = os.path.join(bench.work, "logs", name + ".stderr")
        with open(self.log_path, "wb") as err:
            self.proc = subprocess.Popen([FLOOR_BIN] + (["--no-open"] if no_open else []) +
                                         [src, self.mnt], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err,
                                         start_new_session=True)
        GROUPS.add(self.proc.pid)
        bench.mounts.append(self)
        wait_until(lambda: is_mounted(self.mnt) or self.proc.poll() is not None, 60,
                   "floor_fuse to mount " + self.mnt)
        if not is_mounted(self.mnt):
            raise RuntimeError("floor_fuse failed: " + open(self.log_path, errors="replace").read())

    def path(self, *rel):
        return os.path.join(self.mnt, *rel)

    def umount(self, keep_cache=False):
        if self not in self.bench.mounts:
            return
        for argv in (["fusermount3", "-u", self.mnt], ["umount", "-l", self.mnt]):
            if is_mounted(self.mnt):
                subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=60)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            log("floor_fuse %s still running after unmount; killed" % self.name)
            signal_proc(self.proc, signal.SIGKILL)
            self.proc.wait(10)
        self.bench.mounts.remove(self)


# ------------------------------------------------------------------------------------------------
# measurement primitives


def seq_read(path, bs=MiB):
    """Read ``path`` to EOF with ``bs`` reads into one buffer; returns (bytes, seconds)."""
    buf = bytearray(bs)
    n = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        t = time.monotonic()
        while True:
            got = os.readv(fd, [buf])
            if not got:
                break
            n += got
        return n, time.monotonic() - t
    finally:
        os.close(fd)


def compare_files(a, b, chunk=8 * MiB):
    with open(a, "rb", buffering=0) as fa, open(b, "rb", buffering=0) as fb:
        off = 0
        while True:
            x, y = fa.read(chunk), fb.read(chunk)
            if x != y:
                raise RuntimeError("%s differs from %s near offset %d" % (a, b, off))
            if not x:
                return off
            off += len(x)


def rand_reads(path, size, seconds, direct, seed=7):
    """Single-threaded 4 KiB preads at random aligned offsets for ``seconds``; returns reads/s."""
    rnd = random.Random(seed)
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    fd = os.open(path, flags)
    buf = mmap.mmap(-1, 4096)  # page aligned, as O_DIRECT needs
    blocks = size // 4096
    n = 0
    try:
        t0 = time.monotonic()
        end = t0 + seconds
        while True:
            for _ in range(256):
                if os.preadv(fd, [buf], rnd.randrange(blocks) * 4096) != 4096:
                    raise RuntimeError("short 4 KiB read on " + path)
            n += 256
            now = time.monotonic()
            if now >= end:
                return n / (now - t0)
    finally:
        os.close(fd)
        buf.close()


def parallel_read(paths, readers, times=None):
    """``readers`` threads take the next path from ``paths`` (in that order) and read it whole;
    ``times``, a list: each file's seconds from its open to its last byte are appended to it.
    Returns (seconds, bytes)."""
    lock = threading.Lock()
    state = {"next": 0, "bytes": 0, "error": None}

    def worker():
        buf = bytearray(MiB)
        total = 0
        try:
            while True:
                with lock:
                    i = state["next"]
                    state["next"] = i + 1
                if i >= len(paths) or state["error"] or STOP.is_set():
                    break
                t = time.monotonic()
                fd = os.open(paths[i], os.O_RDONLY)
                try:
                    while True:
                        got = os.readv(fd, [buf])
                        if not got:
                            break
                        total += got
                finally:
                    os.close(fd)
                if times is not None:
                    times.append(time.monotonic() - t)  # list.append: atomic under the GIL
        except OSError as e:
            state["error"] = e
        with lock:
            state["bytes"] += total

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(readers)]
    WORKERS.extend(threads)
    t = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        while th.is_alive():       # short joins keep Ctrl-C responsive
            th.join(0.2)
    secs = time.monotonic() - t
    if state["error"]:
        raise state["error"]
    return secs, state["bytes"]


def walk_read(root, want):
    """One reader walks the tree under ``root`` (os.walk, names sorted) and reads every file whole
    (1 MiB reads), comparing it with ``want[relative path]``. Returns (seconds, files read, bytes,
    [problem]): failed reads and listings and wrong bytes are problems, not exceptions."""
    problems = []
    files = nbytes = 0
    t = time.monotonic()
    for folder, dirs, names in os.walk(root, onerror=lambda e: problems.append("listing: %s" % e)):
        dirs.sort()
        for name in sorted(names):
            if STOP.is_set():
                raise Interrupted()
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            try:
                with open(path, "rb", buffering=0) as f:
                    data = b"".join(iter(lambda: f.read(MiB), b""))
            except OSError as e:
                problems.append("%s: %s" % (rel, e))
                continue
            if data != want.get(rel):
                problems.append("%s: wrong bytes (%d read)" % (rel, len(data)))
            files += 1
            nbytes += len(data)
    secs = time.monotonic() - t
    if files != len(want):
        problems.append("read %d files of %d" % (files, len(want)))
    return secs, files, nbytes, problems


def line_rate(port, file_id, size, conns, chunk=None):
    """Parallel range GETs straight to the emulator with curl, ``conns`` at a time. With no
    ``chunk``: one contiguous range of size/conns per connection (the line rate itself); with a
    chunk size: a queue of ranges of that size. Returns (bytes/s, bytes)."""
    url = "http://127.0.0.1:%d/drive/v3/files/%s?alt=media" % (port, file_id)
    if chunk is None:
        chunk = -(-size // conns)
    ranges = [(off, min(size, off + chunk) - 1) for off in range(0, size, chunk)]
    lock = threading.Lock()
    total = [0]
    errors = []

    def worker():
        while True:
            with lock:
                if not ranges or errors or STOP.is_set():
                    return
                a, b = ranges.pop(0)
            r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{size_download} %{http_code}",
                                "-H", "Authorization: Bearer " + TOKEN,
                                "-H", "Range: bytes=%d-%d" % (a, b), url],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=600)
            got, code = (r.stdout.decode().split() + ["0", "0"])[:2]
            with lock:
                if code != "206" or int(got) != b - a + 1:
                    errors.append("curl range %d-%d: http %s, %s bytes %s" % (a, b, code, got,
                                                                              r.stderr.decode()))
                total[0] += int(got)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(conns)]
    WORKERS.extend(threads)
    t = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        while th.is_alive():
            th.join(0.2)
    secs = time.monotonic() - t
    if errors:
        raise RuntimeError(errors[0])
    return total[0] / secs, total[0]


class Probe:
    """CPU seconds of the daemon and the emulator, colabfs and emulator counters, across a phase.
    ``emu``: the emulator the mount uses (default the suite's)."""

    def __init__(self, bench, mount, emu=None):
        self.bench, self.mount, self.emulator = bench, mount, emu or bench.emu

    def __enter__(self):
        self.emulator.reset()
        self.cs = self.mount.stats() if self.mount else {}
        self.spid = self.mount.server_pid() if self.mount else None
        self.cpu_d = proc_cpu(self.spid) if self.mount else None
        self.cpu_e = proc_cpu(self.emulator.pid)
        self.cpu_self = time.process_time()
        self.t = time.monotonic()
        return self

    def __exit__(self, *exc):
        self.wall = time.monotonic() - self.t
        self.emu = self.emulator.stats()
        self.after = after = self.mount.stats() if self.mount else {}
        self.delta = {k: v - self.cs.get(k, 0) for k, v in after.items()
                      if isinstance(v, (int, float))}
        self.d_cpu = (proc_cpu(self.spid) or 0) - (self.cpu_d or 0) if self.mount else 0
        self.e_cpu = (proc_cpu(self.emulator.pid) or 0) - (self.cpu_e or 0)
        self.self_cpu = time.process_time() - self.cpu_self
        self.flight = None
        if 0 < self.emu["by_kind"].get("media", 0) <= 10000:
            # requests in flight at the emulator: mean over the phase, and the most at once
            recs = self.emulator.media_log()
            busy = sum(r.get("ms", 0) for r in recs) / 1000
            ev = sorted([(r["mono"], 1) for r in recs] + [(r["mono"] + r.get("ms", 0) / 1000, -1)
                                                        for r in recs])
            cur = top = 0
            for _, d in ev:
                cur += d
                top = max(top, cur)
            self.flight = (busy / self.wall if self.wall else 0, top)

    def note(self):
        e = self.emu
        parts = ["Drive: %d media requests, %s media, %d files.list"
                 % (e["by_kind"].get("media", 0), fmt_bytes(e["media_bytes"]),
                    e["by_kind"].get("files.list", 0))]
        if self.flight:
            parts[0] += ", %.1f requests in flight on average (%d at most)" % self.flight
        d = self.delta
        if self.mount:
            parts.append("colabfs: %d download requests, %d blocks prefetched, %d joined, %d paced calls"
                         % (d.get("download_requests_total", 0), d.get("blocks_prefetched_total", 0),
                            d.get("downloads_joined_total", 0), d.get("drive_paced_calls_total", 0)))
        parts.append("CPU s: daemon %.1f, emulator %.1f, bench %.1f (of %.1f s wall x 2 cores)"
                     % (self.d_cpu, self.e_cpu, self.self_cpu, self.wall))
        return "; ".join(parts)


# ------------------------------------------------------------------------------------------------
# the suite


class Bench:
    def __init__(self, args):
        self.args = args
        self.cfg = dict(QUICK if args.quick else FULL)
        if args.big_mib:
            self.cfg["big"] = args.big_mib * MiB
        if args.rand_seconds:
            self.cfg["rand_seconds"] = args.rand_seconds
        self.work = None
        self.mounts = []
        self.clients = []      # processes reading the mounts (DataLoaders): stopped before unmounting
        self.procs = []
        self.rows = []
        self.notes = []
        self.extra = {}
        self.emu = None
        self.nmount = 0

    # -- bookkeeping ------------------------------------------------------------------------------

    def row(self, key, workload, measured, m_unit, reference, r_unit, ref_name, higher_better=True,
            note=None, target=None):
        """A table row. ``ratio`` = measured speed / reference speed. ``target`` defaults to
        TARGETS[key]."""
        if measured and reference:
            ratio = measured / reference if higher_better else reference / measured
        else:
            ratio = None
        r = {"key": key, "workload": workload, "measured": measured, "unit": m_unit,
             "reference": reference, "ref_unit": r_unit, "ref_name": ref_name, "ratio": ratio,
             "target": TARGETS.get(key, "") if target is None else target}
        self.rows.append(r)
        log("%-4s %-44s %s  ref %s  %s" % (key, workload, fmt_val(measured, m_unit),
                                            fmt_val(reference, r_unit),
                                            "%.0f%%" % (100 * ratio) if ratio else "-"))
        if note:
            self.notes.append("%s: %s" % (key, note))

    def new_mount(self, name=None, cache_dir=None, emu=None, opts=(), binary=None):
        self.nmount += 1
        return Mount(self, name or str(self.nmount), cache_dir, emu, opts, binary)

    @staticmethod
    def stop_procs(procs):
        """End processes we started; a session leader's group (its children) ends with it: the
        children of a DataLoader may outlive its main process by a moment."""
        for p in procs:
            try:
                if p.poll() is None:
                    signal_proc(p, signal.SIGTERM)
                    try:
                        p.wait(15)
                    except subprocess.TimeoutExpired:
                        signal_proc(p, signal.SIGKILL)
                        p.wait(15)
                if p.pid in GROUPS:
                    try:
                        wait_until(lambda: not group_alive(p.pid), 10, "process group %d" % p.pid)
                    except RuntimeError:
                        os.killpg(p.pid, signal.SIGKILL)
            except Exception as e:  # keep cleaning
                log("cleanup: pid %d: %r" % (p.pid, e))

    def cleanup(self):
        STOP.set()
        deadline = time.monotonic() + 10
        for th in WORKERS:
            th.join(max(0, deadline - time.monotonic()))
        self.stop_procs(self.clients)
        for m in list(reversed(self.mounts)):
            try:
                m.umount()
            except Exception as e:  # keep cleaning
                log("cleanup: %s: %r" % (m.mnt, e))
        self.stop_procs(self.procs)
        if self.work and not self.args.keep:
            if any(is_mounted(m.mnt) for m in self.mounts):
                log("cleanup: mounts left under %s; not deleting it" % self.work)
            else:
                shutil.rmtree(self.work, ignore_errors=True)
        elif self.work:
            log("kept %s" % self.work)

    def guarded(self, body):
        """Run ``body()``; SIGTERM, SIGHUP and Ctrl-C interrupt it.  Afterwards, whatever happened,
        with those signals ignored (a second Ctrl-C would leave mounts behind), every mount, the
        emulator and the work folder are cleaned up (after an error, the mounts' log tails are
        logged first).  Returns the exit status: 0, 1 (an error, logged) or 130 (interrupted)."""
        def on_signal(signum, frame):
            raise KeyboardInterrupt("signal %d" % signum)
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGHUP, on_signal)
        rc = 0
        try:
            body()
        except KeyboardInterrupt:
            log("interrupted; cleaning up")
            rc = 130
        except Exception as e:
            log("bench failed: %s: %s" % (type(e).__name__, e))
            rc = 1
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_IGN)
            if rc == 1 and self.work:
                for m in self.mounts:
                    try:
                        log("tail of %s:\n%s" % (m.log_file, open(m.log_file, errors="replace")
                                                               .read()[-3000:]))
                    except OSError:
                        pass
            self.cleanup()
        return rc

    # -- setup ------------------------------------------------------------------------------------

    def setup(self, suite, dataset, warm=False):
        """The work folder; with ``suite`` (any of workloads 1-7) their data and the emulator that
        serves it (workloads 8 and 9, ``dataset``, and 10, ``warm``, make their own)."""
        a = self.args
        for tool in ("curl", "find"):
            if not shutil.which(tool):
                raise SystemExit("bench: %s is needed" % tool)
        if not os.access(BIN, os.X_OK):
            raise SystemExit("bench: no colabfs binary at %s (make colabfs, or set COLABFS_BIN)" % BIN)
        need = 0
        if suite:
            need += (self.cfg["big"] * 3 + (self.cfg["small_files"] * self.cfg["small_size"]
                                            + self.cfg["dl_files"] * self.cfg["dl_size"]) * 3)
        if dataset:   # the tree, two caches of it at a time, the fault tree and its caches
            need += self.cfg["ds_files"] * DS_MAX_SIZE * 3 // 2 + 3 * FAULT_TREE_BYTES
        if warm:      # the largest tree and its caches (mean file size 135 KB)
            need += (max(WARM_SIZES["quick" if a.quick else "full"]) * (DS_MIN_SIZE + DS_MAX_SIZE) // 2
                     * (3 if a.ref_bin else 2))
        st = os.statvfs(a.workdir)
        if st.f_bavail * st.f_frsize < need * 1.2:
            raise SystemExit("bench: %s has %s free; this run needs about %s"
                             % (a.workdir, fmt_bytes(st.f_bavail * st.f_frsize), fmt_bytes(need)))
        self.extra["load_start"] = " ".join(open("/proc/loadavg").read().split()[:3])
        self.work = tempfile.mkdtemp(prefix="colabfs-bench-", dir=a.workdir)
        os.makedirs(os.path.join(self.work, "logs"))
        log("data under %s" % self.work)
        if not suite:
            return
        self.data = Data(self.work, self.cfg)
        t = time.monotonic()
        self.data.make()
        log("data written in %.1f s" % (time.monotonic() - t))
        self.emu = Emulator(self, self.data.spec_path, "emulator", a.ttfb_ms, a.bandwidth,
                            a.total_bandwidth)
        t = time.monotonic()
        self.emu.prepare(self.data.folder_ids)
        log("emulator on port %d ready (checksums computed in %.1f s)" % (self.emu.port,
                                                                        time.monotonic() - t))

    # -- workloads --------------------------------------------------------------------------------

    def w1_w2_w6(self, do1, do2, do6):
        a, c = self.args, self.cfg
        size = c["big"]
        m = self.new_mount("big")
        path = m.path("big.bin")
        if os.stat(path).st_size != size:
            raise RuntimeError("big.bin has the wrong size on the mount")
        conns = a.max_connections
        max_req = parse_size(dict(o.split("=", 1) for o in a.mount_opt if o.startswith("--max-request="))
                             .get("--max-request", "8M"))
        if do1:
            with Probe(self, None) as pr:
                ref, _ = line_rate(self.emu.port, BIG_ID, size, conns)
            log("line rate %.0f MB/s (%d connections x %s); %s"
                % (ref / MB, conns, fmt_bytes(-(-size // conns)), pr.note()))
            # what requests of --max-request size achieve over the same connections (for the notes)
            ref_req, _ = line_rate(self.emu.port, BIG_ID, size, conns, chunk=max_req)
        peak = {"VmRSS": 0, "RssAnon": 0, "RssShmem": 0, "RssFile": 0}
        stop = threading.Event()
        spid = m.server_pid()

        def sample():
            while not stop.wait(0.05):
                s = proc_status(spid)
                for k in peak:
                    peak[k] = max(peak[k], s.get(k, 0))
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            with Probe(self, m) as pr:
                n, secs = seq_read(path)
        finally:
            stop.set()
            sampler.join()
        if n != size:
            raise RuntimeError("cold read returned %d bytes of %d" % (n, size))
        # Closing a completely cached file makes the daemon hash it against Drive's checksum (in
        # its release handler, after close() returned): wait for that, or it competes with the
        # next measurements for the CPU.
        t = time.monotonic()
        cpu0 = proc_cpu(spid)
        key = "files_checksum_verified_total"
        base = pr.cs.get(key, 0)
        try:
            wait_until(lambda: m.stats().get(key, 0) > base or m.stats().get(
                "files_checksum_mismatches_total", 0) > pr.cs.get("files_checksum_mismatches_total", 0),
                300, "the daemon's whole-file checksum of big.bin", interval=0.1)
            hash_note = ("after close, the daemon's whole-file checksum of %s took %.1f s (%.1f CPU s), "
                         "waited for before workload 2" % (fmt_bytes(size), time.monotonic() - t,
                                                          (proc_cpu(spid) or 0) - (cpu0 or 0)))
        except RuntimeError as e:
            hash_note = str(e)
        status = proc_status(spid)
        hwm = status.get("VmHWM", 0)
        reqs = self.emu.media_log()
        if do1:
            self.extra["w1_media_log"] = reqs  # every request's t, ms and range: the timeline
        sizes = []
        for r in reqs:
            lo, hi = r["range"].split("=")[1].split("-")
            sizes.append(int(hi) - int(lo) + 1)
        hist = {}
        for s in sizes:
            k = fmt_bytes(s)
            hist[k] = hist.get(k, 0) + 1
        top = sorted(hist.items(), key=lambda kv: -kv[1])[:4]
        if do1:
            self.row("1", "cold sequential read %s" % fmt_bytes(size), n / secs, "MB/s", ref, "MB/s",
                     "emulator line rate, %d conns (curl)" % conns,
                     note="%s. Request sizes: %s. Same %d connections with %s ranges (--max-request): "
                          "%.0f MB/s (%.0f%% of line rate)."
                     % (pr.note(), ", ".join("%d x %s" % (v, k) for k, v in top), conns,
                        fmt_bytes(max_req), ref_req / MB, 100 * ref_req / ref))
            self.extra["rss"] = {"VmHWM": hwm, "peak_sampled": peak}
            self.notes.append("1: daemon memory: VmHWM %s (limit 256 MiB); sampled peaks RssAnon %s, "
                              "RssShmem %s, RssFile %s" % (fmt_bytes(hwm), fmt_bytes(peak["RssAnon"]),
                                                           fmt_bytes(peak["RssShmem"]),
                                                           fmt_bytes(peak["RssFile"])))
        self.notes.append("1: " + hash_note)
        # -- 2: warm re-reads; mount and tmpfs reads alternate, median of each (the machine is shared)
        if do2:
            seq_read(self.data.big)
            pc, tm = [], []
            for _ in range(c["repeat"]):
                pc.append(seq_read(path)[1])
                tm.append(seq_read(self.data.big)[1])
            tmpfs = size / med(tm)
            self.row("2a", "warm re-read, kernel page cache", size / med(pc), "MB/s", tmpfs, "MB/s",
                     "tmpfs file")
            dm, tm = [], []
            with Probe(self, m) as pr:
                for _ in range(c["repeat"]):
                    drop_page_cache(path)
                    dm.append(seq_read(path)[1])
                    tm.append(seq_read(self.data.big)[1])
            self.row("2b", "warm re-read, served by the daemon", size / med(dm), "MB/s",
                     size / med(tm), "MB/s", "tmpfs file", note=pr.note())
            if not a.no_verify:
                compare_files(path, self.data.big)
                log("big.bin on the mount equals the source")
        # -- 6: random 4 KiB reads of the cached file, in alternating slices, median of each
        if do6:
            slice_s = c["rand_seconds"] / c["repeat"]
            seq_read(path)  # all of it in the page cache
            pc, pc_ref = [], []
            for _ in range(c["repeat"]):
                pc.append(rand_reads(path, size, slice_s, direct=False))
                pc_ref.append(rand_reads(self.data.big, size, slice_s, direct=False))
            self.row("6a", "4 KiB random reads, page cache", med(pc), "IOPS", med(pc_ref), "IOPS",
                     "tmpfs file")
            dio, dio_ref = [], []
            with Probe(self, m) as pr:
                for _ in range(c["repeat"]):
                    dio.append(rand_reads(path, size, slice_s, direct=True))
                    dio_ref.append(rand_reads(self.data.big, size, slice_s, direct=True))
            self.row("6b", "4 KiB random reads, O_DIRECT (daemon)", med(dio), "IOPS", med(dio_ref),
                     "IOPS", "tmpfs file, O_DIRECT",
                     note="%.1f us per read through FUSE vs %.1f us on tmpfs; %s"
                          % (1e6 / med(dio), 1e6 / med(dio_ref), pr.note()))
        m.umount()

    def w3(self):
        c, a = self.cfg, self.args
        ideal = c["small_files"] * a.ttfb_ms / 1000 / c["readers"]
        ref_name = "ideal %d x %g ms / %d" % (c["small_files"], a.ttfb_ms, c["readers"])
        for key, order in (("3o", "listing order"), ("3s", "shuffled")):
            m = self.new_mount("small-" + key)
            with Probe(self, m) as pr:
                t = time.monotonic()
                names = sorted(os.listdir(m.path("small")))
                if order == "shuffled":
                    random.Random(SEED).shuffle(names)
                secs, n = parallel_read([m.path("small", x) for x in names], c["readers"])
                total = time.monotonic() - t
            if n != c["small_files"] * c["small_size"]:
                raise RuntimeError("small files: read %d bytes" % n)
            self.row(key, "cold %d x %s, %d readers, %s" % (c["small_files"], fmt_bytes(c["small_size"]),
                                                           c["readers"], order),
                     total, "s", ideal, "s", ref_name, higher_better=False,
                     note="%.0f files/s; %s" % (c["small_files"] / total, pr.note()))
            m.umount()

    def w4(self):
        c, a = self.cfg, self.args
        m = self.new_mount("small-warm")
        folder = m.path("small")
        with Probe(self, m) as pr:
            r = subprocess.run([BIN, "warm", folder], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=1800)
        if r.returncode != 0:
            raise RuntimeError("colabfs warm failed: %s %s" % (r.stdout.decode(), r.stderr.decode()))
        per_file = a.ttfb_ms / 1000 + (c["small_size"] / a.bandwidth if a.bandwidth else 0)
        ideal = c["small_files"] * per_file / a.max_connections
        self.row("4w", "colabfs warm of the folder (%d files)" % c["small_files"], pr.wall, "s", ideal,
                 "s", "ideal: files x (ttfb + size/bw) / %d conns" % a.max_connections,
                 higher_better=False,
                 note="%s; warm said: %s" % (pr.note(), r.stdout.decode().strip().splitlines()[-1:]))
        names = sorted(os.listdir(folder))
        shuffled = list(names)
        random.Random(SEED).shuffle(shuffled)
        for key, order, lst in (("4o", "listing order", names), ("4s", "shuffled", shuffled)):
            ref, got = [], []
            with Probe(self, m) as pr:
                for _ in range(c["repeat"]):
                    for x in names:
                        drop_page_cache(os.path.join(folder, x))
                    got.append(parallel_read([os.path.join(folder, x) for x in lst], c["readers"])[0])
                    ref.append(parallel_read([os.path.join(self.data.small_dir, x) for x in lst],
                                             c["readers"])[0])
            self.row(key, "warmed %d files, %d readers, %s (daemon)" % (c["small_files"], c["readers"],
                                                                        order),
                     med(got), "s", med(ref), "s", "same reads from tmpfs", higher_better=False,
                     note=pr.note())
        if not a.no_verify:
            for x in names:
                compare_files(os.path.join(folder, x), os.path.join(self.data.small_dir, x))
            log("small files on the mount equal the source")
        m.umount()

    def w5(self):
        c = self.cfg
        n_expect = c["tree_dirs"] * (c["tree_per_dir"] + 1) + 1

        def find(root):
            t = time.monotonic()
            r = subprocess.run(["find", root, "-printf", "%y %s %T@\n"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=1800)
            secs = time.monotonic() - t
            lines = r.stdout.count(b"\n")
            if r.returncode != 0 or lines != n_expect:
                raise RuntimeError("find %s: rc %d, %d entries (expected %d): %s"
                                   % (root, r.returncode, lines, n_expect, r.stderr.decode()[-500:]))
            return secs
        ref = min(find(self.data.tree_dir) for _ in range(max(2, c["repeat"])))
        entries = c["tree_dirs"] * c["tree_per_dir"]
        cache = os.path.join(self.work, "cache-tree")
        m = self.new_mount("tree", cache)
        with Probe(self, m) as pr:
            cold = find(m.path("tree"))
        self.row("5c", "find+stat %d entries in %d folders, cold" % (entries, c["tree_dirs"]), cold, "s",
                 ref, "s", "same find on a tmpfs tree", higher_better=False, note=pr.note())
        m.umount(keep_cache=True)
        m = self.new_mount("tree2", cache)
        with Probe(self, m) as pr:
            warm = find(m.path("tree"))
        self.row("5r", "find+stat %d entries, after remount" % entries, warm, "s", ref, "s",
                 "same find on a tmpfs tree", higher_better=False, note=pr.note())
        m.umount()

    def dl_epochs(self, root, n, workers=4, drop=(), options=()):
        """``n`` epochs of bench/dl_epoch.py over ``root`` (batch 32, seeded shuffle; ``options``:
        more of its options); its JSON. It runs in a session of its own, so cleanup ends its
        DataLoader workers with it; the colabfs package and binary of this tree are its."""
        argv = [PY, DL_EPOCH, root, "--epochs", str(n), "--workers", str(workers), "--batch", "32",
                "--seed", str(SEED), *options]
        for k in drop:
            argv += ["--drop-before", str(k)]
        env = dict(os.environ, COLABFS_BIN=BIN, PYTHONPATH=os.path.join(TOP, "python"))
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True, env=env)
        GROUPS.add(p.pid)
        self.clients.append(p)
        out, err = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise RuntimeError("dl_epoch.py failed: %s" % err.decode()[-2000:])
        return json.loads(out)

    def have_torch(self, workload):
        try:
            subprocess.run([PY, "-c", "import torch"], check=True, timeout=300,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return True
        except (subprocess.CalledProcessError, OSError):
            log("%s: torch is not installed (python3-torch); skipped" % workload)
            self.notes.append("%s: skipped: %s cannot import torch (apt-get install python3-torch)"
                              % (workload, PY))
            return False

    def w7(self):
        c = self.cfg

        def epochs(root, n, drop=()):
            return self.dl_epochs(root, n, drop=drop)
        if not self.have_torch("7"):
            return
        # Local epochs before and after the mount's (the machine is shared); a warm epoch takes well
        # under a second, so each side gets several and the best counts.
        local = epochs(self.data.dl_dir, 3)["epochs"]
        m = self.new_mount("train")
        with Probe(self, m) as pr:
            got = epochs(m.path("train"), 5, drop=(5,))
        local += epochs(self.data.dl_dir, 3)["epochs"]
        le = [e["seconds"] for e in local]
        me = [e["seconds"] for e in got["epochs"]]
        nf = c["dl_files"]
        desc = "%d x %s, 4 workers, batch 32, shuffle" % (nf, fmt_bytes(c["dl_size"]))
        self.row("7c", "DataLoader epoch cold (%s)" % desc, me[0], "s", min(le), "s",
                 "best epoch on the local tmpfs copy", higher_better=False,
                 note="latency-bound ideal for 4 workers reading one file at a time: %.1f s; "
                      "whole mount run (5 epochs): %s" % (nf * self.args.ttfb_ms / 1000 / 4, pr.note()))
        self.row("7w", "DataLoader epoch warm (page cache)", min(me[1:4]), "s", min(le), "s",
                 "best epoch on the local tmpfs copy", higher_better=False,
                 note="best of 3 warm epochs; all: %s; local: %s"
                      % (", ".join("%.2f" % x for x in me[1:4]), ", ".join("%.2f" % x for x in le)))
        self.row("7d", "DataLoader epoch warm (page cache dropped)", me[4], "s", min(le), "s",
                 "best epoch on the local tmpfs copy", higher_better=False)
        m.umount()

    def w8(self):
        """Workload 8 (issue 11): see bench/README.md. Its own emulators: the ImageFolder tree at
        the workload's ttfb and --user-rate, and the chaos tree at FAULT_TTFB_MS for the fault case."""
        a, c = self.args, self.cfg
        if not self.have_torch("8"):
            return
        sys.path.insert(0, os.path.join(TOP, "tests", "e2e"))
        import chaos_helpers  # noqa: E402 - the chaos test's tree and fault mix, plain stdlib
        base = os.path.join(self.work, "w8")
        tree = DatasetTree(base, c["ds_files"], c["ds_classes"])
        t = time.monotonic()
        tree.make()
        chaos, _, chaos_dirs = chaos_helpers.chaos_tree(os.path.join(base, "chaos"), **FAULT_SHAPE)
        log("8: %d files (%s) in %d classes and a %d-file chaos tree written in %.1f s"
            % (tree.files, fmt_bytes(tree.bytes), tree.classes, len(chaos.data), time.monotonic() - t))
        quota = ["--user-rate", "%g" % a.user_rate]
        emu = Emulator(self, tree.spec_path, "emu-dataset", a.ds_ttfb_ms, a.bandwidth,
                       a.total_bandwidth, quota)
        emu.prepare(tree.folder_ids)
        femu = Emulator(self, str(chaos.spec_path), "emu-chaos", FAULT_TTFB_MS, a.bandwidth,
                        a.total_bandwidth, quota + ["--page-size-cap", str(chaos_helpers.LIST_PAGE_CAP),
                                                    "--seed", str(FAULT_SHAPE["seed"])])
        femu.prepare([chaos.ids[d] for d in ["large"] + chaos_dirs])
        faults = [spec for _, spec in chaos_helpers.chaos_fault_specs()]
        self.extra["w8"] = {"ttfb_ms": a.ds_ttfb_ms, "user_rate": a.user_rate,
                            "modes": RECOVERY_MODES[a.recovery], "files": tree.files,
                            "bytes": tree.bytes, "chaos_files": len(chaos.data)}
        for mode in RECOVERY_MODES[a.recovery]:
            self.w8_mode(mode, tree, emu, chaos, femu, faults)

    def w9(self):
        """Workload 9 (issue 25): see bench/README.md. Its own emulators: the class folders at the
        top of My Drive beside unrelated folders, and workload 8's folder layout."""
        a, c = self.args, self.cfg
        if not self.have_torch("9"):
            return
        base = os.path.join(self.work, "w9")
        top = DatasetTree(base, c["ds_files"], c["ds_classes"], top=True)
        tree = DatasetTree(base, c["ds_files"], c["ds_classes"])
        t = time.monotonic()
        top.make()
        tree.make()
        log("9: %d files (%s) in %d classes at the top of My Drive beside %d unrelated files (%s), "
            "and in a folder, written in %.1f s" % (top.files, fmt_bytes(top.bytes), top.classes,
                                                   len(top.unrelated_ids),
                                                   fmt_bytes(top.unrelated_bytes),
                                                   time.monotonic() - t))
        quota = ["--user-rate", "%g" % a.user_rate]
        emus = {}
        for name, tr in (("top", top), ("folder", tree)):
            emus[name] = Emulator(self, tr.spec_path, "emu-w9-" + name, a.ds_ttfb_ms, a.bandwidth,
                                  a.total_bandwidth, quota)
            emus[name].prepare(tr.folder_ids)
        mode = RECOVERY_MODES[a.recovery][0]
        self.extra["w9"] = {"files": top.files, "bytes": top.bytes, "mode": mode,
                            "unrelated_files": len(top.unrelated_ids)}
        n = top.files
        cases = [(k, w, h, top, emus["top"], "top of My Drive") for k, w, h in TOP_CASES] + \
                [("9f1", 1, True, tree, emus["folder"], "in a folder"),
                 ("9f2", 2, True, tree, emus["folder"], "in a folder")]
        bounds = {}
        for key, workers, hint, tr, emu, where in cases:
            if where not in bounds:
                bounds[where] = self.quota_probe(emu, tr)
            bound, bound_note = bounds[where]
            m = self.new_mount("%s-%s" % (key, mode), None, emu, ["--recovery=" + mode])
            root = m.mnt if tr.top else m.path("dataset")
            opts = DS_OPTIONS + (["--classes", "class"] if tr.top else []) + \
                (["--hint"] if hint else [])
            with Probe(self, m, emu) as pr:
                cold = self.dl_epochs(root, 1, workers, options=opts)
            secs = cold["epochs"][0]["seconds"]
            media = [r for r in emu.call("/_emu/log") if r["kind"] == "media"]
            unrelated = sum(1 for r in media if r.get("id") in tr.unrelated_ids)
            extra = pr.emu["media_bytes"] - tr.bytes
            waste = "%.1f%%" % (100 * extra / tr.bytes)
            target = ">= 90%" if key in ("9h1", "9f1") else ">= 80%, 0 unrelated" \
                if key == "9t2" else ""
            self.row(key, "cold epoch, %s, %d worker%s, shuffled, %s" % (
                         where, workers, "s" if workers > 1 else "", "hinted" if hint else "no hint"),
                     n / secs, "files/s", bound, "files/s", "quota bound, measured", target=target,
                     note="%s; media bytes past the dataset's %s (read-ahead waste): %s; unrelated "
                          "files downloaded: %d of %d; hint: %s; %s"
                          % (bound_note, fmt_bytes(tr.bytes), waste, unrelated,
                             len(tr.unrelated_ids), cold["epochs"][0].get("hint"),
                             self.w9_note(pr, n, cold)))
            m.umount()

    def w9_note(self, pr, files, run):
        return self.w8_note(pr, files, run) + "; hint counters: " + ", ".join(
            "%s %s" % (k, counter_text(pr, k)) for k in (
                "order_hints_total", "order_hints_dropped_total", "order_hint_files_total",
                "order_hint_used_bytes_total", "order_hint_wasted_bytes_total"))

    def quota_probe(self, emu, tree):
        """The quota bound, measured: a client that knows the emulator's quota (its bucket: rate
        --user-rate a second, as many at once) downloads every dataset file once over 48
        connections, starting requests as the bucket allows. Returns (files/s, a note)."""
        a = self.args
        rate = a.user_rate or 1e9
        todo, lock = list(self.dataset_ids(emu, tree)), threading.Lock()
        state = {"tokens": rate, "t": time.monotonic(), "refused": 0}

        def take():
            while True:
                with lock:
                    now = time.monotonic()
                    state["tokens"] = min(rate, state["tokens"] + (now - state["t"]) * rate)
                    state["t"] = now
                    if state["tokens"] >= 1:
                        state["tokens"] -= 1
                        return
                    wait = (1 - state["tokens"]) / rate
                time.sleep(wait)

        def worker():
            while True:
                with lock:
                    if not todo:
                        return
                    fid = todo.pop()
                while True:
                    take()
                    req = urllib.request.Request(emu.url + "/drive/v3/files/%s?alt=media" % fid,
                                                 headers={"Authorization": "Bearer " + TOKEN})
                    try:
                        with urllib.request.urlopen(req, timeout=120) as r:
                            r.read()
                        break
                    except urllib.error.HTTPError as e:
                        if e.code not in (403, 429):
                            raise
                        with lock:
                            state["refused"] += 1
                        time.sleep(0.05)
        n = len(todo)
        time.sleep(1.5)  # the emulator's bucket full again after the listings
        emu.reset()
        t = time.monotonic()
        threads = [threading.Thread(target=worker) for _ in range(48)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        secs = time.monotonic() - t
        time.sleep(1.5)
        log("9: quota bound measured: %d files in %.2f s (%.0f files/s), %d refused"
            % (n, secs, n / secs, state["refused"]))
        return n / secs, ("quota bound measured: %d files in %.2f s by 48 connections paced at "
                          "%g/s, %d refused (nominal %g files/s)"
                          % (n, secs, rate, state["refused"], a.user_rate))

    @staticmethod
    def dataset_ids(emu, tree):
        """The Drive ids of the dataset's files (not the unrelated ones), from the emulator."""
        return [f["id"] for fid in tree.folder_ids for f in emu.children(fid, "id,mimeType")
                if f["mimeType"] != FOLDER and f["id"] not in tree.unrelated_ids]

    def w10(self):
        """Workload 10 (issue 25 item 3): warm shuffled 2-worker DataLoader epochs over an
        ImageFolder tree whose every file is cached (cache on tmpfs), against the same epochs on the
        local tmpfs copy, runs of the two interleaved (local, mount, local, mount): best and median
        of each side, and the FUSE requests the server read per file and epoch, by kind; beside
        them the kernel's floor, bench/floor_fuse over the local copy (rows -floor)."""
        a = self.args
        if not self.have_torch("10"):
            return
        self.floor = self.floor_bin()
        for n in WARM_SIZES["quick" if a.quick else "full"]:
            base = os.path.join(self.work, "w10-%d" % n)
            tree = DatasetTree(base, n, max(1, n // WARM_PER_CLASS))
            t = time.monotonic()
            tree.make()
            log("10: %d files (%s) written in %.1f s" % (n, fmt_bytes(tree.bytes), time.monotonic() - t))
            # no time to first byte and no quota: the cold pass only fills the cache
            emu = Emulator(self, tree.spec_path, "emu-warm-%d" % n, 0, a.bandwidth, a.total_bandwidth)
            emu.prepare(tree.folder_ids)
            for mode in RECOVERY_MODES[a.recovery]:
                self.w10_mode(mode, tree, emu)
            shutil.rmtree(base, ignore_errors=True)

    def floor_bin(self):
        """Builds bench/floor_fuse if it is missing; False (and a note) where it cannot."""
        if os.access(FLOOR_BIN, os.X_OK):
            return True
        r = subprocess.run(["make", "-C", TOP, "bench/floor_fuse"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        if r.returncode == 0 and os.access(FLOOR_BIN, os.X_OK):
            return True
        self.notes.append("10: no floor rows: `make bench/floor_fuse` failed: %s"
                          % r.stdout.decode(errors="replace")[-500:])
        return False

    def w10_mode(self, mode, tree, emu):
        """Workload 10's rows for ``--recovery=MODE``: a writable mount (the default), then a read-only
        one on the same cache folder (the kernel opens files itself there); with --ref-bin the
        reference binary's mounts beside them.  Each round runs WARM_EPOCHS epochs on the local
        copy and on every mount, in turn."""
        a = self.args
        n = tree.files
        size = "%dk" % (n // 1000) if n % 1000 == 0 else "%d" % n
        sfx = "" if mode == "auto" else "/" + mode[:3]
        bins = [("", None)] + ([("-ref", a.ref_bin)] if a.ref_bin else [])

        def run(root):
            return [e["seconds"] for e in self.dl_epochs(root, WARM_EPOCHS, 2, options=DS_OPTIONS)["epochs"]]
        for kind, what, opts in (("w", "writable", []), ("r", "read-only", ["--read-only"])):
            side = {}
            for tag, binary in bins:
                cache = os.path.join(self.work, "cache-warm%d-%s%s" % (n, mode, tag))
                m = self.new_mount("warm%d-%s-%s%s" % (n, mode, kind, tag), cache, emu,
                                   ["--recovery=" + mode] + opts, binary)
                t = time.monotonic()
                self.dl_epochs(m.path("dataset"), 1, 2, options=DS_OPTIONS)  # fills the caches
                log("10: %d files, %s%s: first epoch in %.1f s" % (n, what, tag, time.monotonic() - t))
                side[tag] = (m, [], m.stats(), proc_cpu(m.server_pid()))
            # the floor: a server that answers OPEN at once (as the writable mount must be asked),
            # or answers no OPEN (as the read-only mount)
            floor = FloorMount(self, "floor%d-%s-%s" % (n, mode, kind), os.path.dirname(tree.root),
                               no_open=kind == "r") if self.floor else None
            if floor:
                self.dl_epochs(floor.path("dataset"), 1, 2, options=DS_OPTIONS)  # the page cache
                floor_cpu = proc_cpu(floor.proc.pid)
            local, floored = [], []
            for _ in range(WARM_ROUNDS):
                local += run(tree.root)
                for tag, _ in bins:
                    side[tag][1].extend(run(side[tag][0].path("dataset")))
                if floor:
                    floored += run(floor.path("dataset"))
            if floor:
                floor_cpu = (proc_cpu(floor.proc.pid) or 0) - (floor_cpu or 0)
                floor.umount()
                self.w10_floor_row("10%s%s-floor%s" % (kind, size, sfx), n, kind, what, floored,
                                   local, floor_cpu)
            for tag, binary in bins:
                m, got, before, cpu0 = side[tag]
                after = m.stats()
                cpu = (proc_cpu(m.server_pid()) or 0) - (cpu0 or 0)
                running = after.get("recovery_mode")
                label = "%s, recovery %s%s" % (what, RECOVERY_NAMES[running] if running in range(4)
                                               else mode, ", reference binary" if tag else "")
                if kind == "w" and not tag and not a.no_verify:
                    for folder, _, names in os.walk(tree.root):
                        for name in names:
                            p = os.path.join(folder, name)
                            compare_files(p, m.path("dataset", os.path.relpath(p, tree.root)))
                m.umount(keep_cache=kind == "w")
                self.w10_row("10%s%s%s%s" % (kind, size, tag, sfx), n, label, got, local, before, after,
                            cpu, floored)

    def w10_floor_row(self, key, n, kind, what, floored, local, cpu):
        """The floor's row beside workload 10's ``what`` rows: its median epoch against the local
        copy's, and its CPU seconds ``cpu`` per file and epoch."""
        self.row(key, "warm epoch, %d files, 2 workers, shuffled (bench/floor_fuse, %s)"
                 % (n, "opens answered ENOSYS: no-open" if kind == "r" else
                    "OPEN and RELEASE answered at once"),
                 med(floored), "s", med(local), "s", "median epoch on the local tmpfs copy",
                 higher_better=False, target="",
                 note="the kernel's floor for the %s rows beside it; its CPU %.1f us per file and "
                      "epoch; best %.3f s vs %.3f s; epochs %s"
                      % (what, cpu * 1e6 / (n * len(floored)), min(floored), min(local),
                         ", ".join("%.3f" % x for x in floored)))

    def w10_row(self, key, n, label, got, local, before, after, cpu, floored):
        """A row of workload 10: the median epochs, and the FUSE requests the server read per file
        and epoch between the stats ``before`` and ``after`` (by kind where the binary counts them)
        and its CPU seconds ``cpu`` meanwhile; ``floored``: the floor's epochs (may be empty)."""
        epochs = n * len(got)
        delta = {k: v - before.get(k, 0) for k, v in after.items() if isinstance(v, (int, float))}
        per_kind = ", ".join("%s %.2f" % (k[len("fuse_requests_"):-len("_total")], v / epochs)
                             for k, v in sorted(delta.items())
                             if k.startswith("fuse_requests_") and k != "fuse_requests_total"
                             and v >= 0.005 * epochs)
        total = delta.get("fuse_requests_total")
        reqs = ("%.2f FUSE requests per file and epoch%s" % (total / epochs, " (%s)" % per_kind
                                                             if per_kind else "")
                if total is not None else "no FUSE request counter")
        inline = delta.get("fuse_served_by_reader_total")
        if inline is not None and total:
            reqs += ("; %.0f%% served by the thread that read them, %d handed off, %d rescued"
                     % (100.0 * inline / total, delta.get("fuse_handoffs_total", 0),
                        delta.get("fuse_rescues_total", 0)))
        self.row(key, "warm epoch, %d files, 2 workers, shuffled (%s)" % (n, label), med(got), "s",
                 med(local), "s", "median epoch on the local tmpfs copy", higher_better=False,
                 target=">= 77% (<= 1.3x time)",
                 note="%s%s; server CPU %.1f us per file and epoch; best %.3f s vs %.3f s (%.2fx); "
                      "mount epochs %s; local %s"
                      % (reqs, "; %.2fx the floor's median (%.3f s, its row -floor)"
                         % (med(got) / med(floored), med(floored)) if floored else "",
                         cpu * 1e6 / epochs, min(got), min(local), min(got) / min(local),
                         ", ".join("%.3f" % x for x in got), ", ".join("%.3f" % x for x in local)))

    def w8_mode(self, mode, tree, emu, chaos, femu, faults):
        """Every row of workload 8 with ``colabfs mount --recovery=MODE``."""
        a = self.args
        sfx = "" if mode == "auto" else "/" + mode[:3]
        opts = ["--recovery=" + mode]
        n = tree.files
        local = [e["seconds"] for e in self.dl_epochs(tree.root, 3, 2, options=DS_OPTIONS)["epochs"]]
        warm = {}
        for key, workers, in_order, on_disk in DS_CASES:
            cache = tempfile.mkdtemp(prefix="colabfs-bench-cache-", dir=DISK_CACHE_PARENT) if on_disk \
                else None
            m = self.new_mount("%s-%s" % (key, mode), cache, emu, opts)
            running = m.stats().get("recovery_mode")
            label = "%s, recovery %s" % ("cache on disk" if on_disk else "cache on tmpfs",
                                         RECOVERY_NAMES[running] if running in range(4) else mode)
            with Probe(self, m, emu) as pr:
                cold = self.dl_epochs(m.path("dataset"), 1, workers,
                                      options=DS_OPTIONS + (["--sorted"] if in_order else []))
            secs = cold["epochs"][0]["seconds"]
            latency_bound = workers * 1000 / a.ds_ttfb_ms
            self.row(key + sfx, "cold epoch, %d worker%s, %s (%s)"
                     % (workers, "s" if workers > 1 else "", "sorted" if in_order else "shuffled", label),
                     n / secs, "files/s", a.user_rate or None, "files/s",
                     "quota bound; latency bound %d/%g ms = %.0f files/s: %.0f%%"
                     % (workers, a.ds_ttfb_ms, latency_bound, 100 * n / secs / latency_bound),
                     target=">= 80%", note=self.w8_note(pr, n, cold))
            if key == "8c2":
                self.w8_readahead(sfx, pr, tree)
            if key in ("8c2", "8d2"):
                got = [e["seconds"] for e in self.dl_epochs(m.path("dataset"), 3, 2,
                                                            options=DS_OPTIONS)["epochs"]]
                warm["8wt" if key == "8c2" else "8wd"] = (got, label)
                if key == "8c2" and not a.no_verify:
                    for folder, _, names in os.walk(tree.root):
                        for name in names:
                            local_path = os.path.join(folder, name)
                            compare_files(local_path, m.path("dataset", os.path.relpath(local_path,
                                                                                        tree.root)))
                    log("8: the dataset on the mount equals the source")
            m.umount()
        local += [e["seconds"] for e in self.dl_epochs(tree.root, 3, 2, options=DS_OPTIONS)["epochs"]]
        for key in ("8wt", "8wd"):
            got, label = warm[key]
            self.row(key + sfx, "warm epoch, 2 workers, shuffled (%s)" % label, min(got), "s", min(local),
                     "s", "best epoch on the local tmpfs copy", higher_better=False,
                     target=">= 67% (<= 1.5x time)",
                     note="best of 3 warm epochs after the cold one, on its mount: %s; local: %s"
                          % (", ".join("%.2f" % x for x in got), ", ".join("%.2f" % x for x in local)))
        self.w8_faults(sfx, mode, chaos, femu, faults)

    def w8_note(self, pr, files, run):
        e = pr.emu
        return ("listing %.2f s (before the epoch); %s; Drive: %d requests in all for %d files "
                "(%.2f media requests per file, %d files.get), quota_rejected %d, max_concurrent %d "
                "(media %d), at most %d requests in 1 s; colabfs: %s"
                % (run["list_s"], pr.note(), e["requests"], files,
                   e["by_kind"].get("media", 0) / files, e["by_kind"].get("files.get", 0),
                   e["quota_rejected"], e["max_concurrent"], e["max_concurrent_media"],
                   e["max_requests_per_s"],
                   ", ".join("%s %s" % (k, counter_text(pr, k)) for k in DS_COUNTERS)
                   + ", api_rate %s" % counter_text(pr, "api_rate", gauge=True)))

    def w8_readahead(self, sfx, pr, tree):
        """The read-ahead's bytes over the cold shuffled 2-worker epoch: wasted bytes as a share of
        the tree's bytes (no figure when this colabfs has no dataset read-ahead counters)."""
        wasted = pr.delta.get("dataset_wasted_bytes_total")
        self.row("8ra" + sfx, "read-ahead during the cold 2-worker epoch: bytes wasted",
                 None if wasted is None else 100 * wasted / tree.bytes, "%", None, "",
                 "fetched %s, used %s, wasted %s of a %s tree"
                 % (counter_text(pr, "dataset_prefetched_bytes_total"),
                    counter_text(pr, "dataset_used_bytes_total"),
                    counter_text(pr, "dataset_wasted_bytes_total"), fmt_bytes(tree.bytes)),
                 target="<= 10% of bytes")

    def w8_faults(self, sfx, mode, chaos, femu, faults):
        """One reader walks the chaos tree fault-free, then on a fresh mount with the chaos test's
        fault mix (~10% of requests)."""
        opts = ["--recovery=" + mode]
        m = self.new_mount("walk-clean-" + mode, emu=femu, opts=opts)
        with Probe(self, m, femu) as pr:
            clean, files, nbytes, problems = walk_read(m.mnt, chaos.data)
        m.umount()
        if problems:
            raise RuntimeError("8: the fault-free walk failed: %s" % problems[:5])
        m = self.new_mount("walk-faults-" + mode, emu=femu, opts=opts)
        femu.set_faults(faults)
        try:
            with Probe(self, m, femu) as pr:
                secs, _, _, problems = walk_read(m.mnt, chaos.data)
        finally:
            fired = femu.fired()
            femu.set_faults([])
        d = pr.delta
        self.row("8f" + sfx, "one reader walks %d files (%s), ~10%% faults, ttfb %d ms%s"
                 % (files, fmt_bytes(nbytes), FAULT_TTFB_MS, ", %d ERRORS" % len(problems) if problems
                    else ""),
                 secs, "s", clean, "s", "the same walk fault-free", higher_better=False,
                 target=">= 50% (<= 2x time), 0 errors",
                 note="%d faults in %d requests (%.1f%%); %d errors%s; colabfs: %d retries, %d resumed, "
                      "hedges %s (won %s), rate_limited %s; emulator cancelled %d; %s"
                      % (fired, pr.emu["requests"], 100 * fired / max(1, pr.emu["requests"]),
                         len(problems), " (%s)" % "; ".join(problems[:3]) if problems else "",
                         d.get("drive_retries_total", 0), d.get("drive_resumed_downloads_total", 0),
                         counter_text(pr, "hedges_total"), counter_text(pr, "hedge_wins_total"),
                         counter_text(pr, "rate_limited_total"), pr.emu["cancelled"], pr.note()))
        m.umount()

    # -- report -----------------------------------------------------------------------------------

    def report(self, argv):
        a = self.args
        lines = []
        lines.append("colabfs bench: %s" % " ".join(["/usr/bin/python3", "bench/run.py"] + argv))
        lines.append("emulator: ttfb %g ms, %.0f MB/s per connection%s; colabfs --max-connections=%d %s"
                     % (a.ttfb_ms, a.bandwidth / MB,
                        ", %.0f MB/s total" % (a.total_bandwidth / MB) if a.total_bandwidth else "",
                        a.max_connections, " ".join(a.mount_opt)))
        if "w9" in self.extra:
            w9 = self.extra["w9"]
            lines.append("workload 9: %d files (%s) at ttfb %g ms, --user-rate %g, %d unrelated files "
                         "beside them at the top of My Drive; recovery mode %s"
                         % (w9["files"], fmt_bytes(w9["bytes"]), a.ds_ttfb_ms, a.user_rate,
                            w9["unrelated_files"], w9["mode"]))
        if "w8" in self.extra:
            w8 = self.extra["w8"]
            lines.append("workload 8: %d files (%s) at ttfb %g ms, --user-rate %g; fault case at ttfb %d ms;"
                         " recovery modes: %s" % (w8["files"], fmt_bytes(w8["bytes"]), w8["ttfb_ms"],
                                                  w8["user_rate"], FAULT_TTFB_MS, ", ".join(w8["modes"])))
        lines.append("host: %d CPUs, %s RAM, Linux %s" % (os.cpu_count(), fmt_bytes(
            os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")), os.uname().release))
        lines.append("load average at start %s, at end %s (the bench shares the machine)"
                     % (self.extra.get("load_start", "?"), " ".join(open("/proc/loadavg").read().split()[:3])))
        lines.append("ratio = measured speed / reference speed (for times: reference / measured)")
        lines.append("")
        hdr = ("#", "workload", "measured", "reference", "", "ratio", "target")
        rows = [hdr]
        for r in self.rows:
            rows.append((r["key"], r["workload"], fmt_val(r["measured"], r["unit"]),
                         fmt_val(r["reference"], r["ref_unit"]), r["ref_name"],
                         "%.0f%%" % (100 * r["ratio"]) if r["ratio"] else "-", r["target"]))
        w = [max(len(str(x[i])) for x in rows) for i in range(len(hdr))]
        for i, x in enumerate(rows):
            lines.append("  ".join(str(v).rjust(w[k]) if k in (2, 3, 5) else str(v).ljust(w[k])
                                   for k, v in enumerate(x)).rstrip())
            if i == 0:
                lines.append("  ".join("-" * n for n in w))
        if "rss" in self.extra:
            lines.append("")
            lines.append("daemon peak memory during workload 1: VmHWM %s (limit 256 MiB)"
                         % fmt_bytes(self.extra["rss"]["VmHWM"]))
        if self.notes:
            lines.append("")
            lines.append("notes:")
            for n in self.notes:
                lines.append("  " + n)
        text = "\n".join(lines)
        print(text)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"argv": argv, "rows": self.rows, "notes": self.notes, "extra": self.extra,
                           "config": self.cfg}, f, indent=1)


class Side(Bench):
    """The suite's Bench for a bench script of its own (mem_bench.py, write_bench.py): its Emulator
    and Mount bookkeeping and its clean-up."""

    def __init__(self, keep, mount_opt=()):
        super().__init__(argparse.Namespace(quick=False, big_mib=0, rand_seconds=0, max_connections=16,
                                            mount_opt=list(mount_opt), keep=keep))

    def run_in(self, body, prefix, workdir):
        """``guarded(body)`` in a fresh work folder (``self.work``, with logs/) under ``workdir``."""
        def inner():
            self.work = tempfile.mkdtemp(prefix=prefix, dir=workdir)
            os.makedirs(os.path.join(self.work, "logs"))
            body()
        return self.guarded(inner)


def med(xs):
    return statistics.median(xs)


def counter_text(pr, name, gauge=False):
    """A colabfs counter's change across a Probe (a gauge's value after it), or "n/a" when this
    colabfs has no such counter."""
    value = (pr.after if gauge else pr.delta).get(name)
    if value is None:
        return "n/a"
    return fmt_bytes(value) if name.endswith("_bytes_total") else "%g" % value


def fmt_val(v, unit):
    if v is None:
        return "-"
    if unit == "MB/s":
        return "%.0f MB/s" % (v / MB)
    if unit == "IOPS":
        return "%.0f IOPS" % v
    if unit == "s":
        return "%.2f s" % v
    if unit == "files/s":
        return "%.1f files/s" % v
    if unit == "%":
        return "%.1f%%" % v
    return "%g %s" % (v, unit)


def parse_size(s):
    s = s.strip().upper()
    mult = {"K": KiB, "M": MiB, "G": GiB, "T": 1 << 40}.get(s[-1:], 1)
    return int(float(s.rstrip("KMGT")) * mult)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description="colabfs benchmark suite (issue 4); see bench/README.md")
    ap.add_argument("--quick", action="store_true",
                    help="smaller data (256 MiB, 500 files, 2,000 entries): a smoke run")
    ap.add_argument("--ttfb-ms", type=float,
                    help="emulator time to first byte (100; workload 8: %d)" % DS_TTFB_MS)
    ap.add_argument("--bandwidth", type=int, default=25_000_000,
                    help="emulator bytes/s per connection (25000000)")
    ap.add_argument("--total-bandwidth", type=int, default=0,
                    help="emulator bytes/s for all connections together (0: unlimited)")
    ap.add_argument("--max-connections", type=int, default=16,
                    help="colabfs --max-connections, also the reference's connection count (16)")
    ap.add_argument("--mount-opt", action="append", default=[], metavar="OPT",
                    help="extra colabfs mount option, e.g. --mount-opt=--max-request=64M (repeatable)")
    ap.add_argument("--big-mib", type=int, help="size of the big file in MiB (1024; quick 256)")
    ap.add_argument("--rand-seconds", type=float, help="seconds of each random-read test (6; quick 3)")
    ap.add_argument("--user-rate", type=float, default=DS_USER_RATE,
                    help="workload 8: Drive API requests/s per user the emulator allows (%d; 0: no "
                         "quota)" % DS_USER_RATE)
    ap.add_argument("--ref-bin", metavar="PATH",
                    help="workload 10: also mount this colabfs binary (an older build) beside the one "
                         "measured, on the same data, epochs in turn (rows marked -ref)")
    ap.add_argument("--recovery", choices=sorted(RECOVERY_MODES), default="both",
                    help="workloads 8 and 10: colabfs --recovery mode(s) (both: auto and forward; workload 9: the first)")
    ap.add_argument("--only", default="1,2,3,4,5,6,7,8,9,10", help="workloads to run, e.g. 1,2,6")
    ap.add_argument("--workdir", default="/dev/shm", help="where the data and caches go (/dev/shm)")
    ap.add_argument("--no-verify", action="store_true", help="skip the (untimed) byte comparisons")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs) at exit")
    args = ap.parse_args(argv)
    args.ds_ttfb_ms = DS_TTFB_MS if args.ttfb_ms is None else args.ttfb_ms
    if args.ttfb_ms is None:
        args.ttfb_ms = 100
    only = set(args.only.split(","))
    bench = Bench(args)

    def body():
        bench.setup(bool(only & set("1234567")), bool(only & {"8", "9"}), "10" in only)
        if only & {"1", "2", "6"}:
            bench.w1_w2_w6("1" in only, "2" in only, "6" in only)
        if "3" in only:
            bench.w3()
        if "4" in only:
            bench.w4()
        if "5" in only:
            bench.w5()
        if "7" in only:
            bench.w7()
        if "8" in only:
            bench.w8()
        if "9" in only:
            bench.w9()
        if "10" in only:
            bench.w10()
    rc = bench.guarded(body)
    if bench.rows:
        bench.report(argv)
    return rc


if __name__ == "__main__":
    sys.exit(main())
