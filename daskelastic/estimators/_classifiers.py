"""LogisticRegression and LinearSVC: labels, class weights and probabilities."""

from __future__ import annotations

import inspect
import numbers
import warnings
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassifierMixin
from sklearn.utils._param_validation import (  # no public names exist
    Interval,
    StrOptions,
)
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from ..targets import TargetEncoder, not_finite
from ._base import _CoCoABase, _validated_fit
from ._docs import (
    _ATTRS_DOC,
    _CLASS_WEIGHT_DOC,
    _COMMON_HEAD,
    _COMMON_TAIL,
    _INTERCEPT_DOC,
    _INTERCEPT_PENALISED_DOC,
    _N_ITER_ARRAY_DOC,
    _N_ITER_INT_DOC,
    _NEWTON_SOLVER_ATTR_DOC,
    _NEWTON_SOLVER_DOC,
    _PENALTY_AUTO_DOC,
    _PENALTY_DOC,
)
from ._input import (
    _block_labels_and_weights,
    _check_class_weights,
    _check_weights,
    _distinct_labels,
    _no_weight_left,
)
from ._output import in_memory, map_predictions

if TYPE_CHECKING:
    from .._typing import ArrayResult, MatrixLike, Self, VectorLike


#: Whether scikit-learn's "balanced" class weights count ``sample_weight``
#: (scikit-learn 1.9 passes it from its liblinear fits); daskelastic does as
#: the installed scikit-learn does, to solve the same problem.
_BALANCED_COUNTS_WEIGHTS = "sample_weight" in inspect.signature(
    compute_class_weight).parameters


