"""The /daskelastic page of a real scheduler's dashboard: over HTTP, live, and in Chromium.

The page is read as a browser does: an HTTP GET of ``/daskelastic``, then
its Bokeh document over the page's websocket (``bokeh.client.pull_session``
opens a session on the scheduler's Bokeh server), and in headless Chromium,
for the live updates and the pixels.
"""

import _thread
import logging
import os
import signal
import threading
import time
import urllib.request
import warnings
from pathlib import Path

import numpy as np
import pytest
from bokeh.models import Div, Select
from bokeh.plotting import figure
from sklearn.exceptions import ConvergenceWarning

import daskelastic as de
from daskelastic.monitoring import TOPIC, dashboard_link, register_dashboard
from daskelastic.monitoring.figures import COLORS
from daskelastic.testing import RandomSlowdown, inject_stragglers

from browser import chromium_missing, count_colour, render, watch

SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "_static" / "dashboard.png"
FIGURE_TITLES = {"Relative duality gap", "Primal and dual objectives",
                 "Workers holding chunks and results used", "Seconds per worker per round",
                 "Backup workers, dropped and preempted results", "Rows and chunks per worker",
                 "Memory per worker"}
#: Glyphs that must be drawn in the browser: gap, primal, workers, worker seconds, rows.
COLORS_CHECKED = {k: COLORS[k] for k in ("duality_gap", "primal", "n_workers", "used", "rows")}


def _local(link):
    """The link on 127.0.0.1 (the test cluster's dashboard listens on every interface)."""
    port = link.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
    return f"http://127.0.0.1:{port}/" + link.split("://", 1)[1].split("/", 1)[1]


def _page(client):
    return _local(dashboard_link(client))


class _Page:
    """An open /daskelastic page: a session on the scheduler's Bokeh server.

    ``pull_session`` opens the session over the page's websocket, as a
    browser does; the page is then read where the server keeps it (the
    session's document, which the server sends to the browser), since
    Bokeh's Python client drops the server's updates while it waits for a
    reply.  What a browser receives is checked in Chromium below.
    """

    def __init__(self, client, cluster):
        from bokeh.client import pull_session
        from bokeh.server.server import BokehTornado

        self.session = pull_session(url=_page(client))
        app = next(a for a in cluster.scheduler.http_application.applications
                   if isinstance(a, BokehTornado) and "/daskelastic" in a.app_paths)
        self.doc = app.get_session("/daskelastic", self.session.id).document

    def choose(self, fit):
        """Pick ``fit`` in the page's selector, as a reader does."""
        self.session.document.select_one({"type": Select}).value = fit
        self.session.force_roundtrip()  # the change reached the server and was handled

    def source(self, name):
        return self.doc.get_model_by_name(f"daskelastic-{name}")

    def rounds(self):
        return list(self.source("rounds").data["round"])

    def fits(self):
        data = self.source("fits").data
        return dict(zip(data["fit"], zip(data["status"], data["rounds"])))

    def selected(self):
        return self.doc.select_one({"type": Select}).value

    def status(self):
        return self.doc.select_one({"type": Div}).text

    def close(self):
        self.session.close()


def _latest_fit(client):
    return [m for _, m in client.get_events(TOPIC) if m["event"] == "start"][-1]["fit"]


def _wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("the page did not show it in time")


