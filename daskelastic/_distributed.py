"""The places where daskelastic reaches into ``distributed`` beyond its public API.

Each use is here with its reason, and ``tests/test_distributed_edges.py``
(``tests/test_dashboard.py`` for the dashboard page) fails loudly when a
release of distributed changes what it relies on.
"""

from __future__ import annotations

import contextlib

__all__ = ["serve_scaling", "restore_scaling", "current_client_set", "call_actor_directly",
           "actor_holders", "add_handler", "remove_handler", "forget_close_count",
           "add_dashboard_page", "style_dashboard_doc"]

#: The scheduler methods autoscalers call, by their handler names: the HTTP
#: routes of ``distributed.http.scheduler.api`` call the methods, RPC clients
#: (``Adaptive``, the dask-kubernetes operator's fallback) the handlers.
_SCALING = ("adaptive_target", "workers_to_close")


def serve_scaling(scheduler, adaptive_target, workers_to_close):
    """Answer ``scheduler``'s autoscaling questions with these callables.

    distributed has no hook for a plugin to shape ``adaptive_target`` or
    ``workers_to_close`` (``valid_workers_downscaling`` can only veto), and
    autoscalers that poll the scheduler (``/api/v1/adaptive_target``,
    ``/api/v1/retire_workers``) read them directly.  The scheduler's own
    methods are shadowed on the instance and in its RPC handlers, and
    returned so that :func:`restore_scaling` can put them back and the
    replacements can call them.

    Parameters
    ----------
    scheduler : distributed.Scheduler
    adaptive_target, workers_to_close : callable
        With the signatures of the scheduler's methods.

    Returns
    -------
    tuple
        The scheduler's own ``(adaptive_target, workers_to_close)``.
    """
    own = tuple(getattr(type(scheduler), name).__get__(scheduler) for name in _SCALING)
    for name, method in zip(_SCALING, (adaptive_target, workers_to_close)):
        setattr(scheduler, name, method)
        scheduler.handlers[name] = method
    return own


def restore_scaling(scheduler, own):
    """Undo :func:`serve_scaling`: the scheduler answers with ``own`` methods again."""
    for name, method in zip(_SCALING, own):
        scheduler.__dict__.pop(name, None)
        scheduler.handlers[name] = method


@contextlib.contextmanager
def current_client_set(client):
    """Make ``client`` the current client of this thread or asyncio task, and only that.

    ``Client.as_current()`` sets this context variable and, with it,
    ``dask.config``'s process-wide ``"scheduler"``; no public API sets the
    variable alone (``distributed/client.py``, ``_current_client``).
    """
    from distributed.client import _current_client

    token = _current_client.set(client)
    try:
        yield
    finally:
        _current_client.reset(token)


async def call_actor_directly(client, address, key, method, args):
    """Call ``method(*args)`` of the actor ``key`` on the worker at ``address``, directly.

    The worker's ``actor_execute`` handler, which a ``distributed.Actor``
    proxy calls when the whole client is ``direct_to_workers``; here it is
    called over ``client``'s connection pool without the scheduler's detour.

    Returns
    -------
    object
        The method's result.

    Raises
    ------
    Exception
        The method's own exception; ``OSError`` (``CommClosedError``) when
        the worker cannot be reached.
    """
    from distributed.protocol import to_serialize

    result = await client.rpc(address).actor_execute(
        function=method, actor=key, args=[to_serialize(a) for a in args], kwargs={})
    if result["status"] == "OK":
        return result["result"]
    raise result["exception"]


def actor_holders(scheduler, workers, keys):
    """Those of ``workers`` on which ``scheduler`` still places one of the actors ``keys``.

    The scheduler keeps a worker's actors in ``WorkerState.actors`` (task
    states); a retired worker's actor stays there until its task is released.
    """
    keys = set(keys)
    return [a for a in workers if a in scheduler.workers
            and any(ts.key in keys for ts in scheduler.workers[a].actors)]


def add_handler(server, name, handler):
    """Serve ``handler`` under ``name`` in the RPC handlers of ``server`` (a scheduler).

    ``Server.handlers`` is how distributed's own extensions add operations;
    a plugin has no other way to answer a client's ``scheduler.<name>(...)``.
    """
    server.handlers[name] = handler


def remove_handler(server, name):
    """Stop serving ``name`` (a no-op when it is not served)."""
    server.handlers.pop(name, None)


def forget_close_count(adaptive, name):
    """Reset ``distributed.deploy.Adaptive``'s count of the times it chose to close ``name``.

    ``AdaptiveCore.recommendations`` closes a worker only after choosing it
    ``wait_count`` times in a row (``close_counts``); a worker a fit released
    is closed at once, so its count starts again.
    """
    adaptive.close_counts.pop(name, None)


def add_dashboard_page(scheduler, path, make_doc, menu_entry):
    """Serve a Bokeh page at ``path`` of ``scheduler``'s dashboard; return whether it is.

    distributed has no public API for a page of one's own: its dashboard is
    a ``BokehTornado`` application in the scheduler's ``http_application``,
    made by ``distributed.dashboard.core.BokehApplication`` with the
    template variables of ``distributed.dashboard.scheduler`` (whose
    ``plots`` list is the *More* menu).  A second application with the same
    prefix and variables serves ``path`` beside it.  Idempotent.

    Parameters
    ----------
    scheduler : distributed.Scheduler
        The scheduler whose dashboard serves the page.
    path : str
        The page's path, e.g. ``"/daskelastic"``.
    make_doc : callable
        ``make_doc(scheduler, extra, doc)`` fills a Bokeh document.
    menu_entry : dict
        ``{"url": ..., "name": ...}``, the page's entry in the *More* menu.

    Returns
    -------
    bool
        False when the scheduler runs without a dashboard.
    """
    from bokeh.server.server import BokehTornado
    from distributed.dashboard.core import BokehApplication
    from distributed.dashboard.scheduler import template_variables
    from tornado.ioloop import IOLoop

    http = getattr(scheduler, "http_application", None)
    bokeh_apps = [a for a in getattr(http, "applications", []) if isinstance(a, BokehTornado)]
    if not bokeh_apps:  # the scheduler runs without a dashboard
        return False
    if any(path in app.app_paths for app in bokeh_apps):
        return True
    variables = template_variables(scheduler)
    plots = variables.setdefault("plots", [])
    if menu_entry not in plots:
        plots.append(dict(menu_entry))
        plots.sort(key=lambda d: d["name"])
    app = BokehApplication({path: make_doc}, scheduler, prefix=bokeh_apps[0].prefix,
                           template_variables=variables)
    http.add_application(app)
    app.initialize(IOLoop.current())
    app.start()
    return True


def style_dashboard_doc(doc, extra):
    """Give ``doc`` the dashboard's page template and theme, as distributed's own pages."""
    from distributed.dashboard.components.scheduler import BOKEH_THEME, env

    doc.template = env.get_template("simple.html")
    doc.template_variables.update(extra)
    doc.theme = BOKEH_THEME
