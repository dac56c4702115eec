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
