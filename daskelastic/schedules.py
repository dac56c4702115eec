"""The round loop's two schedules: σ′ (how bold the workers' steps are) and Catalyst's κ.

Both have the shape of the straggler and scaling policies: the driver asks
before a round and reports after it.  They hold no Dask object and touch no
data, so they are tested without a cluster.

- :class:`SigmaSchedule`: the subproblem parameter σ′ of each round and the
  step ``t`` its proposals are added with (the docs' *Algorithms*, *Adaptive
  σ′*).
- :class:`Acceleration`: Catalyst's proximal problems ``P(w) + κ/2‖w − y‖²``
  (Lin, Mairal and Harchaoui, "A Universal Catalyst for First-Order
  Optimization", NeurIPS 2015): κ, the centres ``y`` and when they move, and
  the map from the dual image to the iterate (the docs' *Algorithms*,
  *Acceleration*).

The measurements behind the constants are in
``benchmarks/results/acceleration_rules.md``.
"""

import numpy as np

from .losses import HINGE, LOGISTIC, POISSON, SOFTMAX, SQUARED, SQUARED_HINGE
from .objective import soft_threshold

__all__ = ["SigmaSchedule", "Acceleration", "ACCELERATION_KAPPA"]

#: Initial proximal weight of the acceleration: ``κ = c·sqrt(λ · mean ‖x_i‖²)``
#: (the best κ grew like the square root of λ on real one-hot tables).
ACCELERATION_KAPPA = 0.25
#: An outer (Catalyst) step is taken once the inner gap fell by this factor.
_INNER_REDUCTION = 0.3
#: An outer step is also taken after this many rounds of a proximal problem
#: whose gap is below ``_STUCK_INNER_RATIO`` times the mismatch term of the
#: certified gap (the distance to the centre), whether or not it fell by
#: ``_INNER_REDUCTION``: solving the proximal problem better cannot lower the
#: gap then, and a problem started nearly solved could otherwise hover.
_STUCK_INNER_ROUNDS = 2
_STUCK_INNER_RATIO = 0.1
#: With ``acceleration="auto"``, κ doubles when a proximal problem took at least
#: this many rounds, and halves when it took one.
_SLOW_INNER_ROUNDS = 10
#: For the hinge, κ halves instead when a proximal problem took at least this
#: many rounds: there a larger κ cost rounds.
_HINGE_SLOW_INNER_ROUNDS = 5
#: For the hinge, κ is also multiplied by ``_HINGE_STALL_FACTOR`` when the
#: certified relative gap fell by less than ``_HINGE_STALL_RATIO`` over the
#: last ``_HINGE_STALL_OUTERS`` outer steps at one κ: its proximal problems
#: can end in two rounds each while the gap creeps.
_HINGE_STALL_OUTERS = 12
_HINGE_STALL_RATIO = 0.8
_HINGE_STALL_FACTOR = 0.1
#: With ``acceleration="auto"``, logistic regression (and on one worker every
#: classification loss) starts without acceleration and switches it on once
#: the relative gap fell by less than ``_PLAIN_RATIO`` over the last
#: ``_PLAIN_WINDOW`` rounds.
_PLAIN_WINDOW = 6
_PLAIN_RATIO = 0.6
#: For the hinge, whose gap jumps from round to round: the smallest gap of the
#: last ``_HINGE_PLAIN_WINDOW`` rounds against the smallest before them.
_HINGE_PLAIN_WINDOW = 12
#: The losses' second derivatives (their largest, for the logistic losses)
#: that scale κ of a pure L1 problem (see ``_kappa``).
_CURVATURE = {SQUARED: 1.0, LOGISTIC: 0.25, SOFTMAX: 0.25, SQUARED_HINGE: 2.0}


