"""Fixtures for the colabfs end-to-end tests (real FUSE mounts against the Drive
v3 emulator).

Layout of the session tree (ids are deterministic, see helpers.mkid):

  /top.txt  /empty.bin  /random64.bin (64 MiB)  /sparse5g.bin (5 GiB + 12345, sparse)
  /level1/l1.txt  /level1/emptydir/  /level1/level2/l2.bin
  /level1/level2/level3/deep.txt  /level1/level2/level3/level4/leaf.txt
  /many/f000.bin .. f249.bin        (250 entries: several files.list pages)
  /unicode/...                      (accents, CJK, emoji, a unicode folder)
  /dups/...                         (duplicate files and folders, no-ext, dotfile, .tar.gz,
                                     a trashed older duplicate)
  /weird/...                        (names with '/', '.' and '..')
  /docs/...                         (document, spreadsheet, presentation, drawing; form and
                                     site are hidden)
  /links/...                        (file and folder shortcuts; dangling and trashed-target
                                     shortcuts are hidden)
  /loop/inner/f.txt                 (loop/self-link and loop/inner/up-link point at loop:
                                     cycles, hidden)
  trashed.txt, TrashedFolder/       (hidden)

Every test has a deadline (default 120 s, ``@pytest.mark.deadline(N)``): when it
passes, a watchdog kills the daemons this suite started (which aborts their FUSE
connections, so a read blocked in the kernel returns ENOTCONN) and the test fails.
"""

import faulthandler
import json
import os
import random
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import helpers as H  # noqa: E402

DEFAULT_DEADLINE = 120
SESSION_TOKEN = "ya29.e2e-session-token-" + os.urandom(8).hex()
SEED = 20240501


# --------------------------------------------------------------------------
# pytest plumbing: markers, per-phase reports, watchdog


def pytest_configure(config):
    config.addinivalue_line("markers", "deadline(seconds): per-test watchdog deadline")
    _install_term_handler()


def pytest_unconfigure(config):
    # normally every fixture has cleaned up already; this catches what an
    # interrupted run (Ctrl-C) left behind
    H.emergency_cleanup()


def _install_term_handler():
    """On SIGTERM/SIGHUP (e.g. ``timeout 600 pytest``) unmount and reap what we
    started, then exit.

    The work is done by a thread: woken through signal.set_wakeup_fd when the
    main thread is running, or -- when the main thread is stuck in a FUSE request
    (killable sleep, so no handler can run there and the signal stays pending)
    -- by seeing it pending in /proc, twice a second."""
    if threading.current_thread() is not threading.main_thread():
        return
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        signal.set_wakeup_fd(w)
    except ValueError:
        return
    sigs = (signal.SIGTERM, signal.SIGHUP)
    for sig in sigs:
        signal.signal(sig, lambda signum, frame: None)
    status_files = ["/proc/self/status",  # ShdPnd: process-wide pending
                    "/proc/self/task/%d/status" % threading.main_thread().native_id]
    mask = sum(1 << (s - 1) for s in sigs)

    def pending_on_main():
        v = 0
        for path in status_files:
            try:
                with open(path) as f:
                    for line in f:
                        if line.startswith(("SigPnd:", "ShdPnd:")):
                            v |= int(line.split()[1], 16) & mask
            except (OSError, ValueError):
                pass
        return (v & -v).bit_length() or None

    def finish(sig):
        sys.__stderr__.write("\n*** e2e: signal %d: unmounting and exiting\n" % sig)
        H.emergency_cleanup()
        os._exit(128 + sig)

    def watch():
        import select
        while True:
            ready, _, _ = select.select([r], [], [], 0.5)
            if ready:
                b = os.read(r, 64)
                if not b:
                    return
                for sig in b:
                    if sig in sigs:
                        finish(sig)
            else:
                sig = pending_on_main()
                if sig:
                    finish(sig)
    threading.Thread(target=watch, name="e2e-term", daemon=True).start()


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def _test_failed(request):
    rep = getattr(request.node, "rep_call", None)
    return rep is not None and rep.failed


