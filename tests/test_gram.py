"""The Gram solver of ElasticNet and Lasso: its kernel, its certificate, its fits."""

import warnings

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import ElasticNet as SkElasticNet

import daskelastic as de
from daskelastic.gram import (
    _cd_epoch,
    _cd_epoch_reference,
    block_sums,
    duality_gap,
    gram_sums,
    solve,
)


def _objective(X, Y, coef, intercept, alpha, rho, sw=None):
    """scikit-learn's ElasticNet objective (weights rescaled to sum to n)."""
    n = X.shape[0]
    sw = np.ones(n) if sw is None else sw * (n / sw.sum())
    coef = np.atleast_2d(coef)
    R = np.asarray(Y, dtype=float).reshape(n, -1) - X @ coef.T - intercept
    return ((sw[:, None] * R * R).sum() / (2 * n) + alpha * rho * np.abs(coef).sum()
            + alpha * (1 - rho) / 2 * (coef * coef).sum())


def _centred_sums(X, y):
    return block_sums(X - X.mean(axis=0), y - y.mean())


@pytest.mark.parametrize("l1, l2", [(50.0, 0.0), (20.0, 30.0), (0.0, 40.0)])
def test_the_kernel_matches_its_numpy_twin(l1, l2):
    rng = np.random.default_rng(0)
    A = rng.normal(size=(40, 6))
    A[:, 2] = 0.0                                  # a column of zeros
    G = A.T @ A
    q = A.T @ rng.normal(size=40)
    runs = []
    for epoch in (_cd_epoch, _cd_epoch_reference):
        w, H = np.zeros(6), np.zeros(6)
        changes = [epoch(G, q, w, H, l1, l2) for _ in range(5)]
        runs.append((w, H, changes))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(runs[0][2], runs[1][2], rtol=1e-12)
    assert runs[0][0][2] == 0.0
    np.testing.assert_allclose(runs[0][1], G @ runs[0][0], atol=1e-10)


@pytest.mark.parametrize("rho", [1.0, 0.5, 0.0])
def test_the_gap_bounds_the_suboptimality_of_every_iterate(diamonds_small, rho):
    X, y = diamonds_small
    sums = _centred_sums(X, y)
    n, alpha = len(y), 0.01
    a, b = n * alpha * rho, n * alpha * (1 - rho)
    G, q, yy = sums.xx, sums.xy[:, 0], sums.yy[0]
    w_star, _, _ = solve(sums, alpha * rho, alpha * (1 - rho), tol=1e-13, max_iter=100_000)
    best, _ = duality_gap(G, q, yy, w_star[:, 0], G @ w_star[:, 0], a, b)
    w, H = np.zeros(X.shape[1]), np.zeros(X.shape[1])
    for _ in range(6):
        primal, dual = duality_gap(G, q, yy, w, H, a, b)
        assert dual <= best * (1 + 1e-12)          # a lower bound of the optimum
        assert primal >= best * (1 - 1e-12)
        assert primal - dual >= primal - best - 1e-12 * best
        _cd_epoch(G, q, w, H, a, b)


def test_extrapolation_saves_passes_on_collinear_columns(diamonds_small):
    """The one-hot columns of a category and the intercept are collinear, and
    numeric sizes nearly so: plain cyclic passes crawl, extrapolated ones do not."""
    X, y = diamonds_small
    sums = _centred_sums(X, y)
    runs = [solve(sums, 0.003, 0.0, tol=1e-8, max_iter=100_000, anderson=k)
            for k in (5, 0)]
    assert runs[0][2][-1]["duality_gap"] <= 1e-8 and runs[1][2][-1]["duality_gap"] <= 1e-8
    assert runs[0][1] * 3 < runs[1][1]
    assert runs[0][2][-1]["primal"] == pytest.approx(runs[1][2][-1]["primal"], rel=1e-8)
    assert np.array_equal(runs[0][0] != 0, runs[1][0] != 0)


