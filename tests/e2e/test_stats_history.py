"""What the Python API reads from the command line (issue 23): the daemon's counter history
(`colabfs stats --history`, the user.colabfs.history attribute) and the --json progress lines of
`colabfs sync` and `colabfs warm`.

Each test has its own emulator and a writable mount.  Waits are conditions with deadlines."""

import json
import os
import time

import pytest

import helpers as H
from conftest import SESSION_TOKEN

MiB = 1024 * 1024
FOLDER = "application/vnd.google-apps.folder"
FIELDS = ["t", "read_bytes", "drive_bytes", "drive_requests", "api_rate", "cache_hits",
          "cache_misses", "uploads_pending", "upload_bytes", "upload_bytes_left"]
GAUGES = {"api_rate", "uploads_pending", "upload_bytes_left"}


@pytest.fixture
def hemu(emulator_factory, tmp_path):
    spec = tmp_path / "spec.json"
    items = [{"name": "big.bin", "size": 6 * MiB, "seed": 1},
             {"name": "data", "mimeType": FOLDER, "id": H.mkid("hist-data")}]
    items += [{"name": "f%d.bin" % i, "parent": H.mkid("hist-data"),
               "size": (i + 1) * 700 * 1024, "seed": 10 + i} for i in range(5)]
    spec.write_text(json.dumps({"items": items}))
    return emulator_factory(spec, "emu-hist", access_token=SESSION_TOKEN, seed=5)


def cli(*args, timeout=120):
    return H.run_cmd([str(H.colabfs_bin())] + [str(a) for a in args], timeout)


def history(m, *extra):
    rc, out, err = cli("stats", m.path(), "--history", "--json", *extra, timeout=30)
    assert rc == 0, (rc, out, err)
    doc = json.loads(out)
    assert list(doc) == ["interval_s", "samples"] and doc["interval_s"] == 1, doc.keys()
    for s in doc["samples"]:
        assert list(s) == FIELDS, s
        assert all(isinstance(s[k], int) for k in FIELDS if k not in ("t", "api_rate")), s
        assert isinstance(s["t"], float) and isinstance(s["api_rate"], float), s
    return doc["samples"]


def json_lines(out):
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines, "no output"
    return lines


