"""Writes through server deaths (issue 12): the kernel's requests in flight at a SIGKILL are
answered exactly once, in both recovery modes (resend: the kernel sends them again; forward:
the request log in the supervisor's memory keeps WRITEs whole and the next server replays them).

A writer and a namespace worker (create a tmp file, write, rename it over its final name, unlink
an older one) run while the server is killed three times; neither may see an error, and every
byte and name must end up right on the mount and in Drive.
"""

import hashlib
import json
import os
import random
import signal
import threading
import urllib.parse

import pytest

import helpers as H
from conftest import SESSION_TOKEN

MiB = 1024 * 1024


@pytest.fixture
def cemu(emulator_factory, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"items": [{"name": "keep.txt", "content": "kept"}]}))
    return emulator_factory(spec, "emu-wcrash", access_token=SESSION_TOKEN, seed=5)


def at_path(emu, path):
    st, _, body = emu.request("GET", "/_emu/find?path=" + urllib.parse.quote(path))
    assert st == 200, body
    return [i for i in json.loads(body)["items"] if not i["trashed"]]


@pytest.mark.deadline(240)
@pytest.mark.parametrize("mode", ["resend", "forward"])
def test_writes_in_flight_at_kills_are_answered_once(mode, mount_factory, cemu):
    m = mount_factory.new(cemu, extra=["--recovery=" + mode, "--write-back-delay=0"],
                          env_extra={"COLABFS_TEST_REQUEST_DELAY_US": "300"}, name="wc-" + mode)
    sup = m.xattr_pid()
    rnd = random.Random(11)
    big = bytes(rnd.getrandbits(8) for _ in range(256 * 1024)) * 96  # 24 MiB, 128 KiB writes
    errors, done = [], threading.Event()
    final = {}

    def writer():
        try:
            with open(m.path("big.bin"), "wb", buffering=0) as f:
                for off in range(0, len(big), 128 * 1024):
                    assert f.write(big[off:off + 128 * 1024]) == 128 * 1024
        except BaseException as e:  # noqa: B902 - reported by the test
            errors.append("writer: %r" % e)

    def namer():
        step = "start"
        try:
            i = 0
            while not done.is_set() or i < 5:
                data = b"ckpt %d " % i * 300
                tmp, dst = m.path("c%d.tmp" % (i % 3)), m.path("ckpt%d.pt" % (i % 3))
                step = "create %d" % i
                with open(tmp, "xb") as f:  # O_EXCL: a create done twice would be EEXIST
                    step = "write %d" % i
                    f.write(data)
                    step = "close %d" % i
                step = "replace %d" % i
                os.replace(tmp, dst)  # done twice: ENOENT
                final["ckpt%d.pt" % (i % 3)] = data
                step = "mkdir %d" % i
                os.mkdir(m.path("dir%d" % i))  # done twice: EEXIST
                step = "rmdir %d" % i
                os.rmdir(m.path("dir%d" % i))
                i += 1
        except BaseException as e:  # noqa: B902
            errors.append("namer at %s: %r" % (step, e))

    threads = [threading.Thread(target=writer), threading.Thread(target=namer)]
    for t in threads:
        t.start()
    try:
        size = 0
        for _ in range(3):
            # each kill after some progress: a request in flight at several deaths in
            # a row is the crash-loop guard's (--crash-loop-limit), answered EIO
            # (a fast machine may finish the writer before the third kill: the
            # namer's requests are then the ones in flight)
            H.wait_until(lambda: os.path.exists(m.path("big.bin")) and
                         (os.stat(m.path("big.bin")).st_size >= size + 2 * MiB or
                          not threads[0].is_alive()), 60, what="the writer going on")
            size = os.stat(m.path("big.bin")).st_size
            old = H.serve_pid(sup)
            assert old, "no server under supervisor %d" % sup
            os.kill(old, signal.SIGKILL)
            H.wait_until(lambda: H.pid_gone(old), 10, what="server %d gone" % old)
            H.wait_until(lambda: H.serve_pid(sup) not in (None, old), 30, what="a new server")
    finally:
        done.set()
        for t in threads:
            t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a worker hangs"
    assert not errors, errors
    assert open(m.path("big.bin"), "rb").read() == big
    rc, out, err = H.run_cmd([H.colabfs_bin(), "sync", "--timeout", "120", m.path()], timeout=180)
    assert rc == 0, (rc, out, err)
    items = at_path(cemu, "/big.bin")
    assert len(items) == 1 and items[0]["md5Checksum"] == hashlib.md5(big).hexdigest(), items
    log = open(m.log_file).read()
    for name, data in final.items():
        items = at_path(cemu, "/" + name)
        trace = [ln for ln in log.splitlines() if any(i["id"] in ln for i in items)]
        assert len(items) == 1 and items[0]["md5Checksum"] == hashlib.md5(data).hexdigest(), \
            (name, [(i["id"], i["name"]) for i in items], out, err, "\n".join(trace))
        assert open(m.path(name), "rb").read() == data
    for i in range(3):
        assert at_path(cemu, "/c%d.tmp" % i) == []
    assert not [n for n in os.listdir(m.path()) if n.startswith("dir")]
    assert "too long to record" not in log, "a WRITE was answered EIO after a restart"
    assert log.count("serving (server pid") >= 4, "three restarts expected"


