"""The main mount: namespace, bytes, exports, read-only-ness, statfs.

All tests share one daemon (fixture ``mnt``) mounted on the main emulator
(plain HTTP, static token, 37-item pages with short/empty pages)."""

import errno
import json
import mmap
import os
import random
import re
import stat
import urllib.parse

import pytest

import helpers as H
from conftest import SESSION_TOKEN, SEED


@pytest.fixture(scope="module")
def exports(tree, emulator):
    """relpath -> expected export bytes, fetched from the emulator directly."""
    out = {}
    for rel, node in tree.model.walk():
        if node.kind == "export":
            out[rel] = emulator.export(node.content_id, node.export_mime)
    return out


def scan(root):
    """An ``ls -lR``: relpath -> (kind, size, ino) using lstat on every entry."""
    seen = {}

    def onerror(e):
        raise e
    for dirpath, dirnames, filenames in os.walk(root, onerror=onerror):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISDIR(st.st_mode):
                kind = "dir"
            elif stat.S_ISREG(st.st_mode):
                kind = "file"
            else:
                kind = "other:%o" % stat.S_IFMT(st.st_mode)
            seen[rel] = (kind, st.st_size, st.st_ino)
    return seen


def diff_report(want, got):
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    wrong = sorted(k for k in set(want) & set(got) if want[k] != got[k])
    lines = []
    if missing:
        lines.append("missing (%d): %r" % (len(missing), missing[:30]))
    if extra:
        lines.append("unexpected (%d): %r" % (len(extra), extra[:30]))
    for k in wrong[:30]:
        lines.append("%r: want %r, got %r" % (k, want[k], got[k]))
    return "\n".join(lines)


def expected_listing(model, export_sizes, folder_id=None):
    want = {}
    for rel, node in model.walk(folder_id):
        if node.kind == "dir":
            want[rel] = ("dir", None)
        elif node.kind == "export":
            want[rel] = ("file", export_sizes[rel])
        else:
            want[rel] = ("file", node.size)
    return want


def got_listing(seen, want):
    got = {}
    for rel, (kind, size, _) in seen.items():
        if kind == "dir":
            got[rel] = ("dir", None)
        elif rel in want and want[rel][0] == "file" and isinstance(want[rel][1], tuple):
            # exports: size may be 0 until the first open
            got[rel] = (kind, want[rel][1] if size in want[rel][1] else size)
        else:
            got[rel] = (kind, size)
    return got


def test_tree_walk_names_and_sizes(mnt, tree, exports):
    """ls -lR shows exactly the expected names, types and sizes."""
    sizes = {rel: (0, len(b)) for rel, b in exports.items()}
    want = expected_listing(tree.model, sizes)
    seen = scan(mnt.mnt)
    got = got_listing(seen, want)
    assert got == want, "mount listing differs from the spec:\n" + diff_report(want, got)


def test_expected_names_follow_the_rules(tree):
    """Sanity of the model itself (no mount): spot-check the documented rules."""
    m = tree.model
    dups = m.children(tree.ids["dups"])
    tag = H.id_tag
    b, c = sorted([tree.ids["dupB"], tree.ids["dupC"]])  # same createdTime: smallest id wins
    assert set(dups) == {
        "dup.txt", "dup (%s).txt" % tag(b), "dup (%s).txt" % tag(c),
        "Photos", "Photos (%s)" % tag(tree.ids["photosB"]),
        "noext", "noext (%s)" % tag(tree.ids["noextB"]),
        ".hidden", ".hidden (%s)" % tag(tree.ids["dotB"]),
        "archive.tar.gz", "archive.tar (%s).gz" % tag(tree.ids["tgzB"]),
    }
    assert dups["dup.txt"].drive_id == tree.ids["dupA"]
    assert set(m.children(tree.ids["weird"])) == {"a\uff0fb.txt", "x\uff0fy", "\uff0e",
                                                  "\uff0e\uff0e"}
    assert set(m.children(tree.ids["docs"])) == {"Meeting Notes.docx", "Budget 2024.xlsx",
                                                 "Slides.pptx", "Diagram.pdf"}
    assert set(m.children(tree.ids["links"])) == {"top-link.txt", "l2-link.bin", "level2-link"}
    # FNV-1a 64 reference values
    assert H.fnv1a64(b"") == 0xCBF29CE484222325
    assert H.fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert H.insert_tag("a.txt", "1f2e3d4c") == "a (1f2e3d4c).txt"


