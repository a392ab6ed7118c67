"""Hedged requests (issue 11, point 3), end to end: real mounts on the Drive
emulator.

1. a media request whose first byte is stalled for STALL_S is hedged: the
   read returns byte-exact long before the stall ends, and colabfs stats count
   the stall, the hedge and its win;
2. the same for a body that stops after STALL_AT bytes: the hedge asks for
   the bytes not yet delivered (its Range starts at STALL_AT) and wins;
3. the other outcomes of the race: the late request answers before its hedge
   (the hedge is closed, the late one's bytes are used); the hedge fails (503)
   before either answered (the try fails, the late one is closed, the retry
   asks for the bytes not yet delivered); the late one is refused (429 with
   Retry-After: RA_S) while its hedge runs on, then the hedge fails (500): the
   retry waits out the Retry-After of the refusal, not the 500's backoff;
4. a healthy emulator: a few hundred reads by several threads cause almost
   no hedges (HEALTHY_MAX_HEDGES);
5. the warm-up: on a fresh mount the very first download stalls; before
   anything is learnt a download is late after CFS_HEDGE_WARMUP_US (5 s), and
   the budget starts with one hedge, so the read ends in about 5 s, not 20.

colabfs learns its latencies from the requests it sees (CFS_HEDGE_MIN_SAMPLES,
20, of them) and hedges within a budget (5% of the requests, earned as they
are answered), so tests 1-3 first read WARM_FILES small files.
"""

import pytest

import helpers as H
import cache_helpers as C
import chaos_helpers as X
from conftest import SESSION_TOKEN

KiB = H.KiB
MiB = H.MiB

SEED = 1111
WARM_FILES = 60                 # answered requests before the stall: past warm-up, 3 credits
BIG = MiB                       # the stalled files: one block, so one request (a larger file
                                # read at once can become several, in any order)
STALL_S = 20                    # the stall
STALL_AT = 256 * KiB            # where the mid-body stall stops the body
MAX_READ_S = 8.0                # the read must finish well before the stall ends
RA_S = 2                        # the Retry-After of the refused late request
HEALTHY_FILES = 300
HEALTHY_THREADS = 4
HEALTHY_MAX_HEDGES = 3          # 1% of the requests; the budget alone would allow 5% + 10


@pytest.fixture(scope="module")
def htree(tmp_path_factory):
    t = X.SpecTree(tmp_path_factory.mktemp("hedge-tree"), "hedge", SEED)
    t.folder("warm")
    for i in range(WARM_FILES):
        t.file("warm/w%03d.bin" % i, t.rng.randrange(1 * KiB, 64 * KiB))
    t.folder("big")
    t.file("big/first.bin", BIG)
    t.file("big/middle.bin", BIG)
    t.file("big/late-wins.bin", BIG)
    t.file("big/hedge-fails.bin", BIG)
    t.file("big/refused-then-hedge-fails.bin", BIG)
    t.folder("many")
    for i in range(HEALTHY_FILES):
        t.file("many/m%03d.bin" % i, t.rng.randrange(1 * KiB, 128 * KiB))
    t.write_spec()
    return t


@pytest.fixture(scope="module")
def emu(htree, emulator_factory):
    tree = htree
    e = emulator_factory(tree.spec_path, "emu-hedge", access_token=SESSION_TOKEN, seed=SEED)
    for folder in ("warm", "big", "many"):
        e.list_children(tree.ids[folder], token=SESSION_TOKEN)  # hashed before anything is timed
    return e


def warm_up(m, t):
    for rel in t.files_under("warm"):
        C.assert_same(C.read_whole(m.path(rel)), t.data[rel], rel)
    st = X.cstats(m)
    assert st["hedges_total"] == 0, "hedges while warming up on a healthy emulator: %r" % st
    return st


def stalled_read(m, t, emu, rel, *faults):
    """Reads rel with the faults installed for its media requests (the first
    one for its first request, the next one for the next...); returns
    (seconds, stats, media records of rel)."""
    fid = t.ids[rel]
    X.set_faults(emu, ["kind=media,id=%s,%s,count=1" % (fid, f) for f in faults])
    try:
        elapsed, got = H.timed_read(m.path(rel), len(t.data[rel]), STALL_S + 30)
        fired = [f["fired"] for f in X.get_faults(emu)]
    finally:
        X.set_faults(emu, [])
    assert not isinstance(got, OSError), "reading %s failed: %r%s" % (rel, got, m.log_tail(20))
    C.assert_same(got, t.data[rel], rel + " (hedged)")
    assert fired == [1] * len(faults), "faults %r fired %r times" % (faults, fired)
    media = [r for r in emu.log() if r["kind"] == "media" and r["id"] == fid]
    return elapsed, X.cstats(m), media


