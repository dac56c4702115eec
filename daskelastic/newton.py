"""The Newton solver of narrow problems: one pass over the rows per step, certified.

For a smooth loss (logistic, softmax, Poisson) or the squared hinge (its
generalised Hessian, Mangasarian 2002) with an L2 penalty, the gradient and
Hessian of ``F(w) = Σ c_i ℓ_i(x̃_i·w) + (λn/2)‖w‖²`` are sums over the rows.
With few columns they are cheap to form and small to move: every row block
contributes its ``q × q`` sums (``q = d + 1`` with an intercept; a
``qK × qK`` block matrix for the softmax loss's ``K`` classes), the driver
adds them up, solves the Newton system by Cholesky and line-searches.  A
handful of passes reach rounding accuracy: what liblinear's primal solver and
scikit-learn's ``newton-cholesky`` do in one process, and Spark MLlib's IRLS
over a cluster.

Each pass also certifies its point: the dual values ``α_i = −c_i ℓ'(z_i)``
that the point's margins give (:func:`daskelastic.losses.dual_from_margins`,
the map a warm start uses) are a dual point whose duality gap bounds the
primal suboptimality, with the same terms (per-row Fenchel–Young sums, the
distance ``‖w − w(α)‖``, and for a free intercept the balancing of
:func:`daskelastic.objective.free_intercept_gap`) as the CoCoA+ rounds'.
At the optimum ``w(α) = w`` and the gap is zero; near it, it falls as fast
as Newton converges.

A pass also returns the loss along the step at a few step lengths (a cheap
matrix-vector product), so that a step the line search shortens costs one
pass more, not one per trial.
"""

from __future__ import annotations

import functools
import math
import operator
import time
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.sparse as sp
from numba import njit

from .losses import (
    LOGISTIC,
    POISSON,
    SOFTMAX,
    SQUARED_HINGE,
    dual_from_margins,
    dual_value,
    gap_term,
    intercept_sums,
    primal_loss,
    softmax_dual_value,
    softmax_intercept_sums,
    softmax_loss,
)
from .objective import Objective, free_intercept_gap, softmax_free_intercept_gap

__all__ = ["NEWTON_LOSSES", "NewtonSums", "block_sums", "certificate", "newton_sums",
           "placed_block", "solve"]

#: The loss codes the Newton solver takes (the hinge has no curvature to use).
NEWTON_LOSSES = (LOGISTIC, SQUARED_HINGE, POISSON, SOFTMAX)

#: Step lengths whose loss each pass returns with a step (backtracking by halves).
TRIAL_STEPS = (0.5, 0.25, 0.125, 0.0625, 0.03125, 2.0 ** -7, 2.0 ** -10)

#: The Newton decrement's relative estimate at which a step that lowers
#: nothing means rounding's floor, not a failed search.
FLOOR = 1e-12

#: The Newton decrement's relative estimate below which a step asks for no
#: shorter steps' losses (Newton's full step is then accepted, near the optimum).
LOCAL = 1e-3

#: Armijo's sufficient-decrease constant (Nocedal and Wright, *Numerical
#: Optimization*, §3.1).
ARMIJO = 1e-4


