"""Tools for tests, benchmarks and users: straggler injection on a real cluster.

A straggler model decides, each round, how much slower than normal each
worker runs.  Inside :func:`inject_stragglers` every fit in the current
context (thread or task) passes those factors to its workers, whose local
solvers then run their step budget in slices and, after each, keep the CPU
busy until the slice has taken ``factor`` times its compute time, or
``factor`` times the worker's usual pace (its median seconds per step in
recent rounds) if that is longer — ending at once when told to stop, so a
preempted straggler keeps the work it did.  (The usual pace is the floor
because workers that share a machine's cores compute faster once the others
are done, and a straggler would then take less than ``factor`` times as long.
A slowed worker spins instead of sleeping: a sleeping straggler would hand its
CPU share to the others.)
The factors depend only on the seed, the round and the sorted worker list,
so a benchmark is reproducible.

The worker's half lives here too, off the solver's hot path: a round with a
factor above 1 hands its steps to ``_run_slowed``
(``ChunkSolver.solve(..., slowdown=factor)``); a round at full speed runs its
budget in one call of its kernel, as if no injection existed.

Examples
--------
>>> import numpy as np
>>> from daskelastic.testing import RandomSlowdown
>>> model = RandomSlowdown(factor=4.0, probability=1.0, seed=0)
>>> f = model.factors(0, ["w0", "w1", "w2", "w3"])
>>> sorted(f.values())
[1.0, 1.0, 1.0, 4.0]
"""

import contextlib
import statistics
import time

import numpy as np
from numba import njit

from .driver import INJECTED_SLOWDOWN
from .scaling import ScalingDecision, ScalingPolicy

__all__ = ["StragglerModel", "FixedSlowdown", "RandomSlowdown", "HeavyTailSlowdown",
           "inject_stragglers", "ScheduledScaling", "sample_worker_memory",
           "WorkerMemory"]


class StragglerModel:
    """Base class: ``factors(round_id, workers)`` → ``{worker: slowdown ≥ 1}``.

    Subclasses draw their factors from ``seed`` and the round id only, so the
    same round slows the same workers in every run.

    Examples
    --------
    A model in which the first worker (in sorted order) is twice as slow in
    odd rounds:

    >>> from daskelastic.testing import StragglerModel
    >>> class OddRounds(StragglerModel):
    ...     def factors(self, round_id, workers):
    ...         first = min(workers)
    ...         return {w: 2.0 if w == first and round_id % 2 else 1.0 for w in workers}
    >>> OddRounds().factors(1, ["b", "a"])
    {'b': 1.0, 'a': 2.0}
    >>> OddRounds().factors(2, ["b", "a"])
    {'b': 1.0, 'a': 1.0}
    """

    def factors(self, round_id, workers):
        """The slowdown of each worker in round ``round_id``.

        Parameters
        ----------
        round_id : int
            The round.
        workers : list of str
            The workers of the round (the order does not matter).

        Returns
        -------
        dict
            ``{worker: factor}``, ``1.0`` for full speed.
        """
        raise NotImplementedError

    def _rng(self, round_id):
        return np.random.default_rng([int(self.seed), int(round_id)])


class FixedSlowdown(StragglerModel):
    """Chosen workers are slower by a fixed factor in every round.

    Parameters
    ----------
    workers : list of int or str
        Positions in the sorted worker list, or worker addresses.
    factor : float
        Slowdown (``4`` = four times slower).

    Examples
    --------
    >>> from daskelastic.testing import FixedSlowdown
    >>> FixedSlowdown([1], factor=2.0).factors(0, ["a", "b", "c"])
    {'a': 1.0, 'b': 2.0, 'c': 1.0}
    """

    def __init__(self, workers, factor=2.0):
        if factor < 1:
            raise ValueError(f"factor must be >= 1, got {factor}")
        self.workers = list(workers)
        self.factor = float(factor)
        self.seed = 0

    def factors(self, round_id, workers):
        ordered = sorted(workers)
        slow = set()
        for w in self.workers:
            if not isinstance(w, (int, np.integer)):
                slow.add(w)
            elif 0 <= w < len(ordered):
                slow.add(ordered[w])
        return {w: (self.factor if w in slow else 1.0) for w in ordered}


