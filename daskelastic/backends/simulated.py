"""A simulated cluster: the real local solvers, on a virtual clock.

:class:`SimulatedBackend` runs the same :class:`~daskelastic.solvers.ChunkSolver`
as the other backends — in this process, one after the other — but times
every round on a *virtual* clock driven by a :class:`ClusterModel`: how fast
each worker computes, how much slower a straggler is this round, how long
``w`` and ``Δw`` take on the network, when workers fail, join and leave, and
what a worker-second costs.  The driver, the straggler policies and the
history are the production ones; only :meth:`~SimulatedBackend.clock` is
virtual.  So a thousand workers can be studied on two cores, and a fit with
no stragglers and a free network makes exactly the iterates of a real
cluster with the same number of workers.

How a round is timed.  At :meth:`~SimulatedBackend.start_round` (virtual time
``t``) worker ``k`` receives ``w`` at ``t + latency + bytes / bandwidth``,
computes for ``overhead + steps × s_k × slowdown_k`` seconds, where ``s_k``
is its seconds per coordinate step (``seconds_per_nnz × (stored values per
row + 1) × targets / speed_k``), and its ``Δw`` arrives one transfer later.
:meth:`~SimulatedBackend.wait_results` moves the clock to the next arrival
(or by the timeout) and only then runs that worker's solver.  A worker told to
stop at ``t_s`` (:meth:`~SimulatedBackend.stop_round`) hears it one latency
later and, like the real solver, stops at its next check of the stop flag
(every ``STOP_CHECK_EVERY`` steps): its solver runs with exactly the steps it
would have done, which are a prefix of the full round's visiting order, so
its partial ``Δw`` is the one a real stopped worker would send.  Rows not
visited get a gap-only pass, timed at ``GAP_PASS_COST`` of a step each and
not slowed: as with :func:`~daskelastic.testing.inject_stragglers` on a real
cluster, a slowdown stretches the coordinate steps only.

Cluster events (:class:`ClusterEvent`) happen at virtual times:

- ``"join"``: a worker arrives and is billed from then on; with
  ``ClusterModel.rebalance_on_join`` the fit sees it and, after the next
  round, the elastic controller gives it chunks, with their ``α``, when
  moving them shortens the predicted round, as on Dask (up to the fit's
  target number of workers, when it has one; see below).  A fit with one
  chunk per worker has none to give: the joiner idles.
- ``"leave"``: a worker announces its departure; it finishes its round,
  then the controller moves its chunks, with their ``α``, to the remaining
  workers (``w`` is unchanged) and lets it go (its state becomes ``"left"``).
- ``"fail"``: a worker dies.  Its chunks and dual state are gone; the fit
  stops with :class:`WorkerLost` (as a fit on a real cluster fails today)
  the moment the virtual clock passes the failure.  Recovering — re-reading
  the chunks from the source with ``α`` restarted and repairing ``w`` — is
  the driver's job, and :class:`WorkerLost` carries what it needs.

Elastic scale-in (``scaling_policy``): the backend offers the interface of
:class:`~daskelastic.elastic.ElasticController` (``placement``,
``move_chunks``, ``release``, ...), so the driver's controller scales in on
the virtual cluster as it does on Dask, and checks the workers at every round
boundary (a check is free on the virtual clock).  It rebalances by measured
throughput as on Dask: by default in fits with a scaling policy only
(``daskelastic.elastic.rebalance``), so a fixed fit stays reproducible.
The controller is the one owner of placement decisions, as on Dask: the
backend reports departures (:meth:`~SimulatedBackend.departing`) and joiners
(:meth:`~SimulatedBackend.live_workers`) and carries out the moves.  Once the
fit has a target number of workers (``max_workers``, or after a scale-in)
joiners get chunks only while the fit has fewer workers than the target
(others idle and are billed).  A released worker stops being billed when its
chunks have left it.  A failure
is not recovered from (see ``"fail"``).

Moving chunks costs virtual time: every worker's link carries the bytes of
the chunks (and their ``α``) it sends or receives, and the move takes one
latency plus the busiest link's bytes over the bandwidth, whether a leaving
worker, a joining one or a scale-in caused it.  Loading the data at the
start of a fit is free, and the driver's own aggregation is not timed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ..placement import assign_chunks
from ..solvers import STOP_CHECK_EVERY, ChunkSolver
from .base import ElasticBackend

if TYPE_CHECKING:
    from ..testing import StragglerModel

__all__ = ["ClusterModel", "ClusterEvent", "SimulatedBackend", "WorkerLost",
           "calibrate_seconds_per_nnz"]

#: A row the solver does not visit costs this fraction of a coordinate step in
#: the gap-only pass (a margin, no update: a fraction of the step's work).
GAP_PASS_COST = 0.35

#: Bytes of a stored value in a chunk on the wire (CSR: value and column index).
_SPARSE_VALUE_BYTES = 12

_EVENT_KINDS = ("join", "leave", "fail")


@dataclass(frozen=True)
class ClusterEvent:
    """Something that happens to the cluster at a virtual time.

    Parameters
    ----------
    time : float
        Virtual seconds after the fit began.
    kind : {"join", "leave", "fail"}
        A worker arrives, announces a graceful departure, or dies.
    worker : int or str, optional
        The worker that leaves or fails (its position in the initial sorted
        worker list, or its name); ignored for ``"join"``.
    speed : float
        Relative speed of a joining worker.
    price : float, optional
        Price per second of a joining worker (the model's ``price`` by default).

    Examples
    --------
    >>> from daskelastic.backends.simulated import ClusterEvent
    >>> ClusterEvent(2.5, "fail", worker=3)
    ClusterEvent(time=2.5, kind='fail', worker=3, speed=1.0, price=None)
    """

    time: float
    kind: str
    worker: object = None
    speed: float = 1.0
    price: float | None = None

    def __post_init__(self):
        if self.kind not in _EVENT_KINDS:
            raise ValueError(f"event kind must be one of {_EVENT_KINDS}, got {self.kind!r}")
        if self.time < 0:
            raise ValueError(f"event time must be >= 0, got {self.time}")
        if self.kind != "join" and self.worker is None:
            raise ValueError(f"a {self.kind!r} event needs a worker")
        if self.speed <= 0:
            raise ValueError(f"speed must be positive, got {self.speed}")


@dataclass(frozen=True)
class ClusterModel:
    """A virtual cluster: how fast its workers are, how they straggle, fail and cost.

    Parameters
    ----------
    n_workers : int
        Workers at the start of the fit.
    seconds_per_nnz : float, optional
        Compute time per stored value and target visited by the local solver
        at speed 1 (a coordinate step on a row with ``z`` stored values and
        ``m`` targets costs ``(z + 1) · m`` of them, the ``+ 1`` for the
        intercept and per-row work).  None: measured once per process on the
        fit's data
        (:func:`~daskelastic.backends.simulated.calibrate_seconds_per_nnz`);
        set it for runs that are reproducible across processes and machines.
    speeds : sequence of float, optional
        Relative speed of each initial worker (1 by default).
    speed_spread : float
        When ``speeds`` is not given, speeds are drawn once per fit as
        ``exp(N(0, speed_spread²))`` (seeded): a heterogeneous cluster.
    stragglers : daskelastic.testing.StragglerModel, optional
        Per-round slowdowns (:class:`~daskelastic.testing.RandomSlowdown`,
        :class:`~daskelastic.testing.HeavyTailSlowdown`, ...); multiplied with
        any injected by :func:`~daskelastic.testing.inject_stragglers`.
    latency : float
        One-way network latency in seconds (each message: ``w`` out, ``Δw``
        back, a stop request).
    bandwidth : float
        Bytes per second of each worker's link; ``inf`` for a free network.
        ``w`` and ``Δw`` are ``(d + 1) × m`` float64 each.
    overhead : float
        Seconds per worker per round before the solver runs (task dispatch,
        deserialisation).
    price : float or sequence of float
        Price of a worker-second, one for all or one per initial worker.
    events : sequence of ClusterEvent
        Failures, arrivals and departures.
    stop_check_every : int
        A worker told to stop stops at its next multiple of this many
        coordinate steps (the real solver's ``STOP_CHECK_EVERY``); a smaller
        value asks "what if the solvers checked more often".
    rebalance_on_join : bool
        Offer a joining worker to the fit: after the next round the elastic
        controller gives it chunks (with their ``α``) when that shortens the
        predicted round, up to the fit's target number of workers; otherwise
        it idles (and is billed).
    seed : int
        Seed of the speeds drawn from ``speed_spread``.

    Examples
    --------
    >>> from daskelastic.backends.simulated import ClusterModel
    >>> from daskelastic.testing import RandomSlowdown
    >>> model = ClusterModel(n_workers=64, seconds_per_nnz=2e-8,
    ...                      stragglers=RandomSlowdown(factor=4.0),
    ...                      latency=1e-3, bandwidth=1.25e9)
    >>> model.transfer_seconds(8 * 4199)    # one w of the flights table
    0.0010268736
    """

    n_workers: int = 8
    seconds_per_nnz: float | None = None
    speeds: Sequence[float] | None = None
    speed_spread: float = 0.0
    stragglers: StragglerModel | None = None
    latency: float = 0.0
    bandwidth: float = math.inf
    overhead: float = 0.0
    price: float | Sequence[float] = 1.0
    events: Sequence[ClusterEvent] = ()
    stop_check_every: int = STOP_CHECK_EVERY
    rebalance_on_join: bool = True
    seed: int = 0

    def __post_init__(self):
        if int(self.n_workers) < 1:
            raise ValueError(f"n_workers must be >= 1, got {self.n_workers}")
        if self.seconds_per_nnz is not None and not self.seconds_per_nnz > 0:
            raise ValueError(f"seconds_per_nnz must be positive, got {self.seconds_per_nnz}")
        if self.speeds is not None:
            object.__setattr__(self, "speeds", tuple(float(s) for s in self.speeds))
            if len(self.speeds) != self.n_workers or min(self.speeds) <= 0:
                raise ValueError("speeds needs one positive value per worker")
        for name in ("speed_spread", "latency", "overhead"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if int(self.stop_check_every) < 1:
            raise ValueError(f"stop_check_every must be >= 1, got {self.stop_check_every}")
        if not self.bandwidth > 0:
            raise ValueError(f"bandwidth must be positive, got {self.bandwidth}")
        if not np.isscalar(self.price):
            object.__setattr__(self, "price", tuple(float(p) for p in self.price))
            if len(self.price) != self.n_workers:
                raise ValueError("price needs one value per worker, or one for all")
        object.__setattr__(self, "events", tuple(sorted(self.events,
                                                        key=lambda e: e.time)))

    def replace(self, **changes: Any) -> ClusterModel:
        """A copy with some parameters changed.

        Parameters
        ----------
        **changes
            New values of parameters.

        Returns
        -------
        ClusterModel
            The changed copy.
        """
        return replace(self, **changes)

    def transfer_seconds(self, n_bytes: float) -> float:
        """Seconds to send a message one way: latency plus bytes over bandwidth.

        Parameters
        ----------
        n_bytes : float
            Size of the message.

        Returns
        -------
        float
            Virtual seconds.
        """
        return self.latency + n_bytes / self.bandwidth

    def worker_speeds(self) -> np.ndarray:
        """Relative speed of each initial worker.

        Returns
        -------
        ndarray of shape (n_workers,)
            ``speeds``, or speeds drawn from ``speed_spread`` and ``seed``.
        """
        if self.speeds is not None:
            return np.array(self.speeds)
        if self.speed_spread == 0:
            return np.ones(self.n_workers)
        rng = np.random.default_rng([int(self.seed), 7])
        return np.exp(rng.normal(0.0, self.speed_spread, self.n_workers))

    def worker_prices(self) -> np.ndarray:
        """Price of a worker-second of each initial worker.

        Returns
        -------
        ndarray of shape (n_workers,)
            ``price`` for every worker, or the per-worker prices.
        """
        if isinstance(self.price, Sequence):
            return np.array(self.price, dtype=np.float64)
        return np.full(self.n_workers, float(self.price))


class WorkerLost(RuntimeError):
    """A worker holding chunks failed; its chunks and their dual state are lost.

    Raised by :class:`SimulatedBackend` when its virtual clock passes a
    ``"fail"`` :class:`ClusterEvent` of a worker holding chunks, and again
    by its later calls.  The parameters are kept as attributes of the same
    names.

    Parameters
    ----------
    worker : str
        Name of the failed worker (``"sim-00003"``).
    time : float
        Virtual time of the failure.
    chunks : list of int
        Ids of the chunks it held.
    round_id : int or None
        The round that was running, if any.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.backends.simulated import (ClusterEvent, ClusterModel,
    ...                                             SimulatedBackend, WorkerLost)
    >>> from daskelastic.driver import Problem, run_cocoa
    >>> from daskelastic.placement import make_chunks, split_rows
    >>> X = np.random.default_rng(0).normal(size=(800, 5))
    >>> Y = np.sign(X[:, :1] + 0.1)
    >>> problem = Problem(loss=2, lam=1e-3, n_samples=800, n_features=5, n_targets=1,
    ...                   intercept_scaling=1.0)
    >>> chunks = make_chunks(X, Y, np.ones(800), split_rows(800, n_chunks=8))
    >>> model = ClusterModel(n_workers=4, seconds_per_nnz=1e-8,
    ...                      events=[ClusterEvent(1e-5, "fail", worker=1)])
    >>> try:
    ...     run_cocoa(SimulatedBackend(problem, chunks, model), problem)
    ... except WorkerLost as lost:
    ...     print(lost)
    worker sim-00001 failed at virtual time 1e-05 s holding chunks [1, 5]
    """

    def __init__(self, worker, time, chunks, round_id=None):
        super().__init__(f"worker {worker} failed at virtual time {time:.6g} s "
                         f"holding chunks {chunks}")
        self.worker = worker
        self.time = time
        self.chunks = list(chunks)
        self.round_id = round_id


class _Worker:
    """One virtual worker: its solver, speed, price and lifetime."""

    __slots__ = ("name", "speed", "price", "joined", "ended", "state", "solver",
                 "step_seconds", "busy")

    def __init__(self, name, speed, price, joined, solver):
        self.name = name
        self.speed = float(speed)
        self.price = float(price)
        self.joined = float(joined)
        self.ended = None            # virtual time it stopped being billed
        self.state = "up"            # "up" | "leaving" | "left" | "released" | "failed"
        self.solver = solver
        self.step_seconds = 0.0      # seconds per coordinate step at speed 1 x slowdown 1
        self.busy = 0.0              # compute seconds so far

    def billed_seconds(self, now):
        return max((now if self.ended is None else self.ended) - self.joined, 0.0)


class _Run:
    """A worker's part of the running round (times are virtual)."""

    __slots__ = ("start", "step", "gap_step", "budget", "n_rows", "steps", "end",
                 "arrival", "stop_time")

    def __init__(self, start, step, gap_step, budget, n_rows, back):
        self.start = start        # compute starts
        self.step = step          # seconds per coordinate step, slowdown included
        self.gap_step = gap_step  # seconds per row of the gap-only pass
        self.budget = budget
        self.n_rows = n_rows
        self.steps = budget
        self.end = self.compute_end(budget)
        self.arrival = self.end + back
        self.stop_time = None

    def compute_end(self, steps, not_before=0.0):
        """When the solver returns after ``steps`` steps and the gap-only pass."""
        return (max(self.start + steps * self.step, not_before)
                + max(self.n_rows - steps, 0) * self.gap_step)


_CALIBRATION: dict = {}


def calibrate_seconds_per_nnz(problem, chunks, *, min_rows=20_000):
    """Measure this machine's local-solver time per stored value and target.

    Runs the real SDCA solver for one pass over a sample of at least
    ``min_rows`` rows of ``chunks`` (three times, keeping the fastest) and
    divides by the work units of :class:`ClusterModel`.  The value is cached
    per process and kind of problem (loss, sparse or dense, targets, with or
    without intercept), so simulated fits in one process share it and are
    reproducible.

    Parameters
    ----------
    problem : daskelastic.driver.Problem
        The problem the chunks belong to (loss, ``λ``, targets, intercept).
    chunks : list of daskelastic.placement.Chunk
        The fit's chunks; the first of them, in list order, make the sample.
    min_rows : int
        Chunks are added to the sample until it holds at least this many
        rows (or all chunks are in).

    Returns
    -------
    float
        Seconds per stored value and target visited.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.backends.simulated import calibrate_seconds_per_nnz
    >>> from daskelastic.driver import Problem
    >>> from daskelastic.placement import make_chunks, split_rows
    >>> X = np.random.default_rng(0).normal(size=(2000, 5))
    >>> Y = np.sign(X[:, :1])
    >>> chunks = make_chunks(X, Y, np.ones(2000), split_rows(2000, n_chunks=4))
    >>> problem = Problem(loss=2, lam=1e-3, n_samples=2000, n_features=5, n_targets=1,
    ...                   intercept_scaling=1.0)
    >>> calibrate_seconds_per_nnz(problem, chunks) > 0
    True
    """
    sparse = any(sp.issparse(c.X) for c in chunks)
    key = (problem.loss, sparse, problem.n_targets, problem.intercept_scaling != 0)
    if key in _CALIBRATION:
        return _CALIBRATION[key]
    solver = ChunkSolver.for_problem(problem)
    rows = 0
    for c in chunks:
        solver.add_chunk(c.chunk_id, c.X, c.Y, c.sample_weight, shuffled=c.shuffled)
        rows += c.n_rows
        if rows >= min_rows:
            break
    w = problem.zeros()
    best = math.inf
    for r in range(3):
        t0 = time.perf_counter()
        # (a pure L1 problem has λ = 0; its rounds run at λ + κ > 0)
        solver.solve(w, round_id=r, inv_lam_n=1.0 / (problem.n_samples * (problem.lam or 1.0)),
                     sigma=1.0)
        best = min(best, time.perf_counter() - t0)
        solver.discard(r)
    units = (_stored_values(solver) + solver.n_rows) * problem.n_targets
    _CALIBRATION[key] = best / max(units, 1)
    return _CALIBRATION[key]


def _stored_values(solver):
    X = solver._pack()[0]
    return X.nnz if sp.issparse(X) else X.size


class SimulatedBackend(ElasticBackend):
    """Run the local solvers in this process, timed on a virtual cluster.

    Parameters
    ----------
    problem : daskelastic.driver.Problem
        The problem the chunks belong to.
    chunks : list of daskelastic.placement.Chunk
        The training rows, cut into chunks (:func:`~daskelastic.placement.split_rows`
        and ``daskelastic.placement.make_chunks``).
    model : ClusterModel
        The cluster; ``model.n_workers`` workers named ``sim-00000``, ...
        receive the chunks, balanced by rows as on a Dask cluster.  When
        ``model.seconds_per_nnz`` is None, it is measured here with
        :func:`calibrate_seconds_per_nnz`.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.backends.simulated import ClusterModel, SimulatedBackend
    >>> from daskelastic.driver import Problem, run_cocoa
    >>> from daskelastic.placement import make_chunks, split_rows
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(4000, 5))
    >>> Y = np.sign(X[:, :1] + 0.1)
    >>> problem = Problem(loss=2, lam=1e-3, n_samples=4000, n_features=5, n_targets=1,
    ...                   intercept_scaling=1.0)
    >>> chunks = make_chunks(X, Y, np.ones(4000), split_rows(4000, n_chunks=32), shuffle=0)
    >>> backend = SimulatedBackend(problem, chunks,
    ...                            ClusterModel(n_workers=16, seconds_per_nnz=1e-8))
    >>> result = run_cocoa(backend, problem, tol=1e-3, max_iter=200)
    >>> bool(result.converged), result.history[-1]["time"] < 0.01
    (True, True)
    """

    #: The backend models the whole cluster: ``release_workers="auto"`` retires
    #: the workers a scale-in lets go (they stop being billed).
    owns_cluster = True

    #: Virtual seconds between the elastic controller's checks for joined and
    #: lost workers: a check is free here, so every round boundary, whatever
    #: the fit's length.
    check_interval = 0.0

    def __init__(self, problem, chunks, model):
        self.problem = problem
        self.model = model
        self.chunk_sizes = {c.chunk_id: c.n_rows for c in chunks}
        self.released = []           # workers a scale-in let go
        self.lost = []               # workers that failed
        self._width = max(5, len(str(model.n_workers + len(model.events))))
        self._chunk_bytes = {}
        names = [self._name(i) for i in range(model.n_workers)]
        plan = assign_chunks({c.chunk_id: c.n_rows for c in chunks}, names)
        by_id = {c.chunk_id: c for c in chunks}
        speeds, prices = model.worker_speeds(), model.worker_prices()
        self._workers = {}
        for i, name in enumerate(names):
            solver = ChunkSolver.for_problem(problem)
            for cid in plan[name]:
                c = by_id[cid]
                solver.add_chunk(cid, c.X, c.Y, c.sample_weight, shuffled=c.shuffled)
                self._chunk_bytes[cid] = _chunk_bytes(c.X, problem.n_targets)
            self._workers[name] = _Worker(name, speeds[i], prices[i], 0.0, solver)
        self.seconds_per_nnz = model.seconds_per_nnz
        if self.seconds_per_nnz is None:
            self.seconds_per_nnz = calibrate_seconds_per_nnz(problem, chunks)
        for wk in self._workers.values():
            self._set_step_seconds(wk)
        self._message_bytes = 8 * (problem.n_features + 1) * problem.n_targets
        self._now = 0.0
        self._events = list(model.events)
        self._lost = None
        self._arrived = set()        # every worker that joined during the fit
        self._holding = [n for n in names if self._workers[n].solver.n_rows > 0]
        self._round = None           # (round_id, w, inv_lam_n, sigma, seed)
        self._runs = {}              # worker -> _Run of the running round
        self._delivered = set()
        self.log = []                # (time, what, worker, detail)

    # -- helpers -------------------------------------------------------------
    def _name(self, i):
        return f"sim-{i:0{self._width}d}"

    def _set_step_seconds(self, wk):
        n = wk.solver.n_rows
        if n == 0:
            wk.step_seconds = 0.0
            return
        per_row = _stored_values(wk.solver) / n + 1.0
        wk.step_seconds = (self.seconds_per_nnz * per_row * self.problem.n_targets
                           / wk.speed)

    def _transfer(self):
        return self.model.transfer_seconds(self._message_bytes)

    def _advance(self, t):
        """Move the clock to ``t``, applying the cluster events due by then."""
        while self._events and self._events[0].time <= t:
            event = self._events.pop(0)
            self._now = max(self._now, event.time)
            self._apply_event(event)
        self._now = max(self._now, t)

    def _resolve(self, worker):
        if isinstance(worker, (int, np.integer)):
            return self._name(int(worker))
        return worker

    def _apply_event(self, event):
        t = event.time
        if event.kind == "join":
            name = self._name(len(self._workers))
            price = self.model.worker_prices()[0] if event.price is None else event.price
            solver = ChunkSolver.for_problem(self.problem)
            self._workers[name] = _Worker(name, event.speed, price, t, solver)
            self._arrived.add(name)
            self.log.append((t, "join", name, None))
            return
        name = self._resolve(event.worker)
        wk = self._workers.get(name)
        if wk is None or wk.state in ("left", "released", "failed"):
            return
        if event.kind == "leave":
            wk.state = "leaving"
            self.log.append((t, "leave", name, None))
            if wk.solver.n_rows == 0:
                self._release(wk, t, "left")
            return
        self._release(wk, t, "failed")
        self.lost.append(name)
        self.log.append((t, "fail", name, None))
        chunks = wk.solver.chunk_ids
        if chunks:
            self._holding = [k for k in self._holding if k != name]
            self._runs.pop(name, None)
            round_id = None if self._round is None else self._round[0]
            self._lost = WorkerLost(name, t, chunks, round_id)
            raise self._lost

    def _release(self, wk, t, state):
        wk.state = state
        wk.ended = t

    def _check_lost(self):
        if self._lost is not None:
            raise self._lost

    # -- the Backend interface ---------------------------------------------
    def workers(self):
        return list(self._holding)

    @property
    def available_workers(self):
        """Workers up (holding chunks or not), in name order."""
        return sorted(n for n, wk in self._workers.items() if wk.state == "up")

    def clock(self):
        return self._now

    def cost(self):
        return sum(wk.price * wk.billed_seconds(self._now) for wk in self._workers.values())

    def before_round(self, settlements):
        """Apply the cluster events due by now, then settle the last round.

        Departures and arrivals are left to the elastic controller
        (:meth:`departing`, :meth:`live_workers`), which decides where
        chunks go.

        Parameters
        ----------
        settlements : dict
            ``{worker: (round_id, gamma or None)}`` of the last round.

        Returns
        -------
        dict
            Always empty: every settlement was applied here.

        Raises
        ------
        WorkerLost
            When a worker holding chunks has failed.
        """
        self._check_lost()
        self._advance(self._now)
        self.settle(settlements)
        return {}

    def start_round(self, round_id, w, settlements, *, inv_lam_n, sigma, steps, seed,
                    slowdowns=None):
        self._check_lost()
        if self._runs:
            raise RuntimeError("a round is still running on the simulated workers")
        self.settle(settlements)
        self._round = (round_id, w, inv_lam_n, sigma, seed)
        factors = dict(slowdowns or {})
        if self.model.stragglers is not None:
            own = self.model.stragglers.factors(round_id, self._holding)
            factors = {k: own.get(k, 1.0) * factors.get(k, 1.0) for k in self._holding}
        down = self._transfer()
        start = self._now + down + self.model.overhead
        self._delivered = set()
        self._runs = {}
        for name in self._holding:
            wk = self._workers[name]
            n = wk.solver.n_rows
            budget = n if steps is None else int(steps)
            step = wk.step_seconds * float(factors.get(name, 1.0))
            self._runs[name] = _Run(start, step, GAP_PASS_COST * wk.step_seconds,
                                    budget, n, down)

    def wait_results(self, timeout=None):
        self._check_lost()
        pending = [r.arrival for k, r in self._runs.items() if k not in self._delivered]
        if not pending:
            return {}
        t_next = min(pending)
        limit = math.inf
        if timeout is not None:
            # at least one ulp on: the caller's ``clock() - start`` must reach its cut
            limit = self._now + timeout if timeout <= 0 else \
                max(self._now + timeout, math.nextafter(self._now, math.inf))
        if t_next > limit:
            self._advance(limit)
            return {}
        self._advance(t_next)
        due = [k for k, r in self._runs.items()
               if k not in self._delivered and r.arrival <= t_next]
        out = {k: self._solve(k) for k in sorted(due)}
        self._delivered.update(due)
        if len(self._delivered) == len(self._runs):
            self._runs = {}
        return out

    def stop_round(self, round_id, workers):
        if self._round is None or self._round[0] != round_id:
            return
        heard = self._now + self.model.latency
        back = self._transfer()
        check = int(self.model.stop_check_every)
        for name in workers:
            run = self._runs.get(name)
            if run is None or name in self._delivered or run.end <= heard:
                continue
            progress = (heard - run.start) / run.step if run.step > 0 else run.budget
            done = 0 if progress <= 0 else min(run.budget, math.ceil(progress / check) * check)
            if done >= run.budget:
                continue
            run.steps = done
            run.end = run.compute_end(done, not_before=heard)
            run.arrival = run.end + back
            run.stop_time = self._now

    def _solve(self, name):
        run = self._runs[name]
        wk = self._workers[name]
        round_id, w, inv_lam_n, sigma, seed = self._round
        result = wk.solver.solve(w, round_id=round_id, inv_lam_n=inv_lam_n, sigma=sigma,
                                 steps=run.steps, seed=seed)
        seconds = run.end - run.start
        wk.busy += seconds
        result.seconds = seconds
        result.cpu_seconds = None    # the real solver's, not the simulated worker's
        result.budget = run.budget
        result.stopped = run.steps < run.budget
        result.stop_latency = run.arrival - run.stop_time if result.stopped else None
        return result

    def row_sq_norm_sum(self):
        return sum(self._workers[k].solver.row_sq_norm_sum() for k in self._holding)

    def settle(self, settlements):
        for name, (round_id, gamma) in settlements.items():
            wk = self._workers.get(name)
            if wk is None or wk.state == "failed" or wk.solver.pending is None:
                continue
            if gamma is None:
                wk.solver.discard(round_id)
            else:
                wk.solver.commit(round_id, gamma)

    def alpha_sum(self):
        total = self.problem.zeros()
        for k in self._holding:
            total += self._workers[k].solver.weighted_alpha_sum(self.problem.n_features)
        return total

    def start_duals(self, w, scales=()):
        parts = [self._workers[k].solver.start_duals(w, scales) for k in self._holding]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)

    def scale_duals(self, scale):
        for k in self._holding:
            self._workers[k].solver.scale_duals(scale)

    def gather_alpha(self):
        """The committed dual state of every chunk.

        Returns
        -------
        dict
            ``{chunk_id: α}`` over all workers holding chunks (copies).
        """
        return {cid: a for k in self._holding
                for cid, a in self._workers[k].solver.alpha_by_chunk().items()}

    def describe(self, ask_workers=True):   # the workers are local
        return {name: {"chunks": wk.solver.chunk_ids, "rows": wk.solver.n_rows,
                       "state": wk.state, "speed": wk.speed,
                       "busy_seconds": wk.busy,
                       "billed_seconds": wk.billed_seconds(self._now),
                       "cost": wk.price * wk.billed_seconds(self._now)}
                for name, wk in self._workers.items()}

    def close(self):
        for wk in self._workers.values():
            if wk.ended is None:
                wk.ended = self._now

    # -- moving chunks -------------------------------------------------------
    def move_chunk(self, chunk_id, source, destination):
        """Move a chunk, with its committed ``α``, between workers.

        Between rounds only (no work pending).  ``w`` is unchanged: the rows
        keep their dual variables.  The move is not timed (see
        :meth:`move_chunks`).

        Parameters
        ----------
        chunk_id : int
            The chunk to move.
        source : str
            Name of the worker holding it.
        destination : str
            Name of the worker to hold it.

        Returns
        -------
        int
            Bytes of the chunk on the wire (values, targets, weights, ``α``).
        """
        return self._move_together([chunk_id], source, destination)

    def _move_together(self, chunk_ids, source, destination):
        """Move chunks from one worker to another as one block, as the Dask backend does."""
        src, dst = self._workers[source].solver, self._workers[destination].solver
        dst.add_rows(src.take_rows(chunk_ids))
        return sum(self._chunk_bytes.get(c, 0) for c in chunk_ids)

    def move_chunks(self, moves):
        """Move chunks, with their ``α``, and advance the clock by the transfer.

        Every worker's link carries the bytes it sends and receives (full
        duplex); the moves take one latency plus the busiest direction of the
        busiest link over the bandwidth.  Between rounds only (settle first).

        Parameters
        ----------
        moves : list of (chunk_id, source, destination)
            The moves, e.g. from :func:`daskelastic.placement.plan_moves`.

        Returns
        -------
        float
            Virtual seconds the moves took.
        """
        if self._runs:
            raise RuntimeError("cannot move chunks while a round runs")
        sent, received = {}, {}
        pairs = {}
        for cid, src, dst in moves:
            pairs.setdefault((src, dst), []).append(cid)
        for (src, dst), cids in pairs.items():
            n_bytes = self._move_together(cids, src, dst)
            sent[src] = sent.get(src, 0) + n_bytes
            received[dst] = received.get(dst, 0) + n_bytes
        touched = set(sent) | set(received)
        for name in touched:
            self._set_step_seconds(self._workers[name])
        busiest = max([*sent.values(), *received.values()], default=0)
        seconds = self.model.transfer_seconds(busiest) if moves else 0.0
        self.log.append((self._now, "move", None, {"moves": len(moves), "seconds": seconds}))
        # the chunks have moved: hold them before the clock passes events (a
        # failure raises WorkerLost from _advance)
        self._update_holding()
        self._advance(self._now + seconds)
        return seconds

    def _update_holding(self):
        self._holding = sorted(n for n, wk in self._workers.items()
                               if wk.state in ("up", "leaving") and wk.solver.n_rows > 0)

    # -- the ElasticController's interface ------------------------------------
    @property
    def placement(self):
        """``{worker: chunk ids}`` of the workers holding chunks."""
        return {n: self._workers[n].solver.chunk_ids for n in self._holding}

    def live_workers(self):
        """Workers of the fit that are up (holding chunks or not).

        A worker that joined counts when the model offers joiners to the fit
        (``ClusterModel.rebalance_on_join``): the controller then places it.
        Otherwise a joiner without chunks idles, as the model says, and the
        controller does not see it.

        Returns
        -------
        list of str
            Their names, in order.
        """
        visible = self.model.rebalance_on_join
        return sorted(n for n, wk in self._workers.items()
                      if wk.state in ("up", "leaving")
                      and (visible or n not in self._arrived or wk.solver.n_rows > 0))

    def departing(self):
        """Workers holding chunks that announced a departure (``"leave"`` events).

        Returns
        -------
        list of str
            Their names, in order.
        """
        return [n for n in self._holding if self._workers[n].state == "leaving"]

    def add_workers(self, workers):
        """Make joined ``workers`` available for chunks (they already are: no-op).

        Parameters
        ----------
        workers : list of str
            Workers that joined the virtual cluster.
        """
        unknown = [w for w in workers if w not in self._workers]
        if unknown:
            raise ValueError(f"no simulated workers {unknown}")

    def release(self, workers, retire=False, target=None):
        """Stop using ``workers`` (holding no chunks); retired ones stop being billed.

        Parameters
        ----------
        workers : list of str
            Workers a scale-in lets go, or that announced their departure
            (these leave: their state becomes ``"left"``).
        retire : bool
            Retire them: they leave the cluster and their billing ends now.
            Otherwise they stay up, idle, and are still billed.
        target : int, optional
            The fit's target number of workers (unused).

        Raises
        ------
        ValueError
            When a worker is not one of the simulated cluster's.
        RuntimeError
            When a worker still holds chunks.
        """
        unknown = [w for w in workers if w not in self._workers]
        if unknown:
            raise ValueError(f"no simulated workers {unknown}")
        held = [w for w in workers if self._workers[w].solver.n_rows]
        if held:
            raise RuntimeError(f"workers {held} still hold chunks: move them first")
        for name in workers:
            wk = self._workers[name]
            if wk.state == "leaving":
                self._release(wk, self._now, "left")
            elif retire:
                self._release(wk, self._now, "released")
            if name not in self.released:
                self.released.append(name)
            self.log.append((self._now, "release", name, {"retired": bool(retire)}))
        self._update_holding()

    def recover(self, lost, *, discard_round=None, settlements=None, speeds=None):
        """Not modelled: a failure stops a simulated fit with :class:`WorkerLost`.

        Parameters
        ----------
        lost : list of str
            The workers that failed.
        discard_round : int, optional
            The round to discard (as in ``DaskBackend.recover``).
        settlements : dict, optional
            The last round's settlements.
        speeds : dict, optional
            Measured worker speeds for placing the re-read chunks.

        Raises
        ------
        NotImplementedError
            Always.
        """
        raise NotImplementedError("recovering lost workers is not modelled on the "
                                  "simulated cluster; a failure raises WorkerLost")


def _chunk_bytes(X, n_targets):
    """Bytes of a chunk on the wire: its values, targets, weights and ``α``."""
    values = X.nnz * _SPARSE_VALUE_BYTES if sp.issparse(X) else X.size * X.itemsize
    return values + 8 * X.shape[0] * (2 * n_targets + 1)