@dataclass
class NewtonSums:
    """What one pass sums over a block of rows, at one point ``w``.

    Parameters
    ----------
    loss : float
        ``Σ c_i ℓ_i(z_i)``, ``z_i = x̃_i·w`` (the intercept feature included).
    fenchel_young : float
        ``Σ c_i ℓ_i(z_i) + (c_i ℓ_i)*(−α_i) + α_i z_i``, each term ≥ 0.
    u : ndarray of shape (d + 1, m)
        ``Σ α_i x̃_i``: minus the loss's gradient.
    hessian : ndarray of shape (m, q, q), or (qK, qK) for the softmax loss
        ``Σ c_i ℓ''_i x̃_i x̃_iᵀ`` (``q`` = d + 1 with an intercept feature, else d).
    trials : ndarray
        ``Σ c_i ℓ_i`` at the step lengths asked for, along the step asked for.
    intercept : tuple or None
        A free intercept's sums for its certificate: those of
        :func:`daskelastic.losses.intercept_sums` and ``Σ_{α_i > 0} α_i x_i``
        (for the softmax loss, :func:`~daskelastic.losses.softmax_intercept_sums`
        and ``Σ x_i α_iᵀ`` per class).
    rows : int
        Rows summed.
    """

    loss: float
    fenchel_young: float
    u: np.ndarray
    hessian: np.ndarray
    trials: np.ndarray
    intercept: tuple | None
    rows: int

    def __add__(self, other):
        icpt = None if self.intercept is None else tuple(
            a + b for a, b in zip(self.intercept, other.intercept, strict=True))
        return NewtonSums(self.loss + other.loss, self.fenchel_young + other.fenchel_young,
                          self.u + other.u, self.hessian + other.hessian,
                          self.trials + other.trials, icpt, self.rows + other.rows)


@njit(cache=True, nogil=True)
def _pointwise(loss, Y, c, Z, A, curvature):
    """``(Σ c ℓ, Σ Fenchel–Young)`` of the margins ``Z`` and their dual values ``A``.

    Fills ``curvature`` with ``c ℓ''(z)`` (the squared hinge's generalised
    second derivative; untouched for the softmax loss, whose curvature is a
    matrix per row, formed from ``A`` by the caller).
    """
    loss_sum = 0.0
    fy = 0.0
    n, m = Z.shape
    for i in range(n):
        ci = c[i]
        if loss == SOFTMAX:
            if ci > 0.0:
                li = ci * softmax_loss(Y[i], Z[i])
                az = 0.0
                for k in range(m):
                    az += A[i, k] * Z[i, k]
                loss_sum += li
                fy += li - softmax_dual_value(Y[i], A[i], ci) + az
            continue
        for k in range(m):
            if ci <= 0.0:
                curvature[i, k] = 0.0
                continue
            z = Z[i, k]
            loss_sum += ci * primal_loss(loss, Y[i, k], z)
            fy += gap_term(loss, Y[i, k], A[i, k], ci, z)
            a = abs(A[i, k])
            if loss == LOGISTIC:
                curvature[i, k] = a * max(1.0 - a / ci, 0.0)
            elif loss == SQUARED_HINGE:
                curvature[i, k] = 2.0 * ci if Y[i, k] * z < 1.0 else 0.0
            elif loss == POISSON:
                curvature[i, k] = ci * math.exp(min(z, 700.0))
            else:
                curvature[i, k] = ci
    return loss_sum, fy


@njit(cache=True, nogil=True)
def _trial_losses(loss, Y, c, Z, dZ, steps, out):
    """Add ``Σ c ℓ(Z + t dZ)`` for each ``t`` of ``steps`` to ``out``."""
    n, m = Z.shape
    row = np.empty(m)
    for i in range(n):
        ci = c[i]
        if ci <= 0.0:
            continue
        for j in range(steps.shape[0]):
            t = steps[j]
            if loss == SOFTMAX:
                for k in range(m):
                    row[k] = Z[i, k] + t * dZ[i, k]
                out[j] += ci * softmax_loss(Y[i], row)
            else:
                for k in range(m):
                    out[j] += ci * primal_loss(loss, Y[i, k], Z[i, k] + t * dZ[i, k])


# (the kernels' names the tests compare with their NumPy twins)
KERNELS = {"pointwise": _pointwise, "trial_losses": _trial_losses}

# dual_value is what gap_term reads: named so that the import is not unused
_ = dual_value


#: A sparse block with at least this share of non-zeros is made dense when it
#: is placed (in at most 20× the memory of its values): its Hessian's product
#: is then BLAS's, several times faster than a sparse product's conversions.
DENSE_SHARE = 0.1


