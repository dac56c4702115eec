"""Plain NumPy twins of the numba kernels, written for clarity, used only by tests."""

import math

import numpy as np
import scipy.sparse as sp
from scipy.special import xlogy


def random_targets(loss, rng, shape):
    """Targets a loss takes: real for the squared loss, counts for the Poisson loss
    (means about 1), ±1 labels for classification (one +1 per row for softmax)."""
    if loss == "squared":
        return rng.normal(size=shape)
    if loss == "poisson":
        return rng.poisson(1.0, size=shape).astype(np.float64)
    if loss == "softmax":     # +1 at each row's class, −1 elsewhere
        return np.where(np.arange(shape[1]) == rng.integers(shape[1], size=(shape[0], 1)),
                        1.0, -1.0)
    return np.where(rng.random(shape) < 0.5, 1.0, -1.0)


def primal_loss(loss, y, z):
    if loss == "logistic":
        return np.logaddexp(0.0, -y * z)
    if loss == "hinge":
        return np.maximum(0.0, 1.0 - y * z)
    if loss == "squared_hinge":
        return np.maximum(0.0, 1.0 - y * z) ** 2
    if loss == "poisson":     # half the Poisson deviance of the mean exp(z)
        return xlogy(y, y) - y + np.exp(z) - y * z
    return 0.5 * (z - y) ** 2


def dual_value(loss, y, a, c):
    """-(c·ℓ)*(-a), from the textbook conjugates."""
    if c == 0:
        return 0.0 if a == 0 else -np.inf
    if loss == "squared":
        return a * y - a * a / (2 * c)
    if loss == "poisson":
        # ℓ*(v) = (v + y) log(v + y) − (v + y) − y log y + y, at v = −a/c
        mu = y - a / c
        if mu < -1e-12 * (1 + y):
            return -np.inf
        mu = max(mu, 0.0)
        return float(-c * (xlogy(mu, mu) - mu - xlogy(y, y) + y))
    beta = a * y / c
    if loss == "logistic":
        if not -1e-12 <= beta <= 1 + 1e-12:
            return -np.inf
        beta = min(max(beta, 0.0), 1.0)
        return float(-c * (xlogy(beta, beta) + xlogy(1 - beta, 1 - beta)))
    if loss == "hinge":
        return a * y if -1e-12 <= beta <= 1 + 1e-12 else -np.inf
    return a * y - a * a / (4 * c) if beta >= -1e-12 else -np.inf


def coordinate_step(loss, y, a, c, z, q):
    """Maximise the one-coordinate subproblem by bisection on its derivative."""
    if c == 0:
        return 0.0
    if loss == "squared":
        return (y - z + q * a) / (q + 1 / c)
    if loss == "poisson":
        # a' = c(y − μ'); derivative in u = log μ': z + q c (μ0 − e^u) − u, decreasing
        mu0 = y - a / c
        lo, hi = min(z, math.log(mu0)) if mu0 > 0 else z - q * c * math.exp(z), \
            max(z, math.log(mu0)) if mu0 > 0 else z
        for _ in range(200):
            u = 0.5 * (lo + hi)
            g = z + q * c * (mu0 - math.exp(u)) - u
            lo, hi = (u, hi) if g > 0 else (lo, u)
        return c * (y - math.exp(0.5 * (lo + hi)))
    if loss == "logistic":
        # derivative in b = a'y/c: log((1-b)/b) - yz - q c (b - ay/c)
        lo, hi = 0.0, 1.0
        for _ in range(200):
            b = 0.5 * (lo + hi)
            if b <= 0 or b >= 1:
                break
            g = math.log((1 - b) / b) - y * z - q * c * (b - a * y / c)
            lo, hi = (b, hi) if g > 0 else (lo, b)
        return y * c * 0.5 * (lo + hi)
    if loss == "hinge":
        if q == 0:
            m = 1 - y * z
            return y * c if m > 0 else (0.0 if m < 0 else a)
        return y * min(max(a * y + (1 - y * z) / q, 0.0), c)
    return y * max(0.0, (1 - y * z + q * a * y) / (q + 1 / (2 * c)))


