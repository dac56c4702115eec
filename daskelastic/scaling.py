"""Scaling policies: how many workers a fit should use, from its convergence rate.

Pure decision code (no Dask, no I/O), shaped like ``distributed``'s
``AdaptiveCore``: after every round the driver tells the policy what it
observed in a :class:`ScalingRecord`, then asks it for a
:class:`ScalingDecision` — the target number of workers ``K′`` and why.  The
driver (:class:`~daskelastic.elastic.ElasticController`) carries a decision out: it moves the
chunks of the workers it lets go, with their dual state, to the workers that
stay, and hands the freed workers back to the cluster.

The idea (Kaufmann, Parnell and Kourtis, *Elastic CoCoA*): more partitions
make each round faster but each round less useful, and the number of workers
that makes the duality gap fall fastest *per second* shrinks as training goes
on.  :class:`ConvergenceScalingPolicy` watches the rate at which ``log(gap)``
falls per second over a sliding window of rounds, remembers the best rate
seen at the current ``K``, and scales in once the rate has stayed well below
that best for a few evaluations in a row (hysteresis), never below
``min_workers``.

:class:`ThroughputTracker` measures each worker's rows per second, the speed
that chunk placement is balanced by.

=================  ======================================================
``None``           :class:`FixedScaling` — keep the workers the fit has.
``"convergence"``  :class:`ConvergenceScalingPolicy`.
=================  ======================================================
"""

from __future__ import annotations

import copy
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

__all__ = ["ScalingRecord", "ScalingDecision", "ScalingPolicy", "FixedScaling",
           "ConvergenceScalingPolicy", "ThroughputTracker", "make_scaling_policy",
           "SCALING_POLICIES"]


@dataclass(frozen=True)
class ScalingRecord:
    """What the driver observed in one round, as a scaling policy needs it.

    Parameters
    ----------
    round_id : int
        The round.
    time : float
        Seconds since the fit began, at the end of the round.
    gap : float
        Relative duality gap of the round-start iterate.
    n_workers : int
        Workers that held chunks in the round.
    core_share : float or None
        The share of a CPU core the round's workers got: the median over them
        of the solver's CPU seconds over its wall seconds (1 when each worker
        had a core to itself; 0.5 with four workers on two cores).  None when
        not measured (the simulated cluster).

    Examples
    --------
    >>> from daskelastic.scaling import ScalingRecord
    >>> ScalingRecord(round_id=3, time=1.5, gap=1e-3, n_workers=4).n_workers
    4
    """

    round_id: int
    time: float
    gap: float
    n_workers: int
    core_share: float | None = None


@dataclass(frozen=True)
class ScalingDecision:
    """A scaling policy's answer: the number of workers to use next.

    Parameters
    ----------
    target : int
        ``K′``; equal to the current ``K`` to keep the workers.
    reason : str
        Why (recorded in the history).
    estimate : dict
        The numbers the decision was made from (recorded in the history).

    Examples
    --------
    >>> from daskelastic.scaling import ScalingDecision
    >>> ScalingDecision(2, "rate deteriorated").target
    2
    """

    target: int
    reason: str = ""
    estimate: dict = field(default_factory=dict)