def test_hidden_names_do_not_resolve(mnt, tree):
    """Lookups (not just readdir) of hidden or raw Drive names fail with ENOENT."""
    hidden = ["trashed.txt", "TrashedFolder", "TrashedFolder/inner.txt",
              "docs/Survey", "docs/Survey.zip", "docs/My Site", "docs/Meeting Notes",
              "links/dangling-link", "links/trashed-link.txt",
              "loop/self-link", "loop/inner/up-link",
              "dups/dup (%s).txt" % H.id_tag(tree.ids["dupT"]),
              "weird/a/b.txt", "weird/x/y", "no-such-file", "level1/no-such-dir/x"]
    for rel in hidden:
        with pytest.raises(FileNotFoundError):
            os.stat(mnt.path(rel))


def test_types_and_inode_numbers(mnt, tree):
    """Shortcuts are plain files/dirs (no symlinks); distinct Drive items have
    distinct, stable inode numbers."""
    seen = scan(mnt.mnt)
    by_ino = {}
    shortcut_dirs = []
    for rel, node in tree.model.walk():
        assert rel in seen, "%r missing from the mount" % rel
        kind, _, ino = seen[rel]
        assert kind == ("dir" if node.kind == "dir" else "file"), rel
        if node.shortcut:
            shortcut_dirs.append(rel + "/")
            continue
        if any(rel.startswith(s) for s in shortcut_dirs):
            continue  # the same Drive items again, seen through a folder shortcut
        assert ino not in by_ino, "inode %d shared by %r and %r" % (ino, by_ino.get(ino), rel)
        by_ino[ino] = rel
    again = scan(mnt.mnt)
    for rel in seen:
        assert again[rel][2] == seen[rel][2], "inode of %r changed" % rel


def test_listing_250_entries_pages(mnt, tree, emulator):
    """A 250-entry folder listed over 37-item (short and empty) pages is complete."""
    want = sorted(tree.model.children(tree.ids["many"]))
    assert len(want) == 250
    assert sorted(os.listdir(mnt.path("many"))) == want
    assert sorted(os.listdir(mnt.path("many"))) == want  # and stays so
    # the emulator saw the paged listing of this folder
    log = emulator.log()
    mid = tree.ids["many"]
    lists = [e for e in log if e.get("kind") == "files.list"]

    def text(e):
        q = e.get("query") or ""
        q = q if isinstance(q, str) else json.dumps(q)
        return urllib.parse.unquote_plus(q) + urllib.parse.unquote_plus(e.get("path", ""))
    many_pages = [e for e in lists if mid in text(e)]
    assert len(many_pages) >= 7, \
        "expected >= 7 files.list pages for the 250-entry folder, saw %d" % len(many_pages)


def small_file_nodes(tree):
    return [(rel, n) for rel, n in tree.model.walk()
            if n.kind == "file" and n.size <= H.MiB]


def test_read_every_small_file(mnt, tree):
    """Every file up to 1 MiB (incl. unicode, duplicates, '/' names, shortcuts,
    deep nesting, the 250-entry folder) read whole equals its source."""
    nodes = small_file_nodes(tree)
    assert len(nodes) > 270
    for rel, node in nodes:
        H.compare_stream(mnt.path(rel), node, chunk=64 * H.KiB)


def test_zero_byte_files_make_no_media_request(mnt, tree, emulator):
    zero = [(rel, n) for rel, n in tree.model.walk() if n.kind == "file" and n.size == 0]
    assert len(zero) >= 6
    for rel, _ in zero:
        p = mnt.path(rel)
        assert os.stat(p).st_size == 0
        with open(p, "rb") as f:
            assert f.read() == b""
            assert os.pread(f.fileno(), 100, 0) == b""
            assert os.pread(f.fileno(), 10, 12345) == b""
    ids = {n.content_id for _, n in zero}
    bad = [e for e in emulator.log()
           if e.get("kind") == "media" and (e.get("id") in ids
                                            or any(i in e.get("path", "") for i in ids))]
    assert not bad, "media requests for 0-byte files: %r" % bad[:5]


def test_read_random64_whole(mnt, tree):
    node = tree.model.lookup("random64.bin")
    # odd chunk size: unaligned reads all the way
    H.compare_stream(mnt.path("random64.bin"), node, chunk=H.MiB + 13)


@pytest.mark.deadline(540)
def test_read_sparse5g_whole(mnt, tree):
    """The 5 GiB file read sequentially to EOF, every byte compared."""
    node = tree.model.lookup("sparse5g.bin")
    H.compare_stream(mnt.path("sparse5g.bin"), node, chunk=8 * H.MiB)


