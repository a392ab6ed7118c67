"""Shared drives and "Shared with me" (drive-api-v3.md §1.9, §1.1), end to end.

One emulator serves My Drive, two shared drives (TEAM and OTHER) and items shared
with the user; it pages listings 3 items at a time, with short and empty pages.

- ``--drive-id TEAM``: the whole tree (names, kinds, sizes, every byte) equals the
  spec's TEAM subtree; nothing of My Drive or OTHER shows.
- ``--root FOLDER`` with FOLDER inside TEAM: that subtree, listed with corpora=drive.
- ``--shared-with-me``: the top folder holds exactly the non-trashed shared items;
  they and a shared folder's children read byte-exact.
- A change in TEAM (emulator control API) shows within a few 1 s poll intervals.
- Every Drive call the client made carried supportsAllDrives=true (request log),
  listings and changes includeItemsFromAllDrives=true.

Every wait has a deadline; mounts are cleaned up by the mount_factory fixture.
"""
import json
import os

import pytest

import helpers as H
from conftest import SESSION_TOKEN

TEAM = "0ATeamDriveE2e00000000"
OTHER = "0AOtherDriveE2e0000000"
HIDDEN_PARENT = H.mkid("shared/hidden-parent")   # a folder the user cannot see
MiB = 1 << 20
POLL = 1
DEADLINE = 15


def _sid(label):
    return H.mkid("shared/" + label)


def build_spec(tmp):
    """(spec dict, spec path).  Larger files come from random bytes on disk."""
    def blob(name, size):
        p = tmp / name
        p.write_bytes(os.urandom(size))
        return str(p)

    F = H.FOLDER
    items = [
        # My Drive (must not show in the shared mounts)
        {"id": _sid("my"), "name": "my.txt", "content": "my drive\n"},
        {"id": _sid("mydir"), "name": "mydir", "mimeType": F},
        {"id": _sid("my/sc"), "name": "team data", "mimeType": H.SHORTCUT,
         "shortcutDetails": {"targetId": _sid("t/data")}},
        # TEAM
        {"id": _sid("t/top"), "name": "top.txt", "parent": TEAM, "content": "team top\n"},
        {"id": _sid("t/big"), "name": "big.bin", "parent": TEAM, "path": blob("big.bin", 3 * MiB + 7)},
        {"id": _sid("t/empty"), "name": "empty.bin", "parent": TEAM, "content": ""},
        {"id": _sid("t/data"), "name": "data", "parent": TEAM, "mimeType": F},
        {"id": _sid("t/emptydir"), "name": "emptydir", "parent": TEAM, "mimeType": F},
        {"id": _sid("t/trashed"), "name": "trashed.txt", "parent": TEAM, "content": "x", "trashed": True},
    ]
    items += [{"id": _sid("t/data/f%d" % i), "name": "f%02d.bin" % i, "parent": _sid("t/data"),
               "path": blob("f%d.bin" % i, 1000 * i + 1)} for i in range(8)]
    items += [
        {"id": _sid("t/data/sub"), "name": "sub", "parent": _sid("t/data"), "mimeType": F},
        {"id": _sid("t/data/sub/deep"), "name": "deep.bin", "parent": _sid("t/data/sub"),
         "path": blob("deep.bin", MiB)},
        # OTHER
        {"id": _sid("o/file"), "name": "other.txt", "parent": OTHER, "content": "other drive\n"},
        # Shared with me: a file whose parent is hidden, a folder with children, a trashed one
        {"id": _sid("s/file"), "name": "from-alice.bin", "sharedWithMe": True,
         "parent": HIDDEN_PARENT, "path": blob("alice.bin", 200_000)},
        {"id": _sid("s/dir"), "name": "Project", "sharedWithMe": True, "mimeType": F},
        {"id": _sid("s/dir/a"), "name": "a.txt", "parent": _sid("s/dir"), "content": "shared a\n"},
        {"id": _sid("s/dir/b"), "name": "b.bin", "parent": _sid("s/dir"), "path": blob("b.bin", 70_000)},
        {"id": _sid("s/note"), "name": "note.txt", "sharedWithMe": True, "content": "a note\n"},
        {"id": _sid("s/gone"), "name": "gone.txt", "sharedWithMe": True, "content": "g", "trashed": True},
    ]
    spec = {"root": {"id": H.ROOT_ID, "name": "My Drive"},
            "drives": [{"id": TEAM, "name": "Team"}, {"id": OTHER, "name": "Other"}],
            "items": items}
    path = tmp / "spec.json"
    path.write_text(json.dumps(spec))
    return spec, path


SWM_ROOT = "virtual:shared-with-me"


def model(spec):
    """The expected view; shared-with-me tops are children of the folder SWM_ROOT."""
    items = []
    for it in spec["items"]:
        if it.get("sharedWithMe"):
            it = dict(it, parent=SWM_ROOT)
        items.append(it)
    return H.Model(dict(spec, items=items))


