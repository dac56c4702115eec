"""Elastic scale-in benchmark: fixed K ∈ {1, 2, 4} workers against ``scaling_policy="convergence"``.

What it measures (flights table — all 327,346 rows, or the first ``--rows`` —
one-hot CSR, C = 1,
L2-regularised logistic regression, ``straggler_policy="wait"``): for each
configuration, on a fresh ``LocalCluster(n_workers=K, threads_per_worker=1,
processes=True)`` (K = 4 for the elastic fit, which starts on 4 and scales in),

- **time** to relative duality gap 1e-4: the fit's own loop time
  (``history_[-1]["time"]``) of a fit with ``tol=1e-4``, which stops at the
  first round certifying the gap;
- **worker-seconds**: ``Σ_rounds n_workers × round duration``, the time each
  worker was held by the fit (for fixed K this is ``K × time``; the elastic
  fit holds fewer workers after each scale-in — released workers are retired
  through the scheduler: the policy's ``release_workers=True``).

Each cluster first runs a small warm-up fit (numba caches, actor set-up) that is
not timed.  Repeats are interleaved (1, 2, 4, elastic, 1, 2, ...), and the
table reports medians.  The machine has 2 cores (and other jobs): K = 4
oversubscribes it, which is the situation scale-in is for.

Reproduce::

    PYTHONPATH=. python benchmarks/bench_elastic.py            # ~3-5 minutes
    PYTHONPATH=. python benchmarks/bench_elastic.py --rows 60000 --name elastic_60k
    PYTHONPATH=. python benchmarks/bench_elastic.py --rows 20000 --repeats 1   # quick

Writes ``benchmarks/results/<name>.{txt,csv,json,png}`` (``elastic`` by default).
"""

import argparse
import logging
import statistics
import time
import warnings

import numpy as np
from _common import (
    RESULTS,
    Tee,
    environment,
    preload_daskelastic,
    save_figure,
    table,
    write_results,
)

CONFIGS = [("fixed K=1", 1, None), ("fixed K=2", 2, None), ("fixed K=4", 4, None),
           ("convergence (K=4 start)", 4, "convergence")]


def worker_seconds(history):
    """``Σ n_workers × round duration`` over the fit's rounds."""
    total, prev = 0.0, 0.0
    for h in history:
        total += h["n_workers"] * (h["time"] - prev)
        prev = h["time"]
    return total


def run_one(X, y, n_workers, scaling, tol, C):
    from distributed import Client, LocalCluster

    import daskelastic as de

    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        common = dict(C=C, straggler_policy="wait", random_state=0, client=client)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            de.LogisticRegression(tol=1e-2, max_iter=3, **common).fit(X[:2000], y[:2000])
        t0 = time.perf_counter()
        if scaling == "convergence":   # its defaults, retiring the workers it frees
            scaling = de.ConvergenceScalingPolicy(release_workers=True)
        clf = de.LogisticRegression(tol=tol, max_iter=5000, scaling_policy=scaling,
                                    **common).fit(X, y)
        wall = time.perf_counter() - t0
        live = len(client.scheduler_info(n_workers=-1)["workers"])
    hist = clf.history_
    events = [ev for h in hist for ev in h["events"] if ev["event"] == "scale_in"]
    return {"time": hist[-1]["time"], "wall": wall, "worker_seconds": worker_seconds(hist),
            "rounds": len(hist), "gap": clf.duality_gap_, "primal": hist[-1]["primal"],
            "k_path": [h["n_workers"] for h in hist],
            "times": [h["time"] for h in hist], "gaps": [h["duality_gap"] for h in hist],
            "scale_ins": [(ev["from"], ev["to"], ev.get("seconds")) for ev in events],
            "workers_left": live}