def check_hedged(m, st0, st, elapsed, what, wins=1):
    d = {k: st[k] - st0[k] for k in ("stalls_total", "hedges_total", "hedge_wins_total",
                                     "drive_retries_total")}
    assert elapsed < MAX_READ_S, "%s: the read took %.1fs with a %ds stall (stats %r)%s" \
        % (what, elapsed, STALL_S, d, m.log_tail(20))
    assert d["stalls_total"] == 1 and d["hedges_total"] == 1 and d["hedge_wins_total"] == wins, \
        "%s: stats %r, want 1 stall, 1 hedge, %d win(s)%s" % (what, d, wins, m.log_tail(20))
    assert st["drive_errors_total"] == 0, st
    return d


@pytest.mark.deadline(120)
def test_first_byte_stall_is_hedged(mount_factory, emu, htree, capsys):
    tree = htree
    m = mount_factory.new(emu, name="hedge-first")
    st0 = warm_up(m, tree)
    elapsed, st, media = stalled_read(m, tree, emu, "big/first.bin", "stall_ms=%d" % (STALL_S * 1000))
    d = check_hedged(m, st0, st, elapsed, "first-byte stall")
    ranges = sorted(r["range"] for r in media)
    # (the emulator logs a request when its reply ends: the stalled one may not be there yet)
    assert "bytes=0-%d" % (BIG - 1) in ranges, "want a hedge for the whole file: %r" % ranges
    with capsys.disabled():
        print("\n[hedge] first-byte stall of %ds: read %d KiB in %.2fs; %r; learnt ttfb p95 %d ms"
              % (STALL_S, BIG // KiB, elapsed, d, st["ttfb_p95_ms"]))


@pytest.mark.deadline(120)
def test_mid_body_stall_is_hedged_from_the_missing_byte(mount_factory, emu, htree, capsys):
    tree = htree
    m = mount_factory.new(emu, name="hedge-middle")
    st0 = warm_up(m, tree)
    elapsed, st, media = stalled_read(m, tree, emu, "big/middle.bin",
                                      "stall_ms=%d,stall_after=%d" % (STALL_S * 1000, STALL_AT))
    d = check_hedged(m, st0, st, elapsed, "mid-body stall")
    ranges = sorted(r["range"] for r in media)
    want = "bytes=%d-%d" % (STALL_AT, BIG - 1)
    assert want in ranges, "no hedge asked for the bytes not yet delivered (%s): %r" % (want, ranges)
    with capsys.disabled():
        print("\n[hedge] stall of %ds after %d KiB of the body: read %d KiB in %.2fs; %r; ranges %r"
              % (STALL_S, STALL_AT // KiB, BIG // KiB, elapsed, d, ranges))


@pytest.mark.deadline(120)
def test_late_request_answering_first_or_hedge_failing(mount_factory, emu, htree, capsys):
    tree = htree
    m = mount_factory.new(emu, name="hedge-outcomes")
    st0 = warm_up(m, tree)
    # the late one answers at 600 ms, its hedge would at 5 s: the hedge is closed
    rel = "big/late-wins.bin"
    el1, st1, media = stalled_read(m, tree, emu, rel, "stall_ms=600", "stall_ms=5000")
    d1 = check_hedged(m, st0, st1, el1, "late request answering first", wins=0)
    assert el1 < 3.0, "the late request answered at 600 ms but the read took %.1fs" % el1
    assert d1["drive_retries_total"] == 0, d1
    # the hedge of a body stalled after STALL_AT fails (503): the try fails, the
    # stalled one is closed, and the retry asks for the bytes not yet delivered
    rel = "big/hedge-fails.bin"
    el2, st2, media = stalled_read(m, tree, emu, rel,
                                   "stall_ms=%d,stall_after=%d" % (STALL_S * 1000, STALL_AT),
                                   "status=503")
    d2 = check_hedged(m, st1, st2, el2, "hedge failing", wins=0)
    rest = "bytes=%d-%d" % (STALL_AT, BIG - 1)
    tail = [(r["range"], r["status"]) for r in media if r["range"] == rest]
    assert tail == [(rest, 503), (rest, 206)], \
        "want the hedge's 503 then the retry's 206, both for %s: %r" % (rest, media)
    assert d2["drive_retries_total"] == 1, d2
    # the late one is refused at 800 ms with Retry-After while its hedge runs
    # on, and the hedge fails (500) at about 1.7 s: the try fails, and the
    # retry comes no sooner than RA_S after the refusal (the 500 alone would
    # be retried within a few hundred ms)
    rel = "big/refused-then-hedge-fails.bin"
    el3, st3, media = stalled_read(m, tree, emu, rel,
                                   "stall_ms=800,status=429,retry_after=%d" % RA_S,
                                   "stall_ms=1500,status=500")
    d3 = {k: st3[k] - st2[k] for k in ("stalls_total", "hedges_total", "hedge_wins_total",
                                       "drive_retries_total")}
    # one hedge: the hedge, late itself once alone, is not hedged again after
    # the refusal (a new request right after a 429 is what Retry-After forbids)
    assert d3["hedges_total"] == 1 and d3["hedge_wins_total"] == 0 and \
        d3["drive_retries_total"] == 1, "stats %r%s" % (d3, m.log_tail(20))
    by_status = {r["status"]: r for r in media}
    assert sorted(by_status) == [206, 429, 500] and len(media) == 3, media
    refused, retry = by_status[429], by_status[206]
    replied = refused["mono"] + refused["ms"] / 1000.0
    assert retry["mono"] - replied >= RA_S - 0.01, \
        "the retry came %.3fs after a 429 with Retry-After: %d (its hedge failed with a 500 at " \
        "%.3fs): %r%s" % (retry["mono"] - replied, RA_S, by_status[500]["mono"] - refused["mono"], media,
                          m.log_tail(20))
    with capsys.disabled():
        print("\n[hedge] late request answering first: %.2fs %r; hedge failing: %.2fs %r; "
              "refused with Retry-After %d s, then the hedge failing: retry %.2fs after the "
              "refusal, read in %.2fs" % (el1, d1, el2, d2, RA_S, retry["mono"] - replied, el3))


@pytest.mark.deadline(120)
def test_stall_in_the_warm_up_is_hedged_after_5s(mount_factory, emu, htree, capsys):
    tree = htree
    m = mount_factory.new(emu, name="hedge-warmup")
    st0 = X.cstats(m)
    elapsed, st, media = stalled_read(m, tree, emu, "big/middle.bin",
                                      "stall_ms=%d" % (STALL_S * 1000))
    with capsys.disabled():
        print("\n[hedge] first download of a mount stalled %ds: read in %.2fs; hedges %d"
              % (STALL_S, elapsed, st["hedges_total"] - st0["hedges_total"]))
    assert 4.5 < elapsed < 12, "the warm-up stall was not hedged at 5 s: %.1fs%s" \
        % (elapsed, m.log_tail(20))
    assert st["hedges_total"] - st0["hedges_total"] == 1 and st["hedge_wins_total"] == 1, st


@pytest.mark.deadline(180)
def test_healthy_reads_are_almost_never_hedged(mount_factory, emu, htree, capsys):
    tree = htree
    m = mount_factory.new(emu, name="hedge-healthy")
    warm_up(m, tree)
    rels = tree.files_under("many")
    errors = []

    def reader(k):
        try:
            for rel in rels[k::HEALTHY_THREADS]:
                C.assert_same(C.read_whole(m.path(rel)), tree.data[rel], rel)
        except BaseException as e:  # noqa: B902 - reported below
            errors.append(repr(e))
    elapsed = H.run_threads([lambda k=k: reader(k) for k in range(HEALTHY_THREADS)], 120,
                            "the healthy reads")
    st = X.cstats(m)
    with capsys.disabled():
        print("\n[hedge] healthy: %d files by %d threads in %.1fs, %d Drive requests: stalls %d, hedges %d;"
              " learnt ttfb p95 %d ms, body pause p95 %d ms"
              % (len(rels), HEALTHY_THREADS, elapsed, st["drive_requests_total"], st["stalls_total"],
                 st["hedges_total"], st["ttfb_p95_ms"], st["body_pause_p95_ms"]))
    assert not errors, errors[:5]
    assert st["drive_requests_total"] >= len(rels)
    assert st["hedges_total"] <= HEALTHY_MAX_HEDGES, \
        "%d hedges on a healthy emulator (%d requests)%s" % (st["hedges_total"], st["drive_requests_total"],
                                                             m.log_tail(20))
