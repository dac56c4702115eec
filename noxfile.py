"""Automation: ``nox -s tests`` (default), ``lint``, ``nojit``, ``slow``, ``docs``, ``bench``."""

import nox

nox.options.sessions = ["tests"]
nox.options.default_venv_backend = "venv"

PYTHON = ["3.11"]


@nox.session(python=PYTHON)
def tests(session):
    """The default test suite (slow tests excluded): real LocalCluster, real kernels."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "not slow", *session.posargs)


@nox.session(python=PYTHON)
def nojit(session):
    """The kernel tests with NUMBA_DISABLE_JIT=1, so the kernel bodies are covered."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "not slow", "tests/test_losses.py", "tests/test_solvers.py",
                "tests/test_objective.py", *session.posargs,
                env={"NUMBA_DISABLE_JIT": "1"})


@nox.session(python=PYTHON)
def slow(session):
    """The slow tests: real tables of 250k+ rows on LocalClusters of 2 and 4 workers."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "slow", *session.posargs)


@nox.session(python=PYTHON)
def lint(session):
    """ruff over the package, tests, benchmarks and examples."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", "daskelastic", "tests", "benchmarks", "examples",
                "noxfile.py", "docs/conf.py")


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
    session.run("python", "benchmarks/bench_local_solver.py", *session.posargs)
    session.run("python", "benchmarks/bench_distributed.py", *session.posargs)
