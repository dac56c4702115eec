"""How a worker's rows sit in memory: row blocks, packing helpers and per-round arrays.

The helpers gather, stack and own the rows a worker packs.  The kernels read
what is found here about the packed rows: the column indices in a narrower
type (:func:`narrow_indices`), whether the values are all 1
(:func:`unit_values`) and whether the weights are
(:meth:`Workspace.unit_weights`).  :class:`Workspace` keeps the arrays a worker
reuses from round to round.
"""

import typing

import numpy as np
import scipy.sparse as sp


def unit_values(X):
    """Whether ``X`` is a CSR matrix each of whose stored values is 1 (a one-hot or 0/1 table).

    The SDCA kernels then leave the values unread (``sdca_chunk(...,
    unit_values=True)``) and stream the column indices alone: 2 bytes per
    non-zero instead of 10 (``float64`` values, :func:`narrow_indices`), with
    the same rounds bit for bit (the docs' *Algorithms*, *The local solver*;
    ``benchmarks/bench_unit_values.py``).  A stored 0 makes it False (only the
    fast path is lost).
    """
    return sp.issparse(X) and X.format == "csr" and _all_ones(X.data)


def _all_ones(a):
    """Whether every entry of the array ``a`` is 1."""
    return bool(np.all(a == 1))


def narrow_indices(X):
    """The column indices of a CSR ``X`` as ``uint16`` when it has at most 65,536 columns.

    The SDCA kernels read them in place of ``X.indices`` (:func:`sdca_chunk`):
    2 of a non-zero's 10 bytes instead of 4 of 12 (with ``float64`` values),
    in a pass whose rows come in buckets at random places (see the docs'
    *Benchmarks*, *The local solver*).  Wider matrices, and dense ones, get
    ``None``: the kernels read ``X``'s own.
    """
    if not sp.issparse(X) or X.shape[1] > 1 << 16:
        return None
    return X.indices.astype(np.uint16)


def sq_norm_sum(X):
    """``Σ ‖x_i‖²`` over the rows of a dense or sparse matrix (in float64).

    A dot product for ``float64`` values, which makes no temporary array: an
    array of the squares would be fresh pages under distributed's
    ``MALLOC_TRIM_THRESHOLD_`` (see the docs' *Design notes*, *Fewer fresh
    arrays on Dask workers*).
    """
    data = np.ravel(X.data if sp.issparse(X) else X)
    if data.dtype == np.float64:
        return float(np.dot(data, data))
    return float(np.sum(np.square(data, dtype=np.float64)))


class Workspace:
    """Arrays a worker reuses from round to round instead of allocating them.

    Dask starts its worker processes with ``MALLOC_TRIM_THRESHOLD_`` set, which
    turns off glibc's adaptive ``mmap`` threshold: every array above 128 KiB
    is then fresh memory from the kernel, and the first write to each of its
    pages is a page fault, for a dozen row-sized arrays per round (see the
    docs' *Benchmarks*, *The local solver*).  Arrays of the same name are
    handed out again while their shape and type stay the same.
    """

    def __init__(self):
        self._arrays = {}
        self._weights = None
        self._ones = None   # (sw, whether sw is all 1)

    def get(self, name, shape, dtype=np.float64):
        """An array ``name`` of ``shape`` and ``dtype`` (contents undefined)."""
        shape = tuple(shape)
        a = self._arrays.get(name)
        if a is None or a.shape != shape or a.dtype != dtype:
            a = self._arrays[name] = np.empty(shape, dtype)
        return a

    def entry_weights(self, sw, m):
        """:func:`_entry_weights` of ``sw`` and ``m``, kept while the same array ``sw`` comes back.

        Made once (a solver's packed weights, which it never writes), not
        every round: with three targets on the flights table it is a copy of
        ~1 million values, and with weights that are all 1 a pass over them.
        """
        kept = self._weights
        if kept is None or kept[0] is not sw or kept[1] != m:
            c = None if self.unit_weights(sw) else sw if m == 1 else np.repeat(sw, m)
            self._weights = kept = (sw, m, c)
        return kept[2]

    def unit_weights(self, sw):
        """Whether the weights ``sw`` are all 1: checked once, kept while ``sw`` comes back.

        The one answer for the kernels (``sdca_chunk``'s ``unit_weights``)
        and the logistic passes (:func:`_entry_weights`).
        """
        kept = self._ones
        if kept is None or kept[0] is not sw:
            self._ones = kept = (sw, _all_ones(sw))
        return kept[1]

    def clear(self):
        """Forget every array (the rows held changed)."""
        self._arrays.clear()
        self._weights = self._ones = None


