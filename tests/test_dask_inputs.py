"""Dask input treated as scikit-learn treats in-memory input, on a real LocalCluster.

Feature names and their number, the checks of labels and weights, the fit's
own (not necessarily default) client, ``clone`` with a client, empty
partitions and lazy predictions.
"""

import time

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import Client
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.model_selection import cross_val_score

import daskelastic as de
from daskelastic.estimators import _classifiers

from cluster_checks import fit_leftovers

COLUMNS = ["children", "morekids", "age", "afam", "hispanic", "other", "work"]


@pytest.fixture(scope="module")
def fertility(fertility_small):
    """2,000 rows of the real Fertility table as numpy and as pandas."""
    X, y = fertility_small
    X, y = X[:2000], y[:2000]
    return X, y, pd.DataFrame(X, columns=COLUMNS[: X.shape[1]])


def _chunked(a, rows=500):
    return da.from_array(a, chunks=(rows,) + a.shape[1:])


def test_a_fit_uses_its_own_client_when_it_is_not_the_default(fertility, cluster):
    X, y, _ = fertility
    with Client(cluster, set_as_default=False) as own:
        clf = de.LogisticRegression(client=own, tol=1e-3).fit(_chunked(X), _chunked(y))
        assert clf.history_[-1]["n_workers"] == 2
        assert clf.duality_gap_ <= 1e-3


def test_clone_keeps_the_client_and_cross_validation_runs(fertility, client):
    X, y, _ = fertility
    est = de.LogisticRegression(C=0.5, tol=1e-3, client=client)
    copy = clone(est)
    assert copy.client is client and copy is not est
    assert copy.get_params()["C"] == 0.5
    scores = cross_val_score(est, X, y, cv=2)
    assert scores.shape == (2,) and np.all(scores > 0.5)


@pytest.mark.filterwarnings("ignore:X does not have valid feature names")
def test_a_dask_dataframe_gives_feature_names_and_they_are_checked(fertility, client):
    X, y, frame = fertility
    ddf = dd.from_pandas(frame, npartitions=4)
    clf = de.LogisticRegression(tol=1e-3).fit(ddf, dd.from_pandas(pd.Series(y), npartitions=4))
    np.testing.assert_array_equal(clf.feature_names_in_, frame.columns)
    reordered = ddf[list(frame.columns[::-1])]
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        clf.predict(reordered)
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        clf.predict(frame[list(frame.columns[::-1])])
    with pytest.raises(ValueError, match="expecting 7 features"):
        clf.predict(_chunked(X[:, :3]))
    fitted_on_pandas = de.LogisticRegression(tol=1e-3, backend="inprocess").fit(frame, y)
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        fitted_on_pandas.predict(reordered)


def test_predictions_on_a_dataframe_of_unknown_lengths_stay_lazy(fertility, client):
    X, y, frame = fertility
    clf = de.LogisticRegression(tol=1e-3, backend="inprocess").fit(frame, y)
    ddf = dd.from_pandas(frame.assign(row=np.arange(len(frame))), npartitions=4)
    filtered = ddf[ddf.row % 3 != 0][list(frame.columns)]
    pred = clf.predict(filtered)
    assert isinstance(pred, dd.Series)       # on the frame's index, nothing computed
    kept = frame[np.arange(len(frame)) % 3 != 0]
    labels = pred.compute()
    pd.testing.assert_index_equal(labels.index, kept.index)
    np.testing.assert_array_equal(labels.to_numpy(), clf.predict(kept))
    as_array = clf.predict(filtered.to_dask_array())
    assert isinstance(as_array, da.Array) and np.isnan(as_array.chunks[0]).all()
    np.testing.assert_array_equal(as_array.compute(), clf.predict(kept))


def test_in_memory_labels_go_with_dask_rows(fertility, client):
    X, y, _ = fertility
    # "wait": no timing in the rounds, so the same problem gives the same fit
    # (liblinear's problem: with a free intercept the two fits' rounds differ, and
    # their coefficients agree to the tolerance only)
    common = dict(tol=1e-6, random_state=0, straggler_policy="wait", penalize_intercept=True)
    a = de.LogisticRegression(**common).fit(_chunked(X), y)
    b = de.LogisticRegression(**common).fit(_chunked(X), _chunked(y))
    assert a.duality_gap_ <= 1e-6 and len(a.history_) == len(b.history_)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-9, atol=1e-12)


