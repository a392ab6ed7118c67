"""The Python API (python/colabfs: colabfs.mount, flush_and_unmount, sync, warm,
stats) against real mounts of the emulator (issue 23): every byte read compared
with the source, the mountpoint rules google.colab.drive has, force_remount, a
mount that cannot reach Drive raising colabfs.Error with a reason and a fix
within its timeout_ms, stats as numbers, warm and sync, and flush_and_unmount
leaving Drive with every byte written and the mount gone.

The API runs colabfs in this process's environment, so each test sets that
environment up (a token for the emulator, no real metadata server) and every
mount it made is unmounted in teardown, whatever happened."""

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

import helpers as H
from conftest import SESSION_TOKEN, _test_failed
from test_write import at_path, content

sys.path.insert(0, str(H.REPO / "python"))
import colabfs as cfs  # noqa: E402
from colabfs import _cli  # noqa: E402

SEED = 2323
N_FILES = 24


class PTree:
    """Data/ (small files and one of 5 MiB + a bit) and an empty ckpt/ folder."""

    def __init__(self, base):
        self.src = Path(base) / "src"
        self.src.mkdir(parents=True)
        rng = random.Random(SEED)
        data_id, ckpt_id = H.mkid("py:Data"), H.mkid("py:ckpt")
        items = [{"id": data_id, "name": "Data", "mimeType": H.FOLDER},
                 {"id": ckpt_id, "name": "ckpt", "mimeType": H.FOLDER}]
        self.data = {}
        sizes = [rng.randrange(0, 300 * H.KiB) for _ in range(N_FILES - 1)] + [5 * H.MiB + 4321]
        for i, n in enumerate(sizes):
            name = "f%02d.bin" % i
            d = rng.randbytes(n)
            (self.src / name).write_bytes(d)
            self.data["Data/" + name] = d
            items.append({"id": H.mkid("py:%d" % i), "name": name, "parent": data_id,
                          "path": str(self.src / name)})
        self.spec = Path(base) / "spec.json"
        self.spec.write_text(json.dumps({"root": {"id": H.ROOT_ID, "name": "My Drive"},
                                         "items": items}))

    @property
    def total(self):
        return sum(len(d) for d in self.data.values())


@pytest.fixture(scope="module")
def ptree(tmp_path_factory):
    return PTree(tmp_path_factory.mktemp("pyapi-tree"))


@pytest.fixture
def emu(emulator_factory, ptree):
    """An emulator per test: the write tests change what Drive holds."""
    return emulator_factory(ptree.spec, "emu-py", access_token=SESSION_TOKEN, seed=SEED)


class API:
    """The environment colabfs.mount hands to the daemon, and the mountpoints
    used (unmounted in teardown through helpers.Mount.cleanup's fallbacks)."""

    def __init__(self, base, monkeypatch):
        self.base = Path(base)
        self.mps = []
        home = self.base / "home"
        home.mkdir()
        for k in list(os.environ):
            if k.startswith(("COLABFS_", "GOOGLE_", "GCE_", "CLOUDSDK_", "TBE_")) and k != "COLABFS_BIN":
                monkeypatch.delenv(k)
        for k, v in H.clean_env(home=home).items():
            if os.environ.get(k) != v:
                monkeypatch.setenv(k, v)
        monkeypatch.setenv("COLABFS_BIN", str(H.colabfs_bin()))
        monkeypatch.setenv("COLABFS_ACCESS_TOKEN", SESSION_TOKEN)

    def opts(self, emu, name="m", **kw):
        """Options for a mount of emu (None: a port where nothing listens) with
        its own cache and log."""
        o = {"api_url": emu.url if emu else "http://127.0.0.1:9",
             "cache_dir": str(self.base / (name + "-cache")),
             "log_file": str(self.base / (name + ".log")), "write_back_delay": 0}
        o.update(kw)
        return o

    def mount(self, mnt, emu, name="m", **kw):
        """colabfs.mount, the mount registered for the watchdog (which kills its
        daemon when a test hangs) and for teardown."""
        self.mps.append(mnt)  # before the call: a half-made mount is cleaned too
        cfs.mount(mnt, **self.opts(emu, name, **kw))
        self.track(mnt)

    def track(self, mnt):
        if mnt not in self.mps:
            self.mps.append(mnt)
        m = H.Mount(mnt, [], dict(os.environ))
        with H._REG_LOCK:
            H.LIVE_MOUNTS.add(m)

    def cleanup(self):
        with H._REG_LOCK:
            mine = [m for m in H.LIVE_MOUNTS if m.mnt in self.mps]
            for m in mine:
                H.LIVE_MOUNTS.discard(m)
        problems = []
        for mnt in reversed(self.mps):
            if H.mount_entry(mnt) is not None or H.pids_for_mountpoint(mnt):
                problems += H.Mount(mnt, [], dict(os.environ)).cleanup()
        return problems


