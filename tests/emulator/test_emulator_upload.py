"""Tests of the emulator's uploads (emuupload.py): media, multipart, resumable sessions with their
308/Range protocol, cut chunks, lost answers, expiry, and faults on upload requests.

Real HTTP (http.client) against in-process emulators on port 0; every call has a timeout, every
wait a deadline. Shared helpers (``serve``, ``TOKEN``, ``FakeClock``) come from test_emulator.py.
"""

import base64
import hashlib
import http.client
import json
import time
from urllib.parse import urlencode, urlsplit

import pytest

import emucontent
import emufaults
from test_emulator import TIMEOUT, TOKEN, FakeClock, serve, wait_until

KIB256 = 256 * 1024
FIELDS = "id,name,size,md5Checksum,headRevisionId,parents,modifiedTime,mimeType,version"


def http_call(client, method, path, params=None, body=b"", headers=None, token=TOKEN, chunked=False):
    """(status, headers with lower-case names, body); raises on a reset or closed connection."""
    conn = http.client.HTTPConnection("127.0.0.1", client.emu.port, timeout=TIMEOUT)
    try:
        url = path + ("?" + urlencode(params) if params else "")
        head = dict(headers or {})
        if token:
            head["Authorization"] = f"Bearer {token}"
        if chunked:
            conn.request(method, url, body=iter([body[:1000], body[1000:]]), headers=head,
                         encode_chunked=True)
        else:
            conn.request(method, url, body=body, headers=head)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def reason(body):
    return json.loads(body)["error"]["errors"][0]["reason"]


def multipart(meta, media, boundary="emu-b0undary", media_type="application/octet-stream", extra=b""):
    head = (f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{json.dumps(meta)}\r\n"
            f"--{boundary}\r\nContent-Type: {media_type}\r\n{extra.decode()}\r\n").encode()
    return head + media + f"\r\n--{boundary}--\r\n".encode(), f"multipart/related; boundary={boundary}"


def start_session(client, meta, total=None, file_id=None, params=None):
    """Initiate a resumable upload; returns the session path (+query) on the emulator."""
    headers = {"X-Upload-Content-Type": "application/octet-stream", "Content-Type": "application/json"}
    if total is not None:
        headers["X-Upload-Content-Length"] = str(total)
    path = "/upload/drive/v3/files" + (f"/{file_id}" if file_id else "")
    status, head, body = http_call(client, "PATCH" if file_id else "POST", path,
                                   dict({"uploadType": "resumable", "fields": FIELDS}, **(params or {})),
                                   json.dumps(meta).encode(), headers)
    assert status == 200 and body == b"", body
    assert head["x-guploader-uploadid"] in head["location"]
    parts = urlsplit(head["location"])
    return f"{parts.path}?{parts.query}"


def put(client, session, data, first=None, total="*"):
    """PUT a chunk (``first`` None: a status query) to the session URI, without a bearer token."""
    if first is None:
        content_range = f"bytes */{total}"
    else:
        content_range = f"bytes {first}-{first + len(data) - 1}/{total}"
    return http_call(client, "PUT", session, body=data, headers={"Content-Range": content_range}, token=None)


def payload(n, seed=1):
    return emucontent.generated_bytes(seed, 0, n)


def stats(client):
    return json.loads(http_call(client, "GET", "/_emu/stats", token=None)[2])["uploads"]


# ---------------------------------------------------------------------------------------------------
# media and multipart


