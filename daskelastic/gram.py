"""The Gram solver of the squared loss: one pass over the rows, then coordinate descent.

For the squared loss the weighted Gram matrix ``G = Σ c_i x_i x_iᵀ``, the
correlations ``q = Σ c_i x_i y_i`` and ``Σ c_i y_i²`` determine the objective
and its duality gap for every ``w``.  With few columns they are cheap to form
and small to move: each row block contributes its sums (``d × d`` numbers,
once), and coordinate descent then runs on ``d × d`` numbers with no further
pass over the data.  Spark MLlib solves small linear regressions the same way
(its ``"normal"`` solver, ``WeightedLeastSquares``, for up to 4,096 features),
and scikit-learn's ``Lasso(precompute=True)`` runs the same coordinate
descent on the Gram matrix (Friedman, Hastie and Tibshirani, "Regularization
paths for generalized linear models via coordinate descent", J. Stat. Softw.
2010, §2.2, "covariance updates").

The duality gap is scikit-learn's for the elastic net (the Lasso of the data
augmented with ``√(nβ) I``, its dual point the rescaled residual) and, where
an L2 part exists, the smaller of it and the gap of the unscaled residual in
the elastic net's smooth dual; both are valid certificates, computed from the
same sums.
"""

import functools
import operator
import time
from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp

__all__ = ["GramSums", "block_sums", "duality_gap", "gram_sums", "solve", "solve_ridge"]


@dataclass
class GramSums:
    """Weighted sums of a table's rows: what the squared loss needs of the data.

    Parameters
    ----------
    xx : ndarray of shape (d, d)
        ``Σ c_i x_i x_iᵀ``.
    xy : ndarray of shape (d, m)
        ``Σ c_i x_i y_iᵀ``, one column per target.
    yy : ndarray of shape (m,)
        ``Σ c_i y_i²`` per target.
    x : ndarray of shape (d,)
        ``Σ c_i x_i``.
    y : ndarray of shape (m,)
        ``Σ c_i y_i``.
    weight : float
        ``Σ c_i``.
    rows : int
        The rows summed.
    """

    xx: np.ndarray
    xy: np.ndarray
    yy: np.ndarray
    x: np.ndarray
    y: np.ndarray
    weight: float
    rows: int

    def __add__(self, other):
        return GramSums(self.xx + other.xx, self.xy + other.xy, self.yy + other.yy,
                        self.x + other.x, self.y + other.y, self.weight + other.weight,
                        self.rows + other.rows)

    def centred(self):
        """The sums of the rows less their weighted means (``x − μ``, ``y − ȳ``).

        Returns
        -------
        sums : daskelastic.gram.GramSums
            The centred sums (their ``x`` and ``y`` are zero).
        x_mean : ndarray of shape (d,)
            ``μ``.
        y_mean : ndarray of shape (m,)
            ``ȳ``.
        """
        total = self.weight if self.weight > 0 else 1.0
        mu, ybar = self.x / total, self.y / total
        sums = GramSums(self.xx - self.weight * np.outer(mu, mu),
                        self.xy - self.weight * np.outer(mu, ybar),
                        self.yy - self.weight * ybar ** 2,
                        np.zeros_like(self.x), np.zeros_like(self.y), self.weight, self.rows)
        return sums, mu, ybar


    def with_constant(self, value):
        """The sums with a last column of the constant ``value`` appended to the rows.

        A penalised intercept is the coefficient of that column.

        Parameters
        ----------
        value : float
            The constant (``intercept_scaling``).

        Returns
        -------
        daskelastic.gram.GramSums
            The sums of ``d + 1`` columns.
        """
        d = self.x.shape[0]
        xx = np.empty((d + 1, d + 1))
        xx[:d, :d] = self.xx
        xx[:d, d] = xx[d, :d] = value * self.x
        xx[d, d] = value * value * self.weight
        return GramSums(xx, np.vstack([self.xy, value * self.y[None, :]]), self.yy,
                        np.append(self.x, value * self.weight), self.y, self.weight,
                        self.rows)


