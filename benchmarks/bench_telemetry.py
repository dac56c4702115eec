"""What watching a fit costs: a Dask fit with and without telemetry.

With ``daskelastic.telemetry: true`` (the default) a Dask fit registers the
dashboard plugin and reads the chunk placement when it starts, publishes a
scheduler event per round (queued on the client's event loop: the driver does
not wait for the scheduler), and waits for its events to be sent when it ends.
This script fits the same logistic regression (real flights rows, one-hot
CSR, ``straggler_policy="wait"`` so that both modes run the same rounds) on a
2-worker LocalCluster, alternating telemetry off and on, and reports

- the median fit time of each mode and their difference (noisy on a shared
  machine: compare it with the spread of the runs);
- the time the fit's own thread spends in telemetry, measured directly
  (start: plugin registration, placement and the start event; each round's
  ``on_round``; the end event and the flush), as a share of the fit time.

Reproduce::

    python benchmarks/bench_telemetry.py            # 40,000 rows, 7 runs per mode
    python benchmarks/bench_telemetry.py --quick    # 10,000 rows, 3 runs per mode

Writes ``results/bench_telemetry[_quick].{txt,json}``.
"""

import argparse
import logging
import statistics
import time
import warnings

import dask
from _common import RESULTS, environment, table, write_json


class Timed:
    """Accumulate the seconds spent in some methods of the FitMonitor class."""

    def __init__(self, cls, names):
        self.cls = cls
        self.originals = {n: getattr(cls, n) for n in names}
        self.seconds = dict.fromkeys(names, 0.0)
        self.calls = dict.fromkeys(names, 0)

    def __enter__(self):
        for name, original in self.originals.items():
            setattr(self.cls, name, self._wrap(name, original))
        return self

    def __exit__(self, *exc):
        for name, original in self.originals.items():
            setattr(self.cls, name, original)

    def _wrap(self, name, original):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - t0
                self.calls[name] += 1
        return timed

    def reset(self):
        for name in self.seconds:
            self.seconds[name] = 0.0
            self.calls[name] = 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10,000 rows, 3 runs per mode")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--runs", type=int, default=None, help="fits per mode")
    args = ap.parse_args(argv)
    rows = args.rows or (10_000 if args.quick else 40_000)
    runs = args.runs or (3 if args.quick else 7)

    from distributed import Client, LocalCluster

    import daskelastic as de
    from daskelastic.datasets import load_flights
    from daskelastic.monitoring import TOPIC, FitMonitor

    lines = []

    def log(msg=""):
        print(msg, flush=True)
        lines.append(msg)

    env = environment()
    log(f"bench_telemetry{' --quick' if args.quick else ''}  {env['time']}  "
        f"cpus={env['cpus']}  loadavg={tuple(round(x, 2) for x in env['loadavg'])}")
    X, y, _ = load_flights(n_rows=rows)
    params = dict(C=0.1, tol=1e-4, max_iter=1000, straggler_policy="wait", backend="dask")
    log(f"flights: {X.shape[0]:,} × {X.shape[1]:,} one-hot CSR; LogisticRegression({params})")
    samples = {"off": [], "on": []}
    rounds = {"off": set(), "on": set()}
    inside = []  # (seconds in telemetry, fit seconds, rounds) of each telemetry-on fit
    timed = Timed(FitMonitor, ["_start_telemetry", "on_round", "finish"])
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client, timed, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        de.LogisticRegression(**{**params, "max_iter": 3}).fit(X, y)  # compile, warm up
        for i in range(runs):
            for mode in ("off", "on") if i % 2 == 0 else ("on", "off"):
                timed.reset()
                events_before = len(client.get_events(TOPIC))
                with dask.config.set({"daskelastic.telemetry": mode == "on"}):
                    t0 = time.perf_counter()
                    clf = de.LogisticRegression(**params).fit(X, y)
                    seconds = time.perf_counter() - t0
                samples[mode].append(seconds)
                rounds[mode].add(len(clf.history_))
                events = len(client.get_events(TOPIC)) - events_before
                spent = sum(timed.seconds.values())
                if mode == "on":
                    inside.append((spent, seconds, len(clf.history_), dict(timed.seconds)))
                log(f"  run {i + 1} telemetry {mode:3s}: {seconds:6.2f} s, "
                    f"{len(clf.history_)} rounds, {events} events, "
                    f"{1e3 * spent:6.1f} ms in the monitor")

    med = {m: statistics.median(s) for m, s in samples.items()}
    spread = {m: (min(s), max(s)) for m, s in samples.items()}
    n_rounds = max(rounds["on"])
    share = statistics.median(s / f for s, f, _, _ in inside)
    per_round = statistics.median(parts["on_round"] / r for _, _, r, parts in inside)
    start = statistics.median(parts["_start_telemetry"] for *_, parts in inside)
    finish = statistics.median(parts["finish"] for *_, parts in inside)
    log()
    log(table([
        ["off", len(samples["off"]), f"{med['off']:.3f}",
         f"{spread['off'][0]:.2f}–{spread['off'][1]:.2f}", "—"],
        ["on", len(samples["on"]), f"{med['on']:.3f}",
         f"{spread['on'][0]:.2f}–{spread['on'][1]:.2f}",
         f"{100 * (med['on'] - med['off']) / med['off']:+.1f}%"],
    ], ["telemetry", "runs", "median fit s", "range s", "vs off"]))
    log()
    log(table([
        ["start (plugin, placement, start event)", f"{1e3 * start:.1f} ms"],
        ["per round (on_round: entry → queue)", f"{1e6 * per_round:.0f} µs"],
        ["end (end event, flush)", f"{1e3 * finish:.1f} ms"],
        ["share of the fit time (median)", f"{100 * share:.2f}%"],
    ], ["time in the fit's thread", ""]))
    log(f"\n{n_rounds} rounds per fit (same in both modes: {rounds['on'] == rounds['off']})")
    name = "bench_telemetry" + ("_quick" if args.quick else "")
    result = {"env": env, "rows": rows, "params": params, "samples": samples,
              "median": med, "overhead_median": (med["on"] - med["off"]) / med["off"],
              "inside_share": share, "inside_start_s": start, "inside_per_round_s": per_round,
              "inside_finish_s": finish, "rounds": n_rounds}
    write_json(RESULTS / f"{name}.json", result)
    (RESULTS / f"{name}.txt").write_text("\n".join(lines) + "\n")
    log(f"wrote {RESULTS / name}.{{json,txt}}")


if __name__ == "__main__":
    main()
