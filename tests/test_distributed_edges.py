"""What daskelastic relies on in distributed beyond its public API (``_distributed``).

Each test fails loudly when a release of distributed changes the behaviour
one use depends on.
"""

import json
import logging
import urllib.request

import dask
from distributed import Client, LocalCluster

from daskelastic._distributed import restore_scaling, serve_scaling

from cluster_checks import kill

ROUTES = ["distributed.http.scheduler.json", "distributed.http.health",
          "distributed.http.scheduler.api"]


def _http(cluster, path, body=None):
    base = cluster.dashboard_link.rsplit("/", 1)[0]
    assert base.startswith("http://127.0.0.1:")
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data,
                                     method="GET" if body is None else "POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_served_scaling_answers_the_http_api_the_rpc_and_retirement():
    """The operator's routes and ``Adaptive``'s RPC reach the methods served in their place."""
    with dask.config.set({"distributed.scheduler.http.routes": ROUTES}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp://",
                         host="127.0.0.1", dashboard_address="127.0.0.1:0",
                         silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        scheduler = cluster.scheduler
        chosen = sorted(scheduler.workers)[:1]
        asked = []

        def workers_to_close(memory_ratio=None, n=None, key=None, minimum=None,
                             target=None, attribute="address"):
            asked.append(n)
            return list(chosen)

        own = client.sync(_on_loop, serve_scaling, scheduler, lambda target_duration=None: 7,
                          workers_to_close)
        try:
            assert _http(cluster, "/api/v1/adaptive_target") == {"workers": 7}
            assert client.sync(client.scheduler.adaptive_target) == 7
            assert list(client.sync(client.scheduler.workers_to_close, n=1)) == chosen
            retired = _http(cluster, "/api/v1/retire_workers", {"n": 1})
            assert list(retired) == chosen and asked[-1] == 1
            assert chosen[0] not in scheduler.workers
        finally:
            client.sync(_on_loop, restore_scaling, scheduler, own)
        # the scheduler's own answers again
        assert "adaptive_target" not in vars(scheduler)
        assert client.sync(client.scheduler.adaptive_target) == scheduler.adaptive_target()
        assert scheduler.handlers["workers_to_close"].__func__ is \
            type(scheduler).workers_to_close


async def _on_loop(fn, *args):
    """``fn(*args)`` on the scheduler's event loop, where its state is changed."""
    return fn(*args)


class _Counter:
    """A tiny actor: a method that answers, and one that fails."""

    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k
        return self.n

    def fail(self):
        raise ValueError("the actor's own error")


def _local_cluster(**kwargs):
    return LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp://",
                        host="127.0.0.1", dashboard_address=None,
                        silence_logs=logging.ERROR, **kwargs)


def test_current_client_set_is_the_client_dask_uses_in_this_thread_only():
    """The context variable behind ``Client.as_current`` still decides ``default_client``."""
    import threading

    from distributed import default_client

    from daskelastic._distributed import current_client_set

    with _local_cluster() as cluster, Client(cluster, set_as_default=False) as client:
        seen = []
        with current_client_set(client):
            assert default_client() is client
            thread = threading.Thread(target=lambda: seen.append(_current_or_none()))
            thread.start()
            thread.join()
        assert seen == [None]
        assert _current_or_none() is None
        # the process-wide configuration was not touched
        assert dask.config.get("scheduler", None) is None


def _current_or_none():
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def test_actor_execute_answers_a_direct_call_and_raises_the_actors_error():
    """The worker's ``actor_execute`` handler, called straight over the client's pool."""
    import pytest

    from daskelastic._distributed import actor_holders, call_actor_directly

    with _local_cluster() as cluster, Client(cluster, set_as_default=False) as client:
        worker = sorted(cluster.scheduler.workers)[0]
        future = client.submit(_Counter, workers=[worker], actor=True, key="edge-actor")
        future.result()
        assert client.sync(call_actor_directly, client, worker, future.key, "add", (2,)) == 2
        assert client.sync(call_actor_directly, client, worker, future.key, "add", (3,)) == 5
        with pytest.raises(ValueError, match="the actor's own error"):
            client.sync(call_actor_directly, client, worker, future.key, "fail", ())
        # the scheduler's WorkerState.actors places the actor on its worker only
        assert client.sync(_on_loop, actor_holders, cluster.scheduler,
                           sorted(cluster.scheduler.workers), [future.key]) == [worker]


def test_handlers_added_to_the_scheduler_answer_a_clients_rpc():
    """``Server.handlers`` is where an operation a client calls by name is looked up."""
    from daskelastic._distributed import add_handler, remove_handler

    with _local_cluster() as cluster, Client(cluster, set_as_default=False) as client:
        add_handler(cluster.scheduler, "daskelastic_edge", lambda x=0: x + 1)
        try:
            assert client.sync(client.scheduler.daskelastic_edge, x=41) == 42
        finally:
            remove_handler(cluster.scheduler, "daskelastic_edge")
        assert "daskelastic_edge" not in cluster.scheduler.handlers


def test_adaptive_counts_the_rounds_it_chose_to_close_a_worker():
    """``close_counts``, which ``forget_close_count`` resets, is AdaptiveCore's hysteresis."""
    from distributed.deploy.adaptive import Adaptive

    from daskelastic._distributed import forget_close_count

    with _local_cluster() as cluster, Client(cluster, set_as_default=False) as client:
        adaptive = Adaptive(cluster, minimum=0, maximum=2, wait_count=3, interval="1h")
        try:
            recommendation = client.sync(adaptive.recommendations, 1)
            # not yet: the worker was chosen once, and must be thrice in a row
            assert recommendation == {"status": "same"}
            assert list(adaptive.close_counts.values()) == [1]
            name = next(iter(adaptive.close_counts))
            forget_close_count(adaptive, name)
            assert name not in adaptive.close_counts
        finally:
            adaptive.stop()


def test_a_killed_workers_actor_errors_are_recognised_as_its_loss():
    """An actor call on a worker that left fails with a type or a scheduler state that says so."""
    import concurrent.futures
    import time

    from daskelastic.backends.dask.calls import ActorCalls, ActorLost, is_lost_error

    class Counter:   # (a local class travels by value to the worker processes)
        def add(self, k):
            return k

        def fail(self):
            raise ValueError("the actor's own error")

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, protocol="tcp://",
                      host="127.0.0.1", dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster, \
            Client(cluster, set_as_default=False) as client:
        worker = sorted(cluster.scheduler_info["workers"])[0]
        future = client.submit(Counter, workers=[worker], actor=True, key="edge-lost")
        future.result()
        direct = ActorCalls(client, worker, future.key, future=future)
        assert direct.add(1).result(timeout=30) == 1
        # an error of the actor's own, its worker alive: not a loss
        own = direct.fail().exception(timeout=30)
        assert isinstance(own, ValueError) and not is_lost_error(own, client, [worker])
        kill(client, [worker])
        deadline = time.monotonic() + 30
        while worker in client.ncores() and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            error = direct.add(1).exception(timeout=30)
        except concurrent.futures.TimeoutError:
            error = None
        assert error is not None and is_lost_error(error, client, [worker])
        # the actor's future erred: a call is refused, with a type, before it is sent
        while future.status == "pending" and time.monotonic() < deadline:
            time.sleep(0.05)
        refused = direct.add(1).exception(timeout=1)
        assert isinstance(refused, ActorLost) and refused.status in ("error", "lost")
        assert is_lost_error(refused)
