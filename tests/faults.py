"""Faults injected into a real Dask fit at chosen moments, and the fault matrix.

:class:`FaultyBackend` is a real :class:`~daskelastic.backends.dask.DaskBackend`
that only picks the moment of a fault — the load calls sent, the loads done
but not yet published to the scheduler, a warm start's
dual values being set, a round's calls sent, the gap-only pass's calls sent,
before a chunk move, after a release — so the fault lands while that operation
is under way.  The faults are real too: ``SIGKILL`` or ``SIGSTOP`` (5 s) to
worker processes of a ``LocalCluster``, a worker joining it, or the client's
connection to the scheduler cut for a second (through :class:`~tcp_proxy.TcpProxy`).

Run as a script, it prints the fault matrix (fault × moment → outcome, rounds,
relative suboptimality) of fits on the flights table::

    python tests/faults.py --rows 60000
"""

import argparse
import logging
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

import dask.array as da
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from daskelastic.backends.dask import DaskBackend  # noqa: E402
from daskelastic.driver import Problem, run_cocoa  # noqa: E402
from daskelastic.losses import loss_code  # noqa: E402
from daskelastic.objective import lambda_from_C  # noqa: E402
from daskelastic.placement import make_chunks, split_rows  # noqa: E402
from daskelastic.targets import TargetEncoder  # noqa: E402
from daskelastic.testing import ScheduledScaling  # noqa: E402

from cluster_checks import InvariantChecker, fit_leftovers, kill, live  # noqa: E402

#: Seconds a SIGSTOPped worker stays stopped.
STOP_SECONDS = 5.0
#: Seconds the client's connection to the scheduler stays cut.
DROP_SECONDS = 1.0

FAULTS = ("kill", "stop", "join", "drop")

#: Where a fault lands, with the scaling schedule that makes the moment happen.
MOMENTS = {
    "loading": {},
    "loaded": {},
    "warm-start": {},
    "round": {},
    "two-of-three": {},
    "gap-pass": {},
    "move": {"scaling_policy": ScheduledScaling({2: 2}, release_workers=True)},
    "retire": {"scaling_policy": ScheduledScaling({2: 1}, release_workers=True)},
    "kept-worker": {"scaling_policy": ScheduledScaling({2: 1}, release_workers=True)},
}


