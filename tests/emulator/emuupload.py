"""Uploads of the Drive emulator (drive-api-v3.md §6): media, multipart and resumable.

``POST /upload/drive/v3/files`` creates a file, ``PATCH /upload/drive/v3/files/ID`` gives one new
content (a new revision); ``uploadType`` says how (kind ``upload``):

* ``media``: the body is the content; a new file is named "Untitled" in the root, its mimeType the
  request's Content-Type (default application/octet-stream).
* ``multipart``: ``Content-Type: multipart/related; boundary=B``; exactly two parts: the JSON
  metadata (``Content-Type: application/json``, a charset allowed), then the media (its Content-Type
  is the default mimeType; ``Content-Transfer-Encoding: base64`` is decoded). CRLF line ends, a
  preamble and an epilogue allowed, the close delimiter ``--B--`` required. Anything else: 400
  badRequest "Malformed multipart body."; metadata that is not a JSON object: 400 parseError.
  Real Drive takes multipart bodies above the 5 MB its guide advises (rclone sends up to 8 MiB):
  no limit by default; ``multipart_limit`` B (``--multipart-limit``) answers larger media and
  multipart bodies with 413 uploadTooLarge [?].
* ``resumable``: the body is the JSON metadata (may be empty), ``X-Upload-Content-Type`` the media
  type, ``X-Upload-Content-Length`` (optional) the total. Everything a create or update checks is
  checked now (and again at the end), the write-rate token taken, and the answer is 200 with an
  empty body, ``Location:`` = the session URI (this URL with ``upload_id=U`` added: the query, and so
  ``fields``, carries over) and ``X-GUploader-UploadID: U``.

The session URI (kind ``upload.chunk``; no bearer token needed: the upload_id is the credential [?])
takes ``PUT`` (or ``POST``):

* ``Content-Range: bytes a-b/T`` or ``bytes a-b/*`` with b-a+1 bytes; no Content-Range = the whole
  content in one request. T must match X-Upload-Content-Length and earlier chunks (else 400).
* Every chunk but the last (the one that ends at T-1) must be a multiple of 256 KiB: else 400
  badRequest with Google's message ("... required to be equal or greater than 262144 ...");
  ``unaligned_chunks="truncate"`` (``--unaligned-chunks truncate``) instead keeps the largest
  256 KiB multiple of such a chunk (at least 256 KiB, else 400), as the "may be less than you sent"
  of the doc allows.
* A chunk that starts past the persisted offset: 400 badRequest "Invalid request. According to the
  Content-Range header, the upload offset is A byte(s), which exceeds already uploaded size of P
  byte(s)." (Google's wording). A chunk that starts before it: the bytes already persisted are
  ignored (not compared) and the rest appended [?].
* Intermediate chunks answer ``308 Resume Incomplete`` with ``Range: bytes=0-N`` (N+1 persisted),
  no Range header when nothing is persisted, and an empty body.
* Status query: an empty PUT with ``Content-Range: bytes */T`` (or ``bytes */*``) answers 308 + Range,
  or, when all T bytes are there, finishes the upload. A finished session answers every PUT with the
  file resource again.
* The last chunk answers the file resource (``fields`` honoured): 200 for an update, and 200 for a
  create (``create_status`` 201 / ``--upload-create-status 201`` for the other answer the docs name).
* A body cut short (the client went away, or a ``reset_in_body`` fault): the bytes received are
  persisted only up to a 256 KiB boundary (as Drive), nothing is answered; query and resume.
* Sessions live ``session_lifetime`` seconds (``--upload-session-lifetime``, default a week); an
  expired or unknown session answers 404 notFound. ``expire(U)`` / ``expire()`` end one or all now
  (``POST /_emu/uploads/expire``). ``DELETE`` on the session URI cancels it: 499 [?].

Counters (``/_emu/stats`` ``"uploads"``, with emuwrite's): sessions_started, chunks (PUTs carrying
bytes), bytes_received (body bytes of chunks, media and multipart uploads), status_queries,
resume_incomplete (308 answers), uploads_completed (any upload type), chunks_refused (400 on a
chunk), partial_chunks (bodies cut short), sessions_expired (404 on a session URI).
"""

import base64
import binascii
import email.message
import random
import re
import threading
import time
from urllib.parse import urlencode

import emuapi
import emucontent

CHUNK_GRANULE = 256 * 1024
WEEK_S = 7 * 24 * 3600
COUNTERS = ("sessions_started", "chunks", "bytes_received", "status_queries", "resume_incomplete",
            "uploads_completed", "chunks_refused", "partial_chunks", "sessions_expired")
