"""The README's Colab recipe, run as the notebook cells it shows (issues 14, 23).

The cells are the README's fenced blocks tagged ``colab*``, taken in order:
  colab-packages   its apt-get list must be in dev.sh's PACKAGES (what CI installs), without fuse3
  colab-build      `make install` of this tree into a scratch DESTDIR puts the binary, the man page
                   and every module of the Python package
  colab            run in ONE Python process, as a notebook's kernel runs its cells (a ``sh`` cell
                   with bash -e, as %%bash does), /content mapped to a scratch folder, against the
                   emulator: colabfs.mount, the training cell, colabfs.flush_and_unmount
Inside Colab colabfs.mount asks the notebook for the user's consent and the token comes from
Colab's credentials endpoint ($TBE_EPHEM_CREDS_ADDR): here a stand-in google.colab package records
each blocking_request, and the emulator's metadata server is that endpoint.  Then: the consent
request was sent, every byte read was right, the checkpoint reached Drive, and the mount is gone.
The README tells Colab users not to install the fuse3 package (it would remove Colab's fuse), so
the cells run in a mount namespace of their own where fusermount3 and fusermount are a stand-in
that records each run and fails: colabfs must mount and unmount as root without them.
"""

import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import urllib.parse

import pytest

import helpers as H
from conftest import SESSION_TOKEN

CELL = re.compile(r"^```(sh|python) (colab[\w-]*)\n(.*?)^```", re.M | re.S)


def cells():
    return [(m.group(1), m.group(2), m.group(3)) for m in CELL.finditer((H.REPO / "README.md").read_text())]


def runnable(body):
    """A cell as it runs: a %%bash cell's first line is the notebook's, not bash's."""
    return body[len("%%bash\n"):] if body.startswith("%%bash\n") else body


def test_readme_has_the_recipe():
    cs = cells()
    tags = [t for _, t, _ in cs]
    assert tags[:2] == ["colab-packages", "colab-build"], tags
    run = [(lang, b) for lang, t, b in cs if t == "colab"]
    assert len(run) >= 3 and all(lang == "python" for lang, _ in run), run
    assert "colabfs.mount(" in run[0][1] and "colabfs.flush_and_unmount()" in run[-1][1], run


def test_packages_cell_matches_what_ci_installs():
    pkgs = re.search(r'^PACKAGES="(.*?)"', (H.REPO / "dev.sh").read_text(), re.M | re.S).group(1).split()
    body = [b for _, t, b in cells() if t == "colab-packages"][0]
    wanted = [w for w in runnable(body).split("install -y", 1)[1].replace("\\\n", " ").split()
              if not w.startswith("-")]
    assert wanted and not set(wanted) - set(pkgs), set(wanted) - set(pkgs)
    # fuse3 replaces Ubuntu's fuse package, which Colab's own Drive mount needs
    assert "fuse3" not in wanted and "fuse" not in wanted, wanted


