"""The Drive client's write calls (src/drive/drive_write.c) against a real emulator process.

tests/unit/test_drive_write (a C program linked against libcolabfs.a, built here when missing) runs
one case per call; this file starts an emulator, sets its state (faults, limits, read-only folders),
runs the case and checks what the emulator holds afterwards: the bytes and md5 of every upload,
exactly one file per name, the upload counters of /_emu/stats.
"""

import errno
import hashlib
import json
import os
import subprocess

import pytest

import helpers as H

TOKEN = "write-test-token"
BIN = H.REPO / "tests" / "unit" / "test_drive_write"
MiB = 1024 * 1024


def pattern(n):
    """The bytes test_drive_write.c's pattern() makes."""
    return bytes(((i * 131 + (i >> 11) * 7 + 3) & 0xFF) for i in range(n))


@pytest.fixture(scope="module")
def program():
    subprocess.run(["make", "-s", "tests/unit/test_drive_write"], cwd=str(H.REPO), check=True,
                   stdout=subprocess.DEVNULL, timeout=600)
    return BIN


@pytest.fixture
def emu(emulator_factory, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"items": [{"name": "ro", "mimeType": "application/vnd.google-apps.folder",
                                           "readOnly": True},
                                          {"name": "dst", "mimeType": "application/vnd.google-apps.folder"}]}))
    return emulator_factory(spec, "emu-write", access_token=TOKEN, seed=7)


def run(program, emu, tmp_path, *args, env_extra=None, timeout=120):
    env = {k: v for k, v in os.environ.items()
           if k not in ("GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG", "GCE_METADATA_HOST",
                        "GCE_METADATA_ROOT")}
    env.update(COLABFS_TEST_API_URL=emu.url, COLABFS_ACCESS_TOKEN=TOKEN, HOME=str(tmp_path))
    env.update(env_extra or {})
    p = subprocess.run([str(program)] + [str(a) for a in args], env=env, capture_output=True,
                       text=True, timeout=timeout)
    out = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    assert p.returncode in (0, 3), "rc %d\n%s\n%s" % (p.returncode, p.stdout, p.stderr[-3000:])
    return out


def emu_json(emu, method, path, value=None):
    data = None if value is None else json.dumps(value).encode()
    st, _, body = emu.request(method, path, {"Content-Type": "application/json"}, data)
    assert 200 <= st < 300, "%s %s -> %s %r" % (method, path, st, body[:300])
    return json.loads(body) if body else None


def item(emu, file_id):
    return emu_json(emu, "GET", "/_emu/items/" + file_id)


def content(emu, file_id):
    st, _, body = emu.request("GET", "/_emu/items/%s/content" % file_id)
    assert st == 200
    return body


def find(emu, name):
    return emu_json(emu, "GET", "/_emu/find?name=" + name)["items"]


def uploads(emu):
    return emu.stats()["uploads"]


def folder_id(emu, name):
    (f,) = find(emu, name)
    return f["id"]


def check_file(emu, out, name, data):
    """Exactly one file called name, holding data (bytes and md5)."""
    (f,) = find(emu, name)
    assert f["id"] == out["file"]
    assert content(emu, f["id"]) == data
    md5 = hashlib.md5(data).hexdigest()
    assert f["md5Checksum"] == md5 == out["file_md5"]
    assert f["size"] == len(data) == int(out["file_size"])
    return f


def test_ids_and_idempotent_create(program, emu, tmp_path):
    out = run(program, emu, tmp_path, "ids_create")
    assert out["rc"] == "0"
    folder = item(emu, out["folder"])
    assert folder["mimeType"] == "application/vnd.google-apps.folder" and folder["name"] == "wfolder"
    (empty,) = find(emu, "empty.bin")           # created twice with one id: one file
    assert empty["id"] == out["empty"] and empty["parent"] == out["folder"] and empty["size"] == 0
    assert empty["modifiedTime"] == "2024-05-01T12:34:56.789Z"
    assert find(emu, "other.bin") == []
    u = uploads(emu)
    assert u["creates"] == 2 and u["conflicts"] == 2 and u["generated_ids"] == 3


def test_multipart(program, emu, tmp_path):
    out = run(program, emu, tmp_path, "multipart", "small.bin", 300001, "-")
    assert out["rc"] == "0"
    (f,) = find(emu, "small.bin")                # the retried create was adopted, not duplicated
    assert f["id"] == out["file"] == out["updated"]
    data = pattern(300001)[:150000]              # then new content, half of it
    assert content(emu, f["id"]) == data and f["md5Checksum"] == hashlib.md5(data).hexdigest()
    assert [r["size"] for r in f["revisions"]] == [300001, 150000]
    assert int(out["uploads"]) == 2


