"""Applying a fit's scaling decision to a Dask cluster.

Three pieces, all talking to the scheduler only:

- :class:`ElasticSchedulerPlugin`, installed on the scheduler while fits
  on Dask run (and while an :class:`ElasticAdaptive` is attached): it
  holds, per running fit, which worker holds which chunks, the number of
  workers the fit wants and the workers it has let go; it answers the
  scheduler handler ``daskelastic_state``; and its
  ``valid_workers_downscaling`` hook vetoes retiring a worker that still
  holds chunks of a running fit (a fit first evacuates a worker's chunks,
  with their dual state, then lets it go).  The fits publish to it with
  ``Client.run_on_scheduler`` (:func:`publish_fit`, :func:`end_fit`),
  which installs it when missing and removes it after the last fit when no
  Adaptive is attached, in one step on the scheduler's event loop (so fits
  running at once never find it half there): a fit leaves no plugin behind.
- :class:`ElasticAdaptive`, a ``distributed.deploy.Adaptive`` for
  ``cluster.adapt(Adaptive=ElasticAdaptive, ...)``: while fits run, its
  :meth:`~ElasticAdaptive.target` is the number of workers they want and its
  :meth:`~ElasticAdaptive.workers_to_close` the workers they let go; with no
  fit running it is Dask's own adaptive scaling.
- :func:`retire_released`, which a fit on a bare scheduler (a client and no
  ``Cluster`` object) uses to retire the workers it let go.
"""

import time

from distributed.deploy.adaptive import Adaptive
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.protocol.pickle import dumps

from . import _distributed, config

__all__ = ["ElasticAdaptive", "ElasticSchedulerPlugin", "PLUGIN_NAME", "install_plugin",
           "publish_fit", "end_fit", "elastic_state", "retire_released"]

#: Name of the :class:`ElasticSchedulerPlugin` on the scheduler.
PLUGIN_NAME = "daskelastic-elastic"

#: An :class:`ElasticAdaptive` that asked within this many seconds counts as attached.
_ADAPTIVE_FRESH = 30.0