def placed_block(X):
    """``X`` as a pass reads it fastest: dense where sparse ``X`` is narrow and not too sparse.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, d)
        A block's rows.

    Returns
    -------
    ndarray or sparse matrix
        The same rows.
    """
    if sp.issparse(X) and X.nnz >= DENSE_SHARE * X.shape[0] * X.shape[1]:
        return X.toarray()
    return X


def _margins(X, w, s):
    Z = np.asarray(X @ w[:-1], dtype=np.float64)
    if s:
        Z = Z + s * w[-1]
    return np.ascontiguousarray(Z)


def _weighted_gram(X, h, s):
    """``Σ h_i x̃_i x̃_iᵀ`` with ``x̃_i = (x_i, s)`` (just ``x_i`` when ``s`` is 0)."""
    if sp.issparse(X):
        Xh = sp.csr_matrix(X.multiply(h[:, None]))
        G = np.asarray((Xh.T @ X).toarray(), dtype=np.float64)
        v = np.asarray(Xh.sum(axis=0), dtype=np.float64).ravel()
    elif h.min(initial=0.0) >= 0.0:
        # Σ h xxᵀ = SᵀS, S = √h·X: BLAS's symmetric rank-k update does half the
        # work of a general product (C-ordered S is F-ordered Sᵀ: no copy)
        S = np.ascontiguousarray(X * np.sqrt(h)[:, None], dtype=np.float64)
        upper = scipy.linalg.blas.dsyrk(1.0, S.T, trans=0, lower=0)
        G = np.triu(upper) + np.triu(upper, 1).T
        v = h @ X
    else:
        Xh = X * h[:, None]
        G = Xh.T @ X
        v = Xh.sum(axis=0)
    if not s:
        return G
    d = G.shape[0]
    out = np.empty((d + 1, d + 1))
    out[:d, :d] = G
    out[:d, d] = out[d, :d] = s * v
    out[d, d] = s * s * h.sum()
    return out


