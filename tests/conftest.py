"""Shared fixtures: a real LocalCluster per session, small real tables."""

import logging
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import ast_guard  # noqa: E402

# CPython 3.11.7's ast.parse can fail when it races a garbage collection (see
# ast_guard); pytest parses the test modules and its reports with it
ast_guard.install()

# a helper module, not tests (collecting its doctests would import it twice)
collect_ignore = ["ast_guard.py"]


@pytest.fixture(scope="session")
def cluster():
    """A real LocalCluster of two single-threaded worker processes."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR) as c:
        yield c


@pytest.fixture
def client(cluster):
    """A client of :func:`cluster`, the current client while the test runs."""
    from distributed import Client

    with Client(cluster) as c:
        yield c


@pytest.fixture(scope="session")
def flights_small():
    """8,000 rows of the real NYC flights table, one-hot CSR (7 nnz per row)."""
    from daskelastic.datasets import load_flights

    X, y, _ = load_flights(n_rows=8000)
    keep = np.asarray(X.sum(axis=0)).ravel() > 0
    return X[:, keep].tocsr(), y


def first_flights(flights_small, n_rows, min_count=20):
    """The first ``n_rows`` of ``flights_small``, the columns seen ``min_count`` times in them."""
    X, y = flights_small
    X = X[:n_rows]
    keep = np.asarray((X != 0).sum(axis=0)).ravel() >= min_count
    return X[:, keep].tocsr(), y[:n_rows]


@pytest.fixture(scope="session")
def flights_6k(flights_small):
    """6,000 real flights, one-hot CSR, the columns seen at least 20 times."""
    return first_flights(flights_small, 6000)


@pytest.fixture(scope="session")
def flights_6k_optimum(flights_6k):
    """The primal optimum of logistic regression (C = 0.5, a penalised intercept: the
    machinery tests that compare with it fit liblinear's problem, in a tenth of the
    rounds of the free one) on flights_6k."""
    import daskelastic as de

    ref = de.LogisticRegression(
        penalize_intercept=True, C=0.5, tol=1e-10, max_iter=5000, backend="inprocess")
    return ref.fit(*flights_6k).history_[-1]["primal"]


@pytest.fixture(scope="session")
def flights(flights_small):
    """3,000 real flights, one-hot (the columns seen at least once)."""
    return first_flights(flights_small, 3000, min_count=1)


@pytest.fixture(scope="session")
def fertility_small():
    """6,000 rows of the real AER Fertility table, dense (7 columns)."""
    from daskelastic.datasets import load_fertility

    X, y, _ = load_fertility()
    return np.ascontiguousarray(X[:6000]), y[:6000]


@pytest.fixture(scope="session")
def diamonds_small():
    """3,000 real diamonds: standardised and one-hot columns, log price."""
    from daskelastic.datasets import load_diamonds

    X, y, _ = load_diamonds()
    return np.ascontiguousarray(X[:3000]), y[:3000]
