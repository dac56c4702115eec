"""scikit-learn's own linear-model test cases, run against daskelastic's estimators.

Each test is a case of scikit-learn 1.9's ``sklearn/linear_model/tests``
(``test_logistic.py``, ``test_ridge.py``, ``test_coordinate_descent.py``),
named in its comment, with the same data and assertions.  Where a case
passes a scikit-learn parameter daskelastic has not (``solver``,
``precompute``, ``random_state`` of a solver), the case keeps the rest; where
daskelastic's ``tol`` (a relative duality gap) must be tighter to reach the
same decimals, the comment says so.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import (
    assert_allclose,
    assert_almost_equal,
    assert_array_almost_equal,
    assert_array_equal,
)
from sklearn.base import clone
from sklearn.datasets import load_diabetes, load_iris, make_classification
from sklearn.preprocessing import scale

from daskelastic import ElasticNet, Lasso, LogisticRegression, Ridge

# test_logistic.py's toy data
X = [[-1, 0], [0, 1], [1, 1]]
Y1 = [0, 1, 1]
Y2 = [2, 1, 0]


def _in_process(estimator):
    """The case's estimator, fitted in this process (the cases are tiny)."""
    return estimator.set_params(backend="inprocess")


# -- test_logistic.py ---------------------------------------------------------------


def _check_predictions(clf, X, y):
    # test_logistic.py::check_predictions
    n_samples = len(y)
    classes = np.unique(y)
    predicted = clf.fit(X, y).predict(X)
    assert_array_equal(clf.classes_, classes)
    assert predicted.shape == (n_samples,)
    assert_array_equal(predicted, y)
    probabilities = clf.predict_proba(X)
    assert probabilities.shape == (n_samples, classes.shape[0])
    assert_allclose(probabilities.sum(axis=1), np.ones(n_samples))
    assert_array_equal(probabilities.argmax(axis=1), y)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_predict_2_classes(sparse):
    # test_logistic.py::test_predict_2_classes
    Xin = sp.csr_matrix(X) if sparse else X
    _check_predictions(_in_process(LogisticRegression()), Xin, Y1)
    _check_predictions(_in_process(LogisticRegression(C=100)), Xin, Y1)
    _check_predictions(_in_process(LogisticRegression(fit_intercept=False)), Xin, Y1)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_predict_3_classes(sparse):
    # test_logistic.py::test_predict_3_classes
    Xin = sp.csr_matrix(X) if sparse else X
    _check_predictions(_in_process(LogisticRegression(C=10)), Xin, Y2)


def test_sparsify():
    # test_logistic.py::test_sparsify
    iris = load_iris()
    target = iris.target_names[iris.target]
    Xs = scale(iris.data)
    clf = _in_process(LogisticRegression()).fit(Xs, target)
    pred_d_d = clf.decision_function(Xs)
    clf.sparsify()
    assert sp.issparse(clf.coef_)
    pred_s_d = clf.decision_function(Xs)
    sp_data = sp.coo_matrix(Xs)
    pred_s_s = clf.decision_function(sp_data)
    clf.densify()
    pred_d_s = clf.decision_function(sp_data)
    assert_array_almost_equal(pred_d_d, pred_s_d)
    assert_array_almost_equal(pred_d_d, pred_s_s)
    assert_array_almost_equal(pred_d_d, pred_d_s)


def test_inconsistent_input():
    # test_logistic.py::test_inconsistent_input
    rng = np.random.RandomState(0)
    X_ = rng.random_sample((5, 10))
    y_ = np.ones(X_.shape[0])
    y_[0] = 0
    clf = _in_process(LogisticRegression(random_state=0))
    with pytest.raises(ValueError, match="Found input variables with inconsistent number"):
        clf.fit(X, y_[:-1])
    with pytest.raises(ValueError, match="X has 12 features, but"):
        clf.fit(X_, y_).predict(rng.random_sample((3, 12)))


def test_write_parameters():
    # test_logistic.py::test_write_parameters
    clf = _in_process(LogisticRegression()).fit(X, Y1)
    clf.coef_[:] = 0
    clf.intercept_[:] = 0
    assert_array_almost_equal(clf.decision_function(X), 0)