def block_sums(X, Y, c, *, loss, w, intercept_scaling, free=False, step=None,
               trial_steps=(), pointwise=None):
    """The :class:`~daskelastic.newton.NewtonSums` of one block of rows at ``w + step``.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, d)
        The rows.
    Y : ndarray of shape (n, m)
        Encoded targets (±1 labels; for the softmax loss +1 at the row's class).
    c : ndarray of shape (n,)
        Sample weights.
    loss : int
        Loss code, one of ``NEWTON_LOSSES``.
    w : ndarray of shape (d + 1, m)
        The point (the intercept coefficient last).
    intercept_scaling : float
        The intercept feature's value (0: no intercept).
    free : bool, default=False
        Also sum what a free intercept's certificate needs.
    step : ndarray of shape (d + 1, m), optional
        The sums are those of ``w + step``; ``trial_steps`` are along it.
    trial_steps : sequence of float, optional
        Step lengths ``t`` whose loss sums ``Σ c ℓ(w + t·step)`` are returned.
    pointwise : callable, optional
        The pointwise kernel (the numba one; its NumPy twin in the tests).

    Returns
    -------
    daskelastic.newton.NewtonSums
        The block's sums.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.losses import LOGISTIC
    >>> from daskelastic.newton import block_sums
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> sums = block_sums(X, np.array([[1.0], [-1.0]]), np.ones(2), loss=LOGISTIC,
    ...                   w=np.zeros((3, 1)), intercept_scaling=1.0)
    >>> round(sums.loss, 4), sums.u.ravel().tolist(), sums.hessian.shape
    (1.3863, [0.5, -0.5, 0.0], (1, 3, 3))
    """
    pointwise = pointwise or _pointwise
    s = float(intercept_scaling)
    c = np.ascontiguousarray(c, dtype=np.float64)
    Y = np.ascontiguousarray(Y, dtype=np.float64)
    n, m = Y.shape
    Z = _margins(X, w, s)
    trials = np.zeros(len(trial_steps))
    if step is not None:
        dZ = _margins(X, step, s)
        if len(trial_steps):
            _trial_losses(loss, Y, c, Z, dZ, np.asarray(trial_steps, dtype=np.float64),
                          trials)
        Z = Z + dZ
    A = dual_from_margins(loss, Y, c, Z)
    curvature = np.zeros((n, m))
    loss_sum, fy = pointwise(loss, Y, c, Z, A, curvature)
    d = X.shape[1]
    u = np.zeros((d + 1, m))
    u[:d] = np.asarray(X.T @ A, dtype=np.float64)
    u[d] = s * A.sum(axis=0)
    if loss == SOFTMAX:
        # row i's block (k, k′): c_i (p_ik δ_kk′ − p_ik p_ik′), p = e_y − α/c
        with np.errstate(divide="ignore", invalid="ignore"):
            P = np.where(c[:, None] > 0, (Y > 0) - A / c[:, None], 0.0)
        q = d + 1 if s else d
        hessian = np.zeros((m * q, m * q))
        for k in range(m):
            for j in range(k, m):
                h = c * ((P[:, k] if j == k else 0.0) - P[:, k] * P[:, j])
                block = _weighted_gram(X, h, s)
                hessian[k * q:(k + 1) * q, j * q:(j + 1) * q] = block
                if j != k:
                    hessian[j * q:(j + 1) * q, k * q:(k + 1) * q] = block.T
    else:
        hessian = np.stack([_weighted_gram(X, curvature[:, k], s) for k in range(m)])
    icpt = None
    if free:
        if loss == SOFTMAX:
            out = np.zeros((m + 3, m))
            softmax_intercept_sums(Y, c, A, out)
            labels = np.argmax(Y, axis=1)
            by_class = np.zeros((m, d, m))
            for j in range(m):
                rows = np.flatnonzero(labels == j)
                if rows.size:
                    by_class[j] = np.asarray(X[rows].T @ A[rows])
            icpt = (out, by_class)
        else:
            out = np.zeros((6, m))
            intercept_sums(loss, Y, c, A, np.empty((0, m)), out)
            icpt = (out, np.asarray(X.T @ np.maximum(A, 0.0), dtype=np.float64))
    return NewtonSums(float(loss_sum), float(fy), u, hessian, trials, icpt, n)


def _add(parts):
    return functools.reduce(operator.add, parts)


def newton_sums(blocks, *, client=None, **kwargs):
    """The :class:`~daskelastic.newton.NewtonSums` over row blocks, here or on Dask.

    Parameters
    ----------
    blocks : list of tuple
        ``(X, Y, c)`` blocks in memory, or ``dask.delayed`` objects of such
        triples (persisted: on the workers that hold them).
    client : distributed.Client, optional
        Where delayed blocks are summed (None: dask's threads).  A worker lost
        meanwhile costs its blocks' recomputation from their graph (Dask reruns
        lost tasks), not the fit; a slow worker is waited for.
    **kwargs
        Passed to :func:`~daskelastic.newton.block_sums`.

    Returns
    -------
    daskelastic.newton.NewtonSums
        The sums over every row.
    """
    import dask

    if not blocks or not dask.is_dask_collection(blocks[0]):
        return _add([block_sums(*b, **kwargs) for b in blocks])
    parts = [dask.delayed(_block_sums_of, pure=True)(b, **kwargs) for b in blocks]
    # a tree of sums: each q × q matrix travels once, none waits for all
    while len(parts) > 1:
        parts = [dask.delayed(_add, pure=True)(parts[i:i + 8])
                 for i in range(0, len(parts), 8)]
    (total,) = dask.compute(parts[0], scheduler=client)
    return total


def _block_sums_of(block, **kwargs):
    return block_sums(*block, **kwargs)


def _penalised(problem):
    """The rows of ``w`` the L2 penalty weighs: a mask of length ``d + 1``."""
    mask = np.ones(problem.n_features + 1)
    if problem.free_intercept or not problem.intercept_scaling:
        mask[-1] = 0.0
    return mask


