"""A seeded file exerciser in the spirit of xfstests' fsx: one file in a mount and a shadow copy on
a local disk get the same random operations, and after each one the whole file (size and bytes)
must be the same in both.

The operations: pwrite at random offsets and lengths (holes, extensions), ftruncate (shrink and
extend), writes through a MAP_SHARED mapping (inside the file, into a part just extended, and
through a mapping made before a truncate cut the file and an extension brought it back), msync
(half of the mapped writes), fsync, close, open (with and without O_TRUNC), `colabfs sync` of the
closed file, and a SIGKILL of the mount's server (when the caller gives a way to do it).  What an
operation may be depends on the shadow's state (open or closed, its size); its arguments and the
bytes written come from ``random.Random(seed)`` alone, so a seed replays the same sequence.

``Exerciser(mnt_path, shadow_path, seed, sync=..., kill=...).run(nops)`` returns the log of what it
did, one line per operation; a difference raises ``Mismatch`` (an AssertionError) whose message
names the seed, the step and the first difference, and whose ``log`` is the operation log so far.
"""

import mmap
import os
import random

from helpers import first_diff

KiB = 1024
MAX_SIZE = 1200 * KiB  # past the mount's 1 MiB cache block
RW_MAP = dict(flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)

# weights of the operations, by state
CLOSED = [("open", 7), ("open_trunc", 2), ("sync", 2), ("kill", 1)]
OPEN = [("pwrite", 24), ("truncate", 10), ("mmap_write", 12), ("mmap_extend", 5),
        ("mmap_past_truncate", 4), ("fsync", 7), ("close", 10), ("kill", 1)]


class Mismatch(AssertionError):
    def __init__(self, msg, log):
        super().__init__(msg)
        self.log = log


def read_all(fd):
    parts, off = [], 0
    while True:
        b = os.pread(fd, 1 << 20, off)
        if not b:
            return b"".join(parts)
        parts.append(b)
        off += len(b)


def describe_diff(got, want, names=("mount", "shadow")):
    i = first_diff(got, want)
    j = i
    while j < min(len(got), len(want)) and got[j] != want[j]:
        j += 1
    zeros = " (the %s has zeros there)" % names[0] if j > i and not any(got[i:j]) else ""
    return ("%s %d bytes, %s %d; first difference at %d, %d bytes long%s"
            % (names[0], len(got), names[1], len(want), i, j - i, zeros))


