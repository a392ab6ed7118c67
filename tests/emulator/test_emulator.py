"""Tests of the Drive emulator itself, through HTTP (urllib / http.client) against servers on port 0.

Most tests run the emulator in-process (``drive_emulator.Emulator``); one runs the command line. Every
network call has a timeout and every wait a deadline; servers are always stopped.
"""

import contextlib
import hashlib
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

import drive_emulator
import emuapi
import emuauth
import emucontent
import emudrive
import emuquery
import emuquota
import emusample

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "test-token"
TIMEOUT = 10
FOLDER = emudrive.FOLDER
DOC = "application/vnd.google-apps.document"

BASIC_SPEC = {"items": [
    {"id": "dirA", "name": "A", "mimeType": FOLDER},
    {"id": "gen", "name": "gen.bin", "parent": "dirA", "size": 300_000, "seed": 5},
    {"id": "hello", "name": "hello.txt", "parent": "dirA", "mimeType": "text/plain", "content": "hello world\n"},
    {"id": "empty", "name": "empty.bin", "parent": "dirA", "content": ""},
    {"id": "quote", "name": "it's", "parent": "dirA", "content": "q"},
    {"id": "slash", "name": "back\\slash", "parent": "dirA", "content": "b"},
    {"id": "upper", "name": "HelloWorld.TXT", "parent": "dirA", "content": "u"},
    {"id": "doc", "name": "Plan", "parent": "root", "mimeType": DOC, "content": "the plan\n"},
    {"id": "trashdir", "name": "Old", "mimeType": FOLDER, "trashed": True},
    {"id": "intrash", "name": "inner.txt", "parent": "trashdir", "content": "x"},
    {"id": "sc", "name": "link", "mimeType": emudrive.SHORTCUT, "shortcutDetails": {"targetId": "gen"}},
]}


class Client:
    def __init__(self, emu, token=TOKEN, context=None):
        self.emu, self.token, self.context = emu, token, context

    def call(self, path, params=None, headers=None, token=None, method="GET", data=None):
        """(status, headers, body bytes); HTTP errors are returned, not raised."""
        url = self.emu.base_url + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        req = urllib.request.Request(url, method=method, data=data, headers=dict(headers or {}))
        token = self.token if token is None else token
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT, context=self.context) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as err:
            with err:
                return err.code, err.headers, err.read()

    def json(self, path, params=None, **kw):
        status, _, body = self.call(path, params, **kw)
        return status, json.loads(body)


@contextlib.contextmanager
def serve(spec=BASIC_SPEC, auth=None, drive=None, tls_dir=None, **options):
    drive = drive or emudrive.Drive.from_spec(spec)
    emu = drive_emulator.Emulator(drive, auth or emuauth.Auth([TOKEN]), **options)
    emu.start(tls_dir=tls_dir)
    try:
        yield Client(emu)
    finally:
        emu.stop()


@pytest.fixture(scope="module")
def basic():
    with serve() as client:
        yield client


def error_reason(body):
    data = json.loads(body) if isinstance(body, bytes) else body
    return data["error"]["errors"][0]["reason"]


def list_all(client, params):
    """Follow nextPageToken to the end; returns (ids, page sizes)."""
    ids, sizes, token = [], [], None
    for _ in range(10_000):
        page = dict(params, pageToken=token) if token else params
        status, body = client.json("/drive/v3/files", page)
        assert status == 200, body
        ids += [f["id"] for f in body["files"]]
        sizes.append(len(body["files"]))
        token = body.get("nextPageToken")
        if not token:
            return ids, sizes
    raise AssertionError("paging did not end")


# ---------------------------------------------------------------------------------------------------
# content and parsers


def test_generated_bytes_are_random_access():
    whole = emucontent.generated_bytes(9, 0, 200_000)
    assert len(whole) == 200_000
    for offset, length in ((0, 1), (65535, 2), (65536, 70000), (131000, 69000)):
        assert emucontent.generated_bytes(9, offset, length) == whole[offset:offset + length]
    assert emucontent.generated_bytes(10, 0, 64) != whole[:64]


def test_query_parser_escapes_and_errors():
    assert emuquery.tokenize(r"name = 'it\'s a \\ b'")[2] == ("string", "it's a \\ b")
    assert emuquery.quote("a'b\\c") == r"'a\'b\\c'"
    for bad in ("name = ", "fullText contains 'x'", "name ~ 'x'", "(trashed = false", "'x' in owners",
                "name = 'unterminated", "trashed = maybe", "name < 'a'"):
        with pytest.raises(emuquery.QueryError):
            emuquery.parse_query(bad)


def test_field_mask_parser():
    assert emuquery.parse_fields("nextPageToken,files(id,name,capabilities/canDownload)") == {
        "nextPageToken": None, "files": {"id": None, "name": None, "capabilities": {"canDownload": None}}}
    assert emuquery.parse_fields("files/id,files/name") == {"files": {"id": None, "name": None}}
    assert emuquery.parse_fields("*") == {"*": None}
    for bad in ("files(id", "files(id))", "a,,b", "files/"):
        with pytest.raises(emuquery.FieldError):
            emuquery.parse_fields(bad)


# ---------------------------------------------------------------------------------------------------
# files.list


def test_paging_with_short_and_empty_pages_returns_each_child_once():
    items = [{"id": "big", "name": "big", "mimeType": FOLDER}]
    items += [{"id": f"c{i:04d}", "name": f"f{i}", "parent": "big", "content": ""} for i in range(700)]
    items += [{"id": "outside", "name": "outside", "content": ""}]
    with serve({"items": items}, short_pages=True, page_size_cap=50, seed=3) as client:
        ids, sizes = list_all(client, {"q": "'big' in parents and trashed = false", "pageSize": 1000,
                                       "fields": "nextPageToken,files(id)"})
    assert sorted(ids) == [f"c{i:04d}" for i in range(700)]
    assert len(ids) == len(set(ids))
    assert max(sizes) <= 50
    assert 0 in sizes[:-1], "expected an empty page before the end"
    assert any(0 < s < 50 for s in sizes[:-1]), "expected a short page before the end"


def test_repeat_item_expands_to_numbered_files():
    spec = {"items": [{"id": "big", "name": "big", "mimeType": FOLDER},
                      {"name": "f{i:05d}.bin", "parent": "big", "repeat": 3000, "seed": 7}]}
    drive = emudrive.Drive.from_spec(spec)
    again = emudrive.Drive.from_spec(spec)
    assert sorted(drive.items) == sorted(again.items), "ids must be deterministic"
    with serve(drive=drive, short_pages=True, page_size_cap=400, seed=1) as client:
        ids, _ = list_all(client, {"q": "'big' in parents and trashed = false", "pageSize": 1000,
                                   "fields": "nextPageToken,files(id)"})
        assert len(ids) == len(set(ids)) == 3000
        names = {drive.items[i].name for i in ids}
        assert names == {f"f{i:05d}.bin" for i in range(3000)}
        by_name = {drive.items[i].name: i for i in ids}
        for i in (0, 1, 1234, 2999):
            want = emucontent.numbered_bytes(7, i)
            assert 8 <= len(want) <= 1000
            status, body = client.json(f"/drive/v3/files/{by_name[f'f{i:05d}.bin']}",
                                       {"fields": "size,md5Checksum"})
            assert status == 200 and int(body["size"]) == len(want)
            assert body["md5Checksum"] == hashlib.md5(want).hexdigest()
            status, _, data = client.call(f"/drive/v3/files/{by_name[f'f{i:05d}.bin']}",
                                          {"alt": "media"})
            assert status == 200 and data == want
    assert emucontent.numbered_bytes(7, 5) != emucontent.numbered_bytes(8, 5)
    for bad in ({"repeat": -1}, {"repeat": 2, "content": "x"}, {"repeat": 2, "name": "same"},
                {"repeat": True}, {"repeat": 2, "id": "x"}):
        item = dict({"name": "g{i}", "parent": "big"}, **bad)
        with pytest.raises(emudrive.SpecError):
            emudrive.Drive.from_spec({"items": spec["items"][:1] + [item]})


def test_paging_page_size_and_default_order(basic):
    ids, sizes = list_all(basic, {"q": "'dirA' in parents", "pageSize": 2})
    assert ids == ["gen", "hello", "empty", "quote", "slash", "upper"]      # creation order
    assert sizes == [2, 2, 2]


def test_list_parameter_errors(basic):
    for size in ("0", "1001", "x"):
        status, body = basic.json("/drive/v3/files", {"pageSize": size})
        assert status == 400 and body["error"]["errors"][0]["location"] == "pageSize"
    status, body = basic.json("/drive/v3/files", {"pageToken": "bogus"})
    assert status == 400 and body["error"]["errors"][0]["location"] == "pageToken"
    assert error_reason(body) == "invalid"
    status, body = basic.json("/drive/v3/files", {"orderBy": "size"})
    assert status == 400


def test_list_without_q_has_trashed_items_but_not_root(basic):
    status, body = basic.json("/drive/v3/files", {"fields": "files(id,trashed,explicitlyTrashed)"})
    assert status == 200
    by_id = {f["id"]: f for f in body["files"]}
    assert set(by_id) == {i["id"] for i in BASIC_SPEC["items"]}
    assert by_id["trashdir"] == {"id": "trashdir", "trashed": True, "explicitlyTrashed": True}
    assert by_id["intrash"] == {"id": "intrash", "trashed": True, "explicitlyTrashed": False}


