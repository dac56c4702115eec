"""Tables of the Benchmarks page read from ``benchmarks/results/`` when the docs build.

The benchmark scripts write their tables into result files: plain-text tables
(a header, a rule of dashes, the rows; ``benchmarks/_common.py``'s ``table``),
reStructuredText simple tables and Markdown pipe tables.  The directive ::

    .. results-table:: bench_stragglers.txt
       :table: 1
       :columns: scenario, policy, median s=seconds, × wait
       :rows: random4x|heavy-tail
       :cells: random4x=random 4×

renders the ``table``-th table (from 1) of that file, its columns picked and
renamed (``name=shown``, or ``3=shown`` for the third; in the order given; all
of them by default), its rows those whose first cell matches ``rows`` (a
regular expression, all by default; ``column=regex`` matches that column
instead), and the cells named in ``cells`` (``value=shown``) relabelled.

``:table: 1, 2, 3`` puts the rows of several tables with the same columns
one after another, and ``:heading-column: shown`` adds, before the file's
columns, a column ``shown`` holding the Markdown heading (``# …``) above each
row's table, up to its first colon: the ``### flights: logistic regression``
above a table reads ``flights``.  ``:columns:`` can pick that column by
``shown`` like any other.

The cells are the file's, so the page shows what the run printed, and a
rerun shows on the page at the next build.  A file that holds no script's
output (a table gathered from several runs, with the commands and the history
behind it) is a Markdown file in ``benchmarks/results/`` like any other.
"""

import re
from pathlib import Path
from typing import NamedTuple

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"

_RST_RULE = re.compile(r"^=+( +=+)+\s*$")
_TXT_RULE = re.compile(r"^-+( +-+)+\s*$")
_MD_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
_MD_HEADING = re.compile(r"^#+\s+(.*?)\s*$")


class Table(NamedTuple):
    """One table of a result file: its ``header`` and ``rows`` of cell strings, and
    the ``heading`` above it (the last Markdown heading before it, ``""`` if none)."""

    header: list
    rows: list
    heading: str


def _spans(rule):
    """``(start, stop)`` of each column of a rule line (runs of ``=`` or ``-``)."""
    return [m.span() for m in re.finditer(r"[=-]+", rule)]


def _cut(line, spans):
    """The cells of a fixed-width ``line``; the last column takes the rest of the line."""
    cells = []
    for k, (start, _) in enumerate(spans):
        end = spans[k + 1][0] if k + 1 < len(spans) else len(line)
        cells.append(line[start:end].strip())
    return cells


def _md_cells(line):
    """The cells of a Markdown table row (``\\|`` is a ``|`` inside a cell)."""
    cells = re.split(r"(?<!\\)\|", line.strip()[1:-1])
    return [c.strip().replace("\\|", "|") for c in cells]


def read_tables(text):
    """Every table of a result file, in order, as :class:`Table`."""
    lines = text.splitlines()
    tables = []
    heading = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if _RST_RULE.match(line):
            spans = _spans(line)
            header = _cut(lines[i + 1], spans)
            j, rows = i + 3, []
            while j < len(lines) and not _RST_RULE.match(lines[j]):
                rows.append(_cut(lines[j], spans))
                j += 1
            tables.append(Table(header, rows, heading))
            i = j + 1
        elif _TXT_RULE.match(line) and i > 0 and lines[i - 1].strip():
            spans = _spans(line)
            header = _cut(lines[i - 1], spans)
            j, rows = i + 1, []
            while j < len(lines) and lines[j].strip():
                rows.append(_cut(lines[j], spans))
                j += 1
            tables.append(Table(header, rows, heading))
            i = j
        elif _MD_RULE.match(line) and i > 0 and lines[i - 1].startswith("|"):
            header = _md_cells(lines[i - 1])
            j, rows = i + 1, []
            while j < len(lines) and lines[j].startswith("|"):
                rows.append(_md_cells(lines[j]))
                j += 1
            tables.append(Table(header, rows, heading))
            i = j
        else:
            match = _MD_HEADING.match(line)
            if match:
                heading = match.group(1)
            i += 1
    return tables


