#!/usr/bin/python3
"""Summarise a `prove -rv` log of pjdfstest (see README.md): counts by test folder, and each
failure put in a class by what its line says.  The classes are heuristics: the first failure of
a test file that matches none is UNCLASSIFIED and printed; later ones in the same file are
counted as a cascade of the first (a name a failed mknod never made, then ENOENT ...)."""
import collections
import re
import sys

KINDS = {"symlink", "link", "mkfifo", "mknod", "bind", "connect"}
CLASSES = {
    "kind": "unsupported kind: symlink, hard link, fifo, device, socket",
    "mode": "modes/owners fixed (chmod/chown accepted and ignored)",
    "perm": "permission checks on modes/owners that never changed",
    "nlink": "no hard links (nlink, shared inode)",
    "time": "time check (test_check, no message; see README for where)",
    "cascade": "cascade of an earlier failure in the same test file",
    "?": "UNCLASSIFIED",
}


def parse(path):
    files = collections.OrderedDict()
    cur = None
    for line in open(path, errors="replace"):
        m = re.match(r"^(/\S+/tests/(\S+\.t)) \.+", line)
        if m:
            cur = m.group(2)
            files[cur] = {"plan": 0, "ok": 0, "fail": []}
            continue
        if line.startswith("Test Summary Report"):
            cur = None
        if cur is None:
            continue
        m = re.match(r"^1\.\.(\d+)", line)
        if m:
            files[cur]["plan"] = int(m.group(1))
            continue
        m = re.match(r"^(not )?ok (\d+)(.*)", line)
        if m:
            if m.group(1) and "# TODO" not in m.group(3) and "# SKIP" not in m.group(3):
                files[cur]["fail"].append((int(m.group(2)), m.group(3).strip()))
            else:
                files[cur]["ok"] += 1
    return files


def classify(msg, earlier):
    m = re.match(r"- tried '(.*)', expected (\S+), got (.*)$", msg)
    if not m:
        return "time"
    w, exp, got = m.group(1).split(), m.group(2), m.group(3)
    asuser = bool(w) and w[0] in ("-u", "-g", "-U", "-G")
    i = 0
    while i < len(w) and w[i].startswith("-") and w[i] != "--":
        i += 2
    i += 1 if i < len(w) and w[i] == "--" else 0
    op = w[i] if i < len(w) else ""
    fields = w[-1] if op in ("stat", "lstat", "fstat") else ""
    if op in KINDS and got in ("ENOSYS", "EPERM", "EACCES", "EXDEV", "EOPNOTSUPP", "EIO"):
        return "kind"
    if op in ("chmod", "lchmod", "chown", "lchown") and got in ("EPERM", "EACCES", "0"):
        return "mode"
    if fields and any(f in fields for f in ("mode", "uid", "gid")) and not got.startswith("E"):
        return "mode"
    if (fields and any(f in fields for f in ("nlink", "inode")) and not got.startswith("E")
            and not exp.startswith("ENOENT")):
        return "nlink"
    if asuser and (got in ("EACCES", "EPERM") or exp.split("|")[0] in ("EACCES", "EPERM")):
        return "perm"
    if op in ("create", "open", "mkdir", "mkfifo") and got == "EACCES":
        return "perm"
    return "cascade" if earlier else "?"


def main(path):
    files = parse(path)
    by_dir = collections.OrderedDict()
    classes = collections.Counter()
    for name, f in files.items():
        d = by_dir.setdefault(name.split("/")[0], [0, 0, 0])
        d[0] += f["plan"]
        d[1] += f["ok"]
        d[2] += len(f["fail"])
        for k, (n, msg) in enumerate(f["fail"]):
            c = classify(msg, k > 0)
            classes[c] += 1
            if c == "?":
                print("UNCLASSIFIED %s %d %s" % (name, n, msg[:160]))
    total = [0, 0, 0]
    for d, (plan, ok, fail) in by_dir.items():
        print("%-16s planned %5d  ok %5d  failed %5d" % (d, plan, ok, fail))
        total = [total[0] + plan, total[1] + ok, total[2] + fail]
    print("%-16s planned %5d  ok %5d  failed %5d" % ("TOTAL", *total))
    for c, n in classes.most_common():
        print("%5d  %s" % (n, CLASSES[c]))


if __name__ == "__main__":
    main(sys.argv[1])