@pytest.mark.parametrize("q, expected", [
    ("'root' in parents and trashed = false", {"dirA", "doc", "sc"}),
    ("'root' in parents and trashed = true", {"trashdir"}),
    ("'root' in parents and trashed != false", {"trashdir"}),
    (r"name = 'it\'s'", {"quote"}),
    (r"name = 'back\\slash'", {"slash"}),
    ("name = 'HELLO.TXT'", {"hello"}),
    ("name contains 'hello'", {"hello", "upper"}),
    ("name contains 'world'", set()),
    ("mimeType = 'application/vnd.google-apps.folder'", {"dirA", "trashdir"}),
    ("mimeType contains 'google-apps' and not mimeType = 'application/vnd.google-apps.folder'",
     {"doc", "sc"}),
    ("'dirA' in parents and (name = 'gen.bin' or name = 'empty.bin')", {"gen", "empty"}),
    ("('dirA' in parents or 'trashdir' in parents) and name contains 'in'", {"intrash"}),
    ("not trashed = false and name != 'Old'", {"intrash"}),
    ("shortcutDetails.targetId = 'gen'", {"sc"}),
    ("modifiedTime > '2024-01-01T00:00:10' and trashed = false", {"sc"}),
])
def test_query_terms(basic, q, expected):
    status, body = basic.json("/drive/v3/files", {"q": q, "fields": "files(id)"})
    assert status == 200, body
    assert {f["id"] for f in body["files"]} == expected


def test_bad_query_is_400_invalid_q(basic):
    status, body = basic.json("/drive/v3/files", {"q": "fullText contains 'plan'"})
    assert status == 400
    detail = body["error"]["errors"][0]
    assert (detail["reason"], detail["location"], detail["locationType"]) == ("invalid", "q", "parameter")


def test_order_by(basic):
    _, body = basic.json("/drive/v3/files", {"q": "'dirA' in parents", "orderBy": "name desc",
                                             "fields": "files(name)"})
    names = [f["name"] for f in body["files"]]
    assert names == sorted(names, key=lambda n: (n.casefold(), n), reverse=True)
    _, body = basic.json("/drive/v3/files", {"q": "'root' in parents", "orderBy": "folder,name",
                                             "fields": "files(name)"})
    assert [f["name"] for f in body["files"]] == ["A", "Old", "link", "Plan"]


# ---------------------------------------------------------------------------------------------------
# fields


def test_default_fields(basic):
    _, body = basic.json("/drive/v3/files", {"q": "name = 'hello.txt'"})
    assert set(body) == {"kind", "incompleteSearch", "files"}
    assert body["files"] == [{"kind": "drive#file", "id": "hello", "name": "hello.txt",
                              "mimeType": "text/plain"}]
    _, body = basic.json("/drive/v3/files/hello")
    assert body == {"kind": "drive#file", "id": "hello", "name": "hello.txt", "mimeType": "text/plain"}


def test_field_selection(basic):
    _, body = basic.json("/drive/v3/files", {"q": "name = 'hello.txt'",
                                             "fields": "files(id,size,capabilities/canDownload)"})
    assert body == {"files": [{"id": "hello", "size": "12", "capabilities": {"canDownload": True}}]}
    _, body = basic.json("/drive/v3/files", {"q": "name = 'hello.txt'", "fields": "files/id"})
    assert body == {"files": [{"id": "hello"}]}
    _, body = basic.json("/drive/v3/files/hello", {"fields": "*"})
    data = b"hello world\n"
    assert body["md5Checksum"] == hashlib.md5(data).hexdigest()
    assert body["sha256Checksum"] == hashlib.sha256(data).hexdigest()
    assert body["parents"] == ["dirA"] and body["version"] == "1" and body["headRevisionId"]
    assert body["createdTime"].endswith("Z") and body["trashed"] is False
    _, body = basic.json("/drive/v3/files/sc", {"fields": "size,shortcutDetails,capabilities"})
    assert body["shortcutDetails"] == {"targetId": "gen", "targetMimeType": "application/octet-stream"}
    assert "size" not in body and body["capabilities"]["canListChildren"] is False
    _, body = basic.json("/drive/v3/files/dirA", {"fields": "size,md5Checksum,capabilities/canListChildren"})
    assert body == {"capabilities": {"canListChildren": True}}


@pytest.mark.parametrize("path, fields, bad", [
    ("/drive/v3/files", "files(id,bogus)", "bogus"),
    ("/drive/v3/files", "nextPageToken,nope", "nope"),
    ("/drive/v3/files/hello", "id,name/x", "x"),
    ("/drive/v3/files/hello", "id,flavour", "flavour"),
    ("/drive/v3/about", "user,quota", "quota"),
])
def test_invalid_field_selection_is_400(basic, path, fields, bad):
    status, body = basic.json(path, {"fields": fields})
    assert status == 400
    assert body["error"]["message"] == f"Invalid field selection {bad}"
    assert body["error"]["errors"][0]["location"] == "fields"


def test_files_get_root_alias_and_not_found(basic):
    _, body = basic.json("/drive/v3/files/root", {"fields": "id,name,parents"})
    assert body == {"id": emudrive.DEFAULT_ROOT_ID, "name": "My Drive"}
    status, body = basic.json("/drive/v3/files/nope")
    assert status == 404
    assert body["error"]["message"] == "File not found: nope."
    assert body["error"]["errors"][0]["location"] == "fileId"
    assert error_reason(body) == "notFound"


# ---------------------------------------------------------------------------------------------------
# media


GEN = emucontent.generated_bytes(5, 0, 300_000)


@pytest.mark.parametrize("range_header, status, first, last", [
    ("bytes=0-99", 206, 0, 99),
    ("bytes=299990-400000", 206, 299990, 299999),
    ("bytes=250000-", 206, 250000, 299999),
    ("bytes=-10", 206, 299990, 299999),
    ("bytes=-999999", 206, 0, 299999),
    (None, 200, 0, 299999),
    ("bytes=0-1,5-6", 200, 0, 299999),
    ("items=0-5", 200, 0, 299999),
    ("bytes=9-3", 200, 0, 299999),
])
def test_media_ranges(basic, range_header, status, first, last):
    headers = {"Range": range_header} if range_header else {}
    got, resp_headers, body = basic.call("/drive/v3/files/gen", {"alt": "media"}, headers)
    assert got == status
    assert body == GEN[first:last + 1]
    assert resp_headers["Content-Type"] == "application/octet-stream"
    if status == 206:
        assert resp_headers["Content-Range"] == f"bytes {first}-{last}/300000"
    else:
        assert resp_headers["Content-Range"] is None


@pytest.mark.parametrize("file_id, range_header, size", [
    ("gen", "bytes=300000-", 300000), ("gen", "bytes=400000-400010", 300000),
    ("empty", "bytes=0-", 0), ("empty", "bytes=0-100", 0), ("empty", "bytes=-5", 0),
])
def test_media_unsatisfiable_range_is_416(basic, file_id, range_header, size):
    status, headers, body = basic.call(f"/drive/v3/files/{file_id}", {"alt": "media"},
                                       {"Range": range_header})
    assert status == 416
    assert headers["Content-Range"] == f"bytes */{size}"
    assert error_reason(body) == "requestedRangeNotSatisfiable"


def test_empty_file_without_range(basic):
    status, _, body = basic.call("/drive/v3/files/empty", {"alt": "media"})
    assert (status, body) == (200, b"")


def test_revision_media(basic):
    _, meta = basic.json("/drive/v3/files/hello", {"fields": "headRevisionId"})
    status, _, body = basic.call(f"/drive/v3/files/hello/revisions/{meta['headRevisionId']}",
                                 {"alt": "media"}, {"Range": "bytes=6-"})
    assert (status, body) == (206, b"world\n")
    status, body = basic.json("/drive/v3/files/hello/revisions/0Bother", {"alt": "media"})
    assert status == 404 and error_reason(body) == "notFound"


# ---------------------------------------------------------------------------------------------------
# native files and export


def test_native_and_folder_media_is_403(basic):
    for file_id in ("doc", "dirA", "sc"):
        status, body = basic.json(f"/drive/v3/files/{file_id}", {"alt": "media"})
        assert status == 403
        detail = body["error"]["errors"][0]
        assert detail["reason"] == "fileNotDownloadable" and detail["location"] == "alt"
        assert detail["message"].startswith("Only files with binary content can be downloaded.")
    _, meta = basic.json("/drive/v3/files/doc", {"fields": "size,md5Checksum,exportLinks"})
    assert "size" not in meta and "md5Checksum" not in meta
    assert "text/plain" in meta["exportLinks"]


def test_export(basic):
    status, headers, body = basic.call("/drive/v3/files/doc/export", {"mimeType": "text/plain"},
                                       {"Range": "bytes=5-10"})
    assert status == 200 and headers["Content-Type"] == "text/plain"
    assert body == emucontent.export_bytes("the plan\n", "text/plain")
    _, _, pdf = basic.call("/drive/v3/files/doc/export", {"mimeType": "application/pdf"})
    assert pdf != body and pdf.endswith(b"the plan\n")
    status, body = basic.json("/drive/v3/files/doc/export", {"mimeType": "text/csv"})
    assert status == 400 and body["error"]["message"] == "The requested conversion is not supported."
    status, body = basic.json("/drive/v3/files/hello/export", {"mimeType": "text/plain"})
    assert status == 403 and error_reason(body) == "fileNotExportable"
    status, body = basic.json("/drive/v3/files/dirA/export", {"mimeType": "text/plain"})
    assert status == 403 and error_reason(body) == "fileNotExportable"


