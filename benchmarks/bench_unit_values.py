"""Kernels that leave a 0/1 table's values (or weights of 1) unread, against those that read them.

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

With ``--weights`` the two solvers differ in the sample weights instead
(flights has none: all 1), both leaving the values unread: one leaves the
weights unread too, in its kernels and in the logistic loss's passes over
whole arrays ("unit"), the other reads them ("weights": the check that
finds them all 1, ``daskelastic.solvers._all_ones``, answers False for
them).  The logistic gap's logs are then summed without the weights, so
its sums differ in rounding, not its ``w``.

Reproduce::

    python benchmarks/bench_unit_values.py                # ~1 minute on 2 cores
    python benchmarks/bench_unit_values.py --targets 3
    python benchmarks/bench_unit_values.py --weights

Outputs ``results/bench_unit_values[_weights][_m<targets>].{json,csv,txt,png}``.
"""

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as cm  # noqa: E402

LOSSES = ["logistic", "hinge", "squared_hinge"]


def one_pass(X, w, r):
    """Seconds of one ``X @ w`` plus ``X.T @ r``."""
    t0 = time.perf_counter()
    X @ w
    X.T @ r
    return time.perf_counter() - t0


@contextlib.contextmanager
def reading(S, what, n_rows):
    """Within it, the solvers read the values (``what="values"``) or the weights."""
    from daskelastic.solvers import logistic, store

    if what == "values":   # read by the store where it packs the rows
        parts, name, check = (store,), "unit_values", store.unit_values
        fake = lambda X: False   # noqa: E731
    else:                  # read where rows are stored and the logistic logs taken
        parts, name, check = (store, logistic), "_all_ones", store._all_ones
        fake = lambda a: a.shape[0] != n_rows and check(a)   # noqa: E731  (weights: n_rows)
    for part in parts:
        setattr(part, name, fake)
    try:
        yield
    finally:
        for part in parts:
            setattr(part, name, check)


def run(prob, Y, rounds, warmup, what):
    """``{(loss, variant): {"solve": [...], "pass": [...]}}`` and the final ``w``."""
    import daskelastic.solvers as S
    from daskelastic.losses import loss_code

    assert S.unit_values(prob.X), "the flights table's values should all be 1"
    assert S._all_ones(prob.sw), "flights has no sample weights"
    m = Y.shape[1]
    variants = [what, "unit"]
    state, times = {}, {}

    def turn(v):   # the variant's checks: what it reads is decided at packing (the
        # values) and by the weights' first check, which its workspace keeps
        return reading(S, what, prob.n) if v == what else contextlib.nullcontext()

    for loss in LOSSES:
        for v in variants:
            with turn(v):
                solver = S.ChunkSolver(loss_code(loss), m, 0.0)
                solver.add_chunk(0, prob.X, Y, prob.sw)
                solver._pack()
                assert (solver._unit, solver._unit_weights) == \
                    ((v != "values"), (v != "weights"))
            state[loss, v] = [solver, np.zeros((prob.d + 1, m))]
            times[loss, v] = {"solve": [], "pass": []}
    rng = np.random.default_rng(0)
    xw, xr = rng.standard_normal(prob.d), rng.standard_normal(prob.n)
    for r in range(warmup + rounds):
        for loss in LOSSES:
            for v in (variants if r % 2 else variants[::-1]):
                solver, w = state[loss, v]
                p = one_pass(prob.X, xw, xr)
                with turn(v):
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
                        for v in [results.get("reads", "values"), "unit"]},
                       "round / (X@w + Xᵀr pass)", line=(2.5, "2.5× the pass"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cm.add_turn_args(ap, rounds=16, warmup=3)
    ap.add_argument("--weights", action="store_true",
                    help="compare weights of 1 read and unread (values unread in both)")
    args = ap.parse_args()

    what = "weights" if args.weights else "values"
    name, log, env, prob = cm.start_turns(
        "bench_unit_values" + ("_weights" if args.weights else ""), args.targets)
    Y = cm.targets_of(prob, args.targets)
    log(f"flights: {prob.n} × {prob.d}, nnz={prob.X.nnz}, C=1, {args.targets} target(s), "
        f"{args.rounds} rounds each after {args.warmup}, the variants taking turns; "
        f"'{what}': the {what} read, 'unit': left unread")
    times, ws = run(prob, Y, args.rounds, args.warmup, what)

    rows, csv_rows, per_loss = [], [], {}
    for loss in LOSSES:
        out = {}
        for v in (what, "unit"):
            t = times[loss, v]
            out[v] = {"ms": 1e3 * statistics.median(t["solve"]),
                      "pass_ms": 1e3 * statistics.median(t["pass"]),
                      "pass_ratio": statistics.median(a / b for a, b in zip(t["solve"],
                                                                            t["pass"]))}
        out["ratio"] = statistics.median(b / a for a, b in zip(times[loss, what]["solve"],
                                                               times[loss, "unit"]["solve"]))
        out["same_w"] = bool(np.array_equal(ws[loss, what], ws[loss, "unit"]))
        per_loss[loss] = out
        rows.append([loss, f"{out[what]['ms']:.2f}", f"{out[what]['pass_ratio']:.2f}×",
                     f"{out['unit']['ms']:.2f}", f"{out['unit']['pass_ratio']:.2f}×",
                     f"{out['ratio']:.3f}", "yes" if out["same_w"] else "NO"])
        csv_rows.append({"loss": loss, f"{what}_ms": out[what]["ms"],
                         f"{what}_pass_ratio": out[what]["pass_ratio"],
                         "unit_ms": out["unit"]["ms"], "unit_pass_ratio": out["unit"]["pass_ratio"],
                         f"unit_over_{what}": out["ratio"], "same_w": out["same_w"]})
    log("")
    log(cm.table(rows, ["loss", f"{what} ms", "× pass", "unit ms", "× pass",
                        f"unit / {what} (per-round median)", "same w"]))
    passes = [p for t in times.values() for p in t["pass"]]
    log(f"\nX@w + Xᵀr pass: median {1e3 * statistics.median(passes):.2f} ms")
    results = {"env": env, "targets": args.targets, "rounds": args.rounds,
               "warmup": args.warmup, "reads": what, "losses": per_loss,
               "seconds": {f"{loss}/{v}": t for (loss, v), t in times.items()}}
    cm.write_results(name, results, csv_rows, log, plot,
                     f"kernels without the {what} ({args.targets} target(s))")


if __name__ == "__main__":
    main()
