"""Round records as tables and events, and the state of the fits being watched.

A fit's ``history_`` is a list of dicts, one per round (see
:func:`daskelastic.driver.run_cocoa`).  This module turns it into the columns
that the plots and the dashboard draw, into a pandas DataFrame, and into the
messages that a fit publishes on the scheduler (topic ``"daskelastic"``).  On
the scheduler, a :class:`FitLog` folds those messages back into one
:class:`FitRecord` per fit.  Nothing here talks to Dask or draws anything.

The events, all dicts with an ``"event"`` and a ``"fit"`` key:

``start``
    ``estimator``, ``client`` (the Dask client's id), ``wall_time`` (epoch
    seconds), ``params`` (``tol``, ``max_iter``, ...), ``n_samples``,
    ``n_features`` and ``n_targets``.
``round``
    ``estimator`` and ``entry``: the history entry (``round``, ``time``,
    ``duality_gap``, ``primal``, ``dual``, ``n_workers``, ``n_used``,
    ``n_dropped``, ``n_preempted``, ``n_backup`` when the driver records it,
    ``worker_seconds`` ``{worker: seconds}``, ...).
``placement``
    ``placement``: ``{worker: {"chunks": [...], "rows": n}}`` (the backend's
    ``describe(ask_workers=False)``), at the start and whenever chunks moved;
    on Dask, sent again once the workers said how many bytes they hold for
    the fit (``"nbytes"``: the packed rows and their dual state).
``end``
    ``estimator``, ``status`` (one of :data:`END_STATUSES`), ``n_iter``,
    ``duality_gap``, ``time`` (seconds since the fit began) and ``error``
    (the exception, for a failed fit).
"""

from __future__ import annotations

import math
import numbers
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd
    from sklearn.base import BaseEstimator

__all__ = ["TOPIC", "END_STATUSES", "FitRecord", "FitLog", "history_frame", "to_message",
           "round_columns", "worker_columns", "scale_in_columns", "placement_columns",
           "format_bytes", "estimate_eta"]

#: Topic of the scheduler events a fit publishes.
TOPIC = "daskelastic"

#: How a fit can end: ``converged`` (gap ≤ ``tol``), ``max_iter`` (rounds
#: exhausted), ``stopped`` (a callback asked to stop), ``failed`` (an
#: exception), ``interrupted`` (``KeyboardInterrupt``).  The dashboard shows
#: ``disconnected`` for a fit whose client left the scheduler before its end.
END_STATUSES = ("converged", "max_iter", "stopped", "failed", "interrupted")

#: Per-round numbers drawn by the plots (``n_backup`` is 0 when not recorded;
#: ``cut``, the seconds into the round when stragglers were stopped, NaN).
ROUND_FIELDS = ("round", "time", "duality_gap", "primal", "dual", "n_workers", "n_used",
                "n_dropped", "n_preempted", "n_backup", "cut")

#: Columns :func:`round_columns` derives from those: the certified best so
#: far (``best_primal``, ``best_dual``, ``best_gap``), and the dropped and
#: preempted counts as markers (NaN, so not drawn, on rounds without any).
DERIVED_FIELDS = ("best_primal", "best_dual", "best_gap", "dropped_marker",
                  "preempted_marker")

#: Smallest duality gap drawn on a log axis (a gap can be exactly 0).
GAP_FLOOR = 1e-16


def to_message(value):
    """``value`` with NumPy scalars made plain, so that msgpack can send it.

    Dicts (with their keys made strings), lists and tuples are converted
    recursively; values of other types are dropped from dicts and lists.

    Parameters
    ----------
    value : object
        A history entry or any nesting of dicts, lists and numbers.

    Returns
    -------
    object
        The same structure of ``dict``, ``list``, ``str``, ``bool``, ``int``,
        ``float`` and ``None``.

    Examples
    --------
    >>> import numpy as np
    >>> to_message({"gap": np.float64(0.5), "ws": {1: np.int64(2)}, "f": print})
    {'gap': 0.5, 'ws': {'1': 2}}
    """
    kind = type(value)
    if kind in _PLAIN:  # the common case, first: plain numbers and strings
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            v = to_message(v)
            if v is not _DROP:
                out[str(k)] = v
        return out
    if isinstance(value, (list, tuple)):
        return [v for v in map(to_message, value) if v is not _DROP]
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return _DROP


_PLAIN = frozenset({str, int, float, bool, type(None)})
_DROP = object()


