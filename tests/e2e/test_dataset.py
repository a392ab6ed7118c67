"""Dataset read-ahead, quota pacing and their bounds, end to end on real mounts.

The acceptance list of the epoch-speed issue (hedging has its own module,
test_hedge.py):

1. a shuffled read of an ImageFolder class tree by two worker processes gets
   every byte right; the tree is fetched ahead by a dataset scan, each file
   once, and the emulator, enforcing a per-user request quota, refuses few
   requests (no storm) and never sees more requests at once than colabfs's
   connections;
2. a reader's miss issued while read-ahead saturates the request budget is
   served within about one round trip, not behind the queue;
3. 20 files read from a 5,000-file folder (in listing order, or picked at
   random) cause fewer than 100 downloads;
4. read-ahead stops within a few seconds of the readers stopping, and at
   unmount;
5. with the emulator's quota far below --api-rate, the pacer backs off
   (stats show the refusals and a lower rate) and refusals stay a small
   share of the requests;
6. the server killed (SIGKILL) during a dataset scan loses nothing: the
   readers get every byte right from the restarted server;
7. class folders at the top of a whole-drive mount, beside unrelated folders
   (issue 25): a shuffled two-worker read starts a sibling scan of the class
   folders, and no file of an unrelated folder is downloaded; also on a
   read-only mount, where the kernel opens files itself.

Timings are printed, not asserted, except for the miss in 2, whose bound
(1.5 s against a 200 ms round trip) is several times below what queueing
behind the scan would cost (about 4 s).
"""

import multiprocessing
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

import helpers as H
import chaos_helpers as X
from conftest import SEED, SESSION_TOKEN

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "emulator"))
import emucontent  # noqa: E402

KiB = H.KiB
CLASSES, PER_CLASS = 10, 60        # the ImageFolder tree: 600 files
FLAT_N = 5000                      # the large flat folder
FLAT_ID = "1FlatDatasetFolder00000000000000"
OTHER_ID = "1OtherFolderForMisses00000000000"
CONTENT_SEED = 777


def report(capsys, text):
    H.report(capsys, "dataset", text)


def flat_name(i):
    return "s%05d.bin" % i


def flat_bytes(i):
    return emucontent.numbered_bytes(CONTENT_SEED, i)


@pytest.fixture(scope="module")
def class_tree(tmp_path_factory):
    t = X.SpecTree(tmp_path_factory.mktemp("dataset-tree"), "dataset", SEED)
    t.folder("imgs")
    for c in range(CLASSES):
        t.folder("imgs/class%02d" % c)
        for i in range(PER_CLASS):
            t.file("imgs/class%02d/img%03d.jpg" % (c, i), t.rng.randrange(2 * KiB, 40 * KiB))
    t.folder("other")
    for i in range(4):
        t.file("other/o%d.bin" % i, t.rng.randrange(10 * KiB, 30 * KiB))
    # the large flat folder: numbered items the emulator makes itself
    t.items.append({"id": FLAT_ID, "name": "flat", "parent": "root", "mimeType": H.FOLDER})
    t.items.append({"name": "s{i:05d}.bin", "parent": FLAT_ID, "repeat": FLAT_N,
                    "seed": CONTENT_SEED})
    t.write_spec()
    return t


def make_emu(emulator_factory, t, name, ttfb_ms, rate, burst=None):
    extra = ["--user-rate", str(rate)]
    if burst:
        extra += ["--user-burst", str(burst)]
    return emulator_factory(t.spec_path, name, access_token=SESSION_TOKEN, ttfb_ms=ttfb_ms,
                            extra=extra)


def media_count(emu):
    return emu.stats()["by_kind"].get("media", 0)


def listed_files(m, rel):
    """The files below rel, listed the way torchvision's ImageFolder does."""
    out = []
    top = m.path(rel)
    for c in sorted(os.listdir(top)):
        for n in sorted(os.listdir(os.path.join(top, c))):
            out.append(os.path.join(rel, c, n))
    return out


def _worker(mnt, rels, q):
    got = {}
    try:
        for rel in rels:
            with open(os.path.join(mnt, rel), "rb") as f:
                got[rel] = f.read()
        q.put(("ok", got))
    except OSError as e:
        q.put(("err", "%s: %s" % (rel, e)))


def read_by_processes(m, rels, workers, timeout):
    """Reads rels split among worker processes (a DataLoader's way); returns {rel: bytes}."""
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(m.mnt), rels[i::workers], q))
             for i in range(workers)]
    for p in procs:
        p.start()
    got = {}
    try:
        for _ in procs:
            kind, val = q.get(timeout=timeout)
            assert kind == "ok", "a reader failed: %s" % val
            got.update(val)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    return got


