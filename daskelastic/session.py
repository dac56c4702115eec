"""Where a fit runs: the given client, the current one, an embedded cluster, or here.

With ``backend="auto"`` (the default) a fit uses the client passed in, else
the current Dask client; with neither, a small input (fewer stored values than
``daskelastic.embedded-threshold``) is fitted in this process and a larger one
on a :class:`~distributed.LocalCluster` started for the fit and closed after.
"""

import contextlib
import logging
import os

from . import config

__all__ = ["fit_session", "current_client"]


def current_client():
    """The current Dask client, or None."""
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    try:
        return Client.current(allow_global=True)
    except ValueError:
        return None


def _machine_workers():
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def fit_session(*, client=None, backend="auto", n_values=0, n_workers=None,
                dask_input=False):
    """Yield ``(kind, client)``: ``("inprocess", None)``, ``("simulated", None)``
    or ``("dask", client)``.

    An embedded cluster started here is closed when the block exits, whether
    the fit succeeded or not.
    """
    if backend == "simulated":
        yield "simulated", None
        return
    if backend == "inprocess":
        if dask_input:
            raise ValueError("dask collections need a Dask backend, not 'inprocess'")
        yield "inprocess", None
        return
    client = client if client is not None else current_client()
    if client is not None:
        yield "dask", client
        return
    small = n_values < config.get("embedded-threshold")
    if backend == "auto" and small and not dask_input:
        yield "inprocess", None
        return
    from distributed import Client, LocalCluster

    n = n_workers or _machine_workers()
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                      dashboard_address=config.get("dashboard-address"),
                      silence_logs=logging.ERROR) as cluster, \
            Client(cluster, set_as_default=False) as embedded:
        yield "dask", embedded