def certificate(problem, sums, w):
    """The :class:`~daskelastic.objective.Objective` of ``w`` from its pass's sums.

    The dual point is ``α_i = −c_i ℓ'(z_i)`` at ``w``'s margins; the gap is
    ``FY/n + λ/2 ‖w − w(α)‖²`` over the penalised rows, plus, for a free
    intercept, what balancing ``α`` to ``Σ α_i = 0`` costs (as the CoCoA+
    rounds certify).  Without an L2 part (``λ = 0``) there is no such dual
    point: the gap is infinite.

    Parameters
    ----------
    problem : daskelastic.driver.Problem
        The problem.
    sums : daskelastic.newton.NewtonSums
        The pass's sums at ``w``.
    w : ndarray of shape (d + 1, m)
        The point.

    Returns
    -------
    daskelastic.objective.Objective
        Primal, dual, gap and relative gap (of the problem divided by ``n``).
    """
    n, d, lam = problem.n_samples, problem.n_features, problem.lam
    mask = _penalised(problem)[:, None]
    primal = sums.loss / n + 0.5 * lam * float(np.sum(mask * w * w))
    if lam <= 0:
        return Objective(primal, -math.inf, math.inf, math.inf)
    wa = sums.u / (lam * n)
    gap = max(sums.fenchel_young, 0.0) / n + 0.5 * lam * float(np.sum(mask * (w - wa) ** 2))
    if problem.free_intercept:
        certify = softmax_free_intercept_gap if problem.loss == SOFTMAX \
            else free_intercept_gap
        gap += certify(sums.intercept[0], sums.intercept[1], w[d], wa[:d], lam, n)
    else:
        # far from the optimum sα, s ∈ [0, 1], may be the better dual point: the
        # dual values are concave and 0 at 0, so D(sα) ≥ s·Σv/n − s²λ/2‖w(α)‖²
        # (s = 0, the rounds' cold start, gives the gap P)
        dual_sum = sums.loss - sums.fenchel_young + float(np.sum(sums.u * w))
        norm = lam * float(np.sum(mask * wa * wa))
        scale = 1.0 if norm <= 0 else min(max(dual_sum / n / norm, 0.0), 1.0)
        gap = min(gap, primal - (scale * dual_sum / n - 0.5 * scale * scale * norm))
    gap = max(gap, 0.0)
    dual = primal - gap
    return Objective(primal, dual, gap, gap / max(abs(primal), np.finfo(float).tiny))


def _system(problem, sums, w):
    """The gradient of ``F`` (shape of ``w``) and its Hessian, over the variables."""
    n, lam = problem.n_samples, problem.lam
    mask = _penalised(problem)
    q = problem.n_features + 1 if problem.intercept_scaling else problem.n_features
    grad = -sums.u + lam * n * mask[:, None] * w
    reg = lam * n * mask[:q]
    if problem.loss == SOFTMAX:
        H = sums.hessian + np.diag(np.tile(reg, problem.n_targets))
    else:
        H = sums.hessian + reg[None, :] * np.eye(q)[None]
    return grad, H, q


def _cholesky_solve(H, g):
    """``H⁻¹ g`` by Cholesky, with a growing ridge where ``H`` is (nearly) singular.

    The softmax loss with free intercepts is flat along adding one constant
    to every class's intercept, and rows a model fits perfectly have no
    curvature (no penalty): a ridge of ``1e-12`` of the diagonal's scale
    and up leaves the step a descent direction.
    """
    scale = float(np.max(np.abs(np.diag(H)), initial=0.0)) or 1.0
    ridge = 0.0
    for _ in range(12):
        try:
            factor = scipy.linalg.cho_factor(H + ridge * np.eye(H.shape[0]),
                                             check_finite=False)
            x = scipy.linalg.cho_solve(factor, g, check_finite=False)
            if np.all(np.isfinite(x)):
                return x
        except (np.linalg.LinAlgError, ValueError):
            pass
        ridge = scale * (1e-12 if ridge == 0.0 else ridge / scale * 100.0)
    return g / scale


