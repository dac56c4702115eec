"""Distributed fits on a real LocalCluster: inputs, invariants, clean failure."""

import time
import warnings

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from conftest import first_flights

import daskelastic as de
from daskelastic.backends.dask import DaskBackend
from daskelastic.driver import Problem, run_cocoa
from daskelastic.losses import loss_code
from daskelastic.objective import lambda_from_C
from daskelastic.placement import make_chunks, split_rows


def _fit_state(client):
    """What every worker holds for daskelastic fits."""
    return client.run(lambda dask_worker: sorted(getattr(dask_worker, "_daskelastic_fits",
                                                         {})))


@pytest.fixture(scope="module")
def table(flights_small):
    """3,000 real flights, one-hot, the columns seen at least 20 times (83)."""
    return first_flights(flights_small, 3000)


@pytest.fixture(scope="module")
def reference(table):
    X, y = table
    return de.LogisticRegression(
        penalize_intercept=True, C=0.5, tol=1e-10, backend="inprocess").fit(X, y)


def _inputs(X, y):
    dense = X.toarray()
    frame = pd.DataFrame(dense, columns=[f"f{j}" for j in range(dense.shape[1])])
    return {
        "numpy": (dense, y),
        "scipy.sparse": (X, y),
        "dask array": (da.from_array(dense, chunks=(500, -1)), da.from_array(y, chunks=500)),
        "dask sparse array": (da.from_array(X, chunks=(500, -1), asarray=False),
                              da.from_array(y, chunks=500)),
        "dask dataframe": (dd.from_pandas(frame, npartitions=5),
                           dd.from_pandas(pd.Series(y), npartitions=5)),
    }


@pytest.mark.parametrize("kind", ["numpy", "scipy.sparse", "dask array", "dask sparse array",
                                  "dask dataframe"])
@pytest.mark.filterwarnings("ignore:X does not have valid feature names")  # the dataframe's
def test_distributed_fit_reaches_the_same_optimum(kind, table, reference, client):
    X, y = table
    Xin, yin = _inputs(X, y)[kind]
    clf = de.LogisticRegression(
        penalize_intercept=True, C=0.5, tol=1e-3, max_iter=2000, backend="dask").fit(Xin, yin)
    assert clf.history_[-1]["n_workers"] == 2
    assert clf.duality_gap_ <= 1e-3
    p_star = reference.history_[-1]["primal"]
    assert p_star <= clf.history_[-1]["primal"] <= p_star * (1 + 1e-3)
    assert np.mean(clf.predict(X) == reference.predict(X)) > 0.98
    assert _fit_state(client) == {w: [] for w in client.scheduler_info()["workers"]}


def test_predictions_on_dask_input_are_lazy_and_equal(table, reference, client):
    X, y = table
    Xd = da.from_array(X.toarray(), chunks=(1000, -1))
    pred = reference.predict(Xd)
    proba = reference.predict_proba(Xd)
    assert isinstance(pred, da.Array) and isinstance(proba, da.Array)
    np.testing.assert_array_equal(pred.compute(), reference.predict(X))
    np.testing.assert_allclose(proba.compute(), reference.predict_proba(X))
    frame = dd.from_pandas(pd.DataFrame(X.toarray()), npartitions=3)
    np.testing.assert_allclose(reference.decision_function(frame).compute(),
                               reference.decision_function(X))


def _backend(client, X, y, C=0.5, chunks=6):
    n, d = X.shape
    problem = Problem(loss_code("hinge"), lambda_from_C(C, n), n, d, 1, 1.0)
    backend = DaskBackend(client, problem)
    Y = np.where(y == 1, 1.0, -1.0)[:, None]
    backend.load_chunks(make_chunks(X, Y, np.ones(n), split_rows(n, n_chunks=chunks)))
    return problem, backend


@pytest.mark.parametrize("acceleration", [None, "auto"])
def test_primal_dual_consistency_after_every_round(table, client, acceleration):
    """Invariant 1: w(α) = Σ α_i x_i / (λn), gathered from the workers every round.

    With acceleration, α belongs to the proximal problem (λ' = λ + κ) and its
    iterate is v; the returned w = v + κ y / λ' carries a gap certificate.
    """
    X, y = table
    problem, backend = _backend(client, X, y)
    errors = []

    def check(round_id, w, backend, v, inv_lam_n):
        w_alpha = backend.alpha_sum() * inv_lam_n
        errors.append(np.abs(w_alpha - v).max() / max(1.0, np.abs(v).max()))
        if acceleration is None:
            assert inv_lam_n == pytest.approx(problem.inv_lam_n) and v is not None
            np.testing.assert_array_equal(v, w)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = run_cocoa(backend, problem, tol=1e-6, max_iter=15, round_hook=check,
                               acceleration=acceleration)
    finally:
        backend.close()
    assert len(errors) == 16
    assert max(errors) < 1e-12
    assert result.history[-1]["outer"] > 0 or acceleration is None


