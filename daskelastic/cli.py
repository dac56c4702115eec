"""Command line: ``python -m daskelastic demo``, ``fit DATA`` and ``predict MODEL DATA``.

``demo`` fits a logistic regression on a real table (327,346 NYC flights of
2013, one-hot encoded: will a flight arrive more than 15 minutes late?) on a
LocalCluster started for it, and prints the dashboard page, the rounds, the
certified duality gap and the test accuracy.

``fit`` trains a model on a CSV, Parquet or svmlight file::

    python -m daskelastic fit flights.parquet --model logistic --target late \\
        --C 0.1 --workers 4 --output model.joblib --history history.csv

Numeric columns are standardised (scikit-learn's ``StandardScaler``: the
fit's mean and standard deviation; ``--no-scale`` uses them as they are); text,
categorical and boolean columns are one-hot encoded (``OneHotEncoder``,
``column=value``); missing or infinite numbers are refused.  The model file
holds a scikit-learn pipeline, ``Pipeline([("encode", ColumnTransformer(...)),
("model", estimator)])``, and ``predict`` applies it to new rows (in Python,
``joblib.load("model.joblib").predict(frame)``)::

    python -m daskelastic predict model.joblib new_flights.parquet --output predictions.csv

A fit on an svmlight file saves ``Pipeline([("encode", "passthrough"), ("model",
estimator)])``; ``predict`` also reads a bare fitted estimator as a model of
svmlight features.  Model files written before ``fit`` saved pipelines, which
kept a table's encoding in the estimator (``table_encoding_``), cannot be read:
``predict`` says to fit them again.

Bad options and unreadable files end the command with a message and exit
status 2; a fit that fails, or that stops at ``--max-iter`` with a relative
duality gap of 1 or more or an objective no better than ``w = 0``'s (a model
that means nothing, still written for inspection), with status 1.  A standard output closed early
(``predict ... | head``) ends the command quietly with status 141, as it
does a Unix tool killed by SIGPIPE.
"""

import argparse
import contextlib
import logging
import os
import sys
import time
import warnings
from pathlib import Path

__all__ = ["main", "build_parser"]

MODELS = {"logistic": "LogisticRegression", "linearsvc": "LinearSVC", "ridge": "Ridge"}
FORMATS = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".parquet": "parquet",
           ".pq": "parquet", ".svm": "svmlight", ".svmlight": "svmlight",
           ".libsvm": "svmlight"}
HISTORY_FORMATS = (".csv", ".parquet", ".json")


class _UsageError(Exception):
    """A problem with the options or the input files: exit status 2."""


