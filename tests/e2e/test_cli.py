"""The command line: --help/--version, bad options, umount, -f, --root."""

import os
import re
import subprocess
import time

import pytest

import helpers as H


def test_version(colabfs):
    rc, out, err = H.run_cmd([colabfs, "--version"], 20)
    assert rc == 0, (rc, out, err)
    assert re.fullmatch(r"colabfs \d+\.\d+\.\d+", out.strip().splitlines()[0]), out


def test_help_lists_options(colabfs):
    rc, out, err = H.run_cmd([colabfs, "--help"], 20)
    assert rc == 0, (rc, out, err)
    text = out + err
    missing = [o for o in ["mount", "umount", "--root", "--api-url", "--token-url", "--ca-file",
                           "--credentials", "--cache-dir", "--log-file", "--log-level", "-o", "-f"]
               if o not in text]
    assert not missing, "--help does not mention %s:\n%s" % (missing, text)


@pytest.mark.parametrize("args,mention", [
    (["--no-such-option"], ["no-such-option"]),
    (["--log-level=loud"], ["loud", "log-level"]),
    (["-o", "no_such_fuse_opt"], ["no_such_fuse_opt"]),
], ids=["unknown-option", "bad-log-level", "bad-fuse-option"])
def test_bad_mount_option_fails_clearly(mount_factory, emulator, args, mention):
    """A reachable emulator and a valid token: only the option is wrong."""
    m = mount_factory.new(emulator, name="badopt", extra=args, start=False)
    rc, out, err = m.start(timeout=30, check=False)
    assert rc is not None, "colabfs mount %s hung; stderr: %s" % (args, err[-1500:])
    assert rc != 0, "colabfs mount %s succeeded" % args
    assert any(w.lower() in (out + err).lower() for w in mention), \
        "error output names none of %r: stdout=%r stderr=%r" % (mention, out, err)
    assert not H.is_fuse_mounted(m.mnt)
    assert not H.pids_for_mountpoint(m.mnt), "a process was left behind"


def test_mount_usage_errors(colabfs, tmp_path):
    cases = [
        ([colabfs, "mount"], "no mountpoint"),
        ([colabfs, "mount", str(tmp_path / "does-not-exist")], "missing mountpoint dir"),
        ([colabfs, "frobnicate"], "unknown command"),
    ]
    for argv, what in cases:
        rc, out, err = H.run_cmd(argv, 30, env=H.clean_env(home=tmp_path))
        assert rc is not None, "%s: hung" % what
        assert rc != 0, "%s: exit 0" % what
        assert (out + err).strip(), "%s: no message" % what
    assert not H.is_fuse_mounted(str(tmp_path / "does-not-exist"))


def test_umount_leaves_nothing_behind(mount_factory, emulator, tree):
    m = mount_factory.new(emulator, name="umount")
    H.compare_stream(m.path("level1/level2/l2.bin"), tree.model.lookup("level1/level2/l2.bin"))
    pid = m.xattr_pid()
    assert H.is_colabfs_exe(pid)
    assert pid in H.pids_for_mountpoint(m.mnt)
    rc, out, err = m.umount(timeout=60)
    assert rc == 0, "colabfs umount rc=%r: %s %s" % (rc, out, err)
    # umount waits for the daemon: everything must be gone right now
    assert not H.is_fuse_mounted(m.mnt), "still mounted after colabfs umount"
    assert H.pid_gone(pid), "daemon pid %d still running after colabfs umount" % pid
    assert not H.pids_for_mountpoint(m.mnt)
    assert os.listdir(m.mnt) == []


def test_foreground_mode(mount_factory, emulator, tree, colabfs):
    m = mount_factory.new(emulator, name="fg", foreground=True)
    H.compare_stream(m.path("top.txt"), tree.model.lookup("top.txt"))
    assert m.xattr_pid() == m.fg_proc.pid or m.xattr_pid() in H.pids_for_mountpoint(m.mnt)
    # run umount in the background and reap the foreground daemon meanwhile (as a
    # shell would): a umount that waits for the pid must not see our zombie
    um = H.register_proc(subprocess.Popen([colabfs, "umount", m.mnt], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          env=m.env))
    try:
        try:
            code = m.fg_proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("colabfs -f did not exit within 30s of colabfs umount")
        try:
            out, _ = um.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("colabfs umount did not return within 30s after the daemon exited")
    finally:
        H.reap_proc(um)
    assert um.returncode == 0, "colabfs umount rc=%s: %s" % (um.returncode, out)
    assert code == 0, "colabfs -f exited %s after umount" % code
    assert not H.is_fuse_mounted(m.mnt)


