"""Shared helpers of the benchmark scripts (not a benchmark itself).

- loading the flights table and encoding it for the objective,
- the reference optimum ``P*`` (cached in ``results/reference_optima.json``),
- tolerance sweeps ("time to relative suboptimality ε": the fastest fit, over
  a sweep of a solver's own ``tol``, whose primal is within ε of ``P*``),
- reading the same quantity off a daskelastic ``history_``,
- plain-text tables and environment notes.
"""

import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
REFERENCE_CACHE = RESULTS / "reference_optima.json"


# -- data and objective --------------------------------------------------------
class Problem:
    """The flights table with its ±1 targets and the normalised primal."""

    def __init__(self, n_rows=None, C=1.0):
        from daskelastic.datasets import load_flights

        t0 = time.perf_counter()
        X, y, _ = load_flights(n_rows=n_rows)
        X.sort_indices()
        self._set(X, y, C, time.perf_counter() - t0)

    def _set(self, X, y, C, load_seconds):
        self.load_seconds = load_seconds
        self.X, self.y = X, y
        self.n, self.d = X.shape
        self.C = float(C)
        self.lam = 1.0 / (self.C * self.n)
        self.Y = (2.0 * y - 1.0)[:, None]
        self.sw = np.ones(self.n)
        self.key = f"flights_n{self.n}_C{self.C:g}"

    @classmethod
    def from_arrays(cls, X, y, C=1.0):
        """A problem on given rows (e.g. a slice of a loaded table)."""
        self = cls.__new__(cls)
        self._set(X, y, C, 0.0)
        return self

    def head(self, n_rows, C=None):
        """The first ``n_rows`` rows as a problem (same columns)."""
        return Problem.from_arrays(self.X[:n_rows], self.y[:n_rows],
                                   self.C if C is None else C)

    def primal(self, loss, w):
        """``P(w)`` of the normalised problem (no intercept)."""
        from daskelastic.objective import primal_objective

        w = np.asarray(w, dtype=float).ravel()[: self.d].reshape(-1, 1)
        return primal_objective(loss, self.X, self.Y, self.sw, w, self.lam)


def coef_of(model):
    """The coefficient vector of a fitted linear model (binary)."""
    return np.asarray(model.coef_, dtype=float).ravel()


# -- reference optimum -----------------------------------------------------------
def _tight_liblinear(prob, loss):
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    if loss == "logistic":
        m = LogisticRegression(C=prob.C, solver="liblinear", tol=1e-10, max_iter=100000,
                               fit_intercept=False)
    else:
        m = LinearSVC(C=prob.C, loss=loss, dual=True, tol=1e-10, max_iter=100000,
                      fit_intercept=False)
    return m.fit(prob.X, prob.y)


def _tight_daskelastic(prob, loss):
    from daskelastic import LinearSVC, LogisticRegression

    kw = dict(C=prob.C, tol=1e-9, max_iter=5000, fit_intercept=False,
              backend="inprocess", random_state=0)
    if loss == "logistic":
        return LogisticRegression(**kw).fit(prob.X, prob.y)
    return LinearSVC(loss=loss, **kw).fit(prob.X, prob.y)


