"""Mountpoint mistakes, network and secrets, and start-up checks (issue 13, items 3, 5, 6).

Each test asserts the exact message the user sees.  Mounts go through mount_factory, so
everything is unmounted and reaped at the end, on failure too; the extra servers a test starts
are stopped in a finally.
"""

import errno
import http.server
import json
import os
import signal
import ssl
import subprocess
import threading
import time
from pathlib import Path

import pytest

import helpers as H
from conftest import SESSION_TOKEN

pytestmark = pytest.mark.deadline(180)


def colabfs_mount(m, extra=(), timeout=60, cwd=None, mnt=None, **kw):
    """Run `colabfs mount` with m's arguments (plus extra); (rc, out, err, seconds)."""
    argv = [str(H.colabfs_bin()), "mount"] + m.args + list(extra) + [mnt or m.mnt]
    t0 = time.monotonic()
    rc, out, err = H.run_cmd(argv, timeout, env=m.env, cwd=cwd)
    return rc, out, err, time.monotonic() - t0


def mount_count(path):
    path = os.path.abspath(path)
    with open("/proc/self/mountinfo") as f:
        return sum(1 for line in f if H._unescape_mountinfo(line.split()[4]) == path)


def test_live_mount_refused_naming_its_pid(emulator, mount_factory):
    m = mount_factory.new(emulator)
    pid = m.xattr_pid()
    rc, _, err, _ = colabfs_mount(m)
    assert rc == 1, err
    assert ("colabfs: %s is already a colabfs mount (daemon pid %d); unmount it first: "
            "colabfs umount %s\n" % (m.mnt, pid, m.mnt)) in err
    assert mount_count(m.mnt) == 1
    assert os.listdir(m.mnt)


def test_dead_mount_named_and_force_recovers(emulator, mount_factory, tree):
    m = mount_factory.new(emulator)
    supervisor = m.xattr_pid()
    server = H.serve_pid(supervisor)
    assert server and H.is_colabfs_exe(supervisor)
    for pid in (supervisor, server):  # first the one that would start another server
        os.kill(pid, signal.SIGKILL)

    def dead():
        try:
            os.getxattr(m.mnt, "user.colabfs.pid")  # a stat or a listing may be cached
        except OSError as e:
            return e.errno == errno.ENOTCONN
        return False
    H.wait_until(dead, 30, what="the mount to be left ENOTCONN")
    rc, _, err, _ = colabfs_mount(m)
    assert rc == 1, err
    assert ("colabfs: %s is a dead fuse.colabfs mount (its daemon is gone: Transport endpoint "
            "is not connected); unmount it with colabfs umount %s, or mount with --force to do "
            "that first\n" % (m.mnt, m.mnt)) in err
    assert mount_count(m.mnt) == 1
    m2 = H.Mount(m.mnt, m.args + ["--force"], m.env, log_file=m.log_file)
    mount_factory.mounts.append(m2)
    m2.workdir = m.workdir
    m2.start()
    assert mount_count(m.mnt) == 1
    assert Path(m.mnt, "top.txt").read_text() == "hello colabfs\n"


@pytest.mark.parametrize("what", ["cache", "log"])
def test_cache_or_log_inside_the_mountpoint_refused(emulator, mount_factory, what):
    m = mount_factory.new(emulator, start=False)
    inside = os.path.join(m.mnt, "inner")
    opt = "--cache-dir=" if what == "cache" else "--log-file="
    rc, _, err, took = colabfs_mount(m, [opt + inside], timeout=30)
    assert rc is not None, "colabfs mount did not return: it waits on its own mount"
    assert took < 15
    assert rc == 1, err
    name = "the cache folder" if what == "cache" else "the log file"
    assert ("colabfs: %s %s is inside the mountpoint %s: it must live outside the mount "
            "(--cache-dir, --log-file)\n" % (name, inside, m.mnt)) in err
    assert not H.is_fuse_mounted(m.mnt)


