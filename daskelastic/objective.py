"""Primal, dual and duality gap of L2-regularised linear models.

The problem solved is

.. math::

    P(w) = \\frac{1}{n}\\sum_i c_i\\,\\ell_i(x_i^\\top w) + \\frac{\\lambda}{2}\\lVert w\\rVert^2,
    \\qquad \\lambda = \\frac{1}{C\\,n},

which is scikit-learn's ``C Σ c_i ℓ_i + ½‖w‖²`` divided by ``C n`` (for Ridge,
``C = 1 / alpha`` and ``ℓ = ½(y − z)²``).  Its dual is

.. math::

    D(\\alpha) = \\frac{1}{n}\\sum_i -(c_i\\ell_i)^*(-\\alpha_i)
                - \\frac{\\lambda}{2}\\lVert w(\\alpha)\\rVert^2,
    \\qquad w(\\alpha) = \\frac{1}{\\lambda n}\\sum_i \\alpha_i x_i .

At ``w = w(α)`` the gap ``P(w) − D(α)`` is a sum of per-sample Fenchel–Young
terms, each ≥ 0, and bounds ``P(w) − P(w*)`` from above: it certifies how far
a fit is from the optimum.

The intercept is the coefficient of a constant feature of value
``intercept_scaling`` and is regularised, as in liblinear and Snap ML (and
unlike scikit-learn's lbfgs, which leaves it free).  A large
``intercept_scaling`` makes the penalty on the intercept negligible.
"""

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["lambda_from_C", "Objective", "objective_from_gap", "primal_objective",
           "relative_gap"]


def lambda_from_C(C, n_samples):
    """Return ``λ = 1 / (C n)``, the regularisation of the normalised primal.

    Parameters
    ----------
    C : float
        Inverse regularisation strength, as in scikit-learn.
    n_samples : int
        Number of training rows ``n``.

    Returns
    -------
    float
        ``λ``, the weight of ``½‖w‖²`` in the primal divided by ``C n``.

    Raises
    ------
    ValueError
        When ``C`` or ``n_samples`` is not positive, or ``C n`` is not finite.

    Examples
    --------
    >>> from daskelastic.objective import lambda_from_C
    >>> lambda_from_C(C=0.5, n_samples=1000)
    0.002
    """
    if C <= 0 or n_samples <= 0:
        raise ValueError("C and n_samples must be positive")
    if not math.isfinite(C * n_samples):
        # λ would be 0: an unregularised problem, whose dual has no solution
        raise ValueError(
            f"C={C:g} is too large for {n_samples} samples: C·n_samples overflows "
            "float64 (for Ridge: alpha too small); use a finite C·n_samples, "
            "e.g. C ≤ 1e300 / n_samples")
    return 1.0 / (C * n_samples)


@dataclass(frozen=True)
class Objective:
    """Primal and dual values of an iterate and its duality gap.

    Parameters
    ----------
    primal, dual : float
        ``P(w)`` and ``D(α)`` of the normalised problem (see module docs).
    gap : float
        ``P(w) − D(α)``, an upper bound on ``P(w) − P(w*)``.
    relative_gap : float
        ``gap / |P(w)|``: the quantity compared with ``tol``.

    Examples
    --------
    >>> from daskelastic.objective import Objective
    >>> obj = Objective(primal=0.5, dual=0.49, gap=0.01, relative_gap=0.02)
    >>> obj.relative_gap <= 1e-1
    True
    """

    primal: float
    dual: float
    gap: float
    relative_gap: float


def relative_gap(primal, dual):
    """``(P − D) / |P|``, guarded against a zero primal."""
    gap = primal - dual
    return gap / max(abs(primal), np.finfo(float).tiny)


def objective_from_gap(loss_sum, gap, w, lam, n_samples):
    """Assemble :class:`Objective` from the loss sum at ``w`` and the gap.

    The gap is computed by the caller as a sum of non-negative terms — the
    per-sample Fenchel–Young terms ``c_i ℓ_i + (c_i ℓ_i)*(−α_i) + α_i z_i``
    over ``n`` (and, for the accelerated driver, ``λ/2 ‖w − w(α)‖²``) — so it
    suffers no cancellation between a large primal and dual.

    Parameters
    ----------
    loss_sum : float
        ``Σ c_i ℓ_i(x_i·w)`` over all samples.
    gap : float
        ``P(w) − D(α)``, ≥ 0.
    w : ndarray
        The iterate.
    lam : float
        ``λ``.
    n_samples : int
        ``n``.
    """
    primal = loss_sum / n_samples + 0.5 * lam * float(np.sum(np.square(w)))
    dual = primal - gap
    return Objective(primal, dual, gap, relative_gap(primal, dual))


def primal_objective(loss, X, Y, sample_weight, w, lam, intercept_scaling=0.0):
    """Evaluate ``P(w)`` directly (NumPy; for checks and benchmarks).

    Parameters
    ----------
    loss : str
        Loss name.
    X : ndarray or sparse matrix of shape (n, d)
    Y : ndarray of shape (n, m)
        Encoded targets (±1 per class, or real targets).
    sample_weight : ndarray of shape (n,)
    w : ndarray of shape (d + 1, m) or (d, m)
        Weights; a last row, when present, is the intercept coefficient.
    lam : float
    intercept_scaling : float
        Value of the constant feature multiplying ``w[d]``.
    """
    n, d = X.shape
    w = np.asarray(w, dtype=float).reshape(w.shape[0], -1)
    Z = np.asarray(X @ w[:d])
    if w.shape[0] > d:
        Z = Z + intercept_scaling * w[d]
    Y = np.asarray(Y, dtype=float).reshape(n, -1)
    if loss == "logistic":
        L = np.logaddexp(0.0, -Y * Z)
    elif loss == "hinge":
        L = np.maximum(0.0, 1.0 - Y * Z)
    elif loss == "squared_hinge":
        L = np.maximum(0.0, 1.0 - Y * Z) ** 2
    elif loss == "squared":
        L = 0.5 * (Z - Y) ** 2
    else:
        raise ValueError(f"unknown loss {loss!r}")
    return float(np.sum(sample_weight[:, None] * L) / n + 0.5 * lam * np.sum(w * w))