def test_media_upload_creates_untitled_in_root_and_update_makes_a_new_revision():
    with serve() as client:
        status, _, body = http_call(client, "POST", "/upload/drive/v3/files",
                                    {"uploadType": "media", "fields": FIELDS}, b"first bytes",
                                    {"Content-Type": "text/plain"})
        created = json.loads(body)
        assert status == 200 and created["name"] == "Untitled" and created["mimeType"] == "text/plain"
        assert created["parents"] == [client.emu.drive.root.id] and created["size"] == "11"
        assert created["md5Checksum"] == hashlib.md5(b"first bytes").hexdigest()
        file_id, old_rev = created["id"], created["headRevisionId"]
        status, _, body = http_call(client, "PATCH", f"/upload/drive/v3/files/{file_id}",
                                    {"uploadType": "media", "fields": FIELDS}, b"second, longer bytes")
        updated = json.loads(body)
        assert status == 200 and updated["headRevisionId"] != old_rev
        assert int(updated["version"]) > int(created["version"]) and updated["size"] == "20"
        assert updated["md5Checksum"] == hashlib.md5(b"second, longer bytes").hexdigest()
        assert updated["name"] == "Untitled"
        assert http_call(client, "GET", f"/drive/v3/files/{file_id}", {"alt": "media"})[2] == \
            b"second, longer bytes"
        # the old revision is no longer the file's content, but revisions.get still serves it
        status, _, body = http_call(client, "GET", f"/drive/v3/files/{file_id}/revisions/{old_rev}",
                                    {"alt": "media"})
        assert (status, body) == (200, b"first bytes")
        _, _, body = http_call(client, "GET", f"/drive/v3/files/{file_id}/revisions",
                               {"fields": "revisions(id,size)"})
        assert json.loads(body)["revisions"] == [{"id": old_rev, "size": "11"},
                                                 {"id": updated["headRevisionId"], "size": "20"}]


def test_multipart_round_trip_and_base64_media():
    with serve() as client:
        media = payload(70_000)
        body, ctype = multipart({"name": "m.bin", "parents": ["dirA"], "modifiedTime": "2023-02-03T04:05:06.789Z",
                                 "appProperties": {"k": "v"}}, media)
        status, _, reply = http_call(client, "POST", "/upload/drive/v3/files",
                                     {"uploadType": "multipart", "fields": FIELDS + ",appProperties"}, body,
                                     {"Content-Type": ctype})
        meta = json.loads(reply)
        assert status == 200, reply
        assert (meta["name"], meta["parents"], meta["size"]) == ("m.bin", ["dirA"], "70000")
        assert meta["md5Checksum"] == hashlib.md5(media).hexdigest()
        assert meta["modifiedTime"] == "2023-02-03T04:05:06.789Z" and meta["appProperties"] == {"k": "v"}
        assert meta["mimeType"] == "application/octet-stream"
        assert http_call(client, "GET", f"/drive/v3/files/{meta['id']}", {"alt": "media"})[2] == media
        body, ctype = multipart({"name": "b64.txt"}, base64.b64encode(b"decoded"), boundary='"quoted b"'[1:-1],
                                media_type="text/plain", extra=b"Content-Transfer-Encoding: base64\r\n")
        status, _, reply = http_call(client, "POST", "/upload/drive/v3/files",
                                     {"uploadType": "multipart", "fields": "id,mimeType,size"}, body,
                                     {"Content-Type": 'multipart/related; boundary="quoted b"'})
        assert status == 200, reply
        meta = json.loads(reply)
        assert (meta["mimeType"], meta["size"]) == ("text/plain", "7")


@pytest.mark.parametrize("mangle", [
    lambda b: b.replace(b"--emu-b0undary--", b"--emu-b0undary"),        # no close delimiter
    lambda b: b.replace(b"application/json", b"text/plain"),            # part 1 is not JSON
    lambda b: b.split(b"\r\n--emu-b0undary\r\n")[0] + b"\r\n--emu-b0undary--",   # one part only
    lambda b: b.replace(b"\r\n\r\n", b"\r\n", 1).replace(b"charset=UTF-8", b"x y"),   # broken header
    lambda b: b"garbage",
])
def test_malformed_multipart_is_400(mangle):
    with serve() as client:
        body, ctype = multipart({"name": "x"}, b"data")
        status, _, reply = http_call(client, "POST", "/upload/drive/v3/files", {"uploadType": "multipart"},
                                     mangle(body), {"Content-Type": ctype})
        assert status == 400 and reason(reply) == "badRequest"
        assert json.loads(reply)["error"]["message"] == "Malformed multipart body."