def pread_plan(rng, size, hot, n):
    """n (offset, length) pairs: uniform, around each ``hot`` offset, around
    EOF and past it, with awkward lengths."""
    lengths = [1, 2, 511, 4095, 4096, 4097, 65535, 131073, H.MiB - 1, H.MiB, H.MiB + 1,
               2 * H.MiB + 12345]
    plan = []
    for i in range(n):
        r = i % 5
        if r == 0:
            off = rng.randrange(0, size + 2 * H.MiB)
        elif r in (1, 2):
            h = rng.choice(hot)
            off = max(0, h + rng.randrange(-2 * H.MiB, 2 * H.MiB))
        elif r == 3:
            off = max(0, size + rng.randrange(-3 * H.MiB, H.MiB))
        else:
            h = rng.choice(hot)
            off = max(0, h + rng.randrange(-5000, 5000))
        plan.append((off, rng.choice(lengths)))
    return plan


def check_preads(mount_path, node, plan, what):
    fd = os.open(mount_path, os.O_RDONLY)
    try:
        for off, n in plan:
            got = H.pread_full(fd, n, off)
            want = node.read_source(off, n)
            H.assert_same_bytes(got, want, "%s pread(off=%d, len=%d)" % (what, off, n))
    finally:
        os.close(fd)


@pytest.mark.deadline(240)
def test_random_preads_sparse5g(mnt, tree):
    """300 random preads incl. across 2 GiB and 4 GiB, unaligned, past EOF."""
    node = tree.model.lookup("sparse5g.bin")
    size = node.size
    fixed = [(0, 1), (2 ** 31 - 1, 2), (2 ** 32 - 1, 2), (2 ** 32, 1), (2 ** 32 - 4096, 8192),
             (2 ** 32 - 1, H.MiB), (size - 1, 10), (size, 1), (size + 5, 10), (size - H.MiB, H.MiB),
             (2 ** 32 + 8191 + H.MiB - 1, 3)]
    hot = [2 ** 31, 2 ** 32, size] + [o for o, _ in tree.sparse_patches] + \
          [o + n for o, n in tree.sparse_patches]
    rng = random.Random(SEED + 1)
    plan = fixed + pread_plan(rng, size, hot, 300 - len(fixed))
    rng.shuffle(plan)
    check_preads(mnt.path("sparse5g.bin"), node, plan, "sparse5g.bin")


def test_random_preads_random64(mnt, tree):
    node = tree.model.lookup("random64.bin")
    rng = random.Random(SEED + 2)
    plan = pread_plan(rng, node.size, [0, 32 * H.MiB, 32 * H.MiB + 1], 100)
    check_preads(mnt.path("random64.bin"), node, plan, "random64.bin")


def test_mmap_reads(mnt, tree):
    node = tree.model.lookup("random64.bin")
    with open(mnt.path("random64.bin"), "rb") as f:
        with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
            assert len(mm) == node.size
            for off in range(0, node.size, 4 * H.MiB):
                H.assert_same_bytes(mm[off:off + 4 * H.MiB], node.read_source(off, 4 * H.MiB),
                                    "mmap random64.bin at %d" % off)
    big = tree.model.lookup("sparse5g.bin")
    page = mmap.ALLOCATIONGRANULARITY
    windows = [(2 ** 32 - 4 * H.MiB, 8 * H.MiB), (2 ** 31 - 2 * H.MiB, 4 * H.MiB)]
    end = (big.size - 3 * H.MiB) // page * page
    windows.append((end, big.size - end))
    with open(mnt.path("sparse5g.bin"), "rb") as f:
        for off, n in windows:
            with mmap.mmap(f.fileno(), n, prot=mmap.PROT_READ, offset=off) as mm:
                H.assert_same_bytes(mm[:], big.read_source(off, n),
                                    "mmap sparse5g.bin [%d, +%d)" % (off, n))


def test_native_exports(mnt, tree, exports):
    """Docs/Sheets/Slides/Drawings read (open + read to EOF) equal the emulator's
    export; afterwards stat shows the real size."""
    assert len(exports) == 4
    for rel, want in exports.items():
        p = mnt.path(rel)
        with open(p, "rb") as f:
            got = b""
            while True:
                b = f.read(65536)
                if not b:
                    break
                got += b
        H.assert_same_bytes(got, want, rel)
        assert os.stat(p).st_size == len(want), "%s: stat size after read" % rel
        # a second open and a pread in the middle agree too
        with open(p, "rb") as f:
            H.assert_same_bytes(f.read(), want, rel + " (2nd read)")
            mid = len(want) // 2
            H.assert_same_bytes(H.pread_full(f.fileno(), 1000, mid), want[mid:mid + 1000],
                                rel + " pread")


