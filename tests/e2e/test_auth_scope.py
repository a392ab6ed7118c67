"""What the token may do: a mount whose token was granted only the drive.readonly
scope mounts read-only and says why (the log and the terminal); a full-scope
token does not.  The granted scopes come from the token endpoint's reply
(refresh-token credentials) or, for COLABFS_ACCESS_TOKEN, from one POST to the
tokeninfo endpoint at the --token-url's origin, the token in the body."""

import json
import os

import pytest

import helpers as H
from conftest import SESSION_TOKEN

READONLY = "https://www.googleapis.com/auth/drive.readonly"
FULL = "https://www.googleapis.com/auth/drive"
CLIENT_ID = "e2e-scope-client.apps.googleusercontent.com"
CLIENT_SECRET = "e2e-scope-secret-" + os.urandom(6).hex()
REFRESH_TOKEN = "1//e2e-scope-refresh-" + os.urandom(10).hex()
RO_TOKEN = "ya29.e2e-readonly-" + os.urandom(12).hex()
WHY = "the token has only the drive.readonly scope"
TERMINAL_LINE = ("colabfs: %s (granted: %s): mounting read-only; use credentials with the drive "
                 "scope to write" % (WHY, READONLY))


@pytest.fixture(scope="module")
def ro_grant_emulator(tree, emulator_factory):
    """Refresh-token grants that ask for no scope get only drive.readonly."""
    return emulator_factory(tree.small_spec_path, "emu-ro-grant",
                            client=(CLIENT_ID, CLIENT_SECRET, REFRESH_TOKEN),
                            extra=["--grant-scope", READONLY])


@pytest.fixture(scope="module")
def tokens_emulator(tree, emulator_factory):
    """SESSION_TOKEN with the full scope, RO_TOKEN with only drive.readonly."""
    return emulator_factory(tree.small_spec_path, "emu-ro-token", access_token=SESSION_TOKEN,
                            extra=["--readonly-token", RO_TOKEN])


def _creds(tmp_path):
    p = tmp_path / "adc.json"
    p.write_text(json.dumps({"type": "authorized_user", "client_id": CLIENT_ID,
                             "client_secret": CLIENT_SECRET, "refresh_token": REFRESH_TOKEN}))
    p.chmod(0o600)
    return p


def _log(m):
    return open(m.log_file, "rb").read().decode("utf-8", "replace")


def _terminal(m):
    rc, out, err = m.result
    return (out or "") + (err or "")


def _assert_read_only(m, tree):
    """Reads work; a write fails."""
    H.compare_stream(m.path("top.txt"), tree.small_model.lookup("top.txt"))
    with pytest.raises(OSError):
        with open(m.path("scope-probe.txt"), "wb") as f:
            f.write(b"x")
    assert not os.path.exists(m.path("scope-probe.txt"))


def _tokeninfo_requests(emu):
    return [e for e in emu.log() if e.get("path") in ("/tokeninfo", "/oauth2/v3/tokeninfo")]


def test_refresh_grant_readonly_mounts_read_only(mount_factory, ro_grant_emulator, tree, tmp_path):
    m = mount_factory.new(ro_grant_emulator, name="ro-grant", token=None,
                          extra=["--credentials=" + str(_creds(tmp_path)),
                                 "--token-url=" + ro_grant_emulator.token_url])
    assert TERMINAL_LINE in _terminal(m), _terminal(m)
    log = _log(m)
    assert WHY in log and "granted: " + READONLY in log, m.log_tail(40)
    # the reply said the scope: no tokeninfo lookup for a refreshed token
    assert _tokeninfo_requests(ro_grant_emulator) == []
    _assert_read_only(m, tree)
    for secret in (REFRESH_TOKEN, CLIENT_SECRET):
        assert secret not in log


