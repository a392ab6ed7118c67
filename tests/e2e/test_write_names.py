"""Names on the writable mount (issue 22): what Drive cannot take is refused at create.

A name that is not UTF-8 used to be accepted by create, mkdir and rename, shown in the folder, then
refused when it reached Drive (JSON carries UTF-8 only: the metadata could not even be written, and
Drive answers 400 parseError to raw bytes that are not UTF-8), and the upload was tried again for
ever.  Now create, mkdir and rename refuse it at once with EILSEQ, and a name over 255 bytes with
ENAMETOOLONG; a long name in UTF-8 (multibyte characters, up to 255 bytes) goes to Drive unchanged
and comes back through a fresh mount.  A conflict copy of a file whose name is at the limit gets a
name within it, its extension kept.
"""

import errno
import hashlib
import json
import os

import pytest

import helpers as H
from conftest import SESSION_TOKEN
from test_write import at_path, content, emu_get, write_synced

FOLDER = "application/vnd.google-apps.folder"
AT_LIMIT = "c" * 251 + ".bin"  # 255 bytes


@pytest.fixture
def nemu(emulator_factory, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"items": [
        {"name": "keep.txt", "content": "kept"},
        {"name": "dir", "mimeType": FOLDER},
        {"name": AT_LIMIT, "content": "at the limit"},
    ]}))
    return emulator_factory(spec, "emu-names", access_token=SESSION_TOKEN, seed=22)


def wmount(mount_factory, emu, name="w", extra=()):
    return mount_factory.new(emu, extra=["--write-back-delay=0"] + list(extra), name=name)


def bpath(m, name):
    """The path of name (bytes) in the mount's root, as bytes."""
    return os.fsencode(m.path()) + b"/" + name


def errno_of(fn, *args):
    try:
        fn(*args)
    except OSError as e:
        return e.errno
    return 0


def create(path):
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))


def sync(m):
    rc, out, err = H.run_cmd([H.colabfs_bin(), "sync", "--timeout", "30", m.path()], timeout=60)
    assert rc == 0, (rc, out, err)


NOT_UTF8 = [
    b"bad\xff.bin",          # a byte UTF-8 never has
    b"over\xc0\xaflong",     # '/' as an overlong two-byte sequence
    b"over\xe0\x80\xaflong",  # '/' as an overlong three-byte sequence
    b"sur\xed\xa0\x80gate",  # U+D800, a UTF-16 surrogate
    b"cut\xe2\x82",          # a sequence cut short (the start of U+20AC)
    b"stray\x80byte",        # a continuation byte with no start
    b"big\xf4\x90\x80\x80",  # past U+10FFFF
]


def test_names_drive_cannot_take_are_refused(mount_factory, nemu):
    m = wmount(mount_factory, nemu)
    before = sorted(os.listdir(m.path()))
    for name in NOT_UTF8:
        p = bpath(m, name)
        assert errno_of(create, p) == errno.EILSEQ, name
        assert errno_of(open, p, "wb") == errno.EILSEQ, name  # O_CREAT without O_EXCL
        assert errno_of(os.mkdir, p) == errno.EILSEQ, name
        assert errno_of(os.rename, bpath(m, b"keep.txt"), p) == errno.EILSEQ, name
        assert errno_of(os.rename, bpath(m, b"dir"), p) == errno.EILSEQ, name
        # into a folder too
        assert errno_of(create, bpath(m, b"dir/" + name)) == errno.EILSEQ, name
    # over 255 bytes: the kernel's NAME_MAX, the mount's f_namemax
    for name in (b"x" * 256, "é".encode() * 128, b"y" * 1000):
        p = bpath(m, name)
        assert errno_of(create, p) == errno.ENAMETOOLONG, len(name)
        assert errno_of(os.mkdir, p) == errno.ENAMETOOLONG, len(name)
        assert errno_of(os.rename, bpath(m, b"keep.txt"), p) == errno.ENAMETOOLONG, len(name)
    assert os.statvfs(m.path()).f_namemax == 255
    # nothing was created, here or in Drive, and nothing waits to be uploaded
    assert sorted(os.listdir(m.path())) == before
    assert os.listdir(m.path("dir")) == []
    sync(m)
    assert open(m.path("keep.txt"), "rb").read() == b"kept"
    assert len(at_path(nemu, "/keep.txt")) == 1 and at_path(nemu, "/dir")