def test_multipart_errors_other_than_structure():
    with serve() as client:
        body, ctype = multipart({"name": "x"}, b"data")
        call = (lambda b, t, p=None: http_call(client, "POST", "/upload/drive/v3/files",
                                               {"uploadType": "multipart"} if p is None else p, b, {"Content-Type": t}))
        assert call(body, "multipart/related")[0] == 400                          # no boundary
        bad_json = body.replace(b'{"name": "x"}', b'{"name": ')
        status, _, reply = call(bad_json, ctype)
        assert status == 400 and reason(reply) == "parseError"
        status, _, reply = call(body, ctype, {"uploadType": "chunky"})
        assert status == 400 and reason(reply) == "invalid"
        status, _, reply = call(body, ctype, {})
        assert status == 400 and b"uploadType" in reply
        http_call(client, "POST", "/_emu/uploads", body=json.dumps({"multipart_limit": 10}).encode(), token=None)
        status, _, reply = call(body, ctype)
        assert status == 413 and reason(reply) == "uploadTooLarge"


# ---------------------------------------------------------------------------------------------------
# resumable sessions


def test_resumable_create_in_chunks_with_308_range_semantics():
    data = payload(3 * KIB256 + 1000)
    total = len(data)
    with serve() as client:
        session = start_session(client, {"name": "ckpt.bin", "parents": ["dirA"]}, total)
        status, head, body = put(client, session, b"", total=total)
        assert (status, body) == (308, b"") and "range" not in head        # nothing persisted yet
        status, head, _ = put(client, session, data[:KIB256], 0, total)
        assert status == 308 and head["range"] == f"bytes=0-{KIB256 - 1}"
        status, _, reply = put(client, session, data[KIB256:KIB256 + 1000], KIB256, total)
        assert status == 400 and b"262144" in reply                          # not a 256 KiB multiple
        status, _, reply = put(client, session, data[2 * KIB256:3 * KIB256], 2 * KIB256, total)
        assert status == 400 and b"exceeds already uploaded size of 262144" in reply   # a gap
        status, head, _ = put(client, session, b"", total=total)                # status query mid-way
        assert status == 308 and head["range"] == f"bytes=0-{KIB256 - 1}"
        # overlapping the persisted bytes: the overlap is ignored
        status, head, _ = put(client, session, data[0:3 * KIB256], 0, total)
        assert status == 308 and head["range"] == f"bytes=0-{3 * KIB256 - 1}"
        status, _, reply = put(client, session, data[3 * KIB256:], 3 * KIB256, total)
        meta = json.loads(reply)
        assert status == 200 and meta["name"] == "ckpt.bin" and meta["parents"] == ["dirA"]
        assert meta["md5Checksum"] == hashlib.md5(data).hexdigest() and meta["size"] == str(total)
        status, _, again = put(client, session, b"", total=total)             # after completion
        assert status == 200 and json.loads(again)["id"] == meta["id"]
        assert http_call(client, "GET", f"/drive/v3/files/{meta['id']}", {"alt": "media"})[2] == data
        counts = stats(client)
        assert counts["sessions_started"] == 1 and counts["uploads_completed"] == 1
        assert counts["status_queries"] == 3 and counts["resume_incomplete"] == 4
        assert counts["chunks_refused"] == 2 and counts["creates"] == 1


