"""scikit-learn estimators trained with distributed CoCoA+.

The estimators validate their input, map scikit-learn's parameters to the
normalised problem (:mod:`daskelastic.objective`), hand the data to a backend
(:mod:`daskelastic.session`) and store the fitted attributes.  They hold no
numerics and submit no futures themselves.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import numbers
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

import numpy as np
import scipy.sparse as sp
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    RegressorMixin,
    _fit_context,  # no public name: it runs the _parameter_constraints checks
    clone,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import (  # no public names exist
    Hidden,
    Interval,
    StrOptions,
)
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,  # no public name: the checks scikit-learn's own fits make
    check_is_fitted,
    column_or_1d,
    validate_data,
)

from . import config
from .backends.simulated import ClusterModel
from .driver import Problem, run_cocoa
from .encoding import (
    categorical_columns,
    encode_frame,
    fit_frame_encoder,
    merge_categories,
    partition_categories,
)
from .losses import loss_code
from .monitoring import FitMonitor, ProgressBar
from .objective import lambda_from_C
from .placement import make_chunks, split_rows
from .policies import STRAGGLER_POLICIES, StragglerPolicy, make_straggler_policy
from .scaling import SCALING_POLICIES, ScalingPolicy
from .session import BACKENDS, _in_dask_task, client_context, current_client, fit_session
from .targets import TargetEncoder, not_finite

if TYPE_CHECKING:
    from ._typing import ArrayResult, MatrixLike, Self, VectorLike

__all__ = ["LogisticRegression", "LinearSVC", "Ridge", "Lasso", "ElasticNet", "PoissonRegressor"]


def _is_dask_collection(X: object) -> TypeGuard[Any]:
    # (a dask array, dataframe or series: typed Any where it holds)
    try:
        from dask import is_dask_collection
    except ImportError:  # pragma: no cover
        return False
    return is_dask_collection(X)


def _numpy_dtype(dtype):
    """The numpy dtype scikit-learn converts a pandas extension dtype to; None for numpy's.

    Strings become ``object``, nullable integers, floats and booleans
    ``float64`` (``pd.NA`` becoming NaN), a categorical its categories' dtype.

    Examples
    --------
    >>> import pandas as pd
    >>> from daskelastic.estimators import _numpy_dtype
    >>> [_numpy_dtype(pd.Series([1], dtype=t).dtype) for t in ("Int64", "boolean", "string")]
    [dtype('float64'), dtype('float64'), dtype('O')]
    >>> _numpy_dtype(pd.Series([3, 5], dtype="category").dtype), _numpy_dtype(np.dtype("int8"))
    (dtype('int64'), None)
    """
    import pandas as pd

    if isinstance(dtype, pd.CategoricalDtype):
        inner = dtype.categories.dtype
        return _numpy_dtype(inner) or inner
    if isinstance(dtype, np.dtype):
        return None
    if isinstance(dtype, pd.StringDtype) or getattr(dtype, "kind", "O") not in "iufb":
        return np.dtype(object)
    return np.dtype(np.float64)


def _check_numeric(X, categorical=()):
    """Raise, in this process and from metadata alone, for a dask ``X`` that is not numbers.

    A column of another kind would otherwise fail in the workers' load
    tasks, block by block.  With ``categorical`` (the columns to be one-hot
    encoded) it checks the other columns of a pandas or dask dataframe.
    """
    dtypes = getattr(_columns_of(X), "dtypes", None)
    if hasattr(dtypes, "items") and (categorical or _is_dask_collection(X)):
        bad = [(c, t) for c, t in dtypes.items() if c not in categorical
               and (_numpy_dtype(t) or t).kind not in "biuf"]
        if bad:
            raise ValueError(
                "X has columns that are neither numbers nor categories: "
                + ", ".join(f"{c!r} ({t})" for c, t in bad)
                + ". daskelastic one-hot encodes string, object and category columns "
                "and fits numbers: convert these first (a datetime to a number, say)")
    elif getattr(X, "dtype", None) is not None \
            and (_numpy_dtype(X.dtype) or X.dtype).kind not in "biuf":
        raise ValueError(f"X has dtype {X.dtype}: daskelastic fits numeric features")


def _dask_to_array(X, name, lengths=True):
    """A dask array from a dask array/dataframe/series, with known row chunks if ``lengths``.

    Without ``lengths`` nothing is computed (a dataframe's partition lengths
    may stay unknown): enough for blockwise predictions.
    """
    import dask.array as da
    import dask.dataframe as dd

    if isinstance(X, (dd.DataFrame, dd.Series)):
        # pandas extension dtypes become the numpy arrays scikit-learn makes of
        # them: to_dask_array would give object arrays (with a UserWarning),
        # which type_of_target calls "unknown" when they hold numbers
        if isinstance(X, dd.Series):
            plain = _numpy_dtype(X.dtype)
            if plain is not None:
                X = X.astype(plain)
        else:
            plain = {c: _numpy_dtype(t) for c, t in X.dtypes.items()}
            plain = {c: t for c, t in plain.items() if t is not None}
            if plain:
                X = X.astype(plain)
        X = X.to_dask_array(lengths=True if lengths else None)
    if not isinstance(X, da.Array):
        raise TypeError(f"{name}: unsupported dask collection {type(X).__name__}")
    if lengths and any(np.isnan(c) for c in X.chunks[0]):
        X = X.compute_chunk_sizes()
    return X


#: Whether scikit-learn's "balanced" class weights count ``sample_weight``
#: (scikit-learn 1.9 passes it from its liblinear fits); daskelastic does as
#: the installed scikit-learn does, to solve the same problem.
_BALANCED_COUNTS_WEIGHTS = "sample_weight" in inspect.signature(
    compute_class_weight).parameters


def _columns_of(X):
    """What scikit-learn reads feature names from: a dask dataframe's empty pandas
    frame (its ``_meta``), else ``X`` itself."""
    import dask.dataframe as dd

    return X._meta if isinstance(X, dd.DataFrame) else X


def _check_weights(smallest, total):
    """The ``ValueError`` scikit-learn raises for negative sample weights or all 0."""
    if smallest < 0:
        raise ValueError("Negative values in data passed to `sample_weight`")
    if np.isfinite(total) and not total > 0:   # NaN: the load tasks say so
        raise ValueError("Sample weights must contain at least one non-zero number.")


def _no_weight_left():
    """The ``ValueError`` for class and sample weights that give every sample the weight 0."""
    return ValueError("class_weight and sample_weight together give every sample the "
                      "weight 0")


def _check_class_weights(cw, classes, balanced):
    """A ``ValueError`` for class weights no certificate can stand on: negative,
    infinite or NaN (``"balanced"`` with a class of total weight 0), or all 0."""
    bad = [(c, w) for c, w in zip(classes.tolist(), np.asarray(cw, dtype=float).tolist())
           if not (np.isfinite(w) and w >= 0)]
    if bad and balanced:
        raise ValueError(
            "class_weight='balanced' needs a positive total sample weight in every "
            f"class; these classes have none: {[c for c, _ in bad]}")
    if bad:
        raise ValueError("class_weight must be finite and non-negative; got "
                         + ", ".join(f"{c!r}: {w}" for c, w in bad))
    if not np.any(np.asarray(cw) > 0):
        raise ValueError("class_weight gives every class the weight 0")


_Fit = TypeVar("_Fit", bound=Callable[..., Any])


def _validated_fit(fit: _Fit) -> _Fit:
    """scikit-learn's ``_fit_context``: ``_parameter_constraints`` checked before ``fit``.

    Typed, so that type checkers keep ``fit``'s signature.
    """
    return _fit_context(prefer_skip_nested_validation=True)(fit)


class _CoCoABase(BaseEstimator):
    """Shared fit machinery of the CoCoA+ estimators."""

    _parameter_constraints = {
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "fit_intercept": ["boolean"],
        "intercept_scaling": [Interval(numbers.Real, 0, None, closed="neither")],
        "penalize_intercept": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
        "client": [None, object],
        # "simulated" alone is refused in fit, with what to pass instead
        "backend": [StrOptions(set(BACKENDS) - {"simulated"}),
                    Hidden(StrOptions({"simulated"})), ClusterModel],
        "n_workers": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "chunks_per_worker": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "local_steps": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "gamma": [Interval(numbers.Real, 0, 1, closed="right")],
        "sigma": [None, Interval(numbers.Real, 0, None, closed="neither")],
        "acceleration": [StrOptions({"auto", "none"}), None,
                         Interval(numbers.Real, 0, None, closed="left")],
        "straggler_policy": [StrOptions(set(STRAGGLER_POLICIES)), StragglerPolicy],
        "scaling_policy": [None, StrOptions(set(SCALING_POLICIES)), ScalingPolicy],
    }

    _loss: str | None = None  # set by subclasses / from parameters

    # -- pickling: never carry a client ----------------------------------------
    def __sklearn_clone__(self):
        """An unfitted copy with the same parameters, sharing ``client``.

        scikit-learn's ``clone`` (used by ``GridSearchCV``, ``cross_val_score``)
        deep-copies the parameters, and a Dask client cannot be copied: the
        clone uses the same client instead.
        """
        params = self.get_params(deep=False)
        client = params.pop("client")
        new = type(self)(**{k: clone(v, safe=False) for k, v in params.items()},
                         client=client)
        if hasattr(self, "_metadata_request"):
            new._metadata_request = copy.deepcopy(self._metadata_request)
        return new

    def __getstate__(self):
        state = super().__getstate__()
        if state.get("client") is not None:
            # a client cannot travel to another process; the copy remembers
            # it had one, to say so when it fits without (see _fit_holding)
            state = dict(state)
            state["client"] = None
            state["_client_lost"] = True
        return state

    # -- problem construction --------------------------------------------------
    def _C(self):
        return self.C

    def _l1_ratio(self):
        """The L1 part ``ρ`` of the penalty (0: the L2 penalty alone)."""
        return 0.0

    def _penalties(self, n):
        """``(λ, μ)``: the weights of ``½‖w‖²`` and ``‖w‖₁`` in the problem divided by ``C n``."""
        total = lambda_from_C(self._C(), n)
        rho = self._l1_ratio()
        return (1.0 - rho) * total, rho * total

    def _loss_name(self, n_targets=1):
        return self._loss

    def _validate_in_memory(self, X, y, sample_weight, multi_output):
        X, y = validate_data(self, X, y, accept_sparse="csr",
                             dtype=[np.float64, np.float32], order="C",
                             multi_output=multi_output, y_numeric=multi_output,
                             accept_large_sparse=True)
        if sp.issparse(X):
            X.sort_indices()
        sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                             ensure_non_negative=True)
        return X, y, sample_weight

    def _fit(self, X, y, sample_weight=None):
        # dask input's persisted arrays until their blocks are loaded; emptied
        # here whatever happens, also when an error's traceback keeps frames
        # that refer to the list
        held = []
        try:
            return self._fit_holding(X, y, sample_weight, held)
        finally:
            held.clear()

    def _fit_holding(self, X, y, sample_weight, held):
        if self.client is not None:
            from distributed import Client

            if not isinstance(self.client, Client):
                what = type(self.client).__name__
                hint = ("pass Client(cluster)" if hasattr(self.client, "scheduler_address")
                        else "pass Client(address)" if isinstance(self.client, str)
                        else "pass a distributed.Client")
                raise TypeError(f"client must be a distributed.Client or None, got {what}: "
                                f"{hint}")
        status = getattr(self.client, "status", "running")
        if status not in ("running", "connecting"):
            raise ValueError(f"the Dask client is {status}: pass a running client, or "
                             "none to use the current one")
        if self.__dict__.pop("_client_lost", False) and self.client is None \
                and current_client() is None and not _in_dask_task():
            # (in a Dask task, as joblib's Dask backend runs it, fitting in the
            # worker's process is what the user guide describes)
            warnings.warn(
                f"this {type(self).__name__} lost its Dask client when it was pickled "
                "(e.g. sent to a joblib process by GridSearchCV or cross_validate with "
                "n_jobs): it fits without the cluster, in this process. To search on "
                "the cluster, run the search under joblib's Dask backend (with "
                "joblib.parallel_backend('dask'): ...) or with threads and the client "
                "(with joblib.parallel_backend('threading'): ...); see the user guide, "
                "'Hyper-parameter searches'", UserWarning, stacklevel=3)
        simulated = self._cluster_model() is not None
        rho = self._l1_ratio()
        # an L1 part leaves the intercept free, as scikit-learn's saga and Lasso do
        free = self.fit_intercept and (not self.penalize_intercept or rho > 0)
        with client_context(self.client):
            X, frame_encoder, columns_in = self._encode_categories(X)
        dask_input = _is_dask_collection(X)
        if dask_input and simulated:
            raise ValueError("a simulated backend (backend=ClusterModel(...)) needs "
                             "in-memory input, not a dask collection")
        if dask_input:
            with client_context(self.client):
                X, y, sample_weight, encoder, dask_centre = self._prepare_dask(
                    X, y, sample_weight, held, centre=free)
            n, d = X.shape
            n_values = n * d
        else:
            X, y, sample_weight = self._validate_in_memory(
                X, y, sample_weight, multi_output=not self._is_classifier())
            encoder = self._make_encoder(y, sample_weight)
            Y, sw = encoder.encode(y, sample_weight)
            n, d = X.shape
            n_values = X.nnz if sp.issparse(X) else X.size
        loss = self._loss_name(encoder.n_targets)
        centre = dask_centre if dask_input else None
        if free and not rho and not dask_input and sp.issparse(X) \
                and n * d <= _DENSE_FOR_CENTRING:
            # centring needs dense columns: a small sparse table is made so.
            # (Not with an L1 part: its rounds barely depend on the centring,
            # and a dense one-hot table costs each of them its width.)
            X = X.toarray()
        if free and not dask_input and not sp.issparse(X) and n:
            # a free intercept moves between rounds, and crawls when the
            # columns are far from centred: fit b' = b + μ·w on X − μ (the same
            # objective; scikit-learn's _preprocess_data centres so)
            centre = np.average(X, axis=0, weights=sw if sw.sum() > 0 else None)
            # (the values subtracted, in X's dtype, map the intercept back)
            centre = centre.astype(X.dtype).astype(np.float64)
            X = X - centre.astype(X.dtype)
        if n < 1:
            raise ValueError("cannot fit on empty input")
        # w is float64 whatever X's dtype; Ridge rounds its attributes to
        # float32 for float32 X, as scikit-learn's Ridge gives them
        dtype = np.float32 if X.dtype == np.float32 else np.float64
        if centre is not None and loss == "squared":
            # centred X and targets: the free intercept b' is 0 whatever w, so
            # the problem has none (scikit-learn's Ridge solves it so)
            free = False
        icpt = 1.0 if free else float(self.intercept_scaling) if self.fit_intercept \
            and centre is None else 0.0
        lam, l1 = self._penalties(n)
        problem = Problem(loss=loss_code(loss), lam=lam, l1=l1, n_samples=n,
                          n_features=d, n_targets=encoder.n_targets,
                          intercept_scaling=icpt, free_intercept=free)
        w_start = self._warm_start_w(problem, encoder)
        if w_start is not None and free and centre is not None:
            w_start[d] += centre @ w_start[:d]
        if self._uses_gram(problem):
            result = self._fit_gram(X, y if dask_input else Y,
                                    sample_weight if dask_input else sw, encoder, problem,
                                    w_start, dask_input)
        else:
            result = self._fit_cocoa(X, y if dask_input else Y,
                                     sample_weight if dask_input else sw, encoder, problem,
                                     w_start, dask_input, n_values, held)
        if centre is not None:   # back to X's columns: b = b' − μ·w
            result.w[d] = problem.intercept_scaling * result.w[d] - centre @ result.w[:d]
            # (the intercept of the centred columns was free, or 0 for Ridge's)
            problem = dataclasses.replace(problem, intercept_scaling=1.0, free_intercept=True)
        self._set_fitted(result, encoder, problem, dtype)
        self.feature_encoder_ = frame_encoder
        if frame_encoder is not None:   # the input's columns, not the encoded ones
            self.n_features_in_, names = columns_in
            if names is not None:
                self.feature_names_in_ = names
        return self

    def _uses_gram(self, problem):
        """Whether the fit runs the Gram solver (:mod:`daskelastic.gram`) instead of rounds."""
        return False

    def _fit_cocoa(self, X, Y, sw, encoder, problem, w_start, dask_input, n_values, held):
        """CoCoA+ rounds on the backend the session gives: the :class:`FitResult`.

        ``Y`` and ``sw`` are the encoded targets and weights in memory, or
        the raw dask targets and weights of dask input (encoded as they load).
        """
        n = problem.n_samples
        policy = make_straggler_policy(self.straggler_policy)
        cpw = self.chunks_per_worker or config.get("chunks-per-worker")
        # an embedded cluster is the fit's own: it may retire workers it frees
        owns_cluster = self.client is None and current_client() is None
        simulated = self._cluster_model() is not None
        with fit_session(client=self.client,
                         backend="simulated" if simulated else self.backend,
                         n_values=n_values, n_workers=self.n_workers,
                         dask_input=dask_input,
                         elastic=self.scaling_policy is not None) as (kind, client):
            if kind == "inprocess":
                from .backends.inprocess import InProcessBackend

                k = self.n_workers or 1
                chunks = make_chunks(X, Y, sw, split_rows(n, n_chunks=k * cpw),
                                     shuffle=None if k == 1 else self._seed())
                backend = InProcessBackend(problem, chunks, n_workers=k)
            elif kind == "simulated":
                backend = self._simulated_backend(X, Y, sw, problem, cpw)
            else:
                from .backends.dask import DaskBackend

                if owns_cluster and self.verbose:
                    # a slower start than the user may expect: say why (and, where
                    # it can, how to fit here instead)
                    why = ("backend='dask'" if self.backend == "dask" else "dask input"
                           if dask_input else "a scaling_policy"
                           if self.scaling_policy is not None else
                           f"{n_values:,} stored values ≥ daskelastic.embedded-threshold; "
                           "backend='inprocess' fits in this process")
                    k = len(client.scheduler_info(n_workers=-1)["workers"])
                    print(f"[daskelastic] fitting on a LocalCluster of {k} "
                          f"worker{'s' if k != 1 else ''} started for this fit ({why})",
                          flush=True)
                workers = None
                if self.n_workers is not None:
                    all_workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
                    workers = all_workers[: self.n_workers]
                    if len(all_workers) < self.n_workers:
                        warnings.warn(f"n_workers={self.n_workers}, but the cluster has "
                                      f"{len(all_workers)} workers: fitting on those",
                                      UserWarning, stacklevel=3)
                backend = DaskBackend(client, problem, workers=workers,
                                      owns_cluster=owns_cluster)
                if dask_input:
                    backend.load_dask(X, Y, sw, encoder, persisted=held)
                    held.clear()   # the blocks live in the workers' solvers now
                else:
                    k = len(backend.available_workers)
                    backend.load_chunks(make_chunks(X, Y, sw,
                                                    split_rows(n, n_chunks=k * cpw),
                                                    shuffle=self._seed()))
            monitor = FitMonitor(self, backend, client, progress=self._progress_callback())
            try:
                result = run_cocoa(backend, problem, tol=self.tol,
                                   max_iter=self.max_iter, gamma=self.gamma,
                                   sigma=self.sigma,
                                   local_steps=self.local_steps,
                                   acceleration=self.acceleration,
                                   random_state=self._seed(),
                                   straggler_policy=policy,
                                   scaling_policy=self.scaling_policy,
                                   max_workers=self.n_workers,
                                   callback=monitor.on_round,
                                   w_start=w_start)
            except BaseException as error:
                monitor.finish(error=error)
                raise
            else:
                monitor.finish(result)
            finally:
                backend.close()
        return result

    def _encode_categories(self, X):
        """``X`` with its categorical columns one-hot encoded, the encoder and X's columns.

        ``(X, None, None)`` when ``X`` has none (see :mod:`daskelastic.encoding`).
        """
        categorical = categorical_columns(_columns_of(X))
        if not categorical:
            return X, None, None
        _check_numeric(X, categorical)
        # the input's feature names and their number, as scikit-learn keeps them
        validate_data(self, _columns_of(X), reset=True, skip_check_array=True)
        columns_in = (self.n_features_in_, getattr(self, "feature_names_in_", None))
        if _is_dask_collection(X):
            X, frame_encoder = _encode_dask_frame(X, categorical,
                                                  self.client or current_client())
        else:
            frame_encoder = fit_frame_encoder(X.columns, {c: X[c] for c in categorical})
            X = encode_frame(frame_encoder, X)
            if X.nnz >= _DENSE_ENCODING * X.shape[0] * X.shape[1]:
                # a few columns of a few categories each: dense rows, in at
                # most 20× the memory of the non-zeros
                X = X.toarray()
        previous = getattr(self, "feature_encoder_", None)
        if self.warm_start and hasattr(self, "coef_") and (previous is None or list(
                previous.get_feature_names_out()) != list(frame_encoder.get_feature_names_out())):
            raise ValueError("warm_start: this fit's one-hot features (the categories "
                             "found in X) are not the last fit's: fit with "
                             "warm_start=False")
        return X, frame_encoder, columns_in

    def _warm_start_w(self, problem, encoder):
        """The last fit's coefficients in the driver's layout (see ``run_cocoa``), or None.

        None without ``warm_start`` or before a first fit; a ``ValueError``
        when this fit's features, classes or targets are not the last's.
        """
        if not self.warm_start or not hasattr(self, "coef_"):
            return None
        d, m = problem.n_features, problem.n_targets
        classes = getattr(encoder, "classes", None)
        if classes is not None and not np.array_equal(classes, self.classes_):
            raise ValueError(f"warm_start: this fit's classes {classes.tolist()} are not "
                             f"the last fit's {self.classes_.tolist()}; fit with "
                             "warm_start=False")
        coef = np.asarray(self.coef_, dtype=np.float64)
        coef = coef.reshape(-1, coef.shape[-1])
        if coef.shape != (m, d):
            raise ValueError(f"warm_start: the last fit had {coef.shape[1]} features and "
                             f"{coef.shape[0]} targets, this one {d} and {m}; fit with "
                             "warm_start=False")
        w = np.zeros((d + 1, m))
        w[:d] = coef.T
        if problem.intercept_scaling:
            # intercept_ = intercept_scaling · w[d] (+ a regressor's target offset)
            intercept = np.broadcast_to(np.asarray(self.intercept_, dtype=np.float64), (m,))
            offset = getattr(encoder, "offset", None)
            w[d] = (intercept - (0.0 if offset is None else offset)) / problem.intercept_scaling
        return w

    def _cluster_model(self):
        """The virtual cluster of a simulated fit (``backend`` a ClusterModel), else None.

        ``backend="simulated"`` alone is a ``ValueError`` that says to pass the model.
        """
        if isinstance(self.backend, ClusterModel):
            return self.backend
        if isinstance(self.backend, str) and self.backend == "simulated":
            raise ValueError("backend='simulated' needs its virtual cluster: pass the "
                             "model instead, backend=ClusterModel(n_workers=...), or fit "
                             "with daskelastic.simulate(estimator, X, y, model)")
        return None

    def _simulated_backend(self, X, Y, sw, problem, chunks_per_worker):
        from .backends.simulated import SimulatedBackend

        model = self._cluster_model()
        if self.n_workers is not None and self.n_workers != model.n_workers:
            raise ValueError(f"n_workers={self.n_workers} differs from the ClusterModel's "
                             f"n_workers={model.n_workers}: leave n_workers unset for a "
                             "simulated backend")
        k = model.n_workers
        chunks = make_chunks(X, Y, sw, split_rows(problem.n_samples,
                                                  n_chunks=k * chunks_per_worker),
                             shuffle=self._seed())
        return SimulatedBackend(problem, chunks, model)

    def _seed(self):
        rs = self.random_state
        if rs is None:
            return 0
        if isinstance(rs, numbers.Integral):
            return int(rs)
        return int(rs.randint(np.iinfo(np.int32).max))

    def _progress_callback(self):
        if not self.verbose:
            return None
        return ProgressBar(tol=self.tol, max_iter=self.max_iter, per_round=self.verbose >= 2)

    def _prepare_dask(self, X, y, sample_weight, held, centre=False):
        """X, y and weights as row-aligned dask arrays, persisted into ``held``, and the
        target encoder; with ``centre``, dense ``X`` less its (weighted) column means,
        and those means (else None)."""
        import dask.array as da

        _check_numeric(X)
        Xa = _dask_to_array(X, "X")
        if Xa.ndim != 2:
            raise ValueError(f"X must be 2-d, got {Xa.ndim}-d")
        # the feature names of a dask dataframe, and the number of features
        validate_data(self, _columns_of(X), reset=True, skip_check_array=True)
        X = Xa
        y_dask = _is_dask_collection(y)
        y = _dask_to_array(y, "y") if y_dask else np.asarray(y)
        n_y = y.shape[0] if y.ndim else 0
        if n_y != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {n_y}")
        if not y_dask:    # in memory: cut as X is
            y = da.from_array(y, chunks=(X.chunks[0],) + y.shape[1:])
        elif self._is_classifier() and y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if X.shape[0] == 0:
            raise ValueError("cannot fit on empty input")
        # one chunk of columns; no empty row blocks (a filtered dataframe's
        # partitions may be empty)
        rows = tuple(c for c in X.chunks[0] if c > 0)
        X = X.rechunk({0: rows, 1: -1})
        y = y.rechunk({0: rows})
        if sample_weight is not None:
            if _is_dask_collection(sample_weight):
                sample_weight = _dask_to_array(sample_weight, "sample_weight")
            else:
                sample_weight = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
            if sample_weight.shape[0] != X.shape[0]:
                raise ValueError("sample_weight and X have different lengths")
            sample_weight = da.asarray(sample_weight).rechunk({0: rows})
        means = None
        if centre and not sp.issparse(X._meta):
            # a free intercept crawls on columns far from centred (see
            # _fit_holding): the blocks are centred as they load, in X's dtype
            if sample_weight is None:
                means = X.mean(axis=0, dtype=np.float64)
            else:
                total = sample_weight.sum()
                means = da.where(total > 0, (sample_weight[:, None] * X).sum(axis=0)
                                 / da.where(total > 0, total, 1.0), X.mean(axis=0))
            means = means.astype(X.dtype)
            X = X - means
        # persisted into ``held`` first where a client runs: the labels are
        # then computed from y's blocks in memory instead of from its graph a
        # second time, and the data loads while they are gathered
        client = self.client or current_client()
        if client is not None:
            held.extend(client.persist([X, y] + ([] if sample_weight is None
                                                 else [sample_weight])
                                       + ([] if means is None else [means])))
            if means is not None:   # (computed with X's blocks, not from X again)
                means = held.pop()
        try:
            encoder = self._make_encoder_dask(held[1] if held else y,
                                              sample_weight if sample_weight is None
                                              or not held else held[2], client)
        except Exception as error:
            # the labels' frames hold persisted arrays (``held`` itself is
            # emptied by ``_fit``): raise the error without their traceback
            raise error.with_traceback(None) from None
        if means is not None:
            means = np.asarray(means.compute(scheduler=client), dtype=np.float64)
        return X, y, sample_weight, encoder, means

    def _make_encoder_dask(self, y, sample_weight, client=None):
        raise NotImplementedError

    # -- prediction ---------------------------------------------------------------
    def _decision(self, X):
        """``X @ coef_.T + intercept_``; lazy for dask input."""
        check_is_fitted(self)
        frame_encoder = getattr(self, "feature_encoder_", None)
        if frame_encoder is not None:
            validate_data(self, _columns_of(X), reset=False, skip_check_array=True)
            if _is_dask_collection(X):
                return _dask_frame_decision(X, frame_encoder, self.coef_, self.intercept_)
            return _block_decision(encode_frame(frame_encoder, X), self.coef_,
                                   self.intercept_)
        if _is_dask_collection(X):
            # scikit-learn's checks of the feature names and their number,
            # without computing anything
            validate_data(self, _columns_of(X), reset=False, skip_check_array=True)
            _check_numeric(X)
            Xa = _dask_to_array(X, "X", lengths=False).rechunk({1: -1})
            if Xa.dtype not in (np.float32, np.float64):   # as validate_data does
                Xa = Xa.astype(np.float64)
            one = self.coef_.ndim == 1 or self.coef_.shape[0] == 1
            kwargs = {"drop_axis": 1} if one else {"chunks": (Xa.chunks[0], (self.coef_.shape[0],))}
            return Xa.map_blocks(_block_decision, self.coef_, self.intercept_,
                                 dtype=np.result_type(Xa.dtype, self.coef_.dtype),
                                 **kwargs)
        X = validate_data(self, X, accept_sparse="csr", reset=False,
                          dtype=[np.float64, np.float32])
        return _block_decision(X, self.coef_, self.intercept_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


#: ``solver="auto"`` of ElasticNet and Lasso uses the Gram solver up to this
#: many features: its one pass costs ``n·s²`` (``s`` values per row) where a
#: CoCoA+ round costs ``n·s``, and the rounds of an L1 fit number in the
#: hundreds; the Gram matrix is then at most 512 KB.
GRAM_MAX_FEATURES = 256

#: A sparse X in memory of at most this many values (rows × columns) is made
#: dense for a free intercept, to be centred (128 MB in float64).
_DENSE_FOR_CENTRING = 1 << 24

#: An encoded dataframe in memory is fitted dense when at least this fraction
#: of its values are non-zero: dense columns are centred for a free intercept,
#: which converges far faster so (the user guide's *The intercept*).
_DENSE_ENCODING = 0.05


def _encode_dask_frame(X, categorical, client=None):
    """A dask dataframe's rows one-hot encoded on the workers, and the encoder.

    One pass over the partitions finds the categories and the rows of each;
    the encoded blocks (CSR) are made where the partitions are.
    """
    import dask
    import dask.array as da

    parts = X.to_delayed()
    found = dask.compute(*[dask.delayed(partition_categories)(p, categorical)
                           for p in parts], scheduler=client)
    frame_encoder = fit_frame_encoder(X.columns, merge_categories(found, categorical))
    k = len(frame_encoder.get_feature_names_out())
    # dense blocks when the pandas rule would likely make the rows dense: at
    # most one non-zero per column of the frame
    dense = len(X.columns) >= _DENSE_ENCODING * k
    meta = np.empty((0, k)) if dense else sp.csr_matrix((0, k))
    blocks = [da.from_delayed(dask.delayed(_encode_block)(frame_encoder, p, dense),
                              shape=(n, k), dtype=np.float64, meta=meta)
              for p, (_, n) in zip(parts, found) if n > 0]
    if not blocks:
        raise ValueError("cannot fit on empty input")
    return da.concatenate(blocks, axis=0), frame_encoder


def _encode_block(frame_encoder, frame, dense):
    """One partition's rows encoded: a dense array or CSR."""
    out = encode_frame(frame_encoder, frame)
    return out.toarray() if dense else out


