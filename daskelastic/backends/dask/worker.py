"""What runs on the workers: each fit's solver state and the functions that act on it.

Each worker holds, per running fit, a :class:`~daskelastic.solvers.ChunkSolver`
in a worker-local registry (an attribute of the ``distributed.Worker``): its
chunks, their dual variables ``α`` and the pending work of the last round.
The functions here run as tasks (or, for :class:`RoundActor`, as calls of an
actor) on the worker that holds the state.
"""

import math
import threading
import typing

import numpy as np
import scipy.sparse as sp
from distributed import get_worker

from ...solvers import ChunkSolver, sq_norm_sum
from ...targets import not_finite

_REGISTRY_ATTR = "_daskelastic_fits"

#: Guards the creation of a worker's registry and of a fit's state in it: a
#: worker with several threads runs the load tasks of its blocks at once, and
#: two of them could each create a solver, the second replacing the first and
#: the blocks the first received (a fit then trained on some of its rows)
_REGISTRY_LOCK = threading.Lock()


class WorkerFit:
    """One fit's state on a worker: its solver, and the epoch that fences stale changes.

    The driver starts a new *epoch* whenever it recovers from a lost worker
    or a lost connection (:func:`resync`): it asks every live worker what it
    holds and re-reads the chunks held nowhere.  A load, take, put or round
    sent before that but run after it would change what the driver no longer
    counts on — a chunk held twice, or not at all — so each carries the
    epoch it was sent in, and one from an older epoch changes nothing.  The
    check and the change happen under :attr:`lock`, as does the survey, so a
    change is either seen by the survey or refused; a worker surveyed before
    it held anything keeps the epoch too (its state starts empty, with no
    solver until a load brings the problem).  Rounds run one at a time
    (:attr:`round_lock`): one sent before a recovery runs out before the
    next starts, and its work, pending from an older epoch, is discarded.

    Attributes
    ----------
    solver : daskelastic.solvers.ChunkSolver or None
        The fit's chunks, dual state and pending round on this worker; None
        until the first load.
    epoch : int or float
        The newest epoch seen; ``inf`` once the fit let the worker go.
    round_epoch : int
        The epoch of the last round started.
    """

    def __init__(self):
        self.solver = None
        self.epoch = 0
        self.round_epoch = 0
        self.lock = threading.Lock()
        self.round_lock = threading.Lock()

    def current(self, epoch):
        """Whether a change sent in ``epoch`` may still be made (hold :attr:`lock`)."""
        return epoch >= self.epoch


def _registry(worker=None):
    worker = worker or get_worker()
    reg = getattr(worker, _REGISTRY_ATTR, None)
    if reg is None:
        with _REGISTRY_LOCK:
            reg = getattr(worker, _REGISTRY_ATTR, None)
            if reg is None:
                reg = {}
                setattr(worker, _REGISTRY_ATTR, reg)
    return reg


def _entry(fit_id, worker=None):
    """This worker's :class:`WorkerFit` of ``fit_id``, created empty when it has none."""
    reg = _registry(worker)
    fit = reg.get(fit_id)
    if fit is None:
        with _REGISTRY_LOCK:
            fit = reg.setdefault(fit_id, WorkerFit())
    return fit


def _fit(fit_id, problem=None):
    """This worker's state of fit ``fit_id``, with a solver made from ``problem`` if it has none.

    Raises
    ------
    RuntimeError
        When the worker holds no solver of the fit and no ``problem`` is given.
    """
    fit = _entry(fit_id)
    if fit.solver is None:
        if problem is None:
            raise RuntimeError(f"worker holds no state of fit {fit_id}")
        with fit.lock:
            if fit.solver is None:
                fit.solver = ChunkSolver.for_problem(problem)
    return fit


def _solver(fit_id):
    return _fit(fit_id).solver


def _settle(solver, settlement):
    if settlement is None:
        return
    round_id, gamma = settlement
    if gamma is None:
        solver.discard(round_id)
    else:
        solver.commit(round_id, gamma)


def load_chunks(fit_id, problem, epoch, *chunks):
    """Add in-memory chunks to this worker's solver, and pack its rows.

    A worker gets all its chunks in one call: it packs them at once, while the
    client still sends other workers theirs, and before the first round: a
    first round that packs takes longer, unevenly, and the default straggler
    policy would cut it, at a cost in rounds (see the docs' *Design notes*,
    *Packing the rows before the first round*).  Returns ``Σ ‖x_i‖²`` over their rows,
    or None when ``epoch`` is past (nothing is added; see :class:`WorkerFit`).
    """
    fit = _fit(fit_id, problem)
    with fit.lock:
        if not fit.current(epoch):
            return None
        for c in chunks:
            fit.solver.add_chunk(c.chunk_id, c.X, c.Y, c.sample_weight, shuffled=c.shuffled)
        # packing under the lock: a chunk added while the rows are packed
        # would be left out of the packing and forgotten
        fit.solver.prepare()
    return sum(sq_norm_sum(c.X) for c in chunks)


