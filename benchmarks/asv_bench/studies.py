"""The straggler and elastic studies on the simulated cluster, as tracked numbers.

The settings of ``benchmarks/bench_simulated.py`` and
``benchmarks/bench_simulated_elastic.py`` on a smaller problem: L2 logistic
regression (C = 1, daskelastic's defaults otherwise) on the first 20,000
flights, fitted with ``daskelastic.simulate`` — the real driver, policies and
solvers on a virtual clock — until the certified relative duality gap is at
most 1e-3.  The workers check the stop flag every 64 steps (a worker holds
625 rows: at the default 1,024 a preempted worker could not stop before its
epoch ends).  The compute rate is fixed (1.5e-7 s per stored value, the
committed studies' rate) and the straggler models are seeded, so every
number here is the same on any machine: a change is a change of the
algorithm, not of the machine's speed.  The fits run once, in
``setup_cache``; each ``track_`` reads one number off them (NaN for a fit
that missed the target in ``MAX_ROUNDS`` rounds).
"""

import math
import warnings

from ._data import flights

TOL = 1e-3
C = 1.0
RATE = 1.5e-7
MAX_ROUNDS = 150
#: virtual workers of the straggler study, and the elastic study's start
WORKERS = 32
POLICIES = ["wait", "backup", "dynamic", "preempt"]
STRAGGLERS = ["random", "heavy"]
ELASTIC = ["fixed K", "fixed K/2", "convergence"]


def cluster(n_workers, stragglers=None):
    """The studies' :class:`~daskelastic.ClusterModel` on ``n_workers`` virtual workers."""
    from daskelastic import ClusterModel
    from daskelastic.testing import HeavyTailSlowdown, RandomSlowdown

    models = {None: None,
              "random": RandomSlowdown(factor=4.0, seed=1),
              "heavy": HeavyTailSlowdown(shape=1.5, cap=50.0, seed=1)}
    return ClusterModel(n_workers=n_workers, seconds_per_nnz=RATE,
                        stragglers=models[stragglers], latency=5e-4, bandwidth=1.25e9,
                        overhead=1e-3, price=1.0, stop_check_every=64)


def to_target(n_workers, stragglers=None, **params):
    """``{"seconds", "rounds", "cost", "workers"}`` of one simulated fit when it met ``TOL``."""
    from daskelastic import LogisticRegression, simulate

    X, y = flights()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # a fit capped at MAX_ROUNDS
        model = simulate(LogisticRegression(C=C, tol=TOL, max_iter=MAX_ROUNDS,
                                            random_state=0),
                         X, y, cluster(n_workers, stragglers), **params)
    hit = next((e for e in model.history_ if e["duality_gap"] <= TOL), None)
    if hit is None:
        return dict.fromkeys(("seconds", "rounds", "cost", "workers"), math.nan)
    return {"seconds": hit["time"], "rounds": hit["round"], "cost": hit["cost"],
            "workers": hit["n_workers"]}


class Stragglers:
    """Each straggler policy (``backup`` with b = 1) on 32 virtual workers, per straggler model."""

    params = (STRAGGLERS, POLICIES)
    param_names = ["stragglers", "policy"]
    timeout = 600.0

    def setup_cache(self):
        # "backup" is one backup worker
        return {(s, p): to_target(WORKERS, s, straggler_policy=p)
                for s in STRAGGLERS for p in POLICIES}

    def track_virtual_seconds(self, fits, stragglers, policy):
        return fits[stragglers, policy]["seconds"]

    track_virtual_seconds.unit = "virtual s"

    def track_rounds(self, fits, stragglers, policy):
        return fits[stragglers, policy]["rounds"]

    track_rounds.unit = "rounds"

    def track_cost(self, fits, stragglers, policy):
        return fits[stragglers, policy]["cost"]

    track_cost.unit = "worker-s"


class ElasticScaleIn:
    """Fixed K = 32 and 16 virtual workers against ``scaling_policy="convergence"`` from 32."""

    params = ELASTIC
    param_names = ["workers"]
    timeout = 600.0

    def setup_cache(self):
        return {"fixed K": to_target(WORKERS),
                "fixed K/2": to_target(WORKERS // 2),
                "convergence": to_target(WORKERS, scaling_policy="convergence")}

    def track_virtual_seconds(self, fits, workers):
        return fits[workers]["seconds"]

    track_virtual_seconds.unit = "virtual s"

    def track_cost(self, fits, workers):
        return fits[workers]["cost"]

    track_cost.unit = "worker-s"

    def track_rounds(self, fits, workers):
        return fits[workers]["rounds"]

    track_rounds.unit = "rounds"

    def track_workers_at_target(self, fits, workers):
        return fits[workers]["workers"]

    track_workers_at_target.unit = "workers"