class RandomSlowdown(StragglerModel):
    """Each round, with a given probability, one random worker is slower.

    Parameters
    ----------
    factor : float
        Slowdown of the chosen worker.
    probability : float
        Chance that a round has a straggler at all.
    seed : int
        Seed of the draws (with the round id).

    Examples
    --------
    >>> from daskelastic.testing import RandomSlowdown
    >>> m = RandomSlowdown(factor=4.0, seed=1)
    >>> m.factors(3, ["a", "b"]) == m.factors(3, ["b", "a"])   # reproducible
    True
    """

    def __init__(self, factor=4.0, probability=1.0, seed=0):
        if factor < 1:
            raise ValueError(f"factor must be >= 1, got {factor}")
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"probability must be in [0, 1], got {probability}")
        self.factor = float(factor)
        self.probability = float(probability)
        self.seed = seed

    def factors(self, round_id, workers):
        ordered = sorted(workers)
        out = dict.fromkeys(ordered, 1.0)
        rng = self._rng(round_id)
        if ordered and rng.random() < self.probability:
            out[ordered[rng.integers(len(ordered))]] = self.factor
        return out


class HeavyTailSlowdown(StragglerModel):
    """Every worker, every round, draws a Pareto-distributed slowdown.

    ``factor = min(cap, (1 − U)^(−1/shape))`` with ``U`` uniform: most rounds
    run at nearly full speed, and occasionally a worker is many times slower
    (with ``shape=1.5``, ``P(factor > 4) = 12.5%`` and
    ``P(factor > 20) = 1.1%`` per worker and round).

    Parameters
    ----------
    shape : float
        Pareto tail index; smaller is heavier.
    cap : float
        Largest slowdown.
    seed : int
        Seed of the draws (with the round id).

    Examples
    --------
    >>> from daskelastic.testing import HeavyTailSlowdown
    >>> f = HeavyTailSlowdown(seed=0).factors(0, ["a", "b", "c"])
    >>> all(v >= 1.0 for v in f.values())
    True
    """

    def __init__(self, shape=1.5, cap=50.0, seed=0):
        if shape <= 0:
            raise ValueError(f"shape must be positive, got {shape}")
        if cap < 1:
            raise ValueError(f"cap must be >= 1, got {cap}")
        self.shape = float(shape)
        self.cap = float(cap)
        self.seed = seed

    def factors(self, round_id, workers):
        ordered = sorted(workers)
        u = self._rng(round_id).random(len(ordered))
        f = np.minimum(self.cap, (1.0 - u) ** (-1.0 / self.shape))
        return {w: float(x) for w, x in zip(ordered, f)}


@contextlib.contextmanager
def inject_stragglers(model):
    """Slow workers down as ``model`` says in every fit inside the ``with`` block.

    Works with fits on a Dask cluster (the workers stall) and, once it exists,
    on a simulated cluster (virtual time); in-process fits ignore it.

    Parameters
    ----------
    model : StragglerModel or None
        None turns injection off inside the block.

    Examples
    --------
    >>> from daskelastic.testing import RandomSlowdown, inject_stragglers
    >>> with inject_stragglers(RandomSlowdown(factor=4.0, seed=0)):
    ...     pass   # clf.fit(X, y) here runs with one worker 4x slower per round
    """
    token = INJECTED_SLOWDOWN.set(model)
    try:
        yield model
    finally:
        INJECTED_SLOWDOWN.reset(token)


#: A deliberately slowed round (``slowdown > 1``) runs its budget in this many
#: slices, stalling after each.
_SLOWDOWN_SLICES = 16


