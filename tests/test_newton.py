"""The Newton solver of narrow problems: kernels, sums, certificate, estimators, Dask."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from distributed import Client
from sklearn.exceptions import ConvergenceWarning

import daskelastic as de
from daskelastic.backends.simulated import ClusterModel
from daskelastic.driver import Problem
from daskelastic.history import RoundEntry
from daskelastic.losses import LOSSES, dual_from_margins
from daskelastic.newton import KERNELS, block_sums, certificate, newton_sums

import reference
from cluster_checks import fit_leftovers, fit_through_a_kill, local_cluster


def _table(n=400, d=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge", "poisson", "softmax"])
def test_the_pointwise_kernel_matches_its_numpy_twin(loss):
    rng = np.random.default_rng(1)
    m = 3 if loss == "softmax" else 2
    Y = reference.random_targets(loss, rng, (50, m))
    c = rng.uniform(0.0, 2.0, size=50)
    c[:3] = 0.0
    Z = rng.normal(size=(50, m))
    A = dual_from_margins(LOSSES[loss], Y, c, Z)
    got_curv, want_curv = np.zeros((50, m)), np.zeros((50, m))
    got = KERNELS["pointwise"](LOSSES[loss], Y, c, Z, A, got_curv)
    want = reference.newton_pointwise(loss, Y, c, Z, A, want_curv)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    if loss != "softmax":
        np.testing.assert_allclose(got_curv, want_curv, rtol=1e-10, atol=1e-14)
    steps = np.array([0.5, 0.125])
    dZ = rng.normal(size=(50, m))
    out = np.zeros(2)
    KERNELS["trial_losses"](LOSSES[loss], Y, c, Z, dZ, steps, out)
    np.testing.assert_allclose(out, reference.newton_trial_losses(loss, Y, c, Z, dZ, steps),
                               rtol=1e-12)


@pytest.mark.parametrize("loss", ["logistic", "poisson", "softmax"])
def test_block_sums_are_the_gradient_and_hessian_of_the_loss_sum(loss):
    X, rng = _table(60, 3)
    m = 3 if loss == "softmax" else 1
    Y = reference.random_targets(loss, rng, (60, m))
    c = rng.uniform(0.5, 1.5, size=60)
    code = LOSSES[loss]
    w = 0.3 * rng.normal(size=(4, m))

    def sums(point):
        return block_sums(X, Y, c, loss=code, w=point, intercept_scaling=1.5)

    at = sums(w)
    eps = 1e-6
    flat = w.T.reshape(-1)          # class-major, as the softmax Hessian is laid out
    grad = np.zeros_like(flat)
    for j in range(flat.size):
        e = np.zeros_like(flat)
        e[j] = eps
        up = sums((flat + e).reshape(m, 4).T)
        down = sums((flat - e).reshape(m, 4).T)
        grad[j] = (up.loss - down.loss) / (2 * eps)
        # a column of the Hessian from the gradient's (−u's) differences
        column = -(up.u - down.u).T.reshape(-1) / (2 * eps)
        H = at.hessian if loss == "softmax" else at.hessian[0]
        np.testing.assert_allclose(H[:, j], column, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(-at.u.T.reshape(-1), grad, rtol=1e-6, atol=1e-7)


def test_sparse_and_dense_blocks_give_the_same_sums():
    X, rng = _table(80, 5)
    X[X < 0.5] = 0.0
    Y = reference.random_targets("logistic", rng, (80, 1))
    kw = dict(loss=LOSSES["logistic"], w=0.1 * rng.normal(size=(6, 1)), intercept_scaling=1.0,
              free=True, step=0.1 * rng.normal(size=(6, 1)), trial_steps=(0.5, 0.25))
    dense = block_sums(X, Y, np.ones(80), **kw)
    sparse = block_sums(sp.csr_matrix(X), Y, np.ones(80), **kw)
    for a, b in [(dense.loss, sparse.loss), (dense.u, sparse.u),
                 (dense.hessian, sparse.hessian), (dense.trials, sparse.trials),
                 (dense.intercept[1], sparse.intercept[1])]:
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    halves = newton_sums([(X[:30], Y[:30], np.ones(30)), (X[30:], Y[30:], np.ones(50))], **kw)
    np.testing.assert_allclose(halves.hessian, dense.hessian, rtol=1e-12)


def test_the_certificate_bounds_the_suboptimality_and_vanishes_at_the_optimum(fertility_small):
    X, y = fertility_small
    X, y = X[:2000], y[:2000]
    ref = de.LogisticRegression(C=0.1, tol=1e-12, solver="newton", penalize_intercept=False,
                                backend="inprocess").fit(X, y)
    optimum = ref.history_[-1]["primal"]
    assert ref.history_[-1]["duality_gap"] <= 1e-10
    for entry in ref.history_:
        assert entry["primal"] - optimum <= entry["gap"] * (1 + 1e-9) + 1e-15
    # (the same numbers from the sums directly, at a point off the optimum)
    problem = Problem(loss=LOSSES["logistic"], lam=1 / (0.1 * 2000), n_samples=2000,
                      n_features=X.shape[1], n_targets=1, intercept_scaling=1.0,
                      free_intercept=True)
    Y = np.where(y == ref.classes_[1], 1.0, -1.0)[:, None]
    w = np.zeros((X.shape[1] + 1, 1))
    objective = certificate(problem, block_sums(X, Y, np.ones(2000), loss=problem.loss, w=w,
                                                intercept_scaling=1.0, free=True), w)
    assert objective.primal - optimum <= objective.gap


def test_logistic_and_softmax_fits_match_scikit_learn_on_a_real_table(diamonds_small):
    from sklearn.linear_model import LogisticRegression as SkLogistic

    from daskelastic.datasets import _rdata

    X = diamonds_small[0][:, :6]
    cut = _rdata("ggplot2", "diamonds")["cut"].astype(str).to_numpy()[:3000]
    for y, solver in [(cut == "Ideal", "newton-cholesky"), (cut, "lbfgs")]:
        ours = de.LogisticRegression(tol=1e-10, penalize_intercept=False).fit(X, y)
        theirs = SkLogistic(solver=solver, tol=1e-12, max_iter=10000).fit(X, y)
        assert ours.solver_ == "newton" and ours.n_iter_[0] <= 15
        np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-6)


def test_squared_hinge_and_poisson_fits_match_scikit_learn(fertility_small):
    from sklearn.linear_model import PoissonRegressor as SkPoisson
    from sklearn.svm import LinearSVC as SkSVC

    X, y = fertility_small
    X, y = X[:3000], y[:3000]
    svc = de.LinearSVC(C=0.5, tol=1e-12).fit(X, y)
    ref = SkSVC(C=0.5, tol=1e-12, max_iter=100000).fit(X, y)
    assert svc.solver_ == "newton"
    np.testing.assert_allclose(svc.coef_, ref.coef_, atol=1e-6)
    np.testing.assert_allclose(svc.intercept_, ref.intercept_, atol=1e-6)
    counts = np.round(np.exp(0.5 * X[:, 0]) * (1 + y)).astype(float)   # real rows, counts
    pois = de.PoissonRegressor(alpha=1e-3, tol=1e-10).fit(X, counts)
    ref = SkPoisson(alpha=1e-3, solver="newton-cholesky", tol=1e-12,
                    max_iter=1000).fit(X, counts)
    assert pois.solver_ == "newton"
    np.testing.assert_allclose(pois.coef_, ref.coef_, atol=1e-6)
    np.testing.assert_allclose(pois.intercept_, ref.intercept_, atol=1e-6)


def test_solver_auto_picks_cocoa_for_wide_tables_and_rounds():
    X, rng = _table(300, 3)
    y = (X[:, 0] > 0).astype(int)
    assert de.LogisticRegression().fit(X, y).solver_ == "newton"
    assert de.LogisticRegression(solver="cocoa").fit(X, y).solver_ == "cocoa"
    assert de.LinearSVC(loss="hinge").fit(X, y).solver_ == "cocoa"
    assert de.LogisticRegression(penalty="l1").fit(X, y).solver_ == "cocoa"
    wide = rng.normal(size=(300, 600))
    assert de.LogisticRegression(tol=1e-2).fit(wide, y).solver_ == "cocoa"
    simulated = de.LogisticRegression(backend=ClusterModel(n_workers=2), tol=1e-2)
    assert simulated.fit(X, y).solver_ == "cocoa"
    with pytest.raises(ValueError, match="solver='newton' runs no rounds"):
        de.LogisticRegression(solver="newton", backend=ClusterModel(n_workers=2)).fit(X, y)
    with pytest.raises(ValueError, match="not the hinge"):
        de.LinearSVC(loss="hinge", solver="newton").fit(X, y)


def test_raw_unscaled_flights_columns_converge_with_the_default_fit():
    """Issue 46 point 2: month, hour, dep_time, distance unscaled, three categories."""
    from daskelastic.datasets import _rdata

    df = _rdata("nycflights13", "flights").dropna(subset=["arr_delay"]).iloc[:20000]
    X = df[["month", "hour", "dep_time", "distance", "carrier", "origin", "dest"]].copy()
    for column in ("carrier", "origin", "dest"):
        X[column] = X[column].astype("category")
    y = (df["arr_delay"] > 15).to_numpy()
    for kw in [{}, {"penalize_intercept": False}]:     # (the default, scikit-learn's)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            clf = de.LogisticRegression(**kw).fit(X, y)
        assert clf.solver_ == "newton" and clf.n_iter_[0] <= 20
        assert clf.duality_gap_ <= 1e-4


def test_weak_regularisation_converges_to_scikit_learns_unpenalised_fit(fertility_small):
    """Issue 46 point 3: C = 1e30 on overlapping classes, where the optimum exists."""
    from sklearn.linear_model import LogisticRegression as SkLogistic

    X, y = fertility_small
    X, y = X[:2000], y[:2000]
    theirs = SkLogistic(C=np.inf, solver="newton-cholesky", tol=1e-12).fit(X, y)
    for kw in [dict(C=1e30), dict(penalty=None), dict(C=np.inf)]:
        ours = de.LogisticRegression(penalize_intercept=False, tol=1e-12, **kw).fit(X, y)
        assert ours.solver_ == "newton"
        np.testing.assert_allclose(ours.coef_, theirs.coef_, atol=1e-5)
        np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-7)
    with pytest.raises(ValueError, match="CoCoA. needs one"):
        de.LogisticRegression(penalty=None, solver="cocoa").fit(X, y)


def test_separable_classes_stop_at_max_iter_with_a_warning():
    X, _ = _table(40, 2)
    y = X[:, 0] > 0
    with pytest.warns(ConvergenceWarning, match="no finite optimum"):
        de.LogisticRegression(C=1e30, penalize_intercept=False, max_iter=15).fit(X, y)


def test_dask_input_on_a_cluster_gives_the_in_memory_fit_and_round_keys(client,
                                                                        fertility_small):
    import dask.array as da

    X, y = fertility_small
    here = de.LogisticRegression(tol=1e-8, penalize_intercept=False).fit(X, y)
    there = de.LogisticRegression(tol=1e-8, penalize_intercept=False).fit(
        da.from_array(X, chunks=(1000, -1)), da.from_array(y, chunks=1000))
    assert there.solver_ == "newton" and there.history_[-1]["n_workers"] == 2
    np.testing.assert_allclose(there.coef_, here.coef_, atol=1e-6)
    for entry in there.history_:
        assert set(RoundEntry.keys()) - {"scaling"} <= set(entry)
    # in memory with a client: the blocks go to the workers too
    on = de.LogisticRegression(tol=1e-8, penalize_intercept=False, client=client).fit(X, y)
    assert on.history_[-1]["n_workers"] == 2
    np.testing.assert_allclose(on.coef_, here.coef_, atol=1e-6)
    assert fit_leftovers(client)["keys"] == []


def test_a_newton_fit_survives_a_worker_killed_mid_fit(fertility_small):
    """A lost worker's blocks are recomputed by Dask from the graph; the fit goes on."""
    X, y = fertility_small
    X, y = np.tile(X, (8, 1)), np.tile(y, 8)
    want = de.LogisticRegression(tol=1e-8, penalize_intercept=False).fit(X, y)
    with local_cluster(3) as cluster, Client(cluster, set_as_default=False) as client:
        clf = fit_through_a_kill(client, lambda: de.LogisticRegression(
            tol=1e-8, penalize_intercept=False, client=client, chunks_per_worker=4).fit(X, y),
            0.2)
        assert clf.solver_ == "newton"
        np.testing.assert_allclose(clf.coef_, want.coef_, atol=1e-6)
        assert fit_leftovers(client)["keys"] == []
