"""A free (unpenalised) intercept: its sums, its certificate, and fits against scikit-learn."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.linear_model import Ridge as SkRidge
from sklearn.multiclass import OneVsRestClassifier

import daskelastic as de
from daskelastic.backends import InProcessBackend
from daskelastic.driver import Problem, run_cocoa
from daskelastic.losses import LOSSES, dual_from_margins, intercept_sums
from daskelastic.objective import free_intercept_gap, lambda_from_C, primal_objective
from daskelastic.placement import make_chunks, split_rows

import reference

FREE_LOSSES = ["logistic", "squared", "squared_hinge", "poisson"]


@pytest.mark.parametrize("loss", FREE_LOSSES)
def test_the_certificate_bounds_the_suboptimality_of_any_dual_point(loss):
    """``P(w, b) − (fixed-b dual) + correction ≥ P(w, b) − P*`` for random α, w and b."""
    rng = np.random.default_rng(5)
    n, d = 200, 3
    X = rng.normal(size=(n, d)) + 0.5
    Y = (X @ [1.0, -1.0, 0.5] + 0.3 + rng.normal(size=n))[:, None]
    if loss == "poisson":
        Y = rng.poisson(np.exp(0.3 * Y)).astype(float)
    elif loss != "squared":
        Y = np.sign(Y)
    c = rng.uniform(0.5, 1.5, size=n)
    lam = lambda_from_C(0.5, n)
    # P* by L-BFGS on the smooth primal
    fun = lambda p: primal_objective(loss, X, Y, c, p[:, None], lam, 1.0, free_intercept=True)  # noqa: E731
    p_star = minimize(fun, np.zeros(d + 1), method="L-BFGS-B", tol=1e-14).fun
    for trial in range(20):
        w = rng.normal(scale=0.5, size=(d, 1))
        b = rng.normal(scale=0.5, size=1)
        A = dual_from_margins(LOSSES[loss], Y, c, rng.normal(size=(n, 1)) * 2)
        sums = np.zeros((6, 1))
        intercept_sums(LOSSES[loss], Y, c, A, np.empty((0, 1)), sums)
        u = X.T @ A / (lam * n)
        dual_values = sum(reference.dual_value(loss, Y[i, 0], A[i, 0], c[i]) for i in range(n))
        dual_b = dual_values / n - b[0] * A.sum() / n - 0.5 * lam * float(np.sum(u * u))
        primal = primal_objective(loss, X, Y, c, np.vstack([w, b]), lam, 1.0,
                                  free_intercept=True)
        positive_x = X.T @ np.maximum(A, 0.0)
        bound = primal - dual_b + free_intercept_gap(sums, positive_x, b, u, lam, n)
        assert bound >= primal - p_star - 1e-12, trial


def test_balanced_dual_values_add_nothing_to_the_gap():
    sums = np.array([[1.5, 2.0], [1.5, 2.0], [0.3, 0.2], [0.1, 0.4], [1.0, 1.0], [3.0, 3.0]])
    gap = free_intercept_gap(sums, np.ones((2, 2)), np.array([0.7, -2.0]),
                             np.ones((2, 2)), lam=0.01, n_samples=3)
    assert gap == 0.0


@pytest.mark.parametrize("n_workers", [1, 3])
def test_every_rounds_gap_bounds_the_free_problems_suboptimality(fertility_small, n_workers):
    X, y = fertility_small
    Y = np.where(y == y.max(), 1.0, -1.0)[:, None]
    n, d = X.shape
    lam = lambda_from_C(1.0, n)
    problem = Problem(loss=LOSSES["logistic"], lam=lam, n_samples=n, n_features=d,
                      n_targets=1, intercept_scaling=1.0, free_intercept=True)
    history = []
    chunks = make_chunks(X, Y, np.ones(n), split_rows(n, n_chunks=2 * n_workers))
    result = run_cocoa(InProcessBackend(problem, chunks, n_workers=n_workers), problem,
                       tol=1e-9, max_iter=3000, callback=lambda e: history.append(e) and False)
    assert result.converged
    sk = SkLogisticRegression(C=1.0, tol=1e-12, max_iter=10000).fit(X, Y.ravel())
    w_sk = np.r_[sk.coef_.ravel(), sk.intercept_][:, None]
    p_star = primal_objective("logistic", X, Y, np.ones(n), w_sk, lam, 1.0, free_intercept=True)
    assert abs(result.objective.primal - p_star) <= 1e-8 * p_star
    for entry in history:
        assert entry["primal"] - p_star <= entry["gap"] + 1e-12 * p_star, entry["round"]


def test_logistic_regression_with_a_free_intercept_is_scikit_learns_lbfgs(fertility_small):
    X, y = fertility_small
    C = 0.01     # small C: a penalised intercept would be shrunk visibly
    ours = de.LogisticRegression(C=C, penalize_intercept=False, tol=1e-8, max_iter=2000,
                                 backend="inprocess").fit(X, y)
    sk = SkLogisticRegression(C=C, tol=1e-12, max_iter=10000).fit(X, y)
    np.testing.assert_allclose(ours.intercept_, sk.intercept_, atol=1e-5)
    np.testing.assert_allclose(ours.coef_, sk.coef_, atol=1e-5)
    np.testing.assert_allclose(ours.predict_proba(X), sk.predict_proba(X), atol=1e-5)
    shrunk = de.LogisticRegression(C=C, tol=1e-8, max_iter=2000, backend="inprocess",
                                   penalize_intercept=True).fit(X, y)
    assert abs(shrunk.intercept_[0] - sk.intercept_[0]) > 100 * abs(
        ours.intercept_[0] - sk.intercept_[0])


def test_one_vs_rest_classes_each_get_a_free_intercept(fertility_small):
    X, y = fertility_small
    X, y = X[:3000], y[:3000]
    labels = (y == y.max()).astype(int) + (X[:, 1] > 0.5)    # three classes
    ours = OneVsRestClassifier(de.LogisticRegression(
        C=0.5, penalize_intercept=False, tol=1e-9, max_iter=3000, backend="inprocess",
        n_workers=2)).fit(X, labels)
    sk = OneVsRestClassifier(SkLogisticRegression(C=0.5, tol=1e-12, max_iter=20000)).fit(
        X, labels)
    np.testing.assert_allclose([e.intercept_[0] for e in ours.estimators_],
                               [e.intercept_[0] for e in sk.estimators_], atol=1e-4)


def test_ridge_with_a_free_intercept_is_scikit_learns_ridge(fertility_small):
    X, y = fertility_small
    target, X = X[:, 0], np.ascontiguousarray(X[:, 1:])   # age from the other columns
    ours = de.Ridge(alpha=5.0, penalize_intercept=False, tol=1e-10, max_iter=5000,
                    backend="inprocess").fit(sp.csr_matrix(X), target)
    sk = SkRidge(alpha=5.0).fit(X, target)
    np.testing.assert_allclose(ours.intercept_, sk.intercept_, atol=1e-5)
    np.testing.assert_allclose(ours.coef_, sk.coef_, atol=1e-5)


def test_the_squared_hinge_with_a_free_intercept_reaches_the_primal_optimum(fertility_small):
    X, y = fertility_small
    X, y = X[:2000], y[:2000]
    n, d = X.shape
    svc = de.LinearSVC(C=0.1, penalize_intercept=False, tol=1e-9, max_iter=3000,
                       backend="inprocess").fit(X, y)
    Y = np.where(y == svc.classes_[1], 1.0, -1.0)[:, None]
    lam = lambda_from_C(0.1, n)
    fun = lambda p: primal_objective("squared_hinge", X, Y, np.ones(n), p[:, None], lam,  # noqa: E731
                                     1.0, free_intercept=True)
    best = minimize(fun, np.zeros(d + 1), method="L-BFGS-B", tol=1e-15,
                    options={"maxiter": 10000})
    ours = fun(np.r_[svc.coef_.ravel(), svc.intercept_])
    assert ours <= best.fun * (1 + 1e-8)
    assert abs(svc.intercept_[0] - best.x[-1]) <= 1e-3


def test_the_hinge_has_no_free_intercept(fertility_small):
    X, y = fertility_small
    with pytest.raises(ValueError, match="hinge loss has no free intercept"):
        de.LinearSVC(loss="hinge", penalize_intercept=False, backend="inprocess").fit(
            X[:100], y[:100])


def test_a_warm_start_keeps_a_free_intercept(fertility_small):
    X, y = fertility_small
    model = de.LogisticRegression(C=0.05, penalize_intercept=False, tol=1e-8,
                                  max_iter=2000, backend="inprocess", warm_start=True)
    first = model.fit(X, y).intercept_.copy()
    rounds = model.n_iter_[0]
    model.fit(X, y)
    np.testing.assert_allclose(model.intercept_, first, atol=1e-4)
    assert model.n_iter_[0] < rounds / 4


def test_a_free_intercept_fit_on_a_cluster_matches_one_in_process(client, fertility_small):
    X, y = fertility_small
    kwargs = dict(C=0.5, penalize_intercept=False, tol=1e-8, max_iter=3000)
    here = de.LogisticRegression(backend="inprocess", **kwargs).fit(X, y)
    there = de.LogisticRegression(client=client, n_workers=2, **kwargs).fit(X, y)
    np.testing.assert_allclose(there.intercept_, here.intercept_, atol=1e-4)
    np.testing.assert_allclose(there.coef_, here.coef_, atol=1e-4)
    assert there.duality_gap_ <= 1e-8


def test_the_simulated_cluster_runs_a_free_intercept(fertility_small):
    X, y = fertility_small
    model = de.LogisticRegression(C=1.0, penalize_intercept=False, tol=1e-6, max_iter=3000,
                                  backend=de.ClusterModel(n_workers=4)).fit(X, y)
    sk = SkLogisticRegression(C=1.0, tol=1e-12, max_iter=10000).fit(X, y)
    assert model.duality_gap_ <= 1e-6
    np.testing.assert_allclose(model.intercept_, sk.intercept_, atol=1e-3)


def test_dense_ridge_with_a_free_intercept_centres_its_columns(diamonds_small):
    """Centred columns and targets leave no intercept to move: scikit-learn's Ridge, as fast."""
    X, y = diamonds_small
    kw = dict(alpha=5.0, tol=1e-10, max_iter=2000, solver="cocoa", backend="inprocess")
    free = de.Ridge(penalize_intercept=False, **kw).fit(X, y)
    penalised = de.Ridge(penalize_intercept=True, **kw).fit(X, y)
    sk = SkRidge(alpha=5.0).fit(X, y)
    # (a relative gap of 1e-10 bounds ‖w − w*‖ by ~5e-5 at this λ)
    np.testing.assert_allclose(free.intercept_, sk.intercept_, atol=1e-4)
    np.testing.assert_allclose(free.coef_, sk.coef_, atol=1e-4)
    assert abs(penalised.intercept_ - sk.intercept_) > 1e-3
    assert free.n_iter_[0] <= 2 * penalised.n_iter_[0]


