"""Warm starts: the dual state set from earlier coefficients, on every backend."""

import numpy as np
import pytest

import daskelastic as de
from daskelastic.backends import InProcessBackend
from daskelastic.driver import Problem, run_cocoa
from daskelastic.losses import LOSSES, dual_from_margins, dual_value, gap_term
from daskelastic.objective import lambda_from_C
from daskelastic.placement import make_chunks, split_rows
from daskelastic.simulation import ClusterModel
from daskelastic.solvers import _scaled_dual_sums

import reference


def _random_rows(loss, n, m, seed):
    """Random labels (targets for the squared loss) and weights, and the generator."""
    rng = np.random.default_rng(seed)
    Y = reference.random_targets(loss, rng, (n, m))
    return Y, rng.uniform(0.0, 3.0, size=n), rng


@pytest.mark.parametrize("loss", sorted(set(LOSSES) - {"softmax"}))   # test_softmax.py
def test_the_dual_values_of_margins_close_every_samples_gap(loss):
    """``a = -c ℓ'(z)`` is feasible and meets Fenchel-Young with equality."""
    code = LOSSES[loss]
    Y, c, rng = _random_rows(loss, 400, 2, seed=1)
    c[:5] = 0.0
    Z = 4.0 * rng.normal(size=(400, 2))
    Z[5:10] = Y[5:10]                        # margins exactly at the hinge's kink
    # far beyond exp's range (the Poisson loss itself overflows there: its
    # margins stay within it)
    Z[10:15] = (30.0 if loss == "poisson" else 800.0) * Y[10:15]
    A = dual_from_margins(code, Y, c, Z)
    gaps = [gap_term(code, Y[i, k], A[i, k], c[i], Z[i, k]) for i in range(400) for k in (0, 1)]
    assert np.all(np.isfinite([dual_value(code, Y[i, k], A[i, k], c[i])
                               for i in range(400) for k in (0, 1)]))
    # (rounding of terms as large as the margins, or the Poisson means e^z)
    scale = max(1.0, np.max(np.abs(Z)), np.max(np.exp(Z)) if loss == "poisson" else 0.0)
    assert np.max(np.abs(gaps)) <= 1e-12 * scale
    assert np.all(A[:5] == 0.0)              # weight 0: the dual value stays 0


@pytest.mark.parametrize("loss", sorted(set(LOSSES) - {"softmax"}))   # test_softmax.py
def test_the_scaled_dual_sums_kernel_matches_its_numpy_twin(loss):
    code = LOSSES[loss]
    Y, c, rng = _random_rows(loss, 60, 3, seed=2)
    A = dual_from_margins(code, Y, c, rng.normal(size=(60, 3)))
    scales = np.array([0.0, 0.5, 1.0, 1.5, 4.0])
    out = np.empty(5)
    _scaled_dual_sums(code, Y, c, A, scales, out)
    twin = [sum(reference.dual_value(loss, Y[i, k], s * A[i, k], c[i])
                for i in range(60) for k in range(3)) for s in scales]
    np.testing.assert_allclose(out, twin, rtol=1e-12)
    assert out[0] == 0.0


def _problem(loss, C, X, n_targets=1):
    n, d = X.shape
    return Problem(loss=LOSSES[loss], lam=lambda_from_C(C, n), n_samples=n, n_features=d,
                   n_targets=n_targets, intercept_scaling=1.0)


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge", "squared"])
def test_a_start_from_the_optimum_is_nearly_certified(loss, fertility_small, diamonds_small):
    """For a smooth loss the dual values of the optimum are the dual optimum.

    The first iterate is ``w(α)``, off the optimum by as much as the
    optimum's own ``w`` is off ``w(α)``: its gap is small, not 0.
    """
    X, y = diamonds_small if loss == "squared" else fertility_small
    Y = (y - y.mean() if loss == "squared" else np.where(y == 1, 1.0, -1.0))[:, None]
    problem = _problem(loss, 0.5, X)
    n = X.shape[0]

    def backend():
        return InProcessBackend(problem, make_chunks(X, Y, np.ones(n), split_rows(n, 8),
                                                     shuffle=0), n_workers=2)

    optimum = run_cocoa(backend(), problem, tol=1e-11, max_iter=5000)
    again = run_cocoa(backend(), problem, tol=1e-8, w_start=optimum.w)
    cold = run_cocoa(backend(), problem, tol=1e-8, max_iter=5000)
    assert again.history[0]["duality_gap"] <= 1e-5
    assert again.n_iter <= 3 < cold.n_iter
    assert abs(again.objective.primal - optimum.objective.primal) \
        <= 1e-8 * optimum.objective.primal