def test_build_cell_installs(tmp_path):
    body = [b for _, t, b in cells() if t == "colab-build"][0]
    assert "./configure" in body and "make -s install" in body
    dest = tmp_path / "dest"
    r = subprocess.run(["make", "-s", "install", "DESTDIR=%s" % dest], cwd=str(H.REPO),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    # the front end, the full program it runs (src/cli/front.c), the man page
    assert list(dest.rglob("bin/colabfs")) and list(dest.rglob("libexec/colabfs/colabfs")) and \
        list(dest.rglob("man1/colabfs.1")), \
        sorted(str(p) for p in dest.rglob("*"))
    pkg = [p.parent for p in dest.rglob("colabfs/drive.py")]
    assert len(pkg) == 1, sorted(str(p) for p in dest.rglob("*.py"))
    modules = {p.name for p in (H.REPO / "python" / "colabfs").glob("*.py") if p.name != "_paths.py"}
    assert modules <= {p.name for p in pkg[0].glob("*.py")}, modules
    assert "BINDIR = " in (pkg[0] / "_paths.py").read_text()


FAKE_MESSAGE = """import json, os
def blocking_request(request_type, request=None, timeout_sec=5, parent=None):
    with open(os.environ["FAKE_COLAB_LOG"], "a") as f:
        f.write(json.dumps({"type": request_type, "request": request, "timeout_sec": timeout_sec}) + "\\n")
    return {}
"""

# a notebook kernel: every cell in one namespace, in order; stops at the first that fails
KERNEL = """import json, subprocess, sys, traceback
ns = {"__name__": "__main__"}
for i, (lang, body) in enumerate(json.load(open(sys.argv[1]))):
    print("=== cell %d (%s)" % (i, lang), flush=True)
    if lang == "sh":
        rc = subprocess.run(["bash", "-e", "-c", body]).returncode
        if rc:
            sys.exit("cell %d: bash exited %d" % (i, rc))
        continue
    try:
        exec(compile(body, "<cell %d>" % i, "exec"), ns)
    except BaseException:
        traceback.print_exc()
        sys.exit("cell %d failed" % i)
    sys.stdout.flush()
"""

# run before the unmount cell: every byte read through the mount against the source
CHECK = """import hashlib, json, os
want = json.load(open(%r))
got = {n: hashlib.sha256(open(os.path.join(%r, n), "rb").read()).hexdigest() for n in want}
bad = sorted(n for n in want if got[n] != want[n])
assert not bad, bad
print("checked", len(want), "files byte for byte")
"""


# stands in for fusermount3 and fusermount inside the cells' mount namespace: records, fails
FAKE_FUSERMOUNT = """#!/bin/sh
echo "$0 $*" >> %s
exit 1
"""

# run as `sh -c WRAP sh LOG NSFILE PROGRAM...` in a private mount namespace: each fusermount found
# is hidden behind the stand-in and run once as a control (its line in LOG proves the hiding),
# the namespace is noted for the clean-up, then the program runs there
WRAP = """log=$1 nsfile=$2; shift 2
for f in /usr/bin/fusermount3 /usr/bin/fusermount /bin/fusermount3 /bin/fusermount; do
  [ -e "$f" ] || continue
  mount --bind "$FAKE_FUSERMOUNT" "$(readlink -f "$f")" || exit 97
  "$f" control
done
readlink /proc/self/ns/mnt > "$nsfile"
exec "$@"
"""


def hidden_fusermounts():
    """The control lines WRAP's loop writes: one per fusermount path that exists here."""
    return ["%s control" % f for f in ("/usr/bin/fusermount3", "/usr/bin/fusermount",
                                       "/bin/fusermount3", "/bin/fusermount") if os.path.exists(f)]


def kill_namespace(nsfile):
    """Every process left in the cells' mount namespace (a daemon of a failed run): killed, so
    the namespace and the mount in it go with them."""
    try:
        ns = nsfile.read_text().strip()
    except OSError:
        return
    if ns == os.readlink("/proc/self/ns/mnt"):
        return  # not a namespace of its own: nothing here is the cells' alone
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            if os.readlink("/proc/%d/ns/mnt" % pid) == ns:
                os.kill(pid, 9)
        except OSError:
            pass


def fake_colab(base):
    pkg = base / "google" / "colab"
    pkg.mkdir(parents=True)
    (base / "google" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "_message.py").write_text(FAKE_MESSAGE)
    return base


@pytest.mark.deadline(240)
def test_colab_cells_run_against_the_emulator(emulator_factory, tmp_path, fuse_ok, colabfs):
    src = tmp_path / "src"
    src.mkdir()
    rng = random.Random(14)
    items = [{"name": "Data", "mimeType": "application/vnd.google-apps.folder", "id": H.mkid("readme-data")}]
    sums = {}
    for i in range(40):
        name = "img%03d.bin" % i
        (src / name).write_bytes(rng.randbytes(1000 + 97 * i))
        sums[name] = hashlib.sha256((src / name).read_bytes()).hexdigest()
        items.append({"name": name, "parent": H.mkid("readme-data"), "path": str(src / name)})
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"items": items}))
    (tmp_path / "sums.json").write_text(json.dumps(sums))
    # the token comes only from the metadata server standing in for Colab's endpoint
    emu = emulator_factory(spec, "emu-readme", access_token=SESSION_TOKEN)
    content = tmp_path / "content"
    content.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "colabfs").symlink_to(H.colabfs_bin())  # found on PATH, as after make install
    consent_log = tmp_path / "consent.jsonl"
    env = H.clean_env(home=tmp_path, extra={
        "PATH": "%s:%s" % (bindir, os.environ.get("PATH", "")),
        "PYTHONPATH": "%s:%s" % (fake_colab(tmp_path / "fakecolab"), H.REPO / "python"),
        "TBE_EPHEM_CREDS_ADDR": "127.0.0.1:%d" % emu.port, "FAKE_COLAB_LOG": str(consent_log)})
    mnt = content / "data"
    run = []
    for lang, tag, body in cells():
        if tag != "colab":
            continue
        body = runnable(body).replace("/content", str(content))
        # the emulator stands in for Drive; the token comes from $TBE_EPHEM_CREDS_ADDR alone
        body = re.sub(r"(colabfs\.mount\(\"[^\"]*\")", r'\1, api_url="%s", log_file="%s"'
                      % (emu.url, tmp_path / "m.log"), body)
        if "colabfs.flush_and_unmount(" in body:
            run.append(("python", CHECK % (str(tmp_path / "sums.json"), str(mnt / "Data"))))
        run.append((lang, body))
    # the mount is seen only inside the cells' namespace: its end is checked there
    run.append(("python", "assert %r not in [l.split()[1] for l in open('/proc/self/mounts')]\n"
                          "print('no mount left')\n" % str(mnt)))
    (tmp_path / "cells.json").write_text(json.dumps(run))
    (tmp_path / "kernel.py").write_text(KERNEL)
    fm_log, nsfile = tmp_path / "fusermount.log", tmp_path / "cells.ns"
    fake_fm = tmp_path / "fusermount-standin"
    fake_fm.write_text(FAKE_FUSERMOUNT % fm_log)
    fake_fm.chmod(0o755)
    env["FAKE_FUSERMOUNT"] = str(fake_fm)
    try:
        rc, out, err = H.run_cmd(["unshare", "--mount", "--propagation", "private", "sh", "-c", WRAP,
                                  "sh", str(fm_log), str(nsfile), H.PYTHON, str(tmp_path / "kernel.py"),
                                  str(tmp_path / "cells.json")],
                                 timeout=180, env=env, cwd=str(tmp_path))
        assert rc == 0, (out[-3000:], err[-3000:])
        # each stand-in ran once, as the control; colabfs ran neither
        ran = fm_log.read_text().splitlines() if fm_log.exists() else []
        assert ran == hidden_fusermounts(), ran
        calls = [json.loads(ln) for ln in consent_log.read_text().splitlines()]
        assert calls == [{"type": "request_auth", "request": {"authType": "dfs_ephemeral"},
                          "timeout_sec": None}], calls
        assert "Mounted at %s\n" % mnt in out, out
        assert "read 40 files, %d bytes" % sum(1000 + 97 * i for i in range(40)) in out, out
        assert "checked 40 files byte for byte" in out, out
        st, _, body = emu.request("GET", "/_emu/find?path=" + urllib.parse.quote("/ckpt/model.pt"))
        found = [i for i in json.loads(body)["items"] if not i["trashed"]]
        assert len(found) == 1 and found[0]["size"] > 1000, found
        assert "no mount left" in out, "the last cell unmounts"
        assert SESSION_TOKEN not in out + err
    finally:
        kill_namespace(nsfile)
        if H.is_fuse_mounted(str(mnt)):
            subprocess.run([H.colabfs_bin(), "umount", str(mnt)], timeout=60)
        if H.is_fuse_mounted(str(mnt)):
            subprocess.run(["umount", "-l", str(mnt)], timeout=30)
        shutil.rmtree(content / ".colabfs-cache", ignore_errors=True)
