"""Writes of the Drive emulator (drive-api-v3.md §6): files.generateIds, files.create, files.update,
files.delete, and the checks every write passes. Uploads (``/upload/drive/v3/files``, resumable
sessions) are in emuupload.py and end in ``WriteApi.create_file`` / ``WriteApi.update_file``.

Endpoints (kinds for stats, logs and fault rules in parentheses)::

    GET    /drive/v3/files/generateIds?count=N&space=drive&type=files   (files.generateIds)
    POST   /drive/v3/files                       JSON metadata          (files.create)
    PATCH  /drive/v3/files/ID?addParents=&removeParents=  JSON metadata (files.update)
    DELETE /drive/v3/files/ID                    204, the subtree too   (files.delete)
    POST   /upload/drive/v3/files?uploadType=media|multipart|resumable  (upload)
    PATCH  /upload/drive/v3/files/ID?uploadType=...                     (upload)
    PUT    session URI (…?upload_id=U)                                  (upload.chunk)

What every write passes, in this order (the first failure answers):

1. a token with a write scope (emuauth.scope_allows_write; metadata-only calls also accept
   drive.metadata): else 403 insufficientPermissions "Request had insufficient authentication scopes.";
2. creations and content uploads only (files.create, media and multipart uploads, the start of a
   resumable session; not chunks, metadata updates or deletes): the write-rate bucket, one token per
   user per call (emuquota.UserQuota; ``--write-rate R --write-burst B``, off by default): else 403
   userRateLimitExceeded "User Rate Limit Exceeded" (or 429 rateLimitExceeded), Drive's body;
3. the metadata: unknown field names 400 invalid [?]; known fields that cannot be written 403
   fieldNotWritable; bad values 400 invalid; a body that is not a JSON object 400 parseError (so is
   one with bytes that are not UTF-8, a name among them: JSON text is UTF-8); a name that is not
   Unicode text (a lone UTF-16 surrogate, sent escaped as ``\\ud800``) 400 invalid "Invalid value
   for: name" [?];
4. the items: an unknown file or parent 404 notFound; a parent that is not a folder 400 [?]; an item
   (or the parent written into) that is read-only for the user (``readOnly`` in the spec, a
   ``--read-only ID`` flag, ``POST /_emu/items/ID {"readOnly": true}``; inherited by the subtree)
   403 insufficientFilePermissions "The user does not have sufficient permissions for file ID.";
5. ids: a create's ``id`` must have come from generateIds and not be in use: in use 409 duplicate
   "A file already exists with the provided ID."; never handed out 409 too (``unreserved_id_status``,
   ``--unreserved-id-status 400`` for 400 invalid "The provided file ID is not usable.", which is
   what real Drive is believed to answer [?]);
6. storage: a blob's bytes (its new size minus the old on a content update) must fit under the
   storage limit (``--storage-limit``; usage = the head revisions of the user's blobs, trash
   included): else 403 storageQuotaExceeded "The user's Drive storage quota has been exceeded."
   (domain usageLimits).

Semantics: a create never fails on a duplicate name; a metadata-only create of a blob type makes an
empty file (size 0, the md5 of no bytes); the default name is "Untitled", the default parent the root,
the default mimeType application/octet-stream (or the media's type). Every write bumps ``version`` and
appends to the change log (changes.list); a content update makes a new ``headRevisionId`` (the old
revision stays readable through revisions.get). ``modifiedTime`` is the value the client sent, else
now for creates, renames, mimeType and content changes; trashing, moves and property changes keep it
[?]. Moves: ``addParents``/``removeParents`` must leave exactly one parent (else 403 cannotAddParent
"Increasing the number of parents is not allowed."); a folder cannot go below itself (403
cannotMoveItemIntoItself [?]); the folder moved into must be writable. ``parents`` in an update body
is 403 fieldNotWritable. Deleting a folder deletes its subtree (a removed change for each item).
"""

