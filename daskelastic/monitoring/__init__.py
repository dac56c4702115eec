"""Watching a fit: progress bar, per-round events, the dashboard page, plots and tables.

- :class:`FitMonitor` runs with every fit: it draws the ``verbose=1``
  :class:`ProgressBar` and, for Dask fits, publishes each round as a scheduler
  event (topic ``"daskelastic"``; ``daskelastic.telemetry`` turns it off).
- :class:`DashboardPlugin` (registered by the first Dask fit, or preloaded
  with ``dask scheduler --preload daskelastic.monitoring``) serves the live
  ``/daskelastic`` page of the Dask dashboard.
- :func:`plot_history` and :func:`history_frame` draw or tabulate a fitted
  estimator's ``history_``.

Bokeh and distributed are imported on first use, so importing daskelastic
stays light.
"""

from .figures import FitFigures, plot_history
from .progress import ProgressBar
from .records import TOPIC, FitLog, FitRecord, estimate_eta, history_frame
from .telemetry import EventSender, FitMonitor

__all__ = ["FitMonitor", "EventSender", "ProgressBar", "FitLog", "FitRecord", "TOPIC",
           "estimate_eta", "history_frame", "plot_history", "FitFigures", "DashboardPlugin",
           "register_dashboard", "dashboard_link", "dask_setup"]

# these import distributed
_LAZY = {"DashboardPlugin": "dashboard", "register_dashboard": "dashboard",
         "dashboard_link": "dashboard"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module = importlib.import_module(f"{__name__}.{_LAZY[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def dask_setup(dask_server):
    """Preload entry point: ``dask scheduler --preload daskelastic.monitoring``.

    Adds :class:`DashboardPlugin` to a scheduler as it starts, so that the
    ``/daskelastic`` page is there before the first fit; does nothing on a
    worker.

    Parameters
    ----------
    dask_server : distributed.Scheduler or distributed.Worker
        The server being started.

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> with LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0",
    ...                   scheduler_kwargs={"preload": ["daskelastic.monitoring"]}
    ...                   ) as cluster:
    ...     "daskelastic-dashboard" in cluster.scheduler.plugins
    True
    """
    from .dashboard import dask_setup as setup

    setup(dask_server)
