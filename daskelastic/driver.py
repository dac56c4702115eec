"""The CoCoA+ fit loop, independent of where the workers run.

The driver owns ``w`` and the round loop.  It talks to its workers through a
:class:`~daskelastic.backends.base.Backend` — run a round on every worker,
settle (commit or discard) the previous round, gather diagnostics — so the
same loop runs in-process, on a Dask cluster, or on a simulated one.

Each round ``r`` starts from the committed ``w_r``.  Every worker returns its
proposed ``Δw`` *and* the loss and dual sums of its rows at ``w_r`` and the
committed ``α_r``: the duality gap of ``w_r`` comes out of the same pass over
the data.  If that gap is below ``tol``, the round's proposals are discarded
and ``w_r`` — with its certificate — is the result; otherwise the proposals
are committed (``w ← w + t ΣΔw``, ``α ← α + tΔα`` on the workers, with a step
``t ≤ γ`` chosen from the proposals; see :func:`run_cocoa`).
"""

import contextvars
import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .backends.base import ElasticBackend
from .elastic import ElasticStep
from .history import RoundEntry
from .losses import HINGE, POISSON, SOFTMAX
from .objective import (
    elastic_net_gap,
    free_intercept_gap,
    intercept_step,
    objective_from_gap,
    softmax_free_intercept_gap,
)
from .policies import RoundRecord, WaitPolicy, make_straggler_policy
from .rounds import run_planned_round
from .schedules import Acceleration, SigmaSchedule

__all__ = ["Problem", "FitResult", "WorkersLost", "ConnectionLost", "run_cocoa"]

#: The straggler injection active in this context: an object with a
#: ``factors(round_id, workers) -> {worker: slowdown}`` method, set by
#: :func:`daskelastic.testing.inject_stragglers`.
INJECTED_SLOWDOWN = contextvars.ContextVar("daskelastic_injected_slowdown", default=None)


class WorkersLost(RuntimeError):
    """Raised by a backend when workers died while it waited for them.

    The :class:`~daskelastic.backends.dask.DaskBackend` raises it from any
    wait — a round, a move, a sum — when a worker's call failed because the
    worker is gone or the scheduler no longer lists it.
    :func:`~daskelastic.driver.run_cocoa` catches it wherever it talks to a
    backend with elastic operations: the elastic controller
    (:meth:`~daskelastic.elastic.ElasticController.recover`) discards the
    round on the live workers and re-reads the chunks held nowhere onto them
    with ``α = 0``, ``w`` is recomputed from the surviving ``α`` and the fit
    goes on.  On any other backend the error propagates.  The simulated
    backend raises its own :class:`~daskelastic.backends.simulated.WorkerLost`
    instead, which is not recovered from.

    Parameters
    ----------
    workers : iterable
        The lost workers (addresses on Dask); kept as the list attribute
        ``workers``.

    Examples
    --------
    >>> from daskelastic.driver import WorkersLost
    >>> error = WorkersLost(["tcp://10.0.0.5:40000"])
    >>> error.workers
    ['tcp://10.0.0.5:40000']
    >>> print(error)
    lost workers ['tcp://10.0.0.5:40000']
    """

    def __init__(self, workers):
        self.workers = list(workers)
        super().__init__(f"lost workers {self.workers}")


class ConnectionLost(WorkersLost):
    """Raised by a backend when the client's connection to the scheduler broke.

    The workers live on, with the fit's chunks and dual state, but the
    scheduler released the client's actors and tasks when the connection
    closed (``Client`` cancels them: ``reason="scheduler-connection-lost"``).
    The driver recovers from it as from the loss of no worker: once the
    client has reconnected, the running round is discarded, the workers say
    what they hold and the actors start again.

    Parameters
    ----------
    what : str
        What broke, for the message.

    Examples
    --------
    >>> from daskelastic.driver import ConnectionLost, WorkersLost
    >>> error = ConnectionLost("a round's actor call")
    >>> isinstance(error, WorkersLost), error.workers
    (True, [])
    >>> print(error)
    the connection to the Dask scheduler was lost (a round's actor call)
    """

    def __init__(self, what):
        super().__init__([])
        self.args = (f"the connection to the Dask scheduler was lost ({what})",)


