"""Shared fixture: a cache folder and a stand-in mount built by the C test
helper (tests/unit/test_stage --make-cache), with the files' bytes."""
import os
import subprocess
import sys

import pytest

# Run straight from a built tree too (`python3 -m pytest tests/gpu`), not only
# through tests/gpu/run.sh: the package, the library and the helper of this tree.
_top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_top, "python"))
if not os.environ.get("COLABFS_GPU_LIB") and os.path.exists(os.path.join(_top, "libcolabfs-gpu.so")):
    os.environ["COLABFS_GPU_LIB"] = os.path.join(_top, "libcolabfs-gpu.so")
if not os.environ.get("COLABFS_TEST_MKCACHE") and \
        os.path.exists(os.path.join(_top, "tests", "unit", "test_stage")):
    os.environ["COLABFS_TEST_MKCACHE"] = os.path.join(_top, "tests", "unit", "test_stage")

# Must agree with tests/unit/test_stage.c (files[] and gen_bytes).
BS = 64 << 10
FILES = [("a.bin", 3 * BS + 1234), ("sub/b.bin", 5000), ("sub/c.bin", 2 * BS + 77),
         ("sub/d.bin", BS), ("doc.txt", 3000), ("empty.bin", 0)]


@pytest.fixture(scope="session")
def fake_mount(tmp_path_factory):
    helper = os.environ.get("COLABFS_TEST_MKCACHE")
    if not helper or not os.path.exists(helper):
        pytest.skip("COLABFS_TEST_MKCACHE (tests/unit/test_stage) not set; run through make check")
    base = tmp_path_factory.mktemp("colabfs")
    subprocess.run([helper, "--make-cache", str(base)], check=True)
    mnt = os.path.join(base, "mnt")
    data = {}
    for rel, size in FILES:
        with open(os.path.join(mnt, rel), "rb") as f:
            data[rel] = f.read()
        assert len(data[rel]) == size
    return {"mnt": mnt, "cache": os.path.join(base, "cache"), "data": data}
