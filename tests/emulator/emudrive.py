"""The emulated drive: items, their File resources, listing, and the change log.

A ``Drive`` holds a root folder and items (folders, blobs, native Google files, shortcuts). It is built
from a JSON spec (``Drive.from_spec``) or from a real directory (``Drive.from_tree``); see the spec format in
drive_emulator.py. Items keep their creation order, which is the default listing order.

Ids: the root defaults to ``DEFAULT_ROOT_ID``; other items default to ``stable_id(parent, name, index)``
(spec) or ``stable_id("tree", relative path)`` (directory tree): "1" followed by 32 characters of the
URL-safe base64 of a SHA-256, 33 characters from [A-Za-z0-9_-], stable across runs.

Changes to the item table and listings hold ``Drive.lock``; ``generation`` increases on every change so
that cached listings are dropped. ``add_item``, ``update_item`` and ``remove_item`` (reached through the
/_emu/items control endpoints) append to the change log that changes.list serves.

Shared drives (drive-api-v3.md §1.9): each is a folder without a parent whose id is the drive id ("0A...");
every item below one carries ``drive_id`` (``driveId`` in its File resource, and no ``owners``). Which
requests may see them is decided by the API layer (emuapi.py) through ``Corpus``.

"Shared with me": items flagged ``shared_with_me``. Their parent may be a folder the user cannot see (an id
that is not in the drive, or none): such an item is a top of its own, and its ``parents`` are left out.
"""

import base64
import collections
import datetime
import hashlib
import mimetypes
import os
import re
import threading
import time
from urllib.parse import quote

import emucontent
import emuquery

FOLDER = "application/vnd.google-apps.folder"
SHORTCUT = "application/vnd.google-apps.shortcut"
NATIVE_PREFIX = "application/vnd.google-apps."
DEFAULT_MIME = "application/octet-stream"
DEFAULT_ROOT_ID = "0AEmuRootFolder0000000000000000"
ROOT_NAME = "My Drive"
BASE_TIME_MS = 1704067200000          # 2024-01-01T00:00:00.000Z: default createdTime of the first item

USER = {
    "kind": "drive#user",
    "displayName": "Emulated User",
    "emailAddress": "emulated.user@example.com",
    "permissionId": "01234567890123456789",
    "photoLink": "https://lh3.googleusercontent.com/a/emulated",
    "me": True,
}
QUOTA_LIMIT = 15 * 1024 ** 3
MAX_OLD_REVISIONS = 200


class SpecError(ValueError):
    pass


def stable_id(*parts):
    """A Drive-like id (33 chars of [A-Za-z0-9_-]) derived from ``parts``."""
    digest = hashlib.sha256("\0".join(str(p) for p in parts).encode("utf-8")).digest()
    return "1" + base64.urlsafe_b64encode(digest).decode("ascii")[:32]


def now_ms():
    return int(time.time() * 1000)


def rfc3339(ms):
    """Milliseconds since the epoch -> ``2024-05-01T12:34:56.789Z``."""
    seconds, millis = divmod(int(ms), 1000)
    stamp = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S") + f".{millis:03d}Z"


def _expand_repeat(raw, parent, index):
    """A spec item with ``"repeat": N`` stands for N blobs (see drive_emulator.py): item i is named
    ``raw["name"].format(i=i)`` and holds ``emucontent.numbered_bytes(seed, i)``; ids are
    ``stable_id(parent, name_i, index)``. Returns [(id, parent, raw), ...]; raises SpecError."""
    n, seed = raw["repeat"], raw.get("seed", 0)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise SpecError(f"item {raw['name']!r}: repeat must be a non-negative integer")
    bad = {"id", "path", "content", "size", "mimeType", "shortcutDetails"} & set(raw)
    if bad:
        raise SpecError(f"item {raw['name']!r}: repeat does not take {sorted(bad)}")
    try:
        emucontent.check_seed(seed)
        names = [raw["name"].format(i=i) for i in range(n)]
    except (ValueError, KeyError, IndexError) as exc:
        raise SpecError(f"item {raw['name']!r}: {exc}") from exc
    if len(set(names)) != n:
        raise SpecError(f"item {raw['name']!r}: the repeated names are not distinct (use {{i}})")
    rest = {k: v for k, v in raw.items() if k not in ("repeat", "seed", "name")}
    out = []
    for i, name in enumerate(names):
        item = dict(rest, name=name, content=emucontent.numbered_bytes(seed, i).decode("ascii"))
        out.append((stable_id(parent, name, index), parent, item))
    return out