@dataclass(frozen=True)
class Problem:
    """What the workers need to know about the optimisation problem.

    Parameters
    ----------
    loss : int
        Loss code (``daskelastic.losses.LOSSES``, see
        :func:`daskelastic.losses.loss_code`).
    lam : float
        ``λ = 1 / (C n)`` (see :func:`daskelastic.objective.lambda_from_C`),
        the weight of ``½‖w‖²``; 0 for a pure L1 penalty.  Both ``lam`` and
        ``l1`` may be 0 (no penalty), which :func:`run_cocoa` refuses: the
        Newton solver (:mod:`daskelastic.newton`) and, for the squared loss,
        the Gram solver fit it.
    n_samples, n_features, n_targets : int
        ``n``, ``d`` and ``m`` (one-vs-rest classes or regression targets).
    intercept_scaling : float
        Value of the constant intercept feature, ``0`` without intercept.
    free_intercept : bool
        Leave the intercept unpenalised (``intercept_scaling`` must be 1; not
        for the hinge): the last row of ``w`` is the intercept ``b``, which
        the driver moves between rounds (see the docs' *Algorithms*, *A free
        intercept*).
    l1 : float, default=0.0
        ``μ``, the weight of ``‖w‖₁`` (the docs' *Algorithms*, *L1 and
        elastic-net*); the intercept, which must then be free or absent, is
        not part of it.

    Examples
    --------
    >>> from daskelastic.driver import Problem
    >>> from daskelastic.losses import loss_code
    >>> from daskelastic.objective import lambda_from_C
    >>> problem = Problem(loss=loss_code("logistic"), lam=lambda_from_C(1.0, 1000),
    ...                   n_samples=1000, n_features=4, n_targets=1, intercept_scaling=1.0)
    >>> problem.inv_lam_n
    1.0
    >>> problem.zeros().shape
    (5, 1)
    """

    loss: int
    lam: float
    n_samples: int
    n_features: int
    n_targets: int
    intercept_scaling: float
    free_intercept: bool = False
    l1: float = 0.0

    def __post_init__(self):
        # (both 0: no penalty, which the Newton solver alone fits; run_cocoa refuses it)
        if not (self.lam >= 0 and self.l1 >= 0):
            raise ValueError(f"lam and l1 must be >= 0; got lam={self.lam}, l1={self.l1}")
        if self.l1 and self.intercept_scaling and not self.free_intercept:
            raise ValueError("an L1 penalty needs a free intercept or none "
                             "(free_intercept=True or intercept_scaling=0)")
        if self.l1 and self.loss == POISSON:
            raise ValueError("an L1 penalty is not available for the Poisson loss")
        if self.free_intercept and self.intercept_scaling != 1.0:
            raise ValueError("a free intercept needs intercept_scaling=1, got "
                             f"{self.intercept_scaling}")
        if self.free_intercept and self.loss == HINGE:
            raise ValueError("the hinge loss has no free intercept: its loss has no "
                             "curvature to move it by; use the squared hinge, or a "
                             "penalised intercept")
        if self.loss == SOFTMAX and self.n_targets < 2:
            raise ValueError(f"the softmax loss needs 2 or more targets, got {self.n_targets}")

    @property
    def inv_lam_n(self):
        """``1 / (λ n)``."""
        return 1.0 / (self.lam * self.n_samples)

    def zeros(self):
        """A zero weight array, the starting point of a fit.

        Returns
        -------
        ndarray of shape (d + 1, m)
            Zeros; the last row is the intercept coefficient.
        """
        return np.zeros((self.n_features + 1, self.n_targets))


