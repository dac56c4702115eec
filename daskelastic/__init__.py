"""daskelastic: elastic, straggler-resilient training of linear models on Dask."""

from . import config  # noqa: F401  (registers the dask.config defaults)
from .estimators import LinearSVC, LogisticRegression, Ridge
from .scaling import ConvergenceScalingPolicy

__version__ = "0.1.0"

__all__ = ["LogisticRegression", "LinearSVC", "Ridge", "ElasticAdaptive",
           "ConvergenceScalingPolicy", "__version__"]


def __getattr__(name):
    # distributed is imported only when the Adaptive class is asked for
    if name == "ElasticAdaptive":
        from .adaptive import ElasticAdaptive

        return ElasticAdaptive
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