def erofs_ops(mnt):
    f = mnt.path("top.txt")
    d = mnt.path("level1")
    new = mnt.path("level1/new-file")
    fd_ops = {
        "open O_WRONLY": lambda: os.open(f, os.O_WRONLY),
        "open O_RDWR": lambda: os.open(f, os.O_RDWR),
        "open O_APPEND": lambda: os.open(f, os.O_WRONLY | os.O_APPEND),
        "open O_TRUNC": lambda: os.open(f, os.O_RDONLY | os.O_TRUNC),
        "create": lambda: os.open(new, os.O_WRONLY | os.O_CREAT, 0o644),
        "create O_EXCL": lambda: os.open(new, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644),
    }
    ops = {
        "mkdir": lambda: os.mkdir(mnt.path("level1/new-dir")),
        "rmdir": lambda: os.rmdir(mnt.path("level1/emptydir")),
        "unlink": lambda: os.unlink(f),
        "rename": lambda: os.rename(f, mnt.path("renamed.txt")),
        "rename dir": lambda: os.rename(mnt.path("level1/emptydir"), mnt.path("level1/moved")),
        "symlink": lambda: os.symlink("top.txt", mnt.path("a-symlink")),
        "link": lambda: os.link(f, mnt.path("a-hardlink")),
        "mkfifo": lambda: os.mkfifo(mnt.path("a-fifo")),
        "truncate": lambda: os.truncate(f, 0),
        "chmod": lambda: os.chmod(f, 0o600),
        "chown": lambda: os.chown(f, 1, 1),
        "utime": lambda: os.utime(f, (1, 1)),
    }
    return fd_ops, ops


def test_writes_fail_with_erofs(mnt, tree):
    fd_ops, ops = erofs_ops(mnt)
    wrong = []
    for name, op in list(fd_ops.items()) + list(ops.items()):
        try:
            r = op()
        except OSError as e:
            if e.errno != errno.EROFS:
                wrong.append("%s: %s" % (name, errno.errorcode.get(e.errno, e.errno)))
        else:
            if name in fd_ops:
                os.close(r)
            wrong.append("%s: succeeded" % name)
    for name, op in [("setxattr", lambda: os.setxattr(mnt.path("top.txt"), "user.e2e", b"x")),
                     ("removexattr", lambda: os.removexattr(mnt.path("top.txt"), "user.e2e"))]:
        try:
            op()
            wrong.append("%s: succeeded" % name)
        except OSError as e:
            if e.errno not in (errno.EROFS, errno.EOPNOTSUPP):
                wrong.append("%s: %s" % (name, errno.errorcode.get(e.errno, e.errno)))
    assert not wrong, "write attempts that did not fail with EROFS: %s" % wrong
    # nothing changed
    for rel in ["level1/new-file", "level1/new-dir", "renamed.txt", "level1/moved",
                "a-symlink", "a-hardlink", "a-fifo"]:
        assert not os.path.lexists(mnt.path(rel)), rel
    assert os.path.isdir(mnt.path("level1/emptydir"))
    H.compare_stream(mnt.path("top.txt"), tree.model.lookup("top.txt"))


def test_statvfs(mnt):
    for rel in ["", "level1", "top.txt"]:
        s = os.statvfs(mnt.path(rel))
        assert s.f_bsize > 0 and s.f_frsize > 0, s
        assert s.f_namemax >= 255, s
        assert s.f_blocks >= s.f_bfree >= 0 and s.f_bavail >= 0, s


def test_pid_xattr(mnt):
    pid = mnt.xattr_pid()
    assert pid > 0
    assert H.is_colabfs_exe(pid), H.proc_exe(pid)
    argv = H.proc_cmdline(pid)
    assert os.fsencode(mnt.mnt) in argv or any(a.endswith(b"=" + os.fsencode(mnt.mnt))
                                               for a in argv), argv


def test_token_not_in_log_or_argv(mnt, tree):
    """(after the reads above) the debug log exists and carries no token; argv neither."""
    # make sure something was logged at debug level in this daemon's life
    H.compare_stream(mnt.path("level1/l1.txt"), tree.model.lookup("level1/l1.txt"))
    assert os.path.exists(mnt.log_file) and os.path.getsize(mnt.log_file) > 0, \
        "--log-file at --log-level=debug is empty"
    data = open(mnt.log_file, "rb").read()
    assert SESSION_TOKEN.encode() not in data, "access token written to the log"
    m = re.search(rb"Bearer\s+[A-Za-z0-9._~+/-]{6,}", data)
    assert m is None, "a bearer token in the log: %r" % m.group(0)[:20]
    pid = mnt.xattr_pid()
    cmdline = open("/proc/%d/cmdline" % pid, "rb").read()
    assert SESSION_TOKEN.encode() not in cmdline


def test_stderr_is_the_log(mnt):
    """A daemon's stderr is its log file, not /dev/null: what a library writes there (libfuse's
    messages, the C library's reason for an abort) is kept."""
    pid = mnt.xattr_pid()
    assert os.readlink("/proc/%d/fd/2" % pid) == os.path.realpath(mnt.log_file), \
        os.readlink("/proc/%d/fd/2" % pid)
    assert os.readlink("/proc/%d/fd/1" % pid) == "/dev/null"
