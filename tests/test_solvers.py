"""The SDCA local solver: kernels against the NumPy twin, stop flag, commit protocol."""

import os
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

from daskelastic.losses import LOSSES, loss_code
from daskelastic.solvers import (
    STOP_CHECK_EVERY,
    ChunkSolver,
    _logistic_dual_change,
    _visit_order,
    logistic_gap_sums,
    logistic_start,
    narrow_indices,
    sdca_chunk,
    sq_norm_sum,
    unit_values,
)

import reference as ref

#: Each loss with one and three targets; the softmax loss needs two or more.
LOSS_TARGETS = [(loss, m) for loss in sorted(LOSSES) for m in (1, 3)
                if not (loss == "softmax" and m == 1)]

#: The losses of one target or more (all but softmax), in two alternating halves.
_ALTERNATING = [loss for loss in sorted(LOSSES) if loss != "softmax"]


def _default_tier(full, even, odd, softmax):
    """The cases of ``full`` (tuples, the loss first) that the default tier runs.

    Each kernel compiled costs seconds (~130 of them took 5 minutes of a cold
    cache's run), so the default tier compiles a covering subset: ``even``
    holds the other values of the cases it runs for every second loss of
    ``_ALTERNATING``, ``odd`` those for the others, ``softmax`` softmax's.
    ``test_the_default_tier_covers_every_pair_of_values`` checks the choice;
    the slow tier runs the rest.
    """
    chosen = {(loss, *rest) for i, loss in enumerate(_ALTERNATING)
              for rest in (even if i % 2 == 0 else odd)}
    chosen |= {("softmax", *rest) for rest in softmax}
    assert chosen <= set(full)
    return chosen


def _tiered(full, default):
    """``full`` as pytest params, those not in ``default`` marked slow."""
    return [pytest.param(*case, marks=() if case in default else pytest.mark.slow)
            for case in full]


_F64, _F32 = np.float64, np.float32

#: ``test_kernel_matches_numpy_twin``'s cases: (loss, m, layout, dtype).  The
#: softmax loss leaves out float32 X (the other losses cover float32 reads of X:
#: the row step does not see them).
TWIN_CASES = [(loss, m, layout, dtype) for loss, m in LOSS_TARGETS
              for layout in ("dense", "csr", "csr-uint16", "csr-unit") for dtype in (_F64, _F32)
              if not (loss == "softmax" and dtype == _F32)]
#: In the default tier every kernel (loss × dense or CSR × one target or more),
#: and each pair of a loss, a target count, a layout and a dtype, at least once.
TWIN_DEFAULT = _default_tier(
    TWIN_CASES,
    even={(1, "dense", _F64), (3, "dense", _F32), (1, "csr", _F64), (3, "csr-uint16", _F32),
          (3, "csr-unit", _F64)},
    odd={(1, "dense", _F32), (3, "dense", _F64), (3, "csr", _F32), (1, "csr-uint16", _F64),
         (1, "csr-unit", _F32)},
    softmax={(3, layout, _F64) for layout in ("dense", "csr", "csr-uint16", "csr-unit")})

#: ``test_kernels_that_leave_weights_of_1_unread_make_the_same_steps``: (loss, m, layout).
UNIT_WEIGHT_CASES = [(loss, m, layout) for loss, m in LOSS_TARGETS
                     for layout in ("dense", "csr", "csr-unit")]
UNIT_WEIGHT_DEFAULT = _default_tier(
    UNIT_WEIGHT_CASES, even={(1, "dense"), (1, "csr"), (3, "csr-unit")},
    odd={(3, "dense"), (3, "csr"), (1, "csr-unit")},
    softmax={(3, "dense"), (3, "csr"), (3, "csr-unit")})

#: ``test_a_solver_with_weights_of_1_leaves_them_unread``: (loss, m, layout).
SOLVER_WEIGHT_CASES = [(loss, m, layout) for loss, m in LOSS_TARGETS
                       for layout in ("dense", "csr")]
SOLVER_WEIGHT_DEFAULT = _default_tier(
    SOLVER_WEIGHT_CASES, even={(1, "dense"), (3, "csr")}, odd={(3, "dense"), (1, "csr")},
    softmax={(3, "dense"), (3, "csr")})

#: ``test_a_0_1_table_gives_the_same_rounds_without_reading_its_values``: (loss, m, table).
UNIT_VALUE_CASES = [(loss, m, table) for loss, m in LOSS_TARGETS
                    for table in ("two chunks", "wide float32, shuffled")]
UNIT_VALUE_DEFAULT = _default_tier(
    UNIT_VALUE_CASES, even={(3, "two chunks"), (1, "wide float32, shuffled")},
    odd={(1, "two chunks"), (3, "wide float32, shuffled")},
    softmax={(3, "two chunks"), (3, "wide float32, shuffled")})


@pytest.mark.parametrize("full,default,kernels", [
    (TWIN_CASES, TWIN_DEFAULT, True), (UNIT_WEIGHT_CASES, UNIT_WEIGHT_DEFAULT, False),
    (SOLVER_WEIGHT_CASES, SOLVER_WEIGHT_DEFAULT, False),
    (UNIT_VALUE_CASES, UNIT_VALUE_DEFAULT, False)], ids=["twin", "unit weights",
                                                         "solver weights", "unit values"])
def test_the_default_tier_covers_every_pair_of_values(full, default, kernels):
    """Every pair of values that two parameters take together in the full cross
    product, the default tier's cases take together too (and, for the twin,
    each compiled kernel: a loss, dense or CSR, one target or more)."""
    width = len(full[0])
    for a in range(width):
        for b in range(a + 1, width):
            assert {(c[a], c[b]) for c in default} == {(c[a], c[b]) for c in full}, (a, b)
    if kernels:
        def kernel(case):
            loss, m, layout, _ = case
            return loss, layout == "dense", m == 1

        assert {kernel(c) for c in default} == {kernel(c) for c in full}
    assert default < set(full)   # the rest: in the slow tier


def _problem(loss, n=40, d=6, m=1, dtype=np.float64, sparse=False, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.5)
    Y = ref.random_targets(loss, rng, (n, m))
    sw = rng.uniform(0.5, 2.0, size=n)
    X = X.astype(dtype)
    return (sp.csr_matrix(X) if sparse else np.ascontiguousarray(X)), Y, sw


