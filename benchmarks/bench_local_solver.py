"""Single-process benchmark of daskelastic's local SDCA solver on the flights table.

What it measures (327,346 × 4,198 one-hot CSR, 7 non-zeros per row, C = 1,
no intercept; losses logistic, hinge and squared hinge):

(a) Seconds per local SDCA epoch: ``ChunkSolver.solve`` over all rows with
    σ' = 1 (one worker), after one warm-up epoch (numba compilation and the
    one-time shuffled packing are excluded); median of ``--epochs`` epochs.
    The epoch also evaluates the duality-gap sums at the round-start iterate.
    Reported also as a multiple of one CSR ``X @ w`` plus ``X.T @ r`` pass,
    the memory-bound reference: one pass is timed right before each epoch
    and the multiple is the median of the per-epoch ratios, so that the two
    see the same machine (this shared machine's speed drifts by ±20%).  The
    losses take turns, one epoch each (in a rotating order), so that the
    machine's drift hits them alike: the random-access epochs slow down
    more than the streaming pass when the machine does.

(b) Time to relative primal suboptimality ``(P − P*)/P* ≤ 1e-4`` for
    daskelastic in-process (``backend="inprocess"``, one worker) and
    scikit-learn's liblinear (``LogisticRegression(solver="liblinear")`` in its
    default primal mode and with ``dual=True``; ``LinearSVC`` dual and, for the
    squared hinge, primal) and lbfgs, all with ``fit_intercept=False``.
    P is the normalised primal ``(1/n) Σ ℓ(y_i x_i·w) + ‖w‖²/(2Cn)`` evaluated by
    ``daskelastic.objective.primal_objective`` on each solver's ``coef_``.
    P* is the lower primal of a liblinear fit with ``tol=1e-10`` and a
    daskelastic fit with ``tol=1e-9`` (cached in
    ``results/reference_optima.json``; ``--recompute-reference`` refits).
    For every solver, fits are run over a sweep of its own ``tol`` from loose
    to tight; the fastest fit meeting the target wins and is re-run (median of
    up to ``--repeats`` samples, fewer when a fit is slow).  For daskelastic the
    time is also read off ``history_`` (the time of the first round whose
    start iterate meets the target; fit-loop time, without input validation).
    numba is compiled by a small warm-up fit first.

Reproduce::

    python benchmarks/bench_local_solver.py            # full table (~5-10 min on 2 cores)
    python benchmarks/bench_local_solver.py --quick    # 30,000 rows, smoke run (< 1 min)

Outputs ``results/bench_local_solver[_quick].{json,csv,png,txt}``.  Timings
are wall-clock and sensitive to other load on the machine.
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

TARGET = 1e-4
LOSSES = ["logistic", "hinge", "squared_hinge"]


# -- (a) epoch time ------------------------------------------------------------------
def epoch_times(prob, losses, n_epochs, warmup=1):
    """``{loss: (seconds, steps, passes)}``: epochs of each loss in turns, a pass before each.

    One solver per loss; in each turn every loss runs one epoch, right after
    its own ``X @ w`` + ``Xᵀ r`` pass, the losses in a rotating order, so that
    a drift of the machine's speed hits them alike (run one loss after the
    other, the logistic epoch once read 4.4x the pass while a side-by-side
    run of the same code read 3.5x).
    """
    from daskelastic.losses import loss_code
    from daskelastic.solvers import ChunkSolver

    state = {}
    for loss in losses:
        solver = ChunkSolver(loss_code(loss), 1, 0.0)
        solver.add_chunk(0, prob.X, prob.Y, prob.sw)
        state[loss] = [solver, np.zeros((prob.d + 1, 1)), [], [], []]
    for r in range(warmup + n_epochs):
        turn = losses[r % len(losses):] + losses[:r % len(losses)]
        for loss in turn:
            solver, w, seconds, steps, passes = state[loss]
            matvec = matvec_times(prob, 1, warmup=0)[0]
            res = solver.solve(w, round_id=r, inv_lam_n=prob.C, sigma=1.0)
            state[loss][1] = w + res.dw
            solver.commit(r)
            if r >= warmup:
                seconds.append(res.seconds)
                steps.append(res.steps)
                passes.append(matvec)
    return {loss: tuple(state[loss][2:]) for loss in losses}


def matvec_times(prob, n_reps, warmup=1):
    """Seconds of ``n_reps`` passes of ``X @ w`` plus ``X.T @ r``."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal(prob.d)
    r = rng.standard_normal(prob.n)
    X = prob.X
    out = []
    for k in range(warmup + n_reps):
        t0 = time.perf_counter()
        z = X @ w
        g = X.T @ r
        dt = time.perf_counter() - t0
        if k >= warmup:
            out.append(dt)
    del z, g
    return out