def test_history_shows_a_read(mount_factory, hemu):
    m = mount_factory.new(hemu, name="hist")
    with open(m.path("big.bin"), "rb") as f:
        got = f.read()
    assert len(got) == 6 * MiB

    def shows_it():
        s = history(m)
        return s if s and s[-1]["read_bytes"] >= 6 * MiB and s[-1]["drive_bytes"] >= 6 * MiB \
            and len(s) >= 4 else None
    samples = H.wait_until(shows_it, 30, interval=0.3, what="the read in the history")
    assert samples[-1]["drive_requests"] > 0 and samples[-1]["cache_misses"] > 0, samples[-1]
    assert samples[-1]["api_rate"] > 0, samples[-1]
    for a, b in zip(samples, samples[1:]):
        for k in FIELDS:
            if k not in GAUGES:
                assert b[k] >= a[k], (k, a, b)
        assert 0.5 <= b["t"] - a["t"] <= 3.0, (a["t"], b["t"])
    steps = sorted(b["t"] - a["t"] for a, b in zip(samples, samples[1:]))
    assert 0.9 <= steps[len(steps) // 2] <= 1.1, steps
    assert abs(samples[-1]["t"] - time.time()) < 10, samples[-1]["t"]

    # --history=SECONDS: only the samples of the last SECONDS
    H.wait_until(lambda: len(history(m)) >= 5, 30, interval=0.3, what="5 samples")
    last = history(m, "--history=2")
    assert 1 <= len(last) <= 2, last
    # the table: a header and rows of rates
    rc, out, err = cli("stats", m.path(), "--history", timeout=30)
    assert rc == 0, (rc, out, err)
    assert "read/s" in out.splitlines()[0] and "now" in out, out
    # usage errors
    for bad in (["--history=0"], ["--history=x"], ["--history", "--prometheus"],
                ["--history", "--watch"]):
        rc, out, err = cli("stats", m.path(), *bad, timeout=30)
        assert rc == 2, (bad, rc, out, err)


def test_history_pages_a_full_ring(mount_factory, hemu):
    """600 samples do not fit one attribute value (64 KiB): the command reads page after page."""
    rc, out, _ = cli("--version", timeout=20)
    if "test hooks on" not in out:
        pytest.skip("needs a test build (COLABFS_TEST_HISTORY_INTERVAL_MS)")
    m = mount_factory.new(hemu, name="histpage",
                          env_extra={"COLABFS_TEST_HISTORY_INTERVAL_MS": "5"})
    with open(m.path("data/f0.bin"), "rb") as f:
        f.read()
    samples = H.wait_until(lambda: (lambda s: s if len(s) == 600 else None)(history(m)), 60,
                           interval=0.5, what="a full ring")
    ts = [s["t"] for s in samples]
    assert ts == sorted(ts) and len(set(ts)) == 600
    size = os.getxattr(m.path(), "user.colabfs.history")
    assert 10000 < len(size) <= 60000, len(size)


def test_sync_json_while_uploading(mount_factory, hemu):
    m = mount_factory.new(hemu, name="hsync", extra=["--write-back-delay=60"])
    data = os.urandom(5 * MiB + 123)
    with open(m.path("ckpt.bin"), "wb") as f:
        f.write(data)
    rc, out, err = cli("sync", "--json", "--timeout", "60", m.path(), timeout=90)
    assert rc == 0, (rc, out, err)
    lines = json_lines(out)
    assert lines[-1] == {"event": "done", "ok": True}, lines[-1]
    progress = lines[:-1]
    assert progress and all(list(p) == ["event", "done_bytes", "total_bytes", "files",
                                        "uploading", "waiting", "why"] and
                            p["event"] == "progress" for p in progress), progress
    assert progress[0]["files"] == 1 and progress[0]["total_bytes"] >= len(data), progress[0]
    assert progress[-1]["files"] == 0, progress[-1]
    done = [p["done_bytes"] for p in progress]
    assert done == sorted(done), done
    items = [i for i in json.loads(hemu.request("GET", "/_emu/find?path=ckpt.bin")[2])["items"]
             if not i["trashed"]]
    assert len(items) == 1, items
    st, _, body = hemu.request("GET", "/_emu/items/%s/content" % items[0]["id"])
    assert st == 200 and body == data
    # the history saw the upload
    s = H.wait_until(lambda: (lambda x: x if x and x[-1]["upload_bytes"] >= len(data) else None)(
        history(m)), 20, interval=0.3, what="the upload in the history")
    assert s[-1]["uploads_pending"] == 0 and s[-1]["upload_bytes_left"] == 0, s[-1]

    # nothing pending: a progress line and done; --quiet: the done line alone
    rc, out, err = cli("sync", "--json", m.path(), timeout=60)
    assert rc == 0 and json_lines(out)[-1] == {"event": "done", "ok": True}, (out, err)
    rc, out, err = cli("sync", "--json", "--quiet", m.path(), timeout=60)
    assert rc == 0 and json_lines(out) == [{"event": "done", "ok": True}], (out, err)


def test_json_errors_outside_a_mount(colabfs, tmp_path):
    d = tmp_path / "plain"
    d.mkdir()
    rc, out, err = cli("sync", "--json", d, timeout=30)
    assert rc == 2, (rc, out, err)
    assert json_lines(out) == [{"event": "done", "ok": False, "failed": [],
                                "error": "not_mounted"}], out
    rc, out, err = cli("sync", "--json", tmp_path / "missing", timeout=30)
    assert rc == 2 and json_lines(out)[-1]["error"] == "bad_path", (out, err)
    rc, out, err = cli("warm", "--json", tmp_path / "missing", timeout=30)
    assert rc == 2 and json_lines(out) == [{"event": "done", "ok": False, "error": "bad_path"}], \
        (out, err)


def test_warm_json_over_a_folder(mount_factory, hemu):
    m = mount_factory.new(hemu, name="hwarm")
    rc, out, err = cli("warm", "--json", m.path("data"), timeout=120)
    assert rc == 0, (rc, out, err)
    lines = json_lines(out)
    assert lines[-1] == {"event": "done", "ok": True, "error": None}, lines[-1]
    progress = lines[:-1]
    total = sum((i + 1) * 700 * 1024 for i in range(5))
    assert progress and all(list(p) == ["event", "done_bytes", "total_bytes", "files_done",
                                        "files"] for p in progress), progress
    assert all(p["total_bytes"] == total and p["files"] == 5 for p in progress), progress
    assert progress[-1]["done_bytes"] == total and progress[-1]["files_done"] == 5, progress[-1]
    assert not err.strip(), err  # no bar on stderr
    # the history shows the downloads
    H.wait_until(lambda: (lambda s: s and s[-1]["drive_bytes"] >= total)(history(m)), 20,
                 interval=0.3, what="warm's downloads in the history")
