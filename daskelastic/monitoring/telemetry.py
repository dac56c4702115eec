"""Publishing a fit's rounds as scheduler events, and the monitor a fit runs with.

Every round of a Dask fit becomes an event on the scheduler, topic
``"daskelastic"`` (see :mod:`daskelastic.monitoring.records` for the
messages).  They are the same events as ``client.log_event("daskelastic",
msg)`` publishes, but the fit does not wait for them: ``client.log_event``
is a round trip to the scheduler, while queueing a message costs the fit's
thread next to nothing (the docs' *Design notes*, *Telemetry queued, not sent
from the fit's thread*); the client's event loop sends the queue,
in order, while the next rounds run.  Anything can read them — ``client.get_events("daskelastic")``,
``client.subscribe_topic`` or a scheduler plugin, like the dashboard page's.
"""

import asyncio
import collections
import contextlib
import logging
import threading
import time
import uuid

from .. import config
from .records import TOPIC, to_message

__all__ = ["EventSender", "FitMonitor"]

logger = logging.getLogger(__name__)

#: Seconds the client's loop waits after a first queued event before sending
#: the queue, so that the events of several quick rounds go together.
SEND_DELAY = 0.1


class EventSender:
    """Publish events on a Dask scheduler, in order, without blocking.

    :meth:`send` queues a message and returns at once.  The client's event
    loop sends the queue shortly after (``SEND_DELAY``, 0.1 s), in order: in one
    call to the ``daskelastic_log_events`` handler that
    :class:`~daskelastic.monitoring.dashboard.DashboardPlugin` adds to the
    scheduler, or, on a scheduler without it, one ``log_event`` call per
    message (as ``Client.log_event`` does).  Either way each message becomes
    one event.  :meth:`flush` sends what is queued and waits for it.  A
    message that cannot be sent is counted and logged once, never raised:
    telemetry must not fail a fit.

    Parameters
    ----------
    client : distributed.Client
        A synchronous client.
    topic : str, default="daskelastic"
        Topic of the events.
    batch : bool, default=False
        Whether the scheduler has the ``daskelastic_log_events`` handler.

    Attributes
    ----------
    sent, failed : int
        Messages sent, and messages the scheduler did not take.

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> from daskelastic.monitoring import EventSender
    >>> with LocalCluster(n_workers=0, processes=False,
    ...                   dashboard_address="127.0.0.1:0") as cluster, \\
    ...         Client(cluster) as client:
    ...     sender = EventSender(client, topic="example")
    ...     for i in range(3):
    ...         sender.send({"i": i})
    ...     sender.flush(), [m["i"] for _, m in client.get_events("example")]
    (True, [0, 1, 2])
    """

    def __init__(self, client, topic=TOPIC, *, batch=False):
        self.client = client
        self.topic = topic
        self.batch = batch
        self.sent = 0
        self.failed = 0
        self._queue = collections.deque()
        self._scheduled = False
        self._task = None
        self._wake = None

    def send(self, msg):
        """Queue a message for the scheduler and return.

        Parameters
        ----------
        msg : dict
            The event, msgpack-serialisable (plain dicts, lists, strings
            and numbers).
        """
        self._queue.append(msg)
        if not self._scheduled:
            self._scheduled = True
            try:
                self.client.loop.add_callback(self._kick, SEND_DELAY)
            except RuntimeError:  # the client's loop is closed: nothing can be sent
                self._queue.clear()
                self.failed += 1

    def flush(self, timeout=5.0):
        """Send what is queued and wait until it is sent.

        Parameters
        ----------
        timeout : float, default=5.0
            Seconds to wait at most.

        Returns
        -------
        bool
            False if sending failed or timed out.
        """
        try:
            self.client.sync(self._flush, callback_timeout=timeout)
        except Exception as e:  # noqa: BLE001 - a closed client, a timeout
            logger.debug("daskelastic telemetry: flush failed: %r", e)
            return False
        return not self._queue

    def _kick(self, delay=0.0):
        if self._wake is None:
            self._wake = asyncio.Event()
        if not delay:
            self._wake.set()  # a waiting drain goes now
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._drain(delay))

    async def _drain(self, delay):
        if delay and not self._wake.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
        self._wake.clear()
        while self._queue:
            self._scheduled = False  # before taking: a message queued after is sent too
            batch = [self._queue.popleft() for _ in range(len(self._queue))]
            try:
                if self.batch:
                    await self.client.scheduler.daskelastic_log_events(topic=self.topic,
                                                                      msgs=batch)
                else:
                    for msg in batch:
                        await self.client.scheduler.log_event(topic=self.topic, msg=msg)
                self.sent += len(batch)
            except Exception as e:  # noqa: BLE001 - see the class docstring
                self.failed += len(batch)
                if self.failed == len(batch):
                    logger.warning("daskelastic telemetry: the scheduler did not take the "
                                   "events (%s: %s); the fit goes on", type(e).__name__, e)
        self._scheduled = False

    async def _flush(self):
        while self._queue or (self._task is not None and not self._task.done()):
            self._kick()
            await self._task