# -- (b) solvers -----------------------------------------------------------------------
def solvers_for(loss, prob, quick):
    """``[(name, family, make_fit(tol), tols)]`` for one loss."""
    from sklearn.linear_model import LogisticRegression as SkLR
    from sklearn.svm import LinearSVC as SkSVC

    import daskelastic as de

    X, y, C = prob.X, prob.y, prob.C
    lib_tols = [1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8]
    de_tols = [1e-2, 1e-3, 1e-4, 1e-5, 1e-6]

    def de_fit(tol):
        kw = dict(C=C, tol=tol, max_iter=5000, fit_intercept=False, backend="inprocess",
                  random_state=0)
        if loss == "logistic":
            return lambda: de.LogisticRegression(**kw).fit(X, y)
        return lambda: de.LinearSVC(loss=loss, **kw).fit(X, y)

    out = [("daskelastic in-process", "daskelastic", de_fit, de_tols)]
    if loss == "logistic":
        out += [
            ("sklearn liblinear (primal)", "liblinear", lambda tol: lambda: SkLR(
                C=C, solver="liblinear", tol=tol, max_iter=1000,
                fit_intercept=False).fit(X, y), lib_tols),
            ("sklearn liblinear dual=True", "liblinear", lambda tol: lambda: SkLR(
                C=C, solver="liblinear", dual=True, tol=tol, max_iter=10000,
                fit_intercept=False).fit(X, y), lib_tols),
            ("sklearn lbfgs", "lbfgs", lambda tol: lambda: SkLR(
                C=C, solver="lbfgs", tol=tol, max_iter=20000,
                fit_intercept=False).fit(X, y), lib_tols[1:]),
        ]
    else:
        out.append(("sklearn LinearSVC dual", "liblinear", lambda tol: lambda: SkSVC(
            C=C, loss=loss, dual=True, tol=tol, max_iter=20000,
            fit_intercept=False).fit(X, y), lib_tols))
        if loss == "squared_hinge":
            out.append(("sklearn LinearSVC primal", "liblinear", lambda tol: lambda: SkSVC(
                C=C, loss=loss, dual=False, tol=tol, max_iter=1000,
                fit_intercept=False).fit(X, y), lib_tols))
    return out


def warm_up_numba(prob, log):
    import daskelastic as de

    X, y = prob.X[:2000], prob.y[:2000]
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        de.LogisticRegression(backend="inprocess", max_iter=3).fit(X, y)
        for loss in ("hinge", "squared_hinge"):
            de.LinearSVC(loss=loss, backend="inprocess", max_iter=3).fit(X, y)
    log(f"numba warm-up: {time.perf_counter() - t0:.1f} s")


