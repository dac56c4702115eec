"""L1 and elastic-net fits against scikit-learn's: flights (logistic) and diamonds (Lasso).

What it measures, in one run, side by side:

1. Elastic-net logistic regression (``l1_ratio`` 0.5) on the first
   ``--n-rows`` rows (default 100,000; 3,894 one-hot columns) of the
   nycflights13 table (``daskelastic.datasets.load_flights``, scipy CSR,
   ``y`` = arrival delayed), for each ``C`` of ``--Cs`` (default 0.1, 1):
   ``daskelastic.LogisticRegression(C, penalty="elasticnet", l1_ratio=0.5)``
   in this process on one worker (``backend="inprocess", n_workers=1``) and on
   a ``LocalCluster`` of 2 single-threaded worker processes on 127.0.0.1
   (``client=``, started once for the run), against scikit-learn's
   ``LogisticRegression(solver="saga", penalty="elasticnet", l1_ratio=0.5)``
   in this process (its ``FutureWarning`` about ``penalty`` silenced).  Both
   leave the intercept free; the objective compared is scikit-learn's divided
   by ``C n``: ``mean log-loss + (0.5 ‖w‖₁ + 0.25 ‖w‖²) / (C n)``.
2. The Lasso on all 53,940 rows of ggplot2's diamonds
   (``daskelastic.datasets.load_diamonds``: dense, 26 standardised and one-hot
   columns, ``y`` = log price), for each ``alpha`` of ``--alphas`` (default
   0.001, 0.01, 0.1): ``daskelastic.Lasso(alpha)`` with its default solver
   (the Gram solver: 26 columns) and with ``solver="cocoa"``, each in-process
   (one worker) and on the same ``LocalCluster`` (numpy input; the Gram
   solver also on a dask array of the rows persisted on the workers, in 4
   blocks), against scikit-learn's ``Lasso(alpha)`` (coordinate descent); the
   objective ``1/(2n) ‖y − Xw − b‖² + alpha ‖w‖₁`` with ``b`` at its optimum
   (the data centred).

How.  ``P*``, per ``C`` or ``alpha``, is the lower of two tight fits, and the
report says which: flights, scipy's L-BFGS-B on the bound-constrained split
form ``w = w⁺ − w⁻, w⁺, w⁻ ≥ 0`` (smooth, so it runs to ``gtol=1e-13``; saga
at ``tol=1e-10`` would need many thousands of epochs at ``C = 1``, where at
``tol=1e-4`` it already takes ~600) and daskelastic in-process with ``tol=1e-10,
max_iter=1000``; diamonds, scikit-learn's ``Lasso(tol=1e-12,
max_iter=1000000)`` and daskelastic in-process with ``tol=1e-10``.  The
nonzero pattern of the fit that gives ``P*`` (L-BFGS-B's bounds give exact
zeros) is the support the fits are checked against.

*Time to a relative suboptimality* ``ε = (P − P*)/P*``: for scikit-learn,
the wall time of the loosest ``tol`` of the grid 1e-1, 1e-2, …, 1e-8 whose
fit reaches ``ε`` (found once before the timed turns, loose to tight, with
``max_iter=10000``; that ``tol`` then takes its turns like every mode).  For
daskelastic, whose certified gap is an upper bound that can stay well above
the true suboptimality, the time is read off a fit's ``history_``: the fit's
wall time less the history time after the first round whose primal reaches
``ε`` (``wall − (T_last − T_ε)``: the set-up before the rounds, then the
rounds up to that one), i.e. what a fit stopped at that round would have
taken.  It is read from the default-``tol`` fit for the logistic rows (ε =
1e-3) and from the ``tol=1e-8`` fit for the Lasso (ε = 1e-3 and 1e-6).
Both solvers are credited with hindsight: scikit-learn with the right grid
``tol``, daskelastic with the right round.

The modes (per ``C``: daskelastic in-process and on 2 workers at their
default ``tol=1e-4, max_iter=200``; saga at its default ``tol=1e-4,
max_iter=100`` and at its grid ``tol`` for 1e-3; per ``alpha``: daskelastic
per solver, in-process and on 2 workers at ``tol`` 1e-4 (default,
``max_iter=1000``) and 1e-8, scikit-learn at its default ``tol=1e-4`` and at its grid ``tol`` for
1e-3 and for 1e-6) take turns ``--repeats`` times (default 3; the order
reversed every other time, so that a drift of the machine's speed hits every
mode alike), each after a pause of 0.3 s (numpy's BLAS threads, busy
evaluating the last fit's objective, otherwise slowed a fit that followed at
once); each daskelastic mode is first warmed up once (numba compilation, the
cluster's connections) on 5,000 of the rows.  Medians are
reported, with the time ratios daskelastic / scikit-learn: at the default
``tol`` (the two ``tol`` mean different things: a certified relative duality
gap for daskelastic, the largest relative coefficient change for saga, a duality gap
scaled by ``‖y‖²`` for coordinate descent) and to each ``ε``.  Also
reported: rounds or epochs / iterations, convergence (daskelastic:
``duality_gap_ ≤ tol`` and no ``ConvergenceWarning``; scikit-learn: no
``ConvergenceWarning``), daskelastic's certified gap, ``(P − P*)/P*``, the
nonzeros and how many coefficients are zero in one of the fit and the
reference but not in the other.

Reproduce (in the repository root)::

    NUMBA_CACHE_DIR=/tmp/numba-bench python benchmarks/bench_l1.py     # ~8 minutes on 2 cores
    python benchmarks/bench_l1.py --repeats 1 --n-rows 20000 --no-cluster   # a quick look

Writes ``benchmarks/results/l1.md``.
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
from _versus import (  # noqa: E402
    command_line,
    daskelastic_dir,
    fmt_tol,
    machine_line,
    markdown_table,
    records,
    take_turns,
)

RESULT = cm.RESULTS / "l1.md"
L1_RATIO = 0.5
TOL_GRID = [10.0 ** -k for k in range(1, 9)]        # scikit-learn's, loose to tight
GRID_MAX_ITER = 10000
TIGHT = 1e-8                                        # daskelastic's tight Lasso fits
LOGISTIC_TARGETS = (1e-3,)
LASSO_TARGETS = (1e-3, 1e-6)
WARMUP_ROWS = 5000
# numpy's OpenBLAS threads spin for a while after a call (the objective is
# evaluated after every fit), which slowed the next fit when it started at once
SETTLE_SECONDS = 0.3
IN_PROCESS = "in-process, 1 worker"
CLUSTER = "LocalCluster, 2 workers"


# -- problems: data, objective, reference ----------------------------------------
class FlightsLogistic:
    """Elastic-net logistic regression on the flights rows: ``P`` divided by ``C n``."""

    name = "flights"
    param = "C"
    targets = LOGISTIC_TARGETS
    daskelastic_tols = [(1e-4, "1e-4 (default)")]
    sklearn_name, sklearn_max_iter = "scikit-learn saga", 100    # its defaults' max_iter
    warmup_value = 1.0

    def __init__(self, n_rows):
        from daskelastic.datasets import load_flights

        self.X, self.y, _ = load_flights(n_rows=n_rows)
        self.X.sort_indices()
        self.n, self.d = self.X.shape
        self.sign = 2.0 * self.y - 1.0

    def primal(self, w, b, C):
        z = self.sign * (self.X @ w + b)
        return float(np.mean(np.logaddexp(0.0, -z))
                     + (L1_RATIO * np.abs(w).sum() + (1 - L1_RATIO) / 2 * w @ w)
                     / (C * self.n))

    def tight_fits(self, C):
        """``[(name, w, b, seconds, note)]``: the candidates for ``P*``."""
        from scipy.optimize import minimize
        from scipy.special import expit

        X, XT, sign, n, d = self.X, self.X.T.tocsr(), self.sign, self.n, self.d
        l1, l2 = L1_RATIO / (C * n), (1 - L1_RATIO) / (C * n)

        def value_and_gradient(v):
            w = v[:d] - v[d:2 * d]
            z = sign * (X @ w + v[-1])
            g = -sign * expit(-z) / n
            gw = XT @ g + l2 * w
            value = np.mean(np.logaddexp(0.0, -z)) + l1 * v[:2 * d].sum() + 0.5 * l2 * w @ w
            return value, np.concatenate([gw + l1, l1 - gw, [g.sum()]])

        t0 = time.perf_counter()
        res = minimize(value_and_gradient, np.zeros(2 * d + 1), jac=True, method="L-BFGS-B",
                       bounds=[(0, None)] * (2 * d) + [(None, None)],
                       options=dict(maxiter=100000, maxfun=200000, ftol=0.0, gtol=1e-13,
                                    maxcor=30))
        seconds = time.perf_counter() - t0
        out = [("L-BFGS-B (split w = w⁺ − w⁻, gtol=1e-13)", res.x[:d] - res.x[d:2 * d],
                res.x[-1], seconds, f"{res.nit} iterations")]
        r = fit_daskelastic(self.estimator(C, 1e-10, dict(max_iter=1000, **inprocess())),
                            self.X, self.y)
        out.append(("daskelastic tol=1e-10, max_iter=1000, in-process", r["w"], r["b"],
                    r["seconds"], f"{r['iters']} rounds, certified gap {r['gap']:.1e}"))
        return out

    def settings(self, base):
        return base

    def inputs(self, kw):
        return self.X, self.y

    def estimator(self, C, tol, kw):
        import daskelastic as de

        return de.LogisticRegression(C=C, penalty="elasticnet", l1_ratio=L1_RATIO, tol=tol,
                                     random_state=0, **kw)

    def sklearn_estimator(self, C, tol, max_iter):
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(C=C, solver="saga", penalty="elasticnet",
                                  l1_ratio=L1_RATIO, tol=tol, max_iter=max_iter,
                                  random_state=0)


class DiamondsLasso:
    """The Lasso on diamonds: ``P`` on centred data (the intercept at its optimum)."""

    name = "diamonds"
    param = "alpha"
    targets = LASSO_TARGETS
    daskelastic_tols = [(1e-4, "1e-4 (default)"), (TIGHT, fmt_tol(TIGHT))]
    sklearn_name, sklearn_max_iter = "scikit-learn Lasso", 1000
    warmup_value = 0.01

    def __init__(self):
        from daskelastic.datasets import load_diamonds

        self.X, self.y, _ = load_diamonds()
        self.n, self.d = self.X.shape
        self.Xc = self.X - self.X.mean(axis=0)
        self.yc = self.y - self.y.mean()
        self._dask = None

    def settings(self, base):
        """Each setting with the Gram solver (``solver="auto"`` picks it: 26 columns)
        and with CoCoA+ rounds; on the cluster also the Gram solver on a dask
        array of the rows persisted on the workers (its blocks summed there)."""
        out = []
        for label, kw in base:
            out.append((f"{label}, Gram", kw))
            if "client" in kw:
                out.append((f"{label}, Gram, dask array", dict(kw, dask_input=True)))
            out.append((f"{label}, CoCoA+", dict(kw, solver="cocoa")))
        return out

    def inputs(self, kw):
        if not kw.get("dask_input"):
            return self.X, self.y
        if self._dask is None:
            import dask.array as da
            from distributed import wait

            rows = self.n // 4 + 1
            self._dask = kw["client"].persist([da.from_array(self.X, chunks=(rows, -1)),
                                               da.from_array(self.y, chunks=rows)])
            wait(self._dask)
        return tuple(self._dask)

    def primal(self, w, b, alpha):
        r = self.yc - self.Xc @ w
        return float(r @ r / (2 * self.n) + alpha * np.abs(w).sum())

    def tight_fits(self, alpha):
        sk = fit_sklearn(self.sklearn_estimator(alpha, 1e-12, 1000000), self.X, self.y)
        de = fit_daskelastic(self.estimator(alpha, 1e-10, dict(max_iter=100_000,
                                                               **inprocess())),
                             self.X, self.y)
        return [("scikit-learn Lasso tol=1e-12", sk["w"], sk["b"], sk["seconds"],
                 f"{sk['iters']} iterations"),
                ("daskelastic tol=1e-10, in-process", de["w"], de["b"], de["seconds"],
                 f"{de['iters']} rounds, certified gap {de['gap']:.1e}")]

    def estimator(self, alpha, tol, kw):
        import daskelastic as de

        kw = {k: v for k, v in kw.items() if k != "dask_input"}
        return de.Lasso(alpha=alpha, tol=tol, random_state=0, **kw)

    def sklearn_estimator(self, alpha, tol, max_iter):
        from sklearn.linear_model import Lasso

        return Lasso(alpha=alpha, tol=tol, max_iter=max_iter)


# -- fits ------------------------------------------------------------------------
def inprocess():
    return dict(backend="inprocess", n_workers=1)


def _fit_recording(est, X, y):
    """``(seconds, warned)``: fit ``est``, noting a ``ConvergenceWarning``."""
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        est.fit(X, y)
        seconds = time.perf_counter() - t0
    return seconds, any(issubclass(w.category, ConvergenceWarning) for w in caught)


def _coef(est):
    return (np.asarray(est.coef_, dtype=float).ravel(),
            float(np.ravel(est.intercept_)[0]) if np.ndim(est.intercept_) else
            float(est.intercept_))


def fit_daskelastic(est, X, y):
    """One daskelastic fit: seconds, coefficients, rounds, certified gap, history."""
    seconds, warned = _fit_recording(est, X, y)
    w, b = _coef(est)
    gap, tol = float(est.duality_gap_), est.tol
    return {"seconds": seconds, "w": w, "b": b, "iters": int(np.ravel(est.n_iter_)[0]),
            "gap": gap, "converged": gap <= tol and not warned,
            "history": [{"time": h["time"], "primal": h["primal"]} for h in est.history_]}


def fit_sklearn(est, X, y):
    """One scikit-learn fit: seconds, coefficients, iterations (epochs for saga)."""
    seconds, warned = _fit_recording(est, X, y)
    w, b = _coef(est)
    return {"seconds": seconds, "w": w, "b": b, "iters": int(np.max(est.n_iter_)),
            "gap": None, "converged": not warned, "history": None}


def evaluate(r, problem, value, ref):
    """Add ``rel``, the support comparison and (daskelastic) the times to each target."""
    p = problem.primal(r["w"], r["b"], value)
    r["rel"] = (p - ref["p_star"]) / ref["p_star"]
    nonzero = r["w"] != 0
    r["nnz"] = int(nonzero.sum())
    r["support_diff"] = int(np.sum(nonzero != ref["support"]))
    history = r.pop("history")
    r["to"] = {}
    if history is not None:
        overhead = r["seconds"] - history[-1]["time"]
        for eps in problem.targets:
            t = cm.history_time_to(history, ref["p_star"], eps)
            r["to"][eps] = None if t is None else overhead + t
    del r["w"], r["b"]
    return r


# -- the run -------------------------------------------------------------------
def modes(problem, value, grid_tols, settings):
    """``[(solver, setting, tol label, sample())]`` for one ``C`` or ``alpha``."""
    X, y = problem.X, problem.y
    out = [("daskelastic", setting, label,
            lambda kw=kw, tol=tol: fit_daskelastic(problem.estimator(value, tol, kw),
                                                   *problem.inputs(kw)))
           for setting, kw in settings for tol, label in problem.daskelastic_tols]
    out.append((problem.sklearn_name, "in-process", "1e-4 (default)",
                lambda: fit_sklearn(problem.sklearn_estimator(value, 1e-4,
                                                              problem.sklearn_max_iter), X, y)))
    out += [(problem.sklearn_name, "in-process", f"{fmt_tol(tol)} (grid, {label})",
             lambda tol=tol: fit_sklearn(problem.sklearn_estimator(value, tol, GRID_MAX_ITER),
                                         X, y))
            for tol, label in grid_tols]
    return out


def warm_up(problem, settings):
    """Fit each daskelastic setting once on ``WARMUP_ROWS`` of the rows."""
    pick = np.random.default_rng(0).choice(problem.n, WARMUP_ROWS, replace=False)
    tol = problem.daskelastic_tols[-1][0]
    for _, kw in settings:
        fit_daskelastic(problem.estimator(problem.warmup_value, tol, kw), problem.X[pick],
                        problem.y[pick])


def references(problem, value, log):
    """``P*`` (the lower of the tight fits), its support, and a line for the report."""
    fits = problem.tight_fits(value)
    values = [(problem.primal(w, b, value), name, w, seconds, note)
              for name, w, b, seconds, note in fits]
    p_star, name, w, _, _ = min(values, key=lambda v: v[0])
    parts = [f"{n}: P = {p:.13g} ({s:.1f} s, {note}, "
             f"{'P*' if n == name else f'{(p - p_star) / p_star:+.1e} above'})"
             for p, n, _, s, note in values]
    line = (f"{problem.name}, {problem.param}={value:g}: P* = {p_star:.13g} from {name}, "
            f"{int(np.sum(w != 0))} nonzeros of {w.size}; " + "; ".join(parts))
    log(line)
    return {"p_star": p_star, "support": w != 0, "line": line, "nnz": int(np.sum(w != 0))}


def loosest_tols(problem, value, ref, log):
    """``[(tol, "to ε")]``: for each target, the loosest grid ``tol`` whose fit reaches it."""
    found, eps_left = [], sorted(problem.targets, reverse=True)
    for tol in TOL_GRID:
        est = problem.sklearn_estimator(value, tol, GRID_MAX_ITER)
        r = evaluate(fit_sklearn(est, problem.X, problem.y), problem, value, ref)
        log(f"  grid {problem.param}={value:g} tol={fmt_tol(tol):5s} {r['seconds']:7.2f} s "
            f"{r['iters']:5d} it.  (P − P*)/P* {r['rel']:+.1e}"
            f"{'' if r['converged'] else '  ConvergenceWarning'}")
        reached = [eps for eps in eps_left if r["rel"] <= eps]
        if reached:
            found.append((tol, "to " + " and ".join(fmt_tol(e) for e in reached)))
            eps_left = [e for e in eps_left if e not in reached]
        if not eps_left:
            break
    for eps in eps_left:
        log(f"  no grid tol reached {fmt_tol(eps)}")
    return found


def summarise(samples, modes, **fields):
    """:func:`_versus.records`, with the nonzeros, the worst support and the times to ε."""
    out = records(samples, modes, **fields)
    for i, rec in enumerate(out):
        s = samples[i]
        to = {}
        for eps in s[0]["to"]:
            times = [r["to"][eps] for r in s]
            to[eps] = None if None in times else statistics.median(times)
        rec.update(nnz=statistics.median(r["nnz"] for r in s),
                   support_diff=max(r["support_diff"] for r in s), to=to)
    return out


def run_problem(problem, values, settings, repeats, log):
    """Warm up, then per value: references, the scikit-learn grid, the turns."""
    t0 = time.perf_counter()
    warm_up(problem, settings)
    log(f"{problem.name}: {problem.n:,} × {problem.d}; warm-up of the daskelastic modes on "
        f"{WARMUP_ROWS:,} rows: {time.perf_counter() - t0:.1f} s")
    recs, refs = [], []
    for value in values:
        ref = references(problem, value, log)
        refs.append(ref["line"])
        value_modes = modes(problem, value, loosest_tols(problem, value, ref, log), settings)

        def sample(i, value=value, ref=ref, modes=value_modes):
            time.sleep(SETTLE_SECONDS)
            r = evaluate(modes[i][3](), problem, value, ref)
            to = "  ".join(f"to {fmt_tol(e)} {'—' if t is None else f'{t:.2f} s'}"
                           for e, t in r["to"].items())
            gap = "" if r["gap"] is None else f"gap {r['gap']:.1e}  "
            log(f"  {problem.param}={value:<6g} {modes[i][0]:18s} {modes[i][1]:23s} "
                f"tol={modes[i][2]:22s} {r['seconds']:7.2f} s {r['iters']:5d} it.  {gap}"
                f"(P − P*)/P* {r['rel']:+.1e}  nnz {r['nnz']}  {to}"
                f"{'' if r['converged'] else '  NOT CONVERGED'}")
            return r

        recs += summarise(take_turns(value_modes, repeats, sample), value_modes,
                          table=problem.name, param=problem.param, value=value,
                          ref_nnz=ref["nnz"])
    return recs, refs


def start_cluster():
    import logging

    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1",
                           dashboard_address=None, silence_logs=logging.ERROR)
    client = Client(cluster)
    client.wait_for_workers(2)
    return cluster, client


# -- report ----------------------------------------------------------------------
def fmt_or_dash(x, spec):
    return "—" if x is None else format(x, spec)


def detail_table(recs, targets):
    headers = [recs[0]["param"], "solver", "setting", "tol", "s (median)", "samples s",
               "rounds / iterations", "converged", "certified gap", "(P − P*)/P*",
               "nonzeros (reference)", "support ≠ reference"] + \
        [f"s to {fmt_tol(e)} (history)" for e in targets]
    rows = [[f"{r['value']:g}", r["solver"], r["setting"], r["tol"], f"{r['seconds']:.3f}",
             " / ".join(f"{s:.2f}" for s in r["samples"]), f"{r['iters']:g}",
             "yes" if r["converged"] else "**no**", fmt_or_dash(r["gap"], ".1e"),
             f"{r['rel']:+.1e}", f"{r['nnz']:g} ({r['ref_nnz']})", f"{r['support_diff']}"]
            + [fmt_or_dash(r["to"].get(e), ".3f") if r["solver"] == "daskelastic" else ""
               for e in targets] for r in recs]
    return markdown_table(headers, rows)


def time_to(recs, rec, eps):
    """Seconds to ``eps``: from the history (daskelastic), or the grid ``tol``'s fit."""
    if rec["solver"] != "daskelastic":
        grid = [r for r in recs if r["solver"] == rec["solver"] and r["value"] == rec["value"]
                and "grid" in r["tol"] and fmt_tol(eps) in r["tol"].split("to ")[-1]]
        return (grid[0]["seconds"], grid[0]["tol"].split()[0]) if grid else (None, None)
    source = [r for r in recs if r["solver"] == "daskelastic" and r["value"] == rec["value"]
              and r["setting"] == rec["setting"] and eps in r["to"]]
    tight = [r for r in source if "default" not in r["tol"]] or source
    return tight[0]["to"][eps], None