def test_relative_mountpoint_recovery_off_unmounts_on_sigterm(emulator, mount_factory):
    m = mount_factory.new(emulator, start=False)
    rc, out, err, _ = colabfs_mount(m, ["--recovery=off"], cwd=str(m.workdir), mnt="mnt")
    assert rc == 0, err
    assert H.is_fuse_mounted(m.mnt)
    m.pid = m.xattr_pid()
    os.kill(m.pid, signal.SIGTERM)
    H.wait_until(lambda: not H.is_fuse_mounted(m.mnt), 30, what="the unmount after SIGTERM")
    H.wait_until(lambda: H.pid_gone(m.pid), 30, what="the daemon's exit")


def need_test_hooks():
    rc, out, _ = H.run_cmd([str(H.colabfs_bin()), "--version"], 10)
    if "test hooks" not in out:
        pytest.skip("colabfs built without --enable-test-hooks (./dev.sh test builds with them)")


def test_first_server_deadline(emulator, mount_factory, tmp_path):
    need_test_hooks()
    slow = tmp_path / "slow"
    slow.write_text("60000")
    m = mount_factory.new(emulator, start=False,
                          env_extra={"COLABFS_TEST_SLOW_START_FILE": str(slow)})
    rc, _, err, took = colabfs_mount(m, ["--start-timeout=2"], timeout=40)
    assert rc == 1, err
    assert took < 20
    assert ("colabfs: the server did not start serving within 2 s (--start-timeout); the mount "
            "was ended (see the log %s)\n" % m.log_file) in err
    H.wait_until(lambda: not H.is_fuse_mounted(m.mnt), 20, what="the unmount")
    H.wait_until(lambda: not H.pids_for_mountpoint(m.mnt), 20, what="the daemon's exit")


def test_missing_credential_fails_before_mounting(emulator, mount_factory):
    m = mount_factory.new(emulator, token=None, start=False)
    rc, _, err, took = colabfs_mount(m, timeout=30)
    assert rc == 1, err
    assert took < 10
    assert "colabfs: no credentials: tried --credentials, GOOGLE_APPLICATION_CREDENTIALS, " in err
    assert not H.is_fuse_mounted(m.mnt)
    # the supervisor never mounted: it logs its recovery mode right after mount(2)
    log = Path(m.log_file).read_text() if os.path.exists(m.log_file) else ""
    assert "crash recovery:" not in log


def test_drive_unreachable_said_within_seconds(mount_factory):
    m = mount_factory.new(None, start=False)  # an API URL where nothing listens
    rc, _, err, took = colabfs_mount(m, timeout=60)
    assert rc == 1, err
    assert took < 30
    assert ("colabfs: cannot reach Drive at http://127.0.0.1:9 to open My Drive: ") in err
    assert " for 10 s (see the log for the details; check the network, --api-url or " \
           "--ca-file)\n" in err
    assert not H.is_fuse_mounted(m.mnt)


def test_drive_unreachable_said_before_a_short_start_timeout(mount_factory):
    """With --start-timeout=4 the first call gives up 1.5 s before it (not
    after its 10 s): the mount says why, not "did not start serving" (a
    fresh-clone CI run of colabfs.mount(timeout_ms=15000) got the latter)."""
    m = mount_factory.new(None, start=False)  # an API URL where nothing listens
    rc, _, err, took = colabfs_mount(m, ["--start-timeout=4"], timeout=60)
    assert rc == 1, err
    assert took < 10, took
    assert "colabfs: cannot reach Drive at http://127.0.0.1:9 to open My Drive: " in err, err
    assert "did not start serving" not in err, err
    assert not H.is_fuse_mounted(m.mnt)


def test_http_urls_to_other_hosts_refused(mount_factory, tmp_path):
    m = mount_factory.new(None, start=False)
    rc, _, err, _ = colabfs_mount(m, ["--api-url=http://www.googleapis.com"], timeout=20)
    assert rc == 2, err
    assert ("colabfs: --api-url http://www.googleapis.com: plain http to another machine would "
            "send the access token in the clear; use https:// (plain http only to localhost or "
            "127.0.0.1)\n") in err
    cred = tmp_path / "adc.json"
    cred.write_text(json.dumps({"type": "authorized_user", "client_id": "c", "client_secret": "s",
                                "refresh_token": "r", "token_uri": "http://oauth.example/token"}))
    cred.chmod(0o600)
    rc, _, err, _ = colabfs_mount(m, ["--credentials=" + str(cred)], timeout=20)
    assert rc == 1, err
    assert ("colabfs: the credentials' token_uri http://oauth.example/token: plain http to "
            "another machine would send the credentials in the clear; colabfs sends them only "
            "over https (or plain http to localhost)\n") in err
    assert not H.is_fuse_mounted(m.mnt)