def build_parser():
    """The argument parser of ``python -m daskelastic``.

    Returns
    -------
    argparse.ArgumentParser
        With the ``demo``, ``fit`` and ``predict`` subcommands.
    """
    parser = argparse.ArgumentParser(prog="python -m daskelastic",
                                     description="Elastic CoCoA+ training on Dask.")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="fit a real table on an embedded LocalCluster")
    demo.add_argument("--workers", type=int, default=2, help="worker processes (2)")
    demo.add_argument("--rows", type=int, default=None,
                      help="use only this many rows, the first of the table (all)")
    demo.add_argument("--C", type=float, default=0.1, help="inverse regularisation (0.1)")
    demo.add_argument("--tol", type=float, default=1e-3, help="relative duality gap (1e-3)")
    demo.add_argument("--max-iter", type=int, default=500, help="rounds at most (500)")
    demo.add_argument("--verbose", type=int, default=0,
                      help="1: a progress bar, 2: a line per round")

    fit = sub.add_parser(
        "fit", help="fit a model on a CSV, Parquet or svmlight file",
        description="Fit a daskelastic model on a table and save it with joblib. Numeric "
                    "columns are standardised (unless --no-scale); text, categorical and "
                    "boolean columns are one-hot encoded (column=value). The model file "
                    "holds a scikit-learn Pipeline (that encoding, a ColumnTransformer, "
                    "then the estimator) for predict; the estimator is saved with its "
                    "defaults for where and how loudly it fits (client=None, "
                    "backend='auto', verbose=0), so that a refit in Python runs where a "
                    "new estimator would, not on the cluster of this fit. Exit status 1 "
                    "when the fit fails, or stops at --max-iter with a relative duality "
                    "gap of 1 or more or an objective no better than w = 0's (the model "
                    "is still written).")
    _add_data_arguments(fit)
    fit.add_argument("--model", choices=sorted(MODELS), default="logistic",
                     help="logistic regression, linear SVM or ridge regression (logistic)")
    fit.add_argument("--target", help="the column to predict (CSV and Parquet)")
    fit.add_argument("--drop", action="append", default=[], metavar="COL",
                     help="a column not to use as a feature (repeatable)")
    fit.add_argument("--no-scale", action="store_true",
                     help="use numeric columns as they are, not standardised to mean 0 "
                          "and standard deviation 1 (CSV and Parquet)")
    fit.add_argument("--C", type=float, default=None,
                     help="inverse regularisation strength (1.0; ridge: alpha = 1/C)")
    fit.add_argument("--alpha", type=float, default=None,
                     help="ridge regularisation strength (1.0)")
    fit.add_argument("--loss", choices=["squared_hinge", "hinge"], default=None,
                     help="linearsvc loss (squared_hinge)")
    fit.add_argument("--tol", type=float, default=1e-4,
                     help="relative duality gap to reach (1e-4)")
    fit.add_argument("--max-iter", type=int, default=200, help="rounds at most (200)")
    fit.add_argument("--no-intercept", action="store_true", help="fit no intercept")
    fit.add_argument("--penalize-intercept", action="store_true",
                     help="penalise the intercept like a coefficient (liblinear's problem; "
                          "linearsvc's always): fewer rounds on sparse one-hot columns. "
                          "By default it is free, as scikit-learn's")
    fit.add_argument("--solver", choices=["auto", "newton", "cholesky", "cocoa"],
                     default="auto",
                     help="newton (logistic, linearsvc) or cholesky (ridge) on narrow "
                          "tables, cocoa's rounds, or auto: the estimators' choice (auto)")
    fit.add_argument("--straggler-policy", default=None,
                     help="how rounds treat slow workers (the estimators' straggler_policy)")
    fit.add_argument("--random-state", type=int, default=None, help="seed of the fit")
    where = fit.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=None,
                       help="start a LocalCluster of this many worker processes")
    where.add_argument("--scheduler", default=None, metavar="ADDR",
                       help="fit on the Dask cluster of this scheduler (tcp://host:8786)")
    fit.add_argument("--output", "-o", default=None, metavar="PATH",
                     help="write the fitted model here (joblib)")
    fit.add_argument("--history", default=None, metavar="PATH",
                     help="write the rounds here (.csv, .parquet or .json)")
    fit.add_argument("--quiet", "-q", action="store_true", help="no progress bar")

    pred = sub.add_parser(
        "predict", help="predict with a model written by fit",
        description="Apply a model written by 'fit --output' to a file of the format it "
                    "was fitted on. A table's columns are encoded as they were for the fit "
                    "(standardised with the fit's means and standard deviations; a "
                    "category not seen then sets no feature; other columns, such as the "
                    "target, are ignored).")
    pred.add_argument("model", help="the model file written by fit --output")
    _add_data_arguments(pred)
    pred.add_argument("--output", "-o", default=None, metavar="PATH",
                      help="write the predictions here (.csv or .parquet; by default CSV "
                           "on standard output)")
    parser.subcommands = {"demo": demo, "fit": fit, "predict": pred}
    return parser


def _add_data_arguments(parser):
    """The data file and its ``--format``, shared by ``fit`` and ``predict``."""
    parser.add_argument("data",
                        help="the table: .csv/.tsv, .parquet or .svm/.svmlight/.libsvm")
    parser.add_argument("--format", choices=sorted(set(FORMATS.values())),
                        help="the file's format (by default from its extension)")


