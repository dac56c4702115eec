"""Pointwise losses, their convex conjugates and the exact SDCA coordinate steps.

Every loss is written for one sample with label (or target) ``y``, sample weight
``c`` and margin ``z = x·w``.  The dual variable of a sample is ``a`` and the
weighted loss ``c·ℓ`` enters the dual through ``-(c·ℓ)*(-a)``, the *dual value*.

The coordinate step maximises, over the new dual value ``a'``,

.. math::

    -(c\\ell)^*(-a') - (a' - a)\\,z - \\tfrac{q}{2}(a' - a)^2,

which is the CoCoA+ local subproblem restricted to one coordinate, with
``q = σ'‖x‖² / (λ n)`` and ``z`` the margin at the solver's local iterate.

The functions here are numba kernels (``@njit(cache=True)``) dispatched on an
integer loss code, so that solver kernels can call them without passing jitted
functions around.  Plain NumPy twins live in the test-suite.
"""

import math

from numba import njit

__all__ = ["LOSSES", "loss_code"]

#: Loss name → integer code used by the numba kernels.
LOSSES = {"logistic": 0, "hinge": 1, "squared_hinge": 2, "squared": 3}

LOGISTIC, HINGE, SQUARED_HINGE, SQUARED = 0, 1, 2, 3

#: Newton iterations allowed for the logistic coordinate step.
_NEWTON_MAX_ITER = 100


def loss_code(name):
    """Return the kernel code of the loss called ``name``.

    Parameters
    ----------
    name : str
        One of ``"logistic"``, ``"hinge"``, ``"squared_hinge"``, ``"squared"``.

    Returns
    -------
    int
        The code the numba kernels dispatch on.

    Examples
    --------
    >>> from daskelastic.losses import loss_code
    >>> loss_code("hinge")
    1
    """
    try:
        return LOSSES[name]
    except KeyError:
        raise ValueError(
            f"unknown loss {name!r}; expected one of {sorted(LOSSES)}"
        ) from None


@njit(cache=True, nogil=True)
def _log1pexp(t):
    """``log(1 + exp(t))`` without overflow."""
    if t > 0.0:
        return t + math.log1p(math.exp(-t))
    return math.log1p(math.exp(t))


@njit(cache=True, nogil=True)
def _xlogx(t):
    if t <= 0.0:
        return 0.0
    return t * math.log(t)


@njit(cache=True, nogil=True)
def primal_loss(loss, y, z):
    """Unweighted loss ``ℓ(y, z)`` of one sample with margin ``z``."""
    if loss == LOGISTIC:
        return _log1pexp(-y * z)
    if loss == HINGE:
        return max(0.0, 1.0 - y * z)
    if loss == SQUARED_HINGE:
        h = max(0.0, 1.0 - y * z)
        return h * h
    r = z - y
    return 0.5 * r * r


@njit(cache=True, nogil=True)
def dual_value(loss, y, a, c):
    """``-(c·ℓ)*(-a)``: the dual objective contribution of dual value ``a``.

    Returns ``-inf`` outside the conjugate's domain (beyond a tolerance of
    rounding), so that an infeasible dual is never mistaken for a good one.
    """
    if c <= 0.0:
        return 0.0 if a == 0.0 else -math.inf
    if loss == SQUARED:
        return a * y - a * a / (2.0 * c)
    beta = a * y / c
    tol = 1e-12
    if loss == LOGISTIC:
        if beta < -tol or beta > 1.0 + tol:
            return -math.inf
        beta = min(max(beta, 0.0), 1.0)
        return -c * (_xlogx(beta) + _xlogx(1.0 - beta))
    if loss == HINGE:
        if beta < -tol or beta > 1.0 + tol:
            return -math.inf
        return a * y
    # squared hinge
    if beta < -tol:
        return -math.inf
    return a * y - a * a / (4.0 * c)


@njit(cache=True, nogil=True)
def gap_term(loss, y, a, c, z):
    """Per-sample duality gap ``c·ℓ(z) + (c·ℓ)*(-a) + a·z`` (≥ 0, Fenchel–Young)."""
    if c <= 0.0:
        return 0.0
    return c * primal_loss(loss, y, z) - dual_value(loss, y, a, c) + a * z


@njit(cache=True, nogil=True)
def _logistic_step(y, a, c, z, q):
    # In u = logit(b), b = a'·y/c ∈ (0, 1), the optimality condition is
    #   g(u) = -u - y·z - q·c·(σ(u) - beta0) = 0,
    # with g strictly decreasing and g' ∈ [-1 - q·c/4, -1].  Its root lies in
    # [-yz - qc(1 - beta0), -yz + qc·beta0]: safeguarded Newton inside that
    # bracket (bisection when Newton would leave it or stops converging fast).
    beta0 = min(max(a * y / c, 0.0), 1.0)
    qc = q * c
    yz = y * z
    lo = -yz - qc * (1.0 - beta0)
    hi = -yz + qc * beta0
    if 1e-12 < beta0 < 1.0 - 1e-12:
        u = math.log(beta0 / (1.0 - beta0))
        u = min(max(u, lo), hi)
    else:
        u = -yz - qc * (0.5 - beta0)  # the root when σ(u) ≈ 1/2, inside the bracket
    step_before = hi - lo
    # After a Newton step s the root is within ½·max|g''|·s² ≤ qc·s²/20 of the
    # new iterate (|g'| ≥ 1): stop there once that bound meets the tolerance,
    # without a further step to confirm it.
    half_curv = 0.05 * qc
    for _ in range(_NEWTON_MAX_ITER):
        sig = 1.0 / (1.0 + math.exp(-u))
        g = -u - yz - qc * (sig - beta0)
        if g == 0.0:
            break
        if g > 0.0:
            lo = u
        else:
            hi = u
        slope = 1.0 + qc * sig * (1.0 - sig)  # = -g'(u) > 0
        newton = u + g / slope
        # Newton inside the bracket while it at least halves the step;
        # otherwise bisect (the sigmoid term can make Newton oscillate)
        if lo <= newton <= hi and abs(2.0 * g) <= abs(step_before * slope):
            step = newton - u
            u = newton
            if min(abs(step), half_curv * step * step) <= 1e-9 * (1.0 + abs(u)):
                break
        else:
            step = 0.5 * (hi - lo)
            u = lo + step
            if abs(step) <= 1e-9 * (1.0 + abs(u)):
                break
        step_before = step
    return y * c / (1.0 + math.exp(-u))


@njit(cache=True, nogil=True)
def coordinate_step(loss, y, a, c, z, q):
    """Exact maximiser ``a'`` of the one-coordinate CoCoA+ subproblem.

    Parameters are the label ``y``, current dual value ``a``, sample weight
    ``c``, margin ``z`` at the local iterate and curvature ``q = σ'‖x‖²/(λn)``.
    A sample of weight 0 keeps its dual value at 0.
    """
    if c <= 0.0:
        return 0.0
    if loss == LOGISTIC:
        return _logistic_step(y, a, c, z, q)
    if loss == HINGE:
        beta = a * y
        if q <= 0.0:
            m = 1.0 - y * z
            if m > 0.0:
                return y * c
            if m < 0.0:
                return 0.0
            return a
        beta_new = min(max(beta + (1.0 - y * z) / q, 0.0), c)
        return y * beta_new
    if loss == SQUARED_HINGE:
        # (1 - yz + q·a·y) / (q + 1/(2c)), with one division
        beta_new = max(0.0, c * (1.0 - y * z + q * a * y) / (q * c + 0.5))
        return y * beta_new
    # squared: unconstrained
    return (y - z + q * a) / (q + 1.0 / c)
