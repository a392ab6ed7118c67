"""Drive API v3 endpoint logic of the emulator, independent of the HTTP transport.

``DriveApi.route(request)`` names the endpoint (its *kind*, used by stats, logs and fault rules) and
``DriveApi.call(request, route)`` checks the bearer token (except for the token endpoint and the metadata
server), charges the user's request quota (emuquota.py) and returns a ``Response``. Failures are ``ApiError``s that render Drive's error body::

    {"error": {"code": N, "message": M,
               "errors": [{"domain": D, "reason": R, "message": M, "locationType": T, "location": L}]}}

Behaviour follows drive-api-v3.md; the choices it leaves open are documented at the methods below.

Shared drives (§1.9), as the emulator enforces them:

* files.get, media, export and revisions of an item in a shared drive (a shared drive's id included) answer
  404 notFound unless the request has ``supportsAllDrives=true``.
* files.list ``corpora``: ``user`` (default) and ``domain`` list My Drive and shared-with-me items;
  ``allDrives`` adds shared-drive items; ``drive`` lists one shared drive and needs ``driveId`` (else 400
  required). Shared-drive items are listed only with ``supportsAllDrives=true`` and
  ``includeItemsFromAllDrives=true`` (else they are left out). ``driveId`` without
  ``includeItemsFromAllDrives=true`` is 400 ``teamDriveIncludeItemsRequired``; ``driveId`` with a corpora
  other than ``drive`` is 400 invalid [?]; an unknown ``driveId``, or one without
  ``supportsAllDrives=true``, is 404 notFound "Shared drive not found".
* changes: ``driveId`` selects that drive's feed (startPageToken and changes.list; same 404 rules, and
  changes.list needs ``includeItemsFromAllDrives=true`` like files.list [?]). Without ``driveId`` the feed
  holds My Drive changes, plus shared-drive ones with both flags. Tokens are positions in one log.
* drives.get ``/drive/v3/drives/ID`` and drives.list ``/drive/v3/drives`` (pageSize 1..100, default 10).
"""


import base64
import binascii
import hashlib
import hmac
import json
import random
import re
from urllib.parse import parse_qs, unquote

import emuauth
import emucontent
import emudrive
import emuquery
import emuquota

JSON_TYPE = "application/json; charset=UTF-8"
DEFAULT_EXPORT_LIMIT = 10 * 1024 * 1024
MAX_PAGE_SIZE = 1000

_LIST_SCHEMA = {"kind": None, "nextPageToken": None, "incompleteSearch": None,
                "files": emudrive.FILE_SCHEMA}
_DEFAULT_LIST_MASK = {"kind": None, "nextPageToken": None, "incompleteSearch": None,
                      "files": emudrive.DEFAULT_FILE_MASK}
_CHANGE_SCHEMA = {"kind": None, "changeType": None, "time": None, "removed": None, "fileId": None,
                  "file": emudrive.FILE_SCHEMA, "driveId": None, "drive": emuquery.ANY,
                  "teamDriveId": None, "teamDrive": emuquery.ANY, "type": None}
_CHANGES_SCHEMA = {"kind": None, "nextPageToken": None, "newStartPageToken": None,
                   "changes": _CHANGE_SCHEMA}
_DEFAULT_CHANGES_MASK = {"kind": None, "nextPageToken": None, "newStartPageToken": None,
                         "changes": {"kind": None, "changeType": None, "time": None, "removed": None,
                                     "fileId": None, "file": emudrive.DEFAULT_FILE_MASK}}
_DRIVE_SCHEMA = {k: None for k in (
    "kind", "id", "name", "createdTime", "hidden", "colorRgb", "backgroundImageLink", "themeId",
    "orgUnitId")}