def main(argv=None):
    """Run the ``daskelastic`` command line.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (``sys.argv[1:]`` by default).

    Returns
    -------
    int
        The exit status: 0; 1 when a fit failed or ended with a relative
        duality gap of 1 or more or an objective no better than ``w = 0``'s;
        141 when standard output was closed early
        (``parser.error`` exits with 2 on bad options and unreadable files).

    Examples
    --------
    >>> from daskelastic.cli import main
    >>> try:
    ...     main(["fit", "no-such-table.csv", "--target", "late"])
    ... except SystemExit as e:
    ...     print("exit status", e.code)
    exit status 2
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            _check_demo(args)
            status = _demo(args)
        elif args.command == "predict":
            status = _predict(args)
        else:
            status = _fit(args)
        sys.stdout.flush()   # a closed pipe shows here, not at the interpreter's exit
        return status
    except _UsageError as e:
        parser.subcommands[args.command].error(str(e))
    except BrokenPipeError:
        if not _stdout_closed():   # another pipe (a socket, a worker's): a failure
            raise
        # The reader stopped reading (``predict ... | head``): no traceback.  The
        # interpreter flushes stdout once more at exit; pointing it at devnull
        # keeps that flush from raising again.  141 is what a shell reports for
        # a Unix tool killed by SIGPIPE (128 + 13).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _stdout_closed():
    """Whether standard output is a pipe whose reader has gone (POLLERR on its end)."""
    try:
        import select

        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poll.poll(0))
    except (AttributeError, ValueError, OSError):   # no poll, or no real file
        return False


# -- demo -----------------------------------------------------------------------------
def _check_demo(args):
    for name in ("workers", "max_iter", "rows"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise _UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if args.verbose < 0:
        raise _UsageError("--verbose must be at least 0")
    # written so that NaN fails too
    if not 0 < args.C < float("inf"):
        raise _UsageError("--C must be positive and finite")
    if not args.tol >= 0:
        raise _UsageError("--tol must be non-negative")


def _compile_ahead(estimator, X, y, n_rows=2_000):
    """Start a fit of ``X[:n_rows]`` in this process on a thread; return the thread.

    The same estimator on the same kind of input calls the same kernels with
    the same argument types as the workers' fit, so it compiles them into
    numba's cache (*Notes on Caching*) while the cluster starts; the workers
    then load them instead of each compiling its own copy.  One round (a
    ``tol`` that any gap meets) over half the rows: a round cut short, as a
    preempted straggler's is, also takes the gap of the rows it did not visit
    (``gap_sums_chunk``).  Failures are left to the real fit.
    """
    import threading

    from sklearn.base import clone

    def run():
        with contextlib.suppress(Exception):
            X_few, y_few = X[:n_rows], y[:n_rows]
            clone(estimator).set_params(
                backend="inprocess", client=None, verbose=0, tol=1e300, max_iter=1,
                local_steps=max(1, X_few.shape[0] // 2)).fit(X_few, y_few)

    thread = threading.Thread(target=run, name="daskelastic-compile-ahead", daemon=True)
    thread.start()
    return thread


def _demo(args):
    import numpy as np
    from distributed import Client, LocalCluster

    import daskelastic as de
    from daskelastic.datasets import load_flights
    from daskelastic.monitoring import dashboard_link, register_dashboard

    t0 = time.perf_counter()
    X, y, names = load_flights(n_rows=args.rows)
    rng = np.random.default_rng(0)
    test = rng.random(X.shape[0]) < 0.2
    X_train, y_train, X_test, y_test = X[~test], y[~test], X[test], y[test]
    print(f"data: {X.shape[0]:,} flights × {X.shape[1]:,} one-hot features "
          f"({X.nnz:,} non-zeros), {y.mean():.1%} late; "
          f"loaded in {time.perf_counter() - t0:.1f}s", flush=True)
    # liblinear's penalised intercept: the one-hot columns are sparse, so not
    # centred, and a free intercept on them takes many more rounds
    clf = de.LogisticRegression(C=args.C, tol=args.tol, max_iter=args.max_iter,
                                penalize_intercept=True, verbose=args.verbose)
    compiling = _compile_ahead(clf, X_train, y_train)
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        register_dashboard(client)
        print(f"cluster: {len(client.scheduler_info()['workers'])} workers; watch the fit "
              f"at {dashboard_link(client)}", flush=True)
        clf.set_params(client=client)
        compiling.join()
        t1 = time.perf_counter()
        clf.fit(X_train, y_train)
        seconds = time.perf_counter() - t1
    h = clf.history_[-1]
    print(f"fit: {clf.n_iter_[0]} rounds on {h['n_workers']} workers in {seconds:.1f}s")
    print(f"duality gap: {clf.duality_gap_:.2e} (relative; certified bound on the "
          f"primal suboptimality), primal {h['primal']:.6f}")
    print(f"test accuracy: {clf.score(X_test, y_test):.4f} "
          f"(always 'on time': {1 - y_test.mean():.4f})")
    return 0


# -- fit ------------------------------------------------------------------------------
def _fit(args):
    import numpy as np
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.pipeline import Pipeline

    import daskelastic as de

    fmt = _check_fit_options(args)
    X, y, features, encoder = read_table(args.data, fmt=fmt, target=args.target,
                                         drop=args.drop, scale=not args.no_scale)
    est = getattr(de, MODELS[args.model])(
        tol=args.tol, max_iter=args.max_iter, fit_intercept=not args.no_intercept,
        random_state=args.random_state, verbose=0 if args.quiet else 1)
    if args.penalize_intercept:
        est.set_params(penalize_intercept=True)
    if args.solver != "auto":
        est.set_params(solver=args.solver)
    if args.model == "ridge":
        est.set_params(alpha=args.alpha if args.alpha is not None
                       else 1.0 / args.C if args.C is not None else 1.0)
    else:
        est.set_params(C=1.0 if args.C is None else args.C)
    if args.loss is not None:
        est.set_params(loss=args.loss)
    if args.straggler_policy is not None:
        if "straggler_policy" not in est.get_params():
            raise _UsageError("--straggler-policy: this daskelastic has no straggler policies")
        est.set_params(straggler_policy=args.straggler_policy)
    numeric = [] if fmt == "svmlight" or args.no_scale \
        else _encoded_columns(encoder, "numeric")
    scaled = f"; {len(numeric)} numeric columns standardised" if numeric else ""
    print(f"data: {X.shape[0]:,} rows × {X.shape[1]:,} features from {args.data} ({fmt})"
          f"{scaled}", flush=True)
    with _cluster(args) as client:
        if client is not None:
            from daskelastic.monitoring import dashboard_link, register_dashboard

            est.set_params(client=client)
            register_dashboard(client)
            print(f"cluster: {len(client.scheduler_info()['workers'])} workers; watch the "
                  f"fit at {dashboard_link(client)}", flush=True)
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():  # the summary below says it
                warnings.simplefilter("ignore", ConvergenceWarning)
                est.fit(X, y)
        except BrokenPipeError as e:
            if _stdout_closed():   # the progress bar's reader left: main ends quietly
                raise
            print(f"error: the fit failed: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        except Exception as e:  # noqa: BLE001 - reported, with the exit status
            print(f"error: the fit failed: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        seconds = time.perf_counter() - t0
    # the model file should not remember where and how loudly this command fitted it
    defaults = type(est)().get_params()
    est.set_params(**{name: defaults[name] for name in ("client", "backend", "verbose")})
    h = est.history_[-1]
    converged = est.duality_gap_ <= args.tol
    ended = "converged" if converged else \
        f"stopped at --max-iter ({_convergence_advice(args, fmt)})"
    print(f"fit: {type(est).__name__} {ended} after {max(np.ravel(est.n_iter_))} rounds on "
          f"{h['n_workers']} workers in {seconds:.1f}s; relative duality gap "
          f"{est.duality_gap_:.2e}")
    metric = "R²" if args.model == "ridge" else "accuracy"
    print(f"training {metric}: {est.score(X, y):.4f}", flush=True)
    # (P - D) / P ≥ 1: the certified bound on the suboptimality is the
    # objective itself (the optimum is ≥ 0), so the coefficients can be
    # anything; nor is a model worth keeping whose objective is no better than
    # w = 0's (the first round's).  Written "not <" so that NaN counts too.
    primal, start = h["primal"], est.history_[0]["primal"]
    meaningless = not converged and (not est.duality_gap_ < 1.0 or not primal < start)
    if meaningless:
        why = (f"a relative duality gap of {est.duality_gap_:.3g} certifies nothing"
               if not est.duality_gap_ < 1.0 else
               f"its objective {primal:.3g} is no better than w = 0's {start:.3g}")
        print(f"warning: the fit stopped at --max-iter and {why}: the model's "
              f"predictions mean nothing (written only for inspection; exit status 1); "
              f"{_convergence_advice(args, fmt, meaningless=True)}", file=sys.stderr)
    if args.output:
        import joblib

        # fitted step by step above, so that the estimator's fit ran on the
        # cluster with its progress bar; the pipeline is what ``predict`` applies
        joblib.dump(Pipeline([("encode", encoder), ("model", est)]), args.output)
        print(f"model: {args.output} ({len(features)} features: "
              f"{', '.join(features[:5])}{', ...' if len(features) > 5 else ''})")
    if args.history:
        _write_history(est, args.history)
        print(f"history: {args.history} ({len(est.history_)} rounds)")
    # still written, for inspection, but a script's next step should not use it
    return 1 if meaningless else 0


def _convergence_advice(args, fmt, meaningless=False):
    """What may get a fit that stopped at ``--max-iter`` to converge."""
    regularise = "a higher --alpha" if args.model == "ridge" and args.C is None \
        else "a lower --C"
    advice = ["raise --max-iter"] if meaningless else ["raise --max-iter or --tol"]
    if fmt == "svmlight":
        advice.append("scale the file's features")
    elif args.no_scale:
        advice.append("fit without --no-scale")
    advice.append(f"regularise more ({regularise})")
    return ", ".join(advice[:-1]) + ", or " + advice[-1]


def _check_fit_options(args):
    """Check the options against each other; return the data's format."""
    from .policies import STRAGGLER_POLICIES

    # written so that NaN fails too (the estimators' own checks would fail
    # the fit with status 1, after reading the data)
    if args.C is not None and not args.C > 0:
        raise _UsageError("--C must be positive")
    if args.alpha is not None and not args.alpha > 0:
        raise _UsageError("--alpha must be positive")
    if args.alpha is not None and args.model != "ridge":
        raise _UsageError("--alpha applies to --model ridge; use --C")
    if args.alpha is not None and args.C is not None:
        raise _UsageError("give --alpha or --C, not both")
    if args.loss is not None and args.model != "linearsvc":
        raise _UsageError("--loss applies to --model linearsvc")
    if args.solver == "newton" and args.model == "ridge":
        raise _UsageError("--solver newton applies to logistic and linearsvc; ridge's "
                          "exact solver is cholesky")
    if args.solver == "cholesky" and args.model != "ridge":
        raise _UsageError("--solver cholesky applies to --model ridge; use newton")
    if not args.tol >= 0:
        raise _UsageError("--tol must be non-negative")
    if args.max_iter < 1:
        raise _UsageError("--max-iter must be at least 1")
    if args.straggler_policy is not None and args.straggler_policy not in STRAGGLER_POLICIES:
        raise _UsageError(f"--straggler-policy must be one of "
                          f"{', '.join(map(repr, STRAGGLER_POLICIES))}, got "
                          f"{args.straggler_policy!r}")
    if args.workers is not None and args.workers < 1:
        raise _UsageError("--workers must be at least 1")
    fmt = _format_of(args.data, args.format)
    if fmt == "svmlight" and args.target is not None:
        raise _UsageError("--target does not apply to svmlight files: the labels are the "
                          "file's first column")
    if fmt != "svmlight" and args.target is None:
        raise _UsageError(f"--target is required: the column of {args.data} to predict")
    if fmt == "svmlight" and args.drop:
        raise _UsageError("--drop does not apply to svmlight files")
    for option, path in (("--output", args.output), ("--history", args.history)):
        if path is not None and not Path(path).resolve().parent.is_dir():
            raise _UsageError(f"{option}: the folder of {path!r} does not exist")
    if args.history is not None and Path(args.history).suffix.lower() not in HISTORY_FORMATS:
        raise _UsageError(f"--history must end in {', '.join(HISTORY_FORMATS)}")
    return fmt