def test_empty_partitions_of_a_filtered_dataframe_are_skipped(fertility, client):
    X, y, frame = fertility
    data = frame.assign(label=y, row=np.arange(len(y)))
    ddf = dd.from_pandas(data, npartitions=4)                 # 500 rows each
    kept = ddf[(ddf.row < 500) | (ddf.row >= 1000)]         # the second one empties
    assert kept.map_partitions(len).compute().tolist() == [500, 0, 500, 500]
    columns = list(frame.columns)
    clf = de.LogisticRegression(tol=1e-4).fit(kept[columns], kept.label)
    rest = data[(data.row < 500) | (data.row >= 1000)]
    ref = de.LogisticRegression(tol=1e-8, backend="inprocess").fit(rest[columns], rest.label)
    assert clf.score(rest[columns], rest.label) == pytest.approx(
        ref.score(rest[columns], rest.label), abs=0.01)


@pytest.mark.parametrize("case, message", [
    ("continuous labels", "Unknown label type: continuous"),
    ("NaN label", "Input y contains NaN"),
    ("negative weights", "Negative values in data passed to `sample_weight`"),
    ("zero weights", "at least one non-zero number"),
    ("unknown class in class_weight", r"The classes, \[1\], are not in class_weight"),
    # scikit-learn fits these silently; a certified gap of 0 on a negative
    # weight (or NaN coefficients) would be worse than an error
    ("negative class weight", r"class_weight must be finite and non-negative; got 1.0: -1.0"),
    ("balanced with a weightless class", r"positive total sample weight in every class; "
                                         r"these classes have none: \[1.0\]"),
    ("class and sample weights leave none", "class_weight and sample_weight together "
                                            "give every sample the weight 0"),
    # in memory scikit-learn's "Input sample_weight contains NaN.", on dask input
    # the load tasks' message (here found with the labels, before any load)
    ("NaN weight", "sample_weight contains NaN"),
    ("NaN weight with class weights", "sample_weight contains NaN"),
    ("infinite weight, balanced", "sample_weight contains (NaN or )?infinity"),
])
def test_bad_dask_labels_and_weights_get_scikit_learns_errors(fertility, client, case,
                                                              message):
    X, y, _ = fertility
    labels, weights, kw = y.astype(float), None, {}
    if case == "continuous labels":
        labels = X[:, 2] + 0.5
    elif case == "NaN label":
        labels[7] = np.nan
    elif case == "negative weights":
        weights = -np.ones(len(y))
    elif case == "zero weights":
        weights = np.zeros(len(y))
    elif case == "negative class weight":
        kw["class_weight"] = {0: 1.0, 1: -1.0}
    elif case == "balanced with a weightless class":
        weights, kw["class_weight"] = np.where(labels == 1, 0.0, 1.0), "balanced"
    elif case == "class and sample weights leave none":
        weights, kw["class_weight"] = np.where(labels == 1, 0.0, 1.0), {0: 0.0, 1: 1.0}
    elif case.startswith("NaN weight"):
        weights = np.ones(len(y))
        weights[3] = np.nan
        if case.endswith("class weights"):
            kw["class_weight"] = {0: 1.0, 1: 2.0}
    elif case == "infinite weight, balanced":
        weights, kw["class_weight"] = np.ones(len(y)), "balanced"
        weights[3] = np.inf
    else:
        kw["class_weight"] = {0: 1.0, 7: 2.0}
    args = (labels,) if weights is None else (labels, weights)
    for make in (lambda a: a, _chunked):      # in memory, then dask: the same error
        with pytest.raises(ValueError, match=message):
            de.LogisticRegression(backend="dask", **kw).fit(
                make(X), *[make(a) for a in args])


