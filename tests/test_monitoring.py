"""Watching a fit: round records, progress bar, plots, and rounds as scheduler events."""

import io
import time

import dask
import numpy as np
import pytest

import daskelastic as de
from daskelastic.monitoring import TOPIC, FitLog, ProgressBar, estimate_eta
from daskelastic.monitoring.records import (
    round_columns,
    scale_in_columns,
    worker_columns,
    worker_status,
)


def _entry(r, t, gap, workers=2, seconds=None, **extra):
    seconds = seconds or {f"w{k}": 0.01 * (k + 1) for k in range(workers)}
    return {"round": r, "time": t, "duality_gap": gap, "primal": 1.0, "dual": 1.0 - gap,
            "n_workers": workers, "n_used": len(seconds), "n_dropped": 0, "n_preempted": 0,
            "worker_seconds": seconds, **extra}


def _fit_events(client, fit=None):
    """The events of the latest fit (or of ``fit``) on the scheduler, in order."""
    events = [m for _, m in client.get_events(TOPIC)]
    if fit is None:
        fit = [m for m in events if m["event"] == "start"][-1]["fit"]
    return [m for m in events if m.get("fit") == fit]


# -- records ----------------------------------------------------------------------
def test_dropped_and_preempted_workers_are_the_slowest_of_their_round():
    entry = _entry(0, 0.1, 0.5, seconds={"a": 0.1, "b": 0.5, "c": 0.3, "d": 0.2},
                   n_dropped=1, n_preempted=2)
    assert worker_status(entry) == {"b": "dropped", "c": "preempted", "d": "preempted",
                                    "a": "used"}


def test_a_recorded_worker_status_is_used_as_is():
    entry = _entry(0, 0.1, 0.5, seconds={"a": 0.1, "b": 0.5}, n_dropped=1,
                   worker_status={"a": "dropped"})
    assert worker_status(entry) == {"a": "dropped", "b": "used"}
    assert worker_columns([entry])["status"] == ["dropped", "used"]


def test_scale_in_is_marked_where_fewer_workers_hold_chunks():
    entries = [_entry(0, 0.1, 0.5, workers=4), _entry(1, 0.2, 0.3, workers=4),
               _entry(2, 0.3, 0.2, workers=2), _entry(3, 0.4, 0.1, workers=2)]
    assert scale_in_columns(entries) == {"round": [2], "time": [0.3], "n_workers": [2],
                                         "n_before": [4]}


def test_round_columns_floor_the_gap_and_default_the_backup_count():
    cols = round_columns([_entry(0, 0.1, 0.0), _entry(1, 0.2, 1e-3, n_backup=1)])
    assert cols["duality_gap"][0] > 0 and cols["duality_gap"][1] == 1e-3
    assert cols["n_backup"] == [0, 1]


def test_eta_is_the_sooner_of_reaching_tol_and_running_out_of_rounds():
    entries = [_entry(r, r * 1.0, 10.0 ** -r) for r in range(4)]
    assert estimate_eta(entries, tol=1e-6, max_iter=100) == pytest.approx(3.0)
    assert estimate_eta(entries, tol=1e-12, max_iter=5) == pytest.approx(2.0)
    assert estimate_eta(entries, tol=1e-2, max_iter=100) == 0.0
    assert estimate_eta(entries[:1], tol=1e-6, max_iter=100) is None


def test_fit_log_keeps_round_order_and_marks_fits_of_a_departed_client():
    log = FitLog()
    log.add({"event": "start", "fit": "f", "estimator": "Ridge", "client": "c1",
             "params": {"tol": 1e-4, "max_iter": 10}})
    for r in (0, 2, 1, 2):
        log.add({"event": "round", "fit": "f", "entry": _entry(r, 0.1 * r, 0.5 / (r + 1))})
    record = log.get("f")
    assert [e["round"] for e in record.entries] == [0, 1, 2]
    log.client_gone("c2")
    assert record.status == "running"
    log.client_gone("c1")
    assert record.status == "disconnected"