def _format_of(path, given=None):
    """The format of a data file: ``given``, or from its extension."""
    fmt = given or FORMATS.get("".join(Path(path).suffixes[-2:]).lower()) \
        or FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise _UsageError(f"cannot tell the format of {path!r} from its extension: "
                          f"give --format ({', '.join(sorted(set(FORMATS.values())))})")
    return fmt


def _read_frame(path, fmt):
    """A CSV or Parquet file as a DataFrame (a usage error when unreadable)."""
    import pandas as pd

    try:
        if fmt == "parquet":
            return pd.read_parquet(path)
        sep = "\t" if Path(path).suffix.lower() == ".tsv" else ","
        return pd.read_csv(path, sep=sep)
    except ImportError as e:
        raise _UsageError(f"cannot read {path}: {e}") from None
    except Exception as e:  # noqa: BLE001 - parse errors of every kind
        raise _UsageError(f"cannot read {path} as {fmt}: {type(e).__name__}: {e}") from None


def read_table(path, *, fmt, target=None, drop=(), scale=True):
    """Read a table for ``fit``: the features, the target, their names and the encoder.

    Parameters
    ----------
    path : str
        A CSV, Parquet or svmlight file.
    fmt : {"csv", "parquet", "svmlight"}
        Its format.
    target : str, optional
        The target column (CSV and Parquet).
    drop : list of str
        Columns that are not features.
    scale : bool, default=True
        Standardise the numeric columns of a CSV or Parquet table
        (scikit-learn's ``StandardScaler``); svmlight files are read as
        they are.

    Returns
    -------
    X : ndarray or scipy.sparse.csr_matrix
        Dense when every feature is numeric; CSR with one-hot columns.
    y : ndarray
    names : list of str
        ``column`` for a numeric feature, ``column=value`` for a one-hot one.
    encoder : sklearn.compose.ColumnTransformer or "passthrough"
        Fitted: how ``X`` was made of the table's columns (the first step of
        the pipeline ``fit`` saves); ``"passthrough"`` for svmlight.
    """
    import numpy as np

    if fmt == "svmlight":
        from sklearn.datasets import load_svmlight_file

        try:
            X, y = load_svmlight_file(path)
        except (OSError, ValueError) as e:
            raise _UsageError(f"cannot read {path} as svmlight: {e}") from None
        return X, y, [f"x{j}" for j in range(X.shape[1])], "passthrough"
    frame = _read_frame(path, fmt).rename(columns=str)
    missing = [c for c in [target, *drop] if c not in frame.columns]
    if missing:
        cols = ", ".join(map(str, frame.columns[:20]))
        raise _UsageError(f"{', '.join(map(repr, missing))} not a column of {path} "
                          f"(columns: {cols}{', ...' if frame.shape[1] > 20 else ''})")
    y = frame[target]
    if y.isna().any():
        raise _UsageError(f"the target {target!r} has {int(y.isna().sum())} missing values: "
                          "drop or fill them first")
    if len(frame) == 0:
        raise _UsageError(f"{path} has no rows")
    if not [c for c in frame.columns if c not in {target, *drop}]:
        raise _UsageError(f"{path} has no feature columns left")
    encoder = _table_encoder(frame, ignored=[target, *drop], scale=scale)
    try:
        with np.errstate(over="ignore", invalid="ignore"):   # said just below
            X = encoder.fit_transform(frame)
    except ValueError as e:
        raise _UsageError(f"{path}: {e}") from None
    too_large = _unscalable_columns(encoder)
    if too_large:
        raise _UsageError(f"{path}: column(s) {', '.join(map(repr, too_large[:10]))} are too "
                          "large to standardise (beyond 1e154): rescale them, or give "
                          "--no-scale")
    return X, y.to_numpy(), encoder.get_feature_names_out().tolist(), encoder


