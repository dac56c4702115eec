"""CoCoA+'s σ′: the safe fixed ``σ′ = K`` against the adaptive default.

What it measures (327,346 × 4,198 flights CSR, C = 1, no intercept; in this
process, ``backend="inprocess"`` with ``n_workers=K``: the K local solvers run
one after the other, so the seconds are the work of a round, not its wall time
on a cluster), for K ∈ {2, 4} and the losses logistic, squared hinge, hinge
and squared (Ridge, ``alpha = 1``):

- rounds and seconds of a fit to a certified relative duality gap of
  ``--tol`` (1e-4) with ``sigma=K`` (CoCoA+'s safe choice, the default before
  the adaptive one) and with the default ``sigma=None`` (adaptive; the hinge
  keeps ``σ′ = K``);
- the median σ′ and step of the adaptive fit's rounds.

Both fits use the default acceleration (Catalyst on K ≥ 2).  The rounds do not
depend on the machine; the seconds include the adaptive fit's extra pass over
each worker's changed dual values.

Reproduce::

    python benchmarks/bench_sigma.py              # ~3 minutes on 2 cores
    python benchmarks/bench_sigma.py --rows 60000
    python benchmarks/bench_sigma.py --seed 1 --losses hinge

Outputs ``results/bench_sigma.{json,csv,txt,png}``.
"""

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as cm  # noqa: E402

LOSSES = ["logistic", "squared_hinge", "hinge", "squared"]


def estimator(loss, **params):
    from daskelastic import LinearSVC, LogisticRegression, Ridge

    if loss == "logistic":
        return LogisticRegression(C=1.0, **params)
    if loss == "squared":
        return Ridge(alpha=1.0, **params)
    return LinearSVC(C=1.0, loss=loss, **params)


def fit(X, y, loss, K, sigma, tol, max_iter, seed=0):
    """Rounds, seconds, final gap and the rounds' σ′ and steps of one fit."""
    from sklearn.exceptions import ConvergenceWarning

    est = estimator(loss, fit_intercept=False, tol=tol, max_iter=max_iter,
                    backend="inprocess", n_workers=K, sigma=sigma, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t = time.perf_counter()
        est.fit(X, y)
        seconds = time.perf_counter() - t
    hist = est.history_
    return {"rounds": len(hist), "seconds": seconds,
            "gap": float(hist[-1]["duality_gap"]),
            "sigma_median": statistics.median(h["sigma"] for h in hist[:-1]),
            "step_median": statistics.median(h["step"] for h in hist[:-1]),
            "gaps": [h["duality_gap"] for h in hist]}


def plot(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = results["workers"]
    fig, axes = plt.subplots(1, len(ks), figsize=(4.5 * len(ks), 3.4), squeeze=False)
    for ax, K in zip(axes[0], ks):
        for i, loss in enumerate(LOSSES):
            for r in results["rows"]:
                if r["loss"] == loss and r["K"] == K:
                    ax.semilogy(r["gaps"], color=f"C{i}",
                                ls="-" if r["sigma"] == "adaptive" else ":",
                                label=f"{loss} {r['sigma']}")
        ax.set_xlabel("round")
        ax.set_ylabel("relative duality gap")
        ax.set_title(f"K = {K}", fontsize=9)
        ax.legend(fontsize=6)
    cm.save_figure(fig, path, title)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--max-iter", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0, help="random_state of every fit")
    ap.add_argument("--losses", nargs="+", choices=LOSSES, default=LOSSES)
    args = ap.parse_args(argv)

    from daskelastic.datasets import load_flights

    log = cm.Tee()
    env = cm.environment()
    X, y, _ = load_flights(args.rows)
    log(f"bench_sigma  {env['time']}  cpus={env['cpus']}  loadavg={env['loadavg']}")
    log(f"flights: {X.shape[0]} × {X.shape[1]}, nnz={X.nnz}, C=1 (Ridge alpha=1), "
        f"tol={args.tol:g}, in-process K workers, seed {args.seed}")
    # numba warm-up: every loss's kernels and the adaptive σ′'s dual-change pass,
    # which otherwise compile (or load) inside the first timed fit of each loss,
    # the σ′ = K one (with a cold cache that added up to ~2.5 s to it)
    for loss in args.losses:
        target = y.astype(float) if loss == "squared" else y
        fit(X[:2000], target[:2000], loss, 2, None, 1e-2, 5)
    rows = []
    for K in args.workers:
        for loss in args.losses:
            target = y.astype(float) if loss == "squared" else y
            for sigma in [float(K), None]:
                r = fit(X, target, loss, K, sigma, args.tol, args.max_iter, args.seed)
                r.update(loss=loss, K=K, sigma="adaptive" if sigma is None else f"{K}")
                rows.append(r)
                log(f"  K={K} {loss:<14} sigma={r['sigma']:<9} {r['rounds']:>5} rounds "
                    f"{r['seconds']:7.2f} s  gap {r['gap']:.1e}  median σ′ "
                    f"{r['sigma_median']:.2f}  step {r['step_median']:.2f}")
    body = []
    for r in rows:
        if r["sigma"] != "adaptive":
            continue
        ref = next(q for q in rows if q["loss"] == r["loss"] and q["K"] == r["K"]
                   and q["sigma"] != "adaptive")

        def rounds(q):
            return f"{q['rounds']}" + ("" if q["gap"] <= args.tol else " (not reached)")

        body.append([r["K"], r["loss"], rounds(ref), rounds(r),
                     f"{r['rounds'] / ref['rounds']:.2f}×", f"{ref['seconds']:.2f}",
                     f"{r['seconds']:.2f}", f"{r['seconds'] / ref['seconds']:.2f}×",
                     f"{r['sigma_median']:.2f}", f"{r['step_median']:.2f}"])
    log("")
    log(cm.table(body, ["K", "loss", "rounds σ′=K", "rounds adaptive", "ratio",
                        "s σ′=K", "s adaptive", "ratio", "median σ′", "median step"]))
    results = {"rows": rows, "tol": args.tol, "workers": args.workers, "seed": args.seed,
               "environment": env}
    csv_rows = [{k: v for k, v in r.items() if k != "gaps"} for r in rows]
    name = cm.run_name("bench_sigma", args.seed, args.losses, LOSSES)
    cm.write_results(name, results, csv_rows, log, plot,
                     f"flights, in-process, C=1: σ′ = K against adaptive (tol {args.tol:g})")


if __name__ == "__main__":
    main()