# -- columns for plots -----------------------------------------------------------
def round_columns(entries, previous=None):
    """One column per number in :data:`ROUND_FIELDS` and :data:`DERIVED_FIELDS`, a row a round.

    ``duality_gap`` is floored at :data:`GAP_FLOOR` for log axes; a number
    the driver did not record is 0 (``cut``: NaN).

    ``best_primal`` and ``best_dual`` are the lowest primal and the highest
    dual of the rounds so far, and ``best_gap`` is
    ``(best_primal − best_dual) / |best_primal|``.  Every round's primal is
    at least the optimum and every round's dual (``primal − gap``, the
    certified lower bound) at most it, so ``best_gap`` bounds the relative
    suboptimality of the best iterate seen, and never rises: a round's own
    gap can (an accelerated fit's dual is loose until its centres settle, and
    steps on unscaled columns overshoot), which reads as a fit going wrong
    when it is only that round's certificate that is loose.

    The last round of a fit that ran out of rounds only certifies the
    iterate (its workers take no steps), so it uses no results: its
    ``n_used`` is the round before's, not a drop to 0.

    Parameters
    ----------
    entries : list of dict
        History entries.
    previous : dict, optional
        The last row already drawn (a dict of these columns' values), that
        ``entries`` continue: the best so far carries on from it.

    Returns
    -------
    dict of str to list

    Examples
    --------
    >>> cols = round_columns([{"round": 0, "primal": 1.0, "dual": 0.0, "n_used": 2},
    ...                       {"round": 1, "primal": 2.0, "dual": 0.5, "n_used": 2},
    ...                       {"round": 2, "primal": 0.625, "dual": -3.0, "n_used": 0}])
    >>> cols["best_gap"], cols["n_used"]
    ([1.0, 0.5, 0.2], [2, 2, 2])
    """
    cols = {k: [] for k in ROUND_FIELDS}
    for e in entries:
        for k in ROUND_FIELDS:
            v = e.get(k)
            cols[k].append(v if v is not None else math.nan if k == "cut" else 0)
    cols["duality_gap"] = [max(float(g), GAP_FLOOR) for g in cols["duality_gap"]]
    best_p = float(previous["best_primal"]) if previous else math.inf
    best_d = float(previous["best_dual"]) if previous else -math.inf
    used_before = previous["n_used"] if previous else None
    for k in DERIVED_FIELDS:
        cols[k] = []
    for i, (p, d) in enumerate(zip(cols["primal"], cols["dual"])):
        if math.isfinite(p) and math.isfinite(d):
            best_p, best_d = min(best_p, float(p)), max(best_d, float(d))
        cols["best_primal"].append(best_p)
        cols["best_dual"].append(best_d)
        gap = (best_p - best_d) / max(abs(best_p), np.finfo(float).tiny) \
            if math.isfinite(best_p) and math.isfinite(best_d) else math.nan
        cols["best_gap"].append(max(gap, GAP_FLOOR))
        if cols["n_used"][i] == 0 and used_before is not None:
            cols["n_used"][i] = used_before   # a certificate-only last round
        used_before = cols["n_used"][i]
        for k, marker in (("n_dropped", "dropped_marker"), ("n_preempted", "preempted_marker")):
            cols[marker].append(cols[k][i] if cols[k][i] else math.nan)
    return cols


def worker_status(entry):
    """``{worker: "used" | "dropped" | "preempted"}`` of one round.

    A driver that records ``worker_status`` in its entries is read as is.
    Otherwise the status is inferred from the counts: dropped and preempted
    results are the slowest of their round (backup workers drop the slowest
    results; preemption stops the workers still running), so the
    ``n_dropped`` slowest workers are ``dropped`` and the next
    ``n_preempted`` slowest ``preempted``.

    Parameters
    ----------
    entry : dict
        A history entry.

    Returns
    -------
    dict of str to str
    """
    seconds = entry.get("worker_seconds") or {}
    given = entry.get("worker_status")
    status = {str(w): "used" for w in seconds}
    if given:
        status.update({str(w): str(s) for w, s in given.items()})
        return status
    slowest = sorted(seconds, key=lambda w: seconds[w], reverse=True)
    n_dropped = int(entry.get("n_dropped") or 0)
    n_preempted = int(entry.get("n_preempted") or 0)
    for i, w in enumerate(slowest[: n_dropped + n_preempted]):
        status[str(w)] = "dropped" if i < n_dropped else "preempted"
    return status


