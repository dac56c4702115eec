"""The first run: where the kernels are cached, the notice while they compile, a missing main guard.

Each test runs a fresh interpreter (numba picks a kernel's cache folder when
the kernel is defined, at import), with its own user cache directory.
"""

import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import daskelastic
from daskelastic import session

PACKAGE_DIR = Path(daskelastic.__file__).resolve().parent
NOTICE = "daskelastic: compiling its numba kernels"

# a small kernel of its own file: compiles in about a second
COMPILE_ONE = """
from daskelastic._kernel_cache import kernel_cache_dir
from daskelastic.losses import _xlogx
_xlogx(0.5)
print(kernel_cache_dir())
"""


def run_python(code, tmp_path, *, numba_cache_dir=None, timeout=120):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "user-cache")
    if numba_cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = str(numba_cache_dir)
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=timeout)


def cached_files(folder):
    return sorted(p.name for p in Path(folder).rglob("*.nb[ic]"))


def test_kernels_are_cached_in_the_user_cache_directory_not_the_package(tmp_path):
    out = run_python(COMPILE_ONE, tmp_path)
    assert out.returncode == 0, out.stderr
    folder = Path(out.stdout.strip())
    assert folder.is_relative_to(tmp_path / "user-cache" / "daskelastic" / "numba")
    assert not folder.is_relative_to(PACKAGE_DIR)
    assert any(name.startswith("losses._xlogx") for name in cached_files(folder))


def test_an_explicit_numba_cache_dir_wins(tmp_path):
    out = run_python(COMPILE_ONE, tmp_path, numba_cache_dir=tmp_path / "explicit")
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()) == tmp_path / "explicit"
    assert any(name.startswith("losses._xlogx") for name in cached_files(tmp_path / "explicit"))
    assert cached_files(tmp_path / "user-cache") == []


def test_a_spawned_process_finds_the_same_cache_folder(tmp_path):
    # a Dask worker started by a nanny is such a process
    code = """
    import multiprocessing
    from daskelastic._kernel_cache import kernel_cache_dir

    if __name__ == "__main__":
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            print(kernel_cache_dir() == pool.apply(kernel_cache_dir))
    """
    out = run_python(code, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_one_notice_line_while_kernels_compile_and_none_once_cached(tmp_path):
    code = COMPILE_ONE + "from daskelastic.losses import _log1pexp\n_log1pexp(0.5)\n"
    first = run_python(code, tmp_path)
    assert first.returncode == 0, first.stderr
    lines = [line for line in first.stderr.splitlines() if NOTICE in line]
    assert len(lines) == 1
    assert first.stdout.strip() in lines[0]   # it says where
    second = run_python(code, tmp_path)
    assert second.returncode == 0, second.stderr
    assert NOTICE not in second.stderr


UNGUARDED = """
import dask.array as da
import numpy as np
from daskelastic import LogisticRegression

X = da.from_array(np.random.default_rng(0).normal(size=(100, 3)), chunks=50)
y = da.from_array(np.tile([0, 1], 50), chunks=50)
LogisticRegression(solver="cocoa").fit(X, y)
"""
# (CoCoA+'s rounds start a LocalCluster; the Newton solver sums a narrow table's
# dask blocks with dask's own scheduler, which needs no guard)


def test_a_script_without_a_main_guard_gets_one_error_naming_the_fix(tmp_path):
    out = run_python(UNGUARDED, tmp_path, timeout=60)
    assert out.returncode == 1
    assert "RuntimeError" in out.stderr
    assert 'if __name__ == "__main__":' in out.stderr
    assert "Nanny failed" not in out.stderr and "bootstrapping" not in out.stderr
    assert out.stderr.count("Traceback") == 1   # the fit's own, no worker's


def test_the_main_guard_check_passes_inside_a_guard_and_fails_outside(tmp_path):
    code = """
    from daskelastic.session import _check_main_guard

    def fit():
        _check_main_guard()

    if __name__ == "__main__":
        fit()
        print("guarded: ok")
    fit()
    """
    out = run_python(code, tmp_path, timeout=60)
    assert "guarded: ok" in out.stdout
    assert out.returncode == 1
    assert 'if __name__ == "__main__":' in out.stderr


def test_a_worker_process_running_the_main_script_again_gets_the_same_error(monkeypatch):
    # what multiprocessing's spawn sets while a child runs the parent's main module
    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    with pytest.raises(RuntimeError, match='if __name__ == "__main__":'):
        session._check_main_guard()


def test_no_main_guard_error_for_an_interactive_main(monkeypatch):
    # python -c, a REPL or a notebook: the main module has no file to run again
    monkeypatch.delattr(sys.modules["__main__"], "__file__", raising=False)
    assert session._unguarded_main_line() is None
    session._check_main_guard()