def reference_optimum(prob, loss, recompute=False, log=print):
    """``P*``: the best primal of a tight liblinear and a tight daskelastic fit.

    Cached in ``results/reference_optima.json`` by table size, C and loss.
    """
    key = f"{prob.key}_{loss}"
    cache = {}
    if REFERENCE_CACHE.exists():
        cache = json.loads(REFERENCE_CACHE.read_text())
    if key in cache and not recompute:
        log(f"  P*[{loss}] = {cache[key]['p_star']:.12g} (cached in {REFERENCE_CACHE.name})")
        return cache[key]["p_star"]
    entry = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fit in [("liblinear tol=1e-10", _tight_liblinear),
                          ("daskelastic tol=1e-9", _tight_daskelastic)]:
            t0 = time.perf_counter()
            m = fit(prob, loss)
            entry[name] = {"primal": prob.primal(loss, coef_of(m)),
                           "seconds": time.perf_counter() - t0}
            log(f"  reference {loss:<13} {name:<22} P = {entry[name]['primal']:.12g} "
                f"({entry[name]['seconds']:.1f} s)")
    p_star = min(v["primal"] for v in entry.values())
    entry["p_star"] = p_star
    entry["spread"] = (max(v["primal"] for k, v in entry.items() if k != "p_star")
                       - p_star) / p_star
    cache = json.loads(REFERENCE_CACHE.read_text()) if REFERENCE_CACHE.exists() else {}
    cache[key] = entry
    RESULTS.mkdir(exist_ok=True)
    REFERENCE_CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True))
    log(f"  P*[{loss}] = {p_star:.12g}; the two references differ by "
        f"{entry['spread']:.1e} (relative)")
    return p_star


# -- time to a target suboptimality ---------------------------------------------
class FitFailed(Exception):
    pass


def timed_fit(fit):
    """Run ``fit()`` (returns a coefficient vector or a model); return (seconds, result)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        out = fit()
        return time.perf_counter() - t0, out


def tol_sweep(prob, loss, p_star, make_fit, tols, targets, *, max_fit_seconds=120.0,
              repeats=3, repeat_budget=30.0, log=print, label="", sample_extra=None):
    """Fit over ``tols`` (loose → tight) until the tightest target is met.

    ``make_fit(tol)`` returns a zero-argument callable that fits and returns
    the model.  For each target ε the fastest sweep fit with
    ``(P − P*)/P* ≤ ε`` wins; it is re-run (up to ``repeats`` samples in all,
    while its samples took less than ``repeat_budget`` seconds) and the
    median time is reported.

    ``sample_extra(model, eps)``, when given, is stored for every sample of a
    winner (``"extras"``), e.g. a time read off the model's history.

    Returns ``{"points": [...], "targets": {ε: {...} or None}}``.
    """
    points = []
    targets = sorted(targets, reverse=True)
    for tol in tols:
        seconds, model = timed_fit(make_fit(tol))
        p = prob.primal(loss, coef_of(model))
        sub = (p - p_star) / p_star
        extra = {}
        if hasattr(model, "history_"):
            extra["rounds"] = int(np.ravel(model.n_iter_)[0])
            extra["history"] = compact_history(model.history_)
        points.append({"tol": tol, "seconds": seconds, "primal": p, "subopt": sub, **extra,
                       "_model": model})
        log(f"    {label:<28} tol={tol:<8g} {seconds:8.2f} s  subopt={sub:9.2e}")
        # a tighter tol usually costs several times more: stop a sweep whose
        # last fit already took a fifth of the per-fit budget
        if sub <= targets[-1] or seconds > max_fit_seconds / 5:
            break
    out = {"points": points, "targets": {}}
    winners = {}
    for eps in targets:
        ok = [pt for pt in points if pt["subopt"] <= eps]
        if not ok:
            out["targets"][eps] = None
            continue
        best = min(ok, key=lambda pt: pt["seconds"])
        if best["tol"] not in winners:
            samples, models = [best["seconds"]], [best["_model"]]
            while len(samples) < repeats and sum(samples) < repeat_budget:
                seconds, model = timed_fit(make_fit(best["tol"]))
                samples.append(seconds)
                models.append(model)
            winners[best["tol"]] = samples, models
        samples, models = winners[best["tol"]]
        rec = {"tol": best["tol"], "seconds": statistics.median(samples),
               "samples": samples, "subopt": best["subopt"]}
        if sample_extra is not None:
            rec["extras"] = [sample_extra(m, eps) for m in models]
        out["targets"][eps] = rec
    for pt in points:
        del pt["_model"]
    return out


def compact_history(history):
    """The history fields the benchmarks use (JSON-friendly)."""
    return [{"round": h["round"], "time": h["time"], "primal": h["primal"],
             "duality_gap": h["duality_gap"], "n_workers": h["n_workers"],
             "worker_seconds": dict(h["worker_seconds"])} for h in history]


def history_time_to(history, p_star, eps):
    """Seconds (since the fit loop began) of the first round whose primal meets ε.

    A history entry's ``primal`` is ``P`` of the round's *start* iterate, and
    its ``time`` is when that round's results (and so the certificate) were in:
    a fit with the right ``tol`` would return that iterate at about that time.
    """
    for h in history:
        if (h["primal"] - p_star) / p_star <= eps:
            return h["time"]
    return None


def round_breakdown(history):
    """Mean wall seconds per round vs the workers' solver seconds."""
    walls, maxes, sums = [], [], []
    prev = 0.0
    for h in history:
        ws = list(h["worker_seconds"].values())
        walls.append(h["time"] - prev)
        prev = h["time"]
        if ws:
            maxes.append(max(ws))
            sums.append(sum(ws))
    # round 0 also carries the loop's start-up; the last one may be gap-only
    sel = slice(1, None) if len(walls) > 2 else slice(None)
    wall = float(np.mean(walls[sel]))
    mx = float(np.mean(maxes[sel]))
    sm = float(np.mean(sums[sel]))
    return {"rounds": len(history), "wall_per_round": wall, "max_worker_seconds": mx,
            "sum_worker_seconds": sm, "overhead_per_round": wall - mx,
            "overhead_fraction": (wall - mx) / wall if wall > 0 else float("nan")}