@pytest.fixture(autouse=True)
def watchdog(request):
    m = request.node.get_closest_marker("deadline")
    limit = m.args[0] if m else DEFAULT_DEADLINE
    fired = threading.Event()

    def fire():
        fired.set()
        sys.__stderr__.write("\n*** e2e watchdog: %s exceeded %ss; killing our colabfs daemons\n"
                             % (request.node.nodeid, limit))
        faulthandler.dump_traceback(file=sys.__stderr__, all_threads=True)
        H.abort_everything()

    def last_resort():
        sys.__stderr__.write("\n*** e2e watchdog: test still stuck 60s after the abort; "
                             "detaching mounts and exiting\n")
        faulthandler.dump_traceback(file=sys.__stderr__, all_threads=True)
        H.abort_everything()
        with H._REG_LOCK:
            procs = list(H.LIVE_PROCS)
        for p in procs:
            try:
                p.kill()
            except Exception:
                pass
        os._exit(3)

    t1 = threading.Timer(limit, fire)
    t2 = threading.Timer(limit + 60, last_resort)
    t1.daemon = t2.daemon = True
    t1.start()
    t2.start()
    try:
        yield
    finally:
        t1.cancel()
        t2.cancel()
    if fired.is_set():
        pytest.fail("watchdog: test exceeded its %ss deadline (daemons were killed to unblock it)"
                    % limit, pytrace=False)


# --------------------------------------------------------------------------
# requirements


def _skip_unless_fuse():
    if os.geteuid() != 0:
        pytest.skip("e2e tests need root (FUSE mounts)")
    if not os.path.exists("/dev/fuse"):
        pytest.skip("/dev/fuse is missing")
    try:
        fd = os.open("/dev/fuse", os.O_RDWR)
        os.close(fd)
    except OSError as e:
        pytest.skip("/dev/fuse cannot be opened: %s" % e)


def _skip_unless_binary():
    b = H.colabfs_bin()
    if not (b.is_file() and os.access(b, os.X_OK)):
        pytest.skip("colabfs binary not built (%s); set COLABFS_BIN or run make" % b)


def _skip_unless_emulator():
    if not H.EMULATOR_PY.is_file():
        pytest.skip("Drive emulator missing: %s" % H.EMULATOR_PY)


@pytest.fixture(scope="session")
def colabfs():
    """Path to the colabfs binary (skips when it is not built)."""
    _skip_unless_binary()
    return str(H.colabfs_bin())


@pytest.fixture(scope="session")
def fuse_ok():
    _skip_unless_fuse()
    return True


# --------------------------------------------------------------------------
# the source tree and spec