def start_emulator(emulator_factory, tmp_path, name):
    spec, path = build_spec(tmp_path)
    emu = emulator_factory(path, name, access_token=SESSION_TOKEN, page_size_cap=3,
                           short_pages=True, seed=7)
    return emu, model(spec)


@pytest.fixture(scope="module")
def shared_emu(emulator_factory, tmp_path_factory):
    return start_emulator(emulator_factory, tmp_path_factory.mktemp("shared-spec"), "emu-shared")


def walk_mount(m):
    got = {}
    for dirpath, dirnames, filenames in os.walk(m.mnt):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, m.mnt)
            got[rel] = ("dir", None) if os.path.isdir(p) else ("file", os.stat(p).st_size)
    return got


def check_tree(m, mdl, folder_id):
    """The mount equals the model below folder_id: names, kinds, sizes, every byte."""
    want = {rel: ("dir", None) if n.kind == "dir" else ("file", n.size)
            for rel, n in mdl.walk(folder_id)}
    assert walk_mount(m) == want
    files = 0
    for rel, n in mdl.walk(folder_id):
        if n.kind == "file":
            H.compare_stream(m.path(rel), n)
            files += 1
    return files


def drive_calls(emu):
    return [r for r in emu.log() if r["path"].startswith("/drive/v3/")]


def check_flags(calls):
    """Every Drive call carried supportsAllDrives=true; lists and changes also
    includeItemsFromAllDrives=true."""
    assert calls
    bad = [(r["kind"], r["path"], r["query"]) for r in calls
           if r["query"].get("supportsAllDrives") != "true"]
    assert not bad, "calls without supportsAllDrives=true: %r" % bad[:5]
    for r in calls:
        if r["kind"] == "files.list" or r["path"] == "/drive/v3/changes":
            assert r["query"].get("includeItemsFromAllDrives") == "true", r
    assert not [r for r in calls if r["status"] >= 400], \
        [(r["path"], r["query"], r["status"]) for r in calls if r["status"] >= 400]


def stats(m):
    return json.loads(os.getxattr(m.mnt, "user.colabfs.stats").decode())


def test_drive_id_whole_tree(mount_factory, shared_emu):
    emu, mdl = shared_emu
    emu.reset()
    m = mount_factory.new(emu, name="drive-id", extra=["--drive-id=" + TEAM, "--poll-interval=0"])
    assert check_tree(m, mdl, TEAM) == 12
    assert "trashed.txt" not in os.listdir(m.mnt)
    calls = drive_calls(emu)
    check_flags(calls)
    lists = [r for r in calls if r["kind"] == "files.list"]
    assert lists and all(r["query"].get("corpora") == "drive" and r["query"].get("driveId") == TEAM
                         for r in lists), lists[:3]


def test_root_inside_shared_drive(mount_factory, shared_emu):
    emu, mdl = shared_emu
    emu.reset()
    m = mount_factory.new(emu, name="root-in-drive",
                          extra=["--root=" + _sid("t/data"), "--poll-interval=0", "--dir-ttl=1"])
    assert check_tree(m, mdl, _sid("t/data")) == 9
    calls = drive_calls(emu)
    check_flags(calls)
    lists = [r for r in calls if r["kind"] == "files.list"]
    assert lists and all(r["query"].get("corpora") == "drive" and r["query"].get("driveId") == TEAM
                         for r in lists), lists[:3]
    # a remount trusts the stored root (no files.get of it): the shared drive is
    # then asked for once, and listings still go to that drive
    m.umount()
    emu.reset()
    m.start()

    def relisted():
        os.listdir(m.path("sub"))
        return [r for r in drive_calls(emu) if r["kind"] == "files.list"]
    lists = H.wait_until(relisted, 30, interval=0.2, what="a listing after the remount")
    assert all(r["query"].get("corpora") == "drive" and r["query"].get("driveId") == TEAM
               for r in lists), lists[:3]
    assert check_tree(m, mdl, _sid("t/data")) == 9
    check_flags(drive_calls(emu))


def test_root_path_through_shortcut_into_shared_drive(mount_factory, shared_emu):
    """--root=/PATH whose last name is a My Drive shortcut to a shared drive's
    folder: the path is walked in My Drive, then the folder's listings go to
    its shared drive (corpora=drive, driveId), as with --root=ID."""
    emu, mdl = shared_emu
    emu.reset()
    m = mount_factory.new(emu, name="rootpath-shared",
                          extra=["--root=/team data", "--poll-interval=0"])
    assert check_tree(m, mdl, _sid("t/data")) == 9
    calls = drive_calls(emu)
    check_flags(calls)
    inside = [r for r in calls if r["kind"] == "files.list" and
              H.ROOT_ID not in r["query"].get("q", "")]
    assert inside and all(r["query"].get("corpora") == "drive" and
                          r["query"].get("driveId") == TEAM for r in inside), inside[:3]


