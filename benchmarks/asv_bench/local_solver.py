"""One local epoch of the numba SDCA kernels, per loss.

The setting of ``benchmarks/bench_epochs.py``: one worker's
``ChunkSolver.solve`` over all the rows it holds (a full epoch in the
solver's visiting order, with the gap terms), σ′ = 1, C = 1, each timed
epoch committed so the next starts where it ended; two committed epochs in
``setup`` compile the kernels and leave the first, costlier Newton steps of
the logistic loss out of the timing.
"""

import numpy as np

from ._data import flights

#: the losses whose kernels are timed
LOSSES = ["logistic", "hinge", "squared_hinge", "squared"]


class LocalEpoch:
    """Seconds of one epoch on the first 20,000 flights (one-hot CSR)."""

    params = LOSSES
    param_names = ["loss"]

    def setup(self, loss):
        from daskelastic.losses import loss_code
        from daskelastic.solvers import ChunkSolver

        X, y = flights()
        Y = np.where(y == 1, 1.0, -1.0)[:, None]
        self.solver = ChunkSolver(loss_code(loss), 1, 0.0)
        self.solver.add_chunk(0, X, Y, np.ones(X.shape[0]))
        self.w = np.zeros((X.shape[1] + 1, 1))
        self.round_id = 0
        for _ in range(2):
            self.time_epoch(loss)

    def time_epoch(self, loss):
        result = self.solver.solve(self.w, round_id=self.round_id, inv_lam_n=1.0, sigma=1.0)
        self.w = self.w + result.dw
        self.solver.commit(self.round_id)
        self.round_id += 1