def test_page_is_served_with_the_fit_s_figures(flights, client, cluster):
    X, y = flights
    clf = de.LogisticRegression(solver="cocoa", penalize_intercept=True,
                                C=0.5, tol=1e-3, backend="dask").fit(X, y)
    fit = _latest_fit(client)
    with urllib.request.urlopen(_page(client)) as r:
        assert r.status == 200
        body = r.read().decode()
    assert "<title>Dask Diagnostic UI</title>" in body  # the dashboard's own page template
    assert "Bokeh.embed" in body and "/daskelastic/autoload.js" not in body
    page = _Page(client, cluster)
    try:
        titles = {f.title.text for f in page.doc.select({"type": figure})}
        assert titles == FIGURE_TITLES
        assert page.selected() == fit
        assert page.rounds() == [h["round"] for h in clf.history_]
        # rounds done, as the status line says ("round 49/300"), not the entries
        # (which also hold round 0, the start)
        assert page.fits()[fit] == ("converged", clf.n_iter_[0])
        assert f"round {clf.n_iter_[0]}/" in page.status()
        placement = page.source("placement").data
        assert sorted(placement["worker"]) == sorted(client.scheduler_info()["workers"])
        assert sum(placement["rows"]) == X.shape[0]
    finally:
        page.close()


def test_table_of_fits_is_as_tall_as_its_rows(flights, client, cluster):
    """No empty band between the table and the figures."""
    from bokeh.models import DataTable

    from daskelastic.monitoring.dashboard import TABLE_HEADER, TABLE_ROW, TABLE_ROWS_SHOWN

    X, y = flights
    de.LogisticRegression(C=0.5, tol=1e-2, backend="dask").fit(X, y)
    page = _Page(client, cluster)
    try:
        n_fits = len(page.fits())
        table = page.doc.select_one({"type": DataTable})
        assert table.row_height == TABLE_ROW
        assert table.height == TABLE_HEADER + TABLE_ROW * min(n_fits, TABLE_ROWS_SHOWN)
    finally:
        page.close()


def test_page_shows_each_worker_s_memory_and_the_data_it_holds(flights, client, cluster):
    X, y = flights
    # (a penalised intercept keeps the rows sparse: a free one centres a table this
    # small densely)
    de.LogisticRegression(C=0.5, tol=1e-3, penalize_intercept=True, backend="dask").fit(X, y)
    page = _Page(client, cluster)
    try:
        _wait_for(lambda: all(b > 0 for b in page.source("placement").data["nbytes"]))
        data = page.source("placement").data
        workers = cluster.scheduler.workers
        # the data held: every row's packed CSR values and column indices at least
        # (a worker also holds its rows' targets, weights, α and narrow indices)
        assert sum(data["nbytes"]) >= X.data.nbytes + X.indices.nbytes
        assert sum(data["nbytes"]) <= 4 * (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
                                           + 3 * 8 * X.shape[0])
        for w, nbytes, memory in zip(data["worker"], data["nbytes"], data["memory"]):
            rss = workers[w].memory.process
            assert memory > nbytes and abs(memory - rss) <= 0.5 * rss
        assert all(" data · " in label and label.endswith(" process")
                   for label in data["memory_label"])
    finally:
        page.close()


def test_dashboard_more_menu_links_the_page(flights, client):
    register_dashboard(client)
    with urllib.request.urlopen(_local(client.dashboard_link)) as r:
        status_page = r.read().decode()
    assert '<a href="daskelastic">Daskelastic Fits</a>' in status_page


def _grew_while_running(samples, fit):
    """The round counts the page showed for ``fit`` while it ran: at least three, growing."""
    counts = [n for f, n in samples if f == fit and n > 0]
    assert len(set(counts)) >= 3, samples
    assert counts == sorted(counts), samples
    return counts