def summary_rows(recs, targets):
    """Per value and solver: default-tol seconds and seconds to each target, with ratios."""
    rows = []
    for value in dict.fromkeys(r["value"] for r in recs):
        sel = [r for r in recs if r["value"] == value and "default" in r["tol"]]
        sk = next(r for r in sel if r["solver"] != "daskelastic")
        sk_to = {e: time_to(recs, sk, e) for e in targets}
        for r in sel:
            cells = [f"{value:g}", f"{r['solver']}, {r['setting']}",
                     f"{r['seconds']:.2f}", cm.fmt_ratio(r["seconds"], sk["seconds"]),
                     f"{r['iters']:g}" + ("" if r["converged"] else " (not converged)")]
            for e in targets:
                t, tol = time_to(recs, r, e)
                cells.append(fmt_or_dash(t, ".2f") + (f" (tol {tol})" if tol else ""))
                cells.append(cm.fmt_ratio(t, sk_to[e][0]) if r is not sk else "")
            cells.append(f"{r['support_diff']}")
            rows.append(cells)
    return rows


def summary_headers(param, targets):
    return ([param, "solver, setting", "s, default tol", "× sklearn", "rounds / iter."]
            + [h for e in targets for h in (f"s to {fmt_tol(e)}", "× sklearn")]
            + ["support ≠ ref."])


