"""daskelastic: elastic, straggler-resilient training of linear models on Dask."""

# first: numba picks a kernel's cache folder when the kernel is defined, and
# this import sets daskelastic's (daskelastic/_kernel_cache.py)
from . import _kernel_cache  # noqa: F401, I001
from . import config  # noqa: F401  (registers the dask.config defaults)
from .estimators import (
    ElasticNet,
    Lasso,
    LinearSVC,
    LogisticRegression,
    PoissonRegressor,
    Ridge,
)
from .monitoring import history_frame, plot_history
from .scaling import ConvergenceScalingPolicy
from .simulation import ClusterEvent, ClusterModel, simulate

__version__ = "0.1.0"

__all__ = ["LogisticRegression", "LinearSVC", "Ridge", "Lasso", "ElasticNet", "PoissonRegressor",
           "ElasticAdaptive",
           "ConvergenceScalingPolicy", "history_frame", "plot_history", "simulate",
           "ClusterModel", "ClusterEvent", "__version__"]


def __getattr__(name):
    # distributed is imported only when the Adaptive class is asked for
    if name == "ElasticAdaptive":
        from .adaptive import ElasticAdaptive

        return ElasticAdaptive
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