def test_resumable_unknown_total_zero_length_and_one_shot():
    data = payload(KIB256 + 5)
    with serve(upload_options={"create_status": 201}) as client:
        session = start_session(client, {"name": "stream.bin"})
        assert put(client, session, data[:KIB256], 0, "*")[0] == 308
        status, head, _ = put(client, session, b"", total="*")
        assert status == 308 and head["range"] == f"bytes=0-{KIB256 - 1}"
        status, _, reply = put(client, session, data[KIB256:], KIB256, len(data))
        assert status == 201 and json.loads(reply)["md5Checksum"] == hashlib.md5(data).hexdigest()
        session = start_session(client, {"name": "empty.bin"}, 0)
        status, _, reply = put(client, session, b"", total=0)
        assert status == 201 and json.loads(reply)["size"] == "0"
        session = start_session(client, {"name": "whole.bin"})          # no Content-Range: all at once
        status, _, reply = http_call(client, "PUT", session, body=b"abc", token=None, chunked=True)
        assert status == 201 and json.loads(reply)["size"] == "3"
        session = start_session(client, {"name": "mismatch.bin"}, 10)
        assert put(client, session, b"x" * 11, 0, 11)[0] == 400


def test_resumable_update_of_existing_file():
    with serve() as client:
        _, _, before = http_call(client, "GET", "/drive/v3/files/hello", {"fields": FIELDS})
        before = json.loads(before)
        data = payload(KIB256 * 2)
        session = start_session(client, {"name": "hello-v2.txt"}, len(data), file_id="hello")
        assert put(client, session, data[:KIB256], 0, len(data))[0] == 308
        status, _, reply = put(client, session, data[KIB256:], KIB256, len(data))
        after = json.loads(reply)
        assert status == 200 and after["id"] == "hello" and after["name"] == "hello-v2.txt"
        assert after["headRevisionId"] != before["headRevisionId"]
        assert int(after["version"]) > int(before["version"]) and after["modifiedTime"] > before["modifiedTime"]
        assert after["md5Checksum"] == hashlib.md5(data).hexdigest()


def test_resume_after_a_reset_in_the_middle_of_a_chunk():
    data = payload(4 * KIB256)
    with serve(faults=["kind=upload.chunk,reset_in_body=700000,count=1"]) as client:
        session = start_session(client, {"name": "cut.bin"}, len(data))
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            put(client, session, data, 0, len(data))
        status, head, _ = put(client, session, b"", total=len(data))
        assert status == 308 and head["range"] == f"bytes=0-{2 * KIB256 - 1}"   # 700000 -> 512 KiB kept
        offset = int(head["range"].split("-")[1]) + 1
        status, _, reply = put(client, session, data[offset:], offset, len(data))
        assert status == 200 and json.loads(reply)["md5Checksum"] == hashlib.md5(data).hexdigest()
        assert stats(client)["partial_chunks"] == 1


def test_a_lost_answer_then_the_status_query_finds_the_upload_done():
    data = payload(1000)
    with serve(faults=["kind=upload.chunk,reset_in_body=1000,count=1"]) as client:
        session = start_session(client, {"name": "lost.bin"}, len(data))
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            put(client, session, data, 0, len(data))
        status, _, reply = put(client, session, b"", total=len(data))
        assert status == 200 and json.loads(reply)["md5Checksum"] == hashlib.md5(data).hexdigest()


def test_5xx_before_the_body_is_read_keeps_the_session():
    data = payload(2 * KIB256)
    with serve(faults=["kind=upload.chunk,status=503,after=1,count=1"]) as client:
        session = start_session(client, {"name": "retry.bin"}, len(data))
        assert put(client, session, data[:KIB256], 0, len(data))[0] == 308
        status, _, reply = put(client, session, data[KIB256:], KIB256, len(data))
        assert status == 503 and reason(reply) == "backendError"
        status, head, _ = put(client, session, b"", total=len(data))
        assert status == 308 and head["range"] == f"bytes=0-{KIB256 - 1}"
        assert put(client, session, data[KIB256:], KIB256, len(data))[0] == 200