def test_export_size_limit():
    spec = {"items": [{"id": "small", "name": "small", "mimeType": DOC, "content": "x" * 50},
                      {"id": "big", "name": "big", "mimeType": DOC, "content": "x" * 200}]}
    with serve(spec, export_limit=100) as client:
        assert client.call("/drive/v3/files/small/export", {"mimeType": "text/plain"})[0] == 200
        status, body = client.json("/drive/v3/files/big/export", {"mimeType": "text/plain"})
        assert status == 403 and error_reason(body) == "exportSizeLimitExceeded"


# ---------------------------------------------------------------------------------------------------
# about, changes


def test_about(basic):
    status, body = basic.json("/drive/v3/about")
    assert status == 400
    assert body["error"]["message"] == "The 'fields' parameter is required for this method."
    _, body = basic.json("/drive/v3/about", {"fields": "user(emailAddress),storageQuota,exportFormats"})
    assert set(body) == {"user", "storageQuota", "exportFormats"}
    assert body["user"] == {"emailAddress": emudrive.USER["emailAddress"]}
    assert all(isinstance(v, str) for v in body["storageQuota"].values())
    assert "text/plain" in body["exportFormats"][DOC]


def test_control_api_changes_items():
    with serve() as client:
        _, start = client.json("/drive/v3/changes/startPageToken")

        def control(path, value, method="POST"):
            return client.json(path, method=method, data=json.dumps(value).encode(), token="")

        status, body = control("/_emu/items", {"name": "new.txt", "parent": "dirA", "content": "new"})
        assert status == 200
        new_id = body["id"]
        assert client.call(f"/drive/v3/files/{new_id}", {"alt": "media"})[2] == b"new"
        assert control("/_emu/items/hello", {"content": "changed", "trashed": True})[0] == 200
        assert control("/_emu/items/gen", {}, method="DELETE")[0] == 200
        assert control("/_emu/items/nope", {})[0] == 404
        assert control("/_emu/items", {"parent": "dirA"})[0] == 400
        _, body = client.json("/drive/v3/files/hello", {"fields": "trashed,size"})
        assert body == {"trashed": True, "size": "7"}
        _, body = client.json("/drive/v3/changes", {"pageToken": start["startPageToken"],
                                                    "fields": "changes(fileId,removed)"})
        assert body["changes"] == [{"fileId": new_id, "removed": False}, {"fileId": "hello", "removed": False},
                                   {"fileId": "gen", "removed": True}]


def test_changes_feed():
    with serve() as client:
        _, start = client.json("/drive/v3/changes/startPageToken")
        assert start["kind"] == "drive#startPageToken"
        token = start["startPageToken"]
        _, body = client.json("/drive/v3/changes", {"pageToken": token})
        assert body["changes"] == [] and body["newStartPageToken"] == token
        status, body = client.json("/drive/v3/changes")
        assert status == 400 and body["error"]["errors"][0]["location"] == "pageToken"
        client.emu.drive.update_item("hello", name="renamed.txt")
        client.emu.drive.remove_item("empty")
        _, body = client.json("/drive/v3/changes", {"pageToken": token, "pageSize": 1,
                                                    "fields": "nextPageToken,changes(fileId,removed,file/name)"})
        assert body == {"nextPageToken": str(int(token) + 1),
                        "changes": [{"fileId": "hello", "removed": False, "file": {"name": "renamed.txt"}}]}
        _, body = client.json("/drive/v3/changes", {"pageToken": body["nextPageToken"]})
        assert [(c["fileId"], c["removed"]) for c in body["changes"]] == [("empty", True)]
        assert body["newStartPageToken"] == str(int(token) + 2)
        _, body = client.json("/drive/v3/files/hello", {"fields": "name,version"})
        assert body == {"name": "renamed.txt", "version": "2"}


# ---------------------------------------------------------------------------------------------------
# auth


def test_any_token_when_no_auth_is_configured():
    with serve(auth=emuauth.Auth()) as client:
        assert client.call("/drive/v3/files/root", token="whatever")[0] == 200
        assert client.call("/drive/v3/files/root", token="")[0] == 401


def test_requests_without_valid_token_get_401(basic):
    for token in ("", "wrong"):
        status, headers, body = basic.call("/drive/v3/files", token=token)
        assert status == 401
        detail = json.loads(body)["error"]["errors"][0]
        assert (detail["reason"], detail["location"], detail["message"]) == \
            ("authError", "Authorization", "Invalid Credentials")


def post_form(client, fields, headers=None):
    data = urllib.parse.urlencode(fields).encode()
    return client.json("/token", method="POST", data=data, token="",
                       headers={"Content-Type": "application/x-www-form-urlencoded", **(headers or {})})


def test_refresh_grant_and_expiry():
    auth = emuauth.Auth(client_id="cid", client_secret="csecret", refresh_token="rtok", token_lifetime=1)
    with serve(auth=auth) as client:
        status, body = post_form(client, {"grant_type": "refresh_token", "client_id": "cid",
                                          "client_secret": "csecret", "refresh_token": "rtok"})
        assert status == 200, body
        assert body["access_token"].startswith("ya29.") and body["expires_in"] == 1
        assert body["token_type"] == "Bearer"
        token = body["access_token"]
        assert client.call("/drive/v3/files/root", token=token)[0] == 200
        deadline = time.monotonic() + 5
        while client.call("/drive/v3/files/root", token=token)[0] == 200:
            assert time.monotonic() < deadline, "token did not expire"
            time.sleep(0.1)
        assert client.call("/drive/v3/files/root", token=token)[0] == 401
        status, body = post_form(client, {"grant_type": "refresh_token", "client_id": "cid",
                                          "client_secret": "bad", "refresh_token": "rtok"})
        assert (status, body["error"]) == (401, "invalid_client")
        status, body = post_form(client, {"grant_type": "refresh_token", "client_id": "other",
                                          "client_secret": "csecret", "refresh_token": "rtok"})
        assert (status, body["error"]) == (401, "invalid_client")
        status, body = post_form(client, {"grant_type": "refresh_token", "client_id": "cid",
                                          "client_secret": "csecret", "refresh_token": "old"})
        assert (status, body["error"]) == (400, "invalid_grant")
        basic_auth = "Basic " + emuauth.base64.b64encode(b"cid:csecret").decode()
        status, body = post_form(client, {"grant_type": "refresh_token", "refresh_token": "rtok"},
                                 {"Authorization": basic_auth})
        assert status == 200


def test_refresh_grant_scope_and_tokeninfo_post():
    """--grant-scope: a refresh grant that asks for no scope gets the consented one, said in the
    reply and by tokeninfo, which takes the token in a POST form body as Google does."""
    readonly = emuauth.READONLY_SCOPE
    args = drive_emulator.parse_args(["--client-id", "cid", "--client-secret", "cs",
                                      "--refresh-token", "rt", "--grant-scope", readonly])
    assert args.grant_scope == readonly
    auth = emuauth.Auth(client_id="cid", client_secret="cs", refresh_token="rt", grant_scope=readonly)
    fields = {"grant_type": "refresh_token", "client_id": "cid", "client_secret": "cs", "refresh_token": "rt"}
    with serve(auth=auth) as client:
        status, body = post_form(client, fields)
        assert status == 200 and body["scope"] == readonly, body
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        for path in ("/tokeninfo", "/oauth2/v3/tokeninfo"):
            data = urllib.parse.urlencode({"access_token": body["access_token"]}).encode()
            status, info = client.json(path, method="POST", data=data, token="", headers=form)
            assert status == 200 and info["scope"] == readonly, info
        status, info = client.json("/tokeninfo", method="POST", data=b"access_token=nope", token="",
                                   headers=form)
        assert status == 400 and info["error"] == "invalid_token"
        # a request that names its scope gets that one
        status, body = post_form(client, {**fields, "scope": emuauth.DEFAULT_SCOPE})
        assert status == 200 and body["scope"] == emuauth.DEFAULT_SCOPE
    # without --grant-scope: the full drive scope
    with serve(auth=emuauth.Auth(client_id="cid", client_secret="cs", refresh_token="rt")) as client:
        assert post_form(client, fields)[1]["scope"] == emuauth.DEFAULT_SCOPE


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_jwt(key_dir, claims, header=None):
    header = header or {"alg": "RS256", "typ": "JWT", "kid": "k1"}
    signing_input = (emuauth.b64url_encode(json.dumps(header).encode()) + "." +
                     emuauth.b64url_encode(json.dumps(claims).encode()))
    with open(os.path.join(key_dir, "input"), "w") as f:
        f.write(signing_input)
    openssl("dgst", "-sha256", "-sign", "key.pem", "-out", "sig", "input", cwd=key_dir)
    with open(os.path.join(key_dir, "sig"), "rb") as f:
        return signing_input + "." + emuauth.b64url_encode(f.read())


