"""The adaptive σ′ and the step along the added proposals (driver side of CoCoA+)."""

import warnings

import numpy as np
import pytest

from daskelastic.backends import InProcessBackend
from daskelastic.backends.dask import DaskBackend
from daskelastic.driver import Problem, run_cocoa
from daskelastic.losses import loss_code
from daskelastic.objective import lambda_from_C
from daskelastic.placement import make_chunks, split_rows
from daskelastic.solvers import ChunkSolver

import reference as ref


def _flights_problem(flights_small, loss, n_rows=4000):
    X, y = flights_small
    X, y = X[:n_rows], y[:n_rows]
    n, d = X.shape
    Y = np.where(y == 1, 1.0, -1.0)[:, None]
    problem = Problem(loss_code(loss), lambda_from_C(1.0, n), n, d, 1, 1.0)
    # a function: a backend keeps the chunks' dual state in them
    return problem, lambda: make_chunks(X, Y, np.ones(n), split_rows(n, n_chunks=8))


def _fit(problem, chunks, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_cocoa(InProcessBackend(problem, chunks(), n_workers=4), problem, **kwargs)


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge", "squared"])
def test_adaptive_sigma_raises_the_dual_every_round(flights_small, loss):
    """Every round's step keeps D(α) non-decreasing; every other σ′ is below the safe K."""
    problem, chunks = _flights_problem(flights_small, loss)
    history = _fit(problem, chunks, tol=1e-6, max_iter=60, acceleration=None).history
    duals = np.array([h["dual"] for h in history])
    assert np.all(np.diff(duals) >= -1e-12 * np.abs(duals[1:]))
    sigmas = [h["sigma"] for h in history[:-1]]
    assert len(sigmas) >= 6
    # the first round and every other one after it are the safe ones; the
    # rounds between use the σ′ the round before asked for
    assert set(sigmas[0::2]) == {4.0}
    assert min(sigmas[1::2]) < 2.5 and all(1.0 <= s <= 4.0 for s in sigmas)
    assert all(0.0 < h["step"] <= 1.0 for h in history[:-1])


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_adaptive_sigma_needs_fewer_rounds_to_the_same_optimum(flights_small, loss):
    """4,000 flights, 4 workers, gap 1e-4: ~70 rounds, not ~90 (logistic); ~230, not ~360."""
    problem, chunks = _flights_problem(flights_small, loss)
    adaptive = _fit(problem, chunks, tol=1e-4, max_iter=2000)
    fixed = _fit(problem, chunks, tol=1e-4, max_iter=2000, sigma=4.0)
    assert adaptive.converged and fixed.converged
    assert len(adaptive.history) < 0.9 * len(fixed.history)
    assert adaptive.objective.primal == pytest.approx(fixed.objective.primal, rel=1e-4)


def test_hinge_keeps_the_safe_sigma(flights_small):
    problem, chunks = _flights_problem(flights_small, "hinge")
    result = _fit(problem, chunks, tol=1e-3, max_iter=20)
    assert {h["sigma"] for h in result.history} == {4.0}
    assert {h["step"] for h in result.history[:-1]} == {1.0}


def test_steps_below_one_keep_invariant_1_on_a_cluster(flights_small, client):
    """Invariant 1 with adaptive steps, gathered from a real LocalCluster every round."""
    problem, chunks = _flights_problem(flights_small, "logistic", n_rows=3000)
    backend = DaskBackend(client, problem)
    backend.load_chunks(chunks())
    errors = []

    def check(round_id, w, backend, v, inv_lam_n):
        w_alpha = backend.alpha_sum() * inv_lam_n
        errors.append(np.abs(w_alpha - v).max() / max(1.0, np.abs(v).max()))

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # γ = 0.9: every step is min(γ, t*) < 1 (on this table t* ≥ 1 in
            # every round, with γ = 1 the steps would all be 1)
            result = run_cocoa(backend, problem, tol=1e-8, max_iter=12, gamma=0.9,
                               round_hook=check)
    finally:
        backend.close()
    assert len(errors) == len(result.history) == 13
    assert max(errors) < 1e-12
    steps = [h["step"] for h in result.history[:-1]]
    assert all(0.0 < t <= 0.9 for t in steps)


@pytest.mark.parametrize("loss", ["logistic", "squared_hinge", "squared", "hinge"])
def test_the_step_bound_holds_along_the_proposals(loss):
    """``D(α + tΔα) − D(α)`` against the driver's bound: ≥ on [0, 1], = at t = 1.

    Three targets, uneven sample weights, a proximal shift (``w = v + s``) and
    two workers proposing boldly (σ′ = 1), so that the proposals overlap.
    """
    from daskelastic.schedules import _best_step

    rng = np.random.default_rng(5)
    n, d, m, lam = 80, 6, 3, 0.02
    # the second worker's rows are near copies of the first's: overlapping proposals
    X = rng.normal(size=(n // 2, d))
    X = np.vstack([X, X + 0.05 * rng.normal(size=X.shape)])
    Y = rng.normal(size=(n // 2, m)) if loss == "squared" else \
        np.where(rng.random((n // 2, m)) < 0.5, 1.0, -1.0)
    Y = np.vstack([Y, Y])
    sw = rng.uniform(0.3, 3.0, size=n)
    inv_lam_n = 1.0 / (lam * n)
    shift = 0.1 * rng.normal(size=(d + 1, m))
    solvers = []
    for k, rows in enumerate([slice(0, n // 2), slice(n // 2, n)]):
        solver = ChunkSolver(loss_code(loss), m, 1.0)
        solver.add_chunk(k, X[rows], Y[rows], sw[rows])
        solvers.append(solver)
    v = np.zeros_like(shift)
    for round_id in range(12):   # rounds as the driver runs them, then one to check
        w = v + shift
        results = {k: s.solve(w, round_id=round_id, inv_lam_n=inv_lam_n, sigma=1.0)
                   for k, s in enumerate(solvers)}
        proposal = results[0].dw + results[1].dw
        if round_id == 11:
            break
        change = results[0].dual_change + results[1].dual_change
        step = min(1.0, _best_step(change, proposal, w, lam, n))
        for s in solvers:
            s.commit(round_id, gamma=step)
        v = v + step * proposal

    def dual(t):
        total, vt = 0.0, np.zeros_like(v)
        for s in solvers:
            Xp, Yp, swp, alpha = s._packed
            a = alpha + t * s.pending[1]
            total += sum(ref.dual_value(loss, Yp[i, k], a[i, k], swp[i])
                         for i in range(a.shape[0]) for k in range(m))
            vt += np.hstack([Xp, np.ones((Xp.shape[0], 1))]).T @ a * inv_lam_n
        return total / n - lam * float(np.sum(vt * shift)) - 0.5 * lam * float(np.sum(vt * vt))

    slope = sum(r.dual_change for r in results.values()) / n \
        - lam * float(np.sum(proposal * w))
    curvature = lam * float(np.sum(proposal * proposal))
    best = _best_step(results[0].dual_change + results[1].dual_change, proposal, w, lam, n)
    assert best < 1.0         # the proposals overlap: adding both in full overshoots
    assert best == pytest.approx(slope / curvature, rel=1e-12)
    scale = abs(dual(0.0)) + 1.0
    for t in [0.1, 0.5, min(best, 1.0) / 2, min(best, 1.0)]:
        assert dual(t) - dual(0.0) >= t * slope - 0.5 * t * t * curvature - 1e-10 * scale
    assert dual(1.0) - dual(0.0) == pytest.approx(slope - 0.5 * curvature,
                                                  rel=1e-8, abs=1e-10 * scale)
    assert dual(min(best, 1.0)) > dual(0.0)


def test_a_fixed_sigma_on_the_estimator_is_used_every_round(flights_small):
    import daskelastic as de

    X, y = flights_small
    common = dict(C=1.0, tol=1e-3, max_iter=30, backend="inprocess", n_workers=3,
                  random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fixed = de.LogisticRegression(solver="cocoa",
                                      sigma=3.0, gamma=0.8, **common).fit(X[:3000], y[:3000])
        adaptive = de.LogisticRegression(solver="cocoa", **common).fit(X[:3000], y[:3000])
    assert {h["sigma"] for h in fixed.history_} == {3.0}
    assert {h["step"] for h in fixed.history_[:-1]} == {0.8}
    assert fixed.history_[-1]["step"] == 0.0          # the certified round adds nothing
    assert len({h["sigma"] for h in adaptive.history_}) > 1
    with pytest.raises(ValueError, match="sigma"):
        de.LogisticRegression(solver="cocoa", sigma=0.0, **common).fit(X[:300], y[:300])