@pytest.fixture
def api(tmp_path, monkeypatch, fuse_ok, colabfs, request):
    a = API(tmp_path, monkeypatch)
    monkeypatch.setattr(cfs.drive, "_mounted_here", [])
    yield a
    problems = a.cleanup()
    if problems and not _test_failed(request):
        pytest.fail("teardown: %s" % problems, pytrace=False)


def pid_of(mnt):
    return int(os.getxattr(mnt, "user.colabfs.pid").decode().strip("\0 \n"))


def read_all(mnt, tree, exclude=()):
    for rel, want in sorted(tree.data.items()):
        if rel in exclude:
            continue
        with open(os.path.join(mnt, rel), "rb") as f:
            H.assert_same_bytes(f.read(), want, rel)


def drive_bytes(emu, path):
    items = at_path(emu, path)
    assert len(items) == 1, (path, items)
    return content(emu, items[0])


def daemon_gone(mnt):
    return not H.pids_for_mountpoint(mnt)


# ---- mount -----------------------------------------------------------------------------


@pytest.mark.deadline(180)
def test_mount_serves_every_byte(api, emu, ptree, tmp_path, capsys):
    mnt = str(tmp_path / "content" / "data")  # does not exist yet: mount makes it
    (tmp_path / "content").mkdir()
    t0 = time.monotonic()
    api.mount(mnt, emu)
    t_mounted = time.monotonic()
    with open(os.path.join(mnt, "Data", "f00.bin"), "rb") as f:
        first = f.read(1)
    t_first = time.monotonic()
    assert first == ptree.data["Data/f00.bin"][:1]
    assert capsys.readouterr().out == "Mounted at %s\n" % mnt
    assert os.stat(mnt).st_dev != os.stat(tmp_path / "content").st_dev
    assert H.mount_entry(mnt)["fstype"] == "fuse.colabfs"
    read_all(mnt, ptree)
    H.report(capsys, "pyapi", "colabfs.mount() returned in %.3f s; first byte read %.3f s after "
             "the call (emulator, plain HTTP, cold cache); %d files, %d bytes compared"
             % (t_mounted - t0, t_first - t0, len(ptree.data), ptree.total))
    # a colabfs mount already there: said and left alone
    pid = pid_of(mnt)
    cfs.mount(mnt, **api.opts(emu))
    assert capsys.readouterr().out == (
        'Drive already mounted at %s; to attempt to forcibly remount, call colabfs.mount("%s", '
        'force_remount=True).\n' % (mnt, mnt))
    assert pid_of(mnt) == pid
    cfs.flush_and_unmount(mnt, quiet=True)
    assert not H.is_fuse_mounted(mnt)
    H.wait_until(lambda: daemon_gone(mnt), 30, what="the daemon's exit")