class FaultyBackend(DaskBackend):
    """A DaskBackend whose fit meets ``fault`` at ``moment`` (see :data:`MOMENTS`).

    ``seed`` picks the round and the victims among the workers that matter
    then (holders of data, a move's source or destination, the released or
    the kept workers).  ``cluster`` is needed for ``"join"``, ``proxy`` (the
    client's link to the scheduler) for ``"drop"``.
    """

    def __init__(self, client, problem, fault, moment, seed=0, cluster=None, proxy=None,
                 transport=None):
        super().__init__(client, problem, transport=transport)
        self.fault = fault
        self.moment = moment
        self.seed = seed
        self.cluster = cluster
        self.proxy = proxy
        self.hit = []        # the victims (or the fault's name, without victims)
        self._timers = []

    # -- the faults -------------------------------------------------------------
    def _inject(self, victims):
        victims = list(victims)
        self.hit.extend(victims or [self.fault])
        if self.fault == "kill":
            kill(self.client, victims)
        elif self.fault == "stop":
            pids = kill(self.client, victims, signal.SIGSTOP)
            timer = threading.Timer(STOP_SECONDS, _resume, ([pids[v] for v in victims],))
            timer.start()
            self._timers.append((timer, [pids[v] for v in victims]))
        elif self.fault == "join":
            self.cluster.scale(len(self.cluster.worker_spec) + 1)
        elif self.fault == "drop":
            self.proxy.drop(DROP_SECONDS)
        else:
            raise ValueError(f"unknown fault {self.fault!r}")

    def resume(self):
        """Wake the stopped workers now (a failed test must not leave them stopped)."""
        for timer, pids in self._timers:
            timer.cancel()
            _resume(pids)

    # -- the moments ------------------------------------------------------------
    def _place_loaded(self, plan, start):
        def started():
            calls = start()
            if self.moment == "loading" and not self.hit:
                targets = sorted(w for w, c in plan.items() if c)
                self._inject([targets[self.seed % len(targets)]])
            return calls
        return super()._place_loaded(plan, started)

    def publish(self, target=None):
        # the first publish ends the load: "loaded" lands between the loads'
        # results and the scheduler hearing of the placement
        if self.moment == "loaded" and not self.hit:
            holders = sorted(self.placement)
            self._inject(holders[self.seed % len(holders):][:1])
        return super().publish(target)

    def start_round(self, round_id, w, settlements, **kwargs):
        holders = sorted(self.placement)
        victims = None
        if self.hit:
            pass
        elif self.moment == "round" and round_id == 1 + self.seed:
            victims = holders[self.seed % len(holders):][:1]
        elif self.moment == "two-of-three" and round_id == 1 + self.seed:
            victims = holders[:2]
        elif self.moment == "gap-pass" and kwargs["steps"] == 0:
            victims = holders[self.seed % len(holders):][:1]
        elif self.moment == "kept-worker" and len(holders) == 1:
            victims = holders
        if victims and self.fault == "kill":
            # stopped before the round is sent and killed after, so the kill
            # lands while their round is under way, not after its results came
            pids = self.client.run(os.getpid, workers=victims)
            for v in victims:
                os.kill(pids[v], signal.SIGSTOP)
            super().start_round(round_id, w, settlements, **kwargs)
            self.hit.extend(victims)
            for v in victims:
                os.kill(pids[v], signal.SIGKILL)
            return
        super().start_round(round_id, w, settlements, **kwargs)
        if victims:
            self._inject(victims)

    def start_duals(self, w, scales=()):
        if self.moment == "warm-start" and not self.hit:
            holders = sorted(self.placement)
            self._inject(holders[self.seed % len(holders):][:1])
        return super().start_duals(w, scales)

    def move_chunks(self, moves):
        if self.moment == "move" and moves and not self.hit:
            _, src, dst = moves[0]
            self._inject([src if self.seed == 0 else dst])
        return super().move_chunks(moves)

    def release(self, workers, retire=False, target=None):
        super().release(workers, retire=retire, target=target)
        if self.moment == "retire" and not self.hit:
            self._inject(list(workers)[self.seed % len(workers):][:1])


def _resume(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def fit_with_fault(client, table, fault, moment, *, seed=0, kind="numpy", C=0.5,
                   n_chunks=12, cluster=None, proxy=None, check=True, transport=None,
                   **kwargs):
    """``run_cocoa`` of logistic regression on ``table``, meeting ``fault`` at ``moment``.

    Returns ``(result, backend, checker)``; ``checker`` checked the invariants
    at every round boundary (with ``check``).
    """
    X, y = table
    n, d = X.shape
    enc = TargetEncoder(classes=np.unique(y))
    problem = Problem(loss=loss_code("logistic"), lam=lambda_from_C(C, n), n_samples=n,
                      n_features=d, n_targets=1, intercept_scaling=1.0)
    backend = FaultyBackend(client, problem, fault, moment, seed, cluster=cluster,
                            proxy=proxy, transport=transport)
    checker = InvariantChecker(client, n_chunks, n) if check else None
    try:
        if kind == "numpy":
            Y, sw = enc.encode(y, None)
            backend.load_chunks(make_chunks(X, Y, sw, split_rows(n, n_chunks=n_chunks),
                                            shuffle=0))
        else:
            rows = -(-n // n_chunks)
            backend.load_dask(da.from_array(X, chunks=(rows, -1), asarray=False),
                              da.from_array(y, chunks=rows), None, enc)
        if moment == "warm-start":
            # the dual values of the margins of w = 0: α = y/2, not 0
            kwargs.setdefault("w_start", problem.zeros())
        result = run_cocoa(backend, problem, round_hook=checker, **{**MOMENTS[moment],
                                                                    **kwargs})
    finally:
        backend.resume()
        backend.close()
    return result, backend, checker


def scheduler_plugins(client):
    """The names of the scheduler's plugins."""
    return sorted(client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.plugins)))


