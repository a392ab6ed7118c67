"""Drive as it lives: changes made in Drive reach the mount within one poll
interval (Changes API), and credential sources that hand out short-lived
tokens (metadata server, service-account JWT) keep a mount reading.

A small tree on its own emulator; the mount polls every second (--poll-interval=1)
and trusts listings for 300 s (--dir-ttl=300), so only the change feed can make
a change visible this fast.  Every case waits on a condition with a deadline.
"""
import json
import os

import pytest

import helpers as H
from conftest import SESSION_TOKEN

POLL = 1
DEADLINE = 15  # seconds for a change to show: many poll intervals, still prompt


def spec(tmp_path):
    items = [
        {"id": H.mkid("chg/dir"), "name": "dir", "parent": "root",
         "mimeType": "application/vnd.google-apps.folder"},
        {"id": H.mkid("chg/other"), "name": "other", "parent": "root",
         "mimeType": "application/vnd.google-apps.folder"},
        {"id": H.mkid("chg/a"), "name": "a.txt", "parent": H.mkid("chg/dir"),
         "content": "first version of a\n"},
        {"id": H.mkid("chg/b"), "name": "b.txt", "parent": H.mkid("chg/dir"),
         "content": "bee\n" * 1000},
        {"id": H.mkid("chg/c"), "name": "c.txt", "parent": H.mkid("chg/dir"),
         "content": "sea\n"},
    ]
    p = tmp_path / "spec.json"
    p.write_text(json.dumps({"root": {"id": H.ROOT_ID, "name": "My Drive"}, "items": items}))
    return p


def control(emu, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    st, _, out = emu.request(method, path, data=data,
                             headers={"Content-Type": "application/json"})
    assert st == 200, (method, path, st, out)
    return json.loads(out) if out else {}


def stats(m):
    """The mount's counters, through the control attribute the CLI uses."""
    return json.loads(os.getxattr(m.mnt, "user.colabfs.stats").decode())


def read(path):
    with open(path, "rb") as f:
        return f.read()


def shows(cond, what):
    H.wait_until(cond, DEADLINE, interval=0.1, what=what)


@pytest.mark.deadline(120)
def test_changes_reach_the_mount(mount_factory, emulator_factory, tmp_path):
    emu = emulator_factory(spec(tmp_path), "emu-changes", access_token=SESSION_TOKEN)
    m = mount_factory.new(emu, name="changes",
                          extra=["--poll-interval=%d" % POLL, "--dir-ttl=300",
                                 "--attr-timeout=300"])
    d = m.path("dir")
    assert sorted(os.listdir(d)) == ["a.txt", "b.txt", "c.txt"]
    assert read(os.path.join(d, "a.txt")) == b"first version of a\n"
    old_b = read(os.path.join(d, "b.txt"))
    # the first poll only takes a starting token: wait for it
    shows(lambda: stats(m)["change_polls_total"] >= 2, "the first polls")

    # add
    new_id = control(emu, "POST", "/_emu/items",
                     {"name": "added.txt", "parent": H.mkid("chg/dir"), "content": "new file\n"})["id"]
    shows(lambda: "added.txt" in os.listdir(d), "added.txt to appear")
    assert read(os.path.join(d, "added.txt")) == b"new file\n"

    # rewrite (a new revision of another size): the new bytes, whole
    control(emu, "POST", "/_emu/items/" + H.mkid("chg/a"), {"content": "second, longer version of a\n"})
    shows(lambda: os.stat(os.path.join(d, "a.txt")).st_size == len("second, longer version of a\n"),
          "a.txt's new size")
    assert read(os.path.join(d, "a.txt")) == b"second, longer version of a\n"

    # rename
    control(emu, "POST", "/_emu/items/" + H.mkid("chg/c"), {"name": "c-renamed.txt"})
    shows(lambda: "c-renamed.txt" in os.listdir(d) and "c.txt" not in os.listdir(d),
          "c.txt renamed")
    assert not os.path.exists(os.path.join(d, "c.txt"))
    assert read(os.path.join(d, "c-renamed.txt")) == b"sea\n"

    # move to another folder
    control(emu, "POST", "/_emu/items/" + H.mkid("chg/b"), {"parent": H.mkid("chg/other")})
    shows(lambda: "b.txt" in os.listdir(m.path("other")) and "b.txt" not in os.listdir(d),
          "b.txt moved")
    assert read(m.path("other/b.txt")) == old_b

    # trash
    control(emu, "POST", "/_emu/items/" + new_id, {"trashed": True})
    shows(lambda: "added.txt" not in os.listdir(d), "added.txt trashed")
    assert not os.path.exists(os.path.join(d, "added.txt"))

    # delete
    control(emu, "DELETE", "/_emu/items/" + H.mkid("chg/c"))
    shows(lambda: "c-renamed.txt" not in os.listdir(d), "c-renamed.txt deleted")

    st = stats(m)
    assert st["changes_applied_total"] >= 6, st

    # a remount catches up on what changed while it was down
    rc, out, err = m.umount(timeout=60)
    assert rc == 0, (out, err)
    control(emu, "POST", "/_emu/items",
            {"name": "while-down.txt", "parent": H.mkid("chg/dir"), "content": "hi\n"})
    m.pid = None
    m.start(timeout=60)
    shows(lambda: "while-down.txt" in os.listdir(d), "the change made while unmounted")
    assert read(os.path.join(d, "while-down.txt")) == b"hi\n"


@pytest.mark.deadline(90)
def test_metadata_server_tokens(mount_factory, emulator_factory, tmp_path):
    """Credentials from a metadata server (how Colab hands out tokens): 3-second
    tokens are fetched again as they expire, and no listing or read fails."""
    emu = emulator_factory(spec(tmp_path), "emu-metadata", access_token="unused-static",
                           token_lifetime=3)
    m = mount_factory.new(emu, name="metadata", token=None,
                          extra=["--metadata-url=" + emu.url, "--poll-interval=0", "--dir-ttl=1"])
    d = m.path("dir")
    t0 = emu.stats()["by_kind"]["metadata"]

    def listed_across_token_lifetimes():
        # every listing after --dir-ttl asks Drive, so it needs a valid token
        assert sorted(os.listdir(d)) == ["a.txt", "b.txt", "c.txt"]
        assert read(os.path.join(d, "c.txt")) == b"sea\n"
        return emu.stats()["by_kind"]["metadata"] - t0 >= 3
    H.wait_until(listed_across_token_lifetimes, 30, interval=0.3,
                 what="three tokens from the metadata server")
    with open(m.log_file, encoding="utf-8", errors="replace") as f:
        log = f.read()
    assert "new access token from %s/computeMetadata/" % emu.url in log, log[-2000:]
    assert "ya29." not in log


@pytest.mark.deadline(90)
def test_service_account_jwt(mount_factory, emulator_factory, tmp_path):
    """A service_account credentials file: colabfs signs an RS256 JWT, the
    emulator verifies it with the public key; 3-second tokens are replaced as
    they expire and no read fails.  The private key never reaches a log."""
    import subprocess
    key = tmp_path / "sa.key"
    pub = tmp_path / "sa.pub"
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                    "-out", str(key)], check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)],
                   check=True, capture_output=True)
    email = "loader@colabfs-test.iam.gserviceaccount.com"
    creds = tmp_path / "sa.json"
    pem = key.read_text()
    creds.write_text(json.dumps({"type": "service_account", "project_id": "p",
                                 "private_key_id": "kid1", "private_key": pem,
                                 "client_email": email, "client_id": "1",
                                 "token_uri": "https://oauth2.googleapis.com/token"}))
    os.chmod(creds, 0o600)
    emu = emulator_factory(spec(tmp_path), "emu-sa", token_lifetime=3,
                           extra=["--sa-public-key", str(pub), "--sa-email", email])
    m = mount_factory.new(emu, name="sa", token=None,
                          extra=["--credentials=" + str(creds), "--token-url=" + emu.url + "/token",
                                 "--poll-interval=0", "--dir-ttl=1"])
    d = m.path("dir")
    t0 = emu.stats()["by_kind"]["token"]

    def listed_across_token_lifetimes():
        assert sorted(os.listdir(d)) == ["a.txt", "b.txt", "c.txt"]
        assert read(os.path.join(d, "a.txt")) == b"first version of a\n"
        return emu.stats()["by_kind"]["token"] - t0 >= 2
    H.wait_until(listed_across_token_lifetimes, 30, interval=0.3,
                 what="fresh JWT-bearer tokens as they expire")
    with open(m.log_file, encoding="utf-8", errors="replace") as f:
        log = f.read()
    body = "".join(pem.strip().splitlines()[1:-1])
    assert body[:40] not in log and "PRIVATE KEY" not in log
    assert "ya29." not in log


