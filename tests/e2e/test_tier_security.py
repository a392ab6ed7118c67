"""The shared cache tier cannot be turned against its users (issue 24, items 1 and 2), end
to end: real mounts, one Drive emulator, a real 6-node Redis Cluster (redis_cluster.py),
values checked and forged with tier_values.py (the man page's format, written again here).

Interface under test:
  ``colabfs mount --shared-cache=URL --shared-cache-key-file=FILE``: values are MAC'd
  (HMAC-SHA256) under the key; a value that fails is never served, is counted
  (``tier_forged_total``; ``tier_corrupt_total`` for one not of the format), is logged
  once per file, and is overwritten with the block downloaded from Drive.
  ``--shared-cache-trusted``: no key, crc32c values (keys cfs1:), a warning at mount and in
  doctor.  ``--shared-cache`` with neither, or with a key file others may read or that is
  too short, refuses the mount with the reason.
  A whole file whose bytes differ from Drive's md5 loses every tier value
  (``tier_dropped_total``) and is read from Drive again; the write path's copy of a
  file's current content is checked against Drive's md5, so an append never uploads
  forged bytes.

Tests:
  1. refusals and warnings, no cluster needed: --shared-cache alone; a key file of mode
     0644 (and one readable through a symlink); a 31-byte key; --shared-cache-trusted
     mounts with a warning on the terminal and in the log; doctor: FAIL / warn / ok with
     the key's id (as computed here).
  2. two mounts with the same key share blocks (tier hits, no media request for the second);
     what they publish verifies here.  Then an attacker without the key rewrites values
     of a third of the files: the bytes changed and, as he can, (a) the MAC recomputed
     under his own key with our key's id pasted in, (b) a format 1 value with its crc32c
     recomputed, (c) the header kept, (d) a valid value of another block replayed, (e) a
     value cut short.  A third mount (empty cache) reads every file: every byte equals the
     emulator's; tier_forged_total >= the forged blocks (a-d), tier_corrupt_total >= 1
     (e); each victim downloaded from Drive and its value overwritten with one that
     verifies here and holds the right bytes; at most one log line per file.
  3. appending through the mount to a file whose tier value was forged (the issue's
     attack: bytes changed, checksum recomputed) leaves Drive with the old bytes and the
     appended ones, keyed (the forgery is refused at once) and trusted (crc32c cannot
     tell: the copy's md5 mismatch drops every value of the file and the copy is made
     again from Drive); and, trusted, a whole-file read that got forged bytes drops the
     file's tier values at close, so the next open reads Drive's bytes.
"""

import collections
import hashlib
import json
import os
import random
import re

import pytest

import helpers as H
import chaos_helpers as X
import tier_values as TV
from conftest import SEED, SESSION_TOKEN

KiB = H.KiB
MiB = H.MiB
BLOCK = MiB
MOUNT_OPTS = ["--block-size=1M", "--hedge-budget=0", "--write-back-delay=0"]


@pytest.fixture(scope="module")
def sec_tree(tmp_path_factory):
    t = X.SpecTree(tmp_path_factory.mktemp("tier-sec-tree"), "tiersec", SEED + 240)
    t.folder("s")
    for i in range(15):  # 1 to 3 blocks each
        t.file("s/f%02d.bin" % i, t.rng.randrange(100 * KiB, 3 * MiB - 1000))
    t.folder("w")
    for name in ("keyed.log", "trusted.log", "trusted-read.bin"):
        t.file("w/" + name, 2 * MiB + 333 * KiB)
    t.write_spec()
    return t


def make_emu(emulator_factory, t, name):
    return emulator_factory(t.spec_path, name, access_token=SESSION_TOKEN, ttfb_ms=5)


def mount(mount_factory, emu, name, opts, **kw):
    return mount_factory.new(emu, name=name, extra=MOUNT_OPTS + list(opts), **kw)


def keyed(mount_factory, cluster):
    return ["--shared-cache=" + cluster.seeds] + TV.key_opts(mount_factory.tmp.mktemp("key"))


def trusted(cluster):
    return ["--shared-cache=" + cluster.seeds, "--shared-cache-trusted"]


def media_by_id(emu):
    n = collections.Counter()
    for r in emu.log():
        if r.get("kind") == "media" and r.get("status") in (200, 206):
            n[r.get("id")] += 1
    return n


def read_all(m, t, rels):
    for rel in rels:
        with open(m.path(rel), "rb") as f:
            X.check(f.read(), t.data[rel], "%s through %s" % (rel, m.mnt))