class Tree:
    """The session's source tree: spec, expected model, ids and source paths."""

    def __init__(self, base):
        self.base = Path(base)
        self.src = self.base / "src"
        self.src.mkdir(parents=True, exist_ok=True)
        self.items = []
        self.ids = {}
        self.rng = random.Random(SEED)
        self._t = 0
        self.sparse_patches = []

    def _created(self):
        self._t += 1
        return "2023-01-01T00:%02d:%02d.%03dZ" % (self._t // 60 % 60, self._t % 60, self._t % 1000)

    def add(self, label, name, parent="root", mime=None, path=None, content=None,
            created=None, trashed=False, target=None, data=None):
        iid = H.mkid(label)
        assert label not in self.ids, label
        self.ids[label] = iid
        it = {"id": iid, "name": name, "parent": self.ids.get(parent, parent)}
        if mime:
            it["mimeType"] = mime
        if data is not None:
            p = self.src / iid
            p.write_bytes(data)
            path = p
        if path is not None:
            it["path"] = str(path)
        if content is not None:
            it["content"] = content
        if target is not None:
            it["shortcutDetails"] = {"targetId": self.ids.get(target, target)}
        if trashed:
            it["trashed"] = True
        it["createdTime"] = created or self._created()
        it["modifiedTime"] = "2024-02-03T04:05:06.789Z"
        self.items.append(it)
        return iid

    def folder(self, label, name, parent="root", **kw):
        return self.add(label, name, parent, mime=H.FOLDER, **kw)

    def blob(self, n):
        return self.rng.randbytes(n)


def build_tree(base):
    t = Tree(base)
    t.add("top", "top.txt", content="hello colabfs\n")
    t.add("empty", "empty.bin", data=b"")

    # 64 MiB random
    p = t.src / "random64.bin"
    with open(p, "wb") as f:
        for _ in range(64):
            f.write(t.blob(H.MiB))
    t.add("random64", "random64.bin", path=p)

    # sparse 5 GiB + 12345 with random 1 MiB patches around 2 GiB, 4 GiB and at the end
    size = 5 * H.GiB + 12345
    p = t.src / "sparse5g.bin"
    with open(p, "wb") as f:
        f.truncate(size)
        for off in (0, 2 * H.GiB - 1000, 4 * H.GiB - H.MiB - 4097, 4 * H.GiB - 300000,
                    4 * H.GiB + 8191, size - H.MiB):
            os.pwrite(f.fileno(), t.blob(H.MiB), off)
            t.sparse_patches.append((off, H.MiB))
    t.add("sparse5g", "sparse5g.bin", path=p)

    # nesting (4 levels) and an empty folder
    t.folder("level1", "level1")
    t.add("l1", "l1.txt", "level1", content="level one\n" * 100)
    t.folder("emptydir", "emptydir", "level1")
    t.folder("level2", "level2", "level1")
    t.add("l2", "l2.bin", "level2", data=t.blob(100003))
    t.folder("level3", "level3", "level2")
    t.add("deep", "deep.txt", "level3", content="deep\n")
    t.folder("level4", "level4", "level3")
    t.add("leaf", "leaf.txt", "level4", data=t.blob(4096))

    # 250 entries -> many files.list pages (cap 37 + short pages)
    t.folder("many", "many")
    for i in range(250):
        n = 0 if i % 50 == 0 else (i * 37) % 5000 + 1
        t.add("many%d" % i, "f%03d.bin" % i, "many", data=t.blob(n))

    # unicode
    t.folder("unicode", "unicode")
    t.add("u1", "donn\u00e9es.csv", "unicode", content="a;b\n1;2\n")
    t.add("u2", "\u65e5\u672c\u8a9e.txt", "unicode", content="\u3053\u3093\u306b\u3061\u306f\n")
    t.add("u3", "emoji \U0001F389\U0001F680.txt", "unicode", data=t.blob(777))
    t.add("u4", "\u03a9\u2248\u00e7\u221a\u222b #%!&'.bin", "unicode", data=t.blob(12))
    t.folder("u5", "\u00dcn\u00efc\u00f8d\u00e9 folder", "unicode")
    t.add("u6", "na\u00efve r\u00e9sum\u00e9.txt", "u5", content="caf\u00e9\n")

    # duplicates
    t.folder("dups", "dups")
    t.add("dupT", "dup.txt", "dups", content="trashed and oldest\n",
          created="2020-01-01T00:00:00.000Z", trashed=True)
    t.add("dupA", "dup.txt", "dups", content="dup A (oldest visible)\n",
          created="2021-01-01T00:00:00.000Z")
    t.add("dupB", "dup.txt", "dups", content="dup B\n", created="2022-06-01T00:00:00.000Z")
    t.add("dupC", "dup.txt", "dups", content="dup C (same time as B)\n",
          created="2022-06-01T00:00:00.000Z")
    t.folder("photosA", "Photos", "dups", created="2021-05-05T00:00:00.000Z")
    t.folder("photosB", "Photos", "dups", created="2021-05-06T00:00:00.000Z")
    t.add("photoA", "a.jpg", "photosA", data=t.blob(3000))
    t.add("photoB", "b.jpg", "photosB", data=t.blob(3001))
    t.add("noextA", "noext", "dups", content="n1\n", created="2021-01-01T00:00:00.000Z")
    t.add("noextB", "noext", "dups", content="n2\n", created="2021-01-02T00:00:00.000Z")
    t.add("dotA", ".hidden", "dups", content="h1\n", created="2021-01-01T00:00:00.000Z")
    t.add("dotB", ".hidden", "dups", content="h2\n", created="2021-01-02T00:00:00.000Z")
    t.add("tgzA", "archive.tar.gz", "dups", data=t.blob(50), created="2021-01-01T00:00:00.000Z")
    t.add("tgzB", "archive.tar.gz", "dups", data=t.blob(51), created="2021-01-02T00:00:00.000Z")

    # '/', '.', '..'
    t.folder("weird", "weird")
    t.add("slash", "a/b.txt", "weird", content="slash\n")
    t.folder("slashdir", "x/y", "weird")
    t.add("slashdirchild", "z.txt", "slashdir", content="zz\n")
    t.add("dot", ".", "weird", content="dot\n")
    t.folder("dotdot", "..", "weird")
    t.add("dotdotchild", "inside.txt", "dotdot", content="inside\n")

    # hidden
    t.add("trashed", "trashed.txt", content="must not appear\n", trashed=True)
    t.folder("trashedfolder", "TrashedFolder", trashed=True)
    t.add("trashedchild", "inner.txt", "trashedfolder", content="must not appear either\n")

    # native Google files
    t.folder("docs", "docs")
    t.add("doc", "Meeting Notes", "docs", mime=H.GAPPS + "document",
          content="Meeting notes\nAgenda: colabfs\n")
    t.add("sheet", "Budget 2024", "docs", mime=H.GAPPS + "spreadsheet", content="a,b\n1,2\n")
    t.add("slides", "Slides", "docs", mime=H.GAPPS + "presentation", content="Slide 1\n")
    t.add("drawing", "Diagram", "docs", mime=H.GAPPS + "drawing", content="box\n")
    t.add("form", "Survey", "docs", mime=H.GAPPS + "form", content="Q1?\n")
    t.add("site", "My Site", "docs", mime=H.GAPPS + "site", content="site\n")

    # shortcuts
    t.folder("links", "links")
    t.add("sc_file", "top-link.txt", "links", mime=H.SHORTCUT, target="top")
    t.add("sc_bin", "l2-link.bin", "links", mime=H.SHORTCUT, target="l2")
    t.add("sc_dir", "level2-link", "links", mime=H.SHORTCUT, target="level2")
    t.add("sc_dangling", "dangling-link", "links", mime=H.SHORTCUT,
          target=H.mkid("no such file"))
    t.add("sc_trashed", "trashed-link.txt", "links", mime=H.SHORTCUT, target="trashed")
    # cycles: a folder shortcut to its own folder and to a folder above it
    t.folder("loop", "loop")
    t.folder("loop_inner", "inner", "loop")
    t.add("loop_file", "f.txt", "loop_inner", content="inside the loop\n")
    t.add("sc_self", "self-link", "loop", mime=H.SHORTCUT, target="loop")
    t.add("sc_up", "up-link", "loop_inner", mime=H.SHORTCUT, target="loop")

    t.spec = {"root": {"id": H.ROOT_ID, "name": "My Drive"}, "items": t.items}
    t.spec_path = t.base / "spec.json"
    t.spec_path.write_text(json.dumps(t.spec, indent=1, ensure_ascii=False))
    t.model = H.Model(t.spec)
    # the same tree without the 5 GiB file, for the extra emulators (the emulator
    # hashes files >= 256 MiB in the background at start: ~20 CPU-seconds each)
    t.small_spec = {"root": t.spec["root"],
                    "items": [it for it in t.items if it["id"] != t.ids["sparse5g"]]}
    t.small_spec_path = t.base / "small-spec.json"
    t.small_spec_path.write_text(json.dumps(t.small_spec, indent=1, ensure_ascii=False))
    t.small_model = H.Model(t.small_spec)
    return t


@pytest.fixture(scope="session")
def tree(tmp_path_factory):
    return build_tree(tmp_path_factory.mktemp("tree"))


# --------------------------------------------------------------------------
# emulators


@pytest.fixture(scope="session")
def emulator_factory(tmp_path_factory):
    """Start extra emulators; all stopped at session end."""
    _skip_unless_emulator()
    started = []

    def make(spec_path, name="emu", **kw):
        e = H.Emulator(spec_path, tmp_path_factory.mktemp(name), **kw)
        started.append(e)
        e.start()
        return e
    try:
        yield make
    finally:
        for e in started:
            e.stop()


@pytest.fixture(scope="session", autouse=True)
def _start_main_emulator_early(request):
    """Start the main emulator with the session: it hashes the 5 GiB file in the
    background (the first listing waits for that), which then overlaps with
    tests that do not need it.  Failures surface in the tests that use it."""
    if H.EMULATOR_PY.is_file():
        try:
            request.getfixturevalue("emulator")
        except KeyboardInterrupt:
            raise
        except BaseException:  # noqa: B902 - skip/fail: reported by the tests that need it
            pass
    yield


@pytest.fixture(scope="session")
def emulator(tree, emulator_factory):
    """The main emulator: plain HTTP, static token, 37-item pages with short and
    empty pages."""
    return emulator_factory(tree.spec_path, "emu-main", access_token=SESSION_TOKEN,
                            page_size_cap=37, short_pages=True, seed=SEED)


# --------------------------------------------------------------------------
# mounts


def mount_args(emu, cache_dir, log_file, extra=()):
    """emu None: an API URL where nothing listens (for CLI error tests)."""
    url = emu.url if emu is not None else "http://127.0.0.1:9"
    a = ["--api-url=" + url, "--cache-dir=" + str(cache_dir),
         "--log-file=" + str(log_file), "--log-level=debug"]
    return a + list(extra)


class MountFactory:
    def __init__(self, tmp_path_factory):
        self.tmp = tmp_path_factory
        self.mounts = []

    def new(self, emu, *, extra=(), token=SESSION_TOKEN, env_extra=None, start=True,
            check=True, foreground=False, name="m"):
        d = self.tmp.mktemp(name)
        home = d / "home"
        home.mkdir()
        env = H.clean_env(home=home, extra=env_extra)
        if token:
            env["COLABFS_ACCESS_TOKEN"] = token
        log = d / "colabfs.log"
        m = H.Mount(d / "mnt", mount_args(emu, d / "cache", log, extra), env, log_file=log,
                    foreground=foreground)
        m.workdir = d
        self.mounts.append(m)
        if start:
            m.start(check=check)
        return m

    def cleanup(self):
        problems = []
        for m in reversed(self.mounts):
            for p in m.cleanup():
                problems.append("%s: %s" % (m.mnt, p))
            if not H.is_fuse_mounted(m.mnt):
                # the block cache can hold GiBs; keep the log for post-mortems
                shutil.rmtree(m.workdir / "cache", ignore_errors=True)
        self.mounts = []
        return problems


@pytest.fixture
def mount_factory(tmp_path_factory, fuse_ok, colabfs, request):
    """Function-scoped mounts: everything is unmounted and reaped at test end."""
    f = MountFactory(tmp_path_factory)
    try:
        yield f
    finally:
        if _test_failed(request):
            for m in f.mounts:
                sys.stderr.write(m.log_tail(60) + "\n")
        problems = f.cleanup()
    if problems and not _test_failed(request):
        pytest.fail("teardown: " + "; ".join(problems), pytrace=False)


class SessionMount:
    """The shared mount of the main emulator.  ``get()`` re-mounts (fresh cache)
    if an earlier test's watchdog had to kill the daemon, so one hang does not
    cascade into every later test."""

    def __init__(self, tmp_path_factory, emu):
        self.f = MountFactory(tmp_path_factory)
        self.emu = emu
        self.m = None
        self.remounts = 0
        self.problems = []
        self.broken = None

    def get(self):
        if self.broken:
            pytest.fail("session mount unavailable: " + self.broken, pytrace=False)
        if self.m is None or not self.m.alive():
            if self.m is not None:
                self.remounts += 1
                self.problems += self.m.cleanup()
                if self.remounts > 3:
                    self.broken = "the daemon died or was killed %d times" % self.remounts
                    pytest.fail(self.broken, pytrace=False)
            try:
                # read-only: the read tests share the main emulator's tree (the
                # write tests have their own emulators)
                self.m = self.f.new(self.emu, name="session", extra=["--read-only"])
            except AssertionError as e:
                self.broken = str(e)  # later tests fail at once instead of waiting again
                raise
        return self.m

    def close(self):
        self.problems += self.f.cleanup()


@pytest.fixture(scope="session")
def session_mount(tmp_path_factory, fuse_ok, colabfs, emulator):
    sm = SessionMount(tmp_path_factory, emulator)
    try:
        yield sm
    finally:
        sm.close()
        if sm.problems:
            sys.stderr.write("session mount teardown problems: %s\n" % sm.problems)


@pytest.fixture
def mnt(session_mount):
    """The session mount (a helpers.Mount), alive."""
    m = session_mount.get()
    yield m


# --------------------------------------------------------------------------
# a real Redis Cluster (the shared cache tier of issue 15)


@pytest.fixture
def redis_cluster(tmp_path_factory, request):
    """A started 6-node Redis Cluster (3 masters + 3 replicas, see
    redis_cluster.py); skips when redis-server is not installed.  Every node is
    killed and reaped and its folder removed at test end, pass or fail."""
    import redis_cluster as RC
    why = RC.available()
    if why:
        pytest.skip("no Redis Cluster: " + why)
    c = RC.RedisCluster(str(tmp_path_factory.mktemp("redis")))
    request.addfinalizer(c.close)
    c.start()
    return c
