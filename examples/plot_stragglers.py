"""
Stragglers: four policies on a cluster with one slow worker per round
=====================================================================

Every round, one random worker of a small Dask cluster runs four times slower
(:class:`~daskelastic.testing.RandomSlowdown`, seeded).  The same logistic
regression on 20,000 real flights is fitted with each straggler policy:

- ``"wait"`` waits for every worker, so every round lasts as long as the
  straggler's;
- ``"backup"`` uses the fastest ``K − 1`` results and drops the straggler's;
- ``"dynamic"`` chooses the number of backup workers every round;
- ``"preempt"`` stops the straggler once half of the workers are done (plus
  20% of their compute time) and keeps the work it did.

All four reach the same certified optimum; they differ in how long it takes.
"""

import logging

import matplotlib.pyplot as plt
from distributed import Client, LocalCluster

from daskelastic import LogisticRegression
from daskelastic.datasets import load_flights
from daskelastic.testing import RandomSlowdown, inject_stragglers

X, y, _ = load_flights(n_rows=20_000)
cluster = LocalCluster(n_workers=4, threads_per_worker=1, processes=False,
                       protocol="tcp://", host="127.0.0.1", dashboard_address="127.0.0.1:0",
                       silence_logs=logging.ERROR)
client = Client(cluster)

fits = {}
for policy in ["wait", "backup", "dynamic", "preempt"]:
    with inject_stragglers(RandomSlowdown(factor=4.0, seed=0)):
        # (the penalised intercept: a free one on sparse one-hot columns crawls)
        fits[policy] = LogisticRegression(C=0.5, tol=1e-4, straggler_policy=policy,
                                          penalize_intercept=True, client=client).fit(X, y)
    h = fits[policy].history_
    print(f"{policy:8s} {len(h):4d} rounds in {h[-1]['time']:5.2f} s, "
          f"gap {fits[policy].duality_gap_:.1e}, primal {h[-1]['primal']:.8f}, "
          f"dropped {sum(e['n_dropped'] for e in h)}, "
          f"preempted {sum(e['n_preempted'] for e in h)}")

# %%
# The duality gap against time: waiting for the straggler makes every round
# long; the other policies cut it short.
fig, ax = plt.subplots(figsize=(6.5, 3.8))
for policy, clf in fits.items():
    ax.semilogy([e["time"] for e in clf.history_], [e["duality_gap"] for e in clf.history_],
                label=policy)
ax.set_xlabel("seconds")
ax.set_ylabel("relative duality gap")
ax.set_title("one worker in four 4x slower every round")
ax.legend()
fig.tight_layout()

# %%
# Round by round, ``"preempt"`` records which worker it stopped, and when.
last = fits["preempt"].history_[3]
print("worker status in round 3:", last["worker_status"])
print("stragglers stopped at", None if last["cut"] is None else f"{last['cut']:.3f} s")

client.close()
cluster.close()