def test_session_expiry_by_control_call_and_by_lifetime():
    clock = FakeClock()
    with serve(upload_options={"clock": clock, "session_lifetime": 60}) as client:
        first, second = (start_session(client, {"name": n}) for n in ("a", "b"))
        upload_id = first.split("upload_id=")[1]
        status, _, reply = http_call(client, "POST", "/_emu/uploads/expire",
                                     body=json.dumps({"upload_id": upload_id}).encode(), token=None)
        assert json.loads(reply) == {"expired": 1}
        status, _, reply = put(client, first, b"", total="*")
        assert status == 404 and reason(reply) == "notFound"
        assert put(client, second, b"", total="*")[0] == 308
        clock.now += 61
        assert put(client, second, b"", total="*")[0] == 404
        third = start_session(client, {"name": "c"})
        http_call(client, "POST", "/_emu/uploads/expire", body=b"{}", token=None)
        assert put(client, third, b"", total="*")[0] == 404
        assert stats(client)["sessions_expired"] == 3
        _, _, listing = http_call(client, "GET", "/_emu/uploads", token=None)
        assert [s["expired"] for s in json.loads(listing)["sessions"]] == [True, True, True]


def test_faults_can_target_upload_requests_only():
    rules = ["kind=upload|upload.chunk,status=429,count=1", "kind=upload.chunk,stall_ms=300,stall_in_body=1000,count=1"]
    with serve(faults=rules) as client:
        assert http_call(client, "GET", "/drive/v3/files/hello")[0] == 200       # not an upload: no fault
        status, _, reply = http_call(client, "POST", "/upload/drive/v3/files", {"uploadType": "media"}, b"x")
        assert status == 429 and reason(reply) == "rateLimitExceeded"
        session = start_session(client, {"name": "slow.bin"})
        started = time.monotonic()
        status, _, _ = put(client, session, payload(5000), 0, 5000)
        assert status == 200 and time.monotonic() - started >= 0.3
    for bad in ("kind=media,reset_in_body=5", "reset_in_body=5", "kind=upload,stall_in_body=5",
                "kind=upload,stall_ms=5,stall_after=1,stall_in_body=5"):
        with pytest.raises(emufaults.FaultSpecError):
            emufaults.FaultRule(bad)


def test_an_outage_covers_uploads():
    with serve(faults=["outage=30"]) as client:
        status, _, _ = http_call(client, "POST", "/upload/drive/v3/files", {"uploadType": "media"}, b"x" * 5000)
        assert status == 503
        status, _, _ = http_call(client, "PUT", "/upload/drive/v3/files", {"upload_id": "nope"}, b"x",
                                 {"Content-Range": "bytes 0-0/1"}, token=None)
        assert status == 503


def test_an_outage_that_refuses_connections():
    with serve() as client:
        status, _, _ = http_call(client, "POST", "/_emu/outage", body=b'{"seconds": 0.6}', token=None)
        assert status == 200

        def refused():
            try:
                http_call(client, "GET", "/drive/v3/files/hello")
            except ConnectionRefusedError:
                return True
            except OSError:
                pass                       # accepted just before the listener closed: reset
            return False

        def back():
            try:
                return http_call(client, "GET", "/drive/v3/files/hello")[0] == 200
            except OSError:
                return False

        wait_until(refused, TIMEOUT, "connections to be refused")
        wait_until(back, TIMEOUT, "the emulator to listen again")
        session = start_session(client, {"name": "after-outage"})
        assert put(client, session, b"abc", 0, 3)[0] == 200


def test_tokeninfo_reports_scopes():
    with serve() as client:
        http_call(client, "POST", "/_emu/tokens", token=None,
                  body=json.dumps({"token": "ro", "scope": "https://www.googleapis.com/auth/drive.readonly"}).encode())
        status, _, body = http_call(client, "GET", "/oauth2/v3/tokeninfo", {"access_token": "ro"}, token=None)
        assert status == 200 and json.loads(body)["scope"] == "https://www.googleapis.com/auth/drive.readonly"
        status, _, body = http_call(client, "GET", "/oauth2/v3/tokeninfo", {"access_token": "nope"}, token=None)
        assert status == 400 and json.loads(body)["error"] == "invalid_token"
