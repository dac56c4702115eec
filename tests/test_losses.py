"""The loss kernels against their NumPy twins, and the gap as a certificate."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from daskelastic.losses import (
    LOGISTIC_STEP_RTOL,
    LOSSES,
    coordinate_step,
    dual_from_margins,
    dual_value,
    gap_term,
    intercept_sums,
    loss_code,
    primal_loss,
)

import reference as ref

CLASSIFICATION = ["logistic", "hinge", "squared_hinge"]
#: The losses of one margin (the softmax loss takes a row's: test_softmax.py).
ENTRY_LOSSES = sorted(set(LOSSES) - {"softmax"})
finite = st.floats(-5, 5, allow_nan=False)
positive = st.floats(0.05, 5, allow_nan=False)


def _target(loss, label, target):
    """A label (±1) for classification, a real target for the squared loss, a
    non-negative one for the Poisson loss."""
    return target if loss == "squared" else abs(target) if loss == "poisson" else label


def _feasible_alpha(loss, y, c, frac):
    """A dual value inside the conjugate's domain."""
    if loss == "poisson":       # a = c(y − μ) for a mean μ ≥ 0
        return c * (y - 3 * frac)
    if loss == "squared":
        return (2 * frac - 1) * 3 * c
    if loss == "squared_hinge":
        return y * frac * 4 * c
    return y * frac * c


@pytest.mark.parametrize("loss", ENTRY_LOSSES)
@settings(max_examples=60, deadline=None)
@given(z=finite, c=positive, frac=st.floats(0, 1), label=st.sampled_from([-1.0, 1.0]),
       target=finite)