def shuffled_epoch(m, t, seed, timeout):
    """The class tree read shuffled by two processes, every byte compared;
    returns the seconds it took."""
    rels = listed_files(m, "imgs")
    assert len(rels) == CLASSES * PER_CLASS
    random.Random(seed).shuffle(rels)
    t0 = time.monotonic()
    got = read_by_processes(m, rels, 2, timeout=timeout)
    took = time.monotonic() - t0
    for rel in rels:
        X.check(got[rel], t.data[rel], rel)
    return took, rels


def settled(m):
    """Nothing queued or downloading (read-ahead included)."""
    st = X.cstats(m)
    return st["downloads_in_flight"] == 0 and st["scan_requests_queued"] == 0 and \
        st["dataset_scans_running"] == 0


# --------------------------------------------------------------------------
# 1. a shuffled two-worker epoch


@pytest.mark.deadline(240)
def test_shuffled_two_workers_class_tree(class_tree, emulator_factory, mount_factory, capsys):
    t = class_tree
    emu = make_emu(emulator_factory, t, "emu-ds1", ttfb_ms=100, rate=200)
    m = mount_factory.new(emu, name="ds1")
    took, rels = shuffled_epoch(m, t, SEED, 180)
    st, es = X.cstats(m), emu.stats()
    media = es["by_kind"].get("media", 0)
    report(capsys, "shuffled 2-worker epoch of %d files: %.2f s (quota bound %.2f s, latency "
           "bound %.2f s); scans %d, fetched ahead %d files, %d media requests; emulator: %d "
           "refused for quota, at most %d requests at once, %s/s at most; pacer %d/s"
           % (len(rels), took, len(rels) / 200, len(rels) * 0.1 / 2, st["dataset_scans_total"],
              st["dataset_prefetched_files_total"], media, es.get("quota_rejected", -1),
              es.get("max_concurrent", -1), es.get("max_requests_per_s", "?"), st["api_rate"]))
    assert st["dataset_scans_total"] >= 1, "no dataset scan started"
    assert st["dataset_prefetched_files_total"] >= len(rels) // 2, st
    # every file downloaded once (a refused request is retried: not a download;
    # a request the client closed unanswered, a hedge's loser on a loaded
    # machine, neither: 9 of them in a fresh-clone CI run)
    assert media - es.get("quota_rejected", 0) - es.get("cancelled", 0) <= len(rels) + 5, es
    assert es["quota_rejected"] <= 10, "a storm of quota refusals: %s" % es
    # colabfs's own limit: 48 scan + 17 reader connections, listings aside
    assert es["max_concurrent"] <= 48 + 17 + 4, es
    assert st["dataset_wasted_bytes_total"] == 0, st


# --------------------------------------------------------------------------
# 2. a miss while read-ahead saturates the budget


@pytest.mark.deadline(180)
def test_miss_not_behind_readahead(class_tree, emulator_factory, mount_factory, capsys):
    t = class_tree
    emu = make_emu(emulator_factory, t, "emu-ds2", ttfb_ms=200, rate=60)
    m = mount_factory.new(emu, name="ds2", extra=["--api-rate=60"])
    names = sorted(os.listdir(m.path("flat")))
    assert len(names) == FLAT_N
    os.listdir(m.path("other"))
    # 30 files picked at random: a dataset scan of the 5,000 starts
    picks = random.Random(SEED + 2).sample(range(FLAT_N), 30)
    got = read_by_processes(m, ["flat/" + flat_name(i) for i in picks], 3, timeout=60)
    for i in picks:
        X.check(got["flat/" + flat_name(i)], flat_bytes(i), flat_name(i))
    H.wait_until(lambda: X.cstats(m)["scan_requests_queued"] >= 100, 30,
                 what="the scan queue to fill")
    times = []
    for i in range(3):
        rel = "other/o%d.bin" % i
        t0 = time.monotonic()
        with open(m.path(rel), "rb") as f:
            data = f.read()
        times.append(time.monotonic() - t0)
        X.check(data, t.data[rel], rel)
    st = X.cstats(m)
    report(capsys, "cold reads while the scan saturates 60 requests/s (%d queued): %s s"
           % (st["scan_requests_queued"], ", ".join("%.2f" % x for x in times)))
    assert st["scan_requests_queued"] >= 50, "the scan was not saturating: %s" % st
    assert max(times) < 1.5, "a reader's miss waited behind read-ahead: %s" % times


# --------------------------------------------------------------------------
# 3. a few files do not download the folder