def worker_columns(entries):
    """One row per worker per round.

    Columns ``round``, ``time``, ``worker``, ``seconds`` (the local solver's
    time), ``arrival`` (seconds from the round's start to the worker's result,
    from ``worker_arrival``; the solver's time where the driver did not
    record it) and ``status`` (:func:`worker_status`).

    Parameters
    ----------
    entries : list of dict
        History entries.

    Returns
    -------
    dict of str to list
    """
    cols = {"round": [], "time": [], "worker": [], "seconds": [], "arrival": [], "status": []}
    for e in entries:
        seconds = e.get("worker_seconds") or {}
        arrival = e.get("worker_arrival") or {}
        status = worker_status(e)
        for w, s in seconds.items():
            cols["round"].append(e["round"])
            cols["time"].append(e["time"])
            cols["worker"].append(str(w))
            cols["seconds"].append(float(s))
            cols["arrival"].append(float(arrival.get(w, s)))
            cols["status"].append(status.get(str(w), "used"))
    return cols


def scale_in_columns(entries):
    """The rounds at which fewer workers held chunks than the round before.

    Parameters
    ----------
    entries : list of dict
        History entries.

    Returns
    -------
    dict of str to list
        ``round``, ``time``, ``n_workers`` (after) and ``n_before``.
    """
    cols = {"round": [], "time": [], "n_workers": [], "n_before": []}
    for prev, e in zip(entries, entries[1:]):
        if e.get("n_workers", 0) < prev.get("n_workers", 0):
            cols["round"].append(e["round"])
            cols["time"].append(e["time"])
            cols["n_workers"].append(e["n_workers"])
            cols["n_before"].append(prev["n_workers"])
    return cols


def placement_columns(placement, process_memory=None):
    """Rows, chunks and memory per worker, from a backend's ``describe()``.

    Parameters
    ----------
    placement : dict
        ``{worker: {"chunks": [chunk ids], "rows": n, "nbytes": bytes}}``
        (``nbytes`` where known).
    process_memory : dict, optional
        ``{worker: bytes}``: each worker process's memory (RSS), as the
        scheduler knows it.

    Returns
    -------
    dict of str to list
        ``worker``, ``rows``, ``chunks`` (how many), ``chunk_ids`` (text),
        ``nbytes`` (the bytes of data held for the fit) and ``memory`` (the
        process's), NaN where unknown.
    """
    cols = {"worker": [], "rows": [], "chunks": [], "chunk_ids": [], "nbytes": [],
            "memory": []}
    for w in sorted(placement or {}):
        info = placement[w] or {}
        chunks = list(info.get("chunks", []))
        cols["worker"].append(str(w))
        cols["rows"].append(int(info.get("rows", 0)))
        cols["chunks"].append(len(chunks))
        cols["chunk_ids"].append(", ".join(map(str, chunks)))
        cols["nbytes"].append(float(info.get("nbytes", math.nan)))
        cols["memory"].append(float((process_memory or {}).get(w, math.nan)))
    return cols


def format_bytes(n):
    """``n`` bytes as text with a binary unit (``"1.5 MiB"``); ``"?"`` for NaN or None.

    Parameters
    ----------
    n : float or None
        A number of bytes.

    Returns
    -------
    str

    Examples
    --------
    >>> format_bytes(1536), format_bytes(3 * 2**30), format_bytes(float("nan"))
    ('1.5 KiB', '3.0 GiB', '?')
    """
    if n is None or not math.isfinite(n):
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def estimate_eta(entries, *, tol, max_iter, window=5):
    """Seconds left until the gap reaches ``tol`` or the rounds run out.

    The gap's rate is the fall of ``log(gap)`` per second over the last
    ``window`` rounds (CoCoA+ converges linearly, so the rate is steady over
    a few rounds); the rounds' rate is their mean time.  The estimate is the
    sooner of the two ends.

    Parameters
    ----------
    entries : list of dict
        History entries so far.
    tol : float
        Target relative duality gap.
    max_iter : int
        Maximum rounds.
    window : int, default=5
        Rounds the rates are measured over.

    Returns
    -------
    float or None
        None before two rounds.

    Examples
    --------
    >>> entries = [{"round": r, "time": r * 1.0, "duality_gap": 10.0 ** -r}
    ...            for r in range(3)]
    >>> round(estimate_eta(entries, tol=1e-5, max_iter=100), 6)
    3.0
    """
    if len(entries) < 2:
        return None
    last = entries[-1]
    first = entries[max(0, len(entries) - 1 - window)]
    dt = last["time"] - first["time"]
    rounds = last["round"] - first["round"]
    if dt <= 0 or rounds <= 0:
        return None
    eta = max(0, max_iter - last["round"]) * dt / rounds
    g0, g1 = first["duality_gap"], last["duality_gap"]
    if tol > 0 and g0 > 0 and g1 > 0:
        rate = (math.log(g0) - math.log(g1)) / dt
        if g1 <= tol:
            return 0.0
        if rate > 0:
            eta = min(eta, (math.log(g1) - math.log(tol)) / rate)
    return eta