class ElasticSchedulerPlugin(SchedulerPlugin):
    """Scheduler-side record of the running elastic fits.

    Each fit publishes ``placement`` (``{worker address: [chunk ids]}``),
    ``target`` (workers it wants) and ``released`` (addresses it let go, no
    chunks left).  Workers holding chunks of a fit are never valid to
    downscale.

    Parameters
    ----------
    preloaded : bool, default=False
        Whether the scheduler loaded the plugin at its start (``dask
        scheduler --preload daskelastic.adaptive``): such a plugin stays when
        the fits that would otherwise remove it end.

    Examples
    --------
    The plugin is installed for you by elastic fits and by
    :class:`ElasticAdaptive`; to install it by hand::

        from daskelastic.adaptive import install_plugin
        install_plugin(client)
    """

    name = PLUGIN_NAME
    idempotent = True

    def __init__(self, preloaded=False):
        self.fits = {}
        self.adaptive_seen = None
        self.adaptive_maximum = None
        self.preloaded = bool(preloaded)
        self.scheduler = None
        self._dask_methods = None

    async def start(self, scheduler):
        self.attach(scheduler)

    def attach(self, scheduler):
        """Serve the ``daskelastic_state`` handler of ``scheduler``, and its autoscalers.

        ``Scheduler.adaptive_target`` and ``Scheduler.workers_to_close`` are
        answered by :meth:`adaptive_target` and :meth:`workers_to_close`
        while the plugin is attached (see ``daskelastic._distributed``).

        Parameters
        ----------
        scheduler : distributed.Scheduler
            The scheduler the plugin is added to.
        """
        self.scheduler = scheduler
        _distributed.add_handler(scheduler, "daskelastic_state", self._state)
        self._dask_methods = _distributed.serve_scaling(
            scheduler, self.adaptive_target, self.workers_to_close)

    def detach(self):
        """Stop serving the handler and the autoscalers (the plugin is being removed)."""
        if self.scheduler is not None:
            _distributed.remove_handler(self.scheduler, "daskelastic_state")
            if self._dask_methods is not None:
                _distributed.restore_scaling(self.scheduler, self._dask_methods)
                self._dask_methods = None

    def adaptive_attached(self):
        """Whether an autoscaler asked the scheduler recently.

        An :class:`ElasticAdaptive` asking for the state, or any autoscaler
        asking ``adaptive_target`` (the HTTP route
        ``/api/v1/adaptive_target``, the RPC, ``distributed.deploy.Adaptive``).

        Returns
        -------
        bool
            True when one asked within the last 30 seconds.
        """
        return (self.adaptive_seen is not None
                and time.monotonic() - self.adaptive_seen < _ADAPTIVE_FRESH)

    def fits_target(self):
        """The workers the running fits want (the sum of their targets); None without fits.

        Returns
        -------
        int or None
            The sum of the running fits' targets, or None when none runs.
        """
        if not self.fits:
            return None
        return sum(fit["target"] for fit in self.fits.values())

    def adaptive_target(self, target_duration=None):
        """``Scheduler.adaptive_target``: the fits' target while fits run, else Dask's.

        A fit's rounds are calls to its actors, which the scheduler's
        task-based estimate does not see: without this, an autoscaler that
        asks the scheduler (the dask-kubernetes operator polls
        ``/api/v1/adaptive_target``) would scale an idle-looking cluster
        down under a running fit.

        Parameters
        ----------
        target_duration : str or float, optional
            Passed to Dask's own estimate when no fit runs.

        Returns
        -------
        int
            Workers the cluster should have.
        """
        self.adaptive_seen = time.monotonic()
        wanted = self.fits_target()
        if wanted is None:
            return self._dask_methods[0](target_duration)
        return wanted

    def workers_to_close(self, memory_ratio=None, n=None, key=None, minimum=None,
                         target=None, attribute="address"):
        """``Scheduler.workers_to_close``: the workers fits let go first, never a holder.

        ``POST /api/v1/retire_workers {"n": k}`` and the operator's RPC
        fallback pick the workers to retire with it.  Without running fits
        it is Dask's own choice (which :meth:`valid_workers_downscaling`
        already filters).

        Parameters
        ----------
        memory_ratio : float, optional
            As ``distributed.Scheduler.workers_to_close``.
        n : int, optional
            As ``distributed.Scheduler.workers_to_close``: the workers to close.
        key : callable, optional
            As ``distributed.Scheduler.workers_to_close``.
        minimum : int, optional
            As ``distributed.Scheduler.workers_to_close``.
        target : int, optional
            As ``distributed.Scheduler.workers_to_close``: the workers to keep.
        attribute : str, default="address"
            As ``distributed.Scheduler.workers_to_close``.

        Returns
        -------
        list
            The workers' ``attribute`` (addresses by default).
        """
        dask_choice = self._dask_methods[1](memory_ratio=memory_ratio, n=n, key=key,
                                            minimum=minimum, target=target,
                                            attribute="address")
        if self.fits:
            workers = self.scheduler.workers
            if n is None and target is not None:
                n = max(len(workers) - target, 0)
            holders = self.holders()
            released = [a for fit in self.fits.values() for a in fit["released"]]
            out = [a for a in dict.fromkeys(released + list(dask_choice))
                   if a in workers and a not in holders]
            if minimum is not None:
                out = out[: max(len(workers) - minimum, 0)]
            dask_choice = out if n is None else out[:n]
        return [getattr(self.scheduler.workers[a], attribute) for a in dask_choice]

    def _fit_update(self, fit_id=None, placement=None, target=None, released=None):
        """Record (or replace) what fit ``fit_id`` holds and wants."""
        self.fits[fit_id] = {"placement": {w: list(c) for w, c in (placement or {}).items()},
                             "target": int(target), "released": list(released or ())}
        return "OK"

    def _fit_end(self, fit_id=None):
        """Forget fit ``fit_id``."""
        self.fits.pop(fit_id, None)
        return "OK"

    def holders(self):
        """Workers holding chunks of a running fit.

        Returns
        -------
        set of str
            Their addresses.
        """
        return {w for fit in self.fits.values() for w, cids in fit["placement"].items()
                if cids}

    def _state(self, adaptive=False, maximum=None):
        """The running fits, with worker names; ``adaptive=True`` marks an attached
        Adaptive, ``maximum`` its bound on the workers."""
        if adaptive:
            self.adaptive_seen = time.monotonic()
            self.adaptive_maximum = maximum
        workers = self.scheduler.workers if self.scheduler is not None else {}
        fits = {}
        for fit_id, fit in self.fits.items():
            fits[fit_id] = dict(fit, released_names=[
                workers[a].name for a in fit["released"] if a in workers])
        holders = sorted(self.holders())
        return {"fits": fits, "adaptive": self.adaptive_attached(), "holders": holders,
                "holder_names": [workers[a].name for a in holders if a in workers],
                "maximum": self.adaptive_maximum if self.adaptive_attached() else None}

    def valid_workers_downscaling(self, scheduler, workers):
        """Of the candidate ``workers``, those holding no chunks of a running fit.

        Parameters
        ----------
        scheduler : distributed.Scheduler
            The scheduler.
        workers : list of distributed.scheduler.WorkerState
            Candidates for retirement.

        Returns
        -------
        list of distributed.scheduler.WorkerState
            The candidates that may be retired.
        """
        holders = self.holders()
        return [ws for ws in workers if ws.address not in holders]


