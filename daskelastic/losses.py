"""Pointwise losses, their convex conjugates and the SDCA coordinate steps.

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

import numpy as np
from numba import njit

__all__ = ["LOSSES", "INTERCEPT_SUMS", "dual_from_margins", "intercept_sums", "loss_code",
           "softmax_loss", "softmax_dual_value", "softmax_step", "softmax_intercept_sums"]

#: Loss name → integer code used by the numba kernels.
LOSSES = {"logistic": 0, "hinge": 1, "squared_hinge": 2, "squared": 3, "poisson": 4,
          "softmax": 5}

LOGISTIC, HINGE, SQUARED_HINGE, SQUARED, POISSON, SOFTMAX = 0, 1, 2, 3, 4, 5

#: The rows of :func:`intercept_sums`' output, in order.
INTERCEPT_SUMS = ("pos", "neg", "dual_pos", "dual_neg", "curvature", "weight")

#: Newton iterations allowed for the logistic coordinate step.
_NEWTON_MAX_ITER = 100

#: How far from 0 the exp-free Newton step from ``u = 0`` may land for a
#: logistic step from a dual value at 0 or 1 to start there, where the sigmoid
#: and its slope need no ``exp`` (the docs' *Algorithms*, *The local solver*).
_START_NEAR_ZERO = 3.0

#: Relative accuracy of the solver's logistic coordinate steps: Newton stops
#: once its error bound is at most this fraction of the step's move in the
#: logit of the dual value (a move counted as at most 1), much as liblinear's
#: dual solver ends its inner Newton at a tolerance that shrinks during the
#: fit.  Such a step keeps nearly all of the exact one's dual ascent (at
#: least ``1 − rtol²`` of it, a property the tests check), its error vanishes
#: with the step, and it saves most ``exp`` calls once the fit is under way
#: (the docs' *Algorithms*, *The local solver*).  ``coordinate_step`` stays
#: exact unless given ``rtol``.
LOGISTIC_STEP_RTOL = 0.1

#: The solver's logistic steps read ``σ(u0 + s)`` to third order in ``s``
#: (no ``exp``, no division; the step's result waits for the margin, which
#: waits for the previous step's update of ``Δw``) when ``|s| ≤`` this and
#: that error, added to Newton's, stays within ``rtol``.
_TAYLOR_MAX_SHIFT = 0.5

#: Bound on that error in the logit ``u``, as a multiple of ``s⁴``: the
#: remainder is ``σ''''(ξ)·s⁴/24`` with ``|σ''''/σ'| = |(1 - 2σ)(1 - 12σ(1 - σ))|
#: ≤ 1``, and ``σ'`` changes by at most ``e^{|s|} < 1.65`` between the points
#: involved, so ``1.65/24 < 0.07``; taken with a margin.
_TAYLOR_ERR = 0.12


def loss_code(name):
    """Return the kernel code of the loss called ``name``.

    Parameters
    ----------
    name : str
        One of ``"logistic"``, ``"hinge"``, ``"squared_hinge"``, ``"squared"``,
        ``"poisson"``, ``"softmax"``.

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


