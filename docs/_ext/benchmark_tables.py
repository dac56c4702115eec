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
of them by default), its
rows those whose first cell matches ``rows`` (a regular expression, all by
default), and the cells named in ``cells`` (``value=shown``) relabelled.  The
cells are the file's, so the page shows what the run printed, and a rerun
shows on the page at the next build.
"""

import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.statemachine import StringList

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"

_RST_RULE = re.compile(r"^=+( +=+)+\s*$")
_TXT_RULE = re.compile(r"^-+( +-+)+\s*$")
_MD_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


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
    """Every table of a result file, in order, as ``(header, rows)`` of cell strings."""
    lines = text.splitlines()
    tables = []
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
            tables.append((header, rows))
            i = j + 1
        elif _TXT_RULE.match(line) and i > 0 and lines[i - 1].strip():
            spans = _spans(line)
            header = _cut(lines[i - 1], spans)
            j, rows = i + 1, []
            while j < len(lines) and lines[j].strip():
                rows.append(_cut(lines[j], spans))
                j += 1
            tables.append((header, rows))
            i = j
        elif _MD_RULE.match(line) and i > 0 and lines[i - 1].startswith("|"):
            header = _md_cells(lines[i - 1])
            j, rows = i + 1, []
            while j < len(lines) and lines[j].startswith("|"):
                rows.append(_md_cells(lines[j]))
                j += 1
            tables.append((header, rows))
            i = j
        else:
            i += 1
    return tables


def select(table, columns=None, rows=None, cells=None):
    """``(header, rows)`` of ``table`` with the ``columns`` (``name`` or ``name=shown``),
    the rows whose first cell matches the regular expression ``rows``, and the
    cells that equal a key of ``cells`` replaced by its value."""
    header, body = table
    if cells:
        body = [[cells.get(c, c) for c in r] for r in body]
    if rows:
        body = [r for r in body if re.fullmatch(rows, r[0])]
    if not columns:
        return header, body
    picked, shown = [], []
    for spec in columns:
        name, _, label = spec.partition("=")
        name = name.strip()
        if name.isdigit() and 1 <= int(name) <= len(header):
            k = int(name) - 1
        elif name in header:
            k = header.index(name)
        else:
            raise ValueError(f"no column {name!r} in {header}")
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


def _cell_map(argument):
    return dict((k.strip(), v.strip()) for k, _, v in
                (pair.partition("=") for pair in _column_list(argument)))


class ResultsTable(Directive):
    """``.. results-table:: FILE`` (see the module)."""

    required_arguments = 1
    option_spec = {"table": directives.positive_int, "columns": _column_list,
                   "rows": directives.unchanged, "cells": _cell_map}

    def run(self):
        path = RESULTS / self.arguments[0]
        env = self.state.document.settings.env
        env.note_dependency(str(path))
        try:
            tables = read_tables(path.read_text(encoding="utf-8"))
            table = tables[self.options.get("table", 1) - 1]
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