def test_encrypted_service_account_key_fails_at_mount(emulator, mount_factory, tmp_path):
    key = tmp_path / "enc.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                    "-aes256", "-pass", "pass:secret", "-out", str(key)], check=True,
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    cred = tmp_path / "sa.json"
    cred.write_text(json.dumps({"type": "service_account", "client_email": "sa@example.com",
                                "private_key_id": "k1", "private_key": key.read_text(),
                                "token_uri": emulator.token_url}))
    cred.chmod(0o600)
    m = mount_factory.new(emulator, token=None, start=False)
    rc, _, err, took = colabfs_mount(m, ["--credentials=" + str(cred)], timeout=30)
    assert rc == 1, err
    assert took < 10
    assert ("colabfs: credentials file %s: the service account's private_key is encrypted "
            "(passphrase-protected); colabfs needs the unencrypted key that Google issues\n"
            % cred) in err
    assert not H.is_fuse_mounted(m.mnt)


class _Counting(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.server.bodies.append(self.rfile.read(n))
        self.send_response(500)
        self.end_headers()

    def log_message(self, *a):
        pass


def test_token_redirect_not_followed(emulator_factory, mount_factory, tree, tmp_path):
    """A token endpoint answering 307 to another (https, trusted) host: the refresh token and
    the client secret must never reach it."""
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    other.bodies = []
    client = ("cid.apps", "client-secret-" + os.urandom(4).hex(), "refresh-" + os.urandom(4).hex())
    emu = emulator_factory(tree.small_spec_path, "emu-redirect", tls=True, client=client,
                           extra=["--token-redirect",
                                  "https://127.0.0.1:%d/token" % other.server_address[1]])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(emu.tls_dir / "server.pem"), str(emu.tls_dir / "server.key"))
    other.socket = ctx.wrap_socket(other.socket, server_side=True)
    t = threading.Thread(target=other.serve_forever, daemon=True)
    t.start()
    try:
        cred = tmp_path / "adc.json"
        cred.write_text(json.dumps({"type": "authorized_user", "client_id": client[0],
                                    "client_secret": client[1], "refresh_token": client[2],
                                    "token_uri": emu.token_url}))
        cred.chmod(0o600)
        m = mount_factory.new(emu, token=None, start=False,
                              extra=["--credentials=" + str(cred), "--ca-file=" + str(emu.ca_file)])
        rc, _, err, _ = colabfs_mount(m, timeout=60)
        assert rc == 1, err
        assert other.bodies == [], "the secrets were posted to the redirect target"
        log = Path(m.log_file).read_text()
        assert ("token endpoint %s answered HTTP 307, a redirect to https://127.0.0.1:%d/token; "
                "colabfs does not follow redirects of token requests"
                % (emu.token_url, other.server_address[1])) in log
    finally:
        other.shutdown()
        other.server_close()


def test_daemons_inherit_no_descriptors(emulator, mount_factory, tmp_path):
    marker = tmp_path / "inherited-marker"
    fd = os.open(marker, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        m = mount_factory.new(emulator, start=False)
        argv = [str(H.colabfs_bin()), "mount"] + m.args + [m.mnt]
        p = H.register_proc(subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                             env=m.env, pass_fds=(fd,)))
        try:
            assert p.wait(timeout=60) == 0
        finally:
            H.reap_proc(p)
        m.pid = m.xattr_pid()
        daemons = [m.pid, H.serve_pid(m.pid)]
        assert daemons[1]
        for pid in daemons:
            links = []
            for name in os.listdir("/proc/%d/fd" % pid):
                try:
                    links.append(os.readlink("/proc/%d/fd/%s" % (pid, name)))
                except OSError:
                    pass
            assert str(marker) not in links, "pid %d kept the inherited fd %d" % (pid, fd)
    finally:
        os.close(fd)


