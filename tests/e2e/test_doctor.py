"""colabfs doctor: the checklist is all ok on a good setup (exit 0), and each
broken part FAILs with its fix (exit 1): no /dev/fuse (the COLABFS_TEST_DEV_FUSE
hook), no credentials, a drive.readonly token when writes are wanted, Drive
unreachable, a cache folder on a nearly full tmpfs.  With a live mount it
names the mount's pids."""

import json
import os
import subprocess

import pytest

import helpers as H
from conftest import SESSION_TOKEN

RO_TOKEN = "ya29.e2e-doctor-readonly-" + os.urandom(8).hex()
CLOSED = "http://127.0.0.1:9"


@pytest.fixture(scope="module")
def demu(tree, emulator_factory):
    return emulator_factory(tree.small_spec_path, "emu-doctor", access_token=SESSION_TOKEN,
                            extra=["--readonly-token", RO_TOKEN])


def doctor(colabfs, tmp_path, emu, *, token=SESSION_TOKEN, extra=(), env_extra=None,
           api_url=None, mnt=None):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = H.clean_env(home=home, extra=env_extra)
    if token:
        env["COLABFS_ACCESS_TOKEN"] = token
    argv = [colabfs, "doctor", "--json", "--api-url=" + (api_url or emu.url),
            "--token-url=" + emu.token_url, "--metadata-url=" + CLOSED]
    if not any(a.startswith("--cache-dir") for a in extra):
        argv.append("--cache-dir=" + str(tmp_path / "cache"))
    argv += list(extra) + ([mnt] if mnt else [])
    if not mnt:
        argv = H.without_other_mounts(argv)
    rc, out, err = H.run_cmd(argv, timeout=60, env=env)
    assert rc is not None, "doctor timed out: " + err
    doc = json.loads(out)
    checks = {c["name"]: c for c in doc["checks"]}
    assert [c["name"] for c in doc["checks"]] == ["fuse", "credentials", "drive", "clock",
                                                 "cache", "mount"], out
    assert doc["ok"] == (rc == 0), out
    assert token is None or token not in out + err
    return rc, checks, out


def assert_fail(rc, ck, out, name, detail, fix):
    """doctor exited 1 with check name FAILed: detail and fix contain those words."""
    assert rc == 1, out
    assert ck[name]["status"] == "FAIL", out
    assert detail in ck[name]["detail"], out
    for word in fix:
        assert word in ck[name]["fix"], out


def test_good_setup_all_ok(colabfs, demu, tmp_path):
    rc, ck, out = doctor(colabfs, tmp_path, demu)
    assert rc == 0, out
    for name in ("fuse", "credentials", "drive", "clock", "cache"):
        assert ck[name]["status"] == "ok", out
        assert ck[name]["fix"] is None, out
    assert "may write" in ck["credentials"]["detail"], out
    assert "COLABFS_ACCESS_TOKEN" in ck["credentials"]["detail"] or \
        "environment" in ck["credentials"]["detail"], out
    assert " ms" in ck["drive"]["detail"] and "storage used" in ck["drive"]["detail"], out
    assert "for emulated.user@example.com" in ck["drive"]["detail"], out  # the account
    assert "Date" in ck["clock"]["detail"], out
    assert "not there yet" in ck["cache"]["detail"], out
    # another session's mount may be found; it must not fail this setup
    assert ck["mount"]["status"] in ("ok", "warn"), out
    # doctor changed nothing
    assert not (tmp_path / "cache").exists()
    # the text form: one line per check, the same verdict
    env = H.clean_env(home=tmp_path / "home", extra={"COLABFS_ACCESS_TOKEN": SESSION_TOKEN})
    rc2, text, err = H.run_cmd(H.without_other_mounts(
        [colabfs, "doctor", "--api-url=" + demu.url, "--token-url=" + demu.token_url,
         "--cache-dir=" + str(tmp_path / "cache")]), timeout=60, env=env)
    assert rc2 == 0, text + err
    assert text.splitlines()[0].startswith("ok   fuse"), text
    assert "all checks passed" in text


def test_usage_error(colabfs):
    rc, out, err = H.run_cmd([colabfs, "doctor", "--no-such-option"], timeout=30)
    assert rc == 2, err


def test_no_dev_fuse(colabfs, demu, tmp_path):
    rc, ck, out = doctor(colabfs, tmp_path, demu,
                         env_extra={"COLABFS_TEST_DEV_FUSE": "/nonexistent/fuse"})
    assert_fail(rc, ck, out, "fuse", "/nonexistent/fuse does not open read-write",
                ["modprobe fuse"])
    assert ck["credentials"]["status"] == "ok", out


def test_no_credentials(colabfs, demu, tmp_path):
    rc, ck, out = doctor(colabfs, tmp_path, demu, token=None)
    assert_fail(rc, ck, out, "credentials", "none found", ["--credentials FILE"])
    assert ck["drive"]["status"] == "warn", out


def test_readonly_token_when_writes_wanted(colabfs, demu, tmp_path):
    rc, ck, out = doctor(colabfs, tmp_path, demu, token=RO_TOKEN)
    assert_fail(rc, ck, out, "credentials", "drive.readonly: mounts read-only",
                ["drive scope", "--read-only"])
    assert ck["credentials"]["detail"].startswith("drive.readonly: mounts read-only"), out
    # a read-only mount is what that token can do: no failure then
    rc, ck, out = doctor(colabfs, tmp_path, demu, token=RO_TOKEN, extra=["--read-only"])
    assert ck["credentials"]["status"] == "ok", out
    assert rc == 0, out


def test_drive_unreachable(colabfs, demu, tmp_path):
    rc, ck, out = doctor(colabfs, tmp_path, demu, api_url=CLOSED)
    assert_fail(rc, ck, out, "drive", "unreachable", ["--api-url"])
    assert "(network)" in ck["drive"]["detail"], out
    assert ck["clock"]["status"] == "warn", out


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_cache_on_nearly_full_tmpfs(colabfs, demu, tmp_path):
    fs = tmp_path / "small"
    fs.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m,mode=0700", "tmpfs", str(fs)],
                   check=True, timeout=30)
    try:
        with open(fs / "fill", "wb") as f:
            f.write(b"\0" * (30 << 20))
        rc, ck, out = doctor(colabfs, tmp_path, demu, extra=["--cache-dir=" + str(fs / "cache")])
        assert_fail(rc, ck, out, "cache", "nearly full", ["--cache-dir", "colabfs evict"])
        assert "tmpfs" in ck["cache"]["detail"], out
    finally:
        subprocess.run(["umount", str(fs)], timeout=30)
    assert not H.is_fuse_mounted(fs)


def test_live_mount_pids(colabfs, demu, mount_factory, tmp_path):
    m = mount_factory.new(demu, name="doctor")
    sup = m.xattr_pid()
    srv = H.wait_until(lambda: H.serve_pid(sup), 30, what="the server pid")
    rc, ck, out = doctor(colabfs, tmp_path, demu, extra=["--cache-dir=" + str(m.workdir / "cache")],
                         mnt=m.mnt)
    line = ck["mount"]["detail"]
    assert ck["mount"]["status"] == "ok", out
    assert "server pid %d, supervisor pid %d" % (srv, sup) in line, out
    assert "restarts 0" in line and "uploads pending 0, failed 0" in line, out
    assert rc == 0, out
