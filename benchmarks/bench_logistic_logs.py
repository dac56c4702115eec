"""The logistic solver's logs: one vectorised loop against NumPy's ufunc passes.

What it measures (327,346 × 4,198 flights CSR, C = 1, no intercept, one
worker in this process, σ′ = 1, targets: the flights label, or ``--targets 3``
one-vs-rest columns):

Each round of a logistic ``ChunkSolver`` takes, after its kernel, the dual
values and logits of its new ``α`` (``_logistic_dual_change``): with a round
committed at a step of 1 they are also the next round's start.  Two solvers
on the same rows take turns round by round, one with the solver's own pass
(``_logistic_duals``: one numba loop that LLVM vectorises, with the logs of
``daskelastic._vmath``) and one with the passes it replaced, kept here as
``previous_*`` (a numba loop for ``β``, NumPy's ``log``, ``negative`` and
``log1p`` over arrays, a numba loop for the dual values and logits, one for
the change).  Per round: the time of that step, of the kernel and of the
whole ``solve``; the table gives the medians after ``--warmup`` rounds and
the median of the per-round ratios.  The two solvers' ``w`` and gap sums
after the last round are compared (they differ only by the logs' rounding).

Since 15f12c8 the solver's own pass leaves sample weights that are all 1
unread (flights has none), where the passes of 43ee53b read them: a rerun
measures both changes together (the committed results are from before).

Reproduce::

    python benchmarks/bench_logistic_logs.py               # ~1 minute on 2 cores
    python benchmarks/bench_logistic_logs.py --targets 3

Outputs ``results/bench_logistic_logs[_m<targets>].{json,csv,txt,png}``.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

from daskelastic.losses import LOGISTIC, dual_value

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as cm  # noqa: E402


# -- the passes before (daskelastic 43ee53b) ------------------------------------------
@njit(cache=True, nogil=True, error_model="numpy")
def _previous_beta(y, c, a, da, b):
    for e in range(y.shape[0]):
        v = (a[e] + da[e]) * y[e] / c[e]
        b[e] = v if (v > 0.0) & (v < 1.0) & (c[e] > 0.0) else np.nan


@njit(cache=True, nogil=True, error_model="numpy")
def _previous_duals(y, c, a, da, b, log_b, log_1b, D, U):
    tol = 1e-12
    for e in range(y.shape[0]):
        be = b[e]
        if be == be:
            D[e] = -c[e] * (be * log_b[e] + (1.0 - be) * log_1b[e])
        else:
            D[e] = dual_value(LOGISTIC, y[e], a[e] + da[e], c[e])
        U[e] = log_b[e] - log_1b[e] if (be > tol) & (be < 1.0 - tol) else np.nan


@njit(cache=True, nogil=True)
def _previous_sum(da, D, Dn):
    total = 0.0
    for e in range(da.shape[0]):
        if da[e] != 0.0:
            total += Dn[e] - D[e]
    return total


def previous_dual_change(Y, sw, alpha, dalpha, dual, work=None):
    """``_logistic_dual_change`` as it was: six passes, the logs NumPy's."""
    from daskelastic.solvers import _array

    c = sw if Y.shape[1] == 1 else np.repeat(sw, Y.shape[1])   # (read, as then)
    y, a, da = Y.reshape(-1), alpha.reshape(-1), dalpha.reshape(-1)
    B = _array(work, "beta", alpha)
    _previous_beta(y, c, a, da, B.reshape(-1))
    # (43ee53b's gap sums took their exp and log1p in this same array)
    log_b = np.log(B, out=_array(work, "softplus", B))
    log_1b = np.negative(B, out=_array(work, "log_1b", B))
    np.log1p(log_1b, out=log_1b)
    names = ("dual2", "logit2") if work is not None and dual is _array(work, "dual", alpha) \
        else ("dual", "logit")
    D, U = _array(work, names[0], alpha), _array(work, names[1], alpha)
    _previous_duals(y, c, a, da, B.reshape(-1), log_b.reshape(-1), log_1b.reshape(-1),
                    D.reshape(-1), U.reshape(-1))
    return float(_previous_sum(da, dual.reshape(-1), D.reshape(-1))), (D, U)