SETTINGS = ("session_lifetime", "unaligned_chunks", "create_status", "multipart_limit")
_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
_QUERY = re.compile(r"bytes \*/(\d+|\*)")
_UPLOAD_ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def malformed(message="Malformed multipart body."):
    return emuapi.ApiError(400, "badRequest", message)


def parse_multipart(content_type, body):
    """(metadata bytes, media bytes, media content type) of a multipart/related body; raises the
    400 ApiError of the module doc."""
    header = email.message.Message()
    header["Content-Type"] = content_type or ""
    boundary = header.get_param("boundary")
    if header.get_content_type() != "multipart/related" or not isinstance(boundary, str) or not boundary:
        raise malformed()
    segments = (b"\r\n" + body).split(b"\r\n--" + boundary.encode("latin-1"))
    parts, closed = [], False
    for segment in segments[1:]:
        if segment.startswith(b"--"):
            closed = True
            break
        segment = segment.lstrip(b" \t")
        if not segment.startswith(b"\r\n"):
            raise malformed()
        head, sep, content = segment[2:].partition(b"\r\n\r\n")
        if not sep:
            if not segment[2:].startswith(b"\r\n"):
                raise malformed()
            head, content = b"", segment[4:]
        headers = {}
        for line in filter(None, head.split(b"\r\n")):
            name, colon, value = line.decode("latin-1").partition(":")
            if not colon:
                raise malformed()
            headers[name.strip().lower()] = value.strip()
        parts.append((headers, content))
    if not closed or len(parts) != 2:
        raise malformed()
    (meta_headers, meta), (media_headers, media) = parts
    if meta_headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise malformed()
    encoding = media_headers.get("content-transfer-encoding", "binary").lower()
    if encoding == "base64":
        try:
            media = base64.b64decode(media, validate=False)
        except binascii.Error:
            raise malformed() from None
    elif encoding not in ("binary", "8bit", "7bit"):
        raise malformed()
    return meta, media, media_headers.get("content-type")


class Session:
    def __init__(self, upload_id, user, scope, file_id, meta, mime, total, expires):
        self.id, self.user, self.scope = upload_id, user, scope
        self.file_id, self.meta, self.mime = file_id, meta, mime
        self.total = total                       # int, or None while unknown
        self.data = bytearray()                  # the persisted bytes
        self.expires = expires                   # clock time
        self.done_id = None                      # the file's id once the upload finished
        self.params = {}                         # the initiating request's query (moves)

    def describe(self, now):
        return {"upload_id": self.id, "file_id": self.done_id or self.file_id, "persisted": len(self.data),
                "total": self.total, "complete": self.done_id is not None, "expired": now >= self.expires,
                "expires_in": round(self.expires - now, 3)}