import collections
import json
import random
import threading
from urllib.parse import unquote

import emuapi
import emuauth
import emucontent
import emudrive
import emuquery
import emuquota
import emuupload

WRITE_KINDS = ("files.create", "files.update", "files.delete", "files.generateIds", "upload", "upload.chunk")
MAX_GENERATED_IDS = 1000
_ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
COUNTERS = ("creates", "updates", "deletes", "generated_ids", "conflicts", "storage_refused",
            "rate_refused", "permission_refused", "scope_refused") + emuupload.COUNTERS

_COMMON_FIELDS = {"name", "mimeType", "modifiedTime", "appProperties", "properties", "description",
                  "starred", "originalFilename", "kind", "viewedByMeTime", "writersCanShare",
                  "copyRequiresWriterPermission", "folderColorRgb", "contentHints"}
CREATE_FIELDS = _COMMON_FIELDS | {"id", "parents", "createdTime"}
UPDATE_FIELDS = _COMMON_FIELDS | {"trashed"}
_PARENTS_NOT_WRITABLE = ("The parents field is not directly writable in update requests. Use the "
                         "addParents and removeParents parameters instead.")


def permission_denied(file_id):
    return emuapi.ApiError(403, "insufficientFilePermissions",
                           f"The user does not have sufficient permissions for file {file_id}.")


def storage_full():
    return emuapi.ApiError(403, "storageQuotaExceeded", "The user's Drive storage quota has been exceeded.",
                           domain="usageLimits")


def parse_metadata(body):
    """The JSON metadata object of a request body (empty = {}); 400 parseError otherwise."""
    if not body or not body.strip():
        return {}
    try:
        # strict UTF-8 (json.loads of bytes would let encoded surrogates, and UTF-16, through)
        value = json.loads(body.decode("utf-8") if isinstance(body, bytes) else body)
    except (ValueError, UnicodeDecodeError):
        value = None
    if not isinstance(value, dict):
        raise emuapi.ApiError(400, "parseError", "Parse Error")
    return value