@dataclass
class FitResult:
    """Outcome of :func:`~daskelastic.driver.run_cocoa`.

    The parameters are kept as attributes of the same names.

    Parameters
    ----------
    w : ndarray of shape (d + 1, m)
        The final iterate: one column per target, the feature coefficients,
        then the intercept coefficient in the last row (the intercept is
        ``intercept_scaling`` times it).
    n_iter : int
        Committed rounds.  The last round of a fit only certifies ``w`` (its
        proposals are discarded), so ``n_iter`` is one less than the number
        of history entries.
    converged : bool
        Whether the relative duality gap at ``w`` reached ``tol`` (a fit
        stopped by ``max_iter`` or by the callback before that has not).
    objective : daskelastic.objective.Objective
        Primal and dual values and the duality gap certified at ``w``.
    history : list of dict
        One entry per round, the last included: the fields of
        :class:`~daskelastic.history.RoundEntry` as a dict.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.backends import InProcessBackend
    >>> from daskelastic.driver import Problem, run_cocoa
    >>> from daskelastic.placement import make_chunks, split_rows
    >>> X = np.random.default_rng(0).normal(size=(200, 2))
    >>> Y = np.sign(X[:, :1])
    >>> problem = Problem(loss=2, lam=1e-2, n_samples=200, n_features=2, n_targets=1,
    ...                   intercept_scaling=1.0)
    >>> chunks = make_chunks(X, Y, np.ones(200), split_rows(200, n_chunks=2))
    >>> result = run_cocoa(InProcessBackend(problem, chunks), problem, tol=1e-3)
    >>> result.converged, result.w.shape, result.n_iter == len(result.history) - 1
    (True, (3, 1), True)
    >>> bool(result.objective.relative_gap <= 1e-3)
    True
    """

    w: np.ndarray
    n_iter: int
    converged: bool
    objective: object
    history: list = field(default_factory=list)


#: The scales ``s`` of the dual state ``s·α`` a warm start chooses from (see
#: ``_start_duals``): 0 (a cold start, when the dual prefers it) and ratios of
#: 2^(1/3) from 1/64 to 64.
WARM_SCALES = np.concatenate([[0.0], 2.0 ** (np.arange(-18, 19) / 3.0)])