def history_frame(estimator: BaseEstimator | Sequence[Mapping[str, Any]], *,
                  per_worker: bool = False) -> pd.DataFrame:
    """A fitted estimator's ``history_`` as a pandas DataFrame.

    Parameters
    ----------
    estimator : estimator or list of dict
        A fitted daskelastic estimator, or a ``history_`` list.
    per_worker : bool, default=False
        One row per round (False: the round's numbers as columns, without
        ``worker_seconds``), or one row per worker per round (True:
        ``round``, ``time``, ``worker``, ``seconds`` and ``status`` — used,
        dropped or preempted).

    Returns
    -------
    pandas.DataFrame
        Indexed by ``round`` (per round) or by position (per worker).

    See Also
    --------
    plot_history : The same history as Bokeh plots.

    Examples
    --------
    >>> import numpy as np
    >>> from daskelastic import LogisticRegression, history_frame
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> clf = LogisticRegression(solver="cocoa", n_workers=2, backend="inprocess").fit(X, y)
    >>> frame = history_frame(clf)
    >>> len(frame) == len(clf.history_), bool(frame["duality_gap"].iloc[-1] <= 1e-4)
    (True, True)
    >>> sorted(history_frame(clf, per_worker=True)["worker"].unique())
    ['local-0', 'local-1']
    """
    import pandas as pd

    entries = _entries(estimator)
    if per_worker:
        return pd.DataFrame(worker_columns(entries))
    rows = [{k: v for k, v in e.items() if not isinstance(v, (dict, list))} for e in entries]
    frame = pd.DataFrame(rows)
    if "round" in frame:
        frame = frame.set_index("round")
    return frame


def _entries(estimator):
    if isinstance(estimator, (list, tuple)):
        return list(estimator)
    history = getattr(estimator, "history_", None)
    if history is None:
        raise ValueError(f"{type(estimator).__name__} is not fitted: it has no history_")
    return history