def dual_from_margins(loss, Y, c, Z):
    """The dual values that match the margins ``Z``: ``a = -c·ℓ'(z)``.

    They make every per-sample gap (``gap_term``) zero, so at the primal
    optimum ``w*`` they are the dual optimum, and ``Σ a_i x_i / (λn) = w*``.
    A warm start sets the dual state from the previous coefficients so
    (the primal-dual link of Shalev-Shwartz and Zhang, "Stochastic Dual
    Coordinate Ascent Methods", JMLR 2013, eq. 3).  For the hinge, whose
    loss has no derivative at ``y·z = 1``, the margin takes ``a = 0`` there.
    Plain NumPy over whole arrays: it runs once per fit.

    Parameters
    ----------
    loss : int
        Loss code (``LOSSES``).
    Y : ndarray of shape (n, m)
        Encoded labels (±1; for the softmax loss +1 at each row's class) or
        targets.
    c : ndarray of shape (n,)
        Sample weights.
    Z : ndarray of shape (n, m)
        Margins ``x_i·w`` (the intercept included).

    Returns
    -------
    ndarray of shape (n, m)
        The dual values, each in the conjugate's domain (``dual_value``
        is finite).

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.losses import LOSSES, dual_from_margins
    >>> a = dual_from_margins(LOSSES["logistic"], np.array([[1.0], [-1.0]]),
    ...                       np.ones(2), np.zeros((2, 1)))
    >>> a.ravel().tolist()
    [0.5, -0.5]
    """
    c = np.asarray(c, dtype=np.float64)[:, None]
    if loss == SOFTMAX:
        # a = c·(e_y − softmax(z)), e_y the row's one-hot label (Y is ±1)
        P = np.exp(Z - Z.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        return c * ((Y > 0) - P)
    yz = Y * Z
    if loss == LOGISTIC:
        # -ℓ'(z) = y·σ(-y·z); log-sum-exp form, no overflow for large |z|
        beta = np.exp(-np.logaddexp(0.0, yz))
    elif loss == HINGE:
        beta = (yz < 1.0).astype(np.float64)
    elif loss == SQUARED_HINGE:
        beta = 2.0 * np.maximum(0.0, 1.0 - yz)
    elif loss == POISSON:
        # (a mean beyond float64's range would give a = -inf: capped, so that a
        # warm start from wild coefficients stays a finite dual point)
        return c * (Y - np.exp(np.minimum(Z, 700.0)))
    else:
        return c * (Y - Z)
    return c * Y * beta


@njit(cache=True, nogil=True)
def _log1pexp(t):
    """``log(1 + exp(t))`` without overflow (and without a branch on the sign of t)."""
    return max(t, 0.0) + math.log1p(math.exp(-abs(t)))


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
    if loss == POISSON:
        # half the Poisson deviance, y·log(y/μ) − y + μ with μ = exp(z): ≥ 0,
        # and 0 at μ = y (scikit-learn's PoissonRegressor minimises its mean)
        return _xlogx(y) - y + math.exp(z) - y * z
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
    tol = 1e-12
    if loss == POISSON:
        # a = c·(y − μ) for the mean μ ≥ 0 that the dual value implies
        mu = y - a / c
        if mu < -tol * (1.0 + y):
            return -math.inf
        mu = max(mu, 0.0)
        return -c * (_xlogx(mu) - mu - _xlogx(y) + y)
    beta = a * y / c
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


@njit(cache=True, nogil=True, inline="always")
def dual_value_change(loss, y, a, c, delta):
    """``dual_value(a + delta) - dual_value(a)`` for a step between feasible values.

    In closed form for the hinge, squared hinge and squared losses, so that a
    solver kernel can add it up as it steps (with two logs for the Poisson
    loss); 0 for the logistic loss, whose
    change needs logs (taken over whole arrays, see
    ``daskelastic.solvers._logistic_dual_change``).
    """
    if loss == LOGISTIC or c <= 0.0:
        return 0.0
    if loss == HINGE:
        return delta * y
    if loss == POISSON:
        return dual_value(loss, y, a + delta, c) - dual_value(loss, y, a, c)
    # a·y - a²/(k·c): k = 4 (squared hinge), 2 (squared)
    k = 4.0 if loss == SQUARED_HINGE else 2.0
    return delta * y - delta * (2.0 * a + delta) / (k * c)


@njit(cache=True, nogil=True)
def gap_term(loss, y, a, c, z):
    """Per-sample duality gap ``c·ℓ(z) + (c·ℓ)*(-a) + a·z`` (≥ 0, Fenchel–Young)."""
    if c <= 0.0:
        return 0.0
    return c * primal_loss(loss, y, z) - dual_value(loss, y, a, c) + a * z


@njit(cache=True, nogil=True, inline="always")
def _sigmoid_shift(b, s):
    """``σ(logit(b) + s)`` for ``|s| ≤ 1/16`` without exp: ``b·X / (1 + b(X - 1))``, X = eˢ.

    ``X - 1`` is its Taylor polynomial of degree 9 (relative error < 1e-17 there).
    """
    xm1 = s * (1.0 + s * (1.0 / 2.0 + s * (1.0 / 6.0 + s * (1.0 / 24.0 + s * (
        1.0 / 120.0 + s * (1.0 / 720.0 + s * (1.0 / 5040.0 + s * (
            1.0 / 40320.0 + s * (1.0 / 362880.0)))))))))
    return b * (1.0 + xm1) / (1.0 + b * xm1)


@njit(cache=True, nogil=True)
def _logistic_step(y, a, c, z, q, rtol):
    beta0 = min(max(a * y / c, 0.0), 1.0)
    u0 = math.log(beta0 / (1.0 - beta0)) if 1e-12 < beta0 < 1.0 - 1e-12 else 0.0
    return logistic_step_at(y, c, z, q, beta0, u0, rtol)


@njit(cache=True, nogil=True, inline="always")
def logistic_step_at(y, c, z, q, beta0, u0, rtol):
    """The logistic coordinate step from ``beta0 = a·y/c ∈ [0, 1]`` and its logit ``u0``.

    ``u0`` is read only when ``1e-12 < beta0 < 1 - 1e-12``.  The solver's
    kernels pass the logits that ``daskelastic.solvers.logistic_start`` took
    for a whole chunk at once; ``coordinate_step`` takes the log itself.

    Newton stops when the root is within ``1e-9·(1 + |u|)`` of its iterate
    ``u`` (in ``u = logit(a'·y/c)``) or, with ``rtol > 0``, within
    ``rtol·min(|u - u0|, 1)`` (``rtol`` when ``beta0`` is 0 or 1, where the
    move in ``b = σ(u)`` is ``b`` or ``1 - b`` and ``|Δb| ≤ b(1 - b)·|Δu|``:
    the cap keeps a long move in the logit, from ``beta0`` near 0 or 1, from
    allowing a large error).
    """
    # In u = logit(b), b = a'·y/c ∈ (0, 1), the optimality condition is
    #   g(u) = hi - u - q·c·σ(u) = 0,   hi = -y·z + q·c·beta0,
    # with g strictly decreasing and g' ∈ [-1 - q·c/4, -1].  Its root lies in
    # [lo, hi] = [-yz - qc(1 - beta0), -yz + qc·beta0].
    qc = q * c
    yz = y * z
    lo = -yz - qc * (1.0 - beta0)
    hi = -yz + qc * beta0
    top = hi
    # After a Newton step s the root is within ½·max|g''|·s² ≤ qc·s²/20 of the
    # new iterate (|g'| ≥ 1): stop there once that bound meets the tolerance,
    # without a further step to confirm it.
    half_curv = 0.05 * qc
    u = -yz - qc * (0.5 - beta0)  # the root when σ(u) ≈ 1/2, inside the bracket
    anchored = False   # whether the relative tolerance is relative to u0
    n_iter = _NEWTON_MAX_ITER
    if 1e-12 < beta0 < 1.0 - 1e-12:
        # The margin changes little between visits of a sample, so the root is
        # usually near u0, where σ(u0) = beta0 is known: a first Newton step
        # without exp, whose slope does not wait for the margin.
        g1 = beta0 * (1.0 - beta0)
        inv_slope = 1.0 / (1.0 + qc * g1)
        # g(u0) = top - u0 - qc·beta0 = -(yz + u0): two operations from the
        # margin, which waits for the previous step's update of Δw
        s = -(yz + u0) * inv_slope
        anchored = True
        if lo <= u0 <= hi:
            if _newton_done(s, u0 + s, abs(s), half_curv, rtol):
                if abs(s) <= _TAYLOR_MAX_SHIFT and (
                        half_curv * abs(s) + _TAYLOR_ERR * abs(s) * s * s <= rtol):
                    # σ(u0 + s) to third order in s, evaluated in two levels
                    g2 = g1 * (0.5 - beta0)
                    g3 = g1 * (1.0 - 6.0 * g1) * (1.0 / 6.0)
                    b = (beta0 + s * g1) + (s * s) * (g2 + s * g3)
                    return y * c * min(max(b, 0.0), 1.0)
                if abs(s) <= 0.0625:
                    return y * c * min(max(_sigmoid_shift(beta0, s), 0.0), 1.0)
                if lo <= u0 + s <= hi:
                    return y * c * _sigmoid(u0 + s)
            # the root is on the side of u0 the step went to
            if s > 0.0:
                lo = u0
            else:
                hi = u0
            # start where that step went, not at u0: its exp would be wasted
            u = min(max(u0 + s, lo), hi)
        else:
            u = min(max(u0, lo), hi)
    else:
        # beta0 at 0 or 1 (e.g. every sample's first step of a fit): a first
        # Newton step from u = 0, where σ = 1/2 and σ' = 1/4 need no exp; kept
        # when it lands near 0 (further out the bracket's middle, above, is
        # the closer start)
        g0 = top - 0.5 * qc
        s = g0 / (1.0 + 0.25 * qc)
        if abs(s) <= _START_NEAR_ZERO:
            if g0 > 0.0:
                lo = max(lo, 0.0)
            else:
                hi = min(hi, 0.0)
            u = min(max(s, lo), hi)
            if u == s and _newton_done(s, s, 1.0, half_curv, rtol):
                n_iter = 0
    step_before = hi - lo
    # Safeguarded Newton inside the bracket (bisection when Newton would leave
    # it or stops converging fast), σ read through E = exp(-|u|) ≤ 1 and
    # t = 1 + E (no overflow), with one division per step:
    #   g·t = (top - u)·t - qc·(1 if u ≥ 0 else E),  -g'·t² = t² + qc·E.
    for _ in range(n_iter):
        e = math.exp(-abs(u))
        t = 1.0 + e
        gt = (top - u) * t - (qc if u >= 0.0 else qc * e)
        slope = t * t + qc * e
        if gt == 0.0:
            break
        if gt > 0.0:
            lo = u
        else:
            hi = u
        newton = u + gt * t / slope
        if lo <= newton <= hi and abs(2.0 * gt * t) <= abs(step_before * slope):
            step = newton - u
            u = newton
            if _newton_done(step, u, abs(u - u0) if anchored else 1.0, half_curv, rtol):
                break
        else:
            step = 0.5 * (hi - lo)
            u = lo + step
            if abs(step) <= 1e-9 * (1.0 + abs(u)):
                break
        step_before = step
    # At the root σ(u) = (top - u)/qc.  Within the tolerance δ of the root
    # that reads σ to δ/qc, no worse than σ(u) itself (to σ'·δ = b(1 - b)·δ)
    # when qc·b(1 - b) ≥ 1: then it saves an exp.
    if qc > 0.0:
        b = (top - u) / qc
        if qc * b * (1.0 - b) >= 1.0:
            return y * c * min(max(b, 0.0), 1.0)
    return y * c * _sigmoid(u)


@njit(cache=True, nogil=True, inline="always")
def _newton_done(step, u, move, half_curv, rtol):
    """Whether the logistic step's Newton may stop at ``u`` after ``step``.

    The root is within ``half_curv·step²`` of ``u``: stop when that is below
    ``1e-9·(1 + |u|)`` (or the step itself is), or at most ``rtol`` times the
    ``move`` from the step's start, counted as at most 1.
    """
    err = half_curv * step * step
    return min(abs(step), err) <= 1e-9 * (1.0 + abs(u)) or err <= rtol * min(move, 1.0)


@njit(cache=True, nogil=True, inline="always")
def _sigmoid(u):
    e = math.exp(-abs(u))
    b = 1.0 / (1.0 + e) if u >= 0.0 else e / (1.0 + e)
    return min(max(b, 0.0), 1.0)


@njit(cache=True, nogil=True)
def _poisson_step(y, a, c, z, q):
    """The Poisson coordinate step: safeguarded Newton in ``u = log μ'``.

    With ``a' = c·(y − μ')`` the subproblem's optimality condition reads
    ``g(u) = z + q·c·(μ0 − e^u) − u = 0`` (``μ0 = y − a/c``), ``g`` strictly
    decreasing and concave.  Its root lies between ``z`` and ``log μ0``
    (from ``z − q·c·e^z`` when ``μ0 = 0``): at ``u = z`` the step's pull
    ``q·c·(μ0 − e^z)`` and at ``u = log μ0`` the margin's ``z − log μ0``
    have opposite signs.
    """
    qc = q * c
    mu0 = max(y - a / c, 0.0)
    if mu0 > 0.0:
        lu = math.log(mu0)
        lo, hi = min(z, lu), max(z, lu)
        u = lu        # the margin moves little between visits: start at μ0
    else:
        lo, hi = z - qc * math.exp(z), z
        u = hi
    for _ in range(_NEWTON_MAX_ITER):
        e = math.exp(u)
        g = z + qc * (mu0 - e) - u
        if g == 0.0:
            break
        if g > 0.0:
            lo = u
        else:
            hi = u
        newton = u + g / (1.0 + qc * e)
        if lo < newton < hi:
            step = newton - u
            u = newton
        else:
            step = 0.5 * (hi - lo)
            u = lo + step
        if abs(step) <= 1e-12 * (1.0 + abs(u)):
            break
    return c * (y - math.exp(u))


@njit(cache=True, nogil=True)
def coordinate_step(loss, y, a, c, z, q, rtol=0.0):
    """Maximiser ``a'`` of the one-coordinate CoCoA+ subproblem.

    Parameters are the label ``y``, current dual value ``a``, sample weight
    ``c``, margin ``z`` at the local iterate and curvature ``q = σ'‖x‖²/(λn)``.
    A sample of weight 0 keeps its dual value at 0.  The step is exact (the
    logistic one to ``1e-9`` in the logit of ``a'·y/c``) unless ``rtol > 0``
    allows the logistic step that relative error (see ``logistic_step_at``).
    """
    if c <= 0.0:
        return 0.0
    if loss == LOGISTIC:
        return _logistic_step(y, a, c, z, q, rtol)
    if loss == HINGE:
        beta = a * y
        if q <= 0.0:
            m = 1.0 - y * z
            if m > 0.0:
                return y * c
            if m < 0.0:
                return 0.0
            return a
        # 1/q does not wait for the margin (which waits for the previous
        # step's update of Δw): a multiplication on that path, not a division
        beta_new = min(max(beta + (1.0 - y * z) * (1.0 / q), 0.0), c)
        return y * beta_new
    if loss == SQUARED_HINGE:
        # (1 - yz + q·a·y) / (q + 1/(2c)), the division taken before the
        # margin is known (see the hinge)
        beta_new = max(0.0, (1.0 - y * z + q * a * y) * (c / (q * c + 0.5)))
        return y * beta_new
    if loss == POISSON:
        return _poisson_step(y, a, c, z, q)
    # squared: unconstrained
    return (y - z + q * a) / (q + 1.0 / c)


# -- the softmax (multinomial logistic) loss ---------------------------------------
# A row's K margins z are coupled: ℓ(y, z) = log Σ_k exp(z_k) − z_y.  Its dual
# values are a vector a = c·(e_y − β) with β in the probability simplex (so
# Σ_k a_k = 0), and -(cℓ)*(-a) = c·H(β), the entropy of β (Shalev-Shwartz and
# Zhang, "Accelerated Proximal Stochastic Dual Coordinate Ascent", Math.
# Program. 2016, section 5: SDCA for multiclass logistic regression).

#: Newton iterations allowed for the softmax step's multiplier and logits.
_SOFTMAX_MAX_ITER = 60

#: Steps of the joint Newton (``_softmax_newton``) before the safe solve takes over.
_SOFTMAX_NEWTON_STEPS = 8


@njit(cache=True, nogil=True)
def softmax_loss(y, z):
    """``ℓ(y, z) = log Σ_k exp(z_k) − z_y`` of one row (``y`` is +1 at its class)."""
    top = z[0]
    for k in range(1, z.shape[0]):
        top = max(top, z[k])
    total = 0.0
    zy = 0.0
    for k in range(z.shape[0]):
        total += math.exp(z[k] - top)
        if y[k] > 0.0:
            zy = z[k]
    return top + math.log(total) - zy


@njit(cache=True, nogil=True)
def softmax_dual_value(y, a, c):
    """``-(c·ℓ)*(-a) = c·H(β)`` with ``β = e_y − a/c``; ``-inf`` off the simplex.

    A row of weight 0 has the dual value 0 at ``a = 0`` (and only there).
    """
    if c <= 0.0:
        for k in range(a.shape[0]):
            if a[k] != 0.0:
                return -math.inf
        return 0.0
    tol = 1e-12
    total = 0.0
    entropy = 0.0
    for k in range(a.shape[0]):
        beta = (1.0 if y[k] > 0.0 else 0.0) - a[k] / c
        if beta < -tol:
            return -math.inf
        total += beta
        entropy -= _xlogx(beta)
    if abs(total - 1.0) > 1e-9:
        return -math.inf
    return c * entropy


@njit(cache=True, nogil=True)
def softmax_step(y, a, c, z, q, out, t):
    """The softmax row step: the maximiser ``a'`` of the row's CoCoA+ subproblem.

    Maximises ``c·H(β') − (a' − a)·z − (q/2)‖a' − a‖²`` over ``a' = c·(e_y − β')``
    with ``β'`` in the simplex, the row's K dual values at once (the quadratic
    term is the sum of the K targets' coordinate terms).  Its optimality
    conditions read, with ``t_k = log β'_k`` and the multiplier ``ν`` of
    ``Σ_k β'_k = 1``,

        t_k + qc·e^{t_k} = r_k − ν,   r_k = z_k + qc·β_k,   β = e_y − a/c.

    Each ``t_k`` increases with ``r_k − ν``, so ``Σ_k e^{t_k(ν)}`` is
    decreasing and convex in ``ν``: Newton from ``ν = max r − qc`` (where
    the sum is ≥ 1) climbs to the root without overshooting, and each
    ``t_k(ν)`` is itself a Newton solve from its previous value, which lies
    on the safe side.  The root lies within ``log K + qc`` of the start.
    That nested solve takes first visits (``β`` at a vertex); from a ``β``
    inside the simplex, Newton on all the conditions at once
    (``_softmax_newton``) usually settles in a few steps.  The result is exact
    to rounding.

    Parameters
    ----------
    y : ndarray of shape (K,)
        The row's labels: +1 at its class, -1 elsewhere.
    a : ndarray of shape (K,)
        Its dual values now (``a = c·(e_y − β)``, ``β`` on the simplex).
    c : float
        Its sample weight; a row of weight 0 keeps ``a' = 0``.
    z : ndarray of shape (K,)
        Its margins at the local iterate.
    q : float
        The curvature ``σ'‖x‖²/(λn)``.
    out : ndarray of shape (K,)
        Gets ``a'`` (may be ``z`` itself: read before it is written).
    t : ndarray of shape (K,)
        Scratch.
    """
    m = a.shape[0]
    if c <= 0.0:
        for k in range(m):
            out[k] = 0.0
        return
    qc = q * c
    # r_k in out (overwritten by a' at the end)
    top = -math.inf
    for k in range(m):
        beta = (1.0 if y[k] > 0.0 else 0.0) - a[k] / c
        out[k] = z[k] + qc * min(max(beta, 0.0), 1.0)
        top = max(top, out[k])
    if qc <= 0.0:
        # no curvature: β' = softmax(z)
        total = 0.0
        for k in range(m):
            t[k] = math.exp(out[k] - top)
            total += t[k]
        for k in range(m):
            out[k] = c * ((1.0 if y[k] > 0.0 else 0.0) - t[k] / total)
        return
    if _softmax_newton(y, a, c, qc, out, t):
        return
    nu = top - qc
    for k in range(m):
        s = out[k] - nu        # ≤ qc: t_k ≤ 0
        t[k] = min(s, math.log1p(max(s, 0.0) / qc))   # h(t) ≥ s there: Newton from above
    for _ in range(_SOFTMAX_MAX_ITER):
        total = 0.0
        slope = 0.0
        for k in range(m):
            s = out[k] - nu
            tk = t[k]
            for _ in range(_SOFTMAX_MAX_ITER):
                e = math.exp(tk)
                step = (tk + qc * e - s) / (1.0 + qc * e)
                tk -= step
                if step <= 1e-13 * (1.0 + abs(tk)):
                    break
            t[k] = tk
            e = math.exp(tk)
            total += e
            slope += e / (1.0 + qc * e)
        # Σ e^{t_k(ν)} − 1 has the derivative −Σ e^t/(1 + qc e^t)
        move = (total - 1.0) / slope
        if move <= 1e-15 * (1.0 + abs(nu)):
            break
        nu += move
    total = 0.0
    for k in range(m):
        total += math.exp(t[k])
    for k in range(m):
        out[k] = c * ((1.0 if y[k] > 0.0 else 0.0) - math.exp(t[k]) / total)


@njit(cache=True, nogil=True, inline="always")
def _softmax_newton(y, a, c, qc, out, t):
    """Newton on all of ``softmax_step``'s conditions at once, from the row's current ``β``.

    Between visits a row's ``β`` moves little, so Newton on the ``K + 1``
    equations ``t_k + qc·e^{t_k} − r_k + ν = 0``, ``Σ e^{t_k} = 1`` (its
    Jacobian is a diagonal plus a border: ``O(K)`` a step) from ``t = log β``
    converges in a few steps, a few ``exp`` per class where the nested
    solve takes many.  Returns False, with ``out`` (the ``r_k``) intact, when
    ``β`` has a zero entry (a first visit) or Newton does not settle within
    ``_SOFTMAX_NEWTON_STEPS``: the nested solve then takes over.
    """
    m = a.shape[0]
    for k in range(m):
        beta = (1.0 if y[k] > 0.0 else 0.0) - a[k] / c
        if not beta > 1e-12:
            return False
        t[k] = math.log(beta)
    # ν that fits the current t best, weighted as in the Newton step below
    num = den = 0.0
    for k in range(m):
        e = math.exp(t[k])
        wk = e / (1.0 + qc * e)
        num += wk * (out[k] - t[k] - qc * e)
        den += wk
    nu = num / den
    for _ in range(_SOFTMAX_NEWTON_STEPS):
        # Δν = (G − Σ e F/D) / Σ e/D,  Δt_k = (−F_k − Δν) / D_k
        g = -1.0
        num = den = 0.0
        worst = 0.0
        for k in range(m):
            e = math.exp(t[k])
            dk = 1.0 + qc * e
            fk = t[k] + qc * e - out[k] + nu
            g += e
            num += e * fk / dk
            den += e / dk
            worst = max(worst, abs(fk) / (1.0 + abs(t[k])))
        if worst <= 1e-13 and abs(g) <= 1e-14:
            total = 0.0
            for k in range(m):
                total += math.exp(t[k])
            for k in range(m):
                out[k] = c * ((1.0 if y[k] > 0.0 else 0.0) - math.exp(t[k]) / total)
            return True
        dnu = (g - num) / den
        for k in range(m):
            e = math.exp(t[k])
            fk = t[k] + qc * e - out[k] + nu
            step = (-fk - dnu) / (1.0 + qc * e)
            if not abs(step) < 30.0:    # far off (or NaN): the safe solve instead
                return False
            t[k] += step
        nu += dnu
    return False


@njit(cache=True, nogil=True)
def softmax_intercept_sums(Y, c, A, out):
    """Add the sums a free intercept of the softmax loss needs to ``out`` (shape ``(K + 3, K)``).

    By the rows' class ``j`` (their label): ``out[j, k] += Σ α_ik`` (a ``K × K``
    matrix whose rows add up to 0) and ``out[K, j] += Σ c·H(β)``, the rows' dual
    values; over all rows the curvature ``out[K + 1, k] += Σ c β_k (1 − β_k)`` at
    the margins the dual values match (``β = softmax(z)``), and ``out[K + 2] += Σ c``.
    :func:`daskelastic.objective.softmax_free_intercept_gap` turns them into a
    certificate; :func:`daskelastic.objective.intercept_step` reads the curvature.

    Parameters
    ----------
    Y : ndarray of shape (n, K)
        Encoded labels (+1 at each row's class).
    c : ndarray of shape (n,)
        Sample weights.
    A : ndarray of shape (n, K)
        The committed dual values.
    out : ndarray of shape (K + 3, K)
        Where the sums are added.
    """
    m = A.shape[1]
    for i in range(A.shape[0]):
        ci = c[i]
        label = 0
        for k in range(m):
            if Y[i, k] > 0.0:
                label = k
        out[m, label] += softmax_dual_value(Y[i], A[i], ci)
        for k in range(m):
            out[label, k] += A[i, k]
            out[m + 2, k] += ci
            if ci > 0.0:
                beta = min(max((1.0 if k == label else 0.0) - A[i, k] / ci, 0.0), 1.0)
                out[m + 1, k] += ci * beta * (1.0 - beta)


@njit(cache=True, nogil=True)
def intercept_sums(loss, Y, c, A, D, out):
    """Add the per-target sums that an unpenalised intercept needs to ``out``.

    For each target ``k`` (column of ``A``), over the rows whose dual value
    ``a = A[i, k]`` is positive and those where it is negative: ``Σ |a|`` and
    the dual values ``Σ -(c ℓ)*(-a)``; then the curvature ``Σ c ℓ''`` at the
    margins that ``a`` matches (``-c ℓ'(z) = a``: ``|a|(1 - |a|/c)`` for the
    logistic loss, ``2c`` where ``a ≠ 0`` for the squared hinge, ``c`` for
    the squared loss, ``c·μ = c·y − a`` for the Poisson loss) and ``Σ c``.
    The rows of ``out`` (shape ``(6, m)``) are ``INTERCEPT_SUMS``.
    :func:`daskelastic.objective.free_intercept_gap` turns them into a
    certificate; the driver's intercept step reads the curvature.

    Parameters
    ----------
    loss : int
        Loss code; not the hinge (its loss has no curvature).
    Y : ndarray of shape (n, m)
        Encoded targets.
    c : ndarray of shape (n,)
        Sample weights.
    A : ndarray of shape (n, m)
        The committed dual values.
    D : ndarray of shape (n, m) or (0, m)
        The dual values ``-(c ℓ)*(-a)`` when already known (the logistic
        solver's), else empty: computed here.
    out : ndarray of shape (6, m)
        Where the sums are added.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.losses import LOSSES, intercept_sums
    >>> A = np.array([[0.5], [-0.25], [0.0]])    # logistic dual values, labels ±1
    >>> out = np.zeros((6, 1))
    >>> intercept_sums(LOSSES["logistic"], np.array([[1.0], [-1.0], [1.0]]), np.ones(3),
    ...                A, np.empty((0, 1)), out)
    >>> out[:2].ravel().tolist(), float(out[4, 0])    # Σ|a| by side; Σ |a|(1 − |a|)
    ([0.5, 0.25], 0.4375)
    """
    known = D.shape[0] > 0
    for i in range(A.shape[0]):
        ci = c[i]
        for k in range(A.shape[1]):
            a = A[i, k]
            out[5, k] += ci
            if loss == SQUARED:
                out[4, k] += ci
            elif loss == POISSON:   # c·μ, μ = y − a/c: also where a = 0 (μ = y)
                out[4, k] += max(ci * Y[i, k] - a, 0.0)
            if a == 0.0:
                continue
            v = D[i, k] if known else dual_value(loss, Y[i, k], a, ci)
            side = 0 if a > 0.0 else 1
            mag = abs(a)
            out[side, k] += mag
            out[2 + side, k] += v
            if loss == LOGISTIC:
                out[4, k] += mag * max(1.0 - mag / ci, 0.0)
            elif loss == SQUARED_HINGE:
                out[4, k] += 2.0 * ci