class SigmaSchedule:
    """The σ′ of each round, and the step its proposals are added with.

    Parameters
    ----------
    sigma : float or None
        A fixed σ′ (the proposals are then added with ``t = γ``); None adapts
        it (all losses but the hinge and the Poisson loss): the first round
        uses the safe ``γ K′`` (``K′`` the results the round's plan can add),
        every other round after one that measured a better σ′ uses that σ′
        scaled to ``K′`` (kept between ``min(1, γK′)`` and ``γK′``), and the
        proposals are added with the step that maximises a lower bound of
        the dual's gain (``_best_step``), so that every round still
        raises the dual.
    gamma : float
        CoCoA+'s aggregation parameter γ, the largest step.
    loss : int
        The loss code.

    Examples
    --------
    >>> from daskelastic.losses import LOGISTIC
    >>> from daskelastic.schedules import SigmaSchedule
    >>> schedule = SigmaSchedule(None, 1.0, LOGISTIC)
    >>> schedule.plan(k_max=4)          # the safe σ′ = γ K′
    4.0
    """

    def __init__(self, sigma, gamma, loss):
        self.gamma = gamma
        self.fixed = None if sigma is None else float(sigma)
        # a σ′ below the safe K leaves each local problem less curvature than
        # the others' updates need; the step t ≤ 1 then restores the dual's
        # ascent, but the Poisson loss's exponential overflows first (margins
        # of hundreds after one such round).  For the hinge bolder steps cost
        # rounds.
        self.adaptive = sigma is None and loss not in (HINGE, POISSON)
        self._wanted = None          # (σ′ the last round asks for, results it added)
        self._adapted = self._adapted_last = False

    def plan(self, k_max):
        """The σ′ of a round whose plan can add ``k_max`` results."""
        sig = self.gamma * k_max if self.fixed is None else self.fixed
        # every other round; the safe rounds between damp what a smaller σ′
        # overshoots along directions the workers' rows share (the dual's
        # bound measures ‖ΣΔv‖², blind to that; the primal objective sees it)
        self._adapted = self.adaptive and self._wanted is not None and not self._adapted_last
        if self._adapted:
            wanted, added = self._wanted
            sig = min(max(wanted * k_max / added, min(1.0, sig)), sig)
        return sig

    def ran(self):
        """The planned round ran: the next one alternates from it."""
        self._adapted_last = self._adapted

    def observe(self, sig, n_used, dual_change, proposal, w, lam_in, n):
        """The step ``t`` of the round's ``n_used`` added proposals (summed in ``proposal``).

        ``dual_change`` is the sum of their dual changes, ``w`` the round's
        iterate and ``lam_in`` λ′; without an added result this returns γ.
        """
        if not (self.adaptive and n_used):
            return self.gamma
        best = _best_step(dual_change, proposal, w, lam_in, n)
        if best is None:   # no usable bound (rounding near the optimum): the
            self._wanted = None     # CoCoA+-safe step, and the safe σ′ next
            return min(self.gamma, sig / n_used)
        self._wanted = (sig / best, n_used)
        return min(self.gamma, best)

    def reset(self):
        """Forget the measured σ′: the workers changed, or the problem did."""
        self._wanted = None


