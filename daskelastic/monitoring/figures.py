"""The Bokeh figures of a fit, for the dashboard page and for :func:`plot_history`.

:class:`FitFigures` owns the data sources and the figures; the dashboard page
streams new rounds into the same sources that :func:`plot_history` fills
once, so both draw a fit the same way.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .records import (
    format_bytes,
    placement_columns,
    round_columns,
    scale_in_columns,
    worker_columns,
)

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
    "nbytes": "#98df8a",
    "memory": "#c5b0d5",
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
        Include the figures of rows, chunks and memory per worker.

    Attributes
    ----------
    gap, objective, workers, stragglers, backups, rows, memory : bokeh.plotting.figure
        Relative duality gap (log scale) over time, the certified best so
        far in bold and each round's own faint; primal and dual over time,
        likewise; workers holding chunks and results used per round over
        time, with scale-in marked; each worker's seconds per round,
        coloured by used, dropped or preempted; backup workers per round,
        and the rounds that dropped or preempted results; rows and chunks
        per worker, and each worker's process memory beside the bytes of
        data it holds for the fit (these two None without ``placement``).
    note, objective_note : bokeh.models.Title
        What the gap and objective figures say above them when rounds' own
        gaps rose above the best so far (hidden otherwise).

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
            LegendItem,
            NumeralTickFormatter,
            Span,
            Title,
        )
        from bokeh.plotting import figure
        from bokeh.transform import dodge, factor_cmap

        self.rounds = ColumnDataSource(round_columns([]), name="daskelastic-rounds")
        self.per_worker = ColumnDataSource(worker_columns([]),
                                           name="daskelastic-worker-seconds")
        self.scale_ins = ColumnDataSource(scale_in_columns([]), name="daskelastic-scale-ins")
        self.chunks = ColumnDataSource(_placement_data({}), name="daskelastic-placement")
        common = {"height": height, "sizing_mode": "stretch_width",
                  "tools": "pan,wheel_zoom,box_zoom,reset,save"}

        # the bold lines are the certified best so far, which never rise; each
        # round's own certificate is drawn faint (see round_columns)
        self.gap = figure(title="Relative duality gap", y_axis_type="log",
                          x_axis_label="seconds", **common)
        best = self.gap.line("time", "best_gap", source=self.rounds, line_width=2,
                             color=COLORS["duality_gap"], legend_label="best so far")
        self.gap.line("time", "duality_gap", source=self.rounds, line_width=1, alpha=0.35,
                      color=COLORS["duality_gap"], legend_label="each round")
        self.gap.scatter("time", "duality_gap", source=self.rounds, size=4, alpha=0.35,
                         color=COLORS["duality_gap"], legend_label="each round")
        self.gap.legend.location = "bottom_left"
        self.tol = Span(location=1.0, dimension="width", line_dash="dashed",
                        line_color="gray", visible=False)
        self.gap.add_layout(self.tol)
        self.gap.add_tools(HoverTool(renderers=[best], tooltips=[
            ("round", "@round"), ("gap", "@duality_gap{0.00e}"),
            ("best so far", "@best_gap{0.00e}"), ("seconds", "@time{0.00}")]))
        # what the figures say when rounds' own gaps rose above the best so far
        self.note = Title(text="", text_font_style="italic", text_font_size="11px",
                          text_color="#555555", visible=False)
        self.gap.add_layout(self.note, "above")

        self.objective = figure(title="Primal and dual objectives", x_range=self.gap.x_range,
                                x_axis_label="seconds", **common)
        bests = []
        for key in ("primal", "dual"):
            bests.append(self.objective.line("time", f"best_{key}", source=self.rounds,
                                             line_width=2, color=COLORS[key],
                                             legend_label=f"best {key} so far"))
            self.objective.line("time", key, source=self.rounds, line_width=1, alpha=0.35,
                                color=COLORS[key], legend_label=f"{key} of each round")
        # the axis follows the best values: a round's loose dual far below
        # would squash them into a line (the note says so)
        self.objective.y_range = DataRange1d(renderers=bests, range_padding=0.2)
        self.objective.legend.location = "center_right"
        self.objective.legend.background_fill_alpha = 0.7
        # shown with the gap figure's (so both keep the same height)
        self.objective_note = Title(text="", text_font_style="italic", text_font_size="11px",
                                    text_color="#555555", visible=False)
        self.objective.add_layout(self.objective_note, "above")

        self.workers = figure(title="Workers holding chunks and results used",
                              x_range=self.gap.x_range, x_axis_label="seconds",
                              y_range=DataRange1d(start=0, range_padding=0.25), **common)
        self.workers.step("time", "n_workers", source=self.rounds, mode="after", line_width=5,
                          color=COLORS["n_workers"], legend_label="workers")
        self.workers.step("time", "n_used", source=self.rounds, mode="after", line_width=2,
                          line_dash="dashed", color=COLORS["n_used"], legend_label="results used")
        scale_in = {"size": 14, "marker": "inverted_triangle", "color": COLORS["scale_in"]}
        marks = self.workers.scatter("time", "n_workers", source=self.scale_ins, **scale_in)
        # a legend draws a glyph from its renderer's first row: a fit without a
        # scale-in has none, so the entry also holds a glyph of one row, off
        # the axes (NaN)
        key = self.workers.scatter(x=[math.nan], y=[math.nan], **scale_in)
        self.workers.legend[0].items.append(LegendItem(label="scale-in", renderers=[key, marks]))
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
        # markers only on the rounds that dropped or preempted results (NaN elsewhere)
        self.backups.scatter("round", "dropped_marker", source=self.rounds, size=6,
                             color=COLORS["dropped"], legend_label="dropped")
        self.backups.scatter("round", "preempted_marker", source=self.rounds, size=6,
                             marker="square", color=COLORS["preempted"],
                             legend_label="preempted")
        self.backups.legend.location = "top_left"

        self._kappa = False
        self._placement, self._process_memory = {}, {}
        self.rows = self.memory = None
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
            # the data a worker holds for the fit beside its process's memory:
            # what the fit costs each worker, and what else it carries
            self.memory = figure(title="Memory per worker", y_range=self.rows.y_range,
                                 x_axis_label="bytes", **common)
            for key, offset, label in (("memory", 0.17, "process memory (RSS)"),
                                       ("nbytes", -0.17, "data held for the fit")):
                self.memory.hbar(y=dodge("worker", offset, range=self.memory.y_range),
                                 right=key, source=self.chunks, height=0.32,
                                 color=COLORS[key], legend_label=label)
            self.memory.add_layout(LabelSet(x=0, y="worker", text="memory_label",
                                            source=self.chunks, x_offset=5, y_offset=-6,
                                            text_font_size="11px"))
            self.memory.x_range.start = 0
            self.memory.xaxis.formatter = NumeralTickFormatter(format="0.0 b")
            self.memory.legend.location = "bottom_right"
            self.memory.add_tools(HoverTool(tooltips=[("worker", "@worker"),
                                                      ("data held", "@nbytes{0.0 b}"),
                                                      ("process", "@memory{0.0 b}")]))

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
        self._kappa = any(e.get("kappa") for e in entries)
        self._update_note()

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
        data = self.rounds.data
        last = {k: data[k][-1] for k in ("best_primal", "best_dual", "n_used")} \
            if data["round"] else None
        self.rounds.stream(round_columns(entries, last))
        self._kappa = self._kappa or any(e.get("kappa") for e in entries)
        self._update_note()
        new_workers = worker_columns(entries)
        if new_workers["round"]:
            self.per_worker.stream(new_workers)
        scale_ins = scale_in_columns(([previous] if previous else []) + list(entries))
        if scale_ins["round"]:
            self.scale_ins.stream(scale_ins)

    def _update_note(self):
        """Say on the gap figure why rounds' gaps rose, when they rose above the best."""
        data = self.rounds.data
        rose = any(g > 2 * b for g, b in zip(data["duality_gap"], data["best_gap"]))
        if rose:
            why = ("loose under acceleration until its centres settle" if self._kappa
                   else "which rose as steps overshot (e.g. on unscaled columns)")
            self.note.text = (f"faint: each round's own gap, {why};\n"
                              "bold: (lowest primal − highest dual so far) / |lowest "
                              "primal|, a valid bound that never rises")
            self.objective_note.text = ("faint: each round's own values (off the axis "
                                        "where they are far from the best);\nbold: the "
                                        "best so far, which bound the optimum")
        self.note.visible = self.objective_note.visible = rose

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
        self._placement = placement or {}
        cols = _placement_data(self._placement, self._process_memory)
        self.rows.y_range.factors = cols["worker"]
        self.chunks.data = cols

    def set_process_memory(self, process_memory):
        """Draw each worker's process memory beside the data it holds.

        Parameters
        ----------
        process_memory : dict
            ``{worker: bytes}``, e.g. the scheduler's ``WorkerState.memory.process``.
        """
        if self.rows is None:
            return
        self._process_memory = dict(process_memory)
        cols = _placement_data(self._placement, self._process_memory)
        if cols["memory_label"] != list(self.chunks.data["memory_label"]):
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
        rows = [row(self.gap, self.objective, sizing_mode="stretch_width"),
                row(self.workers, self.stragglers, sizing_mode="stretch_width"),
                row(*last, sizing_mode="stretch_width")]
        if self.memory is not None:
            rows.append(row(self.memory, sizing_mode="stretch_width"))
        return column(*rows, sizing_mode="stretch_width")


