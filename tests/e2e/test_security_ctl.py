"""The control plane and other users, end to end (issue 13, item 1 and the
warm parser of item 6): real mounts on the Drive emulator, a second local
user (``nobody``, uid 65534) running commands through ``setpriv``.

1. With ``-o allow_other`` the second user reads files (bytes compared with
   the source) and stats, but evict, evict.to and warm answer EPERM, the
   ``colabfs evict``/``colabfs warm`` commands print the documented message
   and exit 1, and the cache is intact afterwards (same blocks, no download).
   Root (here the mount's owner too) still evicts and warms.
2. A mount owned by the second user (no allow_other): that user, the owner,
   may evict and warm; root cannot even enter the mount (FUSE's own rule).
3. ``--uid``, ``--gid``, ``--file-mode``, ``--dir-mode``, ``--umask`` show in
   stat; bad values are usage errors (exit 2) with a clear message.
4. allow_other brings default_permissions: a 0440 root:root file is EACCES
   for the second user, readable for root.
5. listxattr names no control attribute; ``cp -a`` copies none.
6. warm/evict.to names with signs, junk or wrapping numbers are EINVAL and
   download nothing; a range past the end of a file is clamped to it.

Every mount lives in a folder of its own under /tmp with mode 0755 (the
pytest folders are 0700, which the second user could not traverse).

Test 2 needs /dev/fuse usable by the second user (Debian's default is 0666);
where it is 0600 the test is skipped.  To run it there without touching the
system's node, give it a private mount namespace with a 0666 copy:

  unshare -m sh -c 'mount --make-rprivate / && mknod /tmp/fuse c 10 229 &&
    chmod 666 /tmp/fuse && mount --bind /tmp/fuse /dev/fuse &&
    python3 -m pytest tests/e2e/test_security_ctl.py -k owner'; rm /tmp/fuse
"""

import errno
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import helpers as H
from conftest import SESSION_TOKEN, mount_args

NOBODY = 65534
DENIED = "not allowed: only the user who mounted it, and root, may evict or warm"

# Run as the second user: does the operations given as JSON, prints one result
# per operation: {"ok": value} or {"errno": "EPERM"}.
PROBE = r"""
import errno, hashlib, json, os, sys
out = []
for op, path, arg in json.loads(sys.argv[1]):
    try:
        if op == "getxattr":
            v = os.getxattr(path, arg).decode("utf-8", "replace").rstrip("\0")
        elif op == "listxattr":
            v = os.listxattr(path)
        elif op == "read":
            with open(path, "rb") as f:
                v = hashlib.sha256(f.read()).hexdigest()
        elif op == "stat":
            st = os.stat(path)
            v = [st.st_uid, st.st_gid, st.st_mode & 0o7777]
        out.append({"ok": v})
    except OSError as e:
        out.append({"errno": errno.errorcode.get(e.errno, str(e.errno))})
print(json.dumps(out))
"""


def as_user(argv, uid=NOBODY, env=None, timeout=60):
    """(rc, out, err) of argv run as uid (its group too, no others)."""
    return H.run_cmd(["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups",
                      "--"] + list(argv), timeout, env=env)


def probe(ops, uid=NOBODY):
    rc, out, err = as_user([sys.executable, "-c", PROBE, json.dumps(ops)], uid)
    assert rc == 0, "probe as uid %d: rc=%r %s" % (uid, rc, err)
    return json.loads(out)


def colabfs(*args, uid=None, env=None, timeout=60):
    argv = [str(H.colabfs_bin())] + list(args)
    if uid is None:
        return H.run_cmd(argv, timeout, env=env)
    return as_user(argv, uid, env=env, timeout=timeout)


def sha(data):
    import hashlib
    return hashlib.sha256(data).hexdigest()


def xstats(path):
    return json.loads(os.getxattr(path, "user.colabfs.stats").decode().rstrip("\0"))


def source(tree, label):
    """The bytes Drive holds for a tree item."""
    it = next(i for i in tree.items if i["id"] == tree.ids[label])
    if "path" in it:
        return Path(it["path"]).read_bytes()
    return it["content"].encode()


class UserMount(H.Mount):
    """A mount made (and unmounted) by another user."""

    def __init__(self, *a, uid, **kw):
        super().__init__(*a, **kw)
        self.uid = uid

    @property
    def argv(self):
        return (["setpriv", "--reuid=%d" % self.uid, "--regid=%d" % self.uid, "--clear-groups",
                 "--"] + super().argv)

    def umount(self, timeout=60):
        return colabfs("umount", self.mnt, uid=self.uid, env=self.env, timeout=timeout)