def _run_slowed(run, budget, slowdown, stop, paces):
    """Run a round's ``budget`` steps as a worker ``slowdown`` times slower would.

    The budget runs in ``_SLOWDOWN_SLICES`` slices; after each, the CPU is
    kept busy until the slice has taken ``_slowed_seconds``, and the round
    ends at once when its stop flag is set, keeping the steps done.

    Parameters
    ----------
    run : callable
        ``run(a, b)`` runs steps ``a`` to ``b`` of the round and returns
        ``(steps done, seconds they took)``; fewer steps when it was stopped.
    budget : int
        Steps of the round.
    slowdown : float
        The factor, above 1.
    stop : ndarray of shape (1,)
        The solver's stop flag (nonzero: stop).
    paces : sequence of float
        The worker's compute seconds per step in recent rounds, read after
        each slice (``run`` records the first slice's).

    Returns
    -------
    int
        Steps done.
    """
    # load or compile the kernel first: a slowdown multiplies compute time,
    # not a one-off start-up cost
    run(0, 0)
    done = 0
    bounds = np.linspace(0, budget, _SLOWDOWN_SLICES + 1).astype(np.int64)
    for a, b in zip(bounds[:-1], bounds[1:]):
        did, compute = run(a, b)
        done += did
        if did < b - a or stop[0]:
            break
        _stall(stop, _slowed_seconds(slowdown, compute, did, paces) - compute)
    return done


def _slowed_seconds(slowdown, compute, steps, paces):
    """How long a slice of ``steps`` steps takes on a worker ``slowdown`` times slower.

    ``slowdown`` times the larger of the slice's own compute time and the
    worker's usual pace (the median of ``paces``, its seconds per step in
    recent rounds, measured while the other workers compute too).  The slice's
    own time alone falls short when the other workers of the round have
    finished and the straggler has a core to itself: on a machine whose cores
    its workers share, it would then take less than ``slowdown`` times as long
    as the others.
    """
    usual = statistics.median(paces) * steps if paces else 0.0
    return slowdown * max(compute, usual)


def _stall(stop, seconds):
    """Keep the CPU busy for up to ``seconds``; return at once when ``stop[0]`` is set.

    A slowed worker spins rather than sleeps: when several workers share a
    machine's cores, a sleeping straggler would hand its CPU share to the
    others and make them faster, which a slow machine of a real cluster does
    not do.
    """
    end = time.perf_counter() + seconds
    while not stop[0] and time.perf_counter() < end:
        _spin(stop, 50_000)   # ~50 µs, without the GIL


@njit(cache=True, nogil=True)
def _spin(stop, n):
    """Busy-wait ``n`` iterations without the GIL, ending early on ``stop[0]``.

    Holding the GIL while spinning would starve the worker's event loop (the
    thread that delivers a stop request) of it.
    """
    acc = 0.0
    for i in range(n):
        if i % 1024 == 0 and stop[0] != 0:
            break
        acc += i * 1e-9
    return acc


class ScheduledScaling(ScalingPolicy):
    """A scaling policy that scales in at chosen rounds, whatever the convergence.

    For tests and demonstrations of the scale-in mechanics: after round
    ``r`` of ``schedule`` the target becomes ``schedule[r]``.

    Parameters
    ----------
    schedule : dict
        ``{round_id: target number of workers}``.
    min_workers : int, default=1
        Never fewer workers than this.
    release_workers : "auto" or bool, default="auto"
        What becomes of the workers a scale-in lets go (see
        :class:`~daskelastic.scaling.ScalingPolicy`).

    Examples
    --------
    >>> from daskelastic.scaling import ScalingRecord
    >>> from daskelastic.testing import ScheduledScaling
    >>> policy = ScheduledScaling({2: 1})
    >>> policy.observe(ScalingRecord(2, time=1.0, gap=0.1, n_workers=2))
    >>> policy.target(2).target
    1
    """

    name = "scheduled"

    def __init__(self, schedule, min_workers=1, release_workers="auto"):
        super().__init__(min_workers, release_workers)
        self.schedule = dict(schedule)

    def decide(self, n_workers):
        """The scheduled target after the last observed round.

        Parameters
        ----------
        n_workers : int
            Workers holding chunks now.

        Returns
        -------
        daskelastic.scaling.ScalingDecision
            ``schedule[round]`` when the round is scheduled, else ``n_workers``.
        """
        last = self.records[-1].round_id if self.records else None
        target = self.schedule.get(last, n_workers)
        return ScalingDecision(min(target, n_workers), "scheduled")