class BadBlock(typing.NamedTuple):
    """What :func:`load_block` returns for a block it refuses: the error's message.

    The driver raises it as a ``ValueError`` in the caller's process, naming
    the block's rows (a task that raised it would log a worker error too).
    """

    message: str


def load_block(fit_id, problem, epoch, encoder, chunk_id, X, y, sample_weight=None,
               pack_with=None):
    """Validate and encode one block of a dask collection, and hold it as a chunk.

    With ``pack_with`` (the ids of every chunk this worker is to hold), the
    task that completes them packs the worker's rows before the first round
    (see :func:`load_chunks`), with no call of its own.  Returns ``Σ ‖x_i‖²``
    over the block's rows, a :class:`BadBlock` for invalid input (NaN or
    infinity, rows that do not match, labels not seen), or None when
    ``epoch`` is past (see :class:`WorkerFit`).
    """
    try:
        X, Y, sw = encoded_block(X, y, sample_weight, encoder)
    except (ValueError, TypeError) as e:
        return BadBlock(str(e))
    fit = _fit(fit_id, problem)
    total = sq_norm_sum(X)
    # the load tasks of a worker with several threads run at once: the one
    # that adds the last chunk, and only it, sees them all
    with fit.lock:
        if not fit.current(epoch):
            return None
        fit.solver.add_chunk(chunk_id, X, Y, sw)
        if pack_with is not None and set(pack_with) <= set(fit.solver.chunk_ids):
            fit.solver.prepare()   # under the lock, as in load_chunks
    return total


def encoded_block(X, y, sample_weight, encoder):
    """One block of dask input, validated and encoded: ``(X, Y, sample_weight)``.

    ``X`` as a float CSR matrix (indices sorted) or a C-contiguous float
    array; the targets and weights as ``encoder`` makes them.

    Raises
    ------
    ValueError
        For NaN or infinity, rows of ``X`` and ``y`` that do not match, or
        labels the encoder has not seen.
    """
    X = _as_chunk_matrix(X)
    Y, sw = encoder.encode(np.asarray(y), None if sample_weight is None
                           else np.asarray(sample_weight))
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X block has {X.shape[0]} rows but y block {Y.shape[0]}")
    return X, Y, sw


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


def run_round(fit_id, epoch, round_id, w, settlement, inv_lam_n, sigma, steps, seed,
              slowdown=1.0):
    """Settle the previous round, then run this round's local solver.

    Returns the round's :class:`~daskelastic.solvers.LocalResult`, or None
    for a round sent in an epoch past (the driver recovered since, and no
    longer waits for it).  A round of an older epoch still pending (it ran
    on while the driver recovered, and the survey did not see it) is
    discarded first: the driver's ``w`` follows the committed ``α`` the
    survey found.
    """
    fit = _fit(fit_id)
    with fit.round_lock:
        with fit.lock:
            if not fit.current(epoch):
                return None
            solver = fit.solver
            if solver.pending is not None and fit.round_epoch < epoch:
                solver.discard(solver.pending[0])
            _settle(solver, settlement)
            fit.round_epoch = epoch
        return solver.solve(w, round_id=round_id, inv_lam_n=inv_lam_n, sigma=sigma,
                            steps=steps, seed=seed, slowdown=slowdown)


def request_stop(fit_id, round_id, dask_worker=None):
    """Ask this worker's solver to stop round ``round_id`` (runs on the event loop)."""
    fit = getattr(dask_worker or get_worker(), _REGISTRY_ATTR, {}).get(fit_id)
    if fit is None or fit.solver is None:
        return False
    fit.solver.request_stop(round_id)
    return True


class RoundActor:
    """A Dask actor on one worker that runs the rounds of one fit.

    A call of an actor's method is one message to its worker and one back
    (through the scheduler unless it is sent straight to the worker, see
    :class:`~daskelastic.backends.dask.calls.ActorCalls`), not a task's
    client → scheduler → worker → scheduler → client path and the
    scheduler's bookkeeping (see the docs' *Design notes*, *Round calls
    straight to the workers' actors*).  The solver state is
    the same worker-local registry the load tasks fill.
    """

    def __init__(self, fit_id):
        self.fit_id = fit_id
        self.worker = get_worker()

    def run_round(self, epoch, round_id, w, settlement, inv_lam_n, sigma, steps, seed,
                  slowdown=1.0):
        """Settle the previous round, then run this round's local solver (:func:`run_round`).

        Runs in the worker's actor thread; the kernel releases the GIL.
        """
        return run_round(self.fit_id, epoch, round_id, w, settlement, inv_lam_n, sigma,
                         steps, seed, slowdown)

    def settle(self, settlement):
        """Apply a settlement outside a round (in the actor thread, after any round)."""
        settle(self.fit_id, settlement)

    def load(self, problem, epoch, *chunks):
        """Hold in-memory chunks sent with the call, packed (:func:`load_chunks`)."""
        return load_chunks(self.fit_id, problem, epoch, *chunks)


    async def stop(self, round_id):
        """Ask the running round to stop.

        A coroutine, so it runs on the worker's event loop at once instead of
        queueing behind the round in the actor thread.
        """
        return request_stop(self.fit_id, round_id, self.worker)