_DRIVE_SCHEMA.update(capabilities=emuquery.ANY, restrictions=emuquery.ANY, backgroundImageFile=emuquery.ANY)
_DEFAULT_DRIVE_MASK = {"kind": None, "id": None, "name": None}
_DRIVE_LIST_SCHEMA = {"kind": None, "nextPageToken": None, "drives": _DRIVE_SCHEMA}
_DEFAULT_DRIVE_LIST_MASK = {"kind": None, "nextPageToken": None, "drives": _DEFAULT_DRIVE_MASK}
MAX_DRIVES_PAGE = 100
_ABOUT_SCHEMA = {"kind": None, "user": {k: None for k in emudrive.USER},
                 "storageQuota": {k: None for k in ("limit", "usage", "usageInDrive", "usageInDriveTrash")},
                 "exportFormats": emuquery.ANY, "importFormats": emuquery.ANY,
                 "maxImportSizes": emuquery.ANY, "maxUploadSize": None, "appInstalled": None,
                 "canCreateDrives": None, "canCreateTeamDrives": None, "folderColorPalette": None,
                 "driveThemes": emuquery.ANY, "teamDriveThemes": emuquery.ANY}
_REVISION_SCHEMA = {k: None for k in (
    "kind", "id", "mimeType", "modifiedTime", "keepForever", "published", "size", "md5Checksum",
    "originalFilename", "publishAuto", "publishedOutsideDomain", "publishedLink")}
_REVISION_SCHEMA.update(lastModifyingUser=emuquery.ANY, exportLinks=emuquery.ANY)
_DEFAULT_REVISION_MASK = {"kind": None, "id": None, "mimeType": None, "modifiedTime": None}

NOT_DOWNLOADABLE = "Only files with binary content can be downloaded. Use Export with Docs Editors files."
_USAGE_LIMIT_REASONS = {"userRateLimitExceeded", "rateLimitExceeded", "dailyLimitExceeded",
                        "downloadQuotaExceeded", "quotaExceeded"}
_DEFAULT_REASONS = {
    400: ("badRequest", "Bad Request"),
    401: ("authError", "Invalid Credentials"),
    403: ("userRateLimitExceeded", "User Rate Limit Exceeded"),
    404: ("notFound", "Not Found"),
    429: ("rateLimitExceeded", "Too Many Requests"),
    500: ("backendError", "Backend Error"),
    502: ("backendError", "Bad Gateway"),
    503: ("backendError", "The service is currently unavailable."),
    504: ("backendError", "Gateway Timeout"),
}


METADATA_TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
# Kinds whose request body the transport reads only once the fault rules have had their say, so that
# a fault can answer before the body is read or cut it part-way (drive_emulator.py).
STREAMED_KINDS = ("upload", "upload.chunk")
# Kinds answered without a bearer token or the user's request quota: the token endpoint, the
# metadata server, unknown paths, and resumable-upload session URIs (the upload_id is the
# credential, as on Drive [?]).
UNAUTHENTICATED_KINDS = ("token", "metadata", "error", "upload.chunk")


class ConnectionLost(Exception):
    """Raised by an endpoint whose request body was cut short (``Request.body_complete`` false):
    the transport closes the connection without an answer, with a TCP reset when ``reset``."""

    def __init__(self, reset=False):
        super().__init__("request body cut short")
        self.reset = reset


class Response:
    """An HTTP answer: a status, headers and either ``body`` bytes or ``chunks(size)`` of ``length``."""

    def __init__(self, status, body=b"", content_type=JSON_TYPE, headers=(), chunks=None, length=None,
                 reason=None):
        self.status = status
        self.reason = reason                 # the status line's phrase (None: the usual one)
        self.body = body
        self.headers = [("Content-Type", content_type), *headers]
        self._chunks = chunks
        self.length = len(body) if chunks is None else length

    def iter_chunks(self, size):
        if self._chunks is None:
            return iter([self.body] if self.body else [])
        return self._chunks(size)

    @classmethod
    def json(cls, value, status=200, pretty=True):
        text = json.dumps(value, indent=2 if pretty else None, ensure_ascii=False)
        return cls(status, (text + "\n").encode("utf-8"))


class ApiError(Exception):
    def __init__(self, status, reason, message, location=None, location_type="parameter",
                 domain=None, headers=(), detail_message=None):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message
        self.detail_message = detail_message or message
        self.location, self.location_type = location, location_type
        self.domain = domain or ("usageLimits" if reason in _USAGE_LIMIT_REASONS else "global")
        self.headers = list(headers)

    def body(self):
        detail = {"domain": self.domain, "reason": self.reason, "message": self.detail_message}
        if self.location:
            detail.update(locationType=self.location_type, location=self.location)
        return {"error": {"code": self.status, "message": self.message, "errors": [detail]}}

    def response(self):
        resp = Response.json(self.body(), self.status)
        resp.headers.extend(self.headers)
        return resp