def test_fit_log_forgets_the_oldest_ended_fit_first():
    log = FitLog(max_fits=2)
    log.add({"event": "start", "fit": "running"})
    log.add({"event": "start", "fit": "ended"})
    log.add({"event": "end", "fit": "ended", "status": "converged"})
    log.add({"event": "start", "fit": "new"})
    assert [r.fit for r in log.records()] == ["running", "new"]


# -- progress bar, table and plots --------------------------------------------------
def test_progress_bar_redraws_one_line_and_ends_it(flights, capsys):
    X, y = flights
    clf = de.LogisticRegression(C=0.5, tol=1e-3, verbose=1, backend="inprocess",
                                n_workers=2).fit(X, y)
    out = capsys.readouterr().out
    assert out.startswith("\r[daskelastic] [") and out.endswith("\n")
    assert out.count("\n") == 1
    final = out.split("\r")[-1]
    assert "100% converged: round" in final
    assert f"round {clf.n_iter_[0]}/200" in final and "workers 2" in final
    assert "ETA" in out


def test_progress_bar_fraction_follows_the_log_gap():
    bar = ProgressBar(tol=1e-4, max_iter=1000, stream=io.StringIO())
    bar(_entry(0, 0.1, 1.0))
    bar(_entry(1, 0.2, 1e-2))
    assert bar.fraction() == pytest.approx(0.5)


def test_history_frame_has_one_row_per_round_and_per_worker(flights):
    X, y = flights
    clf = de.LinearSVC(C=0.5, tol=1e-2, backend="inprocess", n_workers=3).fit(X, y)
    frame = de.history_frame(clf)
    assert list(frame.index) == [h["round"] for h in clf.history_]
    np.testing.assert_allclose(frame["duality_gap"], [h["duality_gap"] for h in clf.history_])
    per_worker = de.history_frame(clf, per_worker=True)
    assert len(per_worker) == 3 * len(clf.history_)
    assert set(per_worker["status"]) == {"used"}


def test_history_frame_of_an_unfitted_estimator_says_so():
    with pytest.raises(ValueError, match="not fitted"):
        de.history_frame(de.Ridge())


def test_plot_history_draws_every_round(flights):
    from bokeh.models import ColumnDataSource
    from bokeh.plotting import figure

    X, y = flights
    clf = de.LogisticRegression(C=0.5, tol=1e-3, backend="inprocess", n_workers=2).fit(X, y)
    layout = de.plot_history(clf)
    titles = {f.title.text for f in layout.select({"type": figure})}
    assert titles == {"Relative duality gap", "Primal and dual objectives",
                      "Workers holding chunks and results used",
                      "Seconds per worker per round",
                      "Backup workers, dropped and preempted results"}
    sources = {s.name: s for s in layout.select({"type": ColumnDataSource})}
    assert len(sources["daskelastic-rounds"].data["round"]) == len(clf.history_)
    assert len(sources["daskelastic-worker-seconds"].data["round"]) == 2 * len(clf.history_)


# -- telemetry on a real cluster -------------------------------------------------------
def test_each_round_of_a_dask_fit_is_a_scheduler_event(flights, client):
    X, y = flights
    clf = de.LogisticRegression(C=0.5, tol=1e-3, backend="dask").fit(X, y)
    events = _fit_events(client)
    kinds = [m["event"] for m in events]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("placement") == 1
    assert kinds.count("round") == len(clf.history_)
    start, end = events[0], events[-1]
    rounds = [m for m in events if m["event"] == "round"]
    placement = next(m for m in events if m["event"] == "placement")["placement"]
    assert start["estimator"] == "LogisticRegression" and start["client"] == client.id
    assert start["n_samples"] == X.shape[0] and start["params"]["tol"] == 1e-3
    workers = set(client.scheduler_info()["workers"])
    assert set(placement) == workers
    assert sum(p["rows"] for p in placement.values()) == X.shape[0]
    assert sum(len(p["chunks"]) for p in placement.values()) == 8
    for msg, h in zip(rounds, clf.history_):
        entry = msg["entry"]
        assert entry["round"] == h["round"] and entry["duality_gap"] == h["duality_gap"]
        assert set(entry["worker_seconds"]) == workers
        assert msg["estimator"] == "LogisticRegression"
    assert end["status"] == "converged" and end["n_iter"] == clf.n_iter_[0]
    assert end["duality_gap"] == clf.duality_gap_


