#!/bin/sh
# Runs the pure tests of the colabfs Python package (tests/python/*.py) with
# pytest; exit 77 (skip) without a Python that has pytest.  make check sets
# top_srcdir and COLABFS_BIN (the tests that parse `colabfs --help` use it).
set -u
src=${top_srcdir:-.}
. "$src/tests/find_python.sh"
find_python pytest || exit 77
exec "$py" -m pytest -q -p no:cacheprovider "$src/tests/python"