def test_nan():
    # test_logistic.py::test_nan
    Xnan = np.array(X, dtype=np.float64)
    Xnan[0, 1] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN."):
        _in_process(LogisticRegression()).fit(Xnan, Y1)


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_dtype_match(fit_intercept):
    # test_logistic.py::test_dtype_match, for scikit-learn's solvers but
    # liblinear (float32 kept); its tol bounds the gradient, ours the
    # relative gap, with the same atol on the coefficients
    X_32 = np.array(X).astype(np.float32)
    y_32 = np.array(Y1).astype(np.float32)
    X_64 = np.array(X).astype(np.float64)
    y_64 = np.array(Y1).astype(np.float64)
    template = _in_process(LogisticRegression(random_state=42, tol=5e-4,
                                              fit_intercept=fit_intercept))
    lr_32 = clone(template).fit(X_32, y_32)
    assert lr_32.coef_.dtype == np.float32
    lr_32_sparse = clone(template).fit(sp.csr_matrix(X_32), y_32)
    assert lr_32_sparse.coef_.dtype == np.float32
    lr_64 = clone(template).fit(X_64, y_64)
    assert lr_64.coef_.dtype == np.float64
    lr_64_sparse = clone(template).fit(sp.csr_matrix(X_64), y_64)
    assert lr_64_sparse.coef_.dtype == np.float64
    atol = 2 * 1.72 * 5e-4
    assert_allclose(lr_32.coef_, lr_64.coef_.astype(np.float32), atol=atol)
    assert_allclose(lr_32.coef_, lr_32_sparse.coef_, atol=atol)
    assert_allclose(lr_64.coef_, lr_64_sparse.coef_, atol=atol)


def test_l1_ratio_non_elasticnet():
    # test_logistic.py::test_l1_ratio_non_elasticnet
    msg = r"l1_ratio parameter is only used when penalty is 'elasticnet'\. Got \(penalty=l1\)"
    with pytest.warns(UserWarning, match=msg):
        _in_process(LogisticRegression(penalty="l1", l1_ratio=0.5)).fit(X, Y1)


@pytest.mark.parametrize("penalty, l1_ratio", [("l1", 0.0), ("l2", 1.0)])
def test_lr_penalty_l1ratio_incompatible(penalty, l1_ratio):
    # test_logistic.py::test_lr_penalty_l1ratio_incompatible
    Xc, yc = make_classification(n_samples=20)
    lr = _in_process(LogisticRegression(penalty=penalty, l1_ratio=l1_ratio))
    msg = f"Inconsistent values: penalty={penalty} with l1_ratio={l1_ratio}"
    with pytest.warns(UserWarning, match=msg):
        lr.fit(Xc, yc)