@pytest.mark.parametrize("change, shift", [(sp.csr_matrix, 0.0),
                                           (lambda X: X + 50.0, 50.0)],
                         ids=["sparse rows", "shifted columns"])
def test_the_same_rows_in_another_form_give_the_same_free_intercept(fertility_small, change,
                                                                    shift):
    """Sparse rows are not centred, dense ones are: the same model either way."""
    X, y = fertility_small
    X, y = X[:2000], y[:2000]
    kwargs = dict(C=0.2, penalize_intercept=False, tol=1e-10, max_iter=3000,
                  backend="inprocess")
    base = de.LogisticRegression(**kwargs).fit(X, y)
    other = de.LogisticRegression(**kwargs).fit(change(X), y)
    np.testing.assert_allclose(other.coef_, base.coef_, atol=1e-5)
    np.testing.assert_allclose(other.intercept_, base.intercept_ - shift * base.coef_.sum(),
                               atol=1e-4)


def test_float32_columns_far_from_zero_map_the_intercept_back_exactly(fertility_small):
    """The intercept is mapped back with the centre subtracted in float32, not its float64 twin."""
    X, y = fertility_small
    X = X[:2000].copy()
    X[:, 0] = X[:, 0] + 12345.678
    kwargs = dict(C=1.0, penalize_intercept=False, tol=1e-10, max_iter=3000,
                  backend="inprocess")
    X32 = X.astype(np.float32)
    f32 = de.LogisticRegression(**kwargs).fit(X32, y[:2000])
    f64 = de.LogisticRegression(**kwargs).fit(X32.astype(np.float64), y[:2000])
    # float32 X gives float32 coef_ and intercept_ (as scikit-learn's lbfgs):
    # the decision values agree to what rounding those attributes to float32 allows
    X64 = X32.astype(np.float64)
    ours = X64 @ f32.coef_.astype(np.float64).ravel() + float(np.ravel(f32.intercept_)[0])
    rounding = np.finfo(np.float32).eps * (np.abs(X64) @ np.abs(f64.coef_.ravel())
                                           + abs(float(np.ravel(f64.intercept_)[0])))
    assert np.all(np.abs(ours - f64.decision_function(X64)) <= 1e-5 + rounding)
