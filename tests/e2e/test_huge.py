"""A folder of HUGE_N files (env HUGE_N, default 100,000) lists exactly, and the
daemon's memory for it is reported.

The emulator expands one spec item (``"repeat"``, see drive_emulator.py) into
the files f000000.bin ... with cheap deterministic contents
(emucontent.numbered_bytes) and serves the listing in pages of at most 1,000
with random short and empty pages.  The test asserts that ``os.listdir`` gives
every name exactly once, stats a few hundred random entries (sizes), reads a
few files byte-exact, and does it all again after a remount on the same cache
folder (the listing then comes from the index).  It reports, not asserts, the
VmRSS of the serving process (`colabfs serve`, the child of the supervisor
whose pid is in user.colabfs.pid) and the listing times: first, second (from
memory) and after the remount.
"""

import json
import os
import random
import sys
import time
from pathlib import Path

import pytest

import helpers as H
from conftest import SEED, SESSION_TOKEN

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "emulator"))
import emucontent  # noqa: E402

HUGE_N = int(os.environ.get("HUGE_N", "100000"))
CONTENT_SEED = 4242
N_STAT = 300
N_READ = 8


def report(capsys, text):
    H.report(capsys, "huge", text)


def name_of(i):
    return "f%06d.bin" % i


def mem_kib(pid):
    """VmRSS, RssAnon (the heap: nodes, listings), RssFile (mostly LMDB pages
    of the cache index, shared with the page cache) and VmHWM (peak) in KiB."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[key] = int(line.split()[1])
    return out


def mem_text(m):
    return "VmRSS %.1f MiB (anon %.1f, file %.1f; peak %.1f)" % (
        m["VmRSS"] / 1024, m["RssAnon"] / 1024, m["RssFile"] / 1024, m["VmHWM"] / 1024)


def timed_listdir(path):
    t = time.monotonic()
    names = os.listdir(path)
    return names, time.monotonic() - t


def check_names(names, what):
    assert len(names) == len(set(names)), "%s: %d duplicate name(s)" % (
        what, len(names) - len(set(names)))
    want = {name_of(i) for i in range(HUGE_N)}
    got = set(names)
    missing, extra = sorted(want - got), sorted(got - want)
    assert not missing and not extra, "%s: %d missing (%s), %d extra (%s)" % (
        what, len(missing), missing[:5], len(extra), extra[:5])


def check_entries(m, rng, what):
    """Stats N_STAT random entries and reads N_READ byte-exact."""
    for i in rng.sample(range(HUGE_N), min(N_STAT, HUGE_N)):
        st = os.stat(m.path("huge/" + name_of(i)))
        assert st.st_size == len(emucontent.numbered_bytes(CONTENT_SEED, i)), \
            "%s: size of %s" % (what, name_of(i))
    for i in rng.sample(range(HUGE_N), min(N_READ, HUGE_N)) + [0, HUGE_N - 1]:
        with open(m.path("huge/" + name_of(i)), "rb") as f:
            H.assert_same_bytes(f.read(), emucontent.numbered_bytes(CONTENT_SEED, i),
                                "%s: %s" % (what, name_of(i)))


@pytest.fixture(scope="module")
def huge_emulator(tmp_path_factory, emulator_factory):
    d = tmp_path_factory.mktemp("huge-spec")
    spec = {"items": [
        {"id": "1HugeFolder000000000000000000000", "name": "huge",
         "mimeType": "application/vnd.google-apps.folder"},
        {"name": "f{i:06d}.bin", "parent": "1HugeFolder000000000000000000000",
         "repeat": HUGE_N, "seed": CONTENT_SEED},
    ]}
    path = d / "spec.json"
    path.write_text(json.dumps(spec))
    return emulator_factory(path, "emu-huge", access_token=SESSION_TOKEN,
                            page_size_cap=1000, short_pages=True, seed=SEED)


@pytest.fixture(scope="module")
def quiet_machine(request):
    """The session's main emulator hashes a 5 GiB file in the background when
    it starts (~20 CPU-seconds on this suite's 2 cores); wait for that (its
    first listing waits for it) so the timings here are not measured
    against it."""
    try:
        request.getfixturevalue("emulator").list_children(H.ROOT_ID)
    except Exception:  # noqa: B902 - only a timing aid
        pass
    return True


@pytest.mark.deadline(300)
def test_huge_folder(quiet_machine, mount_factory, huge_emulator, capsys):
    m = mount_factory.new(huge_emulator, name="huge")
    rng = random.Random(SEED)
    base = H.serve_pid(m.xattr_pid())
    assert base, "no `colabfs serve` child of the supervisor %d" % m.xattr_pid()
    mem0 = mem_kib(base)

    names, first = timed_listdir(m.path("huge"))
    check_names(names, "first listing")
    names, second = timed_listdir(m.path("huge"))
    check_names(names, "second listing")
    check_entries(m, rng, "first mount")
    pid = H.serve_pid(m.xattr_pid())
    assert pid == base, "the server restarted during the test"
    mem1 = mem_kib(pid)

    rc, out, err = m.umount(timeout=60)
    assert rc == 0, "colabfs umount rc=%r: %s %s%s" % (rc, out, err, m.log_tail())
    H.wait_until(lambda: not H.is_fuse_mounted(m.mnt), 30, what="unmount")
    m.pid = None
    m.start()  # same arguments: same --cache-dir
    names, remount = timed_listdir(m.path("huge"))
    check_names(names, "listing after a remount")
    check_entries(m, rng, "after a remount")
    mem2 = mem_kib(H.serve_pid(m.xattr_pid()))

    report(capsys, "%d files, colabfs serve memory:\n"
           "  before listing:                 %s\n"
           "  after listing + %d stats + reads: %s\n"
           "  growth per entry: %.0f bytes (VmRSS), %.0f bytes (anon)\n"
           "  after a remount + the same:     %s\n"
           "listing: first %.2f s, second %.2f s, after a remount %.2f s"
           % (HUGE_N, mem_text(mem0), N_STAT, mem_text(mem1),
              (mem1["VmRSS"] - mem0["VmRSS"]) * 1024 / max(HUGE_N, 1),
              (mem1["RssAnon"] - mem0["RssAnon"]) * 1024 / max(HUGE_N, 1),
              mem_text(mem2), first, second, remount))