def test_mountpoints_refused_as_drive_mount_refuses_them(api, tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "x.txt").write_text("x")
    afile = tmp_path / "afile"
    afile.write_text("x")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "empty-target")
    (tmp_path / "empty-target").mkdir()
    for mnt, says in ((full, "Mountpoint must not already contain files"),
                      (tmp_path / "with space", "Mountpoint must not contain a space."),
                      (link, "Mountpoint must not be a symlink"),
                      (afile, "Mountpoint must either be a directory or not exist"),
                      (tmp_path / "no" / "parent", "Mountpoint must be in a directory that exists")):
        with pytest.raises(cfs.Error) as ei:
            cfs.mount(str(mnt), **api.opts(None))
        assert str(ei.value).startswith(says) and isinstance(ei.value, ValueError), ei.value
        assert not H.is_fuse_mounted(str(mnt))
    assert not (tmp_path / "no").exists()


@pytest.mark.deadline(180)
def test_force_remount_flushes_first(api, emu, ptree, tmp_path, capsys):
    mnt = str(tmp_path / "mnt")
    api.mount(mnt, emu)
    pid = pid_of(mnt)
    blob = random.Random(5).randbytes(3 * H.MiB + 17)
    with open(os.path.join(mnt, "ckpt", "model.pt"), "wb") as f:
        f.write(blob)
    cfs.mount(mnt, force_remount=True, quiet=True, **api.opts(emu))
    # the first mount was flushed (the checkpoint is in Drive) and unmounted
    assert drive_bytes(emu, "/ckpt/model.pt") == blob
    assert pid_of(mnt) != pid
    H.wait_until(lambda: H.pid_gone(pid), 30, what="the first daemon's exit")
    with open(os.path.join(mnt, "ckpt", "model.pt"), "rb") as f:
        H.assert_same_bytes(f.read(), blob, "ckpt/model.pt after the remount")
    read_all(mnt, ptree)
    cfs.flush_and_unmount(mnt, quiet=True)


@pytest.mark.deadline(120)
def test_unreachable_drive_raises_with_a_reason_and_a_fix_in_time(api, tmp_path):
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    t0 = time.monotonic()
    with pytest.raises(cfs.Error) as ei:
        cfs.mount(mnt, timeout_ms=15000, **api.opts(None))  # nothing listens on port 9
    took = time.monotonic() - t0
    e = ei.value
    assert took < 15.5, took
    assert "cannot mount Drive at %s" % mnt in str(e) and "127.0.0.1:9" in str(e), str(e)
    assert e.fix and ("--api-url" in e.fix or "network" in e.fix), e.fix
    assert SESSION_TOKEN not in str(e) and SESSION_TOKEN not in repr(e.checks)
    assert not H.is_fuse_mounted(mnt) and daemon_gone(mnt)


@pytest.mark.deadline(120)
def test_a_mount_that_hangs_is_given_up_at_timeout_ms(api, emulator_factory, ptree, tmp_path):
    """Drive answers nothing for a minute: colabfs.mount gives up at its
    timeout_ms, and no mount or daemon is left behind."""
    slow = emulator_factory(ptree.spec, "emu-py-slow", access_token=SESSION_TOKEN,
                            extra=["--api-latency-ms", "60000"])
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    api.mps.append(mnt)
    t0 = time.monotonic()
    with pytest.raises(cfs.Error) as ei:
        cfs.mount(mnt, timeout_ms=6000, **api.opts(slow))
    took = time.monotonic() - t0
    assert took < 6.5, took
    assert ei.value.fix, str(ei.value)
    assert not H.is_fuse_mounted(mnt)
    H.wait_until(lambda: daemon_gone(mnt), 30, what="the abandoned daemon's exit")


def test_bad_options_never_start_anything(api, tmp_path):
    mnt = tmp_path / "mnt"
    t0 = time.monotonic()
    with pytest.raises(cfs.Error) as ei:
        cfs.mount(str(mnt), cache_dri="/x", **api.opts(None))
    assert "no option cache_dri" in str(ei.value) and "cache_dir" in ei.value.fix
    assert not mnt.exists() and time.monotonic() - t0 < 5
    # a value the CLI refuses: its own message, as an Error
    with pytest.raises(cfs.Error) as ei:
        cfs.mount(str(mnt), block_size="3K", **api.opts(None))
    assert "colabfs mount refused" in str(ei.value) and "--block-size" in str(ei.value), ei.value
    assert "--help" in ei.value.fix
    assert not H.is_fuse_mounted(str(mnt)) and daemon_gone(str(mnt))


