"""The colabfs Python API's pure parts, without a mount: mount options from
keywords, `colabfs --help`'s option list, the JSON lines of `colabfs sync
--json` / `colabfs warm --json` and what they add up to, the progress bar,
mountinfo, the stats history behind colabfs.plot, the consent rule, and that
no token reaches an error message.  The JSON lines are recorded in the shapes
the CLI prints (issue 23)."""

import io
import json
import os
import re
import subprocess
import sys
import warnings

import pytest

import colabfs
from colabfs import _cli, _mountinfo, _plot, _progress, drive
from colabfs._errors import scrub

HELP = """usage: colabfs mount [OPTIONS] MOUNTPOINT
       colabfs umount MOUNTPOINT

mount options:
      --root=ID                  Drive folder id to mount (default: My Drive)
      --shared-with-me           mount "Shared with me": the items others shared with you
      --read-only                no writes: the mount is read-only (EROFS), as before writes existed
      --api-url=URL              Drive API root URL (default https://www.googleapis.com)
      --cache-dir=DIR            cache folder, mode 0700
      --upload-open-files=SECONDS  snapshots of files still open for writing
      --shared-cache-password-file=FILE the cluster's AUTH password, from a file
      --start-timeout=SECONDS    give up when the server has not started serving
  -f, --foreground               stay in the foreground
  -d, --debug                    debug log and FUSE request trace (implies -f)
  -o, --options OPT[,OPT]        FUSE mount options, e.g. allow_other
  -h, --help                     show this help

environment: COLABFS_ACCESS_TOKEN (a ready token), GOOGLE_APPLICATION_CREDENTIALS
"""
KNOWN = _cli.parse_help(HELP)


# ---- options --------------------------------------------------------------------------


def test_parse_help_tells_flags_from_options_with_values():
    assert KNOWN == {"root": True, "shared-with-me": False, "read-only": False, "api-url": True,
                     "cache-dir": True, "upload-open-files": True,
                     "shared-cache-password-file": True, "start-timeout": True,
                     "foreground": False, "debug": False, "options": True, "help": False}


def test_parse_help_of_the_real_binary():
    b = os.environ.get("COLABFS_BIN")
    if not b or not os.access(b, os.X_OK):
        pytest.skip("COLABFS_BIN not set to a built colabfs")
    opts = _cli.parse_help(subprocess.run([b, "--help"], capture_output=True, text=True).stdout)
    assert opts["cache-dir"] is True and opts["api-url"] is True and opts["log-level"] is True
    assert opts["read-only"] is False and opts["force"] is False
    assert opts["options"] is True and len(opts) > 40


def test_keywords_become_mount_options():
    words = _cli.option_args({"cache_dir": "/content/.cache", "upload_open_files": 60,
                              "api_url": "http://127.0.0.1:5/x", "read_only": True,
                              "shared_with_me": False, "root": None}, KNOWN)
    assert words == ["--cache-dir=/content/.cache", "--upload-open-files=60",
                     "--api-url=http://127.0.0.1:5/x", "--read-only"]


def test_a_list_repeats_an_option_and_paths_are_taken():
    import pathlib
    words = _cli.option_args({"options": ["allow_other", "ro"],
                              "cache_dir": pathlib.Path("/tmp/c")}, KNOWN)
    assert words == ["--options=allow_other", "--options=ro", "--cache-dir=/tmp/c"]


@pytest.mark.parametrize("opts, says, fix", [
    ({"cache_dri": "/x"}, "no option cache_dri", "did you mean cache_dir?"),
    ({"no_such_thing": 1}, "no option no_such_thing", "colabfs --help"),
    ({"read_only": "yes"}, "is a flag", "read_only=True"),
    ({"cache_dir": True}, "wants a value", "--cache-dir"),
    ({"foreground": True}, "not available from Python", "drop foreground"),
])
def test_bad_options_raise_before_anything_starts(opts, says, fix):
    with pytest.raises(colabfs.Error) as ei:
        _cli.option_args(opts, KNOWN)
    assert says in str(ei.value) and fix in ei.value.fix, (str(ei.value), ei.value.fix)


