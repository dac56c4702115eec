"""The numba kernels of a round: SDCA steps over one chunk, compiled per loss, and its gap sums.

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
are taken before the kernel (:func:`~daskelastic.solvers.logistic.logistic_start`,
which also gives each step its starting logit), the kernel writes each
sample's ``-|y_i·x_i·w|`` to an array, and the loss's logs are added up after
it (:func:`~daskelastic.solvers.logistic.logistic_gap_sums`).

Each kernel is compiled once per loss, with the loss a constant
(:func:`_specialise`): a kernel holds only its loss's code.  The kernels that
inline each other (``_visit``, ``_visit_row``, ``_add_gap_terms``) live here
together, in the module whose globals ``_specialise`` copies.

The feature weights are a ``(d + 1) × m`` array: the last row is the intercept,
the coefficient of a constant feature of value ``intercept_scaling`` (``0``
turns it off).

All kernels release the GIL and read a ``stop`` flag every ``check_every``
steps, so another thread can preempt them; they return the number of steps done.
Binary classification and single-target regression (one column of ``Y``) run
kernels written for that case, with the margins in scalar variables.
"""

import types

import numpy as np
import scipy.sparse as sp
from numba import njit
from numba import types as nb_types
from numba.extending import overload

from .._prefetch import AHEAD, MAX_ROW_ELEMENTS, prefetch, prefetch_1d, prefetch_rows, run_ahead
from ..losses import (
    LOGISTIC,
    LOGISTIC_STEP_RTOL,
    LOSSES,
    SOFTMAX,
    coordinate_step,
    dual_value,
    dual_value_change,
    logistic_step_at,
    primal_loss,
    softmax_dual_value,
    softmax_loss,
    softmax_step,
)

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
    inlined function the logistic epoch is slower (see the docs'
    *Benchmarks*, *The local solver*).
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

    The margins live in registers, not in per-target arrays: faster on rows of
    a few dense features (see the docs' *Design notes*, *Kernels for one
    target column*).
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
        # spelled out in each kernel: a helper taking the CSR arrays is slower
        # (docs' *Design notes*, *The prefetch written out in each CSR kernel*)
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
    form is faster on rows of a few non-zeros (see the docs' *Design notes*,
    *Kernels for one target column*).
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
        # its entries of the other arrays.  Row by row, not a bucket's lines
        # at each jump: faster (docs' *Algorithms*, *The local solver*).
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



def _specialise(func):
    """``{loss code: func compiled for that loss}``: kernels with the loss folded in.

    Each copy of ``func`` sees the module's globals with ``_LOSS`` set to one
    loss code, which numba compiles as a constant: the branches of the other
    losses vanish, and with them the stores and registers they would hold.
    With the loss as an argument instead, a kernel visits rows for the hinge
    loss slower as soon as it may also store the logistic loss's margins (see
    the docs' *Benchmarks*, *The local solver*).  Each copy has its own name,
    hence its own entries in numba's cache.
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
