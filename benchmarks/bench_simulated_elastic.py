"""Fixed K against "convergence" scale-in on 64, 256 and 1,024 simulated workers.

What it measures: L2-regularised logistic regression (C = 0.01, with intercept,
daskelastic's defaults otherwise) on the full flights table (327,346 × 4,198
one-hot CSR, the loader of ``bench_simulated.py``), fitted with
``daskelastic.simulate`` — the real driver, elastic controller, scaling
policy and SDCA solvers, timed on a virtual clock — until the certified
relative duality gap is at most ``--tol`` (1e-3).  For every starting size S
it compares fixed fits on K = S, S/2, S/4, ... down to ``--min-fixed``
workers with ``scaling_policy="convergence"`` starting at S, and reports the
*virtual* time to the target, the cost in worker-seconds, the rounds, the
number of workers at the target and the ratios against the best fixed K
(the fastest, and the cheapest, chosen in hindsight).  Fixed fits are run
once per K and shared by every starting size they belong to.

The cluster model (:class:`daskelastic.ClusterModel`, the settings of
``bench_simulated.py``): compute at ``--rate`` seconds per stored value and
target visited (1.5e-7 for the committed results, ~1.2 µs per flights row),
0.5 ms one-way latency, 10 Gbit/s links, 1 ms dispatch overhead per worker
and round, price 1 per worker-second, identical workers and by default no
stragglers (``--stragglers random heavy`` adds the models of
``bench_simulated.py``).  So a round on K workers takes about
``(n/K) · 1.2 µs + 2 ms`` (compute + dispatch + ``w`` out and ``Δw`` back):
more workers stop shortening rounds once the ~2 ms of per-round overhead
dominates (K ≳ 256), while CoCoA+ needs more rounds the more workers share
the data (the subproblems' ``σ′ = K``).  That is where scale-in can pay.
Scale-in moves the released workers' chunks, with their ``α``, over the
network (one latency plus the busiest link's bytes over the bandwidth), and
a released worker stops being billed when its chunks have left; every fixed
worker is billed for the whole fit.

Fits stop at ``--max-rounds``; a fit that did not reach the target is shown
as "—".  The run is deterministic for a given rate.

Reproduce (the committed results ran as separate processes, then merged)::

    cd benchmarks
    PYTHONPATH=.. python bench_simulated_elastic.py --sizes 64 256 --rate 1.5e-7 \\
        --name simulated_elastic_small
    PYTHONPATH=.. python bench_simulated_elastic.py --sizes 1024 --fixed 1024 512 \\
        --rate 1.5e-7 --name simulated_elastic_1024
    PYTHONPATH=.. python bench_simulated_elastic.py --name simulated_elastic \\
        --combine simulated_elastic_small simulated_elastic_1024
    # plain CoCoA+ (no acceleration), closer to Kaufmann et al.'s setting:
    PYTHONPATH=.. python bench_simulated_elastic.py --acceleration none \\
        --max-rounds 400 --rate 1.5e-7 --name simulated_elastic_plain
    # the policy with a 10-round window (compare with the fixed fits above):
    PYTHONPATH=.. python bench_simulated_elastic.py --fixed --window 10 \\
        --rate 1.5e-7 --name simulated_elastic_window10
"""

import argparse
import time
import warnings

import numpy as np
from _common import Tee, environment, read_results, rst_simple_table, table, write_results
from bench_simulated import _i, _s, calibrate, cluster, straggler_models

SIZES = (64, 256, 1024)


def fixed_sizes(start, smallest):
    """``start, start/2, ...`` down to ``smallest`` (the fixed K compared with ``start``)."""
    out, k = [], int(start)
    while k >= max(int(smallest), 1):
        out.append(k)
        k //= 2
    return out


def scaling_policy(args):
    """``"convergence"``, or a policy instance when the benchmark tunes its parameters."""
    from daskelastic.scaling import ConvergenceScalingPolicy

    params = {k: getattr(args, k) for k in ("window", "threshold", "wait_count", "factor",
                                             "warmup") if getattr(args, k) is not None}
    return ConvergenceScalingPolicy(**params) if params else "convergence"