def test_every_chunk_lives_on_exactly_one_worker(table, client):
    """Invariant 2, and chunks are balanced over the workers."""
    X, y = table
    _, backend = _backend(client, X, y, chunks=8)
    try:
        held = backend.describe()
        chunks = [c for info in held.values() for c in info["chunks"]]
        assert sorted(chunks) == list(range(8))
        assert sum(info["rows"] for info in held.values()) == X.shape[0]
        assert set(held) == set(client.scheduler_info()["workers"])
        assert {len(info["chunks"]) for info in held.values()} == {4}
        alpha = backend.gather_alpha()
        assert sorted(alpha) == list(range(8))
        assert sum(a.shape[0] for a in alpha.values()) == X.shape[0]
    finally:
        backend.close()
    assert all(not fits for fits in _fit_state(client).values())


def test_a_synchronous_fit_is_reproducible(table, client):
    """Invariant 4: same data, seed and policy give the same iterates."""
    X, y = table
    fits = [de.LogisticRegression(
        penalize_intercept=True, C=0.5, tol=1e-3, random_state=3, backend="dask",
                                  straggler_policy="wait").fit(X, y)
            for _ in range(2)]
    np.testing.assert_array_equal(fits[0].coef_, fits[1].coef_)
    assert [h["primal"] for h in fits[0].history_] == [h["primal"] for h in fits[1].history_]


def test_bad_dask_input_fails_cleanly_and_leaves_the_cluster_as_it_was(table, client):
    X, y = table
    dense = X.toarray()
    dense[1234, 3] = np.nan
    before = set(client.who_has())
    with pytest.raises(ValueError, match="NaN"):
        de.LogisticRegression(
            penalize_intercept=True, backend="dask").fit(da.from_array(dense, chunks=(500, -1)),
                                                  da.from_array(y, chunks=500))
    assert all(not fits for fits in _fit_state(client).values())
    # releases travel to the scheduler asynchronously (the deadline only bounds a hang)
    deadline = time.monotonic() + 60
    while set(client.who_has()) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(client.who_has()) <= before
    # errors raised after the input was persisted (by the labels, and by C)
    # drop the persisted blocks too
    with pytest.raises(ValueError, match="only one class"):
        de.LogisticRegression(
            penalize_intercept=True, backend="dask").fit(da.ones((100, 3), chunks=50),
                                                  da.zeros(100, chunks=50))
    with pytest.raises(ValueError, match="overflow"):
        de.LogisticRegression(penalize_intercept=True, C=1e307, backend="dask").fit(
            da.from_array(X.toarray(), chunks=(500, -1)), da.from_array(y, chunks=500))
    deadline = time.monotonic() + 60
    while set(client.who_has()) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(client.who_has()) <= before


def test_dask_input_with_mismatched_lengths_is_rejected(client):
    with pytest.raises(ValueError, match="rows"):
        de.Ridge(backend="dask").fit(da.ones((100, 3), chunks=50), da.ones(90, chunks=45))


def test_ridge_on_a_dask_dataframe_matches_in_process(diamonds_small, client):
    X, y = diamonds_small
    frame = dd.from_pandas(pd.DataFrame(X), npartitions=4)
    target = dd.from_pandas(pd.Series(y), npartitions=4)
    dist = de.Ridge(alpha=300.0, tol=1e-3, max_iter=3000).fit(frame, target)
    local = de.Ridge(alpha=300.0, tol=1e-10, max_iter=3000, backend="inprocess").fit(X, y)
    assert dist.history_[-1]["n_workers"] == 2
    assert dist.duality_gap_ <= 1e-3
    assert dist.score(X, y) == pytest.approx(local.score(X, y), rel=1e-2)


def test_embedded_cluster_is_started_and_closed(capsys):
    """With no client at all, backend="dask" starts a LocalCluster and closes it."""
    from daskelastic.session import current_client

    assert current_client() is None
    rng = np.random.default_rng(0)
    X = sp.random(3000, 50, density=0.1, format="csr", random_state=0)
    y = rng.integers(0, 2, size=3000)
    clf = de.LogisticRegression(
        penalize_intercept=True, backend="dask", n_workers=2, tol=1e-3, verbose=1).fit(X, y)
    assert clf.history_[-1]["n_workers"] == 2
    assert current_client() is None
    # verbose says why the fit took a cluster's start-up
    assert ("[daskelastic] fitting on a LocalCluster of 2 workers started for this fit "
            "(backend='dask')\n") in capsys.readouterr().out