def _plugin_on(scheduler, install, preloaded=False):
    """The scheduler's :class:`ElasticSchedulerPlugin`; installed first with ``install``."""
    plugin = scheduler.plugins.get(PLUGIN_NAME)
    if plugin is None and install:
        plugin = ElasticSchedulerPlugin(preloaded=preloaded)
        plugin.attach(scheduler)
        scheduler.add_plugin(plugin, name=PLUGIN_NAME)
    return plugin


def dask_setup(scheduler):
    """Install the :class:`ElasticSchedulerPlugin` as the scheduler starts, for good.

    The hook of ``dask scheduler --preload daskelastic.adaptive``
    (https://docs.dask.org/en/stable/how-to/customize-initialization.html):
    with it, an autoscaler that polls the scheduler (the dask-kubernetes
    operator) is seen before the first fit, which then waits for the
    workers it asks for.

    Parameters
    ----------
    scheduler : distributed.Scheduler
        The scheduler starting.
    """
    _plugin_on(scheduler, True, preloaded=True)


def _publish_on_scheduler(fit_id, placement, target, released, dask_scheduler=None):
    _plugin_on(dask_scheduler, True)._fit_update(fit_id, placement, target, released)


def _end_on_scheduler(fit_id, dask_scheduler=None):
    plugin = _plugin_on(dask_scheduler, False)
    if plugin is None:
        return
    plugin._fit_end(fit_id)
    if not plugin.fits and not plugin.adaptive_attached() and not plugin.preloaded:
        plugin.detach()
        dask_scheduler.remove_plugin(name=PLUGIN_NAME)


def _state_on_scheduler(dask_scheduler=None):
    plugin = _plugin_on(dask_scheduler, False)
    if plugin is None:
        return {"fits": {}, "adaptive": False, "holders": [], "holder_names": [],
                "maximum": None}
    return plugin._state()


def install_plugin(client):
    """Install the :class:`ElasticSchedulerPlugin` on ``client``'s scheduler (once).

    Fits install it themselves while they run (:func:`publish_fit`).

    Examples
    --------
    ::

        from daskelastic.adaptive import elastic_state, install_plugin
        install_plugin(client)
        elastic_state(client)   # {"fits": {}, "adaptive": False, "holders": [], ...}
    """
    client.run_on_scheduler(_plugin_on, install=True)


