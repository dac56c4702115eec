"""The full NYC flights table (327,346 rows, one-hot CSR) on LocalClusters of 2 and 4 workers.

As CSR (4,198 columns) from scipy.sparse and a sparse dask array; dense (the same
rows without the aircraft's 4,036 tail-number columns: 162 columns, 0.4 GB) from
numpy, a dask array and a dask dataframe.

Slow: run with ``nox -s slow`` (or ``pytest -m slow``).
"""

import logging
import warnings

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression as SkLogistic
from sklearn.svm import LinearSVC as SkLinearSVC

import daskelastic as de
from daskelastic.objective import lambda_from_C, primal_objective

pytestmark = pytest.mark.slow

C = 0.1


@pytest.fixture(scope="module")
def flights():
    from daskelastic.datasets import load_flights

    X, y, _ = load_flights()
    return X, y


@pytest.fixture(scope="module")
def flights_dense():
    """Every flight, one-hot without the tail numbers: CSR, dense, labels, names."""
    from daskelastic.datasets import load_flights

    X, y, names = load_flights()
    keep = np.array([not n.startswith("tailnum=") for n in names])
    Xs = X[:, np.flatnonzero(keep)].tocsr()
    return Xs, Xs.toarray(), y, [n for n, k in zip(names, keep) if k]


@pytest.fixture(scope="module", params=[2, 4], ids=["2-workers", "4-workers"])
def big_client(request):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=request.param, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        yield client


def _primal(loss, X, y, coef):
    n = X.shape[0]
    Y = np.where(y == 1, 1.0, -1.0)[:, None]
    return primal_objective(loss, X, Y, np.ones(n), np.ravel(coef)[:, None],
                            lambda_from_C(C, n))


REFERENCES = {
    "logistic": lambda: SkLogistic(C=C, solver="liblinear", fit_intercept=False, tol=1e-8,
                                   max_iter=1000),
    "squared_hinge": lambda: SkLinearSVC(C=C, loss="squared_hinge", fit_intercept=False,
                                         tol=1e-8, max_iter=20_000),
    "hinge": lambda: SkLinearSVC(C=C, loss="hinge", fit_intercept=False, tol=1e-8,
                                 max_iter=20_000),
}


def _ours(loss, client):
    if loss == "logistic":
        return de.LogisticRegression(C=C, fit_intercept=False, tol=1e-4, max_iter=3000,
                                     client=client)
    return de.LinearSVC(C=C, loss=loss, fit_intercept=False, tol=1e-4, max_iter=3000,
                        client=client)


def _optimum(X, y):
    cache = {}

    def get(loss):
        if loss not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                cache[loss] = _primal(loss, X, y, REFERENCES[loss]().fit(X, y).coef_)
        return cache[loss]
    return get


def _check_fit(clf, loss, X, y, p_ref, n_workers):
    """A fit on all the workers, certified to 1e-4, within 1e-4 of liblinear's optimum
    ``p_ref`` (and never better than our certificate allows)."""
    p_ours = _primal(loss, X, y, clf.coef_)
    assert clf.history_[-1]["n_workers"] == n_workers
    assert clf.duality_gap_ <= 1e-4
    assert abs(p_ours - p_ref) / p_ref <= 1e-4
    assert p_ref >= clf.history_[-1]["dual"] * (1 - 1e-9)


@pytest.fixture(scope="module")
def optimum(flights):
    return _optimum(*flights)


@pytest.fixture(scope="module")
def optimum_dense(flights_dense):
    Xs, _, y, _ = flights_dense
    return _optimum(Xs, y)    # liblinear on the CSR form of the same table


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge", "hinge"])
@pytest.mark.parametrize("kind", ["scipy.sparse", "dask sparse array"])
def test_full_table_reaches_the_liblinear_optimum(loss, kind, flights, big_client, optimum):
    X, y = flights
    n_workers = len(big_client.scheduler_info()["workers"])
    if kind == "dask sparse array":
        rows = -(-X.shape[0] // (4 * n_workers))
        Xin, yin = da.from_array(X, chunks=(rows, -1), asarray=False), \
            da.from_array(y, chunks=rows)
    else:
        Xin, yin = X, y
    _check_fit(_ours(loss, big_client).fit(Xin, yin), loss, X, y, optimum(loss),
               n_workers)


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge", "hinge"])
@pytest.mark.parametrize("kind", ["numpy", "dask array", "dask dataframe"])
def test_full_table_dense_reaches_the_liblinear_optimum(loss, kind, flights_dense,
                                                        big_client, optimum_dense):
    Xs, X, y, names = flights_dense
    n_workers = len(big_client.scheduler_info()["workers"])
    rows = -(-X.shape[0] // (4 * n_workers))
    if kind == "dask array":
        Xin, yin = da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)
    elif kind == "dask dataframe":
        Xin = dd.from_pandas(pd.DataFrame(X, columns=names), chunksize=rows)
        yin = dd.from_pandas(pd.Series(y, name="late"), chunksize=rows)
    else:
        Xin, yin = X, y
    _check_fit(_ours(loss, big_client).fit(Xin, yin), loss, Xs, y, optimum_dense(loss),
               n_workers)
