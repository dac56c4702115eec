"""The ``/daskelastic`` page of the Dask dashboard.

:class:`DashboardPlugin` is a scheduler plugin.  Its ``log_event`` hook folds
the fits' events (topic ``"daskelastic"``) into a
:class:`~daskelastic.monitoring.records.FitLog`, and when it starts it adds a
Bokeh application at ``/daskelastic`` to the scheduler's running dashboard
server, linked from the dashboard's *More* menu, the way distributed adds its
own pages (``distributed/dashboard/scheduler.py``).  Nothing has to be
configured and the scheduler need not restart: the first Dask fit registers
the plugin (``Client.register_plugin``).  It can also be loaded with the
scheduler, ``dask scheduler --preload daskelastic.monitoring``.

The page is read-only.  Every half second it draws what is new: the selected
fit's rounds (see :class:`~daskelastic.monitoring.figures.FitFigures`), its
status, and a table with one row per fit.
"""

import html
import logging
import math
import weakref

from distributed.diagnostics.plugin import SchedulerPlugin

from .. import _distributed
from .records import TOPIC, FitLog

__all__ = ["DashboardPlugin", "register_dashboard", "dashboard_link", "PAGE", "PLUGIN_NAME"]

logger = logging.getLogger(__name__)

#: Path of the page on the dashboard server.
PAGE = "/daskelastic"
#: Name of the scheduler plugin.
PLUGIN_NAME = "daskelastic-dashboard"
#: Scheduler handler taking a list of events (``topic``, ``msgs``).
BATCH_HANDLER = "daskelastic_log_events"
#: Milliseconds between two updates of an open page.
UPDATE_INTERVAL = 500
#: Pixels of the table of fits: its header, a row, and the rows shown before it scrolls.
TABLE_HEADER, TABLE_ROW, TABLE_ROWS_SHOWN = 30, 25, 6
_MENU_ENTRY = {"url": PAGE.strip("/"), "name": "Daskelastic Fits"}


class DashboardPlugin(SchedulerPlugin):
    """Collect the fits' events on the scheduler and serve the ``/daskelastic`` page.

    Parameters
    ----------
    max_fits : int, default=50
        Fits remembered (the oldest ended ones are forgotten first).

    Attributes
    ----------
    log : daskelastic.monitoring.records.FitLog
        The fits seen, once the plugin started on a scheduler.
    page_served : bool
        Whether the scheduler's dashboard serves the page (False without a
        dashboard, or without bokeh on the scheduler).

    See Also
    --------
    register_dashboard : Register the plugin from a client.

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> from daskelastic.monitoring import DashboardPlugin
    >>> with LocalCluster(n_workers=1, processes=False,
    ...                   dashboard_address="127.0.0.1:0") as cluster, \\
    ...         Client(cluster) as client:
    ...     client.register_plugin(DashboardPlugin())
    ...     client.log_event("daskelastic", {"event": "start", "fit": "f1"})
    ...     client.run_on_scheduler(
    ...         lambda dask_scheduler: [r.fit for r in
    ...                                 dask_scheduler.plugins["daskelastic-dashboard"]
    ...                                 .log.records()])
    ['f1']
    """

    name = PLUGIN_NAME
    idempotent = True

    def __init__(self, max_fits=50):
        self.max_fits = max_fits
        self.log = None
        self.page_served = False

    async def start(self, scheduler):
        """Replay the events logged so far, add the page and the batch handler.

        Parameters
        ----------
        scheduler : distributed.Scheduler
            The scheduler the plugin runs in.
        """
        if self.log is None:
            self.log = FitLog(self.max_fits)
            for _, msg in scheduler.get_events(TOPIC):
                self.log.add(msg)

        def log_events(topic, msgs):
            for msg in msgs:
                scheduler.log_event(topic, msg)

        # several events in one message: a fit sends its rounds' events together
        _distributed.add_handler(scheduler, BATCH_HANDLER, log_events)
        try:
            self.page_served = add_page(scheduler)
        except Exception as e:  # noqa: BLE001 - the events are still collected
            logger.warning("daskelastic: cannot add %s to the dashboard: %r", PAGE, e)

    def log_event(self, topic, msg):
        """Fold an event of topic ``"daskelastic"`` into the log.

        Parameters
        ----------
        topic : str
            The event's topic; others are ignored.
        msg : dict
            The event.
        """
        if topic == TOPIC and self.log is not None:
            self.log.add(msg)

    def remove_client(self, scheduler, client):
        """Mark the running fits of a client that left as ``disconnected``.

        Parameters
        ----------
        scheduler : distributed.Scheduler
            The scheduler.
        client : str
            The id of the client that left.
        """
        if self.log is not None:
            self.log.client_gone(client)


def add_page(scheduler):
    """Serve ``/daskelastic`` on the scheduler's dashboard; return whether it is served.

    Idempotent.  Adds a Bokeh server application next to distributed's own,
    with the same URL prefix, page template and theme, and adds the page to
    the *More* menu of every dashboard page.
    """
    return _distributed.add_dashboard_page(scheduler, PAGE, _page_doc, _MENU_ENTRY)