class Uploads:
    """Upload endpoints over ``writes`` (an emuwrite.WriteApi). Settings (see the module doc):
    ``session_lifetime`` (s), ``unaligned_chunks`` ("reject" | "truncate"), ``create_status`` (200 |
    201), ``multipart_limit`` (bytes, 0 = none); ``clock`` (seconds, monotonic) for expiry."""

    def __init__(self, writes, session_lifetime=WEEK_S, unaligned_chunks="reject", create_status=200,
                 multipart_limit=0, clock=time.monotonic, seed=0):
        self.writes = writes
        self.clock = clock
        self.sessions = {}
        self._lock = threading.Lock()
        self._rng = random.Random(f"uploads:{seed}")
        self.session_lifetime, self.unaligned_chunks = WEEK_S, "reject"
        self.create_status, self.multipart_limit = 200, 0
        self.configure(session_lifetime=session_lifetime, unaligned_chunks=unaligned_chunks,
                       create_status=create_status, multipart_limit=multipart_limit)

    def configure(self, **settings):
        """Change settings (names in SETTINGS); raises ValueError (nothing changes) for bad ones."""
        new = {k: getattr(self, k) for k in SETTINGS}
        unknown = set(settings) - set(SETTINGS)
        if unknown:
            raise ValueError(f"unknown upload settings {sorted(unknown)}")
        new.update({k: v for k, v in settings.items() if v is not None})
        if not (isinstance(new["session_lifetime"], (int, float)) and new["session_lifetime"] > 0):
            raise ValueError("session_lifetime must be a positive number of seconds")
        if new["unaligned_chunks"] not in ("reject", "truncate"):
            raise ValueError("unaligned_chunks must be 'reject' or 'truncate'")
        if new["create_status"] not in (200, 201):
            raise ValueError("create_status must be 200 or 201")
        if not (isinstance(new["multipart_limit"], int) and new["multipart_limit"] >= 0):
            raise ValueError("multipart_limit must be a non-negative integer")
        for key, value in new.items():
            setattr(self, key, value)

    def describe(self):
        now = self.clock()
        with self._lock:
            sessions = [s.describe(now) for s in self.sessions.values()]
        return {"settings": {k: getattr(self, k) for k in SETTINGS}, "sessions": sessions}

    def expire(self, upload_id=None):
        """End session ``upload_id`` (all when None) now; returns how many; KeyError when unknown."""
        with self._lock:
            if upload_id is not None and upload_id not in self.sessions:
                raise KeyError(upload_id)
            chosen = [self.sessions[upload_id]] if upload_id is not None else list(self.sessions.values())
            for session in chosen:
                session.expires = float("-inf")
            return len(chosen)

    # -- simple uploads and the start of a session --------------------------------------------------

    def start(self, req, file_id):
        """``/upload/drive/v3/files[/ID]``: dispatch on uploadType."""
        kind = req.params.get("uploadType")
        if kind is None:
            raise emuapi.ApiError(400, "badRequest", "Upload requests must include an uploadType URL "
                                                     "parameter and a URL path beginning with /upload/")
        if kind not in ("media", "multipart", "resumable"):
            raise emuapi.invalid("uploadType", f"Invalid value '{kind}' for uploadType.")
        w = self.writes
        w.require_scope(req)
        emuapi.DriveApi.file_mask(req)
        item = w.item(req, file_id) if file_id is not None else None
        w.take_write_token(req)
        if kind == "resumable":
            return self._initiate(req, item)
        if self.multipart_limit and len(req.body) > self.multipart_limit:
            raise emuapi.ApiError(413, "uploadTooLarge", f"The {kind} upload is larger than "
                                  f"{self.multipart_limit} bytes; use a resumable upload [emulator].")
        if kind == "media":
            meta, media, mime = b"", req.body, req.headers.get("Content-Type")
        else:
            meta, media, mime = parse_multipart(req.headers.get("Content-Type"), req.body)
        w.count("bytes_received", len(req.body))
        meta = self.writes.parse_metadata(meta)
        source = emucontent.BytesSource(media)
        if item is None:
            item = w.create_file(req, meta, source, mime)
            status = self.create_status
        else:
            item = w.update_file(req, item, meta, source, mime)
            status = 200
        w.count("uploads_completed")
        return w.reply(req, item, status)

    def _initiate(self, req, item):
        w = self.writes
        meta = self.writes.parse_metadata(req.body)
        mime = req.headers.get("X-Upload-Content-Type")
        total = _header_int(req, "X-Upload-Content-Length")
        declared = emucontent.GeneratedSource(total or 0, 0)        # only its size is looked at
        if item is None:
            w.create_file(req, meta, declared, mime, dry_run=True)
        else:
            w.update_file(req, item, meta, declared, mime, dry_run=True)
        upload_id = "ADPyc" + "".join(self._rng.choice(_UPLOAD_ID_CHARS) for _ in range(70))
        session = Session(upload_id, req.user, req.scope, item.id if item else None, meta, mime, total,
                          self.clock() + self.session_lifetime)
        session.params = dict(req.params)
        with self._lock:
            self.sessions[upload_id] = session
        w.count("sessions_started")
        location = f"{req.base_url}{req.path}?{urlencode(dict(req.params, upload_id=upload_id))}"
        return emuapi.Response(200, b"", headers=[("Location", location),
                                                  ("X-GUploader-UploadID", upload_id)])

    # -- the session URI ----------------------------------------------------------------------------

    def chunk(self, req, upload_id):
        w = self.writes
        with self._lock:
            session = self.sessions.get(upload_id)
        if session is None or self.clock() >= session.expires:
            if session is not None:
                w.count("sessions_expired")
            raise emuapi.ApiError(404, "notFound", f"Upload session not found or expired: {upload_id}.")
        if req.method == "DELETE":
            with self._lock:
                self.sessions.pop(upload_id, None)
            return emuapi.Response(499, b"", reason="Client Closed Request")
        if req.method not in ("PUT", "POST"):
            raise emuapi.ApiError(405, "badRequest", f"Method {req.method} is not allowed on an upload "
                                                     "session")
        req.user, req.scope = session.user, session.scope
        emuapi.DriveApi.file_mask(req)
        with self._lock:                   # one request of a session at a time
            return self._chunk(req, session)

    def _chunk(self, req, s):
        w = self.writes
        data = req.body
        header = req.headers.get("Content-Range")
        if header is None:
            first, last, total = (0, len(data) - 1, len(data)) if req.body_complete else (0, None, None)
        elif _QUERY.fullmatch(header.strip()):
            first, last, total = None, None, _QUERY.fullmatch(header.strip()).group(1)
        elif _RANGE.fullmatch(header.strip()):
            first, last, total = _RANGE.fullmatch(header.strip()).groups()
        else:
            raise self._refuse("Failed to parse Content-Range header.")
        total = None if total in (None, "*") else int(total)
        if not req.body_complete:
            self._persist_partial(s, 0 if first is None else int(first), data)
            w.count("partial_chunks")
            raise emuapi.ConnectionLost(req.body_reset)
        if total is not None:
            if (s.total is not None and total != s.total) or total < len(s.data):
                raise self._refuse(f"The Content-Range total {total} does not match the upload's size "
                                   f"{s.total if s.total is not None else len(s.data)}.")
            s.total = total
        if first is None:                                   # a status query
            if data:
                raise self._refuse("Failed to parse Content-Range header.")
            w.count("status_queries")
        if s.done_id is not None:
            return self._finished(req, s)
        if first is None:
            if s.total is not None and len(s.data) == s.total:
                return self._finish(req, s)
            return self._incomplete(s)
        first, last = int(first), int(last)
        if last < first - 1 or len(data) != last - first + 1 or (total is not None and last >= total):
            raise self._refuse("Failed to parse Content-Range header.")
        w.count("chunks")
        w.count("bytes_received", len(data))
        if first > len(s.data):
            raise self._refuse(f"Invalid request.  According to the Content-Range header, the upload "
                               f"offset is {first} byte(s), which exceeds already uploaded size of "
                               f"{len(s.data)} byte(s).")
        is_last = total is not None and last + 1 == total
        if not is_last and len(data) % CHUNK_GRANULE:
            if self.unaligned_chunks == "reject" or len(data) < CHUNK_GRANULE:
                raise self._refuse(
                    "Invalid request. The number of bytes uploaded is required to be equal or greater "
                    f"than {CHUNK_GRANULE}, except for the final request (it's recommended to be the "
                    f"exact multiple of {CHUNK_GRANULE}). The received request contained {len(data)} "
                    "bytes, which does not meet this requirement.")
            data = data[:len(data) - len(data) % CHUNK_GRANULE]
        if first + len(data) > len(s.data):
            s.data += data[len(s.data) - first:]
        if is_last:
            return self._finish(req, s)
        return self._incomplete(s)

    def _persist_partial(self, s, first, data):
        """Keep the received bytes of a cut chunk up to a 256 KiB boundary of the upload."""
        end = (first + len(data)) // CHUNK_GRANULE * CHUNK_GRANULE
        if first <= len(s.data) < end and (s.total is None or end <= s.total):
            s.data += data[len(s.data) - first:end - first]
        self.writes.count("bytes_received", len(data))

    def _refuse(self, message):
        self.writes.count("chunks_refused")
        return emuapi.ApiError(400, "badRequest", message)

    def _incomplete(self, s):
        self.writes.count("resume_incomplete")
        headers = [("Range", f"bytes=0-{len(s.data) - 1}")] if s.data else []
        return emuapi.Response(308, b"", headers=headers + [("X-GUploader-UploadID", s.id)],
                               reason="Resume Incomplete")

    def _finish(self, req, s):
        w = self.writes
        source = emucontent.BytesSource(bytes(s.data))
        req.params = dict(s.params, **req.params)
        if s.file_id is None:
            item = w.create_file(req, s.meta, source, s.mime)
        else:
            item = w.update_file(req, w.item(req, s.file_id), s.meta, source, s.mime)
        s.done_id, s.data = item.id, bytearray()
        w.count("uploads_completed")
        return self._finished(req, s)

    def _finished(self, req, s):
        item = self.writes.item(req, s.done_id)
        return self.writes.reply(req, item, 200 if s.file_id else self.create_status)


def _header_int(req, name):
    text = req.headers.get(name)
    if text is None:
        return None
    if not text.strip().isdigit():
        raise emuapi.ApiError(400, "badRequest", f"Invalid value for header {name}: {text}")
    return int(text)
