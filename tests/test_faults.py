"""Workers SIGKILLed at every moment of a fit: it loses no sample and reaches the optimum.

The kills are real: ``SIGKILL`` to worker processes of a ``LocalCluster``
(whose nannies restart them), sent by :class:`~faults.FaultyBackend` — a real
:class:`~daskelastic.backends.dask.DaskBackend` that only picks the moment:
while the data loads, while a warm start sets the dual values, while a round
runs, during the gap-only pass, during a chunk move, while released workers
retire, the worker a scale-in kept, two of three.  At every round boundary the invariants hold
(:class:`~cluster_checks.InvariantChecker`), the fit reaches the optimum of
the whole table, and the cluster is left clean and usable.  A worker stopped
for 5 s, a worker joining and the client's connection to the scheduler cut
for a second are tested here at one moment each; ``test_fault_matrix.py``
(slow) crosses every fault with every moment.
"""


import numpy as np
import pytest
from distributed import Client

import daskelastic as de
from daskelastic.driver import Problem, run_cocoa
from daskelastic.losses import loss_code
from daskelastic.objective import lambda_from_C
from daskelastic.placement import make_chunks, split_rows
from daskelastic.targets import TargetEncoder

from cluster_checks import (
    InvariantChecker,
    fit_leftovers,
    fit_through_a_kill,
    live,
    local_cluster,
    wait_for,
)
from faults import MOMENTS, FaultyBackend, fit_with_fault, scheduler_plugins
from tcp_proxy import TcpProxy

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

C = 0.5
N_CHUNKS = 12


#: The moments the default tier kills at (dask input while loading, a round, a
#: warm start, an elastic move); the slow tier kills at every moment, and its
#: fault matrix (test_fault_matrix.py) meets every fault at each of them.  The
#: other tests here keep one case each in the default tier, the rest in slow,
#: to hold the default run on a cold numba cache within CI's budget.
DEFAULT_TIER_MOMENTS = ("loading", "round", "warm-start", "move")


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
@pytest.mark.parametrize("moment", [m if m in DEFAULT_TIER_MOMENTS
                                    else pytest.param(m, marks=pytest.mark.slow)
                                    for m in MOMENTS])
def test_a_fit_survives_a_worker_killed_at_any_moment(flights_6k, flights_6k_optimum, moment,
                                                      seed):
    kind = "dask" if moment in ("loading", "round") and seed == (moment == "round") \
        else "numpy"
    max_iter = 6 if moment == "gap-pass" else 2000
    with local_cluster(3) as cluster, Client(cluster) as client:
        result, backend, check = fit_with_fault(client, flights_6k, "kill", moment, seed=seed,
                                                kind=kind, C=C, n_chunks=N_CHUNKS,
                                                tol=1e-6, max_iter=max_iter)
        killed = backend.hit
        assert killed, f"no kill landed at {moment}"
        lost = {w for e in result.history for ev in e["events"]
                if ev["event"] == "worker_lost" for w in ev["lost"]}
        # a released worker dying while it retires is no loss to the fit
        assert set(killed) <= lost if moment != "retire" else not lost
        assert check.rounds == len(result.history)
        primal, gap = result.objective.primal, result.objective.gap
        # the certificate bounds the true suboptimality, on every row
        assert primal - flights_6k_optimum <= gap + 1e-9 * abs(flights_6k_optimum)
        if moment != "gap-pass":
            assert result.converged
            assert primal - flights_6k_optimum <= 1e-6 * abs(flights_6k_optimum)
        # the cluster is usable (the nannies restarted the killed workers)
        # and the fit left nothing behind on it
        assert wait_for(lambda: len(live(client)) >= 1)
        assert client.submit(sum, [1, 2], pure=False).result() == 3
        assert fit_leftovers(client) == {"state": {}, "keys": [], "records": []}


@pytest.mark.parametrize("fault", ["stop", pytest.param("join", marks=pytest.mark.slow),
                                   pytest.param("drop", marks=pytest.mark.slow)])