def test_jwt_bearer_grant(tmp_path):
    key_dir = str(tmp_path)
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "key.pem", cwd=key_dir)
    openssl("pkey", "-in", "key.pem", "-pubout", "-out", "pub.pem", cwd=key_dir)
    email = "robot@project.iam.gserviceaccount.com"
    auth = emuauth.Auth(sa_public_key=os.path.join(key_dir, "pub.pem"), sa_email=email)
    with serve(auth=auth) as client:
        now = int(time.time())
        claims = {"iss": email, "scope": "https://www.googleapis.com/auth/drive.readonly",
                  "aud": client.emu.base_url + "/token", "iat": now, "exp": now + 3600}

        def grant(assertion):
            return post_form(client, {"grant_type": emuauth.JWT_BEARER, "assertion": assertion})

        status, body = grant(make_jwt(key_dir, claims))
        assert status == 200, body
        assert client.call("/drive/v3/files/hello", {"alt": "media"}, token=body["access_token"])[2] == \
            b"hello world\n"
        good = make_jwt(key_dir, claims)
        head, payload, sig = good.split(".")
        tampered_sig = emuauth.b64url_encode(bytes([emuauth.b64url_decode(sig)[0] ^ 1]) +
                                             emuauth.b64url_decode(sig)[1:])
        forged_claims = emuauth.b64url_encode(json.dumps(dict(claims, iss=email, scope="x y")).encode())
        for assertion in (f"{head}.{payload}.{tampered_sig}", f"{head}.{forged_claims}.{sig}",
                          make_jwt(key_dir, dict(claims, iss="other@example.com")),
                          make_jwt(key_dir, dict(claims, exp=now + 7200)),
                          make_jwt(key_dir, dict(claims, iat=now - 7200, exp=now - 3600)),
                          make_jwt(key_dir, dict(claims, aud="https://example.com/other")),
                          make_jwt(key_dir, {k: v for k, v in claims.items() if k != "scope"}),
                          "not-a-jwt"):
            status, body = grant(assertion)
            assert (status, body["error"]) == (400, "invalid_grant"), assertion


def test_https_with_generated_ca(tmp_path):
    tls_dir = str(tmp_path / "tls")
    with serve(tls_dir=tls_dir) as client:
        assert client.emu.base_url.startswith("https://")
        client.context = ssl.create_default_context(cafile=os.path.join(tls_dir, "ca.pem"))
        status, body = client.json("/drive/v3/files/hello", {"fields": "size"})
        assert (status, body) == (200, {"size": "12"})
        conn = http.client.HTTPSConnection("localhost", client.emu.port, timeout=TIMEOUT,
                                           context=client.context)
        try:
            for _ in range(2):                                   # keep-alive over TLS
                conn.request("GET", "/drive/v3/files/gen?alt=media", headers={
                    "Authorization": f"Bearer {TOKEN}", "Range": "bytes=0-9"})
                resp = conn.getresponse()
                assert resp.status == 206 and resp.read() == GEN[:10]
        finally:
            conn.close()
        untrusting = ssl.create_default_context()
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(client.emu.base_url + "/_emu/health", timeout=TIMEOUT, context=untrusting)


# ---------------------------------------------------------------------------------------------------
# stats, log, timing, faults


def test_stats_and_log(tmp_path):
    log_path = str(tmp_path / "requests.log")
    with serve(log_path=log_path) as client:
        client.call("/_emu/reset", method="POST", data=b"")
        t_start = time.monotonic()
        client.call("/drive/v3/files", {"q": "'dirA' in parents"})
        client.call("/drive/v3/files/gen", {"fields": "id"})
        client.call("/drive/v3/files/gen", {"alt": "media"}, {"Range": "bytes=0-999"})
        client.call("/drive/v3/files/gen", {"alt": "media"})
        client.call("/drive/v3/files/doc/export", {"mimeType": "text/plain"})
        client.call("/drive/v3/about", {"fields": "user"})
        client.call("/drive/v3/changes/startPageToken")
        client.call("/drive/v3/files", token="nope")
        client.call("/drive/v3/nothing")
        _, stats = client.json("/_emu/stats")
        assert stats["requests"] == 9
        assert stats["by_kind"] == dict(dict.fromkeys(drive_emulator.emufaults.KINDS, 0), **{
            "files.list": 2, "files.get": 1, "media": 2, "export": 1, "about": 1, "changes": 1, "error": 1})
        export_len = len(emucontent.export_bytes("the plan\n", "text/plain"))
        assert stats["media_bytes"] == 1000 + 300_000 + export_len
        assert stats["range_requests"] == 1
        assert stats["status"] == {"200": 6, "206": 1, "401": 1, "404": 1}
        _, log = client.json("/_emu/log")
        assert [r["kind"] for r in log][:4] == ["files.list", "files.get", "media", "media"]
        assert log[2]["range"] == "bytes=0-999" and log[2]["bytes"] == 1000 and log[2]["status"] == 206
        # each record's arrival on the monotonic clock too, in order, within this span
        monos = [r["mono"] for r in log]
        assert monos == sorted(monos) and t_start <= monos[0] and monos[-1] <= time.monotonic(), log
        client.call("/_emu/reset", method="POST", data=b"")
        _, stats = client.json("/_emu/stats")
        assert stats["requests"] == 0 and stats["media_bytes"] == 0
        assert client.json("/_emu/log")[1] == []
    with open(log_path) as f:
        lines = [json.loads(line) for line in f]
    assert len(lines) == 9
    assert {"t", "method", "path", "kind", "range", "status", "bytes"} <= set(lines[0])
    text = open(log_path).read()
    assert TOKEN not in text and "nope" not in text


def test_ttfb_and_bandwidth():
    with serve(ttfb_ms=400, bandwidth=400_000) as client:
        started = time.monotonic()
        status, _, _ = client.call("/drive/v3/files/hello", {"alt": "media"})
        assert status == 200 and time.monotonic() - started >= 0.4
        started = time.monotonic()
        client.call("/drive/v3/files/hello", {"fields": "id"})
        assert time.monotonic() - started < 0.35                 # metadata is not delayed
        started = time.monotonic()
        status, _, body = client.call("/drive/v3/files/gen", {"alt": "media"})
        elapsed = time.monotonic() - started
        assert body == GEN and 0.4 + 0.6 <= elapsed < 5          # 300 kB at 400 kB/s = 0.75 s


def test_api_latency():
    with serve(api_latency_ms=300) as client:
        started = time.monotonic()
        status, _ = client.json("/drive/v3/files/hello", {"fields": "id"})
        assert status == 200 and time.monotonic() - started >= 0.3          # metadata is delayed
        started = time.monotonic()
        status, _, _ = client.call("/drive/v3/files/hello", {"alt": "media"})
        assert status == 200 and time.monotonic() - started < 0.25          # media is not (--ttfb-ms)
        started = time.monotonic()
        client.call("/_emu/stats")
        assert time.monotonic() - started < 0.25                            # control calls are not


def test_keep_alive_and_content_length(basic):
    conn = http.client.HTTPConnection("127.0.0.1", basic.emu.port, timeout=TIMEOUT)
    try:
        for path in ("/drive/v3/files/hello?alt=media", "/drive/v3/files/nope", "/drive/v3/files/empty?alt=media",
                     "/drive/v3/files?pageSize=1"):
            conn.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
            resp = conn.getresponse()
            assert resp.getheader("Content-Length") is not None
            resp.read()
            assert not resp.will_close
    finally:
        conn.close()


def test_faults():
    faults = ["kind=media,id=gen,status=503,retry_after=2,every=2",
              "kind=media,id=hello,reset_after=5",
              "kind=files.get,truncate=1,count=1",
              "kind=about,status=403,reason=rateLimitExceeded"]
    with serve(faults=faults) as client:
        assert client.call("/drive/v3/files/gen", {"alt": "media"})[0] == 200
        status, headers, body = client.call("/drive/v3/files/gen", {"alt": "media"})
        assert (status, headers["Retry-After"], error_reason(body)) == (503, "2", "backendError")
        status, body = client.json("/drive/v3/about", {"fields": "user"})
        assert status == 403 and body["error"]["errors"][0]["domain"] == "usageLimits"
        _, _, cut = client.call("/drive/v3/files/hello")
        with pytest.raises(json.JSONDecodeError):
            json.loads(cut)
        assert client.json("/drive/v3/files/hello")[0] == 200   # count=1: only once
        with pytest.raises((http.client.IncompleteRead, ConnectionError)):
            client.call("/drive/v3/files/hello", {"alt": "media"})
        _, plan = client.json("/_emu/faults")
        assert [r["fired"] for r in plan["faults"]] == [1, 1, 1, 1]
        client.call("/_emu/faults", method="POST", data=json.dumps({"faults": []}).encode())
        assert client.call("/drive/v3/files/hello", {"alt": "media"})[2] == b"hello world\n"
        _, log = client.json("/_emu/log")
        assert log[1]["fault"] == faults[0]


def test_more_faults():
    faults = ["kind=media,id=gen,stall_ms=300,stall_after=1000,count=1",
              "kind=media,id=hello,bad_range=1",
              "kind=files.get,id=hello,drop=1,count=1",
              "kind=about,outage=0.4,after=1"]
    with serve(faults=faults) as client:
        started = time.monotonic()
        assert client.call("/drive/v3/files/gen", {"alt": "media"})[2] == GEN
        assert time.monotonic() - started >= 0.3
        status, headers, body = client.call("/drive/v3/files/hello", {"alt": "media"}, {"Range": "bytes=0-4"})
        assert (status, headers["Content-Range"], body) == (206, "bytes 1-5/12", b"hello")
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError, urllib.error.URLError)):
            client.call("/drive/v3/files/hello")
        assert client.call("/drive/v3/files/hello")[0] == 200
        assert client.call("/drive/v3/about", {"fields": "kind"})[0] == 200      # after=1
        assert client.call("/drive/v3/about", {"fields": "kind"})[0] == 503      # outage starts
        assert client.call("/drive/v3/about", {"fields": "kind"})[0] == 503
        deadline = time.monotonic() + 5
        while client.call("/drive/v3/about", {"fields": "kind"})[0] == 503:
            assert time.monotonic() < deadline, "outage did not end"
            time.sleep(0.05)


