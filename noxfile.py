"""Automation: ``nox -s tests`` (default), ``lint``, ``typecheck``, ``nojit``, ``slow``,
``docs``, ``bench``."""

import hashlib
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
nox.options.default_venv_backend = "venv"

PYTHON = ["3.11"]


def _numba_env(**env):
    """``env`` plus a numba cache directory of its own for the package's current sources.

    numba checks a cached kernel against the file that defines it only: a kernel
    in ``solvers/_kernels.py`` that inlines a step from ``losses.py`` would load stale
    after an edit of ``losses.py`` alone.  A cache per version of the sources
    cannot.
    """
    digest = hashlib.sha256()
    for path in sorted(Path("daskelastic").rglob("*.py")):
        digest.update(path.as_posix().encode() + b"\0" + path.read_bytes())
    cache = Path(".nox", "numba-cache", digest.hexdigest()[:16]).resolve()
    return {"NUMBA_CACHE_DIR": str(cache), **env}


@nox.session(python=PYTHON)
def tests(session):
    """The default test suite (slow tests excluded): real LocalCluster, real kernels.

    Two pytest-xdist workers, each running whole files (``--dist loadfile``):
    a cold numba cache makes much of the run single-threaded compiling, which
    the second core takes half of.  ``nox -s tests -- -n 0`` runs it in one
    process.
    """
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "not slow", "-n", "2", "--dist", "loadfile", *session.posargs,
                env=_numba_env())


@nox.session(python=PYTHON)
def nojit(session):
    """The kernel tests with NUMBA_DISABLE_JIT=1, so the kernel bodies are covered."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "not slow", "tests/test_losses.py", "tests/test_solvers.py",
                "tests/test_objective.py", "tests/test_vmath.py",
                "tests/test_newton.py::test_the_pointwise_kernel_matches_its_numpy_twin",
                *session.posargs,
                env=_numba_env(NUMBA_DISABLE_JIT="1"))


@nox.session(python=PYTHON)
def slow(session):
    """The slow tests: real tables of 250k+ rows on LocalClusters, and the fault matrix."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "slow", *session.posargs, env=_numba_env())


@nox.session(python=PYTHON)
def lint(session):
    """ruff over the package, tests, benchmarks and examples."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", "daskelastic", "tests", "benchmarks", "examples",
                "noxfile.py", "docs/conf.py")


@nox.session(python=PYTHON)
def typecheck(session):
    """mypy over the modules with type hints (``[tool.mypy]`` in pyproject.toml)."""
    session.install("-e", ".[typecheck]")
    session.run("mypy", *session.posargs)


@nox.session(python=PYTHON)
def docs(session):
    """Build the Sphinx documentation, warnings as errors."""
    session.install("-e", ".[docs]")
    session.run("sphinx-build", "-W", "--keep-going", "-n", "-b", "html", "docs",
                "docs/_build/html")


@nox.session(python=PYTHON)
def bench(session):
    """The benchmarks against scikit-learn, dask-ml and snapml (pass --quick for a smoke run)."""
    session.install("-e", ".[bench]")
    session.run("python", "benchmarks/bench_local_solver.py", *session.posargs,
                env=_numba_env())
    session.run("python", "benchmarks/bench_distributed.py", *session.posargs,
                env=_numba_env())


@nox.session(python=PYTHON)
def asv(session):
    """The asv suite (``benchmarks/asv_bench``), each benchmark once: a check that all run.

    Pass asv's own options after ``--``, e.g. ``nox -s asv -- --bench studies``.
    """
    session.install("-e", ".[bench]")
    session.run("asv", "machine", "--yes")
    session.run("asv", "run", "--python=same", "--quick", "--show-stderr", "--dry-run",
                *session.posargs, env=_numba_env())