def join(tables, heading_column=None):
    """One :class:`Table` of the rows of ``tables``, which must have the same
    columns; with ``heading_column``, a first column of that name holding each
    row's table's heading up to its first colon."""
    header = tables[0].header
    for table in tables[1:]:
        if table.header != header:
            raise ValueError(f"tables with other columns: {header} and {table.header}")
    if heading_column:
        header = [heading_column, *header]
        rows = [[t.heading.split(":")[0].strip(), *r] for t in tables for r in t.rows]
    else:
        rows = [r for t in tables for r in t.rows]
    return Table(header, rows, tables[0].heading)


def _column(header, name):
    """The index of column ``name`` (a header cell, or a number from 1) of ``header``."""
    name = name.strip()
    if name.isdigit() and 1 <= int(name) <= len(header):
        return int(name) - 1
    if name in header:
        return header.index(name)
    raise ValueError(f"no column {name!r} in {header}")


def select(table, columns=None, rows=None, cells=None):
    """``(header, rows)`` of ``table`` with the ``columns`` (``name`` or ``name=shown``),
    the rows whose first cell matches the regular expression ``rows`` (or, given as
    ``column=regex``, whose cell in that column does), and the cells that equal a key
    of ``cells`` replaced by its value."""
    header, body = table[:2]
    if cells:
        body = [[cells.get(c, c) for c in r] for r in body]
    if rows:
        name, sep, pattern = rows.partition("=")
        k = 0
        if sep and name.strip() in header:
            k, rows = header.index(name.strip()), pattern
        body = [r for r in body if k < len(r) and re.fullmatch(rows, r[k])]
    if not columns:
        return header, body
    picked, shown = [], []
    for spec in columns:
        name, _, label = spec.partition("=")
        k = _column(header, name)
        picked.append(k)
        shown.append(label.strip() or header[k])
    return shown, [[r[k] if k < len(r) else "" for k in picked] for r in body]


def rst_cell(cell):
    """A result file's cell as reStructuredText: Markdown code spans become literals
    and bold stays bold, the other characters that mean markup are escaped, and an
    empty cell is an escaped space (an empty first cell would continue the row above)."""
    parts = re.split(r"(`[^`]+`|\*\*[^*]+\*\*)", cell)
    out = []
    for k, part in enumerate(parts):
        if k % 2 and part.startswith("`"):
            out.append(f"``{part[1:-1]}``")
        elif k % 2:
            out.append(part)
        else:
            out.append(re.sub(r"([*|\\_])", r"\\\1", part))
    return "".join(out) or "\\ "


def simple_table(header, body):
    """reStructuredText simple-table lines of ``header`` and ``body`` (cells as-is)."""
    widths = [max(len(c) for c in col) for col in zip(header, *body)]
    rule = "  ".join("=" * w for w in widths)

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return [rule, line(header), rule, *(line(r) for r in body), rule]


def _column_list(argument):
    return [c for c in (s.strip() for s in argument.split(",")) if c]


def _table_list(argument):
    return [directives.positive_int(n) for n in _column_list(argument)]


def _cell_map(argument):
    return dict((k.strip(), v.strip()) for k, _, v in
                (pair.partition("=") for pair in _column_list(argument)))


class ResultsTable(Directive):
    """``.. results-table:: FILE`` (see the module)."""

    required_arguments = 1
    option_spec = {"table": _table_list, "columns": _column_list,
                   "rows": directives.unchanged, "cells": _cell_map,
                   "heading-column": directives.unchanged_required}

    def run(self):
        path = RESULTS / self.arguments[0]
        env = self.state.document.settings.env
        env.note_dependency(str(path))
        try:
            tables = read_tables(path.read_text(encoding="utf-8"))
            table = join([tables[k - 1] for k in self.options.get("table", [1])],
                         self.options.get("heading-column"))
            header, body = select(table, self.options.get("columns"),
                                  self.options.get("rows"), self.options.get("cells"))
        except (OSError, IndexError, ValueError) as e:
            raise self.error(f"results-table {self.arguments[0]}: {e}") from e
        if not body:
            raise self.error(f"results-table {self.arguments[0]}: no rows selected")
        header = [rst_cell(c) for c in header]
        body = [[rst_cell(c) for c in row] for row in body]
        node = nodes.container()
        self.state.nested_parse(StringList(simple_table(header, body), str(path)),
                                self.content_offset, node)
        return node.children


def setup(app):
    app.add_directive("results-table", ResultsTable)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