def _frame_decision(frame, frame_encoder, coef, intercept):
    """One partition's decision values, as a series (one column) or a frame."""
    import pandas as pd

    scores = _block_decision(encode_frame(frame_encoder, frame), coef, intercept)
    if scores.ndim == 1:
        return pd.Series(scores, index=frame.index)
    return pd.DataFrame(scores, index=frame.index)


def _dask_frame_decision(X, frame_encoder, coef, intercept):
    """Lazy decision values of a dask dataframe's rows (a dask array)."""
    import pandas as pd

    m = np.atleast_2d(coef).shape[0]
    meta = (pd.Series(np.empty(0)) if m == 1
            else pd.DataFrame(np.empty((0, m)), columns=range(m)))
    return X.map_partitions(_frame_decision, frame_encoder, coef, intercept,
                            meta=meta).to_dask_array()


def _block_decision(X, coef, intercept):
    coef = np.atleast_2d(coef)
    Z = X @ coef.T
    Z = np.asarray(Z) + intercept
    if Z.shape[1] == 1:
        return Z.ravel()
    return Z


def _block_labels_and_weights(y, sample_weight=None):
    """A row block's distinct labels (sorted), the rows of each, and its weights.

    Returns ``(labels, counts, weight_sums, smallest_weight, finite)``:
    ``counts[j]`` rows have the label ``labels[j]``, whose sample weights add
    up to ``weight_sums[j]``; ``finite`` says whether every weight is finite;
    the last three are None without ``sample_weight``.
    """
    y = np.asarray(y).reshape(-1)
    if y.dtype.kind in "biuf":
        import pandas as pd

        # by hashing: np.unique sorts, which costs more on long label arrays
        codes, labels = pd.factorize(y, sort=True, use_na_sentinel=False)
        labels = np.asarray(labels)
    else:
        labels, codes = np.unique(y, return_inverse=True)
    codes = codes.reshape(-1)
    counts = np.bincount(codes, minlength=labels.shape[0])
    if sample_weight is None:
        return labels, counts, None, None, None
    sw = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
    sums = np.bincount(codes, weights=sw, minlength=labels.shape[0])
    return (labels, counts, sums, float(sw.min()) if sw.shape[0] else np.inf,
            bool(np.isfinite(sw).all()))


