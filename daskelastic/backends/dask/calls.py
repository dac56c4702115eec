"""The driver's side of the transport: actor calls, and waiting on workers that may die.

Every call the driver waits for — a round, a load, a move, a sum — is a
``concurrent.futures.Future`` (actor calls, :class:`ActorCalls`) or a Dask
``Future`` (tasks).  :func:`gather_watching` and :func:`wait_any` wait for
either kind and notice a worker that died: its call fails with a closed
connection, or — a task restricted to a dead worker is never run, it waits
for the worker forever — the scheduler no longer lists it.  Either way they
raise :class:`~daskelastic.driver.WorkersLost`, from which the driver
recovers.
"""

import asyncio
import concurrent.futures
import ipaddress
import time

from dask.core import flatten
from distributed import futures_of
from distributed.client import FutureCancelledError
from distributed.comm import get_address_host, parse_address
from distributed.comm.core import CommClosedError

from ... import config
from ..._distributed import call_actor_directly
from ...driver import ConnectionLost, WorkersLost

__all__ = ["ACTOR_PREFIX", "ActorCalls", "ActorLost", "calls_direct", "done_signal",
           "result_watching", "gather_watching", "wait_any", "scheduler_workers", "ask_scheduler",
           "persisted_blocks", "is_lost_error", "connection_lost"]


class ActorCalls:
    """Calls of one worker's actor; each call returns a ``concurrent.futures.Future``.

    Direct calls go from the client straight to the worker's
    ``actor_execute`` handler over the client's connection pool, as a client
    made with ``direct_to_workers=True`` sends them.  That handler is
    distributed's own, not a public API: the public ``distributed.Actor``
    proxy sends calls through the scheduler, which forwards them, unless the
    *whole* client was made ``direct_to_workers`` (workers behind a firewall
    may be out of a client's reach).  Direct calls take a round less time
    outside the solvers (see the docs' *Design notes*, *Round calls straight
    to the workers' actors*).  Without ``direct``, the calls go through that
    proxy.

    Parameters
    ----------
    client : distributed.Client
        The client whose event loop and connections send the calls.
    address : str
        Address of the worker that holds the actor.
    key : str
        Key of the actor (of the future that created it).
    actor : distributed.Actor, optional
        The proxy for calls through the scheduler; None for direct calls.
    future : distributed.Future, optional
        The future that created the actor: once it is neither pending nor
        finished, a call fails with :class:`ActorLost` without being sent.
    """

    def __init__(self, client, address, key, actor=None, future=None):
        self._client = client
        self._address = address
        self._key = key
        self._actor = actor
        self._future = future

    def __getattr__(self, method):
        if method.startswith("_"):
            raise AttributeError(method)

        def call(*args):
            status = "finished" if self._future is None else self._future.status
            if status not in ("pending", "finished"):
                failed = concurrent.futures.Future()
                failed.set_exception(ActorLost(self._key, status))
                return failed
            if self._actor is None:
                coro = self._direct(method, args)
            else:
                coro = _awaited(getattr(self._actor, method)(*args))
            return asyncio.run_coroutine_threadsafe(coro, self._client.loop.asyncio_loop)
        return call

    def _direct(self, method, args):
        return call_actor_directly(self._client, self._address, self._key, method, args)


async def _awaited(actor_future):
    return await actor_future


def calls_direct(client, address, setting):
    """Whether calls of the actor on ``address`` go straight to its worker.

    ``setting`` is ``daskelastic.actor-calls``: ``"direct"``, ``"scheduler"``,
    or ``"auto"``: direct when the client sends its other calls straight to
    the workers (``direct_to_workers``) or the worker listens on a loopback
    or in-process address, which a client on that machine reaches.
    """
    if setting not in ("auto", "direct", "scheduler"):
        raise ValueError(f"daskelastic.actor-calls must be 'auto', 'direct' or "
                         f"'scheduler', got {setting!r}")
    if setting != "auto":
        return setting == "direct"
    if client.direct_to_workers:
        return True
    if parse_address(address)[0] == "inproc":
        return True
    host = get_address_host(address)
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:   # a host name
        return False


