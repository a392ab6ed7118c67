"""The shared cache tier on a Redis Cluster (issue 15), end to end: real mounts,
one Drive emulator, a real 6-node Redis Cluster (redis_cluster.py).

Interface under test:
  ``colabfs mount --shared-cache=redis://H:P1,H:P2,... --shared-cache-key-file=K MNT``:
  a local block-cache miss asks the cluster first; a tier miss takes a lease (SET NX PX
  ``cfs2:BS:{ID@REV:G}:N:lease``) so one mount downloads a block while the others
  wait, then publishes it at ``cfs2:BS:{ID@REV:G}:N`` (ID the Drive file id, REV its
  headRevisionId, N the block number, G = N >> 6) as a 52-byte header ("CFB2",
  u32 LE data length, u32 LE block size, the key's id, an HMAC-SHA256 of the block's
  identity and bytes under the key: tier_values.py) and the data.
  ``colabfs stats --json`` has the TIER_KEYS below, always (zero without a tier).

Tests:
  0. without --shared-cache every tier counter is there and 0;
  A. a 1,000-file tree (2-64 KiB each) read by three mounts at once, each in its
     own shuffled order by 2 reader processes, every byte compared:
     - with the tier: 0 errors; Drive downloads of the tree / distinct blocks
       <= 1.3; tier hits over the mounts >= 1.5 x files; every block published
       under its documented key (ID, REV, G) and a sample of values has the
       documented header, a MAC that verifies (computed here) and the right bytes;
     - without it (the reference, a test of its own): the same ratio is ~3.
  B. a master SIGKILLed during a 3-mount run: 0 errors, every byte right; then
     the whole cluster stopped during another 3-mount run (new mounts, other
     files): 0 errors, every byte right, the mounts noticed (tier_bypassed_total
     or tier_errors_total > 0) and say tier_up 0.
  C. a byte of 10 published values overwritten (SETRANGE, anywhere): a second
     mount with an empty cache gets every byte right, tier_forged_total +
     tier_corrupt_total >= 1, and downloads each corrupted block from Drive.
     (Forged values made with recomputed checksums: test_tier_security.py.)

Downloads are counted from the emulator's request log (``/_emu/log``): records
of kind "media" with status 200 or 206 whose id is one of the files read (a
quota-refused or failed request is no download).  Distinct blocks = the sum of
ceil(size / block size) over those files (1 each here: files <= 64 KiB, 1M
blocks).  Mounts use --hedge-budget=0 so that a slow answer on this loaded
2-core machine does not add a hedged second request to the counts.  The
dataset read-ahead stays on (its default): a mount may fetch files of the tree
before its readers ask; the ratio and byte checks hold either way.
"""

import collections
import errno
import json
import multiprocessing
import os
import random
import re
import time

import pytest

import helpers as H
import chaos_helpers as X
import tier_values as TV
from conftest import SEED, SESSION_TOKEN

KiB = H.KiB
MiB = H.MiB
BLOCK = MiB
MOUNT_OPTS = ["--block-size=1M", "--hedge-budget=0"]

TIER_KEYS = ["tier_up", "tier_hits_total", "tier_misses_total", "tier_bytes_read_total",
             "tier_bytes_written_total", "tier_published_total", "tier_lease_waits_total",
             "tier_lease_wait_hits_total", "tier_lease_timeouts_total", "tier_corrupt_total",
             "tier_forged_total", "tier_dropped_total", "tier_errors_total",
             "tier_bypassed_total", "tier_redirects_total", "tier_redirects_refused_total",
             "tier_map_refreshes_total", "tier_replica_reads_total"]

KEY_RE = TV.KEY2_RE
LEASE_RE = re.compile(r"^cfs2:1M:\{([^@{}]+)@([^{}]+):([0-9]+)\}:([0-9]+):lease$")
HEADER = TV.HEADER2

# the tree: a/ for A (1,000 files), b1/ and b2/ for B's two runs, cx/ for C
A_CLASSES, A_PER = 10, 100
B_CLASSES, B_PER = 3, 100
C_CLASSES, C_PER = 2, 100


def report(capsys, text):
    H.report(capsys, "tier", text)


@pytest.fixture(scope="module")
def tier_tree(tmp_path_factory):
    t = X.SpecTree(tmp_path_factory.mktemp("tier-tree"), "tier", SEED)
    for top, classes, per in (("a", A_CLASSES, A_PER), ("b1", B_CLASSES, B_PER),
                              ("b2", B_CLASSES, B_PER), ("cx", C_CLASSES, C_PER)):
        t.folder(top)
        for c in range(classes):
            t.folder("%s/c%02d" % (top, c))
            for i in range(per):
                t.file("%s/c%02d/f%03d.bin" % (top, c, i), t.rng.randrange(2 * KiB, 64 * KiB + 1))
    t.write_spec()
    return t


