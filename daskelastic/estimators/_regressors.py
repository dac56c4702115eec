"""Ridge, ElasticNet, Lasso and PoissonRegressor: targets and their offsets."""

from __future__ import annotations

import numbers
import time
import warnings
from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import (  # no public names exist
    Interval,
    StrOptions,
)
from sklearn.utils.validation import column_or_1d

from ..objective import lambda_from_C
from ..session import client_context, current_client
from ..targets import TargetEncoder, not_finite, sums_overflow
from ._base import _CoCoABase, _validated_fit
from ._docs import (
    _ATTRS_DOC,
    _COMMON_HEAD,
    _COMMON_TAIL,
    _INTERCEPT_DOC,
    _N_ITER_CD_DOC,
    _N_ITER_INT_DOC,
    _N_ITER_TARGETS_DOC,
    _NEWTON_SOLVER_ATTR_DOC,
    _NEWTON_SOLVER_DOC,
    _SOLVER_ATTR_DOC,
    _SOLVER_DOC,
)
from ._input import (
    _check_counts,
    _check_weights,
    _is_dask_collection,
)
from ._output import in_memory, map_predictions

if TYPE_CHECKING:
    from .._typing import ArrayResult, MatrixLike, Self, VectorLike


#: ``solver="auto"`` of ElasticNet and Lasso uses the Gram solver up to this
#: many features: its one pass costs ``n·s²`` (``s`` values per row) where a
#: CoCoA+ round costs ``n·s``, and the rounds of an L1 fit number in the
#: hundreds; the Gram matrix is then at most 512 KB.
GRAM_MAX_FEATURES = 256


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
        self._set_run(result)
        # (the Gram solver marks its history's entries)
        self.solver_ = result.history[-1].get("solver", "cocoa")

    def _gram_chosen(self, n_features):
        """Whether ``solver`` (``"auto"``: up to :data:`GRAM_MAX_FEATURES`) fits by sums.

        A simulated backend and a ``scaling_policy`` ask for rounds: a
        ``ValueError`` with the Gram solver named, nothing for ``"auto"``.
        """
        if self.solver == "cocoa":
            return False
        rounds_wanted = self._cluster_model() is not None or self.scaling_policy is not None
        if self.solver != "auto":
            if rounds_wanted:
                raise ValueError(f"solver={self.solver!r} runs no rounds: a simulated "
                                 "backend (backend=ClusterModel(...)) and scaling_policy "
                                 "need solver='cocoa' (or 'auto')")
            return True
        return n_features <= GRAM_MAX_FEATURES and not rounds_wanted

    def _fit_gram(self, X, Y, sw, encoder, problem, w_start, dask_input):
        """The Gram solver's :class:`~daskelastic.driver.FitResult` (:mod:`daskelastic.gram`).

        ``X`` is centred already where it is dense and the intercept free;
        otherwise (sparse rows) the sums are centred here and the intercept
        coefficient set to ``ȳ − μ·w``.  A penalised intercept (Ridge's
        ``penalize_intercept=True``) is the coefficient of a constant column
        added to the sums.
        """
        from ..driver import FitResult
        from ..gram import gram_sums
        from ..objective import Objective

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
            # input in memory was checked finite: its sums overflowed; dask
            # blocks are not checked before they are summed
            raise not_finite("X, y or sample_weight") if dask_input \
                else sums_overflow("X, y and sample_weight", cd=self._gram_name == "gram")
        free = problem.free_intercept
        penalised = bool(problem.intercept_scaling) and not free
        if free:
            sums, x_mean, y_mean = sums.centred()
        elif penalised:
            sums = sums.with_constant(problem.intercept_scaling)
        w, n_iter, history, converged = self._gram_solve(
            sums, problem, None if w_start is None else w_start[:d + penalised], started)
        coef = np.zeros((d + 1, w.shape[1]))
        coef[:w.shape[0]] = w
        if free:
            coef[d] = (y_mean - x_mean @ w) / problem.intercept_scaling
        for entry in history:
            entry.update(n_workers=workers, solver=self._gram_name)
        last = history[-1]
        objective = Objective(primal=last["primal"], dual=last["dual"], gap=last["gap"],
                              relative_gap=last["duality_gap"])
        if self.verbose:
            passes = f"{n_iter} passes, " if self._gram_name == "gram" else ""
            print(f"[daskelastic] {self._gram_name} solver on {sums.rows:,} rows: "
                  f"{passes}relative duality gap {objective.relative_gap:.2e}", flush=True)
        if not converged:
            warnings.warn(
                f"daskelastic did not reach tol={self.tol:g} in max_iter={self.max_iter} "
                f"passes of coordinate descent (relative duality gap "
                f"{objective.relative_gap:.3g}); increase max_iter or tol",
                ConvergenceWarning, stacklevel=4)
        return FitResult(coef, n_iter, converged, objective, history)

    #: the name ``solver_`` gives the Gram solver's fits
    _gram_name = "gram"

    def _n_targets(self):
        return 1 if np.ndim(self.coef_) == 1 else np.shape(self.coef_)[0]

    def _check_positive(self):
        """Refuse ``positive=True``, naming what fits it instead."""
        if self.positive:
            # a projected coordinate step needs its own certificate (the gap
            # of the constrained problem) in every solver: not there yet
            name = type(self).__name__
            raise ValueError(
                f"positive=True is not available in daskelastic's {name}: its solvers "
                "have no certified step for non-negative coefficients yet. Fit "
                f"sklearn.linear_model.{name}(positive=True) in memory, or "
                "scipy.optimize.nnls for least squares")

    def predict(self, X: MatrixLike) -> ArrayResult:
        """Predict targets.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)

        Returns
        -------
        ndarray, dask array, dask Series or dask DataFrame of shape (n,) or (n, n_targets)
            Predicted targets, of shape (n,) for one target (as ``coef_``);
            float32 when ``X`` and ``coef_`` both are, else float64; lazy for
            dask input, and on the index of a dask DataFrame.
        """
        return self._decision(X)

    def score(self, X: MatrixLike, y: VectorLike,
              sample_weight: VectorLike | None = None) -> float:
        """R² of ``predict(X)`` against ``y``, as scikit-learn's ``r2_score``.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)
        y : array-like or dask collection of shape (n,) or (n, n_targets)
            True targets, matched to the rows of ``X`` by position.
        sample_weight : array-like or dask collection of shape (n,), optional
            Weights of the samples.

        Returns
        -------
        float
            The coefficient of determination, averaged over the targets; for
            dask ``X`` summed on the workers, block by block.
        """
        score = self._score_dask("r2", X, y, sample_weight, self._n_targets())
        if score is None:
            score = super().score(X, in_memory(y), in_memory(sample_weight))
        return score

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class Ridge(_LinearRegressor):
    __doc__ = f"""Ridge regression: the Cholesky solve of the Gram system, or CoCoA+.

    Minimises ``Σ c_i (y_i - x_i·w - b)² + alpha ‖w‖²`` with ``b`` free
    (scikit-learn's Ridge), for one or several targets.  Up to 256 features
    one pass sums the rows' Gram matrix and a Cholesky solve gives the exact
    solution, whatever ``alpha`` (``solver``); otherwise CoCoA+'s rounds
    solve it, to a duality gap.  With ``penalize_intercept=True`` the
    intercept is the coefficient of a constant feature of value
    ``intercept_scaling`` and is penalised too.

    Parameters
    ----------
    alpha : float, default=1.0
        Regularisation strength; 0 (least squares, as scikit-learn accepts
        it) needs the Cholesky solver.\
{_COMMON_HEAD}{_INTERCEPT_DOC}
    solver : {{"auto", "cholesky", "cocoa"}}, default="auto"
        ``"cholesky"``: one pass sums the rows' Gram matrix ``Σ c_i x_i
        x_iᵀ`` and correlations (block by block on the cluster for dask
        input, in this process for in-memory input), then a Cholesky solve of
        ``d × d`` numbers gives the exact solution, as scikit-learn's
        ``solver="cholesky"`` does; its duality gap is computed from the same
        sums.  ``"cocoa"``: CoCoA+ rounds on the workers, with straggler
        policies, elastic scaling and the dashboard, whose rounds grow as
        ``alpha`` shrinks.  ``"auto"``: ``"cholesky"`` up to 256 features,
        unless a simulated ``backend`` (a ``ClusterModel``) or a
        ``scaling_policy`` asks for rounds.  With ``"cholesky"`` ``tol``,
        ``max_iter`` and the round parameters below (``n_workers`` to
        ``scaling_policy``) are unused.
    positive : bool, default=False
        The constraint of non-negative coefficients (scikit-learn's); ``True`` is
        refused with a ``ValueError`` that names what fits it (scikit-learn's
        estimator in memory).{_COMMON_TAIL}
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
        ``fit_intercept``.\
{_N_ITER_TARGETS_DOC}{_ATTRS_DOC}    solver_ : {{"cholesky", "cocoa"}}
        The solver the fit ran (see ``solver``; scikit-learn's Ridge names the
        one it chose).  After ``"cholesky"`` ``n_iter_`` counts its one solve
        (scikit-learn's direct solvers give None), and ``history_`` has one entry
        with the keys ``round``, ``time``, ``primal``, ``dual``, ``gap``,
        ``duality_gap``, ``n_workers`` and ``solver``.

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
        # 0 (least squares) as scikit-learn's, for the Cholesky solver
        "alpha": [Interval(numbers.Real, 0, None, closed="left")],
        "solver": [StrOptions({"auto", "cholesky", "cocoa"})],
        "positive": ["boolean"],
    }

    _gram_name = "cholesky"

    def __init__(self, alpha=1.0, *, tol=1e-4, max_iter=200, fit_intercept=True,
                 intercept_scaling=1.0, penalize_intercept=False, solver="auto",
                 positive=False, random_state=None, verbose=0, warm_start=False,
                 client=None, backend="auto", n_workers=None, chunks_per_worker=None,
                 local_steps=None, gamma=1.0, sigma=None, acceleration="auto",
                 straggler_policy="preempt", scaling_policy=None):
        self.alpha = alpha
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.penalize_intercept = penalize_intercept
        self.solver = solver
        self.positive = positive
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

    def _penalties(self, n):
        return self.alpha / n, 0.0     # λ = 1 / (C n) with C = 1 / alpha; alpha may be 0

    def _uses_gram(self, problem):
        gram = self._gram_chosen(problem.n_features)
        if not gram and self.alpha == 0:
            raise ValueError(
                "alpha=0 (least squares) needs solver='cholesky': CoCoA+'s dual needs a "
                f"penalty (solver={self.solver!r}"
                + (f", and {problem.n_features} features > {GRAM_MAX_FEATURES}, the "
                   "most 'auto' sums" if self.solver == "auto" else "") + ")")
        if not gram:   # (the rounds' λ = alpha / n must be a normal float64)
            lambda_from_C(1.0 / self.alpha, problem.n_samples)
        return gram

    def _gram_solve(self, sums, problem, w_start, started):
        from ..gram import solve_ridge

        # scikit-learn's Ridge weighs alpha against Σ c_i (y − x·w)², not its mean
        total = sums.weight if sums.weight > 0 else 1.0
        w, history = solve_ridge(sums, self.alpha / total, start=started)
        return w, 1, history, True     # a direct solve: tol and max_iter are unused

    def _set_run(self, result):
        # scikit-learn's iterative Ridge solvers count per target; here the
        # targets share the rounds (the Cholesky solver counts its one solve)
        super()._set_run(result)
        self.n_iter_ = np.full(self._n_targets(), result.n_iter, dtype=np.int32)

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
        self._check_positive()
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
{_COMMON_HEAD.replace("default=200", "default=1000")}{_SOLVER_DOC}
    positive : bool, default=False
        The constraint of non-negative coefficients (scikit-learn's); ``True`` is
        refused with a ``ValueError`` that names what fits it (scikit-learn's
        estimator in memory).{_COMMON_TAIL}
    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Coefficients, with exact zeros; shape (n_features,) for one target.
        float32 for float32 ``X``, else float64.
    intercept_ : float or ndarray of shape (n_targets,)
        Intercepts; ``0.0`` without ``fit_intercept``.\
{_N_ITER_CD_DOC}{_ATTRS_DOC}{_SOLVER_ATTR_DOC}
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
        "positive": ["boolean"],
    }

    # not parameters: the intercept is free, centred away as scikit-learn's is
    penalize_intercept = False
    intercept_scaling = 1.0

    def __init__(self, alpha=1.0, *, l1_ratio=0.5, tol=1e-4, max_iter=1000,
                 fit_intercept=True, solver="auto", positive=False, random_state=None,
                 verbose=0, warm_start=False,
                 client=None, backend="auto", n_workers=None, chunks_per_worker=None,
                 local_steps=None, gamma=1.0, sigma=None, acceleration="auto",
                 straggler_policy="preempt", scaling_policy=None):
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.positive = positive
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
        return self._gram_chosen(problem.n_features)

    def _gram_solve(self, sums, problem, w_start, started):
        from ..gram import solve

        w, n_iter, history = solve(sums, problem.l1, problem.lam, tol=self.tol,
                                   max_iter=self.max_iter, w_start=w_start, start=started)
        return w, n_iter, history, history[-1]["duality_gap"] <= self.tol

    def _set_run(self, result):
        # scikit-learn's ElasticNet fits its targets one by one: an int and a
        # float for one target, a list and an array for several.  Here they
        # share the passes, and the gap is their sum, which bounds each one's
        super()._set_run(result)
        m = self._n_targets()
        gap = self.coef_.dtype.type(result.objective.gap)   # (in coef_'s dtype, as theirs)
        self.n_iter_ = int(result.n_iter) if m == 1 else [int(result.n_iter)] * m
        self.dual_gap_ = gap if m == 1 else np.full(m, gap)

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
        self._check_positive()
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
{_COMMON_HEAD.replace("default=200", "default=1000")}{_SOLVER_DOC}
    positive : bool, default=False
        The constraint of non-negative coefficients (scikit-learn's); ``True`` is
        refused with a ``ValueError`` that names what fits it (scikit-learn's
        estimator in memory).{_COMMON_TAIL}
    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Coefficients, with exact zeros; shape (n_features,) for one target.
        float32 for float32 ``X``, else float64.
    intercept_ : float or ndarray of shape (n_targets,)
        Intercepts; ``0.0`` without ``fit_intercept``.\
{_N_ITER_CD_DOC}{_ATTRS_DOC}{_SOLVER_ATTR_DOC}
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
                 solver="auto", positive=False, random_state=None, verbose=0,
                 warm_start=False, client=None,
                 backend="auto", n_workers=None, chunks_per_worker=None, local_steps=None,
                 gamma=1.0, sigma=None, acceleration="auto", straggler_policy="preempt",
                 scaling_policy=None):
        self.alpha = alpha
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.positive = positive
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
        Regularisation strength of the L2 penalty (must be positive).\
{_NEWTON_SOLVER_DOC.format(extra="")}
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
        Coefficients on the log scale: float32 for float32 ``X`` (the solver
        computes in float64 and rounds them), as scikit-learn's
        PoissonRegressor gives; float64 otherwise.
    intercept_ : float
        The intercept, a numpy scalar of ``coef_``'s dtype; ``0.0`` without
        ``fit_intercept``.\
{_N_ITER_INT_DOC}{_ATTRS_DOC}{_NEWTON_SOLVER_ATTR_DOC}
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
        "solver": [StrOptions({"auto", "newton", "cocoa"})],
    }

    _loss = "poisson"
    # scikit-learn's problem: the intercept is never penalised
    penalize_intercept = False
    intercept_scaling = 1.0

    def __init__(self, alpha=1.0, *, solver="auto", tol=1e-4, max_iter=1000,
                 fit_intercept=True, random_state=None, verbose=0, warm_start=False,
                 client=None, backend="auto", n_workers=None, chunks_per_worker=None,
                 local_steps=None, gamma=1.0, sigma=None, acceleration="auto",
                 straggler_policy="preempt", scaling_policy=None):
        self.alpha = alpha
        self.solver = solver
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
        # X's float dtype, as scikit-learn's PoissonRegressor gives
        d = problem.n_features
        w = result.w
        self.coef_ = np.ascontiguousarray(w[:d, 0], dtype=dtype)
        self.intercept_ = dtype(problem.intercept_scaling * w[d, 0]) \
            if self.fit_intercept else 0.0
        self._set_run(result)
        self.n_iter_ = int(result.n_iter)   # an int, as scikit-learn's lbfgs count

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
        ndarray, dask array or dask Series of shape (n,)
            The predicted means; lazy for dask input, and on the index of a
            dask DataFrame.
        """
        scores = self._decision(X)
        return map_predictions(scores, np.exp, dtype=getattr(scores, "dtype", np.float64))

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

        score = self._score_dask("d2_poisson", X, y, sample_weight)
        if score is not None:
            return score
        pred, y, sample_weight = self.predict(X), in_memory(y), in_memory(sample_weight)
        return d2_tweedie_score(np.asarray(y), pred, sample_weight=sample_weight, power=1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True
        return tags
