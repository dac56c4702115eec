"""The logistic loss's logs over whole arrays, taken outside the kernels.

They give the dual values and logits a round starts from, the change of the
dual sum its steps make and the gap terms the kernels leave out.

The logistic dual value and coordinate step need logs that vector
instructions take several times faster over whole arrays than scalar calls in
a kernel do; so a round takes them before its kernel (:func:`logistic_start`)
and after it (:func:`logistic_gap_sums`, :func:`_logistic_dual_change`).
"""

import numpy as np
from numba import njit

from .._vmath import TINY
from .._vmath import log as vlog
from .._vmath import log1p as vlog1p
from ._kernels import value_at
from .store import _all_ones, _array


def _logistic_dual_change(Y, sw, alpha, dalpha, dual, work=None):
    """The change of the dual sum ``Σ -(c_i ℓ_i)*(-α_i)`` that ``Δα`` makes (logistic loss).

    The other losses' kernels add it up as they step (``sums[3]`` of
    :func:`sdca_chunk`); this one needs logs, taken here over whole arrays
    (:func:`_logistic_duals`).  ``dual`` holds the dual values of ``alpha``
    (:func:`logistic_start`).

    Returns ``(change, (D, U))``: the change over the entries with ``Δα ≠ 0``,
    and what :func:`logistic_start` gives for
    ``α + Δα``, hence for the next round when ``Δα`` is committed with a step
    of 1.  ``D`` and ``U`` are ``work``'s arrays ``"dual"`` and ``"logit"``,
    or ``"dual2"`` and ``"logit2"`` when ``dual`` is the first.
    """
    m = Y.shape[1]
    c = _entry_weights(sw, m, work)
    names = ("dual2", "logit2") if work is not None and dual is _array(work, "dual", alpha) \
        else ("dual", "logit")
    D, U = _array(work, names[0], alpha), _array(work, names[1], alpha)
    _logistic_duals(Y.reshape(-1), c, alpha.reshape(-1), dalpha.reshape(-1), D.reshape(-1),
                    U.reshape(-1))
    return float(_sum_changes(dalpha.reshape(-1), dual.reshape(-1), D.reshape(-1))), (D, U)


def _entry_weights(sw, m, work=None):
    """The sample weights, one per entry of an ``n × m`` array, flattened (``sw`` for ``m = 1``).

    ``None`` when they are all 1: the logistic passes then leave them unread
    (:func:`value_at`), as the kernels do (the docs' *Algorithms*, *The local
    solver*; ``benchmarks/bench_unit_values.py --weights``).
    ``work``'s, kept from round to round, when given.
    """
    if work is not None:
        return work.entry_weights(sw, m)
    return None if _all_ones(sw) else sw if m == 1 else np.repeat(sw, m)


# The loops below run over the entries of ``n × m`` arrays flattened, take no
# branch per entry (selects instead) and call the logs of ``_vmath``, so that
# LLVM vectorises them (docs' *Design notes*, *The logistic passes over
# flattened arrays*); FMA contraction makes the logs' polynomials cheaper (and
# no less accurate).

@njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def _logistic_duals(y, c, a, da, D, U):
    """Dual values ``D`` and logits ``U`` of ``a + da`` (``da`` may be empty).

    ``c`` holds the weights, or is None when they are all 1 (left unread).
    ``D`` is ``dual_value(LOGISTIC, y, a + da, c)`` (``-inf`` outside the
    domain, NaN where an input is NaN; a subnormal ``β``'s term, below
    1e-305, is taken at the smallest normal ``β``); ``U`` is ``logit(β)``,
    ``β = (a + da)·y/c``, where ``1e-12 < β < 1 − 1e-12`` and ``c > 0``
    (where a step may start from it), NaN elsewhere.  One pass, where NumPy's
    ``log`` and ``log1p`` over arrays take several (see the docs'
    *Benchmarks*, *The local solver*; ``benchmarks/bench_logistic_logs.py``).
    """
    add = da.shape[0] > 0
    tol = 1e-12
    for e in range(y.shape[0]):
        ae = a[e] + da[e] if add else a[e]
        ce = value_at(c, e)
        beta = ae * y[e] / (1.0 if ce <= 0.0 else ce)   # (β unused where c ≤ 0)
        b = min(max(beta, 0.0), 1.0)   # (within tol of the domain: at its end)
        log_b = vlog(max(b, TINY))     # b·log b is 0 at b = 0 all the same
        log_1b = vlog1p(-b)
        entropy = -ce * (b * log_b + (1.0 - b) * log_1b)
        feasible = (ce > 0.0) & (beta >= -tol) & (beta <= 1.0 + tol)
        weightless = 0.0 if ae == 0.0 else -np.inf   # (dual_value's rule for c ≤ 0)
        D[e] = entropy if feasible else (
            weightless if ce <= 0.0 else (-np.inf if beta == beta else np.nan))
        U[e] = log_b - log_1b if (ce > 0.0) & (beta > tol) & (beta < 1.0 - tol) else np.nan


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _sum_changes(da, D, Dn):
    """``Σ Dn − D`` over the entries with ``da ≠ 0``.

    In partial sums, so that LLVM vectorises the loop: the last bits depend on
    the vector width of the machine (1e-14 relative from the sum in order).
    """
    total = 0.0
    for e in range(da.shape[0]):
        total += Dn[e] - D[e] if da[e] != 0.0 else 0.0
    return total


def logistic_start(Y, sample_weight, alpha, work=None):
    """The dual values of a logistic chunk's committed ``α`` and their logits.

    The logistic loss's dual value and coordinate step need the logs of
    ``β = α·y/c`` and ``1 − β``.  Taken here over whole arrays in a loop that
    LLVM vectorises (:func:`_logistic_duals`; scalar ``log`` calls in a
    kernel are several times slower, see the docs' *Benchmarks*, *The local
    solver*), they are computed once per round instead of inside the kernels.

    Parameters
    ----------
    Y, alpha : ndarray of shape (n, m)
        Labels (±1) and committed dual values.
    sample_weight : ndarray of shape (n,)
        Sample weights.
    work : Workspace, optional
        Where to take the arrays from (``D`` and ``U`` are its ``"dual"``
        and ``"logit"``).

    Returns
    -------
    D : ndarray of shape (n, m)
        ``dual_value`` of each entry.
    U : ndarray of shape (n, m)
        ``logit(β)`` where ``1e-12 < β < 1 − 1e-12`` (where the kernels'
        steps start from it), NaN elsewhere.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.solvers import logistic_start
    >>> D, U = logistic_start(np.ones((3, 1)), np.ones(3), np.array([[0.5], [0.25], [0.0]]))
    >>> D.ravel().round(6) + 0.0   # the entropy of β = α·y/c
    array([0.693147, 0.562335, 0.      ])
    >>> U.ravel().round(6)   # logit(β); none for β = 0
    array([ 0.      , -1.098612,       nan])
    """
    c = _entry_weights(sample_weight, Y.shape[1], work)
    D, U = _array(work, "dual", alpha), _array(work, "logit", alpha)
    _logistic_duals(Y.reshape(-1), c, alpha.reshape(-1), np.empty(0), D.reshape(-1),
                    U.reshape(-1))
    return D, U


def logistic_gap_sums(sample_weight, T, D, sums, work=None):
    """Add the logistic loss's logs and the dual values to ``sums``.

    The kernels (and :func:`gap_sums_chunk`) add the rest of the gap terms
    and write ``T = -|y·x·w|``; here ``Σ c·log1p(exp(T))`` goes to
    ``sums[0]`` (with NumPy's SIMD ``exp`` and ``log1p``, in ``work``'s array
    ``"softplus"`` when given) and ``Σ D`` (the dual values of
    :func:`logistic_start`) to ``sums[1]``.
    """
    L = _array(work, "softplus", T)
    np.exp(T, out=L)
    np.log1p(L, out=L)
    unit = work.unit_weights(sample_weight) if work is not None else _all_ones(sample_weight)
    if unit:   # weights all 1: left unread
        sums[0] += float(np.sum(L))
    else:
        # einsum, not ``@``: a BLAS product of this length runs on OpenBLAS's
        # threads, which then spin and keep every other core busy for the
        # rest of the round (docs' *Design notes*, *einsum, not a BLAS product*)
        sums[0] += float(np.einsum("i,ij->", sample_weight, L))
    sums[1] += float(np.sum(D))

