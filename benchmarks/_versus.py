"""What the scripts that time daskelastic against scikit-learn at two tols share.

``bench_poisson.py`` and ``bench_softmax.py``: modes (solver, setting, tol)
take turns, and each run's samples become one record per mode; these turn
the records into the result file's tables and the docs' summary.  ``param``
is the name of the regularisation parameter swept (``"alpha"``, ``"C"``).
"""

import os
import shlex
import statistics
import sys
from pathlib import Path

import _common as cm


def fmt_tol(tol):
    """``1e-4`` for 0.0001."""
    return f"{tol:.0e}".replace("e-0", "e-")


def daskelastic_dir():
    """Where the daskelastic in use is imported from (also run on the workers)."""
    import daskelastic

    return str(Path(daskelastic.__file__).resolve().parent)


def two_tol_arguments(description, result, param, values, help_values):
    """The command line both scripts share: repeats, the two tols, the swept values,
    ``--no-cluster`` and ``--output``; the caller adds its own and parses."""
    import argparse

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tol", type=float, default=1e-4,
                    help="daskelastic's loose tol (scikit-learn runs at its default)")
    ap.add_argument("--tight", type=float, default=1e-8,
                    help="the tight tol of both solvers")
    ap.add_argument(f"--{param}s", type=lambda s: [float(v) for v in s.split(",")],
                    default=values, help=f"comma-separated (default {help_values})")
    ap.add_argument("--no-cluster", action="store_true",
                    help="skip the LocalCluster of 2 workers (in-process fits only)")
    ap.add_argument("--output", type=Path, default=result, help="the markdown file written")
    return ap


def log_sample(log, param, value, mode, r):
    """One line for the fit ``r`` of ``mode`` (solver, setting, tol label)."""
    solver, setting, tol_label = mode[:3]
    gap = "" if r["gap"] is None else f"gap {r['gap']:.1e}  "
    log(f"  {param}={value:<6g} {solver:12s} {setting:23s} tol={tol_label:15s} "
        f"{r['seconds']:7.3f} s  {r['iters']:4d} it.  {gap}(P − P*)/P* {r['rel']:+.1e}"
        f"{'' if r['converged'] else '  NOT CONVERGED'}")


def take_turns(modes, repeats, sample):
    """``{mode index: [sample(i), ...]}``: the modes take turns ``repeats`` times.

    The order is reversed every other time, so that a drift of the machine's
    speed hits every mode alike.
    """
    samples = {i: [] for i in range(len(modes))}
    for rep in range(repeats):
        order = list(range(len(modes)))
        for i in (order if rep % 2 == 0 else order[::-1]):
            samples[i].append(sample(i))
    return samples


def records(samples, modes, **fields):
    """One record per mode from its samples: medians, and the worst gap and (P − P*)/P*."""
    out = []
    for i, (solver, setting, tol_label, _) in enumerate(modes):
        s = samples[i]
        gaps = [r["gap"] for r in s if r["gap"] is not None]
        out.append(dict(fields, solver=solver, setting=setting, tol=tol_label,
                        seconds=statistics.median(r["seconds"] for r in s),
                        samples=[r["seconds"] for r in s],
                        iters=statistics.median(r["iters"] for r in s),
                        converged=all(r["converged"] for r in s),
                        gap=max(gaps) if gaps else None,
                        rel=max(r["rel"] for r in s)))
    return out


def markdown_table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def headers(param):
    return [param, "solver", "setting", "tol", "s (median)", "samples s",
            "rounds / iterations", "converged", "certified gap", "(P − P*)/P*",
            "× scikit-learn (same tol)"]


def sklearn_seconds(recs, rec, args, param):
    """scikit-learn's median seconds at the tol value ``rec`` was fitted with."""
    want = "1e-4 (default)" if rec["tol"] == fmt_tol(args.tol) else fmt_tol(args.tight)
    for r in recs:
        if (r["table"], r[param], r["solver"], r["tol"]) == (
                rec["table"], rec[param], "scikit-learn", want):
            return r["seconds"]
    return None