def test_block_sums_add_up_to_the_tables():
    rng = np.random.default_rng(1)
    X, Y, sw = rng.normal(size=(30, 4)), rng.normal(size=(30, 2)), rng.uniform(size=30)
    whole = block_sums(X, Y, sw)
    parts = block_sums(X[:11], Y[:11], sw[:11]) + block_sums(sp.csr_matrix(X[11:]), Y[11:],
                                                              sw[11:])
    for a, b in [(whole.xx, parts.xx), (whole.xy, parts.xy), (whole.yy, parts.yy),
                 (whole.x, parts.x), (whole.y, parts.y)]:
        np.testing.assert_allclose(a, b, rtol=1e-12)
    centred, mu, ybar = whole.centred()
    Xc, Yc = X - mu, Y - ybar
    np.testing.assert_allclose(centred.xx, (Xc * sw[:, None]).T @ Xc, atol=1e-12)
    np.testing.assert_allclose(centred.xy, (Xc * sw[:, None]).T @ Yc, atol=1e-12)


@pytest.mark.parametrize("rho", [1.0, 0.6])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("weighted", [False, True], ids=["", "weighted"])
@pytest.mark.parametrize("fit_intercept", [True, False], ids=["intercept", "none"])
def test_fits_reach_scikit_learns_optimum_and_support(diamonds_small, rho, sparse, weighted,
                                                       fit_intercept):
    X, y = diamonds_small
    sw = np.random.default_rng(0).uniform(0.1, 3.0, size=len(y)) if weighted else None
    Xin = sp.csr_matrix(X) if sparse else X
    alpha = 0.003
    theirs = SkElasticNet(alpha=alpha, l1_ratio=rho, tol=1e-14, max_iter=200_000,
                          fit_intercept=fit_intercept).fit(X, y, sample_weight=sw)
    ours = de.ElasticNet(alpha=alpha, l1_ratio=rho, tol=1e-10, max_iter=100_000,
                         fit_intercept=fit_intercept).fit(Xin, y, sample_weight=sw)
    assert ours.solver_ == "gram"
    assert ours.duality_gap_ <= 1e-10
    best = _objective(X, y, theirs.coef_, theirs.intercept_, alpha, rho, sw)
    got = _objective(X, y, ours.coef_, ours.intercept_, alpha, rho, sw)
    assert got - best <= 1e-9 * best
    assert np.array_equal(ours.coef_ != 0, theirs.coef_ != 0)


@pytest.mark.parametrize("solver", ["gram", "cocoa"])
def test_dual_gap_bounds_the_excess_of_scikit_learns_objective(diamonds_small, solver):
    # dual_gap_ is in the objective's units, as scikit-learn's; duality_gap_
    # the same gap relative to it
    X, y = diamonds_small
    alpha, rho = 0.003, 0.7
    best = SkElasticNet(alpha=alpha, l1_ratio=rho, tol=1e-14, max_iter=200_000).fit(X, y)
    ours = de.ElasticNet(alpha=alpha, l1_ratio=rho, tol=1e-4, solver=solver,
                         backend="inprocess").fit(X, y)
    excess = _objective(X, y, ours.coef_, ours.intercept_, alpha, rho) \
        - _objective(X, y, best.coef_, best.intercept_, alpha, rho)
    got = _objective(X, y, ours.coef_, ours.intercept_, alpha, rho)
    assert isinstance(ours.dual_gap_, np.float64) and isinstance(ours.n_iter_, int)
    assert -1e-12 <= excess <= ours.dual_gap_
    assert ours.dual_gap_ == pytest.approx(ours.duality_gap_ * got, rel=1e-6)


def test_finite_input_whose_sums_overflow_is_not_called_nan():
    # scikit-learn's test_enet_nonfinite_params data: finite, but their
    # squares overflow float64
    rng = np.random.RandomState(0)
    X = np.finfo(np.float64).max * rng.uniform(size=(10, 2))
    y = rng.randint(0, 2, size=10)
    with warnings.catch_warnings(), pytest.raises(ValueError) as error:
        warnings.simplefilter("ignore", RuntimeWarning)
        de.ElasticNet(alpha=0.1).fit(X, y)
    assert "overflow float64" in str(error.value)
    assert "NaN" not in str(error.value)


def test_several_targets_are_several_problems(diamonds_small):
    X, y = diamonds_small
    Y = np.c_[y, 0.5 * y + X[:, 0]]
    ours = de.Lasso(alpha=0.01, tol=1e-10).fit(X, Y)
    assert ours.coef_.shape == (2, X.shape[1]) and ours.intercept_.shape == (2,)
    # scikit-learn's shapes for several targets: a list and an array
    assert ours.n_iter_ == [ours.history_[-1]["round"]] * 2
    assert ours.dual_gap_.shape == (2,)
    for t in range(2):
        one = de.Lasso(alpha=0.01, tol=1e-10).fit(X, Y[:, t])
        np.testing.assert_allclose(ours.coef_[t], one.coef_, atol=1e-6)
        np.testing.assert_allclose(ours.intercept_[t], one.intercept_, atol=1e-6)


