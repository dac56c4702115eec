"""Where a fit runs: the given client, the current one, an embedded cluster, or here.

With ``backend="auto"`` (the default) a fit uses the client passed in, else
the current Dask client; with neither, a small input (fewer stored values than
``daskelastic.embedded-threshold``) is fitted in this process and a larger one
on a :class:`~distributed.LocalCluster` started for the fit and closed after.
Such a cluster's worker processes run the main script again, so it is not
started from a script's top-level code outside ``if __name__ == "__main__":``
(a ``RuntimeError`` says so, instead of multiprocessing's errors from each
worker).
"""

import ast
import contextlib
import logging
import multiprocessing
import os
import sys

from . import config
from ._distributed import current_client_set

__all__ = ["fit_session", "current_client", "client_context"]


def current_client():
    """Return the current Dask client, or None when there is none.

    This is ``distributed.Client.current(allow_global=True)``: the client made
    current in this context with ``Client.as_current()``, else the most
    recently started client that was set as the default (a
    ``distributed.Client`` is, unless started with ``set_as_default=False``)
    and is not closed.  Fits with ``backend="auto"`` or ``"dask"`` and no
    ``client`` of their own run on it.

    Returns
    -------
    distributed.Client or None
        The client; None when no client is running, or when ``distributed``
        cannot be imported.
    """
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    try:
        return Client.current(allow_global=True)
    except ValueError:
        return None


@contextlib.contextmanager
def client_context(client):
    """Make ``client`` the current Dask client in this thread (or asyncio task) only.

    What ``Client.as_current()`` does, without its other half: that also sets
    ``dask.config``'s ``"scheduler"`` for the whole process, and fits running
    in several threads at once then leave it set (or unset) at random — the
    config is global, not per thread (dask/dask#9807).  Inside, dask
    collections computed without a scheduler, actor proxies unpickled and
    futures deserialized use ``client``; the process's configuration is
    untouched.

    Parameters
    ----------
    client : distributed.Client or None
        The client; None changes nothing.

    Examples
    --------
    >>> import dask
    >>> from distributed import Client, LocalCluster
    >>> from daskelastic.session import client_context, current_client
    >>> with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster, \\
    ...         Client(cluster, set_as_default=False) as client:
    ...     with client_context(client):
    ...         assert current_client() is client
    ...     current_client() is None, dask.config.get("scheduler", None)
    (True, None)
    """
    if client is None:
        yield
        return
    with current_client_set(client):
        yield


def _in_dask_task():
    """Whether this code runs in a task on a Dask worker."""
    try:
        from distributed import get_worker

        get_worker()
    except (ImportError, ValueError):
        return False
    return True


def _machine_workers():
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


_MAIN_GUARD_MESSAGE = (
    "this fit starts a LocalCluster, and its worker processes (multiprocessing's "
    "{method!r} start method) run the main script {script} again before they start, "
    "which would fit again: put the script's top-level code under "
    "'if __name__ == \"__main__\":' (Python's docs: multiprocessing, \"Safe importing "
    "of the main module\"), or pass client= a Client of a cluster you start there")


def _guards_main(test):
    """Whether an ``if`` test reads ``__name__ == "__main__"``."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and len(node.comparators) == 1 \
                and isinstance(node.ops[0], ast.Eq):
            sides = [node.left, node.comparators[0]]
            if any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and \
                    any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides):
                return True
    return False


def _unguarded_main_line():
    """The line of the main script's top-level code running now outside a main guard, or None.

    Worker processes started with the ``spawn`` or ``forkserver`` method run
    the main script again before they start (Python's docs, multiprocessing,
    *Safe importing of the main module*): top-level code that starts a
    cluster outside ``if __name__ == "__main__":`` would start one in each of
    them, which multiprocessing refuses in ~30 lines per worker.  None when
    the main module has no source file (an interactive session, ``python -c``,
    a notebook), is not running its top-level code now, or runs it inside a
    guard.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path:
        return None
    frame = sys._getframe(1)
    line = None
    while frame is not None:
        if frame.f_globals is main.__dict__ and frame.f_code.co_name == "<module>":
            line = frame.f_lineno
        frame = frame.f_back
    if line is None:
        return None
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _guards_main(node.test) \
                and node.lineno <= line <= (node.end_lineno or node.lineno):
            return None
    return line


def _check_main_guard():
    """Raise the error that names the fix when starting worker processes here cannot work.

    Two cases: this is a worker process running the main script again
    (multiprocessing's bootstrapping, which an unguarded script reaches
    before the check below can see it), or the main script's top-level code
    outside a main guard is about to start worker processes that would.

    Raises
    ------
    RuntimeError
        Naming ``if __name__ == "__main__":``.
    """
    import dask

    method = dask.config.get("distributed.worker.multiprocessing-method", "spawn")
    script = getattr(sys.modules.get("__main__"), "__file__", None) or "(__main__)"
    # multiprocessing sets _inheriting while a child runs the parent's main
    # module (multiprocessing/spawn.py; its own check reads the same flag)
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError(_MAIN_GUARD_MESSAGE.format(method=method, script=script))
    if method in ("spawn", "forkserver") and _unguarded_main_line() is not None:
        raise RuntimeError(_MAIN_GUARD_MESSAGE.format(method=method, script=script))


