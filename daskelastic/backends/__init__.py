"""Backends: where the workers of a fit run (in this process, on Dask, or simulated)."""

from .inprocess import InProcessBackend
from .simulated import SimulatedBackend

__all__ = ["InProcessBackend", "SimulatedBackend"]