def ask_scheduler(what, call, *args, **kwargs):
    """``call(*args, **kwargs)``, a call to the scheduler, its comm errors as ConnectionLost.

    Parameters
    ----------
    what : str
        What was asked, for the error.
    call : callable
        A client method that asks the scheduler (``Client.ncores``, ``Client.run``).

    Raises
    ------
    daskelastic.driver.ConnectionLost
        When the client's connection to the scheduler is broken.
    """
    try:
        return call(*args, **kwargs)
    except OSError as e:   # CommClosedError too
        raise ConnectionLost(f"{what}: {type(e).__name__}: {e}") from e


def scheduler_workers(client):
    """Addresses of the scheduler's workers, asked now (``Client.ncores``).

    ``Client.scheduler_info()`` returns a cache that the client's periodic
    refresh may overwrite between the fetch and the return; this asks the
    scheduler.

    Raises
    ------
    daskelastic.driver.ConnectionLost
        When the client's connection to the scheduler is broken.
    """
    return sorted(ask_scheduler("asking for the workers", client.ncores))


def done_signal(call):
    """A ``concurrent.futures.Future`` that is done once ``call`` is.

    ``call`` is a concurrent future (returned as it is) or a Dask future,
    whose done callback sets the signal (its result stays on the worker
    until asked for).
    """
    if isinstance(call, concurrent.futures.Future):
        return call
    signal = concurrent.futures.Future()
    call.add_done_callback(lambda _: signal.set_result(None))
    return signal


class ActorLost(RuntimeError):
    """An actor's call not sent: the future that created the actor says it is gone.

    Its ``status`` is the future's: ``"cancelled"`` when the client lost its
    connection to the scheduler (which then releases the client's keys),
    ``"error"`` or ``"lost"`` when the actor's worker left.
    """

    def __init__(self, key, status):
        super().__init__(f"the actor {key} is gone (its future is {status})")
        self.key = key
        self.status = status


#: Errors of a call that mean its worker is gone.
_LOST_ERRORS = (OSError, CommClosedError)


def is_lost_error(error, client=None, workers=()):
    """Whether a call's ``error`` says its worker is gone.

    A broken connection to the worker says so by its type, an actor's future
    by its status (:class:`ActorLost`).  Any other error — distributed
    reports an actor's lost worker as a plain ``RuntimeError`` — means a
    loss when one of ``workers`` (the call's) is no longer among the
    scheduler's workers: the scheduler forgets a worker before it fails
    the worker's tasks (``Scheduler.remove_worker``), so by the time the
    error arrives, the scheduler's state tells.
    """
    if isinstance(error, _LOST_ERRORS):
        return True
    if isinstance(error, ActorLost):
        return error.status != "cancelled"
    return client is not None and bool(workers) and bool(_gone(client, workers))


def connection_lost(error):
    """Whether a call's ``error`` says the client lost its connection to the scheduler.

    The client then cancels its futures (``FutureCancelledError`` with the
    reason ``"scheduler-connection-lost"``) and the scheduler releases their
    keys: an actor's worker no longer has it (``KeyError`` of its key from
    ``actor_execute``), and a call of an actor whose future was cancelled is
    not sent (:class:`ActorLost`).
    """
    if isinstance(error, FutureCancelledError):
        return error.reason == "scheduler-connection-lost"
    if isinstance(error, KeyError):
        return bool(error.args) and str(error.args[0]).startswith(ACTOR_PREFIX)
    return isinstance(error, ActorLost) and error.status == "cancelled"


#: The start of the keys of the fits' actors.
ACTOR_PREFIX = "daskelastic-actor-"


def _poll_interval():
    return float(config.get("fault.poll-interval"))


def _gone(client, workers):
    live = set(scheduler_workers(client))
    return [w for w in dict.fromkeys(workers) if w not in live]


def result_watching(client, call, watch):
    """The result of ``call``, asking every poll interval whether ``watch`` are alive.

    A Dask future can be done and its result still not come: the worker
    holding it died, and the scheduler computes it again — on that worker,
    for a restricted task, so never.  Hence the result too is awaited in
    slices of ``daskelastic.fault.poll-interval`` seconds.

    Parameters
    ----------
    client : distributed.Client
        The client of the cluster.
    call : concurrent.futures.Future or distributed.Future
        The call.
    watch : list of str
        Workers whose loss ends the wait: the call's own, and those holding
        its inputs.

    Raises
    ------
    daskelastic.driver.WorkersLost
        When the call failed because its worker is gone, or one of ``watch``
        left the scheduler.
    daskelastic.driver.ConnectionLost
        When the call failed because the client lost its connection to the
        scheduler (see :func:`connection_lost`).
    """
    poll = _poll_interval()
    while True:
        try:
            return call.result(timeout=poll)
        except _TIMEOUTS:
            gone = _gone(client, watch)
            if gone:
                raise WorkersLost(gone) from None
        except Exception as e:
            if connection_lost(e):
                raise ConnectionLost(f"{type(e).__name__}: {e}") from e
            if not is_lost_error(e, client, watch[:1]):
                raise
            raise WorkersLost(watch[:1]) from e


