"""The estimators' side of the Newton solver (:mod:`daskelastic.newton`): when, and where.

``solver="auto"`` runs it where the Hessian is small (``n_features ×
n_targets`` at most ``daskelastic.newton.max-size``) and no rounds are asked
for (a simulated backend, a ``scaling_policy``); the passes run in this
process for input in memory and no Dask client, else one task per row block
on the cluster, on blocks persisted there.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from .. import config
from ..monitoring import FitMonitor
from ..newton import placed_block
from ..session import client_context, current_client, fit_session

#: Rows of a block summed in this process: bounds the copy ``x_i·h_i`` a
#: Hessian's product makes.
_ROWS_PER_BLOCK = 1 << 16


def uses_newton(estimator, problem):
    """Whether ``estimator``'s fit of ``problem`` runs the Newton solver.

    ``solver="newton"`` with a simulated backend or a ``scaling_policy``
    (both need rounds) is a ``ValueError``, as ``solver="gram"`` is.
    """
    from ..newton import NEWTON_LOSSES

    solver = getattr(estimator, "solver", "cocoa")
    if solver == "newton" and (problem.l1 or problem.loss not in NEWTON_LOSSES):
        raise ValueError("solver='newton' needs an L2 penalty (no L1 part) and a loss "
                         "with curvature (not the hinge): use solver='cocoa' (or 'auto')")
    if solver == "cocoa" or problem.l1 or problem.loss not in NEWTON_LOSSES:
        return False
    rounds_wanted = estimator._cluster_model() is not None \
        or estimator.scaling_policy is not None
    if solver == "newton":
        if rounds_wanted:
            raise ValueError("solver='newton' runs no rounds: a simulated backend "
                             "(backend=ClusterModel(...)) and scaling_policy need "
                             "solver='cocoa' (or 'auto')")
        return True
    size = problem.n_features * problem.n_targets
    return size <= config.get("newton.max-size") and not rounds_wanted


def _encode_block(X, y, sw, encoder, index, start):
    """One dask block's ``(X, Y, c)``, validated and encoded as CoCoA+'s loads do (on the
    worker); bad values raise the loader's message, which names the block.
    """
    from ..backends.dask.worker import encoded_block

    try:
        X, Y, c = encoded_block(X, y, sw, encoder)
    except ValueError as error:
        raise ValueError(f"{error} (in row block {index}: rows {start:,} to "
                         f"{start + X.shape[0] - 1:,} of the input)") from None
    return placed_block(X), Y, c


def _dask_blocks(X, y, sw, encoder, held, client):
    """Persisted ``(X, Y, c)`` blocks of dask input: delayed objects, one per row block."""
    import dask

    if held:    # (persisted by _prepare_dask where a client runs)
        X, y = held[0], held[1]
        sw = held[2] if sw is not None else None
    xs = X.to_delayed().ravel()
    ys = y.to_delayed().ravel()
    ws = [None] * len(xs) if sw is None else sw.to_delayed().ravel()
    starts = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(int)
    blocks = [dask.delayed(_encode_block, pure=True)(xb, yb, wb, encoder, i, int(start))
              for i, (xb, yb, wb, start) in enumerate(zip(xs, ys, ws, starts, strict=True))]
    if client is None:
        return list(dask.persist(*blocks, scheduler="threads"))
    return list(client.persist(blocks))


def _memory_blocks(X, Y, sw, k):
    """``(X, Y, c)`` blocks of input in memory: ``k`` blocks, or blocks that bound a copy."""
    n = X.shape[0]
    k = max(k, -(-n // _ROWS_PER_BLOCK))
    edges = np.linspace(0, n, k + 1).astype(int)
    return [(X[a:b], Y[a:b], sw[a:b]) for a, b in zip(edges[:-1], edges[1:], strict=True)
            if b > a]


def _placed(block):
    """A block as its passes read it (see :func:`daskelastic.newton.placed_block`)."""
    X, Y, c = block
    return placed_block(X), Y, c


#: Centred columns in memory whose uncentred values are at least this share of
#: zeros (one-hot encoded categories) are fitted uncentred and sparse: Newton's
#: steps do not need the centring, and the Hessian's product then costs the
#: non-zeros' pairs, not ``d²`` per row.
SPARSE_ZEROS = 0.9


def _uncentred(X, centre, w_start):
    """``X + centre`` as CSR where it is mostly zeros (and ``w_start`` moved so), or None."""
    if centre is None or sp.issparse(X) or not X.size:
        return None
    sample = X[: min(X.shape[0], 2000)] + centre.astype(X.dtype)
    if np.count_nonzero(sample) > (1.0 - SPARSE_ZEROS) * sample.size:
        return None
    X = sp.csr_matrix(X + centre.astype(X.dtype))
    if w_start is not None:
        w_start = w_start.copy()
        w_start[-1] -= centre @ w_start[:-1]
    return X, w_start


def fit_newton(estimator, X, Y, sw, encoder, problem, w_start, dask_input, held,
               centre=None):
    """The Newton solver's :class:`~daskelastic.driver.FitResult` for ``estimator``.

    ``Y`` and ``sw`` are the encoded targets and weights in memory, or the
    raw dask targets and weights of dask input (encoded as the blocks are
    persisted).  ``centre`` is what the caller subtracted from ``X``'s
    columns (None: nothing), added back here where that makes ``X`` sparse.
    Each step appends a ``history_`` entry with the CoCoA+ rounds' keys that
    the progress bar and the dashboard read.
    """
    started = time.perf_counter()
    uncentred = None if dask_input else _uncentred(X, centre, w_start)
    if uncentred is not None:
        X, w_start = uncentred
    owns_cluster = estimator.client is None and current_client() is None
    if dask_input:
        client = estimator.client or current_client()
        session = _NoSession(client)
    else:
        session = fit_session(client=estimator.client, backend=estimator.backend,
                              n_values=0, n_workers=estimator.n_workers)
    blocks = []
    try:
        with session as (kind, client), client_context(client):
            result, last_entry = _run(estimator, X, Y, sw, encoder, problem, w_start,
                                      dask_input, held, kind, client, blocks, started,
                                      owns_cluster and not dask_input)
    except Exception as error:
        # the blocks' futures would live on in the traceback's frames
        blocks.clear()
        held.clear()
        raise error.with_traceback(None) from None
    blocks.clear()
    if uncentred is not None:   # back to the centred columns' intercept the caller maps
        result.w[-1] += centre @ result.w[:-1]
    objective = result.objective
    if estimator.verbose:
        print(f"[daskelastic] Newton solver on {problem.n_samples:,} rows: "
              f"{result.n_iter} steps, {last_entry['passes']} passes, relative duality gap "
              f"{objective.relative_gap:.2e}", flush=True)
    if not result.converged:
        warnings.warn(
            f"daskelastic did not reach tol={estimator.tol:g} in max_iter="
            f"{estimator.max_iter} Newton steps (relative duality gap "
            f"{objective.relative_gap:.3g}, Newton decrement's estimate "
            f"{last_entry['decrement']:.3g}); increase max_iter or tol. Separable "
            "classes with a weak penalty have no finite optimum: the coefficients "
            "grow with every step", ConvergenceWarning, stacklevel=5)
    return result


def _run(estimator, X, Y, sw, encoder, problem, w_start, dask_input, held, kind, client,
         blocks, started, embedded):
    """Place the blocks (into the list ``blocks``) and take the steps.

    Returns ``(FitResult, the last history entry)``.
    """
    import dask

    from ..driver import FitResult
    from ..newton import newton_sums, solve
    from ..objective import Objective

    if embedded and kind == "dask" and estimator.verbose:
        k = len(client.scheduler_info(n_workers=-1)["workers"])
        print(f"[daskelastic] fitting on a LocalCluster of {k} worker{'s' if k != 1 else ''} "
              "started for this fit (backend='dask')", flush=True)
    if dask_input:
        blocks.extend(_dask_blocks(X, Y, sw, encoder, held, client))
    elif kind == "inprocess":
        blocks.extend(_placed(b) for b in _memory_blocks(X, Y, sw, 1))
    else:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        cpw = estimator.chunks_per_worker or config.get("chunks-per-worker")
        # embedded in their tasks (not scattered): a lost worker's blocks are
        # recomputed from the graph; made dense there, not here (the smaller
        # form travels)
        with warnings.catch_warnings():
            # (distributed's advice against large graphs: here they are the
            # point, the blocks' source for a recomputation)
            warnings.filterwarnings("ignore", message="Sending large graph")
            blocks.extend(client.persist([
                dask.delayed(_placed, pure=True)(b)
                for b in _memory_blocks(X, Y, sw, max(len(workers), 1) * cpw)]))
    held.clear()
    n_workers = 1 if client is None else len(client.scheduler_info(n_workers=-1)["workers"])
    # (asked again: the cluster may have changed while the blocks were placed)
    scheduler = client if client is not None else "threads"
    common = dict(loss=problem.loss, intercept_scaling=problem.intercept_scaling,
                  free=problem.free_intercept)

    def evaluate(w, step, trial_steps):
        return newton_sums(blocks, client=scheduler, w=w, step=step,
                           trial_steps=trial_steps, **common)

    monitor = FitMonitor(estimator, None, client, progress=estimator._progress_callback())
    last = [started]

    def on_step(entry):
        now = time.perf_counter()
        entry.update(_round_keys(entry, n_workers, problem.n_samples, now - last[0]))
        last[0] = now
        monitor.on_round(entry)

    try:
        w, n_iter, converged, history = solve(evaluate, problem, tol=estimator.tol,
                                              max_iter=estimator.max_iter, w_start=w_start,
                                              callback=on_step, start=started)
    except BaseException as error:
        monitor.finish(error=error)
        raise
    entry = history[-1]
    objective = Objective(primal=entry["primal"], dual=entry["dual"], gap=entry["gap"],
                          relative_gap=entry["duality_gap"])
    result = FitResult(w, n_iter, converged, objective, history)
    monitor.finish(result)
    return result, entry


def _round_keys(entry, n_workers, n_rows, seconds):
    """A Newton step's ``entry`` with the fields of a CoCoA+ round's (:class:`RoundEntry`).

    Built through :class:`~daskelastic.history.RoundEntry`, so that a field
    the rounds' history gains is one a Newton step's entry has too.
    """
    from ..history import RoundEntry

    own = {k: entry[k] for k in ("round", "time", "duality_gap", "gap", "primal", "dual",
                                 "step")}
    return dict(RoundEntry(**own, n_workers=n_workers, n_used=n_workers, n_dropped=0,
                           n_preempted=0, n_backup=None, steps=n_rows, sigma=1.0, outer=0,
                           kappa=0.0, worker_seconds={}, worker_cpu_seconds={},
                           worker_arrival={}, worker_rows={}, worker_status={}, cut=None,
                           round_seconds=seconds, policy="wait", policy_estimate=None,
                           cost=None).as_dict(), solver="newton")


class _NoSession:
    """A ``fit_session``-like context for dask input: its client, or dask's threads."""

    def __init__(self, client):
        self.client = client

    def __enter__(self):
        return ("dask" if self.client is not None else "threads"), self.client

    def __exit__(self, *exc):
        return False