class ScalingPolicy:
    """Base class: after each round, the number of workers the fit should use.

    Subclasses implement :meth:`decide`.  :meth:`target` calls it, clips the
    answer to ``[min_workers, K]`` (these policies only scale in) and keeps a
    bounded ``log`` of the decisions that changed ``K``, like
    ``AdaptiveCore.log``.

    Parameters
    ----------
    min_workers : int, default=1
        Never fewer workers than this.
    release_workers : "auto" or bool, default="auto"
        What becomes of the workers a scale-in lets go: ``True`` retires them
        through the scheduler (on a simulated cluster: they leave it and
        their billing stops); ``False`` just stops using them; ``"auto"``
        retires them from a cluster the fit started itself (and on a
        simulated cluster), leaves them to an
        :class:`~daskelastic.ElasticAdaptive` to close, and otherwise just
        stops using them (see :class:`~daskelastic.elastic.ElasticController`).

    Examples
    --------
    A policy that halves ``K`` after every round, down to two workers:

    >>> from daskelastic.scaling import ScalingDecision, ScalingPolicy
    >>> class Halving(ScalingPolicy):
    ...     def decide(self, n_workers):
    ...         return ScalingDecision(n_workers // 2, "halving")
    >>> Halving(min_workers=2).target(3).target
    2
    """

    name = "policy"

    def __init__(self, min_workers: int = 1,
                 release_workers: bool | Literal["auto"] = "auto") -> None:
        if min_workers < 1:
            raise ValueError(f"min_workers must be >= 1, got {min_workers}")
        if not (release_workers == "auto" or isinstance(release_workers, (bool, np.bool_))):
            raise ValueError(f"release_workers must be 'auto', True or False, "
                             f"got {release_workers!r}")
        self.min_workers = int(min_workers)
        self.release_workers = release_workers if release_workers == "auto" \
            else bool(release_workers)
        self.records: list[ScalingRecord] = []
        self.log: deque[tuple[int | None, dict]] = deque(maxlen=100)

    def observe(self, record: ScalingRecord) -> None:
        """Learn from a finished round.

        Parameters
        ----------
        record : ScalingRecord
            What the driver observed.
        """
        self.records.append(record)

    def decide(self, n_workers: int) -> ScalingDecision:
        """The unclipped decision for a fit on ``n_workers`` (subclasses implement it).

        Parameters
        ----------
        n_workers : int
            Workers holding chunks now.

        Returns
        -------
        ScalingDecision
            The target and why.
        """
        raise NotImplementedError

    def target(self, n_workers: int) -> ScalingDecision:
        """The decision for a fit on ``n_workers`` workers, within ``[min_workers, K]``.

        Parameters
        ----------
        n_workers : int
            Workers holding chunks now.

        Returns
        -------
        ScalingDecision
            The target ``K′`` and why.
        """
        decision = self.decide(n_workers)
        floor = min(self.min_workers, n_workers)
        k = int(min(max(decision.target, floor), n_workers))
        if k != decision.target:
            decision = ScalingDecision(k, decision.reason, decision.estimate)
        if k != n_workers:
            last = self.records[-1].round_id if self.records else None
            self.log.append((last, {"from": n_workers, "to": k, "reason": decision.reason}))
        return decision

    def reset(self) -> None:
        """Forget the observed rounds (a new fit begins)."""
        self.records = []
        self.log.clear()

    def __repr__(self):
        params = {k: v for k, v in vars(self).items()
                  if k not in ("records", "log") and not k.startswith("_")}
        inner = ", ".join(f"{k}={v!r}" for k, v in params.items())
        return f"{type(self).__name__}({inner})"


class FixedScaling(ScalingPolicy):
    """Keep every worker the fit started with.

    Parameters
    ----------
    min_workers : int, default=1
        Unused (the workers are kept).
    release_workers : "auto" or bool, default="auto"
        Unused (no worker is let go by a scale-in).

    Examples
    --------
    >>> from daskelastic.scaling import FixedScaling
    >>> FixedScaling().target(4).target
    4
    """

    name = "fixed"

    def decide(self, n_workers):
        return ScalingDecision(n_workers, "fixed")