#: What ``result(timeout=...)`` raises when the time is up (one class from Python 3.11).
_TIMEOUTS = (TimeoutError, concurrent.futures.TimeoutError, asyncio.TimeoutError)


def gather_watching(client, calls, also_watch=()):
    """Wait for every call of ``calls``; return their results, in order.

    Parameters
    ----------
    client : distributed.Client
        The client of the cluster.
    calls : list of (str, call)
        Each call with the address of the worker it runs on; a call is a
        ``concurrent.futures.Future`` or a Dask ``Future``.
    also_watch : iterable of str
        Other workers the calls need (those holding their inputs): their
        loss ends the wait too.

    Returns
    -------
    list
        The calls' results.

    Raises
    ------
    daskelastic.driver.WorkersLost
        As soon as a call failed because its worker is gone, or — checked
        every ``daskelastic.fault.poll-interval`` seconds while it waits —
        a worker with a call not yet in (or one of ``also_watch``) left the
        scheduler.  The other calls are left to run.
    Exception
        Any other error of a call, as it is.
    """
    also_watch = list(also_watch)
    results = []
    for i, (worker, call) in enumerate(calls):
        watch = list(dict.fromkeys([worker] + [w for w, _ in calls[i + 1:]] + also_watch))
        results.append(result_watching(client, call, watch))
    return results


def wait_any(client, calls, timeout):
    """Wait up to ``timeout`` seconds until one of ``calls`` is done.

    Parameters
    ----------
    client : distributed.Client
        The client of the cluster.
    calls : dict
        ``{worker: signal}``: :func:`done_signal` of each worker's call.
    timeout : float or None
        Seconds to wait at most; None: until a call is done.

    Returns
    -------
    list of str
        The workers whose calls are done (maybe none, once ``timeout`` passed).

    Raises
    ------
    daskelastic.driver.WorkersLost
        When, checked every ``daskelastic.fault.poll-interval`` seconds of
        the wait, a worker with its call running left the scheduler.
    """
    end = None if timeout is None else time.monotonic() + timeout
    poll = _poll_interval()
    while True:
        left = None if end is None else max(end - time.monotonic(), 0.0)
        slice_ = poll if left is None else min(left, poll)
        concurrent.futures.wait(list(calls.values()), timeout=slice_,
                                return_when=concurrent.futures.FIRST_COMPLETED)
        done = [w for w, s in calls.items() if s.done()]
        if done or (left is not None and left <= poll):
            return done
        gone = _gone(client, calls)
        if gone:
            raise WorkersLost(gone)


def persisted_blocks(client, arrays):
    """Persist dask arrays; return, per array, its row blocks' futures in order.

    Returns once every block is in memory (a block a dying worker held is
    computed again by the scheduler).

    Raises
    ------
    RuntimeError
        When the cluster had no worker for ``daskelastic.fault.worker-timeout``
        seconds while the blocks were computed.
    """
    persisted = client.persist(arrays)
    signals = [done_signal(f) for f in futures_of(persisted)]
    timeout = float(config.get("fault.worker-timeout"))
    workerless = None
    while concurrent.futures.wait(signals, timeout=_poll_interval()).not_done:
        if scheduler_workers(client):
            workerless = None
            continue
        workerless = workerless or time.monotonic()
        if time.monotonic() - workerless > timeout:
            raise RuntimeError(f"the Dask cluster had no worker for {timeout:g} s "
                               "(daskelastic.fault.worker-timeout) while the input was "
                               "computed")
    blocks = []
    for a in persisted:
        futs = {f.key: f for f in futures_of(a)}
        blocks.append([futs[k] for k in flatten(a.__dask_keys__())])
    return blocks
