"""Chunks: building them from the input and deciding which worker holds which.

A chunk is a block of consecutive rows ``(X, Y, sample_weight)`` with a stable
integer id.  Chunks are the unit of placement: one task per worker per round
processes every chunk the worker holds, and moving a chunk (with its dual
state) is how load is balanced and workers join or leave.
"""

import heapq
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["Chunk", "split_rows", "make_chunks", "assign_chunks", "workers_to_release",
           "plan_moves", "predicted_round_time"]


@dataclass
class Chunk:
    """A block of training rows.

    Attributes
    ----------
    chunk_id : int
        Stable id.
    X : ndarray (C-contiguous) or scipy.sparse.csr_matrix
    Y : ndarray of shape (n_rows, m)
        Encoded targets.
    sample_weight : ndarray of shape (n_rows,)
    rows : ndarray of int, optional
        Positions of the chunk's rows in the training input.
    shuffled : bool
        Whether the rows are in a random order (a random sample of the input,
        as :func:`make_chunks` cuts with ``shuffle``): a solver that holds
        only such chunks packs them in their own order instead of shuffling
        them again (see ``daskelastic.solvers.ChunkSolver.add_chunk``).
    """

    chunk_id: int
    X: object
    Y: np.ndarray
    sample_weight: np.ndarray
    rows: object = None
    shuffled: bool = False

    @property
    def n_rows(self):
        """Rows in the chunk."""
        return self.X.shape[0]


