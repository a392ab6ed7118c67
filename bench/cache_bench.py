#!/usr/bin/python3
"""Block cache benchmark (kept for its old command line): workloads 1, 2 and 6 of bench/run.py.

    /usr/bin/python3 bench/cache_bench.py [--size-mib 256] [--seconds 5] [run.py options]

cold sequential read, cached re-reads (page cache and daemon), 4 KiB random reads (page cache and
O_DIRECT) of one file, each next to its reference measured in the same run. See bench/README.md.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=5)
    args, rest = ap.parse_known_args()
    sys.exit(run.main(["--only", "1,2,6", "--big-mib", str(args.size_mib),
                       "--rand-seconds", str(args.seconds)] + rest))
