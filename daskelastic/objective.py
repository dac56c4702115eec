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

The intercept is either penalised or free.  Penalised (liblinear's and Snap
ML's way), it is the coefficient of a constant feature of value
``intercept_scaling``, and the problem above covers it.  Free (scikit-learn's
lbfgs and Ridge, Spark's way), the primal is ``P(w, b)`` with margins
``x_i·w + b`` and ``b`` unpenalised; its dual is ``D(α)`` under the
constraint ``Σ α_i = 0`` (``b`` is the constraint's multiplier).  The workers
then solve the problem at a fixed ``b``, whose dual is
``D_b(α) = D(α) − b Σ α_i / n`` with no constraint; the driver moves ``b``
between rounds (:func:`intercept_step`) and certifies the pair with the
gap to a feasible dual point (:func:`free_intercept_gap`).

An L1 part, ``μ‖w‖₁`` added to the primal (elastic-net, or the Lasso's pure
L1 with ``λ = 0``), changes the map from the dual to the primal: ``w(α)`` is
the soft-thresholded ``Σ α_i x_i / (λn)`` (:func:`soft_threshold`), and the
certificate is the gap to a feasible, scaled dual point
(:func:`elastic_net_gap`).  The docs' *Algorithms* page, *L1 and
elastic-net*, derives both.
"""

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["lambda_from_C", "Objective", "elastic_net_gap", "free_intercept_gap",
           "softmax_free_intercept_gap", "soft_threshold", "intercept_step",
           "objective_from_gap", "primal_objective", "relative_gap"]

#: Largest change of a classifier's free intercept in one round (the
#: margins' units): the curvature read from the dual values is 0 at a fit's
#: start, where ``α = 0``.
MAX_INTERCEPT_STEP = 1.0


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


def objective_from_gap(loss_sum, gap, w, lam, n_samples, l1=0.0):
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
    l1 : float, default=0.0
        ``μ``, the weight of ``‖w‖₁`` in the primal.
    """
    primal = loss_sum / n_samples + 0.5 * lam * float(np.sum(np.square(w)))
    if l1:
        primal += l1 * float(np.sum(np.abs(w)))
    dual = primal - gap
    return Objective(primal, dual, gap, relative_gap(primal, dual))


def free_intercept_gap(sums, positive_x, b, u, lam, n_samples):
    """What the constraint ``Σ α_i = 0`` adds to the gap of a fixed-intercept dual.

    The gap of the workers' problem at the intercept ``b``,
    ``P(w, b) − D_b(α)``, bounds ``P(w, b) − min_w P(w, b)`` only.  A dual
    point of the problem with a free intercept must satisfy ``Σ α_i = 0``:
    ``α̃`` scales the dual values on the side (positive or negative) whose
    magnitudes add up to more by ``t = smaller / larger``, so that both sides
    balance (scaling toward 0 keeps each ``α̃_i`` in its conjugate's domain,
    which holds 0 for every loss here).  Each dual value ``v_i`` is concave
    with ``v_i(0) = 0``, so ``v_i(t α_i) ≥ t v_i(α_i)``, and
    ``w(α̃) = w(α) − (1 − t) Σ_side α_i x_i / (λn)`` exactly: a lower bound of
    ``D(α̃)``, hence of ``P(w*, b*)``.  This returns ``D_b(α)`` minus that
    bound, so that the fixed-intercept gap plus it is ``P(w, b) −`` the
    bound, an upper bound on ``P(w, b) − P(w*, b*)``; it vanishes as
    ``Σ α_i`` does.

    Parameters
    ----------
    sums : ndarray of shape (6, m)
        :func:`daskelastic.losses.intercept_sums` over all rows.
    positive_x : ndarray of shape (d, m)
        ``Σ α_i x_i`` over the rows with ``α_i > 0``.
    b : ndarray of shape (m,)
        The intercepts the sums' round ran at.
    u : ndarray of shape (d, m)
        ``w(α) = Σ α_i x_i / (λn)`` without the intercept feature.
    lam : float
        ``λ`` of the problem certified.
    n_samples : int
        ``n``.

    Returns
    -------
    float
        The term to add to the fixed-intercept gap (≥ 0 up to rounding once
        that gap is added).

    Examples
    --------
    Balanced dual values (``Σ α_i = 0``) add nothing:

    >>> import numpy as np
    >>> from daskelastic.objective import free_intercept_gap
    >>> sums = np.array([[2.0], [2.0], [1.0], [1.0], [0.5], [4.0]])
    >>> free_intercept_gap(sums, np.ones((3, 1)), np.array([0.3]), np.ones((3, 1)),
    ...                    lam=0.1, n_samples=4)
    0.0
    """
    pos, neg, dual_pos, dual_neg = sums[:4]
    lam_n = lam * n_samples
    larger_pos = pos >= neg
    larger = np.where(larger_pos, pos, neg)
    shrink = np.where(larger > 0, np.abs(pos - neg) / np.where(larger > 0, larger, 1.0), 0.0)
    dual_side = np.where(larger_pos, dual_pos, dual_neg)
    # Σ_side α_i x_i / (λn): the negative side's is w(α) less the positive one's
    side_x = np.where(larger_pos, positive_x / lam_n, u - positive_x / lam_n)
    # ½λ(‖w(α̃)‖² − ‖w(α)‖²), w(α̃) = w(α) − (1 − t)·side_x, per target
    norm_change = lam * (-shrink * np.sum(u * side_x, axis=0)
                         + 0.5 * shrink * shrink * np.sum(side_x * side_x, axis=0))
    terms = (shrink * dual_side - b * (pos - neg)) / n_samples + norm_change
    return float(np.sum(terms))


def soft_threshold(z, threshold):
    """``sign(z)·max(|z| − threshold, 0)``, elementwise: the proximal map of ``threshold·‖·‖₁``.

    With an L1 part, the primal iterate of the dual state is
    ``w = soft_threshold(Σ α_i x_i / (λn), μ / λ)``: the gradient of the
    conjugate of ``λ/2 ‖w‖² + μ‖w‖₁`` (Shalev-Shwartz and Zhang, "Accelerated
    proximal stochastic dual coordinate ascent", 2016, §5.1).

    Parameters
    ----------
    z : ndarray
        The values to shrink.
    threshold : float or ndarray
        The amount, non-negative (an array broadcast against ``z``).

    Returns
    -------
    ndarray
        ``z`` moved towards zero by ``threshold``, zero where ``|z| ≤ threshold``.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.objective import soft_threshold
    >>> soft_threshold(np.array([-3.0, -0.5, 0.0, 2.0]), 1.0)
    array([-2., -0.,  0.,  1.])
    """
    return np.sign(z) * np.maximum(np.abs(z) - threshold, 0.0)


def elastic_net_gap(loss_sum, dual_sum, w, u, lam, l1, n_samples, free=None,
                    softmax=False):
    """A certified gap ``P(w) − D(α̃)`` of a problem with an L1 part.

    The primal is ``P(w) = Σ c_i ℓ_i / n + λ/2 ‖w‖² + μ‖w‖₁``.  Its dual at
    ``α`` is ``Σ dual_i(α_i) / n − R*(Σ α_i x_i / n)``, where the conjugate of
    the regulariser is ``R*(u) = ‖soft_threshold(u, μ)‖² / (2λ)`` for
    ``λ > 0`` and, for the pure L1 (``λ = 0``), 0 inside the box
    ``‖u‖_∞ ≤ μ`` and +∞ outside.  The dual point certified is ``α̃ = θα``
    (with a free intercept, ``θ`` times the balanced values of
    :func:`free_intercept_gap`): for ``λ > 0`` ``θ = 1``; for ``λ = 0`` the
    largest ``θ ≤ 1`` that brings ``u`` into the box (the dual rescaling of
    the Lasso's gap, as in scikit-learn's coordinate descent; it plays the
    role of Smith et al.'s Lipschitzing trick, JMLR 2018, §6.1).  Each dual
    value is concave with ``dual_i(0) = 0``, so ``dual_i(θα_i) ≥ θ
    dual_i(α_i)``: the bound is rigorous.  It vanishes at the optimum, where
    ``u`` lies in the box and ``w = soft_threshold(u/λ, μ/λ)``.

    Parameters
    ----------
    loss_sum : float
        ``Σ c_i ℓ_i`` at ``w`` (with its intercept, if any).
    dual_sum : float
        ``Σ dual_i(α_i)`` over all rows.
    w : ndarray of shape (d, m)
        The penalised coefficients.
    u : ndarray of shape (d, m)
        ``Σ α_i x_i / n`` over the same coordinates.
    lam, l1 : float
        ``λ`` (may be 0) and ``μ > 0``.
    n_samples : int
        ``n``.
    free : tuple (sums, positive_x) or (sums, by_class), optional
        With a free intercept: :func:`daskelastic.losses.intercept_sums` over
        all rows and ``Σ α_i x_i`` over the rows with ``α_i > 0``, as
        :func:`free_intercept_gap` takes them; for the softmax loss
        (``softmax=True``) what :func:`softmax_free_intercept_gap` takes, the
        rows of each label class scaled by the balancing scales.
    softmax : bool, default=False
        The loss is the softmax one (``w`` and ``u`` of shape (d, K)).

    Returns
    -------
    float
        The certified gap, ≥ 0 up to rounding.

    Examples
    --------
    The Lasso at ``w = 0`` with ``μ`` above ``max |Xᵀy| / n``: the optimum,
    certified by ``α = y`` (the residuals):

    >>> import numpy as np
    >>> from daskelastic.objective import elastic_net_gap
    >>> X = np.array([[1.0], [-1.0], [1.0]]); y = np.array([1.0, 0.0, -0.5])
    >>> loss_sum = float(np.sum(0.5 * y ** 2)); dual_sum = loss_sum  # ½α² − αy at α=y
    >>> elastic_net_gap(loss_sum, dual_sum, np.zeros((1, 1)), (X.T @ y / 3)[:, None],
    ...                 lam=0.0, l1=0.5, n_samples=3)
    0.0
    """
    n = n_samples
    dual = dual_sum
    if free is not None and softmax:
        sums, by_class = free
        m = sums.shape[1]
        pi = _balancing_scales(sums[:m], sums[m])
        dual = float(pi @ sums[m])
        # the row scales leave the rounding residual u − Σ_j U_j as it is
        u = u - by_class.sum(axis=0) / n + np.tensordot(pi, by_class, axes=1) / n
    elif free is not None:
        sums, positive_x = free
        pos, neg, dual_pos, dual_neg = sums[:4]
        larger_pos = pos >= neg
        larger = np.where(larger_pos, pos, neg)
        shrink = np.where(larger > 0, np.abs(pos - neg) / np.where(larger > 0, larger, 1.0),
                          0.0)
        dual_side = np.where(larger_pos, dual_pos, dual_neg)
        side_x = np.where(larger_pos, positive_x, n * u - positive_x) / n
        # the balanced α̃: the larger side's values times 1 − shrink
        dual = float(np.sum(dual_pos + dual_neg - shrink * dual_side))
        u = u - shrink * side_x
    primal = loss_sum / n + 0.5 * lam * float(np.sum(w * w)) + l1 * float(np.sum(np.abs(w)))
    if lam > 0:
        bound = dual / n - float(np.sum(np.square(soft_threshold(u, l1)))) / (2.0 * lam)
    else:
        top = float(np.max(np.abs(u), initial=0.0))
        theta = 1.0 if top <= l1 else l1 / top
        bound = theta * max(dual, 0.0) / n
    return max(primal - bound, 0.0)


def softmax_free_intercept_gap(sums, by_class, b, u, lam, n_samples):
    """``free_intercept_gap`` for the softmax loss, whose rows couple the classes.

    A free intercept per class asks the dual values to satisfy ``Σ_i α_ik = 0``
    for every class ``k``.  Scaling each row's vector ``α_i`` by ``s_j ∈ [0, 1]``,
    one scale per label class ``j``, keeps it in its domain, and the scaled
    values balance when ``sᵀM = 0``, ``M_jk = Σ_{i: y_i = j} α_ik``.  ``M``'s
    off-diagonal entries are ≤ 0 and its rows add up to 0: ``−M`` is the
    generator of a Markov chain, and ``s`` its stationary distribution
    (``_balancing_scales``), scaled by the ``θ ∈ [0, 1]`` that maximises the
    bound below.  As in ``free_intercept_gap``, ``v(sα) ≥ s·v(α)`` and
    ``w(α̃) = Σ_j s_j U_j`` exactly (``U_j = Σ_{i: y_i = j} x_i α_iᵀ / (λn)``)
    give a lower bound of ``D(α̃)``; this returns ``D_b(α)`` minus it.

    Parameters
    ----------
    sums : ndarray of shape (K + 3, K)
        :func:`daskelastic.losses.softmax_intercept_sums` over all rows.
    by_class : ndarray of shape (K, d, K)
        ``Σ x_i α_iᵀ`` over each class's rows.
    b : ndarray of shape (K,)
        The intercepts the sums' round ran at.
    u : ndarray of shape (d, K)
        ``w(α)`` without the intercept feature.
    lam : float
        ``λ`` of the problem certified.
    n_samples : int
        ``n``.

    Returns
    -------
    float
        The term to add to the fixed-intercept gap.
    """
    m = sums.shape[1]
    M, D = sums[:m], sums[m]
    lam_n = lam * n_samples
    alpha_sum = M.sum(axis=0)
    d_b = (D.sum() - b @ alpha_sum) / n_samples - 0.5 * lam * float(np.sum(u * u))
    pi = _balancing_scales(M, D)
    # the bound at s = θπ: θ π·D / n − λ/2 ‖c0 + θB‖², c0 = u − Σ_j U_j (0 up to
    # rounding), B = Σ_j π_j U_j; a concave quadratic in θ
    U = by_class / lam_n
    B = np.tensordot(pi, U, axes=1)
    c0 = u - U.sum(axis=0)
    linear = pi @ D / n_samples - lam * float(np.sum(c0 * B))
    curvature = lam * float(np.sum(B * B))
    theta = 1.0 if curvature <= 0 else min(max(linear / curvature, 0.0), 1.0)
    bound = theta * pi @ D / n_samples - 0.5 * lam * float(np.sum(np.square(c0 + theta * B)))
    return float(d_b - bound)


def _balancing_scales(M, D):
    """Scales ``s ∈ [0, 1]^K``, the largest 1, with ``sᵀM = 0`` (see softmax_free_intercept_gap).

    The stationary distribution of the chain ``−M`` by a linear solve; when
    that is not unique or not ≥ 0 (a chain with closed classes), a linear
    program maximises ``Σ_j (1 + D_j / Σ D) s_j`` under the same constraints.
    """
    m = M.shape[0]
    scale = float(np.abs(M).max(initial=0.0))
    if scale == 0.0:
        return np.ones(m)
    A = np.vstack([M.T / scale, np.ones((1, m))])
    rhs = np.zeros(m + 1)
    rhs[m] = 1.0
    s, _, rank, _ = np.linalg.lstsq(A, rhs, rcond=None)
    if rank < m or s.min() < -1e-12 * s.max():
        from scipy.optimize import linprog

        weights = 1.0 + D / max(float(D.sum()), np.finfo(float).tiny)
        fit = linprog(-weights, A_eq=M.T / scale, b_eq=np.zeros(m), bounds=(0.0, 1.0),
                      method="highs")
        s = fit.x if fit.status == 0 else np.zeros(m)
    s = np.maximum(s, 0.0)
    top = s.max()
    return s / top if top > 0 else s


def intercept_step(sums, alpha_sum, loss):
    """The change of a free intercept that a Newton step on ``P(w, b)`` in ``b`` makes.

    At a fixed ``w`` the primal's derivative in ``b`` is ``Σ c_i ℓ'(z_i)``,
    which is ``−Σ α_i`` once the dual values match the margins; its second
    derivative is the curvature in ``sums``.  So ``Δb = Σ α_i / curvature``,
    for classification clipped to ``MAX_INTERCEPT_STEP`` and with the
    curvature floored at 0.25% of ``Σ c_i`` (it is 0 at ``α = 0``).  For the
    Poisson loss the step is taken on the log link, ``Δb = log(1 + Σ α_i /
    Σ c_i μ_i)``: exact when the dual values match the margins (then
    ``Σ c_i e^{z_i + Δb} = Σ c_i y_i``), and never the overshoot of a
    Newton step on an exponential.

    Parameters
    ----------
    sums : ndarray of shape (6, m)
        :func:`daskelastic.losses.intercept_sums` over all rows (for the
        softmax loss :func:`~daskelastic.losses.softmax_intercept_sums`, of
        shape ``(m + 3, m)``: the curvature and the weights are the last two
        rows of either; the softmax's steps are centred).
    alpha_sum : ndarray of shape (m,)
        ``Σ α_i`` of the committed dual values now.
    loss : int
        The loss code (``daskelastic.losses.LOSSES``).  The squared
        loss's (Ridge's) Newton step is exact, and not clipped.

    Returns
    -------
    ndarray of shape (m,)
        ``Δb``.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.losses import LOSSES
    >>> from daskelastic.objective import intercept_step
    >>> sums = np.zeros((6, 1)); sums[4] = sums[5] = 10.0
    >>> intercept_step(sums, np.array([2.5]), LOSSES["squared"])
    array([0.25])
    """
    from .losses import POISSON, SOFTMAX, SQUARED

    curvature, weight = sums[-2], sums[-1]
    if loss == SQUARED:
        return np.where(curvature > 0, alpha_sum / np.where(curvature > 0, curvature, 1.0), 0.0)
    tiny = np.finfo(float).tiny
    if loss == POISSON:
        # Σ c μ + Σ α = Σ c y > 0 (checked by the estimator): the log's argument
        return np.log(np.maximum(curvature + alpha_sum, tiny) / np.maximum(curvature, tiny))
    floor = 0.01 * 0.25 * weight   # (¼: the logistic loss's largest ℓ'')
    step = alpha_sum / np.maximum(curvature, np.maximum(floor, tiny))
    step = np.clip(step, -MAX_INTERCEPT_STEP, MAX_INTERCEPT_STEP)
    if loss == SOFTMAX:
        # the softmax is the same for intercepts shifted alike: keep their mean at 0
        step = step - step.mean()
    return step


def primal_objective(loss, X, Y, sample_weight, w, lam, intercept_scaling=0.0,
                     free_intercept=False):
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
    free_intercept : bool
        Leave ``w[d]`` out of the penalty (an unpenalised intercept).
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
    elif loss == "poisson":
        L = np.exp(Z) - Y * Z + np.where(Y > 0, Y * np.log(np.where(Y > 0, Y, 1.0)), 0.0) - Y
    elif loss == "softmax":   # one column per row: log Σ exp(z) − z_y
        from scipy.special import logsumexp
        L = (logsumexp(Z, axis=1) - np.sum(np.where(Y > 0, Z, 0.0), axis=1))[:, None]
    else:
        raise ValueError(f"unknown loss {loss!r}")
    penalised = w[:d] if free_intercept else w
    return float(np.sum(sample_weight[:, None] * L) / n
                 + 0.5 * lam * np.sum(penalised * penalised))
