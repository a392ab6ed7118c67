#!/usr/bin/env python3
"""A Google Drive API v3 emulator for testing colabfs (Python standard library only).

It follows the project's Drive reference (drive-api-v3.md): files.list (q, paging, orderBy, fields), files.get, alt=media with
Range (200/206/416), export, about, changes, revisions (get and list; earlier revisions are kept when
content is replaced), Drive's error bodies, and an OAuth token endpoint (refresh_token and JWT-bearer
grants, and tokeninfo). Writes (§6): files.generateIds, files.create, files.update (rename, move,
trash, metadata), files.delete, media/multipart/resumable uploads (emuwrite.py, emuupload.py).
HTTP/1.1 with keep-alive, optionally over TLS.

Command line
------------
::

    drive_emulator.py (--spec FILE | --tree DIR | --sample DIR) [options]

Content (one of; with none, an empty drive):
  --spec FILE            a JSON tree spec (below)
  --tree DIR             serve a real directory; ids are stable hashes of the relative paths
  --sample DIR           write a small demo drive into DIR (see emusample.py) and serve it
Network:
  --host H               default 127.0.0.1
  --port N               default 0: any free port
  --port-file FILE       once accepting, write the port number there (tmp file + rename)
  --tls-dir DIR          serve HTTPS with DIR/server.pem + DIR/server.key; when ca.pem, server.pem or
                         server.key is missing, make a test CA and a certificate for 127.0.0.1 and
                         localhost with openssl. Clients trust DIR/ca.pem.
Timing:
  --ttfb-ms N            delay before the status line of every alt=media / export response (time to
                         first byte; it comes after a fault's stall before the status line)
  --api-latency-ms N     delay before the status line of every other Drive API response (metadata,
                         listings, generateIds, creations, updates, upload starts and chunks; Drive
                         answers these in about 100-500 ms); 0 (the default): none
  --bandwidth B          bytes per second per connection for media bodies (0 = unlimited)
  --total-bandwidth B    bytes per second for all media bodies together (0 = unlimited)
Listing:
  --page-size-cap N      at most N items per files.list / changes.list page (0 = no cap)
  --short-pages          random short pages and empty pages (with nextPageToken) before the end
  --seed N               seed for all randomness (tokens, short pages, fault probabilities)
  --export-limit B       export size limit in bytes (default 10 MiB)
Auth:
  --access-token TOK     a bearer token accepted forever (repeatable)
  --client-id ID --client-secret S --refresh-token R
                         accept this refresh_token grant at POST /token
  --grant-scope SCOPE    the scope a refresh_token grant that asks for none is given (the refresh
                         token's consent; space-separated URLs, default the full drive scope); the
                         reply's "scope" field says it
  --token-lifetime S     lifetime of issued tokens in seconds (default 3600); expired ones get 401
  --sa-public-key PEM --sa-email EMAIL
                         accept JWT-bearer grants signed by this key (public key, private key or
                         certificate PEM) with iss EMAIL
  --readonly-token TOK   a bearer token accepted forever with only the drive.readonly scope
                         (repeatable): every write answers 403 insufficientPermissions
  --metadata-scope SCOPE the scope of every metadata-server token, whatever ?scopes= asks (a Colab
                         credential endpoint before the notebook's consent: e.g. cloud-platform,
                         no Drive; every Drive call then answers 403 insufficientPermissions)
  With none of these, any non-empty bearer token is accepted (full scope).
  GET /oauth2/v3/tokeninfo?access_token=T (also /tokeninfo; or POST with the form body
  access_token=T, as Google takes it) answers {"scope", "expires_in"}.
Writes and uploads (emuwrite.py, emuupload.py; control calls in emucontrol.py):
  --write-rate R --write-burst B --write-rate-status 403|429
                         a per-user token bucket for creations and uploads (files.create, media
                         and multipart uploads, starts of resumable sessions; 0 = off, the
                         default): over it 403 userRateLimitExceeded, Drive's body
  --storage-limit BYTES  the user's storage quota (default 15 GiB, 0 = unlimited): 403
                         storageQuotaExceeded past it
  --read-only ID         an item (a folder: its subtree) the user may only read (repeatable): writes
                         into, of or out of it answer 403 insufficientFilePermissions
  --unreserved-id-status 409|400   a create with an id generateIds never handed out (default 409)
  --upload-session-lifetime S      resumable sessions live S seconds (default a week), then 404
  --unaligned-chunks reject|truncate   an intermediate chunk that is not a multiple of 256 KiB:
                         400 (default) or keep its largest 256 KiB multiple
  --upload-create-status 200|201   status of a finished upload that created a file (default 200)
  --multipart-limit B    largest media/multipart upload body (0 = none, the default): 413 past it
  --old-revisions N      replaced revisions of a blob that revisions.get still serves (default 200,
                         as Drive keeps them; 0 = only the head, an old revision is 404)
Quota (emuquota.py; who the user is: emuauth.py):
  --user-rate R          Drive API requests per second per user, a token bucket (0 = off, the default);
                         every request of files.list, files.get, media, export, changes, about,
                         revisions, drives takes a token, the token endpoint, the metadata server and
                         /_emu/ calls none. Over quota: 403 userRateLimitExceeded "User Rate Limit
                         Exceeded" (domain usageLimits, Drive's error body)
  --user-units N         Drive's newer quota instead (Cloud projects created since 2026-05-01): N quota
                         units per minute per user (325000 is Drive's figure; 0 = off), a token bucket
                         of N/60 units per second; each request takes its cost in units: media and
                         export 200, files.list, changes.list and drives.list 100, files.create,
                         files.update, files.delete and upload starts 50, anything else 5 (the table
                         is in emuquota.py). Over quota: the same refusal. Not with --user-rate
  --user-burst B         bucket size: requests a user may make at once (default max(1, R)); with
                         --user-units, units (default one second's worth, max(200, N/60))
  --user-rate-status S   403 (default) or 429 (rateLimitExceeded "Too Many Requests")
Faults and logs:
  --fault SPEC           a fault rule, repeatable (syntax in emufaults.py)
  --log FILE             append one JSON line per request (never tokens or secrets)
  --verbose              print each request line to stderr

Spec format (--spec FILE)
-------------------------
::

    {"root": {"id": "0AEmuRootFolder0000000000000000", "name": "My Drive"},      (optional)
     "drives": [{"id": "0ATeamDrive...", "name": "Team"}, ...],                     (optional)
     "items": [{"name": "a.bin", "parent": "root", ...}, ...]}

Shared drives: a drive's id (default "0A" + a stable hash; must start with 0A) is its root folder's id;
items with "parent" = a drive id or a folder below one are in that drive. See emuapi.py for which
requests may see them (supportsAllDrives, includeItemsFromAllDrives, corpora, driveId).

Item keys:
  name         required
  id           default ``stable_id(parent id, name, index in items)``: "1" + 32 chars [A-Za-z0-9_-]
  parent       an item id or "root" (default); parents may appear later in the list
  mimeType     default application/octet-stream; application/vnd.google-apps.folder for folders
  content      blobs: one of ``path`` (a local file, relative to the spec's folder or absolute; read by
               range, never whole), ``content`` (a UTF-8 string), ``size`` + ``seed`` (the bytes
               ``emucontent.generated_bytes(seed, 0, size)``); none of them = an empty file.
               Native types (application/vnd.google-apps.document, spreadsheet, ...) take ``content``
               as their text; an export is ``b"EMULATED-EXPORT <target mime>\\n" + text``.
  trashed      bool; children of a trashed folder report trashed=true, explicitlyTrashed=false
  createdTime, modifiedTime   RFC 3339; default 2024-01-01T00:00:00.000Z plus N seconds for the Nth item
  shortcutDetails             {"targetId": id} for mimeType application/vnd.google-apps.shortcut
  version      int, default 1;   headRevisionId   default a stable hash (blobs only)
  capabilities {"canDownload": false} makes media and export answer 403
  readOnly     bool: the user may only read this item and everything below it (writes: 403
               insufficientFilePermissions; capabilities canEdit, canAddChildren, ... false)
  appProperties, properties   string maps;   description   a string
  repeat       int N: the item stands for N blobs (a folder of 100,000 files without a 100,000-item spec):
               item i (0 <= i < N) is named ``name.format(i=i)`` (e.g. "f{i:06d}.bin"), holds
               ``emucontent.numbered_bytes(seed, i)`` (``seed`` default 0) and has the id
               ``stable_id(parent id, its name, index in items)``; other keys (parent, times, trashed,
               capabilities) apply to each; id, path, content, size, mimeType are refused
  sharedWithMe bool: "Shared with me" (q ``sharedWithMe = true``); such an item may name a parent that
               is not in the spec (a folder the user cannot see; then ``parents`` is left out), and
               without "parent" it has none

Metadata server: GET /computeMetadata/v1/instance/service-accounts/default/token with the header
``Metadata-Flavor: Google`` issues a token (kind ``metadata``), like GCE and Colab; without the
header it answers 403.

Control endpoints (no auth; not counted in stats or logs)
--------------------------------------------------------
  GET  /_emu/stats    {"requests", "by_kind": {kind: n}, "errors" (status >= 400), "media_bytes" (body
                      bytes sent for media and export), "range_requests" (requests with a Range
                      header), "status": {"200": n, ...}, "quota_rejected" (requests refused by the
                      --user-rate or --user-units quota), "units_used" (the quota units charged to
                      accepted Drive API requests, the sum of the log's "units": counted in either
                      quota mode, and with the quota off, so any run shows what it would spend;
                      refused ones cost none), "cancelled" (requests the client closed the
                      connection on before the whole answer was sent, e.g. during a stall), "concurrent",
                      "concurrent_media" (Drive API requests, and those of them that are media or
                      export downloads, being answered now: arrived and not yet fully sent),
                      "max_concurrent", "max_concurrent_media" (the most at once since the last
                      reset), "max_requests_per_s" (the most Drive API requests that arrived within
                      any 1 s span since the last reset: a sliding window ending at each arrival;
                      refused ones count), "requests_last_s" (arrivals in the last second)}.
                      Kinds: files.list files.get media export about changes token metadata
                      revisions.get drives error (error = no such endpoint), files.create
                      files.update files.delete files.generateIds upload upload.chunk. Drive API
                      requests are all kinds but token and metadata. "uploads": the write
                      counters of emuwrite.py/emuupload.py: creates updates deletes
                      generated_ids conflicts (409s and refused ids) storage_refused
                      rate_refused permission_refused scope_refused sessions_started chunks
                      bytes_received status_queries resume_incomplete (308s) uploads_completed
                      chunks_refused partial_chunks sessions_expired
  GET  /_emu/log      the last 10,000 request records: {"t" (wall clock, to compare with other
                      processes' clocks), "mono" (the monotonic clock: spans between records,
                      which a step of the wall clock cannot bend), "method", "path", "kind", "range",
                      "status", "bytes", "id", "query", "fault", "quota_refused", "units" (the quota
                      units it was charged, emuquota.units_of; 0 when not charged: refused, not a
                      Drive API call, answered by a fault), "cancelled" (the client closed the
                      connection first; status 0 when that was before the status line), "ms"}
  POST /_emu/reset    zero the counters (the upload counters too) and the in-memory log (the max_* counters restart from the
                      requests in flight)
  GET  /_emu/quota    the per-user quota: {"rate": R, "burst": B, "status": 403|429, "units": bool}
                      (units: R is quota units per second, B units; false: requests)
  POST /_emu/quota    change it: body {"rate": R, "burst": B, "status": 403|429, "units": true|false},
                      each optional (a rate, or a change of units, without a burst sets the burst to
                      max(1, R), in units mode max(200, R); "rate": 0 turns it off); every bucket
                      starts full again; answers the new settings, 400 for bad values
  GET  /_emu/faults   the fault rules with how often each saw and fired
  POST /_emu/faults   replace the rules: body {"faults": [SPEC, ...]}
  GET  /_emu/health   {"ok": true}
  POST /_emu/items    add an item: body = one spec item (its "parent" must exist); answers {"id": ...}
  POST /_emu/items/ID change an item ("another machine changed it"): body {"name", "parent",
                      "trashed", "readOnly", "content" (UTF-8 text) or "content_b64" (base64
                      bytes)}, all optional; bumps its version (and makes a new revision when the
                      content changes; the old one stays readable through revisions.get)
  DELETE /_emu/items/ID   delete an item and everything below it
  Item changes are appended to the change log that changes.list serves.
  POST /_emu/outage   {"seconds": S}: refuse connections for S seconds (the listening socket is
                      closed and open connections are cut), then listen on the same port again
  Writes and uploads (emucontrol.py has the details): GET|POST /_emu/write-rate, GET|POST
  /_emu/storage, GET|POST /_emu/uploads (settings and sessions), POST /_emu/uploads/expire,
  POST /_emu/tokens, GET /_emu/items/ID, GET /_emu/items/ID/content[?revision=R],
  GET /_emu/find?name=N | ?path=P.

A request record is committed to the counters before the last byte of its body is sent, so a client that
has read a whole response can read /_emu/stats at once and see it.
"""

