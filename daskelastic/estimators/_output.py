"""Predictions and scores of dask input: lazy, on the input's own rows, scored on the workers.

A dask DataFrame's predictions are a dask Series (one column) or DataFrame
on its index, as xgboost.dask gives them
(https://xgboost.readthedocs.io/en/stable/tutorials/dask.html); a dask
array's are a dask array of its row blocks.  Scores are sums over row blocks,
made where the blocks are: a few numbers per block reach the client.
"""

from __future__ import annotations

import numpy as np

from ..encoding import encode_frame


def _block_decision(X, coef, intercept):
    """``X @ coef.T + intercept`` of one block: shape (n,) for one row of ``coef``."""
    coef = np.atleast_2d(coef)
    Z = X @ coef.T
    Z = np.asarray(Z) + intercept
    if Z.shape[1] == 1:
        return Z.ravel()
    return Z


def _frame_values(frame):
    """A numeric partition's values as scikit-learn's ``validate_data`` makes them.

    float32 stays float32; other numbers (and pandas' nullable dtypes, NA
    becoming NaN) become float64.
    """
    from ._input import _with_numpy_dtypes

    values = _with_numpy_dtypes(frame).to_numpy()
    return values if values.dtype in (np.float32, np.float64) else values.astype(np.float64)


def _wrap(values, index, columns=None):
    """``values`` as a pandas Series (1-d) or DataFrame on ``index``."""
    import pandas as pd

    if values.ndim == 1:
        return pd.Series(values, index=index)
    return pd.DataFrame(values, index=index,
                        columns=range(values.shape[1]) if columns is None else columns)


def _frame_scores(frame, frame_encoder, coef, intercept, columns=None):
    """One partition's decision values, on its index."""
    X = _frame_values(frame) if frame_encoder is None else encode_frame(frame_encoder, frame)
    return _wrap(_block_decision(X, coef, intercept), frame.index, columns)


def dask_decision(X, frame_encoder, coef, intercept, columns=None):
    """Lazy decision values of dask ``X``.

    A dask DataFrame gives a dask Series (one column of ``coef``) or
    DataFrame (``columns`` naming its columns) on ``X``'s index; a dask array
    a dask array of its row blocks.  Nothing is computed.
    """
    import dask.dataframe as dd

    from ._input import _dask_to_array

    if isinstance(X, dd.DataFrame):
        meta = _frame_scores(X._meta, frame_encoder, coef, intercept, columns)
        return X.map_partitions(_frame_scores, frame_encoder, coef, intercept, columns,
                                meta=meta)
    Xa = _dask_to_array(X, "X", lengths=False).rechunk({1: -1})
    if Xa.dtype not in (np.float32, np.float64):   # as validate_data does
        Xa = Xa.astype(np.float64)
    m = np.atleast_2d(coef).shape[0]
    kwargs = {"drop_axis": 1} if m == 1 else {"chunks": (Xa.chunks[0], (m,))}
    return Xa.map_blocks(_block_decision, coef, intercept,
                         dtype=np.result_type(Xa.dtype, coef.dtype), **kwargs)


def _apply(part, fn, args, columns):
    return _wrap(np.asarray(fn(part.to_numpy(), *args)), part.index, columns)


def map_predictions(scores, fn, *args, columns=None, **array_kwargs):
    """``fn(block, *args)`` over lazy ``scores``, keeping their kind.

    A dask Series or DataFrame gives one on the same index (``columns``
    naming a 2-d result's columns); a dask array gives
    ``scores.map_blocks(fn, *args, **array_kwargs)``; an array in memory
    ``fn(scores, *args)``.
    """
    import dask.dataframe as dd

    from ._input import _is_dask_collection

    if isinstance(scores, (dd.Series, dd.DataFrame)):
        meta = _apply(scores._meta, fn, args, columns)
        return scores.map_partitions(_apply, fn, args, columns, meta=meta)
    if _is_dask_collection(scores):
        return scores.map_blocks(fn, *args, **array_kwargs)
    return fn(scores, *args)


# -- scores -------------------------------------------------------------------


def in_memory(values):
    """Dask ``y`` or weights computed, for a score of ``X`` in memory (else ``values``)."""
    from ._input import _is_dask_collection

    return values.compute() if _is_dask_collection(values) else values


