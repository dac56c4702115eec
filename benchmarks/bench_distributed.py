"""Distributed benchmark: daskelastic on a local Dask cluster against its peers.

What it measures (flights table, 327,346 × 4,198 one-hot CSR, C = 1, no
intercept, L2-regularised logistic regression by default): the time to reach
relative primal suboptimality ``(P − P*)/P*`` of 1e-3 and 1e-5, where P is
the normalised primal ``(1/n) Σ ℓ(y_i x_i·w) + ‖w‖²/(2Cn)`` evaluated by
``daskelastic.objective.primal_objective`` on each solver's coefficients and
P* is the lower primal of a liblinear ``tol=1e-10`` and a daskelastic
``tol=1e-9`` fit (cached in ``results/reference_optima.json``).

Solvers and how their time is taken:

- daskelastic, ``backend="dask"``, ``client=`` a
  ``LocalCluster(n_workers=K, threads_per_worker=1, processes=True)`` with
  K = 2 and K = 4 (a separate cluster each; the machine has 2 cores, so K = 4
  oversubscribes it), fitted on a dask array whose row blocks (scipy CSR, one
  per worker, in the table's order) already live on the workers; also
  in-process (one worker) for reference, and K = 2 on row-shuffled blocks (the
  table is sorted by date and ``month`` is a feature, so contiguous blocks are
  very unlike each other), there also with the fixed ``sigma=K`` instead of the
  adaptive σ′ (``--no-sigma-check`` skips it).  One *trace* fit per configuration (``tol=1e-8``,
  ``max_iter`` from a time budget and a probed round time) gives, from
  ``history_``, the time of the first round whose start iterate meets ε (plus
  the fit's set-up time); two more traces, as long as the first needed to
  meet the targets, give two more such times, and the table quotes the
  median (``--repeats`` traces in all).  Fits are reproducible, so the same history tells
  which ``tol`` would stop at an iterate meeting ε (the loosest such tol of
  1e-2 … 1e-7); that fit is then run for real (median of up to ``--repeats``)
  — the "fit" time.
- dask-ml ``LogisticRegression(solver="lbfgs")`` and ``solver="admm"`` on the
  2-worker cluster, on the same row blocks as pydata-sparse COO arrays (the
  sparse format dask-glm supports; scipy CSR blocks fail in its ``dot``).
  Mapping: dask-glm minimises ``Σ ℓ + (1/C)·½‖β‖²`` with ``lamduh = 1/C``,
  i.e. ``n·P(β)`` for the same C; ``solver_kwargs={"normalize": False}``
  (its default standardises columns, which changes the penalty).  The script
  checks the mapping on every traced L-BFGS evaluation (``f/n`` against our
  ``P``).  These solvers are slow here, so each runs once with a time budget
  and its trajectory is traced (L-BFGS: every function evaluation, by wrapping
  ``dask_glm.algorithms.fmin_l_bfgs_b``; ADMM: the consensus iterate ``z`` of
  every iteration, via an ``L2`` regulariser subclass): the time is that of
  the first traced point meeting the target (a lower bound on a fit that
  would have to stop there).  pydata-sparse's numba compilation is excluded
  by a small warm-up fit on each worker.
- scikit-learn ``LogisticRegression`` lbfgs and liblinear, and Snap ML
  ``snapml.LogisticRegression`` with ``dual=True`` and ``dual=False``
  (``n_jobs=2``, the machine's cores), in this process, tolerance sweep.
  Snap ML's ``regularizer`` is ``1/C`` (its objective is
  ``Σ ℓ + regularizer·½‖w‖²``); the script verifies this on a subset with
  C = 0.25 (``1/C`` reaches P*, ``C`` does not).

Tolerance sweep (scikit-learn, Snap ML): fits over each solver's own ``tol``
from loose to tight; for each target the fastest fit meeting it wins and is
re-run (median of up to ``--repeats`` samples, fewer when a fit is slow).  Fit
wall time includes input validation and, for daskelastic, loading the blocks
into the solvers.  Ratios (×de2) are to the daskelastic 2-worker trace time.

Side by side (``--pairs``, default 8): the single-process part and the
cluster part of this script run minutes apart, and the machine's speed drifts
in between; so on the 2-worker cluster, the fastest single-process peer's
winning fit for each ε and a daskelastic trace fit on the shuffled blocks
take turns (mirrored: peers then ours, then ours then the peers), every fit
checked against ε, and the table quotes the median of the pairs' ratios.

Where daskelastic's time goes: per round, the mean wall time vs the mean of
the slowest worker's solver seconds (and their sum) from
``history_[...]["worker_seconds"]``; the difference is scheduler,
communication and driver overhead per round.

Reproduce::

    python benchmarks/bench_distributed.py            # full table (~10 min on 2 cores)
    python benchmarks/bench_distributed.py --quick    # 10,000 rows, smoke run (~1 min)
    python benchmarks/bench_distributed.py --losses logistic,hinge,squared_hinge

(hinge and squared hinge: daskelastic, scikit-learn ``LinearSVC`` and, for the
hinge, Snap ML ``SupportVectorMachine``; dask-ml has no SVM.)

Outputs ``results/bench_distributed[_quick].{json,csv,png,txt}``.  Only
localhost is used.  Timings are wall-clock and sensitive to other load.
"""

import argparse
import logging
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as cm  # noqa: E402

TARGETS = [1e-3, 1e-5]


