"""Checks and conversions of the estimators' input.

The dtypes, weights and class weights scikit-learn's fits check; dask
collections made row-aligned dask arrays; dataframes one-hot encoded on the
workers; decision values block by block.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import numpy as np
import scipy.sparse as sp

from ..encoding import (
    encode_frame,
    fit_frame_encoder,
    merge_categories,
    partition_categories,
)
from ..targets import not_finite


def _is_dask_collection(X: object) -> TypeGuard[Any]:
    # (a dask array, dataframe or series: typed Any where it holds)
    try:
        from dask import is_dask_collection
    except ImportError:  # pragma: no cover
        return False
    return is_dask_collection(X)


def _numpy_dtype(dtype):
    """The numpy dtype scikit-learn converts a pandas extension dtype to; None for numpy's.

    Strings become ``object``, nullable integers, floats and booleans
    ``float64`` (``pd.NA`` becoming NaN), a categorical its categories' dtype.

    Examples
    --------
    >>> import pandas as pd
    >>> from daskelastic.estimators._input import _numpy_dtype
    >>> [_numpy_dtype(pd.Series([1], dtype=t).dtype) for t in ("Int64", "boolean", "string")]
    [dtype('float64'), dtype('float64'), dtype('O')]
    >>> _numpy_dtype(pd.Series([3, 5], dtype="category").dtype), _numpy_dtype(np.dtype("int8"))
    (dtype('int64'), None)
    """
    import pandas as pd

    if isinstance(dtype, pd.CategoricalDtype):
        inner = dtype.categories.dtype
        return _numpy_dtype(inner) or inner
    if isinstance(dtype, np.dtype):
        return None
    if isinstance(dtype, pd.StringDtype) or getattr(dtype, "kind", "O") not in "iufb":
        return np.dtype(object)
    return np.dtype(np.float64)


def _check_numeric(X, categorical=()):
    """Raise, in this process and from metadata alone, for a dask ``X`` that is not numbers.

    A column of another kind would otherwise fail in the workers' load
    tasks, block by block.  With ``categorical`` (the columns to be one-hot
    encoded) it checks the other columns of a pandas or dask dataframe.
    """
    dtypes = getattr(_columns_of(X), "dtypes", None)
    if hasattr(dtypes, "items") and (categorical or _is_dask_collection(X)):
        bad = [(c, t) for c, t in dtypes.items() if c not in categorical
               and (_numpy_dtype(t) or t).kind not in "biuf"]
        if bad:
            raise ValueError(
                "X has columns that are neither numbers nor categories: "
                + ", ".join(f"{c!r} ({t})" for c, t in bad)
                + ". daskelastic one-hot encodes string, object and category columns "
                "and fits numbers: convert these first (a datetime to a number, say)")
    elif getattr(X, "dtype", None) is not None \
            and (_numpy_dtype(X.dtype) or X.dtype).kind not in "biuf":
        raise ValueError(f"X has dtype {X.dtype}: daskelastic fits numeric features")


def _with_numpy_dtypes(frame):
    """A pandas or dask dataframe with its extension-dtype columns as ``_numpy_dtype`` says."""
    plain = {c: _numpy_dtype(t) for c, t in frame.dtypes.items()}
    plain = {c: t for c, t in plain.items() if t is not None}
    return frame.astype(plain) if plain else frame


def _dask_to_array(X, name, lengths=True):
    """A dask array from a dask array/dataframe/series, with known row chunks if ``lengths``.

    Without ``lengths`` nothing is computed (a dataframe's partition lengths
    may stay unknown): enough for blockwise predictions.
    """
    import dask.array as da
    import dask.dataframe as dd

    if isinstance(X, (dd.DataFrame, dd.Series)):
        # pandas extension dtypes become the numpy arrays scikit-learn makes of
        # them: to_dask_array would give object arrays (with a UserWarning),
        # which type_of_target calls "unknown" when they hold numbers
        if isinstance(X, dd.Series):
            plain = _numpy_dtype(X.dtype)
            if plain is not None:
                X = X.astype(plain)
        else:
            X = _with_numpy_dtypes(X)
        # the lengths are counted on the array's own blocks below: dask's
        # ``to_dask_array(lengths=True)`` counts them on a separately optimised
        # graph, whose partitions can differ (a column read from Parquet fused
        # into fewer partitions: "The number of items in 'lengths' does not
        # match the number of partitions")
        X = X.to_dask_array()
    if not isinstance(X, da.Array):
        raise TypeError(f"{name}: unsupported dask collection {type(X).__name__}")
    if lengths and any(np.isnan(c) for c in X.chunks[0]):
        X = X.compute_chunk_sizes()
    return X


def _columns_of(X):
    """What scikit-learn reads feature names from: a dask dataframe's empty pandas
    frame (its ``_meta``), else ``X`` itself."""
    import dask.dataframe as dd

    return X._meta if isinstance(X, dd.DataFrame) else X


def _check_weights(smallest, total):
    """The ``ValueError`` scikit-learn raises for negative sample weights or all 0."""
    if smallest < 0:
        raise ValueError("Negative values in data passed to `sample_weight`")
    if np.isfinite(total) and not total > 0:   # NaN: the load tasks say so
        raise ValueError("Sample weights must contain at least one non-zero number.")


def _no_weight_left():
    """The ``ValueError`` for class and sample weights that give every sample the weight 0."""
    return ValueError("class_weight and sample_weight together give every sample the "
                      "weight 0")


def _check_class_weights(cw, classes, balanced):
    """A ``ValueError`` for class weights no certificate can stand on: negative,
    infinite or NaN (``"balanced"`` with a class of total weight 0), or all 0."""
    bad = [(c, w) for c, w in zip(classes.tolist(), np.asarray(cw, dtype=float).tolist())
           if not (np.isfinite(w) and w >= 0)]
    if bad and balanced:
        raise ValueError(
            "class_weight='balanced' needs a positive total sample weight in every "
            f"class; these classes have none: {[c for c, _ in bad]}")
    if bad:
        raise ValueError("class_weight must be finite and non-negative; got "
                         + ", ".join(f"{c!r}: {w}" for c, w in bad))
    if not np.any(np.asarray(cw) > 0):
        raise ValueError("class_weight gives every class the weight 0")


#: An encoded dataframe in memory is fitted dense when at least this fraction
#: of its values are non-zero: dense columns are centred for a free intercept,
#: which converges far faster so (the user guide's *The intercept*).
_DENSE_ENCODING = 0.05


def _encode_dask_frame(X, categorical, client=None):
    """A dask dataframe's rows one-hot encoded on the workers, and the encoder.

    One pass over the partitions finds the categories and the rows of each;
    the encoded blocks (CSR) are made where the partitions are.
    """
    import dask
    import dask.array as da

    parts = X.to_delayed()
    found = dask.compute(*[dask.delayed(partition_categories)(p, categorical)
                           for p in parts], scheduler=client)
    frame_encoder = fit_frame_encoder(X.columns, merge_categories(found, categorical))
    k = len(frame_encoder.get_feature_names_out())
    # dense blocks when the pandas rule would likely make the rows dense: at
    # most one non-zero per column of the frame
    dense = len(X.columns) >= _DENSE_ENCODING * k
    meta = np.empty((0, k)) if dense else sp.csr_matrix((0, k))
    blocks = [da.from_delayed(dask.delayed(_encode_block)(frame_encoder, p, dense),
                              shape=(n, k), dtype=np.float64, meta=meta)
              for p, (_, n) in zip(parts, found) if n > 0]
    if not blocks:
        raise ValueError("cannot fit on empty input")
    return da.concatenate(blocks, axis=0), frame_encoder


def _encode_block(frame_encoder, frame, dense):
    """One partition's rows encoded: a dense array or CSR."""
    out = encode_frame(frame_encoder, frame)
    return out.toarray() if dense else out


