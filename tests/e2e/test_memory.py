"""The cache never costs the training job its memory: the RAM-aware budget and
the memory-pressure watcher, end to end on real mounts.

The watcher reads its memory facts from files the test writes (the test hooks
COLABFS_MEMINFO and COLABFS_PSI, in /proc/meminfo and /proc/pressure/memory
format), so "pressure" is whatever the test says, on any machine.  The cache
folder is on /dev/shm (the watcher only acts for a cache in RAM).

1. A mount whose cache holds about 300 MiB is told that only 480 MiB are
   free (floor 512 MiB: pressure; floor + margin 640 MiB: 160 MiB short): within a second the
   effective budget drops by the shortage and the cache is evicted under it
   (the test then writes what the kernel would show: the freed memory
   available again, no pressure, so the 15 s hold keeps read-ahead off while
   the checks run), while a reader keeps
   reading cached and uncached files with every byte right; read-ahead
   stops (no block is prefetched while paused); an open file being read is
   not thrashed (its blocks are not fetched again); when memory comes back
   the read-ahead resumes and the budget grows back to the configured one.
2. The automatic budget on tmpfs is the RAM rule's (25% of MemTotal, and
   what leaves the floor free), logged with the reason; an explicit
   --cache-size above it is kept and warned about.
"""

import json
import os
import re
import shutil
import threading
import time
import calendar

import pytest

import helpers as H
import chaos_helpers as X
from conftest import SEED, SESSION_TOKEN

MiB = H.MiB
GiB = 1024 * MiB
BIG_N, BIG_SIZE = 10, 20 * MiB          # 200 MiB, cached first
FRESH_N, FRESH_SIZE = 8, 12 * MiB + 12345  # uncached until read; > --max-request: read ahead
FLOOR = 512 * MiB


def report(capsys, text):
    H.report(capsys, "memory", text)


def meminfo(total, avail):
    return ("MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\n"
            "Shmem:          0 kB\n" % (total // 1024, avail // 1024, avail // 1024))


PSI_IDLE = ("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")


def write_atomic(path, text):
    tmp = str(path) + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


@pytest.fixture(scope="module")
def mtree(tmp_path_factory):
    t = X.SpecTree(tmp_path_factory.mktemp("memory-tree"), "memory", SEED)
    t.folder("big")
    for i in range(BIG_N):
        t.file("big/b%02d.bin" % i, BIG_SIZE)
    t.folder("fresh")
    for i in range(FRESH_N):
        t.file("fresh/f%02d.bin" % i, FRESH_SIZE)
    t.write_spec()
    return t


@pytest.fixture
def shm_dir():
    d = "/dev/shm/colabfs-test-memory-%d" % os.getpid()
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d, mode=0o700)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def stats(m):
    return json.loads(os.getxattr(m.mnt, "user.colabfs.stats").decode().rstrip("\0"))


LOG_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z ")


def log_time(line):
    """The wall-clock time (s) of a colabfs log line."""
    m = LOG_TS.match(line)
    assert m, "not a log line: %r" % line
    return calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) + int(m.group(2)) / 1000


def log_lines(m, needle):
    with open(m.log_file, errors="replace") as f:
        return [ln for ln in f if needle in ln]


def media_requests(emu, file_id):
    return sum(1 for r in emu.log()
               if r.get("kind") == "media" and file_id in r.get("path", ""))