def test_primal_and_dual_values_match_twins(loss, z, c, frac, label, target):
    y = _target(loss, label, target)
    a = _feasible_alpha(loss, y, c, frac)
    code = loss_code(loss)
    assert primal_loss(code, y, z) == pytest.approx(ref.primal_loss(loss, y, z), rel=1e-12,
                                                    abs=1e-12)
    assert dual_value(code, y, a, c) == pytest.approx(ref.dual_value(loss, y, a, c),
                                                      rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("loss", ENTRY_LOSSES)
@settings(max_examples=60, deadline=None)
@given(z=finite, c=positive, frac=st.floats(0, 1), q=st.floats(0.01, 50),
       label=st.sampled_from([-1.0, 1.0]), target=finite)
def test_coordinate_step_matches_twin(loss, z, c, frac, q, label, target):
    y = _target(loss, label, target)
    a = _feasible_alpha(loss, y, c, frac)
    got = coordinate_step(loss_code(loss), y, a, c, z, q)
    want = ref.coordinate_step(loss, y, a, c, z, q)
    assert got == pytest.approx(want, rel=1e-7, abs=1e-9)


@pytest.mark.parametrize("loss", ENTRY_LOSSES)
@settings(max_examples=40, deadline=None)
@given(z=finite, c=positive, frac=st.floats(0, 1), q=st.floats(0.01, 50),
       label=st.sampled_from([-1.0, 1.0]), target=finite)
def test_coordinate_step_maximises_the_subproblem(loss, z, c, frac, q, label, target):
    """No other dual value does better on the one-coordinate subproblem."""
    y = _target(loss, label, target)
    a = _feasible_alpha(loss, y, c, frac)
    code = loss_code(loss)

    def objective(a_new):
        return dual_value(code, y, a_new, c) - (a_new - a) * z - 0.5 * q * (a_new - a) ** 2

    best = objective(coordinate_step(code, y, a, c, z, q))
    scan = minimize_scalar(lambda t: -objective(t), bounds=(-12 * c - 12, 12 * c + 12),
                           method="bounded", options={"xatol": 1e-10})
    assert best >= -scan.fun - 1e-7 * (1 + abs(best))


@pytest.mark.parametrize("loss", CLASSIFICATION)
def test_zero_weight_sample_keeps_dual_at_zero(loss):
    code = loss_code(loss)
    assert coordinate_step(code, 1.0, 0.0, 0.0, -3.0, 2.0) == 0.0
    assert gap_term(code, 1.0, 0.0, 0.0, -3.0) == 0.0


def test_hinge_step_without_curvature_jumps_to_the_box_edge():
    code = loss_code("hinge")
    assert coordinate_step(code, 1.0, 0.0, 2.0, 0.5, 0.0) == 2.0   # margin < 1
    assert coordinate_step(code, 1.0, 1.0, 2.0, 1.5, 0.0) == 0.0   # margin > 1


@pytest.mark.parametrize("loss", ENTRY_LOSSES)
@settings(max_examples=60, deadline=None)
@given(z=finite, c=positive, frac=st.floats(0, 1), label=st.sampled_from([-1.0, 1.0]),
       target=finite)
def test_gap_term_is_nonnegative(loss, z, c, frac, label, target):
    """Fenchel–Young: c·ℓ(z) + (c·ℓ)*(−a) + a·z ≥ 0 for every feasible a."""
    y = _target(loss, label, target)
    a = _feasible_alpha(loss, y, c, frac)
    assert gap_term(loss_code(loss), y, a, c, z) >= -1e-12 * (1 + abs(z) * c)


def test_infeasible_dual_value_is_minus_infinity():
    assert dual_value(loss_code("hinge"), 1.0, 2.0, 1.0) == -math.inf
    assert dual_value(loss_code("logistic"), -1.0, 0.5, 1.0) == -math.inf
    assert dual_value(loss_code("squared_hinge"), 1.0, -0.1, 1.0) == -math.inf


def test_unknown_loss_is_rejected():
    with pytest.raises(ValueError, match="unknown loss"):
        loss_code("huber")


def test_logistic_step_is_accurate_near_the_boundary():
    """Very confident samples push β towards 0 without losing precision."""
    code = loss_code("logistic")
    a = coordinate_step(code, 1.0, 0.0, 1.0, 30.0, 1e-3)
    assert 0.0 < a < 1e-12
    assert np.isfinite(dual_value(code, 1.0, a, 1.0))


@settings(max_examples=80, deadline=None)
@given(beta=st.floats(1e-9, 1 - 1e-9), shift=st.floats(-0.3, 0.3), q=st.floats(1e-3, 50),
       c=positive, label=st.sampled_from([-1.0, 1.0]))
def test_logistic_step_finds_a_root_near_the_start(beta, shift, q, c, label):
    """A margin that moved a little since the last visit puts the root near logit(β0).

    The step's first Newton step from there needs no exp, and it may stop
    after it with σ read from a polynomial: it still finds the root to its
    tolerance, 1e-9·(1 + |u|) in u = logit(β).
    """
    u0 = math.log(beta / (1 - beta))
    root = u0 + shift * abs(shift)    # shifts of 0 to 0.09, many of them tiny
    sig = 1.0 / (1.0 + math.exp(-root))
    z = -label * (root + q * c * (sig - beta))     # g(root) = 0 for this margin
    got = coordinate_step(loss_code("logistic"), label, label * beta * c, c, z, q)
    # an error δ in u moves β by β(1 - β)·δ; near β = 1 that is below the
    # rounding of the result itself (a few ulp of c)
    assert abs(got - label * c * sig) <= c * sig * (1 - sig) * 2e-9 * (1 + abs(root)) \
        + 4 * math.ulp(c)


def _logistic_margin(label, beta, root, q, c):
    """The margin ``z`` whose logistic step from ``a = label·beta·c`` has its root at ``root``."""
    sig = 1.0 / (1.0 + math.exp(-root))
    return -label * (root + q * c * (sig - beta))


@settings(max_examples=200, deadline=None)
@given(beta=st.one_of(st.just(0.0), st.just(1.0), st.floats(1e-6, 1 - 1e-6),
                     st.sampled_from([1e-11, 1e-9, 1e-7, 1 - 1e-7, 1 - 1e-9])),
       shift=st.floats(-20, 20),
       q=st.floats(1e-3, 50), c=positive, label=st.sampled_from([-1.0, 1.0]),
       rtol=st.sampled_from([0.01, LOGISTIC_STEP_RTOL, 0.5]))
def test_logistic_step_with_a_relative_tolerance_stops_that_close_to_the_root(
        beta, shift, q, c, label, rtol):
    """Allowed ``rtol``, the step lands within ``rtol`` of its move from ``u0``.

    In ``u = logit(a'·y/c)``: ``|u - root| ≤ rtol·min(|u - u0|, 1)``, or
    ``≤ rtol`` from ``beta`` 0 or 1 (no ``u0``).  And it keeps at least
    ``1 - rtol²`` of the exact step's gain in the subproblem's objective.
    From ``beta`` 0 or 1 (every sample's first step in a fit) the step
    starts with an exp-free Newton step from ``u = 0``.
    """
    _check_relative_logistic_step(beta, shift, q, c, label, rtol)


@settings(max_examples=300, deadline=None)
@given(beta=st.one_of(st.floats(1e-6, 1 - 1e-6), st.sampled_from([1e-9, 1e-3, 0.5, 1 - 1e-9])),
       shift=st.floats(-0.6, 0.6), q=st.floats(1e-3, 4), c=st.floats(0.1, 3),
       label=st.sampled_from([-1.0, 1.0]), rtol=st.sampled_from([0.01, LOGISTIC_STEP_RTOL]))
def test_logistic_step_read_from_the_cubic_stays_within_the_tolerance(
        beta, shift, q, c, label, rtol):
    """Short moves from an interior dual value: where the solver reads σ from a cubic.

    The cubic's error (``_TAYLOR_ERR·s⁴`` in ``u``) counts against ``rtol``
    with Newton's: the same bounds as above hold.
    """
    _check_relative_logistic_step(beta, shift, q, c, label, rtol)


def test_the_cubic_read_of_the_sigmoid_is_within_its_error_bound():
    """``σ(u0 + s)`` to third order, as ``logistic_step_at`` takes it, against ``exp``."""
    from daskelastic.losses import _TAYLOR_ERR, _TAYLOR_MAX_SHIFT

    for beta in [1e-12, 1e-4, 0.05, 0.3, 0.5, 0.7, 0.95, 1 - 1e-4, 1 - 1e-12]:
        u0 = math.log(beta / (1 - beta))
        g1 = beta * (1 - beta)
        for s in np.linspace(-_TAYLOR_MAX_SHIFT, _TAYLOR_MAX_SHIFT, 201):
            b = (beta + s * g1) + (s * s) * (g1 * (0.5 - beta) + s * (g1 * (1 - 6 * g1) / 6))
            want = 1.0 / (1.0 + math.exp(-(u0 + s)))
            # the bound in u, read in β (β within 1e-12 of 1 holds 1 - β to
            # ~1e-4 only, as any float does): |Δβ| ≈ β(1 - β)·|Δu|
            slope = want * (1 - want)
            assert abs(b - want) <= slope * _TAYLOR_ERR * s**4 * 1.01 + 4e-16


def _check_relative_logistic_step(beta, shift, q, c, label, rtol):
    code = loss_code("logistic")
    interior = 0 < beta < 1
    u0 = math.log(beta / (1 - beta)) if interior else 4 * beta - 2.0
    root = min(max(u0 + shift, -12.0), 12.0)     # where logit(result) is precise
    z = _logistic_margin(label, beta, root, q, c)
    a = label * beta * c
    got = coordinate_step(code, label, a, c, z, q, rtol)
    b = got * label / c
    u = math.log(b / (1 - b))
    allowed = rtol * (min(abs(u - u0), 1.0) if interior else 1.0)
    assert abs(u - root) <= allowed + 2e-9 * (1 + abs(root))

    def objective(a_new):
        return dual_value(code, label, a_new, c) - (a_new - a) * z - 0.5 * q * (a_new - a) ** 2

    exact = coordinate_step(code, label, a, c, z, q)
    start, best = objective(a), objective(exact)
    rounding = 1e-12 * (1 + abs(best))
    assert objective(got) <= best + rounding
    assert objective(got) - start >= (1 - rtol**2) * (best - start) - rounding


@pytest.mark.parametrize("beta", [1e-300, 1e-12, 1e-5, 0.1, 0.5, 0.9, 1 - 1e-9])
def test_sigmoid_shift_is_the_shifted_sigmoid(beta):
    from daskelastic.losses import _sigmoid_shift

    u0 = math.log(beta / (1 - beta))
    for s in np.linspace(-1 / 16, 1 / 16, 101):
        want = 1.0 / (1.0 + math.exp(-(u0 + s)))
        assert _sigmoid_shift(beta, s) == pytest.approx(want, rel=1e-14)
        # and 1 - σ, which the dual value reads near β = 1
        assert 1 - _sigmoid_shift(beta, s) == pytest.approx(1 - want, rel=1e-6, abs=1e-15)


@pytest.mark.parametrize("loss", ["logistic", "squared", "squared_hinge", "poisson"])
def test_the_intercept_sums_kernel_matches_its_twin(loss):
    rng = np.random.default_rng(3)
    n, m = 300, 2
    Y = ref.random_targets(loss, rng, (n, m))
    c = rng.uniform(0.0, 2.0, size=n)
    c[:4] = 0.0
    A = dual_from_margins(LOSSES[loss], Y, c, 2.0 * rng.normal(size=(n, m)))
    out = np.zeros((6, m))
    intercept_sums(LOSSES[loss], Y, c, A, np.empty((0, m)), out)
    np.testing.assert_allclose(out, ref.intercept_sums(loss, Y, c, A), rtol=1e-12)
