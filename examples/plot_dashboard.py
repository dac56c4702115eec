"""
Watching a fit: scheduler events, the dashboard page, stragglers per round
==========================================================================

Fit a logistic regression on 5,000 real flights on a small Dask cluster where,
in a third of the rounds, one worker runs six times slower.  The fit publishes
every round as a scheduler event (topic ``"daskelastic"``) and is drawn live
on the ``/daskelastic`` page of the cluster's dashboard.  Afterwards,
:func:`~daskelastic.history_frame` gives the same rounds as a table: here,
each worker's time from the round's start to its result, and whether the
``"preempt"`` straggler policy stopped it early — the dashboard's straggler
panel.
"""

import logging
from collections import Counter

import matplotlib.pyplot as plt
from distributed import Client, LocalCluster

from daskelastic import LogisticRegression, history_frame
from daskelastic.datasets import load_flights
from daskelastic.monitoring import TOPIC, dashboard_link
from daskelastic.testing import RandomSlowdown, inject_stragglers

X, y, _ = load_flights(n_rows=5_000)
cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp://",
                       host="127.0.0.1", dashboard_address="127.0.0.1:0",
                       silence_logs=logging.ERROR)
client = Client(cluster)

with inject_stragglers(RandomSlowdown(factor=6.0, probability=0.3, seed=1)):
    clf = LogisticRegression(C=0.5, tol=1e-4, straggler_policy="preempt",
                             client=client).fit(X, y)
print(f"{clf.n_iter_[0]} rounds, certified relative gap {clf.duality_gap_:.1e}")
print("watch it at", dashboard_link(client))

# %%
# The events of the fit on the scheduler: a start, the chunks and rows per
# worker, one event per round, and how the fit ended.
events = [msg for _, msg in client.get_events(TOPIC)]
print(Counter(msg["event"] for msg in events))
print("ended:", events[-1]["status"], "after", events[-1]["n_iter"], "rounds")
placement = next(m for m in events if m["event"] == "placement")["placement"]
print("rows per worker:", [p["rows"] for p in placement.values()])

# %%
# Each worker's time per round, coloured by the policy's use of its result.
per_worker = history_frame(clf, per_worker=True)
print(per_worker.groupby("status")["arrival"].describe()[["count", "mean", "max"]])

colours = {"used": "#bcbd22", "dropped": "#d62728", "preempted": "#ff7f0e"}
fig, ax = plt.subplots(figsize=(6.5, 3.5))
for status, rows in per_worker.groupby("status"):
    ax.scatter(rows["round"], rows["arrival"], s=14, color=colours[status], label=status)
ax.set_xlabel("round")
ax.set_yscale("log")
ax.set_ylabel("round start to result (s)")
ax.set_title("Stragglers per round (the dashboard's straggler panel)")
ax.legend()
fig.tight_layout()

client.close()
cluster.close()
