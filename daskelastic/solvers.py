"""The SDCA local solver: coordinate ascent on the CoCoA+ local subproblem.

A *chunk* is a block of rows ``X`` (dense C-contiguous or CSR), targets ``Y``
(``n × m``: ±1 per one-vs-rest class, or real targets for regression), sample
weights and the committed dual state ``alpha`` (``n × m``).  The kernels here
run one budget of coordinate steps over one chunk and write their work into
separate arrays (``dalpha``, ``dw``), so a caller can commit or discard it.

While visiting a sample for the first time in a call, the kernels also add its
loss, dual value and ``α_i·x_i·w`` at the *round-start* iterate ``w`` to
``sums`` — the duality gap of the committed state comes out of the same pass
over the data, as a sum of per-sample Fenchel–Young terms (no cancellation
between a large primal and dual).  The logistic loss is the exception: its
terms need an ``exp`` and three logs per sample, which vector instructions
take over whole arrays several times faster than scalar calls in a kernel
(NumPy's ``exp`` and ``log1p``; for the dual values a numba loop with the
vectorisable logs of ``daskelastic._vmath``).  So the logs of its dual values
are taken before the kernel (:func:`logistic_start`, which also gives each
step its starting logit), the kernel writes each sample's ``-|y_i·x_i·w|`` to
an array, and the loss's logs are added up after it
(:func:`logistic_gap_sums`).

Each kernel is compiled once per loss, with the loss a constant
(:func:`_specialise`): a kernel holds only its loss's code.

The feature weights are a ``(d + 1) × m`` array: the last row is the intercept,
the coefficient of a constant feature of value ``intercept_scaling`` (``0``
turns it off).

All kernels release the GIL and read a ``stop`` flag every ``check_every``
steps, so another thread can preempt them; they return the number of steps done.
Binary classification and single-target regression (one column of ``Y``) run
kernels written for that case, with the margins in scalar variables.
"""

import collections
import statistics
import time
import types
import typing

import numpy as np
import scipy.sparse as sp
from numba import njit
from numba import types as nb_types
from numba.extending import overload

from ._prefetch import AHEAD, MAX_ROW_ELEMENTS, prefetch, prefetch_1d, prefetch_rows, run_ahead
from ._vmath import TINY
from ._vmath import log as vlog
from ._vmath import log1p as vlog1p
from .losses import (
    LOGISTIC,
    LOGISTIC_STEP_RTOL,
    LOSSES,
    SOFTMAX,
    coordinate_step,
    dual_from_margins,
    dual_value,
    dual_value_change,
    intercept_sums,
    logistic_step_at,
    primal_loss,
    softmax_dual_value,
    softmax_intercept_sums,
    softmax_loss,
    softmax_step,
)

__all__ = ["LocalResult", "ChunkSolver", "RowBlock", "STOP_CHECK_EVERY"]

#: The stop flag is read at least this often (in coordinate steps).
STOP_CHECK_EVERY = 1024

def value_at(data, p):
    """``data[p]``, or 1 for ``data=None``: an array whose entries are all 1, left unread.

    The CSR kernels take ``data=None`` for a matrix whose values are all 1
    (:func:`unit_values`), and the logistic passes over whole arrays take
    ``None`` for sample weights that are all 1 (:func:`_entry_weights`): they
    then read no values at all, numba compiling them apart for that case with
    the 1 a constant.
    """
    # (a Python float: without JIT, NumPy would keep float32 values' products
    # with Python floats in float32, where numba computes in float64)
    return 1.0 if data is None else float(data[p])


@overload(value_at)
def _value_at(data, p):
    if isinstance(data, nb_types.NoneType):
        return lambda data, p: 1.0
    return lambda data, p: data[p]


def unit_values(X):
    """Whether ``X`` is a CSR matrix each of whose stored values is 1 (a one-hot or 0/1 table).

    The SDCA kernels then leave the values unread (``sdca_chunk(...,
    unit_values=True)``) and stream the column indices alone: 2 bytes per
    non-zero instead of 10 (``float64`` values, :func:`narrow_indices`).  On
    the flights table (7 non-zeros per row, all 1) one worker's round takes
    0.83x the time for the logistic loss, 0.76x for the hinge loss and 0.79x
    for the squared hinge (0.84-0.93x with three targets), with the same
    rounds bit for bit (``benchmarks/bench_unit_values.py``: the two kernels
    taking turns in one process).  A stored 0 makes it False (only the fast
    path is lost).
    """
    return sp.issparse(X) and X.format == "csr" and _all_ones(X.data)


def _all_ones(a):
    """Whether every entry of the array ``a`` is 1."""
    return bool(np.all(a == 1))


#: The loss code the SDCA kernels are compiled for: set in each copy that
#: ``_specialise`` makes (the plain functions below are never called).
_LOSS = -1


def _sdca_dense(X, Y, sw, alpha, dalpha, w, dw, inv_lam_n, sigma, icpt,
                order, n_steps, stop, check_every, sums, offset, Z, U, rtol):
    loss = _LOSS   # a constant: one compiled kernel per loss (_specialise)
    n, d = X.shape
    m = Y.shape[1]
    zw = np.zeros(m)
    zd = np.zeros(m)
    coef = np.zeros(m)
    row = np.zeros((3, m))   # the softmax step's dual values, margins and scratch
    loss_acc = dual_acc = az_acc = change_acc = 0.0  # in registers, not in ``sums``
    done = 0
    for s in range(n_steps):
        if s % check_every == 0 and stop[0] != 0:
            break
        first, end = run_ahead(order, s, n_steps)   # the next bucket's rows
        if end > first:
            prefetch_rows(X, first, end)
            prefetch_rows(Y, first, end)
            prefetch_1d(sw, first, end)
            prefetch_rows(alpha, first, end)
            prefetch_rows(dalpha, first, end)
            if loss == LOGISTIC:
                prefetch_rows(Z, first, end)
                prefetch_rows(U, first, end)
        i = order[s]
        for k in range(m):
            zw[k] = icpt * w[d, k]
            zd[k] = icpt * dw[d, k]
        sq = icpt * icpt
        for j in range(d):
            xij = X[i, j]
            if xij != 0.0:
                sq += xij * xij
                for k in range(m):
                    zw[k] += xij * w[j, k]
                    zd[k] += xij * dw[j, k]
        q = sigma * sq * inv_lam_n
        c = value_at(sw, i)
        any_change = False
        gap = offset + s < n
        if loss == SOFTMAX:
            loss_acc, dual_acc, az_acc, change_acc = _visit_row(
                Y[i], c, alpha[i], dalpha[i], zw, zd, sigma, q, gap, row, coef, inv_lam_n,
                loss_acc, dual_acc, az_acc, change_acc)
            any_change = True
        for k in range(m if loss != SOFTMAX else 0):
            delta, t, loss_acc, dual_acc, az_acc = _visit(
                loss, Y[i, k], c, alpha[i, k], dalpha[i, k], zw[k], zw[k] + sigma * zd[k], q,
                gap, U[i, k] if loss == LOGISTIC else 0.0, loss_acc, dual_acc, az_acc, rtol)
            if loss == LOGISTIC and gap:
                Z[i, k] = t
            change_acc += dual_value_change(loss, Y[i, k], alpha[i, k] + dalpha[i, k], c,
                                            delta)
            coef[k] = delta * inv_lam_n
            if delta != 0.0:
                dalpha[i, k] += delta
                any_change = True
        if any_change:
            for j in range(d):
                xij = X[i, j]
                if xij != 0.0:
                    for k in range(m):
                        dw[j, k] += coef[k] * xij
            if icpt != 0.0:
                for k in range(m):
                    dw[d, k] += coef[k] * icpt
        done += 1
    sums[0] += loss_acc
    sums[1] += dual_acc
    sums[2] += az_acc
    if sums.shape[0] > 3:
        sums[3] += change_acc
    return done


@njit(cache=True, nogil=True, inline="always")
def _visit(loss, y, c, a0, da, zw, z, q, gap, u0, loss_acc, dual_acc, az_acc, rtol):
    """One visit of a sample's dual value by a kernel: ``(its change, t, the sums)``.

    With ``gap`` the sample's gap terms at ``w`` (margin ``zw``) and the
    committed ``a0`` are added to the sums, except for the logistic loss's
    ``log1p(exp(-|y·zw|))`` and dual value: the kernel writes ``t = -|y·zw|``
    to its ``Z`` and :func:`logistic_gap_sums` adds those after the kernel,
    with NumPy's SIMD ``exp`` and ``log1p`` (``t`` is 0 for the other
    losses).  The step starts from ``a0 + da`` at margin ``z`` with curvature
    ``q`` (see ``coordinate_step``); on a logistic sample's first visit in
    the round (``da == 0``) from the logit ``u0`` of ``a0·y/c`` that
    :func:`logistic_start` computed (NaN where it does not apply; the other
    losses ignore it).  The logistic step stops at the relative accuracy
    ``rtol``.

    It takes values, not the kernel's arrays: with the arrays passed to this
    inlined function, one worker's logistic epoch on flights took 1.20-1.34x
    as long (``benchmarks/bench_epochs.py --base`` against the code before).
    """
    a = a0 + da
    if loss == LOGISTIC:
        yz = y * zw
        if gap:   # all but the loss's logs and the dual values' sum
            loss_acc += c * max(-yz, 0.0)
            az_acc += a0 * zw
        if da == 0.0 and u0 == u0:
            return (logistic_step_at(y, c, z, q, a0 * y / c, u0, rtol) - a, -abs(yz),
                    loss_acc, dual_acc, az_acc)
        return (coordinate_step(loss, y, a, c, z, q, rtol) - a, -abs(yz),
                loss_acc, dual_acc, az_acc)
    if gap:
        loss_acc += c * primal_loss(loss, y, zw)
        az_acc += a0 * zw
        dual_acc += dual_value(loss, y, a0, c)
    return coordinate_step(loss, y, a, c, z, q, rtol) - a, 0.0, loss_acc, dual_acc, az_acc


