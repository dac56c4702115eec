"""The :class:`DaskBackend`: a fit's rounds and elastic operations on a Dask cluster."""

import time
import uuid

from ... import adaptive, config
from ...driver import ConnectionLost, WorkersLost
from ...session import client_context
from ..base import ElasticBackend
from .calls import (
    ACTOR_PREFIX,
    ActorCalls,
    ask_scheduler,
    calls_direct,
    done_signal,
    gather_watching,
    result_watching,
    scheduler_workers,
    wait_any,
)
from .elasticity import _Elasticity
from .loading import _Loading
from .recovery import _Recovery
from .worker import (
    RoundActor,
    alpha_sum,
    describe,
    drop_fit,
    gather_alpha,
    request_stop,
    row_sq_norm_sum,
    run_round,
    scale_duals,
    settle,
    start_duals,
)

__all__ = ["DaskBackend"]




class DaskBackend(_Loading, _Elasticity, _Recovery, ElasticBackend):
    """Run the local solvers on the workers of a Dask cluster.

    Besides rounds, the backend carries out the elastic operations between
    rounds (:meth:`move_chunks`, :meth:`release`, :meth:`add_workers`,
    :meth:`recover`): a chunk moves as a task on its source worker that
    removes it from the solver and returns ``(X, Y, sample_weight, α)`` and a
    task restricted to the destination that depends on it and adds it — the
    data travels worker to worker, and ``α`` with it, so ``w`` is unchanged.

    A worker may die at any moment.  Every wait of the backend notices it
    (``calls.gather_watching``) and raises
    :class:`~daskelastic.driver.WorkersLost`; the driver then calls
    :meth:`recover`, which asks the live workers what they hold and re-reads
    the chunks held nowhere from the input (the driver-side chunks of numpy /
    scipy input, the task graph of dask input) onto live workers with
    ``α = 0``.  Losses while the data loads are recovered from here.

    A backend holds nothing until :meth:`load_chunks` (numpy / scipy input)
    or :meth:`load_dask` (dask arrays) places the data; :meth:`close` drops
    the fit's state from every worker.  The fit is named by a fresh
    ``fit_id``: one cluster can run several fits at once, from several
    threads, with one client (the client is passed to every call; the
    process's Dask configuration is not touched).

    Parameters
    ----------
    client : distributed.Client
        Client of the cluster to run on.
    problem : daskelastic.driver.Problem
        The problem the data belongs to.
    workers : list of str, optional
        Worker addresses to place chunks on; all workers of the cluster by
        default (asked from the scheduler now).
    transport : {"actor", "task"}, optional
        How rounds reach the workers: calls to a Dask actor per worker
        (``daskelastic.backends.dask.worker.RoundActor``: direct, fast) or one task
        per worker per round (visible in the task stream).
        ``daskelastic.round-transport`` by default.
    owns_cluster : bool
        Whether the fit started the cluster itself (then it may retire the
        workers it lets go with ``release_workers="auto"``).

    Raises
    ------
    ValueError
        When ``transport`` is neither ``"actor"`` nor ``"task"``.
    RuntimeError
        When the cluster has no workers.

    Examples
    --------
    A fit on a small local cluster (what the estimators do with ``client``):

    >>> import numpy as np
    >>> from distributed import Client, LocalCluster
    >>> from daskelastic.backends.dask import DaskBackend
    >>> from daskelastic.driver import Problem, run_cocoa
    >>> from daskelastic.placement import make_chunks, split_rows
    >>> X = np.random.default_rng(0).normal(size=(4000, 5))
    >>> Y = np.sign(X[:, :1] + 0.1)
    >>> problem = Problem(loss=2, lam=1e-3, n_samples=4000, n_features=5, n_targets=1,
    ...                   intercept_scaling=1.0)
    >>> chunks = make_chunks(X, Y, np.ones(4000), split_rows(4000, n_chunks=8))
    >>> with LocalCluster(n_workers=2, threads_per_worker=1,
    ...                   processes=False) as cluster:  # doctest: +SKIP
    ...     with Client(cluster) as client:
    ...         backend = DaskBackend(client, problem)
    ...         backend.load_chunks(chunks)
    ...         try:
    ...             result = run_cocoa(backend, problem, tol=1e-3)
    ...         finally:
    ...             backend.close()
    >>> result.converged  # doctest: +SKIP
    True
    """

    def __init__(self, client, problem, workers=None, transport=None, owns_cluster=False):
        self.client = client
        self.problem = problem
        self.owns_cluster = bool(owns_cluster)
        self.transport = transport or config.get("round-transport")
        if self.transport not in ("actor", "task"):
            raise ValueError(f"round transport must be 'actor' or 'task', "
                             f"got {self.transport!r}")
        self._actors = {}
        self._actor_futures = {}
        self._pending = {}      # worker -> call/future of the running round
        self._signals = {}      # worker -> done_signal of its pending call
        self._stop_calls = []   # (worker, call) of stop requests
        self._retiring = []   # background retirements (concurrent futures)
        self._retire_pool = None
        self._round_id = None
        # the recovery epoch (see worker.WorkerFit); every load, take and put
        # carries it
        self._epoch = 0
        self._touched = set()   # every worker chunks were ever sent to
        self.fit_id = f"fit-{uuid.uuid4().hex[:12]}"
        if workers is None:
            workers = scheduler_workers(client)
        if not workers:
            raise RuntimeError("the Dask cluster has no workers")
        self._workers = list(workers)
        self.placement = {}  # worker -> [chunk ids]
        self.chunk_sizes = {}  # chunk id -> rows
        self._source = None    # how to re-read lost chunks
        self.released = []     # workers this fit let go
        self.wanted = None     # workers asked of an autoscaler (see ask_for_workers)
        self.lost = []         # workers that died during this fit
        self._published = False
        self._sq_norm_sum = None   # Σ ‖x_i‖² of the data, from the load tasks
        self._events = []      # see take_events

    # -- rounds ----------------------------------------------------------------
    def workers(self):
        return list(self.placement)

    def _submit_actors(self, workers):
        """Start an actor on each of ``workers`` that has none (without waiting)."""
        self._actor_futures.update({addr: self.client.submit(
            RoundActor, self.fit_id, workers=[addr], allow_other_workers=False,
            actor=True, key=f"{ACTOR_PREFIX}{self.fit_id}-{addr}-{self._epoch}")
            for addr in workers if addr not in self._actor_futures})

    def _ensure_actors(self, workers=None):
        """Have an actor proxy for each of ``workers`` (default: the placement's)."""
        missing = [a for a in (self.placement if workers is None else workers)
                   if a not in self._actors]
        if not missing:
            return
        self._submit_actors(missing)
        gather_watching(self.client, [(a, self._actor_futures[a]) for a in missing])
        setting = config.get("actor-calls")
        for a in missing:
            future = self._actor_futures[a]
            if calls_direct(self.client, a, setting):
                self._actors[a] = ActorCalls(self.client, a, future.key, future=future)
            else:
                # the proxy binds to the current client as it is unpickled
                with client_context(self.client):
                    self._actors[a] = ActorCalls(self.client, a, future.key,
                                                 actor=future.result(), future=future)

    def start_round(self, round_id, w, settlements, *, inv_lam_n, sigma, steps, seed,
                    slowdowns=None):
        if self._pending:
            raise RuntimeError("a round is still running on the workers")
        slowdowns = slowdowns or {}
        self._round_id = round_id
        if self.transport == "actor":
            self._ensure_actors()
            self._pending = {
                addr: self._actors[addr].run_round(
                    self._epoch, round_id, w, settlements.get(addr), inv_lam_n, sigma, steps,
                    seed, float(slowdowns.get(addr, 1.0)))
                for addr in self.placement}
        else:
            self._pending = {addr: self.client.submit(
                run_round, self.fit_id, self._epoch, round_id, w, settlements.get(addr),
                inv_lam_n, sigma, steps, seed, float(slowdowns.get(addr, 1.0)),
                workers=[addr], allow_other_workers=False, pure=False,
                key=f"daskelastic-round-{round_id}-{self._epoch}-{self.fit_id}-{addr}")
                for addr in self.placement}
        self._signals = {a: done_signal(c) for a, c in self._pending.items()}

    def wait_results(self, timeout=None):
        """Wait up to ``timeout`` seconds for more results of the running round.

        Parameters
        ----------
        timeout : float or None
            Seconds (wall clock) to wait at most; None waits until a result
            arrives, 0 only collects the results already in.

        Returns
        -------
        dict
            ``{worker: LocalResult}`` of the results that arrived since the
            last call: at least one, unless the timeout passed first (then
            maybe none); empty when no round is running.

        Raises
        ------
        daskelastic.driver.WorkersLost
            When a worker's round call failed because the worker is gone
            (its connection closed) or the scheduler no longer lists it.  Any
            other error of a round call is raised as it is.
        """
        if not self._pending:
            return {}
        done = wait_any(self.client, self._signals, timeout)
        out, lost = {}, []
        for a in done:
            try:
                # a task's result may still have to come from its worker
                out[a] = result_watching(self.client, self._pending[a], [a])
            except ConnectionLost:
                raise
            except WorkersLost:
                lost.append(a)
                continue
            del self._pending[a]
            del self._signals[a]
        if lost:
            raise WorkersLost(lost)
        if not self._pending:
            self._collect_stop_calls()
        return out

    def stop_round(self, round_id, workers):
        if self.transport == "actor":
            self._stop_calls.extend((a, self._actors[a].stop(round_id)) for a in workers
                                    if a in self._actors)
        else:
            ask_scheduler("asking workers to stop", self.client.run, request_stop,
                          self.fit_id, round_id, workers=list(workers), on_error="ignore")

    def _collect_stop_calls(self):
        """Wait for the stop requests of the round (a stopped worker may be gone)."""
        calls, self._stop_calls = self._stop_calls, []
        try:
            gather_watching(self.client, calls)
        except WorkersLost:
            pass   # noticed by the next call to it

    def _on_each(self, func, *args, per_worker=None):
        calls = []
        for addr in self.placement:
            extra = () if per_worker is None else (per_worker.get(addr),)
            calls.append((addr, self.client.submit(
                func, self.fit_id, *args, *extra, workers=[addr],
                allow_other_workers=False, pure=False)))
        try:
            return dict(zip([a for a, _ in calls], gather_watching(self.client, calls)))
        finally:
            self._cancel_tasks(calls)

    def settle(self, settlements):
        if self.transport != "actor":
            self._on_each(settle, per_worker=settlements)
            return
        targets = [a for a, s in settlements.items() if s is not None and a in self.placement]
        self._ensure_actors(targets)
        gather_watching(self.client, [(a, self._actors[a].settle(settlements[a]))
                                      for a in targets])

    def row_sq_norm_sum(self):
        # the rows stay the same when chunks move or are re-read: the load
        # tasks' sum holds for the whole fit
        if self._sq_norm_sum is None:
            self._sq_norm_sum = float(sum(self._on_each(row_sq_norm_sum).values()))
        return self._sq_norm_sum

    def alpha_sum(self):
        parts = self._on_each(alpha_sum, self.problem.n_features)
        return sum(parts.values())

    def start_duals(self, w, scales=()):
        parts = list(self._on_each(start_duals, w, list(scales)).values())
        return sum(p[0] for p in parts), sum(p[1] for p in parts)

    def scale_duals(self, scale):
        self._on_each(scale_duals, scale)

    def gather_alpha(self):
        """The committed dual state of every chunk (a debugging accessor).

        Returns
        -------
        dict
            ``{chunk_id: α}`` over all workers holding chunks.
        """
        out = {}
        for part in self._on_each(gather_alpha).values():
            out.update(part)
        return out

    def describe(self, ask_workers=True):
        if ask_workers:
            return self._on_each(describe)
        return {w: {"chunks": sorted(cids), "rows": int(sum(self.chunk_sizes[c] for c in cids))}
                for w, cids in self.placement.items() if cids}

    def close(self):
        """Release the workers' state of this fit.

        Stops a round still running, cancels the actors, waits for the
        retirements :meth:`release` started (:meth:`wait_retired`), tells the
        scheduler plugin the fit ended and drops the fit's solver state from every
        worker of the cluster, in one broadcast (a worker that died meanwhile
        is skipped).  Once the client is closed, only the driver side is
        cleared.
        """
        if self._pending and self._round_id is not None:
            # an interrupted round: stop it, so the workers are free at once
            try:
                self.stop_round(self._round_id, list(self._pending))
            except Exception:  # noqa: BLE001 - closing after a failure
                pass
        self._pending, self._signals = {}, {}
        self._stop_calls = []
        self._actors = {}
        if self.client.status not in ("running", "connecting"):
            self._actor_futures = {}
            if self._retire_pool is not None:   # nothing left to retire them through
                self._retire_pool.shutdown(wait=False, cancel_futures=True)
                self._retire_pool, self._retiring = None, []
            return
        # before listing the workers: a task restricted to one being retired
        # would wait for it in vain
        self.wait_retired()
        for _attempt in range(3):
            # a connection to the scheduler that broke meanwhile is waited for
            try:
                self._await_connection()
                self._cancel_tasks(list(self._actor_futures.items()))
                if self._published:
                    adaptive.end_fit(self.client, self.fit_id)
                # on every worker, in one broadcast from the scheduler (a worker
                # that died meanwhile is skipped)
                self.client.run(drop_fit, self.fit_id, on_error="ignore")
                break
            except OSError:
                time.sleep(0.2)
            except Exception:  # noqa: BLE001 - closing after a failure, or the client gave up
                break
        self._actor_futures = {}
        self.placement = {}