def test_cli_message_keeps_its_reason_not_the_log_lines():
    err = ("2026-12-05T06:46:26.364Z colabfs[20479] warn: token endpoint http://127.0.0.1:9: failed\n"
           "colabfs: cannot reach Drive at http://127.0.0.1:9 to open My Drive: network failure "
           "(see the log for the details; check the network, --api-url or --ca-file)\n")
    msg = _cli.message(err)
    assert msg.startswith("cannot reach Drive at http://127.0.0.1:9") and "warn:" not in msg
    assert drive._FIX_IN_MESSAGE.search(msg).group(1) == "check the network, --api-url or --ca-file"
    assert _cli.message("") == "failed"


def test_json_refusal_of_an_older_colabfs_is_recognised():
    assert _cli.json_unsupported(2, "colabfs: sync: unknown option --json\nusage: ...", 0)
    assert _cli.json_unsupported(2, "usage: colabfs warm PATH... [--list FILE]\n", 0)
    assert not _cli.json_unsupported(1, "colabfs: sync: x: no space", 0)
    assert not _cli.json_unsupported(2, "usage: ...", 3)


# ---- JSON lines and the progress model -----------------------------------------------

SYNC_LINES = [
    '{"event":"progress","done_bytes":0,"total_bytes":3000000,"files":3,"uploading":1,'
    '"waiting":0,"why":""}',
    'not json at all',
    '',
    '{"event":"progress","done_bytes":1000000,"total_bytes":3000000,"files":2,"uploading":1,'
    '"waiting":1,"why":"rate limited by Drive"}',
    '{"event":"progress","done_bytes":"2500000","total_bytes":4000000,"files":2,"uploading":2,'
    '"waiting":0,"why":""}',
    '{"event":"done","ok":true}',
]


def feed_all(kind, lines, t0=100.0, dt=1.0):
    p = _progress.Progress(kind)
    evs = [e for e in map(_progress.parse_line, lines) if e is not None]
    for i, ev in enumerate(evs):
        p.feed(ev, t=t0 + i * dt)
    return p, evs


def test_sync_lines_parse_and_add_up():
    p, evs = feed_all("sync", SYNC_LINES[:5])
    assert [e["event"] for e in evs] == ["progress"] * 3
    assert evs[2]["done_bytes"] == 2500000 and isinstance(evs[2]["done_bytes"], int)
    assert (p.done_bytes, p.total_bytes, p.files, p.uploading) == (2500000, 4000000, 2, 2)
    assert p.rate == pytest.approx(2500000 / 2.0)
    assert p.fraction == pytest.approx(0.625) and not p.finished
    assert p.postfix() == "2 files left (2 uploading)"
    p2, _ = feed_all("sync", SYNC_LINES[:4])
    assert p2.postfix() == "2 files left (1 uploading, 1 waiting: rate limited by Drive)"
    p.feed(_progress.parse_line(SYNC_LINES[5]), t=110)
    assert p.finished and p.ok and p.error is None and p.fraction == 1.0
    assert p.line().startswith("sync 100% 3.8 MiB/3.8 MiB") and p.line().endswith(", done")


def test_sync_failure_names_each_file():
    line = ('{"event":"done","ok":false,"failed":[{"path":"/ckpt/a.pt","error":"Drive storage '
            'is full"},{"path":"/ckpt/b.pt","error":"no write permission"}],"error":"failed"}')
    p, _ = feed_all("sync", SYNC_LINES[:1] + [line])
    assert p.finished and p.ok is False and p.error == "failed"
    assert p.failed == [("/ckpt/a.pt", "Drive storage is full"), ("/ckpt/b.pt", "no write permission")]
    p, _ = feed_all("sync", ['{"event":"done","ok":false,"error":"timeout"}'])
    assert p.error == "timeout" and p.failed == []