def block_sums(X, Y, sample_weight=None, y_offset=None):
    """The :class:`~daskelastic.gram.GramSums` of one block of rows.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, d)
        The rows (any float dtype; the sums are float64).
    Y : ndarray of shape (n,) or (n, m)
        Their targets.
    sample_weight : ndarray of shape (n,), optional
        The weights ``c_i`` (1 by default).
    y_offset : ndarray of shape (m,), optional
        Subtracted from the targets first.

    Returns
    -------
    daskelastic.gram.GramSums
        The block's sums.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.gram import block_sums
    >>> sums = block_sums(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1.0, 0.0]))
    >>> sums.xx.tolist(), sums.xy.ravel().tolist(), sums.weight
    ([[10.0, 14.0], [14.0, 20.0]], [1.0, 2.0], 2.0)
    """
    n = X.shape[0]
    Y = np.asarray(Y, dtype=np.float64).reshape(n, -1)
    if y_offset is not None:
        Y = Y - y_offset
    c = np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float64)
        Xc = sp.diags(c) @ X
        xx = np.asarray((X.T @ Xc).todense())
        x = np.asarray(Xc.sum(axis=0)).ravel()
        xy = np.asarray(Xc.T @ Y)
    else:
        X = np.asarray(X, dtype=np.float64)
        # (unit weights, the usual case, spare a copy of X)
        Xc = X if sample_weight is None or np.all(c == 1.0) else X * c[:, None]
        xx = Xc.T @ X
        x = Xc.sum(axis=0)
        xy = Xc.T @ Y
    # (symmetric to the last bit: coordinate descent reads its rows as columns)
    xx = (xx + xx.T) / 2
    return GramSums(xx, xy, c @ (Y * Y), x, c @ Y, float(c.sum()), n)


def gram_sums(X, Y, sample_weight=None, y_offset=None, client=None):
    """The :class:`~daskelastic.gram.GramSums` of a table, here or block by block on Dask.

    Parameters
    ----------
    X : ndarray, sparse matrix or dask array of shape (n, d)
        The rows; a dask array in one chunk of columns.
    Y : ndarray or dask array of shape (n,) or (n, m)
        The targets, cut into the same row blocks as ``X``.
    sample_weight : ndarray or dask array of shape (n,), optional
        The weights ``c_i``.
    y_offset : ndarray of shape (m,), optional
        Subtracted from the targets first.
    client : distributed.Client, optional
        Where a dask array's blocks are summed (None: dask's default
        scheduler).  A worker lost meanwhile costs its blocks' recomputation
        (Dask reruns lost tasks from their graph), not the fit.

    Returns
    -------
    daskelastic.gram.GramSums
        The sums over every row.

    Examples
    --------
    >>> import dask.array as da
    >>> import numpy as np
    >>> from daskelastic.gram import gram_sums
    >>> X = np.arange(12.0).reshape(6, 2)
    >>> y = np.arange(6.0)
    >>> here = gram_sums(X, y)
    >>> blocks = gram_sums(da.from_array(X, chunks=(2, 2)), da.from_array(y, chunks=2))
    >>> bool(np.allclose(here.xx, blocks.xx) and np.allclose(here.xy, blocks.xy))
    True
    """
    import dask

    if not dask.is_dask_collection(X):
        return block_sums(X, Y, sample_weight, y_offset)

    xs = X.to_delayed().ravel()
    ys = Y.to_delayed().ravel()
    ws = [None] * len(xs) if sample_weight is None else sample_weight.to_delayed().ravel()
    if not len(xs) == len(ys) == len(ws):
        raise ValueError("X, y and sample_weight must be cut into the same row blocks")
    parts = [dask.delayed(block_sums, pure=True)(x, y, w, y_offset)
             for x, y, w in zip(xs, ys, ws, strict=True)]
    # a tree of sums: each d × d matrix travels once, none waits for all
    while len(parts) > 1:
        parts = [dask.delayed(_add, pure=True)(parts[i:i + 8])
                 for i in range(0, len(parts), 8)]
    (total,) = dask.compute(parts[0], scheduler=client)
    return total


def _add(parts):
    return functools.reduce(operator.add, parts)


#: Passes between two Anderson extrapolations (Bertrand and Massias's ``K``).
ANDERSON_K = 5