class StopTrace(Exception):
    """Raised inside a traced peer solver to end it (target met or budget spent)."""


# -- cluster and data ---------------------------------------------------------------
def start_cluster(n_workers):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                           host="127.0.0.1", dashboard_address="127.0.0.1:0",
                           silence_logs=logging.ERROR)
    client = Client(cluster)
    client.wait_for_workers(n_workers)
    return cluster, client


def scatter_blocks(client, X, y, fmt):
    """A dask array of X (and of y) with one row block per worker, already there.

    ``fmt`` is ``"csr"`` (scipy) or ``"coo"`` (pydata sparse).
    """
    import dask.array as da
    import scipy.sparse as sp

    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    n, d = X.shape
    bounds = np.linspace(0, n, len(workers) + 1).astype(int)
    if fmt == "coo":
        import sparse

        conv, meta = sparse.COO.from_scipy_sparse, sparse.COO.from_numpy(np.zeros((0, 0)))
        yv = y.astype(np.float64)
    else:
        conv, meta = (lambda b: b), sp.csr_matrix((0, 0))
        yv = y
    xs, ys = [], []
    for addr, a, b in zip(workers, bounds[:-1], bounds[1:]):
        fx = client.scatter(conv(X[a:b]), workers=[addr], hash=False)
        fy = client.scatter(yv[a:b], workers=[addr], hash=False)
        xs.append(da.from_delayed(fx, shape=(b - a, d), dtype=X.dtype, meta=meta))
        ys.append(da.from_delayed(fy, shape=(b - a,), dtype=yv.dtype, meta=np.zeros(0)))
    return da.concatenate(xs), da.concatenate(ys), [xs, ys]


# -- daskelastic --------------------------------------------------------------------
DE_TOLS = [1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7]


def de_estimator(loss, C, **kw):
    import daskelastic as de

    def make(tol, max_iter):
        args = dict(C=C, tol=tol, max_iter=max_iter, fit_intercept=False, random_state=0,
                    **kw)
        if loss == "logistic":
            return de.LogisticRegression(**args)
        return de.LinearSVC(loss=loss, **args)
    return make


def _trace_points(model, wall, p_star):
    """A traced fit's compact history, set-up seconds and points (seconds from the fit's call)."""
    H = cm.compact_history(model.history_)
    setup = max(wall - H[-1]["time"], 0.0)
    return H, setup, [{"seconds": h["time"] + setup, "primal": h["primal"],
                       "subopt": (h["primal"] - p_star) / p_star, "gap": h["duality_gap"],
                       "worker_seconds": h["worker_seconds"]} for h in H]


def _first_hit(pts, eps):
    """Index of the first point whose suboptimality is ≤ ``eps``, or None."""
    return next((i for i, p in enumerate(pts) if p["subopt"] <= eps), None)


