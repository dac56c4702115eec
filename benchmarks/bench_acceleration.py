"""Rounds of ``acceleration="auto"`` against Catalyst from the first round and none.

What it measures (in-process, ``backend="inprocess"`` with ``n_workers=K``: the
rounds do not depend on the machine): for each table, loss, ``C`` and K, the
rounds to a certified relative duality gap of ``--tol`` (1e-4), at most
``--max-iter`` (600), of

- ``auto``: the default (logistic regression starts plain and switches
  Catalyst on when the rounds slow down; κ adapts, for the hinge only
  downwards);
- ``catalyst``: ``acceleration=0.25``, Catalyst from the first round with the
  same starting κ and no adaptation;
- ``none``: no acceleration;
- ``auto σ′=K``: the default acceleration with the fixed ``σ′ = K`` instead of
  the adaptive one (the two interact through the switch point).

The committed results have a ``base`` column too: the default of the commit
before a change, run alongside.  To compare the rounds of two commits now,
run the asv suite's tracked rounds on both (``benchmarks/README.md``).

Tables: the first 60,000 flights (one-hot CSR, 3,736 columns), Fertility (dense,
7 columns), diamonds (dense, 26 columns; the class is "price above the
median").  Losses: logistic, squared hinge, hinge; ``C`` ∈ {0.1, 1, 10};
K ∈ {2, 4}; seed 0 (``--seed``).  The summary is the geometric mean of the rounds (a fit
that did not converge counts as ``--max-iter`` + 1).

Reproduce::

    python benchmarks/bench_acceleration.py
    python benchmarks/bench_acceleration.py --seed 1 --losses hinge

Outputs ``results/bench_acceleration.{json,csv,txt,png}``.
"""

import argparse
import itertools
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as cm  # noqa: E402

TABLES = ["flights60k", "fertility", "diamonds"]
LOSSES = ["logistic", "squared_hinge", "hinge"]
CS = [0.1, 1.0, 10.0]
WORKERS = [2, 4]
CONFIGS = {"auto": "auto", "catalyst": 0.25, "none": None, "auto σ′=K": "auto"}


def load(name):
    from daskelastic.datasets import load_diamonds, load_fertility, load_flights

    if name == "flights60k":
        X, y, _ = load_flights(60000)
    elif name == "fertility":
        X, y = load_fertility()[:2]
    else:
        X, y = load_diamonds()[:2]
        y = (np.asarray(y) > np.median(y)).astype(int)
    return X, y


def grid(losses=LOSSES):
    return list(itertools.product(TABLES, losses, CS, WORKERS))


def run_grid(configs, tol, max_iter, seed=0, losses=LOSSES):
    """``{config: [rounds per grid cell]}`` with the daskelastic on ``sys.path``."""
    from sklearn.exceptions import ConvergenceWarning

    from daskelastic import LinearSVC, LogisticRegression

    out = {c: [] for c in configs}
    tables = {}
    for table, loss, C, K in grid(losses):
        if table not in tables:
            tables[table] = load(table)
        X, y = tables[table]
        for c in configs:
            kw = dict(C=C, fit_intercept=False, tol=tol, max_iter=max_iter,
                      backend="inprocess", n_workers=K, random_state=seed,
                      acceleration=CONFIGS[c if c in CONFIGS else "auto"],
                      sigma=float(K) if c == "auto σ′=K" else None)
            est = LogisticRegression(**kw) if loss == "logistic" else LinearSVC(loss=loss, **kw)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                est.fit(X, y)
            h = est.history_
            converged = h[-1]["duality_gap"] <= tol
            out[c].append(len(h) if converged else max_iter + 1)
    return out


def geomean(xs):
    return float(np.exp(np.mean(np.log(xs))))


def plot(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = results["configs"]
    losses = results["losses"]
    fig, axes = plt.subplots(1, len(losses), figsize=(4.5 * len(losses), 3.6), squeeze=False)
    for ax, loss in zip(axes[0], losses):
        cells = [i for i, g in enumerate(results["grid"]) if g[1] == loss]
        x = np.arange(len(cells))
        width = 0.8 / len(configs)
        for j, c in enumerate(configs):
            ax.bar(x + j * width, [results["rounds"][c][i] for i in cells], width, label=c)
        ax.set_xticks(x + 0.4 - width / 2)
        ax.set_xticklabels([f"{results['grid'][i][0][:4]} C={results['grid'][i][2]:g} "
                            f"K={results['grid'][i][3]}" for i in cells],
                           rotation=90, fontsize=6)
        ax.set_yscale("log")
        ax.set_ylabel("rounds to 1e-4")
        ax.set_title(loss, fontsize=9)
        ax.legend(fontsize=6)
    cm.save_figure(fig, path, title)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--max-iter", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0, help="random_state of every fit")
    ap.add_argument("--losses", nargs="+", choices=LOSSES, default=LOSSES)
    args = ap.parse_args(argv)

    log = cm.Tee()
    env = cm.environment()
    log(f"bench_acceleration  {env['time']}  cpus={env['cpus']}  "
        f"daskelastic sources {env['daskelastic_code']['sha1']}")
    log(f"in-process, rounds to a relative gap of {args.tol:g} (> {args.max_iter}: not "
        f"reached), seed {args.seed}")
    rounds = run_grid(list(CONFIGS), args.tol, args.max_iter, args.seed, args.losses)
    configs = list(CONFIGS)
    rows, csv_rows = [], []
    for i, (table, loss, C, K) in enumerate(grid(args.losses)):
        cells = [rounds[c][i] for c in configs]
        rows.append([table, loss, f"{C:g}", str(K)] +
                    [str(r) if r <= args.max_iter else f"> {args.max_iter}" for r in cells])
        csv_rows.append(dict(table=table, loss=loss, C=C, K=K,
                             **{c: rounds[c][i] for c in configs}))
    log(cm.table(rows, ["table", "loss", "C", "K"] + configs))
    log("\ngeometric mean of the rounds, by loss (not reached counts as max-iter + 1):")
    summary = []
    for loss in args.losses + ["all"]:
        idx = [i for i, g in enumerate(grid(args.losses)) if loss in ("all", g[1])]
        summary.append([loss] + [f"{geomean([rounds[c][i] for i in idx]):.1f}"
                                 for c in configs])
    log(cm.table(summary, ["loss"] + configs))
    results = {"environment": env, "tol": args.tol, "max_iter": args.max_iter,
               "seed": args.seed, "losses": args.losses, "configs": configs,
               "grid": grid(args.losses), "rounds": rounds}
    name = cm.run_name("bench_acceleration", args.seed, args.losses, LOSSES)
    cm.write_results(name, results, csv_rows, log, plot,
                     f"rounds to {args.tol:g}, in-process, seed {args.seed}")


if __name__ == "__main__":
    main()