import argparse
import base64
import binascii
import collections
import json
import math
import os
import select
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import emuapi     # noqa: E402
import emuauth    # noqa: E402
import emubody   # noqa: E402
import emucontrol  # noqa: E402
import emudrive   # noqa: E402
import emufaults  # noqa: E402
import emuknobs   # noqa: E402
import emuquota   # noqa: E402
import emusample  # noqa: E402
import emuupload  # noqa: E402
import emuwrite   # noqa: E402

LOG_KEEP = 10_000
BODY_KINDS = ("media", "export")
# Drive API requests: what the concurrency and rate counters count (not the OAuth token endpoint, not
# the metadata server, not the /_emu/ control calls).
API_KINDS = tuple(k for k in emufaults.KINDS if k not in ("token", "metadata"))
_SECRET_PARAMS = {"access_token", "key", "oauth_token", "assertion", "refresh_token", "client_secret"}


class Pacer:
    """Spaces out ``take(n)`` calls so that bytes flow at ``rate`` per second on average."""

    def __init__(self, rate):
        self.rate = rate
        self.piece = max(1024, min(64 * 1024, int(rate) // 50))
        self._lock = threading.Lock()
        self._next = 0.0

    def take(self, n):
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + n / self.rate
        if start > now:
            time.sleep(start - now)


class RateMeter:
    """The most events seen within any ``window`` seconds (a sliding window: at each event, the
    events of the ``window`` seconds up to and including it are counted)."""

    def __init__(self, window=1.0, clock=time.monotonic):
        self.window, self._clock = window, clock
        self._times = collections.deque()
        self.peak = 0

    def _trim(self, now):
        while self._times and self._times[0] <= now - self.window:
            self._times.popleft()

    def add(self):
        now = self._clock()
        self._trim(now)
        self._times.append(now)
        self.peak = max(self.peak, len(self._times))

    def current(self):
        """Events within the last ``window`` seconds."""
        self._trim(self._clock())
        return len(self._times)

    def reset(self):
        self._times.clear()
        self.peak = 0


class Stats:
    """Counters and the request log. Records are dicts; see the module doc for their keys."""

    def __init__(self, log_path=None):
        self._lock = threading.Lock()
        self._log_file = open(log_path, "a", encoding="utf-8") if log_path else None
        self.concurrent = self.concurrent_media = 0        # never reset: requests being answered
        self.arrivals = RateMeter()
        self.reset()

    def reset(self):
        with self._lock:
            self._epoch = object()
            self.requests = 0
            self.errors = 0
            self.media_bytes = 0
            self.range_requests = 0
            self.quota_rejected = 0
            self.units_used = 0
            self.cancelled = 0
            self.max_concurrent = self.concurrent
            self.max_concurrent_media = self.concurrent_media
            self.arrivals.reset()
            self.by_kind = collections.Counter({k: 0 for k in emufaults.KINDS})
            self.status = collections.Counter()
            self.log = collections.deque(maxlen=LOG_KEEP)

    def begin(self, kind):
        """A Drive API request (a kind in API_KINDS) arrived; ``end(kind)`` when it is answered."""
        with self._lock:
            self.arrivals.add()
            self.concurrent += 1
            self.max_concurrent = max(self.max_concurrent, self.concurrent)
            if kind in BODY_KINDS:
                self.concurrent_media += 1
                self.max_concurrent_media = max(self.max_concurrent_media, self.concurrent_media)

    def end(self, kind):
        with self._lock:
            self.concurrent -= 1
            self.concurrent_media -= kind in BODY_KINDS

    def commit(self, record):
        """Count a finished-or-nearly-finished request (``record["bytes"]`` = bytes to be sent)."""
        with self._lock:
            record["_epoch"] = self._epoch
            self.requests += 1
            self.by_kind[record["kind"]] += 1
            self.status[str(record["status"])] += 1
            self.errors += record["status"] >= 400
            self.range_requests += record["range"] is not None
            self.quota_rejected += record["quota_refused"]
            self.units_used += record["units"]
            if _is_content(record):
                self.media_bytes += record["bytes"]
            self.log.append(record)

    def finish(self, record, sent):
        """Correct the byte count of a committed record, count a cancelled one, write its log line."""
        with self._lock:
            current = record.get("_epoch") is self._epoch
            if current and _is_content(record):
                self.media_bytes += sent - record["bytes"]
            self.cancelled += current and record["cancelled"]
            record["bytes"] = sent
            if self._log_file:
                self._log_file.write(json.dumps(_public(record)) + "\n")
                self._log_file.flush()

    def snapshot(self):
        with self._lock:
            return {"requests": self.requests, "by_kind": dict(self.by_kind), "errors": self.errors,
                    "media_bytes": self.media_bytes, "range_requests": self.range_requests,
                    "status": dict(self.status), "quota_rejected": self.quota_rejected,
                    "units_used": self.units_used,
                    "cancelled": self.cancelled, "concurrent": self.concurrent,
                    "concurrent_media": self.concurrent_media, "max_concurrent": self.max_concurrent,
                    "max_concurrent_media": self.max_concurrent_media,
                    "max_requests_per_s": self.arrivals.peak, "requests_last_s": self.arrivals.current()}

    def records(self):
        with self._lock:
            return [_public(r) for r in self.log]

    def close(self):
        if self._log_file:
            self._log_file.close()


def _is_content(record):
    """Whether the record's body is file content (media or export bytes, not an error body)."""
    return record["kind"] in BODY_KINDS and record["status"] in (200, 206)


def _committed(record):
    return "_epoch" in record


def _public(record):
    return {k: v for k, v in record.items() if not k.startswith("_")}


_Abort = emubody.Abort


class Handler(emubody.UploadBodyMixin, BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "drive-emulator/1.0"

    timeout = 120                      # idle keep-alive connections and stuck writes end after this
    wbufsize = 64 * 1024               # headers and small bodies leave in one write

    def version_string(self):
        return self.server_version

    def setup(self):
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def log_message(self, fmt, *args):
        if self.server.emu.verbose:
            sys.stderr.write(f"{self.address_string()} {fmt % args}\n")

    def do_GET(self):
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    # -- one request --------------------------------------------------------------------------------

    def _read_body(self):
        length = self.headers.get("Content-Length")
        if not length:
            return b""
        try:
            n = int(length)
        except ValueError:
            n = -1
        if n < 0 or n > 16 * 1024 * 1024:
            raise _Abort()
        return self.rfile.read(n)

    def _handle(self):
        emu = self.server.emu
        try:
            url = urlsplit(self.path)
            params = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
            if url.path.startswith("/_emu/"):
                self._send_plain(emu.control(self.command, url.path, self._read_body(), params))
                return
            scheme = "https" if emu.tls else "http"
            base_url = f"{scheme}://{self.headers.get('Host') or '%s:%d' % self.server.server_address[:2]}"
            req = emuapi.Request(self.command, url.path, params, self.headers, b"", base_url)
            route = emu.api.route(req)
            self._body_read = route.kind not in emuapi.STREAMED_KINDS
            if self._body_read:
                req.body = self._read_body()
            record = {"t": round(time.time(), 3), "mono": round(time.monotonic(), 4),
                      "method": self.command, "path": url.path,
                      "kind": route.kind, "range": self.headers.get("Range"), "status": 0, "bytes": 0,
                      "id": req.file_id,
                      "query": {k: v for k, v in params.items() if k not in _SECRET_PARAMS},
                      "fault": None, "quota_refused": False, "units": 0, "cancelled": False}
            started = time.monotonic()
            fault = emu.faults.decide(route.kind, req.file_id)
            if fault is not None:
                record["fault"] = fault.label
            counted = route.kind in API_KINDS
            if counted:
                emu.stats.begin(route.kind)
            try:
                self._answer(req, route, record, fault, started)
            finally:
                if counted:
                    emu.stats.end(route.kind)
        except _Abort as abort:
            self._close(abort.reset)
        except OSError:                      # the client went away while we answered
            self.close_connection = True

    def _answer(self, req, route, record, fault, started):
        """Answer one API request: a stall before the status line, the reply, time to first byte,
        then ``_send``. The record is committed (if ``_send`` did not) and finished whatever happens."""
        emu = self.server.emu
        resp = None
        self._body_sent = 0
        self._status_sent = False
        try:
            if fault and fault.drop:
                raise _Abort(reset=False)
            if fault and fault.stall_ms and fault.stall_after is None:
                self._pause(fault.stall_ms / 1000)
            if fault and fault.status:
                resp = emuapi.fault_error(fault.status, fault.reason, fault.message,
                                          fault.retry_after).response()
            else:
                if not self._body_read:
                    self._read_upload_body(req, fault)
                    record["received"] = len(req.body)
                resp = emu.knobs.intercept(req, route)
            if resp is None:
                try:
                    resp = emu.api.call(req, route)
                except emuapi.ConnectionLost as lost:
                    raise _Abort(reset=lost.reset, cancelled=not lost.reset) from None
                except Exception:                                # a bug: answer 500, keep serving
                    traceback.print_exc()
                    resp = emuapi.fault_error(500).response()
                finally:                                         # charged even if the body was cut
                    record["quota_refused"] = req.quota_refused
                    record["units"] = req.units
                if req.reset_after_answer:
                    raise _Abort(reset=True)
            if route.kind in BODY_KINDS and emu.ttfb_ms:
                self._pause(emu.ttfb_ms / 1000)
            elif route.kind in API_KINDS and route.kind not in BODY_KINDS and emu.api_latency_ms:
                self._pause(emu.api_latency_ms / 1000)
            self._send(resp, record, fault)
            self._drain_body()
        except _Abort as abort:
            record["cancelled"] = abort.cancelled
            raise
        except ConnectionError:
            record["cancelled"] = True
            raise
        finally:
            record["ms"] = round((time.monotonic() - started) * 1000, 1)
            if not _committed(record):
                self._commit(record, self._body_sent, resp if self._status_sent else None)
            emu.stats.finish(record, self._body_sent)

    def _pause(self, seconds):
        """Wait ``seconds`` without sending anything, but end at once with _Abort(cancelled=True)
        when the client closes the connection (FIN or reset): a client that gives up on a stalled
        request (a hedging client cancels the loser) frees this thread at once."""
        poller = select.poll()
        poller.register(self.connection.fileno(), select.POLLRDHUP | select.POLLHUP | select.POLLERR)
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if poller.poll(max(1, math.ceil(left * 1000))):
                raise _Abort(cancelled=True)

    def _commit(self, record, length, resp):
        record["status"] = resp.status if resp is not None else 0
        record["bytes"] = length
        self.server.emu.stats.commit(record)

    def _send(self, resp, record, fault):
        """Write ``resp``, applying body faults and pacing; counts body bytes in ``_body_sent``.

        The record is committed to the stats just before the last body byte goes out."""
        emu = self.server.emu
        length = resp.length
        chunks = resp.iter_chunks(256 * 1024)
        if fault and fault.truncate:
            length //= 2
        self.send_response(resp.status, resp.reason)
        self._status_sent = True
        for name, value in resp.headers:
            if fault and fault.bad_range and name == "Content-Range" and not value.startswith("bytes */"):
                first, _, rest = value[len("bytes "):].partition("-")
                last, _, total = rest.partition("/")
                value = f"bytes {int(first) + 1}-{int(last) + 1}/{total}"
            self.send_header(name, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        # Byte offsets where a fault acts: (offset, "stall" | "reset").
        events = []
        if fault and fault.stall_ms and fault.stall_after is not None:
            events.append((fault.stall_after, "stall"))
        if fault and fault.reset_after is not None:
            events.append((fault.reset_after, "reset"))
        events.sort()
        pacers = [p for p in (Pacer(emu.bandwidth) if emu.bandwidth else None, emu.total_pacer) if p]
        paced = bool(pacers) and record["kind"] in BODY_KINDS
        piece_limit = min(p.piece for p in pacers) if paced else None
        try:
            if length == 0:
                self._commit(record, 0, resp)
            for chunk in chunks:
                if self._body_sent >= length:
                    break
                view = memoryview(chunk)[:length - self._body_sent]
                while view:
                    self._body_fault_events(events, fault)
                    n = len(view)
                    if events:
                        n = min(n, events[0][0] - self._body_sent)
                    if piece_limit:
                        n = min(n, piece_limit)
                    piece, view = view[:n], view[n:]
                    if self._body_sent + n >= length and not _committed(record):
                        self._commit(record, length, resp)
                    if paced:
                        for p in pacers:
                            p.take(n)
                    self.wfile.write(piece)
                    self._body_sent += n
                    if paced or events:
                        self.wfile.flush()
            self._body_fault_events(events, fault)
            self.wfile.flush()
        except OSError as exc:
            # The client went away, or the content could not be read: the body is cut short.
            gone = isinstance(exc, ConnectionError)
            if not gone:
                sys.stderr.write(f"drive-emulator: body of {self.path} cut short: {exc}\n")
            raise _Abort(cancelled=gone) from exc
        if self._body_sent < length:
            raise _Abort()

    def _body_fault_events(self, events, fault):
        """Act on the fault events due at the current body offset."""
        while events and events[0][0] <= self._body_sent:
            self.wfile.flush()
            _, action = events.pop(0)
            if action == "reset":
                raise _Abort(reset=True)
            self._pause(fault.stall_ms / 1000)

    def _close(self, reset):
        """End the connection; with ``reset`` the peer sees a TCP reset instead of a clean close."""
        self.close_connection = True
        if reset:
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.server.mark_reset(self.connection)
            except OSError:
                pass

    def finish(self):
        try:
            super().finish()
        except (OSError, ValueError):
            pass

    def _send_plain(self, resp):
        self.send_response(resp.status, resp.reason)
        for name, value in resp.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(resp.length))
        self.end_headers()
        self.wfile.write(resp.body)


class EmulatorServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, emu, ssl_context=None):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.emu = emu
        self.ssl_context = ssl_context
        self.reset_requests = set()          # sockets to close with RST (no FIN first)
        self.open_requests = set()           # connections being served, closed by close_connections()
        self._requests_lock = threading.Lock()
        super().__init__(address, Handler)

    def process_request(self, request, client_address):
        with self._requests_lock:
            self.open_requests.add(request)
        super().process_request(request, client_address)

    def get_request(self):
        sock, addr = super().get_request()
        if self.ssl_context is not None:
            # The handshake happens in the request thread, so a slow client cannot block accept().
            sock = self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def finish_request(self, request, client_address):
        if self.ssl_context is not None:
            try:
                request.settimeout(30)
                request.do_handshake()
            except (OSError, ssl.SSLError):
                return
        super().finish_request(request, client_address)

    def mark_reset(self, request):
        """Close ``request`` without shutting it down first (with SO_LINGER 0 that sends an RST)."""
        with self._requests_lock:
            self.reset_requests.add(request)

    def shutdown_request(self, request):
        with self._requests_lock:
            self.open_requests.discard(request)
            reset = request in self.reset_requests
            self.reset_requests.discard(request)
        if reset:
            self.close_request(request)
        else:
            super().shutdown_request(request)

    def close_connections(self):
        """Wake every connection thread (idle keep-alive ones included) so that it ends."""
        with self._requests_lock:
            requests = list(self.open_requests)
        for request in requests:
            try:
                request.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError, ssl.SSLError)):
            super().handle_error(request, client_address)