def test_dask_input_is_summed_on_the_cluster(client, diamonds_small):
    """Dense, sparse-block and dataframe input on a real LocalCluster give the
    model of the same rows in memory."""
    X, y = diamonds_small
    sw = np.random.default_rng(2).uniform(0.5, 2.0, size=len(y))
    here = de.ElasticNet(alpha=0.003, l1_ratio=0.8, tol=1e-10).fit(X, y, sample_weight=sw)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    inputs = {
        "dense": da.from_array(X, chunks=(700, -1)),
        "sparse": da.from_array(sp.csr_matrix(X), chunks=(700, -1), asarray=False),
        "dataframe": dd.from_pandas(frame, npartitions=4),
    }
    for name, Xd in inputs.items():
        model = de.ElasticNet(alpha=0.003, l1_ratio=0.8, tol=1e-10, client=client).fit(
            Xd, da.from_array(y, chunks=700),
            sample_weight=da.from_array(sw, chunks=700))
        assert model.solver_ == "gram", name
        assert model.history_[-1]["n_workers"] == len(client.scheduler_info()["workers"])
        np.testing.assert_allclose(model.coef_, here.coef_, atol=1e-8, err_msg=name)
        np.testing.assert_allclose(model.intercept_, here.intercept_, atol=1e-8,
                                   err_msg=name)
    assert list(model.feature_names_in_) == list(frame.columns)


def test_gram_sums_of_dask_blocks_are_the_in_memory_sums(client):
    rng = np.random.default_rng(3)
    X, y, sw = rng.normal(size=(500, 5)), rng.normal(size=500), rng.uniform(size=500)
    here = gram_sums(X, y, sw, y_offset=np.array([0.3]))
    there = gram_sums(da.from_array(X, chunks=(37, -1)), da.from_array(y, chunks=37),
                      da.from_array(sw, chunks=37), y_offset=np.array([0.3]), client=client)
    assert there.rows == 500
    np.testing.assert_allclose(there.xx, here.xx, rtol=1e-12)
    np.testing.assert_allclose(there.xy, here.xy, rtol=1e-12)
    np.testing.assert_allclose(there.yy, here.yy, rtol=1e-12)


def test_auto_chooses_by_the_number_of_features_and_what_the_fit_asks_for(diamonds_small):
    X, y = diamonds_small
    assert de.Lasso(alpha=0.01).fit(X, y).solver_ == "gram"
    assert de.Lasso(alpha=0.01, solver="cocoa", backend="inprocess").fit(X, y).solver_ \
        == "cocoa"
    simulated = de.Lasso(alpha=0.01,
                         backend=de.ClusterModel(n_workers=2)).fit(X[:500], y[:500])
    assert simulated.solver_ == "cocoa"
    rng = np.random.default_rng(0)
    wide = rng.normal(size=(40, 300))
    assert de.Lasso(alpha=0.1, backend="inprocess").fit(wide, wide[:, 0]).solver_ == "cocoa"


@pytest.mark.parametrize("options", [{"backend": de.ClusterModel(n_workers=2)},
                                     {"scaling_policy": "convergence"}])
def test_the_gram_solver_refuses_what_needs_rounds(diamonds_small, options):
    X, y = diamonds_small
    with pytest.raises(ValueError, match="solver='cocoa'"):
        de.Lasso(solver="gram", **options).fit(X[:200], y[:200])


def test_a_warm_started_path_reaches_the_cold_optima_in_fewer_passes(diamonds_small):
    X, y = diamonds_small
    warm = de.Lasso(tol=1e-8, max_iter=100_000, warm_start=True)
    warm_passes = cold_passes = 0
    for alpha in [0.1, 0.03, 0.01, 0.003, 0.001]:
        warm.set_params(alpha=alpha).fit(X, y)
        cold = de.Lasso(alpha=alpha, tol=1e-8, max_iter=100_000).fit(X, y)
        warm_passes += warm.n_iter_
        cold_passes += cold.n_iter_
        objectives = [_objective(X, y, m.coef_, m.intercept_, alpha, 1.0)
                      for m in (warm, cold)]
        assert objectives[0] == pytest.approx(objectives[1], rel=1e-7)
    assert warm_passes < cold_passes


