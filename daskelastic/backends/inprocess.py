"""Workers in the driver's own process: one :class:`ChunkSolver` each.

Used for small fits (no cluster to start) and as the reference the Dask
backend is tested against.  Workers run one after the other, when the round
starts: all results arrive together, nothing is ever late, and an injected
slowdown is ignored (use a real or simulated cluster to study stragglers).
"""

import numpy as np

from ..driver import Backend
from ..placement import assign_chunks
from ..solvers import ChunkSolver

__all__ = ["InProcessBackend"]


class InProcessBackend(Backend):
    """Run ``n_workers`` local solvers in this process, one after the other.

    Parameters
    ----------
    problem : daskelastic.driver.Problem
    chunks : list of daskelastic.placement.Chunk
    n_workers : int
        Number of (sequential) workers; chunks are balanced over them.
    """

    def __init__(self, problem, chunks, n_workers=1):
        self.problem = problem
        names = [f"local-{k}" for k in range(n_workers)]
        plan = assign_chunks({c.chunk_id: c.n_rows for c in chunks}, names)
        by_id = {c.chunk_id: c for c in chunks}
        self.solvers = {}
        for name in names:
            solver = ChunkSolver(problem.loss, problem.n_targets,
                                 problem.intercept_scaling)
            for cid in plan[name]:
                c = by_id[cid]
                solver.add_chunk(cid, c.X, c.Y, c.sample_weight)
            if plan[name]:
                self.solvers[name] = solver
        self._arrived = {}

    def workers(self):
        return list(self.solvers)

    def _apply(self, name, settlement):
        round_id, gamma = settlement
        if gamma is None:
            self.solvers[name].discard(round_id)
        else:
            self.solvers[name].commit(round_id, gamma)

    def start_round(self, round_id, w, settlements, *, inv_lam_n, sigma, steps, seed,
                    slowdowns=None):
        results = {}
        for name, solver in self.solvers.items():
            if name in settlements:
                self._apply(name, settlements[name])
            results[name] = solver.solve(w, round_id=round_id, inv_lam_n=inv_lam_n,
                                         sigma=sigma, steps=steps, seed=seed)
        self._arrived = results

    def wait_results(self, timeout=None):
        results, self._arrived = self._arrived, {}
        return results

    def stop_round(self, round_id, workers):
        """Nothing to stop: every in-process worker finished when the round started."""

    def row_sq_norm_sum(self):
        return sum(s.row_sq_norm_sum() for s in self.solvers.values())

    def settle(self, settlements):
        for name, s in settlements.items():
            self._apply(name, s)

    def alpha_sum(self):
        total = np.zeros((self.problem.n_features + 1, self.problem.n_targets))
        for solver in self.solvers.values():
            total += solver.weighted_alpha_sum(self.problem.n_features)
        return total

    def gather_alpha(self):
        """``{chunk_id: α}`` over all workers (copies)."""
        return {cid: a for s in self.solvers.values() for cid, a in s.alpha_by_chunk().items()}

    def describe(self):
        return {name: {"chunks": s.chunk_ids, "rows": s.n_rows}
                for name, s in self.solvers.items()}