class Emulator:
    """A running emulator. ``start()`` binds and serves in a background thread; ``stop()`` ends it.

    ``drive`` is an emudrive.Drive and ``auth`` an emuauth.Auth; the keyword options are those of the
    command line (``ttfb_ms``, ``api_latency_ms``, ``bandwidth``, ``total_bandwidth``, ``page_size_cap``,
    ``short_pages``, ``seed``, ``faults``, ``log_path``, ``export_limit``, ``user_rate``, ``user_burst``,
    ``user_rate_status``, ``user_units`` (quota units per minute, emuquota's units mode; not with
    ``user_rate``), ``verbose``; for writes ``write_rate``, ``write_burst``,
    ``write_rate_status``, ``storage_limit`` (bytes, None = unlimited; default 15 GiB),
    ``read_only`` (ids of items read-only for the user), ``unreserved_id_status`` and
    ``upload_options``, a dict of emuupload.Uploads settings; ``old_revisions``, replaced revisions
    kept per blob).
    """

    def __init__(self, drive, auth=None, *, ttfb_ms=0, api_latency_ms=0, bandwidth=0, total_bandwidth=0,
                 page_size_cap=0, short_pages=False, seed=0, faults=(), log_path=None,
                 export_limit=emuapi.DEFAULT_EXPORT_LIMIT, user_rate=0, user_burst=None,
                 user_rate_status=403, user_units=0, verbose=False, write_rate=0, write_burst=None,
                 write_rate_status=403, storage_limit=emudrive.QUOTA_LIMIT, read_only=(),
                 unreserved_id_status=409, upload_options=None, old_revisions=emudrive.MAX_OLD_REVISIONS,
                 knobs=None):
        self.drive = drive
        drive.old_revisions = old_revisions
        self.knobs = knobs or emuknobs.Knobs()
        self.auth = auth or emuauth.Auth(seed=seed)
        if user_units and user_rate:
            raise ValueError("user_rate (requests) and user_units (quota units) exclude each other")
        if user_units:
            self.quota = emuquota.UserQuota(user_units / 60, user_burst, user_rate_status, units=True)
        else:
            self.quota = emuquota.UserQuota(user_rate, user_burst, user_rate_status)
        drive.storage_limit = storage_limit
        for item_id in read_only:
            if drive.get(item_id) is None:
                raise ValueError(f"--read-only: no item {item_id!r}")
            drive.update_item(item_id, read_only=True)
        self.writes = emuwrite.WriteApi(drive, emuquota.UserQuota(write_rate, write_burst, write_rate_status),
                                        unreserved_id_status, seed, upload_options)
        self.api = emuapi.DriveApi(drive, self.auth, page_size_cap=page_size_cap, short_pages=short_pages,
                                   seed=seed, export_limit=export_limit, quota=self.quota,
                                   writes=self.writes)
        self.faults = emufaults.FaultPlan(faults, seed=seed)
        self.stats = Stats(log_path)
        self.ttfb_ms = ttfb_ms
        self.api_latency_ms = api_latency_ms
        self.bandwidth = bandwidth
        self.total_pacer = Pacer(total_bandwidth) if total_bandwidth else None
        self.verbose = verbose
        self.tls = False
        self.server = None
        self.port = None
        self._thread = None
        self._serve_lock = threading.Lock()
        self._refusing = False

    def start(self, host="127.0.0.1", port=0, tls_dir=None):
        context = None
        if tls_dir:
            _, cert, key = emuauth.ensure_tls_files(tls_dir)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            self.tls = True
        self.server = EmulatorServer((host, port), self, context)
        self.drive.hash_large_files()
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="drive-emulator",
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    @property
    def base_url(self):
        host = self.server.server_address[0]
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def refuse_connections(self, seconds):
        """An outage that refuses connections: close the listening socket and every open
        connection now, and listen on the same port again after ``seconds``."""
        server = self.server
        if server is None or self._refusing:
            raise ValueError("the emulator is not serving")
        self._refusing = True

        def outage():
            server.shutdown()
            server.socket.close()
            server.close_connections()
            time.sleep(seconds)
            with self._serve_lock:
                if self.server is not server:
                    return                                   # stopped meanwhile
                server.socket = socket.socket(server.address_family, server.socket_type)
                server.server_bind()
                server.server_activate()
                self._thread = threading.Thread(target=server.serve_forever, name="drive-emulator",
                                                kwargs={"poll_interval": 0.1}, daemon=True)
                self._thread.start()
                self._refusing = False

        threading.Timer(0.05, outage).start()                # after this control call is answered

    def stop(self):
        with self._serve_lock:
            self._stop()

    def _stop(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server.close_connections()
            self._thread.join(timeout=10)
            self.server = None
        self.stats.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- control endpoints --------------------------------------------------------------------------

    def control(self, method, path, body, params=None):
        """Answer a /_emu/ request (see the module doc)."""
        reply = emucontrol.reply
        if path == "/_emu/stats" and method == "GET":
            return reply(dict(self.stats.snapshot(), uploads=self.writes.snapshot()))
        if path == "/_emu/log" and method == "GET":
            return reply(self.stats.records())
        if path == "/_emu/reset" and method == "POST":
            self.stats.reset()
            self.writes.reset_counters()
            return reply({"ok": True})
        if path == "/_emu/health" and method == "GET":
            return reply({"ok": True})
        if path == "/_emu/faults" and method == "GET":
            return reply({"faults": self.faults.describe()})
        if path == "/_emu/quota" and method == "GET":
            return reply(self.quota.describe())
        try:
            value = json.loads(body or b"{}")
            answer = emucontrol.write_control(self, method, path, value, params or {})
            if answer is not None:
                return answer
            if path == "/_emu/outage" and method == "POST":
                self.refuse_connections(float(value.get("seconds", 1)))
                return reply({"refusing_for": float(value.get("seconds", 1))})
            if path == "/_emu/faults" and method == "POST":
                self.faults.replace(value.get("faults", []) if isinstance(value, dict) else value)
                return reply({"faults": self.faults.describe()})
            if path == "/_emu/quota" and method == "POST":
                unknown = set(value) - {"rate", "burst", "status", "units"}
                if unknown:
                    raise ValueError(f"unknown quota settings {sorted(unknown)}")
                self.quota.configure(value.get("rate"), value.get("burst"), value.get("status"),
                                     value.get("units"))
                return reply(self.quota.describe())
            if path == "/_emu/items" and method == "POST":
                return reply({"id": self.drive.add_item(value)})
            if path.startswith("/_emu/items/") and method in ("POST", "DELETE"):
                item_id = path[len("/_emu/items/"):]
                if method == "DELETE":
                    self.drive.remove_item(item_id)
                else:
                    content = value.get("content")
                    content = None if content is None else content.encode("utf-8")
                    if value.get("content_b64") is not None:
                        content = base64.b64decode(value["content_b64"], validate=True)
                    self.drive.update_item(item_id, name=value.get("name"), parent=value.get("parent"),
                                           trashed=value.get("trashed"), content=content,
                                           read_only=value.get("readOnly"))
                return reply({"id": item_id})
        except KeyError as exc:
            return reply({"error": f"no item {exc.args[0]}"}, 404)
        except (ValueError, AttributeError, TypeError, binascii.Error) as exc:
            return reply({"error": str(exc)}, 400)
        return reply({"error": f"no control endpoint {method} {path}"}, 404)


# ---------------------------------------------------------------------------------------------------
# command line

def parse_args(argv):
    p = argparse.ArgumentParser(description="Google Drive API v3 emulator for colabfs tests. The spec "
                                            "format, fault syntax and control endpoints are described "
                                            "in the module docstring of this file.")
    content = p.add_mutually_exclusive_group()
    content.add_argument("--spec", metavar="FILE", help="serve the JSON tree spec FILE")
    content.add_argument("--tree", metavar="DIR", help="serve the directory DIR (ids from relative paths)")
    content.add_argument("--sample", metavar="DIR", help="write a demo drive into DIR and serve it")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    p.add_argument("--port-file", metavar="FILE", help="write the port here once accepting")
    p.add_argument("--tls-dir", metavar="DIR", help="serve HTTPS; make a test CA and certificate in DIR "
                                                    "when missing (clients trust DIR/ca.pem)")
    p.add_argument("--ttfb-ms", type=float, default=0, metavar="N",
                   help="delay before the first byte of media and export responses")
    p.add_argument("--api-latency-ms", type=float, default=0, metavar="N",
                   help="delay before the status line of every other Drive API response")
    p.add_argument("--bandwidth", type=int, default=0, metavar="BYTES_PER_S",
                   help="media bytes per second per connection (0 = unlimited)")
    p.add_argument("--total-bandwidth", type=int, default=0, metavar="BYTES_PER_S",
                   help="media bytes per second for all connections together (0 = unlimited)")
    p.add_argument("--page-size-cap", type=int, default=0, metavar="N",
                   help="at most N items per files.list/changes.list page")
    p.add_argument("--short-pages", action="store_true",
                   help="randomly return short and empty pages before the end of a listing")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed for all randomness")
    p.add_argument("--export-limit", type=int, default=emuapi.DEFAULT_EXPORT_LIMIT, metavar="BYTES",
                   help="largest export in bytes (default 10 MiB)")
    p.add_argument("--access-token", action="append", default=[], metavar="TOK",
                   help="a bearer token valid forever (repeatable)")
    p.add_argument("--client-id", metavar="ID", help="OAuth client id for the refresh_token grant")
    p.add_argument("--client-secret", metavar="S", help="OAuth client secret")
    p.add_argument("--refresh-token", metavar="R", help="the refresh token the grant accepts")
    p.add_argument("--grant-scope", metavar="SCOPE",
                   help="scope a refresh_token grant that asks for none gets (default: drive)")
    p.add_argument("--token-lifetime", type=float, default=3600, metavar="S",
                   help="seconds an issued token stays valid (default 3600)")
    p.add_argument("--sa-public-key", metavar="PEM", help="service-account key that signs JWT grants")
    p.add_argument("--sa-email", metavar="EMAIL", help="service-account email (the JWT iss)")
    _add_bucket_flags(p, "user", "Drive API requests")
    p.add_argument("--user-units", type=float, metavar="N",
                   help="Drive's quota in units instead of requests: N quota units per minute per "
                        f"user ({emuquota.DRIVE_UNITS_PER_MINUTE} is Drive's figure; a download "
                        "costs 200, a list 100, a write 50, anything else 5); --user-burst is then "
                        "in units (default max(200, N/60)); not with --user-rate")
    p.add_argument("--readonly-token", action="append", default=[], metavar="TOK",
                   help="a bearer token valid forever with only the drive.readonly scope (repeatable)")
    p.add_argument("--metadata-scope", metavar="SCOPE",
                   help="the scope of metadata-server tokens, whatever ?scopes= asks")
    _add_bucket_flags(p, "write", "creations and uploads (files.create, media and multipart uploads, "
                                  "resumable session starts)")
    p.add_argument("--storage-limit", type=int, default=emudrive.QUOTA_LIMIT, metavar="BYTES",
                   help="the user's storage quota (default 15 GiB; 0 = unlimited); uploads past it "
                        "get 403 storageQuotaExceeded")
    p.add_argument("--read-only", action="append", default=[], metavar="ID",
                   help="an item (a folder: its subtree) the user may only read (repeatable)")
    p.add_argument("--old-revisions", type=int, default=emudrive.MAX_OLD_REVISIONS, metavar="N",
                   help="replaced revisions of a blob kept for revisions.get (default 200, like Drive; "
                        "0 = only the head revision exists, a pinned read of an old one is 404)")
    p.add_argument("--unreserved-id-status", type=int, default=409, choices=(409, 400),
                   help="answer to a create with an id generateIds never handed out (default 409)")
    p.add_argument("--upload-session-lifetime", type=float, default=emuupload.WEEK_S, metavar="S",
                   help="seconds a resumable upload session lives (default a week)")
    p.add_argument("--unaligned-chunks", choices=("reject", "truncate"), default="reject",
                   help="an intermediate chunk that is not a multiple of 256 KiB: 400 (reject, the "
                        "default) or keep its largest 256 KiB multiple (truncate)")
    p.add_argument("--upload-create-status", type=int, choices=(200, 201), default=200,
                   help="status of a finished upload that created a file (default 200)")
    p.add_argument("--multipart-limit", type=int, default=0, metavar="BYTES",
                   help="largest media/multipart upload body (0 = no limit, the default)")
    p.add_argument("--fault", action="append", default=[], metavar="SPEC",
                   help="a fault rule (repeatable; syntax in emufaults.py)")
    p.add_argument("--token-redirect", metavar="URL",
                   help="the token endpoint answers 307 to URL (see emuknobs.py)")
    p.add_argument("--revision-404", action="append", default=[], metavar="ID",
                   help="revision downloads of file ID answer 404 (see emuknobs.py)")
    p.add_argument("--revision-403", action="append", default=[], metavar="ID",
                   help="revision downloads of file ID answer 403 (see emuknobs.py)")
    p.add_argument("--log", metavar="FILE", help="append one JSON line per request to FILE")
    p.add_argument("--verbose", action="store_true", help="print each request to stderr")
    args = p.parse_args(argv)
    if bool(args.sa_public_key) != bool(args.sa_email):
        p.error("--sa-public-key and --sa-email go together")
    if args.refresh_token and not (args.client_id and args.client_secret):
        p.error("--refresh-token needs --client-id and --client-secret")
    if args.user_units is not None and args.user_rate is not None:
        p.error("--user-units and --user-rate exclude each other (quota units or requests)")
    if args.user_units is not None and args.user_units < 0:
        p.error("--user-units must be >= 0")
    for who in ("user", "write"):
        rate, burst = getattr(args, f"{who}_rate") or 0.0, getattr(args, f"{who}_burst")
        setattr(args, f"{who}_rate", rate)
        if rate < 0 or (burst is not None and burst < 1):
            p.error(f"--{who}-rate must be >= 0 and --{who}-burst >= 1")
    args.user_units = args.user_units or 0
    return args


def _add_bucket_flags(p, who, what):
    """--WHO-rate, --WHO-burst, --WHO-rate-status: a per-user token bucket (emuquota.UserQuota)."""
    p.add_argument(f"--{who}-rate", type=float, metavar="R",           # None: not given (0)
                   help=f"{what} per second per user; more get 403 userRateLimitExceeded (0 = no "
                        "limit, the default)")
    p.add_argument(f"--{who}-burst", type=float, metavar="B",
                   help="how many a user may make at once (bucket size; default max(1, R))")
    p.add_argument(f"--{who}-rate-status", type=int, default=403, choices=emuquota.STATUSES,
                   help="status over the limit: 403 userRateLimitExceeded (default) or 429 "
                        "rateLimitExceeded")


def build_drive(args):
    if args.spec:
        with open(args.spec, encoding="utf-8") as f:
            spec = json.load(f)
        return emudrive.Drive.from_spec(spec, os.path.dirname(os.path.abspath(args.spec)))
    if args.tree:
        return emudrive.Drive.from_tree(args.tree)
    if args.sample:
        return emudrive.Drive.from_spec(emusample.write_sample(args.sample), args.sample)
    return emudrive.Drive()


def write_port_file(path, port):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, path)