def de_run(rec, prob, loss, p_star, make_est, X, y, budget, opts, log):
    """Trace one daskelastic fit, then time real fits at the tol that would stop there.

    1. A probe fit of 4 rounds gives the round time; the trace fit runs with
       ``tol=1e-8`` and ``max_iter`` ≈ ``budget`` / round time.
    2. From its history: the time of the first round whose start iterate meets
       each ε (plus the fit's set-up time, for comparison with traced peers).
    3. The same fit with ``tol`` stops at the first round whose relative gap is
       ≤ ``tol`` and returns that round's start iterate (fits are reproducible):
       the loosest tol in ``DE_TOLS`` whose stopping iterate meets ε is the
       sweep winner; it is fitted again (median of up to ``repeats``) for the
       wall time a user would see.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        probe = make_est(0.0, 4).fit(X, y)
        times = [h["time"] for h in probe.history_]
        rt = float(np.median(np.diff(times))) if len(times) > 2 else times[-1]
        max_iter = int(min(20000, max(20, budget / max(rt, 1e-4))))
        t0 = time.perf_counter()
        m = make_est(1e-8, max_iter).fit(X, y)
        wall = time.perf_counter() - t0
    H, setup, pts = _trace_points(m, wall, p_star)
    # more traces, only as long as the first needed to meet the targets: the
    # time to each ε is their median (one trace's set-up or round can catch a
    # hiccup of this shared machine)
    hits = {eps: _first_hit(pts, eps) for eps in TARGETS}
    reached = [i for i in hits.values() if i is not None]
    traced = {eps: [] if hits[eps] is None else [pts[hits[eps]]["seconds"]]
              for eps in TARGETS}
    for _ in range(opts.get("trace_repeats", 1) - 1 if reached else 0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            again = make_est(1e-8, max(reached) + 10).fit(X, y)
            wall_again = time.perf_counter() - t0
        pts_again = _trace_points(again, wall_again, p_star)[2]
        for eps in TARGETS:
            i = _first_hit(pts_again, eps)
            if i is not None and traced[eps]:
                traced[eps].append(pts_again[i]["seconds"])
    best = min(p["subopt"] for p in pts)
    log(f"    {rec['name']:<28} trace: {len(H)} rounds (max_iter {max_iter}, probe "
        f"{rt * 1e3:.0f} ms/round) in {wall:.1f} s, set-up {setup:.2f} s; best subopt "
        f"{best:.2e}, final gap {H[-1]['duality_gap']:.1e}")
    out = {"points": pts, "rounds": len(H), "max_iter": max_iter, "trace_wall": wall,
           "setup_seconds": setup, "breakdown": cm.round_breakdown(H), "targets": {}}
    fitted = {}
    for eps in TARGETS:
        hit = hits[eps]
        win = None
        for tol in DE_TOLS:
            r = next((i for i, p in enumerate(pts) if p["gap"] <= tol), None)
            if r is None:
                break
            if pts[r]["subopt"] <= eps:
                win = tol
                break
        t = {"trace_seconds": None if hit is None else statistics.median(traced[eps]),
             "trace_samples": traced[eps], "tol": win}
        if win is not None:
            r = next(i for i, p in enumerate(pts) if p["gap"] <= win)
            t["predicted_fit_seconds"] = pts[r]["seconds"]
        if win is not None and t["predicted_fit_seconds"] > opts["max_fit"]:
            log(f"    {rec['name']:<28} tol={win:g}: fit not run (would take "
                f"≈{t['predicted_fit_seconds']:.0f} s)")
        elif win is not None:
            if win not in fitted:
                samples = []
                while len(samples) < opts["repeats"] and sum(samples) < opts["repeat_budget"]:
                    samples.append(cm.timed_fit(
                        lambda tol=win: make_est(tol, max_iter).fit(X, y))[0])
                fitted[win] = samples
                times = ", ".join(f"{x:.2f}" for x in samples)
                log(f"    {rec['name']:<28} tol={win:g}: fits of {times} s")
            t["samples"] = fitted[win]
            t["seconds"] = statistics.median(fitted[win])
        out["targets"][eps] = t
    rec["result"] = out
    return rec


# -- dask-ml, traced -----------------------------------------------------------------
def daskml_lbfgs_trace(prob, p_star, Xd, yd, eps_min, budget, log):
    import dask_glm.algorithms as alg
    from dask_ml.linear_model import LogisticRegression

    orig = alg.fmin_l_bfgs_b
    trace = []
    t0 = [0.0]

    def patched(func, x0, *a, **kw):
        def f(x, *args):
            val, grad = func(x, *args)
            t = time.perf_counter() - t0[0]
            fn = float(val) / prob.n
            trace.append({"t": t, "f_over_n": fn, "x": np.array(x, copy=True)})
            if (fn - p_star) / p_star <= eps_min or t > budget:
                raise StopTrace
            return val, grad
        return orig(f, x0, *a, **kw)

    model = LogisticRegression(C=prob.C, penalty="l2", solver="lbfgs", fit_intercept=False,
                               tol=1e-12, max_iter=100000,
                               solver_kwargs={"normalize": False})
    alg.fmin_l_bfgs_b = patched
    try:
        stopped = _fit_until_stopped(model, Xd, yd, t0)
    finally:
        alg.fmin_l_bfgs_b = orig
    return finish_trace(prob, p_star, trace, stopped, "lbfgs evaluations", log)


def daskml_admm_trace(prob, p_star, Xd, yd, eps_min, budget, log):
    from dask_glm.regularizers import L2
    from dask_ml.linear_model import LogisticRegression

    trace = []
    t0 = [0.0]
    paused = [0.0]

    class TracingL2(L2):
        name = "l2-traced"

        def proximal_operator(self, beta, t):
            z = super().proximal_operator(beta, t)
            now = time.perf_counter()
            el = now - t0[0] - paused[0]
            p = prob.primal("logistic", z)      # not timed
            trace.append({"t": el, "primal": p, "x": np.array(z, copy=True)})
            paused[0] += time.perf_counter() - now
            if (p - p_star) / p_star <= eps_min or el > budget:
                raise StopTrace
            return z

    model = LogisticRegression(C=prob.C, penalty=TracingL2(), solver="admm",
                               fit_intercept=False, max_iter=100000,
                               solver_kwargs={"normalize": False, "abstol": 1e-12,
                                              "reltol": 1e-12})
    stopped = _fit_until_stopped(model, Xd, yd, t0)
    return finish_trace(prob, p_star, trace, stopped, "admm iterations", log)


def _fit_until_stopped(model, Xd, yd, t0):
    """Fit a traced dask-ml model until it converges or its trace raises StopTrace."""
    t0[0] = time.perf_counter()
    try:
        model.fit(Xd, yd)
    except StopTrace:
        return "target or budget"
    return "converged"


def finish_trace(prob, p_star, trace, stopped, what, log):
    pts, rel_err = [], []
    for tr in trace:
        p = prob.primal("logistic", tr["x"])
        if "f_over_n" in tr:
            rel_err.append(abs(tr["f_over_n"] - p) / p)
        pts.append({"seconds": tr["t"], "primal": p, "subopt": (p - p_star) / p_star})
    out = {"points": pts, "stopped": stopped, "what": what, "targets": {}}
    if rel_err:
        out["mapping_max_rel_err"] = max(rel_err)
    for eps in TARGETS:
        i = _first_hit(pts, eps)
        out["targets"][eps] = None if i is None else {"seconds": pts[i]["seconds"],
                                                      "subopt": pts[i]["subopt"]}
    best = min((q["subopt"] for q in pts), default=float("nan"))
    last = pts[-1]["seconds"] if pts else 0.0
    log(f"    {len(pts)} {what} in {last:.1f} s ({stopped}); best subopt {best:.2e}"
        + (f"; max |f/n − P|/P = {out['mapping_max_rel_err']:.1e}" if rel_err else ""))
    return out


def daskml_warmup(client, prob, log):
    """Compile pydata-sparse's numba kernels on every worker (and here)."""
    from dask_ml.linear_model import LogisticRegression

    X, y = prob.X[:4000], prob.y[:4000]
    t0 = time.perf_counter()
    Xd, yd, _ = scatter_blocks(client, X, y, "coo")
    LogisticRegression(solver="lbfgs", fit_intercept=False, max_iter=3,
                       solver_kwargs={"normalize": False}).fit(Xd, yd)
    LogisticRegression(solver="admm", fit_intercept=False, max_iter=1,
                       solver_kwargs={"normalize": False}).fit(Xd, yd)
    log(f"  dask-ml warm-up (pydata-sparse numba compile): {time.perf_counter() - t0:.1f} s")