def _accuracy_sums(pred, y, w):
    """(Σ w·[pred = y], Σ w) of one block."""
    y = np.asarray(y).reshape(pred.shape)
    w = np.ones(pred.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
    return np.array([np.sum(w * (pred == y)), np.sum(w)])


def _r2_sums(pred, y, w):
    """Per target: the block's total weight, weighted mean, spread about that mean
    (Σ w (y − ȳ)²) and residual sum of squares Σ w (y − pred)²: rows of a (4, m) array."""
    pred = pred.reshape(pred.shape[0], -1)
    y = np.asarray(y, dtype=np.float64).reshape(pred.shape)
    w = np.ones(pred.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
    total = w.sum()
    mean = (w @ y) / total if total > 0 else np.zeros(y.shape[1])
    return np.vstack([np.full(y.shape[1], total), mean, w @ (y - mean) ** 2,
                      w @ (y - pred) ** 2])


def _r2_from_sums(parts, n_targets):
    """scikit-learn's ``r2_score`` (uniform average over targets) from per-block sums.

    The spreads of the blocks combine as in Chan, Golub and LeVeque, "Algorithms
    for computing the sample variance" (1983): no cancellation of large sums.
    """
    parts = np.stack(parts)                    # (blocks, 4, m)
    W, means, spreads, residual = parts[:, 0], parts[:, 1], parts[:, 2], parts[:, 3]
    total = W.sum(axis=0)
    mean = np.where(total > 0, (W * means).sum(axis=0) / np.where(total > 0, total, 1), 0)
    ss_tot = spreads.sum(axis=0) + (W * (means - mean) ** 2).sum(axis=0)
    ss_res = residual.sum(axis=0)
    # scikit-learn's force_finite: a constant target scores 1 if fitted exactly, else 0
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(ss_tot > 0, 1 - ss_res / ss_tot, np.where(ss_res > 0, 0.0, 1.0))
    return float(np.mean(r2[:n_targets]))


def _poisson_sums(pred, y, w):
    """(Σ w, Σ w y, Σ w y log y, Σ w · unit Poisson deviance(y, pred)) of one block."""
    from scipy.special import xlogy

    y = np.asarray(y, dtype=np.float64).reshape(pred.shape)
    w = np.ones(pred.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
    deviance = 2 * (xlogy(y, y / pred) - y + pred)
    return np.array([w.sum(), w @ y, w @ xlogy(y, y), w @ deviance])


def _d2_poisson_from_sums(parts):
    """scikit-learn's ``d2_tweedie_score(power=1)`` from per-block sums.

    The null model predicts the weighted mean ȳ everywhere; its deviance
    2 Σ w (y log(y/ȳ) − y + ȳ) is 2 (Σ w y log y − log ȳ Σ w y), as ȳ Σ w = Σ w y.
    """
    W, wy, wylogy, deviance = np.sum(parts, axis=0)
    mean = wy / W
    null = 2 * (wylogy - (np.log(mean) * wy if wy > 0 else 0.0))
    return float(1 - deviance / null)


def _accuracy_from_sums(parts, n_targets):
    """scikit-learn's (weighted) ``accuracy_score`` from per-block sums."""
    correct, total = np.sum(parts, axis=0)
    return float(correct / total)


#: score name → (the sums of one block, the score from all blocks' sums)
_SCORES = {
    "accuracy": (_accuracy_sums, _accuracy_from_sums),
    "r2": (_r2_sums, _r2_from_sums),
    "d2_poisson": (_poisson_sums, lambda parts, n_targets: _d2_poisson_from_sums(parts)),
}


def _aligned(values, rows, name):
    """``values`` (in memory or dask) as a dask array cut into ``rows``.

    Rows are matched by position, as scikit-learn matches them for arrays
    and pandas objects; their numbers must agree.
    """
    import dask.array as da

    from ._input import _dask_to_array, _is_dask_collection

    n = sum(rows)
    if _is_dask_collection(values):
        values = _dask_to_array(values, name)
    else:
        values = np.asarray(values)
    if values.shape[0] != n:
        raise ValueError(f"X has {n} rows but {name} has {values.shape[0]}")
    if not _is_dask_collection(values):
        return da.from_array(values, chunks=(rows,) + values.shape[1:])
    return values.rechunk({0: rows})


def dask_score(kind, predictions, y, sample_weight=None, n_targets=1, client=None):
    """A score of lazy ``predictions`` against ``y``, summed where the row blocks are.

    Parameters
    ----------
    kind : {"accuracy", "r2", "d2_poisson"}
        scikit-learn's ``accuracy_score``, ``r2_score`` (uniform average) or
        ``d2_tweedie_score(power=1)``.
    predictions : dask array, Series or DataFrame
        What ``predict`` returned for dask ``X``.
    y, sample_weight : array-like or dask collection
        Matched to the predictions' rows by position.
    n_targets : int
        The number of targets (columns) of ``r2``.
    client : distributed.Client, optional
        Where to compute; the predictions are held on its workers while the
        lengths of their blocks are counted, so that ``X`` is read once.
    """
    import dask

    from ._input import _dask_to_array

    pred = _dask_to_array(predictions, "the predictions", lengths=False)
    if client is not None:
        pred = client.persist(pred)
    if any(np.isnan(c) for c in pred.chunks[0]):
        pred = pred.compute_chunk_sizes()
    rows = pred.chunks[0]
    y = _aligned(y, rows, "y")
    w = None if sample_weight is None else _aligned(sample_weight, rows, "sample_weight")
    block_sums, combine = _SCORES[kind]
    p_blocks = pred.to_delayed().ravel()
    y_blocks = y.to_delayed().ravel()
    w_blocks = [None] * len(p_blocks) if w is None else w.to_delayed().ravel()
    parts = dask.compute(*[dask.delayed(block_sums)(p, yb, wb)
                           for p, yb, wb in zip(p_blocks, y_blocks, w_blocks)],
                         scheduler=client)
    return combine(parts, n_targets)