def _distinct_labels(y):
    """``np.unique(y)``: by hashing for 1-d numbers (no sort of the whole array)."""
    if y.ndim == 1 and y.dtype.kind in "biuf":
        import pandas as pd

        return np.sort(pd.unique(y))
    return np.unique(y)


class _ClassifierBase(ClassifierMixin, _CoCoABase):
    _parameter_constraints = {
        **_CoCoABase._parameter_constraints,
        "C": [Interval(numbers.Real, 0, None, closed="neither")],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "penalty": [StrOptions({"l1", "l2", "elasticnet"})],
        "l1_ratio": [None, Interval(numbers.Real, 0, 1, closed="both")],
    }

    def _is_classifier(self):
        return True

    def _l1_ratio(self):
        if self.penalty == "l1":
            return 1.0
        if self.penalty == "elasticnet":
            if self.l1_ratio is None:
                raise ValueError("penalty='elasticnet' needs l1_ratio, a number in [0, 1]")
            return float(self.l1_ratio)
        if self.l1_ratio:
            # scikit-learn ≥ 1.8 chooses the penalty by l1_ratio alone: refuse to
            # ignore it silently
            raise ValueError(f"l1_ratio={self.l1_ratio} is used with penalty='elasticnet' "
                             f"only; pass penalty='elasticnet' (penalty is "
                             f"{self.penalty!r})")
        return 0.0

    def decision_function(self, X: MatrixLike) -> ArrayResult:
        """Signed distance of each sample to the decision boundary.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)

        Returns
        -------
        ndarray or dask array
            Shape (n,) for two classes, (n, n_classes) otherwise; lazy for
            dask input.
        """
        return self._decision(X)

    def _make_encoder(self, y, sample_weight):
        classes = _distinct_labels(y)
        check_classification_targets(classes)   # the labels' kinds, as the dask path
        if classes.shape[0] < 2:
            raise ValueError(
                "This solver needs samples of at least 2 classes in the data, "
                f"but the data contains only one class: {classes[0]!r}")
        cw = None
        if self.class_weight is not None:
            # "balanced" counts the sample weights where scikit-learn does
            kw = {"sample_weight": sample_weight} if _BALANCED_COUNTS_WEIGHTS else {}
            with np.errstate(divide="ignore", invalid="ignore"):   # checked below
                cw = compute_class_weight(self.class_weight, classes=classes, y=y, **kw)
            _check_class_weights(cw, classes, self.class_weight == "balanced")
            if not np.sum(sample_weight * cw[np.searchsorted(classes, y)]) > 0:
                raise _no_weight_left()
        m = 1 if classes.shape[0] == 2 else classes.shape[0]
        return TargetEncoder(classes=classes, class_weight=cw, n_targets=m)

    def _make_encoder_dask(self, y, sample_weight, client=None):
        import dask

        if y.ndim != 1:
            raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} "
                             "instead.")
        # one task per row block for its labels, the rows and weight of each
        # and its weights' least value, gathered at once: one round trip,
        # where da.unique, min and sum are a graph of maps and reductions each
        # (and "balanced" class weights one more reduction per class)
        y_blocks = y.to_delayed().ravel()
        sw_blocks = ([None] * len(y_blocks) if sample_weight is None
                     else sample_weight.to_delayed().ravel())
        parts = dask.compute(*[dask.delayed(_block_labels_and_weights, pure=False)(yb, swb)
                               for yb, swb in zip(y_blocks, sw_blocks)], scheduler=client)
        classes = np.unique(np.concatenate([p[0] for p in parts]))
        if classes.dtype.kind == "f" and np.isnan(classes).any():
            raise ValueError("Input y contains NaN.")
        check_classification_targets(classes)   # e.g. continuous values
        # each class's rows and total sample weight
        counts = np.zeros(classes.shape[0])
        sums = None if sample_weight is None else np.zeros(classes.shape[0])
        for labels, n, total, _, _ in parts:
            where = np.searchsorted(classes, labels)
            counts[where] += n
            if sums is not None:
                sums[where] += total
        if sums is not None:
            if not all(p[4] for p in parts):
                # the load tasks' error, before any block loads (the class
                # weights' checks below would misread the NaN sums)
                raise not_finite("sample_weight")
            _check_weights(min(p[3] for p in parts), sums.sum())
        if classes.shape[0] < 2:
            raise ValueError(
                "This solver needs samples of at least 2 classes in the data, "
                f"but the data contains only one class: {classes[0]!r}")
        cw = None
        if self.class_weight == "balanced":
            per_class = sums if sums is not None and _BALANCED_COUNTS_WEIGHTS else counts
            with np.errstate(divide="ignore", invalid="ignore"):   # checked below
                cw = per_class.sum() / (len(classes) * per_class)
            _check_class_weights(cw, classes, True)
        elif self.class_weight is not None:
            # scikit-learn's checks of the dictionary's classes
            cw = compute_class_weight(self.class_weight, classes=classes, y=classes)
            _check_class_weights(cw, classes, False)
        if cw is not None and not np.sum(cw * (counts if sums is None else sums)) > 0:
            raise _no_weight_left()
        m = 1 if classes.shape[0] == 2 else classes.shape[0]
        return TargetEncoder(classes=classes, class_weight=cw, n_targets=m)

    def _set_fitted(self, result, encoder, problem, dtype):
        # float64 whatever ``dtype`` (X's), as liblinear's coefficients
        self.classes_ = encoder.classes
        d = problem.n_features
        w = result.w
        self.coef_ = np.ascontiguousarray(w[:d].T)
        # 0.0 without an intercept, as scikit-learn's LinearSVC and liblinear give
        self.intercept_ = problem.intercept_scaling * w[d] if self.fit_intercept else 0.0
        self.n_iter_ = np.array([result.n_iter])
        self.history_ = result.history
        self.duality_gap_ = result.objective.relative_gap

    def predict(self, X: MatrixLike) -> ArrayResult:
        """Predict class labels.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)

        Returns
        -------
        ndarray or dask array of shape (n,)
            Predicted class labels.
        """
        scores = self.decision_function(X)
        if _is_dask_collection(scores):
            return scores.map_blocks(_scores_to_labels, self.classes_,
                                     dtype=self.classes_.dtype,
                                     **({"drop_axis": 1} if scores.ndim == 2 else {}))
        return _scores_to_labels(scores, self.classes_)