def _block_labels_and_weights(y, sample_weight=None):
    """A row block's distinct labels (sorted), the rows of each, and its weights.

    Returns ``(labels, counts, weight_sums, smallest_weight, finite)``:
    ``counts[j]`` rows have the label ``labels[j]``, whose sample weights add
    up to ``weight_sums[j]``; ``finite`` says whether every weight is finite;
    the last three are None without ``sample_weight``.
    """
    y = np.asarray(y).reshape(-1)
    if y.dtype.kind in "biuf":
        import pandas as pd

        # by hashing: np.unique sorts, which costs more on long label arrays
        codes, labels = pd.factorize(y, sort=True, use_na_sentinel=False)
        labels = np.asarray(labels)
    else:
        labels, codes = np.unique(y, return_inverse=True)
    codes = codes.reshape(-1)
    counts = np.bincount(codes, minlength=labels.shape[0])
    if sample_weight is None:
        return labels, counts, None, None, None
    sw = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
    sums = np.bincount(codes, weights=sw, minlength=labels.shape[0])
    return (labels, counts, sums, float(sw.min()) if sw.shape[0] else np.inf,
            bool(np.isfinite(sw).all()))


def _distinct_labels(y):
    """``np.unique(y)``: by hashing for 1-d numbers (no sort of the whole array)."""
    if y.ndim == 1 and y.dtype.kind in "biuf":
        import pandas as pd

        return np.sort(pd.unique(y))
    return np.unique(y)


def _check_counts(smallest, weighted_sum, weight_sum):
    """Poisson targets: non-negative, and not all 0 where the weights count."""
    if not np.isfinite(smallest) or not np.isfinite(weighted_sum):
        raise not_finite("y")
    if smallest < 0:
        raise ValueError("Some value(s) of y are out of the valid range of the loss "
                         "'HalfPoissonLoss': PoissonRegressor needs y >= 0")
    if not weighted_sum > 0 and weight_sum > 0:
        raise ValueError("y is 0 wherever the sample weights are positive: a Poisson "
                         "model's mean would be 0 (its intercept -inf)")