def run_cocoa(backend, problem, *, tol=1e-4, max_iter=100, gamma=1.0, sigma=None,
              local_steps=None, random_state=0, acceleration="auto",
              straggler_policy=None, callback=None, round_hook=None,
              scaling_policy=None, max_workers=None, w_start=None):
    """Run CoCoA+ rounds on ``backend`` until the relative gap is ≤ ``tol``.

    With acceleration, the rounds solve a sequence of proximal problems
    ``P(w) + κ/2‖w − y_k‖²`` whose centres ``y_k`` move with Nesterov
    momentum (Catalyst; Lin, Mairal and Harchaoui, 2015), with a restart when
    the primal objective goes up.  CoCoA+ on ``K ≥ 2`` workers converges
    slowly on tables with many more rows than features (see the docs'
    *Algorithms* page); the proximal problems are far better conditioned, and
    the outer momentum recovers the original problem.  Internally the dual
    state ``α`` belongs to the proximal problem, ``v = Σ α_i x_i / ((λ+κ) n)``,
    and the iterate is ``w = v + κ y_k / (λ + κ)``.  The certificate is the
    original problem's duality gap ``P(w) − D(α)``; every term of it is ≥ 0.

    Parameters
    ----------
    backend : daskelastic.backends.base.Backend
        Workers holding the chunks of ``problem``.
    problem : Problem
        Loss, ``λ``, sizes and intercept scaling of the problem.
    tol : float
        Stop when ``(P − D) / |P| ≤ tol``.
    max_iter : int
        At most this many committed rounds; a final gap-only pass certifies the
        result, and a :class:`~sklearn.exceptions.ConvergenceWarning` says so.
    gamma : float
        Aggregation parameter γ ∈ (0, 1]; ``w ← w + γ ΣΔw``.
    sigma : float, optional
        Subproblem parameter σ′, fixed (the proposals are then added with
        ``t = γ``; a σ′ below ``γ K′`` gives up the guarantee that every round
        raises the dual).  By default it adapts (all losses but the hinge):
        the first round uses the safe ``γ K′``, where ``K′`` is the most
        results the round's plan can add (``K`` but with backup workers);
        after each round the driver evaluates the dual objective along the
        sum of the added proposals and steps ``t = min(γ, t*)`` along it,
        ``t*`` maximising a lower bound of the dual's gain (the docs'
        *Algorithms* page, *Adaptive σ′*); the round after a safe one uses
        ``σ′ / t*``, scaled to the number of results it can add and kept
        between ``min(1, γ K′)`` and ``γ K′``, and the round after that the
        safe ``γ K′`` again: a smaller σ′ overshoots along directions that
        the workers' rows share, which the dual's bound does not see and the
        safe rounds damp.  Each round then still raises the dual (where no bound
        is usable, near the optimum, the step is the CoCoA+-safe ``σ′ / K′``
        and the next σ′ the safe one).  After a scale-in, a join or a lost
        worker σ′ starts again from ``γ K′``.  For the hinge, σ′ stays
        ``γ K′`` (bolder steps there cost rounds; the docs' *Algorithms*
        page, *Adaptive σ′*).
    local_steps : int, optional
        Coordinate steps per worker per round; default one pass over its rows.
    random_state : int
        Seed of the visiting orders.
    acceleration : "auto", None or float
        ``"auto"``: Catalyst when more than one worker holds data, and for
        the squared loss (Ridge) also on one worker (for classification on
        one worker SDCA alone is fast, until it stalls: see below), starting from
        ``κ = 0.25 · sqrt(λ · mean ‖x_i‖²)`` and adapting it: doubled when a
        proximal problem needs ten rounds or more (for the hinge: halved
        when it needs five or more, and divided by ten when the gap fell by
        less than 0.8× over twelve outer steps), halved when it needs one;
        for classification, switched off when a scale-in leaves one worker.
        Logistic regression (and on one worker every classification loss)
        starts unaccelerated and switches Catalyst on, centred at the current
        iterate, once the gap fell by less than 0.6× over six rounds (for the
        hinge, its smallest over twelve rounds against the smallest before;
        ``history_``'s ``kappa`` turns positive).
        A float fixes ``κ = value · sqrt(λ · mean ‖x_i‖²)``; None or 0 turns
        acceleration off.
    straggler_policy : str or daskelastic.policies.StragglerPolicy, optional
        How each round waits for its workers (default ``"wait"``: all of
        them); see :mod:`daskelastic.policies`.  A straggler injection set
        with :func:`daskelastic.testing.inject_stragglers` slows workers.
    callback : callable, optional
        Called with each history entry; returning ``True`` stops the fit.
    round_hook : callable, optional
        Called as ``round_hook(round_id, w, backend, v, inv_lam_n)`` once a
        round's results are in, when the workers' committed ``α`` satisfy
        ``v = Σ α_i x_i · inv_lam_n``; for tests and debugging.
    scaling_policy : None, "convergence" or daskelastic.scaling.ScalingPolicy
        Elastic scale-in between rounds (see :class:`~daskelastic.elastic.ElasticController`);
        None keeps the workers.  The policy's ``min_workers`` and
        ``release_workers`` bound the scale-in and say what becomes of the
        workers it lets go.  Needs an elastic backend (Dask or
        simulated); on one,
        rebalancing by measured throughput, taking in joining workers and
        recovering from lost workers happen with any policy.
    max_workers : int, optional
        Take in joining workers only up to this many.
    w_start : ndarray of shape (d + 1, m), optional
        A warm start: every row's ``α`` starts at the dual values that match
        these coefficients
        (:meth:`~daskelastic.backends.base.Backend.start_duals`), not at 0,
        and the first iterate is ``w(α)``; it is ``w_start`` itself when that is the
        optimum of the same problem.

    Returns
    -------
    FitResult
        Its ``history`` holds one :class:`~daskelastic.history.RoundEntry`
        per round, as a dict (:meth:`~daskelastic.history.RoundEntry.as_dict`).

    Examples
    --------
    Logistic regression on two workers in this process:

    >>> import numpy as np
    >>> from daskelastic.backends import InProcessBackend
    >>> from daskelastic.driver import Problem, run_cocoa
    >>> from daskelastic.losses import loss_code
    >>> from daskelastic.objective import lambda_from_C
    >>> from daskelastic.placement import make_chunks, split_rows
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(1000, 4))
    >>> Y = np.where(X[:, :1] + 0.5 * rng.normal(size=(1000, 1)) > 0, 1.0, -1.0)
    >>> problem = Problem(loss=loss_code("logistic"), lam=lambda_from_C(1.0, 1000),
    ...                   n_samples=1000, n_features=4, n_targets=1, intercept_scaling=1.0)
    >>> chunks = make_chunks(X, Y, np.ones(1000), split_rows(1000, n_chunks=4))
    >>> result = run_cocoa(InProcessBackend(problem, chunks, n_workers=2), problem,
    ...                    tol=1e-6)
    >>> result.converged, result.w.shape
    (True, (5, 1))
    >>> bool(result.objective.relative_gap <= 1e-6)
    True
    >>> result.history[-1]["duality_gap"] == result.objective.relative_gap
    True
    """
    if problem.lam == 0 and problem.l1 == 0:
        raise ValueError("no penalty (C=inf, penalty=None or alpha=0): CoCoA+ needs one "
                         "(its dual has no w(α) without); fit with solver='newton' (or "
                         "'auto', which picks it where n_features × n_targets ≤ "
                         "daskelastic.newton.max-size; Ridge: solver='cholesky'), or a "
                         "finite C or alpha > 0")
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must be in (0, 1], got {gamma}")
    fit = _RoundLoop(backend, problem, gamma=gamma, sigma=sigma, acceleration=acceleration,
                     straggler_policy=straggler_policy, scaling_policy=scaling_policy,
                     max_workers=max_workers, w_start=w_start)
    accel, sigmas = fit.accel, fit.sigmas
    seed = 0 if random_state is None else int(random_state)
    history = []
    converged = stop_requested = False
    n_iter = 0
    for round_id in range(max_iter + 1):
        last = round_id == max_iter
        outcome, w, plan, sig = fit.run_round(round_id, last, local_steps, seed)
        results = outcome.results
        used = set() if last else outcome.used
        # sums in a fixed order, not arrival order or a set's (which follows the
        # hash seed): their last bits can change the rounds a fit needs
        order = sorted(results, key=str)
        added = [results[k] for k in order if k in used]
        objective, fenchel_young, mismatch, intercept_sums = _certify(
            problem, round_id, [results[k] for k in order], w, fit.v, fit.b, accel)
        proposal = sum(r.dw for r in added) if added else None
        step = sigmas.observe(sig, len(added), sum(r.dual_change for r in added), proposal,
                              w, accel.lam_in, problem.n_samples)
        entry = fit.entry(round_id, objective, outcome, used, plan, sig, step)
        history.append(entry)
        if round_hook is not None:
            round_hook(round_id, w, backend, fit.v, accel.inv_lam_n)
        stop_requested = bool(callback(entry.as_dict())) if callback is not None else False
        converged = objective.relative_gap <= tol
        if converged or last or stop_requested:
            entry.step = 0.0      # the proposals are discarded
            fit.discard(round_id, results)
            break
        fit.commit(round_id, outcome, used, step, proposal, intercept_sums, objective, plan)
        n_iter = round_id + 1
        if fit.elastic is not None and fit.after_round(entry, results):
            continue     # the workers changed and Catalyst switched off
        fit.observe(round_id, w, objective, fenchel_young, mismatch)
    if not converged and not stop_requested:
        # (sparse columns are not centred, and a free intercept then crawls:
        # the user guide's *The intercept*)
        hint = ("; with a free intercept on sparse (uncentred) columns, "
                "penalize_intercept=True (liblinear's problem) takes far fewer rounds"
                if problem.free_intercept else "")
        warnings.warn(
            f"daskelastic did not reach tol={tol:g} in max_iter={max_iter} rounds "
            f"(relative duality gap {objective.relative_gap:.3g}); increase max_iter or "
            "tol, or standardise the features (the rounds needed grow with C·‖x‖²)"
            + hint, ConvergenceWarning, stacklevel=3)
    return FitResult(w, n_iter, converged, objective, [e.as_dict() for e in history])


