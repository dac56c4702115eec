"""Defaults of daskelastic, in ``dask.config`` under the ``daskelastic`` key.

Every knob can be set in a Dask YAML config file, an environment variable
(``DASK_DASKELASTIC__EMBEDDED_THRESHOLD=0``) or in code::

    import dask
    with dask.config.set({"daskelastic.chunks-per-worker": 8}):
        clf.fit(X, y)
"""

import os

import dask.config
import yaml

__all__ = ["get"]

_fn = os.path.join(os.path.dirname(__file__), "daskelastic.yaml")
with open(_fn) as f:
    _defaults = yaml.safe_load(f)
dask.config.update_defaults(_defaults)


def get(key):
    """Return the configured value of ``daskelastic.<key>``.

    The value comes from ``dask.config``: the package defaults
    (``daskelastic/daskelastic.yaml``) unless a config file, an environment
    variable or ``dask.config.set`` overrides them.

    Parameters
    ----------
    key : str
        Key under ``daskelastic``, dotted for nested keys
        (``"elastic.rebalance-gain"``).

    Returns
    -------
    object
        The configured value.

    Raises
    ------
    KeyError
        When no value is set for the key.

    Examples
    --------
    >>> import daskelastic.config
    >>> daskelastic.config.get("chunks-per-worker")
    4
    >>> import dask
    >>> with dask.config.set({"daskelastic.elastic.rebalance-gain": 0.5}):
    ...     daskelastic.config.get("elastic.rebalance-gain")
    0.5
    """
    return dask.config.get(f"daskelastic.{key}")