def write_report(args, shapes, recs, refs, env, elapsed, log):
    sections, rst = [], []
    for problem, title in [("flights", "Elastic-net logistic regression (l1_ratio 0.5)"),
                           ("diamonds", "Lasso")]:
        sel = [r for r in recs if r["table"] == problem]
        if not sel:
            continue
        targets = LOGISTIC_TARGETS if problem == "flights" else LASSO_TARGETS
        rows = summary_rows(sel, targets)
        headers = summary_headers(sel[0]["param"], targets)
        sections.append(f"### {title}, {problem}: {shapes[problem]}\n\n"
                        + markdown_table(headers, rows) + "\n\nEvery mode:\n\n"
                        + detail_table(sel, targets))
        rst.append(cm.rst_simple_table(headers, rows))
    legend = (
        "daskelastic at its defaults but for `random_state=0` (logistic: tol 1e-4, "
        "max_iter 200; Lasso: tol 1e-4, max_iter 1000), and the Lasso also at tol "
        f"{fmt_tol(TIGHT)}; scikit-learn at its defaults (saga: tol 1e-4, max_iter 100; "
        "Lasso: tol 1e-4, max_iter 1000) and at the loosest tol of the grid 1e-1 … 1e-8 "
        f"(max_iter {GRID_MAX_ITER}) whose fit reached each ε, found before the turns. "
        f"Modes taking turns, {args.repeats} repeat(s), the order reversed every other "
        "repeat; medians. *s to ε*: daskelastic, the fit's wall time less the history "
        "time after the first round whose primal is within ε of P* (logistic: the "
        f"default-tol fit's history; Lasso: the tol={fmt_tol(TIGHT)} fit's); scikit-learn, "
        "the median seconds of the grid tol's fit. *× sklearn*: over scikit-learn's "
        "median in the same column. *rounds / iterations*: daskelastic's `n_iter_` "
        "(CoCoA+ rounds), saga's epochs, coordinate descent's iterations. *converged*: "
        "daskelastic `duality_gap_ ≤ tol` and no ConvergenceWarning; scikit-learn no "
        "ConvergenceWarning. *certified gap*, *(P − P*)/P** and *support ≠ reference* "
        "(coefficients zero in one of the fit and the reference, not in the other): the "
        "worst of the repeats; a negative (P − P*)/P* is a fit below the reference.")
    body = "\n\n".join(sections)
    ref_lines = "\n".join(f"- {line}" for line in refs)
    log("\n" + body + "\n\n" + legend + "\n\nReferences:\n" + ref_lines
        + "\n\nFor the docs:\n\n" + "\n\n".join(rst) + f"\n\nthe run took {elapsed:.0f} s")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        "# L1 and elastic-net: daskelastic against scikit-learn\n\n"
        f"Produced by `{command_line()}` (in the repository root) in {elapsed:.0f} s.\n\n"
        f"Machine: {machine_line(env)}\n\n{legend}\n\nReferences (P*):\n\n{ref_lines}\n\n"
        f"{body}\n\nSummary tables (as in `docs/benchmarks.rst`):\n\n```\n"
        + "\n\n".join(rst) + "\n```\n")
    log(f"wrote {args.output}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n-rows", type=int, default=100_000, help="flights rows (the first)")
    ap.add_argument("--Cs", type=lambda s: [float(v) for v in s.split(",")],
                    default=[0.1, 1.0], help="comma-separated (default 0.1,1)")
    ap.add_argument("--alphas", type=lambda s: [float(v) for v in s.split(",")],
                    default=[0.001, 0.01, 0.1], help="comma-separated (default 0.001,0.01,0.1)")
    ap.add_argument("--only", choices=["flights", "diamonds"],
                    help="run one of the two parts")
    ap.add_argument("--no-cluster", action="store_true",
                    help="skip the LocalCluster of 2 workers (in-process fits only)")
    ap.add_argument("--output", type=Path, default=RESULT, help="the markdown file written")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", category=FutureWarning, message="'penalty' was deprecated")
    cm.preload_daskelastic()
    log, env = cm.start_log("bench_l1")
    t_start = time.perf_counter()
    settings = [(IN_PROCESS, inprocess())]
    lc = client = None
    if not args.no_cluster:
        lc, client = start_cluster()
        where = set(client.run(daskelastic_dir).values())
        log(f"the workers import daskelastic from {', '.join(sorted(where))}")
        settings.append((CLUSTER, dict(backend="dask", client=client)))
    recs, refs, shapes = [], [], {}
    try:
        parts = [("flights", lambda: FlightsLogistic(args.n_rows), args.Cs),
                 ("diamonds", DiamondsLasso, args.alphas)]
        for name, load, values in parts:
            if args.only not in (None, name):
                continue
            problem = load()
            shapes[name] = (f"{problem.n:,} × {problem.d} "
                                 f"({'CSR' if name == 'flights' else 'dense'})")
            r, lines = run_problem(problem, values, problem.settings(settings), args.repeats,
                                   log)
            recs += r
            refs += lines
    finally:
        if client is not None:
            client.close()
            lc.close()
    write_report(args, shapes, recs, refs, env, time.perf_counter() - t_start, log)


if __name__ == "__main__":
    main()
