"""Tests of the emulator's metadata writes and write policies (emuwrite.py, emucontrol.py):
generateIds and id collisions, files.create/update/delete, trash, moves, the changes feed, the
storage limit, the write rate, read-only folders, read-only scopes, and the control calls.

Real HTTP against in-process emulators (and one command-line emulator) on port 0.
"""

import hashlib
import json
import os
import subprocess
import sys

import emuapi
import emudrive
from test_emulator import HERE, TIMEOUT, TOKEN, FakeClock, serve, wait_until
from test_emulator_upload import http_call, multipart, reason, start_session

FOLDER = emudrive.FOLDER
RO_TOKEN = "read-only-token"


def jcall(client, method, path, value=None, params=None, token=TOKEN):
    body = b"" if value is None else json.dumps(value).encode()
    status, _, reply = http_call(client, method, path, params, body, {"Content-Type": "application/json"},
                                 token)
    return status, json.loads(reply) if reply else None


def control(client, method, path, value=None):
    return jcall(client, method, path, value, token=None)


def generate(client, count=3):
    status, body = jcall(client, "GET", "/drive/v3/files/generateIds", params={"count": count})
    assert status == 200
    return body["ids"]


def create(client, meta, fields="id,name,parents,mimeType,size,md5Checksum,trashed,version"):
    return jcall(client, "POST", "/drive/v3/files", meta, {"fields": fields})


def changes_since(client, token):
    status, body = jcall(client, "GET", "/drive/v3/changes",
                         params={"pageToken": token, "fields": "changes(fileId,removed,file(name,trashed,parents))"})
    assert status == 200
    return [(c["fileId"], c["removed"], c.get("file")) for c in body["changes"]]


def start_token(client):
    return jcall(client, "GET", "/drive/v3/changes/startPageToken")[1]["startPageToken"]


# ---------------------------------------------------------------------------------------------------
# ids


def test_generate_ids_and_creates_with_them():
    with serve() as client:
        status, body = jcall(client, "GET", "/drive/v3/files/generateIds",
                             params={"count": 5, "space": "drive", "type": "files"})
        assert status == 200 and body["kind"] == "drive#generatedIds" and body["space"] == "drive"
        ids = body["ids"]
        assert len(set(ids)) == 5 and all(len(i) == 33 for i in ids)
        assert jcall(client, "GET", "/drive/v3/files/generateIds", params={"count": 1001})[0] == 400
        assert jcall(client, "GET", "/drive/v3/files/generateIds", params={"space": "photos"})[0] == 400
        status, made = create(client, {"id": ids[0], "name": "a.bin", "parents": ["dirA"]})
        assert status == 200 and made["id"] == ids[0] and made["size"] == "0"
        assert made["md5Checksum"] == hashlib.md5(b"").hexdigest()
        status, body = create(client, {"id": ids[0], "name": "again"})                 # reused
        assert status == 409 and body["error"]["code"] == 409
        detail = body["error"]["errors"][0]
        assert (detail["reason"], detail["message"]) == ("duplicate", "A file already exists with the provided ID.")
        status, body = create(client, {"id": "1NeverHandedOut00000000000000000", "name": "x"})   # unreserved
        assert status == 409 and body["error"]["message"] == "The provided file ID is not usable."
        control(client, "POST", "/_emu/uploads", {"unreserved_id_status": 400})
        status, body = create(client, {"id": "1NeverHandedOut00000000000000000", "name": "x"})
        assert status == 400 and reason(json.dumps(body).encode()) == "invalid"
        # an id reserved for an upload: used by a multipart create, then taken
        data, ctype = multipart({"id": ids[1], "name": "m"}, b"abc")
        assert http_call(client, "POST", "/upload/drive/v3/files", {"uploadType": "multipart"}, data,
                         {"Content-Type": ctype})[0] == 200
        assert http_call(client, "POST", "/upload/drive/v3/files", {"uploadType": "multipart"}, data,
                         {"Content-Type": ctype})[0] == 409
        counts = control(client, "GET", "/_emu/stats")[1]["uploads"]
        assert counts["conflicts"] == 4 and counts["generated_ids"] == 5 and counts["creates"] == 2


# ---------------------------------------------------------------------------------------------------
# create, update, trash, move, delete, changes


