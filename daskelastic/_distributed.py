"""The places where daskelastic reaches into ``distributed`` beyond its public API.

Each use is here with its reason, and ``tests/test_distributed_edges.py``
fails loudly when a release of distributed changes what it relies on.
"""

from __future__ import annotations

__all__ = ["serve_scaling", "restore_scaling"]

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
