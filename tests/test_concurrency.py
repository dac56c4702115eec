"""Fits running at once: from several threads on one client, in searches, after pickling.

A fit passes its client to every call (``client.submit``, ``client.compute``,
actor calls) and never makes it current through ``dask.config``, which is
global to the process: N fits from N threads each reach their own optimum and
leave the process's Dask configuration exactly as it was.
"""

import copy
import pickle
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import dask
import dask.array as da
import joblib
import numpy as np
import pytest
from distributed import Client
from sklearn.model_selection import GridSearchCV, cross_validate

import daskelastic as de
from daskelastic.session import current_client

from cluster_checks import fit_leftovers, local_cluster

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

CS = [0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]


@pytest.fixture(scope="module")
def optima(flights):
    """The primal optimum of each C, in this process."""
    X, y = flights
    return {C: de.LogisticRegression(
        penalize_intercept=True, C=C, tol=1e-10, max_iter=10000, backend="inprocess")
            .fit(X, y).history_[-1]["primal"] for C in CS}


@pytest.fixture(scope="module")
def shared_client():
    """A client of a 2-worker cluster that is not the process's default client."""
    with local_cluster(2) as cluster, Client(cluster, set_as_default=False) as client:
        yield client


def _config():
    return copy.deepcopy(dask.config.config)


@pytest.mark.parametrize("n_fits", [2, 4, 8])
def test_fits_from_many_threads_on_one_client_reach_their_optima(flights, optima,
                                                                 shared_client, n_fits):
    X, y = flights
    before = _config()
    start = threading.Barrier(n_fits)

    def fit(C):
        start.wait()
        return de.LogisticRegression(penalize_intercept=True, C=C, tol=1e-7, max_iter=5000,
                                     client=shared_client).fit(X, y)

    with ThreadPoolExecutor(n_fits) as pool:
        fitted = list(pool.map(fit, CS[:n_fits]))
    assert _config() == before
    # the local schedulers still serve dask collections computed without a client
    assert int(da.ones(10, chunks=5).sum().compute()) == 10
    for C, clf in zip(CS, fitted):
        assert clf.history_[0]["n_workers"] == 2    # on the cluster, not in-process
        assert clf.history_[-1]["primal"] - optima[C] <= 1e-6 * abs(optima[C])
    assert fit_leftovers(shared_client) == {"state": {}, "keys": [], "records": []}


def test_a_threaded_grid_search_fits_on_the_cluster_and_leaves_the_config(flights, optima,
                                                                         shared_client):
    X, y = flights
    before = _config()
    search = GridSearchCV(de.LogisticRegression(
        penalize_intercept=True, tol=1e-7, max_iter=5000, client=shared_client),
                          {"C": CS[:4]}, cv=2, n_jobs=2)
    with joblib.parallel_backend("threading", n_jobs=2):
        search.fit(X, y)
    assert _config() == before
    assert int(da.ones(10, chunks=5).sum().compute()) == 10
    assert search.best_estimator_.history_[0]["n_workers"] == 2
    assert search.best_estimator_.history_[-1]["primal"] - optima[search.best_params_["C"]] \
        <= 1e-6 * abs(optima[search.best_params_["C"]])


def test_an_estimator_unpickled_without_its_client_says_so_once(flights, shared_client):
    X, y = flights
    assert current_client() is None   # as in a joblib worker process
    clf = de.LogisticRegression(penalize_intercept=True, client=shared_client, tol=1e-4)
    copy_ = pickle.loads(pickle.dumps(clf))
    assert copy_.client is None
    with pytest.warns(UserWarning, match="lost its Dask client") as record:
        copy_.fit(X, y)
    assert sum("lost its Dask client" in str(w.message) for w in record) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        copy_.fit(X, y)     # said once, for this estimator
    # a fresh clone of the unpickled copy carries no client and no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        de.LogisticRegression(**copy_.get_params()).fit(X, y)


def test_an_unpickled_estimator_uses_the_process_default_client(flights, client):
    """With a default client in the process (``client`` is one), nothing is lost."""
    X, y = flights
    copy_ = pickle.loads(pickle.dumps(de.LogisticRegression(
        penalize_intercept=True, client=client, backend="dask")))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        copy_.fit(X, y)
    assert copy_.history_[0]["n_workers"] == len(client.ncores())


def test_a_search_under_joblibs_dask_backend_fits_each_candidate_on_a_worker(flights, client):
    """``parallel_backend("dask")`` runs the candidates' fits as tasks on the
    workers; each fits in its worker's process, as the docs say, with the scores
    of a search run here."""
    X, y = flights
    est = de.LogisticRegression(penalize_intercept=True, tol=1e-8, max_iter=5000)
    with joblib.parallel_backend("dask"):
        there = cross_validate(est, X, y, cv=3, return_estimator=True)
    here = cross_validate(est, X, y, cv=3, n_jobs=1)
    np.testing.assert_allclose(there["test_score"], here["test_score"])
    assert all(e.history_[0]["worker_rows"].keys() == {"local-0"} for e in there["estimator"])
