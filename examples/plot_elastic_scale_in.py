"""
Elastic scale-in: fewer workers when more stop paying
=====================================================

CoCoA+ makes the first rounds fast on many workers, but on tables with many
more rows than features each round is worth less the more workers share the
data.  With ``scaling_policy=ConvergenceScalingPolicy()`` (or just
``"convergence"``) the fit watches how fast ``log(gap)`` falls per second;
when that rate deteriorates, it moves the chunks of some workers — with their
dual variables, so ``w`` is unchanged — to the others, and gives the freed
workers back (the policy's ``release_workers=True`` retires them from the
cluster).
"""

import logging

import matplotlib.pyplot as plt
from distributed import Client, LocalCluster

from daskelastic import ConvergenceScalingPolicy, LogisticRegression
from daskelastic.datasets import load_flights

X, y, _ = load_flights(n_rows=6_000)
cluster = LocalCluster(n_workers=4, threads_per_worker=1, processes=False,
                       protocol="tcp://", host="127.0.0.1", dashboard_address="127.0.0.1:0",
                       silence_logs=logging.ERROR)
client = Client(cluster)

fixed = LogisticRegression(C=0.5, tol=1e-6, max_iter=2000, client=client).fit(X, y)
elastic = LogisticRegression(C=0.5, tol=1e-6, max_iter=2000, client=client,
                             scaling_policy=ConvergenceScalingPolicy(release_workers=True)
                             ).fit(X, y)
for name, clf in [("fixed K=4", fixed), ("convergence", elastic)]:
    h = clf.history_
    worker_seconds = sum(e["n_workers"] * (e["time"] - p["time"])
                         for p, e in zip(h, h[1:]))
    print(f"{name:12s} {len(h):4d} rounds, {h[-1]['time']:.2f} s, "
          f"~{worker_seconds:.1f} worker-seconds, primal {h[-1]['primal']:.10f}")
print("workers left in the cluster:", len(client.scheduler_info()["workers"]))

# %%
# The worker count and the duality gap over the elastic fit.
h = elastic.history_
fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.5, 5), sharex=True)
top.step([e["time"] for e in h], [e["n_workers"] for e in h], where="post")
top.set_ylabel("workers")
top.set_yticks(range(1, 5))
bottom.semilogy([e["time"] for e in h], [e["duality_gap"] for e in h], label="convergence")
bottom.semilogy([e["time"] for e in fixed.history_],
                [e["duality_gap"] for e in fixed.history_], label="fixed K=4")
bottom.set_xlabel("seconds")
bottom.set_ylabel("relative duality gap")
bottom.legend()
fig.tight_layout()

client.close()
cluster.close()