# ---------------------------------------------------------------------------------------------------
# per-user request quota, concurrency and rate counters, the three stall forms


def wait_until(cond, timeout, what):
    """Poll ``cond()`` every 20 ms until it is truthy (returned) or ``timeout`` seconds pass (fail)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.02)


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_quota_token_bucket_on_a_fake_clock():
    clock = FakeClock()
    quota = emuquota.UserQuota(2, 3, clock=clock)
    assert [quota.take("a") for _ in range(4)] == [True, True, True, False]
    assert quota.take("b")                                    # each user has a bucket
    clock.now += 0.4                                          # 0.8 of a token: not yet
    assert not quota.take("a")
    clock.now += 0.1
    assert quota.take("a") and not quota.take("a")
    clock.now += 60                                           # refills up to the burst only
    assert [quota.take("a") for _ in range(4)] == [True, True, True, False]
    quota.configure(status=429)                               # keeps the rate, fills every bucket
    assert quota.describe() == {"rate": 2.0, "burst": 3.0, "status": 429, "units": False}
    assert quota.take("a")
    quota.configure(rate=0.5)                                 # a rate alone: burst max(1, rate)
    assert quota.describe() == {"rate": 0.5, "burst": 1.0, "status": 429, "units": False}
    quota.configure(rate=0)
    assert all(quota.take("a") for _ in range(100))
    for bad in ({"rate": -1}, {"burst": 0.5}, {"status": 500}, {"rate": "x"}):
        with pytest.raises(ValueError):
            quota.configure(**bad)
    assert quota.describe() == {"rate": 0.0, "burst": 1.0, "status": 429, "units": False}
    assert emuquota.UserQuota(200).describe() == {"rate": 200.0, "burst": 200.0, "status": 403,
                                                  "units": False}


def test_rate_meter_counts_the_busiest_one_second_window():
    clock = FakeClock()
    meter = drive_emulator.RateMeter(clock=clock)
    for t in (0, 0.5, 0.9, 1.0):            # at 1.0 the event at 0 has left the window (t - 1, t]
        clock.now = 100 + t
        meter.add()
    assert meter.peak == 3
    clock.now = 101.4
    meter.add()
    assert meter.peak == 4                  # 0.5, 0.9, 1.0, 1.4
    clock.now = 103
    assert meter.current() == 0 and meter.peak == 4
    meter.reset()
    assert meter.peak == 0


QUOTA_403 = {"error": {"code": 403, "message": "User Rate Limit Exceeded", "errors": [
    {"domain": "usageLimits", "reason": "userRateLimitExceeded", "message": "User Rate Limit Exceeded"}]}}
QUOTA_429 = {"error": {"code": 429, "message": "Too Many Requests", "errors": [
    {"domain": "usageLimits", "reason": "rateLimitExceeded", "message": "Too Many Requests"}]}}


def one_of_each_kind(client):
    """One Drive API request of every kind a quota charges; returns their statuses."""
    status, meta = client.json("/drive/v3/files/hello", {"fields": "headRevisionId"})    # files.get
    calls = [("/drive/v3/files", {"q": "'dirA' in parents"}, None),
             ("/drive/v3/files/gen", {"alt": "media"}, {"Range": "bytes=0-9"}),
             ("/drive/v3/files/doc/export", {"mimeType": "text/plain"}, None),
             ("/drive/v3/about", {"fields": "user"}, None),
             ("/drive/v3/changes/startPageToken", None, None),
             (f"/drive/v3/files/hello/revisions/{meta.get('headRevisionId')}", None, None),
             ("/drive/v3/drives", None, None)]
    return [status] + [client.call(path, params, headers)[0] for path, params, headers in calls]


def test_quota_charges_every_drive_kind_and_answers_drive_403():
    auth = emuauth.Auth([TOKEN], client_id="cid", client_secret="cs", refresh_token="rt")
    # A rate so low that no token comes back during the test: the counts below are exact.
    with serve(auth=auth, user_rate=0.01, user_burst=8) as client:
        # Not charged: the token endpoint, the metadata server, /_emu/ calls, unauthorized requests.
        for _ in range(3):
            assert post_form(client, {"grant_type": "refresh_token", "client_id": "cid",
                                      "client_secret": "cs", "refresh_token": "rt"})[0] == 200
            assert client.call(emuapi.METADATA_TOKEN_PATH, headers={"Metadata-Flavor": "Google"},
                               token="")[0] == 200
            assert client.call("/_emu/stats", token="")[0] == 200
            assert client.call("/drive/v3/files/hello", token="wrong")[0] == 401
        assert one_of_each_kind(client) == [200, 200, 206, 200, 200, 200, 200, 200]   # 8 tokens
        statuses = []
        for path, params in (("/drive/v3/files/gen", {"alt": "media"}), ("/drive/v3/files", None),
                             ("/drive/v3/about", {"fields": "user"}), ("/drive/v3/drives", None)):
            status, headers, body = client.call(path, params)
            statuses.append(status)
            assert headers["Content-Type"] == "application/json; charset=UTF-8"
            assert json.loads(body) == QUOTA_403, body
        assert statuses == [403] * 4
        _, stats = client.json("/_emu/stats")
        assert stats["quota_rejected"] == 4
        _, log = client.json("/_emu/log")
        assert [r["quota_refused"] for r in log if r["kind"] not in ("token", "metadata")] == \
            [False] * 3 + [False] * 8 + [True] * 4          # the three 401s first


def test_quota_ten_requests_against_a_burst_of_five():
    with serve(user_rate=0.2, user_burst=5) as client:      # a token every 5 s: none comes back
        statuses = [client.call("/drive/v3/files/hello", {"fields": "id"})[0] for _ in range(10)]
        assert statuses == [200] * 5 + [403] * 5
        _, stats = client.json("/_emu/stats")
        assert stats["quota_rejected"] == 5 and stats["status"] == {"200": 5, "403": 5}
        client.call("/_emu/reset", method="POST", data=b"")
        assert client.json("/_emu/stats")[1]["quota_rejected"] == 0


def test_quota_is_off_by_default_and_changes_at_run_time():
    with serve() as client:
        assert client.json("/_emu/quota") == (200, {"rate": 0.0, "burst": 1.0, "status": 403,
                                                    "units": False})
        assert all(client.call("/drive/v3/files/hello", {"fields": "id"})[0] == 200 for _ in range(30))
        assert client.json("/_emu/stats")[1]["quota_rejected"] == 0

        def set_quota(**value):
            return client.json("/_emu/quota", method="POST", data=json.dumps(value).encode())

        assert set_quota(rate=0.01, burst=2, status=429) == (200, {"rate": 0.01, "burst": 2.0,
                                                                  "status": 429, "units": False})
        got = [client.call("/drive/v3/files/gen", {"alt": "media"}) for _ in range(3)]
        assert [g[0] for g in got] == [200, 200, 429]
        assert json.loads(got[2][2]) == QUOTA_429
        assert got[2][1]["Content-Type"] == "application/json; charset=UTF-8"
        for bad in ({"rate": -1}, {"status": 500}, {"burst": 0}, {"speed": 3}):
            status, body = set_quota(**bad)
            assert status == 400, (bad, body)
        assert client.json("/_emu/quota")[1] == {"rate": 0.01, "burst": 2.0, "status": 429,
                                                 "units": False}
        # The bucket refills: one token every 50 ms; wait for it (no fixed sleep).
        assert set_quota(rate=20, burst=1)[0] == 200
        assert client.call("/drive/v3/files/hello", {"fields": "id"})[0] == 200
        assert client.call("/drive/v3/files/hello", {"fields": "id"})[0] == 429
        wait_until(lambda: client.call("/drive/v3/files/hello", {"fields": "id"})[0] == 200, 5,
                   "a token to come back")
        assert set_quota(rate=0)[0] == 200
        assert all(client.call("/drive/v3/files/hello", {"fields": "id"})[0] == 200 for _ in range(20))


def test_quota_bucket_per_user(tmp_path):
    key_dir = str(tmp_path)
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "key.pem", cwd=key_dir)
    email = "robot@project.iam.gserviceaccount.com"
    auth = emuauth.Auth([TOKEN], sa_public_key=os.path.join(key_dir, "key.pem"), sa_email=email)
    with serve(auth=auth, user_rate=0.01, user_burst=1) as client:
        now = int(time.time())
        claims = {"iss": email, "scope": emuauth.DEFAULT_SCOPE, "aud": client.emu.base_url + "/token",
                  "iat": now, "exp": now + 3600}
        robot = post_form(client, {"grant_type": emuauth.JWT_BEARER,
                                   "assertion": make_jwt(key_dir, claims)})[1]["access_token"]
        assert client.call("/drive/v3/files/hello")[0] == 200
        assert client.call("/drive/v3/files/hello")[0] == 403                  # the drive's user: spent
        assert client.call("/drive/v3/files/hello", token=robot)[0] == 200     # the robot: its own bucket
        assert client.call("/drive/v3/files/hello", token=robot)[0] == 403


# Drive's quota in units (projects created since 2026-05-01): 325,000 units per minute per user.

@pytest.mark.parametrize("kind, method, path, units", [
    ("media", "GET", "/drive/v3/files/F", 200),
    ("media", "GET", "/drive/v3/files/F/revisions/R", 200),
    ("export", "GET", "/drive/v3/files/F/export", 200),
    ("files.list", "GET", "/drive/v3/files", 100),
    ("changes", "GET", "/drive/v3/changes", 100),
    ("changes", "GET", "/drive/v3/changes/startPageToken", 5),
    ("drives", "GET", "/drive/v3/drives", 100),
    ("drives", "GET", "/drive/v3/drives/0ATeam", 5),
    ("files.create", "POST", "/drive/v3/files", 50),
    ("files.update", "PATCH", "/drive/v3/files/F", 50),
    ("files.delete", "DELETE", "/drive/v3/files/F", 50),
    ("upload", "POST", "/upload/drive/v3/files", 50),
    ("upload", "PATCH", "/upload/drive/v3/files/F", 50),
    ("files.get", "GET", "/drive/v3/files/F", 5),
    ("about", "GET", "/drive/v3/about", 5),
    ("revisions.get", "GET", "/drive/v3/files/F/revisions", 5),
    ("revisions.get", "GET", "/drive/v3/files/F/revisions/R", 5),
    ("files.generateIds", "GET", "/drive/v3/files/generateIds", 5),
])
def test_units_of_a_request(kind, method, path, units):
    assert emuquota.units_of(kind, method, path) == units


def test_quota_units_on_a_fake_clock():
    clock = FakeClock()
    quota = emuquota.UserQuota(100, 1000, clock=clock, units=True)      # 100 units/s, 1000 at once
    assert quota.describe() == {"rate": 100.0, "burst": 1000.0, "status": 403, "units": True}
    assert [quota.take("a", 200) for _ in range(6)] == [True] * 5 + [False]   # five downloads
    assert quota.take("b", 200)                                               # each user has a bucket
    clock.now += 2                                                            # 200 units back
    assert quota.take("a", 200) and not quota.take("a", 200)
    clock.now += 0.125                                                        # 12.5 units: gets only
    assert not quota.take("a", 200)
    assert quota.take("a", 5) and quota.take("a", 5) and not quota.take("a", 5)
    assert [quota.take("a") for _ in range(3)] == [True, True, False]        # 2.5 left, cost 1 default
    # The default bucket holds one second's worth, but at least a download.
    assert emuquota.UserQuota(6000 / 60, units=True).describe()["burst"] == 200.0
    big = emuquota.UserQuota(emuquota.DRIVE_UNITS_PER_MINUTE / 60, units=True)
    assert big.describe()["burst"] == big.describe()["rate"] == 325_000 / 60
    # Switching units on or off without a burst sets the mode's default bucket.
    quota.configure(units=False)
    assert quota.describe() == {"rate": 100.0, "burst": 100.0, "status": 403, "units": False}
    quota.configure(rate=1, units=True)
    assert quota.describe() == {"rate": 1.0, "burst": 200.0, "status": 403, "units": True}
    quota.configure(status=429)                                               # keeps the mode and burst
    assert quota.describe() == {"rate": 1.0, "burst": 200.0, "status": 429, "units": True}
    for bad in ({"units": "yes"}, {"units": 1}, {"burst": 0}):
        with pytest.raises(ValueError):
            quota.configure(**bad)
    assert quota.describe()["units"] is True


def test_quota_units_refuse_a_download_but_not_a_get():
    auth = emuauth.Auth([TOKEN], client_id="cid", client_secret="cs", refresh_token="rt")
    # 6 units a minute (0.1 per second): too few come back during the test to change the counts.
    with serve(auth=auth, user_units=6, user_burst=515) as client:
        assert client.json("/_emu/quota")[1] == {"rate": 0.1, "burst": 515.0, "status": 403,
                                                 "units": True}
        assert post_form(client, {"grant_type": "refresh_token", "client_id": "cid",
                                  "client_secret": "cs", "refresh_token": "rt"})[0] == 200
        assert client.call("/drive/v3/files/hello", token="wrong")[0] == 401
        assert client.call("/drive/v3/files", {"q": "'dirA' in parents"})[0] == 200     # 100: 415 left
        assert client.call("/drive/v3/files/gen", {"alt": "media"},
                           {"Range": "bytes=0-9"})[0] == 206                            # 200: 215 left
        assert client.call("/drive/v3/files/hello", {"alt": "media"})[0] == 200         # 200: 15 left
        status, headers, body = client.call("/drive/v3/files/hello", {"alt": "media"})  # 200 > 15
        assert status == 403 and json.loads(body) == QUOTA_403, body
        assert headers["Content-Type"] == "application/json; charset=UTF-8"
        assert client.call("/drive/v3/files/hello", {"fields": "id"})[0] == 200         # 5: 10 left
        assert client.call("/drive/v3/files/hello", {"fields": "id"})[0] == 200         # 5: 5 left
        _, stats = client.json("/_emu/stats")
        assert stats["quota_rejected"] == 1 and stats["units_used"] == 100 + 200 + 200 + 5 + 5
        _, log = client.json("/_emu/log")
        assert [(r["kind"], r["units"], r["quota_refused"]) for r in log] == [
            ("token", 0, False), ("files.get", 0, False), ("files.list", 100, False),
            ("media", 200, False), ("media", 200, False), ("media", 0, True),
            ("files.get", 5, False), ("files.get", 5, False)]
        client.call("/_emu/reset", method="POST", data=b"")
        assert client.json("/_emu/stats")[1]["units_used"] == 0

        def set_quota(**value):
            return client.json("/_emu/quota", method="POST", data=json.dumps(value).encode())

        assert set_quota(units="yes")[0] == 400
        # Back to counting requests: one token each; the log still shows what each cost in units.
        assert set_quota(units=False, rate=0.01, burst=1) == (200, {"rate": 0.01, "burst": 1.0,
                                                                    "status": 403, "units": False})
        assert client.call("/drive/v3/files/hello", {"alt": "media"})[0] == 200
        assert client.call("/drive/v3/files/hello", {"fields": "id"})[0] == 403
        assert set_quota(rate=0)[0] == 200                                               # off
        assert client.call("/drive/v3/files", {"q": "'dirA' in parents"})[0] == 200
        assert [r["units"] for r in client.json("/_emu/log")[1]] == [200, 0, 100]
        assert client.json("/_emu/stats")[1]["units_used"] == 300
        # And units again at run time: a 200-unit bucket takes one download.
        assert set_quota(units=True, rate=0.01)[1]["burst"] == 200.0
        assert client.call("/drive/v3/files/hello", {"alt": "media"})[0] == 200
        assert client.call("/drive/v3/files/hello", {"alt": "media"})[0] == 403


def test_user_units_option():
    args = drive_emulator.parse_args(["--user-units", "325000"])
    assert args.user_units == 325000 and args.user_rate == 0 and args.user_burst is None
    assert drive_emulator.parse_args([]).user_units == 0
    assert drive_emulator.parse_args(["--user-rate", "5"]).user_rate == 5
    for argv in (["--user-units", "325000", "--user-rate", "200"],
                 ["--user-rate", "0", "--user-units", "325000"],
                 ["--user-units", "-1"]):
        with pytest.raises(SystemExit) as exc:
            drive_emulator.parse_args(argv)
        assert exc.value.code == 2, argv
    with pytest.raises(ValueError):
        drive_emulator.Emulator(emudrive.Drive(), user_rate=200, user_units=325000)
    emu = drive_emulator.Emulator(emudrive.Drive(), user_units=325000, user_rate_status=429)
    assert emu.quota.describe() == {"rate": 325000 / 60, "burst": 325000 / 60, "status": 429,
                                    "units": True}
    emu = drive_emulator.Emulator(emudrive.Drive(), user_units=6000, user_burst=1000)
    assert emu.quota.describe() == {"rate": 100.0, "burst": 1000.0, "status": 403, "units": True}


def raw_request(port, path, token=TOKEN):
    """A connected socket that has sent GET ``path``."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n"
                 .encode())
    return sock