class _RoundLoop:
    """What a fit carries from round to round, and the steps of a round that change it.

    ``v = Σ α_i x_i / (λ′ n)`` is the image of the workers' committed ``α``
    (of the proximal problem with acceleration), ``b`` the free intercept,
    ``settlements`` what the workers apply before their next round.
    """

    def __init__(self, backend, problem, *, gamma, sigma, acceleration, straggler_policy,
                 scaling_policy, max_workers, w_start):
        self.backend, self.problem = backend, problem
        self.policy = make_straggler_policy(
            "wait" if straggler_policy is None else straggler_policy)
        self.elastic = _elastic_controller(backend, scaling_policy, max_workers)
        self.injection = INJECTED_SLOWDOWN.get()
        self.t0 = backend.clock()
        self.events = backend.take_events()   # e.g. workers lost while the data loaded
        while True:
            try:
                self.accel = Acceleration.for_fit(acceleration, backend, problem,
                                                  warm=w_start is not None)
                break
            except WorkersLost as lost:   # α = 0 everywhere: nothing else to repair
                if self.elastic is None:
                    raise
                self.events.extend(_recover(self.elastic, backend, lost.workers)[0])
        self.sigmas = SigmaSchedule(sigma, gamma, problem.loss)
        self.v = problem.zeros()
        if w_start is not None:
            u, more = _start_duals(w_start, backend, self.elastic, problem.lam,
                                   problem.n_samples)
            self.events.extend(more)
            self.v = self.accel.start(u, w_start)
        # a free intercept is not part of v: the driver moves it (intercept_step)
        # and the certificate adds the constraint Σ α_i = 0 (free_intercept_gap)
        d = problem.n_features
        self.b = np.zeros(problem.n_targets) if w_start is None or not problem.free_intercept \
            else np.array(w_start[d], dtype=np.float64)
        self.settlements = {}
        self.drop_streak = {}      # worker -> rounds in a row its work was dropped

    def _recover(self, lost, **kwargs):
        """Recover from ``lost`` (raised again without an elastic controller); the events.

        ``v`` follows the workers' ``α`` once recovered.
        """
        if self.elastic is None:
            raise lost
        events, self.v = _recover(self.elastic, self.backend, lost.workers,
                                  self.accel.inv_lam_n, **kwargs)
        return events

    def run_round(self, round_id, last, local_steps, seed):
        """Plan and run round ``round_id``: ``(outcome, w, plan, sigma)``.

        A worker lost while it runs discards the round everywhere; the lost
        chunks restart from ``α = 0``, ``w`` follows the surviving ``α`` and
        the round runs again on the workers left.
        """
        backend, problem = self.backend, self.problem
        self.settlements = backend.before_round(self.settlements)
        self.round_events, self.events = self.events, []
        while True:
            workers = backend.workers()
            plan = (WaitPolicy() if last else self.policy).plan(len(workers))
            sig = self.sigmas.plan(plan.max_used or len(workers))
            w = self.accel.iterate(self.v)
            if problem.free_intercept:
                w[problem.n_features] = self.b
            slowdowns = None if self.injection is None else \
                self.injection.factors(round_id, workers)
            required = () if plan.max_drops is None else \
                {k for k in workers if self.drop_streak.get(k, 0) >= plan.max_drops}
            try:
                outcome = run_planned_round(
                    backend, plan, round_id, w, self.settlements,
                    inv_lam_n=self.accel.inv_lam_n, sigma=sig,
                    steps=0 if last else local_steps, seed=seed, slowdowns=slowdowns,
                    required=required, drop_streak=self.drop_streak)
                break
            except WorkersLost as lost:
                self.round_events.extend(self._recover(
                    lost, discard_round=round_id, settlements=self.settlements))
                self.settlements = {}
                self.policy.reset()
                self.sigmas.reset()
                self.accel.workers_lost()
        self.n_workers = len(workers)
        self.sigmas.ran()
        return outcome, w, plan, sig

    def entry(self, round_id, objective, outcome, used, plan, sig, step):
        """The round's :class:`~daskelastic.history.RoundEntry`."""
        results, backend = outcome.results, self.backend
        return RoundEntry(
            round=round_id, time=backend.clock() - self.t0,
            duality_gap=objective.relative_gap, gap=objective.gap,
            primal=objective.primal, dual=objective.dual, n_workers=self.n_workers,
            n_used=len(used), n_dropped=len(outcome.dropped),
            n_preempted=len(outcome.preempted & used), n_backup=plan.n_backup,
            steps=sum(results[k].steps for k in used), sigma=sig,
            step=step if used else 0.0, outer=self.accel.n_outer, kappa=self.accel.kappa,
            worker_seconds={str(k): r.seconds for k, r in results.items()},
            worker_cpu_seconds={str(k): r.cpu_seconds for k, r in results.items()},
            worker_arrival={str(k): t for k, t in outcome.arrival.items()},
            worker_rows={str(k): r.n_rows for k, r in results.items()},
            worker_status={str(k): _status(k, outcome) for k in results},
            cut=outcome.cut, round_seconds=backend.clock() - outcome.start,
            policy=self.policy.name, policy_estimate=plan.estimate, cost=backend.cost(),
            events=self.round_events)

    def discard(self, round_id, results):
        """Discard the last round's proposals on every worker."""
        try:
            self.backend.settle({k: (round_id, None) for k in results})
        except WorkersLost:
            pass   # this round's sums certify the result; the rest is closed

    def commit(self, round_id, outcome, used, step, proposal, intercept_sums, objective,
               plan):
        """Add the used proposals with step ``t``; tell the straggler policy how it went."""
        results, problem = outcome.results, self.problem
        self.drop_streak = {k: 0 if k in used else self.drop_streak.get(k, 0) + 1
                            for k in results}
        if used:
            self.v = self.v + step * proposal
        if problem.free_intercept:
            # Σ α_i = v[d]·λ′n: the intercept feature's coefficient in v is 1
            self.b = self.b + intercept_step(
                intercept_sums, self.v[problem.n_features] / self.accel.inv_lam_n,
                problem.loss)
        self.settlements = {k: (round_id, step if k in used else None) for k in results}
        self.policy.observe(RoundRecord(
            round_id=round_id, arrival=outcome.arrival, full_time=outcome.full_time,
            used=outcome.used_fraction(),
            rows={k: r.n_rows for k, r in results.items()}, cut=outcome.cut,
            duration=self.backend.clock() - outcome.start, gap=objective.relative_gap,
            n_backup=plan.n_backup))

    def after_round(self, entry, results):
        """Scale-in, joins, rebalancing and recovery after a committed round.

        Returns True when the workers changed and Catalyst switched off (the
        next round starts without its ``observe``).  A worker that dies
        during a move or a release is recovered from here, and ``v`` follows
        the surviving ``α``.
        """
        elastic = self.elastic
        elastic.observe(entry, results)
        try:
            step = elastic.after_round(self.settlements)
            lost = None    # (recovered from inside, if at all)
        except WorkersLost as error:   # a worker died during a move or a release
            step, lost = ElasticStep([], True, True, None), error.workers
        entry.scaling = step.scaling
        events = step.events
        if step.alpha_reset:
            extra, self.v = _recover(elastic, self.backend, lost, self.accel.inv_lam_n,
                                     settlements=self.settlements)
            events = events + extra
        if step.settled:
            self.settlements = {}
        if not events:
            return False
        entry.events.extend(events)
        self.policy.reset()
        self.sigmas.reset()
        self.v, switched_off = self.accel.workers_changed(self.v, self.backend)
        return switched_off

    def observe(self, round_id, w, objective, fenchel_young, mismatch):
        """Let the acceleration schedule move its centre, switch on, or adapt ``κ``."""
        n = self.problem.n_samples
        self.v, switched_on = self.accel.observe(self.v, w, objective,
                                                 max(fenchel_young / n, 0.0), mismatch)
        if switched_on:
            self.sigmas.reset()
            # the gap's fall per round changes with the switch: progress a
            # straggler policy measured in plain rounds no longer holds (the
            # workers' round times do)
            self.policy.restart_progress(round_id + 1)