@pytest.fixture
def sec_mounts(request):
    """make(emu, extra, uid=None) -> a started mount in a 0755 folder under /tmp.
    Requested before mount_factory, so it is torn down after the mounts are."""
    dirs = []

    def make(factory, emu, extra=(), uid=None):
        d = Path(tempfile.mkdtemp(prefix="colabfs-sec-", dir="/tmp"))
        dirs.append(d)
        os.chmod(d, 0o755)
        home = d / "home"
        home.mkdir()
        env = H.clean_env(home=home)
        env["COLABFS_ACCESS_TOKEN"] = SESSION_TOKEN
        log = d / "colabfs.log"
        args = mount_args(emu, d / "cache", log, extra)
        if uid is None:
            m = H.Mount(d / "mnt", args, env, log_file=log)
        else:
            os.chown(d, uid, uid)
            os.chown(home, uid, uid)
            m = UserMount(d / "mnt", args, env, log_file=log, uid=uid)
            os.chown(m.mnt, uid, uid)
        m.workdir = d
        factory.mounts.append(m)
        m.start()
        return m
    yield make
    for d in dirs:
        if not H.is_fuse_mounted(d / "mnt"):
            shutil.rmtree(d, ignore_errors=True)


def test_other_user_reads_but_cannot_control(sec_mounts, mount_factory, emulator, tree):
    m = sec_mounts(mount_factory, emulator, ["-o", "allow_other"])
    assert "default_permissions" in H.mount_entry(m.mnt)["super_options"], H.mount_entry(m.mnt)
    top, l2, big = m.path("top.txt"), m.path("level1/level2/l2.bin"), m.path("random64.bin")

    # the owner (root) warms two files; nobody's reads then hit the cache
    rc, out, err = colabfs("warm", top, l2, env=m.env)
    assert rc == 0 and out.startswith("warmed 2 files"), (rc, out, err)
    before = xstats(m.mnt)
    assert before["cache_blocks"] >= 2, before
    media_big = len([r for r in emulator.log() if r["kind"] == "media"
                     and r["id"] == tree.ids["random64"]])

    res = probe([["read", top, None], ["read", l2, None],
                 ["getxattr", m.mnt, "user.colabfs.stats"],
                 ["getxattr", m.mnt, "user.colabfs.pid"],
                 ["getxattr", m.mnt, "user.colabfs.evict"],
                 ["getxattr", top, "user.colabfs.evict"],
                 ["getxattr", m.mnt, "user.colabfs.evict.to.0"],
                 ["getxattr", l2, "user.colabfs.warm.0.100003"],
                 ["getxattr", big, "user.colabfs.warm.0.67108864"],
                 ["getxattr", big, "user.colabfs.warm.0.18446744073709551615"]])
    assert res[0] == {"ok": sha(source(tree, "top"))}, res[0]
    assert res[1] == {"ok": sha(source(tree, "l2"))}, res[1]
    assert "cache_blocks" in json.loads(res[2]["ok"]), res[2]
    assert int(res[3]["ok"]) == m.xattr_pid(), res[3]
    # a name with a bad number is EINVAL before anyone's rights are looked at;
    # every well-formed control is EPERM
    assert res[4:9] == [{"errno": "EPERM"}] * 5, res[4:]
    assert res[9] == {"errno": "EINVAL"}, res[9]

    # the commands, as nobody: the documented message, exit 1, nothing done
    rc, out, err = colabfs("stats", m.mnt, "--json", uid=NOBODY)
    assert rc == 0 and "cache_blocks" in json.loads(out), (rc, out, err)
    for args in (["evict", "--all", m.mnt], ["evict", "--to", "0", m.mnt], ["evict", top]):
        rc, out, err = colabfs(*args, uid=NOBODY)
        path = args[-1]
        assert (rc, out, err) == (1, "", "colabfs: %s: %s\n" % (path, DENIED)), (args, rc, out, err)
    rc, out, err = colabfs("warm", big, m.path("level1"), uid=NOBODY)
    assert rc == 1 and out == "", (rc, out, err)
    # said once (not once per range or file), naming one of the paths
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and re.fullmatch(r"colabfs: warm (%s|%s/\S+): %s" % (
        re.escape(big), re.escape(m.path("level1")), re.escape(DENIED)), lines[0]), err

    after = xstats(m.mnt)
    for k in ("cache_blocks", "cache_used_bytes", "cache_files", "downloads_total",
              "cache_evictions_total"):
        assert after[k] == before[k], (k, before[k], after[k])
    assert len([r for r in emulator.log() if r["kind"] == "media"
                and r["id"] == tree.ids["random64"]]) == media_big, "nobody's warm downloaded"
    log = Path(m.log_file).read_text(errors="replace")
    assert "control: evict refused to uid 65534" in log, m.log_tail()
    assert "control: warm refused to uid 65534" in log, m.log_tail()

    # root may: evict frees the two files' blocks
    rc, out, err = colabfs("evict", top, l2, env=m.env)
    assert rc == 0, (rc, out, err)
    assert xstats(m.mnt)["cache_blocks"] < before["cache_blocks"]