def _page_doc(scheduler, extra, doc):
    plugin = scheduler.plugins.get(PLUGIN_NAME)
    log = plugin.log if plugin is not None and plugin.log is not None else FitLog()
    page = FitsPage(log, scheduler=scheduler)
    page.update()
    doc.add_periodic_callback(page.update, UPDATE_INTERVAL)
    doc.title = "Dask: daskelastic fits"
    doc.add_root(page.root)
    _distributed.style_dashboard_doc(doc, extra)


class FitsPage:
    """The contents of one open ``/daskelastic`` page.

    Shows one fit at a time, chosen in a selector (the newest fit until the
    reader picks one), and a table with one row per fit.

    Parameters
    ----------
    log : daskelastic.monitoring.records.FitLog
        The fits to show.
    scheduler : distributed.Scheduler, optional
        The scheduler the page runs in: each worker's process memory is
        read from its ``WorkerState.memory``.

    Attributes
    ----------
    root : bokeh.models.Column
        The page's layout.
    figures : daskelastic.monitoring.figures.FitFigures
        The selected fit's figures.
    """

    def __init__(self, log, scheduler=None):
        from bokeh.layouts import column, row
        from bokeh.models import (
            ColumnDataSource,
            CustomJS,
            DataTable,
            Div,
            NumberFormatter,
            ScientificFormatter,
            Select,
            TableColumn,
        )

        from .figures import FitFigures

        self.log = log
        self.scheduler = scheduler
        self.figures = FitFigures()
        self.select = Select(title="Fit", options=[], value="", width=420, name="daskelastic-fit")
        self.select.on_change("value", self._on_select)
        self.status = Div(text="<b>daskelastic</b>: no fit yet", sizing_mode="stretch_width")
        self.table_source = ColumnDataSource(_table_columns([]), name="daskelastic-fits")
        number = ScientificFormatter(precision=2, power_limit_low=0)
        seconds = NumberFormatter(format="0.0")
        self.table = DataTable(source=self.table_source, index_position=None,
                               height=TABLE_HEADER + TABLE_ROW, row_height=TABLE_ROW,
                               sizing_mode="stretch_width", columns=[
                                   TableColumn(field="fit", title="fit"),
                                   TableColumn(field="estimator", title="estimator"),
                                   TableColumn(field="status", title="status"),
                                   TableColumn(field="rounds", title="rounds"),
                                   TableColumn(field="duality_gap", title="gap",
                                               formatter=number),
                                   TableColumn(field="n_workers", title="workers"),
                                   TableColumn(field="seconds", title="seconds",
                                               formatter=seconds),
                                   TableColumn(field="eta", title="ETA (s)",
                                               formatter=seconds)])
        # BokehJS redraws a DataTable when its CDSView's indices change, and
        # new data with as many rows gives the same indices: without this the
        # table would keep showing its first values while the fits run
        self.table_source.js_on_change("data", CustomJS(args={"table": self.table},
                                                        code="table.view.change.emit()"))
        self.root = column(row(self.select, self.status, sizing_mode="stretch_width"),
                           self.table, self.figures.layout(), sizing_mode="stretch_width")
        self.selected = None      # the fit shown
        self._pinned = False      # the reader chose it
        self._updating = False
        self._seen = (-1, None)   # log version and fit of the last update
        self._drawn_fit = None
        self._drawn = 0
        self._last_round = None
        self._drawn_placement = None

    def _on_select(self, attr, old, new):
        if not self._updating and new:
            self._pinned = True
            self.selected = new
            self.update()

    def update(self):
        """Draw what changed in the log since the last update.

        The selector changes last, so that a page showing a fit's id shows
        that fit's rounds.
        """
        records = self.log.records()
        self._draw_process_memory()
        if self._seen[0] == self.log.version and self._seen[1] == self.selected:
            return
        known = {r.fit for r in records}
        if records and (not self._pinned or self.selected not in known):
            self.selected = records[-1].fit  # follow the newest fit
            self._pinned = False
        self.table_source.data = _table_columns(records)
        # as tall as its rows (up to a few, then it scrolls): a fixed height
        # left an empty band between one fit's row and the figures
        height = TABLE_HEADER + TABLE_ROW * min(max(len(records), 1), TABLE_ROWS_SHOWN)
        if self.table.height != height:
            self.table.height = height
        record = self.log.get(self.selected) if self.selected else None
        if record is not None:
            self._draw(record)
        self._seen = (self.log.version, self.selected)
        options = [(r.fit, f"{r.estimator} {r.fit} ({r.status})") for r in reversed(records)]
        self._updating = True
        try:
            if list(self.select.options) != options:
                self.select.options = options
            if self.selected and self.select.value != self.selected:
                self.select.value = self.selected
        finally:
            self._updating = False

    def _draw_process_memory(self):
        """Each shown worker's process memory (RSS), as the scheduler last heard it."""
        workers = getattr(self.scheduler, "workers", None)
        if workers is None or self._drawn_placement is None:
            return
        memory = {}
        for w in self._drawn_placement:
            ws = workers.get(w)
            if ws is not None:
                memory[w] = ws.memory.process
        self.figures.set_process_memory(memory)

    def _draw(self, record):
        entries = record.entries
        fresh = self._drawn_fit != record.fit or self._drawn > len(entries) or (
            self._drawn and entries[self._drawn - 1]["round"] != self._last_round)
        if fresh:
            self.figures.show(entries, tol=record.params.get("tol"))
        else:
            previous = entries[self._drawn - 1] if self._drawn else None
            self.figures.extend(entries[self._drawn:], previous)
        self._drawn = len(entries)
        self._drawn_fit = record.fit
        self._last_round = entries[-1]["round"] if entries else None
        if fresh or record.placement is not self._drawn_placement:
            self.figures.set_placement(record.placement)
            self._drawn_placement = record.placement
            self._draw_process_memory()
        self.status.text = _status_html(record)


