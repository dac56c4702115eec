"""The slices of real tables the suite runs on, loaded once per process."""

import functools

import numpy as np

#: rows of the flights table the solver and fit benchmarks use
FLIGHTS_ROWS = 20_000


@functools.cache
def flights(n_rows=FLIGHTS_ROWS):
    """``(X, y)``: the first ``n_rows`` NYC flights, one-hot CSR, 0/1 late label."""
    from daskelastic.datasets import load_flights

    X, y, _ = load_flights(n_rows)
    return X.tocsr(), np.asarray(y)


@functools.cache
def fertility(n_rows):
    """``(X, Y)``: the first ``n_rows`` rows of the Fertility table, dense, ±1 as a column."""
    from daskelastic.datasets import load_fertility

    X, y, _ = load_fertility()
    X = np.ascontiguousarray(X[:n_rows], dtype=float)
    return X, np.where(np.asarray(y[:n_rows]) == 1, 1.0, -1.0)[:, None]
