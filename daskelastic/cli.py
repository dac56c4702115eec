"""Command line: ``python -m daskelastic demo``, ``fit DATA`` and ``predict MODEL DATA``.

``demo`` fits a logistic regression on a real table (327,346 NYC flights of
2013, one-hot encoded: will a flight arrive more than 15 minutes late?) on a
LocalCluster started for it, and prints the dashboard page, the rounds, the
certified duality gap and the test accuracy.

``fit`` trains a model on a CSV, Parquet or svmlight file::

    python -m daskelastic fit flights.parquet --model logistic --target late \\
        --C 0.1 --workers 4 --output model.joblib --history history.csv

Numeric columns are standardised (the fit's mean and standard deviation;
``--no-scale`` uses them as they are); text, categorical and boolean columns
are one-hot encoded (``column=value``), in the order of the table.  The model
keeps that encoding (:class:`TableEncoding`, its ``table_encoding_``) and
``predict`` applies it to new rows::

    python -m daskelastic predict model.joblib new_flights.parquet --output predictions.csv

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

__all__ = ["main", "build_parser", "TableEncoding"]

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
                    "boolean columns are one-hot encoded (column=value); the model keeps "
                    "the encoding, for predict. The model is saved with the estimator's "
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
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        register_dashboard(client)
        print(f"cluster: {len(client.scheduler_info()['workers'])} workers; watch the fit "
              f"at {dashboard_link(client)}", flush=True)
        clf = de.LogisticRegression(C=args.C, tol=args.tol, max_iter=args.max_iter,
                                    client=client, verbose=args.verbose)
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
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.utils._param_validation import InvalidParameterError

    import daskelastic as de

    fmt = _check_fit_options(args)
    X, y, features, encoding = read_table(args.data, fmt=fmt, target=args.target,
                                          drop=args.drop, scale=not args.no_scale)
    est = getattr(de, MODELS[args.model])(
        tol=args.tol, max_iter=args.max_iter, fit_intercept=not args.no_intercept,
        random_state=args.random_state, verbose=0 if args.quiet else 1)
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
    scaled = f"; {len(encoding.numeric)} numeric columns standardised" \
        if encoding is not None and encoding.means is not None and encoding.numeric else ""
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
        except InvalidParameterError as e:  # e.g. an unknown straggler policy
            raise _UsageError(str(e)) from None
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
    print(f"fit: {type(est).__name__} {ended} after {est.n_iter_[0]} rounds on "
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

        if encoding is not None:
            est.table_encoding_ = encoding   # for ``predict``
        joblib.dump(est, args.output)
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
    if args.C is not None and args.C <= 0:
        raise _UsageError("--C must be positive")
    if args.alpha is not None and args.alpha <= 0:
        raise _UsageError("--alpha must be positive")
    if args.alpha is not None and args.model != "ridge":
        raise _UsageError("--alpha applies to --model ridge; use --C")
    if args.alpha is not None and args.C is not None:
        raise _UsageError("give --alpha or --C, not both")
    if args.loss is not None and args.model != "linearsvc":
        raise _UsageError("--loss applies to --model linearsvc")
    if args.tol < 0:
        raise _UsageError("--tol must be non-negative")
    if args.max_iter < 1:
        raise _UsageError("--max-iter must be at least 1")
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
    """Read a table for ``fit``: the features, the target and the feature names.

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
        Standardise the numeric columns of a CSV or Parquet table (see
        :class:`TableEncoding`); svmlight files are read as they are.

    Returns
    -------
    X : ndarray or scipy.sparse.csr_matrix
        Dense when every feature is numeric; CSR with one-hot columns.
    y : ndarray
    names : list of str
    encoding : TableEncoding or None
        How the features were made (None for svmlight).
    """
    if fmt == "svmlight":
        from sklearn.datasets import load_svmlight_file

        try:
            X, y = load_svmlight_file(path)
        except (OSError, ValueError) as e:
            raise _UsageError(f"cannot read {path} as svmlight: {e}") from None
        return X, y, [f"x{j}" for j in range(X.shape[1])], None
    frame = _read_frame(path, fmt)
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
    features = frame.drop(columns=[target, *drop])
    if features.shape[1] == 0:
        raise _UsageError(f"{path} has no feature columns left")
    encoding = TableEncoding.from_frame(features, ignored=[target, *drop], scale=scale)
    try:
        X = encoding.transform(features)
    except ValueError as e:
        raise _UsageError(f"{path}: {e}") from None
    return X, y.to_numpy(), encoding.feature_names, encoding


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


class TableEncoding:
    """How ``fit`` made features of a table's columns, to make the same of new rows.

    Numeric columns are standardised with the means and standard deviations
    of the rows the encoding was made from (or used as they are, without
    them); the other columns are one-hot encoded (``column=value``) with the
    values seen then, in sorted order, by scikit-learn's ``OneHotEncoder`` as
    the estimators encode a dataframe's categorical columns (see
    :mod:`daskelastic.encoding`; here booleans are categories too, and every
    value is read as text).  A value not seen then sets no feature.

    Standardising matters to the fit, not only to the coefficients' scale:
    CoCoA+ converges at a rate set by the rows' norms, and raw columns such
    as prices or ids, thousands of times larger than the one-hot features
    and the intercept, can leave it far from the optimum after hundreds of
    rounds.

    Parameters
    ----------
    numeric : list of str
        The numeric columns.
    categorical : list of str
        The one-hot encoded columns.
    categories : list of list of str
        The values of each categorical column.
    ignored : list of str, optional
        Columns of the fit's table that were not features (the target,
        dropped columns); :meth:`transform` ignores them when present.
    means, scales : list of float, optional
        For each numeric column, the value subtracted and the one divided
        by; both None (the default) to use the columns as they are.

    Examples
    --------
    >>> import pandas as pd
    >>> from daskelastic.cli import TableEncoding
    >>> fit_rows = pd.DataFrame({"age": [30, 41], "city": ["Rome", "Oslo"]})
    >>> enc = TableEncoding.from_frame(fit_rows)
    >>> enc.feature_names, enc.means, enc.scales
    (['age', 'city=Oslo', 'city=Rome'], [35.5], [5.5])
    >>> new_rows = pd.DataFrame({"city": ["Rome", "Paris"], "age": [52, 19]})
    >>> enc.transform(new_rows).toarray()   # Paris was not seen: no city feature
    array([[ 3.,  0.,  1.],
           [-3.,  0.,  0.]])
    >>> TableEncoding.from_frame(fit_rows, scale=False).transform(new_rows).toarray()
    array([[52.,  0.,  1.],
           [19.,  0.,  0.]])
    """

    # Models saved before numeric columns were standardised unpickle without
    # these attributes: None uses their columns as they are, as their fit did.
    means = None
    scales = None

    def __init__(self, numeric, categorical, categories, ignored=(), means=None,
                 scales=None):
        self.numeric = [str(c) for c in numeric]
        self.categorical = [str(c) for c in categorical]
        # (distinct, in the order given: the order of feature_names)
        self.categories = [list(dict.fromkeys(str(v) for v in values))
                           for values in categories]
        self.ignored = [str(c) for c in ignored]
        self.means = None if means is None else [float(v) for v in means]
        self.scales = None if scales is None else [float(v) for v in scales]
        if len(self.categories) != len(self.categorical):
            raise ValueError("one list of categories per categorical column")
        if (self.means is None) != (self.scales is None):
            raise ValueError("give both means and scales, or neither")
        if self.means is not None and not (
                len(self.means) == len(self.scales) == len(self.numeric)):
            raise ValueError("one mean and one scale per numeric column")

    @classmethod
    def from_frame(cls, features, ignored=(), scale=True):
        """The encoding of a table's feature columns.

        Parameters
        ----------
        features : pandas.DataFrame
            The feature columns.
        ignored : list of str, optional
            Columns that are not features.
        scale : bool, default=True
            Standardise the numeric columns: subtract their mean, divide by
            their standard deviation (that of the population, as
            scikit-learn's ``StandardScaler``).  A constant column gets the
            scale 1, so it is 0 in these rows and its shift from the
            constant in new rows.

        Returns
        -------
        TableEncoding
            Numeric columns standardised (or as they are), the others one-hot.
        """
        import numpy as np
        import pandas as pd

        numeric = [c for c in features.columns
                   if pd.api.types.is_numeric_dtype(features[c])
                   and not pd.api.types.is_bool_dtype(features[c])]
        categorical = [c for c in features.columns if c not in numeric]
        categories = [sorted(set(_as_text(features[c]))) for c in categorical]
        means = scales = None
        if scale:
            values = features[numeric].to_numpy(dtype=np.float64, na_value=np.nan)
            means, scales = _standardisation(values.reshape(len(features), len(numeric)))
        return cls(numeric, categorical, categories, ignored, means, scales)

    @property
    def feature_names(self):
        """``column`` for a numeric feature, ``column=value`` for a one-hot one."""
        return self.numeric + [f"{c}={v}" for c, values in
                               zip(self.categorical, self.categories) for v in values]

    def transform(self, frame):
        """The features of ``frame``'s rows.

        Parameters
        ----------
        frame : pandas.DataFrame
            Rows with (at least) the encoding's columns, in any order.

        Returns
        -------
        ndarray or scipy.sparse.csr_matrix
            Dense float64 when every feature is numeric; CSR otherwise.

        Raises
        ------
        ValueError
            On a missing column, a column the encoding did not see, or a
            numeric column with missing or non-numeric values.
        """
        import numpy as np
        import pandas as pd
        import scipy.sparse as sp

        frame = frame.rename(columns=str)
        missing = [c for c in self.numeric + self.categorical if c not in frame.columns]
        if missing:
            raise ValueError(f"missing column(s) {', '.join(map(repr, missing[:10]))}")
        extra = self.unknown_columns(frame)
        if extra:
            raise ValueError(f"column(s) {', '.join(map(repr, extra[:10]))} were not "
                             "features of the fit: drop them first")
        bad = [c for c in self.numeric if not pd.api.types.is_numeric_dtype(frame[c])
               or pd.api.types.is_bool_dtype(frame[c])]
        if bad:
            raise ValueError(f"numeric column(s) {', '.join(map(repr, bad[:10]))} hold "
                             "other values")
        nan_cols = [c for c in self.numeric if frame[c].isna().any()]
        if nan_cols:
            raise ValueError(f"missing values in {', '.join(map(repr, nan_cols[:10]))}: "
                             "drop or fill them first")
        n = len(frame)
        dense = frame[self.numeric].to_numpy(dtype=np.float64).reshape(n, len(self.numeric))
        inf_cols = [c for c, ok in zip(self.numeric, np.isfinite(dense).all(axis=0)) if not ok]
        if inf_cols:
            raise ValueError(f"infinite values in {', '.join(map(repr, inf_cols[:10]))}")
        if self.means is not None:
            dense = (dense - np.asarray(self.means)) / np.asarray(self.scales)
        if not self.categorical:
            return np.ascontiguousarray(dense)
        from .encoding import encode_frame

        onehot = encode_frame(self._one_hot_encoder(), frame[self.categorical])
        return sp.hstack([sp.csr_matrix(dense), onehot], format="csr")

    def _one_hot_encoder(self):
        """scikit-learn's one-hot encoder of the categorical columns' text, as the
        estimators encode a dataframe's (:mod:`daskelastic.encoding`); made once."""
        from .encoding import fit_frame_encoder

        encoder = self.__dict__.get("_encoder")
        if encoder is None:
            encoder = fit_frame_encoder(self.categorical,
                                        dict(zip(self.categorical, self.categories)),
                                        prepare=_text_columns, ordered=True)
            self.__dict__["_encoder"] = encoder
        return encoder

    def __getstate__(self):
        # the encoder is remade from the categories (models saved before it
        # existed have only those)
        return {k: v for k, v in self.__dict__.items() if k != "_encoder"}

    def unseen_values(self, X):
        """Rows per categorical column whose value the encoding never saw.

        Such a value sets none of the column's features; a column whose
        values were all unseen often means the new table stores it with
        another type (``1``/``0`` for ``True``/``False``, say).

        Parameters
        ----------
        X : scipy.sparse.csr_matrix
            Rows made by :meth:`transform` (read off its one-hot blocks: no
            second pass over the table).

        Returns
        -------
        dict of str to int
            ``{column: rows}`` for the columns with unseen values.
        """
        out, start = {}, len(self.numeric)
        for c, values in zip(self.categorical, self.categories):
            unseen = int((X[:, start:start + len(values)].getnnz(axis=1) == 0).sum())
            if unseen:
                out[c] = unseen
            start += len(values)
        return out

    def unknown_columns(self, frame):
        """Columns of ``frame`` that are neither features nor ignored columns.

        Parameters
        ----------
        frame : pandas.DataFrame
            A table.

        Returns
        -------
        list of str
            Their names, in the table's order.
        """
        known = set(self.numeric) | set(self.categorical) | set(self.ignored)
        return [str(c) for c in frame.columns if str(c) not in known]

    def __repr__(self):
        scaled = "" if self.means is None else " standardised"
        return (f"TableEncoding({len(self.numeric)}{scaled} numeric, "
                f"{len(self.categorical)} one-hot columns, {len(self.feature_names)} "
                "features)")


def _standardisation(values):
    """The means and scales that standardise the columns of ``values``.

    Parameters
    ----------
    values : ndarray of shape (n_rows, n_columns)

    Returns
    -------
    means, scales : ndarray of shape (n_columns,)
        The columns' means and population standard deviations; for a
        constant column its value and 1 (exactly: a mean computed in
        floating point would leave it a rounding error away from 0, and a
        standard deviation of that error would blow it up).  Columns that
        are not finite get garbage: :meth:`TableEncoding.transform` refuses
        them.
    """
    import numpy as np

    n, d = values.shape
    if n == 0:
        return np.zeros(d), np.ones(d)
    with np.errstate(invalid="ignore", over="ignore"):
        # in units of each column's largest magnitude: the squares of values
        # beyond 1e154 overflow float64
        top = np.abs(values).max(axis=0)
        top[~(np.isfinite(top) & (top > 0))] = 1.0
        means = (values / top).mean(axis=0) * top
        scales = (values / top).std(axis=0) * top
    constant = values.min(axis=0) == values.max(axis=0)
    means[constant] = values[0, constant]
    scales[constant] = 1.0
    return means, scales


# -- predict --------------------------------------------------------------------------
def _predict(args):
    import joblib
    import pandas as pd

    fmt = _format_of(args.data, args.format)
    if args.output is not None:
        if Path(args.output).suffix.lower() not in (".csv", ".parquet"):
            raise _UsageError("--output must end in .csv or .parquet")
        if not Path(args.output).resolve().parent.is_dir():
            raise _UsageError(f"--output: the folder of {args.output!r} does not exist")
    try:
        model = joblib.load(args.model)
    except Exception as e:  # noqa: BLE001 - unpickling errors of every kind
        raise _UsageError(f"cannot read the model {args.model}: {type(e).__name__}: "
                          f"{e}") from None
    if not (hasattr(model, "coef_") and hasattr(model, "predict")):
        raise _UsageError(f"{args.model} holds no fitted daskelastic model")
    encoding = getattr(model, "table_encoding_", None)
    if fmt == "svmlight":
        if encoding is not None:
            # its features are the encoding's, not the columns of an svmlight file
            raise _UsageError(f"{args.model} was fitted on a CSV or Parquet table: give it "
                              f"a table of the fit's columns, not the svmlight file "
                              f"{args.data}")
        from sklearn.datasets import load_svmlight_file

        try:
            X, _ = load_svmlight_file(args.data, n_features=model.n_features_in_)
        except (OSError, ValueError) as e:
            raise _UsageError(f"cannot read {args.data} as svmlight with "
                              f"{model.n_features_in_} features: {e}") from None
    else:
        if encoding is None:
            raise _UsageError(f"{args.model} was not fitted on a CSV or Parquet table by "
                              "'fit': it has no column encoding")
        frame = _read_frame(args.data, fmt).rename(columns=str)
        if len(frame) == 0:
            raise _UsageError(f"{args.data} has no rows")
        extra = encoding.unknown_columns(frame)
        if extra:
            print(f"note: ignoring column(s) {', '.join(map(repr, extra[:10]))}"
                  f"{', ...' if len(extra) > 10 else ''}: not features of the fit",
                  file=sys.stderr)
            frame = frame.drop(columns=extra)
        try:
            X = encoding.transform(frame)
        except ValueError as e:
            raise _UsageError(f"{args.data}: {e}") from None
        for column, rows in encoding.unseen_values(X).items():
            print(f"note: {column!r}: {rows:,} of {len(frame):,} rows hold a value the fit "
                  "never saw (it sets no feature)", file=sys.stderr)
    if X.shape[0] == 0:
        raise _UsageError(f"{args.data} has no rows")
    try:
        out = pd.DataFrame({"prediction": model.predict(X)})
        if hasattr(model, "predict_proba"):
            proba = model.predict_proba(X)
            for j, label in enumerate(model.classes_):
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