def test_max_iter_stops_the_passes_and_warns(diamonds_small):
    X, y = diamonds_small
    with pytest.warns(ConvergenceWarning, match="passes of coordinate descent"):
        model = de.Lasso(alpha=0.001, tol=1e-12, max_iter=2).fit(X, y)
    assert model.n_iter_ == 2 and len(model.history_) == 3
    assert model.duality_gap_ > 1e-12


def test_non_finite_dask_targets_are_refused(client, diamonds_small):
    X, y = diamonds_small
    y = y.copy()
    y[5] = np.nan
    with warnings.catch_warnings(), pytest.raises(ValueError, match="NaN or infinity"):
        warnings.simplefilter("ignore", RuntimeWarning)
        de.Lasso(client=client).fit(da.from_array(X, chunks=(1000, -1)),
                                    da.from_array(y, chunks=1000))


@pytest.mark.slow
def test_a_sigkilled_worker_does_not_fail_a_gram_fit():
    """A worker SIGKILLed while the row blocks are summed: Dask recomputes its
    blocks from their graph and the fit gives the model of the rows in memory."""
    import time

    from distributed import Client

    from cluster_checks import fit_through_a_kill, live, local_cluster

    rng = np.random.default_rng(4)
    X = rng.normal(size=(8000, 12))
    y = X @ rng.normal(size=12) + rng.normal(size=8000)
    here = de.ElasticNet(alpha=0.01, l1_ratio=0.9, tol=1e-10).fit(X, y)

    def slowly(block):
        time.sleep(0.4)
        return block

    with local_cluster(3) as cluster, Client(cluster, set_as_default=False) as client:
        before = live(client)
        # 16 blocks of 0.4 s on 3 single-threaded workers: the fit reads its
        # blocks for over 2 s, and the kill comes 1 s after the first starts
        Xd = da.from_array(X, chunks=(500, -1)).map_blocks(slowly, dtype=X.dtype)
        model = fit_through_a_kill(
            client, lambda: de.ElasticNet(alpha=0.01, l1_ratio=0.9, tol=1e-10,
                                          client=client).fit(Xd, da.from_array(y, 500)),
            delay=1.0)
        assert live(client) != before          # the killed worker's nanny replaced it
    assert model.solver_ == "gram"
    np.testing.assert_allclose(model.coef_, here.coef_, atol=1e-8)
    np.testing.assert_allclose(model.intercept_, here.intercept_, atol=1e-8)


# -- Ridge: the Cholesky solve of the Gram system ---------------------------------------


def _ridge_objective(X, y, coef, intercept, alpha, sw=None):
    """scikit-learn's Ridge objective ``Σ c_i r_i² + alpha ‖w‖²``."""
    sw = np.ones(X.shape[0]) if sw is None else sw
    R = np.asarray(y, dtype=float) - X @ np.asarray(coef).T - intercept
    return float((sw[:, None] * R.reshape(X.shape[0], -1) ** 2).sum()
                 + alpha * (np.asarray(coef) ** 2).sum())