def in_kernel_notice(pids):
    """The threads of pids waiting in the kernel on an entry invalidation (the folder's lock)."""
    found = []
    for pid in pids:
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/wchan" % (pid, tid)) as f:
                    if "inval_entry" in f.read():
                        found.append((pid, int(tid)))
            except OSError:
                pass
    return found


@pytest.mark.deadline(120)
@pytest.mark.parametrize("mode", ["resend", "forward"])
def test_a_server_killed_while_a_notice_waits_on_a_folder_still_restarts(mode, mount_factory,
                                                                        cemu):
    """The kernel takes a folder's lock to handle an entry invalidation; a mkdir in flight holds
    it until the server answers.  A server thread waiting there could not die: a server killed
    then never exited, and the supervisor waited for ever to start the next one.  Notices now
    go through the notifier process, which may wait there while the server exits."""
    m = mount_factory.new(cemu, extra=["--recovery=" + mode, "--poll-interval=1"],
                          name="wn-" + mode)
    sup = m.xattr_pid()
    assert open(m.path("keep.txt")).read() == "kept"
    H.wait_until(lambda: json.loads(os.getxattr(m.mnt, "user.colabfs.stats"))
                 ["change_polls_total"] >= 2, 30, what="the first polls")
    st, _, body = cemu.request("POST", "/_emu/faults", {"Content-Type": "application/json"},
                               json.dumps({"faults": ["kind=files.create,stall_ms=8000,count=1"]})
                               .encode())
    assert st == 200, body
    errors = []

    def mkdir():
        try:
            os.mkdir(m.path("newdir"))
        except BaseException as e:  # noqa: B902 - reported by the test
            errors.append(repr(e))

    t = threading.Thread(target=mkdir)
    t.start()
    try:
        keep = at_path(cemu, "/keep.txt")[0]
        # "another machine" renames keep.txt: the poller invalidates root's entry for it,
        # and waits for root's lock, which the stalled mkdir holds
        st, _, body = cemu.request("POST", "/_emu/items/" + keep["id"],
                                   {"Content-Type": "application/json"},
                                   json.dumps({"name": "kept.txt"}).encode())
        assert st == 200, body
        old = H.serve_pid(sup)
        H.wait_until(lambda: in_kernel_notice([old] + H.notifiers_of(sup)), 30,
                     what="a notice waiting on root's lock")
        os.kill(old, signal.SIGKILL)
        H.wait_until(lambda: H.serve_pid(sup) not in (None, old), 30, what="a new server")
        t.join(timeout=60)
        assert not t.is_alive(), "mkdir hangs"
    finally:
        t.join(timeout=60)
    assert not errors, errors
    assert os.path.isdir(m.path("newdir"))
    assert len(at_path(cemu, "/newdir")) == 1
    H.wait_until(lambda: not in_kernel_notice(H.notifiers_of(sup)), 30,
                 what="the notice through once the new server answered")
    H.wait_until(lambda: sorted(os.listdir(m.path())) == ["kept.txt", "newdir"], 30,
                 what="the rename seen")
    H.wait_until(lambda: len(H.notifiers_of(sup)) == 1, 30, what="the old notifier gone")