class Acceleration:
    """Catalyst's proximal problems ``P(w) + κ/2 ‖w − y_k‖²`` and their centres.

    The driver keeps the dual image ``v = Σ α_i x_i / (λ′ n)`` of the workers'
    ``α``, ``λ′ = λ + κ``; this object keeps κ, ``λ′`` and the shift
    ``κ y / λ′``, maps ``v`` to the iterate (:meth:`iterate`), and returns ``v``
    rescaled whenever ``λ′`` changes (``α`` itself never changes here).  The
    centres move with Nesterov momentum, restarted when the primal goes up;
    with ``acceleration="auto"`` κ adapts to how many rounds each proximal
    problem takes (``_next_kappa``), and logistic regression starts with
    plain rounds and switches the acceleration on once they stall.

    Parameters
    ----------
    problem : daskelastic.driver.Problem
        The problem fitted.
    kappa : float
        The κ of the first rounds (0: plain rounds).
    kappa_later : float
        The κ to switch on once plain rounds stall (0: never).
    adaptive : bool
        ``acceleration="auto"``: κ adapts, and the plain-round rules apply.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.driver import Problem
    >>> from daskelastic.schedules import Acceleration
    >>> problem = Problem(loss=3, lam=0.1, n_samples=10, n_features=2, n_targets=1,
    ...                   intercept_scaling=0.0)
    >>> accel = Acceleration(problem, kappa=0.3, kappa_later=0.0, adaptive=True)
    >>> accel.lam_in, accel.inv_lam_n
    (0.4, 0.25)
    >>> accel.iterate(np.ones((3, 1))).ravel().tolist()    # v + κy/λ′, y = 0
    [1.0, 1.0, 1.0]
    """

    def __init__(self, problem, kappa, kappa_later, adaptive):
        self.problem = problem
        self.kappa = kappa
        self.kappa_later = kappa_later
        self.adaptive = adaptive
        self.lam_in = problem.lam + kappa
        self.shift = problem.zeros()       # κ y / λ′: the iterate is map(v + shift)
        self.n_outer = 0
        self._plain_gaps = []              # relative gaps of the plain rounds
        self._outer_gaps = []              # certified gaps at the outer steps (_next_kappa)
        self._forget_centre()

    @classmethod
    def for_fit(cls, acceleration, backend, problem, warm):
        """The acceleration of a fit (``acceleration`` as :func:`~daskelastic.driver.run_cocoa`
        takes it) on ``backend``.

        ``warm``: the fit starts from coefficients near the optimum, and takes
        plain rounds first.  Asks the backend for the rows' norms: a
        :class:`~daskelastic.driver.WorkersLost` propagates.
        """
        adaptive = acceleration == "auto"
        kappa = _kappa(acceleration, backend, problem)
        if not kappa and problem.lam == 0:
            raise ValueError("a pure L1 penalty needs the acceleration (its proximal "
                             "problems are what the rounds solve): pass "
                             "acceleration='auto' or a positive value")
        kappa_later = 0.0
        if adaptive and kappa and problem.lam > 0 and (
                problem.loss in (LOGISTIC, SOFTMAX) or warm):
            kappa_later, kappa = kappa, 0.0
        elif adaptive and not kappa:
            kappa_later = _kappa_if_stalled(backend, problem)
        return cls(problem, kappa, kappa_later, adaptive)

    @property
    def inv_lam_n(self):
        """``1 / (λ′ n)``, what the workers scale ``Δα`` by."""
        return 1.0 / (self.lam_in * self.problem.n_samples)

    def iterate(self, v):
        """The iterate of the dual image ``v`` (the intercept row as ``v``'s)."""
        return _iterate(v, self.shift, self.problem.l1, self.lam_in, self.problem.n_features)

    def start(self, u, w_start):
        """``v`` of a warm start whose dual values give ``u = Σ α_i x_i / n``.

        With κ, the first centre is ``w(α)`` and the iterate stays ``w(α)``;
        for a pure L1 it is ``w_start``, which is the iterate at that optimum.
        """
        problem = self.problem
        lam = problem.lam
        if not self.kappa:
            return u / lam
        centre = w_start if lam == 0 else _iterate(u / lam, 0.0, problem.l1, lam,
                                                   problem.n_features)
        self.shift = (self.kappa / self.lam_in) * centre
        return u / self.lam_in

    def mismatch(self, w, v, penalised):
        """``λ/2 ‖w − (λ′/λ) v‖²`` over ``penalised``: what an L2 problem's gap adds to FY/n."""
        if not self.kappa:
            return 0.0
        lam = self.problem.lam
        return 0.5 * lam * float(np.sum(np.square((w - (self.lam_in / lam) * v)[penalised])))

    def observe(self, v, w, objective, inner_gap, mismatch):
        """After a committed round: ``(v, switched)``.

        ``switched``: the acceleration was switched on from this round's
        iterate (plain rounds stalled); the driver then resets its σ′ and the
        straggler policy's progress.  Otherwise, once the proximal problem is
        solved well enough (its gap ``inner_gap`` fell by ``_INNER_REDUCTION``),
        or as well as matters (the certified gap is the ``mismatch`` to the
        centre, which only moving the centre lowers), the centre moves.
        """
        if self.kappa_later:
            self._plain_gaps.append(objective.relative_gap)
            if _plain_stalled(self._plain_gaps, self.problem.loss):
                # accelerate from here, the current iterate the first centre:
                # α stays, so v follows λ′ and the iterate is unchanged
                kappa, self.kappa_later = self.kappa_later, 0.0
                v = self._reweigh(v, kappa, self.iterate(v))
                self._forget_centre()
                return v, True
        if not self.kappa:
            return v, False
        self._inner_start = inner_gap if self._inner_start is None else self._inner_start
        self._inner_rounds += 1
        if inner_gap <= _INNER_REDUCTION * self._inner_start or (
                self._inner_rounds >= _STUCK_INNER_ROUNDS
                and inner_gap <= _STUCK_INNER_RATIO * mismatch):
            v = self._next_centre(v, w, objective)
        return v, False

    def workers_changed(self, v, backend):
        """After workers joined, left or were rebalanced: ``(v, switched_off)``.

        The gaps measured so far no longer predict the next ones.  Under
        ``"auto"``, classification on one worker runs without acceleration
        (SDCA alone is fast there): α stays, and the iterate becomes ``w(α)``
        of the original problem.
        """
        self._plain_gaps.clear()
        self._outer_gaps.clear()
        if not (self.adaptive and not _auto_accelerates(backend, self.problem)):
            return v, False
        self.kappa_later = _kappa_if_stalled(backend, self.problem)
        if not self.kappa:
            return v, False
        v = self._reweigh(v, 0.0, self.problem.zeros())
        self._forget_centre()
        return v, True

    def workers_lost(self):
        """After lost workers' dual values restarted: the gap jumped, not a slowdown."""
        self._plain_gaps.clear()
        self._outer_gaps.clear()

    def _next_centre(self, v, w, objective):
        lam = self.problem.lam
        q = np.sqrt(lam / self.lam_in)
        self._streak = self._streak + 1 if objective.primal <= self._p_prev else 0
        # constant momentum for a strongly convex P, (k − 1)/(k + 2) without
        # (a pure L1); restarted (0) when the primal went up
        beta = 0.0 if not self._streak else (1 - q) / (1 + q) if q > 0 \
            else (self._streak - 1) / (self._streak + 2)
        y = w if self._w_prev is None else w + beta * (w - self._w_prev)
        self._w_prev, self._p_prev = w, objective.primal
        kappa = self.kappa
        if self.adaptive:
            kappa = _next_kappa(kappa, self._inner_rounds, self.problem.loss,
                                self._outer_gaps, objective.relative_gap)
        # (α stays: the proposals just committed warm-start the next problem)
        v = self._reweigh(v, kappa, y)
        self._inner_start, self._inner_rounds = None, 0
        self.n_outer += 1
        return v

    def _reweigh(self, v, kappa, centre):
        v, self.lam_in, _, self.shift = _reweigh(v, self.problem.lam, self.lam_in,
                                                 self.problem.n_samples, kappa, centre)
        self.kappa = kappa
        return v

    def _forget_centre(self):
        # the previous outer iterate and its primal, the first gap and the
        # rounds of the current proximal problem, the momentum's streak
        self._w_prev, self._p_prev = None, np.inf
        self._inner_start, self._inner_rounds, self._streak = None, 0, 0


