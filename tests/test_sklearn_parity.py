"""The fitted attributes and outputs have scikit-learn's shapes, types and dtypes.

Each test fits the scikit-learn estimator next to ours on the same input and
compares what the user sees: shapes of ``coef_``, ``intercept_`` and the
predictions for every shape of ``y``; dtypes for float32 ``X``; and string
labels of a dask series, which fit without a warning.
"""

import warnings

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.linear_model import ElasticNet as SkElasticNet
from sklearn.linear_model import Lasso as SkLasso
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.linear_model import PoissonRegressor as SkPoissonRegressor
from sklearn.linear_model import Ridge as SkRidge
from sklearn.svm import LinearSVC as SkLinearSVC

import daskelastic as de


@pytest.fixture
def regression():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 4))
    Y = X @ rng.normal(size=(4, 3)) + [1.0, -2.0, 0.5] + 0.1 * rng.normal(size=(80, 3))
    return X, Y


def _shapes(reg, X):
    """What a user sees of a fitted regressor's shapes and types."""
    return {"coef_": reg.coef_.shape,
            "intercept_ type": type(reg.intercept_),
            "intercept_ shape": np.shape(reg.intercept_),
            "predict": reg.predict(X).shape}


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("sparse", [False, True], ids=["numpy", "csr"])
@pytest.mark.parametrize("y_shape", ["(n,)", "(n, 1)", "(n, 3)"])
def test_ridge_shapes_are_scikit_learns_for_every_shape_of_y(regression, y_shape, sparse,
                                                             fit_intercept):
    X, Y = regression
    y = {"(n,)": Y[:, 0], "(n, 1)": Y[:, :1], "(n, 3)": Y}[y_shape]
    X = sp.csr_matrix(X) if sparse else X
    ours = de.Ridge(fit_intercept=fit_intercept, tol=1e-8, backend="inprocess").fit(X, y)
    theirs = SkRidge(fit_intercept=fit_intercept).fit(X, y)
    assert _shapes(ours, X) == _shapes(theirs, X)


def test_ridge_shapes_are_scikit_learns_for_dask_targets_of_one_column(regression, client):
    X, Y = regression
    chunked = [da.from_array(a, chunks=(40,) + a.shape[1:]) for a in (X, Y[:, :1])]
    ours = de.Ridge(tol=1e-6).fit(*chunked)
    theirs = SkRidge().fit(X, Y[:, :1])
    assert _shapes(ours, X) == _shapes(theirs, X)
    assert ours.predict(chunked[0]).compute().shape == (len(X),)


_ESTIMATORS = {
    "Ridge": (de.Ridge, SkRidge()),
    "LinearSVC": (de.LinearSVC, SkLinearSVC()),
    # scikit-learn's default solver, lbfgs, keeps float32 (liblinear, as
    # LinearSVC, gives float64)
    "LogisticRegression": (de.LogisticRegression, SkLogisticRegression()),
}
_OUTPUTS = ["predict", "decision_function", "predict_proba", "predict_log_proba"]


def _dtypes(est, X):
    """The dtypes of the coefficients, intercepts and every output."""
    found = {"coef_": est.coef_.dtype, "intercept_": np.asarray(est.intercept_).dtype}
    found.update({m: getattr(est, m)(X).dtype for m in _OUTPUTS if hasattr(est, m)})
    return found


@pytest.mark.parametrize("sparse", [False, True], ids=["numpy", "csr"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(_ESTIMATORS))
def test_dtypes_are_scikit_learns(name, dtype, sparse):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(90, 4))
    y = X @ [1.0, -1.0, 0.5, 0.0] + 0.5
    if name != "Ridge":
        y = np.digitize(y, [-0.5, 0.5]) if name == "LinearSVC" else (y > 0).astype(int)
    X = X.astype(dtype)
    X = sp.csr_matrix(X) if sparse else X
    Estimator, theirs = _ESTIMATORS[name]
    ours = Estimator(tol=1e-6, backend="inprocess").fit(X, y)
    assert _dtypes(ours, X) == _dtypes(theirs.fit(X, y), X)