# ---- stats, warm, sync -----------------------------------------------------------------


@pytest.mark.deadline(180)
def test_stats_warm_sync(api, emu, ptree, tmp_path, capsys):
    mnt = str(tmp_path / "mnt")
    api.mount(mnt, emu, quiet=True)
    st = cfs.stats(mnt)
    assert len(st) > 50 and all(type(v) in (int, float) for v in st.values()), \
        {k: v for k, v in st.items() if type(v) not in (int, float)}
    assert st["bytes_from_drive_total"] == 0
    got = cfs.warm(os.path.join(mnt, "Data"))
    assert got["files"] == N_FILES, got
    out = capsys.readouterr().out
    assert (_cli.binary(), "warm") not in _cli._no_json  # this colabfs has warm --json
    assert "\r" in out and out.count("\n") == 1 and "warm 100%" in out.rsplit("\r", 1)[1], out
    assert got["bytes"] == ptree.total
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"x")
    with pytest.raises(cfs.Error, match="not on a colabfs mount") as ei:
        cfs.warm(str(outside), quiet=True)
    assert ei.value.path == str(outside) and ei.value.fix
    st = cfs.stats(mnt)
    assert st["drive_media_bytes_total"] >= ptree.total, st["drive_media_bytes_total"]
    read_all(mnt, ptree)  # from the cache: warm fetched everything
    st2 = cfs.stats(mnt)
    assert st2["drive_media_bytes_total"] == st["drive_media_bytes_total"]
    assert st2["bytes_from_cache_total"] - st["bytes_from_cache_total"] >= ptree.total
    # writes, then sync: Drive holds them when it returns
    blobs = {"ckpt/a.pt": random.Random(1).randbytes(2 * H.MiB + 3),
             "ckpt/b.txt": b"epoch 3\n"}
    for rel, d in blobs.items():
        with open(os.path.join(mnt, rel), "wb") as f:
            f.write(d)
    cfs.sync(os.path.join(mnt, "ckpt"), timeout_ms=60000)
    out = capsys.readouterr().out
    assert (_cli.binary(), "sync") not in _cli._no_json
    assert "\r" in out and out.count("\n") == 1 and "sync 100%" in out.rsplit("\r", 1)[1], out
    for rel, d in blobs.items():
        assert drive_bytes(emu, "/" + rel) == d, rel
    assert cfs.stats(mnt)["uploads_pending"] == 0
    cfs.flush_and_unmount(mnt, quiet=True)


# ---- flush_and_unmount -----------------------------------------------------------------


@pytest.mark.deadline(180)
def test_flush_and_unmount_leaves_every_byte_in_drive(api, emu, tmp_path):
    mnt = str(tmp_path / "mnt")
    api.mount(mnt, emu, quiet=True, write_back_delay=3600)  # nothing uploads on its own
    rng = random.Random(9)
    blobs = {"ckpt/model.pt": rng.randbytes(4 * H.MiB + 1), "ckpt/log.txt": b"loss 0.1\n" * 1000,
             "new/deep/x.bin": rng.randbytes(70000)}
    os.makedirs(os.path.join(mnt, "new", "deep"))
    for rel, d in blobs.items():
        tmp = os.path.join(mnt, rel + ".tmp")
        with open(tmp, "wb") as f:
            f.write(d)
        os.replace(tmp, os.path.join(mnt, rel))
    pid = pid_of(mnt)
    cfs.flush_and_unmount(quiet=True)  # the only mount this process made
    assert not H.is_fuse_mounted(mnt)
    H.wait_until(lambda: H.pid_gone(pid), 30, what="the daemon's exit")
    for rel, d in blobs.items():
        assert drive_bytes(emu, "/" + rel) == d, rel
        assert not at_path(emu, "/" + rel + ".tmp")
    assert cfs.drive._mounted_here == []


