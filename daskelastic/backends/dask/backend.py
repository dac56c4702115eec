"""The :class:`DaskBackend`: a fit's rounds and elastic operations on a Dask cluster."""

import asyncio
import time
import uuid
import warnings
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import dask.config
from dask.utils import parse_timedelta

from ... import adaptive, config
from ...driver import ConnectionLost, WorkersLost
from ...elastic import lost_event
from ...placement import assign_chunks
from ...session import client_context
from ..base import ElasticBackend
from .calls import (
    ACTOR_PREFIX,
    ActorCalls,
    ask_scheduler,
    calls_direct,
    done_signal,
    gather_watching,
    is_lost_error,
    persisted_blocks,
    result_watching,
    scheduler_workers,
    wait_any,
)
from .worker import (
    BadBlock,
    RoundActor,
    alpha_sum,
    describe,
    drop_fit,
    gather_alpha,
    load_block,
    load_chunks,
    put_chunks,
    request_stop,
    resync,
    row_sq_norm_sum,
    run_round,
    scale_duals,
    settle,
    start_duals,
    take_chunks,
)

__all__ = ["DaskBackend"]


def _connect_timeout():
    """Seconds a client tries to reconnect to its scheduler (``Client._reconnect``)."""
    return float(parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s"))


class DaskBackend(ElasticBackend):
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
        self.lost = []         # workers that died during this fit
        self._published = False
        self._sq_norm_sum = None   # Σ ‖x_i‖² of the data, from the load tasks
        self._events = []      # see take_events

    # -- placing the data -----------------------------------------------------
    def load_chunks(self, chunks):
        """Send in-memory chunks to the workers, balanced by rows.

        Where the actors' calls go straight to the workers (the default on a
        ``LocalCluster``, see
        ``calls.calls_direct``), each worker's
        chunks go with a call of its actor, which adds them to its solver and
        packs them (``_load_by_actors``); otherwise they are scattered to it
        (all workers at once; see ``_scatter_chunks``) and added by a task
        restricted to it.  The chunks are kept on the driver to rebuild those
        of a lost worker; a worker lost while they load has its chunks sent
        to the others.

        Parameters
        ----------
        chunks : list of daskelastic.placement.Chunk
            The training rows, cut into chunks (encoded targets and sample
            weights included).

        Raises
        ------
        Exception
            An error of a load task, raised again (without its traceback)
            once the backend is closed.
        """
        self._source = ("chunks", {c.chunk_id: c for c in chunks})
        self.chunk_sizes = {c.chunk_id: c.n_rows for c in chunks}
        plan = assign_chunks(self.chunk_sizes, self._workers)
        self._place_loaded(plan, lambda: self._send_chunks(plan))

    def _send_chunks(self, plan):
        """Start loading the driver's chunks as ``plan`` says; return ``[(worker, call)]``."""
        setting = config.get("actor-calls")
        self._touched.update(w for w, c in plan.items() if c)
        if self.transport == "actor" and all(
                calls_direct(self.client, a, setting) for a, c in plan.items() if c):
            return self._load_by_actors(plan)
        return self._scatter_chunks(plan)

    def _load_by_actors(self, plan):
        """Send each worker its chunks in a call of its actor, straight to it.

        The chunks travel as the call's arguments, to all workers at once, and
        the call adds and packs them: one message to each worker and one back
        once its actor is up.  A scatter (the data, then the scheduler told of
        it) followed by a load task (client → scheduler → worker → scheduler
        → client) took ~12 ms more to the first round on 2 local workers
        (median of 20 fits each way, alternating; starting the actors
        earlier, while the client cuts the chunks, gained nothing more).
        """
        by_id = self._source[1]
        targets = [a for a, c in plan.items() if c]
        self._ensure_actors(targets)
        return [(a, self._actors[a].load(self.problem, self._epoch,
                                         *[by_id[c] for c in plan[a]]))
                for a in targets]

    def _scatter_chunks(self, plan):
        """Send each worker its chunks, all workers at once, and submit their load tasks.

        The chunks go straight from the client to a worker it reaches (see
        ``calls.calls_direct``), not through
        the scheduler, which would receive and forward every byte: on 2 local
        workers the flights table took ~50 ms to scatter direct, ~90 ms
        through the scheduler, and ~43 ms direct to both workers at once.
        """
        by_id = self._source[1]
        setting = config.get("actor-calls")
        targets = [addr for addr, cids in plan.items() if cids]

        async def scatter_all():
            return await asyncio.gather(*[
                self.client.scatter([by_id[c] for c in plan[addr]], workers=[addr],
                                    hash=False, asynchronous=True,
                                    direct=calls_direct(self.client, addr, setting))
                for addr in targets])

        try:
            scattered = self.client.sync(scatter_all) if targets else []
        except Exception as e:
            gone = [w for w in targets if w not in set(scheduler_workers(self.client))]
            if gone:
                raise WorkersLost(gone) from e
            raise
        loads = [(addr, self.client.submit(
            load_chunks, self.fit_id, self.problem, self._epoch, *data, workers=[addr],
            allow_other_workers=False, pure=False,
            key=f"daskelastic-load-{self.fit_id}-{addr}-{uuid.uuid4().hex[:6]}"))
            for addr, data in zip(targets, scattered)]
        del scattered
        return loads

    def load_dask(self, X, y, sample_weight, encoder, persisted=None):
        """Hold the blocks of dask arrays as chunks, each where it already lives.

        The arrays are persisted; row block ``i`` becomes chunk ``i``,
        preferably on a worker that already holds it (rows stay balanced),
        where a task validates ``X`` (2-d, finite, float), encodes ``y`` and
        ``sample_weight`` and adds the chunk to the worker's solver.  The
        arrays' task graphs are kept to re-read the blocks of a lost worker.

        Parameters
        ----------
        X : dask array of shape (n, d)
            Training data, in one column block; sparse blocks become CSR.
        y : dask array of shape (n,) or (n, m)
            Labels or targets, with the row chunks of ``X``.
        sample_weight : dask array of shape (n,) or None
            Sample weights, with the row chunks of ``X``; None for ones.
        encoder : daskelastic.targets.TargetEncoder
            Applied to each block of ``y`` and ``sample_weight`` on its worker.
        persisted : list of dask arrays, optional
            ``[X, y]`` (and ``sample_weight``) already persisted: their blocks
            are loaded, while the backend keeps only the arrays' graphs (to
            re-read the blocks of a lost worker).

        Returns
        -------
        dict
            ``{worker: sorted list of chunk ids}``, with an empty list for a
            worker given no block.

        Raises
        ------
        Exception
            An error of a load task (e.g. the ``ValueError`` of a block with
            NaN or infinity, or of rows that do not match), raised again
            (without its traceback) once the backend is closed.
        """
        arrays = [X, y] + ([sample_weight] if sample_weight is not None else [])
        self._source = ("dask", (arrays, encoder))
        blocks = persisted_blocks(self.client, persisted or arrays)
        del persisted
        who_has = ask_scheduler("asking where the input is", self.client.who_has, blocks[0])
        sizes = {i: int(n) for i, n in enumerate(X.chunks[0])}
        self.chunk_sizes = sizes
        preferred = {i: list(who_has.get(f.key, ())) for i, f in enumerate(blocks[0])}
        plan = assign_chunks(sizes, self._workers, preferred=preferred)

        self._touched.update(w for w, c in plan.items() if c)
        loads = []
        for addr, cids in plan.items():
            for cid in cids:
                # a worker's rows are packed by the load task that completes
                # them (no prepare call: one round trip less)
                loads.append((addr, self.client.submit(
                    load_block, self.fit_id, self.problem, self._epoch, encoder, cid,
                    *[b[cid] for b in blocks], pack_with=list(cids),
                    workers=[addr], allow_other_workers=False,
                    pure=False, key=f"daskelastic-load-{self.fit_id}-{cid}")))
        # the chunks will live in the workers' solvers: drop dask's copies (no
        # reference to a block may stay in this frame, which an error's
        # traceback keeps)
        del blocks
        self._place_loaded(plan, lambda: loads)
        return {w: self.placement.get(w, []) for w in dict.fromkeys([*plan, *self.placement])}

    def _reread_blocks(self, plan):
        """Load the blocks of ``plan`` again from the dask arrays' graphs."""
        arrays, encoder = self._source[1]
        self._touched.update(w for w, c in plan.items() if c)
        loads = []
        for addr, cids in plan.items():
            for cid in cids:
                parts = self.client.compute([a.blocks[cid] for a in arrays])
                loads.append((addr, self.client.submit(
                    load_block, self.fit_id, self.problem, self._epoch, encoder, cid, *parts,
                    workers=[addr], allow_other_workers=False, pure=False,
                    key=f"daskelastic-reload-{self.fit_id}-{cid}-{uuid.uuid4().hex[:6]}")))
                del parts
        return loads

    def _place_loaded(self, plan, start):
        """Load the data as ``plan`` says (``start()`` returns the load calls); publish.

        A worker lost meanwhile is recovered from (its chunks go to the live
        workers).  Any other error of a load closes the backend and is raised
        again.
        """
        if self.transport == "actor":
            # the actors start while the chunks load, instead of a round trip
            # of their own before the first round
            self._submit_actors([w for w, c in plan.items() if c])
        error = None
        try:
            try:
                loads = start()
                try:
                    sums = gather_watching(self.client, loads)
                finally:
                    self._cancel_tasks(loads)
                    del loads
                self._check_blocks(plan, sums)
                self._sq_norm_sum = float(sum(sums))
                self.placement = {w: sorted(c) for w, c in plan.items() if c}
                # direct actor loads do not pass the scheduler: a cut link to
                # it may first show here (ConnectionLost), and is recovered
                # from as a loss during the load
                self.publish()
            except WorkersLost as lost:
                # the rows' norms are summed again when asked for
                self.placement = {w: sorted(c) for w, c in plan.items() if c}
                self._sq_norm_sum = None
                known = len(self.lost)
                reread = self.recover(lost.workers)
                self._events.append(dict(lost_event(self.lost[known:], reread, None),
                                         **{"while": "loading"}))
        except Exception as e:  # noqa: BLE001 - re-raised below, without references
            error = e
        if error is not None:
            self.close()
            # a traceback would keep the frames, and with them the input's
            # futures, alive: raise the error without it
            raise error.with_traceback(None) from None

    def _check_blocks(self, plan, results):
        """Raise the ``ValueError`` of the first block a load refused (see ``BadBlock``).

        ``results`` are the loads' of dask input, one per block in ``plan``'s order.
        """
        if self._source[0] != "dask":
            return
        bad = [(cid, r) for cid, r in zip([c for cids in plan.values() for c in cids], results)
               if isinstance(r, BadBlock)]
        if bad:
            cid, error = min(bad)
            start = sum(self.chunk_sizes[c] for c in self.chunk_sizes if c < cid)
            raise ValueError(f"{error.message} (in row block {cid}: rows {start:,} to "
                             f"{start + self.chunk_sizes[cid] - 1:,} of the input)")

    def _cancel_tasks(self, calls):
        """Cancel the Dask futures among ``[(worker, call)]`` (their results are read)."""
        futures = [c for _, c in calls if not hasattr(c, "set_result")]
        if futures:
            try:
                self.client.cancel(futures, force=True)
            except OSError:
                pass   # a broken connection to the scheduler released them already

    def take_events(self):
        """The ``worker_lost`` events of workers lost while the data loaded.

        Returns
        -------
        list of dict
            The events not taken yet (see :meth:`Backend.take_events
            <daskelastic.backends.base.Backend.take_events>`).
        """
        events, self._events = self._events, []
        return events

    @property
    def available_workers(self):
        """The workers chunks may be placed on."""
        return list(self._workers)

    # -- elasticity -------------------------------------------------------------
    def publish(self, target=None):
        """Tell the scheduler plugin what this fit holds, wants and let go.

        The plugin vetoes downscaling the workers holding chunks and tells an
        :class:`~daskelastic.ElasticAdaptive` the fit's target.  It is
        installed when missing (``adaptive.publish_fit``)
        and removed after the last fit (:meth:`close`).

        Parameters
        ----------
        target : int, optional
            The fit's target number of workers; by default the number of
            workers holding chunks.
        """
        self._published = True
        ask_scheduler("publishing the fit's placement", adaptive.publish_fit,
                      self.client, self.fit_id, self.placement,
                      len(self.placement) if target is None else target, self.released)

    def live_workers(self):
        """Addresses of the workers the scheduler knows now.

        Returns
        -------
        list of str
            The addresses, sorted; workers of the cluster that hold none of
            this fit's chunks included.
        """
        return scheduler_workers(self.client)

    def move_chunks(self, moves):
        """Move chunks, with their dual state, between workers.

        No round may be running (settle first).  The chunks moving from one
        source to one destination go together, as one block of rows
        (:class:`~daskelastic.solvers.RowBlock`): a task on the source takes
        them out of its solver and a task restricted to the destination,
        depending on the first, adds them.  A destination that was not a
        worker of the fit becomes one.  ``w`` is unchanged.

        Parameters
        ----------
        moves : list of (chunk_id, source, destination)
            The moves, e.g. from :func:`daskelastic.placement.plan_moves`.

        Raises
        ------
        RuntimeError
            When a round is running.
        daskelastic.driver.WorkersLost
            When a source or destination died: :meth:`recover` finds where
            the chunks are.
        """
        if not moves:
            return
        if self._pending:
            raise RuntimeError("cannot move chunks while a round runs")
        pairs = defaultdict(list)
        for cid, src, dst in moves:
            pairs[src, dst].append(cid)
        takes, puts = [], []
        for (src, dst), cids in pairs.items():
            tag = f"{self.fit_id}-{uuid.uuid4().hex[:8]}"
            self._touched.add(dst)
            take = self.client.submit(
                take_chunks, self.fit_id, self._epoch, cids, workers=[src],
                allow_other_workers=False, pure=False, key=f"daskelastic-take-{tag}")
            put = self.client.submit(
                put_chunks, self.fit_id, self.problem, self._epoch, take, workers=[dst],
                allow_other_workers=False, pure=False, key=f"daskelastic-put-{tag}")
            takes.append((src, take))
            puts.append((dst, put))
        try:
            # a put waits for its take's result, which dies with the source:
            # watch both ends
            gather_watching(self.client, puts, also_watch=[s for s, _ in takes])
        finally:
            self._cancel_tasks(takes + puts)
        for cid, src, dst in moves:
            self.placement[src].remove(cid)
            self.placement.setdefault(dst, []).append(cid)
            self.placement[dst].sort()
            if dst not in self._workers:
                self._workers.append(dst)
        self.placement = {w: c for w, c in self.placement.items() if c}
        self.publish()

    def add_workers(self, workers):
        """Make ``workers`` (joined during the fit) available for chunks.

        Nothing moves yet: :meth:`move_chunks` gives them chunks.

        Parameters
        ----------
        workers : iterable of str
            Addresses of the workers.
        """
        for w in workers:
            if w not in self._workers:
                self._workers.append(w)

    def release(self, workers, retire=False, target=None):
        """Stop using ``workers`` (holding no chunks); optionally retire them.

        Their actors are cancelled.  With ``retire`` they are retired through
        the scheduler, in the background (the fit goes on; :meth:`close`
        waits for it), once the scheduler has let go of those actors
        (:func:`~daskelastic.adaptive.retire_released`); their solver state
        goes with them.  Otherwise their solver state is dropped at once and
        they are published as released, for an
        :class:`~daskelastic.ElasticAdaptive` to close or for the cluster to
        reuse.

        Parameters
        ----------
        workers : iterable of str
            Addresses of the workers a scale-in lets go.
        retire : bool
            Retire them through the scheduler.
        target : int, optional
            The fit's target number of workers, published with them (see
            :meth:`publish`).

        Raises
        ------
        RuntimeError
            When a worker still holds chunks.
        """
        workers = list(workers)
        held = [w for w in workers if self.placement.get(w)]
        if held:
            raise RuntimeError(f"workers {held} still hold chunks: move them first")
        actor_keys = self._drop_actors(workers)
        for w in workers:
            if w in self._workers:
                self._workers.remove(w)
            self.placement.pop(w, None)
        self.released.extend(w for w in workers if w not in self.released)
        if retire:
            # in the background: the scheduler's retirement takes 0.1-0.2 s
            # that the next rounds (on other workers) need not wait for
            if self._retire_pool is None:
                self._retire_pool = ThreadPoolExecutor(1, thread_name_prefix="daskelastic-retire")
            self._retiring.append((workers, self._retire_pool.submit(
                adaptive.retire_released, self.client, workers, actor_keys)))
        else:
            # free their memory for other work, keeping a fence against changes
            # still in flight; a retired worker's goes with it (and close()
            # drops the fit everywhere).  On the workers' event loops: a worker
            # that died meanwhile is skipped
            ask_scheduler("dropping the released workers' state", self.client.run, drop_fit,
                          self.fit_id, workers=workers, on_error="ignore", released=True)
        self.publish(target)

    def wait_retired(self, timeout=60.0):
        """Wait for the retirements :meth:`release` started in the background.

        A retirement that fails, that the scheduler refuses (a worker still
        holding an actor, of this fit after
        :func:`~daskelastic.adaptive.retire_released` waited in vain, or of
        other work) or that does not end within ``timeout`` seconds leaves
        its workers running: a warning says so, the fit is not affected.

        Parameters
        ----------
        timeout : float
            Seconds to wait for each retirement.
        """
        retiring, self._retiring = self._retiring, []
        for workers, fut in retiring:
            try:
                try:
                    retired = fut.result(timeout=timeout)
                except OSError:
                    # the connection to the scheduler broke meanwhile: once more
                    self._await_connection()
                    retired = adaptive.retire_released(self.client, workers)
            except Exception as e:  # noqa: BLE001 - the workers keep running, that is all
                warnings.warn(f"retiring released workers failed ({type(e).__name__}: {e}); "
                              "they keep running", RuntimeWarning, stacklevel=2)
                continue
            refused = set(workers) - set(retired)
            if refused:     # and still running (one may have died meanwhile)
                try:
                    refused &= set(scheduler_workers(self.client))
                except ConnectionLost:
                    continue
            if refused:
                warnings.warn(f"the scheduler did not retire released workers "
                              f"{sorted(refused)}; they keep running", RuntimeWarning,
                              stacklevel=2)
        if self._retire_pool is not None:
            self._retire_pool.shutdown(wait=False, cancel_futures=True)
            self._retire_pool = None

    def _drop_actors(self, workers):
        """Cancel the actors on ``workers``; returns the keys of those cancelled."""
        keys = []
        for w in workers:
            self._actors.pop(w, None)
            fut = self._actor_futures.pop(w, None)
            if fut is not None:
                keys.append(fut.key)
                self._cancel_tasks([(w, fut)])
        return keys

    # -- lost workers -------------------------------------------------------------
    def recover(self, lost, *, discard_round=None, settlements=None, speeds=None):
        """Carry on without the ``lost`` workers, whatever was under way.

        The running round is asked to stop on the live workers and waited
        for.  Then, in a new epoch (see
        ``worker.WorkerFit``), every live
        worker the fit ever sent chunks to says which chunks it holds, and
        settles its pending round: committed where ``settlements`` commits
        it (the last round's, which a worker may not have received),
        discarded otherwise — so ``discard_round``, the round that was
        running, is discarded everywhere.  The chunks held nowhere (the lost
        workers', and those of a move or a load cut short) are re-read from
        the input onto live workers (balanced by ``speeds``), their ``α``
        restarted at zero: in-memory chunks from the copies kept on the
        driver, dask blocks by recomputing them from the arrays' task
        graphs.  Workers that die meanwhile are recovered from too.  When
        every worker of the fit is gone, the fit takes the cluster's other
        workers (waiting ``daskelastic.fault.worker-timeout`` seconds for
        one, e.g. a worker its nanny restarts).  The driver recomputes ``w``
        from the workers' ``α`` afterwards.

        Parameters
        ----------
        lost : iterable of str
            Addresses of the workers that died.
        discard_round : int, optional
            The round that was running (discarded, as any pending round the
            settlements do not commit).
        settlements : dict, optional
            ``{worker: (round_id, gamma or None)}`` of the last round.
        speeds : dict, optional
            ``{worker: relative throughput}`` for placing the re-read chunks;
            1 for a worker not given.

        Returns
        -------
        dict
            ``{chunk_id: worker}`` of the re-read chunks.

        Raises
        ------
        RuntimeError
            When every worker was lost and none joined in time.
        """
        lost = set(lost)
        self._finish_round(lost)
        deadline = None
        while True:
            try:
                reread = self._resync(lost, settlements or {}, speeds or {})
                break
            except ConnectionLost:
                # the client may not have noticed yet: _resync waits for it to
                # reconnect, or says it gave up
                deadline = deadline or time.monotonic() + 2 * _connect_timeout()
                if time.monotonic() > deadline:
                    raise RuntimeError("the connection to the Dask scheduler was lost "
                                       "during the fit and not regained") from None
                time.sleep(0.1)
            except WorkersLost as more:
                lost.update(more.workers)
        self.lost.extend(w for w in sorted(lost) if w not in self.lost)
        self.publish()
        return reread

    def _finish_round(self, lost):
        """Stop the running round on the live workers and wait for it; add losses to ``lost``."""
        pending, self._pending, self._signals = self._pending, {}, {}
        calls = [(a, c) for a, c in pending.items() if a not in lost] + self._stop_calls
        self._stop_calls = []
        if pending and self._round_id is not None:
            live = [a for a in pending if a not in lost]
            if live:
                try:
                    self.stop_round(self._round_id, live)
                except Exception as e:  # noqa: BLE001 - a worker may have gone too
                    if not is_lost_error(e):
                        raise
                calls += self._stop_calls
                self._stop_calls = []
        deadline = time.monotonic() + 2 * _connect_timeout()
        for a, call in calls:
            # the round is discarded: only its end matters, not its result
            while a not in lost:
                try:
                    result_watching(self.client, call, [a])
                except ConnectionLost:
                    # the scheduler cannot say whether the worker lives: wait
                    # on (a round that ran on would be discarded at the next)
                    if call.done() or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                    continue
                except WorkersLost as more:
                    lost.update(more.workers)
                except Exception:  # noqa: BLE001 - e.g. an actor released with the connection
                    pass
                break

    def _resync(self, lost, settlements, speeds):
        """One attempt of :meth:`recover`'s survey and re-reading (may raise WorkersLost)."""
        self._await_connection()
        # actors the scheduler released (the client lost its connection) start again
        for a, future in list(self._actor_futures.items()):
            if future.status not in ("pending", "finished"):
                self._actors.pop(a, None)
                del self._actor_futures[a]
        self._epoch += 1
        live = set(scheduler_workers(self.client)) - lost
        survey = sorted(w for w in self._touched if w in live)
        answers = ask_scheduler("asking the workers what they hold",
                                self.client.run, resync, self.fit_id, self._epoch,
                                {w: settlements.get(w) for w in survey},
                                workers=survey, on_error="return") if survey else {}
        gone = set(survey) - set(answers)
        placement = {}
        for w, answer in answers.items():
            if isinstance(answer, Exception):
                if not is_lost_error(answer):
                    raise answer
                gone.add(w)
            elif answer:
                placement[w] = sorted(answer)
        if gone:
            raise WorkersLost(sorted(gone))
        for w in lost:
            self._actors.pop(w, None)
            self._actor_futures.pop(w, None)
            if w in self._workers:
                self._workers.remove(w)
        self.placement = placement
        held = {c for cids in placement.values() for c in cids}
        missing = sorted(set(self.chunk_sizes) - held)
        if not missing:
            return {}
        keep = self._recovery_workers(live, lost)
        speeds = {w: speeds.get(w, 1.0) for w in keep}
        load = {w: sum(self.chunk_sizes[c] for c in placement.get(w, ())) for w in keep}
        plan = defaultdict(list)
        for c in sorted(missing, key=lambda c: (-self.chunk_sizes[c], c)):
            dest = min(keep, key=lambda w: ((load[w] + self.chunk_sizes[c]) / speeds[w],
                                            keep.index(w)))
            plan[dest].append(c)
            load[dest] += self.chunk_sizes[c]
        loads = (self._send_chunks(plan) if self._source[0] == "chunks"
                 else self._reread_blocks(plan))
        try:
            self._check_blocks(plan, gather_watching(self.client, loads))
        finally:
            self._cancel_tasks(loads)
        for w, cids in plan.items():
            self.placement[w] = sorted(self.placement.get(w, []) + cids)
        return {c: w for w, cids in plan.items() for c in cids}

    def _await_connection(self):
        """Wait while the client reconnects to the scheduler; raise once it gave up.

        Raises
        ------
        RuntimeError
            When the client closed: its connection to the scheduler was lost
            and not regained within ``distributed.comm.timeouts.connect``.
        """
        deadline = time.monotonic() + 2 * _connect_timeout()
        while self.client.status == "connecting" and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.client.status != "running":
            raise RuntimeError(
                f"the connection to the Dask scheduler was lost during the fit and not "
                f"regained (the client is {self.client.status}); the workers drop the "
                f"fit's state when they restart")

    def _recovery_workers(self, live, lost):
        """Where re-read chunks may go: the fit's live workers, else the cluster's others.

        With none of its own left, the fit takes as many of the cluster's
        other workers as it lost (those it released last), waiting up to
        ``daskelastic.fault.worker-timeout`` seconds for one to join.
        """
        keep = [w for w in self._workers if w in live]
        if keep:
            return keep
        deadline = time.monotonic() + float(config.get("fault.worker-timeout"))
        while True:
            others = sorted(live, key=lambda w: (w in self.released, w))
            if others:
                keep = others[:max(len(lost), 1)]
                self._workers.extend(keep)
                self.released = [w for w in self.released if w not in keep]
                return keep
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"every worker of the fit was lost ({', '.join(sorted(lost))}) and no "
                    f"worker joined the cluster within "
                    f"{config.get('fault.worker-timeout')} s (daskelastic.fault.worker-timeout)")
            time.sleep(0.25)
            live = set(scheduler_workers(self.client)) - lost

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
                self._actors[a] = ActorCalls(self.client, a, future.key)
            else:
                # the proxy binds to the current client as it is unpickled
                with client_context(self.client):
                    self._actors[a] = ActorCalls(self.client, a, future.key,
                                                 actor=future.result())

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