def _scores_to_labels(scores, classes):
    if scores.ndim == 1:
        return classes[(scores > 0).astype(int)]
    return classes[np.argmax(scores, axis=1)]


_COMMON_HEAD = """
    tol : float, default=1e-4
        Stop when the relative duality gap ``(P(w) - D(α)) / P(w)`` is at most
        ``tol``; the gap bounds the relative primal suboptimality from above.
    max_iter : int, default=200
        Maximum number of CoCoA+ rounds (one local pass per worker each).
    fit_intercept : bool, default=True
        Fit an intercept."""


_SOLVER_DOC = """
    solver : {"auto", "gram", "cocoa"}, default="auto"
        ``"gram"``: one pass sums the rows' Gram matrix ``Σ c_i x_i x_iᵀ`` and
        correlations (block by block on the cluster for dask input, in this
        process for in-memory input), then coordinate descent on those
        ``d × d`` numbers runs to ``tol``, certified by the same duality gap
        (:mod:`daskelastic.gram`; Spark MLlib's ``"normal"`` solver).
        ``"cocoa"``: CoCoA+ rounds on the workers, with straggler policies,
        elastic scaling and the dashboard.  ``"auto"``: ``"gram"`` up to 256
        features, unless a simulated ``backend`` (a ``ClusterModel``) or a
        ``scaling_policy`` asks for rounds.  With ``"gram"`` the round
        parameters below (``n_workers`` to ``scaling_policy``) are unused and
        ``max_iter`` counts passes of coordinate descent."""