# -- the run ---------------------------------------------------------------------------
def run(prob, targets, rounds, warmup):
    """``{variant: {part: [seconds per round]}}`` and the two solvers' final states."""
    import daskelastic.solvers as S
    from daskelastic.losses import loss_code
    from daskelastic.solvers import local  # the round reads both steps from here

    Y = cm.targets_of(prob, targets)
    change = {"vectorised": S._logistic_dual_change, "previous": previous_dual_change}
    kernel = S.sdca_chunk
    times = {v: {"solve": [], "kernel": [], "dual change": []} for v in change}
    current = [None]

    def timed(part, f):
        def g(*a, **k):
            t0 = time.perf_counter()
            out = f(*a, **k)
            times[current[0]][part].append(time.perf_counter() - t0)
            return out
        return g

    state = {}
    for v in change:
        solver = S.ChunkSolver(loss_code("logistic"), targets, 0.0)
        solver.add_chunk(0, prob.X, Y, prob.sw)
        state[v] = [solver, np.zeros((prob.d + 1, targets))]
    try:
        local.sdca_chunk = timed("kernel", kernel)
        for r in range(warmup + rounds):
            for v in (list(change) if r % 2 else list(change)[::-1]):
                current[0] = v
                local._logistic_dual_change = timed("dual change", change[v])
                solver, w = state[v]
                t0 = time.perf_counter()
                res = solver.solve(w, round_id=r, inv_lam_n=prob.C, sigma=1.0)
                times[v]["solve"].append(time.perf_counter() - t0)
                state[v][1] = w + res.dw
                solver.commit(r)
    finally:
        local.sdca_chunk = kernel
        local._logistic_dual_change = change["vectorised"]
    for v in times:
        for part in times[v]:
            times[v][part] = times[v][part][warmup:]
    return times, state


def plot(results, path, title):
    parts = list(results["ms"]["vectorised"])
    cm.paired_bar_plot(path, title, parts, {v: [results["ms"][v][p] for p in parts]
                                            for v in ["previous", "vectorised"]},
                       "ms per round (median)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cm.add_turn_args(ap, rounds=24, warmup=4)
    args = ap.parse_args()

    name, log, env, prob = cm.start_turns("bench_logistic_logs", args.targets)
    log(f"flights: {prob.n} × {prob.d}, nnz={prob.X.nnz}, C=1, {args.targets} target(s), "
        f"{args.rounds} rounds each after {args.warmup}, the two taking turns")
    times, state = run(prob, args.targets, args.rounds, args.warmup)

    ms = {v: {p: 1e3 * statistics.median(t) for p, t in parts.items()}
          for v, parts in times.items()}
    ratio = {p: statistics.median(b / a for a, b in zip(times["previous"][p],
                                                       times["vectorised"][p]))
             for p in times["previous"]}
    rows, csv_rows = [], []
    for p in ratio:
        rows.append([p, f"{ms['previous'][p]:.2f}", f"{ms['vectorised'][p]:.2f}",
                     f"{ratio[p]:.3f}"])
        csv_rows.append({"part": p, "previous_ms": ms["previous"][p],
                         "vectorised_ms": ms["vectorised"][p], "ratio": ratio[p]})
    log("")
    log(cm.table(rows, ["per round", "previous ms", "vectorised ms",
                        "vectorised / previous (per-round median)"]))
    wa, (sb, wb) = state["previous"][1], state["vectorised"]
    w_diff = float(np.abs(wa - wb).max() / np.abs(wa).max())
    # the two passes on the same α (the vectorised solver's last committed one)
    from daskelastic.solvers import logistic_start

    _, Y, sw, alpha = sb._pack()
    D, U = (a.copy() for a in logistic_start(Y, sw, alpha))
    _, (Dp, Up) = previous_dual_change(Y, sw, alpha, np.zeros_like(alpha), D)
    d_diff = float(np.max(np.abs(D - Dp) / np.maximum(np.abs(Dp), 1e-300)))
    u_diff = float(np.nanmax(np.abs(U - Up) / np.maximum(np.abs(Up), 1e-300)))
    same_nan = bool(np.array_equal(np.isnan(U), np.isnan(Up)))
    log(f"\nafter {args.warmup + args.rounds} rounds: max |Δw| / max |w| = {w_diff:.1e}; "
        f"on one α the two passes' dual values differ by {d_diff:.1e} and logits by "
        f"{u_diff:.1e} at most (relative), NaN logits {'alike' if same_nan else 'NOT alike'}")
    results = {"env": env, "targets": args.targets, "rounds": args.rounds,
               "warmup": args.warmup, "ms": ms, "ratio": ratio,
               "seconds": times, "w_rel_diff": w_diff, "dual_rel_diff": d_diff,
               "logit_rel_diff": u_diff, "nan_logits_alike": same_nan}
    cm.write_results(name, results, csv_rows, log, plot,
                     f"logistic dual values and logits per round ({args.targets} target(s))")


if __name__ == "__main__":
    main()
