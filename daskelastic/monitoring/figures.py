"""The Bokeh figures of a fit, for the dashboard page and for :func:`plot_history`.

:class:`FitFigures` owns the data sources and the figures; the dashboard page
streams new rounds into the same sources that :func:`plot_history` fills
once, so both draw a fit the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .records import placement_columns, round_columns, scale_in_columns, worker_columns

if TYPE_CHECKING:
    from bokeh.models import Column
    from sklearn.base import BaseEstimator

__all__ = ["FitFigures", "plot_history", "COLORS"]

#: Glyph colours (distinct, so a rendering can be checked pixel by pixel).
COLORS = {
    "duality_gap": "#1f77b4",
    "primal": "#2ca02c",
    "dual": "#9467bd",
    "n_workers": "#8c564b",
    "n_used": "#17becf",
    "scale_in": "#d62728",
    "used": "#bcbd22",
    "dropped": "#d62728",
    "preempted": "#ff7f0e",
    "n_backup": "#e377c2",
    "rows": "#aec7e8",
    "cut": "#7f7f7f",
}
STATUSES = ["used", "dropped", "preempted"]


class FitFigures:
    """The figures of one fit and the data sources behind them.

    Parameters
    ----------
    height : int, default=240
        Height of each figure in pixels.
    placement : bool, default=True
        Include the chunks-and-rows-per-worker figure.

    Attributes
    ----------
    gap, objective, workers, stragglers, backups, rows : bokeh.plotting.figure
        Relative duality gap (log scale) over time; primal and dual over
        time; workers holding chunks and results used per round over time,
        with scale-in marked; each worker's seconds per round, coloured by
        used, dropped or preempted; backup workers, dropped and preempted
        results per round; rows and chunks per worker (None without
        ``placement``).

    Examples
    --------
    >>> from daskelastic.monitoring import FitFigures
    >>> figures = FitFigures()
    >>> figures.show([{"round": 0, "time": 0.1, "duality_gap": 0.5, "n_workers": 2,
    ...                "worker_seconds": {"a": 0.01, "b": 0.02}}], tol=1e-4)
    >>> figures.set_placement({"a": {"chunks": [0, 2], "rows": 500},
    ...                        "b": {"chunks": [1, 3], "rows": 500}})
    >>> len(figures.per_worker.data["worker"]), list(figures.rows.y_range.factors)
    (2, ['a', 'b'])
    """

    def __init__(self, *, height=240, placement=True):
        from bokeh.models import (
            ColumnDataSource,
            DataRange1d,
            FactorRange,
            HoverTool,
            LabelSet,
            Span,
        )
        from bokeh.plotting import figure
        from bokeh.transform import factor_cmap

        self.rounds = ColumnDataSource(round_columns([]), name="daskelastic-rounds")
        self.per_worker = ColumnDataSource(worker_columns([]),
                                           name="daskelastic-worker-seconds")
        self.scale_ins = ColumnDataSource(scale_in_columns([]), name="daskelastic-scale-ins")
        self.chunks = ColumnDataSource(_placement_data({}), name="daskelastic-placement")
        common = {"height": height, "sizing_mode": "stretch_width",
                  "tools": "pan,wheel_zoom,box_zoom,reset,save"}

        self.gap = figure(title="Relative duality gap", y_axis_type="log",
                          x_axis_label="seconds", **common)
        self.gap.line("time", "duality_gap", source=self.rounds, line_width=2,
                      color=COLORS["duality_gap"])
        self.gap.scatter("time", "duality_gap", source=self.rounds, size=5,
                         color=COLORS["duality_gap"])
        self.tol = Span(location=1.0, dimension="width", line_dash="dashed",
                        line_color="gray", visible=False)
        self.gap.add_layout(self.tol)
        self.gap.add_tools(HoverTool(tooltips=[("round", "@round"), ("gap", "@duality_gap{0.00e}"),
                                               ("seconds", "@time{0.00}")]))

        self.objective = figure(title="Primal and dual objectives", x_range=self.gap.x_range,
                                x_axis_label="seconds", **common)
        for key in ("primal", "dual"):
            self.objective.line("time", key, source=self.rounds, line_width=2,
                                color=COLORS[key], legend_label=key)
        self.objective.legend.location = "bottom_right"

        self.workers = figure(title="Workers holding chunks and results used",
                              x_range=self.gap.x_range, x_axis_label="seconds",
                              y_range=DataRange1d(start=0, range_padding=0.25), **common)
        self.workers.step("time", "n_workers", source=self.rounds, mode="after", line_width=5,
                          color=COLORS["n_workers"], legend_label="workers")
        self.workers.step("time", "n_used", source=self.rounds, mode="after", line_width=2,
                          line_dash="dashed", color=COLORS["n_used"], legend_label="results used")
        self.workers.scatter("time", "n_workers", source=self.scale_ins, size=14,
                             marker="inverted_triangle", color=COLORS["scale_in"],
                             legend_label="scale-in")
        self.workers.legend.location = "bottom_left"

        self.stragglers = figure(title="Seconds per worker per round", x_axis_label="round",
                                 y_axis_label="round start to result (s)", **common)
        self.stragglers.scatter("round", "cut", source=self.rounds, size=14, marker="dash",
                                line_width=2, color=COLORS["cut"], legend_label="preemption")
        self.stragglers.scatter("round", "arrival", source=self.per_worker, size=7,
                                color=factor_cmap("status", [COLORS[s] for s in STATUSES],
                                                  STATUSES),
                                legend_field="status")
        self.stragglers.add_tools(HoverTool(tooltips=[("worker", "@worker"), ("round", "@round"),
                                                      ("result after", "@arrival{0.000} s"),
                                                      ("solver", "@seconds{0.000} s"),
                                                      ("status", "@status")]))
        self.stragglers.legend.location = "top_left"

        self.backups = figure(title="Backup workers, dropped and preempted results",
                              x_axis_label="round", x_range=self.stragglers.x_range,
                              y_range=DataRange1d(start=0, range_padding=0.25), **common)
        self.backups.vbar(x="round", top="n_backup", source=self.rounds, width=0.8,
                          color=COLORS["n_backup"], legend_label="backup workers")
        self.backups.scatter("round", "n_dropped", source=self.rounds, size=6,
                             color=COLORS["dropped"], legend_label="dropped")
        self.backups.scatter("round", "n_preempted", source=self.rounds, size=6,
                             marker="square", color=COLORS["preempted"],
                             legend_label="preempted")
        self.backups.legend.location = "top_left"

        self.rows = None
        if placement:
            self.rows = figure(title="Rows and chunks per worker", y_range=FactorRange(),
                               x_axis_label="rows", **common)
            self.rows.hbar(y="worker", right="rows", source=self.chunks, height=0.7,
                           color=COLORS["rows"])
            self.rows.add_layout(LabelSet(x=0, y="worker", text="chunks_label",
                                          source=self.chunks, x_offset=5, y_offset=-6,
                                          text_font_size="11px"))
            self.rows.x_range.start = 0
            self.rows.add_tools(HoverTool(tooltips=[("worker", "@worker"), ("rows", "@rows"),
                                                    ("chunks", "@chunk_ids")]))

    # -- data ---------------------------------------------------------------------
    def show(self, entries, *, tol=None):
        """Draw these rounds, replacing what was drawn.

        Parameters
        ----------
        entries : list of dict
            History entries.
        tol : float, optional
            The fit's target gap, drawn as a dashed line.
        """
        self.rounds.data = round_columns(entries)
        self.per_worker.data = worker_columns(entries)
        self.scale_ins.data = scale_in_columns(entries)
        self.set_tol(tol)

    def extend(self, entries, previous=None):
        """Append rounds to what is drawn.

        Parameters
        ----------
        entries : list of dict
            The new history entries.
        previous : dict, optional
            The last entry already drawn (to mark a scale-in at the first new one).
        """
        if not entries:
            return
        self.rounds.stream(round_columns(entries))
        new_workers = worker_columns(entries)
        if new_workers["round"]:
            self.per_worker.stream(new_workers)
        scale_ins = scale_in_columns(([previous] if previous else []) + list(entries))
        if scale_ins["round"]:
            self.scale_ins.stream(scale_ins)

    def set_tol(self, tol):
        """Draw the target gap as a dashed line.

        Parameters
        ----------
        tol : float or None
            The fit's ``tol``; nothing is drawn for None or 0.
        """
        if tol:
            self.tol.location = float(tol)
            self.tol.visible = True
        else:
            self.tol.visible = False

    def set_placement(self, placement):
        """Draw rows and chunks per worker.

        Parameters
        ----------
        placement : dict
            ``{worker: {"chunks": [chunk ids], "rows": n}}``.
        """
        if self.rows is None:
            return
        cols = _placement_data(placement)
        self.rows.y_range.factors = cols["worker"]
        self.chunks.data = cols

    def layout(self):
        """The figures in a grid, two per row.

        Returns
        -------
        bokeh.models.Column
            The figures, to show or embed.
        """
        from bokeh.layouts import column, row

        last = [self.backups] + ([self.rows] if self.rows is not None else [])
        return column(row(self.gap, self.objective, sizing_mode="stretch_width"),
                      row(self.workers, self.stragglers, sizing_mode="stretch_width"),
                      row(*last, sizing_mode="stretch_width"),
                      sizing_mode="stretch_width")


def _placement_data(placement):
    cols = placement_columns(placement)
    cols["chunks_label"] = [f"{c} chunks" for c in cols["chunks"]]
    return cols


def plot_history(estimator: BaseEstimator | Sequence[Mapping[str, Any]], *,
                 height: int = 240) -> Column:
    """Bokeh plots of a fit's rounds: convergence, workers and stragglers.

    Works for every fit, in-process or on Dask: the plots read the
    estimator's ``history_``.  These are the figures of the ``/daskelastic``
    dashboard page, drawn once.

    Parameters
    ----------
    estimator : estimator or list of dict
        A fitted daskelastic estimator, or a ``history_`` list.
    height : int, default=240
        Height of each figure in pixels.

    Returns
    -------
    bokeh.models.Column
        The relative duality gap (log scale, with ``tol`` dashed) and the
        primal and dual objectives over time; the workers holding chunks and
        the results used per round, with scale-in marked; each worker's
        seconds per round with dropped and preempted results highlighted;
        and backup workers per round.  Show it with ``bokeh.plotting.show``
        or save it with ``bokeh.io.save``.

    See Also
    --------
    history_frame : The same history as a pandas DataFrame.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic import LogisticRegression, plot_history
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> clf = LogisticRegression(n_workers=2, backend="inprocess").fit(X, y)
    >>> layout = plot_history(clf)
    >>> [len(r.children) for r in layout.children]
    [2, 2, 1]
    """
    from .records import _entries

    entries = _entries(estimator)
    figures = FitFigures(height=height, placement=False)
    figures.show(entries, tol=getattr(estimator, "tol", None))
    return figures.layout()