def run(X, y, K, model_name, stragglers, label, policy, rate, tol, max_rounds, C,
        acceleration="auto"):
    """One fit on ``K`` virtual workers; ``policy`` is None (fixed K) or a scaling policy."""
    from daskelastic import LogisticRegression, simulate

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # fits capped at max_rounds
        clf = simulate(LogisticRegression(C=C, tol=tol, max_iter=max_rounds,
                                          random_state=0, acceleration=acceleration),
                       X, y, cluster(K, stragglers, rate), scaling_policy=policy)
    wall = time.perf_counter() - t0
    h = clf.history_
    hit = next((e for e in h if e["duality_gap"] <= tol), None)
    scale_ins = [(e["round"], ev["from"], ev["to"], ev["seconds"])
                 for e in h for ev in e["events"] if ev["event"] == "scale_in"]
    return {
        "K": K, "stragglers": model_name, "config": label,
        "time": None if hit is None else hit["time"],
        "rounds": None if hit is None else hit["round"],
        "cost": None if hit is None else hit["cost"],
        "final_K": (hit or h[-1])["n_workers"],
        "final_gap": h[-1]["duality_gap"], "rounds_run": len(h),
        "scale_ins": scale_ins,
        "move_seconds": float(sum(s[3] for s in scale_ins)),
        "wall": wall,
        "curve": [(e["time"], e["duality_gap"], e["cost"], e["n_workers"]) for e in h],
    }


def groups(rows, min_fixed):
    """``(start S, stragglers, fixed rows K ≤ S, elastic row)`` for every studied start."""
    out = []
    for r in rows:
        if r["config"] != "convergence":
            continue
        fixed = sorted((f for f in rows if f["config"] == "fixed"
                        and f["stragglers"] == r["stragglers"]
                        and min_fixed <= f["K"] <= r["K"]), key=lambda f: -f["K"])
        out.append((r["K"], r["stragglers"], fixed, r))
    return sorted(out, key=lambda g: (g[0], g[1]))


def summarise(rows, min_fixed, log):
    verdicts = []
    for S, m, fixed, elastic in groups(rows, min_fixed):
        reached = [f for f in fixed if f["time"] is not None]
        fastest = min(reached, key=lambda f: f["time"], default=None)
        cheapest = min(reached, key=lambda f: f["cost"], default=None)
        same = next((f for f in fixed if f["K"] == S), None)
        log(f"\nstarting at K = {S}, stragglers = {m}")
        body = []
        for r in [*fixed, elastic]:
            label = f"fixed K={r['K']}" if r["config"] == "fixed" else \
                f"convergence from {S}"
            body.append([label, _s(r["time"]), _i(r["rounds"]), _s(r["cost"]),
                         str(r["final_K"]),
                         _ratio(fastest and fastest["time"], r["time"]),
                         _ratio(cheapest and cheapest["cost"], r["cost"]),
                         f"{r['final_gap']:.2g}", f"{r['wall']:.0f}"])
        log(table(body, ["configuration", "virtual s to tol", "rounds", "cost (worker-s)",
                         "K at tol", "speed vs fastest fixed", "cost saving vs cheapest",
                         "final gap", "wall s"]))
        if elastic["scale_ins"]:
            path = [S] + [s[2] for s in elastic["scale_ins"]]
            log(f"K path {path}, scale-ins after rounds "
                f"{[s[0] for s in elastic['scale_ins']]}; chunk moves took "
                f"{elastic['move_seconds']:.3g} virtual s in all")
        else:
            log("the policy never scaled in")
        v = {"start": S, "stragglers": m,
             "fastest_fixed": fastest and fastest["K"],
             "cheapest_fixed": cheapest and cheapest["K"],
             "speedup_vs_fastest": _div(fastest and fastest["time"], elastic["time"]),
             "cost_ratio_vs_cheapest": _div(cheapest and cheapest["cost"], elastic["cost"]),
             "speedup_vs_same_K": _div(same and same["time"], elastic["time"]),
             "cost_ratio_vs_same_K": _div(same and same["cost"], elastic["cost"])}
        verdicts.append(v)
        log(f"convergence vs fastest fixed (K={v['fastest_fixed']}): "
            f"{_x(v['speedup_vs_fastest'])} the speed; vs cheapest fixed "
            f"(K={v['cheapest_fixed']}): {_x(v['cost_ratio_vs_cheapest'])} its cost "
            f"saving (> 1: convergence cheaper); vs fixed K={S}: "
            f"{_x(v['speedup_vs_same_K'])} the speed, {_x(v['cost_ratio_vs_same_K'])} "
            f"cheaper")
        if same is not None and same["time"] is None:
            t_end, cost_end = same["curve"][-1][0], same["curve"][-1][2]
            log(f"(fixed K={S} did not reach the target in {same['rounds_run']} rounds: "
                f"convergence is over {t_end / elastic['time']:.2f}× faster and "
                f"{cost_end / elastic['cost']:.2f}× cheaper)")
    return verdicts