@njit(cache=True, nogil=True, inline="always")
def _visit_row(y, c, a0, da, zw, zd, sigma, q, gap, row, coef, inv_lam_n,
               loss_acc, dual_acc, az_acc, change_acc):
    """One visit of a softmax row: its K dual values step together (``softmax_step``).

    ``a0`` and ``da`` are the row's committed dual values and the round's
    change (updated here), ``zw`` and ``zd`` its margins at ``w`` and of
    ``Δw``; ``coef`` gets the change of ``Δw``'s coefficient of the row,
    ``row`` is scratch of shape ``(3, K)``.  With ``gap`` the row's terms at
    ``w`` and the committed ``a0`` are added to the sums.
    """
    m = a0.shape[0]
    a, z = row[0], row[1]
    if gap:
        loss_acc += c * softmax_loss(y, zw)
        dual_acc += softmax_dual_value(y, a0, c)
        for k in range(m):
            az_acc += a0[k] * zw[k]
    for k in range(m):
        a[k] = a0[k] + da[k]
        z[k] = zw[k] + sigma * zd[k]
    before = softmax_dual_value(y, a, c)
    softmax_step(y, a, c, z, q, z, row[2])    # z becomes the new dual values
    change_acc += softmax_dual_value(y, z, c) - before
    for k in range(m):
        delta = z[k] - a[k]
        coef[k] = delta * inv_lam_n
        da[k] += delta
    return loss_acc, dual_acc, az_acc, change_acc


def _sdca_dense_1(X, Y, sw, alpha, dalpha, w, dw, inv_lam_n, sigma, icpt,
                  order, n_steps, stop, check_every, sums, offset, Z, U, rtol):
    """``_sdca_dense`` for one target column: scalar margins, no zero tests.

    2.5–4× faster than the general kernel on rows of 8–40 dense features.
    """
    loss = _LOSS   # a constant: one compiled kernel per loss (_specialise)
    n, d = X.shape
    w1 = w[:, 0]
    dw1 = dw[:, 0]
    y1, a1, da1 = Y[:, 0], alpha[:, 0], dalpha[:, 0]
    zw0 = icpt * w1[d]
    sq0 = icpt * icpt
    loss_acc = dual_acc = az_acc = change_acc = 0.0
    done = 0
    countdown = 0
    for s in range(n_steps):
        if countdown == 0:   # no integer division per step
            if stop[0] != 0:
                break
            countdown = check_every
        countdown -= 1
        first, end = run_ahead(order, s, n_steps)   # the next bucket's rows
        if end > first:
            prefetch_rows(X, first, end)
            prefetch_1d(y1, first, end)
            prefetch_1d(sw, first, end)
            prefetch_1d(a1, first, end)
            prefetch_1d(da1, first, end)
            if loss == LOGISTIC:
                prefetch_rows(Z, first, end)
                prefetch_rows(U, first, end)
        i = order[s]
        zw = zw0
        zd = icpt * dw1[d]
        sq = sq0
        for j in range(d):
            xij = X[i, j]
            sq += xij * xij
            zw += xij * w1[j]
            zd += xij * dw1[j]
        gap = offset + s < n
        c = value_at(sw, i)
        delta, t, loss_acc, dual_acc, az_acc = _visit(
            loss, Y[i, 0], c, alpha[i, 0], dalpha[i, 0], zw, zw + sigma * zd,
            sigma * sq * inv_lam_n, gap, U[i, 0] if loss == LOGISTIC else 0.0,
            loss_acc, dual_acc, az_acc, rtol)
        if loss == LOGISTIC and gap:
            Z[i, 0] = t
        change_acc += dual_value_change(loss, Y[i, 0], alpha[i, 0] + dalpha[i, 0], c, delta)
        if delta != 0.0:   # (unlike _sdca_csr_1: skipping d columns pays)
            dalpha[i, 0] += delta
            coef = delta * inv_lam_n
            for j in range(d):
                dw1[j] += coef * X[i, j]
            if icpt != 0.0:
                dw1[d] += coef * icpt
        done += 1
    sums[0] += loss_acc
    sums[1] += dual_acc
    sums[2] += az_acc
    if sums.shape[0] > 3:
        sums[3] += change_acc
    return done


def _sdca_csr(data, indices, indptr, Y, sw, alpha, dalpha, w, dw,
              inv_lam_n, sigma, icpt, order, n_steps, stop, check_every, sums, offset, Z, U,
              rtol):
    loss = _LOSS   # a constant: one compiled kernel per loss (_specialise)
    n = indptr.shape[0] - 1
    d = w.shape[0] - 1
    m = Y.shape[1]
    zw = np.zeros(m)
    zd = np.zeros(m)
    coef = np.zeros(m)
    row = np.zeros((3, m))   # the softmax step's dual values, margins and scratch
    loss_acc = dual_acc = az_acc = change_acc = 0.0  # in registers, not in ``sums``
    done = 0
    for s in range(n_steps):
        if s % check_every == 0 and stop[0] != 0:
            break
        # The row visited AHEAD steps on, one row at a time (see _sdca_csr_1);
        # spelled out in each kernel: a helper taking the CSR arrays made a
        # hinge epoch slower than no prefetch at all, also inlined
        if s + 2 * AHEAD < n_steps:
            prefetch(indptr, order[s + 2 * AHEAD])
        if s + AHEAD < n_steps:
            r = order[s + AHEAD]
            p0 = indptr[r]
            p1 = max(p0, min(indptr[r + 1], p0 + MAX_ROW_ELEMENTS) - 1)
            prefetch(data, p0)
            prefetch(data, p1)
            prefetch(indices, p0)
            prefetch(indices, p1)
            prefetch(sw, r)
            prefetch(Y, (r, 0))
            prefetch(Y, (r, m - 1))
            prefetch(alpha, (r, 0))
            prefetch(alpha, (r, m - 1))
            prefetch(dalpha, (r, 0))
            prefetch(dalpha, (r, m - 1))
            if loss == LOGISTIC:
                prefetch(Z, (r, 0))
                prefetch(Z, (r, m - 1))
                prefetch(U, (r, 0))
                prefetch(U, (r, m - 1))
        i = order[s]
        for k in range(m):
            zw[k] = icpt * w[d, k]
            zd[k] = icpt * dw[d, k]
        sq = icpt * icpt
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            xij = value_at(data, p)
            sq += xij * xij
            for k in range(m):
                zw[k] += xij * w[j, k]
                zd[k] += xij * dw[j, k]
        q = sigma * sq * inv_lam_n
        c = value_at(sw, i)
        gap = offset + s < n
        if loss == SOFTMAX:
            loss_acc, dual_acc, az_acc, change_acc = _visit_row(
                Y[i], c, alpha[i], dalpha[i], zw, zd, sigma, q, gap, row, coef, inv_lam_n,
                loss_acc, dual_acc, az_acc, change_acc)
        for k in range(m if loss != SOFTMAX else 0):
            delta, t, loss_acc, dual_acc, az_acc = _visit(
                loss, Y[i, k], c, alpha[i, k], dalpha[i, k], zw[k], zw[k] + sigma * zd[k], q,
                gap, U[i, k] if loss == LOGISTIC else 0.0, loss_acc, dual_acc, az_acc, rtol)
            if loss == LOGISTIC and gap:
                Z[i, k] = t
            change_acc += dual_value_change(loss, Y[i, k], alpha[i, k] + dalpha[i, k], c,
                                            delta)
            coef[k] = delta * inv_lam_n
            dalpha[i, k] += delta
        # unconditional, even when no dual value moved (see _sdca_csr_1)
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            xij = value_at(data, p)
            for k in range(m):
                dw[j, k] += coef[k] * xij
        if icpt != 0.0:
            for k in range(m):
                dw[d, k] += coef[k] * icpt
        done += 1
    sums[0] += loss_acc
    sums[1] += dual_acc
    sums[2] += az_acc
    if sums.shape[0] > 3:
        sums[3] += change_acc
    return done


def _sdca_csr_1(data, indices, indptr, Y, sw, alpha, dalpha, w, dw,
                inv_lam_n, sigma, icpt, order, n_steps, stop, check_every, sums, offset,
                Z, U, rtol):
    """``_sdca_csr`` for one target column: the margins live in registers.

    The general kernel accumulates its margins in small arrays (one entry per
    target), which the compiler keeps in memory; with one target the scalar
    form is ~25% faster on rows of a few non-zeros.
    """
    loss = _LOSS   # a constant: one compiled kernel per loss (_specialise)
    n = indptr.shape[0] - 1
    d = w.shape[0] - 1
    w1 = w[:, 0]
    dw1 = dw[:, 0]
    y1, a1, da1 = Y[:, 0], alpha[:, 0], dalpha[:, 0]
    zw0 = icpt * w1[d]
    sq0 = icpt * icpt
    loss_acc = dual_acc = az_acc = change_acc = 0.0
    done = 0
    countdown = 0
    for s in range(n_steps):
        if countdown == 0:   # no integer division per step
            if stop[0] != 0:
                break
            countdown = check_every
        countdown -= 1
        # The row visited AHEAD steps on: the first and last lines of its
        # non-zeros (a short row's all; the hardware streams a long one) and
        # its entries of the other arrays.  Row by row, not a bucket's ~36
        # lines at each jump: one worker's epoch on flights 1.5x faster
        # (benchmarks/bench_epochs.py --C 1, with the branch-free update below).
        if s + 2 * AHEAD < n_steps:
            prefetch(indptr, order[s + 2 * AHEAD])
        if s + AHEAD < n_steps:
            r = order[s + AHEAD]
            p0 = indptr[r]
            p1 = max(p0, min(indptr[r + 1], p0 + MAX_ROW_ELEMENTS) - 1)
            prefetch(data, p0)
            prefetch(data, p1)
            prefetch(indices, p0)
            prefetch(indices, p1)
            prefetch(y1, r)
            prefetch(sw, r)
            prefetch(a1, r)
            prefetch(da1, r)
            if loss == LOGISTIC:
                prefetch(Z, (r, 0))
                prefetch(U, (r, 0))
        i = order[s]
        zw = zw0
        zd = icpt * dw1[d]
        sq = sq0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            xij = value_at(data, p)
            sq += xij * xij
            zw += xij * w1[j]
            zd += xij * dw1[j]
        gap = offset + s < n
        c = value_at(sw, i)
        delta, t, loss_acc, dual_acc, az_acc = _visit(
            loss, Y[i, 0], c, alpha[i, 0], dalpha[i, 0], zw, zw + sigma * zd,
            sigma * sq * inv_lam_n, gap, U[i, 0] if loss == LOGISTIC else 0.0,
            loss_acc, dual_acc, az_acc, rtol)
        if loss == LOGISTIC and gap:
            Z[i, 0] = t
        change_acc += dual_value_change(loss, Y[i, 0], alpha[i, 0] + dalpha[i, 0], c, delta)
        # Unconditional, even when the step left the dual value where it was:
        # a branch on ``delta != 0`` mispredicts on the hinge losses (whose
        # dual values sit at a bound for many rows) and each miss flushes the
        # update already under way; adding zeros costs less.
        dalpha[i, 0] += delta
        coef = delta * inv_lam_n
        for p in range(indptr[i], indptr[i + 1]):
            dw1[indices[p]] += coef * value_at(data, p)
        if icpt != 0.0:
            dw1[d] += coef * icpt
        done += 1
    sums[0] += loss_acc
    sums[1] += dual_acc
    sums[2] += az_acc
    if sums.shape[0] > 3:
        sums[3] += change_acc
    return done