@pytest.mark.parametrize("case, message", [
    ("NaN in a late block", r"X contains NaN or infinity \(in row block 3: rows 1,500 to "
                            r"1,999 of the input\)"),
    ("one class", "at least 2 classes in the data, but the data contains only one class"),
    ("date column", r"X has columns that are neither numbers nor categories: 'age' "
                    r"\(datetime64\[\w+\]\)\. daskelastic one-hot encodes"),
    ("date and string columns", r"neither numbers nor categories: 'age' \(datetime64"),
])
def test_bad_dask_input_at_scale_is_a_clear_error_here(fertility, client, case, message):
    """Raised in this process (by daskelastic's own code, not a worker's task),
    before or while the blocks load; the cluster is left clean and usable."""
    X, y, frame = fertility
    if case == "NaN in a late block":
        X = X.copy()
        X[1990, 2] = np.nan
        data = (_chunked(X), _chunked(y))
    elif case == "one class":
        data = (_chunked(X), _chunked(np.zeros_like(y)))
    else:
        frame = frame.copy()
        frame["age"] = pd.Timestamp("2026-01-01") + pd.to_timedelta(frame.age, unit="D")
        if case == "date and string columns":   # the strings would be one-hot encoded
            frame["afam"] = pd.array(np.where(frame.afam > 0, "yes", "no"), "string")
        data = (dd.from_pandas(frame, npartitions=4), dd.from_pandas(pd.Series(y), npartitions=4))
    with pytest.raises(ValueError, match=message) as error:
        de.LogisticRegression(tol=1e-4).fit(*data)
    assert "/daskelastic/" in str(error.traceback[-1].path)
    assert "worker.py" not in str(error.traceback[-1].path)
    assert fit_leftovers(client) == {"state": {}, "keys": [], "records": []}
    clf = de.LogisticRegression(tol=1e-4).fit(_chunked(fertility[0]), _chunked(y))
    assert clf.duality_gap_ <= 1e-4


def test_a_class_seen_in_one_partition_only_is_fitted_as_in_memory(fertility, client):
    X, y, _ = fertility
    labels = np.where(np.arange(len(y)) >= 1500, y, 0)     # class 1 in the last block only
    ours = de.LogisticRegression(tol=1e-8, max_iter=5000).fit(_chunked(X), _chunked(labels))
    ref = de.LogisticRegression(tol=1e-8, max_iter=5000, backend="inprocess").fit(X, labels)
    np.testing.assert_array_equal(ours.classes_, [0, 1])
    assert abs(ours.history_[-1]["primal"] - ref.history_[-1]["primal"]) \
        <= 1e-6 * ref.history_[-1]["primal"]


def test_balanced_class_weights_count_sample_weights_as_scikit_learn_does(fertility):
    X, y, _ = fertility
    w = np.random.default_rng(0).uniform(0.2, 3.0, size=len(y))
    ours = de.LogisticRegression(C=0.3, class_weight="balanced", fit_intercept=False,
                                 tol=1e-9, max_iter=5000, backend="inprocess").fit(
        X, y, sample_weight=w)
    ref = SkLogisticRegression(C=0.3, class_weight="balanced", fit_intercept=False,
                               solver="liblinear", tol=1e-10, max_iter=10000).fit(
        X, y, sample_weight=w)
    scale = np.abs(ref.coef_).max()
    assert np.abs(ours.coef_ - ref.coef_).max() <= 1e-4 * scale
    # counting rows instead of weights would be another problem
    classes, rows = np.unique(y, return_counts=True)
    by_rows = dict(zip(classes, len(y) / (len(classes) * rows)))
    other = de.LogisticRegression(C=0.3, class_weight=by_rows, fit_intercept=False,
                                  tol=1e-9, max_iter=5000, backend="inprocess").fit(
        X, y, sample_weight=w)
    assert np.abs(other.coef_ - ref.coef_).max() > 1e-3 * scale