def rst_table(rows, min_fixed):
    """The study as a reStructuredText table (for docs/benchmarks.rst).

    Each fixed K once, then the convergence fits with their speed against the
    fastest fixed K no larger than their start, and their speed and cost
    against the fixed fit on their starting K.
    """
    body = []
    for r in sorted((r for r in rows if r["config"] == "fixed"),
                    key=lambda r: (r["stragglers"], -r["K"])):
        body.append([f"fixed K={r['K']}", r["stragglers"], _s(r["time"]),
                     _i(r["rounds"]), _s(r["cost"]), str(r["final_K"]), "", "", ""])
    for S, m, fixed, elastic in groups(rows, min_fixed):
        reached = [f for f in fixed if f["time"] is not None]
        fastest = min(reached, key=lambda f: f["time"], default=None)
        same = next((f for f in fixed if f["K"] == S), None)
        body.append([f"convergence from {S}", m, _s(elastic["time"]),
                     _i(elastic["rounds"]), _s(elastic["cost"]), str(elastic["final_K"]),
                     _ratio(fastest and fastest["time"], elastic["time"])
                     + ("" if fastest is None else f" (K={fastest['K']})"),
                     _ratio(same and same["time"], elastic["time"]),
                     _ratio(same and same["cost"], elastic["cost"])])
    headers = ["configuration", "stragglers", "virtual s", "rounds", "cost (worker-s)",
               "K at tol", "speed vs fastest fixed", "speed vs fixed start",
               "cost saving vs fixed start"]
    return rst_simple_table(headers, body)


def _div(ref, x):
    return None if ref is None or x is None or x <= 0 else ref / x


def _x(v):
    return "—" if v is None else f"{v:.2f}×"


def _ratio(ref, x):
    return _x(_div(ref, x))


