"""Helpers for the block-cache end-to-end tests (tests/e2e/test_cache.py).

Plain stdlib.  Run as a script (``python3 cache_helpers.py read-compare JOBFILE``)
it is the worker process of the concurrent-readers test: it waits for one line
on stdin (the start signal), reads the mount file in the job's chunk order and
compares every chunk with the same bytes of the source file; it prints a JSON
object {"chunks": n, "bytes": n, "bad": [...]} and exits 0, or 1 after an error.
"""

import errno
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from helpers import first_diff, pread_full  # noqa: E402  (one copy for every e2e module)

KiB = 1024
MiB = 1024 * KiB






def diff_text(got, want, what):
    i = first_diff(got, want)
    return ("%s: bytes differ: got %d bytes, want %d; first difference at +%d (got %r, want %r)"
            % (what, len(got), len(want), i, bytes(got[i:i + 16]), bytes(want[i:i + 16])))


def assert_same(got, want, what):
    if got != want:
        raise AssertionError(diff_text(got, want, what))


def read_whole(path, chunk=4 * MiB):
    """All bytes of ``path`` read to EOF with plain read() calls (like cat)."""
    parts = []
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            parts.append(b)
    return b"".join(parts)


def drop_page_cache(path):
    """Ask the kernel to drop its cached pages of ``path`` (clean pages only;
    a read-only FUSE file has no others), so the next read reaches the daemon."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


PROM_TYPE = re.compile(r"^# TYPE (colabfs_[a-z0-9_]+) (counter|gauge)$")
PROM_SAMPLE = re.compile(r"^(colabfs_[a-z0-9_]+) (-?[0-9]+)$")


def parse_prometheus(text):
    """{name: (type, value)} from the text exposition colabfs prints; raises
    AssertionError on any line that is not a TYPE line followed by its sample."""
    out = {}
    lines = text.splitlines()
    assert lines, "empty --prometheus output"
    i = 0
    while i < len(lines):
        m = PROM_TYPE.match(lines[i])
        assert m, "line %d is not a '# TYPE colabfs_x counter|gauge' line: %r" % (i + 1, lines[i])
        assert i + 1 < len(lines), "TYPE line %r has no sample after it" % lines[i]
        s = PROM_SAMPLE.match(lines[i + 1])
        assert s, "line %d is not a 'colabfs_x N' sample: %r" % (i + 2, lines[i + 1])
        assert s.group(1) == m.group(1), "sample %r follows TYPE of %r" % (s.group(1), m.group(1))
        assert m.group(1) not in out, "%s appears twice" % m.group(1)
        out[m.group(1)] = (m.group(2), int(s.group(2)))
        i += 2
    return out


EVICT_LINE = re.compile(r"^(.*): freed ([0-9]+\.[0-9]) MiB \(([0-9]+) blocks\)$")


def parse_evict(text):
    """[(path, freed MiB as float, blocks)] from ``colabfs evict`` output."""
    out = []
    for line in text.splitlines():
        m = EVICT_LINE.match(line)
        assert m, "unexpected colabfs evict output line: %r (all: %r)" % (line, text)
        out.append((m.group(1), float(m.group(2)), int(m.group(3))))
    return out


def data_regions(path):
    """[(start, end)] of the non-hole regions of a (sparse) file."""
    out = []
    size = os.stat(path).st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        off = 0
        while off < size:
            try:
                start = os.lseek(fd, off, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:
                    break
                raise
            end = os.lseek(fd, start, os.SEEK_HOLE)
            out.append((start, end))
            off = end
    finally:
        os.close(fd)
    return out


# --------------------------------------------------------------------------
# worker process


def _worker(jobfile):
    job = json.loads(open(jobfile).read())
    path, source, chunk, order = job["path"], job["source"], job["chunk"], job["order"]
    sys.stdin.readline()
    bad, nbytes = [], 0
    fd = os.open(path, os.O_RDONLY)
    sfd = os.open(source, os.O_RDONLY)
    try:
        for k in order:
            off = k * chunk
            got = pread_full(fd, chunk, off)
            want = pread_full(sfd, chunk, off)
            nbytes += len(got)
            if got != want:
                bad.append(diff_text(got, want, "%s chunk %d" % (path, k)))
    finally:
        os.close(fd)
        os.close(sfd)
    print(json.dumps({"chunks": len(order), "bytes": nbytes, "bad": bad[:5], "nbad": len(bad)}))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "read-compare":
        try:
            _worker(sys.argv[2])
        except OSError as e:
            print(json.dumps({"error": "%s: %s" % (errno.errorcode.get(e.errno, e.errno), e)}))
            sys.exit(1)
    else:
        sys.exit("usage: cache_helpers.py read-compare JOBFILE")