def softmax_loss(y, z):
    """log Σ exp(z) − z_y for one row (y is +1 at its class, −1 elsewhere)."""
    return float(np.logaddexp.reduce(z) - z[np.argmax(y)])


def softmax_dual_value(y, a, c):
    """c·H(β) with β = e_y − a/c, −inf off the simplex."""
    if c == 0:
        return 0.0 if np.all(a == 0) else -np.inf
    beta = (y > 0) - a / c
    if beta.min() < -1e-12 or abs(beta.sum() - 1) > 1e-9:
        return -np.inf
    beta = np.maximum(beta, 0.0)
    return float(-c * np.sum(xlogy(beta, beta)))


def dual_change(loss, Y, c, A, dA):
    """Σ dual_value(A + dA) − dual_value(A) over the rows (softmax) or entries that dA moves."""
    if loss == "softmax":
        return sum(softmax_dual_value(Y[i], A[i] + dA[i], c[i])
                   - softmax_dual_value(Y[i], A[i], c[i])
                   for i in range(A.shape[0]) if np.any(dA[i] != 0))
    return sum(dual_value(loss, Y[i, k], A[i, k] + dA[i, k], c[i])
               - dual_value(loss, Y[i, k], A[i, k], c[i])
               for i in range(A.shape[0]) for k in range(A.shape[1]) if dA[i, k] != 0)


def softmax_step(y, a, c, z, q):
    """Maximise the row subproblem by nested bisection: on the multiplier ν of
    Σ β' = 1 outside, on each t_k = log β'_k of t + qc·e^t = z_k + qc·β_k − ν inside."""
    if c == 0:
        return np.zeros_like(a)
    qc = q * c
    r = z + qc * np.clip((y > 0) - a / c, 0.0, 1.0)

    def beta_at(nu):
        out = np.empty_like(r)
        for k, s in enumerate(r - nu):
            # t + qc·e^t = s: ≥ s at hi (t ≤ s, and e^t ≤ 1 + s/qc), ≤ s at lo (≤ t + qc for t ≤ 0)
            hi = min(s, math.log1p(max(s, 0.0) / qc))
            lo = min(s - qc, 0.0) - 1.0
            for _ in range(200):
                t = 0.5 * (lo + hi)
                lo, hi = (t, hi) if t + qc * math.exp(t) < s else (lo, t)
            out[k] = math.exp(0.5 * (lo + hi))
        return out

    if qc == 0:
        p = np.exp(r - r.max())
        return c * ((y > 0) - p / p.sum())
    lo, hi = r.max() - qc - 1.0, r.max() + math.log(len(r)) + 1.0
    for _ in range(200):
        nu = 0.5 * (lo + hi)
        lo, hi = (nu, hi) if beta_at(nu).sum() > 1 else (lo, nu)
    beta = beta_at(0.5 * (lo + hi))
    return c * ((y > 0) - beta / beta.sum())