@pytest.mark.parametrize("counts_weights", [True, False])
@pytest.mark.parametrize("labels", ["two numbers", "three strings"])
@pytest.mark.parametrize("weighted", [False, True])
def test_dask_labels_give_the_classes_and_class_weights_of_labels_in_memory(
        fertility, client, labels, weighted, counts_weights, monkeypatch):
    """The classes, and "balanced" class weights, from one task per row block
    (rows and weight of each class per block, added up) are those found from
    the labels in memory."""
    X, y, _ = fertility
    rng = np.random.default_rng(1)
    if labels == "three strings":
        y = np.array(["low", "mid", "high"], dtype=object)[rng.integers(0, 3, len(y))]
    w = rng.uniform(0.2, 3.0, size=len(y)) if weighted else None
    # "balanced" counts the sample weights where scikit-learn does (1.9 on)
    monkeypatch.setattr(_classifiers, "_BALANCED_COUNTS_WEIGHTS", counts_weights)
    clf = de.LogisticRegression(class_weight="balanced")
    ref = clf._make_encoder(y, np.ones(len(y)) if w is None else w)
    got = clf._make_encoder_dask(_chunked(y, 333), None if w is None else _chunked(w, 333))
    np.testing.assert_array_equal(got.classes, ref.classes)
    np.testing.assert_allclose(got.class_weight, ref.class_weight, rtol=1e-12)
    assert got.n_targets == ref.n_targets


def test_a_closed_client_is_refused(fertility, cluster):
    X, y, _ = fertility
    own = Client(cluster, set_as_default=False)
    own.close()
    with pytest.raises(ValueError, match="client is closed"):
        de.LogisticRegression(client=own).fit(X, y)


def test_more_workers_asked_for_than_the_cluster_has_are_a_warning(fertility, client):
    X, y, _ = fertility
    with pytest.warns(UserWarning, match="n_workers=3, but the cluster has 2 workers"):
        clf = de.LogisticRegression(solver="cocoa", n_workers=3, tol=1e-3, backend="dask").fit(X, y)
    assert clf.history_[-1]["n_workers"] == 2


def test_a_client_that_is_not_a_client_is_refused_with_a_hint(fertility, cluster):
    # a cluster or an address, the usual slips: said so before anything starts
    X, y, _ = fertility
    with pytest.raises(TypeError, match=r"got LocalCluster: pass Client\(cluster\)"):
        de.LogisticRegression(client=cluster).fit(X, y)
    with pytest.raises(TypeError, match=r"got str: pass Client\(address\)"):
        de.LogisticRegression(client=cluster.scheduler_address).fit(X, y)