class Exerciser:
    """``sync(path)`` and ``kill()`` are the caller's: `colabfs sync` of the file, a server kill
    (None: never picked)."""

    def __init__(self, mnt_path, shadow_path, seed, sync=None, kill=None):
        self.paths = (mnt_path, shadow_path)
        self.seed = seed
        self.rng = random.Random(seed)
        self.fds = None
        self.sync = sync
        self.kill = kill
        self.log = []

    # ---- the state the choices depend on (the shadow's)

    def size(self):
        return os.stat(self.paths[1]).st_size if os.path.exists(self.paths[1]) else 0

    def pick(self):
        if not os.path.exists(self.paths[1]):
            return self.rng.choice(["open", "open_trunc"])
        table = OPEN if self.fds else CLOSED
        table = [(n, w) for n, w in table if (n != "kill" or self.kill) and (n != "sync" or self.sync)]
        size = self.size()
        if size == 0:
            table = [(n, w) for n, w in table if n not in ("mmap_write", "mmap_past_truncate")]
        if size >= MAX_SIZE:
            table = [(n, w) for n, w in table if n != "mmap_extend"]
        names = [n for n, _ in table]
        return self.rng.choices(names, weights=[w for _, w in table])[0]

    def args(self, op, size):
        r = self.rng
        if op == "pwrite":
            off = r.randrange(0, min(MAX_SIZE, size + 64 * KiB))
            n = r.randrange(1, 256 * KiB if r.random() < 0.1 else 64 * KiB)
            return dict(off=off, n=min(n, MAX_SIZE - off))
        if op == "truncate":
            return dict(to=r.randrange(0, size + 1) if r.random() < 0.5 or size >= MAX_SIZE
                        else r.randrange(size, MAX_SIZE + 1))
        if op == "mmap_write":
            off = r.randrange(0, size)
            return dict(off=off, n=r.randrange(1, min(64 * KiB, size - off) + 1), msync=r.random() < 0.5)
        if op == "mmap_extend":
            to = r.randrange(size + 1, min(MAX_SIZE, size + 256 * KiB) + 1)
            off = r.randrange(max(0, size - 4 * KiB), to)
            return dict(to=to, off=off, n=r.randrange(1, min(64 * KiB, to - off) + 1), msync=r.random() < 0.5)
        if op == "mmap_past_truncate":
            cut = r.randrange(0, size)
            off = r.randrange(cut, size)
            return dict(cut=cut, off=off, n=r.randrange(1, min(64 * KiB, size - off) + 1),
                        msync=r.random() < 0.5)
        return {}

    # ---- doing one operation to one file

    @staticmethod
    def apply(fd, op, a, data):
        if op == "pwrite":
            assert os.pwrite(fd, data, a["off"]) == len(data)
        elif op == "truncate":
            os.ftruncate(fd, a["to"])
        elif op in ("mmap_write", "mmap_extend"):
            if op == "mmap_extend":
                os.ftruncate(fd, a["to"])
            with mmap.mmap(fd, os.fstat(fd).st_size, **RW_MAP) as m:
                m[a["off"]:a["off"] + len(data)] = data
                if a["msync"]:
                    m.flush()
        elif op == "mmap_past_truncate":
            size = os.fstat(fd).st_size
            with mmap.mmap(fd, size, **RW_MAP) as m:
                m[a["off"]]  # the page is mapped before the cut
                os.ftruncate(fd, a["cut"])
                os.ftruncate(fd, size)
                m[a["off"]:a["off"] + len(data)] = data
                if a["msync"]:
                    m.flush()
        elif op == "fsync":
            os.fsync(fd)
        else:
            raise AssertionError("unknown op " + op)

    def step(self, i):
        size = self.size()
        op = self.pick()
        a = self.args(op, size)
        data = self.rng.randbytes(a["n"]) if "n" in a else b""
        self.log.append("%4d %s %s" % (i, op, " ".join("%s=%s" % kv for kv in a.items())))
        if op in ("open", "open_trunc"):
            flags = os.O_RDWR | os.O_CREAT | (os.O_TRUNC if op == "open_trunc" else 0)
            self.fds = [os.open(p, flags, 0o644) for p in self.paths]
        elif op == "close":
            self.close()
        elif op == "sync":
            self.sync(self.paths[0])
        elif op == "kill":
            self.kill()
        else:
            for fd in self.fds:
                self.apply(fd, op, a, data)
        self.check(i, op)

    def close(self):
        fds, self.fds = self.fds, None
        for fd in fds or ():
            os.close(fd)

    # ---- the comparison

    def contents(self):
        """(mount bytes, mount st_size, shadow bytes) through the open descriptors, or fresh
        read-only ones when closed."""
        if self.fds:
            got, want = read_all(self.fds[0]), read_all(self.fds[1])
            return got, os.fstat(self.fds[0]).st_size, want
        if not os.path.exists(self.paths[1]):
            return (b"", 0, b"") if not os.path.exists(self.paths[0]) else (b"exists", -1, b"")
        out = []
        for p in self.paths:
            fd = os.open(p, os.O_RDONLY)
            try:
                out.append((read_all(fd), os.fstat(fd).st_size))
            finally:
                os.close(fd)
        return out[0][0], out[0][1], out[1][0]

    def check(self, i, op):
        got, st_size, want = self.contents()
        if got == want and st_size == len(want):
            return
        what = describe_diff(got, want) if got != want else "the bytes agree"
        raise Mismatch("seed %d, step %d (%s, file %s): %s; the mount's st_size %d, the shadow's %d"
                       % (self.seed, i, op, "open" if self.fds else "closed", what, st_size, len(want)),
                       self.log)

    def run(self, nops):
        try:
            for i in range(nops):
                self.step(i)
        except Mismatch:
            raise
        except Exception as e:  # an error from the mount: the seed and the log say where
            raise Mismatch("seed %d, step %d (%s): %r" % (self.seed, len(self.log) - 1,
                                                          self.log[-1].split()[1] if self.log else "-", e),
                           self.log) from e
        finally:
            self.close()
        return self.log