def _iterate(v, shift, l1, lam_in, d):
    """The primal iterate of the dual state: ``v + shift``, its ``d`` feature rows
    soft-thresholded by ``μ / λ′`` when the problem has an L1 part (``l1 = μ``);
    see :func:`daskelastic.objective.soft_threshold`."""
    w = v + shift
    if l1:
        w[:d] = soft_threshold(w[:d], l1 / lam_in)
    return w


def _reweigh(v, lam, lam_in, n, kappa, centre):
    """The iterate's parts for a new proximal weight ``κ`` and centre ``y``.

    α does not change, so ``v = Σ α_i x_i / (λ' n)`` follows ``λ' = λ + κ``;
    returns ``(v, λ', 1 / (λ' n), κ y / λ')``.  The iterate ``v + κ y / λ'``
    is unchanged when ``y`` is the current iterate.
    """
    lam_new = lam + kappa
    return v * (lam_in / lam_new), lam_new, 1.0 / (lam_new * n), (kappa / lam_new) * centre


def _best_step(change, proposal, w, lam_in, n):
    """The step along the added proposals that maximises a lower bound of the dual's gain.

    With ``V = Σ Δv_k`` (``proposal``) over the added workers and
    ``c = Σ Δ(dual sum)_k`` (``change``, the sum of their
    :attr:`~daskelastic.solvers.LocalResult.dual_change`), the dual
    ``D(α) = Σ dual_i / n − λ′⟨v, s⟩ − λ′‖v‖²/2`` (``s`` the acceleration's
    shift, ``w = v + s``) gains, for the step ``t ∈ [0, 1]``,

    ``D(α + tΔα) − D(α) ≥ t (c/n − λ′⟨V, w⟩) − t² λ′‖V‖²/2``,

    because each dual value is concave in ``α_i`` (equality for the hinge and
    at ``t = 1``).  Returns the maximiser ``t* = (c/n − λ′⟨V, w⟩) / (λ′‖V‖²)``
    (unclipped), or None when the proposals are empty or the bound has no
    positive slope (rounding on a converged fit).  Every local solver raises
    its own CoCoA+ subproblem, so the slope is at least ``σ′λ′ Σ‖Δv_k‖²/2 > 0``.
    """
    curvature = lam_in * float(np.sum(proposal * proposal))
    slope = change / n - lam_in * float(np.sum(proposal * w))
    if not (curvature > 0.0 and slope > 0.0 and np.isfinite(slope)):
        return None
    return slope / curvature