def test_blocks_loaded_at_once_by_one_worker_land_in_one_solver(fertility_small,
                                                               monkeypatch):
    """A worker with several threads runs its load tasks at once: every block
    must reach the same solver (the first tasks used to race to create it).
    The race is widened by a solver that takes 50 ms to construct."""
    from distributed import LocalCluster

    from daskelastic import solvers

    X, y = fertility_small
    original = solvers.ChunkSolver.__init__

    def slow_init(self, *args, **kwargs):
        time.sleep(0.05)
        original(self, *args, **kwargs)

    monkeypatch.setattr(solvers.ChunkSolver, "__init__", slow_init)
    with LocalCluster(n_workers=1, threads_per_worker=4, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as own:
        clf = de.LogisticRegression(solver="cocoa", penalize_intercept=True,
                                    C=0.5, tol=1e-6, max_iter=500, client=own,
                                    acceleration="none").fit(
            _chunked(X, 1000), _chunked(y, 1000))
        held = clf.history_[-1]["worker_rows"]
    assert sum(held.values()) == len(y)
    ref = de.LogisticRegression(C=0.5, tol=1e-6, max_iter=500, backend="inprocess",
                                acceleration="none", penalize_intercept=True).fit(X, y)
    # both certified within 1e-6 of the optimum: the same objective
    assert clf.history_[-1]["primal"] == pytest.approx(ref.history_[-1]["primal"],
                                                       rel=1e-5)


def test_labels_and_weights_cut_unlike_x_are_matched_to_its_rows(fertility, client):
    X, y, frame = fertility
    sw = 1.0 + (np.arange(len(y)) % 3)
    ref = de.LogisticRegression(tol=1e-8, backend="inprocess").fit(X, y, sample_weight=sw)
    # X in blocks of 500, y of 300, the weights a dask Series of 3
    # partitions: the same rows, so the same problem and optimum
    clf = de.LogisticRegression(tol=1e-8).fit(
        _chunked(X), _chunked(y, 300),
        sample_weight=dd.from_pandas(pd.Series(sw), npartitions=3))
    assert clf.history_[-1]["n_workers"] == 2
    assert clf.history_[-1]["primal"] == pytest.approx(ref.history_[-1]["primal"], rel=1e-7)
    np.testing.assert_allclose(clf.coef_, ref.coef_, atol=1e-3)
    with pytest.raises(ValueError, match="sample_weight"):
        de.LogisticRegression().fit(_chunked(X), _chunked(y), sample_weight=_chunked(sw[:-5]))


def _dask_kinds(X):
    """``X`` as each kind of dask input: dense blocks, CSR blocks, a frame, unknown lengths."""
    import scipy.sparse as sp

    frame = dd.from_pandas(pd.DataFrame(X, columns=COLUMNS[: X.shape[1]]), npartitions=3)
    return {"dense": _chunked(X, 700),
            "csr": _chunked(X, 700).map_blocks(sp.csr_matrix, dtype=X.dtype,
                                               meta=sp.csr_matrix((0, 0))),
            "frame": frame,
            "unknown lengths": frame.to_dask_array()}


@pytest.mark.filterwarnings("ignore:X does not have valid feature names")
@pytest.mark.parametrize("kind", ["dense", "csr", "frame", "unknown lengths"])
def test_every_kind_of_dask_input_predicts_and_scores_as_in_memory(fertility, client, kind):
    X, y, frame = fertility
    clf = de.LogisticRegression(tol=1e-4, backend="inprocess").fit(frame, y)
    Xd = _dask_kinds(X)[kind]
    expected = clf.predict(frame)
    np.testing.assert_array_equal(np.asarray(clf.predict(Xd).compute()), expected)
    np.testing.assert_allclose(np.asarray(clf.predict_proba(Xd).compute()),
                               clf.predict_proba(frame), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(clf.decision_function(Xd).compute()),
                               clf.decision_function(frame), rtol=1e-12)
    sw = 1.0 + (np.arange(len(y)) % 2)
    for labels, weights in [(y, None), (_chunked(y, 333), sw),
                            (dd.from_pandas(pd.Series(y), npartitions=5), _chunked(sw, 900))]:
        assert clf.score(Xd, labels, sample_weight=weights) == pytest.approx(
            clf.score(frame, y, sample_weight=sw if weights is not None else None), rel=1e-12)
    with pytest.raises(ValueError, match="rows"):
        clf.score(Xd, y[:-1])


@pytest.mark.filterwarnings("ignore:X does not have valid feature names")
def test_regressors_score_dask_input_as_scikit_learn(diamonds_small, client):
    from sklearn.metrics import d2_tweedie_score, r2_score

    X, y = diamonds_small
    frame = pd.DataFrame(X)
    Xd = dd.from_pandas(frame, npartitions=4)
    ridge = de.Ridge(alpha=10.0, tol=1e-6, backend="inprocess").fit(X, y)
    pred = ridge.predict(Xd)
    assert isinstance(pred, dd.Series)
    np.testing.assert_allclose(pred.compute().to_numpy(), ridge.predict(X), rtol=1e-12)
    assert ridge.score(Xd, _chunked(y, 777)) == pytest.approx(r2_score(y, ridge.predict(X)),
                                                              rel=1e-10)
    two = np.column_stack([y, 2 * y + 1])
    multi = de.Ridge(alpha=10.0, tol=1e-6, backend="inprocess").fit(X, two)
    assert isinstance(multi.predict(Xd), dd.DataFrame)
    assert multi.score(_chunked(X, 600), two) == pytest.approx(
        r2_score(two, multi.predict(X)), rel=1e-10)
    counts = np.round(np.abs(y - y.min()))
    poisson = de.PoissonRegressor(tol=1e-6, backend="inprocess").fit(X, counts)
    assert poisson.score(Xd, counts) == pytest.approx(
        d2_tweedie_score(counts, poisson.predict(X), power=1), rel=1e-10)
