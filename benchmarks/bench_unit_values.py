"""Kernels that leave a 0/1 table's values unread, against those that read them.

What it measures (327,346 × 4,198 flights CSR, every stored value 1, C = 1,
no intercept, one worker in this process, σ′ = 1; losses logistic, hinge and
squared hinge, or ``--targets 3`` one-vs-rest columns):

A ``ChunkSolver`` that packs a sparse table whose stored values are all 1
(``daskelastic.solvers.unit_values``) runs CSR kernels compiled with the
values a constant: they stream the ``uint16`` column indices alone, 2 bytes
per non-zero instead of 10.  Per loss, two solvers on the same rows take
turns round by round, one on those kernels ("unit") and one on the kernels
that read the values ("values", ``unit_values`` turned off for it).  Before
each round one CSR ``X @ w`` plus ``X.T @ r`` pass is timed, as in
``bench_local_solver.py``.  The table gives, after ``--warmup`` rounds, the
median round (``solve``) of each, the median of the per-round ratios to the
pass and the median of the per-round ratios unit / values.  The two solvers'
``w`` are compared after the last round: the kernels do the same arithmetic
(1 is exact), so they must be equal bit for bit.

Reproduce::

    python benchmarks/bench_unit_values.py                # ~1 minute on 2 cores
    python benchmarks/bench_unit_values.py --targets 3

Outputs ``results/bench_unit_values[_m<targets>].{json,csv,txt,png}``.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as cm  # noqa: E402

LOSSES = ["logistic", "hinge", "squared_hinge"]
VARIANTS = ["values", "unit"]


def one_pass(X, w, r):
    """Seconds of one ``X @ w`` plus ``X.T @ r``."""
    t0 = time.perf_counter()
    X @ w
    X.T @ r
    return time.perf_counter() - t0


def run(prob, Y, rounds, warmup):
    """``{(loss, variant): {"solve": [...], "pass": [...]}}`` and the final ``w``."""
    import daskelastic.solvers as S
    from daskelastic.losses import loss_code

    assert S.unit_values(prob.X), "the flights table's values should all be 1"
    m = Y.shape[1]
    check = S.unit_values
    state, times = {}, {}
    try:
        for loss in LOSSES:
            for v in VARIANTS:
                S.unit_values = check if v == "unit" else (lambda X: False)
                solver = S.ChunkSolver(loss_code(loss), m, 0.0)
                solver.add_chunk(0, prob.X, Y, prob.sw)
                solver._pack()   # (packed here: unit_values is read at packing)
                assert solver._unit == (v == "unit")
                state[loss, v] = [solver, np.zeros((prob.d + 1, m))]
                times[loss, v] = {"solve": [], "pass": []}
    finally:
        S.unit_values = check
    rng = np.random.default_rng(0)
    xw, xr = rng.standard_normal(prob.d), rng.standard_normal(prob.n)
    for r in range(warmup + rounds):
        for loss in LOSSES:
            for v in (VARIANTS if r % 2 else VARIANTS[::-1]):
                solver, w = state[loss, v]
                p = one_pass(prob.X, xw, xr)
                res = solver.solve(w, round_id=r, inv_lam_n=prob.C, sigma=1.0)
                state[loss, v][1] = w + res.dw
                solver.commit(r)
                if r >= warmup:
                    times[loss, v]["solve"].append(res.seconds)
                    times[loss, v]["pass"].append(p)
    return times, {k: s[1] for k, s in state.items()}


def plot(results, path, title):
    cm.paired_bar_plot(path, title, LOSSES,
                       {v: [results["losses"][loss][v]["pass_ratio"] for loss in LOSSES]
                        for v in VARIANTS},
                       "round / (X@w + Xᵀr pass)", line=(2.5, "2.5× the pass"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cm.add_turn_args(ap, rounds=16, warmup=3)
    args = ap.parse_args()

    name, log, env, prob = cm.start_turns("bench_unit_values", args.targets)
    Y = cm.targets_of(prob, args.targets)
    log(f"flights: {prob.n} × {prob.d}, nnz={prob.X.nnz}, C=1, {args.targets} target(s), "
        f"{args.rounds} rounds each after {args.warmup}, the variants taking turns")
    times, ws = run(prob, Y, args.rounds, args.warmup)

    rows, csv_rows, per_loss = [], [], {}
    for loss in LOSSES:
        out = {}
        for v in VARIANTS:
            t = times[loss, v]
            out[v] = {"ms": 1e3 * statistics.median(t["solve"]),
                      "pass_ms": 1e3 * statistics.median(t["pass"]),
                      "pass_ratio": statistics.median(a / b for a, b in zip(t["solve"],
                                                                            t["pass"]))}
        out["ratio"] = statistics.median(b / a for a, b in zip(times[loss, "values"]["solve"],
                                                               times[loss, "unit"]["solve"]))
        out["same_w"] = bool(np.array_equal(ws[loss, "values"], ws[loss, "unit"]))
        per_loss[loss] = out
        rows.append([loss, f"{out['values']['ms']:.2f}", f"{out['values']['pass_ratio']:.2f}×",
                     f"{out['unit']['ms']:.2f}", f"{out['unit']['pass_ratio']:.2f}×",
                     f"{out['ratio']:.3f}", "yes" if out["same_w"] else "NO"])
        csv_rows.append({"loss": loss, "values_ms": out["values"]["ms"],
                         "values_pass_ratio": out["values"]["pass_ratio"],
                         "unit_ms": out["unit"]["ms"], "unit_pass_ratio": out["unit"]["pass_ratio"],
                         "unit_over_values": out["ratio"], "same_w": out["same_w"]})
    log("")
    log(cm.table(rows, ["loss", "values ms", "× pass", "unit ms", "× pass",
                        "unit / values (per-round median)", "same w"]))
    passes = [p for t in times.values() for p in t["pass"]]
    log(f"\nX@w + Xᵀr pass: median {1e3 * statistics.median(passes):.2f} ms")
    results = {"env": env, "targets": args.targets, "rounds": args.rounds,
               "warmup": args.warmup, "losses": per_loss,
               "seconds": {f"{loss}/{v}": t for (loss, v), t in times.items()}}
    cm.write_results(name, results, csv_rows, log, plot,
                     f"0/1 table: kernels without the values ({args.targets} target(s))")


if __name__ == "__main__":
    main()