class ConvergenceScalingPolicy(ScalingPolicy):
    """Scale in when the convergence rate per second deteriorates.

    The *rate* is the fall of ``log(gap)`` per second: minus the
    least-squares slope of ``log(gap)`` against time over the last ``window``
    rounds, all on the current ``K`` (rounds before the last change of ``K``
    are not mixed in).  The policy keeps the best rate seen at the current
    ``K``; an evaluation is *deteriorated* when the rate is below
    ``threshold`` times that best.  After ``wait_count`` deteriorated
    evaluations in a row the target becomes ``K′ = max(min_workers,
    floor(K · factor))`` (at least one fewer); any good evaluation resets the
    count.  After a change of ``K`` the policy waits for a fresh window; if
    the first rate on ``K′`` beats the best on ``K`` by the factor
    ``improvement``, the scale-in helped and the policy scales in again
    without waiting for a deterioration.

    Workers that share CPU cores add nothing: four worker processes on two
    cores compute no faster than two, and CoCoA+ needs more rounds the more
    parts the data is split into.  When the workers' median share of a core
    (``core_share`` of :class:`~daskelastic.scaling.ScalingRecord`) stays at
    or below ``contention`` for ``contention_rounds`` rounds in a row (round
    0, which loads the kernels, not counted) and ``K · share`` rounds (halves
    up) to fewer than ``K`` workers, the target becomes that many — without
    waiting for a window of rates.  The rate over the rounds on ``K`` so far
    then counts as the best on ``K``, for the rule above (which also needs
    the rate on ``K′`` to be positive).  After such a scale-in the rule
    applies again only if the share rose by a fifth: a share held low
    whatever the number of workers (CPU quotas, other jobs, a hypervisor's
    steal time) is not contention among the fit's workers, and the rates
    decide from there.

    Parameters
    ----------
    min_workers : int, default=1
        Never fewer workers than this.
    release_workers : "auto" or bool, default="auto"
        What becomes of the workers a scale-in lets go (see
        :class:`~daskelastic.scaling.ScalingPolicy`): ``True`` retires them through the
        scheduler, ``False`` just stops using them.
    window : int
        Rounds per rate estimate (at least 2).
    threshold : float
        A rate below ``threshold ×`` the best at this ``K`` is deteriorated,
        in (0, 1).
    wait_count : int
        Deteriorated evaluations in a row before scaling in (hysteresis).
    factor : float
        ``K′ = floor(K · factor)``, in (0, 1).
    improvement : float
        When the first rate measured after a scale-in beats the best rate
        before it by this factor, the policy scales in again at once (fewer
        workers are better at this stage of training).
    warmup : int
        The fit's first rounds, whose gap often rises before it falls, are
        not measured.
    min_gap : float
        Gaps at or below this are ignored (a converged fit has nothing to
        measure).
    contention : float or None
        Scale in to the cores the workers get when their share of a core is
        at or below this, in (0, 1); None never does.
    contention_rounds : int
        Rounds in a row the share must stay at or below ``contention``.

    Examples
    --------
    Time per round constant, the fall of ``log(gap)`` per round shrinking:

    >>> import math
    >>> from daskelastic.scaling import ConvergenceScalingPolicy, ScalingRecord
    >>> policy = ConvergenceScalingPolicy(window=3, wait_count=2, warmup=0)
    >>> log_gap = 0.0
    >>> for r in range(12):
    ...     policy.observe(ScalingRecord(r, time=float(r), gap=math.exp(log_gap),
    ...                                  n_workers=4))
    ...     log_gap -= 1.0 if r < 5 else 0.2
    ...     decision = policy.target(4)
    >>> decision.target
    2

    Four workers that each get half a core (four processes on two cores):

    >>> policy = ConvergenceScalingPolicy()
    >>> for r in range(3):
    ...     policy.observe(ScalingRecord(r, time=0.1 * (r + 1), gap=0.9 ** r,
    ...                                  n_workers=4, core_share=0.5))
    >>> decision = policy.target(4)
    >>> decision.target, decision.reason
    (2, 'workers share cores')
    """

    name = "convergence"

    def __init__(self, min_workers: int = 1, *,
                 release_workers: bool | Literal["auto"] = "auto", window: int = 5,
                 threshold: float = 0.5, wait_count: int = 2, factor: float = 0.5,
                 improvement: float = 1.5, warmup: int = 3, min_gap: float = 1e-12,
                 contention: float | None = 0.8, contention_rounds: int = 2) -> None:
        super().__init__(min_workers, release_workers)
        if window < 2:
            raise ValueError(f"window must be >= 2, got {window}")
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {threshold}")
        if wait_count < 1:
            raise ValueError(f"wait_count must be >= 1, got {wait_count}")
        if not 0.0 < factor < 1.0:
            raise ValueError(f"factor must be in (0, 1), got {factor}")
        self.window = int(window)
        self.threshold = float(threshold)
        self.wait_count = int(wait_count)
        self.factor = float(factor)
        if improvement <= 1.0:
            raise ValueError(f"improvement must be > 1, got {improvement}")
        self.improvement = float(improvement)
        self.warmup = int(warmup)
        self.min_gap = float(min_gap)
        if contention is not None and not 0.0 < contention < 1.0:
            raise ValueError(f"contention must be None or in (0, 1), got {contention}")
        if contention_rounds < 1:
            raise ValueError(f"contention_rounds must be >= 1, got {contention_rounds}")
        self.contention = None if contention is None else float(contention)
        self.contention_rounds = int(contention_rounds)
        self._best = None
        self._count = 0
        self._previous_best = None
        self._shared = None     # the share of a core at the last scale-in for contention

    def reset(self):
        super().reset()
        self._best = None
        self._count = 0
        self._previous_best = None
        self._shared = None

    def rate(self, n_workers=None):
        """Fall of ``log(gap)`` per second over the last window on ``n_workers``.

        Parameters
        ----------
        n_workers : int, optional
            Only rounds on this many workers count (default: any).

        Returns
        -------
        float or None
            The rate, None until a full window of such rounds was observed.
        """
        recent = self._recent(n_workers, self.warmup, self.window)
        return _rate(recent) if len(recent) == self.window else None

    def _recent(self, n_workers, first_round, most):
        """The last records (up to ``most``, newest first) on ``n_workers``,
        from round ``first_round`` on, with a gap to measure."""
        recent = []
        for rec in reversed(self.records):
            if n_workers is not None and rec.n_workers != n_workers:
                break
            if not rec.gap > self.min_gap or rec.round_id < first_round:
                break
            recent.append(rec)
            if len(recent) == most:
                break
        return recent

    def _cores(self, n_workers):
        """``(cores, share)`` when the workers shared fewer cores than ``K``, else None.

        ``cores`` is ``K · share`` rounded (halves up), the share the median of
        the last ``contention_rounds`` rounds, each at or below ``contention``.
        After a scale-in for contention, only a share that rose since shows
        the same kind of contention: a share held low whatever the number of
        workers (CPU quotas, other jobs, a hypervisor's steal time) does not.
        """
        if self.contention is None:
            return None
        recent = self._recent(n_workers, 1, self.contention_rounds)
        shares = [r.core_share for r in recent]
        if len(recent) < self.contention_rounds or None in shares \
                or max(shares) > self.contention:
            return None
        share = float(np.median(shares))
        cores = math.floor(n_workers * share + 0.5)
        if cores >= n_workers:
            return None
        if self._shared is not None and share < _SHARE_RISE * self._shared:
            return None
        return cores, share

    def observe(self, record):
        if self.records and record.n_workers != self.records[-1].n_workers:
            self._previous_best = self._best
            self._best = None
            self._count = 0
        super().observe(record)

    def decide(self, n_workers):
        rate = self.rate(n_workers)
        estimate = {"rate": rate, "best_rate": self._best}
        shared = self._cores(n_workers)
        if shared is not None and n_workers > self.min_workers:
            # more workers than cores: the extra ones add rounds, not speed.
            # The rate so far on K (warm-up rounds too, not round 0's kernel
            # loading) is the best on K, so that a clear gain on the cores'
            # worth of workers scales in again
            cores, self._shared = shared
            rough = _rate(self._recent(n_workers, 1, len(self.records)))
            known = [r for r in (self._best, rough) if r is not None]
            self._best = max(known) if known else None
            estimate.update(cores=cores, share=self._shared, best_rate=self._best)
            return ScalingDecision(max(cores, self.min_workers), "workers share cores",
                                   estimate)
        if rate is None:
            return ScalingDecision(n_workers, "warm-up", estimate)
        if (self._best is None and self._previous_best is not None and rate > 0
                and (self._previous_best <= 0 or rate > self.improvement * self._previous_best)
                and n_workers > self.min_workers):
            # the last scale-in helped clearly: fewer workers are better at
            # this stage, go on without waiting for a deterioration
            estimate["previous_best"] = self._previous_best
            self._previous_best = None
            return ScalingDecision(self._smaller(n_workers), "scale-in helped", estimate)
        if self._best is None or rate > self._best:
            self._best = rate
            self._count = 0
            estimate["best_rate"] = rate
            return ScalingDecision(n_workers, "improving", estimate)
        if rate >= self.threshold * self._best:
            self._count = 0
            return ScalingDecision(n_workers, "steady", estimate)
        self._count += 1
        estimate["count"] = self._count
        if self._count < self.wait_count or n_workers <= self.min_workers:
            return ScalingDecision(n_workers, "deteriorating", estimate)
        return ScalingDecision(self._smaller(n_workers), "rate deteriorated", estimate)

    def _smaller(self, n_workers):
        return max(min(n_workers - 1, math.floor(n_workers * self.factor)), self.min_workers)