# -- output ------------------------------------------------------------------------
def table(rows, headers):
    """A plain-text table (list of lists of str)."""
    cols = list(zip(*([headers] + rows))) if rows else [[h] for h in headers]
    widths = [max(len(str(c)) for c in col) for col in cols]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths)),
             "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    return "\n".join(lines)


def rst_simple_table(headers, body):
    """A reStructuredText simple table (lists of str), ready for the docs."""
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(headers)]
    rule = "  ".join("=" * w for w in widths)

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return "\n".join([rule, line(headers), rule, *(line(b) for b in body), rule])


def fmt_s(x):
    return "—" if x is None else f"{x:.3g}"


def fmt_ratio(x, ref):
    if x is None or ref is None or ref <= 0:
        return "—"
    return f"{x / ref:.2f}×"


def code_fingerprint():
    """sha1 of daskelastic's sources (the project has no commits to point at)."""
    import hashlib

    import daskelastic

    root = Path(daskelastic.__file__).resolve().parent
    h = hashlib.sha1()
    files = sorted(p for p in root.rglob("*") if p.suffix in (".py", ".yaml"))
    for p in files:
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    newest = max(p.stat().st_mtime for p in files)
    return {"sha1": h.hexdigest()[:12],
            "newest_source": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(newest))}


def preload_daskelastic():
    """Import every daskelastic module now, so a fit late in a long run uses the
    same code (and configuration) as one early in it."""
    import importlib
    import pkgutil

    import daskelastic

    for mod in pkgutil.walk_packages(daskelastic.__path__, "daskelastic."):
        if not mod.name.endswith("__main__"):
            importlib.import_module(mod.name)