def test_owner_who_is_not_root_controls_and_root_cannot_enter(sec_mounts, mount_factory,
                                                              emulator, tree):
    # libfuse falls back to the setuid fusermount3 only when mount(2) says
    # EPERM, not when /dev/fuse cannot be opened
    rc, out, err = as_user([sys.executable, "-c", "import os; os.close(os.open('/dev/fuse', os.O_RDWR))"])
    if rc != 0:
        pytest.skip("uid %d cannot open /dev/fuse here (mode %o), so it cannot mount "
                    "(see the module docstring to run it anyway)"
                    % (NOBODY, stat.S_IMODE(os.stat("/dev/fuse").st_mode)))
    m = sec_mounts(mount_factory, emulator, [], uid=NOBODY)
    l1 = m.path("level1/l1.txt")
    res = probe([["getxattr", l1, "user.colabfs.warm.0.1000"], ["read", l1, None],
                 ["stat", l1, None], ["getxattr", m.mnt, "user.colabfs.stats"]])
    assert json.loads(res[0]["ok"]) == {"fetched_bytes": 1000}, res
    assert res[1] == {"ok": sha(source(tree, "l1"))}, res
    assert res[2] == {"ok": [NOBODY, NOBODY, 0o444]}, res  # the mounting user owns what it shows
    assert json.loads(res[3]["ok"])["cache_blocks"] == 1, res
    rc, out, err = colabfs("evict", l1, uid=NOBODY, env=m.env)
    assert rc == 0 and out.startswith(l1 + ": freed "), (rc, out, err)
    rc, out, err = colabfs("warm", l1, uid=NOBODY, env=m.env)
    assert rc == 0 and out.startswith("warmed 1 files"), (rc, out, err)
    # without allow_other FUSE keeps everyone else out, root included
    with pytest.raises(PermissionError):
        os.stat(m.mnt)
    with pytest.raises(PermissionError):
        os.getxattr(m.mnt, "user.colabfs.evict")


def test_uid_gid_modes_show_in_stat(sec_mounts, mount_factory, emulator):
    m = sec_mounts(mount_factory, emulator, ["--uid=1234", "--gid=5678", "--file-mode=0640",
                                             "--dir-mode=750"])
    for rel, want in (("", 0o750), ("level1", 0o750), ("level1/l1.txt", 0o640),
                      ("top.txt", 0o640)):
        st = os.stat(m.path(rel))
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 5678, want), (rel, st)
    assert stat.S_ISDIR(os.stat(m.path("level1")).st_mode)
    # readdirplus attributes (ls -l) agree with lookups
    names = {e.name: e.stat(follow_symlinks=False) for e in os.scandir(m.path("level1"))}
    assert stat.S_IMODE(names["l1.txt"].st_mode) == 0o640 and names["l1.txt"].st_uid == 1234
    # without allow_other nobody cannot enter, whatever the modes say
    assert probe([["stat", m.mnt, None]]) == [{"errno": "EACCES"}]

    # the defaults, 0644 and 0755 (0444 and 0555 --read-only), less the umask
    u = sec_mounts(mount_factory, emulator, ["--umask=027"])
    st_f, st_d = os.stat(u.path("top.txt")), os.stat(u.path("level1"))
    assert stat.S_IMODE(st_f.st_mode) == 0o640 and stat.S_IMODE(st_d.st_mode) == 0o750
    r = sec_mounts(mount_factory, emulator, ["--umask=027", "--read-only"])
    st_f, st_d = os.stat(r.path("top.txt")), os.stat(r.path("level1"))
    assert stat.S_IMODE(st_f.st_mode) == 0o440 and stat.S_IMODE(st_d.st_mode) == 0o550
    assert (st_f.st_uid, st_f.st_gid) == (os.getuid(), os.getgid())

    # bad values: exit 2 before anything is mounted, with the reason
    for arg, msg in (("--file-mode=0999", "--file-mode wants octal permission bits from 0 to "
                                          "0777 (like 0444 or 022), not \"0999\""),
                     ("--dir-mode=1777", "--dir-mode wants octal permission bits"),
                     ("--umask=-1", "--umask wants octal permission bits"),
                     ("--uid=abc", "--uid wants a whole number from 0 to 4294967294, not \"abc\""),
                     ("--gid=-5", "--gid wants a whole number from 0 to 4294967294")):
        d = Path(tempfile.mkdtemp(prefix="colabfs-sec-bad-", dir="/tmp"))
        try:
            rc, out, err = colabfs("mount", "--api-url=http://127.0.0.1:9",
                                   "--cache-dir=%s" % (d / "c"), arg, str(d), timeout=30)
            assert rc == 2 and err.startswith("colabfs: " + msg), (arg, rc, out, err)
            assert not H.is_fuse_mounted(d)
        finally:
            shutil.rmtree(d, ignore_errors=True)