@numba.njit(cache=True)
def _cd_epoch(G, q, w, H, l1, l2):
    """One cyclic pass of coordinate descent on ``½wᵀGw − qᵀw + l1‖w‖₁ + l2/2‖w‖²``.

    ``H = Gw`` is kept up to date; returns the largest coordinate change.
    """
    d = w.shape[0]
    largest = 0.0
    for j in range(d):
        diag = G[j, j] + l2
        old = w[j]
        if diag <= 0.0:       # a column of zeros and no L2 part: w_j = 0
            new = 0.0
        else:
            z = q[j] - H[j] + G[j, j] * old
            shrunk = abs(z) - l1
            new = 0.0 if shrunk <= 0.0 else np.copysign(shrunk, z) / diag
        delta = new - old
        if delta != 0.0:
            for k in range(d):
                H[k] += delta * G[j, k]
            w[j] = new
            if abs(delta) > largest:
                largest = abs(delta)
    return largest


def _cd_epoch_reference(G, q, w, H, l1, l2):
    """The plain NumPy twin of :func:`_cd_epoch` (the tests compare them)."""
    largest = 0.0
    for j in range(w.shape[0]):
        diag = G[j, j] + l2
        z = q[j] - H[j] + G[j, j] * w[j]
        new = 0.0 if diag <= 0 else np.sign(z) * max(abs(z) - l1, 0.0) / diag
        delta = new - w[j]
        H += delta * G[j]
        w[j] = new
        largest = max(largest, abs(delta))
    return largest


def duality_gap(G, q, yy, w, H, l1, l2):
    """``(P, D)`` of ``P(w) = ½‖y − Xw‖² + l1‖w‖₁ + l2/2 ‖w‖²`` from the sums.

    ``D`` is the better of two dual points built from the residual ``R``:
    scikit-learn's rescaled ``R`` of the Lasso of the augmented data (valid
    for ``l1 > 0``) and, for ``l2 > 0``, ``R`` itself in the elastic net's
    smooth dual ``θᵀy − ½‖θ‖² − Σ_j (|x_jᵀθ| − l1)₊² / (2 l2)``.

    Parameters
    ----------
    G, q, yy : ndarray
        The (centred) sums ``Σ xxᵀ``, ``Σ xy`` and ``Σ y²`` of one target.
    w, H : ndarray of shape (d,)
        The coefficients and ``Gw``.
    l1, l2 : float
        The weights of ``‖w‖₁`` and ``½‖w‖²``.

    Returns
    -------
    primal, dual : float
        ``P(w)`` and a lower bound ``D ≤ P*``.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.gram import duality_gap
    >>> G, q = np.array([[2.0]]), np.array([2.0])      # one column x, x·y = 2
    >>> w = np.array([0.5])                              # the optimum of l1 = 1
    >>> p, d = duality_gap(G, q, 4.0, w, G @ w, l1=1.0, l2=0.0)
    >>> bool(abs(p - d) < 1e-12)
    True
    """
    xr = q - H                               # Xᵀ R
    wq = w @ q
    rr = max(yy - 2.0 * wq + w @ H, 0.0)     # ‖R‖²
    ry = yy - wq                             # Rᵀ y
    ww = w @ w
    primal = 0.5 * rr + l1 * np.abs(w).sum() + 0.5 * l2 * ww
    duals = []
    if l1 > 0:
        # the Lasso of [X; √l2 I]: its residual [R; −√l2 w], rescaled into the
        # dual's feasible set |Xᵀθ − l2 w|∞ ≤ l1 (scikit-learn's _cd_fast)
        xa = xr - l2 * w
        norm = np.abs(xa).max() if xa.size else 0.0
        scale = min(1.0, l1 / norm) if norm > 0 else 1.0
        duals.append(scale * ry - 0.5 * scale ** 2 * (rr + l2 * ww))
    if l2 > 0:
        excess = np.maximum(np.abs(xr) - l1, 0.0)
        duals.append(ry - 0.5 * rr - (excess @ excess) / (2.0 * l2))
    return primal, max(duals) if duals else primal


