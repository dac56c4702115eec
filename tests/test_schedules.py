"""The σ′ and acceleration schedules on their own: no cluster, no rounds."""

import numpy as np
import pytest

from daskelastic.backends import InProcessBackend
from daskelastic.driver import Problem
from daskelastic.losses import LOSSES
from daskelastic.objective import Objective
from daskelastic.placement import make_chunks, split_rows
from daskelastic.schedules import (
    _INNER_REDUCTION,
    _PLAIN_WINDOW,
    Acceleration,
    SigmaSchedule,
)

LOGISTIC, HINGE, SQUARED = LOSSES["logistic"], LOSSES["hinge"], LOSSES["squared"]


class _Result:
    def __init__(self, dw, dual_change):
        self.dw, self.dual_change = dw, dual_change


def _objective(primal, relative_gap):
    return Objective(primal, primal * (1 - relative_gap), primal * relative_gap, relative_gap)


def test_sigma_alternates_between_the_safe_value_and_the_measured_one():
    schedule = SigmaSchedule(None, 1.0, LOGISTIC)
    assert schedule.plan(4) == 4.0              # no measurement yet: the safe γK′
    schedule.ran()
    w = np.zeros((3, 1))
    proposal = np.ones((3, 1))
    # the dual gains c/n − λ′⟨V, w⟩ = 0.6 per unit step against a curvature
    # λ′‖V‖² = 3: t* = 0.2, and the next σ′ asks for σ′/t*
    step = schedule.observe(4.0, 4, dual_change=60.0, proposal=proposal, w=w, lam_in=1.0,
                            n=100)
    assert step == pytest.approx(0.2)
    assert schedule.plan(4) == 4.0      # σ′/t* = 20, kept at most γK′
    schedule.ran()
    schedule.observe(4.0, 4, dual_change=1200.0, proposal=proposal, w=w, lam_in=1.0, n=100)
    assert schedule.plan(2) == 2.0      # the round after an adapted one is safe
    schedule.ran()
    schedule.observe(2.0, 2, dual_change=1200.0, proposal=proposal, w=w, lam_in=1.0, n=100)
    # t* = 12/3 = 4 > γ: the step is γ, and σ′/t* = 0.5 scaled to K′ = 4 results
    assert schedule.plan(4) == pytest.approx(1.0)   # kept ≥ min(1, γK′)
    schedule.reset()
    assert schedule.plan(4) == 4.0


def test_sigma_is_fixed_for_the_hinge_and_when_given():
    for schedule in (SigmaSchedule(None, 0.5, HINGE), SigmaSchedule(3.0, 0.5, LOGISTIC)):
        first = schedule.plan(4)
        schedule.ran()
        step = schedule.observe(first, 4, dual_change=1.0, proposal=np.ones((2, 1)),
                                w=np.zeros((2, 1)), lam_in=1.0, n=10)
        assert step == 0.5 and schedule.plan(4) == first


def test_sigma_falls_back_to_the_safe_step_without_a_usable_bound():
    schedule = SigmaSchedule(None, 1.0, SQUARED)
    sig = schedule.plan(4)
    schedule.ran()
    # no positive slope (rounding on a converged fit): σ′/K′ and the safe σ′ next
    assert schedule.observe(sig, 4, dual_change=-1.0, proposal=np.ones((2, 1)),
                            w=np.zeros((2, 1)), lam_in=1.0, n=10) == 1.0
    assert schedule.plan(4) == 4.0


@pytest.fixture
def logistic_backend():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    Y = np.sign(X[:, :1] + 0.3 * rng.normal(size=(200, 1)))
    problem = Problem(loss=LOGISTIC, lam=1e-2, n_samples=200, n_features=3, n_targets=1,
                      intercept_scaling=1.0)
    chunks = make_chunks(X, Y, np.ones(200), split_rows(200, n_chunks=4))
    return problem, InProcessBackend(problem, chunks, n_workers=2), \
        InProcessBackend(problem, chunks, n_workers=1)


def test_logistic_starts_plain_and_switches_on_with_the_iterate_unchanged(logistic_backend):
    problem, two, _ = logistic_backend
    accel = Acceleration.for_fit("auto", two, problem, warm=False)
    assert accel.kappa == 0 and accel.kappa_later > 0
    v = np.random.default_rng(1).normal(size=(4, 1))
    w = accel.iterate(v)
    np.testing.assert_array_equal(w, v)
    gaps = [1e-2 * 0.95 ** k for k in range(_PLAIN_WINDOW + 1)]   # falling 5% a round
    for k, gap in enumerate(gaps):
        v, switched = accel.observe(v, w, _objective(1.0, gap), 0.0, 0.0)
        assert switched == (k == len(gaps) - 1)
    assert accel.kappa > 0 and accel.lam_in == problem.lam + accel.kappa
    np.testing.assert_allclose(accel.iterate(v), w, rtol=1e-12)


def test_the_centre_moves_once_the_proximal_problem_is_solved(logistic_backend):
    problem, two, _ = logistic_backend
    accel = Acceleration.for_fit(0.25, two, problem, warm=False)
    kappa = accel.kappa
    assert kappa > 0
    v = np.ones((4, 1))
    v, _ = accel.observe(v, accel.iterate(v), _objective(1.0, 1e-2), 1.0, 0.0)
    assert accel.n_outer == 0
    v, _ = accel.observe(v, accel.iterate(v), _objective(0.9, 1e-2),
                         _INNER_REDUCTION * 0.99, 0.0)
    assert accel.n_outer == 1 and accel.kappa == kappa     # a fixed κ stays
    # the first centre is the iterate itself (no momentum yet): shift = κ w / λ′
    np.testing.assert_allclose(accel.shift, kappa * np.ones((4, 1)) / accel.lam_in,
                               rtol=1e-12)
    np.testing.assert_array_equal(v, np.ones((4, 1)))       # α, and λ′, unchanged


def test_auto_switches_classification_off_on_one_worker(logistic_backend):
    problem, two, one = logistic_backend
    accel = Acceleration.for_fit("auto", two, problem, warm=True)
    accel.kappa_later, accel.kappa = 0.0, accel.kappa_later     # (as after a switch)
    accel.lam_in = problem.lam + accel.kappa
    v = np.ones((4, 1))
    same, off = accel.workers_changed(v, two)
    assert not off and same is v
    v, off = accel.workers_changed(v, one)
    assert off and accel.kappa == 0 and accel.kappa_later > 0
    assert accel.lam_in == problem.lam


def test_a_pure_l1_problem_always_runs_the_proximal_problems(logistic_backend):
    _, two, _ = logistic_backend
    problem = Problem(loss=SQUARED, lam=0.0, l1=0.5, n_samples=200, n_features=3,
                      n_targets=1, intercept_scaling=0.0)
    accel = Acceleration.for_fit("auto", two, problem, warm=False)
    assert accel.kappa > 0 and accel.kappa_later == 0
    # the iterate is the soft-thresholded v + shift, μ/λ′ the threshold
    v = np.array([[3.0], [0.1], [-3.0], [0.0]]) * (0.5 / accel.lam_in)
    np.testing.assert_allclose(accel.iterate(v)[:3, 0],
                               [2 * 0.5 / accel.lam_in, 0.0, -2 * 0.5 / accel.lam_in])
    with pytest.raises(ValueError, match="needs the acceleration"):
        Acceleration.for_fit(None, two, problem, warm=False)