def fault_error(status, reason=None, message=None, retry_after=None):
    """The ApiError a fault rule answers with (default reason and message per status)."""
    default_reason, default_message = _DEFAULT_REASONS.get(status, ("backendError", "Backend Error"))
    headers = [("Retry-After", str(int(retry_after) if float(retry_after).is_integer() else retry_after))] \
        if retry_after is not None else []
    return ApiError(status, reason or default_reason, message or default_message, headers=headers)


def insufficient_scopes():
    """403 for a token without the scope a call needs, as Drive words it."""
    return ApiError(403, "insufficientPermissions", "Request had insufficient authentication scopes.",
                    detail_message="Insufficient Permission")


def invalid(location, message="Invalid Value"):
    return ApiError(400, "invalid", message, location)


def not_found(file_id):
    return ApiError(404, "notFound", f"File not found: {file_id}.", "fileId")


class Request:
    """What the API needs of an HTTP request. ``params`` maps each query parameter to its first value."""

    def __init__(self, method, path, params, headers, body=b"", base_url="http://127.0.0.1"):
        self.method, self.path, self.params = method, path, params
        self.headers, self.body, self.base_url = headers, body, base_url
        self.file_id = None
        self.scope = None
        self.user = None
        self.quota_refused = False
        self.units = 0                       # quota units the request was charged (emuquota.units_of)
        self.body_complete = True            # False: the client sent fewer bytes than it announced
        self.body_reset = False              # the body was cut by a reset_in_body fault
        self.reset_after_answer = False      # a reset_in_body fault past the body: lose the answer


class Route:
    def __init__(self, kind, handler, *args):
        self.kind, self.handler, self.args = kind, handler, args


_FILE_PATH = re.compile(r"/drive/v3/files/([^/]+)(/export|/revisions/([^/]+)|/revisions)?")


