"""Rebalancing on a heterogeneous cluster: one worker 2× slower throughout.

What it measures (issue 5, point 4).  A ``LocalCluster`` of 2 single-threaded
worker processes; the first worker is slowed 2× in every round
(:class:`daskelastic.testing.FixedSlowdown`, the nogil spin used by every
straggler benchmark); the first ``--rows`` rows of the flights table (one-hot
CSR), L2-regularised logistic regression, C = 1, ``straggler_policy="wait"``,
12 chunks per worker, ``--rounds`` rounds (``tol=0``: every fit runs them all).
Two placements:

- ``uniform``: the chunks stay where they were placed (half the rows each);
- ``rebalanced``: ``daskelastic.elastic.rebalance = True`` — after a few
  measured rounds the chunks move, with their ``α``, in proportion to each
  worker's measured throughput (:func:`daskelastic.placement.plan_moves`).

Reported per placement (medians over ``--repeats`` interleaved repeats): the
median round time over the last half of the rounds, the slow worker's share
of the rows at the end next to its share of the measured speed (rows per
solver second; nominally 1/3, lower when the machine is loaded, since the
spin competes for the cores too), the rebalance events, and the round-time
ratio.  Both fits make the same iterates up to the moves'
reordering of chunks (the final objectives are printed next to each other).

Reproduce::

    python benchmarks/bench_rebalance.py                 # 120,000 rows, 3 repeats
    python benchmarks/bench_rebalance.py --rows 30000 --repeats 1   # quick

Writes ``benchmarks/results/rebalance.{txt,csv,json,png}``.
"""

import argparse
import logging
import statistics
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Tee, environment, table, write_results  # noqa: E402

PLACEMENTS = ("uniform", "rebalanced")


def run_one(client, X, y, placement, rounds, seed):
    import dask

    import daskelastic as de
    from daskelastic.testing import FixedSlowdown, inject_stragglers

    clf = de.LogisticRegression(C=1.0, tol=0.0, max_iter=rounds, client=client,
                                straggler_policy="wait", chunks_per_worker=12,
                                random_state=seed)
    with warnings.catch_warnings(), inject_stragglers(FixedSlowdown([0], 2.0)), \
            dask.config.set({"daskelastic.elastic.rebalance": placement == "rebalanced"}):
        warnings.simplefilter("ignore")
        clf.fit(X, y)
    h = clf.history_
    tail = h[len(h) // 2:]
    last = h[-1]
    slow = sorted(last["worker_rows"])[0]          # FixedSlowdown([0]): first address
    share = last["worker_rows"][slow] / sum(last["worker_rows"].values())
    moves = [ev for e in h for ev in e["events"] if ev["event"] == "rebalance"]
    # measured speed (rows per solver second) of each worker over the second half
    speed = {k: statistics.median(e["worker_rows"][k] / e["worker_seconds"][k] for e in tail
                                  if e["worker_seconds"].get(k, 0) > 0 and k in e["worker_rows"])
             for k in last["worker_rows"]}
    return {"placement": placement, "seed": seed,
            "median_round": statistics.median(e["round_seconds"] for e in tail),
            "slow_share": share, "slow_speed_share": speed[slow] / sum(speed.values()),
            "rebalances": len(moves),
            "moved_chunks": sum(ev.get("moves", 0) for ev in moves),
            "time": last["time"], "rounds": len(h), "primal": last["primal"],
            "round_seconds": [e["round_seconds"] for e in h]}


def plot(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.8))
    for placement, color in zip(PLACEMENTS, ("C0", "C3")):
        runs = [r for r in results["runs"] if r["placement"] == placement]
        for i, r in enumerate(runs):
            ax.plot(r["round_seconds"], color=color, alpha=0.7, lw=1,
                    label=placement if i == 0 else None)
    ax.set_xlabel("round")
    ax.set_ylabel("round seconds")
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=120_000)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    log = Tee()
    from distributed import Client, LocalCluster

    import daskelastic as de
    from daskelastic.datasets import load_flights

    X, y, _ = load_flights(n_rows=args.rows)
    env = environment()
    log(f"bench_rebalance: flights {X.shape[0]:,} × {X.shape[1]:,}, logistic C=1, "
        f"{args.rounds} rounds, LocalCluster 2 × 1 thread, worker 0 slowed 2×, "
        f"{args.repeats} interleaved repeats; {env['cpus']} CPUs, "
        f"load {env['loadavg'][0]:.1f}")
    runs = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            de.LogisticRegression(tol=1e-2, max_iter=3, client=client).fit(X[:2000], y[:2000])
        for rep in range(args.repeats):
            for placement in PLACEMENTS:
                r = run_one(client, X, y, placement, args.rounds, rep)
                runs.append(r)
                log(f"  [{rep}] {placement:<10} median round {r['median_round']:.4f} s, "
                    f"slow worker's rows {r['slow_share']:.3f} "
                    f"(speed share {r['slow_speed_share']:.3f}), rebalances {r['rebalances']} "
                    f"({r['moved_chunks']} chunks), {r['time']:.2f} s, "
                    f"primal {r['primal']:.10f}")
    med = {p: {k: statistics.median(r[k] for r in runs if r["placement"] == p)
               for k in ("median_round", "slow_share", "slow_speed_share", "time",
                         "rebalances")}
           for p in PLACEMENTS}
    ratio = med["rebalanced"]["median_round"] / med["uniform"]["median_round"]
    base = med["uniform"]["median_round"]
    rows = [[p, f"{m['median_round']:.4f}", f"{m['median_round'] / base:.2f}",
             f"{m['slow_share']:.3f}", f"{m['slow_speed_share']:.3f}", f"{m['rebalances']:.0f}",
             f"{m['time']:.2f}"]
            for p, m in med.items()]
    log("")
    log(table(rows, ["placement", "median round s", "× uniform", "slow worker's rows",
                     "its speed share", "rebalances", f"{args.rounds} rounds s"]))
    share = med["rebalanced"]["slow_share"]
    speed_share = med["rebalanced"]["slow_speed_share"]
    log(f"\nissue 5, point 4: slow worker's share of rows {share:.3f}, of measured speed "
        f"{speed_share:.3f} (nominal 0.333) -> "
        f"{'about proportional' if abs(share - speed_share) <= 0.05 else 'NOT proportional'}; "
        f"round time rebalanced / uniform = {ratio:.2f} -> "
        f"{'faster' if ratio < 1 else 'NOT faster'}")
    csv_rows = [{"placement": p, **m, "ratio_vs_uniform": m["median_round"]
                 / med["uniform"]["median_round"]} for p, m in med.items()]
    results = {"env": env, "args": vars(args), "runs": runs, "medians": med}
    write_results("rebalance", results, csv_rows, log, plot,
                  f"One worker 2× slower: round times, flights {X.shape[0]:,} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
