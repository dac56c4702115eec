"""How a worker's rows sit in memory: the chunks held, their packing and per-round arrays.

:class:`ChunkStore` holds the chunks of one worker, with their dual state,
packed into one matrix in a random row order; rows move between workers as a
:class:`RowBlock`.  The kernels read what is found here about the packed
rows: the column indices in a narrower type (:func:`narrow_indices`), whether
the values are all 1 (:func:`unit_values`) and whether the weights are
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


def _concatenate(parts):
    """The arrays ``parts`` end to end (the one array itself when alone)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


#: Bytes of packed rows gathered in one piece of :func:`gather_stacked`: its
#: transient copies are a few pieces, not the whole packing
PACK_PIECE_BYTES = 32 << 20


def _source_bytes(source):
    """Bytes of the arrays of ``(X, Y, sw, alpha)`` (or of a :class:`RowBlock`)."""
    X = source[0]
    data = (X.data, X.indices, X.indptr) if sp.issparse(X) else (X,)
    return sum(a.nbytes for a in (*data, *source[1:4]))


def gather_stacked(sources, take, piece_bytes=None):
    """Rows ``take`` of the stack of ``sources``, each source freed once its rows are cut.

    What ``_gather_rows(_stack_rows(Xs), take)`` (and the same gather of
    ``Y``, ``sw`` and ``α``) returns, without the two whole copies: the
    sources are read one by one, each cut into pieces by the range of
    packed rows its rows go to, and let go (``sources[s]`` becomes None);
    then each range is assembled from its pieces, in order, into the
    packed arrays.  A worker's memory then grows by a source and a few
    ranges (:data:`PACK_PIECE_BYTES` each) while it packs, not by two copies
    of its rows; the caller must hold no other reference to the sources for
    them to be freed (see the docs' *User guide*, *Memory*).

    Parameters
    ----------
    sources : list of tuple
        ``(X, Y, sw, alpha)`` per source: dense or CSR rows (CSR with sorted
        indices), ``Y`` and ``alpha`` of shape ``(rows, m)``, ``sw`` of
        shape ``(rows,)``.  Emptied as the rows are cut out.
    take : ndarray of int64
        Packed row ``p`` is row ``take[p]`` of the sources stacked.
    piece_bytes : int, optional
        Bytes per range of packed rows; :data:`PACK_PIECE_BYTES` when None.

    Returns
    -------
    tuple
        ``(X, Y, sw, alpha)`` of the packed rows, C-contiguous (CSR with
        sorted indices when any source is sparse).
    """
    n = take.shape[0]
    sparse = any(sp.issparse(src[0]) for src in sources)
    dtype = np.result_type(*[src[0].dtype for src in sources])
    d = sources[0][0].shape[1]
    m = sources[0][1].shape[1]
    total = sum(_source_bytes(src) for src in sources)
    n_ranges = int(min(max(total // (piece_bytes or PACK_PIECE_BYTES), 1), max(n, 1)))
    bounds = np.linspace(0, n, n_ranges + 1).astype(np.int64)
    offsets = np.cumsum([0] + [src[0].shape[0] for src in sources])
    of_source = np.searchsorted(offsets, take, side="right") - 1
    pieces = [[] for _ in range(n_ranges)]   # per range: (packed rows, X, Y, sw, alpha)
    nnz = 0
    for s in range(len(sources)):
        packed = np.flatnonzero(of_source == s)   # ascending, so grouped by range
        local = take[packed] - offsets[s]
        cuts = np.searchsorted(packed, bounds)
        X, Y, sw, alpha = sources[s][:4]
        sources[s] = None
        if sparse:
            X = sp.csr_matrix(X, dtype=dtype)
            nnz += int(np.diff(X.indptr)[local].sum())
        for j in range(n_ranges):
            rows = local[cuts[j]:cuts[j + 1]]
            if rows.shape[0]:
                pieces[j].append((packed[cuts[j]:cuts[j + 1]], X[rows], Y[rows], sw[rows],
                                  alpha[rows]))
        del X, Y, sw, alpha
    del of_source
    Y_out, alpha_out = np.empty((n, m)), np.empty((n, m))
    sw_out = np.empty(n)
    if sparse:
        index_dtype = np.int64 if max(nnz, d) > np.iinfo(np.int32).max else np.int32
        data, indices = np.empty(nnz, dtype), np.empty(nnz, index_dtype)
        indptr = np.zeros(n + 1, index_dtype)
        filled = 0
    else:
        X_out = np.empty((n, d), dtype)
    for j in range(n_ranges):
        start = bounds[j]
        parts, pieces[j] = pieces[j], None
        if not parts:
            continue
        where = np.concatenate([p[0] for p in parts])
        for k, out in ((2, Y_out), (3, sw_out), (4, alpha_out)):
            out[where] = _concatenate([p[k] for p in parts])
        if sparse:
            # a range's rows in packed order, then into the packed arrays
            block = _stack_rows([p[1] for p in parts])
            parts = None
            block = block[np.argsort(where, kind="stable")]
            size = block.nnz
            data[filled:filled + size] = block.data
            indices[filled:filled + size] = block.indices
            indptr[start + 1:bounds[j + 1] + 1] = block.indptr[1:] + filled
            filled += size
        else:
            for p in parts:
                X_out[p[0]] = p[1]
        parts = None
    if sparse:
        X_out = sp.csr_matrix((data, indices, indptr), shape=(n, d))
        if not X_out.has_sorted_indices:
            X_out.sort_indices()
    return X_out, Y_out, sw_out, alpha_out


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


class ChunkStore:
    """The chunks one worker holds and their committed dual state, packed in one matrix.

    Chunks come in one by one (:meth:`add_chunk`) or in blocks moved from
    another worker (:meth:`add_rows`) and leave the same two ways
    (:meth:`remove_chunks`, :meth:`take_rows`).  Before a round the rows of
    every chunk are packed into one matrix in a random row order
    (``_pack``), rebuilt only when the set of chunks changed: a round
    then visits the packed rows bucket by bucket (see
    :class:`~daskelastic.solvers.ChunkSolver`).  With sparse rows of at most
    65,536 columns the packing keeps a ``uint16`` copy of the column indices
    (``narrow_indices``) and notes whether the values are all 1
    (``unit_values``), for the kernels to read fewer bytes per visit.

    ``pending`` is the round's work not committed yet, a ``Δα`` indexed by
    packed row: while it is set, the chunks held cannot change, since a
    repacking would move the rows under it.

    Parameters
    ----------
    n_targets : int
        Columns of ``Y`` and ``α``.
    seed : int
        Seed of the packing order.
    """

    def __init__(self, n_targets, seed=0):
        self.n_targets = n_targets
        self.seed = seed
        self.pending = None   # (round_id, dalpha over the packed rows)
        self._unpacked = {}   # chunk_id -> (X, Y, sw, alpha) not packed yet
        self._shuffled = set()   # ids of unpacked chunks whose rows came shuffled
        self._rows = {}       # chunk_id -> positions of its rows in the packing
        self._blocks = []     # RowBlocks added by add_rows, not packed yet
        self._packed = None   # (X, Y, sw, alpha)
        self._indices = None  # narrow_indices of the packed X
        self._unit = False    # unit_values of the packed X
        self._work = Workspace()   # per-round arrays, sized to the packed rows

    def add_chunk(self, chunk_id, X, Y, sample_weight, alpha=None, shuffled=False):
        """Hold a chunk, with its dual state.

        The chunk is packed with the others when the next round starts.  The
        packing shuffles the rows (see the class), unless every chunk it packs
        was added with ``shuffled=True`` and nothing else is held: then it
        stacks them as they are, which saves a gather of every row (see the
        docs' *Benchmarks*, *The local solver*).

        Parameters
        ----------
        chunk_id : int
            Id of the chunk, not held yet.
        X : ndarray or sparse matrix of shape (n_rows, d)
            The chunk's rows.  The solver may keep ``X``'s own arrays (a lone
            chunk added with ``shuffled=True``) and reads facts off them
            when it packs (whether all values are 1, the column indices in a
            narrower type): do not change ``X`` while the chunk is held.
        Y : ndarray of shape (n_rows, m) or (n_rows,)
            Encoded targets.
        sample_weight : ndarray of shape (n_rows,)
            Weights ``c_i`` of the rows.
        alpha : ndarray of shape (n_rows, m), optional
            Committed dual state of the rows; zeros when None.
        shuffled : bool
            Whether the rows are already in a random order (a random sample
            of the training rows, as ``daskelastic.placement.make_chunks``
            cuts them with ``shuffle``).  Leave it False for rows in the
            input's order: visiting sorted rows bucket by bucket converges
            far slower.

        Raises
        ------
        ValueError
            When the chunk is already held.
        RuntimeError
            When a round's work is pending (neither committed nor discarded).
        """
        self._check_no_pending("add a chunk")
        if chunk_id in self._held():
            raise ValueError(f"chunk {chunk_id} is already held")
        Y = np.asarray(Y, dtype=np.float64).reshape(X.shape[0], -1)
        if alpha is None:
            alpha = np.zeros((X.shape[0], self.n_targets))
        alpha = np.asarray(alpha, dtype=np.float64).reshape(X.shape[0], self.n_targets)
        self._unpacked[chunk_id] = (X, Y, np.asarray(sample_weight, dtype=np.float64),
                                    alpha)
        if shuffled:
            self._shuffled.add(chunk_id)
        else:
            self._shuffled.discard(chunk_id)

    def remove_chunk(self, chunk_id):
        """Release a chunk and return its data and dual state.

        Parameters
        ----------
        chunk_id : int
            Id of a chunk held.

        Returns
        -------
        tuple
            ``(X, Y, sample_weight, alpha)``, as :meth:`get_chunk` returns them.
        """
        self._check_no_pending("remove a chunk")
        if chunk_id in self._unpacked:
            return self._unpacked.pop(chunk_id)
        return self.remove_chunks([chunk_id])[chunk_id]

    def remove_chunks(self, chunk_ids):
        """Release several chunks, repacking the rest once.

        Parameters
        ----------
        chunk_ids : list of int
            Ids of chunks held.

        Returns
        -------
        dict
            ``{chunk_id: (X, Y, sample_weight, alpha)}`` as :meth:`remove_chunk`
            returns them.
        """
        chunk_ids = self._removable(chunk_ids)
        out = {cid: self.get_chunk(cid) for cid in chunk_ids}
        self._drop(chunk_ids)
        return out

    def take_rows(self, chunk_ids):
        """Release chunks and return their rows as one :class:`RowBlock`, to move them.

        The block holds the rows in their packed order, gathered in one
        sequential pass; a worker giving all its rows away (a scale-in) hands
        over its packed arrays without a copy.  (Taking the chunks one by one,
        each chunk's rows in their own order, would gather the rows at random,
        far slower; see the docs' *Benchmarks*, *Elastic scale-in*.)  Chunks added with
        :meth:`add_chunk` since the last round go as they were added, stacked;
        a chunk that came in a block not packed yet is gathered from it (and
        the worker's other rows are repacked, as when a packed chunk leaves).

        Parameters
        ----------
        chunk_ids : list of int
            Ids of chunks held.

        Returns
        -------
        RowBlock
            The chunks' rows, targets, weights and committed ``α``.

        Raises
        ------
        KeyError
            When a chunk is not held.
        ValueError
            When ``chunk_ids`` is empty.
        RuntimeError
            When a round's work is pending.
        """
        chunk_ids = self._removable(chunk_ids)
        if not chunk_ids:
            raise ValueError("no chunks to take")
        in_blocks = self._block_chunk_ids()
        if any(c in self._unpacked or c in in_blocks for c in chunk_ids):
            # some chunks were added since the last round: stacked as they are
            # (nothing is packed for them)
            parts = [self.get_chunk(c) for c in chunk_ids]
            sizes = np.cumsum([0] + [p[0].shape[0] for p in parts])
            block = RowBlock(_stack_rows([p[0] for p in parts]),
                             *(np.concatenate([p[k] for p in parts]) for k in (1, 2, 3)),
                             rows={c: np.arange(sizes[i], sizes[i + 1])
                                   for i, c in enumerate(chunk_ids)})
            self._drop(chunk_ids)
            return block
        positions = np.sort(np.concatenate([self._rows[c] for c in chunk_ids]))
        n = self._packed[0].shape[0]
        if positions.shape[0] == n:
            # every packed row goes: the packed arrays themselves, no copy
            block = RowBlock(*self._packed, rows={c: self._rows[c] for c in chunk_ids})
        else:
            X, Y, sw, alpha = self._packed
            block = RowBlock(_gather_rows(X, positions), Y[positions], sw[positions],
                             alpha[positions],
                             rows={c: np.searchsorted(positions, self._rows[c])
                                   for c in chunk_ids})
        self._drop(chunk_ids)
        return block

    def add_rows(self, block):
        """Hold the chunks of a :class:`RowBlock` (from :meth:`take_rows`), with their ``α``.

        The rows are packed with the others, shuffled afresh, when the next
        round starts, exactly as if the chunks had been added one by one with
        :meth:`add_chunk`.  (Merging the block into the packed rows, each
        keeping its order, is cheaper, but the rounds after the move converge
        slower; see the docs' *Benchmarks*, *Elastic scale-in*.)

        Parameters
        ----------
        block : RowBlock
            Rows of chunks not held here.

        Raises
        ------
        ValueError
            When a chunk is already held, or the block's arrays or row
            positions do not match.
        RuntimeError
            When a round's work is pending.
        """
        self._check_no_pending("add chunks")
        held = self._held()
        again = sorted(c for c in block.rows if c in held)
        if again:
            raise ValueError(f"chunks {again} are already held")
        n = block.X.shape[0]
        shape = (n, self.n_targets)
        Y, alpha = (np.asarray(a, dtype=np.float64) for a in (block.Y, block.alpha))
        sw = np.asarray(block.sample_weight, dtype=np.float64)
        if Y.size != n * self.n_targets or alpha.size != n * self.n_targets or sw.size != n \
                or Y.shape[0] != n or alpha.shape[0] != n:
            raise ValueError(f"the block's targets, dual state and weights must have "
                             f"{n} rows and {self.n_targets} columns")
        rows = {c: np.asarray(r, dtype=np.int64).reshape(-1) for c, r in block.rows.items()}
        covered = np.zeros(n, dtype=np.int64)
        for r in rows.values():
            if r.size and (r.min() < 0 or r.max() >= n):
                raise ValueError(f"the block's row positions must be in [0, {n})")
            np.add.at(covered, r, 1)
        if not np.all(covered == 1):
            raise ValueError("the block's row positions must cover each of its rows once")
        self._blocks.append(RowBlock(block.X, Y.reshape(shape), sw.reshape(n),
                                     alpha.reshape(shape), rows))

    def get_chunk(self, chunk_id):
        """The data and committed dual state of a chunk held.

        Parameters
        ----------
        chunk_id : int
            Id of a chunk held.

        Returns
        -------
        tuple
            ``(X, Y, sample_weight, alpha)`` of the chunk's rows in their
            original order, with the committed ``α``.  The arrays
            :meth:`add_chunk` stored for a chunk it added since the last
            round; copies otherwise.
        """
        if chunk_id in self._unpacked:
            return self._unpacked[chunk_id]
        for block in self._blocks:
            if chunk_id in block.rows:
                rows = block.rows[chunk_id]
                return block.X[rows], block.Y[rows], block.sample_weight[rows], block.alpha[rows]
        X, Y, sw, alpha = self._packed
        rows = self._rows[chunk_id]
        return X[rows], Y[rows], sw[rows], alpha[rows]

    @property
    def chunk_ids(self):
        """Ids of the chunks held, sorted."""
        return sorted(self._held())

    @property
    def n_rows(self):
        """Rows held over all chunks."""
        return (sum(r.shape[0] for r in self._rows.values())
                + sum(c[0].shape[0] for c in self._unpacked.values())
                + sum(b.X.shape[0] for b in self._blocks))

    @property
    def nbytes(self):
        """Bytes of the arrays held: rows, targets, weights, ``α`` and the narrow indices.

        What a worker holds for the fit between rounds, packed or not (the
        per-round workspace aside).  Read without a lock (the dashboard asks
        while rounds run), so a repacking at the same moment may count one
        side of it.
        """
        sources = [*self._unpacked.values(), *self._blocks]
        if self._packed is not None:
            sources.append(self._packed)
        total = sum(_source_bytes(src) for src in sources)
        return total + (0 if self._indices is None else self._indices.nbytes)

    def alpha_by_chunk(self):
        """The committed dual state of every chunk held.

        Returns
        -------
        dict
            ``{chunk_id: α}``, copies of shape ``(rows of the chunk, m)``.
        """
        return {cid: self.get_chunk(cid)[3].copy() for cid in self.chunk_ids}

    @property
    def _unit_weights(self):
        """Whether the packed weights are all 1: then unread (:meth:`Workspace.unit_weights`)."""
        sw = self._packed[2] if self._packed is not None else None
        return sw is not None and sw.size > 0 and self._work.unit_weights(sw)

    def _held(self):
        return {*self._rows, *self._unpacked, *self._block_chunk_ids()}

    def _block_chunk_ids(self):
        """Ids of the chunks in blocks :meth:`add_rows` stored, not packed yet."""
        return {c for b in self._blocks for c in b.rows}

    def _removable(self, chunk_ids):
        """``chunk_ids`` as a list, once no round is pending and each is held."""
        self._check_no_pending("remove chunks")
        chunk_ids = list(dict.fromkeys(chunk_ids))    # each once, in order
        missing = sorted(set(chunk_ids) - self._held())
        if missing:
            raise KeyError(f"chunks {missing} are not held")
        return chunk_ids

    def _check_no_pending(self, what):
        if self.pending is not None:
            raise RuntimeError(f"cannot {what} while round {self.pending[0]} is pending")

    def _pack(self):
        if self._unpacked or self._blocks or self._packed is None:
            self._repack()
        return self._packed

    def _drop(self, chunk_ids):
        """Forget chunks; the rows left are packed afresh when any were packed."""
        chunk_ids = set(chunk_ids)
        for c in chunk_ids:
            self._unpacked.pop(c, None)
        in_blocks = self._block_chunk_ids()
        if any(c in self._rows or c in in_blocks for c in chunk_ids):
            self._repack(drop=chunk_ids)

    def _repack(self, drop=()):
        """Pack every chunk held (but those in ``drop``) into one shuffled matrix.

        The rows are gathered once from where they are: the packed matrix for
        the chunks packed before, the blocks and the arrays :meth:`add_rows`
        and :meth:`add_chunk` stored for the others.  (Taking the packed
        chunks out first, then stacking and then shuffling, copied the rows
        three times.)
        """
        self._work.clear()
        ids = [c for c in self.chunk_ids if c not in drop]
        if not ids:
            self._packed, self._rows, self._unpacked, self._blocks = \
                _empty_packing(self.n_targets), {}, {}, []
            self._indices, self._unit = None, False
            return
        # the sources, stacked: the packed matrix, the blocks, then the chunks
        # added one by one; ``index`` lists, chunk by chunk in id order, the
        # rows of that stack that hold the chunk's rows
        sources, starts = [], {}
        offset = 0
        if any(c in self._rows for c in ids):
            sources.append(self._packed)
            offset = self._packed[0].shape[0]
        for block in self._blocks:
            if all(c in drop for c in block.rows):
                continue    # given away before it was packed: not a source
            for c, r in block.rows.items():
                starts[c] = r + offset
            sources.append(block)
            offset += block.X.shape[0]
        for c in ids:
            if c in self._unpacked:
                size = self._unpacked[c][0].shape[0]
                starts[c] = np.arange(offset, offset + size)
                sources.append(self._unpacked[c])
                offset += size
        index = [starts[c] if c in starts else self._rows[c] for c in ids]
        sizes = [r.shape[0] for r in index]
        n = sum(sizes)
        if all(c in self._unpacked and c in self._shuffled for c in ids):
            # only chunks whose rows came in a random order: packed as they
            # are stacked (in id order), in writable arrays (a message's
            # buffers may be read-only, for which numba would compile its
            # kernels anew), the dual state always the solver's own
            X = _stack_rows([src[0] for src in sources])
            Y, sw, alpha = (_concatenate([src[k] for src in sources]) for k in (1, 2, 3))
            self._packed = (_own_rows(X), _own(Y, len(ids) == 1),
                            _own(sw, len(ids) == 1), _own(alpha, len(ids) == 1))
            where = np.arange(n)
        else:
            rng = np.random.default_rng([self.seed, *ids[:8], n])
            perm = rng.permutation(n)           # packed row p holds original row perm[p]
            where = np.empty(n, dtype=np.int64)  # original row r sits at where[r]
            where[perm] = np.arange(n)
            take = np.concatenate(index)[perm]   # packed row p: row take[p] of the stack
            del perm
            # the store lets go of the sources, so that each is freed once
            # its rows are cut out (``gather_stacked``)
            self._packed, self._blocks, self._unpacked = None, [], {}
            self._packed = gather_stacked(sources, take)
        self._indices = narrow_indices(self._packed[0])
        self._unit = unit_values(self._packed[0])
        self._rows = {}
        start = 0
        for c, size in zip(ids, sizes):
            self._rows[c] = where[start:start + size]
            start += size
        self._unpacked, self._blocks, self._shuffled = {}, [], set()