def test_warm_lines():
    lines = ['{"event":"progress","done_bytes":0,"total_bytes":2048,"files_done":0,"files":2}',
             '{"event":"progress","done_bytes":1024,"total_bytes":2048,"files_done":1,"files":2}',
             '{"event":"done","ok":true,"error":null}']
    p, _ = feed_all("warm", lines[:2])
    assert p.postfix() == "files 1/2" and p.fraction == 0.5
    p.feed(_progress.parse_line(lines[2]), t=200)
    assert p.ok and p.files_done == 2 and p.line().startswith("warm 100% 2.0 KiB/2.0 KiB")
    p, _ = feed_all("warm", ['{"event":"done","ok":false,"error":"/m/x: not a colabfs mount"}'])
    assert p.ok is False and p.error == "/m/x: not a colabfs mount"


def test_parse_line_ignores_what_is_not_an_event():
    for s in ("", "  ", "[1,2]", "{\"no_event\":1}", "{broken", "warmed 3 files", b"\xff\xfe"):
        assert _progress.parse_line(s) is None, s
    ev = _progress.parse_line(b'{"event":"progress","done_bytes":-5,"files":"x"}')
    assert ev["done_bytes"] == 0 and ev["files"] == 0


def test_a_token_in_a_line_never_reaches_the_model():
    ev = _progress.parse_line('{"event":"done","ok":false,"error":"401 for Bearer ya29.SECRET-tok"}')
    assert "SECRET" not in ev["error"]


# ---- the bar ---------------------------------------------------------------------------


def test_plain_bar_is_one_line_redrawn_in_place():
    out = io.StringIO()
    bar = _progress.Bar("sync", stream=out, use_tqdm=False)
    bar.MIN_INTERVAL = 0
    p = _progress.Progress("sync")
    for ln in SYNC_LINES:
        ev = _progress.parse_line(ln)
        if ev:
            p.feed(ev)
            bar.update(p)
    assert "\n" not in out.getvalue()
    bar.close(p)
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n") and text.count("\r") >= 4
    frames = text.rstrip("\n").split("\r")[1:]
    assert frames[0].startswith("sync   0% 0 B/2.9 MiB")
    assert frames[-1].startswith("sync 100%") and "done" in frames[-1]
    # a shorter line blanks out what the longer one before it left
    assert all(len(f) >= len(frames[i].rstrip()) for i, f in enumerate(frames[1:]))


def test_quiet_bar_draws_nothing():
    out = io.StringIO()
    bar = _progress.Bar("warm", quiet=True, stream=out, use_tqdm=False)
    p = _progress.Progress("warm")
    p.feed({"event": "progress", "done_bytes": 1, "total_bytes": 2, "files_done": 0, "files": 1})
    bar.update(p, force=True)
    bar.close(p)
    assert out.getvalue() == ""


def test_tqdm_bar_gets_bytes_and_counts(monkeypatch):
    made = []

    class FakeTqdm:
        def __init__(self, **kw):
            self.kw, self.n, self.total, self.postfix, self.closed, self.refreshes = kw, 0, 0, "", 0, 0
            made.append(self)

        def set_postfix_str(self, s, refresh=True):
            self.postfix = s

        def refresh(self):
            self.refreshes += 1

        def close(self):
            self.closed += 1
    monkeypatch.setattr(_progress, "_tqdm", lambda: FakeTqdm)
    bar = _progress.Bar("sync")
    p, _ = feed_all("sync", SYNC_LINES[:4])
    bar.update(p, force=True)
    p.feed(_progress.parse_line(SYNC_LINES[5]))
    bar.close(p)
    assert len(made) == 1
    t = made[0]
    assert t.kw["unit"] == "B" and t.kw["desc"] == "sync" and t.closed == 1
    assert (t.n, t.total) == (3000000, 3000000) and t.postfix == "0 files left"


# ---- the legacy CLI (before --json): its exit status and messages ----------------------