def _next_kappa(kappa, inner_rounds, loss, outer_gaps=None, gap=None):
    """κ of the next proximal problem under ``acceleration="auto"``.

    Halved after a proximal problem solved in one round.  Otherwise doubled
    after one that took ``_SLOW_INNER_ROUNDS`` or more, except for the hinge:
    there it is halved after one that took ``_HINGE_SLOW_INNER_ROUNDS`` or
    more (doubling left more hinge fits short of the gap).

    For the hinge, given ``outer_gaps`` (the certified relative gaps at the
    outer steps since κ last changed, which this keeps) and this step's
    ``gap``, κ is also lowered by ``_HINGE_STALL_FACTOR`` once those steps
    stalled (:func:`_outer_stalled`).  The count starts afresh whenever κ
    changes, so the stall is measured under one κ and only one rule changes
    κ in a step.

    Examples
    --------
    >>> from daskelastic.schedules import _next_kappa
    >>> from daskelastic.losses import HINGE, LOGISTIC
    >>> _next_kappa(1.0, 12, LOGISTIC), _next_kappa(1.0, 12, HINGE), _next_kappa(1.0, 1, HINGE)
    (2.0, 0.5, 0.5)
    >>> gaps = [1e-3] * 12
    >>> _next_kappa(1.0, 2, HINGE, gaps, 1e-3), gaps
    (0.1, [])
    """
    if inner_rounds <= 1:
        new = 0.5 * kappa
    elif loss == HINGE:
        new = 0.5 * kappa if inner_rounds >= _HINGE_SLOW_INNER_ROUNDS else kappa
    else:
        new = 2.0 * kappa if inner_rounds >= _SLOW_INNER_ROUNDS else kappa
    if loss != HINGE or outer_gaps is None:
        return new
    if new != kappa:
        outer_gaps.clear()
    outer_gaps.append(gap)
    if _outer_stalled(outer_gaps):
        outer_gaps.clear()
        new *= _HINGE_STALL_FACTOR
    return new