def test_default_permissions_enforce_the_modes(sec_mounts, mount_factory, emulator, tree):
    m = sec_mounts(mount_factory, emulator, ["-o", "allow_other", "--uid=0", "--gid=0",
                                             "--file-mode=0440"])
    top = m.path("top.txt")
    res = probe([["stat", top, None], ["read", top, None],
                 ["getxattr", top, "user.colabfs.stats"],
                 ["getxattr", m.mnt, "user.colabfs.stats"]])
    assert res[0] == {"ok": [0, 0, 0o440]}, res
    assert res[1] == {"errno": "EACCES"}, res   # the kernel checked the mode
    assert res[2] == {"errno": "EACCES"}, res   # reading an attribute needs read permission
    assert "ok" in res[3], res                  # the root folder is 0555
    with open(top, "rb") as f:
        assert f.read() == source(tree, "top")  # root may


def test_listxattr_names_no_control_attribute(sec_mounts, mount_factory, emulator, tmp_path):
    m = sec_mounts(mount_factory, emulator, [])
    for p in (m.mnt, m.path("top.txt"), m.path("level1")):
        assert os.listxattr(p) == [], p
    dst = tmp_path / "copy.txt"
    r = subprocess.run(["cp", "-a", m.path("top.txt"), str(dst)], capture_output=True, timeout=30)
    assert r.returncode == 0, r
    assert [n for n in os.listxattr(dst) if n.startswith("user.colabfs")] == []
    # copying xattrs works here: a file with a user attribute keeps it
    src2, dst2 = tmp_path / "x", tmp_path / "y"
    src2.write_text("x")
    os.setxattr(src2, "user.t", b"v")
    subprocess.run(["cp", "-a", str(src2), str(dst2)], check=True, timeout=30)
    assert os.listxattr(dst2) == ["user.t"]
    # the control attributes still answer by name
    assert xstats(m.mnt)["cache_blocks"] >= 0
    assert m.xattr_pid() > 0


def test_warm_and_evict_names_are_parsed_strictly(sec_mounts, mount_factory, emulator, tree):
    m = sec_mounts(mount_factory, emulator, [])
    l1, big = m.path("level1/l1.txt"), m.path("random64.bin")
    before = xstats(m.mnt)
    for name in ("warm.-1.5", "warm.5.-1", "warm.18446744073709551615.10",
                 "warm.10.18446744073709551615", "warm.9223372036854775808.1", "warm.1x.2",
                 "warm..", "warm.", "warm.1", "warm.1.", "warm.1.2.3", "warm.+1.2", "warm. 1.2",
                 "warm.0x10.1", "evict.to.-1", "evict.to.", "evict.to.1K", "evict.to. 5"):
        with pytest.raises(OSError) as e:
            os.getxattr(big, "user.colabfs." + name)
        assert e.value.errno == errno.EINVAL, (name, e.value)
    for name in ("user.colabfs.warm", "user.colabfs.evictx", "user.colabfs.nope"):
        with pytest.raises(OSError) as e:
            os.getxattr(big, name)
        assert e.value.errno == errno.ENODATA, (name, e.value)
    after = xstats(m.mnt)
    assert after["downloads_total"] == before["downloads_total"], (before, after)
    assert after["cache_blocks"] == before["cache_blocks"], (before, after)

    def warm(path, name):
        return json.loads(os.getxattr(path, "user.colabfs." + name).decode().rstrip("\0"))

    # a range past the end is clamped to the file: the whole 1000-byte file
    assert warm(l1, "warm.5.9223372036854775807") == {"fetched_bytes": 1000}
    assert warm(l1, "warm.0.9223372036854775807") == {"fetched_bytes": 0}  # cached now
    assert warm(l1, "warm.9223372036854775807.9223372036854775807") == {"fetched_bytes": 0}
    with open(l1, "rb") as f:
        assert f.read() == source(tree, "l1")
    # a valid warm of the first two blocks of the big file (its download may
    # run on past them), then of its last block with a length past the end
    assert warm(big, "warm.0.2097152") == {"fetched_bytes": 2 * H.MiB}
    assert warm(big, "warm.%d.9223372036854775807" % (63 * H.MiB + 1)) == {"fetched_bytes": H.MiB}
    H.wait_until(lambda: xstats(m.mnt)["downloads_in_flight"] == 0, 60, what="downloads done")
    st = xstats(m.mnt)
    assert st["cache_blocks"] >= before["cache_blocks"] + 4, (before, st)
    res = json.loads(os.getxattr(m.mnt, "user.colabfs.evict.to.0").decode().rstrip("\0"))
    assert res["freed_blocks"] == st["cache_blocks"], (res, st)
    assert xstats(m.mnt)["cache_blocks"] == 0