@njit(cache=True, nogil=True, inline="always")
def _add_gap_terms(loss, Y, c, alpha, i, zw, sums, Z):
    """Add row ``i``'s loss at its margins ``zw``, its dual value and ``α·z`` to ``sums``.

    For the logistic loss, as the kernels do (``_visit``): ``-|y·z|`` goes to
    ``Z`` and :func:`logistic_gap_sums` adds the logs and dual values after.
    """
    m = Y.shape[1]
    if loss == LOGISTIC:
        for k in range(m):
            yz = Y[i, k] * zw[k]
            Z[i, k] = -abs(yz)
            sums[0] += c * max(-yz, 0.0)
            sums[2] += alpha[i, k] * zw[k]
        return
    if loss == SOFTMAX:
        sums[0] += c * softmax_loss(Y[i], zw)
        sums[1] += softmax_dual_value(Y[i], alpha[i], c)
        for k in range(m):
            sums[2] += alpha[i, k] * zw[k]
        return
    for k in range(m):
        sums[0] += c * primal_loss(loss, Y[i, k], zw[k])
        sums[1] += dual_value(loss, Y[i, k], alpha[i, k], c)
        sums[2] += alpha[i, k] * zw[k]


@njit(cache=True, nogil=True)
def _gap_sums_dense(X, Y, sw, alpha, w, loss, icpt, rows, sums, Z):
    d = X.shape[1]
    m = Y.shape[1]
    zw = np.zeros(m)
    for r in range(rows.shape[0]):
        i = rows[r]
        for k in range(m):
            zw[k] = icpt * w[d, k]
        for j in range(d):
            xij = X[i, j]
            if xij != 0.0:
                for k in range(m):
                    zw[k] += xij * w[j, k]
        _add_gap_terms(loss, Y, sw[i], alpha, i, zw, sums, Z)


@njit(cache=True, nogil=True)
def _gap_sums_csr(data, indices, indptr, Y, sw, alpha, w, loss, icpt, rows, sums, Z):
    d = w.shape[0] - 1
    m = Y.shape[1]
    zw = np.zeros(m)
    for r in range(rows.shape[0]):
        i = rows[r]
        for k in range(m):
            zw[k] = icpt * w[d, k]
        for p in range(indptr[i], indptr[i + 1]):
            xij = data[p]
            j = indices[p]
            for k in range(m):
                zw[k] += xij * w[j, k]
        _add_gap_terms(loss, Y, sw[i], alpha, i, zw, sums, Z)


def narrow_indices(X):
    """The column indices of a CSR ``X`` as ``uint16`` when it has at most 65,536 columns.

    The SDCA kernels read them in place of ``X.indices`` (:func:`sdca_chunk`):
    2 of a non-zero's 10 bytes instead of 4 of 12 (with ``float64`` values),
    in a pass whose rows come in buckets at random places.  On the flights
    table (4,198 columns, 7 non-zeros per row) one worker's epoch took 15%
    less time for the hinge loss, 11% for the squared hinge and logistic
    losses (the two layouts taking turns in one process).  Wider matrices,
    and dense ones, get ``None``: the kernels read ``X``'s own.
    """
    if not sp.issparse(X) or X.shape[1] > 1 << 16:
        return None
    return X.indices.astype(np.uint16)


def sq_norm_sum(X):
    """``Σ ‖x_i‖²`` over the rows of a dense or sparse matrix (in float64).

    A dot product for ``float64`` values, which makes no temporary array: the
    squares of half of flights' values took 4–9 ms in a worker (their array's
    pages fresh from the kernel under distributed's ``MALLOC_TRIM_THRESHOLD_``),
    the dot product under 1 ms.
    """
    data = np.ravel(X.data if sp.issparse(X) else X)
    if data.dtype == np.float64:
        return float(np.dot(data, data))
    return float(np.sum(np.square(data, dtype=np.float64)))


class Workspace:
    """Arrays a worker reuses from round to round instead of allocating them.

    Dask starts its worker processes with ``MALLOC_TRIM_THRESHOLD_`` set, which
    turns off glibc's adaptive ``mmap`` threshold: every array above 128 KiB
    is then fresh memory from the kernel, and the first write to each of its
    pages is a page fault.  With a dozen row-sized arrays per round that made
    a logistic round on the flights table 1.8× slower (46.9 against 26.5 ms,
    one process with and without the setting).  Arrays of the same name are
    handed out again while their shape and type stay the same.
    """

    def __init__(self):
        self._arrays = {}
        self._weights = None
        self._ones = None   # (sw, whether sw is all 1)

    def get(self, name, shape, dtype=np.float64):
        """An array ``name`` of ``shape`` and ``dtype`` (contents undefined)."""
        shape = tuple(shape)
        a = self._arrays.get(name)
        if a is None or a.shape != shape or a.dtype != dtype:
            a = self._arrays[name] = np.empty(shape, dtype)
        return a

    def entry_weights(self, sw, m):
        """:func:`_entry_weights` of ``sw`` and ``m``, kept while the same array ``sw`` comes back.

        Made once (a solver's packed weights, which it never writes), not
        every round: with three targets on the flights table it is a copy of
        ~1 million values, and with weights that are all 1 a pass over them.
        """
        kept = self._weights
        if kept is None or kept[0] is not sw or kept[1] != m:
            c = None if self.unit_weights(sw) else sw if m == 1 else np.repeat(sw, m)
            self._weights = kept = (sw, m, c)
        return kept[2]

    def unit_weights(self, sw):
        """Whether the weights ``sw`` are all 1: checked once, kept while ``sw`` comes back.

        The one answer for the kernels (``sdca_chunk``'s ``unit_weights``)
        and the logistic passes (:func:`_entry_weights`).
        """
        kept = self._ones
        if kept is None or kept[0] is not sw:
            self._ones = kept = (sw, _all_ones(sw))
        return kept[1]

    def clear(self):
        """Forget every array (the rows held changed)."""
        self._arrays.clear()
        self._weights = self._ones = None