def test_resumable_chunks(program, emu, tmp_path):
    size = 3 * MiB + 123
    out = run(program, emu, tmp_path, "resumable", "big.bin", size, MiB, folder_id(emu, "dst"))
    assert out["rc"] == "0"
    f = check_file(emu, out, "big.bin", pattern(size))
    assert f["path"] == "/dst/big.bin"
    u = uploads(emu)
    assert u["sessions_started"] == 1 and u["chunks"] == 4 and u["uploads_completed"] == 1
    assert u["chunks_refused"] == 0
    assert int(out["upload_bytes"]) == size and int(out["upload_retries"]) == 0


def test_chunk_reset_resumed_from_status_query(program, emu, tmp_path):
    # two resets: libcurl itself resends a request once when a reused connection dies before
    # any answer; the second, on a fresh connection, reaches drive_write's status query
    emu_json(emu, "POST", "/_emu/faults",
             {"faults": ["kind=upload.chunk,after=1,count=2,reset_in_body=700000"]})
    size = 3 * MiB + 123
    out = run(program, emu, tmp_path, "resumable", "cut.bin", size, MiB, "-")
    assert out["rc"] == "0"
    check_file(emu, out, "cut.bin", pattern(size))
    u = uploads(emu)
    assert u["partial_chunks"] == 2 and u["status_queries"] == 1 and u["sessions_started"] == 1
    assert int(out["upload_retries"]) == 1
    # resumed from the 256 KiB boundary the session kept, not from the chunk's start
    assert u["bytes_received"] < size + 2 * 700000 + MiB


def test_session_expired_restarted(program, emu, tmp_path):
    size = 3 * MiB + 123
    out = run(program, emu, tmp_path, "resumable", "exp.bin", size, MiB, "-", 2 * MiB)
    assert out["rc"] == "0" and out["expired_at"] == str(2 * MiB)
    check_file(emu, out, "exp.bin", pattern(size))
    u = uploads(emu)
    assert u["sessions_started"] == 2 and u["sessions_expired"] >= 1 and u["uploads_completed"] == 1


def test_storage_limit_is_enospc(program, emu, tmp_path):
    emu_json(emu, "POST", "/_emu/storage", {"limit": 1000})
    out = run(program, emu, tmp_path, "multipart", "full.bin", 5000, "-")
    assert int(out["rc"]) == -errno.ENOSPC
    out = run(program, emu, tmp_path, "resumable", "full2.bin", 3 * MiB, MiB, "-")
    assert int(out["rc"]) == -errno.ENOSPC
    assert find(emu, "full.bin") == [] and find(emu, "full2.bin") == []
    assert uploads(emu)["storage_refused"] == 2      # permanent: not retried
    out = run(program, emu, tmp_path, "about")
    assert out["rc"] == "0" and out["limit"] == "1000"


def test_read_only_folder_is_eacces(program, emu, tmp_path):
    out = run(program, emu, tmp_path, "create", "nope", folder_id(emu, "ro"))
    assert int(out["rc"]) == -errno.EACCES
    assert find(emu, "nope") == [] and uploads(emu)["permission_refused"] == 1


def test_write_rate_waits_not_fails(program, emu, tmp_path):
    emu_json(emu, "POST", "/_emu/write-rate", {"rate": 1, "burst": 1})
    out = run(program, emu, tmp_path, "many", 6, folder_id(emu, "dst"),
              env_extra={"COLABFS_TEST_CREATE_RATE": "8"})   # faster than Drive allows
    assert out["rc"] == "0"
    for i in range(6):
        assert len(find(emu, "many-%d" % i)) == 1
    u = uploads(emu)
    assert u["rate_refused"] >= 1 and u["creates"] == 6
    # the refusals steered the creation budget, not the API one
    assert int(out["create_limited"]) >= 1 and int(out["rate_limited"]) == 0


def test_update_trash_delete(program, emu, tmp_path):
    out = run(program, emu, tmp_path, "create", "a.txt", "-", "text/plain")
    fid, dst = out["file"], folder_id(emu, "dst")
    root = item(emu, fid)["parent"]
    out = run(program, emu, tmp_path, "update", fid, "b.txt", dst, root, -1)
    assert out["rc"] == "0" and out["file_name"] == "b.txt" and out["file_parent"] == dst
    assert item(emu, fid)["path"] == "/dst/b.txt"
    out = run(program, emu, tmp_path, "update", fid, "-", "-", "-", 1)
    assert out["rc"] == "0" and item(emu, fid)["trashed"] is True
    out = run(program, emu, tmp_path, "delete", fid)
    assert out["rc"] == "0"
    st, _, _ = emu.request("GET", "/_emu/items/" + fid)
    assert st == 404
    out = run(program, emu, tmp_path, "delete", fid)
    assert int(out["rc"]) == -errno.ENOENT
    out = run(program, emu, tmp_path, "update", fid, "c.txt", "-", "-", -1)
    assert int(out["rc"]) == -errno.ENOENT