class FitMonitor:
    """Watch one fit: a progress bar, and the fit's events on the scheduler.

    The estimators create one after placing the data, pass :meth:`on_round`
    to the driver as its callback, and call :meth:`finish` once the driver
    returned or raised.  The events are published for Dask fits (``client``
    given) when ``daskelastic.telemetry`` is true; the first also registers
    :class:`~daskelastic.monitoring.dashboard.DashboardPlugin` on the
    scheduler, which serves the ``/daskelastic`` dashboard page.

    Parameters
    ----------
    estimator : estimator
        The estimator being fitted (its class name, ``tol`` and ``max_iter``
        are reported).
    backend : daskelastic.backends.base.Backend
        The backend holding the data; its ``describe(ask_workers=False)``
        gives the chunks and rows per worker.
    client : distributed.Client, optional
        The client of a Dask fit; no events without one.
    progress : callable, optional
        Called with each history entry, and its ``close(status)`` at the end
        (a :class:`~daskelastic.monitoring.ProgressBar`).

    Attributes
    ----------
    fit_id : str
        The backend's fit id (names the fit in events and on the dashboard).
    status : str or None
        How the fit ended, once :meth:`finish` was called.
    sender : EventSender or None
        The event publisher, None without telemetry.

    Examples
    --------
    Without a client (an in-process fit) the monitor only draws the bar:

    >>> import io
    >>> from daskelastic import Ridge
    >>> from daskelastic.monitoring import FitMonitor, ProgressBar
    >>> bar = ProgressBar(tol=1e-3, max_iter=10, stream=io.StringIO())
    >>> monitor = FitMonitor(Ridge(tol=1e-3, max_iter=10), backend=None, progress=bar)
    >>> monitor.on_round({"round": 0, "time": 0.1, "duality_gap": 1e-4, "n_workers": 1})
    False
    >>> monitor.finish(error=KeyboardInterrupt())
    'interrupted'
    """

    def __init__(self, estimator, backend, client=None, *, progress=None):
        self.estimator_name = type(estimator).__name__
        self.tol = float(estimator.tol)
        self.max_iter = int(estimator.max_iter)
        self.progress = progress
        self.fit_id = getattr(backend, "fit_id", None) or f"fit-{uuid.uuid4().hex[:12]}"
        self.status = None
        self.sender = None
        self._backend = backend
        self._placed = None   # the placement last published
        self._placing = threading.Lock()
        self._last = None
        self._t0 = time.perf_counter()
        if client is not None and config.get("telemetry"):
            try:
                self._start_telemetry(estimator, backend, client)
            except Exception as e:  # noqa: BLE001 - telemetry never fails a fit
                logger.warning("daskelastic telemetry: off for this fit (%r)", e)
                self.sender = None

    def _start_telemetry(self, estimator, backend, client):
        from .dashboard import register_dashboard

        batch = register_dashboard(client)
        problem = getattr(backend, "problem", None)
        params = {k: v for k, v in estimator.get_params(deep=False).items()
                  if k != "client" and (v is None or isinstance(v, (str, bool, int, float)))}
        msg = {"event": "start", "fit": self.fit_id, "estimator": self.estimator_name,
               "client": getattr(client, "id", None), "wall_time": time.time(),
               "params": params}
        if problem is not None:
            msg.update(n_samples=problem.n_samples, n_features=problem.n_features,
                       n_targets=problem.n_targets)
        self.sender = EventSender(client, batch=batch)
        self.sender.send(to_message(msg))
        self._publish_placement()

    def on_round(self, entry):
        """The driver's callback: show and publish one round.

        Parameters
        ----------
        entry : dict
            The round's history entry.

        Returns
        -------
        bool
            False: watching never stops a fit.
        """
        self._last = entry
        if self.progress is not None:
            self.progress(entry)
        if self.sender is not None:
            self.sender.send({"event": "round", "fit": self.fit_id,
                              "estimator": self.estimator_name, "entry": to_message(entry)})
            self._publish_placement()
        return False

    def _publish_placement(self):
        """Publish the placement if it changed since it was last published.

        A scale-in, rebalance, join or recovery moves chunks between rounds.
        The backend answers from the driver's own map of the chunks (no
        round trip to the workers).  Never raises: telemetry does not fail a
        fit.
        """
        try:
            placement = self._backend.describe(ask_workers=False)
            if placement != self._placed:
                with self._placing:
                    self._placed = placement
                    self._send_placement(placement)
                self._ask_held_bytes(placement)
        except Exception as e:  # noqa: BLE001 - telemetry never fails a fit
            logger.debug("daskelastic telemetry: no placement (%r)", e)

    def _send_placement(self, placement):
        self.sender.send(to_message({"event": "placement", "fit": self.fit_id,
                                     "estimator": self.estimator_name,
                                     "placement": placement}))

    def _ask_held_bytes(self, placement):
        """Publish the placement again with the bytes each worker holds for the fit.

        Only the workers know the bytes of their packed rows, so they are
        asked on the client's event loop, not in the fit's thread, which goes
        on; the answer is dropped when the chunks moved meanwhile.
        """
        if not placement or not hasattr(self._backend, "client"):
            return   # not workers on Dask: nothing to ask
        from ..backends.dask.worker import held_bytes

        client = self.sender.client

        async def ask():
            try:
                held = await client.run(held_bytes, self.fit_id, workers=list(placement),
                                        on_error="ignore", asynchronous=True)
            except Exception as e:  # noqa: BLE001 - telemetry never fails a fit
                logger.debug("daskelastic telemetry: no bytes held (%r)", e)
                return
            # a worker of the placement that holds nothing answered after the
            # fit ended (and dropped its state): no news
            with_bytes = {w: {**info, "nbytes": held[w]} if held.get(w) else info
                          for w, info in placement.items()}
            with self._placing:   # never after a newer placement
                if self._placed is placement:
                    self._send_placement(with_bytes)

        client.loop.add_callback(ask)

    def finish(self, result=None, error=None):
        """Report how the fit ended; the first call counts.

        Parameters
        ----------
        result : daskelastic.driver.FitResult, optional
            What the driver returned.
        error : BaseException, optional
            What the driver raised: ``KeyboardInterrupt`` ends the fit as
            ``"interrupted"``, anything else as ``"failed"``.

        Returns
        -------
        str
            The status: ``"converged"``, ``"max_iter"``, ``"stopped"``,
            ``"failed"`` or ``"interrupted"``.
        """
        if self.status is not None:
            return self.status
        last = self._last or {}
        if error is not None:
            interrupted = isinstance(error, (KeyboardInterrupt, asyncio.CancelledError))
            self.status = "interrupted" if interrupted else "failed"
        elif result is not None and result.converged:
            self.status = "converged"
        elif last.get("round", self.max_iter) >= self.max_iter:
            self.status = "max_iter"
        else:
            self.status = "stopped"
        if self.progress is not None and hasattr(self.progress, "close"):
            self.progress.close(self.status)
        if self.sender is not None:
            msg = {"event": "end", "fit": self.fit_id, "estimator": self.estimator_name,
                   "status": self.status,
                   "n_iter": result.n_iter if result is not None else last.get("round", 0),
                   "duality_gap": last.get("duality_gap"),
                   "time": time.perf_counter() - self._t0}
            if error is not None:
                msg["error"] = f"{type(error).__name__}: {error}"[:500]
            self.sender.send(to_message(msg))
            self.sender.flush()
        return self.status
