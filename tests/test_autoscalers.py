"""Autoscalers that shrink an idle cluster, then follow an elastic fit.

Two kinds, as users deploy them: one that works through the scheduler
(the dask-kubernetes operator's loop, emulated in :mod:`autoscalers` against
``dask scheduler`` / ``dask worker`` processes), and ``cluster.adapt`` with
:class:`~daskelastic.ElasticAdaptive` on a ``LocalCluster``.  Each idles
first, so the cluster is scaled down before the fit: the fit must ask for
its workers back, start on them, scale in on its convergence signal with the
cluster really shrinking, lose no chunk holder and reach the optimum.
"""

import json
import urllib.request

import pytest
from autoscalers import OperatorLoop
from cli_cluster import CliCluster
from distributed import Client

import daskelastic as de
from daskelastic.adaptive import elastic_state

from cluster_checks import flights_rows, live, local_cluster, wait_for

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

#: The scheduler's HTTP routes with the API the operator uses (its scheduler
#: pods set the same configuration)
ROUTES = ["distributed.http.scheduler.prometheus", "distributed.http.scheduler.info",
          "distributed.http.scheduler.json", "distributed.http.health",
          "distributed.http.proxy", "distributed.http.statics",
          "distributed.http.scheduler.api"]

C = 20.0


@pytest.fixture(scope="module")
def table():
    """150,000 real flights, one-hot CSR: a fit long enough for an autoscaler to act in."""
    return flights_rows(150_000)


@pytest.fixture(scope="module")
def optimum(table):
    ref = de.LogisticRegression(
        penalize_intercept=True, C=C, tol=1e-10, max_iter=5000, backend="inprocess")
    return ref.fit(*table).history_[-1]["primal"]


def _elastic_fit(client, table):
    # release_workers="auto": the autoscaler, not the fit, retires the
    # workers let go (a pod whose worker the fit closed would be restarted)
    return de.LogisticRegression(
        penalize_intercept=True, C=C, tol=1e-8, max_iter=3000, client=client,
                                 scaling_policy="convergence").fit(*table)


def _check_fit(clf, optimum):
    """Started on 3 or 4 workers, scaled in, lost no worker, reached the optimum."""
    counts = [e["n_workers"] for e in clf.history_]
    events = [ev for e in clf.history_ for ev in e["events"]]
    when = [(e["round"], round(e["time"], 1), ev["event"])
            for e in clf.history_ for ev in e["events"]]
    print(f"K path {[k for i, k in enumerate(counts) if i == 0 or k != counts[i - 1]]} "
          f"over {len(counts)} rounds; events (round, seconds, event) {when}")
    assert counts[0] >= 3, f"the fit started on {counts[0]} workers"
    assert counts[-1] < counts[0], f"no scale-in: {counts}"
    assert any(ev["event"] == "scale_in" for ev in events)
    assert not [ev for ev in events if ev["event"] == "worker_lost"]
    assert clf.duality_gap_ <= 1e-8
    assert clf.history_[-1]["primal"] == pytest.approx(optimum, rel=1e-6)
    return counts


@pytest.mark.slow
def test_an_operator_style_autoscaler_gives_the_fit_its_workers_and_takes_the_released(
        table, optimum, tmp_path):
    env = {"DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES": json.dumps(ROUTES)}
    with CliCluster(tmp_path, n_workers=4, scheduler_env=env,
                    preload="daskelastic.adaptive") as cluster, \
            Client(cluster.address) as client:
        client.wait_for_workers(4, timeout=60)
        with OperatorLoop(cluster, minimum=1, maximum=4, interval=0.25,
                          cooldown=0.5) as operator:
            # idle: the operator scales the cluster down a quarter at a time
            assert wait_for(lambda: len(live(client)) == 1, timeout=60), operator.history
            before_fit, fit_start = len(operator.history), operator.elapsed()
            clf = _elastic_fit(client, table)
            fit_end = operator.elapsed()
            # (a step that retired workers is recorded once their processes ended)
            assert wait_for(lambda: len(operator.history) > before_fit + 1
                            and operator.history[-1][1] <= clf.history_[-1]["n_workers"],
                            timeout=60)
            during_fit = operator.history[before_fit:]
        print(f"operator: before the fit {operator.history[:before_fit]}; during {during_fit}; "
              f"the fit ended at {fit_end:.1f} s")
        assert not operator.errors
        counts = _check_fit(clf, optimum)
        assert [h for h in during_fit if h[2].startswith("started")], during_fit
        # while the fit ran, the operator retired workers the fit let go, and
        # their processes ended: the cluster shrank under the fit
        released = {w for e in clf.history_ for ev in e["events"]
                    if ev["event"] == "scale_in" for w in ev["released"]}
        shrinking = [h for h in during_fit if fit_start < h[0] < fit_end and h[3]]
        assert released and shrinking, during_fit
        assert min(h[1] for h in shrinking) < counts[0]
        assert set().union(*[h[3] for h in shrinking]) <= released
        with urllib.request.urlopen(cluster.http_address + "/api/v1/adaptive_target") as r:
            # with the fit over, the scheduler answers with Dask's own target again
            assert json.loads(r.read())["workers"] <= len(live(client))
        assert elastic_state(client)["fits"] == {}


@pytest.mark.slow
def test_elastic_adaptive_after_an_idle_period_gives_the_fit_its_workers(table, optimum):
    with local_cluster(4) as cluster, Client(cluster) as client:
        cluster.adapt(Adaptive=de.ElasticAdaptive, minimum=1, maximum=4, interval="200ms",
                      wait_count=2)
        assert wait_for(lambda: len(live(client)) == 1, timeout=60)
        clf = _elastic_fit(client, table)
        counts = _check_fit(clf, optimum)
        assert wait_for(lambda: len(live(client)) <= counts[-1], timeout=30)


@pytest.mark.filterwarnings("ignore:n_workers=3, but the cluster has 2 workers")
def test_the_scheduler_answers_autoscalers_with_the_fits_target(table):
    """``Scheduler.adaptive_target`` over RPC and in the scheduler, and
    ``workers_to_close``, answer for a running fit, and are Dask's again after it.

    The fit wants 3 workers of a cluster of 2: it asks for the third.
    """
    import threading

    X, y = table
    seen = {}
    with local_cluster(2) as cluster, Client(cluster) as client:
        clf = de.LogisticRegression(
            penalize_intercept=True, C=C, tol=1e-12, max_iter=400, n_workers=3,
                                    client=client, scaling_policy="convergence")
        fit = threading.Thread(target=clf.fit, args=(X, y))
        fit.start()
        try:
            assert wait_for(lambda: elastic_state(client)["holders"], timeout=60)
            seen["in_scheduler"] = client.run_on_scheduler(
                lambda dask_scheduler: dask_scheduler.adaptive_target())
            seen["rpc"] = client.sync(client.scheduler.adaptive_target)
            seen["to_close"] = client.run_on_scheduler(
                lambda dask_scheduler: dask_scheduler.workers_to_close(n=2))
            seen["holders"] = elastic_state(client)["holders"]
        finally:
            fit.join(timeout=300)
        assert seen["in_scheduler"] == 3 and seen["rpc"] == 3
        assert not set(seen["to_close"]) & set(seen["holders"])
        # with no fit, Dask's own answer again (the plugin stays while an
        # autoscaler asks, as the calls above did)
        assert client.run_on_scheduler(
            lambda dask_scheduler: dask_scheduler.adaptive_target()
            == type(dask_scheduler).adaptive_target(dask_scheduler))
