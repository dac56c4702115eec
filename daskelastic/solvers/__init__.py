"""The local solver of a worker's chunks: SDCA kernels, the rows' storage and the round.

The parts, each owning one thing:

- :mod:`~daskelastic.solvers._kernels`: the numba kernels of a round (SDCA
  steps over one chunk, compiled per loss, and its gap sums);
- :mod:`~daskelastic.solvers.logistic`: the logistic loss's logs, taken over
  whole arrays outside the kernels;
- :mod:`~daskelastic.solvers.store`: how a worker's rows sit in memory
  (:class:`~daskelastic.solvers.store.ChunkStore`, the chunks held and their
  packing; row blocks; facts read off the rows; the arrays reused from round
  to round);
- :mod:`~daskelastic.solvers.local`: :class:`ChunkSolver`, a store's
  visiting order, the round and its commit protocol.

The names the rest of the library takes from ``daskelastic.solvers`` are here.
To replace a step (a benchmark timing ``sdca_chunk``, a test turning
``unit_values`` off), set it in the part that reads it
(``daskelastic.solvers.local.sdca_chunk``,
``daskelastic.solvers.store.unit_values``).
"""

# (re-exported: the names importers and benchmarks take from here)
from ._kernels import (  # noqa: F401
    _KERNELS,
    STOP_CHECK_EVERY,
    _scaled_dual_sums,
    gap_sums_chunk,
    sdca_chunk,
    value_at,
)
from .local import BUCKET_ROWS, ChunkSolver, LocalResult, _visit_order  # noqa: F401
from .logistic import _logistic_dual_change, logistic_gap_sums, logistic_start  # noqa: F401
from .store import (  # noqa: F401
    ChunkStore,
    RowBlock,
    Workspace,
    _all_ones,
    _array,
    _stack_rows,
    narrow_indices,
    sq_norm_sum,
    unit_values,
)

__all__ = ["LocalResult", "ChunkSolver", "RowBlock", "STOP_CHECK_EVERY"]
