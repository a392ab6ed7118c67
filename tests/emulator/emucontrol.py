"""Control endpoints of the Drive emulator for writes and uploads (no auth; not counted in stats).

``write_control(emu, method, path, value, params)`` answers these (None: not one of them); the
others are in drive_emulator.Emulator.control. ``value`` is the parsed JSON body ({} when none)::

  GET  /_emu/write-rate      {"rate", "burst", "status"} of the creations/uploads bucket
  POST /_emu/write-rate      change it: {"rate": R, "burst": B, "status": 403|429}, as /_emu/quota
  GET  /_emu/storage         {"limit": bytes or null (unlimited), "usage", "usage_in_trash"}
  POST /_emu/storage         {"limit": N | null}
  GET  /_emu/uploads         {"settings": {...}, "sessions": [{"upload_id", "file_id", "persisted",
                             "total", "complete", "expired", "expires_in"}], "reserved_ids": n}
  POST /_emu/uploads         change settings: {"session_lifetime": S, "unaligned_chunks":
                             "reject"|"truncate", "create_status": 200|201, "multipart_limit": B,
                             "unreserved_id_status": 409|400}, each optional
  POST /_emu/uploads/expire  {"upload_id": U} ends that session now; {} ends all; answers
                             {"expired": n}; 404 for an unknown upload_id
  POST /_emu/tokens          {"token": T, "scope": S}: accept bearer token T forever with scope S
                             (space-separated; e.g. https://www.googleapis.com/auth/drive.readonly)
  GET  /_emu/items/ID        an item as the emulator holds it: {"id", "name", "mimeType", "parent",
                             "path", "trashed", "explicitlyTrashed", "readOnly", "version",
                             "modifiedTime", "createdTime", "appProperties", "properties", and for
                             blobs "size", "md5Checksum", "headRevisionId", "revisions": [{"id",
                             "size", "md5Checksum", "modifiedTime"}] (oldest first, head last)}
  GET  /_emu/items/ID/content[?revision=R]   the bytes of the head (or of revision R)
  GET  /_emu/find?name=N     {"items": [...]} every item named N (exact, any folder), as above
  GET  /_emu/find?path=P     the items at path P ("/" separated below My Drive, e.g. "/A/b.txt";
                             every match of each name, so duplicates all show)
"""

import emuapi
import emudrive

def reply(value, status=200):
    return emuapi.Response.json(value, status)


def item_path(drive, item):
    names = []
    while item is not None and item is not drive.root and not drive.is_top(item):
        names.append(item.name)
        item = drive.items.get(item.parent) if item.parent else None
    return "/" + "/".join(reversed(names))


def describe_item(drive, item):
    with drive.lock:
        out = {"id": item.id, "name": item.name, "mimeType": item.mime_type, "parent": item.parent,
               "path": item_path(drive, item), "trashed": item.trashed,
               "explicitlyTrashed": item.explicitly_trashed, "readOnly": item.read_only,
               "version": item.version, "modifiedTime": emudrive.rfc3339(item.modified_ms),
               "createdTime": emudrive.rfc3339(item.created_ms),
               "appProperties": dict(item.app_properties), "properties": dict(item.properties)}
        if item.source is not None:
            out.update(size=item.source.size, md5Checksum=item.source.digest("md5"),
                       headRevisionId=item.head_revision,
                       revisions=[{"id": rev, "size": source.size, "md5Checksum": source.digest("md5"),
                                   "modifiedTime": emudrive.rfc3339(ms)}
                                  for rev, source, ms in item.revisions()])
        return out


def find(drive, params):
    with drive.lock:
        if "name" in params:
            found = [i for i in drive.items.values() if i.name == params["name"] and i is not drive.root]
        elif "path" in params:
            found = [drive.root]
            for name in filter(None, params["path"].split("/")):
                found = [drive.items[c] for f in found for c in drive.children.get(f.id, ())
                         if drive.items[c].name == name]
        else:
            raise ValueError("find needs ?name=N or ?path=P")
        found.sort(key=lambda i: i.index)
        return {"items": [describe_item(drive, i) for i in found]}


def _item_get(emu, path, params):
    rest = path[len("/_emu/items/"):]
    item_id, _, tail = rest.partition("/")
    item = emu.drive.get(item_id)
    if item is None or tail not in ("", "content"):
        raise KeyError(item_id)
    if not tail:
        return reply(describe_item(emu.drive, item))
    found = item.revision(params["revision"]) if "revision" in params else \
        ((item.source, None) if item.source is not None else None)
    if found is None:
        raise KeyError(params.get("revision", item_id))
    return emuapi.Response(200, found[0].read(0, found[0].size), "application/octet-stream")


def write_control(emu, method, path, value, params):
    """The answer to a write-side control request, or None when ``path`` is not one (see the doc)."""
    writes = emu.writes
    if path == "/_emu/write-rate":
        if method == "POST":
            unknown = set(value) - {"rate", "burst", "status"}
            if unknown:
                raise ValueError(f"unknown write-rate settings {sorted(unknown)}")
            writes.write_quota.configure(value.get("rate"), value.get("burst"), value.get("status"))
        return reply(writes.write_quota.describe())
    if path == "/_emu/storage":
        if method == "POST":
            limit = value.get("limit")
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
                raise ValueError("limit must be a non-negative integer or null")
            emu.drive.storage_limit = limit
        usage, trash = emu.drive.usage()
        return reply({"limit": emu.drive.storage_limit, "usage": usage, "usage_in_trash": trash})
    if path == "/_emu/uploads":
        if method == "POST":
            settings = dict(value)
            status = settings.pop("unreserved_id_status", None)
            if status is not None and status not in (400, 409):
                raise ValueError("unreserved_id_status must be 400 or 409")
            writes.uploads.configure(**settings)
            writes.unreserved_id_status = status or writes.unreserved_id_status
        out = writes.uploads.describe()
        out["settings"]["unreserved_id_status"] = writes.unreserved_id_status
        out["reserved_ids"] = len(writes.reserved)
        return reply(out)
    if path == "/_emu/uploads/expire" and method == "POST":
        return reply({"expired": writes.uploads.expire(value.get("upload_id"))})
    if path == "/_emu/tokens" and method == "POST":
        emu.auth.add_token(value.get("token"), value.get("scope", "https://www.googleapis.com/auth/drive"))
        return reply({"ok": True})
    if path.startswith("/_emu/items/") and method == "GET":
        return _item_get(emu, path, params)
    if path == "/_emu/find" and method == "GET":
        return reply(find(emu.drive, params))
    return None