def test_env_token_readonly_asks_tokeninfo(mount_factory, tokens_emulator, tree):
    before = len(_tokeninfo_requests(tokens_emulator))
    m = mount_factory.new(tokens_emulator, name="ro-token", token=RO_TOKEN,
                          extra=["--token-url=" + tokens_emulator.token_url])
    assert TERMINAL_LINE in _terminal(m), _terminal(m)
    log = _log(m)
    assert WHY in log, m.log_tail(40)
    assert "tokeninfo %s/tokeninfo: the token has the scopes %s" % (tokens_emulator.url, READONLY) \
        in log, m.log_tail(40)
    # once, by POST, the token in the body: never in the URL, the log or argv
    asked = _tokeninfo_requests(tokens_emulator)[before:]
    assert [(e["method"], e["status"]) for e in asked] == [("POST", 200)], asked
    assert all(not e["query"] for e in asked), asked
    assert RO_TOKEN not in log
    assert RO_TOKEN not in _terminal(m)
    assert RO_TOKEN.encode() not in open("/proc/%d/cmdline" % m.xattr_pid(), "rb").read()
    _assert_read_only(m, tree)


def test_full_scope_token_says_nothing(mount_factory, tokens_emulator, tree):
    before = len(_tokeninfo_requests(tokens_emulator))
    m = mount_factory.new(tokens_emulator, name="full-token", token=SESSION_TOKEN,
                          extra=["--token-url=" + tokens_emulator.token_url])
    H.compare_stream(m.path("top.txt"), tree.small_model.lookup("top.txt"))
    log = _log(m)
    assert "the token has the scopes %s" % FULL in log, m.log_tail(40)
    assert WHY not in log and WHY not in _terminal(m)
    assert SESSION_TOKEN not in log
    assert len(_tokeninfo_requests(tokens_emulator)) == before + 1


def test_full_scope_grant_says_nothing(mount_factory, tree, emulator_factory, tmp_path):
    emu = emulator_factory(tree.small_spec_path, "emu-full-grant",
                           client=(CLIENT_ID, CLIENT_SECRET, REFRESH_TOKEN))
    m = mount_factory.new(emu, name="full-grant", token=None,
                          extra=["--credentials=" + str(_creds(tmp_path)),
                                 "--token-url=" + emu.token_url])
    H.compare_stream(m.path("top.txt"), tree.small_model.lookup("top.txt"))
    assert "scopes " + FULL in _log(m), m.log_tail(40)
    assert WHY not in _log(m) and WHY not in _terminal(m)


def test_read_only_flag_asks_nothing(mount_factory, tokens_emulator, tree):
    """--read-only: the mount cannot write anyway, so the token's scopes are not asked."""
    before = len(_tokeninfo_requests(tokens_emulator))
    m = mount_factory.new(tokens_emulator, name="ro-flag", token=RO_TOKEN,
                          extra=["--read-only", "--token-url=" + tokens_emulator.token_url])
    _assert_read_only(m, tree)
    assert WHY not in _log(m) and WHY not in _terminal(m)
    assert len(_tokeninfo_requests(tokens_emulator)) == before


def test_service_account_readonly_scope(mount_factory, emulator_factory, tree, tmp_path):
    """A service account's token has the scope its JWT asserted (the emulator's
    jwt-bearer reply, like Google's, may leave "scope" out): --scope=drive.readonly
    without --read-only mounts read-only and says why."""
    import subprocess
    key, pub = tmp_path / "sa.key", tmp_path / "sa.pub"
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                    "-out", str(key)], check=True, capture_output=True, timeout=60)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)],
                   check=True, capture_output=True, timeout=60)
    email = "scope@colabfs-test.iam.gserviceaccount.com"
    creds = tmp_path / "sa.json"
    creds.write_text(json.dumps({"type": "service_account", "private_key_id": "k1",
                                 "private_key": key.read_text(), "client_email": email}))
    creds.chmod(0o600)
    emu = emulator_factory(tree.small_spec_path, "emu-sa-scope",
                           extra=["--sa-public-key", str(pub), "--sa-email", email])
    m = mount_factory.new(emu, name="sa-ro", token=None,
                          extra=["--credentials=" + str(creds), "--token-url=" + emu.token_url,
                                 "--scope=drive.readonly"])
    assert TERMINAL_LINE in _terminal(m), _terminal(m)
    _assert_read_only(m, tree)
    assert _tokeninfo_requests(emu) == []