def test_long_utf8_names_go_to_drive_and_come_back(mount_factory, nemu):
    m = wmount(mount_factory, nemu)
    files = {
        "é" * 80 + ".bin": os.urandom(100_000),     # 164 bytes, 2-byte characters
        "日本語" * 28 + ".pt": os.urandom(5000),     # 255 bytes, 3-byte characters
        "\U0001F600" * 62 + "ab.txt": b"emoji",     # 254 bytes, 4-byte characters
    }
    for name in files:
        assert len(name.encode()) <= 255, name
    for name, data in files.items():
        write_synced(m.path(name), data)
    folder = "ü" * 127  # 254 bytes
    os.mkdir(m.path(folder))
    too_long = "ß" * 125 + ".moved"  # 256 bytes
    assert errno_of(os.rename, m.path("keep.txt"), m.path(folder + "/" + too_long)) == errno.ENAMETOOLONG
    renamed = "ß" * 124 + ".moved"  # 254 bytes
    os.rename(m.path("keep.txt"), m.path(folder + "/" + renamed))
    sync(m)
    for name, data in files.items():
        items = at_path(nemu, "/" + name)
        assert len(items) == 1, (name, items)
        assert items[0]["name"] == name
        assert items[0]["md5Checksum"] == hashlib.md5(data).hexdigest()
        assert content(nemu, items[0]) == data
    moved = at_path(nemu, "/%s/%s" % (folder, renamed))
    assert len(moved) == 1 and content(nemu, moved[0]) == b"kept"
    # a fresh mount (its own, empty cache) reads them back from Drive
    m.umount()
    m2 = wmount(mount_factory, nemu, name="w2")
    got = set(os.listdir(m2.path()))
    assert set(files) | {folder, "dir", AT_LIMIT} == got, got
    for name, data in files.items():
        assert open(m2.path(name), "rb").read() == data, name
    assert os.listdir(m2.path(folder)) == [renamed]
    assert open(m2.path(folder + "/" + renamed), "rb").read() == b"kept"


def test_conflict_copy_of_a_name_at_the_limit_fits(mount_factory, nemu):
    m = wmount(mount_factory, nemu)
    f = open(m.path(AT_LIMIT), "r+b")
    item = at_path(nemu, "/" + AT_LIMIT)[0]
    theirs = b"theirs, from the web UI"
    st, _, body = nemu.request("PATCH", "/upload/drive/v3/files/%s?uploadType=media" % item["id"],
                               {"Authorization": "Bearer " + SESSION_TOKEN,
                                "Content-Type": "application/octet-stream"}, theirs)
    assert st == 200, body
    ours = b"ours " * 100
    f.write(ours)
    f.flush()
    os.fsync(f.fileno())
    f.close()
    log = open(m.log_file, errors="replace").read()
    name = log.split('uploaded beside it as "')[1].split('"')[0]
    assert len(name.encode()) <= 255, name
    assert name.startswith("c" * 100) and " (conflict " in name and name.endswith(").bin"), name
    copy = at_path(nemu, "/" + name)
    assert len(copy) == 1 and content(nemu, copy[0]).startswith(ours)
    # the mount shows it under the same name (not cut again by the listing rule)
    H.wait_until(lambda: name in os.listdir(m.path()), 30, what="the conflict copy listed")
    assert open(m.path(AT_LIMIT), "rb").read() == theirs
    assert emu_get(nemu, "/_emu/items/%s/content" % copy[0]["id"]).startswith(ours)