def _natural_key(name):
    return [(0, int(part), part) if part.isdigit() else (1, 0, part.casefold())
            for part in re.split(r"(\d+)", name) if part]


class Item:
    """One Drive item. ``trashed`` is the effective flag (own or an ancestor's), kept by the Drive."""

    def __init__(self, item_id, name, mime_type, parent, index, created_ms, modified_ms):
        self.id = item_id
        self.name = name
        self.mime_type = mime_type
        self.parent = parent                 # parent id, None for the root
        self.index = index                   # creation order
        self.created_ms = created_ms
        self.modified_ms = modified_ms
        self.explicitly_trashed = False
        self.trashed = False
        self.source = None                   # ContentSource for blobs
        self.text = ""                       # document text for native files
        self.shortcut_target = None
        self.shortcut_target_mime = None
        self.version = 1
        self.head_revision = None
        self.can_download = True
        self.drive_id = None                 # the shared drive this item is in, or None (My Drive)
        self.shared_with_me = False
        self.hidden_parent = False           # parent not visible to the user (shared with me)
        self.explicitly_read_only = False    # the user is only a reader of this item (and below)
        self.read_only = False               # effective: own flag or an ancestor's, kept by the Drive
        self.app_properties = {}
        self.properties = {}
        self.description = None
        self.old_revisions = []              # earlier content: [(revision id, source, modified ms)]

    @property
    def parents(self):
        return [self.parent] if self.parent and not self.hidden_parent else []

    @property
    def is_folder(self):
        return self.mime_type == FOLDER

    @property
    def is_native(self):
        return self.mime_type.startswith(NATIVE_PREFIX)

    @property
    def is_blob(self):
        return not self.is_native

    def export_targets(self):
        return emucontent.EXPORT_FORMATS.get(self.mime_type, [])

    def new_revision(self):
        """Give a blob a revision id that depends on its id and content identity."""
        if self.is_blob:
            self.head_revision = "0B" + stable_id("rev", self.id, self.source.describe(), self.version)[1:31]

    def replace_content(self, source, modified_ms, keep=MAX_OLD_REVISIONS):
        """New content for a blob: the old revision is kept (revisions.get still serves it, as Drive
        keeps old blob revisions; at most ``keep`` of them, 0 = none) and a new head revision id is
        made."""
        if self.source is not None and self.head_revision is not None and keep > 0:
            self.old_revisions.append((self.head_revision, self.source, self.modified_ms))
            del self.old_revisions[:-keep]
        self.source = source
        self.modified_ms = modified_ms
        self.new_revision()

    def revision(self, revision_id):
        """(source, modified ms) of revision ``revision_id`` (the head or a kept one), or None."""
        if self.head_revision is not None and revision_id == self.head_revision:
            return self.source, self.modified_ms
        for rev, source, modified_ms in self.old_revisions:
            if rev == revision_id:
                return source, modified_ms
        return None

    def revisions(self):
        """[(revision id, source, modified ms)], oldest first, the head last."""
        head = [(self.head_revision, self.source, self.modified_ms)] if self.head_revision else []
        return self.old_revisions + head


# ---------------------------------------------------------------------------------------------------
# File resource schema (names accepted by ``fields``) and the fields the emulator fills in.

