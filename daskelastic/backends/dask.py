"""Workers on a Dask cluster: chunks and dual state live on the workers.

Each worker holds, per running fit, a :class:`~daskelastic.solvers.ChunkSolver`
in a worker-local registry (an attribute of the ``distributed.Worker``): its
chunks, their dual variables ``α`` and the pending work of the last round.
Only ``w``, the settlement of the previous round and a few numbers travel to
a worker each round, and only ``Δw`` and a few numbers come back.

Rounds reach the workers as calls to one :class:`RoundActor` per worker
(the default; sent straight from the client to the worker where it can reach
it, see ``daskelastic.actor-calls``) or, with
``daskelastic.round-transport: task``, as one task per worker per round named
``daskelastic-round-…`` in the dashboard's task stream.
"""

import asyncio
import concurrent.futures
import ipaddress
import threading
import uuid
import warnings
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp
from dask.core import flatten
from distributed import futures_of, get_worker, wait
from distributed.comm import get_address_host, parse_address
from distributed.comm.core import CommClosedError
from distributed.protocol import to_serialize
from distributed.utils import TimeoutError as DaskTimeoutError

from .. import adaptive, config
from ..driver import Backend, WorkersLost
from ..placement import assign_chunks
from ..solvers import ChunkSolver, sq_norm_sum
from ..targets import not_finite

__all__ = ["DaskBackend"]

_REGISTRY_ATTR = "_daskelastic_fits"


# --------------------------------------------------------------------------
# functions that run on the workers
# --------------------------------------------------------------------------
#: Guards the creation of a worker's registry and of a fit's solver in it, and
#: a load task's adding of its block: a worker with several threads runs the
#: load tasks of its blocks at once; two of them could each create a solver,
#: the second replacing the first and the blocks the first received (a fit
#: then trained on some of its rows), and only the task that adds the last
#: block may see them all (and pack them)
_REGISTRY_LOCK = threading.Lock()


def _registry():
    worker = get_worker()
    reg = getattr(worker, _REGISTRY_ATTR, None)
    if reg is None:
        with _REGISTRY_LOCK:
            reg = getattr(worker, _REGISTRY_ATTR, None)
            if reg is None:
                reg = {}
                setattr(worker, _REGISTRY_ATTR, reg)
    return reg


def _solver(fit_id, problem=None):
    reg = _registry()
    solver = reg.get(fit_id)
    if solver is None:
        if problem is None:
            raise RuntimeError(f"worker holds no state of fit {fit_id}")
        with _REGISTRY_LOCK:
            solver = reg.get(fit_id)
            if solver is None:
                solver = reg[fit_id] = ChunkSolver(problem.loss, problem.n_targets,
                                                   problem.intercept_scaling)
    return solver


def _settle(solver, settlement):
    if settlement is None:
        return
    round_id, gamma = settlement
    if gamma is None:
        solver.discard(round_id)
    else:
        solver.commit(round_id, gamma)


def load_chunks(fit_id, problem, *chunks):
    """Add in-memory chunks to this worker's solver, and pack its rows.

    A worker gets all its chunks in one call: it packs them at once, while the
    client still sends other workers theirs, and before the first round: a
    first round that packs takes longer, unevenly, and the default straggler
    policy cut it (on the flights table, 2 workers, a fit to ``tol=1e-3`` then
    took up to 41 rounds instead of 25).  Returns ``Σ ‖x_i‖²`` over their rows.
    """
    solver = _solver(fit_id, problem)
    for c in chunks:
        solver.add_chunk(c.chunk_id, c.X, c.Y, c.sample_weight, shuffled=c.shuffled)
    total = sum(sq_norm_sum(c.X) for c in chunks)
    solver.prepare()
    return total