@pytest.fixture
def interruptible():
    """SIGINT raises ``KeyboardInterrupt`` in the main thread, as in a terminal.

    A test runner started in the background of a non-interactive shell
    inherits SIGINT ignored, and ``_thread.interrupt_main`` then does nothing
    (https://docs.python.org/3/library/_thread.html#thread.interrupt_main).
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _fit_while_watched(client, X, y, watch_page):
    """Run a long fit here while ``watch_page(running)`` runs in a thread.

    When ``watch_page`` returns, the fit is interrupted (KeyboardInterrupt,
    which the fit must raise: had it ended first, the page was not watched
    while it ran); ``running()`` tells the watcher whether the fit still runs.
    The fit is slow on purpose (no acceleration, the cautious fixed σ′ = 4),
    so that it does not reach a gap of 0 — its ``tol`` — before a slow watcher
    has seen it grow.  Returns what ``watch_page`` returned.
    """
    watched, fitting, lock = {}, threading.Event(), threading.Lock()

    def watcher():
        try:
            watched["value"] = watch_page(fitting.is_set)
        except BaseException as exc:  # reported by the test, after the fit
            watched["error"] = exc
        finally:
            with lock:
                if fitting.is_set():   # only a running fit is interrupted
                    _thread.interrupt_main()

    thread = threading.Thread(target=watcher)
    fitting.set()
    thread.start()
    try:
        with pytest.raises(KeyboardInterrupt), warnings.catch_warnings():
            try:
                warnings.simplefilter("ignore", ConvergenceWarning)
                de.LogisticRegression(solver="cocoa", penalize_intercept=True,
                                      C=0.5, tol=0.0, max_iter=100_000, backend="dask",
                                      client=client, acceleration=None,
                                      sigma=4.0).fit(X, y)
            finally:
                with lock:
                    fitting.clear()
    finally:
        thread.join()
    if "error" in watched:
        raise watched["error"]
    return watched["value"]


def _three_counts(samples):
    """Whether the page showed three different round counts of the fit it shows last."""
    shown = samples[-1][0] if samples else None
    return len({n for f, n in samples if f == shown and n > 0}) >= 3


def test_open_page_updates_while_a_fit_runs(flights, client, cluster, interruptible):
    """The page shows the running fit's round count grow.

    The fit runs until the page has shown three different counts (then it is
    interrupted), instead of racing a fit of fixed length.
    """
    X, y = flights
    register_dashboard(client)
    page = _Page(client, cluster)

    def sample(running):
        samples, deadline = [], time.monotonic() + 120
        while running() and time.monotonic() < deadline and not _three_counts(samples):
            samples.append((page.selected(), len(page.rounds())))
            time.sleep(0.2)
        return samples

    try:
        samples = _fit_while_watched(client, X, y, sample)
    finally:
        page.close()
    _grew_while_running(samples, _latest_fit(client))


@pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))
def test_page_in_chromium_updates_while_a_fit_runs(flights, client, interruptible):
    """A page open in Chromium shows the running fit's round count grow.

    The fit runs until the page has shown three different counts (then it is
    interrupted), so a slow browser on a loaded machine samples as often as it
    needs to, instead of racing a fit of fixed length.
    """
    X, y = flights
    register_dashboard(client)
    shown = ("(() => { const d = window.Bokeh && Bokeh.documents[0]; if (!d) return null;"
             " const s = d.get_model_by_name('daskelastic-rounds');"
             " const f = d.get_model_by_name('daskelastic-fit');"
             " return [f.value, s.data.round.length] })()")
    samples = []

    def enough(value):
        if value:
            samples.append(tuple(value))
        return _three_counts(samples)

    values = _fit_while_watched(client, X, y,
                                lambda running: watch(_page(client), shown, until=enough))
    samples = [tuple(v) for v in values if v]
    _grew_while_running(samples, _latest_fit(client))


#: The first row of the page's table of fits as Chromium draws it (the cells'
#: text, through the shadow roots of Bokeh's widgets), and the status line.
_DRAWN_TABLE = r"""(() => {
  const cells = [];
  const walk = (node) => {
    if (!node) return;
    if (node.classList && node.classList.contains('slick-cell')) cells.push(node.textContent);
    if (node.shadowRoot) walk(node.shadowRoot);
    for (const child of node.children || []) walk(child);
  };
  walk(document.body);
  return cells.length >= 8 ? cells.slice(0, 8) : null;
})()"""


@pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))
def test_table_in_chromium_follows_a_fit_to_its_end(flights, client):
    """The drawn table shows the fit's end, not the values it had when its row appeared.

    BokehJS redraws a table when its number of rows changes; a running fit's
    row changes in place.
    """
    X, y = flights
    register_dashboard(client)
    done, fitted = threading.Event(), {}

    def fit():
        try:
            time.sleep(3)   # the page is open before the fit's row appears
            fitted["clf"] = de.LogisticRegression(C=0.5, tol=1e-6, max_iter=300,
                                                  backend="dask", client=client).fit(X, y)
            fitted["id"] = _latest_fit(client)
        finally:
            done.set()

    thread = threading.Thread(target=fit)
    thread.start()
    try:
        rows = watch(_page(client), _DRAWN_TABLE, timeout=120,
                     until=lambda row: done.is_set() and bool(row)
                     and row[0] == fitted.get("id") and row[2] != "running")
    finally:
        thread.join()
    clf = fitted["clf"]
    fit_id, estimator, status, rounds = rows[-1][:4]
    assert estimator == "LogisticRegression" and status == "converged"
    assert int(rounds) == clf.n_iter_[0]


def _on_round(client, n, action):
    """Call ``action()`` once, when the event of round ``n`` of a fit reaches this client."""
    fired = threading.Event()

    def handler(event):
        _, msg = event
        if msg.get("event") == "round" and msg["entry"]["round"] >= n and not fired.is_set():
            fired.set()
            action()

    client.subscribe_topic(TOPIC, handler)
    return fired


def test_page_survives_an_interrupted_fit(flights, client, cluster, interruptible):
    X, y = flights
    fired = _on_round(client, 3, _thread.interrupt_main)
    try:
        with pytest.raises(KeyboardInterrupt):
            de.LogisticRegression(solver="cocoa", penalize_intercept=True,
                                  C=0.5, tol=0.0, max_iter=5000, backend="dask").fit(X, y)
    finally:
        client.unsubscribe_topic(TOPIC)
    assert fired.is_set()
    fit = _latest_fit(client)
    end = [m for _, m in client.get_events(TOPIC) if m.get("fit") == fit][-1]
    assert end["event"] == "end" and end["status"] == "interrupted"
    page = _Page(client, cluster)
    try:
        status, rounds = page.fits()[fit]
        assert status == "interrupted" and 3 <= rounds < 5000
    finally:
        page.close()
    # the cluster and the page go on
    clf = de.LogisticRegression(solver="cocoa", penalize_intercept=True,
                                C=0.5, tol=1e-2, backend="dask").fit(X, y)
    assert clf.duality_gap_ <= 1e-2


def test_page_survives_a_failed_fit(flights, client, cluster):
    X, y = flights
    wipe = threading.Event()
    fired = _on_round(client, 3, wipe.set)

    def wipe_workers():  # the workers lose the fit's state between two rounds
        if wipe.wait(60):
            client.run(lambda dask_worker: getattr(dask_worker, "_daskelastic_fits", {}).clear())

    helper = threading.Thread(target=wipe_workers)
    helper.start()
    try:
        with pytest.raises(RuntimeError, match="worker holds no state of fit"):
            de.LogisticRegression(solver="cocoa", penalize_intercept=True,
                                  C=0.5, tol=0.0, max_iter=5000, backend="dask").fit(X, y)
    finally:
        wipe.set()
        helper.join()
        client.unsubscribe_topic(TOPIC)
    assert fired.is_set()
    fit = _latest_fit(client)
    end = [m for _, m in client.get_events(TOPIC) if m.get("fit") == fit][-1]
    assert end["status"] == "failed" and end["error"].startswith("RuntimeError")
    page = _Page(client, cluster)
    try:
        assert page.fits()[fit][0] == "failed"
        page.choose(fit)
        _wait_for(lambda: "failed" in page.status())
        assert "RuntimeError" in page.status()
    finally:
        page.close()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_page_tells_concurrent_fits_apart(flights, client, cluster):
    X, y = flights
    fitted = {}

    def fit(name, est):
        fitted[name] = est.fit(X, y)

    threads = [threading.Thread(target=fit, args=(name, est)) for name, est in [
        ("logistic", de.LogisticRegression(solver="cocoa", penalize_intercept=True,
                                           C=0.5, tol=1e-3, backend="dask", client=client)),
        ("svm", de.LinearSVC(solver="cocoa",
                             C=0.5, tol=1e-2, max_iter=300, backend="dask", client=client))]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    starts = [m for _, m in client.get_events(TOPIC) if m["event"] == "start"][-2:]
    fit_of = {m["estimator"]: m["fit"] for m in starts}
    assert set(fit_of) == {"LogisticRegression", "LinearSVC"}
    page = _Page(client, cluster)
    try:
        fits = page.fits()
        for estimator, name in [("LogisticRegression", "logistic"), ("LinearSVC", "svm")]:
            clf = fitted[name]
            assert fits[fit_of[estimator]][1] == clf.history_[-1]["round"]
            page.choose(fit_of[estimator])
            assert page.rounds() == [h["round"] for h in clf.history_]
            gaps = page.source("rounds").data["duality_gap"]
            np.testing.assert_allclose(gaps[-1], clf.history_[-1]["duality_gap"])
    finally:
        page.close()


@pytest.mark.parametrize("policy, status", [("backup", "dropped"), ("preempt", "preempted")])
def test_page_marks_dropped_and_preempted_workers(policy, status, flights, client, cluster):
    from daskelastic.testing import FixedSlowdown

    X, y = flights
    with warnings.catch_warnings(), inject_stragglers(FixedSlowdown([1], factor=30.0)):
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = de.LogisticRegression(solver="cocoa", penalize_intercept=True,
                                    C=0.5, tol=1e-12, max_iter=6, straggler_policy=policy,
                                    backend="dask").fit(X, y)
    page = _Page(client, cluster)
    try:
        shown = page.source("worker-seconds").data
        expected = [(h["round"], w, h["worker_status"][w])
                    for h in clf.history_ for w in h["worker_seconds"]]
        assert list(zip(shown["round"], shown["worker"], shown["status"])) == expected
        assert status in shown["status"]
        if policy == "backup":
            assert page.source("rounds").data["n_backup"][:-1] == [1] * 6
    finally:
        page.close()


def test_preloaded_scheduler_serves_the_page_before_any_fit():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0",
                      scheduler_kwargs={"preload": ["daskelastic.monitoring"]},
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as c:
        with urllib.request.urlopen(_local(dashboard_link(c))) as r:
            assert r.status == 200
        assert c.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.plugins)
                                  ).count("daskelastic-dashboard") == 1


@pytest.mark.skipif(chromium_missing() is not None, reason=str(chromium_missing()))
def test_page_draws_the_fits_in_chromium(flights, client):
    X, y = flights
    de.LinearSVC(solver="cocoa", C=0.5, tol=1e-2, max_iter=300, backend="dask").fit(X, y)
    with inject_stragglers(RandomSlowdown(factor=6.0, probability=0.3, seed=1)):
        clf = de.LogisticRegression(solver="cocoa", penalize_intercept=True,
                                    C=0.5, tol=1e-4, max_iter=300, straggler_policy="dynamic",
                                    backend="dask").fit(X, y)
    ready = ("(() => { const d = window.Bokeh && Bokeh.documents[0];"
             " const s = d && d.get_model_by_name('daskelastic-rounds');"
             " return s ? s.data.round.length : 0 })()")
    png, n_rounds = render(_page(client), ready=ready)
    assert n_rounds == len(clf.history_)
    drawn = {name: count_colour(png, colour) for name, colour in COLORS_CHECKED.items()}
    assert all(n >= 40 for n in drawn.values()), drawn
    if os.environ.get("DASKELASTIC_UPDATE_SCREENSHOT"):
        SCREENSHOT.write_bytes(png)
