"""Sphinx configuration of the daskelastic documentation."""

import sys
from pathlib import Path

import daskelastic

# the local extension that reads the Benchmarks page's tables from benchmarks/results/
sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "daskelastic"
author = "The daskelastic developers"
copyright = "2026, The daskelastic developers"  # noqa: A001
release = version = daskelastic.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "benchmark_tables",
]

autosummary_generate = True
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
templates_path = ["_templates"]
numpydoc_validation_checks = {"all", "GL01", "GL02", "ES01", "SA01", "EX01", "RT02",
                              "PR09", "RT05", "SS05", "GL08", "YD01", "SS06", "PR02",
                              "SA04"}
numpydoc_validation_exclude = set()

nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(ndarray|array-like|sparse matrix|dask array|dask dataframe|optional|"
               r"default=.*|of shape.*|callable|RandomState instance|int|float|bool|str|"
               r"dict|list|tuple|None|object)"),
    (r"py:(class|obj)", r"sklearn\..*"),
    (r"py:class", r"numpy\..*"),
    (r"py:class", r"(collections\.abc|os)\..*"),   # type hints; no intersphinx offline
    (r"py:class", r"distributed\..*"),
    # the public API's type hints (daskelastic/_typing.py's aliases, and names
    # imported for the type checker only)
    (r"py:class", r"(MatrixLike|VectorLike|ArrayResult|Self|_Estimator|BaseEstimator|"
                  r"Column|pd\..*|da\..*|dd\..*|sp\..*|npt\..*)"),
]

intersphinx_mapping = {}  # no network at build time

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
}

html_theme = "pydata_sphinx_theme"
html_title = "daskelastic"
html_static_path = ["_static"]
html_theme_options = {"navigation_with_keys": False}
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.md5", "sg_execution_times.rst"]
suppress_warnings = ["config.cache"]


def _skip_metadata_request_methods(app, what, name, obj, skip, options):
    """Hide scikit-learn's generated ``set_*_request`` methods."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return skip


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_request_methods)