def test_sync_without_json_reads_the_failed_lines():
    err = ("colabfs: sync: /ckpt/a.pt: Drive storage is full (the bytes stay staged)\n"
           "colabfs: sync: 2 other files are still pending (uploading in the background)\n")
    p = drive._sync_legacy(1, "", err)
    assert p.ok is False and p.failed == [("/ckpt/a.pt", "Drive storage is full (the bytes stay staged)")]
    err = ("colabfs: sync: timed out after 3.0 s: 1 file (10 MiB, 5 MiB not yet in Drive) still "
           "pending, 1 uploading; the uploads go on in the background\n"
           "colabfs: sync: waiting: /big.bin: rate limited\n")
    p = drive._sync_legacy(1, "", err)
    assert p.error == "timeout" and p.failed == []
    assert drive._sync_legacy(0, "synced: nothing was pending\n", "").ok


# ---- mountinfo and which mount ---------------------------------------------------------

MOUNTINFO = """\
22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
45 27 0:40 / /content/data rw,nosuid,nodev,relatime - fuse.colabfs colabfs rw,user_id=0,group_id=0
46 27 0:41 / /content/drive rw,nosuid,nodev - fuse.drive drive rw
47 27 0:42 / /tmp/with\\040space rw,nosuid,nodev - fuse.colabfs colabfs rw
"""


def test_mountinfo_parse(tmp_path):
    f = tmp_path / "mountinfo"
    f.write_text(MOUNTINFO)
    assert _mountinfo.colabfs_mounts(str(f)) == ["/content/data", "/tmp/with space"]
    assert _mountinfo.entry_at("/content/drive", str(f))["fstype"] == "fuse.drive"
    assert _mountinfo.entry_at("/content/nothing", str(f)) is None


def test_the_only_mount_or_the_one_this_process_made(monkeypatch):
    monkeypatch.setattr(drive, "colabfs_mounts", lambda: ["/content/data"])
    monkeypatch.setattr(drive, "_mounted_here", [])
    assert drive._resolve(None) == "/content/data"
    assert drive._resolve("~/x").endswith("/x") and drive._resolve("rel").startswith("/")
    monkeypatch.setattr(drive, "colabfs_mounts", lambda: ["/a", "/b"])
    with pytest.raises(colabfs.Error) as ei:
        drive._resolve(None)
    assert "2 colabfs mounts (/a, /b)" in str(ei.value) and "mountpoint" in ei.value.fix
    drive._mounted_here.append("/b")
    assert drive._resolve(None) == "/b"
    monkeypatch.setattr(drive, "colabfs_mounts", lambda: [])
    with pytest.raises(colabfs.Error, match="no colabfs mount"):
        drive._resolve(None)


# ---- consent: only inside Colab, only for the ephemeral endpoint ----------------------


@pytest.fixture
def fake_colab(tmp_path, monkeypatch):
    pkg = tmp_path / "google" / "colab"
    pkg.mkdir(parents=True)
    (tmp_path / "google" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "_message.py").write_text(
        "calls = []\n"
        "def blocking_request(request_type, request=None, timeout_sec=None, parent=None):\n"
        "    calls.append((request_type, request, timeout_sec))\n"
        "    if request.get('authType') == 'refuse':\n"
        "        raise RuntimeError('credential propagation was unsuccessful')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for m in [m for m in sys.modules if m == "google" or m.startswith("google.")]:
        monkeypatch.delitem(sys.modules, m)
    for k in ("GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TBE_EPHEM_CREDS_ADDR", "127.0.0.1:1")
    return tmp_path


def test_consent_rule(fake_colab, monkeypatch):
    assert drive._needs_consent({})
    assert not drive._needs_consent({"credentials": "/sa.json"})
    assert not drive._needs_consent({"metadata_url": "http://127.0.0.1:2"})
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/sa.json")
    assert not drive._needs_consent({})
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS")
    adc = fake_colab / "home" / ".config" / "gcloud" / "application_default_credentials.json"
    adc.parent.mkdir(parents=True)
    adc.write_text("{}")
    assert not drive._needs_consent({})
    adc.unlink()
    monkeypatch.delenv("TBE_EPHEM_CREDS_ADDR")
    assert not drive._needs_consent({})


def test_consent_request_is_the_one_drive_mount_sends(fake_colab):
    drive._request_consent()
    from google.colab import _message
    assert _message.calls == [("request_auth", {"authType": "dfs_ephemeral"}, None)]


def test_no_consent_outside_colab(monkeypatch):
    monkeypatch.setenv("TBE_EPHEM_CREDS_ADDR", "127.0.0.1:1")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "google" not in p])
    monkeypatch.setitem(sys.modules, "google.colab", None)  # import fails
    assert not drive._needs_consent({})