def _array(work, name, like):
    """An array shaped like ``like``: ``work``'s, or a new one without a workspace."""
    return np.empty_like(like) if work is None else work.get(name, like.shape, like.dtype)


class RowBlock(typing.NamedTuple):
    """The rows of several chunks in one block, as they move between workers.

    Made by :meth:`ChunkSolver.take_rows`, added by
    :meth:`ChunkSolver.add_rows`.  The rows are in no particular chunk order
    (the packed order of the worker they come from); ``rows`` says where each
    chunk's rows are.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_rows, d)
        The rows.
    Y : ndarray of shape (n_rows, m)
        Encoded targets.
    sample_weight : ndarray of shape (n_rows,)
        Weights of the rows.
    alpha : ndarray of shape (n_rows, m)
        Committed dual state of the rows.
    rows : dict
        ``{chunk_id: positions}``: the block's rows that hold the chunk's
        rows, in the chunk's own row order.
    """

    X: object
    Y: np.ndarray
    sample_weight: np.ndarray
    alpha: np.ndarray
    rows: dict


for _field, _doc in (("X", "The rows."), ("Y", "Encoded targets."),
                     ("sample_weight", "Weights of the rows."),
                     ("alpha", "Committed dual state of the rows."),
                     ("rows", "Where each chunk's rows are in the block.")):
    getattr(RowBlock, _field).__doc__ = _doc
del _field, _doc


def _stack_rows(Xs):
    """Stack row blocks (dense or CSR) into one, CSR if any is sparse (a block alone as it is)."""
    if len(Xs) == 1 and sp.issparse(Xs[0]) and Xs[0].format == "csr":
        # as it is: ``csr_matrix(X)`` copies the arrays of a block that
        # arrived in a message (views of its buffer) into fresh pages (docs'
        # *Design notes*, *Fewer fresh arrays on Dask workers*)
        return Xs[0]
    dtype = np.result_type(*[x.dtype for x in Xs])
    if any(sp.issparse(x) for x in Xs):
        Xs = [sp.csr_matrix(x, dtype=dtype) for x in Xs]
        return Xs[0] if len(Xs) == 1 else sp.vstack(Xs, format="csr")
    Xs = [np.asarray(x, dtype=dtype) for x in Xs]
    return Xs[0] if len(Xs) == 1 else np.vstack(Xs)


def _gather_rows(X, positions):
    """Rows ``positions`` of ``X`` (C-contiguous, or CSR with sorted indices)."""
    X = X[positions]
    if sp.issparse(X):
        X = X.tocsr()
        if not X.has_sorted_indices:   # computed: a row gather keeps each row's order
            X.sort_indices()
        return X
    return np.ascontiguousarray(X)


def _own(a, copy):
    """``a`` as a C-contiguous, writable array: a copy when ``copy`` or when it is not."""
    if copy or not (a.flags.c_contiguous and a.flags.writeable):
        return np.array(a, order="C")
    return a


def _own_rows(X):
    """``X`` (dense, or CSR with sorted indices) in C-contiguous, writable arrays.

    The arrays themselves when they are (the kernels only read them), copies
    otherwise.
    """
    if not sp.issparse(X):
        return _own(X, False)
    if not X.has_sorted_indices:
        return X.sorted_indices()
    if not all(a.flags.writeable and a.flags.c_contiguous
               for a in (X.data, X.indices, X.indptr)):
        return sp.csr_matrix((np.array(X.data), np.array(X.indices), np.array(X.indptr)),
                             shape=X.shape)
    return X


def _empty_packing(m):
    """The packing of a solver that holds no rows."""
    return np.zeros((0, 0)), np.zeros((0, m)), np.zeros(0), np.zeros((0, m))

