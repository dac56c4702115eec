"""The CoCoA+ fit loop, independent of where the workers run.

The driver owns ``w`` and the round loop.  It talks to its workers through a
:class:`Backend` — run a round on every worker, settle (commit or discard) the
previous round, gather diagnostics — so the same loop runs in-process, on a
Dask cluster, or on a simulated one.

Each round ``r`` starts from the committed ``w_r``.  Every worker returns its
proposed ``Δw`` *and* the loss and dual sums of its rows at ``w_r`` and the
committed ``α_r``: the duality gap of ``w_r`` comes out of the same pass over
the data.  If that gap is below ``tol``, the round's proposals are discarded
and ``w_r`` — with its certificate — is the result; otherwise the proposals
are committed (``w ← w + γ ΣΔw``, ``α ← α + γΔα`` on the workers).
"""

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .objective import objective_from_sums

__all__ = ["Problem", "Backend", "FitResult", "run_cocoa"]


@dataclass(frozen=True)
class Problem:
    """What the workers need to know about the optimisation problem.

    Attributes
    ----------
    loss : int
        Loss code (``daskelastic.losses.LOSSES``).
    lam : float
        ``λ = 1 / (C n)``.
    n_samples, n_features, n_targets : int
        ``n``, ``d`` and ``m`` (one-vs-rest classes or regression targets).
    intercept_scaling : float
        Value of the constant intercept feature, ``0`` without intercept.
    """

    loss: int
    lam: float
    n_samples: int
    n_features: int
    n_targets: int
    intercept_scaling: float

    @property
    def inv_lam_n(self):
        """``1 / (λ n)``."""
        return 1.0 / (self.lam * self.n_samples)

    def zeros(self):
        """A zero weight array of shape ``(d + 1, m)``."""
        return np.zeros((self.n_features + 1, self.n_targets))


class Backend:
    """Where the workers run.  Subclasses implement the four calls below.

    ``run_round`` gives every worker the round-start ``w`` and the settlement
    of its previous round, and returns ``{worker: LocalResult}``.  ``settle``
    sends settlements without starting a round.  A settlement is
    ``(round_id, gamma)``: commit ``γ·Δα`` of that round, or discard it when
    ``gamma`` is ``None``.
    """

    def workers(self):
        """The ids of the workers holding chunks."""
        raise NotImplementedError

    def run_round(self, round_id, w, settlements, *, sigma, steps, seed):
        """Run one round on every worker and return ``{worker: LocalResult}``."""
        raise NotImplementedError

    def settle(self, settlements):
        """Apply settlements ``{worker: (round_id, gamma or None)}``."""
        raise NotImplementedError

    def alpha_sum(self):
        """``Σ α_i x_i`` over all rows, gathered from the workers (debugging)."""
        raise NotImplementedError

    def describe(self):
        """A short dict about the backend for the history (workers, rows, chunks)."""
        return {}

    def close(self):
        """Release the workers' state."""


@dataclass
class FitResult:
    """Outcome of :func:`run_cocoa`.

    Attributes
    ----------
    w : ndarray of shape (d + 1, m)
    n_iter : int
        Committed rounds.
    converged : bool
    objective : daskelastic.objective.Objective
        Certified values at ``w``.
    history : list of dict
        One entry per round (see :func:`run_cocoa`).
    """

    w: np.ndarray
    n_iter: int
    converged: bool
    objective: object
    history: list = field(default_factory=list)


def run_cocoa(backend, problem, *, tol=1e-4, max_iter=100, gamma=1.0, sigma=None,
              local_steps=None, random_state=0, callback=None, round_hook=None):
    """Run CoCoA+ rounds on ``backend`` until the relative gap is ≤ ``tol``.

    Parameters
    ----------
    backend : Backend
        Workers holding the chunks of ``problem``.
    problem : Problem
    tol : float
        Stop when ``(P − D) / |P| ≤ tol``.
    max_iter : int
        At most this many committed rounds; a final gap-only pass certifies the
        result, and a :class:`~sklearn.exceptions.ConvergenceWarning` says so.
    gamma : float
        Aggregation parameter γ ∈ (0, 1]; ``w ← w + γ ΣΔw``.
    sigma : float, optional
        Subproblem parameter σ′; default ``γ K`` (safe for any number of
        workers ``K`` whose results are added).
    local_steps : int, optional
        Coordinate steps per worker per round; default one pass over its rows.
    random_state : int
        Seed of the visiting orders.
    callback : callable, optional
        Called with each history entry; returning ``True`` stops the fit.
    round_hook : callable, optional
        Called as ``round_hook(round_id, w, backend)`` once a round's results
        are in, when the workers' committed ``α`` matches ``w``; for tests and
        debugging (e.g. checking ``w = Σ α_i x_i / (λ n)``).

    Returns
    -------
    FitResult
        The history entries hold ``round``, ``time``, ``duality_gap``
        (relative), ``gap``, ``primal``, ``dual``, ``n_workers``, ``n_used``,
        ``n_dropped``, ``n_preempted``, ``steps`` and ``worker_seconds``
        (``{worker: seconds}``).
    """
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must be in (0, 1], got {gamma}")
    t0 = time.perf_counter()
    w = problem.zeros()
    history = []
    settlements = {}
    converged = stop_requested = False
    objective = None
    n_iter = 0
    seed = 0 if random_state is None else int(random_state)
    for round_id in range(max_iter + 1):
        workers = backend.workers()
        K = len(workers)
        sig = gamma * K if sigma is None else float(sigma)
        last = round_id == max_iter
        results = backend.run_round(round_id, w, settlements, sigma=sig,
                                    steps=0 if last else local_steps, seed=seed)
        objective = objective_from_sums(
            sum(r.loss_sum for r in results.values()),
            sum(r.dual_sum for r in results.values()),
            sum(r.alpha_z_sum for r in results.values()),
            w, problem.lam, problem.n_samples)
        entry = {
            "round": round_id,
            "time": time.perf_counter() - t0,
            "duality_gap": objective.relative_gap,
            "gap": objective.gap,
            "primal": objective.primal,
            "dual": objective.dual,
            "n_workers": K,
            "n_used": 0 if last else len(results),
            "n_dropped": 0,
            "n_preempted": sum(bool(r.stopped) for r in results.values()),
            "steps": sum(r.steps for r in results.values()),
            "worker_seconds": {str(k): r.seconds for k, r in results.items()},
        }
        history.append(entry)
        if round_hook is not None:
            round_hook(round_id, w, backend)
        stop_requested = bool(callback(entry)) if callback is not None else False
        converged = objective.relative_gap <= tol
        if converged or last or stop_requested:
            backend.settle({k: (round_id, None) for k in results})
            break
        dw = sum(r.dw for r in results.values())
        w = w + gamma * dw
        settlements = {k: (round_id, gamma) for k in results}
        n_iter = round_id + 1
    if not converged and not stop_requested:
        warnings.warn(
            f"daskelastic did not reach tol={tol:g} in max_iter={max_iter} rounds "
            f"(relative duality gap {objective.relative_gap:.3g}); "
            "increase max_iter or tol",
            ConvergenceWarning, stacklevel=3)
    return FitResult(w, n_iter, converged, objective, history)
