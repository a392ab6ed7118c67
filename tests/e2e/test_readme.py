"""The README's Colab recipe, run as the shell and Python cells it shows (issue 14).

The cells are the README's fenced blocks tagged ``colab*``, taken in order:
  colab-packages   its apt-get list must be in dev.sh's PACKAGES (what CI installs)
  colab-build      `make install` of this tree into a scratch DESTDIR puts the binary and the man page
  colab-auth       replaced by COLABFS_ACCESS_TOKEN (the sign-in is Colab's own)
  colab            run: ``sh`` with bash -e, ``python`` with /usr/bin/python3, /content mapped to a
                   scratch folder, ``colabfs mount`` pointed at the emulator (--api-url)
Then Drive must hold the checkpoint the cells saved, and the mount must be gone.
"""

import json
import os
import re
import shutil
import subprocess
import urllib.parse
from pathlib import Path

import pytest

import helpers as H
from conftest import SESSION_TOKEN

CELL = re.compile(r"^```(sh|python) (colab[\w-]*)\n(.*?)^```", re.M | re.S)


def cells():
    return [(m.group(1), m.group(2), m.group(3)) for m in CELL.finditer((H.REPO / "README.md").read_text())]


def test_readme_has_the_recipe():
    tags = [t for _, t, _ in cells()]
    assert tags[:3] == ["colab-packages", "colab-build", "colab-auth"], tags
    assert tags.count("colab") >= 3, tags


def test_packages_cell_matches_what_ci_installs():
    pkgs = re.search(r'^PACKAGES="(.*?)"', (H.REPO / "dev.sh").read_text(), re.M | re.S).group(1).split()
    body = [b for _, t, b in cells() if t == "colab-packages"][0]
    wanted = body.split("install -y", 1)[1].replace("\\\n", " ").split()
    assert wanted and not set(wanted) - set(pkgs), set(wanted) - set(pkgs)


def test_build_cell_installs(tmp_path):
    body = [b for _, t, b in cells() if t == "colab-build"][0]
    assert "./configure" in body and "make -s install" in body
    dest = tmp_path / "dest"
    r = subprocess.run(["make", "-s", "install", "DESTDIR=%s" % dest], cwd=str(H.REPO),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert list(dest.rglob("bin/colabfs")) and list(dest.rglob("man1/colabfs.1")), \
        sorted(str(p) for p in dest.rglob("*"))


@pytest.mark.deadline(240)
def test_colab_cells_run_against_the_emulator(emulator_factory, tmp_path, fuse_ok, colabfs):
    spec = tmp_path / "spec.json"
    items = [{"name": "Data", "mimeType": "application/vnd.google-apps.folder", "id": H.mkid("readme-data")}]
    items += [{"name": "img%03d.bin" % i, "parent": H.mkid("readme-data"), "size": 1000 + 97 * i, "seed": i}
              for i in range(40)]
    spec.write_text(json.dumps({"items": items}))
    emu = emulator_factory(spec, "emu-readme", access_token=SESSION_TOKEN)
    content = tmp_path / "content"
    content.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "colabfs").symlink_to(H.colabfs_bin())
    env = H.clean_env(home=tmp_path, extra={"COLABFS_ACCESS_TOKEN": SESSION_TOKEN,
                                             "PATH": "%s:%s" % (bindir, os.environ.get("PATH", ""))})
    mnt = content / "data"
    outs = []
    try:
        for lang, tag, body in cells():
            if tag != "colab":
                continue
            body = body.replace("/content", str(content))
            body = re.sub(r"^(colabfs mount )", r"\1--api-url=%s --log-file=%s " % (emu.url, tmp_path / "m.log"),
                          body, flags=re.M)
            body = re.sub(r"^(colabfs doctor )", r"\1--api-url=%s " % emu.url, body, flags=re.M)
            argv = ["bash", "-e", "-c", body] if lang == "sh" else [H.PYTHON, "-c", body]
            rc, out, err = H.run_cmd(argv, timeout=180, env=env, cwd=str(tmp_path))
            assert rc == 0, (tag, body[:300], out[-2000:], err[-2000:])
            outs.append(out)
        assert any("read 40 files, %d bytes" % sum(1000 + 97 * i for i in range(40)) in o for o in outs), outs
        st, _, body = emu.request("GET", "/_emu/find?path=" + urllib.parse.quote("/ckpt/model.pt"))
        found = [i for i in json.loads(body)["items"] if not i["trashed"]]
        assert len(found) == 1 and found[0]["size"] > 1000, found
        assert not H.is_fuse_mounted(str(mnt)), "the last cell unmounts"
    finally:
        if H.is_fuse_mounted(str(mnt)):
            subprocess.run([H.colabfs_bin(), "umount", str(mnt)], timeout=60)
        if H.is_fuse_mounted(str(mnt)):
            subprocess.run(["umount", "-l", str(mnt)], timeout=30)
        shutil.rmtree(content / ".colabfs-cache", ignore_errors=True)