def test_a_fit_that_runs_out_of_rounds_ends_as_max_iter(flights, client):
    from sklearn.exceptions import ConvergenceWarning

    X, y = flights
    with pytest.warns(ConvergenceWarning):
        de.Ridge(alpha=1.0, tol=1e-12, max_iter=3, backend="dask", solver="cocoa").fit(
            X, y.astype(float))
    end = _fit_events(client)[-1]
    assert end["event"] == "end" and end["status"] == "max_iter" and end["n_iter"] == 3


@pytest.mark.parametrize("batch", [True, False], ids=["batch handler", "log_event"])
def test_event_sender_publishes_every_message_in_order(batch, client):
    from daskelastic.monitoring import EventSender, register_dashboard

    assert register_dashboard(client)
    topic = f"daskelastic-test-{batch}"
    sender = EventSender(client, topic, batch=batch)
    for i in range(60):
        sender.send({"i": i})
        if i % 20 == 0:
            time.sleep(0.15)  # some messages go in the middle of a batch
    assert sender.flush()
    assert [m["i"] for _, m in client.get_events(topic)] == list(range(60))
    assert sender.sent == 60 and sender.failed == 0


def test_telemetry_off_publishes_nothing(flights, client):
    X, y = flights
    before = len(client.get_events(TOPIC))
    with dask.config.set({"daskelastic.telemetry": False}):
        de.LogisticRegression(tol=1e-2, backend="dask").fit(X, y)
    assert len(client.get_events(TOPIC)) == before


def test_in_process_fits_publish_no_events(flights, client):
    X, y = flights
    before = len(client.get_events(TOPIC))
    de.LogisticRegression(tol=1e-2, backend="inprocess").fit(X, y)
    assert len(client.get_events(TOPIC)) == before


def test_the_placement_is_published_again_after_a_scale_in(flights, client):
    """The dashboard's chunks-per-worker must follow the chunks when they move."""
    from daskelastic.testing import ScheduledScaling

    X, y = flights
    clf = de.LogisticRegression(C=0.5, tol=1e-4, backend="dask", max_iter=200,
                                scaling_policy=ScheduledScaling({2: 1},
                                                                release_workers=False)).fit(X, y)
    counts = [e["n_workers"] for e in clf.history_]
    assert counts[:3] == [2, 2, 2] and set(counts[3:]) == {1}
    events = _fit_events(client)
    placements = [m["placement"] for m in events if m["event"] == "placement"]
    assert len(placements) == 2
    first, last = placements
    assert len(first) == 2 and len(last) == 1
    (holder, held), = last.items()
    assert held["rows"] == X.shape[0] and sorted(held["chunks"]) == list(range(8))
    assert set(clf.history_[-1]["worker_rows"]) == {holder}
    # the page's record of the fit ends with the same placement
    log = FitLog()
    for m in events:
        log.add(m)
    (record,) = log.records()
    assert record.placement == last


def test_a_broken_chunk_map_never_fails_the_fit(client):
    """Telemetry must not fail a fit: a placement it cannot build is skipped."""
    from types import SimpleNamespace

    from daskelastic.monitoring import FitMonitor

    backend = SimpleNamespace(fit_id="fit-broken-map", placement={"w": [0, 1]},
                              chunk_sizes={0: 10})   # chunk 1 has no size
    monitor = FitMonitor(de.Ridge(), backend, client)
    assert monitor.sender is not None
    assert monitor.on_round({"round": 0, "time": 0.1, "duality_gap": 0.5,
                             "n_workers": 1}) is False
    assert monitor.finish() == "stopped"
    kinds = [m["event"] for m in _fit_events(client, "fit-broken-map")]
    assert kinds == ["start", "round", "end"]
