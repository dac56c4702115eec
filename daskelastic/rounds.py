"""One round, carried out on a backend as its :class:`~daskelastic.policies.RoundPlan` says.

Start the local solvers on every worker; collect results as they arrive;
once the plan's cut comes (enough results, a slack after them, or a
deadline), tell the workers still running to stop, and collect them too —
they stop at their next check of the stop flag and still report the gap sums
of their rows, so the round is fully certified.  Which results are *added*
(all on time, plus the late ones' partial work under ``late="preempt"``) and
which are *dropped* is the outcome.

The clock is the backend's (:meth:`~daskelastic.backends.base.Backend.clock`): wall
time on real workers, virtual time on a simulated cluster.
"""

import statistics
from dataclasses import dataclass

__all__ = ["RoundOutcome", "run_planned_round"]

#: Extrapolated round times are capped at this multiple of the median arrival.
_MAX_EXTRAPOLATION = 100.0


@dataclass
class RoundOutcome:
    """What a round produced.

    Parameters
    ----------
    results : dict
        ``{worker: LocalResult}`` of every worker (late ones included).
    used, dropped, preempted : set
        Workers whose work is added, discarded, and added although stopped
        early (a subset of ``used``).
    arrival : dict
        ``{worker: seconds}`` from the start to the arrival of each result.
    full_time : dict
        ``{worker: seconds}`` each worker needed or would have needed.
    cut : float or None
        Seconds after the start when the late workers were told to stop.
    start : float
        The backend clock at the round's start.

    Examples
    --------
    Worker ``"b"`` was stopped after a quarter of its budget and its
    partial work added (see :func:`run_planned_round` for one made by a
    round):

    >>> import numpy as np
    >>> from daskelastic.rounds import RoundOutcome
    >>> from daskelastic.solvers import LocalResult
    >>> dw = np.zeros((4, 1))
    >>> results = {"a": LocalResult(dw, 100, (0.0, 0.0, 0.0), 100, 1.0, False, 100),
    ...            "b": LocalResult(dw, 25, (0.0, 0.0, 0.0), 100, 0.3, True, 100)}
    >>> outcome = RoundOutcome(results, used={"a", "b"}, dropped=set(), preempted={"b"},
    ...                        arrival={"a": 1.0, "b": 1.3}, full_time={"a": 1.0, "b": 4.3},
    ...                        cut=1.2, start=0.0)
    >>> outcome.used_fraction()
    {'a': 1.0, 'b': 0.25}
    """

    results: dict
    used: set
    dropped: set
    preempted: set
    arrival: dict
    full_time: dict
    cut: float
    start: float

    def used_fraction(self):
        """The share of each worker's step budget whose work is added.

        Returns
        -------
        dict
            ``{worker: fraction}``; ``0`` for a dropped result.
        """
        out = {}
        for k, r in self.results.items():
            if k not in self.used:
                out[k] = 0.0
            elif r.budget > 0:
                out[k] = min(r.steps / r.budget, 1.0)
            else:
                out[k] = 1.0
        return out