# -- the state of watched fits (on the scheduler) -----------------------------------
class FitRecord:
    """What is known about one fit from its events.

    Parameters
    ----------
    fit : str
        The fit id.

    Attributes
    ----------
    fit : str
    estimator : str
    status : str
        ``"running"`` until the end event, then one of ``END_STATUSES``
        (or ``"disconnected"``).
    client : str or None
        Id of the Dask client running the fit.
    params : dict
    entries : list of dict
        The round entries, in round order.
    placement : dict
        ``{worker: {"chunks": [...], "rows": n}}``.
    started, updated : float
        Wall-clock times (epoch seconds) of the first and the latest event.
    end : dict or None
        The end event.
    version : int
        Incremented by every change, so viewers can tell what is new.

    Examples
    --------
    >>> record = FitRecord("f1")
    >>> record.apply({"event": "start", "fit": "f1", "estimator": "LinearSVC",
    ...               "params": {"tol": 1e-3, "max_iter": 50}})
    >>> record.apply({"event": "end", "fit": "f1", "status": "failed",
    ...               "error": "KeyError: 'fit-1'"})
    >>> record.estimator, record.status, record.running
    ('LinearSVC', 'failed', False)
    """

    def __init__(self, fit):
        self.fit = fit
        self.estimator = "?"
        self.status = "running"
        self.client = None
        self.params = {}
        self.sizes = {}
        self.entries = []
        self.placement = {}
        self.started = self.updated = time.time()
        self.end = None
        self.version = 0

    def apply(self, msg):
        """Fold one event into the record.

        Parameters
        ----------
        msg : dict
            A ``start``, ``round``, ``placement`` or ``end`` event of this fit.
        """
        kind = msg.get("event")
        self.estimator = msg.get("estimator", self.estimator)
        self.updated = time.time()
        if kind == "start":
            self.client = msg.get("client")
            self.params = dict(msg.get("params") or {})
            self.sizes = {k: msg[k] for k in ("n_samples", "n_features", "n_targets")
                          if k in msg}
            self.started = msg.get("wall_time", self.started)
            self.placement = dict(msg.get("placement") or {})
        elif kind == "round":
            entry = msg.get("entry") or {}
            if not self.entries or entry.get("round", -1) > self.entries[-1]["round"]:
                self.entries.append(entry)
            else:  # late or repeated: keep round order, one entry per round
                kept = [e for e in self.entries if e["round"] != entry.get("round")]
                self.entries = sorted(kept + [entry], key=lambda e: e["round"])
        elif kind == "placement":
            self.placement = dict(msg.get("placement") or {})
        elif kind == "end":
            self.end = dict(msg)
            self.status = msg.get("status", "failed")
        self.version += 1

    @property
    def running(self):
        """Whether the fit has not ended (as far as its events tell)."""
        return self.status == "running"

    def summary(self):
        """One row of the dashboard's table of fits.

        Returns
        -------
        dict
            ``fit``, ``estimator``, ``status``, ``rounds`` (rounds done, the
            last entry's ``round``: ``n_iter_``), ``duality_gap``,
            ``n_workers``, ``seconds`` and ``eta`` (seconds, NaN when unknown).
        """
        last = self.entries[-1] if self.entries else {}
        eta = None
        if self.running and self.entries:
            eta = estimate_eta(self.entries, tol=float(self.params.get("tol", 0.0)),
                               max_iter=int(self.params.get("max_iter", 0)))
        seconds = (self.end or {}).get("time", last.get("time", float("nan")))
        # rounds done: the entries also hold round 0, the start, so the last
        # entry's round is the count (``n_iter_``), as the status line says
        return {"fit": self.fit, "estimator": self.estimator, "status": self.status,
                "rounds": int(last.get("round", 0)),
                "duality_gap": float(last.get("duality_gap", float("nan"))),
                "n_workers": int(last.get("n_workers", len(self.placement))),
                "seconds": float(seconds),
                "eta": float("nan") if eta is None else float(eta)}


class FitLog:
    """The fits seen on a scheduler, built from their events.

    Parameters
    ----------
    max_fits : int, default=50
        Fits kept; the oldest ended fits are forgotten first.

    Examples
    --------
    >>> log = FitLog()
    >>> log.add({"event": "start", "fit": "f1", "estimator": "Ridge",
    ...          "params": {"tol": 1e-4, "max_iter": 10}})
    >>> log.add({"event": "round", "fit": "f1", "entry": {"round": 0, "time": 0.1,
    ...          "duality_gap": 0.5, "n_workers": 2}})
    >>> log.add({"event": "end", "fit": "f1", "status": "converged"})
    >>> [(r.fit, r.status, len(r.entries)) for r in log.records()]
    [('f1', 'converged', 1)]
    """

    def __init__(self, max_fits=50):
        self.max_fits = max_fits
        self._fits = OrderedDict()
        self.version = 0

    def add(self, msg):
        """Fold one event into its fit's record (anything else is ignored).

        Parameters
        ----------
        msg : dict
            An event, with ``"event"`` and ``"fit"`` keys.
        """
        if not isinstance(msg, dict) or "fit" not in msg:
            return
        fit = str(msg["fit"])
        record = self._fits.get(fit)
        if record is None:
            record = self._fits[fit] = FitRecord(fit)
            self._forget_old()
        record.apply(msg)
        self.version += 1

    def client_gone(self, client):
        """Mark the running fits of a client that left as ``disconnected``.

        Parameters
        ----------
        client : str
            The client's id.
        """
        for record in self._fits.values():
            if record.running and record.client == client:
                record.status = "disconnected"
                record.version += 1
                self.version += 1

    def records(self):
        """The records, oldest fit first.

        Returns
        -------
        list of FitRecord
            One per fit remembered.
        """
        return list(self._fits.values())

    def get(self, fit):
        """The record of a fit.

        Parameters
        ----------
        fit : str
            The fit id.

        Returns
        -------
        FitRecord or None
            None for a fit never seen (or forgotten).
        """
        return self._fits.get(fit)

    def _forget_old(self):
        while len(self._fits) > self.max_fits:
            ended = [f for f, r in self._fits.items() if not r.running]
            self._fits.pop(ended[0] if ended else next(iter(self._fits)))