def _certify(problem, round_id, results, w, v, b, accel):
    """The certificate of the round-start iterate ``w`` from the workers' sums.

    Returns ``(objective, FY, mismatch, intercept_sums)``: the
    :class:`~daskelastic.objective.Objective` of ``w`` (and the free
    intercept ``b``); the Fenchel–Young sum ``FY``, ``n`` times the proximal
    problem's own gap; the part of the certified gap beyond ``FY/n`` (the
    distance to Catalyst's centre, or the rescaling of an L1 dual point); and
    the summed intercept sums of a free intercept (None without one).
    """
    n, d, lam, l1 = problem.n_samples, problem.n_features, problem.lam, problem.l1
    loss_sum = sum(r.loss_sum for r in results)
    dual_sum = sum(r.dual_sum for r in results)
    fenchel_young = sum(r.alpha_z_sum for r in results) + loss_sum - dual_sum
    free = problem.free_intercept
    penalised = slice(0, d) if free else slice(None)
    intercept_sums = positive_x = None
    if free:
        intercept_sums = sum(r.intercept_sums[0] for r in results)
        positive_x = sum(r.intercept_sums[1] for r in results
                         if r.intercept_sums[1] is not None)
    if l1:
        # the gap to a feasible, rescaled dual point (elastic_net_gap); what
        # exceeds the proximal problem's own gap FY/n is the mismatch
        gap = elastic_net_gap(loss_sum, dual_sum, w[:d], accel.lam_in * v[:d], lam, l1, n,
                              (intercept_sums, positive_x) if free else None,
                              softmax=problem.loss == SOFTMAX)
        mismatch = max(gap - fenchel_young / n, 0.0)
    else:
        # P(w) − D(α) = FY/n + λ/2 ‖w − (λ'/λ) v‖²: both terms ≥ 0
        mismatch = accel.mismatch(w, v, penalised)
        gap = max(fenchel_young / n, 0.0) + mismatch
        if free:
            certify = softmax_free_intercept_gap if problem.loss == SOFTMAX \
                else free_intercept_gap
            gap = max(gap + certify(intercept_sums, positive_x, b,
                                    (accel.lam_in / lam) * v[:d], lam, n), 0.0)
    objective = objective_from_gap(loss_sum, gap, w[penalised], lam, n, l1)
    if not (np.isfinite(objective.primal) and np.isfinite(objective.gap)):
        # input validation lets through finite values whose squares or
        # products overflow (|x| ~ 1e155 and beyond): no certificate, and
        # coefficients of NaN, would follow
        raise ValueError(
            f"the objective is not finite in round {round_id} (primal "
            f"{objective.primal:.3g}, gap {objective.gap:.3g}): values of X, y or "
            "sample_weight too large for float64 arithmetic; rescale them (X e.g. "
            "with StandardScaler)")
    return objective, fenchel_young, mismatch, intercept_sums


