#!/bin/sh
# Runs the Python tests of the GPU loader (tests/gpu/*.py) with pytest, on the
# library and test helper of this build.  Exit 77 (skip) without a Python
# that has pytest and numpy.  Needs COLABFS_BIN (the build's colabfs, to find
# the build folder) and top_srcdir, as make check sets them.
set -u
build=$(dirname "${COLABFS_BIN:?}")
src=${top_srcdir:-.}
py=""
for p in /usr/bin/python3 python3; do
	if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import pytest, numpy' 2>/dev/null; then
		py=$p
		break
	fi
done
if [ -z "$py" ]; then
	echo "SKIP: no python3 with pytest and numpy (apt-get install python3-pytest python3-numpy)"
	exit 77
fi
export COLABFS_GPU_LIB="$build/libcolabfs-gpu.so"
export COLABFS_TEST_MKCACHE="$build/tests/unit/test_stage"
export PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}"
exec "$py" -m pytest -q -p no:cacheprovider "$src/tests/gpu"