# -- single-machine peers -----------------------------------------------------------------
def local_peers(loss, prob):
    from sklearn.linear_model import LogisticRegression as SkLR
    from sklearn.svm import LinearSVC as SkSVC

    X, y, C = prob.X, prob.y, prob.C
    tols = [1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8]
    out = []
    if loss == "logistic":
        out += [
            ("sklearn lbfgs", lambda tol: lambda: SkLR(
                C=C, solver="lbfgs", tol=tol, max_iter=20000, fit_intercept=False).fit(X, y),
             tols[1:]),
            ("sklearn liblinear", lambda tol: lambda: SkLR(
                C=C, solver="liblinear", tol=tol, max_iter=1000,
                fit_intercept=False).fit(X, y), tols),
        ]
    else:
        out.append(("sklearn LinearSVC dual", lambda tol: lambda: SkSVC(
            C=C, loss=loss, dual=True, tol=tol, max_iter=20000,
            fit_intercept=False).fit(X, y), tols))
        if loss == "squared_hinge":
            out.append(("sklearn LinearSVC primal", lambda tol: lambda: SkSVC(
                C=C, loss=loss, dual=False, tol=tol, max_iter=1000,
                fit_intercept=False).fit(X, y), tols))
    try:
        import snapml
    except Exception:  # reported as a failed peer below
        snapml = None
    if loss == "logistic":
        for dual in (True, False):
            def make(tol, dual=dual):
                if snapml is None:
                    raise ImportError("snapml is not installed")
                return lambda: snapml.LogisticRegression(
                    regularizer=1.0 / C, dual=dual, fit_intercept=False, tol=tol,
                    max_iter=100000, n_jobs=2, random_state=0).fit(X, y)
            out.append((f"snapml dual={dual}", make, tols))
    elif loss == "hinge":
        def make(tol):
            if snapml is None:
                raise ImportError("snapml is not installed")
            return lambda: snapml.SupportVectorMachine(
                regularizer=1.0 / C, fit_intercept=False, tol=tol, max_iter=100000,
                n_jobs=2, random_state=0).fit(X, y)
        out.append(("snapml SVM (dual)", make, tols))
    return out


def check_snapml_mapping(prob, loss, log):
    """Which ``regularizer`` (1/C or C) solves our problem, at C = 0.25 on a subset."""
    import warnings

    import snapml

    sub = prob.head(20000, C=0.25)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p_star = min(sub.primal(loss, cm.coef_of(cm._tight_liblinear(sub, loss))),
                     sub.primal(loss, cm.coef_of(cm._tight_daskelastic(sub, loss))))
        res = {}
        for label, reg in (("1/C", 1.0 / sub.C), ("C", sub.C)):
            if loss == "logistic":
                m = snapml.LogisticRegression(regularizer=reg, dual=True, fit_intercept=False,
                                              tol=1e-8, max_iter=100000)
            else:
                m = snapml.SupportVectorMachine(regularizer=reg, fit_intercept=False,
                                                tol=1e-8, max_iter=100000)
            m.fit(sub.X, sub.y)
            res[label] = (sub.primal(loss, cm.coef_of(m)) - p_star) / p_star
    log(f"  snapml regularizer mapping ({loss}, {sub.n} rows, C=0.25): subopt with "
        f"regularizer=1/C: {res['1/C']:.1e}, with regularizer=C: {res['C']:.1e}")
    return res