def solve(sums, l1, l2, *, tol, max_iter, w_start=None, anderson=ANDERSON_K, epoch=_cd_epoch,
          clock=None, start=None):
    """Coordinate descent on the sums, target by target, to a relative duality gap.

    Minimises ``1/(2W) Σ c_i (y_i − x_i·w)² + l1‖w‖₁ + l2/2 ‖w‖²`` for each
    target (``W = Σ c_i``), from the (centred, where the intercept is free)
    sums.

    Parameters
    ----------
    sums : daskelastic.gram.GramSums
        The data's sums.
    l1, l2 : float
        The penalty weights, as in scikit-learn's ElasticNet (``alpha·l1_ratio``
        and ``alpha·(1 − l1_ratio)``).
    tol : float
        Stop when ``(P − D) / P ≤ tol``, summed over the targets.
    max_iter : int
        At most this many passes over the coordinates.
    w_start : ndarray of shape (d, m), optional
        Where to start (zeros by default).
    anderson : int, optional
        Passes between Anderson extrapolations (0: none).
    epoch : callable, optional
        One pass (the numba kernel; its NumPy twin in the tests).
    clock : callable, optional
        Seconds for the history (``time.perf_counter`` by default).
    start : float, optional
        The history's time origin on ``clock`` (by default, this call).

    Returns
    -------
    w : ndarray of shape (d, m)
        The coefficients.
    n_iter : int
        Passes run.
    history : list of dict
        One entry per pass: ``round``, ``time``, ``primal``, ``dual``, ``gap``
        and ``duality_gap`` (of the problem divided by ``W``).

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.gram import block_sums, solve
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> y = X @ np.array([2.0, 0.0, -1.0])
    >>> w, n_iter, history = solve(block_sums(X, y), l1=0.1, l2=0.0, tol=1e-10,
    ...                            max_iter=100)
    >>> np.round(w.ravel(), 1).tolist(), bool(history[-1]["duality_gap"] <= 1e-10)
    ([1.9, 0.0, -0.9], True)
    """
    clock = clock or time.perf_counter
    start = clock() if start is None else start
    d, m = sums.xy.shape
    total = sums.weight if sums.weight > 0 else 1.0
    # the problem times W, as coordinate descent sees it
    a, b = l1 * total, l2 * total
    G = np.ascontiguousarray(sums.xx)
    w = np.zeros((d, m)) if w_start is None else np.array(w_start, dtype=np.float64)
    cols = [np.ascontiguousarray(w[:, t]) for t in range(m)]
    H = [G @ c for c in cols]
    q = [np.ascontiguousarray(sums.xy[:, t]) for t in range(m)]
    iterates = [[] for _ in range(m)]
    history = []
    n_iter = 0
    while True:
        primal = dual = 0.0
        for t in range(m):
            p, dl = duality_gap(G, q[t], sums.yy[t], cols[t], H[t], a, b)
            primal, dual = primal + p, dual + dl
        gap = max(primal - dual, 0.0)
        relative = gap / primal if primal > 0 else 0.0
        history.append({"round": n_iter, "time": clock() - start,
                        "primal": primal / total, "dual": dual / total,
                        "gap": gap / total, "duality_gap": relative})
        if relative <= tol or n_iter >= max_iter:
            break
        for t in range(m):
            # (extrapolated before a pass, never after: what is returned comes
            # out of a pass, with its exact zeros)
            if anderson and len(iterates[t]) == anderson + 1:
                _extrapolate(G, q[t], cols[t], H[t], a, b, iterates[t])
                iterates[t].clear()
            epoch(G, q[t], cols[t], H[t], a, b)
            if anderson:
                iterates[t].append(cols[t].copy())
        n_iter += 1
    return np.stack(cols, axis=1), n_iter, history


