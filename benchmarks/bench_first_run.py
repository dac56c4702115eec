"""The first run: ``python -m daskelastic demo`` with numba's cache empty, then warm.

Each cold run gets a fresh user cache directory (``XDG_CACHE_HOME``) and no
``NUMBA_CACHE_DIR``, as a fresh install has; the warm run after it reuses that
directory.  With ``--tree DIR`` the demo runs the ``daskelastic`` package of
another source tree instead (``git archive <commit> daskelastic | tar -x -C DIR``),
copied afresh for each cold run so that caches it writes beside its sources start
empty too.  Prints, per run, the wall time of the whole command, the fit's own
time (its ``fit: ... in X s`` line) and the machine's load average before it::

    python benchmarks/bench_first_run.py --runs 3
    python benchmarks/bench_first_run.py --runs 3 --tree /tmp/before
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_demo(env, cwd):
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "daskelastic", "demo"], env=env, cwd=cwd,
                         capture_output=True, text=True, timeout=600, check=True)
    wall = time.perf_counter() - t0
    fit = float(re.search(r"^fit: .* in ([0-9.]+)s$", out.stdout, re.M).group(1))
    notices = out.stderr.count("compiling its numba kernels")
    return wall, fit, notices


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tree", type=Path, default=None,
                        help="a source tree holding daskelastic/ to run instead")
    args = parser.parse_args(argv)
    print("| run | cache | load avg | command (s) | fit (s) | notices |")
    print("|---|---|---|---|---|---|")
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory() as tmp:
            env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
            env["XDG_CACHE_HOME"] = str(Path(tmp, "cache"))
            if args.tree is not None:
                shutil.copytree(args.tree / "daskelastic", Path(tmp, "tree", "daskelastic"))
                env["PYTHONPATH"] = str(Path(tmp, "tree"))
            for cache in ("cold", "warm"):
                load = os.getloadavg()[0]
                wall, fit, notices = run_demo(env, cwd=tmp)
                print(f"| {run} | {cache} | {load:.1f} | {wall:.1f} | {fit:.1f} | {notices} |",
                      flush=True)


if __name__ == "__main__":
    main()