# -- plot ----------------------------------------------------------------------------------
def plot(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    losses = list(results["losses"])
    fig, axes = plt.subplots(1, len(losses) + 1, figsize=(8.5 * len(losses) + 5, 4.8),
                             squeeze=False)
    axes = axes[0]
    for ax, loss in zip(axes, losses):
        lr = results["losses"][loss]
        for s in lr["solvers"]:
            data = s.get("result") or {}
            pts = data.get("points", [])
            if not pts:
                continue
            t = [p["seconds"] for p in pts]
            e = [max(p["subopt"], 1e-12) for p in pts]
            style = "-" if s["method"] == "trace" and len(pts) > 2 else "o--"
            ax.plot(t, e, style, ms=3, label=s["name"])
        for eps in TARGETS:
            ax.axhline(eps, color="k", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("seconds (lines: traced runs; markers: tol-sweep fits)", fontsize=8)
        ax.set_ylabel("(P − P*) / P*")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(loss)
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax = axes[-1]
    bd = results.get("breakdown", {})
    names = list(bd)
    if names:
        xs = np.arange(len(names))
        solver = [bd[k]["max_worker_seconds"] * 1e3 for k in names]
        over = [max(bd[k]["overhead_per_round"], 0) * 1e3 for k in names]
        ax.bar(xs, solver, label="slowest worker's solver")
        ax.bar(xs, over, bottom=solver, label="overhead (wall − slowest)")
        ax.set_xticks(xs, names, rotation=20, fontsize=7, ha="right")
        ax.set_ylabel("ms per round")
        ax.set_title("daskelastic: where a round goes")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- main --------------------------------------------------------------------------------
def run_sweep(rec, prob, loss, p_star, make_fit, tols, opts, log):
    sw = cm.tol_sweep(prob, loss, p_star, make_fit, tols, TARGETS,
                      max_fit_seconds=opts["max_fit"], repeats=opts["repeats"],
                      repeat_budget=opts["repeat_budget"], log=log, label=rec["name"])
    rec["result"] = sw
    return rec


def warm_up_daskelastic(Xs, ys, losses, **kw):
    """One short fit per loss: numba (cached) loaded in every worker."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for loss in losses:
            de_estimator(loss, 1.0, **kw)(1e-4, 3).fit(Xs, ys)
    return time.perf_counter() - t0


def cluster_part(k, prob, results, losses, opts, budgets, shuffle_check, log,
                 sigma_check=False):
    log(f"\n== LocalCluster(n_workers={k}, threads_per_worker=1, processes=True)")
    t0 = time.perf_counter()
    cluster, client = start_cluster(k)
    try:
        log(f"  started in {time.perf_counter() - t0:.1f} s; row blocks: one per worker")
        Xd, yd, _keep = scatter_blocks(client, prob.X, prob.y, "csr")
        Xs, ys = prob.X[:2000], prob.y[:2000]
        Xw, yw, _kw = scatter_blocks(client, Xs, ys, "csr")
        try:
            dt = warm_up_daskelastic(Xw, yw, losses, client=client, backend="dask")
            log(f"  daskelastic warm-up fits: {dt:.1f} s")
        except Exception as e:  # the fits below report it per configuration
            log(f"  daskelastic warm-up FAILED: {type(e).__name__}: {e}")
        del Xw, yw, _kw
        for loss in losses:
            lr = results["losses"][loss]
            p_star = lr["p_star"]
            log(f"  -- {loss}")
            rec = {"name": f"daskelastic {k} workers", "where": f"LocalCluster {k}w",
                   "method": "trace", "kind": "daskelastic", "k": k}
            try:
                de_run(rec, prob, loss, p_star,
                       de_estimator(loss, prob.C, client=client, backend="dask"),
                       Xd, yd, budgets["de"] if k == 2 else budgets["de_other"], opts, log)
            except Exception as e:
                rec["error"] = f"{type(e).__name__}: {e}"
                log(f"    {rec['name']}: FAILED {rec['error']}")
            lr["solvers"].append(rec)
            if k == 2 and shuffle_check:
                # the same fit on row-shuffled blocks: how much of the cost is
                # the table's date order (contiguous blocks = different months)?
                # and, unless --no-sigma-check, with the fixed σ′ = K instead of
                # the adaptive default (which on 2 workers lowers the dual
                # faster and the primal slower)
                perm = np.random.default_rng(0).permutation(prob.n)
                Xp, yp, _kp = scatter_blocks(client, prob.X[perm], prob.y[perm], "csr")
                variants = [("", {})]
                if sigma_check and loss != "hinge":
                    variants.append((f", σ′={k}", {"sigma": float(k)}))
                for label, kw in variants:
                    rec = {"name": f"daskelastic {k}w rows shuffled{label}",
                           "where": f"LocalCluster {k}w", "method": "trace",
                           "kind": "daskelastic", "k": k}
                    try:
                        de_run(rec, prob, loss, p_star,
                               de_estimator(loss, prob.C, client=client, backend="dask", **kw),
                               Xp, yp, budgets["de_other"], opts, log)
                    except Exception as e:
                        rec["error"] = f"{type(e).__name__}: {e}"
                        log(f"    {rec['name']}: FAILED {rec['error']}")
                    lr["solvers"].append(rec)
                    if not label:
                        try:
                            lr["paired"] = paired_part(
                                prob, loss, lr, rec,
                                de_estimator(loss, prob.C, client=client, backend="dask"),
                                Xp, yp, opts, log)
                        except Exception as e:
                            lr["paired"] = {"error": f"{type(e).__name__}: {e}"}
                            log(f"    side by side: FAILED {lr['paired']['error']}")
                del Xp, yp, _kp
            if k == 2 and loss == "logistic":
                daskml_part(client, prob, lr, budgets["daskml"], results, log,
                            admm=budgets["admm"])
    finally:
        client.close()
        cluster.close()


def fastest_peer(lr, eps):
    """The single-process peer (name, winning tol, median seconds) fastest to ``eps``."""
    best = None
    for s in lr["solvers"]:
        if s["kind"] != "peer" or s["method"] != "sweep" or not s.get("result"):
            continue
        t = s["result"]["targets"].get(eps)
        if t and (best is None or t["seconds"] < best[2]):
            best = (s["name"], t["tol"], t["seconds"])
    return best


def paired_part(prob, loss, lr, de_rec, make_est, X, y, opts, log):
    """Take turns: the fastest single-process peer's fit, then the 2-worker trace.

    The machine's speed drifts between the single-process part of this script
    and its cluster part (snapml's fit to 1e-3 took 0.36 s in one run and
    0.45 s in another); a ratio of two fits run side by side, the order
    alternating from pair to pair, does not see the drift.  Each pair: the
    fastest peer's fit at its winning tol for each ε (the sweep's winner, as in
    the table) and one daskelastic trace fit of 10 rounds more than the first
    trace needed to meet both targets; ratio = daskelastic's time to ε (round
    time + set-up, as in the table) / the peer's fit time.  The table quotes
    the median of the pairs' ratios.  Turns mirror each other (peers, ours;
    then ours, the peers in reverse).  A fit that does not meet ε (a trace in
    its rounds, or a peer's fit at its tol) is counted and printed, and its
    pair left out of the ratios.
    """
    res = (de_rec.get("result") or {})
    pts = res.get("points", [])
    hits = {eps: _first_hit(pts, eps) for eps in TARGETS}
    peers = {eps: fastest_peer(lr, eps) for eps in TARGETS}
    todo = [eps for eps in TARGETS if hits[eps] is not None and peers[eps] is not None]
    if not todo or opts["pairs"] < 1:
        return None
    makers = {name: make for name, make, _ in local_peers(loss, prob)}
    # as many rounds as the first trace needed, and 10 more: the default
    # straggler policy cuts slow workers short by the clock, so the rounds
    # to ε vary a little from fit to fit (9 to 11 to 1e-3 on flights)
    rounds = max(hits[eps] for eps in todo) + 11
    p_star = lr["p_star"]
    out = {eps: {"peer": peers[eps][0], "peer_tol": peers[eps][1], "peer_seconds": [],
                 "de_seconds": [], "ratios": [], "missed": 0, "peer_missed": 0}
           for eps in todo}

    def ours():
        t0 = time.perf_counter()
        m = make_est(1e-8, rounds).fit(X, y)
        return _trace_points(m, time.perf_counter() - t0, p_star)[2]

    def peer(eps):
        seconds, model = cm.timed_fit(makers[peers[eps][0]](peers[eps][1]))
        return seconds, (prob.primal(loss, cm.coef_of(model)) - p_star) / p_star

    t_start = time.perf_counter()
    for i in range(opts["pairs"]):
        if time.perf_counter() - t_start > opts["pair_budget"]:
            break
        # mirrored turns: peers then ours, then ours then the peers in reverse
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if i % 2:
                trace = ours()
                fits = {eps: peer(eps) for eps in reversed(todo)}
            else:
                fits = {eps: peer(eps) for eps in todo}
                trace = ours()
        for eps in todo:
            j = _first_hit(trace, eps)
            o = out[eps]
            seconds, subopt = fits[eps]
            # a fit that misses ε is counted, not hidden, and the pair left out
            if j is None:
                o["missed"] += 1
            if subopt > eps:
                o["peer_missed"] += 1
            if j is None or subopt > eps:
                continue
            o["peer_seconds"].append(seconds)
            o["de_seconds"].append(trace[j]["seconds"])
            o["ratios"].append(trace[j]["seconds"] / seconds)
    for eps, o in out.items():
        if o["ratios"]:
            o["median_ratio"] = statistics.median(o["ratios"])
        log(f"    paired {eps:g}: {o['peer']} tol={o['peer_tol']:g} fits "
            + ", ".join(f"{x:.2f}" for x in o["peer_seconds"]) + f" s; {de_rec['name']} "
            + ", ".join(f"{x:.2f}" for x in o["de_seconds"]) + " s; ratios "
            + (", ".join(f"{x:.2f}" for x in o["ratios"]) or "none")
            + (f"; {o['missed']} trace(s) of {rounds} rounds missed ε" if o["missed"] else "")
            + (f"; {o['peer_missed']} peer fit(s) missed ε" if o["peer_missed"] else ""))
    return out


def daskml_part(client, prob, lr, budget, results, log, admm=True):
    p_star = lr["p_star"]
    Xc = yc = None
    reason = "dask-ml setup failed"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Xc, yc, _keepc = scatter_blocks(client, prob.X, prob.y, "coo")
            daskml_warmup(client, prob, log)
    except Exception as e:
        reason = f"{type(e).__name__}: {e}"
        log(f"    dask-ml setup FAILED: {reason}")
    solvers = [("lbfgs", daskml_lbfgs_trace)] + ([("admm", daskml_admm_trace)] if admm else [])
    for solver, tracer in solvers:
        rec = {"name": f"dask-ml {solver}", "where": "LocalCluster 2w",
               "method": "trace", "kind": "peer"}
        log(f"    dask-ml {solver} (budget {budget:.0f} s)")
        try:
            if Xc is None:
                raise RuntimeError(reason)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rec["result"] = tracer(prob, p_star, Xc, yc, min(TARGETS), budget, log)
            if "mapping_max_rel_err" in rec["result"]:
                results["checks"]["daskml_f_over_n_vs_P"] = \
                    rec["result"]["mapping_max_rel_err"]
        except Exception as e:
            rec["error"] = f"{type(e).__name__}: {e}"
            log(f"    dask-ml {solver}: FAILED {rec['error']}")
        lr["solvers"].append(rec)


def summarise(results, log):
    rows, csv_rows, brows = [], [], []
    refs = {"×de2": "daskelastic 2 workers", "×de2s": "daskelastic 2w rows shuffled"}
    for loss, lr in results["losses"].items():
        ref = {k: {} for k in refs}
        for s in lr["solvers"]:
            for k, name in refs.items():
                if s["name"] == name and s.get("result"):
                    ref[k] = {eps: s["result"]["targets"][eps].get("trace_seconds")
                              for eps in TARGETS}
        for s in lr["solvers"]:
            res = s.get("result") or {"targets": {}}
            t = {eps: (res["targets"].get(eps) or {}) for eps in TARGETS}
            if s["kind"] == "daskelastic":
                variants = [("trace", "trace_seconds"), ("fit", "seconds")]
            elif s["method"] == "trace":
                variants = [("trace", "seconds")]
            else:
                variants = [("fit", "seconds")]
            for how, key in variants:
                note = s.get("error", "")
                vals = {eps: t[eps].get(key) for eps in TARGETS}
                if not note and any(v is None for v in vals.values()):
                    pts = res.get("points", [])
                    best = min((p["subopt"] for p in pts), default=None)
                    if s["kind"] == "daskelastic" and how == "fit":
                        pred = [f"{eps:g}: ≈{t[eps]['predicted_fit_seconds']:.0f} s"
                                for eps in TARGETS if vals[eps] is None
                                and t[eps].get("predicted_fit_seconds") is not None]
                        note = ("fit not run, would take " + ", ".join(pred) if pred
                                else "no tol stops at an iterate meeting ε in the trace")
                    elif how == "trace" and pts:
                        note = (f"not reached in {pts[-1]['seconds']:.0f} s "
                                f"(best {best:.1e})")
                    else:
                        note = "not reached in sweep"
                if s["kind"] == "daskelastic" and how == "trace" and not s.get("error"):
                    note = (note + "; " if note else "") + \
                        f"{res.get('rounds')} rounds traced"
                if how == "fit":
                    ns = "/".join(str(len(t[eps].get("samples", []))) for eps in TARGETS)
                    tols = "/".join("—" if t[eps].get("tol") is None else f"{t[eps]['tol']:g}"
                                    for eps in TARGETS)
                    method = f"fit tol={tols} n={ns}"
                elif s["kind"] == "daskelastic":
                    ns = "/".join(str(len(t[eps].get("trace_samples", []))) for eps in TARGETS)
                    method = f"trace, median n={ns}"
                else:
                    method = "trace (1 run)"
                row = [loss, s["name"], s["where"]]
                for eps in TARGETS:
                    row += [cm.fmt_s(vals[eps])]
                    row += [cm.fmt_ratio(vals[eps], ref[k].get(eps)) for k in refs]
                rows.append(row + [method, note])
                csv_rows.append({
                    "loss": loss, "solver": s["name"], "where": s["where"], "method": how,
                    **{f"s_to_{eps:g}": vals[eps] for eps in TARGETS},
                    **{f"ratio_{k[1:]}_{eps:g}": None if vals[eps] is None
                       or not ref[k].get(eps) else vals[eps] / ref[k][eps]
                       for eps in TARGETS for k in refs},
                    **{f"tol_for_{eps:g}": t[eps].get("tol") for eps in TARGETS},
                    "note": note})
            if s["kind"] == "daskelastic" and s.get("result"):
                b = res["breakdown"]
                results["breakdown"][f"{loss} {s['name']}"] = b
                brows.append([loss, s["name"], str(b["rounds"]),
                              f"{b['wall_per_round'] * 1e3:.1f}",
                              f"{b['max_worker_seconds'] * 1e3:.1f}",
                              f"{b['sum_worker_seconds'] * 1e3:.1f}",
                              f"{b['overhead_per_round'] * 1e3:.1f}",
                              f"{100 * b['overhead_fraction']:.0f}%",
                              f"{res['setup_seconds']:.2f}"])
    hdr = ["loss", "solver", "where"]
    for eps in TARGETS:
        hdr += [f"s to {eps:g}", *refs]
    hdr += ["method", "note"]
    log(f"\nTime to (P − P*)/P* ≤ ε, {results['n']} rows.  trace = time when the "
        "solver's iterate first met ε (daskelastic: history round time + fit set-up; "
        "dask-ml: traced evaluations); fit = median wall time of a whole fit with the "
        "winning tol.  ×de2 / ×de2s = ratio to the trace time of daskelastic on 2 "
        "workers with the table's row blocks / with row-shuffled blocks.")
    log(cm.table(rows, hdr))
    prows = []
    for loss, lr in results["losses"].items():
        paired = lr.get("paired") or {}
        if "error" in paired:
            prows.append([loss, "—", "FAILED: " + paired["error"][:60]] + [""] * 6)
            continue
        for eps, o in paired.items():
            r = o["ratios"]
            prows.append([loss, f"{eps:g}", f"{o['peer']} tol={o['peer_tol']:g}",
                          str(len(r)),
                          f"{statistics.median(o['peer_seconds']):.3f}" if r else "—",
                          f"{statistics.median(o['de_seconds']):.3f}" if r else "—",
                          f"{o['median_ratio']:.2f}×" if r else "—",
                          f"{min(r):.2f}–{max(r):.2f}×" if r else "—",
                          f"{o['missed']} / {o['peer_missed']}"])
    if prows:
        log("\nSide by side: the fastest single-process peer's fit and the 2-worker trace "
            "on shuffled rows, taking turns (mirrored); ratio = daskelastic's time "
            "to ε / the peer's, per pair")
        log(cm.table(prows, ["loss", "ε", "peer", "pairs", "peer s (median)",
                             "2w shuffled s (median)", "median ratio", "range",
                             "missed ε (ours / peer)"]))
    log("\nWhere daskelastic's time goes per round (trace fit, rounds after the first)")
    log(cm.table(brows, ["loss", "config", "rounds", "wall ms/round", "slowest worker ms",
                         "Σ workers ms", "overhead ms/round", "overhead %", "set-up s"]))
    return csv_rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10,000 rows, smoke run")
    ap.add_argument("--losses", default="logistic")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--daskml-budget", type=float, default=None,
                    help="seconds per dask-ml solver (default 75, quick 4)")
    ap.add_argument("--de-budget", type=float, default=None,
                    help="seconds of the daskelastic 2-worker trace fit (default 150, "
                         "quick 3; the in-process one gets the same, 4 workers and "
                         "shuffled rows min(this, 60))")
    ap.add_argument("--no-admm", action="store_true",
                    help="skip dask-ml ADMM (one of its iterations cannot be interrupted "
                         "and takes minutes on the full table)")
    ap.add_argument("--no-shuffle-check", action="store_true",
                    help="skip the 2-worker fit on row-shuffled blocks")
    ap.add_argument("--no-sigma-check", action="store_true",
                    help="skip the fit of the row-shuffled blocks with the fixed σ′ = K")
    ap.add_argument("--pairs", type=int, default=None,
                    help="turns of the fastest single-process peer and the 2-worker fit on "
                         "shuffled rows, side by side (default 8, quick 2; no turn starts "
                         "after 60 s)")
    ap.add_argument("--recompute-reference", action="store_true")
    args = ap.parse_args(argv)
    quick = args.quick
    n_rows = 10000 if quick else None
    opts = {"max_fit": 10.0 if quick else 80.0, "repeats": args.repeats or (2 if quick else 3),
            "repeat_budget": 3.0 if quick else 15.0,
            "trace_repeats": args.repeats or (2 if quick else 3),
            "pairs": args.pairs if args.pairs is not None else (2 if quick else 8),
            "pair_budget": 10.0 if quick else 60.0}
    de_budget = args.de_budget or (3.0 if quick else 150.0)
    budgets = {"daskml": args.daskml_budget or (4.0 if quick else 75.0),
               "de": de_budget, "de_other": min(de_budget, 3.0 if quick else 60.0),
               "admm": not args.no_admm}
    losses = [name for name in args.losses.split(",") if name]
    suffix = "_quick" if quick else ""

    log = cm.Tee()
    cm.preload_daskelastic()
    env = cm.environment()
    log(f"bench_distributed{' --quick' if quick else ''}  {env['time']}  cpus={env['cpus']}  "
        f"loadavg={tuple(round(x, 2) for x in env['loadavg'])}  daskelastic sources "
        f"{env['daskelastic_code']['sha1']} (newest {env['daskelastic_code']['newest_source']})")
    prob = cm.Problem(n_rows=n_rows, C=1.0)
    log(f"flights: {prob.n} × {prob.d}, nnz={prob.X.nnz}, C={prob.C:g}, fit_intercept=False; "
        f"targets {TARGETS}")
    results = {"env": env, "n": prob.n, "d": prob.d, "C": prob.C, "targets": TARGETS,
               "budgets": budgets, "losses": {}, "breakdown": {}, "checks": {}}

    warm_up_daskelastic(prob.X[:2000], prob.y[:2000], losses, backend="inprocess")

    # reference optima and single-machine solvers, before any cluster runs
    for loss in losses:
        log(f"\n== {loss}: reference and single-machine solvers")
        p_star = cm.reference_optimum(prob, loss, recompute=args.recompute_reference, log=log)
        lr = {"p_star": p_star, "solvers": []}
        results["losses"][loss] = lr
        if loss in ("logistic", "hinge"):
            try:
                results["checks"][f"snapml_mapping_{loss}"] = check_snapml_mapping(prob, loss, log)
            except Exception as e:
                log(f"  snapml mapping check failed: {type(e).__name__}: {e}")
        rec = {"name": "daskelastic in-process", "where": "this process, 1 worker",
               "method": "trace", "kind": "daskelastic", "k": 1}
        de_run(rec, prob, loss, p_star, de_estimator(loss, prob.C, backend="inprocess"),
               prob.X, prob.y, de_budget, opts, log)
        lr["solvers"].append(rec)
        for name, make_fit, tols in local_peers(loss, prob):
            rec = {"name": name, "where": "this process", "method": "sweep", "kind": "peer"}
            try:
                run_sweep(rec, prob, loss, p_star, make_fit, tols, opts, log)
            except Exception as e:
                rec["error"] = f"{type(e).__name__}: {e}"
                log(f"    {name}: FAILED {rec['error']}")
            lr["solvers"].append(rec)

    for k in (2, 4):
        cluster_part(k, prob, results, losses, opts, budgets,
                     not args.no_shuffle_check, log, sigma_check=not args.no_sigma_check)

    csv_rows = summarise(results, log)
    chk = results["checks"]
    if "daskml_f_over_n_vs_P" in chk:
        log(f"\ncheck: dask-ml lbfgs objective / n vs our P on its iterates: max rel. diff "
            f"{chk['daskml_f_over_n_vs_P']:.1e} (C maps 1:1: lamduh = 1/C, normalize=False)")
    results["env_end_loadavg"] = list(os.getloadavg())
    log(f"loadavg at end: {tuple(round(x, 2) for x in results['env_end_loadavg'])} "
        f"(other processes on this {env['cpus']}-cpu machine perturb the timings)")

    cm.write_results(f"bench_distributed{suffix}", results, csv_rows, log, plot,
                     f"flights {prob.n}×{prob.d}, C={prob.C:g}, {env['cpus']} cpus")


if __name__ == "__main__":
    main()