def test_shared_with_me(mount_factory, shared_emu):
    emu, mdl = shared_emu
    emu.reset()
    m = mount_factory.new(emu, name="swm", extra=["--shared-with-me", "--poll-interval=0"])
    assert sorted(os.listdir(m.mnt)) == ["Project", "from-alice.bin", "note.txt"]
    assert check_tree(m, mdl, SWM_ROOT) == 4
    calls = drive_calls(emu)
    check_flags(calls)
    top = [r for r in calls if r["kind"] == "files.list" and "sharedWithMe" in r["query"].get("q", "")]
    assert top and all(r["query"]["q"] == "sharedWithMe = true and trashed = false" for r in top)


def test_root_options_exclude_each_other(mount_factory, shared_emu):
    emu, _ = shared_emu
    m = mount_factory.new(emu, name="excl", start=False,
                          extra=["--drive-id=" + TEAM, "--shared-with-me"])
    rc, _, err = H.run_cmd(m.argv, timeout=30, env=m.env)
    assert rc == 2 and "exclude each other" in err, (rc, err)
    assert not H.is_fuse_mounted(m.mnt)


@pytest.mark.deadline(120)
def test_shared_drive_change_shows(mount_factory, emulator_factory, tmp_path):
    emu, _ = start_emulator(emulator_factory, tmp_path, "emu-shared-changes")
    m = mount_factory.new(emu, name="drive-changes",
                          extra=["--drive-id=" + TEAM, "--poll-interval=%d" % POLL,
                                 "--dir-ttl=300", "--attr-timeout=300"])
    d = m.path("data")
    assert "added.txt" not in os.listdir(d)
    H.wait_until(lambda: stats(m)["change_polls_total"] >= 2, DEADLINE, interval=0.1,
                 what="the first polls")
    body = json.dumps({"name": "added.txt", "parent": _sid("t/data"), "content": "added in team\n"})
    st, _, out = emu.request("POST", "/_emu/items", data=body.encode(),
                             headers={"Content-Type": "application/json"})
    assert st == 200, out
    H.wait_until(lambda: "added.txt" in os.listdir(d), DEADLINE, interval=0.1,
                 what="added.txt to appear")
    with open(os.path.join(d, "added.txt"), "rb") as f:
        assert f.read() == b"added in team\n"
    body = json.dumps({"name": "top-renamed.txt"})
    st, _, out = emu.request("POST", "/_emu/items/" + _sid("t/top"), data=body.encode(),
                             headers={"Content-Type": "application/json"})
    assert st == 200, out
    H.wait_until(lambda: "top-renamed.txt" in os.listdir(m.mnt) and "top.txt" not in os.listdir(m.mnt),
                 DEADLINE, interval=0.1, what="top.txt renamed")
    calls = drive_calls(emu)
    check_flags(calls)
    changes = [r for r in calls if r["kind"] == "changes"]
    assert changes and all(r["query"].get("driveId") == TEAM for r in changes), changes[:3]


@pytest.mark.parametrize("args,want", [
    ([], "https://www.googleapis.com/auth/drive"),
    (["--read-only"], "https://www.googleapis.com/auth/drive.readonly"),
    (["--scope=drive.readonly"], "https://www.googleapis.com/auth/drive.readonly"),
    (["--read-only", "--scope=drive"], "https://www.googleapis.com/auth/drive"),
    (["--scope=https://www.googleapis.com/auth/drive.readonly"],
     "https://www.googleapis.com/auth/drive.readonly"),
])
def test_scope_reaches_the_metadata_server(mount_factory, emulator_factory, tmp_path, args, want):
    """--scope is what the token request asks for (GCE: ?scopes=; without it
    drive, or drive.readonly with --read-only), and the token it gets reads
    the shared drive."""
    emu, mdl = start_emulator(emulator_factory, tmp_path, "emu-scope")
    extra = ["--metadata-url=" + emu.url, "--drive-id=" + TEAM, "--poll-interval=0"]
    m = mount_factory.new(emu, name="scope", token=None, extra=extra + args)
    H.compare_stream(m.path("top.txt"), mdl.lookup("top.txt", TEAM))
    asked = [r["query"].get("scopes") for r in emu.log() if r["kind"] == "metadata"]
    assert asked and set(asked) == {want}, asked


def test_bad_scope_is_a_config_error(mount_factory, shared_emu):
    emu, _ = shared_emu
    m = mount_factory.new(emu, name="badscope", start=False, extra=["--scope=drive.file"])
    rc, _, err = H.run_cmd(m.argv, timeout=30, env=m.env)
    assert rc == 2 and "--scope must be" in err, (rc, err)
    assert not H.is_fuse_mounted(m.mnt)