def _table_encoder(frame, *, ignored=(), scale=True):
    """How ``fit`` makes features of a table's columns: a ColumnTransformer, unfitted.

    Numeric columns are checked (numbers, none missing or infinite) and
    standardised by scikit-learn's ``StandardScaler`` (or, with ``scale``
    False, used as they are).  Text, categorical and boolean columns are
    one-hot encoded (``column=value``, the values seen in sorted order) by
    ``daskelastic.encoding.one_hot_encoder``, every value read as text
    (:func:`_as_text`); a value not seen then sets no feature.  The
    ``ignored`` columns (the target, dropped columns) are the transformer's
    ``"drop"`` part: optional in new rows.  New rows may hold their columns
    in any order, and other columns, which are ignored.

    Standardising matters to the fit, not only to the coefficients' scale:
    CoCoA+ converges at a rate set by the rows' norms, and raw columns such
    as prices or ids, thousands of times larger than the one-hot features
    and the intercept, can leave it far from the optimum after hundreds of
    rounds.
    """
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, StandardScaler

    from .encoding import one_hot_encoder

    features = [c for c in frame.columns if c not in set(ignored)]
    numeric = [c for c in features if pd.api.types.is_numeric_dtype(frame[c])
               and not pd.api.types.is_bool_dtype(frame[c])]
    categorical = [c for c in features if c not in numeric]
    parts = []
    if numeric:
        numbers = FunctionTransformer(_finite_numbers, feature_names_out="one-to-one")
        parts.append(("numeric", make_pipeline(numbers, StandardScaler()) if scale
                      else numbers, numeric))
    if categorical:
        parts.append(("categorical", one_hot_encoder(prepare=_text_columns), categorical))
    if ignored:
        parts.append(("ignored", "drop", list(dict.fromkeys(ignored))))
    return ColumnTransformer(parts, sparse_threshold=1.0, verbose_feature_names_out=False)