class DriveApi:
    """The endpoints. Options: ``page_size_cap`` (0 = none), ``short_pages`` (random short and empty
    pages), ``seed`` (for page tokens and short pages), ``export_limit`` (bytes), ``quota`` (an
    emuquota.UserQuota; default: off), ``writes`` (an object whose ``route(req)`` gives the Route of a
    write or upload request, or None: emuwrite.WriteApi; without it writes answer 405)."""

    def __init__(self, drive, auth, page_size_cap=0, short_pages=False, seed=0,
                 export_limit=DEFAULT_EXPORT_LIMIT, quota=None, writes=None):
        self.drive, self.auth = drive, auth
        self.writes = writes
        self.quota = quota or emuquota.UserQuota()
        self.page_size_cap, self.short_pages, self.seed = page_size_cap, short_pages, seed
        self.export_limit = export_limit
        self._token_key = hashlib.sha256(f"page-tokens:{seed}".encode()).digest()

    # -- routing ------------------------------------------------------------------------------------

    def route(self, req):
        """The Route for ``req``; unknown paths get kind ``error``."""
        path, method = req.path, req.method
        if path in ("/token", "/o/oauth2/token"):
            return Route("token", self.token) if method == "POST" else self._no_route(405)
        if path == METADATA_TOKEN_PATH:
            return Route("metadata", self.metadata_token) if method == "GET" else self._no_route(405)
        if path in ("/tokeninfo", "/oauth2/v3/tokeninfo"):
            return Route("token", self.token_info)
        write = self.writes.route(req) if self.writes is not None else None
        if write is not None:
            return write
        if not path.startswith("/drive/v3/"):
            return self._no_route(404)
        if method != "GET":
            return self._no_route(405)
        if path == "/drive/v3/files":
            return Route("files.list", self.files_list)
        if path == "/drive/v3/about":
            return Route("about", self.about)
        if path == "/drive/v3/changes":
            return Route("changes", self.changes_list)
        if path == "/drive/v3/changes/startPageToken":
            return Route("changes", self.changes_start)
        if path == "/drive/v3/drives":
            return Route("drives", self.drives_list)
        if path.startswith("/drive/v3/drives/") and "/" not in path[len("/drive/v3/drives/"):]:
            return Route("drives", self.drives_get, unquote(path[len("/drive/v3/drives/"):]))
        m = _FILE_PATH.fullmatch(path)
        if not m:
            return self._no_route(404)
        req.file_id = unquote(m.group(1))
        if m.group(2) == "/export":
            return Route("export", self.export, req.file_id)
        if m.group(2) == "/revisions":
            return Route("revisions.get", self.revisions_list, req.file_id)
        media = req.params.get("alt") == "media"
        if m.group(3) is not None:
            revision = unquote(m.group(3))
            return Route("media" if media else "revisions.get", self.revision, req.file_id, revision)
        if media:
            return Route("media", self.media, req.file_id)
        return Route("files.get", self.files_get, req.file_id)

    @staticmethod
    def _no_route(status):
        def handler(req):
            if status == 405:
                raise ApiError(405, "badRequest", f"Method {req.method} is not supported by the emulator")
            raise ApiError(404, "notFound", "Not Found")
        return Route("error", handler)

    def call(self, req, route):
        """Run the endpoint, answering ApiErrors with Drive's error body. A Drive API request (every
        kind but token, metadata, error and upload.chunk) is authorized and then takes a token of
        its user's quota, or in units mode ``emuquota.units_of`` its kind (emuquota.py); over quota
        it is refused and ``req.quota_refused`` is set. An accepted one gets ``req.units``, its cost
        in units, whatever the quota's mode (so a run shows what it would spend under Drive's units
        quota)."""
        try:
            if route.kind not in UNAUTHENTICATED_KINDS:
                self._authorize(req)
                units = emuquota.units_of(route.kind, req.method, req.path)
                if not self.quota.take(req.user, units if self.quota.units else 1):
                    req.quota_refused = True
                    raise fault_error(self.quota.status)
                req.units = units
            return route.handler(req, *route.args)
        except ApiError as exc:
            return exc.response()

    def _authorize(self, req):
        who = self.auth.identify(req.headers.get("Authorization"))
        if who is None:
            raise ApiError(401, "authError", "Invalid Credentials", "Authorization", "header",
                           headers=[("WWW-Authenticate", 'Bearer realm="https://accounts.google.com/"')])
        scope, req.user = who
        if not emuauth.scope_allows_drive(scope):
            raise insufficient_scopes()
        req.scope = scope

    # -- helpers ------------------------------------------------------------------------------------

    @staticmethod
    def _mask(req, schema, default, required=False):
        text = req.params.get("fields")
        if text is None or text == "":
            if required:
                raise ApiError(400, "required", "The 'fields' parameter is required for this method.",
                               "fields")
            return default
        try:
            mask = emuquery.parse_fields(text)
            emuquery.validate_fields(mask, schema)
        except emuquery.FieldError as exc:
            raise ApiError(400, "invalidParameter", f"Invalid field selection {exc.args[0]}",
                           "fields") from exc
        return mask

    @staticmethod
    def file_mask(req):
        """The ``fields`` mask of a request that answers one File resource (400 when bad)."""
        return DriveApi._mask(req, emudrive.FILE_SCHEMA, emudrive.DEFAULT_FILE_MASK)

    @staticmethod
    def _json(req, value):
        return Response.json(value, pretty=req.params.get("prettyPrint", "true") != "false")

    def _page_size(self, req):
        text = req.params.get("pageSize", "100")
        size = int(text) if text.strip().isdigit() else 0
        if not 1 <= size <= MAX_PAGE_SIZE:
            raise invalid("pageSize", f"Invalid value '{text}'. Values must be within the range: "
                                      f"[1, {MAX_PAGE_SIZE}]")
        return min(size, self.page_size_cap) if self.page_size_cap > 0 else size

    def _page_rng(self, *parts):
        return random.Random(":".join(str(p) for p in (self.seed, *parts)))

    def _item(self, file_id, req=None):
        """The item, or 404: also for a shared-drive item asked for without supportsAllDrives."""
        item = self.drive.get(file_id)
        if item is None or (item.drive_id is not None and not _flag(req, "supportsAllDrives")):
            raise not_found(file_id)
        return item

    def _shared_drive(self, req, drive_id):
        """The root Item of shared drive ``drive_id``; 404 when unknown or without supportsAllDrives."""
        root = self.drive.drives.get(drive_id)
        if root is None or not _flag(req, "supportsAllDrives"):
            raise ApiError(404, "notFound", f"Shared drive not found: {drive_id}", "driveId")
        return root

    def _corpus(self, req, changes=False):
        """The emudrive.Corpus a files.list or changes.list request reads (see the module doc)."""
        include = _flag(req, "includeItemsFromAllDrives")
        supports = _flag(req, "supportsAllDrives")
        drive_id = req.params.get("driveId") or None
        if changes:                                  # changes.list has no corpora parameter
            corpora = "drive" if drive_id else "allDrives"
        else:
            corpora = req.params.get("corpora", "user")
        if corpora not in ("user", "domain", "drive", "allDrives"):
            raise invalid("corpora")
        if corpora == "drive" and not drive_id:
            raise ApiError(400, "required", "Required parameter: driveId", "driveId")
        if drive_id and corpora != "drive":
            raise invalid("corpora", "The corpora parameter must be 'drive' when driveId is set.")
        if drive_id and not include:
            raise ApiError(400, "teamDriveIncludeItemsRequired",
                           "The includeItemsFromAllDrives parameter must be set to true when "
                           "driveId is set.", "includeItemsFromAllDrives")
        if drive_id:
            self._shared_drive(req, drive_id)
            return emudrive.Corpus(drive_id)
        return emudrive.Corpus(None, all_drives=corpora == "allDrives" and supports and include)

    # -- files.list ---------------------------------------------------------------------------------

    @staticmethod
    def _order_by(text):
        keys = []
        for part in filter(None, (p.strip() for p in (text or "").split(","))):
            words = part.split()
            if (words[0] not in emudrive.ORDER_BY_KEYS or len(words) > 2
                    or (len(words) == 2 and words[1].lower() not in ("asc", "desc"))):
                raise invalid("orderBy", f"Invalid sorting parameter: {part}")
            keys.append((words[0], len(words) == 2 and words[1].lower() == "desc"))
        return keys

    def _page_token(self, offset, page, digest):
        payload = f"{offset}:{page}:{digest}"
        sig = hmac.new(self._token_key, payload.encode(), "sha256").hexdigest()[:16]
        return emuauth.b64url_encode(f"{payload}:{sig}".encode())

    def _read_page_token(self, token, digest):
        try:
            offset, page, token_digest, sig = emuauth.b64url_decode(token).decode().split(":")
            expected = hmac.new(self._token_key, f"{offset}:{page}:{token_digest}".encode(),
                                "sha256").hexdigest()[:16]
            if hmac.compare_digest(sig, expected) and token_digest == digest:
                return int(offset), int(page)
        except (ValueError, UnicodeDecodeError):
            pass
        raise invalid("pageToken")

    def _page_bounds(self, total, offset, page, page_size, digest):
        """(end offset, offset of the next page or None). With ``short_pages`` a page may hold fewer
        items than asked for, or none, and the last items may be followed by one empty page."""
        end = min(total, offset + page_size)
        if self.short_pages and offset < total:
            rng = self._page_rng("page", digest, offset, page)
            draw = rng.random()
            if draw < 0.15:
                end = offset
            elif draw < 0.5:
                end = offset + rng.randint(1, end - offset)
            if end == total and rng.random() < 0.3:
                return end, end                       # an empty last page follows
        return end, (end if end < total else None)

    def files_list(self, req):
        """files.list. Without ``q`` every item but the root is listed, trashed ones included."""
        mask = self._mask(req, _LIST_SCHEMA, _DEFAULT_LIST_MASK)
        page_size = self._page_size(req)
        order_by = self._order_by(req.params.get("orderBy"))
        q = req.params.get("q") or None
        corpus = self._corpus(req)
        try:
            items = self.drive.listing(q, order_by, corpus)
        except emuquery.QueryError:
            raise invalid("q") from None
        digest = hashlib.sha256(f"{q}\0{order_by}\0{corpus.key()}".encode()).hexdigest()[:16]
        offset, page = 0, 0
        if req.params.get("pageToken"):
            offset, page = self._read_page_token(req.params["pageToken"], digest)
        end, next_offset = self._page_bounds(len(items), offset, page, page_size, digest)
        reply = {"kind": "drive#fileList"}
        if next_offset is not None:
            reply["nextPageToken"] = self._page_token(next_offset, page + 1, digest)
        reply["incompleteSearch"] = False
        wanted, file_mask = emuquery.selected(mask, "files")
        if wanted:
            reply["files"] = [self.drive.file_resource(item, file_mask, req.base_url)
                              for item in items[offset:end]]
        return self._json(req, _project_except(reply, mask, "files"))

    # -- files.get, media, revisions ----------------------------------------------------------------

    def files_get(self, req, file_id):
        """files.get (metadata). ``root`` is an alias of the root folder."""
        if req.params.get("alt", "json") != "json":
            raise invalid("alt")
        mask = self._mask(req, emudrive.FILE_SCHEMA, emudrive.DEFAULT_FILE_MASK)
        item = self._item(file_id, req)
        return self._json(req, self.drive.file_resource(item, mask, req.base_url))

    def revision(self, req, file_id, revision):
        """revisions.get: the head revision of a blob, or an earlier one its content was replaced
        by (uploads and /_emu/items changes keep them, as Drive keeps blob revisions); with
        alt=media that revision's bytes are downloaded."""
        item = self._item(file_id, req)
        found = item.revision(revision)
        if found is None:
            raise ApiError(404, "notFound", f"Revision not found: {revision}.", "revisionId")
        if req.params.get("alt") == "media":
            return self.media(req, file_id, found[0])
        mask = self._mask(req, _REVISION_SCHEMA, _DEFAULT_REVISION_MASK)
        return self._json(req, _revision_resource(item, revision, *found, mask))

    def revisions_list(self, req, file_id):
        """revisions.list: a blob's kept revisions, oldest first, the head last; one page."""
        item = self._item(file_id, req)
        mask = self._mask(req, {"kind": None, "nextPageToken": None, "revisions": _REVISION_SCHEMA},
                          {"kind": None, "nextPageToken": None, "revisions": _DEFAULT_REVISION_MASK})
        _, sub = emuquery.selected(mask, "revisions")
        reply = {"kind": "drive#revisionList",
                 "revisions": [_revision_resource(item, rev, source, ms, sub)
                               for rev, source, ms in item.revisions()]}
        return self._json(req, _project_except(reply, mask, "revisions"))

    def media(self, req, file_id, source=None):
        """alt=media (of ``source``, a revision's content; default the head). 200 full body without a
        usable Range; 206 for one satisfiable range; 416 (``Content-Range: bytes */size``) when the
        first byte is past the end, or for any range on an empty file. Malformed and multi-range
        headers are ignored (200 full)."""
        item = self._item(file_id, req)
        if item.source is None:
            raise ApiError(403, "fileNotDownloadable", NOT_DOWNLOADABLE, "alt")
        if not item.can_download:
            raise ApiError(403, "cannotDownloadFile", "The user does not have permission to download "
                                                      "this file.")
        if not emuauth.scope_allows_content(req.scope or ""):
            raise insufficient_scopes()
        source = source or item.source
        size = source.size
        span = parse_range(req.headers.get("Range"), size)
        if span == UNSATISFIABLE:
            raise ApiError(416, "requestedRangeNotSatisfiable", "Request range not satisfiable",
                           headers=[("Content-Range", f"bytes */{size}")])
        if span is None:
            start, end, status, headers = 0, size, 200, []
        else:
            start, end, status = span[0], span[1] + 1, 206
            headers = [("Content-Range", f"bytes {span[0]}-{span[1]}/{size}")]
        return Response(status, content_type=item.mime_type, headers=headers, length=end - start,
                        chunks=lambda chunk_size: source.chunks(start, end, chunk_size))

    # -- export -------------------------------------------------------------------------------------

    def export(self, req, file_id):
        """files.export: native files with an entry in the export map only; Range is ignored."""
        item = self._item(file_id, req)
        targets = item.export_targets()
        if not targets:
            raise ApiError(403, "fileNotExportable", "Export only supports Docs Editors files.",
                           "fileId")
        target = req.params.get("mimeType")
        if not target:
            raise ApiError(400, "required", "Required parameter: mimeType", "mimeType")
        if target not in targets:
            raise ApiError(400, "badRequest", "The requested conversion is not supported.", "mimeType")
        if not item.can_download:
            raise ApiError(403, "cannotExportFile", "The user does not have permission to export "
                                                    "this file.")
        if not emuauth.scope_allows_content(req.scope or ""):
            raise insufficient_scopes()
        data = emucontent.export_bytes(item.text, target)
        if len(data) > self.export_limit:
            raise ApiError(403, "exportSizeLimitExceeded", "This file is too large to be exported.")
        return Response(200, data, content_type=target)

    # -- about, changes -----------------------------------------------------------------------------

    def about(self, req):
        mask = self._mask(req, _ABOUT_SCHEMA, None, required=True)
        return self._json(req, emuquery.project(self.drive.about(), mask))

    def changes_start(self, req):
        """changes.getStartPageToken; with ``driveId`` (needs supportsAllDrives) for that drive."""
        drive_id = req.params.get("driveId")
        if drive_id:
            self._shared_drive(req, drive_id)
        with self.drive.lock:
            token = str(len(self.drive.changes) + 1)
        return self._json(req, {"kind": "drive#startPageToken", "startPageToken": token})

    def changes_list(self, req):
        """changes.list. Page tokens are positions in the change log (1 = its start); the reply has
        nextPageToken while more changes exist, else newStartPageToken."""
        mask = self._mask(req, _CHANGES_SCHEMA, _DEFAULT_CHANGES_MASK)
        page_size = self._page_size(req)
        token = req.params.get("pageToken")
        if not token:
            raise ApiError(400, "required", "Required parameter: pageToken", "pageToken")
        include_removed = req.params.get("includeRemoved", "true") != "false"
        corpus = self._corpus(req, changes=True)
        with self.drive.lock:
            log = list(self.drive.changes)
            if not token.isdigit() or not 1 <= int(token) <= len(log) + 1:
                raise invalid("pageToken")
            start = int(token) - 1
            end = min(len(log), start + page_size)
            if self.short_pages and end > start:
                end = start + self._page_rng("changes", start).randint(1, end - start)
            _, changes_mask = emuquery.selected(mask, "changes")
            _, file_mask = emuquery.selected(changes_mask, "file")
            changes = []
            for when, file_id, removed, drive_id in log[start:end]:
                if not corpus.admits(drive_id):
                    continue
                item = self.drive.items.get(file_id)
                removed = removed or item is None
                if removed and not include_removed:
                    continue
                change = {"kind": "drive#change", "changeType": "file", "time": emudrive.rfc3339(when),
                          "removed": removed, "fileId": file_id}
                if drive_id:
                    change["driveId"] = drive_id
                if not removed:
                    change["file"] = self.drive.file_resource(item, file_mask, req.base_url)
                changes.append(_project_except(change, changes_mask, "file"))
        reply = {"kind": "drive#changeList"}
        if end < len(log):
            reply["nextPageToken"] = str(end + 1)
        else:
            reply["newStartPageToken"] = str(len(log) + 1)
        reply["changes"] = changes
        return self._json(req, _project_except(reply, mask, "changes"))

    # -- shared drives ------------------------------------------------------------------------------

    @staticmethod
    def _drive_resource(root):
        return {"kind": "drive#drive", "id": root.id, "name": root.name,
                "createdTime": emudrive.rfc3339(root.created_ms), "hidden": False,
                "capabilities": {"canListChildren": True, "canDownload": True, "canEdit": True}}

    def drives_get(self, req, drive_id):
        """drives.get: 404 notFound (location driveId) for an unknown drive."""
        mask = self._mask(req, _DRIVE_SCHEMA, _DEFAULT_DRIVE_MASK)
        root = self.drive.drives.get(drive_id)
        if root is None:
            raise ApiError(404, "notFound", f"Shared drive not found: {drive_id}", "driveId")
        return self._json(req, emuquery.project(self._drive_resource(root), mask))

    def drives_list(self, req):
        """drives.list: the shared drives in creation order; pageSize 1..100 (default 10); the page
        token is the offset."""
        mask = self._mask(req, _DRIVE_LIST_SCHEMA, _DEFAULT_DRIVE_LIST_MASK)
        text = req.params.get("pageSize", "10")
        size = int(text) if text.strip().isdigit() else 0
        if not 1 <= size <= MAX_DRIVES_PAGE:
            raise invalid("pageSize", f"Invalid value '{text}'. Values must be within the range: "
                                      f"[1, {MAX_DRIVES_PAGE}]")
        token = req.params.get("pageToken") or "0"
        with self.drive.lock:
            roots = list(self.drive.drives.values())
        if not token.isdigit() or int(token) > len(roots):
            raise invalid("pageToken")
        start = int(token)
        reply = {"kind": "drive#driveList"}
        if start + size < len(roots):
            reply["nextPageToken"] = str(start + size)
        _, sub = emuquery.selected(mask, "drives")
        reply["drives"] = [emuquery.project(self._drive_resource(r), sub)
                           for r in roots[start:start + size]]
        return self._json(req, _project_except(reply, mask, "drives"))

    # -- token endpoint -----------------------------------------------------------------------------

    def metadata_token(self, req):
        """The GCE/Colab metadata server's token endpoint: needs ``Metadata-Flavor: Google``
        (else 403, as on GCE); answers with that header echoed and a fresh token."""
        if req.headers.get("Metadata-Flavor") != "Google":
            return Response(403, b"Missing Metadata-Flavor:Google header.\n", "text/html")
        scopes = req.params.get("scopes")
        reply = self.auth.issue(scopes.replace(",", " ") if scopes else emuauth.DEFAULT_SCOPE)
        return Response(200, (json.dumps(reply) + "\n").encode(), "application/json",
                        headers=[("Metadata-Flavor", "Google")])

    def token_info(self, req):
        """Google's tokeninfo (``?access_token=T``, or form field): the token's scope and lifetime
        left; 400 ``invalid_token`` for an unknown or expired one."""
        form = {k: v[0] for k, v in parse_qs(req.body.decode("utf-8", "replace")).items()}
        info = self.auth.token_info(req.params.get("access_token") or form.get("access_token"))
        if info is None:
            info = {"error": "invalid_token", "error_description": "Invalid Value"}
        return Response(200 if "scope" in info else 400, (json.dumps(info) + "\n").encode(),
                        "application/json; charset=UTF-8")

    def token(self, req):
        form = {k: v[0] for k, v in parse_qs(req.body.decode("utf-8", "replace")).items()}
        basic = None
        header = req.headers.get("Authorization") or ""
        if header.startswith("Basic "):
            try:
                user, _, secret = base64.b64decode(header[6:].strip()).decode().partition(":")
                basic = (user, secret)
            except (binascii.Error, UnicodeDecodeError):
                basic = ("", "")
        try:
            reply, status = self.auth.grant(form, basic), 200
        except emuauth.GrantError as exc:
            reply, status = exc.body(), exc.status
        return Response(status, (json.dumps(reply) + "\n").encode(), "application/json; charset=utf-8",
                        headers=[("Cache-Control", "no-cache, no-store, max-age=0, must-revalidate")])