@pytest.mark.deadline(120)
def test_twenty_files_few_downloads(class_tree, emulator_factory, mount_factory, capsys):
    t = class_tree
    emu = make_emu(emulator_factory, t, "emu-ds3", ttfb_ms=20, rate=200)
    results = []
    for how in ("in order", "at random"):
        m = mount_factory.new(emu, name="ds3")
        names = sorted(os.listdir(m.path("flat")))
        assert len(names) == FLAT_N
        before = media_count(emu)
        picks = list(range(20)) if how == "in order" else \
            random.Random(SEED + 3).sample(range(FLAT_N), 20)
        for i in picks:
            with open(m.path("flat/" + flat_name(i)), "rb") as f:
                X.check(f.read(), flat_bytes(i), flat_name(i))
        H.wait_until(lambda: settled(m), 30, what="read-ahead to settle")
        n = media_count(emu) - before
        results.append("%s: %d downloads" % (how, n))
        assert X.cstats(m)["dataset_scans_total"] == 0
        assert n < 100, "20 files %s caused %d downloads" % (how, n)
        rc, out, err = m.umount(timeout=60)
        assert rc == 0, "umount: %s %s" % (out, err)
    report(capsys, "20 files of a %d-file folder: %s" % (FLAT_N, "; ".join(results)))


# --------------------------------------------------------------------------
# 4. read-ahead stops when the readers stop, and at unmount


def start_scan(m, seed):
    names = os.listdir(m.path("flat"))
    assert len(names) == FLAT_N
    picks = random.Random(seed).sample(range(FLAT_N), 30)
    got = read_by_processes(m, ["flat/" + flat_name(i) for i in picks], 3, timeout=60)
    for i in picks:
        X.check(got["flat/" + flat_name(i)], flat_bytes(i), flat_name(i))
    H.wait_until(lambda: X.cstats(m)["dataset_scans_running"] == 1, 10, what="a scan")
    return time.monotonic()


def media_quiet(emu, seconds, slack):
    """The emulator's media count grows by at most slack over `seconds` (polled)."""
    start = media_count(emu)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        grown = media_count(emu) - start
        if grown > slack:
            return grown
        time.sleep(0.1)
    return media_count(emu) - start


@pytest.mark.deadline(180)
def test_readahead_stops(class_tree, emulator_factory, mount_factory, capsys):
    t = class_tree
    emu = make_emu(emulator_factory, t, "emu-ds4", ttfb_ms=100, rate=100)
    m = mount_factory.new(emu, name="ds4")
    last_open = start_scan(m, SEED + 4)
    H.wait_until(lambda: X.cstats(m)["dataset_scans_running"] == 0, 15,
                 what="the scan to end after the readers stopped")
    ended = time.monotonic() - last_open
    st = X.cstats(m)
    # what was running when it ended may finish (48 connections), then nothing
    grown = media_quiet(emu, 2.0, 48 + 5)
    report(capsys, "readers stopped: scan ended %.1f s later, having fetched %d files "
           "(%d bytes wasted); %d downloads after it ended"
           % (ended, st["dataset_prefetched_files_total"], st["dataset_wasted_bytes_total"],
              grown))
    assert ended < 8, "the scan ran %.1f s after the last open" % ended
    assert grown <= 48 + 5, "downloads went on after the scan ended: %d" % grown
    assert st["dataset_prefetched_files_total"] < FLAT_N - 30, "the whole folder was fetched"
    assert st["dataset_wasted_bytes_total"] > 0, st  # it had fetched ahead and nobody read it

    # at unmount: a running scan stops with the mount
    start_scan(m, SEED + 5)
    t0 = time.monotonic()
    rc, out, err = m.umount(timeout=60)
    took = time.monotonic() - t0
    assert rc == 0, "umount: %s %s" % (out, err)
    grown = media_quiet(emu, 2.0, 5)
    report(capsys, "umount during a scan: %.2f s; %d downloads after it" % (took, grown))
    assert took < 15
    assert grown <= 5, "downloads went on after unmount: %d" % grown


# --------------------------------------------------------------------------
# 5. AIMD against a quota far below --api-rate