# ---- errors and secrets ----------------------------------------------------------------


def test_error_carries_fix_and_path_and_never_a_token(monkeypatch):
    monkeypatch.setenv("COLABFS_ACCESS_TOKEN", "plain-token-1234567")
    e = colabfs.Error("upload of /a failed: Authorization: Bearer ya29.a0AfH6-secret "
                      'and {"access_token": "abc.def"} and plain-token-1234567 '
                      "and refresh_token=1//0g-secret&x=1", fix="run it again", path="/a")
    s = str(e)
    for secret in ("a0AfH6", "abc.def", "plain-token-1234567", "1//0g-secret"):
        assert secret not in s, s
    assert s.endswith("\nfix: run it again") and e.path == "/a" and e.fix == "run it again"
    assert isinstance(colabfs.MountpointError("x"), ValueError)
    import pickle
    e2 = pickle.loads(pickle.dumps(colabfs.Error("m", fix="f", path="/p", failed=[("/p", "why")])))
    assert (str(e2), e2.fix, e2.path, e2.failed) == ("m\nfix: f", "f", "/p", [("/p", "why")])
    assert scrub("-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----") == \
        "<private key hidden>"


def test_numbers_as_numbers():
    assert drive._numbers({"a": "12", "b": "1.5", "c": 3, "d": {"e": ["7", "x"]}}) == \
        {"a": 12, "b": 1.5, "c": 3, "d": {"e": [7, "x"]}}


def test_binary_lookup_order(tmp_path, monkeypatch):
    b = tmp_path / "colabfs"
    b.write_text("#!/bin/sh\n")
    b.chmod(0o755)
    monkeypatch.setenv("COLABFS_BIN", str(b))
    assert _cli.binary() == str(b)
    monkeypatch.setenv("COLABFS_BIN", str(tmp_path / "missing"))
    with pytest.raises(colabfs.Error, match="not an executable"):
        _cli.binary()
    monkeypatch.delenv("COLABFS_BIN")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _cli.binary() == str(b)


# ---- the history behind colabfs.plot -------------------------------------------------

HISTORY = """{"interval_s":1,"samples":[
 {"t":1000,"read_bytes":0,"drive_bytes":0,"drive_requests":0,"api_rate":190.0,"cache_hits":0,
  "cache_misses":0,"uploads_pending":0,"upload_bytes":0,"upload_bytes_left":0},
 {"t":1001,"read_bytes":4000000,"drive_bytes":3000000,"drive_requests":20,"api_rate":190.0,
  "cache_hits":1,"cache_misses":3,"uploads_pending":2,"upload_bytes":0,"upload_bytes_left":5000000},
 {"t":1002,"read_bytes":10000000,"drive_bytes":3000000,"drive_requests":20,"api_rate":95.5,
  "cache_hits":7,"cache_misses":3,"uploads_pending":1,"upload_bytes":"2500000","upload_bytes_left":2500000},
 {"t":1003,"read_bytes":10000000,"drive_bytes":3000000,"drive_requests":20,"api_rate":95.5,
  "cache_hits":7,"cache_misses":3,"uploads_pending":0,"upload_bytes":5000000,"upload_bytes_left":0},
 {"t":1004,"read_bytes":1000000,"drive_bytes":0,"drive_requests":2,"api_rate":190.0,
  "cache_hits":1,"cache_misses":0,"uploads_pending":0,"upload_bytes":0,"upload_bytes_left":0}]}"""