def main(argv=None):
    args = parse_args(argv)
    try:
        drive = build_drive(args)
        auth = emuauth.Auth(args.access_token, args.client_id, args.client_secret, args.refresh_token,
                            args.token_lifetime, args.sa_public_key, args.sa_email, args.seed,
                            args.grant_scope, args.metadata_scope)
        for token in args.readonly_token:
            auth.add_token(token, emuauth.READONLY_SCOPE)
        uploads = {"session_lifetime": args.upload_session_lifetime,
                   "unaligned_chunks": args.unaligned_chunks,
                   "create_status": args.upload_create_status, "multipart_limit": args.multipart_limit}
        emu = Emulator(drive, auth, ttfb_ms=args.ttfb_ms, api_latency_ms=args.api_latency_ms,
                       bandwidth=args.bandwidth,
                       total_bandwidth=args.total_bandwidth, page_size_cap=args.page_size_cap,
                       short_pages=args.short_pages, seed=args.seed, faults=args.fault,
                       log_path=args.log, export_limit=args.export_limit, user_rate=args.user_rate,
                       user_burst=args.user_burst, user_rate_status=args.user_rate_status,
                       user_units=args.user_units,
                       verbose=args.verbose, write_rate=args.write_rate, write_burst=args.write_burst,
                       write_rate_status=args.write_rate_status,
                       storage_limit=args.storage_limit or None, read_only=args.read_only,
                       unreserved_id_status=args.unreserved_id_status, upload_options=uploads,
                       old_revisions=max(0, args.old_revisions),
                       knobs=emuknobs.Knobs(args.token_redirect, args.revision_404,
                                            args.revision_403))
        emu.start(args.host, args.port, args.tls_dir)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        sys.stderr.write(f"drive-emulator: {exc}\n")
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.port_file:
        write_port_file(args.port_file, emu.port)
    sys.stderr.write(f"drive-emulator: serving {len(drive.items) - 1} items on {emu.base_url}"
                     f"{'' if not auth.open else ' (any bearer token accepted)'}\n")
    while not stop.wait(0.5):
        pass
    emu.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