def timed_read(port, path):
    """Send GET ``path`` on a fresh socket and read the whole response, noting when bytes arrive.
    Returns (time of the first byte, time the headers were complete, [(time, body bytes so far)],
    body), times in seconds from the request."""
    started = time.monotonic()
    sock = raw_request(port, path)
    data, first, headers_at, marks, length = b"", None, None, [], None
    try:
        while length is None or len(data) - data.index(b"\r\n\r\n") - 4 < length:
            chunk = sock.recv(65536)
            assert chunk, "connection closed early"
            now = time.monotonic() - started
            first = now if first is None else first
            data += chunk
            if headers_at is None and b"\r\n\r\n" in data:
                headers_at = now
                head = data[:data.index(b"\r\n\r\n")].decode()
                length = int([ln.split(":")[1] for ln in head.split("\r\n")
                              if ln.lower().startswith("content-length:")][0])
            if headers_at is not None:
                marks.append((now, len(data) - data.index(b"\r\n\r\n") - 4))
    finally:
        sock.close()
    return first, headers_at, marks, data[data.index(b"\r\n\r\n") + 4:]


def test_stall_before_the_status_line_sends_nothing():
    with serve(ttfb_ms=200, faults=["kind=media,stall_ms=600"]) as client:
        first, headers_at, _, body = timed_read(client.emu.port, "/drive/v3/files/hello?alt=media")
        assert body == b"hello world\n"
        assert first >= 0.8                               # not one byte during the stall and the ttfb


