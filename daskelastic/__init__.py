"""daskelastic: elastic, straggler-resilient training of linear models on Dask."""

from . import config  # noqa: F401  (registers the dask.config defaults)
from .estimators import LinearSVC, LogisticRegression, Ridge
from .monitoring import history_frame, plot_history
from .simulation import ClusterEvent, ClusterModel, simulate

__version__ = "0.1.0"

__all__ = ["LogisticRegression", "LinearSVC", "Ridge", "history_frame", "plot_history",
           "simulate", "ClusterModel", "ClusterEvent", "__version__"]
