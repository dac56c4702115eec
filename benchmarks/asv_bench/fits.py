"""Whole fits to ``tol=1e-3``: in this process, and on a two-worker LocalCluster.

``LogisticRegression(C=1, tol=1e-3)`` on the first 20,000 flights (one-hot
CSR), from the estimator's ``fit`` to its return: set-up, rounds until the
certified relative duality gap is at most 1e-3, and the certificate.  One
warm-up fit in ``setup`` compiles the kernels (on the cluster, in the
workers: they share numba's cache directory with this process).
"""

import warnings

import numpy as np

from ._data import flights

TOL = 1e-3


def logistic(**params):
    from daskelastic import LogisticRegression

    return LogisticRegression(C=1.0, tol=TOL, random_state=0, **params)


class FitInProcess:
    """Seconds of a fit with ``backend="inprocess"``, and its rounds."""

    def setup(self):
        self.X, self.y = flights()
        self.model = logistic(backend="inprocess").fit(self.X, self.y)

    def time_fit(self):
        logistic(backend="inprocess").fit(self.X, self.y)

    def track_rounds(self):
        return int(np.max(self.model.n_iter_))

    track_rounds.unit = "rounds"


class FitLocalCluster:
    """Seconds of a fit on a ``LocalCluster`` of two single-threaded worker processes."""

    number = 1
    repeat = (2, 5, 30.0)
    warmup_time = 0.0
    timeout = 300.0

    def setup(self):
        from distributed import Client, LocalCluster

        self.X, self.y = flights()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                        host="127.0.0.1", dashboard_address=None)
        self.client = Client(self.cluster)
        logistic(backend="dask", client=self.client).fit(self.X, self.y)

    def teardown(self):
        self.client.close()
        self.cluster.close()

    def time_fit(self):
        logistic(backend="dask", client=self.client).fit(self.X, self.y)


class RoundsToTol:
    """Rounds of an in-process fit on two workers to ``tol=1e-4``, per loss and acceleration.

    The rounds do not depend on the machine: a change in them is a change of
    the acceleration rule or the σ′ schedule (``benchmarks/bench_acceleration.py``
    runs the whole grid of tables, ``C`` and workers).  A fit that did not get
    there in ``MAX_ITER`` rounds counts as ``MAX_ITER + 1``, as in that script.
    """

    params = (["logistic", "squared_hinge", "hinge"], ["auto", "none"])
    param_names = ["loss", "acceleration"]
    MAX_ITER = 600

    def setup(self, loss, acceleration):
        self.X, self.y = flights()

    def track_rounds(self, loss, acceleration):
        from sklearn.exceptions import ConvergenceWarning

        from daskelastic import LinearSVC, LogisticRegression

        params = dict(C=1.0, fit_intercept=False, tol=1e-4, max_iter=self.MAX_ITER,
                      backend="inprocess", n_workers=2, random_state=0,
                      acceleration=None if acceleration == "none" else acceleration)
        model = (LogisticRegression(**params) if loss == "logistic"
                 else LinearSVC(loss=loss, **params))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(self.X, self.y)
        history = model.history_
        return len(history) if history[-1]["duality_gap"] <= 1e-4 else self.MAX_ITER + 1

    track_rounds.unit = "rounds"
