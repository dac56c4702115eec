"""Worker memory and time per round on a wide hashed-feature table, against dask-ml and snapml.

The table is made as click-through-rate pipelines make theirs: the flights
one-hot rows (327,346 × 4,198, 7 non-zeros a row), every pair of a row's
active columns hashed into 2^18 more (``daskelastic.datasets.cross_features``,
Vowpal Wabbit's ``-q``; 28 non-zeros a row, 266,342 columns), the rows
replicated ``--replicas`` times (8 gives the 2.6 M rows of the issue,
``--full``).  The base table is scattered to the workers once, and each row
block (a quarter of the base rows) is built on a worker from it: the input
is a dask array of CSR blocks that only exists on the workers.

For each case a fresh ``LocalCluster(n_workers=2, threads_per_worker=1,
memory_limit="8GB")`` runs a small warm-up fit (numba's kernels load), then
the measured fit while ``daskelastic.testing.sample_worker_memory`` samples
each worker's resident memory every 50 ms.  Printed per worker: the peak
growth over the fit's start, the bytes of data it holds, and their ratio.

Cases:

- daskelastic on the CSR blocks (``LogisticRegression(C=1)``, ``--rounds``
  rounds at ``tol=0``): held = the bytes its solver holds (rows, targets,
  weights, α).  Also the per-round seconds (median over the rounds after the
  first), and a round's parts from ``history_``: the local solver's
  seconds on the slowest worker (``worker_seconds``; its thread's CPU
  seconds, ``worker_cpu_seconds``, which other jobs on the machine move
  less than wall time) and the rest of the
  round (``w`` out, ``Δw`` back, the driver's aggregation and gap), and the
  worker's garbage-collector pauses over the whole fit (``gc_ms``).
- daskelastic on dense blocks (the base table's first 120 columns, dense).
- daskelastic on a Parquet directory of the narrow flights columns (month,
  hour and distance; carrier and origin as categories) replicated as above,
  read by the workers (``dd.read_parquet``).
- dask-ml ``LogisticRegression(solver="lbfgs", max_iter=--dask-ml-iter)`` on
  the same CSR blocks as pydata-sparse COO (the format dask-glm supports):
  held = the bytes of its persisted input blocks on the worker.
- ``--sizes``: daskelastic's per-round time at ``--replicas`` and at twice as
  many (the ratio should be ≤ 2.2 for time linear in rows), and snapml's
  ``LogisticRegression(dual=True, n_jobs=2)`` fit of the same rows in this
  process (``max_iter=--rounds``), beside the 2-worker fit's time.

Run: ``python benchmarks/bench_memory.py`` (about 3 minutes at the default
``--replicas 2`` on a 2-core machine); ``--full`` for 2.6 M rows.  Writes
``results/bench_memory.{txt,csv}``.
"""

import argparse
import csv
import gc
import logging
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from _common import RESULTS, start_log, table

QUARTERS = 4


def crossed_blocks(client, X, y, replicas, dense_columns=None):
    """A dask array of CSR (or dense) row blocks, each built on a worker from the base rows."""
    import dask
    import dask.array as da

    from daskelastic.datasets import cross_features

    base = client.scatter((X, y), broadcast=True)
    cuts = np.linspace(0, X.shape[0], QUARTERS + 1).astype(int)
    if dense_columns is None:
        width, meta = X.shape[1] + (1 << 18), sp.csr_matrix((0, X.shape[1] + (1 << 18)))

        def rows(table, q):
            return cross_features(table[0][cuts[q]:cuts[q + 1]])
    else:
        width, meta = dense_columns, np.zeros((0, dense_columns))

        def rows(table, q):
            return table[0][cuts[q]:cuts[q + 1], :dense_columns].toarray()

    def labels(table, q):
        return table[1][cuts[q]:cuts[q + 1]]

    Xb, yb = [], []
    for i in range(QUARTERS * replicas):
        q = i % QUARTERS
        n = int(cuts[q + 1] - cuts[q])
        Xb.append(da.from_delayed(dask.delayed(rows)(base, q), (n, width), meta=meta))
        yb.append(da.from_delayed(dask.delayed(labels)(base, q), (n,), dtype=y.dtype))
    return da.concatenate(Xb), da.concatenate(yb)


def narrow_parquet(directory, replicas):
    """The narrow flights table (categories and numbers, a 0/1 ``late``), ``replicas`` files."""
    import pandas as pd

    from daskelastic.datasets import _rdata

    df = _rdata("nycflights13", "flights")
    df = df[df["arr_delay"].notna()]
    frame = pd.DataFrame({
        "month": df["month"].astype(float).to_numpy(), "hour": df["hour"].astype(float).to_numpy(),
        "distance": df["distance"].astype(float).to_numpy() / 1000.0,
        "carrier": pd.Categorical(df["carrier"]), "origin": pd.Categorical(df["origin"]),
        "late": (df["arr_delay"].to_numpy() > 15).astype(np.int64)})
    directory.mkdir(parents=True, exist_ok=True)
    for r in range(replicas):
        frame.to_parquet(directory / f"part.{r}.parquet")
    return directory