@pytest.mark.deadline(240)
def test_quota_backoff(class_tree, emulator_factory, mount_factory, capsys):
    t = class_tree
    emu = make_emu(emulator_factory, t, "emu-ds5", ttfb_ms=20, rate=40, burst=40)
    m = mount_factory.new(emu, name="ds5")  # --api-rate 200: five times the quota
    took, rels = shuffled_epoch(m, t, SEED + 5, 200)
    st, es = X.cstats(m), emu.stats()
    requests = es["requests"]
    report(capsys, "quota 40/s, --api-rate 200: %d files in %.1f s (bound %.1f s); %d "
           "requests, %d refused; pacer rate now %d/s, %d decreases, %d refusals seen"
           % (len(rels), took, len(rels) / 40, requests, es["quota_rejected"], st["api_rate"],
              st["api_rate_decreases_total"], st["rate_limited_total"]))
    assert st["rate_limited_total"] >= 1 and st["api_rate_decreases_total"] >= 1, st
    assert st["rate_limited_total"] == es["quota_rejected"], (st, es)
    assert st["api_rate"] < 100, "the pacer did not come down: %s" % st
    assert es["quota_rejected"] <= 0.15 * requests, "a storm of refusals: %s" % es


# --------------------------------------------------------------------------
# 6. Drive's quota units (--api-units): a download costs 200, a list 100, a get 5


@pytest.mark.deadline(240)
def test_quota_units(class_tree, emulator_factory, mount_factory, capsys):
    """A quota of units (the emulator's --user-units, about 100 downloads a
    second): a mount pacing by units reads the epoch with no refusal, its
    units counted as Drive counts them; the same mount pacing by calls (the
    control) is refused (the quota admits 100 downloads or 4,000 gets a
    second, no rate of calls fits both)."""
    t = class_tree
    units = 100 * 200 * 60
    rows, logs = {}, {}
    for label, opts in (("units", ["--api-units=%d" % units]), ("calls", [])):
        emu = emulator_factory(t.spec_path, "emu-ds6" + label, access_token=SESSION_TOKEN,
                               ttfb_ms=20, extra=["--user-units", str(units)])
        m = mount_factory.new(emu, name="ds6" + label, extra=opts)
        took, rels = shuffled_epoch(m, t, SEED + 6, 200)
        if label == "units":
            # what the mount counted is what Drive charged (nothing refused, nothing in flight)
            H.wait_until(lambda: X.cstats(m)["drive_quota_units_total"] ==
                         emu.stats()["units_used"], 10, what="the units to agree")
        st, es = X.cstats(m), emu.stats()
        rows[label] = (st, es)
        logs[label] = X.log_text(m)
        report(capsys, "quota %d units/min, pacing by %s: %d files in %.1f s; %d requests "
               "(%d units), %d refused, pacer at %d/s, %d decreases"
               % (units, label, len(rels), took, es["requests"], es["units_used"],
                  es["quota_rejected"], st["api_rate"], st["api_rate_decreases_total"]))
        m.umount()
    st, es = rows["units"]
    assert st["api_rate_in_units"] == 1 and es["quota_rejected"] == 0, (st, es)
    assert st["api_burst"] == units // 60 // 2, st  # half a second's worth by default
    assert st["drive_quota_units_total"] >= 600 * 200, st  # a download a file at least
    assert "--api-units=325000" not in logs["units"]
    st, es = rows["calls"]
    assert st["api_rate_in_units"] == 0 and st["api_burst"] == 100, st  # half of 200/s
    assert es["quota_rejected"] > 0 and st["rate_limited_total"] == es["quota_rejected"], (st, es)
    # the pacer came down for the refusals, and the log says once what would fit this quota
    assert st["api_rate_decreases_total"] >= 1, st
    assert logs["calls"].count("if yours does, mount with --api-units=325000") == 1, logs["calls"]


# --------------------------------------------------------------------------
# 6. a server killed during a scan loses nothing


@pytest.mark.deadline(240)
def test_crash_during_scan(class_tree, emulator_factory, mount_factory, capsys):
    t = class_tree
    emu = make_emu(emulator_factory, t, "emu-ds6", ttfb_ms=100, rate=60)  # about 10 s
    m = mount_factory.new(emu, name="ds6")
    sup = m.xattr_pid()
    rels = listed_files(m, "imgs")
    random.Random(SEED + 6).shuffle(rels)
    result = {}

    def read_all():
        try:
            result["got"] = read_by_processes(m, rels, 2, timeout=200)
        except BaseException as e:  # noqa: B902 - reported below
            result["err"] = e

    th = threading.Thread(target=read_all)
    th.start()
    try:
        # watched from outside the mount (the emulator's counters and the
        # daemon's log), which a stats call through the busy mount is not:
        # under load its answer came after the readers had finished
        def scanning():
            media = emu.stats()["by_kind"].get("media", 0)
            started = "dataset scan of folder" in X.log_text(m)
            return (media, started) if (started and media >= 60) or not th.is_alive() else None
        media_at_kill, started = H.wait_until(scanning, 60, interval=0.02,
                                              what="a running scan")
        assert "err" not in result, "a reader failed before the kill: %r" % result.get("err")
        assert th.is_alive() and started and media_at_kill < len(rels) - 100, \
            "the readers got too far before a scan was seen: %d downloads, scan %s" % (
                media_at_kill, started)
        old = H.serve_pid(sup)
        assert old
        os.kill(old, signal.SIGKILL)
        H.wait_until(lambda: H.serve_pid(sup) not in (None, old), 30, what="a new server")
    finally:
        th.join(timeout=220)
    assert not th.is_alive(), "the readers hung after the kill"
    assert "err" not in result, "a reader failed after the kill: %r" % result.get("err")
    for rel in rels:
        X.check(result["got"][rel], t.data[rel], rel)
    st = X.cstats(m)
    report(capsys, "server killed during a scan (after %d of %d downloads): %d files read "
           "byte-exact; restarts %d, scans after the restart %d"
           % (media_at_kill, len(rels), len(rels), st["server_restarts_total"],
              st["dataset_scans_total"]))
    assert st["server_restarts_total"] >= 1


