"""The docs' ``results-table`` directive reads the tables of the real result files."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

from benchmark_tables import RESULTS, join, read_tables, select  # noqa: E402


def tables_of(name):
    return read_tables((RESULTS / name).read_text(encoding="utf-8"))


def test_a_plain_text_table_is_read_with_its_cells():
    header, rows, _ = tables_of("bench_local_solver.txt")[0]
    assert header[0] == "loss" and header[1] == "epoch ms"
    assert [r[0] for r in rows] == ["logistic", "hinge", "squared_hinge"]


def test_a_markdown_table_keeps_its_heading():
    tables = tables_of("local_solver_history.md")
    prefetch = tables[7]
    assert prefetch.heading == "Prefetching the next bucket"
    assert prefetch.rows[1] == ["CSR, one target, hinge (flights)", "24.8", "16.1", "1.54×"]


def test_a_restructuredtext_table_in_a_code_fence_is_read():
    header, rows, _ = tables_of("poisson.md")[2]
    assert header[:3] == ["rows", "alpha", "setting"]
    assert {r[0] for r in rows} == {"4,406", "110,150"}


def test_rows_are_matched_on_a_named_column():
    table = tables_of("bench_distributed.txt")[0]
    header, rows = select(table, columns=["solver", "10=how"], rows="method=trace.*")
    assert header == ["solver", "how"]
    assert rows and all(r[1].startswith("trace") for r in rows)
    assert "daskelastic 2w rows shuffled" in [r[0] for r in rows]


def test_tables_joined_carry_their_headings_as_a_column():
    joined = join(tables_of("intercept.md")[:3], heading_column="table")
    header, rows = select(joined, columns=["table", "problem", "rounds pen."])
    assert header == ["table", "problem", "rounds pen."]
    assert [r[0] for r in rows][:1] == ["flights"]
    assert {r[0] for r in rows} == {"flights", "Fertility", "diamonds"}


def test_tables_with_other_columns_are_not_joined():
    tables = tables_of("bench_distributed.txt")
    with pytest.raises(ValueError, match="other columns"):
        join(tables[:2])


def _directives(page):
    """``(file, options)`` of each ``results-table`` directive of a page."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    for i, line in enumerate(lines):
        m = re.match(r"\.\. results-table:: (\S+)", line)
        if not m:
            continue
        options, key = {}, None
        for opt in lines[i + 1:]:
            o = re.match(r"   :([\w-]+):\s*(.*)", opt)
            if o:
                key = o.group(1)
                options[key] = o.group(2)
            elif opt.startswith("     ") and key:
                options[key] += " " + opt.strip()
            else:
                break
        found.append((m.group(1), options))
    return found


PAGES_WITH_RESULT_TABLES = ["benchmarks.rst", "simulation.rst", "algorithms.rst"]


@pytest.mark.parametrize(
    "name, options",
    [d for page in PAGES_WITH_RESULT_TABLES for d in _directives(ROOT / "docs" / page)],
    ids=lambda v: v if isinstance(v, str) else "")
def test_every_results_table_of_the_docs_is_in_its_result_file(name, options):
    tables = tables_of(name)
    picked = [tables[int(k) - 1] for k in options.get("table", "1").split(",")]
    columns = [c.strip() for c in options.get("columns", "").split(",") if c.strip()]
    cells = dict(c.strip().split("=", 1) for c in options.get("cells", "").split(",")
                 if c.strip())
    header, rows = select(join(picked, options.get("heading-column")), columns or None,
                          options.get("rows"), cells)
    assert rows and all(len(r) == len(header) for r in rows)