def test_history_becomes_rates():
    s = _plot.series(_plot.parse_history(HISTORY), seconds=300)
    assert s["t"] == [-3, -2, -1, 0]
    assert s["read_mbps"] == [4.0, 6.0, 0.0, 1.0]          # the restart at t=1004 counts from 0
    assert s["drive_mbps"] == [3.0, 0.0, 0.0, 0.0]
    assert s["requests_per_s"] == [20, 0, 0, 2]
    assert s["api_rate"] == [190.0, 95.5, 95.5, 190.0]
    assert s["hit_ratio"] == [0.25, 1.0, None, 1.0]
    assert s["uploads_pending"] == [2, 1, 0, 0]
    assert _plot.series(_plot.parse_history(HISTORY), seconds=2)["t"] == [-1, 0]
    assert _plot.series([], 300)["t"] == []


def test_history_text_summary():
    s = _plot.series(_plot.parse_history(HISTORY), seconds=300)
    text = _plot.summary(s, 300)
    assert "the last 4 s" in text and "2.8 MB/s mean" in text and "6.0 peak" in text
    assert "75% of lookups" in text and "0 pending now (2 at most)" in text
    assert "no history yet" in _plot.summary(_plot.series([], 300), 300)
    with pytest.raises(colabfs.Error):
        _plot.parse_history("usage: colabfs stats")


def test_history_figure_has_four_panels():
    pytest.importorskip("matplotlib")
    s = _plot.series(_plot.parse_history(HISTORY), seconds=300)
    fig = _plot.figure(s, 300)
    axes = fig.get_axes()
    assert len(axes) == 4
    assert [a.get_ylabel() for a in axes] == ["MB/s", "per s", "cache hits %", "uploads pending"]
    assert len(axes[0].get_lines()) == 2 and len(axes[1].get_lines()) == 2
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue().startswith(b"\x89PNG")