def _finite_numbers(frame):
    """Numeric columns as float64, refused with their names when they hold
    other values, missing values or infinities."""
    import numpy as np
    import pandas as pd

    bad = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])
           or pd.api.types.is_bool_dtype(frame[c])]
    if bad:
        raise ValueError(f"numeric column(s) {', '.join(map(repr, bad[:10]))} hold "
                         "other values")
    nan_cols = [c for c in frame.columns if frame[c].isna().any()]
    if nan_cols:
        raise ValueError(f"missing values in {', '.join(map(repr, nan_cols[:10]))}: "
                         "drop or fill them first")
    values = frame.to_numpy(dtype=np.float64).reshape(len(frame), frame.shape[1])
    inf_cols = [c for c, ok in zip(frame.columns, np.isfinite(values).all(axis=0)) if not ok]
    if inf_cols:
        raise ValueError(f"infinite values in {', '.join(map(repr, inf_cols[:10]))}")
    return values


def _encoded_columns(encoder, part):
    """The columns of the fitted ``encoder``'s part ``part`` (none without it)."""
    return next((list(columns) for name, _, columns in encoder.transformers_
                 if name == part), [])


def _unscalable_columns(encoder):
    """Numeric columns whose standardisation overflowed (values beyond 1e154,
    whose squares float64 cannot hold)."""
    import numpy as np

    step = encoder.named_transformers_.get("numeric")
    scaler = step[-1] if hasattr(step, "steps") else None
    if scaler is None:
        return []
    # an overflowed variance leaves scale_ at 1 (taken for a constant column)
    ok = np.isfinite(scaler.mean_) & np.isfinite(scaler.var_) & np.isfinite(scaler.scale_)
    return [c for c, fine in zip(_encoded_columns(encoder, "numeric"), ok) if not fine]