@pytest.mark.parametrize("alpha", [1e-6, 0.0])
def test_weak_ridge_is_scikit_learns_solution_by_cholesky(alpha):
    """make_regression(100, 50): CoCoA+'s rounds crawl at small alpha; one solve does not."""
    from sklearn.datasets import make_regression
    from sklearn.linear_model import Ridge as SkRidge

    X, y = make_regression(100, 50, noise=1.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")     # (no ConvergenceWarning, no other warning)
        ours = de.Ridge(alpha=alpha).fit(X, y)
    sk = SkRidge(alpha=alpha).fit(X, y)
    assert ours.solver_ == "cholesky" and ours.n_iter_.tolist() == [1]
    np.testing.assert_allclose(ours.coef_, sk.coef_, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ours.intercept_, sk.intercept_, atol=1e-9)
    assert ours.duality_gap_ <= 1e-10
    assert _ridge_objective(X, y, ours.coef_, ours.intercept_, alpha) <= \
        _ridge_objective(X, y, sk.coef_, sk.intercept_, alpha) * (1 + 1e-12)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_ridge_by_cholesky_with_weights_and_two_targets(diamonds_small, sparse):
    from sklearn.linear_model import Ridge as SkRidge

    X, y = diamonds_small
    X, y = X[:500], y[:500]
    Y = np.column_stack([y, 2.0 * y + 1.0])
    sw = np.random.default_rng(0).uniform(0.0, 2.0, X.shape[0])
    ours = de.Ridge(alpha=0.01).fit(sp.csr_matrix(X) if sparse else X, Y, sample_weight=sw)
    sk = SkRidge(alpha=0.01).fit(X, Y, sample_weight=sw)
    np.testing.assert_allclose(ours.coef_, sk.coef_, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(ours.intercept_, sk.intercept_, atol=1e-8)
    assert ours.solver_ == "cholesky" and ours.duality_gap_ <= 1e-10


def test_a_penalised_ridge_intercept_by_cholesky_is_a_constant_column(diamonds_small):
    from sklearn.linear_model import Ridge as SkRidge

    X, y = diamonds_small
    X, y = X[:500] + 3.0, y[:500]
    ours = de.Ridge(alpha=2.0, penalize_intercept=True, intercept_scaling=0.5).fit(X, y)
    Xa = np.column_stack([X, np.full(X.shape[0], 0.5)])
    sk = SkRidge(alpha=2.0, fit_intercept=False).fit(Xa, y - y.mean())
    np.testing.assert_allclose(ours.coef_, sk.coef_[:-1], rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(ours.intercept_, y.mean() + 0.5 * sk.coef_[-1], atol=1e-9)


def test_ridge_on_dask_input_is_solved_from_the_clusters_sums(client, diamonds_small):
    from sklearn.linear_model import Ridge as SkRidge

    X, y = diamonds_small
    ours = de.Ridge(alpha=1e-4, client=client).fit(da.from_array(X, chunks=700),
                                                   da.from_array(y, chunks=700))
    sk = SkRidge(alpha=1e-4).fit(X, y)
    assert ours.solver_ == "cholesky" and ours.history_[-1]["n_workers"] == 2
    np.testing.assert_allclose(ours.coef_, sk.coef_, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(ours.intercept_, sk.intercept_, atol=1e-7)


def test_ridge_without_a_penalty_needs_the_cholesky_solver(diamonds_small):
    X, y = diamonds_small
    with pytest.raises(ValueError, match="alpha=0 .*needs solver='cholesky'"):
        de.Ridge(alpha=0.0, solver="cocoa").fit(X, y)
    cocoa = de.Ridge(alpha=1.0, solver="cocoa", tol=1e-8, max_iter=2000).fit(X, y)
    cholesky = de.Ridge(alpha=1.0).fit(X, y)
    assert cocoa.solver_ == "cocoa" and cocoa.n_iter_.shape == (1,)
    np.testing.assert_allclose(cocoa.coef_, cholesky.coef_, atol=1e-3)


def test_the_constant_column_sums_are_the_augmented_tables_sums():
    rng = np.random.default_rng(3)
    X, y, c = rng.normal(size=(30, 4)), rng.normal(size=30), rng.uniform(size=30)
    augmented = block_sums(np.column_stack([X, np.full(30, 2.5)]), y, c)
    ours = block_sums(X, y, c).with_constant(2.5)
    for name in ("xx", "xy", "yy", "x", "y", "weight"):
        np.testing.assert_allclose(getattr(ours, name), getattr(augmented, name),
                                   rtol=1e-12, atol=1e-12)


def test_a_problem_without_a_penalty_runs_no_rounds():
    from daskelastic.backends import InProcessBackend
    from daskelastic.driver import Problem, run_cocoa
    from daskelastic.losses import loss_code
    from daskelastic.placement import make_chunks, split_rows

    X, y = np.random.default_rng(0).normal(size=(20, 2)), np.ones((20, 1))
    with pytest.raises(ValueError, match="must be >= 0"):
        Problem(loss=loss_code("logistic"), lam=-1.0, n_samples=20, n_features=2,
                n_targets=1, intercept_scaling=0.0)
    problem = Problem(loss=loss_code("squared"), lam=0.0, n_samples=20, n_features=2,
                      n_targets=1, intercept_scaling=0.0)
    backend = InProcessBackend(problem, make_chunks(X, y, np.ones(20), split_rows(20, 1)))
    with pytest.raises(ValueError, match="CoCoA\\+ needs one"):
        run_cocoa(backend, problem)