def test_create_update_trash_move_delete_and_the_changes_feed():
    with serve() as client:
        token = start_token(client)
        status, folder = create(client, {"name": "ckpts", "mimeType": FOLDER, "parents": ["dirA"]})
        assert status == 200 and folder["mimeType"] == FOLDER and "size" not in folder
        status, f1 = create(client, {"name": "w.bin", "parents": [folder["id"]],
                                     "modifiedTime": "2022-01-01T00:00:00.123Z"}, "id,modifiedTime")
        assert f1["modifiedTime"] == "2022-01-01T00:00:00.123Z"
        _, dup = create(client, {"name": "w.bin", "parents": [folder["id"]]})       # same name is fine
        status, renamed = jcall(client, "PATCH", f"/drive/v3/files/{f1['id']}",
                                {"name": "w2.bin", "appProperties": {"step": "7"}}, {"fields": "name,version,appProperties"})
        assert status == 200 and renamed["name"] == "w2.bin" and renamed["appProperties"] == {"step": "7"}
        status, moved = jcall(client, "PATCH", f"/drive/v3/files/{dup['id']}", {},
                              {"addParents": "root", "removeParents": folder["id"], "fields": "parents"})
        assert status == 200 and moved["parents"] == [client.emu.drive.root.id]
        status, body = jcall(client, "PATCH", f"/drive/v3/files/{dup['id']}", {"parents": ["dirA"]})
        assert status == 403 and body["error"]["errors"][0]["reason"] == "fieldNotWritable"
        status, body = jcall(client, "PATCH", f"/drive/v3/files/{dup['id']}", {}, {"addParents": "dirA"})
        assert status == 403 and body["error"]["errors"][0]["reason"] == "cannotAddParent"
        status, body = jcall(client, "PATCH", "/drive/v3/files/dirA", {},
                             {"addParents": folder["id"], "removeParents": "root"})
        assert status == 403                                                 # into its own subtree
        status, trashed = jcall(client, "PATCH", f"/drive/v3/files/{dup['id']}", {"trashed": True},
                                {"fields": "trashed"})
        assert trashed == {"trashed": True}
        _, listing = jcall(client, "GET", "/drive/v3/files", params={"q": "trashed = false", "pageSize": 1000})
        assert dup["id"] not in [f["id"] for f in listing["files"]]
        _, listing = jcall(client, "GET", "/drive/v3/files", params={"pageSize": 1000})
        assert dup["id"] in [f["id"] for f in listing["files"]]               # no q: trashed included
        feed = changes_since(client, token)
        assert [i for i, _, _ in feed] == [folder["id"], f1["id"], dup["id"], f1["id"], dup["id"], dup["id"]]
        assert feed[3][2]["name"] == "w2.bin" and feed[4][2]["parents"] == [client.emu.drive.root.id]
        assert feed[5][2]["trashed"] is True
        token = start_token(client)
        status, body = jcall(client, "DELETE", f"/drive/v3/files/{folder['id']}")
        assert (status, body) == (204, None)
        for gone in (folder["id"], f1["id"]):
            assert jcall(client, "GET", f"/drive/v3/files/{gone}")[0] == 404
        assert sorted(changes_since(client, token)) == sorted([(f1["id"], True, None), (folder["id"], True, None)])
        assert jcall(client, "DELETE", "/drive/v3/files/nope")[0] == 404
        assert jcall(client, "DELETE", "/drive/v3/files/root")[0] == 403


def test_metadata_errors():
    with serve() as client:
        assert create(client, {"name": "x", "parents": ["nope"]})[0] == 404
        assert create(client, {"name": "x", "parents": ["hello"]})[0] == 400           # not a folder
        assert create(client, {"name": "x", "parents": ["dirA", "root"]})[0] == 403
        assert create(client, {"name": "x", "size": "5"})[0] == 403                    # not writable
        assert create(client, {"name": "x", "bogus": 1})[0] == 400
        assert create(client, {"name": 5})[0] == 400
        status, _, reply = http_call(client, "POST", "/drive/v3/files", body=b"[1, 2")
        assert status == 400 and reason(reply) == "parseError"
        assert jcall(client, "PATCH", "/drive/v3/files/hello", {"modifiedTime": "yesterday"})[0] == 400