@pytest.mark.parametrize("C", [0.001, 0.1, 1, 10, 100, 1000, 1e6])
@pytest.mark.parametrize("penalty, l1_ratio", [("l1", 1), ("l2", 0)])
def test_elastic_net_l1_l2_equivalence(C, penalty, l1_ratio):
    # test_logistic.py::test_elastic_net_l1_l2_equivalence (its seed 42; our
    # tol, a relative gap, tight enough for its 6 decimals)
    Xc, yc = make_classification(random_state=42)
    lr_enet = _in_process(LogisticRegression(penalty="elasticnet", C=C, l1_ratio=l1_ratio,
                                             random_state=42, tol=1e-10, max_iter=5000))
    lr_expected = _in_process(LogisticRegression(penalty=penalty, C=C, random_state=42,
                                                 tol=1e-10, max_iter=5000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # a ConvergenceWarning is the assertion's to judge
        lr_enet.fit(Xc, yc)
        lr_expected.fit(Xc, yc)
    assert_array_almost_equal(lr_enet.coef_, lr_expected.coef_)


def test_logreg_l1_sparse_and_dense_agree():
    # test_logistic.py::test_logreg_l1, its last part: the sparse and dense
    # fits give the same model (its seed 42)
    rng = np.random.RandomState(42)
    n_samples = 100
    Xc, yc = make_classification(n_samples=n_samples, n_features=20, random_state=42)
    Xc = np.concatenate((Xc, rng.normal(size=(n_samples, 3)), np.ones((n_samples, 2))),
                        axis=1)
    params = dict(l1_ratio=1, C=1.0, fit_intercept=False, max_iter=10000, tol=1e-10,
                  random_state=42)
    dense = _in_process(LogisticRegression(**params)).fit(Xc, yc)
    sparse = _in_process(LogisticRegression(**params)).fit(sp.csr_matrix(Xc), yc)
    assert_allclose(sparse.coef_, dense.coef_, atol=1e-6)


# -- test_ridge.py ------------------------------------------------------------------


def test_ridge_shapes_type():
    # test_ridge.py::test_ridge_shapes_type
    rng = np.random.RandomState(0)
    n_samples, n_features = 5, 10
    Xr = rng.randn(n_samples, n_features)
    y = rng.randn(n_samples)
    Y1 = y[:, np.newaxis]
    Y = np.c_[y, 1 + y]
    ridge = _in_process(Ridge())
    ridge.fit(Xr, y)
    assert ridge.coef_.shape == (n_features,)
    assert ridge.intercept_.shape == ()
    assert isinstance(ridge.coef_, np.ndarray)
    assert isinstance(ridge.intercept_, float)
    ridge.fit(Xr, Y1)
    assert ridge.coef_.shape == (n_features,)
    assert ridge.intercept_.shape == (1,)
    assert isinstance(ridge.intercept_, np.ndarray)
    ridge.fit(Xr, Y)
    assert ridge.coef_.shape == (2, n_features)
    assert ridge.intercept_.shape == (2,)
    assert isinstance(ridge.intercept_, np.ndarray)


def test_ridge_intercept():
    # test_ridge.py::test_ridge_intercept
    rng = np.random.RandomState(0)
    Xr = rng.randn(5, 10)
    y = rng.randn(5)
    Y = np.c_[y, 1.0 + y]
    ridge = _in_process(Ridge())
    intercept = ridge.fit(Xr, y).intercept_
    ridge.fit(Xr, Y)
    assert_almost_equal(ridge.intercept_[0], intercept)
    assert_almost_equal(ridge.intercept_[1], intercept + 1.0)


def test_n_iter():
    # test_ridge.py::test_n_iter, for its iterative solvers: one count per
    # target, max_iter when tol is out of reach
    X_diabetes, y_diabetes = load_diabetes(return_X_y=True)
    y_n = np.tile(y_diabetes, (2, 1)).T
    for max_iter in range(1, 4):
        reg = _in_process(Ridge(max_iter=max_iter, tol=1e-12, solver="cocoa"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # max_iter's ConvergenceWarning
            reg.fit(X_diabetes, y_n)
        assert_array_equal(reg.n_iter_, np.tile(max_iter, 2))


def test_ridge_dtype_match():
    # test_ridge.py::test_dtype_match (its tol, 2·float32's resolution, as
    # a relative gap)
    rng = np.random.RandomState(0)
    X_64 = rng.randn(6, 5)
    y_64 = rng.randn(6)
    X_32, y_32 = X_64.astype(np.float32), y_64.astype(np.float32)
    tol = 2 * np.finfo(np.float32).resolution
    ridge_32 = _in_process(Ridge(alpha=1.0, max_iter=500, tol=tol)).fit(X_32, y_32)
    ridge_64 = _in_process(Ridge(alpha=1.0, max_iter=500, tol=tol)).fit(X_64, y_64)
    assert ridge_32.coef_.dtype == X_32.dtype
    assert ridge_64.coef_.dtype == X_64.dtype
    assert ridge_32.predict(X_32).dtype == X_32.dtype
    assert ridge_64.predict(X_64).dtype == X_64.dtype
    assert_allclose(ridge_32.coef_, ridge_64.coef_, rtol=1e-4, atol=5e-4)


# -- test_coordinate_descent.py -----------------------------------------------------


def _build_dataset(n_samples=50, n_features=200, n_informative_features=10, n_targets=1):
    # test_coordinate_descent.py::build_dataset
    random_state = np.random.RandomState(0)
    w = random_state.randn(n_features, n_targets) if n_targets > 1 \
        else random_state.randn(n_features)
    w[n_informative_features:] = 0.0
    Xd = random_state.randn(n_samples, n_features)
    return Xd, Xd @ w


def test_lasso_zero():
    # test_coordinate_descent.py::test_lasso_zero
    clf = Lasso(alpha=0.1).fit([[0], [0], [0]], [0, 0, 0])
    pred = clf.predict([[1], [2], [3]])
    assert_array_almost_equal(clf.coef_, [0])
    assert_array_almost_equal(pred, [0, 0, 0])
    assert_almost_equal(clf.dual_gap_, 0)


def test_enet_nonfinite_params():
    # test_coordinate_descent.py::test_enet_nonfinite_params
    rng = np.random.RandomState(0)
    Xo = np.finfo(np.float64).max * rng.uniform(size=(10, 2))
    y = rng.randint(0, 2, size=10)
    msg = "Coordinate descent iterations resulted in non-finite parameter values"
    with warnings.catch_warnings(), pytest.raises(ValueError, match=msg):
        warnings.simplefilter("ignore", RuntimeWarning)   # the overflow itself
        ElasticNet(alpha=0.1).fit(Xo, y)


@pytest.mark.parametrize("alpha, coef, pred", [
    (1e-8, [1], [2, 3, 4]),
    (0.1, [0.85], [1.7, 2.55, 3.4]),
    (0.5, [0.25], [0.5, 0.75, 1.0]),
    (1, [0.0], [0, 0, 0]),
])
def test_lasso_toy(alpha, coef, pred):
    # test_coordinate_descent.py::test_lasso_toy
    clf = Lasso(alpha=alpha).fit([[-1], [0], [1]], [-1, 0, 1])
    assert_array_almost_equal(clf.coef_, coef)
    assert_array_almost_equal(clf.predict([[2], [3], [4]]), pred)
    assert_almost_equal(clf.dual_gap_, 0)


@pytest.mark.parametrize("alpha, l1_ratio, coef, pred, decimal", [
    (1e-8, 1.0, [1], [2, 3, 4], 6),
    (0.5, 0.3, [0.50819], [1.0163, 1.5245, 2.0327], 3),
    (0.5, 0.5, [0.45454], [0.9090, 1.3636, 1.8181], 3),
])
@pytest.mark.parametrize("solver", ["gram", "cocoa"])
def test_enet_toy(alpha, l1_ratio, coef, pred, decimal, solver):
    # test_coordinate_descent.py::test_enet_toy (its precompute=True and
    # False: our Gram solver and CoCoA+).  CoCoA+ at the default tol stops
    # with the coefficient 0.5045 for 0.50819: tol bounds the objective's
    # relative excess (1e-4 of it allows ~4e-3 on this coefficient), and
    # scikit-learn's one-feature descent is exact after a pass
    tol = 1e-4 if solver == "gram" else 1e-8
    clf = _in_process(ElasticNet(alpha=alpha, l1_ratio=l1_ratio, solver=solver, tol=tol))
    clf.fit(np.array([[-1.0], [0.0], [1.0]]), [-1, 0, 1])
    assert_array_almost_equal(clf.coef_, coef, decimal)
    assert_array_almost_equal(clf.predict([[2.0], [3.0], [4.0]]), pred, decimal)
    assert_almost_equal(clf.dual_gap_, 0)


def test_lasso_dual_gap():
    # test_coordinate_descent.py::test_lasso_dual_gap: dual_gap_ is the gap
    # of the objective divided by n_samples, to scikit-learn's dual point
    # (ours is the best of that point and another, so at most its gap)
    Xd, y = _build_dataset(n_samples=10, n_features=30)
    n_samples = len(y)
    alpha = 0.01 * np.max(np.abs(Xd.T @ y)) / n_samples
    clf = Lasso(alpha=alpha, fit_intercept=False).fit(Xd, y)
    w = clf.coef_
    R = y - Xd @ w
    primal = 0.5 * np.mean(R ** 2) + clf.alpha * np.sum(np.abs(w))
    R /= np.max(np.abs(Xd.T @ R) / (n_samples * alpha))
    dual = 0.5 * (np.mean(y ** 2) - np.mean((y - R) ** 2))
    assert 0 <= clf.dual_gap_ <= (primal - dual) * (1 + 1e-7)
    assert_allclose(clf.dual_gap_, primal - dual, rtol=1e-2)


def test_enet_multitarget():
    # test_coordinate_descent.py::test_enet_multitarget.  At the default tol
    # the joint and one-target fits stop 2e-4 apart on these coefficients
    # (each within tol of its optimum's objective); 6 decimals need a
    # tighter tol.  Our dual_gap_ of several targets is their summed gap
    Xd, y = _build_dataset(n_samples=10, n_features=8, n_informative_features=10,
                           n_targets=3)
    estimator = ElasticNet(alpha=0.01, tol=1e-10).fit(Xd, y)
    coef, intercept, dual_gap = estimator.coef_, estimator.intercept_, estimator.dual_gap_
    assert dual_gap.shape == (3,)
    for k in range(3):
        estimator.fit(Xd, y[:, k])
        assert_array_almost_equal(coef[k, :], estimator.coef_)
        assert_array_almost_equal(intercept[k], estimator.intercept_)
        assert_array_almost_equal(dual_gap[k], estimator.dual_gap_)