def plot(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = {"fixed K=1": "C0", "fixed K=2": "C1", "fixed K=4": "C2",
              "convergence (K=4 start)": "C3"}
    for name, runs in results["runs"].items():
        r = runs[0]
        ax1.semilogy(r["times"], r["gaps"], label=name, color=colors.get(name))
    ax1.axhline(results["tol"], color="k", lw=0.5, ls="--")
    ax1.set_xlabel("seconds"), ax1.set_ylabel("relative duality gap")
    ax1.set_title("convergence (first repeat)")
    ax1.legend(fontsize=8)
    ax1b = ax1.twinx()
    r = results["runs"]["convergence (K=4 start)"][0]
    ax1b.step(r["times"], r["k_path"], where="post", color="C3", ls=":", alpha=0.7)
    ax1b.set_ylabel("workers (elastic fit, dotted)")
    ax1b.set_ylim(0, 4.5)
    names = list(results["summary"])
    t = [results["summary"][n]["time"] for n in names]
    ws = [results["summary"][n]["worker_seconds"] for n in names]
    x = np.arange(len(names))
    ax2.bar(x - 0.2, t, 0.4, label="time to gap 1e-4 (s)")
    ax2.bar(x + 0.2, ws, 0.4, label="worker-seconds")
    ax2.set_xticks(x, [n.replace(" (K=4 start)", "\n(K=4 start)") for n in names], fontsize=8)
    ax2.set_title("medians over repeats")
    ax2.legend(fontsize=8)
    save_figure(fig, path, title)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None,
                        help="the first this many rows (default: all 327,346)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tol", type=float, default=1e-4)
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--name", default="elastic", help="results file name")
    args = parser.parse_args()
    from daskelastic.datasets import load_flights

    preload_daskelastic()
    log = Tee()
    env = environment()
    log(f"bench_elastic  {env['time']}  cpus={env['cpus']}  loadavg={env['loadavg']}  "
        f"daskelastic sources {env['daskelastic_code']['sha1']}")
    X, y, _ = load_flights(n_rows=args.rows)
    keep = np.asarray(X.sum(axis=0)).ravel() > 0
    X = X[:, keep].tocsr()
    log(f"flights: {X.shape[0]} × {X.shape[1]}, nnz={X.nnz}, C={args.C}, tol={args.tol:g}")
    runs = {name: [] for name, _, _ in CONFIGS}
    for rep in range(args.repeats):
        for name, k, scaling in CONFIGS:
            r = run_one(X, y, k, scaling, args.tol, args.C)
            runs[name].append(r)
            log(f"  repeat {rep}  {name:<24} time {r['time']:6.2f} s  worker-s "
                f"{r['worker_seconds']:6.2f}  rounds {r['rounds']:4d}  gap {r['gap']:.1e}  "
                f"scale-ins {r['scale_ins']}  workers left {r['workers_left']}")
    summary = {}
    for name, rs in runs.items():
        summary[name] = {"time": statistics.median(r["time"] for r in rs),
                         "worker_seconds": statistics.median(r["worker_seconds"] for r in rs),
                         "rounds": statistics.median(r["rounds"] for r in rs),
                         "final_workers": statistics.median(r["k_path"][-1] for r in rs),
                         "primal": statistics.median(r["primal"] for r in rs)}
    best_fixed = min(summary[n]["time"] for n in summary if n.startswith("fixed"))
    ws4 = summary["fixed K=4"]["worker_seconds"]
    rows, csv_rows = [], []
    for name, s in summary.items():
        rows.append([name, f"{s['time']:.2f}", f"{s['time'] / best_fixed:.2f}×",
                     f"{s['worker_seconds']:.2f}", f"{1 - s['worker_seconds'] / ws4:+.0%}",
                     f"{s['rounds']:.0f}", f"{s['final_workers']:.0f}", f"{s['primal']:.10f}"])
        csv_rows.append({"config": name, **{k: v for k, v in s.items()},
                         "time_vs_best_fixed": s["time"] / best_fixed,
                         "worker_seconds_saved_vs_k4": 1 - s["worker_seconds"] / ws4})
    log("")
    log(table(rows, ["config", "time to 1e-4 (s)", "vs best fixed", "worker-s",
                     "saved vs K=4", "rounds", "final K", "primal"]))
    el = summary["convergence (K=4 start)"]
    log("")
    log(f"targets: time within 10% of the best fixed K -> {el['time'] / best_fixed:.2f}× "
        f"({'met' if el['time'] <= 1.1 * best_fixed else 'NOT met'}); "
        f"≥30% fewer worker-seconds than K=4 -> {1 - el['worker_seconds'] / ws4:.0%} "
        f"({'met' if el['worker_seconds'] <= 0.7 * ws4 else 'NOT met'})")
    results = {"env": env, "rows": X.shape[0], "tol": args.tol, "C": args.C,
               "repeats": args.repeats, "runs": runs, "summary": summary}
    write_results(args.name, results, csv_rows, log, plot,
                  f"daskelastic elastic scale-in, flights {X.shape[0]} rows, "
                  f"{env['cpus']} cpus, loadavg {env['loadavg'][0]:.1f}")
    assert (RESULTS / f"{args.name}.txt").exists()


if __name__ == "__main__":
    main()