def _placement_data(placement, process_memory=None):
    cols = placement_columns(placement, process_memory)
    cols["chunks_label"] = [f"{c} chunks" for c in cols["chunks"]]
    cols["memory_label"] = [f"{format_bytes(b)} data · {format_bytes(m)} process"
                            for b, m in zip(cols["nbytes"], cols["memory"])]
    return cols


def plot_history(estimator: BaseEstimator | Sequence[Mapping[str, Any]], *,
                 height: int = 240, filename: str | os.PathLike[str] | None = None,
                 title: str = "daskelastic fit") -> Column:
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
    filename : str or path-like, optional
        Also save the plots to this HTML file, with BokehJS inline in it, so
        that it opens offline (``bokeh.io.save`` alone links BokehJS from
        its CDN, and such a file shows nothing without the network).
    title : str, default="daskelastic fit"
        The saved page's title (with ``filename``).

    Returns
    -------
    bokeh.models.Column
        The relative duality gap (log scale, with ``tol`` dashed; bold the
        certified best so far, faint each round's own) and the primal and
        dual objectives over time; the workers holding chunks and the
        results used per round, with scale-in marked; each worker's seconds
        per round with dropped and preempted results highlighted; and backup
        workers per round, with the rounds that dropped or preempted
        results.  Show it with ``bokeh.plotting.show``, or save it with
        ``filename`` (or ``bokeh.io.save(layout, path,
        resources=bokeh.resources.INLINE)``).

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

    Saved to a file that opens without the network:

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "fit.html"
    >>> _ = plot_history(clf, filename=path)
    >>> "cdn.bokeh.org" in path.read_text(encoding="utf-8")
    False
    """
    from .records import _entries

    entries = _entries(estimator)
    figures = FitFigures(height=height, placement=False)
    figures.show(entries, tol=getattr(estimator, "tol", None))
    layout = figures.layout()
    if filename is not None:
        from bokeh.io import save
        from bokeh.resources import INLINE

        save(layout, filename=os.fspath(filename), resources=INLINE, title=title)
    return layout