_INTERCEPT_DOC = """
    intercept_scaling : float, default=1.0
        With ``penalize_intercept=True``: the intercept is the coefficient of
        a constant feature of this value, and larger values weaken its
        penalty.  Unused otherwise.
    penalize_intercept : bool, default=True
        Penalise the intercept like a coefficient (liblinear's and Snap ML's
        problem), or leave it free (``False``: scikit-learn's lbfgs and Ridge
        problem, whose optimum it reaches, with a duality gap that still
        certifies it; not for ``loss="hinge"``).  A free intercept takes
        more rounds (the user guide's *The intercept*).  With an L1 part in
        the penalty the intercept is always free, as scikit-learn's ``saga``
        and ``Lasso`` leave it."""

_PENALTY_DOC = """
    penalty : {"l2", "l1", "elasticnet"}, default="l2"
        The penalty: ``½‖w‖²``, ``‖w‖₁`` or ``l1_ratio ‖w‖₁ + (1 − l1_ratio)
        ½‖w‖²`` (scikit-learn's; see the user guide's *Sparse models: L1 and
        elastic-net*).  With an L1 part, coefficients are exactly 0 where
        the optimum's are, and the intercept is free; not for the hinge
        loss.
    l1_ratio : float in [0, 1], optional
        The L1 part of ``penalty="elasticnet"``."""

_CLASS_WEIGHT_DOC = """
    class_weight : dict or "balanced", optional
        Weights of the classes, multiplied into the sample weights (see the
        user guide for how this differs from liblinear's one-vs-rest)."""

_COMMON_TAIL = """
    random_state : int, RandomState instance or None, default=None
        Seed of the order in which the local solvers visit samples.
    verbose : int, default=0
        ``1``: a progress bar with the duality gap, the workers and the time
        left; ``2``: a line per round.
    warm_start : bool, default=False
        Start from the previous call's coefficients instead of from zero: a
        refit after a change of the regularisation (a path of ``C`` or
        ``alpha`` values, say) then needs a fraction of the rounds of a cold
        fit.  The dual state starts at the values that match those
        coefficients, ``α_i = -c_i ℓ'(x_i·w)``, on the rows of this call's
        ``X`` (which may differ from the last's), so the duality gap still
        certifies the result.  The features and classes (or targets) must be
        the previous fit's.
    client : distributed.Client, optional
        Cluster to fit on; the current client by default.
    backend : {"auto", "dask", "inprocess"} or ClusterModel, default="auto"
        ``"dask"`` fits on ``client`` (or the current client, or an embedded
        ``LocalCluster`` started for the fit); ``"inprocess"`` fits in this
        process; ``"auto"`` is ``"dask"`` unless there is no client, the
        input is small (``daskelastic.embedded-threshold`` stored values) and
        in memory, and there is no ``scaling_policy``.  A
        :class:`~daskelastic.ClusterModel` fits in this process on that
        virtual cluster (``history_`` times are virtual seconds; ``n_workers``
        is the model's); see :func:`~daskelastic.simulate`.
    n_workers : int, optional
        Workers to use (all of the cluster's by default; the size of an
        embedded cluster; one for ``"inprocess"``).  More than the cluster
        has: a warning, and the fit uses those it has.
    chunks_per_worker : int, optional
        Row chunks per worker for numpy / scipy.sparse input
        (``daskelastic.chunks-per-worker``, 4, by default).  Dask input keeps
        its own row blocks as chunks.
    local_steps : int, optional
        Coordinate steps per worker per round; one pass over the worker's rows
        by default.
    gamma : float, default=1.0
        CoCoA+ aggregation parameter: the largest step ``w ← w + γ ΣΔw``.
    sigma : float, default=None
        CoCoA+ subproblem parameter ``σ′`` (how cautious each worker's local
        steps are), fixed; a value below ``γ K`` gives up the guarantee that
        every round raises the dual.  By default it adapts from the dual
        objective along the workers' summed proposals (for all losses but
        the hinge, where it stays at the safe ``γ K``): the first round and
        every other one after it use ``γ K``, the rounds between whatever the
        round before showed, and the proposals are added with the step that
        maximises a lower bound of the dual's gain, so that every round still
        raises the dual.  It usually takes fewer rounds than ``σ′ = K``, and
        on some tables more (the *Algorithms* page, *Adaptive σ′*, has the
        measurements).
    acceleration : "auto", "none", None or float, default="auto"
        Catalyst acceleration of the rounds: proximal problems with weight
        ``κ`` whose centres move with momentum.  On more than one worker it
        cuts the rounds several-fold on tables with many more rows than
        features; ``"auto"`` turns it on for two or more workers (for Ridge
        also on one, where plain SDCA needs hundreds of rounds once ``alpha``
        is small against ``‖x‖²``) and adapts ``κ`` from
        ``0.25 · sqrt(λ · mean ‖x_i‖²)``; logistic regression, and every
        classifier on one worker, starts without it and switches it on when
        the rounds slow down (at a large ``C``, say; see the *Algorithms*
        page).  A float fixes the factor and accelerates from the
        first round; ``"none"`` or None turns it off.
    straggler_policy : {"wait", "backup", "dynamic", "preempt"} or \
daskelastic.policies.StragglerPolicy, default="preempt"
        How a round treats slow workers (see the user guide):
        ``"wait"`` waits for all; ``"backup"`` uses the fastest ``K − b``
        and drops the rest; ``"dynamic"`` re-chooses ``b`` every round for
        the best estimated progress per second; ``"preempt"`` stops the
        workers still running once half are done (plus 20% of their compute
        time) and adds their partial work.  A name takes the policy's
        defaults (``"backup"``: ``b = 1``); a
        :class:`~daskelastic.policies.StragglerPolicy` instance sets the
        policy's own parameters, e.g.
        :class:`BackupPolicy(n_backup=2) <daskelastic.policies.BackupPolicy>`.
    scaling_policy : None, "convergence" or ScalingPolicy, default=None
        Elastic scale-in on a Dask or simulated cluster (see the user guide): with
        ``"convergence"`` the fit watches how fast ``log(gap)`` falls per
        second and, when that rate deteriorates, moves the chunks of some
        workers, with their dual state, to the others and lets those workers
        go.  None keeps the workers.  A
        :class:`~daskelastic.scaling.ScalingPolicy` instance sets the policy's
        own parameters, among them ``min_workers`` (never scale in below
        this many; default 1) and ``release_workers`` (what becomes of the
        workers a scale-in lets go: ``True`` retires them through the
        scheduler, ``False`` just stops using them, ``"auto"`` retires them
        from a cluster the fit started itself, leaves them to an
        :class:`~daskelastic.ElasticAdaptive` to close, and otherwise just
        stops using them), e.g. :class:`ConvergenceScalingPolicy(min_workers=2,
        release_workers=True) <daskelastic.ConvergenceScalingPolicy>`.
        With a policy, ``backend="auto"`` fits on Dask even small input (an
        embedded cluster when there is no client).
"""

_ATTRS_DOC = """
    n_iter_ : ndarray of shape (1,)
        Committed CoCoA+ rounds.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when ``X`` has string column names.
    feature_encoder_ : sklearn.compose.ColumnTransformer or None
        How the categorical columns of a dataframe ``X`` (string, ``object``
        or ``category`` dtype) were one-hot encoded; None when ``X`` had
        none.  Its ``get_feature_names_out()`` names the columns of
        ``coef_`` (``column=value`` for a category), whose number is then
        larger than ``n_features_in_``.  Categories not seen in ``fit`` set
        no feature at prediction.
    history_ : list of dict
        One entry per round, ``n_iter_ + 1`` in all: the last is the round
        whose start met ``tol`` (or the one after ``max_iter`` rounds), whose
        proposals are discarded (its ``step`` is 0); ``duality_gap_`` is its
        gap.  The keys: ``round``, ``worker_rows`` (rows each worker holds),
        ``time`` (seconds since the fit
        began), ``duality_gap`` (relative, of the iterate the round started
        from), ``gap``, ``primal``, ``dual``, ``n_workers``, ``n_used``,
        ``n_dropped``, ``n_preempted``, ``n_backup``, ``steps``, ``sigma``
        and ``step`` (the round's ``σ′`` and the step its proposals were
        added with), ``outer`` and ``kappa`` (the acceleration's momentum
        steps and proximal
        weight), ``worker_seconds``, ``worker_cpu_seconds`` and
        ``worker_arrival`` (each worker's solver time, its solver's CPU time
        and the time its result arrived), ``worker_status``
        (``"used"``, ``"preempted"`` or ``"dropped"``), ``cut``,
        ``round_seconds``, ``policy``, ``policy_estimate`` and ``cost``
        (money spent on workers so far on a simulated cluster, else None).
    duality_gap_ : float
        Relative duality gap of the returned coefficients: a certificate that
        their objective is within this fraction of the optimum.
"""


_SOLVER_ATTR_DOC = """    solver_ : {"gram", "cocoa"}
        The solver the fit ran (see ``solver``).  After the Gram solver
        ``n_iter_`` counts passes of coordinate descent, and ``history_`` has
        one entry per pass with the keys ``round``, ``time``, ``primal``,
        ``dual``, ``gap``, ``duality_gap``, ``n_workers`` and ``solver``.
"""