def test_names_that_are_not_unicode_are_refused():
    """JSON text is UTF-8: raw bytes that are not are a body Drive cannot parse, and a lone surrogate
    escaped in the JSON is not a name; neither makes or renames anything."""
    with serve() as client:
        before = jcall(client, "GET", "/drive/v3/files", params={"fields": "files(id,name)"})[1]
        for raw in (b'{"name": "bad\xff.bin"}', b'{"name": "over\xc0\xaflong"}',
                    b'{"name": "sur\xed\xa0\x80gate"}'):
            status, _, reply = http_call(client, "POST", "/drive/v3/files", body=raw)
            assert status == 400 and reason(reply) == "parseError", raw
            status, _, reply = http_call(client, "PATCH", "/drive/v3/files/hello", body=raw)
            assert status == 400 and reason(reply) == "parseError", raw
        status, body = create(client, {"name": "sur\ud800gate"})
        assert status == 400 and body["error"]["errors"][0]["reason"] == "invalid", body
        status, body = jcall(client, "PATCH", "/drive/v3/files/hello", {"name": "\udcff"})
        assert status == 400 and body["error"]["errors"][0]["reason"] == "invalid", body
        assert jcall(client, "GET", "/drive/v3/files", params={"fields": "files(id,name)"})[1] == before
        # a long name of multibyte characters is fine
        status, body = create(client, {"name": "é" * 200 + " 日本語 \U0001F600"})
        assert status == 200 and body["name"] == "é" * 200 + " 日本語 \U0001F600"


# ---------------------------------------------------------------------------------------------------
# storage, write rate, read-only folders, read-only scope


def test_storage_limit():
    with serve() as client:
        usage = control(client, "GET", "/_emu/storage")[1]["usage"]
        assert control(client, "POST", "/_emu/storage", {"limit": usage + 100})[1]["limit"] == usage + 100
        _, about = jcall(client, "GET", "/drive/v3/about", params={"fields": "storageQuota,maxUploadSize"})
        assert about["storageQuota"]["limit"] == str(usage + 100) and about["maxUploadSize"]
        assert http_call(client, "POST", "/upload/drive/v3/files", {"uploadType": "media"}, b"x" * 60)[0] == 200
        status, _, reply = http_call(client, "POST", "/upload/drive/v3/files", {"uploadType": "media"}, b"x" * 60)
        assert status == 403
        assert json.loads(reply)["error"] == {
            "code": 403, "message": "The user's Drive storage quota has been exceeded.",
            "errors": [{"domain": "usageLimits", "reason": "storageQuotaExceeded",
                        "message": "The user's Drive storage quota has been exceeded."}]}
        status, _, reply = http_call(client, "POST", "/upload/drive/v3/files", {"uploadType": "resumable"},
                                     b"{}", {"X-Upload-Content-Length": "1000"})
        assert status == 403 and reason(reply) == "storageQuotaExceeded"
        assert create(client, {"name": "empty folder", "mimeType": FOLDER})[0] == 200    # no bytes: fine
        control(client, "POST", "/_emu/storage", {"limit": None})
        _, about = jcall(client, "GET", "/drive/v3/about", params={"fields": "storageQuota"})
        assert "limit" not in about["storageQuota"]
        assert control(client, "GET", "/_emu/stats")[1]["uploads"]["storage_refused"] == 2


def test_write_rate_limit_on_a_fake_clock():
    clock = FakeClock()
    with serve(write_rate=2, write_burst=3) as client:
        client.emu.writes.write_quota._clock = clock
        control(client, "POST", "/_emu/write-rate", {"rate": 2, "burst": 3})     # refill on the fake clock
        results = [create(client, {"name": f"f{i}"})[0] for i in range(5)]
        assert results == [200, 200, 200, 403, 403]
        status, body = create(client, {"name": "again"})
        assert status == 403 and body == emuapi.fault_error(403).body()
        assert body["error"]["errors"][0] == {"domain": "usageLimits", "reason": "userRateLimitExceeded",
                                              "message": "User Rate Limit Exceeded"}
        assert jcall(client, "GET", "/drive/v3/files/hello")[0] == 200           # reads are not limited
        assert jcall(client, "PATCH", "/drive/v3/files/hello", {"name": "h"})[0] == 200   # nor updates
        clock.now += 0.5                                                          # one token back
        assert [create(client, {"name": "g"})[0] for _ in range(2)] == [200, 403]
        assert control(client, "GET", "/_emu/stats")[1]["uploads"]["rate_refused"] == 4
        assert control(client, "POST", "/_emu/write-rate", {"rate": 0})[1]["rate"] == 0
        assert all(create(client, {"name": "h"})[0] == 200 for _ in range(10))