@pytest.mark.parametrize("loss,m,layout,dtype", _tiered(TWIN_CASES, TWIN_DEFAULT))
@pytest.mark.parametrize("visits", ["rows", "buckets"])
def test_kernel_matches_numpy_twin(loss, layout, dtype, m, visits):
    sparse = layout != "dense"
    X, Y, sw = _problem(loss, m=m, dtype=dtype, sparse=sparse)
    if layout == "csr-unit":   # a 0/1 table: the kernels do not read its values
        X.data[:] = 1
    n, d = X.shape
    rng = np.random.default_rng(1)
    alpha, _, _ = ref.sdca_steps(loss, X, Y, sw, np.zeros((n, m)), np.zeros((d + 1, m)),
                                 lam_n=3.0, sigma=1.0, icpt=1.0, order=rng.permutation(n))
    if visits == "buckets":
        # the solver's visiting order (the kernels prefetch each next bucket),
        # with empty rows at a bucket's start and at the table's end
        X = X.tolil() if sparse else X.copy()
        X[[16, 17, n - 1]] = 0
        X = X.tocsr() if sparse else X
        order = _visit_order(rng, n, n + n // 2, bucket=16)
    else:
        order = np.concatenate([rng.permutation(n), rng.permutation(n)[: n // 2]])
    w = (np.hstack([X.toarray() if sparse else X, np.ones((n, 1))]).T @ alpha) / 3.0
    want_da, want_dw, want_sums = ref.sdca_steps(loss, X, Y, sw, alpha, w, lam_n=3.0,
                                                 sigma=2.0, icpt=1.0, order=order)
    dalpha, dw, sums = np.zeros_like(alpha), np.zeros_like(w), np.zeros(3)
    margins = logits = dual = None
    if loss == "logistic":   # its gap terms and logs outside the kernel
        dual, logits = logistic_start(Y, sw, alpha)
        margins = np.full_like(alpha, np.nan)
    # the solver's kernels read the column indices as uint16 (narrow_indices)
    indices = narrow_indices(X) if layout in ("csr-uint16", "csr-unit") else None
    assert indices is None or indices.dtype == np.uint16
    assert unit_values(X) == (layout == "csr-unit")
    done = sdca_chunk(X, Y, sw, alpha, dalpha, w, dw, loss=loss_code(loss),
                      inv_lam_n=1 / 3.0, sigma=2.0, intercept_scaling=1.0,
                      order=order.astype(np.int64), stop=np.zeros(1, np.int64), sums=sums,
                      margins=margins, logits=logits, step_rtol=0.0, indices=indices,
                      unit_values=layout == "csr-unit")
    if loss == "logistic":
        assert sums[1] == 0.0   # the dual values' sum: taken with the logs, after
        logistic_gap_sums(sw, margins, dual, sums)
    tol = 1e-5 if dtype == np.float32 else 1e-9
    assert done == order.shape[0]
    np.testing.assert_allclose(dalpha, want_da, rtol=tol, atol=tol)
    np.testing.assert_allclose(dw, want_dw, rtol=tol, atol=tol)
    np.testing.assert_allclose(sums, want_sums, rtol=tol, atol=tol)


def test_the_prefetch_finds_the_runs_of_consecutive_rows_ahead():
    from numba import njit

    from daskelastic._prefetch import AHEAD, MAX_RUN, run_ahead

    @njit
    def runs(order):
        out = []
        for s in range(order.shape[0]):
            first, end = run_ahead(order, s, order.shape[0])
            if end > first:
                out.append((s + AHEAD, first, end))
        return out

    order = _visit_order(np.random.default_rng(0), 100, 100, bucket=16)
    found = runs(order)
    # one prefetch per run of consecutive rows (a bucket, or two that follow
    # each other by chance) that starts AHEAD steps or more into the order
    starts = [t for t in range(AHEAD, 100) if order[t] != order[t - 1] + 1]
    assert [t for t, _, _ in found] == starts
    for t, first, end in found:
        size = end - first
        assert first == order[t] and list(order[t:t + size]) == list(range(first, end))
        assert t + size == 100 or order[t + size] != end
    # long runs are cut at MAX_RUN rows; nothing beyond the order's end
    # an order that is one run from the start: its rows stream, nothing to prefetch
    assert runs(np.arange(200, dtype=np.int64)) == []
    seq = np.arange(300, dtype=np.int64)
    seq[AHEAD:] = np.arange(1000, 1000 + 300 - AHEAD)
    assert runs(seq)[0] == (AHEAD, 1000, 1000 + MAX_RUN)
    assert runs(np.arange(AHEAD, dtype=np.int64)) == []


def test_visit_order_passes_are_permutations_of_buckets():
    rng = np.random.default_rng(0)
    order = _visit_order(rng, 1000, 2500, bucket=64)
    assert order.shape == (2500,)
    assert sorted(order[:1000]) == list(range(1000))
    assert sorted(order[1000:2000]) == list(range(1000))
    # inside a bucket the rows go in sequence
    starts = np.flatnonzero(order[:1000] % 64 == 0)
    assert all(order[s + 1] == order[s] + 1 for s in starts if order[s] + 1 < 1000)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_inexact_logistic_steps_keep_the_invariant_and_nearly_all_the_ascent(sparse):
    """The solver's logistic steps (relative tolerance ``LOGISTIC_STEP_RTOL``).

    Δw is still ``Σ Δα_i x_i / (λn)``, and the epoch raises the dual almost as
    much as the twin's exact steps do from the same state.
    """
    X, Y, sw = _problem("logistic", n=200, d=6, sparse=sparse)
    n, d = X.shape
    lam_n = 0.5
    rng = np.random.default_rng(2)
    alpha, _, _ = ref.sdca_steps("logistic", X, Y, sw, np.zeros((n, 1)), np.zeros((d + 1, 1)),
                                 lam_n=lam_n, sigma=1.0, icpt=1.0, order=rng.permutation(n))
    Xa = np.hstack([X.toarray() if sparse else X, np.ones((n, 1))])
    w = Xa.T @ alpha / lam_n

    def dual(a):
        v = Xa.T @ a / lam_n
        return sum(ref.dual_value("logistic", Y[i, 0], a[i, 0], sw[i]) for i in range(n)) \
            - 0.5 * lam_n * float((v * v).sum())

    order = rng.permutation(n)
    want_da, _, _ = ref.sdca_steps("logistic", X, Y, sw, alpha, w, lam_n=lam_n, sigma=1.0,
                                   icpt=1.0, order=order)
    _, logits = logistic_start(Y, sw, alpha)

    def epoch(**step_rtol):
        dalpha, dw = np.zeros_like(alpha), np.zeros_like(w)
        sdca_chunk(X, Y, sw, alpha, dalpha, w, dw, loss=loss_code("logistic"),
                   inv_lam_n=1 / lam_n, sigma=1.0, intercept_scaling=1.0,
                   order=order.astype(np.int64), stop=np.zeros(1, np.int64),
                   sums=np.zeros(3), margins=np.full_like(alpha, np.nan), logits=logits,
                   **step_rtol)
        return dalpha, dw

    dalpha, dw = epoch()
    np.testing.assert_allclose(dw, Xa.T @ dalpha / lam_n, rtol=1e-10, atol=1e-12)
    start, exact, got = dual(alpha), dual(alpha + want_da), dual(alpha + dalpha)
    assert exact > start
    assert got - start >= 0.99 * (exact - start)
    # the default steps did stop early: the same epoch with exact steps differs
    exact_da, _ = epoch(step_rtol=0.0)
    np.testing.assert_allclose(exact_da, want_da, rtol=1e-7, atol=1e-9)
    assert np.abs(dalpha - exact_da).max() > 1e-6


def test_preset_stop_flag_stops_before_the_first_step():
    X, Y, sw = _problem("hinge")
    n, d = X.shape
    stop = np.ones(1, np.int64)
    dalpha, dw = np.zeros((n, 1)), np.zeros((d + 1, 1))
    done = sdca_chunk(X, Y, sw, np.zeros((n, 1)), dalpha, np.zeros((d + 1, 1)), dw,
                      loss=loss_code("hinge"), inv_lam_n=1.0, sigma=1.0,
                      intercept_scaling=1.0, order=np.arange(n, dtype=np.int64), stop=stop,
                      sums=np.zeros(3))
    assert done == 0 and not dalpha.any() and not dw.any()


@pytest.mark.skipif(os.environ.get("NUMBA_DISABLE_JIT") == "1",
                    reason="a timing test: needs the compiled kernel to be running")
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_stop_flag_from_another_thread_keeps_consistent_partial_work(sparse):
    """A solver stopped mid-round returns at a flag check with Δw = Σ Δα x / (λn)."""
    X, Y, sw = _problem("logistic", n=20_000, d=20, sparse=sparse)
    solver = ChunkSolver(loss_code("logistic"), 1, intercept_scaling=1.0)
    solver.add_chunk(0, X, Y, sw)
    w = np.zeros((21, 1))
    solver.solve(w, round_id=0, inv_lam_n=0.5, sigma=1.0, steps=10)  # compile, pack
    solver.discard(0)
    budget = 200 * X.shape[0]  # ~0.3 s of steps (and 32 MB of visiting order)
    # the flag is set after a wait: too short, and the round has not begun its
    # steps (on a loaded machine the visiting order takes longer); too long,
    # and it has done them all (once, with a cold numba cache, in 0.29 s):
    # from short to long until a wait falls in between
    for round_id, wait in enumerate((0.02, 0.05, 0.1, 0.2, 0.5, 1.0), start=1):
        box = {}
        thread = threading.Thread(target=lambda box=box, r=round_id: box.update(
            r=solver.solve(w, round_id=r, inv_lam_n=0.5, sigma=1.0, steps=budget)))
        thread.start()
        time.sleep(wait)
        solver.stop[0] = 1
        thread.join(timeout=60)   # bounds a hang: the flag ends the round at its next check
        assert not thread.is_alive()
        result = box["r"]
        if result.stopped and result.steps > 0:
            break
        solver.discard(round_id)
    assert result.stopped and 0 < result.steps < budget
    assert result.steps % STOP_CHECK_EVERY == 0   # stopped exactly at a flag check
    dalpha = solver.pending[1]
    Xp = solver._packed[0]
    Xa = np.hstack([Xp.toarray() if sparse else Xp, np.ones((Xp.shape[0], 1))])
    np.testing.assert_allclose(result.dw, Xa.T @ dalpha * 0.5, atol=1e-12)


def test_commit_adds_and_discard_forgets_the_pending_round():
    X, Y, sw = _problem("squared")
    solver = ChunkSolver(loss_code("squared"), 1, 1.0)
    solver.add_chunk(7, X, Y, sw)
    w = np.zeros((X.shape[1] + 1, 1))
    r0 = solver.solve(w, round_id=0, inv_lam_n=1.0, sigma=1.0)
    solver.discard(0)
    assert not solver.alpha_by_chunk()[7].any()
    r0b = solver.solve(w, round_id=1, inv_lam_n=1.0, sigma=1.0, seed=0)
    solver.commit(1, gamma=0.5)
    w1 = 0.5 * r0b.dw
    np.testing.assert_allclose(solver.weighted_alpha_sum(X.shape[1]), w1, atol=1e-12)
    assert r0.steps == X.shape[0]
    with pytest.raises(RuntimeError, match="no pending round"):
        solver.commit(1)


def test_chunks_keep_their_dual_state_through_repacking():
    X, Y, sw = _problem("hinge", n=30)
    solver = ChunkSolver(loss_code("hinge"), 1, 1.0)
    solver.add_chunk(0, X[:10], Y[:10], sw[:10])
    solver.add_chunk(1, X[10:], Y[10:], sw[10:])
    r = solver.solve(np.zeros((7, 1)), round_id=0, inv_lam_n=1.0, sigma=1.0)
    solver.commit(0)
    before = solver.alpha_by_chunk()
    Xc, Yc, swc, ac = solver.remove_chunk(0)
    np.testing.assert_array_equal(ac, before[0])
    np.testing.assert_array_equal(Xc, X[:10])
    np.testing.assert_array_equal(Yc, Y[:10])
    np.testing.assert_array_equal(solver.alpha_by_chunk()[1], before[1])
    solver.add_chunk(0, Xc, Yc, swc, alpha=ac)
    np.testing.assert_allclose(solver.weighted_alpha_sum(6), r.dw, atol=1e-12)
    with pytest.raises(ValueError, match="already held"):
        solver.add_chunk(1, Xc, Yc, swc)


def test_chunk_membership_cannot_change_while_a_round_is_pending():
    X, Y, sw = _problem("hinge")
    solver = ChunkSolver(loss_code("hinge"), 1, 0.0)
    solver.add_chunk(0, X, Y, sw)
    solver.solve(np.zeros((7, 1)), round_id=0, inv_lam_n=1.0, sigma=1.0)
    with pytest.raises(RuntimeError, match="pending"):
        solver.remove_chunk(0)


def test_gap_sums_cover_unvisited_rows():
    """With a budget below one pass, the round still reports sums over all rows."""
    X, Y, sw = _problem("logistic", n=50)
    solver = ChunkSolver(loss_code("logistic"), 1, 1.0)
    solver.add_chunk(0, X, Y, sw)
    w = np.full((7, 1), 0.1)
    partial = solver.solve(w, round_id=0, inv_lam_n=1.0, sigma=1.0, steps=17)
    solver.discard(0)
    assert partial.steps == 17
    np.testing.assert_allclose([partial.loss_sum, partial.dual_sum, partial.alpha_z_sum],
                               solver.gap_sums(w), rtol=1e-12)


def _three_rounds(solver, w, check=lambda: None):
    """Two whole rounds and a partial one (30 steps), each committed: ``(w, runs)``.

    ``runs`` holds each round's ``(Δw, loss sum, dual sum, α·z sum, dual
    change)``; ``check`` is called after each round's solve.
    """
    runs = []
    for r in range(3):
        res = solver.solve(w, round_id=r, inv_lam_n=1.0, sigma=1.0,
                           steps=None if r < 2 else 30)
        check()
        solver.commit(r)
        w = w + res.dw
        runs.append((res.dw, res.loss_sum, res.dual_sum, res.alpha_z_sum, res.dual_change))
    return w, runs


@pytest.mark.parametrize("loss", ["logistic", "hinge"])
def test_narrow_and_wide_column_indices_give_the_same_rounds(loss):
    """Up to 65,536 columns the solver reads uint16 column indices, beyond them int32.

    The same rows with zero columns appended past that limit take the int32
    path: every round, and the gap sums, come out bit for bit the same.
    """
    X, Y, sw = _problem(loss, n=80, d=6, sparse=True)
    wide = sp.hstack([X, sp.csr_matrix((80, (1 << 16) + 1 - 6))], format="csr")
    assert narrow_indices(X).dtype == np.uint16
    assert np.array_equal(narrow_indices(X), X.indices)
    assert narrow_indices(wide) is None and narrow_indices(X.toarray()) is None
    results = []
    for matrix in (X, wide):
        solver = ChunkSolver(loss_code(loss), 1, 1.0)
        solver.add_chunk(0, matrix[:50], Y[:50], sw[:50])
        solver.add_chunk(1, matrix[50:], Y[50:], sw[50:])
        d = matrix.shape[1]
        w, runs = _three_rounds(solver, np.zeros((d + 1, 1)))
        runs = [(dw[list(range(6)) + [d]], *sums) for dw, *sums in runs]
        assert not np.any(w[6:d])
        runs.append(solver.gap_sums(w))
        results.append(runs)
    narrow, wide_runs = results
    for a, b in zip(narrow, wide_runs):
        for u, v in zip(a, b):
            assert np.array_equal(u, v)


def test_unit_values_finds_the_sparse_0_1_tables():
    X = sp.random(30, 8, density=0.3, format="csr", random_state=0)
    assert not unit_values(X)
    X.data[:] = 1.0
    assert unit_values(X) and unit_values(X.astype(np.float32))
    assert not unit_values(X.toarray())   # the dense kernels read their rows anyway
    X.data[3] = 2.0
    assert not unit_values(X)
    X.data[3] = 0.0   # a stored zero: the values are read (only the fast path lost)
    assert not unit_values(X)
    X.data[3] = np.nan
    assert not unit_values(X)
    X.data[3] = 1.0
    assert unit_values(X.astype(np.int64)) and unit_values(X.astype(bool))
    # other formats are not what the kernels read (a COO's duplicates add up)
    assert not unit_values(X.tocoo()) and not unit_values(X.tocsc())
    assert unit_values(sp.csr_matrix((5, 3)))   # no values at all


@pytest.mark.parametrize("loss,m,table", _tiered(UNIT_VALUE_CASES, UNIT_VALUE_DEFAULT))
def test_a_0_1_table_gives_the_same_rounds_without_reading_its_values(loss, m, table,
                                                                      monkeypatch):
    """A solver holding 0/1 rows runs the kernels that leave the values unread.

    Every round and the gap sums come out bit for bit as with the values
    read: two chunks of float64 rows (``uint16`` column indices), or one
    chunk of float32 rows added as shuffled (the solver keeps its arrays) with
    columns past 65,536 (``int32`` indices).  A chunk with another value
    packed in turns it off, and dropping that chunk turns it back on; moved
    to another solver (``take_rows``, ``add_rows``) the rows keep it.
    """
    X, Y, sw = _problem(loss, n=80, d=6, m=m, sparse=True)
    X.data[:] = 1.0
    if table != "two chunks":
        X = sp.hstack([X, sp.csr_matrix((80, 1 << 16))], format="csr", dtype=np.float32)
    d = X.shape[1]
    results = []
    for read in (False, True):
        if read:   # the same rows through the kernels that read the values
            monkeypatch.setattr("daskelastic.solvers.store.unit_values", lambda X: False)
        solver = ChunkSolver(loss_code(loss), m, 1.0)
        if table == "two chunks":
            solver.add_chunk(0, X[:50], Y[:50], sw[:50])
            solver.add_chunk(1, X[50:], Y[50:], sw[50:])
        else:
            solver.add_chunk(0, X, Y, sw, shuffled=True)
        def check(solver=solver, read=read):
            assert solver._unit == (not read)
            assert (solver._indices is None) == (table != "two chunks")

        w, runs = _three_rounds(solver, np.zeros((d + 1, m)), check)
        runs.append(solver.gap_sums(w))
        results.append(runs)
    for a, b in zip(*results):
        for u, v in zip(a, b):
            assert np.array_equal(u, v)
    monkeypatch.undo()
    other = X[:10].copy()
    other.data[0] = 2.0
    solver.add_chunk(2, other, Y[:10], sw[:10])
    solver.solve(w, round_id=3, inv_lam_n=1.0, sigma=1.0)
    assert not solver._unit
    solver.discard(3)
    solver.remove_chunk(2)
    solver.solve(w, round_id=4, inv_lam_n=1.0, sigma=1.0)
    assert solver._unit
    solver.discard(4)
    receiver = ChunkSolver(loss_code(loss), m, 1.0)
    receiver.add_rows(solver.take_rows(solver.chunk_ids))
    receiver.solve(w, round_id=5, inv_lam_n=1.0, sigma=1.0)
    assert receiver._unit


@pytest.mark.parametrize("loss,m,layout", _tiered(UNIT_WEIGHT_CASES, UNIT_WEIGHT_DEFAULT))
def test_kernels_that_leave_weights_of_1_unread_make_the_same_steps(loss, layout, m):
    """``sdca_chunk(..., unit_weights=True)`` with weights all 1: the same work, bit for bit.

    Also with a 0/1 table's values left unread in both (``csr-unit``: the
    one-hot tables without weights, flights' case).
    """
    X, Y, _ = _problem(loss, n=60, m=m, sparse=layout != "dense")
    if layout == "csr-unit":
        X.data[:] = 1.0
    n, d = X.shape
    sw = np.ones(n)
    rng = np.random.default_rng(4)
    alpha, _, _ = ref.sdca_steps(loss, X, Y, sw, np.zeros((n, m)), np.zeros((d + 1, m)),
                                 lam_n=3.0, sigma=1.0, icpt=1.0, order=rng.permutation(n))
    w = (np.hstack([X.toarray() if sp.issparse(X) else X, np.ones((n, 1))]).T @ alpha) / 3.0
    order = _visit_order(rng, n, n + n // 2, bucket=16)
    runs = []
    for unit in (False, True):
        dalpha, dw, sums = np.zeros_like(alpha), np.zeros_like(w), np.zeros(4)
        margins = logits = None
        if loss == "logistic":
            margins, logits = np.full_like(alpha, np.nan), logistic_start(Y, sw, alpha)[1]
        done = sdca_chunk(X, Y, sw, alpha, dalpha, w, dw, loss=loss_code(loss),
                          inv_lam_n=1 / 3.0, sigma=2.0, intercept_scaling=1.0, order=order,
                          stop=np.zeros(1, np.int64), sums=sums, margins=margins,
                          logits=logits, unit_weights=unit, unit_values=layout == "csr-unit",
                          indices=narrow_indices(X) if layout == "csr-unit" else None)
        runs.append((done, dalpha, dw, sums, margins))
    (done, *arrays), (done_unit, *arrays_unit) = runs
    assert done == done_unit == order.shape[0]
    for a, b in zip(arrays, arrays_unit):
        assert (a is None and b is None) or np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("loss,m,layout", _tiered(SOLVER_WEIGHT_CASES, SOLVER_WEIGHT_DEFAULT))
def test_a_solver_with_weights_of_1_leaves_them_unread(loss, m, layout, monkeypatch):
    """Packed weights that are all 1 are not read, by the kernels and the logistic passes.

    The rounds come out as with the weights read: the same ``Δw`` bit for bit
    and the same sums (the logistic loss's within rounding: its gap logs are
    then summed without weights).  (``_all_ones`` answering False also turns
    off ``unit_values``: no matter here, the values are not 0/1.)  Weights of
    another value packed in turn it off, and the next round's dual change is
    the twin's with those weights.
    """
    X, Y, _ = _problem(loss, n=80, m=m, sparse=layout == "csr")
    sw = np.ones(80)
    results = []
    for read in (False, True):
        if read:   # every array read, as if some weight were not 1
            # (read where the rows are stored and where the logistic logs are taken)
            monkeypatch.setattr("daskelastic.solvers.store._all_ones", lambda a: False)
            monkeypatch.setattr("daskelastic.solvers.logistic._all_ones", lambda a: False)
        solver = ChunkSolver(loss_code(loss), m, 1.0)
        solver.add_chunk(0, X[:50], Y[:50], sw[:50])
        solver.add_chunk(1, X[50:], Y[50:], sw[50:])
        def check(solver=solver, read=read):
            assert solver._unit_weights == (not read)

        w, runs = _three_rounds(solver, np.zeros((7, m)), check)
        results.append([(dw, list(sums)) for dw, *sums in runs])
    for (dw_a, sums_a), (dw_b, sums_b) in zip(*results):
        assert np.array_equal(dw_a, dw_b)
        np.testing.assert_allclose(sums_a, sums_b, rtol=1e-13, atol=1e-13)
    monkeypatch.undo()
    solver.add_chunk(2, X[:10], Y[:10], np.full(10, 2.0))
    result = solver.solve(w, round_id=3, inv_lam_n=1.0, sigma=1.0)
    assert not solver._unit_weights
    _, Yp, swp, alpha = solver._packed
    dalpha = solver.pending[1]
    twin = ref.dual_change(loss, Yp, swp, alpha, dalpha)
    assert result.dual_change == pytest.approx(twin, rel=1e-10, abs=1e-12)


def test_all_ones_is_exact():
    from daskelastic.solvers import _all_ones

    assert _all_ones(np.ones(4)) and _all_ones(np.ones(4, np.float32))
    assert _all_ones(np.ones(3, np.int64)) and _all_ones(np.ones(3, bool))
    for other in (0.0, -1.0, np.nan, 1.0 + 2e-16, np.inf):
        assert not _all_ones(np.array([1.0, other, 1.0]))
    assert not _all_ones(np.ones(4, np.float32) + np.float32(1e-7))


@pytest.mark.parametrize("loss,m", LOSS_TARGETS)
def test_dual_change_matches_numpy_twin(loss, m):
    rng = np.random.default_rng(3)
    n, d = 60, 5
    X = rng.normal(size=(n, d))
    Y = ref.random_targets(loss, rng, (n, m))
    sw = rng.uniform(0.5, 2.0, size=n)
    solver = ChunkSolver(loss_code(loss), m, 1.0)
    solver.add_chunk(0, X, Y, sw)
    w = np.zeros((d + 1, m))
    first = solver.solve(w, round_id=0, inv_lam_n=0.5, sigma=1.0)
    solver.commit(0, gamma=0.5)           # a committed α inside the domain, not 0
    result = solver.solve(w + 0.5 * first.dw, round_id=1, inv_lam_n=0.5, sigma=2.0,
                          steps=n // 2)    # half a pass: some rows unchanged
    Xp, Yp, swp, alpha = solver._packed
    dalpha = solver.pending[1]
    assert 0 < np.count_nonzero(dalpha) < n * m
    twin = ref.dual_change(loss, Yp, swp, alpha, dalpha)
    assert result.dual_change == pytest.approx(twin, rel=1e-10, abs=1e-12)


def test_the_kept_entry_weights_follow_the_packed_weights():
    """A workspace's weights per entry are the packed weights', also after a repacking."""
    from daskelastic.solvers import Workspace

    work = Workspace()
    sw = np.array([1.0, 2.0, 3.0])
    c = work.entry_weights(sw, 2)
    assert np.array_equal(c, [1.0, 1.0, 2.0, 2.0, 3.0, 3.0])
    assert work.entry_weights(sw, 2) is c                    # kept
    assert work.entry_weights(sw.copy(), 2) is not c         # another array: made anew
    assert np.array_equal(work.entry_weights(sw, 3), np.repeat(sw, 3))
    ones = np.ones(3)
    assert work.entry_weights(ones, 2) is None and work.entry_weights(ones, 1) is None
    # a solver whose rows change: the logistic dual change with the new weights
    rng = np.random.default_rng(4)
    n, d, m = 60, 5, 3
    X = rng.normal(size=(n, d))
    Y = np.where(rng.random((n, m)) < 0.5, 1.0, -1.0)
    sw = rng.uniform(0.5, 2.0, size=n)
    solver = ChunkSolver(loss_code("logistic"), m, 1.0)
    solver.add_chunk(0, X[:30], Y[:30], sw[:30])
    w = np.zeros((d + 1, m))
    first = solver.solve(w, round_id=0, inv_lam_n=0.5, sigma=1.0)
    solver.commit(0)
    solver.add_chunk(1, X[30:], Y[30:], 3.0 * sw[30:])      # repacked, other weights
    result = solver.solve(w + first.dw, round_id=1, inv_lam_n=0.5, sigma=1.0)
    _, Yp, swp, alpha = solver._packed
    dalpha = solver.pending[1]
    twin = sum(ref.dual_value("logistic", Yp[i, k], alpha[i, k] + dalpha[i, k], swp[i])
               - ref.dual_value("logistic", Yp[i, k], alpha[i, k], swp[i])
               for i in range(n) for k in range(m) if dalpha[i, k] != 0)
    assert result.dual_change == pytest.approx(twin, rel=1e-10, abs=1e-12)


def test_a_slowed_round_takes_its_factor_times_the_workers_usual_pace():
    """A straggler slowed 4× takes ≥ 4× its usual time, even when its own compute runs fast.

    On a machine whose cores several workers share, a straggler's slices run
    faster once the round's other workers have finished; stalling for a
    multiple of the slice's own compute time then delivers less than the
    factor asked for (measured: 2.4× for 4×).  The worker's usual pace,
    recorded from earlier rounds, is the floor.
    """
    X, Y, sw = _problem("logistic", n=5_000, d=20)
    solver = ChunkSolver(loss_code("logistic"), 1, 1.0)
    solver.add_chunk(0, X, Y, sw)
    w = np.zeros((21, 1))
    common = dict(inv_lam_n=1.0 / 5_000, sigma=1.0)
    plain = []
    for r in range(3):
        plain.append(solver.solve(w, round_id=r, **common).seconds)
        solver.discard(r)
    assert len(solver._step_seconds) == 3     # one pace per round, from the solver
    usual = float(np.median(solver._step_seconds))
    # the pace of a worker that shared its core: three times slower than now
    solver._step_seconds.extend([3 * usual] * 16)
    slowed = solver.solve(w, round_id=3, slowdown=4.0, **common)
    solver.discard(3)
    assert slowed.steps == 5_000 and not slowed.stopped
    assert slowed.seconds >= 4 * 3 * usual * 5_000
    assert slowed.seconds >= 3 * float(np.median(plain))


def test_a_slowed_round_stops_at_once_when_asked():
    """The stall ends on a stop request, and the round keeps the steps it did."""
    X, Y, sw = _problem("logistic", n=20_000, d=20)
    solver = ChunkSolver(loss_code("logistic"), 1, 1.0)
    solver.add_chunk(0, X, Y, sw)
    w = np.zeros((21, 1))
    solver._step_seconds.extend([1e-4] * 16)    # 2 s per round: slowed 50×, 100 s

    sliced = []

    def stop_in_the_stall():
        # once the first slice has run (its pace is recorded), not at a fixed
        # time: without JIT the round's logs alone can take longer than that
        deadline = time.perf_counter() + 60.0
        while solver._step_seconds[-1] == 1e-4 and time.perf_counter() < deadline:
            time.sleep(0.002)
        sliced.append(solver._step_seconds[-1] != 1e-4)
        time.sleep(0.1)
        solver.request_stop(0)

    stopper = threading.Thread(target=stop_in_the_stall)
    stopper.start()
    result = solver.solve(w, round_id=0, inv_lam_n=1.0 / 20_000, sigma=1.0, slowdown=50.0)
    stopper.join()
    assert sliced == [True]
    assert result.stopped and 0 < result.steps < 20_000
    # from the request to the return: the stall's end and the gap terms of the
    # rows not visited (without JIT, in Python), not the rest of the ~100 s stall
    assert result.stop_latency < 25.0
    # the steps it did are pending, one Δα per visited row
    _, dalpha = solver.pending
    solver.discard(0)
    assert np.count_nonzero(dalpha) == result.steps


def test_a_slowed_round_runs_its_budget_in_order_in_slices_after_a_warm_up_call():
    """The straggler wrapper first runs no step (the kernel's load), then slices in order."""
    from daskelastic.testing import _SLOWDOWN_SLICES, _run_slowed

    calls = []

    def run(a, b):
        calls.append((int(a), int(b)))
        return int(b - a), 0.0

    done = _run_slowed(run, 1_000, 2.0, np.zeros(1, dtype=np.int64), [])
    assert done == 1_000
    assert calls[0] == (0, 0)
    slices = calls[1:]
    assert len(slices) == _SLOWDOWN_SLICES
    assert slices[0][0] == 0 and slices[-1][1] == 1_000
    assert all(end == start for (_, end), (start, _) in zip(slices, slices[1:]))


def test_a_slowed_round_ends_with_the_slice_the_stop_flag_cut_short():
    """No slice runs after a stopped one, and the steps done are the slices' sum."""
    from daskelastic.testing import _run_slowed

    stop = np.zeros(1, dtype=np.int64)
    calls = []

    def run(a, b):
        calls.append((int(a), int(b)))
        if len(calls) == 4:   # the warm-up, two whole slices, then a stop midway
            stop[0] = 1
            return int(b - a) // 2, 0.0
        return int(b - a), 0.0

    done = _run_slowed(run, 1_600, 3.0, stop, [1e-9])
    assert len(calls) == 4
    assert done == 100 + 100 + 50


def _timed_round():
    """A solver of 20,000 logistic rows, its round's arguments and one discarded round."""
    X, Y, sw = _problem("logistic", n=20_000, d=20)
    solver = ChunkSolver(loss_code("logistic"), 1, 1.0)
    solver.add_chunk(0, X, Y, sw)
    w = np.zeros((21, 1))
    common = dict(inv_lam_n=1.0 / 20_000, sigma=1.0)
    result = solver.solve(w, round_id=0, **common)
    solver.discard(0)
    return solver, w, common, result


def test_a_round_reports_its_solver_threads_cpu_time():
    """CPU seconds of the solver's thread: what a worker's share of a core is measured by."""
    result = _timed_round()[3]
    assert 0.0 < result.cpu_seconds <= result.seconds + 1e-3


@pytest.mark.slow
def test_a_slowed_rounds_stall_is_cpu_time():
    """A slowed round spins: its stall is CPU time, as on a slow machine.

    A sleeping stall would show almost none.  The share asked for is a timing
    threshold (a busy machine takes the core away now and then), hence the
    slow tier.
    """
    solver, w, common, result = _timed_round()
    solver._step_seconds.extend([result.seconds / 20_000] * 16)
    slowed = solver.solve(w, round_id=1, slowdown=3.0, **common)
    solver.discard(1)
    assert slowed.cpu_seconds >= 0.25 * slowed.seconds


def test_logistic_start_matches_the_scalar_dual_values_and_logits():
    """The vectorised logs give each dual value and logit, edge cases included."""
    rng = np.random.default_rng(5)
    n, m = 400, 2
    Y = np.where(rng.random((n, m)) < 0.5, 1.0, -1.0)
    sw = rng.uniform(0.5, 2.0, size=n)
    sw[:4] = 0.0                       # weight 0: dual value 0 at α = 0, -inf elsewhere
    beta = rng.uniform(0.0, 1.0, size=(n, m))
    beta[4:20] = [[0.0, 1.0], [1e-13, 1.0 - 1e-13], [1e-12, 1.0 - 1e-12], [2e-12, 1e-300],
                  [-1e-13, 1.0 + 1e-13], [-0.5, 1.5], [0.5, 0.5], [1e-8, 1 - 1e-8]] * 2
    alpha = beta * Y * sw[:, None]
    alpha[0, 0] = 0.3                  # infeasible with c = 0
    D, U = logistic_start(Y, sw, alpha)
    _assert_dual_values_and_logits(Y, sw, alpha, D, U)


def _assert_dual_values_and_logits(Y, sw, alpha, D, U):
    """``D`` and ``U`` are the scalar twin's dual values of ``alpha`` and their logits."""
    n, m = Y.shape
    for i in range(n):
        for k in range(m):
            want = ref.dual_value("logistic", Y[i, k], alpha[i, k], sw[i])
            if np.isfinite(want):
                # abs: the twin takes log(1 - β), which loses digits for tiny β
                assert D[i, k] == pytest.approx(want, rel=1e-13, abs=1e-15)
            else:
                assert D[i, k] == want
            b = alpha[i, k] * Y[i, k] / sw[i] if sw[i] > 0 else -1.0
            if 1e-12 < b < 1.0 - 1e-12:
                assert U[i, k] == pytest.approx(np.log(b / (1.0 - b)), rel=1e-13, abs=1e-13)
            else:
                assert np.isnan(U[i, k])


@pytest.mark.parametrize("m", [1, 3])
def test_the_logistic_dual_change_gives_the_new_dual_values_and_logits(m):
    """``α + Δα``'s dual values and logits, and the change over ``Δα ≠ 0``, edge cases included."""
    rng = np.random.default_rng(6)
    n = 300
    Y = np.where(rng.random((n, m)) < 0.5, 1.0, -1.0)
    sw = rng.uniform(0.5, 2.0, size=n)
    sw[:3] = 0.0
    beta = rng.uniform(0.0, 1.0, size=(n, m))
    new = np.clip(beta + rng.normal(0.0, 0.05, size=(n, m)), 0.0, 1.0)
    new[rng.random((n, m)) < 0.3] = np.nan     # unchanged entries: Δα = 0
    edges = [0.0, 1.0, 1e-13, 1.0 - 1e-13, 1e-310, 5e-324, -1e-13, 1.0 + 1e-13, -0.5, 1.5,
             0.39, 0.61, 0.5]
    new[3:3 + len(edges), 0] = edges
    alpha = beta * Y * sw[:, None]
    new_alpha = np.where(np.isnan(new), alpha, new * Y * sw[:, None])
    new_alpha[0, 0] = 0.2          # weight 0: -inf
    dalpha = new_alpha - alpha
    dual, _ = logistic_start(Y, sw, alpha)
    dual = dual.copy()
    change, (D, U) = _logistic_dual_change(Y, sw, alpha, dalpha, dual)
    _assert_dual_values_and_logits(Y, sw, alpha + dalpha, D, U)
    want_change = 0.0
    for i, k in zip(*np.nonzero(dalpha)):   # in order, as the twin adds up
        want_change += D[i, k] - dual[i, k]
    assert change == want_change == -np.inf    # infeasible entries moved
    # without them: the sum over the entries that moved, whatever its order
    dalpha[~np.isfinite(D)] = 0.0
    moved = dalpha != 0.0
    change, _ = _logistic_dual_change(Y, sw, alpha, dalpha, dual)
    assert np.isfinite(change)
    assert change == pytest.approx(np.sum((D - dual)[moved]), rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_the_logistic_kernels_need_margins_and_logits(sparse):
    X, Y, sw = _problem("logistic", sparse=sparse)
    n, d = X.shape
    with pytest.raises(ValueError, match="margins and logits"):
        sdca_chunk(X, Y, sw, np.zeros((n, 1)), np.zeros((n, 1)), np.zeros((d + 1, 1)),
                   np.zeros((d + 1, 1)), loss=loss_code("logistic"), inv_lam_n=1.0, sigma=1.0,
                   intercept_scaling=1.0, order=np.arange(n, dtype=np.int64),
                   stop=np.zeros(1, np.int64), sums=np.zeros(3))


def test_one_compiled_kernel_per_loss_and_layout():
    from daskelastic import solvers

    assert sorted(solvers._KERNELS) == ["csr", "csr_1", "dense", "dense_1"]
    for kernels in solvers._KERNELS.values():
        assert sorted(kernels) == sorted(LOSSES.values())
        names = {getattr(k, "py_func", k).__qualname__ for k in kernels.values()}
        assert len(names) == len(LOSSES)   # own names: own entries in numba's cache


@pytest.mark.parametrize("loss", ["logistic", "hinge"])
def test_rounds_reuse_their_arrays_with_the_same_results(loss):
    """The workspace hands the same arrays to every round; results as with fresh ones."""
    X, Y, sw = _problem(loss, n=300, sparse=True)
    a = ChunkSolver(loss_code(loss), 1, 1.0)
    b = ChunkSolver(loss_code(loss), 1, 1.0)
    for s in (a, b):
        s.add_chunk(0, X, Y, sw)
    w = np.zeros((X.shape[1] + 1, 1))
    before = None
    for r in range(4):
        ra = a.solve(w, round_id=r, inv_lam_n=0.5, sigma=1.0, steps=450 if r == 2 else None)
        arrays = {name: id(arr) for name, arr in a._work._arrays.items()}
        b._work.clear()
        rb = b.solve(w, round_id=r, inv_lam_n=0.5, sigma=1.0, steps=450 if r == 2 else None)
        assert np.array_equal(ra.dw, rb.dw)
        assert (ra.loss_sum, ra.dual_sum, ra.alpha_z_sum, ra.dual_change) == \
            (rb.loss_sum, rb.dual_sum, rb.alpha_z_sum, rb.dual_change)
        if before is not None and r != 2 and r != 3:
            assert arrays == before   # no new row-sized array
        before = arrays
        a.commit(r, gamma=0.7)
        b.commit(r, gamma=0.7)
        w = w + 0.7 * ra.dw
    assert np.array_equal(a._packed[3], b._packed[3])
    assert "dalpha" in a._work._arrays and (loss != "logistic" or "dual" in a._work._arrays)


@pytest.mark.parametrize("m", [1, 3])
def test_logistic_rounds_reuse_the_dual_values_of_the_committed_step_bit_for_bit(m):
    """After a commit with a step of 1 the next round takes no log; results as taken afresh.

    The dual values and logits of ``α + Δα`` come from the round's dual change.

    Through discarded rounds, steps other than 1, a stopped round and a
    repacking (a chunk added), which each leave or drop the kept logs.
    """
    X, Y, sw = _problem("logistic", n=200, m=m, sparse=True)
    a = ChunkSolver(loss_code("logistic"), m, 1.0)
    b = ChunkSolver(loss_code("logistic"), m, 1.0)
    for s in (a, b):
        s.add_chunk(0, X[:150], Y[:150], sw[:150])
    w = np.zeros((X.shape[1] + 1, m))
    plan = [("commit", 1.0), ("commit", 1.0), ("discard", None), ("commit", 1.0),
            ("commit", 0.6), ("commit", 1.0), ("stop", 1.0), ("add", 1.0), ("commit", 1.0)]
    reused = 0
    for r, (what, gamma) in enumerate(plan):
        if what == "add":
            for s in (a, b):
                s.add_chunk(1, X[150:], Y[150:], sw[150:])
        reused += a._alpha_duals is not None and a._alpha_duals[0] is a._pack()[3]
        b._alpha_duals = None   # b takes the logs afresh every round
        steps = 60 if what == "stop" else None
        ra = a.solve(w, round_id=r, inv_lam_n=0.5, sigma=1.0, steps=steps)
        rb = b.solve(w, round_id=r, inv_lam_n=0.5, sigma=1.0, steps=steps)
        assert np.array_equal(ra.dw, rb.dw)
        assert (ra.loss_sum, ra.dual_sum, ra.alpha_z_sum, ra.dual_change) == \
            (rb.loss_sum, rb.dual_sum, rb.alpha_z_sum, rb.dual_change)
        if what == "discard":
            a.discard(r)
            b.discard(r)
            continue
        a.commit(r, gamma=gamma)
        b.commit(r, gamma=gamma)
        w = w + gamma * ra.dw
    assert np.array_equal(a._packed[3], b._packed[3])
    # rounds 1-4 (a discarded round leaves α and its kept values), 6 and 8;
    # not after the step of 0.6 or the chunk added
    assert reused == 6


def test_the_visiting_order_is_the_same_in_a_workspace():
    from daskelastic.solvers import Workspace

    for n, steps in ((100, 100), (100, 250), (37, 10)):
        want = _visit_order(np.random.default_rng(4), n, steps, bucket=16)
        got = _visit_order(np.random.default_rng(4), n, steps, bucket=16, work=Workspace())
        np.testing.assert_array_equal(got, want)
        assert got.shape == (max(n, steps),)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_repacking_gathers_the_same_rows_as_packing_afresh(sparse):
    """After chunks come and go, the packed rows equal a fresh solver's of the same chunks."""
    chunks = {}
    for cid in range(4):
        X, Y, sw = _problem("logistic", n=30 + 7 * cid, sparse=sparse, seed=cid)
        chunks[cid] = (X, Y, sw)
    a = ChunkSolver(loss_code("logistic"), 1, 1.0, seed=3)
    for cid in (0, 1, 2):
        a.add_chunk(cid, *chunks[cid])
    w = np.zeros((7, 1))
    res = a.solve(w, round_id=0, inv_lam_n=0.5, sigma=1.0)
    a.commit(0)
    a.remove_chunks([1])                      # packed: one gather from the packed rows
    a.add_chunk(3, *chunks[3], alpha=np.full((chunks[3][0].shape[0], 1), 0.25) * chunks[3][1])
    a.solve(w + res.dw, round_id=1, inv_lam_n=0.5, sigma=1.0)   # packed with the new chunk
    a.discard(1)
    b = ChunkSolver(loss_code("logistic"), 1, 1.0, seed=3)
    for cid in (0, 2, 3):
        b.add_chunk(cid, *a.get_chunk(cid))
    b._pack()
    for got, want in zip(a._packed, b._packed):
        if sp.issparse(got):
            assert got.has_sorted_indices and want.has_sorted_indices
            for attr in ("data", "indices", "indptr"):
                np.testing.assert_array_equal(getattr(got, attr), getattr(want, attr))
        else:
            np.testing.assert_array_equal(got, want)
    for cid in (0, 2, 3):
        for got, want in zip(a.get_chunk(cid), (*chunks[cid], None)):
            if want is not None:
                got_d = got.toarray() if sp.issparse(got) else got
                want_d = want.toarray() if sp.issparse(want) else want
                np.testing.assert_array_equal(np.asarray(got_d).reshape(want_d.shape), want_d)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("piece_bytes", [1, 2000, None], ids=["rows", "ranges", "whole"])
def test_gathering_source_by_source_is_the_stack_gathered(sparse, piece_bytes):
    """``gather_stacked`` returns the rows ``take`` of the stacked sources (the plain
    stack-then-gather it replaces), and lets go of each source."""
    from daskelastic.solvers.store import _gather_rows, _stack_rows, gather_stacked

    rng = np.random.default_rng(5)
    sources = []
    for n in (23, 0, 41, 9):
        X = (sp.random(n, 12, density=0.3, format="csr", random_state=n) if sparse
             else rng.normal(size=(n, 12)))
        sources.append((X, rng.normal(size=(n, 2)), rng.random(n), rng.normal(size=(n, 2))))
    n = sum(src[0].shape[0] for src in sources)
    take = rng.permutation(n)[:60]    # a packing that leaves some rows out
    want = [_gather_rows(_stack_rows([src[0] for src in sources]), take)]
    want += [np.concatenate([src[k] for src in sources])[take] for k in (1, 2, 3)]
    given = list(sources)
    got = gather_stacked(given, take, piece_bytes=piece_bytes)
    assert given == [None] * len(sources)
    for g, w in zip(got, want):
        if sp.issparse(w):
            assert sp.issparse(g) and g.format == "csr" and g.has_sorted_indices
            for attr in ("data", "indices", "indptr"):
                np.testing.assert_array_equal(getattr(g, attr), getattr(w, attr))
        else:
            assert g.flags.c_contiguous
            np.testing.assert_array_equal(g, w)


def test_packing_in_ranges_packs_as_in_one(monkeypatch):
    """The packing a solver makes does not depend on the size of the ranges it gathers."""
    from daskelastic.solvers import store

    def packed(piece_bytes):
        monkeypatch.setattr(store, "PACK_PIECE_BYTES", piece_bytes)
        solver = ChunkSolver(loss_code("logistic"), 1, 1.0, seed=3)
        for cid in range(3):
            X, Y, sw = _problem("logistic", n=40 + cid, sparse=True, seed=cid)
            solver.add_chunk(cid, X, Y, sw)
        return solver._pack()

    for got, want in zip(packed(500), packed(1 << 40)):
        if sp.issparse(got):
            assert (got != want).nnz == 0
        else:
            np.testing.assert_array_equal(got, want)


def _chunks_of(solver):
    return {cid: tuple(np.asarray(a.toarray() if sp.issparse(a) else a).copy()
                       for a in solver.get_chunk(cid)) for cid in solver.chunk_ids}


def _assert_same_chunks(got, want):
    assert sorted(got) == sorted(want)
    for cid in want:
        for g, w in zip(got[cid], want[cid]):
            np.testing.assert_array_equal(g.reshape(w.shape), w)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_moving_rows_as_a_block_keeps_every_chunk_and_packs_as_chunk_by_chunk(sparse):
    """take_rows/add_rows move chunks with their α; the packings are those of
    moving the chunks one by one (remove_chunks/add_chunk)."""
    loss = loss_code("logistic")

    def two_solvers():
        a = ChunkSolver(loss, 1, 1.0, seed=1)
        b = ChunkSolver(loss, 1, 1.0, seed=2)
        for cid in range(5):
            dtype = np.float32 if cid < 3 else np.float64   # the block is float32, b float64
            X, Y, sw = _problem("logistic", n=20 + 3 * cid, sparse=sparse, dtype=dtype,
                                seed=cid)
            (a if cid < 3 else b).add_chunk(cid, X, Y, sw)
        for s in (a, b):
            s.solve(np.zeros((7, 1)), round_id=0, inv_lam_n=0.3, sigma=1.0)
            s.commit(0, gamma=0.5)
        return a, b

    a, b = two_solvers()
    before = {**_chunks_of(a), **_chunks_of(b)}
    total = a.weighted_alpha_sum(6) + b.weighted_alpha_sum(6)
    block = a.take_rows([2, 0])
    assert sorted(block.rows) == [0, 2] and block.X.shape[0] == 20 + 26
    assert a.chunk_ids == [1]
    b.add_rows(block)
    assert b.chunk_ids == [0, 2, 3, 4] and b.n_rows == 20 + 26 + 29 + 32
    _assert_same_chunks({**_chunks_of(a), **_chunks_of(b)}, before)     # block not packed
    b.solve(np.zeros((7, 1)), round_id=1, inv_lam_n=0.3, sigma=1.0)
    b.discard(1)
    _assert_same_chunks({**_chunks_of(a), **_chunks_of(b)}, before)
    np.testing.assert_allclose(a.weighted_alpha_sum(6) + b.weighted_alpha_sum(6), total,
                               rtol=1e-12, atol=1e-12)
    # the same moves chunk by chunk give bitwise the same packings
    a1, b1 = two_solvers()
    for cid, arrays in a1.remove_chunks([2, 0]).items():
        b1.add_chunk(cid, *arrays)
    b1._pack()
    for s, s1 in ((a, a1), (b, b1)):
        assert {c: list(r) for c, r in s._rows.items()} == \
            {c: list(r) for c, r in s1._rows.items()}
        for got, want in zip(s._packed, s1._packed):
            if sp.issparse(got):
                assert got.has_sorted_indices
                for attr in ("data", "indices", "indptr"):
                    np.testing.assert_array_equal(getattr(got, attr), getattr(want, attr))
            else:
                np.testing.assert_array_equal(got, want)


def test_taking_every_row_hands_over_the_packed_arrays():
    """A worker giving all its chunks away sends its packed arrays as they are."""
    loss = loss_code("hinge")
    a = ChunkSolver(loss, 1, 1.0)
    for cid in range(3):
        a.add_chunk(cid, *_problem("hinge", n=15, sparse=True, seed=cid))
    a._pack()
    packed = a._packed
    block = a.take_rows([0, 1, 2])
    assert all(x is y for x, y in zip(block[:4], packed))
    assert a.chunk_ids == [] and a.n_rows == 0
    # the chunks can move on from a block not packed yet
    b, c = ChunkSolver(loss, 1, 1.0), ChunkSolver(loss, 1, 1.0)
    b.add_rows(block)
    want = _chunks_of(b)
    c.add_rows(b.take_rows([1]))
    assert b.chunk_ids == [0, 2] and c.chunk_ids == [1]
    _assert_same_chunks({**_chunks_of(b), **_chunks_of(c)}, want)


def test_block_moves_reject_bad_requests():
    loss = loss_code("squared")
    a = ChunkSolver(loss, 1, 1.0)
    b = ChunkSolver(loss, 1, 1.0)
    X, Y, sw = _problem("squared", n=12)
    a.add_chunk(0, X, Y, sw)
    b.add_chunk(0, X, Y, sw)
    with pytest.raises(KeyError, match=r"\[5\] are not held"):
        a.take_rows([5])
    block = a.take_rows([0])
    with pytest.raises(ValueError, match=r"\[0\] are already held"):
        b.add_rows(block)
    bad = block._replace(rows={7: np.arange(6)})        # half the rows belong to no chunk
    with pytest.raises(ValueError, match="cover each of its rows once"):
        b.add_rows(bad)
    b.solve(np.zeros((7, 1)), round_id=0, inv_lam_n=1.0, sigma=1.0)
    with pytest.raises(RuntimeError, match="pending"):
        b.take_rows([0])
    with pytest.raises(RuntimeError, match="pending"):
        b.add_rows(block._replace(rows={7: np.arange(12)}))


def test_taking_chunks_added_since_the_last_round_packs_nothing():
    """Chunks not packed yet leave as they are; the other rows are not packed for it."""
    loss = loss_code("logistic")
    a = ChunkSolver(loss, 1, 1.0)
    chunks = {cid: _problem("logistic", n=10 + cid, sparse=True, seed=cid) for cid in range(3)}
    for cid, arrays in chunks.items():
        a.add_chunk(cid, *arrays)
    block = a.take_rows([2, 0])
    assert a._packed is None and a.chunk_ids == [1]
    b = ChunkSolver(loss, 1, 1.0)
    b.add_rows(block)
    want = {cid: tuple(np.asarray(x.toarray() if sp.issparse(x) else x) for x in (*arrays,
                       np.zeros((arrays[0].shape[0], 1))))
            for cid, arrays in chunks.items() if cid != 1}
    _assert_same_chunks(_chunks_of(b), want)


def test_a_block_given_back_before_packing_leaves_the_workers_packing_as_it_was():
    """A block that leaves again unpacked does not set the worker's matrix type."""
    loss = loss_code("hinge")
    a = ChunkSolver(loss, 1, 1.0)
    b = ChunkSolver(loss, 1, 1.0)
    a.add_chunk(0, *_problem("hinge", n=12, sparse=True, seed=0))
    b.add_chunk(3, *_problem("hinge", n=9, dtype=np.float32, seed=3))
    a._pack()
    b._pack()
    b.add_rows(a.take_rows([0]))
    a.add_rows(b.take_rows([0]))          # back before b packed it
    b._pack()
    assert isinstance(b._packed[0], np.ndarray) and b._packed[0].dtype == np.float32
    assert b.chunk_ids == [3] and a.chunk_ids == [0]


def test_block_moves_of_several_targets_and_repeated_ids():
    loss = loss_code("logistic")
    a = ChunkSolver(loss, 2, 1.0)
    b = ChunkSolver(loss, 2, 1.0)
    for cid in range(3):
        a.add_chunk(cid, *_problem("logistic", n=11 + cid, m=2, seed=cid))
    a.solve(np.zeros((7, 2)), round_id=0, inv_lam_n=0.5, sigma=1.0)
    a.commit(0, gamma=1.0)
    before = _chunks_of(a)
    b.add_rows(a.take_rows([1, 1, 2]))     # an id twice moves the chunk once
    assert a.chunk_ids == [0] and b.chunk_ids == [1, 2]
    _assert_same_chunks({**_chunks_of(a), **_chunks_of(b)}, before)
    with pytest.raises(ValueError, match="no chunks to take"):
        a.take_rows([])


@pytest.mark.parametrize("rows", [{7: np.array([0, 1, 2, -1])}, {7: np.array([0, 1, 2, 4])}],
                         ids=["negative", "beyond"])
def test_add_rows_rejects_positions_outside_the_block(rows):
    from daskelastic.solvers import RowBlock
    X, Y, sw = _problem("squared", n=4)
    solver = ChunkSolver(loss_code("squared"), 1, 1.0)
    with pytest.raises(ValueError, match=r"must be in \[0, 4\)"):
        solver.add_rows(RowBlock(X, Y, sw, np.zeros((4, 1)), rows))
    with pytest.raises(ValueError, match="4 rows and 1 columns"):
        solver.add_rows(RowBlock(X, np.zeros((4, 2)), sw, np.zeros((4, 1)),
                                 {7: np.arange(4)}))
    assert solver.chunk_ids == []


def test_one_csr_block_is_packed_from_its_own_arrays():
    """Stacking one CSR block keeps it as it is; only the shuffled gather copies it.

    (``csr_matrix(X)`` copied the arrays of a block deserialized from a Dask
    message, views of its buffer: up to 50 ms for half of the flights table.)
    """
    from daskelastic.solvers import _stack_rows

    X = sp.random(40, 6, density=0.3, format="csr", random_state=1)
    assert _stack_rows([X]) is X
    solver = ChunkSolver(loss_code("hinge"), 1, intercept_scaling=1.0)
    solver.add_chunk(0, X, np.ones((40, 1)), np.ones(40))
    packed = solver._pack()[0]
    order = solver._rows[0]   # packed position of each of the chunk's rows
    assert (packed[order] != X).nnz == 0


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_chunks_that_came_shuffled_are_packed_in_their_own_order(sparse):
    """Chunks added with ``shuffled=True`` are stacked as they are, not gathered
    again; one chunk in the input's order among them brings the shuffle back."""
    chunks = {cid: _problem("logistic", n=30 + 5 * cid, sparse=sparse, seed=cid)
              for cid in range(3)}
    stacked = ChunkSolver(loss_code("logistic"), 1, 1.0)
    for cid in range(3):
        stacked.add_chunk(cid, *chunks[cid], shuffled=True)
    X, Y, sw, alpha = stacked._pack()
    want_X = sp.vstack([chunks[c][0] for c in range(3)]) if sparse else \
        np.vstack([chunks[c][0] for c in range(3)])
    got_X, want_X = (X.toarray(), want_X.toarray()) if sparse else (X, want_X)
    np.testing.assert_array_equal(got_X, want_X)
    np.testing.assert_array_equal(Y, np.vstack([chunks[c][1] for c in range(3)]))
    np.testing.assert_array_equal(sw, np.concatenate([chunks[c][2] for c in range(3)]))
    starts = np.cumsum([0] + [chunks[c][0].shape[0] for c in range(3)])
    for cid in range(3):
        np.testing.assert_array_equal(stacked._rows[cid], np.arange(starts[cid], starts[cid + 1]))
    # a round, then moves, work on that packing as on a shuffled one
    w = np.zeros((7, 1))
    res = stacked.solve(w, round_id=0, inv_lam_n=0.5, sigma=1.0)
    stacked.commit(0)
    np.testing.assert_allclose(stacked.weighted_alpha_sum(6) * 0.5, res.dw, atol=1e-12)
    got = stacked.remove_chunks([1])[1]
    d = got[0].toarray() if sparse else got[0]
    want = chunks[1][0].toarray() if sparse else chunks[1][0]
    np.testing.assert_array_equal(d, want)

    mixed = ChunkSolver(loss_code("logistic"), 1, 1.0)
    for cid in range(3):
        mixed.add_chunk(cid, *chunks[cid], shuffled=cid != 1)
    assert not np.array_equal(mixed._pack()[1], Y)       # shuffled afresh
    np.testing.assert_array_equal(np.sort(mixed._packed[2]), np.sort(sw))


def test_a_shuffled_chunk_is_packed_in_writable_arrays_of_its_own_dual_state():
    """Read-only buffers (as a message's may be) are copied; α is always the solver's."""
    X, Y, sw = _problem("hinge", n=30, sparse=True)
    for a in (X.data, X.indices, X.indptr, Y, sw):
        a.flags.writeable = False
    alpha = np.zeros((30, 1))
    solver = ChunkSolver(loss_code("hinge"), 1, intercept_scaling=1.0)
    solver.add_chunk(0, X, Y, sw, alpha=alpha, shuffled=True)
    P, PY, Psw, Palpha = solver._pack()
    for a in (P.data, P.indices, P.indptr, PY, Psw, Palpha):
        assert a.flags.writeable and a.flags.c_contiguous
    assert not np.shares_memory(Palpha, alpha)
    res = solver.solve(np.zeros((7, 1)), round_id=0, inv_lam_n=1.0, sigma=1.0)
    solver.commit(0)
    assert res.steps == 30 and not alpha.any()   # the caller's α is left as it was


def test_make_chunks_cuts_a_random_order_and_marks_the_chunks_shuffled():
    """With ``shuffle`` the chunks partition the rows in a random order (which
    the solvers keep); without, they are consecutive blocks, not marked."""
    from daskelastic.placement import make_chunks, split_rows

    X, Y, sw = _problem("logistic", n=90, sparse=True)
    chunks = make_chunks(X, Y, sw, split_rows(90, n_chunks=3), shuffle=5)
    rows = np.concatenate([c.rows for c in chunks])
    np.testing.assert_array_equal(np.sort(rows), np.arange(90))
    assert not np.array_equal(rows, np.arange(90))
    for c in chunks:
        assert c.shuffled and c.X.has_sorted_indices
        np.testing.assert_array_equal(c.X.toarray(), X[c.rows].toarray())
        np.testing.assert_array_equal(c.Y, Y[c.rows])
        np.testing.assert_array_equal(c.sample_weight, sw[c.rows])
    plain = make_chunks(X, Y, sw, split_rows(90, n_chunks=3))
    assert not any(c.shuffled for c in plain)
    np.testing.assert_array_equal(np.concatenate([c.rows for c in plain]), np.arange(90))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["dense", "csr", "strided"])
def test_sq_norm_sum_is_the_sum_of_the_squared_values(dtype, kind):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 6)).astype(dtype)
    X[X < 0.3] = 0.0
    ref_value = float(np.sum(X.astype(np.float64) ** 2))
    M = {"dense": X, "csr": sp.csr_matrix(X), "strided": np.asfortranarray(X)[:, ::2]}[kind]
    if kind == "strided":
        ref_value = float(np.sum(X[:, ::2].astype(np.float64) ** 2))
    got = sq_norm_sum(M)
    assert isinstance(got, float)
    assert got == pytest.approx(ref_value, rel=1e-12)
