"""Software prefetch for the SDCA kernels: rows into the cache before their visit.

The local solver visits its rows in buckets of consecutive rows, the buckets
in random order (:func:`daskelastic.solvers._visit_order`).  Within a bucket
the hardware prefetcher streams the rows; at each jump to a new bucket every
array the kernel reads (CSR data and indices, or the dense rows, targets,
weights, dual values) misses the cache, before the hardware prefetcher
catches on, which makes an epoch much slower than one visiting the rows in
order (the docs' *Benchmarks*, *The local solver*).

The CSR kernels ask the CPU to load the row they will visit :data:`AHEAD`
steps on, one row per step (:func:`prefetch` on its first and last lines);
the dense kernels find, :data:`AHEAD` steps ahead, where the next run of
consecutive rows starts (:func:`run_ahead`) and load its lines at once
(:func:`prefetch_1d`, :func:`prefetch_rows`).  All use LLVM's
``llvm.prefetch``: a hint, which never faults and changes no result.  With
``NUMBA_DISABLE_JIT=1`` :func:`prefetch` does nothing.
"""

from numba import njit, types
from numba.core import cgutils
from numba.core.config import DISABLE_JIT
from numba.extending import intrinsic

#: Visiting steps between a prefetch and the visit of the rows it loads.
AHEAD = 16

#: At most this many consecutive rows are prefetched at once (larger buckets
#: are streamed by the hardware prefetcher after their first rows).
MAX_RUN = 64

#: Elements per row prefetched at most (longer dense rows: their first lines;
#: the hardware prefetcher streams the rest).
MAX_ROW_ELEMENTS = 64

#: Elements of a 1-d range prefetched at most (the non-zeros of a run of wide
#: sparse rows: the first ones, not so many lines that they push the rows in
#: use out of the cache).
MAX_ELEMENTS = 1024

_LINE_BYTES = 64


if DISABLE_JIT:   # pragma: no cover - exercised by the nox "nojit" session
    def prefetch(arr, idx):
        """No-op: without JIT there is no cache hint to give."""
else:
    @intrinsic
    def prefetch(typingctx, arr, idx):
        """Hint the CPU to load the cache line holding ``arr[idx]`` (``idx``: an int or a tuple).

        Nothing for ``arr=None`` (the values a CSR kernel does not read: see
        ``daskelastic.solvers.unit_values``).
        """
        if isinstance(arr, types.NoneType):
            return types.void(arr, idx), lambda context, builder, signature, args: (
                context.get_dummy_value())
        if not isinstance(arr, types.Array):
            return None
        if isinstance(idx, types.Integer):
            n_idx = 1
        elif isinstance(idx, types.UniTuple) and isinstance(idx.dtype, types.Integer):
            n_idx = idx.count
        else:
            return None
        if n_idx != arr.ndim:
            return None

        def codegen(context, builder, signature, args):
            from llvmlite import ir

            aryty, idxty = signature.args
            ary = context.make_array(aryty)(context, builder, args[0])
            if n_idx == 1:
                raw, tys = [args[1]], [idxty]
            else:
                raw, tys = cgutils.unpack_tuple(builder, args[1], n_idx), [idxty.dtype] * n_idx
            idxs = [context.cast(builder, v, t, types.intp) for v, t in zip(raw, tys)]
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idxs,
                                           wraparound=False)
            i8p = builder.bitcast(ptr, ir.IntType(8).as_pointer())
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [i8p.type, i32, i32, i32])
            fn = builder.module.declare_intrinsic("llvm.prefetch", [i8p.type], fnty)
            # read (0), high temporal locality (3), data cache (1)
            builder.call(fn, [i8p, ir.Constant(i32, 0), ir.Constant(i32, 3),
                              ir.Constant(i32, 1)])
            return context.get_dummy_value()

        return types.void(arr, idx), codegen


@njit(cache=True, nogil=True)
def run_ahead(order, s, n_steps):
    """Rows ``[first, end)`` of the run of consecutive rows that step ``s + AHEAD`` starts.

    At most ``MAX_RUN`` rows.  ``(0, 0)`` when that step continues a run (the
    hardware prefetcher streams a run once it has begun) or lies beyond
    ``n_steps``.
    """
    t = s + AHEAD
    if t >= n_steps:
        return 0, 0
    first = order[t]
    if t > 0 and first == order[t - 1] + 1:
        return 0, 0
    end = first + 1
    t += 1
    while t < n_steps and end - first < MAX_RUN and order[t] == end:
        end += 1
        t += 1
    return first, end


@njit(cache=True, nogil=True)
def prefetch_1d(arr, start, stop):
    """Prefetch the lines of ``arr[start:stop]`` (a 1-d array, possibly strided).

    At most ``MAX_ELEMENTS`` elements from ``start``; nothing for ``arr=None``.
    """
    if arr is None:
        return
    stop = min(stop, start + MAX_ELEMENTS)
    if stop <= start:
        return
    step = max(1, _LINE_BYTES // max(1, abs(arr.strides[0])))
    for p in range(start, stop, step):
        prefetch(arr, p)
    prefetch(arr, stop - 1)


@njit(cache=True, nogil=True)
def prefetch_rows(arr, first, end):
    """Prefetch rows ``first:end`` of a 2-d array (the first ``MAX_ROW_ELEMENTS`` of each)."""
    ncols = arr.shape[1]
    if ncols == 0 or end <= first:
        return
    size = arr.itemsize
    if arr.strides[1] == size and arr.strides[0] == ncols * size and ncols <= MAX_ROW_ELEMENTS:
        # C-contiguous short rows: one block of memory, line by line
        step = max(1, _LINE_BYTES // size)
        for k in range(first * ncols, end * ncols, step):
            prefetch(arr, (k // ncols, k % ncols))
        prefetch(arr, (end - 1, ncols - 1))
        return
    cols = min(ncols, MAX_ROW_ELEMENTS)
    step = max(1, _LINE_BYTES // max(1, abs(arr.strides[1])))
    for r in range(first, end):
        for j in range(0, cols, step):
            prefetch(arr, (r, j))
        prefetch(arr, (r, cols - 1))