def _recover(elastic, backend, lost, inv_lam_n=None, **kwargs):
    """Recover from ``lost`` workers, and from any lost meanwhile; return ``(events, v)``.

    ``v = Σ α_i x_i · inv_lam_n`` of the workers' ``α`` once recovered (the
    lost chunks restart from ``α = 0``), or None without ``inv_lam_n``;
    ``kwargs`` go to :meth:`~daskelastic.elastic.ElasticController.recover`
    (a recovery cut short is simply run again: it settles by round id).
    ``lost`` is a list of workers (empty after a :class:`ConnectionLost`:
    the workers are there, the fit's state with the scheduler is not), or
    None to compute ``v`` only (recovering if a worker dies meanwhile).
    The caller raises the loss itself without an elastic controller.
    """
    events = []
    while True:
        try:
            if lost is not None:
                events.append(elastic.recover(lost, **kwargs))
            return events, None if inv_lam_n is None else backend.alpha_sum() * inv_lam_n
        except WorkersLost as more:
            lost = more.workers


def _start_duals(w, backend, elastic, lam, n):
    """Set the workers' ``α`` from ``w`` (a warm start); return ``(Σ α_i x_i / n, events)``.

    ``α`` is ``s`` times the dual values that match ``w``'s margins, ``s`` the
    best of :data:`WARM_SCALES` for the dual objective.  A worker lost
    meanwhile is recovered from and the dual state set again everywhere (the
    re-read chunks too); without an elastic controller the loss is raised.
    """
    events = []
    while True:
        try:
            sums, u = backend.start_duals(w, WARM_SCALES)
            # the best dual D(sα) = Σ dual_i(sα_i)/n − s²‖u‖²/(2λn²) on the
            # ray: the dual values of w's margins belong to w's λ, and a new
            # λ scales w(α) by λ_old/λ_new (for the squared loss, unbounded).
            # A pure L1's rounds start from a proximal problem: any α is fine
            s = 1.0 if lam == 0 else WARM_SCALES[int(np.argmax(
                sums / n - WARM_SCALES ** 2 * float(np.sum(u * u)) / (2.0 * lam * n * n)))]
            if s != 1.0:
                backend.scale_duals(s)
            return s * u / n, events
        except WorkersLost as lost:
            if elastic is None:
                raise
            events.extend(_recover(elastic, backend, lost.workers)[0])


def _elastic_controller(backend, scaling_policy, max_workers):
    """The :class:`~daskelastic.elastic.ElasticController` of an elastic backend, or None."""
    from .elastic import ElasticController
    from .scaling import make_scaling_policy

    scaling = make_scaling_policy(scaling_policy)
    if not isinstance(backend, ElasticBackend):
        if scaling_policy is not None:
            raise ValueError(f"scaling_policy={scaling_policy!r} needs workers to release: "
                             "backend='dask' (or 'auto', or a client) or 'simulated', "
                             "not a fit in this process")
        return None
    return ElasticController(backend, scaling, max_workers=max_workers)


def _status(worker, outcome):
    if worker in outcome.dropped:
        return "dropped"
    if worker in outcome.preempted:
        return "preempted"
    return "used"