def sdca_steps(loss, X, Y, sw, alpha, w, *, lam_n, sigma, icpt, order):
    """SDCA steps in ``order``; returns (dalpha, dw, [loss, dual, α·z sums])."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    n, d = X.shape
    Xa = np.hstack([X, np.full((n, 1), icpt)])
    dalpha = np.zeros_like(alpha)
    dw = np.zeros_like(w)
    sums = np.zeros(3)
    for s, i in enumerate(order):
        x = Xa[i]
        zw = x @ w
        zd = x @ dw
        q = sigma * (x @ x) / lam_n
        if loss == "softmax":     # the row's dual values step together
            if s < n:
                sums[0] += sw[i] * softmax_loss(Y[i], zw)
                sums[1] += softmax_dual_value(Y[i], alpha[i], sw[i])
                sums[2] += alpha[i] @ zw
            a = alpha[i] + dalpha[i]
            a_new = softmax_step(Y[i], a, sw[i], zw + sigma * zd, q)
            dalpha[i] += a_new - a
            dw += np.outer(x, a_new - a) / lam_n
            continue
        for k in range(Y.shape[1]):
            if s < n:
                sums[0] += sw[i] * primal_loss(loss, Y[i, k], zw[k])
                sums[1] += dual_value(loss, Y[i, k], alpha[i, k], sw[i])
                sums[2] += alpha[i, k] * zw[k]
            a = alpha[i, k] + dalpha[i, k]
            a_new = coordinate_step(loss, Y[i, k], a, sw[i], zw[k] + sigma * zd[k], q)
            dalpha[i, k] += a_new - a
            dw[:, k] += (a_new - a) / lam_n * x
    return dalpha, dw, sums



def intercept_sums(loss, Y, c, A):
    """The sums of ``daskelastic.losses.intercept_sums``, row by row from their definitions."""
    n, m = A.shape
    out = np.zeros((6, m))
    for i in range(n):
        for k in range(m):
            a = A[i, k]
            out[5, k] += c[i]
            if loss == "squared":
                out[4, k] += c[i]
            elif loss == "poisson":
                out[4, k] += c[i] * Y[i, k] - a    # c·μ = c(y − a/c), also where a = 0
            if a == 0:
                continue
            side = 0 if a > 0 else 1
            out[side, k] += abs(a)
            out[2 + side, k] += dual_value(loss, Y[i, k], a, c[i])
            beta = a * Y[i, k] / c[i]
            if loss == "logistic":
                out[4, k] += c[i] * beta * (1 - beta)     # c·σ(1 − σ) at the matched margin
            elif loss == "squared_hinge":
                out[4, k] += 2 * c[i]
    return out


def softmax_intercept_sums(Y, c, A):
    """The sums of ``daskelastic.losses.softmax_intercept_sums``, from their definitions."""
    n, m = A.shape
    out = np.zeros((m + 3, m))
    for i in range(n):
        j = int(np.argmax(Y[i]))
        out[j] += A[i]                                   # Σ α_i over class j's rows
        out[m, j] += softmax_dual_value(Y[i], A[i], c[i])
        beta = (Y[i] > 0) - A[i] / c[i]
        out[m + 1] += c[i] * beta * (1 - beta)           # c·p(1 − p) at the matched margins
        out[m + 2] += c[i]
    return out


def newton_pointwise(loss, Y, c, Z, A, curvature):
    """Twin of ``daskelastic.newton._pointwise``: ``(Σ c ℓ, Σ Fenchel–Young)``, the curvature."""
    loss_sum = fy = 0.0
    for i in range(Z.shape[0]):
        if loss == "softmax":
            if c[i] > 0:
                li = c[i] * softmax_loss(Y[i], Z[i])
                loss_sum += li
                fy += li - softmax_dual_value(Y[i], A[i], c[i]) + A[i] @ Z[i]
            continue
        for k in range(Z.shape[1]):
            y, z, a, ci = Y[i, k], Z[i, k], A[i, k], c[i]
            if ci <= 0:
                curvature[i, k] = 0.0
                continue
            li = ci * float(primal_loss(loss, y, z))
            loss_sum += li
            fy += li - dual_value(loss, y, a, ci) + a * z
            if loss == "logistic":
                p = 1.0 / (1.0 + np.exp(-z))
                curvature[i, k] = ci * p * (1.0 - p)
            elif loss == "squared_hinge":
                curvature[i, k] = 2.0 * ci * (y * z < 1)
            elif loss == "poisson":
                curvature[i, k] = ci * np.exp(z)
            else:
                curvature[i, k] = ci
    return loss_sum, fy


def newton_trial_losses(loss, Y, c, Z, dZ, steps):
    """Twin of ``daskelastic.newton._trial_losses``: ``Σ c ℓ(Z + t dZ)`` for each step ``t``."""
    out = []
    for t in steps:
        M = Z + t * dZ
        if loss == "softmax":
            out.append(sum(c[i] * softmax_loss(Y[i], M[i]) for i in range(M.shape[0])
                           if c[i] > 0))
        else:
            out.append(float(np.sum(c[:, None] * primal_loss(loss, Y, M))))
    return np.array(out)
