"""Every public name of daskelastic is in the API reference; every entry of it and of the
internals page names a real object."""

import re
from pathlib import Path

import daskelastic

DOCS = Path(__file__).resolve().parents[1] / "docs"
API = DOCS / "api.rst"
INTERNALS = DOCS / "internals.rst"


def _documented(page=API):
    """Fully qualified names listed in the autosummary tables of a docs page."""
    names, module = set(), "daskelastic"
    in_table = False
    for line in page.read_text().splitlines():
        m = re.match(r"\.\. currentmodule:: (\S+)", line)
        if m:
            module = m.group(1)
            continue
        if line.startswith(".. autosummary::"):
            in_table = True
            continue
        if in_table:
            entry = line.strip()
            if not entry or entry.startswith(":"):   # blank line or an option
                continue
            if not line.startswith("   "):            # the table has ended
                in_table = False
                continue
            names.add(f"{module}.{entry}")
    return names


def test_every_public_name_has_a_page_in_the_api_reference():
    documented = _documented()
    public = {f"daskelastic.{n}" for n in daskelastic.__all__ if n != "__version__"}
    missing = sorted(public - documented)
    assert not missing, f"not in docs/api.rst: {missing}"


def test_every_api_entry_names_a_real_object():
    import importlib

    for name in sorted(_documented() | _documented(INTERNALS)):
        module, _, attr = name.rpartition(".")
        while module:
            try:
                obj = importlib.import_module(module)
                break
            except ImportError:
                module, _, head = module.rpartition(".")
                attr = f"{head}.{attr}"
        for part in attr.split("."):
            obj = getattr(obj, part)
        assert obj is not None, name


def test_the_api_page_and_the_internals_page_do_not_overlap():
    assert not _documented() & _documented(INTERNALS)