@pytest.mark.deadline(180)
def test_flush_with_a_file_still_open_detaches(api, emu, tmp_path):
    """flush_and_unmount with a log still open: the sync uploads its bytes so far, the
    mount is detached with a warning, the daemon serves the file until its close, and
    what was written after the flush is uploaded by the next mount of the cache folder,
    as the warning says."""
    mnt = str(tmp_path / "mnt")
    api.mount(mnt, emu, quiet=True)
    closed = os.path.join(mnt, "ckpt", "done.bin")
    with open(closed, "wb") as f:
        f.write(b"closed before the flush\n")
    f = open(os.path.join(mnt, "ckpt", "train.log"), "wb")
    try:
        f.write(b"epoch 1\n")
        f.flush()
        pid = pid_of(mnt)
        with pytest.warns(UserWarning, match="still in use .*pid %d.*detached it lazily" % os.getpid()):
            cfs.flush_and_unmount(mnt, quiet=True)
        assert not H.is_fuse_mounted(mnt)
        assert drive_bytes(emu, "/ckpt/done.bin") == b"closed before the flush\n"
        assert drive_bytes(emu, "/ckpt/train.log") == b"epoch 1\n"  # sync sent the open file's bytes
        f.write(b"epoch 2\n")  # the daemon still serves the open file
        f.flush()
        assert not H.pid_gone(pid)
    finally:
        f.close()
    H.wait_until(lambda: H.pid_gone(pid), 30, what="the daemon's exit once the file closed")
    api.mount(mnt, emu, quiet=True)  # the same cache folder
    cfs.sync(mnt, timeout_ms=60000, quiet=True)
    assert drive_bytes(emu, "/ckpt/train.log") == b"epoch 1\nepoch 2\n"
    cfs.flush_and_unmount(mnt, quiet=True)


@pytest.mark.deadline(120)
def test_a_log_held_open_reaches_drive(api, emu, tmp_path, capsys):
    """upload_open_files=1 (--upload-open-files=1): a log never closed is in Drive within
    seconds of each write."""
    mnt = str(tmp_path / "mnt")
    api.mount(mnt, emu, quiet=True, upload_open_files=1)
    lags = []
    with open(os.path.join(mnt, "ckpt", "run.log"), "wb") as f:
        want = b""
        for epoch in range(1, 4):
            line = b"epoch %d loss %.3f\n" % (epoch, 1.0 / epoch)
            f.write(line)
            f.flush()
            want += line
            t0 = time.monotonic()
            H.wait_until(lambda: at_path(emu, "/ckpt/run.log") and
                         drive_bytes(emu, "/ckpt/run.log") == want, 30, interval=0.1,
                         what="epoch %d of the open log in Drive" % epoch)
            lags.append(time.monotonic() - t0)
    H.report(capsys, "pyapi", "a log held open, upload_open_files=1: in Drive %s s after each write"
             % ", ".join("%.1f" % x for x in lags))
    cfs.flush_and_unmount(mnt, quiet=True)


@pytest.mark.deadline(120)
def test_plot_of_the_history(api, emu, ptree, tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    mnt = str(tmp_path / "mnt")
    api.mount(mnt, emu, quiet=True)
    read_all(mnt, ptree)

    def shows_the_reads():
        s = cfs._plot.series(cfs._plot.history(mnt, 60), 60)
        return s if len(s["t"]) >= 3 and sum(s["read_mbps"]) > 0 else None
    H.wait_until(shows_the_reads, 30, interval=0.3, what="the reads in the history")
    fig = cfs.plot(mnt, seconds=60)
    axes = fig.get_axes()
    assert [a.get_ylabel() for a in axes] == ["MB/s", "per s", "cache hits %", "uploads pending"]
    read = axes[0].get_lines()[0].get_ydata()
    assert max(read) > 0 and len(read) >= 3
    assert max(axes[1].get_lines()[1].get_ydata()) > 0  # the pacer's rate
    # without matplotlib: the numbers as text
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    text = cfs.plot(mnt, seconds=60)
    assert "read" in text and "cache hits" in text and capsys.readouterr().out.strip() == text.strip()
    cfs.flush_and_unmount(mnt, quiet=True)