def test_an_unknown_backend_is_refused_before_any_cluster_starts(client):
    """fit_session used to take any other value for "dask"."""
    from daskelastic.session import fit_session

    workers = set(client.scheduler_info()["workers"])
    with pytest.raises(ValueError, match="backend must be one of .* got 'gpu'"):
        with fit_session(client=client, backend="gpu"):
            pass
    assert set(client.scheduler_info()["workers"]) == workers


@pytest.mark.parametrize("key, settings", [
    ("round-transport", ("actor", "task")),
    ("actor-calls", ("direct", "scheduler")),
])
def test_how_rounds_reach_the_workers_changes_latency_not_the_iterates(table, client,
                                                                       key, settings):
    """Actors or tasks, calls direct or through the scheduler: the same fit.

    (The chunks go with an actor call straight to each worker with direct
    actor calls, else they are scattered and loaded by tasks.)"""
    import dask

    X, y = table
    fits = {}
    for setting in settings:
        with dask.config.set({f"daskelastic.{key}": setting}):
            fits[setting] = de.LinearSVC(C=0.5, tol=1e-3, random_state=1,
                                         backend="dask", straggler_policy="wait").fit(X, y)
    first, second = (fits[s] for s in settings)
    np.testing.assert_array_equal(first.coef_, second.coef_)
    assert len(first.history_) == len(second.history_) > 1
    assert all(not fits for fits in _fit_state(client).values())


def test_actor_calls_go_direct_where_the_client_reaches_the_worker(client):
    from daskelastic.backends.dask.calls import calls_direct

    local = next(iter(client.scheduler_info()["workers"]))   # a LocalCluster's: loopback
    assert local.startswith("tcp://127.0.0.1:")
    assert calls_direct(client, local, "auto")
    assert calls_direct(client, "inproc://10.1.2.3/1234/5", "auto")
    remote = "tcp://10.1.2.3:34567"
    assert not calls_direct(client, remote, "auto")
    assert not calls_direct(client, "tcp://worker-7.cluster:34567", "auto")
    assert calls_direct(client, remote, "direct")
    assert not calls_direct(client, local, "scheduler")
    with pytest.raises(ValueError, match="actor-calls must be"):
        calls_direct(client, local, "fastest")


def test_unknown_round_transport_is_rejected(client):
    from daskelastic.backends.dask import DaskBackend

    problem = Problem(loss_code("hinge"), 0.1, 10, 2, 1, 0.0)
    with pytest.raises(ValueError, match="round transport"):
        DaskBackend(client, problem, transport="carrier pigeon")


def _packing(dask_worker, fit_id):
    """A worker's solver of ``fit_id``: its chunks, and those not packed yet."""
    solver = dask_worker._daskelastic_fits[fit_id].solver
    return {"chunks": solver.chunk_ids, "unpacked": sorted(solver._unpacked),
            "packed rows": int(solver._packed[0].shape[0])}


@pytest.mark.parametrize("threads", [1, 3])
def test_a_dask_arrays_blocks_are_packed_once_loaded(table, threads):
    """The load task that completes a worker's blocks packs its rows (no call
    of its own follows, and the first round does not pack), also when a
    worker's threads run its load tasks at once."""
    from distributed import Client, LocalCluster

    from daskelastic.targets import TargetEncoder

    X, y = table
    n, d = X.shape
    problem = Problem(loss=loss_code("logistic"), lam=lambda_from_C(0.5, n), n_samples=n,
                      n_features=d, n_targets=1, intercept_scaling=1.0)
    with LocalCluster(n_workers=2, threads_per_worker=threads, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        backend = DaskBackend(client, problem)
        try:
            plan = backend.load_dask(da.from_array(X, chunks=(250, -1), asarray=False),
                                     da.from_array(y, chunks=250), None,
                                     TargetEncoder(classes=np.unique(y)))
            state = client.run(_packing, fit_id=backend.fit_id)
        finally:
            backend.close()
    assert sum(len(c) for c in plan.values()) == 12
    assert {w: s["chunks"] for w, s in state.items() if s["chunks"]} == \
        {w: c for w, c in plan.items() if c}
    for s in state.values():
        assert s["unpacked"] == []
        assert s["packed rows"] == 250 * len(s["chunks"])