def publish_fit(client, fit_id, placement, target, released=()):
    """Tell the scheduler what fit ``fit_id`` holds, wants and let go.

    Installs the :class:`ElasticSchedulerPlugin` when the scheduler has none.
    """
    client.run_on_scheduler(_publish_on_scheduler, fit_id,
                            {w: list(c) for w, c in placement.items()}, int(target),
                            list(released))


def end_fit(client, fit_id):
    """Tell the scheduler fit ``fit_id`` ended.

    The plugin is removed once it holds no fit, unless an
    :class:`ElasticAdaptive` is attached.
    """
    client.run_on_scheduler(_end_on_scheduler, fit_id)


def elastic_state(client):
    """The plugin's view of the running fits.

    ``{"fits": ..., "adaptive": bool, "holders": [...], "holder_names": [...]}``
    (the workers holding chunks, by address and by name); the same, with no
    fit, when the scheduler has no plugin.
    """
    return client.run_on_scheduler(_state_on_scheduler)


def _actor_holders(workers, keys, dask_scheduler=None):
    """Those of ``workers`` on which the scheduler still places one of the actors ``keys``."""
    return _distributed.actor_holders(dask_scheduler, workers, keys)


def retire_released(client, workers, actor_keys=(), timeout=10.0):
    """Retire ``workers`` through the scheduler (data they hold alone is copied first).

    Used when there is no ``Cluster`` object to scale down (a client of a bare
    scheduler) or when the fit started its cluster itself.

    The scheduler refuses to retire a worker that holds an actor ("Tried
    retiring worker ..., but it holds actor(s)").  A fit cancels its actors
    on the workers it lets go just before, but the cancellation travels on
    the client's batched stream and the retirement on a comm of its own, so
    the retirement can arrive first.  With the cancelled actors' keys this
    waits (polling the scheduler, at most ``timeout`` seconds) until the
    scheduler no longer places any of them on ``workers``, then retires.

    Parameters
    ----------
    client : distributed.Client
        A client of the cluster.
    workers : iterable of str
        Addresses of the workers to retire.
    actor_keys : iterable, optional
        Keys of actors on ``workers`` whose cancellation was sent.
    timeout : float
        Seconds to wait for the scheduler to release those actors; a worker
        still holding one then is not retired (the scheduler logs why).

    Returns
    -------
    list of str
        The addresses the scheduler retired.
    """
    workers = list(workers)
    if not workers:
        return []
    keys = list(actor_keys)
    if keys:
        deadline = time.monotonic() + timeout
        while client.run_on_scheduler(_actor_holders, workers, keys) and \
                time.monotonic() < deadline:
            time.sleep(0.005)
    return list(client.retire_workers(workers=workers, close_workers=True))


def _released_names(state):
    """The names of the workers fits let go that hold no chunks of another fit."""
    holding = set(state["holder_names"])
    names = [name for fit in state["fits"].values() for name in fit["released_names"]]
    return [name for name in dict.fromkeys(names) if name not in holding]


