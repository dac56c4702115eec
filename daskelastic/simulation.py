"""Fit an estimator on a simulated cluster (see :mod:`daskelastic.backends.simulated`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from sklearn.base import BaseEstimator, clone

from .backends.simulated import ClusterEvent, ClusterModel

if TYPE_CHECKING:
    from ._typing import MatrixLike, VectorLike

__all__ = ["simulate", "ClusterModel", "ClusterEvent"]


_Estimator = TypeVar("_Estimator", bound=BaseEstimator)


def simulate(estimator: _Estimator, X: MatrixLike, y: VectorLike, model: ClusterModel, *,
             sample_weight: VectorLike | None = None, **params: Any) -> _Estimator:
    """Fit a copy of ``estimator`` on the virtual cluster ``model``.

    The fit runs the real local solvers in this process, with the estimator's
    driver and straggler policy, and times it on ``model``'s virtual clock:
    ``history_[i]["time"]`` and ``["round_seconds"]`` are virtual seconds and
    ``history_[i]["cost"]`` the money spent on workers so far.  With no
    stragglers and a free network, the iterates are those of a fit on a real
    cluster of ``model.n_workers`` workers.

    Parameters
    ----------
    estimator : LogisticRegression, LinearSVC, Ridge, Lasso, ElasticNet or PoissonRegressor
        A daskelastic estimator; it is cloned, not changed.
    X : {array-like, sparse matrix} of shape (n, d)
        Training data (in memory).
    y : array-like of shape (n,) or (n, n_targets)
        Targets.
    model : ClusterModel
        The virtual cluster.
    sample_weight : array-like of shape (n,), optional
        Non-negative weights of the samples.
    **params
        Estimator parameters to set on the copy (``straggler_policy``, ``tol``, ...).

    Returns
    -------
    estimator
        The fitted copy (``backend=model``: the same as fitting
        ``estimator.set_params(backend=model)``).

    See Also
    --------
    ClusterModel : How the virtual workers compute, straggle, fail and cost.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic import ClusterModel, LogisticRegression, simulate
    >>> from daskelastic.testing import RandomSlowdown
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(4000, 5))
    >>> y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    >>> model = ClusterModel(n_workers=100, seconds_per_nnz=1e-8,
    ...                      stragglers=RandomSlowdown(factor=4.0))
    >>> clf = simulate(LogisticRegression(tol=1e-3), X, y, model,
    ...                straggler_policy="backup")      # one backup worker
    >>> clf.history_[-1]["time"] < 1.0          # virtual seconds
    True
    >>> clf.history_[-1]["cost"] > 0
    True
    """
    fitted = clone(estimator).set_params(backend=model, client=None, n_workers=None,
                                         **params)
    return fitted.fit(X, y, sample_weight=sample_weight)
