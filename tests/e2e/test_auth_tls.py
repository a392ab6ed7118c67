"""HTTPS with a private CA, a wrong CA, and OAuth refresh from an
authorized_user credentials file (with short-lived tokens)."""

import json
import os
import re
import time

import pytest

import helpers as H
from conftest import SESSION_TOKEN

CLIENT_ID = "e2e-client-123.apps.googleusercontent.com"
CLIENT_SECRET = "e2e-client-secret-" + os.urandom(6).hex()
REFRESH_TOKEN = "1//e2e-refresh-token-" + os.urandom(10).hex()
TOKEN_LIFETIME = 3


@pytest.fixture(scope="module")
def tls_emulator(tree, emulator_factory):
    return emulator_factory(tree.small_spec_path, "emu-tls", tls=True, access_token=SESSION_TOKEN,
                            page_size_cap=37, short_pages=True)


@pytest.fixture(scope="module")
def other_tls_emulator(tree, emulator_factory):
    """A second TLS emulator: its ca.pem is a CA the first one's cert is not from."""
    return emulator_factory(tree.small_spec_path, "emu-tls2", tls=True, access_token=SESSION_TOKEN)


@pytest.fixture(scope="module")
def oauth_emulator(tree, emulator_factory):
    return emulator_factory(tree.small_spec_path, "emu-oauth",
                            client=(CLIENT_ID, CLIENT_SECRET, REFRESH_TOKEN),
                            token_lifetime=TOKEN_LIFETIME)


def test_https_mount(mount_factory, tls_emulator, tree):
    m = mount_factory.new(tls_emulator, name="tls",
                          extra=["--ca-file=" + str(tls_emulator.ca_file),
                                 "--token-url=" + tls_emulator.token_url])
    want = sorted(tree.small_model.children(tree.ids["many"]))
    assert sorted(os.listdir(m.path("many"))) == want
    for rel in ["top.txt", "level1/level2/l2.bin", "unicode/\u65e5\u672c\u8a9e.txt",
                "links/top-link.txt", "many/f001.bin", "many/f249.bin"]:
        H.compare_stream(m.path(rel), tree.small_model.lookup(rel))
    big = tree.small_model.lookup("random64.bin")
    fd = os.open(m.path("random64.bin"), os.O_RDONLY)
    try:
        for off, n in [(0, 3 * H.MiB + 5), (40 * H.MiB - 7, 6 * H.MiB), (big.size - 100, 200)]:
            H.assert_same_bytes(H.pread_full(fd, n, off), big.read_source(off, n),
                                "https random64.bin pread(%d, %d)" % (off, n))
    finally:
        os.close(fd)
    st = tls_emulator.stats()
    assert st["by_kind"].get("media", 0) > 0, st


def test_wrong_ca_fails_to_read(mount_factory, tls_emulator, other_tls_emulator, tree):
    """Trusting another CA: the mount fails, or reads fail; never bytes."""
    assert tls_emulator.ca_file.read_bytes() != other_tls_emulator.ca_file.read_bytes()
    before = [e for e in tls_emulator.log() if not e.get("path", "").startswith("/_emu")]
    m = mount_factory.new(tls_emulator, name="badca", check=False, start=False,
                          extra=["--ca-file=" + str(other_tls_emulator.ca_file),
                                 "--token-url=" + tls_emulator.token_url])
    # a certificate that does not verify is not a transient error: the mount (or
    # the first read) must fail promptly, not after minutes of retries
    rc, out, err = m.start(timeout=30, check=False)
    if rc == 0:
        assert H.is_fuse_mounted(m.mnt)
        for rel in ["top.txt", "level1/l1.txt", "many/f001.bin"]:
            try:
                with open(m.path(rel), "rb") as f:
                    data = f.read()
            except OSError:
                continue
            pytest.fail("read %s through a mount that trusts the wrong CA: %d bytes" % (rel, len(data)))
    else:
        assert rc is not None, "mount with a wrong CA did not finish within 30 s; stderr: %s" \
            % err[-1500:]
        assert (out + err).strip(), "mount failed without saying why"
        assert not H.is_fuse_mounted(m.mnt)
    after = [e for e in tls_emulator.log() if not e.get("path", "").startswith("/_emu")]
    assert len(after) == len(before), \
        "requests got through TLS with the wrong CA: %r" % after[len(before):][:5]


