"""The local solver of a worker's chunks: SDCA kernels, the rows' storage and the round.

The parts, each owning one thing:

- :mod:`~daskelastic.solvers._kernels`: the numba kernels of a round (SDCA
  steps over one chunk, compiled per loss, and its gap sums);
- :mod:`~daskelastic.solvers.logistic`: the logistic loss's logs, taken over
  whole arrays outside the kernels;
- :mod:`~daskelastic.solvers.store`: how a worker's rows sit in memory (row
  blocks, packing helpers, facts read off the rows, the arrays reused from
  round to round);
- :mod:`~daskelastic.solvers.local`: :class:`ChunkSolver`, the chunks one
  worker holds, their visiting order, the round and its commit protocol.

Every name the rest of the library, the tests and the benchmarks take from
``daskelastic.solvers`` is here.  Setting one of them here (a benchmark timing
``sdca_chunk``, or a test turning ``unit_values`` off) sets it in the part
that reads it too, as when this was one module.
"""

import sys
import types

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

_PARTS = ("_kernels", "logistic", "store", "local")


class _Package(types.ModuleType):
    """This package's module: a name set on it is set in every part bound to the same object.

    The benchmarks time or switch off a step by setting a name of
    ``daskelastic.solvers`` (``S.sdca_chunk = timed(...)``,
    ``solvers.BUCKET_ROWS = b``) and the tests with ``monkeypatch``; the code
    that reads the name now lives in a part, which sees the change through
    this.
    """

    def __setattr__(self, name, value):
        missing = object()
        old = self.__dict__.get(name, missing)
        if old is not missing and not isinstance(old, types.ModuleType):
            for part in _PARTS:
                module = self.__dict__.get(part)
                if module is not None and module.__dict__.get(name, missing) is old:
                    setattr(module, name, value)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