_SAMPLERS_ATTR = "_daskelastic_memory_samplers"


class WorkerMemory(dict):
    """What :func:`~daskelastic.testing.sample_worker_memory` measured, by worker address.

    Each worker's numbers are a dict: ``"start"`` (its resident set size,
    in bytes, when sampling began), ``"peak"`` (the largest sampled), and
    ``"held"`` (the most bytes the fits' solvers on it held at once, see
    ``ChunkStore.nbytes``).
    Filled when the ``with`` block ends.
    """

    def growth(self, worker):
        """Peak resident memory of ``worker`` above its start.

        Parameters
        ----------
        worker : str
            A worker's address.

        Returns
        -------
        int
            Bytes.
        """
        numbers = self[worker]
        return numbers["peak"] - numbers["start"]

    def ratio(self, worker):
        """:meth:`growth` over the bytes held.

        Parameters
        ----------
        worker : str
            A worker's address.

        Returns
        -------
        float
            The ratio; ``inf`` when nothing was held.
        """
        held = self[worker]["held"]
        return self.growth(worker) / held if held else float("inf")


@contextlib.contextmanager
def sample_worker_memory(client, interval=0.05):
    """Sample every worker's resident memory, and the bytes its fits hold, during a block.

    A thread in each worker process reads its resident set size (``psutil``)
    and the bytes held by the solvers of its fits every ``interval`` seconds
    until the block ends: a fit's peak memory and what it holds, to compare
    (see the user guide's *Memory*, ``benchmarks/bench_memory.py``).

    Parameters
    ----------
    client : distributed.Client
        Client of the cluster whose workers to watch (those present when the
        block starts).
    interval : float
        Seconds between samples.

    Yields
    ------
    WorkerMemory
        Empty inside the block; ``{worker: {"start", "peak", "held"}}`` after it.

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> from daskelastic import LogisticRegression
    >>> from daskelastic.testing import sample_worker_memory
    >>> import dask.array as da
    >>> with LocalCluster(n_workers=1, processes=False) as cluster, \\
    ...         Client(cluster) as client:   # doctest: +SKIP
    ...     X = da.random.random((10_000, 5), chunks=5_000)
    ...     y = (X[:, 0] > 0.5).astype(int)
    ...     with sample_worker_memory(client) as memory:
    ...         LogisticRegression(client=client).fit(X, y)
    ...     [memory.ratio(w) < 10 for w in memory]
    [True]
    """
    token = f"{time.monotonic_ns()}-{id(client)}"
    result = WorkerMemory()
    client.run(_start_sampling, token, float(interval))
    try:
        yield result
    finally:
        result.update(client.run(_stop_sampling, token))


def _held_bytes(worker):
    from .backends.dask.worker import _REGISTRY_ATTR

    fits = list(getattr(worker, _REGISTRY_ATTR, {}).values())
    return sum(f.solver.nbytes for f in fits if f.solver is not None)


def _start_sampling(token, interval, dask_worker=None):
    import threading

    import psutil

    process = psutil.Process()
    stop = threading.Event()
    numbers = {"start": process.memory_info().rss, "peak": 0, "held": 0}

    def sample():
        while True:
            numbers["peak"] = max(numbers["peak"], process.memory_info().rss)
            try:
                numbers["held"] = max(numbers["held"], _held_bytes(dask_worker))
            except (RuntimeError, AttributeError):   # a registry changed under us
                pass
            if stop.wait(interval):
                return

    thread = threading.Thread(target=sample, daemon=True, name="daskelastic-memory")
    samplers = getattr(dask_worker, _SAMPLERS_ATTR, None)
    if samplers is None:
        samplers = {}
        setattr(dask_worker, _SAMPLERS_ATTR, samplers)
    samplers[token] = (stop, thread, numbers)
    thread.start()


def _stop_sampling(token, dask_worker=None):
    stop, thread, numbers = getattr(dask_worker, _SAMPLERS_ATTR).pop(token)
    stop.set()
    thread.join()
    return numbers