_SHORTCUT_SCHEMA = {"targetId": None, "targetMimeType": None, "targetResourceKey": None}
FILE_SCHEMA = {name: None for name in (
    "kind id name mimeType description starred trashed explicitlyTrashed parents properties "
    "appProperties spaces version webContentLink webViewLink iconLink hasThumbnail thumbnailLink "
    "thumbnailVersion viewedByMe viewedByMeTime createdTime modifiedTime modifiedByMeTime modifiedByMe "
    "sharedWithMeTime shared ownedByMe viewersCanCopyContent copyRequiresWriterPermission "
    "writersCanShare hasAugmentedPermissions folderColorRgb originalFilename fullFileExtension "
    "fileExtension md5Checksum sha1Checksum sha256Checksum size quotaBytesUsed headRevisionId "
    "isAppAuthorized driveId teamDriveId resourceKey trashedTime permissionIds "
    "inheritedPermissionsDisabled").split()}
FILE_SCHEMA.update({name: emuquery.ANY for name in (
    "exportLinks capabilities owners permissions lastModifyingUser sharingUser trashingUser "
    "contentHints imageMediaMetadata videoMediaMetadata contentRestrictions linkShareMetadata "
    "labelInfo downloadRestrictions").split()})
FILE_SCHEMA["shortcutDetails"] = _SHORTCUT_SCHEMA

DEFAULT_FILE_MASK = {"kind": None, "id": None, "name": None, "mimeType": None}
SHARER = {"kind": "drive#user", "displayName": "Sharing User", "emailAddress": "sharer@example.com",
          "permissionId": "98765432109876543210", "me": False}


class Corpus:
    """Which items a files.list or changes.list request may see: ``drive_id`` = one shared drive only
    (corpora=drive); else My Drive and shared-with-me items, plus shared-drive items when
    ``all_drives`` (supportsAllDrives=true and includeItemsFromAllDrives=true)."""

    def __init__(self, drive_id=None, all_drives=False):
        self.drive_id, self.all_drives = drive_id, all_drives

    def key(self):
        return (self.drive_id, self.all_drives)

    def admits(self, drive_id):
        if self.drive_id is not None:
            return drive_id == self.drive_id
        return drive_id is None or self.all_drives


MY_DRIVE = Corpus()