#: After a scale-in for contention, the share of a core must have risen by this
#: factor for the rule to apply again.
_SHARE_RISE = 1.2


def _rate(records):
    """Minus the least-squares slope of ``log(gap)`` against time (None if undefined)."""
    if len(records) < 2:
        return None
    t = np.array([r.time for r in records])
    if np.ptp(t) <= 0:
        return None
    g = np.log([r.gap for r in records])
    return float(-np.polyfit(t, g, 1)[0])


class ThroughputTracker:
    """Each worker's measured speed, in coordinate steps per solver second.

    The speed of a worker is the median of its last ``window`` measurements
    (a round's steps over its solver seconds, injected or real slowness
    included); a worker never measured gets the median speed of the others.

    Parameters
    ----------
    window : int
        Measurements kept per worker.

    Examples
    --------
    >>> from daskelastic.scaling import ThroughputTracker
    >>> t = ThroughputTracker()
    >>> t.observe({"a": (1000, 1.0), "b": (1000, 2.0)})
    >>> t.speeds(["a", "b", "c"])
    {'a': 1000.0, 'b': 500.0, 'c': 750.0}
    """

    def __init__(self, window=5):
        self.window = int(window)
        self._rates = {}

    def observe(self, steps_seconds):
        """Add the measurements of one round (idle workers are skipped).

        Parameters
        ----------
        steps_seconds : dict
            ``{worker: (coordinate steps, solver seconds)}``.
        """
        for k, (steps, seconds) in steps_seconds.items():
            if steps > 0 and seconds > 0:
                self._rates.setdefault(k, deque(maxlen=self.window)).append(steps / seconds)

    def forget(self, workers):
        """Drop the measurements of workers that left.

        Parameters
        ----------
        workers : iterable
            Worker ids.
        """
        for k in workers:
            self._rates.pop(k, None)

    def n_measured(self, worker):
        """Measurements held for ``worker``.

        Parameters
        ----------
        worker : str
            Worker id.

        Returns
        -------
        int
            How many rounds of ``worker`` are held.
        """
        return len(self._rates.get(worker, ()))

    def speeds(self, workers):
        """Measured speeds of ``workers``.

        Parameters
        ----------
        workers : iterable
            Worker ids.

        Returns
        -------
        dict
            ``{worker: steps per second}``.
        """
        known = {k: float(np.median(self._rates[k])) for k in workers if k in self._rates}
        fallback = float(np.median(list(known.values()))) if known else 1.0
        return {k: known.get(k, fallback) for k in workers}