def _revision_resource(item, revision_id, source, modified_ms, mask):
    value = {"kind": "drive#revision", "id": revision_id, "mimeType": item.mime_type,
             "modifiedTime": emudrive.rfc3339(modified_ms), "keepForever": False,
             "published": False, "size": str(source.size), "originalFilename": item.name}
    if emuquery.selected(mask, "md5Checksum")[0]:
        value["md5Checksum"] = source.digest("md5")
    return emuquery.project(value, mask)


def _flag(req, name):
    """Whether boolean query parameter ``name`` is true (Drive accepts true/false, any case)."""
    return req is not None and req.params.get(name, "").lower() == "true"


flag = _flag


def _project_except(reply, mask, key):
    """Project ``reply`` with ``mask``, except ``reply[key]``, which was built with its sub-mask."""
    out = emuquery.project({k: v for k, v in reply.items() if k != key}, mask)
    if key in reply and emuquery.selected(mask, key)[0]:
        out[key] = reply[key]
    return out


UNSATISFIABLE = "unsatisfiable"
_RANGE = re.compile(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*")


def parse_range(header, size):
    """None (serve all), (first, last) inclusive, or UNSATISFIABLE for a Range header value."""
    if not header:
        return None
    m = _RANGE.fullmatch(header)
    if not m or (not m.group(1) and not m.group(2)):
        return None                                     # malformed or multi-range: ignored
    if not m.group(1):                                  # suffix: the last n bytes
        n = int(m.group(2))
        return UNSATISFIABLE if n == 0 or size == 0 else (max(0, size - n), size - 1)
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) else None
    if last is not None and last < first:
        return None
    if first >= size:
        return UNSATISFIABLE
    return first, size - 1 if last is None else min(last, size - 1)