def test_stall_after_zero_bytes_sends_the_headers_first():
    with serve(ttfb_ms=200, faults=["kind=media,stall_ms=1000,stall_after=0"]) as client:
        first, headers_at, marks, body = timed_read(client.emu.port, "/drive/v3/files/gen?alt=media")
        assert body == GEN
        first_body = next(t for t, n in marks if n > 0)
        assert first >= 0.2                               # the ttfb, then the status line and headers
        assert first_body - headers_at >= 0.5             # ... long before the first body byte


def test_stall_after_some_body_bytes():
    with serve(faults=["kind=media,stall_ms=1000,stall_after=1000"]) as client:
        _, headers_at, marks, body = timed_read(client.emu.port, "/drive/v3/files/gen?alt=media")
        assert body == GEN
        assert max(n for _, n in marks if n <= 1000) == 1000
        at_1000 = next(t for t, n in marks if n == 1000)
        after = next(t for t, n in marks if n > 1000)
        assert after - at_1000 >= 0.5 and at_1000 - headers_at < after - at_1000


@pytest.mark.parametrize("options, path, wait_for", [
    ({"faults": ["kind=media,stall_ms=30000"]}, "hello", b""),
    ({"faults": ["kind=media,stall_ms=30000,stall_after=0"]}, "gen", b"\r\n\r\n"),
    ({"faults": ["kind=media,stall_ms=30000,stall_after=1000"]}, "gen", b"\r\n\r\n" + GEN[:1000]),
    ({"ttfb_ms": 30000}, "hello", b""),
], ids=["before-status-line", "after-headers", "after-1000-bytes", "ttfb"])
def test_client_close_ends_a_stall(options, path, wait_for):
    with serve(**options) as client:
        def stats():
            return client.json("/_emu/stats")[1]

        sock = raw_request(client.emu.port, f"/drive/v3/files/{path}?alt=media")
        try:
            wait_until(lambda: stats()["concurrent_media"] == 1, 10, "the request to arrive")
            data = b""
            while not data.endswith(wait_for):              # the server is now in the stall
                chunk = sock.recv(65536)
                assert chunk, "closed early"
                data += chunk
        finally:
            sock.close()
        started = time.monotonic()
        wait_until(lambda: stats()["concurrent"] == 0, 10, "the stalled request to end")
        assert time.monotonic() - started < 10            # far from the 30 s stall
        assert stats()["cancelled"] == 1
        record = client.json("/_emu/log")[1][-1]
        assert record["cancelled"] is True and record["kind"] == "media"
        assert record["status"] == (0 if wait_for == b"" else 200)
        assert record["bytes"] == (1000 if wait_for.endswith(GEN[:1000]) else 0)


def test_concurrency_and_rate_counters():
    with serve(faults=["kind=media,stall_ms=30000"]) as client:
        def stats():
            return client.json("/_emu/stats")[1]

        socks = [raw_request(client.emu.port, "/drive/v3/files/hello?alt=media") for _ in range(3)]
        try:
            wait_until(lambda: stats()["concurrent_media"] == 3, 10, "three stalled downloads")
            assert client.call("/drive/v3/files/hello", {"fields": "id"})[0] == 200
            # the reply reaches the client before its handler has counted it done
            now = wait_until(lambda: (lambda st: st if st["concurrent"] == 3 else None)(stats()),
                             10, "the files.get to be counted done")
            assert (now["concurrent"], now["concurrent_media"]) == (3, 3)
            assert (now["max_concurrent"], now["max_concurrent_media"]) == (4, 3)
            assert 1 <= now["max_requests_per_s"] <= 4
            client.call("/_emu/reset", method="POST", data=b"")
            now = stats()                                    # the peaks restart from what is in flight
            assert (now["max_concurrent"], now["max_concurrent_media"], now["max_requests_per_s"]) == \
                (3, 3, 0)
        finally:
            for sock in socks:
                sock.close()
        wait_until(lambda: stats()["concurrent"] == 0, 10, "the stalls to end")
        assert stats()["cancelled"] == 3
        for _ in range(5):
            client.call("/drive/v3/files/hello", {"fields": "id"})
        assert stats()["requests_last_s"] <= 5 and 1 <= stats()["max_requests_per_s"] <= 5


# ---------------------------------------------------------------------------------------------------
# other content sources, the command line


def test_tree_mode_ids_are_stable(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_bytes(b"alpha")
    (tmp_path / "b.bin").write_bytes(b"\0" * 10)
    first, second = emudrive.Drive.from_tree(str(tmp_path)), emudrive.Drive.from_tree(str(tmp_path))
    assert set(first.items) == set(second.items)
    ids = [i for i in first.items if i != emudrive.DEFAULT_ROOT_ID]
    assert all(len(i) == 33 and all(c.isalnum() or c in "-_" for c in i) for i in ids)
    with serve(drive=first) as client:
        _, body = client.json("/drive/v3/files", {"q": "'root' in parents", "fields": "files(id,name)"})
        sub = {f["name"]: f["id"] for f in body["files"]}["sub"]
        _, body = client.json("/drive/v3/files", {"q": f"'{sub}' in parents", "fields": "files(id,mimeType)"})
        [child] = body["files"]
        assert child["mimeType"] == "text/plain"
        assert client.call(f"/drive/v3/files/{child['id']}", {"alt": "media"})[2] == b"alpha"


def test_sample_drive(tmp_path):
    spec = emusample.write_sample(str(tmp_path))
    with serve(spec) as client:
        _, body = client.json("/drive/v3/files", {"q": "name = 'Many'", "fields": "files(id)"})
        ids, _ = list_all(client, {"q": f"'{body['files'][0]['id']}' in parents", "pageSize": 1000})
        assert len(ids) == emusample.MANY_FILES
        _, body = client.json("/drive/v3/files", {"q": "name = 'blob.bin'", "fields": "files(id,size,md5Checksum)"})
        [blob] = body["files"]
        data = emucontent.generated_bytes(emusample.BLOB_SEED, 0, emusample.BLOB_SIZE)
        assert blob["size"] == str(len(data)) and blob["md5Checksum"] == hashlib.md5(data).hexdigest()
        _, body = client.json("/drive/v3/files", {"q": "name = 'report.txt'", "fields": "files(id)"})
        assert len(body["files"]) == 2
        _, body = client.json("/drive/v3/files", {"q": "mimeType = 'application/vnd.google-apps.shortcut'"})
        assert len(body["files"]) == 2


def test_command_line(tmp_path):
    spec_path = tmp_path / "spec.json"
    (tmp_path / "data.bin").write_bytes(b"0123456789")
    spec_path.write_text(json.dumps({"items": [{"id": "f", "name": "data.bin", "path": "data.bin"}]}))
    port_file = tmp_path / "port"
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "drive_emulator.py"), "--spec", str(spec_path),
                             "--port-file", str(port_file), "--access-token", "cli-token", "--seed", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        while not port_file.exists():
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "no port file"
            time.sleep(0.05)
        port = int(port_file.read_text())
        req = urllib.request.Request(f"http://127.0.0.1:{port}/drive/v3/files/f?alt=media",
                                     headers={"Authorization": "Bearer cli-token", "Range": "bytes=2-4"})
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            assert (resp.status, resp.read()) == (206, b"234")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        proc.stderr.close()


def test_metadata_server_token(basic):
    """The metadata endpoint needs Metadata-Flavor: Google, echoes it, and its
    tokens work on the Drive API."""
    path = "/computeMetadata/v1/instance/service-accounts/default/token"
    st, _, _ = basic.call(path, token="")
    assert st == 403
    st, headers, body = basic.call(path, headers={"Metadata-Flavor": "Google"}, token="")
    assert st == 200, body
    assert headers.get("Metadata-Flavor") == "Google"
    tok = json.loads(body)["access_token"]
    st, _, _ = basic.call("/drive/v3/files/root", {"fields": "id"}, token=tok)
    assert st == 200


def test_metadata_scope_forced():
    """--metadata-scope: the metadata server's tokens have that scope whatever ?scopes= asks (the
    reply says none, as on GCE); one without Drive gets 403 insufficientPermissions from Drive."""
    cloud = "https://www.googleapis.com/auth/cloud-platform"
    args = drive_emulator.parse_args(["--access-token", "t", "--metadata-scope", cloud])
    assert args.metadata_scope == cloud
    path = "/computeMetadata/v1/instance/service-accounts/default/token"
    with serve(auth=emuauth.Auth(["t"], metadata_scope=cloud)) as client:
        st, _, body = client.call(path, {"scopes": emuauth.DEFAULT_SCOPE},
                                  headers={"Metadata-Flavor": "Google"}, token="")
        assert st == 200 and "scope" not in json.loads(body), body
        tok = json.loads(body)["access_token"]
        st, _, body = client.call("/drive/v3/about", {"fields": "user"}, token=tok)
        assert st == 403 and b"insufficientPermissions" in body, body
    # without it: the scope asked for
    with serve(auth=emuauth.Auth(["t"])) as client:
        st, _, body = client.call(path, {"scopes": emuauth.DEFAULT_SCOPE},
                                  headers={"Metadata-Flavor": "Google"}, token="")
        tok = json.loads(body)["access_token"]
        assert client.call("/drive/v3/about", {"fields": "user"}, token=tok)[0] == 200


# ---------------------------------------------------------------------------------------------------
# shared drives and "Shared with me" (drive-api-v3.md §1.9, §1.1)

