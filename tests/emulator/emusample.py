"""The demo drive of ``--sample DIR``.

``write_sample(DIR)`` writes the local files under ``DIR/files`` (kept when already there with the right
size) and returns the spec, also saved as ``DIR/spec.json``. The drive holds::

    My Drive/
      Documents/      readme.txt, notes.md, Project Plan (Google Doc), Budget (Google Sheet),
                      report.txt twice (a duplicate name), "it's a/b.txt" (quote and slash in the name)
      Data/           blob.bin (20 MiB, generated_bytes seed 20240501), empty.bin (0 bytes),
                      generated.bin (1 MiB from size+seed, no local file)
      Many/           file_000.txt .. file_299.txt
      Old stuff/      trashed folder with one file (trashed through its parent)
      old-draft.txt   trashed file
      Shortcut to blob.bin, Shortcut to Data
"""

import json
import os

import emucontent
import emudrive

BLOB_SEED = 20240501
BLOB_SIZE = 20 * 1024 * 1024
MANY_FILES = 300


def _sample_id(*path):
    return emudrive.stable_id("sample", *path)


def _write_file(path, size, chunks):
    """Write ``path`` from an iterator of bytes unless it already exists with ``size`` bytes."""
    if os.path.isfile(path) and os.path.getsize(path) == size:
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        for chunk in chunks:
            f.write(chunk)
    os.replace(tmp, path)


def write_sample(directory):
    directory = os.path.abspath(directory)
    files = os.path.join(directory, "files")

    def text_file(rel, text):
        data = text.encode("utf-8")
        path = os.path.join(files, rel)
        _write_file(path, len(data), [data])
        return path

    blob_path = os.path.join(files, "blob.bin")
    blob = emucontent.GeneratedSource(BLOB_SIZE, BLOB_SEED)
    _write_file(blob_path, BLOB_SIZE, blob.chunks(0, BLOB_SIZE, 1 << 20))

    docs, data, many, old = (_sample_id(n) for n in ("Documents", "Data", "Many", "Old stuff"))
    folder = emudrive.FOLDER
    items = [
        {"id": docs, "name": "Documents", "mimeType": folder},
        {"id": data, "name": "Data", "mimeType": folder},
        {"id": many, "name": "Many", "mimeType": folder},
        {"id": old, "name": "Old stuff", "mimeType": folder, "trashed": True},
        {"name": "readme.txt", "parent": docs, "mimeType": "text/plain",
         "path": text_file("readme.txt", "Sample drive of the colabfs Drive emulator.\n")},
        {"name": "notes.md", "parent": docs, "mimeType": "text/markdown",
         "path": text_file("notes.md", "# Notes\n\n* one\n* two\n")},
        {"name": "Project Plan", "parent": docs, "mimeType": "application/vnd.google-apps.document",
         "content": "Project plan\n\n1. Mount Drive.\n2. Read files.\n"},
        {"name": "Budget", "parent": docs, "mimeType": "application/vnd.google-apps.spreadsheet",
         "content": "item,cost\ndisk,100\n"},
        {"name": "report.txt", "parent": docs, "mimeType": "text/plain", "content": "first report\n"},
        {"name": "report.txt", "parent": docs, "mimeType": "text/plain", "content": "second report\n"},
        {"name": "it's a/b.txt", "parent": docs, "mimeType": "text/plain", "content": "odd name\n"},
        {"id": _sample_id("blob.bin"), "name": "blob.bin", "parent": data, "path": blob_path},
        {"name": "empty.bin", "parent": data, "path": text_file("empty.bin", "")},
        {"name": "generated.bin", "parent": data, "size": 1024 * 1024, "seed": 7},
        {"name": "inside-trash.txt", "parent": old, "content": "trashed with its folder\n"},
        {"name": "old-draft.txt", "mimeType": "text/plain", "content": "draft\n", "trashed": True},
        {"name": "Shortcut to blob.bin", "mimeType": emudrive.SHORTCUT,
         "shortcutDetails": {"targetId": _sample_id("blob.bin")}},
        {"name": "Shortcut to Data", "mimeType": emudrive.SHORTCUT, "shortcutDetails": {"targetId": data}},
    ]
    for n in range(MANY_FILES):
        name = f"file_{n:03d}.txt"
        items.append({"name": name, "parent": many, "mimeType": "text/plain",
                      "path": text_file(os.path.join("many", name), f"small file {n:03d}\n")})
    spec = {"items": items}
    tmp = os.path.join(directory, f"spec.json.tmp.{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(spec, f, indent=1)
    os.replace(tmp, os.path.join(directory, "spec.json"))
    return spec