def test_read_only_folder():
    spec = {"items": [{"id": "shared", "name": "Shared", "mimeType": FOLDER, "readOnly": True},
                      {"id": "sub", "name": "sub", "mimeType": FOLDER, "parent": "shared"},
                      {"id": "inner", "name": "inner.bin", "parent": "sub", "content": "ro"},
                      {"id": "mine", "name": "mine", "mimeType": FOLDER},
                      {"id": "own", "name": "own.bin", "parent": "mine", "content": "rw"}]}
    with serve(spec) as client:
        def denied(result):
            status, body = result[:2]
            body = json.loads(body) if isinstance(body, bytes) else body
            return status == 403 and body["error"]["errors"][0]["reason"] == "insufficientFilePermissions"

        assert denied(create(client, {"name": "x", "parents": ["sub"]}))
        data, ctype = multipart({"name": "x", "parents": ["shared"]}, b"x")
        assert denied(http_call(client, "POST", "/upload/drive/v3/files", {"uploadType": "multipart"}, data,
                                {"Content-Type": ctype})[::2])
        assert denied(http_call(client, "PATCH", "/upload/drive/v3/files/inner", {"uploadType": "media"}, b"y")[::2])
        assert denied(jcall(client, "PATCH", "/drive/v3/files/inner", {"name": "renamed"}))
        assert denied(jcall(client, "PATCH", "/drive/v3/files/inner", {"trashed": True}))
        assert denied(jcall(client, "DELETE", "/drive/v3/files/inner"))
        assert denied(jcall(client, "PATCH", "/drive/v3/files/inner", {}, {"addParents": "mine", "removeParents": "sub"}))
        assert denied(jcall(client, "PATCH", "/drive/v3/files/own", {}, {"addParents": "sub", "removeParents": "mine"}))
        _, caps = jcall(client, "GET", "/drive/v3/files/inner", params={"fields": "capabilities"})
        assert caps["capabilities"]["canEdit"] is False
        assert http_call(client, "GET", "/drive/v3/files/inner", {"alt": "media"})[2] == b"ro"   # reads work
        assert control(client, "POST", "/_emu/items/mine", {"readOnly": True})[0] == 200
        assert denied(jcall(client, "PATCH", "/drive/v3/files/own", {"name": "z"}))
        control(client, "POST", "/_emu/items/mine", {"readOnly": False})
        assert jcall(client, "PATCH", "/drive/v3/files/own", {"name": "z"})[0] == 200


def test_read_only_scope_refuses_every_write():
    with serve() as client:
        control(client, "POST", "/_emu/tokens", {"token": RO_TOKEN,
                                                 "scope": "https://www.googleapis.com/auth/drive.readonly"})
        session = start_session(client, {"name": "before"})                # a full-scope session
        data, ctype = multipart({"name": "m"}, b"x")
        writes = [("GET", "/drive/v3/files/generateIds", {}, b"", {}),
                  ("POST", "/drive/v3/files", {}, b'{"name": "x"}', {}),
                  ("PATCH", "/drive/v3/files/hello", {}, b'{"name": "x"}', {}),
                  ("DELETE", "/drive/v3/files/hello", {}, b"", {}),
                  ("POST", "/upload/drive/v3/files", {"uploadType": "media"}, b"x", {}),
                  ("POST", "/upload/drive/v3/files", {"uploadType": "multipart"}, data, {"Content-Type": ctype}),
                  ("POST", "/upload/drive/v3/files", {"uploadType": "resumable"}, b"{}", {}),
                  ("PATCH", "/upload/drive/v3/files/hello", {"uploadType": "media"}, b"x", {})]
        for method, path, params, body, headers in writes:
            status, _, reply = http_call(client, method, path, params, body, headers, RO_TOKEN)
            error = json.loads(reply)["error"]
            assert status == 403 and error["message"] == "Request had insufficient authentication scopes."
            assert error["errors"][0]["reason"] == "insufficientPermissions", (method, path)
        assert http_call(client, "GET", "/drive/v3/files/hello", {"alt": "media"}, token=RO_TOKEN)[0] == 200
        assert control(client, "GET", "/_emu/stats")[1]["uploads"]["scope_refused"] == len(writes)
        assert http_call(client, "PUT", session, body=b"", headers={"Content-Range": "bytes */*"},
                         token=None)[0] == 308