def test_log_rotates_at_its_cap(emulator, mount_factory):
    m = mount_factory.new(emulator, extra=["--log-max=64K"])
    old = Path(m.log_file + ".1")

    def busy():
        # downloads log at debug; evict and drop the page cache so each round downloads again
        for n in sorted(os.listdir(m.path("many")))[:60]:
            fd = os.open(m.path("many/" + n), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.read(fd, 1 << 16)
            finally:
                os.close(fd)
        H.run_cmd([str(H.colabfs_bin()), "evict", "--all", m.mnt], 30, env=m.env)
        return old.exists()
    H.wait_until(busy, 60, interval=0.2, what="the log to rotate")
    assert Path(m.log_file).stat().st_size <= 64 * 1024 + 4096
    assert 64 * 1024 <= old.stat().st_size <= 64 * 1024 + 4096
    assert "colabfs[" in Path(m.log_file).read_text() + old.read_text()


def test_revision_refused_for_one_file_reads_its_current_content(emulator_factory, mount_factory,
                                                                  tree):
    """Drive answers 404 to a download of file A's head revision (and 403 to file B's): both
    read their current bytes, and file C is still read by revision (pinning stays on)."""
    a, b, c = tree.ids["l2"], tree.ids["l1"], tree.ids["deep"]
    emu = emulator_factory(tree.small_spec_path, "emu-rev",
                           access_token=SESSION_TOKEN,
                           extra=["--revision-404", a, "--revision-403", b])
    m = mount_factory.new(emu)
    model = tree.small_model
    for rel in ("level1/level2/l2.bin", "level1/l1.txt", "level1/level2/level3/deep.txt"):
        with open(m.path(rel), "rb") as f:
            H.assert_same_bytes(f.read(), model.lookup(rel).read_source(), rel)
    media = [r for r in emu.log() if r["kind"] == "media"]
    assert any(r["id"] == a and "/revisions/" in r["path"] and r["status"] == 404 for r in media)
    assert any(r["id"] == b and "/revisions/" in r["path"] and r["status"] == 403 for r in media)
    assert [r for r in media if r["id"] == c] and \
        all("/revisions/" in r["path"] for r in media if r["id"] == c)
    log = Path(m.log_file).read_text()
    assert ("media %s: Drive answers 404 (while it reports it as the head) to reading revision "
            % a) in log


def test_odd_ids_dropped_and_control_characters_escaped(emulator_factory, mount_factory,
                                                        tmp_path):
    good = H.mkid("newline")
    spec = {"root": {"id": H.ROOT_ID, "name": "My Drive"}, "items": [
        {"id": good, "name": "line1\nline2.txt", "parent": H.ROOT_ID, "content": "two lines\n"},
        {"id": H.mkid("tab"), "name": "a\tb\x7f", "parent": H.ROOT_ID, "content": "tab\n"},
        {"id": "bad/../../id", "name": "slashed-id.txt", "parent": H.ROOT_ID, "content": "x\n"},
        {"id": "bad id", "name": "spaced-id.txt", "parent": H.ROOT_ID, "content": "y\n"},
    ]}
    p = tmp_path / "spec.json"
    p.write_text(json.dumps(spec))
    emu = emulator_factory(p, "emu-odd", access_token=SESSION_TOKEN)
    m = mount_factory.new(emu)
    names = sorted(os.listdir(m.mnt))
    assert names == ["a\u2409b\u2421", "line1\u240aline2.txt"], names
    assert Path(m.path("line1\u240aline2.txt")).read_text() == "two lines\n"
    # `ls` output stays one name a line
    out = subprocess.run(["ls", "-1", m.mnt], capture_output=True, timeout=30, text=True).stdout
    assert out.splitlines() == names
    listed = [r for r in emu.log() if r["kind"] == "media"]
    assert all(r["id"] in (good, H.mkid("tab")) for r in listed)