def new_cluster():
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           memory_limit="8GB", dashboard_address=":0",
                           silence_logs=logging.ERROR)
    return cluster, Client(cluster)


def warm_up(client, X, y):
    from daskelastic import LogisticRegression

    LogisticRegression(client=client, max_iter=2).fit(X, y)
    client.run(gc.collect)


def round_profile(history):
    """Median seconds of a round, of its slowest local solver, and the rest (rounds 2+)."""
    rounds = history[1:] or history
    total = statistics.median(h["round_seconds"] for h in rounds)
    solver = statistics.median(max(h["worker_seconds"].values()) for h in rounds)
    cpu = statistics.median(max(h["worker_cpu_seconds"].values()) for h in rounds)
    return total, solver, total - solver, cpu


def _count_gc(dask_worker=None):
    """Add up the pauses of Python's garbage collector in this process from now on."""
    stats = {"collections": 0, "seconds": 0.0, "start": 0.0}

    def callback(phase, info):
        if phase == "start":
            stats["start"] = time.perf_counter()
        else:
            stats["collections"] += 1
            stats["seconds"] += time.perf_counter() - stats["start"]

    gc.callbacks.append(callback)
    dask_worker._bench_memory_gc = (stats, callback)


def _gc_seconds(dask_worker=None):
    stats, callback = dask_worker._bench_memory_gc
    gc.callbacks.remove(callback)
    return stats["seconds"]


def fit_daskelastic(client, X, y, rounds):
    from daskelastic import LogisticRegression
    from daskelastic.testing import sample_worker_memory

    with sample_worker_memory(client) as memory, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        clf = LogisticRegression(client=client, C=1.0, max_iter=rounds, tol=0.0).fit(X, y)
        seconds = time.perf_counter() - t0
    return clf, memory, seconds


def memory_rows(case, memory, seconds, extra=None):
    out = []
    for worker in sorted(memory):
        m = memory[worker]
        out.append({"case": case, "worker": worker.rsplit(":", 1)[-1],
                    "held_MB": round(m["held"] / 1e6), "start_MB": round(m["start"] / 1e6),
                    "peak_growth_MB": round(memory.growth(worker) / 1e6),
                    "growth_over_held": round(memory.ratio(worker), 2),
                    "fit_s": round(seconds, 1), **(extra or {})})
    return out


def case_csr(log, base, replicas, rounds):
    cluster, client = new_cluster()
    try:
        X, y = crossed_blocks(client, *base, replicas)
        warm_up(client, X.blocks[0].compute()[:4000], y.blocks[0].compute()[:4000])
        client.run(_count_gc)
        clf, memory, seconds = fit_daskelastic(client, X, y, rounds)
        gc_seconds = client.run(_gc_seconds)
        total, solver, rest, cpu = round_profile(clf.history_)
        rounds_s = sum(h["round_seconds"] for h in clf.history_)
        rows = memory_rows(f"daskelastic csr ×{replicas}", memory, seconds, {
            "rows": X.shape[0], "round_s": round(total, 3), "solver_s": round(solver, 3),
            "solver_cpu_s": round(cpu, 3), "rest_s": round(rest, 3),
            "rounds_s": round(rounds_s, 1)})
        for row, worker in zip(rows, sorted(memory)):
            row["gc_ms"] = round(1e3 * gc_seconds[worker])
        log(f"  csr ×{replicas}: {X.shape[0]:,} rows, {seconds:.1f} s, round {total:.3f} s "
            f"(solver {solver:.3f} s, rest {rest:.3f} s)")
        return rows
    finally:
        client.close()
        cluster.close()


def case_dense(log, base, replicas, rounds):
    cluster, client = new_cluster()
    try:
        X, y = crossed_blocks(client, *base, replicas, dense_columns=120)
        warm_up(client, X.blocks[0].compute()[:4000], y.blocks[0].compute()[:4000])
        clf, memory, seconds = fit_daskelastic(client, X, y, rounds)
        return memory_rows(f"daskelastic dense ×{replicas}", memory, seconds,
                           {"rows": X.shape[0]})
    finally:
        client.close()
        cluster.close()


def case_parquet(log, replicas, rounds, directory):
    import dask.dataframe as dd

    cluster, client = new_cluster()
    try:
        path = narrow_parquet(directory, replicas)
        ddf = dd.read_parquet(str(path))
        head = ddf.head(4000)
        warm_up(client, head.drop(columns="late"), head["late"])
        clf, memory, seconds = fit_daskelastic(client, ddf.drop(columns="late"), ddf["late"],
                                               rounds)
        return memory_rows(f"daskelastic parquet ×{replicas}", memory, seconds,
                           {"rows": sum(clf.history_[-1]["worker_rows"].values())})
    finally:
        client.close()
        cluster.close()


