"""Where a hinge-loss SDCA epoch's time goes: stripped-down kernels against the real one.

Issue 2 asks for a local epoch within 2.5× of one ``X @ w`` + ``Xᵀ r`` pass
(the memory-bound limit).  This script takes the CSR hinge epoch apart on the
flights table (327,346 × 4,198, 7 non-zeros per row, C = 1, σ′ = 1, no
intercept), timing in one run, for each visiting order, kernels that do ever
more of the real work:

- ``touch``: read each visited row's non-zeros, label and dual value (the
  memory traffic of the order, no arithmetic on ``w``);
- ``dot``: the row's dot product with ``w`` (gathers from ``w``);
- ``dot + step``: and the clipped hinge step, without updating ``w``;
- ``full, branch``: and the update of ``w``, skipped when the step is 0
  (daskelastic's CSR kernels did so until this script was written);
- ``full, no branch``: the update after every step;
- ``daskelastic``: the library's own kernel (``solvers.sdca_chunk``: two dot
  products, for ``w`` and ``Δw``, the gap terms, the stop flag, the prefetch
  of the next bucket).

Orders: a sequential sweep, buckets of 64 and of 16 consecutive rows (the
library's ``BUCKET_ROWS``) in a random order, and a fully random order (the
packed rows are already shuffled, so every order visits random rows; they
differ in memory locality).  The stripped kernels are plain numba functions
defined here, started from the dual state after three committed epochs of the
real kernel, so that as many steps land on a bound as in a fit (42%).

Reproduce::

    python benchmarks/bench_kernel_anatomy.py      # ~1 minute

Writes ``benchmarks/results/bench_kernel_anatomy.{txt,csv,json,png}``.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as cm  # noqa: E402


# Each kernel is spelled out, not built from shared helpers: each one is what
# its column measures, and a call (even an inlined one) could change the code.
@njit(cache=True)
def _touch(data, ind, ptr, Y, a, w, v, order, inv):
    t = 0.0
    for s in range(order.shape[0]):
        i = order[s]
        for p in range(ptr[i], ptr[i + 1]):
            t += data[p] + ind[p]
        t += Y[i] + a[i]
    return t


@njit(cache=True)
def _dot(data, ind, ptr, Y, a, w, v, order, inv):
    t = 0.0
    for s in range(order.shape[0]):
        i = order[s]
        z = 0.0
        for p in range(ptr[i], ptr[i + 1]):
            z += data[p] * w[ind[p]]
        t += z * Y[i] + a[i]
    return t


@njit(cache=True)
def _dot_step(data, ind, ptr, Y, a, w, v, order, inv):
    t = 0.0
    for s in range(order.shape[0]):
        i = order[s]
        z = 0.0
        q = 0.0
        for p in range(ptr[i], ptr[i + 1]):
            x = data[p]
            q += x * x
            z += x * w[ind[p]]
        y = Y[i]
        b = min(max(a[i] * y + (1.0 - y * z) / (q * inv), 0.0), 1.0)
        t += y * b - a[i]
    return t


@njit(cache=True)
def _full_branch(data, ind, ptr, Y, a, w, v, order, inv):
    for s in range(order.shape[0]):
        i = order[s]
        z = 0.0
        q = 0.0
        for p in range(ptr[i], ptr[i + 1]):
            x = data[p]
            q += x * x
            z += x * v[ind[p]]
        y = Y[i]
        delta = y * min(max(a[i] * y + (1.0 - y * z) / (q * inv), 0.0), 1.0) - a[i]
        if delta != 0.0:
            a[i] += delta
            coef = delta * inv
            for p in range(ptr[i], ptr[i + 1]):
                v[ind[p]] += coef * data[p]
    return 0.0


@njit(cache=True)
def _full_no_branch(data, ind, ptr, Y, a, w, v, order, inv):
    for s in range(order.shape[0]):
        i = order[s]
        z = 0.0
        q = 0.0
        for p in range(ptr[i], ptr[i + 1]):
            x = data[p]
            q += x * x
            z += x * v[ind[p]]
        y = Y[i]
        delta = y * min(max(a[i] * y + (1.0 - y * z) / (q * inv), 0.0), 1.0) - a[i]
        a[i] += delta
        coef = delta * inv
        for p in range(ptr[i], ptr[i + 1]):
            v[ind[p]] += coef * data[p]
    return 0.0


KERNELS = {"touch": _touch, "dot": _dot, "dot + step": _dot_step,
           "full, branch": _full_branch, "full, no branch": _full_no_branch}


def orders(n, rng):
    """``{name: row order}`` of the visiting orders compared."""
    def bucketed(size):
        out = np.empty(n, dtype=np.int64)
        pos = 0
        for b in rng.permutation(-(-n // size)):
            rows = np.arange(b * size, min(b * size + size, n))
            out[pos:pos + rows.size] = rows
            pos += rows.size
        return out

    return {"sequential": np.arange(n, dtype=np.int64), "buckets of 64": bucketed(64),
            "buckets of 16": bucketed(16), "random": rng.permutation(n).astype(np.int64)}


def measure(repeats):
    """``{order: {kernel: ms}}`` and the pass's ms, all in this process."""
    from daskelastic.datasets import load_flights
    from daskelastic.losses import LOSSES
    from daskelastic.solvers import sdca_chunk

    X, labels, _ = load_flights()
    rng = np.random.default_rng(0)
    perm = rng.permutation(X.shape[0])            # packed rows are shuffled rows
    X = X.tocsr()[perm]
    X.sort_indices()
    y = np.where(labels[perm] == 1, 1.0, -1.0)
    n, d = X.shape
    C = 1.0                                       # 1/(λn) = C with λ = 1/(C n)
    hinge = LOSSES["hinge"]
    Y2, sw = y[:, None], np.ones(n)
    alpha, w = np.zeros((n, 1)), np.zeros((d + 1, 1))
    stop, empty = np.zeros(1, np.int32), np.empty((0, 1))

    def real_epoch(order):
        dalpha, dw, sums = np.zeros_like(alpha), np.zeros_like(w), np.zeros(4)
        t = time.perf_counter()
        sdca_chunk(X, Y2, sw, alpha, dalpha, w, dw, loss=hinge, inv_lam_n=C, sigma=1.0,
                   intercept_scaling=0.0, order=order, stop=stop, sums=sums,
                   margins=empty, logits=empty)
        return time.perf_counter() - t, dalpha, dw

    for _ in range(3):                            # a state as in a fit
        _, dalpha, dw = real_epoch(np.arange(n, dtype=np.int64))
        alpha += dalpha
        w += dw
    at_bound = float(np.mean((alpha[:, 0] * y == 0.0) | (alpha[:, 0] * y == 1.0)))
    data, ind, ptr = X.data, X.indices, X.indptr
    a0, w0 = alpha[:, 0].copy(), w[:d, 0].copy()
    r = np.ones(n)
    ms = {}
    pass_ms = []
    for name, order in orders(n, rng).items():
        times = {k: [] for k in [*KERNELS, "daskelastic"]}
        for _ in range(repeats + 1):              # the first turn compiles
            t = time.perf_counter()
            X @ w0
            X.T @ r
            pass_ms.append(time.perf_counter() - t)
            for kname, kernel in KERNELS.items():
                a, v = a0.copy(), w0.copy()
                t = time.perf_counter()
                kernel(data, ind, ptr, y, a, w0, v, order, C)
                times[kname].append(time.perf_counter() - t)
            times["daskelastic"].append(real_epoch(order)[0])
        ms[name] = {k: 1e3 * float(np.median(v[1:])) for k, v in times.items()}
    return ms, 1e3 * float(np.median(pass_ms[1:])), at_bound, (n, d, X.nnz)


