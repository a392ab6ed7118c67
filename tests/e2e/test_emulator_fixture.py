"""Checks of the e2e fixture itself against the emulator (no colabfs needed):
the emulator serves our spec the way the expected model assumes.  If these
fail, the mount tests' expectations are wrong, not the daemon."""

import hashlib
import os
import random

import pytest

import helpers as H
from conftest import SEED, SESSION_TOKEN


@pytest.fixture(scope="module")
def emu_small(tree, emulator_factory):
    """Our own instance (tree without the 5 GiB file), so these direct requests
    stay out of the main emulator's log, which the mount tests assert on."""
    return emulator_factory(tree.small_spec_path, "emu-fixture", access_token=SESSION_TOKEN,
                            page_size_cap=37, short_pages=True, seed=SEED)


def raw_visible(model, folder_id):
    return sorted((it["id"], it["name"]) for it in model.by_parent.get(folder_id, [])
                  if not it.get("trashed"))


def test_listing_matches_spec(emu_small, tree):
    folders = [tree.model.root_id] + [it["id"] for it in tree.items
                                      if it.get("mimeType") == H.FOLDER and not it.get("trashed")]
    for fid in folders:
        files, _ = emu_small.list_children(fid)
        got = sorted((f["id"], f["name"]) for f in files)
        assert got == raw_visible(tree.small_model, fid), "listing of %s" % fid


def test_paging_has_short_pages(emu_small, tree):
    files, pages = emu_small.list_children(tree.ids["many"], page_size=1000)
    assert len(files) == 250 and len({f["id"] for f in files}) == 250
    assert len(pages) >= 7, "page cap 37 should need >= 7 pages, got %d" % len(pages)
    sizes = [len(p.get("files", [])) for p in pages]
    assert all(s <= 37 for s in sizes), sizes
    assert any(s < 37 for s in sizes[:-1]), "no short page before the end: %r" % sizes


def test_media_and_ranges(emu_small, emulator, tree):
    for rel in ["top.txt", "level1/level2/l2.bin", "unicode/\u65e5\u672c\u8a9e.txt"]:
        n = tree.model.lookup(rel)
        st, _, body = emu_small.media(n.content_id)
        assert st == 200 and body == n.read_source(), rel
    empty = tree.model.lookup("empty.bin")
    st, _, body = emu_small.media(empty.content_id)
    assert st == 200 and body == b""
    # ranges of the big sparse file: only on the main emulator (the one holding it)
    big = tree.model.lookup("sparse5g.bin")
    rng = random.Random(SEED)
    for off, ln in [(2 ** 32 - 5, 10), (big.size - 3, 3), (2 ** 31 - 7, 100)] + \
            [(rng.randrange(big.size), rng.randrange(1, 70000)) for _ in range(10)]:
        st, hdr, body = emulator.media(big.content_id, rng=(off, off + ln - 1))
        assert st == 206, (off, ln, st)
        assert body == big.read_source(off, ln), (off, ln)
    st, _, _ = emulator.media(big.content_id, rng=(big.size, big.size + 10))
    assert st == 416


def test_exports_are_deterministic(emu_small, tree):
    n = 0
    for rel, node in tree.model.walk():
        if node.kind == "export":
            a = emu_small.export(node.content_id, node.export_mime)
            b = emu_small.export(node.content_id, node.export_mime)
            assert a and a == b, rel
            n += 1
    assert n == 4


def test_source_files(tree):
    big = tree.model.lookup("sparse5g.bin")
    assert big.size == 5 * H.GiB + 12345
    assert os.stat(big.source).st_blocks * 512 < 64 * H.MiB, "sparse file is not sparse"
    r = tree.model.lookup("random64.bin")
    assert r.size == 64 * H.MiB
    assert hashlib.sha256(r.read_source(0, H.MiB)).digest() != hashlib.sha256(b"\0" * H.MiB).digest()


def test_stats_endpoint(emu_small):
    st = emu_small.stats()
    for k in ("requests", "by_kind", "media_bytes", "range_requests", "status"):
        assert k in st, st
    log = emu_small.log()
    assert log and all("kind" in e and "id" in e and "query" in e for e in log), log[:2]


def test_retry_after_check_reads_the_monotonic_clock():
    """chaos_helpers.retry_after_violations measures spans on the emulator's
    monotonic clock ("mono"): a retry a full Retry-After later passes even when
    the wall clock stepped back between the two records (a CI run once failed
    so: "asked again 0.267s" after a 429 with Retry-After: 1), and one sent too
    soon is caught whatever the wall clock says."""
    import chaos_helpers as X

    def rec(t, mono, status, fault=None, q="'x' in parents"):
        return {"t": t, "mono": mono, "kind": "files.list", "id": None, "range": None,
                "query": {"q": q}, "status": status, "ms": 5.6, "fault": fault}

    refused = "kind=files.list,status=429,retry_after=1,every=15"
    stepped = [rec(100.0, 5.0, 429, refused), rec(100.3, 6.1, 200)]   # wall clock stepped back 0.8 s
    assert X.retry_after_violations(stepped) == ([], 1, 0)
    early = [rec(100.0, 5.0, 429, refused), rec(101.5, 5.3, 200)]     # wall clock stepped ahead
    bad, checked, _ = X.retry_after_violations(early)
    assert checked == 1 and len(bad) == 1 and "asked again 0.300s" in bad[0], bad
