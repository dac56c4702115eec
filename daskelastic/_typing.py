"""Type aliases of the public API's signatures, for mypy (``nox -s typecheck``).

The estimators take what scikit-learn's take, and dask collections too; they
return numpy arrays for in-memory input and lazy dask arrays for dask input.
The aliases are read by type checkers only: the modules that use them write
``from __future__ import annotations`` and import them under ``TYPE_CHECKING``,
so nothing here is evaluated at run time (``Self`` exists only for the checker:
``typing_extensions`` need not be installed on Python 3.10).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd
    import scipy.sparse as sp

    if sys.version_info >= (3, 11):
        from typing import Self as Self  # re-exported for the estimators
    else:
        from typing_extensions import Self as Self

__all__ = ["MatrixLike", "VectorLike", "ArrayResult"]

#: ``X``: a 2-d array-like, a scipy.sparse matrix or array, a pandas or dask
#: dataframe, or a dask array.
MatrixLike: TypeAlias = ("npt.ArrayLike | sp.spmatrix | sp.sparray | pd.DataFrame"
                         " | da.Array | dd.DataFrame")

#: ``y`` or ``sample_weight``: a 1-d (or, for ``y`` of several targets, 2-d)
#: array-like, a pandas or dask series, or a dask array.
VectorLike: TypeAlias = "npt.ArrayLike | pd.Series | pd.DataFrame | da.Array | dd.Series"

#: Predictions: a numpy array for in-memory input, a lazy dask array for dask input.
ArrayResult: TypeAlias = "np.ndarray | da.Array"