def run_planned_round(backend, plan, round_id, w, settlements, *, inv_lam_n, sigma,
                      steps, seed, slowdowns=None, required=(), drop_streak=None):
    """Run one round on ``backend`` following ``plan``.

    Parameters
    ----------
    backend : daskelastic.backends.base.Backend
        Where the workers run.
    plan : daskelastic.policies.RoundPlan
        How long to wait and what becomes of late results.
    round_id, w, settlements, inv_lam_n, sigma, steps, seed, slowdowns : object
        As in :meth:`daskelastic.backends.base.Backend.start_round`.
    required : set, optional
        Workers waited for whatever the plan says (the cut comes only once
        their results are in); their results are added.
    drop_streak : dict, optional
        ``{worker: rounds in a row its work was dropped}``.

    Returns
    -------
    daskelastic.rounds.RoundOutcome
        Every worker's result, and which were added, dropped and preempted.

    Notes
    -----
    When more results than ``plan.max_used`` are in at the cut, the required
    ones, then those dropped most often in a row, then the first to arrive
    (results that arrived together take turns) are added, and the rest
    dropped: adding more results than the subproblems' ``σ′`` was sized for
    would not be safe.

    Examples
    --------
    On a simulated cluster of three workers, one ten times slower; the
    preempt policy stops it once the others are in (plus a slack) and adds
    the quarter of its budget it did:

    >>> import numpy as np
    >>> from daskelastic.backends.simulated import ClusterModel, SimulatedBackend
    >>> from daskelastic.driver import Problem
    >>> from daskelastic.placement import make_chunks, split_rows
    >>> from daskelastic.policies import PreemptPolicy
    >>> from daskelastic.rounds import run_planned_round
    >>> from daskelastic.testing import FixedSlowdown
    >>> X = np.random.default_rng(0).normal(size=(600, 4))
    >>> Y = np.sign(X[:, :1])
    >>> problem = Problem(loss=2, lam=1e-3, n_samples=600, n_features=4, n_targets=1,
    ...                   intercept_scaling=1.0)
    >>> chunks = make_chunks(X, Y, np.ones(600), split_rows(600, n_chunks=6))
    >>> model = ClusterModel(n_workers=3, seconds_per_nnz=1e-8, stop_check_every=50,
    ...                      stragglers=FixedSlowdown([2], factor=10.0))
    >>> backend = SimulatedBackend(problem, chunks, model)
    >>> outcome = run_planned_round(backend, PreemptPolicy().plan(3), 0, problem.zeros(),
    ...                             {}, inv_lam_n=problem.inv_lam_n, sigma=3.0,
    ...                             steps=None, seed=0)
    >>> sorted(outcome.used), outcome.preempted, outcome.dropped
    (['sim-00000', 'sim-00001', 'sim-00002'], {'sim-00002'}, set())
    >>> outcome.used_fraction()
    {'sim-00000': 1.0, 'sim-00001': 1.0, 'sim-00002': 0.25}
    """
    workers = list(backend.workers())
    K = len(workers)
    t0 = backend.clock()
    backend.start_round(round_id, w, settlements, inv_lam_n=inv_lam_n, sigma=sigma,
                        steps=steps, seed=seed, slowdowns=slowdowns)
    results, arrival = {}, {}
    wait_for = min(max(int(plan.wait_for), 1), K)
    required = set(required) & set(workers)
    cut_at = plan.deadline
    while len(results) < K:
        now = backend.clock() - t0
        if cut_at is not None and now >= cut_at:
            break
        new = backend.wait_results(None if cut_at is None else cut_at - now)
        t = backend.clock() - t0
        for k, r in new.items():
            results[k] = r
            arrival[k] = t
        if len(results) >= wait_for and required <= set(results):
            # the wait_for-th result: the slack is a share of its *compute* time,
            # not of its arrival, which includes the round's fixed costs
            k_q = sorted(results, key=lambda k: (arrival[k], results[k].seconds))[wait_for - 1]
            cut = max(arrival[k_q] + plan.slack * results[k_q].seconds,
                      max((arrival[k] for k in required), default=0.0))
            cut_at = cut if cut_at is None else min(cut_at, cut)
    on_time = set(results)
    late = [k for k in workers if k not in on_time]
    cut = None
    if late:
        cut = backend.clock() - t0
        backend.stop_round(round_id, late)
        while len(results) < K:
            new = backend.wait_results(None)
            t = backend.clock() - t0
            for k, r in new.items():
                results[k] = r
                arrival[k] = t
    if plan.late == "preempt":
        used = set(results)
    else:
        used = on_time
    max_used = K if plan.max_used is None else max(int(plan.max_used), 1)
    if len(used) > max_used:
        streak = drop_streak or {}
        # ties (results that arrived together) take turns, round by round
        turn = {k: (i - round_id) % K for i, k in enumerate(sorted(workers, key=str))}
        ranked = sorted(used, key=lambda k: (k not in required, -streak.get(k, 0),
                                             arrival[k], turn[k]))
        used = set(ranked[:max_used])
    dropped = set(results) - used
    preempted = {k for k in used if results[k].stopped}
    return RoundOutcome(results, used, dropped, preempted, arrival,
                        _full_times(results, arrival), cut, t0)


def _full_times(results, arrival):
    """Seconds each worker needed, or would have needed, for its whole budget."""
    done = [arrival[k] for k, r in results.items() if not r.stopped]
    cap = _MAX_EXTRAPOLATION * (float(statistics.median(done)) if done
                                else max(arrival.values(), default=0.0))
    out = {}
    for k, r in results.items():
        if not r.stopped or r.budget == 0:
            out[k] = arrival[k]
            continue
        transfer = max(arrival[k] - r.seconds, 0.0)
        estimate = transfer + r.seconds * r.budget / max(r.steps, 1)
        out[k] = min(estimate, cap) if cap > 0 else estimate
    return out
