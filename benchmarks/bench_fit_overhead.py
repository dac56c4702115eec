"""Wall time of whole fits on a 2-worker LocalCluster, where fixed costs weigh most.

What it measures: the wall time of ``LogisticRegression(C=1).fit`` (flights table,
rows shuffled with seed 0) on a ``LocalCluster`` of 2 single-threaded worker
processes, warmed up by one fit, in three cases:

- 2,000 rows from scipy CSR, 3 rounds (``max_iter=3``): the set-up, the rounds'
  round trips and the clean-up, next to no solver work;
- the same from a dask array with one row block per worker (already on the
  workers);
- the whole table (327,346 rows) from such a dask array, ``tol=1e-3`` (with
  ``--full``).

Besides the wall time (median over the fits), the time outside the rounds: the wall
time less ``history_[-1]["time"]`` (loading before the first round, clean-up after
the last).  The committed results were taken with an A/B mode since removed
(their ``base`` columns); two commits are now compared with the asv suite's
fits on a LocalCluster (``asv continuous``, ``benchmarks/README.md``).

Reproduce::

    python benchmarks/bench_fit_overhead.py
    python benchmarks/bench_fit_overhead.py --full

Writes ``benchmarks/results/bench_fit_overhead.{txt,csv,json,png}``.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as cm  # noqa: E402


def fit_walls(repeats, full):
    """``{case: {"walls": [s], "outside": [s], "rounds": [n]}}`` in a fresh cluster."""
    from bench_distributed import scatter_blocks, start_cluster

    import daskelastic as de
    from daskelastic.datasets import load_flights

    X, y, _ = load_flights()
    X = X.tocsr()
    perm = np.random.default_rng(0).permutation(X.shape[0])
    X, y = X[perm], y[perm]
    cluster, client = start_cluster(2)
    try:
        Xs, ys = X[:2000], y[:2000]
        Xw, yw, _keep_small = scatter_blocks(client, Xs, ys, "csr")
        cases = {"2,000 rows, scipy CSR, 3 rounds": ((Xs, ys), dict(max_iter=3)),
                 "2,000 rows, dask array, 3 rounds": ((Xw, yw), dict(max_iter=3))}
        if full:
            Xd, yd, _keep_full = scatter_blocks(client, X, y, "csr")
            cases["327,346 rows, dask array, tol=1e-3"] = ((Xd, yd), dict(tol=1e-3))
        warnings.simplefilter("ignore")
        de.LogisticRegression(fit_intercept=False, client=client).fit(Xw, yw)   # warm-up
        out = {}
        for name, (args, kw) in cases.items():
            rec = out[name] = {"walls": [], "outside": [], "rounds": []}
            reps = repeats if "2,000" in name else max(2, repeats // 3)
            for _ in range(reps):
                est = de.LogisticRegression(C=1.0, fit_intercept=False, random_state=0,
                                            client=client, **kw)
                t0 = time.perf_counter()
                est.fit(*args)
                wall = time.perf_counter() - t0
                rec["walls"].append(wall)
                rec["outside"].append(wall - est.history_[-1]["time"])
                rec["rounds"].append(len(est.history_))
        return out
    finally:
        client.close()
        cluster.close()


def plot(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["now"])
    fig, ax = plt.subplots(figsize=(9, 4.5))
    x = np.arange(len(names))
    ax.bar(x, [results["now"][n]["wall_ms"] for n in names], 0.6)
    ax.set_xticks(x, [n.replace(", ", "\n", 1) for n in names], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ms per fit (median)")
    cm.save_figure(fig, path, title)


def summary(runs):
    return {name: {"wall_ms": 1e3 * float(np.median(r["walls"])),
                   "outside_ms": 1e3 * float(np.median(r["outside"])),
                   "rounds": sorted(set(r["rounds"])), "fits": len(r["walls"])}
            for name, r in runs.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--full", action="store_true", help="also fit the whole table")
    args = ap.parse_args()
    log, env = cm.start_log("bench_fit_overhead")
    now = summary(fit_walls(args.repeats, args.full))
    rows, csv_rows = [], []
    for name, r in now.items():
        rows.append([name, str(r["fits"]), f"{r['wall_ms']:.0f}", f"{r['outside_ms']:.0f}",
                     str(r["rounds"])])
        csv_rows.append({"case": name, "wall_ms": r["wall_ms"], "outside_ms": r["outside_ms"]})
    headers = ["fit (LogisticRegression, C=1, 2 workers)", "fits", "ms", "outside rounds ms",
               "rounds"]
    log("\nwall time per fit, median (outside rounds: wall time less the last round's "
        "history time)")
    log(cm.table(rows, headers))
    results = {"env": env, "repeats": args.repeats, "now": now}
    cm.write_results("bench_fit_overhead", results, csv_rows, log, plot,
                     f"daskelastic fit overhead, 2 workers, {env['cpus']} cpus")


if __name__ == "__main__":
    main()