# --------------------------------------------------------------------------
# 7. class folders at the top of My Drive, beside unrelated folders

TOP_CLASSES, TOP_PER_CLASS = 8, 50
UNRELATED = {"photos": 40, "notes": 30, "Colab Notebooks": 6}


@pytest.fixture(scope="module")
def top_tree(tmp_path_factory):
    t = X.SpecTree(tmp_path_factory.mktemp("dataset-top"), "dataset-top", SEED + 25)
    for c in range(TOP_CLASSES):
        t.folder("cls%02d" % c)
        for i in range(TOP_PER_CLASS):
            t.file("cls%02d/img%03d.jpg" % (c, i), t.rng.randrange(2 * KiB, 30 * KiB))
    for name, n in UNRELATED.items():
        t.folder(name)
        for i in range(n):
            t.file("%s/f%03d.bin" % (name, i), t.rng.randrange(2 * KiB, 30 * KiB))
    t.write_spec()
    return t


@pytest.mark.deadline(240)
@pytest.mark.parametrize("ro", [False, True], ids=["writable", "read-only"])
def test_top_of_drive_classes(ro, top_tree, emulator_factory, mount_factory, capsys):
    """Also on a read-only mount, whose kernel opens files itself (FUSE
    no-open): the detector learns of a file from its first read there."""
    t = top_tree
    emu = make_emu(emulator_factory, t, "emu-ds7", ttfb_ms=100, rate=200)
    m = mount_factory.new(emu, name="ds7",  # the whole of My Drive
                          extra=["--read-only"] if ro else [])
    tops = sorted(os.listdir(m.mnt))
    assert set(UNRELATED) <= set(tops)
    for name in UNRELATED:  # listed (a file manager, a notebook's os.walk): known, not opened
        os.listdir(m.path(name))
    classes = [c for c in tops if c.startswith("cls")]
    rels = [c + "/" + n for c in classes for n in sorted(os.listdir(m.path(c)))]
    assert len(rels) == TOP_CLASSES * TOP_PER_CLASS
    random.Random(SEED + 7).shuffle(rels)
    emu.reset()
    t0 = time.monotonic()
    got = read_by_processes(m, rels, 2, timeout=180)
    took = time.monotonic() - t0
    for rel in rels:
        X.check(got[rel], t.data[rel], rel)
    H.wait_until(lambda: settled(m), 30, what="read-ahead to settle")
    st = X.cstats(m)
    unrelated_ids = {t.ids[r] for r in t.data if r.split("/")[0] in UNRELATED}
    media = [r for r in emu.log() if r.get("kind") == "media"]
    wrong = [r["id"] for r in media if r.get("id") in unrelated_ids]
    report(capsys, "top of My Drive (%s), %d classes beside %d unrelated folders: %d files in "
           "%.2f s (quota bound %.2f s); scans %d, fetched ahead %d files, %d media requests, "
           "%d of unrelated files" % ("read-only" if ro else "writable", TOP_CLASSES,
                                      len(UNRELATED), len(rels), took,
                                      len(rels) / 200, st["dataset_scans_total"],
                                      st["dataset_prefetched_files_total"], len(media),
                                      len(wrong)))
    assert not wrong, "files of unrelated folders were downloaded: %s" % wrong[:5]
    assert st["dataset_scans_total"] >= 1, "no sibling scan started: %s" % st
    assert st["dataset_prefetched_files_total"] >= len(rels) // 2, st
    assert "in folders inside it" in X.log_text(m), "the scan was not a sibling scan"
    assert st["dataset_wasted_bytes_total"] == 0, st
    if ro:
        assert st["fuse_requests_open_total"] <= 2, "the kernel still sends OPEN: %s" % st