#: The values of ``backend`` (the estimators' parameter of that name).
BACKENDS = ("auto", "dask", "inprocess", "simulated")


@contextlib.contextmanager
def fit_session(*, client=None, backend="auto", n_values=0, n_workers=None,
                dask_input=False, elastic=False):
    """Decide where a fit runs, and provide it for the length of a ``with`` block.

    The decision, in this order:

    - ``backend="simulated"``: ``("simulated", None)``; ``client`` is ignored
      (the caller builds a simulated cluster).
    - ``backend="inprocess"``: ``("inprocess", None)``; ``client`` is ignored.
    - In a task on a Dask worker (a search under joblib's Dask backend) and
      no ``client``: ``("inprocess", None)``; a ``ValueError`` for dask input
      or ``backend="dask"``.
    - Otherwise (``"auto"`` or ``"dask"``), with ``client`` given or a
      current client (:func:`current_client`): ``("dask", client)``.  The
      client is used as it is and left open.
    - With no client, ``backend="auto"``, fewer than
      ``daskelastic.embedded-threshold`` stored values, in-memory input and
      no ``elastic`` fit (a ``scaling_policy``, which needs workers to
      release): ``("inprocess", None)``.
    - Else a :class:`~distributed.LocalCluster` is started for the fit:
      ``n_workers`` single-threaded worker processes, the dashboard at
      ``daskelastic.dashboard-address``, logs below ``ERROR`` silenced; and
      ``("dask", client)`` with a client of that cluster that is not set as
      the default.  Cluster and client are closed when the block exits,
      whether the fit succeeded or not.

    Parameters
    ----------
    client : distributed.Client, optional
        The client to fit on (``"auto"`` and ``"dask"`` only); by default the
        current client, if any.
    backend : {"auto", "dask", "inprocess", "simulated"}
        Where the fit should run, as the estimators' ``backend`` parameter.
    n_values : int
        Stored values of the input (non-zeros of a sparse matrix, the size
        of a dense one): with ``"auto"`` and no client, input below
        ``daskelastic.embedded-threshold`` is fitted in this process.
    n_workers : int, optional
        Workers of an embedded cluster; by default as many as the CPUs this
        process may run on.  Unused unless a cluster is started here.
    dask_input : bool
        Whether the input is a dask collection: it is never fitted in this
        process (``"auto"`` starts a cluster when there is no client).
    elastic : bool
        Whether the fit scales in (a ``scaling_policy``): like dask input, it
        is never fitted in this process by ``"auto"``.

    Yields
    ------
    kind : {"inprocess", "simulated", "dask"}
        Which backend the fit should build.
    client : distributed.Client or None
        The client to fit on for ``"dask"``; None otherwise.

    Raises
    ------
    ValueError
        On an unknown ``backend``; with ``backend="inprocess"`` and
        ``dask_input``: dask collections need a Dask backend.
    RuntimeError
        When a cluster would be started from a main script's top-level code
        outside ``if __name__ == "__main__":`` (its worker processes would run
        the script again; the message says so), with dask's default
        ``distributed.worker.multiprocessing-method``, ``spawn``.

    Examples
    --------
    >>> from daskelastic.session import fit_session
    >>> with fit_session(backend="inprocess") as (kind, client):
    ...     print(kind, client)
    inprocess None
    >>> with fit_session(backend="inprocess", dask_input=True) as (kind, client):
    ...     pass
    Traceback (most recent call last):
    ...
    ValueError: dask collections need a Dask backend, not 'inprocess'
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, "
                         f"got {backend!r}")
    if backend == "simulated":
        yield "simulated", None
        return
    if backend == "inprocess":
        if dask_input:
            raise ValueError("dask collections need a Dask backend, not 'inprocess'")
        yield "inprocess", None
        return
    if client is None and _in_dask_task():
        # a fit in a task on a Dask worker (joblib's Dask backend runs a
        # search's fits so) fits in the worker's process: on the cluster, it
        # would wait for tasks on the worker whose thread it occupies, and a
        # worker process cannot start a LocalCluster of its own
        if dask_input or backend == "dask":
            raise ValueError("a fit in a task on a Dask worker fits in the worker's "
                             "process, and dask input and backend='dask' need the "
                             "cluster: run such fits from the client's process (for a "
                             "search, with joblib's threading backend and client=...)")
        yield "inprocess", None
        return
    client = client if client is not None else current_client()
    if client is not None:
        yield "dask", client
        return
    small = n_values < config.get("embedded-threshold")
    if backend == "auto" and small and not dask_input and not elastic:
        yield "inprocess", None
        return
    _check_main_guard()
    from distributed import Client, LocalCluster

    n = n_workers or _machine_workers()
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                      dashboard_address=config.get("dashboard-address"),
                      silence_logs=logging.ERROR) as cluster, \
            Client(cluster, set_as_default=False) as embedded:
        yield "dask", embedded
