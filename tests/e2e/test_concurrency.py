"""Many readers at once, on a fresh mount (cold cache) each, so concurrent
misses on the same blocks and on different files really reach the daemon."""

import hashlib
import json
import os
import random
import subprocess
import threading

import pytest

import helpers as H
from conftest import SEED


def mixed_ranges(tree, rng, n):
    """(relpath, off, len) over the big files (biased to the non-zero patches
    and the 4 GiB boundary) and some small files."""
    big = tree.model.lookup("sparse5g.bin")
    small = [rel for rel, nd in tree.model.walk() if nd.kind == "file" and 0 < nd.size <= H.MiB]
    hot = [o for o, _ in tree.sparse_patches] + [2 ** 32]
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.35:
            out.append(("random64.bin", rng.randrange(0, 64 * H.MiB), rng.choice([4097, 65536, H.MiB + 3])))
        elif r < 0.7:
            off = max(0, rng.choice(hot) + rng.randrange(-H.MiB, 2 * H.MiB))
            out.append(("sparse5g.bin", off, rng.choice([1, 4096, 300000, H.MiB])))
        elif r < 0.8:
            out.append(("sparse5g.bin", big.size - rng.randrange(0, 3 * H.MiB), H.MiB))
        else:
            rel = rng.choice(small)
            out.append((rel, 0, H.MiB))
    return out


@pytest.mark.deadline(240)
def test_concurrent_threads(mount_factory, emulator, tree):
    m = mount_factory.new(emulator, name="threads")
    nthreads = 8
    barrier = threading.Barrier(nthreads, timeout=60)
    errors = []
    shared_fd = os.open(m.path("random64.bin"), os.O_RDONLY)
    r64 = tree.model.lookup("random64.bin")

    def worker(i):
        try:
            rng = random.Random(SEED + 100 + i)
            barrier.wait()
            # phase 1: everyone reads the same 16 MiB at once (shared and own fds)
            fd = shared_fd if i % 2 else os.open(m.path("random64.bin"), os.O_RDONLY)
            for off in range(0, 16 * H.MiB, H.MiB):
                H.assert_same_bytes(H.pread_full(fd, H.MiB, off), r64.read_source(off, H.MiB),
                                    "thread %d random64 @%d" % (i, off))
            if fd != shared_fd:
                os.close(fd)
            # phase 2: different files and ranges
            fds = {}
            for rel, off, n in mixed_ranges(tree, rng, 40):
                if rel not in fds:
                    fds[rel] = os.open(m.path(rel), os.O_RDONLY)
                H.assert_same_bytes(H.pread_full(fds[rel], n, off),
                                    tree.model.lookup(rel).read_source(off, n),
                                    "thread %d %s pread(%d, %d)" % (i, rel, off, n))
            for fd in fds.values():
                os.close(fd)
        except BaseException as e:  # noqa: B902 - reported below
            errors.append("thread %d: %s" % (i, e))
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(nthreads)]
    try:
        for t in threads:
            t.start()
        H.wait_until(lambda: not any(t.is_alive() for t in threads), 200,
                     interval=0.1, what="reader threads")
    finally:
        os.close(shared_fd)
    assert not errors, "\n".join(errors)


@pytest.mark.deadline(240)
def test_concurrent_processes(mount_factory, emulator, tree, tmp_path):
    m = mount_factory.new(emulator, name="procs")
    rng = random.Random(SEED + 200)
    same = [("random64.bin", off, 4 * H.MiB) for off in range(0, 32 * H.MiB, 4 * H.MiB)] + \
           [("sparse5g.bin", 2 ** 32 - 2 * H.MiB, 4 * H.MiB)]
    jobs = []
    for i in range(3):                      # three processes read the same ranges
        jobs.append(list(same))
    for i in range(3):                      # three read different things
        jobs.append(mixed_ranges(tree, random.Random(SEED + 300 + i), 30))
    jobs.append([("many/" + name, 0, 1 << 20)
                 for name in sorted(tree.model.children(tree.ids["many"]))[:120]])
    expected = [[hashlib.sha256(tree.model.lookup(rel).read_source(off, n)).hexdigest()
                 for rel, off, n in job] for job in jobs]
    procs, outs = [], []
    try:
        for i, job in enumerate(jobs):
            jf = tmp_path / ("job%d.json" % i)
            jf.write_text(json.dumps({"ranges": [[m.path(rel), off, n] for rel, off, n in job]}))
            out = open(tmp_path / ("out%d.txt" % i), "w+b")
            outs.append(out)
            procs.append(H.register_proc(subprocess.Popen(
                [H.PYTHON, os.path.join(os.path.dirname(H.__file__), "helpers.py"),
                 "read-ranges", str(jf)],
                stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT)))
        for p in procs:                      # start them together
            p.stdin.write(b"go\n")
            p.stdin.close()
        H.wait_until(lambda: all(p.poll() is not None for p in procs), 200, interval=0.1,
                     what="reader processes")
        results = []
        for p, out in zip(procs, outs):
            out.seek(0)
            text = out.read().decode("utf-8", "replace")
            assert p.returncode == 0, "reader exited %s: %s" % (p.returncode, text[-2000:])
            results.append(json.loads(text))
    finally:
        for p in procs:
            H.reap_proc(p)
        for out in outs:
            out.close()
    for i, (job, got, want) in enumerate(zip(jobs, results, expected)):
        bad = [(job[k], got[k]) for k in range(len(job)) if got[k] != want[k]]
        assert not bad, "process %d: %d wrong ranges, e.g. %r" % (i, len(bad), bad[:3])
