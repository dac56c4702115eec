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

__all__ = ["Chunk", "split_rows", "make_chunks", "assign_chunks"]


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
    """

    chunk_id: int
    X: object
    Y: np.ndarray
    sample_weight: np.ndarray
    rows: object = None

    @property
    def n_rows(self):
        """Rows in the chunk."""
        return self.X.shape[0]


def split_rows(n_rows, n_chunks=None, chunk_rows=None):
    """Return the ``(start, stop)`` row bounds of near-equal chunks.

    Parameters
    ----------
    n_rows : int
    n_chunks : int, optional
        Number of chunks (ignored when ``chunk_rows`` is given).
    chunk_rows : int, optional
        Rows per chunk (the last may be shorter).

    Examples
    --------
    >>> from daskelastic.placement import split_rows
    >>> split_rows(10, n_chunks=3)
    [(0, 4), (4, 7), (7, 10)]
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
        converges far slower (on the date-sorted flights table, 2 workers
        reached 1e-3 in 18.5 s on contiguous blocks and in 3.3 s on shuffled
        rows).  Each chunk's ``rows`` keeps its rows' positions in the input.
    """
    n = X.shape[0]
    order = np.arange(n) if shuffle is None else \
        np.random.default_rng([int(shuffle), n]).permutation(n)
    chunks = []
    for cid, (a, b) in enumerate(bounds):
        rows = np.sort(order[a:b]) if shuffle is not None else order[a:b]
        Xc = X[rows] if shuffle is not None else X[a:b]
        Xc = Xc.tocsr() if sp.issparse(Xc) else np.ascontiguousarray(Xc)
        if sp.issparse(Xc):
            Xc.sort_indices()
        chunks.append(Chunk(cid, Xc, np.ascontiguousarray(Y[rows]),
                            np.ascontiguousarray(sample_weight[rows]), rows))
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