class LogisticRegression(_ClassifierBase):
    __doc__ = f"""Regularised logistic regression trained with distributed CoCoA+.

    Minimises ``C Σ c_i log(1 + exp(-y_i (x_i·w + b))) + ½‖w‖²``, by default
    with ``b`` penalised too (liblinear's problem; scikit-learn's lbfgs leaves
    it free, as ``penalize_intercept=False`` does), or with an L1 or
    elastic-net penalty (``penalty``, ``l1_ratio``), with an SDCA local solver
    per worker, on a Dask cluster or in-process.  With three or more classes
    the loss is the multinomial (softmax) one, ``C Σ c_i (log Σ_k exp(z_ik) −
    z_iy_i) + ½‖W‖²``, as scikit-learn's default; one-vs-rest is
    ``sklearn.multiclass.OneVsRestClassifier(LogisticRegression())``.

    Parameters
    ----------
    C : float, default=1.0
        Inverse regularisation strength, as in scikit-learn.\
{_PENALTY_DOC}{_COMMON_HEAD}{_INTERCEPT_DOC}{_CLASS_WEIGHT_DOC}{_COMMON_TAIL}
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Coefficients, float64 also for float32 ``X`` (and so are
        ``decision_function`` and ``predict_proba``), as scikit-learn's
        ``solver="liblinear"``, whose problem this is, gives; its other
        solvers, the default ``"lbfgs"`` among them, give float32.
    intercept_ : ndarray of shape (1,) or (n_classes,), or float
        Intercepts, float64; ``0.0`` without ``fit_intercept``, as in
        scikit-learn.
{_ATTRS_DOC}
    See Also
    --------
    LinearSVC : Hinge and squared-hinge losses.
    sklearn.linear_model.LogisticRegression : The single-machine estimator.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3))
    >>> y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    >>> clf = LogisticRegression(C=1.0).fit(X, y)
    >>> clf.score(X, y) > 0.9
    True
    >>> bool(clf.duality_gap_ <= 1e-4)
    True
    """

    _loss = "logistic"

    def _loss_name(self, n_targets=1):
        # three or more classes: the multinomial (softmax) loss, as scikit-learn's
        return "logistic" if n_targets == 1 else "softmax"

    def __init__(self, C=1.0, *, penalty="l2", l1_ratio=None, tol=1e-4, max_iter=200,
                 fit_intercept=True, intercept_scaling=1.0, penalize_intercept=True,
                 class_weight=None, random_state=None,
                 verbose=0, warm_start=False, client=None, backend="auto",
                 n_workers=None, chunks_per_worker=None, local_steps=None, gamma=1.0,
                 sigma=None, acceleration="auto", straggler_policy="preempt",
                 scaling_policy=None):
        self.C = C
        self.penalty = penalty
        self.l1_ratio = l1_ratio
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.penalize_intercept = penalize_intercept
        self.class_weight = class_weight
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.client = client
        self.backend = backend
        self.n_workers = n_workers
        self.chunks_per_worker = chunks_per_worker
        self.local_steps = local_steps
        self.gamma = gamma
        self.sigma = sigma
        self.acceleration = acceleration
        self.straggler_policy = straggler_policy
        self.scaling_policy = scaling_policy

    @_validated_fit
    def fit(self, X: MatrixLike, y: VectorLike,
            sample_weight: VectorLike | None = None) -> Self:
        """Fit the model.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)
            Training data.
        y : array-like or dask array of shape (n,)
            Class labels.
        sample_weight : array-like of shape (n,), optional
            Non-negative weights of the samples.

        Returns
        -------
        self : LogisticRegression
            The fitted estimator.
        """
        return self._fit(X, y, sample_weight)

    def predict_proba(self, X: MatrixLike) -> ArrayResult:
        """Probability of each class.

        With three or more classes, the softmax of the scores.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)

        Returns
        -------
        ndarray or dask array of shape (n, n_classes)
            Probabilities, in the order of ``classes_``.
        """
        scores = self.decision_function(X)
        if _is_dask_collection(scores):
            k = len(self.classes_)
            kw = {"new_axis": 1} if scores.ndim == 1 else {}
            return scores.map_blocks(_scores_to_proba, dtype=np.float64,
                                     chunks=(scores.chunks[0], (k,)), **kw)
        return _scores_to_proba(scores)

    def predict_log_proba(self, X: MatrixLike) -> ArrayResult:
        """Logarithm of :meth:`predict_proba`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n, d)

        Returns
        -------
        ndarray of shape (n, n_classes)
            Log-probabilities, in the order of ``classes_``.
        """
        return np.log(self.predict_proba(X))


def _scores_to_proba(scores):
    from scipy.special import expit, softmax

    if scores.ndim == 1:
        p = expit(scores)
        return np.column_stack([1.0 - p, p])
    return softmax(scores, axis=1)


class LinearSVC(_ClassifierBase):
    __doc__ = f"""Linear support vector classifier trained with distributed CoCoA+.

    Minimises ``C Σ c_i ℓ(y_i x_i·w) + ½‖w‖²`` with the hinge or squared hinge
    loss (liblinear's dual problem; one-vs-rest for more than two classes),
    or, for the squared hinge, with an L1 or elastic-net penalty
    (``penalty``, ``l1_ratio``).

    Parameters
    ----------
    C : float, default=1.0
        Inverse regularisation strength, as in scikit-learn.
    loss : {{"squared_hinge", "hinge"}}, default="squared_hinge"
        The loss function.\
{_PENALTY_DOC}{_COMMON_HEAD}{_INTERCEPT_DOC}{_CLASS_WEIGHT_DOC}{_COMMON_TAIL}
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Coefficients, float64 also for float32 ``X`` (and so is
        ``decision_function``), as scikit-learn's LinearSVC gives.
    intercept_ : ndarray of shape (1,) or (n_classes,), or float
        Intercepts, float64; ``0.0`` without ``fit_intercept``, as in
        scikit-learn.
{_ATTRS_DOC}
    See Also
    --------
    LogisticRegression : Probabilistic classifier.
    sklearn.svm.LinearSVC : The single-machine estimator.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic import LinearSVC
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3))
    >>> y = np.where(X[:, 0] - X[:, 2] > 0, "yes", "no")
    >>> LinearSVC(C=0.5).fit(X, y).score(X, y) > 0.9
    True
    """

    _parameter_constraints = {
        **_ClassifierBase._parameter_constraints,
        "loss": [StrOptions({"hinge", "squared_hinge"})],
    }

    def __init__(self, C=1.0, *, loss="squared_hinge", penalty="l2", l1_ratio=None,
                 tol=1e-4, max_iter=200,
                 fit_intercept=True, intercept_scaling=1.0, penalize_intercept=True,
                 class_weight=None, random_state=None, verbose=0, warm_start=False, client=None,
                 backend="auto", n_workers=None, chunks_per_worker=None, local_steps=None,
                 gamma=1.0, sigma=None, acceleration="auto", straggler_policy="preempt",
                 scaling_policy=None):
        self.C = C
        self.loss = loss
        self.penalty = penalty
        self.l1_ratio = l1_ratio
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.penalize_intercept = penalize_intercept
        self.class_weight = class_weight
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.client = client
        self.backend = backend
        self.n_workers = n_workers
        self.chunks_per_worker = chunks_per_worker
        self.local_steps = local_steps
        self.gamma = gamma
        self.sigma = sigma
        self.acceleration = acceleration
        self.straggler_policy = straggler_policy
        self.scaling_policy = scaling_policy

    def _loss_name(self, n_targets=1):
        return self.loss

    def _l1_ratio(self):
        rho = super()._l1_ratio()
        if rho and self.loss == "hinge":
            # as scikit-learn's LinearSVC; the hinge has no free intercept either
            raise ValueError("an L1 penalty needs loss='squared_hinge', not 'hinge'")
        return rho

    @_validated_fit
    def fit(self, X: MatrixLike, y: VectorLike,
            sample_weight: VectorLike | None = None) -> Self:
        """Fit the model.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)
            Training data.
        y : array-like or dask array of shape (n,)
            Class labels.
        sample_weight : array-like of shape (n,), optional
            Non-negative weights of the samples.

        Returns
        -------
        self : LinearSVC
            The fitted estimator.
        """
        return self._fit(X, y, sample_weight)