# -- plot ----------------------------------------------------------------------------------
def plot(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    losses = list(results["losses"])
    fig, axes = plt.subplots(1, 1 + len(losses), figsize=(5 + 4.5 * len(losses), 4.2))
    ax = axes[0]
    xs = np.arange(len(losses))
    ep = [results["losses"][name]["epoch"]["median_seconds"] * 1e3 for name in losses]
    ref = results["matvec"]["median_seconds"] * 1e3
    ax.bar(xs, ep, color="tab:blue", label="SDCA epoch")
    ax.axhline(ref, color="k", ls="--", label="X@w + Xᵀ@r")
    for x, e, name in zip(xs, ep, losses):
        ratio = results["losses"][name]["epoch"].get("median_ratio", e / ref)
        ax.text(x, e, f"{ratio:.1f}×", ha="center", va="bottom")
    ax.set_xticks(xs, losses)
    ax.set_ylabel("ms per pass")
    ax.set_title("(a) local epoch")
    ax.legend(fontsize=8)
    for ax, loss in zip(axes[1:], losses):
        lr = results["losses"][loss]
        for s in lr["solvers"]:
            pts = s.get("sweep", {}).get("points", [])
            if not pts:
                continue
            t = [p["seconds"] for p in pts]
            e = [max(p["subopt"], 1e-12) for p in pts]
            line, = ax.plot(t, e, "o-", ms=4, label=s["name"] + " (tol sweep)")
            if pts[-1].get("history"):
                h = pts[-1]["history"]
                ax.plot([r["time"] for r in h],
                        [max((r["primal"] - lr["p_star"]) / lr["p_star"], 1e-12) for r in h],
                        ":", color=line.get_color(), label=s["name"] + " (history)")
        ax.axhline(TARGET, color="k", lw=0.8, ls="--")
        ax.set_yscale("log")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("seconds")
        ax.set_ylabel("(P − P*) / P*")
        ax.set_title(f"(b) {loss}")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- main ----------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="30,000 rows, smoke run")
    ap.add_argument("--losses", default=",".join(LOSSES))
    ap.add_argument("--epochs", type=int, default=None, help="timed epochs (≥5)")
    ap.add_argument("--repeats", type=int, default=None, help="samples of the winning fit")
    ap.add_argument("--recompute-reference", action="store_true")
    args = ap.parse_args(argv)
    n_rows = 30000 if args.quick else None
    n_epochs = args.epochs or (5 if args.quick else 15)
    repeats = args.repeats or (2 if args.quick else 3)
    max_fit = 20.0 if args.quick else 120.0
    suffix = "_quick" if args.quick else ""
    losses = [name for name in args.losses.split(",") if name]

    log = cm.Tee()
    cm.preload_daskelastic()
    env = cm.environment()
    log(f"bench_local_solver{' --quick' if args.quick else ''}  {env['time']}  "
        f"cpus={env['cpus']}  loadavg={tuple(round(x, 2) for x in env['loadavg'])}  "
        f"daskelastic sources {env['daskelastic_code']['sha1']} "
        f"(newest {env['daskelastic_code']['newest_source']})")
    prob = cm.Problem(n_rows=n_rows, C=1.0)
    log(f"flights: {prob.n} × {prob.d}, nnz={prob.X.nnz} (loaded in {prob.load_seconds:.1f} s), "
        f"C={prob.C:g}, fit_intercept=False")
    warm_up_numba(prob, log)

    results = {"env": env, "n": prob.n, "d": prob.d, "nnz": int(prob.X.nnz), "C": prob.C,
               "target": TARGET, "losses": {}}

    mv = matvec_times(prob, n_epochs)
    results["matvec"] = {"seconds": mv, "median_seconds": statistics.median(mv)}

    rows_a, rows_b, csv_rows = [], [], []
    epochs = epoch_times(prob, losses, n_epochs)
    for loss in losses:
        log(f"\n== {loss}")
        secs, steps, passes = epochs[loss]
        med = statistics.median(secs)
        ref = statistics.median(passes)
        ratio = statistics.median(e / p for e, p in zip(secs, passes))
        lr = {"epoch": {"seconds": secs, "median_seconds": med, "steps": steps,
                        "matvec_seconds": passes, "median_ratio": ratio}}
        rows_a.append([loss, f"{med * 1e3:.1f}", f"{med / prob.X.nnz * 1e9:.1f}",
                       f"{ref * 1e3:.2f}", f"{ratio:.1f}×"])
        log(f"  epoch median {med * 1e3:.1f} ms over {len(secs)} epochs; median of the "
            f"per-epoch ratios to the X@w + Xᵀ@r pass timed before each: {ratio:.1f}× "
            f"(pass median {ref * 1e3:.2f} ms)")

        p_star = cm.reference_optimum(prob, loss, recompute=args.recompute_reference, log=log)
        lr["p_star"] = p_star
        lr["solvers"] = []
        for name, family, make_fit, tols in solvers_for(loss, prob, args.quick):
            rec = {"name": name, "family": family}
            try:
                extra = None
                if family == "daskelastic":
                    def extra(model, eps, p_star=p_star):
                        return cm.history_time_to(model.history_, p_star, eps)
                sw = cm.tol_sweep(prob, loss, p_star, make_fit, tols, [TARGET],
                                  max_fit_seconds=max_fit, repeats=repeats,
                                  repeat_budget=5.0 if args.quick else 20.0, log=log,
                                  label=name, sample_extra=extra)
                rec["sweep"] = sw
                t = sw["targets"][TARGET]
                rec["seconds"] = None if t is None else t["seconds"]
                rec["tol"] = None if t is None else t["tol"]
                rec["n_samples"] = 0 if t is None else len(t["samples"])
                if t is not None and "extras" in t:
                    ht = [x for x in t["extras"] if x is not None]
                    rec["history_seconds"] = statistics.median(ht) if ht else None
            except Exception as e:  # a peer failing must not stop the table
                rec["error"] = f"{type(e).__name__}: {e}"
                log(f"    {name}: FAILED {rec['error']}")
            lr["solvers"].append(rec)

        lib = [s["seconds"] for s in lr["solvers"]
               if s["family"] == "liblinear" and s.get("seconds") is not None]
        lib_best = min(lib) if lib else None
        lr["liblinear_best_seconds"] = lib_best
        for s in lr["solvers"]:
            note = s.get("error", "")
            if not note and s.get("seconds") is None:
                note = "target not reached in sweep"
            rows_b.append([loss, s["name"], cm.fmt_s(s.get("seconds")),
                           "—" if s.get("tol") is None else f"{s['tol']:g}",
                           str(s.get("n_samples", 0)),
                           cm.fmt_ratio(s.get("seconds"), lib_best), note])
            csv_rows.append({"loss": loss, "solver": s["name"], "seconds": s.get("seconds"),
                             "tol": s.get("tol"), "samples": s.get("n_samples", 0),
                             "ratio_vs_liblinear": None
                             if lib_best is None or s.get("seconds") is None
                             else s["seconds"] / lib_best, "note": note})
            if s.get("history_seconds") is not None:
                hs = s["history_seconds"]
                rows_b.append([loss, s["name"] + " [history]", cm.fmt_s(hs), "", "",
                               cm.fmt_ratio(hs, lib_best), "first round meeting target"])
                csv_rows.append({"loss": loss, "solver": s["name"] + " [history]",
                                 "seconds": hs, "tol": None, "samples": None,
                                 "ratio_vs_liblinear": None if lib_best is None else hs / lib_best,
                                 "note": "history"})
        results["losses"][loss] = lr

    results["env_end_loadavg"] = list(__import__("os").getloadavg())
    hdr_a = ["loss", "epoch ms", "ns/nnz", "X@w+Xᵀr ms", "epoch / pass (paired)"]
    hdr_b = ["loss", "solver", f"s to {TARGET:g}", "tol", "n", "vs liblinear", "note"]
    log(f"\n(a) local SDCA epoch, {prob.n} rows, median of {n_epochs} (after 1 warm-up)")
    log(cm.table(rows_a, hdr_a))
    log(f"\n(b) time to (P − P*)/P* ≤ {TARGET:g}; median of n fits of the winning tol; "
        "'vs liblinear' = ratio to the fastest liblinear variant for that loss")
    log(cm.table(rows_b, hdr_b))
    log(f"\nloadavg at end: {tuple(round(x, 2) for x in results['env_end_loadavg'])} "
        f"(other processes on this {env['cpus']}-cpu machine perturb the timings)")

    cm.write_results(f"bench_local_solver{suffix}", results, csv_rows, log, plot,
                     f"flights {prob.n}×{prob.d}, C={prob.C:g}, {env['cpus']} cpus")


if __name__ == "__main__":
    main()