def _unseen_values(encoder, X):
    """Rows per one-hot column whose value the fit never saw, read off ``X``'s
    one-hot blocks (no second pass over the table): ``{column: rows}``."""
    if "categorical" not in encoder.named_transformers_:
        return {}
    onehot = encoder.named_transformers_["categorical"][-1]
    out, start = {}, encoder.output_indices_["categorical"].start
    for column, values in zip(_encoded_columns(encoder, "categorical"), onehot.categories_):
        unseen = int((X[:, start:start + len(values)].getnnz(axis=1) == 0).sum())
        if unseen:
            out[column] = unseen
        start += len(values)
    return out


def _as_text(column):
    """A column's values as the text of its one-hot features.

    Missing values (NaN, None, NA) are ``"nan"``, and whole-number floats are
    written as integers, so that a column read with blanks (as floats) gets
    the values it had without them.
    """
    import pandas as pd

    if pd.api.types.is_float_dtype(column):
        whole = column.dropna()
        if len(whole) and bool((whole == whole.round()).all()) \
                and bool((whole.abs() < 2**53).all()):
            column = column.astype("Int64")
    values = column.astype(object)
    return values.where(values.notna(), "nan").map(str)


def _text_columns(frame):
    """Each column of ``frame`` as :func:`_as_text` writes it."""
    return frame.apply(_as_text)


# -- predict --------------------------------------------------------------------------
def _load_model(path):
    """The pipeline in a model file written by ``fit``.

    A bare fitted estimator (as ``fit`` wrote for svmlight files before it
    saved pipelines, or one dumped from Python) is read as a model of
    svmlight features.  A model that ``fit`` wrote for a table before it
    saved pipelines (an estimator with a ``table_encoding_``) cannot be read:
    the message says to fit it again.
    """
    import joblib
    from sklearn.pipeline import Pipeline

    try:
        model = joblib.load(path)
    except Exception as e:  # noqa: BLE001 - unpickling errors of every kind
        if "TableEncoding" in str(e):
            raise _UsageError(f"{path} was written by an older 'fit', which kept the "
                              "table's encoding in the estimator: fit it again to save a "
                              "scikit-learn pipeline") from None
        raise _UsageError(f"cannot read the model {path}: {type(e).__name__}: {e}") from None
    if not isinstance(model, Pipeline) and hasattr(model, "coef_"):
        model = Pipeline([("encode", "passthrough"), ("model", model)])
    if not (isinstance(model, Pipeline) and hasattr(model[-1], "coef_")
            and hasattr(model[-1], "predict")):
        raise _UsageError(f"{path} holds no fitted daskelastic model")
    return model


