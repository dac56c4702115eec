"""Workers in the driver's own process: one :class:`ChunkSolver` each.

Used for small fits (no cluster to start) and as the reference the Dask
backend is tested against.  Workers run one after the other, when the round
starts: all results arrive together, nothing is ever late, and an injected
slowdown is ignored (use a real or simulated cluster to study stragglers).
"""

import numpy as np

from ..placement import assign_chunks
from ..solvers import ChunkSolver
from .base import Backend

__all__ = ["InProcessBackend"]


class InProcessBackend(Backend):
    """Run ``n_workers`` local solvers in this process, one after the other.

    Each worker is a :class:`~daskelastic.solvers.ChunkSolver` holding its
    share of the chunks, balanced by rows as on a Dask cluster.  A round's
    work is all done in :meth:`start_round`, the workers solving one after
    the other: :meth:`wait_results` then returns every result at once,
    :meth:`stop_round` has nothing to stop, and slowdowns (injected
    stragglers) are ignored.  The backend has no elastic operations, so
    :func:`~daskelastic.driver.run_cocoa` refuses a ``scaling_policy`` with
    it.  Rounds are timed on ``time.perf_counter()``.

    Parameters
    ----------
    problem : daskelastic.driver.Problem
        The problem the chunks belong to.
    chunks : list of daskelastic.placement.Chunk
        The training rows, cut into chunks (:func:`~daskelastic.placement.split_rows`
        and ``daskelastic.placement.make_chunks``).
    n_workers : int
        Number of (sequential) workers, named ``local-0``, ``local-1``, ...;
        a worker that gets no chunk is left out.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.backends import InProcessBackend
    >>> from daskelastic.driver import Problem
    >>> from daskelastic.placement import make_chunks, split_rows
    >>> X = np.random.default_rng(0).normal(size=(300, 3))
    >>> problem = Problem(loss=2, lam=1e-2, n_samples=300, n_features=3, n_targets=1,
    ...                   intercept_scaling=0.0)
    >>> chunks = make_chunks(X, np.sign(X[:, :1]), np.ones(300),
    ...                      split_rows(300, n_chunks=3))
    >>> backend = InProcessBackend(problem, chunks, n_workers=4)   # 3 chunks
    >>> backend.workers()
    ['local-0', 'local-1', 'local-2']
    >>> backend.start_round(0, problem.zeros(), {}, inv_lam_n=problem.inv_lam_n,
    ...                     sigma=3.0, steps=None, seed=0)
    >>> sorted(backend.wait_results(timeout=0))
    ['local-0', 'local-1', 'local-2']
    >>> backend.wait_results()
    {}
    """

    def __init__(self, problem, chunks, n_workers=1):
        self.problem = problem
        names = [f"local-{k}" for k in range(n_workers)]
        plan = assign_chunks({c.chunk_id: c.n_rows for c in chunks}, names)
        by_id = {c.chunk_id: c for c in chunks}
        self.solvers = {}
        for name in names:
            solver = ChunkSolver.for_problem(problem)
            for cid in plan[name]:
                c = by_id[cid]
                solver.add_chunk(cid, c.X, c.Y, c.sample_weight, shuffled=c.shuffled)
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
        """Return the results of the round started last, all at once.

        Every worker finished in :meth:`start_round`: nothing is waited for.

        Parameters
        ----------
        timeout : float or None
            Ignored.

        Returns
        -------
        dict
            ``{worker: LocalResult}`` of every worker holding chunks on the
            first call after :meth:`start_round`; empty on later calls.
        """
        results, self._arrived = self._arrived, {}
        return results

    def stop_round(self, round_id, workers):
        """Do nothing: every in-process worker finished when the round started.

        Parameters
        ----------
        round_id : int
            The round to stop (ignored).
        workers : iterable
            Ids of the workers to stop (ignored).
        """

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

    def start_duals(self, w, scales=()):
        parts = [s.start_duals(w, scales) for s in self.solvers.values()]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)

    def scale_duals(self, scale):
        for solver in self.solvers.values():
            solver.scale_duals(scale)

    def gather_alpha(self):
        """The committed dual state of every chunk (a debugging accessor).

        Returns
        -------
        dict
            ``{chunk_id: α}`` over all workers (copies).
        """
        return {cid: a for s in self.solvers.values() for cid, a in s.alpha_by_chunk().items()}

    def describe(self, ask_workers=True):   # the workers are local
        return {name: {"chunks": s.chunk_ids, "rows": s.n_rows}
                for name, s in self.solvers.items()}