def test_root_option(mount_factory, emulator, tree):
    """--root=ID mounts that folder: the walk equals the model of the subtree."""
    m = mount_factory.new(emulator, name="root", extra=["--root=" + tree.ids["level1"]])
    _walk_equals_subtree(m, tree, "level1")


def _walk_equals_subtree(m, tree, fid):
    want = {rel: ("dir" if n.kind == "dir" else "file", None if n.kind == "dir" else n.size)
            for rel, n in tree.model.walk(tree.ids[fid])}
    got = {}
    for dirpath, dirnames, filenames in os.walk(m.mnt):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, m.mnt)
            got[rel] = ("dir", None) if os.path.isdir(p) else ("file", os.stat(p).st_size)
    assert got == want
    for rel, n in tree.model.walk(tree.ids[fid]):
        if n.kind == "file":
            H.compare_stream(m.path(rel), n)


def test_root_path_option(mount_factory, emulator, tree):
    """--root=/PATH mounts the folder at that path of My Drive (a shortcut to a
    folder on the way counts as that folder; names are matched exactly,
    unicode included); a path with no such folder (a missing name, a file, a
    trashed folder) or with two folders of one name fails the mount at once
    with the reason, and "." or ".." is refused before anything starts."""
    u5 = "/unicode/\u00dcn\u00efc\u00f8d\u00e9 folder"
    for i, (path, fid) in enumerate((("/level1/level2", "level2"),
                                     ("//links/level2-link/", "level2"), (u5, "u5"))):
        t0 = time.monotonic()  # the log keeps the last 10,000 records: taken by time, not by index
        m = mount_factory.new(emulator, name="rootpath%d" % i, extra=["--root=" + path])
        # each folder on the way: one listing of its children of that name only
        names = [seg for seg in path.split("/") if seg]
        asked = [r["query"].get("q", "") for r in emulator.log()
                 if r["kind"] == "files.list" and r["mono"] >= t0 - 0.01]
        named = list(dict.fromkeys(q for q in asked if " and name = " in q))  # a page each
        assert [q.rsplit(" and name = ", 1)[1] for q in named] == ["'%s'" % n for n in names], asked
        assert named[0].startswith("'%s' in parents and trashed = false" % tree.model.root_id), named
        _walk_equals_subtree(m, tree, fid)
    for i, (path, reason) in enumerate((
            ("/level1/nope", "My Drive has no folder at that path"),
            ("/LEVEL1/level2", "My Drive has no folder at that path"),  # Drive's "name =" ignores case
            ("/level1/l1.txt", "My Drive has no folder at that path"),
            ("/TrashedFolder", "My Drive has no folder at that path"),
            ("/dups/Photos", "two or more folders on that path have the same name"))):
        m = mount_factory.new(emulator, name="rootbad%d" % i, extra=["--root=" + path],
                              start=False)
        rc, out, err = m.start(check=False)
        assert rc not in (0, None), "--root=%s mounted" % path
        assert ("cannot open the Drive folder " + path) in out + err and reason in out + err, \
            out + err
        assert not H.is_fuse_mounted(m.mnt)
    m = mount_factory.new(emulator, name="rootdots", extra=["--root=/level1/../level1"],
                          start=False)
    rc, out, err = m.start(check=False)
    assert rc == 2 and '"." and ".." are not folder names' in out + err, (rc, out + err)


def test_sync_outside_a_mount(colabfs, tmp_path):
    """colabfs sync on a path in no colabfs mount (given, or the current folder)
    exits 2 at once and says so; usage errors exit 2 too.  (Against a live mount
    it needs the daemon's side of user.colabfs.sync, tested with the write path.)"""
    env = H.clean_env(home=tmp_path)
    cases = [
        ([colabfs, "sync", str(tmp_path)], None, str(tmp_path) + " is not in a colabfs mount"),
        ([colabfs, "sync", "--quiet", "--timeout", "5", str(tmp_path)], None,
         "is not in a colabfs mount"),
        ([colabfs, "sync"], str(tmp_path), "the current folder) is not in a colabfs mount"),
        ([colabfs, "sync", str(tmp_path / "nope")], None, "No such file or directory"),
        ([colabfs, "sync", "--timeout", "soon", str(tmp_path)], None, "--timeout wants seconds"),
        ([colabfs, "sync", "--frobnicate"], None, "unknown option --frobnicate"),
    ]
    for argv, cwd, want in cases:
        rc, out, err = H.run_cmd(argv, 20, env=env, cwd=cwd)
        assert rc == 2, (argv, rc, out, err)
        assert want in err, (argv, err)
        assert out == "", (argv, out)
    rc, out, err = H.run_cmd([colabfs, "--help"], 20, env=env)
    assert "colabfs sync [--timeout SECONDS] [--quiet] [--json] [PATH...]" in out, out