def files_of(t, top):
    return sorted(r for r in t.data if r.startswith(top + "/"))


def blocks_of(t, rels):
    return sum(max(1, -(-len(t.data[r]) // BLOCK)) for r in rels)


def make_emu(emulator_factory, t, name, ttfb_ms=20, extra=()):
    return emulator_factory(t.spec_path, name, access_token=SESSION_TOKEN, ttfb_ms=ttfb_ms,
                            extra=list(extra))


def tier_mount(mount_factory, emu, cluster, name):
    return mount_factory.new(emu, name=name,
                             extra=MOUNT_OPTS + ["--shared-cache=" + cluster.seeds] +
                             TV.key_opts(mount_factory.tmp.mktemp("key")))


def plain_mount(mount_factory, emu, name):
    return mount_factory.new(emu, name=name, extra=MOUNT_OPTS)


def tier_stats(m):
    st = X.cstats(m)
    missing = [k for k in TIER_KEYS if k not in st]
    assert not missing, "colabfs stats lacks %s" % missing
    return {k: st[k] for k in TIER_KEYS}


def summed(stats):
    out = collections.Counter()
    for s in stats:
        out.update(s)
    return out


def media_downloads(emu, ids):
    """{file id: media requests answered 200/206} for the ids, from the request log."""
    log = emu.log()
    assert len(log) < 10_000, "the emulator's log is full (%d records): counts would be short" \
        % len(log)
    n = collections.Counter()
    for r in log:
        if r.get("kind") == "media" and r.get("status") in (200, 206) and r.get("id") in ids:
            n[r["id"]] += 1
    return n


def media_count(emu):
    return emu.stats()["by_kind"].get("media", 0)


def list_tree(m, t, top):
    """Lists top's class folders through the mount (a dataset constructor does)
    and compares the names with the tree's."""
    classes = sorted(os.listdir(m.path(top)))
    assert classes == t.dirs[top], (top, classes)
    for c in classes:
        rel = top + "/" + c
        names = sorted(os.listdir(m.path(rel)))
        assert names == t.dirs[rel], "listing of %s differs" % rel


# --------------------------------------------------------------------------
# readers: per mount, 2 processes over the mount's own shuffled order


def _reader(mi, mnt, rels, data, q, done):
    nfiles = nbytes = 0
    errors, nerr = [], 0
    for rel in rels:
        try:
            with open(os.path.join(mnt, rel), "rb", buffering=0) as f:
                parts = []
                while True:
                    b = f.read(256 * KiB)
                    if not b:
                        break
                    parts.append(b)
            got = b"".join(parts)
            if got != data[rel]:
                raise X.Mismatch(X.diff_text(got, data[rel], rel))
            nfiles += 1
            nbytes += len(got)
        except OSError as e:
            nerr += 1
            if len(errors) < 10:
                errors.append("%s: %s (%s)" % (rel, errno.errorcode.get(e.errno, e.errno), e))
        except Exception as e:  # noqa: B902 - wrong bytes: reported by the test
            nerr += 1
            if len(errors) < 10:
                errors.append(str(e))
        with done.get_lock():
            done.value += 1
    q.put((mi, nfiles, nbytes, errors, nerr))


class Readers:
    """Every mount reads ``rels`` in its own shuffled order, split among
    ``per_mount`` processes; ``done.value`` counts files finished (all mounts)."""

    def __init__(self, mounts, t, rels, seed, per_mount=2):
        ctx = multiprocessing.get_context("fork")
        self.q = ctx.Queue()
        self.done = ctx.Value("i", 0)
        self.nmounts = len(mounts)
        self.total = len(rels) * len(mounts)
        self.procs = []
        for mi, m in enumerate(mounts):
            order = list(rels)
            random.Random(seed * 1009 + mi).shuffle(order)
            for w in range(per_mount):
                self.procs.append(ctx.Process(target=_reader, daemon=True, args=(
                    mi, str(m.mnt), order[w::per_mount], t.data, self.q, self.done)))
        self.results = None

    def start(self):
        self.t0 = time.monotonic()
        for p in self.procs:
            p.start()
        return self

    def progress(self):
        return self.done.value

    def alive(self):
        return any(p.is_alive() for p in self.procs)

    def wait(self, timeout):
        """{mount index: {"files", "bytes", "errors", "nerr"}}; fails after timeout."""
        deadline = time.monotonic() + timeout
        res = {mi: {"files": 0, "bytes": 0, "errors": [], "nerr": 0} for mi in range(self.nmounts)}
        try:
            for _ in self.procs:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise H.Timeout("readers not finished after %ss (%d of %d files)"
                                    % (timeout, self.progress(), self.total))
                try:
                    mi, nf, nb, errs, nerr = self.q.get(timeout=left)
                except Exception:
                    raise H.Timeout("readers not finished after %ss (%d of %d files)"
                                    % (timeout, self.progress(), self.total))
                r = res[mi]
                r["files"] += nf
                r["bytes"] += nb
                r["errors"] += errs
                r["nerr"] += nerr
        finally:
            self.close()
        self.seconds = time.monotonic() - self.t0
        self.results = res
        return res

    def close(self):
        for p in self.procs:
            if p.pid is None:
                continue
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=10)


def assert_all_read(res, t, rels):
    errs = [e for r in res.values() for e in r["errors"]]
    nerr = sum(r["nerr"] for r in res.values())
    assert nerr == 0, "%d read errors or wrong bytes, e.g. %s" % (nerr, errs[:5])
    want_bytes = sum(len(t.data[r]) for r in rels)
    for mi, r in sorted(res.items()):
        assert r["files"] == len(rels) and r["bytes"] == want_bytes, (mi, r["files"], r["bytes"])


def read_a_and_count(mounts, t, emu):
    """The 3 mounts read a/ (run_epoch), read-ahead settles; returns (seconds,
    rels, ids, {id: downloads}, downloads, blocks)."""
    took, rels = run_epoch(mounts, t, "a", SEED + 10, 120)
    for m in mounts:
        H.wait_until(lambda m=m: settled(m), 20, what="read-ahead to settle")
    ids = {t.ids[r] for r in rels}
    dl = media_downloads(emu, ids)
    return took, rels, ids, dl, sum(dl.values()), blocks_of(t, rels)


def run_epoch(mounts, t, top, seed, timeout):
    rels = files_of(t, top)
    for m in mounts:
        list_tree(m, t, top)
    rd = Readers(mounts, t, rels, seed).start()
    res = rd.wait(timeout)
    assert_all_read(res, t, rels)
    return rd.seconds, rels


def settled(m):
    st = X.cstats(m)
    return st["downloads_in_flight"] == 0 and st["scan_requests_queued"] == 0 and \
        st["dataset_scans_running"] == 0


def block_keys(cluster):
    """(block keys, lease keys) in the cluster."""
    ks = cluster.keys("cfs2:*")
    return [k for k in ks if not k.endswith(":lease")], [k for k in ks if k.endswith(":lease")]


def check_value(cluster, key, want_data, what):
    v = cluster.get(key)
    assert v is not None and len(v) >= HEADER.size, "%s: value %r" % (what, v and v[:32])
    magic, n, bs, kid, tag = HEADER.unpack_from(v)
    assert magic == b"CFB2", "%s: magic %r" % (what, magic)
    assert n == len(want_data) == len(v) - HEADER.size, \
        "%s: header length %d, value data %d, block %d" % (what, n, len(v) - HEADER.size,
                                                          len(want_data))
    assert bs == BLOCK, "%s: header block size %d, mounts use %d" % (what, bs, BLOCK)
    assert kid == TV.key_id(), "%s: key id %s, the key's is %s" % (what, kid.hex(),
                                                                   TV.key_id().hex())
    fid, rev, _, blk = KEY_RE.match(key).groups()
    assert TV.verify2(v, fid, rev, int(blk), BLOCK) is not None, "%s: the MAC does not verify" \
        % what
    X.check(v[HEADER.size:], want_data, what + " value data")


# --------------------------------------------------------------------------
# 0. the counters without a tier


@pytest.mark.deadline(60)
def test_tier_counters_zero_without_tier(tier_tree, emulator_factory, mount_factory):
    emu = make_emu(emulator_factory, tier_tree, "emu-tier0", ttfb_ms=0)
    m = plain_mount(mount_factory, emu, "tier0")
    rel = files_of(tier_tree, "cx")[0]
    with open(m.path(rel), "rb") as f:
        X.check(f.read(), tier_tree.data[rel], rel)
    st = tier_stats(m)
    assert all(v == 0 for v in st.values()), st


# --------------------------------------------------------------------------
# A. three mounts, one tree, with and without the tier


@pytest.mark.deadline(150)
def test_three_mounts_share_through_tier(tier_tree, emulator_factory, mount_factory,
                                         redis_cluster, capsys):
    t, c = tier_tree, redis_cluster
    emu = make_emu(emulator_factory, t, "emu-tierA", ttfb_ms=50)
    mounts = [tier_mount(mount_factory, emu, c, "tierA%d" % i) for i in range(3)]
    for m in mounts:
        H.wait_until(lambda m=m: tier_stats(m)["tier_up"] == 1, 15, what="tier_up 1 on " + m.mnt)
    took, rels, ids, dl, downloads, blocks = read_a_and_count(mounts, t, emu)
    ratio = downloads / blocks
    H.wait_until(lambda: len(block_keys(c)[0]) >= blocks, 20,
                 what="all %d blocks published" % blocks)
    per = [tier_stats(m) for m in mounts]
    tot = summed(per)
    keys, leases = block_keys(c)
    report(capsys, "A, with the tier: 3 mounts x %d files (%d blocks) in %.1f s: %d downloads "
           "(ratio %.3f; files fetched twice or more: %d); tier over the mounts: %s; "
           "%d block keys, %d lease keys left"
           % (len(rels), blocks, took, downloads, ratio, sum(1 for v in dl.values() if v > 1),
              dict(tot), len(keys), len(leases)))
    assert tot["tier_errors_total"] == 0 and tot["tier_corrupt_total"] == 0, per
    assert tot["tier_forged_total"] == 0, per
    assert all(LEASE_RE.match(k) for k in leases), "odd lease keys: %r" % leases[:5]
    assert all(s["tier_up"] == 1 for s in per), per
    assert set(dl) == ids, "files never downloaded: %d" % len(ids - set(dl))
    assert ratio <= 1.3, "%d downloads for %d blocks (%.2f per block)" % (downloads, blocks, ratio)
    assert tot["tier_hits_total"] >= 1.5 * len(rels), tot
    assert tot["tier_published_total"] >= blocks, tot
    assert tot["tier_bytes_written_total"] >= sum(len(t.data[r]) for r in rels), tot
    assert tot["tier_bytes_read_total"] > 0, tot

    # every block under its documented key
    revs = TV.head_revisions(emu, sorted(ids))
    by_id = {t.ids[r]: r for r in rels}
    seen = set()
    for k in keys:
        mt = KEY_RE.match(k)
        assert mt, "a tier key not of the form cfs2:1M:{ID@REV:G}:N: %r" % k
        fid, rev, g, n = mt.group(1), mt.group(2), int(mt.group(3)), int(mt.group(4))
        assert fid in by_id, "key of an unknown file: %r" % k
        assert rev == revs[fid], "key %r: revision %r, the file's headRevisionId is %r" \
            % (k, rev, revs[fid])
        assert g == n >> 6, "key %r: G %d, N >> 6 is %d" % (k, g, n >> 6)
        assert n * BLOCK < len(t.data[by_id[fid]]), "key %r: block past the end" % k
        seen.add((fid, n))
    want = {(t.ids[r], n) for r in rels for n in range(max(1, -(-len(t.data[r]) // BLOCK)))}
    assert seen == want, "blocks not in the tier: %d, keys of no block: %d" \
        % (len(want - seen), len(seen - want))
    for k in random.Random(SEED).sample(keys, 20):
        fid, n = KEY_RE.match(k).group(1), int(KEY_RE.match(k).group(4))
        data = t.data[by_id[fid]][n * BLOCK:(n + 1) * BLOCK]
        check_value(c, k, data, k)


@pytest.mark.deadline(150)
def test_three_mounts_without_tier(tier_tree, emulator_factory, mount_factory, capsys):
    """The reference of A: each mount downloads the tree itself (ratio ~3)."""
    t = tier_tree
    emu = make_emu(emulator_factory, t, "emu-tierA0", ttfb_ms=50)
    mounts = [plain_mount(mount_factory, emu, "tierA0%d" % i) for i in range(3)]
    took, rels, ids, dl, downloads, blocks = read_a_and_count(mounts, t, emu)
    report(capsys, "A, without the tier: 3 mounts x %d files (%d blocks) in %.1f s: %d downloads "
           "(ratio %.3f)" % (len(rels), blocks, took, downloads, downloads / blocks))
    assert 2.7 <= downloads / blocks <= 3.3, (downloads, blocks)


# --------------------------------------------------------------------------
# B. a master killed, then the whole cluster stopped


B_BANDWIDTH = 2_500_000   # bytes/s for all media bodies: a run takes seconds, not a blink


def run_until_quarter(mount_factory, emu, c, t, top, name, seed, event, timeout):
    """Three tier mounts read top/ in shuffled orders; once a quarter of it is
    downloaded (the readers still well short of done), event() runs; every
    file is then read to the end and checked.  Returns (mounts, rels, readers,
    files done at the event, what event returned)."""
    mounts = [tier_mount(mount_factory, emu, c, "%s%d" % (name, i)) for i in range(3)]
    rels = files_of(t, top)
    for m in mounts:
        list_tree(m, t, top)
    rd = Readers(mounts, t, rels, seed).start()
    try:
        H.wait_until(lambda: media_count(emu) >= len(rels) // 4 or not rd.alive(), 60,
                     interval=0.02, what="a quarter of %s downloaded" % top)
        done_at = rd.progress()
        assert rd.alive() and done_at < 0.8 * rd.total, \
            "the readers got too far before the event: %d of %d" % (done_at, rd.total)
        got = event()
        res = rd.wait(timeout)
    finally:
        rd.close()
    assert_all_read(res, t, rels)
    return mounts, rels, rd, done_at, got


@pytest.mark.deadline(170)
def test_master_killed_then_cluster_stopped(tier_tree, emulator_factory, mount_factory,
                                            redis_cluster, capsys):
    t, c = tier_tree, redis_cluster
    emu = make_emu(emulator_factory, t, "emu-tierB", ttfb_ms=20,
                   extra=["--total-bandwidth", str(B_BANDWIDTH)])

    # run 1: a master SIGKILLed while three mounts read b1/
    def kill():
        port = c.kill_master(0)
        t_kill = time.monotonic()
        new = c.wait_failover(timeout=30)
        return port, new, time.monotonic() - t_kill

    mounts, rels, rd, done_at_kill, (port, new, failover_s) = \
        run_until_quarter(mount_factory, emu, c, t, "b1", "tierB1", SEED + 20, kill, 90)
    ids = {t.ids[r] for r in rels}
    per1 = [tier_stats(m) for m in mounts]
    dl1 = media_downloads(emu, ids)
    report(capsys, "B, master %d killed after %d of %d files: replica %d promoted in %.1f s; "
           "%d files read byte-exact, %d downloads for %d blocks; tier over the mounts: %s"
           % (port, done_at_kill, rd.total, new["port"], failover_s, rd.total,
              sum(dl1.values()), blocks_of(t, rels), dict(summed(per1))))
    for m in mounts:
        rc, out, err = m.umount(timeout=60)
        assert rc == 0, "umount: %s %s" % (out, err)

    # run 2: the whole cluster stopped while three new mounts read b2/
    emu.reset()
    mounts, rels2, rd, done_at_stop, _ = \
        run_until_quarter(mount_factory, emu, c, t, "b2", "tierB2", SEED + 21, c.stop_all, 120)
    per2 = [tier_stats(m) for m in mounts]
    tot2 = summed(per2)
    dl2 = media_downloads(emu, {t.ids[r] for r in rels2})
    report(capsys, "B, cluster stopped after %d of %d files: all read byte-exact in %.1f s, "
           "%d downloads for %d blocks; tier over the mounts: %s"
           % (done_at_stop, rd.total, rd.seconds, sum(dl2.values()), blocks_of(t, rels2),
              dict(tot2)))
    for i, s in enumerate(per2):
        assert s["tier_bypassed_total"] + s["tier_errors_total"] > 0, \
            "mount %d did not notice the cluster was gone: %s" % (i, s)
    for m in mounts:
        H.wait_until(lambda m=m: tier_stats(m)["tier_up"] == 0, 15,
                     what="tier_up 0 on %s with the cluster gone" % m.mnt)


# --------------------------------------------------------------------------
# C. a corrupted value is detected and fetched again from Drive


@pytest.mark.deadline(150)
def test_corrupt_value_detected(tier_tree, emulator_factory, mount_factory, redis_cluster,
                                capsys):
    t, c = tier_tree, redis_cluster
    emu = make_emu(emulator_factory, t, "emu-tierC", ttfb_ms=20)
    rels = files_of(t, "cx")
    blocks = blocks_of(t, rels)
    by_id = {t.ids[r]: r for r in rels}

    m1 = tier_mount(mount_factory, emu, c, "tierC1")
    run_epoch([m1], t, "cx", SEED + 30, 90)
    H.wait_until(lambda: len(block_keys(c)[0]) >= blocks, 30,
                 what="all %d blocks of cx published" % blocks)
    st1 = tier_stats(m1)
    rc, out, err = m1.umount(timeout=60)
    assert rc == 0, "umount: %s %s" % (out, err)

    keys = [k for k in block_keys(c)[0] if KEY_RE.match(k) and KEY_RE.match(k).group(1) in by_id]
    assert len(keys) == blocks, (len(keys), blocks)
    rng = random.Random(SEED + 31)
    victims = rng.sample(keys, 10)
    corrupted_ids = set()
    for k in victims:
        v = c.get(k)
        assert v is not None and len(v) > HEADER.size, (k, v and v[:32])
        off = rng.randrange(HEADER.size, len(v))
        c.setrange(k, off, bytes([v[off] ^ 0xFF]))
        assert c.get(k)[off] != v[off]
        corrupted_ids.add(KEY_RE.match(k).group(1))

    emu.reset()
    m2 = tier_mount(mount_factory, emu, c, "tierC2")
    run_epoch([m2], t, "cx", SEED + 32, 90)
    H.wait_until(lambda: settled(m2), 20, what="read-ahead to settle")
    st2 = tier_stats(m2)
    dl = media_downloads(emu, set(by_id))
    report(capsys, "C, %d of %d values corrupted: second mount read %d files byte-exact; its "
           "tier counters %s; %d downloads (%d of the corrupted files); first mount: %s"
           % (len(victims), blocks, len(rels), st2, sum(dl.values()),
              sum(1 for i in corrupted_ids if dl.get(i)), st1))
    assert st2["tier_corrupt_total"] + st2["tier_forged_total"] >= 1, st2
    missing = sorted(by_id[i] for i in corrupted_ids if not dl.get(i))
    assert not missing, "corrupted blocks not fetched again from Drive: %s" % missing
    # the rest came from the tier
    assert sum(dl.values()) <= len(victims) + len(rels) // 20, dl
    assert st2["tier_hits_total"] >= blocks - len(victims) - len(rels) // 20, st2


def doctor_tier(colabfs, tmp_path, emu, shared):
    """colabfs doctor --shared-cache=shared: its "shared cache" check."""
    (tmp_path / "home").mkdir(parents=True, exist_ok=True)
    env = H.clean_env(home=tmp_path / "home")
    env["COLABFS_ACCESS_TOKEN"] = SESSION_TOKEN
    argv = [colabfs, "doctor", "--json", "--api-url=" + emu.url, "--token-url=" + emu.token_url,
            "--metadata-url=http://127.0.0.1:9", "--cache-dir=" + str(tmp_path / "cache"),
            "--shared-cache=" + shared] + TV.key_opts(tmp_path / "key")
    rc, out, err = H.run_cmd(argv, timeout=60, env=env)
    assert rc is not None, "doctor timed out: " + err
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert "shared cache" in checks, sorted(checks)
    return checks["shared cache"]


@pytest.mark.deadline(90)
def test_doctor_checks_the_tier(tier_tree, emulator_factory, redis_cluster, colabfs, tmp_path,
                                capsys):
    """doctor with --shared-cache: ok with every master answering; warn, with
    the reason, for seeds where nothing answers and once a master is gone."""
    emu = make_emu(emulator_factory, tier_tree, "emu-tier-doctor")
    c = redis_cluster
    ok = doctor_tier(colabfs, tmp_path / "d1", emu, c.seeds)
    assert ok["status"] == "ok", ok
    assert "3 of 3 masters answer PING, 16384 of 16384 slots served" in ok["detail"], ok
    closed = doctor_tier(colabfs, tmp_path / "d2", emu, "redis://127.0.0.1:9")
    assert closed["status"] == "warn", closed
    assert "no node of 127.0.0.1:9 answers" in closed["detail"], closed
    assert "read from Drive" in closed["detail"], closed
    gone = c.kill_master(0)
    dead = doctor_tier(colabfs, tmp_path / "d3", emu, c.seeds)
    if dead["status"] == "ok":  # a loaded machine: the cluster failed over first
        assert gone not in [m["port"] for m in c.masters()], dead
        assert "3 of 3 masters" in dead["detail"], dead
    else:
        assert dead["status"] == "warn", dead
        assert "127.0.0.1:%d" % gone in dead["detail"], dead
    report(capsys, "doctor: %s | %s | %s" % (ok["detail"], closed["detail"], dead["detail"]))