def _read_loop_until_refreshed(m, emu, tree, min_seconds, deadline):
    """Read a new (uncached) file per poll until min_seconds have passed and the
    emulator issued >= 3 tokens; every read compared."""
    names = sorted(n for n, nd in tree.small_model.children(tree.ids["many"]).items() if nd.size > 0)
    t0 = time.monotonic()
    state = {"i": 0}

    def step():
        rel = "many/" + names[state["i"] % len(names)]
        state["i"] += 1
        H.compare_stream(m.path(rel), tree.small_model.lookup(rel))
        tokens = emu.stats()["by_kind"].get("token", 0)
        return time.monotonic() - t0 >= min_seconds and tokens >= 3
    H.wait_until(step, deadline, interval=0.25,
                 what="reads spanning several %ss token lifetimes" % TOKEN_LIFETIME)
    return state["i"]


@pytest.mark.deadline(120)
def test_credentials_refresh(mount_factory, oauth_emulator, tree, tmp_path):
    creds = tmp_path / "adc.json"
    creds.write_text(json.dumps({"type": "authorized_user", "client_id": CLIENT_ID,
                                 "client_secret": CLIENT_SECRET, "refresh_token": REFRESH_TOKEN}))
    m = mount_factory.new(oauth_emulator, name="oauth", token=None,
                          extra=["--credentials=" + str(creds),
                                 "--token-url=" + oauth_emulator.token_url])
    n = _read_loop_until_refreshed(m, oauth_emulator, tree, 3 * TOKEN_LIFETIME + 1, 60)
    assert n >= 3
    # metadata calls after expiry work too (a listing not fetched before)
    want = sorted(tree.small_model.children(tree.ids["level4"]))
    assert sorted(os.listdir(m.path("level1/level2/level3/level4"))) == want
    H.compare_stream(m.path("level1/level2/level3/level4/leaf.txt"),
                     tree.small_model.lookup("level1/level2/level3/level4/leaf.txt"))
    st = oauth_emulator.stats()
    assert st["by_kind"].get("token", 0) >= 3, st

    # secrets stay out of the debug log and argv
    log = open(m.log_file, "rb").read()
    assert log, "--log-file at --log-level=debug is empty"
    for secret in (REFRESH_TOKEN, CLIENT_SECRET):
        assert secret.encode() not in log, "secret %r... in the daemon log" % secret[:12]
    hit = re.search(rb"Bearer\s+[A-Za-z0-9._~+/-]{6,}", log)
    assert hit is None, "a bearer token in the log: %r" % hit.group(0)[:20]
    hit = re.search(rb"ya29\.[A-Za-z0-9._-]{6,}", log)
    assert hit is None, "an access token in the log: %r" % hit.group(0)[:14]
    cmdline = open("/proc/%d/cmdline" % m.xattr_pid(), "rb").read()
    for secret in (REFRESH_TOKEN, CLIENT_SECRET):
        assert secret.encode() not in cmdline


def test_env_token_not_in_argv_or_log(mount_factory, emulator, tree):
    m = mount_factory.new(emulator, name="envtok")
    H.compare_stream(m.path("top.txt"), tree.small_model.lookup("top.txt"))
    pid = m.xattr_pid()
    assert SESSION_TOKEN.encode() not in open("/proc/%d/cmdline" % pid, "rb").read()
    assert SESSION_TOKEN.encode() not in open(m.log_file, "rb").read()
