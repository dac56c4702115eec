"""The fault matrix: every fault at every moment of a fit, each on a fresh cluster.

Faults: a worker SIGKILLed, a worker SIGSTOPped for 5 s, a worker joining, the
client's connection to the scheduler cut for a second.  Moments: while the
data loads, once it loaded (before the scheduler hears where), a warm start
setting the dual values, during a round, two of three workers, the gap-only
pass, a chunk move, a retirement, the one worker a scale-in kept (see
:mod:`faults`).  Each fit runs in a thread bounded by a timeout: it must
end — at the optimum, or with a certified gap after ``max_iter`` for the
gap-only pass — and leave no state, keys or plugins behind.
``python tests/faults.py`` prints the same matrix as a table.

Slow: run with ``nox -s slow`` (or ``pytest -m slow``).
"""

import numpy as np
import pytest

import daskelastic as de

from faults import FAULTS, MOMENTS, run_cell

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")]


@pytest.fixture(scope="module")
def table(flights_small):
    X, y = flights_small
    keep = np.asarray((X != 0).sum(axis=0)).ravel() >= 20
    return X[:, keep].tocsr(), y


@pytest.fixture(scope="module")
def optimum(table):
    return de.LogisticRegression(C=0.5, penalize_intercept=True, tol=1e-10,
                                 max_iter=10000, backend="inprocess") \
        .fit(*table).history_[-1]["primal"]


@pytest.mark.parametrize("moment", list(MOMENTS))
@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_at_any_moment_ends_the_fit_at_the_optimum_and_clean(table, optimum, fault,
                                                                     moment):
    cell = run_cell(table, optimum, fault, moment, timeout=240)
    assert cell["outcome"] != "HANG", cell
    assert not cell["outcome"].startswith("error"), cell.get("traceback", cell)
    assert cell["hit"], f"the {fault} did not land at {moment}"
    if moment == "gap-pass":
        assert cell["outcome"] == "max_iter (certified)"
        assert cell["suboptimality"] <= cell["gap"] + 1e-9
    else:
        assert cell["outcome"] == "converged"
        assert cell["suboptimality"] <= 1e-6
    assert cell["clean"], cell