def test_a_fit_goes_on_through_a_stopped_worker_a_joiner_and_a_cut_connection(
        flights_6k, flights_6k_optimum, fault):
    """SIGSTOP for 5 s, a worker joining, the client's link to the scheduler cut for
    a second (through a proxy): each while a round runs."""
    with local_cluster(3) as cluster, TcpProxy(cluster.scheduler_address) as proxy, \
            Client(proxy.address, set_as_default=False) as client:
        plugins = scheduler_plugins(client)
        result, backend, check = fit_with_fault(client, flights_6k, fault, "round", C=C,
                                                n_chunks=N_CHUNKS, cluster=cluster,
                                                proxy=proxy, tol=1e-6, max_iter=2000)
        assert backend.hit
        events = {ev["event"] for e in result.history for ev in e["events"]}
        assert events == {"stop": set(), "join": {"join"},
                          "drop": {"connection_lost"}}[fault]
        assert result.converged and check.rounds == len(result.history)
        assert result.objective.primal - flights_6k_optimum <= 1e-6 * abs(flights_6k_optimum)
        assert fit_leftovers(client) == {"state": {}, "keys": [], "records": []}
        assert scheduler_plugins(client) == plugins


@pytest.mark.parametrize("fault", ["kill", pytest.param("drop", marks=pytest.mark.slow)])
def test_rounds_as_tasks_survive_a_kill_and_a_cut_connection(flights_6k, flights_6k_optimum,
                                                             fault):
    """``round-transport: task``: a round task restricted to a dead worker is noticed,
    and the round of a new epoch is a new task (not the cancelled one's result)."""
    with local_cluster(3) as cluster, TcpProxy(cluster.scheduler_address) as proxy, \
            Client(proxy.address, set_as_default=False) as client:
        result, backend, check = fit_with_fault(client, flights_6k, fault, "round", C=C,
                                                n_chunks=N_CHUNKS, proxy=proxy,
                                                transport="task", tol=1e-6, max_iter=2000)
        assert backend.hit and backend.transport == "task"
        assert result.converged and check.rounds == len(result.history)
        assert result.objective.primal - flights_6k_optimum <= 1e-6 * abs(flights_6k_optimum)
        assert fit_leftovers(client) == {"state": {}, "keys": [], "records": []}


def test_a_fit_survives_two_kills_in_a_row(flights_6k, flights_6k_optimum):
    """A second worker dies while the fit recovers from the first."""

    class TwoKills(FaultyBackend):
        def recover(self, lost, **kwargs):
            if len(self.hit) == 1:
                self._inject(sorted(w for w in self.placement if w not in lost)[:1])
            return super().recover(lost, **kwargs)

    with local_cluster(3) as cluster, Client(cluster) as client:
        X, y = flights_6k
        n, d = X.shape
        enc = TargetEncoder(classes=np.unique(y))
        problem = Problem(loss=loss_code("logistic"), lam=lambda_from_C(C, n), n_samples=n,
                          n_features=d, n_targets=1, intercept_scaling=1.0)
        backend = TwoKills(client, problem, "kill", "round")
        Y, sw = enc.encode(y, None)
        backend.load_chunks(make_chunks(X, Y, sw, split_rows(n, n_chunks=N_CHUNKS),
                                        shuffle=0))
        check = InvariantChecker(client, N_CHUNKS, n)
        try:
            result = run_cocoa(backend, problem, tol=1e-6, max_iter=2000, round_hook=check)
        finally:
            backend.close()
    assert len(backend.hit) == 2
    assert result.converged
    assert result.objective.primal - flights_6k_optimum <= 1e-6 * abs(flights_6k_optimum)


@pytest.mark.parametrize("seed", [0] + [pytest.param(s, marks=pytest.mark.slow)
                                         for s in (1, 2)])
def test_an_estimators_fit_survives_a_kill_at_a_random_time(flights_6k, flights_6k_optimum,
                                                            seed):
    """The issue's recipe: a fit in a thread, a data-holding worker killed once
    tasks run, at a seeded moment; the next fit on the cluster works too."""
    X, y = flights_6k
    delay = np.random.default_rng(seed).uniform(0.0, 0.6)
    with local_cluster(3) as cluster, Client(cluster, set_as_default=False) as client:
        clf = fit_through_a_kill(client, lambda: de.LogisticRegression(
            solver="cocoa", C=C, tol=1e-6, max_iter=3000, random_state=0,
            client=client).fit(X, y), delay)
        assert clf.history_[-1]["primal"] - flights_6k_optimum <= 1e-6 * abs(flights_6k_optimum)
        again = de.LogisticRegression(solver="cocoa", penalize_intercept=True,
                                      C=C, tol=1e-6, max_iter=3000, client=client).fit(X, y)
        assert again.history_[-1]["primal"] - flights_6k_optimum <= 1e-6 * abs(flights_6k_optimum)
        assert fit_leftovers(client) == {"state": {}, "keys": [], "records": []}