def _path_rounds(make, X, y, values, name):
    """Rounds and final primal objectives along a path of ``values`` of ``name``."""
    warm = make(warm_start=True)
    rounds = {"warm": [], "cold": []}
    primal = {"warm": [], "cold": []}
    for value in values:
        warm.set_params(**{name: value}).fit(X, y)
        cold = make(**{name: value}).fit(X, y)
        for key, est in (("warm", warm), ("cold", cold)):
            rounds[key].append(int(est.n_iter_[0]))
            primal[key].append(est.history_[-1]["primal"])
            assert est.duality_gap_ <= est.tol
    return rounds, np.array(primal["warm"]), np.array(primal["cold"])


def test_a_logistic_path_warm_reaches_each_optimum_in_fewer_rounds(flights_6k):
    X, y = flights_6k
    rounds, warm, cold = _path_rounds(
        lambda **kw: de.LogisticRegression(tol=1e-7, max_iter=3000, backend="inprocess",
                                           n_workers=2, **kw),
        X, y, [0.05, 0.2, 0.8], "C")
    np.testing.assert_allclose(warm, cold, rtol=2e-7)
    assert rounds["warm"][0] == rounds["cold"][0]          # the first fit is cold
    assert sum(rounds["warm"][1:]) < 0.75 * sum(rounds["cold"][1:])


def test_a_ridge_path_with_two_targets_and_their_offsets(diamonds_small):
    X, y = diamonds_small
    Y = np.column_stack([y, 2.0 * y - X[:, 0]])
    rounds, warm, cold = _path_rounds(
        lambda **kw: de.Ridge(tol=1e-8, max_iter=3000, backend="inprocess", solver="cocoa",
                              **kw),
        X, Y, [10.0, 1.0, 0.1], "alpha")
    np.testing.assert_allclose(warm, cold, rtol=1e-7)
    assert sum(rounds["warm"][1:]) < sum(rounds["cold"][1:])


def test_a_refit_of_three_classes_on_the_same_C_takes_no_round(diamonds_small):
    X, price = diamonds_small
    y = np.digitize(price, np.quantile(price, [1 / 3, 2 / 3]))       # 3 price bands
    clf = de.LinearSVC(C=0.5, tol=1e-9, max_iter=5000, warm_start=True,
                       backend="inprocess").fit(X, y)
    coef = clf.coef_.copy()
    clf.set_params(tol=1e-6).fit(X, y)
    assert np.max(clf.n_iter_) <= 1
    np.testing.assert_allclose(clf.coef_, coef, atol=1e-3)


def test_warm_start_on_a_dask_cluster_and_a_simulated_one(flights_6k, flights_6k_optimum,
                                                          client):
    X, y = flights_6k
    for kwargs in ({"client": client, "backend": "dask", "n_workers": 2},
                   {"backend": ClusterModel(n_workers=4)}):
        clf = de.LogisticRegression(C=0.2, tol=1e-6, max_iter=2000, warm_start=True,
                                    penalize_intercept=True, **kwargs).fit(X, y)
        clf.set_params(C=0.5).fit(X, y)
        assert clf.duality_gap_ <= 1e-6
        assert abs(clf.history_[-1]["primal"] - flights_6k_optimum) <= 1e-6 * flights_6k_optimum
        assert clf.history_[0]["duality_gap"] < 1.0       # not the cold start's 1


def test_warm_start_refuses_other_features_or_classes(fertility_small):
    X, y = fertility_small
    clf = de.LogisticRegression(warm_start=True, backend="inprocess").fit(X, y)
    with pytest.raises(ValueError, match="had 7 features and 1 targets, this one 6"):
        clf.fit(X[:, :6], y)
    with pytest.raises(ValueError, match=r"classes \[0, 2\] are not the last fit's \[0, 1\]"):
        clf.fit(X, 2 * y)
    # without warm_start the same calls fit afresh
    clf.set_params(warm_start=False).fit(X[:, :6], y)
    assert clf.coef_.shape == (1, 6)
