"""A regularisation path with ``warm_start=True`` against cold fits, beside scikit-learn's.

What it measures: the wall time and the rounds of a path of seven fits — ``C`` from
0.01 to 10 (logistic regression on the whole flights table, one-hot CSR) or
``alpha`` from 100 down to 0.01 (Ridge on the diamonds table, dense) — each fit to
``--tol`` (default 1e-4, the estimators' default), in two settings: in this process
on one worker, and on a ``LocalCluster`` of 2 single-threaded worker processes.  A
*cold* path fits each value afresh; a *warm* path refits one estimator with
``warm_start=True``.  The two take turns, ``--repeats`` times (the order swapped
each time); the table gives medians.  scikit-learn's paths on the same data run in
the same script for scale: ``LogisticRegression`` with ``lbfgs`` and
``warm_start=True``, and with ``liblinear`` (daskelastic's problem, which cannot
warm-start), and ``Ridge``; their objectives differ in details (lbfgs leaves the
intercept unpenalised), so only their times are compared.

Reproduce::

    python benchmarks/bench_warm_start.py               # ~10 minutes on 2 cores
    python benchmarks/bench_warm_start.py --rows 60000 --repeats 1   # a quick look

Writes ``benchmarks/results/bench_warm_start.{txt,csv,json,png}``.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as cm  # noqa: E402

C_PATH = np.logspace(-2, 1, 7)
ALPHA_PATH = np.logspace(2, -2, 7)


def tables(rows):
    from daskelastic.datasets import load_diamonds, load_flights

    X, y, _ = load_flights(n_rows=rows)
    Xd, yd, _ = load_diamonds()
    return {"logistic": (X.tocsr(), y), "ridge": (Xd, yd)}


def daskelastic_path(model, X, y, warm, tol, **kwargs):
    """``(seconds, [rounds per fit])`` of one path."""
    import daskelastic as de

    name, values = ("C", C_PATH) if model == "logistic" else ("alpha", ALPHA_PATH)
    cls = de.LogisticRegression if model == "logistic" else de.Ridge

    def make(value):
        return cls(**{name: value}, tol=tol, max_iter=5000, random_state=0, warm_start=warm,
                   **kwargs)

    est, rounds = None, []
    t0 = time.perf_counter()
    for value in values:
        if warm and est is not None:
            est.set_params(**{name: value})
        else:
            est = make(value)
        est.fit(X, y)
        rounds.append(int(est.n_iter_[0]))
    return time.perf_counter() - t0, rounds


def sklearn_paths(model, X, y, tol):
    """``{peer: seconds}`` of scikit-learn's paths over the same values."""
    from sklearn.linear_model import LogisticRegression, Ridge

    out = {}
    if model == "logistic":
        for label, kw in (("sklearn lbfgs, warm_start", dict(solver="lbfgs", warm_start=True,
                                                              max_iter=5000)),
                          ("sklearn liblinear, cold", dict(solver="liblinear"))):
            est = LogisticRegression(tol=tol, **kw)
            t0 = time.perf_counter()
            for C in C_PATH:
                est.set_params(C=C).fit(X, y)
            out[label] = time.perf_counter() - t0
    else:
        t0 = time.perf_counter()
        for alpha in ALPHA_PATH:
            Ridge(alpha=alpha, tol=tol).fit(X, y)
        out["sklearn Ridge (auto solver)"] = time.perf_counter() - t0
    return out


def run(rows, repeats, tol, log):
    from bench_distributed import start_cluster

    data = tables(rows)
    cluster, client = start_cluster(2)
    settings = {"in-process, 1 worker": dict(backend="inprocess"),
                "LocalCluster, 2 workers": dict(client=client, backend="dask")}
    runs = {}
    try:
        for model, (X, y) in data.items():
            for setting, kw in settings.items():
                daskelastic_path(model, X[:2000], y[:2000], False, tol, **kw)   # warm-up
                rec = runs[(model, setting)] = {"cold": [], "warm": [], "rounds": {}}
                for rep in range(repeats):
                    for warm in ((False, True) if rep % 2 == 0 else (True, False)):
                        seconds, rounds = daskelastic_path(model, X, y, warm, tol, **kw)
                        key = "warm" if warm else "cold"
                        rec[key].append(seconds)
                        rec["rounds"][key] = rounds
                        log(f"{model:8s} {setting:24s} {key} {seconds:7.2f} s  rounds {rounds}")
            peers = {}
            for _ in range(repeats):
                for label, seconds in sklearn_paths(model, X, y, tol).items():
                    peers.setdefault(label, []).append(seconds)
            runs[(model, "peers")] = peers
            for label, secs in peers.items():
                log(f"{model:8s} {label:32s} {np.median(secs):7.2f} s")
    finally:
        client.close()
        cluster.close()
    return runs


def plot(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["paths"]
    labels = [f"{r['model']}\n{r['setting']}" for r in rows]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["cold_s"] for r in rows], 0.4, label="cold fits")
    ax.bar(x + 0.2, [r["warm_s"] for r in rows], 0.4, label="warm_start=True")
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("seconds per path of 7 fits (median)")
    ax.legend(fontsize=8)
    cm.save_figure(fig, path, title)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=None, help="flights rows (default: all)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    log, env = cm.start_log("bench_warm_start")
    runs = run(args.rows, args.repeats, args.tol, log)
    rows, csv_rows, out = [], [], []
    for (model, setting), rec in runs.items():
        if setting == "peers":
            continue
        cold, warm = float(np.median(rec["cold"])), float(np.median(rec["warm"]))
        peers = runs[(model, "peers")]
        peer_text = "; ".join(f"{k} {np.median(v):.2f} s" for k, v in peers.items())
        rows.append([model, setting, f"{cold:.2f}", f"{warm:.2f}", f"{warm / cold:.2f}×",
                     str(sum(rec["rounds"]["cold"])), str(sum(rec["rounds"]["warm"])),
                     peer_text])
        record = {"model": model, "setting": setting, "cold_s": cold, "warm_s": warm,
                  "ratio": warm / cold, "cold_rounds": rec["rounds"]["cold"],
                  "warm_rounds": rec["rounds"]["warm"],
                  "peers_s": {k: float(np.median(v)) for k, v in peers.items()}}
        out.append(record)
        csv_rows.append({k: v for k, v in record.items() if k != "peers_s"})
    log(f"\npaths of 7 fits to tol={args.tol:g}, medians of {args.repeats} "
        "(C 0.01 → 10 for logistic on flights, alpha 100 → 0.01 for Ridge on diamonds)")
    log(cm.table(rows, ["model", "setting", "cold s", "warm s", "warm / cold", "cold rounds",
                        "warm rounds", "scikit-learn, same path"]))
    results = {"env": env, "rows": args.rows, "repeats": args.repeats, "tol": args.tol,
               "paths": out}
    cm.write_results("bench_warm_start", results, csv_rows, log, plot,
                     f"daskelastic warm_start paths, {env['cpus']} cpus")


if __name__ == "__main__":
    main()