TEAM, OTHER = "0ATeamDrive00000000000000", "0AOtherDrive0000000000000"
SHARED_SPEC = {
    "drives": [{"id": TEAM, "name": "Team"}, {"id": OTHER, "name": "Other"}],
    "items": [
        {"id": "mine", "name": "mine.txt", "content": "mine"},
        {"id": "tdir", "name": "data", "parent": TEAM, "mimeType": FOLDER},
        {"id": "tfile", "name": "t.bin", "parent": "tdir", "size": 5000, "seed": 3},
        {"id": "ttop", "name": "top.txt", "parent": TEAM, "content": "top"},
        {"id": "ofile", "name": "o.txt", "parent": OTHER, "content": "other"},
        {"id": "swm", "name": "shared.txt", "sharedWithMe": True, "parent": "hiddenFolder", "content": "s"},
        {"id": "swmdir", "name": "SharedDir", "sharedWithMe": True, "mimeType": FOLDER},
        {"id": "swmin", "name": "inside.txt", "parent": "swmdir", "content": "in"},
        {"id": "swmtrash", "name": "gone.txt", "sharedWithMe": True, "trashed": True, "content": "g"},
    ]}
ALL = {"supportsAllDrives": "true", "includeItemsFromAllDrives": "true"}


@pytest.fixture(scope="module")
def shared():
    with serve(SHARED_SPEC) as client:
        yield client


def test_shared_drive_item_needs_supports_all_drives(shared):
    for file_id in ("tfile", TEAM):
        status, body = shared.json(f"/drive/v3/files/{file_id}", {"fields": "id"})
        assert status == 404 and error_reason(body) == "notFound"
    status, _, _ = shared.call("/drive/v3/files/tfile", {"alt": "media"})
    assert status == 404
    status, body = shared.json("/drive/v3/files/tfile", {"fields": "id,driveId,owners,parents",
                                                         "supportsAllDrives": "true"})
    assert status == 200 and body == {"id": "tfile", "driveId": TEAM, "parents": ["tdir"]}
    status, _, data = shared.call("/drive/v3/files/tfile", {"alt": "media", "supportsAllDrives": "true"})
    assert status == 200 and data == emucontent.generated_bytes(3, 0, 5000)
    _, body = shared.json(f"/drive/v3/files/{TEAM}", {"fields": "id,name,mimeType,driveId",
                                                      "supportsAllDrives": "true"})
    assert body == {"id": TEAM, "name": "Team", "mimeType": FOLDER, "driveId": TEAM}
    # My Drive items need no flag and have owners, no driveId
    _, body = shared.json("/drive/v3/files/mine", {"fields": "id,driveId,owners(me)"})
    assert body == {"id": "mine", "owners": [{"me": True}]}


def test_list_corpora_drive(shared):
    ids, _ = list_all(shared, dict(ALL, corpora="drive", driveId=TEAM, fields="files(id)"))
    assert sorted(ids) == ["tdir", "tfile", "ttop"]
    ids, _ = list_all(shared, dict(ALL, corpora="drive", driveId=TEAM, q=f"'{TEAM}' in parents",
                                   fields="files(id)"))
    assert sorted(ids) == ["tdir", "ttop"]
    ids, _ = list_all(shared, dict(ALL, corpora="drive", driveId=OTHER, fields="files(id)"))
    assert ids == ["ofile"]


def test_list_shared_drive_rules(shared):
    # driveId without includeItemsFromAllDrives: 400
    status, body = shared.json("/drive/v3/files", {"corpora": "drive", "driveId": TEAM,
                                                   "supportsAllDrives": "true"})
    assert status == 400 and error_reason(body) == "teamDriveIncludeItemsRequired"
    # corpora=drive without driveId: 400 required
    status, body = shared.json("/drive/v3/files", dict(ALL, corpora="drive"))
    assert status == 400 and error_reason(body) == "required"
    # an unknown drive, or one without supportsAllDrives: 404
    status, body = shared.json("/drive/v3/files", dict(ALL, corpora="drive", driveId="0ANope"))
    assert status == 404 and error_reason(body) == "notFound"
    status, _ = shared.json("/drive/v3/files", {"corpora": "drive", "driveId": TEAM,
                                                "includeItemsFromAllDrives": "true"})
    assert status == 404
    status, body = shared.json("/drive/v3/files", dict(ALL, corpora="bogus"))
    assert status == 400
    # the user corpus leaves shared-drive items out, even with the flags
    q = "'tdir' in parents"
    for params in ({"q": q}, dict(ALL, q=q), {"q": q, "corpora": "allDrives"}):
        ids, _ = list_all(shared, dict(params, fields="files(id)"))
        assert ids == []
    ids, _ = list_all(shared, dict(ALL, corpora="allDrives", q=q, fields="files(id)"))
    assert ids == ["tfile"]
    ids, _ = list_all(shared, {"q": "trashed = false", "fields": "files(id)"})
    assert sorted(ids) == ["mine", "swm", "swmdir", "swmin"]


def test_shared_with_me(shared):
    ids, _ = list_all(shared, {"q": "sharedWithMe = true", "fields": "files(id)"})
    assert sorted(ids) == ["swm", "swmdir", "swmtrash"]
    ids, _ = list_all(shared, {"q": "sharedWithMe = true and trashed = false", "fields": "files(id)"})
    assert sorted(ids) == ["swm", "swmdir"]
    ids, _ = list_all(shared, {"q": f"sharedWithMe = true and mimeType = '{FOLDER}'", "fields": "files(id)"})
    assert ids == ["swmdir"]
    ids, _ = list_all(shared, {"q": "not sharedWithMe = true and trashed = false", "fields": "files(id)"})
    assert sorted(ids) == ["mine", "swmin"]
    # a parent the user cannot see is not reported; a shared folder lists normally
    _, body = shared.json("/drive/v3/files/swm", {"fields": "id,parents,shared,ownedByMe,sharedWithMeTime"})
    assert body["id"] == "swm" and "parents" not in body and body["shared"] is True
    assert body["ownedByMe"] is False and body["sharedWithMeTime"].endswith("Z")
    ids, _ = list_all(shared, {"q": "'swmdir' in parents and trashed = false", "fields": "files(id)"})
    assert ids == ["swmin"]
    assert shared.call("/drive/v3/files/swm", {"alt": "media"})[2] == b"s"


def test_drives_get_and_list(shared):
    status, body = shared.json(f"/drive/v3/drives/{TEAM}")
    assert status == 200 and body == {"kind": "drive#drive", "id": TEAM, "name": "Team"}
    status, body = shared.json("/drive/v3/drives/0ANope")
    assert status == 404 and body["error"]["errors"][0]["location"] == "driveId"
    status, body = shared.json("/drive/v3/drives", {"pageSize": 1, "fields": "nextPageToken,drives(id)"})
    assert status == 200 and body["drives"] == [{"id": TEAM}]
    _, body = shared.json("/drive/v3/drives", {"pageSize": 1, "pageToken": body["nextPageToken"]})
    assert [d["id"] for d in body["drives"]] == [OTHER] and "nextPageToken" not in body
    assert shared.json("/drive/v3/drives", {"pageSize": 101})[0] == 400
    assert shared.emu.stats.snapshot()["by_kind"]["drives"] >= 4


def test_shared_drive_changes():
    with serve(SHARED_SPEC) as client:
        status, body = client.json("/drive/v3/changes/startPageToken", {"driveId": TEAM})
        assert status == 404
        _, start = client.json("/drive/v3/changes/startPageToken", {"driveId": TEAM,
                                                                    "supportsAllDrives": "true"})
        token = start["startPageToken"]
        _, my_start = client.json("/drive/v3/changes/startPageToken")
        client.emu.drive.update_item("tfile", name="renamed.bin")
        client.emu.drive.add_item({"id": "onew", "name": "n.txt", "parent": OTHER, "content": "n"})
        client.emu.drive.update_item("mine", name="mine2.txt")
        client.emu.drive.remove_item("ttop")
        fields = "newStartPageToken,changes(fileId,removed,driveId,file(name,driveId))"
        status, body = client.json("/drive/v3/changes", {"pageToken": token, "driveId": TEAM,
                                                         "supportsAllDrives": "true", "fields": fields})
        assert status == 400 and error_reason(body) == "teamDriveIncludeItemsRequired"
        status, body = client.json("/drive/v3/changes", dict(ALL, pageToken=token, driveId=TEAM, fields=fields))
        assert status == 200
        assert body["changes"] == [
            {"fileId": "tfile", "removed": False, "driveId": TEAM, "file": {"name": "renamed.bin", "driveId": TEAM}},
            {"fileId": "ttop", "removed": True, "driveId": TEAM}]
        # the user's feed: My Drive only, unless both flags ask for every drive
        _, body = client.json("/drive/v3/changes", {"pageToken": my_start["startPageToken"],
                                                    "fields": "changes(fileId)"})
        assert body["changes"] == [{"fileId": "mine"}]
        _, body = client.json("/drive/v3/changes", dict(ALL, pageToken=my_start["startPageToken"],
                                                        fields="changes(fileId)"))
        assert [c["fileId"] for c in body["changes"]] == ["tfile", "onew", "mine", "ttop"]


def test_shared_spec_errors():
    with pytest.raises(emudrive.SpecError):
        emudrive.Drive.from_spec({"drives": [{"id": "1NotADrive", "name": "x"}]})
    with pytest.raises(emudrive.SpecError):
        emudrive.Drive.from_spec({"items": [{"name": "x", "parent": "nowhere"}]})
    drive = emudrive.Drive.from_spec({"items": [{"name": "x", "parent": "nowhere", "sharedWithMe": True}]})
    assert len(drive.items) == 2