def settle(fit_id, settlement):
    """Apply a settlement outside a round (end of fit)."""
    fit = _fit(fit_id)
    with fit.lock:
        _settle(fit.solver, settlement)


def alpha_sum(fit_id, n_features):
    """``Σ α_i x_i`` over this worker's chunks."""
    fit = _fit(fit_id)
    with fit.lock:
        return fit.solver.weighted_alpha_sum(n_features)


def start_duals(fit_id, w, scales):
    """Set this worker's ``α`` to the dual values that match ``w``; return ``(sums, Σ α_i x_i)``."""
    fit = _fit(fit_id)
    with fit.lock:
        return fit.solver.start_duals(w, scales)


def scale_duals(fit_id, scale):
    """Multiply this worker's ``α`` by ``scale``."""
    fit = _fit(fit_id)
    with fit.lock:
        fit.solver.scale_duals(scale)


def gather_alpha(fit_id):
    """``{chunk_id: α}`` of this worker."""
    fit = _fit(fit_id)
    with fit.lock:
        return fit.solver.alpha_by_chunk()


def describe(fit_id):
    """Chunks and rows this worker holds."""
    fit = _fit(fit_id)
    with fit.lock:
        return {"chunks": fit.solver.chunk_ids, "rows": fit.solver.n_rows}


def held_bytes(fit_id, dask_worker=None):
    """Bytes of the rows this worker holds for a fit, with their dual state; 0 for none.

    For the dashboard, through ``Client.run``: it runs in the worker's event
    loop, so it takes no lock (a round holds it while it runs).
    """
    reg = getattr(dask_worker or get_worker(), _REGISTRY_ATTR, None) or {}
    fit = reg.get(fit_id)
    solver = fit.solver if fit is not None else None
    return 0 if solver is None else int(solver.nbytes)


def take_chunks(fit_id, epoch, chunk_ids):
    """Remove chunks from this worker's solver; return their rows as a ``RowBlock``.

    Returns None, and removes nothing, when ``epoch`` is past (see :class:`WorkerFit`).
    """
    fit = _fit(fit_id)
    with fit.lock:
        if not fit.current(epoch):
            return None
        return fit.solver.take_rows(list(chunk_ids))


def put_chunks(fit_id, problem, epoch, block):
    """Hold chunks moved from another worker (a ``RowBlock``) with their dual state.

    Returns the rows held, or None when ``epoch`` is past or the block was
    not taken (see :class:`WorkerFit`).
    """
    fit = _fit(fit_id, problem)
    with fit.lock:
        if block is None or not fit.current(epoch):
            return None
        fit.solver.add_rows(block)
        return fit.solver.n_rows


def resync(fit_id, epoch, settlements, dask_worker=None):
    """Start ``epoch`` on this worker and say which chunks it holds (``Client.run``).

    The driver's survey after a lost worker or connection (see
    :class:`WorkerFit`): changes sent in an older epoch are refused from now
    on, also on a worker that holds nothing yet.  A pending round is
    committed when this worker's settlement commits it (the settlement of
    the last round, which this worker may not have received) and otherwise
    discarded.  The driver waited for the rounds it sent; one that still
    runs (sent before a cut connection) is discarded by the next round.

    Parameters
    ----------
    fit_id : str
        The fit.
    epoch : int
        The new epoch.
    settlements : dict
        ``{worker address: (round_id, gamma or None)}``: what the driver
        decided for each worker's last round.
    dask_worker : distributed.Worker
        Passed by ``Client.run``.

    Returns
    -------
    list of int or None
        The ids of the chunks held; None for a worker that holds no state
        of the fit.
    """
    fit = _entry(fit_id, dask_worker)
    settlement = settlements.get(dask_worker.address)
    with fit.lock:
        fit.epoch = max(fit.epoch, epoch)
        solver = fit.solver
        if solver is None:
            return None
        if solver.pending is not None:
            round_id = solver.pending[0]
            if settlement is not None and settlement[0] == round_id \
                    and settlement[1] is not None:
                solver.commit(round_id, settlement[1])
            else:
                solver.discard(round_id)
        return solver.chunk_ids


def drop_fit(fit_id, dask_worker=None, released=False):
    """Forget everything this worker holds for a fit (``Client.run`` passes the worker).

    With ``released`` (the fit let the worker go) an empty state stays that
    refuses every change still in flight (its epoch is infinite), until the
    fit ends and drops it.
    """
    reg = getattr(dask_worker or get_worker(), _REGISTRY_ATTR, None)
    if reg is None:
        return False
    held = reg.pop(fit_id, None) is not None
    if released:
        reg[fit_id] = WorkerFit()
        reg[fit_id].epoch = math.inf
    return held
