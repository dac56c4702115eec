"""The driver's cost of a round when the workers have next to nothing to do.

An ``InProcessBackend`` round on 400 rows of the Fertility table cut in four
chunks over two workers: the local epochs take microseconds, so the time is
the round's own overhead (the plan, dispatch and collection of results, the
settling of the duals), the fixed cost every round of a fit pays.
"""

import numpy as np

from ._data import fertility


class RoundOverhead:
    """Seconds of one in-process round and its settling, on two workers."""

    def setup(self):
        from daskelastic.backends import InProcessBackend
        from daskelastic.driver import Problem
        from daskelastic.losses import loss_code
        from daskelastic.placement import make_chunks, split_rows

        X, Y = fertility(400)
        n, d = X.shape
        self.problem = Problem(loss=loss_code("squared_hinge"), lam=1e-2, n_samples=n,
                               n_features=d, n_targets=1, intercept_scaling=0.0)
        chunks = make_chunks(X, Y, np.ones(n), split_rows(n, n_chunks=4))
        self.backend = InProcessBackend(self.problem, chunks, n_workers=2)
        self.w = self.problem.zeros()
        self.round_id = 0
        for _ in range(2):      # compiles the kernels
            self.time_round()

    def time_round(self):
        results = self.backend.run_round(self.round_id, self.w, {},
                                         inv_lam_n=self.problem.inv_lam_n, sigma=2.0,
                                         steps=None, seed=0)
        self.backend.settle({worker: (self.round_id, 1.0) for worker in results})
        self.w = self.w + sum(r.dw for r in results.values())
        self.round_id += 1