def plot(results, path, title):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    kernels = list(next(iter(results["ms"].values())))
    x = np.arange(len(kernels))
    width = 0.8 / len(results["ms"])
    for j, (order, row) in enumerate(results["ms"].items()):
        ax.bar(x + j * width, [row[k] / results["pass_ms"] for k in kernels], width,
               label=order)
    ax.axhline(2.5, color="k", ls="--", lw=1, label="issue 2's target (2.5×)")
    ax.set_xticks(x + 0.4 - width / 2, kernels, fontsize=8)
    ax.set_ylabel("epoch / (X@w + Xᵀr)")
    ax.legend(fontsize=8)
    cm.save_figure(fig, path, title)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    cm.preload_daskelastic()
    log, env = cm.start_log("bench_kernel_anatomy")
    ms, pass_ms, at_bound, (n, d, nnz) = measure(args.repeats)
    log(f"flights: {n} × {d}, nnz={nnz}, hinge, C=1, σ′=1; {at_bound:.0%} of the dual "
        f"values at a bound after 3 epochs; median of {args.repeats} epochs; one "
        f"X@w + Xᵀr pass {pass_ms:.2f} ms")
    kernels = list(next(iter(ms.values())))
    rows, csv_rows = [], []
    for order, row in ms.items():
        rows.append([order] + [f"{row[k]:.1f} ({row[k] / pass_ms:.1f}×)" for k in kernels])
        csv_rows += [{"order": order, "kernel": k, "ms": row[k], "pass_ms": pass_ms}
                     for k in kernels]
    log("\nms per epoch (× the pass)")
    log(cm.table(rows, ["order"] + kernels))
    results = {"env": env, "repeats": args.repeats, "pass_ms": pass_ms,
               "at_bound": at_bound, "ms": ms}
    cm.write_results("bench_kernel_anatomy", results, csv_rows, log, plot,
                     f"hinge epoch anatomy, flights, {env['cpus']} cpus")


if __name__ == "__main__":
    main()
