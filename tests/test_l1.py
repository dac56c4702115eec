"""L1 and elastic-net penalties: the certificate, and scikit-learn's optima and supports."""


import numpy as np
import pytest
from sklearn.linear_model import ElasticNet as SkElasticNet
from sklearn.linear_model import Lasso as SkLasso

from daskelastic.backends import InProcessBackend
from daskelastic.driver import Problem, run_cocoa
from daskelastic.losses import loss_code
from daskelastic.objective import elastic_net_gap, soft_threshold
from daskelastic.placement import make_chunks, split_rows


def _lasso_objective(X, y, coef, intercept, alpha, l1_ratio=1.0):
    """scikit-learn's ElasticNet objective."""
    r = y - X @ coef - intercept
    return (0.5 * np.mean(r ** 2) + alpha * l1_ratio * np.abs(coef).sum()
            + 0.5 * alpha * (1 - l1_ratio) * coef @ coef)


# -- the proximal map and the certificate ----------------------------------------


def test_soft_threshold_is_the_proximal_map_of_the_l1_norm():
    rng = np.random.default_rng(0)
    z = rng.normal(size=200) * 3
    t = 0.7
    grid = np.linspace(-10, 10, 200_001)
    for zi, got in zip(z[:20], soft_threshold(z[:20], t)):
        # argmin_x ½(x − z)² + t|x| on a fine grid
        best = grid[np.argmin(0.5 * (grid - zi) ** 2 + t * np.abs(grid))]
        assert abs(got - best) <= 1e-4
    assert np.all(soft_threshold(z, t)[np.abs(z) <= t] == 0.0)


@pytest.mark.parametrize("l1_ratio", [1.0, 0.5])
def test_elastic_net_gap_bounds_the_suboptimality_and_vanishes_at_the_optimum(
        diamonds_small, l1_ratio):
    X, y = diamonds_small
    X = X - X.mean(axis=0)
    y = y - y.mean()
    n, d = X.shape
    alpha = 0.01
    lam, l1 = alpha * (1 - l1_ratio), alpha * l1_ratio
    best = SkElasticNet(alpha=alpha, l1_ratio=l1_ratio, fit_intercept=False, tol=1e-14,
                        max_iter=200_000).fit(X, y).coef_
    optimum = _lasso_objective(X, y, best, 0.0, alpha, l1_ratio)

    def gap(w, alpha_values):
        r = y - X @ w
        loss_sum = 0.5 * np.sum(r ** 2)
        dual_sum = np.sum(alpha_values * y - 0.5 * alpha_values ** 2)   # −ℓ*(−a)
        return elastic_net_gap(loss_sum, dual_sum, w[:, None],
                               (X.T @ alpha_values / n)[:, None], lam, l1, n)

    assert gap(best, y - X @ best) <= 1e-9 * optimum
    rng = np.random.default_rng(0)
    for scale in (1e-3, 1e-1, 1.0):
        w = best + scale * rng.normal(size=d)
        a = y - X @ best + scale * rng.normal(size=n)   # any dual values
        assert gap(w, a) >= _lasso_objective(X, y, w, 0.0, alpha, l1_ratio) - optimum - 1e-12


def test_elastic_net_gap_with_a_free_intercept_balances_the_dual_values():
    # residuals whose sum is not 0 certify only once balanced: the bound stays
    # above the true suboptimality
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4)) + 1.0
    y = X @ [1.0, 0.0, -2.0, 0.0] + 3.0 + 0.3 * rng.normal(size=300)
    n = len(y)
    alpha = 0.05
    sk = SkLasso(alpha=alpha, tol=1e-14, max_iter=100_000).fit(X, y)
    optimum = _lasso_objective(X, y, sk.coef_, sk.intercept_, alpha)
    for shift in (0.0, 0.1, 1.0):
        b = sk.intercept_ + shift
        r = y - X @ sk.coef_ - b
        sums = np.zeros((6, 1))
        sums[0] = r[r > 0].sum()
        sums[1] = -r[r < 0].sum()
        dual = r * y - 0.5 * r ** 2
        sums[2] = dual[r > 0].sum()
        sums[3] = dual[r < 0].sum()
        positive_x = (X[r > 0].T @ r[r > 0])[:, None]
        got = elastic_net_gap(0.5 * np.sum(r ** 2), dual.sum(), sk.coef_[:, None],
                              (X.T @ r / n)[:, None], 0.0, alpha, n, (sums, positive_x))
        assert got >= _lasso_objective(X, y, sk.coef_, b, alpha) - optimum - 1e-12
        if shift == 0.0:
            assert got <= 1e-8 * optimum


def test_every_rounds_gap_bounds_its_suboptimality(diamonds_small):
    """Invariant 3 for a pure L1 problem, round by round, on two workers."""
    X, y = diamonds_small
    X = X - X.mean(axis=0)
    y = y - y.mean()
    n, d = X.shape
    alpha = 0.01
    problem = Problem(loss=loss_code("squared"), lam=0.0, l1=alpha, n_samples=n,
                      n_features=d, n_targets=1, intercept_scaling=0.0)
    chunks = make_chunks(X, y[:, None], np.ones(n), split_rows(n, n_chunks=8), shuffle=0)
    result = run_cocoa(InProcessBackend(problem, chunks, n_workers=2), problem, tol=1e-8,
                       max_iter=2000)
    best = SkLasso(alpha=alpha, fit_intercept=False, tol=1e-14, max_iter=200_000).fit(X, y)
    optimum = _lasso_objective(X, y, best.coef_, 0.0, alpha)
    assert result.converged
    for entry in result.history:
        assert entry["primal"] - optimum <= entry["gap"] + 1e-12
    assert np.array_equal(result.w[:d, 0] != 0, best.coef_ != 0)
