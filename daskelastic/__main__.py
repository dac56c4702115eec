"""Command line: ``python -m daskelastic demo``.

The demo fits a logistic regression on a real table (327,346 NYC flights of
2013, one-hot encoded: will a flight arrive more than 15 minutes late?) on a
LocalCluster started for it, and prints the dashboard address, the rounds,
the certified duality gap and the test accuracy.
"""

import argparse
import logging
import sys
import time

__all__ = ["main"]


def _demo(args):
    import numpy as np
    from distributed import Client, LocalCluster

    import daskelastic as de
    from daskelastic.datasets import load_flights

    t0 = time.perf_counter()
    X, y, names = load_flights(n_rows=args.rows)
    rng = np.random.default_rng(0)
    test = rng.random(X.shape[0]) < 0.2
    X_train, y_train, X_test, y_test = X[~test], y[~test], X[test], y[test]
    print(f"data: {X.shape[0]:,} flights × {X.shape[1]:,} one-hot features "
          f"({X.nnz:,} non-zeros), {y.mean():.1%} late; "
          f"loaded in {time.perf_counter() - t0:.1f}s", flush=True)
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        print(f"cluster: {len(client.scheduler_info()['workers'])} workers, "
              f"dashboard at {client.dashboard_link}", flush=True)
        clf = de.LogisticRegression(C=args.C, tol=args.tol, max_iter=args.max_iter,
                                    client=client, verbose=args.verbose)
        t1 = time.perf_counter()
        clf.fit(X_train, y_train)
        seconds = time.perf_counter() - t1
    h = clf.history_[-1]
    print(f"fit: {clf.n_iter_[0]} rounds on {h['n_workers']} workers in {seconds:.1f}s")
    print(f"duality gap: {clf.duality_gap_:.2e} (relative; certified bound on the "
          f"primal suboptimality), primal {h['primal']:.6f}")
    print(f"test accuracy: {clf.score(X_test, y_test):.4f} "
          f"(always 'on time': {1 - y_test.mean():.4f})")
    return 0


def main(argv=None):
    """Run the ``daskelastic`` command line."""
    parser = argparse.ArgumentParser(prog="python -m daskelastic",
                                     description="Elastic CoCoA+ training on Dask.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="fit a real table on an embedded LocalCluster")
    demo.add_argument("--workers", type=int, default=2, help="worker processes (2)")
    demo.add_argument("--rows", type=int, default=None, help="use only the first rows")
    demo.add_argument("--C", type=float, default=0.1, help="inverse regularisation (0.1)")
    demo.add_argument("--tol", type=float, default=1e-3, help="relative duality gap (1e-3)")
    demo.add_argument("--max-iter", type=int, default=500, help="rounds at most (500)")
    demo.add_argument("--verbose", type=int, default=0, help="print every round when 1")
    args = parser.parse_args(argv)
    for name in ("workers", "max_iter"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.C <= 0 or args.tol < 0:
        parser.error("--C must be positive and --tol non-negative")
    return _demo(args)


if __name__ == "__main__":
    sys.exit(main())
