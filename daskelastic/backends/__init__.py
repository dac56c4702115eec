"""Backends: where the workers of a fit run (in this process, or on Dask)."""

from .inprocess import InProcessBackend

__all__ = ["InProcessBackend"]
