"""Trust in the cache folder (issue 13, item 4), through `colabfs mount`.

A folder other users can write to (/tmp, a shared folder with a planted
symlink), one that is not empty and not a colabfs cache folder, or a symlink
is refused with a sentence saying why, and is left exactly as it was (mode,
sticky bit, every file and its target); a new folder is made 0700 and tagged
(CACHEDIR.TAG), and a cache folder of an earlier version is still used.
"""

import os
import stat

import pytest

import helpers as H
from conftest import SESSION_TOKEN


def refused(mount_factory, emulator, cache_dir, want):
    m = mount_factory.new(emulator, start=False, extra=["--cache-dir=" + str(cache_dir)])
    rc, out, err = m.start(check=False)
    assert rc not in (None, 0), "colabfs mount accepted %s: %r %r" % (cache_dir, out, err)
    assert want in err, err
    assert not H.is_fuse_mounted(m.mnt)
    return err


def test_shared_folder_with_planted_symlink_is_refused(mount_factory, emulator, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    for name in ("index.mdb", "colabfs.log", "arena-1m.dat", "store.lock"):
        os.symlink(victim, shared / name)
    err = refused(mount_factory, emulator, shared, "can be written by other users (mode 777)")
    assert "give a folder only you can write" in err
    assert victim.read_bytes() == b"precious\n"
    assert stat.S_IMODE(os.lstat(shared).st_mode) == 0o1777, "the folder's mode was changed"
    assert sorted(os.listdir(shared)) == ["arena-1m.dat", "colabfs.log", "index.mdb",
                                          "store.lock"]


def test_tmp_itself_is_refused_and_keeps_its_sticky_bit(mount_factory, emulator):
    before = os.lstat("/tmp").st_mode
    refused(mount_factory, emulator, "/tmp", "can be written by other users")
    assert os.lstat("/tmp").st_mode == before


def test_folder_with_other_files_is_refused(mount_factory, emulator, tmp_path):
    d = tmp_path / "work"
    d.mkdir(mode=0o700)
    (d / "notes.txt").write_text("mine")
    refused(mount_factory, emulator, d,
            "is not empty and not a colabfs cache folder (it has no CACHEDIR.TAG of colabfs)")
    assert os.listdir(d) == ["notes.txt"]


def test_symlink_and_foreign_folder_are_refused(mount_factory, emulator, tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    os.symlink(real, link)
    refused(mount_factory, emulator, link, "is a symbolic link")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    refused(mount_factory, emulator, theirs, "belongs to uid 65534, not to you")


def test_new_folder_is_private_and_tagged_and_reused(mount_factory, emulator, tmp_path):
    d = tmp_path / "new" / "cache"
    m = mount_factory.new(emulator, extra=["--cache-dir=" + str(d)])
    assert stat.S_IMODE(os.lstat(d).st_mode) == 0o700
    tag = (d / "CACHEDIR.TAG").read_text()
    assert tag.startswith("Signature: 8a477f597d28d172789f06886806bc55\n"), tag
    assert os.listdir(m.mnt)
    m.umount()
    # the folder now holds the cache: a remount uses it
    os.chmod(d, 0o750)
    m.start()
    assert stat.S_IMODE(os.lstat(d).st_mode) == 0o750, "an existing folder is never chmodded"
    assert os.listdir(m.mnt)