class Drive:
    def __init__(self, root_id=DEFAULT_ROOT_ID, root_name=ROOT_NAME):
        self.lock = threading.RLock()
        self.generation = 0
        self.root = Item(root_id, root_name, FOLDER, None, 0, BASE_TIME_MS, BASE_TIME_MS)
        self.items = {root_id: self.root}
        self.children = collections.defaultdict(list)     # parent id -> child ids in creation order
        self.changes = []                                 # (time ms, file id, removed, drive id)
        self.drives = {}                                  # shared drive id -> its root Item
        self.storage_limit = QUOTA_LIMIT                  # bytes; None = unlimited
        self.old_revisions = MAX_OLD_REVISIONS            # replaced revisions kept per blob
        self._next_index = 1
        self._listing_cache = collections.OrderedDict()

    # -- building -----------------------------------------------------------------------------------

    @classmethod
    def from_spec(cls, spec, base_dir="."):
        """Build a drive from a parsed spec (see drive_emulator.py); raises SpecError."""
        if not isinstance(spec, dict):
            raise SpecError("the spec must be a JSON object")
        root = spec.get("root") or {}
        drive = cls(root.get("id", DEFAULT_ROOT_ID), root.get("name", ROOT_NAME))
        drives = spec.get("drives", [])
        if not isinstance(drives, list):
            raise SpecError("'drives' must be a list")
        for index, raw in enumerate(drives):
            if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
                raise SpecError(f"drive {index}: needs an object with a string 'name'")
            drive_id = raw.get("id") or "0A" + stable_id("drive", raw["name"], index)[1:20]
            if not drive_id.startswith("0A") or drive_id in drive.items:
                raise SpecError(f"drive {raw['name']!r}: bad or duplicate id {drive_id!r} "
                                "(shared drive ids start with 0A)")
            drive.add_shared_drive(drive_id, raw["name"], drive._time(raw, "createdTime", BASE_TIME_MS))
        raws = spec.get("items", [])
        if not isinstance(raws, list):
            raise SpecError("'items' must be a list")
        parsed = []
        for index, raw in enumerate(raws):
            if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
                raise SpecError(f"item {index}: needs an object with a string 'name'")
            parent = raw.get("parent", None if raw.get("sharedWithMe") else "root")
            parent = drive.root.id if parent == "root" else parent
            if "repeat" in raw:
                parsed += _expand_repeat(raw, parent, index)
                continue
            parsed.append((raw.get("id") or stable_id(parent, raw["name"], index), parent, raw))
        known = {item_id for item_id, _, _ in parsed} | set(drive.items)
        for item_id, parent, raw in parsed:
            hidden = parent not in known
            if hidden and not raw.get("sharedWithMe"):
                raise SpecError(f"item {raw['name']!r}: unknown parent {parent!r}")
            item = drive._item_from_spec(item_id, parent, raw, base_dir)
            item.hidden_parent = hidden
            drive._insert(item)
        reachable, stack = set(), drive._tops()
        while stack:
            reachable.add(stack[-1])
            stack.extend(drive.children.get(stack.pop(), ()))
        if len(reachable) != len(drive.items):
            raise SpecError("the parent links of some items form a cycle")
        drive._finish_items()
        return drive

    def _item_from_spec(self, item_id, parent, raw, base_dir):
        if item_id in self.items:
            raise SpecError(f"duplicate id {item_id!r}")
        name = raw["name"]
        mime = raw.get("mimeType", DEFAULT_MIME)
        created = self._time(raw, "createdTime", BASE_TIME_MS + self._next_index * 1000)
        modified = self._time(raw, "modifiedTime", created)
        item = Item(item_id, name, mime, parent, self._next_index, created, modified)
        item.explicitly_trashed = bool(raw.get("trashed", False))
        item.version = int(raw.get("version", 1))
        item.can_download = bool(raw.get("capabilities", {}).get("canDownload", True))
        item.shared_with_me = bool(raw.get("sharedWithMe", False))
        item.explicitly_read_only = bool(raw.get("readOnly", False))
        item.app_properties = dict(raw.get("appProperties") or {})
        item.properties = dict(raw.get("properties") or {})
        item.description = raw.get("description")
        sources = [key for key in ("path", "content", "size") if key in raw]
        if mime == SHORTCUT:
            details = raw.get("shortcutDetails") or {}
            if not details.get("targetId"):
                raise SpecError(f"shortcut {name!r} needs shortcutDetails.targetId")
            item.shortcut_target = details["targetId"]
            item.shortcut_target_mime = details.get("targetMimeType")
        elif item.is_native:
            if sources not in ([], ["content"]):
                raise SpecError(f"native item {name!r} takes only 'content'")
            item.text = raw.get("content", "")
        else:
            if len(sources) > 1:
                raise SpecError(f"item {name!r}: give only one of path, content, size+seed")
            try:
                if "path" in raw:
                    item.source = emucontent.PathSource(os.path.join(base_dir, raw["path"]))
                elif "size" in raw:
                    item.source = emucontent.GeneratedSource(raw["size"], raw.get("seed", 0))
                else:
                    item.source = emucontent.BytesSource(raw.get("content", "").encode("utf-8"))
            except (OSError, ValueError) as exc:
                raise SpecError(f"item {name!r}: {exc}") from exc
            item.new_revision()
            if raw.get("headRevisionId"):
                item.head_revision = raw["headRevisionId"]
        return item

    @staticmethod
    def _time(raw, key, default):
        if key not in raw:
            return default
        try:
            return emuquery.parse_time_ms(raw[key])
        except emuquery.QueryError as exc:
            raise SpecError(f"item {raw['name']!r}: bad {key} {raw[key]!r}") from exc

    @classmethod
    def from_tree(cls, top):
        """Serve the directory ``top``: folders and regular files, ids from their relative paths."""
        drive = cls()
        top = os.path.abspath(top)
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, top)
            parent = drive.root.id if rel_dir == "." else stable_id("tree", rel_dir)
            for name in sorted(dirnames + filenames):
                path = os.path.join(dirpath, name)
                rel = os.path.normpath(os.path.join(rel_dir, name))
                try:
                    st = os.stat(path)
                except OSError:
                    continue                              # dangling link
                ms = st.st_mtime_ns // 1_000_000
                is_dir = name in dirnames
                if not is_dir and not os.path.isfile(path):
                    continue
                mime = FOLDER if is_dir else (mimetypes.guess_type(name)[0] or DEFAULT_MIME)
                item = Item(stable_id("tree", rel), name, mime, parent, drive._next_index, ms, ms)
                if not is_dir:
                    item.source = emucontent.PathSource(path)
                    item.new_revision()
                drive._insert(item)
        drive._finish_items()
        return drive

    def add_shared_drive(self, drive_id, name, created_ms=BASE_TIME_MS):
        """A shared drive: a parentless folder whose id is the drive id."""
        with self.lock:
            item = Item(drive_id, name, FOLDER, None, self._next_index, created_ms, created_ms)
            item.drive_id = drive_id
            self.drives[drive_id] = item
            self._insert(item)
            self._finish_items()
            return item

    def _tops(self):
        """Ids of the items without a visible parent: the root, the shared drives, and shared-with-me
        items whose parent the user cannot see."""
        return [self.root.id, *self.drives,
                *(i.id for i in self.items.values() if i.parent is not None and i.hidden_parent),
                *(i.id for i in self.items.values() if i.parent is None and i is not self.root
                  and i.id not in self.drives)]

    def is_top(self, item):
        return item is self.root or item.id in self.drives

    def _insert(self, item):
        self.items[item.id] = item
        self.children[item.parent].append(item.id)
        self._next_index = max(self._next_index, item.index) + 1

    def _finish_items(self):
        """Recompute derived state after any change: effective trash flags, shortcut targets."""
        for top in self._tops():
            self._mark_trashed(self.items[top], False)
        for item in self.items.values():
            if item.shortcut_target:
                target = self.items.get(item.shortcut_target)
                if target is not None:
                    item.shortcut_target_mime = target.mime_type
        self.generation += 1
        self._listing_cache.clear()

    def _mark_trashed(self, folder, inherited):
        """Effective trash and read-only flags, and the shared drive of every item below ``folder``."""
        drive_id = folder.id if folder.id in self.drives else None
        stack = [(folder, inherited, False, drive_id)]
        while stack:
            item, inherited, read_only, drive_id = stack.pop()
            item.trashed = inherited or item.explicitly_trashed
            item.read_only = read_only or item.explicitly_read_only
            item.drive_id = drive_id
            stack.extend((self.items[c], item.trashed, item.read_only, drive_id)
                         for c in self.children.get(item.id, ()))

    # -- mutation (records changes) -----------------------------------------------------------------

    def _record_change(self, file_id, removed=False, drive_id=None):
        if not removed:
            drive_id = self.items[file_id].drive_id
        self.changes.append((now_ms(), file_id, removed, drive_id))

    def add_item(self, raw, base_dir="."):
        """Add one item given in spec form; returns its id."""
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise SpecError("an item needs an object with a string 'name'")
        with self.lock:
            parent = raw.get("parent", None if raw.get("sharedWithMe") else "root")
            parent = self.root.id if parent == "root" else parent
            hidden = parent not in self.items
            if hidden and not raw.get("sharedWithMe"):
                raise SpecError(f"unknown parent {parent!r}")
            item_id = raw.get("id") or stable_id(parent, raw.get("name"), self._next_index)
            raw = dict(raw)
            raw.setdefault("createdTime", rfc3339(time.time() * 1000))
            item = self._item_from_spec(item_id, parent, raw, base_dir)
            item.hidden_parent = hidden
            self._insert(item)
            self._finish_items()
            self._record_change(item_id)
            return item_id

    def commit_new(self, item):
        """Add ``item`` (made by the caller, under ``lock``) and record its creation."""
        with self.lock:
            self._insert(item)
            self._finish_items()
            self._record_change(item.id)

    def commit_change(self, item):
        """Record a change the caller made to ``item`` (under ``lock``): derived state, version, log."""
        with self.lock:
            item.version += 1
            self._finish_items()
            self._record_change(item.id)

    def move(self, item, parent_id):
        """Give ``item`` the parent ``parent_id`` (an existing folder; the caller checks cycles)."""
        with self.lock:
            self.children[item.parent].remove(item.id)
            item.parent = parent_id
            item.hidden_parent = False
            self.children[parent_id].append(item.id)

    def next_index(self):
        return self._next_index

    def update_item(self, item_id, name=None, parent=None, trashed=None, content=None, read_only=None):
        """Rename, move, (un)trash, mark read-only for the user, or replace the content (bytes: a new
        revision, the old one kept) of an item; bumps its version."""
        with self.lock:
            item = self.get(item_id)
            if item is None or self.is_top(item):
                raise KeyError(item_id)
            if name is not None:
                item.name = name
            if parent is not None:
                parent = self.root.id if parent == "root" else parent
                if parent not in self.items:
                    raise SpecError(f"unknown parent {parent!r}")
                self.move(item, parent)
            if trashed is not None:
                item.explicitly_trashed = bool(trashed)
            if read_only is not None:
                item.explicitly_read_only = bool(read_only)
            item.version += 1
            item.modified_ms = now_ms()
            if content is not None:
                if item.is_native:
                    item.text = content.decode("utf-8")
                else:
                    item.replace_content(emucontent.BytesSource(content), item.modified_ms,
                                         self.old_revisions)
            self._finish_items()
            self._record_change(item.id)

    def remove_item(self, item_id):
        """Delete an item and everything below it."""
        with self.lock:
            item = self.get(item_id)
            if item is None or self.is_top(item):
                raise KeyError(item_id)
            self.children[item.parent].remove(item.id)
            stack = [item.id]
            while stack:
                current = stack.pop()
                stack.extend(self.children.pop(current, []))
                drive_id = self.items.pop(current).drive_id
                self._record_change(current, removed=True, drive_id=drive_id)
            self._finish_items()

    # -- reading ------------------------------------------------------------------------------------

    def get(self, item_id):
        """The item with this id (``root`` is an alias of the root folder), or None."""
        if item_id == "root":
            return self.root
        return self.items.get(item_id)

    def listing(self, q, order_by, corpus=MY_DRIVE):
        """Items (never the root or a shared drive's root) of ``corpus`` (a ``Corpus``) that match
        the files.list filter ``q`` (None = all), sorted by ``order_by``, a list of (key, descending)
        pairs. Raises emuquery.QueryError for a bad ``q``.

        Results are cached per (generation, q, order_by, corpus), so paging through a listing is
        cheap. The returned list must not be modified.
        """
        with self.lock:
            key = (self.generation, q, tuple(order_by), corpus.key())
            cached = self._listing_cache.get(key)
            if cached is not None:
                self._listing_cache.move_to_end(key)
                return cached
            query = emuquery.parse_query(q) if q is not None else None
            hint = query.parent_hint() if query is not None else None
            if hint is None:
                candidates = [i for i in self.items.values() if not self.is_top(i)]
            else:
                ids = set()
                for parent in hint:
                    parent_item = self.get(parent)
                    if parent_item is not None:
                        ids.update(self.children.get(parent_item.id, ()))
                candidates = [self.items[i] for i in ids]
            result = [i for i in candidates if corpus.admits(i.drive_id)
                      and (query is None or query.match(_QueryView(i, self)))]
            result.sort(key=lambda i: i.index)
            for name, descending in reversed(order_by):
                result.sort(key=_ORDER_KEYS[name], reverse=descending)
            self._listing_cache[key] = result
            if len(self._listing_cache) > 32:
                self._listing_cache.popitem(last=False)
            return result

    def file_resource(self, item, mask, base_url):
        """The File resource of ``item`` restricted to ``mask`` (None = every field the emulator has).

        Values are computed only for selected fields, so checksums are not hashed unless asked for.
        """
        out = {}
        for name, getter in _FILE_FIELDS.items():
            wanted, sub = emuquery.selected(mask, name)
            if not wanted:
                continue
            value = getter(self, item, base_url)
            if value is not None:
                out[name] = emuquery.project(value, sub)
        return out

    def hash_large_files(self, threshold=256 << 20):
        """Start hashing the content of local files of ``threshold`` bytes or more in a background
        thread, so that the first request for their checksums does not wait long."""
        with self.lock:
            sources = [i.source for i in self.items.values()
                       if isinstance(i.source, emucontent.PathSource) and i.source.size >= threshold]

        def work():
            for source in sources:
                try:
                    source.digest("md5")
                except OSError:
                    pass                    # a request for the checksum will report it

        if sources:
            threading.Thread(target=work, name="drive-emulator-hash", daemon=True).start()

    def usage(self):
        """(bytes used, of which in the trash): the head revisions of the user's blobs (My Drive and
        shared with me; shared-drive content counts against the drive, not the user)."""
        with self.lock:
            blobs = [i for i in self.items.values() if i.source is not None and i.drive_id is None]
            return sum(i.source.size for i in blobs), sum(i.source.size for i in blobs if i.trashed)

    def about(self):
        usage, trash = self.usage()
        quota = {"usage": str(usage), "usageInDrive": str(usage), "usageInDriveTrash": str(trash)}
        if self.storage_limit is not None:
            quota = {"limit": str(self.storage_limit), **quota}
        return {
            "kind": "drive#about",
            "user": dict(USER),
            "storageQuota": quota,
            "exportFormats": {k: list(v) for k, v in emucontent.EXPORT_FORMATS.items()},
            "importFormats": {},
            "maxImportSizes": {},
            "maxUploadSize": "5242880000000",
            "appInstalled": False,
            "canCreateDrives": False,
            "folderColorPalette": [],
        }