def _is_unicode(text):
    """False for a str holding a lone surrogate (json.loads lets "\\ud800" through)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_metadata(meta, writable):
    """Check the field names and value types of a metadata object (see the module doc)."""
    for key, value in meta.items():
        if key not in emudrive.FILE_SCHEMA:
            raise emuapi.ApiError(400, "invalid", f"Invalid field: {key}", key, "other")
        if key not in writable:
            message = _PARENTS_NOT_WRITABLE if key == "parents" else \
                "The resource body includes fields which are not directly writable."
            raise emuapi.ApiError(403, "fieldNotWritable", message, key, "other")
        if key in ("name", "mimeType", "description", "id") and not isinstance(value, str):
            raise emuapi.ApiError(400, "invalid", f"Invalid value for: {key}", key, "other")
        if key == "name" and not _is_unicode(value):
            raise emuapi.ApiError(400, "invalid", f"Invalid value for: {key}", key, "other")
        if key in ("appProperties", "properties") and not (
                isinstance(value, dict) and all(isinstance(v, (str, type(None))) for v in value.values())):
            raise emuapi.ApiError(400, "invalid", f"Invalid value for: {key}", key, "other")
        if key == "parents" and not (isinstance(value, list) and all(isinstance(p, str) for p in value)):
            raise emuapi.ApiError(400, "invalid", "Invalid value for: parents", key, "other")
        if key == "trashed" and not isinstance(value, bool):
            raise emuapi.ApiError(400, "invalid", "Invalid value for: trashed", key, "other")


def _time_field(meta, key):
    if key not in meta:
        return None
    try:
        return emuquery.parse_time_ms(meta[key])
    except (emuquery.QueryError, TypeError, AttributeError):
        raise emuapi.ApiError(400, "invalid", f"Invalid value for: {key}", key, "other") from None


def _merge_properties(target, update):
    for key, value in update.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value


class WriteApi:
    """The write endpoints and their checks. Options: ``write_quota`` (an emuquota.UserQuota for
    creations and uploads; default off), ``unreserved_id_status`` (409 or 400), ``seed`` (generated
    ids and upload ids), and the upload options of emuupload.Uploads (``upload_options``)."""

    def __init__(self, drive, write_quota=None, unreserved_id_status=409, seed=0, upload_options=None):
        self.drive = drive
        self.write_quota = write_quota or emuquota.UserQuota()
        if unreserved_id_status not in (400, 409):
            raise ValueError("unreserved_id_status must be 400 or 409")
        self.unreserved_id_status = unreserved_id_status
        self.reserved = set()                     # ids handed out by generateIds and not used yet
        self._rng = random.Random(f"ids:{seed}")
        self._lock = threading.Lock()
        self.counters = collections.Counter({k: 0 for k in COUNTERS})
        self.uploads = emuupload.Uploads(self, seed=seed, **(upload_options or {}))

    parse_metadata = staticmethod(parse_metadata)

    def count(self, name, n=1):
        with self._lock:
            self.counters[name] += n

    def snapshot(self):
        with self._lock:
            return dict(self.counters)

    def reset_counters(self):
        with self._lock:
            self.counters = collections.Counter({k: 0 for k in COUNTERS})

    # -- routing ------------------------------------------------------------------------------------

    def route(self, req):
        """The Route of a write request (see the module doc), or None for any other request."""
        path, method = req.path, req.method
        if path.startswith("/upload/drive/v3/files"):
            rest = path[len("/upload/drive/v3/files"):]
            if rest not in ("",) and not (rest.startswith("/") and "/" not in rest[1:] and rest[1:]):
                return None
            req.file_id = unquote(rest[1:]) if rest else None
            if "upload_id" in req.params:
                return emuapi.Route("upload.chunk", self.uploads.chunk, req.params["upload_id"])
            if (method, bool(rest)) in (("POST", False), ("PATCH", True)):
                return emuapi.Route("upload", self.uploads.start, req.file_id)
            return None
        if path == "/drive/v3/files/generateIds" and method == "GET":
            return emuapi.Route("files.generateIds", self.generate_ids)
        if path == "/drive/v3/files" and method == "POST":
            return emuapi.Route("files.create", self.files_create)
        rest = path[len("/drive/v3/files/"):] if path.startswith("/drive/v3/files/") else ""
        if rest and "/" not in rest and method in ("PATCH", "DELETE"):
            req.file_id = unquote(rest)
            if method == "PATCH":
                return emuapi.Route("files.update", self.files_update, req.file_id)
            return emuapi.Route("files.delete", self.files_delete, req.file_id)
        return None

    # -- checks -------------------------------------------------------------------------------------

    def require_scope(self, req, content=True):
        if not emuauth.scope_allows_write(req.scope or "", content):
            self.count("scope_refused")
            raise emuapi.insufficient_scopes()

    def take_write_token(self, req):
        if not self.write_quota.take(req.user):
            self.count("rate_refused")
            raise emuapi.fault_error(self.write_quota.status)

    def writable(self, item):
        if item.read_only:
            self.count("permission_refused")
            raise permission_denied(item.id)
        return item

    def item(self, req, file_id):
        """The item for ``file_id`` (``root`` allowed), 404 as files.get would answer."""
        item = self.drive.get(file_id)
        if item is None or (item.drive_id is not None and not emuapi.flag(req, "supportsAllDrives")):
            raise emuapi.not_found(file_id)
        return item

    def folder(self, req, file_id):
        parent = self.item(req, file_id)
        if not parent.is_folder:
            raise emuapi.ApiError(400, "invalid", f"The parent {file_id} is not a folder.", "parents",
                                  "other")
        return self.writable(parent)

    def check_storage(self, more_bytes):
        limit = self.drive.storage_limit
        if limit is not None and more_bytes > 0 and self.drive.usage()[0] + more_bytes > limit:
            self.count("storage_refused")
            raise storage_full()

    def check_new_id(self, file_id):
        if file_id in self.drive.items:
            self.count("conflicts")
            raise emuapi.ApiError(409, "duplicate", "A file already exists with the provided ID.", "file.id",
                                  "other")
        if file_id not in self.reserved:
            self.count("conflicts")
            raise emuapi.ApiError(self.unreserved_id_status, "invalid", "The provided file ID is not usable.",
                                  "file.id", "other")

    def reply(self, req, item, status=200):
        mask = emuapi.DriveApi.file_mask(req)
        value = self.drive.file_resource(item, mask, req.base_url)
        resp = emuapi.Response.json(value, status, pretty=req.params.get("prettyPrint", "true") != "false")
        return resp

    # -- endpoints ----------------------------------------------------------------------------------

    def generate_ids(self, req):
        self.require_scope(req, content=False)
        text = req.params.get("count", "10")
        count = int(text) if text.strip().isdigit() else 0
        if not 1 <= count <= MAX_GENERATED_IDS:
            raise emuapi.invalid("count", f"Invalid value '{text}'. Values must be within the range: "
                                          f"[1, {MAX_GENERATED_IDS}]")
        space = req.params.get("space", "drive")
        if space not in ("drive", "appDataFolder"):
            raise emuapi.invalid("space")
        if req.params.get("type", "files") not in ("files", "shortcuts"):
            raise emuapi.invalid("type")
        with self._lock:
            ids = ["1" + "".join(self._rng.choice(_ID_CHARS) for _ in range(32)) for _ in range(count)]
            self.reserved.update(ids)
            self.counters["generated_ids"] += count
        return emuapi.Response.json({"kind": "drive#generatedIds", "space": space, "ids": ids})

    def files_create(self, req):
        """files.create without content: a folder, a native file or an empty blob."""
        self.require_scope(req, content=False)
        meta = parse_metadata(req.body)
        self.take_write_token(req)
        emuapi.DriveApi.file_mask(req)
        return self.reply(req, self.create_file(req, meta))

    def files_update(self, req, file_id):
        self.require_scope(req, content=False)
        meta = parse_metadata(req.body)
        emuapi.DriveApi.file_mask(req)
        return self.reply(req, self.update_file(req, self.item(req, file_id), meta))

    def files_delete(self, req, file_id):
        self.require_scope(req, content=False)
        item = self.item(req, file_id)
        with self.drive.lock:
            if self.drive.is_top(item):
                raise permission_denied(file_id)
            self.writable(item)
            self.drive.remove_item(item.id)
        self.count("deletes")
        return emuapi.Response(204, b"")

    # -- the writes themselves (shared with emuupload) ----------------------------------------------

    def create_file(self, req, meta, source=None, media_mime=None, dry_run=False):
        """Create an item from ``meta`` (checked here) with the content ``source`` (a
        emucontent.ContentSource, None = none); returns it. ``dry_run``: only check."""
        check_metadata(meta, CREATE_FIELDS)
        created = _time_field(meta, "createdTime")
        modified = _time_field(meta, "modifiedTime")
        with self.drive.lock:
            parents = meta.get("parents") or ["root"]
            if len(parents) > 1:
                raise emuapi.ApiError(403, "cannotAddParent", "Increasing the number of parents is not "
                                                              "allowed.", "parents", "other")
            parent = self.folder(req, parents[0])
            file_id = meta.get("id")
            if file_id is not None:
                self.check_new_id(file_id)
            mime = meta.get("mimeType") or media_mime or emudrive.DEFAULT_MIME
            if source is not None and mime.startswith(emudrive.NATIVE_PREFIX):
                raise emuapi.ApiError(400, "badRequest", f"Content cannot be uploaded to a {mime} item "
                                                         "(the emulator does not convert).")
            if not mime.startswith(emudrive.NATIVE_PREFIX):
                source = source or emucontent.BytesSource(b"")
                self.check_storage(source.size)
            if dry_run:
                return None
            now = emudrive.now_ms()
            file_id = file_id or emudrive.stable_id("created", self.drive.next_index(), now)
            item = emudrive.Item(file_id, meta.get("name", "Untitled"), mime, parent.id,
                                 self.drive.next_index(), created or now, modified or now)
            item.drive_id = parent.drive_id
            item.source = source
            item.new_revision()
            item.app_properties = {k: v for k, v in meta.get("appProperties", {}).items() if v is not None}
            item.properties = {k: v for k, v in meta.get("properties", {}).items() if v is not None}
            item.description = meta.get("description")
            self.drive.commit_new(item)
            self.reserved.discard(file_id)
        self.count("creates")
        return item

    def update_file(self, req, item, meta, source=None, media_mime=None, dry_run=False):
        """Change ``item``'s metadata (``meta``, checked here; moves from the request's addParents
        and removeParents) and, with ``source``, its content (a new revision). Returns the item."""
        check_metadata(meta, UPDATE_FIELDS)
        modified = _time_field(meta, "modifiedTime")
        with self.drive.lock:
            if self.drive.is_top(item) and (meta or source is not None or self._moves(req)):
                raise permission_denied(item.id)
            self.writable(item)
            new_parent = self._new_parent(req, item)
            if source is not None:
                if not item.is_blob or item.is_folder:
                    raise emuapi.ApiError(400, "badRequest", "Only files with binary content can be "
                                                             "updated with media.")
                self.check_storage(source.size - (item.source.size if item.source else 0))
            if dry_run:
                return None
            touched = source is not None or "name" in meta or "mimeType" in meta
            now = emudrive.now_ms()
            if new_parent is not None:
                self.drive.move(item, new_parent.id)
            item.name = meta.get("name", item.name)
            item.mime_type = meta.get("mimeType", item.mime_type)
            item.description = meta.get("description", item.description)
            if "trashed" in meta:
                item.explicitly_trashed = meta["trashed"]
            _merge_properties(item.app_properties, meta.get("appProperties", {}))
            _merge_properties(item.properties, meta.get("properties", {}))
            if source is not None:
                item.replace_content(source, now, self.drive.old_revisions)
            if modified is not None or touched:
                item.modified_ms = modified if modified is not None else now
            self.drive.commit_change(item)
        self.count("updates")
        return item

    @staticmethod
    def _moves(req):
        split = (lambda key: [p for p in req.params.get(key, "").split(",") if p])
        return split("addParents"), split("removeParents")

    def _new_parent(self, req, item):
        """The folder ``item`` moves to (checked), or None when the request does not move it."""
        adds, removes = self._moves(req)
        if not adds and not removes:
            return None
        current = {item.parent} if item.parent else set()
        root = self.drive.root.id
        result = (current - {root if r == "root" else r for r in removes}) | \
            {root if a == "root" else a for a in adds}
        if len(result) > 1:
            raise emuapi.ApiError(403, "cannotAddParent", "Increasing the number of parents is not "
                                                          "allowed.", "addParents")
        if not result:
            raise emuapi.ApiError(403, "cannotRemoveParent", "A file must keep one parent folder [?].",
                                  "removeParents")
        (parent_id,) = result
        if parent_id == item.parent:
            return None
        parent = self.folder(req, parent_id)
        ancestor = parent
        while ancestor is not None:
            if ancestor.id == item.id:
                raise emuapi.ApiError(403, "cannotMoveItemIntoItself", "A folder cannot be moved into "
                                                                      "itself or its subfolders.")
            ancestor = self.drive.items.get(ancestor.parent) if ancestor.parent else None
        return parent
