"""What is mounted where, from /proc/self/mountinfo (no system call on a mount
itself, so a hung mount cannot hang these)."""

import os
import re

MOUNTINFO = "/proc/self/mountinfo"
FSTYPE = "fuse.colabfs"  # fuse/session.c mounts with subtype=colabfs


def _unescape(s):
    """mountinfo writes space, tab, newline and backslash as \\ooo (octal)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def parse(text):
    """[{"mountpoint", "fstype", "source", "devno"}] of mountinfo text, in order."""
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        a, b = left.split(), right.split()
        if not sep or len(a) < 5 or not b:
            continue
        out.append({"mountpoint": _unescape(a[4]), "fstype": b[0],
                    "source": _unescape(b[1]) if len(b) > 1 else "", "devno": a[2]})
    return out


def entries(path=MOUNTINFO):
    try:
        with open(path) as f:
            return parse(f.read())
    except OSError:
        return []


def entry_at(mountpoint, path=MOUNTINFO):
    """The entry mounted at mountpoint (the topmost when stacked), or None.
    mountpoint is made absolute, not resolved: resolving would look at it."""
    mp = os.path.abspath(os.fspath(mountpoint))
    found = None
    for e in entries(path):
        if e["mountpoint"] == mp:
            found = e
    return found


def colabfs_mounts(path=MOUNTINFO):
    """Mountpoints of colabfs mounts, in mount order."""
    return [e["mountpoint"] for e in entries(path) if e["fstype"] == FSTYPE]


def mount_of(path, fuse_only=False, info=MOUNTINFO):
    """The mountpoint under which path lies (the longest match), or None."""
    real = os.path.realpath(os.fspath(path))
    best = None
    for e in entries(info):
        if fuse_only and not e["fstype"].startswith("fuse"):
            continue
        mp = e["mountpoint"]
        if real == mp or real.startswith(mp.rstrip("/") + "/"):
            if best is None or len(mp) > len(best):
                best = mp
    return best