def _table_columns(records):
    rows = [r.summary() for r in reversed(records)]
    keys = ["fit", "estimator", "status", "rounds", "duality_gap", "n_workers", "seconds",
            "eta"]
    return {k: [row[k] for row in rows] for k in keys}


def _status_html(record):
    s = record.summary()
    tol = record.params.get("tol")
    max_iter = record.params.get("max_iter", "?")
    parts = [f"<b>{html.escape(s['estimator'])}</b> {html.escape(s['fit'])}: "
             f"<b>{html.escape(s['status'])}</b>"]
    if record.entries:
        last = record.entries[-1]
        parts.append(f"round {last['round']}/{max_iter}")
        gap = f"gap {s['duality_gap']:.2e}"
        parts.append(gap + (f" (tol {tol:g})" if isinstance(tol, (int, float)) else ""))
        parts.append(f"{s['n_workers']} workers")
        parts.append(f"{s['seconds']:.1f} s")
        if record.running and not math.isnan(s["eta"]):
            parts.append(f"ETA {s['eta']:.1f} s")
    n, d = record.sizes.get("n_samples"), record.sizes.get("n_features")
    if isinstance(n, int) and isinstance(d, int):
        parts.append(f"{n:,} rows × {d:,} features")
    if record.end and record.end.get("error"):
        parts.append(f"<span style='color:#d62728'>{html.escape(record.end['error'])}</span>")
    return " · ".join(p for p in parts if p)


# -- client side -------------------------------------------------------------------
def register_dashboard(client):
    """Serve the ``/daskelastic`` page on the dashboard of ``client``'s scheduler.

    Registers :class:`DashboardPlugin` (once per client and scheduler: later
    calls return at once); Dask fits call this themselves.  If the scheduler
    cannot load the plugin (no daskelastic installed there), a warning is
    logged and False returned: the fits still publish their events.

    Parameters
    ----------
    client : distributed.Client
        A client of the cluster.

    Returns
    -------
    bool
        Whether the plugin is registered.

    See Also
    --------
    dashboard_link : The page's address.

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> from daskelastic.monitoring import dashboard_link, register_dashboard
    >>> with LocalCluster(n_workers=1, processes=False,
    ...                   dashboard_address="127.0.0.1:0") as cluster, \\
    ...         Client(cluster) as client:
    ...     register_dashboard(client), dashboard_link(client).endswith("/daskelastic")
    (True, True)
    """
    address = client.scheduler.address
    if _registered.get(client) == address:
        return True
    try:
        client.register_plugin(DashboardPlugin())
    except Exception as e:  # noqa: BLE001 - the fit goes on without the page
        logger.warning("daskelastic: no %s page on the scheduler (%s: %s); fits still "
                       "publish their rounds as events", PAGE, type(e).__name__, e)
        return False
    _registered[client] = address
    return True


#: Clients that registered the plugin, with their scheduler's address.
_registered = weakref.WeakKeyDictionary()


def dashboard_link(client):
    """The address of the ``/daskelastic`` page of ``client``'s dashboard.

    Parameters
    ----------
    client : distributed.Client
        A client of the cluster.

    Returns
    -------
    str
        ``client.dashboard_link`` with ``/daskelastic`` for ``/status``.

    See Also
    --------
    register_dashboard : Serve the page.

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> with LocalCluster(n_workers=1, processes=False,
    ...                   dashboard_address="127.0.0.1:0") as cluster, \\
    ...         Client(cluster) as client:
    ...     dashboard_link(client) == client.dashboard_link.replace("/status", "/daskelastic")
    True
    """
    link = client.dashboard_link
    base = link[: -len("/status")] if link.endswith("/status") else link.rstrip("/")
    return base + PAGE


def dask_setup(dask_server):
    """Preload entry point: ``dask scheduler --preload daskelastic.monitoring``.

    Adds :class:`DashboardPlugin` to a scheduler as it starts (the scheduler
    starts the plugin after the preloads); does nothing on a worker.

    Parameters
    ----------
    dask_server : distributed.Scheduler or distributed.Worker
    """
    from distributed import Scheduler

    if isinstance(dask_server, Scheduler):
        dask_server.add_plugin(DashboardPlugin(), idempotent=True)
