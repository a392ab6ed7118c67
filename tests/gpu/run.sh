#!/bin/sh
# Runs the Python tests of the GPU loader (tests/gpu/*.py) with pytest, on the
# library and test helper of this build.  Exit 77 (skip) without a Python
# that has pytest and numpy.  Needs COLABFS_BIN (the build's colabfs, to find
# the build folder) and top_srcdir, as make check sets them.
set -u
build=$(dirname "${COLABFS_BIN:?}")
src=${top_srcdir:-.}
. "$src/tests/find_python.sh"
find_python "pytest, numpy" || exit 77
export COLABFS_GPU_LIB="$build/libcolabfs-gpu.so"
export COLABFS_TEST_MKCACHE="$build/tests/unit/test_stage"
export PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}"
exec "$py" -m pytest -q -p no:cacheprovider "$src/tests/gpu"