def run_cell(table, optimum, fault, moment, *, timeout=300.0, tol=1e-6, seed=0, check=True):
    """One cell of the matrix on a fresh 3-worker cluster; a dict of what happened.

    The fit runs in a thread, and a fit still running after ``timeout``
    seconds is reported as ``"HANG"``; with ``check``, the invariants are
    checked at every round boundary (a failed check is an error).
    """
    from distributed import Client, LocalCluster

    from tcp_proxy import TcpProxy

    out = {"fault": fault, "moment": moment}
    with LocalCluster(n_workers=3, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.CRITICAL) as cluster, \
            TcpProxy(cluster.scheduler_address) as proxy, \
            Client(proxy.address, set_as_default=False) as client:
        plugins = scheduler_plugins(client)
        box = {}

        def fit():
            try:
                box["result"] = fit_with_fault(
                    client, table, fault, moment, seed=seed, cluster=cluster, proxy=proxy,
                    check=check, tol=tol, max_iter=6 if moment == "gap-pass" else 3000)
            except BaseException as e:  # noqa: BLE001 - reported in the table
                box["error"] = e
                box["traceback"] = traceback.format_exc()

        t0 = time.perf_counter()
        thread = threading.Thread(target=fit, daemon=True)
        thread.start()
        thread.join(timeout)
        out["seconds"] = time.perf_counter() - t0
        if thread.is_alive():
            out["outcome"] = "HANG"
            return out
        if "error" in box:
            out["outcome"] = f"error: {type(box['error']).__name__}: {box['error']}"
            out["traceback"] = box["traceback"]
            return out
        result, backend, _ = box["result"]
        out["hit"] = bool(backend.hit)
        out["rounds"] = len(result.history)
        out["events"] = sorted({ev["event"] for e in result.history for ev in e["events"]})
        out["suboptimality"] = (result.objective.primal - optimum) / abs(optimum)
        out["gap"] = result.objective.gap / abs(optimum)   # the same scale as the above
        out["outcome"] = "converged" if result.converged else "max_iter (certified)"
        wait_for_workers = time.monotonic() + 30
        while time.monotonic() < wait_for_workers:
            try:      # the client may still be reconnecting after a drop
                if client.status == "running" and live(client):
                    break
            except OSError:
                pass
            time.sleep(0.1)
        out["clean"] = (fit_leftovers(client) == {"state": {}, "keys": [], "records": []}
                        and scheduler_plugins(client) == plugins)
    return out


def main(argv=None):
    import daskelastic as de
    from daskelastic.datasets import load_flights

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=60000, help="flights rows (max 327346)")
    parser.add_argument("--faults", default=",".join(FAULTS))
    parser.add_argument("--moments", default="loading,loaded,round,two-of-three,gap-pass,move,"
                                               "retire,kept-worker")
    args = parser.parse_args(argv)
    X, y, _ = load_flights(n_rows=args.rows)
    keep = np.asarray((X != 0).sum(axis=0)).ravel() > 0
    table = (X[:, keep].tocsr(), y)
    optimum = de.LogisticRegression(C=0.5, penalize_intercept=True, tol=1e-10,
                                    max_iter=10000, backend="inprocess") \
        .fit(*table).history_[-1]["primal"]
    print(f"flights, {table[0].shape[0]:,} rows x {table[0].shape[1]:,} one-hot columns; "
          f"logistic regression, C = 0.5, tol = 1e-6, 3 worker processes")
    print("| fault | moment | outcome | rounds | (P - P*) / P* | (P - D) / P* | events | clean "
          "| s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for fault in args.faults.split(","):
        for moment in args.moments.split(","):
            r = run_cell(table, optimum, fault, moment)
            outcome = r["outcome"] + ("" if r.get("hit", True) else " (the fault did not land)")
            numbers = (f"{r['rounds']} | {r['suboptimality']:.1e} | {r['gap']:.1e}"
                       if "gap" in r else " | | ")
            print(f"| {fault} | {moment} | {outcome} | {numbers} | "
                  f"{', '.join(r.get('events', []))} | {r.get('clean', '')} | "
                  f"{r['seconds']:.1f} |", flush=True)

if __name__ == "__main__":
    main()