class _QueryView:
    """What a q expression sees of an item: ``'root' in parents`` must match the root's children."""

    def __init__(self, item, drive):
        self.name = item.name
        self.mime_type = item.mime_type
        self.trashed = item.trashed
        self.parents = item.parents + (["root"] if item.parent == drive.root.id else [])
        self.created_ms = item.created_ms
        self.modified_ms = item.modified_ms
        self.shortcut_target = item.shortcut_target
        self.shared_with_me = item.shared_with_me


_ORDER_KEYS = {
    "name": lambda i: (i.name.casefold(), i.name),
    "name_natural": lambda i: _natural_key(i.name),
    "folder": lambda i: 0 if i.is_folder else 1,
    "modifiedTime": lambda i: i.modified_ms,
    "modifiedByMeTime": lambda i: i.modified_ms,
    "recency": lambda i: i.modified_ms,
    "createdTime": lambda i: i.created_ms,
    "quotaBytesUsed": lambda i: i.source.size if i.source else 0,
    "sharedWithMeTime": lambda i: i.created_ms if i.shared_with_me else 0,
    "starred": lambda i: 0,
    "viewedByMeTime": lambda i: 0,
}
ORDER_BY_KEYS = frozenset(_ORDER_KEYS)


def _extension(name):
    return name.rsplit(".", 1)[1] if "." in name.strip(".") else None