class _ClassifierBase(ClassifierMixin, _CoCoABase):
    _parameter_constraints = {
        **_CoCoABase._parameter_constraints,
        "C": [Interval(numbers.Real, 0, None, closed="neither")],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "penalty": [StrOptions({"l1", "l2", "elasticnet"})],
        "l1_ratio": [None, Interval(numbers.Real, 0, 1, closed="both")],
    }

    #: The scikit-learn solver whose attribute types the fitted estimator
    #: gives: "liblinear" float64 coefficients and an intercept of 0.0 when
    #: there is none; "lbfgs" X's float dtype and an array of zeros
    _sklearn_solver = "liblinear"

    def _is_classifier(self):
        return True

    def _penalty(self):
        """The penalty fitted: ``penalty``, or for ``"auto"`` the one ``l1_ratio`` names."""
        if self.penalty != "auto":
            return self.penalty
        rho = self.l1_ratio
        return "l2" if rho is None or rho == 0 else "l1" if rho == 1 else "elasticnet"

    def _check_penalty(self):
        """scikit-learn's error and warnings for ``l1_ratio`` against ``penalty``.

        An ``l1_ratio`` that an ``"l1"`` or ``"l2"`` penalty contradicts is
        ignored with scikit-learn's ``UserWarning``, as scikit-learn's
        LogisticRegression ignores it.
        """
        penalty, rho = self._penalty(), self.l1_ratio
        if penalty == "elasticnet" and rho is None:
            raise ValueError("l1_ratio must be specified when penalty is elasticnet.")
        if penalty == "elasticnet" or rho is None or rho == (1 if penalty == "l1" else 0):
            return
        said = (f"l1_ratio parameter is only used when penalty is 'elasticnet'. Got "
                f"(penalty={penalty})" if 0 < rho < 1 else
                f"Inconsistent values: penalty={penalty} with l1_ratio={rho}")
        warnings.warn(f"{said}: l1_ratio is ignored; pass penalty='elasticnet' for an "
                      "elastic-net penalty, or leave l1_ratio unset", UserWarning,
                      stacklevel=4)

    def _l1_ratio(self):
        penalty = self._penalty()
        if penalty == "elasticnet":
            return float(self.l1_ratio)
        return 1.0 if penalty == "l1" else 0.0

    def decision_function(self, X: MatrixLike) -> ArrayResult:
        """Signed distance of each sample to the decision boundary.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)

        Returns
        -------
        ndarray, dask array, dask Series or dask DataFrame
            Shape (n,) for two classes, (n, n_classes) otherwise; lazy for
            dask input, and on its index for a dask DataFrame (a Series for
            two classes, else a DataFrame whose columns are ``classes_``).
        """
        check_is_fitted(self)
        return self._decision(X, columns=list(self.classes_))

    def score(self, X: MatrixLike, y: VectorLike,
              sample_weight: VectorLike | None = None) -> float:
        """The mean accuracy of ``predict(X)`` against ``y``, as scikit-learn's.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)
        y : array-like, dask array or dask Series of shape (n,)
            True labels, matched to the rows of ``X`` by position.
        sample_weight : array-like, dask array or dask Series of shape (n,), optional
            Weights of the samples.

        Returns
        -------
        float
            The (weighted) fraction of correct predictions; for dask ``X``
            counted on the workers, block by block.
        """
        score = self._score_dask("accuracy", X, y, sample_weight)
        if score is None:
            score = super().score(X, in_memory(y), in_memory(sample_weight))
        return score

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

    def _without_weightless_classes(self, X, y, sample_weight, encoder):
        """Without the classes of no weight, when two or more others have some.

        With a free intercept, a class whose rows weigh nothing in all (a
        ``class_weight`` of 0, say) has no optimum: its intercept falls
        without bound, and the duality gap stays near 1.  Its limit is the
        model of the other classes with that class's probability 0, which
        the fit solves on the rows of the other classes; ``_set_fitted`` adds
        the class back (see :func:`_add_weightless_classes`).  Not for a warm
        start, whose classes are the last fit's.
        """
        self._weightless = None
        classes = encoder.classes
        if self.warm_start and hasattr(self, "coef_"):
            return X, y, sample_weight, encoder
        where = np.searchsorted(classes, y)
        weights = sample_weight if encoder.class_weight is None \
            else sample_weight * encoder.class_weight[where]
        totals = np.bincount(where, weights=weights, minlength=classes.shape[0])
        present = totals > 0
        if present.all() or present.sum() < 2:
            return X, y, sample_weight, encoder
        self._weightless = (classes, present)
        rows = present[where]
        kept = classes[present]
        encoder = TargetEncoder(
            classes=kept, n_targets=1 if kept.shape[0] == 2 else kept.shape[0],
            class_weight=None if encoder.class_weight is None
            else encoder.class_weight[present])
        return X[rows], y[rows], sample_weight[rows], encoder

    def _set_fitted(self, result, encoder, problem, dtype):
        # (w is float64 whatever X's dtype: rounded to float32 where the
        # scikit-learn solver keeps it)
        lbfgs = self._sklearn_solver == "lbfgs"
        dtype = dtype if lbfgs else np.float64
        self.classes_ = encoder.classes
        d = problem.n_features
        w = result.w
        if getattr(self, "_weightless", None) is not None:
            self.classes_, present = self._weightless
            w = _add_weightless_classes(w, present)
        self.coef_ = np.ascontiguousarray(w[:d].T, dtype=dtype)
        if self.fit_intercept:
            self.intercept_ = (problem.intercept_scaling * w[d]).astype(dtype)
        else:
            self.intercept_ = np.zeros(w.shape[1], dtype=dtype) if lbfgs else 0.0
        self._set_run(result)

    def densify(self) -> Self:
        """Convert ``coef_`` (back) to a dense numpy array, as scikit-learn's ``densify``.

        ``coef_`` is dense after a fit; this undoes :meth:`sparsify`, and is a
        no-op otherwise.

        Returns
        -------
        self
            The fitted estimator.
        """
        check_is_fitted(self, msg="Estimator, %(name)s, must be fitted before densifying.")
        if sp.issparse(self.coef_):
            self.coef_ = self.coef_.toarray()
        return self

    def sparsify(self) -> Self:
        """Convert ``coef_`` to a scipy.sparse CSR matrix, as scikit-learn's ``sparsify``.

        For an L1 or elastic-net fit, whose coefficients have exact zeros,
        the sparse matrix can be much smaller to store.  ``intercept_`` is not
        converted.  Predictions work as before; a ``warm_start`` fit needs
        :meth:`densify` first.

        Returns
        -------
        self
            The fitted estimator.
        """
        check_is_fitted(self, msg="Estimator, %(name)s, must be fitted before sparsifying.")
        self.coef_ = sp.csr_matrix(self.coef_)
        return self

    def _decision(self, X, columns=None):
        if sp.issparse(getattr(self, "coef_", None)):
            # the shared decision reads dense coefficients: a shallow copy
            # holds them, and this estimator stays sparsified (not copy.copy,
            # which pickles: without the client)
            dense = object.__new__(type(self))
            dense.__dict__.update(self.__dict__, coef_=self.coef_.toarray())
            return _CoCoABase._decision(dense, X, columns)
        return super()._decision(X, columns)

    def predict(self, X: MatrixLike) -> ArrayResult:
        """Predict class labels.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)

        Returns
        -------
        ndarray, dask array or dask Series of shape (n,)
            Predicted class labels; lazy for dask input, and a dask Series
            on the index of a dask DataFrame.
        """
        scores = self.decision_function(X)
        return map_predictions(scores, _scores_to_labels, self.classes_,
                               dtype=self.classes_.dtype,
                               **({"drop_axis": 1} if scores.ndim == 2 else {}))