def nblocks(data):
    return max(1, -(-len(data) // BLOCK))


def drive_bytes(emu, fid):
    st, _, body = emu.request("GET", "/_emu/items/%s/content" % fid)
    assert st == 200, (fid, st, body[:200])
    return body


def run_colabfs(args, env=None, timeout=60):
    return H.run_cmd([str(H.colabfs_bin())] + args, timeout, env=env)


# --------------------------------------------------------------------------
# 1. refusals and warnings


@pytest.mark.deadline(120)
def test_key_rules_refuse_or_warn(sec_tree, emulator_factory, mount_factory, tmp_path, capsys):
    emu = make_emu(emulator_factory, sec_tree, "emu-tiersec1")
    nowhere = "--shared-cache=redis://127.0.0.1:9"
    said = []

    def refused(name, opts, *needles):
        m = mount(mount_factory, emu, name, [nowhere] + opts, check=False)
        rc, out, err = m.result
        assert rc not in (0, None), "mounted with %s: %s %s" % (opts, out, err)
        assert not H.is_fuse_mounted(m.mnt)
        for n in needles:
            assert n in err, "%r not in the refusal: %s" % (n, err)
        said.append(err.strip().splitlines()[-1])

    refused("nokey", [], "--shared-cache-key-file", "--shared-cache-trusted")
    d = tmp_path / "keys"
    refused("k644", ["--shared-cache-key-file=" + TV.key_file(d, mode=0o644, name="k644")],
            "readable by other users", "chmod 600")
    target = TV.key_file(d, mode=0o640, name="k640")
    os.symlink(target, str(d / "link"))
    refused("klink", ["--shared-cache-key-file=" + str(d / "link")], "readable by other users")
    refused("kshort", ["--shared-cache-key-file=" + TV.key_file(d, key=b"k" * 31, name="short")],
            "too short", "at least 32")
    refused("kmissing", ["--shared-cache-key-file=" + str(d / "missing")], "cannot open")
    # a relative path is the mount command's, not the daemon's (which runs in /)
    good = TV.key_file(d, name="good")
    old = os.getcwd()
    os.chdir(str(d))
    try:
        m = mount(mount_factory, emu, "krel", [nowhere, "--shared-cache-key-file=good"])
    finally:
        os.chdir(old)
    assert H.is_fuse_mounted(m.mnt)

    # trusted: mounts, and says what it means on the terminal and in the log
    m = mount(mount_factory, emu, "trusted", [nowhere, "--shared-cache-trusted"])
    rc, out, err = m.result
    assert rc == 0 and "warning: --shared-cache-trusted" in err, (rc, out, err)
    H.wait_until(lambda: "not authenticated" in X.log_text(m), 10, what="the warning in the log")
    rel = sec_tree.files_under("s")[0]
    with open(m.path(rel), "rb") as f:  # a cluster that is not there costs nothing
        X.check(f.read(), sec_tree.data[rel], rel)

    # doctor: FAIL without a key, warn when trusted, ok with the key's id
    env = H.clean_env(home=tmp_path / "home")
    env["COLABFS_ACCESS_TOKEN"] = SESSION_TOKEN

    def doctor(opts):
        rc, out, err = run_colabfs(["doctor", "--json", "--api-url=" + emu.url,
                                    "--token-url=" + emu.token_url,
                                    "--metadata-url=http://127.0.0.1:9",
                                    "--cache-dir=" + str(tmp_path / "dcache"), nowhere] + opts,
                                   env=env)
        assert rc is not None, "doctor timed out: " + err
        checks = {c["name"]: c for c in json.loads(out)["checks"]}
        assert "shared cache key" in checks, sorted(checks)
        return checks["shared cache key"]

    (tmp_path / "home").mkdir(exist_ok=True)
    c = doctor([])
    assert c["status"].lower() == "fail" and "--shared-cache-key-file" in c["fix"], c
    c = doctor(["--shared-cache-trusted"])
    assert c["status"].lower() == "warn" and "not authenticated" in c["detail"], c
    c = doctor(["--shared-cache-key-file=" + str(d / "k644")])
    assert c["status"].lower() == "fail" and "readable by other users" in c["detail"], c
    c = doctor(["--shared-cache-key-file=" + good])
    assert c["status"].lower() == "ok" and TV.key_id().hex() in c["detail"], c
    H.report(capsys, "tier-security", "refusals: " + " | ".join(said))


# --------------------------------------------------------------------------
# 2. shared under one key; forged values never served


@pytest.mark.deadline(240)
def test_forged_values_never_served(sec_tree, emulator_factory, mount_factory, redis_cluster,
                                    capsys):
    t, c = sec_tree, redis_cluster
    emu = make_emu(emulator_factory, t, "emu-tiersec2")
    rels = t.files_under("s")
    ids = {t.ids[r]: r for r in rels}
    rev = TV.head_revisions(emu, sorted(ids))
    opts = keyed(mount_factory, c)

    m1 = mount(mount_factory, emu, "sec1", opts)
    read_all(m1, t, rels)
    nb = sum(nblocks(t.data[r]) for r in rels)
    H.wait_until(lambda: len([k for k in c.keys("cfs2:*") if not k.endswith(":lease")]) >= nb,
                 20, what="every block published")
    assert c.keys("cfs1:*") == [], "a keyed mount wrote unkeyed values"
    for r in rels:  # what is published verifies here
        fid = t.ids[r]
        for n in range(nblocks(t.data[r])):
            got = TV.verify2(c.get(TV.block_key(fid, rev[fid], n)), fid, rev[fid], n, BLOCK)
            assert got == t.data[r][n * BLOCK:(n + 1) * BLOCK], "%s block %d" % (r, n)

    emu.reset()
    m2 = mount(mount_factory, emu, "sec2", opts)  # the same key file's bytes, another file
    read_all(m2, t, rels)
    s2 = X.cstats(m2)
    assert sum(media_by_id(emu)[i] for i in ids) == 0, "the second mount downloaded"
    assert s2["tier_hits_total"] >= nb and s2["tier_forged_total"] == 0, s2

    # the attacker: no key; rewrites values of 5 files, one way each
    rng = random.Random(SEED + 241)
    victims = rng.sample(rels, 5)
    attacker_key = b"attacker-" + os.urandom(24).hex().encode()
    forged, how = {}, {}
    for kind, r in zip("abcde", victims):
        fid = t.ids[r]
        n = rng.randrange(nblocks(t.data[r]))
        k = TV.block_key(fid, rev[fid], n)
        real = t.data[r][n * BLOCK:(n + 1) * BLOCK]
        evil = bytes(b ^ 0x5A for b in real[:4096]) + real[4096:]
        if kind == "a":
            v = TV.encode2(fid, rev[fid], n, BLOCK, evil, key=attacker_key, kid=TV.key_id())
        elif kind == "b":
            v = TV.encode1(evil, BLOCK)
        elif kind == "c":
            v = c.get(k)[:TV.HEADER2.size] + evil
        elif kind == "d":  # another file's valid value, its length made to fit
            other = next(o for o in rels if o not in victims and len(t.data[o]) >= len(real))
            ofid = t.ids[other]
            v = c.get(TV.block_key(ofid, rev[ofid], 0))
            if len(real) < BLOCK:
                v = v[:TV.HEADER2.size + len(real)]
                v = v[:4] + len(real).to_bytes(4, "little") + v[8:]
        else:
            v = c.get(k)[:len(c.get(k)) // 2]
        assert c.command("SET", k, v) == b"OK"
        forged[k] = (fid, n, real)
        how[r] = kind

    emu.reset()
    m3 = mount(mount_factory, emu, "sec3", opts)
    read_all(m3, t, rels)  # every byte the emulator's
    H.wait_until(lambda: X.cstats(m3)["downloads_in_flight"] == 0, 20, what="downloads done")
    s3 = X.cstats(m3)
    dl = media_by_id(emu)
    H.report(capsys, "tier-security", "forged %s: third mount read %d files byte-exact; tier "
             "hits %d, forged %d, corrupt %d; media for the victims %s"
             % (sorted(how.values()), len(rels), s3["tier_hits_total"], s3["tier_forged_total"],
                s3["tier_corrupt_total"], [dl[t.ids[r]] for r in victims]))
    assert s3["tier_forged_total"] >= 4 and s3["tier_corrupt_total"] >= 1, s3
    assert all(dl[t.ids[r]] >= 1 for r in victims), dl
    assert sum(dl[i] for i in ids) <= len(victims) + 2, "more downloads than bad values: %s" % dl
    for k, (fid, n, real) in forged.items():  # overwritten with the good value
        H.wait_until(lambda k=k, fid=fid, n=n: TV.verify2(c.get(k), fid, rev[fid], n, BLOCK)
                     is not None, 10, what="the forged value at %s overwritten" % k)
        assert TV.verify2(c.get(k), fid, rev[fid], n, BLOCK) == real, k
    # logged, once per file
    lines = [ln for ln in X.log_text(m3).splitlines() if "in the tier is" in ln]
    per = collections.Counter(re.search(r"of (\S+)@", ln).group(1) for ln in lines)
    assert set(per) == {t.ids[r] for r in victims} and max(per.values()) == 1, lines


# --------------------------------------------------------------------------
# 3. an append never uploads forged bytes; a forged read is dropped at close


def forge_crc(c, fid, rev, n, real, keyed_space):
    """The issue's attack: a real value's bytes changed, its crc32c recomputed (format 1),
    at the keyed or the unkeyed key.  Returns the forged bytes."""
    evil = b"FORGED-BY-A-CLUSTER-WRITER" + real[26:]
    assert c.command("SET", TV.block_key(fid, rev, n, keyed=keyed_space),
                     TV.encode1(evil, BLOCK)) == b"OK"
    return evil


@pytest.mark.deadline(240)
def test_append_never_uploads_forged_bytes(sec_tree, emulator_factory, mount_factory,
                                           redis_cluster, capsys):
    t, c = sec_tree, redis_cluster
    emu = make_emu(emulator_factory, t, "emu-tiersec3")
    files = {k: "w/" + k for k in ("keyed.log", "trusted.log", "trusted-read.bin")}
    rev = TV.head_revisions(emu, [t.ids[r] for r in files.values()])
    kopts, topts = keyed(mount_factory, c), trusted(c)
    # publish: a keyed and a trusted mount read everything once
    read_all(mount(mount_factory, emu, "pubk", kopts), t, list(files.values()))
    read_all(mount(mount_factory, emu, "pubt", topts), t, list(files.values()))
    notes = []
    for mode, opts in (("keyed", kopts), ("trusted", topts)):
        rel = files[mode + ".log"]
        fid, data = t.ids[rel], t.data[rel]
        forge_crc(c, fid, rev[fid], 1, data[BLOCK:2 * BLOCK], keyed_space=mode == "keyed")
        m = mount(mount_factory, emu, "app-" + mode, opts)
        tail = b"\nappended through the mount (%s)\n" % mode.encode()
        with open(m.path(rel), "ab") as f:
            f.write(tail)
            f.flush()
            os.fsync(f.fileno())
        X.check(drive_bytes(emu, fid), data + tail, "%s in Drive after the append (%s)"
                % (rel, mode))
        with open(m.path(rel), "rb") as f:
            X.check(f.read(), data + tail, "%s read back (%s)" % (rel, mode))
        st = X.cstats(m)
        notes.append("%s: forged %d, dropped %d, md5 mismatches %d" % (
            mode, st["tier_forged_total"], st["tier_dropped_total"],
            st["files_checksum_mismatches_total"]))
        if mode == "keyed":  # refused on sight: never reached the copy
            assert st["tier_forged_total"] >= 1, st
            assert st["files_checksum_mismatches_total"] == 0, st
        else:  # crc32c cannot tell: the copy's md5 check does
            assert st["files_checksum_mismatches_total"] >= 1, st
            assert st["tier_dropped_total"] >= 1, st
            assert "the write is refused" not in X.log_text(m)
            v = c.get(TV.block_key(fid, rev[fid], 1, keyed=False))
            assert v is None or v[16:] == data[BLOCK:2 * BLOCK], "the forged value is still there"

    # trusted, a whole-file read: forged bytes may be served once (nothing can tell them
    # apart without a key), but the close finds Drive's md5 differs, drops the file's tier
    # values and local blocks; the next open reads Drive's bytes
    rel = files["trusted-read.bin"]
    fid, data = t.ids[rel], t.data[rel]
    evil = forge_crc(c, fid, rev[fid], 2, data[2 * BLOCK:], keyed_space=False)
    m = mount(mount_factory, emu, "read-trusted", topts)
    with open(m.path(rel), "rb") as f:
        first = f.read()
    assert first in (data, data[:2 * BLOCK] + evil), "neither Drive's bytes nor the forgery"
    H.wait_until(lambda: X.cstats(m)["files_checksum_mismatches_total"] >= 1 or first == data,
                 10, what="the close's md5 check")
    with open(m.path(rel), "rb") as f:
        X.check(f.read(), data, "%s read again after the close (trusted)" % rel)
    st = X.cstats(m)
    notes.append("trusted read: first read %s; dropped %d, md5 mismatches %d" % (
        "forged" if first != data else "right", st["tier_dropped_total"],
        st["files_checksum_mismatches_total"]))
    if first != data:
        assert st["tier_dropped_total"] >= 1, st
        v = c.get(TV.block_key(fid, rev[fid], 2, keyed=False))
        assert v is None or v[16:] == data[2 * BLOCK:], "the forged value is still there"
    assert hashlib.md5(drive_bytes(emu, fid)).hexdigest() == hashlib.md5(data).hexdigest()
    H.report(capsys, "tier-security", "; ".join(notes))