def _capabilities(item):
    writable = not item.read_only
    return {
        "canDownload": item.can_download,
        "canListChildren": item.is_folder,
        "canAddChildren": item.is_folder and writable,
        "canEdit": writable,
        "canCopy": not item.is_folder,
        "canComment": True,
        "canRename": writable,
        "canShare": writable,
        "canTrash": writable,
        "canUntrash": writable,
        "canDelete": writable,
        "canReadRevisions": not item.is_folder,
        "canRemoveChildren": item.is_folder and writable,
        "canModifyContent": writable and not item.is_folder,
        "canMoveItemWithinDrive": writable,
    }


def _shortcut_details(item):
    if not item.shortcut_target:
        return None
    details = {"targetId": item.shortcut_target}
    if item.shortcut_target_mime:
        details["targetMimeType"] = item.shortcut_target_mime
    return details


def _export_links(drive, item, base_url):
    targets = item.export_targets()
    if not targets:
        return None
    return {t: f"{base_url}/drive/v3/files/{quote(item.id)}/export?mimeType={quote(t, safe='/')}"
            for t in targets}


def _blob(getter):
    """A field getter that is None for items without binary content."""
    return lambda drive, item, base_url: getter(item) if item.source is not None else None


# Field name -> getter(drive, item, base_url); the order is the order of keys in a response.
_FILE_FIELDS = {
    "kind": lambda d, i, b: "drive#file",
    "id": lambda d, i, b: i.id,
    "name": lambda d, i, b: i.name,
    "mimeType": lambda d, i, b: i.mime_type,
    "parents": lambda d, i, b: i.parents or None,
    "starred": lambda d, i, b: False,
    "trashed": lambda d, i, b: i.trashed,
    "explicitlyTrashed": lambda d, i, b: i.explicitly_trashed,
    "description": lambda d, i, b: i.description,
    "properties": lambda d, i, b: dict(i.properties) or None,
    "appProperties": lambda d, i, b: dict(i.app_properties) or None,
    "spaces": lambda d, i, b: ["drive"],
    "version": lambda d, i, b: str(i.version),
    "createdTime": lambda d, i, b: rfc3339(i.created_ms),
    "modifiedTime": lambda d, i, b: rfc3339(i.modified_ms),
    "modifiedByMeTime": lambda d, i, b: rfc3339(i.modified_ms),
    "modifiedByMe": lambda d, i, b: True,
    "viewedByMe": lambda d, i, b: True,
    "driveId": lambda d, i, b: i.drive_id,
    "owners": lambda d, i, b: None if i.drive_id else [dict(SHARER if i.shared_with_me else USER)],
    "shared": lambda d, i, b: i.shared_with_me or i.drive_id is not None,
    "ownedByMe": lambda d, i, b: i.drive_id is None and not i.shared_with_me,
    "sharedWithMeTime": lambda d, i, b: rfc3339(i.created_ms) if i.shared_with_me else None,
    "sharingUser": lambda d, i, b: dict(SHARER) if i.shared_with_me else None,
    "viewersCanCopyContent": lambda d, i, b: True,
    "copyRequiresWriterPermission": lambda d, i, b: False,
    "writersCanShare": lambda d, i, b: True,
    "hasThumbnail": lambda d, i, b: False,
    "capabilities": lambda d, i, b: _capabilities(i),
    "shortcutDetails": lambda d, i, b: _shortcut_details(i),
    "exportLinks": _export_links,
    "originalFilename": _blob(lambda i: i.name),
    "fullFileExtension": _blob(lambda i: i.name.split(".", 1)[1] if _extension(i.name) else None),
    "fileExtension": _blob(lambda i: _extension(i.name)),
    "size": _blob(lambda i: str(i.source.size)),
    "quotaBytesUsed": lambda d, i, b: str(i.source.size) if i.source is not None else "0",
    "md5Checksum": _blob(lambda i: i.source.digest("md5")),
    "sha1Checksum": _blob(lambda i: i.source.digest("sha1")),
    "sha256Checksum": _blob(lambda i: i.source.digest("sha256")),
    "headRevisionId": _blob(lambda i: i.head_revision),
}

assert set(_FILE_FIELDS) <= set(FILE_SCHEMA)