def test_plot_prints_text_without_matplotlib(monkeypatch, capsys):
    monkeypatch.setattr(_plot, "history", lambda mp, seconds: _plot.parse_history(HISTORY))
    monkeypatch.setattr(drive, "_resolve", lambda mp: "/content/data")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setattr(drive, "stats", lambda mp: {"api_rate_in_units": 0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        text = colabfs.plot(seconds=60)
    assert "cache hits" in text and capsys.readouterr().out.strip() == text.strip()
    assert "the pacer allows 190 calls/s now" in text, text
    # a mount pacing by Drive's quota units (--api-units) says so
    monkeypatch.setattr(drive, "stats", lambda mp: {"api_rate_in_units": 1})
    assert "the pacer allows 190 quota units/s now" in colabfs.plot(seconds=60)


def test_history_figure_units_axis():
    pytest.importorskip("matplotlib")
    s = _plot.series(_plot.parse_history(HISTORY), seconds=300)
    axes = _plot.figure(s, 300, units=True).get_axes()
    # the pacer's rate in units on an axis of its own beside the calls
    assert [a.get_ylabel() for a in axes] == ["MB/s", "per s", "cache hits %", "uploads pending",
                                              "quota units per s"]
    assert len(axes[1].get_lines()) == 1 and len(axes[4].get_lines()) == 1


# ---- the API against a stand-in colabfs command ---------------------------------------
# The stand-in prints what a plan says for the words it gets (the first plan entry whose
# words all appear, in order, at the start), one stdout line at a time, and records its argv.

FAKE_CLI = r"""#!/usr/bin/python3
import json, os, sys, time
argv = sys.argv[1:]
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write(json.dumps(argv) + "\n")
for words, what in json.load(open(os.environ["FAKE_PLAN"])):
    if argv[:len(words)] == words:
        for line in what.get("stdout", []):
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
            time.sleep(what.get("pace", 0))
        sys.stderr.write(what.get("stderr", ""))
        sys.exit(what.get("rc", 0))
sys.exit("fake colabfs: no plan for %r" % argv)
"""


@pytest.fixture
def fake_cli(tmp_path, monkeypatch):
    b = tmp_path / "colabfs"
    b.write_text(FAKE_CLI)
    b.chmod(0o755)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("COLABFS_BIN", str(b))
    monkeypatch.setenv("FAKE_CALLS", str(calls))
    monkeypatch.setattr(_cli, "_no_json", set())
    monkeypatch.setattr(_cli, "_help_cache", {})
    monkeypatch.setattr(_progress.Bar, "MIN_INTERVAL", 0)
    monkeypatch.setattr(_progress, "_tqdm", lambda: None)

    def plan(*entries):
        (tmp_path / "plan.json").write_text(json.dumps([[w, d] for w, d in entries]))
        monkeypatch.setenv("FAKE_PLAN", str(tmp_path / "plan.json"))
        return lambda: [json.loads(ln) for ln in calls.read_text().splitlines()] \
            if calls.exists() else []
    return plan


def test_sync_draws_one_bar_from_the_json_lines(fake_cli, capsys):
    calls = fake_cli((["sync", "--json"], {"stdout": SYNC_LINES, "pace": 0.01}))
    colabfs.sync("/content/data", timeout_ms=30000)
    out = capsys.readouterr().out
    assert calls() == [["sync", "--json", "--timeout", "30", "/content/data"]]
    assert out.count("\n") == 1 and out.endswith("\n") and out.count("\r") >= 3, repr(out)
    assert out.rstrip("\n").rsplit("\r", 1)[1].startswith("sync 100% 3.8 MiB/3.8 MiB")
    assert capsys.readouterr().err == ""


def test_sync_failure_is_an_error_naming_each_file(fake_cli, capsys):
    fake_cli((["sync", "--json"], {"rc": 1, "stdout": SYNC_LINES[:1] + [
        '{"event":"done","ok":false,"failed":[{"path":"/ckpt/a.pt","error":"Drive storage is full"},'
        '{"path":"/ckpt/b.pt","error":"no write permission"}],"error":"failed"}']}))
    with pytest.raises(colabfs.Error) as ei:
        colabfs.sync("/content/data", quiet=True)
    e = ei.value
    assert "2 files cannot be uploaded: /ckpt/a.pt: Drive storage is full; /ckpt/b.pt: no write " \
        "permission" in str(e)
    assert e.path == "/ckpt/a.pt" and e.failed == [("/ckpt/a.pt", "Drive storage is full"),
                                                   ("/ckpt/b.pt", "no write permission")]
    assert e.fix and capsys.readouterr().out == ""
    fake_cli((["sync", "--json"], {"rc": 1, "stdout": [
        SYNC_LINES[3], '{"event":"done","ok":false,"error":"timeout"}']}))
    with pytest.raises(colabfs.Error, match="timed out with 2 files .* rate limited by Drive"):
        colabfs.sync("/content/data", timeout_ms=1000, quiet=True)


def test_a_colabfs_without_json_is_asked_once(fake_cli, capsys):
    calls = fake_cli((["sync", "--json"], {"rc": 2, "stderr": "colabfs: sync: unknown option "
                                           "--json\nusage: colabfs sync [--timeout SECONDS]\n"}),
                     (["sync"], {"rc": 0, "stdout": ["synced: nothing was pending"]}))
    colabfs.sync("/m")
    colabfs.sync("/m")
    assert calls() == [["sync", "--json", "/m"], ["sync", "/m"], ["sync", "/m"]]
    assert capsys.readouterr().out == ""  # nothing a bar could show, nothing raw


def test_warm_and_stats_through_the_command(fake_cli, capsys):
    fake_cli((["warm", "--json"], {"stdout": [
        '{"event":"progress","done_bytes":0,"total_bytes":2048,"files_done":0,"files":2}',
        '{"event":"progress","done_bytes":2048,"total_bytes":2048,"files_done":2,"files":2}',
        '{"event":"done","ok":true}']}),
        (["stats"], {"stdout": ['{"cache_hits_total": 3, "uploads_pending": "0", "x": 1.5}']}))
    assert colabfs.warm(["/m/a", "/m/b"]) == {"files": 2, "bytes": 2048}
    last = capsys.readouterr().out.rsplit("\r", 1)[1]
    assert re.fullmatch(r"warm 100% 2.0 KiB/2.0 KiB( [\d.]+ MB/s)?, files 2/2, done\n", last), last
    assert colabfs.stats("/m") == {"cache_hits_total": 3, "uploads_pending": 0, "x": 1.5}


def test_a_failed_mount_says_why_and_what_doctor_says_to_do(fake_cli, tmp_path, monkeypatch):
    monkeypatch.delenv("TBE_EPHEM_CREDS_ADDR", raising=False)
    doctor = {"ok": False, "checks": [
        {"name": "fuse", "status": "ok", "detail": "fine", "fix": None},
        {"name": "drive", "status": "FAIL", "detail": "http://127.0.0.1:9 unreachable after 5 s",
         "fix": "check the network and --api-url"},
        {"name": "mount", "status": "FAIL", "detail": "not on a colabfs mount", "fix": "mount it"}]}
    calls = fake_cli((["--help"], {"stdout": HELP.splitlines()}),
                     (["mount"], {"rc": 1, "stderr": "colabfs: cannot reach Drive at "
                                  "http://127.0.0.1:9 (check the network, --api-url or --ca-file)\n"}),
                     (["doctor"], {"rc": 1, "stdout": [json.dumps(doctor)]}))
    mnt = tmp_path / "mnt"
    with pytest.raises(colabfs.Error) as ei:
        colabfs.mount(str(mnt), api_url="http://127.0.0.1:9", timeout_ms=20000)
    e = ei.value
    assert str(e).startswith("cannot mount Drive at %s: cannot reach Drive at http://127.0.0.1:9" % mnt)
    assert "colabfs doctor: drive: http://127.0.0.1:9 unreachable" in str(e)
    assert e.fix == "check the network and --api-url" and [c["name"] for c in e.checks] == ["drive"]
    mount_call, doctor_call = calls()[1:]
    assert mount_call[0] == "mount" and "--api-url=http://127.0.0.1:9" in mount_call
    assert mount_call[-1] == str(mnt) and any(w.startswith("--start-timeout=") for w in mount_call)
    assert doctor_call[:3] == ["doctor", str(mnt), "--json"] and "--api-url=http://127.0.0.1:9" in doctor_call
    # a value the command refuses (exit 2): its own words, no doctor
    calls = fake_cli((["--help"], {"stdout": HELP.splitlines()}),
                     (["mount"], {"rc": 2, "stderr": "colabfs: --start-timeout wants a whole number\n"}))
    with pytest.raises(colabfs.Error, match="colabfs mount refused: --start-timeout wants"):
        colabfs.mount(str(mnt), start_timeout=0)
    assert [c[0] for c in calls()][-1] == "mount"


def test_flush_then_unmount_and_a_busy_mount_detached(fake_cli, capsys, monkeypatch):
    calls = fake_cli((["sync", "--json"], {"stdout": SYNC_LINES}), (["umount"], {"rc": 0}))
    colabfs.flush_and_unmount("/m", timeout_ms=60000)
    assert calls() == [["sync", "--json", "--timeout", "60", "/m"], ["umount", "/m"]]
    assert capsys.readouterr().out.rstrip("\n").rsplit("\r", 1)[1].startswith("flush 100%")
    detached = []
    monkeypatch.setattr(drive, "_detach", detached.append)
    monkeypatch.setattr(drive, "_holders", lambda mp: [(4242, "python3")])
    fake_cli((["sync", "--json"], {"stdout": SYNC_LINES[-1:]}),
             (["umount"], {"rc": 1, "stderr": "colabfs: cannot unmount /m: files or folders in it "
                           "are still in use\n"}))
    with pytest.warns(UserWarning, match=r"/m is still in use \(pid 4242 python3\): detached it lazily"):
        colabfs.flush_and_unmount("/m", quiet=True)
    assert detached == ["/m"]
    # a failed flush unmounts nothing
    calls = fake_cli((["sync", "--json"], {"rc": 1, "stdout": [
        '{"event":"done","ok":false,"failed":[{"path":"/x","error":"no write permission"}],'
        '"error":"failed"}']}), (["umount"], {"rc": 0}))
    before = len(calls())
    with pytest.raises(colabfs.Error, match="flush of /m: 1 file cannot be uploaded: /x: no write"):
        colabfs.flush_and_unmount("/m", quiet=True)
    assert [c[0] for c in calls()[before:]] == ["sync"]
