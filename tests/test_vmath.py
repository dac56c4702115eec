"""The vectorisable ``log`` and ``log1p`` of ``daskelastic._vmath`` against NumPy.

The reference is NumPy's ``log``/``log1p`` in ``np.longdouble`` (x87 extended
precision on x86-64: 11 more bits than float64); the errors, taken in
``long double``, are counted in ulps of the float64 result.
"""

import numpy as np
import pytest
from numba import njit

from daskelastic._vmath import TINY, bits_of, float_of, log, log1p

LONG = np.finfo(np.longdouble).nmant >= 63   # extended precision, not an alias of float64


@njit(cache=True)
def _logs(x, out):
    for e in range(x.shape[0]):
        out[e] = log(x[e])


@njit(cache=True)
def _log1ps(v, out):
    for e in range(v.shape[0]):
        out[e] = log1p(v[e])


def _ulps(got, exact):
    """Error of ``got`` in ulps of ``exact`` (both float64, or ``exact`` in long double)."""
    ulp = np.spacing(np.maximum(np.abs(exact.astype(np.float64)), TINY))
    return np.asarray(np.abs(got.astype(exact.dtype) - exact) / ulp, dtype=np.float64)


def _positive_normals(rng, n):
    return np.concatenate([
        rng.uniform(0.0, 1.0, n), rng.uniform(0.5, 2.0, n),   # both sides of √2/2 and √2
        10.0 ** rng.uniform(-307.0, 308.0, n),
        1.0 - 10.0 ** rng.uniform(-16.0, -1.0, n), 1.0 + 10.0 ** rng.uniform(-16.0, -1.0, n),
        [TINY, 2 * TINY, 1.0, np.nextafter(1.0, 0.0), np.nextafter(1.0, 2.0), 2.0,
         np.sqrt(2.0), np.sqrt(0.5), np.finfo(np.float64).max],
    ])


@njit(cache=True)
def _bits(x):
    return bits_of(x)


@njit(cache=True)
def _float(i):
    return float_of(i)


def test_bits_round_trip():
    for x in [0.0, -0.0, 1.0, -2.5, TINY, np.pi, np.inf]:
        assert _float(_bits(x)) == x
        assert np.signbit(_float(_bits(x))) == np.signbit(x)
    assert _bits(1.0) == 0x3FF << 52
    assert _float(0x4000000000000000) == 2.0


@pytest.mark.skipif(not LONG, reason="np.longdouble is float64 here: no exact reference")
def test_log_is_within_one_ulp():
    x = _positive_normals(np.random.default_rng(0), 2000)
    got = np.empty_like(x)
    _logs(x, got)
    exact = np.log(x.astype(np.longdouble))
    assert np.max(_ulps(got, exact)) < 1.0
    assert got[np.flatnonzero(x == 1.0)[0]] == 0.0


@pytest.mark.skipif(not LONG, reason="np.longdouble is float64 here: no exact reference")
def test_log1p_is_within_one_and_a_half_ulps():
    rng = np.random.default_rng(1)
    beta = _positive_normals(rng, 2000)
    beta = beta[beta < 1.0]
    # the solver takes log1p(-β) for β ∈ (0, 1); where 1 - β is rounded
    # (β from ~0.29 to 0.5) the correction of the rounding matters most
    v = np.concatenate([-beta, -rng.uniform(0.28, 0.5, 20000), rng.uniform(0.0, 1.0, 2000),
                        [0.0, 1.0, -0.5, 0.5]])
    got = np.empty_like(v)
    _log1ps(v, got)
    exact = np.log1p(v.astype(np.longdouble))
    assert np.max(_ulps(got, exact)) < 1.5
    assert got[v == 0.0][0] == 0.0


def test_log1p_of_minus_one_is_the_log_of_tiny():
    """``1 + v`` rounded up to ``TINY``: finite, so that ``0·log1p(-1)`` is 0 in the solver."""
    got = np.empty(1)
    _log1ps(np.array([-1.0]), got)
    assert got[0] == pytest.approx(np.log(TINY), rel=1e-15)


def test_agrees_with_numpy_in_float64():
    """Also where ``np.longdouble`` is only float64: within 2 ulps of NumPy's own (rounded)."""
    rng = np.random.default_rng(2)
    x = rng.uniform(TINY, 1.0, 5000)
    got = np.empty_like(x)
    _logs(x, got)
    assert np.max(_ulps(got, np.log(x))) <= 2.0
    _log1ps(-x, got)
    assert np.max(_ulps(got, np.log1p(-x))) <= 2.0