def _outer_stalled(gaps):
    """Whether the hinge's outer steps stalled (then ``acceleration="auto"`` lowers κ tenfold).

    ``gaps`` are the certified relative gaps at the outer steps since κ last
    changed (by either rule); stalled means the last fell by less than
    ``_HINGE_STALL_RATIO`` against the one ``_HINGE_STALL_OUTERS`` steps before.

    Examples
    --------
    >>> from daskelastic.schedules import _outer_stalled
    >>> _outer_stalled([1e-3] * 13), _outer_stalled([1e-3] * 12 + [7e-4])
    (True, False)
    """
    return len(gaps) > _HINGE_STALL_OUTERS and \
        gaps[-1] > _HINGE_STALL_RATIO * gaps[-1 - _HINGE_STALL_OUTERS]


def _auto_accelerates(backend, problem):
    """Whether ``acceleration="auto"`` accelerates this fit.

    On two or more workers, always, and a pure L1 problem always (its rounds
    solve the proximal problems).  On one, only the squared loss (Ridge),
    where SDCA alone needs many times Catalyst's rounds once ``alpha`` is
    small; for the classification losses on one worker SDCA alone is faster
    until it stalls (:func:`_kappa_if_stalled`).
    """
    return len(backend.workers()) >= 2 or problem.loss == SQUARED or problem.lam == 0


def _plain_stalled(gaps, loss):
    """Whether plain rounds stopped paying (``acceleration="auto"`` then accelerates).

    ``gaps`` are the relative gaps of the plain rounds so far.  Stalled: the
    last fell by less than ``_PLAIN_RATIO`` against the one ``_PLAIN_WINDOW``
    rounds before; for the hinge, whose gap jumps up and down, the smallest of
    the last ``_HINGE_PLAIN_WINDOW`` against the smallest before them.

    Examples
    --------
    >>> from daskelastic.schedules import _plain_stalled
    >>> from daskelastic.losses import HINGE, LOGISTIC
    >>> _plain_stalled([1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01], LOGISTIC)
    False
    >>> _plain_stalled([1.0, 0.5, 0.4, 0.39, 0.38, 0.37, 0.36, 0.35], LOGISTIC)
    True
    >>> _plain_stalled([1e-3, 4e-3] * 7, HINGE)
    True
    """
    if loss == HINGE:
        window = _HINGE_PLAIN_WINDOW
        return len(gaps) > window and min(gaps[-window:]) > _PLAIN_RATIO * min(gaps[:-window])
    return len(gaps) > _PLAIN_WINDOW and \
        gaps[-1] > _PLAIN_RATIO * gaps[-1 - _PLAIN_WINDOW]


def _kappa_if_stalled(backend, problem):
    """κ for ``acceleration="auto"`` to switch on if SDCA alone stalls (one worker).

    On one worker SDCA alone is usually faster for classification, but at a
    large ``C`` (or on badly scaled columns) its gap falls by a few percent a
    round: the plain rounds then hand over to the acceleration, as logistic
    regression's do on two workers (:func:`_plain_stalled`); fits that
    converge fast never switch.
    """
    return _kappa(ACCELERATION_KAPPA, backend, problem)


def _kappa(acceleration, backend, problem):
    """The proximal weight κ of the acceleration (0 when off)."""
    if acceleration is None or acceleration == "none":
        return 0.0
    if acceleration == "auto":
        if not _auto_accelerates(backend, problem):
            return 0.0
        factor = ACCELERATION_KAPPA
    else:
        factor = float(acceleration)
        if factor < 0:
            raise ValueError(f"acceleration must be 'auto', None or >= 0, got {factor}")
    mean_sq = backend.row_sq_norm_sum() / problem.n_samples + problem.intercept_scaling ** 2
    if problem.lam == 0:
        # no λ to scale by: the mean eigenvalue of the loss's Hessian at 0,
        # c̄ · mean ‖x_i‖² / d, within the range of the fastest fixed κ on
        # three real tables
        mean_curvature = _CURVATURE.get(problem.loss, 1.0) * (
            mean_sq - problem.intercept_scaling ** 2) / max(problem.n_features, 1)
        return (factor / ACCELERATION_KAPPA) * (mean_curvature or 1.0)
    return factor * float(np.sqrt(problem.lam * mean_sq))