def _predict(args):
    import pandas as pd

    fmt = _format_of(args.data, args.format)
    if args.output is not None:
        if Path(args.output).suffix.lower() not in (".csv", ".parquet"):
            raise _UsageError("--output must end in .csv or .parquet")
        if not Path(args.output).resolve().parent.is_dir():
            raise _UsageError(f"--output: the folder of {args.output!r} does not exist")
    model = _load_model(args.model)
    encoder, estimator = model[0], model[-1]
    if fmt == "svmlight":
        if encoder != "passthrough":
            # its features are the encoding's, not the columns of an svmlight file
            raise _UsageError(f"{args.model} was fitted on a CSV or Parquet table: give it "
                              f"a table of the fit's columns, not the svmlight file "
                              f"{args.data}")
        from sklearn.datasets import load_svmlight_file

        try:
            X, _ = load_svmlight_file(args.data, n_features=estimator.n_features_in_)
        except (OSError, ValueError) as e:
            raise _UsageError(f"cannot read {args.data} as svmlight with "
                              f"{estimator.n_features_in_} features: {e}") from None
    else:
        if encoder == "passthrough":
            raise _UsageError(f"{args.model} was not fitted on a CSV or Parquet table by "
                              "'fit': it has no column encoding")
        frame = _read_frame(args.data, fmt).rename(columns=str)
        if len(frame) == 0:
            raise _UsageError(f"{args.data} has no rows")
        needed = _encoded_columns(encoder, "numeric") + _encoded_columns(encoder,
                                                                         "categorical")
        missing = [c for c in needed if c not in frame.columns]
        if missing:
            raise _UsageError(f"{args.data}: missing column(s) "
                              f"{', '.join(map(repr, missing[:10]))}")
        extra = [c for c in frame.columns if c not in set(encoder.feature_names_in_)]
        if extra:
            print(f"note: ignoring column(s) {', '.join(map(repr, extra[:10]))}"
                  f"{', ...' if len(extra) > 10 else ''}: not features of the fit",
                  file=sys.stderr)
            frame = frame.drop(columns=extra)
        try:
            # the pipeline's own steps, one at a time (as its predict runs
            # them), so that the rows are encoded once for the notes below too
            X = encoder.transform(frame)
        except ValueError as e:
            raise _UsageError(f"{args.data}: {e}") from None
        for column, rows in _unseen_values(encoder, X).items():
            print(f"note: {column!r}: {rows:,} of {len(frame):,} rows hold a value the fit "
                  "never saw (it sets no feature)", file=sys.stderr)
    if X.shape[0] == 0:
        raise _UsageError(f"{args.data} has no rows")
    try:
        out = pd.DataFrame({"prediction": estimator.predict(X)})
        if hasattr(estimator, "predict_proba"):
            proba = estimator.predict_proba(X)
            for j, label in enumerate(estimator.classes_):
                out[f"p({label})"] = proba[:, j]
    except ValueError as e:   # e.g. the model's checks of X
        raise _UsageError(f"cannot predict {args.data}: {e}") from None
    if args.output is None:
        out.to_csv(sys.stdout, index=False)
        return 0
    try:
        if args.output.lower().endswith(".parquet"):
            out.to_parquet(args.output, index=False)
        else:
            out.to_csv(args.output, index=False)
    except (OSError, ImportError) as e:
        raise _UsageError(f"cannot write {args.output}: {type(e).__name__}: {e}") from None
    print(f"predictions: {len(out):,} rows to {args.output}", file=sys.stderr)
    return 0


def _cluster(args):
    if args.workers is None and args.scheduler is None:
        return contextlib.nullcontext(None)
    return _connect(args)


@contextlib.contextmanager
def _connect(args):
    from distributed import Client, LocalCluster

    from . import config

    if args.scheduler is not None:
        try:
            client = Client(args.scheduler, timeout="10s")
        except (OSError, TimeoutError) as e:
            raise _UsageError(f"cannot connect to the scheduler at {args.scheduler}: "
                              f"{e}") from None
        with client:
            yield client
        return
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=config.get("dashboard-address"),
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        yield client


def _write_history(est, path):
    from .monitoring import history_frame

    frame = history_frame(est)
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        frame.to_csv(path)
    elif suffix == ".parquet":
        frame.to_parquet(path)
    else:
        frame.reset_index().to_json(path, orient="records", indent=1)