def _direction(problem, grad, H, q):
    """The Newton step (shape of ``grad``) and the decrement ``−∇F·step`` (≥ 0)."""
    m = problem.n_targets
    step = np.zeros_like(grad)
    if problem.loss == SOFTMAX:
        flat = grad[:q].T.reshape(-1)
        step[:q] = -_cholesky_solve(H, flat).reshape(m, q).T
    else:
        for k in range(m):
            step[:q, k] = -_cholesky_solve(H[k], grad[:q, k])
    if problem.loss == SOFTMAX:
        # adding one vector to every class's column leaves the softmax unchanged:
        # steps orthogonal to it keep Σ_k b_k = 0 from a zero start (and Σ_k w_k
        # without a penalty), as scikit-learn's solution has them
        flat = slice(None) if problem.lam == 0 else slice(problem.n_features, None)
        if problem.free_intercept or problem.lam == 0:
            step[flat] -= step[flat].mean(axis=1, keepdims=True)
    decrement = -float(np.sum(grad * step))
    if not decrement > 0:          # (rounding at the optimum): the gradient itself
        step = -grad / max(float(np.abs(H).max(initial=0.0)), 1.0)
        decrement = -float(np.sum(grad * step))
    return step, max(decrement, 0.0)


def solve(evaluate, problem, *, tol, max_iter, w_start=None, callback=None, clock=None,
          start=None):
    """Damped Newton steps from ``w_start`` until the duality gap certifies ``tol``.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(w, step, trial_steps)``: the
        :class:`~daskelastic.newton.NewtonSums` over every row at ``w + step``
        (``step`` None: at ``w``), with the loss sums at ``w + t·step`` for
        ``t`` in ``trial_steps`` (one pass over the data).
    problem : daskelastic.driver.Problem
        The problem (``lam`` 0 for no penalty).
    tol : float
        Stop when the relative duality gap is at most ``tol``; or, where the
        certificate cannot get there (``λ`` 0, or a gap that stopped falling
        by 10× a step because rounding in ``w(α) = Σ α_i x_i / (λn)``
        dominates it), when the Newton decrement estimates a relative
        suboptimality below ``tol / 1000``.
    max_iter : int
        At most this many Newton steps.
    w_start : ndarray of shape (d + 1, m), optional
        Where to start (zeros by default).
    callback : callable, optional
        Called with each history entry.
    clock : callable, optional
        Seconds for the history (``time.perf_counter`` by default).
    start : float, optional
        The history's time origin on ``clock`` (by default, this call).

    Returns
    -------
    w : ndarray of shape (d + 1, m)
        The coefficients (the intercept coefficient last).
    n_iter : int
        Newton steps taken.
    converged : bool
        Whether ``tol`` was reached.
    history : list of dict
        One entry per step and one for the last point: ``round``, ``time``,
        ``primal``, ``dual``, ``gap``, ``duality_gap``, ``decrement``
        (``δ²/2`` relative to the primal, ``δ`` the Newton decrement),
        ``passes`` (over the data so far), ``step`` (the step length taken
        to reach the entry's point) and ``certified``.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.driver import Problem
    >>> from daskelastic.losses import LOGISTIC
    >>> from daskelastic.newton import block_sums, solve
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 3))
    >>> Y = np.where(X[:, :1] + rng.normal(size=(500, 1)) > 0, 1.0, -1.0)
    >>> problem = Problem(loss=LOGISTIC, lam=1e-3, n_samples=500, n_features=3,
    ...                   n_targets=1, intercept_scaling=1.0, free_intercept=True)
    >>> def evaluate(w, step, trial_steps):
    ...     return block_sums(X, Y, np.ones(500), loss=LOGISTIC, w=w, step=step,
    ...                       trial_steps=trial_steps, intercept_scaling=1.0, free=True)
    >>> w, n_iter, converged, history = solve(evaluate, problem, tol=1e-10, max_iter=50)
    >>> converged, n_iter < 10, bool(history[-1]["duality_gap"] <= 1e-10)
    (True, True, True)
    """
    clock = clock or time.perf_counter
    start = clock() if start is None else start
    n = problem.n_samples
    mask = _penalised(problem)[:, None]
    lam_n = problem.lam * n
    w = problem.zeros() if w_start is None else np.array(w_start, dtype=np.float64)
    if not problem.intercept_scaling:
        w[-1] = 0.0

    def total(sums, point):
        return sums.loss + 0.5 * lam_n * float(np.sum(mask * point * point))

    sums = evaluate(w, None, ())
    passes, n_iter, taken = 1, 0, 0.0
    history = []
    while True:
        objective = certificate(problem, sums, w)
        if not (np.isfinite(objective.primal) and np.isfinite(sums.u).all()
                and np.isfinite(sums.hessian).all()):
            raise ValueError(
                f"the objective is not finite in round {n_iter} (a Newton step; primal "
                f"{objective.primal:.3g}): values of X, y or sample_weight too large for "
                "float64 arithmetic; rescale them (X e.g. with StandardScaler)")
        grad, H, q = _system(problem, sums, w)
        step, decrement = _direction(problem, grad, H, q)
        value = total(sums, w)
        estimate = 0.5 * decrement / max(abs(value), np.finfo(float).tiny)
        certified = objective.relative_gap <= tol
        # the decrement's estimate ends a fit only where the certificate cannot:
        # no penalty, or a gap that stopped falling (rounding in w(α), a huge C)
        stalled = problem.lam == 0 or (bool(history) and objective.relative_gap
                                       > 0.1 * history[-1]["duality_gap"])
        converged = certified or (stalled and estimate <= 1e-3 * tol)
        entry = {"round": n_iter, "time": clock() - start, "duality_gap":
                 objective.relative_gap, "gap": objective.gap, "primal": objective.primal,
                 "dual": objective.dual, "decrement": estimate, "passes": passes,
                 "step": taken, "certified": bool(certified)}
        history.append(entry)
        if callback is not None:
            callback(entry)
        if converged or n_iter >= max_iter:
            break
        # the shorter steps' losses cost a pass as much as its loss does: asked
        # for far from the optimum, or after a shortened step; near it Newton's
        # full step passes, and a pass that finds it does not asks again
        trial_steps = TRIAL_STEPS if 0.0 < taken < 1.0 or estimate > LOCAL else ()
        trial = evaluate(w, step, trial_steps)
        passes += 1
        slope = -decrement
        # (a little slack for rounding: near the optimum F changes by less
        # than its last bits)
        slack = 1e-13 * abs(value)
        full = total(trial, w + step)
        if np.isfinite(full) and full <= value + ARMIJO * slope + slack:
            w, sums, taken = w + step, trial, 1.0
        else:
            if not trial_steps:
                trial = evaluate(w, step, TRIAL_STEPS)
                passes += 1
            values = [trial.trials[j] + 0.5 * lam_n * float(np.sum(mask * (w + t * step) ** 2))
                      for j, t in enumerate(TRIAL_STEPS)]
            good = [t for t, v in zip(TRIAL_STEPS, values, strict=True)
                    if np.isfinite(v) and v <= value + ARMIJO * t * slope + slack]
            if good:
                taken = good[0]
            else:
                best = int(np.nanargmin(np.where(np.isfinite(values), values, np.inf)))
                if not values[best] < value:
                    # no decrease along the step: float64's floor, where the
                    # decrement says F is within rounding of its minimum
                    converged = certified or estimate <= FLOOR
                    break
                taken = TRIAL_STEPS[best]
            w = w + taken * step
            sums = evaluate(w, None, ())
            passes += 1
        n_iter += 1
    return w, n_iter, bool(converged), history

