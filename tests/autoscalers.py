"""An autoscaler that works through the scheduler, as the dask-kubernetes operator's does.

:class:`OperatorLoop` does, every ``interval`` seconds, what
``daskautoscaler_adapt`` in ``dask_kubernetes/operator/controller/controller.py``
does: ``GET /api/v1/adaptive_target`` on the scheduler's HTTP server, clamp it
to ``[minimum, maximum]``, scale down by at most a quarter of the workers (at
least one) per step, then start worker processes (pods) or
``POST /api/v1/retire_workers {"n": k}`` and stop the processes it names
(deleting their pods), and keep still for ``cooldown`` seconds after each
change (the operator's is 15 s; tests pass a shorter one).  Only 127.0.0.1
is ever asked.
"""

import json
import threading
import time
import urllib.request


class OperatorLoop:
    """Scale a :class:`cli_cluster.CliCluster` as the operator scales a worker group.

    Use as a context manager: the loop runs in a thread until exit.
    ``history`` lists ``(seconds since start when the step asked the
    scheduler, worker processes after it, what was done, addresses retired)``.
    """

    def __init__(self, cluster, *, minimum, maximum, interval=0.5, cooldown=2.0):
        self.cluster = cluster
        self.minimum, self.maximum = minimum, maximum
        self.interval, self.cooldown = interval, cooldown
        self.history = []
        self.errors = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="operator-loop", daemon=True)
        self._start = time.monotonic()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=60)

    def elapsed(self):
        """Seconds since the loop was made (the clock of ``history``)."""
        return time.monotonic() - self._start

    def replicas(self):
        """The worker processes running (the worker group's replicas)."""
        return len(self.cluster.running_workers())

    def _http(self, path, body=None):
        assert self.cluster.http_address.startswith("http://127.0.0.1:")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.cluster.http_address + path, data=data,
                                         method="GET" if body is None else "POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def _run(self):
        while not self._stop.wait(self.interval):
            try:
                self.step()
            except Exception as e:  # noqa: BLE001 - kept for the test to see
                self.errors.append(repr(e))

    def step(self):
        """One adaptation; True when it changed the number of workers."""
        asked = self.elapsed()
        current = self.replicas()
        desired = self._http("/api/v1/adaptive_target")["workers"]
        desired = min(self.maximum, max(self.minimum, desired))
        if current > 0:
            desired = max(current - max(int(current * 0.25), 1), desired)
        if desired == current:
            return False
        if desired > current:
            for _ in range(desired - current):
                self.cluster.add_worker()
            what, addresses = f"started {desired - current}", set()
        else:
            retired = self._http("/api/v1/retire_workers", {"n": current - desired})
            names = [info["name"] for info in retired.values()]
            running = self.cluster.running_workers()
            for name in names:
                if name in running:
                    self.cluster.stop_worker(running[name])
            what, addresses = f"retired {names}", set(retired)
        self.history.append((asked, self.replicas(), what, addresses))
        self._stop.wait(self.cooldown)
        return True