def environment():
    import importlib.metadata as md

    vers = {}
    for pkg in ["daskelastic", "numpy", "scipy", "numba", "scikit-learn", "dask",
                "distributed", "dask-ml", "dask-glm", "sparse", "snapml"]:
        try:
            vers[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            vers[pkg] = None
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count()
    return {"python": sys.version.split()[0], "platform": platform.platform(),
            "cpus": cpus, "loadavg": os.getloadavg(), "versions": vers,
            "daskelastic_code": code_fingerprint(),
            "time": time.strftime("%Y-%m-%d %H:%M:%S")}


def run_name(name, seed, losses, all_losses):
    """``name`` for the default run (seed 0, every loss), else ``name_seed<N>_<losses>``.

    Runs with other seeds or a subset of the losses are kept beside the
    default one instead of overwriting it.
    """
    if seed == 0 and list(losses) == list(all_losses):
        return name
    return f"{name}_seed{seed}_" + "_".join(losses)


def write_results(name, results, csv_rows, log, plot, title):
    """Write ``results/<name>.{json,csv,txt,png}``; a failing plot keeps the numbers."""
    import csv

    RESULTS.mkdir(exist_ok=True)
    base = RESULTS / name
    write_json(base.with_suffix(".json"), results)
    with open(base.with_suffix(".csv"), "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(csv_rows[0]) if csv_rows else ["loss"])
        wr.writeheader()
        wr.writerows(csv_rows)
    base.with_suffix(".txt").write_text("\n".join(log.lines) + "\n")
    try:
        plot(results, base.with_suffix(".png"), title)
    except Exception as e:  # plotting must not lose the numbers
        log(f"plot failed: {type(e).__name__}: {e}")
    log(f"wrote {base}.{{json,csv,txt,png}}")


def save_figure(fig, path, title):
    """Title, lay out and write a results figure (110 dpi, as every plot here)."""
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def read_results(names):
    """The JSON results of earlier runs, by name (``results/<name>.json``), in order."""
    import json

    return [json.loads((RESULTS / f"{n}.json").read_text()) for n in names]


def start_log(name):
    """``(log, env)``: a :class:`Tee` that has printed the run's header, and :func:`environment`."""
    log = Tee()
    env = environment()
    log(f"{name}  {env['time']}  cpus={env['cpus']}  loadavg={env['loadavg']}  "
        f"daskelastic sources {env['daskelastic_code']['sha1']}")
    return log, env


def add_turn_args(ap, rounds, warmup):
    """``--targets``, ``--rounds`` and ``--warmup`` of a run whose variants take turns by round."""
    ap.add_argument("--targets", type=int, default=1, help="one-vs-rest columns (1: the label)")
    ap.add_argument("--rounds", type=int, default=rounds, help="timed rounds per variant")
    ap.add_argument("--warmup", type=int, default=warmup, help="untimed rounds first")


def start_turns(name, targets):
    """``(name, log, env, prob)`` of a run of ``add_turn_args``: its log started, flights loaded.

    Runs with several targets are named ``<name>_m<targets>``.
    """
    name = name + ("" if targets == 1 else f"_m{targets}")
    log, env = start_log(name)
    return name, log, env, Problem(C=1.0)


def paired_bar_plot(path, title, labels, series, ylabel, line=None):
    """Write a plot of two variants' bars side by side for each of ``labels``.

    ``series`` maps each variant to its values; ``line``, if given, is
    ``(y, label)`` of a dashed horizontal line.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    x = np.arange(len(labels))
    for k, (variant, values) in enumerate(series.items()):
        ax.bar(x + (k - 0.5) * 0.38, values, 0.38, label=variant)
    if line is not None:
        ax.axhline(line[0], color="grey", lw=0.8, ls="--", label=line[1])
    ax.set_xticks(x, labels)
    ax.set_ylabel(ylabel)
    ax.legend()
    save_figure(fig, path, title)


def targets_of(prob, m):
    """``prob``'s ±1 label as one column, or ``m`` one-vs-rest columns by row number mod ``m``."""
    if m == 1:
        return prob.Y
    return np.where(np.arange(prob.n)[:, None] % m == np.arange(m), 1.0, -1.0)


def write_json(path, obj):
    RESULTS.mkdir(exist_ok=True)

    def default(o):
        if isinstance(o, (np.floating, np.integer)):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
        return str(o)

    Path(path).write_text(json.dumps(obj, indent=1, default=default))


class Tee:
    """Print and keep the lines (for the results file)."""

    def __init__(self):
        self.lines = []

    def __call__(self, *args):
        s = " ".join(str(a) for a in args)
        print(s, flush=True)
        self.lines.append(s)
