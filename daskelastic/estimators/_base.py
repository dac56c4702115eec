"""The fit every estimator shares: from ``X, y`` to the fitted attributes.

``_CoCoABase`` validates the input, maps scikit-learn's parameters to the
normalised problem (:mod:`daskelastic.objective`), hands the data to a
backend (:mod:`daskelastic.session`) and runs the rounds; the subclasses
encode the targets and store the fitted attributes.
"""

from __future__ import annotations

import copy
import dataclasses
import numbers
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import scipy.sparse as sp
from sklearn.base import (
    BaseEstimator,
    _fit_context,  # no public name: it runs the _parameter_constraints checks
    clone,
)
from sklearn.utils._param_validation import (  # no public names exist
    Hidden,
    Interval,
    StrOptions,
)
from sklearn.utils.validation import (
    _check_sample_weight,  # no public name: the checks scikit-learn's own fits make
    check_is_fitted,
    validate_data,
)

from .. import config
from ..backends.simulated import ClusterModel
from ..driver import Problem, run_cocoa
from ..encoding import (
    categorical_columns,
    encode_frame,
    fit_frame_encoder,
)
from ..losses import loss_code
from ..monitoring import FitMonitor, ProgressBar
from ..objective import lambda_from_C
from ..placement import make_chunks, split_rows
from ..policies import STRAGGLER_POLICIES, StragglerPolicy, make_straggler_policy
from ..scaling import SCALING_POLICIES, ScalingPolicy
from ..session import BACKENDS, _in_dask_task, client_context, current_client, fit_session
from ._input import (
    _DENSE_ENCODING,
    _check_numeric,
    _columns_of,
    _dask_to_array,
    _encode_dask_frame,
    _is_dask_collection,
)
from ._newton import fit_newton, uses_newton
from ._output import _block_decision, dask_decision, dask_score

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
        if self._C() == np.inf:      # no penalty (scikit-learn's C=np.inf, penalty=None)
            return 0.0, 0.0
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
            if free:
                X, y, sample_weight, encoder = self._without_weightless_classes(
                    X, y, sample_weight, encoder)
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
        elif self._uses_newton(problem):
            result = self._fit_newton(X, y if dask_input else Y,
                                      sample_weight if dask_input else sw, encoder, problem,
                                      w_start, dask_input, held, centre)
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

    def _without_weightless_classes(self, X, y, sample_weight, encoder):
        """The rows and encoder to fit with a free intercept (a classifier's own)."""
        return X, y, sample_weight, encoder

    def _uses_gram(self, problem):
        """Whether the fit runs the Gram solver (:mod:`daskelastic.gram`) instead of rounds."""
        return False

    def _uses_newton(self, problem):
        """Whether the fit runs the Newton solver (:mod:`daskelastic.newton`) instead of rounds."""
        return uses_newton(self, problem)

    def _fit_newton(self, X, Y, sw, encoder, problem, w_start, dask_input, held, centre):
        """The Newton solver's :class:`~daskelastic.driver.FitResult` (see ``_newton.py``)."""
        return fit_newton(self, X, Y, sw, encoder, problem, w_start, dask_input, held, centre)

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
                from ..backends.inprocess import InProcessBackend

                k = self.n_workers or 1
                chunks = make_chunks(X, Y, sw, split_rows(n, n_chunks=k * cpw),
                                     shuffle=None if k == 1 else self._seed())
                backend = InProcessBackend(problem, chunks, n_workers=k)
            elif kind == "simulated":
                backend = self._simulated_backend(X, Y, sw, problem, cpw)
            else:
                from ..backends.dask import DaskBackend

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
                if self.scaling_policy is not None:
                    # an elastic fit asks an autoscaler for the workers it
                    # would use: an idle period may have scaled the cluster down
                    wanted = self.n_workers or config.get("elastic.workers-wanted")
                    if dask_input:
                        wanted = min(wanted, len(X.chunks[0]))
                    backend.ask_for_workers(wanted)
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
        from ..backends.simulated import SimulatedBackend

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

    def _set_run(self, result):
        """The attributes every estimator keeps of its run: rounds, history, certified gap.

        ``n_iter_`` is scikit-learn's LogisticRegression's, an int32 array of
        shape (1,); the estimators whose scikit-learn counterparts give
        another shape (an int, one count per target) override this.
        """
        self.n_iter_ = np.array([result.n_iter], dtype=np.int32)
        self.history_ = result.history
        self.duality_gap_ = result.objective.relative_gap
        # (the Gram and Newton solvers mark their history's entries)
        self.solver_ = result.history[-1].get("solver", "cocoa")

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
            # _fit_holding): the blocks are centred as they load, in X's dtype.
            # (Means of the finite values: a NaN or inf is then reported in
            # its own block as the blocks load, not in every centred one.)
            finite = da.where(da.isfinite(X), X, 0)
            if sample_weight is None:
                means = finite.mean(axis=0, dtype=np.float64)
            else:
                total = sample_weight.sum()
                means = da.where(total > 0, (sample_weight[:, None] * finite).sum(axis=0)
                                 / da.where(total > 0, total, 1.0), finite.mean(axis=0))
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
        try:
            encoder = self._make_encoder_dask(held[1] if held else y,
                                              sample_weight if sample_weight is None
                                              or not held else held[2], client)
        except Exception as error:
            # the labels' frames hold persisted arrays (``held`` itself is
            # emptied by ``_fit``): raise the error without their traceback
            raise error.with_traceback(None) from None
        if means is not None and held:   # (computed with X's blocks, not from X again)
            means = held.pop()
        if means is not None:
            means = np.asarray(means.compute(scheduler=client), dtype=np.float64)
        return X, y, sample_weight, encoder, means

    def _make_encoder_dask(self, y, sample_weight, client=None):
        raise NotImplementedError

    # -- prediction ---------------------------------------------------------------
    def _decision(self, X, columns=None):
        """``X @ coef_.T + intercept_``; lazy for dask input (see :func:`dask_decision`),
        ``columns`` naming the columns of a dask DataFrame's 2-d result."""
        check_is_fitted(self)
        frame_encoder = getattr(self, "feature_encoder_", None)
        if _is_dask_collection(X):
            # scikit-learn's checks of the feature names and their number,
            # without computing anything
            validate_data(self, _columns_of(X), reset=False, skip_check_array=True)
            if frame_encoder is None:
                _check_numeric(X)
            return dask_decision(X, frame_encoder, self.coef_, self.intercept_, columns)
        if frame_encoder is not None:
            validate_data(self, _columns_of(X), reset=False, skip_check_array=True)
            return _block_decision(encode_frame(frame_encoder, X), self.coef_,
                                   self.intercept_)
        X = validate_data(self, X, accept_sparse="csr", reset=False,
                          dtype=[np.float64, np.float32])
        return _block_decision(X, self.coef_, self.intercept_)

    def _score_dask(self, kind, X, y, sample_weight, n_targets=1):
        """``kind`` of ``predict(X)`` against ``y``, for dask ``X``: summed on the
        workers (see :func:`dask_score`); None for ``X`` in memory."""
        if not _is_dask_collection(X):
            return None
        return dask_score(kind, self.predict(X), y, sample_weight, n_targets,
                          client=self.client or current_client())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


#: A sparse X in memory of at most this many values (rows × columns) is made
#: dense for a free intercept, to be centred (128 MB in float64).
_DENSE_FOR_CENTRING = 1 << 24

