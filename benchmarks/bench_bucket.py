"""The local solver's bucket size: rounds to a gap against seconds per epoch.

What it measures (327,346 × 4,198 flights CSR, C = 1, no intercept, one
worker in this process; losses logistic, hinge and squared hinge), for each
bucket size ``B`` of the visiting order (``daskelastic.solvers.local.BUCKET_ROWS``:
the packed rows are visited in buckets of ``B`` consecutive rows, the
buckets in a fresh random order every round):

(a) rounds and seconds of an in-process fit (``backend="inprocess"``) to a
    certified relative duality gap of ``--tol`` (1e-4);
(b) seconds of one local epoch (``ChunkSolver.solve``, σ′ = 1) after three
    committed warm-up epochs, the bucket sizes interleaved, median of
    ``--repeats`` epochs each.  ``B = 1`` is a fully random row order.

Reproduce::

    python benchmarks/bench_bucket.py                 # ~3 minutes on 2 cores
    python benchmarks/bench_bucket.py --sizes 64 16

Outputs ``results/bench_bucket.{json,csv,txt,png}``.
"""

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as cm  # noqa: E402

LOSSES = ["logistic", "hinge", "squared_hinge"]


def fit_rounds(X, y, loss, tol, max_iter):
    """Rounds and seconds of an in-process fit to ``tol``."""
    from sklearn.exceptions import ConvergenceWarning

    from daskelastic import LinearSVC, LogisticRegression

    common = dict(C=1.0, fit_intercept=False, tol=tol, backend="inprocess",
                  max_iter=max_iter, random_state=0)
    est = (LogisticRegression(**common) if loss == "logistic"
           else LinearSVC(loss=loss, **common))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t = time.perf_counter()
        est.fit(X, y)
        seconds = time.perf_counter() - t
    return int(est.n_iter_[0]), seconds, float(est.history_[-1]["duality_gap"])


def epoch_seconds(solvers, X, Y, loss, sizes, repeats):
    """``{B: [seconds of an epoch]}``, sizes interleaved, from one warm dual state."""
    from daskelastic.losses import loss_code

    n, d = X.shape
    solver = solvers.ChunkSolver(loss=loss_code(loss), n_targets=1, intercept_scaling=0.0)
    solver.add_chunk(0, X, Y, np.ones(n))
    w = np.zeros((d + 1, 1))
    for r in range(3):   # C = 1: 1/(λn) = 1
        out = solver.solve(w, round_id=r, inv_lam_n=1.0, sigma=1.0)
        solver.commit(r)
        w = w + out.dw
    times, r = {b: [] for b in sizes}, 3
    for _ in range(repeats):
        for b in sizes:
            solvers.local.BUCKET_ROWS = b
            out = solver.solve(w, round_id=r, inv_lam_n=1.0, sigma=1.0)
            solver.discard(r)
            times[b].append(out.seconds)
            r += 1
    return times


def plot(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for loss in LOSSES:
        rows = [r for r in results["rows"] if r["loss"] == loss]
        sizes = [r["bucket"] for r in rows]
        axes[0].plot(sizes, [r["rounds"] for r in rows], "o-", label=loss)
        axes[1].plot(sizes, [r["epoch_ms"] for r in rows], "o-", label=loss)
    for ax, label in zip(axes, ["rounds to the gap", "ms per epoch"]):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("rows per bucket")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    cm.save_figure(fig, path, title)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 32, 16, 8, 1])
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--max-iter", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)

    import daskelastic.solvers as solvers
    from daskelastic.datasets import load_flights

    log = cm.Tee()
    env = cm.environment()
    X, y, _ = load_flights()
    Y = np.where(y == y.max(), 1.0, -1.0).reshape(-1, 1)
    log(f"bench_bucket  {env['time']}  cpus={env['cpus']}  loadavg={env['loadavg']}")
    log(f"flights: {X.shape[0]} × {X.shape[1]}, nnz={X.nnz}, C=1, tol={args.tol:g}, "
        f"one worker in-process; bucket sizes {args.sizes}")
    default = solvers.local.BUCKET_ROWS
    fit_rounds(X[:2000], y[:2000], "logistic", 1e-2, 5)   # numba warm-up
    rows = []
    try:
        for loss in LOSSES:
            epochs = epoch_seconds(solvers, X, Y, loss, args.sizes, args.repeats)
            for b in args.sizes:
                solvers.local.BUCKET_ROWS = b
                rounds, seconds, gap = fit_rounds(X, y, loss, args.tol, args.max_iter)
                ms = 1e3 * statistics.median(epochs[b])
                rows.append({"loss": loss, "bucket": b, "rounds": rounds,
                             "fit_seconds": seconds, "final_gap": gap, "epoch_ms": ms})
                log(f"  {loss:<14} B={b:<4} {rounds:>4} rounds  {seconds:6.2f} s  "
                    f"gap {gap:.1e}  epoch {ms:6.1f} ms")
    finally:
        solvers.local.BUCKET_ROWS = default
    body = []
    for r in rows:
        ref = next(q for q in rows if q["loss"] == r["loss"] and q["bucket"] == args.sizes[0])
        rounds = f"{r['rounds']}" + ("" if r["final_gap"] <= args.tol else " (not reached)")
        body.append([r["loss"], r["bucket"], rounds, f"{r['fit_seconds']:.2f}",
                     f"{r['epoch_ms']:.1f}", f"{r['epoch_ms'] / ref['epoch_ms']:.2f}×"])
    log("")
    log(cm.table(body, ["loss", "rows per bucket", f"rounds to {args.tol:g}", "fit s",
                        "epoch ms", f"epoch / B={args.sizes[0]}"]))
    results = {"rows": rows, "tol": args.tol, "sizes": args.sizes, "environment": env}
    cm.write_results("bench_bucket", results, rows, log, plot,
                     f"flights, one worker, C=1: bucket size (tol {args.tol:g})")


if __name__ == "__main__":
    main()