@pytest.mark.deadline(90)
def test_umount_is_prompt_while_drive_is_down(mount_factory, emulator_factory, tmp_path):
    """Read-ahead downloads still retrying against an unreachable Drive must not
    keep the daemon alive after unmount (--io-timeout is 300 s here): it exits
    within seconds, and `colabfs umount` reports success."""
    import time
    big = "0123456789abcdef" * (16 * 1024 * 1024 // 16)   # 16 MiB
    p = tmp_path / "spec.json"
    p.write_text(json.dumps({"root": {"id": H.ROOT_ID, "name": "My Drive"}, "items": [
        {"id": H.mkid("umount/big"), "name": "big.txt", "parent": "root", "content": big}]}))
    # 1 MB/s: the rest of the file is still downloading when Drive goes away
    emu = emulator_factory(p, "emu-umount", access_token=SESSION_TOKEN,
                           extra=["--bandwidth", "1000000"])
    m = mount_factory.new(emu, name="umount", extra=["--io-timeout=300", "--poll-interval=0"])
    with open(m.path("big.txt"), "rb") as f:
        assert f.read(1 << 20) == big[:1 << 20].encode()   # starts the read-ahead
    pid = m.pid
    emu.stop()                                             # downloads now fail and retry
    t0 = time.monotonic()
    rc, out, err = m.umount(timeout=60)
    took = time.monotonic() - t0
    assert rc == 0, (rc, out, err, m.log_tail())
    assert took < 15, "colabfs umount took %.1f s with Drive down" % took
    assert not H.is_fuse_mounted(m.mnt)
    H.wait_until(lambda: H.pid_gone(pid), 10, what="the daemon to exit")
