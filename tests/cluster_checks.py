"""Helpers of the cluster tests: small LocalClusters, real kills, the invariants at round ends."""

import logging
import os
import signal
import threading
import time

import numpy as np
from distributed import LocalCluster

from daskelastic.backends.dask import scheduler_workers
from daskelastic.driver import ConnectionLost


def flights_rows(n_rows, min_count=20):
    """The first ``n_rows`` real flights, one-hot CSR, the columns seen ``min_count`` times."""
    from daskelastic.datasets import load_flights

    X, y, _ = load_flights(n_rows=n_rows)
    keep = np.asarray((X != 0).sum(axis=0)).ravel() >= min_count
    return X[:, keep].tocsr(), y


def local_cluster(n, **kwargs):
    """A LocalCluster of ``n`` single-threaded worker processes (each under a nanny)."""
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                        dashboard_address=":0", silence_logs=logging.ERROR, **kwargs)


def live(client):
    """The addresses of the scheduler's workers, asked now."""
    return set(scheduler_workers(client))


def wait_for(condition, timeout=20.0):
    """Poll ``condition`` every 0.1 s for up to ``timeout`` seconds; its last value."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def kill(client, workers, sig=signal.SIGKILL):
    """Send ``sig`` to the processes of ``workers`` (their nannies restart killed ones)."""
    pids = client.run(os.getpid, workers=list(workers), on_error="ignore")
    for w in workers:
        os.kill(pids[w], sig)
    return pids


def fit_through_a_kill(client, fit, delay):
    """``fit()`` in a thread, a data-holding worker SIGKILLed ``delay`` seconds in.

    The delay counts from the moment the fit's first keys (load tasks, data,
    actors) are on the workers.  Returns what ``fit`` returned, raises its
    error, and fails when it does not end within 300 s.
    """
    out = {}

    def run():
        try:
            out["result"] = fit()
        except Exception as e:  # noqa: BLE001 - raised in the caller's thread
            out["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    assert wait_for(lambda: any(client.processing().values())
                    or any(client.has_what().values()) or not thread.is_alive(), timeout=60)
    time.sleep(delay)
    holders = [w for w, keys in client.has_what().items() if keys] or sorted(live(client))
    kill(client, holders[:1])
    thread.join(timeout=300)
    assert not thread.is_alive(), "the fit did not end within 300 s of the kill"
    if "error" in out:
        raise out["error"]
    return out["result"]


def fit_leftovers(client, timeout=60.0):
    """What fits left on the cluster: solver state, keys in memory, elastic fit records.

    Released futures leave the scheduler a moment later (the client's releases
    travel batched): this waits up to ``timeout`` seconds for them to go (a bound on
    a hang, not a speed: a loaded machine takes longer).
    """
    wait_for(lambda: not _leftovers(client)["keys"], timeout=timeout)
    return _leftovers(client)


def _leftovers(client):
    from daskelastic.adaptive import PLUGIN_NAME

    state = client.run(lambda dask_worker: sorted(getattr(dask_worker, "_daskelastic_fits",
                                                          {})), on_error="ignore")
    # every key, as the workers hold them and as the scheduler places them:
    # the fit's tasks and actors, and the input it persisted
    keys = sorted({str(k) for ks in client.has_what().values() for k in ks}
                  | {str(k) for k, ws in client.who_has().items() if ws})
    records = client.run_on_scheduler(
        lambda dask_scheduler: sorted(getattr(dask_scheduler.plugins.get(PLUGIN_NAME),
                                              "fits", {})))
    return {"state": {w: s for w, s in state.items() if s}, "keys": keys, "records": records}


def held_anywhere(client, fit_id):
    """``{worker: [chunk ids]}`` of fit ``fit_id`` on every worker of the cluster."""
    def chunks(dask_worker):
        fit = getattr(dask_worker, "_daskelastic_fits", {}).get(fit_id)
        return [] if fit is None or fit.solver is None else fit.solver.chunk_ids
    return client.run(chunks, on_error="ignore")


class InvariantChecker:
    """A ``round_hook`` that checks invariants 1 and 2 at every round boundary.

    1. ``w = Σ α_i x_i / (λn)``: the workers' committed ``α`` give the driver's ``v``;
    2. every chunk lives on exactly one live worker.
    """

    def __init__(self, client, n_chunks, n_rows, action=None):
        self.client = client
        self.n_chunks = n_chunks
        self.n_rows = n_rows
        self.action = action
        self.rounds = 0

    def __call__(self, round_id, w, backend, v, inv_lam_n):
        # nothing changes on the workers while the driver waits here: a
        # connection to the scheduler cut meanwhile is waited for
        end = time.monotonic() + 60
        while True:
            try:
                alpha_sum, held = backend.alpha_sum(), backend.describe()
                break
            except ConnectionLost:
                if time.monotonic() > end:
                    raise
                time.sleep(0.2)
        np.testing.assert_allclose(alpha_sum * inv_lam_n, v, rtol=1e-9, atol=1e-12)
        # no worker outside the placement holds a chunk of the fit either
        outside = {w: c for w, c in held_anywhere(self.client, backend.fit_id).items()
                   if c and w not in held}
        assert not outside, f"chunks held outside the placement: {outside}"
        chunks = [c for d in held.values() for c in d["chunks"]]
        assert sorted(chunks) == list(range(self.n_chunks))
        assert sum(d["rows"] for d in held.values()) == self.n_rows
        assert set(held) <= live(self.client)
        assert {k: d["chunks"] for k, d in held.items()} == backend.placement
        self.rounds += 1
        if self.action is not None:
            self.action(round_id, backend)