def plot(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = groups(results["rows"], results["min_fixed"])
    fig, axes = plt.subplots(2, len(found), squeeze=False,
                             figsize=(4.4 * len(found), 6.4))
    for j, (S, m, fixed, elastic) in enumerate(found):
        top, bottom = axes[0][j], axes[1][j]
        colours = plt.cm.viridis(np.linspace(0, 0.9, max(len(fixed), 1)))
        for r, c in zip(fixed, colours):
            t, g, cost, _ = zip(*r["curve"])
            top.semilogy(t, g, color=c, lw=1.0, label=f"fixed K={r['K']}")
            bottom.loglog(t, cost, color=c, lw=1.0)
        t, g, cost, k = zip(*elastic["curve"])
        top.semilogy(t, g, color="crimson", lw=2.0, label=f"convergence from {S}")
        bottom.loglog(t, cost, color="crimson", lw=2.0)
        for rnd, *_ in elastic["scale_ins"]:
            top.axvline(elastic["curve"][rnd][0], color="crimson", lw=0.5, ls="--")
        top.axhline(results["tol"], color="k", lw=0.6, ls=":")
        top.set_title(f"start K = {S}, "
                      f"{'no' if m == 'none' else m} stragglers", fontsize=9)
        top.set_xlabel("virtual seconds")
        top.set_ylabel("relative duality gap")
        top.set_ylim(results["tol"] / 3, 2)
        top.set_xscale("log")
        top.legend(fontsize=6)
        bottom.set_xlabel("virtual seconds")
        bottom.set_ylabel("cost so far (worker-seconds)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES),
                        help="starting sizes of the convergence fits")
    parser.add_argument("--fixed", type=int, nargs="*", default=None,
                        help="fixed K to run (default: every size from each start down "
                             "to --min-fixed)")
    parser.add_argument("--min-fixed", type=int, default=1)
    parser.add_argument("--stragglers", nargs="+", default=["none"])
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--C", type=float, default=0.01)
    parser.add_argument("--max-rounds", type=int, default=300)
    parser.add_argument("--rate", type=float, default=None,
                        help="seconds per stored value (default: calibrated here)")
    parser.add_argument("--n-rows", type=int, default=None)
    parser.add_argument("--acceleration", choices=["auto", "none"], default="auto",
                        help="'none': plain CoCoA+, as in Kaufmann et al.")
    for name, kind in (("window", int), ("threshold", float), ("wait-count", int),
                       ("factor", float), ("warmup", int)):
        parser.add_argument(f"--{name}", type=kind, default=None,
                            help="a ConvergenceScalingPolicy parameter (default: the "
                                 "policy's own)")
    parser.add_argument("--name", default="simulated_elastic")
    parser.add_argument("--combine", nargs="+", default=None,
                        help="merge the results of earlier runs (names) into --name")
    args = parser.parse_args(argv)
    if args.combine:
        return combine(args)

    from daskelastic.datasets import load_flights

    log = Tee()
    X, y, _ = load_flights(n_rows=args.n_rows)
    X.sort_indices()
    rate = args.rate or calibrate(X, y)
    policy = scaling_policy(args)
    env = environment()
    log(f"# simulated scale-in study — {env['time']}, {env['cpus']} cpus, "
        f"daskelastic code {env['daskelastic_code']}")
    log(f"table: flights {X.shape[0]} × {X.shape[1]} (nnz {X.nnz}); C {args.C:g}; "
        f"tol {args.tol:g}; rate {rate:.3g} s per stored value; max {args.max_rounds} "
        f"rounds; acceleration {args.acceleration}; scaling policy {policy!r}")
    models = {"none": None, **straggler_models()}
    todo = sorted({k for S in args.sizes for k in fixed_sizes(S, args.min_fixed)}
                  if args.fixed is None else set(args.fixed), reverse=True)
    rows = []
    for m in args.stragglers:
        jobs = [(S, "convergence", policy) for S in args.sizes] + \
            [(K, "fixed", None) for K in todo]
        for K, label, pol in jobs:
            r = run(X, y, K, m, models[m], label, pol, rate, args.tol, args.max_rounds,
                    args.C, None if args.acceleration == "none" else "auto")
            rows.append(r)
            log(f"K={K:5d} {m:<7} {label:<12} time {_s(r['time']):>9}  rounds "
                f"{_i(r['rounds']):>4}  cost {_s(r['cost']):>9}  K at tol "
                f"{r['final_K']:>5}  gap {r['final_gap']:.2g}  wall {r['wall']:.0f} s")
    finish(args.name, rows, args.tol, rate, args.C, args.min_fixed, repr(policy),
           args.acceleration, env, log)


def finish(name, rows, tol, rate, C, min_fixed, policy, acceleration, env, log):
    verdicts = summarise(rows, min_fixed, log)
    csv_rows = [{k: v for k, v in r.items() if k != "curve"} for r in rows]
    results = {"rows": rows, "tol": tol, "rate": rate, "C": C, "min_fixed": min_fixed,
               "policy": policy, "acceleration": acceleration, "environment": env,
               "verdicts": verdicts}
    log("\n" + rst_table(rows, min_fixed))
    write_results(name, results, csv_rows, log, plot,
                  f"flights, logistic C={C:g}: fixed K vs convergence scale-in "
                  f"(rate {rate:.2g} s per stored value)")


def combine(args):
    """One table, csv and plot from the runs ``args.combine`` (run separately)."""
    log = Tee()
    parts = read_results(args.combine)
    seen, rows = set(), []
    for p in parts:
        for r in p["rows"]:
            key = (r["K"], r["stragglers"], r["config"])
            if key not in seen:
                seen.add(key)
                rows.append(r)
    first = parts[0]
    env = first["environment"]
    log(f"# simulated scale-in study — {env['time']}, {env['cpus']} cpus, "
        f"daskelastic code {env['daskelastic_code']} (merged from {', '.join(args.combine)})")
    # results written before the acceleration was recorded: take --acceleration
    acceleration = first.get("acceleration", args.acceleration)
    log(f"table: flights 327346 × 4198; C {first['C']:g}; tol {first['tol']:g}; "
        f"rate {first['rate']:.3g} s per stored value; acceleration {acceleration}; "
        f"scaling policy {first['policy']}")
    finish(args.name, rows, first["tol"], first["rate"], first["C"], first["min_fixed"],
           first["policy"], acceleration, env, log)


if __name__ == "__main__":
    main()
