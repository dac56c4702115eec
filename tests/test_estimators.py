"""The scikit-learn contract of the estimators, in-process (no cluster needed)."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import parametrize_with_checks

import daskelastic as de

# The only expected failures, both also expected by scikit-learn for its own
# liblinear-based LogisticRegression and LinearSVC: fitting with integer sample
# weights and fitting on repeated rows have the same optimum, but an iterative
# solver stopped by a duality-gap tolerance reaches it only to about 1e-7 in the
# decision function, and the check compares at rtol=1e-7.  (Ridge, whose SDCA
# converges linearly to machine precision, passes them with tol=1e-15, and so do
# the Gram solver's coordinate descent passes.)
_WEIGHT_EQUIVALENCE = {
    "check_sample_weight_equivalence_on_dense_data":
        "equal only at the exact optimum; an iterative solver stops at ~1e-7",
    "check_sample_weight_equivalence_on_sparse_data":
        "equal only at the exact optimum; an iterative solver stops at ~1e-7",
}


def _expected_failed(estimator):
    exact = isinstance(estimator, de.Ridge) or getattr(estimator, "solver", None) == "gram"
    return {} if exact else _WEIGHT_EQUIVALENCE


@parametrize_with_checks(
    [de.LogisticRegression(tol=1e-10, max_iter=3000),
     de.LinearSVC(tol=1e-8, max_iter=3000),
     de.Ridge(tol=1e-15, max_iter=3000),
     de.LogisticRegression(tol=1e-10, max_iter=5000, penalize_intercept=False),
     de.Ridge(tol=1e-15, max_iter=5000, penalize_intercept=False),
     de.PoissonRegressor(tol=1e-12, max_iter=5000),
     de.Lasso(alpha=0.01, tol=1e-9, max_iter=5000, solver="cocoa"),
     de.ElasticNet(alpha=0.01, tol=1e-12, max_iter=5000, solver="cocoa"),
     de.Lasso(alpha=0.01, tol=1e-10, solver="gram"),
     de.ElasticNet(alpha=0.01, tol=1e-10, solver="gram"),
     de.LogisticRegression(penalty="l1", tol=1e-6, max_iter=5000)],
    expected_failed_checks=_expected_failed,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.fixture
def binary():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4))
    y = np.where(X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=120) > 0, "late", "on time")
    return X, y


@pytest.mark.parametrize("Estimator", [de.LogisticRegression, de.LinearSVC])
@pytest.mark.parametrize("bad, message", [
    (lambda X, y: (np.where(np.eye(*X.shape, dtype=bool), np.nan, X), y), "NaN"),
    (lambda X, y: (np.where(np.eye(*X.shape, dtype=bool), np.inf, X), y), "infinity"),
    (lambda X, y: (X[:-1], y), "inconsistent numbers of samples"),
    (lambda X, y: (X, np.full(len(y), y[0])), "only one class"),
    (lambda X, y: (X[:0], y[:0]), "0 sample"),
    (lambda X, y: (X[:, :, None], y), "dim"),
])
def test_bad_input_is_rejected_with_a_clear_error(Estimator, bad, message, binary):
    X, y = bad(*binary)
    with pytest.raises(ValueError, match=message):
        Estimator().fit(X, y)


def test_negative_sample_weight_is_rejected(binary):
    X, y = binary
    weights = np.ones(len(y))
    weights[3] = -1
    with pytest.raises(ValueError, match="(?i)negative"):
        de.LogisticRegression().fit(X, y, sample_weight=weights)


def test_nan_target_is_rejected_for_ridge(binary):
    X, _ = binary
    y = X[:, 0].copy()
    y[5] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        de.Ridge().fit(X, y)


def test_class_and_sample_weights_that_leave_no_weight_are_refused(binary):
    # each is fine alone; together they certified a gap of 0 with coef_ = 0
    X, y = binary
    classes = np.unique(y)
    with pytest.raises(ValueError, match="together give every sample the weight 0"):
        de.LogisticRegression(class_weight={classes[0]: 0.0, classes[1]: 1.0}).fit(
            X, y, sample_weight=np.where(y == classes[1], 0.0, 1.0))


@pytest.mark.parametrize("Estimator", [de.LogisticRegression, de.LinearSVC, de.Ridge])
def test_values_too_large_for_float64_arithmetic_say_rescale(Estimator, binary):
    # finite, so validation passes, but their squares overflow: the fit used to
    # end with NaN coefficients and only RuntimeWarnings
    X, y = binary
    kw = {}
    if Estimator is de.Ridge:
        y = X[:, 0]
        kw = dict(solver="cocoa")     # (the rounds'; the Cholesky solver's below)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # numpy's overflow
        with pytest.raises(ValueError, match=r"not finite in round \d+ .* rescale them"):
            Estimator(backend="inprocess", **kw).fit(X * 1e200, y)
        if Estimator is de.Ridge:
            with pytest.raises(ValueError, match=r"^the sums .* overflow float64.*rescale"):
                Estimator().fit(X * 1e200, y)


@pytest.mark.parametrize("fmt", ["coo", "csc", "lil"])
def test_other_sparse_formats_are_converted(fmt, binary):
    X, y = binary
    dense = de.LogisticRegression(tol=1e-8).fit(X, y)
    sparse = de.LogisticRegression(tol=1e-8).fit(sp.csr_matrix(X).asformat(fmt), y)
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=1e-6, atol=1e-8)


def test_float32_input_is_kept_and_fits(binary):
    X, y = binary
    clf = de.LinearSVC(tol=1e-8).fit(X.astype(np.float32), y)
    ref = de.LinearSVC(tol=1e-8).fit(X, y)
    np.testing.assert_allclose(clf.coef_, ref.coef_, rtol=1e-4, atol=1e-5)


def test_float32_input_keeps_float32_where_scikit_learn_does(binary):
    # LogisticRegression as scikit-learn's default lbfgs; LinearSVC float64,
    # as liblinear
    X, y = binary
    X32 = X.astype(np.float32)
    logistic = de.LogisticRegression(tol=1e-8, backend="inprocess").fit(X32, y)
    svc = de.LinearSVC(tol=1e-8, backend="inprocess").fit(X32, y)
    assert logistic.coef_.dtype == logistic.intercept_.dtype == np.float32
    assert logistic.predict_proba(X32).dtype == np.float32
    assert svc.coef_.dtype == svc.intercept_.dtype == np.float64
    ref = de.LogisticRegression(tol=1e-8, backend="inprocess").fit(X, y)
    np.testing.assert_allclose(logistic.coef_, ref.coef_, rtol=1e-4, atol=1e-5)


def test_n_iter_has_each_scikit_learn_estimators_shape(binary):
    X, y = binary
    svc = de.LinearSVC(backend="inprocess").fit(X, y)
    logistic = de.LogisticRegression(backend="inprocess").fit(X, y)
    Y = np.column_stack([X[:, 0], X[:, 1] - X[:, 2]])
    ridge = de.Ridge(solver="cocoa", backend="inprocess").fit(X, Y)
    cholesky = de.Ridge().fit(X, Y)
    assert isinstance(svc.n_iter_, int) and svc.n_iter_ == svc.history_[-1]["round"]
    assert logistic.n_iter_.shape == (1,) and logistic.n_iter_.dtype == np.int32
    assert ridge.n_iter_.shape == (2,) and ridge.n_iter_.dtype == np.int32
    assert ridge.n_iter_[0] == ridge.n_iter_[1] == ridge.history_[-1]["round"]
    assert ridge.solver_ == "cocoa"
    assert cholesky.solver_ == "cholesky" and cholesky.n_iter_.tolist() == [1, 1]
    assert cholesky.history_[-1]["round"] == 1


@pytest.mark.parametrize("Estimator", [de.LogisticRegression, de.LinearSVC])
def test_sparsify_keeps_the_predictions_and_densify_undoes_it(binary, Estimator):
    X, y = binary
    clf = Estimator(penalty="l1", tol=1e-6, max_iter=3000, backend="inprocess").fit(X, y)
    dense = clf.coef_.copy()
    scores = clf.decision_function(X)
    assert clf.sparsify() is clf and sp.issparse(clf.coef_)
    assert clf.coef_.nnz == np.count_nonzero(dense)
    np.testing.assert_array_equal(clf.decision_function(X), scores)
    # (a sparse product sums in another order)
    np.testing.assert_allclose(clf.decision_function(sp.csr_matrix(X)), scores, rtol=1e-12)
    np.testing.assert_array_equal(clf.predict(X), Estimator.predict(clf.densify(), X))
    assert isinstance(clf.coef_, np.ndarray)
    np.testing.assert_array_equal(clf.coef_, dense)
    with pytest.raises(Exception, match="must be fitted before sparsifying"):
        Estimator().sparsify()


def test_a_sparsified_model_predicts_dask_input_lazily(binary, client):
    import dask.array as da

    X, y = binary
    clf = de.LogisticRegression(penalty="l1", tol=1e-6, backend="inprocess",
                                client=client).fit(X, y)
    expected = clf.predict_proba(X)
    clf.sparsify()
    lazy = clf.predict_proba(da.from_array(X, chunks=(40, 4)))
    np.testing.assert_allclose(lazy.compute(), expected)
    assert clf.client is client   # (the copy that predicted dropped nothing of it)


@pytest.mark.parametrize("solver", ["cocoa", "newton"])
def test_fitted_attributes_and_history(binary, solver):
    X, y = binary
    clf = de.LogisticRegression(tol=1e-6, solver=solver).fit(X, y)
    assert clf.solver_ == solver
    assert clf.coef_.shape == (1, 4) and clf.intercept_.shape == (1,)
    assert list(clf.classes_) == ["late", "on time"]
    assert clf.n_features_in_ == 4 and clf.n_iter_[0] >= 1
    assert clf.duality_gap_ <= 1e-6
    first, last = clf.history_[0], clf.history_[-1]
    for key in ("round", "time", "duality_gap", "primal", "dual", "n_workers", "n_used",
                "n_dropped", "n_preempted"):
        assert key in last
    # (the rounds' cold start α = 0 certifies w = 0 with the gap P; Newton's
    # dual point of w = 0, α = −ℓ′(0), breaks the free intercept's Σα = 0 and
    # certifies less)
    assert first["duality_gap"] == pytest.approx(1.0) if solver == "cocoa" \
        else np.isfinite(first["duality_gap"]) and first["duality_gap"] > clf.duality_gap_
    assert last["duality_gap"] == clf.duality_gap_
    assert [h["round"] for h in clf.history_] == list(range(len(clf.history_)))
    assert all(b["time"] >= a["time"] for a, b in zip(clf.history_, clf.history_[1:]))


def test_multiclass_is_scikit_learns_multinomial_model():
    from sklearn.linear_model import LogisticRegression as SkLogisticRegression

    rng = np.random.default_rng(1)
    centers = np.array([[2, 0], [-2, 0], [0, 3]])
    y = rng.integers(0, 3, size=300)
    X = centers[y] + rng.normal(size=(300, 2))
    clf = de.LogisticRegression(tol=1e-10).fit(X, y)
    assert clf.coef_.shape == (3, 2)
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert clf.score(X, y) > 0.9
    # by default the intercept is free, as scikit-learn's
    sk = SkLogisticRegression(tol=1e-12, max_iter=10_000).fit(X, y)
    np.testing.assert_allclose(proba, sk.predict_proba(X), atol=1e-5)
    # a penalised intercept is the coefficient of a constant column
    proba = de.LogisticRegression(tol=1e-10, penalize_intercept=True).fit(X, y).predict_proba(X)
    Xa = np.column_stack([X, np.ones(300)])
    sk = SkLogisticRegression(fit_intercept=False, tol=1e-12, max_iter=10_000).fit(Xa, y)
    np.testing.assert_allclose(proba, sk.predict_proba(Xa), atol=1e-5)


def test_class_weight_balanced_equals_explicit_sample_weights(binary):
    X, y = binary
    y = y.copy()
    y[:20] = "late"
    a = de.LinearSVC(class_weight="balanced", tol=1e-9).fit(X, y)
    counts = {c: np.sum(y == c) for c in np.unique(y)}
    sw = np.array([len(y) / (2 * counts[c]) for c in y])
    b = de.LinearSVC(tol=1e-9).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-5, atol=1e-7)


def test_ridge_multi_target_and_intercept():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 3))
    Y = np.column_stack([X @ [1.0, 2.0, 0.0] + 5.0, X @ [0.0, -1.0, 1.0] - 2.0])
    reg = de.Ridge(alpha=0.1, tol=1e-10, max_iter=2000).fit(X, Y)
    assert reg.coef_.shape == (2, 3) and reg.intercept_.shape == (2,)
    np.testing.assert_allclose(reg.intercept_, [5.0, -2.0], atol=1e-2)
    one = de.Ridge(alpha=0.1, tol=1e-10, max_iter=2000).fit(X, Y[:, 0])
    assert one.coef_.shape == (3,) and isinstance(one.intercept_, float)


def test_pickle_drops_the_client(binary, client):
    X, y = binary
    clf = de.LogisticRegression(client=client, backend="inprocess").fit(X, y)
    restored = pickle.loads(pickle.dumps(clf))
    assert restored.client is None and clf.client is client
    np.testing.assert_array_equal(restored.predict(X), clf.predict(X))


def test_verbose_2_reports_each_round(binary, capsys):
    X, y = binary
    clf = de.LogisticRegression(verbose=2, tol=1e-3).fit(X, y)
    out = capsys.readouterr().out
    assert out.count("[daskelastic] round") == len(clf.history_)
    # the closing line counts as n_iter_ does (it said one more)
    assert f"[daskelastic] converged after {clf.n_iter_[0]} rounds" in out


def test_max_iter_warns_and_still_certifies(binary):
    from sklearn.exceptions import ConvergenceWarning

    X, y = binary
    with pytest.warns(ConvergenceWarning, match="did not reach"):
        clf = de.LogisticRegression(tol=1e-14, max_iter=2).fit(X, y)
    assert clf.n_iter_[0] == 2 and len(clf.history_) == 3
    assert clf.duality_gap_ == clf.history_[-1]["duality_gap"] > 0


@pytest.mark.parametrize("Estimator", [de.Ridge, de.Lasso, de.ElasticNet])
def test_positive_is_refused_with_what_fits_it(Estimator):
    # scikit-learn's parameter, accepted by name; no solver here certifies
    # the constrained problem yet
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    with pytest.raises(ValueError, match=rf"positive=True .*sklearn\.linear_model\."
                                         rf"{Estimator.__name__}\(positive=True\)"):
        Estimator(positive=True, backend="inprocess").fit(X, X[:, 0])
    assert Estimator().get_params()["positive"] is False