@pytest.mark.parametrize("name", ["LogisticRegression", "LinearSVC"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_intercepts_are_scikit_learns_without_an_intercept(name, n_classes):
    # LinearSVC (liblinear) gives the float 0.0; LogisticRegression's default
    # solver, lbfgs, an array of zeros
    rng = np.random.default_rng(4)
    X = rng.normal(size=(90, 3))
    y = np.arange(90) % n_classes
    Estimator, theirs = _ESTIMATORS[name]
    ours = Estimator(fit_intercept=False, backend="inprocess").fit(X, y)
    theirs = clone(theirs).set_params(fit_intercept=False).fit(X, y)
    assert type(ours.intercept_) is type(theirs.intercept_)
    assert np.shape(ours.intercept_) == np.shape(theirs.intercept_)
    assert np.all(ours.intercept_ == 0.0) and np.all(theirs.intercept_ == 0.0)
    assert ours.decision_function(X).shape == theirs.decision_function(X).shape


def test_ridge_on_a_float32_dask_array_gives_float32_lazily(regression, client):
    X, Y = regression
    X32 = da.from_array(X.astype(np.float32), chunks=(40, 4))
    reg = de.Ridge(tol=1e-6).fit(X32, Y[:, 0])
    assert reg.coef_.dtype == np.float32 and reg.intercept_.dtype == np.float32
    pred = reg.predict(X32)
    assert pred.dtype == np.float32 and pred.compute().dtype == np.float32
    np.testing.assert_allclose(pred.compute(), reg.predict(X.astype(np.float32)), rtol=1e-6)


@pytest.mark.parametrize("labels_dtype", ["string", "string[pyarrow]", object])
def test_string_labels_of_a_dask_series_fit_without_a_warning(labels_dtype, client):
    # object labels become dask's default (pyarrow) string dtype in from_pandas
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 3))
    labels = pd.Series(np.where(X[:, 0] - X[:, 1] > 0, "late", "on time"), dtype=labels_dtype)
    ddf = dd.from_pandas(pd.DataFrame(X, columns=["a", "b", "c"]), npartitions=4)
    y = dd.from_pandas(labels, npartitions=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = de.LogisticRegression(tol=1e-4).fit(ddf, y)
    expected = SkLogisticRegression(solver="liblinear").fit(X, labels).classes_
    assert clf.classes_.dtype == expected.dtype == object
    assert clf.classes_.tolist() == expected.tolist() == ["late", "on time"]
    predicted = clf.predict(ddf).compute()
    assert set(predicted) == {"late", "on time"}
    assert np.mean(predicted == labels.to_numpy(dtype=object)) > 0.95


@pytest.mark.parametrize("labels_dtype", ["Int64", "boolean", "Float64", "category"])
def test_labels_of_pandas_extension_dtypes_in_a_dask_series_get_scikit_learns_classes(
        labels_dtype, client):
    # nullable numbers and numeric categories were object arrays after
    # to_dask_array, which scikit-learn's type_of_target calls "unknown"
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 3))
    raw = (X[:, 0] > 0).astype(int)
    labels = pd.Series(raw == 1 if labels_dtype == "boolean" else 3 + 2 * raw,
                       dtype=labels_dtype)
    ddf = dd.from_pandas(pd.DataFrame(X, columns=["a", "b", "c"]), npartitions=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf = de.LogisticRegression(tol=1e-4).fit(ddf, dd.from_pandas(labels, npartitions=4))
    expected = SkLogisticRegression(solver="liblinear").fit(X, labels).classes_
    assert clf.classes_.dtype == expected.dtype
    assert clf.classes_.tolist() == expected.tolist()
    assert np.mean(clf.predict(ddf).compute() == expected[raw]) > 0.95


#: name → (ours, theirs, the kind of target)
_FITTED = {
    "Lasso": (de.Lasso(alpha=0.1), SkLasso(alpha=0.1), "real"),
    "ElasticNet": (de.ElasticNet(alpha=0.1), SkElasticNet(alpha=0.1), "real"),
    # an iterative solver's n_iter_ (the default, cholesky, gives None)
    "Ridge": (de.Ridge(), SkRidge(solver="sag", max_iter=10_000), "real"),
    "PoissonRegressor": (de.PoissonRegressor(), SkPoissonRegressor(), "counts"),
    "LogisticRegression": (de.LogisticRegression(), SkLogisticRegression(), "labels"),
    "LinearSVC": (de.LinearSVC(), SkLinearSVC(), "labels"),
}


def _kind(value):
    """What code reading an attribute relies on: its type, shape and dtype."""
    dtype = getattr(value, "dtype", None) if isinstance(value, (np.ndarray, np.generic)) \
        else None
    return type(value), np.shape(value), dtype


@pytest.mark.parametrize("n_targets", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(_FITTED))
def test_fitted_attributes_are_scikit_learns(name, dtype, n_targets):
    ours, theirs, target = _FITTED[name]
    if n_targets == 2 and target != "real":
        pytest.skip("one target only")
    rng = np.random.default_rng(2)
    X = rng.normal(size=(90, 4)).astype(dtype)
    z = X @ [0.5, -0.5, 0.2, 0.0]
    y = {"real": np.column_stack([z, 1 - z]) if n_targets == 2 else z,
         "counts": rng.poisson(np.exp(z)), "labels": np.digitize(z, [-0.3, 0.3])}[target]
    ours = clone(ours).set_params(backend="inprocess").fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # sag's ConvergenceWarning at float32
        theirs = clone(theirs).fit(X, y)
    names = {a for a in vars(theirs) if a.endswith("_") and not a.startswith("_")}
    assert names <= set(vars(ours))
    # (solver_ names daskelastic's solver: a str, as theirs)
    assert {a: _kind(getattr(ours, a)) for a in names} \
        == {a: _kind(getattr(theirs, a)) for a in names}