class _LinearRegressor(RegressorMixin, _CoCoABase):
    """The squared-loss regressors' targets, fitted attributes and predictions."""

    _loss = "squared"

    def _is_classifier(self):
        return False

    def _make_encoder(self, y, sample_weight):
        y2 = np.asarray(y, dtype=np.float64).reshape(y.shape[0], -1)
        self._y_ndim = np.ndim(y)
        offset = None
        if self.fit_intercept:
            total = sample_weight.sum()
            # einsum, not a BLAS product: OpenBLAS's threads would spin on every
            # core through the start of the fit
            offset = np.einsum("i,ij->j", sample_weight, y2) / total if total > 0 \
                else np.zeros(y2.shape[1])
        return TargetEncoder(offset=offset, n_targets=y2.shape[1])

    def _make_encoder_dask(self, y, sample_weight, client=None):
        import dask.array as da

        self._y_ndim = y.ndim
        y2 = y.reshape(y.shape[0], -1) if y.ndim == 1 else y
        offset = None
        if self.fit_intercept:
            sw = da.ones(y.shape[0], chunks=y.chunks[0]) if sample_weight is None \
                else sample_weight
            num, den, smallest = da.compute((sw[:, None] * y2).sum(axis=0), sw.sum(),
                                            sw.min(), scheduler=client)
            if sample_weight is not None:
                _check_weights(smallest, den)
            offset = num / den if den > 0 else np.zeros_like(num)
        elif sample_weight is not None:
            _check_weights(*da.compute(sample_weight.min(), sample_weight.sum(),
                                       scheduler=client))
        return TargetEncoder(offset=offset, n_targets=y2.shape[1])

    def _set_fitted(self, result, encoder, problem, dtype):
        # scikit-learn's shapes and types: one target (y of shape (n,) or
        # (n, 1)) has coefficients of shape (d,); the intercept is a scalar
        # for y of shape (n,), else an array, and 0.0 without fit_intercept
        d = problem.n_features
        w = result.w
        coef = np.ascontiguousarray(w[:d].T, dtype=dtype)
        intercept = problem.intercept_scaling * w[d]
        if encoder.offset is not None:
            intercept = intercept + encoder.offset
        intercept = intercept.astype(dtype)
        if coef.shape[0] == 1:
            coef = coef[0]
        if not self.fit_intercept:
            intercept = 0.0
        elif self._y_ndim == 1:
            intercept = intercept[0]
        self.coef_ = coef
        self.intercept_ = intercept
        self.n_iter_ = np.array([result.n_iter])
        self.history_ = result.history
        self.duality_gap_ = result.objective.relative_gap

    def predict(self, X: MatrixLike) -> ArrayResult:
        """Predict targets.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)

        Returns
        -------
        ndarray or dask array of shape (n,) or (n, n_targets)
            Predicted targets, of shape (n,) for one target (as ``coef_``);
            float32 when ``X`` and ``coef_`` both are, else float64.
        """
        return self._decision(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class Ridge(_LinearRegressor):
    __doc__ = f"""Ridge regression trained with distributed CoCoA+.

    Minimises ``Σ c_i (y_i - x_i·w - b)² + alpha ‖w‖²`` (scikit-learn's Ridge),
    for one or several targets.  The targets are centred by their weighted
    mean; the remaining intercept is the coefficient of a constant feature of
    value ``intercept_scaling`` and, unlike scikit-learn's, is penalised,
    unless ``penalize_intercept=False``.

    Parameters
    ----------
    alpha : float, default=1.0
        Regularisation strength (must be positive).\
{_COMMON_HEAD}{_INTERCEPT_DOC}{_COMMON_TAIL}
    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Coefficients; shape (n_features,) for one target, ``y`` of shape
        (n,) or (n, 1), as in scikit-learn.  float32 for float32 ``X`` (the
        solver computes in float64 and rounds them), as scikit-learn's Ridge
        gives; float64 otherwise.
    intercept_ : float or ndarray of shape (n_targets,)
        Intercepts, including the targets' weighted mean: a scalar for ``y``
        of shape (n,), an array for ``y`` of shape (n, n_targets) (also
        (n, 1)), of the dtype of ``coef_``; ``0.0`` without
        ``fit_intercept``.
{_ATTRS_DOC}
    See Also
    --------
    sklearn.linear_model.Ridge : The single-machine estimator.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic import Ridge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3))
    >>> y = X @ np.array([1.0, -2.0, 0.5]) + 3.0
    >>> Ridge(alpha=10.0, tol=1e-6).fit(X, y).score(X, y) > 0.99
    True
    """

    _parameter_constraints = {
        **_CoCoABase._parameter_constraints,
        "alpha": [Interval(numbers.Real, 0, None, closed="neither")],
    }

    def __init__(self, alpha=1.0, *, tol=1e-4, max_iter=200, fit_intercept=True,
                 intercept_scaling=1.0, penalize_intercept=True, random_state=None, verbose=0,
                 warm_start=False,
                 client=None, backend="auto", n_workers=None, chunks_per_worker=None,
                 local_steps=None, gamma=1.0, sigma=None, acceleration="auto",
                 straggler_policy="preempt", scaling_policy=None):
        self.alpha = alpha
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.penalize_intercept = penalize_intercept
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.client = client
        self.backend = backend
        self.n_workers = n_workers
        self.chunks_per_worker = chunks_per_worker
        self.local_steps = local_steps
        self.gamma = gamma
        self.sigma = sigma
        self.acceleration = acceleration
        self.straggler_policy = straggler_policy
        self.scaling_policy = scaling_policy

    def _C(self):
        return 1.0 / self.alpha

    @_validated_fit
    def fit(self, X: MatrixLike, y: VectorLike,
            sample_weight: VectorLike | None = None) -> Self:
        """Fit the model.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)
            Training data.
        y : array-like or dask array of shape (n,) or (n, n_targets)
            Targets.
        sample_weight : array-like of shape (n,), optional
            Non-negative weights of the samples.

        Returns
        -------
        self : Ridge
            The fitted estimator.
        """
        return self._fit(X, y, sample_weight)


class ElasticNet(_LinearRegressor):
    __doc__ = f"""Linear regression with an elastic-net penalty: the Gram solver or CoCoA+.

    Minimises ``1/(2n) Σ c_i (y_i - x_i·w - b)² + alpha·l1_ratio ‖w‖₁ +
    ½ alpha (1 - l1_ratio) ‖w‖²`` with ``b`` free (scikit-learn's
    ElasticNet; its sample weights are rescaled to sum to ``n``, as
    scikit-learn's are), for one or several targets.  Coefficients are
    exactly 0 where the optimum's are.  Up to 256 features one pass sums the
    rows' Gram matrix and coordinate descent runs on it (``solver``);
    otherwise CoCoA+'s rounds solve proximal problems whose dual the workers
    raise.  Either way the duality gap of a feasible dual point certifies
    the result (the *Algorithms* page, *L1 and elastic-net* and *The Gram
    solver*).

    Parameters
    ----------
    alpha : float, default=1.0
        Regularisation strength (must be positive).
    l1_ratio : float in [0, 1], default=0.5
        The L1 part of the penalty: 1 is the Lasso, 0 Ridge's penalty (then
        with ``alpha`` in this class's units: ``Ridge(alpha=n·alpha)``).\
{_COMMON_HEAD.replace("default=200", "default=1000")}{_SOLVER_DOC}{_COMMON_TAIL}
    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Coefficients, with exact zeros; shape (n_features,) for one target.
        float32 for float32 ``X``, else float64.
    intercept_ : float or ndarray of shape (n_targets,)
        Intercepts; ``0.0`` without ``fit_intercept``.
{_ATTRS_DOC}{_SOLVER_ATTR_DOC}
    See Also
    --------
    Lasso : The pure L1 penalty.
    sklearn.linear_model.ElasticNet : The single-machine estimator.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic import ElasticNet
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 5))
    >>> y = X @ np.array([2.0, 0.0, 0.0, -1.0, 0.0]) + 0.1 * rng.normal(size=300)
    >>> model = ElasticNet(alpha=0.1, l1_ratio=0.9, tol=1e-8).fit(X, y)
    >>> np.flatnonzero(model.coef_).tolist()
    [0, 3]
    """

    _parameter_constraints = {
        **_CoCoABase._parameter_constraints,
        "alpha": [Interval(numbers.Real, 0, None, closed="neither")],
        "l1_ratio": [Interval(numbers.Real, 0, 1, closed="both")],
        "solver": [StrOptions({"auto", "gram", "cocoa"})],
    }

    # not parameters: the intercept is free, centred away as scikit-learn's is
    penalize_intercept = False
    intercept_scaling = 1.0

    def __init__(self, alpha=1.0, *, l1_ratio=0.5, tol=1e-4, max_iter=1000,
                 fit_intercept=True, solver="auto", random_state=None, verbose=0,
                 warm_start=False,
                 client=None, backend="auto", n_workers=None, chunks_per_worker=None,
                 local_steps=None, gamma=1.0, sigma=None, acceleration="auto",
                 straggler_policy="preempt", scaling_policy=None):
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.client = client
        self.backend = backend
        self.n_workers = n_workers
        self.chunks_per_worker = chunks_per_worker
        self.local_steps = local_steps
        self.gamma = gamma
        self.sigma = sigma
        self.acceleration = acceleration
        self.straggler_policy = straggler_policy
        self.scaling_policy = scaling_policy

    def _l1_ratio(self):
        return float(self.l1_ratio)

    def _uses_gram(self, problem):
        if self.solver == "cocoa":
            return False
        rounds_wanted = self._cluster_model() is not None or self.scaling_policy is not None
        if self.solver == "gram":
            if rounds_wanted:
                raise ValueError("solver='gram' runs no rounds: a simulated backend "
                                 "(backend=ClusterModel(...)) and scaling_policy need "
                                 "solver='cocoa' (or 'auto')")
            return True
        return problem.n_features <= GRAM_MAX_FEATURES and not rounds_wanted

    def _fit_gram(self, X, Y, sw, encoder, problem, w_start, dask_input):
        """The Gram solver's :class:`~daskelastic.driver.FitResult` (:mod:`daskelastic.gram`).

        ``X`` is centred already where it is dense and the intercept free;
        otherwise (sparse rows) the sums are centred here and the intercept
        coefficient set to ``ȳ − μ·w``.
        """
        from .driver import FitResult
        from .gram import gram_sums, solve
        from .objective import Objective

        started = time.perf_counter()
        d = problem.n_features
        if dask_input:
            client = self.client or current_client()
            with client_context(self.client):
                sums = gram_sums(X, Y, sw, y_offset=encoder.offset, client=client)
            workers = 1 if client is None else len(client.scheduler_info(n_workers=-1)
                                                   ["workers"])
        else:
            sums = gram_sums(X, Y, sw)
            workers = 1
        if not all(np.all(np.isfinite(a)) for a in (sums.xx, sums.xy, sums.yy)):
            raise not_finite("X, y or sample_weight")
        free = problem.free_intercept
        if free:
            sums, x_mean, y_mean = sums.centred()
        w, n_iter, history = solve(sums, problem.l1, problem.lam, tol=self.tol,
                                   max_iter=self.max_iter,
                                   w_start=None if w_start is None else w_start[:d],
                                   start=started)
        coef = np.zeros((d + 1, w.shape[1]))
        coef[:d] = w
        if free:
            coef[d] = (y_mean - x_mean @ w) / problem.intercept_scaling
        for entry in history:
            entry.update(n_workers=workers, solver="gram")
        last = history[-1]
        objective = Objective(primal=last["primal"], dual=last["dual"], gap=last["gap"],
                              relative_gap=last["duality_gap"])
        converged = objective.relative_gap <= self.tol
        if self.verbose:
            print(f"[daskelastic] Gram solver on {sums.rows:,} rows: {n_iter} passes, "
                  f"relative duality gap {objective.relative_gap:.2e}", flush=True)
        if not converged:
            warnings.warn(
                f"daskelastic did not reach tol={self.tol:g} in max_iter={self.max_iter} "
                f"passes of coordinate descent (relative duality gap "
                f"{objective.relative_gap:.3g}); increase max_iter or tol",
                ConvergenceWarning, stacklevel=4)
        return FitResult(coef, n_iter, converged, objective, history)

    def _set_fitted(self, result, encoder, problem, dtype):
        super()._set_fitted(result, encoder, problem, dtype)
        # (the Gram solver marks its history's entries)
        self.solver_ = result.history[-1].get("solver", "cocoa")

    def _penalties(self, n):
        # scikit-learn's objective is already divided by n
        rho = self._l1_ratio()
        return (1.0 - rho) * self.alpha, rho * self.alpha

    @_validated_fit
    def fit(self, X: MatrixLike, y: VectorLike,
            sample_weight: VectorLike | None = None) -> Self:
        """Fit the model.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)
            Training data.
        y : array-like or dask array of shape (n,) or (n, n_targets)
            Targets.
        sample_weight : array-like of shape (n,), optional
            Non-negative weights of the samples, rescaled to sum to ``n``.

        Returns
        -------
        self
            The fitted estimator.
        """
        if sample_weight is not None:
            if _is_dask_collection(sample_weight):
                sample_weight = sample_weight / sample_weight.mean()
            else:
                sample_weight = np.asarray(sample_weight, dtype=np.float64)
                total = sample_weight.sum()
                if np.isfinite(total) and total > 0:
                    sample_weight = sample_weight * (sample_weight.size / total)
        return self._fit(X, y, sample_weight)


class Lasso(ElasticNet):
    __doc__ = f"""Linear regression with an L1 penalty (the Lasso): the Gram solver or CoCoA+.

    Minimises ``1/(2n) Σ c_i (y_i - x_i·w - b)² + alpha ‖w‖₁`` with ``b``
    free (scikit-learn's Lasso), for one or several targets: an
    :class:`ElasticNet` with ``l1_ratio=1``.

    Parameters
    ----------
    alpha : float, default=1.0
        Regularisation strength (must be positive).\
{_COMMON_HEAD.replace("default=200", "default=1000")}{_SOLVER_DOC}{_COMMON_TAIL}
    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Coefficients, with exact zeros; shape (n_features,) for one target.
    intercept_ : float or ndarray of shape (n_targets,)
        Intercepts; ``0.0`` without ``fit_intercept``.
{_ATTRS_DOC}{_SOLVER_ATTR_DOC}
    See Also
    --------
    ElasticNet : An L2 part too.
    sklearn.linear_model.Lasso : The single-machine estimator.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic import Lasso
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 5))
    >>> y = X @ np.array([2.0, 0.0, 0.0, -1.0, 0.0]) + 0.1 * rng.normal(size=300)
    >>> np.flatnonzero(Lasso(alpha=0.1, tol=1e-8).fit(X, y).coef_).tolist()
    [0, 3]
    """

    _parameter_constraints = {
        k: v for k, v in ElasticNet._parameter_constraints.items() if k != "l1_ratio"}

    def __init__(self, alpha=1.0, *, tol=1e-4, max_iter=1000, fit_intercept=True,
                 solver="auto", random_state=None, verbose=0, warm_start=False, client=None,
                 backend="auto", n_workers=None, chunks_per_worker=None, local_steps=None,
                 gamma=1.0, sigma=None, acceleration="auto", straggler_policy="preempt",
                 scaling_policy=None):
        self.alpha = alpha
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.client = client
        self.backend = backend
        self.n_workers = n_workers
        self.chunks_per_worker = chunks_per_worker
        self.local_steps = local_steps
        self.gamma = gamma
        self.sigma = sigma
        self.acceleration = acceleration
        self.straggler_policy = straggler_policy
        self.scaling_policy = scaling_policy

    def _l1_ratio(self):
        return 1.0


class PoissonRegressor(RegressorMixin, _CoCoABase):
    __doc__ = f"""Poisson regression (log link) trained with distributed CoCoA+.

    Minimises scikit-learn's ``PoissonRegressor`` objective, the mean Poisson
    half deviance plus ``alpha/2 ‖w‖²``::

        Σ c_i (y_i log(y_i / μ_i) − y_i + μ_i) / Σ c_i + alpha/2 ‖w‖²,
        μ_i = exp(x_i·w + b),

    with a free (unpenalised) intercept ``b``, as scikit-learn's.  The dual
    method is SDCA for the Poisson loss: each row's dual value ``α_i =
    c_i (y_i − μ_i)`` is read as the mean it implies, the coordinate step is
    a safeguarded Newton iteration in ``log μ``, and the duality gap
    certifies the result as for the other losses.

    Parameters
    ----------
    alpha : float, default=1.0
        Regularisation strength of the L2 penalty (must be positive).
    tol : float, default=1e-4
        Stop when the relative duality gap ``(P(w) - D(α)) / P(w)`` is at most
        ``tol``; the gap bounds the relative primal suboptimality from above.
    max_iter : int, default=1000
        Maximum number of CoCoA+ rounds (one local pass per worker each).
        More than the other estimators' 200: the intercept is free, and moves
        between rounds (the user guide's *The intercept*).
    fit_intercept : bool, default=True
        Fit a free intercept (the log of a baseline mean).\
{_COMMON_TAIL}
    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Coefficients on the log scale, float64.
    intercept_ : float
        The intercept; ``0.0`` without ``fit_intercept``.
{_ATTRS_DOC}
    See Also
    --------
    sklearn.linear_model.PoissonRegressor : The single-machine estimator.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic import PoissonRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 3))
    >>> y = rng.poisson(np.exp(X @ np.array([0.5, -0.3, 0.2]) + 1.0))
    >>> model = PoissonRegressor(alpha=1e-3, tol=1e-6).fit(X, y)
    >>> np.round(model.coef_, 1).tolist(), round(float(model.intercept_), 1)
    ([0.5, -0.3, 0.2], 1.0)
    """

    _parameter_constraints = {
        **_CoCoABase._parameter_constraints,
        "alpha": [Interval(numbers.Real, 0, None, closed="neither")],
    }

    _loss = "poisson"
    # scikit-learn's problem: the intercept is never penalised
    penalize_intercept = False
    intercept_scaling = 1.0

    def __init__(self, alpha=1.0, *, tol=1e-4, max_iter=1000, fit_intercept=True,
                 random_state=None, verbose=0, warm_start=False,
                 client=None, backend="auto", n_workers=None, chunks_per_worker=None,
                 local_steps=None, gamma=1.0, sigma=None, acceleration="auto",
                 straggler_policy="preempt", scaling_policy=None):
        self.alpha = alpha
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.client = client
        self.backend = backend
        self.n_workers = n_workers
        self.chunks_per_worker = chunks_per_worker
        self.local_steps = local_steps
        self.gamma = gamma
        self.sigma = sigma
        self.acceleration = acceleration
        self.straggler_policy = straggler_policy
        self.scaling_policy = scaling_policy

    def _C(self):
        # scikit-learn divides the deviance by Σ c_i, the driver's problem by
        # n: λ = alpha·Σ c_i / n, that is C = 1 / (alpha·Σ c_i)
        return 1.0 / (self.alpha * self._weight_sum)

    def _is_classifier(self):
        return False

    def _make_encoder(self, y, sample_weight):
        # (n, 1): scikit-learn's DataConversionWarning; (n, k): its ValueError
        y = column_or_1d(np.asarray(y, dtype=np.float64), warn=True)
        _check_counts(y.min(initial=0.0), float(sample_weight @ y), sample_weight.sum())
        self._weight_sum = float(sample_weight.sum())
        return TargetEncoder(n_targets=1)

    def _make_encoder_dask(self, y, sample_weight, client=None):
        import dask.array as da

        if y.ndim == 2 and y.shape[1] == 1:
            column_or_1d(np.empty((1, 1)), warn=True)   # scikit-learn's warning
            y = y[:, 0]
        if y.ndim != 1:
            raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} "
                             "instead.")
        sw = da.ones(y.shape[0], chunks=y.chunks[0]) if sample_weight is None \
            else sample_weight
        smallest_y, weighted, total, smallest_w = da.compute(
            y.min(), (sw * y).sum(), sw.sum(), sw.min(), scheduler=client)
        if sample_weight is not None:
            _check_weights(smallest_w, total)
        _check_counts(smallest_y, weighted, total)
        self._weight_sum = float(total)
        return TargetEncoder(n_targets=1)

    def _set_fitted(self, result, encoder, problem, dtype):
        d = problem.n_features
        w = result.w
        self.coef_ = np.ascontiguousarray(w[:d, 0], dtype=np.float64)
        self.intercept_ = float(problem.intercept_scaling * w[d, 0]) \
            if self.fit_intercept else 0.0
        self.n_iter_ = np.array([result.n_iter])
        self.history_ = result.history
        self.duality_gap_ = result.objective.relative_gap

    @_validated_fit
    def fit(self, X: MatrixLike, y: VectorLike,
            sample_weight: VectorLike | None = None) -> Self:
        """Fit the model.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)
            Training data.
        y : array-like or dask array of shape (n,)
            Counts (or any non-negative targets), with a positive sum.
        sample_weight : array-like of shape (n,), optional
            Non-negative weights of the samples.

        Returns
        -------
        self : PoissonRegressor
            The fitted estimator.
        """
        return self._fit(X, y, sample_weight)

    def predict(self, X: MatrixLike) -> ArrayResult:
        """Predict the expected counts ``exp(X @ coef_ + intercept_)``.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)

        Returns
        -------
        ndarray or dask array of shape (n,)
            The predicted means; lazy for dask input.
        """
        scores = self._decision(X)
        if _is_dask_collection(scores):
            return scores.map_blocks(np.exp, dtype=np.float64)
        return np.exp(scores)

    def score(self, X: MatrixLike, y: VectorLike,
              sample_weight: VectorLike | None = None) -> float:
        """D², the fraction of the Poisson deviance explained (as scikit-learn's).

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)
        y : array-like of shape (n,)
            True counts.
        sample_weight : array-like of shape (n,), optional
            Weights of the samples in the deviances.

        Returns
        -------
        float
            ``1 − deviance(y, predict(X)) / deviance(y, weighted mean of y)``.
        """
        from sklearn.metrics import d2_tweedie_score

        pred = self.predict(X)
        if _is_dask_collection(pred):
            pred = pred.compute()
        if _is_dask_collection(y):
            y = y.compute()
        return d2_tweedie_score(np.asarray(y), pred, sample_weight=sample_weight, power=1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True
        return tags


def _check_counts(smallest, weighted_sum, weight_sum):
    """Poisson targets: non-negative, and not all 0 where the weights count."""
    if not np.isfinite(smallest) or not np.isfinite(weighted_sum):
        raise not_finite("y")
    if smallest < 0:
        raise ValueError("Some value(s) of y are out of the valid range of the loss "
                         "'HalfPoissonLoss': PoissonRegressor needs y >= 0")
    if not weighted_sum > 0 and weight_sum > 0:
        raise ValueError("y is 0 wherever the sample weights are positive: a Poisson "
                         "model's mean would be 0 (its intercept -inf)")