class Reader:
    """A thread reading every file of the tree again and again, byte-exact."""

    def __init__(self, m, t):
        self.m, self.t = m, t
        self.errors, self.files = [], 0
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.run, daemon=True)

    def run(self):
        rels = sorted(self.t.data)
        i = 0
        while not self.stop.is_set():
            rel = rels[i % len(rels)]
            i += 1
            try:
                p = self.m.path(rel)
                fd = os.open(p, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    got = H.pread_full(fd, len(self.t.data[rel]) + 1, 0)
                finally:
                    os.close(fd)
                if got != self.t.data[rel]:
                    self.errors.append("%s: bytes differ at +%d" % (
                        rel, H.first_diff(got, self.t.data[rel])))
                self.files += 1
            except OSError as e:
                self.errors.append("%s: %s" % (rel, e))
            if len(self.errors) > 5:
                return

    def __enter__(self):
        self.th.start()
        return self

    def __exit__(self, *a):
        self.stop.set()
        self.th.join(120)
        assert not self.th.is_alive(), "the reader thread hangs"


def test_pressure_evicts_and_recovers(mount_factory, emulator_factory, mtree, shm_dir,
                                      tmp_path, capsys):
    emu = emulator_factory(mtree.spec_path, "emu-memory", access_token=SESSION_TOKEN, ttfb_ms=5)
    mi, psi = tmp_path / "meminfo", tmp_path / "psi"
    total = 8 * GiB
    write_atomic(mi, meminfo(total, 6 * GiB))
    write_atomic(psi, PSI_IDLE)
    env = {"COLABFS_MEMINFO": str(mi), "COLABFS_PSI": str(psi),
           "COLABFS_TEST_MEMWATCH_HOLD_MS": "15000"}
    m = mount_factory.new(emu, env_extra=env, extra=[
        "--cache-dir=" + shm_dir + "/cache", "--cache-size=400M", "--min-free-memory=512M",
        "--max-request=4M"])
    st = stats(m)
    assert st["memory_watch"] == 1 and st["memory_floor_bytes"] == FLOOR, st
    assert st["cache_budget_bytes"] == 400 * MiB and st["cache_effective_budget_bytes"] == 400 * MiB

    # 200 MiB into the cache
    for i in range(BIG_N):
        rel = "big/b%02d.bin" % i
        with open(m.path(rel), "rb") as f:
            assert f.read() == mtree.data[rel], rel
    before = stats(m)
    assert before["cache_used_bytes"] >= BIG_N * BIG_SIZE, before

    # an open file being read through the pressure: its blocks must stay
    held_rel = "big/b00.bin"
    held_id = mtree.ids[held_rel]
    hfd = os.open(m.path(held_rel), os.O_RDONLY)
    try:
        with Reader(m, mtree) as rd:
            # every file read once: the cache holds them all (296 MiB) and stops growing
            H.wait_until(lambda: rd.files >= len(mtree.data) or rd.errors, 120,
                         what="the reader's first pass")
            assert not rd.errors, rd.errors
            media_before = media_requests(emu, held_id)
            used0 = stats(m)["cache_used_bytes"]
            t_write = time.time()
            write_atomic(mi, meminfo(total, 480 * MiB))
            # the watcher logs once it has evicted; its timestamp says how long it took
            H.wait_until(lambda: log_lines(m, "memory pressure: "), 30,
                         what="the pressure log line")
            # the freed 160 MiB are available again, as the kernel would say
            # (no pressure; under the floor + 2 margins, so no growth either)
            write_atomic(mi, meminfo(total, 650 * MiB))
            took = log_time(log_lines(m, "memory pressure: ")[0]) - t_write
            during = stats(m)
            eff = during["cache_effective_budget_bytes"]
            # shortage: floor + margin (640 MiB) - 480 MiB = 160 MiB
            assert eff <= used0 - 160 * MiB + 4 * MiB, (eff, used0)
            assert eff >= 32 * MiB, eff
            assert during["cache_used_bytes"] <= eff, during
            assert during["readahead_paused"] == 1, during
            assert during["memory_pressure_episodes_total"] >= 1
            assert during["memory_pressure_evicted_bytes_total"] >= 150 * MiB, during
            assert took < 2.0, "pressure to evicted took %.2f s" % took
            # read-ahead stays off while the reader goes through uncached files
            pf0 = during["blocks_prefetched_total"]
            files0 = rd.files
            for _ in range(3):  # the held file, read again through the daemon
                os.posix_fadvise(hfd, 0, 0, os.POSIX_FADV_DONTNEED)
                got = H.pread_full(hfd, BIG_SIZE + 1, 0)
                assert got == mtree.data[held_rel], "held file bytes differ"
            for i in range(2):  # sequential reads of uncached files: no read-ahead now
                rel = "fresh/f%02d.bin" % (FRESH_N - 1 - i)
                fd = os.open(m.path(rel), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    assert H.pread_full(fd, FRESH_SIZE + 1, 0) == mtree.data[rel], rel
                finally:
                    os.close(fd)
            H.wait_until(lambda: rd.files >= files0 + 4 or rd.errors, 60,
                         what="the reader going on under pressure")
            mid = stats(m)
            assert mid["readahead_paused"] == 1, "the checks outlasted the hold: %r" % mid
            assert mid["blocks_prefetched_total"] == pf0, (pf0, mid["blocks_prefetched_total"])
            assert mid["cache_used_bytes"] <= mid["cache_effective_budget_bytes"], mid
            refetched = media_requests(emu, held_id) - media_before
            assert refetched == 0, "the open file's blocks were fetched again %d times" % refetched

            # memory comes back: read-ahead resumes after the hold, the budget grows back
            t_back = time.time()
            write_atomic(mi, meminfo(total, 6 * GiB))
            H.wait_until(lambda: stats(m)["readahead_paused"] == 0, 30,
                         what="read-ahead resuming")
            H.wait_until(lambda: stats(m)["cache_effective_budget_bytes"] == 400 * MiB, 60,
                         what="the budget growing back")
            recovered = time.time() - t_back
            after = stats(m)
            assert after["memory_pressure"] == 0
            assert after["memory_pressure_ms_total"] > 0
        assert not rd.errors, rd.errors
    finally:
        os.close(hfd)
    report(capsys, "cache %d MiB -> effective %d MiB in %.2f s after 'pressure' "
           "(%d MiB evicted, %d blocks); read-ahead paused, 0 prefetched, open file refetched "
           "%d times; %d files read byte-exact; budget back to 400 MiB %.1f s after the "
           "pressure ended (hold 15 s)" % (
               used0 // MiB, eff // MiB, took, during["memory_pressure_evicted_bytes_total"] // MiB,
               during["memory_pressure_evicted_blocks_total"], refetched, rd.files, recovered))


def test_ram_budget(mount_factory, emulator_factory, mtree, shm_dir, tmp_path):
    emu = emulator_factory(mtree.spec_path, "emu-memory2", access_token=SESSION_TOKEN)
    mi = tmp_path / "meminfo"
    total, avail = 8 * GiB, 5 * GiB
    write_atomic(mi, meminfo(total, avail))
    env = {"COLABFS_MEMINFO": str(mi), "COLABFS_PSI": str(tmp_path / "nopsi")}
    # automatic: 25% of RAM (2 GiB) unless the tmpfs or MemAvailable - floor is lower
    m = mount_factory.new(emu, env_extra=env, extra=["--cache-dir=" + shm_dir + "/a"])
    v = os.statvfs(shm_dir)
    floor = max(GiB, total // 10)
    want = min(v.f_bavail * v.f_frsize // 2, total // 100 * 25, avail - floor)
    st = stats(m)
    assert abs(st["cache_budget_bytes"] - want) < 64 * MiB, (st["cache_budget_bytes"], want)
    assert st["memory_watch"] == 1 and st["memory_floor_bytes"] == floor
    if want == total // 100 * 25:
        assert log_lines(m, "the folder is in RAM, so at most 25% of RAM"), m.log_tail()
    m.umount()
    # explicit and above the RAM rule: kept, warned (in the log and at the terminal)
    m2 = mount_factory.new(emu, env_extra=env, extra=["--cache-dir=" + shm_dir + "/b",
                                                      "--cache-size=4G"])
    assert stats(m2)["cache_budget_bytes"] == 4 * GiB
    warn = log_lines(m2, "can cost the training job its memory")
    assert warn and " warn: " in warn[0], m2.log_tail()
    # on disk: no watcher, the folder's own rule
    m3 = mount_factory.new(emu, env_extra=env, extra=["--cache-dir=" + str(tmp_path / "disk")])
    st3 = stats(m3)
    assert st3["memory_watch"] == 0
    v3 = os.statvfs(str(tmp_path))
    assert st3["cache_budget_bytes"] > min(2 * GiB, v3.f_bavail * v3.f_frsize // 4)