def _add_weightless_classes(w, present):
    """The softmax coefficients of all classes from a fit of the ``present`` ones.

    The classes of no weight get coefficients 0 and an intercept 40 below
    the smallest intercept fitted: their probability is then below
    ``e^-40`` times another class's on rows near the data (the limit of
    their intercepts, which fall without bound), and scikit-learn's lbfgs
    predicts them no more than this does.  A fit of two present classes is
    written in the softmax's symmetric form (``±z/2``).  The intercepts are
    centred (their sum 0), as the softmax fit's are.
    """
    if w.shape[1] == 1:      # two classes: z = x·w + b for the second
        w = np.hstack([-0.5 * w, 0.5 * w])
    full = np.zeros((w.shape[0], present.shape[0]))
    full[:, present] = w
    full[-1, ~present] = w[-1].min() - 40.0
    full[-1] -= full[-1].mean()
    return full


def _scores_to_labels(scores, classes):
    if scores.ndim == 1:
        return classes[(scores > 0).astype(int)]
    return classes[np.argmax(scores, axis=1)]


class LogisticRegression(_ClassifierBase):
    __doc__ = f"""Regularised logistic regression trained with distributed CoCoA+.

    Minimises ``C Σ c_i log(1 + exp(-y_i (x_i·w + b))) + ½‖w‖²`` with ``b``
    free, scikit-learn's problem (``penalize_intercept=True`` penalises ``b``
    too, liblinear's problem), or with an L1 or elastic-net penalty
    (``penalty``, ``l1_ratio``), with an SDCA local solver per worker, on a
    Dask cluster or in-process.  With three or more classes
    the loss is the multinomial (softmax) one, ``C Σ c_i (log Σ_k exp(z_ik) −
    z_iy_i) + ½‖W‖²``, as scikit-learn's default; one-vs-rest is
    ``sklearn.multiclass.OneVsRestClassifier(LogisticRegression())``.

    Parameters
    ----------
    C : float, default=1.0
        Inverse regularisation strength, as in scikit-learn.\
{_PENALTY_AUTO_DOC}{_NEWTON_SOLVER_DOC.format(extra="")}{_COMMON_HEAD}{_INTERCEPT_DOC}{_CLASS_WEIGHT_DOC}{_COMMON_TAIL}
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    coef_ : ndarray or scipy.sparse matrix of shape (1, n_features) or (n_classes, n_features)
        Coefficients, float32 for float32 ``X`` (the solver computes in
        float64 and rounds them), as scikit-learn's default ``"lbfgs"`` and
        its other solvers but ``"liblinear"`` give; float64 otherwise.  A
        CSR matrix after ``sparsify()``.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Intercepts, of ``coef_``'s dtype; zeros without ``fit_intercept``,
        as scikit-learn's lbfgs gives (its liblinear gives the float 0.0).\
{_N_ITER_ARRAY_DOC}{_ATTRS_DOC}{_NEWTON_SOLVER_ATTR_DOC}
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
    _sklearn_solver = "lbfgs"   # scikit-learn's default

    _parameter_constraints = {
        **_ClassifierBase._parameter_constraints,
        # (C=np.inf: no penalty, as scikit-learn's)
        "C": [Interval(numbers.Real, 0, np.inf, closed="right")],
        "penalty": [StrOptions({"auto", "l1", "l2", "elasticnet"}), None],
        "solver": [StrOptions({"auto", "newton", "cocoa"})],
    }

    def _C(self):
        # penalty=None is scikit-learn's C=np.inf (its newer spelling)
        return np.inf if self.penalty is None else self.C

    def _loss_name(self, n_targets=1):
        # three or more classes: the multinomial (softmax) loss, as scikit-learn's
        return "logistic" if n_targets == 1 else "softmax"

    def __init__(self, C=1.0, *, penalty="auto", l1_ratio=None, solver="auto", tol=1e-4,
                 max_iter=200, fit_intercept=True, intercept_scaling=1.0,
                 penalize_intercept=False,
                 class_weight=None, random_state=None,
                 verbose=0, warm_start=False, client=None, backend="auto",
                 n_workers=None, chunks_per_worker=None, local_steps=None, gamma=1.0,
                 sigma=None, acceleration="auto", straggler_policy="preempt",
                 scaling_policy=None):
        self.C = C
        self.penalty = penalty
        self.l1_ratio = l1_ratio
        self.solver = solver
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
        self._check_penalty()
        return self._fit(X, y, sample_weight)

    def predict_proba(self, X: MatrixLike) -> ArrayResult:
        """Probability of each class.

        With three or more classes, the softmax of the scores.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array, dask dataframe} of shape (n, d)

        Returns
        -------
        ndarray, dask array or dask DataFrame of shape (n, n_classes)
            Probabilities, in the order of ``classes_``; lazy for dask
            input, and a dask DataFrame on the index of a dask DataFrame,
            its columns ``classes_``.
        """
        scores = self.decision_function(X)
        if isinstance(scores, np.ndarray):
            return _scores_to_proba(scores)
        kw = {"chunks": (scores.chunks[0], (len(self.classes_),)),
              **({"new_axis": 1} if scores.ndim == 1 else {})} \
            if hasattr(scores, "chunks") else {}   # (a dask array's)
        return map_predictions(scores, _scores_to_proba, columns=list(self.classes_),
                               dtype=getattr(scores, "dtype", np.float64), **kw)

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
{_PENALTY_DOC}{_NEWTON_SOLVER_DOC.format(extra=" and the loss is the squared hinge")}\
{_COMMON_HEAD}{_INTERCEPT_PENALISED_DOC}{_CLASS_WEIGHT_DOC}{_COMMON_TAIL}
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    coef_ : ndarray or scipy.sparse matrix of shape (1, n_features) or (n_classes, n_features)
        Coefficients, float64 also for float32 ``X`` (and so is
        ``decision_function``), as scikit-learn's LinearSVC gives.  A CSR
        matrix after ``sparsify()``.
    intercept_ : ndarray of shape (1,) or (n_classes,), or float
        Intercepts, float64; ``0.0`` without ``fit_intercept``, as in
        scikit-learn.\
{_N_ITER_INT_DOC}{_ATTRS_DOC}{_NEWTON_SOLVER_ATTR_DOC}
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
        "solver": [StrOptions({"auto", "newton", "cocoa"})],
    }

    def __init__(self, C=1.0, *, loss="squared_hinge", penalty="l2", l1_ratio=None,
                 solver="auto", tol=1e-4, max_iter=200,
                 fit_intercept=True, intercept_scaling=1.0, penalize_intercept=True,
                 class_weight=None, random_state=None, verbose=0, warm_start=False, client=None,
                 backend="auto", n_workers=None, chunks_per_worker=None, local_steps=None,
                 gamma=1.0, sigma=None, acceleration="auto", straggler_policy="preempt",
                 scaling_policy=None):
        self.C = C
        self.loss = loss
        self.penalty = penalty
        self.l1_ratio = l1_ratio
        self.solver = solver
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
        self._check_penalty()
        return self._fit(X, y, sample_weight)

    def _set_run(self, result):
        # an int, as scikit-learn's LinearSVC gives (liblinear's largest count)
        super()._set_run(result)
        self.n_iter_ = int(result.n_iter)