def row(recs, rec, args, param):
    sk = None if rec["solver"] == "scikit-learn" else sklearn_seconds(recs, rec, args, param)
    return [f"{rec[param]:g}", rec["solver"], rec["setting"], rec["tol"],
            f"{rec['seconds']:.3f}", " / ".join(f"{s:.2f}" for s in rec["samples"]),
            f"{rec['iters']:g}", "yes" if rec["converged"] else "**no**",
            "—" if rec["gap"] is None else f"{rec['gap']:.1e}", f"{rec['rel']:+.1e}",
            cm.fmt_ratio(rec["seconds"] if sk is not None else None, sk)]


def rst_summary(recs, args, param):
    """The docs' table: per table, ``param`` and setting, medians and ratios at both tols."""
    body = []
    for rec in recs:
        if rec["solver"] != "daskelastic" or rec["tol"] != fmt_tol(args.tol):
            continue
        key = (rec["table"], rec[param], rec["setting"], "daskelastic", fmt_tol(args.tight))
        tight = next(r for r in recs
                     if (r["table"], r[param], r["setting"], r["solver"], r["tol"]) == key)
        sk_loose = sklearn_seconds(recs, rec, args, param)
        sk_tight = sklearn_seconds(recs, tight, args, param)
        body.append([f"{rec['n']:,}", f"{rec[param]:g}", rec["setting"],
                     f"{rec['seconds']:.2f} / {tight['seconds']:.2f}",
                     f"{rec['iters']:g} / {tight['iters']:g}",
                     f"{sk_loose:.2f} / {sk_tight:.2f}",
                     f"{cm.fmt_ratio(rec['seconds'], sk_loose)} / "
                     f"{cm.fmt_ratio(tight['seconds'], sk_tight)}",
                     f"{rec['rel']:.0e} / {tight['rel']:.0e}"])
    return cm.rst_simple_table(
        ["rows", param, "setting", "s", "rounds", "sklearn s", "ratio", "(P − P*)/P*"], body)


def machine_line(env):
    """The machine, the versions and the daskelastic sources of a run, in one line."""
    code = env["daskelastic_code"]
    return (f"{env['time']}, {env['cpus']} cpus, loadavg {env['loadavg']}, "
            f"python {env['python']}, {env['platform']}; "
            + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
            + f"; daskelastic sources sha1 {code['sha1']} "
            f"(newest {code['newest_source']}), imported from {daskelastic_dir()}")


def command_line():
    """The command that ran this script, with the environment variables that matter."""
    command = "python " + " ".join(shlex.quote(a) for a in
                                   [str(Path(sys.argv[0]))] + sys.argv[1:])
    for var in ("PYTHONPATH", "NUMBA_CACHE_DIR"):
        if os.environ.get(var):
            command = f"{var}={shlex.quote(os.environ[var])} {command}"
    return command


def write_report(args, title, param, recs, env, legend, ref_lines, elapsed, log):
    """Log the tables and write the result file ``args.output``."""
    sections = []
    for table in dict.fromkeys(r["table"] for r in recs):
        sel = [r for r in recs if r["table"] == table]
        sections.append(f"### {table}: {sel[0]['n']:,} × {sel[0]['d']} "
                        f"(encoded in {sel[0]['encode_seconds']:.3f} s)\n\n"
                        + markdown_table(headers(param),
                                         [row(recs, r, args, param) for r in sel]))
    body = "\n\n".join(sections)
    rst = rst_summary(recs, args, param)
    tols = f"{fmt_tol(args.tol)} / {fmt_tol(args.tight)}"
    log("\n" + body + "\n\n" + legend + "\n\nReferences:\n" + ref_lines
        + f"\n\nFor the docs (s, rounds, ratio and (P − P*)/P* at tol {tols}):\n\n" + rst
        + f"\n\nthe run took {elapsed:.0f} s")
    machine, command = machine_line(env), command_line()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        f"# {title}: daskelastic against scikit-learn\n\n"
        f"Produced by `{command}` (in the repository root) in {elapsed:.0f} s.\n\n"
        f"Machine: {machine}\n\n{legend}\n\nReferences:\n\n{ref_lines}\n\n{body}\n\n"
        "Summary (as in `docs/benchmarks.rst`; s, rounds, ratio and (P − P*)/P* at tol "
        f"{tols}):\n\n```\n{rst}\n```\n")
    log(f"wrote {args.output}")