def case_dask_ml(log, base, replicas, iters):
    import sparse
    from dask_ml.linear_model import LogisticRegression

    from daskelastic.testing import WorkerMemory, sample_worker_memory

    cluster, client = new_cluster()
    try:
        X, y = crossed_blocks(client, *base, replicas)
        X = X.map_blocks(sparse.COO.from_scipy_sparse, dtype=np.float64,
                         meta=sparse.COO.from_numpy(np.zeros((0, X.shape[1]))))
        y = y.astype(np.float64)
        small = X.blocks[0][:2000], y.blocks[0][:2000]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            LogisticRegression(solver="lbfgs", max_iter=2, C=1.0, fit_intercept=False,
                               solver_kwargs={"normalize": False}).fit(*small)
        client.run(gc.collect)
        with sample_worker_memory(client) as memory, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Xp, yp = client.persist([X, y])
            t0 = time.perf_counter()
            LogisticRegression(solver="lbfgs", max_iter=iters, C=1.0, fit_intercept=False,
                               solver_kwargs={"normalize": False}).fit(Xp, yp)
            seconds = time.perf_counter() - t0
            held = client.run(_data_bytes)
        memory = WorkerMemory({w: dict(m, held=held[w]) for w, m in memory.items()})
        return memory_rows(f"dask-ml lbfgs ×{replicas} ({iters} it)", memory, seconds,
                           {"rows": X.shape[0]})
    finally:
        client.close()
        cluster.close()


def _data_bytes(dask_worker=None):
    """Bytes of the data a worker holds for dask (its input blocks)."""
    from dask.sizeof import sizeof

    return int(sum(sizeof(v) for v in list(dask_worker.data.values())))


def case_snapml(log, base, replicas, rounds):
    import snapml

    from daskelastic.datasets import cross_features

    X, y = base
    Xc = sp.vstack([cross_features(X)] * replicas, format="csr")
    yy = np.tile(y, replicas)
    t0 = time.perf_counter()
    snapml.LogisticRegression(dual=True, n_jobs=2, regularizer=1.0, max_iter=rounds,
                              tol=0.0, fit_intercept=False).fit(Xc, yy)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--full", action="store_true", help="8 replicas: 2.6 M rows")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--dask-ml-iter", type=int, default=5)
    ap.add_argument("--cases", default="csr,dense,parquet,dask-ml",
                    help="comma-separated subset of csr,dense,parquet,dask-ml")
    ap.add_argument("--sizes", action="store_true",
                    help="also time rounds at twice --replicas, and snapml at both sizes")
    ap.add_argument("--name", default="bench_memory")
    args = ap.parse_args()
    replicas = 8 if args.full else args.replicas
    cases = args.cases.split(",")
    log, env = start_log(args.name)
    log("(measured on a shared, loaded machine: times are indicative, ratios within a run)")
    from daskelastic.datasets import load_flights

    X, y, _ = load_flights()
    X.sort_indices()
    base = (X, y)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            log(f"case {case} ×{replicas}")
            if case == "csr":
                rows += case_csr(log, base, replicas, args.rounds)
            elif case == "dense":
                rows += case_dense(log, base, replicas, args.rounds)
            elif case == "parquet":
                rows += case_parquet(log, replicas, args.rounds, Path(tmp) / "flights")
            elif case == "dask-ml":
                try:
                    rows += case_dask_ml(log, base, replicas, args.dask_ml_iter)
                except ImportError as e:
                    log(f"  dask-ml not installed ({e}); skipped")
                except Exception as e:  # noqa: BLE001 - a peer's failure keeps our numbers
                    log(f"  dask-ml failed: {type(e).__name__}: {str(e)[:200]}")
        sizes = []
        if args.sizes:
            for r in (replicas, 2 * replicas):
                got = [row for row in rows if row["case"] == f"daskelastic csr ×{r}"]
                if not got:
                    got = case_csr(log, base, r, args.rounds)
                    rows += got
                try:
                    snap = case_snapml(log, base, r, args.rounds)
                except ImportError:
                    snap = float("nan")
                sizes.append((r, got[0]["rows"], got[0]["round_s"], got[0]["solver_cpu_s"],
                              got[0]["rounds_s"], got[0]["fit_s"], snap))
    headers = list(rows[0])
    log("")
    log(table([[str(r.get(h, "")) for h in headers] for r in rows], headers))
    if sizes:
        log("")
        log(table([[f"×{r}", f"{n:,}", f"{rs:.3f}", f"{cs:.3f}", f"{ra:.1f}", f"{fs:.1f}",
                    f"{sn:.1f}"] for r, n, rs, cs, ra, fs, sn in sizes],
                  ["replicas", "rows", "round s (median)", "solver CPU s (median)",
                   f"{args.rounds} rounds s", "2-worker fit s (blocks built)",
                   f"snapml fit s ({args.rounds} epochs)"]))
        log(f"round time ×{2 * replicas} / ×{replicas}: {sizes[1][2] / sizes[0][2]:.2f}, "
            f"solver CPU time: {sizes[1][3] / sizes[0][3]:.2f} (linear in rows: ≤ 2.2)")
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / f"{args.name}.csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        wr.writeheader()
        wr.writerows(rows)
    (RESULTS / f"{args.name}.txt").write_text("\n".join(log.lines) + "\n")
    log(f"wrote {RESULTS / args.name}.{{txt,csv}}")


if __name__ == "__main__":
    main()