#: Policy names accepted by ``scaling_policy``.
SCALING_POLICIES = {"convergence": ConvergenceScalingPolicy}


def make_scaling_policy(spec: str | ScalingPolicy | None) -> ScalingPolicy:
    """A fresh :class:`~daskelastic.scaling.ScalingPolicy` from None, a name or an instance.

    Parameters
    ----------
    spec : None, str or ScalingPolicy
        None (keep the workers), ``"convergence"`` (with its default
        parameters) or a policy instance (copied, so a fit does not change
        the caller's object).

    Returns
    -------
    ScalingPolicy
        A policy with no rounds observed.

    Examples
    --------
    >>> from daskelastic.scaling import ConvergenceScalingPolicy, make_scaling_policy
    >>> make_scaling_policy(ConvergenceScalingPolicy(min_workers=2)).min_workers
    2
    >>> make_scaling_policy("convergence").release_workers
    'auto'
    >>> make_scaling_policy(None).name
    'fixed'
    """
    if spec is None:
        return FixedScaling()
    if isinstance(spec, ScalingPolicy):
        policy = copy.deepcopy(spec)
        policy.reset()
        return policy
    if spec in SCALING_POLICIES:
        return SCALING_POLICIES[spec]()
    raise ValueError(f"scaling_policy must be None, one of {sorted(SCALING_POLICIES)} "
                     f"or a ScalingPolicy instance, got {spec!r}")