# ---------------------------------------------------------------------------------------------------
# control calls and the command line


def test_control_read_back_and_another_machine_changing_a_file():
    with serve() as client:
        _, item = control(client, "GET", "/_emu/items/hello")
        assert item["path"] == "/A/hello.txt" and item["size"] == 12 and len(item["revisions"]) == 1
        old_rev = item["headRevisionId"]
        control(client, "POST", "/_emu/items/hello", {"content_b64": "AAEC"})    # new content elsewhere
        _, item = control(client, "GET", "/_emu/items/hello")
        assert item["md5Checksum"] == hashlib.md5(b"\0\1\2").hexdigest()
        assert [r["id"] for r in item["revisions"]][0] == old_rev and len(item["revisions"]) == 2
        status, _, body = http_call(client, "GET", "/_emu/items/hello/content", token=None)
        assert (status, body) == (200, b"\0\1\2")
        status, _, body = http_call(client, "GET", "/_emu/items/hello/content", {"revision": old_rev}, token=None)
        assert (status, body) == (200, b"hello world\n")
        create(client, {"name": "hello.txt", "parents": ["dirA"]})
        _, found = control(client, "GET", "/_emu/find?name=hello.txt")
        assert len(found["items"]) == 2
        _, found = control(client, "GET", "/_emu/find?path=/A/hello.txt")
        assert [i["id"] for i in found["items"]][0] == "hello" and len(found["items"]) == 2
        assert control(client, "GET", "/_emu/items/nope")[0] == 404
        assert control(client, "GET", "/_emu/uploads")[1]["settings"]["session_lifetime"] == 7 * 24 * 3600
        assert control(client, "POST", "/_emu/uploads", {"unaligned_chunks": "sideways"})[0] == 400


def test_unaligned_chunks_truncate_setting():
    with serve(upload_options={"unaligned_chunks": "truncate"}) as client:
        session = start_session(client, {"name": "t"})
        data = b"z" * (256 * 1024 + 100)
        status, head, _ = http_call(client, "PUT", session, body=data,
                                    headers={"Content-Range": f"bytes 0-{len(data) - 1}/*"}, token=None)
        assert status == 308 and head["range"] == f"bytes=0-{256 * 1024 - 1}"


def test_command_line_write_flags(tmp_path):
    port_file = tmp_path / "port"
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "drive_emulator.py"), "--access-token", TOKEN,
                             "--readonly-token", RO_TOKEN, "--write-rate", "0.001", "--write-burst", "1",
                             "--storage-limit", "1000", "--port-file", str(port_file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(port_file.exists, TIMEOUT, "the port file")

        class Stub:
            class emu:
                port = int(port_file.read_text())

        status, _, _ = http_call(Stub, "POST", "/upload/drive/v3/files", {"uploadType": "media"}, b"x", token=RO_TOKEN)
        assert status == 403
        assert http_call(Stub, "POST", "/upload/drive/v3/files", {"uploadType": "media"}, b"x" * 2000)[0] == 403
        status, _, reply = http_call(Stub, "POST", "/drive/v3/files", body=b'{"name": "a"}')
        assert status == 403 and reason(reply) == "userRateLimitExceeded"      # the one token went above
    finally:
        proc.terminate()
        proc.wait(timeout=TIMEOUT)
        proc.stderr.close()


def test_unlimited_storage_has_no_limit_field():
    with serve(storage_limit=None) as client:
        _, about = jcall(client, "GET", "/drive/v3/about", params={"fields": "storageQuota"})
        assert "limit" not in about["storageQuota"]


def test_old_revisions_zero_serves_only_the_head():
    with serve(old_revisions=0) as client:
        _, before = jcall(client, "GET", "/drive/v3/files/hello", params={"fields": "headRevisionId"})
        assert http_call(client, "PATCH", "/upload/drive/v3/files/hello", {"uploadType": "media"}, b"new")[0] == 200
        status, _, _ = http_call(client, "GET", f"/drive/v3/files/hello/revisions/{before['headRevisionId']}",
                                 {"alt": "media"})
        assert status == 404
