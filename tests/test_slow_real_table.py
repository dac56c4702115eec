"""The full NYC flights table (327,346 rows, one-hot CSR) on LocalClusters of 2 and 4 workers.

Slow: run with ``nox -s slow`` (or ``pytest -m slow``).
"""

import logging
import warnings

import dask.array as da
import numpy as np
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


@pytest.fixture(scope="module")
def optimum(flights):
    cache = {}

    def get(loss):
        if loss not in cache:
            X, y = flights
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                cache[loss] = _primal(loss, X, y, REFERENCES[loss]().fit(X, y).coef_)
        return cache[loss]
    return get


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
    clf = _ours(loss, big_client).fit(Xin, yin)
    p_ours = _primal(loss, X, y, clf.coef_)
    p_ref = optimum(loss)
    assert clf.history_[-1]["n_workers"] == n_workers
    assert clf.duality_gap_ <= 1e-4
    # within 1e-4 of liblinear's optimum (and never better than our certificate allows)
    assert abs(p_ours - p_ref) / p_ref <= 1e-4
    assert p_ref >= clf.history_[-1]["dual"] * (1 - 1e-9)
