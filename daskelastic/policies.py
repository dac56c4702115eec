"""Straggler policies: how long a round waits, and what becomes of late work.

Pure decision code (no Dask, no I/O), in the spirit of ``distributed``'s
``AdaptiveCore``: before a round the driver asks the policy for a
:class:`RoundPlan`; after it, the driver tells the policy what it observed in
a :class:`RoundRecord`.  The driver
(:func:`daskelastic.rounds.run_planned_round`) carries the plan out on any
backend.

A plan says

- how many results end the wait (``wait_for``), optionally stretched by a
  ``slack`` (cut once a further ``slack`` times the compute seconds of the
  ``wait_for``-th result have passed after its arrival) and bounded by a
  ``deadline``;
- what happens to the results not in at the cut (``late``): ``"drop"`` — the
  workers are told to stop and their work is discarded, their chunks keep
  their ``α`` — or ``"preempt"`` — the workers are told to stop and the
  partial work they did is added with the rest.

Either way the stopped workers still report the loss and dual sums of their
rows at the round-start iterate, so every round is certified by a full
duality gap.

The policies:

=====================  ====================================================
``"wait"``             :class:`WaitPolicy` — every result, every round.
``"backup"``           :class:`BackupPolicy` — the fastest ``K − b``.
``"dynamic"``          :class:`DynamicBackupPolicy` — ``b`` re-chosen each
                       round to maximise the estimated progress per second.
``"preempt"``          :class:`PreemptPolicy` — stop the stragglers once
                       half of the workers are done (plus a slack), keep
                       their partial work.
=====================  ====================================================
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field

import numpy as np

__all__ = ["RoundPlan", "RoundRecord", "StragglerPolicy", "WaitPolicy", "BackupPolicy",
           "DynamicBackupPolicy", "PreemptPolicy", "make_straggler_policy",
           "STRAGGLER_POLICIES"]


@dataclass(frozen=True)
class RoundPlan:
    """How one round collects its results.

    Parameters
    ----------
    wait_for : int
        The round is cut once this many results are in (after ``slack``).
    late : {"drop", "preempt"}
        What happens to the results not in at the cut.
    slack : float
        Cut ``slack ×`` the compute seconds of the ``wait_for``-th result after
        its arrival.  A share of the compute time, not of the arrival time:
        the arrival includes the round's fixed costs (sending ``w``,
        scheduling, returning ``Δw``), which waiting longer does not buy.
    deadline : float or None
        Cut at the latest this many seconds after the round started.
    n_backup : int
        The number of backup workers ``b`` this plan stands for (recorded).
    max_used : int or None
        At most this many results can be added (``None``: all); the driver
        caps the CoCoA+ subproblem parameter with it (``σ′ ≤ γ · max_used``,
        the safe value).
    estimate : dict
        What the policy estimated when choosing (recorded in the history).
    max_drops : int or None
        A worker whose work was dropped this many rounds in a row is waited
        for in the next round, and its result is added.  Without this, a
        persistently slow worker's rows would never be updated again and the
        fit would stall short of the optimum (unlike SGD workers, CoCoA+
        workers own their rows).  None turns the guard off.

    Examples
    --------
    >>> from daskelastic.policies import RoundPlan
    >>> plan = RoundPlan(wait_for=3, n_backup=1, max_used=3)
    >>> plan.late, plan.slack, plan.max_drops
    ('drop', 0.0, 3)
    """

    wait_for: int
    late: str = "drop"
    slack: float = 0.0
    deadline: float | None = None
    n_backup: int = 0
    max_used: int | None = None
    estimate: dict = field(default_factory=dict)
    max_drops: int = 3


@dataclass
class RoundRecord:
    """What the driver observed in one round.

    Parameters
    ----------
    round_id : int
        The round.
    arrival : dict
        ``{worker: seconds}`` from the round start to the arrival of its result.
    full_time : dict
        ``{worker: seconds}`` the worker needed, or would have needed, for its
        whole step budget (extrapolated from its rate for stopped workers).
    used : dict
        ``{worker: fraction}`` of the worker's step budget whose work was added
        (``0`` for a dropped result).
    rows : dict
        ``{worker: rows held}``.
    cut : float or None
        Seconds after the start when late workers were told to stop.
    duration : float
        Seconds from this round's start to the next one's.
    gap : float
        Relative duality gap of the round-start iterate.
    n_backup : int
        ``b`` of the plan.

    Examples
    --------
    Worker ``"b"``, holding three quarters of the rows, was dropped:

    >>> from daskelastic.policies import RoundRecord
    >>> record = RoundRecord(round_id=0, arrival={"a": 1.0, "b": 3.0},
    ...                      full_time={"a": 1.0, "b": 3.0}, used={"a": 1.0, "b": 0.0},
    ...                      rows={"a": 100, "b": 300}, cut=1.0, duration=1.1, gap=0.05,
    ...                      n_backup=1)
    >>> record.fraction_updated
    0.25
    """

    round_id: int
    arrival: dict
    full_time: dict
    used: dict
    rows: dict
    cut: float
    duration: float
    gap: float
    n_backup: int = 0

    @property
    def fraction_updated(self):
        """Share of the rows whose round work was added (stopped workers count pro rata)."""
        total = sum(self.rows.values())
        if total == 0:
            return 0.0
        return sum(self.used[k] * self.rows[k] for k in self.rows) / total


class StragglerPolicy:
    """Base class: decides each round how long to wait and what to do with late work.

    Subclasses implement :meth:`plan`; :meth:`observe` keeps the last
    ``window`` :class:`RoundRecord` in ``self.records``.

    Parameters
    ----------
    window : int
        Rounds of history kept for estimates.

    Examples
    --------
    A policy that waits for half of the workers and keeps the partial work
    of the others:

    >>> from daskelastic.policies import RoundPlan, StragglerPolicy
    >>> class HalfPolicy(StragglerPolicy):
    ...     name = "half"
    ...     def plan(self, n_workers):
    ...         return RoundPlan(wait_for=max(n_workers // 2, 1), late="preempt")
    >>> policy = HalfPolicy(window=5)
    >>> policy.plan(8).wait_for
    4
    >>> policy
    HalfPolicy(window=5)
    """

    name = "policy"

    def __init__(self, window: int = 10) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self.window = window
        self.records: deque[RoundRecord] = deque(maxlen=window)

    def plan(self, n_workers: int) -> RoundPlan:
        """The plan of the next round.

        Parameters
        ----------
        n_workers : int
            ``K``, the workers holding data.

        Returns
        -------
        RoundPlan
            How the round waits and what becomes of late results.
        """
        raise NotImplementedError

    def observe(self, record: RoundRecord) -> None:
        """Learn from a finished round.

        Parameters
        ----------
        record : RoundRecord
            What the driver observed.
        """
        self.records.append(record)

    def reset(self) -> None:
        """Forget the observed rounds (a new fit begins)."""
        self.records.clear()

    def restart_progress(self, round_id: int) -> None:
        """Forget how the gap fell before round ``round_id``; keep the round times.

        The driver calls this when the way the gap falls per round changes
        but the workers do not (logistic regression switching acceleration
        on).  Policies that do not measure progress ignore it.

        Parameters
        ----------
        round_id : int
            The first round of the new regime.
        """

    def __repr__(self):
        params = {k: v for k, v in vars(self).items() if k != "records"}
        inner = ", ".join(f"{k}={v!r}" for k, v in params.items())
        return f"{type(self).__name__}({inner})"


class WaitPolicy(StragglerPolicy):
    """Synchronous rounds: wait for every worker.

    Parameters
    ----------
    window : int
        Rounds of history kept.

    Examples
    --------
    >>> from daskelastic.policies import WaitPolicy
    >>> WaitPolicy().plan(4).wait_for
    4
    """

    name = "wait"

    def plan(self, n_workers):
        return RoundPlan(wait_for=n_workers, late="drop", max_used=n_workers)


class BackupPolicy(StragglerPolicy):
    """Static backup workers: use the fastest ``K − b`` results, drop the rest.

    The late workers are told to stop; their work is discarded and their
    chunks keep their dual state.  Since at most ``K − b`` results are added,
    the safe ``σ′`` is ``γ (K − b)``: bolder steps than with all ``K``.

    Parameters
    ----------
    n_backup : int, default=1
        ``b``; capped at ``K − 1``.  ``straggler_policy="backup"`` is this
        policy with one backup worker; pass ``BackupPolicy(n_backup=b)`` for
        another ``b``.
    window : int, default=10
        Rounds of history kept.

    Examples
    --------
    >>> from daskelastic.policies import BackupPolicy
    >>> BackupPolicy(n_backup=1).plan(4).wait_for
    3
    >>> BackupPolicy(n_backup=2).plan(4).wait_for
    2
    """

    name = "backup"

    def __init__(self, n_backup: int = 1, window: int = 10) -> None:
        super().__init__(window)
        if n_backup < 0:
            raise ValueError(f"n_backup must be >= 0, got {n_backup}")
        self.n_backup = int(n_backup)

    def plan(self, n_workers):
        b = min(self.n_backup, n_workers - 1)
        return RoundPlan(wait_for=n_workers - b, late="drop", n_backup=b,
                         max_used=n_workers - b)


class DynamicBackupPolicy(StragglerPolicy):
    """Dynamic backup workers: each round, the ``b`` with the best progress per second.

    After Xu, Neglia and Sebastianelli (*Dynamic backup workers for parallel
    machine learning*).  For every ``b`` in ``0 … K−1`` the policy estimates

    - the round time ``T(b)``: the mean, over the last ``window`` rounds, of
      the ``(K − b)``-th smallest per-worker round time (stopped workers'
      times are extrapolated from the rate at which they were going), plus
      the mean per-round overhead beyond that (stopping, aggregating,
      communicating);
    - the progress ``P(b)``: the fall of ``log(gap)`` in a round, modelled as
      a power ``f^β`` of the share ``f = (K − b)/K`` of the data whose work
      is added, scaled to the mean fall over the last ``progress_window``
      rounds (``β`` fitted on the observed rounds: 1 until they vary ``f``
      enough to tell, clipped to ``[0.5, 2]``), plus each ``b``'s measured
      deviation from the model, shrunk towards zero by how little its
      measurements can be trusted: the mean fall of the ``n`` rounds with
      that ``b`` gets the weight ``n / (n + s² / τ²)``, with ``s²`` the
      variance of one round's fall (pooled within each ``b``) and
      ``τ = 0.25 ×`` the modelled fall.  When the falls are steady the
      measurements decide within a few rounds; with Catalyst on a real
      cluster one round's fall varies by twice its mean, no fit is long
      enough to tell ``b = 1`` from ``b = 2`` by measurement, and the model
      decides,

    and picks the ``b`` maximising ``P(b) / T(b)``.  Every ``explore_every``
    rounds it tries a neighbour of the best ``b`` instead, the one tried
    least: measured progress also reflects what the model cannot, such as
    the bolder local steps (``σ′ ≤ γ(K − b)``) of a larger ``b``.  A
    neighbour is tried only while one more round with it would give its
    measurements a weight of at least 0.1: where the falls are mostly noise
    a round measured is a worse round that teaches nothing.  A smaller
    ``b`` (waiting for one more result) is tried only if its longer round
    could pay at the model's largest exponent,
    ``T(b) / T(best) ≤ ((K − b) / (K − best))²``: with a 4× straggler a
    ``b = 0`` round is more than twice as long and never made up for it.  While the
    best ``b`` stays the same from one exploration to the next and the
    neighbours it may explore have measured progress, the interval doubles (up to
    ``4 × explore_every``): an exploration round is a round spent on a ``b``
    believed worse, and once the choice is settled they should be rarer; as
    soon as a neighbour's measurements leave the progress window, the
    interval returns to ``explore_every``.  The first choice is made after
    ``warmup`` rounds; the first round's times count (start-up costs and
    all) until there is another.  The estimates are recorded in
    ``history_`` with every round.

    Parameters
    ----------
    max_backup : int, optional
        Largest ``b`` considered (default ``K − 1``).
    warmup : int
        Rounds before the first choice (at least one).  They wait for every result on two or
        three workers and drop only the slowest on four or more: the first
        round's slowest is most often a worker still starting up, and a
        stopped worker's time is extrapolated, so the estimates lose nothing.
    window : int
        Rounds of history kept for the round-time estimates.
    explore_every : int or None
        Rounds between two tries of a neighbouring ``b``; None never explores.
    progress_window : int
        Rounds of gap falls kept for the progress estimates.

    Examples
    --------
    >>> from daskelastic.policies import DynamicBackupPolicy
    >>> DynamicBackupPolicy().plan(4).n_backup   # no rounds observed yet
    1
    """

    name = "dynamic"

    def __init__(self, max_backup: int | None = None, warmup: int = 1, window: int = 10,
                 explore_every: int | None = 6, progress_window: int = 30) -> None:
        super().__init__(window)
        if max_backup is not None and max_backup < 0:
            raise ValueError(f"max_backup must be >= 0, got {max_backup}")
        if explore_every is not None and explore_every < 2:
            raise ValueError(f"explore_every must be >= 2 or None, got {explore_every}")
        if progress_window < 2:
            raise ValueError(f"progress_window must be >= 2, got {progress_window}")
        self.max_backup = max_backup
        self.warmup = warmup
        self.explore_every = explore_every
        self.progress_window = progress_window
        # (b, log-gap fall) per round
        self._falls: deque[tuple[int, float]] = deque(maxlen=progress_window)
        self._tries: dict[int, int] = {}      # b -> rounds observed with it
        self._since_explore = 0
        self._interval = explore_every   # rounds between explorations, now
        self._explored_best = None       # the best b at the last exploration
        self._progress_from = 0          # gap falls before this round are not kept

    def reset(self):
        super().reset()
        self.restart_progress(0)

    def restart_progress(self, round_id):
        self._falls.clear()
        self._tries, self._since_explore = {}, 0
        self._interval, self._explored_best = self.explore_every, None
        self._progress_from = round_id

    def observe(self, record):
        prev = self.records[-1] if self.records else None
        super().observe(record)
        fall = self._fall(prev, record)
        if fall is not None:
            self._falls.append((prev.n_backup, fall))
            self._tries[prev.n_backup] = self._tries.get(prev.n_backup, 0) + 1

    def _fall(self, before, after):
        """The fall of ``log(gap)`` from round ``before`` to the next, ``after``,
        or None where it does not measure the current regime's progress: not
        consecutive, before ``restart_progress``, a gap not positive, or from
        round 0 (which starts from ``w = 0`` and falls like no other)."""
        if (before is None or after.round_id != before.round_id + 1
                or before.round_id == 0 or before.round_id < self._progress_from
                or not (before.gap > 0 and after.gap > 0)):
            return None
        return math.log(before.gap) - math.log(after.gap)

    def progress_estimates(self, n_workers, top, beta=None):
        """``{b: estimated log-gap fall per round}`` for ``b`` in ``0 … top``.

        The model's share ``f^β`` of the progress, scaled to the gap falls
        kept, plus each ``b``'s measured deviation from it, weighted by how
        much its measurements can be trusted (see the class docstring).

        Parameters
        ----------
        n_workers : int
            ``K``.
        top : int
            The largest ``b`` considered.
        beta : float, optional
            The model's exponent, when the caller has it
            (:meth:`progress_exponent` by default).

        Returns
        -------
        dict
            The estimated fall of ``log(gap)`` per round for each ``b``.
        """
        return self._progress(n_workers, top, beta)[0]

    def _progress(self, n_workers, top, beta=None):
        """:meth:`progress_estimates`, and the weight each ``b``'s measurements
        would have after one more round with it (0 while the noise is not
        known, with fewer falls kept than two plus the number of ``b`` they
        were measured with, or while there is no net progress)."""
        K = n_workers
        top = min(top, K - 1)
        beta = self.progress_exponent() if beta is None else beta
        model = {b: ((K - b) / K) ** beta for b in range(K)}
        seen = {}
        for b, fall in self._falls:
            if b < K:
                seen.setdefault(b, []).append(fall)
        n = sum(len(v) for v in seen.values())
        total = sum(sum(v) for v in seen.values())
        scale = total / sum(len(v) * model[b] for b, v in seen.items()) if n else 0.0
        if not scale > 0:
            # no net progress in the window (or nothing measured): the model alone
            return {b: model[b] for b in range(top + 1)}, dict.fromkeys(range(top + 1), 0.0)
        means = {b: float(np.mean(v)) for b, v in seen.items()}
        # the noise of one round's fall: spread within each b, pooled
        dof = n - len(seen)
        noise = (sum(float(np.sum(np.square(np.subtract(v, means[b]))))
                     for b, v in seen.items()) / dof) if dof >= 2 else math.inf
        out, next_weight = {}, {}
        for b in range(top + 1):
            prior = scale * model[b]
            m = len(seen.get(b, ()))
            tau2 = (_MODEL_ERROR * prior) ** 2
            next_weight[b] = _shrink_weight(m + 1, tau2, noise)
            w = _shrink_weight(m, tau2, noise)
            estimate = (prior if w == 0.0 else means[b] if w == 1.0
                        else prior + w * (means[b] - prior))
            # a fall measured below a quarter of the model's share (noise, a
            # momentum restart) is not a verdict that excludes this b
            out[b] = max(estimate, _LEAST_SHARE * prior)
        return out, next_weight

    def plan(self, n_workers):
        K = n_workers
        top = K - 1 if self.max_backup is None else min(self.max_backup, K - 1)
        complete = [r for r in self.records if len(r.full_time) == K]
        if K < 2 or len(complete) < max(self.warmup, 1):
            # the first round's slowest is most often a worker still starting
            # up, and a stopped worker's time is extrapolated: on four or more
            # workers only the slowest is dropped, at a quarter of the data or less
            b = min(1, top) if K >= 4 else 0
            return RoundPlan(wait_for=K - b, late="drop", n_backup=b, max_used=K - b,
                             estimate={"reason": "warm-up"})
        # round 0 carries start-up costs (actors, compiled kernels): not typical,
        # but its times are better than waiting for a straggler again
        usable = [r for r in complete if r.round_id > 0] or complete
        times = np.array([sorted(r.full_time.values()) for r in usable])
        order_stats = times.mean(axis=0)           # E[t_(j)], j = 1 … K
        overhead = float(np.mean([_overhead(r) for r in usable]))
        beta = self.progress_exponent()
        progress, next_weight = self._progress(K, top, beta)
        # T(b): the (K − b)-th fastest worker's time plus the overhead
        seconds = {b: float(order_stats[K - b - 1] + overhead) for b in range(top + 1)}
        rates = {b: progress[b] / max(seconds[b], 1e-9) for b in seconds}
        # ties (to rounding) go to the smaller b: fewer workers' work thrown away
        top_rate = max(rates.values())
        best = min(b for b in rates if rates[b] >= top_rate * (1 - 1e-9))
        chosen, explored = best, False
        self._since_explore += 1
        if self.explore_every is not None and self._since_explore >= self._interval:
            # a round with a b is worth measuring only if its fall could
            # move the estimate: not while one round's fall is mostly noise
            neighbours = [b for b in (best - 1, best + 1) if 0 <= b <= top
                          and (b > best or _could_pay(b, best, seconds, K))
                          and next_weight[b] >= _INFORMATIVE]
            if neighbours:
                chosen = min(neighbours, key=lambda b: (self._tries.get(b, 0), b))
                explored = True
                self._since_explore = 0
                # the best held since the last exploration: explore half as often
                # back off only while the neighbours' progress is measured:
                # otherwise an exploration would be a round spent for nothing
                settled = best == self._explored_best and all(
                    self._measured(b) >= _MIN_MEASURED for b in neighbours)
                self._interval = (min(2 * self._interval, 4 * self.explore_every)
                                  if settled else self.explore_every)
                self._explored_best = best
        estimate = {"rates": {b: float(v) for b, v in rates.items()},
                    "progress": {b: float(v) for b, v in progress.items()},
                    "beta": beta, "best": best, "explore": explored,
                    "round_seconds": seconds[chosen]}
        return RoundPlan(wait_for=K - chosen, late="drop", n_backup=chosen,
                         max_used=K - chosen, estimate=estimate)

    def _measured(self, b):
        """Rounds with ``b`` among the gap falls kept."""
        return sum(1 for bb, _ in self._falls if bb == b)

    def progress_exponent(self):
        """``β`` of the progress model ``Δlog(gap) ∝ f^β``.

        Returns
        -------
        float
            The fitted exponent, clipped to ``[0.5, 2]``; 1 until the observed
            rounds vary the share of data updated enough to tell.
        """
        recs = list(self.records)
        pts = []
        for a, b in zip(recs[:-1], recs[1:]):
            fall = self._fall(a, b)
            f = a.fraction_updated
            if fall is not None and fall > 0 and f > 0:
                pts.append((math.log(f), math.log(fall)))
        if len(pts) < 4:
            return 1.0
        lf, lp = np.array(pts).T
        if np.ptp(lf) < math.log(1.15):
            return 1.0
        slope = np.polyfit(lf, lp, 1)[0]
        return float(np.clip(slope, _MIN_BETA, _MAX_BETA))


class PreemptPolicy(StragglerPolicy):
    """Preemption with partial work: stop the stragglers, keep what they did.

    The round is cut once a ``fraction`` of the workers have returned and a
    further ``slack`` of their compute time has passed (a worker that is
    only a little slower than the others still finishes), or at a ``deadline`` of
    ``deadline_factor`` times the median recent round time, whichever comes
    first.  The workers still running are told to stop; they stop at their
    next check of the stop flag (every 1,024 coordinate steps) and their
    partial work is added with the rest.  An SDCA step never lowers the
    local objective, so partial work is always safe to add; since every
    result may be added, the safe ``σ′`` is ``γ K``.

    Parameters
    ----------
    fraction : float
        Share of the workers whose results start the countdown, in (0, 1].
    slack : float
        The cut comes ``slack ×`` the compute seconds of the ``fraction``-th
        result after its arrival.
    deadline_factor : float or None
        Cut at the latest at this many times the median per-worker round time
        of the last ``window`` rounds; None for no deadline.
    window : int
        Rounds of history kept for the deadline.

    Examples
    --------
    >>> from daskelastic.policies import PreemptPolicy
    >>> plan = PreemptPolicy(fraction=0.5, slack=0.2).plan(4)
    >>> plan.wait_for, plan.late, plan.slack
    (2, 'preempt', 0.2)
    """

    name = "preempt"

    def __init__(self, fraction: float = 0.5, slack: float = 0.2,
                 deadline_factor: float | None = 2.0, window: int = 10) -> None:
        super().__init__(window)
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        if slack < 0:
            raise ValueError(f"slack must be >= 0, got {slack}")
        if deadline_factor is not None and deadline_factor <= 0:
            raise ValueError(f"deadline_factor must be positive, got {deadline_factor}")
        self.fraction = float(fraction)
        self.slack = float(slack)
        self.deadline_factor = deadline_factor

    def plan(self, n_workers):
        wait_for = max(1, math.ceil(self.fraction * n_workers))
        deadline = None
        if self.deadline_factor is not None and self.records:
            # statistics.median: np.median's overhead per call dominates on a
            # few values, and this runs in the driver every round
            typical = float(statistics.median([statistics.median(r.full_time.values())
                                               for r in self.records if r.full_time]))
            deadline = self.deadline_factor * typical
        return RoundPlan(wait_for=wait_for, late="preempt", slack=self.slack,
                         deadline=deadline, max_used=n_workers,
                         estimate={} if deadline is None else {"deadline": deadline})


def _shrink_weight(m, tau2, noise):
    """The weight ``m / (m + noise / τ²)`` of the mean of ``m`` measured falls
    against the model's prior (variance ``τ²``); 0 while the noise is unknown."""
    return m * tau2 / (m * tau2 + noise) if math.isfinite(noise) else 0.0


def _could_pay(b, best, seconds, K):
    """Whether waiting for more workers (``b < best``) could be worth a round.

    Only if the longer round is made up by the progress model at its largest
    exponent: ``T(b) / T(best) ≤ ((K − b) / (K − best))^2`` (``seconds`` maps
    ``b`` to ``T(b)``).  Exploring a smaller ``b`` costs a round that waits
    for the straggler, and waiting for one more result rarely makes up for
    it (the docs' *Benchmarks* page, *Straggler policies on a LocalCluster*).
    """
    return seconds[b] <= ((K - b) / (K - best)) ** _MAX_BETA * seconds[best]


def _overhead(record):
    """Seconds of a round beyond the arrival of the last result it used."""
    used = [record.arrival[k] for k, f in record.used.items() if f > 0]
    last = max(used) if used else 0.0
    return max(record.duration - last, 0.0)


#: The range of the progress model's exponent ``β``.
_MIN_BETA, _MAX_BETA = 0.5, 2.0

#: Rounds a ``b`` must have been used (within the progress window) before
#: the exploration of it counts as settled and explorations back off.
_MIN_MEASURED = 3

#: The model's relative error, a priori: the prior standard deviation of a
#: ``b``'s true progress around the scaled ``f^β``.  A ``b``'s measured mean
#: fall gets the weight ``n / (n + noise / (_MODEL_ERROR · model)²)``, with
#: ``noise`` the pooled variance of one round's fall.  On the LocalCluster the
#: fall of ``log(gap)`` in a round has a standard deviation of about 0.45
#: around a mean of about 0.2 (flights, 4 workers, Catalyst; 11 fits): telling
#: ``b = 2``'s progress from ``b = 1``'s (about 0.8 of it) would take hundreds
#: of rounds of each, so there the model decides.  With steady falls the
#: measurements decide after a few rounds.
_MODEL_ERROR = 0.25

#: Neighbours are explored only while one more round with them would give
#: their measurements at least this weight (see ``_MODEL_ERROR``): with the
#: LocalCluster's noise a round of ``b = 2`` got a weight of about 0.01, and
#: an exploration was a worse round that taught nothing.
_INFORMATIVE = 0.1

#: The least progress estimated for a ``b``, as a share of the model's.
_LEAST_SHARE = 0.25

#: Policy names accepted by ``straggler_policy``.
STRAGGLER_POLICIES = {"wait": WaitPolicy, "backup": BackupPolicy,
                      "dynamic": DynamicBackupPolicy, "preempt": PreemptPolicy}


def make_straggler_policy(spec: str | StragglerPolicy) -> StragglerPolicy:
    """A fresh :class:`~daskelastic.policies.StragglerPolicy` from a name or an instance.

    Parameters
    ----------
    spec : str or StragglerPolicy
        One of ``STRAGGLER_POLICIES`` (each with its default parameters:
        ``"backup"`` is ``BackupPolicy(n_backup=1)``) or a policy instance
        (copied, so a fit does not change the caller's object).

    Returns
    -------
    StragglerPolicy
        A policy with no rounds observed.

    Examples
    --------
    >>> from daskelastic.policies import BackupPolicy, make_straggler_policy
    >>> make_straggler_policy("backup").n_backup
    1
    >>> make_straggler_policy(BackupPolicy(n_backup=2)).n_backup
    2
    """
    import copy

    if isinstance(spec, StragglerPolicy):
        policy = copy.deepcopy(spec)
        policy.reset()
        return policy
    if spec not in STRAGGLER_POLICIES:
        raise ValueError(f"straggler_policy must be one of {sorted(STRAGGLER_POLICIES)} "
                         f"or a StragglerPolicy instance, got {spec!r}")
    return STRAGGLER_POLICIES[spec]()
