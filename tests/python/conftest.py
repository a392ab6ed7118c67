"""The pure tests of the colabfs Python package (no mount, no root): they run
from a built tree (`python3 -m pytest tests/python`) and through
tests/python/run.sh in `make check`."""
import os
import sys

_top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_top, "python"))