def _array(work, name, like):
    """An array shaped like ``like``: ``work``'s, or a new one without a workspace."""
    return np.empty_like(like) if work is None else work.get(name, like.shape, like.dtype)


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
    (:func:`value_at`), as the kernels do (``benchmarks/bench_unit_values.py
    --weights``: 0.93× the logistic round on flights, with the kernels' share).
    ``work``'s, kept from round to round, when given.
    """
    if work is not None:
        return work.entry_weights(sw, m)
    return None if _all_ones(sw) else sw if m == 1 else np.repeat(sw, m)


# The loops below run over the entries of ``n × m`` arrays flattened, as over
# (n, m) arrays they took 2-3x as long.  They take no branch per entry
# (selects instead) and call the logs of ``_vmath``, so that LLVM vectorises
# them; FMA contraction makes the logs' polynomials cheaper (and no less
# accurate).

@njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def _logistic_duals(y, c, a, da, D, U):
    """Dual values ``D`` and logits ``U`` of ``a + da`` (``da`` may be empty).

    ``c`` holds the weights, or is None when they are all 1 (left unread).
    ``D`` is ``dual_value(LOGISTIC, y, a + da, c)`` (``-inf`` outside the
    domain, NaN where an input is NaN; a subnormal ``β``'s term, below
    1e-305, is taken at the smallest normal ``β``); ``U`` is ``logit(β)``,
    ``β = (a + da)·y/c``, where ``1e-12 < β < 1 − 1e-12`` and ``c > 0``
    (where a step may start from it), NaN elsewhere.  One pass, where NumPy's
    ``log`` and ``log1p`` over arrays took several: with the round's dual
    change, 0.61× their time per round on the flights table (327,346 rows;
    ``benchmarks/bench_logistic_logs.py``).
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
    kernel took some 6× as long as NumPy's vectorised ones, ``log1p`` 15×),
    they are computed once per round instead of inside the kernels.

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
        # rest of the round (an in-process fit took twice its wall time in
        # CPU time)
        sums[0] += float(np.einsum("i,ij->", sample_weight, L))
    sums[1] += float(np.sum(D))


@njit(cache=True, nogil=True)
def _spin(stop, n):
    """Busy-wait ``n`` iterations without the GIL, ending early on ``stop[0]``.

    Holding the GIL while spinning would starve the worker's event loop (the
    thread that delivers a stop request) of it.
    """
    acc = 0.0
    for i in range(n):
        if i % 1024 == 0 and stop[0] != 0:
            break
        acc += i * 1e-9
    return acc


def sdca_chunk(X, Y, sample_weight, alpha, dalpha, w, dw, *, loss, inv_lam_n,
               sigma, intercept_scaling, order, stop, sums,
               check_every=STOP_CHECK_EVERY, offset=0, margins=None, logits=None,
               step_rtol=LOGISTIC_STEP_RTOL, indices=None, unit_values=False,
               unit_weights=False):
    """Run ``len(order)`` SDCA steps on one chunk, visiting rows in ``order``.

    ``order`` continues a visiting sequence at position ``offset``; the first
    ``n_rows`` positions of the sequence must be a permutation of the chunk's
    rows: on those first visits the loss at ``w``, the dual value of the
    committed ``alpha`` and ``alpha·x·w`` are added to ``sums[0:3]`` — for
    the logistic loss all but the loss's ``log1p(exp(-|y·x·w|))`` and the
    dual values: ``-|y·x·w|`` is written to ``margins`` instead (``n × m``;
    :func:`logistic_gap_sums` adds the rest), and its steps read the
    ``logits`` of :func:`logistic_start`.  A fourth entry of
    ``sums``, if there is one, gets the change of the dual sum that the steps
    make, ``Σ dual_value(α + Δα) − dual_value(α)`` (0 for the logistic loss:
    see :func:`_logistic_dual_change`).  ``dalpha`` and
    ``dw`` accumulate the work; ``alpha`` and ``w`` are not written.  Returns
    the number of steps done (fewer when ``stop[0]`` was set).  The logistic
    steps stop at the relative accuracy ``step_rtol`` (0: exact; see
    ``daskelastic.losses.logistic_step_at``).  A sparse ``X``'s column
    indices are read from ``indices`` when given (the same values in a
    narrower type: :func:`narrow_indices`), and with ``unit_values`` its
    values are taken to be 1 and not read (the caller has checked that they
    are: :func:`unit_values`); with ``unit_weights`` the sample weights are
    taken to be 1 and not read (the caller has checked that they are:
    ``_all_ones``).
    """
    if margins is None or logits is None:
        if loss == LOGISTIC:
            raise ValueError("the logistic loss needs margins and logits")
        margins = logits = np.empty((0, Y.shape[1]))
    args = (Y, None if unit_weights else sample_weight, alpha, dalpha, w, dw, inv_lam_n,
            sigma, intercept_scaling, order, order.shape[0], stop, check_every, sums, offset,
            margins, logits, step_rtol)
    if sp.issparse(X):
        kernel = _KERNELS["csr_1" if Y.shape[1] == 1 else "csr"][loss]
        return kernel(None if unit_values else X.data, X.indices if indices is None else indices,
                      X.indptr, *args)
    return _KERNELS["dense_1" if Y.shape[1] == 1 else "dense"][loss](X, *args)


def gap_sums_chunk(X, Y, sample_weight, alpha, w, *, loss, intercept_scaling,
                   rows, sums, margins=None, indices=None):
    """Add loss, dual value and ``alpha·x·w`` over ``rows`` to ``sums[0:3]``.

    For the logistic loss ``-|y·x·w|`` of ``rows`` is written to ``margins``
    instead of the loss's logs and the dual values (see :func:`sdca_chunk`,
    also for ``indices``).
    """
    if margins is None:
        if loss == LOGISTIC:
            raise ValueError("the logistic loss needs margins")
        margins = np.empty((0, Y.shape[1]))
    args = (Y, sample_weight, alpha, w, loss, intercept_scaling, rows, sums, margins)
    if sp.issparse(X):
        _gap_sums_csr(X.data, X.indices if indices is None else indices, X.indptr, *args)
    else:
        _gap_sums_dense(X, *args)


class LocalResult:
    """What one worker's local solver sends back after a round.

    Made by :meth:`ChunkSolver.solve`.  Every parameter is kept as an
    attribute of the same name, except ``sums``, which is split into
    ``loss_sum``, ``dual_sum`` and ``alpha_z_sum``.

    Parameters
    ----------
    dw : ndarray of shape (d + 1, m)
        ``Σ Δα_i x_i / (λ n)`` over the worker's visited samples.
    steps : int
        Coordinate steps done.
    sums : sequence of 3 float
        The loss, dual and ``α·x·w`` sums (see the attributes).
    n_rows : int
        Rows the worker holds.
    seconds : float
        Wall time of the solver call.
    stopped : bool
        Whether the stop flag ended the round early.
    budget : int
        Coordinate steps the round was given.
    stop_latency : float or None
        Seconds from the stop request to the solver's return (stopped rounds).
    dual_change : float
        ``Σ -(c_i ℓ_i)*(-(α_i + Δα_i)) − (-(c_i ℓ_i)*(-α_i))`` over the rows
        the round changed: with ``dw``, what the driver needs to evaluate the
        dual along the added proposals.
    cpu_seconds : float or None
        CPU time of the solver's thread during the call; below ``seconds``
        when the worker shared its core with others (None where not
        measured, as on the simulated cluster).
    intercept_sums : tuple of 2 ndarray or None
        With a free intercept, :func:`~daskelastic.losses.intercept_sums`
        (``(6, m)``) of the committed ``α`` over the rows held and
        ``Σ α_i x_i`` over those with ``α_i > 0`` (``(d, m)``); None otherwise.

    Attributes
    ----------
    loss_sum, dual_sum, alpha_z_sum : float
        ``Σ c_i ℓ_i(x_i·w)``, ``Σ -(c_i ℓ_i)*(-α_i)`` and ``Σ α_i x_i·w`` over
        every sample the worker holds, at the round-start ``w`` and committed
        ``α``.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.solvers import LocalResult
    >>> result = LocalResult(np.zeros((4, 1)), steps=50, sums=(69.3, 0.0, 0.0),
    ...                      n_rows=100, seconds=0.002, stopped=True, budget=100)
    >>> result
    LocalResult(steps=50/100, n_rows=100, seconds=0.0020, stopped=True)
    >>> result.loss_sum
    69.3
    """

    __slots__ = ("dw", "steps", "loss_sum", "dual_sum", "alpha_z_sum", "n_rows",
                 "seconds", "stopped", "budget", "stop_latency", "dual_change",
                 "cpu_seconds", "intercept_sums")

    def __init__(self, dw, steps, sums, n_rows, seconds, stopped, budget,
                 stop_latency=None, dual_change=0.0, cpu_seconds=None,
                 intercept_sums=None):
        self.dw = dw
        self.steps = steps
        self.loss_sum, self.dual_sum, self.alpha_z_sum = (float(v) for v in sums)
        self.n_rows = n_rows
        self.seconds = seconds
        self.stopped = stopped
        self.budget = budget
        self.stop_latency = stop_latency
        self.dual_change = float(dual_change)
        self.cpu_seconds = cpu_seconds
        self.intercept_sums = intercept_sums

    def __repr__(self):
        return (f"LocalResult(steps={self.steps}/{self.budget}, n_rows={self.n_rows}, "
                f"seconds={self.seconds:.4f}, stopped={self.stopped})")


#: A deliberately slowed round (``slowdown > 1``) runs its budget in this many
#: slices, stalling after each.
_SLOWDOWN_SLICES = 16

#: Rounds whose compute pace sets a slowed worker's usual speed.  Short, since
#: a step gets cheaper over the first rounds (fewer inner Newton steps as the
#: duals settle): a long window kept early rounds' pace and slowed a worker by
#: more than its factor for many rounds.
_PACE_WINDOW = 5

#: Rows per bucket of the visiting order (see :class:`ChunkSolver`).  Measured
#: on the flights table by ``benchmarks/bench_bucket.py`` (327k rows, one
#: worker, rounds to a relative gap of 1e-4): 64 rows: logistic 22 rounds,
#: squared hinge 184, hinge 33; 16 rows: 13, 98, 29, for 13-48% more seconds
#: per epoch: a fit 31% (logistic) and 24% (squared hinge) faster, 20% slower
#: for the hinge.  Smaller buckets approach a random permutation's convergence
#: but lose the sweep's memory throughput: a fully random order cost 2.8-5x an
#: epoch in buckets of 64, 1.15-1.6x since the kernels prefetch each next
#: bucket (:mod:`daskelastic._prefetch`), and 8-row buckets then fit logistic
#: regression and the squared hinge 5-9% faster than 16 (the hinge 4% slower).
#: With several workers the CoCoA+ aggregation, not the visiting order, sets
#: the number of rounds.
BUCKET_ROWS = 16


class RowBlock(typing.NamedTuple):
    """The rows of several chunks in one block, as they move between workers.

    Made by :meth:`ChunkSolver.take_rows`, added by
    :meth:`ChunkSolver.add_rows`.  The rows are in no particular chunk order
    (the packed order of the worker they come from); ``rows`` says where each
    chunk's rows are.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_rows, d)
        The rows.
    Y : ndarray of shape (n_rows, m)
        Encoded targets.
    sample_weight : ndarray of shape (n_rows,)
        Weights of the rows.
    alpha : ndarray of shape (n_rows, m)
        Committed dual state of the rows.
    rows : dict
        ``{chunk_id: positions}``: the block's rows that hold the chunk's
        rows, in the chunk's own row order.
    """

    X: object
    Y: np.ndarray
    sample_weight: np.ndarray
    alpha: np.ndarray
    rows: dict


for _field, _doc in (("X", "The rows."), ("Y", "Encoded targets."),
                     ("sample_weight", "Weights of the rows."),
                     ("alpha", "Committed dual state of the rows."),
                     ("rows", "Where each chunk's rows are in the block.")):
    getattr(RowBlock, _field).__doc__ = _doc
del _field, _doc


def _stack_rows(Xs):
    """Stack row blocks (dense or CSR) into one, CSR if any is sparse (a block alone as it is)."""
    if len(Xs) == 1 and sp.issparse(Xs[0]) and Xs[0].format == "csr":
        # as it is: ``csr_matrix(X)`` copies the arrays of a block that
        # arrived in a message (views of its buffer), which took up to 50 ms
        # for half of the flights table on a worker
        return Xs[0]
    dtype = np.result_type(*[x.dtype for x in Xs])
    if any(sp.issparse(x) for x in Xs):
        Xs = [sp.csr_matrix(x, dtype=dtype) for x in Xs]
        return Xs[0] if len(Xs) == 1 else sp.vstack(Xs, format="csr")
    Xs = [np.asarray(x, dtype=dtype) for x in Xs]
    return Xs[0] if len(Xs) == 1 else np.vstack(Xs)


def _gather_rows(X, positions):
    """Rows ``positions`` of ``X`` (C-contiguous, or CSR with sorted indices)."""
    X = X[positions]
    if sp.issparse(X):
        X = X.tocsr()
        if not X.has_sorted_indices:   # computed: a row gather keeps each row's order
            X.sort_indices()
        return X
    return np.ascontiguousarray(X)


def _own(a, copy):
    """``a`` as a C-contiguous, writable array: a copy when ``copy`` or when it is not."""
    if copy or not (a.flags.c_contiguous and a.flags.writeable):
        return np.array(a, order="C")
    return a


def _own_rows(X):
    """``X`` (dense, or CSR with sorted indices) in C-contiguous, writable arrays.

    The arrays themselves when they are (the kernels only read them), copies
    otherwise.
    """
    if not sp.issparse(X):
        return _own(X, False)
    if not X.has_sorted_indices:
        return X.sorted_indices()
    if not all(a.flags.writeable and a.flags.c_contiguous
               for a in (X.data, X.indices, X.indptr)):
        return sp.csr_matrix((np.array(X.data), np.array(X.indices), np.array(X.indptr)),
                             shape=X.shape)
    return X


def _empty_packing(m):
    """The packing of a solver that holds no rows."""
    return np.zeros((0, 0)), np.zeros((0, m)), np.zeros(0), np.zeros((0, m))


class ChunkSolver:
    """The chunks one worker holds, their dual state and the pending round.

    The rows of all chunks are packed into one local matrix, in a random row
    order fixed at packing time, and each round visits them bucket by bucket:
    the buckets (``BUCKET_ROWS`` consecutive packed rows) in a fresh random
    order, the rows of a bucket in sequence.  Three measured facts shape this:

    - visiting chunk after chunk (a block order) converges several times
      slower than one permutation of all rows, because it drives the dual
      along the low-curvature direction that separates the blocks;
    - visiting rows in a fully random order costs several times more per
      step than a sequential sweep on a large sparse matrix (every step is a
      cache miss);
    - the bucket size trades the two: small buckets converge in fewer rounds,
      large ones run an epoch faster (``BUCKET_ROWS`` records the numbers).

    Shuffled packing plus bucketed visits gets both the convergence of a
    random permutation and nearly the memory throughput of a sweep.  The
    packing is rebuilt only when the set of chunks changes; chunks whose rows
    came in a random order (``add_chunk(..., shuffled=True)``) are stacked as
    they are when they are all the solver packs.  With sparse rows
    of at most 65,536 columns the kernels read a ``uint16`` copy of the
    column indices (``narrow_indices``), and the values not at all when
    they are all 1 (``unit_values``, a one-hot table), nor the sample
    weights when they are all 1 (no weights given): fewer bytes per visit.

    A round (:meth:`solve`) leaves its ``Δα`` pending; :meth:`commit` adds
    ``t·Δα`` to the dual state (``t`` the driver's step), :meth:`discard` forgets it.  This is the
    worker-side half of the commit protocol that lets the driver drop a late
    result without breaking ``w = Σ α_i x_i / (λ n)``.

    Parameters
    ----------
    loss : int
        Loss code (see ``daskelastic.losses.LOSSES``).
    n_targets : int
        Columns of ``Y`` (one-vs-rest classes or regression targets).
    intercept_scaling : float
        Value of the constant intercept feature; ``0`` for no intercept.
    seed : int
        Seed of the packing order.
    free_intercept : bool
        The intercept is not penalised: ``w``'s last row is the intercept
        ``b`` that the driver sets (``intercept_scaling`` must be 1), and
        each result carries :func:`~daskelastic.losses.intercept_sums` of the
        committed ``α`` (see :func:`daskelastic.objective.free_intercept_gap`).

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic.solvers import ChunkSolver
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> Y = np.sign(X[:, :1])
    >>> solver = ChunkSolver(loss=0, n_targets=1, intercept_scaling=1.0)  # logistic
    >>> solver.add_chunk(0, X[:60], Y[:60], np.ones(60))
    >>> solver.add_chunk(1, X[60:], Y[60:], np.ones(40))
    >>> solver.chunk_ids, solver.n_rows
    ([0, 1], 100)
    >>> result = solver.solve(np.zeros((4, 1)), round_id=0, inv_lam_n=1.0, sigma=1.0)
    >>> result.steps, result.stopped
    (100, False)
    >>> round(result.loss_sum, 4)   # 100 log 2: every margin is 0 at w = 0
    69.3147
    >>> solver.commit(0, gamma=1.0)
    >>> bool(np.allclose(solver.weighted_alpha_sum(3) * 1.0, result.dw))
    True
    """

    def __init__(self, loss, n_targets, intercept_scaling, seed=0, free_intercept=False):
        if free_intercept and intercept_scaling != 1.0:
            raise ValueError("a free intercept needs intercept_scaling=1, got "
                             f"{intercept_scaling}")
        self.loss = loss
        self.n_targets = n_targets
        self.intercept_scaling = float(intercept_scaling)
        self.seed = seed
        self.free_intercept = bool(free_intercept)
        self.pending = None   # (round_id, dalpha over the packed rows)
        self.stop = np.zeros(1, dtype=np.int64)
        self.running = None    # id of the round being solved
        self._stop_round = None  # the round a stop was requested for
        self._stop_time = None
        self._step_seconds = collections.deque(maxlen=_PACE_WINDOW)  # compute s/step
        self._unpacked = {}   # chunk_id -> (X, Y, sw, alpha) not packed yet
        self._shuffled = set()   # ids of unpacked chunks whose rows came shuffled
        self._rows = {}       # chunk_id -> positions of its rows in the packing
        self._blocks = []     # RowBlocks added by add_rows, not packed yet
        self._packed = None   # (X, Y, sw, alpha)
        self._indices = None  # narrow_indices of the packed X
        self._unit = False    # unit_values of the packed X
        self._work = Workspace()   # per-round arrays, sized to the packed rows
        # The logistic dual values and logits of α + Δα of the pending round;
        # once committed with a step of 1, those of the committed α, keyed by
        # that α array (a repacking makes a new one): the next round then
        # takes no log before its kernel (see logistic_start)
        self._pending_duals = None
        self._alpha_duals = None   # (alpha, (D, U))

    @classmethod
    def for_problem(cls, problem, seed=0):
        """The solver of a :class:`~daskelastic.driver.Problem`'s chunks on one worker.

        Parameters
        ----------
        problem : daskelastic.driver.Problem
            The problem; its loss, targets and intercept set the solver's.
        seed : int
            Seed of the packing order.

        Returns
        -------
        ChunkSolver
            A solver holding no chunks yet.
        """
        return cls(problem.loss, problem.n_targets, problem.intercept_scaling, seed=seed,
                   free_intercept=problem.free_intercept)

    # -- chunk membership -------------------------------------------------
    def add_chunk(self, chunk_id, X, Y, sample_weight, alpha=None, shuffled=False):
        """Hold a chunk, with its dual state.

        The chunk is packed with the others when the next round starts.  The
        packing shuffles the rows (see the class), unless every chunk it packs
        was added with ``shuffled=True`` and nothing else is held: then it
        stacks them as they are, which saves a gather of every row (half of
        the flights table on a worker: 33-41 ms to pack, 10 ms stacked).

        Parameters
        ----------
        chunk_id : int
            Id of the chunk, not held yet.
        X : ndarray or sparse matrix of shape (n_rows, d)
            The chunk's rows.  The solver may keep ``X``'s own arrays (a lone
            chunk added with ``shuffled=True``) and reads facts off them
            when it packs (whether all values are 1, the column indices in a
            narrower type): do not change ``X`` while the chunk is held.
        Y : ndarray of shape (n_rows, m) or (n_rows,)
            Encoded targets.
        sample_weight : ndarray of shape (n_rows,)
            Weights ``c_i`` of the rows.
        alpha : ndarray of shape (n_rows, m), optional
            Committed dual state of the rows; zeros when None.
        shuffled : bool
            Whether the rows are already in a random order (a random sample
            of the training rows, as ``daskelastic.placement.make_chunks``
            cuts them with ``shuffle``).  Leave it False for rows in the
            input's order: visiting sorted rows bucket by bucket converges
            far slower.

        Raises
        ------
        ValueError
            When the chunk is already held.
        RuntimeError
            When a round's work is pending (neither committed nor discarded).
        """
        self._check_no_pending("add a chunk")
        if chunk_id in self._held():
            raise ValueError(f"chunk {chunk_id} is already held")
        Y = np.asarray(Y, dtype=np.float64).reshape(X.shape[0], -1)
        if alpha is None:
            alpha = np.zeros((X.shape[0], self.n_targets))
        alpha = np.asarray(alpha, dtype=np.float64).reshape(X.shape[0], self.n_targets)
        self._unpacked[chunk_id] = (X, Y, np.asarray(sample_weight, dtype=np.float64),
                                    alpha)
        if shuffled:
            self._shuffled.add(chunk_id)
        else:
            self._shuffled.discard(chunk_id)

    def remove_chunk(self, chunk_id):
        """Release a chunk and return its data and dual state.

        Parameters
        ----------
        chunk_id : int
            Id of a chunk held.

        Returns
        -------
        tuple
            ``(X, Y, sample_weight, alpha)`` of the chunk's rows in their
            original order, with the committed ``α``.  As with :meth:`get_chunk`,
            the arrays :meth:`add_chunk` stored for a chunk it added since the
            last round, copies otherwise.
        """
        self._check_no_pending("remove a chunk")
        if chunk_id in self._unpacked:
            return self._unpacked.pop(chunk_id)
        return self.remove_chunks([chunk_id])[chunk_id]

    def remove_chunks(self, chunk_ids):
        """Release several chunks, repacking the rest once.

        Parameters
        ----------
        chunk_ids : list of int
            Ids of chunks held.

        Returns
        -------
        dict
            ``{chunk_id: (X, Y, sample_weight, alpha)}`` as :meth:`remove_chunk`
            returns them.
        """
        chunk_ids = self._removable(chunk_ids)
        out = {cid: self.get_chunk(cid) for cid in chunk_ids}
        self._drop(chunk_ids)
        return out

    def take_rows(self, chunk_ids):
        """Release chunks and return their rows as one :class:`RowBlock`, to move them.

        The block holds the rows in their packed order, gathered in one
        sequential pass; a worker giving all its rows away (a scale-in) hands
        over its packed arrays without a copy.  Taking the chunks one by one,
        each chunk's rows in their own order, gathered the rows at random:
        ~21 ms for half the flights table, against ~2 ms.  Chunks added with
        :meth:`add_chunk` since the last round go as they were added, stacked;
        a chunk that came in a block not packed yet is gathered from it (and
        the worker's other rows are repacked, as when a packed chunk leaves).

        Parameters
        ----------
        chunk_ids : list of int
            Ids of chunks held.

        Returns
        -------
        RowBlock
            The chunks' rows, targets, weights and committed ``α``.

        Raises
        ------
        KeyError
            When a chunk is not held.
        ValueError
            When ``chunk_ids`` is empty.
        RuntimeError
            When a round's work is pending.
        """
        chunk_ids = self._removable(chunk_ids)
        if not chunk_ids:
            raise ValueError("no chunks to take")
        in_blocks = self._block_chunk_ids()
        if any(c in self._unpacked or c in in_blocks for c in chunk_ids):
            # some chunks were added since the last round: stacked as they are
            # (nothing is packed for them)
            parts = [self.get_chunk(c) for c in chunk_ids]
            sizes = np.cumsum([0] + [p[0].shape[0] for p in parts])
            block = RowBlock(_stack_rows([p[0] for p in parts]),
                             *(np.concatenate([p[k] for p in parts]) for k in (1, 2, 3)),
                             rows={c: np.arange(sizes[i], sizes[i + 1])
                                   for i, c in enumerate(chunk_ids)})
            self._drop(chunk_ids)
            return block
        positions = np.sort(np.concatenate([self._rows[c] for c in chunk_ids]))
        n = self._packed[0].shape[0]
        if positions.shape[0] == n:
            # every packed row goes: the packed arrays themselves, no copy
            block = RowBlock(*self._packed, rows={c: self._rows[c] for c in chunk_ids})
        else:
            X, Y, sw, alpha = self._packed
            block = RowBlock(_gather_rows(X, positions), Y[positions], sw[positions],
                             alpha[positions],
                             rows={c: np.searchsorted(positions, self._rows[c])
                                   for c in chunk_ids})
        self._drop(chunk_ids)
        return block

    def add_rows(self, block):
        """Hold the chunks of a :class:`RowBlock` (from :meth:`take_rows`), with their ``α``.

        The rows are packed with the others, shuffled afresh, when the next
        round starts, exactly as if the chunks had been added one by one with
        :meth:`add_chunk`.  (Merging the block into the packed rows, each
        keeping its order, is cheaper, ~43 against ~52 ms on the flights
        table, but the rounds after the move converged slower: 14 rounds
        after a move, the gap was 1.7× and 4.6× the fresh shuffle's, on
        100,000 flights rows in-process, two seeds.)

        Parameters
        ----------
        block : RowBlock
            Rows of chunks not held here.

        Raises
        ------
        ValueError
            When a chunk is already held, or the block's arrays or row
            positions do not match.
        RuntimeError
            When a round's work is pending.
        """
        self._check_no_pending("add chunks")
        held = self._held()
        again = sorted(c for c in block.rows if c in held)
        if again:
            raise ValueError(f"chunks {again} are already held")
        n = block.X.shape[0]
        shape = (n, self.n_targets)
        Y, alpha = (np.asarray(a, dtype=np.float64) for a in (block.Y, block.alpha))
        sw = np.asarray(block.sample_weight, dtype=np.float64)
        if Y.size != n * self.n_targets or alpha.size != n * self.n_targets or sw.size != n \
                or Y.shape[0] != n or alpha.shape[0] != n:
            raise ValueError(f"the block's targets, dual state and weights must have "
                             f"{n} rows and {self.n_targets} columns")
        rows = {c: np.asarray(r, dtype=np.int64).reshape(-1) for c, r in block.rows.items()}
        covered = np.zeros(n, dtype=np.int64)
        for r in rows.values():
            if r.size and (r.min() < 0 or r.max() >= n):
                raise ValueError(f"the block's row positions must be in [0, {n})")
            np.add.at(covered, r, 1)
        if not np.all(covered == 1):
            raise ValueError("the block's row positions must cover each of its rows once")
        self._blocks.append(RowBlock(block.X, Y.reshape(shape), sw.reshape(n),
                                     alpha.reshape(shape), rows))

    def get_chunk(self, chunk_id):
        """The data and committed dual state of a chunk held.

        Parameters
        ----------
        chunk_id : int
            Id of a chunk held.

        Returns
        -------
        tuple
            ``(X, Y, sample_weight, alpha)`` of the chunk's rows in their
            original order, with the committed ``α``.  The arrays
            :meth:`add_chunk` stored for a chunk it added since the last
            round; copies otherwise.
        """
        if chunk_id in self._unpacked:
            return self._unpacked[chunk_id]
        for block in self._blocks:
            if chunk_id in block.rows:
                rows = block.rows[chunk_id]
                return block.X[rows], block.Y[rows], block.sample_weight[rows], block.alpha[rows]
        X, Y, sw, alpha = self._packed
        rows = self._rows[chunk_id]
        return X[rows], Y[rows], sw[rows], alpha[rows]

    @property
    def chunk_ids(self):
        """Ids of the chunks held, sorted."""
        return sorted(self._held())

    @property
    def n_rows(self):
        """Rows held over all chunks."""
        return (sum(r.shape[0] for r in self._rows.values())
                + sum(c[0].shape[0] for c in self._unpacked.values())
                + sum(b.X.shape[0] for b in self._blocks))

    def alpha_by_chunk(self):
        """The committed dual state of every chunk held.

        Returns
        -------
        dict
            ``{chunk_id: α}``, copies of shape ``(rows of the chunk, m)``.
        """
        return {cid: self.get_chunk(cid)[3].copy() for cid in self.chunk_ids}

    @property
    def _unit_weights(self):
        """Whether the packed weights are all 1: then unread (:meth:`Workspace.unit_weights`)."""
        sw = self._packed[2] if self._packed is not None else None
        return sw is not None and sw.size > 0 and self._work.unit_weights(sw)

    def _held(self):
        return {*self._rows, *self._unpacked, *self._block_chunk_ids()}

    def _block_chunk_ids(self):
        """Ids of the chunks in blocks :meth:`add_rows` stored, not packed yet."""
        return {c for b in self._blocks for c in b.rows}

    def _removable(self, chunk_ids):
        """``chunk_ids`` as a list, once no round is pending and each is held."""
        self._check_no_pending("remove chunks")
        chunk_ids = list(dict.fromkeys(chunk_ids))    # each once, in order
        missing = sorted(set(chunk_ids) - self._held())
        if missing:
            raise KeyError(f"chunks {missing} are not held")
        return chunk_ids

    def _check_no_pending(self, what):
        if self.pending is not None:
            raise RuntimeError(f"cannot {what} while round {self.pending[0]} is pending")

    def _pack(self):
        if self._unpacked or self._blocks or self._packed is None:
            self._repack()
        return self._packed

    def _drop(self, chunk_ids):
        """Forget chunks; the rows left are packed afresh when any were packed."""
        chunk_ids = set(chunk_ids)
        for c in chunk_ids:
            self._unpacked.pop(c, None)
        in_blocks = self._block_chunk_ids()
        if any(c in self._rows or c in in_blocks for c in chunk_ids):
            self._repack(drop=chunk_ids)

    def _repack(self, drop=()):
        """Pack every chunk held (but those in ``drop``) into one shuffled matrix.

        The rows are gathered once from where they are: the packed matrix for
        the chunks packed before, the blocks and the arrays :meth:`add_rows`
        and :meth:`add_chunk` stored for the others.  (Taking the packed
        chunks out first, then stacking and then shuffling, copied the rows
        three times.)
        """
        self._work.clear()
        ids = [c for c in self.chunk_ids if c not in drop]
        if not ids:
            self._packed, self._rows, self._unpacked, self._blocks = \
                _empty_packing(self.n_targets), {}, {}, []
            self._indices, self._unit = None, False
            return
        # the sources, stacked: the packed matrix, the blocks, then the chunks
        # added one by one; ``index`` lists, chunk by chunk in id order, the
        # rows of that stack that hold the chunk's rows
        sources, starts = [], {}
        offset = 0
        if any(c in self._rows for c in ids):
            sources.append(self._packed)
            offset = self._packed[0].shape[0]
        for block in self._blocks:
            if all(c in drop for c in block.rows):
                continue    # given away before it was packed: not a source
            for c, r in block.rows.items():
                starts[c] = r + offset
            sources.append(block)
            offset += block.X.shape[0]
        for c in ids:
            if c in self._unpacked:
                size = self._unpacked[c][0].shape[0]
                starts[c] = np.arange(offset, offset + size)
                sources.append(self._unpacked[c])
                offset += size
        index = [starts[c] if c in starts else self._rows[c] for c in ids]
        sizes = [r.shape[0] for r in index]
        n = sum(sizes)
        X = _stack_rows([src[0] for src in sources])

        def stacked(k):
            parts = [src[k] for src in sources]
            return parts[0] if len(parts) == 1 else np.concatenate(parts)

        Y, sw, alpha = stacked(1), stacked(2), stacked(3)
        if all(c in self._unpacked and c in self._shuffled for c in ids):
            # only chunks whose rows came in a random order: packed as they
            # are stacked (in id order), in writable arrays (a message's
            # buffers may be read-only, for which numba would compile its
            # kernels anew), the dual state always the solver's own
            self._packed = (_own_rows(X), _own(Y, len(ids) == 1),
                            _own(sw, len(ids) == 1), _own(alpha, len(ids) == 1))
            where = np.arange(n)
        else:
            rng = np.random.default_rng([self.seed, *ids[:8], n])
            perm = rng.permutation(n)           # packed row p holds original row perm[p]
            where = np.empty(n, dtype=np.int64)  # original row r sits at where[r]
            where[perm] = np.arange(n)
            take = np.concatenate(index)[perm]   # packed row p: row take[p] of the stack
            self._packed = (_gather_rows(X, take), np.ascontiguousarray(Y[take]),
                            np.ascontiguousarray(sw[take]),
                            np.ascontiguousarray(alpha[take]))
        self._indices = narrow_indices(self._packed[0])
        self._unit = unit_values(self._packed[0])
        self._rows = {}
        start = 0
        for c, size in zip(ids, sizes):
            self._rows[c] = where[start:start + size]
            start += size
        self._unpacked, self._blocks, self._shuffled = {}, [], set()

    # -- one round ----------------------------------------------------------
    def solve(self, w, *, round_id, inv_lam_n, sigma, steps=None, seed=0,
              check_every=STOP_CHECK_EVERY, slowdown=1.0):
        """Run one round of local SDCA from ``w`` and return a :class:`LocalResult`.

        The visiting order is drawn from ``seed`` and ``round_id``; the loss
        and dual sums of the result cover every row held, at ``w`` and the
        committed ``α`` — also when the round was stopped early (the rows not
        visited get a gap-only pass).  The round's ``Δα`` stays pending until
        :meth:`commit` or :meth:`discard`.

        Parameters
        ----------
        w : ndarray of shape (d + 1, m)
            The round-start iterate.
        round_id : int
            Id of the round (for the pending work and stop requests).
        inv_lam_n : float
            ``1 / (λ n)`` of the problem the dual state belongs to.
        sigma : float
            Subproblem parameter ``σ′``.
        steps : int, optional
            Coordinate-step budget; default one pass over the rows held.
        seed : int
            Seed of the visiting order (with ``round_id``).
        check_every : int
            The stop flag is read every this many steps.
        slowdown : float
            ``slowdown > 1`` makes this worker a straggler on purpose (see
            :mod:`daskelastic.testing`): the budget runs in slices, and after
            each slice the solver spins until the slice has taken ``slowdown``
            times its compute time, or times the worker's usual pace if that
            is longer, ending at once when it is asked to stop.

        Returns
        -------
        LocalResult
            The proposed ``Δw``, the steps done and the gap sums.

        Raises
        ------
        RuntimeError
            When the work of an earlier round is still pending.
        """
        self._check_no_pending("start a round")
        self.running = round_id
        self.stop[0] = 1 if self._stop_round == round_id else 0
        cpu0 = time.thread_time()
        t0 = time.perf_counter()
        X, Y, sw, alpha = self._pack()
        work = self._work
        w = np.ascontiguousarray(w, dtype=np.float64)
        dw = np.zeros_like(w)
        dalpha = _array(work, "dalpha", alpha)
        dalpha.fill(0.0)
        sums = np.zeros(4)   # loss, dual, α·z at w; the dual change of Δα
        n = X.shape[0]
        budget = n if steps is None else int(steps)
        rng = np.random.default_rng([seed, round_id])
        visits = _visit_order(rng, n, budget, work=work)   # max(budget, n) row indices
        order = visits[:budget]
        done = 0
        dual = None
        margins = logits = None
        self._pending_duals = None
        if self.loss == LOGISTIC:   # the logs out of the kernel: see logistic_start
            known = self._alpha_duals
            if known is not None and known[0] is alpha:
                # (the round's dual change writes the other pair of arrays,
                # so they stay valid if the round is discarded)
                dual, logits = known[1]
            else:
                self._alpha_duals = None
                dual, logits = logistic_start(Y, sw, alpha, work)
            margins = _array(work, "margins", alpha)
        if slowdown > 1.0 and budget > 0 and n > 0:
            # load or compile the kernel first: a slowdown multiplies compute
            # time, not a one-off start-up cost
            sdca_chunk(X, Y, sw, alpha, dalpha, w, dw, loss=self.loss, inv_lam_n=inv_lam_n,
                       sigma=sigma, intercept_scaling=self.intercept_scaling,
                       order=order[:0], stop=self.stop, sums=sums, check_every=check_every,
                       margins=margins, logits=logits, indices=self._indices,
                       unit_values=self._unit,
                       unit_weights=self._unit_weights)
        if budget > 0 and n > 0:
            n_slices = _SLOWDOWN_SLICES if slowdown > 1.0 else 1
            bounds = np.linspace(0, budget, n_slices + 1).astype(np.int64)
            for a, b in zip(bounds[:-1], bounds[1:]):
                t_slice = time.perf_counter()
                did = sdca_chunk(X, Y, sw, alpha, dalpha, w, dw, loss=self.loss,
                                 inv_lam_n=inv_lam_n, sigma=sigma,
                                 intercept_scaling=self.intercept_scaling,
                                 order=order[a:b], stop=self.stop, sums=sums,
                                 check_every=check_every, offset=int(a),
                                 margins=margins, logits=logits, indices=self._indices,
                                 unit_values=self._unit,
                                 unit_weights=self._unit_weights)
                done += did
                compute = time.perf_counter() - t_slice
                if a == 0 and did > 0:
                    # the pace of this worker's compute, measured while the
                    # round's other solvers run too: the first slice (or the
                    # whole budget when the round is not slowed)
                    self._step_seconds.append(compute / did)
                if did < b - a or self.stop[0]:
                    break
                if slowdown > 1.0:
                    self._stall(self._slowed_seconds(slowdown, compute, did) - compute)
        if done < n:  # rows not visited yet: their gap terms in one sequential pass
            rest = np.sort(visits[done:n])
            gap_sums_chunk(X, Y, sw, alpha, w, loss=self.loss,
                           intercept_scaling=self.intercept_scaling, rows=rest, sums=sums,
                           margins=margins, indices=self._indices)
        if dual is not None:
            logistic_gap_sums(sw, margins, dual, sums, work)
        # added up by the kernels as they stepped, except the logistic loss's
        change = sums[3]
        if dual is not None and done:
            change, self._pending_duals = _logistic_dual_change(Y, sw, alpha, dalpha, dual, work)
        icpt_sums = self._intercept_sums(X, Y, sw, alpha, dual) if self.free_intercept \
            else None
        cpu = time.thread_time() - cpu0
        t_end = time.perf_counter()
        stopped = done < budget
        latency = t_end - self._stop_time if stopped and self._stop_time else None
        self.running = None
        self.pending = (round_id, dalpha)
        return LocalResult(dw, done, sums[:3], n, t_end - t0, stopped, budget,
                           stop_latency=latency, dual_change=change, cpu_seconds=cpu,
                           intercept_sums=icpt_sums)

    def _intercept_sums(self, X, Y, sw, alpha, dual=None):
        """:func:`~daskelastic.losses.intercept_sums` of the committed ``α``, and ``Σ α_i x_i``
        over the rows with ``α_i > 0``; for the softmax loss
        :func:`~daskelastic.losses.softmax_intercept_sums` and ``Σ x_i α_iᵀ`` over
        each class's rows (shape ``(K, d, K)``)."""
        m = self.n_targets
        if self.loss == SOFTMAX:
            out = np.zeros((m + 3, m))
            if X.shape[0] == 0:
                return out, None
            softmax_intercept_sums(Y, sw, alpha, out)
            labels = np.argmax(Y, axis=1)
            by_class = np.zeros((m, X.shape[1], m))
            for j in range(m):
                rows = np.flatnonzero(labels == j)
                if rows.size:
                    by_class[j] = np.asarray(X[rows].T @ alpha[rows])
            return out, by_class
        out = np.zeros((6, self.n_targets))
        if X.shape[0] == 0:
            return out, None   # (no rows: the driver adds nothing)
        known = np.empty((0, self.n_targets)) if dual is None else dual
        intercept_sums(self.loss, Y, sw, alpha, known, out)
        return out, np.asarray(X.T @ np.maximum(alpha, 0.0))

    def request_stop(self, round_id):
        """Ask round ``round_id`` to stop at its next check of the stop flag.

        Safe to call from another thread while :meth:`solve` runs (the numba
        kernels release the GIL), and before the round has started: the round
        then stops at once.  A request for another round is ignored.

        Parameters
        ----------
        round_id : int
            The round to stop.
        """
        self._stop_time = time.perf_counter()
        self._stop_round = round_id
        if self.running == round_id:
            self.stop[0] = 1

    def _slowed_seconds(self, slowdown, compute, steps):
        """How long a slice of ``steps`` steps takes on a worker ``slowdown`` times slower.

        ``slowdown`` times the larger of the slice's own compute time and the
        worker's usual pace (the median seconds per step of its recent rounds,
        measured while the other workers compute too).  The slice's own time
        alone falls short when the other workers of the round have finished
        and the straggler has a core to itself: a straggler slowed 4× on a
        machine whose cores its workers share then took only about 2.4× as
        long as the others (flights, 4 workers on 2 cores, median of 42
        rounds), not 4×.
        """
        usual = statistics.median(self._step_seconds) * steps if self._step_seconds else 0.0
        return slowdown * max(compute, usual)

    def _stall(self, seconds):
        """Keep the CPU busy for up to ``seconds``; return at once on a stop request.

        A slowed worker spins rather than sleeps: when several workers share
        a machine's cores, a sleeping straggler would hand its CPU share to
        the others and make them faster, which a slow machine of a real
        cluster does not do.
        """
        end = time.perf_counter() + seconds
        while not self.stop[0] and time.perf_counter() < end:
            _spin(self.stop, 50_000)   # ~50 µs, without the GIL

    def commit(self, round_id, gamma=1.0):
        """Add ``t·Δα`` of round ``round_id`` to the dual state.

        Parameters
        ----------
        round_id : int
            The pending round.
        gamma : float
            The step ``t`` the driver added the round's proposals with.

        Raises
        ------
        RuntimeError
            When round ``round_id`` has no pending work.
        """
        _, dalpha = self._take_pending(round_id)
        alpha = self._packed[3]
        duals, self._pending_duals = self._pending_duals, None
        # with a step of 1 the round's dual change took the dual values and
        # logits of the new α; else the next round takes them afresh
        self._alpha_duals = (alpha, duals) if gamma == 1.0 and duals is not None else None
        if gamma != 1.0:
            dalpha *= gamma   # in place: no row-sized temporary (see Workspace)
        alpha += dalpha

    def discard(self, round_id):
        """Forget the pending work of round ``round_id``.

        Parameters
        ----------
        round_id : int
            The pending round.

        Raises
        ------
        RuntimeError
            When round ``round_id`` has no pending work.
        """
        self._take_pending(round_id)
        self._pending_duals = None   # (a kept α's dual values stay valid)

    def start_duals(self, w, scales=()):
        """Set every row's committed ``α`` to the dual values that match ``w``.

        ``α_i = -c_i ℓ'(x_i·w)`` (:func:`~daskelastic.losses.dual_from_margins`):
        a warm start from earlier coefficients, the dual optimum when ``w``
        is the primal optimum of the same problem.  Any ``α`` so set is
        feasible, so the duality gap stays a certificate.

        Parameters
        ----------
        w : ndarray of shape (d + 1, m)
            Coefficients, the intercept coefficient in the last row.
        scales : sequence of float
            Scales ``s`` at which to sum the dual values of ``s·α``, for the
            caller to choose one (:meth:`scale_duals`).

        Returns
        -------
        sums : ndarray of shape (len(scales),)
            ``Σ -(c_i ℓ_i)*(-s α_i)`` for each scale (``-inf`` where ``s·α``
            leaves the conjugate's domain).
        alpha_sum : ndarray of shape (d + 1, m)
            :meth:`weighted_alpha_sum` of the new ``α``.

        Raises
        ------
        RuntimeError
            When a round's work is pending.
        """
        self._check_no_pending("set the dual state")
        scales = np.asarray(scales, dtype=np.float64)
        sums = np.zeros(scales.shape[0])
        w = np.asarray(w, dtype=np.float64)
        d = w.shape[0] - 1
        if self.n_rows == 0:
            return sums, self.weighted_alpha_sum(d)
        X, Y, sw, alpha = self._pack()
        Z = np.asarray(X @ w[:d]) + self.intercept_scaling * w[d]
        alpha[...] = dual_from_margins(self.loss, Y, sw, Z)
        self._alpha_duals = None   # the kept logistic dual values were of the old α
        _scaled_dual_sums(self.loss, Y, sw, alpha, scales, sums)
        return sums, self.weighted_alpha_sum(d)

    def scale_duals(self, scale):
        """Multiply the committed ``α`` by ``scale`` (after :meth:`start_duals`).

        Parameters
        ----------
        scale : float
            The factor; ``α`` must stay feasible (``start_duals`` says where).
        """
        self._check_no_pending("scale the dual state")
        if self.n_rows:
            self._pack()[3][...] *= scale
            self._alpha_duals = None

    def _take_pending(self, round_id):
        if self.pending is None or self.pending[0] != round_id:
            have = None if self.pending is None else self.pending[0]
            raise RuntimeError(f"no pending round {round_id} (pending: {have})")
        pending, self.pending = self.pending, None
        return pending

    def gap_sums(self, w):
        """Loss, dual and ``α·x·w`` sums over all rows at ``w`` and committed ``α``.

        Parameters
        ----------
        w : ndarray of shape (d + 1, m)
            The iterate.

        Returns
        -------
        tuple of 3 float
            ``Σ c_i ℓ_i(x_i·w)``, ``Σ -(c_i ℓ_i)*(-α_i)`` and ``Σ α_i x_i·w``
            (as in :class:`LocalResult`).
        """
        X, Y, sw, alpha = self._pack()
        sums = np.zeros(3)
        margins = np.empty_like(alpha) if self.loss == LOGISTIC else None
        gap_sums_chunk(X, Y, sw, alpha, np.ascontiguousarray(w, dtype=np.float64),
                       loss=self.loss, intercept_scaling=self.intercept_scaling,
                       rows=np.arange(X.shape[0], dtype=np.int64), sums=sums, margins=margins,
                       indices=self._indices)
        if margins is not None:
            logistic_gap_sums(sw, margins, logistic_start(Y, sw, alpha)[0], sums)
        return tuple(float(v) for v in sums)

    def prepare(self):
        """Pack the rows held now into the solver's layout (the next round would).

        A fit does it once its data is loaded, so that its first round is not
        longer than the others: a straggler policy would read the packing as
        a slow worker.
        """
        if self.n_rows:
            self._pack()

    def row_sq_norm_sum(self):
        """``Σ ‖x_i‖²`` over the rows held (without the intercept feature).

        Returns
        -------
        float
            The sum; ``0.0`` when no rows are held.
        """
        if self.n_rows == 0:
            return 0.0
        return sq_norm_sum(self._pack()[0])

    def weighted_alpha_sum(self, d):
        """``Σ α_i x_i`` over the rows held, with the committed ``α``.

        Parameters
        ----------
        d : int
            Number of features.

        Returns
        -------
        ndarray of shape (d + 1, m)
            The sum; its last row is the intercept feature's
            (``intercept_scaling · Σ α_i``).
        """
        out = np.zeros((d + 1, self.n_targets))
        if self.n_rows == 0:
            return out
        X, _, _, alpha = self._pack()
        out[:d] = X.T @ alpha
        out[d] = self.intercept_scaling * alpha.sum(axis=0)
        return out


@njit(cache=True, nogil=True)
def _scaled_dual_sums(loss, Y, c, A, scales, out):
    """``out[j] = Σ dual_value(scales[j]·A)`` over all entries (see ``ChunkSolver.start_duals``)."""
    row = np.zeros(A.shape[1])
    for j in range(scales.shape[0]):
        total = 0.0
        for i in range(A.shape[0]):
            if loss == SOFTMAX:
                for k in range(A.shape[1]):
                    row[k] = scales[j] * A[i, k]
                total += softmax_dual_value(Y[i], row, c[i])
                continue
            for k in range(A.shape[1]):
                total += dual_value(loss, Y[i, k], scales[j] * A[i, k], c[i])
        out[j] = total


def _visit_order(rng, n, steps, bucket=None, work=None):
    """Row indices for ``max(steps, n)`` steps: consecutive passes over ``range(n)``.

    Each pass visits buckets of ``bucket`` consecutive rows (default
    ``BUCKET_ROWS``, read at the call) in a random order, the rows of a bucket
    in sequence; every pass is a permutation.  The array is ``work``'s
    ``"visits"`` when a :class:`Workspace` is given.
    """
    bucket = BUCKET_ROWS if bucket is None else int(bucket)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    steps = max(int(steps), n)
    n_buckets = -(-n // bucket)
    out = (np.empty(steps, dtype=np.int64) if work is None
           else work.get("visits", (steps,), np.int64))
    pos = 0
    for _ in range(-(-steps // n)):
        pos = _fill_visits(rng.permutation(n_buckets), bucket, n, out, pos)
    return out


@njit(cache=True, nogil=True)
def _fill_visits(buckets, bucket, n, out, pos):
    """Write the rows of ``buckets`` (in turn; capped at ``n``) to ``out`` from ``pos``."""
    for b in buckets:
        for row in range(b * bucket, min(b * bucket + bucket, n)):
            if pos == out.shape[0]:
                return pos
            out[pos] = row
            pos += 1
    return pos


def _specialise(func):
    """``{loss code: func compiled for that loss}``: kernels with the loss folded in.

    Each copy of ``func`` sees the module's globals with ``_LOSS`` set to one
    loss code, which numba compiles as a constant: the branches of the other
    losses vanish, and with them the stores and registers they would hold.
    With the loss as an argument instead, a kernel visits rows for the hinge
    loss 1.2× slower as soon as it may also store the logistic loss's margins
    (flights table, 327k rows).  Each copy has its own name, hence its own
    entries in numba's cache.
    """
    out = {}
    for name, code in LOSSES.items():
        scope = dict(globals(), _LOSS=code)
        copy = types.FunctionType(func.__code__, scope, func.__name__, func.__defaults__,
                                  func.__closure__)
        copy.__qualname__ = f"{func.__qualname__}__{name}"
        copy.__module__ = func.__module__
        copy.__doc__ = func.__doc__
        out[code] = njit(cache=True, nogil=True)(copy)
    return out


#: The SDCA kernels by layout, then loss code.
_KERNELS = {"dense": _specialise(_sdca_dense), "dense_1": _specialise(_sdca_dense_1),
            "csr": _specialise(_sdca_csr), "csr_1": _specialise(_sdca_csr_1)}