def split_rows(n_rows, n_chunks=None, chunk_rows=None):
    """Return the ``(start, stop)`` row bounds of near-equal chunks.

    Parameters
    ----------
    n_rows : int
        Number of rows to split.
    n_chunks : int, optional
        Number of chunks (ignored when ``chunk_rows`` is given); one when
        omitted, and at most ``n_rows``.  The first ``n_rows % n_chunks``
        chunks have one row more than the others, as in
        ``numpy.array_split``.
    chunk_rows : int, optional
        Rows per chunk (the last may be shorter).

    Returns
    -------
    list of (int, int)
        Consecutive ``(start, stop)`` bounds covering ``range(n_rows)``.

    Examples
    --------
    >>> from daskelastic.placement import split_rows
    >>> split_rows(10, n_chunks=3)
    [(0, 4), (4, 7), (7, 10)]
    >>> split_rows(10, chunk_rows=4)
    [(0, 4), (4, 8), (8, 10)]
    """
    if chunk_rows is not None:
        if chunk_rows < 1:
            raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
        starts = range(0, n_rows, int(chunk_rows))
        return [(s, min(s + int(chunk_rows), n_rows)) for s in starts]
    n_chunks = max(1, min(int(n_chunks or 1), n_rows))
    # larger chunks first, like numpy.array_split
    sizes = np.full(n_chunks, n_rows // n_chunks)
    sizes[: n_rows % n_chunks] += 1
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def make_chunks(X, Y, sample_weight, bounds, shuffle=None):
    """Cut in-memory arrays into :class:`Chunk` objects along ``bounds``.

    Parameters
    ----------
    X, Y, sample_weight : arrays with the same rows
    bounds : list of (start, stop)
        Row ranges, from :func:`split_rows`.
    shuffle : int, optional
        Seed of a random row order to cut along instead of the input's order.
        Tables are often sorted (by date, by category); chunks cut from a sorted
        table differ from each other, and CoCoA+ on workers holding unlike rows
        converges far slower (see the docs' *Design notes*, *Chunks cut along
        a random row order*).  The chunks keep that random order (``shuffled``), so that
        the solvers need not shuffle their rows again when they pack them
        (a second row gather of the whole table); a gather in a random order
        cost the same here as one in the input's order.  Each chunk's
        ``rows`` keeps its rows' positions in the input.
    """
    n = X.shape[0]
    order = np.arange(n) if shuffle is None else \
        np.random.default_rng([int(shuffle), n]).permutation(n)
    chunks = []
    for cid, (a, b) in enumerate(bounds):
        rows = order[a:b]
        Xc = X[rows] if shuffle is not None else X[a:b]
        Xc = Xc.tocsr() if sp.issparse(Xc) else np.ascontiguousarray(Xc)
        if sp.issparse(Xc):
            Xc.sort_indices()
        chunks.append(Chunk(cid, Xc, np.ascontiguousarray(Y[rows]),
                            np.ascontiguousarray(sample_weight[rows]), rows,
                            shuffled=shuffle is not None))
    return chunks


def assign_chunks(chunk_sizes, workers, speeds=None, preferred=None):
    """Assign chunks to workers, balancing rows (weighted by speed).

    Chunks are taken largest first and each goes to the worker whose load
    relative to its speed is smallest, so a worker twice as fast gets about
    twice the rows.  A chunk stays on a worker of ``preferred[chunk_id]``
    (where its data already is) while that worker is within 10% of its fair
    share.

    Parameters
    ----------
    chunk_sizes : dict
        ``chunk_id → rows``.
    workers : sequence
        Worker ids.
    speeds : dict, optional
        ``worker → relative throughput``; equal when omitted.
    preferred : dict, optional
        ``chunk_id → list of workers`` that already hold the chunk's data.

    Returns
    -------
    dict
        ``worker → sorted list of chunk ids``.

    Examples
    --------
    >>> from daskelastic.placement import assign_chunks
    >>> assign_chunks({0: 10, 1: 10, 2: 10, 3: 10}, ["a", "b"])
    {'a': [0, 2], 'b': [1, 3]}
    """
    workers = list(workers)
    if not workers:
        raise ValueError("no workers to place chunks on")
    position = {w: i for i, w in enumerate(workers)}
    # loads only grow: a heap with stale entries refreshed on top finds the
    # least loaded worker in O(log K) (thousands of simulated workers)
    heap = [(0.0, i, w) for i, w in enumerate(workers)] if speeds is None else None
    speeds = {w: 1.0 for w in workers} if speeds is None else speeds
    load = {w: 0.0 for w in workers}
    plan = {w: [] for w in workers}
    total_speed = sum(speeds[w] for w in workers)
    fair = {w: 1.1 * sum(chunk_sizes.values()) * speeds[w] / total_speed
            for w in workers}
    for cid in sorted(chunk_sizes, key=lambda c: (-chunk_sizes[c], c)):
        here = [w for w in (preferred or {}).get(cid, ()) if w in load
                and load[w] + chunk_sizes[cid] <= fair[w]]
        if here:
            target = min(here, key=lambda w: load[w] / speeds[w])
            plan[target].append(cid)
            load[target] += chunk_sizes[cid]
            continue
        if heap is None:
            target = min(workers, key=lambda w: ((load[w] + chunk_sizes[cid]) / speeds[w],
                                                 position[w]))
        else:  # equal speeds: the least loaded worker, first in order on ties
            while heap[0][0] != load[heap[0][2]]:
                w = heap[0][2]
                heapq.heapreplace(heap, (load[w], position[w], w))
            target = heap[0][2]
        plan[target].append(cid)
        load[target] += chunk_sizes[cid]
        if heap is not None:
            heapq.heapreplace(heap, (load[target], position[target], target))
    return {w: sorted(c) for w, c in plan.items()}


def workers_to_release(n_release, speeds, rows):
    """The ``n_release`` workers to let go: the slowest first, then those with least data.

    Parameters
    ----------
    n_release : int
        How many workers to let go; none when ``≤ 0``, at most all of
        ``speeds``.
    speeds : dict
        ``worker → measured throughput`` of the candidate workers.
    rows : dict
        ``worker → rows held``.

    Returns
    -------
    list
        Worker ids, the first to release first.

    Examples
    --------
    >>> from daskelastic.placement import workers_to_release
    >>> workers_to_release(2, {"a": 1.0, "b": 0.5, "c": 1.0}, {"a": 10, "b": 10, "c": 5})
    ['b', 'c']
    """
    order = sorted(speeds, key=lambda w: (speeds[w], rows.get(w, 0), str(w)))
    return order[:max(int(n_release), 0)]


def predicted_round_time(placement, chunk_sizes, speeds):
    """``max over workers of rows / speed``: the round time a placement predicts.

    Parameters
    ----------
    placement : dict
        ``worker → list of chunk ids``.
    chunk_sizes : dict
        ``chunk_id → rows``.
    speeds : dict
        ``worker → throughput`` (coordinate steps, i.e. rows of a pass, per
        second) of every worker of ``placement`` that holds chunks.

    Returns
    -------
    float
        The largest ``rows / speed`` (seconds of the slowest worker);
        ``0.0`` when no worker holds a chunk.

    Examples
    --------
    >>> from daskelastic.placement import predicted_round_time
    >>> predicted_round_time({"a": [0], "b": [1]}, {0: 10, 1: 10}, {"a": 10.0, "b": 5.0})
    2.0
    """
    times = [sum(chunk_sizes[c] for c in cids) / speeds[w]
             for w, cids in placement.items() if cids]
    return max(times, default=0.0)


def plan_moves(placement, chunk_sizes, speeds, keep=None):
    """Which chunks to move so the workers in ``keep`` hold rows in proportion to speed.

    Chunks of workers not in ``keep`` all move.  A kept worker gives up
    chunks (smallest first) while it holds more than its share
    ``rows × speed / Σ speed`` by more than half of the chunk; then the
    chunks set free go, largest first, to the kept worker whose load per
    speed after taking it is smallest.  Few chunks move: a balanced
    placement moves none.

    Parameters
    ----------
    placement : dict
        ``worker → list of chunk ids`` now.
    chunk_sizes : dict
        ``chunk_id → rows``.
    speeds : dict
        ``worker → throughput`` of every kept worker.
    keep : sequence, optional
        Workers to hold chunks afterwards (default: those of ``speeds``);
        they may include workers holding nothing yet.

    Returns
    -------
    new_placement : dict
        ``worker → sorted list of chunk ids`` over ``keep``.
    moves : list of (chunk_id, source, destination)
        The chunks that change worker, sorted by chunk id.

    Examples
    --------
    >>> from daskelastic.placement import plan_moves
    >>> new, moves = plan_moves({"a": [0, 1], "b": [2, 3]}, dict.fromkeys(range(4), 10),
    ...                         {"a": 1.0})
    >>> new, moves
    ({'a': [0, 1, 2, 3]}, [(2, 'b', 'a'), (3, 'b', 'a')])
    """
    keep = list(speeds if keep is None else keep)
    if not keep:
        raise ValueError("no workers to keep")
    total = sum(chunk_sizes[c] for cids in placement.values() for c in cids)
    total_speed = sum(speeds[w] for w in keep)
    share = {w: total * speeds[w] / total_speed for w in keep}
    new = {w: list(placement.get(w, ())) for w in keep}
    source = {c: w for w, cids in placement.items() for c in cids}
    free = [c for w, cids in placement.items() if w not in new for c in cids]
    for w in keep:
        load = sum(chunk_sizes[c] for c in new[w])
        for c in sorted(new[w], key=lambda c: (chunk_sizes[c], c)):
            if load - share[w] <= 0.5 * chunk_sizes[c]:
                break
            new[w].remove(c)
            free.append(c)
            load -= chunk_sizes[c]
    load = {w: sum(chunk_sizes[c] for c in new[w]) for w in keep}
    moves = []
    for c in sorted(free, key=lambda c: (-chunk_sizes[c], c)):
        dest = min(keep, key=lambda w: ((load[w] + chunk_sizes[c]) / speeds[w],
                                        keep.index(w)))
        new[dest].append(c)
        load[dest] += chunk_sizes[c]
        if dest != source[c]:
            moves.append((c, source[c], dest))
    return {w: sorted(c) for w, c in new.items()}, sorted(moves, key=lambda m: m[0])