def load_block(fit_id, problem, encoder, chunk_id, X, y, sample_weight=None,
               pack_with=None):
    """Validate and encode one block of a dask collection, and hold it as a chunk.

    With ``pack_with`` (the ids of every chunk this worker is to hold), the
    task that completes them packs the worker's rows before the first round
    (see :func:`load_chunks`), with no call of its own.  Returns ``Σ ‖x_i‖²``
    over the block's rows.
    """
    X = _as_chunk_matrix(X)
    Y, sw = encoder.encode(np.asarray(y), None if sample_weight is None
                           else np.asarray(sample_weight))
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X block has {X.shape[0]} rows but y block {Y.shape[0]}")
    solver = _solver(fit_id, problem)
    total = sq_norm_sum(X)
    # the load tasks of a worker with several threads run at once: the one
    # that adds the last chunk, and only it, sees them all
    with _REGISTRY_LOCK:
        solver.add_chunk(chunk_id, X, Y, sw)
        complete = pack_with is not None and set(pack_with) <= set(solver.chunk_ids)
    if complete:
        solver.prepare()
    return total


def _as_chunk_matrix(X):
    if sp.issparse(X):
        X = X.tocsr()
        data = X.data
        if data.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        X.sort_indices()
    else:
        X = np.asarray(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        X = np.ascontiguousarray(X)
        data = X
    if X.ndim != 2:
        raise ValueError(f"expected 2-d blocks of X, got {X.ndim}-d")
    if not np.all(np.isfinite(X.data if sp.issparse(X) else X)):
        raise not_finite("X")
    return X


def row_sq_norm_sum(fit_id):
    """``Σ ‖x_i‖²`` over this worker's rows."""
    return _solver(fit_id).row_sq_norm_sum()


def run_round(fit_id, round_id, w, settlement, inv_lam_n, sigma, steps, seed,
              slowdown=1.0):
    """Settle the previous round, then run this round's local solver."""
    solver = _solver(fit_id)
    _settle(solver, settlement)
    return solver.solve(w, round_id=round_id, inv_lam_n=inv_lam_n, sigma=sigma,
                        steps=steps, seed=seed, slowdown=slowdown)


def request_stop(fit_id, round_id, dask_worker=None):
    """Ask this worker's solver to stop round ``round_id`` (runs on the event loop)."""
    reg = getattr(dask_worker or get_worker(), _REGISTRY_ATTR, {})
    solver = reg.get(fit_id)
    if solver is not None:
        solver.request_stop(round_id)
    return solver is not None


class RoundActor:
    """A Dask actor on one worker that runs the rounds of one fit.

    A call of an actor's method is one message to its worker and one back
    (through the scheduler unless it is sent straight to the worker, see
    :class:`_DirectCalls`), not a task's client → scheduler → worker →
    scheduler → client path and the scheduler's bookkeeping (measured on a
    2-worker LocalCluster: ~3× less overhead per round).  The solver state is
    the same worker-local registry the load tasks fill.
    """

    def __init__(self, fit_id):
        self.fit_id = fit_id
        self.worker = get_worker()

    def run_round(self, round_id, w, settlement, inv_lam_n, sigma, steps, seed,
                  slowdown=1.0):
        """Settle the previous round, then run this round's local solver.

        Runs in the worker's actor thread; the kernel releases the GIL.
        """
        solver = self.worker_solver()
        _settle(solver, settlement)
        return solver.solve(w, round_id=round_id, inv_lam_n=inv_lam_n, sigma=sigma,
                            steps=steps, seed=seed, slowdown=slowdown)

    def settle(self, settlement):
        """Apply a settlement outside a round (in the actor thread, after any round)."""
        _settle(self.worker_solver(), settlement)

    def load(self, problem, *chunks):
        """Hold in-memory chunks sent with the call, packed (:func:`load_chunks`)."""
        return load_chunks(self.fit_id, problem, *chunks)

    def worker_solver(self):
        """This fit's solver on this worker."""
        return getattr(self.worker, _REGISTRY_ATTR, {})[self.fit_id]

    async def stop(self, round_id):
        """Ask the running round to stop.

        A coroutine, so it runs on the worker's event loop at once instead of
        queueing behind the round in the actor thread.
        """
        return request_stop(self.fit_id, round_id, self.worker)


def settle(fit_id, settlement):
    """Apply a settlement outside a round (end of fit)."""
    _settle(_solver(fit_id), settlement)


def alpha_sum(fit_id, n_features):
    """``Σ α_i x_i`` over this worker's chunks."""
    return _solver(fit_id).weighted_alpha_sum(n_features)


def gather_alpha(fit_id):
    """``{chunk_id: α}`` of this worker."""
    return _solver(fit_id).alpha_by_chunk()


def describe(fit_id):
    """Chunks and rows this worker holds."""
    s = _solver(fit_id)
    return {"chunks": s.chunk_ids, "rows": s.n_rows}


def take_chunks(fit_id, chunk_ids):
    """Remove chunks from this worker's solver; return their rows as a ``RowBlock``."""
    return _solver(fit_id).take_rows(list(chunk_ids))


def put_chunks(fit_id, problem, block):
    """Hold chunks moved from another worker (a ``RowBlock``) with their dual state.

    Returns the rows held.
    """
    solver = _solver(fit_id, problem)
    solver.add_rows(block)
    return solver.n_rows


def drop_fit(fit_id, dask_worker=None):
    """Forget everything this worker holds for a fit (``Client.run`` passes the worker)."""
    reg = getattr(dask_worker or get_worker(), _REGISTRY_ATTR, None) or {}
    return reg.pop(fit_id, None) is not None


# --------------------------------------------------------------------------
# the driver side
# --------------------------------------------------------------------------
class _DirectCalls:
    """Calls of a worker's actor sent from the client straight to the worker.

    A ``distributed.Actor`` proxy sends its calls through the scheduler, which
    forwards them, unless the client was made with ``direct_to_workers=True``
    (workers behind a firewall may be out of a client's reach).  This proxy
    sends each call to the worker's ``actor_execute`` handler over the
    client's connection pool, as such a client does, and returns a
    ``concurrent.futures.Future`` of its result.  Measured on a 2-worker
    LocalCluster (flights, logistic): a round spent 6.4 ms outside the
    solvers with direct calls, 8.3 ms with calls through the scheduler.

    Parameters
    ----------
    client : distributed.Client
        The client whose event loop and connections send the calls.
    address : str
        Address of the worker that holds the actor.
    key : str
        Key of the actor (of the future that created it).
    """

    def __init__(self, client, address, key):
        self._client = client
        self._address = address
        self._key = key

    def __getattr__(self, method):
        if method.startswith("_"):
            raise AttributeError(method)

        def call(*args):
            return asyncio.run_coroutine_threadsafe(self._call(method, args),
                                                    self._client.loop.asyncio_loop)
        return call

    async def _call(self, method, args):
        result = await self._client.rpc(self._address).actor_execute(
            function=method, actor=self._key, args=[to_serialize(a) for a in args],
            kwargs={})
        if result["status"] == "OK":
            return result["result"]
        raise result["exception"]


def _calls_direct(client, address, setting):
    """Whether calls of the actor on ``address`` go straight to its worker.

    ``setting`` is ``daskelastic.actor-calls``: ``"direct"``, ``"scheduler"``,
    or ``"auto"``: direct when the client sends its other calls straight to
    the workers (``direct_to_workers``) or the worker listens on a loopback
    or in-process address, which a client on that machine reaches.
    """
    if setting not in ("auto", "direct", "scheduler"):
        raise ValueError(f"daskelastic.actor-calls must be 'auto', 'direct' or "
                         f"'scheduler', got {setting!r}")
    if setting != "auto":
        return setting == "direct"
    if client.direct_to_workers:
        return True
    if parse_address(address)[0] == "inproc":
        return True
    host = get_address_host(address)
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:   # a host name
        return False


async def _wait_first_actor_call(calls, timeout):
    """Return once one of the actor calls is done, or ``timeout`` seconds passed."""
    async def settle(call):
        try:
            if isinstance(call, concurrent.futures.Future):
                # shielded: cancelling the wait below must not cancel the call
                call = asyncio.shield(asyncio.wrap_future(call))
            await call
        except Exception:  # noqa: BLE001 - the error is raised by .result() later
            pass

    waiters = [asyncio.ensure_future(settle(c)) for c in calls]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in waiters:
            t.cancel()


def scheduler_workers(client):
    """Addresses of the scheduler's workers, fetched now.

    ``Client.scheduler_info()`` returns a cache that the client's periodic
    refresh (which carries no per-worker information) may overwrite between
    the fetch and the return; ask the scheduler directly instead.
    """
    return sorted(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


def _persisted_blocks(client, arrays):
    """Persist dask arrays; return, per array, its row blocks' futures in order."""
    persisted = client.persist(arrays)
    with client.as_current():   # the fit's client, default or not
        wait(futures_of(persisted))
    blocks = []
    for a in persisted:
        futs = {f.key: f for f in futures_of(a)}
        blocks.append([futs[k] for k in flatten(a.__dask_keys__())])
    return blocks


#: Errors of an actor call that mean its worker is gone.
_LOST_ERRORS = (OSError, CommClosedError)


def _is_lost_error(error):
    return isinstance(error, _LOST_ERRORS) or (
        isinstance(error, RuntimeError) and "was lost" in str(error))


class DaskBackend(Backend):
    """Run the local solvers on the workers of a Dask cluster.

    Besides rounds, the backend carries out the elastic operations between
    rounds (:meth:`move_chunks`, :meth:`release`, :meth:`add_workers`,
    :meth:`recover`): a chunk moves as a task on its source worker that
    removes it from the solver and returns ``(X, Y, sample_weight, α)`` and a
    task restricted to the destination that depends on it and adds it — the
    data travels worker to worker, and ``α`` with it, so ``w`` is unchanged.
    A worker lost mid-fit is noticed when its round call fails (or by the
    elastic controller's check of the live workers between rounds); its chunks
    are re-read from the input (the driver-side chunks of numpy / scipy
    input, the task graph of dask input) onto live workers with ``α = 0``.

    A backend holds nothing until :meth:`load_chunks` (numpy / scipy input)
    or :meth:`load_dask` (dask arrays) places the data; :meth:`close` drops
    the fit's state from every worker.  The fit is named by a fresh
    ``fit_id``: one cluster can run several fits at once.

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
        (``daskelastic.backends.dask.RoundActor``: direct, fast) or one task
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
        self._stop_calls = []
        self._retiring = []   # background retirements (concurrent futures)
        self._retire_pool = None
        self._round_id = None
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

    # -- placing the data -----------------------------------------------------
    def load_chunks(self, chunks):
        """Send in-memory chunks to the workers, balanced by rows.

        Where the actors' calls go straight to the workers (the default on a
        ``LocalCluster``, see ``_calls_direct``), each worker's chunks go
        with a call of its actor, which adds them to its solver and packs
        them (``_load_by_actors``); otherwise they are scattered to it (all
        workers at once; see ``_scatter_chunks``) and added by a task
        restricted to it.  The chunks are kept on the driver to rebuild those
        of a lost worker.

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
        setting = config.get("actor-calls")
        if self.transport == "actor" and all(
                _calls_direct(self.client, a, setting) for a, c in plan.items() if c):
            self._load_by_actors(plan)
            return
        loads = self._scatter_chunks(plan)
        self._finish_loading(loads, plan)

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

        def load():
            with self.client.as_current():
                self._ensure_actors(targets)
                calls = [self._actors[a].load(self.problem, *[by_id[c] for c in plan[a]])
                         for a in targets]
                return [call.result() for call in calls]

        self._place_loaded(plan, load)

    def _scatter_chunks(self, plan):
        """Send each worker its chunks, all workers at once, and submit their load tasks.

        The chunks go straight from the client to a worker it reaches (see
        :func:`_calls_direct`), not through the scheduler, which would receive
        and forward every byte: on 2 local workers the flights table took
        ~50 ms to scatter direct, ~90 ms through the scheduler, and ~43 ms
        direct to both workers at once.
        """
        by_id = self._source[1]
        setting = config.get("actor-calls")
        targets = [addr for addr, cids in plan.items() if cids]

        async def scatter_all():
            return await asyncio.gather(*[
                self.client.scatter([by_id[c] for c in plan[addr]], workers=[addr],
                                    hash=False, asynchronous=True,
                                    direct=_calls_direct(self.client, addr, setting))
                for addr in targets])

        scattered = self.client.sync(scatter_all) if targets else []
        loads = [self.client.submit(
            load_chunks, self.fit_id, self.problem, *data, workers=[addr],
            allow_other_workers=False, pure=False,
            key=f"daskelastic-load-{self.fit_id}-{addr}-{uuid.uuid4().hex[:6]}")
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
        blocks = _persisted_blocks(self.client, persisted or arrays)
        del persisted
        who_has = self.client.who_has(blocks[0])
        sizes = {i: int(n) for i, n in enumerate(X.chunks[0])}
        self.chunk_sizes = sizes
        preferred = {i: list(who_has.get(f.key, ())) for i, f in enumerate(blocks[0])}
        plan = assign_chunks(sizes, self._workers, preferred=preferred)
        loads = []
        for addr, cids in plan.items():
            for cid in cids:
                # a worker's rows are packed by the load task that completes
                # them (no prepare call: one round trip less)
                loads.append(self.client.submit(
                    load_block, self.fit_id, self.problem, encoder, cid,
                    *[b[cid] for b in blocks], pack_with=list(cids),
                    workers=[addr], allow_other_workers=False,
                    pure=False, key=f"daskelastic-load-{self.fit_id}-{cid}"))
        # the chunks will live in the workers' solvers: drop dask's copies (no
        # reference to a block may stay in this frame, which an error's
        # traceback keeps)
        del blocks
        self._finish_loading(loads, plan)
        return plan

    def _reread_blocks(self, plan):
        arrays, encoder = self._source[1]
        loads = []
        for addr, cids in plan.items():
            for cid in cids:
                parts = self.client.compute([a.blocks[cid] for a in arrays])
                loads.append(self.client.submit(
                    load_block, self.fit_id, self.problem, encoder, cid, *parts,
                    workers=[addr], allow_other_workers=False, pure=False,
                    key=f"daskelastic-reload-{self.fit_id}-{cid}-{uuid.uuid4().hex[:6]}"))
                del parts
        return loads

    def _finish_loading(self, loads, plan):
        if self.transport == "actor":
            # the actors start while the chunks load, instead of a round trip
            # of their own before the first round
            self._submit_actors([w for w, c in plan.items() if c])

        def load():
            try:
                return self.client.gather(loads)
            finally:
                self.client.cancel(loads, force=True)

        self._place_loaded(plan, load)

    def _place_loaded(self, plan, load):
        """Wait for ``load()`` (each load's ``Σ ‖x_i‖²``), then place and publish ``plan``.

        An error of a load closes the backend and is raised again.
        """
        error = None
        try:
            self._sq_norm_sum = float(sum(load()))
        except Exception as e:  # noqa: BLE001 - re-raised below, without references
            error = e
        if error is not None:
            self.close()
            # a traceback would keep the frames, and with them the input's
            # futures, alive: raise the error without it
            raise error.with_traceback(None) from None
        self.placement = {w: c for w, c in plan.items() if c}
        self.publish()

    def _on_each_actor(self, method, args):
        """Call ``method`` of the actors of ``args``' workers with their args; wait for all.

        The calls go to the actors (see ``daskelastic.actor-calls``), which run them
        after any round.
        """
        with self.client.as_current():
            self._ensure_actors()
            calls = [getattr(self._actors[a], method)(*a_args) for a, a_args in args.items()]
            for call in calls:
                call.result()

    @property
    def available_workers(self):
        """The workers chunks may be placed on."""
        return list(self._workers)

    # -- elasticity -------------------------------------------------------------
    def publish(self, target=None):
        """Tell the scheduler plugin what this fit holds, wants and let go.

        The plugin vetoes downscaling the workers holding chunks and tells an
        :class:`~daskelastic.ElasticAdaptive` the fit's target.  The first
        call installs the plugin on the scheduler.

        Parameters
        ----------
        target : int, optional
            The fit's target number of workers; by default the number of
            workers holding chunks.
        """
        if not self._published:
            adaptive.install_plugin(self.client)
            self._published = True
        adaptive.publish_fit(self.client, self.fit_id, self.placement,
                             len(self.placement) if target is None else target,
                             self.released)

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
            take = self.client.submit(
                take_chunks, self.fit_id, cids, workers=[src], allow_other_workers=False,
                pure=False, key=f"daskelastic-take-{tag}")
            put = self.client.submit(
                put_chunks, self.fit_id, self.problem, take, workers=[dst],
                allow_other_workers=False, pure=False, key=f"daskelastic-put-{tag}")
            takes.append(take)
            puts.append(put)
        self.client.gather(puts)
        self.client.cancel(takes + puts, force=True)
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
        if not retire:
            # free their memory for other work; a retired worker's goes with
            # it (and close() drops the fit everywhere, retired or not)
            futs = [self.client.submit(drop_fit, self.fit_id, workers=[a],
                                       allow_other_workers=False, pure=False)
                    for a in workers]
            self.client.gather(futs)
        for w in workers:
            if w in self._workers:
                self._workers.remove(w)
            self.placement.pop(w, None)
        self.released.extend(w for w in workers if w not in self.released)
        self.publish(target)
        if retire:
            # in the background: the scheduler's retirement takes 0.1-0.2 s
            # that the next rounds (on other workers) need not wait for
            if self._retire_pool is None:
                self._retire_pool = ThreadPoolExecutor(1, thread_name_prefix="daskelastic-retire")
            self._retiring.append((workers, self._retire_pool.submit(
                adaptive.retire_released, self.client, workers, actor_keys)))

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
                retired = fut.result(timeout=timeout)
            except Exception as e:  # noqa: BLE001 - the workers keep running, that is all
                warnings.warn(f"retiring released workers failed ({type(e).__name__}: {e}); "
                              "they keep running", RuntimeWarning, stacklevel=2)
                continue
            refused = set(workers) - set(retired)
            if refused:     # and still running (one may have died meanwhile)
                refused &= set(scheduler_workers(self.client))
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
                self.client.cancel([fut], force=True)
        return keys

    def recover(self, lost, *, discard_round=None, settlements=None, speeds=None):
        """Carry on without the ``lost`` workers.

        Finishes the running round on the live workers (asking them to stop
        first, with the actor transport) and discards it (``discard_round``)
        or applies the ``settlements`` of the last round; then re-reads the
        lost workers' chunks from the input onto live workers (balanced by
        ``speeds``), their ``α`` restarted at zero: in-memory chunks from the
        copies kept on the driver, dask blocks by recomputing them from the
        arrays' task graphs.  The driver recomputes ``w`` from the surviving
        ``α`` afterwards.

        Parameters
        ----------
        lost : iterable of str
            Addresses of the workers that died.
        discard_round : int, optional
            The round that was running, to discard on the live workers.
        settlements : dict, optional
            ``{worker: (round_id, gamma or None)}`` of the last round, applied
            when no round was running (ignored with ``discard_round``).
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
            When every worker of the fit was lost.
        """
        lost = set(lost)
        pending, self._pending = self._pending, {}
        stops, self._stop_calls = self._stop_calls, []
        if self.transport == "actor":
            with self.client.as_current():
                for a in pending:
                    if a not in lost and a in self._actors:
                        stops.append(self._actors[a].stop(discard_round))
        for call in list(pending.values()) + stops:
            try:
                call.result()
            except Exception as e:  # noqa: BLE001 - only a lost worker's error is expected
                if not _is_lost_error(e):
                    raise
        self._drop_actors(lost)
        for w in lost:
            if w in self._workers:
                self._workers.remove(w)
        live_now = set(self.live_workers())
        if not [w for w in self._workers if w in live_now]:
            raise RuntimeError("every worker of the fit was lost")
        orphans = [c for w in lost for c in self.placement.pop(w, [])]
        self.lost.extend(w for w in lost if w not in self.lost)
        live = list(self.placement)
        if discard_round is not None:
            self._on_each(settle, per_worker={w: (discard_round, None) for w in live})
        elif settlements:
            self._on_each(settle, per_worker={w: s for w, s in settlements.items()
                                              if w in self.placement})
        keep = [w for w in self._workers if w in live_now]
        speeds = {w: (speeds or {}).get(w, 1.0) for w in keep}
        load = {w: sum(self.chunk_sizes[c] for c in self.placement.get(w, ())) for w in keep}
        plan = defaultdict(list)
        for c in sorted(orphans, key=lambda c: (-self.chunk_sizes[c], c)):
            dest = min(keep, key=lambda w: ((load[w] + self.chunk_sizes[c]) / speeds[w],
                                            keep.index(w)))
            plan[dest].append(c)
            load[dest] += self.chunk_sizes[c]
        if self._source[0] == "chunks":
            loads = self._scatter_chunks(plan)
        else:
            loads = self._reread_blocks(plan)
        self.client.gather(loads)
        self.client.cancel(loads, force=True)
        for w, cids in plan.items():
            self.placement[w] = sorted(self.placement.get(w, []) + cids)
        self.publish()
        return {c: w for w, cids in plan.items() for c in cids}

    # -- rounds ----------------------------------------------------------------
    def workers(self):
        return list(self.placement)

    def _submit_actors(self, workers):
        """Start an actor on each of ``workers`` that has none (without waiting)."""
        self._actor_futures.update({addr: self.client.submit(
            RoundActor, self.fit_id, workers=[addr], allow_other_workers=False,
            actor=True, key=f"daskelastic-actor-{self.fit_id}-{addr}")
            for addr in workers if addr not in self._actor_futures})

    def _ensure_actors(self, workers=None):
        """Have an actor proxy for each of ``workers`` (default: the placement's)."""
        missing = [a for a in (self.placement if workers is None else workers)
                   if a not in self._actors]
        if missing:
            self._submit_actors(missing)
            setting = config.get("actor-calls")
            for a in missing:
                future = self._actor_futures[a]
                actor = future.result()   # once the actor is up
                self._actors[a] = (_DirectCalls(self.client, a, future.key)
                                   if _calls_direct(self.client, a, setting) else actor)

    def start_round(self, round_id, w, settlements, *, inv_lam_n, sigma, steps, seed,
                    slowdowns=None):
        if self._pending:
            raise RuntimeError("a round is still running on the workers")
        slowdowns = slowdowns or {}
        self._round_id = round_id
        if self.transport == "actor":
            # actor proxies find their client through the current-client context
            with self.client.as_current():
                self._ensure_actors()
                self._pending = {
                    addr: self._actors[addr].run_round(
                        round_id, w, settlements.get(addr), inv_lam_n, sigma, steps, seed,
                        float(slowdowns.get(addr, 1.0)))
                    for addr in self.placement}
            return
        self._pending = {addr: self.client.submit(
            run_round, self.fit_id, round_id, w, settlements.get(addr), inv_lam_n, sigma,
            steps, seed, float(slowdowns.get(addr, 1.0)),
            workers=[addr], allow_other_workers=False, pure=False,
            key=f"daskelastic-round-{round_id}-{self.fit_id}-{addr}")
            for addr in self.placement}

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
            (its connection closed or the scheduler lost it).  Any other
            error of a round call is raised as it is.
        """
        if not self._pending:
            return {}
        if self.transport == "actor":
            if not any(c.done() for c in self._pending.values()) and timeout != 0:
                self.client.sync(_wait_first_actor_call, list(self._pending.values()),
                                 timeout)
            done = [a for a, c in self._pending.items() if c.done()]
        else:
            try:
                with self.client.as_current():
                    wait(list(self._pending.values()), timeout=timeout,
                         return_when="FIRST_COMPLETED")
            except (DaskTimeoutError, TimeoutError):
                pass
            done = [a for a, f in self._pending.items() if f.done()]
        out, lost = {}, []
        for a in done:
            try:
                out[a] = self._pending[a].result()
            except Exception as e:  # noqa: BLE001 - a lost worker is recovered from
                if not _is_lost_error(e):
                    raise
                lost.append(a)
                continue
            del self._pending[a]
        if lost:
            raise WorkersLost(lost)
        if not self._pending:
            self._collect_stop_calls()
        return out

    def stop_round(self, round_id, workers):
        if self.transport == "actor":
            with self.client.as_current():
                self._stop_calls.extend(self._actors[a].stop(round_id) for a in workers)
        else:
            self.client.run(request_stop, self.fit_id, round_id, workers=list(workers))

    def _collect_stop_calls(self):
        calls, self._stop_calls = self._stop_calls, []
        lost = []
        for c in calls:
            try:
                c.result()
            except Exception as e:  # noqa: BLE001 - a stopped worker may be gone
                if not _is_lost_error(e):
                    raise
                lost.append(c)
        return lost

    def _on_each(self, func, *args, per_worker=None):
        futures = {}
        for addr in self.placement:
            extra = () if per_worker is None else (per_worker.get(addr),)
            futures[addr] = self.client.submit(
                func, self.fit_id, *args, *extra, workers=[addr],
                allow_other_workers=False, pure=False)
        return dict(zip(futures, self.client.gather(list(futures.values()))))

    def settle(self, settlements):
        if self.transport != "actor":
            self._on_each(settle, per_worker=settlements)
            return
        self._on_each_actor("settle", {a: (s,) for a, s in settlements.items()
                                       if s is not None and a in self.placement})

    def row_sq_norm_sum(self):
        # the rows stay the same when chunks move or are re-read: the load
        # tasks' sum holds for the whole fit
        if self._sq_norm_sum is None:
            self._sq_norm_sum = float(sum(self._on_each(row_sq_norm_sum).values()))
        return self._sq_norm_sum

    def alpha_sum(self):
        parts = self._on_each(alpha_sum, self.problem.n_features)
        return sum(parts.values())

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
        self._pending = {}
        self._stop_calls = []
        self._actors = {}
        if self._actor_futures:
            self.client.cancel(list(self._actor_futures.values()), force=True)
            self._actor_futures = {}
        if self.client.status not in ("running", "connecting"):
            if self._retire_pool is not None:   # nothing left to retire them through
                self._retire_pool.shutdown(wait=False, cancel_futures=True)
                self._retire_pool, self._retiring = None, []
            return
        # before listing the workers: a task restricted to one being retired
        # would wait for it in vain
        self.wait_retired()
        if self._published:
            try:
                adaptive.end_fit(self.client, self.fit_id)
            except Exception:  # noqa: BLE001 - closing after a failure
                pass
        # on every worker, in one broadcast from the scheduler (a worker that
        # died meanwhile is skipped)
        try:
            self.client.run(drop_fit, self.fit_id, on_error="ignore")
        except Exception:  # noqa: BLE001 - closing after a failure
            pass
        self.placement = {}
