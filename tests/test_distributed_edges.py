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