class ElasticAdaptive(Adaptive):
    """Adaptive scaling that follows the running daskelastic fits.

    Use it as ``cluster.adapt(Adaptive=ElasticAdaptive, minimum=..., maximum=...)``.
    While fits with a scaling policy run, the target is the number of workers
    they want (their sum) and the workers to close are those they have
    evacuated and let go — so a fit scaling in from ``K`` to ``K′`` workers
    hands ``K − K′`` workers back to the cluster, after their chunks (with
    their dual state) moved.  With no fit running, target and choice are
    Dask's own (``distributed.deploy.Adaptive.target``).  Either way
    ``minimum``, ``maximum`` and the ``wait_count`` hysteresis apply, and the
    scheduler plugin never lets a worker holding chunks be retired.

    Parameters
    ----------
    cluster : distributed.deploy.Cluster
        The cluster to scale (``cluster.adapt`` passes it).
    interval : str or float, optional
        Time between adaptations; ``daskelastic.elastic.adaptive-interval``
        (250 ms) by default, not Dask's second: a worker a fit let go is
        closed at the next adaptation, and each costs two scheduler calls.
    minimum, maximum : int, optional
        Bounds on the number of workers.
    wait_count : int, optional
        Consecutive adaptations that must agree before a worker is closed.
    target_duration : str or float, optional
        Dask's own target without a fit (``distributed.adaptive.target-duration``).
    worker_key : callable, optional
        Groups workers closed together (as in ``Adaptive``).
    **kwargs
        Passed to ``Scheduler.workers_to_close``, as in ``Adaptive``.

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> from daskelastic import ElasticAdaptive, LogisticRegression
    >>> cluster = LocalCluster(n_workers=4, processes=False)     # doctest: +SKIP
    >>> cluster.adapt(Adaptive=ElasticAdaptive, minimum=1, maximum=4)  # doctest: +SKIP
    >>> clf = LogisticRegression(scaling_policy="convergence")   # doctest: +SKIP
    >>> clf.fit(X, y)   # workers are handed back as convergence slows  # doctest: +SKIP
    """

    _plugin_ready = False

    def __init__(self, cluster=None, interval=None, minimum=None, maximum=None,
                 wait_count=None, target_duration=None, worker_key=None, **kwargs):
        if interval is None:
            interval = config.get("elastic.adaptive-interval")
        super().__init__(cluster=cluster, interval=interval, minimum=minimum,
                         maximum=maximum, wait_count=wait_count,
                         target_duration=target_duration, worker_key=worker_key, **kwargs)

    async def _elastic_state(self):
        if self._plugin_ready:
            try:
                return await self.scheduler.daskelastic_state(adaptive=True,
                                                              maximum=self.maximum)
            except Exception:  # noqa: BLE001 - removed while no fit ran: install again
                self._plugin_ready = False
        await self.scheduler.register_scheduler_plugin(
            plugin=dumps(ElasticSchedulerPlugin()), name=PLUGIN_NAME, idempotent=True)
        self._plugin_ready = True
        return await self.scheduler.daskelastic_state(adaptive=True, maximum=self.maximum)

    async def target(self):
        """The number of workers the cluster should have.

        Returns
        -------
        int
            The sum of the running fits' targets, or Dask's target without fits.
        """
        state = await self._elastic_state()
        if not state["fits"]:
            return await super().target()
        return sum(fit["target"] for fit in state["fits"].values())

    async def recommendations(self, target):
        """What to do now: close the workers the fits let go at once, else as Dask does.

        A fit lets a worker go only once its scaling policy decided to (with
        a hysteresis of its own) and its chunks moved away; Dask's
        ``wait_count`` adaptations before closing a worker would only keep it
        idle (three adaptations of one second each: longer than a short fit
        after its scale-in), so released workers close at the next
        adaptation.

        Parameters
        ----------
        target : int
            Workers the cluster should have (:meth:`target`).

        Returns
        -------
        dict
            ``{"status": "down", "workers": [names]}`` for released workers,
            else ``distributed.deploy.Adaptive``'s recommendation.
        """
        plan = self.plan
        if target < len(plan):
            state = await self._elastic_state()
            closing = [name for name in _released_names(state) if name in plan]
            closing = closing[: len(plan) - target]
            if closing:
                for name in closing:
                    _distributed.forget_close_count(self, name)
                return {"status": "down", "workers": closing}
        return await super().recommendations(target)

    async def workers_to_close(self, target):
        """Which workers to close to come down to ``target``.

        Parameters
        ----------
        target : int
            Workers to keep.

        Returns
        -------
        list of str
            Worker names: those the fits let go first, then Dask's choice
            (never a worker holding chunks).
        """
        state = await self._elastic_state()
        if not state["fits"]:
            return await super().workers_to_close(target)
        n = len(self.plan) - target
        if n <= 0:
            return []
        out = _released_names(state)[:n]
        if len(out) < n:
            for name in await super().workers_to_close(target):
                if name not in out and len(out) < n:
                    out.append(name)
        return out