def solve_ridge(sums, l2, *, clock=None, start=None):
    """Ridge's exact solution from the sums: ``(G + l2 W I) w = q`` by Cholesky.

    Minimises ``1/(2W) Σ c_i (y_i − x_i·w)² + l2/2 ‖w‖²`` for each target
    (``W = Σ c_i``), as scikit-learn's Ridge ``solver="cholesky"`` does: a
    direct solve whose cost does not grow as ``l2`` shrinks, where the
    iterative solvers' rounds do.  One step of iterative refinement follows
    (the residual of the system, solved again), which recovers the digits a
    system of large condition number loses.  A singular system (``l2 = 0``
    with collinear or too few rows) takes the least-squares solution of least
    norm, as scikit-learn's falls back to.

    Parameters
    ----------
    sums : daskelastic.gram.GramSums
        The data's sums (centred, where the intercept is free).
    l2 : float
        The weight of ``½‖w‖²`` (``alpha / W`` for scikit-learn's Ridge); 0
        is ordinary least squares.
    clock : callable, optional
        Seconds for the history (``time.perf_counter`` by default).
    start : float, optional
        The history's time origin on ``clock`` (by default, this call).

    Returns
    -------
    w : ndarray of shape (d, m)
        The coefficients.
    history : list of dict
        One entry, the solve's: ``round`` (1, the solve's count), ``time``, ``primal``,
        ``dual``, ``gap`` and ``duality_gap`` (of the problem divided by
        ``W``).  For ``l2 > 0`` the gap is :func:`duality_gap`'s; for
        ``l2 = 0``, where the dual has no interior, it is the suboptimality
        itself, ``½ gᵀ G⁺ g`` with ``g = Gw − q`` (exact for a quadratic).

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.gram import block_sums, solve_ridge
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> y = X @ np.array([2.0, 0.0, -1.0]) + 0.1
    >>> w, history = solve_ridge(block_sums(X, y).centred()[0], 0.0)
    >>> np.round(w.ravel(), 6).tolist() == [2.0, 0.0, -1.0], history[0]["duality_gap"] < 1e-12
    (True, True)
    """
    import scipy.linalg

    clock = clock or time.perf_counter
    start = clock() if start is None else start
    d, m = sums.xy.shape
    total = sums.weight if sums.weight > 0 else 1.0
    b = l2 * total
    G = np.ascontiguousarray(sums.xx)
    A = G + b * np.eye(d)
    try:
        factor = scipy.linalg.cho_factor(A, check_finite=False)
        w = scipy.linalg.cho_solve(factor, sums.xy, check_finite=False)
        w = w + scipy.linalg.cho_solve(factor, sums.xy - A @ w, check_finite=False)
    except np.linalg.LinAlgError:   # (not positive definite: a singular G, l2 = 0)
        w = scipy.linalg.lstsq(A, sums.xy, check_finite=False)[0]
    w = np.asarray(w, dtype=np.float64).reshape(d, m)
    primal = dual = 0.0
    if b == 0:
        # the pseudo-inverse of G, from its eigenvalues above rounding
        values, vectors = np.linalg.eigh(G) if d else (np.zeros(0), np.zeros((0, 0)))
        keep = values > max(values.max(initial=0.0), 0.0) * d * np.finfo(float).eps
    for t in range(m):
        H = G @ w[:, t]
        p, dl = duality_gap(G, sums.xy[:, t], sums.yy[t], w[:, t], H, 0.0, b)
        if b == 0:
            g = vectors[:, keep].T @ (H - sums.xy[:, t])
            dl = p - 0.5 * float(g @ (g / values[keep]))
        primal, dual = primal + p, dual + dl
    gap = max(primal - dual, 0.0)
    history = [{"round": 1, "time": clock() - start, "primal": primal / total,
                "dual": dual / total, "gap": gap / total,
                "duality_gap": gap / primal if primal > 0 else 0.0}]
    return w, history


def _primal(G, q, w, H, l1, l2):
    """``P(w)`` less its constant ``½ Σ y²``."""
    return -(w @ q) + 0.5 * (w @ H) + l1 * np.abs(w).sum() + 0.5 * l2 * (w @ w)


def _extrapolate(G, q, w, H, l1, l2, iterates):
    """Anderson extrapolation of the last passes' iterates, kept where it lowers ``P``.

    The iterates of cyclic coordinate descent converge along a few directions
    at a linear rate that ill-conditioned columns make slow; the affine
    combination of the last ``K + 1`` iterates whose differences cancel best
    jumps ahead along them (Bertrand and Massias, "Anderson acceleration of
    coordinate descent", AISTATS 2021).  The next pass restores exact zeros.
    """
    W = np.asarray(iterates)
    U = np.diff(W, axis=0)
    M = U @ U.T
    scale = np.trace(M)
    if not scale > 0:
        return
    try:
        z = np.linalg.solve(M / scale + 1e-12 * np.eye(len(M)), np.ones(len(M)))
    except np.linalg.LinAlgError:
        return
    if not abs(z.sum()) > 0:
        return
    w_new = (z / z.sum()) @ W[1:]
    H_new = G @ w_new
    if np.all(np.isfinite(w_new)) and \
            _primal(G, q, w_new, H_new, l1, l2) < _primal(G, q, w, H, l1, l2):
        w[:] = w_new
        H[:] = H_new
