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
    """Every round's step keeps D(α) non-decreasing, with σ′ below the safe K."""
    problem, chunks = _flights_problem(flights_small, loss)
    history = _fit(problem, chunks, tol=1e-6, max_iter=60, acceleration=None).history
    duals = np.array([h["dual"] for h in history])
    assert np.all(np.diff(duals) >= -1e-12 * np.abs(duals[1:]))
    sigmas = [h["sigma"] for h in history[:-1]]
    assert sigmas[0] == 4.0                        # the first round is the safe one
    assert min(sigmas) < 2.5 and all(1.0 <= s <= 4.0 for s in sigmas)
    assert all(0.0 < h["step"] <= 1.0 for h in history[:-1])
    assert any(h["step"] < 1.0 for h in history[:-1])


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
            result = run_cocoa(backend, problem, tol=1e-8, max_iter=12, round_hook=check)
    finally:
        backend.close()
    assert len(errors) == len(result.history) == 13
    assert max(errors) < 1e-12
    assert any(h["step"] < 1.0 for h in result.history[:-1])
